/* Fuzzes what makes text terminal-safe: sbx_term_safe_n against a reference written another
 * way, and sbx_json_dumps (JSON output) on any string. */
#define _GNU_SOURCE
#include "core/json.h"
#include "core/strbuf.h"
#include "tests/fuzz/fuzz.h"

/* the code point of a valid, shortest UTF-8 sequence at s (its length in *len), or -1 */
static long decode(const unsigned char *s, size_t n, size_t *len)
{
	static const long min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t l = s[0] < 0x80	  ? 1
		: s[0] >> 5 == 6  ? 2
		: s[0] >> 4 == 14 ? 3
		: s[0] >> 3 == 30 ? 4
				  : 0;
	long cp;

	if (!l || l > n)
		return -1;
	cp = l == 1 ? s[0] : s[0] & (0x7f >> l);
	for (size_t i = 1; i < l; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min[l] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = l;
	return cp;
}

static char *reference(const unsigned char *s, size_t n)
{
	struct strbuf b = STRBUF_INIT;

	for (size_t i = 0; i < n;) {
		size_t l = 0;
		long cp = decode(s + i, n - i, &l);
		if (cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp <= 0x9f)) {
			strbuf_add(&b, s + i, l);
			i += l;
			continue;
		}
		size_t k = cp >= 0x80 ? 2 : 1;
		for (size_t e = 0; e < k; e++, i++) {
			if (s[i] == '\n')
				strbuf_addstr(&b, "\\n");
			else if (s[i] == '\t')
				strbuf_addstr(&b, "\\t");
			else if (s[i] == '\r')
				strbuf_addstr(&b, "\\r");
			else
				strbuf_addf(&b, "\\x%02x", s[i]);
		}
	}
	return strbuf_detach(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *got = sbx_term_safe_n(data, size);
	char *want = reference(data, size);

	FUZZ_CHECK(streq(got, want), "'%s', not '%s'", want, got);
	FUZZ_CHECK(!fuzz_term_unsafe(got) && !strchr(got, '\n'), "%s", fuzz_term_unsafe(got));
	free(got);
	free(want);

	/* JSON output: any string goes out in printable ASCII and comes back the same */
	json_t *s = json_stringn((const char *)data, size);
	if (s) {
		char *t = sbx_json_dump(s, false);
		for (const char *c = t; *c; c++)
			FUZZ_CHECK(*c >= 0x20 && *c < 0x7f, "byte %02x in '%s'", (unsigned char)*c,
				   t);
		json_error_t je;
		json_t *back = json_loads(t, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
		FUZZ_CHECK(back && json_equal(s, back), "'%s' does not read back: %s", t, je.text);
		json_decref(back);
		free(t);
		json_decref(s);
	}
	return 0;
}
