#!/bin/bash
# Text a sandbox, a hosted provider, an archive or a damaged store chose never reaches the
# terminal raw: tables and error, warning and debug lines show escape sequences, C1 controls
# and bytes that are not UTF-8 as \x1b, \xc2\x9b, \xff; --json keeps the text, in ASCII; a
# command's own output and a cp - stream pass through untouched.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

# the hostile bytes: an OSC title, a CSI, a bell, a C1 CSI (U+009B), a byte that is not UTF-8
EVIL=$(printf 'x\033]0;pwned\007\033[2J\302\23331m\377y')
EVIL_SHOWN='x\x1b]0;pwned\x07\x1b[2J\xc2\x9b31m\xffy'
# what JSON can hold of them (UTF-8 only): ESC, BEL and U+009B
EVIL_UTF8=$(printf 'x\033]0;pwned\007\302\233y')
EVIL_UTF8_SHOWN='x\x1b]0;pwned\x07\xc2\x9by'
export EVIL EVIL_SHOWN EVIL_UTF8 EVIL_UTF8_SHOWN

# term_safe FILE...: no C0 control but newline, no DEL, no C1 control, valid UTF-8
term_safe() {
	"$TEST_PYTHON" -c 'import re, sys
for f in sys.argv[1:]:
    b = open(f, "rb").read()
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError as e:
        sys.exit("%s: not UTF-8: %s" % (f, e))
    m = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t)
    if m:
        sys.exit("%s: raw control %r in %r" % (f, m.group(), t))' "$@"
}

# ascii_only FILE: JSON output is printable ASCII and newlines
ascii_only() {
	"$TEST_PYTHON" -c 'import sys
b = open(sys.argv[1], "rb").read()
bad = [c for c in b if c != 10 and not 32 <= c < 127]
if bad:
    sys.exit("byte %#x in %s" % (bad[0], sys.argv[1]))' "$1"
}

# a record of the store with the hostile name, as a damaged or foreign store may hold
write_record() {
	mkdir -p "$SBX_HOME/sandboxes/0123456789ab" &&
	"$TEST_PYTHON" -c 'import json, os, sys
r = {"version": 1, "id": "0123456789ab", "name": os.environ["EVIL_UTF8"], "provider": "local",
     "state": "stopped", "created_unix": 1700000000, "options": {"labels": {"k": os.environ["EVIL_UTF8"]}}}
open(sys.argv[1], "w").write(json.dumps(r))' "$SBX_HOME/sandboxes/0123456789ab/sandbox.json"
}

test_expect_success 'an error line naming what it was given shows escapes, on one line' '
	expect_code 125 sbx inspect "$EVIL" 2>err &&
	expect_one_error_line err "^sbx: error: no such sandbox" &&
	test_grep -F "$EVIL_SHOWN" err && term_safe err &&
	expect_code 125 sbx "$EVIL" 2>err && term_safe err && test_grep -F "$EVIL_SHOWN" err &&
	expect_code 125 sbx rm "$(printf "a\nb")" 2>err && expect_one_error_line err "a\\\\nb"
'

test_expect_success 'debug lines show escapes too' '
	expect_code 125 sbx --debug inspect "$EVIL" 2>err &&
	test_grep "^sbx: debug: " err && test_grep -F "$EVIL_SHOWN" err && term_safe err
'

test_expect_success 'ls: a record holding control characters is shown escaped; --json keeps them' '
	write_record &&
	sbx ls >out && term_safe out &&
	grep -F "0123456789ab" out | test_grep -F "$EVIL_UTF8_SHOWN" &&
	sbx ls -q >out && test_eq 0123456789ab "$(cat out)" &&
	sbx ls --json >out.json && ascii_only out.json &&
	json_assert out.json "import os
