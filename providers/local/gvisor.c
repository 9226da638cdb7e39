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
 *  - in a mount namespace of its own (made by each runsc call, gone with it) whose /tmp is a
 *    small tmpfs holding the sandbox's trees at fixed paths: /tmp/rootfs (DIR/root), /tmp/bundle
 *    (DIR/gvisor/bundle: config.json, written by sbx with jansson), /tmp/state (runsc's --root,
 *    DIR/gvisor/state) and /tmp/checkpoint; run by root, the trees are cloned (open_tree) before
 *    joining, as the supervisor does for init; runsc is $SBX_RUNSC (absolute) or the first runsc
 *    in an absolute directory of $PATH, found at the sandbox's first boot and kept in
 *    DIR/gvisor/runsc.path for every later call (the sentry and its clients are one binary,
 *    whatever a later caller's environment says), opened before the tmpfs hides /tmp, and run
 *    with an empty environment; a client call's runsc (exec, kill) stays out of the sandbox's
 *    cgroups (what it starts runs in the sentry, charged there) and needs no mount namespace:
 *    its --root is the state directory, opened before it joins and kept at a descriptor;
 *  - runsc's control socket is an abstract one, so it lives in the network namespace runsc ran
 *    in: every later runsc call (exec, checkpoint) joins the same namespaces;
 *  - the network: --net allow=/open gives runsc --network=host in init's network namespace, so
 *    the sandbox's sockets are that namespace's and reach the proxy at 127.0.0.1:3128 as a
 *    local sandbox's do (and previews reach its ports the same way); --net none gives
 *    --network=none, gVisor's own network stack with loopback only. gVisor cannot checkpoint
 *    a sandbox on the host's network stack, so pause --checkpoint needs --net none;
 *  - cgroups: runsc runs with --ignore-cgroups and sits in the sandbox's cgroups (the
 *    supervisor's child, moved into them), so --memory, --pids-limit and --cpus bound the
 *    sentry and the gofer as a whole, and pause freezes them (the sandbox's CPU time stands
 *    still) exactly as a local sandbox's;
 *  - files: the root is DIR/root with the host's system view bound read-only, as a local
 *    sandbox's, served by the gofer with --file-access=shared, so sbx cp (which writes the same
 *    tree through init's mount namespace) and the sandbox see each other's writes;
 *  - checkpoints: pause --checkpoint runs runsc checkpoint into DIR/gvisor/checkpoint (the
 *    sandbox's processes and memory; they end) and releases the rest; resume boots again and
 *    the supervisor runs runsc restore from it instead of run, then removes it. snapshot
 *    --memory checkpoints the same way, links the image into the snapshot and restores the
 *    sandbox at once (runsc's --leave-running never returned here); a fork copies the image
 *    into its own directory, so its boot restores it. gVisor sandboxes copy a snapshot's tree
 *    rather than stack on it (the gofer serves one tree). The runtime interface (struct
 *    local_runtime_ops, gvisor-checkpoint.c) is what a microVM runtime would fill in too;
 *  - exec (gvisor-exec.c) is runsc exec with no shell between, its streams relayed through
 *    pipes (gVisor writes a file it is given at an offset of its own); signals and timeouts
 *    reach the command inside gVisor (gvisor-signal.c). */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/json.h"
#include "core/proc.h"
#include "core/strbuf.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

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
	if (c->image.layers && c->image.layers[0])
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --image yet (it runs on the "
				   "host's system view)");
	if (c->nested)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --nested");
	if (c->disk > 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "--runtime gvisor does not take --disk");
	if (c->n_volumes)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --volume yet");
	if (c->n_secrets)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--runtime gvisor does not take --secret yet");
	return 0;
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
	static const char *const sleeper[] = { "/bin/sleep", "infinity", NULL };
	json_t *cfg = json_object();
	json_t *proc = json_object();
	json_t *user = json_object();
	json_t *env = json_array();

	json_object_set_new(cfg, "ociVersion", json_string("1.0.2"));
	json_object_set_new(user, "uid", json_integer(0));
	json_object_set_new(user, "gid", json_integer(0));
	json_object_set_new(proc, "user", user);
	json_object_set_new(proc, "args", strv_array(sleeper));
	json_array_append_new(env,
			      json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
					  "/usr/bin:/sbin:/bin"));
	json_array_append_new(env, json_string("HOME=/root"));
	_cleanup_free_ char *hn = xasprintf("HOSTNAME=%s", local_hostname(rec));
	json_array_append_new(env, json_string(hn));
	for (char **e = c->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	json_object_set_new(proc, "env", env);
	json_object_set_new(proc, "cwd", json_string(c->workdir ? c->workdir : "/workspace"));
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
	/* the host's system view, read-only, as a local sandbox's (links were copied into
	 * root/ at create) */
	static const char *const sys[] = { "usr",   "bin",   "sbin",   "lib",
					   "lib32", "lib64", "libx32", "etc" };
	for (size_t i = 0; i < ARRAY_SIZE(sys); i++) {
		char host[64];
		struct stat st;
		snprintf(host, sizeof(host), "/%s", sys[i]);
		if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		json_array_append_new(mounts, mount_json(host, "bind", host, "rbind,ro,nosuid"));
	}
	json_array_append_new(
		mounts,
		mount_json("/etc/hostname", "bind", "/tmp/rootfs/run/sbx/hostname", "bind,ro"));
	json_array_append_new(
		mounts, mount_json("/etc/hosts", "bind", "/tmp/rootfs/run/sbx/hosts", "bind,ro"));
	/* the sandbox's /tmp is its own files (gVisor would put a tmpfs there that cp cannot
	 * reach) */
	json_array_append_new(mounts, mount_json("/tmp", "bind", "/tmp/rootfs/tmp", "rbind,rw"));
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

int local_gvisor_prepare(const struct sbx_record *rec, uid_t uid, gid_t gid, struct sbx_err *err)
{
	_cleanup_free_ char *g = xasprintf("%s/gvisor", rec->dir);
	_cleanup_free_ char *b = xasprintf("%s/gvisor/bundle", rec->dir);
	_cleanup_free_ char *st = xasprintf("%s/gvisor/state", rec->dir);
	_cleanup_free_ char *ck = xasprintf("%s/gvisor/checkpoint", rec->dir);
	_cleanup_free_ char *cf = xasprintf("%s/gvisor/bundle/config.json", rec->dir);

	if ((mkdir(g, 0700) < 0 && errno != EEXIST) || own_dir(b, uid, gid, err) < 0 ||
	    own_dir(st, uid, gid, err) < 0 || own_dir(ck, uid, gid, err) < 0)
		return err->kind ? -1 : sbx_err_errno(err, "cannot create '%s'", g);
	if (local_runsc_record(rec->dir, err) < 0)
		return -1;
	empty_dir(st);
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

/* --- running runsc ----------------------------------------------------------------------- */

static _noreturn_ void child_fail(const char *what)
{
	char buf[300];
	int n = snprintf(buf, sizeof(buf), "sbx: error: runsc: cannot %s: %s\n", what,
			 strerror(errno));
	(void)!write(2, buf, n > 0 && (size_t)n < sizeof(buf) ? (size_t)n : 0);
	_exit(125);
}

static int attach(int fd, const char *at)
{
	if (mkdir(at, 0755) < 0 && errno != EEXIST)
		return -1;
	return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH);
}

static _noreturn_ void runsc_child(const struct local_runsc *r, char *const *args,
				   const char *runsc)
{
	static const char *const names[] = { "rootfs", "bundle", "state", "checkpoint" };
	static const char *const sub[] = { "root", "gvisor/bundle", "gvisor/state",
					   "gvisor/checkpoint" };
	/* a client call needs runsc's state alone, which it reaches through a descriptor: no
	 * trees, no mount namespace */
	size_t n = r->client ? 0 : r->checkpoint ? 4 : 3;
	int fds[4] = { -1, -1, -1, -1 };
	char p[PATH_MAX];

	for (int i = 0; i < 3; i++) {
		int fd = r->fd[i] >= 0 ? r->fd[i] : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd < 0 || dup2(fd, i) < 0)
			_exit(125);
	}
	/* nothing of the caller stays open (a lock held by the waiting parent would stay held) */
	syscall(SYS_close_range, 3, ~0U, 0);
	if (r->client) {
		snprintf(p, sizeof(p), "%s/gvisor/state", r->dir);
		int st = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW);
		if (st < 0 ||
		    (st != LOCAL_RUNSC_STATE_FD &&
		     (dup2(st, LOCAL_RUNSC_STATE_FD) < 0 || close(st) < 0)))
			child_fail("open runsc's state");
	}
	/* the binary, opened where its path means what the caller meant (our /tmp is runsc's
	 * tmpfs later) */
	int exe = open(runsc, O_PATH | O_CLOEXEC);
	if (exe < 0)
		child_fail("run runsc");
	/* run by root: the trees are ours to clone before we become sandbox root */
	bool clone_first = geteuid() == 0;
	for (size_t i = 0; clone_first && i < n; i++) {
		snprintf(p, sizeof(p), "%s/%s", r->dir, sub[i]);
		if ((fds[i] = local_clone_tree(p)) < 0)
			child_fail("open the sandbox's files");
	}
	/* the sandbox's cgroups, its freezer too: runsc's processes are its processes (a client
	 * call's runsc is not: what it starts runs in the sentry, charged there) */
	if (!r->client && local_cgroup_enter(r->dir, getpid()) < 0 && geteuid() == 0)
		child_fail("join the sandbox's cgroups");
	int pidfd = sbx_pidfd_open(r->init);
	if (pidfd < 0)
		child_fail("find the sandbox's init");
	if (setns(pidfd, CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) < 0)
		child_fail("join the sandbox's namespaces");
	if ((r->map_range && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		child_fail("become root in the sandbox");
	/* a process whose children's pid namespace is not its own makes no threads: runsc runs
	 * in a child of ours, born in init's pid namespace, and we wait for it */
	{
		pid_t c = fork();
		if (c < 0)
			child_fail("fork");
		if (c > 0) {
			int st = local_runsc_wait(c);
			_exit(st < 0 ? 125 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	}
	if (!r->client &&
	    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0))
		child_fail("make a mount namespace");
	/* an ordinary user's trees are cloned now, before the tmpfs hides them (its store may
	 * be under /tmp) */
	for (size_t i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/%s", r->dir, sub[i]);
		if (fds[i] < 0 && (fds[i] = local_clone_tree(p)) < 0)
			child_fail("open the sandbox's files");
	}
	if (!r->client &&
	    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
		child_fail("mount a tmpfs at /tmp");
	/* the /proc of the pid namespace runsc runs in (runsc reads its own and its children's) */
	if (!r->client &&
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_fail("mount /proc");
	for (size_t i = 0; i < n; i++) {
		char at[64];
		snprintf(at, sizeof(at), "/tmp/%s", names[i]);
		if (attach(fds[i], at) < 0)
			child_fail("attach the sandbox's files");
		close(fds[i]);
	}
	/* runsc's global flags, then the caller's */
	size_t na = 0;
	while (args[na])
		na++;
	const char **argv = xcalloc(na + 8, sizeof(char *));
	size_t k = 0;
	argv[k++] = "runsc";
	argv[k++] = r->client ? "--root=" LOCAL_RUNSC_CLIENT_ROOT : "--root=/tmp/state";
	argv[k++] = "--ignore-cgroups";
	argv[k++] = "--file-access=shared";
	argv[k++] = r->net_none ? "--network=none" : "--network=host";
	for (size_t i = 0; i < na; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	if (chdir(r->client ? "/" : "/tmp") < 0)
		child_fail(r->client ? "enter /" : "enter /tmp");
	char *envp[] = { NULL };
	syscall(SYS_execveat, exe, "", (char *const *)argv, envp, AT_EMPTY_PATH);
	/* a script: its interpreter opens it as /dev/fd/N, which must stay open across the exec */
	if (errno == ENOENT && fcntl(exe, F_SETFD, 0) == 0)
		syscall(SYS_execveat, exe, "", (char *const *)argv, envp, AT_EMPTY_PATH);
	child_fail("run runsc");
}

pid_t local_runsc_spawn(const struct local_runsc *r, char *const *args, struct sbx_err *err)
{
	const char *runsc = local_runsc_path(r->dir);

	if (!runsc)
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"--runtime gvisor needs runsc: the one this sandbox was made with "
			"is gone (see '%s/gvisor/runsc.path')",
			r->dir);
	if (access(runsc, X_OK) < 0)
		return sbx_err_errno(err, "cannot run runsc '%s', which this sandbox was made with",
				     runsc);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return sbx_err_errno(err, "cannot start runsc");
	if (pid == 0)
		runsc_child(r, args, runsc);
	return pid;
}

int local_runsc_wait(pid_t pid)
{
	int st;

	for (;;) {
		pid_t w = waitpid(pid, &st, 0);
		if (w == pid)
			return st;
		if (w < 0 && errno != EINTR)
			return -1;
	}
}

/* --- boot (the supervisor) ---------------------------------------------------------------- */

char *local_checkpoint_dir(const char *dir)
{
	return xasprintf("%s/gvisor/checkpoint", dir);
}

static long long tree_size(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	long long sum = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				sum += tree_size(sub);
		} else {
			sum += (long long)st.st_blocks * 512;
		}
	}
	closedir(d);
	return sum;
}

long long local_checkpoint_size(const char *dir)
{
	_cleanup_free_ char *ck = local_checkpoint_dir(dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
	struct stat st;

	if (lstat(img, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	int fd = open(ck, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -1 : tree_size(fd);
}

int local_gvisor_boot(const char *dir, const char *id, pid_t init, bool map_range, bool net_none,
		      char *msg, size_t len)
{
	struct sbx_err err = { 0 };
	bool restore = local_checkpoint_size(dir) >= 0;
	/* runsc's messages: a file, as what runsc run is given becomes the stdio of the
	 * sandbox's first process too (a pipe would never end) */
	_cleanup_free_ char *logp = xasprintf("%s/gvisor/runsc.log", dir);
	int logfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (logfd < 0) {
		snprintf(msg, len, "cannot create '%s': %s", logp, strerror(errno));
		return -1;
	}
	struct local_runsc r = { .dir = dir,
				 .init = init,
				 .map_range = map_range,
				 .net_none = net_none,
				 .checkpoint = restore,
				 .fd = { -1, -1, logfd } };
	char *run[] = { "run", "--detach", "--bundle=/tmp/bundle", (char *)id, NULL };
	char *rst[] = {
		"restore",  "--detach", "--bundle=/tmp/bundle", "--image-path=/tmp/checkpoint",
		(char *)id, NULL
	};
	/* runsc's processes are charged to the sandbox and frozen with it */
	pid_t pid = local_runsc_spawn(&r, restore ? rst : run, &err);
	if (pid < 0) {
		close(logfd);
		snprintf(msg, len, "%s", err.msg);
		return -1;
	}
	int st = local_runsc_wait(pid);
	if (st != 0) {
		char out[1024];
		ssize_t got = pread(logfd, out, sizeof(out) - 1, 0);
		size_t n = got > 0 ? (size_t)got : 0;
		out[n] = 0;
		while (n && out[n - 1] == '\n')
			out[--n] = 0;
		char *nl = strrchr(out, '\n');
		close(logfd);
		snprintf(msg, len, "runsc %s failed: %s", restore ? "restore" : "run",
			 nl ? nl + 1 : (n ? out : "no message"));
		return -1;
	}
	close(logfd);
	if (restore) {
		/* restored: the image is spent (the next checkpoint writes a new one) */
		_cleanup_free_ char *ck = local_checkpoint_dir(dir);
		_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
		(void)unlink(img);
	}
	return 0;
}
