/* sbx ps: the detached commands of a sandbox (exec -d), running and finished. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/jobs.h"
#include "core/json.h"
#include "core/strbuf.h"

/* argv as one line of text, made terminal-safe */
static char *command_line(json_t *argv)
{
	struct strbuf sb = STRBUF_INIT;
	size_t i;
	json_t *a;

	json_array_foreach (argv, i, a) {
		if (i)
			strbuf_addch(&sb, ' ');
		strbuf_addstr(&sb, json_string_value(a) ?: "");
	}
	_cleanup_free_ char *raw = strbuf_detach(&sb);
	return sbx_term_safe(raw);
}

int cmd_ps(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_err err = { 0 };
	bool json = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "ha", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("ps");
		case 'a': /* running and finished are listed anyway (as docker ps -a) */
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("ps", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("ps", "missing sandbox");
	if (optind + 1 < argc)
		return cmd_usage_error("ps", "unexpected argument '%s'", argv[optind + 1]);
	_cleanup_json_ json_t *list = NULL;
	if (sbx_sandbox_jobs(ctx, argv[optind], &list, &err) < 0)
		return cmd_report(&err);
	if (json) {
		_cleanup_free_ char *s = json_dumps(list, JSON_INDENT(2));
		puts(s ? s : "[]");
		return 0;
	}
	printf("%-14s  %-8s  %-8s  %-6s  %-20s  %s\n", "EXEC ID", "PID", "STATE", "EXIT", "STARTED",
	       "COMMAND");
	size_t i;
	json_t *j;
	json_array_foreach (list, i, j) {
		_cleanup_free_ char *id = sbx_term_safe(sbx_json_str(j, "id") ?: "?");
		_cleanup_free_ char *cmd = command_line(json_object_get(j, "command"));
		_cleanup_free_ char *started = sbx_term_safe(sbx_json_str(j, "started_at") ?: "-");
		json_t *pid = json_object_get(j, "pid");
		json_t *code = json_object_get(j, "exit_code");
		char pids[24] = "-", codes[24] = "-";
		if (json_is_integer(pid))
			snprintf(pids, sizeof(pids), "%lld", (long long)json_integer_value(pid));
		if (json_is_integer(code))
			snprintf(codes, sizeof(codes), "%lld", (long long)json_integer_value(code));
		_cleanup_free_ char *state = sbx_term_safe(sbx_json_str(j, "state") ?: "?");
		printf("%-14s  %-8s  %-8s  %-6s  %-20s  %s\n", id, pids, state, codes, started,
		       cmd);
	}
	return 0;
}
