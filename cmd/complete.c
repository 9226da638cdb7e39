/* sbx __complete: words for the shell completions, asked of the binary (podman style). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <getopt.h>
#include <unistd.h>

#include "core/image.h"
#include "core/json.h"
#include "core/snapshot.h"
#include "core/strbuf.h"

/* the images of the store, as people type them: REPOSITORY:TAG (REPOSITORY@DIGEST for a ref
 * by digest); nothing at all when the store has none or cannot be read */
static void print_images(struct sbx_ctx *ctx)
{
	/* a store without images has no refs.json: listing would create the directories */
	_cleanup_free_ char *refs = xasprintf("%s/images/refs.json", ctx->store.root);
	if (access(refs, R_OK) < 0)
		return;
	json_t *a = NULL;
	struct sbx_err err = { 0 };
	if (sbx_image_list(&ctx->store, &a, &err) < 0)
		return; /* completions stay quiet */
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		const char *repo = sbx_json_str(v, "repository"), *tag = sbx_json_str(v, "tag");
		const char *name = sbx_json_str(v, "name"), *at = name ? strrchr(name, '@') : NULL;
		if (!repo || !*repo || !tag || streq(repo, "<none>"))
			continue; /* an image known by its id alone */
		if (streq(tag, "<none>"))
			printf("%s%s\n", repo, at ? at : "");
		else
			printf("%s:%s\n", repo, tag);
	}
	json_decref(a);
}

/* the options in the option column of one line of a help text ("  -q, --quiet   ..."), into
 * opts; how many */
static size_t line_options(const char *line, char *opts[], size_t max)
{
	size_t n = 0;

	for (const char *p = line; *p && p - line <= 24 && n < max; p++) {
		if (p[0] == '-' && (p == line || p[-1] == ' ' || p[-1] == ',') &&
		    ((p[1] == '-' && p[2] && p[2] != ' ') ||
		     (p[1] && p[1] != '-' && p[1] != ' '))) {
			size_t len = strcspn(p, " ,=");
			opts[n++] = xstrndup(p, len);
			p += len - 1;
		}
	}
	return n;
}

/* every option of every command that takes the next word as its value ("-e, --env K=V": the
 * option column names a value after it), once each */
static void print_value_options(void)
{
	struct strbuf seen = STRBUF_INIT;

	strbuf_addch(&seen, ' ');
	for (const struct sbx_command *c = sbx_commands; c->name; c++) {
		_cleanup_free_ char *help = cmd_help_text(c);
		for (const char *l = help; *l;) {
			const char *eol = strchrnul(l, '\n');
			_cleanup_free_ char *line = xstrndup(l, (size_t)(eol - l));
			l = *eol ? eol + 1 : eol;
			char *opts[4];
			size_t n = line_options(line, opts, ARRAY_SIZE(opts));
			/* what follows the last option: " VALUE" takes one, "   text" does not */
			const char *after = n ? strstr(line, opts[n - 1]) + strlen(opts[n - 1])
					      : "";
			bool value = after[0] == ' ' && after[1] && after[1] != ' ';
			for (size_t i = 0; i < n; i++) {
				_cleanup_free_ char *key = xasprintf(" %s ", opts[i]);
				if (value && !strstr(strbuf_str(&seen), key)) {
					puts(opts[i]);
					strbuf_addstr(&seen, key + 1);
				}
				free(opts[i]);
			}
		}
	}
	strbuf_release(&seen);
}

/* whether opt is among the options of the usage lines of 'sbx CMD SUB' ("[-q]", "[--json]") */
static bool sub_usage_has(const struct sbx_command *c, const char *sub, const char *opt)
{
	_cleanup_free_ char *head = xasprintf("sbx %s %s", c->name, sub);
	size_t hl = strlen(head), ol = strlen(opt);

	for (const char *l = c->usage; l && *l;) {
		const char *eol = strchrnul(l, '\n'), *p = l + strspn(l, " ");
		l = *eol ? eol + 1 : eol;
		if (strncmp(p, head, hl) || (p[hl] != ' ' && p + hl != eol))
			continue;
		for (p += hl; p < eol; p++)
			if ((p[-1] == ' ' || p[-1] == '[' || p[-1] == '|') &&
			    !strncmp(p, opt, ol) && strchr(" ]|\n", p[ol]))
				return true;
	}
	return false;
}

/* whether the usage of 'sbx CMD' has a line for the subcommand sub */
static bool has_sub_usage(const struct sbx_command *c, const char *sub)
{
	_cleanup_free_ char *head = xasprintf("sbx %s %s", c->name, sub);
	size_t hl = strlen(head);

	for (const char *l = c->usage; l && *l;) {
		const char *eol = strchrnul(l, '\n'), *p = l + strspn(l, " ");
		l = *eol ? eol + 1 : eol;
		if (!strncmp(p, head, hl) && (p[hl] == ' ' || p + hl == eol))
			return true;
	}
	return false;
}

