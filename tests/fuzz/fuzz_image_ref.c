/* Fuzzes the docker-style image reference parser: what parses is normalized for good (its
 * normalized name and its familiar form parse back to the same name). */
#define _GNU_SOURCE
#include "core/digest.h"
#include "core/registry.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memchr(data, 0, size))
		return 0; /* argv and JSON strings hold no NUL */
	char *s = fuzz_str(data, size);
	struct sbx_ref r = { 0 };
	struct sbx_err err = { 0 };

	if (sbx_ref_parse(s, &r, &err) < 0) {
		FUZZ_CHECK(err.kind == SBX_E_USAGE && err.msg[0], "error kind %d", err.kind);
		sbx_ref_release(&r);
		free(s);
		return 0;
	}
	FUZZ_CHECK(r.registry && r.host && r.repo && r.name, "missing part");
	FUZZ_CHECK(!r.tag != !r.digest, "a tag and a digest, or neither");
	FUZZ_CHECK(!r.digest || sbx_digest_valid(r.digest), "digest '%s'", r.digest);
	FUZZ_CHECK(!fuzz_term_unsafe(r.name) && !strpbrk(r.name, " \n"), "name '%s'", r.name);
	char *want = r.digest ? xasprintf("%s/%s@%s", r.registry, r.repo, r.digest)
			      : xasprintf("%s/%s:%s", r.registry, r.repo, r.tag);
	FUZZ_CHECK(streq(want, r.name), "name '%s', parts say '%s'", r.name, want);
	free(want);

	const char *again[2] = { r.name, NULL };
	char *fam = sbx_ref_familiar(r.name);
	again[1] = fam;
	for (size_t i = 0; i < 2; i++) {
		struct sbx_ref r2 = { 0 };
		int rc = sbx_ref_parse(again[i], &r2, &err);
		FUZZ_CHECK(rc == 0, "'%s' (from '%s') does not parse: %s", again[i], s, err.msg);
		FUZZ_CHECK(streq(r2.name, r.name) && streq(r2.host, r.host),
			   "'%s' (from '%s') is '%s', not '%s'", again[i], s, r2.name, r.name);
		sbx_ref_release(&r2);
	}
	free(fam);
	sbx_ref_release(&r);
	free(s);
	return 0;
}
