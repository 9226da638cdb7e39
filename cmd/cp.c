/* sbx cp: copy files between the host and a sandbox, or a tar stream, as docker cp does. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

/* "SB:PATH" -> SB, PATH. Local, as in docker: a path that starts with '/' or '.', or has no ':'
 * before its first '/' (write ./a:b for a local file named a:b) */
static bool split_remote(const char *arg, char **ret_sb, const char **ret_path)
{
	const char *colon = strchr(arg, ':');
	const char *slash = strchr(arg, '/');

	if (arg[0] == '/' || arg[0] == '.' || !colon || (slash && slash < colon))
		return false;
	*ret_sb = xstrndup(arg, (size_t)(colon - arg));
	*ret_path = colon + 1;
	return true;
}

int cmd_cp(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "archive", no_argument, NULL, 'a' },
		{ "follow-link", no_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_cp_opts o = { 0 };
	struct sbx_err err = { 0 };
	_cleanup_free_ char *src_sb = NULL, *dst_sb = NULL;
	const char *src_path = NULL, *dst_path = NULL;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+haL", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("cp");
		case 'a':
			o.archive = true;
			break;
		case 'L':
			o.follow_links = true;
			break;
		default:
			return cmd_bad_option("cp", argc, argv);
		}
	}
	if (argc - optind < 2)
		return cmd_usage_error("cp",
				       argc == optind ? "missing SRC and DST" : "missing DST");
	if (argc - optind > 2)
		return cmd_usage_error("cp", "unexpected argument '%s'", argv[optind + 2]);
	const char *src = argv[optind], *dst = argv[optind + 1];
	if (!*src || !*dst)
		return cmd_usage_error("cp", "empty path");
	bool in_src = split_remote(src, &src_sb, &src_path);
	bool in_dst = split_remote(dst, &dst_sb, &dst_path);
	if (in_src && in_dst)
		return cmd_usage_error("cp",
				       "both '%s' and '%s' are in a sandbox; one side must be "
				       "a host path or '-'",
				       src, dst);
	if (!in_src && !in_dst)
		return cmd_usage_error("cp",
				       "neither '%s' nor '%s' is SB:PATH; one side must be "
				       "in a sandbox",
				       src, dst);
	if ((in_src && (!*src_sb || !*src_path)) || (in_dst && (!*dst_sb || !*dst_path)))
		return cmd_usage_error("cp", "'%s' is not SB:PATH", in_src ? src : dst);

	if (in_dst && streq(src, "-")) {
		r = sbx_sandbox_cp_in(ctx, dst_sb, STDIN_FILENO, dst_path, &o, &err);
	} else if (in_dst) {
		r = sbx_sandbox_cp_from_host(ctx, src, dst_sb, dst_path, &o, &err);
	} else if (streq(dst, "-")) {
		fflush(stdout);
		r = sbx_sandbox_cp_out(ctx, src_sb, src_path, STDOUT_FILENO, &o, &err);
	} else {
		r = sbx_sandbox_cp_to_host(ctx, src_sb, src_path, dst, &o, &err);
	}
	return r < 0 ? cmd_report(&err) : 0;
}
