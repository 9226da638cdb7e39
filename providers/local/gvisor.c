/* --runtime gvisor: the local sandbox's processes run under gVisor's runsc (the CLI writes the
 * bundle, the supervisor boots it, every verb runs runsc in the sandbox's namespaces).
 *
 * The design. A gVisor sandbox is a local sandbox first: create makes the same directory,
 * files, cgroups, supervisor and init (its user, mount, pid, network, uts and ipc namespaces),
 * the same egress proxy listening in init's network namespace. Only then, the supervisor runs
 * `runsc run` for it, and nothing of the sandbox's runs beside init but runsc's processes:
 *  - runsc runs inside the sandbox's user namespace as sandbox root (never as host root, and
 *    for an ordinary user exactly as for root), in init's network namespace and, for run and
 *    restore, with its children in init's pid namespace: the sentry and the gofer die with
 *    init, so rm, release, a killed supervisor or a crashed CLI leave no runsc process behind;
 *  - in a root of its own (gvisor-runsc.c: a tmpfs pivoted into by each runsc call, gone with
 *    it) that holds nothing of the host but the system view the bundle binds read-only, /proc
 *    and a few devices, and under /tmp the sandbox's trees at fixed paths: rootfs (init's
 *    root), state (runsc's --root, DIR/gvisor/state), checkpoint, and sbx/ with the bundle
 *    and what it binds. runsc's gofer opens every mount source by path there, so none of them
 *    is a path the sandbox can change: its hostname and hosts are files sbx writes in
 *    DIR/gvisor/etc (not the sandbox's /run/sbx), its /tmp is opened without following a link.
 *    Run by root, the trees are cloned (open_tree) before joining, as the supervisor does for
 *    init. runsc is $SBX_RUNSC (absolute) or the first runsc in an absolute directory of
 *    $PATH, found at the sandbox's first boot and kept in DIR/gvisor/runsc.path for every
 *    later call (the sentry and its clients are one binary, whatever a later caller's
 *    environment says), opened before anything is mounted, and run from that descriptor with
 *    an empty environment; a client call's runsc (exec, kill) stays out of the sandbox's
 *    cgroups (what it starts runs in the sentry, charged there) and needs no root of its own:
 *    its --root is the state directory, opened before it joins and kept at a descriptor;
 *  - runsc's control socket is an abstract one, so it lives in the network namespace runsc ran
 *    in: every later runsc call (exec, checkpoint) joins the same namespaces;
 *  - the network: --net allow=/open gives runsc --network=host in init's network namespace, so
 *    the sandbox's sockets are that namespace's and reach the proxy at 127.0.0.1:3128 as a
 *    local sandbox's do (and previews reach its ports the same way); --net none gives
 *    --network=none, gVisor's own network stack with loopback only. gVisor cannot checkpoint
 *    a sandbox on the host's network stack, so pause --checkpoint needs --net none;
 *  - cgroups: runsc runs with --ignore-cgroups and sits in the sandbox's cgroups (the
 *    supervisor's child, moved into them), so the host's limits bound the sentry and the gofer
 *    as a whole, and pause freezes them (the sandbox's CPU time stands still) exactly as a
 *    local sandbox's; the limits asked for are kept inside gVisor (see "limits" below).
 *    Without a writable cgroup freezer, pause is gVisor's own (runsc pause, pause.c), never
 *    SIGSTOP to runsc's processes: the sentry does not survive stops of the stubs it traces;
 *    nor does pause --release have init pass SIGTERM on to them: gVisor sends it inside;
 *  - files: the root is init's (DIR/root with the host's system view bound read-only as a
 *    local sandbox's; an image's overlay; the --disk), served by the gofer with
 *    --file-access=shared, so sbx cp (which writes the same tree through init's mount
 *    namespace) and the sandbox see each other's writes; --volume binds the caller's trees;
 *    --secret binds the sandbox's trust bundle with its CA over the system's, as init does;
 *  - the first process is sbx-ginit (trampoline/ginit.c), sbx's own, bound read-only at
 *    /dev/.sbx-init: it reaps orphans and is the sandbox's out-of-memory killer;
 *  - state: the sentry is recorded at boot (DIR/gvisor/sentry); once it ended while init runs,
 *    the sandbox is in error (inspect says why, exec refuses in one line);
 *  - checkpoints (gvisor-checkpoint.c, struct local_runtime_ops: what a microVM runtime would
 *    fill in too): pause --checkpoint runs runsc checkpoint into DIR/gvisor/checkpoint (the
 *    sandbox's processes and memory; they end) and releases the rest; resume boots again and
 *    the supervisor's boot restores the image instead of running runsc run, then removes it.
 *    snapshot --memory checkpoints the same way, copies the files while nothing runs, keeps
 *    the image and restores the sandbox at once (runsc's --leave-running never returned
 *    here); a fork copies the image into its own directory, so its boot restores it. gVisor
 *    sandboxes copy a snapshot's tree rather than stack on it (the gofer serves one tree). A
 *    checkpoint its sbx did not see to the end is found out by looking (a note beside it);
 *  - exec (gvisor-exec.c) is runsc exec with no shell between, its streams relayed through
 *    pipes (gVisor writes a file it is given at an offset of its own); signals and timeouts
 *    reach the command inside gVisor (gvisor-signal.c). */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/json.h"
