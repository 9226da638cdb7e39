#!/bin/bash
# The egress policy as a sandbox's commands meet it: refusals that say what was refused, why
# and how to allow it (the body, the status line and X-Sbx-Reason, for plain HTTP and
# CONNECT), the line an exec with refusals ends with; sbx update of the allow list of a
# running, paused or stopped sandbox (and the mode switches it refuses); --net-rate's request
# limit (429) and byte limit. The internet is the file's own (tests/helpers/testnet.sh), its
# servers at 192.0.2.2, reached by names that --add-host gives.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl git

HELPERS=$TEST_DIR/helpers

# a repository served by dumb HTTP from www/repo.git, and a file of 2 MiB
make_www() {
	{
		git init -q -b main src && echo "cloned through the proxy" >src/README &&
			git -C src add README &&
			git -C src -c user.name=t -c user.email=t@example.invalid commit -qm one &&
			mkdir -p www && git clone -q --bare src www/repo.git &&
			git -C www/repo.git update-server-info &&
			head -c 2097152 /dev/urandom >www/big.bin
	} >git.log 2>&1
}

ready_port() { sed -n "s/^$2=//p" "$1"; }

make_www || { cat git.log; exit 1; }
if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$TN_WEB" \
		--ready inet.ready --root www --lifetime 300 web:http:80 alt:http:8080 2>inet.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s inet.ready
	# a hosted provider, which cannot change a sandbox's policy
	start_fake e2b || say "the E2B fake did not start" >&2
fi
export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=${FAKE_URL:-} SBX_E2B_SANDBOX_URL=${FAKE_URL:-}
unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN
PORT=$(ready_port inet.ready web) ALT=$(ready_port inet.ready alt)
ADD=(--add-host "web.test:$TN_WEB" --add-host "other.test:$TN_WEB" --add-host "third.test:$TN_WEB")
CURL=(curl -sS --max-time 10)
test_atexit rm_all_gone

# status_of FILE: the status line of curl -i output, without its CR
status_of() { head -n 1 "$1" | tr -d '\r'; }
# body_of FILE: what follows the head
body_of() { tr -d '\r' <"$1" | sed '1,/^$/d'; }

test_expect_success 'setup: a sandbox allowed web.test alone' '
	sbx create --name pol --net allow=web.test --net-preset none "${ADD[@]}" >/dev/null &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://web.test:$PORT/hello")"
'

test_expect_success 'plain HTTP refused: 403, one line naming the host, why, and the update that allows it' '
	sbx exec pol "${CURL[@]}" -i "http://other.test:$PORT/hello?t=r1" >resp 2>err &&
	status_of resp >status && body_of resp >body &&
	test_match "^HTTP/1.1 403 sbx: egress to other.test:$PORT refused: " "$(cat status)" &&
	test_eq 1 "$(grep -c "" body)" &&
	test_grep -F "sbx: egress to other.test:$PORT refused: not in the allow list of sandbox '"'"'pol'"'"'" body &&
	test_grep -F "(allow it: sbx update pol --net-allow other.test)" body &&
	test_eq "$(cat body)" "$(sed -n "1s/^HTTP\/1.1 403 //p" status)" &&
	tr -d "\r" <resp | test_grep -F "X-Sbx-Reason: $(cat body)" &&
	test_grep ! "t=r1" inet.log
'

test_expect_success 'CONNECT refused: curl -v shows the reason in the status line' '
	expect_code 56 sbx exec pol "${CURL[@]}" -v "https://other.test:$PORT/" 2>err &&
	test_grep -F "403 sbx: egress to other.test:$PORT refused" err &&
	test_grep -F "sbx update pol --net-allow other.test" err
'

