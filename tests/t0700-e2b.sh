#!/bin/bash
# The e2b provider against the loopback E2B fake (tests/fakes/e2b.py): every verb, the exit
# statuses of exec, cp both ways, pause/resume, previews, ls and rm of a sandbox gone out of
# band, and what E2B's failures look like (401, 404, 409, 429, 5xx, truncated and malformed
# streams, stalls, TLS).
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"

test_skip_unless USERNS curl

if [ -z "$TEST_SKIP_ALL" ]; then
	start_fake e2b || TEST_SKIP_ALL="the E2B fake did not start"
fi
export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=${FAKE_URL:-} SBX_E2B_SANDBOX_URL=${FAKE_URL:-}
unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN SBX_REMOTE_TIMEOUT

# the fake's own idea of a sandbox: state (running, paused) or "gone"
fake_state() {
	curl -fsS "$FAKE_URL/_fake/state" | "$TEST_PYTHON" -c 'import json, sys
s = json.load(sys.stdin)
boxes = s.get("sandboxes", s)
b = boxes.get(sys.argv[1])
print(b["state"] if b else "gone")' "$1"
}

# the E2B id behind an sbx sandbox
e2b_id() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

# the records in the store, as 'ls -q' prints them (the store is intact and readable)
store_ok() { sbx ls -q >/dev/null && sbx ls --json >/dev/null; }

test_expect_success 'provider ls shows e2b configured, and unconfigured without its key' '
	sbx provider ls >out && grep -E "^e2b +yes +E2B_API_KEY is set" out &&
	env -u E2B_API_KEY "$SBX" provider ls >out && grep -E "^e2b +no +set E2B_API_KEY" out &&
	sbx provider ls --json >out.json &&
	json_assert out.json "e = [p for p in r if p[\"name\"] == \"e2b\"][0]
