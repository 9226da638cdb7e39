/* The local provider's state helpers, below every process that uses them (the CLI, exec, cp,
 * the supervisor, init): the sandbox's pids file, its id maps, joining its namespaces, its
 * activity clock, its image's layers, and freezing it without a cgroup. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/mount.h>
#include <time.h>

#include "core/confine.h"
#include "core/digest.h"
#include "core/image.h"
#include "core/json.h"
#include "core/proc.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

#define NS_ALL                                                                                     \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWCGROUP)

int local_read_pids(const char *dir, struct local_pids *ret)
{
	char path[PATH_MAX], buf[256];
	snprintf(path, sizeof(path), "%s/pids", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	int ip, sp;
	if (sscanf(buf, "%d %llu %d %llu", &ip, &ret->init_start, &sp, &ret->sup_start) != 4)
		return -1;
	ret->init_pid = ip;
	ret->sup_pid = sp;
	return 0;
}

#define NEWUIDMAP "/usr/bin/newuidmap"
#define NEWGIDMAP "/usr/bin/newgidmap"

int local_write_maps(pid_t pid, const struct local_idmap *m)
{
	if (m->kind == LOCAL_MAP_RANGE)
		return sbx_proc_write_id_maps(pid, LOCAL_UID_BASE, LOCAL_UID_COUNT);
	if (m->kind == LOCAL_MAP_SELF)
		return sbx_proc_write_id_maps(pid, 0, 0);
	const unsigned long u[] = { 0, (unsigned long)getuid(), 1, 1, m->sub_uid, m->count };
	const unsigned long g[] = { 0, (unsigned long)getgid(), 1, 1, m->sub_gid, m->count };
	if (sbx_proc_run_idmap(NEWUIDMAP, pid, u, 2) < 0)
		return -1;
	return sbx_proc_run_idmap(NEWGIDMAP, pid, g, 2);
}

/* the range of /etc/subuid or /etc/subgid (path) granted to name or uid: the first of at least
 * LOCAL_UID_COUNT ids, else the largest; false when there is none */
static bool subid_range(const char *path, const char *name, uid_t uid, unsigned long *ret_base,
			unsigned long *ret_count)
{
	_cleanup_free_ char *t = sbx_read_file(path, 1 << 20, NULL);
	char num[24];
	bool found = false;

	snprintf(num, sizeof(num), "%u", (unsigned)uid);
	for (char *l = t; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		char *c1 = strchr(l, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 && *l != '#') {
			*c1 = 0;
			char *e1, *e2;
			errno = 0;
			unsigned long base = strtoul(c1 + 1, &e1, 10);
			unsigned long count = strtoul(c2 + 1, &e2, 10);
			bool mine = (name && streq(l, name)) || streq(l, num);
			if (mine && !errno && e1 == c2 && e2 != c2 + 1 && *e2 == 0 && count > 0 &&
			    base > 0 && base + count > base && base + count - 1 <= 4294967294ul &&
			    (!found || count > *ret_count)) {
				*ret_base = base;
				*ret_count = count;
				found = true;
				if (count >= LOCAL_UID_COUNT)
					break;
			}
		}
		l = nl ? nl + 1 : l + strlen(l);
	}
	return found;
}

void local_idmap_find(struct local_idmap *m)
{
	memset(m, 0, sizeof(*m));
	if (sbx_ids_mapped(LOCAL_UID_BASE, LOCAL_UID_COUNT)) {
		m->kind = LOCAL_MAP_RANGE;
		return;
	}
	m->kind = LOCAL_MAP_SELF;
	if (getuid() == 0 || getuid() != geteuid() || getgid() != getegid() ||
	    access(NEWUIDMAP, X_OK) < 0 || access(NEWGIDMAP, X_OK) < 0)
		return;
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &pwp) != 0)
		pwp = NULL;
	/* newuidmap and newgidmap serve only a user of the passwd database, in its own group */
	if (!pwp || pwp->pw_uid != getuid() || pwp->pw_gid != getgid())
		return;
	unsigned long ub, uc, gb, gc;
	if (!subid_range("/etc/subuid", pwp->pw_name, getuid(), &ub, &uc) ||
	    !subid_range("/etc/subgid", pwp->pw_name, getuid(), &gb, &gc))
		return;
	m->kind = LOCAL_MAP_SUBID;
	m->sub_uid = ub;
	m->sub_gid = gb;
	m->count = uc < gc ? uc : gc;
}

