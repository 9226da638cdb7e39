/* Diagnostics on stderr: debug and warning lines with the sbx: prefix, made terminal-safe. */
#define _GNU_SOURCE
#include "core/log.h"

#include <stdarg.h>

int sbx_debug_enabled;

/* one line: what a sandbox or a provider put in the message cannot drive the terminal */
static _printf_(2, 0) void emit(const char *prefix, const char *fmt, va_list ap)
{
	char *msg = NULL;
	int n = vasprintf(&msg, fmt, ap);

	if (n < 0) {
		fprintf(stderr, "%s(message lost: out of memory)\n", prefix);
		return;
	}
	while (n > 0 && msg[n - 1] == '\n')
		n--;
	_cleanup_free_ char *safe = sbx_term_safe_n(msg, (size_t)n);
	free(msg);
	fprintf(stderr, "%s%s\n", prefix, safe);
}

void sbx_debug(const char *fmt, ...)
{
	va_list ap;

	if (!sbx_debug_enabled)
		return;
	va_start(ap, fmt);
	emit("sbx: debug: ", fmt, ap);
	va_end(ap);
}

void sbx_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit("sbx: warning: ", fmt, ap);
	va_end(ap);
}
