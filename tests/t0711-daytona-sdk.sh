#!/bin/bash
# The loopback Daytona fake (tests/fakes/daytona.py) against Daytona's own TypeScript SDK
# (@daytonaio/sdk, pinned in tests/sdk/daytona): the SDK creates a sandbox and polls it
# started, runs commands and a session, uploads and downloads a file, stops and starts, asks
# for a preview link, pages through the list and deletes (tests/sdk/daytona/check.mjs). Then
# the fake itself, with curl: creating -> started seen by polling, 401 without the key, 422
# for a pause of a container sandbox, a linux-vm sandbox that pauses with its memory, the
# toolbox refusing a stopped sandbox, injected faults; and nothing left once it stops.
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl node npm

FAKE=$TEST_DIR/fakes/daytona.py
SDK=$TEST_DIR/sdk/daytona
KEY=dtn_t0711_key
FAKE_HOME=$TRASH/fake-home
CURL=(curl -sS --max-time 20 --noproxy "*")
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
# npm and node reach the registry; the SDK, curl and the fakes only 127.0.0.1
unset DAYTONA_API_KEY DAYTONA_API_URL DAYTONA_SERVER_URL DAYTONA_TARGET DAYTONA_JWT_TOKEN \
	DAYTONA_ORGANIZATION_ID DAYTONA_OTEL_ENABLED DAYTONA_EXPERIMENTAL_OTEL_ENABLED

# daytona_fake NAME ARGS...: the fake, with its port in NAME.port and pid in NAME.pid (bounded)
daytona_fake() {
	local n=$1
	shift
	"$TEST_PYTHON" "$FAKE" --sbx "$SBX" --sbx-home "$FAKE_HOME" --port-file "$TRASH/$n.port" \
		--api-key "$KEY" "$@" >"$TRASH/$n.out" 2>"$TRASH/$n.err" &
	echo $! >"$TRASH/$n.pid"
	wait_until 15 test -s "$TRASH/$n.port"
}

# call PORT METHOD PATH [JSON]: the fake's answer in ./body, its HTTP status on stdout
call() {
	local port=$1 m=$2 p=$3 data=()
	[ $# -ge 4 ] && data=(-H 'Content-Type: application/json' --data "$4")
	"${CURL[@]}" -o body -w '%{http_code}' -X "$m" -H "Authorization: Bearer $KEY" \
		"${data[@]}" "http://127.0.0.1:$port$p"
}

# expect_call STATUS PORT METHOD PATH [JSON]: call answers STATUS (else says what it got)
expect_call() {
	local want=$1 got
	shift
	got=$(call "$@")
	[ "$got" = "$want" ] && return 0
	say "$2 $3 answered $got, not $want: $(cat body)" >&2
	return 1
}

# jcheck FILE 'python statements on r': like json_assert, with the Python sandboxes see
jcheck() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[2])' "$1" "$2"
}

# field NAME: a top-level field of ./body
field() { jcheck body "print(r[\"$1\"])"; }

# state_of PORT ID: the sandbox's state, as GET says
state_of() { call "$1" GET "/sandbox/$2" >/dev/null && field state; }

# in_state PORT ID STATE: GET says the sandbox is in STATE (for wait_until)
in_state() { [ "$(state_of "$1" "$2")" = "$3" ]; }

# backing PORT ID: the local sbx sandbox behind the fake's sandbox ID
backing() {
	"${CURL[@]}" "http://127.0.0.1:$1/_fake/state" |
		"$TEST_PYTHON" -c 'import json, sys
print([b["backing"] for b in json.load(sys.stdin)["sandboxes"] if b["id"] == sys.argv[1]][0])' "$2"
}

# whatever a failed run leaves in the fake's store goes too (runs after the fakes stop)
test_atexit 'for id in $(SBX_HOME="$FAKE_HOME" "$SBX" ls -q 2>/dev/null); do
	SBX_HOME="$FAKE_HOME" "$SBX" rm -f "$id"; done'

