#!/bin/bash
# Parallel callers: 50 creates, 50 execs, 50 rms at once, twice; two rms of one sandbox; pause
# racing exec. Every call succeeds or fails cleanly; no record is lost; nothing leaks.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3
TEST_TIMEOUT=240

# par N CMD...: runs CMD N times at once ({} in an argument becomes the index); fails unless
# every one exits 0 (their stderr goes to par.err)
par() {
	local n=$1 i pids="" bad=0 p
	shift
	: >par.err
	for i in $(seq 1 "$n"); do
		"${@//\{\}/$i}" >"par.$i.out" 2>>par.err &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || bad=$((bad + 1)); done
	if [ "$bad" -ne 0 ]; then
		say "$bad of $n failed:" >&2
		head -n 20 par.err >&2
		return 1
	fi
}

for round in 1 2; do
	test_expect_success "round $round: 50 parallel create, exec, rm; nothing lost, nothing left" '
		par 50 "$SBX" create --name "p{}" &&
		test_eq 50 "$(sbx ls -q | wc -l)" &&
		for i in $(seq 1 50); do test_eq "$(sbx inspect -- "p$i" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])")" "$(cat par.$i.out)" || exit 1; done &&
		par 50 "$SBX" exec "p{}" sh -c "echo {} >/workspace/n; cat /workspace/n" &&
		for i in $(seq 1 50); do test_eq "$i" "$(cat par.$i.out)" || exit 1; done &&
		sbx ls --json >j && json_assert j "assert len(r) == 50 and all(x[\"state\"] == \"running\" for x in r), r" &&
		ids=$(sbx ls -q) && pids=$(for id in $ids; do sandbox_pids "$id"; done) &&
		par 50 "$SBX" rm -f "p{}" &&
		test_eq "" "$(sbx ls -q)" && test_eq "" "$(ls "$SBX_HOME/sandboxes")" &&
		test_eq "" "$(ls "$SBX_HOME/names")" &&
		for id in $ids; do assert_gone "$id" || exit 1; done &&
		for p in $pids; do ! pid_alive "$p" || { echo "left: $p"; exit 1; }; done
	'
done

test_expect_success 'two parallel rm of one sandbox: one succeeds, the other says not found (125)' '
	for k in 1 2 3 4 5; do
		sbx create --name twice >/dev/null || exit 1
		{ sbx rm -f twice >a.out 2>a.err; echo $? >a.rc; } &
		{ sbx rm -f twice >b.out 2>b.err; echo $? >b.rc; } &
		wait
		test_eq "0 125 " "$(sort a.rc b.rc | tr "\n" " ")" || { cat a.err b.err; exit 1; }
		cat a.err b.err >both.err
		expect_one_error_line both.err "no such sandbox|not found" || exit 1
	done &&
	test_eq "" "$(ls "$SBX_HOME/sandboxes")"
'

test_expect_success 'pause racing exec: each works or fails cleanly; resume lets every exec finish' '
	sbx create --name race >/dev/null &&
	for k in 1 2 3 4 5 6 7 8; do
		for j in 1 2 3 4; do
			{ sbx exec race sh -c "echo ran" >"e$j.out" 2>"e$j.err"; echo $? >"e$j.rc"; } &
		done
		sbx pause race >/dev/null || exit 1
		sleep 0.05
		sbx resume race >/dev/null || exit 1
		wait
		for j in 1 2 3 4; do
			case "$(cat e$j.rc)" in
			0) test "$(cat e$j.out)" = ran || exit 1 ;;
			125) expect_one_error_line "e$j.err" "is paused; run .sbx resume race." || exit 1 ;;
			*) echo "exec exited $(cat e$j.rc)"; cat "e$j.err"; exit 1 ;;
			esac
		done
	done &&
	test_eq running "$(sb_state race)" && sbx rm -f race >/dev/null
'

test_done
