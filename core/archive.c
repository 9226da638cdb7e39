/* libarchive, dlopen'ed on first use, what the archive files share, and cp's packing of a path. */
#define _GNU_SOURCE
#include "core/archive.h"
#include "core/archive-int.h"

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
#include "core/util.h"

static const char *const ar_names[] = {
#define X(f) "archive_" #f,
	AR_FNS(X)
#undef X
};

struct sbx_ar_fns sbx_ar;
_Static_assert(sizeof(sbx_ar) == ARRAY_SIZE(ar_names) * sizeof(void *),
	       "one slot per libarchive function");

/* archive_errno, apart: a field named errno would meet errno's macro */
int (*sbx_ar_errno)(struct archive *);

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
void ar_support_filters(struct archive *rd)
{
	for (size_t i = 0; i < n_builtin_filter; i++)
		(void)builtin_filter[i](rd);
}

/* a storage error (a full disk, an I/O error, a quota) is never a warning to go past */
bool ar_storage_errno(int e)
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
	if (sbx_lazy_load(&sbx_lazy_archive, ar_names, (void **)&sbx_ar, ARRAY_SIZE(ar_names),
			  err) < 0 ||
	    sbx_lazy_load(&sbx_lazy_archive, errno_name, &fn, 1, err) < 0)
		return -1;
	sbx_ar_errno = (int (*)(struct archive *))fn;
	probe_filters();
	loaded = true;
	return 0;
}

const char *ar_msg(struct archive *a)
{
	const char *s = ar.error_string(a);
	return s ? s : "unknown error";
}

/* libarchive's message, with the system's reason when it has one it did not say */
int ar_disk_failed(struct archive *w, struct sbx_err *err, const char *what, const char *name)
{
	int e = sbx_ar_errno(w);
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
int ar_write_failed(struct archive *w, struct sbx_err *err)
{
	int e = sbx_ar_errno(w);
	const char *m = ar_msg(w);

	if (e > 0 && !strstr(m, strerror(e)))
		sbx_err_set(err, SBX_E_SYSTEM, "cannot write the tar stream: %s: %s", m,
			    strerror(e));
	else
		sbx_err_set(err, SBX_E_SYSTEM, "cannot write the tar stream: %s", m);
	err->errnum = e;
	return -1;
}

/* --- names ---------------------------------------------------------------------------------- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static char **name_find(struct ar_name_set *ns, const char *s)
{
	size_t i = name_hash(s) & (ns->cap - 1);
	while (ns->slot[i] && !streq(ns->slot[i], s))
		i = (i + 1) & (ns->cap - 1);
	return &ns->slot[i];
}

bool ar_name_has(struct ar_name_set *ns, const char *s)
{
	return ns->cap && *name_find(ns, s);
}

void ar_name_add(struct ar_name_set *ns, const char *s)
{
	if (2 * (ns->n + 1) > ns->cap) {
		struct ar_name_set big = { xcalloc(ns->cap ? 2 * ns->cap : 64, sizeof(char *)),
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

void ar_name_set_release(struct ar_name_set *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		free(ns->slot[i]);
	free(ns->slot);
}

/* why a name may not be written, or NULL */
const char *ar_bad_name(const char *name)
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
			return ar_write_failed(w, err);
		if (n && ar.write_data(w, buf, n) < 0)
			return ar_write_failed(w, err);
		done = off + (int64_t)n;
	}
	if (r != ARCHIVE_EOF)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot read '%s': %s", name, ar_msg(rd));
	if (done < ar.entry_size(e) && write_zeros(w, ar.entry_size(e) - done) < 0)
		return ar_write_failed(w, err);
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
		return ar_write_failed(w, err);
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
		ar_write_failed(w, err);
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
		ar_write_failed(w, err);
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
