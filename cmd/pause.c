/* sbx pause and sbx resume: freeze a sandbox or release its processes; bring it back. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

int cmd_pause(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "release", no_argument, NULL, 'r' },
		{ "checkpoint", no_argument, NULL, 'c' },
		{ "grace", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_pause_opts o = { .grace_ms = 10000 };
	bool grace_set = false;
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("pause");
		case 'r':
			o.release = true;
			break;
		case 'c':
			o.checkpoint = true;
			break;
		case 'g':
			o.grace_ms = sbx_parse_duration_ms(optarg);
			if (o.grace_ms < 0)
				return cmd_usage_error("pause",
						       "invalid duration '%s' (use e.g. 10s, "
						       "500ms)",
						       optarg);
			grace_set = true;
			break;
		default:
			return cmd_bad_option("pause", argc, argv);
		}
	}
	if (o.checkpoint && o.release)
		return cmd_usage_error("pause", "--checkpoint and --release are exclusive");
	if (grace_set && !o.release)
		return cmd_usage_error("pause", "--grace goes with --release");
	if (optind >= argc)
		return cmd_usage_error("pause", "missing sandbox");
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_sandbox_pause(ctx, argv[i], &o, &err) < 0) {
			cmd_report(&err);
			ret = 125;
		} else {
			puts(argv[i]);
		}
	}
	return ret;
}

int cmd_resume(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("resume");
		return cmd_bad_option("resume", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("resume", "missing sandbox");
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_sandbox_resume(ctx, argv[i], &err) < 0) {
			cmd_report(&err);
			ret = 125;
		} else {
			puts(argv[i]);
		}
	}
	return ret;
}
