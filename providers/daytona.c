/* The Daytona provider: the REST control plane (sandbox, start, stop, pause, preview-url) and the
 * in-sandbox toolbox (process sessions, files) reached through the sandbox's toolbox proxy. */
#define _GNU_SOURCE
#include "providers/remote-decode.h"
#include "providers/daytona.h"

#include <errno.h>
#include <time.h>

#include "core/log.h"

#define DEFAULT_API "https://app.daytona.io/api"
#define CONTROL_TIMEOUT_MS 30000
#define START_TIMEOUT_MS 180000 /* creating -> started, stopped -> started */
#define LONG_MS (7LL * 24 * 3600 * 1000)

static const char *const api_vars[] = { "SBX_DAYTONA_API_URL", "DAYTONA_API_URL",
					"DAYTONA_SERVER_URL", NULL };

static int dt_remote(struct remote *r, struct sbx_err *err)
{
	return remote_init(r, "Daytona", "DAYTONA_API_KEY", api_vars, DEFAULT_API,
			   "Authorization: Bearer ", err);
}

/* the toolbox base of a sandbox: TOOLBOX_PROXY/ID */
static char *toolbox_url(const struct remote *r, const struct sbx_record *rec, const char *tail)
{
	const char *proxy = sbx_json_str(rec->extra, "toolbox");
	struct strbuf sb = STRBUF_INIT;

	if (proxy && *proxy) {
		strbuf_addstr(&sb, proxy);
		while (sb.len && sb.buf[sb.len - 1] == '/')
			sb.buf[--sb.len] = 0;
		strbuf_addch(&sb, '/');
		sbx_url_escape(&sb, rec->provider_id);
	} else {
		strbuf_addf(&sb, "%s/toolbox/", r->api);
		sbx_url_escape(&sb, rec->provider_id);
		strbuf_addstr(&sb, "/toolbox");
	}
	strbuf_addstr(&sb, tail);
	return strbuf_detach(&sb);
}

static enum sbx_state state_of(const char *s, bool *ret_busy)
{
	static const char *const busy[] = {
		"creating",	 "restoring",	      "starting",  "stopping", "pulling_snapshot",
		"pending_build", "building_snapshot", "archiving", "resizing", "snapshotting",
		"forking",	 "pausing",	      "resuming",  "unknown",  "destroying"
	};
	*ret_busy = false;
	if (!s)
		return SBX_STATE_UNKNOWN;
	if (streq(s, "started"))
		return SBX_STATE_RUNNING;
	if (streq(s, "paused"))
		return SBX_STATE_PAUSED;
	if (streq(s, "stopped") || streq(s, "archived"))
		return SBX_STATE_STOPPED;
	if (streq(s, "error") || streq(s, "build_failed"))
		return SBX_STATE_ERROR;
	if (streq(s, "destroyed"))
		return SBX_STATE_MISSING;
	for (size_t i = 0; i < ARRAY_SIZE(busy); i++)
		if (streq(s, busy[i]))
			*ret_busy = true;
	/* on its way to started: sbx's "starting" */
	static const char *const starting[] = { "creating",	 "starting",
						"restoring",	 "pulling_snapshot",
						"pending_build", "building_snapshot" };
	for (size_t i = 0; i < ARRAY_SIZE(starting); i++)
		if (streq(s, starting[i]))
			return SBX_STATE_CREATING;
	return SBX_STATE_UNKNOWN;
}

static void keep_sandbox(struct sbx_record *rec, const json_t *j)
{
	json_t *extra = rec->extra ? rec->extra : json_object();
	const char *v;

	if ((v = sbx_json_str(j, "toolboxProxyUrl")) && *v)
		json_object_set_new(extra, "toolbox", json_string(v));
	if ((v = sbx_json_str(j, "sandboxClass")) && *v)
		json_object_set_new(extra, "class", json_string(v));
	if ((v = sbx_json_str(j, "snapshot")) && *v)
		json_object_set_new(extra, "snapshot", json_string(v));
	rec->extra = extra;
}

static int get_sandbox(const struct remote *r, const char *id, json_t **ret, long *ret_status,
		       struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *url = remote_url(r, "sandbox", id, "");
	struct remote_call c = { .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .accept = accept,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "look up the Daytona sandbox" };
	long st = remote_do(r, &c, ret, NULL, err);
	if (st < 0)
		return -1;
	*ret_status = st;
	if (st == 200 && !json_is_object(*ret))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot look up the Daytona sandbox: the "
				   "answer is not an object");
	return 0;
}

