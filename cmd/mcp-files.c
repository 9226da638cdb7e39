/* sbx mcp's file tools: fs_read, fs_write, fs_ls, fs_edit (sbx fs), and file_upload,
 * file_download (sbx cp with a one-file tar stream). */
#define _GNU_SOURCE
#include "cmd/mcp.h"

#include <time.h>

#include "core/strbuf.h"

/* the bytes of a file through `sbx fs read`; 0 or -1 (c->error set) */
static int read_file(struct call *c, const char *path, struct mcp_run *r)
{
	struct av a = { 0 };
	int ret = 0;

	mcp_av_add(&a, "fs");
	mcp_av_add(&a, "read");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	mcp_av_add(&a, "%s", path);
	if (mcp_run(c, &a, NULL, 0, FILE_CAP, r) < 0) {
		ret = -1;
	} else if (r->out_total > r->out_len) {
		mcp_fail(c, "invalid_argument", "'%s' is larger than %u MiB", path, FILE_CAP >> 20);
		mcp_run_release(r);
		ret = -1;
	}
	mcp_av_free(&a);
	return ret;
}

/* writes bytes to a file through `sbx fs write`; mode NULL keeps an existing file's mode */
static int write_file(struct call *c, const char *path, const char *mode, const void *data,
		      size_t n)
{
	struct av a = { 0 };
	struct mcp_run r;

	mcp_av_add(&a, "fs");
	mcp_av_add(&a, "write");
	mcp_av_add(&a, "--parents");
	if (mode)
		mcp_av_add(&a, "--mode=%s", mode);
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	mcp_av_add(&a, "%s", path);
	int ret = mcp_run(c, &a, data, n, OUT_CAP, &r);
	if (!ret)
		mcp_run_release(&r);
	mcp_av_free(&a);
	return ret;
}

/* "text" (UTF-8) or "base64" content of the arguments; NULL after c->error */
static char *content_arg(struct call *c, const char *key, bool base64, size_t *ret_n)
{
	const char *s = mcp_arg_str(c, key);

	if (!base64) {
		/* a JSON string may hold U+0000: its length, not strlen */
		*ret_n = json_string_length(json_object_get(c->args, key));
		char *copy = xmalloc(*ret_n + 1);
		memcpy(copy, s, *ret_n);
		copy[*ret_n] = '\0';
		return copy;
	}
	char *data = sbx_base64_decode(s, ret_n);
	if (!data)
		mcp_fail(c, "invalid_argument", "'%s' is not base64", key);
	else if (*ret_n > FILE_CAP) {
		mcp_fail(c, "invalid_argument", "'%s' is larger than %u MiB", key, FILE_CAP >> 20);
		free(data);
		data = NULL;
	}
	return data;
}

int mcp_t_fs_read(struct call *c)
{
	const char *path = mcp_arg_str(c, "path");
	bool b64 = streq(mcp_arg_str(c, "encoding") ?: "text", "base64");
	struct mcp_run r;
	bool clean = false;

	if (read_file(c, path, &r) < 0)
		return 0;
	_cleanup_free_ char *text = b64 ? NULL : mcp_utf8_clean(r.out, r.out_len, &clean);
	if (!b64 && clean && strlen(text) == r.out_len) {
		c->out = json_pack("{s:s,s:s,s:s,s:I}", "path", path, "encoding", "text", "content",
				   text, "size", (json_int_t)r.out_len);
	} else {
		/* asked for, or bytes that are no text */
		_cleanup_free_ char *enc = sbx_base64_encode(r.out, r.out_len);
		c->out = json_pack("{s:s,s:s,s:s,s:I}", "path", path, "encoding", "base64",
				   "content", enc, "size", (json_int_t)r.out_len);
	}
	mcp_run_release(&r);
	return 0;
}

int mcp_t_fs_write(struct call *c)
{
	const char *path = mcp_arg_str(c, "path");
	bool b64 = streq(mcp_arg_str(c, "encoding") ?: "text", "base64");
	size_t n;
	_cleanup_free_ char *data = content_arg(c, "content", b64, &n);

	if (data && write_file(c, path, mcp_arg_str(c, "mode"), data, n) == 0)
		c->out = json_pack("{s:s,s:I}", "path", path, "bytes", (json_int_t)n);
	return 0;
}

int mcp_t_fs_ls(struct call *c)
{
	struct av a = { 0 };

	mcp_av_add(&a, "fs");
	mcp_av_add(&a, "ls");
	mcp_av_add(&a, "--json");
	if (mcp_arg_bool(c, "recursive"))
		mcp_av_add(&a, "-R");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	mcp_av_add(&a, "%s", mcp_arg_str(c, "path") ?: "/workspace");
	json_t *j = mcp_run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "entries", j);
	mcp_av_free(&a);
	return 0;
}

