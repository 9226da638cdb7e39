#!/bin/bash
# --net none|allow=|open|host: the egress proxy (HTTP, CONNECT, SOCKS5) for curl, git and a raw
# TCP client; refusals (names not allowed, ports, wildcards, private and loopback addresses)
# and their 403 text; --add-host; --host-port; the egress log; direct connections failing.
# The internet is the file's own (tests/helpers/testnet.sh): the whole file runs in a network
# namespace of its own (as another uid, one a user namespace of its own owns), which plays the
# host, and its HTTP, HTTPS and TCP echo servers run in a second namespace behind a veth pair,
# at 192.0.2.2 (TEST-NET-1: neither private nor the host's). Names reach them through
# --add-host NAME:192.0.2.2, so the same cases run as root and as another uid.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl git openssl

HELPERS=$TEST_DIR/helpers
WEB_ADDR=$TN_WEB # where the internet's servers listen, as the sandboxes' --add-host gives it
PEER_ADDR=$TN_HOST # the address their connections come from (the host side)

# a CA and a certificate for every name the tests use
make_certs() {
	local k=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	{
		openssl req -x509 "${k[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=sbx-test-ca \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign &&
			openssl req -new "${k[@]}" -keyout srv.key -out srv.csr -subj /CN=web.test &&
			printf '%s\n' 'subjectAltName=DNS:web.test,DNS:*.zone.test,DNS:zone.test,DNS:any.test,DNS:bad.test' \
				'extendedKeyUsage=serverAuth' >srv.ext &&
			openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-out srv.pem -extfile srv.ext
	} >openssl.log 2>&1
}

# a repository served by dumb HTTP from www/repo.git
make_repo() {
	{
		git init -q -b main src && echo "cloned through the proxy" >src/README &&
			git -C src add README &&
			git -C src -c user.name=t -c user.email=t@example.invalid commit -qm one &&
			mkdir -p www && git clone -q --bare src www/repo.git &&
			git -C www/repo.git update-server-info
	} >git.log 2>&1
}

# ready_port FILE NAME: the port netsrv.py wrote for server NAME
ready_port() { sed -n "s/^$2=//p" "$1"; }

make_certs || { cat openssl.log; exit 1; }
make_repo || { cat git.log; exit 1; }
if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi

# the internet: web (HTTP), alt (HTTP on another port), tls (HTTPS), tcp (echo)
if [ -z "$TEST_SKIP_ALL" ]; then
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$WEB_ADDR" \
		--ready inet.ready --root www --cert srv.pem --key srv.key --lifetime 240 \
		web:http:80 alt:http:8080 tls:https:8443 tcp:echo:7777 2>inet.log
	test_atexit "stop_pid $TN_BG"
	# services on the host's loopback, for --host-port and the loopback refusals
	"$TEST_PYTHON" "$HELPERS/netsrv.py" --bind 127.0.0.1 --ready host.ready --root www \
		--lifetime 240 hp1:http:0 hp2:http:0 hp3:http:0 2>host.log &
	test_atexit "stop_pid $!"
	# an HTTP/1.1 server that keeps connections alive: chunked answers, POST echoed
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/httpka.py" --bind "$WEB_ADDR" --ready ka.ready 2>ka.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s inet.ready
	wait_until 10 test -s host.ready
	wait_until 10 test -s ka.ready
fi
KA=web.test:$(cat ka.ready 2>/dev/null) KALOG=$TRASH/ka.log
HTTP_PORT=$(ready_port inet.ready web) ALT_PORT=$(ready_port inet.ready alt)
HTTPS_PORT=$(ready_port inet.ready tls) TCP_PORT=$(ready_port inet.ready tcp)
HP1=$(ready_port host.ready hp1) HP2=$(ready_port host.ready hp2)
HP3=$(ready_port host.ready hp3)
INET=$TRASH/inet.log HOSTLOG=$TRASH/host.log
WEB=web.test:$HTTP_PORT
ADD=(--add-host "web.test:$WEB_ADDR" --add-host "a.zone.test:$WEB_ADDR"
	--add-host "zone.test:$WEB_ADDR" --add-host "bad.test:$WEB_ADDR")
CURL=(curl -sS --max-time 10)
# a command with curl's ALL_PROXY pointed at the SOCKS5 proxy (SBX_SOCKS_PROXY), and no
# http_proxy, so that curl goes through SOCKS
# shellcheck disable=SC2016 # expanded inside the sandbox
VIA_SOCKS=(sh -c 'exec env -u http_proxy -u HTTP_PROXY -u all_proxy ALL_PROXY="$SBX_SOCKS_PROXY" "$@"' socks)