/* polls until the sandbox reaches the state wanted (a progress line on a terminal) */
static int wait_state(const struct remote *r, struct sbx_record *rec, const char *want,
		      const char *doing, struct sbx_err *err)
{
	long long t0 = sbx_now_ms(), delay = 100;
	bool tty = isatty(2) == 1, shown = false;
	int rc = -1;

	for (;;) {
		_cleanup_json_ json_t *j = NULL;
		long st;
		if (get_sandbox(r, rec->provider_id, &j, &st, err) < 0)
			break;
		if (st == 404) {
			sbx_err_set(err, SBX_E_NOTFOUND,
				    "the Daytona sandbox of '%s' went away while "
				    "%s",
				    remote_label(rec), doing);
			break;
		}
		keep_sandbox(rec, j);
		const char *s = sbx_json_str(j, "state");
		if (s && streq(s, want)) {
			rc = 0;
			break;
		}
		bool busy;
		enum sbx_state k = state_of(s, &busy);
		if (k == SBX_STATE_ERROR || k == SBX_STATE_MISSING) {
			const char *why = sbx_json_str(j, "errorReason");
			sbx_err_set(err, SBX_E_REMOTE,
				    "Daytona sandbox of '%s' is %s%s%.200s while %s",
				    remote_label(rec), s, why ? ": " : "", why ? why : "", doing);
			break;
		}
		long long el = sbx_now_ms() - t0;
		if (el > START_TIMEOUT_MS) {
			sbx_err_set(err, SBX_E_NETWORK,
				    "Daytona sandbox of '%s' is still %s after %lld "
				    "s of %s",
				    remote_label(rec), s ? s : "unknown", el / 1000, doing);
			break;
		}
		if (tty) {
			/* the state is Daytona's word: shown as text, never as terminal controls */
			_cleanup_free_ char *shown_s = sbx_term_safe(s ? s : "?");
			fprintf(stderr, "\r%s: %s (%lld s)\033[K", doing, shown_s, el / 1000);
			fflush(stderr);
			shown = true;
		}
		struct timespec ts = { 0, (long)delay * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		delay = delay < 1000 ? delay * 2 : 1000;
	}
	if (shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	return rc;
}

static int dt_create(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *body = NULL, *resp = NULL;
	const struct sbx_config *o = &rec->config;

	if (dt_remote(&r, err) < 0)
		return -1;
	body = json_pack("{s:o, s:o}", "labels", remote_labels(rec), "env",
			 remote_env_object(o->env));
	if (o->image.ref)
		json_object_set_new(body, "snapshot", json_string(o->image.ref));
	if (o->cpu_millis)
		json_object_set_new(body, "cpu", json_integer((o->cpu_millis + 999) / 1000));
	if (o->memory)
		json_object_set_new(body, "memory",
				    json_integer((o->memory + (1LL << 30) - 1) >> 30));
	if (o->disk)
		json_object_set_new(body, "disk", json_integer((o->disk + (1LL << 30) - 1) >> 30));
	if (o->net.set && o->net.mode == SBX_NET_NONE)
		json_object_set_new(body, "networkBlockAll", json_true());
	if (o->ttl_ms) {
		json_object_set_new(body, "autoStopInterval",
				    json_integer((o->ttl_ms + 59999) / 60000));
		if (o->ttl_rm)
			json_object_set_new(body, "autoDeleteInterval", json_integer(0));
	}
	const char *target = getenv("DAYTONA_TARGET");
	if (target && *target)
		json_object_set_new(body, "target", json_string(target));
	_cleanup_free_ char *url = remote_url(&r, "sandbox", NULL, "");
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .timeout_ms = START_TIMEOUT_MS,
				 .what = "create a Daytona sandbox" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	const char *id = sbx_json_str(resp, "id");
	if (!id || !*id || strlen(id) > 128 || strpbrk(id, "/?#% \t\r\n"))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot create a Daytona sandbox: Daytona's "
				   "answer has no valid 'id'");
	rec->provider_id = xstrdup(id);
	rec->extra = json_object();
	keep_sandbox(rec, resp);
	const char *s = sbx_json_str(resp, "state");
	if (s && streq(s, "started"))
		return 0;
	_cleanup_free_ char *doing = xasprintf("creating Daytona sandbox %s", id);
	return wait_state(&r, rec, "started", doing, err);
}

static void set_live(struct sbx_record *rec, const json_t *j)
{
	static const char *const keep[] = { "state",
					    "snapshot",
					    "cpu",
					    "memory",
					    "disk",
					    "gpu",
					    "sandboxClass",
					    "target",
					    "errorReason",
					    "public",
					    "autoStopInterval",
					    "createdAt",
					    "updatedAt" };
	json_t *remote = json_object();
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		json_t *v = json_object_get(j, keep[i]);
		if (v && !json_is_null(v))
			json_object_set(remote, keep[i], v);
	}
	json_decref(rec->live);
	rec->live = json_pack("{s:o}", "remote", remote);
}

