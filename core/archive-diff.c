/* Image layers made: an overlay upper directory packed as an OCI layer tar; gzip; image save's tar. */
#define _GNU_SOURCE
#include "core/archive-int.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "core/util.h"

#define DIFF_DEPTH_MAX 256
#define OVERFLOW_ID 65534 /* the kernel's overflowuid: an id the layer cannot name */

/* a file with more than one link, by the name it was first written under */
struct diff_link {
	dev_t dev;
	ino_t ino;
	char *name;
};

struct diff_walk {
	struct archive *w;
	const struct sbx_diff_opts *o;
	struct diff_link *links; /* open addressing by (dev, ino); cap_links a power of 2 */
	size_t n_links, cap_links;
	struct sbx_err *err;
};

static unsigned long diff_id(const struct diff_walk *d, unsigned long id)
{
	if (d->o->shift < 0)
		return id;
	unsigned long base = (unsigned long)d->o->shift;
	return id >= base && id < base + 65536 ? id - base : OVERFLOW_ID;
}

static bool listed(const char *const *names, const char *name)
{
	for (; names && *names; names++)
		if (streq(*names, name))
			return true;
	return false;
}

static int entry_write(struct diff_walk *d, struct archive_entry *e)
{
	if (ar.write_header(d->w, e) < ARCHIVE_WARN)
		return ar_write_failed(d->w, d->err);
	return 0;
}

/* an entry of the walk's metadata: its name, owner moved into the layer's ids, no atime/ctime */
static struct archive_entry *entry_of(struct diff_walk *d, const struct stat *st, const char *name)
{
	struct archive_entry *e = ar.entry_new();
	if (!e)
		return NULL;
	ar.entry_copy_stat(e, st);
	ar.entry_set_pathname(e, name);
	ar.entry_set_uid(
		e, (la_int64_t)(d->o->own ? (unsigned long)d->o->uid : diff_id(d, st->st_uid)));
	ar.entry_set_gid(
		e, (la_int64_t)(d->o->own ? (unsigned long)d->o->gid : diff_id(d, st->st_gid)));
	ar.entry_unset_atime(e);
	ar.entry_unset_ctime(e);
	ar.entry_set_ino64(e, 0);
	ar.entry_set_nlink(e, 1);
	return e;
}

/* an OCI whiteout: an empty file named .wh.NAME (or .wh..wh..opq for an opaque directory) */
static int whiteout(struct diff_walk *d, const char *dir, const char *name, const struct stat *st)
{
	struct archive_entry *e = ar.entry_new();
	if (!e)
		return sbx_err_set(d->err, SBX_E_SYSTEM, "out of memory");
	_cleanup_free_ char *p = dir ? xasprintf("%s/.wh.%s", dir, name)
				     : xasprintf(".wh.%s", name);
	ar.entry_set_pathname(e, p);
	ar.entry_set_filetype(e, AE_IFREG);
	ar.entry_set_perm(e, 0600);
	ar.entry_set_size(e, 0);
	ar.entry_set_mtime(e, st->st_mtim.tv_sec, 0);
	int r = entry_write(d, e);
	ar.entry_free(e);
	return r;
}

