/* Fuzzes the image store's refs.json (and an image config blob it names) as image ls, image rm
 * and create --image read them: the input is refs.json, a line "----", then the blob stored as
 * sha256:aaaa... (64 a). */
#define _GNU_SOURCE
#include "core/digest.h"
#include "core/image.h"
#include "core/json.h"
#include "tests/fuzz/fuzz.h"

#define BLOB_HEX "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static struct sbx_store st;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char p[512];

	st.root = xasprintf("%s/store", fuzz_dir());
	snprintf(p, sizeof(p), "%s/images/blobs/sha256", st.root);
	if (sbx_mkdir_p(p, 0700) < 0) {
		perror(p);
		abort();
	}
	return 0;
}

static void check_image(const struct sbx_image *img)
{
	FUZZ_CHECK(sbx_digest_valid(img->id) && sbx_digest_valid(img->manifest), "ids");
	FUZZ_CHECK(img->config != NULL, "no config");
	for (size_t i = 0; i < img->n_layers; i++)
		FUZZ_CHECK(sbx_digest_valid(img->layers[i]) && sbx_digest_valid(img->chain[i]),
			   "layer %zu", i);
	FUZZ_CHECK(!img->layers[img->n_layers] && !img->chain[img->n_layers], "not terminated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *part[2];
	size_t len[2];
	size_t n = fuzz_split(data, size, part, len, 2);
	char imgdir[512];

	snprintf(imgdir, sizeof(imgdir), "%s/images", st.root);
	fuzz_file(imgdir, "refs.json", part[0], len[0]);
	fuzz_file(imgdir, "blobs/sha256/" BLOB_HEX, n > 1 ? part[1] : NULL, n > 1 ? len[1] : 0);

	json_t *a = NULL;
	struct sbx_err err = { 0 };
	if (sbx_image_list(&st, &a, &err) < 0) {
		FUZZ_CHECK(err.msg[0], "an error without a message");
		return 0;
	}
	FUZZ_CHECK(json_is_array(a), "image ls: not a list");
	/* image ls --json and the table */
	char *t = sbx_json_dumps(a, JSON_INDENT(2));
	FUZZ_CHECK(!fuzz_term_unsafe(t), "image ls --json prints %s", fuzz_term_unsafe(t));
	free(t);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		static const char *const cols[] = { "name", "repository", "tag", "id" };
		for (size_t k = 0; k < ARRAY_SIZE(cols); k++) {
			const char *s = sbx_json_str(v, cols[k]);
			FUZZ_CHECK(s, "entry %zu has no %s", i, cols[k]);
			char *safe = sbx_term_safe(s);
			FUZZ_CHECK(!fuzz_term_unsafe(safe) && !strchr(safe, '\n'),
				   "%s shown with %s", cols[k], fuzz_term_unsafe(safe));
			free(safe);
		}
		if (i >= 8)
			continue;
		/* each name, and each id, finds its image or fails cleanly */
		const char *look[] = { sbx_json_str(v, "name"), sbx_json_str(v, "id") };
		for (size_t k = 0; k < ARRAY_SIZE(look); k++) {
			struct sbx_image img = { 0 };
			struct sbx_err e2 = { 0 };
			if (!look[k] || !*look[k])
				continue;
			if (sbx_image_find(&st, look[k], &img, &e2) == 0)
				check_image(&img);
			else
				FUZZ_CHECK(e2.msg[0], "find '%s': an error without a message",
					   look[k]);
			sbx_image_release(&img);
		}
	}
	json_decref(a);
	return 0;
}
