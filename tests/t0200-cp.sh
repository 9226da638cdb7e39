#!/bin/bash
# sbx cp: docker cp's naming both ways, tar streams on stdin/stdout, metadata, big and sparse
# files, stopped sandboxes, and the hostile cases: symlinks, swapped directories, evil tars.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

# mktar FILE 'python statements': t is a tarfile.TarFile open for writing, add(name, **attrs)
# adds an entry (type, data, linkname, mode) — hostile tars are built here, never by tar(1)
mktar() {
	python3 -c 'import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT)
def add(name, type=tarfile.REGTYPE, data=b"", linkname="", mode=0o644, devmajor=0, devminor=0):
    i = tarfile.TarInfo(name)
    i.type, i.linkname, i.mode, i.size = type, linkname, mode, len(data)
    i.devmajor, i.devminor, i.mtime = devmajor, devminor, 1000000000
    t.addfile(i, io.BytesIO(data) if data else None)
exec(sys.argv[2])
t.close()' "$1" "$2"
}

# no file named NAME anywhere the test could have leaked it: the trash (outside the sandboxes'
# own directories), the host's /, /tmp and /abs
host_untouched() {
	local n found
	for n in "$@"; do
		if test -e "/$n" || test -e "/tmp/$n" || test -e "/abs/$n"; then
			echo "leaked: $n on the host"
			return 1
		fi
		found=$(find "$TRASH" -path "$SBX_HOME/sandboxes" -prune -o -name "$n" -print)
		if test -n "$found"; then
			echo "leaked: $found"
			return 1
		fi
	done
}

test_expect_success 'set-up: a sandbox named box; host files' '
	sbx create --name box >/dev/null &&
	mkdir -p src/sub && echo hello >src/a && echo deep >src/sub/d
'

test_expect_success 'host -> sandbox: file to a new name, into a directory, over a file' '
	sbx cp src/a box:/workspace/renamed &&
	test_eq hello "$(sbx exec box cat /workspace/renamed)" &&
	sbx cp src/a box:/workspace &&
	test_eq hello "$(sbx exec box cat /workspace/a)" &&
	sbx cp src/sub/d box:/workspace/ &&
	test_eq deep "$(sbx exec box cat /workspace/d)" &&
	sbx cp src/sub/d box:/workspace/renamed &&
	test_eq deep "$(sbx exec box cat /workspace/renamed)"
'

test_expect_success 'host -> sandbox: directory to a new path, into a directory, DIR/. contents' '
	sbx cp src box:/workspace/copy1 &&
	test "$(sbx exec box cat /workspace/copy1/a /workspace/copy1/sub/d)" = "hello
deep" &&
	sbx exec box mkdir /workspace/into &&
	sbx cp src box:/workspace/into &&
	test_eq deep "$(sbx exec box cat /workspace/into/src/sub/d)" &&
	sbx cp src/. box:/workspace/into &&
	test_eq hello "$(sbx exec box cat /workspace/into/a)" &&
	sbx cp src/. box:/workspace/fresh &&
	test_eq deep "$(sbx exec box cat /workspace/fresh/sub/d)" &&
	expect_code 1 sbx exec box test -e /workspace/fresh/src
'

test_expect_success 'sandbox -> host: the same naming' '
	sbx exec box -c "mkdir -p /srv/t/sub && echo in >/srv/t/f && echo s >/srv/t/sub/g" &&
	sbx cp box:/srv/t/f f1 && test_eq in "$(cat f1)" &&
	mkdir -p d1 && sbx cp box:/srv/t/f d1 && test_eq in "$(cat d1/f)" &&
	echo old >f2 && sbx cp box:/srv/t/f f2 && test_eq in "$(cat f2)" &&
	sbx cp box:/srv/t newdir && test_eq s "$(cat newdir/sub/g)" &&
	sbx cp box:/srv/t d1 && test_eq in "$(cat d1/t/f)" &&
	sbx cp box:/srv/t/. d1 && test_eq s "$(cat d1/sub/g)" &&
	sbx cp box:/srv/t/. fresh && test_eq in "$(cat fresh/f)" && test ! -e fresh/t
'

