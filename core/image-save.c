/* sbx image tag and save: another name for an image; images as a docker save / OCI layout tar. */
#define _GNU_SOURCE
#include "core/image-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/json.h"
#include "core/registry.h"
#include "core/util.h"

int sbx_image_tag(struct sbx_store *st, const char *src, const char *name, struct sbx_err *err)
{
	struct sbx_image img = { 0 };
	_cleanup_free_ char *nm = NULL;

	if (sbx_image_name(name, &nm, err) < 0 || sbx_image_find(st, src, &img, err) < 0)
		return -1;
	_cleanup_close_ int lk = img_lock_images(st, true, err);
	json_t *refs = lk < 0 ? NULL : img_refs_load(st, err);
	int r = -1;
	if (refs) {
		/* the entry SRC found (by name), or any entry of its id */
		json_t *e = img.name ? json_object_get(refs, img.name) : NULL;
		const char *k;
		json_t *v;
		if (!e)
			json_object_foreach (refs, k, v)
				if (streq(sbx_json_str(v, "config") ?: "", img.id)) {
					e = v;
					break;
				}
		if (!e) {
			r = sbx_err_set(err, SBX_E_NOTFOUND, "image '%s' went away meanwhile", src);
		} else {
			json_t *c = json_deep_copy(e);
			json_object_set_new(c, "created", json_integer(sbx_now_ms() / 1000));
			img_refs_drop_unnamed(refs, img.id);
			json_object_set_new(refs, nm, c);
			r = img_refs_save(st, refs, err);
		}
		json_decref(refs);
	}
	sbx_image_release(&img);
	return r;
}

/* --- save ----------------------------------------------------------------------------------- */

struct save {
	struct sbx_store *st;
	struct sbx_tar_member *m;
	size_t n, cap;
	json_t *blobs; /* digest -> true: each blob once */
	json_t *manifest_json, *index;
	json_t *by_id; /* config digest -> its manifest.json entry */
};

static void add_member(struct save *s, struct sbx_tar_member m)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->m = xrealloc(s->m, s->cap * sizeof(*s->m));
	}
	s->m[s->n++] = m;
}

static void add_text(struct save *s, const char *name, json_t *j)
{
	char *t = json_dumps(j, JSON_COMPACT);
	add_member(s,
		   (struct sbx_tar_member){
			   .name = xstrdup(name), .fd = -1, .data = t, .len = strlen(t) });
}

static int add_blob(struct save *s, const char *digest, struct sbx_err *err)
{
	if (json_object_get(s->blobs, digest))
		return 0;
	_cleanup_free_ char *p = img_blob_path(s->st, digest);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_errno(err,
				     "blob %.19s is not in the store (pull or import the image "
				     "again)",
				     digest);
	json_object_set_new(s->blobs, digest, json_true());
	add_member(s,
		   (struct sbx_tar_member){ .name = xasprintf("blobs/sha256/%s", digest + 7),
					    .fd = fd });
	return 0;
}

