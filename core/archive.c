/* libarchive through core/lazy.c, and the tar streams of sbx cp: packing and safe unpacking. */
#define _GNU_SOURCE
#include "core/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "core/lazy.h"
#include "core/log.h"
#include "core/strbuf.h"

/* every libarchive function sbx calls: resolved by name, never linked (DESIGN.md §2) */
/* clang-format off */
#define AR_FNS(X)                                                                                   \
	X(read_new) X(read_support_format_tar) X(read_open_fd) X(read_next_header)                  \
	X(read_next_header2) X(read_data_block) X(read_free)                                        \
	X(read_disk_new) X(read_disk_set_behavior) X(read_disk_set_symlink_physical)                \
	X(read_disk_set_symlink_hybrid) X(read_disk_open) X(read_disk_descend)                      \
	X(write_new) X(write_set_format_pax_restricted) X(write_set_bytes_in_last_block)            \
	X(write_open_fd) X(write_header) X(write_data) X(write_finish_entry) X(write_close)         \
	X(write_free) X(write_fail) X(write_disk_new) X(write_disk_set_options) X(write_data_block) \
	X(error_string) X(format)                                                                   \
	X(entry_new) X(entry_free) X(entry_pathname) X(entry_copy_pathname) X(entry_hardlink)       \
	X(entry_copy_hardlink) X(entry_filetype) X(entry_perm) X(entry_set_perm)                    \
	X(entry_size) X(entry_linkresolver_new) X(entry_linkresolver_set_strategy)                  \
	X(entry_linkify) X(entry_linkresolver_free)                                                 \
	X(entry_uid) X(entry_gid) X(entry_set_uid) X(entry_set_gid)                                 \
	X(read_support_filter_gzip) X(read_support_filter_bzip2) X(read_support_filter_xz)          \
	X(read_support_filter_lzma) X(read_support_filter_lzip) X(read_support_filter_zstd)         \
	X(read_support_filter_lz4) X(read_support_filter_compress)
/* clang-format on */

static const char *const ar_names[] = {
#define X(f) "archive_" #f,
	AR_FNS(X)
#undef X
};

static union {
	struct {
#define X(f) __typeof__(archive_##f) *f;
		AR_FNS(X)
#undef X
	} f;
	void *v[ARRAY_SIZE(ar_names)];
} ar_tab;
#define ar ar_tab.f

_Static_assert(sizeof(ar_tab.f) == sizeof(ar_tab.v), "one slot per libarchive function");

/* archive_errno, apart: a field named errno would meet errno's macro */
static int (*ar_errno)(struct archive *);

/* the decompressors libarchive has built in. Without its library, libarchive would run an
 * external program for a filter (lrzip, lzop, grzip, and zstd or lz4 on some builds), found
 * through PATH: inside a sandbox, the sandbox's. Each filter is tried once on a scratch
 * handle, and only those that answer ARCHIVE_OK (built in) are ever enabled. */
static int (*builtin_filter[8])(struct archive *);
static size_t n_builtin_filter;

static void probe_filters(void)
{
	int (*const cand[])(struct archive *) = {
		ar.read_support_filter_gzip, ar.read_support_filter_bzip2,
		ar.read_support_filter_xz,   ar.read_support_filter_lzma,
		ar.read_support_filter_lzip, ar.read_support_filter_zstd,
		ar.read_support_filter_lz4,  ar.read_support_filter_compress,
	};
	_Static_assert(ARRAY_SIZE(cand) == ARRAY_SIZE(builtin_filter), "one slot per filter");

	n_builtin_filter = 0;
	for (size_t i = 0; i < ARRAY_SIZE(cand); i++) {
		struct archive *t = ar.read_new();
		if (!t)
			continue;
		if (cand[i](t) == ARCHIVE_OK)
			builtin_filter[n_builtin_filter++] = cand[i];
		else
			sbx_debug("archive: filter %zu needs an external program: not enabled", i);
		ar.read_free(t);
	}
}

/* a compressed stream is fine too, with a decompressor built into libarchive */
static void support_filters(struct archive *rd)
{
	for (size_t i = 0; i < n_builtin_filter; i++)
		(void)builtin_filter[i](rd);
}

/* a storage error (a full disk, an I/O error, a quota) is never a warning to go past */
static bool storage_errno(int e)
{
	return e == ENOSPC || e == EIO || e == EDQUOT || e == EFBIG || e == EROFS;
}

