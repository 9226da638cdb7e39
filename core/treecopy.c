/* A faithful copy of a directory tree, walked by descriptor: every name is opened relative to
 * its directory's descriptor with O_NOFOLLOW, so a link planted in the source is copied as a
 * link and never leads the copy anywhere else. */
#define _GNU_SOURCE
#include "core/treecopy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/test-hook.h"
#include "core/util.h"

#define MAX_DEPTH 200
#define XATTR_LIST_MAX_ 65536
#define XATTR_VALUE_MAX_ 65536

struct seen {
	dev_t dev;
	ino_t ino;
	char *path; /* where the first of its names went, relative to the copy's top */
};

struct pool;

struct walk {
	bool own;
	int dst_top;
	struct sbx_treecopy_stats *st;
	struct seen *seen;
	size_t n_seen, cap_seen;
	char path[PATH_MAX]; /* the entry at hand, relative to the top */
	char *buf;	     /* XATTR_VALUE_MAX_ bytes */
	struct sbx_err *err;
	struct pool *pool; /* where a regular file's data and attributes go (NULL: here) */
};

/* A regular file is made by the walk, which goes on at once (a hard link to it can follow):
 * its data (a clone, most of the cost) and its attributes are the work of POOL_THREADS
 * threads, through a queue of POOL_QUEUE files, open at both ends. */
#define POOL_THREADS 2
#define POOL_QUEUE 64

struct file_job {
	int src, dst;
	struct stat st;
	char *path;
};

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t more, room;
	struct file_job q[POOL_QUEUE];
	size_t head, len;
	bool done;
	bool failed; /* err holds the first failure */
	struct sbx_err err;
	pthread_t threads[POOL_THREADS];
	size_t n_threads;
	bool own, test_enospc;
	unsigned long long bytes, cloned;
};

static int fail(struct walk *w, const char *what)
{
	return sbx_err_errno(w->err, "cannot %s '%s'", what, w->path[0] ? w->path : ".");
}

/* extended attributes of src onto dst: user.* must come along (unless the destination keeps
 * none); security.*, trusted.* and others as far as we may set them */
static int copy_xattrs(struct walk *w, int src, int dst)
{
	char list[XATTR_LIST_MAX_];
	ssize_t n = flistxattr(src, list, sizeof(list));

	if (n < 0)
		return errno == ENOTSUP ? 0 : fail(w, "list the attributes of");
	for (char *k = list; k < list + n; k += strlen(k) + 1) {
		ssize_t v = fgetxattr(src, k, w->buf, XATTR_VALUE_MAX_);
		if (v < 0) {
			if (errno == ENODATA)
				continue;
			return fail(w, "read the attributes of");
		}
		if (fsetxattr(dst, k, w->buf, (size_t)v, 0) == 0)
			continue;
		if (strncmp(k, "user.", 5) == 0 && errno != ENOTSUP)
			return fail(w, "copy the attributes of");
	}
	return 0;
}

/* owner, attributes, mode, times: in this order, since a change of owner clears set-id bits and
 * file capabilities */
static int copy_meta(struct walk *w, int src, int dst, const struct stat *st)
{
	if (w->own && fchown(dst, st->st_uid, st->st_gid) < 0)
		return fail(w, "set the owner of");
	if (src >= 0 && copy_xattrs(w, src, dst) < 0)
		return -1;
	if (fchmod(dst, st->st_mode & 07777) < 0)
		return fail(w, "set the mode of");
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	if (futimens(dst, ts) < 0)
		return fail(w, "set the times of");
	return 0;
}

/* the data of src into dst: a reflink where the filesystem shares blocks, else the data
 * extents alone (holes stay holes) */