static json_t *map_entry(unsigned long in, unsigned long out, unsigned long count)
{
	return json_pack("[III]", (json_int_t)in, (json_int_t)out, (json_int_t)count);
}

json_t *local_idmap_json(const struct local_idmap *m)
{
	json_t *u = json_array(), *g = json_array();

	if (m->kind == LOCAL_MAP_RANGE) {
		json_array_append_new(u, map_entry(0, LOCAL_UID_BASE, LOCAL_UID_COUNT));
		json_array_append_new(g, map_entry(0, LOCAL_UID_BASE, LOCAL_UID_COUNT));
	} else {
		json_array_append_new(u, map_entry(0, geteuid(), 1));
		json_array_append_new(g, map_entry(0, getegid(), 1));
	}
	if (m->kind == LOCAL_MAP_SUBID) {
		json_array_append_new(u, map_entry(1, m->sub_uid, m->count));
		json_array_append_new(g, map_entry(1, m->sub_gid, m->count));
	}
	return json_pack("{soso}", "uid", u, "gid", g);
}

/* the second entry [1, outside, count] of a map, or false */
static bool second_entry(json_t *a, unsigned long *ret_out, unsigned long *ret_count)
{
	json_t *e = json_is_array(a) && json_array_size(a) == 2 ? json_array_get(a, 1) : NULL;
	json_t *in = json_array_get(e, 0), *out = json_array_get(e, 1), *n = json_array_get(e, 2);

	if (!json_is_integer(in) || json_integer_value(in) != 1 || !json_is_integer(out) ||
	    json_integer_value(out) <= 0 || !json_is_integer(n) || json_integer_value(n) <= 0)
		return false;
	*ret_out = (unsigned long)json_integer_value(out);
	*ret_count = (unsigned long)json_integer_value(n);
	return true;
}

void local_idmap_of(const struct sbx_record *rec, struct local_idmap *m)
{
	json_t *im = rec->extra ? json_object_get(rec->extra, "id_map") : NULL;
	json_t *n = rec->extra ? json_object_get(rec->extra, "uid_count") : NULL;
	unsigned long gc;

	memset(m, 0, sizeof(*m));
	if (json_is_object(im) &&
	    second_entry(json_object_get(im, "uid"), &m->sub_uid, &m->count) &&
	    second_entry(json_object_get(im, "gid"), &m->sub_gid, &gc) && gc == m->count)
		m->kind = LOCAL_MAP_SUBID;
	else if (json_is_integer(n))
		m->kind = json_integer_value(n) > 1 ? LOCAL_MAP_RANGE : LOCAL_MAP_SELF;
	else
		m->kind = geteuid() == 0 ? LOCAL_MAP_RANGE : LOCAL_MAP_SELF;
}

bool local_idmap_has(const struct local_idmap *m, unsigned long id)
{
	switch (m->kind) {
	case LOCAL_MAP_RANGE:
		return id < LOCAL_UID_COUNT;
	case LOCAL_MAP_SUBID:
		return id <= m->count;
	default:
		return id == 0;
	}
}

char *local_subid_advice(void)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096], num[24];

	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &pwp) != 0)
		pwp = NULL;
	snprintf(num, sizeof(num), "%u", (unsigned)getuid());
	return xasprintf("add '%s:%u:%u' to /etc/subuid and /etc/subgid (and install uidmap) and "
			 "recreate it",
			 pwp ? pwp->pw_name : num, LOCAL_UID_BASE, LOCAL_UID_COUNT);
}