void daytona_decode_sandbox(struct sbx_record *rec, const json_t *j)
{
	bool busy;
	const char *s = sbx_json_str(j, "state");

	rec->state = state_of(s, &busy);
	if (rec->state == SBX_STATE_ERROR) {
		const char *why = sbx_json_str(j, "errorReason");
		free(rec->state_reason);
		rec->state_reason = xasprintf("Daytona: %s%s%.200s", s, why ? ": " : "",
					      why ? why : "");
	}
	set_live(rec, j);
}

static int dt_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *j = NULL;
	long st;

	if (rec->state == SBX_STATE_CREATING && !rec->provider_id)
		return 0;
	if (remote_need_id("Daytona", rec, err) < 0 || dt_remote(&r, err) < 0)
		return -1;
	if (get_sandbox(&r, rec->provider_id, &j, &st, err) < 0)
		return -1;
	if (st == 404) {
		rec->state = SBX_STATE_MISSING;
		return 0;
	}
	daytona_decode_sandbox(rec, j);
	return 0;
}

int daytona_decode_list(const json_t *resp, json_t *all, char **ret_cursor, struct sbx_err *err)
{
	json_t *items = json_is_array(resp) ? (json_t *)resp : json_object_get(resp, "items");
	size_t i;
	json_t *v;

	if (!json_is_array(items))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot list Daytona sandboxes: the answer has "
				   "no list of items");
	json_array_foreach (items, i, v) {
		const char *id = sbx_json_str(v, "id");
		bool busy;
		if (id)
			json_object_set_new(
				all, id, json_integer(state_of(sbx_json_str(v, "state"), &busy)));
	}
	const char *nc = sbx_json_str(resp, "nextCursor");
	*ret_cursor = nc && *nc && json_array_size(items) > 0 ? xstrdup(nc) : NULL;
	return 0;
}

static int dt_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_free_ char *cursor = NULL;
	json_t *all = json_object();
	int rc = -1;

	if (dt_remote(&r, err) < 0)
		goto out;
	for (int page = 1; page <= 1000; page++) {
		struct strbuf u = STRBUF_INIT;
		strbuf_addf(&u, "%s/sandbox?limit=100", r.api);
		if (cursor) {
			strbuf_addstr(&u, "&cursor=");
			sbx_url_escape(&u, cursor);
		}
		_cleanup_json_ json_t *resp = NULL;
		struct remote_call c = { .url = u.buf,
					 .flags = REMOTE_IDEMPOTENT,
					 .timeout_ms = 5000,
					 .what = "list Daytona sandboxes" };
		long st = remote_do(&r, &c, &resp, NULL, err);
		strbuf_release(&u);
		if (st < 0)
			goto out;
		free(TAKE_PTR(cursor));
		if (daytona_decode_list(resp, all, &cursor, err) < 0)
			goto out;
		if (!cursor)
			break;
	}
	*ret = TAKE_PTR(all);
	rc = 0;
out:
	json_decref(all);
	return rc;
}

static int dt_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	static const long accept[] = { 404, 0 };

	if (!rec->provider_id)
		return 0;
	if (dt_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandbox", rec->provider_id, "");
	struct remote_call c = { .method = "DELETE",
				 .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .accept = accept,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "remove the Daytona sandbox" };
	return remote_do(&r, &c, NULL, NULL, err) < 0 ? -1 : 0;
}

/* POST /sandbox/ID/ACTION, then wait until Daytona says WANT, which is sbx's STATE: 0; 1 when
 * Daytona answered with a status of accept instead (nothing done); -1 */
static int transition(const struct remote *r, struct sbx_record *rec, const char *action,
		      const long *accept, const char *want, const char *doing, enum sbx_state state,
		      struct sbx_err *err)
{
	_cleanup_free_ char *tail = xasprintf("/%s", action);
	_cleanup_free_ char *url = remote_url(r, "sandbox", rec->provider_id, tail);
	_cleanup_free_ char *what = xasprintf("%s the Daytona sandbox", action);
	_cleanup_json_ json_t *resp = NULL;
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .accept = accept,
				 .timeout_ms = START_TIMEOUT_MS,
				 .what = what };
	long st = remote_do(r, &c, &resp, NULL, err);
	if (st < 0)
		return -1;
	if (st < 200 || st >= 300)
		return 1;
	if (json_is_object(resp))
		keep_sandbox(rec, resp);
	if (wait_state(r, rec, want, doing, err) < 0)
		return -1;
	rec->state = state;
	return 0;
}

