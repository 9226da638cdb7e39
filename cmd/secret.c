/* sbx secret ls: the names of a sandbox's secrets and their hosts (never a value). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/json.h"

int cmd_secret(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL;
	bool json = false;
	int c;

	if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help"))
		return argc < 2 ? cmd_usage_error("secret", "missing subcommand (ls)")
				: cmd_print_help("secret");
	if (!streq(argv[1], "ls"))
		return cmd_usage_error("secret", "unknown subcommand '%s' (ls)", argv[1]);
	argc--;
	argv++;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("secret");
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("secret", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("secret", "missing sandbox");
	if (optind + 1 < argc)
		return cmd_usage_error("secret", "unexpected argument '%s'", argv[optind + 1]);
	if (sbx_sandbox_get(ctx, argv[optind], &rec, &err) < 0)
		return cmd_report(&err);
	const struct sbx_config *cf = &rec->config;
	if (json) {
		json_t *a = json_array();
		for (size_t i = 0; i < cf->n_secrets; i++) {
			json_t *h = json_array();
			for (char **p = cf->secrets[i].hosts; p && *p; p++)
				json_array_append_new(h, json_string(*p));
			json_array_append_new(
				a,
				json_pack("{s:s, s:o}", "name", cf->secrets[i].name, "hosts", h));
		}
		char *s = sbx_json_dump(a, true);
		puts(s);
		free(s);
		json_decref(a);
	} else {
		printf("%-24s %s\n", "NAME", "HOSTS");
		for (size_t i = 0; i < cf->n_secrets; i++) {
			printf("%-24s ", cf->secrets[i].name);
			for (char **p = cf->secrets[i].hosts; p && *p; p++)
				printf("%s%s", p == cf->secrets[i].hosts ? "" : ",", *p);
			putchar('\n');
		}
	}
	sbx_record_free(rec);
	return 0;
}
