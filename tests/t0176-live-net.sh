#!/bin/bash
# sbx stats' network bytes: what a sandbox's egress proxy relayed for it, counted once a
# download went through; a sandbox with --net none, whose command cannot reach the server,
# counts none. The internet is the file's own (tests/helpers/testnet.sh).
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/helpers/testnet.sh
. "$(dirname "$0")/helpers/testnet.sh"
testnet_reexec "$@"
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3 curl

HELPERS=$TEST_DIR/helpers
mkdir -p www && head -c 65536 /dev/urandom >www/blob.bin
if ! testnet_up >testnet.log 2>&1; then
	TEST_SKIP_ALL="no test internet: $(tail -n 1 testnet.log)"
fi
if [ -z "$TEST_SKIP_ALL" ]; then
	testnet_srv_bg "$TEST_PYTHON" "$HELPERS/netsrv.py" --bind "$TN_WEB" \
		--ready inet.ready --root www --lifetime 300 web:http:80 2>inet.log
	test_atexit "stop_pid $TN_BG"
	wait_until 10 test -s inet.ready
fi
PORT=$(sed -n 's/^web=//p' inet.ready 2>/dev/null)

# net FILE: "RX TX" of the one sample in FILE (sbx stats --json)
net() { python3 -c 'import json,sys; s = json.load(open(sys.argv[1]))[0]; print(s["net_rx_bytes"], s["net_tx_bytes"])' "$1"; }

test_expect_success 'stats: a download through the proxy is counted, both ways' '
	sbx create --name dl --net allow=web.test --add-host "web.test:$TN_WEB" >/dev/null &&
	sbx stats --json dl >s0.json && test_eq "0 0" "$(net s0.json)" &&
	sbx exec dl curl -sS --max-time 10 -o /dev/null -w "%{size_download}" "http://web.test:$PORT/blob.bin" >got &&
	test_eq 65536 "$(cat got)" &&
	sbx stats --json dl >s1.json && read -r rx tx <<<"$(net s1.json)" &&
	test "$rx" -ge 65536 && test "$tx" -gt 0 &&
	sbx rm -f dl >/dev/null
'

test_expect_success 'stats: --net none reaches nothing and counts nothing' '
	sbx create --name cut --net none --add-host "web.test:$TN_WEB" >/dev/null &&
	expect_code 7 sbx exec cut curl -sS --max-time 10 -o /dev/null "http://web.test:$PORT/blob.bin" 2>err &&
	test_grep "Failed to connect" err &&
	sbx stats --json cut >s.json && test_eq "0 0" "$(net s.json)" &&
	sbx rm -f cut >/dev/null
'

test_done