#include "core/proc.h"

bool local_gvisor(const struct sbx_record *rec)
{
	return rec->config.runtime && strcmp(rec->config.runtime, "gvisor") == 0;
}

bool local_gvisor_netstack(const struct sbx_config *c)
{
	return c->net.set && c->net.mode == SBX_NET_NONE && geteuid() == 0;
}

/* runsc as the caller's environment names it: $SBX_RUNSC (absolute), else the first
 * executable runsc in a directory of $PATH that is absolute (PATH unset: execvp's default), as
 * its real path (a link or a directory changed later redirects nothing) */
static const char *runsc_from_env(char *buf, size_t len)
{
	const char *p = getenv("SBX_RUNSC");
	char cand[PATH_MAX];

	if (p && *p) {
		if (p[0] != '/' || access(p, X_OK) < 0 || !realpath(p, buf))
			return NULL;
		return buf;
	}
	const char *path = getenv("PATH");
	char def[256];
	if (!path) {
		size_t n = confstr(_CS_PATH, def, sizeof(def));
		path = n > 0 && n <= sizeof(def) ? def : "/bin:/usr/bin";
	}
	for (const char *d = path; *d;) {
		size_t n = strcspn(d, ":");
		/* a relative directory (or the empty one, the working directory) is never searched */
		if (n && d[0] == '/' && n + sizeof("/runsc") <= sizeof(cand)) {
			memcpy(cand, d, n);
			memcpy(cand + n, "/runsc", sizeof("/runsc"));
			struct stat st;
			if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
			    access(cand, X_OK) == 0 && realpath(cand, buf) && strlen(buf) < len)
				return buf;
		}
		d += n + (d[n] == ':');
	}
	return NULL;
}

const char *local_runsc_path(const char *dir)
{
	static char buf[PATH_MAX];

	if (dir) {
		/* the sandbox's own: recorded at its first boot (local_runsc_record) */
		_cleanup_free_ char *rp = xasprintf("%s/gvisor/runsc.path", dir);
		_cleanup_close_ int fd = open(rp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			if (n <= 1 || buf[0] != '/' || memchr(buf, 0, (size_t)n))
				return NULL;
			buf[n] = 0;
			if (buf[n - 1] == '\n')
				buf[n - 1] = 0;
			return buf;
		}
		if (errno != ENOENT)
			return NULL;
		/* a sandbox booted before sbx recorded it: as the environment says */
	}
	return runsc_from_env(buf, sizeof(buf));
}

int local_runsc_record(const char *dir, struct sbx_err *err)
{
	_cleanup_free_ char *rp = xasprintf("%s/gvisor/runsc.path", dir);
	char buf[PATH_MAX];

	if (access(rp, F_OK) == 0)
		return 0;
	const char *p = runsc_from_env(buf, sizeof(buf));
	if (!p)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "--runtime gvisor needs runsc");
	_cleanup_free_ char *line = xasprintf("%s\n", p);
	return sbx_write_atomic(rp, line, strlen(line), false, err);
}

