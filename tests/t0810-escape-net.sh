#!/bin/bash
# Escapes through a sandbox's network service, each refusal beside a control that shows the
# same action working outside the sandbox: the host's own addresses (loopback or not, one added
# later, every spelling of them), link-local, cloud metadata and private addresses under
# --net open and allow= and through --add-host, --net-allow-private lifting the private ones
# only; a preview on loopback without its token; names that are not UTF-8 or that carry
# terminal controls in the egress log; and the supervisor under load: 3000 idle connections, a
# byte every 2 s, idle tunnels, no descriptors left. Every check of the sandbox's reach runs
# twice: against a local sandbox and against --runtime gvisor (whose sockets are the same
# network namespace's); the supervisor's own limits, the same process's whatever the runtime,
# once.
# The file runs in a network namespace of its own (tests/helpers/testnet.sh; as another uid,
# one that a user namespace of its own owns), which is "the host" of its sandboxes: it has
# 192.0.2.1 and 10.77.0.1 on a veth pair whose other end, in a second namespace, holds the
# servers at 192.0.2.2 (not private) and 10.77.0.2 (private). Without a writable cgroup (another
# uid) the flood runs without --memory and --pids-limit.
# run.sh: both passes at once
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl

HELPERS=$TEST_DIR/helpers
CURL=(curl -sS --max-time 10)
NOPX=(env -u NO_PROXY -u no_proxy) # the proxy for 127.0.0.1 too: it must refuse, not be skipped
mkdir -p www

if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	# the internet: a web server on both of the servers' addresses, a TCP echo
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind 0.0.0.0 --ready inet.ready \
		--root www --lifetime 300 web:http:80 tcp:echo:7777 2>inet.log
	test_atexit "stop_pid $TN_BG"
	# a service of the host itself, on every address it has or will have
	"$TEST_PYTHON" "$HELPERS/netsrv.py" --bind 0.0.0.0 --ready host.ready --root www \
		--lifetime 300 me:http:0 2>host.log &
	test_atexit "stop_pid $!"
	wait_until 10 test -s inet.ready
	wait_until 10 test -s host.ready
fi
ME=$(sed -n 's/^me=//p' host.ready 2>/dev/null)
INET=$TRASH/inet.log HOSTLOG=$TRASH/host.log

# refused_403 FILE WORDS...: FILE (curl -i output) is a 403 whose one-line body has each WORD
refused_403() {
	local f=$1 w
	shift
	tr -d '\r' <"$f" >"$f.lf" && sed '1,/^$/d' "$f.lf" >"$f.body"
	if head -n 1 "$f.lf" | grep -Eq '^HTTP/1\.[01] 403' && test "$(grep -c '' "$f.body")" = 1 &&
		grep -q refused "$f.body"; then
		for w in "$@"; do
			test_grep -F -- "$w" "$f.body" || { say "no '$w' in:" >&2; cat "$f.body" >&2; return 1; }
		done
		return 0
	fi
	say "not a 403:" >&2
	cat "$f" >&2
	return 1
}

# through SB URL: the proxy's answer to a plain-HTTP request for URL, into resp
through() { sbx exec "$1" "${NOPX[@]}" "${CURL[@]}" -i "$2" >resp; }

# hex STRING: its bytes in hexadecimal (for netload.py's raw requests)
hex() { printf '%b' "$1" | od -An -v -tx1 | tr -d ' \n'; }

# sup_pid SB: the pid of the sandbox's supervisor
# sup_field SB FIELD: a line of /proc/PID/status of the sandbox's supervisor (Threads, VmRSS)
sup_pid() {
	sandbox_pids "$("$SBX" inspect "$1" | "$TEST_PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["id"])')" | tail -n 1
}
sup_field() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$(sup_pid "$1")/status"; }
# sup_cpu SB: the supervisor's CPU time so far, in clock ticks
sup_cpu() { awk '{ print $14 + $15 }' "/proc/$(sup_pid "$1")/stat"; }

# writable cgroup for --memory and --pids-limit (root; a delegated subtree)
LIMITS=()
for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/unified; do
	[ -w "$d/cgroup.procs" ] && LIMITS=(--memory 64m --pids-limit 40) && break
done

