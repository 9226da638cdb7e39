#!/bin/bash
# A running sandbox's liveness: keepalive (the idle timeout starts again, a new --ttl), update
# --ttl/--cpus/--memory on a live sandbox (seen inside and by inspect; a memory limit below
# what the sandbox uses is refused, as docker update's), the state "starting" while a
# sandbox is made, and stats (one sample: CPU, memory, processes).
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

# deadline SB: inspect's idle deadline (unix seconds)
deadline() { sbx inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["idle_deadline_unix"])'; }

# the memory limit and the CPU quota a sandbox reads at /sys/fs/cgroup (v2 or v1), one a line
# shellcheck disable=SC2034 # used in the eval'd bodies
limits='if [ -e /sys/fs/cgroup/memory.max ]; then cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max; else cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us; fi'

test_expect_success 'keepalive: the idle deadline starts again from now; prints nothing' '
	sbx create --name ka --ttl 1h >/dev/null &&
	before=$(deadline ka) && sleep 1.2 &&
	sbx keepalive ka >out && test_eq "" "$(cat out)" &&
	after=$(deadline ka) && test "$after" -gt "$before" &&
	sbx rm -f ka >/dev/null
'

test_expect_success 'keepalive --ttl keeps a sandbox past its deadline; its control is paused' '
	sbx create --name ctl --ttl 2s >/dev/null && sbx create --name kept --ttl 2s >/dev/null &&
	sbx keepalive --ttl 1h kept &&
	wait_state ctl paused 20 && sleep 2 &&
	test_eq running "$(sb_state kept)" &&
	sbx inspect kept >j && json_assert j "assert r[\"options\"][\"ttl_ms\"] == 3600000, r" &&
	sbx rm -f ctl kept >/dev/null
'

test_expect_success 'update --ttl on a sandbox created without one: its supervisor pauses it' '
	sbx create --name late >/dev/null &&
	sbx inspect late >j && json_assert j "assert r[\"idle_deadline\"] is None, r" &&
	test_eq late "$(sbx update late --ttl 1s)" &&
	wait_state late paused 20 &&
	expect_code 125 sbx keepalive late 2>err &&
	expect_one_error_line err "is paused: only a running sandbox is kept alive" &&
	expect_code 125 sbx keepalive --ttl 2h late 2>err &&
	sbx inspect late >j && json_assert j "assert r[\"options\"][\"ttl_ms\"] == 1000, r" &&
	sbx resume late >/dev/null && wait_state late paused 20 &&
	sbx rm -f late >/dev/null
'

test_expect_success 'bad input: 125 and a usage line' '
	expect_code 125 sbx update x --cpus many 2>err && test_grep "invalid --cpus" err &&
	expect_code 125 sbx update x --memory 1k 2>err && test_grep "invalid --memory" err &&
	expect_code 125 sbx update x --ttl soon 2>err && test_grep "invalid --ttl" err &&
	expect_code 125 sbx keepalive 2>err && test_grep "missing sandbox" err &&
	expect_code 125 sbx keepalive --ttl -1s x 2>err && test_grep "invalid --ttl" err &&
	expect_code 125 sbx keepalive nosuch 2>err && test_grep "nosuch" err &&
	expect_code 125 sbx stats nosuch 2>err && test_grep "nosuch" err
'

if writable_cgroup; then
	test_expect_success 'update --memory/--cpus on a running sandbox: inside, nproc, inspect' '
		sbx create --name lim --memory 64m --cpus 0.5 >/dev/null &&
		sbx exec lim sh -c "$limits" >l && test_eq 67108864 "$(sed -n 1p l)" &&
		test_eq lim "$(sbx update lim --memory 128m --cpus 2)" &&
		sbx exec lim sh -c "$limits" >l && test_eq 134217728 "$(sed -n 1p l)" &&
		test_match "^200000( 100000)?$" "$(sed -n 2p l)" &&
		n=$(nproc) && want=$((n < 2 ? n : 2)) &&
		test_eq "$want" "$(sbx exec lim nproc)" &&
		sbx inspect lim >j &&
		json_assert j "o = r[\"options\"]; assert o[\"memory\"] == 128 << 20 and o[\"cpu_millis\"] == 2000, o
