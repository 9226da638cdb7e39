# The network tests' own internet, in network namespaces they make themselves, so that the
# sandboxes under test reach servers that are neither this host's loopback nor any address of
# it, as root and as an unprivileged uid alike, and nothing of the host's network changes.
#
#   testnet_reexec "$@"  at the top of a test file, before lib.sh: runs the file again inside a
#                        network namespace of its own (root: unshare --net; another uid:
#                        unshare --user --map-current-user --net --keep-caps, a user namespace
#                        that owns it and keeps the capabilities to build it). Every sbx call of
#                        the file runs there: "the host" of its sandboxes is that namespace.
#                        When no such namespace can be made, the file runs as it is and
#                        testnet_up says why (the caller skips).
#   testnet_reexec --mount "$@"  the same in a mount namespace of its own too (root: unshare
#                        --net --mount; another uid: the user namespace owns that one as well),
#                        private mounts, so that testnet_resolver can change /etc there
#   testnet_resolver IP [OPTION...]  (after testnet_reexec --mount) bind-mounts a resolv.conf
#                        of the file's own, "nameserver IP" and "options OPTION...", over
#                        /etc/resolv.conf in that mount namespace: every lookup of the file's
#                        processes (sbx's supervisor's too) asks IP; the host's stays as it is
#   testnet_up           (after lib.sh, at the top level) builds the internet: a second
#                        namespace for the servers, held by a sleeping process, joined to this
#                        one by a veth pair:
#                          this namespace ("the host")   sbxt-h   $TN_HOST (192.0.2.1/24)
#                                                                 $TN_HOST_PRIV (10.77.0.1/24)
#                          the servers' namespace         sbxt-s   $TN_WEB (192.0.2.2/24, TEST-NET-1,
#                                                                  not private: open and allow= reach it)
#                                                                 $TN_PRIV (10.77.0.2/24, private)
#                        and lo up in both. Everything goes when the file ends (test_atexit).
#   testnet_srv ARGS...  runs ARGS in the servers' namespace (nsenter --net)
#   testnet_srv_bg ARGS...  the same in the background, its pid (the command's own) in TN_BG;
#                        whatever still runs in that namespace is ended with it at the end
#   TN_IP                the ip(8) binary (not on an unprivileged PATH)
# shellcheck shell=bash

TN_HOST=192.0.2.1 TN_WEB=192.0.2.2 TN_HOST_PRIV=10.77.0.1 TN_PRIV=10.77.0.2
TN_IP=$(command -v ip || { [ -x /usr/sbin/ip ] && echo /usr/sbin/ip; } || { [ -x /sbin/ip ] && echo /sbin/ip; })

testnet_reexec() {
	[ -n "${SBX_TESTNET:-}" ] && return 0
	local ns=(--net) mnt=
	if [ "${1:-}" = --mount ]; then
		mnt=1
		shift
		ns+=(--mount --propagation private)
	fi
	[ "$(id -u)" -eq 0 ] || ns=(--user --map-current-user --keep-caps "${ns[@]}")
	if [ -n "$TN_IP" ] && unshare "${ns[@]}" true 2>/dev/null; then
		SBX_TESTNET=1 SBX_TESTNET_MOUNT=$mnt exec unshare "${ns[@]}" bash "$0" "$@"
	fi
	export SBX_TESTNET_WHY="cannot make a network namespace (unshare ${ns[*]})"
}

testnet_resolver() {
	local ip=$1 f
	shift
	[ -n "${SBX_TESTNET_MOUNT:-}" ] ||
		{ say "testnet_resolver: not in a mount namespace of its own (testnet_reexec --mount)"; return 1; }
	f=$(mktemp "${TMPDIR:-/tmp}/sbx-resolv.XXXXXX") || return 1
	chmod 644 "$f"
	{ echo "nameserver $ip"; [ $# -eq 0 ] || echo "options $*"; } >"$f"
	mount --bind "$f" /etc/resolv.conf || { rm -f "$f"; return 1; }
	# the mount holds the file's content; the name can go now
	rm -f "$f"
}

testnet_srv() { nsenter --net="/proc/$TN_SRV_PID/ns/net" -- "$@"; }
testnet_srv_bg() {
	nsenter --net="/proc/$TN_SRV_PID/ns/net" -- "$@" &
	# shellcheck disable=SC2034 # for the caller
	TN_BG=$!
}

# ends every process of the servers' namespace (by their own pids, one by one)
testnet_down() {
	local p ns
	ns=$(readlink "/proc/$TN_SRV_PID/ns/net") || return 0
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ]; then
			kill "${p#/proc/}" 2>/dev/null || true
		fi
	done
	return 0
}

testnet_up() {
	[ -n "${SBX_TESTNET:-}" ] || { say "${SBX_TESTNET_WHY:-not in a namespace of its own}"; return 1; }
	"$TN_IP" link set lo up || return 1
	unshare --net sleep 900 </dev/null >/dev/null 2>&1 &
	TN_SRV_PID=$!
	test_atexit "testnet_down"
	for _ in $(seq 50); do
		[ "$(readlink "/proc/$TN_SRV_PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.1
	done
	"$TN_IP" link add sbxt-h type veth peer name sbxt-s netns "$TN_SRV_PID" &&
		"$TN_IP" addr add "$TN_HOST/24" dev sbxt-h &&
		"$TN_IP" addr add "$TN_HOST_PRIV/24" dev sbxt-h &&
		"$TN_IP" link set sbxt-h up &&
		testnet_srv "$TN_IP" link set lo up &&
		testnet_srv "$TN_IP" addr add "$TN_WEB/24" dev sbxt-s &&
		testnet_srv "$TN_IP" addr add "$TN_PRIV/24" dev sbxt-s &&
		testnet_srv "$TN_IP" link set sbxt-s up || return 1
	# the link is up once an address answers (duplicate address detection, carrier)
	for _ in $(seq 50); do
		testnet_srv "$TN_IP" -o addr show dev sbxt-s | grep -q "$TN_WEB" &&
			"$TN_IP" -o link show sbxt-h | grep -q "state UP" && return 0
		sleep 0.1
	done
	return 1
}
