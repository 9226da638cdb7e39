#!/bin/bash
# exec on --runtime gvisor (providers/local/gvisor-exec.c): a command that cannot start said in
# one line of sbx's (127, 126, 125 for a missing -w; a file without #! runs under sh);
# --timeout and every signal to sbx exec (SIGKILL too) end the command and its process group
# inside gVisor, not only sbx's client; -t with the caller's window size, resizes and ^C; -d with
# ps, logs, wait and kill by exec id; --json; -u by name from the sandbox's own passwd and
# group; runsc found in a directory of PATH and kept for the sandbox's life; cp's tar streams
# both ways. As root and as another uid alike (runsc runs as sandbox root either way).
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3
RUNSC=${SBX_RUNSC:-/usr/bin/runsc}
[ -x "$RUNSC" ] || TEST_SKIP_ALL="no runsc (scripts/install-deps installs it)"

# sleeps SB: how many sleep processes run in SB, from gVisor's /proc (not its init, a sleeper
# itself, and not a zombie its init has yet to reap)
sleeps() {
	"$SBX" exec "$1" sh -c 'cat /proc/[0-9]*/stat 2>/dev/null' |
		awk '$1 != 1 && $2 == "(sleep)" && $3 != "Z"' | wc -l
}
n_sleeps() { test "$(sleeps "$1")" = "$2"; }
# state SB PID: the state of process PID in gVisor ("" when there is none)
state() { "$SBX" exec "$1" sh -c "cut -d' ' -f3 /proc/$2/stat 2>/dev/null; exit 0"; }

CMD='sleep 1000 & sleep 1000 & echo started; wait'
pystat='import os, stat, sys; print(oct(stat.S_IMODE(os.lstat(sys.argv[1]).st_mode))[2:])'

test_expect_success 'set-up: a gVisor sandbox' '
	sbx create --name gx --runtime gvisor >/dev/null && test_eq 0 "$(sleeps gx)"
'

test_expect_success 'a command that cannot start: one line of sbx, 127, 126, 125 (controls: the same run)' '
	expect_code 127 sbx exec gx no-such-cmd-gx >out 2>err && test ! -s out &&
	expect_one_error_line err "^sbx: error: .no-such-cmd-gx.: command not found in sandbox .gx.$" &&
	expect_code 127 sbx exec gx /no/such/file 2>err &&
	expect_one_error_line err "/no/such/file.: command not found" &&
	sbx exec gx sh -c "printf \"echo ran \\\$1\\n\" >/tmp/plain; cp /tmp/plain /tmp/noexec; chmod 755 /tmp/plain; chmod 644 /tmp/noexec" &&
	expect_code 126 sbx exec gx /tmp/noexec 2>err &&
	expect_one_error_line err "^sbx: error: ./tmp/noexec.: cannot execute in sandbox .gx.: permission denied$" &&
	expect_code 0 sbx exec gx sh /tmp/noexec &&
	: "a file without #!: sh runs it, as execvp does" &&
	test_eq "ran arg" "$(sbx exec gx /tmp/plain arg)" &&
	expect_code 125 sbx exec -w /no/such/dir gx true 2>err &&
	expect_one_error_line err "cannot change to directory ./no/such/dir. in sandbox .gx." &&
	test_eq /tmp "$(sbx exec -w /tmp gx pwd)" &&
	: "the command'"'"'s own 127 and 128 are its statuses, not sbx'"'"'s lines" &&
	expect_code 127 sbx exec gx sh -c "exit 127" 2>err && test ! -s err &&
	expect_code 128 sbx exec gx sh -c "echo said >&2; exit 128" 2>err && test_eq said "$(cat err)"
'

