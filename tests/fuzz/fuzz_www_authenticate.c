/* Fuzzes the parser of a registry's WWW-Authenticate header (the bearer-token flow of pull). */
#define _GNU_SOURCE
#include "core/registry.h"
#include "tests/fuzz/fuzz.h"

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		(c && strchr("!#$%&'*+.^_`|~-", c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = fuzz_str(data, size);
	struct sbx_challenge c = { 0 };

	if (sbx_registry_parse_challenge(h, &c) == 0) {
		FUZZ_CHECK(c.scheme && *c.scheme, "no scheme");
		for (const char *p = c.scheme; *p; p++)
			FUZZ_CHECK(token_char(*p), "scheme '%s'", c.scheme);
		FUZZ_CHECK(strlen(c.scheme) + (c.realm ? strlen(c.realm) : 0) <= size,
			   "more out than in");
		sbx_challenge_release(&c);
	}
	free(h);
	return 0;
}
