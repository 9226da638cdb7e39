/* Confinement of sbx's helpers: the seccomp profile (docker's default as the reference),
 * capability cuts, Landlock, no-exec mount views, and the jail of host-side helpers. */
#define _GNU_SOURCE
#include "core/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <iconv.h>
#include <langinfo.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>

#include "core/log.h"
#include "core/proc.h"
#include "core/store.h"

/* syscalls refused with EPERM: kernel keyring, BPF, kexec, modules, accounting, swap, reboot,
 * raw clock changes, mounting, namespaces, handles, perf, userfaultfd, io_uring, cross-process
 * memory access, NUMA policy — what docker's default profile refuses to a container without
 * extra capabilities */
static const char *const denied[] = {
	"acct",
	"add_key",
	"bpf",
	"clock_adjtime",
	"clock_settime",
	"create_module",
	"delete_module",
	"fanotify_init",
	"finit_module",
	"fsconfig",
	"fsmount",
	"fsopen",
	"fspick",
	"get_kernel_syms",
	"init_module",
	"io_uring_enter",
	"io_uring_register",
	"io_uring_setup",
	"ioperm",
	"iopl",
	"kcmp",
	"kexec_file_load",
	"kexec_load",
	"keyctl",
	"lookup_dcookie",
	"mbind",
	"migrate_pages",
	"mount",
	"mount_setattr",
	"move_mount",
	"move_pages",
	"name_to_handle_at",
	"nfsservctl",
	"open_by_handle_at",
	"open_tree",
	"perf_event_open",
	"pivot_root",
	"process_vm_readv",
	"process_vm_writev",
	"query_module",
	"quotactl",
	"quotactl_fd",
	"reboot",
	"request_key",
	"set_mempolicy",
	"setns",
	"settimeofday",
	"stime",
	"swapoff",
	"swapon",
	"syslog",
	"umount",
	"umount2",
	"unshare",
	"uselib",
	"userfaultfd",
	"ustat",
	"vm86",
	"vm86old",
	"_sysctl",
	"sysfs",
	"adjtimex",
	"lsm_set_self_attr",
};

/* what the nested profile lets through of the list above: namespaces and the mount API. The
 * kernel checks each against the capabilities of the caller's own user namespace, which
 * the sandbox's processes lack in the sandbox's namespace: they only hold them in one they
 * make, over mounts and namespaces of their own */
static const char *const nested_allowed[] = {
	"fsconfig",  "fsmount", "fsopen",     "fspick", "mount",   "mount_setattr", "move_mount",
	"open_tree", "setns",	"pivot_root", "umount", "umount2", "unshare",
};

static bool nested_allows(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(nested_allowed); i++)
		if (streq(nested_allowed[i], name))
			return true;
	return false;
}

int sbx_seccomp_build(void **ret_bpf, size_t *ret_len, struct sbx_err *err)
{
	return sbx_seccomp_build_profile(SBX_SECCOMP_STRICT, ret_bpf, ret_len, err);
}

int sbx_seccomp_build_profile(enum sbx_seccomp_profile p, void **ret_bpf, size_t *ret_len,
			      struct sbx_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	bool nested = p == SBX_SECCOMP_NESTED;
	int r = 0;

	if (!ctx)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot initialise the seccomp filter");
	for (size_t i = 0; i < ARRAY_SIZE(denied) && r == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR || (nested && nested_allows(denied[i])))
			continue; /* not on this architecture, or allowed */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* new user namespaces through clone; clone3 hides its flags in memory: ENOSYS makes libc
	 * fall back to clone, whose flags can be checked. Nested: both as they are */
	if (r == 0 && !nested)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0 && !nested)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* pushing input into a terminal (CVE-2017-5226) and console tricks */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (r < 0) {
		seccomp_release(ctx);
		errno = -r;
		return sbx_err_errno(err, "cannot build the seccomp filter");
	}
	/* export through a memfd: libseccomp writes to an fd */
	int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		seccomp_release(ctx);
		return sbx_err_errno(err, "cannot export the seccomp filter");
	}
	r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r < 0) {
		close(fd);
		errno = -r;
		return sbx_err_errno(err, "cannot export the seccomp filter");
	}
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter)) {
		close(fd);
		return sbx_err_set(err, SBX_E_SYSTEM, "seccomp filter has an unexpected size");
	}
	void *buf = xmalloc((size_t)len);
	if (pread(fd, buf, (size_t)len, 0) != len) {
		free(buf);
		close(fd);
		return sbx_err_errno(err, "cannot read the seccomp filter");
	}
	close(fd);
	*ret_bpf = buf;
	*ret_len = (size_t)len;
	return 0;
}

