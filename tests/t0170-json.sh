#!/bin/bash
# Errors as data (--json, SBX_JSON=1: {"error": {"code", "message"}} on stderr), exec --json's
# result object, ls --filter, rm --ignore-missing, and a loop of concurrent callers that judge
# sbx only by its JSON.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

# error_code FILE: the code of the one JSON error line in FILE
error_code() {
	python3 -c 'import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
e = json.loads(lines[0])["error"]
assert set(e) == {"code", "message"} and e["message"], e
print(e["code"])' "$1"
}

test_expect_success 'set-up: a sandbox named jx' '
	sbx create --name jx --label team=a --label tier=web >/dev/null
'

test_expect_success 'not_found: JSON with --json or SBX_JSON=1, the text line without' '
	expect_code 125 sbx inspect --json no-such-box >out 2>err &&
	test_eq not_found "$(error_code err)" &&
	expect_code 125 env SBX_JSON=1 "$SBX" rm no-such-box 2>err &&
	test_eq not_found "$(error_code err)" &&
	expect_code 125 env SBX_JSON=0 "$SBX" rm no-such-box 2>err &&
	expect_one_error_line err "^sbx: error: no such sandbox: .no-such-box." &&
	expect_code 125 sbx inspect no-such-box 2>err &&
	expect_one_error_line err "^sbx: error: no such sandbox"
'

test_expect_success 'already_exists: a second sandbox of the same name' '
	expect_code 125 sbx create --json --name jx >out 2>err &&
	test_eq already_exists "$(error_code err)" && test_eq "" "$(cat out)"
'

test_expect_success 'invalid_argument: a usage error is one JSON line, no usage text' '
	expect_code 125 sbx exec --json --timeout nonsense jx true 2>err &&
	test_eq invalid_argument "$(error_code err)" &&
	expect_code 125 sbx ls --json --no-such-option 2>err &&
	test_eq invalid_argument "$(error_code err)" &&
	expect_code 125 env SBX_JSON=1 "$SBX" no-such-command 2>err &&
	test_eq invalid_argument "$(error_code err)" &&
	expect_code 125 sbx exec --json -t jx true 2>err &&
	test_eq invalid_argument "$(error_code err)" &&
	expect_code 125 sbx exec --max-output 10k jx true 2>err &&
	test_grep "^sbx: error: --max-output goes with --json" err
'

test_expect_success 'unsupported: an option the provider cannot honour' '
	expect_code 125 env E2B_API_KEY=x "$SBX" create --json --provider e2b --disk 1g 2>err &&
	test_eq unsupported "$(error_code err)"
'

test_expect_success 'conflict_state: exec in a paused sandbox; with --resume it runs' '
	sbx pause jx &&
	expect_code 125 sbx exec --json jx true >out 2>err &&
	test_eq conflict_state "$(error_code err)" && test_eq "" "$(cat out)" &&
	expect_code 0 sbx exec --json --resume jx true >out &&
	json_assert out "assert r[\"exit_code\"] == 0"
'

test_expect_success 'exec --json: one object, stdout and stderr apart, the exit status' '
	expect_code 0 sbx exec --json jx sh -c "echo out; echo err >&2" >out 2>err &&
	test_eq "" "$(cat err)" && test_eq 1 "$(wc -l <out)" &&
	json_assert out "assert list(r) == [\"exit_code\", \"signal\", \"timed_out\", \"oom_killed\",
  \"duration_ms\", \"cpu_ms\", \"peak_memory_bytes\", \"stdout\", \"stdout_encoding\",
  \"stdout_truncated\", \"stdout_bytes\", \"stderr\", \"stderr_encoding\", \"stderr_truncated\",
  \"stderr_bytes\"], list(r)
