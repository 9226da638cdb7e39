#!/bin/bash
# sbx exec and sbx run, interrupted or killed by any signal (SIGKILL too): nothing of the
# command's process group is left in the sandbox, and a caller reading its output sees the
# end; an attached exec holds the idle timeout (--ttl), unless --ttl-hard.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies (CMD is theirs)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

# sleeps SB: how many sleep processes run in SB (from its /proc)
sleeps() {
	"$SBX" exec "$1" sh -c 'for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done' |
		grep -c '^sleep$'
}
n_sleeps() { test "$(sleeps "$1")" = "$2"; }

CMD='sleep 1000 & sleep 1000 & echo started; wait'

test_expect_success 'set-up: a sandbox named sig' '
	sbx create --name sig >/dev/null &&
	test_eq 0 "$(sleeps sig)"
'

for sig in INT TERM HUP QUIT KILL; do
	test_expect_success "SIG$sig to sbx exec: no process of the command is left, the reader sees the end" '
		SB=sig interrupt '"$sig"' "$SBX" exec sig sh -c "$CMD" &&
		wait_until 5 n_sleeps sig 0 &&
		expect_code 0 sbx exec sig true
	'
done

test_expect_success 'SIGINT reaches the command (its trap runs), and its background children end' '
	SB=sig interrupt INT "$SBX" exec sig sh -c "trap \"echo int >/workspace/got-int; exit 3\" INT; $CMD" &&
	test_eq 3 "$rc" &&
	test_eq int "$(sbx exec sig cat /workspace/got-int)" &&
	wait_until 5 n_sleeps sig 0
'

test_expect_success 'a command that ignores SIGTERM decides; SIGKILL to sbx exec then ends it' '
	rm -f fifo out && mkfifo fifo || exit 1
	cat fifo >out &
	reader=$!
	"$SBX" exec sig sh -c "trap \"\" TERM; $CMD" >fifo &
	pid=$!
	wait_until 10 test_grep started out &&
	wait_until 10 n_sleeps sig 2 &&
	kill -TERM $pid && sleep 0.5 && pid_alive $pid &&
	test_eq 2 "$(sleeps sig)" &&
	kill -KILL $pid || exit 1
	wait $pid
	wait_until 5 n_sleeps sig 0 &&
	wait_until 5 gone $reader
'

test_expect_success 'exec -t: SIGTERM and SIGKILL to sbx exec end the command behind its pty' '
	for sig in TERM KILL; do
		SHELL=/bin/sh script -qfec "exec $SBX exec -t sig sh -c \"trap \\\"\\\" HUP; $CMD\"" /dev/null \
			</dev/null >tty.out 2>&1 &
		sp=$!
		wait_until 10 n_sleeps sig 2 || exit 1
		pid=$(pgrep -P $sp) && kill -$sig "$pid" &&
		wait_until 5 n_sleeps sig 0 || exit 1
		wait $sp || : # script says how the exec ended
	done
'

test_expect_success 'sbx run: SIGTERM and SIGKILL end the command, and the reader sees the end' '
	sbx ls -q | sort >before &&
	interrupt TERM "$SBX" run -- sh -c "$CMD" &&
	test_eq 143 "$rc" &&
	interrupt KILL "$SBX" run -- sh -c "$CMD" &&
	sbx ls -q | sort >after &&
	comm -13 before after >left &&
	test_eq 1 "$(wc -l <left)" &&
	wait_until 5 n_sleeps "$(cat left)" 0 &&
	sbx rm -f "$(cat left)" >/dev/null
'

test_expect_success '--ttl: a running exec holds the idle timeout; its end restarts the clock' '
	sbx create --name held --ttl 2s >/dev/null &&
	expect_code 0 sbx exec held sh -c "sleep 4; echo done" >out &&
	test_eq done "$(cat out)" &&
	wait_state held paused 15 &&
	sbx rm -f held >/dev/null
'

test_expect_success '--ttl-hard: the idle timeout runs out while an exec runs (the old way)' '
	expect_code 125 sbx create --ttl-hard 2>err && test_grep "goes with --ttl" err &&
	sbx create --name hard --ttl 2s --ttl-hard >/dev/null &&
	sbx inspect hard >j && json_assert j "assert r[\"options\"][\"ttl_hard\"] is True, r" ||
		exit 1
	"$SBX" exec hard sleep 30 >/dev/null 2>&1 &
	pid=$!
	wait_state hard paused 15 &&
	pid_alive $pid &&
	sbx rm -f hard >/dev/null &&
	wait_until 10 gone $pid
'

test_expect_success 'detached execs do not hold the idle timeout' '
	sbx create --name det --ttl 1s >/dev/null &&
	sbx exec -d det sleep 1000 >/dev/null &&
	wait_state det paused 15 &&
	sbx rm -f det >/dev/null
'

test_done