static int dt_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
		    struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	static const long accept[] = { 422, 0 };

	if (remote_need_id("Daytona", rec, err) < 0 || dt_remote(&r, err) < 0)
		return -1;
	if (rec->state == SBX_STATE_STOPPED)
		return 0;
	if (!o->release && rec->state == SBX_STATE_RUNNING) {
		/* memory kept where the sandbox class allows it (linux-vm, windows) */
		int t = transition(&r, rec, "pause", accept, "paused", "pausing", SBX_STATE_PAUSED,
				   err);
		if (t <= 0)
			return t;
		sbx_debug("this Daytona sandbox class cannot pause; stopping it (disk kept)");
	}
	return transition(&r, rec, "stop", NULL, "stopped", "stopping", SBX_STATE_STOPPED, err) < 0
		? -1
		: 0;
}

static int dt_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };

	if (remote_need_id("Daytona", rec, err) < 0 || dt_remote(&r, err) < 0)
		return -1;
	return transition(&r, rec, "start", NULL, "started", "starting", SBX_STATE_RUNNING, err) < 0
		? -1
		: 0;
}

int daytona_decode_preview(const json_t *resp, int port, json_t **ret, struct sbx_err *err)
{
	const char *u = sbx_json_str(resp, "url"), *tok = sbx_json_str(resp, "token");
	if (!u || !*u)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot get the Daytona preview URL: the "
				   "answer has no 'url'");
	/* printed as it is for the caller to open: a URL, never spaces or terminal controls */
	for (const char *c = u; *c; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
			return sbx_err_set(err, SBX_E_REMOTE,
					   "cannot get the Daytona preview URL: "
					   "the 'url' of the answer is not a URL");
	json_t *p = json_pack("{s:i, s:s, s:b}", "port", port, "url", u, "public", !tok || !*tok);
	if (tok && *tok) {
		json_object_set_new(p, "token", json_string(tok));
		json_object_set_new(p, "token_header", json_string("X-Daytona-Preview-Token"));
	}
	*ret = p;
	return 0;
}

static int dt_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		      const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	int pre = remote_preview_start("daytona", "Daytona", rec, o, ret, err);
	if (pre != 0)
		return pre < 0 ? -1 : 0;
	if (dt_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *tail = xasprintf("/ports/%d/preview-url", o->port);
	_cleanup_free_ char *url = remote_url(&r, "sandbox", rec->provider_id, tail);
	struct remote_call c = { .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "get the Daytona preview URL" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	return daytona_decode_preview(resp, o->port, ret, err);
}

/* --- the toolbox: a session per command ------------------------------------------------------ */

struct tb {
	struct remote r;
	const struct sbx_record *rec;
};

int daytona_decode_exec(const json_t *resp, struct strbuf *out, struct strbuf *errout,
			int *ret_status, struct sbx_err *err)
{
	json_t *code = json_object_get(resp, "exitCode");
	if (!json_is_object(resp) || !json_is_integer(code))
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run a command in the Daytona sandbox: "
				   "the answer has no exit code");
	if (json_integer_value(code) < 0)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run a command in the Daytona sandbox: "
				   "Daytona could not start it (exit code %lld)",
				   (long long)json_integer_value(code));
	/* the output as sent, NUL bytes and all */
	json_t *so = json_object_get(resp, "stdout"), *se = json_object_get(resp, "stderr");
	if (!json_is_string(so) && !json_is_string(se))
		so = json_object_get(resp, "output");
	if (json_is_string(so))
		strbuf_add(out, json_string_value(so), json_string_length(so));
	if (json_is_string(se))
		strbuf_add(errout, json_string_value(se), json_string_length(se));
	*ret_status = (int)(json_integer_value(code) & 0xff);
	return 0;
}