# refused_403 FILE NAME HINT: FILE (curl -i output) is a 403, text/plain, one line of body
# naming NAME, "refused" and HINT
refused_403() {
	tr -d '\r' <"$1" >"$1.lf"
	sed '1,/^$/d' "$1.lf" >"$1.body"
	if head -n 1 "$1.lf" | grep -Eq '^HTTP/1\.[01] 403' &&
		grep -iq '^content-type: text/plain' "$1.lf" &&
		test "$(grep -c '' "$1.body")" = 1 &&
		grep -qF "$2" "$1.body" && grep -q refused "$1.body" && grep -qF -- "$3" "$1.body"; then
		return 0
	fi
	say "not the 403 wanted (name $2, hint $3):" >&2
	cat "$1" >&2
	return 1
}

# egress_match SB ARGS...: SB's egress log (left in egress.jsonl) passes egress.py match ARGS
egress_match() {
	sbx logs --egress --json "$1" >egress.jsonl && shift &&
		"$TEST_PYTHON" "$HELPERS/egress.py" match egress.jsonl "$@"
}

# egress_wait SB ARGS...: polls (bounded) until egress_match SB ARGS holds; the log if never
egress_wait() {
	wait_until 10 egress_match "$@" || egress_match "$@"
}

# count_lines PATTERN FILE: how many lines of FILE match PATTERN (grep -E)
count_lines() { grep -Ec "$1" "$2" || true; }

# has_lines FILE N: FILE has at least N lines
has_lines() { test "$(grep -c '' "$1" 2>/dev/null)" -ge "$2"; }

say "# the internet: $WEB_ADDR http $HTTP_PORT, alt $ALT_PORT, https $HTTPS_PORT," \
	"tcp $TCP_PORT; the host's 127.0.0.1: $HP1 $HP2 $HP3"

test_expect_success "set-up: the servers answer from the host, which is not where they run" '
	test_ne "" "$HTTP_PORT" && test_ne "" "$HTTPS_PORT" && test_ne "" "$TCP_PORT" && test_ne "" "$HP3" &&
	test_eq "hello from web" "$("${CURL[@]}" "http://$WEB_ADDR:$HTTP_PORT/hello")" &&
	test_eq "hello from alt" "$("${CURL[@]}" "http://$WEB_ADDR:$ALT_PORT/hello")" &&
	test "$("${CURL[@]}" --cacert ca.pem --resolve "web.test:$HTTPS_PORT:$WEB_ADDR" \
		"https://web.test:$HTTPS_PORT/hello")" = "hello from tls" &&
	test_eq "hello from hp1" "$("${CURL[@]}" "http://127.0.0.1:$HP1/hello")" &&
	test_ne "" "$("${CURL[@]}" "http://$WEB_ADDR:$HTTP_PORT/repo.git/info/refs")" &&
	exec 3<>"/dev/tcp/$WEB_ADDR/$TCP_PORT" && echo ping >&3 && read -r -t 5 l <&3 &&
	test_eq ping "$l" &&
	"$TN_IP" -o addr show | test_grep ! -w "$WEB_ADDR"
'

test_expect_success 'create: bad --net, --net-preset, --add-host, --host-port: 125, no sandbox' '
	for args in "--net bogus" "--net allow" "--net-preset maybe" "--add-host nocolon" \
		"--add-host web.test:not-an-address" "--add-host :10.0.0.1" "--host-port 0" \
		"--host-port 70000" "--host-port abc" "--host-port 8080:0" "--host-port 8080:x" \
		"--net none --net-allow-private" "--net host --net-allow-private"; do
		expect_code 125 sbx create $args >out 2>err || { echo "with $args"; exit 1; }
		head -n 1 err | test_grep "^sbx: error: " || { echo "with $args:"; cat err; exit 1; }
		test ! -s out || exit 1
	done &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success '--net none: only lo, no proxy, nothing leaves' '
	sbx create --name none --net none >/dev/null &&
	sbx exec none cat /proc/net/dev >dev &&
	sed -n "3,\$p" dev | cut -d: -f1 | tr -d " " >ifaces && test_eq lo "$(cat ifaces)" &&
	sbx exec none env >env && ! grep -Ei "^(https?|all|no)_proxy=" env &&
	expect_code 7 sbx exec none "${CURL[@]}" -x http://127.0.0.1:3128 "http://$WEB/hello?t=none1" &&
	expect_code 7 sbx exec none "${CURL[@]}" --socks5-hostname 127.0.0.1:1080 "http://$WEB/hello?t=none2" &&
	expect_code 7 sbx exec none "${CURL[@]}" "http://$WEB_ADDR:$HTTP_PORT/hello?t=none3" &&
	expect_code 1 sbx exec none timeout 5 bash -c "exec 3<>/dev/tcp/$WEB_ADDR/$TCP_PORT" &&
	! grep -E "t=none" "$INET"
