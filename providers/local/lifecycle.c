/* The local provider: Linux namespaces on this host, no daemon, no root needed. */
#define _GNU_SOURCE
#include "providers/local/local.h"
#include "providers/local/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "core/confine.h"
#include "core/digest.h"
#include "core/image.h"
#include "core/json.h"
#include "core/log.h"
#include "core/proc.h"
#include "core/sandbox.h"
#include "core/snapshot.h"
#include "core/subvol.h"
#include "core/test-hook.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

_Static_assert(SBX_IMAGE_ID_SHIFT == LOCAL_UID_BASE,
	       "image layers are owned in the id range "
	       "root-run sandboxes map");

/* --- create -------------------------------------------------------------------------------- */

/* the sandbox's /etc/hosts */
static char *hosts_text(const struct local_setup *s)
{
	char *hosts = xasprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
				"ip6-loopback\n127.0.1.1\t%s\n",
				s->hostname);
	/* --add-host: docker's flag, in /etc/hosts too (the proxy dials these addresses) */
	const struct sbx_net_config *net = &s->config->net;
	for (size_t i = 0; i < net->n_add_hosts; i++) {
		char *more = xasprintf("%s%s\t%s\n", hosts, net->add_hosts[i].addr,
				       net->add_hosts[i].name);
		free(hosts);
		hosts = more;
	}
	return hosts;
}

/* the directory of the files a sandbox writes (root/, or fs/upper): on btrfs a subvolume of its
 * own, so that a snapshot of it is one btrfs snapshot (see core/subvol.h); a directory
 * elsewhere, and on a disk of the sandbox's own */
static int make_files_dir(const char *path, const struct local_setup *s)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');

	if (!s->disk && slash) {
		*slash = 0;
		_cleanup_close_ int at = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (at >= 0 && sbx_subvol_fs(at))
			return sbx_subvol_create(at, slash + 1);
	}
	return mkdir(path, 0755);
}

/* the sandbox's root directory: empty, with the top-level names a system expects. With --disk,
 * root/ (or fs/) is already there, the disk mounted on it */
