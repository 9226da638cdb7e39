/* Fuzzes what an image pull makes of a registry's JSON (manifests, image indexes, image
 * configs): the nesting guard, the platform choice in an index, the layers' media types. */
#define _GNU_SOURCE
#include "core/digest.h"
#include "core/json.h"
#include "core/registry.h"
#include "tests/fuzz/fuzz.h"

/* how deeply the parsed document nests: what the guard measured on its text */
static int tree_depth(const json_t *j)
{
	int d = 0;
	size_t i;
	const char *k;
	json_t *v;

	if (json_is_array(j)) {
		json_array_foreach (j, i, v) {
			int c = tree_depth(v);
			d = c > d ? c : d;
		}
		return d + 1;
	}
	if (json_is_object(j)) {
		json_object_foreach ((json_t *)j, k, v) {
			int c = tree_depth(v);
			d = c > d ? c : d;
		}
		return d + 1;
	}
	return 0;
}

static void check_platform(const json_t *index, const char *platform)
{
	struct sbx_err err = { 0 };
	char *digest = NULL, *mt = NULL;

	if (sbx_registry_select_platform(index, platform, &digest, &mt, &err) < 0) {
		FUZZ_CHECK(err.kind == SBX_E_NOTFOUND && err.msg[0], "%s: kind %d", platform,
			   err.kind);
		return;
	}
	FUZZ_CHECK(sbx_digest_valid(digest), "%s: digest '%s'", platform, digest);
	/* the chosen entry is one of the index, for that OS and architecture */
	struct sbx_platform want;
	FUZZ_CHECK(sbx_platform_parse(platform, &want, &err) == 0, "%s", platform);
	bool found = false;
	size_t i;
	json_t *m;
	json_array_foreach (json_object_get(index, "manifests"), i, m) {
		json_t *p = json_object_get(m, "platform");
		const char *os = sbx_json_str(p, "os"), *arch = sbx_json_str(p, "architecture");
		const char *d = sbx_json_str(m, "digest");
		if (d && streq(d, digest) && os && arch && streq(os, want.os) &&
		    streq(sbx_platform_norm_arch(arch), want.arch))
			found = true;
	}
	FUZZ_CHECK(found, "%s: '%s' is no entry for it", platform, digest);
	free(digest);
	free(mt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const platforms[] = { "linux/amd64", "linux/arm64", "linux/arm/v7",
						 "linux/arm64/v8", "windows/amd64" };
	struct sbx_err err = { 0 };
	int depth = sbx_registry_json_depth((const char *)data, size);
	json_t *j = sbx_registry_json_parse((const char *)data, size, "the manifest", &err);

	if (!j) {
		FUZZ_CHECK(err.kind == SBX_E_REMOTE && err.msg[0], "error kind %d", err.kind);
		return 0;
	}
	FUZZ_CHECK(depth <= SBX_REGISTRY_MAX_JSON_DEPTH, "a document %d deep went through", depth);
	FUZZ_CHECK(tree_depth(j) == depth, "the guard measured %d, the document is %d deep", depth,
		   tree_depth(j));
	if (!json_is_object(j)) {
		json_decref(j);
		return 0;
	}
	/* an index */
	if (json_is_array(json_object_get(j, "manifests")))
		for (size_t i = 0; i < ARRAY_SIZE(platforms); i++)
			check_platform(j, platforms[i]);
	/* an image manifest's layers */
	size_t i;
	json_t *l;
	json_array_foreach (json_object_get(j, "layers"), i, l) {
		const char *mt = sbx_json_str(l, "mediaType");
		bool known = sbx_layer_media_type_known(mt);
		bool gz = sbx_layer_is_gzip(mt), zst = sbx_layer_is_zstd(mt);
		(void)sbx_layer_is_foreign(mt);
		(void)sbx_digest_valid(sbx_json_str(l, "digest"));
		FUZZ_CHECK(!(gz && zst), "'%s' is gzip and zstd", mt);
		FUZZ_CHECK(!known || strstr(mt, "tar"), "'%s' known", mt);
	}
	/* an image config's platform */
	const char *os = sbx_json_str(j, "os"), *arch = sbx_json_str(j, "architecture");
	if (os && arch) {
		char *p = xasprintf("%s/%s", os, sbx_platform_norm_arch(arch));
		struct sbx_platform pl;
		if (sbx_platform_parse(p, &pl, &err) == 0)
			FUZZ_CHECK(strlen(pl.os) < sizeof(pl.os) &&
					   strlen(pl.arch) < sizeof(pl.arch),
				   "platform '%s'", p);
		free(p);
	}
	json_decref(j);
	return 0;
}
