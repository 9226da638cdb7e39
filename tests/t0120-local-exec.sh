#!/bin/bash
# sbx exec: exit statuses, signals, timeouts, stdin, -c, and the libraries it loads.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

test_expect_success 'set-up: a sandbox named ex' '
	sbx create --name ex >/dev/null
'

test_expect_success 'the command status passes through: 0, 1, 3, 255' '
	expect_code 0 sbx exec ex -- true &&
	expect_code 1 sbx exec ex -- false &&
	expect_code 3 sbx exec ex -- sh -c "exit 3" &&
	expect_code 255 sbx exec ex -- sh -c "exit 255"
'

test_expect_success 'a command killed by a signal: 128+N (137 for SIGKILL, 143 for SIGTERM)' '
	expect_code 137 sbx exec ex -- sh -c "kill -9 \$\$" &&
	expect_code 143 sbx exec ex -- sh -c "kill -TERM \$\$"
'

test_expect_success 'command not found: 127 with one line' '
	expect_code 127 sbx exec ex -- no-such-command-sbx 2>err &&
	expect_one_error_line err "^sbx: error: .no-such-command-sbx.: command not found in sandbox .ex." &&
	expect_code 127 sbx exec ex -- /no/such/path 2>err && expect_one_error_line err "command not found"
'

test_expect_success 'not executable: 126 with one line' '
	sbx exec ex -c "echo \"echo hi\" >/workspace/noexec; chmod 644 /workspace/noexec" &&
	expect_code 126 sbx exec ex -- /workspace/noexec 2>err &&
	expect_one_error_line err "^sbx: error: ./workspace/noexec.: cannot execute.*Permission denied" &&
	expect_code 126 sbx exec ex -- /workspace 2>err && expect_one_error_line err "cannot execute"
'

test_expect_success '--timeout kills the whole process group and exits 124' '
	expect_code 124 sbx exec --timeout 0.5s ex -- sh -c "sleep 100 & sleep 100; echo not-reached" >out &&
	test_grep ! not-reached out &&
	sleep 0.3 &&
	test_eq 0 "$(sbx exec ex -- sh -c "ps -eo comm | grep -c ^sleep")" &&
	expect_code 0 sbx exec --timeout 10s ex -- true
'

test_expect_success 'SIGTERM and SIGINT to sbx exec reach the command' '
	for sig in TERM INT; do
		rm -f out
		"$SBX" exec ex -- sh -c "trap \"echo got-$sig; exit 7\" $sig; echo ready; while :; do sleep 0.1; done" >out &
		p=$!
		for i in $(seq 50); do grep -q ready out 2>/dev/null && break; sleep 0.1; done
		kill -$sig $p
		wait $p
		rc=$?
		test_grep got-$sig out && test_eq 7 $rc || exit 1
	done
'

test_expect_success 'stdin is /dev/null without -i; -i passes it through' '
	echo from-host | sbx exec ex -- cat >out && test ! -s out &&
	echo from-host | sbx exec -i ex -- cat >out && test_eq from-host "$(cat out)" &&
	head -c 1000000 /dev/urandom >big && sbx exec -i ex -- cat <big >big.out && cmp big big.out
'

test_expect_success 'stdout and stderr stay separate' '
	sbx exec ex -- sh -c "echo out; echo err >&2" >o 2>e &&
	test_eq out "$(cat o)" && test_eq err "$(cat e)"
'

test_expect_success 'exec -c runs a shell string; arguments after SB belong to the command' '
	test_eq 42 "$(sbx exec ex -c "echo \$((6*7))")" &&
	test_eq "-c x" "$(sbx exec ex echo -c x)" &&
	test_eq /workspace "$(sbx exec ex -- ls -d /workspace)" &&
	test_eq /workspace "$(sbx exec ex ls -d /workspace)" &&
	expect_code 125 sbx exec ex -c 2>err && test_grep "needs a value" err &&
	expect_code 125 sbx exec ex 2>err && test_grep "missing command" err
'

test_expect_success 'the command runs in a new session: it has no controlling terminal' '
	sbx exec ex -- sh -c "ps -o sid= -p \$\$; echo \$\$" >out &&
	test_eq "$(sed -n 2p out)" "$(sed -n 1p out | tr -d " ")"
