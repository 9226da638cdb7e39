/* Fuzzes the egress proxy's HTTP request parsing: the end of the head (found in one go or as
 * bytes trickle in), the request line and headers, CONNECT and absolute-URL targets, host:port,
 * Proxy-Authorization Basic, the origin-form head sent upstream, and the log's escaping; the
 * same bytes as a response head (its framing, the head the client gets) and what follows the
 * head as a chunked body (the same end however the bytes arrive). */
#define _GNU_SOURCE
#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

static void check_escaped(const char *host, size_t n)
{
	char *e = local_escape_name(host, n);

	for (const char *p = e; *p; p++)
		FUZZ_CHECK(*p > 0x20 && *p < 0x7f, "byte %02x escaped as itself",
			   (unsigned char)*p);
	free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	size_t hl = local_http_head_len(buf, size, 0);

	FUZZ_CHECK(hl <= size, "head %zu of %zu", hl, size);
	/* as the loop reads it: the end is found the same however the bytes arrived */
	size_t k = size / 2;
	if (local_http_head_len(buf, k, 0) == 0)
		FUZZ_CHECK(local_http_head_len(buf, size, k) == hl, "split at %zu", k);
	if (hl == 0)
		return 0;
	FUZZ_CHECK(memcmp(buf + hl - 4, "\r\n\r\n", 4) == 0, "no CRLF CRLF at the end");

	struct local_http_resp rp;
	if (local_http_resp_parse(buf, hl, size & 1, &rp) == 0) {
		FUZZ_CHECK(rp.status >= 100 && rp.status <= 999, "status %d", rp.status);
		size_t ol;
		char *o = local_http_resp_head(buf, hl, rp.close, &ol);
		FUZZ_CHECK(ol >= 4 && local_http_head_len(o, ol, 0) == ol,
			   "response head ends early");
		FUZZ_CHECK(!strcasestr(o, "\r\nconnection:") || rp.close, "Connection kept");
		free(o);
	}
	struct local_body b1 = { .kind = LOCAL_BODY_CHUNKED }, b2 = b1;
	long long all = local_body_scan(&b1, buf + hl, size - hl), part = 0;
	for (size_t off = hl; off < size && !b2.done && part >= 0;) { /* a byte at a time */
		long long r1 = local_body_scan(&b2, buf + off, 1);
		part = r1 < 0 ? -1 : part + r1;
		off += r1 > 0 ? (size_t)r1 : 1;
		if (r1 == 0)
			break;
	}
	FUZZ_CHECK(all < 0 ? part < 0 : part == all && b1.done == b2.done,
		   "chunked: %lld in one go, %lld a byte at a time", all, part);
	FUZZ_CHECK(all <= (long long)(size - hl), "chunked: more than there is");

	struct local_http_req r;
	const char *why = NULL;
	if (local_http_parse(buf, hl, &r, &why) < 0) {
		FUZZ_CHECK(why && why[strlen(why) - 1] == '\n' && !strchr(why, '\r'), "400 body");
		return 0;
	}
	FUZZ_CHECK(r.host_len > 0 && r.host_len == strlen(r.host) && r.host_len <= LOCAL_HOST_MAX,
		   "host length %zu", r.host_len);
	for (size_t i = 0; i < r.host_len; i++)
		FUZZ_CHECK((unsigned char)r.host[i] > 0x20 && r.host[i] != 0x7f &&
				   !(r.host[i] >= 'A' && r.host[i] <= 'Z'),
			   "host byte %02x", (unsigned char)r.host[i]);
	FUZZ_CHECK(r.port >= 1 && r.port <= 65535, "port %d", r.port);
	FUZZ_CHECK(r.target_off + r.target_len <= hl, "target out of the head");
	FUZZ_CHECK(strncmp(r.version, "HTTP/1.", 7) == 0, "version %s", r.version);
	(void)local_host_dialable(r.host);
	check_escaped(r.host, r.host_len);

	size_t vl;
	const char *v = local_http_header(buf, hl, "Host", &vl);
	if (v)
		FUZZ_CHECK(v >= buf && v + vl <= buf + hl && !memchr(v, '\n', vl), "header value");
	char user[256], pass[256];
	int b = local_http_basic(buf, hl, user, sizeof(user), pass, sizeof(pass));
	FUZZ_CHECK(b >= -1 && b <= 1, "basic %d", b);
	if (b == 1)
		FUZZ_CHECK(strlen(user) < sizeof(user) && strlen(pass) < sizeof(pass),
			   "credential");

	if (!r.connect) {
		FUZZ_CHECK(r.path_off + r.path_len <= hl, "path out of the head");
		size_t ol;
		char *o = local_http_origin_head(buf, hl, &r, true, &ol);
		/* a head of its own: one request line, no Proxy-* header, "Connection: close" */
		FUZZ_CHECK(ol >= 4 && local_http_head_len(o, ol, 0) == ol,
			   "origin head ends early");
		FUZZ_CHECK(strncmp(o, r.method, strlen(r.method)) == 0 &&
				   o[strlen(r.method)] == ' ' && o[strlen(r.method) + 1] == '/',
			   "request line '%.40s'", o);
		FUZZ_CHECK(ol >= 21 && memcmp(o + ol - 21, "Connection: close\r\n\r\n", 21) == 0,
			   "no Connection: close");
		FUZZ_CHECK(!strcasestr(o, "\r\nproxy-"), "a Proxy- header goes upstream");
		FUZZ_CHECK(!memchr(o, 0, ol), "NUL upstream");
		free(o);
	}
	return 0;
}