test_expect_success '--timeout: 124, and the command and its group are gone in gVisor' '
	expect_code 124 sbx exec --timeout 2s gx sh -c "sleep 1037 & echo \$! >/tmp/bg; exec sleep 1038" &&
	bg=$(sbx exec gx cat /tmp/bg) && test -n "$bg" &&
	wait_until 10 sh -c "case \$(\"$SBX\" exec gx cut -d\" \" -f3 /proc/$bg/stat 2>/dev/null) in \"\"|Z) exit 0;; esac; exit 1" &&
	test_eq 0 "$(sleeps gx)" &&
	: "control: a background process of an exec that ends on its own runs on" &&
	sbx exec gx sh -c "sleep 1039 >/dev/null 2>&1 &" && test_eq 1 "$(sleeps gx)" &&
	sbx kill gx && wait_until 10 n_sleeps gx 0 && expect_code 0 sbx exec gx true
'

for sig in INT TERM HUP QUIT KILL; do
	test_expect_success "SIG$sig to sbx exec: nothing of the command is left in gVisor, the reader sees the end" '
		SB=gx interrupt '"$sig"' "$SBX" exec gx sh -c "$CMD" &&
		wait_until 10 n_sleeps gx 0 &&
		case '"$sig"' in
		INT) test_eq 130 "$rc" ;;
		TERM) test_eq 143 "$rc" ;;
		HUP) test_eq 129 "$rc" ;;
		QUIT) test_eq 131 "$rc" ;;
		KILL) test_eq 137 "$rc" ;;
		esac &&
		expect_code 0 sbx exec gx true
	'
done

test_expect_success 'SIGINT reaches the command (its trap runs, its status is sbx'"'"'s), its group ends' '
	SB=gx interrupt INT "$SBX" exec gx sh -c "trap \"echo int >/tmp/got-int; exit 3\" INT; $CMD" &&
	test_eq 3 "$rc" && test_eq int "$(sbx exec gx cat /tmp/got-int)" &&
	wait_until 10 n_sleeps gx 0
'

test_expect_success 'exec -t: SIGTERM and SIGKILL to sbx exec end the command behind its pty' '
	for sig in TERM KILL; do
		SHELL=/bin/sh script -qfec "exec $SBX exec -t gx sh -c \"trap \\\"\\\" HUP; $CMD\"" /dev/null \
			</dev/null >tty.out 2>&1 &
		sp=$!
		wait_until 20 n_sleeps gx 2 || exit 1
		pid=$(pgrep -P $sp) && kill -$sig "$pid" &&
		wait_until 10 n_sleeps gx 0 || exit 1
		wait $sp || : # script says how the exec ended
	done
'

