#!/bin/bash
# The docker provider against Podman's API service run rootless: `podman system service` as
# the test's ordinary uid, in a user namespace of its own with the subordinate ids run.sh grants
# that uid (tests/helpers/podman.sh): the shared verb checks (previews through sbx's forwarder
# with its token too), exec -u of another uid (mapped through them), --net open (rootless
# Podman's network: a bridge in a network namespace of its own, linked to this host's by
# slirp4netns, which opens /dev/net/tun: run.sh grants it to the uid pass where it is root's
# alone), its egress (another sandbox's server reached, the host's loopback not; controls: the
# same from --net none, and from a container Podman lets reach the host's loopback), --net
# allow= refused, pause refused in one line (cgroup v1: a rootless container has no cgroup), and
# nothing of the service left once it is stopped (no process in its user namespace, its network
# namespaces held by none). As root the file skips: root's Podman service is t0721's.
# run.sh: subordinate ids for the uid pass
# run.sh: /dev/net/tun for the uid pass
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
. "$TEST_DIR/helpers/podman.sh"

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
NET_WHY=
if [ "$(id -u)" -eq 0 ]; then
	TEST_SKIP_ALL="rootless Podman runs as an ordinary user (root's Podman service: t0721)"
elif ! "$SBX" provider ls 2>/dev/null | grep -q "^docker "; then
	TEST_SKIP_ALL="this sbx has no docker provider"
elif ! podman_start "$TRASH/podman"; then
	TEST_SKIP_ALL=$PODMAN_WHY
else
	NET_WHY=$(podman_net_why)
fi
export DOCKER_HOST=${PODMAN_HOST:-}

cid() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

# a test that needs rootless Podman's network (skipped, with the reason, where it has none)
net_test() {
	if [ -n "$NET_WHY" ] && [ -z "$TEST_SKIP_ALL" ]; then
		test_skip "$1" "$NET_WHY"
	else
		test_expect_success "$1" "$2"
	fi
}

# sh -c SCRIPT inside sandbox $1: an HTTP GET of http://$2/$3 with busybox's nc (its wget
# crashes where /etc/resolv.conf exists), 5 s at most; the answer on stdout
http_get() {
	sbx exec "$1" sh -c 'printf "GET /$2 HTTP/1.0\r\n\r\n" | nc -w 5 ${1%:*} ${1#*:}' sh "$2" "$3"
}

# whether sandbox $1 gets "from-srv" from http://$2/hello
reached() { http_get "$1" "$2" hello 2>/dev/null | grep -qx from-srv; }

# the sandbox's address on its network
addr_of() {
	sbx exec "$1" sh -c "ip -o -4 addr show scope global" |
		sed -n 's/.* inet \([0-9.]*\)\/.*/\1/p' | head -n 1
}

test_expect_success 'set-up: a busybox image in the rootless service' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	pdm load -q -i base.tar >/dev/null
'

test_expect_success 'rootless: the service is this uid, its containers in a user namespace it maps' '
	test_eq true "$(pdm info --format "{{.Host.Security.Rootless}}" 2>/dev/null)" &&
	sbx create --provider docker --image base:1 --name rl >/dev/null &&
	pdm ps --format "{{.ID}}" --no-trunc >ps && test_grep "$(cid rl)" ps &&
	sbx exec rl cat /proc/self/uid_map >map &&
	test_grep -E "^ +0 +$(id -u) +1$" map &&
	test_eq 0 "$(sbx exec rl id -u)"
'

test_expect_success 'rootless: exec -u of another uid runs as that uid (a subordinate id outside)' '
	if ! grep -q "^$(id -u):" /etc/subuid 2>/dev/null; then
		echo "no subordinate ids for uid $(id -u) in /etc/subuid (tests/run.sh grants some)"
		false
	fi &&
	test_eq 1000 "$(sbx exec -u 1000 rl id -u)" &&
	sbx exec rl cat /proc/self/uid_map >map && test_eq 2 "$(wc -l <map)"
'

net_test 'rootless --net open: an address and a default route (slirp4netns in the service user namespace); --net none: loopback alone' '
	sbx create --provider docker --image base:1 --name opn --net open --port 8080 >/dev/null &&
	test_match "^10\.[0-9.]+$" "$(addr_of opn)" &&
	sbx exec opn sh -c "ip route" >route && test_grep "^default via " route &&
	test_eq lo "$(sbx exec rl ls /sys/class/net)" &&
	podman_in_userns "$(podman_userns)" >pids &&
	for p in $(cat pids); do tr "\0" " " <"/proc/$p/cmdline"; echo; done >cmds &&
	test_grep -E "^/[a-z/]*slirp4netns .*--disable-host-loopback" cmds
'