# no_threads SB: from now on the sandbox's supervisor cannot start a thread (root: a pids
# cgroup of one task; another uid: RLIMIT_NPROC 1); threads_back SB undoes it
no_threads() {
	local sup
	sup=$(sup_pid "$1")
	if test_have_prereq ROOT && [ -d /sys/fs/cgroup/pids ]; then
		NT_OLD=$(sed -n 's/^[0-9]*:pids://p' "/proc/$sup/cgroup") &&
			NT_CG=/sys/fs/cgroup/pids/sbxt-$$ && mkdir "$NT_CG" && echo 1 >"$NT_CG/pids.max" &&
			echo "$sup" >"$NT_CG/cgroup.procs"
	else
		NT_HARD=$(prlimit --pid "$sup" --nproc --raw -o HARD --noheadings) &&
			prlimit --pid "$sup" --nproc="1:$NT_HARD"
	fi
}
threads_back() {
	local sup
	sup=$(sup_pid "$1")
	if [ -n "${NT_CG:-}" ]; then
		echo "$sup" >"/sys/fs/cgroup/pids$NT_OLD/cgroup.procs" && rmdir "$NT_CG"
	else
		prlimit --pid "$sup" --nproc="$NT_HARD:$NT_HARD"
	fi
}
test_atexit '[ -d /sys/fs/cgroup/pids/sbxt-$$ ] && rmdir /sys/fs/cgroup/pids/sbxt-$$'