/* a regular file's content, as many bytes as its header says (zeros when it shrank) */
static int copy_data(struct diff_walk *d, int fd, long long size, const char *name)
{
	char buf[65536];
	long long left = size;

	while (left > 0) {
		ssize_t n = read(fd, buf,
				 left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_errno(d->err, "cannot read '%s'", name);
		if (n == 0) {
			memset(buf, 0, sizeof(buf));
			n = left < (long long)sizeof(buf) ? (ssize_t)left : (ssize_t)sizeof(buf);
		}
		if (ar.write_data(d->w, buf, (size_t)n) < 0)
			return ar_write_failed(d->w, d->err);
		left -= n;
	}
	return 0;
}

static size_t link_slot(const struct diff_link *t, size_t cap, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
	size_t i = (size_t)(h ^ (h >> 29)) & (cap - 1);

	while (t[i].name && !(t[i].dev == dev && t[i].ino == ino))
		i = (i + 1) & (cap - 1);
	return i;
}

/* the name a file of several links was first written under, or NULL (and it is noted) */
static const char *link_seen(struct diff_walk *d, const struct stat *st, const char *name)
{
	if (d->cap_links) {
		size_t i = link_slot(d->links, d->cap_links, st->st_dev, st->st_ino);
		if (d->links[i].name)
			return d->links[i].name;
	}
	if (2 * (d->n_links + 1) > d->cap_links) {
		size_t cap = d->cap_links ? 2 * d->cap_links : 64;
		struct diff_link *t = xcalloc(cap, sizeof(*t));
		for (size_t k = 0; k < d->cap_links; k++)
			if (d->links[k].name)
				t[link_slot(t, cap, d->links[k].dev, d->links[k].ino)] =
					d->links[k];
		free(d->links);
		d->links = t;
		d->cap_links = cap;
	}
	size_t i = link_slot(d->links, d->cap_links, st->st_dev, st->st_ino);
	d->links[i] = (struct diff_link){ st->st_dev, st->st_ino, xstrdup(name) };
	d->n_links++;
	return NULL;
}

static int regular(struct diff_walk *d, int dfd, const char *name, const char *full,
		   const struct stat *st0)
{
	/* never a link followed, never a fifo waited on: the file must be the one looked at */
	_cleanup_close_ int fd = openat(dfd, name,
					O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return sbx_err_errno(d->err, "cannot open '%s'", full);
	if (fstat(fd, &st) < 0)
		return sbx_err_errno(d->err, "cannot stat '%s'", full);
	if (!S_ISREG(st.st_mode) || st.st_ino != st0->st_ino || st.st_dev != st0->st_dev)
		return sbx_err_set(d->err, SBX_E_STATE, "'%s' changed while it was read", full);
	char v[2];
	if (st.st_size == 0 && fgetxattr(fd, "user.overlay.whiteout", v, sizeof(v)) >= 0) {
		/* overlay's other whiteout: an empty file with this xattr */
		_cleanup_free_ char *dir = strrchr(full, '/')
			? xstrndup(full, (size_t)(strrchr(full, '/') - full))
			: NULL;
		return whiteout(d, dir, name, &st);
	}
	const char *first = st.st_nlink > 1 ? link_seen(d, &st, full) : NULL;
	struct archive_entry *e = entry_of(d, &st, full);
	if (!e)
		return sbx_err_set(d->err, SBX_E_SYSTEM, "out of memory");
	if (first) {
		ar.entry_set_hardlink(e, first);
		ar.entry_set_size(e, 0);
	}
	int r = entry_write(d, e);
	ar.entry_free(e);
	if (r == 0 && !first)
		r = copy_data(d, fd, (long long)st.st_size, full);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(struct diff_walk *d, int dfd, const char *rel, int depth);

static int one(struct diff_walk *d, int dfd, const char *rel, const char *name, int depth)
{
	struct stat st;
	_cleanup_free_ char *full = rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_errno(d->err, "cannot stat '%s'", full);
	if (listed(d->o->skip, full))
		return 0;
	if (listed(d->o->skip_empty, full) && S_ISREG(st.st_mode) && st.st_size == 0)
		return 0;
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
		return whiteout(d, rel, name, &st);
	if (S_ISREG(st.st_mode))
		return regular(d, dfd, name, full, &st);
	if (S_ISSOCK(st.st_mode))
		return 0; /* a socket is no file a layer can carry */
	struct archive_entry *e = entry_of(d, &st, full);
	if (!e)
		return sbx_err_set(d->err, SBX_E_SYSTEM, "out of memory");
	int r = 0;
	if (S_ISLNK(st.st_mode)) {
		/* on the heap: the walk recurses, one frame per directory level */
		_cleanup_free_ char *target = xmalloc(PATH_MAX);
		ssize_t n = readlinkat(dfd, name, target, PATH_MAX - 1);
		if (n < 0)
			r = sbx_err_errno(d->err, "cannot read link '%s'", full);
		else {
			target[n] = 0;
			ar.entry_set_symlink(e, target);
		}
	}
	if (S_ISDIR(st.st_mode))
		ar.entry_set_size(e, 0);
	int cfd = -1;
	bool opaque = false;
	if (r == 0 && S_ISDIR(st.st_mode)) {
		cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		char v[2];
		if (cfd < 0)
			r = sbx_err_errno(d->err, "cannot open '%s'", full);
		else
			opaque = fgetxattr(cfd, "user.overlay.opaque", v, sizeof(v)) == 1 &&
				v[0] == 'y';
	}
	if (r == 0 && !(cfd >= 0 && listed(d->o->bare, full)))
		r = entry_write(d, e);
	ar.entry_free(e);
	if (r == 0 && opaque)
		r = whiteout(d, full, ".wh..opq", &st);
	if (r == 0 && cfd >= 0)
		r = walk(d, cfd, full, depth + 1);
	if (cfd >= 0)
		close(cfd);
	return r;
}

/* the entries of the directory dfd, by name; closes nothing of dfd */
static int walk(struct diff_walk *d, int dfd, const char *rel, int depth)
{
	if (depth > DIFF_DEPTH_MAX)
		return sbx_err_set(d->err, SBX_E_USAGE,
				   "directories nest more than %d deep (under '%.60s...'): a "
				   "layer holds no deeper ones",
				   DIFF_DEPTH_MAX, rel ? rel : ".");
	int fd = dup(dfd);
	DIR *dp = fd < 0 ? NULL : fdopendir(fd);
	if (!dp) {
		if (fd >= 0)
			close(fd);
		return sbx_err_errno(d->err, "cannot list '%s'", rel ? rel : ".");
	}
	rewinddir(dp);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			names = xrealloc(names, cap * sizeof(char *));
		}
		names[n++] = xstrdup(de->d_name);
	}
	closedir(dp);
	if (n)
		qsort(names, n, sizeof(char *), cmp_names);
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		if (r == 0)
			r = one(d, dfd, rel, names[i], depth);
		free(names[i]);
	}
	free(names);
	return r;
}

