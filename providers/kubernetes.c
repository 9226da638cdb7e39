/* The Kubernetes provider's control plane: a sandbox is a pod (plus a PVC with --disk, which
 * keeps its workdir across pause --release), or, where the cluster serves agents.x-k8s.io, a
 * Sandbox (a SandboxClaim for --image template:NAME). Every call reads the kubeconfig. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <errno.h>
#include <time.h>

#include "core/log.h"

#define CONTROL_TIMEOUT_MS 30000
#define START_TIMEOUT_S 300
#define WATCH_WINDOW_MS 1000 /* a starting pod is looked at again this often */
#define WATCH_LINE_MAX (4 << 20)
#define AGENTS_GROUP "agents.x-k8s.io"
#define AGENTS_API "/apis/agents.x-k8s.io/v1alpha1"
#define CLAIMS_API "/apis/extensions.agents.x-k8s.io/v1alpha1"
#define TEMPLATE_PREFIX "template:"

static const char *const runtimes[] = { "*", NULL };

/* --- the connection ----------------------------------------------------------------------- */

int kube_open(struct kube *k, const struct sbx_record *rec, struct sbx_err *err)
{
	memset(k, 0, sizeof(*k));
	const char *ctx = rec ? sbx_json_str(rec->extra, "context") : NULL;
	const char *ns = rec ? sbx_json_str(rec->extra, "namespace") : NULL;
	/* a sandbox stays where it was made, whatever the environment says now */
	struct sbx_kubeconfig kc = { 0 };
	if (sbx_kubeconfig_load(ctx, ns, &kc, err) < 0)
		return -1;
	k->kc = kc;
	k->ns = xstrdup(k->kc.namespace);
	k->key_hint = xasprintf("the credentials of user '%s' of context '%s' in '%s'",
				k->kc.user ? k->kc.user : "", k->kc.context, k->kc.path);
	k->tls_hint = xasprintf(" (check the certificate-authority of cluster '%s' in '%s')",
				k->kc.cluster, k->kc.path);
	if (sbx_kubeconfig_token(&k->kc, &k->token, err) < 0) {
		kube_close(k);
		return -1;
	}
	k->r.label = "Kubernetes";
	k->r.key_var = k->key_hint;
	k->r.api = xstrdup(k->kc.server);
	k->r.auth = k->token ? xasprintf("Authorization: Bearer %s", k->token) : NULL;
	k->r.setup = sbx_kubeconfig_curl_setup;
	k->r.setup_arg = &k->kc;
	k->r.tls_hint = k->tls_hint;
	return 0;
}

void kube_close(struct kube *k)
{
	remote_release(&k->r);
	sbx_kubeconfig_release(&k->kc);
	free(k->ns);
	free(k->key_hint);
	free(k->tls_hint);
	memset(k, 0, sizeof(*k));
}

const char *kube_pod(const struct sbx_record *rec)
{
	const char *p = sbx_json_str(rec->extra, "pod");
	return p ? p : rec->provider_id;
}

/* BASE + group path + /namespaces/NS/COLLECTION[/NAME][TAIL] */
static char *kurl(const struct kube *k, const char *api, const char *coll, const char *name,
		  const char *tail)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s%s/namespaces/", k->r.api, api);
	sbx_url_escape(&sb, k->ns);
	strbuf_addf(&sb, "/%s", coll);
	if (name) {
		strbuf_addch(&sb, '/');
		sbx_url_escape(&sb, name);
	}
	strbuf_addstr(&sb, tail ? tail : "");
	return strbuf_detach(&sb);
}

static long kcall(const struct kube *k, const char *method, const char *url, json_t *body,
		  const long *accept, const char *what, json_t **ret, struct sbx_err *err)
{
	static const char *const patch[] = { "Content-Type: application/merge-patch+json", NULL };
	struct remote_call c = { .method = method,
				 .url = url,
				 .body = body,
				 .accept = accept,
				 .headers = method && streq(method, "PATCH") ? patch : NULL,
				 .flags = !method || streq(method, "DELETE") || streq(method, "GET")
					 ? REMOTE_IDEMPOTENT
					 : 0,
				 .timeout_ms = CONTROL_TIMEOUT_MS,
				 .what = what };
	long st = remote_do(&k->r, &c, ret, NULL, err);
	if (st < 0)
		kube_reword(err);
	return st;
}

