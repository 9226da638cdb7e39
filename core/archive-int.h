/* What the archive files share. Which file does what (each calls only archive.c):
 *   archive-extract.c  cp: unpacking a tar stream under a destination, never outside it
 *   archive-layer.c    image layers: unpacking with OCI whiteouts made overlay's
 *   archive-diff.c     image layers made: an overlay upper directory packed with OCI
 *                      whiteouts; gzip; a tar of named files (image save)
 *   archive.c          libarchive's functions (dlopen'ed), its errors in words, name sets; and
 *                      cp: packing a host path into a tar stream */
#ifndef SBX_CORE_ARCHIVE_INT_H
#define SBX_CORE_ARCHIVE_INT_H

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/archive.h"

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
	X(read_support_filter_lz4) X(read_support_filter_compress)                                  \
	X(write_add_filter_gzip) X(write_set_format_raw) X(entry_copy_stat) X(entry_set_pathname)   \
	X(entry_set_filetype) X(entry_set_size) X(entry_set_symlink) X(entry_set_hardlink)          \
	X(entry_set_mtime) X(entry_set_mode) X(entry_unset_atime) X(entry_unset_ctime)              \
	X(entry_set_nlink) X(entry_set_ino64)
/* clang-format on */

struct sbx_ar_fns {
#define X(f) __typeof__(archive_##f) *f;
	AR_FNS(X)
#undef X
};

/* valid after sbx_archive_load() */
extern struct sbx_ar_fns sbx_ar;
#define ar sbx_ar
/* archive_errno, apart: a field named errno would meet errno's macro */
extern int (*sbx_ar_errno)(struct archive *);

/* a compressed stream is fine too, with a decompressor built into libarchive */
void ar_support_filters(struct archive *rd);
/* a storage error (a full disk, an I/O error, a quota) is never a warning to go past */
bool ar_storage_errno(int e);
/* libarchive's message of a */
const char *ar_msg(struct archive *a);
/* "cannot WHAT 'NAME': ..." with the system's reason when libarchive did not say it; -1 */
int ar_disk_failed(struct archive *w, struct sbx_err *err, const char *what, const char *name);
/* a failed write of the tar stream; errnum says EPIPE when the reader went away; -1 */
int ar_write_failed(struct archive *w, struct sbx_err *err);

/* the names written so far (hard links may point at these only): open addressing */
struct ar_name_set {
	char **slot;
	size_t cap, n;
};
bool ar_name_has(struct ar_name_set *ns, const char *s);
void ar_name_add(struct ar_name_set *ns, const char *s);
void ar_name_set_release(struct ar_name_set *ns);
/* why an entry's name may not be written, or NULL */
const char *ar_bad_name(const char *name);

#endif
