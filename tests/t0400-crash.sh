#!/bin/bash
# Crash safety: sbx killed (SIGKILL) at every named step of create, rm, pause, resume, exec and
# cp leaves a store that parses, an ls that tells the truth and an rm that removes everything
# (no directory, cgroup, process, zombie or dangling name link); a killed supervisor or init
# shows 'stopped' and resumes; a simulated reboot; a full disk under the store and under cp's
# destination; cp racing release and resume; exec out of descriptors.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

# the one sandbox directory there is
only_id() { ls "$SBX_HOME/sandboxes"; }

# after a crash: ls exits 0 and shows it (or warns about it by path); rm -f removes everything
ls_and_rm_clean() { # NAME
	local id pids
	id=$(only_id) && test_ne "" "$id" || return 1
	pids=$(sandbox_pids "$id")
	sbx ls >ls.out 2>ls.err || { say "ls failed"; cat ls.err; return 1; }
	test_grep "$id" ls.out ls.err || { say "ls does not mention $id"; cat ls.out ls.err; return 1; }
	sbx ls --json >/dev/null 2>&1 || return 1
	sbx rm -f "$1" >/dev/null 2>rm.err || sbx rm -f "$id" >/dev/null 2>>rm.err || {
		say "rm failed:"; cat rm.err; return 1; }
	# shellcheck disable=SC2086 # a list of pids
	assert_gone "$id" $pids && no_trace "$1" $pids
}

# nothing named NAME left in the index, not even a dangling link; none of the PIDs left, not
# even as a zombie (init is reaped by its supervisor, never left to the host's PID 1)
no_trace() { # NAME [PID...]
	local p
	if [ -L "$SBX_HOME/names/$1" ] || [ -e "$SBX_HOME/names/$1" ]; then
		say "left behind: name link $1 -> $(readlink "$SBX_HOME/names/$1")" >&2
		return 1
	fi
	shift
	for p in "$@"; do
		if [ -e "/proc/$p" ] && grep -q "^State:[[:space:]]*Z" "/proc/$p/status" 2>/dev/null &&
		   [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sbx-init ]; then
			say "left behind: zombie $p (sbx-init)" >&2
			return 1
		fi
	done
	return 0
}

for step in create-claimed create-record-saved create-prepared cgroup-listed boot-cgroups \
	boot-reported create-provider-done; do
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

test_expect_success 'create killed once its sandbox reported: never seen running, taken down, rm cleans' '
	expect_code 137 env SBX_TEST_CRASH_AT=boot-reported "$SBX" create --name c &&
	id=$(only_id) && test ! -e "$SBX_HOME/sandboxes/$id/pids" &&
	for i in 1 2 3 4 5; do
		st=$(sb_state c) && test_ne running "$st" || exit 1
		sleep 0.1
	done &&
	ls_and_rm_clean c
'

test_expect_success 'plain rm -f, many times: no sbx-init zombie, no name link, no cgroup' '
	for i in $(seq 10); do
		id=$(sbx create --name z) && pids=$(sandbox_pids "$id") &&
		sbx rm -f z >/dev/null && assert_gone "$id" $pids && no_trace z $pids || exit 1
	done
'

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
	test_eq ok "$(sbx exec c echo ok)" && ls_and_rm_clean c
'

test_expect_success 'cp racing pause --release and resume: each copy whole, each state change done' '
	sbx create --name race >/dev/null && head -c 20000000 /dev/urandom >rbig &&
	for i in 1 2 3; do
		{ sbx cp rbig race:/workspace/b$i >cp$i.out 2>&1 & cpid=$!; } &&
		sbx pause --release race >/dev/null && sbx resume race >/dev/null &&
		wait $cpid || { cat cp$i.out; exit 1; }
	done &&
	for i in 1 2 3; do sbx cp race:/workspace/b$i rb$i && cmp rbig rb$i || exit 1; done &&
	{ sbx cp rbig race:/workspace/b4 & cpid=$!; } && sbx resume race >/dev/null &&
	{ sbx cp race:/workspace/b1 - >stream.tar & opid=$!; } && sbx pause --release race >/dev/null &&
	wait $cpid && wait $opid && tar -xOf stream.tar b1 | cmp - rbig &&
	sbx rm -f race >/dev/null
'

test_expect_success 'exec out of descriptors: a running sandbox is never called stopped' '
	sbx create --name fds >/dev/null &&
	for n in 4 5 6 7 8 9 10 12 16 20; do
		(ulimit -n $n; "$SBX" exec fds true) 2>err; rc=$?
		if [ $rc != 0 ]; then
			test_eq 125 $rc && test_grep ! -e stopped -e released err &&
			expect_one_error_line err "Too many open files" || { echo "n=$n rc=$rc"; cat err; exit 1; }
		fi
	done &&
	(ulimit -n 24; "$SBX" exec fds true) && sbx rm -f fds >/dev/null
