/* sbx image build: a Dockerfile's stages and steps, the layer cache, the image config. */
#define _GNU_SOURCE
#include "core/build-int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/image-int.h"
#include "core/json.h"
#include "core/log.h"
#include "core/net.h"
#include "core/strbuf.h"
#include "core/util.h"

#define SHOW_MAX 120

struct stage {
	char *name; /* AS NAME, lower case; NULL: none */
	struct build_state s;
	json_t *args; /* the ARGs declared in it: name -> value (null: none) */
	size_t first, end;
	bool built, cmd_set;
};

struct run {
	struct build *b;
	struct stage *stages;
	size_t n_stages;
	json_t *given;	 /* --build-arg: name -> value */
	json_t *globals; /* ARGs before the first FROM */
};

static void state_copy(struct build_state *to, const struct build_state *from)
{
	to->config = json_deep_copy(from->config);
	to->layers = xcalloc(from->n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < from->n_layers; i++)
		to->layers[i] = xstrdup(from->layers[i]);
	to->n_layers = from->n_layers;
	memcpy(to->key, from->key, sizeof(to->key));
	memcpy(to->id, from->id, sizeof(to->id));
}

static json_t *obj_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_object(v)) {
		v = json_object();
		json_object_set_new(o, key, v);
	}
	return v;
}

static json_t *arr_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_array(v)) {
		v = json_array();
		json_object_set_new(o, key, v);
	}
	return v;
}

/* --- variables ------------------------------------------------------------------------------ */

static const char *env_get(json_t *cfg, const char *name)
{
	size_t i, n = strlen(name);
	json_t *v;
	json_array_foreach (json_object_get(json_object_get(cfg, "config"), "Env"), i, v) {
		const char *s = json_string_value(v);
		if (s && !strncmp(s, name, n) && s[n] == '=')
			return s + n + 1;
	}
	return NULL;
}

struct scope {
	json_t *cfg;  /* the image config: its Env first (NULL: none) */
	json_t *args; /* then the ARGs */
};

static const char *look(const char *name, void *arg)
{
	struct scope *sc = arg;
	const char *v = sc->cfg ? env_get(sc->cfg, name) : NULL;
	return v ? v : json_string_value(json_object_get(sc->args, name));
}

/* --- steps ---------------------------------------------------------------------------------- */

