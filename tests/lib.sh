# Test library for sbx's shell tests (git's t/ style). Source it, then:
#   test_expect_success 'description' 'body'   body runs in a subshell, bounded in time
#   expect_code N cmd...                       exact exit status (never a bare '! cmd')
#   test_skip_unless PREREQ                    skips the rest of the file, counted, with a reason
#   test_done                                  prints "# tNNNN-name.sh: X ok, Y not ok, Z skipped"
# A check says what it expected and what it got when it fails (below, after expect_code):
#   test_eq EXPECTED ACTUAL [WHAT]   test_ne UNWANTED ACTUAL [WHAT]
#   test_match ERE ACTUAL [WHAT]     test_contains TEXT ACTUAL [WHAT]
#   test_grep [!] [GREP-OPTIONS] PATTERN [FILE...]   test_file_eq EXPECTED-FILE ACTUAL-FILE
# Environment from tests/run.sh: SBX (the binary), TEST_USER_LABEL (root or uid N).
# shellcheck shell=bash

set -u
TEST_NAME=$(basename "$0")
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
test_count=0
test_ok=0
test_fail=0
test_skipped=0

: "${SBX:?SBX must point at the sbx binary (run tests through tests/run.sh)}"
TEST_DIR=$(cd "$(dirname "$0")" && pwd)
TRASH=$(mktemp -d "${TMPDIR:-/tmp}/trash.${TEST_NAME%.sh}.XXXXXX")
chmod 755 "$TRASH"
export HOME="$TRASH/home" SBX_HOME="$TRASH/home/.sbx" LANG=C LC_ALL=C TZ=UTC
unset SBX_DEBUG SBX_TEST_CRASH_AT
mkdir -p "$HOME"
cd "$TRASH" || exit 1

sbx() { "$SBX" "$@"; }

say() { printf '%s\n' "$*"; }

# expect_code N cmd...: runs cmd, fails unless it exits exactly N
expect_code() {
	local want=$1 got
	shift
	"$@"
	got=$?
	if [ "$got" != "$want" ]; then
		say "expect_code: '$*' exited $got, wanted $want" >&2
		return 1
	fi
	return 0
}

# test_mismatch WHAT LINE...: the report of a failed check, on stderr; returns 1
test_mismatch() {
	local what=$1
	shift
	say "check failed${what:+: $what}" >&2
	printf '%s\n' "$@" >&2
	return 1
}

# test_eq EXPECTED ACTUAL [WHAT]: the two strings are equal (test "$ACTUAL" = "$EXPECTED")
test_eq() {
	[ "$2" = "$1" ] && return 0
	test_mismatch "${3:-}" "expected: '$1'" "actual:   '$2'"
}

# test_ne UNWANTED ACTUAL [WHAT]: the two strings differ (test "$ACTUAL" != "$UNWANTED")
test_ne() {
	[ "$2" != "$1" ] && return 0
	test_mismatch "${3:-}" "expected anything but: '$1'" "actual:                '$2'"
}

# test_match ERE ACTUAL [WHAT]: ACTUAL matches the extended regular expression (bash's =~,
# anywhere in the string unless anchored)
test_match() {
	[[ $2 =~ $1 ]] && return 0
	test_mismatch "${3:-}" "expected a match of: $1" "actual: '$2'"
}

# test_contains TEXT ACTUAL [WHAT]: ACTUAL holds TEXT (a plain string, no pattern)
test_contains() {
	[[ $2 == *"$1"* ]] && return 0
	test_mismatch "${3:-}" "expected to contain: '$1'" "actual: '$2'"
}

# test_file_eq EXPECTED-FILE ACTUAL-FILE: same bytes (cmp); else the difference (diff -u)
test_file_eq() {
	cmp -s -- "$1" "$2" && return 0
	say "check failed: '$2' differs from '$1'" >&2
	diff -u -- "$1" "$2" 2>&1 | head -n 40 >&2
	return 1
}

