/* The network service's parsers, pure functions over bytes: an HTTP proxy request's head,
 * the SOCKS5 handshake, a preview's token, the classes of addresses the proxy never dials,
 * and the escaping of names for the egress log, a DNS answer's addresses. No sockets and no state (tests/fuzz/). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <resolv.h>
#include <strings.h>

#include "core/util.h"

/* --- HTTP ---------------------------------------------------------------------------------- */

size_t local_http_head_len(const char *buf, size_t len, size_t from)
{
	from = from > 3 ? from - 3 : 0;
	if (from >= len)
		return 0;
	const char *e = memmem(buf + from, len - from, "\r\n\r\n", 4);
	return e ? (size_t)(e - buf) + 4 : 0;
}

static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c && strchr("!#$%&'*+-.^_`|~", c));
}

/* the next line of buf[*off..hl): its start and length (without CRLF); false at the end */
static bool next_line(const char *buf, size_t hl, size_t *off, const char **line, size_t *len)
{
	if (*off >= hl)
		return false;
	const char *e = memmem(buf + *off, hl - *off, "\r\n", 2);
	if (!e)
		return false;
	*line = buf + *off;
	*len = (size_t)(e - *line);
	*off += *len + 2;
	return true;
}

static int port_of(const char *s, size_t n)
{
	int v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535 ? v : -1;
}

bool local_split_hostport(const char *s, size_t n, char *host, size_t hlen, int *port, int def)
{
	const char *colon = NULL;
	size_t l;

	if (n == 0)
		return false;
	if (s[0] == '[') {
		const char *e = memchr(s, ']', n);
		if (!e)
			return false;
		l = (size_t)(e - s - 1);
		if (l == 0 || l >= hlen)
			return false;
		memcpy(host, s + 1, l);
		if ((size_t)(e + 1 - s) < n) {
			if (e[1] != ':')
				return false;
			colon = e + 1;
		}
	} else {
		colon = memrchr(s, ':', n);
		l = colon ? (size_t)(colon - s) : n;
		if (l == 0 || l >= hlen)
			return false;
		memcpy(host, s, l);
	}
	host[l] = 0;
	for (size_t i = 0; i < l; i++) {
		unsigned char c = (unsigned char)host[i];
		if (c <= 0x20 || c == 0x7f)
			return false;
		if (c >= 'A' && c <= 'Z')
			host[i] = (char)(c - 'A' + 'a');
	}
	*port = def;
	if (colon && (*port = port_of(colon + 1, (size_t)(s + n - colon - 1))) < 0)
		return false;
	return true;
}

bool local_host_dialable(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];
	size_t n = strlen(host), lab = 0;

	if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1)
		return true;
	if (n == 0 || n > 253 || host[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)host[i];
		if (c == '.') {
			if (lab == 0)
				return false;
			lab = 0;
		} else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '_') ||
			   ++lab > 63) {
			return false;
		}
	}
	return true;
}

