/* sbx mcp: a Model Context Protocol server on stdio (JSON-RPC 2.0, one message a line). */
#define _GNU_SOURCE
#include "cmd/mcp.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>

#include "core/strbuf.h"

/* a request line longer than this is refused, not read into memory */
#define LINE_CAP (16u << 20)
/* what resources/read returns of a log at most (its end) */
#define LOG_CAP (4u << 20)

/* the revisions this server speaks, newest first */
static const char *const versions[] = { "2025-06-18", "2025-03-26", "2024-11-05", NULL };

struct server {
	struct mcp_server s;
	const char *version; /* negotiated; NULL before initialize */
};

static void send_msg(json_t *msg)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);

	if (text) {
		size_t n = strlen(text);
		text[n] = '\n';
		(void)sbx_write_all(1, text, n + 1);
	}
	json_decref(msg);
}

static json_t *error_msg(json_t *id, int code, const char *msg)
{
	return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", msg);
}

/* --- resources: the logs of a sandbox's detached commands, through `sbx logs` -------------- */

/* "sbx://SB/logs" or "sbx://SB/exec/ID/logs"; 0 or -1 */
static int parse_uri(const char *uri, char **ret_sb, char **ret_exec)
{
	if (!startswith(uri, "sbx://"))
		return -1;
	const char *p = uri + 6, *slash = strchr(p, '/');
	if (!slash || slash == p)
		return -1;
	*ret_sb = xstrndup(p, (size_t)(slash - p));
	*ret_exec = NULL;
	if (streq(slash, "/logs"))
		return 0;
	if (startswith(slash, "/exec/")) {
		const char *e = slash + 6, *end = strchr(e, '/');
		if (end && end > e && streq(end, "/logs")) {
			*ret_exec = xstrndup(e, (size_t)(end - e));
			return 0;
		}
	}
	free(*ret_sb);
	*ret_sb = NULL;
	return -1;
}

static bool name_ok(const char *s)
{
	/* a sandbox id or name, an exec id: never an option, never a path */
	if (!*s || *s == '-' || strlen(s) > 128)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

static json_t *resources_list(struct server *sv, int *code, char **msg)
{
	json_t *list = json_array();

	if (sv->s.bound_id) {
		json_array_append_new(list,
				      json_pack("{s:s++,s:s+,s:s,s:s}", "uri", "sbx://",
						sv->s.bound_id, "/logs", "name", sv->s.bound_id,
						" logs", "description",
						"output of the sandbox's detached commands",
						"mimeType", "text/plain"));
		return json_pack("{s:o}", "resources", list);
	}
	char *argv[] = { "ls", "--json", NULL };
	struct mcp_run r;
	struct sbx_err err = { 0 };
	if (mcp_run_verb(sv->s.ctx, argv, NULL, 0, LINE_CAP, &r, &err) < 0) {
		json_decref(list);
		*code = MCP_INTERNAL_ERROR;
		*msg = xstrdup(err.msg);
		return NULL;
	}
	json_t *recs = r.status == 0 ? json_loads(r.out, 0, NULL) : NULL;
	size_t i;
	json_t *rec;
	json_array_foreach (recs, i, rec) {
		const char *id = sbx_json_str(rec, "id");
		const char *name = sbx_json_str(rec, "name");
		if (!id)
			continue;
		json_array_append_new(list,
				      json_pack("{s:s++,s:s+,s:s,s:s}", "uri", "sbx://", id,
						"/logs", "name", name ? name : id, " logs",
						"description",
						"output of the sandbox's detached commands",
						"mimeType", "text/plain"));
	}
	json_decref(recs);
	mcp_run_release(&r);
	return json_pack("{s:o}", "resources", list);
}

static json_t *templates_list(struct server *sv)
{
	const char *sb = sv->s.bound_id ? sv->s.bound_id : "{sandbox}";
	_cleanup_free_ char *logs = xasprintf("sbx://%s/logs", sb);
	_cleanup_free_ char *exec = xasprintf("sbx://%s/exec/{exec_id}/logs", sb);

	return json_pack("{s:[{s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s}]}", "resourceTemplates",
			 "uriTemplate", logs, "name", "sandbox logs", "description",
			 "output of a sandbox's detached commands (sbx logs SB)", "mimeType",
			 "text/plain", "uriTemplate", exec, "name", "exec logs", "description",
			 "output of one detached command (sbx logs SB EXECID)", "mimeType",
			 "text/plain");
}

static json_t *resources_read(struct server *sv, json_t *params, int *code, char **msg)
{
	const char *uri = sbx_json_str(params, "uri");
	_cleanup_free_ char *sb = NULL, *exec = NULL;

	if (!uri) {
		*code = MCP_INVALID_PARAMS;
		*msg = xstrdup("resources/read needs a string 'uri'");
		return NULL;
	}
	if (parse_uri(uri, &sb, &exec) < 0 || !name_ok(sb) || (exec && !name_ok(exec)) ||
	    (sv->s.bound_id && !streq(sb, sv->s.bound_id) &&
	     !(sv->s.bound_name && streq(sb, sv->s.bound_name)))) {
		*code = MCP_RESOURCE_NOT_FOUND;
		*msg = xstrdup("resource not found");
		return NULL;
	}
	char *argv[] = { "logs", "--", sb, exec, NULL };
	struct mcp_run r;
	struct sbx_err err = { 0 };
	if (mcp_run_verb(sv->s.ctx, argv, NULL, 0, LINE_CAP, &r, &err) < 0) {
		*code = MCP_INTERNAL_ERROR;
		*msg = xstrdup(err.msg);
		return NULL;
	}
	if (r.status != 0) {
		json_t *e = mcp_run_error(&r);
		bool missing = streq(sbx_json_str(e, "code") ?: "", "not_found");
		*code = missing ? MCP_RESOURCE_NOT_FOUND : MCP_INTERNAL_ERROR;
		*msg = xstrdup(sbx_json_str(e, "message") ?: "cannot read the logs");
		json_decref(e);
		mcp_run_release(&r);
		return NULL;
	}
	/* the end of a long log */
	size_t skip = r.out_len > LOG_CAP ? r.out_len - LOG_CAP : 0;
	_cleanup_free_ char *text = mcp_utf8_clean(r.out + skip, r.out_len - skip, NULL);
	mcp_run_release(&r);
	return json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", uri, "mimeType", "text/plain",
			 "text", text);
}