int sbx_archive_load(struct sbx_err *err)
{
	static const char *const errno_name[] = { "archive_errno" };
	static bool loaded;
	void *fn;

	if (loaded)
		return 0;
	if (sbx_lazy_load(&sbx_lazy_archive, ar_names, ar_tab.v, ARRAY_SIZE(ar_names), err) < 0 ||
	    sbx_lazy_load(&sbx_lazy_archive, errno_name, &fn, 1, err) < 0)
		return -1;
	ar_errno = (int (*)(struct archive *))fn;
	probe_filters();
	loaded = true;
	return 0;
}

static const char *ar_msg(struct archive *a)
{
	const char *s = ar.error_string(a);
	return s ? s : "unknown error";
}

/* libarchive's message, with the system's reason when it has one it did not say */
static int disk_failed(struct archive *w, struct sbx_err *err, const char *what, const char *name)
{
	int e = ar_errno(w);
	const char *m = ar_msg(w);

	if (e > 0 && !strstr(m, strerror(e)))
		sbx_err_set(err, SBX_E_SYSTEM, "cannot %s '%s': %s: %s", what, name, m,
			    strerror(e));
	else
		sbx_err_set(err, SBX_E_SYSTEM, "cannot %s '%s': %s", what, name, m);
	err->errnum = e > 0 ? e : 0;
	return -1;
}

/* a failed write of the tar stream; errnum says EPIPE when the reader went away */
static int write_failed(struct archive *w, struct sbx_err *err)
{
	int e = ar_errno(w);
	const char *m = ar_msg(w);

	if (e > 0 && !strstr(m, strerror(e)))
		sbx_err_set(err, SBX_E_SYSTEM, "cannot write the tar stream: %s: %s", m,
			    strerror(e));
	else
		sbx_err_set(err, SBX_E_SYSTEM, "cannot write the tar stream: %s", m);
	err->errnum = e;
	return -1;
}

/* --- sources -------------------------------------------------------------------------------- */

void sbx_cp_src_parse(const char *src, struct sbx_cp_src *ret)
{
	char *p = xstrdup(src);
	size_t n = strlen(p);
	bool contents = false, want_dir = false;

	for (;;) {
		while (n > 1 && p[n - 1] == '/') {
			p[--n] = 0;
			want_dir = true;
		}
		if (n >= 2 && p[n - 1] == '.' && p[n - 2] == '/') {
			p[--n] = 0; /* "a/." -> "a/", whose '/' goes next round */
			contents = want_dir = true;
			continue;
		}
		break;
	}
	const char *slash = strrchr(p, '/');
	const char *base = slash && slash[1] ? slash + 1 : p;
	if (streq(p, ".") || streq(p, "/") || streq(base, ".."))
		contents = want_dir = true;
	ret->path = p;
	ret->top = xstrdup(contents ? "." : base);
	ret->want_dir = want_dir;
}

void sbx_cp_src_release(struct sbx_cp_src *s)
{
	free(s->path);
	free(s->top);
	s->path = s->top = NULL;
}

/* --- packing -------------------------------------------------------------------------------- */

static char zeros[65536];

static int write_zeros(struct archive *w, int64_t n)
{
	while (n > 0) {
		size_t k = n > (int64_t)sizeof(zeros) ? sizeof(zeros) : (size_t)n;
		la_ssize_t r = ar.write_data(w, zeros, k);
		if (r < 0)
			return -1;
		if (r == 0)
			return 0; /* the entry is full (the file shrank or grew while read) */
		n -= r;
	}
	return 0;
}

/* "PATH/x" -> "TOP/x" */
static char *rebase(const char *name, const char *path, const char *top)
{
	size_t pl = strlen(path);

	if (streq(path, "/")) {
		if (streq(name, "/"))
			return xstrdup(top);
		return name[0] == '/' ? xasprintf("%s/%s", top, name + 1) : NULL;
	}
	if (strncmp(name, path, pl) != 0)
		return NULL;
	if (name[pl] == 0)
		return xstrdup(top);
	return name[pl] == '/' ? xasprintf("%s%s", top, name + pl) : NULL;
}

/* a regular file's data, holes written as zeros that the pax writer turns back into holes */
static int pack_data(struct archive *rd, struct archive *w, struct archive_entry *e,
		     const char *name, struct sbx_err *err)
{
	const void *buf;
	size_t n;
	la_int64_t off;
	int64_t done = 0;
	int r;

	while ((r = ar.read_data_block(rd, &buf, &n, &off)) == ARCHIVE_OK) {
		if (off > done && write_zeros(w, off - done) < 0)
			return write_failed(w, err);
		if (n && ar.write_data(w, buf, n) < 0)
			return write_failed(w, err);
		done = off + (int64_t)n;
	}
	if (r != ARCHIVE_EOF)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot read '%s': %s", name, ar_msg(rd));
	if (done < ar.entry_size(e) && write_zeros(w, ar.entry_size(e) - done) < 0)
		return write_failed(w, err);
	return 0;
}

