/* Running runsc for a gVisor sandbox (--runtime gvisor): every runsc call (run, restore, exec,
 * checkpoint) runs here, in the sandbox's user, network and pid namespaces and in a root of
 * its own that holds nothing of the host but what runsc and the bundle need.
 *
 * runsc's gofer opens the bundle's mount sources by path in runsc's mount namespace, and runsc
 * itself runs there: a source that resolved through anything the sandbox can change (a link
 * it planted in its files) would reach whatever that namespace shows. So that namespace is a
 * small tmpfs, pivoted into (then nothing else of the host is there): the host's system view
 * read-only, as the bundle binds it into the sandbox (/usr, /lib, /etc...: what a local
 * sandbox sees anyway; not for an image sandbox, which brings its own), /proc of the sandbox's
 * pid namespace, /dev's null, zero, full, random and urandom, and under /tmp the sandbox's
 * trees at fixed paths: rootfs (init's root: DIR/root, an image's overlay, the --disk), state,
 * checkpoint, and sbx/ with what the bundle binds: etc (DIR/gvisor/etc: hostname and hosts,
 * which sbx writes outside the sandbox's files), tmp (the sandbox's /tmp, opened without
 * following a link), vol/N (the --volume sources, the caller's), init (sbx's own first
 * process, sbx-ginit) and ca-bundle.crt (--secret's trust bundle). None of those paths is
 * the sandbox's to change. runsc is run from a descriptor opened before, with an empty
 * environment. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <poll.h>
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
#include "core/test-hook.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* sbx-ginit (providers/local/trampoline/ginit.c), built by the Makefile and embedded here */
#ifdef SBX_GINIT
__asm__(".section .rodata\n.balign 16\nsbx_ginit_start:\n.incbin \"" SBX_GINIT "\"\n"
	"sbx_ginit_end:\n.previous\n");
#else
__asm__(".section .rodata\nsbx_ginit_start:\nsbx_ginit_end:\n.previous\n");
#endif
extern const unsigned char sbx_ginit_start[] __attribute__((visibility("hidden")));
extern const unsigned char sbx_ginit_end[] __attribute__((visibility("hidden")));

/* where runsc's root is assembled (in its mount namespace, before the pivot) */
#define NEW "/tmp"

static _noreturn_ void child_fail(const char *what)
{
	char buf[300];
	int n = snprintf(buf, sizeof(buf), "sbx: error: runsc: cannot %s: %s\n", what,
			 strerror(errno));
	(void)!write(2, buf, n > 0 && (size_t)n < sizeof(buf) ? (size_t)n : 0);
	_exit(125);
}

static _noreturn_ void child_fail_msg(const char *msg)
{
	char buf[300];
	int n = snprintf(buf, sizeof(buf), "sbx: error: runsc: %s\n", msg);
	(void)!write(2, buf, n > 0 && (size_t)n < sizeof(buf) ? (size_t)n : 0);
	_exit(125);
}

/* a detached copy of the tree at path (recursive), read-only, nosuid and nodev when ro */
static int clone_tree(const char *path, bool ro)
{
	int fd = local_clone_tree(path);
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					MOUNT_ATTR_NODEV };

	if (fd >= 0 && ro &&
	    syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* a directory (or, file set, an empty file) at path, then the tree fd attached there */
static int attach(int fd, const char *path, bool file)
{
	if (file) {
		int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0)
			return -1;
		close(f);
	} else if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		return -1;
	}
	return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
}

static bool is_file_fd(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* the host's system directories the bundle of a sandbox without an image binds */
static const char *const sys_dirs[] = { "usr",	 "bin",	  "sbin",   "lib",
					"lib32", "lib64", "libx32", "etc" };

/* the sandbox's /tmp as a tree of its own, taken from the root without following a link; a
 * /tmp the sandbox replaced (a link, a file) is made a directory again first, as init does
 * with its mount points, so that the bind never reaches past the sandbox's files */
static int sandbox_tmp(const char *rootfs)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	_cleanup_close_ int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (root < 0)
		return -1;
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, root, "tmp", &how, sizeof(how));
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == ENOENT)) {
		if ((unlinkat(root, "tmp", 0) < 0 && errno != ENOENT) ||
		    mkdirat(root, "tmp", 01777) < 0 || fchmodat(root, "tmp", 01777, 0) < 0)
			return -1;
		fd = (int)syscall(SYS_openat2, root, "tmp", &how, sizeof(how));
	}
	if (fd < 0)
		return -1;
	return (int)syscall(SYS_open_tree, fd, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
}

