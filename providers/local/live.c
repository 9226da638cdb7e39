/* The CLI's side of a running sandbox's liveness: sbx update's limits and --ttl (the egress
 * policy is net-ctl.c's), keepalive, and stats from the sandbox's own cgroups. */
#define _GNU_SOURCE
#include "providers/local/cgroup.h"
#include "providers/local/gvisor.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>

#include "core/json.h"
#include "core/log.h"

static const char *label_of(const struct sbx_record *rec)
{
	return rec->name ? rec->name : rec->id;
}

static bool live_state(const struct sbx_record *rec)
{
	return rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED;
}

/* DIR/FILE = text; -1 with errno */
static int write_file(const char *dir, const char *file, const char *text)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	return sbx_write_all(fd, text, strlen(text));
}

static long long read_num(const char *dir, const char *file)
{
	_cleanup_free_ char *t = dir ? local_cg_read(dir, file) : NULL;

	if (!t || !isdigit((unsigned char)t[0]))
		return -1;
	long long v = strtoll(t, NULL, 10);
	return v >= (1LL << 62) ? -1 : v;
}

/* --- update: memory and CPU limits ---------------------------------------------------------- */

/* memory limit bytes (0: none) on one cgroup directory of the sandbox. As docker update does,
 * a limit below what the sandbox holds is refused (after the kernel was asked to reclaim down
 * to it), rather than have the kernel kill inside */
static int set_memory(const struct cgroups *c, const char *dir_v2, const char *dir_v1,
		      long long bytes, const char *label, struct sbx_err *err)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", bytes > 0 ? bytes : -1LL);
	if (dir_v2 && local_cg_v2_offers(c, "memory")) {
		long long use = read_num(dir_v2, "memory.current");
		if (bytes > 0 && use > bytes) {
			char r[32];
			snprintf(r, sizeof(r), "%lld", use - bytes);
			(void)write_file(dir_v2, "memory.reclaim", r);
			use = read_num(dir_v2, "memory.current");
		}
		if (bytes > 0 && use > bytes)
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot lower the memory limit of sandbox '%s' to %lld "
					   "bytes: it uses %lld",
					   label, bytes, use);
		if (write_file(dir_v2, "memory.max", bytes > 0 ? v : "max") < 0)
			return sbx_err_errno(err, "cannot set the memory limit of sandbox '%s'",
					     label);
		return 0;
	}
	if (!dir_v1)
		return sbx_err_set(err, SBX_E_STATE,
				   "cannot change the memory limit of sandbox '%s': it has no "
				   "memory cgroup",
				   label);
	/* memsw (memory and swap) is never below the limit: raised first, lowered after */
	_cleanup_free_ char *sw = xasprintf("%s/memory.memsw.limit_in_bytes", dir_v1);
	bool has_sw = access(sw, F_OK) == 0;
	int r = write_file(dir_v1, "memory.limit_in_bytes", v);
	if (r < 0 && errno == EINVAL && has_sw) {
		(void)write_file(dir_v1, "memory.memsw.limit_in_bytes", v);
		r = write_file(dir_v1, "memory.limit_in_bytes", v);
	}
	if (r < 0 && errno == EBUSY)
		return sbx_err_set(err, SBX_E_STATE,
				   "cannot lower the memory limit of sandbox '%s' to %lld bytes: "
				   "it uses %lld",
				   label, bytes, read_num(dir_v1, "memory.usage_in_bytes"));
	if (r < 0)
		return sbx_err_errno(err, "cannot set the memory limit of sandbox '%s'", label);
	if (has_sw)
		(void)write_file(dir_v1, "memory.memsw.limit_in_bytes", v);
	return 0;
}

