/* The image store under $SBX_HOME/images: blobs by digest, layers unpacked once, named refs. */
#ifndef SBX_CORE_IMAGE_H
#define SBX_CORE_IMAGE_H

#include <jansson.h>

#include "core/err.h"
#include "core/store.h"

/* run by root, layers are unpacked with their owners moved up by this much: the id range every
 * root-run local sandbox maps (providers/local/local.h LOCAL_UID_BASE); run by anyone else, every file
 * of a layer belongs to the caller */
#define SBX_IMAGE_ID_SHIFT 100000L

struct sbx_image {
	char *name;	/* the normalized ref it was found under; NULL when found by id */
	char *id;	/* "sha256:..." of the config blob */
	char *manifest; /* "sha256:..." of the manifest blob */
	char **layers;	/* the layer blobs' digests, base first, NULL-terminated */
	char **chain;	/* the unpacked layers' keys (see sbx_image_layer_dir), likewise */
	size_t n_layers;
	json_t *config;	   /* the config blob */
	long long size;	   /* bytes of the layer blobs */
	long long created; /* unix seconds, when it entered the store */
};
void sbx_image_release(struct sbx_image *img);

struct sbx_image_pull_opts {
	const char *platform; /* "os/arch[/variant]"; NULL: linux/amd64 */
	bool insecure;	      /* plain HTTP to a registry that is not on loopback */
	bool progress;	      /* per-layer progress on stderr */
};

/* REF (a name, or an image id or a unique prefix of one) -> the image; NOTFOUND when missing */
int sbx_image_find(struct sbx_store *st, const char *ref, struct sbx_image *ret,
		   struct sbx_err *err);
/* pulls REF from its registry into the store, unpacking its layers */
int sbx_image_pull(struct sbx_store *st, const char *ref, const struct sbx_image_pull_opts *o,
		   struct sbx_image *ret, struct sbx_err *err);
/* a docker save or OCI-layout tar (path, or "-" for stdin): one "NAME:TAG ID" (or "ID") line per
 * image into *ret_lines (NULL-terminated) */
int sbx_image_import(struct sbx_store *st, const char *path, char ***ret_lines,
		     struct sbx_err *err);
/* a one-layer image NAME[:TAG] from a directory or a tar (compressed or not) */
int sbx_image_import_rootfs(struct sbx_store *st, const char *path, const char *name, char **ret_id,
			    struct sbx_err *err);
/* every ref: an array of {name, repository, tag, id, digest, size, created, layers} */
int sbx_image_list(struct sbx_store *st, json_t **ret, struct sbx_err *err);
/* drops REF (a name, or an id: every name of it); refused while a sandbox uses the image unless
 * force */
int sbx_image_rm(struct sbx_store *st, const char *ref, bool force, struct sbx_err *err);
/* deletes the layers and blobs no ref and no sandbox uses; counts what went */
int sbx_image_prune(struct sbx_store *st, long long *ret_layers, long long *ret_blobs,
		    long long *ret_bytes, struct sbx_err *err);
/* the directory a layer is unpacked into, by its key: the base layer's blob digest, then
 * sha256("KEY-BELOW BLOB") for each layer above (what a layer unpacks to depends on those below) */
char *sbx_image_layer_dir(const struct sbx_store *st, const char *digest);

#endif
