#!/bin/bash
# The docker provider against a real, private Docker Engine (tests/helpers/dockerd.sh): the
# shared verb checks (with runc, and with gVisor's runsc as the daemon's runtime), and what is
# Docker's own: labels and limits the daemon shows, --net none without eth0, --net open with a
# published --port previewed through sbx's forwarder and its token (over the unix socket and
# over tcp://), --runtime and --image refusals, arguments that are not UTF-8 refused, an image
# loaded from sbx's store and one pulled from a registry (its progress), DOCKER_HOST over
# tcp:// (plain through a forwarder, TLS through a proxy and to dockerd's own --tlsverify
# listener), exec -t and a resize, ls from one listing per daemon (a container removed behind
# sbx, a daemon gone), an unreachable daemon, and the daemon going away during an exec (125,
# the store intact).
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
. "$TEST_DIR/helpers/dockerd.sh"
. "$TEST_DIR/helpers/registry.sh"

# a CA, a certificate for 127.0.0.1 (the daemon's, and the TLS proxy's), a client's (in
# certs: DOCKER_CERT_PATH's names), another CA
make_certs() {
	mkdir -p "$TRASH/certs" && cd "$TRASH/certs" &&
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
			-out cert.pem -extfile cli.ext &&
		mkdir ../otherca && cd ../otherca &&
		openssl req -x509 "${k[@]}" -keyout k -out ca.pem -days 2 -subj /CN=other &&
		cp ../certs/cert.pem ../certs/key.pem . && cd "$TRASH" || return 1
} >"$TRASH/openssl.log" 2>&1

if [ "$(id -u)" -ne 0 ]; then
	TEST_SKIP_ALL="needs a private dockerd, which runs as root"
elif ! make_certs; then
	TEST_SKIP_ALL="openssl could not make the test's certificates: $(tail -n 2 "$TRASH/openssl.log")"
else
	# dockerd's own TLS listener, in its network namespace
	DTLS_PORT=$(free_port)
	DOCKERD_TLS="$DTLS_PORT $TRASH/certs/ca.pem $TRASH/certs/srv.pem $TRASH/certs/srv.key"
	if ! dockerd_start "$TRASH/dockerd"; then
		TEST_SKIP_ALL=$DOCKERD_WHY
	fi
fi
MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
export SBX_DOCKER_NETWORK=sbxnet

# inside the daemon's network namespace (where published ports and its TLS listener are)
in_daemon_net() { nsenter --net="/proc/$DOCKERD_PID/ns/net" "$@"; }

# sbx against dockerd's TLS listener, with the test's client certificate
dtls() {
	in_daemon_net env DOCKER_HOST="tcp://127.0.0.1:$DTLS_PORT" DOCKER_TLS_VERIFY=1 \
		DOCKER_CERT_PATH="$TRASH/certs" "$SBX" "$@"
}

# the names of the sandboxes in the store, sorted
names() { sbx ls --json | "$TEST_PYTHON" -c 'import json,sys; print("\n".join(sorted(x["name"] for x in json.load(sys.stdin))))'; }

# the container behind a sandbox
cid() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

# fetch URL [TOKEN]: "STATUS BODY" of a GET in the daemon's network (the token as a header)
fetch() {
	in_daemon_net "$TEST_PYTHON" - "$@" <<-\EOF
	import sys, urllib.error, urllib.request
	q = urllib.request.Request(sys.argv[1])
	if len(sys.argv) > 2:
	    q.add_header("X-Sbx-Preview-Token", sys.argv[2])
	try:
	    r = urllib.request.urlopen(q, timeout=10)
	    print(r.status, r.read().decode().strip())
	except urllib.error.HTTPError as e:
	    print(e.code, e.read().decode().strip())
	EOF
}

# fetch_until SECS ERE URL [TOKEN]: fetch's answer matches ERE within SECS seconds
fetch_until() {
	local n=$(($1 * 5)) re=$2 out=
	shift 2
	while [ "$n" -gt 0 ]; do
		out=$(fetch "$@") && printf '%s\n' "$out" | grep -Eq "$re" && return 0
		sleep 0.2
		n=$((n - 1))
	done
	say "fetch_until: $1 answered '$out', not '$re'" >&2
	return 1
}

