#!/bin/bash
# sbx fs on local sandboxes: every verb running, paused and released; binary round trips and
# modes; missing paths (not_found, 125); and the hostile cases: links and '..' that point at
# the host resolve inside the sandbox, FIFOs and devices are refused without a wait, names
# shown on a terminal are escaped.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

# the hostile bytes of a name: an OSC title, a CSI, a bell, a C1 CSI, a byte that is not UTF-8
EVIL=$(printf 'x\033]0;pwned\007\033[2J\302\23331m\377y')
export EVIL

# term_safe FILE: no C0 control but newline, no DEL, no C1 control, valid UTF-8
term_safe() {
	"$TEST_PYTHON" -c 'import re, sys
t = open(sys.argv[1], "rb").read().decode("utf-8")
m = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t)
sys.exit("raw control %r in %r" % (m.group(), t) if m else 0)' "$1"
}

test_expect_success 'set-up: a sandbox named box; a host file no sandbox may reach' '
	sbx create --name box >/dev/null &&
	echo precious >host-secret && test_eq precious "$(cat host-secret)"
'

test_expect_success 'write then read: parents made, stdin streamed, a new file 0644' '
	printf "hello\n" | sbx fs write box /workspace/a/b/c.txt &&
	test_eq hello "$(sbx fs read box /workspace/a/b/c.txt)" &&
	test_eq hello "$(sbx exec box cat /workspace/a/b/c.txt)" &&
	test_eq 644 "$(sbx exec box stat -c %a /workspace/a/b/c.txt)" &&
	test_eq 755 "$(sbx exec box stat -c %a /workspace/a/b)" &&
	test_eq "0 0" "$(sbx exec box stat -c "%u %g" /workspace/a/b/c.txt)" &&
	test_eq hello "$(sbx fs read box workspace/a/b/c.txt)" &&
	printf "" | sbx fs write box /workspace/empty && sbx fs read box /workspace/empty >e.out &&
	test ! -s e.out
'

test_expect_success 'a 5 MiB binary file round trips byte for byte, both ways' '
	head -c 5242880 /dev/urandom >rand.bin &&
	sbx fs write box /workspace/rand.bin <rand.bin &&
	sbx fs read box /workspace/rand.bin >back.bin && cmp rand.bin back.bin &&
	sbx exec box cat /workspace/rand.bin >viaexec.bin && cmp rand.bin viaexec.bin &&
	sbx fs read box /workspace/rand.bin 2>e | head -c 10 >head.bin && test ! -s e &&
	test_eq 10 "$(wc -c <head.bin)" &&
	sbx fs write box /workspace/rand.bin </dev/null &&
	test_eq 0 "$(sbx exec box stat -c %s /workspace/rand.bin)"
'

test_expect_success 'a 1 GiB file is read through (streamed, not held)' '
	sbx exec box truncate -s 1G /workspace/huge &&
	test_eq 1073741824 "$(sbx fs read box /workspace/huge | wc -c)" &&
	sbx fs rm box /workspace/huge
'

test_expect_success 'modes: --mode for a new file, an existing one keeps its own unless given' '
	echo x | sbx fs write --mode 0600 box /workspace/m &&
	test_eq 600 "$(sbx exec box stat -c %a /workspace/m)" &&
	echo y | sbx fs write box /workspace/m &&
	test_eq 600 "$(sbx exec box stat -c %a /workspace/m)" && test_eq y "$(sbx fs read box /workspace/m)" &&
	echo z | sbx fs write box /workspace/m --mode 755 &&
	test_eq 755 "$(sbx exec box stat -c %a /workspace/m)" &&
	echo s | sbx fs write -p --mode 4750 box /workspace/s/t &&
	test_eq 4750 "$(sbx exec box stat -c %a /workspace/s/t)" &&
	expect_code 125 sbx fs write --mode 8 box /workspace/m </dev/null 2>e &&
	test_grep "octal mode" e &&
	expect_code 125 sbx fs write --mode 77777 box /workspace/m </dev/null 2>e
'

