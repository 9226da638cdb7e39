# Sourced by tests (and bench/docker): Podman's Docker-compatible API service for one test
# file, with every piece of its state under DIR (storage root, run root, libpod's tmp
# directory, network configuration, volumes, and for an ordinary user XDG_RUNTIME_DIR), so that
# nothing of the host's podman state is read or touched. As root it runs in a network namespace
# of its own, as tests/helpers/dockerd.sh's dockerd does (a bridge it makes stays there); as
# an ordinary user it is rootless (a user namespace of its own, the user's subordinate ids when
# /etc/subuid has some, else that uid alone; its containers' network, a bridge in a network
# namespace of its own that slirp4netns links to this host's, its published ports forwarded by
# rootlessport, all in that user namespace). The file's exit handler removes its containers,
# stops it by its PID, then every process left in a rootless one's user namespace (slirp4netns,
# rootlessport, conmon) and its pause process, by their PIDs, so that its namespaces (the network
# ones too) go with them; it unmounts what it left under DIR and removes its images and storage.
#   podman_start DIR   starts it; PODMAN_HOST is its unix:// URL (for DOCKER_HOST),
#                      PODMAN_ROOTLESS=1 for an ordinary user; 1 (and a reason in PODMAN_WHY)
#                      where it cannot start here
#   podman_net_why     prints why a rootless one's containers can have no network here (nothing
#                      when they can)
#   podman_userns      prints the inode of a rootless one's user namespace (its pause process's)
#   pdm ARGS...        the podman command line against the same state (podman load, ps, ...)
#   podman_stop        what the exit handler runs
# shellcheck shell=bash disable=SC2034 # PODMAN_WHY and PODMAN_HOST are read by the sourcing file

PODMAN_WHY=

# podman's options for the state under DIR
podman_opts() {
	PODMAN_OPTS=(--root "$1/root" --runroot "$1/run" --tmpdir "$1/tmp"
		--network-config-dir "$1/net" --volumepath "$1/volumes" --storage-driver vfs
		--cgroup-manager cgroupfs --events-backend file --runtime /usr/sbin/runc)
	# rootless without subordinate ids: the image's other owners become the user's own
	[ "$(id -u)" -eq 0 ] || PODMAN_OPTS+=(--storage-opt vfs.ignore_chown_errors=true)
}

pdm() {
	podman_opts "$PODMAN_DIR"
	/usr/bin/podman "${PODMAN_OPTS[@]}" "$@"
}

podman_start() {
	local d=$1 i nproc netns=(unshare --net)
	PODMAN_DIR=$d
	PODMAN_ROOTLESS=
	# runc, not crun: crun refuses this machine's hybrid cgroups (v1 controllers beside v2)
	if [ ! -x /usr/bin/podman ] || [ ! -x /usr/sbin/runc ]; then
		PODMAN_WHY='podman or runc is missing (scripts/install-deps installs podman, docker.io)'
		return 1
	fi
	mkdir -p "$d/root" "$d/run" "$d/tmp" "$d/net" "$d/volumes" || return 1
	if [ "$(id -u)" -ne 0 ]; then
		# rootless: its runtime directory of its own; no network namespace of the test's
		# (it makes its user namespace itself; its containers have none but loopback)
		PODMAN_ROOTLESS=1
		netns=()
		mkdir -p "$d/xdg" && chmod 700 "$d/xdg" || return 1
		export XDG_RUNTIME_DIR=$d/xdg
	fi
	# root here lacks CAP_SYS_RESOURCE: containers get this shell's open-files limit and a
	# process limit below podman's own (which it lowers at start), not podman's defaults
	# (higher, which the runtime then cannot set)
	nproc=$(ulimit -Hu)
	case $nproc in unlimited | '') nproc=4096 ;; esac
	[ "$nproc" -le 4096 ] || nproc=4096
	cat >"$d/containers.conf" <<-EOF
	[containers]
	default_ulimits = ["nofile=$(ulimit -Sn):$(ulimit -Hn)", "nproc=$nproc:$nproc"]
	EOF
	export CONTAINERS_CONF=$d/containers.conf
	PODMAN_HOST="unix://$d/podman.sock"
	podman_opts "$d"
	# setsid: its own session; unshare --net: loopback of its own only
	setsid "${netns[@]}" sh -c 'ip link set lo up 2>/dev/null; exec "$@"' sh \
		/usr/bin/podman "${PODMAN_OPTS[@]}" system service --time=0 "$PODMAN_HOST" \
		>"$d/podman.log" 2>&1 </dev/null &
	PODMAN_PID=$!
	if declare -F test_atexit >/dev/null; then
		test_atexit 'podman_stop'
	fi
	for i in $(seq 1 100); do
		curl -fsS --unix-socket "$d/podman.sock" http://d/_ping >/dev/null 2>&1 && return 0
		kill -0 "$PODMAN_PID" 2>/dev/null || break
		sleep 0.1
	done
	PODMAN_WHY="the podman service did not start: $(tail -n 3 "$d/podman.log" | tr '\n' ' ')"
	return 1
}

