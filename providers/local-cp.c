/* sbx cp for the local provider: a child packs or unpacks from inside the sandbox's namespaces. */
#define _GNU_SOURCE
#include "providers/local.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/archive.h"
#include "core/digest.h"
#include "core/image.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif

/* what the child does once inside */
struct cp_job {
	bool out;		/* pack src (cp_out) rather than unpack into dest (cp_in) */
	int fd;			/* the tar stream */
	const char *dest;	/* cp_in */
	const char *top;	/* cp_in: NULL for a '-' stream */
	unsigned flags;		/* cp_in: SBX_EXTRACT_* */
	struct sbx_cp_src src;	/* cp_out */
	bool follow;		/* cp_out: -L */
	char **layers;		/* an image sandbox's layer directories, base first (NULL: none) */
	size_t n_layers;
};

/* keeps 0-2, a and b; closes every other descriptor */
static void close_others(int a, int b)
{
	int k[2] = { a < b ? a : b, a < b ? b : a };
	unsigned from = 3;

	for (size_t i = 0; i < 2; i++) {
		if (k[i] < (int)from)
			continue;
		if ((unsigned)k[i] > from)
			syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0);
		from = (unsigned)k[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

static _noreturn_ void child_exit(int efd, const struct sbx_err *err)
{
	sbx_err_send(efd, err);
	_exit(err ? 1 : 0);
}

/* uid and gid 0 in the user namespace just joined or made */
static int become_root(bool map_range, struct sbx_err *err)
{
	if ((map_range && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		return sbx_err_errno(err, "cannot become root in the sandbox");
	return 0;
}

/* inside: the work itself. Paths are the sandbox's, relative ones from its '/' (as docker's) */
static _noreturn_ void child_run(const struct cp_job *j, pid_t parent, int efd)
{
	struct sbx_err e = { 0 };

	/* a credential change clears the parent-death signal: set it now, after the last one */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(1);
	signal(SIGPIPE, SIG_IGN);
	close_others(j->fd, efd);
	if (chdir("/") < 0) {
		sbx_err_errno(&e, "cannot enter '/' in the sandbox");
		child_exit(efd, &e);
	}
	int r = j->out ? sbx_archive_pack(j->fd, &j->src, j->follow, &e)
		       : sbx_archive_extract(j->fd, j->dest, j->top, j->flags, &e);
	child_exit(efd, r < 0 ? &e : NULL);
}

/* --- a running sandbox: join init's user and mount namespaces ----------------------------- */

static int join(int pidfd, pid_t init_pid, struct sbx_err *err)
{
	if (setns(pidfd, CLONE_NEWUSER | CLONE_NEWNS) == 0)
		return 0;
	/* kernels before 5.8: one namespace at a time */
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)init_pid);
	_cleanup_close_ int u = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)init_pid);
	_cleanup_close_ int m = open(p, O_RDONLY | O_CLOEXEC);
	if (u < 0 || m < 0 || setns(u, CLONE_NEWUSER) < 0 || setns(m, CLONE_NEWNS) < 0)
		return sbx_err_errno(err, "cannot join the sandbox's namespaces");
	return 0;
}

static _noreturn_ void child_running(const struct cp_job *j, int pidfd, pid_t init_pid,
				     bool map_range, pid_t parent, int efd)
{
	struct sbx_err e = { 0 };

	/* nothing inside may trace or read this process */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* after joining the mount namespace, '/' and the working directory are the sandbox's
	 * root: every path, '..' and symlink resolves inside */
	if (join(pidfd, init_pid, &e) < 0 || become_root(map_range, &e) < 0)
		child_exit(efd, &e);
	close(pidfd);
	child_run(j, parent, efd);
}

/* --- a stopped sandbox: its files, in a private user and mount namespace ------------------- */

static const char *const sys_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
					"etc" };

/* detached copies of an image sandbox's layer directories and of its fs/ (next to root/, which
 * rootfd, or the working directory, is) */