static void say(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct build *b, const char *fmt, ...)
{
	if (b->o->quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(b->o->out, fmt, ap);
	va_end(ap);
	fflush(b->o->out);
}

static void step_line(struct build *b, const struct sbx_df_instr *in)
{
	struct strbuf line = STRBUF_INIT;
	for (char **f = in->flags; f && *f; f++)
		strbuf_addf(&line, "%s ", *f);
	strbuf_addstr(&line, in->args);
	b->step++;
	_cleanup_free_ char *t = sbx_term_safe_n(line.buf, strnlen(line.buf, SHOW_MAX));
	const char *more = line.len > SHOW_MAX ? "..." : "";
	if (b->o->terminal)
		say(b, "[%d/%d] %s %s%s\n", b->step, b->steps, in->cmd, t, more);
	else
		say(b, "#%d %s %s%s\n", b->step, in->cmd, t, more);
	strbuf_release(&line);
}

static void cached(struct build *b)
{
	if (b->o->terminal)
		say(b, "[%d/%d] CACHED\n", b->step, b->steps);
	else
		say(b, "#%d CACHED\n", b->step);
}

/* the state's config stored as a blob: its id */
static int state_store(struct build *b, struct build_state *s, struct sbx_err *err)
{
	_cleanup_free_ char *t = json_dumps(s->config, JSON_COMPACT | JSON_SORT_KEYS);
	return img_put_blob(&b->ctx->store, t, strlen(t), s->id, err);
}

static void history(struct build_state *s, const char *by, bool empty)
{
	_cleanup_free_ char *now = sbx_time_rfc3339(sbx_now_ms() / 1000);
	json_t *h = json_pack("{s:s, s:s}", "created", now, "created_by", by);
	if (empty)
		json_object_set_new(h, "empty_layer", json_true());
	json_array_append_new(arr_of(s->config, "history"), h);
	json_object_set_new(s->config, "created", json_string(now));
}

static void add_layer(struct build_state *s, const struct sbx_layer *l)
{
	json_t *rootfs = obj_of(s->config, "rootfs");
	json_object_set_new(rootfs, "type", json_string("layers"));
	json_array_append_new(arr_of(rootfs, "diff_ids"), json_string(l->diff_id));
	s->layers = xrealloc(s->layers, (s->n_layers + 2) * sizeof(char *));
	s->layers[s->n_layers++] = xstrdup(l->blob);
	s->layers[s->n_layers] = NULL;
}

static int bad(const struct sbx_df_instr *in, struct sbx_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(const struct sbx_df_instr *in, struct sbx_err *err, const char *fmt, ...)
{
	char m[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	return sbx_err_set(err, SBX_E_USAGE, "Dockerfile:%d: %s: %s", in->line, in->cmd, m);
}

/* an expanded word list of an instruction: its JSON form, or its words */
static char **words_of(const struct sbx_df_instr *in, char esc, struct scope *sc,
		       struct sbx_err *err)
{
	_cleanup_(strv_freep) char **raw = in->json ? NULL : sbx_df_words(in->args, esc);
	char **src = in->json ? in->json : raw;
	size_t n = 0;
	while (src[n])
		n++;
	char **v = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		v[i] = in->json ? xstrdup(src[i]) : sbx_df_expand(src[i], esc, look, sc, err);
		if (!v[i]) {
			sbx_strv_free(v);
			sbx_err_prefix(err, "Dockerfile:%d: %s", in->line, in->cmd);
			return NULL;
		}
	}
	return v;
}

static const char *flag_of(const struct sbx_df_instr *in, const char *name)
{
	size_t n = strlen(name);
	for (char **f = in->flags; f && *f; f++)
		if (!strncmp(*f + 2, name, n) && (*f)[2 + n] == '=')
			return *f + 3 + n;
	return NULL;
}

static int flags_ok(const struct sbx_df_instr *in, const char *const *known, struct sbx_err *err)
{
	for (char **f = in->flags; f && *f; f++) {
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++) {
			size_t n = strlen(*k);
			ok = !strncmp(*f + 2, *k, n) && ((*f)[2 + n] == '=' || !(*f)[2 + n]);
		}
		if (!ok)
			return bad(in, err, "the flag '%.40s' is not supported here", *f);
	}
	return 0;
}

static struct stage *stage_named(struct run *r, const char *name, size_t before)
{
	for (size_t i = 0; i < before; i++)
		if (r->stages[i].name && !strcasecmp(r->stages[i].name, name))
			return &r->stages[i];
	long long k;
	if (sbx_parse_int(name, 0, (long long)before - 1, &k) == 0)
		return &r->stages[k];
	return NULL;
}

static int image_state(struct build *b, const char *ref, struct build_state *s, struct sbx_err *err)
{
	struct sbx_image img = { 0 };
	if (sbx_image_find(&b->ctx->store, ref, &img, err) < 0) {
		if (err->kind != SBX_E_NOTFOUND)
			return -1;
		*err = (struct sbx_err){ 0 };
		struct sbx_image_pull_opts po = { .progress = b->o->terminal && !b->o->quiet };
		if (sbx_image_pull(&b->ctx->store, ref, &po, &img, err) < 0)
			return -1;
	}
	s->config = json_deep_copy(img.config);
	s->layers = xcalloc(img.n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < img.n_layers; i++)
		s->layers[i] = xstrdup(img.layers[i]);
	s->n_layers = img.n_layers;
	snprintf(s->id, sizeof(s->id), "%s", img.id);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < img.n_layers; i++)
		rc = img_hold(&b->ctx->store, img.layers[i], err);
	sbx_image_release(&img);
	_cleanup_free_ char *k = xasprintf("FROM %s", s->id);
	return rc < 0 ? -1 : sbx_sha256_buf(k, strlen(k), s->key, err);
}

