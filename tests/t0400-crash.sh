#!/bin/bash
# Crash safety: sbx killed (SIGKILL) at every named step of create, rm, pause, resume, exec and
# cp leaves a store that parses, an ls that tells the truth and an rm that removes everything;
# a killed supervisor or init shows 'stopped' and resumes; a simulated reboot; a full disk.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

# the one sandbox directory there is
only_id() { ls "$SBX_HOME/sandboxes"; }

# after a crash: ls exits 0 and shows it (or warns about it by path); rm -f removes everything
ls_and_rm_clean() { # NAME
	local id pids
	id=$(only_id) && test -n "$id" || return 1
	pids=$(sandbox_pids "$id")
	sbx ls >ls.out 2>ls.err || { say "ls failed"; cat ls.err; return 1; }
	grep -q "$id" ls.out ls.err || { say "ls does not mention $id"; cat ls.out ls.err; return 1; }
	sbx ls --json >/dev/null 2>&1 || return 1
	sbx rm -f "$1" >/dev/null 2>rm.err || sbx rm -f "$id" >/dev/null 2>>rm.err || {
		say "rm failed:"; cat rm.err; return 1; }
	# shellcheck disable=SC2086 # a list of pids
	assert_gone "$id" $pids && test ! -e "$SBX_HOME/names/$1"
}

for step in create-claimed create-record-saved create-prepared boot-cgroups create-provider-done; do
	test_expect_success "create killed at $step: ls works, rm -f leaves nothing" "
		expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" create --name c &&
		ls_and_rm_clean c
	"
done

for step in init-ready supervisor-ready; do
	test_expect_success "create whose sandbox dies at $step: 125, and nothing is left" "
		expect_code 125 env SBX_TEST_CRASH_AT=$step \"\$SBX\" create --name c 2>err &&
		expect_one_error_line err '^sbx: error: cannot start sandbox' &&
		test -z \"\$(ls \"\$SBX_HOME/sandboxes\")\" && test ! -e \"\$SBX_HOME/names/c\"
	"
done

test_expect_success 'create killed at create-record-saved: ls says error with the way out' '
	expect_code 137 env SBX_TEST_CRASH_AT=create-record-saved "$SBX" create --name c &&
	sbx inspect c >j &&
	json_assert j "assert r[\"state\"] == \"error\" and \"sbx rm\" in r[\"state_reason\"], r" &&
	sbx rm -f c >/dev/null
'

for step in rm-killed rm-provider-done rm-record-removed; do
	test_expect_success "rm killed at $step: ls works, rm -f finishes the job" "
		sbx create --name c >/dev/null &&
		expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" rm -f c &&
		ls_and_rm_clean c
	"
done

for step in pause-provider-done resume-provider-done exec-joined; do
	test_expect_success "pause/resume/exec killed at $step: state by looking, then rm -f" "
		sbx create --name c >/dev/null && sbx exec c sh -c 'echo f >/workspace/f' &&
		case $step in
		pause-*) expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" pause --release c &&
			 # the processes ended before 'released' was written: a crash, so stopped
			 test \"\$(sb_state c)\" = stopped ;;
		resume-*) sbx pause --release c >/dev/null &&
			  expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" resume c &&
			  test \"\$(sb_state c)\" = running ;;
		exec-*) expect_code 137 env SBX_TEST_CRASH_AT=$step \"\$SBX\" exec c true ;;
		esac &&
		test \"\$(sbx exec --resume c cat /workspace/f)\" = f &&
		ls_and_rm_clean c
	"
done

test_expect_success 'cp killed in the middle: the sandbox is fine, rm -f leaves nothing' '
	sbx create --name c >/dev/null && head -c 50000000 /dev/zero >big &&
	{ sbx cp big c:/workspace/big & cpid=$!; } && sleep 0.05 && { kill -9 $cpid; wait $cpid; true; } &&
	test "$(sbx exec c echo ok)" = ok && ls_and_rm_clean c
