/* HTTP over libcurl (dlopen'ed on first use): shared by the registry client and the hosted
 * providers. Plain http only to loopback; credentials never reach --debug output. */
#define _GNU_SOURCE
#include "core/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>

#include "core/lazy.h"
#include "core/log.h"
#include "core/util.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0"
#endif

#define BODY_MAX (16 << 20)
#define EBODY_MAX 65536

static const char *const curl_names[] = {
#define X(f) "curl_" #f,
	SBX_CURL_FNS(X)
#undef X
};

struct sbx_curl_fns sbx_curl;
_Static_assert(sizeof(sbx_curl) == ARRAY_SIZE(curl_names) * sizeof(void *),
	       "one slot per libcurl function");

int sbx_curl_load(struct sbx_err *err)
{
	static bool loaded;

	if (loaded)
		return 0;
	if (sbx_lazy_load(&sbx_lazy_curl, curl_names, (void **)&sbx_curl, ARRAY_SIZE(curl_names),
			  err) < 0)
		return -1;
	if (sbx_curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot initialise libcurl");
	loaded = true;
	return 0;
}

/* whether a header line carries a secret, and the length of its "Name:" */
static size_t header_secret(const char *l, size_t n)
{
	static const char *const names[] = {
		"authorization:",
		"proxy-authorization:",
		"cookie:",
		"set-cookie:",
		"x-api-key:",
		"x-access-token:",
		"e2b-traffic-access-token:",
		"x-daytona-preview-token:",
	};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		size_t k = strlen(names[i]);
		if (n >= k && !strncasecmp(l, names[i], k))
			return k;
	}
	return 0;
}

int sbx_curl_debug(CURL *h, curl_infotype type, char *data, size_t n, void *u)
{
	const char *mark = type == CURLINFO_TEXT ? "*"
		: type == CURLINFO_HEADER_IN	 ? "<"
		: type == CURLINFO_HEADER_OUT	 ? ">"
						 : NULL;
	if (!mark)
		return 0;
	for (size_t i = 0; i < n;) {
		size_t e = i, ln, k;
		while (e < n && data[e] != '\n')
			e++;
		for (ln = e - i; ln && data[i + ln - 1] == '\r'; ln--)
			;
		if (ln && type != CURLINFO_TEXT && (k = header_secret(data + i, ln)))
			sbx_debug("%s %.*s <redacted>", mark, (int)k, data + i);
		else if (ln)
			sbx_debug("%s %.*s", mark, (int)ln, data + i);
		i = e + 1;
	}
	return 0;
}

char *sbx_url_host(const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	const char *at = NULL;
	size_t n = strcspn(p, "/?#");
	for (size_t i = 0; i < n; i++)
		if (p[i] == '@')
			at = p + i;
	if (at) {
		n -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	return xstrndup(p, n);
}

bool sbx_url_is_loopback(const char *url)
{
	_cleanup_free_ char *hp = sbx_url_host(url);
	char *h = hp;
	struct in_addr a4;
	struct in6_addr a6;

	if (*h == '[') {
		h++;
		h[strcspn(h, "]")] = 0;
		return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	h[strcspn(h, ":")] = 0;
	if (!strcasecmp(h, "localhost"))
		return true;
	return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

bool sbx_curl_tls_error(CURLcode c)
{
	switch (c) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

bool sbx_curl_transient(CURLcode c)
{
	return c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR || c == CURLE_GOT_NOTHING ||
		c == CURLE_PARTIAL_FILE || c == CURLE_HTTP2 || c == CURLE_HTTP2_STREAM;
}

int sbx_curl_protocols(CURL *h, bool plain)
{
	const char *p = plain ? "http,https" : "https";
	if (sbx_curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, p) == CURLE_OK &&
	    sbx_curl.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, p) == CURLE_OK)
		return 0;
	/* libcurl older than 7.85 */
	long mask = CURLPROTO_HTTPS | (plain ? CURLPROTO_HTTP : 0);
	if (sbx_curl.easy_setopt(h, CURLOPT_PROTOCOLS, mask) != CURLE_OK ||
	    sbx_curl.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, mask) != CURLE_OK)
		return -1;
	return 0;
}

void sbx_url_escape(struct strbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c))
			strbuf_addch(sb, (char)c);
		else
			strbuf_addf(sb, "%%%02X", c);
	}
}

/* --- one request -------------------------------------------------------------------------- */

#define WRITEBACK (2LL << 20)
#define MAX_REDIRS 5

