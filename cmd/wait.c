/* sbx wait: until a detached command ends (its exit status), or a sandbox stops or reaches a
 * state. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/jobs.h"

int cmd_wait(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "state", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_err err = { 0 };
	const char *state = NULL;
	long long timeout_ms = 0;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("wait");
		case 's':
			for (const char *s = optarg; *s; s++)
				if (*s < 'a' || *s > 'z')
					return cmd_usage_error("wait", "invalid state '%s'",
							       optarg);
			if (!*optarg)
				return cmd_usage_error("wait", "invalid state ''");
			state = optarg;
			break;
		case OPT_TIMEOUT:
			timeout_ms = sbx_parse_duration_ms(optarg);
			if (timeout_ms <= 0)
				return cmd_usage_error(
					"wait", "invalid duration '%s' (use e.g. 30s, 5m, 1h)",
					optarg);
			break;
		case OPT_JSON: /* errors as JSON (cmd_report) */
			break;
		default:
			return cmd_bad_option("wait", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("wait", "missing sandbox");
	const char *sb = argv[optind++];
	const char *id = optind < argc ? argv[optind++] : NULL;
	if (optind < argc)
		return cmd_usage_error("wait", "unexpected argument '%s'", argv[optind]);
	if (state && id)
		return cmd_usage_error("wait", "--state waits on the sandbox: give no EXECID");
	if (!id) {
		if (sbx_sandbox_wait_state(ctx, sb, state, timeout_ms, &err) < 0)
			return cmd_report(&err);
		return 0;
	}
	int status = 0;
	if (sbx_sandbox_job_wait(ctx, sb, id, timeout_ms, &status, &err) < 0)
		return cmd_report(&err);
	return status;
}
