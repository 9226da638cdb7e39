/* Kubernetes previews: sbx's forwarding process (providers/fwd.c: 127.0.0.1, sbx's own token
 * in front) hands each connection that has the token to serve(), which forwards its request to
 * the pod's proxy subresource (.../pods/POD:PORT/proxy/PATH) with the kubeconfig's
 * credentials, which never leave that process. One request per connection, each bounded in
 * size and time. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <errno.h>
#include <unistd.h>

#include "core/log.h"
#include "providers/fwd.h"
#include "providers/local/net.h"

#define BODY_MAX (1LL << 40) /* streamed: a bound only against nonsense */
#define CONN_MAX_S 120	     /* the most one connection may take */

/* --- a connection, in the forwarding process ------------------------------------------------ */

static void answer(int c, int code, const char *reason, const char *extra, const char *ctype,
		   const char *body, size_t n)
{
	_cleanup_free_ char *h = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: "
					   "%zu\r\nConnection: close\r\n%s\r\n",
					   code, reason, ctype ? ctype : "text/plain", n,
					   extra ? extra : "");
	if (sbx_write_all(c, h, strlen(h)) == 0 && n)
		(void)sbx_write_all(c, body, n);
}

static void text(int c, int code, const char *reason, const char *msg)
{
	answer(c, code, reason, NULL, "text/plain", msg, strlen(msg));
}

/* the client's headers that go on to the pod (never its Authorization: the cluster's goes) */
static const char *const passed[] = {
	"accept",
	"accept-language",
	"cache-control",
	"content-encoding",
	"content-type",
	"if-match",
	"if-modified-since",
	"if-none-match",
	"if-range",
	"if-unmodified-since",
	"origin",
	"range",
	"referer",
	"user-agent",
	"x-requested-with",
};

/* the pod's headers that come back (Location rewritten, Set-Cookie each) */
static const char *const returned[] = {
	"accept-ranges",
	"cache-control",
	"content-disposition",
	"content-encoding",
	"content-language",
	"content-length",
	"content-range",
	"content-type",
	"etag",
	"expires",
	"last-modified",
	"location",
	"set-cookie",
	"vary",
	"www-authenticate",
};

static int hexval(int c)
{
	return c >= '0' && c <= '9'    ? c - '0'
		: c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10
				       : -1;
}