static int copy_data(struct walk *w, int src, int dst, off_t size)
{
	if (size == 0)
		return 0;
	if (!w->st->test_enospc && ioctl(dst, FICLONE, src) == 0) {
		w->st->cloned++;
		return 0;
	}
	off_t off = 0;
	while (off < size) {
		off_t data = lseek(src, off, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* a hole to the end */
			return fail(w, "read");
		}
		off_t hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return fail(w, "read");
		off_t in = data, out = data;
		while (in < hole) {
			if (w->st->test_enospc) {
				errno = ENOSPC;
				return fail(w, "write");
			}
			ssize_t k = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
			if (k < 0 &&
			    (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
			     errno == EOPNOTSUPP)) {
				/* no in-kernel copy between these: by hand */
				char b[65536];
				ssize_t r = pread(src, b, sizeof(b), in);
				if (r < 0)
					return fail(w, "read");
				if (r == 0)
					break;
				ssize_t wr = pwrite(dst, b, (size_t)r, out);
				if (wr != r) {
					if (wr >= 0)
						errno = ENOSPC;
					return fail(w, "write");
				}
				k = r;
				in += r;
				out += r;
			} else if (k < 0) {
				return fail(w, "write");
			} else if (k == 0) {
				break; /* the file shrank meanwhile */
			}
			w->st->bytes += (unsigned long long)k;
		}
		off = hole;
	}
	if (ftruncate(dst, size) < 0)
		return fail(w, "write");
	return 0;
}

static struct seen *seen_find(struct walk *w, const struct stat *st)
{
	for (size_t i = 0; i < w->n_seen; i++)
		if (w->seen[i].ino == st->st_ino && w->seen[i].dev == st->st_dev)
			return &w->seen[i];
	return NULL;
}

static void seen_add(struct walk *w, const struct stat *st)
{
	if (w->n_seen == w->cap_seen) {
		w->cap_seen = w->cap_seen ? 2 * w->cap_seen : 64;
		w->seen = xrealloc(w->seen, w->cap_seen * sizeof(*w->seen));
	}
	w->seen[w->n_seen++] = (struct seen){ st->st_dev, st->st_ino, xstrdup(w->path) };
}

static void *pool_work(void *arg)
{
	struct pool *p = arg;
	struct sbx_treecopy_stats st = { .test_enospc = p->test_enospc };
	struct sbx_err err = { 0 };
	struct walk w = { .own = p->own, .st = &st, .err = &err, .buf = xmalloc(XATTR_VALUE_MAX_) };

	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!p->len && !p->done)
			pthread_cond_wait(&p->more, &p->mu);
		if (!p->len) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		struct file_job j = p->q[p->head];
		p->head = (p->head + 1) % POOL_QUEUE;
		p->len--;
		bool skip = p->failed;
		pthread_cond_signal(&p->room);
		pthread_mutex_unlock(&p->mu);
		snprintf(w.path, sizeof(w.path), "%s", j.path);
		if (!skip &&
		    (copy_data(&w, j.src, j.dst, j.st.st_size) < 0 ||
		     copy_meta(&w, j.src, j.dst, &j.st) < 0)) {
			pthread_mutex_lock(&p->mu);
			if (!p->failed) {
				p->failed = true;
				p->err = err;
			}
			pthread_mutex_unlock(&p->mu);
		}
		close(j.src);
		close(j.dst);
		free(j.path);
	}
	pthread_mutex_lock(&p->mu);
	p->bytes += st.bytes;
	p->cloned += st.cloned;
	pthread_mutex_unlock(&p->mu);
	free(w.buf);
	return NULL;
}

/* a pool of threads for w, or none (where threads cannot be made: the walk does it all) */
static void pool_start(struct walk *w, struct pool *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->more, NULL);
	pthread_cond_init(&p->room, NULL);
	p->own = w->own;
	p->test_enospc = w->st->test_enospc;
	for (size_t i = 0; i < POOL_THREADS; i++)
		if (pthread_create(&p->threads[p->n_threads], NULL, pool_work, p) == 0)
			p->n_threads++;
	w->pool = p->n_threads ? p : NULL;
}

