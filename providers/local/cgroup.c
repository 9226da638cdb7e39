/* The local sandbox's cgroups: v2, v1, or the hybrid of both; limits, freezing, OOM counts.
 *
 * A sandbox gets one directory per hierarchy it can write, named sbx/ID under the hierarchy's
 * root (run by root) or under the nearest writable ancestor of the caller's own cgroup (a
 * delegated v2 subtree). The directories are listed in the sandbox's `cgroups` file, one
 * "ROLE PATH" line each, ROLE being v2 (the unified hierarchy: freezing, and the controllers it
 * offers) or a v1 controller (memory, pids, cpu, freezer); the list is written before any
 * directory is made, so whatever was made, rm finds.
 *
 * The limits are set on sbx/ID. Under it, sbx/ID/sandbox holds init and every process of the
 * sandbox (and is what pause freezes); sbx/ID/supervisor holds the supervisor, whose work for
 * the sandbox (its proxy, its previews) is so charged to the sandbox's memory, pids and CPU. */
#define _GNU_SOURCE
#include "providers/local/cgroup.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ctype.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "core/log.h"
#include "core/test-hook.h"

static const char *const role_name[N_ROLES] = { "v2", "memory", "pids", "cpu", "freezer" };

/* --- small file helpers ------------------------------------------------------------------- */

static int cg_write(const char *dir, const char *file, const char *text)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return sbx_write_file(p, text);
}

char *local_cg_read(const char *dir, const char *file)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return sbx_read_file(p, 65536, NULL);
}

/* "KEY N" in a flat keyed file (memory.events, cgroup.events, memory.oom_control); -1 absent */
long long local_cg_key(const char *dir, const char *file, const char *key)
{
	_cleanup_free_ char *t = local_cg_read(dir, file);
	size_t kl = strlen(key);

	for (char *l = t; l && *l;) {
		char *nl = strchrnul(l, '\n');
		if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
			return strtoll(l + kl + 1, NULL, 10);
		l = *nl ? nl + 1 : nl;
	}
	return -1;
}

static bool cg_has(const char *dir, const char *file)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	return access(p, F_OK) == 0;
}

/* --- discovery ---------------------------------------------------------------------------- */

struct hier {
	char *mount; /* where the hierarchy is mounted */
	char *own;   /* the caller's cgroup in it, relative to the mount ("" for its root) */
};

/* the caller's cgroup in a hierarchy: "0::/x" for v2, "N:a,b:/x" for v1 controller c */
static char *own_cgroup(const char *controller)
{
	_cleanup_free_ char *t = sbx_read_file("/proc/self/cgroup", 1 << 16, NULL);

	for (char *l = t; l && *l;) {
		char *nl = strchrnul(l, '\n');
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 && c2 < nl) {
			bool match;
			if (!controller) {
				match = c2 == c1 + 1 && strncmp(l, "0:", 2) == 0;
			} else {
				_cleanup_free_ char *list = xstrndup(c1 + 1, (size_t)(c2 - c1 - 1));
				match = false;
				char *save = NULL;
				for (char *w = strtok_r(list, ",", &save); w;
				     w = strtok_r(NULL, ",", &save))
					if (streq(w, controller))
						match = true;
			}
			if (match) {
				char *path = xstrndup(c2 + 1, (size_t)(nl - c2 - 1));
				if (streq(path, "/"))
					path[0] = 0;
				return path;
			}
		}
		l = *nl ? nl + 1 : nl;
	}
	return NULL;
}

