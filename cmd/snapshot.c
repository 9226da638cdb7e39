/* sbx snapshot (create, ls, rm, restore) and sbx fork: a sandbox's files saved, listed,
 * removed, put back, and copied into new sandboxes. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <unistd.h>

#include "core/json.h"
#include "core/snapshot.h"
#include "core/strbuf.h"

static void print_json(const json_t *j)
{
	_cleanup_free_ char *s = sbx_json_dump(j, true);
	puts(s);
}

static int snap_create(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "memory", no_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name = NULL;
	bool json = false, memory = false;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("snapshot");
		if (c == 'N')
			name = optarg;
		else if (c == 'M')
			memory = true;
		else if (c == OPT_JSON)
			json = true;
		else
			return cmd_bad_option("snapshot", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("snapshot", "create: missing sandbox");
	if (optind + 1 < argc)
		return cmd_usage_error("snapshot", "create: one sandbox at a time ('%s' is extra)",
				       argv[optind + 1]);
	struct sbx_err err = { 0 };
	_cleanup_json_ json_t *info = NULL;
	if (sbx_snapshot_create(ctx, argv[optind], name, false, memory, &info, NULL, &err) < 0)
		return cmd_report(&err);
	if (json)
		print_json(info);
	else
		puts(sbx_json_str(info, "id"));
	return 0;
}

static char *human_size(long long n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;
	while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	return u ? xasprintf("%.1f %s", v, units[u]) : xasprintf("%lld B", n);
}

static int snap_ls(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, quiet = false;
	int c;

	while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("snapshot");
		if (c == 'q')
			quiet = true;
		else if (c == OPT_JSON)
			json = true;
		else
			return cmd_bad_option("snapshot", argc, argv);
	}
	if (optind + 1 < argc)
		return cmd_usage_error("snapshot", "ls: one sandbox at a time ('%s' is extra)",
				       argv[optind + 1]);
	struct sbx_err err = { 0 };
	_cleanup_json_ json_t *all = NULL;
	if (sbx_snapshot_list(ctx, optind < argc ? argv[optind] : NULL, &all, &err) < 0)
		return cmd_report(&err);
	if (json) {
		print_json(all);
		return 0;
	}
	size_t i;
	json_t *v;
	if (!quiet)
		printf("%-12s  %-20s  %-20s  %-20s  %10s  %s\n", "ID", "NAME", "SANDBOX", "IMAGE",
		       "SIZE", "CREATED");
	json_array_foreach (all, i, v) {
		const char *id = sbx_json_str(v, "id");
		if (quiet) {
			puts(id ? id : "");
			continue;
		}
		const char *sn = sbx_json_str(v, "sandbox_name");
		_cleanup_free_ char *name = sbx_term_safe(sbx_json_str(v, "name") ?: "-");
		_cleanup_free_ char *sb = sbx_term_safe(sn ? sn : sbx_json_str(v, "sandbox_id") ?: "-");
		_cleanup_free_ char *img = sbx_term_safe(sbx_json_str(v, "image") ?: "-");
		_cleanup_free_ char *size = human_size(sbx_json_int(v, "size", 0));
		const char *when = sbx_json_str(v, "created");
		printf("%-12s  %-20s  %-20s  %-20s  %10s  %s\n", id ? id : "", name, sb, img, size,
		       when ? when : "");
	}
	return 0;
}

static int snap_rm(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ret = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("snapshot");
		return cmd_bad_option("snapshot", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("snapshot", "rm: missing snapshot");
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_snapshot_rm(ctx, argv[i], &err) < 0)
			ret = cmd_report(&err);
		else
			puts(argv[i]);
	}
	return ret;
}

static int snap_restore(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("snapshot");
		return cmd_bad_option("snapshot", argc, argv);
	}
	if (argc - optind != 2)
		return cmd_usage_error("snapshot", "restore takes a sandbox and a snapshot");
	struct sbx_err err = { 0 };
	if (sbx_snapshot_restore(ctx, argv[optind], argv[optind + 1], &err) < 0)
		return cmd_report(&err);
	puts(argv[optind]);
	return 0;
}

int cmd_snapshot(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **, struct sbx_ctx *);
	} subs[] = {
		{ "create", snap_create },
		{ "ls", snap_ls },
		{ "rm", snap_rm },
		{ "restore", snap_restore },
	};

	opterr = 0;
	if (argc < 2)
		return cmd_usage_error("snapshot", "missing subcommand (create, ls, rm, restore)");
	if (streq(argv[1], "-h") || streq(argv[1], "--help"))
		return cmd_print_help("snapshot");
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
		if (streq(argv[1], subs[i].name)) {
			optind = 0;
			return subs[i].fn(argc - 1, argv + 1, ctx);
		}
	return cmd_usage_error("snapshot", "unknown subcommand '%s' (create, ls, rm, restore)",
			       argv[1]);
}

/* sbx fork: SRC is a sandbox (its files now, through a snapshot removed after) or a
 * snapshot */
