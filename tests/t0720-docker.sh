#!/bin/bash
# The docker provider against a real, private Docker Engine (tests/helpers/dockerd.sh): the
# shared verb checks, and what is Docker's own: labels and limits the daemon shows, --net none
# without eth0, --net open with a published --port, --runtime and --image refusals, an image
# loaded from sbx's store, DOCKER_HOST over tcp://, exec -t, an unreachable daemon, and the
# daemon going away during an exec (125, the store intact).
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
. "$TEST_DIR/helpers/dockerd.sh"

if [ "$(id -u)" -ne 0 ]; then
	TEST_SKIP_ALL="needs a private dockerd, which runs as root"
elif ! dockerd_start "$TRASH/dockerd"; then
	TEST_SKIP_ALL=$DOCKERD_WHY
fi
MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
export SBX_DOCKER_NETWORK=sbxnet

# inside the daemon's network namespace (where published ports listen)
in_daemon_net() { nsenter --net="/proc/$DOCKERD_PID/ns/net" "$@"; }

# the names of the sandboxes in the store, sorted
names() { sbx ls --json | "$TEST_PYTHON" -c 'import json,sys; print("\n".join(sorted(x["name"] for x in json.load(sys.stdin))))'; }

# the container behind a sandbox
cid() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

test_expect_success 'set-up: a busybox image in sbx store, a network of the daemon' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	sbx image import base.tar >/dev/null &&
	expect_code 1 dkr image inspect base:1 >/dev/null 2>&1 &&
	dkr network create sbxnet >/dev/null
'

test_expect_success 'provider ls: docker configured, DOCKER_HOST as its API; unreachable: one line' '
	sbx provider ls --json >p.json &&
	json_assert p.json "d = [p for p in r if p[\"name\"] == \"docker\"][0]