int local_gvisor_check(const struct sbx_record *rec, struct sbx_err *err)
{
	const struct sbx_config *c = &rec->config;
	const char *p = getenv("SBX_RUNSC");

	if (p && *p && p[0] != '/')
		return sbx_err_set(err, SBX_E_USAGE, "SBX_RUNSC must be an absolute path, not '%s'",
				   p);
	if (!local_runsc_path(NULL)) {
		if (p && *p)
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "--runtime gvisor needs runsc at %s (install gVisor: "
					   "apt-get install runsc)",
					   p);
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor needs runsc in a directory of PATH, or its "
				   "absolute path in SBX_RUNSC (install gVisor: apt-get install "
				   "runsc)");
	}
	if (c->net.set && c->net.mode == SBX_NET_HOST)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --net host (its sandbox has a "
				   "network namespace of its own)");
	if (local_gvisor_netstack(c) && c->net.n_host_ports)
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"--runtime gvisor --net none (run by root) runs gVisor's own "
			"network stack, where --host-port's forwarder cannot listen: use "
			"--net allow= for a sandbox without egress but its --host-port");
	if (c->nested)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --nested (gVisor's kernel makes "
				   "no namespaces for the sandbox's processes to nest)");
	return 0;
}

/* --- limits --------------------------------------------------------------------------------
 * gVisor's kernel runs in the sandbox's cgroups with its processes, and both its memory and
 * its threads count there: the sentry's own (a few dozen), a host thread or two per process
 * of the sandbox (ptrace's stubs), the gofer's. A cgroup limit reached kills or starves gVisor
 * as a whole. So the limits the sandbox asks for are kept inside gVisor, and the host's
 * cgroups hold the sandbox, gVisor and all, with room beside them:
 *  - --memory M: gVisor's kernel is told it has M (its /proc/meminfo says so), and sbx-ginit,
 *    the sandbox's first process, kills the process holding the most memory once the
 *    sandbox's processes hold more than M between them (gVisor 20221219 has no limit of its
 *    own: its memory cgroup only counts); the host's cgroup holds the whole at
 *    M + max(256 MiB, M/4);
 *  - --pids-limit N: RLIMIT_NPROC N for the sandbox's processes, which gVisor counts per user
 *    over the sandbox (threads included) and refuses past (EAGAIN), as Linux does; its pids
 *    cgroup is mounted nowhere a process exec'd into the sandbox starts in. ptrace's stubs
 *    take a dozen host threads and more per process, so the host's pids cgroup holds the whole
 *    at 32N + 512;
 *  - --cpus: the host's CPU quota, and gVisor sees as many CPUs as init may use. */
#define GV_MEM_ROOM (256LL << 20)
#define GV_PIDS_PER 32
#define GV_PIDS_ROOM 512

void local_gvisor_host_limits(const struct sbx_config *c, struct local_limits *lim)
{
	lim->memory = c->memory > 0
		? c->memory + (c->memory / 4 > GV_MEM_ROOM ? c->memory / 4 : GV_MEM_ROOM)
		: 0;
	lim->pids = c->pids_limit > 0 ? GV_PIDS_PER * c->pids_limit + GV_PIDS_ROOM : 0;
	lim->cpu_millis = c->cpu_millis;
}

/* --- the bundle -------------------------------------------------------------------------- */

