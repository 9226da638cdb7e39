# shellcheck shell=bash
# A loopback OCI registry for the image tests: Debian's docker-registry (distribution 2.8) on a
# free 127.0.0.1 port, its storage, config and log under the test's trash, so it works as root
# and as any uid. Source it after tests/lib.sh, and call the functions at the TOP LEVEL of the
# test file (a test body is a subshell: its variables and test_atexit calls would be lost).
#
#   registry_start NAME [--htpasswd USER:PASS] [--token USER:PASS] [--token-anonymous]
#       Starts a registry. --htpasswd: basic auth for USER (a bcrypt htpasswd file, made by
#       htpasswd -B or python3's crypt). --token: bearer auth through tests/helpers/tokensrv.py
#       (an RSA key and a self-signed certificate made here with openssl), USER:PASS gets push
#       and pull, and with --token-anonymous anyone gets pull. On success sets
#         REG_PORT  REG_PID  REG_DIR  REG_LOG (the registry's log: one access-log line per
#         request)  REG_USER REG_PASS (or empty)  TOK_PORT TOK_LOG (token server, or empty)
#       and registers their killing (by pid) with test_atexit. 1 with the log on failure.
#   registry_push OCIDIR TAG REF [skopeo copy options, such as --dest-creds USER:PASS]
#       skopeo copy --all oci:OCIDIR:TAG docker://REF over plain HTTP; the digests are kept
#       (--preserve-digests) unless a --format converts the image
#   registry_blob_gets LOG   how many blob GETs (not HEADs) LOG shows
#   REGISTRY_NETNS=PID       (set before registry_start) the registry listens on the loopback of
#       that process's network namespace (a private dockerd's), and reg_up and registry_push
#       reach it there
#   authproxy_start NAME UPSTREAM_PORT [authproxy.py options]
#       Starts tests/helpers/authproxy.py in front of 127.0.0.1:UPSTREAM_PORT; sets
#       PROXY_PORT PROXY_ALT_PORT PROXY_PID PROXY_LOG and registers its killing.
# shellcheck disable=SC2034 # the REG_* and PROXY_* variables are for the sourcing file

REGISTRY_BIN=${REGISTRY_BIN:-/usr/bin/docker-registry}
REGISTRY_HELPERS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# reg_in CMD...: CMD where the registry listens (REGISTRY_NETNS)
reg_in() {
	if [ -n "${REGISTRY_NETNS:-}" ]; then
		nsenter --net="/proc/$REGISTRY_NETNS/ns/net" "$@"
	else
		"$@"
	fi
}