# whether a process's command line has the word $1 (a container's containerd shim has its id)
proc_names() {
	local p a
	for p in /proc/[0-9]*; do
		{ mapfile -d '' a <"$p/cmdline"; } 2>/dev/null || continue
		case " ${a[*]} " in *" $1 "*) return 0 ;; esac
	done
	return 1
}

# the field of a preview's JSON
pv() { "$TEST_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }

test_expect_success 'set-up: a busybox image in sbx store, a network of the daemon' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	sbx image import base.tar >/dev/null &&
	expect_code 1 dkr image inspect base:1 >/dev/null 2>&1 &&
	dkr network create sbxnet >/dev/null
'

test_expect_success 'provider ls: docker configured, DOCKER_HOST as its API; unreachable, invalid: one line' '
	sbx provider ls --json >p.json &&
	json_assert p.json "d = [p for p in r if p[\"name\"] == \"docker\"][0]
assert d[\"configured\"] and d[\"api_url\"] == \"$DOCKER_HOST\", d
assert d[\"runtimes\"] == [\"*\"], d" &&
	expect_code 125 env DOCKER_HOST="unix://$TRASH/none.sock" "$SBX" create --provider docker \
		--image base:1 2>err &&
	expect_one_error_line err "cannot reach the Docker daemon at unix://$TRASH/none.sock: .*DOCKER_HOST" &&
	test -z "$(sbx ls -q)" &&
	expect_code 125 env DOCKER_HOST=ftp://x "$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "invalid DOCKER_HOST .ftp://x.: use unix:///PATH, tcp://HOST:PORT or ssh://\[USER@\]HOST\[:PORT\]$" &&
	test -z "$(sbx ls -q)"
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

test_expect_success 'arguments, variables, -w that are not UTF-8: refused in one line naming them; control: UTF-8 goes through' '
	expect_code 125 sbx exec lim printf "%s|" "$(printf "a\377b")" x y >out 2>err &&
	expect_one_error_line err "argument 2 of the command .a\\\\xffb. is not valid UTF-8" &&
	test ! -s out &&
	expect_code 125 sbx exec -e "B=$(printf "\377")" lim true 2>err &&
	expect_one_error_line err "variable 1 of exec -e .B=\\\\xff. is not valid UTF-8" &&
	expect_code 125 sbx exec -w "/$(printf "\377")" lim true 2>err &&
	expect_one_error_line err "^sbx: error: -w ./\\\\xff. is not valid UTF-8" &&
	expect_code 125 sbx exec -d lim echo "$(printf "\377")" 2>err &&
	expect_one_error_line err "argument 1 of the command" &&
	expect_code 125 sbx create --provider docker --image base:1 --name bad8 \
		-e "A=$(printf "a\377")" 2>err &&
	expect_one_error_line err "variable 1 .A=a\\\\xff. is not valid UTF-8" &&
	expect_code 125 sbx create --provider docker --image base:1 --name bad8 \
		--label "k=$(printf "\377")" 2>err &&
	expect_one_error_line err "label 1 .* is not valid UTF-8" &&
	expect_code 125 sbx inspect bad8 2>/dev/null && test_eq 2 "$(dkr ps -aq | wc -l)" &&
	test_eq "aéb|x|y|" "$(sbx exec lim printf "%s|" "aéb" x y)" &&
	test_eq "é" "$(sbx exec -e "B=é" lim sh -c "echo \$B")"
'

test_expect_success 'preview: sbx forwarder on loopback, with its token: 401 without it, 200 with it; an unpublished port is named' '
	sbx exec -d open sh -c "echo hi-from-box >/tmp/index.html; httpd -f -p 8080 -h /tmp" >/dev/null &&
	in_daemon_net "$SBX" preview --json open 8080 >pv.json &&
	test_match "^http://127\.0\.0\.1:[0-9]+/\?sbx_token=[0-9a-f]{32}$" "$(pv pv.json url)" &&
	json_assert pv.json "assert r[\"auth\"] and not r[\"public\"] and r[\"port\"] == 8080, r
assert r[\"upstream\"].startswith(\"127.0.0.1:\"), r" &&
	base=$(pv pv.json url) && base=${base%%\?*} &&
	fetch_until 20 "^200 hi-from-box$" "${base}index.html" "$(pv pv.json token)" &&
	fetch "${base}index.html" >f && test_grep "^401 sbx: this preview needs its token" f &&
	test_eq "401 " "$(fetch "${base}index.html" 0123456789abcdef0123456789abcdef | cut -c1-4)" &&
	hp=$(pv pv.json upstream) && hp=${hp#127.0.0.1:} &&
	dkr port "$(cid open)" 8080/tcp >port && test_grep -x "127.0.0.1:$hp" port &&
	expect_code 125 sbx preview open 9090 2>err &&
	expect_one_error_line err "port 9090 of .open. is not published: .*--port 9090" &&
	expect_code 125 sbx preview --public open 8080 2>err &&
	expect_one_error_line err "provider .docker. does not support --public"
'

test_expect_success 'preview after a release: the container publishes anew, the same URL finds it' '
	sbx pause --release open >/dev/null && sbx resume open >/dev/null &&
	sbx exec -d open httpd -f -p 8080 -h /tmp >/dev/null &&
	base=$(pv pv.json url) && base=${base%%\?*} &&
	fetch_until 20 "^200 hi-from-box$" "${base}index.html" "$(pv pv.json token)" &&
	sbx exec open sh -c "killall httpd" &&
	fetch_until 20 "^502 sbx: cannot reach port 8080 of the sandbox" "${base}index.html" \
		"$(pv pv.json token)"
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
	expect_code 125 sbx exec -u 1000:vb-no-group lim true >out 2>err && test ! -s out &&
	expect_one_error_line err "cannot run as user .1000:vb-no-group. in sandbox .lim.: unable to find group vb-no-group" &&
	expect_code 125 sbx exec -w /etc/passwd lim true >out 2>err && test ! -s out &&
	expect_one_error_line err "cannot change to directory ./etc/passwd. in sandbox .lim.: not a directory$" &&
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

test_expect_success 'exec -t: a terminal inside, of the caller window size, resized on SIGWINCH' '
	"$TEST_PYTHON" - "$SBX" lim >tty.out <<-\EOF &&
	import fcntl, os, pty, struct, sys, termios, time
	def size(fd, rows, cols):
	    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
	pid, fd = pty.fork()
	if pid == 0:
	    size(0, 33, 111)
	    os.execv(sys.argv[1], [sys.argv[1], "exec", "-t", sys.argv[2], "sh", "-c",
	             "until [ \"$(stty size 2>/dev/null)\" = \"33 111\" ]; do sleep 0.1; done; echo sized; "
	             "until [ \"$(stty size 2>/dev/null)\" = \"40 120\" ]; do sleep 0.1; done; echo resized; "
	             "tty; exit 7"])
	out = b""
	resized = False
	deadline = time.time() + 25
	while time.time() < deadline:
	    try:
	        b = os.read(fd, 4096)
	    except OSError:
	        break
	    if not b:
	        break
	    out += b
	    if b"sized" in out and not resized:
	        size(fd, 40, 120)  # the kernel sends SIGWINCH to sbx, in the foreground
	        resized = True
	_, st = os.waitpid(pid, 0)
	sys.stdout.write(out.decode(errors="replace"))
	print("status", os.waitstatus_to_exitcode(st))
	EOF
	test_grep "^sized" tty.out && test_grep "^resized" tty.out &&
	test_grep "/dev/pts/" tty.out && test_grep "status 7" tty.out
'

# fwd_start NAME PORT [CERT KEY CA]: 127.0.0.1:PORT forwarded to the daemon's socket, plain or
# TLS that requires a client certificate CA signed (its pid in NAME.pid); with FWD_ADDR set,
# that address of the daemon's network namespace instead
fwd_start() {
	${FWD_ADDR:+nsenter --net=/proc/$DOCKERD_PID/ns/net} \
		"$TEST_PYTHON" - "${FWD_ADDR:-127.0.0.1}" "$2" "${DOCKERD_HOST#unix://}" "${@:3}" \
		>"$1.log" 2>&1 <<-\EOF &
	import socket, ssl, sys, threading
	sys.argv.pop(0)
	ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	ls.bind((sys.argv[0], int(sys.argv[1]))); ls.listen(16)
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
	wait_until 20 ${FWD_ADDR:+nsenter --net=/proc/$DOCKERD_PID/ns/net} "$TEST_PYTHON" -c \
		"import socket; socket.create_connection((\"${FWD_ADDR:-127.0.0.1}\", $2))"
}

if [ -z "$TEST_SKIP_ALL" ]; then
	FWD_PORT=$(free_port) && fwd_start "$TRASH/fwd" "$FWD_PORT"
	TLS_PORT=$(free_port) && fwd_start "$TRASH/tls" "$TLS_PORT" "$TRASH/certs/srv.pem" \
		"$TRASH/certs/srv.key" "$TRASH/certs/ca.pem"
	# an address that is not loopback, in the daemon's network namespace (the test's own)
	FAR=192.0.2.7
	in_daemon_net ip addr add "$FAR/32" dev lo &&
		FAR_PORT=$(free_port) && FWD_ADDR=$FAR fwd_start "$TRASH/far" "$FAR_PORT"
fi

test_expect_success 'DOCKER_HOST=tcp://127.0.0.1:PORT (plain): a sandbox made and used through it' '
	DOCKER_HOST=tcp://127.0.0.1:$FWD_PORT "$SBX" create --provider docker --image base:1 --name viatcp >/dev/null &&
	sbx inspect viatcp >j && json_assert j "assert r[\"extra\"][\"docker_host\"] == \"tcp://127.0.0.1:$FWD_PORT\", r" &&
	printf abc | sbx exec -i viatcp sh -c "cat; echo; echo e >&2" >out 2>err &&
	test_eq abc "$(cat out)" && test_eq e "$(cat err)"
'

test_expect_success '--port from a tcp:// daemon elsewhere: refused in one line, nothing made; control: without --port' '
	expect_code 125 in_daemon_net env DOCKER_HOST="tcp://$FAR:$FAR_PORT" "$SBX" create \
		--provider docker --image base:1 --net open --port 8080 --name far 2>err &&
	expect_one_error_line err "publishes --port on the loopback of the daemon.s host, which tcp://$FAR:$FAR_PORT does not reach from here: use DOCKER_HOST=ssh://" &&
	expect_code 125 sbx inspect far 2>/dev/null && test_eq 3 "$(dkr ps -aq | wc -l)" &&
	in_daemon_net env DOCKER_HOST="tcp://$FAR:$FAR_PORT" "$SBX" create --provider docker \
		--image base:1 --net open --name far >/dev/null &&
	in_daemon_net "$SBX" rm -f far >/dev/null
'

test_expect_success '--volume: a host path bound from a daemon on this host; refused through tcp://' '
	mkdir vol && echo from-host >vol/f &&
	expect_code 125 env DOCKER_HOST=tcp://127.0.0.1:$FWD_PORT "$SBX" create --provider docker \
		--image base:1 -v "$TRASH/vol:/vol" 2>err &&
	expect_one_error_line err "takes --volume only from a daemon on this host" &&
	test_eq "lim
open
viatcp" "$(names)" &&
	sbx create --provider docker --image base:1 --name withvol -v "$TRASH/vol:/vol:ro" >/dev/null &&
	test_eq from-host "$(sbx exec withvol cat /vol/f)" &&
	expect_code 1 sbx exec withvol sh -c "echo x >/vol/g" 2>/dev/null && test ! -e vol/g &&
	sbx rm -f withvol >/dev/null
'

test_expect_success 'DOCKER_HOST=tcp:// with DOCKER_TLS_VERIFY (a TLS proxy): the CA and client certificate of DOCKER_CERT_PATH' '
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
	expect_code 125 env DOCKER_CERT_PATH=$TRASH/otherca DOCKER_HOST=tcp://127.0.0.1:$TLS_PORT \
		"$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "tcp://127.0.0.1:$TLS_PORT" &&
	test_eq "lim
open
viatcp
viatls" "$(names)" &&
	sbx rm -f viatls >/dev/null
'

test_expect_success 'dockerd own --tlsverify listener: create, exec with stdin to its end, cp both ways, a preview; refusals' '
	dtls create --provider docker --image base:1 --name dtls --net open --port 8080 >/dev/null &&
	sbx inspect dtls >j && json_assert j "assert r[\"extra\"][\"docker_host\"] == \"tcp://127.0.0.1:$DTLS_PORT\", r" &&
	printf abc | dtls exec -i dtls sh -c "cat; echo :end" >out && test_eq "abc:end" "$(cat out)" &&
	head -c 300000 /dev/urandom >in.bin && dtls exec -i dtls cat <in.bin >out.bin && cmp in.bin out.bin &&
	{ dtls exec dtls sh -c "echo o; echo e >&2; exit 4" >out 2>err; test_eq 4 $?; } &&
	test_eq o "$(cat out)" && test_eq e "$(cat err)" &&
	mkdir -p tin/sub && echo in >tin/sub/f && ln -s sub/f tin/l &&
	dtls cp tin dtls:/tmp/ && test_eq in "$(dtls exec dtls cat /tmp/tin/l)" &&
	dtls cp dtls:/tmp/tin tout && test_eq in "$(cat tout/sub/f)" && test -L tout/l &&
	dtls exec -d dtls sh -c "echo tls-box >/tmp/index.html; httpd -f -p 8080 -h /tmp" >/dev/null &&
	dtls preview --json dtls 8080 >dpv.json &&
	base=$(pv dpv.json url) && base=${base%%\?*} &&
	fetch_until 20 "^200 tls-box$" "${base}index.html" "$(pv dpv.json token)" &&
	test_eq 401 "$(fetch "${base}index.html" | cut -d" " -f1)" &&
	expect_code 125 in_daemon_net env DOCKER_HOST="tcp://127.0.0.1:$DTLS_PORT" DOCKER_TLS_VERIFY=1 \
		DOCKER_CERT_PATH="$TRASH/nokey" "$SBX" create --provider docker --image base:1 2>err &&
	expect_one_error_line err "Docker daemon at tcp://127.0.0.1:$DTLS_PORT" &&
	expect_code 125 in_daemon_net env DOCKER_HOST="tcp://127.0.0.1:$DTLS_PORT" \
		"$SBX" create --provider docker --image base:1 2>err &&
	test_eq 1 "$(wc -l <err)" &&
	dtls rm -f dtls >/dev/null && expect_code 125 sbx inspect dtls 2>/dev/null
'

test_expect_success 'ls: one listing per daemon (states from the daemon, sbx containers by their labels), no lookup per sandbox' '
	sbx pause lim >/dev/null &&
	SBX_DEBUG=1 sbx ls --json >l 2>dbg &&
	json_assert l "s = {x[\"name\"]: x[\"state\"] for x in r}
assert s == {\"lim\": \"paused\", \"open\": \"running\", \"viatcp\": \"running\"}, s" &&
	test_eq 2 "$(grep -c "GET http://[^ ]*/containers/json?all=1&filters=" dbg)" &&
	test_grep ! -E "/containers/[0-9a-f]{64}/json" dbg &&
	sbx resume lim >/dev/null &&
	sbx inspect lim >j &&
	json_assert j "l = r[\"remote\"][\"labels\"]
assert l[\"sbx.id\"] == r[\"id\"] and l[\"sbx.name\"] == \"lim\" and l[\"sbx.managed\"] == \"1\", l"
'

test_expect_success 'ls and inspect: a container removed behind sbx is missing' '
	sbx create --provider docker --image base:1 --name gone >/dev/null &&
	dkr rm -f "$(cid gone)" >/dev/null &&
	test_eq missing "$(sb_state gone)" &&
	sbx ls --json >l 2>err && test ! -s err &&
	json_assert l "s = {x[\"name\"]: x[\"state\"] for x in r}
assert s[\"gone\"] == \"missing\" and s[\"lim\"] == \"running\", s" &&
	sbx ls >lt && test_grep -E "^[0-9a-f]+ +gone +docker +missing" lt &&
	sbx rm -f gone >/dev/null
'

test_expect_success 'ls: a daemon that cannot be reached: a warning naming it, its sandboxes as last seen; the others fresh' '
	stop_pid "$(cat "$TRASH/fwd.pid")" &&
	sbx ls >lt 2>err && test_eq 1 "$(wc -l <err)" &&
	test_grep "^sbx: warning: cannot list docker sandboxes on tcp://127.0.0.1:$FWD_PORT, showing their states as last seen: " err &&
	test_grep -E "^[0-9a-f]+ +viatcp +docker +running" lt &&
	test_grep -E "^[0-9a-f]+ +lim +docker +running" lt &&
	fwd_start "$TRASH/fwd2" "$FWD_PORT" && sbx rm -f viatcp >/dev/null
	r=$?
	stop_pid "$(cat "$TRASH/fwd2.pid")" # (started in this subshell: stopped here)
	test "$r" = 0 && sbx ls >lt 2>err && test ! -s err
'

# a registry on the loopback of the daemon's network namespace (the image it pulls)
PULLED=
if [ -z "$TEST_SKIP_ALL" ]; then
	REGISTRY_NETNS=$DOCKERD_PID
	registry_start pull && PULLED=127.0.0.1:$REG_PORT/sbx/pulled:1
	REGISTRY_NETNS=
fi

test_expect_success 'create pulls an image from a registry: its steps as plain lines (printable ASCII), a bar on a terminal' '
	test -n "$PULLED" && "${MKIMAGE[@]}" --out oci --tag pulled --preset big --arg 3000000 >/dev/null &&
	REGISTRY_NETNS=$DOCKERD_PID registry_push oci pulled "$PULLED" &&
	sbx create --provider docker --image "$PULLED" --name pulled >id 2>pull.err &&
	test_grep -x "1: Pulling from sbx/pulled" pull.err &&
	test_eq 2 "$(grep -cE "^[0-9a-f]{12}: Pull complete$" pull.err)" &&
	test_eq 2 "$(grep -cE "^[0-9a-f]{12}: Downloading$" pull.err)" &&
	test_grep -E "^Digest: sha256:[0-9a-f]{64}$" pull.err &&
	test_grep -x "Status: Downloaded newer image for $PULLED" pull.err &&
	LC_ALL=C test_grep ! "[^ -~]" pull.err &&
	test_eq 3000000 "$(sbx exec pulled stat -c %s /big)" &&
	sbx rm -f pulled >/dev/null && dkr rmi "$PULLED" >/dev/null &&
	"$TEST_PYTHON" - "$SBX" "$PULLED" >pty.out <<-\EOF &&
	import os, pty, sys
	pid, fd = pty.fork()
	if pid == 0:
	    os.execv(sys.argv[1], [sys.argv[1], "create", "--provider", "docker", "--image",
	             sys.argv[2], "--name", "pulled2"])
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
	sys.stdout.write(repr(out) + "\n")
	print("status", os.waitstatus_to_exitcode(st))
	EOF
	test_grep -E "\\\\rpulling 127\.0\.0\.1:[0-9]+/sbx/pulled:1: 2/2 layers, [0-9.]+/[0-9.]+ MiB" pty.out &&
	test_grep "status 0" pty.out && test_eq running "$(sb_state pulled2)" &&
	sbx rm -f pulled2 >/dev/null
'

test_expect_success 'runsc: --runtime runsc is the container HostConfig.Runtime, its commands run under gVisor; rm of it paused leaves no shim' '
	if [ -z "$DOCKERD_RUNSC" ]; then echo "runsc is missing (scripts/install-deps installs it)"; false; fi &&
	sbx create --provider docker --image base:1 --runtime runsc --name gv >/dev/null &&
	test_eq runsc "$(dkr inspect -f "{{.HostConfig.Runtime}}" "$(cid gv)")" &&
	sbx exec gv sh -c dmesg >dm && test_grep "Starting gVisor" dm &&
	dkr inspect -f "{{range .Mounts}}{{.Destination}} {{end}}" "$(cid gv)" >mounts &&
	test_eq "/tmp " "$(cat mounts)" && echo in-tmp >t && sbx cp t gv:/tmp/t &&
	test_eq in-tmp "$(sbx exec gv cat /tmp/t)" &&
	test_ne "$(cat /proc/version)" "$(sbx exec gv cat /proc/version)" &&
	test_eq "$(cat /proc/version)" "$(sbx exec lim cat /proc/version)" &&
	c=$(cid gv) && proc_names "$c" && sbx pause gv >/dev/null && sbx rm -f gv >/dev/null &&
	for i in $(seq 50); do proc_names "$c" || break; sleep 0.2; done &&
	if proc_names "$c"; then echo "the shim of the removed paused container runs on"; false; fi
'

# the shared verb checks (tests/helpers/verbs.sh); a stop sbx made shows released
VERBS_SKIP=
VERBS_RELEASED=released
VERBS_MORE="start-fail timeout-procs preview"
VERBS_PREVIEW_CREATE="--net open --port 8080"
VERBS_PREVIEW_IN=in_daemon_net
verbs_suite docker --provider docker --image base:1

# and with gVisor as the daemon's runtime: runsc keeps pids of its own, so --timeout finds a
# command's processes by the SBX_EXEC_ID they kept (not after env -i); it loads a script
# whose interpreter is missing as it would a missing file (127)
VERBS_MORE="start-fail"
VERBS_INTERP=127
if [ -z "$TEST_SKIP_ALL" ] && [ -z "${DOCKERD_RUNSC:-}" ]; then
	VERBS_SKIP="exit-codes start-fail streams stdin binary env-cwd user detach cp pause-memory release inspect rm"
	for c in $VERBS_SKIP; do declare "VERBS_WHY_${c//-/_}=runsc is missing (scripts/install-deps installs it)"; done
fi
verbs_suite docker-runsc --provider docker --image base:1 --runtime runsc
VERBS_SKIP=''
VERBS_INTERP=126

test_expect_success 'rm: the container is gone from the daemon too' '
	c=$(cid lim) && sbx rm -f lim open >/dev/null &&
	expect_code 1 dkr inspect "$c" >/dev/null 2>&1 &&
	test -z "$(dkr ps -aq)" && test -z "$(sbx ls -q)"
'

# (Podman's Docker-compatible service runs the same checks in t0721)

test_expect_success 'the daemon going away during an exec: 125, one line, the store intact; ls warns' '
	sbx create --provider docker --image base:1 --name last >/dev/null &&
	{ sbx exec last sh -c "echo started; sleep 20" >out 2>err; echo $? >rc; } &
	wait_until 20 grep -q started out &&
	kill -TERM "$DOCKERD_PID" && wait_until 30 sh -c "! kill -0 $DOCKERD_PID" &&
	wait_until 20 test -s rc &&
	test_eq 125 "$(cat rc)" && test_eq 1 "$(wc -l <err)" && test_grep "Docker" err &&
	sbx ls --json >l 2>err && json_assert l "assert [(x[\"name\"], x[\"state\"]) for x in r] == [(\"last\", \"running\")], r" &&
	expect_one_error_line err "^sbx: warning: cannot list docker sandboxes, showing their states as last seen: cannot reach the Docker daemon at unix://" &&
	sbx ls >lt 2>err && test_grep -E "^[0-9a-f]+ +last +docker +running" lt &&
	expect_one_error_line err "^sbx: warning: cannot list docker sandboxes" &&
	sbx inspect last >j
'

test_done