/* the mount of the v2 hierarchy (controller NULL) or of a v1 controller, from mountinfo */
static bool find_hier(const char *controller, struct hier *h)
{
	_cleanup_free_ char *t = sbx_read_file("/proc/self/mountinfo", 1 << 20, NULL);

	for (char *l = t; l && *l;) {
		char *nl = strchrnul(l, '\n');
		_cleanup_free_ char *line = xstrndup(l, (size_t)(nl - l));
		l = *nl ? nl + 1 : nl;
		char *f[6] = { 0 }, *save = NULL, *w = strtok_r(line, " ", &save);
		for (int i = 0; i < 6 && w; i++, w = strtok_r(NULL, " ", &save))
			f[i] = w;
		if (!f[4])
			continue;
		/* after the optional fields: "- FSTYPE SOURCE SUPEROPTS" */
		char *dash = w;
		while (dash && !streq(dash, "-"))
			dash = strtok_r(NULL, " ", &save);
		char *fstype = dash ? strtok_r(NULL, " ", &save) : NULL;
		char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
		char *super = source ? strtok_r(NULL, " ", &save) : NULL;
		if (!super || !streq(f[3], "/"))
			continue; /* only hierarchies mounted from their root */
		bool match = false;
		if (!controller) {
			match = streq(fstype, "cgroup2");
		} else if (streq(fstype, "cgroup")) {
			char *s2 = NULL;
			for (char *o = strtok_r(super, ",", &s2); o; o = strtok_r(NULL, ",", &s2))
				if (streq(o, controller))
					match = true;
		}
		if (!match)
			continue;
		h->mount = xstrdup(f[4]);
		h->own = own_cgroup(controller);
		if (!h->own)
			h->own = xstrdup("");
		return true;
	}
	return false;
}

static void hier_release(struct hier *h)
{
	free(h->mount);
	free(h->own);
	h->mount = h->own = NULL;
}

/* where sandboxes go in a hierarchy: its root when we may write there (root), otherwise the
 * nearest ancestor of our own cgroup that we may write (a delegated subtree); NULL if none */
static char *pick_parent(const struct hier *h)
{
	char p[PATH_MAX];

	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s/cgroup.procs", h->mount);
		if (access(h->mount, W_OK) == 0 && access(p, W_OK) == 0)
			return xasprintf("%s/sbx", h->mount);
	}
	_cleanup_free_ char *own = xstrdup(h->own);
	for (;;) {
		char *slash = strrchr(own, '/');
		if (!slash)
			return NULL;
		*slash = 0; /* our own cgroup holds processes: never a parent (v2's rule) */
		snprintf(p, sizeof(p), "%s%s/cgroup.procs", h->mount, own);
		_cleanup_free_ char *dir = xasprintf("%s%s", h->mount, own);
		if (access(dir, W_OK) == 0 && access(p, W_OK) == 0)
			return xasprintf("%s/sbx", dir);
	}
}

/* mkdir dir, dir/sandbox and dir/supervisor; false when this hierarchy is not ours to write */
static bool make_dirs(const char *dir)
{
	static const char *const leaf[] = { "", "/" LEAF_SANDBOX, "/" LEAF_SUPERVISOR };

	for (size_t i = 0; i < ARRAY_SIZE(leaf); i++) {
		_cleanup_free_ char *d = xasprintf("%s%s", dir, leaf[i]);
		if (mkdir(d, 0755) < 0 && errno != EEXIST) {
			sbx_debug("cgroup: cannot create %s: %s", d, strerror(errno));
			return false;
		}
	}
	return true;
}

/* dir/leaf, or dir itself for a sandbox made before the leaves existed */
static char *leaf_of(const char *dir, const char *leaf)
{
	char *d = xasprintf("%s/%s", dir, leaf);

	if (access(d, F_OK) == 0)
		return d;
	free(d);
	return xstrdup(dir);
}

/* "+memory +pids +cpu" into the subtree control of the v2 parents, as far as they offer them */
static void v2_enable(const char *mount, const char *parent)
{
	static const char *const ctl[] = { "memory", "pids", "cpu" };
	_cleanup_free_ char *avail = local_cg_read(parent, "cgroup.controllers");
	_cleanup_free_ char *up = xstrdup(parent);
	char *slash = strrchr(up, '/');

	if (slash && strlen(up) > strlen(mount))
		*slash = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
		char w[32];
		snprintf(w, sizeof(w), "+%s", ctl[i]);
		_cleanup_free_ char *upc = local_cg_read(up, "cgroup.controllers");
		if (upc && strstr(upc, ctl[i]))
			(void)cg_write(up, "cgroup.subtree_control", w);
		_cleanup_free_ char *pc = local_cg_read(parent, "cgroup.controllers");
		if (pc && strstr(pc, ctl[i]))
			(void)cg_write(parent, "cgroup.subtree_control", w);
	}
	(void)avail;
}

