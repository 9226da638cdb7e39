/* kubeconfig: YAML through libyaml (dlopen'ed), contexts merged as kubectl merges them, the
 * credentials of one resolved, credential plugins run by their path. */
#define _GNU_SOURCE
#include "core/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include "core/json.h"
#include "core/lazy.h"
#include "core/log.h"
#include "core/util.h"

#define DEPTH_MAX 64
#define PLUGIN_OUT_MAX (1 << 20)
#define PLUGIN_TIMEOUT_MS 60000

struct sbx_lazy_lib sbx_lazy_yaml = { "libyaml-0.so.2", "libyaml-0-2", NULL };

/* clang-format off */
#define YAML_FNS(X) \
	X(parser_initialize) X(parser_delete) X(parser_set_input_string) X(parser_parse) \
	X(event_delete)
/* clang-format on */

static struct {
#define X(f) __typeof__(yaml_##f) *f;
	YAML_FNS(X)
#undef X
} yl;

static int yaml_load(struct sbx_err *err)
{
	static bool loaded;
	static const char *const names[] = {
#define X(f) "yaml_" #f,
		YAML_FNS(X)
#undef X
	};
	if (loaded)
		return 0;
	if (sbx_lazy_load(&sbx_lazy_yaml, names, (void **)&yl, ARRAY_SIZE(names), err) < 0)
		return -1;
	loaded = true;
	return 0;
}

/* --- YAML to JSON --------------------------------------------------------------------------- */

static bool plain_null(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;

	return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		(n == 0 || (n == 1 && v[0] == '~') || (n == 4 && !memcmp(v, "null", 4)) ||
		 (n == 4 && !memcmp(v, "Null", 4)) || (n == 4 && !memcmp(v, "NULL", 4)));
}

json_t *sbx_yaml_to_json(const char *text, size_t len, const char *what, struct sbx_err *err)
{
	yaml_parser_t p;
	json_t *stack[DEPTH_MAX + 1];
	char *keys[DEPTH_MAX + 1]; /* a mapping's pending key (NULL: a key comes next) */
	int depth = 0;
	json_t *root = NULL;
	bool done = false, failed = false;

	if (yaml_load(err) < 0)
		return NULL;
	if (!yl.parser_initialize(&p))
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start libyaml"), NULL;
	yl.parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done && !failed) {
		yaml_event_t ev;
		if (!yl.parser_parse(&p, &ev)) {
			sbx_err_set(err, SBX_E_CONFIG,
				    "%s is not valid YAML (line %zu column %zu): %s", what,
				    p.problem_mark.line + 1, p.problem_mark.column + 1,
				    p.problem ? p.problem : "parse error");
			failed = true;
			break;
		}
		json_t *v = NULL;
		bool open = false, close = false;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_END_EVENT:
			done = root != NULL; /* only the first document counts */
			break;
		case YAML_ALIAS_EVENT:
			sbx_err_set(err, SBX_E_CONFIG,
				    "%s uses a YAML alias, which sbx does not follow", what);
			failed = true;
			break;
		case YAML_SCALAR_EVENT:
			v = plain_null(&ev) ? json_null()
					    : json_stringn((const char *)ev.data.scalar.value,
							   ev.data.scalar.length);
			if (!v) {
				sbx_err_set(err, SBX_E_CONFIG, "%s holds text that is not UTF-8",
					    what);
				failed = true;
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
			v = json_array();
			open = true;
			break;
		case YAML_MAPPING_START_EVENT:
			v = json_object();
			open = true;
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			close = true;
			break;
		default:
			break;
		}
		yl.event_delete(&ev);
		if (close) {
			free(keys[depth - 1]);
			depth--;
			continue;
		}
		if (!v)
			continue;
		if (depth == 0) {
			if (root) {
				json_decref(v);
				continue;
			}
			root = json_incref(v);
		} else {
			json_t *top = stack[depth - 1];
			if (json_is_array(top)) {
				json_array_append(top, v);
			} else if (!keys[depth - 1]) {
				if (!json_is_string(v) && !json_is_null(v)) {
					sbx_err_set(err, SBX_E_CONFIG,
						    "%s has a mapping key that is not a scalar",
						    what);
					failed = true;
					json_decref(v);
					break;
				}
				keys[depth - 1] = xstrdup(json_is_string(v) ? json_string_value(v)
									    : "");
				json_decref(v);
				continue;
			} else {
				json_object_set(top, keys[depth - 1], v);
				free(keys[depth - 1]);
				keys[depth - 1] = NULL;
			}
		}
		if (open) {
			if (depth == DEPTH_MAX) {
				sbx_err_set(err, SBX_E_CONFIG, "%s nests deeper than %d levels",
					    what, DEPTH_MAX);
				failed = true;
				json_decref(v);
				break;
			}
			stack[depth] = v;
			keys[depth] = NULL;
			depth++;
		}
		json_decref(v);
	}
	while (depth > 0)
		free(keys[--depth]);
	yl.parser_delete(&p);
	if (failed) {
		json_decref(root);
		return NULL;
	}
	return root ? root : json_object();
}

