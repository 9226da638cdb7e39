/* Orchestration: SB -> record -> lock -> provider op -> save. The API cmd/ calls. */
#ifndef SBX_CORE_SANDBOX_H
#define SBX_CORE_SANDBOX_H

#include <jansson.h>

#include "core/options.h"

/* cmd/ sees providers only through these calls */
struct sbx_provider;

int sbx_sandbox_create(struct sbx_ctx *ctx, const struct sbx_create_opts *opts,
		       struct sbx_record **ret_rec, struct sbx_err *err);
/* SB -> its record (as stored, state not refreshed) and provider */
int sbx_sandbox_open(struct sbx_ctx *ctx, const char *sb, struct sbx_record **ret_rec,
		     const struct sbx_provider **ret_provider, struct sbx_err *err);
/* SB -> its record, state refreshed, locked (close *ret_lock to unlock), and provider */
int sbx_sandbox_open_locked(struct sbx_ctx *ctx, const char *sb, int *ret_lock,
			    struct sbx_record **ret_rec, const struct sbx_provider **ret_provider,
			    struct sbx_err *err);
/* *ret_status: the command's exit status (or 128+N, or 124 on timeout) */
int sbx_sandbox_exec(struct sbx_ctx *ctx, const char *sb, const struct sbx_exec_opts *opts,
		     int *ret_status, struct sbx_err *err);
/* freezes SB (or, with release, ends its processes and keeps its files) */
int sbx_sandbox_pause(struct sbx_ctx *ctx, const char *sb, const struct sbx_pause_opts *opts,
		      struct sbx_err *err);
/* back to running: thaws a paused SB, boots a released or stopped one on its files */
int sbx_sandbox_resume(struct sbx_ctx *ctx, const char *sb, struct sbx_err *err);
/* where the provider keeps the egress log of SB (JSON lines; PATH.1 holds older ones) */
int sbx_sandbox_egress_log_path(struct sbx_ctx *ctx, const char *sb, char **ret_path, char **ret_id,
				struct sbx_err *err);
/* opens, closes or lists previews (struct sbx_preview_opts) */
int sbx_sandbox_preview(struct sbx_ctx *ctx, const char *sb, const struct sbx_preview_opts *o,
			json_t **ret, struct sbx_err *err);
int sbx_sandbox_rm(struct sbx_ctx *ctx, const char *sb, bool force, struct sbx_err *err);
/* changes SB's configuration (struct sbx_update_opts): recorded, and applied to what runs */
int sbx_sandbox_update(struct sbx_ctx *ctx, const char *sb, const struct sbx_update_opts *o,
		       struct sbx_err *err);
/* sbx keepalive: SB's idle deadline starts again from now (with ttl_ms, its --ttl changes
 * first, as sbx update --ttl) */
int sbx_sandbox_keepalive(struct sbx_ctx *ctx, const char *sb, long long ttl_ms,
			  struct sbx_err *err);
/* sbx stats: one sample of what rec (state refreshed) uses, an object of the stats' fields */
int sbx_sandbox_stats(struct sbx_ctx *ctx, struct sbx_record *rec, json_t **ret,
		      struct sbx_err *err);
/* sbx cp (core/cp.c): a tar stream on tar_fd into SB:dest / a tar of SB:src onto tar_fd */
int sbx_sandbox_cp_in(struct sbx_ctx *ctx, const char *sb, int tar_fd, const char *dest,
		      const struct sbx_cp_opts *opts, struct sbx_err *err);
int sbx_sandbox_cp_out(struct sbx_ctx *ctx, const char *sb, const char *src, int tar_fd,
		       const struct sbx_cp_opts *opts, struct sbx_err *err);
/* host path <-> SB:path, with docker cp's naming */
int sbx_sandbox_cp_from_host(struct sbx_ctx *ctx, const char *host_src, const char *sb,
			     const char *dest, const struct sbx_cp_opts *opts, struct sbx_err *err);
int sbx_sandbox_cp_to_host(struct sbx_ctx *ctx, const char *sb, const char *src,
			   const char *host_dest, const struct sbx_cp_opts *opts,
			   struct sbx_err *err);
/* the record with its state confirmed by looking */
int sbx_sandbox_get(struct sbx_ctx *ctx, const char *sb, struct sbx_record **ret_rec,
		    struct sbx_err *err);

/* the host path of the log of SB's detached commands */
int sbx_sandbox_log_path(struct sbx_ctx *ctx, const char *sb, char **ret_path, char **ret_id,
			 struct sbx_err *err);

struct sbx_listing {
	struct sbx_record **recs;
	size_t n;
	char **bad; /* paths of records that could not be read */
	size_t n_bad;
};
int sbx_sandbox_list(struct sbx_ctx *ctx, struct sbx_listing *ret, struct sbx_err *err);
void sbx_listing_release(struct sbx_listing *l);

/* every provider this sbx was built with: [{name, summary, remote, configured, capabilities,
 * key_variable, api_url, not_ready?}] */
json_t *sbx_sandbox_providers(void);
/* the length of the longest provider name (the width of ls's PROVIDER column) */
int sbx_sandbox_provider_name_max(void);

/* SB's changes to its image (an image sandbox's writable layer) as a new image NAME[:TAG] in
 * the store, with o's config changes; a running SB is frozen meanwhile */
struct sbx_commit_opts;
int sbx_sandbox_commit(struct sbx_ctx *ctx, const char *sb, const char *name,
		       const struct sbx_commit_opts *o, char **ret_id, struct sbx_err *err);
/* SB's changes to its image as a layer in the store, held for this process (sbx image build) */
struct sbx_layer;
int sbx_sandbox_layer(struct sbx_ctx *ctx, const char *sb, struct sbx_layer *ret,
		      struct sbx_err *err);

#endif
