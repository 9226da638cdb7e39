# Sourced by tests: the verb checks every provider and runtime passes where it has the feature,
# written once and run against each (the local provider, --runtime gvisor, docker, podman,
# kubernetes...).
#   verbs_suite LABEL CREATE_ARGS...   makes sandboxes with `sbx create CREATE_ARGS...`, runs
#                                      each check below as a test, removes what it made
# Set before calling (all optional):
#   VERBS_SKIP="NAME ..."    checks the backend cannot do; each is counted as skipped, with
#                            the reason in VERBS_WHY_<NAME> (dashes as underscores) or "not
#                            supported by LABEL"
#   VERBS_DIR=/tmp           a writable directory inside the sandbox
#   VERBS_USER=1000          a uid exec -u runs as ([user])
#   VERBS_RELEASED='released|stopped'  the states pause --release may leave (an ERE)
#   VERBS_PAUSED_CP=1        0: cp of a paused sandbox is refused by the backend (the pause
#                            check then looks at the count after resume only)
#   VERBS_MORE="NAME ..."    the checks below marked (more) that the backend runs; the others
#                            are counted as skipped ("not run for LABEL")
#   VERBS_INTERP=126         (start-fail) the status of a script whose #! interpreter is missing
#   VERBS_PREVIEW_CREATE=    (preview) more create options for its sandbox ("--port 8080")
#   VERBS_PREVIEW_IN=        (preview) a command (a function) `sbx preview` and the client run
#                            under, where the preview's address is reached (a network namespace)
# The checks, by name:
#   exit-codes    0, 1, 3, 126 (not executable), 127 (no such command), 137 (SIGKILL), 124
#                 (--timeout)
#   streams       stdout and stderr kept apart
#   stdin         exec -i: the command reads to end-of-file, 1 MiB of random bytes byte-exact
#   binary        binary output byte-exact (NUL, 0xff, no trailing newline)
#   env-cwd       exec -e and -w
#   user          exec -u
#   detach        exec -d returns while the command runs on
#   cp            cp in and out: modes, a symbolic link kept as a link, a 20 MiB file, a tar
#                 stream in, a missing source (125)
#   pause-memory  pause freezes a counting process (it counts on after resume)
#   release       pause --release: processes end, files stay; resume runs again
#   inspect       inspect --json and ls --json show the state
#   rm            rm: gone from ls, inspect says no such sandbox (125)
#   start-fail    (more) a command that cannot start: 127, 126, the interpreter's status; -w and
#                 -u that do not exist: 125, one line each; controls: a command's own 126 and
#                 127, and the runtime's words printed by a command, passed through
#   timeout-procs (more) --timeout ends the command's processes: after `env -i`, a child in a
#                 session of its own holding the output; control: without it they run on
#   preview       (more) a preview of port 8080 (busybox httpd inside): refused without its
#                 token (401), served with it (header, and the URL's token then a cookie),
#                 closed by preview --rm
# shellcheck shell=bash disable=SC2016,SC2034 # the test bodies are evaluated by lib.sh (and read VERBS_CREATE)

VERBS_SKIP=${VERBS_SKIP:-}
VERBS_DIR=${VERBS_DIR:-/tmp}
VERBS_USER=${VERBS_USER:-1000}
VERBS_PAUSED_CP=${VERBS_PAUSED_CP:-1}
VERBS_RELEASED=${VERBS_RELEASED:-released|stopped}
VERBS_MORE=${VERBS_MORE:-}
VERBS_INTERP=${VERBS_INTERP:-126}
VERBS_PREVIEW_CREATE=${VERBS_PREVIEW_CREATE:-}
VERBS_PREVIEW_IN=${VERBS_PREVIEW_IN:-}

# _verbs_check NAME DESCRIPTION BODY: one test, or a skip with its reason
_verbs_check() {
	local name=$1 desc=$2 body=$3 why
	case " $VERBS_SKIP " in
	*" $name "*)
		why=VERBS_WHY_${name//-/_}
		test_skip "$VERBS_LABEL: $desc" "${!why:-not supported by $VERBS_LABEL}"
		return 0
		;;
	esac
	case $name in
	start-fail | timeout-procs | preview)
		case " $VERBS_MORE " in
		*" $name "*) ;;
		*)
			test_skip "$VERBS_LABEL: $desc" "not run for $VERBS_LABEL (VERBS_MORE)"
			return 0
			;;
		esac
		;;
	esac
	test_expect_success "$VERBS_LABEL: $desc" "cd \"\$TRASH/\$VB\" && $body"
}

# what a sandbox of the suite is called: vb-LABEL-N (LABEL without what names refuse)
_verbs_name() { printf 'vb-%s-%s' "${VERBS_LABEL//[^a-zA-Z0-9]/-}" "$1"; }

