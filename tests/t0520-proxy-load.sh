#!/bin/bash
# Real package managers through the egress proxy, under load, with names resolved by a DNS
# server of the file's own: apt-get update and install from an apt repository, npm install
# of a wide tree from an npm registry over HTTP and over HTTPS (CONNECT), with a DNS server
# that is slow and drops bursts, and npm install from a registry not allowed (the refusal and
# the way to allow it reach npm's user); and the proxy's resolver: a name that does not exist
# answered 502 and kept, a SERVFAIL asked again, many connections to one name make few queries
# (a cache), a burst of them waiting on one slow lookup makes one (coalesced), and a name asked
# again after its TTL is looked up again.
# The internet is the file's own (tests/helpers/testnet.sh), in a mount namespace of its own
# too: /etc/resolv.conf there names tests/helpers/dnsfake.py at 192.0.2.2, which answers for
# deb.test, registry.test and the resolver's names; the sandboxes reach them by name only
# (no --add-host), so every name goes through the supervisor's lookups.
# Servers: tests/helpers/netsrv.py serves the repository tests/helpers/aptrepo.py builds;
# tests/helpers/npmreg.py the registry. apt runs in an image made of this host's own apt and
# dpkg (tests/helpers/mkaptimage.py).
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec --mount "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl openssl node npm dpkg-deb dpkg-query
TEST_TIMEOUT=100

HELPERS=$TEST_DIR/helpers
NPM_COUNT=300 # packages in the registry, all of them in the project's tree
# apt's privilege drop: to _apt, a second uid. As uid 4242 this file runs in a user namespace
# of its own (testnet_reexec) that maps that uid alone, so no subordinate ids can be mapped
# into its sandboxes (t0160 tests those): apt stays root there
APT=(apt-get -q -o Acquire::Retries=0 -o Dpkg::Use-Pty=0)
[ "$(id -u)" -eq 0 ] || APT+=(-o APT::Sandbox::User=root)

# a CA and a certificate for registry.test
make_certs() {
	local k=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	{
		openssl req -x509 "${k[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=sbx-test-ca \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign &&
			openssl req -new "${k[@]}" -keyout srv.key -out srv.csr -subj /CN=registry.test &&
			printf '%s\n' 'subjectAltName=DNS:registry.test' 'extendedKeyUsage=serverAuth' >srv.ext &&
			openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
				-out srv.pem -extfile srv.ext
	} >openssl.log 2>&1
}

# dns_set JSON: the DNS server's behaviour from now on (its names stay; see dnsfake.py)
dns_set() {
	"$TEST_PYTHON" -c 'import json, sys
c = json.loads(sys.argv[2])
w = sys.argv[3]
c["names"] = {n: w for n in ("deb.test", "registry.test", "counted.test", "burst.test",
                             "flaky.test", "down.test")}
c["names"]["short.test"] = {"ip": w, "ttl": 1}
c.setdefault("ttl", 300)
open(sys.argv[1] + ".tmp", "w").write(json.dumps(c))' "$TRASH/dns.json" "$1" "$TN_WEB" &&
		mv "$TRASH/dns.json.tmp" "$TRASH/dns.json"
}

# dns_count NAME: the queries the DNS server got for NAME so far
dns_count() {
	"$TEST_PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))["names"].get(sys.argv[2], 0))' "$TRASH/dns.stats" "$1"
}

# npm_stat KEY: the registry's count of KEY (requests, connections, packuments, tarballs)
npm_stat() {
	"$TEST_PYTHON" -c 'import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$TRASH/npm.stats" "$1"
}

# at_most N WHAT VALUE: VALUE <= N, else says so
at_most() {
	[ "$3" -le "$1" ] && return 0
	say "$2: $3, more than $1" >&2
	return 1
}

# ready_port FILE NAME: the port a server wrote for NAME
ready_port() { sed -n "s/^$2=//p" "$1"; }

# the apt image: built once per run of the suite (by the first uid that can write there),
# else in the trash
apt_image() {
	local dir=$TRASH f
	if [ -n "${SBX_SRC:-}" ] && [ -s "$SBX_SRC/cache/aptimage.tgz" ]; then
		echo "$SBX_SRC/cache/aptimage.tgz"
		return 0
	fi
	if [ -n "${SBX_SRC:-}" ] && mkdir -p "$SBX_SRC/cache" 2>/dev/null && [ -w "$SBX_SRC/cache" ]; then
		chmod 755 "$SBX_SRC/cache"
		dir=$SBX_SRC/cache
	fi
	f=$(mktemp "$dir/aptimage.XXXXXX") &&
		"$TEST_PYTHON" "$HELPERS/mkaptimage.py" --out "$f" \
			--source "deb [trusted=yes] http://deb.test/ ./" >mkaptimage.log 2>&1 &&
		chmod 644 "$f" && mv "$f" "$dir/aptimage.tgz" && echo "$dir/aptimage.tgz"
}

