/* Background commands (exec -d) and waiting on sandboxes: sbx ps, logs EXECID, wait, kill. */
#ifndef SBX_CORE_JOBS_H
#define SBX_CORE_JOBS_H

#include <jansson.h>

#include "core/options.h"

/* SB's detached commands: a JSON array of {id, pid, command, state, exit_code, signal,
 * started_at, finished_at}, oldest first */
int sbx_sandbox_jobs(struct sbx_ctx *ctx, const char *sb, json_t **ret, struct sbx_err *err);
/* one exec's output on stdout; follow: until it ended */
int sbx_sandbox_job_logs(struct sbx_ctx *ctx, const char *sb, const char *id, bool follow,
			 struct sbx_err *err);
/* until the exec ended (timeout_ms 0: no limit; TIMEOUT after it): *ret_status its exit
 * status, 128+N for a signal */
int sbx_sandbox_job_wait(struct sbx_ctx *ctx, const char *sb, const char *id, long long timeout_ms,
			 int *ret_status, struct sbx_err *err);
/* until inspect shows state (NULL: stopped, released, or the sandbox is removed; "removed":
 * removed) */
int sbx_sandbox_wait_state(struct sbx_ctx *ctx, const char *sb, const char *state,
			   long long timeout_ms, struct sbx_err *err);
/* sig to the exec's process group, or (id NULL) to every process of SB but its init */
int sbx_sandbox_job_kill(struct sbx_ctx *ctx, const char *sb, const char *id, int sig,
			 struct sbx_err *err);

#endif
