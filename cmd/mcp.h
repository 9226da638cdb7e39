/* sbx mcp's parts: the JSON-RPC server (mcp.c), its tools (mcp-tools.c), running a verb in a
 * child process (mcp-run.c). */
#ifndef SBX_CMD_MCP_H
#define SBX_CMD_MCP_H

#include "cmd/cmd.h"
#include "core/json.h"

/* JSON-RPC 2.0 and MCP error codes */
enum {
	MCP_PARSE_ERROR = -32700,
	MCP_INVALID_REQUEST = -32600,
	MCP_METHOD_NOT_FOUND = -32601,
	MCP_INVALID_PARAMS = -32602,
	MCP_INTERNAL_ERROR = -32603,
	MCP_RESOURCE_NOT_FOUND = -32002,
};

/* what one verb printed and how it ended */
struct mcp_run {
	int status; /* exit status; 128+N after signal N */
	char *out;  /* NUL-terminated; out_len bytes kept */
	size_t out_len, out_total;
	char *err;
	size_t err_len;
};

/* runs `sbx ARGV...` (argv[0] the verb's name) in a forked child that calls the command's
 * function as main() does, stdin fed from in (in_len bytes), stdout kept up to out_cap bytes,
 * stderr up to 64 KiB; 0, or -1 when no child could be made (err says why) */
int mcp_run_verb(struct sbx_ctx *ctx, char *const *argv, const void *in, size_t in_len,
		 size_t out_cap, struct mcp_run *r, struct sbx_err *err);
void mcp_run_release(struct mcp_run *r);
/* the error a verb reported: its JSON error line ({"error": {...}}, SBX_JSON=1) or its
 * "sbx: error:" line; a new {"code", "message"} object */
json_t *mcp_run_error(const struct mcp_run *r);

struct mcp_server {
	struct sbx_ctx *ctx;
	char *bound_id;	  /* --sandbox: the one sandbox's id, else NULL */
	char *bound_name; /* and its name, NULL when unnamed */
};

/* tools/list's "tools" array */
json_t *mcp_tools_list(const struct mcp_server *s);
/* tools/call: the CallToolResult, or NULL with a JSON-RPC error code and message */
json_t *mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, int *ret_code,
		       char **ret_msg);
/* --- the tools' own: mcp-tools.c, mcp-files.c --- */

/* what a verb may print that sbx mcp reads at most (an exec's JSON with two 1 MiB streams,
 * escaped, fits many times over) */
#define OUT_CAP (64u << 20)
/* files through fs_read, fs_write, fs_edit, file_upload, file_download */
#define FILE_CAP (16u << 20)
/* what sandbox_logs returns at most: the end of the log */
#define LOGS_CAP (1u << 20)

/* one tool call */
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

_printf_(2, 3) void mcp_av_add(struct av *a, const char *fmt, ...);
void mcp_av_free(struct av *a);
/* the call fails with a {"code", "message"} of the contract */
_printf_(3, 4) void mcp_fail(struct call *c, const char *code, const char *fmt, ...);
const char *mcp_arg_str(struct call *c, const char *key);
bool mcp_arg_bool(struct call *c, const char *key);
/* runs the verb; 0 when it exited 0, else -1 with c->error set from what it reported */
int mcp_run(struct call *c, struct av *a, const void *in, size_t in_len, size_t cap,
	    struct mcp_run *r);
/* runs the verb and parses the JSON it printed; NULL with c->error set */
json_t *mcp_run_json(struct call *c, struct av *a);
int mcp_t_fs_read(struct call *c);
int mcp_t_fs_write(struct call *c);
int mcp_t_fs_ls(struct call *c);
int mcp_t_fs_edit(struct call *c);
int mcp_t_upload(struct call *c);
int mcp_t_download(struct call *c);

/* checks v against the JSON Schema subset the tools use (type, enum, properties, required,
 * additionalProperties, items, minItems, minLength, minimum, maximum, exclusiveMinimum,
 * pattern as [0-7]{a,b} only, anyOf); -1 with a message naming where */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where, char **ret_msg);
/* text that is valid UTF-8: invalid bytes become U+FFFD; caller frees */
char *mcp_utf8_clean(const char *s, size_t n, bool *ret_was_clean);

#endif
