/* The OCI distribution pull client: libcurl (dlopen'ed), bearer/basic auth, manifests, blobs
 * streamed into the store and verified. The parsing it relies on is in core/registry-parse.c. */
#define _GNU_SOURCE
#include "core/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/digest.h"
#include "core/http.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0"
#endif

#define MiB (1024.0 * 1024.0)
#define MANIFEST_MAX (4 << 20)
#define WRITEBACK (2LL << 20)
#define TOKEN_MAX (1 << 20)
#define EBODY_MAX 65536
#define INDEX_MAX_NESTING 2

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

#define cu sbx_curl

/* --- one pull's HTTP session ------------------------------------------------------------------ */

struct sess {
	const struct sbx_ref *ref;
	const char *images;
	CURL *h;
	char errbuf[CURL_ERROR_SIZE];
	char *base; /* "https://HOST/v2/REPO/" */
	bool plain; /* plain http allowed (loopback or --insecure) */
	long stall;
	bool progress;
	char *auth; /* "Authorization: ..." for the registry, or NULL */
	bool creds_loaded;
	int have_creds;
	struct sbx_registry_creds creds;
	const struct sbx_pull_opts *o;
};

static int hold(const struct sess *s, const char *digest, struct sbx_err *err)
{
	return s->o && s->o->hold ? s->o->hold(s->o->hold_arg, digest, err) : 0;
}

/* one transfer: where the body goes, and what the final response said */
struct xfer {
	struct sess *s;
	const char *what;	/* "the manifest", "blob sha256:..." */
	struct strbuf *mem;	/* the body in memory, or */
	int fd;			/* into this file (-1: none) */
	struct sbx_sha256 *sha; /* with its digest */
	long long limit;	/* most bytes accepted */
	long long got;
	bool too_big;
	int write_errno;
	struct strbuf ebody; /* the body of an answer that is not 2xx */
	char *www_auth, *content_type;
	const char *label;	    /* progress label (12 hex), or NULL */
	bool shown;		    /* a progress line is on the screen */
	bool stalled;		    /* aborted: no byte for s->stall seconds */
	long long t0, tlast, tdata; /* start, last progress line, last byte received */
};

static void xfer_release(struct xfer *x)
{
	strbuf_release(&x->ebody);
	free(x->www_auth);
	free(x->content_type);
	x->www_auth = x->content_type = NULL;
}

static void progress_show(struct xfer *x, bool force)
{
	long long now = sbx_now_ms();

	if (!x->label || (!force && now - x->tlast < 200))
		return;
	x->tlast = now;
	x->shown = true;
	double secs = (double)(now - x->t0) / 1000.0;
	double speed = secs > 0.05 ? (double)x->got / secs : 0;
	fprintf(stderr, "\r%s: %.1f/%.1f MiB  %.1f MiB/s\033[K", x->label, (double)x->got / MiB,
		(double)x->limit / MiB, speed / MiB);
	fflush(stderr);
}

static size_t on_write(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = size * n;
	long code = 0;

	(void)cu.easy_getinfo(x->s->h, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code >= 300) {
		size_t room = x->ebody.len < EBODY_MAX ? EBODY_MAX - x->ebody.len : 0;
		strbuf_add(&x->ebody, p, len < room ? len : room);
		return len;
	}
	if (x->got + (long long)len > x->limit) {
		x->too_big = true;
		return 0;
	}
	if (x->mem) {
		strbuf_add(x->mem, p, len);
	} else if (x->fd >= 0) {
		if (sbx_write_all(x->fd, p, len) < 0) {
			x->write_errno = errno;
			return 0;
		}
		sbx_sha256_update(x->sha, p, len);
		/* start writing each WRITEBACK bytes back as they complete, so that the fsync
		 * before the blob's rename has little left to wait for */
		long long from = x->got / WRITEBACK * WRITEBACK;
		long long to = (x->got + (long long)len) / WRITEBACK * WRITEBACK;
		if (to > from)
			(void)sync_file_range(x->fd, from, to - from, SYNC_FILE_RANGE_WRITE);
	}
	x->got += (long long)len;
	x->tdata = sbx_now_ms();
	progress_show(x, false);
	return len;
}

/* called about once a second even when nothing arrives: the exact stall check (curl's own
 * low-speed check averages over several seconds), and progress that goes on moving */
static int on_xferinfo(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = u;

	if (sbx_now_ms() - x->tdata > x->s->stall * 1000) {
		x->stalled = true;
		return 1;
	}
	progress_show(x, false);
	return 0;
}

