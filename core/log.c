/* Diagnostics on stderr: debug and warning lines with the sbx: prefix. */
#include "core/log.h"

#include <stdarg.h>

int sbx_debug_enabled;

void sbx_debug(const char *fmt, ...)
{
	va_list ap;

	if (!sbx_debug_enabled)
		return;
	fputs("sbx: debug: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void sbx_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("sbx: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
