/* Dockerfiles read: instructions, variable substitution, .dockerignore patterns (no I/O here). */
#define _GNU_SOURCE
#include "core/dockerfile.h"

#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/util.h"

#define DF_INSTR_MAX 4096
#define DF_FLAGS_MAX 16
#define DF_DEPTH_MAX 8
#define IGNORE_MAX 4096

static void push(char ***v, size_t *n, char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(char *));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

void sbx_dockerfile_release(struct sbx_dockerfile *df)
{
	for (size_t i = 0; i < df->n; i++) {
		free(df->in[i].cmd);
		free(df->in[i].args);
		sbx_strv_free(df->in[i].flags);
		sbx_strv_free(df->in[i].json);
	}
	free(df->in);
	memset(df, 0, sizeof(*df));
}

static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			return false;
	return true;
}

/* "# NAME=VALUE" at the top: 1 (and the name, value set), 0 otherwise */
static int directive(const char *s, size_t n, char *name, size_t nn, char *val, size_t vn)
{
	size_t i = 0, k = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i >= n || s[i++] != '#')
		return 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	while (i < n && isalpha((unsigned char)s[i]) && k + 1 < nn)
		name[k++] = (char)tolower((unsigned char)s[i++]);
	name[k] = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (!k || i >= n || s[i++] != '=')
		return 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	k = 0;
	while (i < n && !isspace((unsigned char)s[i]) && k + 1 < vn)
		val[k++] = s[i++];
	val[k] = 0;
	return blank(s + i, n - i) ? 1 : 0;
}

static char **json_form(const char *s)
{
	if (*s != '[')
		return NULL;
	json_error_t je;
	json_t *a = json_loads(s, JSON_DECODE_ANY, &je);
	if (!json_is_array(a)) {
		if (a)
			json_decref(a);
		return NULL;
	}
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0, i;
	json_t *e;
	json_array_foreach (a, i, e) {
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
			sbx_strv_free(v);
			json_decref(a);
			return NULL;
		}
		push(&v, &n, xstrdup(json_string_value(e)));
	}
	json_decref(a);
	return v;
}

static bool takes_flags(const char *cmd)
{
	return streq(cmd, "FROM") || streq(cmd, "COPY") || streq(cmd, "ADD") || streq(cmd, "RUN") ||
		streq(cmd, "HEALTHCHECK");
}

static bool takes_json(const char *cmd)
{
	return streq(cmd, "RUN") || streq(cmd, "CMD") || streq(cmd, "ENTRYPOINT") ||
		streq(cmd, "SHELL") || streq(cmd, "COPY") || streq(cmd, "ADD") ||
		streq(cmd, "VOLUME");
}