/* --- contexts ------------------------------------------------------------------------------- */

void sbx_kubeconfig_release(struct sbx_kubeconfig *kc)
{
	char **secrets[] = { &kc->token, &kc->key };
	for (size_t i = 0; i < ARRAY_SIZE(secrets); i++)
		if (*secrets[i])
			explicit_bzero(*secrets[i], strlen(*secrets[i]));
	free(kc->path);
	free(kc->context);
	free(kc->cluster);
	free(kc->user);
	free(kc->server);
	free(kc->namespace);
	free(kc->ca);
	free(kc->cert);
	free(kc->key);
	free(kc->ca_file);
	free(kc->cert_file);
	free(kc->key_file);
	free(kc->token);
	free(kc->token_file);
	free(kc->exec.command);
	sbx_strv_free(kc->exec.args);
	sbx_strv_free(kc->exec.env);
	free(kc->exec.api_version);
	free(kc->exec.install_hint);
	json_decref(kc->exec.cluster);
	memset(kc, 0, sizeof(*kc));
}

/* the named entry of a list (clusters, contexts, users) over the documents: the first wins */
static json_t *named(json_t *const *docs, size_t n, const char *list, const char *field,
		     const char *name, size_t *ret_doc)
{
	for (size_t d = 0; d < n; d++) {
		json_t *a = json_object_get(docs[d], list);
		size_t i;
		json_t *v;
		if (!json_is_array(a))
			continue;
		json_array_foreach (a, i, v) {
			const char *nm = sbx_json_str(v, "name");
			if (nm && streq(nm, name)) {
				json_t *o = json_object_get(v, field);
				if (ret_doc)
					*ret_doc = d;
				return json_is_object(o) ? o : json_object_get(v, "__none__");
			}
		}
	}
	return NULL;
}

static char *dir_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? xstrndup(path, (size_t)(s - path) + (s == path)) : xstrdup(".");
}

/* a path from a kubeconfig: relative ones are relative to its file's folder */
static char *path_in(const char *file, const char *p)
{
	if (!p || !*p)
		return NULL;
	if (*p == '/' || !strchr(file, '/'))
		return xstrdup(p);
	_cleanup_free_ char *d = dir_of(file);
	return xasprintf("%s/%s", d, p);
}

static int b64_field(const json_t *o, const char *key, const char *what, char **ret,
		     size_t *ret_len, struct sbx_err *err)
{
	const char *v = sbx_json_str(o, key);
	if (!v || !*v)
		return 0;
	/* base64 in YAML may be folded over lines */
	_cleanup_free_ char *s = xmalloc(strlen(v) + 1);
	size_t k = 0;
	for (const char *c = v; *c; c++)
		if (!strchr(" \t\r\n", *c))
			s[k++] = *c;
	s[k] = 0;
	size_t n = 0;
	char *d = sbx_base64_decode(s, &n);
	if (!d)
		return sbx_err_set(err, SBX_E_CONFIG, "the %s of %s is not valid base64", key,
				   what);
	*ret = d;
	*ret_len = n;
	return 0;
}

