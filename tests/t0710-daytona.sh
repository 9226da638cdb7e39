#!/bin/bash
# The daytona provider against the loopback Daytona fake (tests/fakes/daytona.py): create
# waiting for creating -> started, exec through toolbox sessions, cp through the file API,
# pause as pause (linux-vm) or stop (container), previews with their token, ls and rm of a
# sandbox gone out of band, and Daytona's failures (401, 404, 429, 5xx, garbage, stalls).
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the bodies, which read these variables
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

test_skip_unless USERNS curl

if [ -z "$TEST_SKIP_ALL" ]; then
	# a linux-vm fake (pause keeps memory), then the container one most tests use
	start_fake daytona --class linux-vm --start-delay 0.2 || TEST_SKIP_ALL="the Daytona fake did not start"
	VM_URL=${FAKE_URL:-} # used in the test bodies lib.sh evaluates
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	# an E2B one, for an ls that asks two providers
	start_fake e2b || TEST_SKIP_ALL="the E2B fake did not start"
	E2B_URL=${FAKE_URL:-}
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	start_fake daytona --start-delay 0.3 || TEST_SKIP_ALL="the Daytona fake did not start"
fi
export DAYTONA_API_KEY=dtn_test_key SBX_DAYTONA_API_URL=${FAKE_URL:-}
unset DAYTONA_API_URL DAYTONA_SERVER_URL DAYTONA_TARGET SBX_REMOTE_TIMEOUT

# the fake's own idea of a sandbox: its state, or "gone"
fake_state() {
	curl -fsS "${2:-$FAKE_URL}/_fake/state" | "$TEST_PYTHON" -c 'import json, sys
b = [x for x in json.load(sys.stdin)["sandboxes"] if x["id"] == sys.argv[1]]
print(b[0]["state"] if b and b[0]["state"] not in ("destroyed", "destroying") else "gone")' "$1"
}

dt_id() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

store_ok() { sbx ls -q >/dev/null && sbx ls --json >/dev/null; }

