/* What the image store's files share. Which file does what (each calls only those below it):
 *   image.c         the public face: find, pull, ls, rm, prune
 *   image-import.c  image import: docker save and OCI-layout archives, rootfs images
 *   image-layer.c   layers unpacked once under their chain keys; an image recorded under a name
 *   image-store.c   the store on disk: directories, lock, leases, refs.json, blobs
 * Pulling itself is core/registry.c's; unpacking a layer is core/archive-layer.c's. */
#ifndef SBX_CORE_IMAGE_INT_H
#define SBX_CORE_IMAGE_INT_H

#include <sys/types.h>

#include "core/image.h"

#define MANIFEST_MAX (4 << 20)

/* --- image-store.c ------------------------------------------------------------------------- */

/* $SBX_HOME/images, and a blob's path in it */
char *img_dir(const struct sbx_store *st);
char *img_blob_path(const struct sbx_store *st, const char *digest);
/* images/ and its blobs/sha256, layers, tmp */
int img_ensure_dirs(const struct sbx_store *st, struct sbx_err *err);
/* the store's lock (an fd to close): exclusive while refs.json changes and while prune runs */
int img_lock_images(const struct sbx_store *st, bool exclusive, struct sbx_err *err);
/* puts a digest into this process's lease before its blob or layer is looked for: prune keeps
 * it; img_lease_drop ends the lease (at the end of a pull or an import) */
int img_hold(const struct sbx_store *st, const char *digest, struct sbx_err *err);
void img_lease_drop(void);
/* what the live leases hold, into keep (digest -> true); dead leases are removed */
void img_leases_read(const struct sbx_store *st, json_t *keep);
/* refs.json: name -> {manifest, config, layers, chain, size, created} */
json_t *img_refs_load(const struct sbx_store *st, struct sbx_err *err);
int img_refs_save(const struct sbx_store *st, json_t *refs, struct sbx_err *err);
/* an image without a name is recorded under its id ("sha256:..."); once it gets a name, that
 * entry goes */
void img_refs_drop_unnamed(json_t *refs, const char *config);
/* an OCI manifest for config and layers (blobs of the store): their media types by their
 * bytes (a gzip or zstd layer, or a plain tar) */
int img_make_manifest(struct sbx_store *st, const char *config, char *const *layers, size_t n,
		      char *ret, struct sbx_err *err);
/* a file's size, 0 when it cannot be seen */
long long img_file_size(const char *p);
/* a blob of the store, parsed (manifests and configs) */
json_t *img_blob_json(const struct sbx_store *st, const char *digest, struct sbx_err *err);
/* stores data as a blob under its digest (into ret, 72 bytes) */
int img_put_blob(const struct sbx_store *st, const char *data, size_t len, char *ret,
		 struct sbx_err *err);
/* puts a file (of the same filesystem) into the blob store under its digest, checked against
 * want when given */
int img_adopt_blob(const struct sbx_store *st, const char *file, const char *want, char *ret,
		   struct sbx_err *err);

/* --- image-layer.c ------------------------------------------------------------------------- */

/* an unpacking under way: a child unpacks a layer blob into tmp, which becomes dir */
struct img_unpack_job {
	pid_t pid; /* 0: none */
	int ep;	   /* the child's report */
	char *tmp, *dir, *what;
};

/* waits for an unpacking (none is fine) and puts its directory in place */
int img_unpack_finish(struct img_unpack_job *j, struct sbx_err *err);
/* the key of layer i (keys[0..i-1] known), held, and its unpacking started */
int img_layer_start(const struct sbx_store *st, char *const *layers, char **keys, size_t i,
		    struct img_unpack_job *j, struct sbx_err *err);
/* records NAME -> the image whose blobs are in the store, its layers unpacked first; origin:
 * "pulled", "imported", "committed" or "built" (NAME is the id itself for an image without a
 * name: see img_refs_drop_unnamed) */
int img_add_ref(struct sbx_store *st, const char *name, const char *manifest, const char *config,
		char *const *layers, size_t n, const char *origin, struct sbx_err *err);

#endif