static int step_from(struct run *r, size_t si, struct sbx_err *err)
{
	struct build *b = r->b;
	struct stage *st = &r->stages[si];
	const struct sbx_df_instr *in = &b->df.in[st->first];
	struct scope sc = { .args = r->globals };
	static const char *const known[] = { "platform", NULL };

	if (flags_ok(in, known, err) < 0)
		return -1;
	_cleanup_(strv_freep) char **w = words_of(in, b->df.escape, &sc, err);
	if (!w)
		return -1;
	size_t n = 0;
	while (w[n])
		n++;
	if (!(n == 1 || (n == 3 && !strcasecmp(w[1], "as"))))
		return bad(in, err, "give IMAGE or IMAGE AS NAME");
	if (n == 3)
		st->name = xstrdup(w[2]);
	const char *plat = flag_of(in, "platform");
	if (plat && !startswith(plat, "linux/amd64") && !startswith(plat, "$"))
		sbx_warn("Dockerfile:%d: --platform=%s: the image is pulled for this host's "
			 "platform, linux/amd64",
			 in->line, plat);
	struct stage *prev = stage_named(r, w[0], si);
	if (prev && prev->name && !strcasecmp(prev->name, w[0])) {
		state_copy(&st->s, &prev->s);
	} else if (streq(w[0], "scratch")) {
		st->s.config = json_pack("{s:s, s:s, s:{}, s:{s:s, s:[]}, s:[]}", "architecture",
					 "amd64", "os", "linux", "config", "rootfs", "type",
					 "layers", "diff_ids", "history");
		st->s.layers = xcalloc(1, sizeof(char *));
		if (sbx_sha256_buf("FROM scratch", 12, st->s.key, err) < 0 ||
		    state_store(b, &st->s, err) < 0)
			return -1;
	} else if (image_state(b, w[0], &st->s, err) < 0) {
		return sbx_err_prefix(err, "Dockerfile:%d: FROM", in->line);
	}
	st->args = json_object();
	return 0;
}

/* ENV, LABEL, EXPOSE, USER, CMD, ENTRYPOINT, SHELL, STOPSIGNAL, VOLUME, ONBUILD, MAINTAINER */
static int step_config(struct run *r, struct stage *st, const struct sbx_df_instr *in,
		       struct sbx_err *err)
{
	struct build *b = r->b;
	char esc = b->df.escape;
	struct scope sc = { .cfg = st->s.config, .args = st->args };
	json_t *cfg = obj_of(st->s.config, "config");
	const char *c = in->cmd;

	if (streq(c, "ENV") || streq(c, "LABEL")) {
		_cleanup_(strv_freep) char **kv = NULL;
		if (sbx_df_pairs(c, in->args, esc, false, look, &sc, &kv, err) < 0)
			return sbx_err_prefix(err, "Dockerfile:%d", in->line);
		for (char **p = kv; *p; p++) {
			char *eq = strchr(*p, '=');
			_cleanup_free_ char *k = xstrndup(*p, (size_t)(eq - *p));
			if (streq(c, "LABEL")) {
				json_object_set_new(obj_of(cfg, "Labels"), k, json_string(eq + 1));
				continue;
			}
			json_t *env = arr_of(cfg, "Env");
			size_t i, kl = strlen(k);
			json_t *e;
			bool done = false;
			json_array_foreach (env, i, e) {
				const char *s = json_string_value(e);
				if (!done && s && !strncmp(s, k, kl) && s[kl] == '=') {
					json_array_set_new(env, i, json_string(*p));
					done = true;
				}
			}
			if (!done)
				json_array_append_new(env, json_string(*p));
		}
		return 0;
	}
	if (streq(c, "CMD") || streq(c, "ENTRYPOINT") || streq(c, "SHELL")) {
		json_t *a = json_array();
		if (in->json) {
			for (char **p = in->json; *p; p++)
				json_array_append_new(a, json_string(*p));
		} else if (streq(c, "SHELL")) {
			json_decref(a);
			return bad(in, err,
				   "give the shell as a JSON array: SHELL [\"/bin/sh\", \"-c\"]");
		} else {
			json_t *sh = json_object_get(cfg, "Shell");
			if (json_is_array(sh)) {
				json_array_extend(a, sh);
			} else {
				json_array_append_new(a, json_string("/bin/sh"));
				json_array_append_new(a, json_string("-c"));
			}
			json_array_append_new(a, json_string(in->args));
		}
		json_object_set_new(cfg,
				    streq(c, "CMD")		? "Cmd"
					    : streq(c, "SHELL") ? "Shell"
								: "Entrypoint",
				    a);
		if (streq(c, "CMD"))
			st->cmd_set = true;
		else if (streq(c, "ENTRYPOINT") && !st->cmd_set)
			json_object_set_new(cfg, "Cmd", json_null());
		return 0;
	}
	if (streq(c, "ONBUILD")) {
		json_array_append_new(arr_of(cfg, "OnBuild"), json_string(in->args));
		return 0;
	}
	if (streq(c, "MAINTAINER")) {
		json_object_set_new(st->s.config, "author", json_string(in->args));
		return 0;
	}
	_cleanup_(strv_freep) char **w = words_of(in, esc, &sc, err);
	if (!w)
		return -1;
	if (!w[0])
		return bad(in, err, "needs an argument");
	if (streq(c, "USER") || streq(c, "STOPSIGNAL")) {
		if (w[1])
			return bad(in, err, "takes one argument");
		json_object_set_new(cfg, streq(c, "USER") ? "User" : "StopSignal",
				    json_string(w[0]));
	} else if (streq(c, "EXPOSE")) {
		for (char **p = w; *p; p++) {
			char *sl = strchr(*p, '/'), *end = NULL;
			long port = strtol(*p, &end, 10);
			const char *proto = sl ? sl + 1 : "tcp";
			if (end != (sl ? sl : *p + strlen(*p)) || port < 1 || port > 65535 ||
			    !(streq(proto, "tcp") || streq(proto, "udp") || streq(proto, "sctp")))
				return bad(in, err, "'%s': give PORT or PORT/tcp, /udp, /sctp", *p);
			_cleanup_free_ char *k = xasprintf("%ld/%s", port, proto);
			json_object_set_new(obj_of(cfg, "ExposedPorts"), k, json_object());
		}
	} else if (streq(c, "VOLUME")) {
		for (char **p = w; *p; p++)
			json_object_set_new(obj_of(cfg, "Volumes"), *p, json_object());
	}
	return 0;
}

