/* What the cluster shows of a sandbox, read one way for inspect and ls: its pod's phase and
 * conditions, and in Sandbox and claim modes what its Sandbox and its SandboxClaim say (replicas
 * 0, an expiry, a controller that has not made the pod yet); and the waits of create and
 * resume, which read the same. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <errno.h>
#include <time.h>

#include "core/log.h"

#define START_TIMEOUT_S 300
#define WATCH_WINDOW_MS 1000 /* a starting pod is looked at again this often */
#define WATCH_LINE_MAX (4 << 20)
#define LIST_GETS_MAX 200 /* claims looked up one by one in one listing */

/* --- a pod's state -------------------------------------------------------------------------- */

static const char *condition(const json_t *obj, const char *type, const char **ret_msg)
{
	json_t *cs = json_object_get(json_object_get(obj, "status"), "conditions");
	size_t i;
	json_t *c;
	json_array_foreach (cs, i, c) {
		const char *t = sbx_json_str(c, "type");
		if (t && streq(t, type)) {
			if (ret_msg)
				*ret_msg = sbx_json_str(c, "message");
			return sbx_json_str(c, "status");
		}
	}
	return NULL;
}

/* why a pod is not running yet: the scheduler's word, or its container's waiting reason;
 * *ret_fatal when it never will (a bad image) */
static char *why_waiting(const json_t *pod, bool *ret_fatal)
{
	const char *msg = NULL;
	const char *sched = condition(pod, "PodScheduled", &msg);
	*ret_fatal = false;
	if (sched && streq(sched, "False"))
		return xasprintf("not scheduled: %s", msg ? msg : "no reason given");
	json_t *cs = json_object_get(json_object_get(pod, "status"), "containerStatuses");
	json_t *w = json_object_get(json_object_get(json_array_get(cs, 0), "state"), "waiting");
	const char *reason = sbx_json_str(w, "reason"), *m = sbx_json_str(w, "message");
	if (reason) {
		static const char *const fatal[] = {
			"ErrImagePull",		"ImagePullBackOff",
			"InvalidImageName",	"CreateContainerConfigError",
			"CreateContainerError", NULL
		};
		for (const char *const *f = fatal; *f; f++)
			*ret_fatal = *ret_fatal || streq(reason, *f);
		return xasprintf("%s%s%s", reason, m ? ": " : "", m ? m : "");
	}
	return NULL;
}

static enum sbx_state pod_state(const json_t *pod, char **ret_reason)
{
	const char *phase = sbx_json_str(json_object_get(pod, "status"), "phase");
	bool fatal = false;

	*ret_reason = NULL;
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
		return SBX_STATE_STOPPED;
	if (!phase || streq(phase, "Pending")) {
		*ret_reason = why_waiting(pod, &fatal);
		return fatal ? SBX_STATE_ERROR : SBX_STATE_CREATING;
	}
	if (streq(phase, "Running")) {
		const char *ready = condition(pod, "Ready", NULL);
		if (ready && !streq(ready, "True")) {
			*ret_reason = why_waiting(pod, &fatal);
			return fatal ? SBX_STATE_ERROR : SBX_STATE_CREATING;
		}
		return SBX_STATE_RUNNING;
	}
	if (streq(phase, "Succeeded"))
		return SBX_STATE_STOPPED;
	const char *m = sbx_json_str(json_object_get(pod, "status"), "message");
	*ret_reason = xasprintf("the pod failed%s%s", m ? ": " : "", m ? m : "");
	return SBX_STATE_ERROR;
}

/* the Ready condition of a Sandbox or a claim when it is not True: "REASON: message", with
 * its reason in *ret_reason (borrowed); NULL when it is ready or says nothing */
static char *not_ready(const json_t *obj, const char **ret_reason)
{
	json_t *cs = json_object_get(json_object_get(obj, "status"), "conditions");
	size_t i;
	json_t *c;
	*ret_reason = NULL;
	json_array_foreach (cs, i, c) {
		const char *t = sbx_json_str(c, "type"), *st = sbx_json_str(c, "status");
		const char *reason = sbx_json_str(c, "reason"), *msg = sbx_json_str(c, "message");
		if (!t || !streq(t, "Ready") || !st || streq(st, "True") || !reason)
			continue;
		*ret_reason = reason;
		return xasprintf("%s%s%s", reason, msg ? ": " : "", msg ? msg : "");
	}
	return NULL;
}