int sbx_seccomp_install(const void *bpf, size_t len)
{
	struct sock_fprog prog = {
		.len = (unsigned short)(len / sizeof(struct sock_filter)),
		.filter = (struct sock_filter *)bpf,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	if (!bpf || !len)
		return 0;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* docker's default capability set */
static const int kept_caps[] = {
	CAP_CHOWN,	CAP_DAC_OVERRIDE, CAP_FOWNER,	   CAP_FSETID,		 CAP_KILL,
	CAP_SETGID,	CAP_SETUID,	  CAP_SETPCAP,	   CAP_NET_BIND_SERVICE, CAP_NET_RAW,
	CAP_SYS_CHROOT, CAP_MKNOD,	  CAP_AUDIT_WRITE, CAP_SETFCAP,
};

int sbx_caps_drop(void)
{
	unsigned long long keep = 0;

	for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++)
		keep |= 1ULL << kept_caps[i];
	for (int c = 0; c < 64; c++) {
		if (keep & (1ULL << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last capability */
			return -1;
		}
	}
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	d[0].effective = d[0].permitted = (unsigned)(keep & 0xffffffffu);
	d[1].effective = d[1].permitted = (unsigned)(keep >> 32);
	return (int)syscall(SYS_capset, &h, d);
}

/* --- the filter, once per build ------------------------------------------------------------- */

#ifdef SBX_VERSION
#define SBX_VERSION_STR SBX_VERSION
#else
#define SBX_VERSION_STR "dev"
#endif
#ifdef SBX_COMMIT
#define SBX_COMMIT_STR SBX_COMMIT
#else
#define SBX_COMMIT_STR "unknown"
#endif

int sbx_seccomp_cached(const char *store_root, void **ret_bpf, size_t *ret_len, struct sbx_err *err)
{
	return sbx_seccomp_cached_profile(store_root, SBX_SECCOMP_STRICT, ret_bpf, ret_len, err);
}

int sbx_seccomp_cached_profile(const char *store_root, enum sbx_seccomp_profile p, void **ret_bpf,
			       size_t *ret_len, struct sbx_err *err)
{
	const char *kind = p == SBX_SECCOMP_NESTED ? "nested-" : "";
	_cleanup_free_ char *cache = store_root ? xasprintf("%s/seccomp-%s%s-%s.bpf", store_root,
							    kind, SBX_VERSION_STR, SBX_COMMIT_STR)
						: NULL;
	size_t len = 0;
	void *bpf = cache ? sbx_read_file(cache, 1 << 20, &len) : NULL;

	if (bpf && len && len % 8 == 0) {
		*ret_bpf = bpf;
		*ret_len = len;
		return 0;
	}
	free(bpf);
	if (sbx_seccomp_build_profile(p, &bpf, &len, err) < 0)
		return -1;
	if (cache) {
		struct sbx_err ignored = { 0 };
		(void)sbx_write_atomic(cache, bpf, len, false, &ignored);
	}
	*ret_bpf = bpf;
	*ret_len = len;
	return 0;
}

/* --- Landlock ------------------------------------------------------------------------------- */

/* a ruleset handling `handled` (0: every filesystem right this kernel knows), all of it allowed
 * beneath '/' and nowhere else, applied to this process */
static int landlock_beneath_root(unsigned long long handled)
{
	struct landlock_ruleset_attr ra = { 0 };
	int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
			       LANDLOCK_CREATE_RULESET_VERSION);

	if (abi < 0)
		return errno == ENOSYS || errno == EOPNOTSUPP ? 1 : -1;
	/* ABI 1 has 13 rights, 2 adds refer, 3 truncate, 5 ioctl on devices */
	int bits = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;
	ra.handled_access_fs = handled ? handled : (1ULL << bits) - 1;
	_cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
	if (rs < 0)
		return -1;
	_cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	struct landlock_path_beneath_attr pb = { .allowed_access = ra.handled_access_fs,
						 .parent_fd = root };
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -1;
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		return -1;
	return 0;
}

int sbx_landlock_root(void)
{
	return landlock_beneath_root(0);
}

int sbx_landlock_exec_root(void)
{
	return landlock_beneath_root(LANDLOCK_ACCESS_FS_EXECUTE);
}

/* --- what a helper loads, and from where ---------------------------------------------------- */

void sbx_confine_prepare(void)
{
	/* libarchive converts names between UTF-8 and the locale's charset (C: ASCII); glibc
	 * reads its conversion table (gconv-modules.cache) on the first conversion and keeps it.
	 * Read here, it is the host's, and the conversions it needs are built in: nothing is
	 * loaded from a path the sandbox could fill */
	const char *cs = nl_langinfo(CODESET);
	const char *pairs[][2] = { { "UTF-8", cs },
				   { cs, "UTF-8" },
				   { "UTF-8", "ANSI_X3.4-1968" },
				   { "ANSI_X3.4-1968", "UTF-8" } };

	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
		iconv_t c = iconv_open(pairs[i][0], pairs[i][1]);
		if (c != (iconv_t)-1)
			iconv_close(c);
	}
}

