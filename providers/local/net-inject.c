/* The requests of a connection whose TLS the egress proxy ends because its host has secrets
 * (--secret): each head is parsed whole before anything is substituted (a placeholder split
 * across reads is found), hostile heads are refused with one line. Pure: no sockets, no state
 * (tests/fuzz/fuzz_inject.c). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <strings.h>

#include "core/net.h"
#include "core/strbuf.h"
#include "core/util.h"

static const char h2_preface[] = "PRI * HTTP/2.0\r\n";

bool local_secret_host(const struct local_secret *s, const char *host)
{
	for (char **h = s->hosts; h && *h; h++)
		if (streq(*h, host) || sbx_net_match(*h, host))
			return true;
	return false;
}

static int refuse(struct local_inject *x, int code, const char *status, const char *why)
{
	x->code = code;
	x->status = status;
	snprintf(x->why, sizeof(x->why), "%s", why);
	return LOCAL_INJECT_REFUSE;
}

/* the Host header names host (any case, a port aside) */
static bool host_matches(const char *buf, size_t hl, const char *host)
{
	size_t vl;
	const char *v = local_http_header(buf, hl, "Host", &vl);
	char h[LOCAL_HOST_MAX + 1];
	int port;

	if (!v)
		return true; /* HTTP/1.0 without one: the connection's host it is */
	return local_split_hostport(v, vl, h, sizeof(h), &port, 443) && streq(h, host);
}

/* Authorization: Basic credentials (user:password in base64, what git, pip and apt send for a
 * URL's or .netrc's password) are decoded: a placeholder in one is a placeholder there too. A
 * copy of the head (hl bytes) whose credentials holding one are written again with the values
 * in (*ret, *ret_len; NULL when none holds one); which secrets they held into *found */
static void basic_creds(const char *buf, size_t hl, const struct local_secret *s, size_t n,
			char **ret, size_t *ret_len, unsigned long long *found)
{
	struct strbuf out = STRBUF_INIT;
	size_t from = 0;

	*ret = NULL;
	*found = 0;
	for (size_t p = 0; p < hl;) {
		const char *eol = memchr(buf + p, '\n', hl - p);
		size_t end = eol ? (size_t)(eol - buf) + 1 : hl;
		static const char name[] = "authorization:";
		size_t v = p + sizeof(name) - 1;
		if (end - p > sizeof(name) && !strncasecmp(buf + p, name, sizeof(name) - 1)) {
			while (v < end && (buf[v] == ' ' || buf[v] == '\t'))
				v++;
			size_t ve = end;
			while (ve > v &&
			       (buf[ve - 1] == '\n' || buf[ve - 1] == '\r' || buf[ve - 1] == ' ' ||
				buf[ve - 1] == '\t'))
				ve--;
			if (ve - v > 6 && !strncasecmp(buf + v, "basic ", 6)) {
				size_t b = v + 6;
				while (b < ve && buf[b] == ' ')
					b++;
				_cleanup_free_ char *enc = xstrndup(buf + b, ve - b);
				size_t dl = 0;
				_cleanup_free_ char *dec = sbx_base64_decode(enc, &dl);
				unsigned long long here = 0;
				for (size_t i = 0; dec && i < n && i < 64; i++)
					if (memmem(dec, dl, s[i].placeholder,
						   strlen(s[i].placeholder)))
						here |= 1ull << i;
				if (here) {
					/* the credential again, each placeholder its value */
					struct strbuf d = STRBUF_INIT;
					for (size_t q = 0; q < dl;) {
						bool hit = false;
						for (size_t i = 0; i < n && i < 64 && !hit; i++) {
							size_t kl = strlen(s[i].placeholder);
							if ((here & (1ull << i)) && dl - q >= kl &&
							    !memcmp(dec + q, s[i].placeholder,
								    kl)) {
								strbuf_addstr(&d, s[i].value);
								q += kl;
								hit = true;
							}
						}
						if (!hit)
							strbuf_add(&d, dec + q++, 1);
					}
					_cleanup_free_ char *re = sbx_base64_encode(d.buf, d.len);
					explicit_bzero(d.buf, d.len);
					strbuf_release(&d);
					strbuf_add(&out, buf + from, b - from);
					strbuf_addstr(&out, re);
					from = ve;
					*found |= here;
				}
			}
		}
		p = end;
	}
	if (!*found) {
		strbuf_release(&out);
		return;
	}
	strbuf_add(&out, buf + from, hl - from);
	*ret_len = out.len;
	*ret = strbuf_detach(&out);
}

