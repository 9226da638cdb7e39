/* sbx mcp's tools: their schemas, checking a call's arguments, and each tool as the verb it
 * runs (exec --json, fs, cp, ps, logs, kill, create, ls, inspect, preview, pause, resume, rm). */
#define _GNU_SOURCE
#include "cmd/mcp.h"

#include <ctype.h>
#include <time.h>

#include "core/strbuf.h"

/* what a verb may print that sbx mcp reads at most (an exec's JSON with two 1 MiB streams,
 * escaped, fits many times over) */
#define OUT_CAP (64u << 20)
/* files through fs_read, fs_write, fs_edit, file_upload, file_download */
#define FILE_CAP (16u << 20)
/* what sandbox_logs returns at most: the end of the log */
#define LOGS_CAP (1u << 20)

struct call {
	struct mcp_server *s;
	json_t *args;
	const char *sb;
	json_t *out;   /* the structured result */
	json_t *error; /* or the tool's failure: {"code", "message"} */
};

struct av {
	char **v;
	size_t n;
};

_printf_(2, 3) static void av_add(struct av *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		sbx_bug(__FILE__, __LINE__, "out of memory");
	va_end(ap);
	strv_push(&a->v, &a->n, s);
}

static void av_free(struct av *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

static void fail(struct call *c, const char *code, const char *fmt, ...) _printf_(3, 4);
static void fail(struct call *c, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		sbx_bug(__FILE__, __LINE__, "out of memory");
	va_end(ap);
	json_decref(c->error);
	c->error = json_pack("{s:s,s:s}", "code", code, "message", msg);
	free(msg);
}

static const char *arg_str(struct call *c, const char *key)
{
	return sbx_json_str(c->args, key);
}

static bool arg_bool(struct call *c, const char *key)
{
	return json_is_true(json_object_get(c->args, key));
}

/* runs the verb; 0 when it exited 0, else -1 with c->error set from what it reported */
static int run(struct call *c, struct av *a, const void *in, size_t in_len, size_t cap,
	       struct mcp_run *r)
{
	struct sbx_err err = { 0 };

	if (mcp_run_verb(c->s->ctx, a->v, in, in_len, cap, r, &err) < 0) {
		fail(c, "internal", "%s", err.msg);
		return -1;
	}
	if (r->status == 0)
		return 0;
	json_decref(c->error);
	c->error = mcp_run_error(r);
	mcp_run_release(r);
	return -1;
}

/* runs the verb and parses the JSON it printed */
static json_t *run_json(struct call *c, struct av *a)
{
	struct mcp_run r;

	if (run(c, a, NULL, 0, OUT_CAP, &r) < 0)
		return NULL;
	json_t *j = r.out_total > r.out_len ? NULL : json_loadb(r.out, r.out_len, 0, NULL);
	if (!j)
		fail(c, "internal", "'sbx %s' printed no JSON that could be read", a->v[0]);
	mcp_run_release(&r);
	return j;
}

/* --- the tools ------------------------------------------------------------------------------ */

static int t_create(struct call *c)
{
	static const char *const str[] = { "image", "name",    "net",	   "memory", "ttl",
					   "disk",  "workdir", "provider", NULL };
	struct av a = { 0 };
	const char *k;
	json_t *v;

	av_add(&a, "create");
	av_add(&a, "--json");
	for (int i = 0; str[i]; i++)
		if (arg_str(c, str[i]))
			av_add(&a, "--%s=%s", str[i], arg_str(c, str[i]));
	if ((v = json_object_get(c->args, "cpus")))
		av_add(&a, "--cpus=%g", json_number_value(v));
	if ((v = json_object_get(c->args, "pids_limit")))
		av_add(&a, "--pids-limit=%lld", (long long)json_integer_value(v));
	json_object_foreach (json_object_get(c->args, "labels"), k, v)
		av_add(&a, "--label=%s=%s", k, json_string_value(v));
	json_object_foreach (json_object_get(c->args, "env"), k, v)
		av_add(&a, "--env=%s=%s", k, json_string_value(v));
	c->out = run_json(c, &a);
	av_free(&a);
	return 0;
}

static int t_ls(struct call *c)
{
	struct av a = { 0 };

	av_add(&a, "ls");
	av_add(&a, "--json");
	json_t *j = run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "sandboxes", j);
	av_free(&a);
	return 0;
}

