/* sbx commit: an image sandbox's changes made a new image. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/image.h"

enum {
	OPT_CHANGE = 2100
};

int cmd_commit(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "change", required_argument, NULL, 'c' },
		{ "message", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_commit_opts o = { 0 };
	char **changes = NULL;
	size_t n = 0;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hc:m:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			sbx_strv_free(changes);
			return cmd_print_help("commit");
		case 'c':
			strv_push(&changes, &n, xstrdup(optarg));
			break;
		case 'm':
			o.message = optarg;
			break;
		default:
			sbx_strv_free(changes);
			return cmd_bad_option("commit", argc, argv);
		}
	}
	if (argc - optind != 2) {
		sbx_strv_free(changes);
		return cmd_usage_error("commit", "give SB and IMAGE[:TAG]");
	}
	o.changes = changes;
	_cleanup_free_ char *id = NULL;
	struct sbx_err err = { 0 };
	int r = sbx_sandbox_commit(ctx, argv[optind], argv[optind + 1], &o, &id, &err);
	sbx_strv_free(changes);
	if (r < 0)
		return cmd_report(&err);
	printf("%s\n", id);
	return 0;
}