/* a claim's Sandbox: status.sandbox.name ("Name" before agent-sandbox renamed it) */
static const char *claim_sandbox(const json_t *claim)
{
	json_t *s = json_object_get(json_object_get(claim, "status"), "sandbox");
	const char *n = sbx_json_str(s, "name");
	if (!n || !*n)
		n = sbx_json_str(s, "Name");
	return n && *n ? n : NULL;
}

/* a Sandbox's pod: the annotation of one adopted from a warm pool, else its own name */
static const char *sandbox_pod(const json_t *sb)
{
	json_t *meta = json_object_get(sb, "metadata");
	const char *p = sbx_json_str(json_object_get(meta, "annotations"),
				     KUBE_POD_NAME_ANNOTATION);
	return p && *p ? p : sbx_json_str(meta, "name");
}

/* a claim's or a Sandbox's reasons that say it will not come (TemplateNotFound...) */
static bool fatal_reason(const char *r)
{
	static const char *const fatal[] = { "TemplateNotFound",
					     "EnvVarsInjectionRejected",
					     "VolumeClaimTemplatesError",
					     "ClaimExpired",
					     "SandboxExpired",
					     "PodInvalid",
					     NULL };
	for (const char *const *f = fatal; r && *f; f++)
		if (streq(r, *f))
			return true;
	return false;
}

/* --- one sandbox's view --------------------------------------------------------------------- */

/* what the cluster has of one sandbox: each object, or NULL when it is not there (known says
 * whether it was looked for) */
struct view {
	const json_t *claim, *sandbox, *pod;
	bool claim_known, sandbox_known, pod_known;
	bool pvc; /* its kept volume claim exists (pod mode) */
};

/* the state, one way for inspect and ls; *ret_reason why (malloc'd, or NULL) */
static enum sbx_state view_state(const struct sbx_record *rec, const struct view *v,
				 char **ret_reason)
{
	const char *mode = kube_mode(rec), *r = NULL;
	*ret_reason = NULL;

	if (streq(mode, "claim") && v->claim_known) {
		if (!v->claim) {
			*ret_reason = xstrdup("its SandboxClaim is gone");
			return SBX_STATE_MISSING;
		}
		char *why = not_ready(v->claim, &r);
		if (r && streq(r, "ClaimExpired")) {
			*ret_reason = xasprintf("its SandboxClaim expired (%s); its pod is gone",
						why);
			free(why);
			return SBX_STATE_STOPPED;
		}
		if (!claim_sandbox(v->claim)) {
			*ret_reason = why ? why : xstrdup("the claim has no Sandbox yet");
			return fatal_reason(r) ? SBX_STATE_ERROR : SBX_STATE_CREATING;
		}
		free(why);
	}
	if (!streq(mode, "pod") && v->sandbox_known) {
		if (!v->sandbox) {
			*ret_reason = xasprintf("its Sandbox '%s' is gone", kube_sandbox(rec));
			return SBX_STATE_MISSING;
		}
		if (sbx_json_int(json_object_get(v->sandbox, "spec"), "replicas", 1) == 0)
			return SBX_STATE_RELEASED;
	}
	if (v->pod)
		return pod_state(v->pod, ret_reason);
	if (streq(mode, "pod")) {
		/* the pod goes on purpose at pause --release; its volume claim keeps the files */
		if (v->pvc)
			return SBX_STATE_RELEASED;
		*ret_reason = xasprintf("its pod '%s' is gone", kube_pod(rec));
		return SBX_STATE_MISSING;
	}
	if (!v->sandbox)
		return SBX_STATE_MISSING;
	/* a Sandbox with no pod: expired (shutdownPolicy Retain), or its controller is at it */
	char *why = not_ready(v->sandbox, &r);
	if (r && streq(r, "SandboxExpired")) {
		*ret_reason = xasprintf("its Sandbox expired (%s); its pod is gone", why);
		free(why);
		return SBX_STATE_STOPPED;
	}
	*ret_reason = xasprintf("its Sandbox has no pod yet%s%s", why ? ": " : "", why ? why : "");
	bool fatal = fatal_reason(r);
	free(why);
	return fatal ? SBX_STATE_ERROR : SBX_STATE_CREATING;
}