static int t_inspect(struct call *c)
{
	struct av a = { 0 };

	av_add(&a, "inspect");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	json_t *j = run_json(c, &a);
	if (json_is_array(j)) {
		c->out = json_incref(json_array_get(j, 0));
		json_decref(j);
	} else {
		c->out = j;
	}
	av_free(&a);
	return 0;
}

static int t_exec(struct call *c)
{
	json_t *cmd = json_object_get(c->args, "command"), *v;
	struct av a = { 0 };
	const char *k;

	av_add(&a, "exec");
	av_add(&a, "--json");
	if ((v = json_object_get(c->args, "timeout")))
		json_is_string(v) ? av_add(&a, "--timeout=%s", json_string_value(v))
				  : av_add(&a, "--timeout=%gs", json_number_value(v));
	if ((v = json_object_get(c->args, "max_output")))
		json_is_string(v)
			? av_add(&a, "--max-output=%s", json_string_value(v))
			: av_add(&a, "--max-output=%lld", (long long)json_integer_value(v));
	if (arg_str(c, "workdir"))
		av_add(&a, "--workdir=%s", arg_str(c, "workdir"));
	if (arg_str(c, "user"))
		av_add(&a, "--user=%s", arg_str(c, "user"));
	json_object_foreach (json_object_get(c->args, "env"), k, v)
		av_add(&a, "--env=%s=%s", k, json_string_value(v));
	if (json_is_string(cmd)) {
		av_add(&a, "-c");
		av_add(&a, "%s", json_string_value(cmd));
	}
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	if (json_is_array(cmd)) {
		size_t i;
		av_add(&a, "--");
		json_array_foreach (cmd, i, v)
			av_add(&a, "%s", json_string_value(v));
	}
	struct mcp_run r;
	struct sbx_err err = { 0 };
	if (mcp_run_verb(c->s->ctx, a.v, NULL, 0, OUT_CAP, &r, &err) < 0) {
		fail(c, "internal", "%s", err.msg);
		av_free(&a);
		return 0;
	}
	av_free(&a);
	/* the command's own exit status is data: any status with the exec object is a result */
	json_t *j = r.out_total > r.out_len ? NULL : json_loadb(r.out, r.out_len, 0, NULL);
	if (json_is_object(j) && json_object_get(j, "exit_code")) {
		c->out = j;
	} else {
		json_decref(j);
		if (r.out_total > r.out_len)
			fail(c, "io", "the command's output is over %u MiB: use max_output",
			     OUT_CAP >> 20);
		else
			c->error = mcp_run_error(&r);
	}
	mcp_run_release(&r);
	return 0;
}

/* the bytes of a file through `sbx fs read`; 0 or -1 (c->error set) */
static int read_file(struct call *c, const char *path, struct mcp_run *r)
{
	struct av a = { 0 };
	int ret = 0;

	av_add(&a, "fs");
	av_add(&a, "read");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	av_add(&a, "%s", path);
	if (run(c, &a, NULL, 0, FILE_CAP, r) < 0) {
		ret = -1;
	} else if (r->out_total > r->out_len) {
		fail(c, "invalid_argument", "'%s' is larger than %u MiB", path, FILE_CAP >> 20);
		mcp_run_release(r);
		ret = -1;
	}
	av_free(&a);
	return ret;
}

/* writes bytes to a file through `sbx fs write`; mode NULL keeps an existing file's mode */
static int write_file(struct call *c, const char *path, const char *mode, const void *data,
		      size_t n)
{
	struct av a = { 0 };
	struct mcp_run r;

	av_add(&a, "fs");
	av_add(&a, "write");
	av_add(&a, "--parents");
	if (mode)
		av_add(&a, "--mode=%s", mode);
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	av_add(&a, "%s", path);
	int ret = run(c, &a, data, n, OUT_CAP, &r);
	if (!ret)
		mcp_run_release(&r);
	av_free(&a);
	return ret;
}

/* "text" (UTF-8) or "base64" content of the arguments; NULL after c->error */
static char *content_arg(struct call *c, const char *key, bool base64, size_t *ret_n)
{
	const char *s = arg_str(c, key);

	if (!base64) {
		*ret_n = json_string_length(json_object_get(c->args, key));
		return xstrndup(s, *ret_n);
	}
	char *data = sbx_base64_decode(s, ret_n);
	if (!data)
		fail(c, "invalid_argument", "'%s' is not base64", key);
	else if (*ret_n > FILE_CAP) {
		fail(c, "invalid_argument", "'%s' is larger than %u MiB", key, FILE_CAP >> 20);
		free(data);
		data = NULL;
	}
	return data;
}