/* whether a help line names the subcommands it is for ("rm: ...", "pull: ...; ls: ..."), and
 * whether sub is one of them: an option letter two subcommands use for different things (-f)
 * then goes to the right one */
static bool line_labels(const char *line, const char *sub, bool *ret_for_sub)
{
	const char *d = line + strspn(line, " ");
	d += strcspn(d, " "); /* past the first option */
	bool labelled = false;
	*ret_for_sub = false;
	for (const char *p = d; (p = strchr(p, ':')); p++) {
		const char *w = p;
		while (w > d && w[-1] >= 'a' && w[-1] <= 'z')
			w--;
		if (w == p || (w > d && w[-1] != ' '))
			continue;
		labelled = true;
		if ((size_t)(p - w) == strlen(sub) && !strncmp(w, sub, (size_t)(p - w)))
			*ret_for_sub = true;
	}
	return labelled;
}

/* long and short options of a command, from its help text; with sub ('sbx image pull'), only
 * the lines of the options that the usage of 'sbx CMD SUB' shows, with their other spellings
 * (-q gives --quiet too) */
static void print_options(const struct sbx_command *c, const char *sub)
{
	_cleanup_free_ char *help = cmd_help_text(c);
	const char *h = help;

	while (h && *h) {
		const char *eol = strchrnul(h, '\n');
		_cleanup_free_ char *line = xstrndup(h, (size_t)(eol - h));
		char *opts[4];
		size_t n = line_options(line, opts, ARRAY_SIZE(opts));
		bool show = !sub, for_sub = false;
		for (size_t i = 0; i < n && !show; i++)
			show = sub_usage_has(c, sub, opts[i]);
		if (show && sub && line_labels(line, sub, &for_sub) && !for_sub)
			show = false;
		for (size_t i = 0; i < n; i++) {
			if (show)
				printf("%s\n", opts[i]);
			free(opts[i]);
		}
		h = *eol ? eol + 1 : eol;
	}
	if (c->summary)
		printf("-h\n--help\n");
}

int cmd_complete(int argc, char **argv, struct sbx_ctx *ctx)
{
	if (argc < 2)
		return cmd_usage_error("__complete", "missing word kind");
	const char *what = argv[1];
	if (streq(what, "commands")) {
		for (const struct sbx_command *c = sbx_commands; c->name; c++)
			if (c->summary)
				puts(c->name);
	} else if (streq(what, "providers")) {
		json_t *ps = sbx_sandbox_providers();
		size_t i;
		json_t *p;
		json_array_foreach (ps, i, p)
			puts(sbx_json_str(p, "name"));
		json_decref(ps);
	} else if (streq(what, "sandboxes")) {
		char **ids;
		size_t n;
		struct sbx_err err = { 0 };
		if (sbx_store_list_ids(&ctx->store, &ids, &n, &err) < 0)
			return 0; /* completions stay quiet */
		for (size_t i = 0; i < n; i++) {
			struct sbx_record *rec;
			if (sbx_store_load(&ctx->store, ids[i], &rec, &err) < 0)
				continue;
			puts(rec->name ? rec->name : rec->id);
			sbx_record_free(rec);
		}
		sbx_strv_free(ids);
	} else if (streq(what, "images")) {
		print_images(ctx);
	} else if (streq(what, "snapshots")) {
		json_t *all = NULL;
		struct sbx_err err = { 0 };
		size_t i;
		json_t *v;
		if (sbx_snapshot_list(ctx, NULL, &all, &err) < 0)
			return 0; /* completions stay quiet */
		json_array_foreach (all, i, v) {
			const char *n = sbx_json_str(v, "name");
			if (!json_is_true(json_object_get(v, "implicit")))
				puts(n ? n : sbx_json_str(v, "id"));
		}
		json_decref(all);
	} else if (streq(what, "value-options")) {
		print_value_options();
	} else if (streq(what, "options")) {
		if (argc < 3)
			return cmd_usage_error("__complete", "missing command");
		const struct sbx_command *c = cmd_find(argv[2]);
		if (!c)
			return 0;
		/* 'options image pull': pull's own; a word that is no subcommand: all of them */
		const char *sub = argc > 3 ? argv[3] : NULL;
		if (sub && streq(c->name, "image") && streq(sub, "list"))
			sub = "ls";
		if (sub && !has_sub_usage(c, sub))
			sub = NULL;
		print_options(c, sub);
	} else {
		return cmd_usage_error("__complete", "unknown word kind '%s'", what);
	}
	return 0;
}
