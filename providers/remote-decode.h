/* The hosted providers' answers decoded without a network: the functions exec, inspect, ls and
 * preview use on what E2B and Daytona send, exported so tests/fuzz can feed them any bytes. */
#ifndef SBX_PROVIDERS_REMOTE_DECODE_H
#define SBX_PROVIDERS_REMOTE_DECODE_H

#include "core/strbuf.h"
#include "providers/remote.h"

/* E2B: an envd process.Process/Start answer (Connect frames of JSON envelopes), handed to the
 * decoder in pieces of at most chunk bytes (0: all at once) as the network would; the command's
 * output into out and errs, then 0 and its status (timeout_ms as exec --timeout), or -1 */
int e2b_decode_stream(const char *data, size_t len, size_t chunk, long long timeout_ms,
		      struct strbuf *out, struct strbuf *errs, int *ret_status,
		      struct sbx_err *err);

/* Daytona: a sandbox (GET /sandbox/ID) into rec's state, state_reason and live */
void daytona_decode_sandbox(struct sbx_record *rec, const json_t *j);
/* one page of GET /sandbox: id -> state (enum sbx_state) into all; *ret_cursor the next page's
 * cursor, NULL after the last */
int daytona_decode_list(const json_t *resp, json_t *all, char **ret_cursor, struct sbx_err *err);
/* a toolbox session's exec answer: the output into out and errout, the command's status */
int daytona_decode_exec(const json_t *resp, struct strbuf *out, struct strbuf *errout,
			int *ret_status, struct sbx_err *err);
/* GET /sandbox/ID/ports/PORT/preview-url: {port, url, public[, token, token_header]} */
int daytona_decode_preview(const json_t *resp, int port, json_t **ret, struct sbx_err *err);

#endif
