#!/bin/bash
# Memory checkpoints on --runtime gvisor. pause --checkpoint: the processes and memory written to disk and
# its processes gone (inspect says checkpointed, with the bytes on disk), then resume starts
# them where they were: a counter counts on from where it stopped, a shell's variable, an open
# file and a loopback socket pair survive. Refusals in one line (exit 125): the default runtime
# (control: the same pause --checkpoint on a gVisor sandbox works), a gVisor sandbox on the
# proxy's network, and, run by an ordinary user, any (runsc cannot make its own network stack
# there; control: root's checkpoint above). snapshot create --memory: files and processes, and
# three forks of it that run the processes, each diverging on its own. A gVisor sandbox's pause
# stops its CPU time (control: it runs when resumed).
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies (prog)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3
[ -x "${SBX_RUNSC:-/usr/bin/runsc}" ] || TEST_SKIP_ALL="no runsc (scripts/install-deps installs it)"

# what runs in the sandbox: a counter, a shell holding a variable and a file open, and a
# socket pair over loopback that says what it got
prog='import os, socket, time
a = socket.socket(); a.bind(("127.0.0.1", 0)); a.listen(1)
b = socket.create_connection(a.getsockname()); c, _ = a.accept()
f = open("/workspace/held", "w")
n = 0
while True:
    n += 1
    b.sendall(b"x"); got = c.recv(1)
    f.seek(0); f.write(str(n) + "\n"); f.flush()
    with open("/workspace/n.tmp", "w") as o:
        o.write("%d %s\n" % (n, got.decode()))
    os.rename("/workspace/n.tmp", "/workspace/n")
    time.sleep(0.02)'
