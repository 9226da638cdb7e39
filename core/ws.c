/* A WebSocket client (RFC 6455): the upgrade and the framing over libcurl's CONNECT_ONLY mode
 * (curl_easy_send/recv on the connection libcurl made), or libcurl's own WebSocket API when the
 * loaded libcurl has one (8.x built with ws). */
#define _GNU_SOURCE
#include "core/ws.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <strings.h>
#include <sys/random.h>

#include "core/lazy.h"
#include "core/log.h"
#include "core/util.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0"
#endif

#define HEAD_MAX 65536
#define REFUSAL_BODY_MAX 65536
#define PENDING_MAX (64 << 20) /* read while a send waits, not taken yet */
#define SEND_STALL_MS 60000    /* a send that moves nothing for this long fails */

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* --- SHA-1 (FIPS 180-4), for the Sec-WebSocket-Accept check only --------------------------- */

static uint32_t rol32(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
			(uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		uint32_t t = rol32(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol32(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

static void sha1(const void *data, size_t n, uint8_t out[20])
{
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	const uint8_t *p = data;
	uint8_t tail[128] = { 0 };
	size_t full = n / 64 * 64, rest = n - full;

	for (size_t i = 0; i < full; i += 64)
		sha1_block(h, p + i);
	memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	size_t tl = rest + 1 + 8 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)n * 8;
	for (int i = 0; i < 8; i++)
		tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha1_block(h, tail);
	if (tl == 128)
		sha1_block(h, tail + 64);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

char *sbx_ws_accept_for(const char *key)
{
	_cleanup_free_ char *s = xasprintf("%s%s", key, ws_guid);
	uint8_t d[20];

	sha1(s, strlen(s), d);
	return sbx_base64_encode(d, sizeof(d));
}

/* --- frames --------------------------------------------------------------------------------- */

long sbx_ws_parse_frame(uint8_t *buf, size_t n, bool server, struct sbx_ws_frame *ret,
			struct sbx_err *err)
{
	if (n < 2)
		return 0;
	bool fin = buf[0] & 0x80, masked = buf[1] & 0x80;
	int op = buf[0] & 0x0f;
	uint64_t len = buf[1] & 0x7f;
	size_t pos = 2;

	if (buf[0] & 0x70)
		return sbx_err_set(err, SBX_E_REMOTE, "a WebSocket frame uses reserved bits");
	if (!(op <= SBX_WS_BINARY || (op >= SBX_WS_CLOSE && op <= SBX_WS_PONG)))
		return sbx_err_set(err, SBX_E_REMOTE, "a WebSocket frame has unknown opcode %d",
				   op);
	if (masked == server)
		return sbx_err_set(err, SBX_E_REMOTE, "a WebSocket frame from the %s is %smasked",
				   server ? "server" : "client", masked ? "" : "not ");
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		pos = 4;
		if (len < 126)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket frame's length is not minimally encoded");
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | buf[2 + i];
		pos = 10;
		if (len >> 63)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket frame's length is invalid");
		if (len <= 0xffff)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket frame's length is not minimally encoded");
	}
	if (op >= SBX_WS_CLOSE && (!fin || len > 125))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "a WebSocket control frame is fragmented or too long");
	if (len > SBX_WS_MSG_MAX)
		return sbx_err_set(err, SBX_E_REMOTE, "a WebSocket frame is larger than %d MiB",
				   SBX_WS_MSG_MAX >> 20);
	uint8_t key[4] = { 0 };
	if (masked) {
		if (n < pos + 4)
			return 0;
		memcpy(key, buf + pos, 4);
		pos += 4;
	}
	if (n - pos < len)
		return 0;
	if (masked)
		for (uint64_t i = 0; i < len; i++)
			buf[pos + i] ^= key[i % 4];
	ret->fin = fin;
	ret->opcode = op;
	ret->payload = buf + pos;
	ret->len = len;
	return (long)(pos + len);
}

void sbx_ws_build_frame(struct strbuf *sb, int opcode, bool fin, const void *data, size_t n,
			const uint8_t *mask)
{
	uint8_t h[14];
	size_t hl = 2;

	h[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	if (n < 126) {
		h[1] = (uint8_t)n;
	} else if (n <= 0xffff) {
		h[1] = 126;
		h[2] = (uint8_t)(n >> 8);
		h[3] = (uint8_t)n;
		hl = 4;
	} else {
		h[1] = 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
		hl = 10;
	}
	if (mask) {
		h[1] |= 0x80;
		memcpy(h + hl, mask, 4);
		hl += 4;
	}
	strbuf_add(sb, h, hl);
	size_t at = sb->len;
	strbuf_add(sb, data, n);
	if (mask)
		for (size_t i = 0; i < n; i++)
			sb->buf[at + i] ^= (char)mask[i % 4];
}

void sbx_ws_reader_release(struct sbx_ws_reader *r)
{
	strbuf_release(&r->in);
	strbuf_release(&r->msg);
	r->off = 0;
	r->msg_op = 0;
}

int sbx_ws_reader_next(struct sbx_ws_reader *r, int *ret_op, const uint8_t **ret_data,
		       size_t *ret_len, struct sbx_err *err)
{
	if (r->msg_op < 0) { /* the last call returned the assembled message */
		strbuf_reset(&r->msg);
		r->msg_op = 0;
	}
	for (;;) {
		struct sbx_ws_frame f;
		if (!r->in.buf)
			return 0;
		long used = sbx_ws_parse_frame((uint8_t *)r->in.buf + r->off, r->in.len - r->off,
					       true, &f, err);
		if (used < 0)
			return -1;
		if (used == 0) {
			/* keep what is left at the start */
			if (r->off) {
				memmove(r->in.buf, r->in.buf + r->off, r->in.len - r->off);
				r->in.len -= r->off;
				r->off = 0;
				if (r->in.buf)
					r->in.buf[r->in.len] = 0;
			}
			return 0;
		}
		r->off += (size_t)used;
		if (f.opcode >= SBX_WS_CLOSE || (f.opcode != SBX_WS_CONT && f.fin && !r->msg_op)) {
			*ret_op = f.opcode;
			*ret_data = f.payload;
			*ret_len = (size_t)f.len;
			return 1;
		}
		if (f.opcode == SBX_WS_CONT && !r->msg_op)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket continuation frame continues nothing");
		if (f.opcode != SBX_WS_CONT && r->msg_op)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket message began inside another");
		if (f.opcode != SBX_WS_CONT)
			r->msg_op = f.opcode;
		if (r->msg.len + f.len > SBX_WS_MSG_MAX)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket message is larger than %d MiB",
					   SBX_WS_MSG_MAX >> 20);
		strbuf_add(&r->msg, f.payload, (size_t)f.len);
		if (f.fin) {
			*ret_op = r->msg_op;
			*ret_data = (const uint8_t *)(r->msg.buf ? r->msg.buf : "");
			*ret_len = r->msg.len;
			r->msg_op = -1;
			return 1;
		}
	}
}

/* --- libcurl -------------------------------------------------------------------------------- */

struct ws_fns {
	CURLcode (*send)(CURL *, const void *, size_t, size_t *);
	CURLcode (*recv)(CURL *, void *, size_t, size_t *);
	/* NULL unless libcurl has working WebSockets */
	CURLcode (*ws_send)(CURL *, const void *, size_t, size_t *, curl_off_t, unsigned int);
	CURLcode (*ws_recv)(CURL *, void *, size_t, size_t *, const struct curl_ws_frame **);
};
static struct ws_fns wsf;

static int ws_load(struct sbx_err *err)
{
	static bool loaded;
	static const char *const names[] = { "curl_easy_send", "curl_easy_recv" };
	void *fns[2];

	if (loaded)
		return 0;
	if (sbx_curl_load(err) < 0 || sbx_lazy_load(&sbx_lazy_curl, names, fns, 2, err) < 0)
		return -1;
	memcpy(&wsf.send, &fns[0], sizeof(void *));
	memcpy(&wsf.recv, &fns[1], sizeof(void *));
	/* libcurl's own WebSocket API, when it is built with it (7.88 has the symbols but
	 * answers CURLE_NOT_BUILT_IN): ws among its protocols. SBX_WS_CURL=0 keeps sbx's. */
	const char *env = getenv("SBX_WS_CURL");
	void *vi = dlsym(sbx_lazy_curl.handle, "curl_version_info");
	void *s = dlsym(sbx_lazy_curl.handle, "curl_ws_send");
	void *r = dlsym(sbx_lazy_curl.handle, "curl_ws_recv");
	if (vi && s && r && !(env && streq(env, "0"))) {
		curl_version_info_data *(*version_info)(CURLversion);
		memcpy(&version_info, &vi, sizeof(vi));
		const curl_version_info_data *d = version_info(CURLVERSION_NOW);
		for (const char *const *p = d ? d->protocols : NULL; p && *p; p++)
			if (!strcasecmp(*p, "ws")) {
				memcpy(&wsf.ws_send, &s, sizeof(s));
				memcpy(&wsf.ws_recv, &r, sizeof(r));
			}
	}
	sbx_debug("WebSockets: %s", wsf.ws_send ? "libcurl's" : "sbx's framing over libcurl");
	loaded = true;
	return 0;
}

static int wait_fd(int fd, short ev, long long deadline)
{
	for (;;) {
		long long left = deadline ? deadline - sbx_now_ms() : 1000;
		if (deadline && left <= 0)
			return 0;
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (r < 0 && errno == EINTR)
			return 1; /* the caller looks at its signals */
		if (r != 0)
			return 1;
		if (!deadline)
			return 1;
	}
}

/* why a libcurl call on the connection failed: its error buffer's words, else its code's */
static const char *why(const struct sbx_ws *ws, CURLcode c)
{
	return ws->errbuf[0] ? ws->errbuf : sbx_curl.easy_strerror(c);
}

static void ws_fail_closed(struct sbx_ws *ws, struct sbx_err *err)
{
	sbx_err_set(err, SBX_E_NETWORK, "%s closed the WebSocket connection mid-stream", ws->what);
}

/* the hand-made path: everything out, reading what arrives meanwhile */
static int raw_send_all(struct sbx_ws *ws, const char *p, size_t n, long long deadline,
			struct sbx_err *err)
{
	long long moved = sbx_now_ms();

	while (n) {
		size_t sent = 0;
		CURLcode c = wsf.send(ws->h, p, n, &sent);
		if (c == CURLE_OK) {
			p += sent;
			n -= sent;
			moved = sbx_now_ms();
			continue;
		}
		if (c != CURLE_AGAIN)
			return sbx_err_set(err, SBX_E_NETWORK, "cannot send to %s: %s", ws->what,
					   why(ws, c));
		/* take what the server sends meanwhile, or both sides may wait on each other */
		char buf[16384];
		size_t got = 0;
		c = wsf.recv(ws->h, buf, sizeof(buf), &got);
		if (c == CURLE_OK && got) {
			if (ws->rd.in.len > PENDING_MAX)
				return sbx_err_set(err, SBX_E_REMOTE,
						   "%s sends faster than its output is taken",
						   ws->what);
			strbuf_add(&ws->rd.in, buf, got);
			continue;
		}
		if (c == CURLE_OK || c != CURLE_AGAIN) {
			ws_fail_closed(ws, err);
			return -1;
		}
		if ((deadline && sbx_now_ms() > deadline) || sbx_now_ms() - moved > SEND_STALL_MS)
			return sbx_err_set(err, SBX_E_NETWORK, "%s did not take the data in time",
					   ws->what);
		struct pollfd pf = { .fd = ws->fd, .events = POLLOUT | POLLIN };
		(void)poll(&pf, 1, 1000);
	}
	return 0;
}

struct upgrade {
	struct strbuf head;
	long status;
	char *accept, *protocol, *retry_after;
	long long content_length;
	bool upgrade_ok, connection_ok;
};

static void upgrade_release(struct upgrade *u)
{
	strbuf_release(&u->head);
	free(u->accept);
	free(u->protocol);
	free(u->retry_after);
}

static bool token_in(const char *list, const char *tok)
{
	size_t k = strlen(tok);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t,");
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
			m--;
		if (m == k && !strncasecmp(p, tok, k))
			return true;
		p += n;
	}
	return false;
}

/* the status line and the headers that matter */
static int parse_head(struct upgrade *u, const char *what, struct sbx_err *err)
{
	char *s = u->head.buf;
	char *eol = strstr(s, "\r\n");
	long long code;

	if (!eol || strncmp(s, "HTTP/1.", 7) || eol - s < 12)
		return sbx_err_set(err, SBX_E_REMOTE, "%s did not answer the upgrade with HTTP",
				   what);
	_cleanup_free_ char *cs = xstrndup(s + 9, 3);
	if (sbx_parse_int(cs, 100, 599, &code) < 0)
		return sbx_err_set(err, SBX_E_REMOTE, "%s answered the upgrade with a bad status",
				   what);
	u->status = (long)code;
	u->content_length = -1;
	for (char *l = eol + 2; *l && strncmp(l, "\r\n", 2);) {
		char *e = strstr(l, "\r\n");
		if (!e)
			break;
		*e = 0;
		char *colon = strchr(l, ':');
		if (colon) {
			*colon = 0;
			char *v = colon + 1;
			v += strspn(v, " \t");
			size_t vl = strlen(v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				v[--vl] = 0;
			if (!strcasecmp(l, "upgrade"))
				u->upgrade_ok = !strcasecmp(v, "websocket");
			else if (!strcasecmp(l, "connection"))
				u->connection_ok = token_in(v, "upgrade");
			else if (!strcasecmp(l, "sec-websocket-accept") && !u->accept)
				u->accept = xstrdup(v);
			else if (!strcasecmp(l, "sec-websocket-protocol") && !u->protocol)
				u->protocol = xstrdup(v);
			else if (!strcasecmp(l, "retry-after") && !u->retry_after)
				u->retry_after = xstrdup(v);
			else if (!strcasecmp(l, "content-length") &&
				 sbx_parse_int(v, 0, 1LL << 40, &code) == 0)
				u->content_length = code;
		}
		l = e + 2;
	}
	return 0;
}

/* the request line's target: the URL's path and query */
static const char *url_target(const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	p += strcspn(p, "/?");
	return *p ? p : "/";
}

static int transport_fail(const struct sbx_ws_opts *o, CURLcode c, const char *errbuf,
			  struct sbx_err *err)
{
	_cleanup_free_ char *host = sbx_url_host(o->url);
	const char *why = errbuf[0] ? errbuf : sbx_curl.easy_strerror(c);

	if (sbx_curl_tls_error(c) || strstr(why, " alert "))
		return sbx_err_set(err, SBX_E_NETWORK, "TLS failure talking to %s at %s: %s%s",
				   o->what, host, why, o->tls_hint ? o->tls_hint : "");
	if (c == CURLE_OPERATION_TIMEDOUT)
		return sbx_err_set(err, SBX_E_NETWORK, "%s (%s) did not answer in time: %s",
				   o->what, host, why);
	if (c == CURLE_UNSUPPORTED_PROTOCOL)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "refusing '%s': %s is reached over https only (plain http is "
				   "allowed to loopback addresses)",
				   host, o->what);
	return sbx_err_set(err, SBX_E_NETWORK, "cannot connect to %s at %s: %s", o->what, host,
			   why);
}

/* sbx_curl_debug, the request line's target replaced by the one to show (u) */
static int ws_curl_debug(CURL *h, curl_infotype type, char *data, size_t n, void *u)
{
	const char *sp = n > 4 ? memchr(data, ' ', n) : NULL;
	const char *eol = sp ? memchr(sp, '\n', n - (size_t)(sp - data)) : NULL;
	if (type != CURLINFO_HEADER_OUT || !sp || !eol)
		return sbx_curl_debug(h, type, data, n, u);
	const char *v = eol;
	while (v > sp && v[-1] != ' ')
		v--; /* " HTTP/1.1\r\n" */
	if (v <= sp + 1)
		return sbx_curl_debug(h, type, data, n, u);
	struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, data, (size_t)(sp + 1 - data));
	strbuf_addstr(&sb, u);
	strbuf_add(&sb, v - 1, n - (size_t)(v - 1 - data));
	int r = sbx_curl_debug(h, type, sb.buf, sb.len, u);
	strbuf_release(&sb);
	return r;
}