void kube_reword(struct sbx_err *err)
{
	/* remote.c words a 401 for an API key; a cluster takes credentials */
	const char *key = "rejected the API key";
	char *at = strstr(err->msg, key);
	if (!at || (err->http_status != 401 && err->http_status != 403))
		return;
	char rest[sizeof(err->msg)];
	snprintf(rest, sizeof(rest), "%s", at + strlen(key));
	snprintf(at, sizeof(err->msg) - (size_t)(at - err->msg), "refused the credentials%s", rest);
}

/* --- the mode: pod, Sandbox, SandboxClaim ------------------------------------------------------ */

static bool agents_served(const struct kube *k, struct sbx_err *err, int *ret)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *url = xasprintf("%s/apis", k->r.api);
	if (kcall(k, NULL, url, NULL, NULL, "discover the cluster's APIs", &j, err) < 0)
		return false;
	json_t *groups = json_object_get(j, "groups");
	size_t i;
	json_t *g;
	*ret = 0;
	json_array_foreach (groups, i, g) {
		const char *n = sbx_json_str(g, "name");
		if (n && streq(n, AGENTS_GROUP))
			*ret = 1;
	}
	return true;
}

/* "pod" or "sandbox" (SBX_KUBE_MODE, else by discovery) */
static int choose_mode(const struct kube *k, const char **ret, struct sbx_err *err)
{
	const char *m = getenv("SBX_KUBE_MODE");
	int served = 0;

	if (m && *m && !streq(m, "auto")) {
		if (!streq(m, "pod") && !streq(m, "sandbox"))
			return sbx_err_set(err, SBX_E_USAGE,
					   "SBX_KUBE_MODE is '%s'; it takes pod, sandbox or auto",
					   m);
		*ret = streq(m, "pod") ? "pod" : "sandbox";
		return 0;
	}
	if (!agents_served(k, err, &served))
		return -1;
	*ret = served ? "sandbox" : "pod";
	return 0;
}

/* --- what a pod is made of ------------------------------------------------------------------ */

static json_t *labels(const struct sbx_record *rec)
{
	json_t *l = remote_labels(rec);
	json_object_set_new(l, "app.kubernetes.io/managed-by", json_string("sbx"));
	return l;
}

/* the sandbox's container sleeps; its commands come by exec */
static json_t *pod_spec(const struct sbx_record *rec, const char *pvc)
{
	const struct sbx_config *o = &rec->config;
	json_t *env = json_array();
	json_t *env_obj = remote_env_object(o->env);
	const char *key;
	json_t *v;
	json_object_foreach (env_obj, key, v)
		json_array_append_new(env, json_pack("{s:s, s:O}", "name", key, "value", v));
	json_decref(env_obj);
	json_t *c = json_pack("{s:s, s:s, s:[sss], s:o}", "name", KUBE_CONTAINER, "image",
			      o->image.ref, "command", "/bin/sh", "-c",
			      "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done",
			      "env", env);
	/* with --disk the volume is the workdir */
	if (o->workdir || o->disk)
		json_object_set_new(c, "workingDir",
				    json_string(o->workdir ? o->workdir : "/workspace"));
	if (o->cpu_millis || o->memory) {
		json_t *lim = json_object();
		if (o->cpu_millis) {
			_cleanup_free_ char *cpu = xasprintf("%lldm", o->cpu_millis);
			json_object_set_new(lim, "cpu", json_string(cpu));
		}
		if (o->memory)
			json_object_set_new(lim, "memory", json_integer(o->memory));
		json_object_set_new(c, "resources", json_pack("{s:o}", "limits", lim));
	}
	json_t *spec = json_pack("{s:b, s:b, s:s, s:i, s:[o]}", "automountServiceAccountToken", 0,
				 "enableServiceLinks", 0, "restartPolicy", "Never",
				 "terminationGracePeriodSeconds", 5, "containers", c);
	if (o->runtime)
		json_object_set_new(spec, "runtimeClassName", json_string(o->runtime));
	if (o->net.n_add_hosts) {
		json_t *ha = json_array();
		for (size_t i = 0; i < o->net.n_add_hosts; i++)
			json_array_append_new(ha,
					      json_pack("{s:s, s:[s]}", "ip",
							o->net.add_hosts[i].addr, "hostnames",
							o->net.add_hosts[i].name));
		json_object_set_new(spec, "hostAliases", ha);
	}
	if (pvc) {
		json_object_set_new(c, "volumeMounts",
				    json_pack("[{s:s, s:s}]", "name", "work", "mountPath",
					      o->workdir ? o->workdir : "/workspace"));
		json_object_set_new(spec, "volumes",
				    json_pack("[{s:s, s:{s:s}}]", "name", "work",
					      "persistentVolumeClaim", "claimName", pvc));
	}
	return spec;
}