/* the request line and the header lines of buf[0..hl): 0, or -1 when they are not HTTP/1.x */
static int parse_head(const char *buf, size_t hl, struct local_http_req *r)
{
	const char *line, *sp1, *sp2;
	size_t len, off = 0;

	memset(r, 0, sizeof(*r));
	if (!next_line(buf, hl, &off, &line, &len) || !(sp1 = memchr(line, ' ', len)))
		return -1;
	size_t ml = (size_t)(sp1 - line);
	if (ml == 0 || ml >= sizeof(r->method))
		return -1;
	for (size_t i = 0; i < ml; i++)
		if (!tchar((unsigned char)line[i]))
			return -1;
	memcpy(r->method, line, ml);
	const char *t = sp1 + 1;
	if (!(sp2 = memchr(t, ' ', len - ml - 1)))
		return -1;
	size_t tl = (size_t)(sp2 - t), vl = len - ml - 1 - tl - 1;
	if (tl == 0 || tl > 8192 || vl != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return -1;
	for (size_t i = 0; i < tl; i++)
		if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
			return -1;
	memcpy(r->version, sp2 + 1, 8);
	r->target_off = (size_t)(t - buf);
	r->target_len = tl;
	/* every header line is NAME: VALUE, with no bare CR, LF or NUL anywhere */
	for (;;) {
		if (!next_line(buf, hl, &off, &line, &len))
			return -1;
		if (len == 0)
			break;
		const char *colon = memchr(line, ':', len);
		if (!colon || colon == line || memchr(line, '\n', len) || memchr(line, '\r', len) ||
		    memchr(line, 0, len))
			return -1;
		for (const char *p = line; p < colon; p++)
			if (!tchar((unsigned char)*p))
				return -1;
	}
	return off == hl ? 0 : -1;
}

int local_http_head_parse(const char *buf, size_t hl, struct local_http_req *r)
{
	return parse_head(buf, hl, r);
}

int local_http_parse(const char *buf, size_t hl, struct local_http_req *r, const char **ret_why)
{
	*ret_why = "sbx: not an HTTP proxy request\n";
	if (parse_head(buf, hl, r) < 0)
		return -1;
	const char *t = buf + r->target_off;
	size_t tl = r->target_len;
	r->connect = streq(r->method, "CONNECT");
	if (r->connect) {
		if (!local_split_hostport(t, tl, r->host, sizeof(r->host), &r->port, 443)) {
			*ret_why = "sbx: CONNECT needs HOST:PORT\n";
			return -1;
		}
		r->host_len = strlen(r->host);
		return 0;
	}
	if (tl < 7 || strncasecmp(t, "http://", 7) != 0) {
		*ret_why = tl >= 8 && strncasecmp(t, "https://", 8) == 0
			? "sbx: use CONNECT for https through this proxy\n"
			: "sbx: this is the sandbox's egress proxy: send absolute http:// URLs, "
			  "or CONNECT\n";
		return -1;
	}
	const char *a = t + 7, *end = t + tl, *e = a;
	while (e < end && *e != '/' && *e != '?' && *e != '#')
		e++;
	const char *at = memrchr(a, '@', (size_t)(e - a)); /* userinfo in the URL is not ours */
	if (at)
		a = at + 1;
	if (!local_split_hostport(a, (size_t)(e - a), r->host, sizeof(r->host), &r->port, 80)) {
		*ret_why = "sbx: bad host in the URL\n";
		return -1;
	}
	r->host_len = strlen(r->host);
	const char *frag = memchr(e, '#', (size_t)(end - e));
	r->path_off = (size_t)(e - buf);
	r->path_len = (size_t)((frag ? frag : end) - e);
	r->path_slash = r->path_len == 0 || *e != '/';
	return 0;
}

static const char *header_next(const char *buf, size_t hl, const char *name, size_t *off,
			       size_t *ret_len);

const char *local_http_header(const char *buf, size_t hl, const char *name, size_t *ret_len)
{
	size_t off = 0;

	return header_next(buf, hl, name, &off, ret_len);
}

int local_http_basic(const char *buf, size_t hl, char *user, size_t ulen, char *pass, size_t plen)
{
	size_t vl, n;
	const char *v = local_http_header(buf, hl, "Proxy-Authorization", &vl);
	char b64[1025];

	if (!v || vl < 6 || strncasecmp(v, "Basic ", 6) != 0)
		return 0; /* another scheme is no credential of ours */
	v += 6;
	vl -= 6;
	while (vl && *v == ' ')
		v++, vl--;
	if (vl == 0 || vl >= sizeof(b64))
		return -1;
	memcpy(b64, v, vl);
	b64[vl] = 0;
	_cleanup_free_ char *dec = sbx_base64_decode(b64, &n);
	if (!dec || memchr(dec, 0, n))
		return -1;
	const char *colon = memchr(dec, ':', n);
	size_t ul = colon ? (size_t)(colon - dec) : n, pl = colon ? n - ul - 1 : 0;
	if (ul >= ulen || pl >= plen)
		return -1;
	memcpy(user, dec, ul);
	user[ul] = 0;
	memcpy(pass, colon ? colon + 1 : "", pl);
	pass[pl] = 0;
	return 1;
}

/* the header lines of buf[off..hl) into out at o, but the hop-by-hop ones (Connection,
 * Keep-Alive, and those starting with drop, any case), then "Connection: close" when close and
 * the head's end; the length of out (out holds at least hl - off + 24 bytes past o) */
static size_t hop_headers_out(const char *buf, size_t hl, size_t off, const char *drop, bool close,
			      char *out, size_t o)
{
	static const char tail[] = "Connection: close\r\n\r\n";
	const char *line, *t = close ? tail : tail + 19;
	size_t len, dl = strlen(drop);

	while (next_line(buf, hl, &off, &line, &len) && len) {
		if ((len >= dl && strncasecmp(line, drop, dl) == 0) ||
		    (len >= 11 && strncasecmp(line, "Connection:", 11) == 0) ||
		    (len >= 11 && strncasecmp(line, "Keep-Alive:", 11) == 0))
			continue;
		memcpy(out + o, line, len);
		o += len;
		out[o++] = '\r';
		out[o++] = '\n';
	}
	memcpy(out + o, t, strlen(t) + 1);
	return o + strlen(t);
}

char *local_http_origin_head(const char *buf, size_t hl, const struct local_http_req *r, bool close,
			     size_t *ret_len)
{
	size_t cap = hl + 64, o = 0, off = 0, len;
	char *out = xmalloc(cap);
	const char *line;

	o += (size_t)snprintf(out, cap, "%s %s%.*s %s\r\n", r->method, r->path_slash ? "/" : "",
			      (int)r->path_len, buf + r->path_off, r->version);
	(void)next_line(buf, hl, &off, &line, &len); /* the request line: replaced */
	*ret_len = hop_headers_out(buf, hl, off, "Proxy-", close, out, o);
	return out;
}

/* every header line called name (any case), its value trimmed, in turn: *off starts at 0
 * (the request or status line is skipped); NULL after the last */
static const char *header_next(const char *buf, size_t hl, const char *name, size_t *off,
			       size_t *ret_len)
{
	size_t nl = strlen(name), len;
	const char *line;

	if (*off == 0 && !next_line(buf, hl, off, &line, &len))
		return NULL;
	while (next_line(buf, hl, off, &line, &len) && len) {
		if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
			continue;
		const char *v = line + nl + 1, *e = line + len;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*ret_len = (size_t)(e - v);
		return v;
	}
	return NULL;
}

/* whether the comma-separated list v[0..n) holds token (any case) as an element (last: as its
 * last element) */
static bool list_has(const char *v, size_t n, const char *token, bool last)
{
	size_t tl = strlen(token);
	bool found = false;

	while (n) {
		const char *c = memchr(v, ',', n);
		size_t el = c ? (size_t)(c - v) : n, a = 0, b = el;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		bool is = b - a == tl && strncasecmp(v + a, token, tl) == 0;
		if (b > a)
			found = last ? is : found || is;
		if (!c)
			break;
		v = c + 1;
		n -= el + 1;
	}
	return found;
}

bool local_http_conn_has(const char *buf, size_t hl, const char *token)
{
	size_t off = 0, vl;
	const char *v;

	while ((v = header_next(buf, hl, "Connection", &off, &vl)))
		if (list_has(v, vl, token, false))
			return true;
	return false;
}

/* a body's framing from its head's Transfer-Encoding and Content-Length: 0, or -1 when they
 * are ambiguous (both, two lengths that differ, a length that is no number) */
static int body_of(const char *buf, size_t hl, bool request, struct local_body *b)
{
	size_t off = 0, vl;
	const char *v;
	bool te = false, chunked = false, cl = false;
	unsigned long long len = 0;

	memset(b, 0, sizeof(*b));
	while ((v = header_next(buf, hl, "Transfer-Encoding", &off, &vl))) {
		te = true;
		chunked = list_has(v, vl, "chunked", true);
	}
	off = 0;
	while ((v = header_next(buf, hl, "Content-Length", &off, &vl))) {
		unsigned long long x = 0;
		if (vl == 0 || vl > 18)
			return -1;
		for (size_t i = 0; i < vl; i++) {
			if (v[i] < '0' || v[i] > '9')
				return -1;
			x = x * 10 + (unsigned)(v[i] - '0');
		}
		if (cl && x != len)
			return -1;
		cl = true;
		len = x;
	}
	if (te && (cl || (request && !chunked)))
		return -1;
	b->kind = chunked ? LOCAL_BODY_CHUNKED
		: te	  ? LOCAL_BODY_CLOSE
		: cl	  ? LOCAL_BODY_LENGTH
		: request ? LOCAL_BODY_NONE
			  : LOCAL_BODY_CLOSE;
	b->left = len;
	b->done = b->kind == LOCAL_BODY_NONE || (b->kind == LOCAL_BODY_LENGTH && len == 0);
	return 0;
}

int local_http_req_body(const char *buf, size_t hl, struct local_body *b)
{
	return body_of(buf, hl, true, b);
}

int local_http_resp_parse(const char *buf, size_t hl, bool head, struct local_http_resp *r)
{
	const char *line;
	size_t len, off = 0;

	memset(r, 0, sizeof(*r));
	if (!next_line(buf, hl, &off, &line, &len) || len < 12 || memcmp(line, "HTTP/1.", 7) != 0 ||
	    (line[7] != '0' && line[7] != '1') || line[8] != ' ')
		return -1;
	for (int i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		r->status = r->status * 10 + (line[i] - '0');
	}
	if (r->status < 100 || (len > 12 && line[12] != ' '))
		return -1;
	for (;;) { /* no bare CR, LF or NUL in a header line */
		if (!next_line(buf, hl, &off, &line, &len))
			return -1;
		if (len == 0)
			break;
		if (!memchr(line, ':', len) || memchr(line, '\n', len) || memchr(line, 0, len) ||
		    memchr(line, '\r', len))
			return -1;
	}
	if (off != hl)
		return -1;
	r->v10 = buf[7] == '0';
	r->close = local_http_conn_has(buf, hl, "close") ||
		(r->v10 && !local_http_conn_has(buf, hl, "keep-alive"));
	if (body_of(buf, hl, false, &r->body) < 0)
		return -1;
	if (head || r->status < 200 || r->status == 204 || r->status == 304) {
		r->body.kind = LOCAL_BODY_NONE;
		r->body.done = true;
	}
	return 0;
}

char *local_http_resp_head(const char *buf, size_t hl, bool close, size_t *ret_len)
{
	char *out = xmalloc(hl + 32);

	*ret_len = hop_headers_out(buf, hl, 0, "Proxy-Connection:", close, out, 0);
	return out;
}

/* the chunked coding's states */
enum {
	CK_SIZE,      /* hex digits of a chunk's size */
	CK_EXT,	      /* after them: an extension, to the LF */
	CK_DATA,      /* left bytes of data */
	CK_DATA_END,  /* the CRLF after the data */
	CK_TRAILER,   /* the start of a trailer line, or the CRLF that ends it all */
	CK_TRAILER_IN /* within a trailer line */
};

long long local_body_scan(struct local_body *b, const char *buf, size_t len)
{
	size_t i = 0;

	if (b->done || b->kind == LOCAL_BODY_NONE) {
		b->done = true;
		return 0;
	}
	if (b->kind == LOCAL_BODY_CLOSE)
		return (long long)len;
	if (b->kind == LOCAL_BODY_LENGTH) {
		size_t k = b->left < len ? (size_t)b->left : len;
		b->left -= k;
		b->done = b->left == 0;
		return (long long)k;
	}
	while (i < len && !b->done) {
		unsigned char ch = (unsigned char)buf[i];
		switch (b->cs) {
		case CK_SIZE: {
			int d = ch >= '0' && ch <= '9'	 ? ch - '0'
				: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
				: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
							 : -1;
			if (d >= 0) {
				if (b->left >> 56)
					return -1; /* over 2^60 */
				b->left = b->left * 16 + (unsigned)d;
				b->digits = true;
				i++;
				break;
			}
			if (!b->digits)
				return -1;
			b->cs = CK_EXT;
			break;
		}
		case CK_EXT:
			i++;
			if (ch == '\n')
				b->cs = b->left ? CK_DATA : CK_TRAILER;
			break;
		case CK_DATA: {
			size_t k = b->left < len - i ? (size_t)b->left : len - i;
			i += k;
			b->left -= k;
			if (b->left == 0)
				b->cs = CK_DATA_END;
			break;
		}
		case CK_DATA_END:
			i++;
			if (ch == '\n') {
				b->cs = CK_SIZE;
				b->digits = false;
			} else if (ch != '\r') {
				return -1;
			}
			break;
		case CK_TRAILER:
			i++;
			if (ch == '\n')
				b->done = true;
			else if (ch != '\r')
				b->cs = CK_TRAILER_IN;
			break;
		default: /* CK_TRAILER_IN */
			i++;
			if (ch == '\n')
				b->cs = CK_TRAILER;
			break;
		}
	}
	return (long long)i;
}

/* --- SOCKS5 -------------------------------------------------------------------------------- */

int local_socks_parse(const unsigned char *b, size_t n, struct local_socks *s)
{
	size_t off;

	memset(s, 0, sizeof(*s));
	if (n >= 1 && b[0] != 5)
		return LOCAL_SOCKS_BAD;
	if (n < 2 || n < 2 + (size_t)b[1])
		return LOCAL_SOCKS_NONE;
	if (b[1] == 0)
		return LOCAL_SOCKS_BAD;
	s->greeting_len = off = 2 + (size_t)b[1];
	/* a credential names the exec: user/pass whenever the client offers it */
	s->method = memchr(b + 2, 2, b[1]) ? 2 : memchr(b + 2, 0, b[1]) ? 0 : 0xff;
	if (s->method == 0xff)
		return LOCAL_SOCKS_GREETING;
	if (s->method == 2) {
		if (n - off < 2)
			return LOCAL_SOCKS_GREETING;
		if (b[off] != 1)
			return LOCAL_SOCKS_BAD;
		size_t ul = b[off + 1];
		if (n - off < 2 + ul + 1)
			return LOCAL_SOCKS_GREETING;
		size_t pl = b[off + 2 + ul];
		if (n - off < 3 + ul + pl)
			return LOCAL_SOCKS_GREETING;
		memcpy(s->user, b + off + 2, ul);
		memcpy(s->pass, b + off + 3 + ul, pl);
		s->auth_nul = memchr(s->user, 0, ul) || memchr(s->pass, 0, pl);
		s->auth_len = 3 + ul + pl;
		off += s->auth_len;
	}
	int done = s->method == 2 ? LOCAL_SOCKS_AUTH : LOCAL_SOCKS_GREETING;
	if (n - off < 5)
		return done;
	if (b[off] != 5)
		return LOCAL_SOCKS_BAD;
	s->cmd = b[off + 1];
	s->atyp = b[off + 3];
	size_t alen = s->atyp == 1 ? 4
		: s->atyp == 4	   ? 16
		: s->atyp == 3	   ? 1 + (size_t)b[off + 4]
				   : 0;
	if (alen == 0)
		return LOCAL_SOCKS_BAD_ATYP;
	if (s->atyp == 3 && alen == 1)
		return LOCAL_SOCKS_BAD;
	if (n - off < 4 + alen + 2)
		return done;
	const unsigned char *a = b + off + 4;
	if (s->atyp == 1)
		inet_ntop(AF_INET, a, s->host, sizeof(s->host));
	else if (s->atyp == 4)
		inet_ntop(AF_INET6, a, s->host, sizeof(s->host));
	if (s->atyp == 3) {
		s->host_len = alen - 1;
		memcpy(s->host, a + 1, s->host_len);
		for (size_t i = 0; i < s->host_len; i++)
			if (s->host[i] >= 'A' && s->host[i] <= 'Z')
				s->host[i] = (char)(s->host[i] - 'A' + 'a');
	} else {
		s->host_len = strlen(s->host);
	}
	s->port = a[alen] << 8 | a[alen + 1];
	s->request_len = off + 4 + alen + 2;
	return LOCAL_SOCKS_REQUEST;
}

/* --- preview tokens ------------------------------------------------------------------------ */

bool local_ct_equal(const char *a, size_t an, const char *b)
{
	size_t bn = strlen(b);
	unsigned char d = an != bn;

	for (size_t i = 0; i < bn; i++)
		d |= (unsigned char)(b[i] ^ (i < an ? a[i] : 0));
	return d == 0;
}

static bool cookie_has(const char *v, size_t vl, const char *token)
{
	const char *end = v + vl;

	while (v < end) {
		const char *e = memchr(v, ';', (size_t)(end - v));
		if (!e)
			e = end;
		while (v < e && *v == ' ')
			v++;
		const char *eq = memchr(v, '=', (size_t)(e - v));
		/* sbx_preview_token, or sbx_preview_token_PORT (cookies do not tell ports apart) */
		if (eq && (size_t)(eq - v) >= 17 && strncmp(v, "sbx_preview_token", 17) == 0 &&
		    (eq - v == 17 || v[17] == '_') &&
		    local_ct_equal(eq + 1, (size_t)(e - eq - 1), token))
			return true;
		if (e == end)
			break;
		v = e + 1;
	}
	return false;
}

int local_preview_token(const char *buf, size_t hl, const char *token, char **ret_location)
{
	struct local_http_req r;
	const char *v, *line;
	size_t vl, off = 0, len;

	if (parse_head(buf, hl, &r) < 0)
		return LOCAL_TOKEN_BAD;
	if ((v = local_http_header(buf, hl, "X-Sbx-Preview-Token", &vl)) &&
	    local_ct_equal(v, vl, token))
		return LOCAL_TOKEN_OK;
	(void)next_line(buf, hl, &off, &line, &len);
	while (next_line(buf, hl, &off, &line, &len) && len)
		if (len > 7 && strncasecmp(line, "Cookie:", 7) == 0 &&
		    cookie_has(line + 7, len - 7, token))
			return LOCAL_TOKEN_OK;
	const char *t = buf + r.target_off, *end = t + r.target_len;
	const char *q = memchr(t, '?', r.target_len);
	for (const char *p = q; p && p < end;) {
		const char *k = p + 1, *e = memchr(k, '&', (size_t)(end - k));
		if (!e)
			e = end;
		if (e - k >= 10 && strncmp(k, "sbx_token=", 10) == 0 &&
		    local_ct_equal(k + 10, (size_t)(e - k - 10), token)) {
			/* the same target without the parameter: the token lives on in a cookie */
			size_t before = (size_t)(p - t), after = (size_t)(end - e);
			char *loc = xmalloc(r.target_len + 2);
			memcpy(loc, t, before);
			if (after) { /* "?a&sbx_token=T&b" or "?sbx_token=T&b": keep p's '?' or '&' */
				loc[before] = *p;
				memcpy(loc + before + 1, e + 1, after - 1);
				loc[before + after] = 0;
			} else {
				loc[before] = 0;
			}
			if (!*loc)
				loc[0] = '/', loc[1] = 0;
			*ret_location = loc;
			return LOCAL_TOKEN_REDIRECT;
		}
		p = e < end ? e : NULL;
	}
	return LOCAL_TOKEN_DENY;
}

/* --- addresses ----------------------------------------------------------------------------- */

static const char *class_v4(uint32_t a)
{
	if ((a >> 24) == 127)
		return "a loopback address";
	if (a == 0xa9fea9feu || a == 0xa83f8110u || a == 0x646464c8u) /* 169.254.169.254,
									* 168.63.129.16, 100.100.100.200 */
		return "a cloud metadata address";
	if ((a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a >> 22) == 0x191)
		return LOCAL_CLASS_PRIVATE; /* 10/8, 172.16/12, 192.168/16, 100.64/10 */
	if ((a >> 16) == 0xa9fe)
		return "a link-local address";
	if ((a >> 28) == 0xe)
		return "a multicast address";
	if ((a >> 24) == 0 || (a >> 28) == 0xf || (a >> 8) == 0xc00000 ||
	    (a >> 17) == (0xc612u >> 1))
		return "a reserved address"; /* 0/8, 240/4, 192.0.0/24, 198.18/15 */
	return NULL;
}

static const char *class_v6(const unsigned char *b)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b };
	static const unsigned char zero[16];

	uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];

	/* IPv4-mapped and NAT64 (64:ff9b::/96): the IPv4 address's class */
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0)
		return class_v4(v4);
	if (memcmp(b, zero, 12) == 0) { /* ::/96: ::, ::1, the old IPv4-compatible ::a.b.c.d */
		if (v4 == 0)
			return "an unspecified address";
		if (v4 == 1)
			return "a loopback address";
		return class_v4(v4) ?: "a reserved address";
	}
	if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4: 2002:a.b.c.d::/48 */
		const char *c = class_v4((uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 |
					 (uint32_t)b[4] << 8 | b[5]);
		if (c)
			return c;
	}
	if (b[0] == 0xfd && b[1] == 0x00 && b[2] == 0x0e && b[3] == 0xc2)
		return "a cloud metadata address";
	if ((b[0] & 0xfe) == 0xfc)
		return LOCAL_CLASS_PRIVATE;
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return "a link-local address";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return "a reserved address"; /* site-local, deprecated */
	if (b[0] == 0xff)
		return "a multicast address";
	return NULL;
}

