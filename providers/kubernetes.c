/* The Kubernetes provider's control plane: a sandbox is a pod (plus a PVC with --disk, which
 * keeps its workdir across pause --release), or, where the cluster serves agents.x-k8s.io, a
 * Sandbox (a SandboxClaim for --image template:NAME). Every call reads the kubeconfig. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <errno.h>
#include <time.h>

#include "core/log.h"

#define CONTROL_TIMEOUT_MS 30000
#define AGENTS_GROUP "agents.x-k8s.io"
#define AGENTS_API KUBE_AGENTS_API
#define CLAIMS_API KUBE_CLAIMS_API
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
	k->tls_hint = k->kc.cert
		? xasprintf(" (check the certificate-authority of cluster '%s' "
			    "and the client certificate of user '%s' in '%s')",
			    k->kc.cluster, k->kc.user ? k->kc.user : "", k->kc.path)
		: xasprintf(" (check the certificate-authority of cluster '%s' in "
			    "'%s')",
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

const char *kube_sandbox(const struct sbx_record *rec)
{
	const char *s = sbx_json_str(rec->extra, "sandbox");
	return s ? s : rec->provider_id;
}

const char *kube_mode(const struct sbx_record *rec)
{
	const char *m = sbx_json_str(rec->extra, "mode");
	return m && (streq(m, "sandbox") || streq(m, "claim")) ? m : "pod";
}

char *kube_url(const struct kube *k, const char *api, const char *coll, const char *name,
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

bool kube_reauth(struct kube *k)
{
	const char *tok = NULL;
	struct sbx_err e = { 0 };

	if (!k->kc.exec.command || k->reauthed)
		return false;
	k->reauthed = true;
	sbx_debug("the cluster refused the credential plugin's token: asking it again");
	if (sbx_kubeconfig_renew(&k->kc, &e) < 0 || sbx_kubeconfig_token(&k->kc, &tok, &e) < 0) {
		sbx_debug("the credential plugin failed again: %s", e.msg);
		return false;
	}
	free(k->r.auth);
	k->r.auth = tok ? xasprintf("Authorization: Bearer %s", tok) : NULL;
	k->token = tok;
	return true;
}

long kube_call(struct kube *k, const char *method, const char *url, json_t *body,
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
	/* kubectl asks a credential plugin again when its token is refused, once */
	if (st < 0 && err->http_status == 401 && kube_reauth(k)) {
		*err = (struct sbx_err){ 0 };
		st = remote_do(&k->r, &c, ret, NULL, err);
	}
	if (st < 0)
		kube_reword(err);
	return st;
}

void kube_reword(struct sbx_err *err)
{
	/* remote.c words a 401 or a 403 for an API key; a cluster takes credentials, and a 403
	 * is its RBAC saying no to them */
	const char *key = "rejected the API key", *check = "; check ";
	char *at = strstr(err->msg, key);
	if (!at || (err->http_status != 401 && err->http_status != 403))
		return;
	char rest[sizeof(err->msg)];
	snprintf(rest, sizeof(rest), "%s", at + strlen(key));
	char *c = err->http_status == 403 ? strstr(rest, check) : NULL;
	size_t room = sizeof(err->msg) - (size_t)(at - err->msg);
	if (c) {
		*c = 0;
		snprintf(at, room, "forbids it%s; check the RBAC permissions of %s", rest,
			 c + strlen(check));
	} else {
		snprintf(at, room, "%s%s",
			 err->http_status == 403 ? "forbids it" : "refused the credentials", rest);
	}
}

/* --- the mode: pod, Sandbox, SandboxClaim ------------------------------------------------------ */

static bool agents_served(struct kube *k, struct sbx_err *err, int *ret)
{
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *url = xasprintf("%s/apis", k->r.api);
	if (kube_call(k, NULL, url, NULL, NULL, "discover the cluster's APIs", &j, err) < 0)
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
static int choose_mode(struct kube *k, const char **ret, struct sbx_err *err)
{
	const char *m = getenv("SBX_KUBE_MODE");
	int served = 0;

	if (m && *m && !streq(m, "auto")) {
		if (!streq(m, "pod") && !streq(m, "sandbox"))
			return sbx_err_set(err, SBX_E_USAGE,
					   "SBX_KUBE_MODE is '%s'; it takes pod, sandbox or auto",
					   m);
		if (streq(m, "pod")) {
			*ret = "pod";
			return 0;
		}
	}
	if (!agents_served(k, err, &served))
		return -1;
	if (m && streq(m, "sandbox") && !served)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "SBX_KUBE_MODE is sandbox, but the cluster does not serve the "
				   "agents.x-k8s.io API (the agent-sandbox controller is not "
				   "installed there)");
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

static int make_pod(struct kube *k, const struct sbx_record *rec, const char *name, const char *pvc,
		    struct sbx_err *err)
{
	_cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion", "v1",
						"kind", "Pod", "metadata", "name", name, "labels",
						labels(rec), "spec", pod_spec(rec, pvc));
	_cleanup_free_ char *url = kube_url(k, "/api/v1", "pods", NULL, NULL);
	return kube_call(k, "POST", url, body, NULL, "create the pod", NULL, err) < 0 ? -1 : 0;
}