static json_t *pvc_body(const struct sbx_record *rec, const char *name)
{
	_cleanup_free_ char *size = xasprintf("%lld", rec->config.disk);
	return json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1",
			 "kind", "PersistentVolumeClaim", "metadata", "name", name, "labels",
			 labels(rec), "spec", "accessModes", "ReadWriteOnce", "resources",
			 "requests", "storage", size);
}

static int make_pod(const struct kube *k, const struct sbx_record *rec, const char *name,
		    const char *pvc, struct sbx_err *err)
{
	_cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion", "v1",
						"kind", "Pod", "metadata", "name", name, "labels",
						labels(rec), "spec", pod_spec(rec, pvc));
	_cleanup_free_ char *url = kurl(k, "/api/v1", "pods", NULL, NULL);
	return kcall(k, "POST", url, body, NULL, "create the pod", NULL, err) < 0 ? -1 : 0;
}

/* --- a pod's state -------------------------------------------------------------------------- */

static const char *condition(const json_t *pod, const char *type, const char **ret_msg)
{
	json_t *cs = json_object_get(json_object_get(pod, "status"), "conditions");
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

static long get_pod(const struct kube *k, const char *name, json_t **ret, struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *url = kurl(k, "/api/v1", "pods", name, NULL);
	return kcall(k, NULL, url, NULL, accept, "look up the pod", ret, err);
}

static long long start_timeout_ms(void)
{
	const char *v = getenv("SBX_KUBE_START_TIMEOUT");
	long long s;
	if (v && *v && sbx_parse_int(v, 1, 86400, &s) == 0)
		return s * 1000;
	return START_TIMEOUT_S * 1000LL;
}

/* until the pod runs: the scheduler's or the kubelet's reason when it does not */
/* where a Sandbox or a SandboxClaim (api, coll) stands while it has no pod: its conditions'
 * word, *ret_fatal when it says it never will (a template that does not exist) */
static char *owner_waiting(const struct kube *k, const char *api, const char *coll,
			   const char *name, bool *ret_fatal, struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *url = kurl(k, api, coll, name, NULL);
	long st = kcall(k, NULL, url, NULL, accept, "look up the Sandbox", &j, err);

	*ret_fatal = false;
	if (st == 404) {
		*ret_fatal = true;
		return xasprintf("its %s went away",
				 streq(coll, "sandboxes") ? "Sandbox" : "claim");
	}
	json_t *cs = json_object_get(json_object_get(j, "status"), "conditions");
	size_t i;
	json_t *c;
	json_array_foreach (cs, i, c) {
		const char *status = sbx_json_str(c, "status"), *reason = sbx_json_str(c, "reason");
		const char *msg = sbx_json_str(c, "message");
		if (!status || !streq(status, "False") || !reason)
			continue;
		*ret_fatal = streq(reason, "TemplateNotFound") || streq(reason, "SandboxExpired");
		return xasprintf("%s%s%s", reason, msg ? ": " : "", msg ? msg : "");
	}
	return xstrdup("the Sandbox's controller has not made its pod yet");
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
	_cleanup_free_ char *url = kurl(k, "/api/v1", "pods", NULL, tail.buf);
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

/* owner_api, owner_coll: the Sandbox or claim that makes the pod (NULL: a pod of sbx's own) */
static int wait_running(const struct kube *k, const char *name, const char *owner_api,
			const char *owner_coll, struct sbx_err *err)
{
	bool owned = owner_api != NULL;
	long long t0 = sbx_now_ms(), deadline = t0 + start_timeout_ms();
	long long pause = 100;
	_cleanup_free_ char *last = NULL;
	bool watch = true;

	for (;;) {
		_cleanup_json_ json_t *pod = NULL;
		long st = get_pod(k, name, &pod, err);
		if (st < 0)
			return -1;
		if (st == 404 && !owned)
			return sbx_err_set(err, SBX_E_REMOTE, "pod '%s' went away while starting",
					   name);
		char *why = NULL;
		bool fatal = false;
		if (st == 404) {
			why = owner_waiting(k, owner_api, owner_coll, name, &fatal, err);
			if (fatal) {
				int r = sbx_err_set(err, SBX_E_REMOTE, "pod '%s' did not start: %s",
						    name, why);
				free(why);
				return r;
			}
		}
		enum sbx_state s = st == 404 ? SBX_STATE_CREATING : pod_state(pod, &why);
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
		struct timespec ts = { (time_t)(pause / 1000), (long)(pause % 1000) * 1000000L };
		(void)nanosleep(&ts, NULL);
		if (pause < 1000)
			pause *= 2;
	}
}

/* --- create --------------------------------------------------------------------------------- */

static const char *owner_api(const struct sbx_record *rec)
{
	const char *m = sbx_json_str(rec->extra, "mode");
	return !m || streq(m, "pod") ? NULL : streq(m, "claim") ? CLAIMS_API : AGENTS_API;
}

static const char *owner_coll(const struct sbx_record *rec)
{
	const char *m = sbx_json_str(rec->extra, "mode");
	return !m || streq(m, "pod") ? NULL : streq(m, "claim") ? "sandboxclaims" : "sandboxes";
}

static char *rfc3339_in(long long ms)
{
	return sbx_time_rfc3339((long long)time(NULL) + (ms + 999) / 1000);
}

static int create_sandbox(const struct kube *k, struct sbx_record *rec, const char *name,
			  struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;
	_cleanup_json_ json_t *body = NULL;
	_cleanup_free_ char *url = NULL;
	const char *what;

	if (startswith(o->image.ref, TEMPLATE_PREFIX)) {
		const char *tpl = o->image.ref + strlen(TEMPLATE_PREFIX);
		body = json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:{s:s}}}", "apiVersion",
				 "extensions.agents.x-k8s.io/v1alpha1", "kind", "SandboxClaim",
				 "metadata", "name", name, "labels", labels(rec), "spec",
				 "sandboxTemplateRef", "name", tpl);
		url = kurl(k, CLAIMS_API, "sandboxclaims", NULL, NULL);
		what = "create the SandboxClaim";
		json_object_set_new(rec->extra, "mode", json_string("claim"));
		json_object_set_new(rec->extra, "template", json_string(tpl));
	} else {
		json_t *ps = pod_spec(rec, NULL);
		json_t *spec = json_pack("{s:{s:{s:o}, s:o}, s:i}", "podTemplate", "metadata",
					 "labels", labels(rec), "spec", ps, "replicas", 1);
		if (o->disk) {
			/* the controller names the claim work-NAME and mounts it as volume work */
			_cleanup_free_ char *size = xasprintf("%lld", o->disk);
			json_t *c = json_array_get(json_object_get(ps, "containers"), 0);
			json_object_set_new(c, "volumeMounts",
					    json_pack("[{s:s, s:s}]", "name", "work", "mountPath",
						      o->workdir ? o->workdir : "/workspace"));
			json_object_set_new(spec, "volumeClaimTemplates",
					    json_pack("[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}]",
						      "metadata", "name", "work", "spec",
						      "accessModes", "ReadWriteOnce", "resources",
						      "requests", "storage", size));
			json_object_set_new(rec->extra, "pvc", json_pack("s++", "work-", name, ""));
		}
		if (o->ttl_ms) {
			_cleanup_free_ char *t = rfc3339_in(o->ttl_ms);
			json_object_set_new(spec, "shutdownTime", json_string(t));
			/* --ttl-action rm: the Sandbox goes too (else its pod alone) */
			json_object_set_new(spec, "shutdownPolicy",
					    json_string(o->ttl_rm ? "Delete" : "Retain"));
		}
		body = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion",
				 "agents.x-k8s.io/v1alpha1", "kind", "Sandbox", "metadata", "name",
				 name, "labels", labels(rec), "spec", spec);
		url = kurl(k, AGENTS_API, "sandboxes", NULL, NULL);
		what = "create the Sandbox";
		json_object_set_new(rec->extra, "mode", json_string("sandbox"));
	}
	if (kcall(k, "POST", url, body, NULL, what, NULL, err) < 0)
		return -1;
	rec->provider_id = xstrdup(name);
	json_object_set_new(rec->extra, "pod", json_string(name));
	return 0;
}

