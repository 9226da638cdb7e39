/* The Kubernetes provider's private header. Every file runs in the sbx CLI process (no daemon):
 *   kubernetes.c       the control plane: kubeconfig, discovery, pods / Sandboxes / SandboxClaims,
 *                      PVCs; create, rm, pause --release, resume, keepalive
 *   kubernetes-state.c what the cluster shows of a sandbox, one way for inspect and ls (a pod's
 *                      phase and conditions, its Sandbox's and claim's); the waits of create
 *                      and resume
 *   kubernetes-exec.c  exec over the pods/exec WebSocket (v5, v4), and cp as tar streams
 *                      through exec
 *   kubernetes-preview.c  sbx preview: forks a detached forwarding process (the CLI's child,
 *                      then on its own) that serves 127.0.0.1 and forwards each request to the
 *                      pod's proxy subresource
 * kubernetes-exec.c uses kubernetes.c's connection (kube_open) and nothing else of it;
 * kubernetes-state.c its connection and requests (kube_call, kube_url). */
#ifndef SBX_PROVIDERS_KUBERNETES_H
#define SBX_PROVIDERS_KUBERNETES_H

#include "core/kubeconfig.h"
#include "providers/remote.h"

#define KUBE_CONTAINER "sandbox"
#define KUBE_AGENTS_API "/apis/agents.x-k8s.io/v1alpha1"
#define KUBE_CLAIMS_API "/apis/extensions.agents.x-k8s.io/v1alpha1"
/* the annotation of a Sandbox that names its pod (one adopted from a warm pool) */
#define KUBE_POD_NAME_ANNOTATION "agents.x-k8s.io/pod-name"

/* one cluster connection for one call: the kubeconfig's context and the namespace */
struct kube {
	struct sbx_kubeconfig kc;
	struct remote r;   /* api = the server; auth = the bearer token, or NULL */
	char *ns;	   /* the namespace */
	char *key_hint;	   /* what to check when the credentials are refused */
	char *tls_hint;	   /* what to check when TLS fails */
	const char *token; /* in kc */
	bool reauthed;	   /* a 401 had the credential plugin asked again */
};

/* connects for rec (its recorded context and namespace), or for a new sandbox (rec NULL) */
int kube_open(struct kube *k, const struct sbx_record *rec, struct sbx_err *err);
void kube_close(struct kube *k);
/* a refusal of the credentials in a cluster's words */
void kube_reword(struct sbx_err *err);
/* after a 401: a credential plugin's token is asked for again (once per connection); true when
 * there is a new one to try */
bool kube_reauth(struct kube *k);
/* the pod the sandbox's commands run in */
const char *kube_pod(const struct sbx_record *rec);
/* its Sandbox (Sandbox and claim modes): the name the claim's status gave, else its id */
const char *kube_sandbox(const struct sbx_record *rec);
/* "pod", "sandbox" or "claim" */
const char *kube_mode(const struct sbx_record *rec);

/* BASE + api + /namespaces/NS/COLLECTION[/NAME][TAIL] */
char *kube_url(const struct kube *k, const char *api, const char *coll, const char *name,
	       const char *tail);
/* one request (method NULL: GET); the status, or -1 with err (statuses in accept, 0-ended, are
 * answers, not errors); a 401 asks a credential plugin again, once */
long kube_call(struct kube *k, const char *method, const char *url, json_t *body,
	       const long *accept, const char *what, json_t **ret, struct sbx_err *err);

/* kubernetes-state.c */
int kube_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err);
int kube_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err);
/* until the pod runs (its Sandbox, if any, named by sandbox, says why it does not yet) */
int kube_wait_running(struct kube *k, const char *pod, const char *sandbox, struct sbx_err *err);
/* until the claim has a Sandbox (made, or adopted from a warm pool): its name and its pod's
 * into rec->extra ("sandbox", "pod") */
int kube_wait_claimed(struct kube *k, struct sbx_record *rec, const char *claim,
		      struct sbx_err *err);
/* until the pod is gone */
int kube_wait_gone(struct kube *k, const char *pod, struct sbx_err *err);
/* a Sandbox, or 404 (ret NULL) */
long kube_get(struct kube *k, const char *api, const char *coll, const char *name, json_t **ret,
	      struct sbx_err *err);

int kube_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	      int *ret_status, struct sbx_err *err);
int kube_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
	       const struct sbx_cp_opts *o, struct sbx_err *err);
int kube_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		const struct sbx_cp_opts *o, struct sbx_err *err);

/* kubernetes-preview.c */
int kube_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		 const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err);
/* a request target the preview forwards: a path under '/' with no '.' or '..' segment, raw or
 * percent-encoded, nor a backslash or a control byte */
bool kube_preview_path_ok(const char *target, size_t n);
/* a Location the cluster's proxy sent, as the preview's own (server: the apiserver's URL,
 * prefix: the pod proxy's path); malloc'd */
char *kube_preview_location(const char *loc, const char *server, const char *prefix);
/* a Cookie header's value without sbx's own token (NULL: nothing left); malloc'd */
char *kube_preview_cookie(const char *v, size_t n);
/* ends the sandbox's preview forwarders (rm) */
void kube_previews_stop(const struct sbx_record *rec);

#endif
