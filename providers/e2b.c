/* The E2B provider: the REST control plane (sandboxes, pause, connect) and the in-sandbox envd
 * daemon (Connect server-streaming process.Process/Start with JSON envelopes, /files). */
#define _GNU_SOURCE
#include "providers/remote-decode.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>

#include "core/log.h"

#define ENVD_PORT "49983"
#define FRAME_MAX (16u << 20)
#define DEFAULT_TIMEOUT_S 3600 /* without --ttl: an hour, then paused (not killed) */
#define CONTROL_TIMEOUT_MS 30000
#define CREATE_TIMEOUT_MS 120000

static const char *const api_vars[] = { "SBX_E2B_API_URL", "E2B_API_URL", NULL };
static const char *const envd_vars[] = { "SBX_E2B_SANDBOX_URL", "E2B_SANDBOX_URL", NULL };

static char *e2b_api_url(void)
{
	const char *u = remote_env(api_vars), *d = getenv("E2B_DOMAIN");
	return u ? xstrdup(u) : xasprintf("https://api.%s", d && *d ? d : "e2b.app");
}

static int e2b_remote(struct remote *r, struct sbx_err *err)
{
	_cleanup_free_ char *url = e2b_api_url();
	return remote_init(r, "E2B", "E2B_API_KEY", NULL, url, "X-API-Key: ", err);
}

static const char *secret(const struct sbx_record *rec, const char *key)
{
	return sbx_json_str(json_object_get(rec->extra, "secret"), key);
}

/* --- the state E2B reports ------------------------------------------------------------------ */

static enum sbx_state state_of(const char *s)
{
	if (!s)
		return SBX_STATE_UNKNOWN;
	if (streq(s, "running"))
		return SBX_STATE_RUNNING;
	if (streq(s, "paused") || streq(s, "pausing"))
		return SBX_STATE_PAUSED;
	return SBX_STATE_UNKNOWN;
}

/* a domain the URLs of envd and of previews end in (printed by preview): letters, digits, '-',
 * '.' and a ':' port, nothing that could end the host part of a URL or drive a terminal */
static bool host_name_ok(const char *s)
{
	if (!*s || strlen(s) > 253)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' || *s == ':'))
			return false;
	return true;
}

/* keeps what create/connect hand back: tokens (secret), domain, envd version */
static void keep_sandbox(struct sbx_record *rec, const json_t *j)
{
	json_t *extra = rec->extra ? rec->extra : json_object();
	json_t *sec = json_object_get(extra, "secret");

	if (!sec) {
		sec = json_object();
		json_object_set_new(extra, "secret", sec);
	}
	const char *v;
	if ((v = sbx_json_str(j, "envdAccessToken")))
		json_object_set_new(sec, "envd_access_token", json_string(v));
	if ((v = sbx_json_str(j, "trafficAccessToken")))
		json_object_set_new(sec, "traffic_access_token", json_string(v));
	if ((v = sbx_json_str(j, "domain")) && host_name_ok(v))
		json_object_set_new(extra, "domain", json_string(v));
	if ((v = sbx_json_str(j, "envdVersion")))
		json_object_set_new(extra, "envd_version", json_string(v));
	rec->extra = extra;
}

