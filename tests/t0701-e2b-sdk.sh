#!/bin/bash
# The E2B fake (tests/fakes/e2b.py, on tests/fakes/fakelib.py) against the official e2b SDK,
# pinned in tests/sdk/e2b (npm ci into the trash directory): tests/sdk/e2b/check.mjs creates,
# runs commands, moves files, lists, pauses, resumes and kills through it. Then curl checks
# what an SDK hides: the raw Connect framing of Process.Start (flags, keepalive, the end
# event of an exit and of a signal death, the end-of-stream frame, Connect-Timeout-Ms), the
# envd token and a paused sandbox, X-Next-Token paging, 401 without a key, and the control
# API's faults and request log. The fake's sandboxes are real local sbx sandboxes in a store
# of their own; none may outlive the fake. Every request goes to 127.0.0.1.
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl node npm &&
	{ node -e 'const [a, b] = process.versions.node.split(".").map(Number);
		process.exit(a > 22 || (a === 22 && b >= 12) || (a === 20 && b >= 19) ? 0 : 1)' ||
		TEST_SKIP_ALL="missing prerequisite Node.js 20.19 or later (the SDK require()s ES modules)"; }

SDK_SRC=$TEST_DIR/sdk/e2b
FAKE=$TEST_DIR/fakes/e2b.py
FAKE_HOME=$TRASH/fake-home
KEY=e2b_test_key
DOMAIN=e2b.test
# npm and node must reach the registry, curl only 127.0.0.1
unset E2B_API_KEY E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN
CURL=(curl -sS --max-time 20 --noproxy "*")

# --- functions ----------------------------------------------------------------------------------
# fake_rm_all: sbx rm -f every sandbox left in the fake's store
fake_rm_all() {
	local id
	[ -d "$FAKE_HOME" ] || return 0
	for id in $(SBX_HOME=$FAKE_HOME "$SBX" ls -q 2>/dev/null); do
		SBX_HOME=$FAKE_HOME "$SBX" rm -f "$id" >/dev/null 2>&1
	done
	return 0
}

# the fake: started here, at the file's level, so that every test can reach it
"$TEST_PYTHON" "$FAKE" --sbx "$SBX" --sbx-home "$FAKE_HOME" --port-file "$TRASH/fake.port" \
	--api-key "$KEY" --domain "$DOMAIN" >"$TRASH/fake.log" 2>&1 &
FAKE_PID=$!
test_atexit 'stop_fake; fake_rm_all'

# stop_fake: SIGTERM, then up to 30 s for it to remove its sandboxes (SIGKILL after that)
stop_fake() {
	kill -TERM "$FAKE_PID" 2>/dev/null
	wait_until 30 eval '! pid_alive "$FAKE_PID"' || kill -KILL "$FAKE_PID" 2>/dev/null
	! pid_alive "$FAKE_PID"
}

url() { printf 'http://127.0.0.1:%s%s' "$(cat "$TRASH/fake.port")" "$1"; }

# api METHOD PATH [curl args...]: a control-plane request with the API key
api() {
	local m=$1 p=$2
	shift 2
	"${CURL[@]}" -X "$m" -H "X-API-Key: $KEY" "$@" "$(url "$p")"
}

# jassert FILE 'python statements on r': r is FILE's JSON (json_assert, with Debian's python3)
jassert() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[2])' "$1" "$2"
}

# jget FILE PATH: the value at PATH (keys and indexes joined by '.'), strings raw
jget() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1]))
for k in [k for k in sys.argv[2].split(".") if k]:
    r = r[int(k)] if isinstance(r, list) else r[k]
print(r if isinstance(r, str) else json.dumps(r, sort_keys=True))' "$1" "$2"
}

# new_sandbox NAME [JSON]: POST /sandboxes (secured by default); NAME.json holds the answer
NEW_SANDBOX='{"templateID":"base","timeout":300,"secure":true}'
new_sandbox() {
	api POST /sandboxes -H "Content-Type: application/json" -o "$1.json" -w "%{http_code}" \
		-d "${2:-$NEW_SANDBOX}" >"$1.code" || return 1
	if [ "$(cat "$1.code")" != 201 ]; then
		cat "$1.json" >&2
		return 1
	fi
}

