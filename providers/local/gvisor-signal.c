/* Signals to processes inside a gVisor sandbox (the CLI, exec's watcher, jobs.c): never to
 * runsc's clients on the host, whose end leaves what they started running. runsc kill --pid
 * reaches one process through the sentry; a process group is reached from inside, by the
 * sandbox's own sh's kill, run by runsc exec (gVisor starts each exec'd command as the leader
 * of a session and group of its own); every process but gVisor's init the same way. Pause
 * without a cgroup freezer (the CLI, the supervisor's --ttl) is gVisor's own, runsc pause:
 * nothing of gVisor's on the host is signalled behind its sentry's back. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "core/json.h"
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

/* runsc args, a client call of base, waited for at most ms (a sentry that does not answer
 * would hold the sandbox's lock forever; then it is killed): its wait status, -2 when it timed
 * out, -1 when it could not run (err); its stdout and stderr in out (len bytes at most) */
static int client_call(const struct local_runsc *base, char *const *args, long long ms, char *out,
		       size_t len, struct sbx_err *err)
{
	struct local_runsc r = *base;
	int p[2];
	size_t n = 0;
	bool late = false;

	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot make a pipe");
	r.fd[0] = -1;
	r.fd[1] = r.fd[2] = p[1];
	pid_t pid = local_runsc_spawn(&r, args, err);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	long long deadline = sbx_now_ms() + ms;
	for (;;) {
		long long left = deadline - sbx_now_ms();
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		int pr = left > 0 ? poll(&pf, 1, left > INT_MAX ? INT_MAX : (int)left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			late = true; /* timed out (or cannot wait): ended */
			break;
		}
		char buf[512];
		ssize_t got = read(p[0], buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		size_t k = (size_t)got < len - 1 - n ? (size_t)got : len - 1 - n;
		memcpy(out + n, buf, k);
		n += k;
	}
	close(p[0]);
	out[n] = 0;
	if (late)
		(void)kill(pid, SIGKILL); /* runsc itself dies with it (its parent-death signal) */
	int st = local_runsc_wait(pid);
	return late ? -2 : st;
}

/* the last line of runsc's output, or none */
static const char *last_line(char *out, const char *none)
{
	size_t n = strlen(out);

	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
		out[--n] = 0;
	char *nl = strrchr(out, '\n');
	return nl ? nl + 1 : n ? out : none;
}

/* what runsc state says of the sandbox ("running", "paused", ...: the OCI state's status), in
 * status (len bytes); -1 when it cannot tell */
static int runsc_status(const struct local_runsc *r, const char *id, char *status, size_t len)
{
	char out[4096];
	struct sbx_err e = { 0 };
	char *args[] = { "state", (char *)id, NULL };

	if (client_call(r, args, 60000, out, sizeof(out), &e) != 0)
		return -1;
	json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
	const char *s = json_string_value(json_object_get(j, "status"));
	if (s)
		snprintf(status, len, "%s", s);
	json_decref(j);
	return s ? 0 : -1;
}

int local_gvisor_pause(const struct sbx_record *rec, bool pause, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	const char *verb = pause ? "pause" : "resume";
	struct local_runsc r;
	char out[2048], status[32];

	if (local_gvisor_client(rec, &r, err) < 0)
		return -1;
	/* runsc saves the state where run recorded it */
	r.own_root = true;
	char *args[] = { (char *)verb, (char *)rec->id, NULL };
	int st = client_call(&r, args, 60000, out, sizeof(out), err);
	if (st == 0)
		return 0;
	if (st == -1)
		return -1;
	/* already so: a pause or resume of it that was cut short */
	if (runsc_status(&r, rec->id, status, sizeof(status)) == 0 &&
	    streq(status, pause ? "paused" : "running"))
		return 0;
	if (st == -2)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot %s gVisor sandbox '%s': runsc %s did not return within "
				   "60 s",
				   verb, label, verb);
	return sbx_err_set(err, SBX_E_SYSTEM, "cannot %s gVisor sandbox '%s': runsc %s failed: %s",
			   verb, label, verb, last_line(out, "no message"));
}

int local_gvisor_stop_all(const struct sbx_record *rec, long long grace_ms, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_runsc r;
	char out[512], script[320];

	if (local_gvisor_client(rec, &r, err) < 0)
		return -1;
	/* every process but gVisor's init and this sh, then a look every 50 ms (every second
	 * where sleep takes no fraction) for grace_ms: timed inside, so that runsc's client ends
	 * on its own (one killed leaves a zombie in the sandbox's pid namespace for the host's
	 * init to reap, which the end of the namespace waits for) */
	snprintf(script, sizeof(script),
		 "kill -s TERM -- -1 2>/dev/null; n=%lld; "
		 "while [ $n -gt 0 ] && kill -s 0 -- -1 2>/dev/null; do "
		 "if sleep 0.05 2>/dev/null; then n=$((n - 1)); else sleep 1; n=$((n - 20)); fi; "
		 "done; exit 0",
		 grace_ms / 50 > 0 ? grace_ms / 50 : 1);
	char *args[] = { "exec", "--cwd=/", (char *)rec->id, "/bin/sh", "-c", script, NULL };
	int st = client_call(&r, args, grace_ms + 10000, out, sizeof(out), err);
	if (st == 0 || st == -2)
		return 0;
	if (st == -1)
		return -1;
	return sbx_err_set(err, SBX_E_SYSTEM,
			   "cannot stop the processes of gVisor sandbox '%s' (no /bin/sh to run "
			   "kill there, or runsc failed)",
			   label);
}