test_expect_success 'stat and ls: the entry fields, as text and as JSON' '
	sbx exec box -c "mkdir -p /workspace/l/sub && echo 12345 >/workspace/l/f && ln -s f /workspace/l/lnk && touch -d @1700000000 /workspace/l/f" &&
	sbx fs stat --json box /workspace/l/f >st.json &&
	json_assert st.json "assert r == {\"name\": \"f\", \"path\": \"/workspace/l/f\", \"type\": \"file\",
  \"size\": 6, \"mode\": \"0644\", \"uid\": 0, \"gid\": 0, \"mtime\": \"2023-11-14T22:13:20Z\"}, r" &&
	sbx fs stat --json box /workspace/l/lnk >st.json &&
	json_assert st.json "assert r[\"type\"] == \"symlink\" and r[\"link_target\"] == \"f\"" &&
	sbx fs stat box /workspace/l/f >st.txt && test_grep -x "type: file" st.txt &&
	test_grep -x "mode: 0644" st.txt &&
	sbx fs ls --json box /workspace/l >ls.json &&
	json_assert ls.json "assert [(e[\"name\"], e[\"type\"]) for e in r] == [(\"f\", \"file\"),
  (\"lnk\", \"symlink\"), (\"sub\", \"dir\")], r" &&
	sbx fs ls box /workspace/l >ls.txt && test_eq 3 "$(wc -l <ls.txt)" &&
	test_grep -E "^lrwxrwxrwx .* lnk -> f$" ls.txt && test_grep -E "^drwxr-xr-x .* sub$" ls.txt &&
	sbx fs ls --json -R box /workspace/l >lr.json &&
	json_assert lr.json "assert [e[\"path\"] for e in r] == [\"/workspace/l/f\",
  \"/workspace/l/lnk\", \"/workspace/l/sub\"], r" &&
	sbx fs ls --json box /workspace/l/f >one.json &&
	json_assert one.json "assert len(r) == 1 and r[0][\"name\"] == \"f\"" &&
	sbx exec box mkdir /workspace/void && sbx fs ls --json box /workspace/void >void.json &&
	json_assert void.json "assert r == []"
'

test_expect_success 'mkdir, mv, rm: one PATH or several; -p, -r, -f' '
	sbx fs mkdir box /workspace/d1 /workspace/d2 &&
	sbx exec box test -d /workspace/d2 &&
	expect_code 125 sbx fs mkdir box /workspace/d1 2>e && expect_one_error_line e "File exists" &&
	expect_code 125 sbx fs mkdir box /workspace/no/such 2>e &&
	sbx fs mkdir -p box /workspace/d1 /workspace/p/q/r && sbx exec box test -d /workspace/p/q/r &&
	echo m | sbx fs write box /workspace/d1/f &&
	sbx fs mv box /workspace/d1 /workspace/d3 && test_eq m "$(sbx fs read box /workspace/d3/f)" &&
	sbx fs mv box /workspace/d3/f /workspace/g && test_eq m "$(sbx exec box cat /workspace/g)" &&
	expect_code 125 sbx fs rm box /workspace/d3 2>e && expect_one_error_line e "is a directory" &&
	sbx fs rm box /workspace/g && expect_code 1 sbx exec box test -e /workspace/g &&
	sbx fs rm -r box /workspace/d3 /workspace/p && expect_code 1 sbx exec box test -e /workspace/p &&
	expect_code 125 sbx fs rm -f box /workspace/d2 2>e && expect_one_error_line e "is a directory" &&
	sbx fs rm -rf box /workspace/never /workspace/d2 && expect_code 1 sbx exec box test -e /workspace/d2
'

test_expect_success 'a missing path is not_found, exit 125, one line; rm goes on to the next' '
	for v in read stat ls rm; do
		expect_code 125 sbx fs $v box /workspace/missing 2>e </dev/null &&
		expect_one_error_line e "/workspace/missing.*No such file" || exit 1
	done &&
	expect_code 125 sbx fs mv box /workspace/missing /workspace/x 2>e &&
	expect_one_error_line e "No such file" &&
	sbx exec box touch /workspace/r1 &&
	expect_code 125 sbx fs rm box /workspace/missing /workspace/r1 2>e &&
	expect_code 1 sbx exec box test -e /workspace/r1 &&
	expect_code 125 sbx fs read nosuchbox /workspace/a 2>e
'

test_expect_success 'usage errors are 125 with the usage line' '
	expect_code 125 sbx fs 2>e && test_grep "missing subcommand" e &&
	expect_code 125 sbx fs cat box /x 2>e && test_grep "unknown subcommand" e &&
	expect_code 125 sbx fs read box 2>e && test_grep "wants a PATH" e &&
	expect_code 125 sbx fs read box /a /b 2>e && test_grep "unexpected argument" e &&
	expect_code 125 sbx fs mv box /a 2>e && test_grep "SRC and DST" e &&
	expect_code 125 sbx fs read -r box /a 2>e && test_grep "not an option of .fs read." e &&
	expect_code 125 sbx fs rm -r box / 2>e && test_grep "does not take ./." e &&
	expect_code 125 sbx fs read box "" 2>e && test_grep "empty path" e &&
	sbx fs --help >h && test_grep "sbx fs mv SB SRC DST" h
'

test_expect_success 'links and .. that point at the host resolve inside the sandbox' '
	host=$PWD/host-secret &&
	sbx exec box -c "echo inner >/workspace/inner && ln -s $host /workspace/to-host && ln -s ../../../../../../../..$host /workspace/up-host && ln -s /etc/shadow /workspace/to-shadow" &&
	expect_code 125 sbx fs read box /workspace/to-host 2>e && expect_one_error_line e "No such file" &&
	expect_code 125 sbx fs read box /workspace/up-host 2>e && expect_one_error_line e "No such file" &&
	expect_code 125 sbx fs read box "/../../../../..$host" 2>e && expect_one_error_line e "No such file" &&
	expect_code 125 sbx fs read box "/proc/self/root$host" 2>e &&
	expect_code 125 sbx fs read box "/proc/1/root$host" 2>e &&
	test_eq inner "$(sbx fs read box /../../../workspace/inner)" &&
	sbx exec box ln -s ../../workspace/inner /workspace/up-inner &&
	test_eq inner "$(sbx fs read box /workspace/up-inner)" &&
	echo planted | expect_code 125 sbx fs write box /workspace/to-host 2>e &&
	expect_one_error_line e "No such file" &&
	sbx exec box mkdir -p "${host%/*}" &&
	echo planted | sbx fs write box /workspace/to-host &&
	test_eq precious "$(cat host-secret)" &&
	test_eq planted "$(sbx exec box cat "$host")" &&
	expect_code 125 sbx fs read box /workspace/to-shadow 2>e &&
	expect_code 1 sbx exec box -c "cat /etc/shadow >/dev/null 2>&1" &&
	sbx fs rm box /workspace/to-shadow && test -f /etc/shadow &&
	sbx exec box -c "mkdir -p /workspace/keep && echo k >/workspace/keep/f && ln -s /workspace/keep /workspace/keeplink && ln -s / /workspace/rootlink" &&
	sbx fs rm -r box /workspace/keeplink && test_eq k "$(sbx exec box cat /workspace/keep/f)" &&
	sbx fs ls -R --json box /workspace >tree.json &&
	json_assert tree.json "l = [e for e in r if e[\"name\"] == \"rootlink\"]
assert len(l) == 1 and l[0][\"type\"] == \"symlink\", l
assert not any(e[\"path\"].startswith(\"/workspace/rootlink/\") for e in r)" &&
	test_eq precious "$(cat host-secret)"
'

test_expect_success 'a FIFO or a device is refused at once, never waited on; a file is the control' '
	sbx exec box mkfifo /workspace/fifo &&
	expect_code 125 timeout 60 "$SBX" fs read box /workspace/fifo 2>e &&
	expect_one_error_line e "not a regular file" &&
	echo x | expect_code 125 timeout 60 "$SBX" fs write box /workspace/fifo 2>e &&
	expect_code 125 timeout 60 "$SBX" fs read box /dev/zero 2>e &&
	expect_one_error_line e "not a regular file|Permission denied" &&
	echo x | expect_code 125 timeout 60 "$SBX" fs write box /dev/null 2>e &&
	expect_code 125 sbx fs read box /workspace 2>e && expect_one_error_line e "is a directory" &&
	echo x | expect_code 125 sbx fs write box /workspace 2>e &&
	expect_one_error_line e "is a directory" &&
	echo ok | sbx fs write box /workspace/regular && test_eq ok "$(sbx fs read box /workspace/regular)"
'

test_expect_success 'names a sandbox chose are escaped on a terminal; --json escapes them too' '
	sbx exec -e EVIL box -c "mkdir /workspace/evil && touch \"/workspace/evil/\$EVIL\"" &&
	sbx fs ls box /workspace/evil >out && term_safe out &&
	test_grep -F "x\\x1b]0;pwned" out &&
	sbx fs ls -R box /workspace/evil >out && term_safe out &&
	sbx fs ls --json box /workspace/evil >out.json && term_safe out.json &&
	json_assert out.json "assert r[0][\"name\"] == \"x\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\ufffdy\", r" &&
	"$SBX" fs stat box "/workspace/evil/$EVIL" >out && term_safe out
'

test_expect_success 'paused: every verb works, and the sandbox stays paused' '
	sbx pause box >/dev/null && test_eq paused "$(sb_state box)" &&
	echo p | sbx fs write box /workspace/paused/f && test_eq p "$(sbx fs read box /workspace/paused/f)" &&
	sbx fs stat box /workspace/paused/f >/dev/null && sbx fs ls box /workspace/paused >/dev/null &&
	sbx fs mkdir box /workspace/paused/d && sbx fs mv box /workspace/paused/d /workspace/paused/e &&
	sbx fs rm -r box /workspace/paused/e &&
	expect_code 125 sbx fs read box /workspace/paused/nope 2>e &&
	test_eq paused "$(sb_state box)" &&
	sbx resume box >/dev/null && test_eq p "$(sbx exec box cat /workspace/paused/f)"
'

test_expect_success 'released: every verb works on its files; the sandbox sees them on resume' '
	sbx pause --release box >/dev/null && test_eq released "$(sb_state box)" &&
	echo r | sbx fs write --mode 0640 box /workspace/rel/f &&
	test_eq r "$(sbx fs read box /workspace/rel/f)" &&
	sbx fs stat --json box /workspace/rel/f >st.json &&
	json_assert st.json "assert r[\"mode\"] == \"0640\" and r[\"size\"] == 2" &&
	sbx fs ls box /workspace/rel >/dev/null && sbx fs mkdir -p box /workspace/rel/x/y &&
	sbx fs mv box /workspace/rel/x /workspace/rel/z && sbx fs rm -r box /workspace/rel/z &&
	test_eq planted "$(sbx fs read box /workspace/to-host)" &&
	expect_code 125 sbx fs stat box /workspace/rel/nope 2>e && expect_one_error_line e "No such file" &&
	test_eq released "$(sb_state box)" && test_eq precious "$(cat host-secret)" &&
	sbx resume box >/dev/null && test_eq r "$(sbx exec box cat /workspace/rel/f)" &&
	test_eq 640 "$(sbx exec box stat -c %a /workspace/rel/f)" &&
	expect_code 1 sbx exec box test -e /workspace/rel/x
'

test_expect_success 'an image sandbox: its layers read, writes land in its own files, released too' '
	mkdir -p rootfs/bin rootfs/etc && cp /bin/busybox rootfs/bin/busybox &&
	ln -s busybox rootfs/bin/sh && ln -s busybox rootfs/bin/cat &&
	echo "from the image" >rootfs/etc/hello &&
	sbx image import --rootfs rootfs localhost/fsimg:1 >/dev/null &&
	sbx create --name img --image localhost/fsimg:1 >/dev/null &&
	test_eq "from the image" "$(sbx fs read img /etc/hello)" &&
	echo changed | sbx fs write img /etc/hello && test_eq changed "$(sbx exec img cat /etc/hello)" &&
	test_eq "from the image" "$(cat rootfs/etc/hello)" &&
	sbx pause --release img >/dev/null &&
	test_eq changed "$(sbx fs read img /etc/hello)" &&
	echo rel | sbx fs write img /srv/new && sbx fs ls --json img /srv >srv.json &&
	json_assert srv.json "assert [e[\"name\"] for e in r] == [\"new\"], r" &&
	sbx fs rm img /etc/hello && expect_code 125 sbx fs read img /etc/hello 2>e &&
	sbx resume img >/dev/null && test_eq rel "$(sbx exec img cat /srv/new)" &&
	expect_code 1 sbx exec img cat /etc/hello 2>/dev/null &&
	sbx rm -f img >/dev/null && sbx image rm localhost/fsimg:1 >/dev/null
'

test_expect_success 'completion: fs subcommands take their own options' '
	sbx __complete options fs write >o && test_grep -x -- --mode o && test_grep ! -x -- -r o &&
	sbx __complete options fs rm >o && test_grep -x -- -f o && test_grep -x -- -r o &&
	sbx __complete value-options | test_grep -x -- --mode
'

test_expect_success 'provider ls lists the fs capability of local' '
	sbx provider ls --json >p.json &&
	json_assert p.json "l = [p for p in r if p[\"name\"] == \"local\"][0]
assert \"fs\" in l[\"capabilities\"], l"
'

test_done