static int save_one(struct save *s, const char *ref, struct sbx_err *err)
{
	struct sbx_image img = { 0 };

	if (sbx_image_find(s->st, ref, &img, err) < 0)
		return -1;
	int r = add_blob(s, img.id, err);
	r = r < 0 ? -1 : add_blob(s, img.manifest, err);
	for (size_t i = 0; r == 0 && i < img.n_layers; i++)
		r = add_blob(s, img.layers[i], err);
	json_t *mf = r < 0 ? NULL : img_blob_json(s->st, img.manifest, err);
	if (!mf) {
		sbx_image_release(&img);
		return -1;
	}
	/* named: the tag goes with it (an id alone saves the image without a name, as docker) */
	bool named = img.name && !strchr(img.name, '@') && !startswith(img.name, "sha256:");
	_cleanup_free_ char *fam = named ? sbx_ref_familiar(img.name) : NULL;
	json_t *e = json_object_get(s->by_id, img.id);
	if (!e) {
		json_t *ls = json_array();
		for (size_t i = 0; i < img.n_layers; i++)
			json_array_append_new(ls,
					      json_sprintf("blobs/sha256/%s", img.layers[i] + 7));
		e = json_pack("{s:[], s:o}", "RepoTags", "Layers", ls);
		json_object_set_new(e, "Config", json_sprintf("blobs/sha256/%s", img.id + 7));
		json_array_append_new(s->manifest_json, e);
		json_object_set(s->by_id, img.id, e);
	}
	if (fam)
		json_array_append_new(json_object_get(e, "RepoTags"), json_string(fam));
	const char *mt = sbx_json_str(mf, "mediaType")
		?: "application/vnd.oci.image.manifest.v1+json";
	_cleanup_free_ char *mp = img_blob_path(s->st, img.manifest);
	json_t *d = json_pack("{s:s, s:s, s:I}", "mediaType", mt, "digest", img.manifest, "size",
			      (json_int_t)img_file_size(mp));
	if (named) {
		const char *slash = strrchr(img.name, '/');
		const char *colon = strrchr(slash ? slash : img.name, ':');
		json_object_set_new(d, "annotations",
				    json_pack("{s:s, s:s}", "io.containerd.image.name", img.name,
					      "org.opencontainers.image.ref.name",
					      colon ? colon + 1 : "latest"));
	}
	json_array_append_new(json_object_get(s->index, "manifests"), d);
	json_decref(mf);
	sbx_image_release(&img);
	return 0;
}

int sbx_image_save(struct sbx_store *st, char *const *refs, size_t n, int fd, struct sbx_err *err)
{
	struct save s = { .st = st,
			  .blobs = json_object(),
			  .manifest_json = json_array(),
			  .by_id = json_object() };
	s.index = json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType",
			    "application/vnd.oci.image.index.v1+json", "manifests");
	add_member(&s, (struct sbx_tar_member){ .name = xstrdup("blobs/"), .dir = true, .fd = -1 });
	add_member(
		&s,
		(struct sbx_tar_member){ .name = xstrdup("blobs/sha256/"), .dir = true, .fd = -1 });
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++)
		r = save_one(&s, refs[i], err);
	if (r == 0) {
		json_t *lay = json_pack("{s:s}", "imageLayoutVersion", "1.0.0");
		add_text(&s, "oci-layout", lay);
		json_decref(lay);
		add_text(&s, "index.json", s.index);
		add_text(&s, "manifest.json", s.manifest_json);
		r = sbx_archive_write_members(fd, s.m, s.n, err);
	}
	for (size_t i = 0; i < s.n; i++) {
		free((char *)s.m[i].name);
		free((char *)s.m[i].data);
		if (s.m[i].fd >= 0)
			close(s.m[i].fd);
	}
	free(s.m);
	json_decref(s.blobs);
	json_decref(s.manifest_json);
	json_decref(s.index);
	json_decref(s.by_id);
	return r;
}

char *sbx_image_local_origin(struct sbx_store *st, const char *ref)
{
	struct sbx_ref r = { 0 };
	struct sbx_err e = { 0 };
	char *ret = NULL;

	if (sbx_ref_parse(ref, &r, &e) < 0)
		return NULL;
	_cleanup_free_ char *refs_path = xasprintf("%s/images/refs.json", st->root);
	if (access(refs_path, F_OK) == 0) {
		json_t *refs = img_refs_load(st, &e);
		const char *o = refs ? sbx_json_str(json_object_get(refs, r.name), "origin") : NULL;
		/* an imported image may well be on a registry under its name: only what was made
		 * here is known not to be */
		if (o && (streq(o, "committed") || streq(o, "built")))
			ret = xstrdup(o);
		if (refs)
			json_decref(refs);
	}
	sbx_ref_release(&r);
	return ret;
}
