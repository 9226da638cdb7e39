#!/bin/bash
# Users and groups inside a local sandbox: run by root, sandbox ids 0-65535 are host ids
# 100000..; run by an ordinary user with subordinate ids (/etc/subuid, /etc/subgid, and
# newuidmap/newgidmap), sandbox 0 is that user and 1..65536 its range, so setgroups, su, other
# users and their files work, and rm and cp still handle what those users wrote; without a range,
# only the caller's uid is mapped, and exec -u of another id and create --image of an image with
# users say how to get one. tests/run.sh grants uid 4242 a range (300000, 65536 ids) for its
# pass of this file; the root pass checks a uid without one (4243).
# run.sh: subordinate ids for the uid pass
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
# busybox, with /etc/passwd holding root and app (1000)
"${MKIMAGE[@]}" --out "$TRASH/bb.tar" --format docker-archive --name bb:1 --preset busybox \
	>/dev/null && chmod 644 "$TRASH/bb.tar"

# the sandbox's uid_map, one line per entry, spaces squeezed
uid_map() { sbx exec "$1" cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //'; }

# the record's id map, as "uid=[[...]] gid=[[...]]"
id_map() {
	sbx inspect "$1" | python3 -c 'import json, sys
m = json.load(sys.stdin)["extra"]["id_map"]
print("uid=%s gid=%s" % (json.dumps(m["uid"]).replace(" ", ""), json.dumps(m["gid"]).replace(" ", "")))'
}

if [ "$(id -u)" -eq 0 ]; then
	# --- run by root: the range of 100000.., as before; a uid without a range ----------------
	test_expect_success 'root: sandbox ids 0-65535 are host ids 100000.., in the record too' '
		sbx create --name r >/dev/null &&
		test_eq "0 100000 65536" "$(uid_map r)" &&
		test_eq "uid=[[0,100000,65536]] gid=[[0,100000,65536]]" "$(id_map r)" &&
		test_eq 1000 "$(sbx exec -u 1000 r id -u)" &&
		sbx rm -f r >/dev/null && assert_gone r
	'

	# another uid, with no range (and no passwd entry): its own store, the binary run.sh copied
	OTHER=4243
	OTHER_HOME=$TRASH/other
	mkdir -p "$OTHER_HOME" && chown "$OTHER:$OTHER" "$OTHER_HOME"
	as_other() {
		setpriv --reuid="$OTHER" --regid="$OTHER" --clear-groups \
			env -i HOME="$OTHER_HOME" SBX_HOME="$OTHER_HOME/.sbx" LANG=C PATH=/usr/bin:/bin \
			"$SBX" "$@"
	}
	test_atexit 'for s in o oi; do as_other rm -f "$s"; done'

	test_expect_success 'no range: only the caller'"'"'s uid; exec -u of another id is one line saying how to get one' '
		test_grep ! -E "^$OTHER:" /etc/subuid &&
		as_other create --name o >/dev/null &&
		test_eq "0 $OTHER 1" "$(as_other exec o cat /proc/self/uid_map | tr -s " " | sed "s/^ //")" &&
		expect_code 125 as_other exec -u 100 o true 2>err &&
		expect_one_error_line err "^sbx: error: uid 100 is not mapped in sandbox .o.: only your uid is mapped; add .$OTHER:100000:65536. to /etc/subuid and /etc/subgid \(and install uidmap\) and recreate it$" &&
		expect_code 125 as_other exec -u 0:5 o true 2>err &&
		expect_one_error_line err "gid 5 is not mapped" &&
		: "control: uid 0 runs" &&
		test_eq 0 "$(as_other exec -u 0 o id -u)" &&
		as_other rm -f o >/dev/null && test_eq "" "$(ls -A "$OTHER_HOME/.sbx/sandboxes")"
	'

	test_expect_success 'no range: create --image of an image with users says so in one line' '
		as_other image import "$TRASH/bb.tar" >/dev/null &&
		as_other create --image bb:1 --name oi >/dev/null 2>err &&
		expect_one_error_line err "^sbx: warning: image .bb:1. has users other than root \(app\).*only your uid is mapped; add .$OTHER:100000:65536. to /etc/subuid" &&
		as_other rm -f oi >/dev/null &&
		: "control: root is not told" &&
		sbx image import "$TRASH/bb.tar" >/dev/null &&
		sbx create --image bb:1 --name ri >/dev/null 2>err && test_eq "" "$(cat err)" &&
		sbx rm -f ri >/dev/null
	'
	test_done
fi

# --- run by an ordinary user ------------------------------------------------------------------
me=$(id -u)
if ! grep -Eq "^($me|$(getent passwd "$me" | cut -d: -f1)):" /etc/subuid 2>/dev/null; then
	test_skip 'subordinate ids' "uid $me has no range in /etc/subuid (tests/run.sh, run by root, grants uid 4242 one)"
	test_done
fi
base=$(grep -E "^($me|$(getent passwd "$me" | cut -d: -f1)):" /etc/subuid | head -n 1 | cut -d: -f2)

test_expect_success 'a range: sandbox 0 is the caller, 1..65536 the range; the record says so' '
	sbx create --name s >/dev/null &&
	test_eq "$(printf "0 %s 1\n1 %s 65536" "$me" "$base")" "$(uid_map s)" &&
	test_eq "$(printf "0 %s 1\n1 %s 65536" "$(id -g)" "$base")" "$(sbx exec s cat /proc/self/gid_map | tr -s " " | sed "s/^ //")" &&
	test_eq "uid=[[0,$me,1],[1,$base,65536]] gid=[[0,$(id -g),1],[1,$base,65536]]" "$(id_map s)" &&
	test_eq allow "$(sbx exec s cat /proc/self/setgroups)"
'

test_expect_success 'setgroups, chown to another user, and that user'"'"'s files' '
	sbx exec s sh -c "mkdir /tmp/d && echo hi >/tmp/d/f && chown -R 1000:1000 /tmp/d && chmod 700 /tmp/d" &&
	test_eq "1000 1000" "$(sbx exec s stat -c "%u %g" /tmp/d/f)" &&
	test_eq "1000 1000 5" "$(sbx exec s setpriv --reuid 1000 --regid 1000 --groups 1000,5 sh -c "id -u; id -G" | tr "\n" " " | sed "s/ $//")" &&
	test_eq hi "$(sbx exec -u 1000 s cat /tmp/d/f)" &&
	: "the last id of the range, and one past it" &&
	test_eq 65536 "$(sbx exec -u 65536 s id -u)" &&
	expect_code 125 sbx exec -u 65537 s true 2>err &&
	expect_one_error_line err "uid 65537 is not mapped in sandbox .s. \(it maps 0-65536\)"
'

test_expect_success 'cp out of and into a directory of another user, running and stopped' '
	sbx cp s:/tmp/d/f out1 && test_eq hi "$(cat out1)" &&
	echo in >in1 && sbx cp in1 s:/tmp/d/ &&
	sbx pause --release s >/dev/null &&
	sbx cp s:/tmp/d/in1 out2 && test_eq in "$(cat out2)" &&
	echo in2 >in2 && sbx cp in2 s:/tmp/d/ &&
	sbx resume s >/dev/null &&
	test_eq in2 "$(sbx exec -u 1000 s cat /tmp/d/in2)"
'

test_expect_success 'rm of a stopped sandbox with files of other users leaves nothing' '
	id=$(sbx inspect s | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	sbx pause --release s >/dev/null &&
	sbx rm -f s >/dev/null && assert_gone "$id" &&
	test_eq "" "$(ls -A "$SBX_HOME/sandboxes")"
'

test_expect_success 'an image: su, a user added by hand, exec -u, cp, rm of it running' '
	sbx image import "$TRASH/bb.tar" >/dev/null &&
	sbx create --image bb:1 --name i >/dev/null 2>err && test_eq "" "$(cat err)" &&
	: "su to the image'"'"'s app user (initgroups: setgroups)" &&
	test_eq 1000 "$(sbx exec i su app -c "id -u")" &&
	test_eq 1000 "$(sbx exec -u app i id -u)" &&
	: "useradd by hand: a passwd line, a home of its own" &&
	sbx exec i sh -c "echo bob:x:1001:1001::/home/bob:/bin/sh >>/etc/passwd && mkdir -p /home/bob && chown 1001:1001 /home/bob && chmod 700 /home/bob" &&
	test_eq "1001 /home/bob" "$(sbx exec -u bob i sh -c "echo secret >\$HOME/f; echo \$(id -u) \$HOME")" &&
	sbx cp i:/home/bob/f out3 && test_eq secret "$(cat out3)" &&
	id=$(sbx inspect i | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	pids=$(sandbox_pids i) &&
	sbx rm -f i >/dev/null &&
	# shellcheck disable=SC2086 # a list of pids
	assert_gone "$id" $pids &&
	test_eq "" "$(ls -A "$SBX_HOME/sandboxes")"
'

test_done
