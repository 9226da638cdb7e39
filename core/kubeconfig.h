/* Kubernetes client configuration: kubeconfig files (KUBECONFIG's colon list, else
 * ~/.kube/config) read with libyaml (dlopen'ed on first use), one context resolved into what a
 * connection needs: the server, its CA, the client's certificate, key or token (a credential
 * plugin's too). */
#ifndef SBX_CORE_KUBECONFIG_H
#define SBX_CORE_KUBECONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/http.h"
#include "core/lazy.h"

#define SBX_KUBECONFIG_MAX (4 << 20) /* a longer file is refused */

/* interactiveMode: whether the plugin may have the terminal (kubectl's rules) */
enum sbx_kube_interactive {
	SBX_KUBE_IF_AVAILABLE, /* when stdin is a terminal (v1beta1's default) */
	SBX_KUBE_NEVER,
	SBX_KUBE_ALWAYS, /* only with a terminal: refused without one */
};

struct sbx_kube_exec {
	/* a path (a relative one made so from the file's folder), or a bare name looked up in
	 * the caller's PATH when the plugin runs, as kubectl does */
	char *command;
	char **args; /* NULL-terminated */
	char **env;  /* "K=V" added, NULL-terminated */
	char *api_version;
	char *install_hint; /* shown when the command cannot be found, or NULL */
	enum sbx_kube_interactive interactive;
	/* provideClusterInfo: KUBERNETES_EXEC_INFO's spec.cluster (the CA filled in at run time),
	 * or NULL */
	json_t *cluster;
};

struct sbx_kubeconfig {
	char *path;    /* the file the context came from, for messages */
	char *context; /* its name */
	char *cluster, *user;
	char *server; /* no trailing '/' */
	char *namespace;
	bool insecure; /* insecure-skip-tls-verify */
	char *ca;      /* PEM (certificate-authority(-data)), or NULL: the system's CAs */
	size_t ca_len;
	char *cert, *key; /* PEM, or NULL */
	size_t cert_len, key_len;
	char *ca_file, *cert_file, *key_file; /* where to read them, or NULL */
	char *token;			      /* a bearer token, or NULL */
	char *token_file;		      /* read at each call */
	struct sbx_kube_exec exec;	      /* command NULL: no plugin */
	long long token_expiry;		      /* the plugin's token: Unix seconds (0: unknown) */
	bool token_from_plugin;
};

/* libyaml-0.so.2, loaded by the first parse (core/lazy.c's pattern) */
extern struct sbx_lazy_lib sbx_lazy_yaml;

void sbx_kubeconfig_release(struct sbx_kubeconfig *kc);

/* YAML (one document) as JSON: mappings, sequences, every scalar a string (a plain null, '~'
 * or empty: JSON null); aliases, and nesting deeper than 64, are refused */
json_t *sbx_yaml_to_json(const char *text, size_t len, const char *what, struct sbx_err *err);

/* the context ctx (NULL: current-context) of the merged documents (docs[i] read from the file
 * paths[i]; the first to name a context, cluster or user, and to set current-context, wins, as
 * kubectl merges) into *ret; paths in it relative to their file's folder. Files are not read:
 * ca_file, cert_file, key_file are read by sbx_kubeconfig_read_files. */
int sbx_kubeconfig_from_json(json_t *const *docs, const char *const *paths, size_t n,
			     const char *ctx, struct sbx_kubeconfig *ret, struct sbx_err *err);
/* reads the files the resolved configuration names (CA, certificate, key) */
int sbx_kubeconfig_read_files(struct sbx_kubeconfig *kc, struct sbx_err *err);

/* loads what the environment says: KUBECONFIG (colon list; files that do not exist are
 * skipped) or ~/.kube/config; the context ctx (a sandbox's, recorded), else SBX_KUBE_CONTEXT,
 * else the current one; the namespace ns, else SBX_KUBE_NAMESPACE, else the context's, else
 * "default" */
int sbx_kubeconfig_load(const char *ctx, const char *ns, struct sbx_kubeconfig *ret,
			struct sbx_err *err);

/* the bearer token to send (NULL: none, the client certificate authenticates): the static
 * one, tokenFile's, or a credential plugin's (run once per process, its token kept) */
int sbx_kubeconfig_token(struct sbx_kubeconfig *kc, const char **ret, struct sbx_err *err);
/* a credential plugin's token was refused (401): it is run again, as kubectl does; -1 with err
 * when there is no plugin or it failed */
int sbx_kubeconfig_renew(struct sbx_kubeconfig *kc, struct sbx_err *err);
/* a plugin's bare command name found in path (a PATH value): malloc'd, or NULL (relative
 * entries of PATH are not searched, as Go's exec.LookPath refuses them) */
char *sbx_kubeconfig_lookpath(const char *name, const char *path);
/* the KUBERNETES_EXEC_INFO JSON a plugin gets (malloc'd) */
char *sbx_kubeconfig_exec_info(const struct sbx_kubeconfig *kc, bool interactive);
/* what a plugin printed (an ExecCredential) into kc: token, expiry, client certificate and key;
 * now: Unix seconds (an expired token is an error) */
int sbx_kubeconfig_exec_credential(struct sbx_kubeconfig *kc, const char *out, size_t len,
				   long long now, struct sbx_err *err);

/* sets the TLS options of a libcurl handle (a void * for struct sbx_kubeconfig) */
void sbx_kubeconfig_curl_setup(CURL *h, void *kc);

#endif
