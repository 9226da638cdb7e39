#!/bin/bash
# OCI images: sbx image pull (anonymous, basic auth, the bearer flow, digests, platforms,
# parallel pulls), import (docker save, OCI layouts, --rootfs), ls, rm, prune; sandboxes made
# from images (create --image, run --image: Env, WorkingDir, User, Entrypoint and Cmd,
# whiteouts, a writable root that stays in its sandbox, shared layers, the sandbox verbs);
# and hostile input: layers that escape, manifests that are not JSON, too large or too deep,
# blobs that do not match their digest, a registry that fails, stalls or redirects.
# The registries are the file's own, on 127.0.0.1 (tests/helpers/registry.sh): Debian's
# docker-registry, plain, with basic auth and with token auth (tests/helpers/tokensrv.py),
# and tests/helpers/authproxy.py in front of the plain one for the proxy's own bearer flow and
# for faults (/v2/f/FAULT/REPO/...). Images come from tests/helpers/mkimage.py.
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl openssl docker-registry skopeo

HELPERS=$TEST_DIR/helpers
# shellcheck source=tests/helpers/registry.sh
. "$HELPERS/registry.sh"
MKIMAGE=("$TEST_PYTHON" "$HELPERS/mkimage.py")
IMG=$SBX_HOME/images
HEX12='[0-9a-f]{12}'
# the image's User applies when sbx runs as root only (as another uid, only uid 0 exists inside)
if [ "$(id -u)" -eq 0 ]; then IMAGE_UID=1000; else IMAGE_UID=0; fi

# --- helpers ----------------------------------------------------------------------------------
# in_home DIR ARGS...: sbx with SBX_HOME=DIR (a store of the test's own)
in_home() {
	local h=$1
	shift
	SBX_HOME=$h "$SBX" "$@"
}

# same WANT CMD...: CMD prints WANT (else says what it printed)
same() {
	local want=$1 got
	shift
	got=$("$@" 2>&1)
	[ "$got" = "$want" ] && return 0
	say "'$*' printed '$got', not '$want'" >&2
	return 1
}

# jget FILE PATH: the value at PATH (keys and list indexes joined by '.') of the JSON in FILE
# ('-': stdin); strings raw, anything else as JSON
jget() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(sys.stdin if sys.argv[1] == "-" else open(sys.argv[1]))
for k in [k for k in sys.argv[2].split(".") if k]:
    r = r[int(k)] if isinstance(r, list) else r[k]
print(r if isinstance(r, str) else json.dumps(r, sort_keys=True))' "$1" "$2"
}

# info IMAGE PATH: what mkimage.py said of IMAGE (id, manifest, layers.0, platforms.linux/amd64.id)
info() { jget "$TRASH/info/$1.json" "$2"; }

# ref_get HOME NAME FIELD: FIELD of NAME in HOME's refs.json
ref_get() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1] + "/images/refs.json"))[sys.argv[2]][sys.argv[3]]
print(r if isinstance(r, str) else json.dumps(r))' "$1" "$2" "$3"
}

# store_check HOME [--tmp-ok]: the store is whole: every blob hashes to its name, every name's
# blobs and unpacked layers are there, nothing but digests in blobs/ and layers/, nothing in
# tmp/ (unless --tmp-ok: what a killed pull leaves there is prune's)
store_check() {
	"$TEST_PYTHON" - "$1/images" "${2:-}" <<-\EOF
	import hashlib, json, os, re, sys
	h, tmp_ok, bad = sys.argv[1], sys.argv[2] == "--tmp-ok", []
	blobs, layers, tmp = h + "/blobs/sha256", h + "/layers", h + "/tmp"
	hexre = re.compile(r"^[0-9a-f]{64}$")
	for n in sorted(os.listdir(blobs)) if os.path.isdir(blobs) else []:
	    if not hexre.match(n):
	        bad.append("blobs/sha256/%s: not a digest" % n)
	        continue
	    s = hashlib.sha256()
	    with open(os.path.join(blobs, n), "rb") as f:
	        for chunk in iter(lambda: f.read(1 << 20), b""):
	            s.update(chunk)
	    if s.hexdigest() != n:
	        bad.append("blobs/sha256/%s hashes to %s" % (n, s.hexdigest()))
	for n in sorted(os.listdir(layers)) if os.path.isdir(layers) else []:
	    if not hexre.match(n) or not os.path.isdir(os.path.join(layers, n)):
	        bad.append("layers/%s: not an unpacked layer" % n)
	refs = {}
	if os.path.exists(h + "/refs.json"):
	    refs = json.load(open(h + "/refs.json"))
	for name, r in refs.items():
	    for d in [r["manifest"], r["config"]] + r["layers"]:
	        if not os.path.isfile(os.path.join(blobs, d[7:])):
	            bad.append("%s: blob %s missing" % (name, d))
	    if len(r.get("chain", [])) != len(r["layers"]):
	        bad.append("%s: chain %s does not match layers" % (name, r.get("chain")))
	    for d in r.get("chain", []):
	        if not os.path.isdir(os.path.join(layers, d[7:])):
	            bad.append("%s: layer %s not unpacked" % (name, d))
	left = os.listdir(tmp) if os.path.isdir(tmp) else []
	if left and not tmp_ok:
	    bad.append("tmp/ holds %s" % left)
	if os.path.isdir(h) and os.stat(h).st_mode & 0o777 != 0o700:
	    bad.append("images/ is mode %o" % (os.stat(h).st_mode & 0o777))
	for b in bad:
	    print("store_check: " + b, file=sys.stderr)
	sys.exit(1 if bad else 0)
	EOF
}

# store_snapshot HOME FILE: the store's names and ids (image ls --json) and its layers
store_snapshot() {
	{
		SBX_HOME=$1 "$SBX" image ls --json | "$TEST_PYTHON" -c 'import json, sys
for i in sorted(json.load(sys.stdin), key=lambda i: i["name"]):
    print(i["name"], i["id"])' &&
			ls "$1/images/layers" 2>/dev/null
	} >"$2"
}

# refused_pull HOME REF PATTERN [ENV=VALUE...]: pulling REF into HOME exits 125 with one
# error line matching PATTERN, prints nothing on stdout, and leaves the store as it was
refused_pull() {
	local h=$1 ref=$2 pat=$3
	shift 3
	store_snapshot "$h" snap.before || return 1
	expect_code 125 env "$@" SBX_HOME="$h" "$SBX" image pull "$ref" >pull.out 2>pull.err ||
		{ cat pull.err; return 1; }
	# the pattern must match what sbx says, not the reference it repeats
	sed -E "s/cannot pull '[^']*'/cannot pull REF/" pull.err >pull.msg
	expect_one_error_line pull.msg "^sbx: error: .*$pat" || return 1
	test ! -s pull.out || { echo "stdout:"; cat pull.out; return 1; }
	store_snapshot "$h" snap.after || return 1
	cmp -s snap.before snap.after || { diff snap.before snap.after; return 1; }
	store_check "$h"
}

# fresh_home NAME: an empty store of the test's own, with the busybox image pulled into it
fresh_home() {
	local h=$TRASH/h-$1
	rm -rf "$h" && mkdir -p "$h" && in_home "$h" image pull -q "$REG/test/busybox" >/dev/null &&
		echo "$h"
}

# host_untouched: nothing a hostile layer names exists on the host, or in the trash outside
# the store's images (where a naive unpack of ../escape would land)
host_untouched() {
	local n found
	for n in /escape /abs /tmp/escape /tmp/evil-abs /tmp/evil-rel /tmp/x/evil \
		"$TRASH/x/evil" "$TRASH/escape" "$IMG/escape" "$IMG/tmp/escape" "$IMG/layers/escape"; do
		if test -e "$n" || test -L "$n"; then
			echo "leaked: $n"
			return 1
		fi
	done
	found=$(find "$TRASH" -path "$TRASH/registry-*" -prune -o \( -name escape -o -name evil-abs \
		-o -name evil-rel -o -name evil -o -name evil-null \) -print 2>/dev/null)
	test_eq "" "$found" || { echo "leaked: $found"; return 1; }
}

