/* sbx mcp's tools: their schemas, checking a call's arguments, and each tool as the verb it
 * runs (exec --json, fs, cp, ps, logs, kill, create, ls, inspect, preview, pause, resume, rm). */
#define _GNU_SOURCE
#include "cmd/mcp.h"

#include <ctype.h>
#include <time.h>

#include "core/strbuf.h"

_printf_(2, 3) void mcp_av_add(struct av *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		sbx_bug(__FILE__, __LINE__, "out of memory");
	va_end(ap);
	strv_push(&a->v, &a->n, s);
}

void mcp_av_free(struct av *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
}

void mcp_fail(struct call *c, const char *code, const char *fmt, ...) _printf_(3, 4);
void mcp_fail(struct call *c, const char *code, const char *fmt, ...)
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

const char *mcp_arg_str(struct call *c, const char *key)
{
	return sbx_json_str(c->args, key);
}

bool mcp_arg_bool(struct call *c, const char *key)
{
	return json_is_true(json_object_get(c->args, key));
}

/* runs the verb; 0 when it exited 0, else -1 with c->error set from what it reported */
int mcp_run(struct call *c, struct av *a, const void *in, size_t in_len, size_t cap,
	    struct mcp_run *r)
{
	struct sbx_err err = { 0 };

	if (mcp_run_verb(c->s->ctx, a->v, in, in_len, cap, r, &err) < 0) {
		mcp_fail(c, "internal", "%s", err.msg);
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
json_t *mcp_run_json(struct call *c, struct av *a)
{
	struct mcp_run r;

	if (mcp_run(c, a, NULL, 0, OUT_CAP, &r) < 0)
		return NULL;
	json_t *j = r.out_total > r.out_len ? NULL
					    : json_loadb(r.out, r.out_len, JSON_ALLOW_NUL, NULL);
	if (!j)
		mcp_fail(c, "internal", "'sbx %s' printed no JSON that could be read", a->v[0]);
	mcp_run_release(&r);
	return j;
}

/* --- the tools ------------------------------------------------------------------------------ */

static int t_create(struct call *c)
{
	static const char *const str[] = { "image", "name",    "net",	   "memory",  "ttl",
					   "disk",  "workdir", "provider", "runtime", NULL };
	struct av a = { 0 };
	const char *k;
	json_t *v;

	const char *net = mcp_arg_str(c, "net");

	/* what sbx create calls unsafe (--net host: the host's network) is the CLI's alone */
	if (net && !streq(net, "none") && !streq(net, "open") && !startswith(net, "allow=")) {
		mcp_fail(c, "invalid_argument",
			 "net must be none, open or allow=DOMAIN[:PORT],...");
		return 0;
	}
	mcp_av_add(&a, "create");
	mcp_av_add(&a, "--json");
	for (int i = 0; str[i]; i++)
		if (mcp_arg_str(c, str[i]))
			mcp_av_add(&a, "--%s=%s", str[i], mcp_arg_str(c, str[i]));
	if ((v = json_object_get(c->args, "cpus")))
		mcp_av_add(&a, "--cpus=%g", json_number_value(v));
	if ((v = json_object_get(c->args, "pids_limit")))
		mcp_av_add(&a, "--pids-limit=%lld", (long long)json_integer_value(v));
	json_object_foreach (json_object_get(c->args, "labels"), k, v)
		mcp_av_add(&a, "--label=%s=%s", k, json_string_value(v));
	json_object_foreach (json_object_get(c->args, "env"), k, v)
		mcp_av_add(&a, "--env=%s=%s", k, json_string_value(v));
	c->out = mcp_run_json(c, &a);
	mcp_av_free(&a);
	return 0;
}

static int t_ls(struct call *c)
{
	struct av a = { 0 };

	mcp_av_add(&a, "ls");
	mcp_av_add(&a, "--json");
	json_t *j = mcp_run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "sandboxes", j);
	mcp_av_free(&a);
	return 0;
}

static int t_inspect(struct call *c)
{
	struct av a = { 0 };

	mcp_av_add(&a, "inspect");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	json_t *j = mcp_run_json(c, &a);
	if (json_is_array(j)) {
		c->out = json_incref(json_array_get(j, 0));
		json_decref(j);
	} else {
		c->out = j;
	}
	mcp_av_free(&a);
	return 0;
}

static int t_exec(struct call *c)
{
	json_t *cmd = json_object_get(c->args, "command"), *v;
	struct av a = { 0 };
	const char *k;

	bool bg = mcp_arg_bool(c, "background");

	mcp_av_add(&a, "exec");
	mcp_av_add(&a, bg ? "--detach" : "--json");
	if ((v = json_object_get(c->args, "timeout")))
		json_is_string(v) ? mcp_av_add(&a, "--timeout=%s", json_string_value(v))
				  : mcp_av_add(&a, "--timeout=%gs", json_number_value(v));
	if ((v = json_object_get(c->args, "max_output")))
		json_is_string(v)
			? mcp_av_add(&a, "--max-output=%s", json_string_value(v))
			: mcp_av_add(&a, "--max-output=%lld", (long long)json_integer_value(v));
	if (mcp_arg_str(c, "workdir"))
		mcp_av_add(&a, "--workdir=%s", mcp_arg_str(c, "workdir"));
	if (mcp_arg_str(c, "user"))
		mcp_av_add(&a, "--user=%s", mcp_arg_str(c, "user"));
	json_object_foreach (json_object_get(c->args, "env"), k, v)
		mcp_av_add(&a, "--env=%s=%s", k, json_string_value(v));
	if (json_is_string(cmd)) {
		mcp_av_add(&a, "-c");
		mcp_av_add(&a, "%s", json_string_value(cmd));
	}
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	if (json_is_array(cmd)) {
		size_t i;
		mcp_av_add(&a, "--");
		json_array_foreach (cmd, i, v)
			mcp_av_add(&a, "%s", json_string_value(v));
	}
	struct mcp_run r;
	struct sbx_err err = { 0 };
	if (mcp_run_verb(c->s->ctx, a.v, NULL, 0, OUT_CAP, &r, &err) < 0) {
		mcp_fail(c, "internal", "%s", err.msg);
		mcp_av_free(&a);
		return 0;
	}
	mcp_av_free(&a);
	if (bg) {
		/* exec -d prints the command's id: sandbox_ps, sandbox_logs, sandbox_kill take it */
		size_t n = r.out_len;
		while (n && (r.out[n - 1] == '\n' || r.out[n - 1] == '\r'))
			n--;
		_cleanup_free_ char *id = mcp_utf8_clean(r.out, n, NULL);
		if (r.status == 0 && n)
			c->out = json_pack("{s:s}", "exec_id", id);
		else
			c->error = mcp_run_error(&r);
		mcp_run_release(&r);
		return 0;
	}
	/* the command's own exit status is data: any status with the exec object is a result */
	json_t *j = r.out_total > r.out_len ? NULL
					    : json_loadb(r.out, r.out_len, JSON_ALLOW_NUL, NULL);
	if (json_is_object(j) && json_object_get(j, "exit_code")) {
		c->out = j;
	} else {
		json_decref(j);
		if (r.out_total > r.out_len)
			mcp_fail(c, "io", "the command's output is over %u MiB: use max_output",
				 OUT_CAP >> 20);
		else
			c->error = mcp_run_error(&r);
	}
	mcp_run_release(&r);
	return 0;
}

static int t_ps(struct call *c)
{
	struct av a = { 0 };

	mcp_av_add(&a, "ps");
	mcp_av_add(&a, "--json");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	json_t *j = mcp_run_json(c, &a);
	if (j)
		c->out = json_pack("{s:o}", "execs", j);
	mcp_av_free(&a);
	return 0;
}

static int t_logs(struct call *c)
{
	struct av a = { 0 };
	struct mcp_run r;

	mcp_av_add(&a, "logs");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	if (mcp_arg_str(c, "exec_id"))
		mcp_av_add(&a, "%s", mcp_arg_str(c, "exec_id"));
	if (mcp_run(c, &a, NULL, 0, OUT_CAP, &r) == 0) {
		size_t skip = r.out_len > LOGS_CAP ? r.out_len - LOGS_CAP : 0;
		_cleanup_free_ char *text = mcp_utf8_clean(r.out + skip, r.out_len - skip, NULL);
		c->out = json_pack("{s:s,s:I,s:b}", "logs", text, "bytes", (json_int_t)r.out_total,
				   "truncated", skip || r.out_total > r.out_len);
		mcp_run_release(&r);
	}
	mcp_av_free(&a);
	return 0;
}

static int t_kill(struct call *c)
{
	const char *exec = mcp_arg_str(c, "exec_id"), *sig = mcp_arg_str(c, "signal");
	struct av a = { 0 };
	struct mcp_run r;

	mcp_av_add(&a, "kill");
	if (sig) {
		mcp_av_add(&a, "-s");
		mcp_av_add(&a, "%s", sig);
	}
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	if (exec)
		mcp_av_add(&a, "%s", exec);
	if (mcp_run(c, &a, NULL, 0, OUT_CAP, &r) == 0) {
		c->out = json_pack("{s:s,s:s?,s:s}", "sandbox", c->sb, "exec_id", exec, "signal",
				   sig ? sig : "SIGKILL");
		mcp_run_release(&r);
	}
	mcp_av_free(&a);
	return 0;
}

static int t_preview(struct call *c)
{
	struct av a = { 0 };

	mcp_av_add(&a, "preview");
	mcp_av_add(&a, "--json");
	if (mcp_arg_bool(c, "public"))
		mcp_av_add(&a, "--public");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	mcp_av_add(&a, "%lld", (long long)json_integer_value(json_object_get(c->args, "port")));
	c->out = mcp_run_json(c, &a);
	mcp_av_free(&a);
	return 0;
}

/* pause, resume, rm: the verb, then what the sandbox is now */
static int simple(struct call *c, const char *verb, bool force)
{
	struct av a = { 0 };
	struct mcp_run r;

	mcp_av_add(&a, "%s", verb);
	if (force)
		mcp_av_add(&a, "--force");
	mcp_av_add(&a, "--");
	mcp_av_add(&a, "%s", c->sb);
	int ret = mcp_run(c, &a, NULL, 0, OUT_CAP, &r);
	mcp_av_free(&a);
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
	return simple(c, "rm", mcp_arg_bool(c, "force"));
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
	const char *out_alts; /* what a success has: {"required": [...]}, ... */
	unsigned flags;
	int (*call)(struct call *c);
};

/* the schemas as JSON text; kept as laid out here (a line a property) */
/* clang-format off */
#define REQ(x) "{\"required\":[" x "]}"
static const struct tool tools[] = {
	{ "sandbox_create", "Create a sandbox",
	  "Create a disposable sandbox (sbx create) and return its record; its id is what the "
	  "other tools take.",
	  "\"image\":" D("string", "OCI image reference (default: the host's system, read-only)")
	  ",\"name\":" D("string", "a unique name")
	  ",\"net\":" D("string", "none, open, or allow=DOMAIN[:PORT],...")
	  ",\"memory\":" D("string", "memory limit: 256m, 1g")
	  ",\"cpus\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"CPU quota\"}"
	  ",\"ttl\":" D("string", "idle time before the sandbox is paused: 30m, 2h")
	  ",\"disk\":" D("string", "at most this much written: 512m, 10g")
	  ",\"pids_limit\":{\"type\":\"integer\",\"minimum\":1}"
	  ",\"workdir\":" D("string", "default working directory")
	  ",\"provider\":" D("string", "local (default), e2b, daytona")
	  ",\"runtime\":" D("string", "the provider's runtime (local: gvisor), as sbx provider ls lists them")
	  ",\"labels\":" STRMAP ",\"description\":\"labels K: V\"}"
	  ",\"env\":" STRMAP ",\"description\":\"variables of every exec\"}",
	  "",
	  "\"id\":" S("string") ",\"state\":" S("string"),
	  REQ("\"id\""),
	  T_GLOBAL, t_create },
	{ "sandbox_ls", "List sandboxes", "List the sandboxes (sbx ls --json).",
	  "", "",
	  "\"sandboxes\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}",
	  REQ("\"sandboxes\""),
	  T_GLOBAL | T_RO, t_ls },
	{ "sandbox_inspect", "Inspect a sandbox", "The sandbox's record: state, options, limits.",
	  "", "",
	  "\"id\":" S("string") ",\"state\":" S("string"),
	  REQ("\"id\""),
	  T_SB | T_RO, t_inspect },
	{ "sandbox_exec", "Run a command",
	  "Run a command in the sandbox and wait for it (sbx exec --json): exit code, stdout, "
	  "stderr, duration. stdin is empty. With background, start it detached instead.",
	  "\"command\":{\"description\":\"argv array, or a string run with /bin/sh -c\","
	  "\"anyOf\":[{\"type\":\"string\",\"minLength\":1},"
	  "{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"string\"}}]}"
	  ",\"timeout\":{\"type\":[\"string\",\"number\"],"
	  "\"description\":\"kill the command after this: 30s, 5m, or seconds\"}"
	  ",\"workdir\":" D("string", "working directory")
	  ",\"user\":" D("string", "USER[:GROUP] to run as")
	  ",\"env\":" STRMAP ",\"description\":\"variables\"}"
	  ",\"max_output\":{\"type\":[\"string\",\"integer\"],"
	  "\"description\":\"bytes kept of each stream (default 1 MiB): 10k, 4M\"}"
	  ",\"background\":" D("boolean", "start it detached and return its exec_id at once "
			       "(then: sandbox_ps, sandbox_logs, sandbox_kill)"),
	  "\"command\"",
	  "\"exit_code\":" S("integer")
	  ",\"signal\":{\"type\":[\"string\",\"null\"]}"
	  ",\"timed_out\":" S("boolean")
	  ",\"oom_killed\":" S("boolean")
	  ",\"duration_ms\":" S("number")
	  ",\"cpu_ms\":{\"type\":[\"number\",\"null\"]}"
	  ",\"peak_memory_bytes\":{\"type\":[\"integer\",\"null\"]}"
	  ",\"stdout\":" S("string")
	  ",\"stdout_encoding\":{\"enum\":[\"utf-8\",\"base64\"]}"
	  ",\"stdout_truncated\":" S("boolean")
	  ",\"stdout_bytes\":" S("integer")
	  ",\"stderr\":" S("string")
	  ",\"stderr_encoding\":{\"enum\":[\"utf-8\",\"base64\"]}"
	  ",\"stderr_truncated\":" S("boolean")
	  ",\"stderr_bytes\":" S("integer")
	  ",\"exec_id\":" S("string"),
	  REQ("\"exit_code\",\"stdout\",\"stderr\"") "," REQ("\"exec_id\""),
	  T_SB | T_DESTROY, t_exec },
	{ "fs_read", "Read a file", "Read a file of the sandbox (up to 16 MiB).",
	  PATHP "," ENC,
	  "\"path\"",
	  "\"path\":" S("string")
	  ",\"encoding\":{\"enum\":[\"text\",\"base64\"]}"
	  ",\"content\":" S("string")
	  ",\"size\":" S("integer"),
	  REQ("\"path\",\"encoding\",\"content\""),
	  T_SB | T_RO, mcp_t_fs_read },
	{ "fs_write", "Write a file",
	  "Write a whole file of the sandbox (parents made; up to 16 MiB).",
	  PATHP ",\"content\":" S("string") "," ENC
	  ",\"mode\":{\"type\":\"string\",\"pattern\":\"^[0-7]{3,4}$\","
	  "\"description\":\"octal, default 0644 (an existing file keeps its own)\"}",
	  "\"path\",\"content\"",
	  "\"path\":" S("string") ",\"bytes\":" S("integer"),
	  REQ("\"path\",\"bytes\""),
	  T_SB | T_DESTROY, mcp_t_fs_write },
	{ "fs_ls", "List a directory", "List a directory of the sandbox (sbx fs ls --json).",
	  "\"path\":" D("string", "directory (default /workspace)")
	  ",\"recursive\":" S("boolean"),
	  "",
	  "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}",
	  REQ("\"entries\""),
	  T_SB | T_RO, mcp_t_fs_ls },
	{ "fs_edit", "Edit a file",
	  "Replace old_string by new_string in a file of the sandbox. old_string must occur "
	  "exactly once, unless replace_all.",
	  PATHP
	  ",\"old_string\":{\"type\":\"string\",\"minLength\":1}"
	  ",\"new_string\":" S("string")
	  ",\"replace_all\":" S("boolean"),
	  "\"path\",\"old_string\",\"new_string\"",
	  "\"path\":" S("string") ",\"replacements\":" S("integer"),
	  REQ("\"path\",\"replacements\""),
	  T_SB | T_DESTROY, mcp_t_fs_edit },
	{ "file_upload", "Upload a file",
	  "Put a small file (base64, up to 16 MiB) into the sandbox, through sbx cp; its "
	  "directory must exist.",
	  PATHP
	  ",\"content_base64\":" S("string")
	  ",\"mode\":{\"type\":\"string\",\"pattern\":\"^[0-7]{3,4}$\"}",
	  "\"path\",\"content_base64\"",
	  "\"path\":" S("string") ",\"bytes\":" S("integer"),
	  REQ("\"path\",\"bytes\""),
	  T_SB | T_DESTROY, mcp_t_upload },
	{ "file_download", "Download a file",
	  "Get a small file (up to 16 MiB) of the sandbox as base64, through sbx cp.",
	  PATHP,
	  "\"path\"",
	  "\"path\":" S("string") ",\"content_base64\":" S("string") ",\"size\":" S("integer"),
	  REQ("\"path\",\"content_base64\""),
	  T_SB | T_RO, mcp_t_download },
	{ "sandbox_ps", "List background commands",
	  "The sandbox's detached commands, running and finished (sbx ps --json).",
	  "", "",
	  "\"execs\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}",
	  REQ("\"execs\""),
	  T_SB | T_RO, t_ps },
	{ "sandbox_logs", "Read logs",
	  "Output of the sandbox's detached commands, or of one (exec_id); the last MiB.",
	  "\"exec_id\":" D("string", "one command's id (sandbox_exec with background gave it)"),
	  "",
	  "\"logs\":" S("string") ",\"bytes\":" S("integer") ",\"truncated\":" S("boolean"),
	  REQ("\"logs\""),
	  T_SB | T_RO, t_logs },
	{ "sandbox_kill", "Signal commands",
	  "Signal one detached command's process group, or every process of the sandbox.",
	  "\"exec_id\":" S("string")
	  ",\"signal\":" D("string", "SIGKILL (default), SIGTERM, ..."),
	  "",
	  "\"sandbox\":" S("string") ",\"exec_id\":" S("string") ",\"signal\":" S("string"),
	  REQ("\"sandbox\",\"signal\""),
	  T_SB | T_DESTROY, t_kill },
	{ "sandbox_preview", "Open a port",
	  "Make a port inside the sandbox reachable from the host; returns its URL.",
	  "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}"
	  ",\"public\":" D("boolean", "listen on every interface (the URL carries a token)"),
	  "\"port\"",
	  "\"url\":" S("string"),
	  REQ("\"url\""),
	  T_SB, t_preview },
	{ "sandbox_pause", "Pause", "Freeze the sandbox's processes.",
	  "", "",
	  "\"id\":" S("string") ",\"state\":" S("string"),
	  REQ("\"id\",\"state\""),
	  T_SB, t_pause },
	{ "sandbox_resume", "Resume", "Resume a paused, released or stopped sandbox.",
	  "", "",
	  "\"id\":" S("string") ",\"state\":" S("string"),
	  REQ("\"id\",\"state\""),
	  T_SB, t_resume },
	{ "sandbox_rm", "Remove a sandbox", "Remove a sandbox and everything in it.",
	  "\"force\":" D("boolean", "even when it is running"),
	  "",
	  "\"sandbox\":" S("string") ",\"removed\":" S("boolean"),
	  REQ("\"sandbox\",\"removed\""),
	  T_SB | T_GLOBAL | T_DESTROY, t_rm },
	{ NULL },
};
/* clang-format on */

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
		"\"string\"}},\"required\":[\"code\",\"message\"]}},\"anyOf\":[%s,"
		"{\"required\":[\"error\"]}]}",
		t->out, t->out_alts);
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