static int instruction(struct sbx_dockerfile *df, int line, const char *text, struct sbx_err *err)
{
	const char *p = text;
	while (isspace((unsigned char)*p))
		p++;
	size_t wl = 0;
	while (p[wl] && !isspace((unsigned char)p[wl]))
		wl++;
	for (size_t i = 0; i < wl; i++)
		if (!isalpha((unsigned char)p[i]))
			return sbx_err_set(err, SBX_E_USAGE,
					   "Dockerfile:%d: '%.*s' is no instruction", line,
					   (int)(wl > 40 ? 40 : wl), p);
	if (df->n >= DF_INSTR_MAX)
		return sbx_err_set(err, SBX_E_USAGE, "Dockerfile:%d: more than %d instructions",
				   line, DF_INSTR_MAX);
	struct sbx_df_instr in = { .line = line, .cmd = xstrndup(p, wl) };
	for (char *c = in.cmd; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	p += wl;
	while (isspace((unsigned char)*p))
		p++;
	size_t nf = 0;
	in.flags = xcalloc(1, sizeof(char *));
	while (takes_flags(in.cmd) && startswith(p, "--")) {
		size_t fl = 0;
		while (p[fl] && !isspace((unsigned char)p[fl]))
			fl++;
		if (fl == 2) { /* "--" ends the flags */
			p += fl;
			while (isspace((unsigned char)*p))
				p++;
			break;
		}
		if (nf >= DF_FLAGS_MAX) {
			free(in.cmd);
			sbx_strv_free(in.flags);
			return sbx_err_set(err, SBX_E_USAGE, "Dockerfile:%d: too many flags", line);
		}
		push(&in.flags, &nf, xstrndup(p, fl));
		p += fl;
		while (isspace((unsigned char)*p))
			p++;
	}
	size_t al = strlen(p);
	while (al && isspace((unsigned char)p[al - 1]))
		al--;
	in.args = xstrndup(p, al);
	if (takes_json(in.cmd))
		in.json = json_form(in.args);
	df->in = xrealloc(df->in, (df->n + 1) * sizeof(*df->in));
	df->in[df->n++] = in;
	return 0;
}

int sbx_dockerfile_parse(const char *text, size_t len, struct sbx_dockerfile *ret,
			 struct sbx_err *err)
{
	memset(ret, 0, sizeof(*ret));
	ret->escape = '\\';
	if (len > SBX_DF_MAX)
		return sbx_err_set(err, SBX_E_USAGE, "the Dockerfile is larger than %d bytes",
				   SBX_DF_MAX);
	if (memchr(text, 0, len))
		return sbx_err_set(err, SBX_E_USAGE, "the Dockerfile holds a NUL byte");
	bool directives = true, cont = false;
	struct strbuf cur = STRBUF_INIT;
	int line = 0, start = 0;
	size_t pos = 0;
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
		pos = 3; /* a byte-order mark */
	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		pos += n + (nl ? 1 : 0);
		line++;
		if (n && s[n - 1] == '\r')
			n--;
		if (directives) {
			char name[32], val[64];
			if (directive(s, n, name, sizeof(name), val, sizeof(val)) == 1) {
				if (streq(name, "escape")) {
					if (strlen(val) != 1 || (val[0] != '\\' && val[0] != '`')) {
						strbuf_release(&cur);
						return sbx_err_set(err, SBX_E_USAGE,
								   "Dockerfile:%d: escape "
								   "must be \\ or `",
								   line);
					}
					ret->escape = val[0];
				}
				continue; /* syntax=, check=, others: nothing to do here */
			}
			directives = false;
		}
		size_t i = 0;
		while (i < n && isspace((unsigned char)s[i]))
			i++;
		if (i == n || s[i] == '#')
			continue; /* blank lines and comments, within an instruction too */
		size_t e = n;
		while (e > i && isspace((unsigned char)s[e - 1]))
			e--;
		bool more = e > i && s[e - 1] == ret->escape;
		if (!cont)
			start = line;
		strbuf_add(&cur, s + (cont ? 0 : i), (more ? e - 1 : e) - (cont ? 0 : i));
		if (cur.len > SBX_DF_MAX) {
			strbuf_release(&cur);
			return sbx_err_set(err, SBX_E_USAGE, "Dockerfile:%d: line too long", line);
		}
		cont = more;
		if (!more) {
			/* continuations of nothing but blanks make no instruction */
			int r = blank(cur.buf, cur.len)
				? 0
				: instruction(ret, start, strbuf_str(&cur), err);
			strbuf_reset(&cur);
			if (r < 0) {
				strbuf_release(&cur);
				sbx_dockerfile_release(ret);
				return -1;
			}
		}
	}
	int r = cont && !blank(cur.buf, cur.len) ? instruction(ret, start, strbuf_str(&cur), err)
						 : 0;
	strbuf_release(&cur);
	if (r < 0)
		sbx_dockerfile_release(ret);
	return r;
}

/* --- substitution --------------------------------------------------------------------------- */

struct expand {
	char escape;
	sbx_df_lookup look;
	void *arg;
	struct sbx_err *err;
	int depth;
};