static json_t *strv_array(const char *const *v)
{
	json_t *a = json_array();

	for (; v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static json_t *mount_json(const char *dest, const char *type, const char *src, const char *opts)
{
	json_t *m = json_object();
	json_t *o = json_array();
	_cleanup_free_ char *copy = xstrdup(opts);
	char *save = NULL;

	json_object_set_new(m, "destination", json_string(dest));
	json_object_set_new(m, "type", json_string(type));
	json_object_set_new(m, "source", json_string(src));
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(o, json_string(t));
	json_object_set_new(m, "options", o);
	return m;
}

static json_t *bundle_config(const struct sbx_record *rec)
{
	const struct sbx_config *c = &rec->config;
	/* docker's default set */
	static const char *const caps[] = { "CAP_CHOWN",
					    "CAP_DAC_OVERRIDE",
					    "CAP_FSETID",
					    "CAP_FOWNER",
					    "CAP_MKNOD",
					    "CAP_NET_RAW",
					    "CAP_SETGID",
					    "CAP_SETUID",
					    "CAP_SETFCAP",
					    "CAP_SETPCAP",
					    "CAP_NET_BIND_SERVICE",
					    "CAP_SYS_CHROOT",
					    "CAP_KILL",
					    "CAP_AUDIT_WRITE",
					    NULL };
	json_t *cfg = json_object();
	json_t *proc = json_object();
	json_t *user = json_object();
	json_t *env = json_array();

	json_object_set_new(cfg, "ociVersion", json_string("1.0.2"));
	json_object_set_new(user, "uid", json_integer(0));
	json_object_set_new(user, "gid", json_integer(0));
	json_object_set_new(proc, "user", user);
	/* the first process is sbx's own (gvisor-runsc.c binds it), never one of the sandbox's
	 * files; with --memory it watches what the sandbox's processes hold */
	json_t *args = json_array();
	json_array_append_new(args, json_string("/dev/.sbx-init"));
	if (c->memory > 0) {
		char kib[32];
		snprintf(kib, sizeof(kib), "%lld", c->memory / 1024);
		json_array_append_new(args, json_string(kib));
	}
	json_object_set_new(proc, "args", args);
	json_array_append_new(env,
			      json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
					  "/usr/bin:/sbin:/bin"));
	json_array_append_new(env, json_string("HOME=/root"));
	_cleanup_free_ char *hn = xasprintf("HOSTNAME=%s", local_hostname(rec));
	json_array_append_new(env, json_string(hn));
	for (char **e = c->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	json_object_set_new(proc, "env", env);
	json_object_set_new(proc, "cwd", json_string("/"));
	json_t *cp = json_object();
	json_object_set_new(cp, "bounding", strv_array(caps));
	json_object_set_new(cp, "effective", strv_array(caps));
	json_object_set_new(cp, "permitted", strv_array(caps));
	json_object_set_new(proc, "capabilities", cp);
	json_t *rl = json_array(), *nofile = json_object();
	json_object_set_new(nofile, "type", json_string("RLIMIT_NOFILE"));
	json_object_set_new(nofile, "hard", json_integer(65536));
	json_object_set_new(nofile, "soft", json_integer(65536));
	json_array_append_new(rl, nofile);
	if (c->pids_limit > 0) {
		/* --pids-limit: each user's processes and threads, counted by gVisor */
		json_t *nproc = json_object();
		json_object_set_new(nproc, "type", json_string("RLIMIT_NPROC"));
		json_object_set_new(nproc, "hard", json_integer(c->pids_limit));
		json_object_set_new(nproc, "soft", json_integer(c->pids_limit));
		json_array_append_new(rl, nproc);
	}
	json_object_set_new(proc, "rlimits", rl);
	json_object_set_new(proc, "noNewPrivileges", json_true());
	json_object_set_new(cfg, "process", proc);

	json_t *root = json_object();
	json_object_set_new(root, "path", json_string("/tmp/rootfs"));
	json_object_set_new(root, "readonly", json_false());
	json_object_set_new(cfg, "root", root);
	json_object_set_new(cfg, "hostname", json_string(local_hostname(rec)));

	json_t *mounts = json_array();
	json_array_append_new(mounts, mount_json("/proc", "proc", "proc", "nosuid,noexec,nodev"));
	json_array_append_new(mounts,
			      mount_json("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"));
	/* every source is a path of runsc's own root (gvisor-runsc.c), none the sandbox's: the
	 * host's system view, read-only, as a local sandbox's (links were copied into root/ at
	 * create; an image brings its own) */
	static const char *const sys[] = { "usr",   "bin",   "sbin",   "lib",
					   "lib32", "lib64", "libx32", "etc" };
	bool image = c->image.layers && c->image.layers[0];
	for (size_t i = 0; i < (image ? 0 : ARRAY_SIZE(sys)); i++) {
		char host[64];
		struct stat st;
		snprintf(host, sizeof(host), "/%s", sys[i]);
		if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		json_array_append_new(mounts, mount_json(host, "bind", host, "rbind,ro,nosuid"));
	}
	/* the sandbox's hostname and hosts, which sbx writes in DIR/gvisor/etc */
	json_array_append_new(
		mounts, mount_json("/etc/hostname", "bind", "/tmp/sbx/etc/hostname", "bind,ro"));
	json_array_append_new(mounts,
			      mount_json("/etc/hosts", "bind", "/tmp/sbx/etc/hosts", "bind,ro"));
	/* the sandbox's /tmp is its own files (gVisor would put a tmpfs there that cp cannot
	 * reach) */
	json_array_append_new(mounts, mount_json("/tmp", "bind", "/tmp/sbx/tmp", "bind,rw"));
	/* the first process, sbx-ginit */
	json_array_append_new(mounts,
			      mount_json("/dev/.sbx-init", "bind", "/tmp/sbx/init", "bind,ro"));
	/* --volume: the caller's trees, id-mapped for a sandbox run by root as init's are */
	for (size_t i = 0; i < c->n_volumes; i++) {
		char src[64];
		snprintf(src, sizeof(src), "/tmp/sbx/vol/%zu", i);
		json_array_append_new(mounts,
				      mount_json(c->volumes[i].dest, "bind", src,
						 c->volumes[i].ro ? "rbind,ro" : "rbind,rw"));
	}
	json_object_set_new(cfg, "mounts", mounts);

	json_t *lnx = json_object();
	json_t *ns = json_array();
	static const char *const nss[] = { "pid", "ipc", "uts", "mount" };
	for (size_t i = 0; i < ARRAY_SIZE(nss); i++) {
		json_t *n = json_object();
		json_object_set_new(n, "type", json_string(nss[i]));
		json_array_append_new(ns, n);
	}
	json_object_set_new(lnx, "namespaces", ns);
	json_object_set_new(cfg, "linux", lnx);
	return cfg;
}

static int own_dir(const char *path, uid_t uid, gid_t gid, struct sbx_err *err)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot create '%s'", path);
	if (lchown(path, uid, gid) < 0)
		return sbx_err_errno(err, "cannot give '%s' to the sandbox", path);
	return 0;
}

static void empty_dir(const char *path);

/* runsc's state of an earlier boot goes: each boot is a new container of the same id */
void local_gvisor_state_reset(const char *dir)
{
	_cleanup_free_ char *st = xasprintf("%s/gvisor/state", dir);
	empty_dir(st);
}

static void empty_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void)sbx_rm_rf_at(dirfd(d), e->d_name);
	closedir(d);
}

