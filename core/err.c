/* sbx_err helpers: set, errno, prefix; a child's outcome sent to its parent. No heap, no printing. */
#include "core/err.h"

#include <errno.h>
#include <stdarg.h>

int sbx_err_set(struct sbx_err *err, enum sbx_errkind kind, const char *fmt, ...)
{
	va_list ap;

	err->kind = kind;
	err->errnum = 0;
	err->http_status = 0; /* a status of an earlier error would refine this one's code */
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int sbx_err_errno(struct sbx_err *err, const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(e));
	err->kind = SBX_E_SYSTEM;
	err->errnum = e;
	errno = e;
	return -1;
}

int sbx_err_prefix(struct sbx_err *err, const char *fmt, ...)
{
	char old[sizeof(err->msg)];
	va_list ap;
	size_t n;

	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", old);
	if (err->kind == SBX_E_NONE)
		err->kind = SBX_E_SYSTEM;
	return -1;
}

const char *sbx_err_code(const struct sbx_err *err)
{
	switch (err->kind) {
	case SBX_E_NONE:
		return "none";
	case SBX_E_USAGE:
	case SBX_E_CONFIG:
		return "invalid_argument";
	case SBX_E_NOTFOUND:
		return "not_found";
	case SBX_E_EXISTS:
		return "already_exists";
	case SBX_E_STATE:
		return "conflict_state";
	case SBX_E_UNSUPPORTED:
		return "unsupported";
	case SBX_E_CMD_NOEXEC:
		return "command_not_executable";
	case SBX_E_CMD_NOTFOUND:
		return "command_not_found";
	case SBX_E_AUTH:
		return "auth";
	case SBX_E_QUOTA:
		return "quota";
	case SBX_E_TIMEOUT:
		return "timeout";
	case SBX_E_IO:
	case SBX_E_SYSTEM:
		return "io";
	case SBX_E_INTERNAL:
		return "internal";
	case SBX_E_UNAVAILABLE:
	case SBX_E_NETWORK:
		return "provider_unavailable";
	case SBX_E_REMOTE:
		if (err->http_status == 401 || err->http_status == 403)
			return "auth";
		if (err->http_status == 402 || err->http_status == 429)
			return "quota";
		if (err->http_status == 404)
			return "not_found";
		if (err->http_status == 409)
			return "conflict_state";
		if (err->http_status == 408 || err->http_status == 504)
			return "timeout";
		if (err->http_status >= 500)
			return "provider_unavailable";
		return "provider_error";
	}
	return "internal";
}

void sbx_err_clear(struct sbx_err *err)
{
	err->kind = SBX_E_NONE;
	err->errnum = 0;
	err->http_status = 0;
	err->msg[0] = 0;
}

/* --- children's outcomes -------------------------------------------------------------------- */