if [ -z "$TEST_SKIP_ALL" ]; then
	daytona_fake main --start-delay 1
	test_atexit "stop_pid $(cat "$TRASH/main.pid")"
	daytona_fake vm --class linux-vm --start-delay 0.3
	test_atexit "stop_pid $(cat "$TRASH/vm.pid")"
	PORT=$(cat "$TRASH/main.port")
	VM_PORT=$(cat "$TRASH/vm.port")
fi

test_expect_success 'the fakes listen on 127.0.0.1 and say so' '
	test_ne "" "$PORT" && test_ne "" "$VM_PORT" &&
	test_grep -x "daytona fake listening on http://127.0.0.1:$PORT" main.out &&
	test_grep -x "daytona fake listening on http://127.0.0.1:$VM_PORT" vm.out
'

TEST_TIMEOUT=300
test_expect_success 'npm ci installs the pinned SDK' '
	mkdir sdk && cp "$SDK/package.json" "$SDK/package-lock.json" "$SDK/check.mjs" sdk/ || exit 1
	(cd sdk && timeout 280 npm ci --no-audit --no-fund --ignore-scripts >../npm.log 2>&1) ||
		{ tail -n 20 npm.log; exit 1; }
	test_eq "$(node -p "require(\"./sdk/package.json\").dependencies[\"@daytonaio/sdk\"]")" \
		"$(node -p "require(\"./sdk/node_modules/@daytonaio/sdk/package.json\").version")"
'
TEST_TIMEOUT=120

test_expect_success 'the SDK drives the fake: create, exec, session, files, stop, start, list, delete' '
	"${CURL[@]}" -X DELETE "http://127.0.0.1:$PORT/_fake/requests" >/dev/null &&
	(cd sdk && DAYTONA_API_URL="http://127.0.0.1:$PORT" DAYTONA_API_KEY=$KEY \
		timeout 100 node check.mjs) >check.out 2>&1
	rc=$?
	cat check.out
	test_eq 0 "$rc" && test_grep "^# check.mjs: [0-9]* checks passed" check.out
'

test_expect_success 'the SDK sent its key and version, polled, and paged with a cursor' '
	"${CURL[@]}" "http://127.0.0.1:$PORT/_fake/requests" >reqs.json &&
	jcheck reqs.json "