test_expect_success 'a destination whose parent does not exist: 125 naming it, both ways' '
	expect_code 125 sbx cp src/a box:/nodir/x 2>err &&
	expect_one_error_line err "directory ./nodir. does not exist" &&
	expect_code 1 sbx exec box test -e /nodir &&
	expect_code 125 sbx cp box:/srv/t/f nodir/x 2>err &&
	expect_one_error_line err "directory .nodir. does not exist" &&
	test ! -e nodir &&
	expect_code 125 sbx cp src/a box:/workspace/missing/ 2>err &&
	expect_one_error_line err "does not exist" &&
	expect_code 125 sbx cp src box:/workspace/a 2>err &&
	expect_one_error_line err "cannot copy a directory onto file"
'

test_expect_success 'a missing source, an unknown sandbox, bad usage: 125' '
	expect_code 125 sbx cp box:/workspace/nope x 2>err &&
	expect_one_error_line err "/workspace/nope. does not exist" && test ! -e x &&
	expect_code 125 sbx cp nope-src box:/workspace 2>err &&
	expect_one_error_line err "nope-src. does not exist" &&
	expect_code 125 sbx cp src/a nosuchbox:/workspace 2>err &&
	expect_one_error_line err "no such sandbox" &&
	expect_code 125 sbx cp nosuchbox:/etc/hostname x 2>err &&
	expect_one_error_line err "no such sandbox" &&
	expect_code 125 sbx cp src/a other 2>err && test_grep "^sbx: error: neither" err &&
	test_grep "^Usage: sbx cp" err &&
	expect_code 125 sbx cp box:/a box:/b 2>err && test_grep "^sbx: error: both" err &&
	expect_code 125 sbx cp - - 2>err && test_grep "^sbx: error: neither" err &&
	expect_code 125 sbx cp src/a 2>err && test_grep "missing DST" err &&
	expect_code 125 sbx cp --bogus src/a box:/ 2>err && test_grep "unknown option" err
'

test_expect_success 'tar streams: - as SRC reads stdin into SB:PATH, - as DST writes stdout' '
	tar -C src -cf repo.tar . &&
	sbx exec box mkdir /workspace/repo &&
	sbx cp - box:/workspace/repo <repo.tar &&
	test_eq deep "$(sbx exec box cat /workspace/repo/sub/d)" &&
	sbx cp box:/workspace/repo - | tar -tf - >list &&
	test_grep -x "repo/sub/d" list && test_grep -x "repo/a" list &&
	mkdir -p untar && sbx cp box:/workspace/repo/. - | tar -C untar -xf - &&
	test_eq deep "$(cat untar/sub/d)" &&
	expect_code 125 sbx cp - box:/workspace/nothere <repo.tar 2>err &&
	expect_one_error_line err "does not exist" &&
	expect_code 125 sbx cp - box:/workspace/a <repo.tar 2>err &&
	expect_one_error_line err "is not a directory"
'

test_expect_success 'symlinks stay links, hard links stay linked, modes and mtimes kept' '
	mkdir -p meta/d && echo x >meta/file && ln -s file meta/link && ln -s /etc/passwd meta/abs &&
	ln meta/file meta/hard && chmod 751 meta/file && chmod 700 meta/d &&
	touch -h -d "2001-02-03 04:05:06" meta/file meta/link meta/d &&
	sbx cp meta box:/workspace/meta &&
	sbx exec box -c "cd /workspace/meta && stat -c \"%n %a %Y %h %F\" file hard d && readlink link abs" >out &&
	test_grep -x "file 751 981173106 2 regular file" out &&
	test_grep -x "hard 751 981173106 2 regular file" out &&
	test_grep -x "d 700 981173106 2 directory" out &&
	test_grep -x "file" out && test_grep -x "/etc/passwd" out &&
	sbx cp box:/workspace/meta back &&
	test_eq "751 981173106 2" "$(stat -c "%a %Y %h" back/file)" &&
	test_eq "$(stat -c %i back/hard)" "$(stat -c %i back/file)" &&
	test_eq file "$(readlink back/link)" && test_eq /etc/passwd "$(readlink back/abs)" &&
	test_eq "700 981173106" "$(stat -c "%a %Y" back/d)"
'

test_expect_success 'files copied in belong to sandbox root; -a keeps the uid/gid' '
	echo o >owned && sbx cp owned box:/workspace/owned &&
	test_eq 0:0 "$(sbx exec box stat -c %u:%g /workspace/owned)" &&
	if [ "$(id -u)" -eq 0 ]; then
		chown 1234:2345 owned &&
		sbx cp owned box:/workspace/owned2 &&
		test_eq 0:0 "$(sbx exec box stat -c %u:%g /workspace/owned2)" &&
		sbx cp -a owned box:/workspace/owned3 &&
		test_eq 1234:2345 "$(sbx exec box stat -c %u:%g /workspace/owned3)" &&
		sbx exec box chown 77:88 /workspace/owned3 &&
		sbx cp box:/workspace/owned3 back3 && test_eq 0:0 "$(stat -c %u:%g back3)" &&
		sbx cp -a box:/workspace/owned3 back4 && test_eq 77:88 "$(stat -c %u:%g back4)"
	fi
