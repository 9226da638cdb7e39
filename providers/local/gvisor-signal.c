/* Signals to processes inside a gVisor sandbox (the CLI, exec's watcher, jobs.c): never to
 * runsc's clients on the host, whose end leaves what they started running. runsc kill --pid
 * reaches one process through the sentry; a process group is reached from inside, by the
 * sandbox's own sh's kill, run by runsc exec (gVisor starts each exec'd command as the leader
 * of a session and group of its own); every process but gVisor's init the same way. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <signal.h>
#include <sys/wait.h>

#include "core/proc.h"

int local_gvisor_client(const struct sbx_record *rec, struct local_runsc *r, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;
	struct local_idmap m;

	if (local_read_pids(rec->dir, &pids) < 0 || !sbx_proc_alive(pids.init_pid, pids.init_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running", label);
	local_idmap_of(rec, &m);
	*r = (struct local_runsc){ .dir = rec->dir,
				   .init = pids.init_pid,
				   .map_range = m.kind != LOCAL_MAP_SELF,
				   .net_none = local_gvisor_netstack(&rec->config),
				   .client = true,
				   .fd = { -1, -1, -1 } };
	return 0;
}

/* sig inside gVisor to the command n (LOCAL_GVISOR_LEADER: runsc kill --pid, through the sentry) and to
 * its process group (LOCAL_GVISOR_GROUP: the sandbox's sh, or n alone when it left its group), each a
 * client call of its own, run at once; waited for. The group falls back on runsc kill when no
 * sh could run. 0 delivered, 1 nothing left to signal, -1 when it could not be sent */
int local_gvisor_signal_in(const struct local_runsc *base, const char *id, pid_t n, int sig,
			   unsigned how)
{
	struct local_runsc r = *base;
	struct sbx_err e = { 0 };
	char pidarg[32], sigarg[16], script[128];
	pid_t kp = -1, gp = -1;

	r.fd[0] = r.fd[1] = r.fd[2] = -1;
	snprintf(pidarg, sizeof(pidarg), "--pid=%d", (int)n);
	snprintf(sigarg, sizeof(sigarg), "%d", sig);
	snprintf(script, sizeof(script),
		 "kill -s %d -- -%d 2>/dev/null || kill -s %d %d 2>/dev/null", sig, (int)n, sig,
		 (int)n);
	char *group[] = { "exec", "--cwd=/", (char *)id, "/bin/sh", "-c", script, NULL };
	char *leader[] = { "kill", pidarg, (char *)id, sigarg, NULL };
	if (how & LOCAL_GVISOR_GROUP)
		gp = local_runsc_spawn(&r, group, &e);
	if (how & LOCAL_GVISOR_LEADER)
		kp = local_runsc_spawn(&r, leader, &e);
	int gs = gp > 0 ? local_runsc_wait(gp) : -1;
	int ks = kp > 0 ? local_runsc_wait(kp) : -1;
	if (gs >= 0 && WIFEXITED(gs) && WEXITSTATUS(gs) <= 1) /* sh ran: 1 is nothing left */
		return ks == 0 ? 0 : WEXITSTATUS(gs);
	if (ks < 0 && (how & LOCAL_GVISOR_GROUP)) { /* no sh: the command itself */
		kp = local_runsc_spawn(&r, leader, &e);
		ks = kp > 0 ? local_runsc_wait(kp) : -1;
	}
	return ks == 0 ? 0 : -1;
}

int local_gvisor_signal(const struct sbx_record *rec, pid_t inner, int sig, struct sbx_err *err)
{
	struct local_runsc r;

	if (local_gvisor_client(rec, &r, err) < 0)
		return -1;
	int n = local_gvisor_signal_in(&r, rec->id, inner, sig, LOCAL_GVISOR_GROUP);
	if (n < 0)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot signal process %d in gVisor sandbox '%s' (runsc failed)",
				   (int)inner, rec->name ? rec->name : rec->id);
	return n;
}

int local_gvisor_kill_all(const struct sbx_record *rec, int sig, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_runsc r;
	struct sbx_err e = { 0 };
	char script[64];

	if (local_gvisor_client(rec, &r, err) < 0)
		return -1;
	/* kill(-1) inside: every process but gVisor's init (the sandbox's sleeper) and sh */
	snprintf(script, sizeof(script), "kill -s %d -- -1 2>/dev/null; exit 0", sig);
	char *args[] = { "exec", "--cwd=/", (char *)rec->id, "/bin/sh", "-c", script, NULL };
	pid_t p = local_runsc_spawn(&r, args, &e);
	int st = p > 0 ? local_runsc_wait(p) : -1;
	if (st != 0)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot signal the processes of gVisor sandbox '%s' (no /bin/sh "
				   "to run kill there, or runsc failed)",
				   label);
	return 0;
}