static bool yes(const json_t *o, const char *key)
{
	const char *v = sbx_json_str(o, key);
	return v && (streq(v, "true") || streq(v, "True") || streq(v, "TRUE"));
}

/* provideClusterInfo: the cluster as KUBERNETES_EXEC_INFO's spec.cluster gives it (its CA's
 * data is filled in when the plugin runs, from a file too) */
static json_t *cluster_info(const json_t *cluster)
{
	json_t *o = json_object();
	static const char *const keep[] = { "server", "tls-server-name", "proxy-url" };
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		const char *v = sbx_json_str(cluster, keep[i]);
		if (v && *v)
			json_object_set_new(o, keep[i], json_string(v));
	}
	if (yes(cluster, "insecure-skip-tls-verify"))
		json_object_set_new(o, "insecure-skip-tls-verify", json_true());
	if (yes(cluster, "disable-compression"))
		json_object_set_new(o, "disable-compression", json_true());
	/* the cluster's extension for the plugin: clusters[].cluster.extensions[] named so */
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(cluster, "extensions"), i, e) {
		const char *n = sbx_json_str(e, "name");
		if (n && streq(n, "client.authentication.k8s.io/exec") &&
		    json_object_get(e, "extension"))
			json_object_set(o, "config", json_object_get(e, "extension"));
	}
	return o;
}

static int exec_plugin(const json_t *ex, const json_t *cluster, const char *file, const char *user,
		       struct sbx_kube_exec *ret, struct sbx_err *err)
{
	const char *cmd = sbx_json_str(ex, "command");
	if (!cmd || !*cmd)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "user '%s' in '%s' has an exec plugin without a command", user,
				   file);
	const char *av = sbx_json_str(ex, "apiVersion");
	if (!av || !*av)
		av = "client.authentication.k8s.io/v1beta1";
	const char *im = sbx_json_str(ex, "interactiveMode");
	if (im && streq(im, "Never"))
		ret->interactive = SBX_KUBE_NEVER;
	else if (im && streq(im, "Always"))
		ret->interactive = SBX_KUBE_ALWAYS;
	else if (im && !streq(im, "IfAvailable"))
		return sbx_err_set(err, SBX_E_CONFIG,
				   "user '%s' in '%s' has an exec plugin whose interactiveMode is "
				   "not Never, IfAvailable or Always",
				   user, file);
	else if (!im && streq(av, "client.authentication.k8s.io/v1"))
		return sbx_err_set(err, SBX_E_CONFIG,
				   "user '%s' in '%s' has an exec plugin of %s without "
				   "interactiveMode, which that version requires",
				   user, file, av);
	/* a bare name is looked up in the caller's PATH when it runs, as kubectl does */
	ret->command = strchr(cmd, '/') ? path_in(file, cmd) : xstrdup(cmd);
	ret->api_version = xstrdup(av);
	const char *hint = sbx_json_str(ex, "installHint");
	ret->install_hint = hint && *hint ? xstrdup(hint) : NULL;
	if (yes(ex, "provideClusterInfo"))
		ret->cluster = cluster_info(cluster);
	json_t *args = json_object_get(ex, "args");
	size_t na = json_is_array(args) ? json_array_size(args) : 0;
	ret->args = xcalloc(na + 1, sizeof(char *));
	for (size_t i = 0, k = 0; i < na; i++) {
		const char *a = json_string_value(json_array_get(args, i));
		if (a)
			ret->args[k++] = xstrdup(a);
	}
	json_t *env = json_object_get(ex, "env");
	size_t ne = json_is_array(env) ? json_array_size(env) : 0;
	ret->env = xcalloc(ne + 1, sizeof(char *));
	for (size_t i = 0, k = 0; i < ne; i++) {
		json_t *e = json_array_get(env, i);
		const char *nm = sbx_json_str(e, "name"), *v = sbx_json_str(e, "value");
		if (nm && *nm && !strchr(nm, '='))
			ret->env[k++] = xasprintf("%s=%s", nm, v ? v : "");
	}
	return 0;
}

