#!/bin/bash
# The loopback Kubernetes apiserver fake (tests/fakes/k8s.py) checked by the real clients:
# kubectl (/usr/bin/kubectl) and @kubernetes/client-node, pinned in tests/sdk/k8s (npm ci into
# the trash directory). HTTPS with a CA made here, a bearer token in a kubeconfig; discovery
# (aggregated and legacy), pods that are real local sandboxes (get, Table, -o json, label
# selectors, Pending -> Running, Unschedulable), exec over WebSocket (exit codes 0, 3, 137,
# separate streams, stdin and its end, a tty, a missing command), kubectl cp both ways, the pod
# proxy, Status errors and injected faults (403, 429 with Retry-After, 500), the raw frames of
# v5 and v4 (ready frame, ping, the exec faults), the agent-sandbox Sandbox, SandboxTemplate,
# SandboxClaim and SandboxWarmPool (a claim adopting a pool's Sandbox), and a fake without those
# groups; a client certificate of the test's CA; the fake's own ping (kubectl answers it) and an
# image that cannot be pulled. The fake's sandboxes live in a store of
# its own; none may outlive it. Every request goes to 127.0.0.1.
# uid 4242 gets subordinate ids: kubectl cp's tar, run as root in the pod, keeps owners
# run.sh: subordinate ids for the uid pass
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl openssl node npm
KUBECTL=$(command -v kubectl || echo /usr/bin/kubectl)
if [ -z "$TEST_SKIP_ALL" ] && [ ! -x "$KUBECTL" ]; then
	TEST_SKIP_ALL="no kubectl on PATH: it comes with the machine's image (its kubectl package is \
not in Debian's archive, and Debian 12's own kubernetes-client 1.20 speaks SPDY only), so \
install-deps cannot add it"
fi

SDK_SRC=$TEST_DIR/sdk/k8s
FAKE=$TEST_DIR/fakes/k8s.py
FAKE_HOME=$TRASH/fake-home
TOKEN=k8s-test-token-$$
unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT KUBECTL_REMOTE_COMMAND_WEBSOCKETS
export KUBECONFIG=$TRASH/kubeconfig
CURL=(curl -sS --max-time 20 --noproxy "*" --cacert "$TRASH/ca.pem")
K=(timeout 40 "$KUBECTL" --request-timeout=30s)

# --- functions ----------------------------------------------------------------------------------
# fake_rm_all DIR: sbx rm -f every sandbox left in a fake's store
fake_rm_all() {
	local id
	[ -d "$1" ] || return 0
	for id in $(SBX_HOME=$1 "$SBX" ls -q 2>/dev/null); do
		SBX_HOME=$1 "$SBX" rm -f "$id" >/dev/null 2>&1
	done
	return 0
}

# stop_fake PID: SIGTERM, then up to 30 s for it to remove its sandboxes (SIGKILL after that)
dead() { ! pid_alive "$1"; }
stop_fake() {
	kill -TERM "$1" 2>/dev/null
	wait_until 30 dead "$1" || kill -KILL "$1" 2>/dev/null
	dead "$1"
}

# the CA, and the fake's certificate for 127.0.0.1 signed by it
make_certs() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
		-subj /CN=sbx-test-ca &&
		openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >srv.ext &&
		openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem \
			-days 2 -extfile srv.ext &&
		openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=kube-user &&
		printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out client.pem -days 2 -extfile client.ext &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.pem -days 2 \
			-subj /CN=rogue
} >"$TRASH/openssl.log" 2>&1

# start_k8s NAME [ARGS...]: a fake whose port goes to NAME.port, its log to NAME.log
start_k8s() {
	local n=$1
	shift
	"$TEST_PYTHON" "$FAKE" --sbx "$SBX" --sbx-home "$TRASH/$n-home" --port-file "$TRASH/$n.port" \
		--tls-cert "$TRASH/srv.pem" --tls-key "$TRASH/srv.key" --tls-client-ca "$TRASH/ca.pem" \
		--token "$TOKEN" "$@" \
		>"$TRASH/$n.log" 2>&1 &
}

# kubeconfig FILE PORT TOKEN
kubeconfig() {
	cat >"$1" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: fake
		  cluster:
		    server: https://127.0.0.1:$2
		    certificate-authority: $TRASH/ca.pem
		users:
		- name: tester
		  user:
		    token: $3
		contexts:
		- name: fake
		  context: {cluster: fake, user: tester, namespace: default}
		current-context: fake
	EOF
}

url() { printf 'https://127.0.0.1:%s%s' "$(cat "$TRASH/fake.port")" "$1"; }

# api METHOD PATH [curl args...]: a request with the token
api() {
	local m=$1 p=$2
	shift 2
	"${CURL[@]}" -X "$m" -H "Authorization: Bearer $TOKEN" "$@" "$(url "$p")"
}

