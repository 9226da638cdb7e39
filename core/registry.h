/* The OCI distribution pull client: references, registry auth, manifests and verified blobs. */
#ifndef SBX_CORE_REGISTRY_H
#define SBX_CORE_REGISTRY_H

#include <jansson.h>

#include "core/err.h"

/* --- references ------------------------------------------------------------------------------- */

struct sbx_ref {
	char *registry; /* "docker.io", "localhost:5000" */
	char *host;	/* API host: "registry-1.docker.io" for docker.io, else = registry */
	char *repo;	/* "library/busybox" */
	char *tag;	/* NULL when a digest is given */
	char *digest;	/* "sha256:..." or NULL */
	char *name;	/* normalized "docker.io/library/busybox:latest" or "...@sha256:..." */
};

/* docker's rules (a first component with '.' or ':', or "localhost", names the registry; the
 * default tag is latest); checks repo, tag and digest syntax: SBX_E_USAGE on bad input. *ret is
 * set only on success; releasing a zeroed struct is fine */
int sbx_ref_parse(const char *s, struct sbx_ref *ret, struct sbx_err *err);
void sbx_ref_release(struct sbx_ref *r);
/* a normalized name as users write it ("docker.io/library/" or "docker.io/" stripped) */
char *sbx_ref_familiar(const char *normalized);

/* --- pulling ---------------------------------------------------------------------------------- */

struct sbx_pull_opts {
	const char *platform; /* "os/arch[/variant]"; "linux/amd64" when NULL */
	bool insecure;	      /* plain HTTP to a registry that is not on loopback */
	bool progress;	      /* per-layer progress lines on stderr (the caller decides) */
	long stall_timeout_s; /* 0 = 30: a transfer with no byte for that long fails */
	/* when set: told each digest before its blob is looked for in the store or fetched */
	int (*hold)(void *arg, const char *digest, struct sbx_err *err);
	/* when set: told when layer i of n is in the store, while the next ones are fetched */
	int (*fetched)(void *arg, size_t i, size_t n, const char *digest, struct sbx_err *err);
	void *hold_arg; /* the argument of both */
};

struct sbx_pulled_layer {
	char *digest;
	char *media_type; /* as the manifest says: tar, tar+gzip, tar+zstd (sbx_layer_is_*) */
	long long size;
};

struct sbx_pulled {
	char *manifest_digest; /* of the image manifest (not of an index that led to it) */
	json_t *manifest;
	char *config_digest; /* the image id */
	json_t *config;
	size_t n_layers;
	struct sbx_pulled_layer *layers; /* base first */
};

/* fetches the manifest (resolving an image index / manifest list to the platform), the config
 * blob and every layer blob into IMAGES_DIR/blobs/sha256/<hex>, each verified by its sha256
 * (partial downloads live in IMAGES_DIR/tmp); blobs already present are not fetched again */
int sbx_registry_pull(const struct sbx_ref *ref, const struct sbx_pull_opts *o,
		      const char *images_dir, struct sbx_pulled *ret, struct sbx_err *err);
void sbx_pulled_release(struct sbx_pulled *p);

/* layer media type -> its compression; false for anything sbx cannot unpack */
bool sbx_layer_media_type_known(const char *media_type);
bool sbx_layer_is_gzip(const char *media_type);
bool sbx_layer_is_zstd(const char *media_type);
/* a foreign (docker) or non-distributable (OCI) layer: one the registry may not hold */
bool sbx_layer_is_foreign(const char *media_type);

/* --- the pieces, exported for the unit tests ------------------------------------------------- */

/* one WWW-Authenticate challenge: scheme "Bearer" or "Basic" (as sent), and its parameters */
struct sbx_challenge {
	char *scheme;
	char *realm;
	char *service; /* NULL when absent */
	char *scope;   /* NULL when absent */
};
/* parses a WWW-Authenticate header value (the first challenge in it); -1 when malformed */
int sbx_registry_parse_challenge(const char *header, struct sbx_challenge *ret);
void sbx_challenge_release(struct sbx_challenge *c);

/* credentials for a registry from $DOCKER_CONFIG/config.json or ~/.docker/config.json */
struct sbx_registry_creds {
	char *username;
	char *password;
	char *identity_token; /* an OAuth2 refresh token (docker login with a token) */
};
/* 1 and *ret filled when the config has credentials for REGISTRY ("docker.io" also matches
 * "https://index.docker.io/v1/"), 0 when none, -1 when the config cannot be read or parsed */
int sbx_registry_credentials(const char *registry, struct sbx_registry_creds *ret,
			     struct sbx_err *err);
void sbx_registry_creds_release(struct sbx_registry_creds *c);

/* the digest of the manifest an image index names for PLATFORM ("os/arch[/variant]"); its
 * media type too when ret_media_type is not NULL. SBX_E_USAGE for a malformed platform,
 * SBX_E_NOTFOUND (listing what the index has) when nothing matches */
int sbx_registry_select_platform(const json_t *index, const char *platform, char **ret_digest,
				 char **ret_media_type, struct sbx_err *err);

/* "os/arch[/variant]", the architecture normalized (x86_64 -> amd64, aarch64 -> arm64);
 * SBX_E_USAGE when malformed */
struct sbx_platform {
	char os[32], arch[32], variant[32];
	bool has_variant;
};
int sbx_platform_parse(const char *s, struct sbx_platform *ret, struct sbx_err *err);
const char *sbx_platform_norm_arch(const char *arch);

/* how deeply arrays and objects nest in a JSON text (strings skipped); a document is refused
 * past SBX_REGISTRY_MAX_JSON_DEPTH */
#define SBX_REGISTRY_MAX_JSON_DEPTH 64
int sbx_registry_json_depth(const char *text, size_t len);
/* parses a registry's JSON document after the depth check; WHAT names it in the error */
json_t *sbx_registry_json_parse(const char *text, size_t len, const char *what,
				struct sbx_err *err);
/* wipes a secret string, then frees it (NULL is fine) */
void sbx_registry_free_secret(char *s);

#endif