static char *arg_env_text(struct stage *st)
{
	struct strbuf t = STRBUF_INIT;
	const char *k;
	json_t *v;
	json_object_foreach (st->args, k, v)
		if (json_is_string(v) && !env_get(st->s.config, k))
			strbuf_addf(&t, "%s=%s\n", k, json_string_value(v));
	return strbuf_detach(&t);
}

static int step_run(struct run *r, struct stage *st, const struct sbx_df_instr *in,
		    struct sbx_layer *l, struct sbx_err *err)
{
	struct build *b = r->b;
	json_t *cfg = obj_of(st->s.config, "config");
	char **argv = NULL;
	size_t n = 0;

	if (in->flags && in->flags[0])
		return bad(in, err, "'%.40s' is not supported by sbx image build", in->flags[0]);
	if (!st->s.n_layers)
		return bad(in, err, "the stage has no files to run anything with (FROM scratch)");
	if (in->json) {
		while (in->json[n])
			n++;
		argv = xcalloc(n + 1, sizeof(char *));
		for (size_t i = 0; i < n; i++)
			argv[i] = xstrdup(in->json[i]);
	} else {
		_cleanup_(strv_freep) char **sh = sbx_json_strv(json_object_get(cfg, "Shell"));
		if (!sh || !sh[0]) {
			sbx_strv_free(sh);
			sh = xcalloc(3, sizeof(char *));
			sh[0] = xstrdup("/bin/sh");
			sh[1] = xstrdup("-c");
		}
		while (sh[n])
			n++;
		argv = xcalloc(n + 2, sizeof(char *));
		for (size_t i = 0; i < n; i++)
			argv[i] = xstrdup(sh[i]);
		argv[n] = xstrdup(in->args);
	}
	if (!argv[0]) {
		free(argv);
		return bad(in, err, "needs a command");
	}
	_cleanup_free_ char *et = arg_env_text(st);
	char **env = xcalloc(1, sizeof(char *));
	size_t ne = 0;
	char *save = NULL;
	for (char *line = strtok_r(et, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		env = xrealloc(env, (ne + 2) * sizeof(char *));
		env[ne++] = xstrdup(line);
		env[ne] = NULL;
	}
	int status = 0;
	int rc = build_run(b, &st->s, argv, env, sbx_json_str(cfg, "User"), l, &status, err);
	sbx_strv_free(argv);
	sbx_strv_free(env);
	if (rc == 0 && status != 0) {
		_cleanup_free_ char *t = sbx_term_safe_n(in->args, strnlen(in->args, 60));
		return sbx_err_set(err, SBX_E_STATE,
				   "Dockerfile:%d: RUN %s%s failed with exit status %d", in->line,
				   t, strlen(in->args) > 60 ? "..." : "", status);
	}
	return rc < 0 ? sbx_err_prefix(err, "Dockerfile:%d: RUN", in->line) : 0;
}

static int copy_req_of(struct run *r, struct stage *st, size_t si, const struct sbx_df_instr *in,
		       struct copy_req *rq, char ***words, struct sbx_err *err)
{
	struct build *b = r->b;
	struct scope sc = { .cfg = st->s.config, .args = st->args };
	static const char *const known[] = { "from", "chown", "chmod", "link", NULL };

