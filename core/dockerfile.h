/* Dockerfiles read: instructions, variable substitution, .dockerignore patterns (no I/O here). */
#ifndef SBX_CORE_DOCKERFILE_H
#define SBX_CORE_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

#define SBX_DF_MAX (1 << 20)	  /* bytes of a Dockerfile */
#define SBX_DF_WORD_MAX (1 << 16) /* bytes of one word after substitution */

struct sbx_df_instr {
	int line;     /* where it starts (1-based) */
	char *cmd;    /* the instruction, upper case */
	char *args;   /* what follows the instruction and its flags, lines joined */
	char **flags; /* "--NAME=VALUE" (or "--NAME"), NULL-terminated */
	char **json;  /* the exec (JSON) form's strings, NULL-terminated; NULL: shell form */
};

struct sbx_dockerfile {
	struct sbx_df_instr *in;
	size_t n;
	char escape; /* '\\' or '`' (the escape= directive) */
};

/* text (len bytes) -> its instructions; USAGE naming the line when it cannot be read */
int sbx_dockerfile_parse(const char *text, size_t len, struct sbx_dockerfile *ret,
			 struct sbx_err *err);
void sbx_dockerfile_release(struct sbx_dockerfile *df);

/* a variable's value, or NULL when it is not set */
typedef const char *(*sbx_df_lookup)(const char *name, void *arg);

/* one word with $VAR, ${VAR}, ${VAR:-word}, ${VAR:+word}, ${VAR-word}, ${VAR+word} replaced and
 * quotes ('...', "...") and escapes removed, as docker does for ENV, COPY, WORKDIR... */
char *sbx_df_expand(const char *word, char escape, sbx_df_lookup look, void *arg,
		    struct sbx_err *err);
/* s split into words at blanks outside quotes (quotes and escapes kept, for sbx_df_expand) */
char **sbx_df_words(const char *s, char escape);
/* ENV, LABEL, ARG: "K=V K2=V2" or "K V" (the old form, one pair) -> "K=V" strings with the
 * values expanded (look NULL: none); USAGE when malformed */
int sbx_df_pairs(const char *what, const char *args, char escape, bool allow_bare,
		 sbx_df_lookup look, void *arg, char ***ret, struct sbx_err *err);

/* .dockerignore: its patterns, cleaned ("!" kept in front of an exception) */
char **sbx_dockerignore_parse(const char *text, size_t len);
/* whether the context path rel ("a/b", no leading "/") is left out */
bool sbx_dockerignore_match(char *const *patterns, const char *rel);
/* a path glob (*, ?, [...], \, and ** across '/') against a whole path */
bool sbx_glob_match(const char *pat, const char *s);
/* a path cleaned as filepath.Clean does (no "." or ".." left where it can go, no "//"); NULL
 * when it climbs out of its root ("../x") */
char *sbx_df_clean(const char *p);

#endif