int sbx_kubeconfig_from_json(json_t *const *docs, const char *const *paths, size_t n,
			     const char *ctx, struct sbx_kubeconfig *ret, struct sbx_err *err)
{
	struct sbx_kubeconfig kc = { 0 };
	const char *cur = ctx;

	for (size_t d = 0; d < n && (!cur || !*cur); d++)
		cur = sbx_json_str(docs[d], "current-context");
	if (!cur || !*cur)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "the kubeconfig has no current-context; set SBX_KUBE_CONTEXT to "
				   "one of its contexts");
	size_t dc = 0, dl = 0, du = 0;
	json_t *c = named(docs, n, "contexts", "context", cur, &dc);
	if (!c)
		return sbx_err_set(err, SBX_E_CONFIG, "the kubeconfig has no context '%s'", cur);
	const char *cl = sbx_json_str(c, "cluster"), *us = sbx_json_str(c, "user");
	if (!cl || !*cl)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "context '%s' of the kubeconfig names no cluster", cur);
	json_t *cluster = named(docs, n, "clusters", "cluster", cl, &dl);
	if (!cluster)
		return sbx_err_set(err, SBX_E_CONFIG, "the kubeconfig has no cluster '%s'", cl);
	json_t *user = us && *us ? named(docs, n, "users", "user", us, &du) : NULL;
	if (us && *us && !user)
		return sbx_err_set(err, SBX_E_CONFIG, "the kubeconfig has no user '%s'", us);
	const char *server = sbx_json_str(cluster, "server");
	if (!server || !*server)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "cluster '%s' of the kubeconfig has no server", cl);
	if (!startswith(server, "https://") && !startswith(server, "http://"))
		return sbx_err_set(err, SBX_E_CONFIG,
				   "the server of cluster '%s' is not an http(s) URL", cl);
	if (strpbrk(server, " \t\r\n") || !strcspn(strstr(server, "://") + 3, "/?#"))
		return sbx_err_set(err, SBX_E_CONFIG, "the server of cluster '%s' is not a URL",
				   cl);
	kc.path = xstrdup(paths[dc]);
	kc.context = xstrdup(cur);
	kc.cluster = xstrdup(cl);
	kc.user = us ? xstrdup(us) : NULL;
	kc.server = xstrdup(server);
	for (size_t k = strlen(kc.server); k && kc.server[k - 1] == '/'; k--)
		kc.server[k - 1] = 0;
	const char *ns = sbx_json_str(c, "namespace");
	kc.namespace = ns && *ns ? xstrdup(ns) : NULL;
	kc.insecure = yes(cluster, "insecure-skip-tls-verify");
	_cleanup_free_ char *cwhat = xasprintf("cluster '%s'", cl);
	if (b64_field(cluster, "certificate-authority-data", cwhat, &kc.ca, &kc.ca_len, err) < 0)
		goto fail;
	if (!kc.ca)
		kc.ca_file = path_in(paths[dl], sbx_json_str(cluster, "certificate-authority"));
	if (user) {
		_cleanup_free_ char *uwhat = xasprintf("user '%s'", us);
		if (b64_field(user, "client-certificate-data", uwhat, &kc.cert, &kc.cert_len, err) <
			    0 ||
		    b64_field(user, "client-key-data", uwhat, &kc.key, &kc.key_len, err) < 0)
			goto fail;
		if (!kc.cert)
			kc.cert_file = path_in(paths[du], sbx_json_str(user, "client-certificate"));
		if (!kc.key)
			kc.key_file = path_in(paths[du], sbx_json_str(user, "client-key"));
		const char *t = sbx_json_str(user, "token");
		if (t && *t)
			kc.token = xstrdup(t);
		else
			kc.token_file = path_in(paths[du], sbx_json_str(user, "tokenFile"));
		json_t *ex = json_object_get(user, "exec");
		if (!kc.token && !kc.token_file && json_is_object(ex) &&
		    exec_plugin(ex, cluster, paths[du], us, &kc.exec, err) < 0)
			goto fail;
		if (json_object_get(user, "auth-provider") && !kc.token && !kc.exec.command &&
		    !kc.cert && !kc.cert_file) {
			sbx_err_set(err, SBX_E_CONFIG,
				    "user '%s' of the kubeconfig uses an auth-provider, which sbx "
				    "does not support; use an exec credential plugin",
				    us);
			goto fail;
		}
		if (kc.token && strpbrk(kc.token, "\r\n")) {
			sbx_err_set(err, SBX_E_CONFIG, "the token of user '%s' holds a line break",
				    us);
			goto fail;
		}
	}
	*ret = kc;
	return 0;