net_test 'rootless --net open: a server of another sandbox is reached over the network; control: not from --net none' '
	sbx create --provider docker --image base:1 --name srv --net open >/dev/null &&
	sbx exec srv sh -c "mkdir -p /tmp/w && echo from-srv >/tmp/w/hello" &&
	sbx exec -d srv httpd -f -p 8080 -h /tmp/w >/dev/null &&
	ip=$(addr_of srv) && test -n "$ip" &&
	wait_until 20 reached opn "$ip:8080" &&
	http_get opn "$ip:8080" hello >out && test_grep -x "from-srv" out &&
	{ http_get rl "$ip:8080" hello >out 2>err; test_eq 1 $? "from --net none"; } &&
	test ! -s out && test_grep "unreachable" err
'

# a server of the test's on the host's loopback (slirp4netns's 10.0.2.2 is that loopback where
# a container may reach it)
if [ -z "$TEST_SKIP_ALL" ] && [ -z "$NET_WHY" ]; then
	"$TEST_PYTHON" "$TEST_DIR/helpers/netsrv.py" --bind 127.0.0.1 --ready "$TRASH/hostlo.ready" \
		hostlo:http:0 2>"$TRASH/hostlo.log" &
	test_atexit "stop_pid $!"
fi

net_test 'rootless --net open: the host loopback is not reached (a server of this test on 127.0.0.1); control: a container Podman lets reach it' '
	wait_until 20 test -s hostlo.ready && port=$(sed -n "s/^hostlo=//p" hostlo.ready) &&
	{ http_get opn "10.0.2.2:$port" hello >out 2>err; rc=$?; } &&
	test_ne 0 "$rc" "a connection to the host loopback" && test ! -s out &&
	test_grep ! "GET /hello" hostlo.log &&
	pdm run --rm --network slirp4netns:allow_host_loopback=true base:1 sh -c \
		"printf \"GET /hello HTTP/1.0\r\n\r\n\" | nc -w 10 10.0.2.2 $port" >out &&
	test_grep -x "hello from hostlo" out && test_eq 1 "$(grep -c "GET /hello" hostlo.log)"
'

test_expect_success 'rootless: --net allow= (an allow list Podman cannot hold) refused in one line, nothing made' '
	n=$(pdm ps -aq | wc -l) &&
	expect_code 125 sbx create --provider docker --image base:1 --name alw \
		--net allow=example.com 2>err &&
	expect_one_error_line err "^sbx: error: .*docker.*--net allow" &&
	expect_code 125 sbx inspect alw 2>/dev/null && test_eq "$n" "$(pdm ps -aq | wc -l)"
'

# the freezer of cgroup v1 is not the user's: a rootless container cannot be paused here
VERBS_SKIP="pause-memory"
VERBS_WHY_pause_memory="rootless Podman on cgroup v1 has no freezer of its own (checked below)"
VERBS_MORE="start-fail timeout-procs preview"
VERBS_PREVIEW_CREATE="--net open --port 8080"
if [ -n "$NET_WHY" ]; then
	VERBS_SKIP="$VERBS_SKIP preview"
	VERBS_WHY_preview=$NET_WHY
fi
verbs_suite podman-rootless --provider docker --image base:1

test_expect_success 'rootless: pause refused in one line (cgroup v1: no cgroup of its own), the sandbox running on' '
	expect_code 125 sbx pause rl 2>err &&
	expect_one_error_line err "^sbx: error: cannot pause .*rootless.*cgroup V1" &&
	test_eq running "$(sb_state rl)" && test_eq ok "$(sbx exec rl echo ok)"
'

test_expect_success 'stopped: no process left in its user namespace (slirp4netns, rootlessport, conmon), its network namespaces held by none' '
	ns=$(podman_userns) && test -n "$ns" && pause=$(podman_pause_pid) &&
	nets= && if [ -z "$NET_WHY" ]; then
		p=$(pdm inspect -f "{{.State.Pid}}" "$(cid opn)") &&
		nets="$(readlink "/proc/$p/ns/net") $(pdm unshare --rootless-netns readlink /proc/self/ns/net)" &&
		podman_in_userns "$ns" >pids &&
		for p in $(cat pids); do tr "\0" " " <"/proc/$p/cmdline"; echo; done >cmds &&
		test_grep "slirp4netns" cmds && test_grep "^rootlessport" cmds
	fi &&
	sbx rm -f $(sbx ls -q) >/dev/null && test -z "$(pdm ps -aq)" && test -z "$(sbx ls -q)" &&
	podman_stop &&
	test -z "$(podman_in_userns "$ns")" && test -z "$(podman_leftovers)" &&
	! pid_alive "$pause" &&
	for n in $nets; do
		for p in /proc/[0-9]*; do
			test "$(readlink "$p/ns/net" 2>/dev/null)" != "$n" ||
				{ echo "$n is held by ${p#/proc/}"; return 1; }
		done
	done
'

test_done