const char *local_addr_class(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return class_v6(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
	if (sa->sa_family == AF_INET)
		return class_v4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return "not an internet address";
}

const char *local_net_forbidden(const struct sockaddr *sa)
{
	return local_addr_class(sa);
}

/* --- escaping ------------------------------------------------------------------------------ */

char *local_escape_name(const char *s, size_t n)
{
	char *o = xmalloc(4 * n + 1), *q = o;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c > 0x20 && c < 0x7f && c != '\\')
			*q++ = (char)c;
		else
			q += snprintf(q, 5, "\\x%02x", c);
	}
	*q = 0;
	return o;
}

/* the length of the valid UTF-8 sequence at s[0..n), 0 when there is none */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t l = c < 0x80		   ? 1
		: (c >= 0xc2 && c <= 0xdf) ? 2
		: (c >= 0xe0 && c <= 0xef) ? 3
		: (c >= 0xf0 && c <= 0xf4) ? 4
					   : 0;

	if (l == 0 || l > n)
		return 0;
	for (size_t i = 1; i < l; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
		return 0; /* overlong, a surrogate, past U+10FFFF */
	return l;
}

char *local_escape_utf8(const char *s, size_t n)
{
	char *o = xmalloc(4 * n + 1), *q = o;
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t l = p[i] ? utf8_len(p + i, n - i) : 0;
		if (l) {
			memcpy(q, p + i, l);
			q += l;
			i += l;
		} else {
			q += snprintf(q, 5, "\\x%02x", p[i]);
			i++;
		}
	}
	*q = 0;
	return o;
}

