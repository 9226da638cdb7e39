/* sbx cp for the local provider: a child packs or unpacks from inside the sandbox, confined as a
 * command of the sandbox is (DESIGN.md §7).
 *
 * Processes: the CLI forks the first child. It joins the running sandbox (its cgroup, then
 * every namespace) or, when nothing runs, builds the sandbox's files in namespaces of its own
 * and pivots into them. Its child, in the sandbox's pid namespace, gets a noexec view of the
 * mounts, an empty environment, no descriptor but the stream and its report, docker's
 * capabilities, no_new_privs, Landlock and the seccomp filter, then packs or unpacks. Locale
 * and charset conversions were fixed by the CLI before any of this (sbx_confine_prepare), and
 * libarchive runs only its built-in filters: nothing is loaded from the sandbox's files. */
#define _GNU_SOURCE
#include "providers/local/local.h"

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
#include "core/confine.h"
#include "core/digest.h"
#include "core/image.h"
#include "core/json.h"
#include "core/log.h"
#include "core/proc.h"
#include "core/strbuf.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif

#define R "/tmp" /* where a stopped sandbox's root is attached before the pivot */

/* what the child does once inside */
struct cp_job {
	bool out;	       /* pack src (cp_out) rather than unpack into dest (cp_in) */
	int fd;		       /* the tar stream */
	const char *dest;      /* cp_in */
	const char *top;       /* cp_in: NULL for a '-' stream */
	unsigned flags;	       /* cp_in: SBX_EXTRACT_* */
	struct sbx_cp_src src; /* cp_out */
	bool follow;	       /* cp_out: -L */
	char **layers;	       /* an image sandbox's layer directories, base first (NULL: none) */
	size_t n_layers;
	bool image; /* on an image: no host's system view (n_layers may be a stacked snapshot's) */
	/* read on the host before the child moves */
	const void *bpf; /* the sandbox's seccomp filter */
	size_t bpf_len;
	int null_fd;		/* /dev/null, for the standard descriptors the work does not use */
	struct local_idmap map; /* the sandbox's ids */
	bool join_cgroup;	/* running and not paused: the copy is charged to the sandbox */
	const char *sbdir;
	int disk_fd; /* stopped, with --disk: a mount of its disk (-1: none) */
	/* another work than a copy (sbx fs, local_confined): fn on fd, drain in the CLI */
	int (*fn)(void *arg, int fd, struct sbx_err *err);
	int (*drain)(void *arg, struct sbx_err *err);
	void *arg;
};

static _noreturn_ void child_exit(int efd, const struct sbx_err *err)
{
	sbx_err_send(efd, err);
	_exit(err ? 1 : 0);
}

/* uid and gid 0 in the user namespace just joined or made (with ids beyond 0, without the
 * caller's supplementary groups) */