/* the queue drained, the threads ended; -1 (w's error the first of theirs) if one failed */
static int pool_finish(struct walk *w, struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->done = true;
	pthread_cond_broadcast(&p->more);
	pthread_mutex_unlock(&p->mu);
	for (size_t i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	w->st->bytes += p->bytes;
	w->st->cloned += p->cloned;
	w->pool = NULL;
	pthread_cond_destroy(&p->more);
	pthread_cond_destroy(&p->room);
	pthread_mutex_destroy(&p->mu);
	if (!p->failed)
		return 0;
	*w->err = p->err;
	return -1;
}

/* the file src -> dst (both open, dst just made) handed to the pool; -1 once a thread failed */
static int pool_put(struct walk *w, int src, int dst, const struct stat *st)
{
	struct pool *p = w->pool;

	pthread_mutex_lock(&p->mu);
	while (p->len == POOL_QUEUE && !p->failed)
		pthread_cond_wait(&p->room, &p->mu);
	if (p->failed) {
		pthread_mutex_unlock(&p->mu);
		close(src);
		close(dst);
		return -1;
	}
	p->q[(p->head + p->len) % POOL_QUEUE] =
		(struct file_job){ .src = src, .dst = dst, .st = *st, .path = xstrdup(w->path) };
	p->len++;
	pthread_cond_signal(&p->more);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

static int copy_dir(struct walk *w, int sfd, int dfd, int depth);

static int copy_entry(struct walk *w, int sfd, int dfd, const char *name, int depth)
{
	struct stat st;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(w, "read");
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct seen *s = seen_find(w, &st);
		if (s) {
			if (linkat(w->dst_top, s->path, dfd, name, 0) < 0)
				return fail(w, "link");
			w->st->links++;
			return 0;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		if (depth >= MAX_DEPTH) {
			errno = ELOOP;
			return fail(w, "copy (too deep)");
		}
		if (mkdirat(dfd, name, 0700) < 0)
			return fail(w, "create");
		_cleanup_close_ int s = openat(sfd, name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_close_ int d = openat(dfd, name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s < 0 || d < 0)
			return fail(w, "open");
		w->st->dirs++;
		if (copy_dir(w, s, d, depth + 1) < 0)
			return -1;
		return copy_meta(w, s, d, &st);
	}
	if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int s = openat(
			sfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		struct stat now;
		if (s < 0 || fstat(s, &now) < 0)
			return fail(w, "open");
		if (!S_ISREG(now.st_mode) || now.st_ino != st.st_ino) {
			errno = ESTALE;
			return fail(w, "copy (it changed meanwhile)");
		}
		_cleanup_close_ int d = openat(
			dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (d < 0)
			return fail(w, "create");
		if (w->pool) {
			if (pool_put(w, TAKE_FD(s), TAKE_FD(d), &now) < 0)
				return -1;
		} else if (copy_data(w, s, d, now.st_size) < 0 || copy_meta(w, s, d, &now) < 0) {
			return -1;
		}
		w->st->files++;
		w->st->size += (unsigned long long)now.st_size;
	} else if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(w, "read");
		target[n] = 0;
		if (symlinkat(target, dfd, name) < 0)
			return fail(w, "create");
		if (w->own && fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(w, "set the owner of");
		struct timespec ts[2] = { st.st_atim, st.st_mtim };
		if (utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(w, "set the times of");
		w->st->files++;
	} else {
		/* a fifo, a socket, a device node (an overlay's whiteout is 0:0): made again, its
		 * attributes left behind (none can be set through a descriptor) */
		if (mknodat(dfd, name, st.st_mode, st.st_rdev) < 0)
			return fail(w, "create");
		if (w->own && fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(w, "set the owner of");
		if (fchmodat(dfd, name, st.st_mode & 07777, 0) < 0)
			return fail(w, "set the mode of");
		struct timespec ts[2] = { st.st_atim, st.st_mtim };
		if (utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(w, "set the times of");
		w->st->files++;
	}
	if (st.st_nlink > 1)
		seen_add(w, &st);
	return 0;
}

/* fn(arg, sfd, dfd, name, depth) for each entry of the directory sfd, with w->path naming it
 * meanwhile; the first failure ends the walk */
static int each_entry(struct walk *w, int sfd, int dfd, int depth,
		      int (*fn)(void *arg, int sfd, int dfd, const char *name, int depth),
		      void *arg)
{
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail(w, "open");
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return fail(w, "open");
	}
	size_t len = strlen(w->path);
	struct dirent *de;
	int r = 0;
	errno = 0;
	while (r == 0 && (de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		int m = snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "",
				 de->d_name);
		if (m < 0 || (size_t)m >= sizeof(w->path) - len) {
			w->path[len] = 0;
			errno = ENAMETOOLONG;
			r = fail(w, "copy a name in");
			break;
		}
		r = fn(arg, sfd, dfd, de->d_name, depth);
		w->path[len] = 0;
		errno = 0;
	}
	if (r == 0 && errno)
		r = fail(w, "read");
	closedir(d);
	return r;
}

static int copy_one(void *arg, int sfd, int dfd, const char *name, int depth)
{
	return copy_entry(arg, sfd, dfd, name, depth);
}

static int copy_dir(struct walk *w, int sfd, int dfd, int depth)
{
	return each_entry(w, sfd, dfd, depth, copy_one, w);
}

int sbx_tree_copy(int src_fd, int dst_fd, bool own, struct sbx_treecopy_stats *stats,
		  struct sbx_err *err)
{
	struct sbx_treecopy_stats ignored = { 0 };
	struct walk w = {
		.own = own, .dst_top = dst_fd, .st = stats ? stats : &ignored, .err = err
	};
	struct stat st;
	int r;

	struct pool pool;

	if (fstat(src_fd, &st) < 0)
		return sbx_err_errno(err, "cannot read the tree to copy");
	w.buf = xmalloc(XATTR_VALUE_MAX_);
	pool_start(&w, &pool);
	r = copy_dir(&w, src_fd, dst_fd, 0);
	/* a failure of the walk's own is the one told; the first of the threads' otherwise */
	struct sbx_err walk_err = *err;
	if (pool_finish(&w, &pool) < 0)
		r = -1;
	if (walk_err.msg[0])
		*err = walk_err;
	if (r == 0)
		r = copy_meta(&w, src_fd, dst_fd, &st);
	for (size_t i = 0; i < w.n_seen; i++)
		free(w.seen[i].path);
	free(w.seen);
	free(w.buf);
	return r;
}

/* --- an overlay's upper directory applied onto a copy of what lay under it ----------------- */

static bool whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == 0;
}

/* an upper directory that hides everything under it (overlay marks it so, with userxattr as
 * user.overlay.opaque, as root as trusted.overlay.opaque) */
static bool opaque(int fd)
{
	char v[4];
	ssize_t n = fgetxattr(fd, "user.overlay.opaque", v, sizeof(v));
	if (n < 0)
		n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
	return n == 1 && v[0] == 'y';
}

struct merge {
	struct walk *w;
	bool whiteouts;
	const int *below; /* the layers under the lower tree (an image's) */
	size_t n_below;
};

/* some layer under the lower tree has an entry at path (relative to the top; no link in it
 * followed): a whiteout there still hides something */
static bool below_has(const struct merge *m, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };

	for (size_t i = 0; i < m->n_below; i++) {
		int fd = (int)syscall(SYS_openat2, m->below[i], path, &how, sizeof(how));
		if (fd >= 0) {
			close(fd);
			return true;
		}
	}
	return false;
}

static int merge_dir(struct merge *m, int ufd, int dfd, int depth);

static int merge_entry(struct merge *m, int ufd, int dfd, const char *name, int depth)
{
	struct walk *w = m->w;
	struct stat us, ds;
	bool there = fstatat(dfd, name, &ds, AT_SYMLINK_NOFOLLOW) == 0;

	if (fstatat(ufd, name, &us, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(w, "read");
	if (S_ISDIR(us.st_mode) && there && S_ISDIR(ds.st_mode)) {
		_cleanup_close_ int u = openat(ufd, name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (u < 0)
			return fail(w, "open");
		if (!opaque(u)) {
			/* both: what the upper holds goes over what lay under, and the upper's
			 * owner, mode and times are the directory's */
			_cleanup_close_ int d = openat(
				dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (d < 0)
				return fail(w, "open");
			if (depth >= MAX_DEPTH) {
				errno = ELOOP;
				return fail(w, "copy (too deep)");
			}
			if (merge_dir(m, u, d, depth + 1) < 0)
				return -1;
			return copy_meta(w, u, d, &us);
		}
	}
	/* anything else replaces what lay under (an opaque directory, all of it) */
	if (there && sbx_rm_rf_at(dfd, name) < 0)
		return fail(w, "replace");
	/* a whiteout hides what lies under the tree only where there is more under it (an
	 * image's layers): where the lower tree had nothing (or a whiteout) the overlay made it
	 * for those; where it had a file of its own, only if one of those has one too (in a
	 * directory no layer under has, the overlay would list it) */
	if (whiteout(&us) && (!m->whiteouts || (there && !whiteout(&ds) && !below_has(m, w->path))))
		return 0;
	return copy_entry(w, ufd, dfd, name, depth);
}

static int merge_one(void *arg, int ufd, int dfd, const char *name, int depth)
{
	return merge_entry(arg, ufd, dfd, name, depth);
}

static int merge_dir(struct merge *m, int ufd, int dfd, int depth)
{
	return each_entry(m->w, ufd, dfd, depth, merge_one, m);
}

int sbx_tree_merge(int upper_fd, int dst_fd, bool own, bool whiteouts, const int *below,
		   size_t n_below, struct sbx_treecopy_stats *stats, struct sbx_err *err)
{
	struct sbx_treecopy_stats ignored = { 0 };
	struct walk w = {
		.own = own, .dst_top = dst_fd, .st = stats ? stats : &ignored, .err = err
	};
	struct merge m = { .w = &w, .whiteouts = whiteouts, .below = below, .n_below = n_below };
	struct stat st;
	int r;

	if (fstat(upper_fd, &st) < 0)
		return sbx_err_errno(err, "cannot read the tree to copy");
	w.buf = xmalloc(XATTR_VALUE_MAX_);
	r = merge_dir(&m, upper_fd, dst_fd, 0);
	if (r == 0)
		r = copy_meta(&w, upper_fd, dst_fd, &st);
	for (size_t i = 0; i < w.n_seen; i++)
		free(w.seen[i].path);
	free(w.seen);
	free(w.buf);
	return r;
}

static int ino_cmp(const void *a, const void *b)
{
	const struct stat *x = a, *y = b;
	return x->st_ino < y->st_ino ? -1 : x->st_ino > y->st_ino;
}

static int count_dir(int fd, struct sbx_treecopy_stats *st, struct stat **seen, size_t *n_seen,
		     size_t *cap, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int r = 0;

	if (!d) {
		close(fd);
		return -1;
	}
	errno = 0;
	while (r == 0 && (de = readdir(d))) {
		struct stat s;
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -1;
			break;
		}
		if (S_ISDIR(s.st_mode)) {
			st->dirs++;
			if (depth >= MAX_DEPTH) {
				errno = ELOOP;
				r = -1;
				break;
			}
			int c = openat(dirfd(d), de->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = c < 0 ? -1 : count_dir(c, st, seen, n_seen, cap, depth + 1);
		} else if (s.st_nlink > 1 && lfind(&s, *seen, n_seen, sizeof(s), ino_cmp) != NULL) {
			st->links++;
		} else {
			st->files++;
			if (S_ISREG(s.st_mode))
				st->size += (unsigned long long)s.st_size;
			if (s.st_nlink > 1) {
				if (*n_seen == *cap) {
					*cap = *cap ? 2 * *cap : 64;
					*seen = xrealloc(*seen, *cap * sizeof(**seen));
				}
				(*seen)[(*n_seen)++] = s;
			}
		}
		errno = 0;
	}
	if (r == 0 && errno)
		r = -1;
	int e = errno;
	closedir(d);
	errno = e;
	return r;
}

int sbx_tree_count(int fd, struct sbx_treecopy_stats *stats, struct sbx_err *err)
{
	struct stat *seen = NULL;
	size_t n_seen = 0, cap = 0;
	int c = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = c < 0 ? -1 : count_dir(c, stats, &seen, &n_seen, &cap, 0);

	free(seen);
	return r < 0 ? sbx_err_errno(err, "cannot read the snapshot's files") : 0;
}
