#!/bin/bash
# sbx commit: an image sandbox's changes (its overlay upper directory) become an image: a gzip
# OCI layer with whiteouts and opaque directories, owners, modes, symbolic and hard links kept,
# links the sandbox planted never followed; --change and -m; a running sandbox frozen meanwhile
# and unharmed; a sandbox without --image refused. sbx image save (checked by skopeo, by sbx
# image import into another store, and as root by podman load and by docker load into a
# private dockerd, whose container runs on it), image tag, import --name, and the origin image
# ls shows.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 skopeo

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
# other users than root exist inside only when sbx runs as root (else only uid 0 is mapped)
if [ "$(id -u)" -eq 0 ]; then OWNER=1000; else OWNER=0; fi
SECRET="host-secret-$$-$RANDOM"
PODROOT=$TRASH/podman

podman_cleanup() {
	[ -d "$PODROOT" ] || return 0
	/usr/bin/podman --root "$PODROOT/root" --runroot "$PODROOT/run" --storage-driver vfs \
		rmi -a -f >/dev/null 2>&1
	rm -rf "$PODROOT"
}
test_atexit podman_cleanup

# tick_moved OLD: the sandbox's ticker wrote something else than OLD since
tick_moved() { [ "$(sbx exec box cat /tmp/tick)" != "$1" ]; }

# layer_of IMAGE N: the path of layer N (python index: -1 the top) of IMAGE in the store
layer_of() {
	"$TEST_PYTHON" - "$SBX_HOME" "$1" "$2" <<-\EOF
	import json, sys
	home, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
	refs = json.load(open(home + "/images/refs.json"))
	full = name if "/" in name else "docker.io/library/" + name
	print(home + "/images/blobs/sha256/" + refs[full]["layers"][n][7:])
	EOF
}

# tar_list FILE: "NAME TYPE MODE UID GID LINK" per entry (types: f d l h c)
tar_list() {
	"$TEST_PYTHON" - "$1" <<-\EOF
	import sys, tarfile
	t = tarfile.open(sys.argv[1])
	ty = {tarfile.REGTYPE: "f", tarfile.DIRTYPE: "d", tarfile.SYMTYPE: "l",
	      tarfile.LNKTYPE: "h", tarfile.CHRTYPE: "c"}
	for m in t.getmembers():
	    print(m.name, ty.get(m.type, "?"), "%o" % m.mode, m.uid, m.gid, m.linkname or "-")
	EOF
}

test_expect_success 'set-up: a busybox image, a sandbox of it, and a host file' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	sbx image import base.tar >out && test_match "^base:1 sha256:" "$(cat out)" &&
	printf "%s\n" "$SECRET" >secret && chmod 644 secret &&
	sbx create --name box --image base:1 >/dev/null
'

test_expect_success 'commit: the sandbox changes files, links, modes and owners' '
	sbx exec box sh -c "
		mkdir -p /new/sub && echo hello >/new/sub/file && chmod 0751 /new/sub &&
		echo 0123 >/new/mode && chmod 0604 /new/mode &&
		echo owned >/new/owned && chown $OWNER:$OWNER /new/owned &&
		ln -s ../new/sub/file /new/link && ln /new/sub/file /new/hard &&
		rm /etc/passwd && rm -rf /home && echo added >/bin/added &&
		rm -rf /tmp && mkdir -m 1777 /tmp && echo fresh >/tmp/fresh &&
		ln -s $TRASH/secret /planted && ln -s / /hostroot && ln -s $TRASH /trashdir &&
		echo sandbox-data-marker >/new/marker &&
		echo zero >/new/nomode && chmod 000 /new/nomode &&
		mkdir /new/closed && echo in >/new/closed/f && chmod 000 /new/closed" &&
	sbx commit -m "my commit" box snap:1 >id &&
	test_match "^sha256:[0-9a-f]{64}$" "$(cat id)"
'

test_expect_success 'the layer: gzip, whiteouts, an opaque directory, links and owners kept' '
	layer=$(layer_of snap:1 -1) &&
	test_eq "1f8b" "$(head -c 2 "$layer" | od -An -tx1 | tr -d " \n")" &&
	tar_list "$layer" >list &&
	test_grep "^etc/.wh.passwd f " list &&
	test_grep "^.wh.home f " list &&
	test_grep "^tmp/.wh..wh..opq f " list &&
	test_grep "^tmp/fresh f " list &&
	test_grep "^new/sub d 751 0 0 -$" list &&
	test_grep "^new/mode f 604 0 0 -$" list &&
	test_grep "^new/owned f 644 $OWNER $OWNER -$" list &&
	test_grep "^new/link l 777 0 0 ../new/sub/file$" list &&
	test_grep -E "^new/(hard h .* new/sub/file|sub/file h .* new/hard)$" list &&
	test_grep "^planted l 777 0 0 $TRASH/secret$" list &&
	test_grep "^hostroot l 777 0 0 /$" list &&
	test_grep ! "^hostroot/" list && test_grep ! "^trashdir/" list &&
	test_grep ! "^run/sbx" list &&
	test_grep "^new/nomode f 0 0 0 -$" list &&
	test_grep "^new/closed d 0 0 0 -$" list && test_grep "^new/closed/f f 644 0 0 -$" list