/* --- create --------------------------------------------------------------------------------- */

static char *rfc3339_in(long long ms)
{
	return sbx_time_rfc3339((long long)time(NULL) + (ms + 999) / 1000);
}

/* what --image template:NAME cannot take: the SandboxTemplate decides, and SandboxClaim has no
 * field for it (-e goes in spec.env, --ttl in spec.lifecycle) */
static int kube_check(const struct sbx_config *o, struct sbx_err *err)
{
	const char *why = NULL;

	if (!o->image.ref || !startswith(o->image.ref, TEMPLATE_PREFIX))
		return 0;
	if (o->cpu_millis)
		why = "--cpus";
	else if (o->memory)
		why = "--memory";
	else if (o->workdir)
		why = "-w/--workdir";
	else if (o->runtime)
		why = "--runtime";
	else if (o->disk)
		why = "--disk";
	else if (o->net.n_add_hosts)
		why = "--add-host";
	if (!why)
		return 0;
	return sbx_err_set(err, SBX_E_UNSUPPORTED,
			   "provider 'kubernetes' cannot take %s with --image %s: the "
			   "SandboxTemplate decides it and a SandboxClaim has no field for it; "
			   "set it in the template",
			   why, o->image.ref);
}

/* -e with a template: the claim's spec.env, which its template must allow
 * (envVarsInjectionPolicy Allowed or Overrides); asked before anything is made */
static int template_takes_env(struct kube *k, const char *tpl, struct sbx_err *err)
{
	_cleanup_json_ json_t *t = NULL;
	if (kube_get(k, CLAIMS_API, "sandboxtemplates", tpl, &t, err) < 0)
		return -1;
	if (!t)
		return sbx_err_set(err, SBX_E_NOTFOUND,
				   "SandboxTemplate '%s' does not exist in namespace '%s'", tpl,
				   k->ns);
	const char *pol = sbx_json_str(json_object_get(t, "spec"), "envVarsInjectionPolicy");
	if (pol && (streq(pol, "Allowed") || streq(pol, "Overrides")))
		return 0;
	_cleanup_free_ char *p = sbx_term_safe(pol ? pol : "Disallowed");
	return sbx_err_set(err, SBX_E_UNSUPPORTED,
			   "-e cannot go with --image template:%s: the SandboxTemplate's "
			   "envVarsInjectionPolicy is '%s' (a claim's env needs Allowed or "
			   "Overrides)",
			   tpl, p);
}

static int create_claim(struct kube *k, struct sbx_record *rec, const char *name,
			struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;
	const char *tpl = o->image.ref + strlen(TEMPLATE_PREFIX);

	if (o->env && *o->env && template_takes_env(k, tpl, err) < 0)
		return -1;
	json_t *spec = json_pack("{s:{s:s}}", "sandboxTemplateRef", "name", tpl);
	if (o->env && *o->env) {
		json_t *env = json_array();
		json_t *obj = remote_env_object(o->env);
		const char *key;
		json_t *v;
		json_object_foreach (obj, key, v)
			json_array_append_new(env,
					      json_pack("{s:s, s:O}", "name", key, "value", v));
		json_decref(obj);
		json_object_set_new(spec, "env", env);
	}
	if (o->ttl_ms) {
		/* the claim's own deadline: Retain keeps the claim (its pod goes), Delete all */
		_cleanup_free_ char *t = rfc3339_in(o->ttl_ms);
		json_object_set_new(spec, "lifecycle",
				    json_pack("{s:s, s:s}", "shutdownTime", t, "shutdownPolicy",
					      o->ttl_rm ? "Delete" : "Retain"));
	}
	_cleanup_json_ json_t *body = json_pack("{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion",
						"extensions.agents.x-k8s.io/v1alpha1", "kind",
						"SandboxClaim", "metadata", "name", name, "labels",
						labels(rec), "spec", spec);
	_cleanup_free_ char *url = kube_url(k, CLAIMS_API, "sandboxclaims", NULL, NULL);
	json_object_set_new(rec->extra, "mode", json_string("claim"));
	json_object_set_new(rec->extra, "template", json_string(tpl));
	if (kube_call(k, "POST", url, body, NULL, "create the SandboxClaim", NULL, err) < 0)
		return -1;
	rec->provider_id = xstrdup(name);
	/* its Sandbox and pod are the controller's to name: made, or a warm pool's */
	return kube_wait_claimed(k, rec, name, err);
}