verbs_suite() {
	VERBS_LABEL=$1
	shift
	VERBS_CREATE=("$@")
	VB=$(_verbs_name 1)
	export VB VERBS_DIR VERBS_USER VERBS_PAUSED_CP VERBS_RELEASED VERBS_INTERP
	# the files of each suite's checks apart from another suite's of the same test file
	mkdir -p "$TRASH/$VB"

	test_expect_success "$VERBS_LABEL: create" '
		sbx create --name "$VB" "${VERBS_CREATE[@]}" >id && test -s id &&
		test_eq running "$(sb_state "$VB")"
	'

	_verbs_check exit-codes 'exit statuses: 0, 1, 3, 126, 127, 137, 124 (--timeout)' '
		expect_code 0 sbx exec "$VB" true &&
		expect_code 1 sbx exec "$VB" false &&
		expect_code 3 sbx exec "$VB" sh -c "exit 3" &&
		sbx exec "$VB" sh -c "printf \"#!/bin/sh\\necho ran\\n\" >$VERBS_DIR/vb-noexec; chmod 644 $VERBS_DIR/vb-noexec" &&
		{ sbx exec "$VB" "$VERBS_DIR/vb-noexec" >out 2>err; test_eq 126 $? "a file it cannot execute"; } &&
		test_grep ! ran out &&
		{ sbx exec "$VB" vb-no-such-command >out 2>err; test_eq 127 $? "no such command"; } &&
		test_grep vb-no-such-command err && test ! -s out &&
		expect_code 137 sbx exec "$VB" sh -c "kill -9 \$\$" &&
		expect_code 124 sbx exec --timeout 1s "$VB" sleep 30 &&
		expect_code 0 sbx exec --timeout 30s "$VB" true
	'

	_verbs_check start-fail 'a command that cannot start: 127, 126; -w, -u: 125; controls' '
		sbx exec "$VB" sh -c "mkdir -p $VERBS_DIR/vb-dir; printf \"#!/vb/no/interp\\necho ran\\n\" >$VERBS_DIR/vb-badi; chmod 755 $VERBS_DIR/vb-badi" &&
		{ sbx exec "$VB" /vb/no/such >out 2>err; test_eq 127 $? "no such path"; } &&
		expect_one_error_line err "/vb/no/such.: command not found" && test ! -s out &&
		{ sbx exec "$VB" "$VERBS_DIR/vb-dir" >out 2>err; test_eq 126 $? "a directory"; } &&
		expect_one_error_line err "vb-dir.: cannot execute" && test ! -s out &&
		{ sbx exec "$VB" "$VERBS_DIR/vb-badi" >out 2>err; test_eq "$VERBS_INTERP" $? "no interpreter"; } &&
		expect_one_error_line err "vb-badi" && test ! -s out &&
		expect_code 125 sbx exec -w /vb/no/dir "$VB" true >out 2>err &&
		expect_one_error_line err "cannot change to directory ./vb/no/dir." && test ! -s out &&
		expect_code 125 sbx exec -u vb-no-user "$VB" true >out 2>err &&
		expect_one_error_line err "cannot run as user .vb-no-user." && test ! -s out &&
		{ sbx exec "$VB" sh -c "echo OCI runtime exec failed: mine; echo \"exec /x: no such file or directory\" >&2; exit 127" >out 2>err; test_eq 127 $? "its own 127"; } &&
		test_eq "OCI runtime exec failed: mine" "$(cat out)" &&
		test_eq "exec /x: no such file or directory" "$(cat err)" &&
		{ sbx exec "$VB" sh -c "echo Error: mine >&2; exit 126" >out 2>err; test_eq 126 $? "its own 126"; } &&
		test_eq "Error: mine" "$(cat err)" &&
		test_eq "$VERBS_DIR" "$(sbx exec -w "$VERBS_DIR" "$VB" pwd)"
	'

	_verbs_check timeout-procs '--timeout ends the processes (env -i, a session of their own); control' '
		expect_code 124 sbx exec --timeout 1s "$VB" sh -c "sleep 41; :" &&
		expect_code 124 sbx exec --timeout 1s "$VB" env -i sleep 42 &&
		expect_code 124 sbx exec --timeout 1s "$VB" sh -c "setsid sleep 43 & exec sleep 44" &&
		wait_until 10 sh -c "! \"\$SBX\" exec \"$VB\" ps -o args | grep -q \"sleep 4[1-4]\"" &&
		id=$(sbx exec -d "$VB" env -i sleep 45) &&
		wait_until 10 sh -c "\"\$SBX\" exec \"$VB\" ps -o args | grep -q \"sleep 45\"" &&
		sbx kill "$VB" "$id"
	'

	_verbs_check preview 'preview: refused without its token, served with it, closed' '
		sbx create --name "$VB-pv" "${VERBS_CREATE[@]}" $VERBS_PREVIEW_CREATE >/dev/null &&
		sbx exec "$VB-pv" sh -c "mkdir -p $VERBS_DIR/vb-www && echo vb-preview >$VERBS_DIR/vb-www/index.html" &&
		sbx exec -d "$VB-pv" httpd -f -p 8080 -h "$VERBS_DIR/vb-www" >/dev/null &&
		$VERBS_PREVIEW_IN "$SBX" preview --json "$VB-pv" 8080 >pv.json &&
		$VERBS_PREVIEW_IN "$TEST_PYTHON" - pv.json >fetch.out <<-\EOF &&
		import http.client, json, sys, time, urllib.parse
		p = json.load(open(sys.argv[1]))
		u = urllib.parse.urlsplit(p["url"])
		def get(path, headers={}):
		    for _ in range(100):
		        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
		        c.request("GET", path, headers=headers)
		        r = c.getresponse()
		        body = r.read()
		        if r.status != 502:
		            return r, body
		        time.sleep(0.2)  # the server inside is starting
		    return r, body
		r, _ = get("/index.html")
		print("none", r.status)
		r, b = get("/index.html", {"X-Sbx-Preview-Token": p["token"]})
		print("header", r.status, b.decode().strip())
		r, _ = get("/index.html?sbx_token=" + p["token"])
		print("query", r.status, r.getheader("Location"))
		cookie = r.getheader("Set-Cookie").split(";")[0]
		r, b = get("/index.html", {"Cookie": cookie})
		print("cookie", r.status, b.decode().strip())
		EOF
		test_eq "none 401
header 200 vb-preview
query 302 /index.html
cookie 200 vb-preview" "$(cat fetch.out)" &&
		sbx preview --json "$VB-pv" >list.json &&
		json_assert list.json "assert [x[\"port\"] for x in r] == [8080], r" &&
		sbx preview --rm "$VB-pv" 8080 &&
		test_eq "[]" "$(sbx preview --json "$VB-pv" | tr -d " \n")" &&
		expect_code 1 $VERBS_PREVIEW_IN "$TEST_PYTHON" -c "import json, socket, sys, urllib.parse
u = urllib.parse.urlsplit(json.load(open(sys.argv[1]))[\"url\"])
try:
    socket.create_connection((u.hostname, u.port), timeout=5)
except OSError:
    sys.exit(1)" pv.json &&
		sbx rm -f "$VB-pv" >/dev/null
	'

	_verbs_check streams 'stdout and stderr apart' '
		sbx exec "$VB" sh -c "echo out; echo err >&2; echo out2" >out 2>err &&
		test_eq "out
out2" "$(cat out)" && test_eq err "$(cat err)"
	'

	_verbs_check stdin 'exec -i: stdin to its end-of-file, byte-exact' '
		printf "l1\nl2\n" | sbx exec -i "$VB" wc -l >out && test_eq 2 "$(tr -d " " <out)" &&
		head -c 1048576 /dev/urandom >in.bin &&
		sbx exec -i "$VB" cat <in.bin >out.bin && cmp in.bin out.bin &&
		expect_code 0 sbx exec -i "$VB" cat </dev/null >out && test ! -s out
	'

	_verbs_check binary 'binary output byte-exact' '
		sbx exec "$VB" sh -c "printf \"\\000\\001\\377a\"" >out &&
		test_eq "00 01 ff 61" "$(od -An -tx1 out | tr -s " " | sed "s/^ //; s/ $//")"
	'

	_verbs_check env-cwd 'exec -e and -w' '
		sbx exec -e VB_A=one -e "VB_B=two words" -w "$VERBS_DIR" "$VB" \
			sh -c "echo \$VB_A; echo \$VB_B; pwd" >out &&
		test_eq "one
two words
$VERBS_DIR" "$(cat out)"
	'

	_verbs_check user 'exec -u' '
		test_eq "$VERBS_USER" "$(sbx exec -u "$VERBS_USER" "$VB" id -u)" &&
		test_eq 0 "$(sbx exec "$VB" id -u)"
	'

	_verbs_check detach 'exec -d returns while the command runs on' '
		sbx exec -d "$VB" sh -c "while [ ! -e $VERBS_DIR/vb-gate ]; do sleep 0.1; done; echo done >$VERBS_DIR/vb-detach" >/dev/null &&
		expect_code 1 sbx exec "$VB" test -e "$VERBS_DIR/vb-detach" &&
		sbx exec "$VB" touch "$VERBS_DIR/vb-gate" &&
		wait_until 20 sbx exec "$VB" test -s "$VERBS_DIR/vb-detach"
	'

	_verbs_check cp 'cp in and out: modes, links, 20 MiB, a tar stream, a missing source' '
		mkdir -p src/sub && printf x >src/f && chmod 750 src/f && ln -s f src/l &&
		printf y >src/sub/g && head -c 20971520 /dev/urandom >src/big &&
		sbx cp src "$VB:$VERBS_DIR/" &&
		test_eq 750 "$(sbx exec "$VB" stat -c %a "$VERBS_DIR/src/f")" &&
		test_eq f "$(sbx exec "$VB" readlink "$VERBS_DIR/src/l")" &&
		test_eq y "$(sbx exec "$VB" cat "$VERBS_DIR/src/sub/g")" &&
		test_eq "$(md5sum <src/big)" "$(sbx exec "$VB" sh -c "md5sum <$VERBS_DIR/src/big")" &&
		sbx cp "$VB:$VERBS_DIR/src" back && cmp src/big back/big &&
		test -L back/l && test_eq f "$(readlink back/l)" &&
		test_eq 750 "$(stat -c %a back/f)" && test_eq y "$(cat back/sub/g)" &&
		sbx cp "$VB:$VERBS_DIR/src/f" one && test_eq x "$(cat one)" &&
		sbx exec "$VB" mkdir -p "$VERBS_DIR/vb-tar" &&
		tar -C src -cf - f sub | sbx cp - "$VB:$VERBS_DIR/vb-tar" &&
		test_eq y "$(sbx exec "$VB" cat "$VERBS_DIR/vb-tar/sub/g")" &&
		expect_code 125 sbx cp "$VB:$VERBS_DIR/vb-missing" x 2>err && test ! -e x &&
		test_eq 1 "$(wc -l <err)"
	'

	_verbs_check pause-memory 'pause freezes a counting process; resume lets it count on' '
		sbx exec -d "$VB" sh -c "i=0; while [ ! -e $VERBS_DIR/vb-stop ]; do i=\$((i+1)); echo \$i >$VERBS_DIR/vb-n.tmp; mv $VERBS_DIR/vb-n.tmp $VERBS_DIR/vb-n; done" >/dev/null &&
		wait_until 20 sbx exec "$VB" test -s "$VERBS_DIR/vb-n" &&
		a=$(sbx exec "$VB" cat "$VERBS_DIR/vb-n") && sleep 0.3 &&
		b=$(sbx exec "$VB" cat "$VERBS_DIR/vb-n") && test_ne "$a" "$b" "the count before pause" &&
		sbx pause "$VB" >/dev/null && test_eq paused "$(sb_state "$VB")" &&
		if [ "$VERBS_PAUSED_CP" = 1 ]; then
			sbx cp "$VB:$VERBS_DIR/vb-n" c1 && sleep 0.5 && sbx cp "$VB:$VERBS_DIR/vb-n" c2 &&
			test_eq "$(cat c1)" "$(cat c2)" "the count while paused"
		else
			echo "$b" >c1
		fi &&
		sbx resume "$VB" >/dev/null && test_eq running "$(sb_state "$VB")" &&
		c=$(sbx exec "$VB" cat "$VERBS_DIR/vb-n") &&
		test "$c" -ge "$(cat c1)" || { echo "the count went back: $c after $(cat c1)"; false; } &&
		wait_until 20 sh -c "test \"\$(\"$SBX\" exec \"$VB\" cat $VERBS_DIR/vb-n)\" != \"$c\"" &&
		sbx exec "$VB" touch "$VERBS_DIR/vb-stop"
	'

	_verbs_check release 'pause --release keeps the files; resume runs again' '
		sbx exec "$VB" sh -c "echo kept >$VERBS_DIR/vb-kept" &&
		sbx pause --release "$VB" >/dev/null &&
		test_match "^($VERBS_RELEASED)$" "$(sb_state "$VB")" &&
		expect_code 125 sbx exec "$VB" true 2>err && test_eq 1 "$(wc -l <err)" &&
		sbx resume "$VB" >/dev/null && test_eq running "$(sb_state "$VB")" &&
		test_eq kept "$(sbx exec "$VB" cat "$VERBS_DIR/vb-kept")"
	'

	_verbs_check inspect 'inspect --json and ls --json show it' '
		sbx inspect "$VB" >j &&
		json_assert j "assert r[\"name\"] == \"$VB\" and r[\"state\"] == \"running\", r" &&
		sbx ls --json >l &&
		json_assert l "assert [s[\"state\"] for s in r if s[\"name\"] == \"$VB\"] == [\"running\"], r"
	'

	_verbs_check rm 'rm: gone' '
		sbx rm -f "$VB" >/dev/null &&
		expect_code 125 sbx inspect "$VB" 2>err && test_eq 1 "$(wc -l <err)" &&
		sbx ls --json >l && json_assert l "assert not [s for s in r if s[\"name\"] == \"$VB\"], r"
	'
}
