#!/bin/bash
# sbx mcp: the Model Context Protocol server on stdio. The official MCP TypeScript SDK, pinned
# in tests/mcp (npm ci into the trash directory), drives it through tests/mcp/check.mjs: it
# lists the tools, compiles every schema with ajv, calls every tool against a local sandbox
# (the SDK checks each structured result against the tool's outputSchema), and with --sandbox
# checks that the id is gone from the schemas and another sandbox cannot be named (with the
# bound one working as the control). tests/mcp/raw.py checks the JSON-RPC layer byte by byte:
# malformed JSON, an unknown method, a line over 16 MiB, notifications, batches.
# The tools whose verbs this sbx may not have yet (exec --json, fs, ps/logs/kill, errors as
# JSON) run when `sbx VERB --help` says the verb is there; else each is reported as a skip
# naming the missing verb.
# shellcheck disable=SC2016,SC2034,SC2317 # lib.sh evals the single-quoted bodies, which use the
# variables set here (and test_atexit calls rm_all)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 node npm

MCP_SRC=$TEST_DIR/mcp

rm_all() {
	local id
	for id in $("$SBX" ls -q 2>/dev/null); do
		"$SBX" rm -f "$id" >/dev/null 2>&1
	done
	return 0
}
test_atexit rm_all

# the verbs of the contract that sbx mcp's tools run, when this sbx has them
have=
missing=
feature() { # feature NAME WHAT command...
	local name=$1 what=$2
	shift 2
	if "$@" >/dev/null 2>&1; then
		have="$have${have:+,}$name"
	else
		missing="$missing $name"
		test_skip "the MCP checks of '$name'" "$what is not in this sbx yet"
	fi
}
feature exec_json "sbx exec --json" eval '"$SBX" exec --help | grep -q -- "--json"'
feature fs "sbx fs" "$SBX" fs --help
feature jobs "sbx ps, sbx logs SB EXECID, sbx kill" eval '"$SBX" ps --help && "$SBX" kill --help'
feature json_errors "SBX_JSON=1 errors" \
	eval 'SBX_JSON=1 "$SBX" inspect no-such-sandbox 2>&1 | grep -q "\"not_found\""'
export MCP_HAVE=$have

TEST_TIMEOUT=300
test_expect_success 'npm ci installs the pinned MCP SDK' '
	mkdir sdk &&
	cp "$MCP_SRC/package.json" "$MCP_SRC/package-lock.json" "$MCP_SRC/check.mjs" sdk/ &&
	(cd sdk && timeout 280 npm ci --no-audit --no-fund --loglevel=error) &&
	v=$(node -p "require(\"./sdk/package.json\").dependencies[\"@modelcontextprotocol/sdk\"]") &&
	test_eq "$v" "$(node -p "require(\"./sdk/node_modules/@modelcontextprotocol/sdk/package.json\").version")"
'
TEST_TIMEOUT=60

test_expect_success 'sbx mcp: --help, bad arguments, a --sandbox that does not exist' '
	sbx mcp --help >out &&
	test_grep "sbx mcp \[--sandbox SB\]" out &&
	expect_code 125 sbx mcp extra 2>err &&
	test_grep "unexpected argument" err &&
	expect_code 125 sbx mcp --bogus 2>err &&
	test_grep "unknown option" err &&
	expect_code 125 sbx mcp --sandbox no-such-sandbox </dev/null >out 2>err &&
	expect_one_error_line err "no such sandbox" &&
	test_eq "" "$(cat out)" &&
	expect_code 125 sbx mcp --sandbox -x </dev/null 2>err &&
	test_grep "not a sandbox id or name" err
'

TEST_TIMEOUT=240
test_expect_success 'the JSON-RPC layer: parse errors, unknown methods, batches, big lines' '
	"$TEST_PYTHON" "$MCP_SRC/raw.py" "$SBX" >out 2>&1; rc=$?
	cat out &&
	test_eq 0 "$rc" "raw.py exit status" &&
	test_grep ! "^not ok" out
'

TEST_TIMEOUT=180
test_expect_success 'the MCP SDK drives every tool; no id is left behind' '
	(cd sdk && node check.mjs "$SBX" open) >out 2>&1; rc=$?
	cat out &&
	test_eq 0 "$rc" "check.mjs exit status" &&
	test_grep "^ok - sandbox_rm removes it" out &&
	test_grep ! "^not ok" out &&
	test_eq "" "$(sbx ls -q)" "sandboxes left"
'

test_expect_success 'sbx mcp --sandbox: one sandbox, and nothing else reachable' '
	sb=$(sbx create --name mcp-bound) &&
	other=$(sbx create --name mcp-other) &&
	(cd sdk && node check.mjs "$SBX" bound "$sb" "$other") >out 2>&1; rc=$?
	cat out &&
	test_eq 0 "$rc" "check.mjs exit status" &&
	test_grep "^ok - --sandbox: another sandbox cannot be named" out &&
	test_grep ! "^not ok" out &&
	test_eq running "$(sb_state "$other")" &&
	sbx rm -f "$sb" "$other" >/dev/null
'
test_done