static int create_sandbox(struct kube *k, struct sbx_record *rec, const char *name,
			  struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;

	json_t *ps = pod_spec(rec, NULL);
	json_t *spec = json_pack("{s:{s:{s:o}, s:o}, s:i}", "podTemplate", "metadata", "labels",
				 labels(rec), "spec", ps, "replicas", 1);
	if (o->disk) {
		/* the controller names the claim work-NAME and mounts it as volume work */
		_cleanup_free_ char *size = xasprintf("%lld", o->disk);
		json_t *c = json_array_get(json_object_get(ps, "containers"), 0);
		json_object_set_new(c, "volumeMounts",
				    json_pack("[{s:s, s:s}]", "name", "work", "mountPath",
					      o->workdir ? o->workdir : "/workspace"));
		json_object_set_new(spec, "volumeClaimTemplates",
				    json_pack("[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}]", "metadata",
					      "name", "work", "spec", "accessModes",
					      "ReadWriteOnce", "resources", "requests", "storage",
					      size));
		json_object_set_new(rec->extra, "pvc", json_pack("s++", "work-", name, ""));
	}
	if (o->ttl_ms) {
		_cleanup_free_ char *t = rfc3339_in(o->ttl_ms);
		json_object_set_new(spec, "shutdownTime", json_string(t));
		/* --ttl-action rm: the Sandbox goes too (else its pod alone) */
		json_object_set_new(spec, "shutdownPolicy",
				    json_string(o->ttl_rm ? "Delete" : "Retain"));
	}
	_cleanup_json_ json_t *body = json_pack(
		"{s:s, s:s, s:{s:s, s:o}, s:o}", "apiVersion", "agents.x-k8s.io/v1alpha1", "kind",
		"Sandbox", "metadata", "name", name, "labels", labels(rec), "spec", spec);
	_cleanup_free_ char *url = kube_url(k, AGENTS_API, "sandboxes", NULL, NULL);
	json_object_set_new(rec->extra, "mode", json_string("sandbox"));
	if (kube_call(k, "POST", url, body, NULL, "create the Sandbox", NULL, err) < 0)
		return -1;
	rec->provider_id = xstrdup(name);
	json_object_set_new(rec->extra, "sandbox", json_string(name));
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
	bool tpl = startswith(o->image.ref, TEMPLATE_PREFIX);
	if (tpl && !streq(mode, "sandbox"))
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
	if (tpl) {
		if (create_claim(&k, rec, name, err) < 0)
			return -1;
	} else if (streq(mode, "sandbox")) {
		if (create_sandbox(&k, rec, name, err) < 0)
			return -1;
	} else {
		const char *pvc = o->disk ? name : NULL;
		if (pvc) {
			_cleanup_json_ json_t *b = pvc_body(rec, pvc);
			_cleanup_free_ char *url = kube_url(&k, "/api/v1", "persistentvolumeclaims",
							    NULL, NULL);
			if (kube_call(&k, "POST", url, b, NULL, "create the volume claim", NULL,
				      err) < 0)
				return -1;
			json_object_set_new(rec->extra, "pvc", json_string(pvc));
		}
		/* rm cleans up from here on */
		rec->provider_id = xstrdup(name);
		json_object_set_new(rec->extra, "pod", json_string(name));
		if (make_pod(&k, rec, name, pvc, err) < 0)
			return -1;
	}
	bool owned = !streq(kube_mode(rec), "pod");
	if (kube_wait_running(&k, kube_pod(rec), owned ? kube_sandbox(rec) : NULL, err) < 0)
		return sbx_err_prefix(err, "cannot start the sandbox");
	sbx_debug("pod %s/%s running (%s mode)", k.ns, kube_pod(rec), kube_mode(rec));
	return 0;
}

/* --- rm -------------------------------------------------------------------------------------- */

static int kube_delete(struct kube *k, const char *api, const char *coll, const char *name,
		       const char *what, struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	_cleanup_free_ char *url = kube_url(k, api, coll, name, "?gracePeriodSeconds=0");
	return kube_call(k, "DELETE", url, NULL, accept, what, NULL, err) < 0 ? -1 : 0;
}