/* runs a shell command line in a fresh session: its stdout, stderr and exit code */
static int session_run(struct tb *t, const char *line, long long timeout_ms, bool foreground,
		       struct strbuf *out, struct strbuf *errout, int *ret_status,
		       struct sbx_err *err)
{
	char hex[17];
	remote_random_hex(hex, 16);
	_cleanup_free_ char *sid = xasprintf("sbx-%s", hex);
	_cleanup_free_ char *base = toolbox_url(&t->r, t->rec, "/process/session");
	_cleanup_json_ json_t *mk = json_pack("{s:s}", "sessionId", sid);
	struct remote_call c = { .method = "POST",
				 .url = base,
				 .body = mk,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "open a Daytona toolbox session" };
	/* a signal, or ^C, from here on: the session goes, and what runs in it with it */
	struct remote_sigs sigs;
	if (foreground)
		remote_sigs_catch(&sigs);
	if (remote_do(&t->r, &c, NULL, NULL, err) < 0) {
		if (foreground)
			remote_sigs_restore(&sigs);
		return -1;
	}
	_cleanup_free_ char *exec_url = xasprintf("%s/%s/exec", base, sid);
	_cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "command", line, "runAsync", 0);
	_cleanup_json_ json_t *resp = NULL;
	struct remote_call x = { .method = "POST",
				 .url = exec_url,
				 .body = body,
				 .flags = REMOTE_ALLOW_NUL,
				 .timeout_ms = timeout_ms > 0 ? timeout_ms + 30000 : LONG_MS,
				 .what = "run a command in the Daytona sandbox" };
	long st = -1;
	if (foreground)
		x.cancel = &remote_got_signal;
	if (!foreground || !remote_got_signal)
		st = remote_do(&t->r, &x, &resp, NULL, err);
	/* the session goes, whatever happened */
	_cleanup_free_ char *del_url = xasprintf("%s/%s", base, sid);
	struct remote_call d = { .method = "DELETE",
				 .url = del_url,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "close the Daytona toolbox session" };
	struct sbx_err e2 = { 0 };
	if (remote_do(&t->r, &d, NULL, NULL, &e2) < 0)
		sbx_debug("%s", e2.msg);
	int got_signal = foreground ? remote_got_signal : 0;
	if (foreground)
		remote_sigs_restore(&sigs);
	if (got_signal) {
		sbx_err_clear(err);
		*ret_status = 128 + got_signal;
		return 0;
	}
	if (st < 0)
		return -1;
	return daytona_decode_exec(resp, out, errout, ret_status, err);
}

static int tb_open(struct tb *t, const struct sbx_record *rec, struct sbx_err *err)
{
	t->rec = rec;
	if (remote_check_running("Daytona", rec, err) < 0)
		return -1;
	return dt_remote(&t->r, err);
}

static void tb_close(struct tb *t)
{
	remote_release(&t->r);
}

/* --- exec -d: a session of its own per command, whose id is the exec id ------------------- */

#define JOB_PREFIX "sbx-d-"

/* the command runs (runAsync) in a new session, which stays for ps, logs and wait */
static int job_start(struct tb *t, const char *line, const struct sbx_exec_opts *o,
		     struct sbx_err *err)
{
	char hex[17];
	remote_random_hex(hex, 16);
	_cleanup_free_ char *sid = xasprintf(JOB_PREFIX "%s", hex);
	_cleanup_free_ char *base = toolbox_url(&t->r, t->rec, "/process/session");
	_cleanup_free_ char *exec_url = xasprintf("%s/%s/exec", base, sid);
	_cleanup_json_ json_t *mk = json_pack("{s:s}", "sessionId", sid);
	_cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "command", line, "runAsync", 1);
	struct remote_call c = { .method = "POST",
				 .url = base,
				 .body = mk,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "open a Daytona toolbox session" };
	struct remote_call x = { .method = "POST",
				 .url = exec_url,
				 .body = body,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "start a command in the Daytona sandbox" };
	if (remote_do(&t->r, &c, NULL, NULL, err) < 0 || remote_do(&t->r, &x, NULL, NULL, err) < 0)
		return sbx_err_prefix(err, "cannot run '%s' in sandbox '%s'", o->argv[0],
				      remote_label(t->rec));
	if (o->ret_exec_id)
		snprintf(o->ret_exec_id, SBX_EXEC_ID_MAX, "%s", sid);
	return 0;
}

