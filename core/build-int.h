/* What the build's files share. Which file does what (each calls only those below it):
 *   build.c       the Dockerfile's stages and steps, the image config
 *   build-cache.c the layer cache (images/build-cache.json)
 *   build-copy.c  COPY and ADD: the context (or another stage) into a staging directory
 *   build-run.c   images of the steps so far, RUN's sandboxes, the build's lease and sweep */
#ifndef SBX_CORE_BUILD_INT_H
#define SBX_CORE_BUILD_INT_H

#include <jansson.h>

#include "core/build.h"
#include "core/dockerfile.h"
#include "core/image.h"

struct build_state {
	json_t *config; /* the whole image config */
	char **layers;	/* blobs, base first, NULL-terminated */
	size_t n_layers;
	char key[72]; /* the cache's chain: what made this state */
	char id[72];  /* its config blob ("" until stored) */
};

struct build {
	struct sbx_ctx *ctx;
	const struct sbx_build_opts *o;
	struct sbx_dockerfile df;
	int ctx_fd;    /* the context directory */
	char **ignore; /* .dockerignore's patterns */
	json_t *cache; /* key -> {config, layers} */
	char *lease;   /* images/builds/ID: locked while the build runs */
	int lease_fd;
	int step, steps;
};

/* --- build-cache.c --- */
void build_state_release(struct build_state *s);
/* the cache as the store holds it (an empty one when there is none) */
json_t *build_cache_read(struct build *b);
/* key's entry into s (replaced), when its blobs are all still in the store */
bool build_cache_get(struct build *b, const char *key, struct build_state *s);
/* s under s->key, merged into the file as it is now (another build may have added) */
void build_cache_put(struct build *b, const struct build_state *s);

/* --- build-run.c --- */
int build_lease_open(struct build *b, struct sbx_err *err);
void build_lease_close(struct build *b);
/* the state stored as an image the store can find by its id (an unnamed one when the store
 * lacks it, noted in the lease and dropped by build_unref) */
int build_image_of(struct build *b, struct build_state *s, bool *ret_added, struct sbx_err *err);
void build_unref(struct build *b, const char *id);
/* a sandbox of the state (its id into ret_sb); build_sandbox_rm removes it */
int build_sandbox(struct build *b, struct build_state *s, char **ret_sb, bool *ret_added,
		  struct sbx_err *err);
void build_sandbox_rm(struct build *b, struct build_state *s, const char *sb, bool added);
/* runs argv in a sandbox of s; its changes into *ret; *ret_status its exit status */
int build_run(struct build *b, struct build_state *s, char **argv, char **env, const char *user,
	      struct sbx_layer *ret, int *ret_status, struct sbx_err *err);

/* --- build-copy.c --- */
struct copy_req {
	char **srcs;		  /* the sources (context paths, or paths of from) */
	const char *dest;	  /* absolute, in the image */
	bool dest_dir;		  /* dest is a directory the sources go into */
	bool add;		  /* ADD: local tar archives are unpacked */
	long uid, gid;		  /* --chown (-1: root) */
	long mode;		  /* --chmod (-1: as the sources) */
	struct build_state *from; /* --from: a stage or image (NULL: the context) */
};
/* the sources' names, modes and bytes, digested (nothing written) */
int build_copy_digest(struct build *b, const struct copy_req *rq, char ret[72],
		      struct sbx_err *err);
/* the copy as a layer */
int build_copy_layer(struct build *b, const struct copy_req *rq, struct sbx_layer *ret,
		     struct sbx_err *err);
/* WORKDIR's directory, made when missing, as a layer */
int build_workdir_layer(struct build *b, const char *dir, struct sbx_layer *ret,
			struct sbx_err *err);

#endif
