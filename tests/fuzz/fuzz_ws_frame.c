/* Fuzzes the WebSocket reader (RFC 6455 frames as a server sends them: lengths, fragments,
 * control frames between fragments): the first input byte says how the network cuts the bytes
 * into pieces; however they are cut, the same messages come out, or the same error. */
#define _GNU_SOURCE
#include "core/ws.h"
#include "tests/fuzz/fuzz.h"

struct outcome {
	int r;
	struct strbuf msgs; /* each message: its opcode, its length, its bytes */
	size_t n;
};

static void read_all(const uint8_t *s, size_t size, size_t chunk, struct outcome *o)
{
	struct sbx_ws_reader rd = { 0 };
	struct sbx_err err = { 0 };
	size_t fed = 0;

	memset(o, 0, sizeof(*o));
	for (;;) {
		int op;
		const uint8_t *d;
		size_t len;
		int r = sbx_ws_reader_next(&rd, &op, &d, &len, &err);
		if (r < 0) {
			o->r = -1;
			break;
		}
		if (r == 1) {
			FUZZ_CHECK(len <= SBX_WS_MSG_MAX, "a message of %zu bytes", len);
			FUZZ_CHECK(op != SBX_WS_CONT, "a message without its opcode");
			strbuf_addf(&o->msgs, "%d %zu:", op, len);
			strbuf_add(&o->msgs, d, len);
			o->n++;
			continue;
		}
		if (fed == size)
			break;
		size_t k = chunk && size - fed > chunk ? chunk : size - fed;
		strbuf_add(&rd.in, s + fed, k);
		fed += k;
	}
	sbx_ws_reader_release(&rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = data[0] % 13 + 1;
	struct outcome whole, cut;

	read_all(data + 1, size - 1, 0, &whole);
	read_all(data + 1, size - 1, chunk, &cut);
	FUZZ_CHECK(whole.r == cut.r, "%d whole, %d in pieces of %zu", whole.r, cut.r, chunk);
	FUZZ_CHECK(
		whole.n == cut.n && whole.msgs.len == cut.msgs.len &&
			(!whole.msgs.len || !memcmp(whole.msgs.buf, cut.msgs.buf, whole.msgs.len)),
		"different messages in pieces of %zu", chunk);
	strbuf_release(&whole.msgs);
	strbuf_release(&cut.msgs);
	return 0;
}