# alt_homes_cleanup: removes the sandboxes of the test's own stores (the main one is lib.sh's)
alt_homes_cleanup() {
	local h d
	for h in "$TRASH"/h-*; do
		[ -d "$h/sandboxes" ] || continue
		for d in "$h"/sandboxes/*/; do
			[ -d "$d" ] && SBX_HOME=$h "$SBX" rm -f "$(basename "$d")" >/dev/null 2>&1
		done
	done
}

# --- set-up: images, registries, proxies (at the top level: they live as long as the file) --
setup() {
	local p arg
	mkdir -p info x oci && chmod 777 x || return 1
	for p in busybox app multiarch big quirks crosslink many escape abs symlink symlink-rel \
		hardlink hardlink-abs device setuid bigowner; do
		arg=
		case $p in
		symlink) arg=$TRASH/x ;;
		big) arg=$((8 << 20)) ;;
		esac
		"${MKIMAGE[@]}" --out oci --tag "$p" --preset "$p" ${arg:+--arg "$arg"} \
			>"info/$p.json" || { echo "mkimage $p failed"; return 1; }
	done
	registry_start plain || return 1
	REG=127.0.0.1:$REG_PORT REG_PLAIN_PORT=$REG_PORT REGLOG=$REG_LOG
	for p in busybox app multiarch big quirks crosslink many; do
		registry_push oci "$p" "$REG/test/$p:latest" || { echo "push $p failed"; return 1; }
	done
	# Docker's media types: a schema 2 manifest, a manifest list (skopeo converts)
	for p in busybox multiarch; do
		registry_push oci "$p" "$REG/docker/$p:latest" --format v2s2 || return 1
	done
	registry_push oci busybox "$REG/test/moving:latest" || return 1
	# a layer small as a blob (compressed) and 8 MiB unpacked: for a full disk
	{
		printf '%s' '{"layers": [{"compression": "gzip", "entries": [{"type": "busybox"},
			{"type": "file", "path": "zeros", "size": 8388608}]}]}' >bomb.json &&
			"${MKIMAGE[@]}" --out oci --tag bomb --spec bomb.json >info/bomb.json &&
			"${MKIMAGE[@]}" --out bomb.tar --format docker-archive --name bomb:1 \
				--spec bomb.json >/dev/null
	} || { echo "mkimage bomb failed"; return 1; }
	registry_push oci bomb "$REG/test/bomb:latest" || return 1
	for p in escape abs symlink symlink-rel hardlink hardlink-abs device setuid bigowner; do
		registry_push oci "$p" "$REG/hostile/$p:latest" || { echo "push $p failed"; return 1; }
	done
	registry_start basic --htpasswd alice:s3cret || return 1
	BASIC=127.0.0.1:$REG_PORT BASICLOG=$REG_LOG
	registry_push oci busybox "$BASIC/test/busybox:latest" --dest-creds alice:s3cret || return 1
	registry_start tok --token bob:t0ken || return 1
	TOKREG=127.0.0.1:$REG_PORT TOKLOG=$TOK_LOG
	registry_push oci app "$TOKREG/test/app:latest" --dest-creds bob:t0ken || return 1
	authproxy_start anon "$REG_PLAIN_PORT" --auth bearer || return 1
	ANON=127.0.0.1:$PROXY_PORT ANONLOG=$PROXY_LOG
	authproxy_start fault "$REG_PLAIN_PORT" --stall 20 --file-dir "$TRASH/fileblobs" || return 1
	FAULT=127.0.0.1:$PROXY_PORT FAULTLOG=$PROXY_LOG
}

SETUP_OK=
if [ -z "$TEST_SKIP_ALL" ]; then
	test_atexit alt_homes_cleanup
	if setup >setup.log 2>&1; then
		SETUP_OK=1
		BB_ID=$(info busybox id) BB_MAN=$(info busybox manifest) BB_LAYER=$(info busybox layers.0)
		APP_ID=$(info app id) APP_MAN=$(info app manifest)
		AMD_ID=$(info multiarch platforms.linux/amd64.id)
		ARM_ID=$(info multiarch platforms.linux/arm64/v8.id)
		BIG_ID=$(info big id)
		say "# registries: plain $REG, basic $BASIC, token $TOKREG, bearer proxy $ANON," \
			"faults $FAULT"
	fi
fi

test_expect_success 'set-up: images built, registries up, images pushed' '
	test_ne "" "$SETUP_OK" || { cat setup.log; exit 1; }
	curl -sS --max-time 5 -o /dev/null -w "%{http_code}\n" "http://$REG/v2/" | test_grep -x 200 &&
	curl -sS --max-time 5 -H "Accept: application/vnd.oci.image.manifest.v1+json" \
		"http://$REG/v2/test/busybox/manifests/latest" >m &&
	test_eq "$BB_MAN" "sha256:$(sha256sum <m | cut -c1-64)" &&
	curl -sS --max-time 5 -o /dev/null -w "%{http_code}\n" "http://$BASIC/v2/" | test_grep -x 401 &&
	curl -sS --max-time 5 -o /dev/null -w "%{http_code}\n" "http://$TOKREG/v2/" | test_grep -x 401 &&
	curl -sS --max-time 5 -o /dev/null -w "%{http_code}\n" "http://$ANON/v2/" | test_grep -x 401
'
[ -n "$SETUP_OK" ] || TEST_SKIP_ALL="the set-up failed"

# --- pull ---------------------------------------------------------------------------------
test_expect_success 'pull: prints the id alone, nothing on a non-terminal stderr; the store laid out' '
	sbx image pull "$REG/test/busybox:latest" >out 2>err &&
	test_eq "$BB_ID" "$(cat out)" && test ! -s err &&
	test_eq 700 "$(stat -c %a "$IMG")" &&
	test -f "$IMG/blobs/sha256/${BB_MAN#sha256:}" &&
	test -f "$IMG/blobs/sha256/${BB_ID#sha256:}" &&
	test -f "$IMG/blobs/sha256/${BB_LAYER#sha256:}" &&
	test -d "$IMG/layers/${BB_LAYER#sha256:}" &&
	cmp "$IMG/layers/${BB_LAYER#sha256:}/bin/busybox" /bin/busybox &&
	test -L "$IMG/layers/${BB_LAYER#sha256:}/bin/sh" &&
	test_eq "$BB_MAN" "$(ref_get "$SBX_HOME" "$REG/test/busybox:latest" manifest)" &&
	test_eq "$BB_ID" "$(ref_get "$SBX_HOME" "$REG/test/busybox:latest" config)" &&
	test_eq "[\"$BB_LAYER\"]" "$(ref_get "$SBX_HOME" "$REG/test/busybox:latest" layers)" &&
	store_check "$SBX_HOME" &&
	: "the layer'"'"'s owners: moved up by 100000 as root, the caller'"'"'s otherwise" &&
	own=$(stat -c %u "$IMG/layers/${BB_LAYER#sha256:}/bin/busybox") &&
	if [ "$(id -u)" -eq 0 ]; then test "$own" = 100000; else test "$own" = "$(id -u)"; fi
'

test_expect_success 'pull again: no blob fetched again, the layer not unpacked again; -q; no tag = latest' '
	gets=$(registry_blob_gets "$REGLOG") && test "$gets" -gt 0 &&
	before=$(stat -c "%i %Y" "$IMG/layers/${BB_LAYER#sha256:}") &&
	sbx image pull -q "$REG/test/busybox" >out 2>err &&
	test_eq "$BB_ID" "$(cat out)" && test ! -s err &&
	test_eq "$gets" "$(registry_blob_gets "$REGLOG")" &&
	test_eq "$before" "$(stat -c "%i %Y" "$IMG/layers/${BB_LAYER#sha256:}")" &&
	test_eq 1 "$(ls "$IMG/layers" | wc -l)"
'

test_expect_success 'pull by digest: the same id, the name has tag <none>' '
	sbx image pull "$REG/test/busybox@$BB_MAN" >out &&
	test_eq "$BB_ID" "$(cat out)" &&
	sbx image ls >ls && test_grep -E "^$REG/test/busybox +<none> +${BB_ID:7:12} " ls &&
	expect_code 125 sbx image pull "$REG/test/busybox@sha256:$(printf %064d 0)" 2>err &&
	expect_one_error_line err "^sbx: error: "
'

test_expect_success 'pull: Docker'"'"'s media types (schema 2, a manifest list); localhost:PORT' '
	sbx image pull "$REG/docker/busybox" >out && test_eq "$BB_ID" "$(cat out)" &&
	sbx image pull "$REG/docker/multiarch" >out && test_eq "$AMD_ID" "$(cat out)" &&
	sbx image pull --platform linux/arm64 "$REG/docker/multiarch" >out &&
	test_eq "$ARM_ID" "$(cat out)" &&
	sbx image pull "localhost:$REG_PLAIN_PORT/test/busybox" >out && test_eq "$BB_ID" "$(cat out)" &&
	sbx image ls >ls && test_grep -E "^localhost:$REG_PLAIN_PORT/test/busybox +latest +${BB_ID:7:12} " ls &&
	test_eq ID=sbx-test-busybox "$(sbx run --image "$REG/docker/busybox" -- cat /etc/os-release)" &&
	store_check "$SBX_HOME"
'

test_expect_success 'pull: basic auth from $DOCKER_CONFIG/config.json, then ~/.docker/config.json' '
	refused_pull "$SBX_HOME" "$BASIC/test/busybox" "(auth|credential|401|login|denied)" &&
	mkdir -p dcfg && printf "{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}\n" "$BASIC" \
		"$(printf alice:wrong | base64)" >dcfg/config.json &&
	refused_pull "$SBX_HOME" "$BASIC/test/busybox" "(auth|credential|401|login|denied)" \
		DOCKER_CONFIG="$TRASH/dcfg" &&
	printf "{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}\n" "$BASIC" \
		"$(printf alice:s3cret | base64)" >dcfg/config.json &&
	DOCKER_CONFIG=$TRASH/dcfg sbx image pull "$BASIC/test/busybox" >out &&
	test_eq "$BB_ID" "$(cat out)" &&
	sbx image rm "$BASIC/test/busybox" >/dev/null &&
	mkdir -p "$HOME/.docker" && cp dcfg/config.json "$HOME/.docker/config.json" &&
	sbx image pull "$BASIC/test/busybox" >out && test_eq "$BB_ID" "$(cat out)" &&
	rm -f "$HOME/.docker/config.json" &&
	test_grep "\"GET /v2/test/busybox/manifests/latest HTTP/1.1\" 200" "$BASICLOG"
'

test_expect_success 'pull: the bearer flow of docker-registry (token server, credentials from config.json)' '
	h=$(fresh_home tok) &&
	refused_pull "$h" "$TOKREG/test/app" "(auth|credential|401|login|denied|token)" &&
	test_grep "^token 401 repository:test/app:pull" "$TOKLOG" &&
	mkdir -p tcfg && printf "{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}\n" "$TOKREG" \
		"$(printf bob:t0ken | base64)" >tcfg/config.json &&
	DOCKER_CONFIG=$TRASH/tcfg in_home "$h" image pull "$TOKREG/test/app" >out &&
	test_eq "$APP_ID" "$(cat out)" &&
	test_grep "^token bob repository:test/app:pull " "$TOKLOG" &&
	store_check "$h"
'

test_expect_success 'pull: an anonymous bearer flow (the proxy'"'"'s realm and scope)' '
	h=$(fresh_home anon) &&
	in_home "$h" image pull "$ANON/test/app" >out &&
	test_eq "$APP_ID" "$(cat out)" &&
	test_grep "^proxy GET /v2/test/app/manifests/latest 401 auth=-" "$ANONLOG" &&
	test_grep "^proxy GET /token 200 auth=- scope=test/app service=test" "$ANONLOG" &&
	test_grep "^proxy GET /v2/test/app/manifests/latest 200 auth=bearer" "$ANONLOG" &&
	test_grep -E "^proxy GET /v2/test/app/blobs/sha256:[0-9a-f]{64} 200 auth=bearer" "$ANONLOG" &&
	store_check "$h"
'

test_expect_success 'pull: an index resolves to linux/amd64, --platform picks another, never the attestation' '
	sbx image pull "$REG/test/multiarch" >out && test_eq "$AMD_ID" "$(cat out)" &&
	sbx image pull --platform linux/arm64 "$REG/test/multiarch" >out &&
	test_eq "$ARM_ID" "$(cat out)" &&
	sbx image ls --json >j &&
	"$TEST_PYTHON" -c "import json, sys
r = [i for i in json.load(open(\"j\")) if i[\"name\"] == sys.argv[1]]
assert len(r) == 1 and r[0][\"id\"] == sys.argv[2], r" "$REG/test/multiarch:latest" "$ARM_ID" &&
	sbx image pull --platform linux/arm64/v8 "$REG/test/multiarch" >out &&
	test_eq "$ARM_ID" "$(cat out)" &&
	sbx image pull --platform linux/amd64 "$REG/test/multiarch" >out &&
	test_eq "$AMD_ID" "$(cat out)" &&
	sbx image pull "$REG/test/multiarch@$(info multiarch index)" >out &&
	test_eq "$AMD_ID" "$(cat out)" &&
	test_eq linux/amd64 "$(sbx run --image "$REG/test/multiarch" -- cat /etc/sbx-arch)"
'

test_expect_success 'pull --platform for a platform the index lacks, or no platform at all: 125' '
	store_snapshot "$SBX_HOME" before &&
	expect_code 125 sbx image pull --platform linux/s390x "$REG/test/multiarch" >out 2>err &&
	expect_one_error_line err "^sbx: error: .*(platform|s390x)" && test ! -s out &&
	expect_code 125 sbx image pull --platform bogus "$REG/test/multiarch" 2>err &&
	expect_one_error_line err "^sbx: error: " &&
	store_snapshot "$SBX_HOME" after && cmp before after && store_check "$SBX_HOME"
'

test_expect_success 'parallel pulls of one image (and of two sharing a layer): all succeed, store whole' '
	: "through the proxy'"'"'s slow blobs (3 MiB/s), so that the pulls overlap" &&
	h=$TRASH/h-par && mkdir -p "$h" &&
	pids= && for i in 1 2 3; do
		in_home "$h" image pull "$FAULT/f/slow/test/big" >par$i.out 2>par$i.err &
		pids="$pids $!"
	done &&
	rc=0 && for p in $pids; do wait "$p" || rc=1; done &&
	cat par*.err && test_eq 0 "$rc" &&
	for i in 1 2 3; do test_eq "$BIG_ID" "$(cat par$i.out)" || exit 1; done &&
	test "$(grep -c "^proxy GET /v2/f/slow/test/big/blobs/" "$FAULTLOG")" -ge 2 &&
	store_check "$h" && test_eq 2 "$(ls "$h/images/layers" | wc -l)" &&
	h2=$TRASH/h-par2 && mkdir -p "$h2" || exit 1
	in_home "$h2" image pull "$FAULT/f/slow/test/busybox" >pb.out 2>pb.err & p1=$!
	in_home "$h2" image pull "$FAULT/f/slow/test/app" >pa.out 2>pa.err & p2=$!
	wait $p1 && wait $p2 && test_eq "$BB_ID" "$(cat pb.out)" && test_eq "$APP_ID" "$(cat pa.out)" &&
	store_check "$h2" && test_eq 4 "$(ls "$h2/images/layers" | wc -l)" &&
	in_home "$h2" image ls -q | sort >ids && test_eq 2 "$(wc -l <ids)"
'

test_expect_success 'parallel create --image of an image not in the store: both pull it and work' '
	h=$TRASH/h-pcreate && mkdir -p "$h" || exit 1
	in_home "$h" create --image "$REG/test/app" >c1 2>e1 & p1=$!
	in_home "$h" create --image "$REG/test/app" >c2 2>e2 & p2=$!
	wait $p1 && wait $p2 || { cat e1 e2; exit 1; }
	test "$(in_home "$h" exec "$(cat c1)" cat /etc/zstd-layer /srv/app/data)" = "zstd
layer4" &&
	test_eq ID=sbx-test-busybox "$(in_home "$h" exec "$(cat c2)" cat /etc/os-release)" &&
	store_check "$h"
'

test_expect_success 'an image of 50 layers: all of them stacked (no overlay option-length limit)' '
	sbx image pull "$REG/test/many" >out && test_eq "$(info many id)" "$(cat out)" &&
	sbx run --image "$REG/test/many" -- sh -c "ls /layers | wc -l; cat /layers/001 /layers/049" >got &&
	printf "49\n1\n49\n" >want && cmp want got
'

test_expect_success 'a pull killed (SIGKILL) mid-blob: no name, nothing partial outside tmp/, the next pull works' '
	h=$(fresh_home killed) && store_snapshot "$h" before || exit 1
	SBX_HOME=$h "$SBX" image pull "$FAULT/f/slow/test/big" >/dev/null 2>&1 &
	p=$!
	wait_until 10 sh -c "ls -A \"$h/images/tmp\" | grep -q ." || exit 1
	kids=$(pgrep -P "$p")
	kill -9 "$p"
	wait "$p"
	for k in $kids; do wait_until 5 sh -c "! kill -0 $k" || { echo "child $k outlived its pull"; exit 1; }; done
	store_snapshot "$h" after && cmp before after && store_check "$h" --tmp-ok &&
	timeout 30 env SBX_HOME="$h" "$SBX" image pull "$REG/test/big" >out && test_eq "$BIG_ID" "$(cat out)" &&
	store_check "$h" --tmp-ok &&
	test_eq "8388608 /big" "$(in_home "$h" run --image "$REG/test/big" -- wc -c /big)"
'

test_expect_success 'image prune while a pull runs: the pull'"'"'s blobs and layers survive it' '
	h=$(fresh_home prunerace) || exit 1
	SBX_HOME=$h "$SBX" image pull "$FAULT/f/slow/test/big" >out 2>err &
	p=$!
	i=0
	while pid_alive "$p" && [ "$i" -lt 100 ]; do
		in_home "$h" image prune >>prunes 2>&1
		sleep 0.05
		i=$((i + 1))
	done
	wait "$p" || { cat err; exit 1; }
	echo "$i prunes ran during the pull" && test "$i" -ge 2 &&
	test_eq "$BIG_ID" "$(cat out)" && store_check "$h" &&
	test_eq "8388608 /big" "$(in_home "$h" run --image "$FAULT/f/slow/test/big" -- wc -c /big)"
'

# --- ls -----------------------------------------------------------------------------------
test_expect_success 'image ls: the table, -q (12 digits a name), --json' '
	mkdir -p empty && in_home "$TRASH/empty" image ls --json >j && jget j "" | test_grep -x "\[\]" &&
	test_eq "" "$(in_home "$TRASH/empty" image ls -q)" &&
	in_home "$TRASH/empty" image ls >ls && test_eq 1 "$(wc -l <ls)" &&
	sbx image ls >ls &&
	head -n 1 ls | test_grep -E "^REPOSITORY +TAG +IMAGE ID +CREATED +SIZE +ORIGIN *$" &&
	test_grep -E "^$REG/test/busybox +latest +${BB_ID:7:12} " ls &&
	test_grep -E "^$REG/test/multiarch +latest +${AMD_ID:7:12} " ls &&
	sbx image ls -q >q && test_eq "$(($(wc -l <ls) - 1))" "$(wc -l <q)" &&
	! grep -Evx "$HEX12" q && test_grep -x "${BB_ID:7:12}" q &&
	sbx image ls --json >j &&
	"$TEST_PYTHON" - j "$REG" "$BB_ID" "$BB_MAN" "$BB_LAYER" "$IMG" <<-\EOF
	import json, os, sys, time
	j, reg, bid, bman, blayer, img = sys.argv[1:]
	r = json.load(open(j))
	assert isinstance(r, list) and r, r
	for i in r:
	    assert set(i) >= {"name", "repository", "tag", "id", "digest", "size", "created",
	                      "layers"}, i
	b = [i for i in r if i["name"] == reg + "/test/busybox:latest"]
	assert len(b) == 1, r
	b = b[0]
	assert b["repository"] == reg + "/test/busybox" and b["tag"] == "latest", b
	assert b["id"] == bid and b["digest"] == bman and b["layers"] == [blayer], b
	assert b["size"] == os.path.getsize(img + "/blobs/sha256/" + blayer[7:]), b
	assert isinstance(b["created"], int) and abs(b["created"] - time.time()) < 3600, b
	EOF
'

# --- import -------------------------------------------------------------------------------
test_expect_success 'import: docker save tars (before and since Docker 25), named and not, from stdin' '
	"${MKIMAGE[@]}" --format docker-archive --out dsave.tar --name dsave:v1 --preset app >i1 &&
	sbx image import dsave.tar >out && test_eq "dsave:v1 $APP_ID" "$(cat out)" &&
	sbx image ls --json >j && test_grep "\"docker.io/library/dsave:v1\"" j &&
	"${MKIMAGE[@]}" --format docker-archive-oci --out dsave25.tar --name localhost/dsave25:v2 \
		--preset busybox >i2 &&
	sbx image import - <dsave25.tar >out && test_eq "localhost/dsave25:v2 $BB_ID" "$(cat out)" &&
	"${MKIMAGE[@]}" --format docker-archive --out anon.tar --no-ref-name --preset big \
		--arg $((8 << 20)) >i3 &&
	sbx image import anon.tar >out && test_eq "$BIG_ID" "$(cat out)" &&
	sbx image ls >ls && test_grep -E "^<none> +<none> +${BIG_ID:7:12} .* imported$" ls &&
	test_eq layer4 "$(sbx run --image dsave:v1 -- cat /srv/app/data)" &&
	test_eq "8388608 /big" "$(sbx run --image "${BIG_ID:7:12}" -- wc -c /big)" &&
	store_check "$SBX_HOME"
'

test_expect_success 'import: a docker save tar of two images prints two lines' '
	"$TEST_PYTHON" - two.tar dsave.tar anon.tar <<-\EOF &&
	import io, json, sys, tarfile
	out, manifest, seen = tarfile.open(sys.argv[1], "w"), [], set()
	for p in sys.argv[2:]:
	    t = tarfile.open(p)
	    for m in t.getmembers():
	        if m.name == "manifest.json":
	            manifest += json.load(t.extractfile(m))
	        elif m.name != "repositories" and m.name not in seen:
	            seen.add(m.name)
	            out.addfile(m, t.extractfile(m) if m.isfile() else None)
	b = json.dumps(manifest).encode()
	i = tarfile.TarInfo("manifest.json")
	i.size = len(b)
	out.addfile(i, io.BytesIO(b))
	out.close()
	EOF
	sbx image import two.tar >out &&
	printf "%s\n" "dsave:v1 $APP_ID" "$BIG_ID" >want && cmp want out
'

test_expect_success 'import: OCI-layout tars: named, unnamed, a multi-platform index' '
	"${MKIMAGE[@]}" --format oci-archive --out oci1.tar --name localhost/ocitar:v1 --preset app >i1 &&
	sbx image import oci1.tar >out && test_eq "localhost/ocitar:v1 $APP_ID" "$(cat out)" &&
	"${MKIMAGE[@]}" --format oci-archive --out oci2.tar --no-ref-name --preset busybox >i2 &&
	sbx image import oci2.tar >out && test_eq "$BB_ID" "$(cat out)" &&
	"${MKIMAGE[@]}" --format oci-archive --out oci3.tar --name localhost/ocimulti:v1 \
		--preset multiarch >i3 &&
	sbx image import - <oci3.tar >out && test_eq "localhost/ocimulti:v1 $AMD_ID" "$(cat out)" &&
	test_eq linux/amd64 "$(sbx run --image localhost/ocimulti:v1 -- cat /etc/sbx-arch)" &&
	store_check "$SBX_HOME"
'

test_expect_success 'import: a blob that does not match its digest, garbage, a missing file: 125' '
	rm -rf bad && "${MKIMAGE[@]}" --out bad --tag v1 --preset app >i &&
	l=$(jget i layers.1) && f=bad/blobs/sha256/${l#sha256:} &&
	"$TEST_PYTHON" -c "import sys; p = sys.argv[1]; b = bytearray(open(p, \"rb\").read()); b[len(b) // 2] ^= 1; open(p, \"wb\").write(b)" "$f" &&
	"$TEST_PYTHON" -c "import json; p = \"bad/index.json\"; i = json.load(open(p)); i[\"manifests\"][0][\"annotations\"][\"org.opencontainers.image.ref.name\"] = \"localhost/badblob:v1\"; json.dump(i, open(p, \"w\"))" &&
	tar -C bad -cf bad.tar . &&
	store_snapshot "$SBX_HOME" before &&
	expect_code 125 sbx image import bad.tar >out 2>err &&
	expect_one_error_line err "^sbx: error: .*(digest|match|verif)" && test ! -s out &&
	head -c 100000 /dev/urandom >garbage.tar &&
	expect_code 125 sbx image import garbage.tar 2>err && expect_one_error_line err "^sbx: error: " &&
	expect_code 125 sbx image import nosuch.tar 2>err && expect_one_error_line err "nosuch.tar" &&
	store_snapshot "$SBX_HOME" after && cmp before after && store_check "$SBX_HOME"
'

test_expect_success 'import --rootfs DIR and TAR: one-layer images with PATH only; run needs a command' '
	mkdir -p rootfs/bin rootfs/etc && cp /bin/busybox rootfs/bin/busybox &&
	ln -s busybox rootfs/bin/sh && ln -s busybox rootfs/bin/cat && ln -s busybox rootfs/bin/env &&
	echo "from a directory" >rootfs/etc/hello &&
	sbx image import --rootfs rootfs localhost/rootfs:dir >out &&
	test_grep -Ex "sha256:[0-9a-f]{64}" out && dirid=$(cat out) &&
	test_eq "from a directory" "$(sbx run --image localhost/rootfs:dir -- cat /etc/hello)" &&
	sbx run --image localhost/rootfs:dir -- env >env &&
	test_grep -x "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" env &&
	expect_code 125 sbx run --image localhost/rootfs:dir 2>err &&
	head -n 1 err | test_grep -E "^sbx: error: .*(Entrypoint|Cmd|command)" &&
	echo "from a tar" >rootfs/etc/hello && tar -C rootfs -czf rootfs.tgz . &&
	sbx image import --rootfs rootfs.tgz localhost/rootfs:tar >out &&
	test_grep -Ex "sha256:[0-9a-f]{64}" out && test_ne "$dirid" "$(cat out)" &&
	test_eq "from a tar" "$(sbx run --image localhost/rootfs:tar -- cat /etc/hello)" &&
	sbx image ls --json >j &&
	"$TEST_PYTHON" -c "import json, sys
r = [i for i in json.load(open(\"j\")) if i[\"name\"] == \"localhost/rootfs:tar\"]
assert len(r) == 1 and r[0][\"layers\"] == [sys.argv[1]], r" \
		"sha256:$(sha256sum <rootfs.tgz | cut -c1-64)" &&
	store_check "$SBX_HOME"
'

# --- sandboxes from images ------------------------------------------------------------------
test_expect_success 'create --image: Env, WorkingDir, User are the defaults of exec; -e -w -u win' '
	sbx create --name app --image "$REG/test/app" >id &&
	test_eq "$IMAGE_UID" "$(sbx exec app id -u)" &&
	test_eq /srv/app "$(sbx exec app pwd)" &&
	: "the image gives its WorkingDir to its User (1000): that user can write there" &&
	sbx exec app sh -c "echo w >/srv/app/by-the-user" &&
	sbx exec app env >env &&
	test_grep -x "GREETING=hello from the image" env && test_grep -x "FOO=image" env &&
	test_grep -x "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" env &&
	test_eq 0 "$(sbx exec -u 0 app id -u)" &&
	test_eq /tmp "$(sbx exec -w /tmp app pwd)" &&
	test_eq "flag hello from the image" "$(sbx exec -e FOO=flag app sh -c "echo \$FOO \$GREETING")" &&
	sbx create --name app2 --image "$REG/test/app" -e FOO=create -w /opt >/dev/null &&
	test "$(sbx exec app2 sh -c "echo \$FOO; pwd")" = "create
/opt" &&
	sbx inspect app >j &&
	"$TEST_PYTHON" - j "$REG/test/app" "$APP_ID" "$TRASH/info/app.json" <<-\EOF
	import json, sys
	r, ref, aid, inf = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
	im = r["options"]["image"]
	assert im["ref"] == ref and im["id"] == aid, im
	assert im["layers"] == json.load(open(inf))["layers"], im
	assert im["entrypoint"] == ["/bin/sh", "-c"], im
	assert im["cmd"] == ["echo entrypoint+cmd ran as $(id -u) in $(pwd): $GREETING"], im
	assert r["options"]["workdir"] == "/srv/app" and r["options"]["user"] == "1000:1000", r
	assert "GREETING=hello from the image" in r["options"]["env"], r
	EOF
'

test_expect_success 'the layers: whiteouts delete, an opaque directory hides what is below, zstd read' '
	expect_code 1 sbx exec app test -e /etc/doomed &&
	expect_code 1 sbx exec app test -e /opt/gone &&
	test_eq new "$(sbx exec app ls -A /opt/keep)" &&
	test "$(sbx exec app cat /opt/keep/new /etc/replaced /srv/app/data)" = "upper
upper
layer4" &&
	test_eq zstd "$(sbx exec app cat /etc/zstd-layer)" &&
	test_eq "" "$(sbx exec app find / -xdev -name ".wh.*" 2>/dev/null)" &&
	test_eq ID=sbx-test-busybox "$(sbx exec app cat /etc/os-release)" &&
	expect_code 1 sbx exec app test -e /usr/bin/python3 &&
	sbx exec app test -d /tmp && sbx exec app test -d /workspace &&
	: "modes, owners and times of the image, also of directories a later layer adds to" &&
	same 1777 sbx exec app stat -c %a /tmp && same 700 sbx exec app stat -c %a /root &&
	same 1700000000 sbx exec app stat -c %Y /etc/os-release &&
	same "$IMAGE_UID:$IMAGE_UID" sbx exec app stat -c %u:%g /srv/app &&
	: "(app itself wrote to /srv/app above: a fresh sandbox shows the image as it is)" &&
	test_eq 1700000000 "$(sbx run --image "$REG/test/app" -- stat -c %Y /srv/app)" &&
	test_eq app "$(sbx exec app cat /etc/hostname)"
'

test_expect_success 'the root is writable; writes stay in the sandbox (its fs/upper), never in the image' '
	a=$(sbx create --name wa --image "$REG/test/busybox") &&
	sbx exec wa sh -c "echo x >/etc/sbx-t0600-newfile && mkdir -p /usr/local/bin &&
		printf \"#!/bin/sh\necho from-x\n\" >/usr/local/bin/x && chmod +x /usr/local/bin/x &&
		echo changed >>/etc/os-release && rm /bin/vi" &&
	test_eq from-x "$(sbx exec wa x)" &&
	test_eq x "$(sbx exec wa cat /etc/sbx-t0600-newfile)" &&
	expect_code 1 sbx exec wa test -e /bin/vi &&
	test -f "$SBX_HOME/sandboxes/$a/fs/upper/etc/sbx-t0600-newfile" &&
	sbx create --name wb --image "$REG/test/busybox" >/dev/null &&
	expect_code 1 sbx exec wb test -e /etc/sbx-t0600-newfile &&
	expect_code 1 sbx exec wb test -e /usr/local/bin/x &&
	test_eq ID=sbx-test-busybox "$(sbx exec wb cat /etc/os-release)" &&
	sbx exec wb test -L /bin/vi &&
	L=$IMG/layers/${BB_LAYER#sha256:} &&
	test_eq ID=sbx-test-busybox "$(cat "$L/etc/os-release")" && test -L "$L/bin/vi" &&
	test ! -e "$L/etc/sbx-t0600-newfile" && test ! -e /etc/sbx-t0600-newfile &&
	store_check "$SBX_HOME"
'

test_expect_success 'the layers are shared: one unpacked directory each, whatever the sandboxes' '
	n=$(ls "$IMG/layers" | wc -l) &&
	for i in 1 2 3; do sbx create --name "sh$i" --image "$REG/test/busybox" >/dev/null || exit 1; done &&
	sbx create --name sh4 --image "$REG/test/app" >/dev/null &&
	test_eq "$n" "$(ls "$IMG/layers" | wc -l)" &&
	for i in 1 2 3; do test_eq ID=sbx-test-busybox "$(sbx exec "sh$i" cat /etc/os-release)" || exit 1; done &&
	ino=$(stat -c %i "$IMG/layers/${BB_LAYER#sha256:}/bin/busybox") &&
	{ find "$SBX_HOME/sandboxes" -xdev -type f -name busybox >copies 2>/dev/null || :; } &&
	while read -r f; do
		test_eq "$ino" "$(stat -c %i "$f")" || { echo "a copy of the layer: $f"; exit 1; }
	done <copies
'

test_expect_success 'run --image: Entrypoint+Cmd without a command; a command instead; its status' '
	n=$(sbx ls -q | wc -l) &&
	sbx run --image "$REG/test/app" >out &&
	test_eq "entrypoint+cmd ran as $IMAGE_UID in /srv/app: hello from the image" "$(cat out)" &&
	test_eq hi "$(sbx run --image "$REG/test/busybox" -- echo hi)" &&
	test_eq hi "$(sbx run --image "$REG/test/app" -- echo hi)" &&
	expect_code 7 sbx run --image "$REG/test/busybox" -- sh -c "exit 7" &&
	test_eq "$n" "$(sbx ls -q | wc -l)"
'

test_expect_success 'exec, cp, pause, resume, pause --release, rm on an image sandbox; rm leaves nothing' '
	id=$(sbx create --name life --image "$REG/test/app") &&
	echo hostfile >hf && sbx cp hf life:/etc/hf &&
	test_eq hostfile "$(sbx exec life cat /etc/hf)" &&
	sbx cp life:/opt/keep/new back && test_eq upper "$(cat back)" &&
	sbx pause life >/dev/null && test_eq paused "$(sb_state life)" &&
	sbx cp hf life:/srv/app/while-paused && sbx cp life:/etc/replaced back2 &&
	test_eq upper "$(cat back2)" &&
	sbx resume life >/dev/null && test_eq running "$(sb_state life)" &&
	test "$(sbx exec life cat /srv/app/while-paused)" = hostfile &&
	sbx pause --release life >/dev/null &&
	sbx cp hf life:/srv/app/while-released &&
	sbx resume life >/dev/null &&
	test "$(sbx exec life cat /etc/hf /srv/app/while-released /srv/app/data)" = "hostfile
hostfile
layer4" &&
	pids=$(sandbox_pids "$id") &&
	sbx rm -f life >/dev/null &&
	assert_gone "$id" $pids &&
	test_grep ! "$id" /proc/self/mountinfo &&
	store_check "$SBX_HOME"
'

test_expect_success 'a name pulled again points at the new image; sandboxes keep the old one' '
	sbx image pull "$REG/test/moving" >out && test_eq "$BB_ID" "$(cat out)" &&
	sbx create --name mv --image "$REG/test/moving" >/dev/null &&
	registry_push "$TRASH/oci" app "$REG/test/moving:latest" &&
	sbx image pull "$REG/test/moving" >out && test_eq "$APP_ID" "$(cat out)" &&
	expect_code 1 sbx exec mv test -e /srv/app &&
	sbx pause --release mv >/dev/null && sbx resume mv >/dev/null &&
	expect_code 1 sbx exec mv test -e /srv/app &&
	test_eq ID=sbx-test-busybox "$(sbx exec mv cat /etc/os-release)" &&
	: "the name now stands for the app image, which sandboxes use under another name" &&
	expect_code 125 sbx image rm "$REG/test/moving" 2>err &&
	expect_one_error_line err "^sbx: error: .*used by sandbox" &&
	sbx image rm -f "$REG/test/moving" >out && test_eq 1 "$(wc -l <out)" &&
	sbx image prune >/dev/null && sbx exec mv cat /bin/busybox >/dev/null
'

test_expect_success 'image rm: 125 while a sandbox uses the image, -f works, the sandbox keeps working' '
	sbx image pull "$REG/test/app" >/dev/null &&
	sbx create --name user --image "$REG/test/app" >/dev/null &&
	expect_code 125 sbx image rm "$REG/test/app" >out 2>err &&
	expect_one_error_line err "^sbx: error: .*(user|sandbox)" &&
	sbx image ls >ls && test_grep -E "^$REG/test/app +latest " ls &&
	sbx image rm -f "$REG/test/app" >out && test_eq 1 "$(wc -l <out)" &&
	sbx image ls >ls && test_grep ! -E "^$REG/test/app +latest " ls &&
	test_eq layer4 "$(sbx exec user cat /srv/app/data)" &&
	sbx image prune >/dev/null &&
	test_eq layer4 "$(sbx exec user cat /srv/app/data)" &&
	sbx pause --release user >/dev/null && sbx resume user >/dev/null &&
	test_eq upper "$(sbx exec user cat /opt/keep/new)" &&
	expect_code 125 sbx image rm nosuch/image:v9 2>err && expect_one_error_line err "no image" &&
	sbx image pull "$REG/test/big" >/dev/null && sbx image pull "$REG/test/big@$(info big manifest)" >/dev/null &&
	test "$(sbx image ls -q | grep -c "${BIG_ID:7:12}")" -ge 2 &&
	expect_code 125 sbx image rm nosuch/image:v9 "${BIG_ID:7:12}" >out 2>err &&
	test_eq 0 "$(sbx image ls -q | grep -c "${BIG_ID:7:12}")" &&
	store_check "$SBX_HOME"
'

test_expect_success 'image rm after the sandbox is gone; prune deletes only what nothing uses' '
	h=$(fresh_home prune) &&
	in_home "$h" image pull "$REG/test/app" >/dev/null &&
	in_home "$h" create --name p --image "$REG/test/app" >/dev/null &&
	in_home "$h" image rm -f "$REG/test/app" >/dev/null &&
	nl=$(ls "$h/images/layers" | wc -l) && nb=$(ls "$h/images/blobs/sha256" | wc -l) &&
	in_home "$h" image prune >out &&
	test_grep -Ex "removed 0 layers, [0-9]+ blobs \([0-9.]+ MiB\)" out &&
	test_eq "$nl" "$(ls "$h/images/layers" | wc -l)" &&
	test_eq layer4 "$(in_home "$h" exec p cat /srv/app/data)" &&
	in_home "$h" rm -f p >/dev/null &&
	old=$h/images/tmp/$(printf %064d 0) &&
	mkdir -p "$old.a1b2c3/etc" && echo partial >"$old.d4e5f6" && echo partial >"$old.0a0b0c" &&
	touch -d "2 hours ago" "$old.a1b2c3/etc" "$old.a1b2c3" "$old.d4e5f6" &&
	nl=$(ls "$h/images/layers" | wc -l) && nb=$(ls "$h/images/blobs/sha256" | wc -l) &&
	in_home "$h" image prune >out &&
	nl2=$(ls "$h/images/layers" | wc -l) && nb2=$(ls "$h/images/blobs/sha256" | wc -l) &&
	test_grep -Ex "removed $((nl - nl2)) layers, $((nb - nb2)) blobs \([0-9.]+ MiB\)" out &&
	test_eq 3 "$((nl - nl2))" && test_eq 1 "$nl2" &&
	test -d "$h/images/layers/${BB_LAYER#sha256:}" &&
	test ! -e "$old.a1b2c3" && test ! -e "$old.d4e5f6" && test -e "$old.0a0b0c" &&
	rm "$old.0a0b0c" &&
	in_home "$h" image prune >out && test_grep -Ex "removed 0 layers, 0 blobs \(0(\.0+)? MiB\)" out &&
	test_eq ID=sbx-test-busybox "$(in_home "$h" run --image "$REG/test/busybox" -- cat /etc/os-release)" &&
	store_check "$h"
'

test_expect_success 'what real images hold: xattrs, hard links, absolute symlinks, duplicates, long names; User by name' '
	sbx image pull "$REG/test/quirks" >out 2>err || { cat err; exit 1; }
	test_eq "$(info quirks id)" "$(cat out)" &&
	sbx create --name quirks --image "$REG/test/quirks" >/dev/null &&
	test_eq "$IMAGE_UID" "$(sbx exec quirks id -u)" &&
	test_eq /not/in/the/image "$(sbx exec quirks pwd)" &&
	test_eq second "$(sbx exec quirks cat /etc/dup)" &&
	test_eq linked "$(sbx exec quirks cat /etc/hard)" &&
	test_eq 2 "$(sbx exec quirks stat -c %h /etc/hard)" &&
	test_eq /etc/os-release "$(sbx exec quirks readlink /etc/abs-link)" &&
	test_eq ID=sbx-test-busybox "$(sbx exec quirks cat /etc/abs-link)" &&
	expect_code 1 sbx exec quirks test -L /etc/was-link &&
	test_eq "now a file" "$(sbx exec quirks cat /etc/was-link)" &&
	test_eq ping "$(sbx exec quirks cat /bin/pingish)" &&
	test_eq long "$(sbx exec quirks cat "/opt/$(printf "l%.0s" $(seq 200))")" &&
	test_eq utf8 "$(sbx exec quirks cat "/opt/$(printf "\303\274n\303\257c\303\266de-\345\220\215\345\211\215")")" &&
	test_eq upper "$(sbx exec quirks cat /opt/upper)" &&
	store_check "$SBX_HOME"
'

test_expect_success 'a layer naming a path through a lower layer'"'"'s symlink (lib -> usr/lib): followed inside, or refused; /lib never broken' '
	sbx image pull "$REG/test/crosslink" >out 2>err
	rc=$?
	if [ "$rc" = 125 ]; then
		expect_one_error_line err "^sbx: error: .*lib" && store_check "$SBX_HOME" || exit 1
		echo "refused: $(cat err)"
	else
		test_eq 0 "$rc" && test_eq "$(info crosslink id)" "$(cat out)" &&
		sbx run --image "$REG/test/crosslink" -- sh -c \
			"ls -ld /lib; cat /usr/lib/marker /lib/marker /lib/base /usr/lib/base" >got 2>&1
		sed -n "1s/.* \(lib -> usr\/lib\)\$/\1/p; 2,\$p" got >got.short &&
		printf "lib -> usr/lib\nmarker\nmarker\nbase\nbase\n" >want &&
		cmp -s want got.short || { echo "in the sandbox:"; cat got; exit 1; }
	fi
'

# --- hostile layers -----------------------------------------------------------------------
test_expect_success 'hostile layers: ../, an absolute path, through a symlink, hard links: 125' '
	sbx image pull "$REG/test/busybox" >/dev/null &&
	links=$(stat -c %h /etc/passwd) && sum=$(sha256sum </etc/passwd) &&
	refused_pull "$SBX_HOME" "$REG/hostile/escape" "escape" &&
	refused_pull "$SBX_HOME" "$REG/hostile/abs" "abs" &&
	refused_pull "$SBX_HOME" "$REG/hostile/symlink" "link" &&
	refused_pull "$SBX_HOME" "$REG/hostile/symlink-rel" "rlink" &&
	refused_pull "$SBX_HOME" "$REG/hostile/hardlink" "(hard ?link|passwd)" &&
	refused_pull "$SBX_HOME" "$REG/hostile/hardlink-abs" "(hard ?link|passwd)" &&
	host_untouched &&
	test_eq "$links" "$(stat -c %h /etc/passwd)" && test_eq "$sum" "$(sha256sum </etc/passwd)" &&
	test_eq "" "$(find "$IMG" -name h -o -name link -o -name rlink)" &&
	test_eq ID=sbx-test-busybox "$(sbx run --image "$REG/test/busybox" -- cat /etc/os-release)"
'

test_expect_success 'hostile layers through import (OCI tar) and import --rootfs TAR: 125' '
	"${MKIMAGE[@]}" --format oci-archive --out esc.tar --name localhost/esc:v1 --preset escape >/dev/null &&
	"${MKIMAGE[@]}" --format docker-archive --out sym.tar --name localhost/sym:v1 --preset symlink \
		--arg "$TRASH/x" >/dev/null &&
	store_snapshot "$SBX_HOME" before &&
	expect_code 125 sbx image import esc.tar >out 2>err &&
	expect_one_error_line err "^sbx: error: .*escape" && test ! -s out &&
	expect_code 125 sbx image import sym.tar >out 2>err &&
	expect_one_error_line err "^sbx: error: .*link" && test ! -s out &&
	"$TEST_PYTHON" -c "import io, tarfile
t = tarfile.open(\"evil.tar\", \"w\")
i = tarfile.TarInfo(\"../escape\"); i.size = 1
t.addfile(i, io.BytesIO(b\"x\")); t.close()" &&
	expect_code 125 sbx image import --rootfs evil.tar localhost/evil:v1 >out 2>err &&
	expect_one_error_line err "^sbx: error: .*escape" && test ! -s out &&
	store_snapshot "$SBX_HOME" after && cmp before after &&
	store_check "$SBX_HOME" && host_untouched
'

test_expect_success 'device nodes in a layer are skipped, never made' '
	sbx image pull "$REG/hostile/device" >out && test_eq "$(info device id)" "$(cat out)" &&
	: "overlay whiteouts (character devices 0:0) are the only device nodes in the store" &&
	test_eq "" "$(find "$IMG/layers" -type b)" && test_eq "" "$(find "$IMG/layers" -name evil-null)" &&
	test_eq "" "$(find "$IMG/layers" -type c -exec stat -c "%t:%T %n" {} + | grep -v "^0:0 ")" &&
	expect_code 1 sbx run --image "$REG/hostile/device" -- test -c /evil-null &&
	sbx image rm "$REG/hostile/device" >/dev/null && store_check "$SBX_HOME"
'

test_expect_success 'setuid and setgid files: never owned by the host'"'"'s root in the store' '
	sbx image pull "$REG/hostile/setuid" >out 2>err
	rc=$?
	if [ "$rc" = 0 ]; then
		test_eq "$(info setuid id)" "$(cat out)" || exit 1
		sbx image rm "$REG/hostile/setuid" >/dev/null || exit 1
	else
		test_eq 125 "$rc" && expect_one_error_line err "^sbx: error: " || exit 1
	fi
	found=$(find "$IMG/layers" \( -perm -4000 -uid 0 \) -o \( -perm -2000 -gid 0 \)) &&
	{ test_eq "" "$found" || { echo "setuid/setgid root files on the host: $found"; exit 1; }; } &&
	store_check "$SBX_HOME"
'

test_expect_success 'owners above 65535: refused when run by root, the caller'"'"'s otherwise' '
	if [ "$(id -u)" -eq 0 ]; then
		refused_pull "$SBX_HOME" "$REG/hostile/bigowner" "(owner|uid|65535|70000)"
	else
		sbx image pull "$REG/hostile/bigowner" >out && test_eq "$(info bigowner id)" "$(cat out)" &&
		test_eq "" "$(find "$IMG/layers" ! -user "$(id -u)")" &&
		sbx image rm "$REG/hostile/bigowner" >/dev/null
	fi
'

# --- hostile registries ------------------------------------------------------------------
test_expect_success 'a manifest that is not JSON, one over 4 MiB, one nested too deep: 125' '
	h=$(fresh_home manifests) &&
	refused_pull "$h" "$FAULT/f/notjson/test/app" "(JSON|json|manifest)" &&
	refused_pull "$h" "$FAULT/f/huge/test/app" "(large|big|size|MiB|limit|long)" &&
	refused_pull "$h" "$FAULT/f/deep/test/app" "(deep|nest|JSON|json)" &&
	test_grep "GET /v2/f/huge/test/app/manifests/latest 200 fault=huge" "$FAULTLOG"
'

test_expect_success 'a manifest pulled by digest that does not match it: 125' '
	h=$(fresh_home mdigest) &&
	refused_pull "$h" "$FAULT/f/mdigest/test/app@$APP_MAN" "(digest|match|verif)"
'

test_expect_success 'a registry that answers 500 for manifests, or for blobs: 125' '
	h=$(fresh_home r500) &&
	refused_pull "$h" "$FAULT/f/m500/test/app" "500" &&
	refused_pull "$h" "$FAULT/f/b500/test/app" "500"
'

test_expect_success 'a registry that answers 503 once per blob: retried, the pull succeeds' '
	h=$(fresh_home flaky) &&
	in_home "$h" image pull "$FAULT/f/flaky/test/app" >out 2>err && test_eq "$APP_ID" "$(cat out)" &&
	test_grep "^proxy GET /v2/f/flaky/test/app/blobs/sha256:[0-9a-f]* 503 fault=flaky" "$FAULTLOG" &&
	test_grep "^proxy GET /v2/f/flaky/test/app/blobs/sha256:[0-9a-f]* 200 fault=flaky" "$FAULTLOG" &&
	store_check "$h"
'

test_expect_success 'a blob whose bytes do not match its digest; a truncated blob: 125, nothing kept' '
	h=$(fresh_home baddigest) &&
	refused_pull "$h" "$FAULT/f/baddigest/test/app" "(digest|match|verif)" &&
	refused_pull "$h" "$FAULT/f/short/test/app" "" &&
	test_eq 1 "$(ls "$h/images/layers" | wc -l)"
'

test_expect_success 'a registry that stalls mid-blob: 125 after the stall timeout (SBX_TEST_STALL_TIMEOUT=2)' '
	h=$(fresh_home stall) &&
	t0=$(date +%s) &&
	refused_pull "$h" "$FAULT/f/stall/test/app" "(stall|time|no data|slow)" SBX_TEST_STALL_TIMEOUT=2 &&
	t1=$(date +%s) && echo "took $((t1 - t0)) s" && test $((t1 - t0)) -lt 15 &&
	test_grep "^proxy stalling /v2/f/stall/test/app/blobs/" "$FAULTLOG"
'

test_expect_success 'a blob redirected to another host: followed, the digest still checked' '
	h=$(fresh_home redirect) &&
	in_home "$h" image pull "$FAULT/f/redirect/test/app" >out && test_eq "$APP_ID" "$(cat out)" &&
	test_grep "^proxy GET /v2/f/redirect/test/app/blobs/sha256:[0-9a-f]* 307" "$FAULTLOG" &&
	test_grep "^alt GET /blob/test/app/sha256:" "$FAULTLOG" &&
	store_check "$h" &&
	h=$(fresh_home redirect-bad) &&
	refused_pull "$h" "$FAULT/f/redirect-bad/test/app" "(digest|match|verif)"
'

test_expect_success 'a blob redirected to file://: refused, though the file holds the very bytes' '
	mkdir -p fileblobs && cp "$IMG"/blobs/sha256/* fileblobs/ &&
	h=$(fresh_home redirect-file) &&
	refused_pull "$h" "$FAULT/f/redirect-file/test/app" "not http or https" &&
	test_grep "^proxy GET /v2/f/redirect-file/test/app/blobs/sha256:[0-9a-f]* 307" "$FAULTLOG"
'

test_expect_success 'a redirect from a registry that wants a token: the token is not sent to the other host' '
	h=$(fresh_home redirect-auth) &&
	in_home "$h" image pull "$ANON/f/redirect/test/app" >out && test_eq "$APP_ID" "$(cat out)" &&
	test_grep "^alt GET /blob/test/app/sha256:[0-9a-f]* auth=no" "$ANONLOG" &&
	test_grep ! "^alt GET .* auth=yes" "$ANONLOG"
'

test_expect_success 'a tag that does not exist, a registry that is not there, a bad reference: 125' '
	h=$(fresh_home missing) &&
	refused_pull "$h" "$REG/test/busybox:nope" "(not found|unknown|no such|404|nope)" &&
	port=$(free_port) &&
	t0=$(date +%s) &&
	refused_pull "$h" "127.0.0.1:$port/test/busybox" "(127.0.0.1:$port|connect|refused)" &&
	test $(($(date +%s) - t0)) -lt 10 &&
	refused_pull "$h" "$REG/Test/UPPER" "" &&
	refused_pull "$h" "$REG/test/busybox@sha256:short" ""
'

test_expect_success 'the store after all this: whole, no partial files' '
	store_check "$SBX_HOME" && host_untouched
'

# a small tmpfs as a store, in a mount namespace of the test's own (root: its own; others: a
# user namespace mapping only their uid)
# shellcheck disable=SC2034 # used in a test body
if [ "$(id -u)" -eq 0 ]; then full_ns="unshare -m"; else full_ns="unshare -Urm"; fi
test_expect_success 'a full disk under the store: pull and import fail with 125, no layer stored half' '
	cat >fullimg.sh <<-\EOS &&
	set -e
	export SBX_HOME=$TRASH/h-fullimg
	mkdir -p "$SBX_HOME" && mount -t tmpfs -o size=6m tmpfs "$SBX_HOME"
	gone() { "$SBX" rm -f b >/dev/null 2>&1 || true; }
	trap gone EXIT
	set +e
	"$SBX" image pull -q "$REG/test/bomb:latest" >/dev/null 2>err1; echo $? >rc1
	"$SBX" image import bomb.tar >/dev/null 2>err2; echo $? >rc2
	set -e
	ls -A "$SBX_HOME/images/layers" >layers; ls -A "$SBX_HOME/images/tmp" >tmp
	"$SBX" image ls -q >imgs
	: with room, the same pull works and the layer is whole
	umount "$SBX_HOME" && mount -t tmpfs -o size=64m tmpfs "$SBX_HOME"
	"$SBX" image pull -q "$REG/test/bomb:latest" >/dev/null
	"$SBX" create --name b --image "$REG/test/bomb:latest" >/dev/null
	"$SBX" exec b sh -c "wc -c </zeros" >size
	"$SBX" rm -f b >/dev/null
	EOS
	TRASH=$TRASH REG=$REG $full_ns bash fullimg.sh &&
	test_eq 125 "$(cat rc1)" && test_eq 125 "$(cat rc2)" &&
	expect_one_error_line err1 "No space left on device" &&
	expect_one_error_line err2 "No space left on device" &&
	test ! -s layers && test ! -s tmp && test ! -s imgs &&
	test_eq 8388608 "$(cat size)"
'

test_done