static int set_cpu(const struct cgroups *c, const char *dir_v2, const char *dir_v1,
		   long long millis, const char *label, struct sbx_err *err)
{
	long long period = 100000, quota = millis * period / 1000;
	char v[64];

	if (quota > 0 && quota < 1000)
		quota = 1000;
	if (dir_v2 && local_cg_v2_offers(c, "cpu")) {
		if (millis > 0)
			snprintf(v, sizeof(v), "%lld %lld", quota, period);
		else
			snprintf(v, sizeof(v), "max %lld", period);
		if (write_file(dir_v2, "cpu.max", v) < 0)
			return sbx_err_errno(err, "cannot set the CPU limit of sandbox '%s'",
					     label);
		return 0;
	}
	if (!dir_v1)
		return sbx_err_set(err, SBX_E_STATE,
				   "cannot change the CPU limit of sandbox '%s': it has no cpu "
				   "cgroup",
				   label);
	snprintf(v, sizeof(v), "%lld", period);
	(void)write_file(dir_v1, "cpu.cfs_period_us", v);
	snprintf(v, sizeof(v), "%lld", millis > 0 ? quota : -1LL);
	if (write_file(dir_v1, "cpu.cfs_quota_us", v) < 0)
		return sbx_err_errno(err, "cannot set the CPU limit of sandbox '%s'", label);
	return 0;
}

/* every thread of every process of the running sandbox on the CPUs --cpus gives it (as at
 * create: local_cpu_affinity), or, without a limit, on every CPU the caller may use */
static void set_affinity(const struct sbx_record *rec, long long millis)
{
	struct local_pids pids;
	cpu_set_t all;
	pid_t *v;

	if (local_read_pids(rec->dir, &pids) < 0 || sched_getaffinity(0, sizeof(all), &all) < 0)
		return;
	/* as many CPUs as there are, or more: every one (local_cpu_affinity leaves them as are) */
	if (millis > 0 && (millis + 999) / 1000 >= CPU_COUNT(&all))
		millis = 0;
	char p[64];
	struct stat ns, st;
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)pids.init_pid);
	if (stat(p, &ns) < 0)
		return;
	size_t n = local_ns_members(pids.init_pid, &v);
	for (size_t i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "/proc/%d/task", (int)v[i]);
		DIR *d = opendir(p);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
			if (tid <= 0)
				continue;
			/* still the sandbox's (a pid that ended meanwhile may be another's now) */
			snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)tid);
			if (stat(p, &st) < 0 || st.st_ino != ns.st_ino || st.st_dev != ns.st_dev)
				continue;
			if (millis > 0)
				local_cpu_affinity(tid, rec->id, millis);
			else
				(void)sched_setaffinity(tid, sizeof(all), &all);
		}
		if (d)
			closedir(d);
	}
	free(v);
}

/* the sandbox's directory of hierarchy role, or its leaf (NULL: none) */
static char *dir_of(const struct cgroups *cg, int role, bool leaf)
{
	if (!cg->dir[role])
		return NULL;
	return leaf ? xasprintf("%s/" LEAF_SANDBOX, cg->dir[role]) : xstrdup(cg->dir[role]);
}

/* the new limits on the sandbox's directory and on its leaf (what runtimes inside read). A v1
 * child's CPU quota may not pass its parent's: raised above first, lowered below first */
static int set_limits(const struct sbx_record *rec, const struct sbx_config *c, struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;
	const char *label = label_of(rec);
	struct cgroups cg;
	int r = 0;

	if (o->memory == c->memory && o->cpu_millis == c->cpu_millis)
		return 0;
	/* gVisor's kernel is told its memory when it boots (gvisor.c) */
	if (o->memory != c->memory && local_gvisor(rec))
		return sbx_err_set(
			err, SBX_E_STATE,
			"gVisor sandbox '%s' takes a new --memory when it boots: release "
			"it first ('sbx pause --release %s'), then update and resume it",
			label, label);
	local_cg_load(rec->dir, &cg);
	for (int k = 0; k < 2 && r == 0 && o->memory != c->memory; k++) {
		_cleanup_free_ char *v2 = dir_of(&cg, ROLE_V2, k == 1);
		_cleanup_free_ char *v1 = dir_of(&cg, ROLE_MEMORY, k == 1);
		r = set_memory(&cg, v2, v1, c->memory, label, err);
	}
	bool down = c->cpu_millis && (!o->cpu_millis || c->cpu_millis < o->cpu_millis);
	for (int k = 0; k < 2 && r == 0 && o->cpu_millis != c->cpu_millis; k++) {
		bool leaf = down ? k == 0 : k == 1;
		_cleanup_free_ char *v2 = dir_of(&cg, ROLE_V2, leaf);
		_cleanup_free_ char *v1 = dir_of(&cg, ROLE_CPU, leaf);
		r = set_cpu(&cg, v2, v1, c->cpu_millis, label, err);
	}
	local_cg_release(&cg);
	if (r == 0 && o->cpu_millis != c->cpu_millis && live_state(rec))
		set_affinity(rec, c->cpu_millis);
	return r;
}