static int expand_into(struct expand *x, const char *s, size_t n, struct strbuf *out, bool unquote);

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* s[0] is '$': the variable's replacement onto out; *used: bytes of s consumed */
static int variable(struct expand *x, const char *s, size_t n, struct strbuf *out, size_t *used)
{
	if (n >= 2 && s[1] != '{') {
		size_t k = 1;
		while (k < n && name_char(s[k]))
			k++;
		if (k == 1) {
			strbuf_addch(out, '$');
			*used = 1;
			return 0;
		}
		_cleanup_free_ char *nm = xstrndup(s + 1, k - 1);
		const char *v = x->look ? x->look(nm, x->arg) : NULL;
		if (v)
			strbuf_addstr(out, v);
		*used = k;
		return 0;
	}
	if (n < 2) {
		strbuf_addch(out, '$');
		*used = 1;
		return 0;
	}
	size_t k = 2;
	while (k < n && name_char(s[k]))
		k++;
	if (k == 2)
		return sbx_err_set(x->err, SBX_E_USAGE, "bad substitution '%.*s'",
				   (int)(n > 40 ? 40 : n), s);
	_cleanup_free_ char *nm = xstrndup(s + 2, k - 2);
	const char *v = x->look ? x->look(nm, x->arg) : NULL;
	if (k < n && s[k] == '}') {
		if (v)
			strbuf_addstr(out, v);
		*used = k + 1;
		return 0;
	}
	bool colon = k < n && s[k] == ':';
	size_t o = k + (colon ? 1 : 0);
	if (o >= n || !strchr("-+?", s[o]))
		return sbx_err_set(x->err, SBX_E_USAGE, "bad substitution '%.*s'",
				   (int)(n > 40 ? 40 : n), s);
	char op = s[o];
	size_t w = o + 1, depth = 1, e = w;
	for (; e < n; e++) {
		if (s[e] == x->escape && e + 1 < n) {
			e++;
			continue;
		}
		if (s[e] == '{')
			depth++;
		else if (s[e] == '}' && --depth == 0)
			break;
	}
	if (e >= n)
		return sbx_err_set(x->err, SBX_E_USAGE, "missing '}' in '%.*s'",
				   (int)(n > 40 ? 40 : n), s);
	bool set = v && (!colon || *v);
	*used = e + 1;
	if (op == '-' && set) {
		strbuf_addstr(out, v);
		return 0;
	}
	if (op == '+' && !set)
		return 0;
	if (op == '?') {
		if (set) {
			strbuf_addstr(out, v);
			return 0;
		}
		return sbx_err_set(x->err, SBX_E_USAGE, "%s: %.*s", nm,
				   (int)(e - w > 200 ? 200 : e - w), s + w);
	}
	if (++x->depth > DF_DEPTH_MAX)
		return sbx_err_set(x->err, SBX_E_USAGE, "substitutions nest too deep");
	int r = expand_into(x, s + w, e - w, out, false);
	x->depth--;
	return r;
}

static int expand_into(struct expand *x, const char *s, size_t n, struct strbuf *out, bool unquote)
{
	bool dq = false;

	for (size_t i = 0; i < n;) {
		if (out->len > SBX_DF_WORD_MAX)
			return sbx_err_set(x->err, SBX_E_USAGE,
					   "a word grows past %d bytes once substituted",
					   SBX_DF_WORD_MAX);
		char c = s[i];
		if (unquote && c == '\'' && !dq) {
			const char *q = memchr(s + i + 1, '\'', n - i - 1);
			if (!q)
				return sbx_err_set(x->err, SBX_E_USAGE, "unmatched ' in '%.*s'",
						   (int)(n > 60 ? 60 : n), s);
			strbuf_add(out, s + i + 1, (size_t)(q - s - i - 1));
			i = (size_t)(q - s) + 1;
		} else if (unquote && c == '"') {
			dq = !dq;
			i++;
		} else if (c == x->escape && i + 1 < n) {
			char d = s[i + 1];
			if (!unquote || (dq && d != '"' && d != '$' && d != x->escape))
				strbuf_addch(out, c);
			strbuf_addch(out, d);
			i += 2;
		} else if (c == '$') {
			size_t used = 0;
			if (variable(x, s + i, n - i, out, &used) < 0)
				return -1;
			i += used;
		} else {
			strbuf_addch(out, c);
			i++;
		}
	}
	if (dq)
		return sbx_err_set(x->err, SBX_E_USAGE, "unmatched \" in '%.*s'",
				   (int)(n > 60 ? 60 : n), s);
	return 0;
}

char *sbx_df_expand(const char *word, char escape, sbx_df_lookup look, void *arg,
		    struct sbx_err *err)
{
	struct expand x = { .escape = escape, .look = look, .arg = arg, .err = err };
	struct strbuf out = STRBUF_INIT;

	if (expand_into(&x, word, strlen(word), &out, true) < 0) {
		strbuf_release(&out);
		return NULL;
	}
	return strbuf_detach(&out);
}