long kube_get(struct kube *k, const char *api, const char *coll, const char *name, json_t **ret,
	      struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *url = kube_url(k, api, coll, name, NULL);
	json_t *j = NULL;
	const char *what = streq(coll, "pods")		? "look up the pod"
		: streq(coll, "sandboxes")		? "look up the Sandbox"
		: streq(coll, "sandboxclaims")		? "look up the SandboxClaim"
		: streq(coll, "persistentvolumeclaims") ? "look up the volume claim"
							: "look it up";
	long st = kube_call(k, NULL, url, NULL, accept, what, &j, err);
	*ret = st == 200 ? j : NULL;
	if (st != 200)
		json_decref(j);
	return st;
}

static void set_live(struct sbx_record *rec, const json_t *pod, const char *reason)
{
	json_t *remote = json_object();
	const json_t *st = json_object_get(pod, "status");
	static const char *const keep[] = { "phase", "podIP", "hostIP", "startTime" };
	for (size_t i = 0; pod && i < ARRAY_SIZE(keep); i++) {
		json_t *v = json_object_get(st, keep[i]);
		if (json_is_string(v))
			json_object_set(remote, keep[i], v);
	}
	const char *node = sbx_json_str(json_object_get(pod, "spec"), "nodeName");
	if (node)
		json_object_set_new(remote, "node", json_string(node));
	if (reason)
		json_object_set_new(remote, "reason", json_string(reason));
	json_decref(rec->live);
	rec->live = json_pack("{s:o}", "remote", remote);
}

int kube_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	_cleanup_json_ json_t *claim = NULL, *sb = NULL, *pod = NULL, *pvc = NULL;
	const char *mode = kube_mode(rec);
	struct view v = { 0 };

	if (rec->state == SBX_STATE_CREATING && !rec->provider_id)
		return 0;
	if (remote_need_id("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	const char *sname = kube_sandbox(rec), *pname = kube_pod(rec);
	if (streq(mode, "claim")) {
		if (kube_get(&k, KUBE_CLAIMS_API, "sandboxclaims", rec->provider_id, &claim, err) <
		    0)
			return -1;
		v.claim_known = true;
		v.claim = claim;
		/* the claim's word on its Sandbox is the latest */
		if (claim && claim_sandbox(claim))
			sname = claim_sandbox(claim);
	}
	if (!streq(mode, "pod") && (!v.claim_known || (claim && claim_sandbox(claim)))) {
		if (kube_get(&k, KUBE_AGENTS_API, "sandboxes", sname, &sb, err) < 0)
			return -1;
		v.sandbox_known = true;
		v.sandbox = sb;
		if (sb && !sbx_json_str(rec->extra, "pod"))
			pname = sandbox_pod(sb);
	}
	if ((!v.claim_known || claim) && (!v.sandbox_known || sb)) {
		if (kube_get(&k, "/api/v1", "pods", pname, &pod, err) < 0)
			return -1;
		v.pod_known = true;
		v.pod = pod;
	}
	const char *pvc_name = sbx_json_str(rec->extra, "pvc");
	if (streq(mode, "pod") && !pod && pvc_name) {
		if (kube_get(&k, "/api/v1", "persistentvolumeclaims", pvc_name, &pvc, err) < 0)
			return -1;
		v.pvc = pvc != NULL;
	}
	char *why = NULL;
	rec->state = view_state(rec, &v, &why);
	free(rec->state_reason);
	rec->state_reason = why;
	set_live(rec, pod, why);
	return 0;
}

/* --- ls: one listing per context and namespace the records name ------------------------------ */

/* the kubernetes records of the store (ids and states as last saved) */
static size_t load_records(struct sbx_ctx *ctx, struct sbx_record ***ret)
{
	char **ids = NULL;
	size_t n = 0, k = 0;
	struct sbx_err e = { 0 };

	*ret = NULL;
	if (sbx_store_list_ids(&ctx->store, &ids, &n, &e) < 0)
		return 0;
	struct sbx_record **recs = xcalloc(n + 1, sizeof(*recs));
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec = NULL;
		struct sbx_err e2 = { 0 };
		if (sbx_store_load(&ctx->store, ids[i], &rec, &e2) < 0)
			continue;
		if (!rec->provider || !streq(rec->provider, "kubernetes") || !rec->provider_id) {
			sbx_record_free(rec);
			continue;
		}
		recs[k++] = rec;
	}
	sbx_strv_free(ids);
	*ret = recs;
	return k;
}