static void set_field(char **slot, const char *v, size_t n)
{
	free(*slot);
	*slot = xstrndup(v, n);
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
	struct xfer *x = u;
	size_t len = size * n;

	x->tdata = sbx_now_ms();
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		/* a new response (after a redirect or a 100): only the last one's headers count */
		free(x->www_auth);
		free(x->content_type);
		x->www_auth = x->content_type = NULL;
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon)
		return len;
	size_t kn = (size_t)(colon - p);
	bool is_auth = kn == 16 && !strncasecmp(p, "WWW-Authenticate", kn);
	bool is_type = kn == 12 && !strncasecmp(p, "Content-Type", kn);
	if (!is_auth && !is_type)
		return len;
	/* the value, trimmed (curl's buffer is not NUL-terminated) */
	char *v = xstrndup(colon + 1, len - kn - 1);
	char *b = v + strspn(v, " \t"), *e = b + strlen(b);
	while (e > b && strchr(" \t\r\n", e[-1]))
		*--e = 0;
	if (is_type) {
		b[strcspn(b, "; \t")] = 0;
		set_field(&x->content_type, b, strlen(b));
	} else if (!x->www_auth ||
		   (strncasecmp(x->www_auth, "bearer", 6) && !strncasecmp(b, "bearer", 6))) {
		/* a Bearer challenge wins over a Basic one */
		set_field(&x->www_auth, b, strlen(b));
	}
	free(v);
	return len;
}

static CURLcode perform(struct sess *s, const char *url, struct curl_slist *hdrs, const char *post,
			struct xfer *x)
{
	cu.easy_reset(s->h);
	s->errbuf[0] = 0;
	(void)cu.easy_setopt(s->h, CURLOPT_URL, url);
	(void)cu.easy_setopt(s->h, CURLOPT_ERRORBUFFER, s->errbuf);
	(void)cu.easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
	(void)cu.easy_setopt(s->h, CURLOPT_USERAGENT, "sbx/" SBX_VERSION);
	(void)cu.easy_setopt(s->h, CURLOPT_CONNECTTIMEOUT, 10L);
	(void)cu.easy_setopt(s->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	(void)cu.easy_setopt(s->h, CURLOPT_LOW_SPEED_TIME, s->stall);
	(void)cu.easy_setopt(s->h, CURLOPT_FOLLOWLOCATION, 1L);
	(void)cu.easy_setopt(s->h, CURLOPT_MAXREDIRS, 5L);
	(void)cu.easy_setopt(s->h, CURLOPT_UNRESTRICTED_AUTH, 0L);
	if (sbx_curl_protocols(s->h, true) < 0)
		return CURLE_UNSUPPORTED_PROTOCOL;
	(void)cu.easy_setopt(s->h, CURLOPT_HTTPHEADER, hdrs);
	(void)cu.easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_write);
	(void)cu.easy_setopt(s->h, CURLOPT_WRITEDATA, x);
	(void)cu.easy_setopt(s->h, CURLOPT_HEADERFUNCTION, on_header);
	(void)cu.easy_setopt(s->h, CURLOPT_HEADERDATA, x);
	(void)cu.easy_setopt(s->h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
	(void)cu.easy_setopt(s->h, CURLOPT_XFERINFODATA, x);
	(void)cu.easy_setopt(s->h, CURLOPT_NOPROGRESS, 0L);
	x->stalled = false;
	x->tdata = sbx_now_ms();
	if (post)
		(void)cu.easy_setopt(s->h, CURLOPT_COPYPOSTFIELDS, post);
	if (sbx_debug_enabled) {
		(void)cu.easy_setopt(s->h, CURLOPT_DEBUGFUNCTION, sbx_curl_debug);
		(void)cu.easy_setopt(s->h, CURLOPT_VERBOSE, 1L);
	}
	return cu.easy_perform(s->h);
}

/* a transport failure in words, with what to do */
static int curl_failed(struct sess *s, struct xfer *x, CURLcode c, const char *url,
		       struct sbx_err *err)
{
	char *eff = NULL;
	(void)cu.easy_getinfo(s->h, CURLINFO_EFFECTIVE_URL, &eff);
	_cleanup_free_ char *host = sbx_url_host(eff ? eff : url);
	const char *why = s->errbuf[0] ? s->errbuf : cu.easy_strerror(c);

