#!/bin/bash
# Memory checkpoints on --runtime gvisor.
# pause --checkpoint: the processes and memory written to disk, and nothing of the sandbox left
# running (no process in its pid namespace, no runsc, its cgroup memory gone; controls before),
# inspect says checkpointed with the bytes on disk; resume starts them where they were: a
# counter counts on from where it stopped, a shell's variable, an open file and a loopback socket
# pair survive. sbx killed at every step of a checkpoint (and of its resume, and mid-write from
# outside) leaves a sandbox whose state is true: running when the checkpoint never began,
# stopped and checkpointed when its processes are in the image, and resume restores them.
# snapshot create --memory: the files are copied while the processes are stopped (a process
# that checks its counter in memory against its file finds them of one moment in each fork;
# control: it does notice a file changed under it); three forks of it, made without repeating
# --runtime or --net (taken from the snapshot; a contradicting --net refused in one line), each
# run the processes on and diverge; one killed, the others go on. A gVisor sandbox's pause
# stops its CPU time (control: it runs when resumed), 20 times over with a spinner and a
# counter: each pause stops both (by the cgroup freezer for root; by gVisor itself for an
# ordinary user without one: nothing of gVisor's is stopped by a signal, and the sandbox's code
# stands still while gVisor's kernel keeps its clocks), each resume runs them on, the sandbox
# running after each. Refusals in one line (exit 125): the
# default runtime (naming --runtime gvisor; control: a plain pause works), a gVisor sandbox on
# the proxy's network, and, run by an ordinary user, any (runsc cannot make its own network
# stack there; control: root's checkpoint above).
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies (prog)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3
[ -x "${SBX_RUNSC:-/usr/bin/runsc}" ] || TEST_SKIP_ALL="no runsc (scripts/install-deps installs it)"

# what runs in the sandbox: a counter that steps by what /workspace/step says (1 without it), a
# shell holding a variable and a file open, and a socket pair over loopback that says what it
# got. Before each step it reads the counter back from its file: the file holds what it last
# wrote (or the one before, had it stopped between the two), else its memory and its files are
# of different moments, and it says so in /workspace/mismatch
prog='import os, socket, time
a = socket.socket(); a.bind(("127.0.0.1", 0)); a.listen(1)
b = socket.create_connection(a.getsockname()); c, _ = a.accept()
f = open("/workspace/held", "w")
n = prev = 0
while True:
    try:
        seen = int(open("/workspace/n").read().split()[0])
    except (OSError, ValueError, IndexError):
        seen = None
    if n and seen is not None and seen not in (prev, n):
        with open("/workspace/mismatch", "a") as m:
            m.write("memory %d file %d\n" % (n, seen))
    try:
        step = int(open("/workspace/step").read())
    except (OSError, ValueError):
        step = 1
    prev, n = n, n + step
    b.sendall(b"x"); got = c.recv(1)
    f.seek(0); f.write(str(n) + "\n"); f.flush()
    with open("/workspace/n.tmp", "w") as o:
        o.write("%d %s\n" % (n, got.decode()))
    os.rename("/workspace/n.tmp", "/workspace/n")
    time.sleep(0.02)'
echo "$prog" >prog.py