sdk = [q for q in r if q[\"headers\"].get(\"User-Agent\", \"\").startswith(\"sdk-typescript\")]
assert len(sdk) > 20, len(sdk)
bad = [q for q in sdk if q[\"headers\"].get(\"Authorization\") not in (\"Bearer $KEY\", \"Bearer dtn_wrong\")]
assert not bad, bad[:2]
assert all(q[\"headers\"].get(\"X-Daytona-SDK-Version\") == \"0.190.1\" for q in sdk)
gets = [q for q in sdk if q[\"method\"] == \"GET\" and q[\"path\"].startswith(\"/sandbox/\")]
assert len(gets) >= 3, \"the SDK did not poll\"
assert any(\"cursor=\" in q[\"query\"] for q in sdk if q[\"path\"] == \"/sandbox\"), \"no second page\"
assert any(q[\"path\"].endswith(\"/files/bulk-upload\") for q in sdk)
assert any(q[\"path\"].endswith(\"/process/execute\") for q in sdk)
" &&
	SBX_HOME="$FAKE_HOME" "$SBX" ls -q >left && test ! -s left
'

test_expect_success '401 without the key or with a wrong one, in NestJS error JSON' '
	test_eq 401 "$("${CURL[@]}" -o body -w "%{http_code}" "http://127.0.0.1:$PORT/sandbox")" &&
	jcheck body "assert r[\"statusCode\"] == 401 and r[\"error\"] == \"Unauthorized\", r
assert r[\"path\"] == \"/sandbox\" and r[\"message\"] and r[\"timestamp\"].endswith(\"Z\"), r" &&
	test "$("${CURL[@]}" -o body -w "%{http_code}" -H "Authorization: Bearer nope" \
		"http://127.0.0.1:$PORT/toolbox/x/process/execute")" = 401 &&
	jcheck body "assert r[\"statusCode\"] == 401 and r[\"code\"] == \"UNAUTHORIZED\", r
assert r[\"method\"] == \"GET\" and r[\"path\"] == \"/toolbox/x/process/execute\", r"
'

test_expect_success 'create answers "creating"; polling GET sees it become "started"' '
	expect_call 200 "$PORT" POST /sandbox "{\"name\":\"curl-box\",\"env\":{\"FROM_CREATE\":\"yes\"},\"labels\":{\"t\":\"0711\"}}" &&
	id=$(sed -n "s/^{\"id\":\"\([^\"]*\)\".*/\1/p" body) && test_ne "" "$id" && : >seen &&
	for i in $(seq 100); do
		"${CURL[@]}" -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/sandbox/$id" >state.json &&
			s=$(sed -n "s/.*\"state\":\"\([a-z_]*\)\".*/\1/p" state.json) && echo "$s" >>seen &&
			test "$s" = started && break
		sleep 0.05
	done &&
	test_eq creating "$(head -n 1 seen)" && test_eq started "$(tail -n 1 seen)" &&
	test_eq "creating started " "$(sort -u seen | tr "\n" " ")" &&
	jcheck body "assert r[\"state\"] == \"creating\" and r[\"name\"] == \"curl-box\", r
assert r[\"toolboxProxyUrl\"] == \"http://127.0.0.1:$PORT/toolbox\", r
assert r[\"sandboxClass\"] == \"container\" and r[\"env\"] == {\"FROM_CREATE\": \"yes\"}, r" &&
	echo "$id" >id &&
	expect_call 409 "$PORT" POST /sandbox "{\"name\":\"curl-box\"}" &&
	jcheck body "assert r[\"statusCode\"] == 409 and r[\"error\"] == \"Conflict\", r" &&
	expect_call 200 "$PORT" GET /sandbox/curl-box && test_eq "$id" "$(field id)"
'

test_expect_success 'toolbox with curl: execute keeps the exit status; env from create' '
	id=$(cat id) &&
	expect_call 200 "$PORT" POST "/toolbox/$id/process/execute" \
		"{\"command\":\"echo \$FROM_CREATE \$X; echo oops >&2; exit 9\",\"envs\":{\"X\":\"1\"},\"timeout\":10}" &&
	jcheck body "assert r == {\"exitCode\": 9, \"result\": \"yes 1\\noops\\n\"}, r" &&
	expect_call 408 "$PORT" POST "/toolbox/$id/process/execute" "{\"command\":\"sleep 10\",\"timeout\":1}" &&
	jcheck body "assert r[\"statusCode\"] == 408 and r[\"code\"] == \"REQUEST_TIMEOUT\", r" &&
	expect_call 404 "$PORT" POST /toolbox/nope/process/execute "{\"command\":\"true\"}"
'

test_expect_success 'pause of a container sandbox: 422, and it stays started' '
	id=$(cat id) &&
	expect_call 422 "$PORT" POST "/sandbox/$id/pause" &&
	jcheck body "assert r[\"statusCode\"] == 422 and r[\"path\"] == \"/sandbox/$id/pause\", r" &&
	test_eq started "$(state_of "$PORT" "$id")"
'

test_expect_success 'stop: "stopping" then "stopped"; the toolbox refuses; start keeps the files' '
	id=$(cat id) &&
	expect_call 200 "$PORT" POST "/toolbox/$id/process/execute" "{\"command\":\"echo kept >/workspace/f\"}" &&
	expect_call 200 "$PORT" POST "/sandbox/$id/stop" && test_eq stopping "$(field state)" &&
	wait_until 10 in_state "$PORT" "$id" stopped &&
	test_eq stopped "$(state_of "$PORT" "$id")" &&
	b=$(backing "$PORT" "$id") && test_eq released "$(SBX_HOME="$FAKE_HOME" sb_state "$b")" &&
	expect_call 400 "$PORT" POST "/toolbox/$id/process/execute" "{\"command\":\"true\"}" &&
	jcheck body "assert r[\"code\"] == \"BAD_REQUEST\" and \"not started\" in r[\"message\"], r" &&
	expect_call 200 "$PORT" POST "/sandbox/$id/start" && test_eq starting "$(field state)" &&
	wait_until 10 in_state "$PORT" "$id" started &&
	expect_call 200 "$PORT" GET "/toolbox/$id/files/download?path=/workspace/f" &&
	test_eq kept "$(cat body)"
'

test_expect_success 'list: small pages joined by nextCursor; the deprecated paginated form' '
	for n in 1 2 3; do expect_call 200 "$PORT" POST /sandbox "{\"labels\":{\"page\":\"$n\"}}" || exit 1; done &&
	cur= && : >ids && pages=0 &&
	while :; do
		expect_call 200 "$PORT" GET "/sandbox?limit=100${cur:+&cursor=$cur}" || exit 1
		pages=$((pages + 1)) && test "$pages" -lt 10 || exit 1
		jcheck body "assert len(r[\"items\"]) <= 2 and \"env\" not in r[\"items\"][0], r
for i in r[\"items\"]: print(i[\"id\"])" >>ids || exit 1
		cur=$(jcheck body "print(r[\"nextCursor\"] or \"\")") && test_ne "" "$cur" || break
	done &&
	test_eq 2 "$pages" && test_eq 4 "$(sort -u ids | wc -l)" && test_eq 4 "$(wc -l <ids)" &&
	expect_call 200 "$PORT" GET "/sandbox/paginated?page=2&limit=3" &&
	jcheck body "assert r[\"total\"] == 4 and r[\"page\"] == 2 and r[\"totalPages\"] == 2, r
assert len(r[\"items\"]) == 2, r" &&
	expect_call 200 "$PORT" GET "/sandbox?labels=%7B%22page%22%3A%222%22%7D" &&
	jcheck body "assert [i[\"labels\"][\"page\"] for i in r[\"items\"]] == [\"2\"], r" &&
	expect_call 400 "$PORT" GET "/sandbox?limit=201"
'

test_expect_success 'preview URL: https://PORT-ID.daytona.test and a token' '
	id=$(cat id) &&
	expect_call 200 "$PORT" GET "/sandbox/$id/ports/3000/preview-url" &&
	jcheck body "assert r[\"url\"] == \"https://3000-$id.daytona.test\" and r[\"sandboxId\"] == \"$id\", r
assert len(r[\"token\"]) > 10, r"
'

test_expect_success 'faults: an injected 503 with Daytona error JSON, then a normal answer' '
	id=$(cat id) &&
	"${CURL[@]}" -X POST "http://127.0.0.1:$PORT/_fake/faults" \
		--data "{\"match\":\"GET /sandbox/$id\$\",\"kind\":\"status\",\"status\":503}" >/dev/null &&
	expect_call 503 "$PORT" GET "/sandbox/$id" &&
	jcheck body "assert r[\"statusCode\"] == 503 and r[\"error\"] == \"Service Unavailable\", r
assert r[\"path\"] == \"/sandbox/$id\" and \"message\" in r and \"timestamp\" in r, r" &&
	expect_call 200 "$PORT" GET "/sandbox/$id" &&
	"${CURL[@]}" -X POST "http://127.0.0.1:$PORT/_fake/faults" \
		--data "{\"match\":\"POST /process/execute\",\"kind\":\"invalid_json\"}" >/dev/null &&
	expect_call 200 "$PORT" POST "/toolbox/$id/process/execute" "{\"command\":\"true\"}" &&
	! jcheck body "pass" 2>/dev/null &&
	expect_call 200 "$PORT" POST "/toolbox/$id/process/execute" "{\"command\":\"true\"}" &&
	jcheck body "assert r == {\"exitCode\": 0, \"result\": \"\"}, r"
'

test_expect_success 'linux-vm: pause keeps a session shell in memory, start resumes it' '
	expect_call 200 "$VM_PORT" POST /sandbox "{}" && field id >vmid && vid=$(cat vmid) &&
	wait_until 10 in_state "$VM_PORT" "$vid" started &&
	expect_call 400 "$VM_PORT" POST "/sandbox/$vid/archive" &&
	expect_call 201 "$VM_PORT" POST "/toolbox/$vid/process/session" "{\"sessionId\":\"s\"}" &&
	expect_call 409 "$VM_PORT" POST "/toolbox/$vid/process/session" "{\"sessionId\":\"s\"}" &&
	expect_call 200 "$VM_PORT" POST "/toolbox/$vid/process/session/s/exec" "{\"command\":\"V=in-memory; cd /tmp\"}" &&
	expect_call 200 "$VM_PORT" POST "/sandbox/$vid/pause" && test_eq pausing "$(field state)" &&
	wait_until 10 in_state "$VM_PORT" "$vid" paused &&
	b=$(backing "$VM_PORT" "$vid") && test_eq paused "$(SBX_HOME="$FAKE_HOME" sb_state "$b")" &&
	expect_call 400 "$VM_PORT" POST "/sandbox/$vid/pause" &&
	expect_call 200 "$VM_PORT" POST "/sandbox/$vid/start" && test_eq resuming "$(field state)" &&
	wait_until 10 in_state "$VM_PORT" "$vid" started &&
	expect_call 200 "$VM_PORT" POST "/toolbox/$vid/process/session/s/exec" "{\"command\":\"echo \$V \$(pwd); echo e >&2\"}" &&
	jcheck body "assert (r[\"stdout\"], r[\"stderr\"], r[\"exitCode\"]) == (\"in-memory /tmp\\n\", \"e\\n\", 0), r" &&
	expect_call 200 "$VM_PORT" POST "/sandbox/$vid/stop" &&
	wait_until 10 in_state "$VM_PORT" "$vid" stopped &&
	expect_call 200 "$VM_PORT" POST "/sandbox/$vid/archive" &&
	wait_until 10 in_state "$VM_PORT" "$vid" archived &&
	expect_call 200 "$VM_PORT" POST "/sandbox/$vid/start" && test_eq restoring "$(field state)" &&
	wait_until 10 in_state "$VM_PORT" "$vid" started &&
	expect_call 404 "$VM_PORT" GET "/toolbox/$vid/process/session/s"
'

test_expect_success 'delete: 200 "destroying", then 404; the backing sandbox is gone' '
	id=$(cat id) && b=$(backing "$PORT" "$id") &&
	expect_call 200 "$PORT" DELETE "/sandbox/$id" && test_eq destroying "$(field state)" &&
	expect_call 404 "$PORT" GET "/sandbox/$id" &&
	jcheck body "assert r[\"statusCode\"] == 404 and r[\"error\"] == \"Not Found\", r" &&
	expect_code 125 env SBX_HOME="$FAKE_HOME" "$SBX" inspect "$b" 2>/dev/null &&
	expect_call 404 "$PORT" DELETE "/sandbox/$id"
'

test_expect_success 'SIGTERM: the fakes exit 0 and remove every sandbox they made' '
	SBX_HOME="$FAKE_HOME" "$SBX" ls -q >before && test "$(wc -l <before)" -ge 4 &&
	pids=$(cat "$FAKE_HOME"/sandboxes/*/pids 2>/dev/null | awk "{ print \$1; print \$3 }") &&
	p1=$(cat main.pid) && p2=$(cat vm.pid) && kill -TERM "$p1" "$p2" &&
	wait_until 15 eval "! pid_alive $p1 && ! pid_alive $p2" &&
	SBX_HOME="$FAKE_HOME" "$SBX" ls -q >after && test ! -s after &&
	for p in $pids; do ! pid_alive "$p" || exit 1; done &&
	test_grep ! Traceback main.err vm.err
'

test_done