struct xfer {
	const struct sbx_http_req *req;
	struct sbx_http_resp *resp;
	CURL *h;
	long long tdata; /* last byte, either way */
	long stall_s;
	bool stalled;
	long long sent; /* of body_fd */
	bool head_done; /* on_head was called */
};

/* on_head, once: false when it said stop */
static bool head_once(struct xfer *x)
{
	if (!x->req->on_head || x->head_done)
		return true;
	long code = 0;
	(void)sbx_curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	x->head_done = true;
	if (!x->req->on_head(code, x->resp->header_list, x->req->arg)) {
		x->resp->aborted = true;
		return false;
	}
	return true;
}

static bool ok_status(const struct xfer *x)
{
	long code = 0;
	(void)sbx_curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	return code >= 200 && code < 300;
}

/* the most 2xx body bytes taken */
static long long body_cap(const struct sbx_http_req *q)
{
	bool mem = !q->on_data && q->out_fd < 0;
	long long cap = q->max_body > 0 ? q->max_body : LLONG_MAX;

	return mem && cap > BODY_MAX ? BODY_MAX : cap;
}

static size_t on_write(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	const struct sbx_http_req *q = x->req;
	struct sbx_http_resp *r = x->resp;
	size_t len = size * n;

	x->tdata = sbx_now_ms();
	if (!head_once(x))
		return 0;
	if (!ok_status(x) && !q->on_head) {
		size_t have = r->body.len;
		size_t room = have < EBODY_MAX ? EBODY_MAX - have : 0;
		strbuf_add(&r->body, p, len < room ? len : room);
		return len;
	}
	if (r->got + (long long)len > body_cap(q)) {
		r->too_big = true;
		return 0;
	}
	if (q->on_data) {
		if (!q->on_data(p, len, q->arg)) {
			r->aborted = true;
			return 0;
		}
	} else if (q->out_fd >= 0) {
		if (sbx_write_all(q->out_fd, p, len) < 0) {
			r->write_errno = errno;
			return 0;
		}
		if (q->sha)
			sbx_sha256_update(q->sha, p, len);
		long long from = r->got / WRITEBACK * WRITEBACK;
		long long to = (r->got + (long long)len) / WRITEBACK * WRITEBACK;
		if (q->writeback && to > from)
			(void)sync_file_range(q->out_fd, from, to - from, SYNC_FILE_RANGE_WRITE);
	} else {
		strbuf_add(&r->body, p, len);
	}
	r->got += (long long)len;
	if (q->on_progress)
		q->on_progress(r->got, q->arg);
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = size * n;

	x->tdata = sbx_now_ms();
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		/* a new response (after a 100 or a redirect): only the last one's headers count */
		json_object_clear(x->resp->headers);
		json_array_clear(x->resp->header_list);
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon || colon == p)
		return len;
	char *name = xstrndup(p, (size_t)(colon - p));
	for (char *c = name; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	char *v = xstrndup(colon + 1, len - (size_t)(colon - p) - 1);
	char *b = v + strspn(v, " \t"), *e = b + strlen(b);
	while (e > b && strchr(" \t\r\n", e[-1]))
		*--e = 0;
	json_object_set_new(x->resp->headers, name, json_string(b));
	json_array_append_new(x->resp->header_list, json_pack("[ss]", name, b));
	free(name);
	free(v);
	return len;
}

/* about once a second even when nothing arrives: the exact stall check (curl's own low-speed
 * check averages over several seconds), cancel, and progress that goes on moving */
static int on_xferinfo(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = u;

	if (x->req->cancel && *x->req->cancel) {
		x->resp->aborted = true;
		return 1;
	}
	if (sbx_now_ms() - x->tdata > x->stall_s * 1000LL) {
		x->stalled = true;
		return 1;
	}
	if (x->req->on_progress && ok_status(x))
		x->req->on_progress(x->resp->got, x->req->arg);
	return 0;
}

static size_t on_read(char *buf, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t want = size * n;
	long long left = x->req->body_size - x->sent;

	if (left <= 0)
		return 0;
	if ((long long)want > left)
		want = (size_t)left;
	ssize_t r;
	if (x->req->read_body)
		r = x->req->read_body(buf, want, x->req->arg);
	else
		do
			r = read(x->req->body_fd, buf, want);
		while (r < 0 && errno == EINTR);
	if (r <= 0)
		return CURL_READFUNC_ABORT;
	x->sent += r;
	x->tdata = sbx_now_ms();
	return (size_t)r;
}