podman_net_why() {
	if [ ! -x /usr/bin/slirp4netns ]; then
		echo "slirp4netns is missing (scripts/install-deps installs it)"
	elif ! { : <>/dev/net/tun; } 2>/dev/null; then
		echo "/dev/net/tun is not uid $(id -u)'s to open, which slirp4netns needs (tests/run.sh grants it to its uid pass; a Debian host's udev makes it 0666)"
	fi
}

# the pause process that holds a rootless service's user namespace
podman_pause_pid() { cat "$PODMAN_DIR/tmp/pause.pid" 2>/dev/null; }

podman_userns() {
	local p ns
	p=$(podman_pause_pid) && [ -n "$p" ] || return 1
	ns=$(readlink "/proc/$p/ns/user" 2>/dev/null | tr -dc 0-9)
	# not this shell's own (a pid that went to another process since)
	[ -n "$ns" ] && [ "$ns" != "$(readlink /proc/$$/ns/user | tr -dc 0-9)" ] && echo "$ns"
}

# the pids of the processes in user namespace inode $1 (the pause process left out; and the
# ended ones, which only wait for their parent to reap them)
podman_in_userns() {
	local p pause
	pause=$(podman_pause_pid)
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "$pause" ] || continue
		[ "$(readlink "$p/ns/user" 2>/dev/null | tr -dc 0-9)" = "$1" ] || continue
		grep -Eq '^State:[[:space:]]+[ZX]' "$p/status" 2>/dev/null || echo "${p#/proc/}"
	done
	return 0
}

# the pids of the processes whose command line names this file's podman state directory
podman_leftovers() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "$$" ] || continue
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$PODMAN_DIR/" &&
			echo "${p#/proc/}"
	done
	return 0
}

podman_stop() {
	local i ns
	# once (a test's subshell may have stopped it already: it says so in DIR)
	[ -n "${PODMAN_PID:-}" ] && [ ! -e "$PODMAN_DIR/stopped" ] || return 0
	# its containers first (their conmon processes outlive the service otherwise)
	pdm rm -a -f -t 0 >/dev/null 2>&1 || true
	kill -TERM "$PODMAN_PID" 2>/dev/null || true
	for i in $(seq 1 50); do
		kill -0 "$PODMAN_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$PODMAN_PID" 2>/dev/null || true
	wait "$PODMAN_PID" 2>/dev/null || true
	PODMAN_PID=
	# what it started that outlives it: each exec's conmon waits minutes for its exit command
	# (found by the state directory in their command lines: this file's own, and no other's)
	podman_leftovers | while read -r i; do kill -TERM "$i" 2>/dev/null || true; done
	sleep 0.2
	podman_leftovers | while read -r i; do kill -KILL "$i" 2>/dev/null || true; done
	pdm rmi -a -f >/dev/null 2>&1 || true
	if [ -n "$PODMAN_ROOTLESS" ]; then
		# files of its subordinate ids, which only its user namespace may remove; then what
		# still runs in that namespace (the rootless network's slirp4netns, a rootlessport,
		# a conmon), and the pause process that holds it: their network and mount namespaces
		# go with them
		pdm unshare rm -rf "$PODMAN_DIR/root" "$PODMAN_DIR/run" >/dev/null 2>&1 || true
		ns=$(podman_userns) || ns=
		if [ -n "$ns" ]; then
			podman_in_userns "$ns" | while read -r i; do kill -TERM "$i" 2>/dev/null || true; done
			sleep 0.2
			podman_in_userns "$ns" | while read -r i; do kill -KILL "$i" 2>/dev/null || true; done
		fi
		i=$(podman_pause_pid) || i=
		[ -z "$i" ] || kill -KILL "$i" 2>/dev/null || true
	fi
	# what is still mounted under DIR (a container's shm, a layer)
	grep -F " $PODMAN_DIR/" /proc/self/mounts | awk '{ print $2 }' | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
	: >"$PODMAN_DIR/stopped"
}