/* the connection failed before the upgrade's answer: with TLS 1.3 a server that refuses the
 * client's certificate says so only now (an alert), which is a TLS failure all the same */
static int tls_ended(struct sbx_ws *ws, const struct sbx_ws_opts *o, CURLcode c,
		     struct sbx_err *err)
{
	const char *w = why(ws, c);
	if (strstr(w, " alert ") || strstr(w, "SSL_") || strstr(w, "TLS"))
		return transport_fail(o, CURLE_SSL_CONNECT_ERROR, w, err);
	/* hung up on over TLS with no alert read (a reset eats it): perhaps the same */
	bool tls = startswith(o->url, "https://") && o->tls_hint;
	return sbx_err_set(err, SBX_E_NETWORK,
			   "%s ended the connection before answering the WebSocket upgrade: %s%s",
			   o->what, w, tls ? o->tls_hint : "");
}

bool sbx_ws_header_value(const char *line, size_t n, const char *name, char **ret)
{
	size_t k = strlen(name);
	if (*ret || n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return false;
	const char *v = line + k + 1, *end = line + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && strchr(" \t\r\n", end[-1]))
		end--;
	*ret = xstrndup(v, (size_t)(end - v));
	return true;
}

/* libcurl's own upgrade: the headers that matter, as parse_head takes them from sbx's */
static size_t on_curl_ws_header(char *p, size_t size, size_t n, void *u)
{
	struct upgrade *up = u;
	size_t len = size * n;

	if (len >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new answer: its own headers */
		free(up->protocol);
		free(up->retry_after);
		up->protocol = up->retry_after = NULL;
		return len;
	}
	if (!sbx_ws_header_value(p, len, "sec-websocket-protocol", &up->protocol))
		(void)sbx_ws_header_value(p, len, "retry-after", &up->retry_after);
	return len;
}

