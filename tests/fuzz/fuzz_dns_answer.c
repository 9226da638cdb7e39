/* Fuzzes the resolver's reading of a DNS answer (a nameserver's bytes): the records it takes
 * are A or AAAA of the type asked, never past the room given, the TTL only ever lowered; a
 * prefix of a message never yields more. */
#define _GNU_SOURCE
#include <arpa/nameser.h>

#include "providers/local/net.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage a[LOCAL_RESOLVE_MAX + 1];

	if (size < 1)
		return 0;
	int type = data[0] & 1 ? ns_t_aaaa : ns_t_a;
	const unsigned char *m = data + 1;
	size_t len = size - 1, n = 0, n2 = 0;
	unsigned ttl = 1u << 31, ttl2 = 1u << 31;
	/* a copy of exactly len bytes, so a read past the end is ASan's to see */
	unsigned char *c = malloc(len ? len : 1);
	memcpy(c, m, len);
	memset(&a[LOCAL_RESOLVE_MAX], 0x5a, sizeof(a[0]));
	size_t k = local_dns_answer(c, len, type, a, &n, LOCAL_RESOLVE_MAX, &ttl);
	FUZZ_CHECK(k == n && n <= LOCAL_RESOLVE_MAX, "added %zu, n %zu", k, n);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(a[i].ss_family == (type == ns_t_a ? AF_INET : AF_INET6), "family %d",
			   a[i].ss_family);
	const unsigned char *g = (const unsigned char *)&a[LOCAL_RESOLVE_MAX];
	for (size_t i = 0; i < sizeof(a[0]); i++)
		FUZZ_CHECK(g[i] == 0x5a, "written past the room given");
	FUZZ_CHECK(ttl <= 1u << 31, "ttl raised");
	/* room for one less: never more than that */
	if (n > 0) {
		size_t k1 = local_dns_answer(c, len, type, a, &n2, n - 1, &ttl2);
		FUZZ_CHECK(k1 == n - 1, "room %zu gave %zu", n - 1, k1);
	}
	free(c);
	return 0;
}