static bool id_valid(const char *s)
{
	if (!s || !*s || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static int e2b_create(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *body = NULL, *resp = NULL;
	const struct sbx_config *o = &rec->config;
	const char *tpl = o->image.ref ? o->image.ref : "base";

	if (e2b_remote(&r, err) < 0)
		return -1;
	long long timeout = o->ttl_ms ? (o->ttl_ms + 999) / 1000 : DEFAULT_TIMEOUT_S;
	bool auto_pause = !o->ttl_rm;
	body = json_pack("{s:s, s:I, s:b, s:b, s:o, s:o}", "templateID", tpl, "timeout", timeout,
			 "autoPause", auto_pause, "secure", 1, "metadata", remote_labels(rec),
			 "envVars", remote_env_object(o->env));
	if (o->net.set && o->net.mode == SBX_NET_NONE)
		json_object_set_new(body, "allow_internet_access", json_false());
	else if (o->net.set && o->net.mode == SBX_NET_OPEN)
		json_object_set_new(body, "allow_internet_access", json_true());
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", NULL, "");
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "create an E2B sandbox" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	const char *id = sbx_json_str(resp, "sandboxID");
	if (!id_valid(id))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot create an E2B sandbox: E2B's answer "
				   "has no valid 'sandboxID'");
	rec->provider_id = xstrdup(id);
	rec->extra = json_pack("{s:s, s:I, s:b}", "template", tpl, "timeout", timeout, "auto_pause",
			       auto_pause);
	keep_sandbox(rec, resp);
	sbx_debug("E2B sandbox %s from template %s", id, tpl);
	return 0;
}

static int e2b_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *resp = NULL;
	static const long accept[] = { 404, 0 };

	if (rec->state == SBX_STATE_CREATING && !rec->provider_id)
		return 0; /* the core decides whether its creator is still at work */
	if (remote_need_id("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "");
	struct remote_call c = { .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .accept = accept,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "look up the E2B sandbox" };
	long st = remote_do(&r, &c, &resp, NULL, err);
	if (st < 0)
		return -1;
	if (st == 404) {
		rec->state = SBX_STATE_MISSING;
		return 0;
	}
	rec->state = state_of(sbx_json_str(resp, "state"));
	json_t *live = json_object();
	json_t *remote = json_object();
	static const char *const keep[] = { "state",	   "templateID", "alias",    "startedAt",
					    "endAt",	   "cpuCount",	 "memoryMB", "diskSizeMB",
					    "envdVersion", "domain" };
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		json_t *v = json_object_get(resp, keep[i]);
		if (v && !json_is_null(v))
			json_object_set(remote, keep[i], v);
	}
	json_object_set_new(live, "remote", remote);
	json_decref(rec->live);
	rec->live = live;
	return 0;
}

static int e2b_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_free_ char *next = NULL;
	json_t *all = json_object();

	if (e2b_remote(&r, err) < 0) {
		json_decref(all);
		return -1;
	}
	for (int page = 0; page < 1000; page++) {
		struct strbuf u = STRBUF_INIT;
		strbuf_addf(&u, "%s/v2/sandboxes?state=running,paused", r.api);
		if (next) {
			strbuf_addstr(&u, "&nextToken=");
			sbx_url_escape(&u, next);
		}
		_cleanup_json_ json_t *resp = NULL;
		free(TAKE_PTR(next));
		struct remote_call c = { .url = u.buf,
					 .flags = REMOTE_IDEMPOTENT,
					 .timeout_ms = 5000,
					 .what = "list E2B sandboxes" };
		long st = remote_do(&r, &c, &resp, &next, err);
		strbuf_release(&u);
		if (st < 0) {
			json_decref(all);
			return -1;
		}
		if (!json_is_array(resp)) {
			json_decref(all);
			return sbx_err_set(err, SBX_E_REMOTE,
					   "cannot list E2B sandboxes: the answer "
					   "is not a list");
		}
		size_t i;
		json_t *v;
		json_array_foreach (resp, i, v) {
			const char *id = sbx_json_str(v, "sandboxID");
			if (id)
				json_object_set_new(
					all, id, json_integer(state_of(sbx_json_str(v, "state"))));
		}
		if (!next)
			break;
	}
	*ret = all;
	return 0;
}

static int e2b_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	static const long accept[] = { 404, 0 };

	if (!rec->provider_id)
		return 0; /* never made at E2B */
	if (e2b_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "");
	struct remote_call c = { .method = "DELETE",
				 .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .accept = accept,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "remove the E2B sandbox" };
	return remote_do(&r, &c, NULL, NULL, err) < 0 ? -1 : 0;
}

static int e2b_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
		     struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	static const long accept[] = { 409, 0 };

	if (remote_need_id("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	if (rec->state != SBX_STATE_RUNNING)
		return 0; /* E2B pauses only a running sandbox: paused is as released as it gets */
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "/pause");
	_cleanup_json_ json_t *body = json_pack("{s:b}", "memory", !o->release);
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .accept = accept,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "pause the E2B sandbox" };
	long st = remote_do(&r, &c, NULL, NULL, err);
	if (st < 0)
		return -1;
	if (st == 409) {
		/* already paused, or on its way: look */
		if (e2b_inspect(ctx, rec, err) < 0)
			return -1;
		if (rec->state != SBX_STATE_PAUSED)
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot pause '%s': E2B says it is in "
					   "transition; try again",
					   remote_label(rec));
	}
	rec->state = o->release ? SBX_STATE_RELEASED : SBX_STATE_PAUSED;
	return 0;
}

