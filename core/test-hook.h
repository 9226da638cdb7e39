/* Test-only crash points (SBX_TEST_CRASH_AT=NAME: sbx SIGKILLs itself at step NAME) and faults. */
#ifndef SBX_CORE_TEST_HOOK_H
#define SBX_CORE_TEST_HOOK_H

#include <signal.h>
#include <stdbool.h>
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

/* Test-only faults: SBX_TEST_FAIL_AT=NAME makes step NAME fail as a full disk would (ENOSPC) */
static inline bool sbx_test_fail(const char *step)
{
	const char *at = getenv("SBX_TEST_FAIL_AT");

	return at && strcmp(at, step) == 0;
}

/* Test-only holds: SBX_TEST_HOLD_AT=NAME makes step NAME wait while the file named by
 * SBX_TEST_HOLD_FILE exists (at most a minute), so that a test can look at what is half done */
static inline void sbx_test_hold(const char *step)
{
	const char *at = getenv("SBX_TEST_HOLD_AT"), *file = getenv("SBX_TEST_HOLD_FILE");

	if (!at || !file || strcmp(at, step) != 0)
		return;
	for (int i = 0; i < 600 && access(file, F_OK) == 0; i++)
		usleep(100000);
}

#endif
