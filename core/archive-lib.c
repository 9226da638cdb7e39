/* libarchive, dlopen'ed on first use, and what packing and unpacking share: errors, name sets. */
#define _GNU_SOURCE
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
