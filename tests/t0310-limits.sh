#!/bin/bash
# --memory, --pids-limit, --cpus through cgroup v2, v1 or the hybrid: an OOM kill stays inside
# and is reported, a fork bomb stops at the limit, a spinner gets about its quota. Without a
# writable cgroup (an unprivileged user without delegation) a limit fails creation clearly.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

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
else
	test_expect_success 'no writable cgroup: a limit fails creation with why and how; nothing is left' '
		for opt in "--memory 64m" "--pids-limit 10" "--cpus 0.5"; do
			expect_code 125 sbx create --name lim $opt 2>err || exit 1
			expect_one_error_line err "no writable cgroup .*delegat" || exit 1
		done &&
		test_eq "" "$(ls "$SBX_HOME/sandboxes")" && test ! -e "$SBX_HOME/names/lim"
	'
	test_skip 'limits enforced (OOM kill, fork bomb, CPU quota)' "uid $(id -u) has no writable cgroup (no delegated cgroup v2 subtree on this host)"
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
