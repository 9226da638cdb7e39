/* sbx fs: the file verbs over the providers' fs slot, and how their entries are shown. */
#define _GNU_SOURCE
#include "core/fs.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/sandbox.h"
#include "core/strbuf.h"
#include "providers/provider.h"

static const char *const verb_names[] = { "read", "write", "ls", "stat", "rm", "mkdir", "mv" };

int sbx_sandbox_fs(struct sbx_ctx *ctx, const char *sb, const struct sbx_fs_op *op,
		   struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_free_ char *id = NULL;
	const struct sbx_provider *p;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	/* shared, as exec and cp hold it: a pause, resume or rm waits for the operation */
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, false, err);
	if (lk < 0 || sbx_sandbox_open(ctx, id, &rec, &p, err) < 0)
		return -1;
	if (!p->fs)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support fs",
				   p->name);
	/* a reader that goes away is an EPIPE error of whoever writes, never a silent death */
	signal(SIGPIPE, SIG_IGN);
	sbx_debug("fs %s: %s:%s (provider %s)", verb_names[op->verb], rec->id, op->path, p->name);
	return p->fs(ctx, rec, op, err);
}

const char *sbx_fs_basename(const char *path, char *buf, size_t size)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		n--;
	size_t start = n;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (start == n) /* "/" or "" */
		return n ? "/" : "";
	n -= start;
	if (n >= size)
		n = size - 1;
	memcpy(buf, path + start, n);
	buf[n] = 0;
	return buf;
}

int sbx_fs_parse_mode(const char *s)
{
	char *end;

	if (!*s || strspn(s, "01234567") != strlen(s) || strlen(s) > 5)
		return -1;
	errno = 0;
	unsigned long m = strtoul(s, &end, 8);
	return *end || errno || m > 07777 ? -1 : (int)m;
}

/* s as UTF-8: a byte that starts no valid sequence becomes U+FFFD */
static json_t *utf8_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	struct strbuf b = STRBUF_INIT;

	while (*p) {
		size_t len = 0;
		unsigned c = *p;
		if (c < 0x80)
			len = 1;
		else if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4;
		bool ok = len > 0;
		for (size_t i = 1; ok && i < len; i++)
			ok = (p[i] & 0xc0) == 0x80;
		/* overlong, surrogate and past-U+10FFFF forms */
		if (ok && len == 3)
			ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
		if (ok && len == 4)
			ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
		if (ok) {
			strbuf_add(&b, p, len);
			p += len;
		} else {
			strbuf_addstr(&b, "\xef\xbf\xbd");
			p++;
		}
	}
	json_t *j = json_stringn(b.buf ? b.buf : "", b.len);
	strbuf_release(&b);
	return j ? j : json_string("");
}

static const char *type_name(char t)
{
	switch (t) {
	case 'f':
		return "file";
	case 'd':
		return "dir";
	case 'l':
		return "symlink";
	default:
		return "other";
	}
}

static void rfc3339(long long t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "1970-01-01T00:00:00Z");
}

json_t *sbx_fs_entry_json(const struct sbx_fs_entry *e)
{
	char name[256], mode[8], mtime[40];

	snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
	rfc3339(e->mtime, mtime, sizeof(mtime));
	json_t *o = json_object();
	json_object_set_new(o, "name", utf8_string(sbx_fs_basename(e->path, name, sizeof(name))));
	json_object_set_new(o, "path", utf8_string(e->path));
	json_object_set_new(o, "type", json_string(type_name(e->type)));
	json_object_set_new(o, "size", json_integer(e->size));
	json_object_set_new(o, "mode", json_string(mode));
	json_object_set_new(o, "uid", e->uid >= 0 ? json_integer(e->uid) : json_null());
	json_object_set_new(o, "gid", e->gid >= 0 ? json_integer(e->gid) : json_null());
	json_object_set_new(o, "mtime", json_string(mtime));
	if (e->type == 'l' && e->link_target)
		json_object_set_new(o, "link_target", utf8_string(e->link_target));
	return o;
}

void sbx_fs_entry_print(FILE *f, const struct sbx_fs_entry *e, bool full)
{
	static const char rwx[] = "rwxrwxrwx";
	char perm[11], name[256], mtime[40], id[2][24];

	perm[0] = e->type == 'f' ? '-' : e->type == 'd' ? 'd' : e->type == 'l' ? 'l' : '?';
	for (int i = 0; i < 9; i++)
		perm[i + 1] = e->mode & (0400u >> i) ? rwx[i] : '-';
	perm[10] = 0;
	if (e->mode & 04000)
		perm[3] = e->mode & 0100 ? 's' : 'S';
	if (e->mode & 02000)
		perm[6] = e->mode & 010 ? 's' : 'S';
	if (e->mode & 01000)
		perm[9] = e->mode & 01 ? 't' : 'T';
	rfc3339(e->mtime, mtime, sizeof(mtime));
	for (int i = 0; i < 2; i++) {
		long long v = i ? e->gid : e->uid;
		if (v >= 0)
			snprintf(id[i], sizeof(id[i]), "%lld", v);
		else
			snprintf(id[i], sizeof(id[i]), "-");
	}
	_cleanup_free_ char *shown = sbx_term_safe(
		full ? e->path : sbx_fs_basename(e->path, name, sizeof(name)));
	fprintf(f, "%s %5s %5s %10lld %s %s", perm, id[0], id[1], e->size, mtime, shown);
	if (e->type == 'l' && e->link_target) {
		_cleanup_free_ char *target = sbx_term_safe(e->link_target);
		fprintf(f, " -> %s", target);
	}
	fputc('\n', f);
}

long long sbx_fs_parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!p)
		return 0;
	long long t = (long long)timegm(&tm);
	if (*p == '.')
		p += 1 + strspn(p + 1, "0123456789");
	if ((*p == '+' || *p == '-') && strlen(p) >= 6) {
		long off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600L +
			((p[4] - '0') * 10 + (p[5] - '0')) * 60L;
		t += *p == '+' ? -off : off;
	}
	return t;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct sbx_fs_entry *)a)->path,
		      ((const struct sbx_fs_entry *)b)->path);
}

int sbx_fs_emit_sorted(struct sbx_fs_entry *v, size_t n, const struct sbx_fs_op *op,
		       struct sbx_err *err)
{
	if (n)
		qsort(v, n, sizeof(*v), by_path);
	for (size_t i = 0; i < n; i++)
		if (op->entry && op->entry(op->arg, &v[i], err) < 0)
			return -1;
	return 0;
}