/* --- requests -------------------------------------------------------------------------------- */

static json_t *initialize(struct server *sv, json_t *params)
{
	const char *want = sbx_json_str(params, "protocolVersion");

	sv->version = versions[0];
	for (int i = 0; want && versions[i]; i++)
		if (streq(want, versions[i]))
			sv->version = versions[i];
	_cleanup_free_ char *instr = sv->s.bound_id
		? xasprintf("Tools of one sbx sandbox (%s): run commands, read and "
			    "write its files, manage its background commands.",
			    sv->s.bound_id)
		: xstrdup("Tools to create disposable sbx sandboxes, run commands in "
			  "them, read and write their files, and remove them.");
	return json_pack("{s:s,s:{s:{s:b},s:{s:b,s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion",
			 sv->version, "capabilities", "tools", "listChanged", 0, "resources",
			 "subscribe", 0, "listChanged", 0, "serverInfo", "name", "sbx", "title",
			 "sbx sandboxes", "version", SBX_VERSION, "instructions", instr);
}

/* one message: the answer, or NULL for none (a notification, a response) */
static json_t *handle(struct server *sv, json_t *m)
{
	if (!json_is_object(m))
		return error_msg(NULL, MCP_INVALID_REQUEST, "a message must be a JSON object");
	json_t *id = json_object_get(m, "id");
	const char *method = sbx_json_str(m, "method");
	json_t *params = json_object_get(m, "params");
	bool id_ok = json_is_string(id) || json_is_integer(id);

	if (!streq(sbx_json_str(m, "jsonrpc") ?: "", "2.0"))
		return error_msg(id_ok ? id : NULL, MCP_INVALID_REQUEST,
				 "'jsonrpc' must be \"2.0\"");
	if (!method) {
		/* a response to a request of ours: this server sends none, so nothing to do */
		if (id_ok && (json_object_get(m, "result") || json_object_get(m, "error")))
			return NULL;
		return error_msg(id_ok ? id : NULL, MCP_INVALID_REQUEST,
				 "a request needs a string 'method'");
	}
	if (!id)
		return NULL; /* notifications: initialized, cancelled, ... need no answer */
	if (!id_ok)
		return error_msg(NULL, MCP_INVALID_REQUEST, "'id' must be a string or an integer");
	if (params && !json_is_object(params))
		return error_msg(id, MCP_INVALID_PARAMS, "'params' must be an object");

	json_t *result = NULL;
	int code = 0;
	_cleanup_free_ char *msg = NULL;
	if (streq(method, "initialize"))
		result = initialize(sv, params);
	else if (streq(method, "ping"))
		result = json_object();
	else if (streq(method, "tools/list"))
		result = json_pack("{s:o}", "tools", mcp_tools_list(&sv->s));
	else if (streq(method, "tools/call")) {
		const char *name = sbx_json_str(params, "name");
		json_t *args = json_object_get(params, "arguments");
		if (!name) {
			code = MCP_INVALID_PARAMS;
			msg = xstrdup("tools/call needs a string 'name'");
		} else if (args && !json_is_object(args)) {
			code = MCP_INVALID_PARAMS;
			msg = xstrdup("'arguments' must be an object");
		} else {
			result = mcp_tools_call(&sv->s, name, args, &code, &msg);
		}
	} else if (streq(method, "resources/list"))
		result = resources_list(sv, &code, &msg);
	else if (streq(method, "resources/templates/list"))
		result = templates_list(sv);
	else if (streq(method, "resources/read"))
		result = resources_read(sv, params, &code, &msg);
	else {
		_cleanup_free_ char *safe = mcp_utf8_clean(method, strlen(method), NULL);
		msg = xasprintf("method not found: %.200s", safe);
		code = MCP_METHOD_NOT_FOUND;
	}
	if (!result)
		return error_msg(id, code ? code : MCP_INTERNAL_ERROR, msg ? msg : "failed");
	return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static void handle_line(struct server *sv, const char *line, size_t n)
{
	json_error_t jerr;
	json_t *m = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL,
			       &jerr);

	if (!m) {
		_cleanup_free_ char *msg = xasprintf("parse error: %s", jerr.text);
		_cleanup_free_ char *safe = mcp_utf8_clean(msg, strlen(msg), NULL);
		send_msg(error_msg(NULL, MCP_PARSE_ERROR, safe));
		return;
	}
	if (json_is_array(m)) {
		/* 2025-03-26 had batches; 2025-06-18 took them out */
		if (!sv->version || !streq(sv->version, "2025-03-26") || !json_array_size(m)) {
			send_msg(error_msg(NULL, MCP_INVALID_REQUEST,
					   "batches are not supported in this protocol revision"));
			json_decref(m);
			return;
		}
		json_t *answers = json_array();
		size_t i;
		json_t *e;
		json_array_foreach (m, i, e) {
			json_t *a = handle(sv, e);
			if (a)
				json_array_append_new(answers, a);
		}
		if (json_array_size(answers))
			send_msg(answers);
		else
			json_decref(answers);
		json_decref(m);
		return;
	}
	json_t *a = handle(sv, m);
	if (a)
		send_msg(a);
	json_decref(m);
}