assert e[\"configured\"] and e[\"remote\"] and e[\"key_variable\"] == \"E2B_API_KEY\"
assert e[\"api_url\"] == \"$FAKE_URL\""
'

test_expect_success 'create: POST /sandboxes with the template, env, labels and a timeout' '
	fake_reset &&
	sbx create --provider e2b --name box -e FOO=bar --label team=blue -w /tmp >id &&
	test_grep -E "^[0-9a-f]{12}$" id &&
	fake_requests req.json &&
	json_assert req.json "c = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"] == \"/sandboxes\"]
assert len(c) == 1, c
h = {k.lower(): v for k, v in c[0][\"headers\"].items()}
assert h[\"x-api-key\"] == \"e2b_test_key\"" &&
	test_eq running "$(fake_state "$(e2b_id box)")" &&
	sbx inspect box >rec.json &&
	json_assert rec.json "assert r[\"provider\"] == \"e2b\" and r[\"state\"] == \"running\"
import re; assert re.fullmatch(\"[a-z0-9]+\", r[\"provider_id\"])
assert r[\"extra\"][\"template\"] == \"base\" and r[\"remote\"][\"state\"] == \"running\"
assert \"secret\" not in r[\"extra\"]"
'

test_expect_success 'create --image names the template; local-only options are refused, 125' '
	sbx create --provider e2b --name tpl --image my-template >/dev/null &&
	curl -fsS "$FAKE_URL/_fake/state" >st.json &&
	json_assert st.json "assert r[\"$(e2b_id tpl)\"][\"templateID\"] == \"my-template\"" &&
	sbx rm -f tpl &&
	for o in "--volume /tmp:/x" "--memory 1g" "--cpus 1" "--pids-limit 5" "--net allow=a.example" \
		"--add-host a:1.2.3.4" "--host-port 8080"; do
		# shellcheck disable=SC2086
		expect_code 125 sbx create --provider e2b $o 2>e &&
		expect_one_error_line e "provider .e2b. does not support ${o%% *}" || exit 1
	done &&
	test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'run --provider e2b creates, runs the command, removes the sandbox' '
	ids() { curl -fsS "$FAKE_URL/_fake/state" | "$TEST_PYTHON" -c "import json,sys; print(sorted(json.load(sys.stdin)))"; } &&
	before=$(ids) &&
	expect_code 5 sbx run --provider e2b -- sh -c "echo ran; exit 5" >r.out &&
	test_eq ran "$(cat r.out)" &&
	test_eq 1 "$(sbx ls -q | wc -l)" &&
	test_eq "$before" "$(ids)"
'

test_expect_success 'the access token stays in the 0600 record, never in inspect, ls or --debug' '
	id=$(sbx inspect box | "$TEST_PYTHON" -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	rec="$SBX_HOME/sandboxes/$id/sandbox.json" &&
	test_eq 600 "$(stat -c %a "$rec")" &&
	tok=$("$TEST_PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[\"extra\"][\"secret\"][\"envd_access_token\"])" "$rec") &&
	test_ne "" "$tok" &&
	sbx inspect box >i.out && sbx ls --json >l.out &&
	"$SBX" --debug exec box true 2>dbg.out &&
	"$SBX" --debug inspect box >/dev/null 2>>dbg.out &&
	test_grep "X-Access-Token: <redacted>" dbg.out && test_grep "X-API-Key: <redacted>" dbg.out &&
	test_grep ! -e "$tok" -e e2b_test_key i.out l.out dbg.out
'

test_expect_success 'exec: stdout and stderr apart, the exit status exact, env and workdir' '
	sbx exec box sh -c "echo out \$FOO; echo err >&2" >o 2>e &&
	test_eq "out bar" "$(cat o)" && test_eq err "$(cat e)" &&
	expect_code 3 sbx exec box sh -c "exit 3" &&
	expect_code 0 sbx exec box true &&
	test_eq /tmp "$(sbx exec box pwd)" &&
	test_eq "1 x y /" "$(sbx exec -w / -e A=1 -e B="x y" box sh -c "echo \$A \$B \$PWD")"
'

test_expect_success 'exec: death by a signal is 128+N, a missing command 127' '
	expect_code 137 sbx exec box sh -c "kill -9 \$\$" &&
	expect_code 143 sbx exec box sh -c "kill -TERM \$\$" &&
	expect_code 127 sbx exec box no-such-command-here 2>e
'

# envd fails the start of a command it cannot find (Go's "executable file not found"): 127 and
# an error object, as the local provider answers it
test_expect_success 'exec --json: the result object; a signal named, a timeout, errors as JSON' '
	expect_code 3 sbx exec --json box sh -c "echo out; printf \"\\377\" >&2; exit 3" >o 2>e &&
	test_eq "" "$(cat e)" &&
	json_assert o "assert r[\"exit_code\"] == 3 and r[\"signal\"] is None and not r[\"timed_out\"]
assert r[\"stdout\"] == \"out\n\" and r[\"stderr_encoding\"] == \"base64\" and r[\"stderr\"] == \"/w==\"
assert r[\"cpu_ms\"] is None and r[\"peak_memory_bytes\"] is None" &&
	expect_code 137 sbx exec --json box sh -c "kill -9 \$\$" >o &&
	json_assert o "assert r[\"exit_code\"] == 137 and r[\"signal\"] == \"SIGKILL\"" &&
	expect_code 124 sbx exec --json --timeout 1s box sleep 30 >o &&
	json_assert o "assert r[\"exit_code\"] == 124 and r[\"timed_out\"]" &&
	expect_code 127 sbx exec --json box no-such-command-here >o 2>e && test ! -s o &&
	json_assert e "assert r[\"error\"][\"code\"] == \"command_not_found\"" &&
	expect_code 125 sbx exec --json no-such-box true >o 2>e &&
	test_eq "" "$(cat o)" && json_assert e "assert r[\"error\"][\"code\"] == \"not_found\""
'

test_expect_success 'exec --timeout ends the command with 124 (Connect-Timeout-Ms)' '
	fake_reset &&
	expect_code 124 sbx exec --timeout 1s box sleep 30 &&
	fake_requests req.json &&
	json_assert req.json "s = [q for q in r if q[\"path\"] == \"/process.Process/Start\"]
h = {k.lower(): v for k, v in s[-1][\"headers\"].items()}
assert h[\"connect-timeout-ms\"] == \"1000\", h
assert h[\"content-type\"] == \"application/connect+json\""
'

test_expect_success 'exec streams: the first line arrives while the command still runs' '
	sbx exec box rm -f /tmp/go &&
	{ sbx exec box sh -c "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second" >s.out & } &&
	pid=$! &&
	wait_until 20 grep -q first s.out &&
	test_grep ! second s.out &&
	sbx exec box touch /tmp/go &&
	wait "$pid" && test_eq "$(printf "first\nsecond")" "$(cat s.out)"
'

test_expect_success 'exec -i sends standard input; -u picks the user; -d leaves it running' '
	printf "line1\nline2\n" | sbx exec -i box cat >i.out &&
	test_eq "$(printf "line1\nline2")" "$(cat i.out)" &&
	test_eq 0 "$(sbx exec -u root box id -u)" &&
	fake_reset && sbx exec -u user box true && fake_requests req.json &&
	json_assert req.json "s = [q for q in r if q[\"path\"] == \"/process.Process/Start\"]
h = {k.lower(): v for k, v in s[-1][\"headers\"].items()}
assert h[\"authorization\"] == \"Basic dXNlcjo=\", h" &&
	sbx exec box rm -f /tmp/detached &&
	sbx exec -d box sh -c "sleep 0.5; touch /tmp/detached" >pid.out &&
	test_grep -E "^[0-9]+$" pid.out &&
	wait_until 20 sbx exec box test -e /tmp/detached &&
	expect_code 125 sbx exec -t box true 2>e && test_grep "does not support exec -t" e
'

test_expect_success 'exec -d handles (pids): ps, wait, logs -f, kill, unknown ids' '
	id=$(sbx exec -d box -- sh -c "sleep 0.5; exit 3") &&
	test_match "^[0-9]+$" "$id" &&
	sbx ps box --json >ps.json &&
	json_assert ps.json "assert any(j[\"id\"] == \"$id\" and j[\"state\"] == \"running\"
	   and j[\"command\"] == [\"sh\", \"-c\", \"sleep 0.5; exit 3\"] for j in r), r" &&
	expect_code 3 sbx wait box "$id" &&
	id=$(sbx exec -d box -- sh -c "for i in \$(seq 30); do echo tick; sleep 0.1; done; echo done") &&
	sbx logs -f box "$id" >lo && test_grep -x tick lo && test_grep -x done lo &&
	expect_code 125 sbx logs box "$id" 2>e && test_grep "keeps no output" e &&
	id=$(sbx exec -d box -- sleep 100) || exit 1
	sbx wait box "$id" >/dev/null 2>&1 &
	w=$!
	expect_code 125 sbx wait --timeout 0.5s box "$id" 2>e && test_grep "timed out" e &&
	expect_code 125 sbx kill -s HUP box "$id" 2>e && test_grep "only SIGKILL and SIGTERM" e &&
	sbx kill -s TERM box "$id" && expect_code 143 wait $w &&
	expect_code 125 sbx wait box "$id" 2>e && test_grep "no exec" e &&
	expect_code 125 sbx kill box 999999 2>e && test_grep "no exec" e &&
	expect_code 125 sbx wait box not-a-pid 2>e && test_grep "no exec" e
'

# the pids of the processes the fake knows to run in a sandbox
fake_procs() {
	curl -fsS "$FAKE_URL/_fake/state" | "$TEST_PYTHON" -c 'import json, sys
print(" ".join(str(p) for p in json.load(sys.stdin)[sys.argv[1]]["processes"]))' "$1"
}
# none: asked anew at each try (an argument "$(fake_procs ...)" would be asked only once)
no_fake_procs() { test -z "$(fake_procs "$1")"; }

test_expect_success 'exec: a closed stdout (141) or a signal (128+N) ends the command inside too' '
	eid=$(e2b_id box) &&
	{ sbx exec box yes; echo $? >rc; } | head -n 1 >y.out &&
	test_eq y "$(cat y.out)" && test_eq 141 "$(cat rc)" &&
	expect_code 130 timeout --preserve-status -s INT 1 "$SBX" exec box sleep 30 &&
	expect_code 143 timeout --preserve-status -s TERM 1 "$SBX" exec box sleep 30 &&
	wait_until 30 no_fake_procs "$eid"
'

test_expect_success 'cp in and out keeps directories, modes and symlinks' '
	mkdir -p src/sub && echo hello >src/sub/f && chmod 640 src/sub/f && chmod 750 src/sub &&
	ln -s sub/f src/link && printf "x%.0s" $(seq 1 3000) >src/big &&
	sbx cp src box:/tmp/ &&
	test_eq hello "$(sbx exec box cat /tmp/src/sub/f)" &&
	test_eq sub/f "$(sbx exec box readlink /tmp/src/link)" &&
	test_eq 640 "$(sbx exec box stat -c %a /tmp/src/sub/f)" &&
	test_eq 750 "$(sbx exec box stat -c %a /tmp/src/sub)" &&
	mkdir back && sbx cp box:/tmp/src back/ &&
	diff -r src back/src && test -L back/src/link &&
	test_eq 640 "$(stat -c %a back/src/sub/f)" && test_eq 750 "$(stat -c %a back/src/sub)"
'

test_expect_success 'cp names files as docker cp does; streams; refusals are one line, 125' '
	echo one >file1 &&
	sbx cp file1 box:/tmp/renamed && test_eq one "$(sbx exec box cat /tmp/renamed)" &&
	sbx exec box mkdir -p /tmp/into && sbx cp file1 box:/tmp/into &&
	test_eq one "$(sbx exec box cat /tmp/into/file1)" &&
	sbx cp box:/tmp/renamed out1 && test_eq one "$(cat out1)" &&
	sbx cp box:/tmp/src/. contents && test -f contents/sub/f &&
	tar -cf - file1 | sbx cp - box:/tmp/into/ && sbx exec box test -f /tmp/into/file1 &&
	sbx cp box:/tmp/renamed - | tar -tf - >list && test_eq renamed "$(cat list)" &&
	expect_code 125 sbx cp box:/tmp/nope out2 2>e && expect_one_error_line e "/tmp/nope.*does not exist" &&
	expect_code 125 sbx cp file1 box:/no/such/dir/x 2>e && expect_one_error_line e "does not exist" &&
	expect_code 125 sbx cp src box:/tmp/renamed 2>e && expect_one_error_line e "directory onto file" &&
	expect_code 125 sbx cp - box:/tmp/into </dev/null 2>e && expect_one_error_line e "empty" &&
	test_eq "" "$(sbx exec box sh -c "ls /tmp/.sbx-cp* 2>/dev/null")"
'

test_expect_success 'cp -L follows SRC when it is a link (and only SRC)' '
	sbx exec box sh -c "mkdir -p /tmp/real && echo t >/tmp/real/f && ln -s real/f /tmp/real/l && ln -sfn /tmp/real /tmp/lnk" &&
	sbx cp -L box:/tmp/lnk followed && test -d followed && test -L followed/l &&
	sbx cp box:/tmp/lnk notfollowed && test -L notfollowed
'

# --- sbx fs: /files for read and write, the filesystem service for the rest ---------------

test_expect_success 'fs: write, read (binary), stat, ls, mkdir, mv, rm through envd' '
	head -c 300000 /dev/urandom >fs.bin &&
	sbx fs write box /tmp/fs/deep/f.bin <fs.bin &&
	sbx fs read box /tmp/fs/deep/f.bin >fs.back && cmp fs.bin fs.back &&
	sbx fs stat --json box /tmp/fs/deep/f.bin >st.json &&
	json_assert st.json "assert r[\"type\"] == \"file\" and r[\"size\"] == 300000
assert r[\"name\"] == \"f.bin\" and r[\"path\"] == \"/tmp/fs/deep/f.bin\"" &&
	sbx fs mkdir box /tmp/fs/d && sbx fs mkdir -p box /tmp/fs/d/e/f &&
	sbx exec box ln -s deep/f.bin /tmp/fs/lnk &&
	sbx fs ls --json box /tmp/fs >ls.json &&
	json_assert ls.json "assert [e[\"name\"] for e in r] == [\"d\", \"deep\", \"lnk\"], r
assert r[2][\"type\"] == \"symlink\" and r[2][\"link_target\"].endswith(\"deep/f.bin\")" &&
	sbx fs ls -R box /tmp/fs >ls.txt && test_grep "/tmp/fs/d/e/f$" ls.txt &&
	sbx fs mv box /tmp/fs/deep/f.bin /tmp/fs/moved && sbx exec box test -f /tmp/fs/moved &&
	sbx fs rm box /tmp/fs/moved && expect_code 1 sbx exec box test -e /tmp/fs/moved &&
	sbx fs rm -r box /tmp/fs && expect_code 1 sbx exec box test -e /tmp/fs
'

test_expect_success 'fs: missing paths are not_found (125); what E2B cannot do is unsupported' '
	expect_code 125 sbx fs read box /tmp/nope 2>e && expect_one_error_line e "does not exist" &&
	expect_code 125 sbx fs stat box /tmp/nope 2>e && expect_one_error_line e "does not exist" &&
	expect_code 125 sbx fs rm box /tmp/nope 2>e && expect_one_error_line e "does not exist" &&
	sbx fs rm -f box /tmp/nope &&
	expect_code 125 sbx fs mkdir box /tmp/no/such 2>e && expect_one_error_line e "does not exist" &&
	echo x | expect_code 125 sbx fs write --mode 0600 box /tmp/m 2>e &&
	expect_one_error_line e "cannot set a file.s mode" &&
	sbx exec box mkdir -p /tmp/dd && expect_code 125 sbx fs rm box /tmp/dd 2>e &&
	expect_one_error_line e "is a directory" && sbx fs rm -r box /tmp/dd
'

test_expect_success 'pause keeps memory (memory:true); exec refuses until resume; --resume' '
	fake_reset &&
	sbx exec -d box sh -c "echo \$\$ >/tmp/sleeper.pid; exec sleep 300" >/dev/null &&
	wait_until 20 sbx exec box test -s /tmp/sleeper.pid &&
	sbx pause box && test_eq paused "$(sb_state box)" &&
	test_eq paused "$(fake_state "$(e2b_id box)")" &&
	expect_code 0 sbx pause box &&
	expect_code 125 sbx exec box true 2>e && expect_one_error_line e "is paused.*sbx resume box" &&
	sbx resume box && test_eq running "$(sb_state box)" &&
	sbx exec box sh -c "kill -0 \$(cat /tmp/sleeper.pid)" &&
	sbx pause box && test_eq again "$(sbx exec --resume box echo again)" &&
	fake_requests req.json &&
	json_assert req.json "p = [q for q in r if q[\"path\"].endswith(\"/pause\")]
c = [q for q in r if q[\"path\"].endswith(\"/connect\")]
assert len(p) == 2 and len(c) == 2, (p, c)"
'

test_expect_success 'pause --release is a filesystem-only pause; resume brings it back' '
	fake_reset &&
	sbx pause --release box && test_eq paused "$(fake_state "$(e2b_id box)")" &&
	sbx resume box && sbx exec box test -f /tmp/renamed &&
	test_eq running "$(sb_state box)"
'

test_expect_success 'preview: https://PORT-ID.DOMAIN, with the traffic token when there is one' '
	id=$(e2b_id box) &&
	test_eq "https://8080-$id.e2b.test" "$(sbx preview box 8080)" &&
	sbx preview --json box 3000 >p.json &&
	json_assert p.json "assert r[\"url\"].startswith(\"https://3000-\") and r[\"port\"] == 3000
assert \"token\" not in r" &&
	expect_code 125 sbx preview --public box 8080 2>e && test_grep "does not support --public" e
'

# (names no id can start with: after rm of one, "b3" would resolve as a prefix of an id "b3...")
test_expect_success 'ls pages through every sandbox; one deleted out of band shows missing' '
	sbx create --provider e2b --name n2 >/dev/null && sbx create --provider e2b --name n3 >/dev/null &&
	fake_reset &&
	sbx ls >ls.out && grep -E "^[0-9a-f]{12} +n2 +e2b +running" ls.out &&
	fake_requests req.json &&
	json_assert req.json "l = [q for q in r if q[\"path\"] == \"/v2/sandboxes\"]
assert len(l) >= 2, l
assert any(\"nextToken=\" in q[\"query\"] for q in l)" &&
	curl -fsS -X DELETE -H "X-API-Key: e2b_test_key" "$FAKE_URL/sandboxes/$(e2b_id n3)" &&
	sbx ls >ls.out && grep -E " n3 +e2b +missing" ls.out && grep -E " n2 +e2b +running" ls.out &&
	test_eq missing "$(sb_state n3)" &&
	expect_code 0 sbx rm n3 && expect_code 125 sbx inspect n3 2>/dev/null &&
	expect_code 125 sbx rm n2 2>e && test_grep "rm -f n2" e &&
	n2=$(e2b_id n2) && sbx rm -f n2 && test_eq gone "$(fake_state "$n2")"
'

test_expect_success 'a missing or rejected key: one line naming the variable, 125' '
	expect_code 125 env -u E2B_API_KEY "$SBX" create --provider e2b 2>e &&
	expect_one_error_line e "E2B_API_KEY is not set" &&
	expect_code 125 env E2B_API_KEY=wrong "$SBX" create --provider e2b 2>e &&
	expect_one_error_line e "rejected the API key \(HTTP 401.*check E2B_API_KEY" &&
	expect_code 125 env E2B_API_KEY=wrong SBX_JSON=1 "$SBX" create --provider e2b 2>e &&
	json_assert e "assert r[\"error\"][\"code\"] == \"auth\"" &&
	expect_code 0 env E2B_API_KEY=wrong "$SBX" exec box true &&
	store_ok && test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'create: a 429 with Retry-After is waited out; a 500 is not retried' '
	fake_reset &&
	fake_fault "{\"match\": \"POST ^/sandboxes\$\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}" &&
	sbx create --provider e2b --name after429 >/dev/null &&
	fake_requests req.json &&
	json_assert req.json "c = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"] == \"/sandboxes\"]
assert len(c) == 2, c" &&
	sbx rm -f after429 &&
	fake_reset &&
	fake_fault "{\"match\": \"POST ^/sandboxes\$\", \"kind\": \"status\", \"status\": 500}" &&
	expect_code 125 sbx create --provider e2b --name fails 2>e &&
	expect_one_error_line e "E2B failed \(HTTP 500" &&
	fake_requests req.json &&
	json_assert req.json "c = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"] == \"/sandboxes\"]
assert len(c) == 1, c" &&
	expect_code 125 sbx inspect fails 2>/dev/null && store_ok
'

test_expect_success 'rate limited for good: bounded tries, then one line' '
	fake_reset &&
	fake_fault "{\"match\": \"GET ^/sandboxes/\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"0\"}, \"times\": 0}" &&
	sbx inspect box >i.json 2>e &&
	json_assert i.json "assert \"rate limiting\" in r[\"remote_error\"], r" &&
	fake_requests req.json &&
	json_assert req.json "g = [q for q in r if q[\"method\"] == \"GET\" and q[\"path\"].startswith(\"/sandboxes/\")]
assert len(g) == 5, len(g)" &&
	fake_fault "{\"match\": \"POST /pause\$\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"3600\"}}" &&
	expect_code 125 sbx pause box 2>e && expect_one_error_line e "asks to wait 3600 s" &&
	fake_reset && test_eq running "$(sb_state box)"
'

test_expect_success 'idempotent calls are retried on 5xx: rm after two 503s' '
	sbx create --provider e2b --name flaky >/dev/null &&
	fake_reset &&
	fake_fault "{\"match\": \"DELETE ^/sandboxes/\", \"kind\": \"status\", \"status\": 503, \"times\": 2}" &&
	fid=$(e2b_id flaky) && sbx rm -f flaky && test_eq gone "$(fake_state "$fid")" &&
	fake_fault "{\"match\": \"DELETE ^/sandboxes/\", \"kind\": \"status\", \"status\": 500, \"times\": 0}" &&
	sbx create --provider e2b --name stuck >/dev/null &&
	expect_code 125 sbx rm -f stuck 2>e && expect_one_error_line e "E2B failed \(HTTP 500" &&
	fake_reset && sbx rm -f stuck
'

test_expect_success 'pause: a 409 from E2B (paused there meanwhile) is not an error' '
	eid=$(e2b_id box) &&
	curl -fsS -H "X-API-Key: e2b_test_key" "$FAKE_URL/sandboxes/$eid" >detail.json &&
	curl -fsS -X POST -H "X-API-Key: e2b_test_key" -H "Content-Type: application/json" \
		--data "{}" "$FAKE_URL/sandboxes/$eid/pause" &&
	"$TEST_PYTHON" -c "import json, sys
d = json.load(open(\"detail.json\"))
d[\"state\"] = \"running\"
print(json.dumps({\"match\": \"GET ^/sandboxes/$eid\$\", \"kind\": \"status\", \"status\": 200,
                  \"body\": json.dumps(d)}))" >fault.json &&
	fake_reset && fake_fault "$(cat fault.json)" &&
	sbx pause box && test_eq paused "$(sb_state box)" &&
	fake_requests req.json &&
	json_assert req.json "p = [q for q in r if q[\"path\"].endswith(\"/pause\")]
assert len(p) == 1, p" &&
	sbx resume box && test_eq running "$(sb_state box)"
'

test_expect_success 'a sandbox E2B does not know: 404 is one line (exec) or missing (inspect)' '
	sbx create --provider e2b --name ghost >/dev/null && gid=$(e2b_id ghost) &&
	curl -fsS -X DELETE -H "X-API-Key: e2b_test_key" "$FAKE_URL/sandboxes/$gid" &&
	expect_code 125 sbx exec ghost true 2>e && expect_one_error_line e "does not answer at E2B" &&
	test_eq missing "$(sb_state ghost)" &&
	expect_code 125 sbx pause ghost 2>e && expect_one_error_line e "missing" &&
	sbx rm ghost
'

test_expect_success 'garbage from E2B: malformed JSON, truncated and malformed streams' '
	fake_reset &&
	fake_fault "{\"match\": \"POST ^/sandboxes\$\", \"kind\": \"invalid_json\"}" &&
	expect_code 125 sbx create --provider e2b 2>e && expect_one_error_line e "malformed answer" &&
	fake_fault "{\"match\": \"POST /process.Process/Start\", \"kind\": \"truncate\"}" &&
	expect_code 125 sbx exec box sh -c "echo a; sleep 0.3; echo b" >/dev/null 2>e &&
	expect_one_error_line e "stream ended before the command did|cut the answer short" &&
	fake_fault "{\"match\": \"POST /process.Process/Start\", \"kind\": \"bad_frame\"}" &&
	expect_code 125 sbx exec box true 2>e && expect_one_error_line e "frame of [0-9]+ bytes" &&
	fake_fault "{\"match\": \"POST /process.Process/Start\", \"kind\": \"invalid_json\"}" &&
	expect_code 125 sbx exec box true 2>e && expect_one_error_line e "malformed frame" &&
	fake_fault "{\"match\": \"GET ^/sandboxes/\", \"kind\": \"invalid_json\"}" &&
	sbx inspect box >i.json && json_assert i.json "assert \"malformed\" in r[\"remote_error\"]" &&
	sbx exec box true && store_ok && test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'a stall past the timeout: ls warns and shows the state last seen' '
	fake_reset &&
	fake_fault "{\"match\": \"GET ^/v2/sandboxes\$\", \"kind\": \"stall\", \"seconds\": 5}" &&
	SBX_REMOTE_TIMEOUT=1 "$SBX" ls >ls.out 2>e && grep -E " box +e2b +running" ls.out &&
	expect_one_error_line e "warning: cannot list e2b sandboxes.*(in time|stalled)" &&
	fake_fault "{\"match\": \"POST /pause\$\", \"kind\": \"stall\", \"seconds\": 5}" &&
	expect_code 125 env SBX_REMOTE_TIMEOUT=1 "$SBX" pause box 2>e &&
	expect_one_error_line e "did not answer in time|stalled" &&
	fake_reset && store_ok
'

test_expect_success 'TLS failures and plain http off loopback are one line, 125' '
	port=${FAKE_URL##*:} &&
	expect_code 125 env SBX_E2B_API_URL=https://127.0.0.1:$port "$SBX" create --provider e2b 2>e &&
	expect_one_error_line e "TLS failure talking to E2B at 127.0.0.1:$port" &&
	expect_code 125 env SBX_E2B_API_URL=http://sbx-test.invalid "$SBX" create --provider e2b 2>e &&
	expect_one_error_line e "over https only" &&
	store_ok && test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'keepalive and update --ttl set the timeout; stats reads the metrics' '
	sbx create --provider e2b --name live --ttl 60s >/dev/null &&
	test_atexit "\"\$SBX\" rm -f live >/dev/null 2>&1" &&
	fake_reset && sbx keepalive live && sbx update live --ttl 2h >/dev/null &&
	fake_requests req.json &&
	json_assert req.json "t = [q for q in r if q[\"method\"] == \"POST\" and q[\"path\"].endswith(\"/timeout\")]
assert len(t) == 2, t" &&
	curl -fsS "$FAKE_URL/_fake/state" >st.json &&
	json_assert st.json "assert r[\"$(e2b_id live)\"][\"timeoutLeft\"] > 3600, r" &&
	sbx inspect live >rec.json && json_assert rec.json "assert r[\"options\"][\"ttl_ms\"] == 7200000" &&
	sbx stats --json live >s.json &&
	json_assert s.json "s = r[0]; assert s[\"name\"] == \"live\" and s[\"memory_bytes\"] == 64 << 20
assert s[\"memory_limit_bytes\"] == 512 << 20 and s[\"disk_bytes\"] == 16 << 20
assert s[\"cpu_percent\"] == 1.0 and s[\"pids\"] is None and s[\"cpu_ms\"] is None" &&
	for o in "--cpus 2" "--memory 1g"; do
		# shellcheck disable=SC2086
		expect_code 125 sbx update live $o 2>e &&
		expect_one_error_line e "provider .e2b. does not support ${o%% *}" || exit 1
	done &&
	sbx pause live >/dev/null && expect_code 125 sbx keepalive live 2>e &&
	test_grep "paused" e && sbx rm -f live >/dev/null
'

test_expect_success 'rm -f removes the E2B sandbox and the record' '
	eid=$(e2b_id box) && sbx rm -f box &&
	test_eq gone "$(fake_state "$eid")" &&
	test_eq "" "$(sbx ls -q)" && expect_code 125 sbx inspect box 2>/dev/null
'

test_done