bool kube_preview_path_ok(const char *t, size_t n)
{
	size_t plen = 0;

	if (!n || t[0] != '/')
		return false;
	while (plen < n && t[plen] != '?' && t[plen] != '#')
		plen++;
	/* the path decoded once (%2e is '.', %2f is '/'), then no segment may be . or .. */
	struct strbuf d = STRBUF_INIT;
	bool ok = true;
	for (size_t i = 0; i < plen && ok; i++) {
		unsigned char ch = (unsigned char)t[i];
		if (ch == '%') {
			int hi = i + 2 < plen ? hexval(t[i + 1]) : -1;
			int lo = i + 2 < plen ? hexval(t[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				ok = false;
				break;
			}
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		/* a backslash is a separator to some servers; NUL and controls are nobody's */
		if (ch == '\\' || ch < 0x20 || ch == 0x7f)
			ok = false;
		strbuf_addch(&d, (char)ch);
	}
	const char *s = d.buf ? d.buf : "";
	for (const char *seg = s; ok && seg;) {
		const char *sl = strchr(seg, '/');
		size_t sn = sl ? (size_t)(sl - seg) : strlen(seg);
		if ((sn == 1 && seg[0] == '.') || (sn == 2 && seg[0] == '.' && seg[1] == '.'))
			ok = false;
		seg = sl ? sl + 1 : NULL;
	}
	strbuf_release(&d);
	return ok;
}

char *kube_preview_location(const char *loc, const char *server, const char *prefix)
{
	size_t sl = strlen(server), pl = strlen(prefix);
	const char *rest = NULL;

	/* the apiserver's proxy writes the pod's "/x" as its own URL: back to the preview's */
	if (!strncmp(loc, server, sl) && !strncmp(loc + sl, prefix, pl))
		rest = loc + sl + pl;
	else if (!strncmp(loc, prefix, pl))
		rest = loc + pl;
	if (rest && (*rest == '/' || *rest == '?' || *rest == '#' || !*rest))
		return *rest == '/' ? xstrdup(rest) : xasprintf("/%s", rest);
	return xstrdup(loc);
}

char *kube_preview_cookie(const char *v, size_t n)
{
	struct strbuf out = STRBUF_INIT;
	const char *end = v + n;

	while (v < end) {
		const char *e = memchr(v, ';', (size_t)(end - v));
		if (!e)
			e = end;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		/* sbx's own token stays here */
		bool own = (size_t)(e - v) > 17 && !strncmp(v, "sbx_preview_token", 17) &&
			(v[17] == '=' || v[17] == '_');
		if (!own && e > v) {
			if (out.len)
				strbuf_addstr(&out, "; ");
			strbuf_add(&out, v, (size_t)(e - v));
		}
		v = e + 1;
	}
	return out.len ? strbuf_detach(&out) : (strbuf_release(&out), NULL);
}

/* one relayed exchange: the client's socket, what of its body came with the head */
struct relay {
	int c;
	const char *early; /* body bytes read with the head */
	size_t early_len, early_off;
	const char *server, *prefix;
	bool head_sent;
};

static ssize_t relay_read(char *buf, size_t n, void *arg)
{
	struct relay *r = arg;
	if (r->early_off < r->early_len) {
		size_t k = r->early_len - r->early_off < n ? r->early_len - r->early_off : n;
		memcpy(buf, r->early + r->early_off, k);
		r->early_off += k;
		return (ssize_t)k;
	}
	ssize_t k;
	do
		k = read(r->c, buf, n);
	while (k < 0 && errno == EINTR);
	return k;
}

/* a header value from the cluster, for the client: printable bytes only */
static bool value_ok(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			return false;
	return true;
}

static bool relay_head(long status, const json_t *list, void *arg)
{
	struct relay *r = arg;
	struct strbuf h = STRBUF_INIT;
	size_t i;
	json_t *kv;

	if (status < 100 || status > 999)
		status = 502;
	strbuf_addf(&h, "HTTP/1.1 %ld Proxied\r\n", status);
	json_array_foreach (list, i, kv) {
		const char *k = json_string_value(json_array_get(kv, 0));
		const char *v = json_string_value(json_array_get(kv, 1));
		bool keep = false;
		for (size_t j = 0; k && v && j < ARRAY_SIZE(returned); j++)
			keep = keep || streq(k, returned[j]);
		if (!keep || !value_ok(v))
			continue;
		if (streq(k, "location")) {
			_cleanup_free_ char *l = kube_preview_location(v, r->server, r->prefix);
			strbuf_addf(&h, "Location: %s\r\n", l);
		} else {
			strbuf_addf(&h, "%s: %s\r\n", k, v);
		}
	}
	strbuf_addstr(&h, "Connection: close\r\n\r\n");
	int w = sbx_write_all(r->c, h.buf, h.len);
	strbuf_release(&h);
	r->head_sent = true;
	return w == 0;
}

static bool relay_body(const char *p, size_t n, void *arg)
{
	struct relay *r = arg;
	return sbx_write_all(r->c, p, n) == 0;
}

struct kpreview {
	struct kube *k;
	const char *pod;
	int port;
};

/* a client with the token: its request to the pod's proxy */
static void serve(void *arg, int c, const char *head, size_t hl, size_t len)
{
	const struct kpreview *kp = arg;
	struct kube *k = kp->k;
	const char *pod = kp->pod;
	int port = kp->port;

	struct local_http_req q;
	if (local_http_head_parse(head, hl, &q) < 0 || !q.target_len || head[q.target_off] != '/')
		return text(c, 400, "Bad Request", "sbx: malformed request\n");
	/* the pod's proxy and nothing above it: no dot segments, however written */
	if (!kube_preview_path_ok(head + q.target_off, q.target_len))
		return text(
			c, 400, "Bad Request",
			"sbx: the path has a '.' or '..' segment, which this preview refuses\n");
	size_t vl = 0;
	if (local_http_header(head, hl, "transfer-encoding", &vl))
		return text(c, 411, "Length Required", "sbx: send a Content-Length\n");
	const char *cl = local_http_header(head, hl, "content-length", &vl);
	long long blen = 0;
	_cleanup_free_ char *cls = cl ? xstrndup(cl, vl) : NULL;
	if (cls && sbx_parse_int(cls, 0, BODY_MAX, &blen) < 0)
		return text(c, 413, "Payload Too Large", "sbx: body too large\n");
	/* the request, with the cluster's credentials and a few of the client's headers */
	const char *hdrs[ARRAY_SIZE(passed) + 3];
	char *own[ARRAY_SIZE(passed) + 1] = { 0 };
	size_t nh = 0;
	const char *tok = NULL;
	struct sbx_err err = { 0 };
	if (sbx_kubeconfig_token(&k->kc, &tok, &err) < 0)
		return text(c, 502, "Bad Gateway", "sbx: no credentials for the cluster\n");
	_cleanup_free_ char *auth = tok ? xasprintf("Authorization: Bearer %s", tok) : NULL;
	if (auth)
		hdrs[nh++] = auth;
	for (size_t i = 0; i < ARRAY_SIZE(passed); i++) {
		const char *v = local_http_header(head, hl, passed[i], &vl);
		if (v)
			hdrs[nh++] = own[i] = xasprintf("%s: %.*s", passed[i], (int)vl, v);
	}
	/* the app's cookies go on; sbx's token does not */
	const char *ck = local_http_header(head, hl, "cookie", &vl);
	_cleanup_free_ char *cookies = ck ? kube_preview_cookie(ck, vl) : NULL;
	if (cookies)
		hdrs[nh++] = own[ARRAY_SIZE(passed)] = xasprintf("Cookie: %s", cookies);
	hdrs[nh] = NULL;
	_cleanup_free_ char *target = xstrndup(head + q.target_off, q.target_len);
	struct strbuf pre = STRBUF_INIT;
	strbuf_addstr(&pre, "/api/v1/namespaces/");
	sbx_url_escape(&pre, k->ns);
	strbuf_addstr(&pre, "/pods/");
	sbx_url_escape(&pre, pod);
	strbuf_addf(&pre, ":%d/proxy", port);
	_cleanup_free_ char *url = xasprintf("%s%s%s", k->r.api, pre.buf, target);
	struct relay rl = { .c = c,
			    .early = head + hl,
			    .early_len = len - hl < (size_t)blen ? len - hl : (size_t)blen,
			    .server = k->r.api,
			    .prefix = pre.buf };
	struct sbx_http_req r = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	r.method = q.method;
	r.url = url;
	r.headers = hdrs;
	if (blen) {
		r.read_body = relay_read;
		r.body_size = blen;
	}
	r.on_head = relay_head;
	r.on_data = relay_body;
	r.arg = &rl;
	r.path_as_is = true; /* what was checked above is what is asked for */
	r.timeout_ms = CONN_MAX_S * 1000LL;
	r.setup = sbx_kubeconfig_curl_setup;
	r.setup_arg = &k->kc;
	if (sbx_http_perform(&r, &resp, "Kubernetes", &err) < 0 && !rl.head_sent) {
		_cleanup_free_ char *m = xasprintf("sbx: %s\n", err.msg);
		text(c, 502, "Bad Gateway", m);
	}
	sbx_http_resp_release(&resp);
	strbuf_release(&pre);
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		free(own[i]);
}

int kube_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		 const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	(void)ctx;
	if (remote_need_id("Kubernetes", rec, err) < 0)
		return -1;
	if (!o->port) {
		*ret = fwd_list(rec, "kube");
		return 0;
	}
	if (o->rm)
		return fwd_close(rec, "kube", o->port, err);
	if (remote_check_running("Kubernetes", rec, err) < 0)
		return -1;
	_cleanup_(kube_close) struct kube k = { 0 };
	if (kube_open(&k, rec, err) < 0)
		return -1;
	struct kpreview kp = { .k = &k, .pod = kube_pod(rec), .port = o->port };
	struct fwd_spec s = { .kind = "kube",
			      .port = o->port,
			      .serve = serve,
			      .conn_max_s = CONN_MAX_S,
			      .arg = &kp };
	return fwd_open(rec, &s, ret, err);
}

void kube_previews_stop(const struct sbx_record *rec)
{
	fwd_stop_all(rec, "kube");
}