static int become_root(const struct local_idmap *m, struct sbx_err *err)
{
	if ((m->kind != LOCAL_MAP_SELF && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		return sbx_err_errno(err, "cannot become root in the sandbox");
	return 0;
}

/* in the sandbox's pid namespace (a new child, for the pid namespace to apply): the last
 * confinement steps, then the work itself. Paths are the sandbox's, relative ones from its
 * '/' (as docker's). private: the mount namespace is the sandbox's own, and gets a copy */
static _noreturn_ void work(const struct cp_job *j, bool private, int efd)
{
	struct sbx_err e = { 0 };
	pid_t pid = fork();

	if (pid < 0) {
		sbx_err_errno(&e, "cannot start the copy in the sandbox");
		child_exit(efd, &e);
	}
	if (pid > 0) {
		/* the first child passes its child's end on */
		close(efd);
		close(j->fd);
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				_exit(1);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	/* the first child is outside this pid namespace: no getppid() check, but the signal
	 * comes all the same (the credentials do not change from here on) */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	int keep[] = { j->fd, efd };
	if (sbx_confine_noexec(private, &e) < 0 ||
	    sbx_confine_finish(keep, ARRAY_SIZE(keep), j->null_fd, j->bpf, j->bpf_len, &e) < 0)
		child_exit(efd, &e);
	if (chdir("/") < 0) {
		sbx_err_errno(&e, "cannot enter '/' in the sandbox");
		child_exit(efd, &e);
	}
	int r = j->fn	 ? j->fn(j->arg, j->fd, &e)
		: j->out ? sbx_archive_pack(j->fd, &j->src, j->follow, &e)
			 : sbx_archive_extract(j->fd, j->dest, j->top, j->flags, &e);
	child_exit(efd, r < 0 ? &e : NULL);
}

/* the CLI's death ends the copy: the signal is set after the last change of credentials, which
 * clears it */
static void tie_to(pid_t cli)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != cli)
		_exit(1);
}

/* --- a running sandbox: its cgroup, then every namespace --------------------------------- */

static _noreturn_ void child_running(const struct cp_job *j, const struct sbx_record *rec,
				     int pidfd, pid_t init_pid, pid_t cli, int efd)
{
	struct sbx_err e = { 0 };

	/* nothing inside may trace or read this process */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	tie_to(cli);
	if (j->join_cgroup && local_cgroup_enter(j->sbdir, getpid()) < 0) {
		sbx_err_errno(&e, "cannot join the sandbox's cgroup");
		child_exit(efd, &e);
	}
	/* after joining the mount namespace, '/' and the working directory are the sandbox's
	 * root: every path, '..' and symlink resolves inside */
	if (local_join(rec, init_pid, pidfd, &e) < 0 || become_root(&j->map, &e) < 0)
		child_exit(efd, &e);
	tie_to(cli);
	close(pidfd);
	work(j, true, efd);
}

/* --- a stopped sandbox: its files, in namespaces of the copy's own ------------------------- */

static const char *const sys_dirs[] = { "usr",	 "bin",	  "sbin",   "lib",
					"lib32", "lib64", "libx32", "etc" };

static int detach(int dirfd, const char *path)
{
	return (int)syscall(SYS_open_tree, dirfd, path,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
				    (*path ? 0 : AT_EMPTY_PATH));
}

/* detached copies of the sandbox's trees: root/ itself (a sandbox on the host's system view),
 * or an image sandbox's layer directories and its fs/ (next to root/, which rootfd is: an fd
 * of the host's mount namespace, or AT_FDCWD once the working directory moved onto our copy) */
static int *sandbox_trees(const struct cp_job *j, int rootfd, int efd)
{
	int *fds = xcalloc(j->n_layers + 1, sizeof(int));

	for (size_t i = 0; i <= j->n_layers; i++) {
		if (i == j->n_layers && j->disk_fd >= 0)
			fds[i] = j->disk_fd; /* the disk is root/, or fs/ with an image */
		else if (!j->n_layers)
			fds[i] = detach(rootfd, "");
		else if (i < j->n_layers)
			fds[i] = detach(AT_FDCWD, j->layers[i]);
		else
			fds[i] = detach(rootfd, "../fs");
		if (fds[i] < 0) {
			struct sbx_err e = { 0 };
			sbx_err_errno(&e, "cannot open the sandbox's files");
			child_exit(efd, &e);
		}
	}
	return fds;
}

/* an image sandbox: the overlay of its layers, on root/m (root/ is only a place to stand: the
 * trees go on mount points made in it, once; they stay, empty), which becomes the cwd */
static void mount_image(const struct cp_job *j, int *treefd, int efd)
{
	struct sbx_err e = { 0 };
	struct strbuf o = STRBUF_INIT;
	char at[32];

	for (size_t i = 0; i <= j->n_layers + 1; i++) {
		snprintf(at, sizeof(at), i <= j->n_layers ? "%zu" : "m", i);
		if (mkdir(at, 0755) < 0 && errno != EEXIST) {
			sbx_err_errno(&e, "cannot create mount point '%s'", at);
			child_exit(efd, &e);
		}
		if (i <= j->n_layers &&
		    syscall(SYS_move_mount, treefd[i], "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) <
			    0) {
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
	if (mount("overlay", "m", "overlay", 0, o.buf) < 0 || chdir("m") < 0) {
		sbx_err_errno(&e,
			      "cannot mount the image's files (is the sandbox starting at the "
			      "same time?)");
		child_exit(efd, &e);
	}
	strbuf_release(&o);
}

static _noreturn_ void child_stopped(const struct cp_job *j, int rootfd, int sync_in, int sync_out,
				     pid_t cli, int efd)
{
	struct sbx_err e = { 0 };
	int sysfd[ARRAY_SIZE(sys_dirs)];
	int *treefd = NULL;
	char c;

	tie_to(cli);
	/* run by root, the sandbox's trees are detached now, while we can still reach them
	 * (sandbox root cannot traverse root's home); otherwise once in our own namespaces,
	 * where we may. Into the sandbox's files first: unshare moves the working directory
	 * onto our own copy of its mount */
	if (j->map.kind == LOCAL_MAP_RANGE)
		treefd = sandbox_trees(j, rootfd, efd);
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
	if (become_root(&j->map, &e) < 0)
		child_exit(efd, &e);
	tie_to(cli);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		sbx_err_errno(&e, "cannot make mounts private");
		child_exit(efd, &e);
	}
	if (!treefd)
		treefd = sandbox_trees(j, AT_FDCWD, efd);
	/* the host's system view, read-only, as init binds it: detached now, attached once
	 * inside, where the mount points resolve within the sandbox only */
	for (size_t i = 0; i < ARRAY_SIZE(sys_dirs); i++) {
		char host[64];
		struct stat st;
		struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
		sysfd[i] = -1;
		snprintf(host, sizeof(host), "/%s", sys_dirs[i]);
		if (j->image || lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* an image brings its own; symlinks were copied at create */
		sysfd[i] = detach(AT_FDCWD, host);
		if (sysfd[i] < 0 ||
		    syscall(SYS_mount_setattr, sysfd[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &a,
			    sizeof(a)) < 0) {
			sbx_err_errno(&e, "cannot open '%s'", host);
			child_exit(efd, &e);
		}
	}
	/* the sandbox's root becomes '/': every path resolves inside from here, and nothing of
	 * the host's mounts is left to reach */
	if (j->n_layers) {
		mount_image(j, treefd, efd);
	} else if (syscall(SYS_move_mount, treefd[0], "", AT_FDCWD, R, MOVE_MOUNT_F_EMPTY_PATH) <
			   0 ||
		   chdir(R) < 0) {
		sbx_err_errno(&e, "cannot attach the sandbox's files");
		child_exit(efd, &e);
	}
	if (syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0) {
		sbx_err_errno(&e, "cannot enter the sandbox's files");
		child_exit(efd, &e);
	}
	for (size_t i = 0; i < ARRAY_SIZE(sys_dirs); i++) {
		char in[64];
		struct stat st;
		if (sysfd[i] < 0)
			continue;
		snprintf(in, sizeof(in), "/%s", sys_dirs[i]);
		if (lstat(in, &st) == 0 && S_ISDIR(st.st_mode) &&
		    syscall(SYS_move_mount, sysfd[i], "", AT_FDCWD, in, MOVE_MOUNT_F_EMPTY_PATH) <
			    0) {
			sbx_err_errno(&e, "cannot mount '%s'", in);
			child_exit(efd, &e);
		}
		close(sysfd[i]);
	}
	/* the rest of a sandbox's namespaces, of the copy's own */
	if (unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) <
	    0) {
		sbx_err_errno(&e, "cannot create the copy's namespaces");
		child_exit(efd, &e);
	}
	work(j, false, efd);
}

static int sandbox_maps(pid_t pid, void *map)
{
	return local_write_maps(pid, map);
}

/* --- the parent ----------------------------------------------------------------------------- */

static int run(const struct sbx_record *rec, struct cp_job *j, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;
	int pidfd = -1, rootfd = -1, efd[2], s1[2] = { -1, -1 }, s2[2] = { -1, -1 };
	pid_t cli = getpid();

	/* everything the child needs from the host, before it moves: libarchive and its
	 * libraries, the conversion tables, the filter, /dev/null */
	if (!j->fn && sbx_archive_load(err) < 0)
		return -1;
	sbx_confine_prepare();
	size_t bpf_len = 0;
	_cleanup_free_ void *bpf = NULL;
	/* a --nested sandbox's own filter lets its processes make namespaces: the helper keeps
	 * the strict one */
	if (rec->config.nested ? sbx_seccomp_build(&bpf, &bpf_len, err) < 0
			       : local_seccomp_of(rec, label, &bpf, &bpf_len, err) < 0)
		return -1;
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return sbx_err_errno(err, "cannot open /dev/null");
	j->bpf = bpf;
	j->bpf_len = bpf_len;
	j->null_fd = null_fd;
	local_idmap_of(rec, &j->map);
	j->sbdir = rec->dir;
	if (local_read_pids(rec->dir, &pids) == 0) {
		pidfd = sbx_pidfd_open(pids.init_pid);
		if (pidfd >= 0 &&
		    (!sbx_proc_alive(pids.init_pid, pids.init_start) ||
		     !sbx_proc_alive(pids.sup_pid, pids.sup_start))) {
			close(pidfd);
			pidfd = -1;
		}
	}
	/* a paused sandbox's cgroup would freeze the copy too. sbx fs's work (j->fn) is not
	 * charged: one process with a fixed buffer, no children, whatever the sandbox holds;
	 * joining costs an RCU grace period (the cgroup lock), most of a small read's time */
	j->join_cgroup = !j->fn && pidfd >= 0 && local_is_frozen(rec->dir, &pids) != 1;
	_cleanup_close_ int disk_lock = -1, disk = -1;
	if (pidfd < 0 && local_disk_size(rec) > 0 &&
	    (disk = local_disk_mount(rec->dir, &disk_lock, err)) < 0)
		return -1;
	j->disk_fd = disk;
	if (pidfd < 0) {
		char root[PATH_MAX];
		snprintf(root, sizeof(root), "%s/root", rec->dir);
		rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0 && errno == ENOENT)
			return sbx_err_set(err, SBX_E_STATE,
					   "sandbox '%s' has no files (its creation "
					   "did not finish); remove it with 'sbx rm -f %s'",
					   label, label);
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
			child_running(j, rec, pidfd, pids.init_pid, cli, efd[1]);
		close(s1[0]);
		close(s2[1]);
		child_stopped(j, rootfd, s2[0], s1[1], cli, efd[1]);
	}
	close(efd[1]);
	if (pidfd >= 0)
		close(pidfd);
	if (rootfd >= 0) {
		close(rootfd);
		close(s1[1]);
		close(s2[0]);
		if (sbx_userns_release(pid, s1[0], s2[1], sandbox_maps, &j->map) < 0) {
			sbx_err_errno(err, "cannot write the id maps of the copy process");
			close(efd[0]);
			return -1;
		}
	}
	struct sbx_err drained = { 0 };
	int dr = j->drain ? j->drain(j->arg, &drained) : 0;
	int r = sbx_err_recv(efd[0], pid, j->fn ? "file" : "copy", err);
	close(efd[0]);
	if (r == 0 && dr < 0) {
		*err = drained;
		r = -1;
	}
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
		.disk_fd = -1,
	};

	local_touch_activity(rec->dir);
	_cleanup_(strv_freep) char **layers = NULL;
	if (local_image_layers(ctx, rec, &layers, &j.n_layers, err) < 0)
		return -1;
	j.layers = layers;
	j.image = rec->config.image.layers && rec->config.image.layers[0];
	return run(rec, &j, err);
}

int local_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		 const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	struct cp_job j = {
		.out = true, .fd = tar_fd, .follow = opts->follow_links, .disk_fd = -1
	};

	local_touch_activity(rec->dir);
	_cleanup_(strv_freep) char **layers = NULL;
	if (local_image_layers(ctx, rec, &layers, &j.n_layers, err) < 0)
		return -1;
	j.layers = layers;
	j.image = rec->config.image.layers && rec->config.image.layers[0];
	sbx_cp_src_parse(src, &j.src);
	int r = run(rec, &j, err);
	sbx_cp_src_release(&j.src);
	return r;
}

int local_confined(struct sbx_ctx *ctx, const struct sbx_record *rec, int fd,
		   int (*fn)(void *arg, int fd, struct sbx_err *err),
		   int (*drain)(void *arg, struct sbx_err *err), void *arg, struct sbx_err *err)
{
	struct cp_job j = { .fd = fd, .disk_fd = -1, .fn = fn, .drain = drain, .arg = arg };

	local_touch_activity(rec->dir);
	_cleanup_(strv_freep) char **layers = NULL;
	if (local_image_layers(ctx, rec, &layers, &j.n_layers, err) < 0)
		return -1;
	j.layers = layers;
	j.image = rec->config.image.layers && rec->config.image.layers[0];
	return run(rec, &j, err);
}
