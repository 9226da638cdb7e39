/* sbx rm: remove sandboxes, carrying on past failures. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/snapshot.h"

int cmd_rm(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "ignore-missing", no_argument, NULL, OPT_IGNORE_MISSING },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool force = false, ignore_missing = false;
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hf", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("rm");
		case 'f':
			force = true;
			break;
		case OPT_IGNORE_MISSING:
			ignore_missing = true;
			break;
		default:
			return cmd_bad_option("rm", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("rm", "missing sandbox");
	bool gone = false;
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_sandbox_rm(ctx, argv[i], force, &err) < 0) {
			if (ignore_missing && err.kind == SBX_E_NOTFOUND)
				continue; /* already gone: what rm wants */
			cmd_report(&err);
			ret = 125;
		} else {
			puts(argv[i]);
			gone = true;
		}
	}
	/* a snapshot a fork made of a sandbox, kept while forks stacked on it, goes with them */
	if (gone)
		sbx_snapshot_sweep(ctx);
	return ret;
}
