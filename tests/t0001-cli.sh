#!/bin/bash
# The command line: help, version, usage errors, exit statuses of sbx itself.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

test_expect_success 'a failed check of lib.sh says what it expected and what it got' '
	q="\047" &&
	expect_code 1 test_eq "one two" "one three" "the answer" 2>out &&
	printf "check failed: the answer\nexpected: ${q}one two${q}\nactual:   ${q}one three${q}\n" >want &&
	cmp want out &&
	expect_code 1 test_ne same same 2>out && grep -q "^expected anything but: .same.$" out &&
	expect_code 1 test_match "^a+$" aab 2>out && grep -q "^actual: .aab.$" out &&
	expect_code 1 test_contains needle haystack 2>out && grep -q "^actual: .haystack.$" out &&
	printf "one\ntwo\n" >f && printf "one\nthree\n" >g &&
	expect_code 1 test_file_eq f g 2>out && grep -q "^+three$" out && grep -q "^-two$" out &&
	printf "ab\n" | expect_code 1 test_grep -x a 2>out &&
	grep -q "expected a line matching .a. (grep -x)" out && grep -q "^  ab$" out &&
	expect_code 1 test_grep ! two f 2>out && grep -q "^  two$" out &&
	expect_code 1 test_grep ! two no-such-file 2>out && grep -q "could not read no-such-file" out &&
	test_eq x x && test_ne x y && test_match "^a+$" aa && test_contains ee needle &&
	test_file_eq f f && test_grep -x two f && test_grep ! three f && printf "ab\n" | test_grep b
'

test_expect_success 'sbx --help lists the commands and exits 0' '
	sbx --help >out &&
	test_grep "^Usage: sbx" out &&
	for c in create exec ls inspect rm run version help; do test_grep "^  $c " out || exit 1; done &&
	test_grep ! __complete out
'

test_expect_success 'sbx CMD --help and sbx help CMD print the same usage, exit 0' '
	for c in create exec ls inspect rm run version; do
		sbx $c --help >a && sbx help $c >b && cmp a b && test_grep "^Usage: sbx $c" a || exit 1
	done
'

test_expect_success 'sbx version says which sbx this is' '
	sbx version >out &&
	test_grep "^sbx [0-9]" out && test_grep "sandboxes for coding agents" out &&
	test_grep "providers: local" out &&
	sbx --version >out2 && cmp out out2
'

test_expect_success 'no command: usage on stderr, 125' '
	expect_code 125 sbx 2>err && test_grep "no command" err
'

test_expect_success 'unknown command: one error line, 125' '
	expect_code 125 sbx frobnicate 2>err &&
	test_grep "^sbx: error: unknown command .frobnicate." err
'

test_expect_success 'unknown global option: 125' '
	expect_code 125 sbx --frob ls 2>err && test_grep "^sbx: error: unknown option" err
'

test_expect_success 'unknown flag of a command: error, usage, pointer to --help, 125' '
	expect_code 125 sbx create --frob 2>err &&
	test_grep "^sbx: error: unknown option .--frob." err &&
	test_grep "^Usage: sbx create" err &&
	test_grep "Run .sbx create --help." err &&
	expect_code 125 sbx ls -z 2>err && test_grep "unknown option .-z." err
'

test_expect_success 'missing option value: 125' '
	expect_code 125 sbx create --name 2>err && test_grep "needs a value" err &&
	expect_code 125 sbx exec 2>err && test_grep "missing sandbox" err
'

test_expect_success 'missing arguments: 125 with one error line first' '
	expect_code 125 sbx rm 2>err && head -n1 err | test_grep "^sbx: error: missing sandbox" &&
	expect_code 125 sbx inspect 2>err && head -n1 err | test_grep "^sbx: error: missing sandbox"
'

test_expect_success 'unknown sandbox: one line naming it, 125, for every verb' '
	expect_code 125 sbx exec nope -- true 2>err &&
	expect_one_error_line err "^sbx: error: no such sandbox: .nope." &&
	expect_code 125 sbx inspect nope 2>err && expect_one_error_line err "no such sandbox" &&
	expect_code 125 sbx rm nope 2>err && expect_one_error_line err "no such sandbox" &&
	expect_code 125 sbx rm -f nope 2>err && expect_one_error_line err "no such sandbox"
'