int sbx_confine_noexec(bool private, struct sbx_err *err)
{
	struct mount_attr a = { .attr_set = MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID |
					MOUNT_ATTR_NODEV };

	if (private && unshare(CLONE_NEWNS) < 0)
		return sbx_err_errno(err, "cannot make a mount namespace of its own");
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &a, sizeof(a)) < 0)
		return sbx_err_errno(err, "cannot make the mounts it sees noexec");
	return 0;
}

static bool kept(int fd, const int *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

int sbx_confine_finish(const int *keep, size_t n_keep, int null_fd, const void *bpf, size_t bpf_len,
		       struct sbx_err *err)
{
	clearenv();
	/* none of the caller's descriptors: 0-2 become /dev/null unless they carry the work */
	for (int fd = 0; fd < 3; fd++)
		if (!kept(fd, keep, n_keep) && null_fd >= 0 && dup2(null_fd, fd) < 0)
			return sbx_err_errno(err, "cannot replace descriptor %d", fd);
	unsigned from = 3;
	for (unsigned fd = 3; fd < 65536; fd++) {
		if (!kept((int)fd, keep, n_keep))
			continue;
		if (fd > from)
			syscall(SYS_close_range, from, fd - 1, 0);
		from = fd + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
	if (sbx_caps_drop() < 0)
		return sbx_err_errno(err, "cannot drop capabilities");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return sbx_err_errno(err, "cannot set no_new_privs");
	int ll = sbx_landlock_root();
	if (ll < 0)
		return sbx_err_errno(err, "cannot apply the Landlock ruleset");
	if (ll > 0)
		sbx_debug("no Landlock in this kernel: the helper relies on its other limits");
	if (sbx_seccomp_install(bpf, bpf_len) < 0)
		return sbx_err_errno(err, "cannot install the seccomp filter");
	return 0;
}

/* --- the jail of host-side helpers ---------------------------------------------------------- */

#define JAIL_AT "/tmp" /* where the jail's root is assembled, in its own mount namespace */

bool sbx_ids_mapped(unsigned long base, unsigned long count)
{
	_cleanup_free_ char *t = NULL;

	if (geteuid() != 0)
		return false;
	t = sbx_read_file("/proc/self/uid_map", 65536, NULL);
	for (char *l = t; l && *l;) {
		unsigned long in, out, n;
		if (sscanf(l, "%lu %lu %lu", &in, &out, &n) == 3 && in <= base &&
		    in + n >= base + count)
			return true;
		char *nl = strchr(l, '\n');
		l = nl ? nl + 1 : l + strlen(l);
	}
	return false;
}

/* whether this process sees every id (the initial user namespace, or one that maps them all):
 * then the jail may map them all too */
static bool all_ids(void)
{
	return sbx_ids_mapped(0, 4294967295ul);
}

/* root: every id as itself; otherwise the caller's ids as 0 */
static int jail_maps(pid_t pid, bool all)
{
	return sbx_proc_write_id_maps(pid, 0, all ? 4294967295ul : 0);
}

static int jail_maps_of(pid_t pid, void *all)
{
	return jail_maps(pid, *(bool *)all);
}

int sbx_userns_release(pid_t pid, int ready, int go, int (*maps)(pid_t, void *), void *arg)
{
	char c;
	ssize_t n;
	int r = 0;

	do
		n = read(ready, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && maps(pid, arg) < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		errno = e;
		r = -1;
	} else if (n == 1) {
		/* a failure means the child is gone: its report (or its absence) says why */
		(void)sbx_write_all(go, "", 1);
	}
	close(ready);
	close(go);
	return r;
}

/* mkdir -p of an absolute path below JAIL_AT */
static int jail_mkdirs(const char *path)
{
	_cleanup_free_ char *p = xasprintf(JAIL_AT "%s", path);

	return sbx_mkdir_p(p, 0755);
}

static _noreturn_ void jail_fail(int efd, struct sbx_err *e)
{
	sbx_err_send(efd, e);
	_exit(1);
}

/* the jail's first child: namespaces, the tmpfs root with the trees; its child does the work */
static _noreturn_ void jail_child(const struct sbx_jail *j, int (*fn)(void *, struct sbx_err *),
				  void *arg, const void *bpf, size_t bpf_len, int null_fd, int efd,
				  int sync_in, int sync_out)
{
	struct sbx_err e = { 0 };
	bool host_root = all_ids() || j->maps;
	char c;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
		    CLONE_NEWUTS | CLONE_NEWCGROUP) < 0) {
		sbx_err_errno(&e, "%s: cannot create its namespaces", j->what);
		jail_fail(efd, &e);
	}
	if (sbx_write_all(sync_out, "", 1) < 0 || read(sync_in, &c, 1) != 1)
		_exit(1); /* the parent reports */
	close(sync_in);
	close(sync_out);
	/* not before: the parent could not have written our id maps */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if ((host_root && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0) {
		sbx_err_errno(&e, "%s: cannot become root in its namespace", j->what);
		jail_fail(efd, &e);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		sbx_err_errno(&e, "%s: cannot make mounts private", j->what);
		jail_fail(efd, &e);
	}
	/* every tree detached first: the tmpfs hides what lies under JAIL_AT */
	int *fds = xcalloc(j->n_trees + 1, sizeof(int));
	for (size_t i = 0; i < j->n_trees; i++) {
		fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, j->trees[i].path,
				      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
		if (fds[i] < 0 ||
		    (j->trees[i].ro &&
		     syscall(SYS_mount_setattr, fds[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &ro,
			     sizeof(ro)) < 0)) {
			sbx_err_errno(&e, "%s: cannot open '%s'", j->what, j->trees[i].path);
			jail_fail(efd, &e);
		}
	}
	if (mount("tmpfs", JAIL_AT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=1m") < 0) {
		sbx_err_errno(&e, "%s: cannot mount its root", j->what);
		jail_fail(efd, &e);
	}
	for (size_t i = 0; i < j->n_trees; i++) {
		_cleanup_free_ char *at = xasprintf(JAIL_AT "%s", j->trees[i].path);
		if (jail_mkdirs(j->trees[i].path) < 0 ||
		    syscall(SYS_move_mount, fds[i], "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) <
			    0) {
			sbx_err_errno(&e, "%s: cannot attach '%s'", j->what, j->trees[i].path);
			jail_fail(efd, &e);
		}
		close(fds[i]);
	}
	free(fds);
	if (j->cwd && jail_mkdirs(j->cwd) < 0) {
		sbx_err_errno(&e, "%s: cannot create '%s'", j->what, j->cwd);
		jail_fail(efd, &e);
	}
	if (chdir(JAIL_AT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
		sbx_err_errno(&e, "%s: cannot enter its root", j->what);
		jail_fail(efd, &e);
	}
	if (sbx_confine_noexec(false, &e) < 0)
		jail_fail(efd, &e);
	/* into the new pid namespace: the work runs in a child, whose end we pass on */
	pid_t pid = fork();
	if (pid < 0) {
		sbx_err_errno(&e, "%s: cannot fork", j->what);
		jail_fail(efd, &e);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		int *keep = xcalloc(j->n_keep + 2, sizeof(int));
		if (j->n_keep)
			memcpy(keep, j->keep, j->n_keep * sizeof(int));
		keep[j->n_keep] = efd;
		if (sbx_confine_finish(keep, j->n_keep + 1, null_fd, bpf, bpf_len, &e) < 0)
			jail_fail(efd, &e);
		if (chdir(j->cwd ? j->cwd : "/") < 0) {
			sbx_err_errno(&e, "%s: cannot enter '%s'", j->what, j->cwd);
			jail_fail(efd, &e);
		}
		int r = fn(arg, &e);
		sbx_err_send(efd, r < 0 ? &e : NULL);
		_exit(r < 0 ? 1 : 0);
	}
	close(efd);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

int sbx_jail_run(const struct sbx_jail *j, int (*fn)(void *arg, struct sbx_err *err), void *arg,
		 struct sbx_err *err)
{
	_cleanup_free_ void *bpf = NULL;
	size_t bpf_len = 0;
	int efd[2], s1[2], s2[2];
	pid_t parent = getpid();

	if (sbx_seccomp_cached(j->store_root, &bpf, &bpf_len, err) < 0)
		return -1;
	sbx_confine_prepare();
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return sbx_err_errno(err, "cannot open /dev/null");
	if (pipe2(efd, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	if (pipe2(s1, O_CLOEXEC) < 0) {
		close(efd[0]);
		close(efd[1]);
		return sbx_err_errno(err, "cannot create a pipe");
	}
	if (pipe2(s2, O_CLOEXEC) < 0) {
		close(efd[0]);
		close(efd[1]);
		close(s1[0]);
		close(s1[1]);
		return sbx_err_errno(err, "cannot create a pipe");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(1);
		close(efd[0]);
		close(s1[0]);
		close(s2[1]);
		jail_child(j, fn, arg, bpf, bpf_len, null_fd, efd[1], s2[0], s1[1]);
	}
	close(efd[1]);
	close(s1[1]);
	close(s2[0]);
	if (pid < 0) {
		close(efd[0]);
		close(s1[0]);
		close(s2[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	bool all = all_ids();
	if (sbx_userns_release(pid, s1[0], s2[1], j->maps ? j->maps : jail_maps_of,
			       j->maps ? j->maps_arg : &all) < 0) {
		sbx_err_errno(err, "%s: cannot write the id maps of its namespace", j->what);
		close(efd[0]);
		return -1;
	}
	int r = sbx_err_recv(efd[0], pid, j->what, err);
	close(efd[0]);
	return r;
}