	if (x->too_big)
		return sbx_err_set(err, SBX_E_REMOTE, "%s is larger than %lld bytes%s", x->what,
				   x->limit, x->fd >= 0 ? ", the size its manifest gives" : "");
	if (x->write_errno) {
		errno = x->write_errno;
		return sbx_err_errno(err, "cannot save %s", x->what);
	}
	int r;
	if (x->stalled || (c == CURLE_OPERATION_TIMEDOUT && strstr(why, "too slow")))
		r = sbx_err_set(err, SBX_E_NETWORK,
				"the registry %s stalled: no data for %ld seconds "
				"while fetching %s (check the network, then pull again)",
				host, s->stall, x->what);
	else if (c == CURLE_OPERATION_TIMEDOUT)
		r = sbx_err_set(err, SBX_E_NETWORK, "cannot connect to %s: %s (check the network)",
				host, why);
	else if (c == CURLE_COULDNT_RESOLVE_HOST)
		r = sbx_err_set(err, SBX_E_NETWORK,
				"cannot resolve '%s' (check the registry name "
				"and the network)",
				host);
	else if (c == CURLE_COULDNT_CONNECT)
		r = sbx_err_set(err, SBX_E_NETWORK,
				"cannot connect to %s: %s (is the registry "
				"up?)",
				host, why);
	else if (sbx_curl_tls_error(c))
		r = sbx_err_set(err, SBX_E_NETWORK, "TLS failure talking to %s: %s%s", host, why,
				s->plain ? ""
					 : " (if the registry serves plain HTTP, pull with "
					   "--insecure)");
	else if (c == CURLE_TOO_MANY_REDIRECTS)
		r = sbx_err_set(err, SBX_E_REMOTE,
				"more than 5 redirects while fetching %s from %s", x->what, host);
	else if (c == CURLE_UNSUPPORTED_PROTOCOL)
		r = sbx_err_set(err, SBX_E_REMOTE,
				"the registry redirected %s to a URL that is not "
				"http or https",
				x->what);
	else
		r = sbx_err_set(err, SBX_E_NETWORK, "cannot fetch %s from %s: %s", x->what, host,
				why);
	return r;
}

/* " (CODE: message)" from a registry's {"errors": [...]} body, or "" */
static char *registry_message(const struct strbuf *b)
{
	struct sbx_err e = { 0 };
	_cleanup_json_ json_t *j = NULL;
	json_t *first;

	if (!b->len || !(j = sbx_registry_json_parse(b->buf, b->len, "error", &e)))
		return xstrdup("");
	first = json_array_get(json_object_get(j, "errors"), 0);
	const char *code = sbx_json_str(first, "code"), *msg = sbx_json_str(first, "message");
	if (!code && !msg)
		msg = sbx_json_str(j, "details") ?: sbx_json_str(j, "error");
	if (!code && !msg)
		return xstrdup("");
	char *m = xasprintf(" (%.40s%s%.200s)", code ? code : "", code && msg ? ": " : "",
			    msg ? msg : "");
	for (char *q = m; *q; q++)
		if ((unsigned char)*q < ' ' || *q == 0x7f)
			*q = '?';
	return m;
}

static int access_denied(struct sess *s, long status, const struct strbuf *body,
			 struct sbx_err *err)
{
	_cleanup_free_ char *m = registry_message(body);
	sbx_err_set(err, SBX_E_REMOTE,
		    "access denied to '%s'%s; the repository may not exist, or "
		    "needs credentials: run 'docker login %s' or set credentials in "
		    "~/.docker/config.json",
		    s->ref->repo, m, s->ref->registry);
	err->http_status = status;
	return -1;
}

static int load_creds(struct sess *s, struct sbx_err *err)
{
	if (s->creds_loaded)
		return 0;
	int r = sbx_registry_credentials(s->ref->registry, &s->creds, err);
	if (r < 0)
		return -1;
	s->have_creds = r;
	s->creds_loaded = true;
	return 0;
}

static char *basic_header(const struct sbx_registry_creds *c)
{
	_cleanup_free_ char *up = xasprintf("%s:%s", c->username, c->password ? c->password : "");
	_cleanup_free_ char *b = sbx_base64_encode(up, strlen(up));
	explicit_bzero(up, strlen(up));
	char *h = xasprintf("Authorization: Basic %s", b);
	explicit_bzero(b, strlen(b));
	return h;
}

static void set_auth(struct sess *s, char *h)
{
	sbx_registry_free_secret(s->auth);
	s->auth = h;
}

enum token_how {
	TOKEN_ANON,
	TOKEN_BASIC,
	TOKEN_OAUTH
};

/* one request to the token server: 0 and s->auth set, 1 when OAuth2 is not offered there (try
 * the basic credentials), -1 with err set */
static int token_request(struct sess *s, const struct sbx_challenge *c, const char *scope,
			 enum token_how how, struct sbx_err *err)
{
	const struct sbx_registry_creds *cr = &s->creds;
	struct strbuf url = STRBUF_INIT, form = STRBUF_INIT, body = STRBUF_INIT;
	struct strbuf *q = how == TOKEN_OAUTH ? &form : &url;
	struct curl_slist *hdrs = NULL;
	char *basic = NULL;
	int r = -1;

	strbuf_addstr(&url, c->realm);
	if (how != TOKEN_OAUTH)
		strbuf_addch(&url, strchr(c->realm, '?') ? '&' : '?');
	if (c->service) {
		strbuf_addstr(q, "service=");
		sbx_url_escape(q, c->service);
		strbuf_addch(q, '&');
	}
	strbuf_addstr(q, "scope=");
	sbx_url_escape(q, scope);
	if (how == TOKEN_OAUTH) {
		strbuf_addstr(q, "&grant_type=refresh_token&client_id=sbx&refresh_token=");
		sbx_url_escape(q, cr->identity_token);
	}
	if (how == TOKEN_BASIC)
		hdrs = cu.slist_append(hdrs, (basic = basic_header(cr)));

	struct xfer x = {
		.s = s, .what = "the token response", .mem = &body, .fd = -1, .limit = TOKEN_MAX
	};
	CURLcode cc = CURLE_OK;
	long status = 0;
	for (int attempt = 1;; attempt++) {
		strbuf_reset(&body);
		strbuf_reset(&x.ebody);
		x.got = 0;
		sbx_debug("token request to %s (%s)", c->realm,
			  how == TOKEN_OAUTH	       ? "refresh token"
				  : how == TOKEN_BASIC ? "basic credentials"
						       : "anonymous");
		cc = perform(s, url.buf, hdrs, how == TOKEN_OAUTH ? form.buf : NULL, &x);
		status = 0;
		if (cc == CURLE_OK)
			(void)cu.easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
		if (attempt == 3 || !(cc == CURLE_OK ? status >= 500 : sbx_curl_transient(cc)))
			break;
		struct timespec ts = { 0, 500000000L * attempt };
		nanosleep(&ts, NULL);
	}

