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

/* sbx fs (e2b-fs.c), over envd as the template's default user: a unary call of the filesystem
 * service (method "/filesystem.Filesystem/Stat", ...), or a /files download (out_fd) or
 * upload (in_fd, size bytes); 0 with *resp whatever its status, -1 when no answer came */
struct sbx_http_resp;
int e2b_envd_rpc(const struct sbx_record *rec, const char *method, json_t *msg,
		 struct sbx_http_resp *resp, struct sbx_err *err);
int e2b_envd_files(const struct sbx_record *rec, const char *path, int in_fd, long long size,
		   int out_fd, struct sbx_http_resp *resp, struct sbx_err *err);
/* an envd answer that is not 2xx, as exec and cp report it */
int e2b_envd_failed(const struct sbx_record *rec, const char *what, long status,
		    const struct strbuf *body, struct sbx_err *err);
int e2b_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	   struct sbx_err *err);
/* envd's unary process and filesystem calls (JSON), the answer in *ret when ret */
int e2b_envd_call(const struct sbx_record *rec, const char *method, json_t *msg, const char *what,
		  json_t **ret, struct sbx_err *err);
/* attaches to process pid: its output (both streams) to out_fd (-1: dropped) until it ended,
 * *ret_status its exit status; NOTFOUND when envd has no such process (any more), TIMEOUT
 * after timeout_ms (0: none) */
int e2b_envd_connect(const struct sbx_record *rec, long pid, int out_fd, long long timeout_ms,
		     int *ret_status, struct sbx_err *err);
/* exec -d's processes (e2b-jobs.c) */
int e2b_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		  struct sbx_err *err);
int e2b_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		struct sbx_err *err);
int e2b_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		 int fd, struct sbx_err *err);
int e2b_job_wait(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id,
		 long long timeout_ms, int *ret_status, struct sbx_err *err);
int e2b_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		 struct sbx_err *err);

#endif