/* items of a list by metadata.name (a new reference) */
static json_t *by_name(const json_t *list)
{
	json_t *m = json_object();
	size_t i;
	json_t *p;
	json_array_foreach (json_object_get(list, "items"), i, p) {
		const char *n = sbx_json_str(json_object_get(p, "metadata"), "name");
		if (n)
			json_object_set(m, n, p);
	}
	return m;
}

/* the states of the records of one context and namespace (those of recs that have them) into
 * states; -1 with err when the cluster could not be listed */
static int list_group(struct sbx_record **recs, size_t n, const struct sbx_record *first,
		      json_t *states, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	static const long accept[] = { 404, 0 };
	const char *sel = "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dsbx";
	const char *ctxn = sbx_json_str(first->extra, "context");
	const char *nsn = sbx_json_str(first->extra, "namespace");
	_cleanup_json_ json_t *pl = NULL, *sl = NULL, *cl = NULL, *vl = NULL;

	if (kube_open(&k, first, err) < 0)
		return -1;
	_cleanup_free_ char *pu = kube_url(&k, "/api/v1", "pods", NULL, sel);
	_cleanup_free_ char *vu = kube_url(&k, "/api/v1", "persistentvolumeclaims", NULL, sel);
	_cleanup_free_ char *su = kube_url(&k, KUBE_AGENTS_API, "sandboxes", NULL, sel);
	_cleanup_free_ char *cu = kube_url(&k, KUBE_CLAIMS_API, "sandboxclaims", NULL, sel);
	long sst = 0, cst = 0;
	if (kube_call(&k, NULL, pu, NULL, NULL, "list pods", &pl, err) < 0 ||
	    kube_call(&k, NULL, vu, NULL, NULL, "list volume claims", &vl, err) < 0 ||
	    (sst = kube_call(&k, NULL, su, NULL, accept, "list Sandboxes", &sl, err)) < 0 ||
	    (cst = kube_call(&k, NULL, cu, NULL, accept, "list SandboxClaims", &cl, err)) < 0)
		return -1;
	_cleanup_json_ json_t *pods = by_name(pl), *pvcs = by_name(vl);
	_cleanup_json_ json_t *sbs = by_name(sst == 200 ? sl : NULL);
	_cleanup_json_ json_t *claims = by_name(cst == 200 ? cl : NULL);
	size_t gets = 0;
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec = recs[i];
		const char *c = sbx_json_str(rec->extra, "context");
		const char *ns = sbx_json_str(rec->extra, "namespace");
		if (!c || !ns || !streq(c, ctxn) || !streq(ns, nsn))
			continue;
		const char *mode = kube_mode(rec);
		struct view v = { .claim_known = streq(mode, "claim"),
				  .sandbox_known = !streq(mode, "pod"),
				  .pod_known = true };
		_cleanup_json_ json_t *sb = NULL, *pod = NULL;
		const char *sname = kube_sandbox(rec), *pname = kube_pod(rec);
		if (v.claim_known) {
			v.claim = json_object_get(claims, rec->provider_id);
			if (v.claim && claim_sandbox(v.claim))
				sname = claim_sandbox(v.claim);
		}
		if (v.sandbox_known) {
			/* a claim's Sandbox may be a warm pool's, without sbx's labels */
			v.sandbox = json_object_get(sbs, sname);
			if (!v.sandbox && v.claim && claim_sandbox(v.claim) &&
			    gets < LIST_GETS_MAX) {
				gets++;
				if (kube_get(&k, KUBE_AGENTS_API, "sandboxes", sname, &sb, err) < 0)
					return -1;
				v.sandbox = sb;
			}
			if (v.claim && !claim_sandbox(v.claim))
				v.sandbox_known = false;
		}
		v.pod = json_object_get(pods, pname);
		/* a claim's pod has its template's labels, not sbx's */
		if (!v.pod && v.sandbox && v.claim && gets < LIST_GETS_MAX) {
			gets++;
			if (kube_get(&k, "/api/v1", "pods", pname, &pod, err) < 0)
				return -1;
			v.pod = pod;
		}
		const char *pvc = sbx_json_str(rec->extra, "pvc");
		v.pvc = pvc && json_object_get(pvcs, pvc);
		char *why = NULL;
		enum sbx_state st = view_state(rec, &v, &why);
		free(why);
		json_object_set_new(states, rec->provider_id, json_integer(st));
	}
	return 0;
}

