/* The image store under $SBX_HOME/images: blobs by digest, layers unpacked once, named refs. */
#ifndef SBX_CORE_IMAGE_H
#define SBX_CORE_IMAGE_H

#include <jansson.h>
#include <sys/types.h>

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
 * image into *ret_lines (NULL-terminated). An image the archive does not name (or gives only a
 * bare tag) is recorded as name (NAME[:TAG], the bare tag when NAME has none), else under its
 * id alone (listed as <none>, named later with sbx_image_tag) */
int sbx_image_import(struct sbx_store *st, const char *path, const char *name, char ***ret_lines,
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
/* COPY --chown's USER[:GROUP] -> ids: numbers as they are, names looked up in the /etc/passwd
 * and /etc/group of the image whose layers (blob digests, base first) are blobs; a user
 * without a group gives its uid as the gid (as docker does). USAGE for a name not there */
int sbx_image_chown_ids(const struct sbx_store *st, char *const *blobs, size_t n, const char *spec,
			long *uid, long *gid, struct sbx_err *err);

/* --- images made here (image-commit.c) --- */

/* a directory of changes (an overlay upper directory) to make a layer of */
struct sbx_layer_src {
	const char *dir;
	long shift; /* see sbx_diff_opts */
	/* NULL: the jail's own id maps (root: every id itself; else the caller as 0); else what
	 * writes them (the sandbox's map, so its files' owners read as the sandbox's) */
	int (*maps)(pid_t pid, void *arg);
	void *maps_arg;
	const char *const *skip, *const *skip_empty; /* see sbx_diff_opts */
	const char *const *bare;		     /* likewise */
	bool own;
	long uid, gid;
};
struct sbx_layer {
	char blob[72];	  /* the gzip-compressed tar in the store */
	char diff_id[72]; /* the uncompressed tar's digest */
	long long size;	  /* of the blob */
};
/* the directory as an OCI layer (core/archive-diff.c's sbx_archive_diff, read in a jail that
 * holds only the directory), gzip-compressed into the store's blobs; held for this process
 * until sbx_image_commit */
int sbx_image_layer_from_dir(struct sbx_store *st, const struct sbx_layer_src *src,
			     struct sbx_layer *ret, struct sbx_err *err);
/* docker's --change instructions (CMD, ENTRYPOINT, ENV, WORKDIR, USER, LABEL, EXPOSE) applied
 * to an image config's "config" object; USAGE for a bad one */
int sbx_image_changes_apply(json_t *cfg, char *const *changes, struct sbx_err *err);

struct sbx_commit_src {
	const char *base_id; /* the config digest of the image below; NULL: none (FROM scratch) */
	char *const *base_layers; /* its layer blobs, base first, NULL-terminated (NULL: none) */
	const struct sbx_layer *layer; /* the new layer on top */
};
struct sbx_commit_opts {
	char *const *changes;	/* NULL-terminated, or NULL */
	const char *message;	/* the history entry's comment, or NULL */
	const char *created_by; /* the history entry's created_by (NULL: "sbx commit") */
	const char *origin;	/* NULL: "committed" */
};
/* records NAME[:TAG] -> the base image with the layer on top and the changes applied */
int sbx_image_commit(struct sbx_store *st, const char *name, const struct sbx_commit_src *src,
		     const struct sbx_commit_opts *o, char **ret_id, struct sbx_err *err);
/* NAME[:TAG] normalized ("docker.io/library/NAME:latest"); a digest is refused */
int sbx_image_name(const char *name, char **ret, struct sbx_err *err);

/* --- image-save.c --- */

/* how REF (a name) came into the store when it was made here: "committed" or "built" (no
 * registry has seen it); NULL otherwise */
char *sbx_image_local_origin(struct sbx_store *st, const char *ref);

/* NAME -> the image SRC names (a name or an id) */
int sbx_image_tag(struct sbx_store *st, const char *src, const char *name, struct sbx_err *err);
/* the images as one tar to fd: docker save's layout (manifest.json, RepoTags) and an OCI
 * layout (index.json, oci-layout, blobs/sha256) over the same blobs */
int sbx_image_save(struct sbx_store *st, char *const *refs, size_t n, int fd, struct sbx_err *err);

#endif