if test_have_prereq TMUX; then
	export TMUX_TMPDIR="$TRASH"
	sock="sbx-t0232-$$"
	tm() { tmux -L "$sock" "$@"; }
	test_atexit 'tmux -L "$sock" kill-server'
	# the pane's text, without trailing blank lines
	screen() { tm capture-pane -p -t t0232 | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'; }
	wait_screen() { # PATTERN: bounded wait for the pane to show it
		local _
		for _ in $(seq 200); do screen | grep -q "$1" && return 0; sleep 0.1; done
		say "screen never showed '$1':" >&2
		screen >&2
		return 1
	}
	test_expect_success 'exec -it: a shell on a terminal of the window'"'"'s size, resized with it; ^C reaches it; status and terminal restored' '
		tm new-session -d -s t0232 -x 100 -y 30 "bash --norc --noprofile" &&
		tm send-keys -t t0232 "echo \$TERM >term; stty -a | grep -o icanon | head -n1 >before; \"$SBX\" exec -it gx sh; echo rc=\$? >rc; stty -a | grep -o icanon | head -n1 >after" Enter &&
		wait_screen "#" && test -s term &&
		tm send-keys -t t0232 "test -t 0 && echo stdin-is-a-tty; echo \$TERM-\$((40+2))" Enter &&
		wait_screen "stdin-is-a-tty" && wait_screen "^$(cat term)-42$" &&
		tm send-keys -t t0232 "stty size" Enter && wait_screen "^30 100" &&
		tm resize-window -t t0232 -x 120 -y 40 && sleep 0.5 &&
		tm send-keys -t t0232 "stty size" Enter && wait_screen "^40 120" &&
		tm send-keys -t t0232 "trap \"echo caught-int\" INT; sleep 1040" Enter &&
		wait_until 20 n_sleeps gx 1 &&
		tm send-keys -t t0232 C-c && wait_screen caught-int &&
		wait_until 10 n_sleeps gx 0 &&
		tm send-keys -t t0232 "exit 5" Enter &&
		wait_until 20 test -s after &&
		test_eq rc=5 "$(cat rc)" && test_eq icanon "$(cat before)" && test_eq icanon "$(cat after)"
	'
else
	test_skip 'exec -it under tmux' 'tmux is not installed (scripts/install-deps installs it)'
fi

test_expect_success 'exec -t without a terminal on stdin: 125 with one line' '
	expect_code 125 sbx exec -t gx true </dev/null 2>err && expect_one_error_line err "not a TTY"
'

test_expect_success 'exec -d: ps shows it by its pid in gVisor; logs, logs -f and wait see it end' '
	id=$(sbx exec -d gx sh -c "echo one; while [ ! -e /tmp/d-gate ]; do sleep 0.1; done; echo two; exit 6") &&
	test_match "^[0-9a-f]{12}$" "$id" &&
	sbx ps --json gx >ps &&
	json_assert ps "j = [x for x in r if x[\"id\"] == \"$id\"][0]; assert j[\"state\"] == \"running\" and j[\"pid\"] > 1, r" &&
	pid=$(json_assert ps "print([x for x in r if x[\"id\"] == \"$id\"][0][\"pid\"])") &&
	sbx exec gx cat /proc/$pid/cmdline | tr "\\0" " " >cmdline && test_grep "^sh -c echo one" cmdline &&
	wait_until 20 sh -c "\"$SBX\" logs gx $id | grep -q one" &&
	{ "$SBX" logs -f gx $id >follow & fp=$!; } &&
	sbx exec gx touch /tmp/d-gate &&
	expect_code 6 sbx wait gx $id && wait $fp &&
	test_eq "one
two" "$(cat follow)" && test_eq "one
two" "$(sbx logs gx $id)" &&
	sbx ps --json gx >ps &&
	json_assert ps "j = [x for x in r if x[\"id\"] == \"$id\"][0]; assert j[\"state\"] == \"exited\" and j[\"exit_code\"] == 6 and j[\"signal\"] is None, r"
'

test_expect_success 'exec -d: kill by exec id ends the command and its group in gVisor; kill of an ended one is 125' '
	id=$(sbx exec -d gx sh -c "sleep 1041 & sleep 1042") &&
	wait_until 20 n_sleeps gx 2 &&
	sbx kill gx $id && wait_until 10 n_sleeps gx 0 &&
	expect_code 137 sbx wait gx $id &&
	sbx ps --json gx >ps &&
	json_assert ps "j = [x for x in r if x[\"id\"] == \"$id\"][0]; assert j[\"exit_code\"] == 137 and j[\"signal\"] == \"SIGKILL\", r" &&
	expect_code 125 sbx kill gx $id 2>err && expect_one_error_line err "has ended" &&
	: "a signal of the caller'"'"'s choice reaches the command" &&
	id=$(sbx exec -d gx sh -c "trap \"echo got-usr1; exit 4\" USR1; while :; do sleep 0.1; done") &&
	wait_until 20 n_sleeps gx 1 && sbx kill -s USR1 gx $id &&
	expect_code 4 sbx wait gx $id && sbx logs gx $id >log && test_grep "^got-usr1$" log
'

test_expect_success 'exec -d: a command that cannot start is 127 and no exec; a missing -w 125' '
	expect_code 127 sbx exec -d gx no-such-cmd-gx >out 2>err && test ! -s out &&
	expect_one_error_line err "no-such-cmd-gx.: command not found" &&
	expect_code 125 sbx exec -d -w /no/such gx true 2>err &&
	expect_one_error_line err "cannot change to directory" &&
	sbx ps --json gx >ps && json_assert ps "assert not [x for x in r if \"no-such-cmd-gx\" in x[\"command\"]], r"
'

test_expect_success 'exec --json: streams apart, the status, a signal named, a timeout, errors as JSON' '
	expect_code 3 sbx exec --json gx sh -c "echo out; echo err >&2; exit 3" >o 2>e && test ! -s e &&
	json_assert o "assert r[\"exit_code\"] == 3 and r[\"signal\"] is None and not r[\"timed_out\"], r
assert r[\"stdout\"] == \"out\n\" and r[\"stderr\"] == \"err\n\", r" &&
	expect_code 143 sbx exec --json gx sh -c "kill -TERM \$\$" >o &&
	json_assert o "assert r[\"exit_code\"] == 143 and r[\"signal\"] == \"SIGTERM\", r" &&
	expect_code 124 sbx exec --json --timeout 1s gx sh -c "echo before; sleep 30" >o &&
	json_assert o "assert r[\"exit_code\"] == 124 and r[\"timed_out\"] and r[\"stdout\"] == \"before\n\", r" &&
	expect_code 127 sbx exec --json gx no-such-cmd-gx >o 2>e && test ! -s o &&
	json_assert e "assert r[\"error\"][\"code\"] == \"command_not_found\", r"
'

# a user's fields in the host's passwd, which is the sandbox's (it sees the host's /etc)
pw() { awk -F: -v u="$1" '$1 == u { print $3; print $4; print $6 }' /etc/passwd; }
gr() { awk -F: -v g="$1" '$1 == g { print $3 }' /etc/group; }
test_expect_success 'exec -u: a name, a number, a group, from the sandbox'"'"'s files; HOME; unknown names 125' '
	test -n "$(pw nobody)" && test -n "$(gr nogroup)" &&
	expect_code 125 sbx exec -u no-such-user-gx gx true 2>err &&
	expect_one_error_line err "no user .no-such-user-gx. in the /etc/passwd of sandbox .gx." &&
	expect_code 125 sbx exec -u root:no-such-group-gx gx true 2>err &&
	expect_one_error_line err "no group .no-such-group-gx." &&
	test_eq "0 0 /root" "$(sbx exec -u root gx sh -c "echo \$(id -u) \$(id -g) \$HOME")" &&
	if [ "$(id -u)" -eq 0 ]; then
		test_eq "$(pw nobody | tr "\n" " ")" "$(sbx exec -u nobody gx sh -c "id -u; id -g; echo \$HOME" | tr "\n" " ")" &&
		n=$(pw nobody | head -n1) &&
		test_eq "$(pw nobody | tr "\n" " ")" "$(sbx exec -u "$n" gx sh -c "id -u; id -g; echo \$HOME" | tr "\n" " ")" &&
		test_eq "$(pw daemon | head -n1) $(gr nogroup)" "$(sbx exec -u daemon:nogroup gx sh -c "echo \$(id -u) \$(id -g)")"
	else
		# run by an ordinary user without subordinate ids, only uid 0 exists inside
		expect_code 125 sbx exec -u nobody gx true 2>err && test_grep "only your uid is mapped" err
	fi
'

test_expect_success 'a runsc run that fails: create says runsc'"'"'s last line, past a long log, in one line (125); control: the real runsc boots' '
	mkdir -p fbin &&
	printf "#!/bin/sh\ncase \" \$* \" in *\" run \"*) i=0; while [ \$i -lt 60 ]; do echo \"noise line \$i of a long log\"; i=\$((i + 1)); done >&2; echo \"the-real-reason\" >&2; exit 1 ;; esac\nexec %s \"\$@\"\n" "$RUNSC" >fbin/runsc &&
	chmod 755 fbin/runsc &&
	expect_code 125 env SBX_RUNSC="$PWD/fbin/runsc" "$SBX" create --name gf --runtime gvisor 2>err &&
	expect_one_error_line err "runsc run failed: the-real-reason" &&
	test ! -e "$SBX_HOME/names/gf" &&
	sbx create --name gf --runtime gvisor >/dev/null && expect_code 0 sbx exec gf true &&
	sbx rm -f gf >/dev/null
'

test_expect_success 'runsc in a directory of PATH, kept for the sandbox'"'"'s life (controls: no PATH has it; a relative one)' '
	mkdir -p rbin empty &&
	printf "#!/bin/sh\ncase \" \$* \" in *\" exec \"*) echo runsc-from-path >&2 ;; esac\nexec %s \"\$@\"\n" "$RUNSC" >rbin/runsc &&
	chmod 755 rbin/runsc &&
	expect_code 125 env -u SBX_RUNSC PATH="$PWD/empty" "$SBX" create --name gp --runtime gvisor 2>err &&
	expect_one_error_line err "needs runsc in a directory of PATH" &&
	expect_code 125 env -u SBX_RUNSC PATH=rbin "$SBX" create --name gp --runtime gvisor 2>err &&
	expect_one_error_line err "needs runsc in a directory of PATH" &&
	env -u SBX_RUNSC PATH="rbin:$PWD/empty:$PWD/rbin" "$SBX" create --name gp --runtime gvisor >/dev/null &&
	: "a later call with another PATH runs the same runsc" &&
	test_eq hi "$(env -u SBX_RUNSC PATH=/nonexistent "$SBX" exec gp echo hi 2>err)" &&
	test_grep runsc-from-path err &&
	mv rbin/runsc rbin/moved &&
	expect_code 125 env -u SBX_RUNSC PATH=/usr/bin:/bin "$SBX" exec gp true 2>err &&
	expect_one_error_line err "runsc.*this sandbox was made with" &&
	mv rbin/moved rbin/runsc && expect_code 0 sbx exec gp true &&
	sbx rm -f gp >/dev/null
'

test_expect_success 'cp - SB:DIR and cp SB:DIR -: tar streams in and out (contents, a link, a mode)' '
	mkdir -p tin/sub && printf x >tin/f && chmod 750 tin/f && printf y >tin/sub/g &&
	ln -s f tin/l && head -c 1048576 /dev/urandom >tin/big &&
	sbx exec gx mkdir -p /workspace/tdir &&
	tar -C tin -cf - . | sbx cp - gx:/workspace/tdir &&
	test_eq y "$(sbx exec gx cat /workspace/tdir/sub/g)" &&
	test_eq f "$(sbx exec gx readlink /workspace/tdir/l)" &&
	test_eq 750 "$(sbx exec gx python3 -c "$pystat" /workspace/tdir/f)" &&
	test_eq "$(md5sum <tin/big)" "$(sbx exec gx sh -c "md5sum </workspace/tdir/big")" &&
	sbx exec gx sh -c "echo made inside >/workspace/tdir/in; chmod 604 /workspace/tdir/in" &&
	sbx cp gx:/workspace/tdir - >out.tar && mkdir tout && tar -C tout -xf out.tar &&
	test_eq "made inside" "$(cat tout/tdir/in)" && test_eq 604 "$(stat -c %a tout/tdir/in)" &&
	cmp tin/big tout/tdir/big && test -L tout/tdir/l && test_eq f "$(readlink tout/tdir/l)" &&
	test_eq 750 "$(stat -c %a tout/tdir/f)" &&
	: "a stream that is not a tar: 125 in one line" &&
	expect_code 125 sbx cp - gx:/workspace/tdir <tin/big 2>err && test_eq 1 "$(wc -l <err)"
'

test_expect_success 'rm: nothing of the execs is left (no pid file, no runsc process)' '
	id=$(sbx inspect gx | python3 -c "import json, sys; print(json.load(sys.stdin)[\"id\"])") &&
	test -z "$(ls -A "$SBX_HOME/sandboxes/$id/gvisor/state" | grep "^\.sbx-exec-")" &&
	sbx rm -f gx >/dev/null && test -z "$(sbx ls -q)" &&
	test_eq 0 "$(pgrep -f "^runsc-sandbox .* $id\$" | wc -l)"
'

test_done