static int kube_create(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const struct sbx_config *o = &rec->config;
	const char *mode = NULL;

	if (!o->image.ref)
		return sbx_err_set(err, SBX_E_USAGE,
				   "provider 'kubernetes' needs --image: a container image the "
				   "cluster can pull, or template:NAME for a SandboxTemplate");
	if (kube_open(&k, NULL, err) < 0 || choose_mode(&k, &mode, err) < 0)
		return -1;
	if (startswith(o->image.ref, TEMPLATE_PREFIX) && !streq(mode, "sandbox"))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "--image %s needs the agents.x-k8s.io API (SandboxTemplate), "
				   "which the cluster does not serve",
				   o->image.ref);
	if (o->ttl_ms && !streq(mode, "sandbox"))
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"--ttl needs the agents.x-k8s.io API (a Sandbox's shutdownTime), "
			"which the cluster does not serve");
	_cleanup_free_ char *name = xasprintf("sbx-%s", rec->id);
	json_decref(rec->extra);
	rec->extra = json_pack("{s:s, s:s, s:s}", "context", k.kc.context, "namespace", k.ns,
			       "mode", mode);
	if (streq(mode, "sandbox")) {
		if (create_sandbox(&k, rec, name, err) < 0)
			return -1;
	} else {
		const char *pvc = o->disk ? name : NULL;
		if (pvc) {
			_cleanup_json_ json_t *b = pvc_body(rec, pvc);
			_cleanup_free_ char *url = kurl(&k, "/api/v1", "persistentvolumeclaims",
							NULL, NULL);
			if (kcall(&k, "POST", url, b, NULL, "create the volume claim", NULL, err) <
			    0)
				return -1;
			json_object_set_new(rec->extra, "pvc", json_string(pvc));
		}
		/* rm cleans up from here on */
		rec->provider_id = xstrdup(name);
		json_object_set_new(rec->extra, "pod", json_string(name));
		if (make_pod(&k, rec, name, pvc, err) < 0)
			return -1;
	}
	if (wait_running(&k, kube_pod(rec), owner_api(rec), owner_coll(rec), err) < 0)
		return sbx_err_prefix(err, "cannot start the sandbox");
	sbx_debug("pod %s/%s running (%s mode)", k.ns, kube_pod(rec), mode);
	return 0;
}