	if (cc != CURLE_OK) {
		curl_failed(s, &x, cc, url.buf, err);
	} else if (how == TOKEN_OAUTH && (status == 404 || status == 405)) {
		r = 1;
	} else if (status == 401 || status == 403) {
		if (how == TOKEN_ANON) {
			access_denied(s, status, &x.ebody, err);
		} else {
			sbx_err_set(err, SBX_E_REMOTE,
				    "the registry refused the credentials for %s "
				    "(run 'docker login %s' again)",
				    s->ref->registry, s->ref->registry);
			err->http_status = status;
		}
	} else if (status < 200 || status >= 300) {
		_cleanup_free_ char *m = registry_message(&x.ebody);
		_cleanup_free_ char *h = sbx_url_host(c->realm);
		sbx_err_set(err, SBX_E_REMOTE, "the token server %s answered HTTP %ld%s", h, status,
			    m);
		err->http_status = status;
	} else {
		json_t *j = sbx_registry_json_parse(strbuf_str(&body), body.len,
						    "the token response", err);
		const char *tok = j ? sbx_json_str(j, "token") : NULL;
		if (!tok || !*tok)
			tok = j ? sbx_json_str(j, "access_token") : NULL;
		if (j && (!tok || !*tok)) {
			sbx_err_set(err, SBX_E_REMOTE, "the token server's answer has no token");
		} else if (j) {
			set_auth(s, xasprintf("Authorization: Bearer %s", tok));
			r = 0;
		}
		if (j)
			json_decref(j);
	}
	cu.slist_free_all(hdrs);
	sbx_registry_free_secret(basic);
	if (form.buf)
		explicit_bzero(form.buf, form.len);
	if (body.buf)
		explicit_bzero(body.buf, body.len);
	strbuf_release(&form);
	strbuf_release(&body);
	strbuf_release(&url);
	xfer_release(&x);
	return r;
}

/* the token endpoint of a Bearer challenge -> s->auth */
static int fetch_token(struct sess *s, const struct sbx_challenge *c, struct sbx_err *err)
{
	bool https = !strncasecmp(c->realm, "https://", 8);
	if (!https && strncasecmp(c->realm, "http://", 7))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "the registry's token realm '%s' is not an "
				   "http or https URL",
				   c->realm);
	if (!https && !s->plain && s->have_creds) {
		_cleanup_free_ char *h = sbx_url_host(c->realm);
		return sbx_err_set(err, SBX_E_REMOTE,
				   "the registry wants credentials sent to a "
				   "plain HTTP token server (%s); refusing (pull with --insecure "
				   "to allow it)",
				   h);
	}
	_cleanup_free_ char *own_scope = xasprintf("repository:%s:pull", s->ref->repo);
	const char *scope = c->scope ? c->scope : own_scope;
	const struct sbx_registry_creds *cr = &s->creds;
	bool basic = s->have_creds && cr->username && cr->password;

	if (s->have_creds && cr->identity_token) {
		int r = token_request(s, c, scope, TOKEN_OAUTH, err);
		if (r <= 0)
			return r;
		if (!basic) {
			_cleanup_free_ char *h = sbx_url_host(c->realm);
			return sbx_err_set(err, SBX_E_REMOTE,
					   "the token server %s does not take an "
					   "identity token (run 'docker login %s' with a password)",
					   h, s->ref->registry);
		}
	}
	return token_request(s, c, scope, basic ? TOKEN_BASIC : TOKEN_ANON, err);
}

/* answers a 401: Bearer -> a token, Basic -> the configured credentials */
static int authenticate(struct sess *s, const char *www_auth, const struct strbuf *ebody,
			struct sbx_err *err)
{
	struct sbx_challenge c = { 0 };
	int r;

	if (!www_auth || sbx_registry_parse_challenge(www_auth, &c) < 0) {
		sbx_debug("401 without a usable WWW-Authenticate: %s",
			  www_auth ? www_auth : "none");
		return access_denied(s, 401, ebody, err);
	}
	if (load_creds(s, err) < 0) {
		sbx_challenge_release(&c);
		return -1;
	}
	if (!strcasecmp(c.scheme, "basic")) {
		if (!s->have_creds || !s->creds.username) {
			r = access_denied(s, 401, ebody, err);
		} else {
			set_auth(s, basic_header(&s->creds));
			r = 0;
		}
	} else if (!strcasecmp(c.scheme, "bearer") && c.realm) {
		r = fetch_token(s, &c, err);
	} else {
		r = sbx_err_set(err, SBX_E_UNSUPPORTED,
				"the registry asks for '%s' authentication, "
				"which sbx does not speak",
				c.scheme);
	}
	sbx_challenge_release(&c);
	return r;
}