fault() { "${CURL[@]}" -fsS -X POST --data "$1" "$(url /_fake/faults)" >/dev/null; }
control() { "${CURL[@]}" -fsS -X POST --data "$2" "$(url "/_fake/k8s/$1")" >/dev/null; }

# jassert FILE 'python statements on r': r is FILE's JSON
jassert() {
	"$TEST_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[2])' "$1" "$2"
}

# pod_json NAME [SPEC-EXTRA-JSON]: a pod manifest running sleep infinity in container sandbox
pod_json() {
	"$TEST_PYTHON" -c 'import json, sys
spec = {"containers": [{"name": "sandbox", "image": "busybox",
                        "command": ["sleep", "infinity"], "workingDir": "/tmp",
                        "env": [{"name": "GREETING", "value": "hello from the pod"}]}]}
spec.update(json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": sys.argv[1], "labels": {"app": "sbx-test",
                                                              "pod": sys.argv[1]}},
                  "spec": spec}))' "$@"
}

# new_pod NAME [SPEC-EXTRA-JSON]: kubectl create (no openapi here: --validate=false)
new_pod() {
	pod_json "$@" >"$1.json" && "${K[@]}" create --validate=false -f "$1.json" >/dev/null
}

phase() { "${K[@]}" get pod "$1" -o 'jsonpath={.status.phase}' 2>/dev/null; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
gone() { absent pod "$1"; }
absent() { "${K[@]}" get "$1" "$2" >/dev/null 2>&1 && return 1; return 0; }
# jp_is KIND NAME JSONPATH VALUE: one field of an object is VALUE
jp_is() { [ "$("${K[@]}" get "$1" "$2" -o "jsonpath=$3" 2>/dev/null)" = "$4" ]; }
# the fake's backing sandboxes
fake_ids() { SBX_HOME=$TRASH/fake-home "$SBX" ls -q; }
no_fake_ids() { [ -z "$(fake_ids)" ]; }

# wsexec PROTO QUERY [ARGS...]: raw WebSocket exec of pod sbx-1 (tests/helpers/ws.py's frames
# over TLS); prints a JSON report: proto, ready, out, err, status, close, pong, eof
wsexec() {
	"$TEST_PYTHON" "$TRASH/wsexec.py" "$(cat "$TRASH/fake.port")" "$TOKEN" "$TRASH/ca.pem" "$@"
}
cat >"$TRASH/wsexec.py" <<EOF
import base64, json, os, socket, ssl, struct, sys
sys.path.insert(0, "$TEST_DIR/helpers")
from ws import accept_key, frame, read_frame, read_head
port, token, ca, proto, query = sys.argv[1:6]
opts = sys.argv[6:]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=20),
                    server_hostname="127.0.0.1")
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /api/v1/namespaces/default/pods/sbx-1/exec?%s HTTP/1.1\r\nHost: x\r\n"
           "Authorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: %s\r\n\r\n" % (query, token, key, proto)).encode())
line, headers, rest = read_head(s)
assert " 101 " in line, line
assert headers.get("sec-websocket-accept") == accept_key(key)
r = {"proto": headers.get("sec-websocket-protocol"), "ready": None, "out": "", "err": "",
     "status": None, "close": None, "pong": None, "eof": False}
early = []
if "ping" in opts:   # answered while the command waits for its stdin
    s.sendall(frame(9, b"are-you-there", True))
    while True:
        fin, op, data = read_frame(s)
        if op == 10:
            r["pong"] = data.decode()
            break
        early.append((fin, op, data))
if "stdin" in opts:
    s.sendall(frame(2, b"\x00abc\n", True))
    s.sendall(frame(2, b"\x00def\n", True))
    s.sendall(frame(2, b"\xff\x00", True))
while True:
    try:
        fin, op, data = early.pop(0) if early else read_frame(s)
    except EOFError:
        r["eof"] = True
        break
    if op == 10:
        r["pong"] = data.decode()
    elif op == 8:
        r["close"] = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
        s.sendall(frame(8, data[:2], True))
        break
    elif op == 2 and r["ready"] is None:
        r["ready"] = list(data)
    elif op == 2:
        ch, body = data[0], data[1:]
        if ch == 1:
            r["out"] += body.decode()
        elif ch == 2:
            r["err"] += body.decode()
        elif ch == 3:
            r["status"] = json.loads(body)
print(json.dumps(r))
EOF

