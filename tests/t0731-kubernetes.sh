#!/bin/bash
# The kubernetes provider against the loopback apiserver fake (tests/fakes/k8s.py, its pods
# real local sandboxes), over TLS with a CA made here and a bearer token in a kubeconfig: every
# verb in Sandbox mode (agents.x-k8s.io served), in pod mode (not served) and with a
# SandboxClaim (with and without a warm pool; what a template takes); the exit statuses and
# streams of exec, --timeout's end of every process, pings, resizes; cp both ways; release and
# resume; previews (confined to the pod's proxy, redirects, cookies, streamed bodies); ls in
# every context and namespace; credentials (client certificates, tokenFile, plugins by name,
# interactiveMode, a refused plugin token asked again, contexts, KUBECONFIG lists); and what the
# cluster's failures look like (401, 403, 429, 500, a WebSocket cut, a Status without an exit
# code, a pod that never schedules, an image that cannot be pulled or has no tar, an expired
# plugin token, a wrong CA); and the shared verb checks in both modes.
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which call the helpers; verbs.sh reads VERBS_*
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"

test_skip_unless USERNS curl openssl base64

TOKEN=k8s-test-token
# a CA, and the fake's certificate for 127.0.0.1 signed by it; another CA nobody signed with
make_certs() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
		-subj /CN=sbx-test-ca &&
		openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr \
			-subj /CN=127.0.0.1 &&
		printf 'subjectAltName=IP:127.0.0.1\n' >srv.ext &&
		openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt \
			-days 2 -extfile srv.ext &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 \
			-subj /CN=other-ca &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout client-ca.key -out client-ca.crt \
			-days 2 -subj /CN=sbx-test-client-ca &&
		openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=cert-user &&
		printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
		openssl x509 -req -in client.csr -CA client-ca.crt -CAkey client-ca.key -CAcreateserial \
			-out client.crt -days 2 -extfile client.ext &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.crt -days 2 \
			-subj /CN=rogue
} >/dev/null 2>&1

# kubeconfig FILE URL [USER-YAML]: a context 'fake' on the cluster at URL (the user a token)
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
current-context: fake
clusters:
- name: fake
  cluster:
    server: $2
    certificate-authority-data: $(base64 -w0 "$TRASH/ca.crt")
contexts:
- name: fake
  context:
    cluster: fake
    user: tester
users:
- name: tester
  user:
${3:-    token: $TOKEN}
EOF
}

if [ -z "$TEST_SKIP_ALL" ]; then
	make_certs || TEST_SKIP_ALL="openssl cannot make the test CA"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	start_fake k8s --tls-cert srv.crt --tls-key srv.key --token "$TOKEN" \
		--tls-client-ca client-ca.crt || TEST_SKIP_ALL="the Kubernetes fake did not start"
	K8S=${FAKE_URL/http:/https:}
	start_fake k8s --tls-cert srv.crt --tls-key srv.key --token "$TOKEN" --no-agent-sandbox ||
		TEST_SKIP_ALL="the Kubernetes fake did not start"
	PODS=${FAKE_URL/http:/https:}
	kubeconfig "$TRASH/kc" "$K8S"
	kubeconfig "$TRASH/kc-pods" "$PODS"
fi
export KUBECONFIG=$TRASH/kc
unset SBX_KUBE_CONTEXT SBX_KUBE_NAMESPACE SBX_KUBE_MODE SBX_KUBE_START_TIMEOUT SBX_REMOTE_TIMEOUT

# the fakes' control routes and API, over TLS with the test CA
ctl() { curl -fsS --cacert "$TRASH/ca.crt" "$@"; }
api() { curl -fsS --cacert "$TRASH/ca.crt" -H "Authorization: Bearer $TOKEN" "$@"; }
fault() { ctl -X POST --data "$1" "${2:-$K8S}/_fake/faults" >/dev/null; }
unfault() { ctl -X DELETE "${1:-$K8S}/_fake/faults" >/dev/null; }
state() { ctl "${1:-$K8S}/_fake/state"; }
pod_of() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["extra"]["pod"])'; }

test_expect_success 'provider ls: configured from the kubeconfig (control: not without one)' '
	sbx provider ls --json >p.json &&
	json_assert p.json "k = [p for p in r if p[\"name\"] == \"kubernetes\"][0]