'

test_expect_success 'descriptors of the caller do not leak into the sandbox' '
	exec 7>leak.txt &&
	sbx exec ex -- sh -c "ls /proc/self/fd" >out &&
	test_grep ! -x 7 out
'

test_expect_success 'sbx exec loads neither libcurl nor libarchive (LD_DEBUG=libs)' '
	LD_DEBUG=libs sbx exec ex -- true 2>ld.log &&
	test_grep "calling init" ld.log &&
	test_grep ! -E "libcurl|libarchive" ld.log &&
	LD_DEBUG=libs sbx ls 2>ld.log >/dev/null && test_grep ! -E "libcurl|libarchive" ld.log &&
	ldd "$SBX" | test_grep ! -E "libcurl|libarchive" &&
	ldd "$SBX" | test_grep libjansson && ldd "$SBX" | test_grep libseccomp
'

test_expect_success 'run: create, exec and rm in one call, status passes through' '
	test_eq 13 "$(sbx run -- hostname | wc -c)" &&
	expect_code 3 sbx run -- sh -c "exit 3" &&
	expect_code 127 sbx run -- no-such-command-sbx 2>/dev/null &&
	test_eq 5 "$(sbx run -e X=5 -- sh -c "echo \$X")" &&
	test_eq "" "$(sbx ls -q | grep -v "$(sbx inspect ex | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])")")"
'

test_expect_success 'SIGTERM to sbx run reaches the command, and the sandbox is still removed' '
	before=$(sbx ls -q | wc -l)
	"$SBX" run -- sh -c "trap \"echo got-term; exit 9\" TERM; echo ready; while :; do sleep 0.1; done" >out &
	p=$!
	for i in $(seq 50); do grep -q ready out 2>/dev/null && break; sleep 0.1; done
	kill -TERM $p
	wait $p
	rc=$?
	test_eq 9 $rc && test_grep got-term out &&
	test_eq "$before" "$(sbx ls -q | wc -l)"
'

test_expect_success '50 parallel execs into one sandbox all succeed' '
	for i in $(seq 50); do (sbx exec ex -- sh -c "echo $i" >p.$i) & done; wait &&
	for i in $(seq 50); do test_eq $i "$(cat p.$i)" || exit 1; done
'

test_expect_success 'exec -u reads the sandbox'"'"'s passwd safely: short entries, a FIFO, huge ids' '
	printf "root:x:0:0:root:/root:/bin/sh\nbob:x:1000\nann:x:1001:1001:Ann:/home/ann:/bin/sh\nbig:x:99999999999999999999:0::/:/bin/sh\n" >passwd &&
	mkfifo fifo &&
	sbx create --name pw -v "$PWD/passwd:/etc/passwd:ro" >/dev/null &&
	: "control: a whole entry resolves, by name and by number" &&
	if [ "$(id -u)" -eq 0 ]; then
		test_eq "$(printf "1001\n1001\n/home/ann")" "$(sbx exec -u ann pw sh -c "id -u; id -g; echo \$HOME")" &&
		test_eq "$(printf "1000\n1000\n/")" "$(sbx exec -u 1000 pw sh -c "id -u; id -g; echo \$HOME")"
	else
		expect_code 125 sbx exec -u ann pw true 2>err && test_grep "only your uid is mapped" err
	fi &&
	: "an entry without its gid field, or with an id past any uid: no such user, 125" &&
	expect_code 125 sbx exec -u bob pw true 2>err && expect_one_error_line err "no user .bob." &&
	expect_code 125 sbx exec -u big pw true 2>err && expect_one_error_line err "no user .big." &&
	: "a FIFO where /etc/passwd is: no user, at once, instead of exec waiting on it for good" &&
	sbx create --name pwf -v "$PWD/fifo:/etc/passwd" >/dev/null &&
	expect_code 125 timeout 10 "$SBX" exec -u ann pwf true 2>err &&
	expect_one_error_line err "no user .ann." &&
	sbx rm -f pw pwf >/dev/null
'

test_done