int local_gvisor_prepare(const struct sbx_record *rec, uid_t uid, gid_t gid, const char *hosts,
			 struct sbx_err *err)
{
	_cleanup_free_ char *g = xasprintf("%s/gvisor", rec->dir);
	_cleanup_free_ char *b = xasprintf("%s/gvisor/bundle", rec->dir);
	_cleanup_free_ char *st = xasprintf("%s/gvisor/state", rec->dir);
	_cleanup_free_ char *ck = xasprintf("%s/gvisor/checkpoint", rec->dir);
	_cleanup_free_ char *etc = xasprintf("%s/gvisor/etc", rec->dir);
	_cleanup_free_ char *cf = xasprintf("%s/gvisor/bundle/config.json", rec->dir);
	_cleanup_free_ char *hn = xasprintf("%s\n", local_hostname(rec));

	if ((mkdir(g, 0700) < 0 && errno != EEXIST) || own_dir(b, uid, gid, err) < 0 ||
	    own_dir(st, uid, gid, err) < 0 || own_dir(ck, uid, gid, err) < 0 ||
	    (mkdir(etc, 0755) < 0 && errno != EEXIST))
		return err->kind ? -1 : sbx_err_errno(err, "cannot create '%s'", g);
	if (local_runsc_record(rec->dir, err) < 0)
		return -1;
	empty_dir(st);
	/* sbx's, not the sandbox's: sandbox root owns neither them nor their directory */
	struct {
		const char *name, *text;
	} files[] = { { "hostname", hn }, { "hosts", hosts } };
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *f = xasprintf("%s/%s", etc, files[i].name);
		if (sbx_write_atomic(f, files[i].text, strlen(files[i].text), false, err) < 0)
			return -1;
		if (chmod(f, 0644) < 0)
			return sbx_err_errno(err, "cannot write '%s'", f);
	}
	if (chmod(etc, 0755) < 0)
		return sbx_err_errno(err, "cannot write '%s'", etc);
	json_t *cfg = bundle_config(rec);
	char *text = json_dumps(cfg, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(cfg);
	int r = sbx_write_atomic(cf, text, strlen(text), false, err);
	free(text);
	if (r < 0)
		return -1;
	if (chmod(cf, 0644) < 0)
		return sbx_err_errno(err, "cannot write '%s'", cf);
	return 0;
}

