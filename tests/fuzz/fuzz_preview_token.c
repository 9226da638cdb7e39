/* Fuzzes a preview's token check (the X-Sbx-Preview-Token header, a sbx_preview_token* cookie,
 * the sbx_token query parameter and the redirect without it) and the constant-time compare;
 * and what the Kubernetes preview forwards: the paths it lets through, the cookies it passes. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"
#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

static int hex(char c)
{
	return c >= '0' && c <= '9'    ? c - '0'
		: c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10
				       : -1;
}

/* a path let through to the pod's proxy has no dot segment, however it is written; the cookies
 * passed on hold none of sbx's */
static void kube_paths(const char *buf, size_t size)
{
	if (kube_preview_path_ok(buf, size)) {
		struct strbuf d = STRBUF_INIT;
		for (size_t i = 0; i < size && buf[i] != '?' && buf[i] != '#'; i++) {
			if (buf[i] == '%' && i + 2 < size && hex(buf[i + 1]) >= 0 &&
			    hex(buf[i + 2]) >= 0) {
				strbuf_addch(&d, (char)(hex(buf[i + 1]) << 4 | hex(buf[i + 2])));
				i += 2;
			} else {
				strbuf_addch(&d, buf[i]);
			}
		}
		strbuf_addch(&d, '/'); /* so that a last segment ends like the others */
		FUZZ_CHECK(d.buf[0] == '/' && !strstr(d.buf, "/../") && !strstr(d.buf, "/./") &&
				   !memchr(d.buf, 0, d.len),
			   "a dot segment let through: %s", d.buf);
		strbuf_release(&d);
	}
	char *ck = kube_preview_cookie(buf, size);
	for (char *c = ck; c && *c;) {
		FUZZ_CHECK(strncmp(c, "sbx_preview_token=", 18) &&
				   strncmp(c, "sbx_preview_token_", 18),
			   "sbx's token passed on: %s", ck);
		char *n = strstr(c, "; ");
		c = n ? n + 2 : NULL;
	}
	free(ck);
}

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

	kube_paths(buf, size);
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