make_certs || { cat openssl.log; exit 1; }
if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	dns_set '{}'
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/dnsfake.py" --bind "$TN_WEB" --config dns.json \
		--ready dns.ready --stats dns.stats --lifetime 280 2>dns.log
	test_atexit "stop_pid $TN_BG"
	"$TEST_PYTHON" "$HELPERS/aptrepo.py" repo >aptrepo.log 2>&1 || { cat aptrepo.log; exit 1; }
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$TN_WEB" --ready apt.ready \
		--root repo --lifetime 280 deb:http:80 2>apt.log
	test_atexit "stop_pid $TN_BG"
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/npmreg.py" --bind "$TN_WEB" --ready npm.ready \
		--count "$NPM_COUNT" --http 0 --https 0 --cert srv.pem --key srv.key --stats npm.stats \
		--lifetime 280 2>npm.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s dns.ready
	wait_until 10 test -s apt.ready
	wait_until 20 test -s npm.ready
	testnet_resolver "$TN_WEB" timeout:1 attempts:3 || TEST_SKIP_ALL="cannot mount a resolv.conf"
	"$TEST_PYTHON" "$HELPERS/npmreg.py" --package-json --count "$NPM_COUNT" >package.json
fi
NPM_HTTP=$(ready_port npm.ready http) NPM_HTTPS=$(ready_port npm.ready https)
say "# registry.test: http $NPM_HTTP, https $NPM_HTTPS; deb.test: 80; DNS at $TN_WEB"

test_expect_success 'set-up: the DNS server answers here, the servers answer by their names' '
	test_ne "" "$NPM_HTTP" && test_ne "" "$NPM_HTTPS" &&
	test_grep "^nameserver $TN_WEB\$" /etc/resolv.conf &&
	test_eq "$TN_WEB" "$(getent ahostsv4 deb.test | awk "NR == 1 { print \$1 }")" &&
	expect_code 2 getent ahostsv4 nosuch.test &&
	test_grep -x "Package: sbxt-hello" repo/Packages &&
	curl -sSf --max-time 10 http://deb.test/Release | test_grep "^SHA256:" &&
	curl -sSf --max-time 10 "http://registry.test:$NPM_HTTP/sbxt-000" >p.json &&
	test_grep -F "\"tarball\": \"http://registry.test:$NPM_HTTP/sbxt-000/-/sbxt-000-1.0.0.tgz\"" p.json &&
	curl -sSf --max-time 10 --cacert ca.pem "https://registry.test:$NPM_HTTPS/sbxt-299" >p.json &&
	test_grep -F "\"tarball\": \"https://registry.test:$NPM_HTTPS/sbxt-299/" p.json
'

test_expect_success 'the proxy resolves a name with the host resolver: DNS answers, NXDOMAIN 502, kept' '
	sbx create --name res --net allow=deb.test,nosuch.test,flaky.test,down.test \
		--net-preset none >/dev/null &&
	test_eq "$(sed -n "s/^Codename: //p" repo/Release)" \
		"$(sbx exec res curl -sSf --max-time 10 http://deb.test/Release | sed -n "s/^Codename: //p")" &&
	n=$(dns_count nosuch.test) &&
	expect_code 22 sbx exec res curl -sSf --max-time 20 -o /dev/null http://nosuch.test/ 2>err &&
	test_grep "502" err &&
	n1=$(dns_count nosuch.test) && test "$n1" -gt "$n" &&
	sbx exec res curl -sS --max-time 20 http://nosuch.test/ >out &&
	test_grep "cannot resolve nosuch.test" out &&
	test_eq "$n1" "$(dns_count nosuch.test)" "queries for nosuch.test, asked again"
'

# the resolver's own attempts: one query each (glibc's are cut to one), SERVFAIL asked again
test_expect_success 'a name answered SERVFAIL twice is asked again, and then answered' '
	dns_set "{\"servfail\": {\"flaky.test\": 2, \"down.test\": 1000}}" &&
	n=$(dns_count flaky.test) &&
	sbx exec res curl -sSf --max-time 20 -o /dev/null http://flaky.test/Release &&
	test_eq 3 "$(($(dns_count flaky.test) - n))" "queries for flaky.test" &&
	n=$(dns_count down.test) &&
	expect_code 22 sbx exec res curl -sSf --max-time 30 -o /dev/null http://down.test/Release \
		2>err &&
	test_grep "502" err &&
	test "$(($(dns_count down.test) - n))" -ge 4 &&
	dns_set "{}" && sbx rm -f res >/dev/null
'

