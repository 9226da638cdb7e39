#!/bin/bash
# sbx preview: a host URL for a port inside (HTTP, a large body, a WebSocket echo, a page whose
# text JavaScript writes, rendered by headless Chromium); --json, --host-port, the list; the
# token every preview has (query, cookie, header), --public, --no-auth; surviving exec, pause
# and resume; --rm and rm closing it; a server bound to ::1 only (and one on the host's ::1,
# for --host-port). Servers run inside with exec -d; every request goes to 127.0.0.1 (or ::1).
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl

HELPERS=$TEST_DIR/helpers
CURL=(curl -sS --max-time 10 --noproxy "*")

# the site: a page whose text a script writes (with a second request, for data.txt), a large file
mkdir -p site
cat >site/index.html <<'EOF'
<!doctype html>
<html><head><title>sbx preview</title><script src="app.js"></script></head>
<body><p id="out">not rendered</p><script>render();</script></body></html>
EOF
cat >site/app.js <<'EOF'
function render() {
	var x = new XMLHttpRequest();
	x.open("GET", "data.txt", false);
	x.send();
	document.getElementById("out").textContent =
		"rendered by javascript: " + (6 * 7) + ", " + x.responseText.trim();
}
EOF
echo "served from the sandbox" >site/data.txt
head -c 3000000 /dev/urandom >site/big.bin
BIG_SUM=$(sha256sum <site/big.bin | cut -d" " -f1)

# url_port URL: the port of http://HOST:PORT/...
url_port() { sed -n 's|^http://[^/]*:\([0-9]*\)/.*|\1|p' <<<"$1"; }

# pv_save NAME URL: a preview's URL as sbx preview prints it, kept as urlNAME (without the
# token: http://127.0.0.1:PORT/) and tokNAME (the token, 32 hexadecimal digits)
pv_save() {
	test_grep -Ex 'http://[^/]+:[0-9]+/\?sbx_token=[0-9a-f]{32}' <<<"$2" || { say "not a URL with a token: $2" >&2; return 1; }
	echo "${2%%\?*}" >"url$1" && echo "${2##*sbx_token=}" >"tok$1"
}

# pv_curl NAME [CURL ARGS...] PATH: curl the preview NAME's URL + PATH with its token header
pv_curl() {
	local n=$1 path=${*: -1}
	"${CURL[@]}" -H "X-Sbx-Preview-Token: $(cat "tok$n")" "${@:2:$#-2}" "$(cat "url$n")$path"
}

# listening ADDR PORT: a TCP socket listens on exactly ADDR:PORT on the host
listening() { ss -Hltn "sport = :$2" | awk '{ print $4 }' | grep -qx "$1:$2"; }

# serve_inside SB: the site on 8000 and 8001, WebSocket echoes on 8765 and 8766, all on the
# sandbox's 127.0.0.1, started with exec -d; waits (bounded) until they answer
serve_inside() {
	sbx cp site "$1:/workspace/" && sbx cp "$HELPERS/ws.py" "$1:/workspace/ws.py" &&
		for p in 8000 8001; do
			sbx exec -d "$1" /usr/bin/python3 -m http.server "$p" --bind 127.0.0.1 \
				--directory /workspace/site >/dev/null || return 1
		done &&
		for p in 8765 8766; do
			sbx exec -d "$1" /usr/bin/python3 /workspace/ws.py serve "$p" >/dev/null || return 1
		done &&
		for p in 8000/data.txt 8001/data.txt 8765/ 8766/; do
			wait_until 10 sbx exec "$1" "${CURL[@]}" -f "http://127.0.0.1:$p" || return 1
		done
}