/* GET of a session's URL (tail after it: "", "/command/CID/logs"); NOTFOUND for another id */
static int job_call(struct tb *t, const char *id, const char *tail, json_t **ret,
		    struct sbx_err *err)
{
	static const long ok404[] = { 404, 0 };
	bool valid = startswith(id, JOB_PREFIX) && strlen(id) == strlen(JOB_PREFIX) + 16 &&
		strspn(id + strlen(JOB_PREFIX), "0123456789abcdef") == 16;
	_cleanup_free_ char *safe = sbx_term_safe(id);
	_cleanup_free_ char *url = NULL, *path = xasprintf("/process/session/%s%s", id, tail);
	long st = 0;
	if (valid) {
		url = toolbox_url(&t->r, t->rec, path);
		struct remote_call c = { .method = "GET",
					 .url = url,
					 .accept = ok404,
					 .flags = REMOTE_IDEMPOTENT,
					 .timeout_ms = CONTROL_TIMEOUT_MS,
					 .what = "look at a command of the Daytona sandbox" };
		if ((st = remote_do(&t->r, &c, ret, NULL, err)) < 0)
			return -1;
	}
	if (!valid || st == 404) {
		if (valid)
			json_decref(*ret);
		*ret = NULL;
		return sbx_err_set(err, SBX_E_NOTFOUND, "no exec '%s' in sandbox '%s'", safe,
				   remote_label(t->rec));
	}
	return 0;
}

/* a session's record as ps lists it ({sessionId, commands: [{id, command, exitCode?}]}) */
static json_t *job_view(const json_t *s)
{
	json_t *c = json_array_get(json_object_get(s, "commands"), 0);
	json_t *code = json_object_get(c, "exitCode");
	int n = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	/* the shell line sbx ran, as sh -c would take it; Daytona tells no pid nor times */
	json_t *argv = json_pack("[s, s, s]", "sh", "-c", sbx_json_str(c, "command") ?: "");
	/* a signal's end is the shell's 128+N: no signal name is told apart */
	return json_pack("{s:s, s:n, s:o, s:s, s:o, s:n, s:n, s:n}", "id",
			 sbx_json_str(s, "sessionId") ?: "", "pid", "command", argv, "state",
			 n >= 0 ? "exited" : "running", "exit_code",
			 n >= 0 ? json_integer(n) : json_null(), "signal", "started_at",
			 "finished_at");
}

static int dt_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
			struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	_cleanup_json_ json_t *all = NULL;
	(void)ctx;
	if (tb_open(&t, rec, err) < 0)
		return -1;
	_cleanup_free_ char *url = toolbox_url(&t.r, rec, "/process/session");
	struct remote_call c = { .method = "GET",
				 .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "list the sessions of the Daytona sandbox" };
	if (remote_do(&t.r, &c, &all, NULL, err) < 0)
		return -1;
	*ret = json_array();
	size_t i;
	json_t *s;
	json_array_foreach (all, i, s)
		if (startswith(sbx_json_str(s, "sessionId") ?: "", JOB_PREFIX))
			json_array_append_new(*ret, job_view(s));
	return 0;
}

static int dt_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id,
		      json_t **ret, struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	_cleanup_json_ json_t *s = NULL;
	(void)ctx;
	if (tb_open(&t, rec, err) < 0 || job_call(&t, id, "", &s, err) < 0)
		return -1;
	*ret = job_view(s);
	return 0;
}

