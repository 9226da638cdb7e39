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

test_done
