#!/bin/bash
# The docker provider on engines other than a local dockerd's socket, each through the shared
# verb checks: DOCKER_HOST=ssh://… (an sshd of the file's own on 127.0.0.1 in front of a private
# dockerd, tests/helpers/sshd.sh: every connection is `ssh … docker system dial-stdio`, its
# sessions in the dockerd's network namespace, so that a preview's ssh channel reaches the
# ports it publishes there), and Podman's Docker-compatible API service (tests/helpers/
# podman.sh), as root (rootless Podman is t0722's). Also: the user's ssh config is honoured (an
# alias of it); ssh failing is one line in ssh's words (125); a host or user that ssh would
# take for an option is refused before ssh runs, with controls (these two for any user: they
# need no engine); no ssh process outlives a call. One ssh login per call: an exec's requests
# and its stream are sessions of one connection (the sshd counts its logins), through a master
# whose control socket is in a directory of the call's own (0700), never the user's config's;
# the master ends with the call, or, sbx killed, by itself within seconds.
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
. "$TEST_DIR/helpers/dockerd.sh"
. "$TEST_DIR/helpers/sshd.sh"
. "$TEST_DIR/helpers/podman.sh"

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
if ! "$SBX" provider ls 2>/dev/null | grep -q "^docker "; then
	TEST_SKIP_ALL="this sbx has no docker provider"
fi

# sbx's directories of ssh control sockets: here, in the trash
export TMPDIR=$TRASH/tmp
mkdir -p "$TMPDIR"

# the ssh processes of this file's (their command lines name its sshd's port or alias, or a
# host of the checks below; a master of sbx's shared logins names its control socket)
ssh_left() {
	local p a c re="^/usr/bin/ssh .*(-p ${SSHD_PORT:-none} |${SSHD_ALIAS:-none} |nosuch\.invalid )"
	re="$re|^ssh: $TMPDIR/sbx-ssh-[^ /]+/m \[mux\]"
	# builtins only: a scan of every process is quick on a busy machine too
	for p in /proc/[0-9]*; do
		{ mapfile -d '' a <"$p/cmdline"; } 2>/dev/null || continue
		c="${a[*]} "
		[[ $c =~ $re ]] && echo "${p#/proc/}"
	done
	return 0
}
no_ssh_left() { test -z "$(ssh_left)"; }

# --- ssh:// refusals and failures, for any user (no engine needed) -------------------------

test_expect_success 'ssh://: a host ssh cannot reach is one line in its words, 125, nothing made' '
	expect_code 125 env DOCKER_HOST=ssh://nosuch.invalid "$SBX" create --provider docker \
		--image base:1 --name bad 2>err &&
	expect_one_error_line err "^sbx: error: (.*: )?ssh to nosuch.invalid failed: [^ ]" &&
	expect_code 125 sbx inspect bad 2>/dev/null && test -z "$(ssh_left)"
'

test_expect_success 'ssh://: a host or user ssh would take for an option is refused before ssh runs; control: the same without the dash gets to ssh' '
	for h in "-oProxyCommand=touch%20pwned" "-oProxyCommand=x@nosuch.invalid" \
		"-lroot@nosuch.invalid" "a;touch%20pwned" "root@-p22" "-F.@nosuch.invalid"; do
		expect_code 125 env DOCKER_HOST="ssh://$h" "$SBX" create --provider docker \
			--image base:1 --name opt 2>err &&
		expect_one_error_line err "DOCKER_HOST.*(not begin|must be)" || return 1
	done &&
	test ! -e pwned && test ! -e "$TRASH/pwned" && expect_code 125 sbx inspect opt 2>/dev/null &&
	for h in "oProxyCommand@nosuch.invalid" "lroot@nosuch.invalid"; do
		expect_code 125 env DOCKER_HOST="ssh://$h" "$SBX" create --provider docker \
			--image base:1 --name opt 2>err &&
		expect_one_error_line err "ssh to nosuch.invalid failed: " || return 1
	done
'

