/* What the local sandbox's cgroups tell: inspect's memory figures and pressure, and exec's
 * line when the kernel killed a process of its command for the memory limit. */
#define _GNU_SOURCE
#include "providers/local/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "core/log.h"

/* --- what inspect shows: usage, limit, failures, pressure ---------------------------------- */

static json_t *num_or_null(long long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

/* a number file ("max" and v1's "unlimited" near 2^63 are -1) */
static long long cg_num(const char *dir, const char *file)
{
	_cleanup_free_ char *t = local_cg_read(dir, file);
	if (!t || !isdigit((unsigned char)t[0]))
		return -1;
	long long v = strtoll(t, NULL, 10);
	return v >= (1LL << 62) ? -1 : v;
}

/* "some avg10=0.12 ..." and "full avg10=..." of a PSI file */
static json_t *psi(const char *dir, const char *file)
{
	_cleanup_free_ char *t = dir ? local_cg_read(dir, file) : NULL;
	if (!t)
		return json_null();
	json_t *o = json_object();
	static const char *const kind[] = { "some", "full" };
	for (size_t i = 0; i < ARRAY_SIZE(kind); i++) {
		char key[32];
		snprintf(key, sizeof(key), "%s avg10=", kind[i]);
		const char *k = strstr(t, key);
		snprintf(key, sizeof(key), "%s_avg10", kind[i]);
		json_object_set_new(
			o, key, k ? json_real(strtod(k + strlen(kind[i]) + 7, NULL)) : json_null());
	}
	return o;
}

void local_cgroup_stats(const char *sbdir, json_t *live)
{
	struct cgroups c;
	long long usage = -1, limit = -1, failcnt = -1, high = -1, max = -1;

	local_cg_load(sbdir, &c);
	bool any = true;
	if (local_cg_v2_offers(&c, "memory")) {
		usage = cg_num(c.dir[ROLE_V2], "memory.current");
		limit = cg_num(c.dir[ROLE_V2], "memory.max");
		high = local_cg_key(c.dir[ROLE_V2], "memory.events", "high");
		max = local_cg_key(c.dir[ROLE_V2], "memory.events", "max");
	} else if (c.dir[ROLE_MEMORY]) {
		usage = cg_num(c.dir[ROLE_MEMORY], "memory.usage_in_bytes");
		limit = cg_num(c.dir[ROLE_MEMORY], "memory.limit_in_bytes");
		/* the limit hit anywhere in the sandbox: its directory and both leaves */
		static const char *const leaf[] = { "", "/" LEAF_SANDBOX, "/" LEAF_SUPERVISOR };
		for (size_t i = 0; i < ARRAY_SIZE(leaf); i++) {
			_cleanup_free_ char *d = xasprintf("%s%s", c.dir[ROLE_MEMORY], leaf[i]);
			long long f = cg_num(d, "memory.failcnt");
			if (f >= 0)
				failcnt = (failcnt < 0 ? 0 : failcnt) + f;
		}
	} else {
		any = false;
	}
	if (any) {
		json_t *m = json_object();
		json_object_set_new(m, "usage", num_or_null(usage));
		json_object_set_new(m, "limit", num_or_null(limit));
		json_object_set_new(m, "failcnt", num_or_null(failcnt));
		json_object_set_new(m, "events_high", num_or_null(high));
		json_object_set_new(m, "events_max", num_or_null(max));
		json_object_set_new(live, "memory_stats", m);
	} else {
		json_object_set_new(live, "memory_stats", json_null());
	}
	json_t *p = json_object();
	json_object_set_new(p, "memory", psi(c.dir[ROLE_V2], "memory.pressure"));
	json_object_set_new(p, "cpu", psi(c.dir[ROLE_V2], "cpu.pressure"));
	json_object_set_new(live, "pressure", c.dir[ROLE_V2] ? p : json_null());
	if (!c.dir[ROLE_V2])
		json_decref(p);
	local_cg_release(&c);
}

/* --- exec's OOM report -------------------------------------------------------------------- */

/* the sum of the oom_kill counters open in w; -1 when none is */
static long long oom_count(const struct local_oom_watch *w)
{
	long long n = -1;

	for (int i = 0; i < 3; i++) {
		char buf[1024];
		ssize_t r = w->fd[i] >= 0 ? pread(w->fd[i], buf, sizeof(buf) - 1, 0) : -1;
		if (r <= 0)
			continue;
		buf[r] = 0;
		const char *k = strstr(buf, "oom_kill ");
		if (k && (k == buf || k[-1] == '\n'))
			n = (n < 0 ? 0 : n) + strtoll(k + 9, NULL, 10);
	}
	return n;
}

/* the OOM kill counters of the sandbox: v2's memory.events of its directory (which counts its
 * leaves' kills), or v1's memory.oom_control of the directory and each leaf */
void local_cgroup_oom_watch(const char *sbdir, long long limit, struct local_oom_watch *w)
{
	struct cgroups c;

	memset(w, 0, sizeof(*w));
	w->fd[0] = w->fd[1] = w->fd[2] = -1;
	w->limit = limit;
	local_cg_load(sbdir, &c);
	if (local_cg_v2_offers(&c, "memory")) {
		_cleanup_free_ char *p = xasprintf("%s/memory.events", c.dir[ROLE_V2]);
		w->fd[0] = open(p, O_RDONLY | O_CLOEXEC);
	} else if (c.dir[ROLE_MEMORY]) {
		static const char *const leaf[] = { "", "/" LEAF_SANDBOX, "/" LEAF_SUPERVISOR };
		for (size_t i = 0; i < ARRAY_SIZE(leaf); i++) {
			_cleanup_free_ char *p = xasprintf("%s%s/memory.oom_control",
							   c.dir[ROLE_MEMORY], leaf[i]);
			w->fd[i] = open(p, O_RDONLY | O_CLOEXEC);
		}
	}
	local_cg_release(&c);
	w->before = -1;
	for (int i = 0; i < 3; i++)
		if (w->fd[i] >= 0)
			w->before = 0;
	w->procfd = w->before < 0 ? -1 : open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	w->before = oom_count(w);
}

void local_cgroup_oom_pid(struct local_oom_watch *w, pid_t pid)
{
	char p[64];

	if (w->procfd < 0)
		return;
	/* the innermost of NSpid: the pid the sandbox's ps shows */
	snprintf(p, sizeof(p), "%d/status", (int)pid);
	_cleanup_close_ int fd = openat(w->procfd, p, O_RDONLY | O_CLOEXEC);
	char buf[4096];
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return;
	buf[n] = 0;
	char *l = strstr(buf, "\nNSpid:");
	if (!l)
		return;
	l += 7;
	char *end = strchrnul(l, '\n');
	*end = 0;
	char *last = strrchr(l, '\t');
	w->pid = (pid_t)strtol(last ? last + 1 : l, NULL, 10);
}

bool local_cgroup_oom_say(struct local_oom_watch *w, const char *label, const char *cmd, int st)
{
	long long after = oom_count(w);
	bool killed = w->before >= 0 && after > w->before;

	if (w->before >= 0 && after > w->before) {
		char lim[64] = "";
		if (w->limit > 0 && w->limit % (1LL << 20) == 0)
			snprintf(lim, sizeof(lim), " (--memory %lldm)", w->limit >> 20);
		else if (w->limit > 0)
			snprintf(lim, sizeof(lim), " (--memory %lld)", w->limit);
		const char *base = strrchr(cmd, '/');
		base = base && base[1] ? base + 1 : cmd;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && w->pid > 0)
			sbx_warn("sandbox '%s' is out of memory%s: the kernel killed the command "
				 "'%s' (pid %d)",
				 label, lim, base, (int)w->pid);
		else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			sbx_warn("sandbox '%s' is out of memory%s: the kernel killed the command "
				 "'%s'",
				 label, lim, base);
		else
			sbx_warn("sandbox '%s' is out of memory%s: the kernel killed a process "
				 "of the command",
				 label, lim);
	}
	for (int i = 0; i < 3; i++)
		if (w->fd[i] >= 0)
			close(w->fd[i]);
	if (w->procfd >= 0)
		close(w->procfd);
	memset(w, 0, sizeof(*w));
	w->fd[0] = w->fd[1] = w->fd[2] = w->procfd = -1;
	return killed;
}

void local_exec_result(struct sbx_exec_result *r, const struct rusage *ru, int st, bool timed_out)
{
	r->cpu_ms = (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e3 +
		(double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e3;
	r->peak_memory = (long long)ru->ru_maxrss * 1024; /* KiB: of the largest process */
	r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	r->timed_out = timed_out;
}