/* --- rm, inspect, ls ------------------------------------------------------------------------ */

static int kube_delete(const struct kube *k, const char *api, const char *coll, const char *name,
		       const char *what, struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *url = kurl(k, api, coll, name, "?gracePeriodSeconds=0");
	return kcall(k, "DELETE", url, NULL, accept, what, NULL, err) < 0 ? -1 : 0;
}

static int kube_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = sbx_json_str(rec->extra, "mode");
	const char *pvc = sbx_json_str(rec->extra, "pvc");

	kube_previews_stop(rec);
	if (!rec->provider_id)
		return 0; /* never made in the cluster */
	if (kube_open(&k, rec, err) < 0)
		return -1;
	if (mode && streq(mode, "claim"))
		return kube_delete(&k, CLAIMS_API, "sandboxclaims", rec->provider_id,
				   "remove the SandboxClaim", err);
	if (mode && streq(mode, "sandbox"))
		return kube_delete(&k, AGENTS_API, "sandboxes", rec->provider_id,
				   "remove the Sandbox", err);
	if (kube_delete(&k, "/api/v1", "pods", rec->provider_id, "remove the pod", err) < 0)
		return -1;
	if (pvc &&
	    kube_delete(&k, "/api/v1", "persistentvolumeclaims", pvc, "remove the volume claim",
			err) < 0)
		return -1;
	return 0;
}