/* --- boot (the supervisor) ---------------------------------------------------------------- */

/* waits up to ms for pid (a child) to end: its wait status, -1 on error, -2 on time out (it
 * is then killed and reaped) */
static int wait_for(pid_t pid, long long ms)
{
	int pidfd = sbx_pidfd_open(pid);

	if (pidfd >= 0) {
		int r = sbx_pidfd_wait(pidfd, ms > INT_MAX ? INT_MAX : (int)ms);
		close(pidfd);
		if (r < 0) {
			kill(pid, SIGKILL);
			(void)local_runsc_wait(pid);
			return -2;
		}
	}
	return local_runsc_wait(pid);
}

/* the sandbox's gVisor kernel: runsc's sandbox process, in init's pid namespace, recorded in
 * DIR/gvisor/sentry ("PID START") for the state to be looked at; -1 with msg when it cannot
 * be written (unrecorded, a dead kernel would pass for a running sandbox) */
static int record_sentry(const char *dir, pid_t init, char *msg, size_t msglen)
{
	_cleanup_free_ pid_t *v = NULL;
	size_t n = local_ns_members(init, &v);

	for (size_t i = 0; i < n; i++) {
		char p[64];
		size_t len = 0;
		snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)v[i]);
		_cleanup_free_ char *cmd = sbx_read_file(p, 4096, &len);
		unsigned long long start;
		if (!cmd || !len || strcmp(cmd, "runsc-sandbox") != 0 ||
		    sbx_proc_starttime(v[i], &start) < 0)
			continue;
		_cleanup_free_ char *f = xasprintf("%s/gvisor/sentry", dir);
		_cleanup_free_ char *text = xasprintf("%d %llu\n", (int)v[i], start);
		struct sbx_err err = { 0 };
		if (sbx_write_atomic(f, text, strlen(text), false, &err) < 0) {
			snprintf(msg, msglen, "%s", err.msg);
			return -1;
		}
		return 0;
	}
	return 0;
}

bool local_gvisor_gone(const struct sbx_record *rec, char *why, size_t len)
{
	_cleanup_free_ char *f = xasprintf("%s/gvisor/sentry", rec->dir);
	_cleanup_free_ char *text = sbx_read_file(f, 128, NULL);
	long long pid = 0;
	unsigned long long start = 0;

	if (!text || sscanf(text, "%lld %llu", &pid, &start) != 2 || pid <= 0 ||
	    sbx_proc_alive((pid_t)pid, start))
		return false;
	/* ended into a checkpoint (its look says what the sandbox is) */
	if (local_checkpoint_noted(rec->dir))
		return false;
	long long oom = local_cgroup_oom_kills(rec->dir);
	if (oom > 0)
		snprintf(why, len,
			 "its gVisor kernel (runsc) was killed for memory: the sandbox and gVisor "
			 "together went past what the host's cgroup holds them to (--memory and "
			 "gVisor's own)");
	else
		snprintf(why, len, "its gVisor kernel (runsc) has ended");
	return true;
}

long long local_gvisor_oom_kills(const char *dir)
{
	_cleanup_free_ char *p = xasprintf("%s/gvisor/runsc.log", dir);
	_cleanup_free_ char *t = sbx_read_file(p, 1 << 20, NULL);
	static const char mark[] = "sbx: out of memory: ";
	long long n = 0;

	for (char *l = t; l && *l;) {
		if (strncmp(l, mark, sizeof(mark) - 1) == 0)
			n++;
		char *nl = strchr(l, '\n');
		l = nl ? nl + 1 : NULL;
	}
	return n;
}