test_expect_success 'invalid names are refused before anything is made' '
	for n in -bad .bad "a b" "a/b" "" "$(printf "a%.0s" $(seq 64))"; do
		expect_code 125 sbx create --name "$n" 2>err || exit 1
		test_grep "^sbx: error: " err || exit 1
	done &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success 'bad option values: 125 with a reason' '
	expect_code 125 sbx create -v relative:/x 2>err && test_grep "absolute" err &&
	expect_code 125 sbx create -v /nonexistent-sbx-path:/x 2>err && test_grep "cannot use volume" err &&
	expect_code 125 sbx create -v /tmp 2>err && test_grep "HOST:DEST" err &&
	expect_code 125 sbx create -w relative 2>err && test_grep "absolute" err &&
	expect_code 125 sbx create --label novalue 2>err && test_grep "K=V" err &&
	expect_code 125 sbx create -e "=x" 2>err && test_grep "invalid variable" err &&
	expect_code 125 sbx create --env-file /nonexistent-sbx-file 2>err && test_grep "cannot read env file" err &&
	expect_code 125 sbx create --provider nosuch 2>err && test_grep "unknown provider" err &&
	expect_code 125 sbx exec --timeout soon x -- true 2>err && test_grep "invalid duration" err &&
	expect_code 125 sbx exec --timeout -1s x -- true 2>err && test_grep "invalid duration" err &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success 'SBX_HOME not writable: one error line, 125' '
	mkdir -p ro && chmod 555 ro &&
	if [ "$(id -u)" -eq 0 ]; then
		# root writes anywhere: use a path under a regular file instead
		: >file && SBX_HOME=$PWD/file/home expect_code 125 sbx ls 2>err
	else
		SBX_HOME=$PWD/ro/home expect_code 125 sbx ls 2>err
	fi &&
	expect_one_error_line err "^sbx: error: cannot use state directory .*set SBX_HOME" &&
	SBX_HOME=relative expect_code 125 sbx ls 2>err && test_grep "absolute" err
'

test_expect_success 'SBX_HOME is created 0700' '
	SBX_HOME=$PWD/fresh/h sbx ls -q >out && test ! -s out &&
	test_eq 700 "$(stat -c %a fresh/h)" && test_eq 700 "$(stat -c %a fresh/h/sandboxes)"
'

test_expect_success 'ls of an empty store: header only; -q and --json empty' '
	sbx ls >out && test_eq 1 "$(wc -l <out)" && test_grep "^ID  *NAME  *PROVIDER  *STATE  *CREATED" out &&
	sbx ls -q >out && test ! -s out &&
	sbx ls --json >out && test_eq "[]" "$(tr -d " \n" <out)"
'

test_expect_success 'stdout closed: sbx reports the write failure with 125' '
	if [ -w /dev/full ]; then
		expect_code 125 sbx version >/dev/full 2>err && test_grep "cannot write to standard output" err
	fi
'

test_expect_success '__complete answers commands and providers' '
	sbx __complete commands >out && test_grep -x exec out && test_grep ! __complete out &&
	sbx __complete providers >out && test_grep -x local out
'

# expect_one_error_line_first FILE PATTERN: FILE's first line matches PATTERN (grep -E) and is the
# only "sbx: error:" line
expect_one_error_line_first() {
	if head -n 1 "$1" | grep -Eq -- "$2" && test "$(grep -c "^sbx: error:" "$1")" = 1; then
		return 0
	fi
	say "stderr does not start with '$2':" >&2
	cat "$1" >&2
	return 1
}

test_expect_success 'an option a command does not have is unknown for it, not missing a value' '
	expect_code 125 sbx ls -c 2>err &&
	grep -qx "sbx: error: unknown option .-c. for .sbx ls." err &&
	grep -qx "Usage: sbx ls \[OPTIONS\]" err && grep -q "^Run .sbx ls --help." err &&
	test "$(wc -l <err)" = 3 &&
	expect_code 125 sbx run -c true 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-c. for .sbx run.$" &&
	expect_code 125 sbx rm -u x 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-u. for .sbx rm.$" &&
	expect_code 125 sbx pause -e x 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-e. for .sbx pause.$" &&
	expect_code 125 sbx preview -w x 1 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-w. for .sbx preview.$" &&
	expect_code 125 sbx ls -qc 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-c. for .sbx ls.$" &&
	expect_code 125 sbx image ls -f 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .-f. for .sbx image ls.$" &&
	grep -q "^Run .sbx image --help." err
'

