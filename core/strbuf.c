/* Growable string buffer. */
#include "core/strbuf.h"

#include <stdarg.h>

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	if (sb->len + extra + 1 <= sb->alloc)
		return;
	size_t n = sb->alloc ? sb->alloc : 64;
	while (n < sb->len + extra + 1)
		n *= 2;
	sb->buf = xrealloc(sb->buf, n);
	sb->alloc = n;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
	strbuf_grow(sb, n);
	memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = 0;
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
	strbuf_add(sb, &c, 1);
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	strbuf_grow(sb, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = 0;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}

char *strbuf_detach(struct strbuf *sb)
{
	char *p = sb->buf ? sb->buf : xstrdup("");
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
	return p;
}