count() { "$SBX" exec "$1" cat /workspace/n | cut -d" " -f1; }
# above SB N: SB's counter is past N
above() { test "$(count "$1")" -gt "$2"; }
# start SB: the counter program runs in SB, and has counted
start() {
	"$SBX" cp prog.py "$1":/workspace/prog.py &&
		"$SBX" exec "$1" sh -c "nohup python3 /workspace/prog.py >/dev/null 2>&1 &" &&
		wait_until 20 above "$1" 3
}
# advances SB: its counter moves on from what it is now
advances() {
	local a
	a=$(count "$1") && wait_until 20 above "$1" "$a"
}
json_of() { "$SBX" inspect "$1" >"$1.json" && json_assert "$1.json" "$2"; }
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
# runsc_of ID: runsc's processes that name sandbox ID (its sentry)
runsc_of() { pgrep -f "^runsc-sandbox .* $1\$" 2>/dev/null | wc -l; }
# ticks_of PIDS [GUEST]: the CPU time (utime + stime) of the processes PIDS (one list); GUEST
# set, but gVisor's kernel and gofer (runsc-*): init and the stubs the sandbox's code runs in
ticks_of() {
	local p t=0
	for p in $1; do
		[ -n "${2:-}" ] && tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null | grep -q "^runsc-" &&
			continue
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
# ns_procs NS: what runs in pid namespace NS, a line each: pid, start time (stat's field 22),
# command line
ns_procs() {
	local p
	for p in $(in_ns "$1"); do
		echo "$p $(start_of "$p") $(tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null)"
	done
}
start_of() { sed "s/.*) //" "/proc/$1/stat" 2>/dev/null | cut -d" " -f20; }
# all_gone FILE: none of the processes ns_procs listed in FILE runs any more (the same pid and
# start time: a namespace's number is given again once it ended, to what the machine starts
# next), else which do, on stderr
all_gone() {
	local p st rest left=''
	while read -r p st rest; do
		[ -n "$st" ] && [ "$(start_of "$p")" = "$st" ] && left="$left$p $st $rest
"
	done <"$1"
	[ -z "$left" ] && return 0
	test_mismatch "processes left of those in $1" "$left"
}
# ticks NS [GUEST]: the same of every process in pid namespace NS
ticks() { ticks_of "$(in_ns "$1")" "${2:-}"; }
# ticks_move NS T [GUEST]: ticks NS [GUEST] is no longer T
ticks_move() { test "$(ticks "$1" "${3:-}")" != "$2"; }
# state_of PID: its state letter (R, S, T: stopped by a signal, t: stopped by its tracer, ...)
state_of() { sed "s/.*) //" "/proc/$1/stat" 2>/dev/null | cut -d" " -f1; }
# guest_only INIT, for a paused sandbox: 1 when gVisor paused itself (no cgroup freezer: INIT is
# then stopped by a signal beside it); its kernel keeps its clocks meanwhile, a tick of CPU time
# now and then, and what stands still is the sandbox's code. Frozen by its cgroup, everything of
# the sandbox stands still
guest_only() {
	[ "$(state_of "$1")" = T ] && echo 1
	return 0
}
# tamper SB: its counter's file changed under it (again, should the program's own rename have
# replaced the change before it read it), until the program says its memory and file differ
tamper() {
	"$SBX" exec "$1" sh -c "echo 999999999 x >/workspace/n" &&
		"$SBX" exec "$1" test -s /workspace/mismatch
}
# stopped_checkpointed SB: what a checkpoint cut short after its image was written shows
stopped_checkpointed() {
	json_of "$1" "assert r[\"state\"] == \"stopped\" and r[\"checkpointed\"] is True and r[\"checkpoint_bytes\"] > 0, r"
}

if [ "$(id -u)" -eq 0 ]; then
	test_expect_success 'pause --checkpoint: memory and processes to disk, nothing of them left running' '
		sbx create --name c1 --runtime gvisor --net none >/dev/null && start c1 &&
		sbx exec c1 sh -c "V=kept; export V; mkfifo /workspace/fifo; nohup sh -c \"read x </workspace/fifo; echo \\\$V \\\$x >/workspace/shell\" >/dev/null 2>&1 &" &&
		sbx exec c1 sh -c "nohup python3 -c \"import os, time; b = os.urandom(64 << 20); open(\\\"/workspace/held64\\\", \\\"w\\\").close(); time.sleep(1e9)\" >/dev/null 2>&1 &" &&
		wait_until 20 sbx exec c1 test -e /workspace/held64 &&
		id=$(field c1 "[\"id\"]") && ns=$(ns_of c1) &&
		ns_procs "$ns" >before-ps &&
		{ test "$(wc -l <before-ps)" -ge 2 || test_mismatch "under 2 processes in $ns" "$(cat before-ps)"; } &&
		test_eq 1 "$(runsc_of "$id")" &&
		json_of c1 "assert r[\"memory_stats\"][\"usage\"] > 64 << 20, r" &&
		sbx pause --checkpoint c1 >/dev/null &&
		json_of c1 "assert r[\"state\"] == \"released\" and r[\"checkpointed\"] is True and r[\"checkpoint_bytes\"] > 4096, r" &&
		all_gone before-ps && test_eq 0 "$(runsc_of "$id")" &&
		json_of c1 "assert r[\"memory_stats\"][\"usage\"] is None, r" &&
		expect_code 125 sbx exec c1 true 2>err && expect_one_error_line err "is released; run .sbx resume c1." &&
		sbx cp c1:/workspace/n before && a=$(cut -d" " -f1 before) && sleep 0.5 &&
		sbx cp c1:/workspace/n again && test_eq "$(cat before)" "$(cat again)" &&
		echo "$a" >at-checkpoint
	'

	test_expect_success 'resume: the counter counts on from where it stopped, state kept' '
		sbx resume c1 >/dev/null && test_eq running "$(sb_state c1)" &&
		json_of c1 "assert r[\"checkpointed\"] is False and r[\"memory_stats\"][\"usage\"] > 64 << 20, r" &&
		a=$(cat at-checkpoint) && b=$(count c1) && test "$b" -ge "$a" &&
		wait_until 20 above c1 $((a + 5)) &&
		sbx exec c1 cat /workspace/n >n && test_match "^[0-9]+ x$" "$(cat n)" &&
		sbx exec c1 sh -c "echo fed >/workspace/fifo" &&
		wait_until 10 sbx exec c1 test -s /workspace/shell &&
		test_eq "kept fed" "$(sbx exec c1 cat /workspace/shell)" &&
		expect_code 1 sbx exec c1 test -e /workspace/mismatch
	'

	test_expect_success 'a second checkpoint and resume of the same sandbox' '
		a=$(count c1) && sbx pause --checkpoint c1 >/dev/null && sbx resume c1 >/dev/null &&
		test "$(count c1)" -ge "$a" && advances c1
	'

	# killed before runsc began, or as it began (its runsc dies with it): nothing happened
	for step in checkpoint-noted checkpoint-started; do
		test_expect_success "pause --checkpoint killed at $step: undone, it runs on" "
			expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" pause --checkpoint c1 &&
			test_eq running \"\$(sb_state c1)\" &&
			json_of c1 'assert r[\"checkpointed\"] is False, r' &&
			expect_code 0 sbx exec c1 true && advances c1 && sleep 0.3 && advances c1
		"
	done

	# killed once the image was written: stopped, checkpointed; resume restores
	for step in checkpoint-ended checkpoint-written pause-provider-done; do
		test_expect_success "pause --checkpoint killed at $step: stopped and checkpointed; resume restores it" "
			id=\$(field c1 '[\"id\"]') &&
			a=\$(count c1) && expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" pause --checkpoint c1 &&
			stopped_checkpointed c1 && test_eq 0 \"\$(runsc_of \$id)\" &&
			expect_code 125 sbx exec c1 true 2>err && expect_one_error_line err 'is stopped.*run .sbx resume c1.' &&
			sbx resume c1 >/dev/null && test_eq running \"\$(sb_state c1)\" &&
			test \"\$(count c1)\" -ge \"\$a\" && advances c1 &&
			json_of c1 'assert r[\"checkpointed\"] is False, r'
		"
	done

	test_expect_success 'resume killed while it restores: stopped and checkpointed; resume restores it' '
		a=$(count c1) && sbx pause --checkpoint c1 >/dev/null &&
		expect_code 125 env SBX_TEST_CRASH_AT=restore-set-aside "$SBX" resume c1 2>err &&
		stopped_checkpointed c1 &&
		sbx resume c1 >/dev/null && test "$(count c1)" -ge "$a" && advances c1
	'

	test_expect_success 'pause --checkpoint killed from outside as runsc writes: the state is true, resume restores' '
		sbx exec c1 sh -c "nohup python3 -c \"import os, time; b = os.urandom(192 << 20); open(\\\"/workspace/held192\\\", \\\"w\\\").close(); time.sleep(1e9)\" >/dev/null 2>&1 &" &&
		wait_until 30 sbx exec c1 test -e /workspace/held192 &&
		id=$(field c1 "[\"id\"]") && img=$SBX_HOME/sandboxes/$id/gvisor/checkpoint/checkpoint.img &&
		a=$(count c1) && { "$SBX" pause --checkpoint c1 >/dev/null 2>&1 & p=$!; } &&
		i=0 && while [ ! -s "$img" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i + 1)); done &&
		kill -9 $p && { wait $p; true; } &&
		sbx inspect c1 >k.json &&
		json_assert k.json "assert r[\"state\"] in (\"stopped\", \"released\"), r" &&
		wait_until 60 json_of c1 "assert r[\"checkpointed\"] is True, r" &&
		test_eq 0 "$(runsc_of "$id")" && expect_code 125 sbx exec c1 true 2>/dev/null &&
		sbx resume c1 >/dev/null && test "$(count c1)" -ge "$a" && advances c1 &&
		test_eq 1 "$(runsc_of "$id")"
	'

	test_expect_success 'resume while a sentry that sbx left still writes the image: it waits, then restores' '
		id=$(field c1 "[\"id\"]") && img=$SBX_HOME/sandboxes/$id/gvisor/checkpoint/checkpoint.img &&
		a=$(count c1) && { "$SBX" pause --checkpoint c1 >/dev/null 2>&1 & p=$!; } &&
		i=0 && while [ ! -s "$img" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i + 1)); done &&
		kill -9 $p && { wait $p; true; } &&
		sbx resume c1 >/dev/null && test_eq running "$(sb_state c1)" &&
		test "$(count c1)" -ge "$a" && advances c1 &&
		sbx rm -f c1 >/dev/null && test -z "$(sbx ls -q)"
	'

	test_expect_success 'snapshot create --memory: files and processes of one moment; the sandbox runs on' '
		sbx create --name s1 --runtime gvisor --net none >/dev/null && start s1 &&
		sbx snapshot create --memory --name mem --json s1 >snap &&
		json_assert snap "assert r[\"memory\"] is True and r[\"runtime\"] == \"gvisor\" and r[\"net\"] == \"none\", r" &&
		advances s1 && expect_code 1 sbx exec s1 test -e /workspace/mismatch
	'

	test_expect_success 'three forks of a memory snapshot, no options repeated: each runs on from its memory' '
		for i in 1 2 3; do sbx fork mem --name k$i >/dev/null || exit 1; done &&
		for i in 1 2 3; do
			json_of k$i "o = r[\"options\"]; assert o[\"runtime\"] == \"gvisor\" and o[\"net\"][\"mode\"] == \"none\", o" &&
			advances k$i && sleep 0.1 && advances k$i &&
			expect_code 1 sbx exec k$i test -e /workspace/mismatch || exit 1
		done
	'

	test_expect_success 'the check would see memory and files of different moments (control)' '
		wait_until 20 tamper k1 &&
		test_grep "file 999999999" <(sbx exec k1 cat /workspace/mismatch) &&
		sbx exec k1 rm /workspace/mismatch
	'

	test_expect_success 'the forks diverge, each on its own; one killed, the others go on' '
		sbx exec k1 sh -c "echo 1 >/workspace/step" && sbx exec k2 sh -c "echo 1000 >/workspace/step" &&
		sbx exec k3 sh -c "echo 1000000 >/workspace/step" &&
		for k in k1:1 k2:1000 k3:1000000; do
			sb=${k%:*} && step=${k#*:} && advances $sb && sleep 0.2 &&
			a=$(count $sb) && wait_until 20 above $sb "$a" && b=$(count $sb) &&
			test "$(( (b - a) % step ))" -eq 0 || exit 1
		done &&
		test_eq 3 "$(for k in k1 k2 k3; do count $k; done | sort -u | wc -l)" &&
		sbx exec k3 pkill -f prog.py && sleep 0.3 && b=$(count k3) && sleep 0.3 &&
		test_eq "$b" "$(count k3)" "the killed fork" &&
		advances k1 && advances k2 && advances s1
	'

	test_expect_success 'a fork of a memory snapshot with a contradicting --net is refused (one line)' '
		expect_code 125 sbx fork mem --name k4 --net open 2>err &&
		expect_one_error_line err "snapshot .mem. holds the processes and memory of a sandbox on --net none.*leave out --net" &&
		expect_code 125 sbx inspect k4 2>/dev/null &&
		sbx fork mem --name k4 --runtime gvisor --net none >/dev/null && advances k4 &&
		sbx rm -f k1 k2 k3 k4 >/dev/null
	'

	test_expect_success 'snapshot --memory killed while the files are copied: stopped and checkpointed, no snapshot' '
		a=$(count s1) &&
		expect_code 137 env SBX_TEST_CRASH_AT=snapshot-memory-stopped "$SBX" snapshot create --memory --name m2 s1 &&
		stopped_checkpointed s1 && sbx snapshot ls --json >snaps &&
		json_assert snaps "assert [s[\"name\"] for s in r] == [\"mem\"], r" &&
		sbx resume s1 >/dev/null && test "$(count s1)" -ge "$a" && advances s1
	'

	test_expect_success 'snapshot --memory killed once the sandbox was restored: it runs' '
		expect_code 137 env SBX_TEST_CRASH_AT=restore-ran "$SBX" snapshot create --memory --name m3 s1 &&
		test_eq running "$(sb_state s1)" && json_of s1 "assert r[\"checkpointed\"] is False, r" &&
		advances s1 && sbx rm -f s1 >/dev/null && sbx snapshot rm mem >/dev/null &&
		test -z "$(sbx ls -q)"
	'

	test_expect_success 'a restore whose gVisor kernel cannot be recorded: 125 in one line, the image spent (never restored twice); the next resume boots on the files' '
		sbx create --name c3 --runtime gvisor --net none >/dev/null && start c3 &&
		sbx pause --checkpoint c3 >/dev/null && json_of c3 "assert r[\"checkpointed\"] is True, r" &&
		d=$SBX_HOME/sandboxes/$(field c3 "[\"id\"]")/gvisor && rm -f "$d/sentry" && mkdir "$d/sentry" &&
		expect_code 125 sbx resume c3 2>err && expect_one_error_line err "cannot resume .c3.: .*gvisor/sentry" &&
		json_of c3 "assert r[\"state\"] != \"running\" and r[\"checkpointed\"] is False, r" &&
		rmdir "$d/sentry" && sbx resume c3 >/dev/null && test_eq running "$(sb_state c3)" &&
		json_of c3 "assert r[\"checkpointed\"] is False, r" && sbx rm -f c3 >/dev/null
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
	g=$(guest_only "$(field p1 "[\"pid\"]")") &&
	a=$(ticks "$ns" "$g") && sleep 0.5 &&
	test_eq "$a" "$(ticks "$ns" "$g")" "CPU ticks while paused" &&
	sbx resume p1 >/dev/null && wait_until 20 ticks_move "$ns" "$a" "$g" &&
	sbx rm -f p1 >/dev/null
'

# counted_past SB N: SB's counter (/tmp/n) is past N
counted_past() { test "$("$SBX" exec "$1" cat /tmp/n)" -gt "$2"; }
# sig_stopped PIDS INIT: the processes of PIDS (one list) but INIT in a stop a signal made
# (state T; a stub gVisor traces waits in state t)
sig_stopped() {
	local p
	for p in $1; do
		[ "$p" != "$2" ] && [ "$(state_of "$p")" = T ] && echo "$p"
	done
	return 0
}

# root freezes the sandbox's cgroup; an ordinary user without a writable cgroup has gVisor
# pause itself (runsc pause), with nothing of gVisor's stopped by a signal. While paused, the
# processes of its pid namespace are those listed once (m)
TEST_TIMEOUT=240
test_expect_success '20 rounds of pause and resume of a spinner and a counter: paused, CPU time and count stand still; resumed, both move on (controls)' '
	sbx create --name pr --runtime gvisor --net none >/dev/null &&
	sbx exec pr sh -c "nohup sh -c \"while :; do :; done\" >/dev/null 2>&1 &" &&
	sbx exec pr sh -c "nohup sh -c \"i=0; while :; do i=\\\$((i+1)); echo \\\$i >/tmp/n.tmp; mv /tmp/n.tmp /tmp/n; sleep 0.01; done\" >/dev/null 2>&1 &" &&
	wait_until 20 sbx exec pr test -s /tmp/n &&
	ns=$(ns_of pr) && init=$(field pr "[\"pid\"]") &&
	: "control: running, its CPU time moves and the count goes on" &&
	t=$(ticks "$ns") && wait_until 20 ticks_move "$ns" "$t" &&
	c=$(sbx exec pr cat /tmp/n) && wait_until 20 counted_past pr "$c" &&
	for k in $(seq 20); do
		sbx pause pr >/dev/null && test_eq paused "$(sb_state pr)" "the state after pause $k" &&
		m=$(in_ns "$ns") && g=$(guest_only "$init") &&
		test_eq "" "$(sig_stopped "$m" "$init")" "gVisor processes stopped by a signal ($k)" &&
		sbx cp pr:/tmp/n c1 && a=$(ticks_of "$m" "$g") && sleep 0.3 &&
		test_eq "$a" "$(ticks_of "$m" "$g")" "CPU ticks while paused ($k)" &&
		sbx cp pr:/tmp/n c2 && test_eq "$(cat c1)" "$(cat c2)" "the count while paused ($k)" &&
		sbx resume pr >/dev/null && test_eq running "$(sb_state pr)" "the state after resume $k" &&
		wait_until 20 ticks_move "$ns" "$a" "$g" && wait_until 20 counted_past pr "$(cat c1)" ||
			exit 1
	done &&
	sbx rm -f pr >/dev/null
'
TEST_TIMEOUT=60

test_expect_success 'the default runtime refuses pause --checkpoint, naming gVisor (one line); plain pause works' '
	sbx create --name l1 --net none >/dev/null &&
	expect_code 125 sbx pause --checkpoint l1 2>err &&
	expect_one_error_line err "pause --checkpoint needs --runtime gvisor \(sandbox .l1. runs on the default runtime\)" &&
	test_eq running "$(sb_state l1)" &&
	sbx pause l1 >/dev/null && test_eq paused "$(sb_state l1)" && sbx rm -f l1 >/dev/null
'

test_expect_success 'snapshot create --memory on the default runtime is refused, naming gVisor (one line)' '
	sbx create --name l2 --net none >/dev/null &&
	expect_code 125 sbx snapshot create --memory l2 2>err && test_eq 1 "$(wc -l <err)" &&
	test_grep "needs --runtime gvisor" err && test -z "$(sbx snapshot ls -q)" &&
	sbx snapshot create l2 >/dev/null && sbx rm -f l2 >/dev/null
'

test_expect_success 'pause --checkpoint with --release is a usage error' '
	expect_code 125 sbx pause --checkpoint --release nope 2>err && test_grep "exclusive" err
'

test_done