'

test_expect_success 'a 2 GiB sparse file and 256 MiB of data stream with flat memory' '
	truncate -s 2G sparse && head -c 268435456 /dev/zero >dense &&
	python3 - "$SBX" <<-\EOF >rss
	import resource, subprocess, sys
	for a in (["sparse", "box:/workspace/sparse"], ["dense", "box:/workspace/dense"],
	          ["box:/workspace/sparse", "sparse.back"], ["box:/workspace/dense", "dense.back"]):
	    subprocess.run([sys.argv[1], "cp"] + a, check=True)
	print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
	EOF
	echo "max rss: $(cat rss) KiB" && test "$(cat rss)" -lt 65536 &&
	test_eq 2147483648 "$(sbx exec box stat -c %s /workspace/sparse)" &&
	test "$(sbx exec box du -k /workspace/sparse | cut -f1)" -lt 1024 &&
	test_eq 2147483648 "$(stat -c %s sparse.back)" && test "$(du -k sparse.back | cut -f1)" -lt 1024 &&
	test_eq 268435456 "$(stat -c %s dense.back)" && cmp dense dense.back &&
	sbx exec box rm /workspace/sparse /workspace/dense && rm -f sparse dense sparse.back dense.back
'

test_expect_success 'a symlink to /etc or ../../.. is copied as the link; -L resolves it inside' '
	mkdir -p hostdir && echo HOSTSECRET >hostdir/secret &&
	sbx exec box -c "ln -s /etc /workspace/x && ln -s ../../.. /workspace/y && \
		ln -s /etc/hostname /workspace/h && ln -s $TRASH/hostdir /workspace/hd && \
		ln -s $TRASH/hostdir/secret /workspace/hs" &&
	sbx cp box:/workspace/x out-x && test -L out-x && test_eq /etc "$(readlink out-x)" &&
	sbx cp box:/workspace/y out-y && test -L out-y && test_eq ../../.. "$(readlink out-y)" &&
	sbx cp -L box:/workspace/h out-h && test ! -L out-h && test_eq box "$(cat out-h)" &&
	expect_code 125 sbx cp -L box:/workspace/hs out-hs 2>err &&
	expect_one_error_line err "does not exist" && test ! -e out-hs &&
	expect_code 125 sbx cp -L box:/workspace/hd/secret out-hs 2>err && test ! -e out-hs &&
	expect_code 125 sbx cp box:/workspace/hd/ out-hs 2>err && test ! -e out-hs &&
	{ sbx cp src/a box:/workspace/y 2>err; test ! -e /a; } &&
	expect_code 125 sbx cp src/a box:/workspace/hd/planted 2>err && test ! -e hostdir/planted
'

test_expect_success 'the destination on the host is a symlink to a host file: that file is kept' '
	sbx exec box -c "echo root:x:sandbox >/workspace/shadow-like" &&
	echo precious >precious && ln -s "$PWD/precious" x &&
	{ sbx cp box:/workspace/shadow-like ./x; test_eq precious "$(cat precious)"; } &&
	mkdir -p into && ln -s "$PWD/precious" into/shadow-like &&
	{ sbx cp box:/workspace/shadow-like into/; test_eq precious "$(cat precious)"; } &&
	mkdir -p outside dd &&
	sbx exec box -c "mkdir -p /workspace/dd/into2 && echo t >/workspace/dd/into2/evil" &&
	ln -s "$PWD/outside" dd/into2 &&
	{ sbx cp box:/workspace/dd/. dd; test ! -e outside/evil; }
'