'

test_expect_success 'allow: every exec gets the proxy variables with its own credential' '
	sbx create --name main --net "allow=web.test,*.zone.test" --net-preset none "${ADD[@]}" \
		>/dev/null &&
	sbx cp ca.pem main:/workspace/ca.pem && sbx cp "$HELPERS/socks.py" main:/workspace/socks.py &&
	sbx exec main env >env1 && sbx exec main env >env2 &&
	id1=$(sed -n "s/^SBX_EXEC_ID=//p" env1) && id2=$(sed -n "s/^SBX_EXEC_ID=//p" env2) &&
	echo "$id1" | test_grep -Ex "[0-9a-f]{12}" && echo "$id2" | test_grep -Ex "[0-9a-f]{12}" &&
	test_ne "$id2" "$id1" &&
	s1=$(sed -n "s|^HTTP_PROXY=http://$id1:\([^@]*\)@127\.0\.0\.1:3128\$|\1|p" env1) &&
	s2=$(sed -n "s|^HTTP_PROXY=http://$id2:\([^@]*\)@127\.0\.0\.1:3128\$|\1|p" env2) &&
	test_ne "" "$s1" && test_ne "" "$s2" && test_ne "$s2" "$s1" &&
	for v in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy; do
		test_grep -x "$v=http://$id1:$s1@127.0.0.1:3128" env1 || { echo "$v:"; cat env1; exit 1; }
	done &&
	test_grep -x "ALL_PROXY=http://$id1:$s1@127.0.0.1:3128" env1 &&
	test_grep -x "all_proxy=http://$id1:$s1@127.0.0.1:3128" env1 &&
	test_grep -x "SBX_SOCKS_PROXY=socks5h://$id1:$s1@127.0.0.1:1080" env1 &&
	test_grep -x "NO_PROXY=localhost,127.0.0.1" env1 && test_grep -x "no_proxy=localhost,127.0.0.1" env1 &&
	test_grep -x "NODE_USE_ENV_PROXY=1" env1 &&
	sbx exec main getent hosts web.test >h && test_eq "$WEB_ADDR" "$(awk "{ print \$1 }" h)" &&
	sbx exec main getent hosts a.zone.test >h && test_eq "$WEB_ADDR" "$(awk "{ print \$1 }" h)"
'

test_expect_success 'allow: plain HTTP through the proxy, dialled from the host side' '
	sbx exec main "${CURL[@]}" "http://$WEB/hello?t=http1" >out &&
	test_eq "hello from web" "$(cat out)" &&
	test_grep -x "web GET /hello?t=http1" "$INET" && test_grep "^web conn $PEER_ADDR:" "$INET"
'

# nconn_web: how many connections the web server has had
nconn_web() { count_lines "^web conn " "$INET"; }

test_expect_success 'keep-alive: requests on one connection to the proxy, the server connection reused' '
	before=$(nconn_web) &&
	ka="curl -sS --max-time 10 -w %{num_connects}\\n http://$WEB/hello?t=ka1 http://$WEB/hello?t=ka2 http://$WEB/hello?t=ka3" &&
	sbx exec main $ka >out &&
	test_eq "hello from web1hello from web0hello from web0" "$(tr -d "\n" <out)" &&
	test_grep -x "web GET /hello?t=ka3" "$INET" &&
	test_eq 1 "$(($(nconn_web) - before <= 1))" && # one at most: it may be a pooled one
	egress_wait main --command "$ka" --proto http --domain web.test --port "$HTTP_PORT" \
		--verdict allow --min-bytes-down 14 --count 3
'

