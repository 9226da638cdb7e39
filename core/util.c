/* Allocation, parsing and file helpers shared by every layer. */
#define _GNU_SOURCE
#include "core/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "core/subvol.h"

void sbx_bug(const char *file, int line, const char *msg)
{
	fprintf(stderr, "sbx: BUG at %s:%d: %s\n", file, line, msg);
	abort();
}

static _noreturn_ void oom(void)
{
	static const char m[] = "sbx: out of memory\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(125);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (r < 0)
		oom();
	return p;
}

int sbx_parse_int(const char *s, long long min, long long max, long long *ret)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*ret = v;
	return 0;
}

long long sbx_parse_duration_ms(const char *s)
{
	char *end;
	double v;
	double mult = 1000;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v != v)
		return -1;
	if (streq(end, "") || streq(end, "s"))
		mult = 1000;
	else if (streq(end, "ms"))
		mult = 1;
	else if (streq(end, "m"))
		mult = 60 * 1000;
	else if (streq(end, "h"))
		mult = 3600 * 1000;
	else if (streq(end, "d"))
		mult = 86400 * 1000;
	else
		return -1;
	v *= mult;
	if (v < 0 || v > 1e15)
		return -1;
	return (long long)v;
}

long long sbx_parse_bytes(const char *s)
{
	char *end;
	double v;
	double mult = 1;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v != v)
		return -1;
	switch (tolower((unsigned char)*end)) {
	case 0:
		mult = 1;
		break;
	case 'b':
		mult = 1;
		break;
	case 'k':
		mult = 1024.0;
		break;
	case 'm':
		mult = 1024.0 * 1024;
		break;
	case 'g':
		mult = 1024.0 * 1024 * 1024;
		break;
	case 't':
		mult = 1024.0 * 1024 * 1024 * 1024;
		break;
	default:
		return -1;
	}
	if (*end) {
		end++;
		if (*end && tolower((unsigned char)*end) == 'b' && mult > 1)
			end++;
		if (*end)
			return -1;
	}
	v *= mult;
	if (v < 0 || v > 9e18)
		return -1;
	return (long long)v;
}

int sbx_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int sbx_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	int r = sbx_write_all(fd, text, strlen(text));
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

char *sbx_read_fd(int fd, size_t max, size_t *ret_len)
{
	size_t cap = 4096, len = 0;
	char *buf = xmalloc(cap);

	for (;;) {
		ssize_t r;
		if (len + 1 >= cap) {
			if (cap > max) {
				free(buf);
				errno = EFBIG;
				return NULL;
			}
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			errno = e;
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > max) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[len] = 0;
	if (ret_len)
		*ret_len = len;
	return buf;
}

char *sbx_read_fileat(int dirfd, const char *path, size_t max, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

	return fd < 0 ? NULL : sbx_read_fd(fd, max, ret_len);
}

char *sbx_read_file(const char *path, size_t max, size_t *ret_len)
{
	return sbx_read_fileat(AT_FDCWD, path, max, ret_len);
}

int sbx_mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int rm_rf_at(int dirfd, const char *name, dev_t dev)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return -1;
		return 0;
	}
	/* a btrfs subvolume (a sandbox's files, a snapshot) has a device of its own but is no
	 * mount: removed at once where the caller may, else emptied (made writable first) and
	 * removed by rmdir, which btrfs allows its owner */
	bool subvol = sbx_subvol_root(dirfd, name, &st);
	if (subvol && sbx_subvol_destroy(dirfd, name) == 0)
		return 0;
	if (st.st_dev != dev && !subvol) {
		errno = EBUSY; /* a mount point: never descend into another filesystem */
		return -1;
	}
	dev = st.st_dev;
	/* never through a link: what a sandbox left here is not followed out of it */
	if ((st.st_mode & 0700) != 0700)
		(void)fchmodat(dirfd, name, (st.st_mode & 07777) | 0700, AT_SYMLINK_NOFOLLOW);
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (subvol)
		(void)sbx_subvol_set_writable(fd);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (rm_rf_at(fd, de->d_name, dev) < 0)
			ret = -1;
	}
	int e = errno;
	closedir(d);
	if (ret < 0) {
		errno = e;
		return -1;
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

int sbx_rm_rf_at(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	return rm_rf_at(dirfd, name, st.st_dev);
}

int sbx_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	/* by its directory and its name: a subvolume is removed by name in its directory */
	const char *slash = strrchr(path, '/');
	if (!slash || !slash[1])
		return rm_rf_at(AT_FDCWD, path, st.st_dev);
	_cleanup_free_ char *dir = slash == path ? xstrdup("/")
						 : xstrndup(path, (size_t)(slash - path));
	_cleanup_close_ int at = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (at < 0)
		return -1;
	return rm_rf_at(at, slash + 1, st.st_dev);
}

char *sbx_time_rfc3339(long long t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char buf[64];

	/* a year past what struct tm holds (a damaged record): never format an unset tm */
	if (!gmtime_r(&tt, &tm)) {
		tt = 0;
		gmtime_r(&tt, &tm);
	}
	if (strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, sizeof(buf), "1970-01-01T00:00:00Z");
	return xstrdup(buf);
}

size_t sbx_utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned c = n ? s[0] : 0;
	size_t len;
	unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */

	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

char *sbx_term_safe_n(const void *data, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = data;
	char *out = xmalloc(4 * n + 1), *o = out;

	for (size_t i = 0; i < n;) {
		size_t len = sbx_utf8_seq_len(s + i, n - i);
		bool escape = len == 0 || s[i] < 0x20 || s[i] == 0x7f ||
			(len == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0); /* C1 controls */
		if (!escape) {
			memcpy(o, s + i, len);
			o += len;
			i += len;
			continue;
		}
		/* a C1 control shows both of its bytes; anything else invalid, one at a time */
		for (size_t k = 0; k < (len == 2 ? 2 : 1); k++, i++) {
			char e = s[i] == '\n' ? 'n' : s[i] == '\t' ? 't' : s[i] == '\r' ? 'r' : 0;
			*o++ = '\\';
			if (e) {
				*o++ = e;
			} else {
				*o++ = 'x';
				*o++ = hex[s[i] >> 4];
				*o++ = hex[s[i] & 15];
			}
		}
	}
	*o = 0;
	return out;
}

char *sbx_term_safe(const char *s)
{
	return sbx_term_safe_n(s, strlen(s));
}

char *sbx_base64_encode(const void *data, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = data;
	char *out = xmalloc((n + 2) / 3 * 4 + 1), *o = out;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*o++ = tab[(v >> 18) & 63];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*o = 0;
	return out;
}

static int base64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

char *sbx_base64_decode(const char *s, size_t *ret_len)
{
	size_t n = strlen(s), o = 0;
	char *out = xmalloc(n / 4 * 3 + 4);
	unsigned acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = base64_value(s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[o] = 0;
	*ret_len = o;
	return out;
}

long long sbx_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sbx_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}
