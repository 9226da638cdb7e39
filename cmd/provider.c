/* sbx provider ls: the providers this sbx was built with, and whether each can be used. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/json.h"

static int provider_ls(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("provider");
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("provider", argc, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error("provider", "unexpected argument '%s'", argv[optind]);
	json_t *a = sbx_sandbox_providers();
	if (json) {
		char *s = sbx_json_dump(a, true);
		puts(s);
		free(s);
	} else {
		size_t i;
		json_t *o;
		printf("%-10s  %-10s  %s\n", "NAME", "CONFIGURED", "DETAIL");
		json_array_foreach (a, i, o) {
			const char *kv = sbx_json_str(o, "key_variable");
			const char *url = sbx_json_str(o, "api_url");
			bool ok = json_is_true(json_object_get(o, "configured"));
			const char *why = sbx_json_str(o, "not_ready");
			/* a provider without a key says why it cannot be used */
			_cleanup_free_ char *detail = !kv && !ok && why ? xstrdup(why)
				: !kv ? xstrdup(sbx_json_str(o, "summary"))
				: ok
				? xasprintf("%s is set; API at %s", kv, url ? url : "?")
				: xasprintf("set %s to use it (API at %s)", kv, url ? url : "?");
			/* an API URL comes from the environment: shown as text */
			_cleanup_free_ char *name = sbx_term_safe(sbx_json_str(o, "name"));
			_cleanup_free_ char *safe = sbx_term_safe(detail);
			printf("%-10s  %-10s  %s\n", name, ok ? "yes" : "no", safe);
		}
	}
	json_decref(a);
	return 0;
}

int cmd_provider(int argc, char **argv, struct sbx_ctx *ctx)
{
	(void)ctx;
	if (argc < 2)
		return cmd_usage_error("provider", "missing subcommand (ls)");
	if (streq(argv[1], "-h") || streq(argv[1], "--help"))
		return cmd_print_help("provider");
	if (streq(argv[1], "ls"))
		return provider_ls(argc - 1, argv + 1);
	return cmd_usage_error("provider", "unknown subcommand '%s' (ls)", argv[1]);
}
