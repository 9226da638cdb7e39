/* Images made here: a directory of changes (an overlay upper) made a layer, and a new image of it. */
#define _GNU_SOURCE
#include "core/image-int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/confine.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/util.h"

/* --- the layer ------------------------------------------------------------------------------ */

struct diff_work {
	const struct sbx_layer_src *src;
	const char *out; /* the tar to write, in the jail's writable tree */
};

static int diff_work(void *arg, struct sbx_err *err)
{
	struct diff_work *w = arg;
	/* the directory itself is sbx's; beneath it, every name is opened beneath its parent's
	 * descriptor, O_NOFOLLOW */
	_cleanup_close_ int dfd = open(w->src->dir,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_errno(err, "cannot open '%s'", w->src->dir);
	_cleanup_close_ int out = open(w->out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_err_errno(err, "cannot create '%s'", w->out);
	const struct sbx_diff_opts o = { .shift = w->src->shift,
					 .skip = w->src->skip,
					 .skip_empty = w->src->skip_empty,
					 .bare = w->src->bare,
					 .own = w->src->own,
					 .uid = w->src->uid,
					 .gid = w->src->gid };
	if (sbx_archive_diff(dfd, out, &o, err) < 0)
		return -1;
	if (fsync(out) < 0 || close(TAKE_FD(out)) < 0)
		return sbx_err_errno(err, "cannot write '%s'", w->out);
	return 0;
}

int sbx_image_layer_from_dir(struct sbx_store *st, const struct sbx_layer_src *src,
			     struct sbx_layer *ret, struct sbx_err *err)
{
	char rnd[SBX_ID_LEN + 1];

	memset(ret, 0, sizeof(*ret));
	/* loaded here, from the host's libraries: the jail has none to load */
	if (img_ensure_dirs(st, err) < 0 || sbx_archive_load(err) < 0 ||
	    sbx_id_generate(rnd, err) < 0)
		return -1;
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp/commit.%s", st->root, rnd);
	_cleanup_free_ char *tar = xasprintf("%s/layer.tar", tmp);
	_cleanup_free_ char *gz = xasprintf("%s/layer.tar.gz", tmp);
	if (mkdir(tmp, 0700) < 0)
		return sbx_err_errno(err, "cannot create '%s'", tmp);
	/* read in a jail that holds the directory (read-only) and where the tar goes: what the
	 * sandbox planted there names nothing else of the host */
	const struct sbx_jail_tree trees[] = { { .path = src->dir, .ro = true },
					       { .path = tmp, .ro = false } };
	const struct sbx_jail jail = { .trees = trees,
				       .n_trees = ARRAY_SIZE(trees),
				       .store_root = st->root,
				       .what = "reading the sandbox's changes",
				       .maps = src->maps,
				       .maps_arg = src->maps_arg };
	struct diff_work w = { .src = src, .out = tar };
	int r = sbx_jail_run(&jail, diff_work, &w, err);
	if (r == 0)
		r = sbx_sha256_file(tar, ret->diff_id, err);
	if (r == 0) {
		_cleanup_close_ int in = open(tar, O_RDONLY | O_CLOEXEC);
		_cleanup_close_ int out = in < 0
			? -1
			: open(gz, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (in < 0 || out < 0)
			r = sbx_err_errno(err, "cannot compress the layer");
		else if ((r = sbx_archive_gzip(in, out, err)) == 0 && close(TAKE_FD(out)) < 0)
			r = sbx_err_errno(err, "cannot write '%s'", gz);
	}
	if (r == 0)
		r = img_adopt_blob(st, gz, NULL, ret->blob, err);
	if (r == 0)
		ret->size = img_file_size(gz);
	(void)sbx_rm_rf(tmp);
	return r;
}

/* --- the config's changes ------------------------------------------------------------------- */

/* CMD and ENTRYPOINT: a JSON array of strings (exec form), or a line for /bin/sh -c */
static json_t *command_of(const char *what, const char *rest, struct sbx_err *err)
{
	if (*rest == '[') {
		json_error_t je;
		json_t *a = json_loads(rest, 0, &je);
		size_t i;
		json_t *v;
		bool ok = json_is_array(a);
		json_array_foreach (a, i, v)
			ok = ok && json_is_string(v);
		if (!ok) {
			if (a)
				json_decref(a);
			sbx_err_set(err, SBX_E_USAGE,
				    "--change '%s': not a JSON array of strings (or give the "
				    "shell form: %s COMMAND LINE)",
				    what, what);
			return NULL;
		}
		return a;
	}
	return json_pack("[s, s, s]", "/bin/sh", "-c", rest);
}

static json_t *obj_of(json_t *cfg, const char *key)
{
	json_t *o = json_object_get(cfg, key);
	if (!json_is_object(o)) {
		o = json_object();
		json_object_set_new(cfg, key, o);
	}
	return o;
}

/* "K=V" or "K V" */
static int key_value(const char *what, const char *rest, char **k, char **v, struct sbx_err *err)
{
	const char *eq = strchr(rest, '='), *sp = strpbrk(rest, " \t");
	const char *cut = eq && (!sp || eq < sp) ? eq : sp;

	if (!cut || cut == rest)
		return sbx_err_set(err, SBX_E_USAGE, "--change '%s %s': give KEY=VALUE", what,
				   rest);
	*k = xstrndup(rest, (size_t)(cut - rest));
	cut++;
	while (cut == sp + 1 && (*cut == ' ' || *cut == '\t'))
		cut++;
	*v = xstrdup(cut);
	return 0;
}

static int env_set(json_t *cfg, const char *k, const char *v)
{
	json_t *env = json_object_get(cfg, "Env");
	if (!json_is_array(env)) {
		env = json_array();
		json_object_set_new(cfg, "Env", env);
	}
	size_t i, kl = strlen(k);
	json_t *e;
	_cleanup_free_ char *kv = xasprintf("%s=%s", k, v);
	json_array_foreach (env, i, e) {
		const char *s = json_string_value(e);
		if (s && !strncmp(s, k, kl) && s[kl] == '=')
			return json_array_set_new(env, i, json_string(kv));
	}
	return json_array_append_new(env, json_string(kv));
}

static int expose(json_t *cfg, const char *rest, struct sbx_err *err)
{
	_cleanup_free_ char *t = xstrdup(rest);
	char *save = NULL;
	json_t *ports = obj_of(cfg, "ExposedPorts");

	for (char *p = strtok_r(t, " \t", &save); p; p = strtok_r(NULL, " \t", &save)) {
		char *slash = strchr(p, '/'), *end = NULL;
		const char *proto = slash ? slash + 1 : "tcp";
		long port = strtol(p, &end, 10);
		if (end != (slash ? slash : p + strlen(p)) || port < 1 || port > 65535 ||
		    !(streq(proto, "tcp") || streq(proto, "udp") || streq(proto, "sctp")))
			return sbx_err_set(err, SBX_E_USAGE,
					   "--change 'EXPOSE %s': give PORT or PORT/tcp, /udp, "
					   "/sctp",
					   rest);
		_cleanup_free_ char *key = xasprintf("%ld/%s", port, proto);
		json_object_set_new(ports, key, json_object());
	}
	return 0;
}

int sbx_image_changes_apply(json_t *cfg, char *const *changes, struct sbx_err *err)
{
	for (char *const *c = changes; c && *c; c++) {
		const char *s = *c;
		while (*s == ' ' || *s == '\t')
			s++;
		size_t n = strcspn(s, " \t");
		_cleanup_free_ char *what = xstrndup(s, n);
		for (char *p = what; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		const char *rest = s + n;
		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (!*rest)
			return sbx_err_set(err, SBX_E_USAGE, "--change '%s': %s needs a value", *c,
					   what);
		if (streq(what, "CMD") || streq(what, "ENTRYPOINT")) {
			json_t *a = command_of(what, rest, err);
			if (!a)
				return -1;
			json_object_set_new(cfg, streq(what, "CMD") ? "Cmd" : "Entrypoint", a);
		} else if (streq(what, "ENV") || streq(what, "LABEL")) {
			_cleanup_free_ char *k = NULL, *v = NULL;
			if (key_value(what, rest, &k, &v, err) < 0)
				return -1;
			if (streq(what, "ENV"))
				env_set(cfg, k, v);
			else
				json_object_set_new(obj_of(cfg, "Labels"), k, json_string(v));
		} else if (streq(what, "WORKDIR")) {
			if (rest[0] != '/')
				return sbx_err_set(err, SBX_E_USAGE,
						   "--change 'WORKDIR %s': give an absolute path",
						   rest);
			json_object_set_new(cfg, "WorkingDir", json_string(rest));
		} else if (streq(what, "USER")) {
			json_object_set_new(cfg, "User", json_string(rest));
		} else if (streq(what, "EXPOSE")) {
			if (expose(cfg, rest, err) < 0)
				return -1;
		} else {
			return sbx_err_set(err, SBX_E_USAGE,
					   "--change '%s': unknown instruction '%s' (CMD, "
					   "ENTRYPOINT, ENV, WORKDIR, USER, LABEL, EXPOSE)",
					   *c, what);
		}
	}
	return 0;
}

/* --- the image ------------------------------------------------------------------------------ */

int sbx_image_name(const char *name, char **ret, struct sbx_err *err)
{
	struct sbx_ref r = { 0 };

	if (sbx_ref_parse(name, &r, err) < 0)
		return -1;
	if (r.digest) {
		sbx_ref_release(&r);
		return sbx_err_set(err, SBX_E_USAGE,
				   "'%s' names an image by digest; give NAME[:TAG]", name);
	}
	*ret = TAKE_PTR(r.name);
	sbx_ref_release(&r);
	return 0;
}

static int commit(struct sbx_store *st, const char *name, const struct sbx_commit_src *src,
		  const struct sbx_commit_opts *o, char **ret_id, struct sbx_err *err)
{
	_cleanup_free_ char *nm = NULL;
	char config[72], manifest[72];

	if (sbx_image_name(name, &nm, err) < 0 || img_hold(st, src->layer->blob, err) < 0)
		return -1;
	for (char *const *l = src->base_layers; l && *l; l++) {
		_cleanup_free_ char *b = img_blob_path(st, *l);
		if (img_hold(st, *l, err) < 0)
			return -1;
		if (access(b, F_OK) < 0)
			return sbx_err_set(err, SBX_E_STATE,
					   "layer %.19s of the sandbox's image is no longer in "
					   "the store; pull or import that image again",
					   *l);
	}
	/* no base: an image of this layer alone (a build's FROM scratch) */
	json_t *base = src->base_id
		? img_blob_json(st, src->base_id, err)
		: json_pack("{s:s, s:s, s:{}}", "architecture", "amd64", "os", "linux", "config");
	if (!base)
		return -1;
	json_t *c = json_deep_copy(base);
	json_decref(base);
	_cleanup_free_ char *created = sbx_time_rfc3339(sbx_now_ms() / 1000);
	json_object_set_new(c, "created", json_string(created));
	json_t *rootfs = obj_of(c, "rootfs");
	json_object_set_new(rootfs, "type", json_string("layers"));
	json_t *ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(ids)) {
		ids = json_array();
		json_object_set_new(rootfs, "diff_ids", ids);
	}
	json_array_append_new(ids, json_string(src->layer->diff_id));
	if (sbx_image_changes_apply(obj_of(c, "config"), o->changes, err) < 0) {
		json_decref(c);
		return -1;
	}
	json_t *hist = json_object_get(c, "history");
	if (!json_is_array(hist)) {
		hist = json_array();
		json_object_set_new(c, "history", hist);
	}
	json_t *h = json_pack("{s:s, s:s}", "created", created, "created_by",
			      o->created_by ? o->created_by : "sbx commit");
	if (o->message)
		json_object_set_new(h, "comment", json_string(o->message));
	json_array_append_new(hist, h);
	_cleanup_free_ char *ct = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	size_t n = 0;
	while (src->base_layers && src->base_layers[n])
		n++;
	char **layers = xcalloc(n + 2, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		layers[i] = xstrdup(src->base_layers[i]);
	layers[n] = xstrdup(src->layer->blob);
	int r = img_put_blob(st, ct, strlen(ct), config, err) < 0 ||
			img_make_manifest(st, config, layers, n + 1, manifest, err) < 0 ||
			img_add_ref(st, nm, manifest, config, layers, n + 1,
				    o->origin ? o->origin : "committed", err) < 0
		? -1
		: 0;
	sbx_strv_free(layers);
	if (r == 0)
		*ret_id = xstrdup(config);
	return r;
}

int sbx_image_commit(struct sbx_store *st, const char *name, const struct sbx_commit_src *src,
		     const struct sbx_commit_opts *o, char **ret_id, struct sbx_err *err)
{
	int r = commit(st, name, src, o, ret_id, err);

	img_lease_drop();
	return r;
}