int mcp_t_fs_edit(struct call *c)
{
	const char *path = mcp_arg_str(c, "path"), *old = mcp_arg_str(c, "old_string");
	const char *new = mcp_arg_str(c, "new_string");
	size_t olen = json_string_length(json_object_get(c->args, "old_string"));
	size_t nlen = json_string_length(json_object_get(c->args, "new_string"));
	bool all = mcp_arg_bool(c, "replace_all");
	struct mcp_run r;

	if (!olen) {
		mcp_fail(c, "invalid_argument", "old_string is empty");
		return 0;
	}
	if (olen == nlen && !memcmp(old, new, olen)) {
		mcp_fail(c, "invalid_argument", "old_string and new_string are the same");
		return 0;
	}
	if (read_file(c, path, &r) < 0)
		return 0;
	size_t count = 0;
	for (const char *p = r.out, *end = r.out + r.out_len;
	     (p = memmem(p, (size_t)(end - p), old, olen)); p += olen)
		count++;
	if (count == 0 || (count > 1 && !all)) {
		if (count == 0)
			mcp_fail(c, "not_found", "old_string does not occur in '%s'", path);
		else
			mcp_fail(c, "invalid_argument",
				 "old_string occurs %zu times in '%s': give more context, or "
				 "replace_all",
				 count, path);
		mcp_run_release(&r);
		return 0;
	}
	struct strbuf sb = STRBUF_INIT;
	const char *p = r.out, *end = r.out + r.out_len, *hit;
	while ((hit = memmem(p, (size_t)(end - p), old, olen))) {
		strbuf_add(&sb, p, (size_t)(hit - p));
		strbuf_add(&sb, new, nlen);
		p = hit + olen;
	}
	strbuf_add(&sb, p, (size_t)(end - p));
	if (sb.len > FILE_CAP)
		mcp_fail(c, "invalid_argument", "the edited file would be larger than %u MiB",
			 FILE_CAP >> 20);
	else if (write_file(c, path, NULL, sb.buf, sb.len) == 0)
		c->out = json_pack("{s:s,s:I}", "path", path, "replacements", (json_int_t)count);
	strbuf_release(&sb);
	mcp_run_release(&r);
	return 0;
}

/* a ustar archive of one regular file */
static void tar_one(struct strbuf *sb, const char *name, unsigned mode, const char *data, size_t n)
{
	char h[512] = { 0 };
	unsigned sum = 0;

	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", mode & 07777);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011llo", (unsigned long long)n);
	snprintf(h + 136, 12, "%011llo", (unsigned long long)time(NULL));
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	strbuf_add(sb, h, 512);
	strbuf_add(sb, data, n);
	char zero[1024] = { 0 };
	strbuf_add(sb, zero, (512 - n % 512) % 512);
	strbuf_add(sb, zero, 1024);
}

int mcp_t_upload(struct call *c)
{
	const char *path = mcp_arg_str(c, "path");
	const char *slash = strrchr(path, '/');
	size_t n;

	if (path[0] != '/' || !slash[1] || strlen(slash + 1) > 99 || streq(slash + 1, ".") ||
	    streq(slash + 1, "..")) {
		mcp_fail(c, "invalid_argument", "path must be absolute and name a file: '%s'",
			 path);
		return 0;
	}
	unsigned mode = 0644;
	if (mcp_arg_str(c, "mode")) {
		char *end;
		unsigned long m = strtoul(mcp_arg_str(c, "mode"), &end, 8);
		if (*end || m > 07777 || !*mcp_arg_str(c, "mode")) {
			mcp_fail(c, "invalid_argument", "mode must be octal, as 0644");
			return 0;
		}
		mode = (unsigned)m;
	}
	_cleanup_free_ char *data = content_arg(c, "content_base64", true, &n);
	if (!data)
		return 0;
	struct strbuf tar = STRBUF_INIT;
	tar_one(&tar, slash + 1, mode, data, n);
	struct av a = { 0 };
	struct mcp_run r;
	mcp_av_add(&a, "cp");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "-");
	mcp_av_add(&a, "%s:%.*s", c->sb, slash == path ? 1 : (int)(slash - path), path);
	if (mcp_run(c, &a, tar.buf, tar.len, OUT_CAP, &r) == 0) {
		mcp_run_release(&r);
		c->out = json_pack("{s:s,s:I}", "path", path, "bytes", (json_int_t)n);
	}
	mcp_av_free(&a);
	strbuf_release(&tar);
	return 0;
}

static unsigned long long tar_num(const char *f, size_t n)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < n && f[i] >= '0' && f[i] <= '7'; i++)
		v = v * 8 + (unsigned)(f[i] - '0');
	return v;
}

int mcp_t_download(struct call *c)
{
	const char *path = mcp_arg_str(c, "path");
	struct av a = { 0 };
	struct mcp_run r;

	mcp_av_add(&a, "cp");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s:%s", c->sb, path);
	mcp_av_add(&a, "-");
	int ret = mcp_run(c, &a, NULL, 0, FILE_CAP + 64 * 1024, &r);
	mcp_av_free(&a);
	if (ret < 0)
		return 0;
	/* the first entry that is a file; extended headers (pax, GNU long names) skipped */
	for (size_t off = 0; off + 512 <= r.out_len;) {
		const char *h = r.out + off;
		unsigned long long size = tar_num(h + 124, 12);
		if (!h[0])
			break;
		if (h[156] == '0' || h[156] == '\0') {
			if (off + 512 + size > r.out_len) {
				mcp_fail(c, "invalid_argument", "'%s' is larger than %u MiB", path,
					 FILE_CAP >> 20);
			} else {
				_cleanup_free_ char *enc = sbx_base64_encode(h + 512, size);
				c->out = json_pack("{s:s,s:s,s:I}", "path", path, "content_base64",
						   enc, "size", (json_int_t)size);
			}
			mcp_run_release(&r);
			return 0;
		}
		if (h[156] == '5') {
			mcp_fail(c, "invalid_argument", "'%s' is a directory", path);
			mcp_run_release(&r);
			return 0;
		}
		off += 512 + (size + 511) / 512 * 512;
	}
	mcp_fail(c, "invalid_argument", "'%s' is not a regular file", path);
	mcp_run_release(&r);
	return 0;
}