int kube_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err)
{
	struct sbx_record **recs = NULL;
	size_t n = load_records(ctx, &recs);
	json_t *states = json_object();
	size_t groups = 0, failed = 0;

	for (size_t i = 0; i < n; i++) {
		const char *c = sbx_json_str(recs[i]->extra, "context");
		const char *ns = sbx_json_str(recs[i]->extra, "namespace");
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++) {
			const char *c2 = sbx_json_str(recs[j]->extra, "context");
			const char *n2 = sbx_json_str(recs[j]->extra, "namespace");
			seen = c && ns && c2 && n2 && streq(c, c2) && streq(ns, n2);
		}
		if (seen || !c || !ns)
			continue;
		groups++;
		struct sbx_err e = { 0 };
		if (list_group(recs, n, recs[i], states, &e) == 0)
			continue;
		/* as last seen, and said */
		failed++;
		if (failed == 1)
			*err = e;
		sbx_warn("cannot list kubernetes sandboxes in namespace '%s' of context '%s', "
			 "showing their states as last seen: %s",
			 ns, c, e.msg);
		for (size_t j = 0; j < n; j++) {
			const char *c2 = sbx_json_str(recs[j]->extra, "context");
			const char *n2 = sbx_json_str(recs[j]->extra, "namespace");
			if (c2 && n2 && streq(c, c2) && streq(ns, n2))
				json_object_set_new(states, recs[j]->provider_id,
						    json_integer(recs[j]->state));
		}
	}
	for (size_t i = 0; i < n; i++)
		sbx_record_free(recs[i]);
	free(recs);
	*ret = states;
	return 0;
}

/* --- the waits -------------------------------------------------------------------------------- */

static long long start_timeout_ms(void)
{
	const char *v = getenv("SBX_KUBE_START_TIMEOUT");
	long long s;
	if (v && *v && sbx_parse_int(v, 1, 86400, &s) == 0)
		return s * 1000;
	return START_TIMEOUT_S * 1000LL;
}

static void nap(long long *pause)
{
	struct timespec ts = { (time_t)(*pause / 1000), (long)(*pause % 1000) * 1000000L };
	(void)nanosleep(&ts, NULL);
	if (*pause < 1000)
		*pause *= 2;
}

/* a watch of one pod, as its JSON lines come: {"type": ADDED|MODIFIED|DELETED|ERROR, "object"} */
struct pod_watch {
	struct strbuf line;
	char **last;  /* why it waits, as the last event said */
	bool running; /* it runs */
	bool changed; /* it failed, ended or went: the caller looks again */
	bool bad;     /* not a watch sbx understands: the caller polls */
};