# --- the engines: a private dockerd behind an sshd, a podman service (as root) -------------

if [ -n "$TEST_SKIP_ALL" ]; then
	:
elif [ "$(id -u)" -ne 0 ]; then
	TEST_SKIP_ALL="needs a private dockerd, an sshd and a podman service, which run as root"
elif ! dockerd_start "$TRASH/dockerd"; then
	TEST_SKIP_ALL=$DOCKERD_WHY
elif ! sshd_start "$TRASH/sshd" "$DOCKER_HOST" "$DOCKERD_PID"; then
	TEST_SKIP_ALL=$SSHD_WHY
elif ! podman_start "$TRASH/podman"; then
	TEST_SKIP_ALL=$PODMAN_WHY
fi
# (dkr, of dockerd.sh, reaches the private dockerd's own socket: DOCKER_HOST is the engine each
# part uses)

# inside the podman service's network namespace (where its published ports are)
in_podman_net() { nsenter --net="/proc/$PODMAN_PID/ns/net" "$@"; }

# the container behind a sandbox, and the DOCKER_HOST its record keeps
cid() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }
rec_host() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["extra"]["docker_host"])'; }

test_expect_success 'set-up: a busybox image in sbx store (and in the podman service)' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	sbx image import base.tar >/dev/null &&
	pdm load -q -i base.tar >/dev/null &&
	expect_code 1 dkr image inspect base:1 >/dev/null 2>&1 &&
	dkr network create sbxnet >/dev/null
'

# --- ssh:// --------------------------------------------------------------------------------

test_expect_success 'ssh://: create loads the image into the remote engine through ssh; the record keeps the URL' '
	DOCKER_HOST=$SSHD_URL sbx create --provider docker --image base:1 --name far >/dev/null &&
	test_eq "$SSHD_URL" "$(rec_host far)" &&
	dkr image inspect base:1 >/dev/null &&
	test_eq running "$(dkr inspect -f "{{.State.Status}}" "$(cid far)")" &&
	test_eq "hello from far" "$(sbx exec far echo hello from far)" &&
	test -z "$(ssh_left)"
'

test_expect_success 'ssh://: the user ssh config is honoured (a host alias of it)' '
	DOCKER_HOST=ssh://$SSHD_ALIAS sbx create --provider docker --image base:1 \
		--name alias >/dev/null &&
	test_eq "ssh://$SSHD_ALIAS" "$(rec_host alias)" &&
	printf "in" | sbx exec -i alias cat >out && test_eq in "$(cat out)" &&
	sbx rm -f alias >/dev/null && test -z "$(ssh_left)"
'

test_expect_success 'ssh://: ssh gets the variables it needs (HOME, SSH_AUTH_SOCK), not the caller'"'"'s others' '
	{ SSH_AUTH_SOCK=$TRASH/agent.sock T0721_SECRET=hunter2 "$SBX" exec far sleep 3 & } &&
	for i in $(seq 1 200); do
		p=$(ssh_left | head -n 1) && [ -n "$p" ] && break
		sleep 0.1
	done &&
	test -n "$p" && tr "\0" "\n" <"/proc/$p/environ" >env &&
	wait &&
	test_grep -x "HOME=$HOME" env && test_grep -x "SSH_AUTH_SOCK=$TRASH/agent.sock" env &&
	test_grep ! T0721_SECRET env && test_grep ! SBX_HOME env
'

# the logins the sshd accepted so far
logins() { grep -c "Accepted publickey" "$SSHD_DIR/sshd.log"; }