	memset(rq, 0, sizeof(*rq));
	rq->uid = rq->gid = rq->mode = -1;
	rq->add = streq(in->cmd, "ADD");
	if (flags_ok(in, known, err) < 0)
		return -1;
	/* the flags' values are substituted too */
	const char *raw[3] = { flag_of(in, "from"), flag_of(in, "chown"), flag_of(in, "chmod") };
	_cleanup_free_ char *from = NULL, *chown = NULL, *chmod = NULL;
	char **val[3] = { &from, &chown, &chmod };
	for (size_t i = 0; i < 3; i++)
		if (raw[i] && !(*val[i] = sbx_df_expand(raw[i], b->df.escape, look, &sc, err)))
			return sbx_err_prefix(err, "Dockerfile:%d: %s", in->line, in->cmd);
	if (chown &&
	    sbx_image_chown_ids(&b->ctx->store, st->s.layers, st->s.n_layers, chown, &rq->uid,
				&rq->gid, err) < 0)
		return sbx_err_prefix(err, "Dockerfile:%d: %s --chown=%s", in->line, in->cmd,
				      chown);
	if (chmod) {
		char *end = NULL;
		long m = strtol(chmod, &end, 8);
		if (!*chmod || *end || m < 0 || m > 07777)
			return bad(in, err, "--chmod=%s: give octal permissions", chmod);
		rq->mode = m;
	}
	if (from && rq->add)
		return bad(in, err, "--from goes with COPY");
	char **w = words_of(in, b->df.escape, &sc, err);
	if (!w)
		return -1;
	*words = w;
	size_t n = 0;
	while (w[n])
		n++;
	if (n < 2)
		return bad(in, err, "give SOURCE... DEST");
	for (size_t i = 0; i + 1 < n; i++)
		if (strstr(w[i], "://"))
			return bad(in, err,
				   "'%s': sources from URLs are not supported; download the file "
				   "into the context and ADD or COPY it",
				   w[i]);
	const char *dest = w[n - 1];
	const char *wd = sbx_json_str(json_object_get(st->s.config, "config"), "WorkingDir");
	_cleanup_free_ char *abs = dest[0] == '/' ? xstrdup(dest)
						  : xasprintf("%s/%s", wd && *wd ? wd : "", dest);
	char *clean = sbx_df_clean(abs + 1);
	if (!clean)
		return bad(in, err, "'%s': the destination climbs out of the root", dest);
	rq->dest = clean;
	rq->dest_dir = dest[strlen(dest) - 1] == '/' || n > 2 || streq(clean, ".") ||
		strpbrk(w[0], "*?[") || (streq(dest, ".") || streq(dest, ".."));
	free(w[n - 1]);
	w[n - 1] = NULL;
	rq->srcs = w;
	if (from) {
		struct stage *fs = stage_named(r, from, si);
		if (fs) {
			rq->from = &fs->s;
		} else {
			struct build_state *s = xcalloc(1, sizeof(*s));
			if (image_state(b, from, s, err) < 0) {
				build_state_release(s);
				free(s);
				return sbx_err_prefix(err, "Dockerfile:%d: COPY --from", in->line);
			}
			rq->from = s;
		}
	} else if (!rq->dest_dir && !strpbrk(w[0], "*?[")) {
		/* one directory of the context: its contents go to dest */
		_cleanup_free_ char *c = sbx_df_clean(w[0][0] == '/' ? w[0] + 1 : w[0]);
		struct stat sb;
		if (c &&
		    (streq(c, ".") ||
		     (fstatat(b->ctx_fd, c, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))))
			rq->dest_dir = true;
	}
	return 0;
}

static void copy_req_release(struct run *r, struct copy_req *rq)
{
	free((char *)rq->dest);
	bool own = rq->from;
	for (size_t i = 0; own && i < r->n_stages; i++)
		if (rq->from == &r->stages[i].s)
			own = false;
	if (own) {
		build_state_release(rq->from);
		free(rq->from);
	}
}

/* ARG NAME[=DEFAULT]...: --build-arg, else the default, else (in a stage) the global one */
static int do_arg(struct run *r, json_t *args, json_t *cfg, const struct sbx_df_instr *in,
		  bool global, struct sbx_err *err)
{
	struct scope sc = { .cfg = cfg, .args = args };
	_cleanup_(strv_freep) char **kv = NULL;

	if (sbx_df_pairs("ARG", in->args, r->b->df.escape, true, look, &sc, &kv, err) < 0)
		return sbx_err_prefix(err, "Dockerfile:%d", in->line);
	for (char **p = kv; *p; p++) {
		char *eq = strchr(*p, '=');
		_cleanup_free_ char *k = eq ? xstrndup(*p, (size_t)(eq - *p)) : xstrdup(*p);
		json_t *g = json_object_get(r->given, k);
		json_t *v = g ? json_incref(g)
			: eq  ? json_string(eq + 1)
			: !global && json_object_get(r->globals, k)
			? json_incref(json_object_get(r->globals, k))
			: json_null();
		json_object_set_new(args, k, v);
	}
	return 0;
}

/* an instruction sbx image build can run; checked for all of them before any runs */
static int known(const struct sbx_df_instr *in, struct sbx_err *err)
{
	static const char *const names[] = { "FROM",	   "ENV",    "LABEL",	   "EXPOSE",
					     "USER",	   "CMD",    "ENTRYPOINT", "SHELL",
					     "STOPSIGNAL", "VOLUME", "ONBUILD",	   "MAINTAINER",
					     "ARG",	   "RUN",    "COPY",	   "ADD",
					     "WORKDIR" };
	if (streq(in->cmd, "HEALTHCHECK"))
		return bad(in, err,
			   "not supported by sbx image build (sbx runs no health checks); "
			   "remove it");
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (streq(in->cmd, names[i]))
			return 0;
	return bad(in, err, "unknown instruction");
}

static int step(struct run *r, size_t si, size_t ii, struct sbx_err *err)
{
	struct build *b = r->b;
	struct stage *st = &r->stages[si];
	const struct sbx_df_instr *in = &b->df.in[ii];
	const char *c = in->cmd;
	struct copy_req rq = { 0 };
	_cleanup_(strv_freep) char **words = NULL;
	_cleanup_free_ char *wd = NULL;
	char digest[72] = "";
	int rc = 0;

	step_line(b, in);
	if (streq(c, "ARG") && do_arg(r, st->args, st->s.config, in, false, err) < 0)
		return -1;
	if (streq(c, "CMD"))
		st->cmd_set = true;
	/* what the step's result depends on, beyond the state it starts from */
	struct strbuf t = STRBUF_INIT;
	strbuf_addf(&t, "%s\n", c);
	for (char **f = in->flags; f && *f; f++)
		strbuf_addf(&t, "%s\n", *f);
	strbuf_addf(&t, "%s\n", in->args);
	_cleanup_free_ char *ae = arg_env_text(st);
	strbuf_addstr(&t, ae);
	if (streq(c, "COPY") || streq(c, "ADD")) {
		if (copy_req_of(r, st, si, in, &rq, &words, err) < 0 ||
		    build_copy_digest(b, &rq, digest, err) < 0) {
			strbuf_release(&t);
			copy_req_release(r, &rq);
			if (!startswith(err->msg, "Dockerfile:"))
				sbx_err_prefix(err, "Dockerfile:%d", in->line);
			return -1;
		}
		strbuf_addf(&t, "%s\n%s\n%s\n", rq.dest, rq.dest_dir ? "dir" : "file", digest);
	}
	if (streq(c, "WORKDIR")) {
		struct scope sc = { .cfg = st->s.config, .args = st->args };
		_cleanup_free_ char *x = sbx_df_expand(in->args, b->df.escape, look, &sc, err);
		if (!x || !*x) {
			strbuf_release(&t);
			return x ? bad(in, err, "needs a directory")
				 : sbx_err_prefix(err, "Dockerfile:%d", in->line);
		}
		const char *cur = sbx_json_str(json_object_get(st->s.config, "config"),
					       "WorkingDir");
		_cleanup_free_ char *j = x[0] == '/'
			? xstrdup(x)
			: xasprintf("%s/%s", cur && *cur ? cur : "", x);
		_cleanup_free_ char *cl = sbx_df_clean(j + 1);
		wd = xasprintf("/%s", cl && !streq(cl, ".") ? cl : "");
		strbuf_addf(&t, "%s\n", wd);
	}
	char key[72];
	_cleanup_free_ char *kt = xasprintf("%s\n%s", st->s.key, strbuf_str(&t));
	strbuf_release(&t);
	if (sbx_sha256_buf(kt, strlen(kt), key, err) < 0) {
		copy_req_release(r, &rq);
		return -1;
	}
	if (!b->o->no_cache && build_cache_get(b, key, &st->s)) {
		cached(b);
		copy_req_release(r, &rq);
		return 0;
	}
	struct sbx_layer l;
	_cleanup_free_ char *by = xasprintf("%s %s", c, in->args);
	if (streq(c, "RUN")) {
		rc = step_run(r, st, in, &l, err);
	} else if (streq(c, "COPY") || streq(c, "ADD")) {
		rc = build_copy_layer(b, &rq, &l, err);
		if (rc < 0 && !startswith(err->msg, "Dockerfile:"))
			sbx_err_prefix(err, "Dockerfile:%d: %s", in->line, c);
	} else if (streq(c, "WORKDIR")) {
		json_object_set_new(obj_of(st->s.config, "config"), "WorkingDir", json_string(wd));
		rc = build_workdir_layer(b, wd, &l, err);
		if (rc < 0)
			sbx_err_prefix(err, "Dockerfile:%d: WORKDIR", in->line);
	} else if (!streq(c, "ARG")) {
		rc = step_config(r, st, in, err);
	}
	copy_req_release(r, &rq);
	if (rc < 0)
		return -1;
	bool layer = streq(c, "RUN") || streq(c, "COPY") || streq(c, "ADD") || streq(c, "WORKDIR");
	if (layer)
		add_layer(&st->s, &l);
	if (!streq(c, "ARG"))
		history(&st->s, by, !layer);
	memcpy(st->s.key, key, sizeof(key));
	if (state_store(b, &st->s, err) < 0)
		return -1;
	build_cache_put(b, &st->s);
	return 0;
}

static int given_args(struct run *r, char *const *args, struct sbx_err *err)
{
	r->given = json_object();
	for (char *const *a = args; a && *a; a++) {
		const char *eq = strchr(*a, '=');
		_cleanup_free_ char *k = eq ? xstrndup(*a, (size_t)(eq - *a)) : xstrdup(*a);
		const char *v = eq ? eq + 1 : getenv(k);
		if (!*k)
			return sbx_err_set(err, SBX_E_USAGE, "--build-arg '%s': give NAME=VALUE",
					   *a);
		if (v)
			json_object_set_new(r->given, k, json_string(v));
	}
	return 0;
}

static char *read_dockerfile(struct build *b, size_t *len, struct sbx_err *err)
{
	const char *f = b->o->dockerfile;
	char *t = f && streq(f, "-") ? sbx_read_fd(0, SBX_DF_MAX + 1, len)
		: f		     ? sbx_read_file(f, SBX_DF_MAX + 1, len)
		    : sbx_read_fileat(b->ctx_fd, "Dockerfile", SBX_DF_MAX + 1, len);
	if (!t)
		sbx_err_errno(err, "cannot read '%s'",
			      b->o->dockerfile ? b->o->dockerfile : "Dockerfile");
	if (!t && errno == ENOENT)
		err->kind = SBX_E_USAGE;
	return t;
}

static int build(struct build *b, struct run *r, char **ret_id, struct sbx_err *err)
{
	_cleanup_free_ char *nm = NULL;
	size_t len = 0;

	if (sbx_image_name(b->o->tag, &nm, err) < 0)
		return -1;
	if (b->o->net) { /* checked before anything runs */
		struct sbx_config c;
		char msg[300];
		sbx_config_init(&c);
		int bad_net = sbx_net_parse_mode(b->o->net, &c.net, msg, sizeof(msg));
		sbx_config_release(&c);
		if (bad_net < 0)
			return sbx_err_set(err, SBX_E_USAGE, "--net: %s", msg);
	}
	b->ctx_fd = open(b->o->context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b->ctx_fd < 0)
		return sbx_err_errno(err, "cannot open the build context '%s'", b->o->context);
	_cleanup_free_ char *text = read_dockerfile(b, &len, err);
	if (!text || sbx_dockerfile_parse(text, len, &b->df, err) < 0)
		return -1;
	size_t ilen = 0;
	_cleanup_free_ char *ign = sbx_read_fileat(b->ctx_fd, ".dockerignore", 1 << 20, &ilen);
	b->ignore = ign ? sbx_dockerignore_parse(ign, ilen) : xcalloc(1, sizeof(char *));
	if (given_args(r, b->o->args, err) < 0)
		return -1;
	for (size_t k = 0; k < b->df.n; k++)
		if (known(&b->df.in[k], err) < 0)
			return -1;
	r->globals = json_object();
	size_t i = 0;
	for (; i < b->df.n && !streq(b->df.in[i].cmd, "FROM"); i++) {
		if (!streq(b->df.in[i].cmd, "ARG"))
			return sbx_err_set(err, SBX_E_USAGE,
					   "Dockerfile:%d: %s before the first FROM (only ARG "
					   "may come before it)",
					   b->df.in[i].line, b->df.in[i].cmd);
		if (do_arg(r, r->globals, NULL, &b->df.in[i], true, err) < 0)
			return -1;
	}
	if (i == b->df.n)
		return sbx_err_set(err, SBX_E_USAGE, "the Dockerfile has no FROM");
	for (; i < b->df.n; i++) {
		if (streq(b->df.in[i].cmd, "FROM")) {
			r->stages = xrealloc(r->stages, (r->n_stages + 1) * sizeof(*r->stages));
			r->stages[r->n_stages++] = (struct stage){ .first = i };
		}
		r->stages[r->n_stages - 1].end = i + 1;
	}
	size_t last = r->n_stages - 1;
	if (b->o->target) {
		/* names are known once their FROM is read: find it in the text */
		bool found = false;
		for (size_t s = 0; s < r->n_stages && !found; s++) {
			_cleanup_(strv_freep) char **w = sbx_df_words(
				b->df.in[r->stages[s].first].args, b->df.escape);
			size_t n = 0;
			while (w[n])
				n++;
			if (n == 3 && !strcasecmp(w[1], "as") && !strcasecmp(w[2], b->o->target)) {
				last = s;
				found = true;
			}
		}
		if (!found)
			return sbx_err_set(err, SBX_E_USAGE,
					   "--target: no stage '%s' in the Dockerfile",
					   b->o->target);
	}
	for (size_t s = 0; s <= last; s++)
		b->steps += (int)(r->stages[s].end - r->stages[s].first);
	if (build_lease_open(b, err) < 0)
		return -1;
	b->cache = b->o->no_cache ? json_object() : build_cache_read(b);
	for (size_t s = 0; s <= last; s++) {
		struct stage *st = &r->stages[s];
		step_line(b, &b->df.in[st->first]);
		if (step_from(r, s, err) < 0)
			return -1;
		for (size_t k = st->first + 1; k < st->end; k++)
			if (step(r, s, k, err) < 0)
				return -1;
		st->built = true;
	}
	struct build_state *fin = &r->stages[last].s;
	char manifest[72];
	if (img_make_manifest(&b->ctx->store, fin->id, fin->layers, fin->n_layers, manifest, err) <
		    0 ||
	    img_add_ref(&b->ctx->store, nm, manifest, fin->id, fin->layers, fin->n_layers, "built",
			err) < 0)
		return -1;
	*ret_id = xstrdup(fin->id);
	return 0;
}

int sbx_build(struct sbx_ctx *ctx, const struct sbx_build_opts *o, char **ret_id,
	      struct sbx_err *err)
{
	struct build b = { .ctx = ctx, .o = o, .ctx_fd = -1, .lease_fd = -1 };
	struct run r = { .b = &b };

	sbx_build_sweep(ctx);
	int rc = build(&b, &r, ret_id, err);
	for (size_t i = 0; i < r.n_stages; i++) {
		free(r.stages[i].name);
		build_state_release(&r.stages[i].s);
		if (r.stages[i].args)
			json_decref(r.stages[i].args);
	}
	free(r.stages);
	if (r.given)
		json_decref(r.given);
	if (r.globals)
		json_decref(r.globals);
	if (b.cache)
		json_decref(b.cache);
	build_lease_close(&b);
	free(b.lease);
	sbx_strv_free(b.ignore);
	sbx_dockerfile_release(&b.df);
	if (b.ctx_fd >= 0)
		close(b.ctx_fd);
	img_lease_drop();
	return rc;
}
