#!/bin/bash
# What a local sandbox can and cannot see: the caller's home, environment, processes, host
# filesystem, network; its own hostname and users.
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS

test_expect_success 'set-up: a sandbox named iso' '
	sbx create --name iso >/dev/null
'

test_expect_success 'a secret in the caller home is invisible inside' '
	mkdir -p "$HOME/.ssh" && echo TOPSECRET >"$HOME/.ssh/id_rsa" &&
	sbx exec iso -- sh -c "ls -A /home /root; cat \"$HOME/.ssh/id_rsa\" 2>&1; grep -r TOPSECRET /home /root /tmp /var /run 2>/dev/null" >out 2>&1;
	test_grep ! TOPSECRET out &&
	expect_code 1 sbx exec iso -- test -e "$HOME" &&
	expect_code 1 sbx exec iso -- test -e "$TRASH"
'

test_expect_success 'the caller environment is invisible; -e and create -e pass values in' '
	SBX_SECRET_TOKEN=s3cr3t sbx exec iso -- env >out &&
	test_grep ! s3cr3t out && test_grep ! SBX_SECRET_TOKEN out &&
	test_grep -x "HOME=/root" out && test_grep "^PATH=" out &&
	sbx exec -e A=1 -e B=two iso -- env >out && test_grep -x A=1 out && test_grep -x B=two out &&
	PASSME=yes sbx exec -e PASSME iso -- env >out && test_grep -x PASSME=yes out &&
	sbx exec -e NOTSET_SBX_X iso -- env >out && test_grep ! NOTSET_SBX_X out &&
	printf "# comment\nF1=x y\n\nF2=2\n" >envf &&
	sbx exec --env-file envf iso -- env >out && test_grep -x "F1=x y" out && test_grep -x F2=2 out &&
	sbx create --name envbox -e CREATED=1 -e OVER=a >/dev/null &&
	sbx exec -e OVER=b envbox -- env >out && test_grep -x CREATED=1 out && test_grep -x OVER=b out &&
	sbx rm -f envbox >/dev/null
'

test_expect_success 'host processes are invisible; init is PID 1' '
	sleep 300 & sp=$! &&
	sbx exec iso -- ps -eo pid,comm >out; kill $sp;
	test_grep ! sleep out &&
	test_grep -E "^ +1 " out &&
	test "$(grep -cv PID out)" -le 3
'

test_expect_success 'the hostname is the sandbox name (or id), in /etc/hostname and /etc/hosts too' '
	test_eq iso "$(sbx exec iso hostname)" &&
	test_eq iso "$(sbx exec iso cat /etc/hostname)" &&
	sbx exec iso grep -q "127.0.1.1.*iso" /etc/hosts &&
	sbx exec iso grep -q "localhost" /etc/hosts &&
	id=$(sbx create) && test_eq "$id" "$(sbx exec "$id" hostname)" && sbx rm -f "$id" >/dev/null
'

test_expect_success 'id -u is 0 inside; the host sees an unprivileged uid' '
	test_eq 0 "$(sbx exec iso id -u)" &&
	pid=$(sbx inspect iso | python3 -c "import json,sys; print(json.load(sys.stdin)[\"pid\"])") &&
	huid=$(awk "/^Uid:/ {print \$2}" /proc/$pid/status) &&
	test_ne 0 "$huid" &&
	if [ "$(id -u)" -ne 0 ]; then test "$huid" = "$(id -u)"; fi &&
	sbx exec iso -c "sleep 30 & echo \$!" >/dev/null &&
	for p in $(pgrep -x sleep); do
		if grep -q "^NSpid:.*[[:space:]]" /proc/$p/status && [ "$(readlink /proc/$p/ns/pid)" = "$(readlink /proc/$pid/ns/pid)" ]; then
			test_ne 0 "$(awk "/^Uid:/ {print \$2}" /proc/$p/status)" || exit 1
		fi
	done
'

test_expect_success 'no capability of the host namespace reaches inside' '
	sbx exec iso -- grep CapEff /proc/self/status >out &&
	# docker default set only: no CAP_SYS_ADMIN (bit 21), no CAP_NET_ADMIN (bit 12)
	eff=$(awk "{print \$2}" out) &&
	test_eq 0 $(( 0x$eff & (1 << 21) )) && test_eq 0 $(( 0x$eff & (1 << 12) )) &&
	expect_code 32 sbx exec iso -- sh -c "mount -t tmpfs t /mnt 2>/dev/null" &&
	sbx exec iso -- grep -q "NoNewPrivs:[[:space:]]*1" /proc/self/status &&
	sbx exec iso -- grep -q "Seccomp:[[:space:]]*2" /proc/self/status
