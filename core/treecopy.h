/* A faithful copy of a directory tree, walked by descriptor (no path of the source is ever
 * resolved through a link): contents (reflinked where the filesystem can, holes kept),
 * modes, owners, times, symbolic links (never followed), hard links (kept as links), device
 * nodes (an overlay's whiteouts) and extended attributes. The walk makes every entry in turn;
 * the data and attributes of regular files are the work of a few threads meanwhile (a clone
 * or a copy is most of the cost), where threads can be made.
 *
 * (Where the trees are btrfs subvolumes, providers/local/snapshot.c snapshots them whole
 * instead: core/subvol.h.)
 *
 * Snapshots are copies, sharing data by reflink (FICLONE) where the filesystem can, the data
 * extents copied where it cannot: a snapshot is independent of its sandbox. Forks and
 * restores copy nothing outside btrfs: the sandbox stacks on the snapshot's tree as an
 * overlay's lower layer, and sbx_tree_merge makes one tree again of that and the upper when a
 * stacked sandbox is snapshotted or committed. */
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

/* applies an overlay's upper directory upper_fd onto dst_fd, a copy of what lay under it (the
 * lower tree): what the upper holds replaces what lay under, directories in both are merged
 * (unless the upper's is opaque), a whiteout removes what it names, and stays (as a whiteout)
 * only if whiteouts is set (more layers lie under the result: an image's, below[n_below])
 * and it still hides something there; the result is what the overlay showed, as one tree
 * (a layer over below). Owners are kept when own is set */
int sbx_tree_merge(int upper_fd, int dst_fd, bool own, bool whiteouts, const int *below,
		   size_t n_below, struct sbx_treecopy_stats *stats, struct sbx_err *err);
/* counts what the tree fd holds, as sbx_tree_copy would have (files, dirs, links, size) */
int sbx_tree_count(int fd, struct sbx_treecopy_stats *stats, struct sbx_err *err);

#endif
