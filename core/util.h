/* Small shared helpers: cleanup attributes, allocation that aborts, string checks. */
#ifndef SBX_CORE_UTIL_H
#define SBX_CORE_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))

#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) t_ = (p); \
		(p) = NULL;             \
		t_;                     \
	})
#define TAKE_FD(fd)            \
	({                     \
		int t_ = (fd); \
		(fd) = -1;     \
		t_;            \
	})
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SBX_BUG(msg) sbx_bug(__FILE__, __LINE__, msg)

static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}
static inline void fclosep(FILE **f)
{
	if (*f)
		(void)fclose(*f);
}

_noreturn_ void sbx_bug(const char *file, int line, const char *msg);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
_printf_(1, 2) char *xasprintf(const char *fmt, ...);

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}
static inline bool startswith(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* "1.5s", "30m", "2h", "500ms", "10" (seconds) -> milliseconds; -1 when malformed */
long long sbx_parse_duration_ms(const char *s);
/* "256m", "1g", "1024" (bytes), docker units -> bytes; -1 when malformed */
long long sbx_parse_bytes(const char *s);
/* strict base-10 integer in [min, max] */
int sbx_parse_int(const char *s, long long min, long long max, long long *ret);

/* write all of buf, retrying on EINTR and short writes; -1 with errno on failure */
int sbx_write_all(int fd, const void *buf, size_t n);
/* text into the existing file at path (a /proc or cgroup file: no create, no truncate);
 * -1 with errno */
int sbx_write_file(const char *path, const char *text);
/* read whole file (up to max bytes) into a NUL-terminated buffer; NULL with errno */
char *sbx_read_file(const char *path, size_t max, size_t *ret_len);
char *sbx_read_fileat(int dirfd, const char *path, size_t max, size_t *ret_len);
/* the same, from an open descriptor, to its end */
char *sbx_read_fd(int fd, size_t max, size_t *ret_len);
/* mkdir -p with mode; 0 or -1 with errno */
int sbx_mkdir_p(const char *path, mode_t mode);
/* remove a tree, fixing permissions that prevent it (does not cross mount points); -1 errno */
int sbx_rm_rf(const char *path);
/* the same for name in dirfd (a single name: nothing of it is followed) */
int sbx_rm_rf_at(int dirfd, const char *name);

/* base64 of n bytes (standard alphabet, padded) */
char *sbx_base64_encode(const void *data, size_t n);
/* standard or URL-safe base64, padding optional, NUL-terminated; NULL when malformed */
char *sbx_base64_decode(const char *s, size_t *ret_len);

/* text a sandbox, a provider or an archive chose, made safe to print on a terminal: C0 controls,
 * DEL, C1 controls (U+0080..U+009F) and bytes that are not valid UTF-8 become visible escapes
 * (\x1b, \xc2\x9b, \xff), newline, tab and CR become \n, \t and \r; printable UTF-8 (and
 * the backslash) stay as they are. The _n form takes n bytes, NUL included. Caller frees. */
char *sbx_term_safe(const char *s);
char *sbx_term_safe_n(const void *s, size_t n);
/* the length of the valid UTF-8 sequence at s[0..n) (1..4; overlong forms, surrogates and code
 * points past U+10FFFF are invalid), 0 when it is not one */
size_t sbx_utf8_seq_len(const unsigned char *s, size_t n);

/* unix seconds as RFC 3339 UTC; a time gmtime cannot represent is given as the epoch */
char *sbx_time_rfc3339(long long unix_sec);
long long sbx_now_ms(void);

/* a NULL-terminated array of strings, each freed, then the array */
void sbx_strv_free(char **v);
static inline void strv_freep(char ***v)
{
	sbx_strv_free(*v);
}

#endif