/* the supervisor's idle timeout: from now on, counted from now (as E2B's set-timeout) */
static int set_ttl(const struct sbx_record *rec, long long ttl_ms, struct sbx_err *err)
{
	_cleanup_json_ json_t *req = json_pack("{s:s, s:I}", "op", "ttl", "ttl_ms",
					       (json_int_t)ttl_ms);
	_cleanup_json_ json_t *resp = NULL;

	local_touch_activity(rec->dir);
	if (local_ctl_call(rec, req, &resp, err) < 0)
		return -1;
	if (!json_is_true(json_object_get(resp, "ok")))
		return sbx_err_set(err, SBX_E_SYSTEM, "%s",
				   sbx_json_str(resp, "error") ?: "the supervisor refused the ttl");
	return 0;
}

int local_live_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		      struct sbx_err *err)
{
	/* nothing runs (released, stopped): the record alone, which the next boot reads */
	bool live = live_state(rec);
	_cleanup_json_ json_t *a = sbx_config_to_json(
		&(struct sbx_config){ .net = rec->config.net });
	_cleanup_json_ json_t *b = sbx_config_to_json(&(struct sbx_config){ .net = c->net });

	if (live && set_limits(rec, c, err) < 0)
		return -1;
	if (live && c->ttl_ms && c->ttl_ms != rec->config.ttl_ms &&
	    set_ttl(rec, c->ttl_ms, err) < 0)
		return -1;
	if (local_secrets_changed(rec, c) && local_secrets_update(rec, c, live, err) < 0)
		return -1;
	if (!json_equal(a, b))
		return local_update(ctx, rec, c, err);
	return 0;
}

/* --- keepalive ------------------------------------------------------------------------------ */

int local_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	(void)ctx;
	if (rec->state != SBX_STATE_RUNNING)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s: only a running sandbox is kept alive (run "
				   "'sbx resume %s' first)",
				   label_of(rec), sbx_state_name(rec->state), label_of(rec));
	local_touch_activity(rec->dir);
	return 0;
}

/* --- stats ---------------------------------------------------------------------------------- */

/* CPU time used (ns): the v2 hierarchy's cpu.stat (kept without a controller), else v1's
 * cpuacct, else the processes' own times */
static long long cpu_ns(const struct cgroups *c, const struct sbx_record *rec)
{
	if (c->dir[ROLE_V2]) {
		long long us = local_cg_key(c->dir[ROLE_V2], "cpu.stat", "usage_usec");
		if (us >= 0)
			return us * 1000;
	}
	if (c->dir[ROLE_CPU]) {
		long long ns = read_num(c->dir[ROLE_CPU], "cpuacct.usage");
		if (ns >= 0)
			return ns;
	}
	struct local_pids pids;
	pid_t *v;
	long long ticks = 0, hz = sysconf(_SC_CLK_TCK);
	if (local_read_pids(rec->dir, &pids) < 0 || hz <= 0)
		return -1;
	size_t n = local_ns_members(pids.init_pid, &v);
	for (size_t i = 0; i < n; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/stat", (int)v[i]);
		_cleanup_free_ char *t = sbx_read_file(p, 4096, NULL);
		char *q = t ? strrchr(t, ')') : NULL;
		unsigned long long ut, st;
		/* after the name: state, then 10 fields, then utime and stime */
		if (q &&
		    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			   &st) == 2)
			ticks += (long long)(ut + st);
	}
	free(v);
	return ticks * (1000000000LL / hz);
}