assert r[\"memory_stats\"][\"limit\"] == 128 << 20, r" &&
		sbx update lim --cpus 0.5 >/dev/null &&
		sbx exec lim sh -c "$limits" >l && test_match "^50000( 100000)?$" "$(sed -n 2p l)" &&
		test_eq 1 "$(sbx exec lim nproc)" &&
		sbx rm -f lim >/dev/null
	'

	test_expect_success 'update --memory below what the sandbox uses is refused; above it works' '
		sbx create --name full --memory 256m >/dev/null &&
		sbx exec -d full python3 -c "import time; b = b\"x\" * (48 << 20); time.sleep(600)" >/dev/null &&
		wait_until 20 sh -c "\"\$SBX\" stats --json full | python3 -c \"import json,sys; sys.exit(json.load(sys.stdin)[0][\\\"memory_bytes\\\"] < 48 << 20)\"" &&
		expect_code 125 sbx update full --memory 16m 2>err &&
		expect_one_error_line err "cannot lower the memory limit of sandbox .full. to 16777216 bytes: it uses [0-9]+" &&
		sbx exec full sh -c "$limits" >l && test_eq 268435456 "$(sed -n 1p l)" &&
		sbx inspect full >j && json_assert j "assert r[\"options\"][\"memory\"] == 256 << 20, r" &&
		sbx update full --memory 96m >/dev/null &&
		sbx exec full sh -c "$limits" >l && test_eq 100663296 "$(sed -n 1p l)" &&
		sbx rm -f full >/dev/null
	'

	test_expect_success 'update --memory on a released sandbox: the next boot has it' '
		sbx create --name rel --memory 64m >/dev/null &&
		sbx pause --release rel >/dev/null &&
		sbx update rel --memory 80m >/dev/null && sbx resume rel >/dev/null &&
		sbx exec rel sh -c "$limits" >l && test_eq 83886080 "$(sed -n 1p l)" &&
		sbx rm -f rel >/dev/null
	'

	test_expect_success 'stats: memory after an allocation, processes, the limit; a table' '
		sbx create --name st --memory 200m >/dev/null &&
		sbx exec -d st python3 -c "import time; b = b\"x\" * (32 << 20); time.sleep(600)" >/dev/null &&
		wait_until 20 sh -c "\"\$SBX\" stats --json st | python3 -c \"import json,sys; sys.exit(json.load(sys.stdin)[0][\\\"memory_bytes\\\"] < 32 << 20)\"" &&
		sbx stats --json st >s.json &&
		json_assert s.json "assert len(r) == 1; s = r[0]
assert s[\"name\"] == \"st\" and len(s[\"id\"]) == 12, s
assert s[\"memory_bytes\"] >= 32 << 20 and s[\"memory_limit_bytes\"] == 200 << 20, s
assert s[\"pids\"] >= 2 and s[\"cpu_ms\"] > 0 and s[\"cpu_percent\"] >= 0, s
assert s[\"disk_bytes\"] is None and s[\"net_rx_bytes\"] >= 0 and s[\"net_tx_bytes\"] >= 0, s" &&
		sbx stats >t && test_grep "^ID  *NAME  *CPU %  *MEM USAGE / LIMIT" t &&
		test_grep -E "^[0-9a-f]{12}  st  .*/ 200\.0MiB" t &&
		sbx rm -f st >/dev/null
	'
else
	test_expect_success 'no writable cgroup: update --memory says why; stats still counts processes' '
		sbx create --name nocg >/dev/null &&
		expect_code 125 sbx update nocg --memory 64m 2>err &&
		expect_one_error_line err "no memory cgroup" &&
		sbx stats --json nocg >s.json &&
		json_assert s.json "s = r[0]; assert s[\"pids\"] >= 1 and s[\"cpu_ms\"] >= 0, s" &&
		sbx rm -f nocg >/dev/null
	'
fi

test_expect_success 'stats: only running sandboxes without SB; a stopped one named is an error' '
	sbx create --name up >/dev/null && sbx create --name down >/dev/null &&
	sbx pause --release down >/dev/null &&
	sbx stats --json >all.json &&
	json_assert all.json "n = [s[\"name\"] for s in r]; assert \"up\" in n and \"down\" not in n, n" &&
	expect_code 125 sbx stats down 2>err &&
	expect_one_error_line err "sandbox .down. is released: nothing runs to measure" &&
	sbx rm -f up down >/dev/null
'

test_expect_success 'starting: ls and inspect show a sandbox while it is being made' '
	: >hold &&
	( SBX_TEST_HOLD_AT=create-starting SBX_TEST_HOLD_FILE=$PWD/hold "$SBX" create --name slow >id 2>cerr ) &
	maker=$! &&
	wait_state slow starting 20 &&
	sbx ls >l && test_grep -E "  slow  .*starting" l &&
	sbx ls --json >l.json && json_assert l.json "assert [s[\"state\"] for s in r if s[\"name\"] == \"slow\"] == [\"starting\"], r" &&
	rm hold && wait "$maker" &&
	test_eq running "$(sb_state slow)" &&
	sbx rm -f slow >/dev/null
'

test_done
