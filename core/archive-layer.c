/* Image layers unpacked: OCI whiteouts to overlay's, owners shifted, what cp refuses refused. */
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
	struct ar_name_set seen = { 0 };
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
	ar_support_filters(rd); /* gzip, zstd, none, ... */
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
		const char *why = ar_bad_name(name);
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
			if ((why = ar_bad_name(target)) || !base[4] || streq(base + 4, ".") ||
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
			if (!link || ar_bad_name(link) || !ar_name_has(&seen, link)) {
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
			ar_disk_failed(w, err, "unpack", raw);
			goto out;
		}
		if (ar.entry_size(e) > 0 && type == AE_IFREG) {
			const void *buf;
			size_t n;
			la_int64_t off;
			while ((r = ar.read_data_block(rd, &buf, &n, &off)) == ARCHIVE_OK)
				if (ar.write_data_block(w, buf, n, off) != ARCHIVE_OK) {
					ar_disk_failed(w, err, "unpack", raw);
					goto out;
				}
			if (r != ARCHIVE_EOF) {
				sbx_err_set(err, SBX_E_USAGE, "cannot read the layer: %s",
					    ar_msg(rd));
				goto out;
			}
		}
		if (ar.write_finish_entry(w) != ARCHIVE_OK) {
			ar_disk_failed(w, err, "unpack", raw);
			goto out;
		}
		if (type != AE_IFDIR)
			ar_name_add(&seen, name);
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
	ar_name_set_release(&seen);
	if (w)
		ar.write_free(w);
	if (rd)
		ar.read_free(rd);
	return ret;
}