test_expect_success 'the sandbox swaps a directory for a symlink while cp runs (CVE-2018-15664)' '
	mkdir -p swap && echo HOSTSWAP >swap/inner && echo payload >race-payload &&
	sbx exec box -c "mkdir -p /workspace/real && echo sandbox-inner >/workspace/real/inner" &&
	{ sbx exec box -- timeout 8 sh -c "while :; do
		mv -T /workspace/real /workspace/d; mv -T /workspace/d /workspace/real;
		ln -s / /workspace/d; rm -f /workspace/d;
		ln -s $TRASH/swap /workspace/d; rm -f /workspace/d; done" & } &&
	for i in $(seq 25); do
		if sbx cp box:/workspace/d/inner race-out-$i 2>/dev/null; then
			echo race-out-$i >>copied
		else
			test ! -e race-out-$i || { echo "a failed copy left race-out-$i"; exit 1; }
		fi
		sbx cp race-payload box:/workspace/d/ 2>/dev/null
		sbx cp race-payload box:/workspace/d/race-landed 2>/dev/null
	done;
	wait;
	test_eq HOSTSWAP "$(cat swap/inner)" && test ! -e swap/race-payload &&
	test ! -e swap/race-landed && host_untouched race-landed &&
	touch copied && while read -r f; do
		test_eq sandbox-inner "$(cat "$f")" || { echo "$f: $(od -c "$f")"; exit 1; }
	done <copied
'

test_expect_success 'evil tars on stdin: ../evil, /abs/evil, through a symlink, devices: refused' '
	sbx exec box mkdir -p /workspace/evil && 
	mktar dotdot.tar "add(\"../evil-dd\", data=b\"x\"); add(\"a/../../evil-dd2\", data=b\"x\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <dotdot.tar 2>err &&
	expect_one_error_line err "evil-dd.*leaves the destination" &&
	mktar abs.tar "add(\"/abs/evil-abs\", data=b\"x\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <abs.tar 2>err &&
	expect_one_error_line err "evil-abs.*absolute" &&
	mktar sym.tar "add(\"l\", type=tarfile.SYMTYPE, linkname=\"/tmp\"); add(\"l/evil-sym\", data=b\"x\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <sym.tar 2>err &&
	expect_one_error_line err "evil-sym" &&
	mktar sym2.tar "add(\"m\", type=tarfile.SYMTYPE, linkname=\"../../..\"); add(\"m/evil-sym2\", data=b\"x\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <sym2.tar 2>err &&
	expect_one_error_line err "evil-sym2" &&
	mktar hard.tar "add(\"h1\", type=tarfile.LNKTYPE, linkname=\"/etc/passwd\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <hard.tar 2>err &&
	expect_one_error_line err "hard link" &&
	mktar hard2.tar "add(\"h2\", type=tarfile.LNKTYPE, linkname=\"../../etc/passwd\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <hard2.tar 2>err &&
	expect_one_error_line err "hard link" &&
	sbx exec box -c "echo mine >/workspace/evil/existing" &&
	mktar hard3.tar "add(\"h3\", type=tarfile.LNKTYPE, linkname=\"existing\")" &&
	expect_code 125 sbx cp - box:/workspace/evil <hard3.tar 2>err &&
	expect_one_error_line err "hard link" &&
	mktar dev.tar "add(\"evil-dev\", type=tarfile.CHRTYPE, devmajor=1, devminor=3)" &&
	expect_code 125 sbx cp - box:/workspace/evil <dev.tar 2>err &&
	expect_one_error_line err "evil-dev.*device" &&
	mktar blk.tar "add(\"evil-blk\", type=tarfile.BLKTYPE, devmajor=8, devminor=0)" &&
	expect_code 125 sbx cp - box:/workspace/evil <blk.tar 2>err &&
	expect_one_error_line err "evil-blk.*device" &&
	sbx exec box -c "ls -A /workspace/evil; ls / /tmp" >inside &&
	test_grep ! "^evil-" inside && test_grep ! -x h1 inside && test_grep ! -x h2 inside &&
	test_grep ! -x h3 inside &&
	host_untouched evil-dd evil-dd2 evil-abs evil-sym evil-sym2 evil-dev evil-blk h1 h2 h3 &&
	test_eq mine "$(sbx exec box cat /workspace/evil/existing)"
'

test_expect_success 'device nodes of the sandbox are never created on the host' '
	expect_code 125 sbx cp box:/dev/null devnull 2>err &&
	expect_one_error_line err "null.*device nodes are never created" && test ! -e devnull &&
	mkdir -p devdir &&
	expect_code 125 sbx cp box:/dev/. devdir 2>err &&
	expect_one_error_line err "device nodes are never created" &&
	test_eq "" "$(find devdir -type c -o -type b)"
'

test_expect_success 'setuid and setgid bits are dropped, both ways; hard links within a tar work' '
	mktar suid.tar "add(\"suid\", data=b\"#!/bin/sh\n\", mode=0o6755); \
		add(\"same\", type=tarfile.LNKTYPE, linkname=\"suid\")" &&
	sbx exec box mkdir -p /workspace/s &&
	sbx cp - box:/workspace/s <suid.tar &&
	test_eq "755 2" "$(sbx exec box stat -c "%a %h" /workspace/s/suid)" &&
	sbx exec box -c "cp /bin/true /workspace/s/st && cp /bin/true /workspace/s/sg && chmod 4755 /workspace/s/st && \
		chmod 2755 /workspace/s/sg && mkdir -p /workspace/s/sgdir && chmod 2775 /workspace/s/sgdir" &&
	test_eq 4755 "$(sbx exec box stat -c %a /workspace/s/st)" &&
	sbx cp box:/workspace/s sout &&
	test_eq 755 "$(stat -c %a sout/st)" && test_eq 755 "$(stat -c %a sout/sg)" &&
	test_eq 755 "$(stat -c %a sout/suid)" && test_eq 2775 "$(stat -c %a sout/sgdir)" &&
	test_eq "" "$(find sout -perm /6000 -type f)"
'

test_expect_success 'a stopped sandbox: cp in and out still work, its /usr stays read-only' '
	id=$(sbx create --name st) &&
	sbx exec st -c "echo before >/workspace/f && ln -s /tmp /workspace/esc" &&
	sup=$(python3 -c "import json; print(json.load(open(\"$SBX_HOME/sandboxes/$id/sandbox.json\"))[\"extra\"][\"supervisor_pid\"])") &&
	pid=$(python3 -c "import json; print(json.load(open(\"$SBX_HOME/sandboxes/$id/sandbox.json\"))[\"extra\"][\"init_pid\"])") &&
	kill -9 "$sup" &&
	for i in $(seq 50); do pid_alive "$pid" || break; sleep 0.1; done &&
	! pid_alive "$pid" && sbx ls | test_grep "st .*stopped" &&
	sbx cp st:/workspace/f stf && test_eq before "$(cat stf)" &&
	sbx cp src st:/workspace/src && sbx cp st:/workspace/src/sub/d std && test_eq deep "$(cat std)" &&
	test_eq "$(stat -c %u "$SBX_HOME/sandboxes/$id/root/workspace")" \
		"$(stat -c %u "$SBX_HOME/sandboxes/$id/root/workspace/src/a")" &&
	sbx cp st:/usr/bin/true st-true && cmp st-true /usr/bin/true &&
	expect_code 125 sbx cp src/a st:/usr/planted 2>err &&
	expect_one_error_line err "Read-only file system" && test ! -e /usr/planted &&
	test ! -e "$SBX_HOME/sandboxes/$id/root/usr/planted" &&
	: "a link to /tmp resolves to the sandbox'"'"'s /tmp even with no init running" &&
	sbx cp src/a "st:/workspace/esc/sbx-planted-$id" && test ! -e "/tmp/sbx-planted-$id" &&
	sbx cp "st:/workspace/esc/sbx-planted-$id" planted-back && cmp planted-back src/a &&
	sbx rm st >/dev/null
'

test_expect_success 'a cp killed in the middle of a stream leaves no process behind' '
	mkfifo fifo || exit 1
	"$SBX" cp - box:/workspace <fifo &
	cpid=$!
	exec 7>fifo
	kids=
	for i in $(seq 50); do kids=$(pgrep -P "$cpid") && break; sleep 0.1; done
	test_ne "" "$kids" || { echo "no copy process under $cpid"; exit 1; }
	kill -9 "$cpid"
	wait "$cpid"
	alive=
	for i in $(seq 50); do
		alive=
		for k in $kids; do pid_alive "$k" && alive=$k; done
		[ -z "$alive" ] && break
		sleep 0.1
	done
	exec 7>&-
	test_eq "" "$alive" || { echo "process $alive outlived its cp"; exit 1; }
'

test_expect_success 'libarchive is loaded by cp only, and never linked' '
	LD_DEBUG=libs sbx cp src/a box:/workspace/ld 2>ld.log &&
	test_grep "libarchive.so.13" ld.log &&
	LD_DEBUG=libs sbx exec box true 2>ld.log && test_grep ! libarchive ld.log &&
	ldd "$SBX" | test_grep ! libarchive
'

test_done
