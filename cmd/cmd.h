/* The commands: one cmd_NAME per file, and the helpers they share for printing. */
#ifndef SBX_CMD_CMD_H
#define SBX_CMD_CMD_H

#include <getopt.h>

#include "core/sandbox.h"

int cmd_create(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_exec(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_cp(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_fs(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_ls(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_logs(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_inspect(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_rm(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_pause(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_resume(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_update(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_secret(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_keepalive(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_stats(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_preview(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_run(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_version(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_help(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_complete(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_image(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_commit(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_provider(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_ps(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_wait(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_kill(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_mcp(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_snapshot(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_fork(int argc, char **argv, struct sbx_ctx *ctx);

struct strbuf;
struct sbx_command {
	const char *name;
	int (*fn)(int, char **, struct sbx_ctx *);
	const char *summary; /* NULL: hidden */
	const char *usage;   /* the SYNOPSIS line(s), without "Usage: " */
	const char *help;    /* the options, as printed by --help */
	/* appends more of the options (create's, for create and run: cmd/create.c's table) */
	void (*more_help)(struct strbuf *sb);
};
extern const struct sbx_command sbx_commands[];
const struct sbx_command *cmd_find(const char *name);

/* a record as ls --json, inspect and create --json print it: secrets left out, what looking
 * found merged in */
json_t *cmd_record_view(const struct sbx_record *rec);
/* prints "sbx: error: MSG" once (or, in JSON mode, {"error": {"code": ..., "message": ...}})
 * and returns the exit status for it */
int cmd_report(const struct sbx_err *err);
/* cmd_report() of an error made here */
_printf_(2, 3) int cmd_error(enum sbx_errkind kind, const char *fmt, ...);
/* --json given to the command (cmd_json_errors, set by main or the command) or SBX_JSON=1:
 * errors are printed as JSON */
extern bool cmd_json_errors;
bool cmd_json_mode(void);
/* a usage error: message, usage line, pointer to --help; returns 125 */
_printf_(2, 3) int cmd_usage_error(const char *cmd, const char *fmt, ...);
/* handles an option getopt rejected (argv[optind-1] / optopt); returns 125 */
int cmd_bad_option(const char *cmd, int argc, char **argv);
/* --help */
int cmd_print_help(const char *cmd);
/* the options part of c's --help; caller frees */
char *cmd_help_text(const struct sbx_command *c);
/* the process's exit status for an exec's status and error */
int cmd_exit_code(const struct sbx_err *err);

/* create's options, which run takes too (cmd/create.c holds their table) */
struct create_args {
	struct sbx_create_opts o; /* o.config filled by the options */
	bool json;
	size_t n_env, n_labels;
	bool net_given, preset_none, ttl_action;
};
/* getopt's long options: create's, then own (NULL-terminated); free() it */
struct option *create_longopts(const struct option *own);
/* getopt's short options: "+" own, then create's; free() it */
char *create_shortopts(const char *own);
/* parses one create option (getopt's c and optarg); 1 handled, 0 not a create option, -1 error */
int create_parse_opt(struct create_args *a, int c, const char *arg, const char *cmd);
/* after parsing: checks what goes together; -1 after a usage error */
int create_args_finish(struct create_args *a, const char *cmd);
void create_args_release(struct create_args *a);
/* create's options as --help prints them, appended to sb */
void create_help(struct strbuf *sb);
/* -h met: help when alone, else a usage error (docker's -h is --hostname) */
int create_help_or_hostname(int argc, char **argv, const char *cmd);
enum {
	OPT_ENV_FILE = 1000,
	OPT_JSON,
	OPT_TIMEOUT,
	OPT_FORCE,
	OPT_RESUME,
	OPT_HOST_PORT,
	OPT_EGRESS,
	OPT_PUBLIC,
	OPT_RM,
	OPT_PLATFORM,
	OPT_INSECURE,
	OPT_ROOTFS,
	OPT_NO_AUTH,
	OPT_MAX_OUTPUT,
	OPT_FILTER,
	OPT_IGNORE_MISSING,
	OPT_HELP = 'h',
};

/* "K=V" from -e: K alone takes the caller's value (skipped when unset); 0 or -1 */
int env_arg(char ***v, size_t *n, const char *arg, const char *cmd);
int env_file(char ***v, size_t *n, const char *path, const char *cmd);
void strv_push(char ***v, size_t *n, char *s);

#endif
