/* The commands: one cmd_NAME per file, and the helpers they share for printing. */
#ifndef SBX_CMD_CMD_H
#define SBX_CMD_CMD_H

#include <getopt.h>

#include "core/sandbox.h"

int cmd_create(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_exec(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_cp(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_ls(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_logs(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_inspect(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_rm(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_pause(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_resume(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_preview(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_run(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_version(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_help(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_complete(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_image(int argc, char **argv, struct sbx_ctx *ctx);
int cmd_provider(int argc, char **argv, struct sbx_ctx *ctx);

struct sbx_command {
	const char *name;
	int (*fn)(int, char **, struct sbx_ctx *);
	const char *summary; /* NULL: hidden */
	const char *usage;   /* the SYNOPSIS line(s), without "Usage: " */
	const char *help;    /* the options, as printed by --help */
};
extern const struct sbx_command sbx_commands[];
const struct sbx_command *cmd_find(const char *name);

/* a record as ls --json, inspect and create --json print it: secrets left out, what looking
 * found merged in */
json_t *cmd_record_view(const struct sbx_record *rec);
/* prints "sbx: error: MSG" once and returns the exit status for it */
int cmd_report(const struct sbx_err *err);
/* a usage error: message, usage line, pointer to --help; returns 125 */
_printf_(2, 3) int cmd_usage_error(const char *cmd, const char *fmt, ...);
/* handles an option getopt rejected (argv[optind-1] / optopt); returns 125 */
int cmd_bad_option(const char *cmd, int argc, char **argv);
/* --help */
int cmd_print_help(const char *cmd);
/* the process's exit status for an exec's status and error */
int cmd_exit_code(const struct sbx_err *err);

/* ops shared by create and run */
struct create_args {
	struct sbx_create_opts o;
	bool json;
	char **env_store; /* owned */
	size_t n_env;
	char **label_store;
	size_t n_labels;
	char **add_host_store;
	size_t n_add_hosts;
	char **host_port_store;
	size_t n_host_ports;
};
/* parses one create option (getopt's c and optarg); 1 handled, 0 not a create option, -1 error */
int create_parse_opt(struct create_args *a, int c, const char *arg, const char *cmd);
/* after parsing: fills the option lists, checks what goes together; -1 after a usage error */
int create_args_finish(struct create_args *a, const char *cmd);
void create_args_release(struct create_args *a);
/* getopt_long table entries and short options shared by create and run */
#define CREATE_SHORTOPTS "e:w:v:"
enum {
	OPT_NAME = 1000,
	OPT_ENV_FILE,
	OPT_LABEL,
	OPT_JSON,
	OPT_PROVIDER,
	OPT_TIMEOUT,
	OPT_FORCE,
	OPT_CPUS,
	OPT_MEMORY,
	OPT_PIDS_LIMIT,
	OPT_TTL,
	OPT_TTL_ACTION,
	OPT_RESUME,
	OPT_NET,
	OPT_NET_PRESET,
	OPT_ADD_HOST,
	OPT_HOST_PORT,
	OPT_EGRESS,
	OPT_PUBLIC,
	OPT_RM,
	OPT_IMAGE,
	OPT_PLATFORM,
	OPT_INSECURE,
	OPT_ROOTFS,
	OPT_NET_ALLOW_PRIVATE,
	OPT_NO_AUTH,
	OPT_DISK,
	OPT_HELP = 'h',
};
#define CREATE_LONGOPTS                                                                         \
	{ "name", required_argument, NULL, OPT_NAME }, { "env", required_argument, NULL, 'e' }, \
		{ "env-file", required_argument, NULL, OPT_ENV_FILE },                          \
		{ "workdir", required_argument, NULL, 'w' },                                    \
		{ "volume", required_argument, NULL, 'v' },                                     \
		{ "label", required_argument, NULL, OPT_LABEL },                                \
		{ "provider", required_argument, NULL, OPT_PROVIDER },                          \
		{ "cpus", required_argument, NULL, OPT_CPUS },                                  \
		{ "memory", required_argument, NULL, OPT_MEMORY },                              \
		{ "pids-limit", required_argument, NULL, OPT_PIDS_LIMIT },                      \
		{ "disk", required_argument, NULL, OPT_DISK },                                  \
		{ "ttl", required_argument, NULL, OPT_TTL },                                    \
		{ "ttl-action", required_argument, NULL, OPT_TTL_ACTION },                      \
		{ "net", required_argument, NULL, OPT_NET },                                    \
		{ "net-preset", required_argument, NULL, OPT_NET_PRESET },                      \
		{ "net-allow-private", no_argument, NULL, OPT_NET_ALLOW_PRIVATE },              \
		{ "add-host", required_argument, NULL, OPT_ADD_HOST },                          \
		{ "host-port", required_argument, NULL, OPT_HOST_PORT },                        \
	{                                                                                       \
		"image", required_argument, NULL, OPT_IMAGE                                     \
	}

/* "K=V" from -e: K alone takes the caller's value (skipped when unset); 0 or -1 */
int env_arg(char ***v, size_t *n, const char *arg, const char *cmd);
int env_file(char ***v, size_t *n, const char *path, const char *cmd);
void strv_push(char ***v, size_t *n, char *s);

#endif