/* --- the sandbox's cgroups --------------------------------------------------------------- */

void local_cg_release(struct cgroups *c)
{
	for (int i = 0; i < N_ROLES; i++)
		free(c->dir[i]);
	memset(c, 0, sizeof(*c));
}

void local_cg_load(const char *sbdir, struct cgroups *c)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroups", sbdir);
	_cleanup_free_ char *t = sbx_read_file(p, 65536, NULL);

	memset(c, 0, sizeof(*c));
	for (char *l = t; l && *l;) {
		char *nl = strchrnul(l, '\n');
		char *sp = strchr(l, ' ');
		if (sp && sp < nl)
			for (int i = 0; i < N_ROLES; i++)
				if ((size_t)(sp - l) == strlen(role_name[i]) &&
				    strncmp(l, role_name[i], (size_t)(sp - l)) == 0 && !c->dir[i])
					c->dir[i] = xstrndup(sp + 1, (size_t)(nl - sp - 1));
		l = *nl ? nl + 1 : nl;
	}
}

/* the same, each directory replaced by its leaf (the sandbox's processes: what pause freezes) */
static void cgroups_load_leaf(const char *sbdir, struct cgroups *c, const char *leaf)
{
	local_cg_load(sbdir, c);
	for (int i = 0; i < N_ROLES; i++)
		if (c->dir[i]) {
			char *l = leaf_of(c->dir[i], leaf);
			free(c->dir[i]);
			c->dir[i] = l;
		}
}

/* the v2 directory when it has controller ctl enabled */
bool local_cg_v2_offers(const struct cgroups *c, const char *ctl)
{
	if (!c->dir[ROLE_V2])
		return false;
	_cleanup_free_ char *t = local_cg_read(c->dir[ROLE_V2], "cgroup.controllers");
	if (!t)
		return false;
	char *save = NULL;
	for (char *w = strtok_r(t, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (streq(w, ctl))
			return true;
	return false;
}

static const char delegation_hint[] =
	"run sbx as root, or from a delegated cgroup v2 subtree (e.g. 'systemd-run --user "
	"--scope -p Delegate=yes sbx create ...')";

static int apply_limits(const struct cgroups *c, const struct local_limits *lim,
			struct sbx_err *err)
{
	char v[64];

	if (lim->memory > 0) {
		snprintf(v, sizeof(v), "%lld", lim->memory);
		if (local_cg_v2_offers(c, "memory")) {
			if (cg_write(c->dir[ROLE_V2], "memory.max", v) < 0)
				return sbx_err_errno(err, "cannot set the memory limit");
			(void)cg_write(c->dir[ROLE_V2], "memory.swap.max", "0");
		} else if (c->dir[ROLE_MEMORY]) {
			if (cg_write(c->dir[ROLE_MEMORY], "memory.limit_in_bytes", v) < 0)
				return sbx_err_errno(err, "cannot set the memory limit");
			if (cg_has(c->dir[ROLE_MEMORY], "memory.memsw.limit_in_bytes"))
				(void)cg_write(c->dir[ROLE_MEMORY], "memory.memsw.limit_in_bytes",
					       v);
		} else {
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot apply --memory: no writable cgroup "
					   "offers the memory controller; %s",
					   delegation_hint);
		}
	}
	if (lim->pids > 0) {
		snprintf(v, sizeof(v), "%lld", lim->pids);
		const char *d = local_cg_v2_offers(c, "pids") ? c->dir[ROLE_V2] : c->dir[ROLE_PIDS];
		if (!d)
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot apply --pids-limit: no writable "
					   "cgroup offers the pids controller; %s",
					   delegation_hint);
		if (cg_write(d, "pids.max", v) < 0)
			return sbx_err_errno(err, "cannot set the pids limit");
	}
	if (lim->cpu_millis > 0) {
		long long period = 100000, quota = lim->cpu_millis * period / 1000;
		if (quota < 1000)
			quota = 1000;
		if (local_cg_v2_offers(c, "cpu")) {
			snprintf(v, sizeof(v), "%lld %lld", quota, period);
			if (cg_write(c->dir[ROLE_V2], "cpu.max", v) < 0)
				return sbx_err_errno(err, "cannot set the CPU limit");
		} else if (c->dir[ROLE_CPU]) {
			snprintf(v, sizeof(v), "%lld", period);
			if (cg_write(c->dir[ROLE_CPU], "cpu.cfs_period_us", v) < 0)
				return sbx_err_errno(err, "cannot set the CPU period");
			snprintf(v, sizeof(v), "%lld", quota);
			if (cg_write(c->dir[ROLE_CPU], "cpu.cfs_quota_us", v) < 0)
				return sbx_err_errno(err, "cannot set the CPU limit");
		} else {
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot apply --cpus: no writable cgroup "
					   "offers the cpu controller; %s",
					   delegation_hint);
		}
	}
	return 0;
}