fail:
	sbx_kubeconfig_release(&kc);
	return -1;
}

static int read_pem(const char *path, const char *what, char **ret, size_t *ret_len,
		    struct sbx_err *err)
{
	size_t n = 0;
	char *d = sbx_read_file(path, 1 << 20, &n);
	if (!d)
		return sbx_err_errno(err, "cannot read the %s '%s' named in the kubeconfig", what,
				     path);
	*ret = d;
	*ret_len = n;
	return 0;
}

int sbx_kubeconfig_read_files(struct sbx_kubeconfig *kc, struct sbx_err *err)
{
	if (kc->ca_file && !kc->ca &&
	    read_pem(kc->ca_file, "certificate-authority", &kc->ca, &kc->ca_len, err) < 0)
		return -1;
	if (kc->cert_file && !kc->cert &&
	    read_pem(kc->cert_file, "client-certificate", &kc->cert, &kc->cert_len, err) < 0)
		return -1;
	if (kc->key_file && !kc->key &&
	    read_pem(kc->key_file, "client-key", &kc->key, &kc->key_len, err) < 0)
		return -1;
	if (!!kc->cert != !!kc->key)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "user '%s' of the kubeconfig has a client certificate without "
				   "its key, or a key without its certificate",
				   kc->user ? kc->user : "");
	return 0;
}

int sbx_kubeconfig_load(const char *ctx, const char *ns, struct sbx_kubeconfig *ret,
			struct sbx_err *err)
{
	const char *env = getenv("KUBECONFIG");
	const char *home = getenv("HOME");
	_cleanup_free_ char *list = NULL;
	json_t *docs[32];
	char *paths[32];
	size_t n = 0;
	int r = -1;

	if (env && *env)
		list = xstrdup(env);
	else if (home && *home)
		list = xasprintf("%s/.kube/config", home);
	else
		return sbx_err_set(err, SBX_E_CONFIG,
				   "no kubeconfig: set KUBECONFIG (HOME is unset)");
	char *save = NULL;
	for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		size_t len = 0;
		if (n == ARRAY_SIZE(docs))
			break;
		_cleanup_free_ char *text = sbx_read_file(p, SBX_KUBECONFIG_MAX, &len);
		if (!text && errno == ENOENT)
			continue;
		if (!text) {
			sbx_err_errno(err, "cannot read the kubeconfig '%s'", p);
			goto out;
		}
		_cleanup_free_ char *what = xasprintf("the kubeconfig '%s'", p);
		json_t *j = sbx_yaml_to_json(text, len, what, err);
		if (!j)
			goto out;
		docs[n] = j;
		paths[n++] = xstrdup(p);
	}
	if (!n) {
		sbx_err_set(err, SBX_E_CONFIG,
			    "no kubeconfig found (%s): set KUBECONFIG, or write ~/.kube/config",
			    env && *env ? "none of KUBECONFIG's files exists" : "~/.kube/config");
		goto out;
	}
	const char *c = ctx ? ctx : getenv("SBX_KUBE_CONTEXT");
	if (sbx_kubeconfig_from_json(docs, (const char *const *)paths, n, c, ret, err) < 0)
		goto out;
	const char *nsv = ns ? ns : getenv("SBX_KUBE_NAMESPACE");
	if (nsv && *nsv) {
		free(ret->namespace);
		ret->namespace = xstrdup(nsv);
	}
	if (!ret->namespace)
		ret->namespace = xstrdup("default");
	if (sbx_kubeconfig_read_files(ret, err) < 0) {
		sbx_kubeconfig_release(ret);
		goto out;
	}
	r = 0;