/* own: sbx's framing even where libcurl has WebSockets */
static int ws_connect(struct sbx_ws *ws, const struct sbx_ws_opts *o,
		      struct sbx_ws_refusal *refusal, bool own, struct sbx_err *err)
{
	struct sbx_curl_fns *cu = &sbx_curl;
	char *errbuf = ws->errbuf;
	struct curl_slist *hdrs = NULL;
	long long tmo = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 30000;
	long long deadline = sbx_now_ms() + tmo;
	_cleanup_(upgrade_release) struct upgrade u = { .head = STRBUF_INIT };

	memset(ws, 0, sizeof(*ws));
	ws->fd = -1;
	ws->what = xstrdup(o->what);
	if (refusal)
		memset(refusal, 0, sizeof(*refusal));
	if (ws_load(err) < 0)
		return -1;
	ws->h = cu->easy_init();
	if (!ws->h)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start a libcurl transfer");
	ws->curl_ws = wsf.ws_send != NULL && !own;
	_cleanup_free_ char *url = NULL;
	if (ws->curl_ws)
		url = startswith(o->url, "https://")	? xasprintf("wss://%s", o->url + 8)
			: startswith(o->url, "http://") ? xasprintf("ws://%s", o->url + 7)
							: xstrdup(o->url);
	(void)cu->easy_setopt(ws->h, CURLOPT_URL, url ? url : o->url);
	(void)cu->easy_setopt(ws->h, CURLOPT_CONNECT_ONLY, ws->curl_ws ? 2L : 1L);
	(void)cu->easy_setopt(ws->h, CURLOPT_ERRORBUFFER, errbuf);
	(void)cu->easy_setopt(ws->h, CURLOPT_NOSIGNAL, 1L);
	(void)cu->easy_setopt(ws->h, CURLOPT_USERAGENT, "sbx/" SBX_VERSION);
	(void)cu->easy_setopt(ws->h, CURLOPT_CONNECTTIMEOUT_MS, (long)tmo);
	(void)cu->easy_setopt(ws->h, CURLOPT_TCP_NODELAY, 1L);
	if (!ws->curl_ws && sbx_curl_protocols(ws->h, sbx_url_is_loopback(o->url)) < 0)
		return sbx_err_set(err, SBX_E_SYSTEM, "libcurl refuses to limit its protocols");
	if (ws->curl_ws && !startswith(o->url, "https://") && !sbx_url_is_loopback(o->url))
		return transport_fail(o, CURLE_UNSUPPORTED_PROTOCOL, "", err);
	if (sbx_debug_enabled) {
		/* libcurl's own upgrade request shows the URL: as debug_url says */
		(void)cu->easy_setopt(ws->h, CURLOPT_DEBUGFUNCTION, ws_curl_debug);
		(void)cu->easy_setopt(ws->h, CURLOPT_DEBUGDATA,
				      (void *)url_target(o->debug_url ? o->debug_url : o->url));
		(void)cu->easy_setopt(ws->h, CURLOPT_VERBOSE, 1L);
	}
	if (ws->curl_ws) {
		for (const char *const *p = o->headers; p && *p; p++)
			hdrs = cu->slist_append(hdrs, *p);
		_cleanup_free_ char *pl = o->protocols
			? xasprintf("Sec-WebSocket-Protocol: %s", o->protocols)
			: NULL;
		if (pl)
			hdrs = cu->slist_append(hdrs, pl);
		(void)cu->easy_setopt(ws->h, CURLOPT_HTTPHEADER, hdrs);
		(void)cu->easy_setopt(ws->h, CURLOPT_HEADERFUNCTION, on_curl_ws_header);
		(void)cu->easy_setopt(ws->h, CURLOPT_HEADERDATA, &u);
	}
	if (o->setup)
		o->setup(ws->h, o->setup_arg);
	if (ws->curl_ws && sbx_debug_enabled)
		sbx_debug("> GET %s (WebSocket upgrade by libcurl, %s)",
			  url_target(o->debug_url ? o->debug_url : o->url),
			  o->protocols ? o->protocols : "no subprotocol");
	CURLcode c = cu->easy_perform(ws->h);
	if (ws->curl_ws) {
		(void)cu->easy_setopt(ws->h, CURLOPT_HTTPHEADER, NULL);
		cu->slist_free_all(hdrs);
		long code = 0;
		(void)cu->easy_getinfo(ws->h, CURLINFO_RESPONSE_CODE, &code);
		if (code && code != 101) {
			/* libcurl read the refusal's head and not its body (the cluster's
			 * Status): asked again with sbx's framing, which reads it all, the
			 * refusal is reported as on a libcurl without WebSockets (or, answered
			 * 101 this time, the connection is used) */
			sbx_debug("%s refused libcurl's WebSocket upgrade (HTTP %ld%s%s); asking "
				  "again with sbx's framing for the whole answer",
				  o->what, code, u.retry_after ? ", Retry-After " : "",
				  u.retry_after ? u.retry_after : "");
			sbx_ws_close(ws);
			return ws_connect(ws, o, refusal, true, err);
		}
	}
	if (c != CURLE_OK)
		return transport_fail(o, c, errbuf, err);
	errbuf[0] = 0; /* it stays set: the words of a later send's or receive's failure */
	curl_socket_t sock = CURL_SOCKET_BAD;
	if (cu->easy_getinfo(ws->h, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
	    sock == CURL_SOCKET_BAD)
		return sbx_err_set(err, SBX_E_SYSTEM, "libcurl gives no socket for the WebSocket");
	ws->fd = (int)sock;
	if (ws->curl_ws) {
		ws->protocol = TAKE_PTR(u.protocol);
		return 0;
	}

	/* the upgrade request, by hand */
	uint8_t nonce[16];
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		return sbx_err_errno(err, "cannot make a WebSocket key");
	_cleanup_free_ char *key = sbx_base64_encode(nonce, sizeof(nonce));
	_cleanup_free_ char *host = sbx_url_host(o->url);
	struct strbuf req = STRBUF_INIT;
	strbuf_addf(&req,
		    "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sbx/" SBX_VERSION
		    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		    "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
		    url_target(o->url), host, key);
	if (o->protocols)
		strbuf_addf(&req, "Sec-WebSocket-Protocol: %s\r\n", o->protocols);
	for (const char *const *p = o->headers; p && *p; p++)
		strbuf_addf(&req, "%s\r\n", *p);
	strbuf_addstr(&req, "\r\n");
	if (sbx_debug_enabled)
		sbx_debug("> GET %s (WebSocket upgrade, %s)",
			  url_target(o->debug_url ? o->debug_url : o->url),
			  o->protocols ? o->protocols : "no subprotocol");
	int r = raw_send_all(ws, req.buf, req.len, deadline, err);
	explicit_bzero(req.buf, req.len);
	strbuf_release(&req);
	if (r < 0 && err->kind == SBX_E_NETWORK) {
		/* the server may have said why before it hung up: a TLS alert, read next */
		char buf[256];
		size_t got = 0;
		long long soon = sbx_now_ms() + 1000;
		CURLcode c2;
		while ((c2 = wsf.recv(ws->h, buf, sizeof(buf), &got)) == CURLE_AGAIN &&
		       wait_fd(ws->fd, POLLIN, soon) && sbx_now_ms() < soon)
			;
		return tls_ended(ws, o, c2 != CURLE_OK && c2 != CURLE_AGAIN ? c2 : CURLE_SEND_ERROR,
				 err);
	}
	if (r < 0)
		return -1;
	/* the answer's head; what follows it is the first frames (or an error body) */
	strbuf_add(&u.head, ws->rd.in.buf ? ws->rd.in.buf : "", ws->rd.in.len);
	strbuf_reset(&ws->rd.in);
	char *end;
	while (!(end = u.head.buf ? strstr(u.head.buf, "\r\n\r\n") : NULL)) {
		if (u.head.len > HEAD_MAX)
			return sbx_err_set(err, SBX_E_REMOTE, "%s sent an oversized answer head",
					   o->what);
		char buf[4096];
		size_t got = 0;
		c = wsf.recv(ws->h, buf, sizeof(buf) - 1, &got);
		if (c == CURLE_OK && got == 0)
			return sbx_err_set(err, SBX_E_NETWORK,
					   "%s closed the connection instead of answering the "
					   "WebSocket upgrade",
					   o->what);
		if (c == CURLE_OK) {
			buf[got] = 0;
			if (memchr(buf, 0, got))
				return sbx_err_set(err, SBX_E_REMOTE,
						   "%s sent a malformed answer head", o->what);
			strbuf_add(&u.head, buf, got);
			continue;
		}
		if (c != CURLE_AGAIN)
			return tls_ended(ws, o, c, err);
		if (!wait_fd(ws->fd, POLLIN, deadline))
			return sbx_err_set(err, SBX_E_NETWORK,
					   "%s did not answer the WebSocket upgrade in time",
					   o->what);
	}
	size_t head_len = (size_t)(end + 4 - u.head.buf);
	strbuf_add(&ws->rd.in, u.head.buf + head_len, u.head.len - head_len);
	u.head.len = head_len;
	u.head.buf[head_len] = 0;
	if (parse_head(&u, o->what, err) < 0)
		return -1;
	if (u.status != 101) {
		if (refusal) {
			refusal->status = u.status;
			refusal->retry_after = TAKE_PTR(u.retry_after);
			strbuf_add(&refusal->body, ws->rd.in.buf ? ws->rd.in.buf : "",
				   ws->rd.in.len);
			/* the rest of a short body, for the message */
			long long want = u.content_length >= 0 &&
					u.content_length < REFUSAL_BODY_MAX
				? u.content_length
				: 0;
			long long soon = sbx_now_ms() + 2000;
			while ((long long)refusal->body.len < want) {
				char buf[4096];
				size_t got = 0;
				c = wsf.recv(ws->h, buf, sizeof(buf), &got);
				if (c == CURLE_OK && got)
					strbuf_add(&refusal->body, buf, got);
				else if (c != CURLE_AGAIN || !wait_fd(ws->fd, POLLIN, soon))
					break;
			}
		}
		return sbx_err_set(err, SBX_E_REMOTE, "%s refused the WebSocket upgrade (HTTP %ld)",
				   o->what, u.status);
	}
	_cleanup_free_ char *want = sbx_ws_accept_for(key);
	if (!u.upgrade_ok || !u.connection_ok || !u.accept || !streq(u.accept, want))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "%s answered the WebSocket upgrade without a valid "
				   "Sec-WebSocket-Accept",
				   o->what);
	if (u.protocol && (!o->protocols || !token_in(o->protocols, u.protocol)))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "%s chose a WebSocket subprotocol that was not offered",
				   o->what);
	ws->protocol = TAKE_PTR(u.protocol);
	return 0;
}