int local_cgroup_setup(const char *sbdir, const char *id, const struct local_limits *lim,
		       struct sbx_err *err)
{
	static const char *const v1[N_ROLES] = { NULL, "memory", "pids", "cpu", "freezer" };
	struct cgroups c = { 0 };
	char *out = xstrdup("");
	int r = -1;

	/* test-only: behave as on a host with v1 controllers and no v2 hierarchy */
	const char *only_v1 = getenv("SBX_TEST_CGROUP_V1_ONLY");

	for (int i = 0; i < N_ROLES; i++) {
		struct hier h = { 0 };
		if (i == ROLE_V2 && only_v1 && *only_v1)
			continue;
		if (!find_hier(v1[i], &h))
			continue;
		_cleanup_free_ char *parent = pick_parent(&h);
		if (parent) {
			if (mkdir(parent, 0755) < 0 && errno != EEXIST)
				sbx_debug("cgroup: cannot create %s: %s", parent, strerror(errno));
			else
				c.dir[i] = xasprintf("%s/%s", parent, id);
			if (c.dir[i] && i == ROLE_V2)
				v2_enable(h.mount, parent);
		}
		hier_release(&h);
		if (!c.dir[i])
			continue;
		char *n = xasprintf("%s%s %s\n", out, role_name[i], c.dir[i]);
		free(out);
		out = n;
	}
	/* the list first, then the directories: a create killed in between leaves nothing rm
	 * does not know of */
	_cleanup_free_ char *p = xasprintf("%s/cgroups", sbdir);
	if (sbx_write_atomic(p, out, strlen(out), false, err) < 0)
		goto out;
	sbx_test_hook("cgroup-listed");
	for (int i = 0; i < N_ROLES; i++)
		if (c.dir[i] && !make_dirs(c.dir[i])) {
			free(c.dir[i]);
			c.dir[i] = NULL;
		}
	if (apply_limits(&c, lim, err) < 0)
		goto out;
	/* the same limits on the sandbox's leaf, the root of its cgroup namespace: what runtimes
	 * inside read (the directory above still bounds the sandbox and its supervisor together) */
	static const char *const ctl[] = { "memory", "pids", "cpu" };
	for (size_t k = 0; k < ARRAY_SIZE(ctl); k++)
		if (local_cg_v2_offers(&c, ctl[k])) {
			char w[32];
			snprintf(w, sizeof(w), "+%s", ctl[k]);
			(void)cg_write(c.dir[ROLE_V2], "cgroup.subtree_control", w);
		}
	struct cgroups leaf = { 0 };
	for (int i = 0; i < N_ROLES; i++)
		leaf.dir[i] = c.dir[i] ? xasprintf("%s/" LEAF_SANDBOX, c.dir[i]) : NULL;
	struct sbx_err lerr = { 0 };
	if (apply_limits(&leaf, lim, &lerr) < 0)
		sbx_debug("cgroup: the leaf's limits: %s", lerr.msg);
	local_cg_release(&leaf);
	sbx_debug("cgroup: %s", *out ? out : "none writable\n");
	r = 0;
out:
	free(out);
	local_cg_release(&c);
	return r;
}