'

test_expect_success 'the seccomp profile refuses new user namespaces and keyctl' '
	expect_code 1 sbx exec iso -- unshare -U true 2>/dev/null &&
	expect_code 1 sbx exec iso -- unshare -r true 2>/dev/null
'

test_expect_success 'a file written inside persists across exec calls, not on the host root' '
	sbx exec iso -c "echo hello >/workspace/note; echo t >/tmp/tmpnote; echo r >/root/rootnote" &&
	test_eq hello "$(sbx exec iso cat /workspace/note)" &&
	test_eq t "$(sbx exec iso cat /tmp/tmpnote)" &&
	! test -e /workspace/note && ! test -e /tmp/tmpnote &&
	id=$(sbx inspect iso | python3 -c "import json,sys; print(json.load(sys.stdin)[\"id\"])") &&
	test -f "$SBX_HOME/sandboxes/$id/root/workspace/note"
'

test_expect_success 'the host system is read-only inside; the root is writable' '
	expect_code 2 sbx exec iso -- sh -c "echo x >/usr/sbx-test" 2>/dev/null &&
	expect_code 2 sbx exec iso -- sh -c "echo x >/etc/sbx-test" 2>/dev/null &&
	! test -e /usr/sbx-test && ! test -e /etc/sbx-test &&
	sbx exec iso -- sh -c "echo x >/opt/ok && mkdir -p /var/lib/x"
'

test_expect_success 'the working directory is /workspace; -w and create -w change it' '
	test_eq /workspace "$(sbx exec iso pwd)" &&
	test_eq /tmp "$(sbx exec -w /tmp iso pwd)" &&
	sbx create --name wd -w /srv/app >/dev/null && test_eq /srv/app "$(sbx exec wd pwd)" &&
	sbx rm -f wd >/dev/null &&
	expect_code 125 sbx exec -w /nonexistent iso pwd 2>err &&
	expect_one_error_line err "cannot change to directory ./nonexistent."
'

test_expect_success 'only loopback in the network namespace; the host loopback is unreachable' '
	sbx exec iso -- cat /proc/net/dev >out &&
	test_eq 1 "$(grep -c : out)" && test_grep "lo:" out &&
	: >srv.log && (python3 -u -m http.server --bind 127.0.0.1 0 >srv.log 2>&1 & echo $! >srv.pid) &&
	for i in $(seq 50); do port=$(sed -n "s/.*port \([0-9]*\).*/\1/p" srv.log); [ -n "$port" ] && break; sleep 0.1; done;
	test_ne "" "$port" && bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" &&
	expect_code 1 sbx exec iso -- bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; r=$?;
	kill "$(cat srv.pid)"; test_eq 0 $r
'

test_expect_success 'volumes: -v HOST:DEST and :ro' '
	mkdir -p share && echo shared >share/f && echo file >single &&
	sbx create --name vol -v "$PWD/share:/data" -v "$PWD/single:/etc-like/single:ro" -v "$PWD/share:/ro:ro" >/dev/null &&
	test_eq shared "$(sbx exec vol cat /data/f)" &&
	sbx exec vol sh -c "echo back >/data/g" && test_eq back "$(cat share/g)" &&
	test_eq file "$(sbx exec vol cat /etc-like/single)" &&
	expect_code 2 sbx exec vol sh -c "echo x >/ro/h" 2>/dev/null && ! test -e share/h &&
	test_eq "$(id -u)" "$(stat -c %u share/g)" &&
	sbx rm -f vol >/dev/null
'

test_expect_success 'the sandbox has its own /dev and /proc' '
	sbx exec iso -- sh -c "echo x >/dev/null && head -c 4 /dev/urandom | wc -c" >out &&
	test_eq 4 "$(cat out)" &&
	sbx exec iso -- ls /dev >out &&
	for n in null zero full random urandom tty pts ptmx shm; do test_grep -x $n out || exit 1; done &&
	test_grep ! -x sda out && test_grep ! -x vda out && test_grep ! -x kmsg out
'

test_done
