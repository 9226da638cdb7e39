#!/bin/bash
# The local provider's lifecycle: create, ls, inspect, prefixes, names, rm, nothing left behind.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

# pid of a running sandbox's init, from inspect
init_pid() { sbx inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])'; }

test_expect_success 'create prints a 12-hex id; the sandbox is running' '
	id=$(sbx create) &&
	echo "$id" | test_grep -Ex "[0-9a-f]{12}" &&
	sbx ls >out && grep -E "^$id  +-  +local  +running" out &&
	sbx rm -f "$id" >/dev/null
'

test_expect_success 'create --name: the name resolves, duplicate refused with 125' '
	sbx create --name web >id &&
	sbx inspect web >out && test_grep "\"name\": \"web\"" out &&
	expect_code 125 sbx create --name web 2>err &&
	expect_one_error_line err "^sbx: error: a sandbox named .web. already exists" &&
	test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'inspect: the record as JSON with id, name, provider, state, created, pid, options' '
	sbx inspect web >out &&
	json_assert out "
import re
assert r[\"id\"] == \"$(cat id)\", r
assert r[\"name\"] == \"web\" and r[\"provider\"] == \"local\" and r[\"state\"] == \"running\", r
assert re.fullmatch(r\"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\", r[\"created\"]), r
assert isinstance(r[\"pid\"], int) and r[\"pid\"] > 1, r
assert r[\"options\"][\"workdir\"] == \"/workspace\", r
assert r[\"version\"] == 1
"
'

test_expect_success 'a unique id prefix resolves; ls --json and -q agree' '
	id=$(cat id) &&
	sbx inspect "${id%????????}" >out && test_grep "\"id\": \"$id\"" out &&
	sbx ls -q >q && test_grep -x "$id" q &&
	sbx ls --json | python3 -c "import json,sys; a=json.load(sys.stdin); assert [r[\"id\"] for r in a] == [\"$id\"], a"
'

test_expect_success 'an ambiguous prefix is an error listing the matches' '
	# ids are random: make sandboxes until two share a first character (bounded)
	n=0; p=
	while [ $n -lt 40 ] && [ -z "$p" ]; do
		sbx create >>ids || exit 1
		n=$((n + 1))
		p=$(cut -c1 ids | sort | uniq -d | head -n1)
	done &&
	test_ne "" "$p" &&
	expect_code 125 sbx inspect "$p" 2>err &&
	expect_one_error_line err "^sbx: error: .$p. is ambiguous: it matches [0-9a-f]{12}, [0-9a-f]{12}" &&
	sbx rm -f $(cat ids) >/dev/null
'

test_expect_success 'create --json prints the record' '
	sbx create --json --name js --label team=a --label x=y -e A=1 >out &&
	json_assert out "
assert r[\"name\"] == \"js\" and r[\"state\"] == \"running\", r
assert r[\"options\"][\"labels\"] == {\"team\": \"a\", \"x\": \"y\"}, r
assert r[\"options\"][\"env\"] == [\"A=1\"], r
" &&
	sbx rm -f js >/dev/null
'

test_expect_success 'rm of a running sandbox without -f is refused (125); with -f it goes' '
	expect_code 125 sbx rm web 2>err &&
	expect_one_error_line err "is running.*sbx rm -f web" &&
	sbx inspect web >/dev/null &&
	sbx rm -f web >out && test_grep -x web out &&
	expect_code 125 sbx inspect web 2>/dev/null
'

test_expect_success 'after rm: no process, no file under SBX_HOME, name free again' '
	id=$(sbx create --name gone) &&
	pid=$(init_pid gone) && pid_alive $pid &&
	sup=$(python3 -c "import json; print(json.load(open(\"$SBX_HOME/sandboxes/$id/sandbox.json\"))[\"extra\"][\"supervisor_pid\"])") &&
	sbx exec gone -c "sleep 1000 & sleep 1000 & exit 0" &&
	sbx rm -f gone >/dev/null &&
	! pid_alive $pid && ! pid_alive $sup &&
	! test -e "$SBX_HOME/sandboxes/$id" &&
	! test -e "$SBX_HOME/names/gone" &&
	test_eq "" "$(ls "$SBX_HOME/sandboxes")" &&
	test_grep ! "$id" /proc/mounts &&
	sbx create --name gone >/dev/null && sbx rm -f gone >/dev/null
'

test_expect_success 'rm carries on past a failure and exits 125' '
	sbx create --name a1 >/dev/null && sbx create --name a2 >/dev/null &&
	expect_code 125 sbx rm -f a1 nope a2 >out 2>err &&
	test_grep -x a1 out && test_grep -x a2 out &&
	expect_one_error_line err "no such sandbox: .nope." &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success 'a stopped sandbox (supervisor killed) shows stopped, exec says so, rm cleans it' '
	id=$(sbx create --name st) &&
	sup=$(python3 -c "import json; print(json.load(open(\"$SBX_HOME/sandboxes/$id/sandbox.json\"))[\"extra\"][\"supervisor_pid\"])") &&
	pid=$(init_pid st) &&
	kill -9 "$sup" &&
	for i in $(seq 50); do pid_alive $pid || break; sleep 0.1; done &&
	! pid_alive $pid &&
	sbx ls >out && grep -E "^$id +st +local +stopped" out &&
	sbx inspect st | test_grep "\"state\": \"stopped\"" &&
	expect_code 125 sbx exec st -- true 2>err &&
	expect_one_error_line err "sandbox .st. is stopped; run .sbx resume st." &&
	sbx rm st >/dev/null &&
	! test -e "$SBX_HOME/sandboxes/$id"
'

test_expect_success 'a corrupt record: ls shows the others and one warning; rm -f removes it' '
	good=$(sbx create --name good) && bad=$(sbx create --name bad) &&
	pid=$(init_pid bad) &&
	echo "{ garbage" >"$SBX_HOME/sandboxes/$bad/sandbox.json" &&
	sbx ls >out 2>err &&
	test_grep "^$good" out && test_grep ! "^$bad" out &&
	expect_one_error_line err "^sbx: warning: cannot read sandbox record .*$bad/sandbox.json" &&
	expect_code 125 sbx rm "$bad" 2>err && test_grep "use -f" err &&
	sbx rm -f "$bad" >/dev/null &&
	! test -e "$SBX_HOME/sandboxes/$bad" &&
	for i in $(seq 50); do pid_alive $pid || break; sleep 0.1; done &&
	! pid_alive $pid &&
	sbx ls >out 2>err && test ! -s err &&
	sbx rm -f good >/dev/null
'

test_expect_success 'records and directories are private (0600 / 0700)' '
	id=$(sbx create) &&
	test_eq 700 "$(stat -c %a "$SBX_HOME/sandboxes/$id")" &&
	test_eq 600 "$(stat -c %a "$SBX_HOME/sandboxes/$id/sandbox.json")" &&
	sbx rm -f "$id" >/dev/null
'

test_expect_success 'parallel creates and rms of distinct sandboxes all succeed' '
	for i in $(seq 10); do sbx create --name p$i >/dev/null & done; wait &&
	test_eq 10 "$(sbx ls -q | wc -l)" &&
	for i in $(seq 10); do sbx exec p$i -- true & done; wait &&
	for i in $(seq 10); do sbx rm -f p$i >/dev/null & done; wait &&
	test_eq "" "$(sbx ls -q)" && test_eq "" "$(ls "$SBX_HOME/sandboxes")"
'

test_done
