#!/bin/bash
# --runtime gvisor on the local provider: the shared verb checks (tests/helpers/verbs.sh) on a
# gVisor sandbox on the host's view and on an image, then what is gVisor's own: the runtime
# inspect reports, gVisor's kernel inside, egress through sbx's proxy allowed and refused (with
# the log), --net none, previews with and without their token, pause with a process that stands
# still, the host out of reach, the refusals of what gVisor does not take, --image and
# pause --release (SIGTERM sent by gVisor to the processes inside, never by the host to gVisor's
# own; a paused sandbox's once thawed; what ignores it ends after --grace), volumes, the limits held inside gVisor with the sandbox alive (--memory, --pids-limit,
# --cpus), a boot that does not finish, a gVisor kernel that ends (the sandbox in error), and
# no runsc process left after rm. As root and as another uid alike (runsc runs as sandbox root
# inside the sandbox's user namespace either way). The escape checks against gVisor are
# t0800's and t0810's; --secret's, t0540's.
# The whole file runs in a network namespace of its own (tests/helpers/testnet.sh), whose
# servers at 192.0.2.2 (public) and 10.77.0.2 (private) play the internet.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies; VERBS_* are
# read by verbs.sh
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/helpers/verbs.sh
. "$TEST_DIR/helpers/verbs.sh"
test_skip_unless USERNS python3 curl
[ -x "${SBX_RUNSC:-/usr/bin/runsc}" ] || TEST_SKIP_ALL="no runsc (scripts/install-deps installs it)"

# ns_members PID: how many processes are in the pid namespace of PID (a sandbox's init: runsc's
# sentry and gofer live there)
ns_members() {
	local ns p n=0
	ns=$(readlink "/proc/$1/ns/pid") || {
		echo 0
		return
	}
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] && n=$((n + 1))
	done
	echo "$n"
}
# runsc_named ID: runsc's sentries of the sandbox ID (its container id)
runsc_named() { pgrep -f "^runsc-sandbox .* $1\$" 2>/dev/null | wc -l; }

HELPERS=$TEST_DIR/helpers
if [ -z "$TEST_SKIP_ALL" ] && ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	mkdir -p www
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$TN_WEB" --ready inet.ready \
		--root www --lifetime 240 web:http:80 2>inet.log
	test_atexit "stop_pid $TN_BG"
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$TN_PRIV" --ready priv.ready \
		--root www --lifetime 240 priv:http:80 2>priv.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s inet.ready
	wait_until 10 test -s priv.ready
fi

# verbs.sh: what gVisor's runsc here cannot do, and why
VERBS_SKIP="cp"
VERBS_WHY_cp="Debian's runsc 0.0~20221219 answers statx with AT_NO_AUTOMOUNT (coreutils stat, ls) with EINVAL; cp is checked below with python's stat"
if [ "$(id -u)" -ne 0 ]; then
	VERBS_SKIP="$VERBS_SKIP user"
	VERBS_WHY_user="an ordinary user's sandbox maps its own uid alone unless /etc/subuid gives it more (t0160)"
fi
verbs_suite gvisor --runtime gvisor

# the same checks on an image (busybox's tools: its stat works where coreutils' does not)
test_expect_success 'set-up: a busybox image' '
	"$TEST_PYTHON" "$HELPERS/mkimage.py" --out bb.tar --format oci-archive \
		--name localhost/gvbb:1 --preset busybox >/dev/null &&
	sbx image import bb.tar >/dev/null
'
VERBS_SKIP="detach pause-memory"
[ "$(id -u)" -eq 0 ] || VERBS_SKIP="$VERBS_SKIP user"
verbs_suite gvisor-image --runtime gvisor --image localhost/gvbb:1

pystat='import os, stat, sys; print(oct(stat.S_IMODE(os.lstat(sys.argv[1]).st_mode))[2:])'