int local_gvisor_start(const struct local_setup *s, pid_t init, const char *image, int logfd,
		       char *msg, size_t len)
{
	struct sbx_err err = { 0 };
	long long timeout_s = 60;
	const char *t = getenv("SBX_GVISOR_BOOT_TIMEOUT");
	const char *what = image ? "restore" : "run";

	if (t && *t && sbx_parse_int(t, 1, 86400, &timeout_s) < 0) {
		snprintf(msg, len, "SBX_GVISOR_BOOT_TIMEOUT must be a number of seconds, not '%s'",
			 t);
		return -1;
	}
	_cleanup_free_ char *sentry = xasprintf("%s/gvisor/sentry", s->dir);
	(void)unlink(sentry);
	struct local_runsc r = { .dir = s->dir,
				 .init = init,
				 .map_range = s->map.kind != LOCAL_MAP_SELF,
				 .net_none = local_gvisor_netstack(s->config),
				 .checkpoint = image != NULL,
				 .fd = { -1, logfd, logfd },
				 .setup = s };
	_cleanup_free_ char *ip = image ? xasprintf("--image-path=/tmp/checkpoint/%s", image)
					: NULL;
	char *run[] = { "run", "--detach", "--bundle=/tmp/sbx/bundle", (char *)s->id, NULL };
	char *rst[] = {
		"restore", "--detach", "--bundle=/tmp/sbx/bundle", ip, (char *)s->id, NULL
	};
	/* runsc's processes are charged to the sandbox and frozen with it */
	pid_t pid = local_runsc_spawn(&r, image ? rst : run, &err);
	if (pid < 0) {
		snprintf(msg, len, "%s", err.msg);
		return -1;
	}
	int st = wait_for(pid, timeout_s * 1000);
	if (st == -2) {
		snprintf(msg, len,
			 "gVisor did not start within %lld s (runsc %s did not return; "
			 "SBX_GVISOR_BOOT_TIMEOUT sets the wait)",
			 timeout_s, what);
		return -1;
	}
	if (st != 0) {
		char last[1024];
		local_runsc_log_tail(logfd, last, sizeof(last), "no message");
		snprintf(msg, len, "runsc %s failed: %s", what, last);
		return -1;
	}
	return record_sentry(s->dir, init, msg, len) < 0 ? -2 : 0;
}

int local_gvisor_boot(const struct local_setup *s, pid_t init, char *msg, size_t len)
{
	/* a checkpoint: its processes restored instead (gvisor-checkpoint.c) */
	if (local_runtime_gvisor.image_size(s->dir) >= 0) {
		struct local_boot b = { .setup = s, .init = init };
		return local_runtime_gvisor.restore(&b, msg, len);
	}
	/* runsc's messages: a file, as what runsc run is given becomes the stdio of the
	 * sandbox's first process too (a pipe would never end) */
	_cleanup_free_ char *logp = xasprintf("%s/gvisor/runsc.log", s->dir);
	_cleanup_close_ int logfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
					 0600);
	if (logfd < 0) {
		snprintf(msg, len, "cannot create '%s': %s", logp, strerror(errno));
		return -1;
	}
	return local_gvisor_start(s, init, NULL, logfd, msg, len) < 0 ? -1 : 0;
}

int local_gvisor_reboot(const struct sbx_record *rec, pid_t init, char *msg, size_t len)
{
	const struct sbx_config *c = &rec->config;
	struct local_setup s = { .dir = rec->dir,
				 .id = rec->id,
				 .config = c,
				 .volumes = c->volumes,
				 .n_volumes = c->n_volumes,
				 .image = c->image.layers && c->image.layers[0],
				 .gvisor = true };
	_cleanup_free_ char *ca = NULL;

	local_idmap_of(rec, &s.map);
	s.map_range = s.map.kind == LOCAL_MAP_RANGE;
	if (c->n_secrets) {
		_cleanup_free_ char *cap = xasprintf("%s/secrets/ca.crt", rec->dir);
		if (!(ca = sbx_read_file(cap, 1 << 16, NULL))) {
			snprintf(msg, len, "cannot read '%s': %s", cap, strerror(errno));
			return -1;
		}
		s.ca_pem = ca;
	}
	return local_gvisor_boot(&s, init, msg, len);
}
