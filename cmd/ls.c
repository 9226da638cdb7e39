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

/* --filter KEY=VALUE, as docker ps: the same key ORs, different keys AND */
static const char *const filter_keys[] = { "id", "name", "label", "state", "provider" };

struct filter {
	size_t key; /* into filter_keys */
	const char *val;
};

static bool filter_one(const struct sbx_record *r, const struct filter *f)
{
	switch (f->key) {
	case 0: /* an id or a prefix of it */
		return startswith(r->id, f->val);
	case 1:
		return r->name && streq(r->name, f->val);
	case 2: { /* label=K=V or label=K (any value) */
		const char *eq = strchr(f->val, '=');
		size_t kl = eq ? (size_t)(eq - f->val) : strlen(f->val);
		for (char **l = r->config.labels; l && *l; l++) {
			if (strncmp(*l, f->val, kl) || ((*l)[kl] != '=' && (*l)[kl]))
				continue;
			if (!eq || streq(*l + kl + ((*l)[kl] == '='), eq + 1))
				return true;
		}
		return false;
	}
	case 3:
		return streq(sbx_state_name(r->state), f->val);
	default:
		return r->provider && streq(r->provider, f->val);
	}
}

static bool filters_match(const struct sbx_record *r, const struct filter *f, size_t n)
{
	for (size_t k = 0; k < ARRAY_SIZE(filter_keys); k++) {
		bool given = false, hit = false;
		for (size_t i = 0; i < n && !hit; i++) {
			if (f[i].key != k)
				continue;
			given = true;
			hit = filter_one(r, &f[i]);
		}
		if (given && !hit)
			return false;
	}
	return true;
}

static int filter_parse(const char *arg, struct filter *f)
{
	const char *eq = strchr(arg, '=');

	for (size_t k = 0; eq && k < ARRAY_SIZE(filter_keys); k++)
		if (strlen(filter_keys[k]) == (size_t)(eq - arg) &&
		    !strncmp(arg, filter_keys[k], (size_t)(eq - arg))) {
			*f = (struct filter){ k, eq + 1 };
			return 0;
		}
	return cmd_usage_error("ls",
			       "invalid filter '%s': use id=, name=, label=KEY[=VALUE], state= or "
			       "provider=",
			       arg),
	       -1;
}

int cmd_ls(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "filter", required_argument, NULL, OPT_FILTER },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, quiet = false;
	_cleanup_free_ struct filter *filters = xcalloc((size_t)argc + 1, sizeof(*filters));
	size_t n_filters = 0;
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
		case OPT_FILTER:
			if (filter_parse(optarg, &filters[n_filters++]) < 0)
				return 125;
			break;
		default:
			return cmd_bad_option("ls", argc, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error("ls", "unexpected argument '%s'", argv[optind]);
	if (sbx_sandbox_list(ctx, &l, &err) < 0)
		return cmd_report(&err);
	size_t kept = 0; /* the records the filters keep, in order */
	for (size_t i = 0; i < l.n; i++) {
		if (filters_match(l.recs[i], filters, n_filters))
			l.recs[kept++] = l.recs[i];
		else
			sbx_record_free(l.recs[i]);
	}
	l.n = kept;
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
		/* the PROVIDER column is as wide as the longest name a record may show */
		int pw = sbx_sandbox_provider_name_max();
		if (pw < 8)
			pw = 8;
		printf("%-12s  %-20s  %-*s  %-9s  %s\n", "ID", "NAME", pw, "PROVIDER", "STATE",
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
			printf("%-12s  %-20s  %-*s  %-9s  %s\n", id, name, pw, prov,
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