test_expect_success 'keep-alive: another server on the same connection; HEAD then GET' '
	sbx exec main "${CURL[@]}" -w "%{num_connects}\n" "http://$WEB/hello?t=ka4" \
		"http://web.test:$ALT_PORT/hello?t=ka5" >out &&
	test_eq "hello from web1hello from alt0" "$(tr -d "\n" <out)" &&
	sbx exec main "${CURL[@]}" -o /dev/null -w "%{http_code} %{num_connects}\n" -I \
		"http://$WEB/repo.git/info/refs?t=ka6" --next -sS --max-time 10 -w "%{num_connects}\n" \
		"http://$WEB/hello?t=ka7" >out &&
	test_eq "200 1hello from web0" "$(tr -d "\n" <out)"
'

test_expect_success 'keep-alive: pipelined requests answered in order, then a CONNECT on the same connection' '
	sbx cp "$HELPERS/pipeline.py" main:/tmp/pipeline.py >/dev/null &&
	sbx exec main python3 /tmp/pipeline.py "http://$WEB/hello?t=pl1" "http://web.test:$ALT_PORT/hello?t=pl2" \
		"http://$WEB/hello?t=pl3" "connect:web.test:$TCP_PORT" >out &&
	printf "%s\n" "HTTP/1.1 200 OK hello from web" "HTTP/1.1 200 OK hello from alt" \
		"HTTP/1.1 200 OK hello from web" "HTTP/1.1 200 Connection established ping" >want &&
	test_eq "$(cat want)" "$(cat out)"
'

test_expect_success 'keep-alive: HTTP/1.0 and Connection: close end the connection after the answer' '
	sbx exec main "${CURL[@]}" -0 -w "%{num_connects}\n" "http://$WEB/hello?t=ka8" \
		"http://$WEB/hello?t=ka9" >out &&
	test_eq "hello from web1hello from web1" "$(tr -d "\n" <out)" &&
	sbx exec main "${CURL[@]}" -H "Connection: close" -w "%{num_connects}\n" \
		"http://$WEB/hello?t=ka10" "http://$WEB/hello?t=ka11" >out &&
	test_eq "hello from web1hello from web1" "$(tr -d "\n" <out)" &&
	test_grep -x "web GET /hello?t=ka11" "$INET"
'

test_expect_success 'a protocol upgrade through a plain-HTTP request: 501, nothing dialled' '
	expect_code 22 sbx exec main "${CURL[@]}" -f -H "Upgrade: websocket" -H "Connection: Upgrade" \
		"http://$WEB/hello?t=upg" &&
	test_grep ! "t=upg" "$INET"
'

test_expect_success 'keep-alive: chunked answers, chunked and sized request bodies, one server connection' '
	before=$(count_lines "^conn " "$KALOG") &&
	sbx exec main "${CURL[@]}" -o /dev/null -o /dev/null -w "%{size_download} %{num_connects}\n" \
		"http://$KA/chunked?n=300" "http://$KA/chunked?n=3" >out &&
	test_eq "300000 1 3000 0" "$(echo $(cat out))" &&
	sbx exec main sh -c "head -c 200000 /dev/urandom >/tmp/b" &&
	sbx exec main "${CURL[@]}" -H "Transfer-Encoding: chunked" --data-binary @/tmp/b -o /tmp/e1 \
		-w "%{num_connects}\n" "http://$KA/echo" --next -sS --max-time 10 --data-binary @/tmp/b \
		-o /tmp/e2 -w "%{num_connects}\n" "http://$KA/echo" --next -sS --max-time 10 \
		-w "%{num_connects}\n" "http://$KA/chunked?n=1" -o /dev/null >out &&
	test_eq "1 0 0" "$(echo $(cat out))" &&
	sbx exec main cmp /tmp/b /tmp/e1 && sbx exec main cmp /tmp/b /tmp/e2 &&
	test_grep "^req [0-9]* GET /chunked?n=1$" "$KALOG" &&
	test_eq 1 "$(($(count_lines "^conn " "$KALOG") - before <= 1))"
'

test_expect_success 'keep-alive: a pooled server connection the server closed is not used' '
	test_eq short "$(sbx exec main "${CURL[@]}" "http://$KA/short?t=1")" &&
	sleep 1 &&
	test_eq short "$(sbx exec main "${CURL[@]}" "http://$KA/short?t=2")" &&
	c1=$(sed -n "s|^req \([0-9]*\) GET /short?t=1$|\1|p" "$KALOG") &&
	c2=$(sed -n "s|^req \([0-9]*\) GET /short?t=2$|\1|p" "$KALOG") &&
	test_ne "" "$c1" && test_ne "$c1" "$c2"
'