static int e2b_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	if (remote_need_id("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	long long timeout = sbx_json_int(rec->extra, "timeout", DEFAULT_TIMEOUT_S);
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "/connect");
	_cleanup_json_ json_t *body = json_pack("{s:I}", "timeout", timeout);
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "resume the E2B sandbox" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	if (resp)
		keep_sandbox(rec, resp);
	rec->state = SBX_STATE_RUNNING;
	return 0;
}

static int e2b_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		       const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	int pre = remote_preview_start("e2b", "E2B", rec, o, ret, err);
	if (pre != 0)
		return pre < 0 ? -1 : 0;
	const char *domain = sbx_json_str(rec->extra, "domain");
	const char *tok = secret(rec, "traffic_access_token");
	json_t *p = json_pack("{s:i, s:b}", "port", o->port, "public", tok == NULL);
	_cleanup_free_ char *url = xasprintf("https://%d-%s.%s", o->port, rec->provider_id,
					     domain && *domain ? domain : "e2b.app");
	json_object_set_new(p, "url", json_string(url));
	if (tok) {
		json_object_set_new(p, "token", json_string(tok));
		json_object_set_new(p, "token_header", json_string("e2b-traffic-access-token"));
	}
	*ret = p;
	return 0;
}

/* --- envd: the Connect stream of a command ---------------------------------------------------- */

/* where a command's output goes: a file descriptor, or a buffer */
struct sink {
	int fd;
	struct strbuf *buf;
	bool gone; /* its reader went away (EPIPE) */
};

struct run {
	const struct sbx_record *rec;
	struct sink out, err;
	struct strbuf pending; /* bytes of an incomplete frame */
	bool started, ended, eos;
	bool detach; /* -d: done once the process started */
	long pid;
	bool exited;
	long exit_code;
	char *status;	 /* "exit status 1", "signal: killed" */
	char *end_error; /* end.error */
	char *eos_code, *eos_msg;
	char *bad; /* a malformed frame, in words */
	/* -i: a child feeds standard input once the pid is known */
	bool feed_stdin;
	pid_t feeder;
	const char *user;
	struct sbx_err *ferr;
};

static void sink_write(struct sink *s, const void *p, size_t n)
{
	if (s->buf)
		strbuf_add(s->buf, p, n);
	else if (s->fd >= 0 && !s->gone && sbx_write_all(s->fd, p, n) < 0 && errno == EPIPE)
		s->gone = true;
}

static _printf_(2, 3) void set_bad(struct run *x, const char *fmt, ...)
{
	va_list ap;

	if (x->bad)
		return;
	va_start(ap, fmt);
	if (vasprintf(&x->bad, fmt, ap) < 0)
		x->bad = NULL;
	va_end(ap);
}

static char *envd_url(const struct sbx_record *rec, const char *path)
{
	const char *base = remote_env(envd_vars);
	if (base) {
		size_t n = strlen(base);
		while (n && base[n - 1] == '/')
			n--;
		return xasprintf("%.*s%s", (int)n, base, path);
	}
	const char *domain = sbx_json_str(rec->extra, "domain");
	return xasprintf("https://" ENVD_PORT "-%s.%s%s", rec->provider_id,
			 domain && *domain ? domain : "e2b.app", path);
}

/* the headers of an envd request: the sandbox, its access token, the user, then more */
struct envd_hdrs {
	const char *h[12]; /* NULL-terminated */
	size_t n;
	char *id, *tok, *user; /* owned: the lines built here (tok is a secret) */
};

static void envd_hdrs_add(struct envd_hdrs *e, const char *line)
{
	assert(e->n < ARRAY_SIZE(e->h) - 1);
	e->h[e->n++] = line;
	e->h[e->n] = NULL;
}

