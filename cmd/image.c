/* sbx image: pull, import, save, tag, ls, rm and prune the local image store. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "core/build.h"
#include "core/image.h"
#include "core/json.h"
#include "core/registry.h"

enum {
	OPT_IMPORT_NAME = 2000,
	OPT_BUILD_ARG,
	OPT_TARGET,
	OPT_NO_CACHE,
	OPT_BUILD_NET,
};

static const char *short_id(const char *id)
{
	return id && strlen(id) > 7 + 12 ? id + 7 : (id ? id : "");
}

/* the 12 characters of an id a table shows, cut before it is made terminal-safe */
static char *short_id_safe(const char *id)
{
	const char *s = short_id(id);
	return sbx_term_safe_n(s, strnlen(s, 12));
}

static int image_pull(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "platform", required_argument, NULL, OPT_PLATFORM },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_image_pull_opts po = { 0 };
	bool quiet = false;
	int c;

	while ((c = getopt_long(argc, argv, "+hq", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("image");
		case 'q':
			quiet = true;
			break;
		case OPT_PLATFORM:
			po.platform = optarg;
			break;
		case OPT_INSECURE:
			po.insecure = true;
			break;
		default:
			return cmd_bad_option("image", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("image", "pull: missing image reference");
	if (optind + 1 < argc)
		return cmd_usage_error("image", "pull: one image at a time ('%s' is extra)",
				       argv[optind + 1]);
	po.progress = !quiet && isatty(2) == 1;
	struct sbx_image img = { 0 };
	struct sbx_err err = { 0 };
	if (sbx_image_pull(&ctx->store, argv[optind], &po, &img, &err) < 0)
		return cmd_report(&err);
	printf("%s\n", img.id);
	sbx_image_release(&img);
	return 0;
}

static int image_import(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "rootfs", no_argument, NULL, OPT_ROOTFS },
		{ "name", required_argument, NULL, OPT_IMPORT_NAME },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool rootfs = false;
	const char *name = NULL;
	int c;
	struct sbx_err err = { 0 };

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		if (c == OPT_ROOTFS)
			rootfs = true;
		else if (c == OPT_IMPORT_NAME)
			name = optarg;
		else
			return cmd_bad_option("image", argc, argv);
	}
	if (rootfs && name)
		return cmd_usage_error("image",
				       "import --rootfs takes its NAME[:TAG] as an argument, "
				       "not --name");
	if (rootfs) {
		if (argc - optind != 2)
			return cmd_usage_error("image",
					       "import --rootfs: give DIR|TAR and NAME[:TAG]");
		_cleanup_free_ char *id = NULL;
		if (sbx_image_import_rootfs(&ctx->store, argv[optind], argv[optind + 1], &id,
					    &err) < 0)
			return cmd_report(&err);
		printf("%s\n", id);
		return 0;
	}
	if (argc - optind != 1)
		return cmd_usage_error("image",
				       "import: give one FILE (a docker save or OCI-layout "
				       "tar, or - for stdin)");
	char **lines = NULL;
	if (sbx_image_import(&ctx->store, argv[optind], name, &lines, &err) < 0)
		return cmd_report(&err);
	for (char **l = lines; l && *l; l++) {
		_cleanup_free_ char *line = sbx_term_safe(*l); /* names an archive chose */
		printf("%s\n", line);
	}
	sbx_strv_free(lines);
	return 0;
}

static int image_build(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "tag", required_argument, NULL, 't' },
		{ "file", required_argument, NULL, 'f' },
		{ "build-arg", required_argument, NULL, OPT_BUILD_ARG },
		{ "target", required_argument, NULL, OPT_TARGET },
		{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
		{ "net", required_argument, NULL, OPT_BUILD_NET },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_build_opts o = { .out = stderr };
	_cleanup_(strv_freep) char **args = xcalloc(1, sizeof(char *));
	size_t n = 0;
	int c;

	while ((c = getopt_long(argc, argv, "+hqt:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("image");
		case 't':
			o.tag = optarg;
			break;
		case 'f':
			o.dockerfile = optarg;
			break;
		case 'q':
			o.quiet = true;
			break;
		case OPT_BUILD_ARG:
			strv_push(&args, &n, xstrdup(optarg));
			break;
		case OPT_TARGET:
			o.target = optarg;
			break;
		case OPT_NO_CACHE:
			o.no_cache = true;
			break;
		case OPT_BUILD_NET:
			o.net = optarg;
			break;
		default:
			return cmd_bad_option("image", argc, argv);
		}
	}
	if (!o.tag)
		return cmd_usage_error("image", "build: give the image's name with -t NAME[:TAG]");
	if (optind >= argc)
		return cmd_usage_error("image", "build: give the build context (a directory)");
	if (optind + 1 < argc)
		return cmd_usage_error("image", "build: one context ('%s' is extra)",
				       argv[optind + 1]);
	o.context = argv[optind];
	o.args = args;
	o.terminal = isatty(2) == 1;
	_cleanup_free_ char *id = NULL;
	struct sbx_err err = { 0 };
	if (sbx_build(ctx, &o, &id, &err) < 0)
		return cmd_report(&err);
	printf("%s\n", id);
	return 0;
}

static int image_tag(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		return cmd_bad_option("image", argc, argv);
	}
	if (argc - optind != 2)
		return cmd_usage_error("image",
				       "tag: give SOURCE (a name or an id) and "
				       "NAME[:TAG]");
	struct sbx_err err = { 0 };
	if (sbx_image_tag(&ctx->store, argv[optind], argv[optind + 1], &err) < 0)
		return cmd_report(&err);
	return 0;
}

static int image_save(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "+ho:", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		else if (c == 'o')
			out = optarg;
		else
			return cmd_bad_option("image", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("image", "save: give the images to save");
	if (!out && isatty(1) == 1)
		return cmd_usage_error("image",
				       "save: refusing to write a tar to a terminal; give -o "
				       "FILE or redirect the output");
	struct sbx_err err = { 0 };
	int fd = 1;
	_cleanup_free_ char *tmp = out ? xasprintf("%s.sbx-save-%d", out, (int)getpid()) : NULL;
	if (out && (fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0) {
		sbx_err_errno(&err, "cannot create '%s'", tmp);
		return cmd_report(&err);
	}
	int r = sbx_image_save(&ctx->store, argv + optind, (size_t)(argc - optind), fd, &err);
	if (out) {
		if (r == 0 && close(fd) < 0)
			r = sbx_err_errno(&err, "cannot write '%s'", tmp);
		else if (r < 0)
			close(fd);
		if (r == 0 && rename(tmp, out) < 0)
			r = sbx_err_errno(&err, "cannot create '%s'", out);
		if (r < 0)
			(void)unlink(tmp);
	}
	return r < 0 ? cmd_report(&err) : 0;
}

static void human_size(long long b, char *out, size_t n)
{
	if (b >= 1 << 30)
		snprintf(out, n, "%.1f GiB", (double)b / (1 << 30));
	else if (b >= 1 << 20)
		snprintf(out, n, "%.1f MiB", (double)b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(out, n, "%.1f KiB", (double)b / (1 << 10));
	else
		snprintf(out, n, "%lld B", b);
}

static int image_ls(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, quiet = false;
	int c;

	while ((c = getopt_long(argc, argv, "+hq", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		else if (c == 'q')
			quiet = true;
		else if (c == OPT_JSON)
			json = true;
		else
			return cmd_bad_option("image", argc, argv);
	}
	if (optind < argc)
		return cmd_usage_error("image", "ls: unexpected argument '%s'", argv[optind]);
	json_t *a = NULL;
	struct sbx_err err = { 0 };
	if (sbx_image_list(&ctx->store, &a, &err) < 0)
		return cmd_report(&err);
	size_t i;
	json_t *v;
	if (json) {
		char *t = sbx_json_dumps(a, JSON_INDENT(2));
		printf("%s\n", t);
		free(t);
	} else if (quiet) {
		json_array_foreach (a, i, v) {
			_cleanup_free_ char *id = short_id_safe(sbx_json_str(v, "id"));
			printf("%s\n", id);
		}
	} else {
		printf("%-40s  %-16s  %-12s  %-20s  %-10s  %s\n", "REPOSITORY", "TAG", "IMAGE ID",
		       "CREATED", "SIZE", "ORIGIN");
		json_array_foreach (a, i, v) {
			char sz[32], when[32];
			time_t t = (time_t)json_integer_value(json_object_get(v, "created"));
			struct tm tm;
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
			human_size(json_integer_value(json_object_get(v, "size")), sz, sizeof(sz));
			/* what the store's refs say is shown as text, never as terminal controls */
			_cleanup_free_ char *repo = sbx_term_safe(sbx_json_str(v, "repository")
									  ?: "");
			_cleanup_free_ char *tag = sbx_term_safe(sbx_json_str(v, "tag") ?: "");
			_cleanup_free_ char *id = short_id_safe(sbx_json_str(v, "id"));
			printf("%-40s  %-16s  %-12s  %-20s  %-10s  %s\n", repo, tag, id, when, sz,
			       sbx_json_str(v, "origin") ?: "pulled");
		}
	}
	json_decref(a);
	return 0;
}

static int image_rm(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool force = false;
	int c, ret = 0;

	while ((c = getopt_long(argc, argv, "+hf", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		else if (c == 'f')
			force = true;
		else
			return cmd_bad_option("image", argc, argv);
	}
	if (optind >= argc)
		return cmd_usage_error("image", "rm: missing image reference");
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_image_rm(&ctx->store, argv[i], force, &err) < 0)
			ret = cmd_report(&err);
		else
			printf("%s\n", argv[i]);
	}
	return ret;
}

static int image_prune(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h')
			return cmd_print_help("image");
		return cmd_bad_option("image", argc, argv);
	}
	if (optind < argc)
		return cmd_usage_error("image", "prune: unexpected argument '%s'", argv[optind]);
	long long layers, blobs, bytes;
	struct sbx_err err = { 0 };
	sbx_build_sweep(ctx); /* what killed builds left goes first */
	if (sbx_image_prune(&ctx->store, &layers, &blobs, &bytes, &err) < 0)
		return cmd_report(&err);
	printf("removed %lld layers, %lld blobs (%.1f MiB)\n", layers, blobs,
	       (double)bytes / (1 << 20));
	return 0;
}

int cmd_image(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **, struct sbx_ctx *);
	} subs[] = {
		{ "pull", image_pull }, { "import", image_import }, { "save", image_save },
		{ "tag", image_tag },	{ "ls", image_ls },	    { "list", image_ls },
		{ "rm", image_rm },	{ "prune", image_prune },   { "build", image_build },
	};

	if (argc < 2)
		return cmd_usage_error("image",
				       "missing subcommand (build, pull, import, save, tag, ls, "
				       "rm, prune)");
	if (streq(argv[1], "-h") || streq(argv[1], "--help") || streq(argv[1], "help"))
		return cmd_print_help("image");
	for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
		if (streq(argv[1], subs[i].name)) {
			optind = 0;
			opterr = 0;
			return subs[i].fn(argc - 1, argv + 1, ctx);
		}
	return cmd_usage_error("image",
			       "unknown subcommand '%s' (build, pull, import, save, tag, ls, "
			       "rm, prune)",
			       argv[1]);
}
