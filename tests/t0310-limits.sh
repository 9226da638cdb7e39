#!/bin/bash
# --memory, --pids-limit, --cpus through cgroup v2, v1 or the hybrid: an OOM kill stays inside
# and is reported (by exec in one line, by inspect), a fork bomb stops at the limit, a spinner
# gets about its quota. The sandbox sees its own cgroup, read-only, at /sys/fs/cgroup (so Node
# sizes itself for --memory) and ceil(--cpus) CPUs (nproc). Without a writable cgroup (an
# unprivileged user without delegation) a limit fails creation clearly.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 node

# can this uid write a cgroup hierarchy sbx would use? (root here; a delegated v2 subtree)
writable_cgroup() {
	local d
	for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/unified; do
		[ -w "$d/cgroup.procs" ] && return 0
	done
	return 1
}

if writable_cgroup; then
	test_expect_success '--memory: past the limit the kernel kills inside; the sandbox stays; inspect counts it' '
		sbx create --name mem --memory 64m >/dev/null &&
		expect_code 137 sbx exec mem python3 -c "b = b\"x\" * (256 << 20); print(len(b))" &&
		test_eq running "$(sb_state mem)" &&
		test_eq alive "$(sbx exec mem echo alive)" &&
		sbx inspect mem >j &&
		json_assert j "assert r[\"oom_kills\"] >= 1 and r[\"options\"][\"memory\"] == 64 << 20, r" &&
		json_assert j "m = r[\"memory_stats\"]; assert m[\"limit\"] == 64 << 20 and m[\"usage\"] > 0, m" &&
		test_eq 16777216 "$(sbx exec mem python3 -c "b = b\"x\" * (16 << 20); print(len(b))")" &&
		sbx rm -f mem >/dev/null
	'

	test_expect_success '--pids-limit: a fork bomb stops at the limit; the host stays responsive' '
		sbx create --name pids --pids-limit 40 >/dev/null &&
		sbx exec pids sh -c "(i=0; while [ \$i -lt 200 ]; do sleep 30 & i=\$((i+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo \$#" >n &&
		n=$(cat n) && test_ne "" "$n" && test "$n" -le 40 && test "$n" -ge 20 &&
		test_eq host "$(echo host)" &&
		sbx rm -f pids >/dev/null
	'

	test_expect_success '--cpus 0.5: a spinner gets about half a CPU' '
		sbx create --name cpu --cpus 0.5 >/dev/null &&
		sbx exec cpu python3 -c "
import os, time
t0 = time.time(); c0 = sum(os.times()[:2])
while time.time() - t0 < 2: pass
print(sum(os.times()[:2]) - c0)" >used &&
		python3 -c "import sys; u = float(open(\"used\").read()); sys.exit(0 if 0.05 < u < 1.4 else 1)" &&
		sbx rm -f cpu >/dev/null
	'

	test_expect_success 'limits survive release and resume' '
		sbx create --name again --memory 64m >/dev/null &&
		sbx pause --release again >/dev/null && sbx resume again >/dev/null &&
		expect_code 137 sbx exec again python3 -c "b = b\"x\" * (256 << 20)" &&
		sbx rm -f again >/dev/null
	'

	# a python allocation loop: 1 MiB at a time until the kernel stops it (used in the eval'd bodies)
	# shellcheck disable=SC2034
	hog='b = []
while True: b.append(b"x" * (1 << 20))'

	test_expect_success 'an OOM kill: exec says so in one line (the command, its pid) and exits 137' '
		sbx create --name oom --memory 32m >/dev/null &&
		expect_code 137 sbx exec oom python3 -c "$hog" 2>err &&
		expect_one_error_line err "^sbx: warning: sandbox .oom. is out of memory \(--memory 32m\): the kernel killed the command .python3. \(pid [0-9]+\)$" &&
		expect_code 3 sbx exec oom sh -c "python3 -c \"\$0\" 2>/dev/null; exit 3" "$hog" 2>err &&
		expect_one_error_line err "out of memory \(--memory 32m\): the kernel killed a process of the command$" &&
		expect_code 0 sbx exec oom python3 -c "print(1)" >out 2>err &&
		test_eq 1 "$(cat out)" && test_eq "" "$(cat err)" &&
		sbx inspect oom >j &&
		json_assert j "assert r[\"oom_kills\"] >= 2, r" &&
		json_assert j "m = r[\"memory_stats\"]; assert m[\"limit\"] == 32 << 20 and m[\"usage\"] > 0, m