static void envd_hdrs_init(struct envd_hdrs *e, const struct sbx_record *rec, const char *user)
{
	const char *tok = secret(rec, "envd_access_token");

	e->id = xasprintf("E2b-Sandbox-Id: %s", rec->provider_id);
	envd_hdrs_add(e, e->id);
	envd_hdrs_add(e, "E2b-Sandbox-Port: " ENVD_PORT);
	if (tok)
		envd_hdrs_add(e, (e->tok = xasprintf("X-Access-Token: %s", tok)));
	if (user) {
		_cleanup_free_ char *up = xasprintf("%s:", user);
		_cleanup_free_ char *b = sbx_base64_encode(up, strlen(up));
		envd_hdrs_add(e, (e->user = xasprintf("Authorization: Basic %s", b)));
	}
}

static void envd_hdrs_release(struct envd_hdrs *e)
{
	if (e->tok)
		explicit_bzero(e->tok, strlen(e->tok));
	free(e->id);
	free(e->tok);
	free(e->user);
	e->id = e->tok = e->user = NULL;
}

/* an envd answer that is not 2xx, in one line */
static int envd_failed(const struct sbx_record *rec, const char *what, long status,
		       const struct strbuf *body, struct sbx_err *err)
{
	_cleanup_free_ char *m = remote_error_message(body);
	const char *l = remote_label(rec);
	int r;

	if (status == 401 || status == 403)
		r = sbx_err_set(err, SBX_E_CONFIG,
				"cannot %s: E2B refused the sandbox's access "
				"token (HTTP %ld%s%s)",
				what, status, *m ? ": " : "", m);
	else if (status == 409 || status == 502 || status == 503 || status == 404 || status == 410)
		r = sbx_err_set(err, SBX_E_STATE,
				"cannot %s: sandbox '%s' does not answer at E2B "
				"(HTTP %ld%s%s); it may be paused ('sbx resume %s') or gone ('sbx "
				"inspect %s')",
				what, l, status, *m ? ": " : "", m, l, l);
	else if (status == 429)
		r = sbx_err_set(err, SBX_E_REMOTE,
				"cannot %s: E2B is rate limiting requests (HTTP "
				"429%s%s); try again later",
				what, *m ? ": " : "", m);
	else
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: E2B answered HTTP %ld%s%s", what,
				status, *m ? ": " : "", m);
	err->http_status = status;
	return r;
}

/* one unary Connect call to envd (JSON codec); 0 or -1 */
static int envd_unary(const struct sbx_record *rec, const char *method, json_t *msg,
		      const char *user, long long timeout_ms, const char *what, struct sbx_err *err)
{
	_cleanup_free_ char *url = envd_url(rec, method);
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, user);
	envd_hdrs_add(&eh, "Content-Type: application/json");
	envd_hdrs_add(&eh, "Connect-Protocol-Version: 1");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body = body;
	q.body_len = strlen(body);
	q.timeout_ms = timeout_ms;
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (r == 0 && (resp.status < 200 || resp.status >= 300))
		r = envd_failed(rec, what, resp.status, &resp.body, err);
	sbx_http_resp_release(&resp);
	return r;
}

/* -i: a child that sends what arrives on standard input to the process, then closes it */
static _noreturn_ void feed_stdin(const struct sbx_record *rec, long pid, const char *user)
{
	char buf[49152];
	struct sbx_err e = { 0 };

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		_cleanup_free_ char *b = sbx_base64_encode(buf, (size_t)n);
		_cleanup_json_ json_t *m = json_pack("{s:{s:I}, s:{s:s}}", "process", "pid",
						     (json_int_t)pid, "input", "stdin", b);
		if (envd_unary(rec, "/process.Process/SendInput", m, user, 30000,
			       "send standard input", &e) < 0) {
			sbx_debug("stdin: %s", e.msg);
			_exit(1);
		}
	}
	_cleanup_json_ json_t *m = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
	(void)envd_unary(rec, "/process.Process/CloseStdin", m, user, 30000, "close standard input",
			 &e);
	_exit(0);
}