/* moves pid into leaf of every hierarchy (but those skipped); -1 with errno */
static int enter(const char *sbdir, pid_t pid, const char *leaf, int skip)
{
	struct cgroups c;
	char v[32];
	int r = 0;

	local_cg_load(sbdir, &c);
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int i = 0; i < N_ROLES; i++) {
		if (!c.dir[i] || i == skip)
			continue;
		/* v1 hierarchies can share a directory (cpu,cpuacct mounted together) */
		bool dup = false;
		for (int k = 0; k < i; k++)
			dup = dup || (c.dir[k] && streq(c.dir[k], c.dir[i]));
		if (dup)
			continue;
		/* the leaf; the directory itself for a sandbox made before the leaves existed */
		_cleanup_free_ char *d = xasprintf("%s/%s", c.dir[i], leaf);
		if (cg_write(d, "cgroup.procs", v) < 0 &&
		    (errno != ENOENT || cg_write(c.dir[i], "cgroup.procs", v) < 0)) {
			r = -1;
			break;
		}
	}
	local_cg_release(&c);
	return r;
}

/* where the supervisor came from, per hierarchy: it goes back there before it removes the
 * sandbox's cgroups itself (--ttl-action rm) */
static char *home[N_ROLES];

int local_cgroup_enter_supervisor(const char *sbdir, pid_t pid)
{
	static const char *const v1[N_ROLES] = { NULL, "memory", "pids", "cpu", "freezer" };

	for (int i = 0; i < N_ROLES; i++) {
		struct hier h = { 0 };
		if (find_hier(v1[i], &h))
			home[i] = xasprintf("%s%s", h.mount, h.own);
		hier_release(&h);
	}
	/* not the v1 freezer: a pause freezes the sandbox, never its supervisor */
	return enter(sbdir, pid, LEAF_SUPERVISOR, ROLE_FREEZER);
}

void local_cgroup_leave(pid_t pid)
{
	char v[32];

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int i = 0; i < N_ROLES; i++)
		if (home[i] && cg_write(home[i], "cgroup.procs", v) < 0)
			sbx_debug("cgroup: cannot go back to %s: %s", home[i], strerror(errno));
}

int local_cgroup_enter(const char *sbdir, pid_t pid)
{
	return enter(sbdir, pid, LEAF_SANDBOX, -1);
}

