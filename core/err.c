/* sbx_err helpers: set, errno, prefix; a child's outcome sent to its parent. No heap, no printing. */
#include "core/err.h"

#include <errno.h>
#include <stdarg.h>

int sbx_err_set(struct sbx_err *err, enum sbx_errkind kind, const char *fmt, ...)
{
	va_list ap;

	err->kind = kind;
	err->errnum = 0;
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

void sbx_err_clear(struct sbx_err *err)
{
	err->kind = SBX_E_NONE;
	err->errnum = 0;
	err->http_status = 0;
	err->msg[0] = 0;
}

/* --- children's outcomes -------------------------------------------------------------------- */