void sbx_http_resp_release(struct sbx_http_resp *r)
{
	strbuf_release(&r->body);
	json_decref(r->headers);
	json_decref(r->header_list);
	r->headers = r->header_list = NULL;
}

const char *sbx_http_header(const struct sbx_http_resp *r, const char *lower_name)
{
	return json_string_value(json_object_get(r->headers, lower_name));
}

void sbx_http_session_release(struct sbx_http_session *s)
{
	if (s->h)
		sbx_curl.easy_cleanup(s->h);
	s->h = NULL;
}

/* a transport failure in words: what failed first, the host (never the path), what to do */
static int transport_error(const struct sbx_http_req *q, struct xfer *x, CURLcode c, bool plain,
			   const char *errbuf, const char *what, struct sbx_err *err)
{
	char *eff = NULL;
	(void)sbx_curl.easy_getinfo(x->h, CURLINFO_EFFECTIVE_URL, &eff);
	_cleanup_free_ char *host = sbx_url_host(eff ? eff : q->url);
	const char *why = errbuf[0] ? errbuf : sbx_curl.easy_strerror(c);
	const char *f = q->fetching, *while_ = f ? " while fetching " : "";
	struct sbx_http_resp *r = x->resp;

	if (!f)
		f = "";
	r->transient = sbx_curl_transient(c) && !r->too_big && !r->write_errno;
	if (r->too_big) {
		if (*f)
			return sbx_err_set(err, SBX_E_REMOTE, "%s is larger than %lld bytes", f,
					   body_cap(q));
		return sbx_err_set(err, SBX_E_REMOTE, "%s (%s) sent an answer larger than %lld MiB",
				   what, host, body_cap(q) >> 20);
	}
	if (r->write_errno) {
		errno = r->write_errno;
		if (*f)
			return sbx_err_errno(err, "cannot save %s", f);
		return sbx_err_errno(err, "cannot write what %s sent", what);
	}
	if (x->stalled)
		return sbx_err_set(err, SBX_E_NETWORK,
				   "%s (%s) stalled: nothing for %ld seconds%s%s", what, host,
				   x->stall_s, while_, f);
	if (c == CURLE_OPERATION_TIMEDOUT) {
		r->timed_out = true;
		return sbx_err_set(err, SBX_E_NETWORK, "%s (%s) did not answer in time: %s", what,
				   host, why);
	}
	if (c == CURLE_COULDNT_RESOLVE_HOST)
		return sbx_err_set(err, SBX_E_NETWORK,
				   "cannot resolve '%s' (check the network and "
				   "the %s URL)",
				   host, what);
	/* a TLS alert after the handshake (TLS 1.3: a refused client certificate) is one too,
	 * however libcurl words it */
	if (sbx_curl_tls_error(c) || strstr(why, " alert "))
		return sbx_err_set(err, SBX_E_NETWORK, "TLS failure talking to %s at %s: %s%s",
				   what, host, why, q->tls_hint ? q->tls_hint : "");
	if (c == CURLE_COULDNT_CONNECT)
		return sbx_err_set(err, SBX_E_NETWORK, "cannot connect to %s at %s: %s", what, host,
				   why);
	if (c == CURLE_TOO_MANY_REDIRECTS)
		return sbx_err_set(err, SBX_E_REMOTE, "%s (%s) redirected more than %d times%s%s",
				   what, host, MAX_REDIRS, while_, f);
	long redirects = 0;
	(void)sbx_curl.easy_getinfo(x->h, CURLINFO_REDIRECT_COUNT, &redirects);
	if (c == CURLE_UNSUPPORTED_PROTOCOL && q->follow &&
	    (redirects > 0 || (eff && !streq(eff, q->url)))) {
		_cleanup_free_ char *first = sbx_url_host(q->url);
		return sbx_err_set(err, SBX_E_REMOTE,
				   "%s (%s) redirected %s to a URL that is not %s", what, first,
				   *f ? f : "a request", plain ? "http or https" : "https");
	}
	if (c == CURLE_UNSUPPORTED_PROTOCOL)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "refusing '%s': %s is reached over https only "
				   "(plain http is allowed to loopback addresses)",
				   host, what);
	/* hung up on, before any answer, over TLS: a refused client certificate (TLS 1.3 tells
	 * after the handshake, and a reset can eat its alert) looks so */
	long code = 0;
	(void)sbx_curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	bool hint = !code && q->tls_hint && startswith(eff ? eff : q->url, "https://") &&
		(c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR || c == CURLE_GOT_NOTHING);
	if (c == CURLE_PARTIAL_FILE || c == CURLE_RECV_ERROR || c == CURLE_GOT_NOTHING)
		return sbx_err_set(err, SBX_E_NETWORK, "%s (%s) cut the answer short: %s%s", what,
				   host, why, hint ? q->tls_hint : "");
	if (hint)
		return sbx_err_set(err, SBX_E_NETWORK, "cannot talk to %s at %s: %s%s", what, host,
				   why, q->tls_hint);
	return sbx_err_set(err, SBX_E_NETWORK, "cannot talk to %s at %s: %s", what, host, why);
}

