/* --secret, the CLI's side: at create, the sandbox's CA (secrets/ca.key, ca.crt) and the
 * values (secrets/values.json), in a directory only the caller can read, never in the
 * record; the variables every exec gets. init makes the CA trusted at every boot (the bundle
 * /run/sbx/ca-bundle.crt, bound over the system's: init.c trust_ca); the supervisor's side
 * is net-tls.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/store.h"
#include "providers/local/local.h"
#include "providers/local/tls.h"

#define SANDBOX_BUNDLE "/run/sbx/ca-bundle.crt"

/* writes data to dir/name, the caller's alone (0600), replacing it */
static int write_private(const char *dir, const char *name, const char *data, size_t len,
			 struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
	_cleanup_free_ char *tmp = xasprintf("%s/.%s.tmp", dir, name);
	(void)unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_errno(err, "cannot write '%s'", p);
	int w = sbx_write_all(fd, data, len);
	if (close(fd) < 0 || w < 0 || rename(tmp, p) < 0) {
		(void)unlink(tmp);
		return sbx_err_errno(err, "cannot write '%s'", p);
	}
	return 0;
}

int local_secrets_write(const struct sbx_record *rec, const struct sbx_config *c,
			struct sbx_err *err)
{
	_cleanup_free_ char *d = xasprintf("%s/secrets", rec->dir);
	const char *label = rec->name ? rec->name : rec->id;

	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot create '%s'", d);
	if (chmod(d, 0700) < 0)
		return sbx_err_errno(err, "cannot protect '%s'", d);
	_cleanup_free_ char *cap = xasprintf("%s/ca.crt", d);
	if (access(cap, F_OK) < 0) {
		char *cert = NULL, *key = NULL;
		if (local_tls_make_ca(label, &cert, &key, err) < 0)
			return -1;
		int r = write_private(d, "ca.key", key, strlen(key), err);
		explicit_bzero(key, strlen(key));
		free(key);
		if (r == 0)
			r = write_private(d, "ca.crt", cert, strlen(cert), err);
		free(cert);
		if (r < 0)
			return -1;
	}
	/* the values already kept: those not read again by this process stay */
	_cleanup_free_ char *vp = xasprintf("%s/values.json", d);
	size_t ol = 0;
	char *otext = sbx_read_file(vp, 1 << 20, &ol);
	json_t *old = otext ? json_loads(otext, 0, NULL) : NULL;
	if (otext)
		explicit_bzero(otext, ol);
	free(otext);
	json_t *a = json_array();
	for (size_t i = 0; i < c->n_secrets; i++) {
		const struct sbx_secret *s = &c->secrets[i];
		const char *v = sbx_secret_value(s);
		size_t k;
		json_t *e;
		json_array_foreach (old, k, e)
			if (!v && sbx_json_str(e, "name") &&
			    streq(sbx_json_str(e, "name"), s->name))
				v = sbx_json_str(e, "value");
		if (!v) {
			json_decref(old);
			json_decref(a);
			return sbx_err_set(
				err, SBX_E_USAGE,
				"the value of secret %s was not read: give --secret %s again",
				s->name, s->name);
		}
		json_t *h = json_array();
		for (char **p = s->hosts; p && *p; p++)
			json_array_append_new(h, json_string(*p));
		json_array_append_new(a,
				      json_pack("{s:s, s:s, s:s, s:o}", "name", s->name,
						"placeholder", s->placeholder, "value", v, "hosts",
						h));
	}
	json_decref(old);
	char *text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!text)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot encode the secrets");
	int r = write_private(d, "values.json", text, strlen(text), err);
	explicit_bzero(text, strlen(text));
	free(text);
	return r;
}

void local_secrets_env(const struct sbx_record *rec, void (*set)(void *, const char *), void *env)
{
	static const char *const vars[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
					    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
					    "GIT_SSL_CAINFO" };
	const struct sbx_config *c = &rec->config;

	if (!c->n_secrets)
		return;
	for (size_t i = 0; i < c->n_secrets; i++) {
		_cleanup_free_ char *kv = xasprintf("%s=%s", c->secrets[i].name,
						    c->secrets[i].placeholder);
		set(env, kv);
	}
	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		_cleanup_free_ char *kv = xasprintf("%s=%s", vars[i], SANDBOX_BUNDLE);
		set(env, kv);
	}
}