static json_t *num_or_null(long long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

int local_stats(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		struct sbx_err *err)
{
	struct cgroups c;
	long long mem = -1, limit = -1, pids = -1;

	(void)ctx;
	if (rec->state != SBX_STATE_RUNNING && rec->state != SBX_STATE_PAUSED)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s: nothing runs to measure",
				   label_of(rec), sbx_state_name(rec->state));
	local_cg_load(rec->dir, &c);
	/* the sandbox's directory: its processes, and its supervisor charged with them */
	if (local_cg_v2_offers(&c, "memory")) {
		mem = read_num(c.dir[ROLE_V2], "memory.current");
		limit = read_num(c.dir[ROLE_V2], "memory.max");
	} else if (c.dir[ROLE_MEMORY]) {
		mem = read_num(c.dir[ROLE_MEMORY], "memory.usage_in_bytes");
		limit = read_num(c.dir[ROLE_MEMORY], "memory.limit_in_bytes");
	}
	/* the sandbox's own processes: its leaf */
	const char *pd = local_cg_v2_offers(&c, "pids") ? c.dir[ROLE_V2] : c.dir[ROLE_PIDS];
	if (pd) {
		_cleanup_free_ char *leaf = xasprintf("%s/" LEAF_SANDBOX, pd);
		pids = read_num(leaf, "pids.current");
	}
	if (pids < 0) {
		struct local_pids lp;
		pid_t *v = NULL;
		if (local_read_pids(rec->dir, &lp) == 0)
			pids = (long long)local_ns_members(lp.init_pid, &v);
		free(v);
	}
	/* CPU: its use so far, and its share of one CPU over a tenth of a second */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long a = cpu_ns(&c, rec);
	struct timespec nap = { 0, 100000000L };
	while (nanosleep(&nap, &nap) < 0 && errno == EINTR)
		;
	long long b = cpu_ns(&c, rec);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	local_cg_release(&c);
	/* disk: the file of --disk as allocated; the sandbox's files otherwise would need a
	 * walk of a tree it can change meanwhile, which sbx does not make */
	long long disk = -1;
	_cleanup_free_ char *img = xasprintf("%s/disk.img", rec->dir);
	struct stat st;
	if (stat(img, &st) == 0)
		disk = (long long)st.st_blocks * 512;
	json_t *o = json_object();
	json_object_set_new(o, "cpu_ms", b >= 0 ? json_integer(b / 1000000) : json_null());
	json_object_set_new(o, "cpu_percent",
			    a >= 0 && b >= a && wall > 0 ? json_real((double)(b - a) * 100.0 / wall)
							 : json_null());
	json_object_set_new(o, "memory_bytes", num_or_null(mem));
	json_object_set_new(o, "memory_limit_bytes", num_or_null(limit));
	json_object_set_new(o, "pids", num_or_null(pids));
	json_object_set_new(o, "disk_bytes", num_or_null(disk));
	/* its traffic: what the supervisor's proxy relayed for it (no interface of its namespace
	 * counts it apart: the proxy listens on its loopback); unknown with --net host */
	json_t *rx = json_null(), *tx = json_null();
	_cleanup_json_ json_t *req = json_pack("{s:s}", "op", "stats"), *resp = NULL;
	struct sbx_err e = { 0 };
	if (!local_net_host(rec) && local_ctl_call(rec, req, &resp, &e) == 0 &&
	    json_is_true(json_object_get(resp, "ok"))) {
		json_t *r = json_object_get(resp, "rx_bytes"),
		       *t = json_object_get(resp, "tx_bytes");
		if (json_is_integer(r) && json_is_integer(t))
			rx = json_incref(r), tx = json_incref(t);
	}
	json_object_set_new(o, "net_rx_bytes", rx);
	json_object_set_new(o, "net_tx_bytes", tx);
	*ret = o;
	return 0;
}