/* a string that becomes a command-line argument cannot hold U+0000 (it would end there) */
static bool has_nul(const json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;

	if (json_is_string(v))
		return strlen(json_string_value(v)) != json_string_length(v);
	json_array_foreach (v, i, e)
		if (has_nul(e))
			return true;
	json_object_foreach ((json_t *)v, k, e)
		if (has_nul(e))
			return true;
	return false;
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
	const char *eid = sbx_json_str(c.args, "exec_id"), *k;
	json_t *v;
	bool keys_ok = true;
	json_object_foreach (json_object_get(c.args, "env"), k, v)
		keys_ok = keys_ok && *k && !strchr(k, '=');
	json_object_foreach (json_object_get(c.args, "labels"), k, v)
		keys_ok = keys_ok && *k && !strchr(k, '=');
	if (c.sb && !id_ok(c.sb))
		mcp_fail(&c, "invalid_argument", "'%s' is not a sandbox id or name", c.sb);
	else if (eid && !id_ok(eid))
		mcp_fail(&c, "invalid_argument", "'%s' is not an exec id", eid);
	else if (has_nul(c.args) && !streq(t->name, "fs_write") && !streq(t->name, "fs_edit"))
		mcp_fail(&c, "invalid_argument", "an argument holds U+0000");
	else if ((streq(t->name, "fs_write") || streq(t->name, "fs_edit")) &&
		 has_nul(json_object_get(c.args, "path")))
		mcp_fail(&c, "invalid_argument", "the path holds U+0000");
	else if (!keys_ok)
		mcp_fail(&c, "invalid_argument", "a key of env or labels is empty or has '='");
	else
		t->call(&c);
	if (!c.out && !c.error)
		mcp_fail(&c, "internal", "%s gave no result", t->name);
	json_t *sc = c.out ? c.out : json_pack("{s:o}", "error", c.error);
	if (c.out)
		json_decref(c.error);
	_cleanup_free_ char *text = json_dumps(sc, JSON_COMPACT);
	return json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text",
			 text ? text : "{}", "structuredContent", sc, "isError", c.out == NULL);
}