out:
	for (size_t i = 0; i < n; i++) {
		json_decref(docs[i]);
		free(paths[i]);
	}
	return r;
}

/* --- credentials ---------------------------------------------------------------------------- */

static long long parse_rfc3339(const char *s)
{
	struct tm tm = { 0 };
	const char *e = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!e)
		return -1;
	if (*e == '.')
		e += 1 + strspn(e + 1, "0123456789");
	long long off = 0;
	if ((*e == '+' || *e == '-') && strlen(e) >= 6) {
		off = ((e[1] - '0') * 10 + (e[2] - '0')) * 3600 +
			((e[4] - '0') * 10 + (e[5] - '0')) * 60;
		if (*e == '-')
			off = -off;
	}
	return (long long)timegm(&tm) - off;
}

int sbx_kubeconfig_exec_credential(struct sbx_kubeconfig *kc, const char *out, size_t len,
				   long long now, struct sbx_err *err)
{
	const char *cmd = kc->exec.command ? kc->exec.command : "";
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(out, len, 0, &je);
	if (!j)
		return sbx_err_set(
			err, SBX_E_AUTH,
			"the credential plugin '%s' printed no ExecCredential (line %d: %s)", cmd,
			je.line, je.text);
	json_t *st = json_object_get(j, "status");
	const char *tok = sbx_json_str(st, "token");
	const char *cert = sbx_json_str(st, "clientCertificateData");
	const char *key = sbx_json_str(st, "clientKeyData");
	if ((!tok || !*tok) && !(cert && key))
		return sbx_err_set(err, SBX_E_AUTH,
				   "the credential plugin '%s' gave neither a token nor a client "
				   "certificate",
				   cmd);
	if (tok && strpbrk(tok, "\r\n"))
		return sbx_err_set(err, SBX_E_AUTH,
				   "the credential plugin '%s' gave a token with a line break",
				   cmd);
	const char *exp = sbx_json_str(st, "expirationTimestamp");
	long long t = exp ? parse_rfc3339(exp) : 0;
	if (exp && t < 0)
		return sbx_err_set(
			err, SBX_E_AUTH,
			"the credential plugin '%s' gave an unreadable expirationTimestamp", cmd);
	if (t > 0 && t <= now)
		return sbx_err_set(err, SBX_E_AUTH,
				   "the credential plugin '%s' gave a token that expired at %.40s; "
				   "log in again with the plugin's own tool",
				   cmd, exp);
	free(kc->token);
	kc->token = tok && *tok ? xstrdup(tok) : NULL;
	if (cert && key) {
		free(kc->cert);
		free(kc->key);
		kc->cert = xstrdup(cert);
		kc->cert_len = strlen(cert);
		kc->key = xstrdup(key);
		kc->key_len = strlen(key);
	}
	kc->token_expiry = t;
	kc->token_from_plugin = true;
	return 0;
}

extern char **environ;