/* resets a transfer for another attempt */
static int xfer_restart(struct xfer *x, struct sbx_err *err)
{
	strbuf_reset(&x->ebody);
	x->got = 0;
	x->too_big = false;
	x->write_errno = 0;
	x->t0 = x->tlast = sbx_now_ms();
	if (x->mem)
		strbuf_reset(x->mem);
	if (x->fd >= 0) {
		if (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0)
			return sbx_err_errno(err, "cannot save %s", x->what);
		sbx_sha256_release(x->sha);
		if (sbx_sha256_init(x->sha, err) < 0)
			return -1;
	}
	return 0;
}

/* GET url with the session's auth, answering a 401 once and retrying 5xx: the final HTTP status
 * (2xx, or a 4xx other than 401/403 for the caller to word), or -1 with err set */
static long request(struct sess *s, const char *url, const char *accept, struct xfer *x,
		    struct sbx_err *err)
{
	bool authed = false;

	for (int attempt = 1;;) {
		if (xfer_restart(x, err) < 0)
			return -1;
		struct curl_slist *hdrs = NULL;
		if (accept)
			hdrs = cu.slist_append(hdrs, accept);
		if (s->auth)
			hdrs = cu.slist_append(hdrs, s->auth);
		sbx_debug("GET %s", url);
		CURLcode cc = perform(s, url, hdrs, NULL, x);
		cu.slist_free_all(hdrs);
		long status = 0;
		if (cc == CURLE_OK)
			(void)cu.easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
		bool retry = cc == CURLE_OK
			? status >= 500
			: sbx_curl_transient(cc) && !x->too_big && !x->write_errno;
		if (retry && attempt < 3) {
			sbx_debug("%s: %s; trying again", x->what,
				  cc == CURLE_OK ? "server error" : cu.easy_strerror(cc));
			struct timespec ts = { 0, 500000000L * attempt };
			nanosleep(&ts, NULL);
			attempt++;
			continue;
		}
		if (cc != CURLE_OK)
			return curl_failed(s, x, cc, url, err);
		if (status == 401 && !authed) {
			/* a first answer, or a token that expired meanwhile */
			if (authenticate(s, x->www_auth, &x->ebody, err) < 0)
				return -1;
			authed = true;
			continue;
		}
		if (status == 401 || status == 403)
			return access_denied(s, status, &x->ebody, err);
		if (status >= 500 || status == 429) {
			_cleanup_free_ char *m = registry_message(&x->ebody);
			sbx_err_set(err, SBX_E_REMOTE,
				    "the registry answered HTTP %ld%s while "
				    "fetching %s%s; try again later",
				    status, m, x->what, status >= 500 ? " (3 attempts)" : "");
			err->http_status = status;
			return -1;
		}
		return status;
	}
}

static int http_failed(struct xfer *x, long status, struct sbx_err *err)
{
	_cleanup_free_ char *m = registry_message(&x->ebody);
	sbx_err_set(err, SBX_E_REMOTE, "the registry answered HTTP %ld%s while fetching %s", status,
		    m, x->what);
	err->http_status = status;
	return -1;
}

/* --- the store -------------------------------------------------------------------------------- */

static char *blob_path(const struct sess *s, const char *digest)
{
	return xasprintf("%s/blobs/sha256/%s", s->images, digest + 7);
}

/* a fresh IMAGES/tmp/<hex>.<random>, open for writing */
static int tmp_open(const struct sess *s, const char *digest, char **ret_path, struct sbx_err *err)
{
	for (int i = 0; i < 10; i++) {
		unsigned char rnd[8];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			long long t = sbx_now_ms() ^ ((long long)getpid() << 20) ^ i;
			memcpy(rnd, &t, sizeof(rnd));
		}
		char *p = xasprintf("%s/tmp/%s.%02x%02x%02x%02x%02x%02x%02x%02x", s->images,
				    digest + 7, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
				    rnd[6], rnd[7]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*ret_path = p;
			return fd;
		}
		if (errno != EEXIST) {
			sbx_err_errno(err, "cannot create '%s'", p);
			free(p);
			return -1;
		}
		free(p);
	}
	return sbx_err_set(err, SBX_E_SYSTEM, "cannot create a temporary file in '%s/tmp'",
			   s->images);
}