# the proxy's resolver cache: these fail on a proxy that looks every connection's name up
test_expect_success 'many connections to one name, one after another: few queries (a cache)' '
	sbx create --name cache --net allow=counted.test --net-preset none >/dev/null &&
	n0=$(dns_count counted.test) &&
	sbx exec cache sh -c "for i in \$(seq 40); do
		curl -sSf --max-time 10 -o /dev/null http://counted.test/Release || exit 1; done" &&
	n=$(($(dns_count counted.test) - n0)) &&
	test "$n" -ge 1 && at_most 4 "queries for counted.test, 40 connections" "$n" &&
	sbx rm -f cache >/dev/null
'

test_expect_success 'a burst of connections waiting on one slow lookup: one lookup (coalesced)' '
	dns_set "{\"delay\": 0.5}" &&
	sbx create --name burst --net allow=burst.test --net-preset none >/dev/null &&
	n0=$(dns_count burst.test) &&
	sbx exec burst sh -c "pids=; for i in \$(seq 30); do
		curl -sSf --max-time 20 -o /dev/null http://burst.test/Release & pids=\"\$pids \$!\"; done
		for p in \$pids; do wait \$p || exit 1; done" &&
	n=$(($(dns_count burst.test) - n0)) &&
	test "$n" -ge 1 && at_most 4 "queries for burst.test, 30 connections at once" "$n" &&
	dns_set "{}" && sbx rm -f burst >/dev/null
'

# through a tunnel (curl -p: CONNECT), as a plain-HTTP request may reuse an idle connection of
# the proxy's to the same host:port, which needs no lookup
test_expect_success 'a name asked again after its TTL (1 s) is looked up again' '
	sbx create --name ttl --net allow=short.test --net-preset none >/dev/null &&
	n0=$(dns_count short.test) &&
	sbx exec ttl curl -p -sSf --max-time 10 -o /dev/null http://short.test/Release &&
	n1=$(dns_count short.test) && test "$n1" -gt "$n0" &&
	sleep 3 &&
	sbx exec ttl curl -p -sSf --max-time 10 -o /dev/null http://short.test/Release &&
	test "$(dns_count short.test)" -gt "$n1" &&
	sbx rm -f ttl >/dev/null
'

test_expect_success 'apt-get update and install through the proxy, from an image of its own' '
	img=$(apt_image) || { cat mkaptimage.log; exit 1; } &&
	sbx image import --rootfs "$img" localhost/sbxt-apt:v1 >/dev/null &&
	sbx create --name apt --image localhost/sbxt-apt:v1 --net allow=deb.test --net-preset none \
		>/dev/null &&
	sbx exec apt "${APT[@]}" update >update.log 2>&1 || { cat update.log; exit 1; }
	sbx exec -e DEBIAN_FRONTEND=noninteractive apt "${APT[@]}" install -y sbxt-hello \
		>install.log 2>&1 || { cat install.log; exit 1; }
	test_eq "hello from sbxt-hello" "$(sbx exec apt sbxt-hello)" &&
	test_eq "data of sbxt-hello" "$(sbx exec apt cat /usr/share/sbxt-hello/data.txt)" &&
	test_eq configured "$(sbx exec apt cat /var/lib/sbxt-hello/postinst-ran)" &&
	test_eq "install ok installed" "$(sbx exec apt dpkg-query -W -f "\${Status}" sbxt-hello)" &&
	test_grep "GET .*sbxt-hello_1.0_all.deb" apt.log
'

test_expect_success 'control: deb.test not allowed, apt finds no package and installs nothing' '
	sbx create --name noapt --image localhost/sbxt-apt:v1 --net allow=registry.test \
		--net-preset none >/dev/null &&
	sbx exec noapt "${APT[@]}" update >update2.log 2>&1
	test_grep "deb.test" update2.log &&
	expect_code 100 sbx exec -e DEBIAN_FRONTEND=noninteractive noapt "${APT[@]}" install -y \
		sbxt-hello >install2.log 2>&1 &&
	expect_code 1 sbx exec noapt test -e /usr/bin/sbxt-hello &&
	sbx rm -f noapt apt >/dev/null
'

# npm_install SB URL [NPM-ARGS...]: npm install of package.json's tree from URL inside SB,
# at up to 50 connections at once, bounded in time; then every package is there
npm_install() {
	local sb=$1 url=$2 got
	shift 2
	sbx exec "$sb" mkdir -p /workspace/proj &&
		sbx cp package.json "$sb:/workspace/proj/package.json" >/dev/null &&
		sbx cp ca.pem "$sb:/workspace/ca.pem" >/dev/null || return 1
	sbx exec -w /workspace/proj "$sb" timeout 80 npm install --registry "$url" \
		--cache /workspace/npm-cache --no-audit --no-fund --no-update-notifier \
		--maxsockets 50 --loglevel=error "$@" >"npm-$sb.log" 2>&1
	case $? in
	0) ;;
	124) say "npm install did not end within 80 s" >&2; return 1 ;;
	*) tail -n 30 "npm-$sb.log"; return 1 ;;
	esac
	got=$(sbx exec "$sb" sh -c "ls /workspace/proj/node_modules | grep -c ^sbxt-") &&
		test_eq "$NPM_COUNT" "$got" "packages in node_modules" &&
		test_eq sbxt-299 "$(sbx exec -w /workspace/proj "$sb" node -p "require(\"sbxt-299\")")"
}