static bool watch_line(const char *p, size_t n, void *arg)
{
	struct pod_watch *w = arg;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n') {
			if (w->line.len < WATCH_LINE_MAX)
				strbuf_addch(&w->line, p[i]);
			continue;
		}
		_cleanup_json_ json_t *ev = json_loadb(strbuf_str(&w->line), w->line.len, 0, NULL);
		strbuf_reset(&w->line);
		const char *type = sbx_json_str(ev, "type");
		json_t *pod = json_object_get(ev, "object");
		if (type && streq(type, "DELETED")) {
			w->changed = true;
		} else if (type && (streq(type, "ADDED") || streq(type, "MODIFIED")) &&
			   json_is_object(pod)) {
			char *why = NULL;
			enum sbx_state s = pod_state(pod, &why);
			w->running = s == SBX_STATE_RUNNING;
			w->changed = s == SBX_STATE_ERROR || s == SBX_STATE_STOPPED;
			if (why) {
				free(*w->last);
				*w->last = why;
			}
		} else {
			w->bad = true; /* an ERROR event, or not an event */
		}
		if (w->running || w->changed || w->bad)
			return false;
	}
	return true;
}

/* waits up to ms for pod name to change, told at once by a watch (the poll's pauses would
 * add up to a second to a start): 1 when it runs, 0 when it changed otherwise or the time
 * is up (the caller looks again), -1 when the cluster gives no usable watch (it polls) */
static int watch_pod(const struct kube *k, const char *name, long long ms, char **last)
{
	struct strbuf tail = STRBUF_INIT;
	strbuf_addstr(&tail, "?watch=true&fieldSelector=metadata.name%3D");
	sbx_url_escape(&tail, name);
	strbuf_addf(&tail, "&timeoutSeconds=%lld", ms / 1000 + 1);
	_cleanup_free_ char *url = kube_url(k, "/api/v1", "pods", NULL, tail.buf);
	strbuf_release(&tail);
	const char *hdrs[3] = { 0 };
	size_t nh = 0;
	if (k->r.auth)
		hdrs[nh++] = k->r.auth;
	hdrs[nh] = "Accept: application/json";
	struct pod_watch w = { .line = STRBUF_INIT, .last = last };
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	q.url = url;
	q.headers = hdrs;
	q.on_data = watch_line;
	q.arg = &w;
	q.timeout_ms = ms;
	q.stall_s = (long)(ms / 1000) + 2;
	q.setup = k->r.setup;
	q.setup_arg = k->r.setup_arg;
	q.tls_hint = k->r.tls_hint;
	struct sbx_http_resp resp;
	struct sbx_err e = { 0 };
	long long t0 = sbx_now_ms();
	int pr = sbx_http_perform(&q, &resp, "Kubernetes", &e);
	int r = w.running ? 1 : w.changed ? 0 : -1;
	/* the window passed with the pod still starting */
	if (r < 0 && !w.bad &&
	    ((pr < 0 && resp.timed_out) ||
	     (pr == 0 && resp.status == 200 && sbx_now_ms() - t0 >= ms - 100)))
		r = 0;
	if (r < 0)
		sbx_debug("no watch of pod %s (%s, HTTP %ld); polling it", name,
			  pr < 0	  ? e.msg
				  : w.bad ? "an event sbx does not take"
					  : "it ended",
			  resp.status);
	sbx_http_resp_release(&resp);
	strbuf_release(&w.line);
	return r;
}

