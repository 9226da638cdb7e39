/* sbx fs on a local sandbox: each verb runs in cp.c's confined helper (the sandbox's '/',
 * its ids, no-exec mounts, Landlock, seccomp), so every path, '..' and symbolic link resolves
 * inside the sandbox; ls and stat send their entries to the CLI over a pipe. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "providers/local/local.h"

#define FS_BUF (256 * 1024)
#define FS_MAX_DEPTH 256      /* ls -R, rm -r: directories deeper are refused */
#define FS_MAX_PATH (1 << 16) /* an entry's path on the wire */

/* an entry on the pipe, followed by path_len bytes of path and target_len of link target */
struct wire {
	uint32_t path_len, target_len;
	int64_t size, mtime, uid, gid;
	uint32_t mode;
	char type;
	char pad[3];
};

struct fs_work {
	const struct sbx_fs_op *op;
	int rfd, wfd; /* ls, stat: the entries' pipe */
};

/* --- in the helper -------------------------------------------------------------------------- */

/* a file error: a missing path is not_found, one that exists is already_exists, else io */
static int fail(struct sbx_err *err, const char *what, const char *path)
{
	int e = errno;
	enum sbx_errkind kind = e == ENOENT || e == ENOTDIR ? SBX_E_NOTFOUND
		: e == EEXIST				    ? SBX_E_EXISTS
							    : SBX_E_IO;

	sbx_err_errno(err, "cannot %s '%s'", what, path);
	err->kind = kind;
	return -1;
}

static int copy(int in, int out, const char *what, const char *path, struct sbx_err *err)
{
	_cleanup_free_ char *buf = xmalloc(FS_BUF);

	for (;;) {
		ssize_t n = read(in, buf, FS_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(err, what, path);
		if (n == 0)
			return 0;
		/* a reader that went away (sbx fs read | head) ends the read, as main's stdout
		 * check takes it: no error */
		if (sbx_write_all(out, buf, (size_t)n) < 0)
			return errno == EPIPE && streq(what, "read") ? 0 : fail(err, what, path);
	}
}

static int do_read(const char *path, int fd, struct sbx_err *err)
{
	struct stat st;
	/* O_NONBLOCK: a fifo is not waited on; the type is checked before any read */
	_cleanup_close_ int in = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (in < 0 || fstat(in, &st) < 0)
		return fail(err, "read", path);
	if (S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is a directory", path);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(
			err, SBX_E_USAGE,
			"'%s' is not a regular file (a fifo, socket or device is not read)", path);
	return copy(in, fd, "read", path, err);
}

/* every missing directory of path up to (not including) its last component, or with last the
 * whole of it; 0755 */
static int make_parents(const char *path, bool last, struct sbx_err *err)
{
	_cleanup_free_ char *p = xstrdup(path);
	size_t n = strlen(p);
	struct stat st;

	while (n > 1 && p[n - 1] == '/')
		p[--n] = 0;
	for (char *s = p + 1;; s++) {
		bool end = !*s;
		if (*s != '/' && !end)
			continue;
		if (end && !last)
			break;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return fail(err, "create directory", p);
		if (stat(p, &st) < 0)
			return fail(err, "create directory", p);
		if (!S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			return fail(err, "create directory", p);
		}
		if (end)
			break;
		*s = '/';
	}
	return 0;
}

static int do_write(const char *path, int fd, int mode, struct sbx_err *err)
{
	struct stat st;
	int flags = O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

	if (make_parents(path, false, err) < 0)
		return -1;
	int out = open(path, flags | O_CREAT | O_EXCL, mode < 0 ? 0644 : mode);
	bool made = out >= 0;
	/* it exists, or it is a link (a dangling one's target is made, inside the sandbox) */
	if (out < 0 && errno == EEXIST)
		out = open(path, flags | O_CREAT, mode < 0 ? 0644 : mode);
	if (out < 0) {
		if (errno == EISDIR)
			return sbx_err_set(err, SBX_E_USAGE, "'%s' is a directory", path);
		return fail(err, "write", path);
	}
	_cleanup_close_ int o = out;
	if (fstat(o, &st) < 0)
		return fail(err, "write", path);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, SBX_E_USAGE,
				   "'%s' is not a regular file (a fifo, socket or device is not "
				   "written)",
				   path);
	if (ftruncate(o, 0) < 0 || fcntl(o, F_SETFL, O_WRONLY) < 0 ||
	    copy(fd, o, "write", path, err) < 0)
		return err->kind ? -1 : fail(err, "write", path);
	/* after the bytes: a write clears setuid and setgid bits */
	if ((mode >= 0 || made) && fchmod(o, (mode_t)(mode >= 0 ? mode : 0644)) < 0)
		return fail(err, "write", path);
	return 0;
}