static void on_event(struct run *x, json_t *ev)
{
	json_t *v;

	if ((v = json_object_get(ev, "start"))) {
		x->started = true;
		json_t *pid = json_object_get(v, "pid");
		x->pid = json_is_integer(pid) ? (long)json_integer_value(pid) : 0;
		if (x->detach)
			return;
		if (x->feed_stdin && !x->feeder && x->pid > 0) {
			fflush(NULL);
			pid_t c = fork();
			if (c == 0)
				feed_stdin(x->rec, x->pid, x->user);
			x->feeder = c > 0 ? c : 0;
		}
	} else if ((v = json_object_get(ev, "data"))) {
		const char *which[] = { "stdout", "stderr", "pty" };
		for (size_t i = 0; i < ARRAY_SIZE(which); i++) {
			const char *b = sbx_json_str(v, which[i]);
			if (!b)
				continue;
			size_t n;
			_cleanup_free_ char *d = sbx_base64_decode(b, &n);
			if (!d) {
				set_bad(x, "E2B sent %s data that is not base64", which[i]);
				return;
			}
			sink_write(i == 1 ? &x->err : &x->out, d, n);
		}
		if (x->out.gone)
			set_bad(x, "standard output went away");
	} else if ((v = json_object_get(ev, "end"))) {
		x->ended = true;
		json_t *code = json_object_get(v, "exitCode");
		x->exit_code = json_is_integer(code) ? (long)json_integer_value(code) : 0;
		x->exited = json_is_true(json_object_get(v, "exited"));
		free(x->status);
		x->status = sbx_json_str(v, "status") ? xstrdup(sbx_json_str(v, "status")) : NULL;
		free(x->end_error);
		x->end_error = sbx_json_str(v, "error") ? xstrdup(sbx_json_str(v, "error")) : NULL;
	}
	/* keepalive and anything newer: nothing to do */
}

static void on_frame(struct run *x, unsigned flags, const char *p, size_t n)
{
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(p, n, 0, &je);

	if (!j || !json_is_object(j)) {
		set_bad(x, "E2B sent a malformed frame (%s)", j ? "not an object" : je.text);
		return;
	}
	if (flags & 2) {
		x->eos = true;
		json_t *e = json_object_get(j, "error");
		if (e) {
			const char *c = sbx_json_str(e, "code"), *m = sbx_json_str(e, "message");
			x->eos_code = xstrdup(c ? c : "unknown");
			x->eos_msg = xstrdup(m ? m : "");
		}
		return;
	}
	if (flags & 1) {
		set_bad(x, "E2B sent a compressed frame, which was not asked for");
		return;
	}
	json_t *ev = json_object_get(j, "event");
	if (ev)
		on_event(x, ev);
}

static bool on_stream(const char *p, size_t n, void *arg)
{
	struct run *x = arg;

	strbuf_add(&x->pending, p, n);
	size_t off = 0;
	while (!x->bad && x->pending.len - off >= 5) {
		const unsigned char *h = (const unsigned char *)x->pending.buf + off;
		uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 |
			h[4];
		if (len > FRAME_MAX) {
			set_bad(x, "E2B sent a frame of %u bytes", len);
			break;
		}
		if (x->pending.len - off - 5 < len)
			break;
		on_frame(x, h[0], x->pending.buf + off + 5, len);
		off += 5 + len;
		if (x->detach && x->started)
			return false; /* envd keeps the process when the stream closes */
	}
	if (off) {
		memmove(x->pending.buf, x->pending.buf + off, x->pending.len - off);
		x->pending.len -= off;
	}
	return !x->bad;
}

static int signal_number(const char *name)
{
	for (int s = 1; s < 65; s++) {
		const char *d = strsignal(s);
		if (d && !strncasecmp(d, name, strlen(d)) &&
		    (!name[strlen(d)] || name[strlen(d)] == ' '))
			return s;
	}
	return 0;
}

struct cmd {
	char *const *argv;
	const char *const *env; /* "K=V" */
	const char *cwd;
	const char *user;
	long long timeout_ms;
	bool stdin_open;
	bool detach;
	long *ret_pid;
	bool foreground; /* the user's command: signals and a closed stdout end it */
};

static void run_release(struct run *x)
{
	strbuf_release(&x->pending);
	free(x->status);
	free(x->end_error);
	free(x->eos_code);
	free(x->eos_msg);
	free(x->bad);
}

