/* Error values carried from the core and providers up to cmd/, which alone prints them. */
#ifndef SBX_CORE_ERR_H
#define SBX_CORE_ERR_H

#include <sys/types.h>

#include "core/util.h"

enum sbx_errkind {
	SBX_E_NONE,
	SBX_E_USAGE,
	SBX_E_NOTFOUND,
	SBX_E_EXISTS,
	SBX_E_STATE,
	SBX_E_UNSUPPORTED,
	SBX_E_SYSTEM,
	SBX_E_NETWORK,
	SBX_E_REMOTE,
	SBX_E_CONFIG,
	SBX_E_CMD_NOEXEC,
	SBX_E_CMD_NOTFOUND,
	SBX_E_AUTH,	   /* a provider refused the credentials */
	SBX_E_QUOTA,	   /* a provider's or a limit's quota is spent */
	SBX_E_TIMEOUT,	   /* a deadline the caller gave passed (wait --timeout, ...) */
	SBX_E_IO,	   /* reading or writing files (a full disk, a short write) */
	SBX_E_INTERNAL,	   /* a bug of sbx's own */
	SBX_E_UNAVAILABLE, /* a provider could not be reached or answered 5xx */
};

struct sbx_err {
	enum sbx_errkind kind;
	int errnum;
	long http_status;
	char msg[512];
};

_printf_(3, 4) int sbx_err_set(struct sbx_err *err, enum sbx_errkind kind, const char *fmt, ...);
/* saves errno first, appends ": strerror" */
_printf_(2, 3) int sbx_err_errno(struct sbx_err *err, const char *fmt, ...);
/* "context: old message" */
_printf_(2, 3) int sbx_err_prefix(struct sbx_err *err, const char *fmt, ...);
void sbx_err_clear(struct sbx_err *err);
/* the stable code of an error as --json prints it ("not_found", "already_exists", ...; see
 * sbx(1)): the kind, refined by the HTTP status a provider answered */
const char *sbx_err_code(const struct sbx_err *err);

/* a forked child's outcome: the child sends err (NULL: success) on fd once; the parent waits
 * for pid, then reads it (a child that died without a word is an error naming what); a report
 * as every child's (core/proc.c) */
void sbx_err_send(int fd, const struct sbx_err *err);
int sbx_err_recv(int fd, pid_t pid, const char *what, struct sbx_err *err);

#endif