static void set_live(struct sbx_record *rec, const json_t *pod, const char *reason)
{
	json_t *remote = json_object();
	const json_t *st = json_object_get(pod, "status");
	static const char *const keep[] = { "phase", "podIP", "hostIP", "startTime" };
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
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

/* the Sandbox (or the claim's): 1 when it exists, its replicas in *ret_replicas */
static long get_sandbox(const struct kube *k, const struct sbx_record *rec, long *ret_replicas,
			struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *url = kurl(k, AGENTS_API, "sandboxes", kube_pod(rec), NULL);
	long st = kcall(k, NULL, url, NULL, accept, "look up the Sandbox", &j, err);
	if (st < 0)
		return -1;
	if (st == 404)
		return 0;
	*ret_replicas = (long)sbx_json_int(json_object_get(j, "spec"), "replicas", 1);
	return 1;
}

static int kube_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	_cleanup_json_ json_t *pod = NULL;
	const char *mode = sbx_json_str(rec->extra, "mode");

	if (rec->state == SBX_STATE_CREATING && !rec->provider_id)
		return 0;
	if (remote_need_id("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	if (mode && !streq(mode, "pod")) {
		long replicas = 1;
		long s = get_sandbox(&k, rec, &replicas, err);
		if (s < 0)
			return -1;
		if (s == 0 && streq(mode, "sandbox")) {
			rec->state = SBX_STATE_MISSING;
			return 0;
		}
		if (s == 1 && replicas == 0) {
			rec->state = SBX_STATE_RELEASED;
			return 0;
		}
	}
	long st = get_pod(&k, kube_pod(rec), &pod, err);
	if (st < 0)
		return -1;
	if (st == 404) {
		/* released: the pod went on purpose, its claim (or Sandbox) stays */
		rec->state = rec->state == SBX_STATE_RELEASED ? SBX_STATE_RELEASED
			: mode && streq(mode, "claim")	      ? SBX_STATE_CREATING
							      : SBX_STATE_MISSING;
		return 0;
	}
	char *why = NULL;
	rec->state = pod_state(pod, &why);
	free(rec->state_reason);
	rec->state_reason = why;
	set_live(rec, pod, why);
	return 0;
}

static int kube_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	_cleanup_json_ json_t *pods = NULL, *sbs = NULL;
	const char *sel = "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dsbx";

	if (kube_open(&k, NULL, err) < 0)
		return -1;
	_cleanup_free_ char *url = kurl(&k, "/api/v1", "pods", NULL, sel);
	if (kcall(&k, NULL, url, NULL, NULL, "list pods", &pods, err) < 0)
		return -1;
	json_t *all = json_object();
	size_t i;
	json_t *p;
	_cleanup_json_ json_t *pvcs = NULL;
	_cleanup_free_ char *purl = kurl(&k, "/api/v1", "persistentvolumeclaims", NULL, sel);
	struct sbx_err e1 = { 0 };
	if (kcall(&k, NULL, purl, NULL, NULL, "list volume claims", &pvcs, &e1) >= 0) {
		json_array_foreach (json_object_get(pvcs, "items"), i, p) {
			const char *n = sbx_json_str(json_object_get(p, "metadata"), "name");
			if (n)
				json_object_set_new(all, n, json_integer(SBX_STATE_RELEASED));
		}
	}
	/* released Sandboxes have no pod; kept PVCs say a released pod's files are there */
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *surl = kurl(&k, AGENTS_API, "sandboxes", NULL, sel);
	struct sbx_err e2 = { 0 };
	if (kcall(&k, NULL, surl, NULL, accept, "list Sandboxes", &sbs, &e2) >= 0) {
		json_array_foreach (json_object_get(sbs, "items"), i, p) {
			const char *n = sbx_json_str(json_object_get(p, "metadata"), "name");
			if (n && sbx_json_int(json_object_get(p, "spec"), "replicas", 1) == 0)
				json_object_set_new(all, n, json_integer(SBX_STATE_RELEASED));
			else if (n)
				json_object_set_new(all, n, json_integer(SBX_STATE_CREATING));
		}
	}
	/* a claim's pod is its template's, without sbx's labels: looked up by name */
	_cleanup_json_ json_t *claims = NULL;
	_cleanup_free_ char *curl_ = kurl(&k, CLAIMS_API, "sandboxclaims", NULL, sel);
	struct sbx_err e3 = { 0 };
	if (kcall(&k, NULL, curl_, NULL, accept, "list SandboxClaims", &claims, &e3) >= 0) {
		json_array_foreach (json_object_get(claims, "items"), i, p) {
			const char *n = sbx_json_str(json_object_get(p, "metadata"), "name");
			_cleanup_json_ json_t *pod = NULL;
			if (!n || i >= 200)
				continue;
			long st = get_pod(&k, n, &pod, &e3);
			char *why = NULL;
			if (st == 200)
				json_object_set_new(all, n, json_integer(pod_state(pod, &why)));
			free(why);
		}
	}
	json_array_foreach (json_object_get(pods, "items"), i, p) {
		const char *n = sbx_json_str(json_object_get(p, "metadata"), "name");
		char *why = NULL;
		if (n)
			json_object_set_new(all, n, json_integer(pod_state(p, &why)));
		free(why);
	}
	*ret = all;
	return 0;
}

