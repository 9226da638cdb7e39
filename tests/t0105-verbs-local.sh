#!/bin/bash
# The verb checks every provider and runtime passes (tests/helpers/verbs.sh), against the local
# provider, on the host's system.
# shellcheck source=tests/lib.sh disable=SC2034 # VERBS_* are read by verbs.sh
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/helpers/verbs.sh"
test_skip_unless USERNS python3

if [ "$(id -u)" -ne 0 ]; then
	VERBS_SKIP="user"
	VERBS_WHY_user="an ordinary user's sandbox maps its own uid alone unless /etc/subuid gives it more (t0160)"
fi
verbs_suite local
test_done