bool local_cgroup_can_freeze(const char *sbdir)
{
	struct cgroups c;

	cgroups_load_leaf(sbdir, &c, LEAF_SANDBOX);
	bool ok = (c.dir[ROLE_V2] && cg_has(c.dir[ROLE_V2], "cgroup.freeze")) ||
		c.dir[ROLE_FREEZER];
	local_cg_release(&c);
	return ok;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int local_cgroup_freeze(const char *sbdir, bool freeze, struct sbx_err *err)
{
	struct cgroups c;
	int r = -1;

	cgroups_load_leaf(sbdir, &c, LEAF_SANDBOX);
	if (c.dir[ROLE_V2] && cg_has(c.dir[ROLE_V2], "cgroup.freeze")) {
		if (cg_write(c.dir[ROLE_V2], "cgroup.freeze", freeze ? "1" : "0") < 0) {
			sbx_err_errno(err, "cannot %s the sandbox's cgroup",
				      freeze ? "freeze" : "thaw");
			goto out;
		}
		/* frozen only once every task stopped: cgroup.events says so, and poll wakes on a
		 * change of it; reading it through the polled fd re-arms the poll (without that,
		 * poll returns at once every time), and the wait is bounded by time, not rounds.
		 * The kernel may hold a notification back by up to 10 ms, so the file is read
		 * again every millisecond anyway. */
		_cleanup_free_ char *ev = xasprintf("%s/cgroup.events", c.dir[ROLE_V2]);
		_cleanup_close_ int fd = open(ev, O_RDONLY | O_CLOEXEC);
		long long deadline = sbx_now_ms() + 10000;
		while (fd >= 0 && sbx_now_ms() < deadline) {
			char buf[256];
			ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
			if (n <= 0)
				break;
			buf[n] = 0;
			const char *k = strstr(buf, "frozen ");
			if (!k || (k[7] == '1') == freeze)
				break;
			struct pollfd pf = { .fd = fd, .events = POLLPRI };
			if (poll(&pf, 1, 1) < 0 && errno != EINTR)
				nap_ms(1);
		}
		if (freeze && local_cg_key(c.dir[ROLE_V2], "cgroup.events", "frozen") == 1) {
			r = 0;
			goto out;
		}
		/* a thaw goes on to the v1 freezer too: a pause may have had to fall back to it */
		if (!freeze && !c.dir[ROLE_FREEZER]) {
			r = 0;
			goto out;
		}
		if (freeze && !c.dir[ROLE_FREEZER]) {
			sbx_err_set(err, SBX_E_SYSTEM,
				    "the sandbox's cgroup did not freeze in 10 s");
			goto out;
		}
	}
	if (c.dir[ROLE_FREEZER]) {
		const char *want = freeze ? "FROZEN" : "THAWED";
		if (cg_write(c.dir[ROLE_FREEZER], "freezer.state", want) < 0) {
			sbx_err_errno(err, "cannot %s the sandbox's cgroup",
				      freeze ? "freeze" : "thaw");
			goto out;
		}
		for (int i = 0; i < 2000; i++) {
			_cleanup_free_ char *st = local_cg_read(c.dir[ROLE_FREEZER],
								"freezer.state");
			if (st && startswith(st, want)) {
				r = 0;
				goto out;
			}
			/* FREEZING: a task is busy in the kernel; asking again moves it along */
			if (freeze && i % 50 == 49)
				(void)cg_write(c.dir[ROLE_FREEZER], "freezer.state", want);
			nap_ms(5);
		}
		sbx_err_set(err, SBX_E_SYSTEM, "the sandbox's cgroup did not %s in 10 s",
			    freeze ? "freeze" : "thaw");
		goto out;
	}
	sbx_err_set(err, SBX_E_UNSUPPORTED, "the sandbox has no cgroup freezer");
out:
	local_cg_release(&c);
	return r;
}

/* a file of the sandbox's leaf, or of the directory itself for a sandbox made before leaves */
static char *leaf_read(const char *dir, const char *file)
{
	_cleanup_free_ char *d = xasprintf("%s/" LEAF_SANDBOX, dir);
	char *t = local_cg_read(d, file);

	return t || errno != ENOENT ? t : local_cg_read(dir, file);
}

int local_cgroup_frozen(const char *sbdir)
{
	struct cgroups c;
	int r = -1;

	local_cg_load(sbdir, &c);
	if (c.dir[ROLE_V2]) {
		/* what was asked, not only what is done: a freeze in progress counts */
		_cleanup_free_ char *t = leaf_read(c.dir[ROLE_V2], "cgroup.freeze");
		if (t)
			r = t[0] == '1';
	}
	if (r != 1 && c.dir[ROLE_FREEZER]) {
		_cleanup_free_ char *st = leaf_read(c.dir[ROLE_FREEZER], "freezer.state");
		if (st)
			r = !startswith(st, "THAWED");
	}
	local_cg_release(&c);
	return r;
}

long long local_cgroup_oom_kills(const char *sbdir)
{
	struct cgroups c;
	long long n = -1;

	local_cg_load(sbdir, &c);
	if (local_cg_v2_offers(&c, "memory")) {
		/* v2 counts a leaf's kills in its ancestors too */
		n = local_cg_key(c.dir[ROLE_V2], "memory.events", "oom_kill");
	} else if (c.dir[ROLE_MEMORY]) {
		/* v1 counts a kill only where the killed process was: both leaves, and the
		 * directory itself for a sandbox made before the leaves existed */
		static const char *const leaf[] = { "", "/" LEAF_SANDBOX, "/" LEAF_SUPERVISOR };
		for (size_t i = 0; i < ARRAY_SIZE(leaf); i++) {
			_cleanup_free_ char *d = xasprintf("%s%s", c.dir[ROLE_MEMORY], leaf[i]);
			long long k = local_cg_key(d, "memory.oom_control", "oom_kill");
			if (k >= 0)
				n = (n < 0 ? 0 : n) + k;
		}
	}
	local_cg_release(&c);
	return n;
}

char *local_cgroup_describe(const char *sbdir)
{
	struct cgroups c;
	char *s = NULL;

	local_cg_load(sbdir, &c);
	bool v2 = c.dir[ROLE_V2] != NULL, v1 = false;
	for (int i = ROLE_MEMORY; i < N_ROLES; i++)
		v1 = v1 || c.dir[i];
	s = xstrdup(v2 && v1 ? "hybrid" : v2 ? "v2" : v1 ? "v1" : "none");
	local_cg_release(&c);
	return s;
}

/* the cgroups a delegated sandbox made under dir, deepest first: each thawed (v1 freezer), then
 * removed when remove is set (cgroupfs holds only directories and files: nothing there leads
 * elsewhere) */
static void walk_below(const char *dir, bool thaw, bool remove, int depth)
{
	DIR *d = depth < 16 ? opendir(dir) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (e->d_type != DT_DIR || streq(e->d_name, ".") || streq(e->d_name, ".."))
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", dir, e->d_name);
		if (thaw)
			(void)cg_write(sub, "freezer.state", "THAWED");
		walk_below(sub, thaw, remove, depth + 1);
		for (int k = 0; remove && k < 200 && rmdir(sub) < 0 && errno == EBUSY; k++)
			nap_ms(5);
	}
	if (d)
		closedir(d);
}

