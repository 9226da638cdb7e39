/* Fuzzes the requests of a connection whose TLS the egress proxy ends for its secrets
 * (net-inject.c): the head parsed whole however the bytes arrive (a placeholder split across
 * reads is found the same), hostile heads refused with a status and one line, never a
 * placeholder sent on to a host that is not its own, nor left in a head that is sent on. */
#define _GNU_SOURCE
#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

static char ph_a[] = "sbx-secret-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
static char ph_b[] = "sbx-secret-BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
static char name_a[] = "A_KEY", name_b[] = "B_KEY";
static char val_a[] = "value-of-a", val_b[] = "a much longer value of b, with spaces";
static char host_a[] = "api.test", host_b[] = "*.other.test";
static char *hosts_a[] = { host_a, NULL }, *hosts_b[] = { host_b, NULL };
static const struct local_secret secrets[2] = {
	{ name_a, ph_a, val_a, hosts_a },
	{ name_b, ph_b, val_b, hosts_b },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	/* the first byte picks the connection's host */
	static const char *const hosts[] = { "api.test", "x.other.test", "elsewhere.test" };
	if (size < 1)
		return 0;
	const char *host = hosts[data[0] % 3];
	buf++;
	size--;

	struct local_inject x, y;
	int r = local_inject_request(buf, size, host, secrets, 2, &x);
	FUZZ_CHECK(r == LOCAL_INJECT_OK || r == LOCAL_INJECT_MORE || r == LOCAL_INJECT_REFUSE,
		   "result %d", r);
	if (r == LOCAL_INJECT_REFUSE) {
		FUZZ_CHECK(x.code >= 400 && x.code <= 599 && x.status && *x.why &&
				   !strpbrk(x.why, "\r\n"),
			   "refusal %d '%s'", x.code, x.why);
		return 0;
	}
	if (r == LOCAL_INJECT_MORE) {
		FUZZ_CHECK(size < LOCAL_HEAD_MAX, "MORE past the cap: %zu", size);
		return 0;
	}
	FUZZ_CHECK(x.consumed <= size && x.consumed <= LOCAL_HEAD_MAX, "consumed %zu", x.consumed);
	FUZZ_CHECK(local_http_head_len(x.head, x.head_len, 0) == x.head_len,
		   "the head sent on does not end where it should");
	FUZZ_CHECK(!memmem(x.head, x.head_len, ph_a, strlen(ph_a)) || !(x.injected & 1),
		   "a placeholder of A left in a head A was injected into");
	for (int i = 0; i < 2; i++)
		if (x.injected & (1u << i))
			FUZZ_CHECK(local_secret_host(&secrets[i], host), "secret %d sent to %s", i,
				   host);
	/* the same head, the bytes arriving in two reads: the same answer once whole */
	for (size_t k = 1; k < x.consumed; k += 1 + x.consumed / 7) {
		int r2 = local_inject_request(buf, k, host, secrets, 2, &y);
		FUZZ_CHECK(r2 == LOCAL_INJECT_MORE, "prefix %zu of a head of %zu: %d", k,
			   x.consumed, r2);
	}
	r = local_inject_request(buf, size, host, secrets, 2, &y);
	FUZZ_CHECK(r == LOCAL_INJECT_OK && y.head_len == x.head_len &&
			   memcmp(y.head, x.head, x.head_len) == 0,
		   "not the same head twice");
	free(y.head);
	/* the body that follows: scanned as the relay scans it */
	struct local_body b = x.body;
	long long k = local_body_scan(&b, buf + x.consumed, size - x.consumed);
	FUZZ_CHECK(k <= (long long)(size - x.consumed), "body: more than there is");
	free(x.head);
	return 0;
}