/* reads stdin line by line until its end; a line past LINE_CAP is skipped and refused */
static void serve(struct server *sv)
{
	struct strbuf sb = STRBUF_INIT;
	bool skipping = false;
	char buf[65536];

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (const char *p = buf, *end = buf + n; p < end;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *stop = nl ? nl : end;
			if (!skipping) {
				strbuf_add(&sb, p, (size_t)(stop - p));
				if (sb.len > LINE_CAP) {
					skipping = true;
					strbuf_release(&sb);
					sb = (struct strbuf)STRBUF_INIT;
				}
			}
			p = nl ? nl + 1 : end;
			if (!nl)
				break;
			if (skipping) {
				send_msg(error_msg(NULL, MCP_INVALID_REQUEST,
						   "message too large (over 16 MiB)"));
				skipping = false;
				continue;
			}
			size_t len = sb.len;
			while (len && (sb.buf[len - 1] == '\r' || sb.buf[len - 1] == ' '))
				len--;
			if (len)
				handle_line(sv, sb.buf, len);
			strbuf_reset(&sb);
		}
	}
	if (skipping)
		send_msg(error_msg(NULL, MCP_INVALID_REQUEST, "message too large (over 16 MiB)"));
	else if (sb.len)
		handle_line(sv, sb.buf, sb.len);
	strbuf_release(&sb);
}

/* --sandbox SB: the record's id and name, through `sbx inspect` */
static int bind_sandbox(struct server *sv, const char *sb)
{
	if (!name_ok(sb))
		return cmd_usage_error("mcp", "'%s' is not a sandbox id or name", sb);
	char *argv[] = { "inspect", "--", (char *)sb, NULL };
	struct mcp_run r;
	struct sbx_err err = { 0 };
	if (mcp_run_verb(sv->s.ctx, argv, NULL, 0, LINE_CAP, &r, &err) < 0)
		return cmd_report(&err);
	json_t *j = r.status == 0 ? json_loads(r.out, 0, NULL) : NULL;
	json_t *rec = json_is_array(j) ? json_array_get(j, 0) : j;
	const char *id = sbx_json_str(rec, "id");
	if (!id) {
		json_t *e = mcp_run_error(&r);
		sbx_err_set(&err,
			    streq(sbx_json_str(e, "code") ?: "", "not_found") ? SBX_E_NOTFOUND
									      : SBX_E_SYSTEM,
			    "%s", sbx_json_str(e, "message") ?: "cannot find the sandbox");
		json_decref(e);
		json_decref(j);
		mcp_run_release(&r);
		return cmd_report(&err);
	}
	sv->s.bound_id = xstrdup(id);
	sv->s.bound_name = sbx_json_str(rec, "name") ? xstrdup(sbx_json_str(rec, "name")) : NULL;
	json_decref(j);
	mcp_run_release(&r);
	return 0;
}

int cmd_mcp(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "sandbox", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct server sv = { .s.ctx = ctx };
	const char *sb = NULL;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hs:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("mcp");
		case 's':
			sb = optarg;
			break;
		default:
			return cmd_bad_option("mcp", argc, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error("mcp", "unexpected argument '%s'", argv[optind]);
	/* the pipes of the verbs' children must not become fds 0, 1 or 2 */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return cmd_report(&(struct sbx_err){ .kind = SBX_E_SYSTEM,
							     .msg = "cannot open /dev/null" });
	/* a client that went away is EPIPE on write, not a signal */
	signal(SIGPIPE, SIG_IGN);
	if (sb) {
		int r = bind_sandbox(&sv, sb);
		if (r)
			return r;
	}
	serve(&sv);
	free(sv.s.bound_id);
	free(sv.s.bound_name);
	return 0;
}