assert k[\"configured\"] and k[\"remote\"] and k[\"api_url\"] == \"$K8S\", k
assert \"runtimes\" in k and k[\"runtimes\"] == [\"*\"]" &&
	KUBECONFIG=$TRASH/nope sbx provider ls --json >p2.json &&
	json_assert p2.json "k = [p for p in r if p[\"name\"] == \"kubernetes\"][0]
assert not k[\"configured\"] and \"kubeconfig\" in k[\"not_ready\"], k"
'

test_expect_success 'create: a Sandbox whose pod has the labels, limits, env and workdir' '
	sbx create --provider kubernetes --image busybox --name box -e FOO=bar -w /tmp \
		--cpus 0.5 --memory 256m --runtime gvisor --label team=blue \
		--add-host db.internal:10.1.2.3 >id &&
	test_grep -E "^[0-9a-f]{12}$" id &&
	sbx inspect box >rec.json &&
	json_assert rec.json "assert r[\"state\"] == \"running\" and r[\"extra\"][\"mode\"] == \"sandbox\"
assert r[\"extra\"][\"namespace\"] == \"default\" and r[\"extra\"][\"context\"] == \"fake\"" &&
	api "$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of box)" >sb.json &&
	json_assert sb.json "p = r[\"spec\"][\"podTemplate\"]; s = p[\"spec\"]; c = s[\"containers\"][0]
l = p[\"metadata\"][\"labels\"]
assert l[\"app.kubernetes.io/managed-by\"] == \"sbx\" and l[\"sbx.name\"] == \"box\" and l[\"team\"] == \"blue\", l
assert s[\"automountServiceAccountToken\"] is False and s[\"enableServiceLinks\"] is False
assert s[\"runtimeClassName\"] == \"gvisor\"
assert s[\"hostAliases\"] == [{\"ip\": \"10.1.2.3\", \"hostnames\": [\"db.internal\"]}], s
assert c[\"image\"] == \"busybox\" and c[\"workingDir\"] == \"/tmp\"
assert {\"name\": \"FOO\", \"value\": \"bar\"} in c[\"env\"]
assert c[\"resources\"][\"limits\"] == {\"cpu\": \"500m\", \"memory\": 268435456}, c" &&
	sbx ls >ls.out && test_grep -E "^[0-9a-f]{12} +box +kubernetes +running" ls.out &&
	"$TEST_PYTHON" -c "import sys
h, row = open(\"ls.out\").read().splitlines()[:2]
assert h.index(\"STATE\") == row.index(\"running\") and h.index(\"CREATED\") > row.index(\"running\") + 7, (h, row)"
'

test_expect_success 'create without --image is refused, 125, before anything is made' '
	expect_code 125 sbx create --provider kubernetes --name noimg 2>err &&
	test_grep "needs --image" err &&
	state >st.json && json_assert st.json "assert len(r[\"sandboxes\"]) == 1, r"
'

test_expect_success 'exec: exit statuses, stdout and stderr apart, a missing command, a signal' '
	sbx exec box -- echo hi >out && test_eq hi "$(cat out)" &&
	expect_code 3 sbx exec box -- sh -c "echo out; echo err >&2; exit 3" >o 2>e &&
	test_eq out "$(cat o)" && test_eq err "$(cat e)" &&
	expect_code 127 sbx exec box -- no-such-command 2>e && test_grep "not found" e &&
	expect_code 137 sbx exec box -- sh -c "kill -9 \$\$" &&
	expect_code 0 sbx exec box -- true
'

test_expect_success 'exec over v4.channel.k8s.io: statuses, streams apart, cp out (in: refused)' '
	export SBX_KUBE_EXEC_PROTOCOL=v4 &&
	expect_code 3 sbx exec box -- sh -c "echo out; echo err >&2; exit 3" >o 2>e &&
	test_eq out "$(cat o)" && test_eq err "$(cat e)" &&
	sbx --debug exec box -- true 2>dbg && test_grep "over v4.channel.k8s.io" dbg &&
	sbx cp box:/etc/hostname h && test -s h &&
	expect_code 125 sbx cp h box:/tmp/ 2>e && test_grep "needs v5" e
'

test_expect_success 'exec -i: stdin to its end (v5 closes it), 1 MiB through and back' '
	printf "l1\nl2\n" | sbx exec -i box -- wc -l >n && test_eq 2 "$(tr -d " " <n)" &&
	head -c 1048576 /dev/urandom >blob &&
	sbx exec -i box -- cat <blob >back && cmp blob back &&
	sbx exec box -- cat </dev/null >none && test_eq "" "$(cat none)"
'

test_expect_success 'exec -e, -w, the sandbox env; --debug does not show -e'"'"'s values (they travel in the exec URL)' '
	sbx exec -e A=1 -w / box -- sh -c "echo \$A \$FOO; pwd" >o &&
	test_eq "1 bar
/" "$(cat o)" &&
	sbx exec box -- pwd >o2 && test_eq /tmp "$(cat o2)" &&
	sbx --debug exec -e SECRET_X=hunter2-value box -- sh -c "echo \$SECRET_X" >o 2>dbg &&
	test_eq hunter2-value "$(cat o)" &&
	test_grep "WebSocket upgrade" dbg && test_grep "SECRET_X%3D%3Credacted%3E" dbg &&
	test_grep ! hunter2 dbg &&
	SBX_WS_CURL=0 sbx --debug exec -e SECRET_X=hunter2-value box -- true 2>dbg && test_grep ! hunter2 dbg
'

# pod_ps SB: the command lines of the processes in SB's pod
pod_ps() {
	sbx exec "$1" -- sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f"; echo; done'
}
# pod_kill SB 'ARGS': ends the processes of SB's pod whose command line is ARGS, by pid
pod_kill() {
	sbx exec "$1" -- sh -c 'for f in /proc/[0-9]*/cmdline; do
		[ "$(tr "\0" " " <"$f")" = "$1 " ] && { p=${f#/proc/}; kill "${p%/cmdline}"; }
	done; :' sh "$2"
}
has_proc() { pod_ps "$1" | grep -q "^$2 "; }

test_expect_success 'the fake lets a command its client left run on, as a kubelet does (so the --timeout checks mean something)' '
	{ "$SBX" exec box -- sh -c "sleep 29; :" & } && pid=$! &&
	wait_until 10 has_proc box "sleep 29" &&
	kill -KILL $pid && { wait $pid; true; } && sleep 1 &&
	has_proc box "sleep 29" &&
	pod_kill box "sleep 29" && wait_until 10 eval "! has_proc box \"sleep 29\""
'

test_expect_success '--timeout ends the command and every process it started (124; control: in time, its own status)' '
	expect_code 124 sbx exec --timeout 1s box -- sh -c "sleep 30; :" &&
	expect_code 124 sbx exec --timeout 1s box -- sh -c "(sleep 28; :) & sleep 27; :" &&
	expect_code 124 sbx exec --timeout 1s box -- sh -c "trap \"\" TERM; sleep 26; :" &&
	pod_ps box >ps && test_grep ! -E "^sleep 2[678]|^sleep 30" ps &&
	expect_code 0 sbx exec --timeout 20s box -- sleep 0.1 &&
	expect_code 3 sbx exec --timeout 20s box -- sh -c "exit 3" &&
	pod_ps box >ps && test_grep ! -E "^sleep 20" ps
'

test_expect_success '--timeout not reached: nothing of its watchdog stays (30 commands that end at once)' '
	for i in $(seq 30); do expect_code 0 sbx exec --timeout 21s box -- true || return 1; done &&
	sleep 0.5 && pod_ps box >ps && test_grep ! -E "^sleep 21" ps
'

test_expect_success '--timeout: 124 even when something the command left holds its streams open' '
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"exec_hold\", \"times\": 1}" &&
	expect_code 124 sbx exec --timeout 1s box -- sh -c "sleep 30; :" 2>e &&
	test_grep "streams stayed open past --timeout" e
'

test_expect_success 'exec -t: a terminal inside, its size sent (channel 4)' '
	SHELL=/bin/sh script -qec "stty cols 101 rows 31; $SBX exec -t box -- sh -c \"sleep 0.5; test -t 0 && stty size\"" \
		/dev/null </dev/null | tr -d "\r" >tty.out &&
	test_eq "31 101" "$(cat tty.out)"
'

test_expect_success 'exec -d: runs on after exec returns' '
	sbx exec -d box -- sh -c "sleep 1; echo done >/tmp/bg" >jid &&
	test_grep -E "^[0-9]+$" jid &&
	wait_until 10 sbx exec box -- test -s /tmp/bg
'

test_expect_success 'cp: in and out, a tree and a 300 kB file, identical; a stream; missing paths' '
	mkdir -p src/sub && echo hello >src/a.txt && head -c 300000 /dev/urandom >src/sub/big &&
	sbx cp src box:/tmp/ && sbx exec box -- cat /tmp/src/a.txt >a && test_eq hello "$(cat a)" &&
	sbx cp box:/tmp/src tree && cmp src/sub/big tree/sub/big && cmp src/a.txt tree/a.txt &&
	sbx cp box:/tmp/src/a.txt one.txt && cmp src/a.txt one.txt &&
	sbx cp box:/tmp/src - >t.tar && tar -tf t.tar >list && test_grep "src/sub/big" list &&
	expect_code 125 sbx cp box:/tmp/nope x 2>e && test_grep "does not exist" e &&
	expect_code 125 sbx cp src box:/nope/dir/ 2>e && test_grep "does not exist" e
'

test_expect_success 'preview: a local URL with sbx'"'"'s token reaches the pod'"'"'s port (control: no token, 401); idle clients hold up no other' '
	sbx exec box -- sh -c "mkdir -p /tmp/www && echo hello-preview >/tmp/www/index.html" &&
	sbx exec -d box -- python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www >/dev/null &&
	sbx preview box 8000 >url && url=$(cat url) &&
	test_match "^http://127\.0\.0\.1:[0-9]+/\?sbx_token=[0-9a-f]{32}$" "$url" &&
	wait_until 10 curl -fsS -c jar -b jar -L "$url" -o page &&
	test_eq hello-preview "$(cat page)" &&
	test_eq 401 "$(curl -s -o /dev/null -w "%{http_code}" "${url%%\?*}")" || exit 1
	port=${url#http://127.0.0.1:} && port=${port%%/*}
	"$TEST_PYTHON" -c "import socket, sys, time
s = [socket.create_connection((\"127.0.0.1\", int(sys.argv[1]))) for i in range(3)]
time.sleep(5)" "$port" &
	idle=$!
	sleep 0.5
	curl -fsS -c jar -b jar "${url%%\?*}" -o page2 && test_eq hello-preview "$(cat page2)" &&
	wait $idle &&
	sbx preview box >list && test_grep -E "^8000 " list &&
	sbx preview --rm box 8000 && sbx preview box --json >l.json &&
	json_assert l.json "assert r == [], r" &&
	expect_code 7 curl -s -o /dev/null "$url"
'

# an app for the previews: a redirect, a session cookie, an upload echoed, a large body
cat >"$TRASH/app.py" <<'EOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_GET(self):
        if self.path == "/go":
            return self.reply(302, b"moved\n", [("Location", "/landing?from=go")])
        if self.path == "/landing?from=go":
            return self.reply(200, b"landed\n")
        if self.path == "/login":
            return self.reply(200, b"in\n", [("Set-Cookie", "sess=s3cr3t; Path=/"),
                                             ("Set-Cookie", "theme=dark; Path=/")])
        if self.path == "/whoami":
            return self.reply(200, ("cookie=%s auth=%s\n" % (self.headers.get("Cookie"),
                                    self.headers.get("Authorization"))).encode())
        if self.path == "/big":
            return self.reply(200, bytes(range(256)) * (20 * 4096))
        return self.reply(200, b"app:%s\n" % self.path.encode())
    def do_HEAD(self):
        self.do_GET()
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            b = self.rfile.read(n - len(data))
            if not b:
                break
            data += b
        self.reply(200, data)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF

# preview_of SB PORT: SB's preview of PORT: its URL in $url, its root $base, its token $tok
preview_of() {
	sbx preview "$1" "$2" >url && url=$(cat url) && base=${url%%\?*} && tok=${url##*sbx_token=}
}
# preview_open SB PORT: the app on PORT in SB, and its preview (preview_of)
preview_open() {
	sbx cp "$TRASH/app.py" "$1:/tmp/app.py" &&
		sbx exec -d "$1" -- python3 /tmp/app.py "$2" >/dev/null && preview_of "$1" "$2" &&
		wait_until 15 curl -fsS -H "X-Sbx-Preview-Token: $tok" "${base}ping"
}

test_expect_success 'preview: no way above the pod'"'"'s proxy ("..", raw or encoded, any method): 400, nothing asked of the cluster (control: paths under it served)' '
	preview_open box 8100 &&
	ctl -X DELETE "$K8S/_fake/requests" >/dev/null &&
	for p in /../../../../../../../api/v1/namespaces/default/pods \
		/x/../../../../../../../../api/v1/namespaces/default/pods \
		/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/v1/namespaces/default/pods \
		/%2E%2e/%2e%2E/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/v1/namespaces/default/pods \
		/.%2e/.%2e/.%2e/.%2e/.%2e/.%2e/.%2e/api/v1/namespaces/default/pods \
		/a%2f..%2f..%2f..%2f..%2f..%2f..%2f..%2fapi/v1/namespaces/default/pods \
		/./api; do
		for m in GET DELETE; do
			code=$(curl -s --path-as-is -X "$m" -H "X-Sbx-Preview-Token: $tok" -o body \
				-w "%{http_code}" "${base%/}$p") &&
				test_eq 400 "$code" && test_grep ! -i podlist body &&
				test_grep "segment" body || return 1
		done
	done &&
	ctl "$K8S/_fake/requests" >reqs.json &&
	json_assert reqs.json "bad = [q for q in r if \"/proxy\" not in q[\"path\"]]
assert not bad, bad" &&
	test_eq 1 "$(sbx ls -q | wc -l)" &&
	curl -fsS --path-as-is -H "X-Sbx-Preview-Token: $tok" "${base}a/b..c/x.y" >ok &&
	test_eq "app:/a/b..c/x.y" "$(cat ok)" &&
	curl -sS -X DELETE -H "X-Sbx-Preview-Token: $tok" "${base}thing" -o /dev/null \
		-w "%{http_code}" >code &&
	test_eq 501 "$(cat code)"
'

test_expect_success 'preview: redirects come back as the preview'"'"'s own; sessions work (the app'"'"'s cookies both ways; sbx'"'"'s token and the cluster'"'"'s credentials never reach the app)' '
	preview_of box 8100 &&
	curl -sS -H "X-Sbx-Preview-Token: $tok" -D h -o /dev/null "${base}go" &&
	test_grep -i "^location: /landing?from=go" h &&
	curl -fsS -c jar -b jar -L "$url" -o /dev/null &&
	curl -fsS -c jar -b jar -L "${base}go" >landed && test_eq landed "$(cat landed)" &&
	curl -fsS -c jar -b jar "${base}login" -D lh >/dev/null &&
	test_eq 2 "$(grep -ci "^set-cookie: " lh)" &&
	curl -fsS -c jar -b jar "${base}whoami" >who &&
	test_grep "sess=s3cr3t" who && test_grep "theme=dark" who &&
	test_grep ! "sbx_preview_token" who && test_grep "auth=None" who &&
	test_grep ! "$TOKEN" who
'

test_expect_success 'preview: bodies are streamed both ways (20 MiB down, 9 MiB up, byte-exact); HEAD' '
	preview_of box 8100 &&
	"$TEST_PYTHON" -c "import sys; sys.stdout.buffer.write(bytes(range(256)) * (20 * 4096))" >big.want &&
	curl -fsS -H "X-Sbx-Preview-Token: $tok" "${base}big" -o big.got &&
	cmp big.want big.got &&
	head -c 9437184 /dev/urandom >up &&
	curl -fsS -H "X-Sbx-Preview-Token: $tok" -H "Content-Type: application/octet-stream" \
		--data-binary @up "${base}echo" -o up.back &&
	cmp up up.back &&
	curl -fsS -I -H "X-Sbx-Preview-Token: $tok" "${base}x" >head.out &&
	test_grep "^HTTP/1.1 200 " head.out &&
	sbx preview --rm box 8100
'

test_expect_success 'pause: no memory pause (125, with the reason); release needs --disk' '
	expect_code 125 sbx pause box 2>e && test_grep "no memory pause" e &&
	expect_code 125 sbx pause --release box 2>e && test_grep -- "--disk" e &&
	test_eq running "$(sb_state box)"
'

test_expect_success 'pause --release scales the Sandbox to 0; resume brings its workdir back' '
	sbx create --provider kubernetes --image busybox --name rel --disk 1G >/dev/null &&
	sbx exec rel -- sh -c "echo kept >f; pwd" >wd && test_eq /workspace "$(cat wd)" &&
	sbx pause --release rel && test_eq released "$(sb_state rel)" &&
	sbx ls >ls.out && test_grep -E " rel +kubernetes +released" ls.out &&
	api "$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of rel)" >sb.json &&
	json_assert sb.json "assert r[\"spec\"][\"replicas\"] == 0" &&
	expect_code 125 sbx exec rel -- true 2>e && test_grep "resume" e &&
	sbx resume rel && sbx exec rel -- cat f >f && test_eq kept "$(cat f)" &&
	sbx rm -f rel
'

test_expect_success '--ttl is the Sandbox'"'"'s shutdownTime, which keepalive moves' '
	sbx create --provider kubernetes --image busybox --name ttl --ttl 1h >/dev/null &&
	api "$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of ttl)" >sb.json &&
	json_assert sb.json "import datetime
t = datetime.datetime.strptime(r[\"spec\"][\"shutdownTime\"], \"%Y-%m-%dT%H:%M:%SZ\")
d = (t - datetime.datetime.utcnow()).total_seconds()
assert 3000 < d <= 3601, d
assert r[\"spec\"][\"shutdownPolicy\"] == \"Retain\"" &&
	api -X PATCH -H "Content-Type: application/merge-patch+json" --data "{\"spec\": {\"shutdownTime\": \"2099-01-01T00:00:00Z\"}}" \
		"$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of ttl)" >/dev/null &&
	sbx keepalive ttl &&
	api "$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of ttl)" >sb.json &&
	json_assert sb.json "assert not r[\"spec\"][\"shutdownTime\"].startswith(\"2099\"), r" &&
	sbx rm -f ttl
'

test_expect_success '--image template:NAME makes a SandboxClaim; a missing template fails at once' '
	api -X POST -H "Content-Type: application/json" \
		"$K8S/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/sandboxtemplates" \
		--data "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\",\"kind\":\"SandboxTemplate\",\"metadata\":{\"name\":\"tpl\"},\"spec\":{\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"sandbox\",\"image\":\"busybox\",\"command\":[\"sleep\",\"100000\"]}]}}}}" >/dev/null &&
	sbx create --provider kubernetes --image template:tpl --name claimed >/dev/null &&
	sbx exec claimed -- echo claimed >o && test_eq claimed "$(cat o)" &&
	sbx inspect claimed >rec.json &&
	json_assert rec.json "assert r[\"extra\"][\"mode\"] == \"claim\" and r[\"state\"] == \"running\"" &&
	sbx rm -f claimed &&
	expect_code 125 sbx create --provider kubernetes --image template:missing 2>e &&
	test_grep "TemplateNotFound" e && test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'pod mode (no agents.x-k8s.io): a pod, its PVC kept by release, a preview; --ttl refused' '
	export KUBECONFIG=$TRASH/kc-pods &&
	sbx create --provider kubernetes --image busybox --name pod --disk 1G -w /work >/dev/null &&
	sbx inspect pod >rec.json && json_assert rec.json "assert r[\"extra\"][\"mode\"] == \"pod\"" &&
	api "$PODS/api/v1/namespaces/default/pods/$(pod_of pod)" >pod.json &&
	json_assert pod.json "s = r[\"spec\"]
assert s[\"automountServiceAccountToken\"] is False and s[\"enableServiceLinks\"] is False
assert s[\"volumes\"][0][\"persistentVolumeClaim\"][\"claimName\"] == r[\"metadata\"][\"name\"]" &&
	sbx exec pod -- sh -c "echo kept >f" &&
	sbx pause --release pod && test_eq released "$(sb_state pod)" &&
	state "$PODS" >st.json && json_assert st.json "assert not r[\"pods\"] and len(r[\"pvcs\"]) == 1, r" &&
	sbx resume pod && sbx exec pod -- cat /work/f >f && test_eq kept "$(cat f)" &&
	preview_open pod 8200 && curl -fsS -H "X-Sbx-Preview-Token: $tok" "${base}in-pod-mode" >pg &&
	test_eq "app:/in-pod-mode" "$(cat pg)" && sbx preview --rm pod 8200 &&
	expect_code 125 sbx create --provider kubernetes --image busybox --ttl 1h 2>e &&
	test_grep "shutdownTime" e &&
	n0=$(sbx ls -q | wc -l) &&
	SBX_KUBE_MODE=sandbox expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "SBX_KUBE_MODE is sandbox, but the cluster does not serve the agents.x-k8s.io API" &&
	test_eq "$n0" "$(sbx ls -q | wc -l)" &&
	sbx rm -f pod && state "$PODS" >st.json &&
	json_assert st.json "assert not r[\"pods\"] and not r[\"pvcs\"], r"
'

test_expect_success 'SBX_KUBE_NAMESPACE puts the sandbox there; later calls follow the record' '
	SBX_KUBE_NAMESPACE=kube-public sbx create --provider kubernetes --image busybox --name ns >/dev/null &&
	sbx inspect ns >rec.json && json_assert rec.json "assert r[\"extra\"][\"namespace\"] == \"kube-public\"" &&
	sbx exec ns -- true && sbx rm -f ns &&
	state >st.json && json_assert st.json "assert not [s for s in r[\"sandboxes\"] if s.startswith(\"kube-public/\")], r"
'

test_expect_success 'rm; a Sandbox removed out of band shows as missing' '
	sbx create --provider kubernetes --image busybox --name gone >/dev/null &&
	api -X DELETE "$K8S/apis/agents.x-k8s.io/v1alpha1/namespaces/default/sandboxes/$(pod_of gone)" >/dev/null &&
	wait_state gone missing 10 &&
	expect_code 125 sbx exec gone -- true 2>e && expect_one_error_line e "HTTP 404" &&
	sbx rm gone && expect_code 125 sbx inspect gone
'

test_expect_success 'an evicted pod: error, with the kubelet'"'"'s reason, in inspect and ls' '
	sbx create --provider kubernetes --image busybox --name ev >/dev/null &&
	ctl -X POST --data "{\"namespace\": \"default\", \"name\": \"$(pod_of ev)\", \"phase\": \"Failed\", \"reason\": \"Evicted\", \"message\": \"low on memory\"}" \
		"$K8S/_fake/k8s/pod-phase" >/dev/null &&
	sbx inspect ev >rec.json &&
	json_assert rec.json "assert r[\"state\"] == \"error\" and \"low on memory\" in r[\"state_reason\"], r" &&
	sbx ls >ls.out && test_grep -E " ev +kubernetes +error" ls.out &&
	sbx rm -f ev
'

test_expect_success 'a refused token: one line, 125 (control: the right one works)' '
	kubeconfig kc-bad "$K8S" "    token: wrong" &&
	KUBECONFIG=$TRASH/kc-bad expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "refused the credentials \\(HTTP 401" &&
	KUBECONFIG=$TRASH/kc-bad expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "HTTP 401" &&
	sbx exec box -- true
'

test_expect_success '429 with Retry-After is waited for; a 500 at create leaves nothing' '
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"status\", \"status\": 429, \"times\": 2, \"headers\": {\"Retry-After\": \"1\"}}" &&
	sbx exec box -- echo after >o && test_eq after "$(cat o)" &&
	fault "{\"match\": \"POST /apis/agents.x-k8s.io/.*\", \"kind\": \"status\", \"status\": 500}" &&
	expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "HTTP 500" && unfault &&
	fault "{\"match\": \"POST /apis/agents.x-k8s.io/.*\", \"kind\": \"status\", \"status\": 409, \"times\": 1}" &&
	expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "HTTP 409" &&
	test_eq 1 "$(sbx ls -q | wc -l)"
'

test_expect_success 'a WebSocket cut mid-stream and a Status without an exit code: 125' '
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"ws_close\", \"times\": 1}" &&
	expect_code 125 sbx exec box -- sh -c "echo a; sleep 0.3; echo b" 2>e &&
	test_grep "mid-stream\|before the command" e &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"no_exit_code\", \"times\": 1}" &&
	expect_code 125 sbx exec box -- sh -c "exit 3" 2>e && test_grep "without an exit status" e &&
	expect_code 3 sbx exec box -- sh -c "exit 3"
'

test_expect_success 'a pod that never schedules: create fails with the scheduler'"'"'s word' '
	ctl -X POST --data "{\"schedulable\": false}" "$K8S/_fake/k8s/schedulable" >/dev/null &&
	SBX_KUBE_START_TIMEOUT=2 expect_code 125 sbx create --provider kubernetes --image busybox 2>e;
	rc=$?; ctl -X POST --data "{\"schedulable\": true}" "$K8S/_fake/k8s/schedulable" >/dev/null &&
	test $rc = 0 && expect_one_error_line e "did not start in 2 s: not scheduled: .*unschedulable" &&
	test_eq 1 "$(sbx ls -q | wc -l)" &&
	state >st.json && json_assert st.json "assert len(r[\"sandboxes\"]) == 1, r"
'

test_expect_success 'create watches its pod until it runs; refused the watch, it polls' '
	ctl -X DELETE "$K8S/_fake/requests" >/dev/null &&
	sbx create --provider kubernetes --image busybox --name watched >id &&
	ctl "$K8S/_fake/requests" >rq.json &&
	json_assert rq.json "w = [q for q in r if q[\"method\"] == \"GET\" and
     q[\"path\"] == \"/api/v1/namespaces/default/pods\" and \"watch=true\" in q[\"query\"]]
assert w and \"fieldSelector=metadata.name%3Dsbx-$(cat id)\" in w[0][\"query\"], r" &&
	sbx rm -f watched &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods\$\", \"kind\": \"status\", \"status\": 403, \"times\": 0}" &&
	sbx --debug create --provider kubernetes --image busybox --name polled >/dev/null 2>dbg;
	rc=$?; unfault && test $rc = 0 && test_grep "no watch of pod .*HTTP 403" dbg &&
	sbx inspect polled >rec.json && json_assert rec.json "assert r[\"state\"] == \"running\"" &&
	sbx rm -f polled
'

test_expect_success 'an exec credential plugin by its path (control); an expired token refused' '
	printf "#!/bin/sh\necho \"{\\\\\"kind\\\\\":\\\\\"ExecCredential\\\\\",\\\\\"status\\\\\":{\\\\\"token\\\\\":\\\\\"\$T\\\\\",\\\\\"expirationTimestamp\\\\\":\\\\\"\$EXP\\\\\"}}\"\n" >plugin &&
	chmod +x plugin && T=$TOKEN EXP=2099-01-01T00:00:00Z ./plugin | "$TEST_PYTHON" -m json.tool >/dev/null &&
	kubeconfig kc-exec "$K8S" "    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: $TRASH/plugin
      env:
      - name: T
        value: $TOKEN
      - name: EXP
        value: 2099-01-01T00:00:00Z" &&
	KUBECONFIG=$TRASH/kc-exec sbx exec box -- echo plugin >o && test_eq plugin "$(cat o)" &&
	sed "s/2099-01-01/2001-01-01/" kc-exec >kc-exp &&
	KUBECONFIG=$TRASH/kc-exp expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "expired at 2001-01-01" &&
	sed "s|command: .*|command: plugin|" kc-exec >kc-name &&
	KUBECONFIG=$TRASH/kc-name expect_code 125 sbx exec box -- true 2>e &&
	test_grep "PATH" e
'

test_expect_success 'a kubeconfig with the wrong CA: a TLS failure naming it, 125' '
	sed "s|certificate-authority-data: .*|certificate-authority-data: $(base64 -w0 other.crt)|" kc >kc-ca &&
	KUBECONFIG=$TRASH/kc-ca expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "TLS failure .*certificate-authority of cluster .fake." &&
	sbx exec box -- true
'

# --- SandboxClaims: warm pools, what a template takes, release -------------------------------------
# tmpl NAME [SPEC-JSON]: a SandboxTemplate of a sleeping container, its spec updated with SPEC
tmpl() {
	"$TEST_PYTHON" -c 'import json, sys
spec = {"podTemplate": {"spec": {"containers": [{"name": "sandbox", "image": "busybox",
                                                 "command": ["sleep", "100000"]}]}}}
spec.update(json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
print(json.dumps({"apiVersion": "extensions.agents.x-k8s.io/v1alpha1",
                  "kind": "SandboxTemplate", "metadata": {"name": sys.argv[1]}, "spec": spec}))' \
		"$@" >"$TRASH/tmpl-$1.json" &&
		code=$(curl -sS --cacert "$TRASH/ca.crt" -H "Authorization: Bearer $TOKEN" -o /dev/null \
			-w "%{http_code}" -H "Content-Type: application/json" --data @"$TRASH/tmpl-$1.json" \
			"$K8S/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/sandboxtemplates") &&
		{ [ "$code" = 201 ] || [ "$code" = 409 ]; }
}
EXT=apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default
AGT=apis/agents.x-k8s.io/v1alpha1/namespaces/default
# apicode URL: the status of a GET with the token
apicode() { curl -sS --cacert "$TRASH/ca.crt" -H "Authorization: Bearer $TOKEN" -o /dev/null -w "%{http_code}" "$1"; }
# extra_of SB KEY, id_of SB: from sbx inspect
extra_of() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["extra"].get(sys.argv[1]) or "")' "$2"; }
id_of() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }
# pool_ready NAME N: the warm pool has N ready Sandboxes
pool_ready() {
	api "$K8S/$EXT/sandboxwarmpools/$1" | "$TEST_PYTHON" -c 'import json, sys
sys.exit(json.load(sys.stdin).get("status", {}).get("readyReplicas") != int(sys.argv[1]))' "$2"
}
# empty FILE: FILE is empty (else it is shown)
empty() { [ ! -s "$1" ] || { cat "$1" >&2; return 1; }; }
# reason_has SB TEXT: inspect's state_reason holds TEXT
reason_has() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json, sys; sys.exit(sys.argv[1] not in (json.load(sys.stdin).get("state_reason") or ""))' "$2"; }

test_expect_success 'a SandboxClaim: without a warm pool a Sandbox of its own; with one, the pool'"'"'s Sandbox adopted, its pod named on it, and every verb reaches that pod' '
	tmpl pooled &&
	sbx create --provider kubernetes --image template:pooled --name cold >/dev/null &&
	sbx inspect cold >c.json &&
	json_assert c.json "e = r[\"extra\"]
assert e[\"mode\"] == \"claim\" and e[\"sandbox\"] == e[\"pod\"] == \"sbx-\" + r[\"id\"], e" &&
	api -X POST -H "Content-Type: application/json" "$K8S/$EXT/sandboxwarmpools" \
		--data "{\"apiVersion\": \"extensions.agents.x-k8s.io/v1alpha1\", \"kind\": \"SandboxWarmPool\", \"metadata\": {\"name\": \"pool\"}, \"spec\": {\"replicas\": 1, \"sandboxTemplateRef\": {\"name\": \"pooled\"}}}" >/dev/null &&
	wait_until 30 pool_ready pool 1 &&
	sbx create --provider kubernetes --image template:pooled --name warm >/dev/null &&
	sbx inspect warm >w.json &&
	json_assert w.json "e = r[\"extra\"]
assert e[\"sandbox\"].startswith(\"pool-\") and e[\"pod\"] == e[\"sandbox\"], e
assert r[\"state\"] == \"running\", r" &&
	sb=$(extra_of warm sandbox) &&
	api "$K8S/$EXT/sandboxclaims/sbx-$(id_of warm)" >claim.json &&
	json_assert claim.json "assert r[\"status\"][\"sandbox\"][\"name\"] == \"$sb\", r" &&
	api "$K8S/$AGT/sandboxes/$sb" >sb.json &&
	json_assert sb.json "m = r[\"metadata\"]
assert m[\"annotations\"][\"agents.x-k8s.io/pod-name\"] == \"$sb\", m
assert m[\"ownerReferences\"][0][\"kind\"] == \"SandboxClaim\", m" &&
	sbx exec warm -- sh -c "echo in-warm >/tmp/w" && sbx cp warm:/tmp/w w.txt &&
	test_eq in-warm "$(cat w.txt)" &&
	sbx ls >ls.out && test_grep -E " warm +kubernetes +running" ls.out &&
	test_grep -E " cold +kubernetes +running" ls.out &&
	wait_until 30 pool_ready pool 1 &&
	sbx rm -f warm cold && test_eq 404 "$(apicode "$K8S/$AGT/sandboxes/$sb")" &&
	api -X DELETE "$K8S/$EXT/sandboxwarmpools/pool" >/dev/null
'

test_expect_success 'a claim'"'"'s pause --release keeps what is on its template'"'"'s volume, resume brings it back; without a volume release is refused (control: it runs on)' '
	tmpl vol "{\"volumeClaimTemplates\": [{\"metadata\": {\"name\": \"work\"}, \"spec\": {\"accessModes\": [\"ReadWriteOnce\"], \"resources\": {\"requests\": {\"storage\": \"1Gi\"}}}}], \"podTemplate\": {\"spec\": {\"containers\": [{\"name\": \"sandbox\", \"image\": \"busybox\", \"command\": [\"sleep\", \"100000\"], \"volumeMounts\": [{\"name\": \"work\", \"mountPath\": \"/data\"}]}]}}}" &&
	sbx create --provider kubernetes --image template:vol --name cv >/dev/null &&
	sbx exec cv -- sh -c "echo kept >/data/f" &&
	sbx pause --release cv && test_eq released "$(sb_state cv)" &&
	sbx ls >ls.out && test_grep -E " cv +kubernetes +released" ls.out &&
	expect_code 125 sbx exec cv -- true &&
	sbx resume cv && sbx exec cv -- cat /data/f >f && test_eq kept "$(cat f)" &&
	tmpl pooled && sbx create --provider kubernetes --image template:pooled --name cn >/dev/null &&
	expect_code 125 sbx pause --release cn 2>e &&
	expect_one_error_line e "no volumeClaimTemplates, so its files would go with its pod" &&
	test_eq running "$(sb_state cn)" && sbx exec cn -- true &&
	sbx rm -f cv cn
'

test_expect_success 'with --image template:NAME, each option a SandboxClaim cannot carry is refused in one line, 125, before anything is made' '
	tmpl pooled && n0=$(sbx ls -q | wc -l) && state >s0.json &&
	for o in "--cpus 1" "--memory 64m" "-w /work" "--runtime gvisor" "--disk 1G" \
		"--add-host db.internal:10.0.0.1"; do
		# shellcheck disable=SC2086 # the option and its value
		expect_code 125 sbx create --provider kubernetes --image template:pooled $o 2>e &&
			expect_one_error_line e "cannot take ${o%% *}.* with --image template:pooled: the SandboxTemplate decides it" ||
			return 1
	done &&
	test_eq "$n0" "$(sbx ls -q | wc -l)" && state >s1.json &&
	json_assert s1.json "import json; s0 = json.load(open(\"s0.json\"))
assert (r[\"claims\"], r[\"sandboxes\"]) == (s0[\"claims\"], s0[\"sandboxes\"]), (r, s0)"
'

test_expect_success 'with a template, -e is the claim'"'"'s env (refused before anything is made where the template disallows it), --ttl its lifecycle'"'"'s shutdownTime, which keepalive moves' '
	tmpl envok "{\"envVarsInjectionPolicy\": \"Allowed\"}" &&
	sbx create --provider kubernetes --image template:envok --name withenv -e GREETING=hi \
		--ttl 1h >/dev/null &&
	sbx exec withenv -- sh -c "echo \$GREETING" >g && test_eq hi "$(cat g)" &&
	claim="$K8S/$EXT/sandboxclaims/sbx-$(id_of withenv)" &&
	api "$claim" >cl.json &&
	json_assert cl.json "import datetime
s = r[\"spec\"]
assert {\"name\": \"GREETING\", \"value\": \"hi\"} in s[\"env\"], s
t = datetime.datetime.strptime(s[\"lifecycle\"][\"shutdownTime\"], \"%Y-%m-%dT%H:%M:%SZ\")
d = (t - datetime.datetime.utcnow()).total_seconds()
assert 3000 < d <= 3601, d
assert s[\"lifecycle\"][\"shutdownPolicy\"] == \"Retain\", s" &&
	api -X PATCH -H "Content-Type: application/merge-patch+json" \
		--data "{\"spec\": {\"lifecycle\": {\"shutdownTime\": \"2099-01-01T00:00:00Z\"}}}" "$claim" >/dev/null &&
	sbx keepalive withenv && api "$claim" >cl.json &&
	json_assert cl.json "assert not r[\"spec\"][\"lifecycle\"][\"shutdownTime\"].startswith(\"2099\"), r" &&
	sbx rm -f withenv &&
	n0=$(sbx ls -q | wc -l) && state >s0.json &&
	expect_code 125 sbx create --provider kubernetes --image template:pooled -e A=1 2>e &&
	expect_one_error_line e "-e cannot go with --image template:pooled: the SandboxTemplate.s envVarsInjectionPolicy is .Disallowed." &&
	test_eq "$n0" "$(sbx ls -q | wc -l)" && state >s1.json &&
	json_assert s1.json "import json; assert r[\"claims\"] == json.load(open(\"s0.json\"))[\"claims\"], r"
'

test_expect_success 'past its shutdownTime (Retain), a claim and a Sandbox are stopped, with the reason, in inspect and ls alike' '
	tmpl pooled &&
	sbx create --provider kubernetes --image template:pooled --name cexp --ttl 1h >/dev/null &&
	sbx create --provider kubernetes --image busybox --name sexp --ttl 1h >/dev/null &&
	api -X PATCH -H "Content-Type: application/merge-patch+json" \
		--data "{\"spec\": {\"lifecycle\": {\"shutdownTime\": \"2020-01-01T00:00:00Z\"}}}" \
		"$K8S/$EXT/sandboxclaims/sbx-$(id_of cexp)" >/dev/null &&
	api -X PATCH -H "Content-Type: application/merge-patch+json" \
		--data "{\"spec\": {\"shutdownTime\": \"2020-01-01T00:00:00Z\"}}" \
		"$K8S/$AGT/sandboxes/sbx-$(id_of sexp)" >/dev/null &&
	wait_state cexp stopped 20 && wait_state sexp stopped 20 &&
	reason_has cexp "ClaimExpired" && reason_has sexp "SandboxExpired" &&
	sbx ls >ls.out && test_grep -E " cexp +kubernetes +stopped" ls.out &&
	test_grep -E " sexp +kubernetes +stopped" ls.out &&
	sbx rm -f cexp sexp
'

test_expect_success 'a Sandbox whose controller has not made its pod: starting, saying so (not missing)' '
	sbx create --provider kubernetes --image busybox --name lag >/dev/null &&
	ctl -X POST --data "{\"schedulable\": false}" "$K8S/_fake/k8s/schedulable" >/dev/null &&
	api -X DELETE "$K8S/api/v1/namespaces/default/pods/$(pod_of lag)" >/dev/null &&
	wait_until 20 reason_has lag "not scheduled: 0/1 nodes are available";
	rc=$?; sbx inspect lag >i.json
	ctl -X POST --data "{\"schedulable\": true}" "$K8S/_fake/k8s/schedulable" >/dev/null &&
	test $rc = 0 && json_assert i.json "assert r[\"state\"] == \"starting\", r
assert \"unschedulable\" in r[\"state_reason\"], r" &&
	wait_state lag running 30 && sbx rm -f lag
'

# --- ls ---------------------------------------------------------------------------------------------
test_expect_success 'ls lists each sandbox where it was made (other namespaces and contexts), agreeing with inspect; a listing the cluster refuses is warned about, its states as last seen' '
	{ sed "/^current-context/d; /^contexts:/,/^users:/{/^users:/!d}" kc &&
		printf "current-context: fake\ncontexts:\n- name: fake\n  context: {cluster: fake, user: tester}\n- name: other\n  context: {cluster: fake, user: tester, namespace: kube-system}\n"; } >kc-two &&
	export KUBECONFIG=$TRASH/kc-two &&
	SBX_KUBE_CONTEXT=other sbx create --provider kubernetes --image busybox --name inother >/dev/null &&
	SBX_KUBE_NAMESPACE=kube-public sbx create --provider kubernetes --image busybox --name inpublic >/dev/null &&
	sbx create --provider kubernetes --image busybox --name relhere --disk 64m >/dev/null &&
	sbx pause --release relhere &&
	sbx ls >ls.out 2>ls.err && empty ls.err &&
	test_grep -E " inother +kubernetes +running" ls.out &&
	test_grep -E " inpublic +kubernetes +running" ls.out &&
	test_grep -E " relhere +kubernetes +released" ls.out &&
	for n in inother inpublic relhere box; do
		test_grep -E " $n +kubernetes +$(sb_state $n)( |$)" ls.out || return 1
	done &&
	fault "{\"match\": \"GET /api/v1/namespaces/kube-public/pods\$\", \"kind\": \"status\", \"status\": 403}" &&
	sbx ls >ls.out 2>ls.err && unfault &&
	expect_one_error_line ls.err "warning: cannot list kubernetes sandboxes in namespace .kube-public. of context .fake., showing their states as last seen: .*HTTP 403" &&
	test_grep -E " inpublic +kubernetes +running" ls.out &&
	test_grep -E " inother +kubernetes +running" ls.out &&
	sbx ls >ls.out 2>ls.err && empty ls.err &&
	sbx rm -f inother inpublic relhere
'
# --- credentials ------------------------------------------------------------------------------------
# a credential plugin of the test's own, on a PATH directory of the test's own: it counts its runs,
# keeps what it was given (KUBERNETES_EXEC_INFO, whether stdin was a terminal) in $PLUGIN_DIR, and
# gives the token $T ($FIRST the first time, if set)
mkdir -p "$TRASH/bin" "$TRASH/pl"
cat >"$TRASH/bin/sbx-test-plugin" <<'EOF'
#!/bin/sh
n=$(cat "$PLUGIN_DIR/runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$PLUGIN_DIR/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" >"$PLUGIN_DIR/info"
if [ -t 0 ]; then echo tty >"$PLUGIN_DIR/stdin"; else echo notty >"$PLUGIN_DIR/stdin"; fi
t=$T
[ "$n" = 1 ] && [ -n "$FIRST" ] && t=$FIRST
printf '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "%s"}}\n' "$t"
EOF
chmod +x "$TRASH/bin/sbx-test-plugin"
# plugin_kc FILE APIVERSION [YAML LINES...]: a kubeconfig whose user runs sbx-test-plugin by name
plugin_kc() {
	local f=$1 av=$2 extra=""
	shift 2
	for l in "$@"; do extra="$extra
      $l"; done
	kubeconfig "$f" "$K8S" "    exec:
      apiVersion: $av
      command: sbx-test-plugin
      installHint: the test makes sbx-test-plugin in \$TRASH/bin$extra
      env:
      - {name: T, value: $TOKEN}
      - {name: PLUGIN_DIR, value: $TRASH/pl}"
}
runs() { cat "$TRASH/pl/runs" 2>/dev/null || echo 0; }

test_expect_success 'a credential plugin by its bare name is found in the caller'"'"'s PATH (control: not on PATH, 125 with its installHint); provideClusterInfo gives it the cluster' '
	plugin_kc kc-bare client.authentication.k8s.io/v1beta1 "provideClusterInfo: true" &&
	KUBECONFIG=$TRASH/kc-bare PATH=$TRASH/bin:$PATH sbx exec box -- echo by-name </dev/null >o &&
	test_eq by-name "$(cat o)" && test_eq notty "$(cat pl/stdin)" &&
	json_assert pl/info "import base64
s = r[\"spec\"]
assert s[\"interactive\"] is False and s[\"cluster\"][\"server\"] == \"$K8S\", s
assert base64.b64decode(s[\"cluster\"][\"certificate-authority-data\"]) == open(\"ca.crt\", \"rb\").read()" &&
	KUBECONFIG=$TRASH/kc-bare expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "cannot find the credential plugin .sbx-test-plugin. of user .tester. in PATH: the test makes sbx-test-plugin in" &&
	plugin_kc kc-noinfo client.authentication.k8s.io/v1beta1 &&
	KUBECONFIG=$TRASH/kc-noinfo PATH=$TRASH/bin:$PATH sbx exec box -- true </dev/null &&
	json_assert pl/info "assert \"cluster\" not in r[\"spec\"], r"
'

test_expect_success 'interactiveMode: Always needs a terminal (125 without one; control: with one it has it), Never never has it, IfAvailable when there is one' '
	export PATH=$TRASH/bin:$PATH &&
	plugin_kc kc-always client.authentication.k8s.io/v1 "interactiveMode: Always" &&
	KUBECONFIG=$TRASH/kc-always expect_code 125 sbx exec box -- true </dev/null 2>e &&
	expect_one_error_line e "credential plugin .sbx-test-plugin. of user .tester. needs a terminal \\(interactiveMode Always\\)" &&
	KUBECONFIG=$TRASH/kc-always SHELL=/bin/sh script -qec "$SBX exec box -- true" /dev/null </dev/null &&
	test_eq tty "$(cat pl/stdin)" &&
	json_assert pl/info "assert r[\"spec\"][\"interactive\"] is True, r" &&
	plugin_kc kc-never client.authentication.k8s.io/v1 "interactiveMode: Never" &&
	KUBECONFIG=$TRASH/kc-never SHELL=/bin/sh script -qec "$SBX exec box -- true" /dev/null </dev/null &&
	test_eq notty "$(cat pl/stdin)" &&
	json_assert pl/info "assert r[\"spec\"][\"interactive\"] is False, r" &&
	plugin_kc kc-ifa client.authentication.k8s.io/v1 "interactiveMode: IfAvailable" &&
	KUBECONFIG=$TRASH/kc-ifa SHELL=/bin/sh script -qec "$SBX exec box -- true" /dev/null </dev/null &&
	test_eq tty "$(cat pl/stdin)" &&
	KUBECONFIG=$TRASH/kc-ifa sbx exec box -- true </dev/null && test_eq notty "$(cat pl/stdin)" &&
	plugin_kc kc-v1 client.authentication.k8s.io/v1 &&
	KUBECONFIG=$TRASH/kc-v1 expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "without interactiveMode, which that version requires"
'

test_expect_success 'a plugin token the cluster refuses (401) has the plugin run again, once, as kubectl does: REST and exec (control: refused twice, 125 after two runs)' '
	export PATH=$TRASH/bin:$PATH &&
	plugin_kc kc-first client.authentication.k8s.io/v1beta1 "provideClusterInfo: false" &&
	sed "s|^      env:|      env:\n      - {name: FIRST, value: stale-token}|" kc-first >kc-stale &&
	rm -f pl/runs && KUBECONFIG=$TRASH/kc-stale sbx exec box -- echo again >o &&
	test_eq again "$(cat o)" && test_eq 2 "$(runs)" &&
	rm -f pl/runs && KUBECONFIG=$TRASH/kc-stale sbx create --provider kubernetes --image busybox --name reauth >/dev/null &&
	test_eq 2 "$(runs)" && sbx rm -f reauth &&
	sed "s|value: $TOKEN|value: wrong|" kc-first >kc-wrong &&
	rm -f pl/runs && KUBECONFIG=$TRASH/kc-wrong expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "refused the credentials \\(HTTP 401" && test_eq 2 "$(runs)"
'

test_expect_success 'a 403: one line in the cluster'"'"'s words, naming RBAC (control: the same call otherwise works)' '
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"status\", \"status\": 403, \"times\": 0, \"body\": {\"kind\": \"Status\", \"status\": \"Failure\", \"reason\": \"Forbidden\", \"code\": 403, \"message\": \"pods is forbidden: User tester cannot create resource pods/exec\"}}" &&
	expect_code 125 sbx exec box -- true 2>e && unfault &&
	expect_one_error_line e "Kubernetes forbids it \\(HTTP 403: pods is forbidden: User tester cannot create resource pods/exec\\); check the RBAC permissions of the credentials of user .tester." &&
	fault "{\"match\": \"POST /apis/agents.x-k8s.io/.*\", \"kind\": \"status\", \"status\": 403, \"times\": 0}" &&
	expect_code 125 sbx create --provider kubernetes --image busybox 2>e && unfault &&
	expect_one_error_line e "forbids it \\(HTTP 403.*RBAC permissions" &&
	sbx exec box -- true
'

test_expect_success 'a client certificate authenticates, as data in the kubeconfig and as files (controls: no credentials 401; a certificate of another CA refused, the message pointing at it)' '
	kubeconfig kc-cert "$K8S" "    client-certificate-data: $(base64 -w0 client.crt)
    client-key-data: $(base64 -w0 client.key)" &&
	KUBECONFIG=$TRASH/kc-cert sbx exec box -- echo by-cert >o && test_eq by-cert "$(cat o)" &&
	kubeconfig kc-certf "$K8S" "    client-certificate: $TRASH/client.crt
    client-key: client.key" &&
	KUBECONFIG=$TRASH/kc-certf sbx exec box -- echo by-file >o && test_eq by-file "$(cat o)" &&
	KUBECONFIG=$TRASH/kc-certf sbx ls >ls.out 2>ls.err && empty ls.err &&
	kubeconfig kc-none "$K8S" "    {}" &&
	KUBECONFIG=$TRASH/kc-none expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "refused the credentials \\(HTTP 401" &&
	kubeconfig kc-rogue "$K8S" "    client-certificate-data: $(base64 -w0 rogue.crt)
    client-key-data: $(base64 -w0 rogue.key)" &&
	KUBECONFIG=$TRASH/kc-rogue expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "Kubernetes.*check the certificate-authority of cluster .fake. and the client certificate of user .tester." &&
	KUBECONFIG=$TRASH/kc-rogue expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "Kubernetes.*check the certificate-authority of cluster .fake. and the client certificate of user .tester."
'

test_expect_success 'tokenFile is read at each call (a wrong token in it: 401; control: the right one)' '
	echo "$TOKEN" >tok && kubeconfig kc-tf "$K8S" "    tokenFile: tok" &&
	KUBECONFIG=$TRASH/kc-tf sbx exec box -- echo from-file >o && test_eq from-file "$(cat o)" &&
	echo wrong >tok && KUBECONFIG=$TRASH/kc-tf expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "refused the credentials \\(HTTP 401" &&
	echo "$TOKEN" >tok && KUBECONFIG=$TRASH/kc-tf sbx exec box -- true
'

test_expect_success 'SBX_KUBE_CONTEXT picks a context at create; later calls follow the record (control: the current context is refused)' '
	{ sed "/^current-context/d; /^contexts:/,/^users:/{/^users:/!d}" kc &&
		printf "%s\n" "- name: stranger" "  user: {token: wrong}" "current-context: bad" "contexts:" \
			"- name: bad" "  context: {cluster: fake, user: stranger}" \
			"- name: good" "  context: {cluster: fake, user: tester}"; } >kc-ctx &&
	KUBECONFIG=$TRASH/kc-ctx expect_code 125 sbx create --provider kubernetes --image busybox 2>e &&
	expect_one_error_line e "HTTP 401" &&
	KUBECONFIG=$TRASH/kc-ctx SBX_KUBE_CONTEXT=good sbx create --provider kubernetes --image busybox --name ctxbox >/dev/null &&
	test_eq good "$(extra_of ctxbox context)" &&
	KUBECONFIG=$TRASH/kc-ctx sbx exec ctxbox -- echo followed >o && test_eq followed "$(cat o)" &&
	KUBECONFIG=$TRASH/kc-ctx sbx rm -f ctxbox
'

test_expect_success 'KUBECONFIG as a colon list: clusters, users and contexts from different files, missing ones skipped (control: without the users file, 125 naming the user)' '
	sed -n "/^clusters:/,/^contexts:/p" kc | sed "\$d" >kc-clusters &&
	sed -n "/^users:/,\$p" kc >kc-users &&
	{ echo "current-context: fake" && sed -n "/^contexts:/,/^users:/p" kc | sed "\$d"; } >kc-ctxs &&
	KUBECONFIG=$TRASH/none:$TRASH/kc-ctxs:$TRASH/kc-users:$TRASH/kc-clusters sbx exec box -- echo merged >o &&
	test_eq merged "$(cat o)" &&
	KUBECONFIG=$TRASH/kc-ctxs:$TRASH/kc-clusters expect_code 125 sbx exec box -- true 2>e &&
	expect_one_error_line e "no user .tester."
'

# --- the exec stream --------------------------------------------------------------------------------
# rawexec CMD: the exec of CMD in box's pod by a bare client that sends nothing (no ping): prints
# its stdout, then "EOF" when the connection was cut, "CLOSE" when it was closed in order
cat >"$TRASH/rawexec.py" <<EOF
import base64, os, socket, ssl, sys, urllib.parse
sys.path.insert(0, "$TEST_DIR/helpers")
from ws import accept_key, read_frame, read_head
port, token, ca, pod, cmd = sys.argv[1:6]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=60),
                    server_hostname="127.0.0.1")
key = base64.b64encode(os.urandom(16)).decode()
q = "command=sh&command=-c&command=%s&stdout=true&container=sandbox" % urllib.parse.quote(cmd)
s.sendall(("GET /api/v1/namespaces/default/pods/%s/exec?%s HTTP/1.1\r\nHost: x\r\n"
           "Authorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n" % (pod, q, token, key)).encode())
line, headers, rest = read_head(s)
assert " 101 " in line, line
while True:
    try:
        fin, op, data = read_frame(s)
    except (EOFError, OSError):
        print("EOF")
        break
    if op == 8:
        print("CLOSE")
        break
    if op == 2 and data[:1] == b"\x01":
        sys.stdout.write(data[1:].decode())
EOF
rawexec() { "$TEST_PYTHON" "$TRASH/rawexec.py" "${K8S##*:}" "$TOKEN" "$TRASH/ca.crt" "$(pod_of box)" "$1"; }

test_expect_success 'pings: sbx answers the cluster'"'"'s, and its own keep an idle exec alive where a proxy cuts idle connections (control: a client that sends none is cut)' '
	state >s0.json && json_assert s0.json "assert \"sbx-pong-check\" not in r[\"pongs\"], r" &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"ws_ping\", \"payload\": \"sbx-pong-check\", \"times\": 1}" &&
	sbx exec box -- sleep 1 && state >s1.json &&
	json_assert s1.json "assert \"sbx-pong-check\" in r[\"pongs\"], r" &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"ws_idle\", \"seconds\": 10, \"times\": 1}" &&
	sbx exec box -- sh -c "sleep 14; echo still-here" >o && test_eq still-here "$(cat o)" &&
	fault "{\"match\": \"GET /api/v1/namespaces/default/pods/[^/]+/exec\", \"kind\": \"ws_idle\", \"seconds\": 10, \"times\": 1}" &&
	rawexec "sleep 14; echo still-here" >raw && test_eq EOF "$(cat raw)" &&
	rawexec "echo bare" >raw && test_eq "bare
CLOSE" "$(cat raw)"
'

# resize.py SBX SB: exec -t under a terminal of its own, 24x80; once the size shows inside, the
# terminal becomes 40x120 (the kernel signals sbx SIGWINCH): prints what the command printed
cat >"$TRASH/resize.py" <<'EOF'
import fcntl, os, pty, select, struct, subprocess, sys, termios, time
sbx, sb = sys.argv[1:3]
m, s = pty.openpty()
def size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
size(s, 24, 80)
def ctty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
script = ('i=0; while [ "$(stty size)" = "0 0" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; '
          's=$(stty size); echo "first $s"; i=0; '
          'while [ "$(stty size)" = "$s" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; '
          'echo "then $(stty size)"')
p = subprocess.Popen([sbx, "exec", "-t", sb, "--", "sh", "-c", script], stdin=s, stdout=s,
                     stderr=s, preexec_fn=ctty, close_fds=True)
os.close(s)
out, resized, deadline = b"", False, time.time() + 50
while time.time() < deadline:
    if select.select([m], [], [], 0.2)[0]:
        try:
            b = os.read(m, 4096)
        except OSError:
            b = b""
        if not b:
            break
        out += b
    if not resized and b"first 24 80" in out:
        size(m, 40, 120)
        resized = True
rc = p.wait(20)
sys.stdout.write(out.decode("utf-8", "replace").replace("\r", ""))
sys.exit(rc)
EOF

test_expect_success 'exec -t: a window resized mid-session is resized inside (SIGWINCH, channel 4)' '
	"$TEST_PYTHON" "$TRASH/resize.py" "$SBX" box >rs.out &&
	test_grep -x "first 24 80" rs.out && test_grep -x "then 40 120" rs.out
'

# --- what a pod's image can do ------------------------------------------------------------------------
test_expect_success 'an image the kubelet cannot pull: create fails at once with its reason (ErrImagePull, ImagePullBackOff, InvalidImageName), nothing left' '
	n0=$(sbx ls -q | wc -l) && state >s0.json &&
	for r in ErrImagePull ImagePullBackOff InvalidImageName; do
		ctl -X POST --data "{\"image\": \"bad/$r:1\", \"reason\": \"$r\", \"message\": \"cannot pull bad/$r:1\"}" \
			"$K8S/_fake/k8s/image-fail" >/dev/null &&
			expect_code 125 sbx create --provider kubernetes --image "bad/$r:1" 2>e &&
			expect_one_error_line e "did not start: $r: cannot pull bad/$r:1" || return 1
	done &&
	test_eq "$n0" "$(sbx ls -q | wc -l)" && state >s1.json &&
	json_assert s1.json "import json; assert r[\"sandboxes\"] == json.load(open(\"s0.json\"))[\"sandboxes\"], r"
'

test_expect_success 'cp with an image that has no tar: one clear line, 125, both ways (control: the same cp where tar is)' '
	sbx create --provider kubernetes --image sbx-fake/no-tar --name notar >/dev/null &&
	echo x >f1 &&
	expect_code 125 sbx cp f1 notar:/tmp/ 2>e && expect_one_error_line e "image has no tar, which cp needs" &&
	expect_code 125 sbx cp notar:/etc/hostname h 2>e && expect_one_error_line e "image has no tar" &&
	sbx cp f1 box:/tmp/f1 && sbx exec box -- cat /tmp/f1 >b && test_eq x "$(cat b)" &&
	sbx rm -f notar
'

# the shared verb checks (tests/helpers/verbs.sh), in both modes; release keeps the --disk
# volume at the workdir, where the checks' files go
VERBS_SKIP="user pause-memory" VERBS_DIR=/workspace
VERBS_WHY_user="the pods/exec API runs commands as the container's user (exec -u is refused)"
VERBS_WHY_pause_memory="Kubernetes has no pause that keeps memory (pause is refused: above)"
verbs_suite k8s-sandbox --provider kubernetes --image busybox:1 --disk 64m
KUBECONFIG=$TRASH/kc-pods
verbs_suite k8s-pod --provider kubernetes --image busybox:1 --disk 64m
KUBECONFIG=$TRASH/kc
VERBS_SKIP="" VERBS_DIR=/tmp

test_expect_success 'rm removes the Sandbox and its pod' '
	sbx rm -f box && state >st.json &&
	json_assert st.json "assert not r[\"sandboxes\"] and not r[\"claims\"], r" &&
	test -z "$(sbx ls -q)"
'

test_done