# the fakes: started here, at the file's level, so that every test can reach them
if [ -z "$TEST_SKIP_ALL" ]; then
	make_certs || TEST_SKIP_ALL="openssl could not make a CA and a certificate"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	start_k8s fake
	FAKE_PID=$!
	test_atexit 'stop_fake "$FAKE_PID"; fake_rm_all "$TRASH/fake-home"'
	start_k8s plain --no-agent-sandbox
	PLAIN_PID=$!
	test_atexit 'stop_fake "$PLAIN_PID"; fake_rm_all "$TRASH/plain-home"'
	if wait_until 20 test -s "$TRASH/fake.port" && wait_until 20 test -s "$TRASH/plain.port"; then
		kubeconfig "$KUBECONFIG" "$(cat "$TRASH/fake.port")" "$TOKEN"
		kubeconfig "$TRASH/plain.kubeconfig" "$(cat "$TRASH/plain.port")" "$TOKEN"
		kubeconfig "$TRASH/bad.kubeconfig" "$(cat "$TRASH/fake.port")" wrong-token
	else
		cat "$TRASH/fake.log" "$TRASH/plain.log" >&2
		TEST_SKIP_ALL="the fake did not start"
	fi
fi

# --- the fake itself ----------------------------------------------------------------------------
test_expect_success 'the fake serves HTTPS on 127.0.0.1 with the CA made here, and says so' '
	test_grep -x "k8s fake listening on https://127.0.0.1:$(cat "$TRASH/fake.port")" \
		"$TRASH/fake.log" &&
	"${K[@]}" version -o json >version.json &&
	jassert version.json "assert r[\"serverVersion\"][\"major\"] == \"1\", r" &&
	# control: the certificate is checked (without the CA, curl refuses it)
	expect_code 60 curl -sS --max-time 10 "$(url /version)" -o /dev/null 2>/dev/null
'

test_expect_success '401 Status without the token or with a wrong one; the right one works' '
	"${CURL[@]}" -o none.json -w "%{http_code}" "$(url /api/v1/namespaces/default/pods)" >code &&
	test_eq 401 "$(cat code)" &&
	jassert none.json "assert (r[\"kind\"], r[\"reason\"], r[\"code\"]) == (\"Status\", \"Unauthorized\", 401), r" &&
	expect_code 1 "${K[@]}" --kubeconfig "$TRASH/bad.kubeconfig" get pods 2>bad.err &&
	test_grep "You must be logged in to the server" bad.err &&
	"${K[@]}" get pods >good.out 2>good.err
'

test_expect_success 'a client certificate signed by the client CA authenticates kubectl as a token does (control: one of another CA is refused)' '
	sed "s|^    token: .*|    client-certificate: $TRASH/client.pem\n    client-key: $TRASH/client.key|" \
		"$KUBECONFIG" >cert.kubeconfig &&
	"${K[@]}" --kubeconfig cert.kubeconfig get pods >cert.out 2>cert.err &&
	sed "s|^    token: .*|    client-certificate: $TRASH/rogue.pem\n    client-key: $TRASH/rogue.key|" \
		"$KUBECONFIG" >rogue.kubeconfig &&
	expect_code 1 "${K[@]}" --kubeconfig rogue.kubeconfig get pods 2>rogue.err &&
	: "TLS 1.3 refuses a client certificate after the handshake: kubectl reads the alert," &&
	: "or its first write meets the closed connection first" &&
	test_grep -i "unknown.ca\|certificate\|broken pipe\|connection reset" rogue.err
'

test_expect_success 'discovery: aggregated when asked, legacy otherwise; kubectl api-resources' '
	api GET /apis -H "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json" \
		-D agg.h -o agg.json &&
	test_grep -i "^content-type: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" agg.h &&
	jassert agg.json "assert sorted(i[\"metadata\"][\"name\"] for i in r[\"items\"]) == [\"agents.x-k8s.io\", \"extensions.agents.x-k8s.io\"], r" &&
	api GET /apis -o legacy.json &&
	jassert legacy.json "assert r[\"kind\"] == \"APIGroupList\" and len(r[\"groups\"]) == 2, r" &&
	"${K[@]}" api-resources >res.out &&
	test_grep -E "^pods +po +v1 +true +Pod" res.out &&
	test_grep -E "^sandboxclaims +extensions.agents.x-k8s.io/v1alpha1 +true +SandboxClaim" res.out &&
	test_grep -E "^sandboxes +agents.x-k8s.io/v1alpha1 +true +Sandbox" res.out
'

test_expect_success 'a fake started without the agent-sandbox groups has none of them' '
	"${K[@]}" --kubeconfig "$TRASH/plain.kubeconfig" api-resources >plain.out &&
	test_grep -E "^pods " plain.out &&
	test_grep ! -i sandbox plain.out &&
	expect_code 1 "${K[@]}" --kubeconfig "$TRASH/plain.kubeconfig" get sandboxes 2>plain.err &&
	test_grep "the server doesn.t have a resource type \"sandboxes\"" plain.err &&
	"${K[@]}" get sandboxes >with.out 2>with.err
'

