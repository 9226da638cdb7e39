/* sbx fs: read, write, list, stat, remove, make and move a sandbox's files, one verb each. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <stdio.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"

enum {
	OPT_MODE = 2000,
	OPT_FS_JSON
};

/* which options each verb takes */
struct fs_verb {
	const char *name;
	enum sbx_fs_verb verb;
	const char *opts; /* of "mpjrf": --mode -p --json -r/-R -f */
	int min, max;	  /* PATH arguments after SB (max 0: any number) */
};

static const struct fs_verb verbs[] = {
	{ "read", SBX_FS_READ, "", 1, 1 }, { "write", SBX_FS_WRITE, "mp", 1, 1 },
	{ "ls", SBX_FS_LS, "jr", 1, 1 },   { "stat", SBX_FS_STAT, "j", 1, 1 },
	{ "rm", SBX_FS_RM, "rf", 1, 0 },   { "mkdir", SBX_FS_MKDIR, "p", 1, 0 },
	{ "mv", SBX_FS_MV, "", 2, 2 },
};

struct fs_print {
	bool json, full;
	size_t n;
};

/* a path of the sandbox: relative ones are from its '/', as cp's */
static char *absolute(const char *path)
{
	return path[0] == '/' ? xstrdup(path) : xasprintf("/%s", path);
}

static int print_ls(void *arg, const struct sbx_fs_entry *e, struct sbx_err *err)
{
	struct fs_print *p = arg;

	if (p->json) {
		_cleanup_json_ json_t *o = sbx_fs_entry_json(e);
		_cleanup_free_ char *s = sbx_json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		printf("%s%s", p->n ? ",\n" : "[\n", s);
	} else {
		sbx_fs_entry_print(stdout, e, p->full);
	}
	p->n++;
	return 0;
}

static int print_stat(void *arg, const struct sbx_fs_entry *e, struct sbx_err *err)
{
	struct fs_print *p = arg;
	_cleanup_json_ json_t *o = sbx_fs_entry_json(e);

	if (p->json) {
		_cleanup_free_ char *s = sbx_json_dump(o, true);
		printf("%s\n", s);
		return 0;
	}
	_cleanup_free_ char *path = sbx_term_safe(e->path);
	char uid[24] = "-", gid[24] = "-";
	if (e->uid >= 0)
		snprintf(uid, sizeof(uid), "%lld", e->uid);
	if (e->gid >= 0)
		snprintf(gid, sizeof(gid), "%lld", e->gid);
	printf("path: %s\ntype: %s\nsize: %lld\nmode: %s\nuid: %s\ngid: %s\nmtime: %s\n", path,
	       sbx_json_str(o, "type"), e->size, sbx_json_str(o, "mode"), uid, gid,
	       sbx_json_str(o, "mtime"));
	if (e->type == 'l' && e->link_target) {
		_cleanup_free_ char *target = sbx_term_safe(e->link_target);
		printf("link_target: %s\n", target);
	}
	return 0;
}

static int run_verb(const struct fs_verb *v, int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "parents", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, OPT_FS_JSON },
		{ "recursive", no_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_fs_op op = { .verb = v->verb, .mode = -1, .fd = -1 };
	struct fs_print pr = { 0 };
	int c;

	optind = 0;
	opterr = 0;
	/* options may follow SB and PATH ("sbx fs write SB F --mode 600"); '--' ends them */
	while ((c = getopt_long(argc, argv, "hprRf", opts, NULL)) != -1) {
		char key = c == OPT_MODE ? 'm' : c == OPT_FS_JSON ? 'j' : c == 'R' ? 'r' : (char)c;
		if (c == 'h')
			return cmd_print_help("fs");
		if (c == '?' || c == ':')
			return cmd_bad_option("fs", argc, argv);
		if (!strchr(v->opts, key))
			return cmd_usage_error("fs", "'%s' is not an option of 'fs %s'",
					       argv[optind - 1], v->name);
		switch (key) {
		case 'm':
			if ((op.mode = sbx_fs_parse_mode(optarg)) < 0)
				return cmd_usage_error("fs",
						       "--mode wants an octal mode such as "
						       "0644, not '%s'",
						       optarg);
			break;
		case 'p':
			op.parents = true;
			break;
		case 'j':
			pr.json = true;
			break;
		case 'r':
			op.recursive = true;
			break;
		case 'f':
			op.force = true;
			break;
		}
	}
	int n = argc - optind - 1;
	if (n < 0)
		return cmd_usage_error("fs", "missing SB");
	if (n < v->min)
		return cmd_usage_error("fs", "'fs %s' wants %s", v->name,
				       v->verb == SBX_FS_MV ? "SRC and DST" : "a PATH");
	if (v->max && n > v->max)
		return cmd_usage_error("fs", "unexpected argument '%s'", argv[optind + 1 + v->max]);
	const char *sb = argv[optind];
	char **paths = argv + optind + 1;
	for (int i = 0; i < n; i++) {
		if (!*paths[i])
			return cmd_usage_error("fs", "empty path");
		_cleanup_free_ char *a = absolute(paths[i]);
		if ((v->verb == SBX_FS_RM || v->verb == SBX_FS_MV) && a[strspn(a, "/")] == 0)
			return cmd_usage_error("fs", "'fs %s' does not take '/'", v->name);
	}

	struct sbx_err err = { 0 };
	int status = 0;
	pr.full = op.recursive;
	op.arg = &pr;
	switch (v->verb) {
	case SBX_FS_READ:
		fflush(stdout);
		op.fd = STDOUT_FILENO;
		break;
	case SBX_FS_WRITE:
		op.fd = STDIN_FILENO;
		break;
	case SBX_FS_LS:
		op.entry = print_ls;
		break;
	case SBX_FS_STAT:
		op.entry = print_stat;
		break;
	default:
		break;
	}
	/* rm and mkdir: each PATH in turn, each error reported; mv: SRC and DST at once */
	int each = v->verb == SBX_FS_MV ? 1 : n;
	for (int i = 0; i < each; i++) {
		_cleanup_free_ char *path = absolute(paths[i]);
		_cleanup_free_ char *dst = v->verb == SBX_FS_MV ? absolute(paths[1]) : NULL;
		op.path = path;
		op.dst = dst;
		sbx_err_clear(&err);
		int r = sbx_sandbox_fs(ctx, sb, &op, &err);
		if (v->verb == SBX_FS_LS && pr.json)
			printf(pr.n ? "\n]\n" : r < 0 ? "" : "[]\n");
		if (r < 0)
			status = cmd_report(&err);
	}
	return status;
}

int cmd_fs(int argc, char **argv, struct sbx_ctx *ctx)
{
	if (argc < 2)
		return cmd_usage_error("fs", "missing subcommand");
	const char *sub = argv[1];
	if (streq(sub, "-h") || streq(sub, "--help"))
		return cmd_print_help("fs");
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (streq(sub, verbs[i].name))
			return run_verb(&verbs[i], argc - 1, argv + 1, ctx);
	return cmd_usage_error("fs", "unknown subcommand '%s'", sub);
}
