/* Fuzzes the SOCKS5 handshake parser: greeting, user/password, request, as any prefix of them
 * arrives; what it finds must be where the bytes say and no step may come back different. */
#define _GNU_SOURCE
#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct local_socks m, p;
	int st = local_socks_parse(data, size, &m);

	FUZZ_CHECK(st >= LOCAL_SOCKS_BAD_ATYP && st <= LOCAL_SOCKS_REQUEST, "step %d", st);
	if (st >= LOCAL_SOCKS_GREETING) {
		FUZZ_CHECK(m.greeting_len >= 3 && m.greeting_len <= size, "greeting %zu",
			   m.greeting_len);
		FUZZ_CHECK(m.method == 0 || m.method == 2 || m.method == 0xff, "method %d",
			   m.method);
	}
	if (st == LOCAL_SOCKS_AUTH)
		FUZZ_CHECK(m.method == 2 && m.greeting_len + m.auth_len <= size, "auth");
	if (st == LOCAL_SOCKS_REQUEST) {
		FUZZ_CHECK(m.method != 0xff, "a request after no acceptable method");
		FUZZ_CHECK(m.request_len <= size && m.request_len > m.greeting_len + m.auth_len,
			   "request %zu of %zu", m.request_len, size);
		FUZZ_CHECK(m.host_len <= LOCAL_HOST_MAX && m.host_len > 0, "host %zu", m.host_len);
		FUZZ_CHECK(m.port >= 0 && m.port <= 65535, "port %d", m.port);
		FUZZ_CHECK(m.atyp == 1 || m.atyp == 3 || m.atyp == 4, "atyp %d", m.atyp);
		if (m.atyp != 3)
			FUZZ_CHECK(strlen(m.host) == m.host_len, "address text");
		char *e = local_escape_name(m.host, m.host_len);
		for (const char *c = e; *c; c++)
			FUZZ_CHECK(*c > 0x20 && *c < 0x7f, "escaped %02x", (unsigned char)*c);
		free(e);
		/* the request alone parses the same; data after it is not the handshake's */
		FUZZ_CHECK(local_socks_parse(data, m.request_len, &p) == LOCAL_SOCKS_REQUEST &&
				   p.host_len == m.host_len &&
				   memcmp(p.host, m.host, m.host_len) == 0 && p.port == m.port,
			   "the request's own bytes parse differently");
	}
	/* a shorter prefix never gets further, and never fails where the whole did not */
	if (size > 0 && st >= 0) {
		int sp = local_socks_parse(data, size - 1, &p);
		FUZZ_CHECK(sp >= 0 && sp <= st, "prefix %d, whole %d", sp, st);
	}
	return 0;
}