/* what a decoded stream says of the command: 0 and *ret_status, or -1 with err */
static int run_outcome(const struct run *x, const struct cmd *cmd, const char *l, int *ret_status,
		       struct sbx_err *err)
{
	if (x->bad)
		return sbx_err_set(err, SBX_E_REMOTE, "cannot run '%s' in sandbox '%s': %s",
				   cmd->argv[0], l, x->bad);
	if (cmd->detach && x->started) {
		if (cmd->ret_pid)
			*cmd->ret_pid = x->pid;
		*ret_status = 0;
		return 0;
	}
	if (x->eos_code && streq(x->eos_code, "deadline_exceeded") && cmd->timeout_ms > 0) {
		*ret_status = SBX_EXIT_TIMEOUT;
		return 0;
	}
	if (x->eos_code && !x->ended) {
		const char *m = x->eos_msg;
		if (strstr(m, "executable file not found") ||
		    strstr(m, "no such file or directory"))
			return sbx_err_set(err, SBX_E_CMD_NOTFOUND,
					   "'%s': command not found in "
					   "sandbox '%s'",
					   cmd->argv[0], l);
		if (strstr(m, "permission denied"))
			return sbx_err_set(err, SBX_E_CMD_NOEXEC,
					   "'%s': cannot execute in sandbox "
					   "'%s': permission denied",
					   cmd->argv[0], l);
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B says "
				   "%s: %.200s",
				   cmd->argv[0], l, x->eos_code, m);
	}
	if (!x->ended || !x->eos)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B's stream "
				   "ended before the command did",
				   cmd->argv[0], l);
	if (x->exited) {
		*ret_status = (int)(x->exit_code & 0xff);
	} else if (x->status && startswith(x->status, "signal: ")) {
		int s = signal_number(x->status + 8);
		*ret_status = s ? 128 + s : 128 + SIGKILL;
	} else if (x->exit_code > 0) {
		*ret_status = (int)(x->exit_code & 0xff);
	} else {
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B reports "
				   "neither an exit status nor a signal%s%.200s",
				   cmd->argv[0], l, x->end_error ? ": " : "",
				   x->end_error ? x->end_error : "");
	}
	return 0;
}

/* runs a command through envd: 0 and *ret_status (the command's, 124 on --timeout, 128+N on a
 * signal), or -1 with err */
static int envd_run(const struct sbx_record *rec, const struct cmd *cmd, struct sink out,
		    struct sink errs, int *ret_status, struct sbx_err *err)
{
	json_t *args = json_array(), *envs = json_object();
	const char *l = remote_label(rec);

	for (char *const *a = cmd->argv + 1; *a; a++)
		json_array_append_new(args, json_string(*a));
	for (const char *const *e = cmd->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = xstrndup(*e, (size_t)(eq - *e));
		json_object_set_new(envs, k, json_string(eq + 1));
	}
	_cleanup_json_ json_t *msg = json_pack("{s:{s:s, s:o, s:o}, s:b}", "process", "cmd",
					       cmd->argv[0], "args", args, "envs", envs, "stdin",
					       cmd->stdin_open);
	if (cmd->cwd)
		json_object_set_new(json_object_get(msg, "process"), "cwd", json_string(cmd->cwd));
	char tag[24] = "sbx-";
	remote_random_hex(tag + 4, 16);
	if (cmd->foreground)
		json_object_set_new(msg, "tag", json_string(tag));
	_cleanup_free_ char *payload = json_dumps(msg, JSON_COMPACT);
	size_t plen = strlen(payload);
	_cleanup_free_ char *frame = xmalloc(plen + 5);
	frame[0] = 0;
	frame[1] = (char)(plen >> 24);
	frame[2] = (char)(plen >> 16);
	frame[3] = (char)(plen >> 8);
	frame[4] = (char)plen;
	memcpy(frame + 5, payload, plen);

