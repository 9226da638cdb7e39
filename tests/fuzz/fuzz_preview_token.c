/* Fuzzes a preview's token check (the X-Sbx-Preview-Token header, a sbx_preview_token* cookie,
 * the sbx_token query parameter and the redirect without it) and the constant-time compare. */
#define _GNU_SOURCE
#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

static const char token[] = "0123456789abcdef0123456789abcdef";

static int check(const char *head, size_t hl, char **loc)
{
	*loc = NULL;
	int r = local_preview_token(head, hl, token, loc);

	FUZZ_CHECK(r >= LOCAL_TOKEN_BAD && r <= LOCAL_TOKEN_REDIRECT, "verdict %d", r);
	FUZZ_CHECK((r == LOCAL_TOKEN_REDIRECT) == (*loc != NULL), "location %d", r);
	if (*loc) {
		/* it goes into a Location header: no CR, LF, NUL, nothing past the target */
		for (const char *p = *loc; *p; p++)
			FUZZ_CHECK((unsigned char)*p > 0x20 && *p != 0x7f, "byte %02x in Location",
				   (unsigned char)*p);
		FUZZ_CHECK(strlen(*loc) < hl, "location longer than the head");
	}
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	char *loc;

	FUZZ_CHECK(local_ct_equal(buf, size, token) ==
			   (size == sizeof(token) - 1 && memcmp(buf, token, size) == 0),
		   "ct_equal");
	size_t hl = local_http_head_len(buf, size, 0);
	if (hl) {
		int r = check(buf, hl, &loc);
		free(loc);
		/* no token anywhere in it: never let through */
		if (!memmem(buf, hl, token, sizeof(token) - 1))
			FUZZ_CHECK(r == LOCAL_TOKEN_BAD || r == LOCAL_TOKEN_DENY,
				   "let in without it");
	}
	/* the input as a path: with the header it is let in; with the query it is redirected to
	 * the same path without it; with a wrong token, neither */
	char path[256];
	size_t pl = 0;
	for (size_t i = 0; i < size && pl < sizeof(path) - 1; i++)
		if (data[i] > 0x20 && data[i] < 0x7f && data[i] != '?' && data[i] != '&' &&
		    data[i] != '#')
			path[pl++] = (char)data[i];
	path[pl] = 0;
	char *h = xasprintf("GET /%s HTTP/1.1\r\nHost: x\r\nX-Sbx-Preview-Token: %s\r\n\r\n", path,
			    token);
	FUZZ_CHECK(check(h, strlen(h), &loc) == LOCAL_TOKEN_OK, "header refused: %s", h);
	free(h);
	h = xasprintf(
		"GET /%s?a=1&sbx_token=%s HTTP/1.1\r\nCookie: x=y; sbx_preview_token_1=no\r\n\r\n",
		path, token);
	FUZZ_CHECK(check(h, strlen(h), &loc) == LOCAL_TOKEN_REDIRECT, "query refused: %s", h);
	char *want = xasprintf("/%s?a=1", path);
	FUZZ_CHECK(streq(loc, want), "redirect to '%s', not '%s'", loc, want);
	free(loc);
	free(want);
	free(h);
	h = xasprintf("GET /%s HTTP/1.1\r\nCookie: sbx_preview_token=%.31sX\r\n\r\n", path, token);
	FUZZ_CHECK(check(h, strlen(h), &loc) == LOCAL_TOKEN_DENY, "a wrong cookie let in: %s", h);
	free(h);
	return 0;
}
