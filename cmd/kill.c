/* sbx kill: a signal to a detached command's process group, or to every process of a
 * sandbox. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <signal.h>
#include <string.h>

#include "core/jobs.h"

/* "KILL", "SIGKILL", "kill" or "9"; 0 when it is none */
static int parse_signal(const char *s)
{
	char *end;

	if (*s >= '0' && *s <= '9') {
		long n = strtol(s, &end, 10);
		return *end || n < 1 || n > SIGRTMAX ? 0 : (int)n;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int n = 1; n < SIGRTMIN; n++) {
		const char *ab = sigabbrev_np(n);
		if (ab && strcasecmp(ab, s) == 0)
			return n;
	}
	return 0;
}

int cmd_kill(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "signal", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_err err = { 0 };
	int sig = SIGKILL, c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hs:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("kill");
		case 's':
			sig = parse_signal(optarg);
			if (!sig)
				return cmd_usage_error("kill", "invalid signal '%s'", optarg);
			break;
		case OPT_JSON: /* errors as JSON (cmd_report) */
			break;
		default:
			return cmd_bad_option("kill", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("kill", "missing sandbox");
	const char *sb = argv[optind++];
	const char *id = optind < argc ? argv[optind++] : NULL;
	if (optind < argc)
		return cmd_usage_error("kill", "unexpected argument '%s'", argv[optind]);
	if (sbx_sandbox_job_kill(ctx, sb, id, sig, &err) < 0)
		return cmd_report(&err);
	return 0;
}