	_cleanup_free_ char *url = envd_url(rec, "/process.Process/Start");
	_cleanup_free_ char *tmo = cmd->timeout_ms > 0
		? xasprintf("Connect-Timeout-Ms: %lld", cmd->timeout_ms)
		: NULL;
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };
	envd_hdrs_init(&eh, rec, cmd->user);
	envd_hdrs_add(&eh, "Content-Type: application/connect+json");
	envd_hdrs_add(&eh, "Connect-Protocol-Version: 1");
	envd_hdrs_add(&eh, "Keepalive-Ping-Interval: 10");
	if (tmo)
		envd_hdrs_add(&eh, tmo);

	struct run x = { .rec = rec,
			 .out = out,
			 .err = errs,
			 .feed_stdin = cmd->stdin_open,
			 .user = cmd->user,
			 .detach = cmd->detach };
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body = frame;
	q.body_len = plen + 5;
	q.on_data = on_stream;
	q.arg = &x;
	/* envd ends the command at the deadline; this is only if it does not */
	q.timeout_ms = cmd->timeout_ms > 0 ? cmd->timeout_ms + 10000 : 0;
	q.stall_s = 60; /* keepalives come every 10 s */
	struct remote_sigs sigs;
	if (cmd->foreground) {
		remote_sigs_catch(&sigs);
		q.cancel = &remote_got_signal;
	}
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (cmd->foreground)
		remote_sigs_restore(&sigs);
	int got_signal = cmd->foreground ? remote_got_signal : 0;
	/* what still runs inside when sbx stops reading: ended, as a local exec would be */
	int ended_by = got_signal	  ? got_signal
		: x.out.gone		  ? SIGPIPE
		: r < 0 && resp.timed_out ? SIGALRM
					  : 0;
	if (cmd->foreground && ended_by && !x.ended) {
		/* by its tag: the signal may have come before the start event told the pid, and
		 * envd may register the process a moment after the stream was dropped */
		_cleanup_json_ json_t *m = json_pack(
			"{s:{s:s}, s:s}", "process", "tag", tag, "signal",
			ended_by == SIGALRM || ended_by == SIGPIPE ? "SIGNAL_SIGKILL"
								   : "SIGNAL_SIGTERM");
		for (int i = 0; i < 10; i++) {
			struct sbx_err e2 = { 0 };
			if (envd_unary(rec, "/process.Process/SendSignal", m, cmd->user, 10000,
				       "signal the command", &e2) == 0)
				break;
			sbx_debug("%s", e2.msg);
			if (e2.http_status != 404)
				break;
			struct timespec ts = { 0, 100000000L };
			nanosleep(&ts, NULL);
		}
	}
	if (x.feeder > 0) {
		(void)kill(x.feeder, SIGTERM);
		(void)waitpid(x.feeder, NULL, 0);
	}
	if (r < 0) {
		if (resp.timed_out && cmd->timeout_ms > 0) {
			sbx_err_clear(err);
			*ret_status = SBX_EXIT_TIMEOUT;
			r = 0;
		} else {
			sbx_err_prefix(err, "cannot run '%s' in sandbox '%s'", cmd->argv[0], l);
		}
		goto out;
	}
	if (cmd->foreground && (got_signal || x.out.gone)) {
		*ret_status = 128 + (got_signal ? got_signal : SIGPIPE);
		goto out;
	}
	if (resp.status < 200 || resp.status >= 300) {
		_cleanup_free_ char *what = xasprintf("run '%s' in sandbox '%s'", cmd->argv[0], l);
		r = envd_failed(rec, what, resp.status, &resp.body, err);
		goto out;
	}
	r = run_outcome(&x, cmd, l, ret_status, err);
out:
	sbx_http_resp_release(&resp);
	run_release(&x);
	return r;
}

int e2b_decode_stream(const char *data, size_t len, size_t chunk, long long timeout_ms,
		      struct strbuf *out, struct strbuf *errs, int *ret_status, struct sbx_err *err)
{
	char *const argv[] = { "cmd", NULL };
	struct cmd c = { .argv = argv, .timeout_ms = timeout_ms, .foreground = true };
	struct run x = { .out = { .fd = -1, .buf = out }, .err = { .fd = -1, .buf = errs } };

	/* as the network hands it over: in pieces, until the decoder has seen enough */
	for (size_t off = 0; off < len;) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;
		if (!on_stream(data + off, n, &x))
			break;
		off += n;
	}
	int r = run_outcome(&x, &c, "sandbox", ret_status, err);
	run_release(&x);
	return r;
}

