#!/bin/bash
# snapshot create/ls/rm/restore and fork: what a sandbox wrote (content, modes, owners, symbolic
# and hard links, holes, user.* attributes, deletions) comes back whole in a restore and a fork,
# of sandboxes on the host's system and on an image, running, paused and released; a snapshot
# killed midway or on a full disk leaves nothing half-made; a link the sandbox planted is
# copied as a link, never followed. The uid pass has subordinate ids, so that files of other
# users inside are the caller's subordinate ids on the host.
# run.sh: subordinate ids for the uid pass
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies (which use the variables)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

HEX12='[0-9a-f]{12}'
ROOT=0
[ "$(id -u)" -eq 0 ] && ROOT=1
export ROOT

# what the sandbox wrote, as the sandbox sees it: one line per entry of /workspace, /tmp/snapt
# and /root/snapr (type, mode, owner, size, content digest, link target, the first name of a
# hard-linked file, user.* attributes, mtime)
MANIFEST_PY='
import hashlib, os, stat, sys
seen = {}
for top in ("/workspace", "/tmp/snapt", "/root/snapr"):
    if not os.path.lexists(top):
        print(top, "absent")
        continue
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for n in [""] + sorted(dirs + files):
            p = os.path.join(d, n) if n else d
            if n in dirs:
                continue
            st = os.lstat(p)
            f = [p, oct(st.st_mode), str(st.st_uid), str(st.st_gid)]
            if stat.S_ISLNK(st.st_mode):
                f += ["->", os.readlink(p), str(st.st_mtime_ns)]
            elif stat.S_ISREG(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in seen:
                    f += ["link-of", seen[key]]
                else:
                    seen[key] = p
                    h = hashlib.sha256(open(p, "rb").read()).hexdigest()[:16]
                    f += [str(st.st_size), h, str(st.st_mtime_ns), str(st.st_nlink)]
            if not stat.S_ISLNK(st.st_mode):
                try:
                    xs = sorted(x for x in os.listxattr(p) if x.startswith("user."))
                except OSError:
                    xs = []
                f += ["%s=%s" % (x, os.getxattr(p, x).decode()) for x in xs]
            print(" ".join(f))
'
manifest() { sbx exec "$1" python3 -c "$MANIFEST_PY"; }

# the files a default sandbox writes: every kind of entry the copy must keep
POPULATE='
set -e
cd /workspace
mkdir -p d/sub && chmod 0700 d/sub
echo hello >d/f && chmod 0640 d/f
echo two >d/g && ln d/g d/g2 && ln d/g sub-g
ln -s ../d/f d/rel && ln -s /etc/shadow d/abs
ln -s "$1" esc && ln -s "$2" escdir
truncate -s 64M sparse && printf x | dd of=sparse bs=1 seek=33554432 conv=notrunc 2>/dev/null
mkfifo d/fifo
python3 -c "import os; os.setxattr(\"d/f\", \"user.k\", b\"v1\"); os.setxattr(\"d/sub\", \"user.dir\", b\"yes\")"
echo doomed >del
# other users, where the sandbox has them (run by root, or with subordinate ids)
if chown 1000:1000 d/g 2>/dev/null; then chown -h 1000:1000 d/rel && chown 1001:1002 d/sub; fi
mkdir -p /tmp/snapt /root/snapr && echo tmp >/tmp/snapt/t && echo home >/root/snapr/r
'

# snap_id SNAP: a snapshot's id; snap_tree SNAP: the host path of its files
snap_id() { sbx snapshot ls --json | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if sys.argv[1] in (s["id"], s["name"]):
        print(s["id"])' "$1"; }
snap_tree() { echo "$SBX_HOME/snapshots/$(snap_id "$1")/tree"; }
# sb_dir SB: the host path of a sandbox's directory
sb_dir() { echo "$SBX_HOME/sandboxes/$(sbx inspect "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"; }

test_expect_success 'set-up: a sandbox that wrote every kind of file, and host files it points at' '
	mkdir -p "$TRASH/hostdir" && echo secret >"$TRASH/hostsecret" &&
	echo secret >"$TRASH/hostdir/inner" &&
	sbx create --name src >/dev/null &&
	sbx exec src sh -c "$POPULATE" sh "$TRASH/hostsecret" "$TRASH/hostdir" &&
	manifest src >"$TRASH/m.src" && test_grep "d/f 0o100640" "$TRASH/m.src" &&
	test_grep "user.k=v1" "$TRASH/m.src" && test_grep "link-of /workspace/sub-g" "$TRASH/m.src" &&
	{ [ "$(sbx exec src awk "{ n += \$3 } END { print n }" /proc/self/uid_map)" = 1 ] ||
		test_grep "d/sub 0o40700 1001 1002" "$TRASH/m.src"; }
'

test_expect_success 'snapshot create of a running sandbox: an id, listed, the sandbox still running' '
	sbx snapshot create src --name s1 >out && test_match "^$HEX12\$" "$(cat out)" &&
	test_eq running "$(sb_state src)" &&
	sbx exec src true &&
	sbx snapshot ls >ls && test_grep -E "^$(cat out) +s1 +src " ls &&
	sbx snapshot ls src -q >q && test_eq "$(cat out)" "$(cat q)" &&
	sbx snapshot ls --json >j &&
	json_assert j "s = r[0]; assert s[\"name\"] == \"s1\" and s[\"sandbox_name\"] == \"src\"; \
assert s[\"image\"] is None and s[\"size\"] >= 64 << 20 and s[\"created\"].endswith(\"Z\"); \
assert s[\"id_map\"][\"uid\"]"
'

test_expect_success 'the snapshot keeps holes: 64 MiB of file, a few KiB of disk' '
	t=$(snap_tree s1) && test -f "$t/workspace/sparse" &&
	test_eq 67108864 "$(stat -c %s "$t/workspace/sparse")" &&
	test "$(du -k "$t/workspace/sparse" | cut -f1)" -lt 1024
'

test_expect_success 'links the sandbox planted are copied as links, never followed (control: they resolve on the host)' '
	t=$(snap_tree s1) &&
	test -L "$t/workspace/esc" && test_eq "$TRASH/hostsecret" "$(readlink "$t/workspace/esc")" &&
	test -L "$t/workspace/escdir" && test_eq "$TRASH/hostdir" "$(readlink "$t/workspace/escdir")" &&
	test_eq secret "$(cat "$t/workspace/esc")" &&
	test_eq secret "$(cat "$t/workspace/escdir/inner")" &&
	{ grep -rqs secret "$t"; test $? -ne 0; } &&
	test_eq "$TRASH/hostsecret" "$(stat -c %N "$t/workspace/esc" | sed "s/.* -> .//; s/.\$//")"
'

test_expect_success 'fork of a snapshot: the same files, owners, links, holes and attributes' '
	sbx fork s1 --name f1 >out && test_match "^$HEX12\$" "$(cat out)" &&
	manifest f1 >m.f1 && test_file_eq "$TRASH/m.src" m.f1 &&
	sbx exec f1 sh -c "du -k /workspace/sparse" >du && test "$(cut -f1 du)" -lt 1024 &&
	sbx exec f1 readlink /workspace/esc >l && test_eq "$TRASH/hostsecret" "$(cat l)" &&
	expect_code 1 sbx exec f1 cat /workspace/esc &&
	sbx exec f1 cat /workspace/d/rel >c && test_eq hello "$(cat c)" &&
	sbx exec f1 cat /etc/hostname >h && test_eq f1 "$(cat h)"
'

test_expect_success 'a fork writes its /etc/hostname in its own tree, not through a link the source planted (control: the link is there)' '
	mkdir -p "$TRASH/victim" &&
	sbx create --name planter >/dev/null &&
	sbx exec planter sh -c "rm -rf /run/sbx && ln -s \"\$1\" /run/sbx && readlink /run/sbx" sh \
		"$TRASH/victim" >l && test_eq "$TRASH/victim" "$(cat l)" &&
	sbx snapshot create planter --name planted >/dev/null &&
	test -L "$(snap_tree planted)/run/sbx" &&
	sbx fork planted --name planted-fork >/dev/null &&
	test_eq "" "$(ls -A "$TRASH/victim")" &&
	sbx exec planted-fork cat /etc/hostname >h && test_eq planted-fork "$(cat h)" &&
	sbx exec planted-fork sh -c "test -d /run/sbx && ! test -L /run/sbx"
'

test_expect_success 'restore of a running sandbox: deletions and changes undone, processes ended' '
	sbx exec src sh -c "rm /workspace/del /workspace/d/g2 /tmp/snapt/t; echo changed >/workspace/d/f; \
echo new >/workspace/new; rm -rf /workspace/d/sub" &&
	sbx exec -d src sleep 1000 >/dev/null &&
	sbx exec src sh -c "pgrep -x sleep" >p && test -s p &&
	manifest src >m.changed && test_grep ! "/workspace/del " m.changed &&
	sbx snapshot restore src s1 >out && test_eq src "$(cat out)" &&
	test_eq running "$(sb_state src)" &&
	expect_code 1 sbx exec src pgrep -x sleep &&
	manifest src >m.back && test_file_eq "$TRASH/m.src" m.back &&
	sbx exec src cat /etc/hostname >h && test_eq src "$(cat h)"
'

test_expect_success 'paused: snapshot leaves it paused; restore leaves it paused; resume sees the files' '
	sbx exec src sh -c "echo paused-era >/workspace/p" &&
	sbx pause src >/dev/null &&
	sbx snapshot create src --name s2 >/dev/null &&
	test_eq paused "$(sb_state src)" &&
	sbx snapshot restore src s1 >/dev/null && test_eq paused "$(sb_state src)" &&
	sbx resume src >/dev/null && manifest src >m && test_file_eq "$TRASH/m.src" m &&
	sbx fork s2 --name f2 >/dev/null && sbx exec f2 cat /workspace/p >c &&
	test_eq paused-era "$(cat c)"
'

test_expect_success 'released: snapshot and restore work on its files, it stays released' '
	sbx exec src sh -c "echo rel >/workspace/r" &&
	sbx pause --release src >/dev/null &&
	sbx snapshot create src --name s3 >/dev/null && test_eq released "$(sb_state src)" &&
	sbx snapshot restore src s1 >/dev/null && test_eq released "$(sb_state src)" &&
	sbx resume src >/dev/null && manifest src >m && test_file_eq "$TRASH/m.src" m &&
	sbx fork s3 --name f3 >/dev/null && sbx exec f3 cat /workspace/r >c && test_eq rel "$(cat c)"
'

# where forks stack on a snapshot (no btrfs), the one a fork of a sandbox takes stays while the
# fork stands on it, and goes with it; on btrfs the fork has files of its own and it goes at once
test_expect_success 'fork of a sandbox: its files now, through a snapshot that goes when nothing stands on it' '
	sbx snapshot ls -q >before &&
	sbx exec f1 sh -c "echo from-f1 >/workspace/mark" &&
	sbx fork f1 --name f1b >/dev/null &&
	sbx exec f1b cat /workspace/mark >c && test_eq from-f1 "$(cat c)" &&
	sbx snapshot ls -q >after &&
	if [ -n "${SNAP_ON_BTRFS:-}" ]; then
		test_file_eq before after
	else
		test_eq $(($(wc -l <before) + 1)) "$(wc -l <after)" &&
		sbx snapshot ls --json >j &&
		json_assert j "assert [s for s in r if s[\"implicit\"] and s[\"sandbox_name\"] == \"f1\"]" &&
		sbx rm -f f1b >/dev/null && sbx snapshot ls -q >after && test_file_eq before after &&
		sbx fork f1 --name f1b >/dev/null
	fi
'

test_expect_success 'fork NAME: a snapshot named so exactly, before a sandbox whose id begins so (control: the id prefix alone forks the sandbox)' '
	sid=$(sbx inspect src | python3 -c "import json, sys; print(json.load(sys.stdin)[\"id\"])") &&
	p=$(printf %s "$sid" | cut -c1-11) &&
	sbx snapshot create f1 --name "$p" >/dev/null &&
	sbx fork "$p" --name byname >/dev/null && sbx exec byname cat /workspace/mark >c &&
	test_eq from-f1 "$(cat c)" &&
	sbx rm -f byname >/dev/null && sbx snapshot rm "$p" >/dev/null &&
	sbx fork "$p" --name byid >/dev/null && expect_code 1 sbx exec byid cat /workspace/mark &&
	sbx rm -f byid >/dev/null
'

test_expect_success 'create --from SNAP is a fork' '
	sbx create --from s1 --name viacreate >/dev/null &&
	manifest viacreate >m && test_file_eq "$TRASH/m.src" m &&
	sbx inspect viacreate >j && test_grep "\"from\": \"$(snap_id s1)\"" j
'

test_expect_success '20 forks of one snapshot, each with the files' '
	sbx exec src sh -c "rm -f /workspace/sparse && head -c 4M /dev/urandom >/workspace/blob" &&
	sbx snapshot create src --name many >/dev/null &&
	sbx fork many -n 20 --name m >ids && test_eq 20 "$(grep -cE "^$HEX12\$" ids)" &&
	sbx exec src sha256sum /workspace/blob >want &&
	for i in 1 7 20; do
		sbx exec "m-$i" sha256sum /workspace/blob >got && test_file_eq want got || exit 1
	done &&
	sbx ls -q >all && test "$(wc -l <all)" -ge 25 &&
	for i in $(seq 1 20); do sbx rm -f "m-$i" >/dev/null || exit 1; done
'

if [ -n "${SNAP_ON_BTRFS:-}" ]; then
	: # the round on btrfs (t0221): subvolumes, not reflinks; its own checks are at the end
elif [ "$ROOT" = 1 ] && command -v mkfs.xfs >/dev/null && [ -e /dev/loop-control ]; then
	test_expect_success '20 forks on XFS share their blocks with the snapshot (reflinks): far less than 20 copies' '
		truncate -s 320M "$TRASH/xfs.img" && mkfs.xfs -q "$TRASH/xfs.img" &&
		mkdir -p "$TRASH/xfs" && mount -o loop "$TRASH/xfs.img" "$TRASH/xfs" &&
		H=$TRASH/xfs/h &&
		SBX_HOME=$H sbx create --name x >/dev/null &&
		SBX_HOME=$H sbx exec x sh -c "head -c 16M /dev/urandom >/workspace/big" &&
		SBX_HOME=$H sbx snapshot create x --name xs >/dev/null &&
		a=$(df -k --output=used "$TRASH/xfs" | tail -n 1) &&
		SBX_HOME=$H sbx fork xs -n 20 >ids && test_eq 20 "$(wc -l <ids)" &&
		b=$(df -k --output=used "$TRASH/xfs" | tail -n 1) &&
		say "20 forks of 16 MiB took $((b - a)) KiB" &&
		test $((b - a)) -lt $((4 * 16384)) &&
		SBX_HOME=$H sbx exec x md5sum /workspace/big >want &&
		SBX_HOME=$H sbx exec "$(tail -n 1 ids)" md5sum /workspace/big >got && test_file_eq want got
	'
	test_atexit 'for d in "$TRASH"/xfs/h/sandboxes/*/; do SBX_HOME=$TRASH/xfs/h "$SBX" rm -f "$(basename "$d")"; done; umount "$TRASH/xfs"'
else
	test_skip '20 forks on XFS share their blocks with the snapshot (reflinks)' \
		'needs root, a loop device and mkfs.xfs'
fi

test_expect_success 'an image sandbox: its layer (whiteouts, opaque directories) snapshotted, forked, restored' '
	python3 "$TEST_DIR/helpers/mkimage.py" --out bb.tar --format oci-archive \
		--name localhost/snapbb:1 --preset busybox >/dev/null &&
	sbx image import bb.tar >/dev/null &&
	sbx create --image localhost/snapbb:1 --name img >/dev/null &&
	sbx exec img sh -c "rm /etc/passwd; rm -rf /etc; mkdir /etc; echo mine >/etc/own; \
mkdir -p /workspace/w && echo w >/workspace/w/f && ln /workspace/w/f /workspace/w/h && \
ln -s /etc/own /workspace/w/l && chmod 0604 /workspace/w/f" &&
	sbx exec img sh -c "ls -A /etc; ls -ln /workspace/w" >want &&
	sbx snapshot create img --name si >/dev/null &&
	sbx snapshot ls --json >j &&
	json_assert j "s = [s for s in r if s[\"name\"] == \"si\"][0]; \
assert s[\"image\"] == \"localhost/snapbb:1\" and s[\"image_id\"].startswith(\"sha256:\")" &&
	sbx fork si --name fi >/dev/null &&
	sbx exec fi sh -c "ls -A /etc; ls -ln /workspace/w" >got && test_file_eq want got &&
	sbx exec img sh -c "echo more >/etc/more; rm -rf /workspace/w" &&
	sbx snapshot restore img si >/dev/null &&
	sbx exec img sh -c "ls -A /etc; ls -ln /workspace/w" >got && test_file_eq want got
'

# where forks stack (not btrfs): a fork's files are an overlay of the snapshot's tree and an
# upper of its own; what it changes over the snapshot (deletions, a directory made anew, a file
# over a directory) comes back whole in a snapshot of it, a commit, and a copy out of it stopped
if [ -z "${SNAP_ON_BTRFS:-}" ]; then
	CHANGE='
set -e
cd /workspace
rm d/f && rm -rf d/sub && echo g-changed >d/new-g
mkdir -p d/sub && echo fresh >d/sub/new
rm -rf escdir && echo file-now >escdir
mkdir -p newdir/a && echo deep >newdir/a/b
echo home2 >>/root/snapr/r
'
	test_expect_success 'stacked: a fork of a snapshot stands on it (the snapshot'"'"'s files are not copied), its changes are its own' '
		sbx fork s1 --name st >/dev/null &&
		d=$(sb_dir st) && test -f "$d/fs/base" && test_eq "$(snap_id s1)" "$(cat "$d/fs/base")" &&
		test_eq "" "$(find "$d/fs/upper/workspace" -type f 2>/dev/null)" &&
		sbx exec st sh -c "$CHANGE" && manifest st >m.st &&
		test_grep ! "/workspace/d/f " m.st && test_grep "/workspace/newdir/a/b" m.st &&
		sbx fork s1 --name st0 >/dev/null && manifest st0 >m && test_file_eq "$TRASH/m.src" m &&
		sbx rm -f st0 >/dev/null
	'
	test_expect_success 'stacked: a snapshot of it holds what it shows (deletions, opaque directories), as a fork and a restore show' '
		sbx snapshot create st --name sts >/dev/null &&
		t=$(snap_tree sts) && test ! -e "$t/workspace/d/f" && test -f "$t/workspace/escdir" &&
		test_eq "" "$(find "$t" -type c)" &&
		sbx fork sts --name st2 >/dev/null && manifest st2 >m && test_file_eq m.st m &&
		sbx exec st sh -c "echo later >/workspace/later; rm -rf /workspace/newdir" &&
		sbx snapshot restore st sts >/dev/null && manifest st >m && test_file_eq m.st m &&
		test_eq "$(snap_id sts)" "$(cat "$(sb_dir st)/fs/base")"
	'
	test_expect_success 'stacked: a copy out of it released, and fs, read both layers' '
		sbx pause --release st >/dev/null &&
		sbx cp st:/workspace/d/new-g - | tar -xO >c && test_eq g-changed "$(cat c)" &&
		sbx cp st:/workspace/sparse - | tar -t >l && test_eq sparse "$(cat l)" &&
		sbx fs ls st /workspace/d >l && test_grep sub l &&
		sbx resume st >/dev/null && sbx exec st cat /workspace/newdir/a/b >c &&
		test_eq deep "$(cat c)"
	'
	test_expect_success 'stacked: a restore killed midway leaves the old files, whole; the next one finishes' '
		manifest st >before &&
		SBX_TEST_CRASH_AT=restore-stacked expect_code 137 sbx snapshot restore st s1 &&
		sbx resume st >/dev/null 2>&1; manifest st >after && test_file_eq before after &&
		sbx snapshot restore st s1 >/dev/null && manifest st >m && test_file_eq "$TRASH/m.src" m &&
		test ! -e "$(sb_dir st)/fs.new"
	'
	test_expect_success 'stacked: an image sandbox'"'"'s fork, changed, snapshotted, committed' '
		sbx fork si --name sti >/dev/null &&
		test -f "$(sb_dir sti)/fs/base" &&
		sbx exec sti sh -c "rm /etc/own; echo again >/etc/again; rm -rf /workspace/w/l; \
echo z >/workspace/z" &&
		sbx exec sti sh -c "ls -A /etc; ls -A /workspace; ls -A /workspace/w" >want &&
		sbx snapshot create sti --name stis >/dev/null &&
		sbx fork stis --name sti2 >/dev/null &&
		sbx exec sti2 sh -c "ls -A /etc; ls -A /workspace; ls -A /workspace/w" >got &&
		test_file_eq want got &&
		sbx commit sti localhost/stacked:1 >/dev/null &&
		sbx create --image localhost/stacked:1 --name stc >/dev/null &&
		sbx exec stc sh -c "ls -A /etc; ls -A /workspace; ls -A /workspace/w" >got &&
		test_file_eq want got &&
		test_eq "" "$(ls -A "$(sb_dir sti)" | grep commit.tmp)"
	'
	test_expect_success 'stacked: removing what stands on a snapshot lets it go' '
		expect_code 125 sbx snapshot rm sts 2>err && test_grep "stack on (st2)" err &&
		sbx rm -f st2 >/dev/null && sbx snapshot rm sts >/dev/null &&
		sbx rm -f st sti sti2 stc >/dev/null && sbx snapshot rm stis >/dev/null
	'
fi

test_expect_success 'a snapshot fits only its kind of sandbox; names are unique; errors exit 125' '
	expect_code 125 sbx snapshot restore src si 2>err && test_grep "do not fit" err &&
	expect_code 125 sbx snapshot create src --name s1 2>err && test_grep "exists" err &&
	expect_code 125 sbx snapshot create nope 2>err && test_grep "nope" err &&
	expect_code 125 sbx snapshot rm nope 2>err && test_grep "no such snapshot" err &&
	expect_code 125 sbx snapshot restore src nope 2>err && test_grep "no such snapshot" err &&
	expect_code 125 sbx fork nope 2>err && test_grep "no sandbox or snapshot" err &&
	expect_code 125 sbx snapshot create src --name "bad name" 2>err && test_grep "invalid" err &&
	expect_code 125 sbx snapshot frob 2>err && test_grep "unknown subcommand" err &&
	expect_code 125 sbx fork s1 --from s1 2>err && test_grep "from" err &&
	expect_code 125 sbx fork s1 -n 0 2>err && test_grep "invalid count" err
'

if [ "$ROOT" = 1 ]; then
	test_expect_success 'a sandbox with a disk of its own (--disk) is refused as unsupported (control: without, it works)' '
		sbx create --name dk --disk 24m >/dev/null && sbx snapshot ls -q >before &&
		expect_code 125 sbx snapshot create dk 2>err && test_grep "disk of its own" err &&
		expect_code 125 sbx fork dk 2>err && test_grep "disk of its own" err &&
		sbx snapshot ls -q >after && test_file_eq before after &&
		sbx rm -f dk >/dev/null && sbx create --name nodk >/dev/null &&
		sbx snapshot create nodk --name nodk-s >/dev/null
	'
else
	test_skip 'a sandbox with a disk of its own (--disk) is refused' '--disk needs root'
fi

test_expect_success 'a snapshot killed midway leaves nothing that passes for one; the next call sweeps it' '
	sbx snapshot ls -q >before &&
	SBX_TEST_CRASH_AT=snapshot-before-record expect_code 137 sbx snapshot create src --name k &&
	ls -A "$SBX_HOME/snapshots" >dir && test_grep "\.tmp\$" dir &&
	sbx snapshot ls -q >after && test_file_eq before after &&
	ls -A "$SBX_HOME/snapshots" >dir && test_grep ! "\.tmp" dir &&
	sbx snapshot create src --name k >/dev/null
'

test_expect_success 'a fork killed midway leaves a sandbox rm removes whole, and the snapshot free' '
	for at in create-prepared boot-cgroups; do
		SBX_TEST_CRASH_AT=$at expect_code 137 sbx fork s1 --name kf &&
		sbx rm -f kf >/dev/null && expect_code 125 sbx inspect kf 2>/dev/null || exit 1
	done &&
	sbx snapshot create src --name kfs >/dev/null &&
	SBX_TEST_CRASH_AT=create-prepared expect_code 137 sbx fork kfs --name kf &&
	sbx rm -f kf >/dev/null && sbx snapshot rm kfs >/dev/null &&
	ls "$SBX_HOME/sandboxes" >left && for id in $(cat left); do
		test -f "$SBX_HOME/sandboxes/$id/sandbox.json" || exit 1
	done
'

test_expect_success 'a snapshot killed while the sandbox is frozen does not leave it frozen' '
	SBX_TEST_CRASH_AT=snapshot-frozen expect_code 137 sbx snapshot create src &&
	test_eq running "$(sb_state src)" && sbx exec src true
'

test_expect_success 'a write that fails (a full disk, simulated) fails the snapshot whole: 125, one line, nothing kept' '
	sbx snapshot ls -q >before &&
	SBX_TEST_FAIL_AT=treecopy-write expect_code 125 sbx snapshot create src --name full 2>err &&
	test_grep "No space left on device" err && test_eq 1 "$(wc -l <err)" &&
	sbx snapshot ls -q >after && test_file_eq before after &&
	ls -A "$SBX_HOME/snapshots" >dir && test_grep ! "\.tmp" dir &&
	test_eq running "$(sb_state src)"
'

if [ "$ROOT" = 1 ]; then
	test_expect_success 'a full disk (a small tmpfs as SBX_HOME) fails the snapshot and the fork loudly, nothing half-made' '
		mkdir -p "$TRASH/small" && mount -t tmpfs -o size=24m tmpfs "$TRASH/small" &&
		H=$TRASH/small/h &&
		SBX_HOME=$H sbx create --name full >/dev/null &&
		SBX_HOME=$H sbx exec full sh -c "head -c 14M /dev/urandom >/workspace/big" &&
		SBX_HOME=$H expect_code 125 sbx snapshot create full --name s 2>err &&
		test_grep "No space left on device" err && test_eq 1 "$(wc -l <err)" &&
		SBX_HOME=$H sbx snapshot ls -q >after && test_eq "" "$(cat after)" &&
		ls -A "$H/snapshots" >dir && test_grep ! "[0-9a-f]" dir &&
		test_eq running "$(SBX_HOME=$H sb_state full)"
	'
	test_atexit 'SBX_HOME=$TRASH/small/h "$SBX" rm -f full; umount "$TRASH/small"'
else
	test_skip 'a full disk (a small tmpfs as SBX_HOME) fails the snapshot loudly' \
		'mounting a small filesystem needs root (the simulated full disk above runs here)'
fi

test_expect_success 'snapshots outlive their sandbox; rm removes them' '
	sbx rm -f src >/dev/null &&
	sbx snapshot ls src -q >q && test "$(wc -l <q)" -ge 3 &&
	sbx fork s1 --name late >/dev/null && sbx exec late cat /workspace/d/f >c &&
	test_eq hello "$(cat c)" &&
	if [ -z "${SNAP_ON_BTRFS:-}" ]; then
		# f2 and f3 stack on s2 and s3: they stay until the forks go
		expect_code 125 sbx snapshot rm s2 2>err &&
		test_grep "snapshot .s2. holds the files that sandboxes stack on (f2)" err &&
		sbx rm -f f2 f3 >/dev/null
	fi &&
	sbx snapshot rm s2 s3 >out && test_eq "s2 s3" "$(paste -sd " " out)" &&
	sbx snapshot ls --json >j &&
	json_assert j "n = [s[\"name\"] for s in r]; assert \"s1\" in n and \"s2\" not in n and \"s3\" not in n" &&
	expect_code 125 sbx snapshot rm s2
'

test_expect_success 'provider ls --json: local and e2b can snapshot, daytona cannot' '
	sbx provider ls --json >p &&
	json_assert p "c = {x[\"name\"]: x[\"capabilities\"] for x in r}; \
assert \"snapshot\" in c[\"local\"] and \"snapshot\" in c[\"e2b\"]; \
assert \"snapshot\" not in c.get(\"daytona\", [])"
'

# what only a store on btrfs does: each copy is a snapshot of a subvolume (t0221 runs this
# whole file with its SBX_HOME on btrfs)
if [ -n "${SNAP_ON_BTRFS:-}" ]; then
	# subvol PATH: the directory is the root of a btrfs subvolume (inode 256)
	subvol() { test_eq 256 "$(stat -c %i "$1")" "$1 is a subvolume"; }
	test_expect_success 'on btrfs: the files of a sandbox, a snapshot, a fork and a restore are each a subvolume' '
		sbx create --name bt >/dev/null && subvol "$(sb_dir bt)/root" &&
		sbx create --image localhost/snapbb:1 --name bti >/dev/null &&
		subvol "$(sb_dir bti)/fs/upper" &&
		sbx exec bt sh -c "echo one >/workspace/f" &&
		sbx snapshot create bt --name bts >/dev/null && subvol "$(snap_tree bts)" &&
		sbx fork bts --name btf >/dev/null && subvol "$(sb_dir btf)/root" &&
		sbx exec btf cat /workspace/f >c && test_eq one "$(cat c)" &&
		sbx exec bt sh -c "echo two >/workspace/f" &&
		sbx snapshot restore bt bts >/dev/null && subvol "$(sb_dir bt)/root" &&
		sbx exec bt cat /workspace/f >c && test_eq one "$(cat c)" &&
		ls -A "$(sb_dir bt)" >d && test_grep ! restore d &&
		t=$(snap_tree bts) &&
		size=$(find "$t" -type f -printf "%s\n" | awk "{ n += \$1 } END { print n }") &&
		n=$(find "$t" -mindepth 1 | wc -l) &&
		sbx snapshot ls --json >j &&
		json_assert j "s = [s for s in r if s[\"name\"] == \"bts\"][0]; \
assert s[\"size\"] == $size and s[\"file_count\"] == $n, s"
	'
	# excl PATH: the bytes of PATH's data no other file shares (FIEMAP's shared flag)
	excl() { btrfs filesystem du -s --raw "$1" | awk "NR == 2 { print \$2 }"; }
	test_expect_success 'on btrfs: 20 forks of 16 MiB share its blocks with the snapshot (control: a copy does not)' '
		sbx exec bt sh -c "head -c 16M /dev/urandom >/workspace/big" &&
		sbx snapshot create bt --name btbig >/dev/null &&
		sbx fork btbig -n 20 --name btm >ids && test_eq 20 "$(wc -l <ids)" &&
		sbx exec bt md5sum /workspace/big >want &&
		sbx exec btm-20 md5sum /workspace/big >got && test_file_eq want got &&
		sync -f "$SBX_HOME" &&
		for i in 1 20; do
			e=$(excl "$(sb_dir "btm-$i")/root/workspace/big") &&
			say "fork $i: $e bytes of its own" && test "$e" -lt 1048576 || exit 1
		done &&
		dd if="$(snap_tree btbig)/workspace/big" of="$SBX_HOME/copy" bs=1M status=none &&
		sync -f "$SBX_HOME" &&
		e=$(excl "$SBX_HOME/copy") && rm -f "$SBX_HOME/copy" &&
		say "a copy: $e bytes of its own" && test_eq 16777216 "$e" &&
		for i in $(seq 1 20); do sbx rm -f "btm-$i" >/dev/null || exit 1; done
	'
	test_expect_success 'on btrfs: a subvolume the sandbox made within its files is copied into the snapshot, not left empty' '
		sbx exec bt sh -c "btrfs subvolume create /workspace/inner >/dev/null && echo deep >/workspace/inner/f" &&
		sbx exec bt cat /workspace/inner/f >c && test_eq deep "$(cat c)" &&
		sbx snapshot create bt --name btn >/dev/null &&
		test_eq deep "$(cat "$(snap_tree btn)/workspace/inner/f")" &&
		sbx fork btn --name btnf >/dev/null &&
		sbx exec btnf cat /workspace/inner/f >c && test_eq deep "$(cat c)" &&
		sbx snapshot restore bt btn >/dev/null &&
		sbx exec bt cat /workspace/inner/f >c && test_eq deep "$(cat c)"
	'
	test_expect_success 'on btrfs: rm of sandboxes and snapshots leaves no subvolume behind' '
		for n in bt bti btf btnf; do sb_dir "$n" || exit 1; done >dirs &&
		for n in bts btbig btn; do snap_tree "$n" || exit 1; done >>dirs &&
		while read -r d; do test -d "$d" || exit 1; done <dirs &&
		sbx rm -f bt bti btf btnf >/dev/null &&
		sbx snapshot rm bts btbig btn >/dev/null &&
		while read -r d; do test ! -e "$d" || { say "left: $d"; exit 1; }; done <dirs
	'
	test_done
fi

# hosted: E2B's persistent snapshots are templates (the fake backs them with sbx snapshots)
if start_fake e2b; then
	# the snapshots the fake made of its sandboxes (their files may be other users')
	test_atexit 'SBX_HOME=$TRASH/fake-home "$SBX" snapshot ls -q | xargs -r env SBX_HOME="$TRASH/fake-home" "$SBX" snapshot rm'
	export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=$FAKE_URL SBX_E2B_SANDBOX_URL=$FAKE_URL
	export DAYTONA_API_KEY=dtn_test_key SBX_DAYTONA_API_URL=http://127.0.0.1:9
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN
	test_expect_success 'e2b: snapshot is E2B'"'"'s snapshot (a template); fork and create --from start from it' '
		sbx create --provider e2b --name hosted >/dev/null &&
		sbx exec hosted sh -c "echo remote >/home/user/f" &&
		sbx snapshot create hosted --name hs >/dev/null &&
		sbx snapshot ls --json >j &&
		json_assert j "s = [s for s in r if s[\"name\"] == \"hs\"][0]; \
assert s[\"provider\"] == \"e2b\" and s[\"template\"].endswith(\":default\")" &&
		sbx fork hs --name hf >/dev/null && sbx exec hf cat /home/user/f >c &&
		test_eq remote "$(cat c)" &&
		sbx create --from hs --name hc >/dev/null && sbx exec hc cat /home/user/f >c &&
		test_eq remote "$(cat c)" &&
		expect_code 125 sbx fork hs --name hx --image other 2>err && test_grep "leave out" err &&
		expect_code 125 sbx snapshot restore hosted hs 2>err &&
		test_grep "does not support restore" err
	'
	test_expect_success 'a local snapshot does not go to e2b, nor e2b'"'"'s to a local sandbox' '
		expect_code 125 sbx fork s1 --provider e2b 2>err && test_grep "provider" err &&
		expect_code 125 sbx fork hs --provider local --name hl 2>err && test_grep "provider" err
	'
else
	test_skip 'e2b: snapshot and fork through E2B' 'the E2B fake did not start'
fi

test_expect_success 'daytona: snapshot, restore and fork are refused as unsupported' '
	DAYTONA_API_KEY=dtn_test_key SBX_DAYTONA_API_URL=http://127.0.0.1:9 \
		expect_code 125 sbx create --provider daytona --from s1 2>err &&
	test_grep "does not support --from" err
'

test_done
