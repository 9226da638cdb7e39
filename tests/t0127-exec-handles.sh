#!/bin/bash
# Background commands as handles: exec -d prints an exec id; sbx ps, logs SB EXECID, wait and
# kill act on it; the records survive a pause; the sandbox cannot reach them.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

# ps_field SB ID FIELD: FIELD of exec ID in 'sbx ps SB --json' (null as "None")
ps_field() {
	"$SBX" ps "$1" --json | python3 -c 'import json, sys
for j in json.load(sys.stdin):
    if j["id"] == sys.argv[1]:
        print(j[sys.argv[2]])' "$2" "$3"
}

test_expect_success 'set-up: a sandbox named jb' '
	sbx create --name jb >/dev/null
'

test_expect_success 'exec -d prints an exec id, not a pid; ps lists it running, then exited' '
	id=$(sbx exec -d jb -- sh -c "sleep 0.5; exit 3") &&
	test_match "^[A-Za-z0-9._-]{1,64}$" "$id" &&
	test_match "[a-f]" "$id" &&
	sbx ps jb >ps &&
	test_grep "$id .* running" ps &&
	test_eq "$(ps_field jb "$id" state)" running &&
	expect_code 3 sbx wait jb "$id" &&
	sbx ps jb --json >ps.json &&
	json_assert ps.json "
