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

struct sbx_kube_exec {
	char *command; /* an absolute path (a relative one was made so from the file's folder) */
	char **args;   /* NULL-terminated */
	char **env;    /* "K=V" added, NULL-terminated */
	char *api_version;
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
/* what a plugin printed (an ExecCredential) into kc: token, expiry, client certificate and key;
 * now: Unix seconds (an expired token is an error) */
int sbx_kubeconfig_exec_credential(struct sbx_kubeconfig *kc, const char *out, size_t len,
				   long long now, struct sbx_err *err);

/* sets the TLS options of a libcurl handle (a void * for struct sbx_kubeconfig) */
void sbx_kubeconfig_curl_setup(CURL *h, void *kc);

#endif