static int e2b_exec(struct sbx_ctx *ctx, const struct sbx_record *rec,
		    const struct sbx_exec_opts *o, int *ret_status, struct sbx_err *err)
{
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	struct cmd c = { .argv = o->argv,
			 .env = (const char *const *)o->env,
			 .cwd = o->workdir ? o->workdir : rec->config.workdir,
			 .user = o->user,
			 .timeout_ms = o->timeout_ms,
			 .stdin_open = o->interactive,
			 .detach = o->detach,
			 .ret_pid = o->ret_pid,
			 .foreground = true };
	if (o->user && strchr(o->user, ':'))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'e2b' takes a user name for -u, "
				   "not USER:GROUP");
	return envd_run(rec, &c, (struct sink){ .fd = 1 }, (struct sink){ .fd = 2 }, ret_status,
			err);
}

/* --- cp: tar through /files ------------------------------------------------------------------ */

static int files_sh(void *arg, const char *script, const char *const *args, struct strbuf *out,
		    struct strbuf *errout, int *ret_status, struct sbx_err *err)
{
	const struct sbx_record *rec = arg;
	const char *argv[10] = { "/bin/sh", "-c", script, "sh" };
	size_t n = 4;

	for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	struct cmd c = { .argv = (char *const *)argv, .cwd = "/", .user = "root" };
	return envd_run(rec, &c, (struct sink){ .fd = -1, .buf = out },
			(struct sink){ .fd = -1, .buf = errout }, ret_status, err);
}

/* as the template's default user: the tar it uploads tells the cp script who that is */
static char *files_url(const struct sbx_record *rec, const char *path)
{
	struct strbuf u = STRBUF_INIT;
	_cleanup_free_ char *base = envd_url(rec, "/files?path=");
	strbuf_addstr(&u, base);
	sbx_url_escape(&u, path);
	return strbuf_detach(&u);
}

static int files_transfer(void *arg, const char *path, int in_fd, long long size, int out_fd,
			  const char *what, struct sbx_err *err)
{
	const struct sbx_record *rec = arg;
	_cleanup_free_ char *url = files_url(rec, path);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, NULL);
	if (in_fd >= 0)
		envd_hdrs_add(&eh, "Content-Type: application/octet-stream");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body_fd = in_fd;
	q.body_size = size;
	q.out_fd = out_fd;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (r < 0)
		sbx_err_prefix(err, "cannot %s", what);
	else if (resp.status < 200 || resp.status >= 300)
		r = envd_failed(rec, what, resp.status, &resp.body, err);
	sbx_http_resp_release(&resp);
	return r;
}

static int e2b_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd,
		     const char *dest, const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { (void *)rec, files_sh, files_transfer };
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return remote_cp_in(&f, tar_fd, dest, o, err);
}

static int e2b_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src,
		      int tar_fd, const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { (void *)rec, files_sh, files_transfer };
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return remote_cp_out(&f, src, tar_fd, o, err);
}

static int e2b_ready(struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	return e2b_remote(&r, err);
}

const struct sbx_provider sbx_provider_e2b = {
	.name = "e2b",
	.summary = "E2B hosted sandboxes (E2B_API_KEY)",
	.remote = true,
	.key_var = "E2B_API_KEY",
	/* E2B pauses with memory; its templates stand for images; no limits, volumes or net
	 * policies but on and off */
	.caps = SBX_CAP_EXEC_STDIN | SBX_CAP_EXEC_USER | SBX_CAP_EXEC_DETACH |
		SBX_CAP_PAUSE_MEMORY | SBX_CAP_RELEASE | SBX_CAP_PREVIEW | SBX_CAP_NET_NONE |
		SBX_CAP_NET_OPEN | SBX_CAP_TEMPLATE | SBX_CAP_TTL | SBX_CAP_CP,
	.ready = e2b_ready,
	.api_url = e2b_api_url,
	.create = e2b_create,
	.exec = e2b_exec,
	.cp_in = e2b_cp_in,
	.cp_out = e2b_cp_out,
	.rm = e2b_rm,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.preview = e2b_preview,
	.inspect = e2b_inspect,
	.list = e2b_list,
};