static int kube_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = kube_mode(rec);
	const char *pvc = sbx_json_str(rec->extra, "pvc");

	kube_previews_stop(rec);
	if (!rec->provider_id)
		return 0; /* never made in the cluster */
	if (kube_open(&k, rec, err) < 0)
		return -1;
	/* what a claim owns (its Sandbox, adopted or made) goes with it */
	if (streq(mode, "claim"))
		return kube_delete(&k, CLAIMS_API, "sandboxclaims", rec->provider_id,
				   "remove the SandboxClaim", err);
	if (streq(mode, "sandbox"))
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

/* --- pause --release, resume ------------------------------------------------------------------ */

static int scale(struct kube *k, const struct sbx_record *rec, int replicas, struct sbx_err *err)
{
	_cleanup_json_ json_t *body = json_pack("{s:{s:i}}", "spec", "replicas", replicas);
	_cleanup_free_ char *url = kube_url(k, AGENTS_API, "sandboxes", kube_sandbox(rec), NULL);
	return kube_call(k, "PATCH", url, body, NULL,
			 replicas ? "scale the Sandbox up" : "scale the Sandbox to zero", NULL,
			 err) < 0
		? -1
		: 0;
}

/* a claim's files outlive its pod only on a volume of its template's */
static int claim_keeps_files(struct kube *k, const struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_json_ json_t *sb = NULL;
	const char *l = remote_label(rec), *tpl = sbx_json_str(rec->extra, "template");

	if (kube_get(k, AGENTS_API, "sandboxes", kube_sandbox(rec), &sb, err) < 0)
		return -1;
	if (!sb)
		return sbx_err_set(err, SBX_E_STATE,
				   "cannot release '%s': its Sandbox '%s' is gone", l,
				   kube_sandbox(rec));
	json_t *vct = json_object_get(json_object_get(sb, "spec"), "volumeClaimTemplates");
	if (json_array_size(vct) > 0)
		return 0;
	return sbx_err_set(err, SBX_E_UNSUPPORTED,
			   "cannot release '%s': its SandboxTemplate '%s' has no "
			   "volumeClaimTemplates, so its files would go with its pod (give the "
			   "template a volume, or remove the sandbox)",
			   l, tpl ? tpl : "");
}

static int kube_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
		      struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = kube_mode(rec);
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
	if (!sbx_json_str(rec->extra, "pvc") && !streq(mode, "claim"))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "cannot release '%s': its files live in the pod alone (create "
				   "it with --disk SIZE for a volume that keeps its workdir)",
				   l);
	if (kube_open(&k, rec, err) < 0)
		return -1;
	if (streq(mode, "claim") && claim_keeps_files(&k, rec, err) < 0)
		return -1;
	if (streq(mode, "pod")) {
		if (kube_delete(&k, "/api/v1", "pods", kube_pod(rec), "remove the pod", err) < 0)
			return -1;
	} else if (scale(&k, rec, 0, err) < 0) {
		return -1;
	}
	if (kube_wait_gone(&k, kube_pod(rec), err) < 0)
		return -1;
	rec->state = SBX_STATE_RELEASED;
	return 0;
}

static int kube_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = kube_mode(rec);

	if (remote_need_id("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	if (rec->state == SBX_STATE_RUNNING)
		return 0;
	if (streq(mode, "pod")) {
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
	bool owned = !streq(mode, "pod");
	if (kube_wait_running(&k, kube_pod(rec), owned ? kube_sandbox(rec) : NULL, err) < 0)
		return sbx_err_prefix(err, "cannot resume '%s'", remote_label(rec));
	rec->state = SBX_STATE_RUNNING;
	return 0;
}

/* sbx keepalive: a Sandbox's shutdownTime (a claim's lifecycle.shutdownTime) is a deadline;
 * it moves to --ttl from now */
static int kube_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	const char *mode = kube_mode(rec);

	if (remote_check_running("Kubernetes", rec, err) < 0)
		return -1;
	if (streq(mode, "pod") || !rec->config.ttl_ms)
		return 0; /* nothing ends it on its own */
	if (kube_open(&k, rec, err) < 0)
		return -1;
	_cleanup_free_ char *t = rfc3339_in(rec->config.ttl_ms);
	bool claim = streq(mode, "claim");
	_cleanup_json_ json_t *body = claim
		? json_pack("{s:{s:{s:s}}}", "spec", "lifecycle", "shutdownTime", t)
		: json_pack("{s:{s:s}}", "spec", "shutdownTime", t);
	_cleanup_free_ char *url = claim
		? kube_url(&k, CLAIMS_API, "sandboxclaims", rec->provider_id, NULL)
		: kube_url(&k, AGENTS_API, "sandboxes", rec->provider_id, NULL);
	return kube_call(&k, "PATCH", url, body, NULL,
			 claim ? "move the SandboxClaim's shutdownTime"
			       : "move the Sandbox's shutdownTime",
			 NULL, err) < 0
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
	.check = kube_check,
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