int sbx_ws_connect(struct sbx_ws *ws, const struct sbx_ws_opts *o, struct sbx_ws_refusal *refusal,
		   struct sbx_err *err)
{
	return ws_connect(ws, o, refusal, false, err);
}

void sbx_ws_refusal_release(struct sbx_ws_refusal *r)
{
	strbuf_release(&r->body);
	free(r->retry_after);
	r->retry_after = NULL;
}

int sbx_ws_fd(const struct sbx_ws *ws)
{
	return ws->fd;
}

static int curl_ws_send_all(struct sbx_ws *ws, int opcode, const char *p, size_t n,
			    struct sbx_err *err)
{
	unsigned flags = opcode == SBX_WS_TEXT ? CURLWS_TEXT
		: opcode == SBX_WS_CLOSE       ? CURLWS_CLOSE
		: opcode == SBX_WS_PING	       ? CURLWS_PING
		: opcode == SBX_WS_PONG	       ? CURLWS_PONG
					       : CURLWS_BINARY;
	size_t off = 0;
	long long moved = sbx_now_ms();
	do {
		size_t sent = 0;
		CURLcode c = wsf.ws_send(ws->h, p + off, n - off, &sent, 0, flags);
		if (c == CURLE_AGAIN) {
			if (sbx_now_ms() - moved > SEND_STALL_MS)
				return sbx_err_set(err, SBX_E_NETWORK,
						   "%s did not take the data in time", ws->what);
			struct pollfd pf = { .fd = ws->fd, .events = POLLOUT };
			(void)poll(&pf, 1, 1000);
			continue;
		}
		if (c != CURLE_OK)
			return sbx_err_set(err, SBX_E_NETWORK, "cannot send to %s: %s", ws->what,
					   why(ws, c));
		off += sent;
		moved = sbx_now_ms();
	} while (off < n);
	return 0;
}