static int fill_root(const char *dir, const struct local_setup *s, struct sbx_err *err)
{
	/* the first three are all an image's root gets: the rest is the image's own */
	static const struct {
		const char *name;
		mode_t mode;
	} dirs[] = {
		{ "workspace", 0755 }, { "tmp", 01777 }, { "run", 0755 },      { "root", 0700 },
		{ "home", 0755 },      { "var", 0755 },	 { "var/tmp", 01777 }, { "mnt", 0755 },
		{ "opt", 0755 },       { "srv", 0755 },	 { "proc", 0555 },     { "dev", 0755 },
		{ "sys", 0555 },
	};
	static const char *const sys[] = { "usr",   "bin",   "sbin",   "lib",
					   "lib32", "lib64", "libx32", "etc" };
	bool image = s->n_layers > 0;
	size_t ndirs = image ? 3 : ARRAY_SIZE(dirs), nsys = image ? 0 : ARRAY_SIZE(sys);
	/* with an image, the root is an overlay of its layers and fs/upper (fs/work is overlay's
	 * own); root/ stays, empty, for the checks that a sandbox has files */
	_cleanup_free_ char *root = xasprintf(image ? "%s/fs/upper" : "%s/root", dir);
	char p[PATH_MAX];

	if (image) {
		static const char *const fs[] = { "root", "fs", "fs/work" };
		for (size_t i = 0; i < ARRAY_SIZE(fs); i++) {
			snprintf(p, sizeof(p), "%s/%s", dir, fs[i]);
			if (mkdir(p, i == 2 ? 0700 : 0755) < 0 &&
			    !(s->disk && i < 2 && errno == EEXIST))
				return sbx_err_errno(err, "cannot create '%s'", p);
			if (s->map_range && lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
	}
	if (make_files_dir(root, s) < 0 && !(s->disk && !image && errno == EEXIST))
		return sbx_err_errno(err, "cannot create '%s'", root);
	for (size_t i = 0; i < ndirs; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
		if (mkdir(p, dirs[i].mode) < 0 || chmod(p, dirs[i].mode) < 0)
			return sbx_err_errno(err, "cannot create '%s'", p);
	}
	for (size_t i = 0; i < nsys; i++) {
		char host[64], target[PATH_MAX];
		struct stat st;
		snprintf(host, sizeof(host), "/%s", sys[i]);
		snprintf(p, sizeof(p), "%s/%s", root, sys[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = 0;
			if (symlink(target, p) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdir(p, 0755) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
		}
	}
	/* the sandbox's own /etc/hostname and /etc/hosts, bound over the host's by init (docker
	 * does the same); sandbox root may edit them */
	snprintf(p, sizeof(p), "%s/run/sbx", root);
	if (mkdir(p, 0755) < 0)
		return sbx_err_errno(err, "cannot create '%s'", p);
	_cleanup_free_ char *hn = xasprintf("%s\n", s->hostname);
	_cleanup_free_ char *hosts = hosts_text(s);
	snprintf(p, sizeof(p), "%s/run/sbx/hostname", root);
	if (sbx_write_atomic(p, hn, strlen(hn), false, err) < 0 || chmod(p, 0644) < 0)
		return sbx_err_errno(err, "cannot write '%s'", p);
	snprintf(p, sizeof(p), "%s/run/sbx/hosts", root);
	if (sbx_write_atomic(p, hosts, strlen(hosts), false, err) < 0 || chmod(p, 0644) < 0)
		return sbx_err_errno(err, "cannot write '%s'", p);
	if (s->map_range) {
		static const char *const own[] = { "run/sbx", "run/sbx/hostname", "run/sbx/hosts" };
		for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
			snprintf(p, sizeof(p), "%s/%s", root, own[i]);
			if (lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
	}
	if (s->map_range) {
		/* sandbox root owns its root directory */
		if (lchown(root, s->uid, s->gid) < 0)
			return sbx_err_errno(err, "cannot hand '%s' to the sandbox", root);
		for (size_t i = 0; i < ndirs; i++) {
			snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
			if (lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
		for (size_t i = 0; i < nsys; i++) {
			snprintf(p, sizeof(p), "%s/%s", root, sys[i]);
			(void)lchown(p, s->uid, s->gid);
		}
	}
	return 0;
}

/* --disk: the disk mounted on root/ (or fs/) in a mount namespace of a child's own, where
 * fill_root writes into it; the mount goes with the child */
static int prepare_root(const char *dir, const struct local_setup *s, struct sbx_err *err)
{
	if (!s->disk)
		return fill_root(dir, s, err);
	_cleanup_free_ char *at = xasprintf("%s/%s", dir, s->n_layers ? "fs" : "root");
	_cleanup_free_ char *root = xasprintf("%s/root", dir);
	if ((mkdir(root, 0755) < 0 && errno != EEXIST) || (mkdir(at, 0755) < 0 && errno != EEXIST))
		return sbx_err_errno(err, "cannot create '%s'", at);
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(ep[0]);
		close(ep[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		int lk, m = -1;
		close(ep[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			sbx_err_errno(&e, "cannot make a mount namespace");
		else if ((m = local_disk_mount(dir, &lk, &e)) >= 0 &&
			 syscall(SYS_move_mount, m, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			sbx_err_errno(&e, "cannot mount the sandbox's disk on '%s'", at);
		else if (m >= 0 && fill_root(dir, s, &e) == 0) {
			int d = open(at, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (d >= 0 && syncfs(d) == 0) {
				sbx_err_send(ep[1], NULL);
				_exit(0);
			}
		}
		if (m >= 0 && !e.kind)
			sbx_err_errno(&e, "cannot write the sandbox's disk");
		sbx_err_send(ep[1], &e);
		_exit(1);
	}
	close(ep[1]);
	int r = sbx_err_recv(ep[0], pid, "disk set-up", err);
	close(ep[0]);
	return r;
}

/* the snapshot's files (of its record info) copied in as the sandbox's, or over them
 * (replace) */
static int unpack(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct local_setup *s,
		  const char *tree, const json_t *info, bool replace, struct sbx_err *err)
{
	_cleanup_free_ char *hn = xasprintf("%s\n", s->hostname);
	_cleanup_free_ char *hosts = hosts_text(s);

	return local_snapshot_unpack(ctx, rec, tree, info, replace, hn, hosts, err);
}

/* a fork (create --from): the directories fill_root makes, but the files are the
 * snapshot's */
static int root_from(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct local_setup *s,
		     struct sbx_err *err)
{
	_cleanup_json_ json_t *info = NULL;
	_cleanup_free_ char *tree = NULL;

	if (sbx_snapshot_find(&ctx->store, rec->config.from, &info, &tree, err) < 0)
		return -1;
	if (s->n_layers) {
		static const char *const fs[] = { "root", "fs", "fs/work" };
		for (size_t i = 0; i < ARRAY_SIZE(fs); i++) {
			_cleanup_free_ char *p = xasprintf("%s/%s", rec->dir, fs[i]);
			if (mkdir(p, i == 2 ? 0700 : 0755) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
			if (s->map_range && lchown(p, s->uid, s->gid) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
		}
	}
	if (local_fork_memory(rec, info, tree, s->uid, s->gid, err) < 0)
		return -1;
	return unpack(ctx, rec, s, tree, info, false, err);
}

/* the supervisor and init of a sandbox whose files exist: cgroups, fork, the report */
static int boot(struct sbx_ctx *ctx, struct sbx_record *rec, struct local_setup *s,
		struct sbx_err *err)
{
	const struct sbx_config *c = &rec->config;
	struct local_limits lim = { .memory = c->memory,
				    .pids = c->pids_limit,
				    .cpu_millis = c->cpu_millis };
	if (s->gvisor)
		local_gvisor_host_limits(c, &lim);

	s->store_root = ctx->store.root;
	/* --secret: the CA init adds to the trust bundle the sandbox sees, at every boot */
	_cleanup_free_ char *ca_pem = NULL;
	if (c->n_secrets) {
		_cleanup_free_ char *cap = xasprintf("%s/secrets/ca.crt", rec->dir);
		if (!(ca_pem = sbx_read_file(cap, 1 << 16, NULL)))
			return sbx_err_errno(err, "cannot read '%s'", cap);
		s->ca_pem = ca_pem;
	}
	_cleanup_(strv_freep) char **layers_owned = NULL;
	if (local_image_layers(ctx, rec, &layers_owned, &s->n_layers, err) < 0)
		return -1;
	s->layers = layers_owned;
	if (local_cgroup_setup(rec->dir, rec->id, &lim, err) < 0)
		return -1;
	/* what init mounts at /sys/fs/cgroup; delegated to sandbox root only for --nested */
	s->n_cgroup_mounts = local_cgroup_mounts(rec->dir, s->cgroup_mounts, LOCAL_CGROUP_MOUNTS);
	if (s->cgroup_writable && local_cgroup_delegate(rec->dir, s->uid, s->gid, err) < 0)
		return -1;
	local_touch_activity(rec->dir);
	sbx_test_hook("boot-cgroups");
	if (s->gvisor) {
		_cleanup_free_ char *hosts = hosts_text(s);
		if (local_gvisor_prepare(rec, s->uid, s->gid, hosts, err) < 0)
			return -1;
	}

	int rp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rp) < 0)
		return sbx_err_errno(err, "cannot create a socket pair");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(rp[0]);
		close(rp[1]);
		return sbx_err_errno(err, "cannot start the supervisor");
	}
	if (pid == 0) {
		close(rp[0]);
		local_supervisor(s, rp[1]);
	}
	close(rp[1]);

	struct local_report r;
	ssize_t got = sbx_proc_read_report(rp[0], &r, sizeof(r));
	/* the supervisor is detached (setsid); reap the intermediate only if it already died */
	(void)waitpid(pid, NULL, WNOHANG);
	if (got != (ssize_t)sizeof(r)) {
		close(rp[0]);
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot start sandbox: its supervisor exited during set-up");
	}
	if (!r.ok) {
		close(rp[0]);
		r.msg[sizeof(r.msg) - 1] = 0;
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start sandbox: %s", r.msg);
	}
	sbx_test_hook("boot-reported");
	/* ours now: the supervisor writes the pids file and says 'done' */
	char done;
	ssize_t dn = -1;
	if (send(rp[0], "", 1, MSG_NOSIGNAL) == 1)
		do
			dn = read(rp[0], &done, 1);
		while (dn < 0 && errno == EINTR);
	close(rp[0]);
	if (dn != 1)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot start sandbox: its supervisor could "
				   "not record it ('%s/pids')",
				   rec->dir);
	json_t *x = rec->extra && json_is_object(rec->extra) ? json_incref(rec->extra)
							     : json_object();
	json_object_set_new(x, "init_pid", json_integer(r.pids.init_pid));
	json_object_set_new(x, "supervisor_pid", json_integer(r.pids.sup_pid));
	json_object_set_new(x, "uid_base", json_integer(s->uid));
	json_object_set_new(x, "uid_count", json_integer((json_int_t)s->map_count));
	json_object_set_new(x, "id_map", local_idmap_json(&s->map));
	if (rec->extra)
		json_decref(rec->extra);
	rec->extra = x;
	rec->state = SBX_STATE_RUNNING;
	return 0;
}

/* sandbox root is LOCAL_UID_BASE (root's range) or the caller (its uid alone, or with its
 * subordinate ids beyond) */
static void ids_for(struct local_setup *s, const struct local_idmap *m)
{
	s->map = *m;
	s->map_range = m->kind == LOCAL_MAP_RANGE;
	if (s->map_range) {
		s->uid = LOCAL_UID_BASE;
		s->gid = LOCAL_UID_BASE;
		s->map_count = LOCAL_UID_COUNT;
	} else {
		s->uid = geteuid();
		s->gid = getegid();
		s->map_count = m->kind == LOCAL_MAP_SUBID ? m->count + 1 : 1;
	}
}

/* what the supervisor and init are given, from the record alone: the same at create and at
 * every boot after it */
static struct local_setup setup_of(const struct sbx_record *rec)
{
	const struct sbx_config *c = &rec->config;
	struct local_setup s = {
		.dir = rec->dir,
		.id = rec->id,
		.label = rec->name ? rec->name : rec->id,
		.config = c,
		.hostname = local_hostname(rec),
		.workdir = c->workdir ? c->workdir : "/workspace",
		.volumes = c->volumes,
		.n_volumes = c->n_volumes,
		.net_host = local_net_host(rec),
		.ttl_ms = c->ttl_ms,
		.ttl_rm = c->ttl_rm,
		.disk = c->disk > 0,
		.nested = c->nested,
		.cgroup_writable = c->nested,
		.gvisor = local_gvisor(rec),
	};
	for (char **l = c->image.layers; l && *l; l++)
		s.n_layers++;
	s.image = s.n_layers > 0;
	return s;
}

/* an image with users of its own, in a sandbox where only the caller's uid is mapped: what
 * fails there (su, a service that will not run as root) fails for that, which the user should
 * know before */
static void note_image_users(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *label)
{
	_cleanup_(strv_freep) char **layers = NULL;
	size_t n = 0;
	struct sbx_err e = { 0 };
	char names[200];

	if (local_image_layers(ctx, rec, &layers, &n, &e) < 0 ||
	    !local_image_users(layers, n, names, sizeof(names)))
		return;
	_cleanup_free_ char *advice = local_subid_advice();
	sbx_warn("image '%s' has users other than root (%s), who cannot exist in sandbox '%s': "
		 "only your uid is mapped; %s",
		 rec->config.image.ref ? rec->config.image.ref : "?", names, label, advice);
}

static int local_create(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	struct local_setup s = setup_of(rec);
	_cleanup_free_ void *bpf = NULL;
	size_t bpf_len = 0;

	if (s.gvisor && local_gvisor_check(rec, err) < 0)
		return -1;
	struct local_idmap map;
	local_idmap_find(&map);
	ids_for(&s, &map);
	if (map.kind == LOCAL_MAP_SELF && geteuid() != 0 && s.n_layers)
		note_image_users(ctx, rec, s.label);
	if (rec->config.n_secrets && local_secrets_write(rec, &rec->config, err) < 0)
		return -1;
	long long disk = local_disk_size(rec);
	if (disk > 0) {
		if (local_disk_check(err) < 0 ||
		    local_disk_make(rec->dir, disk, s.uid, s.gid, err) < 0)
			return -1;
	}
	if ((rec->config.from ? root_from(ctx, rec, &s, err) : prepare_root(rec->dir, &s, err)) < 0)
		return -1;
	/* the filter is the same for every sandbox of this sbx (of its profile): compiled once
	 * per build */
	if (sbx_seccomp_cached_profile(ctx->store.root,
				       s.nested ? SBX_SECCOMP_NESTED : SBX_SECCOMP_STRICT, &bpf,
				       &bpf_len, err) < 0)
		return -1;
	s.bpf = bpf;
	s.bpf_len = bpf_len;
	{
		_cleanup_free_ char *p = xasprintf("%s/seccomp.bpf", rec->dir);
		if (sbx_write_atomic(p, bpf, bpf_len, false, err) < 0)
			return -1;
	}
	sbx_test_hook("create-prepared");
	return boot(ctx, rec, &s, err);
}

/* --- state --------------------------------------------------------------------------------- */

static enum sbx_state look(const struct sbx_record *rec, struct local_pids *pids)
{
	enum sbx_state down = rec->state == SBX_STATE_RELEASED ? SBX_STATE_RELEASED
							       : SBX_STATE_STOPPED;

	if (local_read_pids(rec->dir, pids) < 0)
		return down;
	if (sbx_proc_alive(pids->init_pid, pids->init_start) &&
	    sbx_proc_alive(pids->sup_pid, pids->sup_start)) {
		/* a memory checkpoint its sbx did not see to the end (gvisor-checkpoint.c) */
		enum sbx_state cut;
		if (local_checkpoint_look(rec, pids, &cut))
			return cut;
		if (local_is_frozen(rec->dir, pids) != 1)
			return SBX_STATE_RUNNING;
		/* frozen by a snapshot that was killed before it could thaw it */
		struct sbx_err ignored = { 0 };
		if (local_snapshot_froze(rec->dir) &&
		    local_sandbox_freeze(rec, pids, false, &ignored) == 0)
			return SBX_STATE_RUNNING;
		return SBX_STATE_PAUSED;
	}
	return down;
}

static int local_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	struct local_pids pids;
	char why[300];

	rec->state = look(rec, &pids);
	/* a gVisor sandbox whose init runs but whose gVisor kernel ended runs nothing */
	if ((rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED) &&
	    local_gvisor(rec) && local_gvisor_gone(rec, why, sizeof(why))) {
		rec->state = SBX_STATE_ERROR;
		free(rec->state_reason);
		rec->state_reason = xstrdup(why);
	} else if (rec->state != SBX_STATE_ERROR) {
		free(rec->state_reason);
		rec->state_reason = NULL;
	}
	if ((rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED) && rec->extra)
		json_object_set_new(rec->extra, "init_pid", json_integer(pids.init_pid));
	json_t *live = json_object();
	_cleanup_free_ char *cg = local_cgroup_describe(rec->dir);
	json_object_set_new(live, "cgroup", json_string(cg));
	long long oom = local_cgroup_oom_kills(rec->dir);
	/* a gVisor sandbox's own (sbx-ginit's) too */
	if (local_gvisor(rec))
		oom = (oom > 0 ? oom : 0) + local_gvisor_oom_kills(rec->dir);
	json_object_set_new(live, "oom_kills", oom >= 0 ? json_integer(oom) : json_null());
	local_cgroup_stats(rec->dir, live);
	json_object_set_new(live, "runtime", json_string(local_gvisor(rec) ? "gvisor" : "local"));
	if (local_runtime_of(rec)) {
		long long ck = local_checkpoint_bytes(rec);
		json_object_set_new(live, "checkpointed", json_boolean(ck >= 0));
		json_object_set_new(live, "checkpoint_bytes",
				    ck >= 0 ? json_integer(ck) : json_null());
	}
	long long ttl = rec->config.ttl_ms;
	long long dl = rec->state == SBX_STATE_RUNNING ? local_idle_deadline(rec->dir, ttl) : 0;
	if (dl > 0) {
		_cleanup_free_ char *t = sbx_time_rfc3339(dl / 1000);
		json_object_set_new(live, "idle_deadline", json_string(t));
		json_object_set_new(live, "idle_deadline_unix", json_integer(dl / 1000));
	} else {
		json_object_set_new(live, "idle_deadline", json_null());
	}
	{
		_cleanup_free_ char *pp = xasprintf("%s/previews.json", rec->dir);
		_cleanup_free_ char *text = sbx_read_file(pp, 1 << 20, NULL);
		json_t *pv = text ? json_loads(text, 0, NULL) : NULL;
		json_object_set_new(live, "previews", json_is_array(pv) ? pv : json_array());
		if (pv && !json_is_array(pv))
			json_decref(pv);
	}
	if (rec->live)
		json_decref(rec->live);
	rec->live = live;
	(void)ctx;
	(void)err;
	return 0;
}

/* --- rm, release ---------------------------------------------------------------------------- */

/* sig to a process we started (checked by start time); then, unless wait_ms is 0, waits up to
 * wait_ms for it to end: 0 gone, 1 still there, -1 error */
static int signal_checked(pid_t pid, unsigned long long start, int sig, int wait_ms,
			  const char *what, const char *label, struct sbx_err *err)
{
	int pidfd = sbx_pidfd_open(pid);

	if (pidfd < 0)
		return 0; /* already gone */
	if (!sbx_proc_alive(pid, start)) {
		close(pidfd);
		return 0; /* gone, or the pid was reused: not ours to signal */
	}
	if (sbx_pidfd_signal(pidfd, sig) < 0 && errno != ESRCH) {
		sbx_err_errno(err, "cannot stop the %s of sandbox '%s'", what, label);
		close(pidfd);
		return -1;
	}
	int r = wait_ms ? sbx_pidfd_wait(pidfd, wait_ms) : 0;
	close(pidfd);
	return r < 0 ? 1 : 0;
}

static int kill_checked(pid_t pid, unsigned long long start, const char *what, const char *label,
			struct sbx_err *err)
{
	int r = signal_checked(pid, start, SIGKILL, 10000, what, label, err);

	if (r > 0)
		return sbx_err_set(err, SBX_E_SYSTEM, "the %s of sandbox '%s' did not exit", what,
				   label);
	return r;
}

/* every process ends: SIGTERM (init passes it on; a gVisor sandbox's processes get it inside
 * gVisor), SIGKILL after grace_ms; cgroups removed */
static int stop_all(struct sbx_record *rec, long long grace_ms, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;

	if (local_read_pids(rec->dir, &pids) == 0) {
		bool alive = sbx_proc_alive(pids.init_pid, pids.init_start);
		if (alive && grace_ms > 0 && local_gvisor(rec)) {
			/* init would pass it on to gVisor's sentry, gofer and stubs, behind the
			 * sentry's back: the sandbox's processes are sent it by gVisor, thawed
			 * first, and waited for (init then ends them all with itself) */
			struct sbx_err ignored = { 0 };
			if (local_is_frozen(rec->dir, &pids) == 1)
				(void)local_sandbox_freeze(rec, &pids, false, &ignored);
			(void)local_gvisor_stop_all(rec, grace_ms, &ignored);
		} else if (alive && grace_ms > 0) {
			int r = signal_checked(pids.init_pid, pids.init_start, SIGTERM, 0, "init",
					       label, err);
			if (r < 0)
				return -1;
			/* frozen processes handle the signal once thawed */
			if (local_is_frozen(rec->dir, &pids) == 1) {
				struct sbx_err ignored = { 0 };
				(void)local_sandbox_freeze(rec, &pids, false, &ignored);
			}
			int pidfd = sbx_pidfd_open(pids.init_pid);
			if (pidfd >= 0) {
				(void)sbx_pidfd_wait(pidfd,
						     grace_ms > INT_MAX ? INT_MAX : (int)grace_ms);
				close(pidfd);
			}
		}
		/* a v1 freezer holds even killed tasks: kill, then thaw, then wait (a stopped
		 * process dies of SIGKILL as it is) */
		if (sbx_proc_alive(pids.init_pid, pids.init_start) &&
		    local_cgroup_frozen(rec->dir) == 1) {
			struct sbx_err ignored = { 0 };
			(void)signal_checked(pids.init_pid, pids.init_start, SIGKILL, 0, "init",
					     label, &ignored);
			(void)local_cgroup_freeze(rec->dir, false, &ignored);
		}
		local_cgroup_thaw_below(rec->dir);
		/* killing init ends every process of the pid namespace; the supervisor follows */
		if (kill_checked(pids.init_pid, pids.init_start, "init", label, err) < 0)
			return -1;
		sbx_test_hook("rm-killed");
		/* init's parent, the supervisor, reaps it and leaves on its own: killed first, it
		 * would leave init a zombie for the host's PID 1, which may never reap it (the
		 * wait ends as it leaves; a loaded machine may take seconds) */
		if (signal_checked(pids.sup_pid, pids.sup_start, 0, 10000, "supervisor", label,
				   err) < 0)
			return -1;
		if (kill_checked(pids.sup_pid, pids.sup_start, "supervisor", label, err) < 0)
			return -1;
	}
	local_cgroup_remove(rec->dir);
	return 0;
}

/* the trees a sandbox wrote (root/, fs/), emptied in the jail */
struct clean_job {
	char *trees[2];
	size_t n;
};

static int clean_trees(void *arg, struct sbx_err *err)
{
	const struct clean_job *j = arg;
	int r = 0;

	for (size_t i = 0; i < j->n; i++) {
		DIR *d = opendir(j->trees[i]);
		if (!d)
			return sbx_err_errno(err, "cannot open '%s'", j->trees[i]);
		struct dirent *de;
		while ((de = readdir(d))) {
			if (streq(de->d_name, ".") || streq(de->d_name, ".."))
				continue;
			_cleanup_free_ char *p = xasprintf("%s/%s", j->trees[i], de->d_name);
			if (sbx_rm_rf(p) < 0 && r == 0)
				r = sbx_err_errno(err, "cannot remove '%s'", p);
		}
		closedir(d);
	}
	return r;
}

static int clean_maps(pid_t pid, void *map)
{
	return local_write_maps(pid, map);
}

/* with subordinate ids, what the sandbox made as another user is not the caller's to remove:
 * its trees are emptied in a jail whose user namespace maps them as the sandbox's did (as
 * `podman unshare` would); what is left is the caller's own */
static int clean_subids(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	struct local_idmap m;
	/* a record without its map (a create that failed before its init ran): this caller's map
	 * now, at best effort, since nothing may have been written */
	bool known = rec->extra && json_object_get(rec->extra, "uid_count");

	local_idmap_of(rec, &m);
	if (!known && geteuid() != 0)
		local_idmap_find(&m);
	if (m.kind != LOCAL_MAP_SUBID)
		return 0;
	struct clean_job j = { .n = 0 };
	struct sbx_jail_tree trees[2];
	static const char *const names[] = { "root", "fs" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", rec->dir, names[i]);
		struct stat st;
		if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		trees[j.n].path = j.trees[j.n] = TAKE_PTR(p);
		trees[j.n].ro = false;
		j.n++;
	}
	if (!j.n)
		return 0;
	struct sbx_jail jail = { .trees = trees,
				 .n_trees = j.n,
				 .store_root = ctx->store.root,
				 .what = "removing the sandbox's files",
				 .maps = clean_maps,
				 .maps_arg = &m };
	int r = sbx_jail_run(&jail, clean_trees, &j, err);
	for (size_t i = 0; i < j.n; i++)
		free(j.trees[i]);
	if (r < 0 && !known) {
		sbx_debug("rm: %s", err->msg);
		sbx_err_clear(err);
		r = 0;
	}
	return r;
}

static int local_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	(void)force;
	if (stop_all(rec, 0, err) < 0)
		return -1;
	return clean_subids(ctx, rec, err);
}

/* --- pause, resume -------------------------------------------------------------------------- */

static int local_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
		       struct sbx_err *err)
{
	struct local_pids pids;

	(void)ctx;
	if (o->checkpoint) {
		const struct local_runtime_ops *rt = local_checkpoint_runtime(
			rec, "pause --checkpoint", err);
		if (!rt)
			return -1;
		if (local_read_pids(rec->dir, &pids) < 0)
			return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running",
					   rec->id);
		/* frozen processes cannot be written out */
		if (local_is_frozen(rec->dir, &pids) == 1 &&
		    local_sandbox_freeze(rec, &pids, false, err) < 0)
			return -1;
		if (rt->checkpoint(rec, err) < 0)
			return -1;
		/* what is left (init, the supervisor, runsc's ends) goes: the image is the sandbox */
		if (stop_all(rec, 0, err) < 0)
			return -1;
		_cleanup_free_ char *p = xasprintf("%s/pids", rec->dir);
		(void)unlink(p);
		rec->state = SBX_STATE_RELEASED;
		return 0;
	}
	if (o->release) {
		if (stop_all(rec, o->grace_ms, err) < 0)
			return -1;
		_cleanup_free_ char *p = xasprintf("%s/pids", rec->dir);
		(void)unlink(p);
		rec->state = SBX_STATE_RELEASED;
		return 0;
	}
	if (local_read_pids(rec->dir, &pids) < 0)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running", rec->id);
	if (local_sandbox_freeze(rec, &pids, true, err) < 0)
		return -1;
	rec->state = SBX_STATE_PAUSED;
	return 0;
}

static int local_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	struct local_pids pids;

	if (rec->state == SBX_STATE_PAUSED) {
		if (local_read_pids(rec->dir, &pids) < 0)
			return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running",
					   rec->id);
		if (local_sandbox_freeze(rec, &pids, false, err) < 0)
			return -1;
		local_touch_activity(rec->dir);
		rec->state = SBX_STATE_RUNNING;
		return 0;
	}
	/* released or stopped: whatever is left ends, then the sandbox boots on its files (or
	 * from a checkpoint: one cut short is settled first) */
	if (local_checkpoint_settle(rec, err) < 0 || stop_all(rec, 0, err) < 0)
		return -1;
	_cleanup_free_ char *root = xasprintf("%s/root", rec->dir);
	struct stat st;
	if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' has no files (its creation did "
				   "not finish); remove it with 'sbx rm -f %s'",
				   rec->id, rec->id);
	size_t bpf_len = 0;
	_cleanup_free_ void *bpf = NULL;
	if (local_seccomp_of(rec, rec->id, &bpf, &bpf_len, err) < 0)
		return -1;
	for (size_t i = 0; i < rec->config.n_volumes; i++)
		if (access(rec->config.volumes[i].host, F_OK) < 0)
			return sbx_err_errno(err, "cannot use volume '%s'",
					     rec->config.volumes[i].host);
	struct local_setup s = setup_of(rec);
	s.bpf = bpf;
	s.bpf_len = bpf_len;
	struct local_idmap map;
	local_idmap_of(rec, &map);
	ids_for(&s, &map);
	sbx_debug("booting %s again on its files", rec->id);
	return boot(ctx, rec, &s, err);
}

/* --- restore ------------------------------------------------------------------------------ */

static int local_restore(struct sbx_ctx *ctx, struct sbx_record *rec, const char *tree,
			 const json_t *info, struct sbx_err *err)
{
	enum sbx_state was = rec->state;
	struct local_pids pids;

	/* what runs ends; the files are exchanged whole, and only then is anything booted */
	if (local_snapshot_check(rec, info, true, err) < 0 || stop_all(rec, 0, err) < 0)
		return -1;
	struct local_setup s = setup_of(rec);
	struct local_idmap map;
	local_idmap_of(rec, &map);
	ids_for(&s, &map);
	if (unpack(ctx, rec, &s, tree, info, true, err) < 0) {
		/* nothing runs now: released, whatever it was, with its old files */
		rec->state = SBX_STATE_RELEASED;
		return -1;
	}
	sbx_test_hook("restore-unpacked");
	if (was != SBX_STATE_RUNNING && was != SBX_STATE_PAUSED) {
		_cleanup_free_ char *p = xasprintf("%s/pids", rec->dir);
		(void)unlink(p);
		rec->state = was == SBX_STATE_STOPPED ? SBX_STATE_STOPPED : SBX_STATE_RELEASED;
		local_snapshot_discard(ctx, rec);
		return 0;
	}
	rec->state = SBX_STATE_RELEASED;
	/* the old files go once it runs again */
	int r = local_resume(ctx, rec, err);
	local_snapshot_discard(ctx, rec);
	if (r < 0)
		return -1;
	if (was == SBX_STATE_PAUSED) {
		if (local_read_pids(rec->dir, &pids) < 0)
			return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running",
					   rec->id);
		if (local_sandbox_freeze(rec, &pids, true, err) < 0)
			return -1;
		rec->state = SBX_STATE_PAUSED;
	}
	return 0;
}

static const char *const local_runtimes[] = { "gvisor", NULL };

const struct sbx_provider sbx_provider_local = {
	.name = "local",
	.summary = "Linux namespaces on this host",
	/* everything but a provider's own templates */
	.caps = SBX_CAP_SECRETS | SBX_CAP_EXEC_STDIN | SBX_CAP_EXEC_TTY | SBX_CAP_EXEC_USER |
		SBX_CAP_EXEC_DETACH | SBX_CAP_PAUSE_MEMORY | SBX_CAP_RELEASE | SBX_CAP_PREVIEW |
		SBX_CAP_PREVIEW_AUTH | SBX_CAP_LIMIT_CPU | SBX_CAP_LIMIT_MEMORY |
		SBX_CAP_LIMIT_PIDS | SBX_CAP_DISK | SBX_CAP_VOLUMES | SBX_CAP_NET_NONE |
		SBX_CAP_NET_OPEN | SBX_CAP_NET_ALLOW | SBX_CAP_NET_HOST | SBX_CAP_ADD_HOST |
		SBX_CAP_HOST_PORT | SBX_CAP_IMAGE | SBX_CAP_NESTED | SBX_CAP_TTL |
		SBX_CAP_HOSTNAME | SBX_CAP_CP | SBX_CAP_EGRESS_LOG | SBX_CAP_NET_RATE |
		SBX_CAP_NET_UPDATE | SBX_CAP_FS | SBX_CAP_SNAPSHOT | SBX_CAP_CHECKPOINT,
	.default_workdir = "/workspace",
	.runtimes = local_runtimes,
	.create = local_create,
	.exec = local_exec,
	.cp_in = local_cp_in,
	.cp_out = local_cp_out,
	.fs = local_fs,
	.rm = local_rm,
	.pause = local_pause,
	.resume = local_resume,
	.log_path = local_log_path,
	.preview = local_preview,
	.egress_log_path = local_egress_log_path,
	.inspect = local_inspect,
	.update = local_live_update,
	.keepalive = local_keepalive,
	.stats = local_stats,
	.jobs_list = local_jobs_list,
	.job_get = local_job_get,
	.job_logs = local_job_logs,
	.job_kill = local_job_kill,
	.commit = local_commit,
	.snapshot = local_snapshot,
	.snapshot_rm = local_snapshot_rm,
	.snapshot_users = local_snapshot_users,
	.restore = local_restore,
};
