/* Freezing a running sandbox's processes and thawing them (the CLI: pause, resume, rm, look,
 * snapshot, commit; the supervisor: --ttl), the way its runtime allows.
 *
 * A writable cgroup freezer freezes every process of the sandbox, gVisor's too (its sentry, gofer
 * and stubs sit in the sandbox's cgroups). Without one, a local sandbox's processes are stopped
 * by SIGSTOP to each (state.c); a gVisor sandbox's must not be: its sentry traces its stubs
 * (the ptrace platform runs the sandbox's code in them) and does not survive stops it did not
 * make. There gVisor pauses itself (runsc pause: every task inside stops, and its CPU time
 * with it), and init alone is stopped beside it, first, and continued last: a stopped init is
 * what says the sandbox is paused (local_is_frozen), so that it is never said to run while
 * gVisor is paused; a pause or resume cut short between the two is finished by the next
 * resume (runsc resume of a sandbox that runs counts as done). */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

int local_sandbox_freeze(const struct sbx_record *rec, const struct local_pids *pids, bool freeze,
			 struct sbx_err *err)
{
	if (!local_gvisor(rec) || local_cgroup_can_freeze(rec->dir))
		return local_freeze(rec->dir, pids, freeze, err);
	if (!freeze) {
		if (local_gvisor_pause(rec, false, err) < 0)
			return -1;
		return local_freeze_init(pids, false, err);
	}
	if (local_freeze_init(pids, true, err) < 0)
		return -1;
	if (local_gvisor_pause(rec, true, err) < 0) {
		struct sbx_err ignored = { 0 };
		(void)local_freeze_init(pids, false, &ignored);
		return -1;
	}
	return 0;
}
