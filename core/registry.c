/* The OCI distribution pull client: manifests (through image indexes to one platform), the pull. */
#define _GNU_SOURCE
#include "core/registry.h"

#include <strings.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/log.h"
#include "core/registry-int.h"
#include "core/util.h"

#define MANIFEST_MAX (4 << 20)
#define INDEX_MAX_NESTING 2

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

/* --- manifests -------------------------------------------------------------------------------- */

enum mkind {
	MK_MANIFEST,
	MK_INDEX,
	MK_SCHEMA1,
	MK_OTHER
};

static enum mkind classify(const json_t *j, const char *ctype, const char **ret_mt)
{
	const char *mt = sbx_json_str(j, "mediaType");
	if (!mt || !*mt)
		mt = ctype;
	*ret_mt = mt ? mt : "unknown";
	if (sbx_json_int(j, "schemaVersion", 2) == 1 ||
	    (mt && strstr(mt, "application/vnd.docker.distribution.manifest.v1")))
		return MK_SCHEMA1;
	if (mt && (streq(mt, MT_OCI_INDEX) || streq(mt, MT_DOCKER_LIST)))
		return MK_INDEX;
	if (mt && (streq(mt, MT_OCI_MANIFEST) || streq(mt, MT_DOCKER_MANIFEST)))
		return MK_MANIFEST;
	if (!mt || streq(mt, "application/json") || streq(mt, "application/octet-stream") ||
	    streq(mt, "text/plain")) {
		if (json_is_array(json_object_get(j, "manifests")))
			return MK_INDEX;
		if (json_is_array(json_object_get(j, "layers")) &&
		    json_is_object(json_object_get(j, "config")))
			return MK_MANIFEST;
	}
	return MK_OTHER;
}

static const char accept_all[] = "Accept: " MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST
				 ", " MT_DOCKER_MANIFEST;

/* the Content-Type of a response, without its parameters */
static char *content_type(const struct sbx_http_resp *r)
{
	const char *v = sbx_http_header(r, "content-type");
	return v ? xstrndup(v, strcspn(v, "; \t")) : NULL;
}

/* GET manifests/REFERENCE, at most 4 MiB, its digest computed (and checked against WANT) */
static json_t *get_manifest(struct reg_sess *s, const char *reference, const char *want,
			    char ret_digest[72], char **ret_ctype, struct strbuf *body,
			    struct sbx_err *err)
{
	char *url = xasprintf("%smanifests/%s", s->base, reference);
	struct reg_get g = { .what = "the manifest", .fd = -1, .limit = MANIFEST_MAX };
	struct sbx_http_resp resp = { 0 };
	json_t *j = NULL;

	long status = reg_get(s, url, accept_all, &g, &resp, err);
	free(url);
	if (status < 0)
		goto out;
	if (status == 404) {
		bool by_digest = startswith(reference, "sha256:");
		sbx_err_set(err, SBX_E_NOTFOUND, "manifest unknown: %s/%s%s%s (check the name%s)",
			    s->ref->registry, s->ref->repo, by_digest ? "@" : ":", reference,
			    by_digest ? " and the digest" : " and the tag");
		err->http_status = 404;
		goto out;
	}
	if (status < 200 || status >= 300) {
		reg_http_failed(&resp, g.what, err);
		goto out;
	}
	strbuf_add(body, resp.body.buf ? resp.body.buf : "", resp.body.len);
	if (sbx_sha256_buf(body->buf ? body->buf : "", body->len, ret_digest, err) < 0)
		goto out;
	if (want && !streq(ret_digest, want)) {
		sbx_err_set(err, SBX_E_REMOTE, "manifest verification failed: expected %s, got %s",
			    want, ret_digest);
		goto out;
	}
	if (!(j = sbx_registry_json_parse(strbuf_str(body), body->len, "the manifest", err)))
		goto out;
	if (!json_is_object(j)) {
		sbx_err_set(err, SBX_E_REMOTE, "the manifest is not a JSON object");
		json_decref(j);
		j = NULL;
		goto out;
	}
	*ret_ctype = content_type(&resp);
out:
	sbx_http_resp_release(&resp);
	return j;
}