# envd NAME PATH [curl args...]: an envd request for sandbox NAME (its id and token)
envd() {
	local n=$1 p=$2
	shift 2
	"${CURL[@]}" -H "E2b-Sandbox-Id: $(jget "$n.json" sandboxID)" -H "E2b-Sandbox-Port: 49983" \
		-H "X-Access-Token: $(jget "$n.json" envdAccessToken)" "$@" "$(url "$p")"
}

# envelope JSON: one Connect envelope (flags 0) around JSON, on stdout
envelope() {
	"$TEST_PYTHON" -c 'import struct, sys
b = sys.argv[1].encode()
sys.stdout.buffer.write(struct.pack(">BI", 0, len(b)) + b)' "$1"
}

# start NAME CMD OUT [curl args...]: Process.Start of bash -c CMD; the raw body into OUT,
# headers into OUT.h, curl's status into OUT.rc
start() {
	local n=$1 cmd=$2 out=$3 body
	shift 3
	body=$("$TEST_PYTHON" -c 'import json, sys
print(json.dumps({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", sys.argv[1]]},
                  "stdin": False}))' "$cmd")
	envelope "$body" >"$out.req"
	envd "$n" /process.Process/Start -X POST -H "Content-Type: application/connect+json" \
		-H "Connect-Protocol-Version: 1" -D "$out.h" --data-binary "@$out.req" "$@" >"$out"
	echo $? >"$out.rc"
}

# frames FILE: the Connect envelopes of FILE as a JSON list of {"flags", "msg"} (msg parsed;
# "raw" instead when it is not JSON; {"short": N} for a header announcing more than is there)
frames() {
	"$TEST_PYTHON" -c 'import json, struct, sys
d, i, out = open(sys.argv[1], "rb").read(), 0, []
while i < len(d):
    if len(d) - i < 5:
        out.append({"short": len(d) - i})
        break
    f, n = struct.unpack(">BI", d[i:i + 5])
    if len(d) - i - 5 < n:
        out.append({"flags": f, "short": n})
        break
    p = d[i + 5:i + 5 + n]
    try:
        out.append({"flags": f, "msg": json.loads(p)})
    except ValueError:
        out.append({"flags": f, "raw": p.decode("latin-1")})
    i += 5 + n
print(json.dumps(out))' "$1"
}

# fassert FILE 'python on f': f is frames FILE, e the list of events, x the end-stream message
fassert() {
	frames "$1" >"$1.frames" &&
	"$TEST_PYTHON" -c 'import json, sys
f = json.load(open(sys.argv[1]))
e = [x["msg"]["event"] for x in f if x.get("flags") == 0 and "msg" in x]
x = f[-1]["msg"] if f and f[-1].get("flags") == 2 else None
try:
    exec(sys.argv[2])
except AssertionError:
    print("frames:", json.dumps(f), file=sys.stderr)
    raise' "$1.frames" "$2"
}

b64() { printf %s "$1" | base64; }

# --- the SDK --------------------------------------------------------------------------------
TEST_TIMEOUT=300
test_expect_success 'npm ci installs the pinned e2b SDK' '
	mkdir sdk &&
	cp "$SDK_SRC/package.json" "$SDK_SRC/package-lock.json" "$SDK_SRC/check.mjs" sdk/ &&
	(cd sdk && timeout 280 npm ci --no-audit --no-fund --loglevel=error) &&
	test -f sdk/node_modules/e2b/package.json &&
	test_grep "\"version\": \"$(jget sdk/package.json dependencies.e2b)\"" \
		sdk/node_modules/e2b/package.json
'
TEST_TIMEOUT=60

test_expect_success 'the fake listens on 127.0.0.1 and says so' '
	wait_until 20 test -s "$TRASH/fake.port" &&
	test_grep -Ex "[0-9]+" "$TRASH/fake.port" &&
	test_grep -x "e2b fake listening on http://127.0.0.1:$(cat "$TRASH/fake.port")" \
		"$TRASH/fake.log"
'

TEST_TIMEOUT=120
test_expect_success 'the official SDK drives the fake (check.mjs)' '
	E2B_API_URL=$(url "") E2B_SANDBOX_URL=$(url "") E2B_API_KEY=$KEY E2B_DOMAIN=$DOMAIN \
		timeout 50 node sdk/check.mjs >sdk.out 2>&1
	rc=$?
	cat sdk.out
	test_eq 0 "$rc" && test_grep ! "^not ok" sdk.out && test_grep -E "^# [0-9]+ checks passed" sdk.out &&
	# what it made, it killed
	"${CURL[@]}" "$(url /_fake/state)" >state.json &&
	jassert state.json "assert r == {}, r"
'
TEST_TIMEOUT=60

# --- the control plane with curl --------------------------------------------------------------
test_expect_success 'control plane: 401 and the Error JSON without a key or with a wrong one' '
	"${CURL[@]}" -o nokey.json -w "%{http_code}" "$(url /v2/sandboxes)" >code &&
	test_eq 401 "$(cat code)" &&
	jassert nokey.json "assert r[\"code\"] == 401 and r[\"message\"], r" &&
	"${CURL[@]}" -H "X-API-Key: e2b_wrong" -o bad.json -w "%{http_code}" \
		"$(url /sandboxes/nope)" >code &&
	test_eq 401 "$(cat code)" &&
	jassert bad.json "assert r[\"code\"] == 401, r" &&
	api GET /sandboxes/nope -o nf.json -w "%{http_code}" >code && test_eq 404 "$(cat code)" &&
	jassert nf.json "assert r[\"code\"] == 404, r"
'

test_expect_success 'POST /sandboxes: 201, an id of [a-z0-9], the token, the domain, envVars' '
	new_sandbox a "{\"templateID\":\"base\",\"timeout\":300,\"secure\":true,\"envVars\":{\"GREETING\":\"hi there\"},\"metadata\":{\"who\":\"t0701\"}}" &&
	jassert a.json "import re
assert re.fullmatch(\"[a-z0-9]+\", r[\"sandboxID\"]), r
assert r[\"envdAccessToken\"] and r[\"domain\"] == \"$DOMAIN\" and r[\"envdVersion\"], r
assert r[\"trafficAccessToken\"] is None, r" &&
	api POST /sandboxes -H "Content-Type: application/json" -d "{\"timeout\":5}" \
		-o notpl.json -w "%{http_code}" >code &&
	test_eq 400 "$(cat code)" &&
	api GET "/sandboxes/$(jget a.json sandboxID)" -o a.detail &&
	jassert a.detail "assert r[\"state\"] == \"running\" and r[\"metadata\"] == {\"who\": \"t0701\"}, r"
'

test_expect_success 'Process.Start framing: start, stdout and stderr apart, keepalive, end, end-of-stream' '
	start a "echo out \$GREETING; echo err >&2; sleep 1.5; printf tail; exit 7" s1 \
		-H "Keepalive-Ping-Interval: 1" &&
	test_eq 0 "$(cat s1.rc)" &&
	test_grep -i "^content-type: application/connect+json" s1.h &&
	test_grep "^HTTP/1.1 200" s1.h &&
	fassert s1 "
assert [x[\"flags\"] for x in f] == [0] * (len(f) - 1) + [2], f
assert \"pid\" in e[0][\"start\"] and e[0][\"start\"][\"pid\"] > 0, e
out = b\"\".join(__import__(\"base64\").b64decode(v[\"data\"][\"stdout\"]) for v in e if \"stdout\" in v.get(\"data\", {}))
err = b\"\".join(__import__(\"base64\").b64decode(v[\"data\"][\"stderr\"]) for v in e if \"stderr\" in v.get(\"data\", {}))
assert out == b\"out hi there\\ntail\", out
assert err == b\"err\\n\", err
assert any(\"keepalive\" in v for v in e), e
assert e[-1] == {\"end\": {\"exitCode\": 7, \"exited\": True, \"status\": \"exit status 7\", \"error\": \"exit status 7\"}}, e[-1]
assert x == {}, x" &&
	start a "exit 0" s0 &&
	fassert s0 "assert e[-1] == {\"end\": {\"exited\": True, \"status\": \"exit status 0\"}}, e[-1]
assert x == {}, x"
'

test_expect_success 'Process.Start: a signal death is exitCode -1, no exited, "signal: killed"' '
	start a "echo before; kill -9 \$\$" s2 &&
	fassert s2 "assert e[-1] == {\"end\": {\"exitCode\": -1, \"status\": \"signal: killed\", \"error\": \"signal: killed\"}}, e[-1]
assert x == {}, x" &&
	start a "kill -TERM \$\$" s3 &&
	fassert s3 "assert e[-1][\"end\"][\"status\"] == \"signal: terminated\", e[-1]"
'

test_expect_success 'Process.Start: Connect-Timeout-Ms kills the command, deadline_exceeded' '
	start a "echo started; sleep 20; echo never" s4 -H "Connect-Timeout-Ms: 700" &&
	fassert s4 "assert \"start\" in e[0] and not any(\"end\" in v for v in e), e
assert x[\"error\"][\"code\"] == \"deadline_exceeded\", x" &&
	# the kill is asynchronous: the sleep goes within a few seconds
	for i in $(seq 30); do
		start a "pgrep -x sleep || echo none" s5 &&
		fassert s5 "import base64
out = b\"\".join(base64.b64decode(v[\"data\"][\"stdout\"]) for v in e if \"data\" in v)
assert out == b\"none\\n\", out" 2>/dev/null && break
		sleep 0.2
	done &&
	test "$i" -lt 30
'

test_expect_success 'Process.Start: a missing cwd and an unknown user end the stream with an error' '
	body=$(printf "{\"process\":{\"cmd\":\"/bin/true\",\"cwd\":\"/no/such/dir\"}}") &&
	envelope "$body" >cwd.req &&
	envd a /process.Process/Start -X POST -H "Content-Type: application/connect+json" \
		--data-binary @cwd.req >cwd.out &&
	fassert cwd.out "assert e == [] and x[\"error\"][\"code\"] == \"invalid_argument\", f" &&
	envd a /process.Process/Start -X POST -H "Content-Type: application/connect+json" \
		-H "Authorization: Basic $(b64 nosuchuser:)" --data-binary @cwd.req >user.out &&
	fassert user.out "assert x[\"error\"][\"code\"] == \"unauthenticated\", f"
'

test_expect_success 'envd: files up and down, unary errors in Connect JSON' '
	envd a "/files?path=up/one.txt" -X POST -H "Content-Type: application/octet-stream" \
		--data-binary "raw body" -o up.json &&
	jassert up.json "assert r == [{\"path\": \"/home/user/up/one.txt\", \"name\": \"one.txt\", \"type\": \"file\"}], r" &&
	envd a "/files?path=/home/user/up/one.txt" >down &&
	test_eq "raw body" "$(cat down)" &&
	envd a "/files?path=/home/user/none" -o none.json -w "%{http_code}" >code &&
	test_eq 404 "$(cat code)" &&
	jassert none.json "assert r[\"code\"] == 404 and \"does not exist\" in r[\"message\"], r" &&
	envd a /filesystem.Filesystem/Stat -X POST -H "Content-Type: application/json" \
		-d "{\"path\":\"/home/user/up/one.txt\"}" -o stat.json &&
	jassert stat.json "e = r[\"entry\"]
assert e[\"type\"] == \"FILE_TYPE_FILE\" and e[\"size\"] == \"8\" and e[\"permissions\"].startswith(\"-rw\"), e" &&
	envd a /filesystem.Filesystem/ListDir -X POST -H "Content-Type: application/json" \
		-d "{\"path\":\"/no/such\"}" -o ls.json -w "%{http_code}" >code &&
	test_eq 404 "$(cat code)" &&
	jassert ls.json "assert r[\"code\"] == \"not_found\" and r[\"message\"], r"
'

test_expect_success 'envd: no token is 401; a paused sandbox is 409; connect resumes (201, then 200)' '
	sid=$(jget a.json sandboxID) &&
	"${CURL[@]}" -H "E2b-Sandbox-Id: $sid" -H "E2b-Sandbox-Port: 49983" -X POST \
		-H "Content-Type: application/json" -d "{}" -o notok.json -w "%{http_code}" \
		"$(url /process.Process/List)" >code &&
	test_eq 401 "$(cat code)" &&
	api POST "/sandboxes/$sid/pause" -H "Content-Type: application/json" -d "{}" \
		-o /dev/null -w "%{http_code}" >code && test_eq 204 "$(cat code)" &&
	api POST "/sandboxes/$sid/pause" -H "Content-Type: application/json" -d "{}" \
		-o again.json -w "%{http_code}" >code && test_eq 409 "$(cat code)" &&
	jassert again.json "assert r[\"code\"] == 409, r" &&
	envd a /health -o paused.json -w "%{http_code}" >code && test_eq 409 "$(cat code)" &&
	jassert paused.json "assert r[\"message\"] == \"The sandbox is paused\" and r[\"sandboxId\"] == \"$sid\", r" &&
	api POST "/sandboxes/$sid/connect" -H "Content-Type: application/json" \
		-d "{\"timeout\":60}" -o c1.json -w "%{http_code}" >code && test_eq 201 "$(cat code)" &&
	api POST "/sandboxes/$sid/connect" -H "Content-Type: application/json" \
		-d "{\"timeout\":60}" -o c2.json -w "%{http_code}" >code && test_eq 200 "$(cat code)" &&
	envd a /health -o /dev/null -w "%{http_code}" >code && test_eq 204 "$(cat code)" &&
	"${CURL[@]}" -H "E2b-Sandbox-Id: nosuchsandbox" -H "E2b-Sandbox-Port: 49983" \
		-o gone.json -w "%{http_code}" "$(url /health)" >code && test_eq 502 "$(cat code)"
'

test_expect_success 'GET /v2/sandboxes pages with X-Next-Token; limit; X-Total-Running' '
	new_sandbox b && new_sandbox c &&
	api GET /v2/sandboxes -D p1.h -o p1.json &&
	jassert p1.json "assert len(r) == 2, r" &&
	tok=$(sed -n "s/^[Xx]-[Nn]ext-[Tt]oken: *\\([^[:space:]]*\\).*/\\1/p" p1.h) &&
	test_ne "" "$tok" &&
	test_grep -i "^x-total-running: 3" p1.h &&
	api GET "/v2/sandboxes?nextToken=$tok" -D p2.h -o p2.json &&
	jassert p2.json "assert len(r) == 1, r" &&
	test_grep ! -i "^x-next-token" p2.h &&
	"$TEST_PYTHON" -c "import json
ids = [s[\"sandboxID\"] for f in (\"p1.json\", \"p2.json\") for s in json.load(open(f))]
want = sorted(json.load(open(n + \".json\"))[\"sandboxID\"] for n in \"abc\")
assert sorted(ids) == want, (ids, want)" &&
	api GET "/v2/sandboxes?limit=3" -D p3.h -o p3.json &&
	jassert p3.json "assert len(r) == 3, r" && test_grep ! -i "^x-next-token" p3.h &&
	api POST "/sandboxes/$(jget b.json sandboxID)/pause" -o /dev/null &&
	api GET "/v2/sandboxes?state=paused" -o p4.json &&
	jassert p4.json "assert [s[\"sandboxID\"] for s in r] == [\"$(jget b.json sandboxID)\"], r" &&
	api GET /sandboxes -o v1.json &&
	jassert v1.json "assert len(r) == 2 and all(s[\"state\"] == \"running\" for s in r), r"
'

test_expect_success 'faults: status, truncate, bad_frame, invalid_json, stall; the request log' '
	"${CURL[@]}" -X DELETE "$(url /_fake/requests)" >/dev/null &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "[
		{\"match\": \"POST ^/sandboxes\$\", \"kind\": \"status\", \"status\": 503},
		{\"match\": \"GET ^/v2/sandboxes\$\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}]" >/dev/null &&
	api POST /sandboxes -H "Content-Type: application/json" -d "{\"templateID\":\"base\"}" \
		-o f1.json -w "%{http_code}" >code &&
	test_eq 503 "$(cat code)" && jassert f1.json "assert r[\"code\"] == 503, r" &&
	api GET /v2/sandboxes -D f2.h -o f2.json -w "%{http_code}" >code &&
	test_eq 429 "$(cat code)" && test_grep -i "^retry-after: 1" f2.h &&
	api GET /v2/sandboxes -o /dev/null -w "%{http_code}" >code && test_eq 200 "$(cat code)" &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"POST /process.Process/Start\", \"kind\": \"truncate\"}" >/dev/null &&
	start a "echo one; sleep 0.2; echo two" t1 &&
	test_eq 18 "$(cat t1.rc)" &&
	fassert t1 "assert len(f) == 1 and \"start\" in e[0] and x is None, f" &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"* /process.Process/Start\", \"kind\": \"bad_frame\"}" >/dev/null &&
	start a "echo one" t2 &&
	fassert t2 "assert f == [{\"flags\": 0, \"short\": 0x7ffffff0}], f" &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"POST /process.Process/Start\", \"kind\": \"invalid_json\"}" >/dev/null &&
	start a "echo one" t3 &&
	fassert t3 "assert len(f) == 1 and f[0][\"flags\"] == 0 and \"raw\" in f[0], f" &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"GET ^/sandboxes/\", \"kind\": \"invalid_json\"}" >/dev/null &&
	api GET "/sandboxes/$(jget a.json sandboxID)" -o ij.json -w "%{http_code}" >code &&
	test_eq 200 "$(cat code)" &&
	! "$TEST_PYTHON" -c "import json; json.load(open(\"ij.json\"))" 2>/dev/null &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"GET ^/sandboxes/\", \"kind\": \"truncate\"}" >/dev/null &&
	{ api GET "/sandboxes/$(jget a.json sandboxID)" -o /dev/null; test_eq 18 $?; } &&
	"${CURL[@]}" -X POST "$(url /_fake/faults)" -d "{\"match\": \"GET /health\", \"kind\": \"stall\", \"seconds\": 1.5, \"times\": 0}" >/dev/null &&
	t0=$(date +%s%N) && "${CURL[@]}" "$(url /health)" >/dev/null && t1=$(date +%s%N) &&
	test $(((t1 - t0) / 1000000)) -ge 1400 &&
	"${CURL[@]}" -X DELETE "$(url /_fake/faults)" >/dev/null &&
	"${CURL[@]}" "$(url /_fake/faults)" >faults.json && jassert faults.json "assert r == [], r" &&
	"${CURL[@]}" "$(url /_fake/requests)" >log.json &&
	jassert log.json "
paths = [(x[\"method\"], x[\"path\"]) for x in r]
assert paths[0] == (\"POST\", \"/sandboxes\"), paths
assert (\"POST\", \"/process.Process/Start\") in paths, paths
assert not any(p.startswith(\"/_fake/\") for m, p in paths), paths
assert all(set(x) == {\"method\", \"path\", \"query\", \"headers\"} for x in r), r[0]"
'

test_expect_success 'a sandbox past its timeout is killed, its backing sandbox removed' '
	new_sandbox short "{\"templateID\":\"base\",\"timeout\":1}" &&
	sid=$(jget short.json sandboxID) &&
	backing=$("${CURL[@]}" "$(url /_fake/state)" | "$TEST_PYTHON" -c "import json, sys
print(json.load(sys.stdin)[\"$sid\"][\"backing\"])") &&
	SBX_HOME=$FAKE_HOME "$SBX" inspect "$backing" >/dev/null &&
	wait_until 10 sh -c "! SBX_HOME=\"$FAKE_HOME\" \"$SBX\" inspect \"$backing\"" &&
	api GET "/sandboxes/$sid" -o /dev/null -w "%{http_code}" >code && test_eq 404 "$(cat code)"
'

test_expect_success 'stopping the fake removes every backing sandbox' '
	SBX_HOME=$FAKE_HOME "$SBX" ls -q >before &&
	test "$(wc -l <before)" -ge 3 &&
	stop_fake &&
	SBX_HOME=$FAKE_HOME "$SBX" ls -q >after &&
	test ! -s after
'

test_done