assert d[\"configured\"] and d[\"api_url\"] == \"$DOCKER_HOST\", d
assert d[\"runtimes\"] == [\"*\"], d" &&
	expect_code 125 env DOCKER_HOST="unix://$TRASH/none.sock" "$SBX" create --provider docker \
		--image base:1 2>err &&
	expect_one_error_line err "cannot reach the Docker daemon at unix://$TRASH/none.sock: .*DOCKER_HOST" &&
	test -z "$(sbx ls -q)" &&
	expect_code 125 env DOCKER_HOST=ftp://x "$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "invalid DOCKER_HOST" && test -z "$(sbx ls -q)"
'

test_expect_success 'create: the image loaded from sbx store; labels, limits, name, hostname' '
	sbx create --provider docker --image base:1 --name lim --label team=blue --memory 64m \
		--cpus 0.5 --pids-limit 50 --hostname h1 -e FOO=bar -w /tmp >/dev/null &&
	dkr image inspect base:1 >/dev/null &&
	c=$(cid lim) && dkr inspect "$c" >di.json &&
	json_assert di.json "c = r[0]
l = c[\"Config\"][\"Labels\"]
assert l[\"team\"] == \"blue\" and l[\"sbx.name\"] == \"lim\" and l[\"sbx.managed\"] == \"1\", l
assert len(l[\"sbx.id\"]) == 12, l
h = c[\"HostConfig\"]
assert h[\"Memory\"] == 64 << 20 and h[\"NanoCpus\"] == 500000000 and h[\"PidsLimit\"] == 50, h
assert h[\"NetworkMode\"] == \"none\", h
assert c[\"Name\"] == \"/sbx-\" + l[\"sbx.id\"], c[\"Name\"]
assert c[\"Config\"][\"Hostname\"] == \"h1\"" &&
	test_eq "bar /tmp h1" "$(sbx exec lim sh -c "echo \$FOO \$(pwd) \$(hostname)")"
'

test_expect_success '--net none (the default, also without --net): no eth0; control: --net open has one' '
	test_grep ! eth0 /dev/null &&
	sbx exec lim cat /proc/net/dev >dev && test_grep ! eth0 dev && test_grep lo dev &&
	sbx create --provider docker --image base:1 --name open --net open --port 8080 >/dev/null &&
	sbx exec open cat /proc/net/dev >dev && test_grep eth0 dev
'

test_expect_success '--net allow= refused before anything exists; --port without a network too' '
	expect_code 125 sbx create --provider docker --image base:1 --net allow=example.com 2>err &&
	expect_one_error_line err "provider .docker. does not support --net allow=" &&
	expect_code 125 sbx create --provider docker --image base:1 --port 80 2>err &&
	expect_one_error_line err "add --net open" &&
	test_eq "lim
open" "$(names)" &&
	test_eq 2 "$(dkr ps -aq | wc -l)"
'

test_expect_success 'preview: a published port has a URL that reaches it; an unpublished one is named' '
	sbx exec -d open sh -c "echo hi-from-box >/tmp/index.html; httpd -f -p 8080 -h /tmp" >/dev/null &&
	sbx preview open 8080 >url && test_match "^http://127\.0\.0\.1:[0-9]+/$" "$(cat url)" &&
	wait_until 20 in_daemon_net "$TEST_PYTHON" -c "import urllib.request, sys
assert b\"hi-from-box\" in urllib.request.urlopen(sys.argv[1] + \"index.html\", timeout=5).read()" "$(cat url)" &&
	expect_code 125 sbx preview open 9090 2>err &&
	expect_one_error_line err "port 9090 of .open. is not published: .*--port 9090"
'

test_expect_success '--runtime: an unknown one refused in one line; --image missing: refused' '
	expect_code 125 sbx create --provider docker --image base:1 --runtime nosuchrt 2>err &&
	expect_one_error_line err "nosuchrt" &&
	expect_code 125 sbx create --provider docker 2>err &&
	expect_one_error_line err "provider .docker. needs --image" &&
	expect_code 125 sbx create --provider docker --image sbx-no-such-image:1 2>err &&
	expect_one_error_line err "cannot pull image .sbx-no-such-image:1.: Docker says" &&
	test_eq "lim
open" "$(names)" && test_eq 2 "$(dkr ps -aq | wc -l)"
'

test_expect_success 'exec: the runtime message of a command that cannot start goes to stderr only' '
	expect_code 127 sbx exec lim no-such-cmd >out 2>err && test ! -s out &&
	expect_one_error_line err "no-such-cmd.: command not found" &&
	expect_code 126 sbx exec lim /etc/passwd >out 2>err && test ! -s out &&
	expect_one_error_line err "permission denied" &&
	sbx exec lim echo control >out && test_eq control "$(cat out)"
'

test_expect_success 'exec -d: ps, logs, wait, kill by the exec id; another exec of the box untouched' '
	id=$(sbx exec -d lim sh -c "echo hi; echo err >&2; sleep 1; exit 3") &&
	test_match "^[0-9a-f]{64}$" "$id" &&
	sbx ps lim >ps && test_grep "$id" ps &&
	expect_code 3 sbx wait lim "$id" &&
	sbx logs lim "$id" >log && test_eq "hi
err" "$(cat log)" &&
	id2=$(sbx exec -d lim sh -c "while :; do sleep 0.2; done") &&
	sbx exec -d lim sh -c "sleep 30" >/dev/null &&
	sbx kill lim "$id2" && expect_code 137 sbx wait lim "$id2" &&
	sbx exec lim ps >ps && test_grep "sleep 30" ps &&
	expect_code 125 sbx wait lim 0123 2>err && expect_one_error_line err "no exec .0123."
'

test_expect_success 'an interrupted exec: the command gets the signal (130); control: it runs on otherwise' '
	"$SBX" exec lim sh -c "echo started; sleep 31" >out 2>err &
	pid=$! &&
	wait_until 20 grep -q started out &&
	sbx exec lim ps >ps && test_grep "sleep 31" ps &&
	kill -INT "$pid" && { wait "$pid"; test_eq 130 $?; } &&
	sbx exec lim ps >ps && test_grep ! "sleep 31" ps
'

test_expect_success 'exec -t: a terminal inside, of the caller window size' '
	"$TEST_PYTHON" - "$SBX" lim >tty.out <<-\EOF &&
	import fcntl, os, pty, struct, sys, termios
	pid, fd = pty.fork()
	if pid == 0:
	    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
	    os.execv(sys.argv[1], [sys.argv[1], "exec", "-t", sys.argv[2], "sh", "-c",
	             "until [ \"$(stty size 2>/dev/null)\" = \"33 111\" ]; do sleep 0.1; done; echo sized; tty; exit 7"])
	out = b""
	while True:
	    try:
	        b = os.read(fd, 4096)
	    except OSError:
	        break
	    if not b:
	        break
	    out += b
	_, st = os.waitpid(pid, 0)
	sys.stdout.write(out.decode(errors="replace"))
	print("status", os.waitstatus_to_exitcode(st))
	EOF
	test_grep "^sized" tty.out && test_grep "/dev/pts/" tty.out && test_grep "status 7" tty.out
'

# fwd_start NAME PORT [CERT KEY CA]: 127.0.0.1:PORT forwarded to the daemon's socket, plain or
# TLS that requires a client certificate CA signed (its pid in NAME.pid)
fwd_start() {
	"$TEST_PYTHON" - "$2" "${DOCKER_HOST#unix://}" "${@:3}" >"$1.log" 2>&1 <<-\EOF &
	import socket, ssl, sys, threading
	ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(16)
	ctx = None
	if len(sys.argv) > 3:
	    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
	    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
	    ctx.load_verify_locations(sys.argv[5]); ctx.verify_mode = ssl.CERT_REQUIRED
	def pipe(a, b):
	    try:
	        while True:
	            d = a.recv(65536)
	            if not d:
	                break
	            b.sendall(d)
	        b.shutdown(socket.SHUT_WR)
	    except (OSError, ssl.SSLError):
	        pass
	def serve(c):
	    try:
	        if ctx:
	            c = ctx.wrap_socket(c, server_side=True)
	    except (OSError, ssl.SSLError):
	        c.close()
	        return
	    u = socket.socket(socket.AF_UNIX); u.connect(sys.argv[2])
	    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
	    pipe(u, c)
	while True:
	    c, _ = ls.accept()
	    threading.Thread(target=serve, args=(c,), daemon=True).start()
	EOF
	echo $! >"$1.pid"
	test_atexit "stop_pid $!"
	wait_until 20 "$TEST_PYTHON" -c "import socket; socket.create_connection((\"127.0.0.1\", $2))"
}

if [ -z "$TEST_SKIP_ALL" ]; then
	FWD_PORT=$(free_port) && fwd_start "$TRASH/fwd" "$FWD_PORT"
	TLS_PORT=$(free_port)
	(
		cd "$TRASH" && mkdir certs && cd certs &&
			k=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes) &&
			openssl req -x509 "${k[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=sbx-test-ca \
				-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign &&
			openssl req -new "${k[@]}" -keyout srv.key -out srv.csr -subj /CN=dockerd &&
			printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >srv.ext &&
			openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-out srv.pem -extfile srv.ext &&
			openssl req -new "${k[@]}" -keyout key.pem -out cli.csr -subj /CN=client &&
			printf 'extendedKeyUsage=clientAuth\n' >cli.ext &&
			openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-out cert.pem -extfile cli.ext
	) >"$TRASH/openssl.log" 2>&1 &&
		fwd_start "$TRASH/tls" "$TLS_PORT" "$TRASH/certs/srv.pem" "$TRASH/certs/srv.key" \
			"$TRASH/certs/ca.pem"
fi

test_expect_success 'DOCKER_HOST=tcp://127.0.0.1:PORT (plain): a sandbox made and used through it' '
	DOCKER_HOST=tcp://127.0.0.1:$FWD_PORT "$SBX" create --provider docker --image base:1 --name viatcp >/dev/null &&
	sbx inspect viatcp >j && json_assert j "assert r[\"extra\"][\"docker_host\"] == \"tcp://127.0.0.1:$FWD_PORT\", r" &&
	printf abc | sbx exec -i viatcp sh -c "cat; echo; echo e >&2" >out 2>err &&
	test_eq abc "$(cat out)" && test_eq e "$(cat err)" &&
	sbx rm -f viatcp >/dev/null
'

test_expect_success '--volume: a host path bound from a daemon on this host; refused through tcp://' '
	mkdir vol && echo from-host >vol/f &&
	expect_code 125 env DOCKER_HOST=tcp://127.0.0.1:$FWD_PORT "$SBX" create --provider docker \
		--image base:1 -v "$TRASH/vol:/vol" 2>err &&
	expect_one_error_line err "takes --volume only from a daemon on this host" &&
	test_eq "lim
open" "$(names)" &&
	sbx create --provider docker --image base:1 --name withvol -v "$TRASH/vol:/vol:ro" >/dev/null &&
	test_eq from-host "$(sbx exec withvol cat /vol/f)" &&
	expect_code 1 sbx exec withvol sh -c "echo x >/vol/g" 2>/dev/null && test ! -e vol/g &&
	sbx rm -f withvol >/dev/null
'

test_expect_success 'DOCKER_HOST=tcp:// with DOCKER_TLS_VERIFY: the CA and client certificate of DOCKER_CERT_PATH' '
	export DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$TRASH/certs &&
	DOCKER_HOST=tcp://127.0.0.1:$TLS_PORT "$SBX" create --provider docker --image base:1 --name viatls >/dev/null &&
	sbx exec viatls sh -c "echo o; echo e >&2; exit 4" >out 2>err; test_eq 4 $? &&
	test_eq o "$(cat out)" && test_eq e "$(cat err)" &&
	sbx cp viatls:/etc/passwd pw && test_grep ^root: pw &&
	printf abc | sbx exec -i viatls cat >out && test_eq abc "$(cat out)" &&
	mkdir nokey && cp certs/ca.pem certs/cert.pem nokey/ &&
	expect_code 125 env DOCKER_CERT_PATH=$TRASH/nokey DOCKER_HOST=tcp://127.0.0.1:$TLS_PORT \
		"$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "Docker daemon at tcp://127.0.0.1:$TLS_PORT" &&
	mkdir otherca && (cd otherca && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-nodes -keyout k -out ca.pem -days 2 -subj /CN=other) >/dev/null 2>&1 &&
	cp certs/cert.pem certs/key.pem otherca/ &&
	expect_code 125 env DOCKER_CERT_PATH=$TRASH/otherca DOCKER_HOST=tcp://127.0.0.1:$TLS_PORT \
		"$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "tcp://127.0.0.1:$TLS_PORT" &&
	test_eq "lim
open
viatls" "$(names)" &&
	sbx rm -f viatls >/dev/null
'

test_expect_success 'ls and inspect: states as the daemon has them; a container removed behind sbx is missing' '
	sbx create --provider docker --image base:1 --name gone >/dev/null &&
	dkr rm -f "$(cid gone)" >/dev/null &&
	test_eq missing "$(sb_state gone)" &&
	sbx ls --json >l &&
	json_assert l "s = {x[\"name\"]: x[\"state\"] for x in r}
assert s[\"gone\"] == \"missing\" and s[\"lim\"] == \"running\", s" &&
	sbx rm -f gone >/dev/null
'

# the shared verb checks (tests/helpers/verbs.sh); a stop sbx made shows released
VERBS_SKIP=
VERBS_RELEASED=released
verbs_suite docker --provider docker --image base:1

test_expect_success 'rm: the container is gone from the daemon too' '
	c=$(cid lim) && sbx rm -f lim open >/dev/null &&
	expect_code 1 dkr inspect "$c" >/dev/null 2>&1 &&
	test -z "$(dkr ps -aq)" && test -z "$(sbx ls -q)"
'

# (Podman's Docker-compatible service runs the same checks in t0721)

test_expect_success 'the daemon going away during an exec: 125, one line, the store intact' '
	sbx create --provider docker --image base:1 --name last >/dev/null &&
	{ sbx exec last sh -c "echo started; sleep 20" >out 2>err; echo $? >rc; } &
	wait_until 20 grep -q started out &&
	kill -TERM "$DOCKERD_PID" && wait_until 30 sh -c "! kill -0 $DOCKERD_PID" &&
	wait_until 20 test -s rc &&
	test_eq 125 "$(cat rc)" && test_eq 1 "$(wc -l <err)" && test_grep "Docker" err &&
	sbx ls --json >l && json_assert l "assert [x[\"name\"] for x in r] == [\"last\"], r" &&
	sbx inspect last >j
'

test_done