static int send_entry(int fd, const char *path, const char *name, int dirfd, struct sbx_err *err)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t tn = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(err, "stat", path);
	if (S_ISLNK(st.st_mode) && (tn = readlinkat(dirfd, name, target, sizeof(target))) < 0)
		tn = 0;
	struct wire w = {
		.path_len = (uint32_t)strlen(path),
		.target_len = (uint32_t)tn,
		.size = st.st_size,
		.mtime = st.st_mtim.tv_sec,
		.uid = st.st_uid,
		.gid = st.st_gid,
		.mode = st.st_mode & 07777,
		.type = S_ISREG(st.st_mode)   ? 'f'
			: S_ISDIR(st.st_mode) ? 'd'
			: S_ISLNK(st.st_mode) ? 'l'
					      : 'o',
	};
	if (w.path_len > FS_MAX_PATH)
		return sbx_err_set(err, SBX_E_IO, "a path under '%.64s' is too long", path);
	struct strbuf b = STRBUF_INIT;
	strbuf_add(&b, &w, sizeof(w));
	strbuf_add(&b, path, w.path_len);
	strbuf_add(&b, target, (size_t)tn);
	int r = sbx_write_all(fd, b.buf, b.len);
	strbuf_release(&b);
	if (r < 0)
		return sbx_err_errno(err, "cannot send the entries");
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the names in dirfd (not '.' and '..'), sorted; *ret_n of them */
static char **names_of(int dirfd, const char *path, size_t *ret_n, struct sbx_err *err)
{
	int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	char **v = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;

	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		fail(err, "list", path);
		return NULL;
	}
	while ((errno = 0, de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (n + 2 > alloc) {
			alloc = alloc ? alloc * 2 : 32;
			v = xrealloc(v, alloc * sizeof(*v));
		}
		v[n++] = xstrdup(de->d_name);
	}
	int e = errno;
	closedir(d);
	if (e) {
		errno = e;
		fail(err, "list", path);
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return NULL;
	}
	if (n)
		qsort(v, n, sizeof(*v), by_name);
	*ret_n = n;
	return v ? v : xcalloc(1, sizeof(*v));
}

static void join(struct strbuf *b, const char *dir, const char *name)
{
	strbuf_reset(b);
	strbuf_addstr(b, dir);
	if (!b->len || b->buf[b->len - 1] != '/')
		strbuf_addch(b, '/');
	strbuf_addstr(b, name);
}

/* the entries of the directory dirfd (path), and with recursive of those below */
static int list_dir(int fd, int dirfd, const char *path, bool recursive, int depth,
		    struct sbx_err *err)
{
	size_t n = 0;
	char **names = names_of(dirfd, path, &n, err);
	struct strbuf sub = STRBUF_INIT;
	int r = 0;

	if (!names)
		return -1;
	if (depth > FS_MAX_DEPTH)
		r = sbx_err_set(err, SBX_E_IO, "'%.200s' is nested too deeply", path);
	for (size_t i = 0; r == 0 && i < n; i++) {
		join(&sub, path, names[i]);
		r = send_entry(fd, sub.buf, names[i], dirfd, err);
		if (r < 0 || !recursive)
			continue;
		int cfd = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0)
			continue; /* not a directory (or no longer one) */
		r = list_dir(fd, cfd, sub.buf, recursive, depth + 1, err);
		close(cfd);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	strbuf_release(&sub);
	return r;
}

static int do_ls(const char *path, int fd, bool recursive, struct sbx_err *err)
{
	/* a directory (or a link to one) is listed; anything else is its own entry */
	_cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0 && errno != ENOTDIR)
		return fail(err, "list", path);
	if (dfd < 0)
		return send_entry(fd, path, path, AT_FDCWD, err);
	return list_dir(fd, dfd, path, recursive, 0, err);
}

/* what is below the directory dirfd (path), removed */
static int empty_dir(int dirfd, const char *path, int depth, struct sbx_err *err)
{
	size_t n = 0;
	char **names = names_of(dirfd, path, &n, err);
	struct strbuf sub = STRBUF_INIT;
	int r = 0;

	if (!names)
		return -1;
	if (depth > FS_MAX_DEPTH)
		r = sbx_err_set(err, SBX_E_IO, "'%.200s' is nested too deeply", path);
	for (size_t i = 0; r == 0 && i < n; i++) {
		join(&sub, path, names[i]);
		if (unlinkat(dirfd, names[i], 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = fail(err, "remove", sub.buf);
			continue;
		}
		int cfd = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			r = fail(err, "remove", sub.buf);
			continue;
		}
		r = empty_dir(cfd, sub.buf, depth + 1, err);
		close(cfd);
		if (r == 0 && unlinkat(dirfd, names[i], AT_REMOVEDIR) < 0)
			r = fail(err, "remove", sub.buf);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	strbuf_release(&sub);
	return r;
}

static int do_rm(const char *path, bool recursive, bool force, struct sbx_err *err)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT && force)
			return 0;
		return fail(err, "remove", path);
	}
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? fail(err, "remove", path) : 0;
	if (!recursive)
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is a directory (remove it with -r)",
				   path);
	_cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return fail(err, "remove", path);
	if (empty_dir(dfd, path, 0, err) < 0)
		return -1;
	return rmdir(path) < 0 ? fail(err, "remove", path) : 0;
}