test_expect_success 'npm install over HTTP, 300 packages, DNS slow and dropping bursts' '
	dns_set "{\"delay\": 0.3, \"inflight\": 4, \"burst\": 8, \"every\": 4, \"ttl\": 60}" &&
	r0=$(npm_stat requests) q0=$(dns_count registry.test) &&
	sbx create --name npmh --net allow=registry.test --net-preset none >/dev/null &&
	npm_install npmh "http://registry.test:$NPM_HTTP/" &&
	r=$(($(npm_stat requests) - r0)) q=$(($(dns_count registry.test) - q0)) &&
	test "$r" -ge $((2 * NPM_COUNT)) && say "requests $r, queries $q" &&
	at_most 10 "queries for registry.test, $r requests" "$q" &&
	sbx rm -f npmh >/dev/null
'

test_expect_success 'npm install over HTTPS (CONNECT), 300 packages, DNS slow and dropping bursts' '
	dns_set "{\"delay\": 0.3, \"inflight\": 4, \"burst\": 8, \"every\": 4, \"ttl\": 60}" &&
	q0=$(dns_count registry.test) &&
	sbx create --name npms --net allow=registry.test --net-preset none >/dev/null &&
	npm_install npms "https://registry.test:$NPM_HTTPS/" --cafile /workspace/ca.pem &&
	q=$(($(dns_count registry.test) - q0)) && say "queries $q" &&
	at_most 10 "queries for registry.test" "$q" &&
	dns_set "{}" && sbx rm -f npms >/dev/null
'

# npm_refused SB URL LOG [NPM-ARGS...]: npm install of one package from URL inside SB fails
# (npm's own code), its output and sbx exec's in LOG
npm_refused() {
	local sb=$1 url=$2 log=$3
	shift 3
	sbx exec "$sb" mkdir -p /workspace/one &&
		sbx cp one.json "$sb:/workspace/one/package.json" >/dev/null &&
		sbx cp ca.pem "$sb:/workspace/ca.pem" >/dev/null || return 1
	expect_code 1 sbx exec -w /workspace/one "$sb" timeout 40 npm install --registry "$url" \
		--cache /workspace/npm-cache --no-audit --no-fund --no-update-notifier \
		--fetch-retries=0 "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
}

# a registry not in the allow list: npm fails, and what the agent sees (npm's error and sbx
# exec's last line) names the host and the sbx update that allows it; then allowed, it works
test_expect_success 'npm install from a registry not allowed: refused, the way to allow it shown' '
	echo "{\"name\": \"one\", \"version\": \"1.0.0\", \"dependencies\": {\"sbxt-299\": \"1.0.0\"}}" \
		>one.json &&
	sbx create --name npmx --net allow=deb.test --net-preset none >/dev/null &&
	r0=$(npm_stat requests) &&
	npm_refused npmx "http://registry.test:$NPM_HTTP/" npmx-http.log &&
	npm_refused npmx "https://registry.test:$NPM_HTTPS/" npmx-https.log --cafile /workspace/ca.pem &&
	for l in npmx-http.log npmx-https.log; do
		test_grep "registry.test" "$l" &&
		test_grep "^sbx: .* refused by the egress policy: registry\.test:" "$l" &&
		test_grep "sbx update npmx --net-allow registry.test" "$l" || exit 1
	done &&
	test_eq "$r0" "$(npm_stat requests)" "requests that reached the registry" &&
	sbx update npmx --net-allow registry.test &&
	sbx exec -w /workspace/one npmx timeout 40 npm install --registry \
		"https://registry.test:$NPM_HTTPS/" --cafile /workspace/ca.pem --cache /workspace/npm-cache \
		--no-audit --no-fund --no-update-notifier --fetch-retries=0 >npmx-ok.log 2>&1 ||
		{ cat npmx-ok.log; exit 1; }
	test_eq sbxt-299 "$(sbx exec -w /workspace/one npmx node -p "require(\"sbxt-299\")")" &&
	sbx rm -f npmx >/dev/null
'

test_expect_success 'nothing left: no sandbox' '
	sbx rm -f res cache burst ttl apt noapt npmh npms npmx >/dev/null 2>&1
	test_eq "" "$(sbx ls -q)"
'

test_done