int local_seccomp_of(const struct sbx_record *rec, const char *label, void **ret, size_t *ret_len,
		     struct sbx_err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/seccomp.bpf", rec->dir);
	size_t len = 0;
	void *bpf = sbx_read_file(path, 1 << 20, &len);

	/* out of descriptors, say, is not a broken sandbox */
	if (!bpf && errno != ENOENT)
		return sbx_err_errno(err, "cannot read '%s'", path);
	if (!bpf || !len || len % 8) {
		free(bpf);
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' has no usable seccomp filter ('%s'); remove it "
				   "with 'sbx rm -f %s'",
				   label, path, label);
	}
	*ret = bpf;
	*ret_len = len;
	return 0;
}

const char *local_hostname(const struct sbx_record *rec)
{
	return rec->config.hostname ? rec->config.hostname : rec->name ? rec->name : rec->id;
}

int local_clone_tree(const char *path)
{
	return (int)syscall(SYS_open_tree, AT_FDCWD, path,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
}

bool local_net_host(const struct sbx_record *rec)
{
	return rec->config.net.set && rec->config.net.mode == SBX_NET_HOST;
}

int local_join(const struct sbx_record *rec, pid_t init_pid, int pidfd, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	/* --net host: the sandbox shares our network namespace, which we may not re-enter */
	bool host_net = local_net_host(rec);

	/* --cpus: the CPUs init may use, so nproc says the same in every process */
	cpu_set_t cpus;
	if (rec->config.cpu_millis > 0 && sched_getaffinity(init_pid, sizeof(cpus), &cpus) == 0)
		(void)sched_setaffinity(0, sizeof(cpus), &cpus);

	if (setns(pidfd, host_net ? NS_ALL & ~CLONE_NEWNET : NS_ALL) == 0)
		return 0;
	/* kernels before 5.8: one namespace at a time */
	static const struct {
		const char *n;
		int f;
	} ns[] = {
		{ "user", CLONE_NEWUSER },     { "mnt", CLONE_NEWNS },	{ "pid", CLONE_NEWPID },
		{ "net", CLONE_NEWNET },       { "uts", CLONE_NEWUTS }, { "ipc", CLONE_NEWIPC },
		{ "cgroup", CLONE_NEWCGROUP },
	};
	int fds[ARRAY_SIZE(ns)];
	int r = 0;
	for (size_t k = 0; k < ARRAY_SIZE(ns); k++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)init_pid, ns[k].n);
		fds[k] = open(p, O_RDONLY | O_CLOEXEC);
	}
	for (size_t k = 0; k < ARRAY_SIZE(ns) && r == 0; k++)
		if (!(host_net && ns[k].f == CLONE_NEWNET) &&
		    (fds[k] < 0 || setns(fds[k], ns[k].f) < 0))
			r = sbx_err_errno(err, "cannot join sandbox '%s' (%s namespace)", label,
					  ns[k].n);
	for (size_t k = 0; k < ARRAY_SIZE(ns); k++)
		if (fds[k] >= 0)
			close(fds[k]);
	return r;
}

void local_cpu_affinity(pid_t pid, const char *id, long long cpu_millis)
{
	cpu_set_t have, want;
	int n = 0, k = 0;

	if (cpu_millis <= 0 || sched_getaffinity(0, sizeof(have), &have) < 0)
		return;
	int count = CPU_COUNT(&have), need = (int)((cpu_millis + 999) / 1000);
	if (need >= count)
		return;
	/* a run starting at a CPU picked by the id: sandboxes of one CPU spread over the host */
	unsigned h = 5381;
	for (const char *c = id; c && *c; c++)
		h = h * 33 + (unsigned char)*c;
	int first = (int)(h % (unsigned)count);
	CPU_ZERO(&want);
	for (int cpu = 0; cpu < CPU_SETSIZE && n < need; cpu++) {
		if (!CPU_ISSET(cpu, &have))
			continue;
		if (k++ >= first) {
			CPU_SET(cpu, &want);
			n++;
		}
	}
	for (int cpu = 0; cpu < CPU_SETSIZE && n < need; cpu++)
		if (CPU_ISSET(cpu, &have) && !CPU_ISSET(cpu, &want)) {
			CPU_SET(cpu, &want);
			n++;
		}
	(void)sched_setaffinity(pid, sizeof(want), &want);
}