count() { sbx exec "$1" cat /workspace/n | cut -d" " -f1; }
field() { "$SBX" inspect "$1" | python3 -c "import json, sys; print(json.load(sys.stdin)$2)"; }
# ns_of SB: the pid namespace of SB's init; in_ns NS: the host pids in it
ns_of() { readlink "/proc/$(field "$1" '["pid"]')/ns/pid"; }
in_ns() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"
	done
	return 0
}
# ticks NS: the CPU time (utime + stime) of every process in pid namespace NS
ticks() {
	local p t=0
	for p in $(in_ns "$1"); do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
ticks_move() { test "$(ticks "$1")" != "$2"; }

if [ "$(id -u)" -eq 0 ]; then
	test_expect_success 'pause --checkpoint: processes and memory to disk, inspect says so' '
		sbx create --name c1 --runtime gvisor --net none >/dev/null &&
		echo "$prog" >prog.py && sbx cp prog.py c1:/workspace/prog.py &&
		sbx exec c1 sh -c "nohup python3 /workspace/prog.py >/dev/null 2>&1 &" &&
		sbx exec c1 sh -c "V=kept; export V; mkfifo /workspace/fifo; nohup sh -c \"read x </workspace/fifo; echo \\\$V \\\$x >/workspace/shell\" >/dev/null 2>&1 &" &&
		wait_until 20 sh -c "test \"\$(\"$SBX\" exec c1 cat /workspace/n | cut -d\" \" -f1)\" -gt 5" &&
		sbx pause --checkpoint c1 >/dev/null &&
		sbx inspect c1 >j &&
		json_assert j "assert r[\"state\"] == \"released\" and r[\"checkpointed\"] is True and r[\"checkpoint_bytes\"] > 4096, r" &&
		expect_code 125 sbx exec c1 true 2>err && test_eq 1 "$(wc -l <err)" &&
		sbx cp c1:/workspace/n before && a=$(cut -d" " -f1 before) && sleep 0.5 &&
		sbx cp c1:/workspace/n again && test_eq "$(cat before)" "$(cat again)" &&
		echo "$a" >at-checkpoint
	'

	test_expect_success 'resume: the counter counts on from where it stopped, state kept' '
		sbx resume c1 >/dev/null && test_eq running "$(sb_state c1)" &&
		sbx inspect c1 >j && json_assert j "assert r[\"checkpointed\"] is False, r" &&
		a=$(cat at-checkpoint) && b=$(count c1) && test "$b" -ge "$a" &&
		test "$b" -lt "$((a + 40))" &&
		wait_until 20 sh -c "test \"\$(\"$SBX\" exec c1 cat /workspace/n | cut -d\" \" -f1)\" -gt $((a + 5))" &&
		sbx exec c1 cat /workspace/n >n && test_match "^[0-9]+ x$" "$(cat n)" &&
		sbx exec c1 sh -c "echo fed >/workspace/fifo" &&
		wait_until 10 sbx exec c1 test -s /workspace/shell &&
		test_eq "kept fed" "$(sbx exec c1 cat /workspace/shell)"
	'

	test_expect_success 'a second checkpoint and resume of the same sandbox' '
		a=$(count c1) && sbx pause --checkpoint c1 >/dev/null && sbx resume c1 >/dev/null &&
		test "$(count c1)" -ge "$a" && sbx rm -f c1 >/dev/null &&
		test -z "$(sbx ls -q)"
	'

	test_expect_success 'snapshot create --memory: files and processes; the sandbox runs on' '
		sbx create --name s1 --runtime gvisor --net none >/dev/null &&
		sbx cp prog.py s1:/workspace/prog.py &&
		sbx exec s1 sh -c "nohup python3 /workspace/prog.py >/dev/null 2>&1 &" &&
		wait_until 20 sh -c "test \"\$(\"$SBX\" exec s1 cat /workspace/n | cut -d\" \" -f1)\" -gt 5" &&
		sbx snapshot create --memory --name mem --json s1 >snap &&
		json_assert snap "assert r[\"memory\"] is True, r" &&
		a=$(count s1) && wait_until 20 sh -c "test \"\$(\"$SBX\" exec s1 cat /workspace/n | cut -d\" \" -f1)\" -gt $a"
	'

	test_expect_success 'three forks of a memory snapshot run its processes, each its own' '
		at=$(json_assert snap "print(r[\"id\"])") &&
		for i in 1 2 3; do sbx fork mem --name k$i --runtime gvisor --net none >/dev/null || exit 1; done &&
		for i in 1 2 3; do
			wait_until 20 sh -c "test \"\$(\"$SBX\" exec k$i cat /workspace/n | cut -d\" \" -f1)\" -gt 1" || exit 1
		done &&
		sbx exec k1 sh -c "echo one >/workspace/mine" && sbx exec k2 sh -c "echo two >/workspace/mine" &&
		test_eq one "$(sbx exec k1 cat /workspace/mine)" && test_eq two "$(sbx exec k2 cat /workspace/mine)" &&
		expect_code 1 sbx exec k3 test -e /workspace/mine &&
		expect_code 1 sbx exec s1 test -e /workspace/mine &&
		sbx exec k3 pkill -f prog.py && sleep 0.3 && b=$(count k3) && sleep 0.3 &&
		test_eq "$b" "$(count k3)" "the stopped fork" &&
		c=$(count k1) && wait_until 20 sh -c "test \"\$(\"$SBX\" exec k1 cat /workspace/n | cut -d\" \" -f1)\" -gt $c" &&
		test_match "^[0-9]+ x$" "$(sbx exec k2 cat /workspace/n)"
	'

	test_expect_success 'a fork of a memory snapshot on the default runtime is refused (one line)' '
		expect_code 125 sbx fork mem --name k4 2>err && test_eq 1 "$(wc -l <err)" &&
		test_grep "forks need --runtime gvisor --net none" err &&
		sbx rm -f s1 k1 k2 k3 >/dev/null && sbx snapshot rm mem >/dev/null && test -z "$(sbx ls -q)"
	'

	test_expect_success 'a gVisor sandbox on the proxy network is refused (one line)' '
		sbx create --name c2 --runtime gvisor >/dev/null &&
		expect_code 125 sbx pause --checkpoint c2 2>err && test_eq 1 "$(wc -l <err)" &&
		test_grep "needs --net none" err && test_eq running "$(sb_state c2)" &&
		expect_code 0 sbx exec c2 true && sbx rm -f c2 >/dev/null
	'
else
	test_expect_success 'an ordinary user: pause --checkpoint refused in one line (root above)' '
		sbx create --name c1 --runtime gvisor --net none >/dev/null &&
		expect_code 125 sbx pause --checkpoint c1 2>err && test_eq 1 "$(wc -l <err)" &&
		test_grep "needs root" err && test_eq running "$(sb_state c1)" &&
		expect_code 0 sbx exec c1 true && sbx rm -f c1 >/dev/null
	'
fi

test_expect_success 'pause of a gVisor sandbox: its CPU time stands still, and runs again on resume' '
	sbx create --name p1 --runtime gvisor --net none >/dev/null &&
	sbx exec p1 sh -c "nohup sh -c \"while :; do :; done\" >/dev/null 2>&1 &" &&
	ns=$(ns_of p1) && t=$(ticks "$ns") && wait_until 20 ticks_move "$ns" "$t" &&
	sbx pause p1 >/dev/null && test_eq paused "$(sb_state p1)" &&
	a=$(ticks "$ns") && sleep 0.5 && test_eq "$a" "$(ticks "$ns")" "CPU ticks while paused" &&
	sbx resume p1 >/dev/null && wait_until 20 ticks_move "$ns" "$a" &&
	sbx rm -f p1 >/dev/null
'

test_expect_success 'the default runtime refuses pause --checkpoint (one line); plain pause works' '
	sbx create --name l1 --net none >/dev/null &&
	expect_code 125 sbx pause --checkpoint l1 2>err && test_eq 1 "$(wc -l <err)" &&
	test_grep "pause --checkpoint needs --runtime gvisor" err &&
	test_eq running "$(sb_state l1)" &&
	sbx pause l1 >/dev/null && test_eq paused "$(sb_state l1)" && sbx rm -f l1 >/dev/null
'

test_expect_success 'snapshot create --memory on the default runtime is refused (one line)' '
	sbx create --name l2 --net none >/dev/null &&
	expect_code 125 sbx snapshot create --memory l2 2>err && test_eq 1 "$(wc -l <err)" &&
	test_grep "needs --runtime gvisor" err && test -z "$(sbx snapshot ls -q)" &&
	sbx snapshot create l2 >/dev/null && sbx rm -f l2 >/dev/null
'

test_expect_success 'pause --checkpoint with --release is a usage error' '
	expect_code 125 sbx pause --checkpoint --release nope 2>err && test_grep "exclusive" err
'

test_done