test_expect_success 'a wrong proxy secret, a malformed credential, Basic not base64: 407, nothing dialled' '
	id1=$(sed -n "s/^SBX_EXEC_ID=//p" env1) &&
	for cred in "$id1:$(printf "%032d" 0)" "not-an-exec:x"; do
		sbx exec main "${CURL[@]}" -o /dev/null -w "%{http_code}\n" \
			--proxy "http://$cred@127.0.0.1:3128" "http://$WEB/hello?t=cred407" >code &&
			test_eq 407 "$(cat code)" || exit 1
	done &&
	sbx exec main python3 -c "import socket, sys
s = socket.create_connection((\"127.0.0.1\", 3128), timeout=10)
s.sendall(b\"GET http://$WEB/hello?t=b64407 HTTP/1.0\r\nProxy-Authorization: Basic !!!\r\n\r\n\")
sys.stdout.write(s.recv(100).decode().splitlines()[0])" >line &&
	test_grep "^HTTP/1\.[01] 407 " line &&
	test_grep ! "t=cred407\|t=b64407" "$INET"
'

test_expect_success 'allow: HTTPS through CONNECT, the server'"'"'s own certificate (--cacert, -k)' '
	sbx exec main "${CURL[@]}" --cacert /workspace/ca.pem "https://web.test:$HTTPS_PORT/hello?t=tls1" >out &&
	test_eq "hello from tls" "$(cat out)" &&
	sbx exec main "${CURL[@]}" -k "https://web.test:$HTTPS_PORT/hello?t=tls2" >out &&
	test_eq "hello from tls" "$(cat out)" &&
	test_grep -x "tls GET /hello?t=tls1" "$INET" && test_grep -x "tls GET /hello?t=tls2" "$INET"
'

test_expect_success 'allow: git clone over HTTP through the proxy' '
	sbx exec -e GIT_TERMINAL_PROMPT=0 main timeout 30 git clone -q "http://$WEB/repo.git" \
		/workspace/clone &&
	test_eq "cloned through the proxy" "$(sbx exec main cat /workspace/clone/README)" &&
	test_grep "^web GET /repo.git/info/refs" "$INET"
'

test_expect_success 'allow: Python requests and httpx (what the OpenAI and Anthropic SDKs use) take the variables as they are' '
	sbx exec main /usr/bin/python3 -c "import requests, httpx
print(requests.get(\"http://$WEB/hello?t=rq\", timeout=10).text.strip())
with httpx.Client(timeout=10) as c:
    print(c.get(\"http://$WEB/hello?t=hx\").text.strip())" >out &&
	test_eq "hello from web|hello from web" "$(paste -sd "|" out)" &&
	test_grep -x "web GET /hello?t=rq" "$INET" && test_grep -x "web GET /hello?t=hx" "$INET"
'

test_expect_success 'allow: SOCKS5 with the credential and without, curl and a raw TCP client' '
	sbx exec main "${VIA_SOCKS[@]}" "${CURL[@]}" "http://$WEB/hello?t=socks1" >out &&
	test_eq "hello from web" "$(cat out)" &&
	sbx exec main "${CURL[@]}" --socks5-hostname 127.0.0.1:1080 "http://$WEB/hello?t=socks2" >out &&
	test_eq "hello from web" "$(cat out)" &&
	test_grep -x "web GET /hello?t=socks1" "$INET" && test_grep -x "web GET /hello?t=socks2" "$INET" &&
	sbx exec main /usr/bin/python3 /workspace/socks.py web.test "$TCP_PORT" "raw tcp, with auth" >out &&
	test_eq "raw tcp, with auth" "$(cat out)" &&
	sbx exec main /usr/bin/python3 /workspace/socks.py --no-auth web.test "$TCP_PORT" "no auth" >out &&
	test_eq "no auth" "$(cat out)"
'

test_expect_success 'a name not allowed (though --add-host maps it): 403 with the way to allow it' '
	sbx exec main "${CURL[@]}" -i "http://bad.test:$HTTP_PORT/hello?t=bad1" >resp &&
	refused_403 resp bad.test "--net-allow" &&
	expect_code 56 sbx exec main "${CURL[@]}" --cacert /workspace/ca.pem \
		"https://bad.test:$HTTPS_PORT/hello?t=bad2" 2>err &&
	test_grep "403" err &&
	expect_code 97 sbx exec main "${VIA_SOCKS[@]}" "${CURL[@]}" \
		"http://bad.test:$HTTP_PORT/hello?t=bad3" &&
	expect_code 2 sbx exec main /usr/bin/python3 /workspace/socks.py bad.test "$TCP_PORT" x 2>err &&
	test_grep -x "socks: reply 0x02" err &&
	! grep "t=bad" "$INET"
'

test_expect_success 'wildcard: *.zone.test allows a.zone.test, not zone.test itself' '
	sbx exec main "${CURL[@]}" "http://a.zone.test:$HTTP_PORT/hello?t=zone1" >out &&
	test_eq "hello from web" "$(cat out)" &&
	sbx exec main "${CURL[@]}" --cacert /workspace/ca.pem "https://a.zone.test:$HTTPS_PORT/hello" >out &&
	test_eq "hello from tls" "$(cat out)" &&
	sbx exec main "${CURL[@]}" -i "http://zone.test:$HTTP_PORT/hello?t=zone2" >resp &&
	refused_403 resp zone.test "--net-allow" &&
	expect_code 56 sbx exec main "${CURL[@]}" -k "https://zone.test:$HTTPS_PORT/hello" &&
	test_grep -x "web GET /hello?t=zone1" "$INET" && test_grep ! "t=zone2" "$INET"
'

test_expect_success 'a port restriction: allow=web.test:PORT refuses every other port' '
	sbx create --name port --net "allow=web.test:$HTTP_PORT" --net-preset none "${ADD[@]}" >/dev/null &&
	sbx cp "$HELPERS/socks.py" port:/workspace/socks.py &&
	test_eq "hello from web" "$(sbx exec port "${CURL[@]}" "http://$WEB/hello?t=port1")" &&
	alt=$(count_lines "^alt conn" "$INET") && tls=$(count_lines "^tls conn" "$INET") &&
	tcp=$(count_lines "^tcp conn" "$INET") &&
	sbx exec port "${CURL[@]}" -i "http://web.test:$ALT_PORT/hello?t=port2" >resp &&
	refused_403 resp "web.test:$ALT_PORT" "--net-allow" &&
	expect_code 56 sbx exec port "${CURL[@]}" -k "https://web.test:$HTTPS_PORT/hello?t=port3" &&
	expect_code 2 sbx exec port /usr/bin/python3 /workspace/socks.py web.test "$TCP_PORT" x &&
	test_eq "$alt" "$(count_lines "^alt conn" "$INET")" &&
	test_eq "$tls" "$(count_lines "^tls conn" "$INET")" &&
	test_eq "$tcp" "$(count_lines "^tcp conn" "$INET")"
'

test_expect_success 'an allowed name on a loopback address without --add-host: refused' '
	sbx create --name lo --net allow=localhost --net-preset none >/dev/null &&
	hp=$(count_lines "^hp1 conn" "$HOSTLOG") &&
	sbx exec lo env -u NO_PROXY -u no_proxy "${CURL[@]}" -i "http://localhost:$HP1/hello?t=lo1" >resp &&
	refused_403 resp localhost "--host-port" && test_grep -E "(127\.0\.0\.1|::1), a loopback address" resp.body &&
	expect_code 56 sbx exec lo env -u NO_PROXY -u no_proxy "${CURL[@]}" -k "https://localhost:$HP1/" &&
	expect_code 97 sbx exec lo "${VIA_SOCKS[@]}" env -u NO_PROXY -u no_proxy \
		"${CURL[@]}" "http://localhost:$HP1/hello?t=lo2" &&
	test_eq "$hp" "$(count_lines "^hp1 conn" "$HOSTLOG")" && test_grep ! "t=lo" "$HOSTLOG"
'

test_expect_success '--net open: any name through the proxy; address literals checked as names' '
	sbx create --name open --net open --add-host "any.test:$WEB_ADDR" >/dev/null &&
	test_eq "hello from web" "$(sbx exec open "${CURL[@]}" "http://any.test:$HTTP_PORT/hello?t=open1")" &&
	test_eq "hello from tls" "$(sbx exec open "${CURL[@]}" -k "https://any.test:$HTTPS_PORT/hello")" &&
	hp=$(count_lines "^hp2 conn" "$HOSTLOG") &&
	sbx exec open env -u NO_PROXY -u no_proxy "${CURL[@]}" -i "http://127.0.0.1:$HP2/hello?t=open2" >resp &&
	refused_403 resp 127.0.0.1 "refused" && test_grep "loopback" resp.body &&
	sbx exec open env -u NO_PROXY -u no_proxy "${CURL[@]}" -i "http://$TN_PRIV:$HTTP_PORT/hello?t=open3" >resp &&
	refused_403 resp "$TN_PRIV" "--net-allow-private" && test_grep "a private address" resp.body &&
	test_eq "hello from web" "$(sbx exec open env -u NO_PROXY -u no_proxy "${CURL[@]}" "http://$WEB_ADDR:$HTTP_PORT/hello?t=open4")" &&
	test_eq "$hp" "$(count_lines "^hp2 conn" "$HOSTLOG")" &&
	test_grep -x "web GET /hello?t=open1" "$INET" && test_grep -x "web GET /hello?t=open4" "$INET" &&
	test_grep ! -E "t=open(2|3)" "$INET" "$HOSTLOG"
'

test_expect_success 'connections that ignore the proxy fail' '
	expect_code 7 sbx exec main "${CURL[@]}" --noproxy "*" "http://$WEB/hello?t=direct1" &&
	expect_code 7 sbx exec main "${CURL[@]}" --noproxy "*" "http://$WEB_ADDR:$HTTP_PORT/hello?t=direct2" &&
	expect_code 1 sbx exec main timeout 5 bash -c "exec 3<>/dev/tcp/$WEB_ADDR/$TCP_PORT" &&
	expect_code 7 sbx exec main "${CURL[@]}" --noproxy "*" "http://127.0.0.1:$HP1/hello?t=direct3" &&
	test_grep ! "t=direct" "$INET" "$HOSTLOG"
'

test_expect_success '--host-port: that host port and no other reaches the host loopback' '
	sbx create --name hp --host-port "$HP1:9000" --host-port "$HP2" >/dev/null &&
	test_eq "hello from hp1" "$(sbx exec hp "${CURL[@]}" --noproxy "*" "http://127.0.0.1:9000/hello?t=hp1")" &&
	test_eq "hello from hp2" "$(sbx exec hp "${CURL[@]}" --noproxy "*" "http://127.0.0.1:$HP2/hello?t=hp2")" &&
	expect_code 7 sbx exec hp "${CURL[@]}" --noproxy "*" "http://127.0.0.1:$HP3/hello?t=hp3" &&
	expect_code 7 sbx exec hp "${CURL[@]}" --noproxy "*" "http://127.0.0.1:$HP1/hello?t=hp4" &&
	expect_code 7 sbx exec hp "${CURL[@]}" --noproxy "*" "http://$WEB_ADDR:$HTTP_PORT/hello?t=hp5" &&
	test_grep -x "hp1 GET /hello?t=hp1" "$HOSTLOG" && test_grep -x "hp2 GET /hello?t=hp2" "$HOSTLOG" &&
	test_grep ! -E "t=hp[345]" "$HOSTLOG" "$INET"
'

test_expect_success 'the egress log: each connection with its exec id and command, deny lines' '
	sbx create --name log --net "allow=web.test" --net-preset none "${ADD[@]}" >/dev/null &&
	sbx cp ca.pem log:/workspace/ca.pem &&
	allow="echo \$SBX_EXEC_ID && curl -sS --max-time 10 -o /dev/null http://$WEB/hello?t=log1 &&
curl -sS --max-time 10 -o /dev/null --cacert /workspace/ca.pem https://web.test:$HTTPS_PORT/hello &&
env -u http_proxy -u HTTP_PROXY -u all_proxy ALL_PROXY=\$SBX_SOCKS_PROXY curl -sS --max-time 10 -o /dev/null http://$WEB/hello?t=log2" &&
	sbx exec log sh -c "$allow" >id1 && id1=$(cat id1) &&
	deny="echo \$SBX_EXEC_ID; curl -sS --max-time 10 -o /dev/null http://bad.test:$HTTP_PORT/;
curl -sS --max-time 10 -o /dev/null -k https://bad.test:$HTTPS_PORT/;
env -u http_proxy -u HTTP_PROXY -u all_proxy ALL_PROXY=\$SBX_SOCKS_PROXY curl -sS --max-time 10 -o /dev/null http://bad.test:$HTTP_PORT/; true" &&
	sbx exec log sh -c "$deny" >id2 2>/dev/null && id2=$(cat id2) &&
	cmd3="curl -sS --max-time 10 -o /dev/null http://$WEB/hello?t=log3" &&
	sbx exec log $cmd3 &&
	egress_wait log --command "$cmd3" --verdict allow &&
	egress_wait log --exec "$id1" --count 3 &&
	egress_wait log --exec "$id2" --count 3 &&
	e="$TEST_PYTHON $HELPERS/egress.py" &&
	$e schema egress.jsonl &&
	test_eq 7 "$(wc -l <egress.jsonl)" &&
	$e match egress.jsonl --exec "$id1" --command "sh -c $allow" --proto http --domain web.test \
		--port "$HTTP_PORT" --verdict allow --min-bytes-down 15 &&
	$e match egress.jsonl --exec "$id1" --command "sh -c $allow" --proto connect \
		--domain web.test --port "$HTTPS_PORT" --verdict allow --min-bytes-down 100 &&
	$e match egress.jsonl --exec "$id1" --command "sh -c $allow" --proto socks --domain web.test \
		--port "$HTTP_PORT" --verdict allow --min-bytes-down 15 &&
	for p in http connect socks; do
		$e match egress.jsonl --exec "$id2" --command "sh -c $deny" --proto "$p" \
			--domain bad.test --verdict deny || exit 1
	done &&
	$e match egress.jsonl --exec-other "$id1" --exec-other "$id2" --command "$cmd3" --proto http \
		--domain web.test --port "$HTTP_PORT" --verdict allow
'

test_expect_success 'logs --egress: a table, a header and one row per connection' '
	sbx logs --egress --json log >egress.jsonl && test_eq 7 "$(grep -c "" egress.jsonl)" &&
	sbx logs --egress log >table && cat table &&
	test_eq 8 "$(grep -c "" table)" &&
	test_eq 4 "$(sed 1d table | grep -c "web\.test")" &&
	test_eq 3 "$(sed 1d table | grep -c "bad\.test")"
'

test_expect_success 'logs --egress --follow prints new lines and ends when the sandbox goes' '
	sbx create --name fol --net allow=web.test --net-preset none "${ADD[@]}" >/dev/null || exit 1
	{ timeout 20 "$SBX" logs --egress --json --follow fol >follow.out 2>follow.err;
	  echo $? >follow.rc; } &
	sbx exec fol "${CURL[@]}" -o /dev/null "http://$WEB/hello?t=follow1" &&
	sbx exec fol "${CURL[@]}" -o /dev/null "http://bad.test:$HTTP_PORT/hello?t=follow2" &&
	wait_until 10 has_lines follow.out 2 &&
	test ! -e follow.rc &&
	"$TEST_PYTHON" "$HELPERS/egress.py" match follow.out --domain web.test --verdict allow &&
	"$TEST_PYTHON" "$HELPERS/egress.py" match follow.out --domain bad.test --verdict deny &&
	sbx rm -f fol >/dev/null &&
	wait_until 10 test -s follow.rc && test_eq 0 "$(cat follow.rc)"
'

test_expect_success '--net host: a warning, and the host'"'"'s own network' '
	sbx create --name hostnet --net host >id 2>err &&
	test_grep -Ex "[0-9a-f]{12}" id && test_eq 1 "$(grep -c "" err)" && test_grep "^sbx: warning: " err &&
	test_eq "$(stat -L -c %i /proc/self/ns/net)" "$(sbx exec hostnet stat -L -c %i /proc/self/ns/net)" &&
	test_eq "hello from hp3" \
		"$(sbx exec hostnet "${CURL[@]}" --noproxy "*" "http://127.0.0.1:$HP3/hello?t=host1")" &&
	sbx rm -f hostnet >/dev/null
'

test_expect_success 'the default (the preset) and --net allow= alone: a test name is refused' '
	sbx create --name dflt "${ADD[@]}" >/dev/null &&
	sbx exec dflt env >env && test_grep "^HTTP_PROXY=http://" env &&
	sbx exec dflt "${CURL[@]}" -i "http://$WEB/hello?t=dflt1" >resp &&
	refused_403 resp web.test "--net-allow" &&
	sbx inspect dflt >j && json_assert j "assert r[\"options\"][\"net\"][\"preset\"] is True, r" &&
	sbx create --name empty --net allow= "${ADD[@]}" >/dev/null &&
	sbx inspect empty >j && json_assert j "assert r[\"options\"][\"net\"][\"preset\"] is False, r" &&
	sbx exec empty "${CURL[@]}" -i "http://$WEB/hello?t=dflt2" >resp &&
	refused_403 resp web.test "--net-allow" &&
	test_grep ! "t=dflt" "$INET"
'

test_expect_success 'rm: nothing of the sandboxes, their proxies and forwarders stays' '
	rm_all_gone
'

test_done