/* src names sandbox id itself (its name or whole id), not by a prefix of its id */
static bool by_name_or_id(struct sbx_ctx *ctx, const char *src, const char *id)
{
	struct sbx_record *rec = NULL;
	struct sbx_err e = { 0 };

	if (streq(src, id))
		return true;
	bool named = sbx_store_load(&ctx->store, id, &rec, &e) == 0 && rec->name &&
		streq(rec->name, src);
	sbx_record_free(rec);
	return named;
}

/* src is a snapshot's name or whole id */
static bool snapshot_exactly(struct sbx_ctx *ctx, const char *src)
{
	_cleanup_free_ char *id = NULL, *tree = NULL;
	_cleanup_json_ json_t *info = NULL;
	struct sbx_err e = { 0 };

	if (sbx_snapshot_resolve(&ctx->store, src, &id, &e) < 0 ||
	    sbx_snapshot_find(&ctx->store, id, &info, &tree, &e) < 0)
		return false;
	const char *name = sbx_json_str(info, "name");
	return streq(id, src) || (name && streq(name, src));
}

int cmd_fork(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option own[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_free_ struct option *opts = create_longopts(own);
	_cleanup_free_ char *shortopts = create_shortopts("hn:");
	struct create_args a = { 0 };
	long count = 1;
	int c, ret = 0;

	sbx_config_init(&a.o.config);
	opterr = 0;
	/* options go before or after SRC (no '+': getopt moves SRC last) */
	while ((c = getopt_long(argc, argv, shortopts + 1, opts, NULL)) != -1) {
		if (c == 'h') {
			create_args_release(&a);
			return create_help_or_hostname(argc, argv, "fork");
		}
		if (c == 'n') {
			char *end;
			errno = 0;
			count = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || count < 1 || count > 1000) {
				create_args_release(&a);
				return cmd_usage_error("fork", "invalid count '%s' (1 to 1000)",
						       optarg);
			}
			continue;
		}
		int r = c == '?' ? 0 : create_parse_opt(&a, c, optarg, "fork");
		if (r == 1)
			continue;
		create_args_release(&a);
		return r < 0 ? 125 : cmd_bad_option("fork", argc, argv);
	}
	const char *why = a.o.config.from ? "--from is SRC here"
		: optind >= argc	  ? "missing sandbox or snapshot"
		: optind + 1 < argc	  ? "unexpected argument"
					  : NULL;
	if (why) {
		create_args_release(&a);
		if (optind + 1 < argc && !strcmp(why, "unexpected argument"))
			return cmd_usage_error("fork", "unexpected argument '%s'",
					       argv[optind + 1]);
		return cmd_usage_error("fork", "%s", why);
	}
	if (create_args_finish(&a, "fork") < 0) {
		create_args_release(&a);
		return 125;
	}
	const char *src = argv[optind];
	struct sbx_err err = { 0 };
	_cleanup_free_ char *sb_id = NULL;
	_cleanup_json_ json_t *implicit = NULL;
	_cleanup_close_ int hold = -1;
	/* a sandbox by that name first; then a snapshot (one named so exactly before a sandbox
	 * whose id merely begins so) */
	int found = sbx_store_resolve(&ctx->store, src, &sb_id, &err);
	if (((found == 0 && !by_name_or_id(ctx, src, sb_id)) ||
	     (found < 0 && err.kind != SBX_E_NOTFOUND)) &&
	    snapshot_exactly(ctx, src)) {
		found = -1;
		sbx_err_set(&err, SBX_E_NOTFOUND, "'%s' is a snapshot's name", src);
	}
	if (found == 0) {
		if (sbx_snapshot_create(ctx, sb_id, NULL, true, false, &implicit, &hold, &err) <
		    0) {
			create_args_release(&a);
			return cmd_report(&err);
		}
		a.o.config.from = xstrdup(sbx_json_str(implicit, "id"));
	} else if (err.kind == SBX_E_NOTFOUND) {
		err = (struct sbx_err){ 0 };
		a.o.config.from = xstrdup(src);
	} else {
		create_args_release(&a);
		return cmd_report(&err);
	}
	const char *base = a.o.name;
	for (long i = 0; i < count && !ret; i++) {
		_cleanup_free_ char *name = base && count > 1 ? xasprintf("%s-%ld", base, i + 1)
							      : NULL;
		struct sbx_record *rec = NULL;
		if (base)
			a.o.name = name ? name : base;
		if (sbx_sandbox_create(ctx, &a.o, &rec, &err) < 0) {
			if (err.kind == SBX_E_NOTFOUND && !implicit &&
			    strstr(err.msg, "no such snapshot"))
				sbx_err_set(&err, SBX_E_NOTFOUND, "no sandbox or snapshot '%s'",
					    src);
			ret = cmd_report(&err);
		} else {
			puts(rec->id);
			fflush(stdout);
		}
		sbx_record_free(rec);
	}
	a.o.name = base;
	if (implicit) {
		/* gone now, unless the forks stack on it: then it goes with the last of them */
		struct sbx_err e2 = { 0 };
		const char *sid = sbx_json_str(implicit, "id");
		close(TAKE_FD(hold));
		if (!sbx_snapshot_in_use(ctx, sid) && sbx_snapshot_rm(ctx, sid, &e2) < 0 && !ret)
			ret = cmd_report(&e2);
	}
	create_args_release(&a);
	return ret;
}