assert isinstance(m[\"failcnt\"], int) or isinstance(m[\"events_max\"], int), m
p = r[\"pressure\"]
assert p is None if r[\"cgroup\"] == \"v1\" else isinstance(p[\"memory\"][\"some_avg10\"], float) and isinstance(p[\"cpu\"][\"full_avg10\"], float), p" &&
		sbx rm -f oom >/dev/null
	'

	test_expect_success 'inside: its own cgroup at /sys/fs/cgroup, read-only; nproc and Node count the limits' '
		sbx create --name view --memory 256m --cpus 0.5 >/dev/null &&
		sbx exec view sh -c "if [ -e /sys/fs/cgroup/memory.max ]; then cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max; else cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us; fi" >lim &&
		test_eq 268435456 "$(sed -n 1p lim)" && test_match "^50000( 100000)?$" "$(sed -n 2p lim)" &&
		sbx exec view cat /proc/self/cgroup >cg && test_grep "^0::/$" cg && test_grep ! -E ":/.+" cg &&
		sbx exec view sh -c "ls /sys/fs/cgroup/memory /sys/fs/cgroup 2>/dev/null" >ls &&
		test_grep ! "^sbx$" ls &&
		w="import errno, sys
try:
    open(sys.argv[1], \"w\").write(\"1\")
    print(\"written\")
except OSError as e:
    print(errno.errorcode[e.errno])" &&
		f=/sys/fs/cgroup/memory/memory.limit_in_bytes &&
		if sbx exec view test -e /sys/fs/cgroup/memory.max; then f=/sys/fs/cgroup/memory.max; fi &&
		test_eq EROFS "$(sbx exec view python3 -c "$w" "$f")" &&
		test_eq written "$(sbx exec view python3 -c "$w" /tmp/control)" &&
		test_eq 1 "$(sbx exec view nproc)" &&
		test_eq 1 "$(sbx exec view python3 -c "import os; print(len(os.sched_getaffinity(0)))")" &&
		sbx exec view node -e "const v8 = require(\"v8\"), os = require(\"os\");
console.log(v8.getHeapStatistics().heap_size_limit, process.constrainedMemory(), os.availableParallelism())" >node &&
		read -r heap cmem par <node &&
		test_eq 268435456 "$cmem" && test_eq 1 "$par" && test "$heap" -lt $((512 << 20)) &&
		sbx create --name wide >/dev/null &&
		test_eq "$(nproc)" "$(sbx exec wide nproc)" &&
		sbx exec wide node -e "console.log(require(\"v8\").getHeapStatistics().heap_size_limit)" >wheap &&
		test "$(cat wheap)" -gt "$heap" &&
		sbx rm -f view wide >/dev/null
	'

	test_expect_success '--nested: a delegated cgroup, writable below, not its own limits; removed with it' '
		sbx create --nested --name deleg --memory 64m >/dev/null &&
		id=$(sbx inspect deleg | python3 -c "import json, sys; print(json.load(sys.stdin)[\"id\"])") &&
		sbx exec deleg sh -c "if [ -e /sys/fs/cgroup/memory.max ]; then d=/sys/fs/cgroup; l=memory.max; else d=/sys/fs/cgroup/memory; l=memory.limit_in_bytes; fi
mkdir \$d/sub && echo 16777216 >\$d/sub/\$l && cat \$d/sub/\$l && echo \$\$ >\$d/sub/cgroup.procs && grep -c :/sub /proc/self/cgroup
echo 1 >\$d/\$l 2>/dev/null || echo refused" >out &&
		test_eq "16777216
1
refused" "$(cat out)" &&
		sbx rm -f deleg >/dev/null &&
		test_eq "" "$(ls -d /sys/fs/cgroup/*/sbx/"$id" /sys/fs/cgroup/sbx/"$id" 2>/dev/null)"
	'
else
	test_expect_success 'no writable cgroup: a limit fails creation with why and how; nothing is left' '
		for opt in "--memory 64m" "--pids-limit 10" "--cpus 0.5"; do
			expect_code 125 sbx create --name lim $opt 2>err || exit 1
			expect_one_error_line err "no writable cgroup .*delegat" || exit 1
		done &&
		test_eq "" "$(ls "$SBX_HOME/sandboxes")" && test ! -e "$SBX_HOME/names/lim"
	'
	test_expect_success 'no cgroup of its own: nothing of the host'"'"'s cgroups shows inside' '
		sbx create --name none >/dev/null &&
		test_eq "" "$(sbx exec none ls -A /sys/fs/cgroup)" &&
		test_ne "" "$(ls -A /sys/fs/cgroup)" &&
		test_eq "$(nproc)" "$(sbx exec none nproc)" &&
		sbx rm -f none >/dev/null
	'
	test_skip 'limits enforced (OOM kill and its line, fork bomb, CPU quota, the cgroup inside, nproc, Node)' "uid $(id -u) has no writable cgroup (no delegated cgroup v2 subtree on this host)"
fi

test_expect_success 'without limits, creation works whatever the cgroups' '
	sbx create --name free >/dev/null && test_eq ok "$(sbx exec free echo ok)" &&
	sbx inspect free >j && json_assert j "assert r[\"cgroup\"] in (\"v1\", \"v2\", \"hybrid\", \"none\"), r" &&
	sbx rm -f free >/dev/null
'

test_expect_success 'bad limit values: 125' '
	expect_code 125 sbx create --memory lots 2>err && test_grep "invalid --memory" err &&
	expect_code 125 sbx create --memory 1k 2>err && test_grep "at least 6m" err &&
	expect_code 125 sbx create --cpus 0 2>err && test_grep "invalid --cpus" err &&
	expect_code 125 sbx create --pids-limit -3 2>err && test_grep "invalid --pids-limit" err
'

test_done
