/* Fuzzes sbx image build's readers of untrusted text: the Dockerfile parser (instructions,
 * directives, continuations, JSON forms, flags), variable substitution and word splitting,
 * and .dockerignore patterns and glob matching. What they return holds together: every
 * instruction has an upper-case name, a line within the input's, and NUL-free strings; a
 * substitution stays within its bound. */
#define _GNU_SOURCE
#include <ctype.h>

#include "core/dockerfile.h"
#include "tests/fuzz/fuzz.h"

static const char *look(const char *name, void *arg)
{
	(void)arg;
	if (!strcmp(name, "A"))
		return "a$A${A}";
	if (!strcmp(name, "EMPTY"))
		return "";
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_dockerfile df;
	struct sbx_err err = { 0 };
	int lines = 1;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (sbx_dockerfile_parse((const char *)data, size, &df, &err) < 0) {
		FUZZ_CHECK(err.kind == SBX_E_USAGE && err.msg[0], "error kind %d", err.kind);
	} else {
		FUZZ_CHECK(df.escape == '\\' || df.escape == '`', "escape %d", df.escape);
		for (size_t i = 0; i < df.n; i++) {
			const struct sbx_df_instr *in = &df.in[i];
			FUZZ_CHECK(in->line >= 1 && in->line <= lines, "line %d of %d", in->line,
				   lines);
			FUZZ_CHECK(in->cmd[0], "an empty instruction");
			for (const char *c = in->cmd; *c; c++)
				FUZZ_CHECK(isupper((unsigned char)*c), "instruction '%s'", in->cmd);
			for (char **f = in->flags; *f; f++)
				FUZZ_CHECK(!strncmp(*f, "--", 2), "flag '%s'", *f);
			struct sbx_err e2 = { 0 };
			char *x = sbx_df_expand(in->args, df.escape, look, NULL, &e2);
			FUZZ_CHECK(x || (e2.kind == SBX_E_USAGE && e2.msg[0]), "expand: no error");
			FUZZ_CHECK(!x || strlen(x) <= SBX_DF_WORD_MAX + 64,
				   "expanded past its bound");
			free(x);
			char **w = sbx_df_words(in->args, df.escape);
			sbx_strv_free(w);
			char **kv = NULL;
			e2 = (struct sbx_err){ 0 };
			if (sbx_df_pairs("ENV", in->args, df.escape, i & 1, look, NULL, &kv, &e2) ==
			    0) {
				for (char **p = kv; *p; p++)
					FUZZ_CHECK((i & 1) || strchr(*p, '='), "pair '%s'", *p);
				sbx_strv_free(kv);
			}
		}
		sbx_dockerfile_release(&df);
	}
	/* the same bytes as a .dockerignore, matched against a few paths and themselves */
	char **pats = sbx_dockerignore_parse((const char *)data, size);
	static const char *const paths[] = { "a", "a/b", "src/x.log", ".git/config", "a/b/c/d" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		(void)sbx_dockerignore_match(pats, paths[i]);
	for (char **p = pats; *p; p++) {
		FUZZ_CHECK(**p && **p != '/', "pattern '%s'", *p);
		(void)sbx_glob_match(*p, *p);
	}
	sbx_strv_free(pats);
	char *s = fuzz_str(data, size);
	char *c = sbx_df_clean(s);
	FUZZ_CHECK(!c || (strncmp(c, "../", 3) && strcmp(c, "..")), "clean '%s'", c);
	free(c);
	free(s);
	return 0;
}