/* the layers of an image manifest, checked */
static int manifest_layers(const json_t *m, struct sbx_pulled *p, struct sbx_err *err)
{
	json_t *ls = json_object_get(m, "layers"), *l;
	size_t i;

	if (!json_is_array(ls))
		return sbx_err_set(err, SBX_E_REMOTE, "the manifest has no layer list");
	p->layers = xcalloc(json_array_size(ls) + 1, sizeof(*p->layers));
	json_array_foreach (ls, i, l) {
		const char *d = sbx_json_str(l, "digest"), *mt = sbx_json_str(l, "mediaType");
		json_t *size = json_object_get(l, "size");
		if (!sbx_digest_valid(d))
			return sbx_err_set(err, SBX_E_REMOTE,
					   "layer %zu of the manifest has no valid "
					   "sha256 digest",
					   i + 1);
		if (!json_is_integer(size) || json_integer_value(size) < 0)
			return sbx_err_set(err, SBX_E_REMOTE, "layer %s has no valid size", d);
		if (!mt || !sbx_layer_media_type_known(mt))
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "layer %s has media type '%s', "
					   "which is not a container filesystem layer sbx can "
					   "unpack",
					   d, mt ? mt : "none");
		if (sbx_layer_is_foreign(mt) && json_array_size(json_object_get(l, "urls")) > 0)
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "layer %s is a foreign layer "
					   "fetched from outside the registry, which sbx does not "
					   "do (a Windows image?)",
					   d);
		p->layers[i].digest = xstrdup(d);
		p->layers[i].media_type = xstrdup(mt);
		p->layers[i].size = json_integer_value(size);
		p->n_layers = i + 1;
	}
	return 0;
}

/* the image manifest REF names (through up to two image indexes): parsed, its bytes stored */
static json_t *resolve_manifest(struct reg_sess *s, const char *platform, char ret_digest[72],
				bool *ret_via_index, struct sbx_err *err)
{
	const struct sbx_ref *ref = s->ref;
	char *reference = xstrdup(ref->digest ? ref->digest : ref->tag);
	char *want = ref->digest ? xstrdup(ref->digest) : NULL;
	char *ctype = NULL;
	struct strbuf body = STRBUF_INIT;
	json_t *m = NULL;

	*ret_via_index = false;
	for (int level = 0;; level++) {
		const char *mt;
		strbuf_reset(&body);
		free(ctype);
		ctype = NULL;
		if (!(m = get_manifest(s, reference, want, ret_digest, &ctype, &body, err)))
			goto out;
		enum mkind k = classify(m, ctype, &mt);
		if (k == MK_MANIFEST)
			break;
		if (k == MK_SCHEMA1)
			sbx_err_set(err, SBX_E_UNSUPPORTED,
				    "the image uses Docker's deprecated "
				    "manifest schema 1, which sbx does not read (push it again "
				    "with a current docker or skopeo)");
		else if (k == MK_OTHER)
			sbx_err_set(err, SBX_E_UNSUPPORTED,
				    "not a container image (its manifest "
				    "is '%s')",
				    mt);
		else if (level >= INDEX_MAX_NESTING)
			sbx_err_set(err, SBX_E_REMOTE, "image indexes nest deeper than %d levels",
				    INDEX_MAX_NESTING);
		char *next = NULL;
		if (k != MK_INDEX || level >= INDEX_MAX_NESTING ||
		    sbx_registry_select_platform(m, platform, &next, NULL, err) < 0) {
			json_decref(m);
			m = NULL;
			goto out;
		}
		sbx_debug("index %s: %s is %s", ret_digest, platform, next);
		free(reference);
		free(want);
		reference = next;
		want = xstrdup(next);
		*ret_via_index = true;
		json_decref(m);
		m = NULL;
	}
	if (reg_store_bytes(s, ret_digest, strbuf_str(&body), body.len, err) < 0) {
		json_decref(m);
		m = NULL;
	}
out:
	free(reference);
	free(want);
	free(ctype);
	strbuf_release(&body);
	return m;
}

static int pull(struct reg_sess *s, const char *platform, bool platform_given, struct sbx_pulled *p,
		struct sbx_err *err)
{
	char digest[72];
	bool via_index;

	json_t *m = resolve_manifest(s, platform, digest, &via_index, err);
	if (!m)
		return -1;
	p->manifest_digest = xstrdup(digest);
	p->manifest = m;

