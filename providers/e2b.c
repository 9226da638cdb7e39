/* The E2B provider: the REST control plane (sandboxes, pause, connect); what runs through the
 * sandbox's own envd daemon (exec, cp) is providers/e2b-envd.c. */
#define _GNU_SOURCE
#include "providers/e2b.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>

#include "core/log.h"

#define DEFAULT_TIMEOUT_S 3600 /* without --ttl: an hour, then paused (not killed) */
#define CONTROL_TIMEOUT_MS 30000
#define CREATE_TIMEOUT_MS 120000

static const char *const api_vars[] = { "SBX_E2B_API_URL", "E2B_API_URL", NULL };

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

const char *e2b_secret(const struct sbx_record *rec, const char *key)
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

/* sbx snapshot: E2B's persistent snapshot of the sandbox, a template new sandboxes start from
 * (a fork is a create from it); nothing is kept on this host but the record */
static int e2b_snapshot(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *dest,
			json_t *info, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	(void)ctx;
	(void)dest;
	if (remote_need_id("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "/snapshots");
	_cleanup_json_ json_t *body = json_object();
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "snapshot the E2B sandbox" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	const char *tpl = sbx_json_str(resp, "snapshotID");
	if (!tpl || !*tpl || strlen(tpl) > 200)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot snapshot '%s': E2B's answer has no valid 'snapshotID'",
				   remote_label(rec));
	json_object_set_new(info, "template", json_string(tpl));
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
	long long timeout = rec->config.ttl_ms
		? (rec->config.ttl_ms + 999) / 1000
		: sbx_json_int(rec->extra, "timeout", DEFAULT_TIMEOUT_S);
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
	const char *tok = e2b_secret(rec, "traffic_access_token");
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

/* --- liveness: the timeout, metrics --------------------------------------------------------- */

/* E2B's timeout is a deadline, not an idle time: seconds from now, after which the sandbox is
 * paused (or killed); set to the sandbox's --ttl (or an hour) */
static int set_timeout(const struct sbx_record *rec, long long ttl_ms, struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };

	if (remote_need_id("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	long long timeout = ttl_ms ? (ttl_ms + 999) / 1000
				   : sbx_json_int(rec->extra, "timeout", DEFAULT_TIMEOUT_S);
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "/timeout");
	_cleanup_json_ json_t *body = json_pack("{s:I}", "timeout", (json_int_t)timeout);
	struct remote_call c = { .method = "POST",
				 .url = url,
				 .body = body,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "set the timeout of the E2B sandbox" };
	return remote_do(&r, &c, NULL, NULL, err) < 0 ? -1 : 0;
}

/* sbx update: --ttl is E2B's timeout (a running sandbox's at once; a paused one's at resume);
 * E2B sizes a sandbox by its template and cannot resize one */
static int e2b_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		      struct sbx_err *err)
{
	(void)ctx;
	if (c->cpu_millis != rec->config.cpu_millis || c->memory != rec->config.memory)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'e2b' cannot resize a sandbox (--cpus, --memory): its "
				   "template sets them");
	if (c->ttl_ms != rec->config.ttl_ms && rec->state == SBX_STATE_RUNNING)
		return set_timeout(rec, c->ttl_ms, err);
	return 0;
}

static int e2b_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	(void)ctx;
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return set_timeout(rec, rec->config.ttl_ms, err);
}

/* the last of E2B's metrics: cpuUsedPct is of all the sandbox's CPUs (cpuCount), sbx's
 * cpu_percent of one, as docker's */
static int e2b_stats(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		     struct sbx_err *err)
{
	_cleanup_(remote_release) struct remote r = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	(void)ctx;
	if (remote_check_running("E2B", rec, err) < 0 || e2b_remote(&r, err) < 0)
		return -1;
	_cleanup_free_ char *url = remote_url(&r, "sandboxes", rec->provider_id, "/metrics");
	struct remote_call c = { .url = url,
				 .flags = REMOTE_IDEMPOTENT,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = "read the metrics of the E2B sandbox" };
	if (remote_do(&r, &c, &resp, NULL, err) < 0)
		return -1;
	size_t n = json_is_array(resp) ? json_array_size(resp) : 0;
	json_t *m = n ? json_array_get(resp, n - 1) : NULL;
	json_t *pct = json_object_get(m, "cpuUsedPct"), *cpus = json_object_get(m, "cpuCount");
	json_t *o = json_object();
	json_object_set_new(o, "cpu_ms", json_null());
	json_object_set_new(
		o, "cpu_percent",
		json_is_number(pct)
			? json_real(json_number_value(pct) *
				    (json_is_number(cpus) ? json_number_value(cpus) : 1))
			: json_null());
	static const char *const map[][2] = { { "memory_bytes", "memUsed" },
					      { "memory_limit_bytes", "memTotal" },
					      { "disk_bytes", "diskUsed" } };
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		json_t *v = json_object_get(m, map[i][1]);
		json_object_set_new(o, map[i][0],
				    json_is_integer(v) && json_integer_value(v) >= 0
					    ? json_integer(json_integer_value(v))
					    : json_null());
	}
	json_object_set_new(o, "pids", json_null());
	json_object_set_new(o, "net_rx_bytes", json_null());
	json_object_set_new(o, "net_tx_bytes", json_null());
	*ret = o;
	return 0;
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
	/* E2B pauses with memory; its templates stand for images; snapshots are templates (no
	 * restore in place); no limits, volumes or net policies but on and off */
	.caps = SBX_CAP_EXEC_STDIN | SBX_CAP_EXEC_USER | SBX_CAP_EXEC_DETACH |
		SBX_CAP_PAUSE_MEMORY | SBX_CAP_RELEASE | SBX_CAP_PREVIEW | SBX_CAP_NET_NONE |
		SBX_CAP_NET_OPEN | SBX_CAP_TEMPLATE | SBX_CAP_TTL | SBX_CAP_CP | SBX_CAP_FS |
		SBX_CAP_SNAPSHOT,
	.ready = e2b_ready,
	.api_url = e2b_api_url,
	.create = e2b_create,
	.exec = e2b_exec,
	.jobs_list = e2b_jobs_list,
	.job_get = e2b_job_get,
	.job_logs = e2b_job_logs,
	.job_wait = e2b_job_wait,
	.job_kill = e2b_job_kill,
	.cp_in = e2b_cp_in,
	.cp_out = e2b_cp_out,
	.fs = e2b_fs,
	.rm = e2b_rm,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.preview = e2b_preview,
	.inspect = e2b_inspect,
	.list = e2b_list,
	.update = e2b_update,
	.keepalive = e2b_keepalive,
	.stats = e2b_stats,
	.snapshot = e2b_snapshot,
};