char **sbx_df_words(const char *s, char escape)
{
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0;
	struct strbuf w = STRBUF_INIT;
	char q = 0;
	bool in = false;

	for (; *s; s++) {
		if (!q && isspace((unsigned char)*s)) {
			if (in)
				push(&v, &n, strbuf_detach(&w));
			in = false;
			continue;
		}
		in = true;
		if (*s == escape && s[1] && q != '\'') {
			strbuf_addch(&w, *s++);
		} else if (!q && (*s == '\'' || *s == '"')) {
			q = *s;
		} else if (q && *s == q) {
			q = 0;
		}
		strbuf_addch(&w, *s);
	}
	if (in)
		push(&v, &n, strbuf_detach(&w));
	strbuf_release(&w);
	return v;
}

int sbx_df_pairs(const char *what, const char *args, char escape, bool allow_bare,
		 sbx_df_lookup look, void *arg, char ***ret, struct sbx_err *err)
{
	char **out = xcalloc(1, sizeof(char *));
	size_t n = 0;
	_cleanup_(strv_freep) char **words = sbx_df_words(args, escape);

	*ret = NULL;
	if (!words[0]) {
		free(out);
		return sbx_err_set(err, SBX_E_USAGE, "%s needs an argument", what);
	}
	if (!strchr(words[0], '=') && !allow_bare) {
		/* the old form: KEY VALUE (the rest of the line) */
		const char *p = args;
		while (*p && !isspace((unsigned char)*p))
			p++;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p) {
			free(out);
			return sbx_err_set(err, SBX_E_USAGE, "%s %s: give a value", what, args);
		}
		char *v = sbx_df_expand(p, escape, look, arg, err);
		if (!v) {
			free(out);
			return -1;
		}
		push(&out, &n, xasprintf("%s=%s", words[0], v));
		free(v);
		*ret = out;
		return 0;
	}
	for (char **w = words; *w; w++) {
		char *eq = strchr(*w, '=');
		if (!eq && !allow_bare) {
			sbx_strv_free(out);
			return sbx_err_set(err, SBX_E_USAGE, "%s: '%s' is not KEY=VALUE", what, *w);
		}
		_cleanup_free_ char *k = eq ? xstrndup(*w, (size_t)(eq - *w)) : xstrdup(*w);
		char *kx = sbx_df_expand(k, escape, look, arg, err);
		char *vx = kx && eq ? sbx_df_expand(eq + 1, escape, look, arg, err) : NULL;
		if (!kx || (eq && !vx) || !*kx) {
			if (kx && !*kx)
				sbx_err_set(err, SBX_E_USAGE, "%s: '%s' has no name", what, *w);
			free(kx);
			free(vx);
			sbx_strv_free(out);
			return -1;
		}
		push(&out, &n, eq ? xasprintf("%s=%s", kx, vx) : xstrdup(kx));
		free(kx);
		free(vx);
	}
	*ret = out;
	return 0;
}

/* --- paths and patterns --------------------------------------------------------------------- */

char *sbx_df_clean(const char *p)
{
	_cleanup_free_ char *t = xstrdup(p);
	char **parts = xcalloc(strlen(p) / 2 + 2, sizeof(char *));
	size_t n = 0;
	char *save = NULL;

	for (char *c = strtok_r(t, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (streq(c, "."))
			continue;
		if (streq(c, "..")) {
			if (!n) {
				free(parts);
				return NULL;
			}
			n--;
			continue;
		}
		parts[n++] = c;
	}
	struct strbuf out = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_addch(&out, '/');
		strbuf_addstr(&out, parts[i]);
	}
	free(parts);
	if (!out.len)
		strbuf_addch(&out, '.');
	return strbuf_detach(&out);
}

/* a bracket expression at p[0] == '[' against c: 1 match, 0 none, -1 malformed; *end past it */
static int bracket(const char *p, char c, const char **end)
{
	const char *q = p + 1;
	bool neg = *q == '^' || *q == '!', hit = false;
	if (neg)
		q++;
	bool first = true;
	while (*q && (first || *q != ']')) {
		first = false;
		char lo = *q;
		if (lo == '\\' && q[1])
			lo = *++q;
		q++;
		char hi = lo;
		if (*q == '-' && q[1] && q[1] != ']') {
			q++;
			if (*q == '\\' && q[1])
				q++;
			hi = *q++;
		}
		if (c >= lo && c <= hi)
			hit = true;
	}
	if (*q != ']')
		return -1;
	*end = q + 1;
	return hit != neg;
}

