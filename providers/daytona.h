/* The Daytona provider's files: daytona.c (the control plane, exec and cp through the toolbox)
 * and daytona-fs.c (sbx fs through the toolbox's file API). Both run in the sbx CLI process. */
#ifndef SBX_PROVIDERS_DAYTONA_H
#define SBX_PROVIDERS_DAYTONA_H

#include "providers/remote.h"

/* the API's base and key (CONFIG naming the variable when the key is missing) */
int daytona_remote(struct remote *r, struct sbx_err *err);
/* TOOLBOX_BASE/ID + tail: where the sandbox's toolbox answers */
char *daytona_toolbox_url(const struct remote *r, const struct sbx_record *rec, const char *tail);
int daytona_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	       struct sbx_err *err);

#endif