/* fsync, close and rename a finished temporary file into place; removes it on failure */
static int tmp_commit(int fd, const char *tmp, const char *path, struct sbx_err *err)
{
	if (fsync(fd) < 0) {
		sbx_err_errno(err, "cannot save '%s'", path);
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		sbx_err_errno(err, "cannot save '%s'", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int store_bytes(const struct sess *s, const char *digest, const char *data, size_t n,
		       struct sbx_err *err)
{
	_cleanup_free_ char *path = blob_path(s, digest), *tmp = NULL;
	struct stat st;

	if (hold(s, digest, err) < 0)
		return -1;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == n)
		return 0;
	int fd = tmp_open(s, digest, &tmp, err);
	if (fd < 0)
		return -1;
	if (sbx_write_all(fd, data, n) < 0) {
		sbx_err_errno(err, "cannot write '%s'", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	return tmp_commit(fd, tmp, path, err);
}

/* one blob into the store, verified; already there (at the right size) counts as done */
static int fetch_blob(struct sess *s, const char *digest, long long size, bool progress,
		      struct sbx_err *err)
{
	_cleanup_free_ char *path = blob_path(s, digest), *tmp = NULL;
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	char label[13];
	struct stat st;

	snprintf(label, sizeof(label), "%.12s", digest + 7);
	if (hold(s, digest, err) < 0)
		return -1;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size) {
		if (progress)
			fprintf(stderr, "%s: already present\n", label);
		return 0;
	}
	int fd = tmp_open(s, digest, &tmp, err);
	if (fd < 0)
		return -1;
	struct sbx_sha256 sha = { 0 };
	struct xfer x = { .s = s,
			  .what = what,
			  .fd = fd,
			  .sha = &sha,
			  .limit = size,
			  .label = progress ? label : NULL };
	_cleanup_free_ char *url = xasprintf("%sblobs/%s", s->base, digest);
	long status = request(s, url, NULL, &x, err);
	int r = -1;
	char got[72];
	if (status < 0) {
		/* err is set */
	} else if (status == 404) {
		sbx_err_set(err, SBX_E_NOTFOUND,
			    "blob unknown: the registry lacks %s of '%s' "
			    "(push the image again)",
			    digest, s->ref->repo);
		err->http_status = 404;
	} else if (status < 200 || status >= 300) {
		http_failed(&x, status, err);
	} else if (x.got != size) {
		sbx_err_set(err, SBX_E_REMOTE,
			    "blob %s: the registry sent %lld bytes, the manifest "
			    "says %lld",
			    digest, x.got, size);
	} else {
		sbx_sha256_final(&sha, got);
		if (!streq(got, digest))
			sbx_err_set(err, SBX_E_REMOTE,
				    "blob verification failed: expected %s, "
				    "got %s (the registry or a proxy corrupted it; pull again)",
				    digest, got);
		else
			r = 0;
	}
	sbx_sha256_release(&sha);
	xfer_release(&x);
	if (r == 0)
		r = tmp_commit(fd, tmp, path, err);
	else {
		close(fd);
		unlink(tmp);
	}
	if (r < 0) {
		if (x.shown)
			fputc('\n', stderr); /* the error line goes below the progress */
		return -1;
	}
	if (progress) {
		fprintf(stderr, "\r%s: done\033[K\n", label);
		fflush(stderr);
	}
	return 0;
}

/* --- manifests -------------------------------------------------------------------------------- */

enum mkind {
	MK_MANIFEST,
	MK_INDEX,
	MK_SCHEMA1,
	MK_OTHER
};

static enum mkind classify(const json_t *j, const char *ctype, const char **ret_mt)
{
	const char *mt = sbx_json_str(j, "mediaType");
	if (!mt || !*mt)
		mt = ctype;
	*ret_mt = mt ? mt : "unknown";
	if (sbx_json_int(j, "schemaVersion", 2) == 1 ||
	    (mt && strstr(mt, "application/vnd.docker.distribution.manifest.v1")))
		return MK_SCHEMA1;
	if (mt && (streq(mt, MT_OCI_INDEX) || streq(mt, MT_DOCKER_LIST)))
		return MK_INDEX;
	if (mt && (streq(mt, MT_OCI_MANIFEST) || streq(mt, MT_DOCKER_MANIFEST)))
		return MK_MANIFEST;
	if (!mt || streq(mt, "application/json") || streq(mt, "application/octet-stream") ||
	    streq(mt, "text/plain")) {
		if (json_is_array(json_object_get(j, "manifests")))
			return MK_INDEX;
		if (json_is_array(json_object_get(j, "layers")) &&
		    json_is_object(json_object_get(j, "config")))
			return MK_MANIFEST;
	}
	return MK_OTHER;
}

static const char accept_all[] = "Accept: " MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST
				 ", " MT_DOCKER_MANIFEST;

/* GET manifests/REFERENCE, at most 4 MiB, its digest computed (and checked against WANT) */
static json_t *get_manifest(struct sess *s, const char *reference, const char *want,
			    char ret_digest[72], char **ret_ctype, struct strbuf *body,
			    struct sbx_err *err)
{
	char *url = xasprintf("%smanifests/%s", s->base, reference);
	struct xfer x = {
		.s = s, .what = "the manifest", .mem = body, .fd = -1, .limit = MANIFEST_MAX
	};
	json_t *j = NULL;

	long status = request(s, url, accept_all, &x, err);
	free(url);
	if (status < 0)
		goto out;
	if (status == 404) {
		bool by_digest = startswith(reference, "sha256:");
		sbx_err_set(err, SBX_E_NOTFOUND, "manifest unknown: %s/%s%s%s (check the name%s)",
			    s->ref->registry, s->ref->repo, by_digest ? "@" : ":", reference,
			    by_digest ? " and the digest" : " and the tag");
		err->http_status = 404;
		goto out;
	}
	if (status < 200 || status >= 300) {
		http_failed(&x, status, err);
		goto out;
	}
	if (sbx_sha256_buf(body->buf ? body->buf : "", body->len, ret_digest, err) < 0)
		goto out;
	if (want && !streq(ret_digest, want)) {
		sbx_err_set(err, SBX_E_REMOTE, "manifest verification failed: expected %s, got %s",
			    want, ret_digest);
		goto out;
	}
	if (!(j = sbx_registry_json_parse(strbuf_str(body), body->len, "the manifest", err)))
		goto out;
	if (!json_is_object(j)) {
		sbx_err_set(err, SBX_E_REMOTE, "the manifest is not a JSON object");
		json_decref(j);
		j = NULL;
		goto out;
	}
	*ret_ctype = x.content_type ? xstrdup(x.content_type) : NULL;
out:
	xfer_release(&x);
	return j;
}

/* the layers of an image manifest, checked */
static int manifest_layers(const json_t *m, struct sbx_pulled *p, struct sbx_err *err)
{
	json_t *ls = json_object_get(m, "layers"), *l;
	size_t i;

	if (!json_is_array(ls))
		return sbx_err_set(err, SBX_E_REMOTE, "the manifest has no layer list");
	p->layers = xcalloc(json_array_size(ls) + 1, sizeof(*p->layers));
	json_array_foreach (ls, i, l) {
		const char *d = sbx_json_str(l, "digest"), *mt = sbx_json_str(l, "mediaType");
		json_t *size = json_object_get(l, "size");
		if (!sbx_digest_valid(d))
			return sbx_err_set(err, SBX_E_REMOTE,
					   "layer %zu of the manifest has no valid "
					   "sha256 digest",
					   i + 1);
		if (!json_is_integer(size) || json_integer_value(size) < 0)
			return sbx_err_set(err, SBX_E_REMOTE, "layer %s has no valid size", d);
		if (!mt || !sbx_layer_media_type_known(mt))
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "layer %s has media type '%s', "
					   "which is not a container filesystem layer sbx can "
					   "unpack",
					   d, mt ? mt : "none");
		if (sbx_layer_is_foreign(mt) && json_array_size(json_object_get(l, "urls")) > 0)
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "layer %s is a foreign layer "
					   "fetched from outside the registry, which sbx does not "
					   "do (a Windows image?)",
					   d);
		p->layers[i].digest = xstrdup(d);
		p->layers[i].media_type = xstrdup(mt);
		p->layers[i].size = json_integer_value(size);
		p->n_layers = i + 1;
	}
	return 0;
}

/* the image manifest REF names (through up to two image indexes): parsed, its bytes stored */
static json_t *resolve_manifest(struct sess *s, const char *platform, char ret_digest[72],
				bool *ret_via_index, struct sbx_err *err)
{
	const struct sbx_ref *ref = s->ref;
	char *reference = xstrdup(ref->digest ? ref->digest : ref->tag);
	char *want = ref->digest ? xstrdup(ref->digest) : NULL;
	char *ctype = NULL;
	struct strbuf body = STRBUF_INIT;
	json_t *m = NULL;

	*ret_via_index = false;
	for (int level = 0;; level++) {
		const char *mt;
		strbuf_reset(&body);
		free(ctype);
		ctype = NULL;
		if (!(m = get_manifest(s, reference, want, ret_digest, &ctype, &body, err)))
			goto out;
		enum mkind k = classify(m, ctype, &mt);
		if (k == MK_MANIFEST)
			break;
		if (k == MK_SCHEMA1)
			sbx_err_set(err, SBX_E_UNSUPPORTED,
				    "the image uses Docker's deprecated "
				    "manifest schema 1, which sbx does not read (push it again "
				    "with a current docker or skopeo)");
		else if (k == MK_OTHER)
			sbx_err_set(err, SBX_E_UNSUPPORTED,
				    "not a container image (its manifest "
				    "is '%s')",
				    mt);
		else if (level >= INDEX_MAX_NESTING)
			sbx_err_set(err, SBX_E_REMOTE, "image indexes nest deeper than %d levels",
				    INDEX_MAX_NESTING);
		char *next = NULL;
		if (k != MK_INDEX || level >= INDEX_MAX_NESTING ||
		    sbx_registry_select_platform(m, platform, &next, NULL, err) < 0) {
			json_decref(m);
			m = NULL;
			goto out;
		}
		sbx_debug("index %s: %s is %s", ret_digest, platform, next);
		free(reference);
		free(want);
		reference = next;
		want = xstrdup(next);
		*ret_via_index = true;
		json_decref(m);
		m = NULL;
	}
	if (store_bytes(s, ret_digest, strbuf_str(&body), body.len, err) < 0) {
		json_decref(m);
		m = NULL;
	}
out:
	free(reference);
	free(want);
	free(ctype);
	strbuf_release(&body);
	return m;
}

static int pull(struct sess *s, const char *platform, bool platform_given, struct sbx_pulled *p,
		struct sbx_err *err)
{
	char digest[72];
	bool via_index;

	json_t *m = resolve_manifest(s, platform, digest, &via_index, err);
	if (!m)
		return -1;
	p->manifest_digest = xstrdup(digest);
	p->manifest = m;

	json_t *cfg = json_object_get(m, "config");
	const char *cd = sbx_json_str(cfg, "digest"), *cmt = sbx_json_str(cfg, "mediaType");
	json_t *csize = json_object_get(cfg, "size");
	if (!sbx_digest_valid(cd) || !json_is_integer(csize) || json_integer_value(csize) < 0)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "the manifest has no valid config digest and "
				   "size");
	if (cmt && !streq(cmt, MT_OCI_CONFIG) && !streq(cmt, MT_DOCKER_CONFIG))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "not a container image (its config is "
				   "'%s')",
				   cmt);
	if (json_integer_value(csize) > 64 << 20)
		return sbx_err_set(err, SBX_E_REMOTE, "the image config is larger than 64 MiB");
	if (manifest_layers(m, p, err) < 0)
		return -1;

	if (fetch_blob(s, cd, json_integer_value(csize), false, err) < 0)
		return -1;
	_cleanup_free_ char *cpath = blob_path(s, cd);
	size_t clen;
	_cleanup_free_ char *ctext = sbx_read_file(cpath, (size_t)json_integer_value(csize) + 1,
						   &clen);
	if (!ctext)
		return sbx_err_errno(err, "cannot read '%s'", cpath);
	if (!(p->config = sbx_registry_json_parse(ctext, clen, "the image config", err)))
		return -1;
	p->config_digest = xstrdup(cd);
	if (!json_is_object(p->config))
		return sbx_err_set(err, SBX_E_REMOTE, "the image config is not a JSON object");
	const char *os = sbx_json_str(p->config, "os");
	const char *arch = sbx_json_str(p->config, "architecture");
	struct sbx_platform want;
	if (!via_index && os && arch && sbx_platform_parse(platform, &want, err) == 0 &&
	    (!streq(os, want.os) || !streq(sbx_platform_norm_arch(arch), want.arch))) {
		if (platform_given)
			return sbx_err_set(err, SBX_E_NOTFOUND, "the image is for %s/%s, not %s",
					   os, arch, platform);
		_cleanup_free_ char *fam = sbx_ref_familiar(s->ref->name);
		sbx_warn("'%s' is an image for %s/%s, not %s: its programs may not run here", fam,
			 os, arch, platform);
	}

	for (size_t i = 0; i < p->n_layers; i++) {
		if (fetch_blob(s, p->layers[i].digest, p->layers[i].size, s->progress, err) < 0)
			return -1;
		if (s->o && s->o->fetched &&
		    s->o->fetched(s->o->hold_arg, i, p->n_layers, p->layers[i].digest, err) < 0)
			return -1;
	}
	return 0;
}