static int t_fs_read(struct call *c)
{
	const char *path = arg_str(c, "path");
	bool b64 = streq(arg_str(c, "encoding") ?: "text", "base64");
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

static int t_fs_write(struct call *c)
{
	const char *path = arg_str(c, "path");
	bool b64 = streq(arg_str(c, "encoding") ?: "text", "base64");
	size_t n;
	_cleanup_free_ char *data = content_arg(c, "content", b64, &n);

	if (data && write_file(c, path, arg_str(c, "mode"), data, n) == 0)
		c->out = json_pack("{s:s,s:I}", "path", path, "bytes", (json_int_t)n);
	return 0;
}

static int t_fs_ls(struct call *c)
{
	struct av a = { 0 };

	av_add(&a, "fs");
	av_add(&a, "ls");
	av_add(&a, "--json");
	if (arg_bool(c, "recursive"))
		av_add(&a, "-R");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	av_add(&a, "%s", arg_str(c, "path") ?: "/workspace");
	json_t *j = run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "entries", j);
	av_free(&a);
	return 0;
}

static int t_fs_edit(struct call *c)
{
	const char *path = arg_str(c, "path"), *old = arg_str(c, "old_string");
	const char *new = arg_str(c, "new_string");
	size_t olen = json_string_length(json_object_get(c->args, "old_string"));
	size_t nlen = json_string_length(json_object_get(c->args, "new_string"));
	bool all = arg_bool(c, "replace_all");
	struct mcp_run r;

	if (!olen) {
		fail(c, "invalid_argument", "old_string is empty");
		return 0;
	}
	if (olen == nlen && !memcmp(old, new, olen)) {
		fail(c, "invalid_argument", "old_string and new_string are the same");
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
			fail(c, "not_found", "old_string does not occur in '%s'", path);
		else
			fail(c, "invalid_argument",
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
		fail(c, "invalid_argument", "the edited file would be larger than %u MiB",
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

static int t_upload(struct call *c)
{
	const char *path = arg_str(c, "path");
	const char *slash = strrchr(path, '/');
	size_t n;

	if (path[0] != '/' || !slash[1] || strlen(slash + 1) > 99 || streq(slash + 1, ".") ||
	    streq(slash + 1, "..")) {
		fail(c, "invalid_argument", "path must be absolute and name a file: '%s'", path);
		return 0;
	}
	unsigned mode = 0644;
	if (arg_str(c, "mode")) {
		char *end;
		unsigned long m = strtoul(arg_str(c, "mode"), &end, 8);
		if (*end || m > 07777 || !*arg_str(c, "mode")) {
			fail(c, "invalid_argument", "mode must be octal, as 0644");
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
	av_add(&a, "cp");
	av_add(&a, "--");
	av_add(&a, "-");
	av_add(&a, "%s:%.*s", c->sb, slash == path ? 1 : (int)(slash - path), path);
	if (run(c, &a, tar.buf, tar.len, OUT_CAP, &r) == 0) {
		mcp_run_release(&r);
		c->out = json_pack("{s:s,s:I}", "path", path, "bytes", (json_int_t)n);
	}
	av_free(&a);
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

static int t_download(struct call *c)
{
	const char *path = arg_str(c, "path");
	struct av a = { 0 };
	struct mcp_run r;

	av_add(&a, "cp");
	av_add(&a, "--");
	av_add(&a, "%s:%s", c->sb, path);
	av_add(&a, "-");
	int ret = run(c, &a, NULL, 0, FILE_CAP + 64 * 1024, &r);
	av_free(&a);
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
				fail(c, "invalid_argument", "'%s' is larger than %u MiB", path,
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
			fail(c, "invalid_argument", "'%s' is a directory", path);
			mcp_run_release(&r);
			return 0;
		}
		off += 512 + (size + 511) / 512 * 512;
	}
	fail(c, "invalid_argument", "'%s' is not a regular file", path);
	mcp_run_release(&r);
	return 0;
}

static int t_ps(struct call *c)
{
	struct av a = { 0 };

	av_add(&a, "ps");
	av_add(&a, "--json");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	json_t *j = run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "execs", j);
	av_free(&a);
	return 0;
}

static int t_logs(struct call *c)
{
	struct av a = { 0 };
	struct mcp_run r;

	av_add(&a, "logs");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	if (arg_str(c, "exec_id"))
		av_add(&a, "%s", arg_str(c, "exec_id"));
	if (run(c, &a, NULL, 0, OUT_CAP, &r) == 0) {
		size_t skip = r.out_len > LOGS_CAP ? r.out_len - LOGS_CAP : 0;
		_cleanup_free_ char *text = mcp_utf8_clean(r.out + skip, r.out_len - skip, NULL);
		c->out = json_pack("{s:s,s:I,s:b}", "logs", text, "bytes", (json_int_t)r.out_total,
				   "truncated", skip || r.out_total > r.out_len);
		mcp_run_release(&r);
	}
	av_free(&a);
	return 0;
}

static int t_kill(struct call *c)
{
	const char *exec = arg_str(c, "exec_id"), *sig = arg_str(c, "signal");
	struct av a = { 0 };
	struct mcp_run r;

	av_add(&a, "kill");
	if (sig)
		av_add(&a, "--signal=%s", sig);
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	if (exec)
		av_add(&a, "%s", exec);
	if (run(c, &a, NULL, 0, OUT_CAP, &r) == 0) {
		c->out = json_pack("{s:s,s:s?,s:s}", "sandbox", c->sb, "exec_id", exec, "signal",
				   sig ? sig : "SIGKILL");
		mcp_run_release(&r);
	}
	av_free(&a);
	return 0;
}

static int t_preview(struct call *c)
{
	struct av a = { 0 };

	av_add(&a, "preview");
	av_add(&a, "--json");
	if (arg_bool(c, "public"))
		av_add(&a, "--public");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	av_add(&a, "%lld", (long long)json_integer_value(json_object_get(c->args, "port")));
	c->out = run_json(c, &a);
	av_free(&a);
	return 0;
}

/* pause, resume, rm: the verb, then what the sandbox is now */
static int simple(struct call *c, const char *verb, bool force)
{
	struct av a = { 0 };
	struct mcp_run r;

	av_add(&a, "%s", verb);
	if (force)
		av_add(&a, "--force");
	av_add(&a, "--");
	av_add(&a, "%s", c->sb);
	int ret = run(c, &a, NULL, 0, OUT_CAP, &r);
	av_free(&a);
	if (ret < 0)
		return 0;
	mcp_run_release(&r);
	if (streq(verb, "rm")) {
		c->out = json_pack("{s:s,s:b}", "sandbox", c->sb, "removed", 1);
		return 0;
	}
	t_inspect(c);
	if (c->out) {
		json_t *o = json_pack("{s:s,s:s}", "id", sbx_json_str(c->out, "id") ?: c->sb,
				      "state", sbx_json_str(c->out, "state") ?: "unknown");
		json_decref(c->out);
		c->out = o;
	}
	return 0;
}

static int t_pause(struct call *c)
{
	return simple(c, "pause", false);
}

static int t_resume(struct call *c)
{
	return simple(c, "resume", false);
}

static int t_rm(struct call *c)
{
	return simple(c, "rm", arg_bool(c, "force"));
}

/* --- the table ------------------------------------------------------------------------------ */

enum {
	T_SB = 1,      /* takes a sandbox (fixed with --sandbox) */
	T_GLOBAL = 2,  /* reaches other sandboxes: not offered with --sandbox */
	T_RO = 4,      /* reads only */
	T_DESTROY = 8, /* may destroy what it touches */
};

#define S(x) "{\"type\":\"" x "\"}"
#define D(t, d) "{\"type\":\"" t "\",\"description\":\"" d "\"}"
#define STRMAP "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}"
#define PATHP "\"path\":" D("string", "absolute path inside the sandbox")
#define ENC                                                                                 \
	"\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"],\"description\":" \
	"\"text (UTF-8, the default) or base64\"}"

struct tool {
	const char *name, *title, *desc;
	const char *props;    /* inputSchema properties, without "sandbox" */
	const char *required; /* without "sandbox" */
	const char *out;      /* outputSchema properties of a success */
	const char *out_required;
	unsigned flags;
	int (*call)(struct call *c);
};

static const struct tool tools[] = {
	{ "sandbox_create", "Create a sandbox",
	  "Create a disposable sandbox (sbx create) and return its record; its id is what the "
	  "other tools take.",
	  "\"image\":" D("string", "OCI image reference (default: the host's system, read-only)") ",\"name\":" D("string", "a unique name") ",\"net\":" D("string", "none, open, or allow=DOMAIN[:PORT],...") ",\"memory\":" D(
		  "string",
		  "memory limit: 256m, 1g") ",\"cpus\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"CPU quota\"}"
					    ",\"ttl\":" D("string", "idle time before the sandbox is paused: 30m, 2h") ",\"disk\":" D(
						    "string",
						    "at most this much written: 512m, 10g") ",\"pids_limit\":{\"type\":\"integer\",\"minimum\":1}"
											    ",\"workdir\":" D("string", "default working directory") ",\"provider\":" D(
												    "string",
												    "local (default), e2b, daytona") ",\"labels\":" STRMAP
																     ",\"description\":\"labels K: V\"}"
																     ",\"env\":" STRMAP
																     ",\"description\":\"variables of every exec\"}",
	  "", "\"id\":" S("string") ",\"state\":" S("string"), "\"id\"", T_GLOBAL, t_create },
	{ "sandbox_ls", "List sandboxes", "List the sandboxes (sbx ls --json).", "", "",
	  "\"sandboxes\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}", "\"sandboxes\"",
	  T_GLOBAL | T_RO, t_ls },
	{ "sandbox_inspect", "Inspect a sandbox", "The sandbox's record: state, options, limits.",
	  "", "", "\"id\":" S("string") ",\"state\":" S("string"), "\"id\"", T_SB | T_RO,
	  t_inspect },
	{ "sandbox_exec", "Run a command",
	  "Run a command in the sandbox and wait for it (sbx exec --json): exit code, stdout, "
	  "stderr, duration. stdin is empty.",
	  "\"command\":{\"description\":\"argv array, or a string run with /bin/sh -c\","
	  "\"anyOf\":[{\"type\":\"string\",\"minLength\":1},{\"type\":\"array\",\"minItems\":1,"
	  "\"items\":{\"type\":\"string\"}}]}"
	  ",\"timeout\":{\"type\":[\"string\",\"number\"],\"description\":\"kill the command "
	  "after this: 30s, 5m, or seconds\"}"
	  ",\"workdir\":" D("string", "working directory") ",\"user\":" D(
		  "string",
		  "USER[:GROUP] to run as") ",\"env\":" STRMAP ",\"description\":\"variables\"}"
					    ",\"max_output\":{\"type\":[\"string\",\"integer\"],\"description\":\"bytes kept of "
					    "each stream (default 1 MiB): 10k, 4M\"}",
	  "\"command\"",
	  "\"exit_code\":" S(
		  "integer") ",\"signal\":{\"type\":[\"string\",\"null\"]}"
			     ",\"timed_out\":" S("boolean") ",\"oom_killed\":" S("boolean") ",\"duration_ms\":" S(
				     "number") ",\"cpu_ms\":{\"type\":[\"number\",\"null\"]}"
					       ",\"peak_memory_bytes\":{\"type\":[\"integer\",\"null\"]}"
					       ",\"stdout\":" S(
						       "string") ",\"stdout_encoding\":{\"enum\":[\"utf-8\",\"base64\"]}"
								 ",\"stdout_truncated\":" S("boolean") ",\"stdout_bytes\":" S("integer") ",\"stderr\":" S(
									 "string") ",\"stderr_encoding\":{\"enum\":[\"utf-8\",\"base64\"]}"
										   ",\"stderr_truncated\":" S("boolean") ",\"stderr_bytes\":" S(
											   "integer"),
	  "\"exit_code\",\"stdout\",\"stderr\"", T_SB | T_DESTROY, t_exec },
	{ "fs_read", "Read a file", "Read a file of the sandbox (up to 16 MiB).", PATHP "," ENC,
	  "\"path\"",
	  "\"path\":" S("string") ",\"encoding\":{\"enum\":[\"text\",\"base64\"]},\"content\":" S(
		  "string") ",\"size\":" S("integer"),
	  "\"path\",\"encoding\",\"content\"", T_SB | T_RO, t_fs_read },
	{ "fs_write", "Write a file",
	  "Write a file of the sandbox (parents made; up to 16 MiB): its whole content.",
	  PATHP ",\"content\":" S(
		  "string") "," ENC
			    ",\"mode\":{\"type\":\"string\",\"pattern\":\"^[0-7]{3,4}$\",\"description\":\"octal, "
			    "default 0644 (an existing file keeps its own)\"}",
	  "\"path\",\"content\"", "\"path\":" S("string") ",\"bytes\":" S("integer"),
	  "\"path\",\"bytes\"", T_SB | T_DESTROY, t_fs_write },
	{ "fs_ls", "List a directory", "List a directory of the sandbox (sbx fs ls --json).",
	  "\"path\":" D("string", "directory (default /workspace)") ",\"recursive\":" S("boolean"),
	  "", "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}", "\"entries\"",
	  T_SB | T_RO, t_fs_ls },
	{ "fs_edit", "Edit a file",
	  "Replace old_string by new_string in a text file of the sandbox. old_string must occur "
	  "exactly once, unless replace_all.",
	  PATHP ",\"old_string\":{\"type\":\"string\",\"minLength\":1},\"new_string\":" S(
		  "string") ",\"replace_all\":" S("boolean"),
	  "\"path\",\"old_string\",\"new_string\"",
	  "\"path\":" S("string") ",\"replacements\":" S("integer"), "\"path\",\"replacements\"",
	  T_SB | T_DESTROY, t_fs_edit },
	{ "file_upload", "Upload a file",
	  "Put a small file (base64, up to 16 MiB) into the sandbox, through sbx cp; its "
	  "directory must exist.",
	  PATHP ",\"content_base64\":" S("string") ",\"mode\":{\"type\":\"string\",\"pattern\":"
						   "\"^[0-7]{3,4}$\"}",
	  "\"path\",\"content_base64\"", "\"path\":" S("string") ",\"bytes\":" S("integer"),
	  "\"path\",\"bytes\"", T_SB | T_DESTROY, t_upload },
	{ "file_download", "Download a file",
	  "Get a small file (up to 16 MiB) of the sandbox as base64, through sbx cp.", PATHP,
	  "\"path\"",
	  "\"path\":" S("string") ",\"content_base64\":" S("string") ",\"size\":" S("integer"),
	  "\"path\",\"content_base64\"", T_SB | T_RO, t_download },
	{ "sandbox_ps", "List background commands",
	  "The sandbox's detached commands, running and finished (sbx ps --json).", "", "",
	  "\"execs\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}", "\"execs\"",
	  T_SB | T_RO, t_ps },
	{ "sandbox_logs", "Read logs",
	  "Output of the sandbox's detached commands, or of one (exec_id); the last MiB.",
	  "\"exec_id\":" D("string", "one command's id (sbx exec -d printed it)"), "",
	  "\"logs\":" S("string") ",\"bytes\":" S("integer") ",\"truncated\":" S("boolean"),
	  "\"logs\"", T_SB | T_RO, t_logs },
	{ "sandbox_kill", "Signal commands",
	  "Signal one detached command's process group, or every process of the sandbox.",
	  "\"exec_id\":" S("string") ",\"signal\":" D("string", "SIGKILL (default), SIGTERM, ..."),
	  "", "\"sandbox\":" S("string") ",\"signal\":" S("string"), "\"sandbox\"",
	  T_SB | T_DESTROY, t_kill },
	{ "sandbox_preview", "Open a port",
	  "Make a port inside the sandbox reachable from the host; returns its URL.",
	  "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},\"public\":" D(
		  "boolean", "listen on every interface (the URL carries a token)"),
	  "\"port\"", "\"url\":" S("string"), "\"url\"", T_SB, t_preview },
	{ "sandbox_pause", "Pause", "Freeze the sandbox's processes.", "", "",
	  "\"id\":" S("string") ",\"state\":" S("string"), "\"state\"", T_SB, t_pause },
	{ "sandbox_resume", "Resume", "Resume a paused, released or stopped sandbox.", "", "",
	  "\"id\":" S("string") ",\"state\":" S("string"), "\"state\"", T_SB, t_resume },
	{ "sandbox_rm", "Remove a sandbox", "Remove a sandbox and everything in it.",
	  "\"force\":" D("boolean", "even when it is running"), "",
	  "\"sandbox\":" S("string") ",\"removed\":" S("boolean"), "\"removed\"",
	  T_SB | T_GLOBAL | T_DESTROY, t_rm },
	{ NULL },
};

static bool offered(const struct mcp_server *s, const struct tool *t)
{
	return !(s->bound_id && (t->flags & T_GLOBAL));
}

static json_t *input_schema(const struct mcp_server *s, const struct tool *t)
{
	bool sb = (t->flags & T_SB) && !s->bound_id;
	_cleanup_free_ char *text = xasprintf(
		"{\"type\":\"object\",\"properties\":{%s%s%s},\"required\":[%s%s%s],"
		"\"additionalProperties\":false}",
		sb ? "\"sandbox\":{\"type\":\"string\",\"description\":\"the sandbox's id or "
		     "name\"}"
		   : "",
		sb && *t->props ? "," : "", t->props, sb ? "\"sandbox\"" : "",
		sb && *t->required ? "," : "", t->required);
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);
	if (!j)
		sbx_bug(__FILE__, __LINE__, t->name);
	return j;
}

/* a success's properties, or {"error": {"code", "message"}} */
static json_t *output_schema(const struct tool *t)
{
	_cleanup_free_ char *text = xasprintf(
		"{\"type\":\"object\",\"properties\":{%s,\"error\":{\"type\":\"object\","
		"\"properties\":{\"code\":{\"type\":\"string\"},\"message\":{\"type\":"
		"\"string\"}},\"required\":[\"code\",\"message\"]}},\"anyOf\":[{\"required\":"
		"[%s]},{\"required\":[\"error\"]}]}",
		t->out, t->out_required);
	json_t *j = json_loads(text, 0, NULL);
	if (!j)
		sbx_bug(__FILE__, __LINE__, t->name);
	return j;
}

json_t *mcp_tools_list(const struct mcp_server *s)
{
	json_t *list = json_array();

	for (const struct tool *t = tools; t->name; t++) {
		if (!offered(s, t))
			continue;
		json_array_append_new(list,
				      json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}",
						"name", t->name, "title", t->title, "description",
						t->desc, "inputSchema", input_schema(s, t),
						"outputSchema", output_schema(t), "annotations",
						"title", t->title, "readOnlyHint",
						(t->flags & T_RO) != 0, "destructiveHint",
						(t->flags & T_DESTROY) != 0, "idempotentHint",
						(t->flags & T_RO) != 0, "openWorldHint", 0));
	}
	return list;
}

static bool id_ok(const char *s)
{
	if (!*s || *s == '-' || strlen(s) > 128)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

json_t *mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, int *ret_code,
		       char **ret_msg)
{
	const struct tool *t = tools;
	_cleanup_json_ json_t *empty = json_object();

	while (t->name && !streq(t->name, name))
		t++;
	if (!t->name || !offered(s, t)) {
		_cleanup_free_ char *safe = mcp_utf8_clean(name, strlen(name), NULL);
		*ret_code = MCP_INVALID_PARAMS;
		*ret_msg = xasprintf("unknown tool: %.200s", safe);
		return NULL;
	}
	_cleanup_json_ json_t *schema = input_schema(s, t);
	if (mcp_schema_check(schema, args ? args : empty, "arguments", ret_msg) < 0) {
		*ret_code = MCP_INVALID_PARAMS;
		return NULL;
	}
	struct call c = { .s = s, .args = args ? args : empty };
	if (t->flags & T_SB)
		c.sb = s->bound_id ? s->bound_id : sbx_json_str(c.args, "sandbox");
	const char *eid = sbx_json_str(c.args, "exec_id");
	if (c.sb && !id_ok(c.sb))
		fail(&c, "invalid_argument", "'%s' is not a sandbox id or name", c.sb);
	else if (eid && !id_ok(eid))
		fail(&c, "invalid_argument", "'%s' is not an exec id", eid);
	else
		t->call(&c);
	if (!c.out && !c.error)
		fail(&c, "internal", "%s gave no result", t->name);
	json_t *sc = c.out ? c.out : json_pack("{s:o}", "error", c.error);
	if (c.out)
		json_decref(c.error);
	_cleanup_free_ char *text = json_dumps(sc, JSON_COMPACT);
	return json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text",
			 text ? text : "{}", "structuredContent", sc, "isError", c.out == NULL);
}