/* one entry read from disk: renamed onto top, hard-linked to an earlier one, written with its
 * data */
static int pack_entry(struct archive *rd, struct archive *w, struct archive_entry_linkresolver *lr,
		      struct archive_entry *e, const struct sbx_cp_src *src, struct sbx_err *err)
{
	_cleanup_free_ char *source = xstrdup(ar.entry_pathname(e));
	_cleanup_free_ char *name = rebase(source, src->path, src->top);
	struct archive_entry *linked = e, *spare = NULL;

	if (!name)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot read '%s': unexpected name '%s'",
				   src->path, source);
	ar.entry_copy_pathname(e, name);
	if (ar.entry_filetype(e) == AE_IFDIR)
		(void)ar.read_disk_descend(rd);
	ar.entry_linkify(lr, &linked, &spare);
	if (linked != e || spare) /* the tar strategy never defers an entry */
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot pack '%s': unexpected hard link "
				   "handling",
				   source);
	if (ar.write_header(w, e) < ARCHIVE_WARN)
		return write_failed(w, err);
	if (ar.entry_filetype(e) == AE_IFREG && ar.entry_size(e) > 0)
		return pack_data(rd, w, e, source, err);
	return 0;
}

int sbx_archive_pack(int fd, const struct sbx_cp_src *src, bool follow, struct sbx_err *err)
{
	struct archive *rd = NULL, *w = NULL;
	struct archive_entry_linkresolver *lr = NULL;
	struct archive_entry *e = NULL;
	struct stat st;
	int ret = -1;

	if (sbx_archive_load(err) < 0)
		return -1;
	/* "DIR/" and "DIR/." name the directory a link points at, as a path resolution would */
	follow = follow || src->want_dir;
	if ((follow ? stat(src->path, &st) : lstat(src->path, &st)) < 0) {
		if (errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND, "'%s' does not exist", src->path);
		return sbx_err_errno(err, "cannot read '%s'", src->path);
	}
	if (src->want_dir && !S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is not a directory", src->path);

	rd = ar.read_disk_new();
	w = ar.write_new();
	lr = ar.entry_linkresolver_new();
	if (!rd || !w || !lr) {
		sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
		goto out;
	}
	ar.read_disk_set_behavior(rd,
				  ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
					  ARCHIVE_READDISK_NO_FFLAGS);
	if (follow)
		ar.read_disk_set_symlink_hybrid(rd);
	else
		ar.read_disk_set_symlink_physical(rd);
	if (ar.write_set_format_pax_restricted(w) != ARCHIVE_OK ||
	    ar.write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    ar.write_open_fd(w, fd) != ARCHIVE_OK) {
		write_failed(w, err);
		goto out;
	}
	ar.entry_linkresolver_set_strategy(lr, ar.format(w));
	if (ar.read_disk_open(rd, src->path) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot read '%s': %s", src->path, ar_msg(rd));
		goto out;
	}
	for (;;) {
		e = ar.entry_new();
		int r = ar.read_next_header2(rd, e);
		if (r == ARCHIVE_EOF)
			break;
		const char *path = ar.entry_pathname(e);
		if (r < ARCHIVE_WARN || !path) {
			sbx_err_set(err, SBX_E_SYSTEM, "cannot read '%s': %s",
				    path ? path : src->path, ar_msg(rd));
			goto out;
		}
		if (r == ARCHIVE_WARN)
			sbx_debug("cp: %s: %s", path ? path : src->path, ar_msg(rd));
		if (pack_entry(rd, w, lr, e, src, err) < 0)
			goto out;
		ar.entry_free(e);
		e = NULL;
	}
	if (ar.write_close(w) != ARCHIVE_OK) {
		write_failed(w, err);
		goto out;
	}
	ret = 0;
out:
	if (e)
		ar.entry_free(e);
	if (lr)
		ar.entry_linkresolver_free(lr);
	/* a failed pack must not end as a well-formed tar (a file padded with zeros): free it
	 * without writing the rest */
	if (w && ret < 0)
		ar.write_fail(w);
	if (w)
		ar.write_free(w);
	if (rd)
		ar.read_free(rd);
	return ret;
}

/* --- unpacking ------------------------------------------------------------------------------ */

/* the names written so far (hard links may point at these only): open addressing */
struct name_set {
	char **slot;
	size_t cap, n;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static char **name_find(struct name_set *ns, const char *s)
{
	size_t i = name_hash(s) & (ns->cap - 1);
	while (ns->slot[i] && !streq(ns->slot[i], s))
		i = (i + 1) & (ns->cap - 1);
	return &ns->slot[i];
}

static bool name_has(struct name_set *ns, const char *s)
{
	return ns->cap && *name_find(ns, s);
}

static void name_add(struct name_set *ns, const char *s)
{
	if (2 * (ns->n + 1) > ns->cap) {
		struct name_set big = { xcalloc(ns->cap ? 2 * ns->cap : 64, sizeof(char *)),
					ns->cap ? 2 * ns->cap : 64, ns->n };
		for (size_t i = 0; i < ns->cap; i++)
			if (ns->slot[i])
				*name_find(&big, ns->slot[i]) = ns->slot[i];
		free(ns->slot);
		*ns = big;
	}
	char **p = name_find(ns, s);
	if (!*p) {
		*p = xstrdup(s);
		ns->n++;
	}
}

static void name_set_release(struct name_set *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		free(ns->slot[i]);
	free(ns->slot);
}

/* why a name may not be written, or NULL */
static const char *bad_name(const char *name)
{
	if (!*name)
		return "it has an empty name";
	if (name[0] == '/')
		return "it is an absolute path";
	for (const char *p = name; *p;) {
		const char *e = strchrnul(p, '/');
		if (e - p == 2 && p[0] == '.' && p[1] == '.')
			return "its path leaves the destination ('..')";
		p = *e ? e + 1 : e;
	}
	return NULL;
}

/* "TOP/x" -> "TO/x"; NULL when the name is not under top */
static char *map_name(const char *name, const char *top, const char *to)
{
	size_t tl = strlen(top);

	if (strncmp(name, top, tl) != 0 || (name[tl] && name[tl] != '/'))
		return NULL;
	return xasprintf("%s%s", to, name + tl);
}

/* the destination itself ("", ".", "./", "././") */
static bool is_dot(const char *name)
{
	for (; *name; name++)
		if (*name != '.' && *name != '/')
			return false;
		else if (name[0] == '.' && name[1] == '.')
			return false;
	return true;
}

/* "a/b" -> "a", "b"; "b" -> ".", "b"; "/b" -> "/", "b" */
static void split_path(const char *p, char **ret_dir, char **ret_base)
{
	const char *s = strrchr(p, '/');

	if (!s) {
		*ret_dir = xstrdup(".");
		*ret_base = xstrdup(p);
	} else {
		*ret_dir = s == p ? xstrdup("/") : xstrndup(p, (size_t)(s - p));
		*ret_base = xstrdup(s + 1);
	}
}

/* docker cp's naming: which directory the entries land in, and the name top becomes there */
static int place(const char *dest, const char *top, bool src_dir, char **ret_dir, char **ret_to,
		 struct sbx_err *err)
{
	_cleanup_free_ char *d = xstrdup(dest);
	size_t n = strlen(d);
	bool slash = false;
	struct stat st;

	while (n > 1 && d[n - 1] == '/') {
		d[--n] = 0;
		slash = true;
	}
	if (stat(d, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			*ret_dir = TAKE_PTR(d);
			*ret_to = xstrdup(top);
			return 0;
		}
		if (src_dir)
			return sbx_err_set(err, SBX_E_USAGE,
					   "cannot copy a directory onto file '%s'", d);
		if (slash)
			return sbx_err_set(err, SBX_E_USAGE, "'%s' is not a directory", d);
		split_path(d, ret_dir, ret_to);
		return 0;
	}
	if (errno != ENOENT)
		return sbx_err_errno(err, "cannot use '%s'", d);
	if (slash && !src_dir)
		return sbx_err_set(err, SBX_E_NOTFOUND, "directory '%s' does not exist", d);
	_cleanup_free_ char *dir = NULL, *base = NULL;
	split_path(d, &dir, &base);
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND, "directory '%s' does not exist",
					   dir);
		return sbx_err_errno(err, "cannot use '%s'", dir);
	}
	if (!S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is not a directory", dir);
	*ret_dir = TAKE_PTR(dir);
	*ret_to = TAKE_PTR(base);
	return 0;
}

static int extract_entry(struct archive *rd, struct archive *w, struct archive_entry *e,
			 const char *top, const char *to, struct name_set *seen,
			 struct sbx_err *err)
{
	const char *orig = ar.entry_pathname(e);
	_cleanup_free_ char *name = NULL, *link = NULL;
	const char *why;

	if (!orig)
		return sbx_err_set(err, SBX_E_USAGE, "refusing a tar entry without a name");
	name = top ? map_name(orig, top, to) : xstrdup(orig);
	if (!name)
		return sbx_err_set(err, SBX_E_USAGE,
				   "refusing tar entry '%s': it is not under '%s'", orig, top);
	if ((why = bad_name(name)))
		return sbx_err_set(err, SBX_E_USAGE, "refusing tar entry '%s': %s", orig, why);
	const char *hl = ar.entry_hardlink(e);
	/* a hard link's own type says little (tar readers leave it 0 or regular) */
	unsigned type = hl ? AE_IFREG : ar.entry_filetype(e);
	if (type == AE_IFCHR || type == AE_IFBLK)
		return sbx_err_set(err, SBX_E_USAGE,
				   "refusing tar entry '%s': device nodes are never created", orig);
	if (type == AE_IFSOCK)
		return 0;
	if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
		return sbx_err_set(err, SBX_E_USAGE, "refusing tar entry '%s': unknown file type",
				   orig);
	if (hl) {
		link = top ? map_name(hl, top, to) : xstrdup(hl);
		if (!link || bad_name(link) || !name_has(seen, link))
			return sbx_err_set(err, SBX_E_USAGE,
					   "refusing tar entry '%s': a hard link to '%s', which is "
					   "not an earlier file of this copy",
					   orig, hl);
		ar.entry_copy_hardlink(e, link);
	}
	/* the destination directory itself: its metadata is not ours to change */
	if (is_dot(name) && type == AE_IFDIR)
		return 0;
	if (type != AE_IFDIR)
		ar.entry_set_perm(e, ar.entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
	ar.entry_copy_pathname(e, name);
	int r = ar.write_header(w, e);
	if (r < ARCHIVE_WARN || (r == ARCHIVE_WARN && storage_errno(ar_errno(w))))
		return disk_failed(w, err, "extract", orig);
	if (r == ARCHIVE_WARN)
		sbx_debug("cp: %s: %s", name, ar_msg(w));
	bool data = type == AE_IFREG || hl;
	if (ar.entry_size(e) > 0 && data) {
		const void *buf;
		size_t n;
		la_int64_t off;
		while ((r = ar.read_data_block(rd, &buf, &n, &off)) == ARCHIVE_OK)
			/* libarchive reports a failed or short write as a warning: any is fatal */
			if (ar.write_data_block(w, buf, n, off) != ARCHIVE_OK) {
				disk_failed(w, err, "write", name);
				(void)unlink(name); /* no half-written file stays */
				return -1;
			}
		if (r != ARCHIVE_EOF) {
			sbx_err_set(err, SBX_E_SYSTEM, "cannot read the tar stream: %s",
				    ar_msg(rd));
			(void)unlink(name);
			return -1;
		}
	}
	r = ar.write_finish_entry(w);
	if (r < ARCHIVE_WARN || (r == ARCHIVE_WARN && storage_errno(ar_errno(w)))) {
		disk_failed(w, err, "write", name);
		if (data)
			(void)unlink(name);
		return -1;
	}
	if (r == ARCHIVE_WARN)
		sbx_debug("cp: %s: %s", name, ar_msg(w));
	if (type != AE_IFDIR)
		name_add(seen, name);
	return 0;
}

int sbx_archive_extract(int fd, const char *dest, const char *top, unsigned flags,
			struct sbx_err *err)
{
	struct archive *rd = NULL, *w = NULL;
	struct archive_entry *e;
	struct name_set seen = { 0 };
	char *dir = NULL, *to = NULL;
	int r, ret = -1;

	if (sbx_archive_load(err) < 0)
		return -1;
	if (!top) {
		struct stat st;
		if (stat(dest, &st) < 0 && errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND,
					   "directory '%s' does not exist "
					   "(a tar stream is unpacked into an existing directory)",
					   dest);
		if (stat(dest, &st) < 0)
			return sbx_err_errno(err, "cannot use '%s'", dest);
		if (!S_ISDIR(st.st_mode))
			return sbx_err_set(err, SBX_E_USAGE,
					   "'%s' is not a directory (a tar stream is "
					   "unpacked into an existing directory)",
					   dest);
	}
	rd = ar.read_new();
	w = ar.write_disk_new();
	if (!rd || !w) {
		sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
		goto out;
	}
	support_filters(rd);
	ar.read_support_format_tar(rd);
	ar.write_disk_set_options(
		w,
		ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
			ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
			ARCHIVE_EXTRACT_SPARSE |
			(flags & SBX_EXTRACT_OWNER ? ARCHIVE_EXTRACT_OWNER : 0));
	if (ar.read_open_fd(rd, fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot read the tar stream: %s", ar_msg(rd));
		goto out;
	}
	r = ar.read_next_header(rd, &e);
	if (r == ARCHIVE_EOF && !top) {
		ret = 0; /* an empty tar: nothing to do */
		goto out;
	}
	if (r == ARCHIVE_EOF) {
		sbx_err_set(err, SBX_E_SYSTEM, "the tar stream is empty");
		goto out;
	}
	if (r < ARCHIVE_WARN) {
		sbx_err_set(err, SBX_E_USAGE, "cannot read the tar stream: %s", ar_msg(rd));
		goto out;
	}
	if (top) {
		/* the first entry is the source itself: a directory or not decides the naming */
		const char *first = ar.entry_pathname(e);
		size_t tl = strlen(top);
		if (!first || strncmp(first, top, tl) != 0 ||
		    (first[tl] && !streq(first + tl, "/"))) {
			sbx_err_set(err, SBX_E_SYSTEM,
				    "unexpected first tar entry '%s' (wanted '%s')",
				    first ? first : "", top);
			goto out;
		}
		if (place(dest, top, ar.entry_filetype(e) == AE_IFDIR, &dir, &to, err) < 0)
			goto out;
	}
	if (chdir(dir ? dir : dest) < 0) {
		sbx_err_errno(err, "cannot enter '%s'", dir ? dir : dest);
		goto out;
	}
	for (;;) {
		if (extract_entry(rd, w, e, top, to, &seen, err) < 0)
			goto out;
		r = ar.read_next_header(rd, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			sbx_err_set(err, SBX_E_USAGE, "cannot read the tar stream: %s", ar_msg(rd));
			goto out;
		}
	}
	if (ar.write_close(w) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot finish the copy: %s", ar_msg(w));
		goto out;
	}
	ret = 0;
out:
	if (w)
		ar.write_free(w);
	if (rd)
		ar.read_free(rd);
	name_set_release(&seen);
	free(dir);
	free(to);
	return ret;
}

/* --- image layers ---------------------------------------------------------------------------- */

/* "./a//b/" -> "a/b"; NULL for the layer's root itself */
static char *layer_name(const char *raw)
{
	_cleanup_free_ char *t = xstrdup(raw);
	struct strbuf out = STRBUF_INIT;
	char *save = NULL;

	for (char *c = strtok_r(t, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (streq(c, "."))
			continue;
		if (out.len)
			strbuf_addch(&out, '/');
		strbuf_addstr(&out, c);
	}
	if (!out.len) {
		strbuf_release(&out);
		return NULL;
	}
	return strbuf_detach(&out);
}

static int layer_refuse(struct sbx_err *err, const char *raw, const char *why)
{
	return sbx_err_set(err, SBX_E_USAGE, "refusing layer entry '%s': %s", raw, why);
}

/* what the layers below see at P (topmost first): 1 and *st, *ret_path when one has it, 0 when
 * none does or a whiteout or an opaque directory hides it */
static int lower_lookup(char *const *lowers, size_t n, const char *p, struct stat *st,
			char **ret_path)
{
	for (size_t i = 0; i < n; i++) {
		char *q = xasprintf("%s/%s", lowers[i], p);
		if (lstat(q, st) == 0) {
			if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0)) {
				free(q);
				return 0; /* a whiteout */
			}
			*ret_path = q;
			return 1;
		}
		int e = errno;
		free(q);
		if (e == ENOTDIR)
			return 0; /* a file or whiteout of this layer covers a parent */
		/* an opaque parent in this layer hides the layers below it */
		_cleanup_free_ char *a = xstrdup(p);
		for (char *s = strrchr(a, '/'); s; s = strrchr(a, '/')) {
			*s = 0;
			_cleanup_free_ char *d = xasprintf("%s/%s", lowers[i], a);
			char v[2];
			if (getxattr(d, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y')
				return 0;
		}
	}
	return 0;
}

/* an implied directory's mode and times, set once the layer is written (its entries change the
 * times; a mode without the owner's write bit would stop them being written) */
struct implied {
	char *path;
	mode_t mode;
	struct timespec times[2];
};

/* the parent directories of name a layer does not list itself: as the layers below have them
 * (mode, owner, times), or 0755 and root's when none has; a lower layer's symbolic link on the
 * way is refused (a layer built by diffing a filesystem never names a path through one) */
static int layer_parents(const char *name, long shift, char *const *lowers, size_t n_lowers,
			 struct implied **imp, size_t *n_imp, struct sbx_err *err)
{
	_cleanup_free_ char *p = xstrdup(name);

	for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		struct stat st;
		if (lstat(p, &st) < 0) {
			struct stat ls;
			_cleanup_free_ char *lp = NULL;
			int found = lower_lookup(lowers, n_lowers, p, &ls, &lp);
			if (found && S_ISLNK(ls.st_mode))
				return sbx_err_set(err, SBX_E_USAGE,
						   "refusing layer entry '%s': "
						   "'%s' is a symbolic link in a layer below, and "
						   "a layer never writes through one",
						   name, p);
			found = found && S_ISDIR(ls.st_mode);
			if (mkdir(p, found ? (ls.st_mode & 0777) | 0700 : 0755) < 0)
				return sbx_err_errno(err, "cannot create '%s'", p);
			if (shift >= 0 &&
			    lchown(p, found ? ls.st_uid : (uid_t)shift,
				   found ? ls.st_gid : (gid_t)shift) < 0)
				return sbx_err_errno(err, "cannot hand '%s' to the sandbox", p);
			if (found) {
				*imp = xrealloc(*imp, (*n_imp + 1) * sizeof(**imp));
				(*imp)[*n_imp] = (struct implied){
					.path = xstrdup(p),
					.mode = ls.st_mode & 07777,
					.times = { ls.st_atim, ls.st_mtim },
				};
				(*n_imp)++;
			}
		} else if (!S_ISDIR(st.st_mode)) {
			return sbx_err_set(err, SBX_E_USAGE,
					   "refusing layer entry '%s': '%s' is not "
					   "a directory (a symbolic link is never followed)",
					   name, p);
		}
		*s = '/';
	}
	return 0;
}

int sbx_archive_unpack_layer(int fd, const char *dest, long shift, char *const *lowers,
			     size_t n_lowers, struct sbx_err *err)
{
	struct archive *rd = NULL, *w = NULL;
	struct archive_entry *e;
	struct name_set seen = { 0 };
	struct implied *imp = NULL;
	size_t n_imp = 0;
	int r, ret = -1;

	if (sbx_archive_load(err) < 0)
		return -1;
	rd = ar.read_new();
	w = ar.write_disk_new();
	if (!rd || !w) {
		sbx_err_set(err, SBX_E_SYSTEM, "out of memory");
		goto out;
	}
	support_filters(rd); /* gzip, zstd, none, ... */
	ar.read_support_format_tar(rd);
	ar.write_disk_set_options(
		w,
		ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
			ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
			ARCHIVE_EXTRACT_UNLINK | (shift >= 0 ? ARCHIVE_EXTRACT_OWNER : 0));
	if (ar.read_open_fd(rd, fd, 1 << 20) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_E_USAGE, "cannot read the layer: %s", ar_msg(rd));
		goto out;
	}
	if (chdir(dest) < 0) {
		sbx_err_errno(err, "cannot enter '%s'", dest);
		goto out;
	}
	while ((r = ar.read_next_header(rd, &e)) != ARCHIVE_EOF) {
		if (r < ARCHIVE_WARN) {
			sbx_err_set(err, SBX_E_USAGE, "cannot read the layer: %s", ar_msg(rd));
			goto out;
		}
		const char *raw = ar.entry_pathname(e);
		if (!raw) {
			layer_refuse(err, "", "it has no name");
			goto out;
		}
		if (raw[0] == '/') {
			layer_refuse(err, raw, "it is an absolute path");
			goto out;
		}
		_cleanup_free_ char *name = layer_name(raw);
		if (!name)
			continue; /* the layer's root: ours */
		const char *why = bad_name(name);
		if (why) {
			layer_refuse(err, raw, why);
			goto out;
		}
		if (layer_parents(name, shift, lowers, n_lowers, &imp, &n_imp, err) < 0)
			goto out;
		const char *base = strrchr(name, '/');
		base = base ? base + 1 : name;
		/* OCI whiteouts become overlay's: an opaque directory, a 0/0 character device */
		if (strncmp(base, ".wh.", 4) == 0) {
			_cleanup_free_ char *dir = xstrndup(name, (size_t)(base - name));
			if (streq(base, ".wh..wh..opq")) {
				const char *d = *dir ? dir : ".";
				if (setxattr(d, "user.overlay.opaque", "y", 1, 0) < 0) {
					sbx_err_errno(err, "cannot mark '%s' opaque", d);
					goto out;
				}
				continue;
			}
			_cleanup_free_ char *target = xasprintf("%s%s", dir, base + 4);
			if ((why = bad_name(target)) || !base[4] || streq(base + 4, ".") ||
			    streq(base + 4, "..")) {
				layer_refuse(err, raw, why ? why : "a whiteout of nothing");
				goto out;
			}
			(void)unlink(target);
			if (mknod(target, S_IFCHR | 0, makedev(0, 0)) < 0) {
				sbx_err_errno(err, "cannot create the whiteout of '%s'", target);
				goto out;
			}
			if (shift >= 0 && lchown(target, (uid_t)shift, (gid_t)shift) < 0) {
				sbx_err_errno(err, "cannot hand '%s' to the sandbox", target);
				goto out;
			}
			continue;
		}
		const char *hl = ar.entry_hardlink(e);
		unsigned type = hl ? AE_IFREG : ar.entry_filetype(e);
		if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
			sbx_debug(
				"layer: skipping device or socket '%s' (/dev is the sandbox's own)",
				name);
			continue;
		}
		if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO) {
			layer_refuse(err, raw, "unknown file type");
			goto out;
		}
		if (hl) {
			_cleanup_free_ char *link = layer_name(hl);
			if (!link || bad_name(link) || !name_has(&seen, link)) {
				sbx_err_set(err, SBX_E_USAGE,
					    "refusing layer entry '%s': a hard link to "
					    "'%s', which is not an earlier file of this layer",
					    raw, hl);
				goto out;
			}
			ar.entry_copy_hardlink(e, link);
		}
		if (shift >= 0) {
			long long uid = ar.entry_uid(e), gid = ar.entry_gid(e);
			if (uid < 0 || uid >= 65536 || gid < 0 || gid >= 65536) {
				layer_refuse(err, raw,
					     "its owner is outside the sandbox's 65536 ids");
				goto out;
			}
			ar.entry_set_uid(e, shift + uid);
			ar.entry_set_gid(e, shift + gid);
		}
		ar.entry_copy_pathname(e, name);
		r = ar.write_header(w, e);
		if (r != ARCHIVE_OK) {
			/* a layer is whole or it is not stored: no warning is let by */
			disk_failed(w, err, "unpack", raw);
			goto out;
		}
		if (ar.entry_size(e) > 0 && type == AE_IFREG) {
			const void *buf;
			size_t n;
			la_int64_t off;
			while ((r = ar.read_data_block(rd, &buf, &n, &off)) == ARCHIVE_OK)
				if (ar.write_data_block(w, buf, n, off) != ARCHIVE_OK) {
					disk_failed(w, err, "unpack", raw);
					goto out;
				}
			if (r != ARCHIVE_EOF) {
				sbx_err_set(err, SBX_E_USAGE, "cannot read the layer: %s",
					    ar_msg(rd));
				goto out;
			}
		}
		if (ar.write_finish_entry(w) != ARCHIVE_OK) {
			disk_failed(w, err, "unpack", raw);
			goto out;
		}
		if (type != AE_IFDIR)
			name_add(&seen, name);
		else /* listed after all: what the layer says of it stands */
			for (size_t i = 0; i < n_imp; i++)
				if (streq(imp[i].path, name)) {
					free(imp[i].path);
					memmove(&imp[i], &imp[i + 1], (--n_imp - i) * sizeof(*imp));
					break;
				}
	}
	if (ar.write_close(w) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot finish the layer: %s", ar_msg(w));
		goto out;
	}
	/* deepest first: setting a directory's times never touches its parent's */
	for (size_t i = n_imp; i-- > 0;)
		if (chmod(imp[i].path, imp[i].mode) < 0 ||
		    utimensat(AT_FDCWD, imp[i].path, imp[i].times, AT_SYMLINK_NOFOLLOW) < 0) {
			sbx_err_errno(err, "cannot set the mode and times of '%s'", imp[i].path);
			goto out;
		}
	ret = 0;
out:
	for (size_t i = 0; i < n_imp; i++)
		free(imp[i].path);
	free(imp);
	name_set_release(&seen);
	if (w)
		ar.write_free(w);
	if (rd)
		ar.read_free(rd);
	return ret;
}