static size_t mime_read(char *buf, size_t size, size_t n, void *u)
{
	return on_read(buf, size, n, u);
}

/* a transfer handle: the session's, reset, or a new one */
static CURL *handle(const struct sbx_http_req *q)
{
	if (!q->session)
		return sbx_curl.easy_init();
	if (!q->session->h)
		return q->session->h = sbx_curl.easy_init();
	sbx_curl.easy_reset(q->session->h);
	return q->session->h;
}

/* plain http: to loopback, over a unix socket, or where the user asked for it */
static bool plain_ok(const struct sbx_http_req *q)
{
	return q->insecure || q->unix_socket || q->dial || sbx_url_is_loopback(q->url);
}

/* where and how a request connects: the URL, a unix socket, TLS files, the protocols allowed
 * (what sbx_http_perform and sbx_http_connect share: a transport of another kind, a socket
 * made by a callback, is set here once for both) */
static int set_transport(CURL *h, const struct sbx_http_req *q)
{
	struct sbx_curl_fns *cu = &sbx_curl;

	(void)cu->easy_setopt(h, CURLOPT_URL, q->url);
	(void)cu->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	(void)cu->easy_setopt(h, CURLOPT_USERAGENT, "sbx/" SBX_VERSION);
	(void)cu->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	(void)cu->easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	if (q->unix_socket)
		(void)cu->easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, q->unix_socket);
	if (q->tls_ca)
		(void)cu->easy_setopt(h, CURLOPT_CAINFO, q->tls_ca);
	if (q->tls_cert)
		(void)cu->easy_setopt(h, CURLOPT_SSLCERT, q->tls_cert);
	if (q->tls_key)
		(void)cu->easy_setopt(h, CURLOPT_SSLKEY, q->tls_key);
	if (q->dial && sbx_dial_curl(h, q->dial) < 0)
		return -1;
	if (q->setup)
		q->setup(h, q->setup_arg);
	return sbx_curl_protocols(h, plain_ok(q));
}

int sbx_http_connect(const struct sbx_http_req *q, CURL **ret, int *ret_fd, const char *what,
		     struct sbx_err *err)
{
	struct sbx_curl_fns *cu = &sbx_curl;
	char errbuf[CURL_ERROR_SIZE] = "";
	struct sbx_http_resp resp = { 0 };

	if (sbx_curl_load(err) < 0)
		return -1;
	CURL *h = cu->easy_init();
	if (!h)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start a libcurl transfer");
	struct xfer x = { .req = q, .resp = &resp, .h = h, .stall_s = 30 };
	(void)cu->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (set_transport(h, q) < 0) {
		cu->easy_cleanup(h);
		return sbx_err_set(
			err, SBX_E_SYSTEM,
			"libcurl refuses to limit its protocols or to take sbx's connections");
	}
	(void)cu->easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	if (sbx_debug_enabled) {
		(void)cu->easy_setopt(h, CURLOPT_DEBUGFUNCTION, sbx_curl_debug);
		(void)cu->easy_setopt(h, CURLOPT_VERBOSE, 1L);
	}
	CURLcode c = cu->easy_perform(h);
	curl_socket_t fd = CURL_SOCKET_BAD;
	if (c == CURLE_OK)
		c = cu->easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd);
	if (c != CURLE_OK || fd == CURL_SOCKET_BAD) {
		int r = transport_error(q, &x, c, plain_ok(q), errbuf, what, err);
		cu->easy_cleanup(h);
		/* over ssh, ssh's own words say best why the connection failed */
		if (q->dial)
			(void)sbx_dial_check(q->dial, err);
		return r;
	}
	(void)cu->easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	*ret = h;
	*ret_fd = fd;
	return 0;
}

int sbx_http_perform(const struct sbx_http_req *q, struct sbx_http_resp *resp, const char *what,
		     struct sbx_err *err)
{
	struct sbx_curl_fns *cu = &sbx_curl;
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	curl_mime *mime = NULL;