assert r[\"exit_code\"] == 0 and r[\"signal\"] is None and not r[\"timed_out\"]
assert not r[\"oom_killed\"] and r[\"duration_ms\"] > 0
assert r[\"cpu_ms\"] >= 0 and r[\"peak_memory_bytes\"] > 0
assert r[\"stdout\"] == \"out\n\" and r[\"stdout_encoding\"] == \"utf-8\" and r[\"stdout_bytes\"] == 4
assert r[\"stderr\"] == \"err\n\" and not r[\"stderr_truncated\"]" &&
	expect_code 3 sbx exec --json jx sh -c "exit 3" >out &&
	json_assert out "assert r[\"exit_code\"] == 3 and r[\"signal\"] is None"
'

test_expect_success 'exec --json: the command'"'"'s own 125 is a result, sbx'"'"'s an error' '
	expect_code 125 sbx exec --json jx sh -c "exit 125" >out 2>err &&
	json_assert out "assert r[\"exit_code\"] == 125" && test_eq "" "$(cat err)" &&
	expect_code 125 sbx exec --json no-such-box true >out 2>err &&
	test_eq "" "$(cat out)" && test_eq not_found "$(error_code err)"
'

test_expect_success 'exec --json: a timeout is 124 and timed_out, a signal is named' '
	expect_code 124 sbx exec --json --timeout 0.5s jx sh -c "echo before; sleep 30" >out &&
	json_assert out "assert r[\"exit_code\"] == 124 and r[\"timed_out\"]
assert r[\"signal\"] == \"SIGKILL\" and r[\"stdout\"] == \"before\n\"" &&
	expect_code 143 sbx exec --json jx sh -c "kill -TERM \$\$" >out &&
	json_assert out "assert r[\"exit_code\"] == 143 and r[\"signal\"] == \"SIGTERM\"
assert not r[\"timed_out\"]"
'

test_expect_success 'exec --json: a missing command is 127 and command_not_found, no result' '
	expect_code 127 sbx exec --json jx no-such-command-sbx >out 2>err &&
	test_eq "" "$(cat out)" && test_eq command_not_found "$(error_code err)" &&
	expect_code 127 sbx exec --json jx sh -c "no-such-command-sbx" >out 2>/dev/null &&
	json_assert out "assert r[\"exit_code\"] == 127 and \"not found\" in r[\"stderr\"]"
'

test_expect_success 'exec --json: binary output is base64, text utf-8' '
	sbx exec --json jx sh -c "printf \"\\377\\000ab\"; printf \"h\\303\\251\" >&2" >out &&
	json_assert out "import base64
assert r[\"stdout_encoding\"] == \"base64\" and base64.b64decode(r[\"stdout\"]) == b\"\\xff\\x00ab\"
assert r[\"stdout_bytes\"] == 4
assert r[\"stderr_encoding\"] == \"utf-8\" and r[\"stderr\"] == \"h\\u00e9\""
'

test_expect_success 'exec --json --max-output: the first SIZE bytes kept, every byte counted' '
	sbx exec --json --max-output 1k jx sh -c "head -c 5000 /dev/zero | tr \"\\0\" x" >out &&
	json_assert out "assert r[\"stdout\"] == \"x\" * 1024 and r[\"stdout_truncated\"]
assert r[\"stdout_bytes\"] == 5000" &&
	sbx exec --json --max-output 3 jx printf "a\\303\\251" >out &&
	json_assert out "assert r[\"stdout\"] == \"a\\u00e9\" and not r[\"stdout_truncated\"]" &&
	sbx exec --json --max-output 2 jx printf "a\\303\\251" >out &&
	json_assert out "assert r[\"stdout\"] == \"a\" and r[\"stdout_truncated\"] and r[\"stdout_bytes\"] == 3"
'

test_expect_success 'exec --json: 20 MiB of output keeps sbx small (1 MiB kept by default)' '
	/usr/bin/time -f %M -o rss "$SBX" exec --json jx sh -c "head -c 20971520 /dev/zero | tr \"\\0\" y" >out &&
	json_assert out "assert r[\"stdout_bytes\"] == 20971520 and r[\"stdout_truncated\"]
assert len(r[\"stdout\"]) == 1 << 20" &&
	test "$(tail -n 1 rss)" -lt 65536
'

test_expect_success 'exec --json: a process left behind holding the pipes does not hold sbx' '
	sbx exec --json --timeout 20s jx sh -c "sleep 30 & echo started" >out &&
	json_assert out "assert r[\"stdout\"] == \"started\n\" and not r[\"timed_out\"]" &&
	sbx exec jx sh -c "pkill -x sleep || true"
'

# can this uid write a cgroup hierarchy sbx would use? (as t0310)
writable_cgroup() {
	local d
	for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/unified; do
		[ -w "$d/cgroup.procs" ] && return 0
	done
	return 1
}

if writable_cgroup && test_have_prereq python3; then
	test_expect_success 'exec --json: an OOM kill is oom_killed; sbx'"'"'s line stays out of "stderr"' '
		sbx create --name joom --memory 32m >/dev/null &&
		expect_code 137 sbx exec --json joom python3 -c "b = []
while True: b.append(b\"x\" * (1 << 20))" >out 2>err &&
		json_assert out "assert r[\"oom_killed\"] and r[\"signal\"] == \"SIGKILL\"
assert \"out of memory\" not in r[\"stderr\"]" &&
		test_grep "out of memory" err &&
		expect_code 0 sbx exec --json joom true >out &&
		json_assert out "assert not r[\"oom_killed\"]" &&
		sbx rm -f joom >/dev/null
	'
else
	test_skip 'exec --json: an OOM kill is oom_killed' 'no cgroup this uid may write: no --memory'
fi

test_expect_success 'ls --filter: same key ORs, keys AND; a bad key is invalid_argument' '
	sbx create --name jy --label team=b >/dev/null &&
	test_eq jx "$(sbx ls --json --filter label=team=a | python3 -c "import json,sys; print(\" \".join(x[\"name\"] for x in json.load(sys.stdin)))")" &&
	test_eq 2 "$(sbx ls -q --filter label=team | wc -l)" &&
	test_eq 1 "$(sbx ls -q --filter label=tier | wc -l)" &&
	test_eq 2 "$(sbx ls -q --filter name=jx --filter name=jy | wc -l)" &&
	test_eq 1 "$(sbx ls -q --filter name=jx --filter name=jy --filter label=team=b | wc -l)" &&
	test_eq 2 "$(sbx ls -q --filter state=running --filter provider=local | wc -l)" &&
	test_eq 0 "$(sbx ls -q --filter provider=e2b | wc -l)" &&
	test_eq 1 "$(sbx ls -q --filter id="$(sbx inspect jy | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"][:5])")" | wc -l)" &&
	expect_code 125 sbx ls --json --filter color=red 2>err && test_eq invalid_argument "$(error_code err)"
'

test_expect_success 'rm --ignore-missing: a missing sandbox is no error; inspect takes several' '
	sbx inspect jx jy >out && json_assert out "assert [x[\"name\"] for x in r] == [\"jx\", \"jy\"]" &&
	expect_code 0 sbx rm -f --ignore-missing jy no-such-box >out &&
	test_eq jy "$(cat out)" &&
	expect_code 125 sbx rm no-such-box 2>/dev/null
'

test_expect_success 'provider ls --json lists each provider'"'"'s capabilities' '
	sbx provider ls --json >out &&
	json_assert out "l = [p for p in r if p[\"name\"] == \"local\"][0]
assert \"exec-stdin\" in l[\"capabilities\"]"
'

test_expect_success 'a bash-tool loop: 8 callers x 200 calls, each judged by its JSON alone' '
	python3 "$TEST_DIR/helpers/agent-loop.py" "$SBX" jx 8 200 >loop.out 2>&1 ||
		{ cat loop.out; false; } &&
	test_eq "ok 1600" "$(cat loop.out)"
'

test_done
