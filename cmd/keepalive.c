/* sbx keepalive: start the idle timeout of sandboxes again from now, without running anything. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

enum {
	OPT_TTL = 3100
};

int cmd_keepalive(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "ttl", required_argument, NULL, OPT_TTL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long long ttl_ms = 0;
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("keepalive");
		case OPT_TTL:
			ttl_ms = sbx_parse_duration_ms(optarg);
			if (ttl_ms <= 0)
				return cmd_usage_error(
					"keepalive",
					"invalid --ttl '%s': a duration such as 30m, "
					"2h or 90s",
					optarg);
			break;
		default:
			return cmd_bad_option("keepalive", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("keepalive", "missing sandbox");
	/* as docker's verbs over several containers: each is tried, the last failure counts */
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_sandbox_keepalive(ctx, argv[i], ttl_ms, &err) < 0)
			ret = cmd_report(&err);
	}
	return ret;
}