test_expect_success 'ssh://: one login per call: an exec (its requests, its stream) and a cp share it; control: two ssh, two logins' '
	a=$(logins) && /usr/bin/ssh -F "$HOME/.ssh/config" -o BatchMode=yes "$SSHD_ALIAS" true &&
	/usr/bin/ssh -F "$HOME/.ssh/config" -o BatchMode=yes "$SSHD_ALIAS" true &&
	test_eq $((a + 2)) "$(logins)" "two ssh calls" &&
	a=$(logins) && sbx exec far true && test_eq $((a + 1)) "$(logins)" "sbx exec" &&
	printf "stdin" | sbx exec -i far cat >out && test_eq stdin "$(cat out)" &&
	test_eq $((a + 2)) "$(logins)" "sbx exec -i" &&
	echo copied >f && sbx cp f far:/tmp/f && sbx cp far:/tmp/f back &&
	test_eq copied "$(cat back)" && test_eq $((a + 4)) "$(logins)" "two sbx cp" &&
	test -z "$(ssh_left)" && test -z "$(ls -A "$TMPDIR")"
'

test_expect_success 'ssh://: the master of a call: its socket in a 0700 directory of the call, gone with it' '
	{ sbx exec far sleep 3 & } &&
	wait_until 20 sh -c "ls -d \"$TMPDIR\"/sbx-ssh-*/m" &&
	d=$(ls -d "$TMPDIR"/sbx-ssh-*) && test_eq 1 "$(echo "$d" | wc -l)" &&
	test_eq "700 $(id -u)" "$(stat -c "%a %u" "$d")" && test -S "$d/m" &&
	ssh_left >pids && test -s pids &&
	for p in $(cat pids); do tr "\0" " " <"/proc/$p/cmdline"; echo; done >cmds &&
	test_grep "^ssh: $d/m \[mux\]" cmds &&
	test_grep -F -- "-o ControlPath=$d/m -o ControlMaster=auto -o ControlPersist=1 " cmds &&
	wait && test -z "$(ssh_left)" && test ! -e "$d"
'

test_expect_success 'ssh://: a TMPDIR others may write in (not sticky) is not where the control socket goes: /tmp is' '
	mkdir open && chmod 777 open &&
	{ TMPDIR=$TRASH/open "$SBX" exec far sleep 2 & } && p=$! &&
	wait_until 20 sh -c "pgrep -P $p -x ssh" &&
	for q in $(pgrep -P "$p" -x ssh); do tr "\0" " " <"/proc/$q/cmdline"; echo; done >cmds &&
	{ wait "$p"; test_eq 0 $? "sbx exec"; } && test -z "$(ls -A open)" &&
	d=$(sed -n "s|.* -o ControlPath=\(/tmp/sbx-ssh-[A-Za-z0-9]\{6\}\)/m .*|\1|p" cmds | head -n 1) &&
	test -n "$d" && test ! -e "$d" && test -z "$(ssh_left)"
'

test_expect_success 'ssh://: the user config sharing (a socket of its choice, a master kept 10 min) is never used' '
	cp "$HOME/.ssh/config" config.saved &&
	printf "Host *\n    ControlMaster auto\n    ControlPath %s/cm-%%C\n    ControlPersist 10m\n" \
		"$TRASH" >>"$HOME/.ssh/config" &&
	sbx exec far true && printf "in" | sbx exec -i far cat >out &&
	cp config.saved "$HOME/.ssh/config" &&
	test_eq in "$(cat out)" && test -z "$(ls "$TRASH" | grep "^cm-")" && test -z "$(ssh_left)"
'

test_expect_success 'ssh://: sbx killed during an exec: its ssh processes and the master end by themselves' '
	{ "$SBX" exec far sh -c "sleep 30; :" & } && p=$! &&
	wait_until 20 sh -c "ls \"$TMPDIR\"/sbx-ssh-*/m && test -n \"\$(pgrep -P $p -x ssh)\"" &&
	ssh_left >pids && test -s pids &&
	kill -9 "$p" && { wait "$p"; test_eq 137 $? "sbx killed"; } &&
	wait_until 15 no_ssh_left &&
	test -z "$(find "$TMPDIR" -mindepth 2)" && rmdir "$TMPDIR"/sbx-ssh-*
'

