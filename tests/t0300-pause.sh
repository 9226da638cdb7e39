#!/bin/bash
# pause, pause --release, resume: frozen processes, kept files, states by looking, exec and cp
# while paused, the idle timeout (--ttl).
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

init_pid() { sbx inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])'; }

# host_pid SB INNER: the host pid of the sandbox's process INNER (by its pid namespace)
host_pid() {
	local ns p
	ns=$(readlink "/proc/$(init_pid "$1")/ns/pid")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] || continue
		if [ "$(awk '/^NSpid:/ { print $NF }' "$p/status" 2>/dev/null)" = "$2" ]; then
			echo "${p#/proc/}"
			return 0
		fi
	done
	return 1
}

# cpu_ticks PID: utime + stime
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

test_expect_success 'set-up: a sandbox with a file and a CPU spinner' '
	sbx create --name box >/dev/null &&
	sbx exec box sh -c "echo kept >/workspace/f" &&
	id=$(sbx exec -d box sh -c "while :; do :; done") &&
	sbx ps box --json | python3 -c "import json, sys
print([j[\"pid\"] for j in json.load(sys.stdin) if j[\"id\"] == sys.argv[1]][0])" "$id" >inner &&
	host_pid box "$(cat inner)" >hpid && test -s hpid
'

test_expect_success 'pause: every process frozen, CPU time stands still, state paused' '
	sbx pause box >out && test_eq box "$(cat out)" &&
	test_eq paused "$(sb_state box)" &&
	sbx ls >ls && grep -E "^[0-9a-f]{12}  +box  +local  +paused" ls &&
	a=$(cpu_ticks "$(cat hpid)") && sleep 0.5 && b=$(cpu_ticks "$(cat hpid)") &&
	test_eq "$b" "$a" &&
	sbx ls --json >j && json_assert j "assert r[0][\"state\"] == \"paused\", r" &&
	sbx pause box >/dev/null && test_eq paused "$(sb_state box)"
'

test_expect_success 'exec into a paused sandbox: 125 with the way out; --resume resumes first' '
	expect_code 125 sbx exec box true 2>err &&
	expect_one_error_line err "^sbx: error: sandbox .box. is paused; run .sbx resume box.$" &&
	sbx exec --resume box cat /workspace/f >out && test_eq kept "$(cat out)" &&
	test_eq running "$(sb_state box)" &&
	sbx pause box >/dev/null
'

test_expect_success 'cp works on a paused sandbox, both ways' '
	echo in >h && sbx cp h box:/workspace/h && sbx cp box:/workspace/f back &&
	test_eq kept "$(cat back)" && test_eq paused "$(sb_state box)"
'

test_expect_success 'resume: the spinner runs again, the files are there; rm without -f refuses paused' '
	expect_code 125 sbx rm box 2>err &&
	expect_one_error_line err "is paused; remove it anyway with .sbx rm -f box." &&
	sbx resume box >out && test_eq box "$(cat out)" && test_eq running "$(sb_state box)" &&
	a=$(cpu_ticks "$(cat hpid)") && i=0 &&
	while [ "$(cpu_ticks "$(cat hpid)")" = "$a" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done &&
	test_ne "$a" "$(cpu_ticks "$(cat hpid)")" &&
	test_eq in "$(sbx exec box cat /workspace/h)" &&
	sbx resume box >/dev/null
'

test_expect_success 'pause --release: processes end (SIGTERM first), files and record stay; released' '
	sbx exec -d box sh -c "trap \"echo graceful >/workspace/term; exit 0\" TERM; while :; do sleep 0.05; done" >/dev/null &&
	sleep 0.3 &&
	pids=$(sandbox_pids "$(sbx ls -q)") && test_ne "" "$pids" &&
	sbx pause --release --grace 5s box >/dev/null &&
	test_eq released "$(sb_state box)" &&
	for p in $pids; do ! pid_alive "$p" || exit 1; done &&
	expect_code 125 sbx exec box true 2>err &&
	expect_one_error_line err "is released; run .sbx resume box." &&
	sbx cp box:/workspace/f out && test_eq kept "$(cat out)" &&
	sbx pause --release box >/dev/null &&
	expect_code 125 sbx pause box 2>err && expect_one_error_line err "is released"
'

test_expect_success 'resume a released sandbox: it boots again with all its files' '
	sbx resume box >/dev/null && test_eq running "$(sb_state box)" &&
	test "$(sbx exec box cat /workspace/f /workspace/term)" = "kept
graceful" &&
	test_eq box "$(sbx exec box hostname)"
'

test_expect_success 'pause --release on a paused sandbox; --grace 0 kills at once' '
	sbx exec -d box sh -c "trap \"\" TERM; while :; do sleep 1; done" >/dev/null &&
	sbx pause box >/dev/null &&
	sbx pause --release --grace 0 box >/dev/null && test_eq released "$(sb_state box)" &&
	sbx resume box >/dev/null && test_eq kept "$(sbx exec box cat /workspace/f)"
'

test_expect_success 'pause while a process waits in vfork for a child stopped before its exec' '
	cat >vf.c <<-\EOF &&
	#include <signal.h>
	#include <sys/wait.h>
	#include <unistd.h>
	int main(void)
	{
		pid_t p = vfork();
		if (p == 0) {
			kill(getpid(), SIGSTOP); /* stopped between vfork and exec */
			execl("/bin/true", "true", (char *)0);
			_exit(1);
		}
		kill(p, SIGCONT); /* not reached before the child execs: the parent waits */
		waitpid(p, 0, 0);
		return 0;
	}
	EOF
	cc -o vf vf.c && sbx cp vf box:/workspace/vf &&
	sbx exec -d box sh -c "/workspace/vf; echo vfork-done >/workspace/vf.out" >/dev/null &&
	: "wait until the parent sleeps in vfork, its child stopped" &&
	for i in $(seq 50); do
		sbx exec box sh -c "grep -l \"^State:.*D\" /proc/[0-9]*/status" 2>/dev/null | grep -q . && break
		sleep 0.1
	done &&
	sbx pause box >/dev/null && test_eq paused "$(sb_state box)" &&
	sbx resume box >/dev/null &&
	: "the stopped child is the sandbox'"'"'s own business: it goes on when sent SIGCONT" &&
	sbx exec box sh -c "for p in \$(grep -l \"^State:.*T\" /proc/[0-9]*/status); do
		d=\${p%/status}; kill -CONT \${d#/proc/}; done" &&
	for i in $(seq 50); do sbx exec box test -s /workspace/vf.out && break; sleep 0.1; done &&
	test_eq vfork-done "$(sbx exec box cat /workspace/vf.out)"
'

test_expect_success 'usage: --grace without --release, bad durations, no sandbox: 125' '
	expect_code 125 sbx pause --grace 1s box 2>err && test_grep "goes with --release" err &&
	expect_code 125 sbx pause --release --grace soon box 2>err && test_grep "invalid duration" err &&
	expect_code 125 sbx pause 2>err && test_grep "missing sandbox" err &&
	expect_code 125 sbx resume nosuch 2>err && expect_one_error_line err "nosuch"
'

test_expect_success '--ttl: an idle sandbox is paused by its supervisor; inspect shows the deadline' '
	sbx create --name idle --ttl 1s >/dev/null &&
	sbx inspect idle >j &&
	json_assert j "assert r[\"idle_deadline\"] and r[\"options\"][\"ttl_ms\"] == 1000, r" &&
	wait_state idle paused 15 &&
	sbx inspect idle >j && json_assert j "assert r[\"idle_deadline\"] is None, r" &&
	sbx resume idle >/dev/null && test_eq running "$(sb_state idle)" &&
	wait_state idle paused 15 &&
	sbx rm -f idle >/dev/null
'

test_expect_success '--ttl: exec traffic keeps a sandbox running' '
	sbx create --name busy --ttl 4s >/dev/null &&
	i=0 && while [ $i -lt 12 ]; do sbx exec busy true || exit 1; sleep 0.5; i=$((i+1)); done &&
	test_eq running "$(sb_state busy)" &&
	sbx rm -f busy >/dev/null
'

none_alive() {
	local p
	for p in "$@"; do
		! pid_alive "$p" || return 1
	done
}

test_expect_success '--ttl-action rm: the idle sandbox is removed with everything it had' '
	id=$(sbx create --name gone --ttl 1s --ttl-action rm) &&
	pids=$(sandbox_pids "$id") &&
	i=0 && while [ -e "$SBX_HOME/sandboxes/$id" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done &&
	# the supervisor removes the sandbox as its last act, then ends
	wait_until 5 none_alive $pids &&
	assert_gone "$id" $pids &&
	expect_code 125 sbx inspect gone 2>/dev/null &&
	test ! -e "$SBX_HOME/names/gone"
'

test_expect_success 'create: --ttl-action without --ttl, bad --ttl: 125' '
	expect_code 125 sbx create --ttl-action rm 2>err && test_grep "goes with --ttl" err &&
	expect_code 125 sbx create --ttl never 2>err && test_grep "invalid --ttl" err &&
	expect_code 125 sbx create --ttl 1s --ttl-action stop 2>err && test_grep "use pause or rm" err
'

if [ -w /sys/fs/cgroup/freezer/cgroup.procs ]; then
	test_expect_success 'the v1 freezer (a host without cgroup v2): pause, exec refused, resume, rm -f' '
		id=$(SBX_TEST_CGROUP_V1_ONLY=1 "$SBX" create --name v1) &&
		test_grep ! "^v2 " "$SBX_HOME/sandboxes/$id/cgroups" &&
		fz=$(awk "\$1 == \"freezer\" { print \$2 \"/sandbox\" }" "$SBX_HOME/sandboxes/$id/cgroups") &&
		sbx exec -d v1 sh -c "while :; do :; done" >/dev/null &&
		sbx pause v1 >/dev/null && test_eq FROZEN "$(cat "$fz/freezer.state")" &&
		test_eq paused "$(sb_state v1)" &&
		expect_code 125 sbx exec v1 true 2>err && expect_one_error_line err "is paused" &&
		sbx resume v1 >/dev/null && test_eq THAWED "$(cat "$fz/freezer.state")" &&
		test_eq ok "$(sbx exec v1 echo ok)" &&
		pids=$(sandbox_pids "$id") && sbx pause v1 >/dev/null &&
		sbx rm -f v1 >/dev/null && assert_gone "$id" $pids
	'
else
	test_skip 'the v1 freezer' "no writable v1 freezer hierarchy for uid $(id -u)"
fi

# the hybrid layout: a v1 freezer and a cgroup2 mount, both in every sandbox's cgroups
if [ -w /sys/fs/cgroup/freezer/cgroup.procs ] && awk '$3 == "cgroup2" { f = 1 } END { exit !f }' /proc/self/mounts; then
	test_expect_success 'hybrid: a pause that fell back to the v1 freezer is undone by resume' '
		id=$(sbx create --name hy) &&
		test_grep "^v2 " "$SBX_HOME/sandboxes/$id/cgroups" &&
		fz=$(awk "\$1 == \"freezer\" { print \$2 \"/sandbox\" }" "$SBX_HOME/sandboxes/$id/cgroups") &&
		test -d "$fz" &&
		: "what a pause leaves when cgroup.freeze does not settle in time" &&
		echo FROZEN >"$fz/freezer.state" && test_eq paused "$(sb_state hy)" &&
		sbx resume hy >/dev/null && test_eq THAWED "$(cat "$fz/freezer.state")" &&
		test_eq ok "$(timeout 10 "$SBX" exec hy echo ok)" &&
		sbx rm -f hy >/dev/null
	'
else
	test_skip 'hybrid: v1 freezer fallback' "no writable v1 freezer and cgroup2 mount together for uid $(id -u)"
fi

test_expect_success 'rm -f of a paused sandbox leaves nothing' '
	id=$(sbx ls -q | head -n 1) && pids=$(sandbox_pids "$id") &&
	sbx pause box >/dev/null && sbx rm -f box >/dev/null &&
	assert_gone "$id" $pids
'

test_done
