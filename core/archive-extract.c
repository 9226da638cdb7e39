/* cp's tar streams, unpacking: never outside the destination, docker cp's naming. */
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

/* --- unpacking ------------------------------------------------------------------------------ */

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
			 const char *top, const char *to, struct ar_name_set *seen,
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
	if ((why = ar_bad_name(name)))
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
		if (!link || ar_bad_name(link) || !ar_name_has(seen, link))
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
	if (r < ARCHIVE_WARN || (r == ARCHIVE_WARN && ar_storage_errno(sbx_ar_errno(w))))
		return ar_disk_failed(w, err, "extract", orig);
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
				ar_disk_failed(w, err, "write", name);
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
	if (r < ARCHIVE_WARN || (r == ARCHIVE_WARN && ar_storage_errno(sbx_ar_errno(w)))) {
		ar_disk_failed(w, err, "write", name);
		if (data)
			(void)unlink(name);
		return -1;
	}
	if (r == ARCHIVE_WARN)
		sbx_debug("cp: %s: %s", name, ar_msg(w));
	if (type != AE_IFDIR)
		ar_name_add(seen, name);
	return 0;
}

int sbx_archive_extract(int fd, const char *dest, const char *top, unsigned flags,
			struct sbx_err *err)
{
	struct archive *rd = NULL, *w = NULL;
	struct archive_entry *e;
	struct ar_name_set seen = { 0 };
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
	ar_support_filters(rd);
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
	ar_name_set_release(&seen);
	free(dir);
	free(to);
	return ret;
}