bool local_map_range_of(const struct sbx_record *rec)
{
	struct local_idmap m;

	local_idmap_of(rec, &m);
	return m.kind != LOCAL_MAP_SELF;
}

void local_touch_activity(const char *dir)
{
	_cleanup_free_ char *p = xasprintf("%s/activity", dir);

	if (utimensat(AT_FDCWD, p, NULL, 0) < 0 && errno == ENOENT) {
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	}
}

long long local_idle_deadline(const char *dir, long long ttl_ms)
{
	_cleanup_free_ char *p = xasprintf("%s/activity", dir);
	struct stat st;

	if (ttl_ms <= 0 || stat(p, &st) < 0)
		return 0;
	return (long long)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 + ttl_ms;
}

int local_image_layers(struct sbx_ctx *ctx, const struct sbx_record *rec, char ***ret,
		       size_t *ret_n, struct sbx_err *err)
{
	char *const *ls = rec->config.image.chain;
	size_t n = 0;
	while (ls && ls[n])
		n++;
	/* a snapshot the files stack on: its tree, over the image's layers */
	_cleanup_free_ char *base = local_base_of(rec->dir);
	_cleanup_(strv_freep) char **v = n || base ? xcalloc(n + 2, sizeof(char *)) : NULL;
	if (base) {
		struct stat st;
		v[n] = xasprintf("%s/snapshots/%s/tree", ctx->store.root, base);
		if (stat(v[n], &st) < 0 || !S_ISDIR(st.st_mode))
			return sbx_err_set(err, SBX_E_STATE,
					   "snapshot %s, whose files the files of sandbox '%s' "
					   "stack on, is gone",
					   base, rec->id);
	}

	for (size_t i = 0; i < n; i++) {
		const char *d = ls[i];
		struct stat st;
		if (!d || !sbx_digest_valid(d))
			return sbx_err_set(err, SBX_E_STATE,
					   "sandbox '%s' has a broken image record", rec->id);
		v[i] = sbx_image_layer_dir(&ctx->store, d);
		if (stat(v[i], &st) < 0 || !S_ISDIR(st.st_mode))
			return sbx_err_set(err, SBX_E_STATE,
					   "layer %.19s of sandbox '%s' is gone from "
					   "the image store ('sbx image pull' its image again)",
					   d, rec->id);
	}
	*ret = TAKE_PTR(v);
	*ret_n = n + (base ? 1 : 0);
	return 0;
}

/* --- freezing without a cgroup --------------------------------------------------------- */

int local_is_frozen(const char *dir, const struct local_pids *pids)
{
	int f = local_cgroup_frozen(dir);

	if (f >= 0)
		return f;
	char st = sbx_proc_state(pids->init_pid);
	return st == 'T' || st == 't';
}

/* every process of the sandbox's pid namespace, by the namespace's inode */
size_t local_ns_members(pid_t init, pid_t **ret)
{
	char p[64];
	struct stat ns, st;
	size_t n = 0, all = 0;
	pid_t *v = NULL;

	*ret = NULL;
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)init);
	if (stat(p, &ns) < 0 || sbx_proc_list(&v, &all) < 0)
		return 0;
	for (size_t i = 0; i < all; i++) {
		snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)v[i]);
		if (stat(p, &st) < 0 || st.st_ino != ns.st_ino || st.st_dev != ns.st_dev)
			continue;
		v[n++] = v[i];
	}
	*ret = v;
	return n;
}

/* thread tid of process pid: its state letter (0 when gone) */
static char thread_state(pid_t pid, long tid)
{
	char p[96];
	snprintf(p, sizeof(p), "/proc/%d/task/%ld/stat", (int)pid, tid);
	_cleanup_free_ char *t = sbx_read_file(p, 4096, NULL);
	const char *s = t ? strrchr(t, ')') : NULL;

	return s && s[1] == ' ' ? s[2] : 0;
}

/* SIGSTOP to each thread of pid not stopped yet, each its own: a traced thread stops only for a
 * signal of its own, and one sent to its process stops only the thread that takes it until
 * the tracer passes it on, which it never does while it is stopped itself (a debugger inside
 * the sandbox; a gVisor sandbox's are never stopped so: pause.c). How many still run */
