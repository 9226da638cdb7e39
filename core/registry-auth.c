/* Registry authentication: docker's credentials, Basic, and Bearer tokens from a token server. */
#define _GNU_SOURCE
#include "core/registry-int.h"

#include <strings.h>
#include <time.h>

#include "core/json.h"
#include "core/log.h"
#include "core/util.h"

#define TOKEN_MAX (1 << 20)

char *reg_message(const struct strbuf *b)
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

int reg_access_denied(struct reg_sess *s, long status, const struct strbuf *body,
		      struct sbx_err *err)
{
	_cleanup_free_ char *m = reg_message(body);
	sbx_err_set(err, SBX_E_REMOTE,
		    "access denied to '%s'%s; the repository may not exist, or "
		    "needs credentials: run 'docker login %s' or set credentials in "
		    "~/.docker/config.json",
		    s->ref->repo, m, s->ref->registry);
	err->http_status = status;
	return -1;
}

static int load_creds(struct reg_sess *s, struct sbx_err *err)
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

static void set_auth(struct reg_sess *s, char *h)
{
	sbx_registry_free_secret(s->auth);
	s->auth = h;
}

enum token_how {
	TOKEN_ANON,
	TOKEN_BASIC,
	TOKEN_OAUTH
};

/* the token out of a token server's 2xx answer -> s->auth */
static int take_token(struct reg_sess *s, const struct strbuf *body, struct sbx_err *err)
{
	_cleanup_json_ json_t *j = sbx_registry_json_parse(strbuf_str(body), body->len,
							   "the token response", err);
	if (!j)
		return -1;
	const char *tok = sbx_json_str(j, "token");
	if (!tok || !*tok)
		tok = sbx_json_str(j, "access_token");
	if (!tok || !*tok)
		return sbx_err_set(err, SBX_E_REMOTE, "the token server's answer has no token");
	set_auth(s, xasprintf("Authorization: Bearer %s", tok));
	return 0;
}

/* one request to the token server: 0 and s->auth set, 1 when OAuth2 is not offered there (try
 * the basic credentials), -1 with err set */
static int token_request(struct reg_sess *s, const struct sbx_challenge *c, const char *scope,
			 enum token_how how, struct sbx_err *err)
{
	const struct sbx_registry_creds *cr = &s->creds;
	struct strbuf url = STRBUF_INIT, form = STRBUF_INIT;
	struct strbuf *q = how == TOKEN_OAUTH ? &form : &url;
	struct sbx_http_resp resp = { 0 };
	const char *hdrs[2] = { NULL, NULL };
	char *basic = NULL;
	int r = -1, pr = 0;

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
		hdrs[0] = basic = basic_header(cr);

	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	req.url = url.buf;
	req.headers = hdrs;
	req.session = &s->http;
	req.follow = true;
	req.insecure = s->plain;
	req.stall_s = s->stall;
	req.max_body = TOKEN_MAX;
	req.fetching = "the token response";
	if (how == TOKEN_OAUTH) {
		req.body = form.buf;
		req.body_len = form.len;
	}
	for (int attempt = 1;; attempt++) {
		sbx_debug("token request to %s (%s)", c->realm,
			  how == TOKEN_OAUTH	       ? "refresh token"
				  : how == TOKEN_BASIC ? "basic credentials"
						       : "anonymous");
		if (resp.body.buf)
			explicit_bzero(resp.body.buf, resp.body.len);
		sbx_http_resp_release(&resp);
		pr = sbx_http_perform(&req, &resp, "token server", err);
		if (attempt == 3 || !(pr == 0 ? resp.status >= 500 : resp.transient))
			break;
		struct timespec ts = { 0, 500000000L * attempt };
		nanosleep(&ts, NULL);
	}

	long status = resp.status;
	if (pr < 0) {
		/* err is set */
	} else if (how == TOKEN_OAUTH && (status == 404 || status == 405)) {
		r = 1;
	} else if (status == 401 || status == 403) {
		if (how == TOKEN_ANON) {
			reg_access_denied(s, status, &resp.body, err);
		} else {
			sbx_err_set(err, SBX_E_REMOTE,
				    "the registry refused the credentials for %s "
				    "(run 'docker login %s' again)",
				    s->ref->registry, s->ref->registry);
			err->http_status = status;
		}
	} else if (status < 200 || status >= 300) {
		_cleanup_free_ char *m = reg_message(&resp.body);
		_cleanup_free_ char *h = sbx_url_host(c->realm);
		sbx_err_set(err, SBX_E_REMOTE, "the token server %s answered HTTP %ld%s", h, status,
			    m);
		err->http_status = status;
	} else {
		r = take_token(s, &resp.body, err);
	}
	sbx_registry_free_secret(basic);
	if (form.buf)
		explicit_bzero(form.buf, form.len);
	if (resp.body.buf)
		explicit_bzero(resp.body.buf, resp.body.len);
	strbuf_release(&form);
	strbuf_release(&url);
	sbx_http_resp_release(&resp);
	return r;
}

/* the token endpoint of a Bearer challenge -> s->auth */
static int fetch_token(struct reg_sess *s, const struct sbx_challenge *c, struct sbx_err *err)
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

/* the response's WWW-Authenticate challenge: the first one, a Bearer one over a Basic one */
static const char *challenge_header(const struct sbx_http_resp *r)
{
	const char *pick = NULL;
	size_t i;
	json_t *h;

	json_array_foreach (r->header_list, i, h) {
		const char *v = json_string_value(json_array_get(h, 1));
		if (!v || !streq(json_string_value(json_array_get(h, 0)), "www-authenticate"))
			continue;
		if (!pick || (strncasecmp(pick, "bearer", 6) && !strncasecmp(v, "bearer", 6)))
			pick = v;
	}
	return pick;
}

int reg_authenticate(struct reg_sess *s, const struct sbx_http_resp *resp, struct sbx_err *err)
{
	const char *www_auth = challenge_header(resp);
	struct sbx_challenge c = { 0 };
	int r;

	if (!www_auth || sbx_registry_parse_challenge(www_auth, &c) < 0) {
		sbx_debug("401 without a usable WWW-Authenticate: %s",
			  www_auth ? www_auth : "none");
		return reg_access_denied(s, 401, &resp->body, err);
	}
	if (load_creds(s, err) < 0) {
		sbx_challenge_release(&c);
		return -1;
	}
	if (!strcasecmp(c.scheme, "basic")) {
		if (!s->have_creds || !s->creds.username) {
			r = reg_access_denied(s, 401, &resp->body, err);
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