test_expect_success 'create waits from creating to started; labels and env go along' '
	fake_reset &&
	sbx create --provider daytona --name dbox -e FOO=bar --label team=red >id &&
	test_grep -E "^[0-9a-f]{12}$" id &&
	test_eq running "$(sb_state dbox)" &&
	fake_requests req.json &&
	json_assert req.json "c = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"].endswith(\"/sandbox\")]
assert len(c) == 1, c
h = {k.lower(): v for k, v in c[0][\"headers\"].items()}
assert h[\"authorization\"] == \"Bearer dtn_test_key\"
g = [q for q in r if q[\"method\"] == \"GET\" and \"/sandbox/\" in q[\"path\"]]
assert len(g) >= 1, g" &&
	test_eq started "$(fake_state "$(dt_id dbox)")" &&
	sbx inspect dbox >rec.json &&
	json_assert rec.json "assert r[\"provider\"] == \"daytona\" and r[\"remote\"][\"state\"] == \"started\"
assert r[\"extra\"][\"toolbox\"].endswith(\"/toolbox\")"
'

test_expect_success 'create --image is the snapshot; --cpus and --memory round up to whole units' '
	sbx create --provider daytona --name sized --image my-snap --cpus 1.5 --memory 1500m >/dev/null &&
	curl -fsS "$FAKE_URL/_fake/state" >st.json &&
	json_assert st.json "b = [x for x in r[\"sandboxes\"] if x[\"id\"] == \"$(dt_id sized)\"][0]
assert (b[\"snapshot\"], b[\"cpu\"], b[\"memory\"]) == (\"my-snap\", 2, 2), b" &&
	sbx rm -f sized &&
	expect_code 125 sbx create --provider daytona -v /tmp:/x 2>e &&
	expect_one_error_line e "provider .daytona. does not support --volume"
'

test_expect_success 'exec: stdout and stderr apart, the exit code exact, -w, -e, --timeout' '
	sbx exec dbox sh -c "echo out \$FOO; echo err >&2" >o 2>e &&
	test_eq "out bar" "$(cat o)" && test_eq err "$(cat e)" &&
	expect_code 3 sbx exec dbox sh -c "exit 3" &&
	test_eq "x y /tmp" "$(sbx exec -w /tmp -e A="x y" dbox sh -c "echo \$A \$PWD")" &&
	test "$(sbx exec dbox echo "it'"'"'s" "\$HOME")" = "it'"'"'s \$HOME" &&
	expect_code 124 sbx exec --timeout 1s dbox sleep 30 &&
	expect_code 127 sbx exec dbox no-such-command-here 2>/dev/null
'

test_expect_success 'exec --json: the result object, a timeout, errors as JSON' '
	expect_code 3 sbx exec --json dbox sh -c "echo out; echo err >&2; exit 3" >o 2>e &&
	test_eq "" "$(cat e)" &&
	json_assert o "assert r[\"exit_code\"] == 3 and r[\"stdout\"] == \"out\n\" and r[\"stderr\"] == \"err\n\"
assert r[\"cpu_ms\"] is None and r[\"peak_memory_bytes\"] is None and not r[\"timed_out\"]" &&
	expect_code 124 sbx exec --json --timeout 1s dbox sleep 30 >o &&
	json_assert o "assert r[\"exit_code\"] == 124 and r[\"timed_out\"]" &&
	expect_code 125 sbx exec --json no-such-box true 2>e &&
	json_assert e "assert r[\"error\"][\"code\"] == \"not_found\""
'

test_expect_success 'exec: a session per command, closed afterwards' '
	fake_reset && sbx exec dbox true && fake_requests req.json &&
	json_assert req.json "s = [q for q in r if q[\"path\"].endswith(\"/process/session\")]
x = [q for q in r if q[\"path\"].endswith(\"/exec\")]
d = [q for q in r if q[\"method\"] == \"DELETE\" and \"/process/session/\" in q[\"path\"]]
assert len(s) == 1 and len(x) == 1 and len(d) == 1, r"
'

test_expect_success 'exec: a signal (128+N) closes the session and ends the command inside' '
	expect_code 130 timeout --preserve-status -s INT 1 "$SBX" exec dbox sleep 30 &&
	curl -fsS "$FAKE_URL/_fake/state" >st.json &&
	json_assert st.json "b = [x for x in r[\"sandboxes\"] if x[\"id\"] == \"$(dt_id dbox)\"][0]
assert b[\"sessions\"] == [], b[\"sessions\"]"
'

test_expect_success 'exec options Daytona cannot honour are one line, 125' '
	for o in -i -t "-u root"; do
		# shellcheck disable=SC2086
		expect_code 125 sbx exec $o dbox true 2>e </dev/null &&
		expect_one_error_line e "does not support exec ${o%% *}" || exit 1
	done
'

test_expect_success 'exec -d handles (a session each): ps, logs, wait; kill refused' '
	id=$(sbx exec -d dbox -- sh -c "echo out; echo err >&2; sleep 0.5; exit 3") &&
	test_match "^sbx-d-[0-9a-f]{16}$" "$id" &&
	sbx ps dbox --json >ps.json &&
	json_assert ps.json "assert any(j[\"id\"] == \"$id\" for j in r), r" &&
	expect_code 3 sbx wait dbox "$id" &&
	sbx ps dbox --json >ps.json &&
	json_assert ps.json "j = [j for j in r if j[\"id\"] == \"$id\"][0]
assert j[\"state\"] == \"exited\" and j[\"exit_code\"] == 3, j" &&
	sbx logs dbox "$id" >lo && test_grep -x out lo && test_grep -x err lo &&
	id=$(sbx exec -d dbox -- sh -c "sleep 0.3; echo late") &&
	sbx logs -f dbox "$id" >lf && test_grep -x late lf &&
	id=$(sbx exec -d dbox -- sleep 30) &&
	expect_code 125 sbx wait --timeout 0.5s dbox "$id" 2>e && test_grep "timed out" e &&
	expect_code 125 sbx kill dbox "$id" 2>e && test_grep "does not support kill" e &&
	expect_code 125 sbx wait dbox sbx-d-0000000000000000 2>e && test_grep "no exec" e &&
	expect_code 125 sbx wait dbox ../x 2>e && test_grep "no exec" e
'

test_expect_success 'cp in and out keeps directories, modes and symlinks' '
	mkdir -p src/sub && echo hello >src/sub/f && chmod 640 src/sub/f &&
	ln -s sub/f src/link &&
	sbx cp src dbox:/tmp/ &&
	test_eq hello "$(sbx exec dbox cat /tmp/src/sub/f)" &&
	test_eq sub/f "$(sbx exec dbox readlink /tmp/src/link)" &&
	test_eq 640 "$(sbx exec dbox stat -c %a /tmp/src/sub/f)" &&
	mkdir back && sbx cp dbox:/tmp/src back/ && diff -r src back/src && test -L back/src/link &&
	echo one >file1 && sbx cp file1 dbox:/tmp/renamed && sbx cp dbox:/tmp/renamed out1 &&
	test_eq one "$(cat out1)" &&
	expect_code 125 sbx cp dbox:/tmp/nope out2 2>e && expect_one_error_line e "/tmp/nope.*does not exist" &&
	fake_requests req.json &&
	json_assert req.json "u = [q for q in r if q[\"path\"].endswith(\"/files/upload\")]
assert u and u[-1][\"headers\"].get(\"Content-Type\", u[-1][\"headers\"].get(\"content-type\", \"\")).startswith(\"multipart/form-data\"), u"
'

# --- sbx fs: the toolbox's file API ---------------------------------------------------------

test_expect_success 'fs: write (--mode), read (binary), stat, ls -R, mkdir, mv, rm' '
	head -c 200000 /dev/urandom >fs.bin &&
	sbx fs write --mode 0600 dbox /tmp/fs/deep/f.bin <fs.bin &&
	sbx fs read dbox /tmp/fs/deep/f.bin >fs.back && cmp fs.bin fs.back &&
	test_eq 600 "$(sbx exec dbox stat -c %a /tmp/fs/deep/f.bin)" &&
	sbx fs stat --json dbox /tmp/fs/deep/f.bin >st.json &&
	json_assert st.json "assert r[\"type\"] == \"file\" and r[\"size\"] == 200000
assert r[\"mode\"] == \"0600\" and r[\"path\"] == \"/tmp/fs/deep/f.bin\"" &&
	sbx fs mkdir dbox /tmp/fs/d && sbx fs mkdir -p dbox /tmp/fs/d/e &&
	expect_code 125 sbx fs mkdir dbox /tmp/fs/d 2>e && expect_one_error_line e "exists" &&
	sbx fs ls --json -R dbox /tmp/fs >ls.json &&
	json_assert ls.json "assert [e[\"path\"] for e in r] == [\"/tmp/fs/d\", \"/tmp/fs/d/e\",
  \"/tmp/fs/deep\", \"/tmp/fs/deep/f.bin\"], r" &&
	sbx fs mv dbox /tmp/fs/deep/f.bin /tmp/fs/moved && sbx exec dbox test -f /tmp/fs/moved &&
	expect_code 125 sbx fs rm dbox /tmp/fs/d 2>e && expect_one_error_line e "is a directory" &&
	sbx fs rm dbox /tmp/fs/moved && sbx fs rm -r dbox /tmp/fs &&
	expect_code 1 sbx exec dbox test -e /tmp/fs
'

test_expect_success 'fs: missing paths are not_found, 125; rm -f of one is no error' '
	expect_code 125 sbx fs read dbox /tmp/nope 2>e && expect_one_error_line e "does not exist" &&
	expect_code 125 sbx fs stat dbox /tmp/nope 2>e && expect_one_error_line e "does not exist" &&
	expect_code 125 sbx fs mkdir dbox /tmp/no/such 2>e && expect_one_error_line e "does not exist" &&
	sbx fs rm -f dbox /tmp/nope
'

test_expect_success 'pause on a container class is stop (disk kept); exec refuses; resume starts' '
	fake_reset &&
	sbx pause dbox && test_eq stopped "$(sb_state dbox)" &&
	test_eq stopped "$(fake_state "$(dt_id dbox)")" &&
	expect_code 125 sbx exec dbox true 2>e && expect_one_error_line e "is stopped.*sbx resume dbox" &&
	sbx resume dbox && test_eq running "$(sb_state dbox)" &&
	test_eq one "$(sbx exec dbox cat /tmp/renamed)" &&
	fake_requests req.json &&
	json_assert req.json "p = [q[\"path\"].rsplit(\"/\", 1)[1] for q in r if q[\"method\"] == \"POST\"]
assert p[:2] == [\"pause\", \"stop\"] and \"start\" in p, p"
'

test_expect_success 'pause on a linux-vm class keeps memory (pause); --release stops it' '
	export SBX_DAYTONA_API_URL=$VM_URL &&
	sbx create --provider daytona --name vm >/dev/null &&
	fake_reset "$VM_URL" &&
	sbx pause vm && test_eq paused "$(sb_state vm)" &&
	test_eq paused "$(fake_state "$(dt_id vm)" "$VM_URL")" &&
	sbx resume vm && test_eq up "$(sbx exec vm echo up)" &&
	sbx pause --release vm && test_eq stopped "$(sb_state vm)" &&
	test_eq stopped "$(fake_state "$(dt_id vm)" "$VM_URL")" &&
	fake_requests req.json "$VM_URL" &&
	json_assert req.json "p = [q[\"path\"].rsplit(\"/\", 1)[1] for q in r if q[\"method\"] == \"POST\" and q[\"path\"].startswith(\"/sandbox/\")]
assert p == [\"pause\", \"start\", \"stop\"], p" &&
	sbx rm -f vm
'

test_expect_success 'preview: the URL, and the token with its header in --json' '
	id=$(dt_id dbox) &&
	test_eq "https://8080-$id.daytona.test" "$(sbx preview dbox 8080)" &&
	sbx preview --json dbox 8080 >p.json &&
	json_assert p.json "assert r[\"port\"] == 8080 and r[\"token\"] and r[\"token_header\"] == \"X-Daytona-Preview-Token\"" &&
	tok=$(json_assert p.json "print(r[\"token\"])") && test_ne "" "$tok" &&
	sbx inspect dbox >i.json && sbx ls --json >l.json && test_grep ! -e "$tok" i.json l.json
'

test_expect_success 'ls pages with the cursor; one deleted out of band shows missing' '
	sbx create --provider daytona --name d2 >/dev/null && sbx create --provider daytona --name d3 >/dev/null &&
	fake_reset && sbx ls >ls.out && grep -E " d2 +daytona +running" ls.out &&
	fake_requests req.json &&
	json_assert req.json "l = [q for q in r if q[\"method\"] == \"GET\" and q[\"path\"].endswith(\"/sandbox\")]
assert len(l) >= 2 and any(\"cursor=\" in q[\"query\"] for q in l), l" &&
	curl -fsS -X DELETE -H "Authorization: Bearer dtn_test_key" "$FAKE_URL/sandbox/$(dt_id d3)" >/dev/null &&
	sbx ls >ls.out && grep -E " d3 +daytona +missing" ls.out &&
	expect_code 125 sbx exec d3 true 2>e && expect_one_error_line e "HTTP 404|not started|no such sandbox" &&
	sbx rm d3 && d2=$(dt_id d2) && sbx rm -f d2 && test_eq gone "$(fake_state "$d2")"
'

test_expect_success 'ls asks E2B and Daytona in one go, local sandboxes beside them' '
	export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=$E2B_URL SBX_E2B_SANDBOX_URL=$E2B_URL &&
	sbx create --provider e2b --name e1 >/dev/null &&
	sbx create --name loc >/dev/null &&
	sbx ls >ls.out 2>e && test ! -s e &&
	grep -E " dbox +daytona +running" ls.out && grep -E " e1 +e2b +running" ls.out &&
	grep -E " loc +local +running" ls.out &&
	sbx rm -f e1 loc
'

test_expect_success 'a missing or rejected key: one line naming the variable, 125' '
	expect_code 125 env -u DAYTONA_API_KEY "$SBX" create --provider daytona 2>e &&
	expect_one_error_line e "DAYTONA_API_KEY is not set" &&
	expect_code 125 env DAYTONA_API_KEY=wrong "$SBX" exec dbox true 2>e &&
	expect_one_error_line e "rejected the API key \(HTTP 401.*check DAYTONA_API_KEY" &&
	store_ok && test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'faults: 429 waited out, 500 on create not retried, 503 on a GET retried' '
	fake_reset &&
	fake_fault "{\"match\": \"POST /sandbox\$\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}" &&
	sbx create --provider daytona --name r429 >/dev/null && sbx rm -f r429 &&
	fake_fault "{\"match\": \"POST /sandbox\$\", \"kind\": \"status\", \"status\": 500}" &&
	expect_code 125 sbx create --provider daytona --name r500 2>e &&
	expect_one_error_line e "Daytona failed \(HTTP 500" &&
	expect_code 125 sbx inspect r500 2>/dev/null &&
	fake_fault "{\"match\": \"GET /sandbox/\", \"kind\": \"status\", \"status\": 503, \"times\": 2}" &&
	test_eq running "$(sb_state dbox)" &&
	fake_requests req.json &&
	json_assert req.json "c = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"].endswith(\"/sandbox\")]
assert len(c) == 3, len(c)" && store_ok
'

test_expect_success 'garbage and stalls: malformed JSON, a truncated answer, a timeout' '
	fake_reset &&
	fake_fault "{\"match\": \"POST /exec\$\", \"kind\": \"invalid_json\"}" &&
	expect_code 125 sbx exec dbox true 2>e && expect_one_error_line e "malformed answer" &&
	fake_fault "{\"match\": \"POST /exec\$\", \"kind\": \"truncate\"}" &&
	expect_code 125 sbx exec dbox true 2>e && expect_one_error_line e "cut the answer short|malformed" &&
	fake_fault "{\"match\": \"POST /stop\$\", \"kind\": \"stall\", \"seconds\": 4}" &&
	expect_code 125 env SBX_REMOTE_TIMEOUT=1 "$SBX" pause dbox 2>e &&
	expect_one_error_line e "did not answer in time|stalled" &&
	fake_reset && store_ok
'

test_expect_success 'keepalive is last-activity, update --ttl the auto-stop interval; no resize' '
	sbx create --provider daytona --name live --ttl 5m >/dev/null &&
	test_atexit "\"\$SBX\" rm -f live >/dev/null 2>&1" &&
	fake_reset && sbx keepalive live && sbx update live --ttl 10m >/dev/null &&
	fake_requests req.json &&
	json_assert req.json "p = [q[\"path\"] for q in r if q[\"method\"] == \"POST\"]
assert any(x.endswith(\"/last-activity\") for x in p), p
assert any(x.endswith(\"/autostop/10\") for x in p), p" &&
	curl -fsS "$FAKE_URL/_fake/state" >st.json &&
	json_assert st.json "b = [x for x in r[\"sandboxes\"] if x[\"id\"] == \"$(dt_id live)\"][0]
assert b[\"autoStopInterval\"] == 10, b" &&
	sbx stats --json live >s.json &&
	json_assert s.json "s = r[0]; assert s[\"id\"] and s[\"memory_bytes\"] is None
assert s[\"memory_limit_bytes\"] is None or s[\"memory_limit_bytes\"] > 0" &&
	expect_code 125 sbx update live --cpus 2 2>e &&
	expect_one_error_line e "cannot resize a sandbox" &&
	sbx rm -f live >/dev/null
'

test_expect_success 'rm -f removes the Daytona sandbox and the record' '
	did=$(dt_id dbox) && sbx rm -f dbox && test_eq gone "$(fake_state "$did")" &&
	test_eq "" "$(sbx ls -q)"
'

test_done
