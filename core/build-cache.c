/* sbx image build's layer cache: images/build-cache.json, step key -> the state it made. */
#define _GNU_SOURCE
#include "core/build-int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/image-int.h"
#include "core/json.h"
#include "core/util.h"

#define CACHE_MAX_BYTES (16 << 20)
#define CACHE_ENTRIES_MAX 4096

void build_state_release(struct build_state *s)
{
	if (s->config)
		json_decref(s->config);
	sbx_strv_free(s->layers);
	memset(s, 0, sizeof(*s));
}

/* --- the cache ------------------------------------------------------------------------------ */

static char *cache_path(struct build *b)
{
	return xasprintf("%s/images/build-cache.json", b->ctx->store.root);
}

json_t *build_cache_read(struct build *b)
{
	_cleanup_free_ char *p = cache_path(b);
	size_t len = 0;
	_cleanup_free_ char *t = sbx_read_file(p, CACHE_MAX_BYTES, &len);
	json_error_t je;
	json_t *c = t ? json_loadb(t, len, 0, &je) : NULL;
	if (c && !json_is_object(c)) {
		json_decref(c);
		c = NULL;
	}
	return c ? c : json_object();
}

/* key's entry into s, when its blobs are all still in the store */
bool build_cache_get(struct build *b, const char *key, struct build_state *s)
{
	json_t *e = json_object_get(b->cache, key);
	const char *config = sbx_json_str(e, "config");
	json_t *ls = json_object_get(e, "layers");
	size_t i;
	json_t *v;
	struct sbx_err err = { 0 };

	if (!config || !sbx_digest_valid(config) || !json_is_array(ls))
		return false;
	json_array_foreach (ls, i, v) {
		const char *d = json_string_value(v);
		_cleanup_free_ char *p = d && sbx_digest_valid(d) ? img_blob_path(&b->ctx->store, d)
								  : NULL;
		if (!p || img_hold(&b->ctx->store, d, &err) < 0 || access(p, F_OK) < 0)
			return false;
	}
	json_t *cfg = img_blob_json(&b->ctx->store, config, &err);
	if (!cfg)
		return false;
	build_state_release(s);
	s->config = cfg;
	s->n_layers = json_array_size(ls);
	s->layers = xcalloc(s->n_layers + 1, sizeof(char *));
	json_array_foreach (ls, i, v)
		s->layers[i] = xstrdup(json_string_value(v));
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->id, sizeof(s->id), "%s", config);
	return true;
}

/* the state under its key, merged into the file as it is now (another build may have added) */
void build_cache_put(struct build *b, const struct build_state *s)
{
	json_t *ls = json_array();
	for (size_t i = 0; i < s->n_layers; i++)
		json_array_append_new(ls, json_string(s->layers[i]));
	json_t *e = json_pack("{s:s, s:o, s:I}", "config", s->id, "layers", ls, "t",
			      (json_int_t)(sbx_now_ms() / 1000));
	json_object_set(b->cache, s->key, e);
	struct sbx_err err = { 0 };
	_cleanup_close_ int lk = img_lock_images(&b->ctx->store, true, &err);
	if (lk < 0) {
		json_decref(e);
		return;
	}
	json_t *c = build_cache_read(b);
	json_object_set_new(c, s->key, e);
	while (json_object_size(c) > CACHE_ENTRIES_MAX) {
		/* the oldest entry goes */
		const char *k, *old = NULL;
		json_int_t t0 = 0;
		json_t *v;
		json_object_foreach (c, k, v) {
			json_int_t t = json_integer_value(json_object_get(v, "t"));
			if (!old || t < t0) {
				old = k;
				t0 = t;
			}
		}
		json_object_del(c, old);
	}
	_cleanup_free_ char *p = cache_path(b);
	_cleanup_free_ char *tmp = xasprintf("%s.%d", p, (int)getpid());
	char *text = json_dumps(c, JSON_COMPACT);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && text && sbx_write_all(fd, text, strlen(text)) == 0;
	if (fd >= 0 && close(fd) < 0)
		ok = false;
	/* a cache not written is a cache missed next time, never a half file */
	if (!ok || rename(tmp, p) < 0)
		(void)unlink(tmp);
	free(text);
	json_decref(c);
}