# --- pods ---------------------------------------------------------------------------------------
test_expect_success 'kubectl create: a pod goes Pending -> Running, a real sandbox behind it' '
	new_pod sbx-1 &&
	wait_until 30 is_phase sbx-1 Running &&
	"${K[@]}" wait --for=condition=Ready pod/sbx-1 --timeout=20s &&
	"${CURL[@]}" "$(url /_fake/state)" >state.json &&
	jassert state.json "b = r[\"pods\"][\"default/sbx-1\"][\"sandbox\"]; assert b and b in r[\"backing\"], r" &&
	fake_ids >ids &&
	test_grep -x "$(jassert state.json "print(r[\"pods\"][\"default/sbx-1\"][\"sandbox\"])")" ids
'

test_expect_success 'kubectl get pods: the Table, -o json, label selectors' '
	"${K[@]}" get pods >get.out &&
	test_grep -E "^NAME +READY +STATUS +RESTARTS +AGE$" get.out &&
	test_grep -E "^sbx-1 +1/1 +Running +0 +[0-9]+[smhd]$" get.out &&
	"${K[@]}" get pods -o json >pods.json &&
	jassert pods.json "p = [i for i in r[\"items\"] if i[\"metadata\"][\"name\"] == \"sbx-1\"][0]; assert p[\"status\"][\"phase\"] == \"Running\" and {c[\"type\"]: c[\"status\"] for c in p[\"status\"][\"conditions\"]}[\"Ready\"] == \"True\", p" &&
	"${K[@]}" get pods -l pod=sbx-1 -o name >sel.out &&
	test_eq "pod/sbx-1" "$(cat sel.out)" &&
	"${K[@]}" get pods -l pod=nothing-here -o name >none.out 2>&1 &&
	test_grep ! sbx-1 none.out &&
	api GET "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dsbx-1" \
		-o watch.out &&
	jsonl_assert watch.out "assert [(e[\"type\"], e[\"object\"][\"metadata\"][\"name\"]) for e in r] == [(\"ADDED\", \"sbx-1\")], r"
'

test_expect_success 'kubectl exec: exit codes 0, 3 and 137, stdout and stderr apart, env and cwd' '
	"${K[@]}" exec sbx-1 -- sh -c "echo \"\$GREETING\"; pwd" >out0 2>err0 &&
	test_eq "hello from the pod
/tmp" "$(cat out0)" &&
	expect_code 3 "${K[@]}" exec sbx-1 -- sh -c "echo out; echo err >&2; exit 3" >out3 2>err3 &&
	test_eq out "$(cat out3)" &&
	test_eq "err
command terminated with exit code 3" "$(cat err3)" &&
	expect_code 137 "${K[@]}" exec sbx-1 -- sh -c "kill -9 \$\$" 2>err137 &&
	test_grep "command terminated with exit code 137" err137
'

test_expect_success 'kubectl exec -i: stdin and its end; 1 MiB through cat unchanged' '
	printf "l1\nl2\n" | "${K[@]}" exec -i sbx-1 -- wc -l >wc.out &&
	test_eq 2 "$(cat wc.out)" &&
	head -c 1048576 /dev/urandom >big &&
	"${K[@]}" exec -i sbx-1 -- cat <big >big.back &&
	cmp big big.back
'

test_expect_success 'kubectl exec of a command that does not exist: InternalError, exit 1' '
	expect_code 1 "${K[@]}" exec sbx-1 -- no-such-command-here 2>nocmd.err &&
	test_grep "executable file not found" nocmd.err
'

test_expect_success 'kubectl exec -t: a terminal, with the size kubectl sends' '
	SHELL=/bin/sh script -qec "stty cols 101 rows 31; timeout --foreground 40 $KUBECTL exec -it sbx-1 -- sh -c \"sleep 0.5; stty size; tty\"" \
		/dev/null </dev/null >tty.out
	rc=$?
	cat tty.out
	test_eq 0 "$rc" &&
	test_grep "31 101" tty.out &&
	test_grep "/dev/pts/" tty.out
'

test_expect_success 'kubectl cp into the pod and back out' '
	mkdir -p src/sub &&
	echo hello >src/a.txt &&
	head -c 300000 /dev/urandom >src/sub/big &&
	"${K[@]}" cp src sbx-1:/tmp/dst &&
	"${K[@]}" exec sbx-1 -- cat /tmp/dst/a.txt >a.back &&
	test_eq hello "$(cat a.back)" &&
	"${K[@]}" cp sbx-1:/tmp/dst out 2>cp.err &&
	cmp src/sub/big out/sub/big &&
	cmp src/a.txt out/a.txt
'

HTTP_PORT=$(free_port)
# serve_www: a web server started in sbx-1 by kubectl exec. Asked again should kubectl fail:
# an exec that answers nothing but its status before kubectl has made its streams is, now and
# then, dropped by kubectl itself ("Unknown stream id 3", "closed all streams"); the exec
# checks above hold kubectl to every status
serve_www() {
	"${K[@]}" exec sbx-1 -- sh -c "mkdir -p /tmp/www && echo preview-ok >/tmp/www/index.html &&
		(/usr/bin/python3 -m http.server $HTTP_PORT --bind 127.0.0.1 --directory /tmp/www \
		>/dev/null 2>&1 &)"
}
test_expect_success 'kubectl get --raw of the pod proxy reaches a server inside the pod' '
	{ serve_www || serve_www; } &&
	wait_until 20 "${K[@]}" get --raw "/api/v1/namespaces/default/pods/sbx-1:$HTTP_PORT/proxy/index.html" &&
	"${K[@]}" get --raw "/api/v1/namespaces/default/pods/sbx-1:$HTTP_PORT/proxy/index.html" >proxy.out &&
	test_eq preview-ok "$(cat proxy.out)" &&
	api GET "/api/v1/namespaces/default/pods/sbx-1:$HTTP_PORT/proxy/nothing-here" \
		-o /dev/null -w "%{http_code}" >code &&
	test_eq 404 "$(cat code)" &&
	# the method goes through too (http.server has no POST: 501 from it)
	api POST "/api/v1/namespaces/default/pods/sbx-1:$HTTP_PORT/proxy/index.html" -d x=1 \
		-o /dev/null -w "%{http_code}" >code &&
	test_eq 501 "$(cat code)" &&
	# control: a port where nothing listens is a 503 Status
	api GET "/api/v1/namespaces/default/pods/sbx-1:1/proxy/" -o down.json -w "%{http_code}" >code &&
	test_eq 503 "$(cat code)" &&
	jassert down.json "assert r[\"kind\"] == \"Status\" and r[\"reason\"] == \"ServiceUnavailable\", r"
'

test_expect_success 'a pod whose command ends is Succeeded or Failed, its output in kubectl logs' '
	new_pod once "{\"restartPolicy\": \"Never\", \"containers\": [{\"name\": \"sandbox\", \"image\": \"busybox\", \"command\": [\"sh\", \"-c\", \"echo from-main\"]}]}" &&
	new_pod fails "{\"restartPolicy\": \"Never\", \"containers\": [{\"name\": \"sandbox\", \"image\": \"busybox\", \"command\": [\"sh\", \"-c\", \"exit 4\"]}]}" &&
	wait_until 30 is_phase once Succeeded &&
	wait_until 30 is_phase fails Failed &&
	"${K[@]}" logs once >once.log &&
	test_eq from-main "$(cat once.log)" &&
	jp_is pod fails "{.status.containerStatuses[0].state.terminated.exitCode}" 4 &&
	"${K[@]}" delete pod once fails >/dev/null
'

test_expect_success 'a pod whose nodeSelector matches no node stays Pending, Unschedulable' '
	new_pod picky "{\"nodeSelector\": {\"disktype\": \"ssd\"}}" &&
	wait_until 20 jp_is pod picky "{.status.conditions[0].reason}" Unschedulable &&
	"${K[@]}" get pod picky -o json >picky.json &&
	jassert picky.json "c = r[\"status\"][\"conditions\"][0]; assert r[\"status\"][\"phase\"] == \"Pending\" and c[\"type\"] == \"PodScheduled\" and c[\"status\"] == \"False\" and \"affinity/selector\" in c[\"message\"], r" &&
	expect_code 1 "${K[@]}" exec picky -- true 2>picky.err &&
	test_grep "not running" picky.err &&
	"${K[@]}" delete pod picky >/dev/null
'

test_expect_success 'the schedulable switch: Pending while off, Running once on' '
	control schedulable "{\"schedulable\": false}" &&
	new_pod later &&
	wait_until 20 jp_is pod later "{.status.conditions[0].reason}" Unschedulable &&
	test_eq Pending "$(phase later)" &&
	control schedulable "{\"schedulable\": true}" &&
	wait_until 30 is_phase later Running &&
	"${K[@]}" delete pod later >/dev/null
'

test_expect_success 'the pod-phase control ends a pod as an eviction would, its sandbox gone' '
	new_pod evicted &&
	wait_until 30 is_phase evicted Running &&
	"${CURL[@]}" "$(url /_fake/state)" >ev.json &&
	sid=$(jassert ev.json "print(r[\"pods\"][\"default/evicted\"][\"sandbox\"])") &&
	fake_ids >ids && test_grep -x "$sid" ids &&
	control pod-phase "{\"name\": \"evicted\", \"phase\": \"Failed\", \"reason\": \"Evicted\", \"message\": \"low on memory\"}" &&
	test_eq Failed "$(phase evicted)" &&
	jp_is pod evicted "{.status.reason}" Evicted &&
	fake_ids >ids && test_grep ! -x "$sid" ids &&
	expect_code 1 "${K[@]}" exec evicted -- true 2>ev.err &&
	test_grep "completed pod" ev.err &&
	"${K[@]}" delete pod evicted >/dev/null
'

test_expect_success 'a PVC in use stays Terminating until its pod goes; one not in use goes at once' '
	for n in data free; do
		printf "{\"apiVersion\": \"v1\", \"kind\": \"PersistentVolumeClaim\", \"metadata\": {\"name\": \"%s\"}, \"spec\": {\"accessModes\": [\"ReadWriteOnce\"], \"resources\": {\"requests\": {\"storage\": \"1Gi\"}}}}" \
			"$n" >"pvc-$n.json" &&
			"${K[@]}" create --validate=false -f "pvc-$n.json" >/dev/null || return 1
	done &&
	jp_is pvc data "{.status.phase}" Bound &&
	new_pod user "{\"volumes\": [{\"name\": \"d\", \"persistentVolumeClaim\": {\"claimName\": \"data\"}}], \"containers\": [{\"name\": \"sandbox\", \"image\": \"busybox\", \"command\": [\"sleep\", \"infinity\"], \"volumeMounts\": [{\"name\": \"d\", \"mountPath\": \"/data\"}]}]}" &&
	wait_until 30 is_phase user Running &&
	"${K[@]}" exec user -- sh -c "echo on-the-volume >/data/f" &&
	"${K[@]}" delete pvc data --wait=false >/dev/null &&
	"${K[@]}" get pvc data >pvc.out &&
	test_grep -E "^data +Terminating " pvc.out &&
	"${K[@]}" exec user -- cat /data/f >f.out &&
	test_eq on-the-volume "$(cat f.out)" &&
	"${K[@]}" delete pod user >/dev/null &&
	wait_until 20 absent pvc data &&
	"${K[@]}" delete pvc free >/dev/null &&
	absent pvc free
'

test_expect_success 'Status errors: 404 NotFound, 409 AlreadyExists, 422 Invalid' '
	expect_code 1 "${K[@]}" get pod no-such-pod 2>nf.err &&
	test_grep "pods \"no-such-pod\" not found" nf.err &&
	expect_code 1 "${K[@]}" create --validate=false -f sbx-1.json 2>ae.err &&
	test_grep "AlreadyExists" ae.err &&
	api POST /api/v1/namespaces/default/pods -H "Content-Type: application/json" \
		-d "{\"metadata\": {\"name\": \"Bad_Name\"}, \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"i\"}]}}" \
		-o inv.json -w "%{http_code}" >code &&
	test_eq 422 "$(cat code)" &&
	jassert inv.json "assert r[\"reason\"] == \"Invalid\", r" &&
	api GET /api/v1/namespaces/nowhere/pods/x -o nons.json -w "%{http_code}" >code &&
	test_eq 404 "$(cat code)"
'

test_expect_success 'injected faults: 403 and 500 Status bodies; kubectl retries a 429 after Retry-After' '
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/sbx-1\$\", \"kind\": \"status\", \"status\": 403}" &&
	expect_code 1 "${K[@]}" get pod sbx-1 2>f403.err &&
	test_grep -i "forbidden" f403.err &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/sbx-1\$\", \"kind\": \"status\", \"status\": 500}" &&
	api GET /api/v1/namespaces/default/pods/sbx-1 -o f500.json -w "%{http_code}" >code &&
	test_eq 500 "$(cat code)" &&
	jassert f500.json "assert (r[\"kind\"], r[\"reason\"]) == (\"Status\", \"InternalError\"), r" &&
	"${CURL[@]}" -fsS -X DELETE "$(url /_fake/requests)" >/dev/null &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/sbx-1\$\", \"kind\": \"status\", \"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}" &&
	"${K[@]}" get pod sbx-1 -o name >retry.out &&
	test_eq pod/sbx-1 "$(cat retry.out)" &&
	"${CURL[@]}" -fsS "$(url /_fake/requests)" >reqs.json &&
	jassert reqs.json "assert len([q for q in r if q[\"path\"] == \"/api/v1/namespaces/default/pods/sbx-1\"]) == 2, r"
'

# --- the exec protocol, frame by frame ----------------------------------------------------------
Q3="command=sh&command=-c&command=echo%20out%3B%20echo%20err%20%3E%262%3B%20exit%203&stdout=true&stderr=true"
Q3I="command=sh&command=-c&command=cat%3B%20echo%20err%20%3E%262%3B%20exit%203&stdin=true&stdout=true&stderr=true"
test_expect_success 'v5: ready frame, a ping answered, channels 0 1 2, Status with the ExitCode cause, close 1000' '
	wsexec v5.channel.k8s.io "$Q3I" ping stdin >v5.json &&
	jassert v5.json "assert r[\"proto\"] == \"v5.channel.k8s.io\" and r[\"ready\"] == [1], r
assert (r[\"out\"], r[\"err\"], r[\"close\"], r[\"pong\"]) == (\"abc\ndef\n\", \"err\n\", 1000, \"are-you-there\"), r
s = r[\"status\"]
assert (s[\"status\"], s[\"reason\"], s[\"details\"][\"causes\"]) == (\"Failure\", \"NonZeroExitCode\", [{\"reason\": \"ExitCode\", \"message\": \"3\"}]), s"
'

test_expect_success 'v5 stdin with ff 00 at its end; v4 when only v4 is offered; ready on 2 without stdout' '
	wsexec "v5.channel.k8s.io, v4.channel.k8s.io" "command=wc&command=-l&stdin=true&stdout=true&stderr=true" stdin >in.json &&
	jassert in.json "assert (r[\"proto\"], r[\"out\"].strip(), r[\"status\"][\"status\"]) == (\"v5.channel.k8s.io\", \"2\", \"Success\"), r" &&
	wsexec "v4.channel.k8s.io" "$Q3" >v4.json &&
	jassert v4.json "assert r[\"proto\"] == \"v4.channel.k8s.io\" and r[\"out\"] == \"out\n\" and r[\"status\"][\"details\"][\"causes\"][0][\"message\"] == \"3\", r" &&
	wsexec v5.channel.k8s.io "command=sh&command=-c&command=echo%20e%20%3E%262&stderr=true" >ready2.json &&
	jassert ready2.json "assert r[\"ready\"] == [2] and r[\"err\"] == \"e\n\", r"
'

test_expect_success 'exec faults: the WebSocket cut mid-stream; a Status without an exit code' '
	fault "{\"match\": \"GET /pods/sbx-1/exec\$\", \"kind\": \"ws_close\"}" &&
	wsexec v5.channel.k8s.io "command=sh&command=-c&command=echo%20one%3B%20sleep%201%3B%20echo%20two&stdout=true" >cut.json &&
	jassert cut.json "assert r[\"eof\"] and r[\"status\"] is None and r[\"close\"] is None and r[\"out\"].startswith(\"one\n\"), r" &&
	fault "{\"match\": \"GET /pods/sbx-1/exec\$\", \"kind\": \"no_exit_code\"}" &&
	expect_code 1 "${K[@]}" exec sbx-1 -- sh -c "exit 5" 2>noexit.err &&
	wsexec v5.channel.k8s.io "command=true&stdout=true" >after.json &&
	jassert after.json "assert r[\"status\"] == {\"metadata\": {}, \"status\": \"Success\"}, r"
'

# --- the agent-sandbox API ----------------------------------------------------------------------
test_expect_success 'a SandboxClaim gets a Sandbox from its SandboxTemplate, and its pod' '
	cat >tmpl.json <<-EOF &&
	{"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxTemplate",
	 "metadata": {"name": "tmpl"},
	 "spec": {"podTemplate": {"spec": {"containers": [{"name": "sandbox", "image": "busybox",
	                                                   "command": ["sleep", "infinity"]}]}}}}
	EOF
	cat >claim.json <<-EOF &&
	{"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
	 "metadata": {"name": "claimed"}, "spec": {"sandboxTemplateRef": {"name": "tmpl"}}}
	EOF
	"${K[@]}" create --validate=false -f tmpl.json -f claim.json >/dev/null &&
	wait_until 30 is_phase claimed Running &&
	wait_until 10 jp_is sandboxclaim claimed "{.status.conditions[0].status}" True &&
	"${K[@]}" get sandbox claimed -o json >sb.json &&
	jassert sb.json "assert r[\"status\"][\"replicas\"] == 1 and r[\"metadata\"][\"ownerReferences\"][0][\"kind\"] == \"SandboxClaim\", r" &&
	"${K[@]}" exec claimed -- echo in-the-claimed-pod >claimed.out &&
	test_eq in-the-claimed-pod "$(cat claimed.out)" &&
	"${K[@]}" delete sandboxclaim claimed >/dev/null &&
	wait_until 20 gone claimed &&
	expect_code 1 "${K[@]}" get sandbox claimed 2>/dev/null
'

test_expect_success 'a SandboxWarmPool keeps its Sandboxes; a SandboxClaim of its template adopts one (status.sandbox.name, the pod-name annotation), and the pool makes another' '
	cat >pool.json <<-EOF &&
	{"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxWarmPool",
	 "metadata": {"name": "warm"}, "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "tmpl"}}}
	EOF
	"${K[@]}" create --validate=false -f pool.json >/dev/null &&
	wait_until 30 jp_is sandboxwarmpool warm "{.status.readyReplicas}" 1 &&
	pooled=$("${K[@]}" get sandboxes -l agents.x-k8s.io/warm-pool-sandbox=warm -o jsonpath="{.items[0].metadata.name}") &&
	test_match "^warm-" "$pooled" &&
	cat >claim2.json <<-EOF &&
	{"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
	 "metadata": {"name": "adopter"}, "spec": {"sandboxTemplateRef": {"name": "tmpl"}}}
	EOF
	"${K[@]}" create --validate=false -f claim2.json >/dev/null &&
	wait_until 20 jp_is sandboxclaim adopter "{.status.sandbox.name}" "$pooled" &&
	jp_is sandbox "$pooled" "{.metadata.annotations.agents\.x-k8s\.io/pod-name}" "$pooled" &&
	jp_is sandbox "$pooled" "{.metadata.ownerReferences[0].name}" adopter &&
	"${K[@]}" exec "$pooled" -- echo adopted >adopted.out && test_eq adopted "$(cat adopted.out)" &&
	wait_until 30 jp_is sandboxwarmpool warm "{.status.readyReplicas}" 1 &&
	test "$("${K[@]}" get sandboxes -l agents.x-k8s.io/warm-pool-sandbox=warm -o jsonpath="{.items[0].metadata.name}")" != "$pooled" &&
	"${K[@]}" delete sandboxclaim adopter >/dev/null && wait_until 20 gone "$pooled" &&
	"${K[@]}" delete sandboxwarmpool warm >/dev/null
'

test_expect_success 'exec faults kubectl meets: the fake'"'"'s ping is answered (a pong recorded); an image that cannot be pulled shows its reason' '
	fault "{\"match\": \"GET /pods/sbx-1/exec\$\", \"kind\": \"ws_ping\", \"payload\": \"kubectl-ping\"}" &&
	"${K[@]}" exec sbx-1 -- sleep 1 &&
	"${CURL[@]}" "$(url /_fake/state)" >pong.json &&
	jassert pong.json "assert \"kubectl-ping\" in r[\"pongs\"], r" &&
	control image-fail "{\"image\": \"nope/never:1\", \"reason\": \"ErrImagePull\", \"message\": \"not found\"}" &&
	new_pod nopull "{\"containers\": [{\"name\": \"sandbox\", \"image\": \"nope/never:1\", \"command\": [\"sleep\", \"1\"]}]}" &&
	wait_until 20 jp_is pod nopull "{.status.containerStatuses[0].state.waiting.reason}" ErrImagePull &&
	"${K[@]}" get pod nopull >nopull.out && test_grep -E "^nopull +0/1 +ErrImagePull " nopull.out &&
	"${K[@]}" delete pod nopull >/dev/null
'

test_expect_success 'a Sandbox past its shutdownTime loses its pod and says SandboxExpired' '
	cat >exp.json <<-EOF &&
	{"apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox", "metadata": {"name": "exp"},
	 "spec": {"podTemplate": {"spec": {"containers": [{"name": "sandbox", "image": "busybox",
	                                                   "command": ["sleep", "infinity"]}]}}}}
	EOF
	"${K[@]}" create --validate=false -f exp.json >/dev/null &&
	wait_until 30 is_phase exp Running &&
	"${K[@]}" patch sandbox exp --type=merge -p "{\"spec\": {\"shutdownTime\": \"2020-01-01T00:00:00Z\"}}" >/dev/null &&
	wait_until 20 gone exp &&
	wait_until 10 jp_is sandbox exp "{.status.conditions[0].reason}" SandboxExpired &&
	"${K[@]}" delete sandbox exp >/dev/null
'

# --- the JavaScript client ----------------------------------------------------------------------
TEST_TIMEOUT=300
test_expect_success 'npm ci installs the pinned @kubernetes/client-node' '
	mkdir sdk &&
	cp "$SDK_SRC/package.json" "$SDK_SRC/package-lock.json" "$SDK_SRC/check.mjs" sdk/ &&
	(cd sdk && timeout 280 npm ci --no-audit --no-fund --loglevel=error) &&
	jassert sdk/node_modules/@kubernetes/client-node/package.json \
		"assert r[\"version\"] == \"1.4.0\", r[\"version\"]"
'
TEST_TIMEOUT=120
test_expect_success '@kubernetes/client-node drives the fake (check.mjs)' '
	timeout 100 node sdk/check.mjs agents >js.out 2>&1
	rc=$?
	cat js.out
	test_eq 0 "$rc" && test_grep ! "^not ok" js.out && test_grep -E "^# [0-9]+ checks passed" js.out
'
TEST_TIMEOUT=60

# --- the end ------------------------------------------------------------------------------------
test_expect_success 'kubectl delete: the pod and its sandbox go' '
	"${K[@]}" delete pod sbx-1 >del.out &&
	test_grep "pod \"sbx-1\" deleted" del.out &&
	expect_code 1 "${K[@]}" get pod sbx-1 2>/dev/null &&
	wait_until 20 no_fake_ids &&
	"${CURL[@]}" "$(url /_fake/state)" >end.json &&
	jassert end.json "assert r[\"pods\"] == {} and r[\"backing\"] == [], r"
'

test_expect_success 'SIGTERM: the fake removes every sandbox it made, and its volumes' '
	new_pod last &&
	wait_until 30 is_phase last Running &&
	test -n "$(fake_ids)" &&
	stop_fake "$FAKE_PID" &&
	no_fake_ids &&
	test ! -e "$TRASH/fake-home.k8s-volumes"
'

test_done
