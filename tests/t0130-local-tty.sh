#!/bin/bash
# exec -t / -it under a real terminal (tmux), -u, -d with sbx logs.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

export TMUX_TMPDIR="$TRASH"
sock="sbx-t0130-$$"
tm() { tmux -L "$sock" "$@"; }
# the pane's text, without trailing blank lines
screen() { tm capture-pane -p -t t0130 | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'; }
wait_screen() { # PATTERN: bounded wait for the pane to show it
	local _
	for _ in $(seq 100); do screen | grep -q "$1" && return 0; sleep 0.1; done
	say "screen never showed '$1':" >&2
	screen >&2
	return 1
}
cleanup_tmux() { tm kill-server 2>/dev/null; }
trap 'cleanup_tmux; test_cleanup' EXIT

test_expect_success 'set-up: a sandbox named tty' '
	sbx create --name tty >/dev/null
'

if test_have_prereq tmux; then
test_expect_success 'exec -it gives a working shell in a pty; status and terminal restored' '
	tm new-session -d -s t0130 -x 100 -y 30 "bash --norc --noprofile" &&
	tm send-keys -t t0130 "stty -a | grep -o \"icanon\" | head -n1 > before; PS1=HOST\\$\\  \"$SBX\" exec -it tty sh; echo rc=\$? > rc; stty -a | grep -o icanon | head -n1 > after" Enter &&
	wait_screen "#" &&
	tm send-keys -t t0130 "echo hello-\$((40+2)); tty" Enter &&
	wait_screen "hello-42" && wait_screen "/dev/pts/" &&
	tm send-keys -t t0130 "stty size" Enter && wait_screen "^30 100" &&
	tm resize-window -t t0130 -x 120 -y 40 && sleep 0.3 &&
	tm send-keys -t t0130 "stty size" Enter && wait_screen "^40 120" &&
	tm send-keys -t t0130 "test -t 0 && echo stdin-is-a-tty; exit 5" Enter &&
	for i in $(seq 100); do test -s after && break; sleep 0.1; done &&
	test_eq rc=5 "$(cat rc)" && screen | test_grep stdin-is-a-tty &&
	test_eq icanon "$(cat before)" && test_eq icanon "$(cat after)"
'

test_expect_success 'exec -it: Ctrl-C reaches the command, not sbx' '
	tm send-keys -t t0130 "\"$SBX\" exec -it tty sh -c \"trap \\\"echo caught-int\\\" INT; echo armed; sleep 5; echo done\"; echo rc2=\$?" Enter &&
	wait_screen "armed" &&
	tm send-keys -t t0130 C-c &&
	wait_screen "rc2=" && screen | test_grep caught-int
'
else
	test_skip 'exec -it under tmux' 'tmux is not installed'
fi

test_expect_success 'exec -t without a terminal on stdin: 125 with one line' '
	expect_code 125 sbx exec -t tty true </dev/null 2>err &&
	expect_one_error_line err "not a TTY"
'

test_expect_success 'exec -u by name and by number, with a group' '
	if [ "$(id -u)" -ne 0 ]; then
		# run by an ordinary user without subordinate ids, only uid 0 exists inside
		expect_code 125 sbx exec -u nobody tty id 2>err &&
		expect_one_error_line err "only your uid is mapped" &&
		test_eq 0 "$(sbx exec -u 0 tty id -u)" && test_eq root "$(sbx exec -u root tty id -un)"
	else
		test_eq nobody "$(sbx exec -u nobody tty id -un)" &&
		test_eq 1234 "$(sbx exec -u 1234 tty id -u)" &&
		test_eq 4321 "$(sbx exec -u 1234:4321 tty id -g)" &&
		test_eq nogroup "$(sbx exec -u nobody:nogroup tty id -gn)" &&
		test_eq /nonexistent "$(sbx exec -u nobody tty sh -c "echo \$HOME")" &&
		expect_code 2 sbx exec -u nobody tty sh -c "echo x >/root/x" 2>/dev/null &&
		sbx exec -u nobody tty grep -q "CapEff:[[:space:]]*0000000000000000" /proc/self/status
	fi &&
	expect_code 125 sbx exec -u no-such-user tty id 2>err &&
	expect_one_error_line err "no user .no-such-user." &&
	expect_code 125 sbx exec -u root:no-such-group tty id 2>err &&
	expect_one_error_line err "no group .no-such-group."
'

test_expect_success 'exec -d runs in the background, prints its exec id; sbx logs shows the output' '
	sbx exec -d tty sh -c "echo first; echo to-stderr >&2; sleep 0.5; echo second" >id &&
	test_grep -Ex "[A-Za-z0-9._-]{1,64}" id &&
	sbx ps tty --json | python3 -c "import json, sys; print(json.load(sys.stdin)[0][\"pid\"])" >pid &&
	sbx exec tty sh -c "test -d /proc/$(cat pid)" &&
	for i in $(seq 50); do sbx logs tty | grep -q second && break; sleep 0.1; done &&
	sbx logs tty >out && test_grep -x first out && test_grep -x to-stderr out && test_grep -x second out
'

test_expect_success 'exec -d errors: missing command 127, flags that do not mix 125' '
	expect_code 127 sbx exec -d tty no-such-command-sbx 2>err &&
	expect_one_error_line err "command not found" &&
	expect_code 125 sbx exec -d -i tty true 2>err && test_grep "cannot take" err &&
	expect_code 125 sbx exec -d --timeout 1s tty true 2>err && test_grep "does not apply" err
'

test_expect_success 'logs --follow prints new output and ends when the sandbox goes' '
	sbx create --name fol >/dev/null &&
	sbx exec -d fol sh -c "for i in 1 2 3; do echo tick-\$i; sleep 0.3; done" >/dev/null &&
	(sbx logs -f fol >follow.out &) &&
	for i in $(seq 50); do grep -q tick-3 follow.out 2>/dev/null && break; sleep 0.1; done &&
	test_grep tick-1 follow.out && test_grep tick-3 follow.out &&
	sbx rm -f fol >/dev/null &&
	for i in $(seq 30); do pgrep -f "logs -f fol" >/dev/null || break; sleep 0.1; done &&
	! pgrep -u "$(id -u)" -f "sbx logs -f fol" >/dev/null
'

test_expect_success 'logs: a sandbox with no detached command prints nothing; unknown SB is 125' '
	sbx create --name quiet >/dev/null && sbx logs quiet >out && test ! -s out &&
	expect_code 125 sbx logs nope 2>err && expect_one_error_line err "no such sandbox"
'

test_done