test_expect_success 'a port not allowed: the update names the port' '
	sbx create --name port --net "allow=web.test:$PORT" --net-preset none "${ADD[@]}" >/dev/null &&
	sbx exec port "${CURL[@]}" -i "http://web.test:$ALT/hello" >resp 2>/dev/null &&
	body_of resp | test_grep -F "port $ALT is not in the allow list" &&
	body_of resp | test_grep -F "sbx update port --net-allow web.test:$ALT" &&
	sbx update port --net-allow "web.test:$ALT" >/dev/null &&
	test_eq "hello from alt" "$(sbx exec port "${CURL[@]}" "http://web.test:$ALT/hello")"
'

test_expect_success 'git shows the refusal: the body of a plain-HTTP 403 (remote:), the status of CONNECT' '
	expect_code 128 sbx exec pol git clone -q "http://other.test:$PORT/repo.git" /tmp/r 2>err &&
	test_grep -F "remote: sbx: egress to other.test:$PORT refused: not in the allow list" err &&
	expect_code 128 sbx exec -e GIT_CURL_VERBOSE=1 pol git clone -q "https://other.test:$PORT/repo.git" /tmp/r 2>err &&
	test_grep -F "HTTP/1.1 403 sbx: egress to other.test:$PORT refused" err
'

test_expect_success 'an exec with refusals ends with one line saying which; one without, with none' '
	sbx exec pol sh -c "$(printf "%q " "${CURL[@]}") -o /dev/null http://other.test:$PORT/a;
		$(printf "%q " "${CURL[@]}") -o /dev/null http://other.test:$PORT/b;
		$(printf "%q " "${CURL[@]}") -o /dev/null http://third.test:$PORT/c; true" 2>err &&
	test_grep -x "sbx: 3 requests were refused by the egress policy: other.test:$PORT (not allowed), third.test:$PORT (not allowed); see sbx logs --egress pol (sbx update pol --net-allow DOMAIN allows one)" err &&
	sbx exec pol "${CURL[@]}" -o /dev/null "http://web.test:$PORT/hello" 2>err &&
	test_grep ! "refused by the egress policy" err &&
	sbx exec pol true 2>err && test_grep ! "refused" err
'

test_expect_success 'update --net-allow: a running sandbox reaches it at once, recorded and logged' '
	sbx update pol --net-allow other.test >out && test_eq pol "$(cat out)" &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://other.test:$PORT/hello?t=u1")" &&
	sbx inspect pol >j &&
	json_assert j "assert r[\"options\"][\"net\"][\"allow\"] == [\"web.test\", \"other.test\"], r" &&
	sbx logs --egress --json pol >log &&
	jsonl_assert log "p = [x for x in r if x.get(\"policy\") == \"update\"]