'

test_expect_success 'resume whose record cannot be saved: 125, and the sandbox is stopped again' '
	sbx create --name rs >/dev/null && sbx exec rs sh -c "echo keep >/workspace/f" &&
	sbx pause --release rs >/dev/null &&
	expect_code 125 env SBX_TEST_FAIL_AT=resume-save "$SBX" resume rs 2>err &&
	expect_one_error_line err "cannot resume .rs. \\(it was stopped again\\): cannot save the record: No space left" &&
	st=$(sb_state rs) && test_eq stopped "$st" -o "$st" = released &&
	sbx resume rs >/dev/null && test_eq keep "$(sbx exec rs cat /workspace/f)" &&
	sbx rm -f rs >/dev/null
'

test_expect_success 'kill -9 of the supervisor: stopped; resume brings it back with its files' '
	sbx create --name k >/dev/null && sbx exec k sh -c "echo mine >/workspace/f" &&
	set -- $(sandbox_pids "$(only_id)") && kill -9 "$2" &&
	wait_state k stopped &&
	expect_code 125 sbx exec k true 2>err && expect_one_error_line err "is stopped; run .sbx resume k." &&
	sbx resume k >/dev/null && test_eq running "$(sb_state k)" &&
	test_eq mine "$(sbx exec k cat /workspace/f)"
'

test_expect_success 'kill -9 of init: stopped; resume works; rm cleans' '
	set -- $(sandbox_pids "$(only_id)") && kill -9 "$1" &&
	wait_state k stopped &&
	sbx resume k >/dev/null && test_eq mine "$(sbx exec k cat /workspace/f)" &&
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
	sbx ls >out && test_eq 2 "$(grep -c " stopped " out)" &&
	sbx resume r1 r2 >/dev/null &&
	test_eq one "$(sbx exec r1 cat /workspace/f)" && test_eq two "$(sbx exec r2 cat /workspace/f)" &&
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
	gone() { "$SBX" rm -f keep more >/dev/null 2>&1 || true; }
	trap gone EXIT
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
	"$SBX" exec keep sh -c "echo \$HTTP_PROXY" >proxy.full 2>exec.err
	"$SBX" exec keep true
	"$SBX" rm -f keep >/dev/null
	echo "$rc"
	EOS
	$full_ns bash full.sh >rc && test_eq 125 "$(cat rc)" &&
	expect_one_error_line err "^sbx: error: .*(No space left on device|space)" &&
	test_grep " keep " ls.out &&
	: "exec still runs (to make room, say), and says that its credential was not recorded" &&
	expect_one_error_line exec.err "^sbx: warning: cannot record this exec.s proxy credential.*No space left" &&
	test_grep -x "http://127.0.0.1:3128" proxy.full
'

test_expect_success 'a full disk under a sandbox and under cp: 125, one line, no short or zero-filled file' '
	cat >fullcp.sh <<-\EOS &&
	set -e
	mount -t tmpfs -o size=8m tmpfs "$SBX_HOME"
	: a failure half-way must not leave the sandbox running with its store gone
	gone() { "$SBX" rm -f box >/dev/null 2>&1 || true; }
	trap gone EXIT
	"$SBX" create --name box >/dev/null
	head -c 12000000 /dev/urandom >big
	set +e
	"$SBX" cp big box:/workspace/big 2>err1; echo $? >rc1
	tar -cf - big | "$SBX" cp - box:/workspace 2>err2; echo $? >rc2
	set -e
	"$SBX" exec box ls /workspace >ls1
	"$SBX" exec box sh -c "head -c 3000000 /dev/urandom >/workspace/mid"
	mkdir -p outfull
	mount -t tmpfs -o size=1m tmpfs outfull
	set +e
	"$SBX" cp box:/workspace/mid outfull/mid 2>err3; echo $? >rc3
	"$SBX" cp box:/workspace/mid outfull/ 2>err4; echo $? >rc4
	"$SBX" cp box:/workspace/mid - >outfull/stream.tar 2>err5; echo $? >rc5
	set -e
	ls outfull >ls3
	umount outfull
	: the sandbox is fine, and a copy that fits works
	"$SBX" exec box true
	head -c 100000 /dev/urandom >small
	"$SBX" cp small box:/workspace/small
	"$SBX" cp box:/workspace/small small2
	cmp small small2
	"$SBX" rm -f box >/dev/null
	EOS
	$full_ns bash fullcp.sh &&
	for i in 1 2 3 4 5; do
		test_eq 125 "$(cat rc$i)" || { echo "copy $i exited $(cat rc$i)"; cat err$i; exit 1; }
	done &&
	for i in 1 2 3 4; do expect_one_error_line err$i "No space left on device" || exit 1; done &&
	test_grep "No space left on device" err5 &&
	test_grep ! big ls1 && test_grep ! mid ls3
'

test_done