static int dt_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id,
		       bool follow, int fd, struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	size_t done = 0;
	(void)ctx;
	if (tb_open(&t, rec, err) < 0)
		return -1;
	/* Daytona follows logs over a WebSocket only: polled, printing what is new */
	for (;;) {
		_cleanup_json_ json_t *s = NULL, *logs = NULL;
		if (job_call(&t, id, "", &s, err) < 0)
			return -1;
		json_t *c = json_array_get(json_object_get(s, "commands"), 0);
		const char *cid = sbx_json_str(c, "id");
		bool ended = json_is_integer(json_object_get(c, "exitCode"));
		_cleanup_free_ char *tail = xasprintf("/command/%s/logs", cid ? cid : "-");
		if (cid && job_call(&t, id, tail, &logs, err) < 0)
			return -1;
		const char *out = sbx_json_str(logs, "output") ?: "";
		size_t n = strlen(out);
		if (n > done && sbx_write_all(fd, out + done, n - done) < 0)
			return errno == EPIPE ? 0 : sbx_err_errno(err, "cannot write the log");
		if (n > done)
			done = n;
		if (!follow || ended)
			return 0;
		struct timespec ts = { 0, 500 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int dt_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		   int *ret_status, struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	if (tb_open(&t, rec, err) < 0)
		return -1;
	struct strbuf line = STRBUF_INIT, out = STRBUF_INIT, eout = STRBUF_INIT;
	const char *wd = o->workdir ? o->workdir : rec->config.workdir;
	strbuf_addstr(&line, "(");
	if (wd) {
		strbuf_addstr(&line, "cd ");
		remote_sh_quote(&line, wd);
		strbuf_addstr(&line, " && ");
	}
	if (o->timeout_ms > 0)
		strbuf_addf(&line, "timeout -k 5 %lld.%03lld ", o->timeout_ms / 1000,
			    o->timeout_ms % 1000);
	if (o->env && *o->env) {
		strbuf_addstr(&line, "env");
		for (char **e = o->env; *e; e++) {
			strbuf_addch(&line, ' ');
			remote_sh_quote(&line, *e);
		}
		strbuf_addch(&line, ' ');
	}
	for (char **a = o->argv; *a; a++) {
		if (a != o->argv)
			strbuf_addch(&line, ' ');
		remote_sh_quote(&line, *a);
	}
	strbuf_addstr(&line, ") </dev/null");
	if (o->detach) {
		int r = job_start(&t, line.buf, o, err);
		strbuf_release(&line);
		*ret_status = 0;
		return r;
	}
	int r = session_run(&t, line.buf, o->timeout_ms, true, &out, &eout, ret_status, err);
	if (r == 0) {
		struct remote_sigs sigs;
		remote_sigs_catch(&sigs); /* a reader gone: EPIPE, not a death */
		(void)sbx_write_all(o->result ? o->result->out_fd : 1, out.buf ? out.buf : "",
				    out.len);
		(void)sbx_write_all(o->result ? o->result->err_fd : 2, eout.buf ? eout.buf : "",
				    eout.len);
		/* timeout(1)'s status: the one sign of a deadline the session API gives */
		if (o->result && o->timeout_ms > 0 && *ret_status == SBX_EXIT_TIMEOUT)
			o->result->timed_out = true;
		remote_sigs_restore(&sigs);
	} else {
		sbx_err_prefix(err, "cannot run '%s' in sandbox '%s'", o->argv[0],
			       remote_label(rec));
	}
	strbuf_release(&line);
	strbuf_release(&out);
	strbuf_release(&eout);
	return r;
}

static int tb_sh(void *arg, const char *script, const char *const *args, struct strbuf *out,
		 struct strbuf *errout, int *ret_status, struct sbx_err *err)
{
	struct strbuf line = STRBUF_INIT;

	strbuf_addstr(&line, "(cd / && sh -c ");
	remote_sh_quote(&line, script);
	strbuf_addstr(&line, " sh");
	for (; *args; args++) {
		strbuf_addch(&line, ' ');
		remote_sh_quote(&line, *args);
	}
	strbuf_addstr(&line, ") </dev/null");
	int r = session_run(arg, line.buf, 0, false, out, errout, ret_status, err);
	strbuf_release(&line);
	return r;
}

static int tb_transfer(void *arg, const char *path, int in_fd, long long size, int out_fd,
		       const char *what, struct sbx_err *err)
{
	struct tb *t = arg;
	struct strbuf tail = STRBUF_INIT;
	strbuf_addstr(&tail, in_fd >= 0 ? "/files/upload?path=" : "/files/download?path=");
	sbx_url_escape(&tail, path);
	_cleanup_free_ char *url = toolbox_url(&t->r, t->rec, tail.buf);
	strbuf_release(&tail);
	const char *h[] = { t->r.auth, NULL };
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = h;
	q.body_fd = in_fd;
	q.body_size = size;
	q.upload_name = in_fd >= 0 ? path : NULL;
	q.out_fd = out_fd;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "Daytona", err);
	if (r < 0)
		sbx_err_prefix(err, "cannot %s", what);
	else if (resp.status < 200 || resp.status >= 300)
		r = remote_status_error(&t->r, what, resp.status, &resp.body, err);
	sbx_http_resp_release(&resp);
	return r;
}

static int dt_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		    const struct sbx_cp_opts *o, struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	if (tb_open(&t, rec, err) < 0)
		return -1;
	struct remote_files f = { &t, tb_sh, tb_transfer };
	return remote_cp_in(&f, tar_fd, dest, o, err);
}

static int dt_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		     const struct sbx_cp_opts *o, struct sbx_err *err)
{
	_cleanup_(tb_close) struct tb t = { 0 };
	if (tb_open(&t, rec, err) < 0)
		return -1;
	struct remote_files f = { &t, tb_sh, tb_transfer };
	return remote_cp_out(&f, src, tar_fd, o, err);
}

int daytona_remote(struct remote *r, struct sbx_err *err)
{
	return dt_remote(r, err);
}

char *daytona_toolbox_url(const struct remote *r, const struct sbx_record *rec, const char *tail)
{
	return toolbox_url(r, rec, tail);
}

