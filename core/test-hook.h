/* Test-only crash points: SBX_TEST_CRASH_AT=NAME makes sbx SIGKILL itself at step NAME. */
#ifndef SBX_CORE_TEST_HOOK_H
#define SBX_CORE_TEST_HOOK_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void sbx_test_hook(const char *step)
{
	const char *at = getenv("SBX_TEST_CRASH_AT");

	if (at && strcmp(at, step) == 0) {
		/* a pid namespace's init ignores even its own SIGKILL */
		if (getpid() == 1)
			_exit(137);
		kill(getpid(), SIGKILL);
	}
}

#endif