char *sbx_kubeconfig_lookpath(const char *name, const char *path)
{
	_cleanup_free_ char *list = xstrdup(path ? path : "");
	char *save = NULL;

	if (!*name || strchr(name, '/'))
		return NULL;
	for (char *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		struct stat st;
		if (*d != '/')
			continue; /* "" and "." are the working directory's: not searched */
		char *p = xasprintf("%s/%s", d, name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

char *sbx_kubeconfig_exec_info(const struct sbx_kubeconfig *kc, bool interactive)
{
	json_t *spec = json_pack("{s:b}", "interactive", interactive);
	if (kc->exec.cluster) {
		json_t *c = json_deep_copy(kc->exec.cluster);
		if (kc->ca) {
			_cleanup_free_ char *b = sbx_base64_encode(kc->ca, kc->ca_len);
			json_object_set_new(c, "certificate-authority-data", json_string(b));
		}
		json_object_set_new(spec, "cluster", c);
	}
	_cleanup_json_ json_t *j = json_pack("{s:s, s:s, s:o}", "apiVersion", kc->exec.api_version,
					     "kind", "ExecCredential", "spec", spec);
	return json_dumps(j, JSON_COMPACT);
}

/* runs the plugin with the caller's environment (it logs in as the caller, as kubectl runs
 * it), its own variables and KUBERNETES_EXEC_INFO; stdin the caller's terminal when it may be
 * interactive, else /dev/null; its stderr the caller's */
static int run_plugin(struct sbx_kubeconfig *kc, struct sbx_err *err)
{
	const struct sbx_kube_exec *x = &kc->exec;
	const char *user = kc->user ? kc->user : "";
	int pfd[2];
	size_t na = 0, ne = 0, nx = 0;

	/* a bare name: the caller's PATH, as kubectl looks it up (the kubeconfig is the
	 * caller's own file, and PATH the caller's) */
	_cleanup_free_ char *found = strchr(x->command, '/')
		? xstrdup(x->command)
		: sbx_kubeconfig_lookpath(x->command, getenv("PATH"));
	if (!found) {
		_cleanup_free_ char *hint = x->install_hint ? sbx_term_safe(x->install_hint)
							    : xstrdup("");
		for (char *c = hint; *c; c++)
			if (*c == '\n' || *c == '\r' || *c == '\t')
				*c = ' ';
		return sbx_err_set(
			err, SBX_E_CONFIG,
			"cannot find the credential plugin '%s' of user '%s' in PATH%s%.300s",
			x->command, user, *hint ? ": " : "", hint);
	}
	bool tty = isatty(0) == 1, interactive = false;
	if (x->interactive == SBX_KUBE_ALWAYS && !tty)
		return sbx_err_set(err, SBX_E_AUTH,
				   "the credential plugin '%s' of user '%s' needs a terminal "
				   "(interactiveMode Always) and sbx's standard input is not one",
				   x->command, user);
	if (x->interactive != SBX_KUBE_NEVER)
		interactive = tty;
	for (; x->args && x->args[na]; na++)
		;
	for (; environ && environ[ne]; ne++)
		;
	for (; x->env && x->env[nx]; nx++)
		;
	char **argv = xcalloc(na + 2, sizeof(char *));
	argv[0] = found;
	for (size_t i = 0; i < na; i++)
		argv[i + 1] = x->args[i];
	char **envp = xcalloc(ne + nx + 2, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < ne; i++)
		if (!startswith(environ[i], "KUBERNETES_EXEC_INFO="))
			envp[k++] = environ[i];
	for (size_t i = 0; i < nx; i++)
		envp[k++] = x->env[i];
	_cleanup_free_ char *ij = sbx_kubeconfig_exec_info(kc, interactive);
	_cleanup_free_ char *info = xasprintf("KUBERNETES_EXEC_INFO=%s", ij);
	envp[k] = info;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		free(argv);
		free(envp);
		return sbx_err_errno(err, "cannot make a pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		free(argv);
		free(envp);
		close(pfd[0]);
		close(pfd[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (pid == 0) {
		if (!interactive) {
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (nul < 0 || dup2(nul, 0) < 0)
				_exit(126);
		}
		if (dup2(pfd[1], 1) < 0)
			_exit(126);
		execve(argv[0], argv, envp);
		_exit(errno == ENOENT ? 127 : 126);
	}
	free(argv);
	free(envp);
	close(pfd[1]);
	struct strbuf out = STRBUF_INIT;
	/* a person at the terminal may take longer than a program */
	long long deadline = sbx_now_ms() +
		(interactive ? PLUGIN_TIMEOUT_MS * 5 : PLUGIN_TIMEOUT_MS);
	bool timed_out = false, too_big = false;
	for (;;) {
		long long left = deadline - sbx_now_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		char buf[8192];
		ssize_t r = read(pfd[0], buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (out.len + (size_t)r > PLUGIN_OUT_MAX) {
			too_big = true;
			break;
		}
		strbuf_add(&out, buf, (size_t)r);
	}
	close(pfd[0]);
	if (timed_out || too_big)
		(void)kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc;
	if (timed_out)
		rc = sbx_err_set(err, SBX_E_AUTH,
				 "the credential plugin '%s' did not finish in %lld s", x->command,
				 (interactive ? PLUGIN_TIMEOUT_MS * 5LL : PLUGIN_TIMEOUT_MS) /
					 1000);
	else if (too_big)
		rc = sbx_err_set(err, SBX_E_AUTH,
				 "the credential plugin '%s' printed more than 1 MiB", x->command);
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !out.len)
		rc = sbx_err_set(err, SBX_E_CONFIG,
				 "cannot run the credential plugin '%s' of user '%s'", found, user);
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		rc = sbx_err_set(err, SBX_E_AUTH,
				 "the credential plugin '%s' failed (exit status %d)", x->command,
				 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	else
		rc = sbx_kubeconfig_exec_credential(kc, out.buf ? out.buf : "", out.len,
						    (long long)time(NULL), err);
	if (out.buf)
		explicit_bzero(out.buf, out.len);
	strbuf_release(&out);
	return rc;
}

int sbx_kubeconfig_token(struct sbx_kubeconfig *kc, const char **ret, struct sbx_err *err)
{
	if (kc->token_file) {
		size_t n = 0;
		char *t = sbx_read_file(kc->token_file, 65536, &n);
		if (!t)
			return sbx_err_errno(err, "cannot read the tokenFile '%s' of user '%s'",
					     kc->token_file, kc->user ? kc->user : "");
		t[strcspn(t, "\r\n")] = 0;
		free(kc->token);
		kc->token = t;
	} else if (kc->exec.command &&
		   (!kc->token_from_plugin ||
		    (kc->token_expiry && kc->token_expiry <= (long long)time(NULL)))) {
		if (run_plugin(kc, err) < 0)
			return -1;
	}
	*ret = kc->token && *kc->token ? kc->token : NULL;
	return 0;
}

int sbx_kubeconfig_renew(struct sbx_kubeconfig *kc, struct sbx_err *err)
{
	if (!kc->exec.command)
		return sbx_err_set(err, SBX_E_AUTH,
				   "the kubeconfig's user has no credential plugin");
	kc->token_from_plugin = false;
	return run_plugin(kc, err);
}

void sbx_kubeconfig_curl_setup(CURL *h, void *arg)
{
	struct sbx_kubeconfig *kc = arg;

	if (kc->ca) {
		struct curl_blob b = { kc->ca, kc->ca_len, CURL_BLOB_COPY };
		(void)sbx_curl.easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
		(void)sbx_curl.easy_setopt(h, CURLOPT_CAINFO, NULL);
		(void)sbx_curl.easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	if (kc->cert && kc->key) {
		struct curl_blob c = { kc->cert, kc->cert_len, CURL_BLOB_COPY };
		struct curl_blob k = { kc->key, kc->key_len, CURL_BLOB_COPY };
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSLCERT_BLOB, &c);
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSLKEY_BLOB, &k);
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (kc->insecure) {
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		(void)sbx_curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}
