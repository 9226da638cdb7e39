/* libarchive (dlopen'ed on first use) and cp's tar streams: pack a path, unpack with docker's naming. */
#ifndef SBX_CORE_ARCHIVE_H
#define SBX_CORE_ARCHIVE_H

#include <sys/types.h>

#include "core/err.h"

/* loads libarchive.so.13 and resolves the functions below use (once per process) */
int sbx_archive_load(struct sbx_err *err);

/* a cp source as written: "DIR/." (or ".", "/", a path ending in "..") copies what DIR holds */
struct sbx_cp_src {
	char *path;    /* what to open: trailing '/' and '/.' removed ("/" stays "/") */
	char *top;     /* the name its entries start with: basename(path), or "." for contents */
	bool want_dir; /* the source must be a directory (trailing '/', or contents) */
};
void sbx_cp_src_parse(const char *src, struct sbx_cp_src *ret);
void sbx_cp_src_release(struct sbx_cp_src *s);

/* writes a tar of src->path to fd, entry names rebased from src->path onto src->top, symlinks
 * kept as links (follow: the path itself, when it is a link, is followed), hard links within the
 * copy kept, holes kept; numeric owners only, no xattrs, ACLs or file flags */
int sbx_archive_pack(int fd, const struct sbx_cp_src *src, bool follow, struct sbx_err *err);

#define SBX_EXTRACT_OWNER 1u /* -a: keep the uid/gid of the entries */

/* reads a tar from fd and writes it under dest, never outside it:
 * - top == NULL: a tar stream ('-'); dest must be an existing directory, entries land as named;
 * - top: a path copy whose entries all start with top (sbx_archive_pack's output); docker cp's
 *   naming: into dest when it is a directory, as dest when it is not (a missing dest's parent
 *   must exist), what a "." top holds into dest.
 * Always refused: absolute names, '..', writing through a symbolic link, device nodes, hard links
 * to anything but an earlier entry of the same stream. setuid/setgid bits are dropped. */
int sbx_archive_extract(int fd, const char *dest, const char *top, unsigned flags,
			struct sbx_err *err);

/* unpacks an image layer (a tar, compressed or not) read from fd into the existing directory
 * dest (the process's cwd is changed): OCI whiteouts become overlay's (a 0/0 character device,
 * the user.overlay.opaque xattr), device nodes and sockets are skipped, and what cp refuses is
 * refused. shift >= 0: owners are kept, moved up by shift (an id range of 65536); -1: everything
 * belongs to the caller. lowers: the unpacked layers below, topmost first, which give a directory
 * the layer names a file in but does not list its mode, owner and times. */
int sbx_archive_unpack_layer(int fd, const char *dest, long shift, char *const *lowers,
			     size_t n_lowers, struct sbx_err *err);

/* an overlay upper directory (dirfd) as an OCI layer tar (uncompressed) written to out_fd:
 * entries in name order, owners, modes, mtimes, symbolic links (never followed: every file is
 * opened beneath its directory's descriptor, O_NOFOLLOW) and hard links kept; overlay's
 * whiteouts (a 0/0 character device, or an empty file with user.overlay.whiteout) become
 * .wh.NAME, a directory with user.overlay.opaque=y gets .wh..wh..opq; sockets are left out */
struct sbx_diff_opts {
	long shift;		       /* >= 0: ids shift..shift+65535 become 0..65535, others
					* 65534; -1: ids as they are */
	const char *const *skip;       /* paths left out, with all beneath them (NULL-terminated) */
	const char *const *skip_empty; /* paths left out when they are empty regular files */
	const char *const *bare;       /* directories whose own entries are left out (what they
					* hold is not): the unpacking takes them from below */
	bool own;		       /* every entry belongs to uid:gid (the shift aside) */
	long uid, gid;
};
int sbx_archive_diff(int dirfd, int out_fd, const struct sbx_diff_opts *o, struct sbx_err *err);
/* in_fd's bytes, gzip-compressed (libarchive's built-in zlib), to out_fd */
int sbx_archive_gzip(int in_fd, int out_fd, struct sbx_err *err);
/* a tar of members: directories, files from a descriptor (fd >= 0), or bytes in memory */
struct sbx_tar_member {
	const char *name;
	bool dir;
	int fd;
	const char *data;
	size_t len;
};
int sbx_archive_write_members(int out_fd, const struct sbx_tar_member *m, size_t n,
			      struct sbx_err *err);

#endif