'

test_expect_success 'kill -9 of the supervisor: stopped; resume brings it back with its files' '
	sbx create --name k >/dev/null && sbx exec k sh -c "echo mine >/workspace/f" &&
	set -- $(sandbox_pids "$(only_id)") && kill -9 "$2" &&
	wait_state k stopped &&
	expect_code 125 sbx exec k true 2>err && expect_one_error_line err "is stopped; run .sbx resume k." &&
	sbx resume k >/dev/null && test "$(sb_state k)" = running &&
	test "$(sbx exec k cat /workspace/f)" = mine
'

test_expect_success 'kill -9 of init: stopped; resume works; rm cleans' '
	set -- $(sandbox_pids "$(only_id)") && kill -9 "$1" &&
	wait_state k stopped &&
	sbx resume k >/dev/null && test "$(sbx exec k cat /workspace/f)" = mine &&
	ls_and_rm_clean k
'

test_expect_success 'simulated reboot: every process killed, cgroups gone; all stopped; each resumes' '
	sbx create --name r1 >/dev/null && sbx create --name r2 --pids-limit 50 >/dev/null 2>&1 ||
		sbx create --name r2 >/dev/null &&
	sbx exec r1 sh -c "echo one >/workspace/f" && sbx exec r2 sh -c "echo two >/workspace/f" &&
	sbx exec -d r1 sleep 1000 >/dev/null &&
	for id in $(ls "$SBX_HOME/sandboxes"); do
		for p in $(sandbox_pids "$id"); do kill -9 "$p" 2>/dev/null; done
	done &&
	wait_state r1 stopped && wait_state r2 stopped &&
	for id in $(ls "$SBX_HOME/sandboxes"); do
		while read -r role dir; do
			for d in "$dir/sandbox" "$dir/supervisor" "$dir"; do
				i=0; while [ -d "$d" ] && ! rmdir "$d" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
				test ! -d "$d" || exit 1
			done
		done <"$SBX_HOME/sandboxes/$id/cgroups"
	done &&
	sbx ls >out && test "$(grep -c " stopped " out)" = 2 &&
	sbx resume r1 r2 >/dev/null &&
	test "$(sbx exec r1 cat /workspace/f)" = one && test "$(sbx exec r2 cat /workspace/f)" = two &&
	sbx rm -f r1 r2 >/dev/null
'

# a small tmpfs as $SBX_HOME, in a mount namespace of the test's own (root: its own; others:
# a user namespace mapping only their uid, where sbx maps only that uid into sandboxes)
# shellcheck disable=SC2034 # used in a test body
if [ "$(id -u)" -eq 0 ]; then full_ns="unshare -m"; else full_ns="unshare -Urm"; fi
test_expect_success 'a full disk under $SBX_HOME: create fails cleanly, existing records untouched' '
	cat >full.sh <<-\EOS &&
	set -e
	mount -t tmpfs -o size=1m tmpfs "$SBX_HOME"
	"$SBX" create --name keep >/dev/null
	id=$(ls "$SBX_HOME/sandboxes")
	cp "$SBX_HOME/sandboxes/$id/sandbox.json" before.json
	dd if=/dev/zero of="$SBX_HOME/fill" bs=4k 2>/dev/null || true
	set +e
	"$SBX" create --name more 2>err; rc=$?
	set -e
	"$SBX" ls >ls.out
	cmp before.json "$SBX_HOME/sandboxes/$id/sandbox.json"
	test "$(ls "$SBX_HOME/sandboxes")" = "$id"
	test ! -e "$SBX_HOME/names/more"
	"$SBX" exec keep true
	"$SBX" rm -f keep >/dev/null
	echo "$rc"
	EOS
	$full_ns bash full.sh >rc && test "$(cat rc)" = 125 &&
	expect_one_error_line err "^sbx: error: .*(No space left on device|space)" &&
	grep -q " keep " ls.out
'

test_done
