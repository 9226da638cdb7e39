/* The E2B provider's two halves: e2b.c (the REST control plane) and e2b-envd.c (exec and cp
 * through the sandbox's envd daemon). Both run in the sbx CLI process. */
#ifndef SBX_PROVIDERS_E2B_H
#define SBX_PROVIDERS_E2B_H

#include "providers/remote-decode.h"

/* a secret E2B gave for the sandbox (kept in the record's extra.secret), or NULL */
const char *e2b_secret(const struct sbx_record *rec, const char *key);

int e2b_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	     int *ret_status, struct sbx_err *err);
int e2b_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
	      const struct sbx_cp_opts *o, struct sbx_err *err);
int e2b_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
	       const struct sbx_cp_opts *o, struct sbx_err *err);

#endif