'

test_expect_success 'a planted link is never followed: the host file is not in the layer' '
	layer=$(layer_of snap:1 -1) &&
	grep -q "$SECRET" secret &&
	gzip -dc "$layer" >layer.tar &&
	grep -q sandbox-data-marker layer.tar &&
	test_grep ! -c "$SECRET" layer.tar
'

test_expect_success 'the config: the base with a history entry and the new diff_id' '
	sbx image ls --json >ls.json &&
	json_assert ls.json "
e = [i for i in r if i[\"name\"] == \"docker.io/library/snap:1\"][0]
assert e[\"origin\"] == \"committed\", e
assert len(e[\"layers\"]) == 2, e
b = [i for i in r if i[\"name\"] == \"docker.io/library/base:1\"][0]
assert b[\"origin\"] == \"imported\", b
assert e[\"layers\"][0] == b[\"layers\"][0]
" &&
	id=$(cat id) &&
	"$TEST_PYTHON" - "$SBX_HOME/images/blobs/sha256/${id#sha256:}" "$(layer_of snap:1 -1)" <<-\EOF
	import gzip, hashlib, json, sys
	c = json.load(open(sys.argv[1]))
	d = "sha256:" + hashlib.sha256(gzip.open(sys.argv[2]).read()).hexdigest()
	assert c["rootfs"]["diff_ids"][-1] == d, (c["rootfs"], d)
	assert len(c["rootfs"]["diff_ids"]) == 2
	assert c["history"][-1]["comment"] == "my commit", c["history"]
	EOF
'

test_expect_success 'a sandbox of the new image sees every change' '
	sbx create --name again --image snap:1 >/dev/null &&
	sbx exec again sh -c "
		test ! -e /etc/passwd && test ! -e /home && cat /bin/added &&
		cat /new/link && cat /new/hard && cat /tmp/fresh &&
		stat -c %a /new/sub /new/mode && stat -c %u:%g /new/owned &&
		test -L /planted && readlink /planted && cat /new/nomode /new/closed/f &&
		stat -c %i /new/hard /new/sub/file | uniq | wc -l" >out &&
	test_eq "added
hello
hello
fresh
751
604
$OWNER:$OWNER
$TRASH/secret
zero
in
1" "$(cat out)" &&
	sbx rm -f again >/dev/null
'

test_expect_success 'commit --change: CMD, ENV, WORKDIR, ENTRYPOINT, LABEL, EXPOSE, USER' '
	sbx commit -c "CMD [\"sh\", \"-c\", \"echo cmd:\$FOO:\$(pwd)\"]" -c "ENV FOO=bar baz" \
		-c "WORKDIR /new" -c "LABEL a=b" -c "EXPOSE 8080" box snap:2 >/dev/null &&
	sbx run --image snap:2 >out && test_eq "cmd:bar baz:/new" "$(cat out)" &&
	sbx commit -c "ENTRYPOINT echo shell form" -c "USER 0" box snap:3 >/dev/null &&
	sbx run --image snap:3 >out && test_eq "shell form" "$(cat out)" &&
	id=$(sbx image ls --json | "$TEST_PYTHON" -c "import json,sys
print([i for i in json.load(sys.stdin) if i[\"name\"].endswith(\"/snap:2\")][0][\"id\"])") &&
	json_assert "$SBX_HOME/images/blobs/sha256/${id#sha256:}" "
c = r[\"config\"]
assert c[\"Labels\"] == {\"a\": \"b\"}, c
assert c[\"ExposedPorts\"] == {\"8080/tcp\": {}}, c
assert \"FOO=bar baz\" in c[\"Env\"], c
"
'

test_expect_success 'commit refuses a bad change, a bad name, a missing sandbox (125)' '
	expect_code 125 sbx commit -c "FROM x" box snap:4 2>err &&
	expect_one_error_line err "unknown instruction .FROM." &&
	expect_code 125 sbx commit -c "CMD [1" box snap:4 2>err &&
	expect_one_error_line err "not a JSON array" &&
	expect_code 125 sbx commit box "Bad Name" 2>err &&
	expect_code 125 sbx commit nosuch snap:4 2>err &&
	expect_one_error_line err "nosuch" &&
	expect_code 125 sbx commit box 2>err &&
	test_grep "give SB and IMAGE" err
'

test_expect_success 'a sandbox without --image cannot be committed (unsupported, 125)' '
	sbx create --name plain >/dev/null &&
	expect_code 125 sbx commit plain plain:1 2>err &&
	expect_one_error_line err "without --image: its root is the host.s and cannot be committed" &&
	sbx image ls --json >ls && test_grep ! "plain:1" ls &&
	sbx rm -f plain >/dev/null
'

if [ "$(id -u)" -eq 0 ]; then
test_expect_success 'a sandbox with --disk: refused while it runs, committed once released' '
	sbx create --name dk --disk 24m --image base:1 >/dev/null &&
	sbx exec dk sh -c "echo on-disk >/disk-file && rm /etc/passwd" &&
	expect_code 125 sbx commit dk dk:1 2>err &&
	expect_one_error_line err "disk of its own .--disk.*release it first" &&
	sbx pause --release dk >/dev/null &&
	sbx commit dk dk:1 >/dev/null &&
	sbx run --image dk:1 -- sh -c "cat /disk-file; test ! -e /etc/passwd && echo gone" >out &&
	test_eq "on-disk
gone" "$(cat out)" &&
	test_eq released "$(sb_state dk)" &&
	sbx rm -f dk >/dev/null
'
else
	test_skip 'a sandbox with --disk: committed once released' 'only root may mount a --disk'
fi

test_expect_success 'a running sandbox is frozen for the commit and runs on after it' '
	sbx exec -d box sh -c "while :; do date +%s%N >/tmp/tick; sleep 0.05; done" >/dev/null &&
	sbx commit box snap:run >/dev/null &&
	test_eq running "$(sb_state box)" &&
	a=$(sbx exec --timeout 10s box cat /tmp/tick) &&
	wait_until 10 tick_moved "$a" &&
	SBX_TEST_FAIL_AT=commit-read expect_code 125 sbx commit box snap:fail 2>err &&
	expect_one_error_line err "cannot commit sandbox .box.: cannot write the layer" &&
	test_eq running "$(sb_state box)" && sbx exec --timeout 10s box true &&
	SBX_TEST_CRASH_AT=commit-frozen expect_code 137 sbx commit box snap:crash &&
	test_eq paused "$(sb_state box)" && sbx resume box >/dev/null &&
	b=$(sbx exec --timeout 10s box cat /tmp/tick) && wait_until 10 tick_moved "$b" &&
	sbx image ls >ls && test_grep ! -e "snap  *fail" -e "snap  *crash" ls &&
	sbx pause box >/dev/null && sbx commit box snap:paused >/dev/null &&
	test_eq paused "$(sb_state box)" && sbx resume box >/dev/null &&
	test_eq running "$(sb_state box)"
'

test_expect_success 'a hosted provider is told an image committed here is not on a registry' '
	for p in e2b daytona; do
		expect_code 125 sbx create --provider "$p" --image snap:1 2>err &&
		expect_one_error_line err "image .snap:1. was committed here and is only in sbx.s local store; provider .$p. cannot reach it: push it to a registry" ||
			exit 1
	done &&
	sbx ls -q >ids && test_eq 1 "$(wc -l <ids)" &&
	expect_code 125 env E2B_API_KEY=k SBX_E2B_API_URL=http://127.0.0.1:9 \
		"$SBX" create --provider e2b --image base:1 2>err &&
	test_grep ! "local store" err
'

test_expect_success 'image tag: another name, the same id; ls shows the origin' '
	sbx image tag snap:1 other/name:v2 &&
	sbx image ls >ls &&
	test_grep -E "^other/name +v2 +[0-9a-f]{12} .* committed$" ls &&
	test_grep -E "^base +1 .* imported$" ls &&
	expect_code 125 sbx image tag nosuch:1 x:1 2>err && expect_one_error_line err "no image"
'

test_expect_success 'image save: skopeo reads it, sbx image import loads it elsewhere' '
	sbx image save -o saved.tar snap:1 base:1 &&
	tar tf saved.tar >members &&
	test_grep "^manifest.json$" members && test_grep "^index.json$" members &&
	test_grep "^oci-layout$" members &&
	skopeo inspect docker-archive:saved.tar:snap:1 >sk.json &&
	json_assert sk.json "assert len(r[\"Layers\"]) == 2, r" &&
	skopeo inspect --config docker-archive:saved.tar:snap:1 >skc.json &&
	json_assert skc.json "assert r[\"history\"][-1][\"comment\"] == \"my commit\"" &&
	SBX_HOME=$TRASH/other sbx image import saved.tar >imp &&
	test_grep "^snap:1 $(cat id)$" imp && test_grep "^base:1 sha256:" imp &&
	SBX_HOME=$TRASH/other sbx run --image snap:1 -- cat /new/sub/file >out &&
	test_eq hello "$(cat out)" &&
	sbx image save snap:1 >stdout.tar && tar tf stdout.tar >members &&
	test_grep "^manifest.json$" members &&
	expect_code 125 sbx image save nosuch:1 -o x.tar 2>err && test ! -e x.tar &&
	ls | test_grep ! "sbx-save" &&
	{ SHELL=/bin/sh script -qec "$SBX image save snap:1" /dev/null >tty.out 2>&1 </dev/null || :; } &&
	test_grep "refusing to write a tar to a terminal" tty.out &&
	test_grep ! "manifest.json" tty.out
'

test_expect_success 'import --name names an image the archive leaves unnamed; tag names it later' '
	"${MKIMAGE[@]}" --out unnamed.tar --format oci-archive --no-ref-name \
		--preset busybox >/dev/null &&
	SBX_HOME=$TRASH/h3 sbx image import unnamed.tar >imp &&
	test_match "^sha256:[0-9a-f]{64}$" "$(cat imp)" &&
	SBX_HOME=$TRASH/h3 sbx image ls >ls && test_grep -E "^<none> +<none> " ls &&
	test_grep ! "untagged" ls &&
	SBX_HOME=$TRASH/h3 sbx image tag "$(cat imp)" mine:1 &&
	SBX_HOME=$TRASH/h3 sbx image ls >ls && test_grep -E "^mine +1 " ls &&
	test_grep ! "<none>" ls &&
	SBX_HOME=$TRASH/h4 sbx image import --name given:7 unnamed.tar >imp &&
	test_match "^given:7 sha256:" "$(cat imp)" &&
	SBX_HOME=$TRASH/h4 sbx image ls >ls && test_grep -E "^given +7 .* imported$" ls &&
	"${MKIMAGE[@]}" --out bare.tar --format oci-archive --tag 3.1 --preset busybox >/dev/null &&
	SBX_HOME=$TRASH/h5 sbx image import --name reg.example/team/app bare.tar >imp &&
	test_match "^reg.example/team/app:3.1 sha256:" "$(cat imp)" &&
	SBX_HOME=$TRASH/h5 sbx image import bare.tar >imp &&
	test_match "^sha256:[0-9a-f]{64}$" "$(cat imp)"
'

PODMAN_TEST='
	P=(/usr/bin/podman --root "$PODROOT/root" --runroot "$PODROOT/run" --storage-driver vfs)
	mkdir -p "$PODROOT" &&
	"${P[@]}" load -i saved.tar >pl 2>&1 &&
	test_grep "snap:1" pl &&
	"${P[@]}" image inspect --format "{{.Config.Env}}" snap:1 >env &&
	test_grep PATH= env &&
	c=$("${P[@]}" create --network none snap:1 true) &&
	"${P[@]}" export "$c" >exp.tar && "${P[@]}" rm -f "$c" >/dev/null &&
	tar tvf exp.tar >exp &&
	test_grep -E " new/(hard link to new/sub/file|sub/file link to new/hard)$" exp &&
	test_grep ! " etc/passwd$" exp && test_grep " tmp/fresh$" exp
'
# podman runs no container here (crun refuses the host's hybrid cgroups): load, inspect,
# create and export show what it made of the archive
if [ "$(id -u)" -ne 0 ]; then
	test_skip 'podman load reads image save' \
		"as root only: rootless podman needs subordinate ids this uid lacks"
elif [ ! -x /usr/bin/podman ]; then
	test_skip 'podman load reads image save' "podman missing (scripts/install-deps nested)"
else
	test_expect_success 'podman load reads image save' "$PODMAN_TEST"
fi

# a private Docker Engine (tests/helpers/dockerd.sh): docker load, and a container of the image
# that shows the committed files (the hard link, the deletion)
. "$TEST_DIR/helpers/dockerd.sh"
if dockerd_start "$TRASH/dockerd"; then
	test_expect_success 'docker load reads image save; a container of it runs on the committed files' '
		dkr load -i saved.tar >dl 2>&1 && test_grep "snap:1" dl &&
		dkr image inspect --format "{{.Config.Env}}" snap:1 >env && test_grep PATH= env &&
		dkr run --rm --network none snap:1 cat /new/sub/file >out && test_eq hello "$(cat out)" &&
		dkr run --rm --network none snap:1 sh -c "test ! -e /etc/passwd && \
test \$(stat -c %i /new/hard) = \$(stat -c %i /new/sub/file) && echo ok" >out &&
		test_eq ok "$(cat out)"
	'
else
	test_skip 'docker load reads image save' "$DOCKERD_WHY"
fi

test_done
