/* The image store: images found by name or id, pulled, listed, removed and pruned. */
#define _GNU_SOURCE
#include "core/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/confine.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/util.h"

#include "core/image-int.h"

void sbx_image_release(struct sbx_image *img)
{
	free(img->name);
	free(img->id);
	free(img->manifest);
	sbx_strv_free(img->layers);
	sbx_strv_free(img->chain);
	if (img->config)
		json_decref(img->config);
	memset(img, 0, sizeof(*img));
}

static bool hex_prefix(const char *s)
{
	if (startswith(s, "sha256:"))
		s += 7;
	size_t n = strlen(s);
	if (n < 4 || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static int fill(struct sbx_store *st, const char *name, json_t *e, struct sbx_image *ret,
		struct sbx_err *err)
{
	const char *config = sbx_json_str(e, "config"), *manifest = sbx_json_str(e, "manifest");
	json_t *ls = json_object_get(e, "layers"), *cs = json_object_get(e, "chain");
	size_t n = json_array_size(ls);

	if (!sbx_digest_valid(config) || !sbx_digest_valid(manifest) || !json_is_array(ls) ||
	    json_array_size(cs) != n)
		return sbx_err_set(err, SBX_E_STATE,
				   "the store's entry for '%s' is damaged; "
				   "remove it with 'sbx image rm -f %s' and pull it again",
				   name, name);
	memset(ret, 0, sizeof(*ret));
	ret->config = img_blob_json(st, config, err);
	if (!ret->config)
		return -1;
	ret->name = name ? xstrdup(name) : NULL;
	ret->id = xstrdup(config);
	ret->manifest = xstrdup(manifest);
	ret->n_layers = n;
	ret->layers = xcalloc(n + 1, sizeof(char *));
	ret->chain = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const char *d = json_string_value(json_array_get(ls, i));
		const char *c = json_string_value(json_array_get(cs, i));
		if (!sbx_digest_valid(d) || !sbx_digest_valid(c)) {
			sbx_image_release(ret);
			return sbx_err_set(err, SBX_E_STATE,
					   "the store's entry for '%s' names an "
					   "invalid layer",
					   name);
		}
		ret->layers[i] = xstrdup(d);
		ret->chain[i] = xstrdup(c);
	}
	ret->size = json_integer_value(json_object_get(e, "size"));
	ret->created = json_integer_value(json_object_get(e, "created"));
	return 0;
}

int sbx_image_find(struct sbx_store *st, const char *ref, struct sbx_image *ret,
		   struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;
	int r;

	if (img_ensure_dirs(st, err) < 0 || (lk = img_lock_images(st, false, err)) < 0)
		return -1;
	if (!(refs = img_refs_load(st, err)))
		return -1;
	struct sbx_ref pr = { 0 };
	struct sbx_err perr = { 0 };
	json_t *e = NULL;
	const char *key = NULL;
	if (sbx_ref_parse(ref, &pr, &perr) == 0)
		e = json_object_get(refs, key = pr.name);
	if (!e && hex_prefix(ref)) {
		/* an id or a prefix of one: every name of one image is fine, two images are not */
		const char *want = startswith(ref, "sha256:") ? ref : NULL;
		_cleanup_free_ char *full = want ? NULL : xasprintf("sha256:%s", ref);
		const char *k;
		json_t *v, *found = NULL;
		json_object_foreach (refs, k, v) {
			const char *id = sbx_json_str(v, "config");
			if (!id || !startswith(id, want ? want : full))
				continue;
			if (found && !streq(sbx_json_str(found, "config"), id)) {
				sbx_ref_release(&pr);
				json_decref(refs);
				return sbx_err_set(err, SBX_E_USAGE,
						   "image id prefix '%s' is "
						   "ambiguous; give more of it",
						   ref);
			}
			found = v;
			key = NULL;
		}
		e = found;
	}
	if (!e) {
		bool bad = perr.kind != SBX_E_NONE && !hex_prefix(ref);
		if (bad)
			*err = perr;
		else
			sbx_err_set(err, SBX_E_NOTFOUND,
				    "no image '%s' in the store (see 'sbx image "
				    "ls'; 'sbx image pull %s' fetches it)",
				    ref, ref);
		sbx_ref_release(&pr);
		json_decref(refs);
		return -1;
	}
	r = fill(st, key, e, ret, err);
	sbx_ref_release(&pr);
	json_decref(refs);
	return r;
}

/* --- pull ------------------------------------------------------------------------------------- */

/* a pull unpacks each layer while the next ones download */
struct pull_state {
	struct sbx_store *st;
	char **layers, **keys;
	struct img_unpack_job job;
};

static int pull_hold(void *arg, const char *digest, struct sbx_err *err)
{
	return img_hold(((struct pull_state *)arg)->st, digest, err);
}

static void pull_state_release(struct pull_state *ps)
{
	sbx_strv_free(ps->layers);
	sbx_strv_free(ps->keys);
}

static int pull_fetched(void *arg, size_t i, size_t n, const char *digest, struct sbx_err *err)
{
	struct pull_state *ps = arg;

	if (!ps->layers) {
		ps->layers = xcalloc(n + 1, sizeof(char *));
		ps->keys = xcalloc(n + 1, sizeof(char *));
	}
	ps->layers[i] = xstrdup(digest);
	/* the layer below first: it must be whole before this one is unpacked over it */
	if (img_unpack_finish(&ps->job, err) < 0)
		return -1;
	return img_layer_start(ps->st, ps->layers, ps->keys, i, &ps->job, err);
}

int sbx_image_pull(struct sbx_store *st, const char *ref, const struct sbx_image_pull_opts *o,
		   struct sbx_image *ret, struct sbx_err *err)
{
	struct sbx_ref r = { 0 };
	struct sbx_pulled p = { 0 };
	int rc = -1;
	_cleanup_free_ char *dir = img_dir(st);

	if (sbx_ref_parse(ref, &r, err) < 0)
		return -1;
	if (img_ensure_dirs(st, err) < 0)
		goto out;
	struct sbx_pull_opts po = { .platform = o ? o->platform : NULL,
				    .insecure = o && o->insecure,
				    .progress = o && o->progress };
	struct pull_state ps = { .st = st };
	po.hold = pull_hold;
	po.fetched = pull_fetched;
	po.hold_arg = &ps;
	const char *stall = getenv("SBX_TEST_STALL_TIMEOUT");
	if (stall)
		po.stall_timeout_s = atol(stall);
	if (sbx_registry_pull(&r, &po, dir, &p, err) < 0) {
		struct sbx_err ignored = { 0 };
		(void)img_unpack_finish(&ps.job, &ignored);
		pull_state_release(&ps);
		goto out;
	}
	rc = img_unpack_finish(&ps.job, err);
	pull_state_release(&ps);
	if (rc < 0)
		goto out;
	char **layers = xcalloc(p.n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < p.n_layers; i++)
		layers[i] = xstrdup(p.layers[i].digest);
	rc = img_add_ref(st, r.name, p.manifest_digest, p.config_digest, layers, p.n_layers,
			 "pulled", err);
	sbx_strv_free(layers);
	if (rc == 0 && ret)
		rc = sbx_image_find(st, r.name, ret, err);
out:
	img_lease_drop();
	sbx_pulled_release(&p);
	sbx_ref_release(&r);
	return rc;
}

/* --- ls, rm, prune ------------------------------------------------------------------------------ */

int sbx_image_list(struct sbx_store *st, json_t **ret, struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;

	if (img_ensure_dirs(st, err) < 0 || (lk = img_lock_images(st, false, err)) < 0)
		return -1;
	if (!(refs = img_refs_load(st, err)))
		return -1;
	json_t *a = json_array();
	const char *k;
	json_t *v;
	json_object_foreach (refs, k, v) {
		/* an image without a name is recorded under its id */
		bool unnamed = startswith(k, "sha256:");
		_cleanup_free_ char *fam = unnamed ? xstrdup("<none>") : sbx_ref_familiar(k);
		const char *at = strrchr(fam, '@'), *colon = strrchr(fam, ':');
		if (colon && strchr(colon, '/'))
			colon = NULL; /* a registry's port, not a tag */
		_cleanup_free_ char *repo = at ? xstrndup(fam, (size_t)(at - fam))
			: colon		       ? xstrndup(fam, (size_t)(colon - fam))
					       : xstrdup(fam);
		const char *tag = at || unnamed ? "<none>" : colon ? colon + 1 : "latest";
		/* entries from before origins were kept were all pulled or imported */
		const char *origin = sbx_json_str(v, "origin") ?: "pulled";
		json_array_append_new(
			a,
			json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:O, s:s}", "name", k,
				  "repository", repo, "tag", tag, "id",
				  sbx_json_str(v, "config") ?: "", "digest",
				  sbx_json_str(v, "manifest") ?: "", "size",
				  json_integer_value(json_object_get(v, "size")), "created",
				  json_integer_value(json_object_get(v, "created")), "layers",
				  json_object_get(v, "layers") ?: json_array(), "origin", origin));
	}
	json_decref(refs);
	*ret = a;
	return 0;
}