void local_cgroup_thaw_below(const char *sbdir)
{
	struct cgroups c;

	local_cg_load(sbdir, &c);
	if (c.dir[ROLE_FREEZER]) {
		_cleanup_free_ char *d = xasprintf("%s/" LEAF_SANDBOX, c.dir[ROLE_FREEZER]);
		walk_below(d, true, false, 0);
	}
	local_cg_release(&c);
}

void local_cgroup_remove(const char *sbdir)
{
	static const char *const leaf[] = { "/" LEAF_SANDBOX, "/" LEAF_SUPERVISOR, "" };
	struct cgroups c;

	local_cg_load(sbdir, &c);
	for (int i = 0; i < N_ROLES; i++) {
		if (!c.dir[i])
			continue;
		/* a frozen v1 cgroup keeps its tasks (even killed ones) until thawed */
		if (i == ROLE_FREEZER)
			for (size_t k = 0; k < ARRAY_SIZE(leaf); k++) {
				_cleanup_free_ char *d = xasprintf("%s%s", c.dir[i], leaf[k]);
				(void)cg_write(d, "freezer.state", "THAWED");
			}
		for (size_t l = 0; l < ARRAY_SIZE(leaf); l++) {
			_cleanup_free_ char *d = xasprintf("%s%s", c.dir[i], leaf[l]);
			if (l == 0) {
				if (i == ROLE_V2)
					(void)cg_write(d, "cgroup.kill", "1");
				walk_below(d, i == ROLE_FREEZER, true, 0);
			}
			for (int k = 0; k < 200 && rmdir(d) < 0 && errno == EBUSY; k++) {
				if (i == ROLE_V2 && k == 0)
					(void)cg_write(d, "cgroup.kill", "1");
				nap_ms(5);
			}
		}
	}
	local_cg_release(&c);
}

/* --- the sandbox's view of its cgroups, delegation ---------------------------------------- */