int sbx_ws_send(struct sbx_ws *ws, int opcode, const void *data, size_t n, struct sbx_err *err)
{
	if (ws->close_sent)
		return sbx_err_set(err, SBX_E_NETWORK, "the WebSocket to %s is closed", ws->what);
	if (opcode == SBX_WS_CLOSE)
		ws->close_sent = true;
	if (ws->curl_ws)
		return curl_ws_send_all(ws, opcode, data, n, err);
	uint8_t mask[4];
	if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
		return sbx_err_errno(err, "cannot make a WebSocket mask");
	struct strbuf f = STRBUF_INIT;
	sbx_ws_build_frame(&f, opcode, true, data, n, mask);
	int r = raw_send_all(ws, f.buf, f.len, 0, err);
	strbuf_release(&f);
	return r;
}

static int curl_ws_next(struct sbx_ws *ws, int *ret_op, const uint8_t **ret_data, size_t *ret_len,
			struct sbx_err *err)
{
	struct sbx_ws_reader *r = &ws->rd;

	if (r->msg_op < 0) {
		strbuf_reset(&r->msg);
		r->msg_op = 0;
	}
	for (;;) {
		char buf[65536];
		size_t got = 0;
		const struct curl_ws_frame *m = NULL;
		CURLcode c = wsf.ws_recv(ws->h, buf, sizeof(buf), &got, &m);
		if (c == CURLE_AGAIN)
			return 0;
		if (c == CURLE_GOT_NOTHING || c == CURLE_RECV_ERROR || (c == CURLE_OK && !m)) {
			ws_fail_closed(ws, err);
			return -1;
		}
		if (c != CURLE_OK)
			return sbx_err_set(err, SBX_E_NETWORK, "cannot read from %s: %s", ws->what,
					   why(ws, c));
		int op = m->flags & CURLWS_CLOSE ? SBX_WS_CLOSE
			: m->flags & CURLWS_PING ? SBX_WS_PING
			: m->flags & CURLWS_TEXT ? SBX_WS_TEXT
						 : SBX_WS_BINARY;
		if (op == SBX_WS_PING)
			continue; /* libcurl answers */
		if (r->msg.len + got > SBX_WS_MSG_MAX)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "a WebSocket message is larger than %d MiB",
					   SBX_WS_MSG_MAX >> 20);
		strbuf_add(&r->msg, buf, got);
		if (m->bytesleft > 0 || (m->flags & CURLWS_CONT))
			continue;
		*ret_op = op;
		*ret_data = (const uint8_t *)(r->msg.buf ? r->msg.buf : "");
		*ret_len = r->msg.len;
		r->msg_op = -1;
		return 1;
	}
}