/* --secret: the trust bundle the sandbox sees (the first of the system's paths, resolved in
 * its own view: the host's for a sandbox on the host's system view, the image's in its root)
 * with the sandbox's CA after it, written to NEW/tmp/sbx/ca-bundle.crt; each system path that
 * is a file in that view gets it bound over, as init does for a local sandbox (mounts, which
 * are appended to the bundle's) */
static void trust_ca(const char *ca, bool image, json_t *mounts)
{
	static const char *const bundles[] = { "etc/ssl/certs/ca-certificates.crt",
					       "etc/pki/tls/certs/ca-bundle.crt",
					       "etc/ssl/cert.pem",
					       "etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem" };
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct strbuf b = STRBUF_INIT;
	bool found = false;
	int view = open(image ? NEW "/tmp/rootfs" : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (view < 0)
		child_fail("open the sandbox's files");
	for (size_t i = 0; i < ARRAY_SIZE(bundles); i++) {
		int fd = (int)syscall(SYS_openat2, view, bundles[i], &how, sizeof(how));
		struct stat st;
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			char buf[65536];
			ssize_t n;
			while (!found && b.len < (16u << 20) &&
			       (n = read(fd, buf, sizeof(buf))) > 0)
				strbuf_add(&b, buf, (size_t)n);
			found = true;
			_cleanup_free_ char *dest = xasprintf("/%s", bundles[i]);
			json_array_append_new(mounts,
					      json_pack("{s:s,s:s,s:s,s:[ss]}", "destination", dest,
							"type", "bind", "source",
							"/tmp/sbx/ca-bundle.crt", "options", "bind",
							"ro"));
		}
		close(fd);
	}
	close(view);
	if (b.len && b.buf[b.len - 1] != '\n')
		strbuf_addstr(&b, "\n");
	strbuf_addstr(&b, ca);
	int fd = open(NEW "/tmp/sbx/ca-bundle.crt",
		      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || sbx_write_all(fd, b.buf, b.len) < 0)
		child_fail("write the sandbox's trust bundle");
	close(fd);
	strbuf_release(&b);
	json_array_append_new(mounts,
			      json_pack("{s:s,s:s,s:s,s:[ss]}", "destination",
					"/run/sbx/ca-bundle.crt", "type", "bind", "source",
					"/tmp/sbx/ca-bundle.crt", "options", "bind", "ro"));
}

/* the bundle of this boot: the CLI's config.json (text, from DIR/gvisor/bundle), with the
 * trust bundle's mounts for --secret, in NEW/tmp/sbx/bundle */
static void write_bundle(const struct local_setup *s, const char *text)
{
	json_error_t je;
	json_t *cfg = json_loads(text, 0, &je);
	json_t *mounts = cfg ? json_object_get(cfg, "mounts") : NULL;

	if (!json_is_array(mounts))
		child_fail_msg("the sandbox's bundle (gvisor/bundle/config.json) is not whole");
	if (s->ca_pem)
		trust_ca(s->ca_pem, s->image, mounts);
	char *out = json_dumps(cfg, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (mkdir(NEW "/tmp/sbx/bundle", 0755) < 0)
		child_fail("create the bundle");
	int fd = open(NEW "/tmp/sbx/bundle/config.json",
		      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (!out || fd < 0 || sbx_write_all(fd, out, strlen(out)) < 0)
		child_fail("write the bundle");
	close(fd);
	free(out);
	json_decref(cfg);
	/* sbx-ginit, the sandbox's first process */
	size_t n = (size_t)(sbx_ginit_end - sbx_ginit_start);
	fd = open(NEW "/tmp/sbx/init", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0555);
	if (!n)
		errno = ENOEXEC;
	if (!n || fd < 0 || sbx_write_all(fd, sbx_ginit_start, n) < 0)
		child_fail("write the sandbox's init");
	close(fd);
}

/* /dev of runsc's root: the few devices it and its children open, and fd */
static void make_dev(void)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom" };
	char p[64], h[64];

	if (mkdir(NEW "/dev", 0755) < 0)
		child_fail("create /dev");
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
		snprintf(p, sizeof(p), NEW "/dev/%s", nodes[i]);
		snprintf(h, sizeof(h), "/dev/%s", nodes[i]);
		int f = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0)
			child_fail("create /dev");
		close(f);
		if (mount(h, p, NULL, MS_BIND, NULL) < 0)
			child_fail("bind /dev");
	}
	/* a runsc that is a script is read by its interpreter as /dev/fd/N */
	if (symlink("/proc/self/fd", NEW "/dev/fd") < 0)
		child_fail("create /dev");
}