/* --- pause --release, resume ------------------------------------------------------------------ */

static int scale(const struct kube *k, const struct sbx_record *rec, int replicas,
		 struct sbx_err *err)
{
	_cleanup_json_ json_t *body = json_pack("{s:{s:i}}", "spec", "replicas", replicas);
	_cleanup_free_ char *url = kurl(k, AGENTS_API, "sandboxes", kube_pod(rec), NULL);
	return kcall(k, "PATCH", url, body, NULL,
		     replicas ? "scale the Sandbox up" : "scale the Sandbox to zero", NULL, err) < 0
		? -1
		: 0;
}

static int wait_gone(const struct kube *k, const char *name, struct sbx_err *err)
{
	long long deadline = sbx_now_ms() + 60000;
	while (sbx_now_ms() < deadline) {
		_cleanup_json_ json_t *pod = NULL;
		long st = get_pod(k, name, &pod, err);
		if (st < 0)
			return -1;
		if (st == 404)
			return 0;
		struct timespec ts = { 0, 200 * 1000000L };
		(void)nanosleep(&ts, NULL);
	}
	return sbx_err_set(err, SBX_E_TIMEOUT, "pod '%s' was not gone after 60 s", name);
}

static int kube_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
		      struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = sbx_json_str(rec->extra, "mode");
	const char *l = remote_label(rec);

	if (!o->release)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'kubernetes' cannot pause '%s' with its memory: "
				   "Kubernetes has no memory pause; 'sbx pause --release %s' ends "
				   "its processes and keeps its files",
				   l, l);
	if (remote_need_id("Kubernetes", rec, err) < 0)
		return -1;
	if (rec->state == SBX_STATE_RELEASED)
		return 0;
	bool pod_mode = !mode || streq(mode, "pod");
	if (!sbx_json_str(rec->extra, "pvc") && !(mode && streq(mode, "claim")))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "cannot release '%s': its files live in the pod alone (create "
				   "it with --disk SIZE for a volume that keeps its workdir)",
				   l);
	if (kube_open(&k, rec, err) < 0)
		return -1;
	if (pod_mode) {
		if (kube_delete(&k, "/api/v1", "pods", kube_pod(rec), "remove the pod", err) < 0)
			return -1;
	} else if (scale(&k, rec, 0, err) < 0) {
		return -1;
	}
	if (wait_gone(&k, kube_pod(rec), err) < 0)
		return -1;
	rec->state = SBX_STATE_RELEASED;
	return 0;
}