assert p and p[-1][\"allow\"] == [\"web.test\", \"other.test\"] and p[-1][\"mode\"] == \"allow\", p" &&
	sbx logs --egress pol >table && test_grep "policy" table
'

test_expect_success 'update --net-deny takes it out again; --net allow= replaces the list' '
	sbx update pol --net-deny other.test >/dev/null &&
	sbx exec pol "${CURL[@]}" -i "http://other.test:$PORT/hello?t=u2" >resp 2>/dev/null &&
	test_match " 403 " "$(status_of resp)" &&
	sbx update pol --net allow=third.test,other.test --net-preset none >/dev/null &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://third.test:$PORT/hello")" &&
	sbx exec pol "${CURL[@]}" -i "http://web.test:$PORT/hello?t=u3" >resp 2>/dev/null &&
	test_match " 403 " "$(status_of resp)" &&
	sbx inspect pol >j &&
	json_assert j "assert r[\"options\"][\"net\"][\"allow\"] == [\"third.test\", \"other.test\"], r" &&
	test_grep ! "t=u2" inet.log && test_grep ! "t=u3" inet.log
'

test_expect_success 'update to open, and back: a running sandbox with the proxy switches' '
	sbx update pol --net open >/dev/null &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://web.test:$PORT/hello")" &&
	sbx update pol --net allow=other.test --net-preset none >/dev/null &&
	sbx exec pol "${CURL[@]}" -i "http://web.test:$PORT/hello" >resp 2>/dev/null &&
	test_match " 403 " "$(status_of resp)"
'

test_expect_success 'update of a paused sandbox applies when it resumes; of a stopped one, at boot' '
	sbx pause pol >/dev/null &&
	sbx update pol --net-allow web.test >/dev/null && sbx resume pol >/dev/null &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://web.test:$PORT/hello")" &&
	sbx pause --release pol >/dev/null &&
	sbx update pol --net-deny web.test >/dev/null && sbx resume pol >/dev/null &&
	sbx exec pol "${CURL[@]}" -i "http://web.test:$PORT/hello" >resp 2>/dev/null &&
	test_match " 403 " "$(status_of resp)"
'

test_expect_success 'a mode the namespace was not made for: one line, 125; stopped, it is only recorded' '
	sbx create --name none1 --net none "${ADD[@]}" >/dev/null &&
	expect_code 125 sbx update none1 --net allow=web.test 2>err &&
	test_eq 1 "$(grep -c "" err)" &&
	test_grep "cannot switch to --net allow=" err &&
	expect_code 125 sbx update pol --net none 2>err && test_grep "cannot switch to --net none" err &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://other.test:$PORT/hello")" &&
	sbx pause --release none1 >/dev/null &&
	sbx update none1 --net allow=web.test --net-preset none >/dev/null &&
	sbx resume none1 >/dev/null &&
	test_eq "hello from web" "$(sbx exec none1 "${CURL[@]}" "http://web.test:$PORT/hello")"
'

test_expect_success 'update: bad input is a usage error, before anything is looked at' '
	expect_code 125 sbx update pol 2>err && test_grep "nothing to change" err &&
	expect_code 125 sbx update pol --net-allow "bad name" 2>err && test_grep "invalid --net-allow" err &&
	expect_code 125 sbx update pol --net-rate 5x/s 2>err && test_grep "invalid --net-rate" err &&
	expect_code 125 sbx update pol --net host 2>err && test_grep "chosen when a sandbox is created" err &&
	expect_code 125 sbx update none1 --net none --net-rate 5r/s 2>err &&
	test_grep "net-rate goes with" err &&
	expect_code 125 sbx create --net none --net-rate 5r/s 2>err && test_grep "net-rate goes with" err
'

test_expect_success 'local declares net-update and net-rate; e2b neither, and is refused before any request' '
	sbx provider ls --json >j &&
	json_assert j "l = [p for p in r if p[\"name\"] == \"local\"][0][\"capabilities\"]
assert \"net-update\" in l and \"net-rate\" in l, l
e = [p for p in r if p[\"name\"] == \"e2b\"][0][\"capabilities\"]
assert \"net-update\" not in e and \"net-rate\" not in e, e" &&
	test -n "$FAKE_URL" &&
	sbx create --provider e2b --name hosted --net open >/dev/null &&
	fake_reset &&
	expect_code 125 sbx update hosted --net-allow web.test 2>err &&
	test_eq 1 "$(grep -c "" err)" &&
	test_grep -F "provider '"'"'e2b'"'"' cannot change the egress policy" err &&
	fake_requests req.json && json_assert req.json "assert r == [], r" &&
	expect_code 125 sbx create --provider e2b --net open --net-rate 5r/s 2>err &&
	test_grep -F "provider '"'"'e2b'"'"' does not support --net-rate" err &&
	sbx rm -f hosted >/dev/null
'

# N requests to web.test through SB, one by one: each status code on a line of codes
burst() {
	sbx exec "$1" sh -c "for i in \$(seq $2); do
		$(printf "%q " "${CURL[@]}") -o /dev/null -w \"%{http_code}\n\" http://web.test:$PORT/hello?t=$3\$i; done"
}

test_expect_success '--net-rate: over the request limit, 429 with the reason and Retry-After; logged' '
	sbx create --name rate --net allow=web.test --net-preset none --net-rate 5r/m "${ADD[@]}" >/dev/null &&
	burst rate 40 rl >codes 2>err &&
	test_eq 5 "$(grep -c "^200$" codes)" && test_eq 35 "$(grep -c "^429$" codes)" &&
	test_grep -x "sbx: 35 requests were refused by the egress policy: web.test:$PORT (over the rate limit); see sbx logs --egress rate" err &&
	sbx exec rate "${CURL[@]}" -i "http://web.test:$PORT/hello?t=rl-x" >resp 2>/dev/null &&
	test_match "^HTTP/1.1 429 sbx: egress to web.test:$PORT refused: over the rate limit of sandbox" "$(status_of resp)" &&
	tr -d "\r" <resp | test_grep -x "Retry-After: 1" &&
	body_of resp | test_grep -F "(raise it: sbx update rate --net-rate 10r/m)" &&
	sbx logs --egress --json rate >log &&
	jsonl_assert log "d = [x for x in r if x.get(\"verdict\") == \"deny\" and \"rate limit\" in x[\"reason\"]]
assert len(d) == 36, len(d)" &&
	sbx inspect rate >j &&
	json_assert j "assert r[\"options\"][\"net\"][\"rates\"] == [{\"domain\": None, \"requests\": 5, \"per_s\": 60, \"bytes_per_s\": 0}], r"
'

test_expect_success '--net-rate: the control, no limit: the same loop gets no 429' '
	sbx update pol --net-allow web.test >/dev/null &&
	burst pol 40 nl >codes 2>err &&
	test_eq 40 "$(grep -c "^200$" codes)" && test_grep ! "refused" err
'

test_expect_success 'update --net-rate: a limit for a domain, then none' '
	sbx update pol --net-rate web.test=3r/h >/dev/null &&
	burst pol 10 dl >codes 2>/dev/null &&
	test_eq 3 "$(grep -c "^200$" codes)" && test_eq 7 "$(grep -c "^429$" codes)" &&
	test_eq "hello from web" "$(sbx exec pol "${CURL[@]}" "http://other.test:$PORT/hello")" &&
	sbx update pol --net-rate web.test=none >/dev/null &&
	burst pol 10 dn >codes 2>/dev/null && test_eq 10 "$(grep -c "^200$" codes)"
'

test_expect_success '--net-rate: a byte limit slows a download down, which arrives whole; the log says so' '
	sbx create --name slow --net allow=web.test --net-preset none --net-rate 512k/s "${ADD[@]}" >/dev/null &&
	sbx exec slow "${CURL[@]}" --max-time 60 -o /tmp/big.bin "http://web.test:$PORT/big.bin?t=slow" &&
	test_eq "$(sha256sum <www/big.bin)" "$(sbx exec slow sh -c "sha256sum </tmp/big.bin")" &&
	sbx logs --egress --json slow >log &&
	jsonl_assert log "d = [x for x in r if x.get(\"domain\") == \"web.test\" and x[\"verdict\"] == \"allow\"]
assert len(d) == 1 and d[0][\"bytes_down\"] >= 2097152, d
assert d[0].get(\"throttled_ms\", 0) > 0, d" &&
	sbx exec pol "${CURL[@]}" -o /tmp/big.bin "http://web.test:$PORT/big.bin?t=fast" &&
	test_eq "$(sha256sum <www/big.bin)" "$(sbx exec pol sh -c "sha256sum </tmp/big.bin")" &&
	sbx logs --egress --json pol >log &&
	jsonl_assert log "d = [x for x in r if x.get(\"domain\") == \"web.test\" and x.get(\"bytes_down\", 0) >= 2097152]
assert len(d) == 1 and \"throttled_ms\" not in d[0], d"
'

test_expect_success 'rm: nothing of the sandboxes stays' '
	rm_all_gone
'

test_done