# the checks, run against the local runtime and against --runtime gvisor (RT): T marks the
# requests of a pass in the servers' logs, ROPT is its create options, IN_RT its tests' suffix,
# LATER the address the host gets after the sandbox started, PVNET the --net of the
# previews' sandbox
net_checks() {
test_expect_success "set-up: from the host itself, every server answers, on every address$IN_RT" '
	test_ne "" "$ME" &&
	test_eq "hello from web" "$("${CURL[@]}" "http://$TN_WEB/hello")" &&
	test_eq "hello from web" "$("${CURL[@]}" "http://$TN_PRIV/hello")" &&
	for a in "$TN_HOST" "$TN_HOST_PRIV" 127.0.0.1; do
		test_eq "hello from me" "$("${CURL[@]}" "http://$a:$ME/hello")" || exit 1
	done &&
	sbx create $ROPT --name open --net open >/dev/null &&
	sbx cp "$HELPERS/netload.py" open:/workspace/netload.py &&
	test_eq "hello from web" "$(sbx exec open "${CURL[@]}" "http://$TN_WEB/hello?t=${T}ok1")"
'

test_expect_success "--net open: the host's own addresses, loopback or not, in any spelling: 403$IN_RT" '
	n=$(grep -c "^me conn" "$HOSTLOG") &&
	through open "http://$TN_HOST:$ME/hello?t=${T}own1" && refused_403 resp "$TN_HOST is an address of this host" "never" &&
	through open "http://$TN_HOST_PRIV:$ME/hello?t=${T}own2" && refused_403 resp "an address of this host" &&
	through open "http://127.0.0.1:$ME/hello?t=${T}own3" && refused_403 resp "a loopback address" "--host-port" &&
	through open "http://0.0.0.0:$ME/hello?t=${T}own4" && refused_403 resp "0.0.0.0" &&
	sbx exec open "${NOPX[@]}" "${CURL[@]}" -g -i "http://[::1]:$ME/hello?t=${T}own5" >resp && refused_403 resp "loopback" &&
	sbx exec open "${NOPX[@]}" "${CURL[@]}" -g -i "http://[::ffff:$TN_HOST]:$ME/hello?t=${T}own6" >resp &&
	refused_403 resp "an address of this host" &&
	for t in "2130706433:$ME" "127.1:$ME" "localhost:$ME"; do
		sbx exec open python3 /workspace/netload.py connect-raw 3128 "$(hex "$t")" >out &&
		head -n 1 out | test_grep " 403 " && test_grep "loopback" out || { cat out; exit 1; }
	done &&
	expect_code 56 sbx exec open "${NOPX[@]}" "${CURL[@]}" -k "https://$TN_HOST:$ME/" 2>err && test_grep 403 err &&
	expect_code 97 sbx exec open "${NOPX[@]}" "${CURL[@]}" --socks5-hostname 127.0.0.1:1080 \
		"http://$TN_HOST:$ME/hello?t=${T}own7" &&
	test_eq "$n" "$(grep -c "^me conn" "$HOSTLOG")" &&
	test_eq "hello from me" "$("${CURL[@]}" "http://$TN_HOST:$ME/hello")"
'

test_expect_success "an address the host gets after the sandbox started is refused too$IN_RT" '
	"$TN_IP" addr add $LATER/32 dev sbxt-h &&
	test_eq "hello from me" "$("${CURL[@]}" "http://$LATER:$ME/hello")" &&
	n=$(grep -c "^me conn" "$HOSTLOG") &&
	through open "http://$LATER:$ME/hello?t=${T}later" &&
	refused_403 resp "$LATER is an address of this host" &&
	test_eq "$n" "$(grep -c "^me conn" "$HOSTLOG")"
'

test_expect_success "link-local and cloud metadata addresses: 403 under open, and no flag lifts it$IN_RT" '
	sbx create $ROPT --name priv --net open --net-allow-private >/dev/null &&
	sbx cp "$HELPERS/netload.py" priv:/workspace/netload.py &&
	for sb in open priv; do
		through $sb "http://169.254.169.254/latest/meta-data/" &&
		refused_403 resp "a cloud metadata address" "never" &&
		through $sb "http://169.254.1.1/" && refused_403 resp "a link-local address" &&
		sbx exec $sb "${NOPX[@]}" "${CURL[@]}" -g -i "http://[fe80::1]/" >resp &&
		refused_403 resp "link-local" || exit 1
	done
'

test_expect_success "a private address: 403 under open and allow=, 200 with --net-allow-private$IN_RT" '
	test_eq "hello from web" "$("${CURL[@]}" "http://$TN_PRIV/hello")" &&
	through open "http://$TN_PRIV/hello?t=${T}priv1" &&
	refused_403 resp "$TN_PRIV is a private address" "--net-allow-private" &&
	expect_code 56 sbx exec open "${NOPX[@]}" "${CURL[@]}" -k "https://$TN_PRIV:80/" &&
	sbx exec open python3 /workspace/netload.py connect-raw 3128 "$(hex "172818434:80")" >out &&
	head -n 1 out | test_grep " 403 " && test_grep "resolves to $TN_PRIV, a private address" out &&
	sbx create $ROPT --name allow --net "allow=$TN_PRIV" --net-preset none >/dev/null &&
	through allow "http://$TN_PRIV/hello?t=${T}priv2" && refused_403 resp "private" &&
	test_grep ! "t=${T}priv[12]" "$INET" &&
	test_eq "hello from web" "$(sbx exec priv "${NOPX[@]}" "${CURL[@]}" "http://$TN_PRIV/hello?t=${T}priv3")" &&
	sbx create $ROPT --name allowp --net "allow=$TN_PRIV" --net-preset none --net-allow-private >/dev/null &&
	test_eq "hello from web" "$(sbx exec allowp "${NOPX[@]}" "${CURL[@]}" "http://$TN_PRIV/hello?t=${T}priv4")" &&
	test_grep -x "web GET /hello?t=${T}priv3" "$INET" && test_grep -x "web GET /hello?t=${T}priv4" "$INET" &&
	sbx inspect priv >j && json_assert j "assert r[\"options\"][\"net\"][\"allow_private\"] is True, r" &&
	sbx inspect open >j && json_assert j "assert r[\"options\"][\"net\"][\"allow_private\"] is False, r" &&
	through priv "http://$TN_HOST_PRIV:$ME/hello?t=${T}priv5" && refused_403 resp "an address of this host" &&
	through priv "http://127.0.0.1:$ME/hello?t=${T}priv6" && refused_403 resp "loopback" &&
	test_grep ! "t=${T}priv[56]" "$HOSTLOG"
'

test_expect_success "--add-host: to the host itself refused; to a private server, that name's opt-in$IN_RT" '
	sbx create $ROPT --name mapped --net open --add-host "me.test:$TN_HOST" --add-host lo.test:127.0.0.1 \
		--add-host "srv.test:$TN_PRIV" >/dev/null &&
	through mapped "http://me.test:$ME/hello?t=${T}map1" &&
	refused_403 resp "me.test is mapped to $TN_HOST by --add-host, an address of this host" &&
	through mapped "http://lo.test:$ME/hello?t=${T}map2" && refused_403 resp "loopback" &&
	expect_code 97 sbx exec mapped "${CURL[@]}" --socks5-hostname 127.0.0.1:1080 "http://me.test:$ME/" &&
	test_eq "hello from web" "$(sbx exec mapped "${CURL[@]}" "http://srv.test/hello?t=${T}map3")" &&
	through mapped "http://$TN_PRIV/hello?t=${T}map4" && refused_403 resp "private" &&
	test_grep -x "web GET /hello?t=${T}map3" "$INET" && test_grep ! "t=${T}map" "$HOSTLOG"
'

test_expect_success "a loopback preview: 401 without its token, 200 with it; --no-auth; not with --public$IN_RT" '
	sbx create $ROPT --name pv --net "$PVNET" >/dev/null &&
	bg_exec pv python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null &&
	wait_until 10 sbx exec pv "${CURL[@]}" -f http://127.0.0.1:8000/ &&
	url=$(sbx preview pv 8000) && base=${url%%\?*} && tok=${url##*sbx_token=} &&
	echo "$url" | test_grep -Ex "http://127\.0\.0\.1:[0-9]+/\?sbx_token=[0-9a-f]{32}" &&
	"${CURL[@]}" -o body -w "%{http_code}" "$base" >code && test_eq 401 "$(cat code)" &&
	test_eq 1 "$(grep -c "" body)" &&
	"${CURL[@]}" -o /dev/null -w "%{http_code}" -H "X-Sbx-Preview-Token: x$tok" "$base" >code &&
	test_eq 401 "$(cat code)" &&
	"${CURL[@]}" -o /dev/null -w "%{http_code}" -H "X-Sbx-Preview-Token: $tok" "$base" >code &&
	test_eq 200 "$(cat code)" &&
	"${CURL[@]}" -L -c jar -b jar -o /dev/null -w "%{http_code}" "$url" >code && test_eq 200 "$(cat code)" &&
	sbx preview --json pv 8000 >j && json_assert j "assert r[\"token\"] == \"$tok\", r" &&
	open=$(sbx preview --no-auth pv 8001) && echo "$open" | test_grep -Ex "http://127\.0\.0\.1:[0-9]+/" &&
	bg_exec pv python3 -m http.server 8001 --bind 127.0.0.1 >/dev/null &&
	wait_until 10 "${CURL[@]}" -f "$open" &&
	expect_code 125 sbx preview --public --no-auth pv 8002 2>err && expect_one_error_line err "^sbx: error: " &&
	echo "$base $tok $open" >pv.urls
'

test_expect_success "previews back after a release keep their tokens; --no-auth stays so$IN_RT" '
	read -r base tok open <pv.urls &&
	sbx pause --release pv >/dev/null && sbx resume pv >/dev/null &&
	bg_exec pv python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null &&
	bg_exec pv python3 -m http.server 8001 --bind 127.0.0.1 >/dev/null &&
	wait_until 10 "${CURL[@]}" -f -H "X-Sbx-Preview-Token: $tok" "$base" &&
	"${CURL[@]}" -o /dev/null -w "%{http_code}" "$base" >code && test_eq 401 "$(cat code)" &&
	wait_until 10 "${CURL[@]}" -f "$open" &&
	sbx preview --json pv >j &&
	json_assert j "by = {p[\"port\"]: p for p in r}
assert by[8000][\"token\"] == \"$tok\" and by[8000][\"auth\"] is True, r
assert by[8001][\"token\"] is None and by[8001][\"auth\"] is False, r"
'

test_expect_success "the egress log: a name that is not UTF-8 or has terminal controls, escaped$IN_RT" '
	sbx exec open python3 /workspace/netload.py connect-raw 3128 "$(hex "ex\x80ample.test:443")" >out &&
	head -n 1 out | test_grep " 403 " &&
	sbx exec open python3 /workspace/netload.py socks-raw 1080 "$(hex "\x1b[31mred.test")" 80 >out &&
	test_eq "reply 2" "$(cat out)" &&
	wait_until 10 sh -c "\"$SBX\" logs --egress --json open | grep -qF red.test" &&
	sbx logs --egress --json open >log.json &&
	jsonl_assert log.json "d = [e[\"domain\"] for e in r]
assert \"ex\\\\x80ample.test\" in d and \"\\\\x1b[31mred.test\" in d, d" &&
	sbx logs --egress open >table && test_grep ! "$(printf "\033")" table &&
	test_grep -F "\\x1b[31mred.test" table && test_grep -F "ex\\x80ample.test" table
'

# the supervisor's own limits (connections, deadlines, threads, descriptors) are the same
# process's whatever runtime the sandbox has: checked once, on the default runtime
if [ "$RT" = local ]; then
test_expect_success "3000 idle connections: few threads, bounded memory, sbx preview and previews answer$IN_RT" '
	rm -f flood.rc && sbx create $ROPT --name flood --net open "${LIMITS[@]}" >/dev/null &&
	sbx cp "$HELPERS/netload.py" flood:/workspace/netload.py &&
	bg_exec flood python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null &&
	wait_until 10 sbx exec flood "${CURL[@]}" -f http://127.0.0.1:8000/ &&
	url=$(sbx preview flood 8000) && tok=${url##*sbx_token=} && base=${url%%\?*} || exit 1
	{ sbx exec flood python3 /workspace/netload.py flood 127.0.0.1 3128 3000 --hold 12 \
		--status /workspace/flood.status >flood.out 2>&1; echo $? >flood.rc; } &
	wait_until 30 sbx exec flood test -s /workspace/flood.status &&
	sbx exec flood cat /workspace/flood.status &&
	threads=$(sup_field flood Threads) && rss=$(sup_field flood VmRSS) &&
	fds=$(ls "/proc/$(sup_pid flood)/fd" | wc -l) &&
	say "supervisor under the flood: $threads threads, $rss kB resident, $fds descriptors" &&
	test "$threads" -le 3 && test "$rss" -le 32768 && test "$fds" -le 1024 &&
	timeout 5 "$SBX" preview flood 8000 >again && test_eq "$url" "$(cat again)" &&
	"${CURL[@]}" -H "X-Sbx-Preview-Token: $tok" -o /dev/null -w "%{http_code}" "$base" >code &&
	test_eq 200 "$(cat code)" &&
	sbx exec flood "${CURL[@]}" -i --max-time 5 "http://$TN_WEB/hello?t=${T}flood" >resp &&
	tr -d "\r" <resp | head -n 1 | test_grep "^HTTP/1.1 503" &&
	test_grep "the egress proxy of this sandbox has [0-9]* connections open, its limit" resp &&
	wait_until 40 test -s flood.rc && test_eq 0 "$(cat flood.rc)" &&
	sbx exec flood cat /workspace/flood.status >st && cat st &&
	read -r w opened refused closed <st && test_eq done "$w" && test "$closed" -gt 0 &&
	wait_until 15 sh -c "test \$(ls /proc/$(sup_pid flood)/fd | wc -l) -lt 32" &&
	test_eq "hello from web" "$(sbx exec flood "${CURL[@]}" "http://$TN_WEB/hello?t=${T}flood2")" &&
	test "$(sup_field flood Threads)" -le 3
'

test_expect_success "a byte every 2 s: cut at the 10 s head deadline (HTTP and SOCKS); others go on$IN_RT" '
	sbx exec open python3 /workspace/netload.py slow 127.0.0.1 3128 --every 2 --limit 25 \
		--data "GET http://$TN_WEB/hello?t=${T}slow HTTP/1.1\r\nHost: x\r\nX-Pad: 0123456789\r\n\r\n" \
		>slow.out 2>&1 &
	sbx exec open python3 /workspace/netload.py slow 127.0.0.1 1080 --every 2 --limit 25 \
		--data "\x05\x02\x00\x02\x01\x0c" >slows.out 2>&1 &
	sleep 3 &&
	t0=$(date +%s) &&
	test_eq "hello from web" "$(sbx exec open "${CURL[@]}" "http://$TN_WEB/hello?t=${T}fast")" &&
	test $(($(date +%s) - t0)) -le 5 &&
	wait &&
	cat slow.out slows.out &&
	test_grep -E "^closed after (9|1[0-4])\.[0-9] s, [4-9] bytes sent, got: HTTP/1.1 408" slow.out &&
	test_grep -E "^closed after (9|1[0-4])\.[0-9] s, [4-9] bytes sent" slows.out &&
	test_grep ! "t=${T}slow" "$INET" && test_grep -x "web GET /hello?t=${T}fast" "$INET"
'

test_expect_success "an idle tunnel is cut after the idle timeout; a talking one is not$IN_RT" '
	SBX_TEST_NET_IDLE_MS=2000 sbx create $ROPT --name idle --net open >/dev/null &&
	sbx cp "$HELPERS/netload.py" idle:/workspace/netload.py &&
	sbx exec idle python3 /workspace/netload.py tunnel 3128 "$TN_WEB" 7777 --talk 0.1 --every 0.5 \
		--limit 8 >quiet.out &&
	sbx exec idle python3 /workspace/netload.py tunnel 3128 "$TN_WEB" 7777 --talk 5 --every 1 \
		--limit 5.5 >talk.out &&
	sbx exec open python3 /workspace/netload.py tunnel 3128 "$TN_WEB" 7777 --talk 0.1 --every 0.5 \
		--limit 4 >control.out &&
	cat quiet.out talk.out control.out &&
	test_grep -E "^closed after [1-4]\.[0-9] s" quiet.out && test_grep "^open after 5" talk.out &&
	test_grep "^open after 4" control.out
'


if command -v prlimit >/dev/null; then
	test_expect_success "no thread can be started: lookups fail clearly, in time; the rest goes on$IN_RT" '
		sbx create $ROPT --name nothr --net open --add-host "map.test:$TN_WEB" >/dev/null &&
		no_threads nothr || exit 1
		t0=$(date +%s)
		sbx exec nothr "${NOPX[@]}" curl -sS --max-time 30 -i "http://localhost:$ME/hello?t=${T}nothr1" \
			>resp.lookup &
		sleep 1 &&
		test_eq "hello from web" "$(sbx exec nothr "${CURL[@]}" "http://$TN_WEB/hello?t=${T}nothr2")" &&
		test_eq "hello from web" "$(sbx exec nothr "${CURL[@]}" "http://map.test/hello?t=${T}nothr3")" &&
		wait && cat resp.lookup && t=$(($(date +%s) - t0)) &&
		tr -d "\r" <resp.lookup | head -n 1 | test_grep "^HTTP/1.1 504" &&
		test_grep "cannot resolve localhost: no thread could be started" resp.lookup &&
		test "$t" -ge 9 && test "$t" -le 20 &&
		test_eq 1 "$(sup_field nothr Threads)" &&
		threads_back nothr &&
		through nothr "http://localhost:$ME/hello?t=${T}nothr4" && refused_403 resp "loopback" &&
		test_grep -x "web GET /hello?t=${T}nothr2" "$INET" && test_grep -x "web GET /hello?t=${T}nothr3" "$INET"
	'

	test_expect_success "out of descriptors: the supervisor does not spin, and recovers$IN_RT" '
		sbx create $ROPT --name nofd --net open >/dev/null &&
		sbx cp "$HELPERS/netload.py" nofd:/workspace/netload.py &&
		sup=$(sup_pid nofd) && hard=$(prlimit --pid "$sup" --nofile --raw -o HARD --noheadings) &&
		prlimit --pid "$sup" --nofile="48:$hard" &&
		c0=$(sup_cpu nofd) &&
		sbx exec nofd python3 /workspace/netload.py flood 127.0.0.1 3128 400 --hold 4 \
			--status /workspace/s >/dev/null &&
		c1=$(sup_cpu nofd) && say "supervisor CPU over the flood: $((c1 - c0)) ticks" &&
		test $((c1 - c0)) -lt 150 &&
		prlimit --pid "$sup" --nofile="$hard:$hard" &&
		wait_until 10 sbx exec nofd "${CURL[@]}" -f "http://$TN_WEB/hello?t=${T}nofd" &&
		test_grep -x "web GET /hello?t=${T}nofd" "$INET"
	'
else
	test_skip 'no thread can be started: lookups fail clearly, in time' 'no prlimit'
	test_skip 'out of descriptors: the supervisor does not spin, and recovers' 'no prlimit'
fi
fi

test_expect_success "rm: nothing of the sandboxes, their proxies and previews stays$IN_RT" '
	rm_all_gone
'
}

# bg_exec SB CMD...: CMD runs on in the background of the sandbox (exec -d)
bg_exec() {
	local sb=$1
	shift
	"$SBX" exec -d "$sb" "$@" >/dev/null
}

RT=local T=l ROPT='' IN_RT='' LATER=198.51.100.7 PVNET=none
net_checks
if [ -x "${SBX_RUNSC:-/usr/bin/runsc}" ]; then
	# gVisor on --net none, run by root, has a network stack of its own that previews do not
	# reach (refused, t0230): its previews' sandbox has no egress through the proxy instead
	RT=gvisor T=g ROPT="--runtime gvisor" IN_RT=" (--runtime gvisor)" LATER=198.51.100.8 PVNET=allow=
	net_checks
else
	test_skip "the same checks under --runtime gvisor" "no runsc (scripts/install-deps installs it)"
fi

test_done
