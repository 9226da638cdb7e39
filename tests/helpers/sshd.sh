# Sourced by tests (and bench/docker): an sshd of the caller's own on 127.0.0.1, as root, in
# front of a private Docker Engine (tests/helpers/dockerd.sh), so that DOCKER_HOST=ssh://…
# reaches it the way a remote one is reached: `docker system dial-stdio` on the "remote" side
# finds the private engine through the DOCKER_HOST that sshd sets for the session. Its host key,
# a client key, its config, the client's config and known_hosts are made under DIR; the
# client's config is $HOME/.ssh/config (HOME is the test's), where ssh as sbx runs it reads it.
# No PAM, no passwords: the client key alone logs in, as the user running the test. TCP
# forwarding to the remote side's loopback is allowed (ssh -W 127.0.0.1:PORT: sbx's previews).
#   sshd_start DIR ENGINE [PID]
#                           ENGINE: the unix:// URL of the engine the sessions reach; PID: a
#                           process whose network namespace the sessions run in (the private
#                           dockerd's, where its published ports listen): then each connection
#                           is an `sshd -i` started there by a listener of the caller's on
#                           127.0.0.1; 1 (and a reason in SSHD_WHY) where sshd cannot start
#   SSHD_URL                ssh://USER@127.0.0.1:PORT of it, SSHD_ALIAS an alias of the client
#                           config for the same (ssh://$SSHD_ALIAS), SSHD_PORT, SSHD_PID
#   sshd_stop               stops it by its PID (registered with test_atexit when that exists)
# shellcheck shell=bash disable=SC2034 # SSHD_* are read by the sourcing file

SSHD_WHY=
SSHD_ALIAS=sbx-remote-engine

sshd_start() {
	local d=$1 engine=$2 netns=${3:-} user i port
	SSHD_DIR=$d
	if [ "$(id -u)" -ne 0 ]; then
		SSHD_WHY='sshd runs as root only'
		return 1
	fi
	if [ ! -x /usr/sbin/sshd ] || [ ! -x /usr/bin/ssh ] || [ ! -x /usr/bin/ssh-keygen ]; then
		SSHD_WHY='sshd or ssh is missing (scripts/install-deps installs openssh-server)'
		return 1
	fi
	user=$(id -un) || return 1
	mkdir -p "$d" "$HOME/.ssh" || return 1
	chmod 700 "$d" "$HOME/.ssh"
	# its privilege separation directory, made only when missing (and then removed at the end)
	SSHD_MADE_RUN=
	if [ ! -d /run/sshd ]; then
		mkdir -m 755 /run/sshd && SSHD_MADE_RUN=1
	fi
	/usr/bin/ssh-keygen -q -t ed25519 -N '' -C sbx-test-host -f "$d/host_key" </dev/null ||
		return 1
	/usr/bin/ssh-keygen -q -t ed25519 -N '' -C sbx-test-client -f "$d/id_ed25519" </dev/null ||
		return 1
	cp "$d/id_ed25519.pub" "$d/authorized_keys"
	chmod 600 "$d/authorized_keys"
	port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])') || return 1
	cat >"$d/sshd_config" <<-EOF
	Port $port
	ListenAddress 127.0.0.1
	HostKey $d/host_key
	PidFile $d/sshd.pid
	AuthorizedKeysFile $d/authorized_keys
	AllowUsers $user
	UsePAM no
	StrictModes no
	PubkeyAuthentication yes
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	PermitRootLogin prohibit-password
	AllowTcpForwarding local
	PermitOpen 127.0.0.1:*
	X11Forwarding no
	PrintMotd no
	SetEnv DOCKER_HOST=$engine
	EOF
	printf '[127.0.0.1]:%s %s\n' "$port" "$(cut -d' ' -f1,2 "$d/host_key.pub")" \
		>"$d/known_hosts"
	cat >"$HOME/.ssh/config" <<-EOF
	Host $SSHD_ALIAS
	    HostName 127.0.0.1
	    Port $port
	    User $user
	Host 127.0.0.1 $SSHD_ALIAS
	    IdentityFile $d/id_ed25519
	    IdentitiesOnly yes
	    UserKnownHostsFile $d/known_hosts
	    GlobalKnownHostsFile /dev/null
	    StrictHostKeyChecking yes
	    LogLevel ERROR
	EOF
	chmod 600 "$HOME/.ssh/config"
	if [ -z "$netns" ]; then
		/usr/sbin/sshd -D -e -f "$d/sshd_config" >"$d/sshd.log" 2>&1 </dev/null &
	else
		# inetd mode: each accepted connection is sshd's stdin and stdout, in netns's network
		python3 - "$port" "/proc/$netns/ns/net" "$d/sshd_config" >"$d/sshd.log" 2>&1 </dev/null <<-\EOF &
		import signal, socket, subprocess, sys
		signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # sessions reaped as they end
		ls = socket.socket()
		ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		ls.bind(("127.0.0.1", int(sys.argv[1])))
		ls.listen(16)
		while True:
		    c, _ = ls.accept()
		    subprocess.Popen(["/usr/bin/nsenter", "--net=" + sys.argv[2], "/usr/sbin/sshd", "-i",
		                      "-e", "-f", sys.argv[3]], stdin=c, stdout=c)
		    c.close()
		EOF
	fi
	SSHD_PID=$!
	if declare -F test_atexit >/dev/null; then
		test_atexit 'sshd_stop'
	fi
	SSHD_PORT=$port
	SSHD_URL=ssh://$user@127.0.0.1:$port
	for i in $(seq 1 100); do
		/usr/bin/ssh -F "$HOME/.ssh/config" -o BatchMode=yes -p "$port" -l "$user" \
			127.0.0.1 true </dev/null >/dev/null 2>&1 && return 0
		kill -0 "$SSHD_PID" 2>/dev/null || break
		sleep 0.1
	done
	SSHD_WHY="sshd did not start: $(tail -n 3 "$d/sshd.log" | tr '\n' ' ')"
	return 1
}

sshd_stop() {
	local i
	[ -n "${SSHD_PID:-}" ] || return 0
	# its sessions first (each a child of the listener), then the listener
	for i in $(pgrep -P "$SSHD_PID" 2>/dev/null); do
		kill -TERM "$i" 2>/dev/null || true
	done
	kill -TERM "$SSHD_PID" 2>/dev/null || true
	for i in $(seq 1 30); do
		kill -0 "$SSHD_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$SSHD_PID" 2>/dev/null || true
	wait "$SSHD_PID" 2>/dev/null || true
	SSHD_PID=
	[ -z "${SSHD_MADE_RUN:-}" ] || rmdir /run/sshd 2>/dev/null || true
	SSHD_MADE_RUN=
}