test_expect_success 'create --runtime gvisor: inspect says so, gVisor runs inside' '
	sbx create --name g1 --runtime gvisor --net allow=$TN_WEB >id1 &&
	sbx inspect g1 >j &&
	json_assert j "assert r[\"runtime\"] == \"gvisor\" and r[\"state\"] == \"running\", r" &&
	sbx exec g1 dmesg >dm && test_grep -i gvisor dm &&
	test_eq 4.4.0 "$(sbx exec g1 uname -r)" &&
	sbx create --name l1 >/dev/null && sbx inspect l1 >lj &&
	json_assert lj "assert r[\"runtime\"] == \"local\", r" &&
	test_ne 4.4.0 "$(sbx exec l1 uname -r)" && sbx rm -f l1 >/dev/null
'

test_expect_success 'provider ls --json lists the runtime' '
	sbx provider ls --json >p &&
	json_assert p "assert [x for x in r if x[\"name\"] == \"local\"][0][\"runtimes\"] == [\"gvisor\"], r"
'

test_expect_success 'cp in and out: modes, a link, 20 MiB (gVisor sees what cp wrote)' '
	mkdir -p src/sub && printf x >src/f && chmod 750 src/f && ln -s f src/l &&
	printf y >src/sub/g && head -c 20971520 /dev/urandom >src/big &&
	sbx cp src g1:/workspace/ &&
	test_eq 750 "$(sbx exec g1 python3 -c "$pystat" /workspace/src/f)" &&
	test_eq f "$(sbx exec g1 readlink /workspace/src/l)" &&
	test_eq "$(md5sum <src/big)" "$(sbx exec g1 sh -c "md5sum </workspace/src/big")" &&
	sbx exec g1 sh -c "echo made inside >/workspace/src/in; chmod 604 /workspace/src/in" &&
	sbx cp g1:/workspace/src back && cmp src/big back/big && test -L back/l &&
	test_eq "made inside" "$(cat back/in)" && test_eq 604 "$(stat -c %a back/in)" &&
	expect_code 125 sbx cp g1:/workspace/missing x 2>err && test_eq 1 "$(wc -l <err)"
'

test_expect_success 'egress: an allowed host through the proxy, a refused one logged (control)' '
	test_eq "hello from web" "$(sbx exec g1 curl -fsS http://$TN_WEB/hello)" &&
	expect_code 22 sbx exec g1 curl -fsS -o /dev/null http://$TN_PRIV/hello 2>err &&
	test_grep "refused by the egress policy" err &&
	sbx logs --egress g1 >log && test_grep "$TN_WEB" log && test_grep "$TN_PRIV" log &&
	expect_code 7 sbx exec g1 curl -fsS --noproxy "*" -o /dev/null http://$TN_WEB/hello
'

test_expect_success 'preview reaches a port inside (gVisor on the sandbox network namespace)' '
	sbx exec g1 sh -c "cd /workspace && nohup python3 -m http.server -b 127.0.0.1 8000 >/dev/null 2>&1 &" &&
	echo page >page && sbx cp page g1:/workspace/page &&
	url=$(sbx preview --no-auth g1 8000) &&
	wait_until 20 curl -fsS "${url%/}/page" && test_eq page "$(curl -fsS "${url%/}/page")"
'