	memset(resp, 0, sizeof(*resp));
	resp->headers = json_object();
	resp->header_list = json_array();
	if (sbx_curl_load(err) < 0)
		return -1;
	CURL *h = handle(q);
	if (!h)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start a libcurl transfer");
	struct xfer x = { .req = q,
			  .resp = resp,
			  .h = h,
			  .tdata = sbx_now_ms(),
			  .stall_s = q->stall_s > 0 ? q->stall_s : 30 };
	const char *method = q->method
		? q->method
		: (q->body || q->body_fd >= 0 || q->read_body ? "POST" : "GET");
	bool plain = plain_ok(q);

	(void)cu->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (set_transport(h, q) < 0) {
		if (!q->session)
			cu->easy_cleanup(h);
		return sbx_err_set(
			err, SBX_E_SYSTEM,
			"libcurl refuses to limit its protocols or to take sbx's connections");
	}
	if (q->timeout_ms > 0)
		(void)cu->easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)q->timeout_ms);
	if (q->follow) {
		(void)cu->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		(void)cu->easy_setopt(h, CURLOPT_MAXREDIRS, (long)MAX_REDIRS);
		(void)cu->easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
	}
	for (const char *const *p = q->headers; p && *p; p++)
		hdrs = cu->slist_append(hdrs, *p);
	hdrs = cu->slist_append(hdrs, "Expect:");
	(void)cu->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (q->body_fd >= 0 && q->upload_name) {
		mime = cu->mime_init(h);
		curl_mimepart *part = cu->mime_addpart(mime);
		(void)cu->mime_name(part, "file");
		(void)cu->mime_filename(part, q->upload_name);
		(void)cu->mime_type(part, "application/octet-stream");
		(void)cu->mime_data_cb(part, q->body_size, mime_read, NULL, NULL, &x);
		(void)cu->easy_setopt(h, CURLOPT_MIMEPOST, mime);
	} else if (q->body_fd >= 0 || q->read_body) {
		(void)cu->easy_setopt(h, CURLOPT_POST, 1L);
		(void)cu->easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		(void)cu->easy_setopt(h, CURLOPT_READDATA, &x);
		(void)cu->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_size);
	} else if (q->body || streq(method, "POST") || streq(method, "PUT")) {
		(void)cu->easy_setopt(h, CURLOPT_POSTFIELDS, q->body ? q->body : "");
		(void)cu->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)(q->body ? q->body_len : 0));
	}
	if (streq(method, "HEAD"))
		(void)cu->easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (!streq(method, "GET") && !streq(method, "POST"))
		(void)cu->easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (q->path_as_is)
		(void)cu->easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	(void)cu->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	(void)cu->easy_setopt(h, CURLOPT_WRITEDATA, &x);
	(void)cu->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	(void)cu->easy_setopt(h, CURLOPT_HEADERDATA, &x);
	(void)cu->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
	(void)cu->easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	(void)cu->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	if (sbx_debug_enabled) {
		(void)cu->easy_setopt(h, CURLOPT_DEBUGFUNCTION, sbx_curl_debug);
		(void)cu->easy_setopt(h, CURLOPT_VERBOSE, 1L);
	}
	long long t0 = sbx_now_ms();
	CURLcode c = cu->easy_perform(h);
	sbx_debug("%s %s: %s in %lld ms", method, q->url,
		  c == CURLE_OK ? "answered" : cu->easy_strerror(c), sbx_now_ms() - t0);
	int r = 0;
	if (c == CURLE_OK || (c == CURLE_WRITE_ERROR && resp->aborted) ||
	    (c == CURLE_ABORTED_BY_CALLBACK && resp->aborted)) {
		(void)cu->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
		if (c == CURLE_OK)
			(void)head_once(&x); /* an answer without a body */
	} else {
		r = transport_error(q, &x, c, plain, errbuf, what, err);
	}
	/* the session's connection stays open: its ssh, if it failed, is found by the check */
	if (!q->session) {
		cu->easy_cleanup(h);
		h = NULL;
	}
	/* over ssh, ssh's own words say best why a transfer failed */
	if (r < 0 && q->dial)
		(void)sbx_dial_check(q->dial, err);
	/* the session's handle outlives errbuf and x: nothing of them stays set on it */
	if (h) {
		(void)cu->easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
		(void)cu->easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	}
	if (mime)
		cu->mime_free(mime);
	cu->slist_free_all(hdrs);
	return r;
}