j = [x for x in r if x[\"id\"] == \"$id\"][0]
assert j[\"state\"] == \"exited\" and j[\"exit_code\"] == 3 and j[\"signal\"] is None, j
assert j[\"command\"] == [\"sh\", \"-c\", \"sleep 0.5; exit 3\"], j
assert isinstance(j[\"pid\"], int) and j[\"pid\"] > 1, j
assert j[\"started_at\"].endswith(\"Z\") and j[\"finished_at\"].endswith(\"Z\"), j
" &&
	sbx ps -a jb >all && test_grep "$id .* exited .*3" all
'

test_expect_success 'logs SB EXECID is that command output alone; logs SB has both' '
	a=$(sbx exec -d jb -c "echo out-a; echo err-a >&2") &&
	b=$(sbx exec -d jb -c "echo out-b") &&
	sbx wait jb "$a" && sbx wait jb "$b" &&
	sbx logs jb "$a" >la && sbx logs jb "$b" >lb &&
	test_grep -x out-a la && test_grep -x err-a la && test_grep ! out-b la &&
	test_grep -x out-b lb && test_grep ! out-a lb &&
	sbx logs jb >l && test_grep -x out-a l && test_grep -x out-b l
'

test_expect_success 'logs -f EXECID follows the command and ends when it ends' '
	id=$(sbx exec -d jb -c "for i in 1 2 3; do echo line\$i; sleep 0.2; done; echo last") &&
	sbx logs -f jb "$id" >f &&
	test_grep -x line1 f && test_grep -x last f &&
	test_eq "$(ps_field jb "$id" state)" exited
'

test_expect_success 'wait gives the exit status: 0, 3, 128+N for a signal' '
	id=$(sbx exec -d jb -- true) && expect_code 0 sbx wait jb "$id" &&
	id=$(sbx exec -d jb -- sh -c "exit 3") && expect_code 3 sbx wait jb "$id" &&
	id=$(sbx exec -d jb -- sh -c "kill -9 \$\$") && expect_code 137 sbx wait jb "$id" &&
	id=$(sbx exec -d jb -- sh -c "kill -TERM \$\$") && expect_code 143 sbx wait jb "$id" &&
	test_eq "$(ps_field jb "$id" signal)" SIGTERM
'

test_expect_success 'wait --timeout: 125 with a timeout error; the command runs on' '
	id=$(sbx exec -d jb -- sleep 100) &&
	expect_code 125 sbx wait --timeout 0.3s jb "$id" 2>err &&
	expect_one_error_line err "^sbx: error: timed out waiting for exec" &&
	test_eq "$(ps_field jb "$id" state)" running &&
	sbx kill jb "$id" && expect_code 137 sbx wait jb "$id"
'

test_expect_success 'kill -s TERM and the default SIGKILL reach the command process group' '
	id=$(sbx exec -d jb -c "sleep 100 & sleep 100; wait") &&
	sbx kill -s TERM jb "$id" && expect_code 143 sbx wait jb "$id" &&
	id=$(sbx exec -d jb -c "trap \"\" TERM; touch /tmp/trapped; sleep 100") &&
	: "the signal once the trap is set (a loaded machine may not have run it yet)" &&
	wait_until 10 sbx exec jb test -e /tmp/trapped &&
	sbx kill -s SIGTERM jb "$id" &&
	test_eq "$(ps_field jb "$id" state)" running &&
	sbx kill jb "$id" && expect_code 137 sbx wait jb "$id" &&
	test_eq "$(ps_field jb "$id" signal)" SIGKILL &&
	wait_until 10 sh -c "! \"\$SBX\" exec jb sh -c \"cat /proc/[0-9]*/comm\" | grep -qx sleep" &&
	expect_code 125 sbx kill jb "$id" 2>err && test_grep "has ended" err &&
	expect_code 125 sbx kill -s NOSUCH jb "$id" 2>err && test_grep "invalid signal" err
'

test_expect_success 'kill without EXECID: every process of the sandbox, which still runs' '
	a=$(sbx exec -d jb -- sleep 100) && b=$(sbx exec -d jb -c "trap \"\" TERM; sleep 100") &&
	sbx kill jb &&
	expect_code 137 sbx wait jb "$a" && expect_code 137 sbx wait jb "$b" &&
	test_eq "$(sb_state jb)" running &&
	test_eq "$(sbx exec jb -- echo alive)" alive
'

test_expect_success 'an unknown exec id: 125, not found' '
	expect_code 125 sbx wait jb 0123456789ab 2>err && test_grep "no exec .0123456789ab." err &&
	expect_code 125 sbx kill jb nosuch 2>err && test_grep "no exec" err &&
	expect_code 125 sbx logs jb ../../sandbox 2>err && test_grep "no exec" err &&
	expect_code 125 sbx ps 2>err && test_grep "missing sandbox" err
'

test_expect_success 'wait --state paused returns once another process paused the sandbox' '
	sbx wait --state paused --timeout 60s jb >out 2>err &
	w=$! &&
	sleep 0.3 && sbx pause jb &&
	wait $w && sbx resume jb &&
	expect_code 125 sbx wait --state paused --timeout 0.3s jb 2>err &&
	test_grep "timed out" err
'

test_expect_success 'records survive pause and resume; wait works after' '
	id=$(sbx exec -d jb -c "echo before; sleep 1; echo after") &&
	sbx pause jb &&
	test_eq "$(ps_field jb "$id" state)" running &&
	sbx resume jb &&
	expect_code 0 sbx wait jb "$id" &&
	sbx logs jb "$id" >l && test_grep -x before l && test_grep -x after l
'

test_expect_success 'the sandbox cannot reach the records and logs, nor see their writer' '
	id=$(sbx exec -d jb -c "sleep 1; exit 5") &&
	sid=$(sbx inspect jb | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	dir=$SBX_HOME/sandboxes/$sid &&
	test -d "$dir/jobs" &&
	expect_code 1 sbx exec jb -- test -e "$dir/jobs" &&
	sbx exec jb -- sh -c "echo 0 1 >\"$dir/jobs/$id.end\" || echo refused" >o 2>/dev/null &&
	test_grep -x refused o &&
	sbx exec jb -- sh -c "echo x >>\"$dir/jobs/$id.log\" || echo refused" >o 2>/dev/null &&
	test_grep -x refused o &&
	sbx exec jb -- sh -c "cat /proc/[0-9]*/comm" >comms &&
	test_grep ! -x sbx comms &&
	expect_code 5 sbx wait jb "$id" &&
	sbx exec jb -- sh -c "echo ok >/workspace/control" &&
	test_eq "$(sbx exec jb cat /workspace/control)" ok &&
	echo 0 1 >"$dir/jobs/control" && rm "$dir/jobs/control"
'

test_expect_success 'the records are bounded: the newest 100 finished ones are kept' '
	sbx create --name many >/dev/null &&
	first=$(sbx exec -d many -- true) && sbx wait many "$first" &&
	for i in $(seq 105); do sbx exec -d many -- true >/dev/null || exit 1; done
	sbx ps many --json >ps.json &&
	: "100 finished ones when the last exec -d pruned, and those that ran then" &&
	json_assert ps.json "assert 100 <= len(r) < 106, len(r)
assert \"$first\" not in [j[\"id\"] for j in r]" &&
	expect_code 125 sbx logs many "$first" 2>err && test_grep "no exec" err &&
	sbx rm -f many >/dev/null
'

test_expect_success 'wait without EXECID: until the sandbox is released or removed' '
	sbx create --name jw >/dev/null || exit 1
	sbx wait --timeout 60s jw &
	w=$!
	sleep 0.3 && sbx pause --release jw && wait $w &&
	sbx resume jw || exit 1
	sbx wait --timeout 60s jw &
	w=$!
	sleep 0.3 && sbx rm -f jw >/dev/null && wait $w
'

if [ "$(id -u)" -eq 0 ]; then
	test_expect_success 'a full disk: output its log could not take is said by ps and logs, never lost quietly' '
		mkdir -p "$TRASH/small" && mount -t tmpfs -o size=6m tmpfs "$TRASH/small" &&
		H=$TRASH/small/h &&
		SBX_HOME=$H sbx create --name full >/dev/null &&
		: "control: a small output is all kept" &&
		c=$(SBX_HOME=$H sbx exec -d full -- sh -c "echo small") &&
		SBX_HOME=$H sbx wait full "$c" && test_eq small "$(SBX_HOME=$H sbx logs full "$c")" &&
		id=$(SBX_HOME=$H sbx exec -d full -- sh -c "head -c 12M /dev/zero | tr \\\\0 x") &&
		SBX_HOME=$H sbx wait full "$id" &&
		SBX_HOME=$H sbx ps --json full >ps.json &&
		json_assert ps.json "j = [x for x in r if x[\"id\"] == \"$id\"][0]
assert j.get(\"output_lost_bytes\", 0) > 0, j
assert not [x for x in r if x[\"id\"] == \"$c\"][0].get(\"output_lost_bytes\")" &&
		SBX_HOME=$H expect_code 125 sbx logs full "$id" >out 2>err &&
		test_grep "are missing from its log" err
	'
	test_atexit 'SBX_HOME=$TRASH/small/h "$SBX" rm -f full >/dev/null 2>&1; umount "$TRASH/small"'
else
	test_skip 'a full disk: output its log could not take is said' \
		'mounting a small filesystem needs root'
fi

test_done
