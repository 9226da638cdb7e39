/* Btrfs subvolumes: where the store is on btrfs, a sandbox's files are a subvolume of their
 * own, so that a snapshot of them, a fork of a snapshot and a restore are each one
 * copy-on-write snapshot of a subvolume, whatever the number of files, instead of a walk that
 * clones file by file. Every call works on a directory descriptor and a single name, never a
 * path, and needs no privilege: btrfs lets the owner of a subvolume snapshot it, and removes
 * an empty one with rmdir. */
#ifndef SBX_CORE_SUBVOL_H
#define SBX_CORE_SUBVOL_H

#include <stdbool.h>
#include <sys/stat.h>

/* the filesystem of fd is btrfs */
bool sbx_subvol_fs(int fd);
/* st (of name in dirfd, not followed) is the root of a subvolume that is not a mount point, or
 * the empty directory a snapshot holds in place of one (a device of its own too; rmdir
 * removes it) */
bool sbx_subvol_root(int dirfd, const char *name, const struct stat *st);
/* fd (a directory) is the root of a subvolume */
bool sbx_subvol_root_fd(int fd);
/* 1 if the subvolume fd holds subvolumes of its own (which a snapshot of it would leave out:
 * btrfs puts an empty directory in their place), 0 if not, -1 with errno */
int sbx_subvol_has_nested(int fd);
/* a new, empty subvolume name in at (mode 0755, the caller's); -1 with errno otherwise
 * (ENOTTY: not btrfs) */
int sbx_subvol_create(int at, const char *name);
/* a (writable) snapshot of the subvolume src as name in at; -1 with errno. Snapshots are
 * left writable, so that whoever removes the store by hand (rm -rf) can */
int sbx_subvol_snapshot(int src, int at, const char *name);
/* the subvolume name in at removed at once, whatever it holds (a caller with CAP_SYS_ADMIN, or
 * a filesystem mounted with user_subvol_rm_allowed); -1 with errno otherwise (EPERM) */
int sbx_subvol_destroy(int at, const char *name);
/* the subvolume fd made writable again (one made read-only by hand, so that its files can be
 * removed); -1 with errno */
int sbx_subvol_set_writable(int fd);

#endif