# a server on the host's ::1 only, for --host-port, which dials the host's 127.0.0.1 and then
# its ::1 as previews do inside
HP6=$("$TEST_PYTHON" -c 'import socket
s = socket.socket(socket.AF_INET6)
s.bind(("::1", 0))
print(s.getsockname()[1])')
"$TEST_PYTHON" -m http.server --bind ::1 "$HP6" --directory site >/dev/null 2>&1 &
HP6_PID=$!
test_atexit 'stop_pid "$HP6_PID"'

test_expect_success 'set-up: servers inside a sandbox, on its own loopback' '
	sbx create --name box >/dev/null && serve_inside box
'

test_expect_success 'preview prints one URL on 127.0.0.1, with a token, that reaches the port inside' '
	sbx preview box 8000 >url && test_eq 1 "$(grep -c "" url)" &&
	test_grep -Ex "http://127\.0\.0\.1:[0-9]+/\?sbx_token=[0-9a-f]{32}" url && pv_save 8000 "$(cat url)" &&
	pv_curl 8000 data.txt >out && test_eq "served from the sandbox" "$(cat out)" &&
	pv_curl 8000 "" | test_grep "not rendered" &&
	test_eq "$BIG_SUM" "$(pv_curl 8000 big.bin | sha256sum | cut -d" " -f1)" &&
	listening 127.0.0.1 "$(url_port "$(cat url8000)")" &&
	test_eq 401 "$("${CURL[@]}" -o /dev/null -w "%{http_code}" "$(cat url8000)data.txt")" &&
	"${CURL[@]}" -L -c jar -b jar "$(cat url)" | test_grep "not rendered"
'

test_expect_success 'preview --json, --host-port N; a WebSocket echo through it' '
	hp=$(free_port) &&
	sbx preview box 8765 --host-port "$hp" --json >j &&
	json_assert j "import re
assert re.fullmatch(r\"http://127\\.0\\.0\\.1:$hp/\\?sbx_token=[0-9a-f]{32}\", r[\"url\"]), r
assert r[\"url\"].endswith(\"=\" + r[\"token\"]) and r[\"auth\"] is True and r[\"public\"] is False, r
assert r[\"port\"] == 8765 and r[\"host_port\"] == $hp, r" &&
	pv_save 8765 "$(json_assert j "print(r[\"url\"])")" &&
	"$TEST_PYTHON" "$HELPERS/ws.py" client "$(cat url8765)echo" --header "X-Sbx-Preview-Token: $(cat tok8765)" \
		"hello through the preview" >out &&
	test_eq "hello through the preview" "$(cat out)" &&
	"$TEST_PYTHON" "$HELPERS/ws.py" client "ws://127.0.0.1:$hp/" --header "X-Sbx-Preview-Token: $(cat tok8765)" \
		--size 300000 big >out &&
	expect_code 2 "$TEST_PYTHON" "$HELPERS/ws.py" client "ws://127.0.0.1:$hp/" x 2>err &&
	test_grep "handshake failed: HTTP/1\.[01] 401" err
'

test_expect_success 'preview SB lists the open previews; --json an array of the same objects' '
	sbx preview box >list && cat list &&
	test_eq 3 "$(grep -c "" list)" &&
	grep -F "$(cat url8000)?sbx_token=$(cat tok8000)" list | test_grep -w 8000 &&
	grep -F "$(cat url8765)?sbx_token=$(cat tok8765)" list | test_grep -w 8765 &&
	sbx preview box --json >j &&
	json_assert j "assert isinstance(r, list) and len(r) == 2, r
by = {p[\"port\"]: p for p in r}
assert sorted(by) == [8000, 8765], r
assert by[8000][\"token\"] == \"$(cat tok8000)\" and by[8765][\"token\"] == \"$(cat tok8765)\", r
assert all(p[\"url\"] == \"http://127.0.0.1:%d/?sbx_token=%s\" % (p[\"host_port\"], p[\"token\"]) for p in r), r"
'

test_expect_success '--public: on every address, 401 without the token; query, cookie, header' '
	sbx preview box 8001 --public --json >j &&
	eval "$("$TEST_PYTHON" -c "import json, shlex, sys
r = json.load(open(sys.argv[1]))
for k in (\"url\", \"token\", \"host_port\", \"port\"):
    print(\"%s=%s\" % (k, shlex.quote(str(r[k]))))" j)" &&
	test_eq 8001 "$port" && test_ne "" "$token" && test_ne None "$token" &&
	echo "$url" | test_grep -Ex "http://[^/]+:$host_port/\?sbx_token=$token" &&
	listening 0.0.0.0 "$host_port" &&
	base=http://127.0.0.1:$host_port &&
	test_eq 401 "$("${CURL[@]}" -o /dev/null -w "%{http_code}" "$base/data.txt")" &&
	test_eq 401 "$("${CURL[@]}" -o /dev/null -w "%{http_code}" "$base/data.txt?sbx_token=wrong$token")" &&
	test_eq 401 "$("${CURL[@]}" -o /dev/null -w "%{http_code}" -H "X-Sbx-Preview-Token: nope" "$base/")" &&
	test_eq 401 "$("${CURL[@]}" -o /dev/null -w "%{http_code}" -b "sbx_preview_token=nope" "$base/")" &&
	"${CURL[@]}" -D head -o /dev/null "$base/data.txt?sbx_token=$token" &&
	tr -d "\r" <head >h && head -n 1 h | test_grep -E "^HTTP/1\.[01] 302" &&
	grep -i "^set-cookie: sbx_preview_token_$host_port=$token;" h | test_grep -i "httponly" &&
	test_grep -i "^location: " h &&
	test_eq "served from the sandbox" "$("${CURL[@]}" -b "sbx_preview_token_$host_port=$token" "$base/data.txt")" &&
	test_eq "served from the sandbox" "$("${CURL[@]}" -H "X-Sbx-Preview-Token: $token" "$base/data.txt")" &&
	"${CURL[@]}" -L -c jar -b jar -o /dev/null -w "%{http_code}" "$url" >code && test_eq 200 "$(cat code)" &&
	echo "$base/" >url8001 && echo "$token" >tok8001
'

test_expect_success '--public: a WebSocket with the token header; without it the handshake gets 401' '
	sbx preview box 8766 --public --json >j &&
	json_assert j "print(r[\"host_port\"], r[\"token\"])" >hp_token && read -r hp token <hp_token &&
	"$TEST_PYTHON" "$HELPERS/ws.py" client "http://127.0.0.1:$hp/" --header "X-Sbx-Preview-Token: $token" \
		"public echo" >out &&
	test_eq "public echo" "$(cat out)" &&
	expect_code 2 "$TEST_PYTHON" "$HELPERS/ws.py" client "http://127.0.0.1:$hp/" x 2>err &&
	test_grep "handshake failed: HTTP/1\.[01] 401" err &&
	sbx preview --rm box 8766
'

test_expect_success 'previews survive exec, pause and resume, with their tokens' '
	sbx exec box true && sbx exec box sh -c "echo busy >/workspace/f" &&
	test_eq "served from the sandbox" "$(pv_curl 8000 data.txt)" &&
	sbx pause box >/dev/null && sbx resume box >/dev/null && test_eq running "$(sb_state box)" &&
	test_eq "served from the sandbox" "$(pv_curl 8000 data.txt)" &&
	test_eq "served from the sandbox" "$(pv_curl 8001 data.txt)" &&
	"$TEST_PYTHON" "$HELPERS/ws.py" client "$(cat url8765)" --header "X-Sbx-Preview-Token: $(cat tok8765)" \
		"after resume" >out &&
	test_eq "after resume" "$(cat out)" &&
	sbx preview box --json >j && json_assert j "assert len(r) == 3, r"
'

if command -v chromium >/dev/null; then
	test_expect_success 'headless Chromium renders a page served inside, through the preview' '
		mkdir -p chrome &&
		HOME=$TRASH/chrome timeout 45 chromium --headless --no-sandbox --disable-gpu \
			--disable-dev-shm-usage --no-first-run --no-default-browser-check \
			--disable-background-networking --disable-component-update --disable-sync \
			--disable-extensions --disable-default-apps --no-pings --metrics-recording-only \
			--proxy-server=http://127.0.0.1:9 \
			--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" \
			--user-data-dir="$TRASH/chrome/profile" \
			--dump-dom "$(cat url8000)?sbx_token=$(cat tok8000)" >dom 2>chrome.err ||
			{ tail -n 20 chrome.err; exit 1; }
		test_grep "rendered by javascript: 42, served from the sandbox" dom &&
		test_grep ! "not rendered" dom
	'
else
	test_skip 'headless Chromium renders a page served inside' 'chromium is not installed'
fi

test_expect_success 'preview --rm closes one preview; the others stay' '
	sbx preview --rm box 8000 >out && test ! -s out &&
	expect_code 7 pv_curl 8000 data.txt 2>/dev/null &&
	test_eq "served from the sandbox" "$(pv_curl 8001 data.txt)" &&
	sbx preview box --json >j &&
	json_assert j "assert sorted(p[\"port\"] for p in r) == [8001, 8765], r" &&
	sbx preview box 8000 >url && pv_save 8000 "$(cat url)" &&
	test_eq "served from the sandbox" "$(pv_curl 8000 data.txt)"
'

test_expect_success 'preview: bad ports, no sandbox, --rm of a port not previewed: 125' '
	expect_code 125 sbx preview box 0 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview box 65536 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview box http 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview box 8000 --host-port x 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview --rm box 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview nosuch 8000 2>err && expect_one_error_line err "nosuch" &&
	expect_code 125 sbx preview --rm box 9999 2>err && expect_one_error_line err "9999" &&
	expect_code 125 sbx preview --no-auth box 2>err && head -n 1 err | test_grep "^sbx: error: " &&
	expect_code 125 sbx preview --public --no-auth box 8000 2>err &&
	expect_one_error_line err "^sbx: error: .*--no-auth"
'

test_expect_success 'a sandbox with --net none can be previewed too; --no-auth: no token' '
	sbx create --name quiet --net none >/dev/null && serve_inside quiet &&
	sbx preview --no-auth quiet 8000 --json >j &&
	json_assert j "assert r[\"token\"] is None and r[\"auth\"] is False, r
assert r[\"url\"] == \"http://127.0.0.1:%d/\" % r[\"host_port\"], r" &&
	json_assert j "print(r[\"url\"])" >urlquiet &&
	test_eq "served from the sandbox" "$("${CURL[@]}" "$(cat urlquiet)data.txt")" &&
	expect_code 125 sbx preview quiet 8000 --no-auth --host-port 1 2>err &&
	sbx preview quiet 8000 >url && test_eq "$(cat urlquiet)" "$(cat url)"
'

test_expect_success 'a server bound to ::1 only answers through its preview; "upstream" says which address did' '
	sbx exec -d quiet /usr/bin/python3 -m http.server 8006 --bind ::1 \
		--directory /workspace/site >/dev/null &&
	wait_until 10 sbx exec quiet "${CURL[@]}" -f "http://[::1]:8006/data.txt" &&
	expect_code 7 sbx exec quiet "${CURL[@]}" "http://127.0.0.1:8006/" 2>/dev/null &&
	sbx preview --no-auth quiet 8006 >u6 &&
	test_eq "served from the sandbox" "$("${CURL[@]}" "$(cat u6)data.txt")" &&
	sbx preview --json quiet >j &&
	json_assert j "by = {p[\"port\"]: p for p in r}
assert by[8006][\"upstream\"] == \"[::1]:8006\", r
assert by[8000][\"upstream\"] == \"127.0.0.1:8000\", r" &&
	sbx preview quiet | test_grep -E "^8006 .* \[::1\]:8006 " &&
	sbx preview --no-auth quiet 8009 >u9 &&
	"${CURL[@]}" -o body -w "%{http_code}" "$(cat u9)" >code &&
	test_eq 502 "$(cat code)" && test_grep -F "127.0.0.1:8009 or [::1]:8009" body
'

test_expect_success '--host-port: a host server bound to ::1 only is reached too' '
	wait_until 10 "${CURL[@]}" -f -g "http://[::1]:$HP6/data.txt" &&
	expect_code 7 "${CURL[@]}" "http://127.0.0.1:$HP6/" 2>/dev/null &&
	sbx create --name fwd --host-port "$HP6:9000" >/dev/null &&
	test_eq "served from the sandbox" "$(sbx exec fwd "${CURL[@]}" "http://127.0.0.1:9000/data.txt")" &&
	sbx rm -f fwd >/dev/null
'

test_expect_success 'rm closes every preview of the sandbox, and only those' '
	sbx rm -f box >/dev/null &&
	for u in 8000 8765 8001; do
		expect_code 7 pv_curl "$u" "" 2>/dev/null || exit 1
	done &&
	test_eq "served from the sandbox" "$("${CURL[@]}" "$(cat urlquiet)data.txt")" &&
	sbx rm -f quiet >/dev/null &&
	expect_code 7 "${CURL[@]}" "$(cat urlquiet)" 2>/dev/null
'

test_done