	json_t *cfg = json_object_get(m, "config");
	const char *cd = sbx_json_str(cfg, "digest"), *cmt = sbx_json_str(cfg, "mediaType");
	json_t *csize = json_object_get(cfg, "size");
	if (!sbx_digest_valid(cd) || !json_is_integer(csize) || json_integer_value(csize) < 0)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "the manifest has no valid config digest and "
				   "size");
	if (cmt && !streq(cmt, MT_OCI_CONFIG) && !streq(cmt, MT_DOCKER_CONFIG))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "not a container image (its config is "
				   "'%s')",
				   cmt);
	if (json_integer_value(csize) > 64 << 20)
		return sbx_err_set(err, SBX_E_REMOTE, "the image config is larger than 64 MiB");
	if (manifest_layers(m, p, err) < 0)
		return -1;

	if (reg_fetch_blob(s, cd, json_integer_value(csize), false, err) < 0)
		return -1;
	_cleanup_free_ char *cpath = reg_blob_path(s, cd);
	size_t clen;
	_cleanup_free_ char *ctext = sbx_read_file(cpath, (size_t)json_integer_value(csize) + 1,
						   &clen);
	if (!ctext)
		return sbx_err_errno(err, "cannot read '%s'", cpath);
	if (!(p->config = sbx_registry_json_parse(ctext, clen, "the image config", err)))
		return -1;
	p->config_digest = xstrdup(cd);
	if (!json_is_object(p->config))
		return sbx_err_set(err, SBX_E_REMOTE, "the image config is not a JSON object");
	const char *os = sbx_json_str(p->config, "os");
	const char *arch = sbx_json_str(p->config, "architecture");
	struct sbx_platform want;
	if (!via_index && os && arch && sbx_platform_parse(platform, &want, err) == 0 &&
	    (!streq(os, want.os) || !streq(sbx_platform_norm_arch(arch), want.arch))) {
		if (platform_given)
			return sbx_err_set(err, SBX_E_NOTFOUND, "the image is for %s/%s, not %s",
					   os, arch, platform);
		_cleanup_free_ char *fam = sbx_ref_familiar(s->ref->name);
		sbx_warn("'%s' is an image for %s/%s, not %s: its programs may not run here", fam,
			 os, arch, platform);
	}

	for (size_t i = 0; i < p->n_layers; i++) {
		if (reg_fetch_blob(s, p->layers[i].digest, p->layers[i].size, s->progress, err) < 0)
			return -1;
		if (s->o && s->o->fetched &&
		    s->o->fetched(s->o->hold_arg, i, p->n_layers, p->layers[i].digest, err) < 0)
			return -1;
	}
	return 0;
}

/* 127.0.0.0/8, ::1 and localhost: the registries that speak plain HTTP unasked */
static bool loopback_host(const char *hostport)
{
	_cleanup_free_ char *h = NULL;

	if (hostport[0] == '[')
		h = xstrndup(hostport + 1, strcspn(hostport + 1, "]"));
	else
		h = xstrndup(hostport, strcspn(hostport, ":"));
	return !strcasecmp(h, "localhost") || streq(h, "::1") || startswith(h, "127.");
}

int sbx_registry_pull(const struct sbx_ref *ref, const struct sbx_pull_opts *o,
		      const char *images_dir, struct sbx_pulled *ret, struct sbx_err *err)
{
	_cleanup_free_ char *fam = sbx_ref_familiar(ref->name);
	const char *platform = o && o->platform ? o->platform : "linux/amd64";
	struct sbx_platform pf;
	struct sbx_pulled p = { 0 };
	int r = -1;

	if (sbx_platform_parse(platform, &pf, err) < 0 || sbx_curl_load(err) < 0)
		return sbx_err_prefix(err, "cannot pull '%s'", fam);
	_cleanup_free_ char *bdir = xasprintf("%s/blobs/sha256", images_dir);
	_cleanup_free_ char *tdir = xasprintf("%s/tmp", images_dir);
	if (sbx_mkdir_p(bdir, 0700) < 0)
		return sbx_err_errno(err, "cannot pull '%s': cannot create '%s'", fam, bdir);
	if (sbx_mkdir_p(tdir, 0700) < 0)
		return sbx_err_errno(err, "cannot pull '%s': cannot create '%s'", fam, tdir);

	struct reg_sess s = {
		.ref = ref,
		.images = images_dir,
		.plain = (o && o->insecure) || loopback_host(ref->host),
		.stall = o && o->stall_timeout_s > 0 ? o->stall_timeout_s : 30,
		.progress = o && o->progress,
		.o = o,
	};
	s.base = xasprintf("%s://%s/v2/%s/", s.plain ? "http" : "https", ref->host, ref->repo);
	sbx_debug("pulling %s from %s for %s", ref->name, s.base, platform);
	r = pull(&s, platform, o && o->platform, &p, err);
	sbx_http_session_release(&s.http);
	free(s.base);
	sbx_registry_free_secret(s.auth);
	sbx_registry_creds_release(&s.creds);
	if (r < 0) {
		sbx_pulled_release(&p);
		return sbx_err_prefix(err, "cannot pull '%s'", fam);
	}
	*ret = p;
	return 0;
}

void sbx_pulled_release(struct sbx_pulled *p)
{
	free(p->manifest_digest);
	free(p->config_digest);
	if (p->manifest)
		json_decref(p->manifest);
	if (p->config)
		json_decref(p->config);
	for (size_t i = 0; i < p->n_layers; i++) {
		free(p->layers[i].digest);
		free(p->layers[i].media_type);
	}
	free(p->layers);
	memset(p, 0, sizeof(*p));
}
