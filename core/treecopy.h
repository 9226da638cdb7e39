/* A faithful copy of a directory tree, walked by descriptor (no path of the source is ever
 * resolved through a link): contents (reflinked where the filesystem can, holes kept),
 * modes, owners, times, symbolic links (never followed), hard links (kept as links), device
 * nodes (an overlay's whiteouts) and extended attributes.
 *
 * (Where the trees are btrfs subvolumes, providers/local/snapshot.c snapshots them whole
 * instead: core/subvol.h.)
 *
 * Forks share data by reflink (FICLONE), falling back to copying the data extents where the
 * filesystem has none, rather than by hard-linked read-only trees as an overlay's lower layer:
 * a reflinked copy is independent (a snapshot can go while its forks live, a restore is an
 * exchange of trees) and needs no change to how a sandbox's root is assembled; the price is
 * a full copy per fork on ext4 and tmpfs, which the overlay would have avoided. */
#ifndef SBX_CORE_TREECOPY_H
#define SBX_CORE_TREECOPY_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"

struct sbx_treecopy_stats {
	unsigned long long files, dirs, links; /* links: names of a file met before */
	unsigned long long size;	       /* the regular files' sizes, holes included */
	unsigned long long bytes, cloned;      /* data copied; files shared by reflink */
	bool test_enospc;		       /* in: writes fail as on a full disk (tests) */
	bool subvol;			       /* out: made as one btrfs snapshot, not walked */
};

/* copies the contents of the directory src_fd into the directory dst_fd (empty, made by the
 * caller, whose own mode, owner and times become src_fd's); owners are kept when own is set
 * (the caller holds CAP_CHOWN over them), else left the caller's. A write that fails (ENOSPC,
 * EIO) fails the copy, naming what; the caller removes what it made */
int sbx_tree_copy(int src_fd, int dst_fd, bool own, struct sbx_treecopy_stats *stats,
		  struct sbx_err *err);

/* counts what the tree fd holds, as sbx_tree_copy would have (files, dirs, links, size) */
int sbx_tree_count(int fd, struct sbx_treecopy_stats *stats, struct sbx_err *err);

#endif