static int *image_trees(const struct cp_job *j, int rootfd, int efd)
{
	int *fds = xcalloc(j->n_layers + 1, sizeof(int));

	for (size_t i = 0; i <= j->n_layers; i++) {
		fds[i] = (int)syscall(SYS_open_tree, i < j->n_layers ? AT_FDCWD : rootfd,
				      i < j->n_layers ? j->layers[i] : "../fs",
				      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (fds[i] < 0) {
			struct sbx_err e = { 0 };
			sbx_err_errno(&e, "cannot open the image's files");
			child_exit(efd, &e);
		}
	}
	return fds;
}

static _noreturn_ void child_stopped(const struct cp_job *j, int rootfd, int sync_in,
				     int sync_out, bool map_range, pid_t parent, int efd)
{
	struct sbx_err e = { 0 };
	int sysfd[ARRAY_SIZE(sys_dirs)];
	char c;
	int *treefd = NULL;

	/* an image sandbox's trees (its layers, its fs/ with upper/ and work/): run by root,
	 * detached now, while we can still reach them (sandbox root cannot traverse root's home);
	 * otherwise once in our own namespaces, where we may */
	if (j->n_layers && map_range)
		treefd = image_trees(j, rootfd, efd);
	/* into the sandbox's files first: run by root, sandbox root cannot traverse root's home;
	 * unshare then moves the working directory onto our own copy of its mount */
	if (fchdir(rootfd) < 0) {
		sbx_err_errno(&e, "cannot enter the sandbox's files");
		child_exit(efd, &e);
	}
	close(rootfd);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
		sbx_err_errno(&e, "cannot create a user namespace");
		child_exit(efd, &e);
	}
	/* the parent writes our id maps, the sandbox's own */
	if (sbx_write_all(sync_out, "", 1) < 0 || read(sync_in, &c, 1) != 1)
		_exit(1); /* the parent reports */
	close(sync_in);
	close(sync_out);
	/* not before: the parent (not root) could not open our id maps then */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (become_root(map_range, &e) < 0)
		child_exit(efd, &e);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		sbx_err_errno(&e, "cannot make mounts private");
		child_exit(efd, &e);
	}
	if (j->n_layers && !map_range)
		treefd = image_trees(j, AT_FDCWD, efd);
	if (j->n_layers) {
		/* root/ of an image sandbox is only a place to stand: the trees go on mount points
		 * made in it (once; they stay, empty), the overlay on root/m, which we enter */
		struct strbuf o = STRBUF_INIT;
		char at[32];
		for (size_t i = 0; i <= j->n_layers + 1; i++) {
			snprintf(at, sizeof(at), i <= j->n_layers ? "%zu" : "m", i);
			if (mkdir(at, 0755) < 0 && errno != EEXIST) {
				sbx_err_errno(&e, "cannot create mount point '%s'", at);
				child_exit(efd, &e);
			}
			if (i <= j->n_layers &&
			    syscall(SYS_move_mount, treefd[i], "", AT_FDCWD, at,
				    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
				sbx_err_errno(&e, "cannot attach layer %zu of the image", i);
				child_exit(efd, &e);
			}
		}
		strbuf_addstr(&o, "lowerdir=");
		for (size_t i = j->n_layers; i-- > 0;) {
			snprintf(at, sizeof(at), "%zu%s", i, i ? ":" : "");
			strbuf_addstr(&o, at);
		}
		snprintf(at, sizeof(at), ",upperdir=%zu/upper", j->n_layers);
		strbuf_addstr(&o, at);
		snprintf(at, sizeof(at), ",workdir=%zu/work", j->n_layers);
		strbuf_addstr(&o, at);
		strbuf_addstr(&o, ",userxattr");
		/* every path resolves inside from here: the chroot is what keeps it so */
		if (mount("overlay", "m", "overlay", 0, o.buf) < 0 || chdir("m") < 0 ||
		    chroot(".") < 0) {
			sbx_err_errno(&e, "cannot mount the image's files (is the sandbox starting "
				      "at the same time?)");
			child_exit(efd, &e);
		}
		strbuf_release(&o);
		child_run(j, parent, efd);
	}
	/* the host's system view, read-only, as init binds it: detached copies now, attached
	 * once inside, where the mount points resolve within the sandbox only */
	for (size_t i = 0; i < ARRAY_SIZE(sys_dirs); i++) {
		char host[64];
		struct stat st;
		sysfd[i] = -1;
		snprintf(host, sizeof(host), "/%s", sys_dirs[i]);
		if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* symlinks were copied into the root at create */
		sysfd[i] = (int)syscall(SYS_open_tree, AT_FDCWD, host,
					OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		if (sysfd[i] < 0) {
			sbx_err_errno(&e, "cannot open '%s'", host);
			child_exit(efd, &e);
		}
	}
	if (chroot(".") < 0 || chdir("/") < 0) {
		sbx_err_errno(&e, "cannot enter the sandbox's files");
		child_exit(efd, &e);
	}
	for (size_t i = 0; i < ARRAY_SIZE(sys_dirs); i++) {
		char in[64];
		struct stat st;
		struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
		if (sysfd[i] < 0)
			continue;
		snprintf(in, sizeof(in), "/%s", sys_dirs[i]);
		if (lstat(in, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (syscall(SYS_mount_setattr, sysfd[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &a,
				    sizeof(a)) < 0) {
				sbx_err_errno(&e, "cannot make '%s' read-only", in);
				child_exit(efd, &e);
			}
			if (syscall(SYS_move_mount, sysfd[i], "", AT_FDCWD, in,
				    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
				sbx_err_errno(&e, "cannot mount '%s'", in);
				child_exit(efd, &e);
			}
		}
		close(sysfd[i]);
	}
	child_run(j, parent, efd);
}

static int write_proc(pid_t pid, const char *file, const char *text)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = sbx_write_all(fd, text, strlen(text));
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* the sandbox's mapping, as the supervisor writes it for init */
static int write_maps(pid_t pid, bool map_range)
{
	char map[64];

	if (!map_range && write_proc(pid, "setgroups", "deny") < 0 && errno != ENOENT)
		return -1;
	snprintf(map, sizeof(map), "0 %u %u\n", map_range ? LOCAL_UID_BASE : (unsigned)geteuid(),
		 map_range ? LOCAL_UID_COUNT : 1u);
	if (write_proc(pid, "uid_map", map) < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u %u\n", map_range ? LOCAL_UID_BASE : (unsigned)getegid(),
		 map_range ? LOCAL_UID_COUNT : 1u);
	return write_proc(pid, "gid_map", map);
}

/* --- the parent ----------------------------------------------------------------------------- */

static int run(const struct sbx_record *rec, const struct cp_job *j, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	bool map_range = local_map_range_of(rec);
	struct local_pids pids;
	int pidfd = -1, rootfd = -1, efd[2], s1[2] = { -1, -1 }, s2[2] = { -1, -1 };
	pid_t parent = getpid();

	/* libarchive is loaded here, from the host's libraries, before any child moves */
	if (sbx_archive_load(err) < 0)
		return -1;
	if (local_read_pids(rec->dir, &pids) == 0) {
		pidfd = (int)syscall(SYS_pidfd_open, pids.init_pid, 0);
		if (pidfd >= 0 && !local_alive(pids.init_pid, pids.init_start)) {
			close(pidfd);
			pidfd = -1;
		}
	}
	if (pidfd < 0) {
		char root[PATH_MAX];
		snprintf(root, sizeof(root), "%s/root", rec->dir);
		rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0 && errno == ENOENT)
			return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' has no files (its creation "
					   "did not finish); remove it with 'sbx rm -f %s'", label,
					   label);
		if (rootfd < 0)
			return sbx_err_errno(err, "cannot open '%s'", root);
		sbx_debug("cp: sandbox %s is stopped: entering its files directly", rec->id);
		if (pipe2(s1, O_CLOEXEC) < 0 || pipe2(s2, O_CLOEXEC) < 0) {
			sbx_err_errno(err, "cannot create a pipe");
			goto fail;
		}
	}
	if (pipe2(efd, O_CLOEXEC) < 0) {
		sbx_err_errno(err, "cannot create a pipe");
		goto fail;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		sbx_err_errno(err, "cannot start the copy");
		close(efd[0]);
		close(efd[1]);
		goto fail;
	}
	if (pid == 0) {
		close(efd[0]);
		if (pidfd >= 0)
			child_running(j, pidfd, pids.init_pid, map_range, parent, efd[1]);
		close(s1[0]);
		close(s2[1]);
		child_stopped(j, rootfd, s2[0], s1[1], map_range, parent, efd[1]);
	}
	close(efd[1]);
	if (pidfd >= 0)
		close(pidfd);
	if (rootfd >= 0) {
		char c;
		close(rootfd);
		close(s1[1]);
		close(s2[0]);
		ssize_t n;
		do
			n = read(s1[0], &c, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1 && write_maps(pid, map_range) < 0) {
			sbx_err_errno(err, "cannot write the id maps of the copy process");
			kill(pid, SIGKILL);
			(void)waitpid(pid, NULL, 0);
			close(s1[0]);
			close(s2[1]);
			close(efd[0]);
			return -1;
		}
		if (n == 1)
			(void)sbx_write_all(s2[1], "", 1);
		close(s1[0]);
		close(s2[1]);
	}
	int r = sbx_err_recv(efd[0], pid, "copy", err);
	close(efd[0]);
	return r;
fail:
	if (pidfd >= 0)
		close(pidfd);
	if (rootfd >= 0)
		close(rootfd);
	for (int i = 0; i < 2; i++) {
		if (s1[i] >= 0)
			close(s1[i]);
		if (s2[i] >= 0)
			close(s2[i]);
	}
	return -1;
}

int local_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	struct cp_job j = {
		.fd = tar_fd,
		.dest = dest,
		.top = opts->top,
		.flags = opts->archive ? SBX_EXTRACT_OWNER : 0,
	};

	local_touch_activity(rec->dir);
	_cleanup_(strv_freep) char **layers = NULL;
	if (local_image_layers(ctx, rec, &layers, &j.n_layers, err) < 0)
		return -1;
	j.layers = layers;
	return run(rec, &j, err);
}

int local_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		 const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	struct cp_job j = { .out = true, .fd = tar_fd, .follow = opts->follow_links };

	local_touch_activity(rec->dir);
	_cleanup_(strv_freep) char **layers = NULL;
	if (local_image_layers(ctx, rec, &layers, &j.n_layers, err) < 0)
		return -1;
	j.layers = layers;
	sbx_cp_src_parse(src, &j.src);
	int r = run(rec, &j, err);
	sbx_cp_src_release(&j.src);
	return r;
}
