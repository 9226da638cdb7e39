/* sbx ls and sbx inspect: list sandboxes, show one record. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <time.h>

#include "core/json.h"
#include "core/log.h"

static void print_ago(char *buf, size_t n, long long created)
{
	long long d = (long long)time(NULL) - created;

	if (d < 0)
		d = 0;
	if (d < 60)
		snprintf(buf, n, "%lld second%s ago", d, d == 1 ? "" : "s");
	else if (d < 3600)
		snprintf(buf, n, "%lld minute%s ago", d / 60, d / 60 == 1 ? "" : "s");
	else if (d < 86400)
		snprintf(buf, n, "%lld hour%s ago", d / 3600, d / 3600 == 1 ? "" : "s");
	else
		snprintf(buf, n, "%lld day%s ago", d / 86400, d / 86400 == 1 ? "" : "s");
}

/* the record as stored, plus what looking found (pid, OOM kills, idle deadline, ...) */
json_t *cmd_record_view(const struct sbx_record *rec)
{
	json_t *j = sbx_record_to_json(rec);
	/* a hosted provider's access tokens stay in the record, never on the screen */
	json_t *extra = json_object_get(j, "extra");
	if (json_is_object(extra) && json_object_get(extra, "secret")) {
		extra = json_deep_copy(extra);
		json_object_del(extra, "secret");
		json_object_set_new(j, "extra", extra);
	}
	/* the local provider's pid of init, at the top level where scripts look for it */
	json_t *pid = rec->extra ? json_object_get(rec->extra, "init_pid") : NULL;

	if (pid && (rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED))
		json_object_set(j, "pid", pid);
	else
		json_object_set_new(j, "pid", json_null());
	if (rec->live)
		json_object_update(j, rec->live);
	return j;
}

int cmd_ls(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, quiet = false;
	struct sbx_listing l;
	struct sbx_err err = { 0 };
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hq", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("ls");
		case 'q':
			quiet = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("ls", argc, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error("ls", "unexpected argument '%s'", argv[optind]);
	if (sbx_sandbox_list(ctx, &l, &err) < 0)
		return cmd_report(&err);
	for (size_t i = 0; i < l.n_bad; i++)
		sbx_warn(
			"cannot read sandbox record '%s', skipping it (remove it with 'sbx rm -f')",
			l.bad[i]);
	if (json) {
		json_t *a = json_array();
		for (size_t i = 0; i < l.n; i++)
			json_array_append_new(a, cmd_record_view(l.recs[i]));
		char *s = sbx_json_dump(a, true);
		puts(s);
		free(s);
		json_decref(a);
	} else if (quiet) {
		for (size_t i = 0; i < l.n; i++) {
			_cleanup_free_ char *id = sbx_term_safe(l.recs[i]->id);
			puts(id);
		}
	} else {
		printf("%-12s  %-20s  %-8s  %-9s  %s\n", "ID", "NAME", "PROVIDER", "STATE",
		       "CREATED");
		for (size_t i = 0; i < l.n; i++) {
			struct sbx_record *r = l.recs[i];
			char ago[64];
			print_ago(ago, sizeof(ago), r->created);
			/* a record's text is shown as text: a damaged or foreign record cannot drive
			 * the terminal */
			_cleanup_free_ char *id = sbx_term_safe(r->id);
			_cleanup_free_ char *name = sbx_term_safe(r->name ? r->name : "-");
			_cleanup_free_ char *prov = sbx_term_safe(r->provider);
			printf("%-12s  %-20s  %-8s  %-9s  %s\n", id, name, prov,
			       sbx_state_name(r->state), ago);
		}
	}
	sbx_listing_release(&l);
	return 0;
}

/* one sandbox: its record, an object; several: an array of the records found, in the order
 * given, each that cannot be shown reported on stderr (docker inspect's way) */
int cmd_inspect(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("inspect");
		if (c != OPT_JSON) /* JSON is all inspect prints: --json changes nothing */
			return cmd_bad_option("inspect", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("inspect", "missing sandbox");
	bool many = argc - optind > 1;
	json_t *out = many ? json_array() : NULL;
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		struct sbx_record *rec;
		if (sbx_sandbox_get(ctx, argv[i], &rec, &err) < 0) {
			ret = cmd_report(&err);
			continue;
		}
		json_t *j = cmd_record_view(rec);
		sbx_record_free(rec);
		if (many)
			json_array_append_new(out, j);
		else
			out = j;
	}
	if (out) {
		char *s = sbx_json_dump(out, true);
		puts(s);
		free(s);
		json_decref(out);
	}
	return ret;
}