/* the v1 controllers among a hierarchy's mount options, comma-joined into out */
static void v1_controllers(const char *super, char *out, size_t len)
{
	static const char *const known[] = { "cpu",	"cpuacct",    "cpuset",	 "memory",
					     "devices", "freezer",    "net_cls", "net_prio",
					     "blkio",	"perf_event", "hugetlb", "pids",
					     "rdma",	"misc" };
	_cleanup_free_ char *t = xstrdup(super);
	char *save = NULL;

	out[0] = 0;
	for (char *o = strtok_r(t, ",", &save); o; o = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < ARRAY_SIZE(known); i++)
			if (streq(o, known[i])) {
				size_t n = strlen(out);
				snprintf(out + n, len - n, "%s%s", n ? "," : "", o);
			}
}

/* the controllers of the v1 hierarchy that holds path (its deepest cgroup mount above it) */
static bool v1_hier_of(const char *path, char *out, size_t len)
{
	_cleanup_free_ char *t = sbx_read_file("/proc/self/mountinfo", 1 << 20, NULL);
	size_t best = 0;

	for (char *l = t; l && *l;) {
		char *nl = strchrnul(l, '\n');
		_cleanup_free_ char *line = xstrndup(l, (size_t)(nl - l));
		l = *nl ? nl + 1 : nl;
		char *f[5] = { 0 }, *save = NULL, *w = strtok_r(line, " ", &save);
		for (int i = 0; i < 5 && w; i++, w = strtok_r(NULL, " ", &save))
			f[i] = w;
		while (w && !streq(w, "-"))
			w = strtok_r(NULL, " ", &save);
		char *fstype = w ? strtok_r(NULL, " ", &save) : NULL;
		char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
		char *super = source ? strtok_r(NULL, " ", &save) : NULL;
		size_t ml = f[4] ? strlen(f[4]) : 0;
		if (!super || !streq(fstype, "cgroup") || ml <= best ||
		    strncmp(path, f[4], ml) != 0 || path[ml] != '/')
			continue;
		v1_controllers(super, out, len);
		best = ml;
	}
	return best > 0 && *out;
}

size_t local_cgroup_mounts(const char *sbdir, struct local_cgroup_mount *m, size_t max)
{
	struct cgroups c;
	size_t n = 0;

	local_cg_load(sbdir, &c);
	bool v1 = false;
	for (int i = ROLE_MEMORY; i < N_ROLES; i++)
		v1 = v1 || c.dir[i];
	if (c.dir[ROLE_V2] && !v1 && max > 0) {
		memset(&m[n], 0, sizeof(m[n]));
		m[n++].v2 = true;
	}
	for (int i = ROLE_MEMORY; v1 && i < N_ROLES && n < max; i++) {
		char opts[64];
		if (!c.dir[i] || !v1_hier_of(c.dir[i], opts, sizeof(opts)))
			continue;
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup = dup || streq(m[k].opts, opts);
		if (dup)
			continue;
		memset(&m[n], 0, sizeof(m[n]));
		snprintf(m[n].name, sizeof(m[n].name), "%s", opts);
		snprintf(m[n].opts, sizeof(m[n].opts), "%s", opts);
		n++;
	}
	if (c.dir[ROLE_V2] && v1 && n < max) {
		memset(&m[n], 0, sizeof(m[n]));
		snprintf(m[n].name, sizeof(m[n].name), "unified");
		m[n++].v2 = true;
	}
	local_cg_release(&c);
	return n;
}

int local_cgroup_delegate(const char *sbdir, uid_t uid, gid_t gid, struct sbx_err *err)
{
	/* the files cgroup v2 names for delegation, and their v1 counterparts */
	static const char *const files[] = { "", "/cgroup.procs", "/cgroup.threads",
					     "/cgroup.subtree_control", "/tasks" };
	struct cgroups c;
	int r = 0;

	cgroups_load_leaf(sbdir, &c, LEAF_SANDBOX);
	for (int i = 0; i < N_ROLES && r == 0; i++)
		for (size_t k = 0; c.dir[i] && k < ARRAY_SIZE(files); k++) {
			_cleanup_free_ char *p = xasprintf("%s%s", c.dir[i], files[k]);
			if (lchown(p, uid, gid) < 0 && errno != ENOENT) {
				r = sbx_err_errno(err, "cannot delegate '%s'", p);
				break;
			}
		}
	local_cg_release(&c);
	return r;
}