test_expect_success 'preview with its token (the default): 401 without it, 200 with it' '
	sbx exec g1 sh -c "cd /workspace && nohup python3 -m http.server -b 127.0.0.1 8001 >/dev/null 2>&1 &" &&
	url=$(sbx preview g1 8001) && base=${url%%\?*} && tok=${url##*sbx_token=} &&
	echo "$url" | test_grep -Ex "http://127\.0\.0\.1:[0-9]+/\?sbx_token=[0-9a-f]{32}" &&
	wait_until 20 curl -fsS -H "X-Sbx-Preview-Token: $tok" "${base}page" &&
	test_eq page "$(curl -fsS -H "X-Sbx-Preview-Token: $tok" "${base}page")" &&
	curl -s -o /dev/null -w "%{http_code}" "${base}page" >code && test_eq 401 "$(cat code)" &&
	curl -s -o /dev/null -w "%{http_code}" -H "X-Sbx-Preview-Token: x$tok" "${base}page" >code &&
	test_eq 401 "$(cat code)" &&
	curl -s -L -c jar -b jar -o /dev/null -w "%{http_code}" "$url" >code && test_eq 200 "$(cat code)"
'

test_expect_success 'pause stops a counting process, resume lets it count on' '
	sbx exec g1 sh -c "nohup sh -c \"i=0; while :; do i=\\\$((i+1)); echo \\\$i >/tmp/n.tmp; mv /tmp/n.tmp /tmp/n; sleep 0.01; done\" >/dev/null 2>&1 &" &&
	wait_until 20 sbx exec g1 test -s /tmp/n &&
	sbx pause g1 >/dev/null && test_eq paused "$(sb_state g1)" &&
	sbx cp g1:/tmp/n c1 && sleep 0.5 && sbx cp g1:/tmp/n c2 &&
	test_eq "$(cat c1)" "$(cat c2)" "the count while paused" &&
	sbx resume g1 >/dev/null &&
	wait_until 20 sh -c "test \"\$(\"$SBX\" exec g1 cat /tmp/n)\" -gt $(cat c1)"
'

test_expect_success '--net none: loopback alone' '
	sbx create --name g2 --runtime gvisor --net none >/dev/null &&
	sbx exec g2 python3 -c "
import socket
a = socket.socket(); a.bind((\"127.0.0.1\", 0)); a.listen(1)
b = socket.create_connection(a.getsockname()); c, _ = a.accept()
b.sendall(b\"lo\"); print(c.recv(2).decode())" >out && test_eq lo "$(cat out)" &&
	expect_code 7 sbx exec g2 curl -fsS -o /dev/null --max-time 5 http://$TN_WEB/hello
'

test_expect_success 'the host stays out of reach: its home, its loopback (controls: the host)' '
	mkdir -p "$HOME/secret" && echo key >"$HOME/secret/k" && test -e "$HOME/secret/k" &&
	expect_code 1 sbx exec g1 test -e "$HOME/secret/k" &&
	port=$(free_port) &&
	{ "$TEST_PYTHON" -m http.server -b 127.0.0.1 "$port" >/dev/null 2>&1 & echo $! >hostsrv.pid; } &&
	wait_until 10 curl -fsS -o /dev/null "http://127.0.0.1:$port/" &&
	expect_code 7 sbx exec g2 curl -fsS --noproxy "*" -o /dev/null "http://127.0.0.1:$port/"
	r=$?
	stop_pid "$(cat hostsrv.pid)"
	test $r -eq 0
'

test_expect_success 'what gVisor does not take is refused in one line (exit 125)' '
	expect_code 125 sbx create --runtime gvisor --net host 2>err &&
	test_eq 1 "$(grep -c "^sbx: error:" err)" && test_grep "does not take --net host" err &&
	expect_code 125 sbx create --runtime nosuch 2>err && test_eq 1 "$(wc -l <err)" &&
	if [ "$(id -u)" -eq 0 ]; then
		: "gVisor'"'"'s own network stack (--net none, root): no preview reaches it, nor --host-port" &&
		expect_code 125 sbx preview g2 8000 2>err &&
		expect_one_error_line err "runs gVisor.s own network stack .* which a preview cannot reach" &&
		expect_code 125 sbx create --runtime gvisor --net none --host-port 18080:80 2>err &&
		expect_one_error_line err "where --host-port.s forwarder cannot listen"
	fi &&
	expect_code 125 env SBX_RUNSC=runsc "$SBX" create --runtime gvisor 2>err &&
	test_grep "absolute path" err &&
	test_eq 2 "$(sbx ls -q | wc -l)"
'

# sb_dir SB: the host path of a sandbox's directory
sb_dir() { echo "$SBX_HOME/sandboxes/$(sbx inspect "$1" | "$TEST_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])')"; }

test_expect_success '--image: the image'"'"'s root (its files, not the host'"'"'s), kept over a release' '
	sbx create --name gi --runtime gvisor --image localhost/gvbb:1 >/dev/null &&
	sbx exec gi test -x /bin/busybox && test -x /usr/bin/python3 &&
	expect_code 1 sbx exec gi test -e /usr/bin/python3 &&
	test_eq gi "$(sbx exec gi cat /etc/hostname)" &&
	sbx exec gi sh -c "echo made >/workspace/m" && sbx pause --release gi >/dev/null &&
	sbx resume gi >/dev/null && test_eq made "$(sbx exec gi cat /workspace/m)" &&
	echo in >in && sbx cp in gi:/workspace/in && test_eq in "$(sbx exec gi cat /workspace/in)" &&
	sbx rm -f gi >/dev/null
'

# term.sh: says it is ready, then waits; SIGTERM makes it say so in /workspace/term and end.
# ign.sh: ignores SIGTERM
printf '%s\n' 'trap "echo graceful >>/workspace/term; exit 0" TERM' 'echo up >/workspace/ready' \
	'while :; do sleep 0.05; done' >term.sh
printf '%s\n' 'trap "" TERM' 'echo up >/workspace/ign-ready' 'while :; do sleep 0.05; done' >ign.sh

test_expect_success 'pause --release: SIGTERM from gVisor to the processes inside (a paused sandbox'"'"'s once thawed), then their end; one that ignores it ends after --grace' '
	sbx create --name gr --runtime gvisor --net none >/dev/null &&
	sbx cp term.sh gr:/workspace/ && sbx cp ign.sh gr:/workspace/ &&
	sbx exec gr sh -c "nohup sh /workspace/term.sh >/dev/null 2>&1 &" &&
	wait_until 20 sbx exec gr test -e /workspace/ready &&
	: "control: running, it got no signal" && expect_code 1 sbx exec gr test -e /workspace/term &&
	i=$(sbx inspect gr | "$TEST_PYTHON" -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	sbx pause --release --grace 20s gr >/dev/null && test_eq released "$(sb_state gr)" &&
	wait_until 10 test "$(ns_members "$i")" -eq 0 &&
	test_eq graceful "$(sbx cp gr:/workspace/term - | tar -xO)" &&
	sbx resume gr >/dev/null && sbx exec gr rm /workspace/ready &&
	sbx exec gr sh -c "nohup sh /workspace/term.sh >/dev/null 2>&1 &" &&
	sbx exec gr sh -c "nohup sh /workspace/ign.sh >/dev/null 2>&1 &" &&
	wait_until 20 sbx exec gr test -e /workspace/ready &&
	wait_until 20 sbx exec gr test -e /workspace/ign-ready &&
	i=$(sbx inspect gr | "$TEST_PYTHON" -c "import json, sys; print(json.load(sys.stdin)[\"pid\"])") &&
	sbx pause gr >/dev/null && sbx pause --release --grace 1s gr >/dev/null &&
	test_eq released "$(sb_state gr)" && wait_until 10 test "$(ns_members "$i")" -eq 0 &&
	test_eq "graceful graceful" "$(sbx cp gr:/workspace/term - | tar -xO | xargs)" &&
	sbx rm -f gr >/dev/null
'

test_expect_success 'volumes: -v HOST:DEST and :ro' '
	mkdir -p share && echo shared >share/f && echo file >single &&
	sbx create --name gv --runtime gvisor -v "$PWD/share:/data" -v "$PWD/single:/etc-like/single:ro" \
		-v "$PWD/share:/ro:ro" >/dev/null &&
	test_eq shared "$(sbx exec gv cat /data/f)" &&
	sbx exec gv sh -c "echo back >/data/g" && test_eq back "$(cat share/g)" &&
	test_eq file "$(sbx exec gv cat /etc-like/single)" &&
	expect_code 2 sbx exec gv sh -c "echo x >/ro/h" 2>/dev/null && test ! -e share/h &&
	test_eq "$(id -u)" "$(stat -c %u share/g)" &&
	sbx rm -f gv >/dev/null
'

# writable cgroup for --memory, --pids-limit and --cpus (root; a delegated subtree)
LIMITS=
for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/unified; do
	[ -w "$d/cgroup.procs" ] && LIMITS=1 && break
done
if [ -n "$LIMITS" ]; then
	test_expect_success '--memory: gVisor says it has that much; past it the biggest process is killed (137), the sandbox runs on' '
		sbx create --name gm --runtime gvisor --memory 200m >/dev/null &&
		test_eq 204800 "$(sbx exec gm awk "/^MemTotal:/ { print \$2 }" /proc/meminfo)" &&
		expect_code 137 sbx exec gm python3 -c "b = b\"x\" * (400 << 20); print(len(b))" &&
		test_eq running "$(sb_state gm)" && test_eq alive "$(sbx exec gm echo alive)" &&
		sbx inspect gm >jm && json_assert jm "assert r[\"oom_kills\"] >= 1, r" &&
		: "control: below the limit the same allocation goes through; without one, 400 MiB do" &&
		test_eq 104857600 "$(sbx exec gm python3 -c "b = b\"x\" * (100 << 20); print(len(b))")" &&
		sbx create --name gm2 --runtime gvisor >/dev/null &&
		test_eq 419430400 "$(sbx exec gm2 python3 -c "b = b\"x\" * (400 << 20); print(len(b))")" &&
		test_ne 204800 "$(sbx exec gm2 awk "/^MemTotal:/ { print \$2 }" /proc/meminfo)" &&
		sbx rm -f gm gm2 >/dev/null
	'

	test_expect_success '--pids-limit: a fork bomb stops at the limit inside; gVisor and the sandbox run on' '
		sbx create --name gp --runtime gvisor --pids-limit 40 >/dev/null &&
		sbx exec gp sh -c "(i=0; while [ \$i -lt 200 ]; do sleep 30 & i=\$((i+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo \$#" >n &&
		n=$(cat n) && test_ne "" "$n" && test "$n" -le 40 && test "$n" -ge 20 &&
		test_eq running "$(sb_state gp)" && test_eq alive "$(sbx exec gp echo alive)" &&
		: "control: 80 processes under --pids-limit 100 (gVisor'"'"'s own threads are not counted)" &&
		sbx create --name gp2 --runtime gvisor --pids-limit 100 >/dev/null &&
		sbx exec gp2 sh -c "for i in \$(seq 80); do sleep 30 & done; set -- /proc/[0-9]*; echo \$#" >n2 &&
		test "$(cat n2)" -ge 81 && test_eq running "$(sb_state gp2)" &&
		test_eq alive "$(sbx exec gp2 echo alive)" &&
		sbx rm -f gp gp2 >/dev/null
	'

	# cpu_ms SB: the CPU time the sandbox used so far (its cgroup: gVisor and all), in ms
	cpu_ms() { "$SBX" stats --json "$1" | "$TEST_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)[0]["cpu_ms"])'; }

	test_expect_success '--cpus 0.5: gVisor sees one CPU; a spinner gets about half a CPU' '
		sbx create --name gc --runtime gvisor --cpus 0.5 >/dev/null &&
		test_eq 1 "$(sbx exec gc nproc)" &&
		: "what gVisor counts as a task'"'"'s CPU time includes time the host held it back: the host'"'"'s count" &&
		c0=$(cpu_ms gc) && sbx exec gc python3 -c "
import time
t0 = time.time()
while time.time() - t0 < 2: pass" && c1=$(cpu_ms gc) && used=$((c1 - c0)) &&
		say "the sandbox used $used ms of CPU in 2 s" && test "$used" -gt 50 && test "$used" -lt 1400 &&
		: "control: without --cpus, every CPU" &&
		sbx create --name gc2 --runtime gvisor >/dev/null &&
		test_eq "$(nproc)" "$(sbx exec gc2 nproc)" &&
		sbx rm -f gc gc2 >/dev/null
	'
else
	test_expect_success 'no writable cgroup: a limit fails creation in one line; nothing is left' '
		for opt in "--memory 64m" "--pids-limit 10" "--cpus 0.5"; do
			expect_code 125 sbx create --runtime gvisor --name lim $opt 2>err || exit 1
			expect_one_error_line err "no writable cgroup .*delegat" || exit 1
		done &&
		test ! -e "$SBX_HOME/names/lim"
	'
fi

test_expect_success 'a boot that does not finish: create fails in one line after SBX_GVISOR_BOOT_TIMEOUT; nothing is left' '
	n0=$(ls "$SBX_HOME/sandboxes" | wc -l) && touch hold &&
	SBX_TEST_HOLD_AT=gvisor-boot SBX_TEST_HOLD_FILE=$PWD/hold SBX_GVISOR_BOOT_TIMEOUT=2 \
		expect_code 125 sbx create --name gt --runtime gvisor 2>err &&
	rm -f hold && expect_one_error_line err "^sbx: error: .*gVisor did not start within 2 s" &&
	test_eq "$n0" "$(ls "$SBX_HOME/sandboxes" | wc -l)" && test ! -e "$SBX_HOME/names/gt" &&
	expect_code 125 env SBX_GVISOR_BOOT_TIMEOUT=soon "$SBX" create --name gt --runtime gvisor 2>err &&
	expect_one_error_line err "SBX_GVISOR_BOOT_TIMEOUT must be a number" &&
	: "control: the same create without the hold" &&
	SBX_GVISOR_BOOT_TIMEOUT=60 sbx create --name gt --runtime gvisor >/dev/null &&
	test_eq running "$(sb_state gt)" && sbx rm -f gt >/dev/null
'

test_expect_success 'gVisor'"'"'s kernel gone: inspect says error and why, exec refuses in one line (125); rm cleans' '
	sbx create --name gd --runtime gvisor >/dev/null &&
	test_eq running "$(sb_state gd)" && test_eq alive "$(sbx exec gd echo alive)" &&
	read -r spid _ <"$(sb_dir gd)/gvisor/sentry" &&
	tr "\0" " " <"/proc/$spid/cmdline" | test_grep "^runsc-sandbox " &&
	kill -9 "$spid" &&
	for i in $(seq 50); do [ "$(sb_state gd)" = error ] && break; sleep 0.2; done &&
	sbx inspect gd >jd &&
	json_assert jd "assert r[\"state\"] == \"error\" and \"gVisor kernel\" in r[\"state_reason\"], r" &&
	expect_code 125 sbx exec gd true 2>err &&
	expect_one_error_line err "^sbx: error: sandbox .gd. is in error: its gVisor kernel" &&
	sbx rm -f gd >/dev/null && expect_code 125 sbx inspect gd 2>/dev/null
'

test_expect_success 'a boot whose gVisor kernel cannot be recorded fails in one line (125), not a sandbox that would look running when it died; control: recorded, it boots' '
	sbx create --runtime gvisor --name grec >/dev/null && d=$(sb_dir grec)/gvisor &&
	sbx pause --release grec >/dev/null && rm -f "$d/sentry" && mkdir "$d/sentry" &&
	expect_code 125 sbx resume grec 2>err &&
	expect_one_error_line err "cannot resume .grec.: .*gvisor/sentry" &&
	test_eq stopped "$(sb_state grec)" &&
	rmdir "$d/sentry" && sbx resume grec >/dev/null && test_eq running "$(sb_state grec)" &&
	test -s "$d/sentry" && sbx rm -f grec >/dev/null
'

test_expect_success 'rm: no runsc process left' '
	i1=$(json_assert j "print(r[\"extra\"][\"init_pid\"])") &&
	sbx inspect g2 >j2 && i2=$(json_assert j2 "print(r[\"extra\"][\"init_pid\"])") &&
	test "$(ns_members "$i1")" -ge 3 && test "$(ns_members "$i2")" -ge 3 &&
	test "$(runsc_named "$(cat id1)")" -eq 1 &&
	sbx rm -f g1 g2 >/dev/null && test -z "$(sbx ls -q)" &&
	wait_until 10 test "$(ns_members "$i1")" -eq 0 && test "$(ns_members "$i2")" -eq 0 &&
	test "$(runsc_named "$(cat id1)")" -eq 0
'

test_done
