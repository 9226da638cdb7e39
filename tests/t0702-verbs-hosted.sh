#!/bin/bash
# The verb checks every provider passes (tests/helpers/verbs.sh), against the E2B and Daytona
# fakes (tests/fakes/): what each provider's API can do, with the reason for what it cannot.
# run.sh: both passes at once
# run.sh: in the waiting lane
# shellcheck disable=SC2034 # VERBS_* are read by verbs.sh
# E2B: pause --release is a pause without memory (state paused); cp of a paused one is refused
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"

test_skip_unless USERNS curl

if [ -z "$TEST_SKIP_ALL" ]; then
	start_fake e2b || TEST_SKIP_ALL="the E2B fake did not start"
	E2B_URL=${FAKE_URL:-}
	start_fake daytona --start-delay 0.2 || TEST_SKIP_ALL="the Daytona fake did not start"
	DAYTONA_URL=${FAKE_URL:-}
fi
export E2B_API_KEY=e2b_test_key SBX_E2B_API_URL=${E2B_URL:-} SBX_E2B_SANDBOX_URL=${E2B_URL:-}
export DAYTONA_API_KEY=dtn_test_key SBX_DAYTONA_API_URL=${DAYTONA_URL:-}
unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN DAYTONA_API_URL DAYTONA_SERVER_URL DAYTONA_TARGET \
	SBX_REMOTE_TIMEOUT

VERBS_SKIP="user" VERBS_PAUSED_CP=0 VERBS_RELEASED=paused
VERBS_WHY_user="E2B runs commands as its template's named users (exec -u user), not by uid"
verbs_suite e2b --provider e2b
VERBS_SKIP="stdin binary user pause-memory" VERBS_PAUSED_CP=1 VERBS_RELEASED='released|stopped'
VERBS_WHY_binary="Daytona's API answers a command's output as a JSON string: bytes that are not UTF-8 do not come back as sent (NUL does)"
VERBS_WHY_stdin="Daytona's API takes no stdin (exec -i is refused: t0710)"
VERBS_WHY_user="Daytona's API runs commands as the sandbox's user (exec -u is refused: t0710)"
VERBS_WHY_pause_memory="Daytona stops a sandbox: no pause that keeps memory (t0710)"
verbs_suite daytona --provider daytona
test_done
