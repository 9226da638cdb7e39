/* Fuzzes the decoding of E2B's envd process stream (Connect frames of JSON envelopes): the
 * first input byte says how the network cuts the stream into pieces, the second whether exec
 * had a --timeout, the rest is the stream. However it is cut, the outcome is the same. */
#define _GNU_SOURCE
#include "core/strbuf.h"
#include "providers/remote-decode.h"
#include "tests/fuzz/fuzz.h"

struct outcome {
	int r, status;
	struct strbuf out, errs;
	struct sbx_err err;
};

static void decode(const uint8_t *s, size_t n, size_t chunk, long long tmo, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->status = -1;
	o->r = e2b_decode_stream((const char *)s, n, chunk, tmo, &o->out, &o->errs, &o->status,
				 &o->err);
}

static bool buf_same(const struct strbuf *a, const struct strbuf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t chunk = data[0] % 17 + 1;
	long long tmo = data[1] & 1 ? 5000 : 0;
	struct outcome whole, cut;

	decode(data + 2, size - 2, 0, tmo, &whole);
	decode(data + 2, size - 2, chunk, tmo, &cut);
	FUZZ_CHECK(whole.r == cut.r, "%d whole, %d in pieces of %zu", whole.r, cut.r, chunk);
	FUZZ_CHECK(whole.r < 0 || whole.status == cut.status, "status %d whole, %d in pieces",
		   whole.status, cut.status);
	FUZZ_CHECK(whole.r == 0 || streq(whole.err.msg, cut.err.msg), "'%s' whole, '%s' in pieces",
		   whole.err.msg, cut.err.msg);
	FUZZ_CHECK(buf_same(&whole.out, &cut.out) && buf_same(&whole.errs, &cut.errs),
		   "the output differs");
	if (whole.r == 0)
		FUZZ_CHECK(whole.status >= 0 && whole.status <= 255, "status %d", whole.status);
	else
		FUZZ_CHECK(whole.err.msg[0] && whole.err.kind != SBX_E_NONE, "an empty error");
	/* the error line as cmd_report prints it */
	char *line = sbx_term_safe(whole.err.msg);
	FUZZ_CHECK(!fuzz_term_unsafe(line) && !strchr(line, '\n'), "error shown with %s",
		   fuzz_term_unsafe(line));
	free(line);
	strbuf_release(&whole.out);
	strbuf_release(&whole.errs);
	strbuf_release(&cut.out);
	strbuf_release(&cut.errs);
	return 0;
}