#define GLOB_PAT_MAX 1024
#define GLOB_MEMO_MAX (1u << 22)

/* a match of pattern p (from pi) against s (from si); memo marks the (pi, si) pairs known to
 * fail, so that no pattern makes this exponential */
struct globm {
	const char *p, *s;
	size_t pl, sl;
	unsigned char *memo;
};

static bool glob_at(struct globm *g, size_t pi, size_t si)
{
	size_t slot = pi * (g->sl + 1) + si;
	if (g->memo[slot / 8] & (1u << (slot % 8)))
		return false;
	const char *p = g->p, *s = g->s;
	bool ok = false;
	while (pi < g->pl) {
		if (p[pi] == '*') {
			size_t stars = 0;
			while (pi + stars < g->pl && p[pi + stars] == '*')
				stars++;
			size_t rest = pi + stars;
			if (stars >= 2 && rest < g->pl && p[rest] == '/') {
				/* "**" then "/": zero or more whole directories */
				ok = glob_at(g, rest + 1, si);
				for (size_t t = si; !ok && t < g->sl; t++)
					if (s[t] == '/')
						ok = glob_at(g, rest + 1, t + 1);
				goto out;
			}
			for (size_t t = si;; t++) {
				if (glob_at(g, rest, t)) {
					ok = true;
					goto out;
				}
				if (t >= g->sl || (stars < 2 && s[t] == '/'))
					goto out;
			}
		}
		if (si >= g->sl)
			goto out;
		if (p[pi] == '?') {
			if (s[si] == '/')
				goto out;
		} else if (p[pi] == '[') {
			const char *end = NULL;
			int m = s[si] == '/' ? 0 : bracket(p + pi, s[si], &end);
			if (m <= 0)
				goto out;
			pi = (size_t)(end - p);
			si++;
			continue;
		} else if (p[pi] == '\\' && pi + 1 < g->pl) {
			pi++;
			if (p[pi] != s[si])
				goto out;
		} else if (p[pi] != s[si]) {
			goto out;
		}
		pi++;
		si++;
	}
	ok = si == g->sl;
out:
	if (!ok)
		g->memo[slot / 8] |= (unsigned char)(1u << (slot % 8));
	return ok;
}

bool sbx_glob_match(const char *pat, const char *s)
{
	struct globm g = { .p = pat, .s = s, .pl = strlen(pat), .sl = strlen(s) };
	if (g.pl > GLOB_PAT_MAX || (g.pl + 1) * (g.sl + 1) > GLOB_MEMO_MAX)
		return false; /* no path is matched by a pattern this long */
	g.memo = xcalloc((g.pl + 1) * (g.sl + 1) / 8 + 1, 1);
	bool ok = glob_at(&g, 0, 0);
	free(g.memo);
	return ok;
}

char **sbx_dockerignore_parse(const char *text, size_t len)
{
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0, pos = 0;

	while (pos < len && n < IGNORE_MAX) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - s) : len - pos;
		pos += l + (nl ? 1 : 0);
		while (l && isspace((unsigned char)s[l - 1]))
			l--;
		while (l && isspace((unsigned char)*s))
			s++, l--;
		if (!l || *s == '#')
			continue;
		bool neg = *s == '!';
		if (neg) {
			s++, l--;
			while (l && isspace((unsigned char)*s))
				s++, l--;
		}
		_cleanup_free_ char *raw = xstrndup(s, l);
		const char *r = raw;
		while (*r == '/')
			r++;
		char *c = sbx_df_clean(*r ? r : ".");
		if (!c)
			continue; /* above the context: matches nothing in it */
		push(&v, &n, neg ? xasprintf("!%s", c) : xstrdup(c));
		free(c);
	}
	return v;
}

bool sbx_dockerignore_match(char *const *patterns, const char *rel)
{
	bool out = false;

	for (char *const *p = patterns; p && *p; p++) {
		bool neg = **p == '!';
		const char *pat = *p + (neg ? 1 : 0);
		bool m = sbx_glob_match(pat, rel);
		/* a pattern that names a directory leaves out what it holds */
		_cleanup_free_ char *t = xstrdup(rel);
		for (char *sl = strrchr(t, '/'); !m && sl; sl = strrchr(t, '/')) {
			*sl = 0;
			m = sbx_glob_match(pat, t);
		}
		if (m)
			out = !neg;
	}
	return out;
}
