#!/bin/bash
# The docker provider against Podman's API service run rootless: `podman system service` as
# the test's ordinary uid, in a user namespace of its own with the subordinate ids run.sh grants
# that uid (tests/helpers/podman.sh): the shared verb checks, exec -u of another uid (mapped
# through them), and what rootless Podman cannot do here said in one line. As root the file
# skips: root's Podman service is t0721's.
# run.sh: subordinate ids for the uid pass
# shellcheck disable=SC2016,SC2317 # lib.sh evals the single-quoted bodies, which call the helpers
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
. "$TEST_DIR/helpers/podman.sh"

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
if [ "$(id -u)" -eq 0 ]; then
	TEST_SKIP_ALL="rootless Podman runs as an ordinary user (root's Podman service: t0721)"
elif ! "$SBX" provider ls 2>/dev/null | grep -q "^docker "; then
	TEST_SKIP_ALL="this sbx has no docker provider"
elif ! podman_start "$TRASH/podman"; then
	TEST_SKIP_ALL=$PODMAN_WHY
fi
export DOCKER_HOST=${PODMAN_HOST:-}

cid() { sbx inspect "$1" | "$TEST_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["provider_id"])'; }

test_expect_success 'set-up: a busybox image in the rootless service' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	pdm load -q -i base.tar >/dev/null
'

test_expect_success 'rootless: the service is this uid, its containers in a user namespace it maps' '
	test_eq true "$(pdm info --format "{{.Host.Security.Rootless}}" 2>/dev/null)" &&
	sbx create --provider docker --image base:1 --name rl >/dev/null &&
	pdm ps --format "{{.ID}}" --no-trunc >ps && test_grep "$(cid rl)" ps &&
	sbx exec rl cat /proc/self/uid_map >map &&
	test_grep -E "^ +0 +$(id -u) +1$" map &&
	test_eq 0 "$(sbx exec rl id -u)"
'

test_expect_success 'rootless: exec -u of another uid runs as that uid (a subordinate id outside)' '
	if ! grep -q "^$(id -u):" /etc/subuid 2>/dev/null; then
		echo "no subordinate ids for uid $(id -u) in /etc/subuid (tests/run.sh grants some)"
		false
	fi &&
	test_eq 1000 "$(sbx exec -u 1000 rl id -u)" &&
	sbx exec rl cat /proc/self/uid_map >map && test_eq 2 "$(wc -l <map)"
'

test_expect_success 'rootless: --net open cannot be had here (no slirp4netns): one line, nothing left' '
	expect_code 125 sbx create --provider docker --image base:1 --name opn --net open 2>err &&
	test_eq 1 "$(wc -l <err)" && test_grep "^sbx: error: " err &&
	expect_code 125 sbx inspect opn 2>/dev/null &&
	test_eq 1 "$(pdm ps -aq | wc -l)"
'

# the freezer of cgroup v1 is not the user's: a rootless container cannot be paused here
VERBS_SKIP="pause-memory"
VERBS_WHY_pause_memory="rootless Podman on cgroup v1 has no freezer of its own (checked below)"
VERBS_MORE="start-fail timeout-procs"
verbs_suite podman-rootless --provider docker --image base:1

test_expect_success 'rootless: pause refused in one line, the sandbox running on; rm removes the container' '
	expect_code 125 sbx pause rl 2>err && test_eq 1 "$(wc -l <err)" &&
	test_eq running "$(sb_state rl)" && test_eq ok "$(sbx exec rl echo ok)" &&
	sbx rm -f rl >/dev/null && test -z "$(pdm ps -aq)" && test -z "$(sbx ls -q)"
'

test_done