/* 127.0.0.0/8, ::1 and localhost: the registries that speak plain HTTP unasked */
static bool loopback_host(const char *hostport)
{
	_cleanup_free_ char *h = NULL;

	if (hostport[0] == '[')
		h = xstrndup(hostport + 1, strcspn(hostport + 1, "]"));
	else
		h = xstrndup(hostport, strcspn(hostport, ":"));
	return !strcasecmp(h, "localhost") || streq(h, "::1") || startswith(h, "127.");
}

int sbx_registry_pull(const struct sbx_ref *ref, const struct sbx_pull_opts *o,
		      const char *images_dir, struct sbx_pulled *ret, struct sbx_err *err)
{
	_cleanup_free_ char *fam = sbx_ref_familiar(ref->name);
	const char *platform = o && o->platform ? o->platform : "linux/amd64";
	struct sbx_platform pf;
	struct sbx_pulled p = { 0 };
	int r = -1;

	if (sbx_platform_parse(platform, &pf, err) < 0 || sbx_curl_load(err) < 0)
		return sbx_err_prefix(err, "cannot pull '%s'", fam);
	_cleanup_free_ char *bdir = xasprintf("%s/blobs/sha256", images_dir);
	_cleanup_free_ char *tdir = xasprintf("%s/tmp", images_dir);
	if (sbx_mkdir_p(bdir, 0700) < 0)
		return sbx_err_errno(err, "cannot pull '%s': cannot create '%s'", fam, bdir);
	if (sbx_mkdir_p(tdir, 0700) < 0)
		return sbx_err_errno(err, "cannot pull '%s': cannot create '%s'", fam, tdir);

	struct sess s = {
		.ref = ref,
		.images = images_dir,
		.plain = (o && o->insecure) || loopback_host(ref->host),
		.stall = o && o->stall_timeout_s > 0 ? o->stall_timeout_s : 30,
		.progress = o && o->progress,
		.o = o,
	};
	s.base = xasprintf("%s://%s/v2/%s/", s.plain ? "http" : "https", ref->host, ref->repo);
	if (!(s.h = cu.easy_init())) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot start a libcurl transfer");
	} else {
		sbx_debug("pulling %s from %s for %s", ref->name, s.base, platform);
		r = pull(&s, platform, o && o->platform, &p, err);
		cu.easy_cleanup(s.h);
	}
	free(s.base);
	sbx_registry_free_secret(s.auth);
	sbx_registry_creds_release(&s.creds);
	if (r < 0) {
		sbx_pulled_release(&p);
		return sbx_err_prefix(err, "cannot pull '%s'", fam);
	}
	*ret = p;
	return 0;
}

void sbx_pulled_release(struct sbx_pulled *p)
{
	free(p->manifest_digest);
	free(p->config_digest);
	if (p->manifest)
		json_decref(p->manifest);
	if (p->config)
		json_decref(p->config);
	for (size_t i = 0; i < p->n_layers; i++) {
		free(p->layers[i].digest);
		free(p->layers[i].media_type);
	}
	free(p->layers);
	memset(p, 0, sizeof(*p));
}