static size_t stop_threads(pid_t pid)
{
	char p[64];
	size_t busy = 0;
	struct dirent *e;

	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	DIR *d = opendir(p);
	while (d && (e = readdir(d))) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (tid <= 0 || *end)
			continue;
		char st = thread_state(pid, tid);
		if (st == 'T' || st == 't' || st == 'Z' || st == 'X' || !st)
			continue;
		(void)syscall(SYS_tgkill, (int)pid, (int)tid, SIGSTOP);
		/* in uninterruptible sleep with the SIGSTOP pending: it runs no code of its own
		 * before it stops */
		if (st == 'D' && sbx_proc_stop_pending(pid, (pid_t)tid))
			continue;
		busy++;
	}
	if (d)
		closedir(d);
	return busy;
}

/* SIGSTOP (to each thread) or SIGCONT to every process of the pid namespace until each is
 * stopped: new ones forked meanwhile are caught on the next round. A process stops only once it
 * runs again (one starved of CPU on a loaded host takes its time), so the wait is bounded by
 * time, not by a count of rounds. A process in uninterruptible sleep with the SIGSTOP pending
 * runs no code of its own before it stops, and counts as stopped: one waiting in vfork for a
 * child that was stopped before its exec would never wake to take it. */
static int signal_all(pid_t init, bool stop, struct sbx_err *err)
{
	long long deadline = sbx_now_ms() + 10000;
	long wait_ns = 200000;

	for (;;) {
		pid_t *v;
		size_t n = local_ns_members(init, &v), busy = 0;
		for (size_t i = 0; i < n; i++) {
			if (stop)
				busy += stop_threads(v[i]);
			else
				(void)kill(v[i], SIGCONT);
		}
		free(v);
		if (!stop || !busy)
			return 0;
		if (sbx_now_ms() > deadline) {
			(void)signal_all(init, false, err); /* not half paused: all run again */
			break;
		}
		struct timespec ts = { 0, wait_ns };
		nanosleep(&ts, NULL);
		if (wait_ns < 20000000)
			wait_ns *= 2;
	}
	return sbx_err_set(err, SBX_E_SYSTEM,
			   "the sandbox's processes did not all stop within "
			   "10 s; they run on, try 'sbx pause' again");
}

int local_freeze(const char *dir, const struct local_pids *pids, bool freeze, struct sbx_err *err)
{
	if (local_cgroup_can_freeze(dir))
		return local_cgroup_freeze(dir, freeze, err);
	return signal_all(pids->init_pid, freeze, err);
}

int local_freeze_init(const struct local_pids *pids, bool freeze, struct sbx_err *err)
{
	_cleanup_close_ int pidfd = sbx_pidfd_open(pids->init_pid);

	if (pidfd < 0 || !sbx_proc_alive(pids->init_pid, pids->init_start))
		return sbx_err_set(err, SBX_E_STATE, "the sandbox's init is gone");
	if (sbx_pidfd_signal(pidfd, freeze ? SIGSTOP : SIGCONT) < 0)
		return sbx_err_errno(err, "cannot %s the sandbox's init",
				     freeze ? "stop" : "continue");
	if (!freeze)
		return 0;
	/* it stops once it runs again (a loaded host may take its time): bounded by time */
	long long deadline = sbx_now_ms() + 10000;
	long wait_ns = 100000;
	for (;;) {
		char st = sbx_proc_state(pids->init_pid);
		if (st == 'T' || st == 't')
			return 0;
		if (!st || st == 'Z' || st == 'X')
			return sbx_err_set(err, SBX_E_STATE, "the sandbox's init ended");
		if (sbx_now_ms() > deadline)
			break;
		struct timespec ts = { 0, wait_ns };
		nanosleep(&ts, NULL);
		if (wait_ns < 20000000)
			wait_ns *= 2;
	}
	(void)sbx_pidfd_signal(pidfd, SIGCONT);
	return sbx_err_set(err, SBX_E_SYSTEM,
			   "the sandbox's init did not stop within 10 s; it runs on, try "
			   "'sbx pause' again");
}