static int do_mkdir(const char *path, bool parents, struct sbx_err *err)
{
	if (parents)
		return make_parents(path, true, err);
	return mkdir(path, 0755) < 0 ? fail(err, "create directory", path) : 0;
}

static int do_mv(const char *src, const char *dst, struct sbx_err *err)
{
	struct stat st;

	if (lstat(src, &st) < 0)
		return fail(err, "move", src);
	if (rename(src, dst) < 0)
		return fail(err, "move to", dst);
	return 0;
}

static int work(void *arg, int fd, struct sbx_err *err)
{
	const struct fs_work *w = arg;
	const struct sbx_fs_op *op = w->op;

	umask(0);
	switch (op->verb) {
	case SBX_FS_READ:
		return do_read(op->path, fd, err);
	case SBX_FS_WRITE:
		return do_write(op->path, fd, op->mode, err);
	case SBX_FS_LS:
		return do_ls(op->path, fd, op->recursive, err);
	case SBX_FS_STAT:
		return send_entry(fd, op->path, op->path, AT_FDCWD, err);
	case SBX_FS_RM:
		return do_rm(op->path, op->recursive, op->force, err);
	case SBX_FS_MKDIR:
		return do_mkdir(op->path, op->parents, err);
	case SBX_FS_MV:
		return do_mv(op->path, op->dst, err);
	}
	return sbx_err_set(err, SBX_E_INTERNAL, "unknown file verb");
}

/* --- in the CLI ----------------------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t n)
{
	size_t have = 0;

	while (have < n) {
		ssize_t r = read(fd, (char *)buf + have, n - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return have ? -1 : 0;
		have += (size_t)r;
	}
	return 1;
}

/* the helper's entries, each to op->entry; the helper is sandbox content's reader, so its
 * words are checked as any sandbox's */
static int drain(void *arg, struct sbx_err *err)
{
	struct fs_work *w = arg;
	struct wire h;
	int r = 0;

	close(w->wfd);
	w->wfd = -1;
	for (;;) {
		int got = read_full(w->rfd, &h, sizeof(h));
		if (got == 0)
			break;
		if (got < 0 || h.path_len == 0 || h.path_len > FS_MAX_PATH ||
		    h.target_len >= PATH_MAX) {
			r = sbx_err_set(err, SBX_E_INTERNAL, "the file helper sent a broken entry");
			break;
		}
		_cleanup_free_ char *path = xmalloc(h.path_len + 1);
		_cleanup_free_ char *target = xmalloc(h.target_len + 1);
		if (read_full(w->rfd, path, h.path_len) != 1 ||
		    (h.target_len && read_full(w->rfd, target, h.target_len) != 1)) {
			r = sbx_err_set(err, SBX_E_INTERNAL, "the file helper sent a broken entry");
			break;
		}
		path[h.path_len] = 0;
		target[h.target_len] = 0;
		/* a NUL inside would shorten what is shown: not a name the kernel gives */
		if (strlen(path) != h.path_len || strlen(target) != h.target_len) {
			r = sbx_err_set(err, SBX_E_INTERNAL, "the file helper sent a broken entry");
			break;
		}
		struct sbx_fs_entry e = {
			.path = path,
			.link_target = h.type == 'l' ? target : NULL,
			.type = h.type == 'f' || h.type == 'd' || h.type == 'l' ? h.type : 'o',
			.mode = h.mode & 07777,
			.uid = h.uid,
			.gid = h.gid,
			.size = h.size,
			.mtime = h.mtime,
		};
		if (w->op->entry && (r = w->op->entry(w->op->arg, &e, err)) < 0)
			break;
	}
	/* the helper's next write fails rather than waits */
	close(w->rfd);
	w->rfd = -1;
	return r;
}

int local_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	     struct sbx_err *err)
{
	struct fs_work w = { .op = op, .rfd = -1, .wfd = -1 };
	int p[2];

	switch (op->verb) {
	case SBX_FS_READ:
	case SBX_FS_WRITE:
		return local_confined(ctx, rec, op->fd, work, NULL, &w, err);
	case SBX_FS_LS:
	case SBX_FS_STAT:
		if (pipe2(p, O_CLOEXEC) < 0)
			return sbx_err_errno(err, "cannot create a pipe");
		w.rfd = p[0];
		w.wfd = p[1];
		int r = local_confined(ctx, rec, w.wfd, work, drain, &w, err);
		if (w.rfd >= 0)
			close(w.rfd);
		if (w.wfd >= 0)
			close(w.wfd);
		return r;
	default: {
		_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null_fd < 0)
			return sbx_err_errno(err, "cannot open /dev/null");
		return local_confined(ctx, rec, null_fd, work, NULL, &w, err);
	}
	}
}