int kube_wait_running(struct kube *k, const char *name, const char *sandbox, struct sbx_err *err)
{
	long long t0 = sbx_now_ms(), deadline = t0 + start_timeout_ms();
	long long pause = 100;
	_cleanup_free_ char *last = NULL;
	bool watch = true;

	for (;;) {
		_cleanup_json_ json_t *pod = NULL;
		long st = kube_get(k, "/api/v1", "pods", name, &pod, err);
		if (st < 0)
			return -1;
		if (st == 404 && !sandbox)
			return sbx_err_set(err, SBX_E_REMOTE, "pod '%s' went away while starting",
					   name);
		char *why = NULL;
		enum sbx_state s = SBX_STATE_CREATING;
		if (st == 404) {
			/* what its Sandbox says while it has no pod */
			_cleanup_json_ json_t *sb = NULL;
			const char *r = NULL;
			if (kube_get(k, KUBE_AGENTS_API, "sandboxes", sandbox, &sb, err) < 0)
				return -1;
			why = sb ? not_ready(sb, &r) : xstrdup("its Sandbox went away");
			if (!sb || fatal_reason(r)) {
				int rc = sbx_err_set(err, SBX_E_REMOTE,
						     "pod '%s' did not start: %s", name,
						     why ? why : "");
				free(why);
				return rc;
			}
		} else {
			s = pod_state(pod, &why);
		}
		if (s == SBX_STATE_RUNNING) {
			free(why);
			return 0;
		}
		if (s == SBX_STATE_ERROR || s == SBX_STATE_STOPPED) {
			int r = sbx_err_set(err, SBX_E_REMOTE, "pod '%s' did not start: %s", name,
					    why ? why : "it ended");
			free(why);
			return r;
		}
		if (why) {
			free(last);
			last = why;
		}
		long long left = deadline - sbx_now_ms();
		if (left <= 0 || (!watch && left < pause))
			return sbx_err_set(
				err, SBX_E_TIMEOUT,
				"pod '%s' did not start in %lld s%s%s (SBX_KUBE_START_TIMEOUT "
				"sets the wait)",
				name, (deadline - t0) / 1000, last ? ": " : "", last ? last : "");
		if (watch) {
			int w = watch_pod(k, name, left < WATCH_WINDOW_MS ? left : WATCH_WINDOW_MS,
					  &last);
			if (w > 0)
				return 0;
			if (w == 0)
				continue;
			watch = false;
		}
		nap(&pause);
	}
}

int kube_wait_claimed(struct kube *k, struct sbx_record *rec, const char *claim,
		      struct sbx_err *err)
{
	long long t0 = sbx_now_ms(), deadline = t0 + start_timeout_ms();
	long long pause = 100;
	_cleanup_free_ char *last = NULL;

	for (;;) {
		_cleanup_json_ json_t *c = NULL, *sb = NULL;
		if (kube_get(k, KUBE_CLAIMS_API, "sandboxclaims", claim, &c, err) < 0)
			return -1;
		if (!c)
			return sbx_err_set(err, SBX_E_REMOTE, "SandboxClaim '%s' went away", claim);
		const char *name = claim_sandbox(c), *r = NULL;
		char *why = not_ready(c, &r);
		if (name) {
			free(why);
			if (kube_get(k, KUBE_AGENTS_API, "sandboxes", name, &sb, err) < 0)
				return -1;
			/* adopted from a warm pool: its pod is the pool's, named on the Sandbox */
			json_object_set_new(rec->extra, "sandbox", json_string(name));
			json_object_set_new(rec->extra, "pod",
					    json_string(sb ? sandbox_pod(sb) : name));
			sbx_debug("claim %s: Sandbox %s, pod %s", claim, name, kube_pod(rec));
			return 0;
		}
		if (fatal_reason(r)) {
			int rc = sbx_err_set(err, SBX_E_REMOTE,
					     "SandboxClaim '%s' got no Sandbox: %s", claim, why);
			free(why);
			return rc;
		}
		if (why) {
			free(last);
			last = why;
		}
		if (sbx_now_ms() + pause > deadline)
			return sbx_err_set(err, SBX_E_TIMEOUT,
					   "SandboxClaim '%s' got no Sandbox in %lld s%s%s "
					   "(SBX_KUBE_START_TIMEOUT sets the wait)",
					   claim, (deadline - t0) / 1000, last ? ": " : "",
					   last ? last : "");
		nap(&pause);
	}
}

int kube_wait_gone(struct kube *k, const char *name, struct sbx_err *err)
{
	long long deadline = sbx_now_ms() + 60000;
	while (sbx_now_ms() < deadline) {
		_cleanup_json_ json_t *pod = NULL;
		long st = kube_get(k, "/api/v1", "pods", name, &pod, err);
		if (st < 0)
			return -1;
		if (st == 404)
			return 0;
		struct timespec ts = { 0, 200 * 1000000L };
		(void)nanosleep(&ts, NULL);
	}
	return sbx_err_set(err, SBX_E_TIMEOUT, "pod '%s' was not gone after 60 s", name);
}