/* the image ids and layers the sandboxes of this store were made from */
static void sandbox_uses(struct sbx_store *st, json_t *ids, json_t *layers, json_t *who)
{
	char **v = NULL;
	size_t n = 0;
	struct sbx_err e = { 0 };

	if (sbx_store_list_ids(st, &v, &n, &e) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec = NULL;
		struct sbx_err e2 = { 0 };
		if (sbx_store_load(st, v[i], &rec, &e2) < 0)
			continue;
		const struct sbx_image_config *img = &rec->config.image;
		const char *id = img->id;
		if (id) {
			json_object_set_new(ids, id, json_true());
			if (who && !json_object_get(who, id))
				json_object_set_new(who, id,
						    json_string(rec->name ? rec->name : rec->id));
		}
		for (char **l = img->chain; l && *l; l++)
			json_object_set_new(layers, *l, json_true());
		/* and the layer blobs: a commit of the sandbox names them */
		for (char **l = img->layers; l && *l; l++)
			json_object_set_new(layers, *l, json_true());
		sbx_record_free(rec);
	}
	sbx_strv_free(v);
}

int sbx_image_rm(struct sbx_store *st, const char *ref, bool force, struct sbx_err *err)
{
	struct sbx_image img = { 0 };

	if (sbx_image_find(st, ref, &img, err) < 0)
		return -1;
	json_t *ids = json_object(), *layers = json_object(), *who = json_object();
	sandbox_uses(st, ids, layers, who);
	const char *user = sbx_json_str(who, img.id);
	int r = 0;
	_cleanup_close_ int lk = -1;
	if (user && !force) {
		r = sbx_err_set(err, SBX_E_STATE,
				"image '%s' is used by sandbox '%s'; remove the "
				"sandbox first, or use 'sbx image rm -f'",
				ref, user);
		goto out;
	}
	lk = img_lock_images(st, true, err);
	json_t *refs = lk < 0 ? NULL : img_refs_load(st, err);
	if (!refs) {
		r = -1;
		goto out;
	}
	if (img.name) {
		json_object_del(refs, img.name);
	} else {
		/* by id: every name of that image */
		const char *k;
		json_t *v;
		void *tmp;
		json_object_foreach_safe (refs, tmp, k, v)
			if (streq(sbx_json_str(v, "config") ?: "", img.id))
				json_object_del(refs, k);
	}
	r = img_refs_save(st, refs, err);
	json_decref(refs);
out:
	json_decref(ids);
	json_decref(layers);
	json_decref(who);
	sbx_image_release(&img);
	return r;
}

