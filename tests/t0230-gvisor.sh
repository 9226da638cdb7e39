#!/bin/bash
# --runtime gvisor on the local provider: the shared verb checks (tests/helpers/verbs.sh) on a
# gVisor sandbox, then what is gVisor's own: the runtime inspect reports, gVisor's kernel
# inside, egress through sbx's proxy allowed and refused (with the log), --net none, a preview,
# pause with a process that stands still, the host out of reach, the refusals of what gVisor
# does not take, and no runsc process left after rm. As root and as another uid alike (runsc
# runs as sandbox root inside the sandbox's user namespace either way).
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
	expect_code 125 env SBX_RUNSC=runsc "$SBX" create --runtime gvisor 2>err &&
	test_grep "absolute path" err &&
	test_eq 2 "$(sbx ls -q | wc -l)"
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