/* --- a DNS answer ------------------------------------------------------------------------- */

size_t local_dns_answer(const unsigned char *m, size_t len, int type, struct sockaddr_storage *addr,
			size_t *n, size_t max, unsigned *ttl)
{
	const unsigned char *end = m + len, *p = m + HFIXEDSZ;
	size_t added = 0;

	if (len < HFIXEDSZ)
		return 0;
	unsigned qd = (unsigned)m[4] << 8 | m[5], an = (unsigned)m[6] << 8 | m[7];
	for (unsigned i = 0; i < qd; i++) {
		int k = dn_skipname(p, end);
		if (k < 0 || end - p < k + QFIXEDSZ)
			return 0;
		p += k + QFIXEDSZ;
	}
	for (unsigned i = 0; i < an; i++) {
		int k = dn_skipname(p, end);
		if (k < 0 || end - p < k + RRFIXEDSZ)
			break;
		p += k;
		int t = p[0] << 8 | p[1];
		unsigned rttl = (unsigned)p[4] << 24 | (unsigned)p[5] << 16 | (unsigned)p[6] << 8 |
			p[7];
		int rdlen = p[8] << 8 | p[9];
		p += RRFIXEDSZ;
		if (end - p < rdlen)
			break;
		if (rttl < *ttl)
			*ttl = rttl; /* a CNAME's too: the chain holds only as long as its links */
		if (t == type && *n < max &&
		    ((t == ns_t_a && rdlen == 4) || (t == ns_t_aaaa && rdlen == 16))) {
			struct sockaddr_storage *a = &addr[(*n)++];
			memset(a, 0, sizeof(*a));
			if (t == ns_t_a) {
				struct sockaddr_in *a4 = (struct sockaddr_in *)a;
				a4->sin_family = AF_INET;
				memcpy(&a4->sin_addr, p, 4);
			} else {
				struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;
				a6->sin6_family = AF_INET6;
				memcpy(&a6->sin6_addr, p, 16);
			}
			added++;
		}
		p += rdlen;
	}
	return added;
}