static _noreturn_ void runsc_child(const struct local_runsc *r, char *const *args,
				   const char *runsc, pid_t caller)
{
	/* set at run and restore: the sandbox's boot, with its rootfs and what the bundle binds */
	const struct local_setup *s = r->setup;
	enum {
		T_STATE,
		T_CHECKPOINT,
		T_ETC,
		N_TREES
	};
	static const char *const sub[N_TREES] = { "gvisor/state", "gvisor/checkpoint",
						  "gvisor/etc" };
	static const char *const at[N_TREES] = { NEW "/tmp/state", NEW "/tmp/checkpoint",
						 NEW "/tmp/sbx/etc" };
	bool want[N_TREES] = { true, r->checkpoint, s != NULL };
	int fds[N_TREES] = { -1, -1, -1 };
	size_t nvol = s ? s->n_volumes : 0, nsys = s && !s->image ? ARRAY_SIZE(sys_dirs) : 0;
	int *vol = xcalloc(nvol + 1, sizeof(int));
	int sysfd[ARRAY_SIZE(sys_dirs)];
	char p[PATH_MAX];

	for (size_t i = 0; i < nvol; i++)
		vol[i] = -1;
	for (size_t i = 0; i < ARRAY_SIZE(sys_dirs); i++)
		sysfd[i] = -1;
	/* test-only: a boot that does not finish */
	if (s)
		sbx_test_hold("gvisor-boot");
	for (int i = 0; i < 3; i++) {
		int fd = r->fd[i] >= 0 ? r->fd[i] : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd < 0 || dup2(fd, i) < 0)
			_exit(125);
	}
	/* nothing of the caller stays open (a lock held by the waiting parent would stay held) */
	syscall(SYS_close_range, 3, ~0U, 0);
	umask(022);
	/* a client call needs runsc's state alone, which it reaches through a descriptor: no
	 * trees, no root of its own (one that saves the state has it at /tmp/state in its root) */
	bool fd_root = r->client && !r->own_root;
	if (fd_root) {
		snprintf(p, sizeof(p), "%s/gvisor/state", r->dir);
		int st = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW);
		if (st < 0 ||
		    (st != LOCAL_RUNSC_STATE_FD &&
		     (dup2(st, LOCAL_RUNSC_STATE_FD) < 0 || close(st) < 0)))
			child_fail("open runsc's state");
		for (size_t i = 0; i < N_TREES; i++)
			want[i] = false;
	}
	/* the binary, opened where its path means what the caller meant */
	int exe = open(runsc, O_RDONLY | O_CLOEXEC);
	if (exe < 0)
		child_fail("open runsc");
	/* the bundle the CLI wrote (a file of ours, read before we become sandbox root) */
	_cleanup_free_ char *bundle = NULL;
	if (s) {
		snprintf(p, sizeof(p), "%s/gvisor/bundle/config.json", r->dir);
		if (!(bundle = sbx_read_file(p, 1 << 20, NULL)))
			child_fail("read the sandbox's bundle");
	}
	/* run by root: the trees are ours to clone before we become sandbox root (who cannot
	 * traverse root's home), and volumes are id-mapped through the sandbox's user namespace
	 * as init's are */
	if (geteuid() == 0) {
		for (size_t i = 0; i < N_TREES; i++) {
			snprintf(p, sizeof(p), "%s/%s", r->dir, sub[i]);
			if (want[i] && (fds[i] = clone_tree(p, i == T_ETC)) < 0)
				child_fail("open the sandbox's files");
		}
		snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)r->init);
		int userns = nvol ? open(p, O_RDONLY | O_CLOEXEC) : -1;
		for (size_t i = 0; i < nvol; i++) {
			if ((vol[i] = clone_tree(s->volumes[i].host, s->volumes[i].ro)) < 0)
				child_fail("open a volume");
			struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP,
						.userns_fd = (unsigned)userns };
			if (userns >= 0)
				(void)syscall(SYS_mount_setattr, vol[i], "",
					      AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a));
		}
		if (userns >= 0)
			close(userns);
	}
	/* the sandbox's cgroups, its freezer too: runsc's processes are its processes */
	/* (a client call's runsc is not: what it starts runs in the sentry, charged there) */
	if (!r->client && local_cgroup_enter(r->dir, getpid()) < 0 && geteuid() == 0)
		child_fail("join the sandbox's cgroups");
	int pidfd = sbx_pidfd_open(r->init);
	if (pidfd < 0)
		child_fail("find the sandbox's init");
	/* init's mount namespace, opened while we may (run by root, init is not dumpable once
	 * it became sandbox root: only host root may look into it) */
	int initmnt = -1;
	if (s) {
		snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)r->init);
		if ((initmnt = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			child_fail("open the sandbox's mount namespace");
	}
	/* --cpus: the CPUs init runs on (gVisor counts its CPUs by them) */
	cpu_set_t cpus;
	if (sched_getaffinity(r->init, sizeof(cpus), &cpus) == 0)
		(void)sched_setaffinity(0, sizeof(cpus), &cpus);
	if (setns(pidfd, CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) < 0)
		child_fail("join the sandbox's namespaces");
	if ((r->map_range && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		child_fail("become root in the sandbox");
	/* set once our ids are what they stay (a change of them clears it) */
	if (r->die_with_caller && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != caller))
		_exit(125);
	/* a process whose children's pid namespace is not its own makes no threads: runsc runs
	 * in a child of ours, born in init's pid namespace, and we wait for it */
	{
		int alive[2] = { -1, -1 };
		if (r->die_with_caller && pipe2(alive, O_CLOEXEC) < 0)
			child_fail("make a pipe");
		pid_t c = fork();
		if (c < 0)
			child_fail("fork");
		if (c > 0) {
			int st = local_runsc_wait(c);
			_exit(st < 0 ? 125 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* our parent, outside our pid namespace, is beyond getppid(): gone already, its
		 * end of the pipe says so */
		struct pollfd pf = { .fd = alive[0], .events = POLLIN };
		if (r->die_with_caller && (close(alive[1]) < 0 || poll(&pf, 1, 0) != 0))
			_exit(125);
	}
	if (!fd_root) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			child_fail("make a mount namespace");
		/* an ordinary user's trees are cloned now, in a copy of the host's mount namespace that
		 * the sandbox's user namespace owns, before the tmpfs hides /tmp (its store may be there) */
		for (size_t i = 0; i < N_TREES; i++) {
			snprintf(p, sizeof(p), "%s/%s", r->dir, sub[i]);
			if (want[i] && fds[i] < 0 && (fds[i] = clone_tree(p, i == T_ETC)) < 0)
				child_fail("open the sandbox's files");
		}
		for (size_t i = 0; i < nvol; i++)
			if (vol[i] < 0 &&
			    (vol[i] = clone_tree(s->volumes[i].host, s->volumes[i].ro)) < 0)
				child_fail("open a volume");
		for (size_t i = 0; i < nsys; i++) {
			struct stat st;
			snprintf(p, sizeof(p), "/%s", sys_dirs[i]);
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
			    (sysfd[i] = clone_tree(p, true)) < 0)
				child_fail("open the host's system files");
		}
		/* the sandbox's root: init's (its files, an image's overlay, its disk), taken from init's
		 * mount namespace alone, without what is mounted under it */
		int rootfd = -1;
		if (s) {
			int self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
			if (self < 0 || setns(initmnt, CLONE_NEWNS) < 0)
				child_fail("enter the sandbox's mount namespace");
			close(initmnt);
			rootfd = (int)syscall(SYS_open_tree, AT_FDCWD, "/",
					      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
			if (rootfd < 0)
				child_fail("open the sandbox's root");
			if (setns(self, CLONE_NEWNS) < 0)
				child_fail("leave the sandbox's mount namespace");
			close(self);
		}
		close(pidfd);

		/* runsc's root */
		if (mount("tmpfs", NEW, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=32m") < 0)
			child_fail("mount a tmpfs for runsc's root");
		if (mkdir(NEW "/proc", 0555) < 0 || mkdir(NEW "/tmp", 0755) < 0 ||
		    mkdir(NEW "/tmp/sbx", 0755) < 0)
			child_fail("make runsc's root");
		/* the /proc of the pid namespace runsc runs in (it reads its own and its children's) */
		if (mount("proc", NEW "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			child_fail("mount /proc");
		make_dev();
		/* --memory: what runsc reads as the host's memory it tells gVisor's kernel it has, so the
		 * sandbox's /proc/meminfo says MemTotal: the limit (runsc 20221219 takes it nowhere else
		 * without managing cgroups itself) */
		if (s && s->config->memory > 0) {
			char text[64];
			int n = snprintf(text, sizeof(text), "MemTotal: %lld kB\n",
					 s->config->memory / 1024);
			int fd = open(NEW "/tmp/meminfo",
				      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
			if (fd < 0 || sbx_write_all(fd, text, (size_t)n) < 0 ||
			    mount(NEW "/tmp/meminfo", NEW "/proc/meminfo", NULL, MS_BIND, NULL) < 0)
				child_fail("give gVisor its memory size");
			close(fd);
		}
		for (size_t i = 0; i < nsys; i++) {
			snprintf(p, sizeof(p), NEW "/%s", sys_dirs[i]);
			if (sysfd[i] >= 0) {
				if (attach(sysfd[i], p, false) < 0)
					child_fail("attach the host's system files");
				close(sysfd[i]);
				continue;
			}
			/* a link (merged /usr): the same link */
			char target[PATH_MAX], host[64];
			snprintf(host, sizeof(host), "/%s", sys_dirs[i]);
			ssize_t n = readlink(host, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				if (symlink(target, p) < 0)
					child_fail("make runsc's root");
			}
		}
		for (size_t i = 0; i < N_TREES; i++)
			if (fds[i] >= 0) {
				if (attach(fds[i], at[i], false) < 0)
					child_fail("attach the sandbox's files");
				close(fds[i]);
			}
		if (s) {
			if (attach(rootfd, NEW "/tmp/rootfs", false) < 0)
				child_fail("attach the sandbox's root");
			close(rootfd);
			int t = sandbox_tmp(NEW "/tmp/rootfs");
			if (t < 0 || attach(t, NEW "/tmp/sbx/tmp", false) < 0)
				child_fail("attach the sandbox's /tmp");
			close(t);
			if (nvol && mkdir(NEW "/tmp/sbx/vol", 0755) < 0)
				child_fail("make runsc's root");
			for (size_t i = 0; i < nvol; i++) {
				snprintf(p, sizeof(p), NEW "/tmp/sbx/vol/%zu", i);
				if (attach(vol[i], p, is_file_fd(vol[i])) < 0)
					child_fail("attach a volume");
				close(vol[i]);
			}
			write_bundle(s, bundle);
		}
		free(vol);
		/* into it: what was the host's goes */
		if (chdir(NEW) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
		    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
			child_fail("enter runsc's root");
	} else {
		close(pidfd);
	}
	/* runsc's global flags, then the caller's */
	size_t na = 0;
	while (args[na])
		na++;
	const char **argv = xcalloc(na + 8, sizeof(char *));
	size_t k = 0;
	argv[k++] = "runsc";
	argv[k++] = fd_root ? "--root=" LOCAL_RUNSC_CLIENT_ROOT : "--root=/tmp/state";
	argv[k++] = "--ignore-cgroups";
	argv[k++] = "--file-access=shared";
	argv[k++] = r->net_none ? "--network=none" : "--network=host";
	for (size_t i = 0; i < na; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	if (chdir(fd_root ? "/" : "/tmp") < 0)
		child_fail(fd_root ? "enter /" : "enter /tmp");
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
	pid_t caller = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return sbx_err_errno(err, "cannot start runsc");
	if (pid == 0)
		runsc_child(r, args, runsc, caller);
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

void local_runsc_log_tail(int logfd, char *buf, size_t len, const char *none)
{
	char out[1024];
	struct stat st;
	off_t at = fstat(logfd, &st) == 0 && st.st_size > (off_t)sizeof(out) - 1
		? st.st_size - (off_t)(sizeof(out) - 1)
		: 0;
	ssize_t got = pread(logfd, out, sizeof(out) - 1, at);
	size_t n = got > 0 ? (size_t)got : 0;

	out[n] = 0;
	while (n && out[n - 1] == '\n')
		out[--n] = 0;
	char *nl = strrchr(out, '\n');
	snprintf(buf, len, "%s", nl ? nl + 1 : (n ? out : none));
}
