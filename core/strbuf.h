/* Growable NUL-terminated string buffer (git style). */
#ifndef SBX_CORE_STRBUF_H
#define SBX_CORE_STRBUF_H

#include "core/util.h"

struct strbuf {
	char *buf;
	size_t len, alloc;
};
#define STRBUF_INIT        \
	{                  \
		NULL, 0, 0 \
	}

void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_add(struct strbuf *sb, const void *data, size_t n);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
_printf_(2, 3) void strbuf_addf(struct strbuf *sb, const char *fmt, ...);
void strbuf_reset(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
/* hands the buffer to the caller (never NULL) and resets sb */
char *strbuf_detach(struct strbuf *sb);
/* the buffer, "" when empty */
static inline const char *strbuf_str(const struct strbuf *sb)
{
	return sb->buf ? sb->buf : "";
}

#endif
