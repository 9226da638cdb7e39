/* Snapshots of sandboxes' files: their store under $SBX_HOME/snapshots (ID/snapshot.json, the
 * copied files in ID/tree, ID/lock), and the verbs over it (snapshot, ls, rm, restore, fork). */
#ifndef SBX_CORE_SNAPSHOT_H
#define SBX_CORE_SNAPSHOT_H

#include <jansson.h>

#include "core/options.h"

/* the files of SB copied into a new snapshot (name NULL: unnamed); *ret is its record:
 * {id, name, sandbox_id, sandbox_name, provider, image, image_id, created, created_unix,
 * size, file_count, implicit, files, id_map, map_kind}. An implicit one (a fork's) lives
 * only while *ret_hold is open: a later call removes it once nobody holds it. With memory, the
 * sandbox's processes and memory too ("memory": true; a provider with SBX_CAP_CHECKPOINT,
 * whose forks start with the processes running) */
int sbx_snapshot_create(struct sbx_ctx *ctx, const char *sb, const char *name, bool implicit,
			bool memory, json_t **ret, int *ret_hold, struct sbx_err *err);
/* every snapshot (of SB alone, unless NULL: by its id, or its name once it is gone), oldest
 * first */
int sbx_snapshot_list(struct sbx_ctx *ctx, const char *sb, json_t **ret, struct sbx_err *err);
/* some sandbox's files stack on snapshot id (a fork of it, where forks stack) */
bool sbx_snapshot_in_use(struct sbx_ctx *ctx, const char *id);
/* the implicit snapshots (a fork's) that no fork holds or stacks on any more, removed */
void sbx_snapshot_sweep(struct sbx_ctx *ctx);
/* removes SNAP (waits for the forks and restores that read it); STATE while sandboxes stack
 * on it */
int sbx_snapshot_rm(struct sbx_ctx *ctx, const char *snap, struct sbx_err *err);
/* the files of SB become SNAP's (see struct sbx_provider.restore) */
int sbx_snapshot_restore(struct sbx_ctx *ctx, const char *sb, const char *snap,
			 struct sbx_err *err);
/* SNAP (an id, a name, or a unique id prefix) -> its id; NOTFOUND otherwise */
int sbx_snapshot_resolve(struct sbx_store *st, const char *snap, char **ret_id,
			 struct sbx_err *err);
/* the record and the tree's path of snapshot id */
int sbx_snapshot_find(struct sbx_store *st, const char *id, json_t **ret_info, char **ret_tree,
		      struct sbx_err *err);
/* the provider of snapshot SNAP (malloc'd), or NULL when there is no such snapshot */
char *sbx_snapshot_provider(struct sbx_store *st, const char *snap);
/* create --from: c->from (SNAP) becomes the snapshot's id, and c->image.ref its image's when
 * none is given; *ret_lock holds the snapshot (shared) until closed; the provider named
 * must be the snapshot's */
int sbx_snapshot_prepare_create(struct sbx_ctx *ctx, struct sbx_config *c, const char *provider,
				int *ret_lock, struct sbx_err *err);

#endif