int sbx_image_prune(struct sbx_store *st, long long *ret_layers, long long *ret_blobs,
		    long long *ret_bytes, struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;

	*ret_layers = *ret_blobs = *ret_bytes = 0;
	if (img_ensure_dirs(st, err) < 0 || (lk = img_lock_images(st, true, err)) < 0)
		return -1;
	if (!(refs = img_refs_load(st, err)))
		return -1;
	json_t *keep = json_object(), *ids = json_object(), *layers = json_object();
	sandbox_uses(st, ids, layers, NULL);
	const char *k;
	json_t *v;
	json_object_foreach (layers, k, v)
		json_object_set_new(keep, k, json_true());
	json_object_foreach (refs, k, v) {
		size_t i;
		json_t *l;
		json_object_set_new(keep, sbx_json_str(v, "config") ?: "", json_true());
		json_object_set_new(keep, sbx_json_str(v, "manifest") ?: "", json_true());
		json_array_foreach (json_object_get(v, "layers"), i, l)
			if (json_is_string(l))
				json_object_set_new(keep, json_string_value(l), json_true());
		json_array_foreach (json_object_get(v, "chain"), i, l)
			if (json_is_string(l))
				json_object_set_new(keep, json_string_value(l), json_true());
	}
	/* what pulls and imports running now are about to name */
	img_leases_read(st, keep);
	/* a sandbox's config blob stays too: its record names it */
	json_object_foreach (ids, k, v)
		json_object_set_new(keep, k, json_true());
	static const char *const sub[] = { "layers", "blobs/sha256" };
	for (size_t s = 0; s < ARRAY_SIZE(sub); s++) {
		_cleanup_free_ char *d = xasprintf("%s/images/%s", st->root, sub[s]);
		DIR *dp = opendir(d);
		struct dirent *de;
		if (!dp)
			continue;
		while ((de = readdir(dp))) {
			if (de->d_name[0] == '.')
				continue;
			_cleanup_free_ char *dg = xasprintf("sha256:%s", de->d_name);
			if (json_object_get(keep, dg))
				continue;
			_cleanup_free_ char *p = xasprintf("%s/%s", d, de->d_name);
			if (s == 1) {
				*ret_bytes += img_file_size(p);
				if (unlink(p) == 0)
					(*ret_blobs)++;
			} else if (sbx_rm_rf(p) == 0) {
				(*ret_layers)++;
			}
		}
		closedir(dp);
	}
	/* what interrupted pulls and imports left (an hour old: one running now keeps its files) */
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp", st->root);
	DIR *dp = opendir(tmp);
	if (dp) {
		struct dirent *de;
		while ((de = readdir(dp)))
			if (de->d_name[0] != '.' && !startswith(de->d_name, "lease-")) {
				_cleanup_free_ char *p = xasprintf("%s/%s", tmp, de->d_name);
				struct stat sb;
				if (lstat(p, &sb) == 0 &&
				    sb.st_mtime < (time_t)(sbx_now_ms() / 1000) - 3600)
					(void)sbx_rm_rf(p);
			}
		closedir(dp);
	}
	json_decref(keep);
	json_decref(ids);
	json_decref(layers);
	json_decref(refs);
	return 0;
}