static struct archive *tar_writer(int fd, struct sbx_err *err)
{
	struct archive *w = ar.write_new();
	if (!w) {
		sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
		return NULL;
	}
	if (ar.write_set_format_pax_restricted(w) != ARCHIVE_OK ||
	    ar.write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    ar.write_open_fd(w, fd) != ARCHIVE_OK) {
		ar_write_failed(w, err);
		ar.write_free(w);
		return NULL;
	}
	return w;
}

static int tar_close(struct archive *w, int r, struct sbx_err *err)
{
	if (r == 0 && ar.write_close(w) != ARCHIVE_OK)
		r = ar_write_failed(w, err);
	if (r < 0)
		ar.write_fail(w);
	ar.write_free(w);
	return r;
}

int sbx_archive_diff(int dirfd, int out_fd, const struct sbx_diff_opts *o, struct sbx_err *err)
{
	if (sbx_archive_load(err) < 0)
		return -1;
	struct diff_walk d = { .o = o, .err = err };
	if (!(d.w = tar_writer(out_fd, err)))
		return -1;
	int r = walk(&d, dirfd, NULL, 0);
	for (size_t i = 0; i < d.cap_links; i++)
		free(d.links[i].name);
	free(d.links);
	return tar_close(d.w, r, err);
}

int sbx_archive_gzip(int in_fd, int out_fd, struct sbx_err *err)
{
	struct stat st;

	if (sbx_archive_load(err) < 0)
		return -1;
	if (fstat(in_fd, &st) < 0)
		return sbx_err_errno(err, "cannot stat the layer");
	struct archive *w = ar.write_new();
	if (!w)
		return sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
	/* zlib built into libarchive, never an external gzip program */
	if (ar.write_add_filter_gzip(w) != ARCHIVE_OK) {
		ar.write_free(w);
		return sbx_err_set(err, SBX_E_CONFIG,
				   "libarchive has no built-in gzip (zlib): cannot "
				   "compress a layer");
	}
	struct archive_entry *e = ar.entry_new();
	int r = 0;
	if (!e || ar.write_set_format_raw(w) != ARCHIVE_OK ||
	    ar.write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    ar.write_open_fd(w, out_fd) != ARCHIVE_OK) {
		r = e ? ar_write_failed(w, err) : sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
		goto out;
	}
	ar.entry_set_pathname(e, "layer.tar");
	ar.entry_set_filetype(e, AE_IFREG);
	ar.entry_set_size(e, st.st_size);
	if (ar.write_header(w, e) < ARCHIVE_WARN) {
		r = ar_write_failed(w, err);
		goto out;
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(in_fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = sbx_err_errno(err, "cannot read the layer");
			break;
		}
		if (ar.write_data(w, buf, (size_t)n) < 0) {
			r = ar_write_failed(w, err);
			break;
		}
	}
out:
	if (e)
		ar.entry_free(e);
	return tar_close(w, r, err);
}

int sbx_archive_write_members(int out_fd, const struct sbx_tar_member *m, size_t n,
			      struct sbx_err *err)
{
	if (sbx_archive_load(err) < 0)
		return -1;
	struct archive *w = tar_writer(out_fd, err);
	if (!w)
		return -1;
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		struct archive_entry *e = ar.entry_new();
		long long size = (long long)m[i].len;
		struct stat st;
		if (!e) {
			r = sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
			break;
		}
		if (m[i].fd >= 0) {
			if (fstat(m[i].fd, &st) < 0) {
				ar.entry_free(e);
				r = sbx_err_errno(err, "cannot stat '%s'", m[i].name);
				break;
			}
			size = (long long)st.st_size;
		}
		ar.entry_set_pathname(e, m[i].name);
		ar.entry_set_filetype(e, m[i].dir ? AE_IFDIR : AE_IFREG);
		ar.entry_set_perm(e, m[i].dir ? 0755 : 0644);
		ar.entry_set_size(e, m[i].dir ? 0 : size);
		ar.entry_set_mtime(e, 0, 0);
		if (ar.write_header(w, e) < ARCHIVE_WARN)
			r = ar_write_failed(w, err);
		ar.entry_free(e);
		if (r < 0 || m[i].dir)
			continue;
		if (m[i].fd < 0) {
			if (m[i].len && ar.write_data(w, m[i].data, m[i].len) < 0)
				r = ar_write_failed(w, err);
			continue;
		}
		struct diff_walk d = { .w = w, .err = err };
		r = copy_data(&d, m[i].fd, size, m[i].name);
	}
	return tar_close(w, r, err);
}