test_expect_success 'unknown long options name the command; a value where none is taken is said' '
	expect_code 125 sbx ls --bogus 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .--bogus. for .sbx ls.$" &&
	grep -q "^Run .sbx ls --help." err &&
	expect_code 125 sbx logs --bogus=1 x 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .--bogus. for .sbx logs.$" &&
	expect_code 125 sbx image pull --json x 2>err &&
	expect_one_error_line_first err \
		"^sbx: error: unknown option .--json. for .sbx image pull.$" &&
	expect_code 125 sbx run --json -- true 2>err &&
	expect_one_error_line_first err "^sbx: error: unknown option .--json. for .sbx run.$" &&
	expect_code 125 sbx ls --json=yes 2>err &&
	expect_one_error_line_first err "^sbx: error: option .--json. takes no value$" &&
	expect_code 125 sbx create --net- 2>err &&
	expect_one_error_line_first err \
		"^sbx: error: option .--net-. is ambiguous for .sbx create. \(--net-preset, --net-allow-private, --net-rate\)$"
'

test_expect_success 'an option that takes a value and has none still says so' '
	expect_code 125 sbx exec box -c 2>err &&
	expect_one_error_line_first err "^sbx: error: option .-c. needs a value$" &&
	expect_code 125 sbx exec -ic 2>err &&
	expect_one_error_line_first err "^sbx: error: option .-c. needs a value$" &&
	expect_code 125 sbx exec -u 2>err &&
	expect_one_error_line_first err "^sbx: error: option .-u. needs a value$" &&
	expect_code 125 sbx run -e 2>err &&
	expect_one_error_line_first err "^sbx: error: option .-e. needs a value$" &&
	expect_code 125 sbx pause --grace 2>err &&
	expect_one_error_line_first err "^sbx: error: option .--grace. needs a value$"
'

test_expect_success 'inspect takes --json (a no-op) and several sandboxes, each missing one said' '
	sbx inspect --help >out && grep -q "^Usage: sbx inspect \[--json\] SB\.\.\.$" out &&
	grep -q "^      --json " out &&
	expect_code 125 sbx inspect --json nope >out 2>err && test ! -s out &&
	expect_one_error_line err "^\{\"error\": \{\"code\": \"not_found\", \"message\": \"no such sandbox: .nope." &&
	expect_code 125 sbx inspect nope1 nope2 >out 2>err &&
	test "$(tr -d " \n" <out)" = "[]" &&
	test "$(wc -l <err)" = 2 &&
	head -n 1 err | grep -q "^sbx: error: no such sandbox: .nope1." &&
	tail -n 1 err | grep -q "^sbx: error: no such sandbox: .nope2."
'

if test_have_prereq USERNS; then
	# still FILE: an inspect document without what is measured live (memory, pressure)
	still() {
		python3 -c "import json, sys
r = json.load(open(sys.argv[1]))
for k in (\"memory_stats\", \"pressure\"):
    r.pop(k, None)
print(json.dumps(r, indent=1, sort_keys=True))" "$1"
	}
	test_expect_success 'inspect of several sandboxes: an array in the order given, the found ones' '
		sbx create --name t1a >ida && sbx create --name t1b >idb &&
		sbx inspect t1a >one && sbx inspect --json t1a >one-json &&
		: "the same but for what a running sandbox measures anew at each call" &&
		test_eq "$(still one)" "$(still one-json)" &&
		json_assert one "assert r[\"name\"] == \"t1a\" and r[\"state\"] == \"running\"" &&
		sbx inspect t1b t1a >two &&
		json_assert two "assert [x[\"name\"] for x in r] == [\"t1b\", \"t1a\"]" &&
		json_assert two "assert r[1][\"id\"] == \"$(cat ida)\"" &&
		expect_code 125 sbx inspect --json t1a nope t1b >some 2>err &&
		json_assert some "assert [x[\"name\"] for x in r] == [\"t1a\", \"t1b\"]" &&
		expect_one_error_line err "\"code\": \"not_found\", \"message\": \"no such sandbox: .nope." &&
		sbx rm -f t1a t1b >/dev/null
	'
else
	test_skip 'inspect of several sandboxes: an array in the order given, the found ones' \
		'needs user namespaces'
fi

if test_have_prereq USERNS; then
	test_expect_success 'exec -t without a terminal runs nothing: one line, 125' '
		sbx create --name t1tty >/dev/null &&
		expect_code 125 sbx exec -t t1tty touch /workspace/ran </dev/null >out 2>err &&
		test ! -s out &&
		expect_one_error_line err "^sbx: error: the input device is not a TTY: drop -t" &&
		expect_code 1 sbx exec t1tty test -e /workspace/ran &&
		sbx rm -f t1tty >/dev/null
	'
else
	test_skip 'exec -t without a terminal runs nothing: one line, 125' 'needs user namespaces'
fi

test_done