# reg_up PORT: the registry answers /v2/ (200, or 401 when it wants credentials)
reg_up() {
	local code
	code=$(reg_in curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/v2/")
	[ "$code" = 200 ] || [ "$code" = 401 ]
}

# reg_htpasswd FILE USER PASS: a bcrypt entry, as docker-registry wants
reg_htpasswd() {
	if command -v htpasswd >/dev/null; then
		htpasswd -Bbn "$2" "$3" >"$1"
	else
		"$TEST_PYTHON" - "$1" "$2" "$3" <<-\EOF
		import crypt, sys
		h = crypt.crypt(sys.argv[3], crypt.mksalt(crypt.METHOD_BLOWFISH))
		open(sys.argv[1], "w").write("%s:%s\n" % (sys.argv[2], h))
		EOF
	fi
}

registry_start() {
	local name=$1 basic='' token='' anon='' dir port pid i try auth=''
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--htpasswd) basic=$2; shift 2 ;;
		--token) token=$2; shift 2 ;;
		--token-anonymous) anon=--anonymous-pull; shift ;;
		*) say "registry_start: unknown option $1" >&2; return 1 ;;
		esac
	done
	dir=$TRASH/registry-$name
	mkdir -p "$dir/data" || return 1
	REG_DIR=$dir REG_LOG=$dir/registry.log REG_USER='' REG_PASS='' TOK_PORT='' TOK_LOG=''
	if [ -n "$basic" ]; then
		REG_USER=${basic%%:*} REG_PASS=${basic#*:}
		reg_htpasswd "$dir/htpasswd" "$REG_USER" "$REG_PASS" || return 1
		auth="auth:
  htpasswd:
    realm: sbx-test-$name
    path: $dir/htpasswd"
	elif [ -n "$token" ]; then
		REG_USER=${token%%:*} REG_PASS=${token#*:}
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/token.key" \
			-out "$dir/token.pem" -days 2 -subj /CN=sbx-test-token >"$dir/openssl.log" 2>&1 ||
			{ cat "$dir/openssl.log" >&2; return 1; }
		TOK_LOG=$dir/token.log
		"$TEST_PYTHON" "$REGISTRY_HELPERS/tokensrv.py" --key "$dir/token.key" \
			--port-file "$dir/token.port" --user "$token" $anon --log "$TOK_LOG" \
			--lifetime 900 2>>"$dir/token.err" &
		pid=$!
		test_atexit "stop_pid $pid"
		wait_until 10 test -s "$dir/token.port" || { cat "$dir/token.err" >&2; return 1; }
		TOK_PORT=$(cat "$dir/token.port")
		auth="auth:
  token:
    realm: http://127.0.0.1:$TOK_PORT/token
    service: sbx-test
    issuer: sbx-test-issuer
    rootcertbundle: $dir/token.pem"
	fi
	# a free port may be taken between the probe and the bind: a few tries
	for try in 1 2 3; do
		port=$(free_port)
		cat >"$dir/config.yml" <<-EOF
		version: 0.1
		log:
		  level: info
		  formatter: text
		  accesslog:
		    disabled: false
		storage:
		  filesystem:
		    rootdirectory: $dir/data
		  delete:
		    enabled: true
		  maintenance:
		    uploadpurging:
		      enabled: false
		http:
		  addr: 127.0.0.1:$port
		  secret: sbx-test-secret-$RANDOM$RANDOM
		$auth
		EOF
		# (nsenter execs it: the pid is the registry's own)
		${REGISTRY_NETNS:+nsenter --net=/proc/$REGISTRY_NETNS/ns/net} \
			"$REGISTRY_BIN" serve "$dir/config.yml" >>"$REG_LOG" 2>&1 &
		pid=$!
		test_atexit "stop_pid $pid"
		for i in $(seq 1 100); do
			reg_up "$port" && break
			pid_alive "$pid" || break
			sleep 0.1
		done
		if pid_alive "$pid" && reg_up "$port"; then
			REG_PORT=$port REG_PID=$pid
			return 0
		fi
		stop_pid "$pid"
	done
	say "registry_start $name: docker-registry did not come up:" >&2
	tail -n 20 "$REG_LOG" >&2
	return 1
}

registry_push() {
	local dir=$1 tag=$2 ref=$3 keep=--preserve-digests
	shift 3
	case " $* " in *" --format "*) keep= ;; esac # a conversion changes the digests
	# skopeo's credentials file of the test's own: the default one, under /run/containers/UID,
	# cannot even be looked for by an ordinary user once root's podman made /run/containers 0700
	reg_in env REGISTRY_AUTH_FILE="$TRASH/.skopeo-auth.json" \
		timeout 60 skopeo --insecure-policy copy -q --all --dest-tls-verify=false $keep "$@" \
		"oci:$dir:$tag" "docker://$ref"
}

registry_blob_gets() {
	grep -c '"GET /v2/[^ ]*/blobs/sha256:' "$1" || true
}

authproxy_start() {
	local name=$1 up=$2 dir pid
	shift 2
	dir=$TRASH/proxy-$name
	mkdir -p "$dir" || return 1
	PROXY_LOG=$dir/proxy.log
	"$TEST_PYTHON" "$REGISTRY_HELPERS/authproxy.py" --upstream "127.0.0.1:$up" \
		--ready "$dir/ready" --log "$PROXY_LOG" --lifetime 900 "$@" 2>>"$dir/proxy.err" &
	pid=$!
	test_atexit "stop_pid $pid"
	wait_until 10 test -s "$dir/ready" || { cat "$dir/proxy.err" >&2; return 1; }
	PROXY_PID=$pid
	PROXY_PORT=$(sed -n 's/^port=//p' "$dir/ready")
	PROXY_ALT_PORT=$(sed -n 's/^alt=//p' "$dir/ready")
	PROXY_ALT_HOST=$(sed -n 's/^althost=//p' "$dir/ready")
}