assert r[0][\"name\"] == os.environ[\"EVIL_UTF8\"], r[0][\"name\"]
assert r[0][\"options\"][\"labels\"][\"k\"] == os.environ[\"EVIL_UTF8\"]" &&
	sbx inspect 0123456789ab >out.json && ascii_only out.json &&
	json_assert out.json "import os; assert r[\"name\"] == os.environ[\"EVIL_UTF8\"]" &&
	rm -rf "$SBX_HOME/sandboxes/0123456789ab"
'

test_expect_success 'image ls: names a damaged refs.json holds are shown escaped; --json keeps them' '
	mkdir -p "$SBX_HOME/images" &&
	"$TEST_PYTHON" -c "import json, os, sys
e = {\"config\": \"sha256:\" + \"a\" * 64, \"manifest\": \"sha256:\" + \"b\" * 64, \"layers\": [],
     \"chain\": [], \"size\": 10, \"created\": 1700000000}
refs = {\"docker.io/library/\" + os.environ[\"EVIL_UTF8\"] + \":t\" + os.environ[\"EVIL_UTF8\"]: e}
open(sys.argv[1], \"w\").write(json.dumps(refs))" "$SBX_HOME/images/refs.json" &&
	sbx image ls >out && term_safe out &&
	test_grep -F "$EVIL_UTF8_SHOWN" out && test_grep -F "t$EVIL_UTF8_SHOWN" out &&
	sbx image ls --json >out.json && ascii_only out.json &&
	json_assert out.json "import os; assert r[0][\"tag\"] == \"t\" + os.environ[\"EVIL_UTF8\"], r" &&
	rm -f "$SBX_HOME/images/refs.json"
'

test_expect_success 'provider ls: an API URL from the environment is shown escaped' '
	SBX_E2B_API_URL="http://$EVIL_UTF8" E2B_API_KEY=k sbx provider ls >out && term_safe out &&
	test_grep -F "API at http://$EVIL_UTF8_SHOWN" out &&
	SBX_E2B_API_URL="http://$EVIL_UTF8" sbx provider ls --json >out.json && ascii_only out.json
'

test_skip_unless USERNS python3 curl

if [ -z "$TEST_SKIP_ALL" ]; then
	start_fake e2b || TEST_SKIP_ALL="the E2B fake did not start"
fi
export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=${FAKE_URL:-} SBX_E2B_SANDBOX_URL=${FAKE_URL:-}
unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN SBX_REMOTE_TIMEOUT

test_expect_success 'set-up: a sandbox' '
	sbx create --name box --label "k=$EVIL_UTF8" >/dev/null &&
	sbx inspect box >out.json && ascii_only out.json &&
	json_assert out.json "import os; assert r[\"options\"][\"labels\"][\"k\"] == os.environ[\"EVIL_UTF8\"]"
'

test_expect_success 'cp: a tar entry name in the refusal is shown escaped' '
	"$TEST_PYTHON" -c "import io, os, sys, tarfile
t = tarfile.open(sys.argv[1], \"w\", format=tarfile.GNU_FORMAT)
i = tarfile.TarInfo(os.fsdecode(os.environb[b\"EVIL\"]))
i.type, i.devmajor, i.devminor = tarfile.CHRTYPE, 1, 3
t.addfile(i)
t.close()" evil.tar &&
	expect_code 125 sbx cp - box:/tmp <evil.tar 2>err &&
	expect_one_error_line err "^sbx: error: .*device nodes are never created" &&
	test_grep -F "$EVIL_SHOWN" err && term_safe err
'

test_expect_success 'a command not found, named with control characters: the error is escaped' '
	expect_code 127 sbx exec box -- "$EVIL" 2>err &&
	term_safe err && test_grep -F "$EVIL_SHOWN" err
'

test_expect_success 'exec output and a cp - stream pass through untouched' '
	sbx exec box printf "%s" "$EVIL" >out &&
	printf "%s" "$EVIL" >want && cmp want out &&
	sbx exec box sh -c "mkdir /tmp/d && : >\"/tmp/d/\$1\"" sh "$EVIL" &&
	sbx cp box:/tmp/d - >d.tar &&
	"$TEST_PYTHON" -c "import os, sys, tarfile
names = [os.fsencode(m.name) for m in tarfile.open(sys.argv[1])]
assert b\"d/\" + os.environb[b\"EVIL\"] in names, names" d.tar
'

test_expect_success 'a hosted provider: its error message is shown escaped' '
	sbx create --provider e2b --name ebox >/dev/null &&
	body=$("$TEST_PYTHON" -c "import json, os; print(json.dumps({\"code\": 400, \"message\": \"bad \" + os.environ[\"EVIL_UTF8\"]}))") &&
	fault() {
		"$TEST_PYTHON" -c "import json, sys
print(json.dumps({\"match\": sys.argv[1], \"kind\": \"status\", \"status\": 400, \"body\": sys.argv[2]}))" "$1" "$body"
	} &&
	fake_fault "$(fault "GET ^/sandboxes/")" &&
	sbx inspect ebox >out.json && ascii_only out.json &&
	json_assert out.json "assert \"\\u009by\" in r[\"remote_error\"], r[\"remote_error\"]" &&
	fake_fault "$(fault "POST /pause\$")" &&
	expect_code 125 sbx pause ebox 2>err &&
	expect_one_error_line err "^sbx: error: .*E2B answered HTTP 400: bad x" &&
	term_safe err && test_grep -F "\xc2\x9by" err &&
	sbx rm -f ebox
'

test_done