int local_inject_request(const char *buf, size_t len, const char *host,
			 const struct local_secret *s, size_t n, struct local_inject *x)
{
	struct local_http_req r;

	memset(x, 0, sizeof(*x));
	x->exfil = -1;
	size_t pl = len < sizeof(h2_preface) - 1 ? len : sizeof(h2_preface) - 1;
	if (pl >= 3 && memcmp(buf, h2_preface, pl) == 0) {
		if (pl < sizeof(h2_preface) - 1)
			return LOCAL_INJECT_MORE;
		return refuse(x, 505, "HTTP Version Not Supported",
			      "HTTP/2 is not spoken on a connection that carries secrets: use "
			      "HTTP/1.1 (the proxy offers only http/1.1)");
	}
	size_t hl = local_http_head_len(buf, len, 0);
	if (hl == 0 || hl > LOCAL_HEAD_MAX) {
		if (len < LOCAL_HEAD_MAX && hl == 0)
			return LOCAL_INJECT_MORE;
		return refuse(x, 431, "Request Header Fields Too Large",
			      "the request head is over 16 KiB");
	}
	if (local_http_head_parse(buf, hl, &r) < 0)
		return refuse(x, 400, "Bad Request", "not an HTTP/1.x request");
	const char *t = buf + r.target_off;
	if (streq(r.method, "CONNECT") || !(t[0] == '/' || (r.target_len == 1 && t[0] == '*')))
		return refuse(x, 400, "Bad Request",
			      "the request target must be a path (origin form) on this "
			      "connection");
	if (local_http_req_body(buf, hl, &x->body) < 0)
		return refuse(x, 400, "Bad Request",
			      "the body's framing is ambiguous (Content-Length with "
			      "Transfer-Encoding, or two lengths): refused as request smuggling");
	if (!host_matches(buf, hl, host))
		return refuse(x, 421, "Misdirected Request",
			      "the Host header names another host than this connection's");
	/* Basic credentials decoded: the placeholders in them, and the head with them put in */
	_cleanup_free_ char *basic = NULL;
	size_t basic_len = 0;
	unsigned long long in_basic = 0;
	basic_creds(buf, hl, s, n, &basic, &basic_len, &in_basic);
	/* every placeholder first: one that is not this host's refuses the request */
	for (size_t i = 0; i < n; i++) {
		if (!memmem(buf, hl, s[i].placeholder, strlen(s[i].placeholder)) &&
		    !(i < 64 && (in_basic & (1ull << i))))
			continue;
		if (!local_secret_host(&s[i], host)) {
			x->exfil = (int)i;
			_cleanup_free_ char *h = local_escape_name(host, strlen(host));
			snprintf(
				x->why, sizeof(x->why),
				"secret %s sent to %s, not one of its hosts: possible exfiltration",
				s[i].name, h);
			x->code = 403;
			x->status = "Forbidden";
			return LOCAL_INJECT_REFUSE;
		}
		if (i < 64)
			x->injected |= 1ull << i;
	}
	/* then the head again (with Basic credentials put in), each placeholder replaced by its
	 * value */
	size_t consumed = hl;
	if (basic) {
		buf = basic;
		hl = basic_len;
	}
	size_t cap = hl + 1;
	for (size_t i = 0; i < n; i++)
		if (x->injected & (i < 64 ? 1ull << i : 0))
			cap += (hl / strlen(s[i].placeholder) + 1) * strlen(s[i].value);
	char *out = xmalloc(cap);
	size_t o = 0;
	for (size_t p = 0; p < hl;) {
		bool hit = false;
		for (size_t i = 0; i < n && i < 64 && !hit; i++) {
			size_t kl = strlen(s[i].placeholder), vl = strlen(s[i].value);
			if ((x->injected & (1ull << i)) && hl - p >= kl &&
			    memcmp(buf + p, s[i].placeholder, kl) == 0) {
				memcpy(out + o, s[i].value, vl);
				o += vl;
				p += kl;
				hit = true;
			}
		}
		if (!hit)
			out[o++] = buf[p++];
	}
	out[o] = 0;
	if (basic)
		explicit_bzero(basic, basic_len);
	x->head = out;
	x->head_len = o;
	x->consumed = consumed;
	return LOCAL_INJECT_OK;
}