int sbx_ws_recv(struct sbx_ws *ws, int *ret_op, const uint8_t **ret_data, size_t *ret_len,
		struct sbx_err *err)
{
	for (;;) {
		int op = 0, r;
		const uint8_t *d = NULL;
		size_t n = 0;

		if (ws->curl_ws)
			r = curl_ws_next(ws, &op, &d, &n, err);
		else
			r = sbx_ws_reader_next(&ws->rd, &op, &d, &n, err);
		if (r < 0)
			return -1;
		if (r == 1) {
			if (op == SBX_WS_PING) {
				uint8_t copy[125];
				memcpy(copy, d, n);
				if (!ws->close_sent &&
				    sbx_ws_send(ws, SBX_WS_PONG, copy, n, err) < 0)
					return -1;
				continue;
			}
			if (op == SBX_WS_PONG)
				continue;
			if (op == SBX_WS_CLOSE) {
				ws->close_got = true;
				ws->close_code = n >= 2 ? d[0] << 8 | d[1] : 0;
				if (!ws->close_sent) {
					uint8_t code[2] = { 0x03, 0xe8 };
					struct sbx_err e2 = { 0 };
					(void)sbx_ws_send(ws, SBX_WS_CLOSE, code, 2, &e2);
				}
			}
			*ret_op = op;
			*ret_data = d;
			*ret_len = n;
			return 1;
		}
		if (ws->curl_ws)
			return 0;
		if (ws->close_got) {
			ws_fail_closed(ws, err);
			return -1;
		}
		/* more bytes: drain libcurl (TLS buffers) until it would block */
		char buf[65536];
		size_t got = 0;
		CURLcode c = wsf.recv(ws->h, buf, sizeof(buf), &got);
		if (c == CURLE_AGAIN)
			return 0;
		if (c == CURLE_OK && got == 0) {
			ws_fail_closed(ws, err);
			return -1;
		}
		if (c != CURLE_OK)
			return sbx_err_set(err, SBX_E_NETWORK, "cannot read from %s: %s", ws->what,
					   why(ws, c));
		strbuf_add(&ws->rd.in, buf, got);
	}
}

void sbx_ws_close(struct sbx_ws *ws)
{
	if (ws->h && ws->fd >= 0 && !ws->close_sent) {
		uint8_t code[2] = { 0x03, 0xe8 };
		struct sbx_err e = { 0 };
		(void)sbx_ws_send(ws, SBX_WS_CLOSE, code, 2, &e);
	}
	if (ws->h)
		sbx_curl.easy_cleanup(ws->h);
	ws->h = NULL;
	ws->fd = -1;
	sbx_ws_reader_release(&ws->rd);
	free(ws->protocol);
	free(ws->what);
	ws->protocol = ws->what = NULL;
}
