# Sourced by tests: a private Docker Engine for one test file, as root. dockerd runs in a
# network namespace of its own (no bridge, no iptables rules on the host), with its socket,
# data and state under DIR; the file's exit handler stops it by its PID and removes what it
# left (its containers first, so that no shim outlives it).
#   dockerd_start DIR   starts it; DOCKER_HOST (and DOCKERD_HOST, which stays) points at it;
#                       1 (and a reason in DOCKERD_WHY) where it cannot start here. gVisor's
#                       runsc is one of its runtimes when installed (DOCKERD_RUNSC=1 then)
#   DOCKERD_TLS="PORT CA CERT KEY"   (set before dockerd_start) it listens on 127.0.0.1:PORT
#                       of its network namespace too, TLS with --tlsverify (clients need a
#                       certificate CA signed)
#   dkr ARGS...         the docker client against it (its own socket, whatever DOCKER_HOST is)
# shellcheck shell=bash disable=SC2034 # DOCKERD_WHY and the loop counters are read by the sourcing file, or not at all

DOCKERD_WHY=

dockerd_start() {
	local d=$1 i
	DOCKERD_DIR=$d
	if [ "$(id -u)" -ne 0 ]; then
		DOCKERD_WHY='dockerd runs as root only'
		return 1
	fi
	if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
		DOCKERD_WHY='dockerd or docker is missing (scripts/install-deps installs docker.io)'
		return 1
	fi
	mkdir -p "$d/data" "$d/exec" || return 1
	export DOCKER_HOST="unix://$d/docker.sock"
	DOCKERD_HOST=$DOCKER_HOST
	# gVisor as a runtime (ptrace platform; its own --network=none: runsc refuses the
	# container's none network otherwise)
	DOCKERD_RUNSC=
	local runsc
	runsc=$(command -v runsc || true)
	if [ -n "$runsc" ]; then
		DOCKERD_RUNSC=1
		printf '{"runtimes":{"runsc":{"path":"%s","runtimeArgs":["--network=none","--platform=ptrace"]}}}\n' \
			"$runsc" >"$d/daemon.json"
	else
		echo '{}' >"$d/daemon.json"
	fi
	local tls=()
	if [ -n "${DOCKERD_TLS:-}" ]; then
		# shellcheck disable=SC2086 # four words
		set -- $DOCKERD_TLS
		tls=(--host "tcp://127.0.0.1:$1" --tlsverify --tlscacert "$2" --tlscert "$3"
			--tlskey "$4")
	fi
	# setsid: its own session, which it keeps; unshare --net: loopback of its own only
	setsid unshare --net sh -c 'ip link set lo up 2>/dev/null; exec dockerd "$@"' sh \
		--host "$DOCKER_HOST" "${tls[@]}" --data-root "$d/data" --exec-root "$d/exec" \
		--pidfile "$d/dockerd.pid" --bridge=none --iptables=false --ip6tables=false \
		--config-file "$d/daemon.json" >"$d/dockerd.log" 2>&1 </dev/null &
	DOCKERD_PID=$!
	test_atexit 'dockerd_stop'
	for i in $(seq 1 100); do
		dkr info >/dev/null 2>&1 && return 0
		kill -0 "$DOCKERD_PID" 2>/dev/null || break
		sleep 0.1
	done
	DOCKERD_WHY="dockerd did not start: $(tail -n 3 "$d/dockerd.log" | tr '\n' ' ')"
	return 1
}

dkr() { docker -H "$DOCKERD_HOST" "$@"; }

dockerd_stop() {
	local i ids a
	[ -n "${DOCKERD_PID:-}" ] || return 0
	# its own socket: DOCKER_HOST may name another engine by now
	ids=$(docker -H "$DOCKERD_HOST" ps -aq 2>/dev/null) || true
	# shellcheck disable=SC2086
	[ -z "$ids" ] || docker -H "$DOCKERD_HOST" rm -f $ids >/dev/null 2>&1 || true
	kill -TERM "$DOCKERD_PID" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$DOCKERD_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$DOCKERD_PID" 2>/dev/null || true
	wait "$DOCKERD_PID" 2>/dev/null || true
	DOCKERD_PID=
	# what outlives it (a containerd shim whose container would not go: a paused gVisor one),
	# found by its command line naming DIR: this file's own
	for i in /proc/[0-9]*; do
		{ mapfile -d '' a <"$i/cmdline"; } 2>/dev/null || continue
		case " ${a[*]} " in *" $DOCKERD_DIR/"* | *"=$DOCKERD_DIR/"*) kill -KILL "${i#/proc/}" 2>/dev/null ;; esac
	done
	# what the data root still has mounted (a layer of a container killed with it)
	grep -F " $DOCKERD_DIR/" /proc/self/mounts | awk '{ print $2 }' | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