static int kube_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = sbx_json_str(rec->extra, "mode");

	if (remote_need_id("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	if (rec->state == SBX_STATE_RUNNING)
		return 0;
	if (!mode || streq(mode, "pod")) {
		if (rec->state != SBX_STATE_RELEASED)
			return sbx_err_set(err, SBX_E_STATE,
					   "cannot resume '%s': its pod is %s and Kubernetes does "
					   "not restart it; remove it and create another",
					   remote_label(rec), sbx_state_name(rec->state));
		if (make_pod(&k, rec, kube_pod(rec), sbx_json_str(rec->extra, "pvc"), err) < 0)
			return -1;
	} else if (scale(&k, rec, 1, err) < 0) {
		return -1;
	}
	if (wait_running(&k, kube_pod(rec), owner_api(rec), owner_coll(rec), err) < 0)
		return sbx_err_prefix(err, "cannot resume '%s'", remote_label(rec));
	rec->state = SBX_STATE_RUNNING;
	return 0;
}

/* sbx keepalive: a Sandbox's shutdownTime is a deadline; it moves to --ttl from now */
static int kube_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = sbx_json_str(rec->extra, "mode");

	if (remote_check_running("Kubernetes", rec, err) < 0)
		return -1;
	if (!mode || !streq(mode, "sandbox") || !rec->config.ttl_ms)
		return 0; /* nothing ends it on its own */
	if (kube_open(&k, rec, err) < 0)
		return -1;
	_cleanup_free_ char *t = rfc3339_in(rec->config.ttl_ms);
	_cleanup_json_ json_t *body = json_pack("{s:{s:s}}", "spec", "shutdownTime", t);
	_cleanup_free_ char *url = kurl(&k, AGENTS_API, "sandboxes", kube_pod(rec), NULL);
	return kcall(&k, "PATCH", url, body, NULL, "move the Sandbox's shutdownTime", NULL, err) < 0
		? -1
		: 0;
}

/* --- the provider --------------------------------------------------------------------------- */

static int kube_ready(struct sbx_err *err)
{
	struct sbx_kubeconfig kc = { 0 };
	/* no credential plugin runs here: reading the configuration says whether it is one */
	if (sbx_kubeconfig_load(NULL, NULL, &kc, err) < 0)
		return -1;
	sbx_kubeconfig_release(&kc);
	return 0;
}

static char *kube_api_url(void)
{
	struct sbx_kubeconfig kc = { 0 };
	struct sbx_err e = { 0 };
	if (sbx_kubeconfig_load(NULL, NULL, &kc, &e) < 0)
		return NULL;
	char *s = xstrdup(kc.server);
	sbx_kubeconfig_release(&kc);
	return s;
}

const struct sbx_provider sbx_provider_kubernetes = {
	.name = "kubernetes",
	.summary = "pods (or agents.x-k8s.io Sandboxes) in a Kubernetes cluster (kubeconfig)",
	.remote = true,
	.key_var = NULL,
	/* no memory pause; release needs --disk (pods) or a Sandbox; limits map to the
	 * container's; --image is the cluster's to pull (or template:NAME) */
	.caps = SBX_CAP_EXEC_STDIN | SBX_CAP_EXEC_TTY | SBX_CAP_EXEC_DETACH | SBX_CAP_RELEASE |
		SBX_CAP_LIMIT_CPU | SBX_CAP_LIMIT_MEMORY | SBX_CAP_DISK | SBX_CAP_ADD_HOST |
		SBX_CAP_TEMPLATE | SBX_CAP_TTL | SBX_CAP_CP | SBX_CAP_PREVIEW,
	.default_workdir = NULL,
	.runtimes = runtimes,
	.ready = kube_ready,
	.api_url = kube_api_url,
	.create = kube_create,
	.exec = kube_exec,
	.cp_in = kube_cp_in,
	.cp_out = kube_cp_out,
	.rm = kube_rm,
	.pause = kube_pause,
	.resume = kube_resume,
	.preview = kube_preview,
	.inspect = kube_inspect,
	.list = kube_list,
	.keepalive = kube_keepalive,
};