/* --- liveness: auto-stop, last activity ---------------------------------------------------- */

/* POST /sandbox/ID/TAIL, no body */
static int dt_post(const struct sbx_record *rec, const char *tail, const char *what,
		   struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };

	if (remote_need_id("Daytona", rec, err) < 0 || dt_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandbox", rec->provider_id, tail);
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = 30000,
				 .what = what };
	return remote_do(&r, &c, NULL, NULL, err) < 0 ? -1 : 0;
}

/* sbx update: --ttl is Daytona's auto-stop interval, in whole minutes. Its API has a resize
 * call (cpu, memory in GiB), which sbx does not make: --cpus and --memory are refused */
static int dt_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		     struct sbx_err *err)
{
	(void)ctx;
	if (c->cpu_millis != rec->config.cpu_millis || c->memory != rec->config.memory)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'daytona' cannot resize a sandbox (--cpus, --memory) "
				   "with sbx: recreate it with the new sizes");
	if (c->ttl_ms == rec->config.ttl_ms)
		return 0;
	char tail[48];
	snprintf(tail, sizeof(tail), "/autostop/%lld", (c->ttl_ms + 59999) / 60000);
	return dt_post(rec, tail, "set the auto-stop interval of the Daytona sandbox", err);
}

/* the auto-stop clock counts from the sandbox's last activity: that is now */
static int dt_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	(void)ctx;
	if (remote_check_running("Daytona", rec, err) < 0)
		return -1;
	return dt_post(rec, "/last-activity", "update the last activity of the Daytona sandbox",
		       err);
}

/* Daytona reports what a sandbox was given (cpu, memory and disk in GiB), not what it uses:
 * the memory limit alone */
static int dt_stats(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		    struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *j = NULL;
	long st;

	(void)ctx;
	if (remote_check_running("Daytona", rec, err) < 0 || dt_remote(&r, err) < 0 ||
	    get_sandbox(&r, rec->provider_id, &j, &st, err) < 0)
		return -1;
	if (st == 404)
		return sbx_err_set(err, SBX_E_NOTFOUND, "the Daytona sandbox of '%s' is gone",
				   remote_label(rec));
	json_t *mem = json_object_get(j, "memory");
	json_t *o = json_pack("{s:n, s:n, s:n, s:n, s:n, s:n, s:n}", "cpu_ms", "cpu_percent",
			      "memory_bytes", "pids", "disk_bytes", "net_rx_bytes", "net_tx_bytes");
	json_object_set_new(
		o, "memory_limit_bytes",
		json_is_number(mem) && json_number_value(mem) > 0
			? json_integer((json_int_t)(json_number_value(mem) * (double)(1LL << 30)))
			: json_null());
	*ret = o;
	return 0;
}

static int dt_ready(struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	return dt_remote(&r, err);
}

static char *dt_api_url(void)
{
	const char *u = remote_env(api_vars);
	return xstrdup(u ? u : DEFAULT_API);
}

const struct sbx_provider sbx_provider_daytona = {
	.name = "daytona",
	.summary = "Daytona hosted sandboxes (DAYTONA_API_KEY)",
	.remote = true,
	.key_var = "DAYTONA_API_KEY",
	/* Daytona stops (memory is lost) rather than pauses; its snapshots stand for images; it
	 * sizes a sandbox in whole CPUs and GiB; exec runs a command and waits for its output */
	.caps = SBX_CAP_RELEASE | SBX_CAP_PREVIEW | SBX_CAP_LIMIT_CPU | SBX_CAP_LIMIT_MEMORY |
		SBX_CAP_DISK | SBX_CAP_NET_NONE | SBX_CAP_NET_OPEN | SBX_CAP_TEMPLATE |
		SBX_CAP_TTL | SBX_CAP_CP | SBX_CAP_FS | SBX_CAP_EXEC_DETACH,
	.ready = dt_ready,
	.api_url = dt_api_url,
	.create = dt_create,
	.exec = dt_exec,
	.cp_in = dt_cp_in,
	.cp_out = dt_cp_out,
	.fs = daytona_fs,
	.rm = dt_rm,
	.pause = dt_pause,
	.resume = dt_resume,
	.preview = dt_preview,
	.inspect = dt_inspect,
	.list = dt_list,
	.update = dt_update,
	.keepalive = dt_keepalive,
	.stats = dt_stats,
	.jobs_list = dt_jobs_list,
	.job_get = dt_job_get,
	.job_logs = dt_job_logs,
};