test_expect_success 'ssh://: a refused connection, a refused key: one line in ssh words, 125, nothing made' '
	expect_code 125 env DOCKER_HOST="ssh://127.0.0.1:$(free_port)" "$SBX" create \
		--provider docker --image base:1 --name bad 2>err &&
	expect_one_error_line err "ssh to 127.0.0.1 failed: .*Connection refused" &&
	expect_code 125 env DOCKER_HOST="ssh://nobody@127.0.0.1:$SSHD_PORT" "$SBX" create \
		--provider docker --image base:1 --name bad 2>err &&
	expect_one_error_line err "ssh to 127.0.0.1 failed: .*Permission denied" &&
	expect_code 125 sbx inspect bad 2>/dev/null && test -z "$(ssh_left)"
'

test_expect_success 'ssh://: control of the refusals: a plain host and user reach the engine' '
	DOCKER_HOST="$SSHD_URL" sbx create --provider docker --image base:1 --name opt >/dev/null &&
	test_eq ok "$(sbx exec opt echo ok)" && sbx rm -f opt >/dev/null
'

test_expect_success 'ssh://: a preview through ssh own channel to the remote loopback, with the token in front' '
	SBX_DOCKER_NETWORK=sbxnet DOCKER_HOST=$SSHD_URL sbx create --provider docker \
		--image base:1 --name farweb --net open --port 8080 >/dev/null &&
	sbx exec -d farweb sh -c "echo far-box >/tmp/index.html; httpd -f -p 8080 -h /tmp" >/dev/null &&
	sbx preview --json farweb 8080 >pv.json &&
	json_assert pv.json "assert r[\"upstream\"].endswith(\" via $SSHD_URL\"), r" &&
	"$TEST_PYTHON" - pv.json >fetch.out <<-\EOF &&
	import json, sys, time, urllib.error, urllib.request
	p = json.load(open(sys.argv[1]))
	base = p["url"].split("?")[0]
	def get(token):
	    q = urllib.request.Request(base + "index.html")
	    if token:
	        q.add_header("X-Sbx-Preview-Token", token)
	    for _ in range(100):
	        try:
	            return urllib.request.urlopen(q, timeout=10).read().decode().strip()
	        except urllib.error.HTTPError as e:
	            if e.code != 502:
	                return str(e.code)
	        time.sleep(0.2)
	print(get(None), get(p["token"]))
	EOF
	test_eq "401 far-box" "$(cat fetch.out)" &&
	sbx preview --rm farweb 8080 && sbx rm -f farweb >/dev/null && test -z "$(ssh_left)"
'

# the shared verb checks, through ssh (a preview's ssh channel too)
DOCKER_HOST=${SSHD_URL:-}
export DOCKER_HOST
VERBS_MORE="start-fail timeout-procs preview"
VERBS_PREVIEW_CREATE="--net open --port 8080"
SBX_DOCKER_NETWORK=sbxnet verbs_suite docker-ssh --provider docker --image base:1

test_expect_success 'ssh://: no ssh process outlives the calls; rm removes the containers' '
	test -z "$(ssh_left)" &&
	sbx rm -f far >/dev/null && test -z "$(dkr ps -aq)" && test -z "$(ssh_left)"
'

# --- Podman's API service ------------------------------------------------------------------

test_expect_success 'podman: create and exec through the Docker API of podman system service' '
	DOCKER_HOST=$PODMAN_HOST sbx create --provider docker --image base:1 --name pod >/dev/null &&
	test_eq "$PODMAN_HOST" "$(rec_host pod)" &&
	pdm ps --format "{{.ID}}" --no-trunc >ps && test_grep "$(cid pod)" ps &&
	expect_code 3 sbx exec pod sh -c "echo out; echo err >&2; exit 3" >out 2>err &&
	test_eq out "$(cat out)" && test_eq err "$(cat err)"
'

DOCKER_HOST=${PODMAN_HOST:-}
export DOCKER_HOST
VERBS_SKIP=
VERBS_PREVIEW_IN=in_podman_net
verbs_suite podman --provider docker --image base:1

test_expect_success 'podman: rm removes the container from the service' '
	sbx rm -f pod >/dev/null && test -z "$(pdm ps -aq)" && test -z "$(sbx ls -q)"
'

test_done