# test_grep [!] [GREP-OPTIONS] PATTERN [FILE...]: grep -q with the same arguments succeeds
# (with !: fails, as '! grep -q' would); else it says the pattern and the text searched.
# Options take no argument, but -e PATTERN (one or more). Without FILE it reads stdin:
# 'sbx ls | test_grep box'.
test_grep() {
	local neg='' flags=() pats=() pat files=() f rc in=''
	if [ "${1:-}" = "!" ]; then
		neg=1
		shift
	fi
	while [ "$#" -gt 0 ]; do
		case "$1" in
		--) shift; break ;;
		-e) pats+=(-e "$2"); shift 2 ;;
		-?*) flags+=("$1"); shift ;;
		*) break ;;
		esac
	done
	if [ "${#pats[@]}" -eq 0 ]; then
		pats=(-e "$1")
		shift
	fi
	pat="${pats[*]}"
	pat=${pat#-e }
	pat=${pat// -e /' or '}
	files=("$@")
	if [ "${#files[@]}" -eq 0 ]; then
		in=$(mktemp "$TRASH/.test_grep.XXXXXX") || return 1
		cat >"$in"
		files=("$in")
	fi
	grep -q "${flags[@]}" "${pats[@]}" -- "${files[@]}"
	rc=$?
	# negated, only "no line" (1) passes: a file that is missing or unreadable (2) fails
	if { [ -z "$neg" ] && [ "$rc" -eq 0 ]; } || { [ -n "$neg" ] && [ "$rc" -eq 1 ]; }; then
		[ -z "$in" ] || rm -f "$in"
		return 0
	fi
	if [ -n "$neg" ] && [ "$rc" -ne 0 ]; then
		say "check failed: grep could not read ${files[*]} (status $rc)" >&2
	elif [ -n "$neg" ]; then
		say "check failed: expected no line matching '$pat'${flags[*]:+ (grep ${flags[*]})}, found:" >&2
		grep "${flags[@]}" "${pats[@]}" -- "${files[@]}" 2>&1 | head -n 20 | sed -e 's/^/  /' >&2
	else
		say "check failed: expected a line matching '$pat'${flags[*]:+ (grep ${flags[*]})}, in:" >&2
		for f in "${files[@]}"; do
			[ -n "$in" ] || say " $f:" >&2
			head -n 20 -- "$f" 2>&1 | sed -e 's/^/  /' >&2
		done
	fi
	[ -z "$in" ] || rm -f "$in"
	return 1
}

# expect_stderr_line PATTERN FILE: FILE is exactly one line matching PATTERN (grep -E)
expect_one_error_line() {
	local file=$1 pattern=$2
	if [ "$(wc -l <"$file")" -ne 1 ]; then
		say "expected one line on stderr, got:" >&2
		cat "$file" >&2
		return 1
	fi
	grep -Eq "$pattern" "$file" || {
		say "stderr does not match '$pattern':" >&2
		cat "$file" >&2
		return 1
	}
}

test_cleanup() {
	# every sandbox this file made goes, pass or fail: no process or mount outlives a test
	if [ -d "$SBX_HOME/sandboxes" ]; then
		for d in "$SBX_HOME"/sandboxes/*/; do
			[ -d "$d" ] || continue
			"$SBX" rm -f "$(basename "$d")" >/dev/null 2>&1
		done
	fi
	cd / || true
	if [ "$test_fail" -eq 0 ]; then
		rm -rf "$TRASH" 2>/dev/null || { chmod -R u+rwX "$TRASH" 2>/dev/null; rm -rf "$TRASH"; }
	else
		say "# trash kept for inspection: $TRASH"
	fi
}
trap test_cleanup EXIT

test_expect_success() {
	local desc=$1 body=$2 rc log
	if [ -n "${TEST_SKIP_ALL:-}" ]; then
		test_skip "$desc" "$TEST_SKIP_ALL"
		return 0
	fi
	test_count=$((test_count + 1))
	log="$TRASH/.test-$test_count.log"
	# own process group (set -m), so the watchdog can end the whole body
	set -m
	(
		cd "$TRASH" || exit 1
		if [ -n "${TEST_TRACE:-}" ]; then # TEST_TRACE=1: trace the body into the log
			exec 9>>"$log"
			BASH_XTRACEFD=9
			set -x
		fi
		eval "$body"
	) >"$log" 2>&1 </dev/null &
	local pid=$!
	( sleep "$TEST_TIMEOUT" && say "# timed out after ${TEST_TIMEOUT}s" >>"$log" &&
		kill -KILL -- -"$pid" ) >/dev/null 2>&1 &
	local wd=$!
	set +m
	wait "$pid"
	rc=$?
	kill -KILL -- -"$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	if [ "$rc" -eq 0 ]; then
		test_ok=$((test_ok + 1))
		say "ok $test_count - $desc"
	else
		test_fail=$((test_fail + 1))
		say "not ok $test_count - $desc"
		sed -e 's/^/#   /' "$log" | tail -n 40
	fi
	rm -f "$log"
}

TEST_SKIP_ALL=
# test_skip_unless PREREQ: skips every remaining test of the file when PREREQ is missing
test_have_prereq() {
	case "$1" in
	USERNS) unshare -Ur true 2>/dev/null ;;
	ROOT) [ "$(id -u)" -eq 0 ] ;;
	NONROOT) [ "$(id -u)" -ne 0 ] ;;
	TMUX) command -v tmux >/dev/null ;;
	*) command -v "$1" >/dev/null ;;
	esac
}

test_skip_unless() {
	local p
	for p in "$@"; do
		if ! test_have_prereq "$p"; then
			TEST_SKIP_ALL="missing prerequisite $p"
			return 1
		fi
	done
	return 0
}

test_skip() {
	test_count=$((test_count + 1))
	test_skipped=$((test_skipped + 1))
	say "ok $test_count # skip $1 ($2)"
}

test_done() {
	say "# $TEST_NAME: $test_ok ok, $test_fail not ok, $test_skipped skipped"
	[ "$test_fail" -eq 0 ]
	exit $?
}

# json_assert FILE 'python statements on r': r is the parsed document
json_assert() {
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[2])' "$1" "$2"
}

# pid_alive PID: the process exists and is not a zombie (PID 1 here may be slow to reap)
pid_alive() {
	local st
	st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# gone PID: the process no longer runs
gone() { ! pid_alive "$1"; }

# interrupt SIG CMD...: runs CMD (two background sleeps, "started", then a wait) with its
# output into a fifo a reader drains; once it started (and, SB set, both sleeps run in SB, as
# the file's n_sleeps SB N counts them), sends SIG to CMD, then waits (bounded) for the reader
# to see the end of the output. CMD's status goes into rc
interrupt() {
	local sig=$1 reader pid
	shift
	rm -f fifo out && mkfifo fifo || return 1
	cat fifo >out &
	reader=$!
	"$@" >fifo 2>err &
	pid=$!
	wait_until 20 test_grep started out || return 1
	if [ -n "${SB:-}" ]; then wait_until 20 n_sleeps "$SB" 2 || return 1; fi
	kill "-$sig" "$pid"
	wait "$pid"
	rc=$?
	wait_until 10 gone "$reader" || return 1
	wait "$reader"
}

# sandbox_pids ID: the init and supervisor pids the sandbox's pids file names (none if absent)
sandbox_pids() {
	local f="$SBX_HOME/sandboxes/$1/pids"
	[ -r "$f" ] && awk '{ print $1; print $3 }' "$f"
	return 0
}

# assert_gone ID [PID...]: no directory, no cgroup and none of the PIDs left of sandbox ID
assert_gone() {
	local id=$1 p d
	shift
	if [ -e "$SBX_HOME/sandboxes/$id" ]; then
		say "left behind: $SBX_HOME/sandboxes/$id" >&2
		return 1
	fi
	for d in /sys/fs/cgroup/*/sbx/"$id" /sys/fs/cgroup/sbx/"$id"; do
		if [ -d "$d" ]; then
			say "left behind: cgroup $d" >&2
			return 1
		fi
	done
	for p in "$@"; do
		if pid_alive "$p"; then
			say "left behind: process $p ($(cat "/proc/$p/comm" 2>/dev/null))" >&2
			return 1
		fi
	done
	return 0
}

# rm_all_gone: rm -f of every sandbox of the store, each checked gone (assert_gone), none left
rm_all_gone() {
	local id pids
	for id in $("$SBX" ls -q); do
		# shellcheck disable=SC2086 # a list of pids
		pids=$(sandbox_pids "$id") && "$SBX" rm -f "$id" >/dev/null &&
			assert_gone "$id" $pids || return 1
	done
	test -z "$("$SBX" ls -q)"
}

# sb_state SB: the state inspect reports
sb_state() {
	"$SBX" inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'
}

# wait_state SB STATE [SECONDS]: polls (bounded) until SB shows STATE
wait_state() {
	local i=0 max=$(( ${3:-10} * 10 ))
	while [ "$i" -lt "$max" ]; do
		[ "$(sb_state "$1" 2>/dev/null)" = "$2" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	say "sandbox $1 is $(sb_state "$1" 2>&1), not $2" >&2
	return 1
}

# --- network and preview test helpers (t0500-net.sh, t0510-preview.sh) ----------------------
# test_atexit 'CODE'      CODE runs when the file ends, pass or fail (last registered first),
#                         before test_cleanup; for servers, namespaces, links the file made.
#                         Call it at the top level of a file: a test body is a subshell.
# stop_pid PID...         SIGTERM, then SIGKILL after 3 s; waits (bounded) until they are gone
# wait_until SECS CMD...  runs CMD every 0.1 s until it succeeds; 1 (with a message) after SECS
# free_port               a TCP port free on 127.0.0.1 right now
# jsonl_assert FILE 'python statements on r': r is the list of FILE's JSON lines
# TEST_PYTHON             Debian's python3, the one sandboxes see (they bind the host's /usr)
TEST_PYTHON=/usr/bin/python3
[ -x "$TEST_PYTHON" ] || TEST_PYTHON=$(command -v python3 || echo python3)
TEST_ATEXIT=()

test_atexit() { TEST_ATEXIT+=("$1"); }

test_run_atexit() {
	local i
	for ((i = ${#TEST_ATEXIT[@]} - 1; i >= 0; i--)); do
		eval "${TEST_ATEXIT[i]}" >/dev/null 2>&1
	done
	TEST_ATEXIT=()
}
trap 'test_run_atexit; test_cleanup' EXIT

stop_pid() {
	local p i=0 left
	kill -TERM "$@" 2>/dev/null
	while [ "$i" -lt 30 ]; do
		left=
		for p in "$@"; do pid_alive "$p" && left=1; done
		[ -z "$left" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$@" 2>/dev/null
	return 0
}

wait_until() {
	local max=$(($1 * 10)) i=0
	shift
	while [ "$i" -lt "$max" ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		i=$((i + 1))
	done
	say "wait_until: '$*' still fails after $((max / 10)) s" >&2
	return 1
}

free_port() {
	"$TEST_PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

jsonl_assert() {
	"$TEST_PYTHON" -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
exec(sys.argv[2])' "$1" "$2"
}

# --- hosted provider test helpers (t0700-e2b.sh, t0710-daytona.sh) --------------------------
# start_fake NAME [ARGS...]  starts tests/fakes/NAME.py on 127.0.0.1 (top level of a file):
#                            FAKE_URL, FAKE_PID (of the last one started); at the end it
#                            stops and its sandboxes go
# fake_fault JSON [URL]      arms a fault (fakelib's POST /_fake/faults)
# fake_requests FILE [URL]   the requests the fake received, as a JSON list, into FILE
# fake_reset [URL]           clears faults and the request log (of the fake at URL)
FAKE_COUNT=0
start_fake() {
	local name=$1 f
	shift
	FAKE_COUNT=$((FAKE_COUNT + 1))
	f=$TRASH/fake-$FAKE_COUNT
	"$TEST_PYTHON" "$TEST_DIR/fakes/$name.py" --sbx "$SBX" --sbx-home "$TRASH/fake-home" \
		--port-file "$f.port" "$@" >"$f.log" 2>&1 &
	FAKE_PID=$!
	test_atexit "stop_pid $FAKE_PID; fake_sandboxes_rm"
	wait_until 20 test -s "$f.port" || { cat "$f.log" >&2; return 1; }
	FAKE_URL=http://127.0.0.1:$(cat "$f.port")
}

# whatever backing sandbox a fake left (killed before it could tidy up)
fake_sandboxes_rm() {
	local d
	for d in "$TRASH"/fake-home/sandboxes/*/; do
		[ -d "$d" ] && SBX_HOME=$TRASH/fake-home "$SBX" rm -f "$(basename "$d")"
	done
	return 0
}

fake_fault() { curl -fsS -X POST --data "$1" "${2:-$FAKE_URL}/_fake/faults" >/dev/null; }
fake_requests() { curl -fsS "${2:-$FAKE_URL}/_fake/requests" >"$1"; }
fake_reset() {
	curl -fsS -X DELETE "${1:-$FAKE_URL}/_fake/faults" >/dev/null &&
		curl -fsS -X DELETE "${1:-$FAKE_URL}/_fake/requests" >/dev/null
}
