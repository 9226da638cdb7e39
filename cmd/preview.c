/* sbx preview: a URL on the host for a port inside a sandbox; list and close them. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>

#include "core/json.h"

static int port_arg(const char *s, const char *what, int *ret)
{
	long long v;

	if (sbx_parse_int(s, 1, 65535, &v) < 0)
		return cmd_usage_error("preview", "invalid %s '%s': a port, 1-65535", what, s), -1;
	*ret = (int)v;
	return 0;
}

static void print_list(json_t *a)
{
	size_t i;
	json_t *p;

	if (json_array_size(a) == 0)
		return;
	printf("%-6s  %-9s  %-6s  %-15s  %s\n", "PORT", "HOST PORT", "PUBLIC", "UPSTREAM", "URL");
	json_array_foreach (a, i, p)
		printf("%-6lld  %-9lld  %-6s  %-15s  %s\n",
		       (long long)json_integer_value(json_object_get(p, "port")),
		       (long long)json_integer_value(json_object_get(p, "host_port")),
		       json_is_true(json_object_get(p, "public")) ? "yes" : "no",
		       sbx_json_str(p, "upstream") ?: "-", sbx_json_str(p, "url") ?: "");
}

int cmd_preview(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "host-port", required_argument, NULL, OPT_HOST_PORT },
		{ "public", no_argument, NULL, OPT_PUBLIC },
		{ "no-auth", no_argument, NULL, OPT_NO_AUTH },
		{ "rm", no_argument, NULL, OPT_RM },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_preview_opts o = { 0 };
	struct sbx_err err = { 0 };
	bool json = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("preview");
		case OPT_HOST_PORT:
			if (port_arg(optarg, "--host-port", &o.host_port) < 0)
				return 125;
			break;
		case OPT_PUBLIC:
			o.public = true;
			break;
		case OPT_NO_AUTH:
			o.no_auth = true;
			break;
		case OPT_RM:
			o.rm = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("preview", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("preview", "missing sandbox");
	const char *sb = argv[optind++];
	if (optind < argc && port_arg(argv[optind++], "port", &o.port) < 0)
		return 125;
	if (optind < argc)
		return cmd_usage_error("preview", "unexpected argument '%s'", argv[optind]);
	if (o.rm && !o.port)
		return cmd_usage_error("preview", "--rm needs the port whose preview to close");
	if ((o.rm || !o.port) && (o.public || o.host_port || o.no_auth))
		return cmd_usage_error("preview",
				       "--public, --no-auth and --host-port go with "
				       "opening a preview: sbx preview SB PORT");
	if (o.public && o.no_auth) {
		/* one line: a refusal, not a mistyped command */
		sbx_err_set(&err, SBX_E_USAGE,
			    "--public and --no-auth do not go together: a "
			    "public preview always needs its token");
		return cmd_report(&err);
	}
	_cleanup_json_ json_t *res = NULL;
	if (sbx_sandbox_preview(ctx, sb, &o, &res, &err) < 0)
		return cmd_report(&err);
	if (o.rm)
		return 0;
	if (json) {
		char *s = sbx_json_dump(res, true);
		puts(s);
		free(s);
	} else if (o.port) {
		puts(sbx_json_str(res, "url") ?: "");
	} else {
		print_list(res);
	}
	return 0;
}
