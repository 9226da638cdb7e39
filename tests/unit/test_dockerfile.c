/* The Dockerfile reader: instructions, directives, continuations, substitution, .dockerignore. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "core/dockerfile.h"
#include "core/util.h"
#include "tests/unit/harness.h"

static const char *look(const char *name, void *arg)
{
	(void)arg;
	if (streq(name, "A"))
		return "x";
	if (streq(name, "EMPTY"))
		return "";
	return NULL;
}

static void expand_is(const char *in, const char *want)
{
	struct sbx_err err = { 0 };
	char *got = sbx_df_expand(in, '\\', look, NULL, &err);
	CHECK(got && streq(got, want), "expand '%s': '%s', want '%s' (%s)", in,
	      got ? got : "(null)", want, err.msg);
	free(got);
}

static void parse(void)
{
	static const char text[] = "# syntax=docker/dockerfile:1\n"
				   "# escape=`\n"
				   "\n"
				   "from base AS b\n"
				   "# a comment\n"
				   "RUN echo a `\n"
				   "  # inside\n"
				   "  && echo b\n"
				   "COPY --from=b --chown=1:2 /x /y/\n"
				   "CMD [\"a\", \"b c\"]\n"
				   "RUN [not json\n";
	struct sbx_dockerfile df;
	struct sbx_err err = { 0 };

	CHECK(sbx_dockerfile_parse(text, strlen(text), &df, &err) == 0, "parse: %s", err.msg);
	CHECK(df.escape == '`', "escape %c", df.escape);
	CHECK(df.n == 5, "%zu instructions", df.n);
	if (df.n != 5)
		return;
	CHECK(streq(df.in[0].cmd, "FROM") && df.in[0].line == 4, "FROM at %d", df.in[0].line);
	CHECK(streq(df.in[1].args, "echo a   && echo b") && df.in[1].line == 6, "RUN '%s'",
	      df.in[1].args);
	CHECK(streq(df.in[2].flags[0], "--from=b") && streq(df.in[2].flags[1], "--chown=1:2") &&
		      streq(df.in[2].args, "/x /y/"),
	      "COPY flags");
	CHECK(df.in[3].json && streq(df.in[3].json[1], "b c") && !df.in[3].json[2], "CMD json");
	CHECK(!df.in[4].json && streq(df.in[4].args, "[not json"), "shell form kept");
	sbx_dockerfile_release(&df);
	CHECK(sbx_dockerfile_parse("FR0M x\n", 7, &df, &err) < 0 && err.kind == SBX_E_USAGE &&
		      strstr(err.msg, "Dockerfile:1"),
	      "bad instruction: %s", err.msg);
}

static void pairs(void)
{
	struct sbx_err err = { 0 };
	char **kv = NULL;
	CHECK(sbx_df_pairs("ENV", "A=1 B=\"two words\" C=${A}", '\\', false, look, NULL, &kv,
			   &err) == 0 &&
		      streq(kv[0], "A=1") && streq(kv[1], "B=two words") && streq(kv[2], "C=x") &&
		      !kv[3],
	      "ENV pairs");
	sbx_strv_free(kv);
	CHECK(sbx_df_pairs("ENV", "K the rest $A", '\\', false, look, NULL, &kv, &err) == 0 &&
		      streq(kv[0], "K=the rest x") && !kv[1],
	      "ENV old form");
	sbx_strv_free(kv);
	CHECK(sbx_df_pairs("ARG", "N V=1", '\\', true, NULL, NULL, &kv, &err) == 0 &&
		      streq(kv[0], "N") && streq(kv[1], "V=1"),
	      "ARG");
	sbx_strv_free(kv);
}

static void ignore(void)
{
	static const char text[] = "# c\n*.log\n!keep.log\n**/tmp\n/build/\ndocs/?.md\n";
	char **p = sbx_dockerignore_parse(text, strlen(text));
	CHECK(sbx_dockerignore_match(p, "a.log"), "*.log");
	CHECK(!sbx_dockerignore_match(p, "src/a.log"), "*.log is one level");
	CHECK(!sbx_dockerignore_match(p, "keep.log"), "!keep.log");
	CHECK(sbx_dockerignore_match(p, "tmp") && sbx_dockerignore_match(p, "a/b/tmp/c"), "**/tmp");
	CHECK(sbx_dockerignore_match(p, "build/x/y"), "a directory leaves out what it holds");
	CHECK(sbx_dockerignore_match(p, "docs/a.md") && !sbx_dockerignore_match(p, "docs/ab.md"),
	      "?");
	CHECK(!sbx_dockerignore_match(p, "src/main.c"), "no match");
	sbx_strv_free(p);
	CHECK(sbx_glob_match("a/**/b", "a/b") && sbx_glob_match("a/**/b", "a/x/y/b") &&
		      !sbx_glob_match("a/*/b", "a/x/y/b") && sbx_glob_match("[a-c]?", "bz") &&
		      !sbx_glob_match("[!a-c]?", "bz"),
	      "globs");
	char *c = sbx_df_clean("a/./b/../c//");
	CHECK(c && streq(c, "a/c"), "clean '%s'", c);
	free(c);
	CHECK(!sbx_df_clean("a/../../x"), "climbing out");
}

void test_dockerfile(void)
{
	expand_is("$A${A}", "xx");
	expand_is("${NONE:-d}${EMPTY:-e}${EMPTY-f}", "de");
	expand_is("${A:+alt}${NONE:+no}", "alt");
	expand_is("'$A' \"$A\" \\$A", "$A x $A");
	expand_is("${NONE:-${A}}", "x");
	expand_is("a$", "a$");
	struct sbx_err err = { 0 };
	char *x = sbx_df_expand("${A", '\\', look, NULL, &err);
	CHECK(!x && err.kind == SBX_E_USAGE, "unterminated ${");
	free(x);
	parse();
	pairs();
	ignore();
}
