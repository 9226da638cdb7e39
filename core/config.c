/* A sandbox's typed configuration: its JSON mapping (the record's "options") and the check of
 * what it asks for against what a provider can do. */
#define _GNU_SOURCE
#include "core/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/net.h"
#include "core/strbuf.h"
#include "core/util.h"

const char *const sbx_cap_names[] = {
	"exec-stdin", "exec-tty",     "exec-user", "exec-detach",  "pause-memory", "release",
	"preview",    "preview-auth", "limit-cpu", "limit-memory", "limit-pids",   "disk",
	"volumes",    "net-none",     "net-open",  "net-allow",	   "net-host",	   "add-host",
	"host-port",  "image",	      "template",  "ttl",	   "hostname",	   "cp",
	"egress-log", "snapshot",     "nested",	   "net-rate",	   "net-update",   "fs",
	"secrets",    "checkpoint",   NULL,
};

/* --- the JSON mapping ------------------------------------------------------------------------ */

/* the plain members: a string is written when set, a number when not 0, a flag when true, a
 * list always */
enum ftype {
	F_STR,
	F_STRV,
	F_LL,
	F_BOOL
};
static const struct field {
	const char *key;
	enum ftype type;
	size_t off;
} fields[] = {
	{ "env", F_STRV, offsetof(struct sbx_config, env) },
	{ "workdir", F_STR, offsetof(struct sbx_config, workdir) },
	{ "user", F_STR, offsetof(struct sbx_config, user) },
	{ "hostname", F_STR, offsetof(struct sbx_config, hostname) },
	{ "from", F_STR, offsetof(struct sbx_config, from) },
	{ "runtime", F_STR, offsetof(struct sbx_config, runtime) },
	{ "memory", F_LL, offsetof(struct sbx_config, memory) },
	{ "cpu_millis", F_LL, offsetof(struct sbx_config, cpu_millis) },
	{ "pids_limit", F_LL, offsetof(struct sbx_config, pids_limit) },
	{ "disk", F_LL, offsetof(struct sbx_config, disk) },
	{ "ttl_ms", F_LL, offsetof(struct sbx_config, ttl_ms) },
	{ "nested", F_BOOL, offsetof(struct sbx_config, nested) },
};

#define AT(c, f, type) ((type *)((char *)(c) + (f)->off))

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();
	for (; v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static char *str_of(const json_t *obj, const char *key)
{
	const char *s = sbx_json_str(obj, key);
	return s ? xstrdup(s) : NULL;
}

static json_t *net_json(const struct sbx_net_config *n)
{
	static const char *const modes[] = { "allow", "none", "open", "host" };
	json_t *allow = json_array(), *hosts = json_array(), *ports = json_array();

	for (size_t i = 0; i < n->n_allow; i++)
		json_array_append_new(allow,
				      n->allow[i].port ? json_sprintf("%s:%d", n->allow[i].pattern,
								      n->allow[i].port)
						       : json_string(n->allow[i].pattern));
	for (size_t i = 0; i < n->n_add_hosts; i++)
		json_array_append_new(hosts,
				      json_pack("{s:s, s:s}", "name", n->add_hosts[i].name, "addr",
						n->add_hosts[i].addr));
	for (size_t i = 0; i < n->n_host_ports; i++)
		json_array_append_new(ports,
				      json_pack("{s:i, s:i}", "host", n->host_ports[i].host,
						"inside", n->host_ports[i].inside));
	json_t *j = json_pack("{s:s, s:o, s:b, s:b, s:o, s:o}", "mode", modes[n->mode], "allow",
			      allow, "preset", n->preset, "allow_private", n->allow_private,
			      "add_hosts", hosts, "host_ports", ports);
	if (n->n_rates)
		json_object_set_new(j, "rates", sbx_net_rates_json(n));
	return j;
}

json_t *sbx_net_rates_json(const struct sbx_net_config *n)
{
	json_t *rates = json_array();

	for (size_t i = 0; i < n->n_rates; i++) {
		const struct sbx_net_rate *r = &n->rates[i];
		json_array_append_new(rates,
				      json_pack("{s:o, s:I, s:I, s:I}", "domain",
						r->pattern ? json_string(r->pattern) : json_null(),
						"requests", (json_int_t)r->reqs, "per_s",
						(json_int_t)r->per_s, "bytes_per_s",
						(json_int_t)r->bytes));
	}
	return rates;
}

void sbx_net_rates_from_json(const json_t *a, struct sbx_net_config *n)
{
	size_t i;
	json_t *v;

	json_array_foreach (a, i, v) {
		const char *d = sbx_json_str(v, "domain");
		struct sbx_net_rate r = { .reqs = sbx_json_int(v, "requests", 0),
					  .per_s = sbx_json_int(v, "per_s", 1),
					  .bytes = sbx_json_int(v, "bytes_per_s", 0) };
		int port;
		if (!r.reqs)
			r.per_s = 1; /* a byte limit alone */
		if (r.reqs < 0 || r.reqs > 1000000 ||
		    (r.per_s != 1 && r.per_s != 60 && r.per_s != 3600) || r.bytes < 0 ||
		    (!r.reqs && !r.bytes))
			continue;
		if (d && (sbx_net_parse_allow(d, &r.pattern, &port) < 0 || port)) {
			free(r.pattern);
			continue;
		}
		n->rates = xrealloc(n->rates, (n->n_rates + 1) * sizeof(*n->rates));
		n->rates[n->n_rates++] = r;
	}
}

static void net_from_json(const json_t *j, struct sbx_net_config *n)
{
	size_t i;
	json_t *v;

	if (!json_is_object(j))
		return;
	n->set = true;
	const char *mode = sbx_json_str(j, "mode");
	n->mode = !mode		      ? SBX_NET_ALLOW
		: streq(mode, "none") ? SBX_NET_NONE
		: streq(mode, "open") ? SBX_NET_OPEN
		: streq(mode, "host") ? SBX_NET_HOST
				      : SBX_NET_ALLOW;
	n->preset = json_is_true(json_object_get(j, "preset"));
	n->allow_private = json_is_true(json_object_get(j, "allow_private"));
	json_array_foreach (json_object_get(j, "allow"), i, v) {
		struct sbx_net_rule r;
		if (json_is_string(v) &&
		    sbx_net_parse_allow(json_string_value(v), &r.pattern, &r.port) == 0) {
			n->allow = xrealloc(n->allow, (n->n_allow + 1) * sizeof(*n->allow));
			n->allow[n->n_allow++] = r;
		}
	}
	json_array_foreach (json_object_get(j, "add_hosts"), i, v) {
		const char *name = sbx_json_str(v, "name"), *addr = sbx_json_str(v, "addr");
		if (!name || !addr)
			continue;
		n->add_hosts = xrealloc(n->add_hosts, (n->n_add_hosts + 1) * sizeof(*n->add_hosts));
		n->add_hosts[n->n_add_hosts++] = (struct sbx_host_alias){ xstrdup(name),
									  xstrdup(addr) };
	}
	json_array_foreach (json_object_get(j, "host_ports"), i, v) {
		long long h = sbx_json_int(v, "host", 0), in = sbx_json_int(v, "inside", 0);
		if (h < 1 || h > 65535 || in < 1 || in > 65535)
			continue;
		n->host_ports = xrealloc(n->host_ports,
					 (n->n_host_ports + 1) * sizeof(*n->host_ports));
		n->host_ports[n->n_host_ports++] = (struct sbx_port_forward){ (int)h, (int)in };
	}
	sbx_net_rates_from_json(json_object_get(j, "rates"), n);
}

static json_t *image_json(const struct sbx_image_config *im)
{
	if (!im->id) /* a hosted provider's template: the name alone */
		return json_pack("{s:s}", "ref", im->ref);
	return json_pack("{s:s, s:s?, s:s, s:o, s:o, s:o, s:o}", "ref", im->ref, "name", im->name,
			 "id", im->id, "layers", strv_json(im->layers), "chain",
			 strv_json(im->chain), "entrypoint", strv_json(im->entrypoint), "cmd",
			 strv_json(im->cmd));
}

static void image_from_json(const json_t *j, struct sbx_image_config *im)
{
	if (!json_is_object(j) || !sbx_json_str(j, "ref"))
		return;
	im->ref = str_of(j, "ref");
	im->name = str_of(j, "name");
	im->id = str_of(j, "id");
	im->layers = sbx_json_strv(json_object_get(j, "layers"));
	im->chain = sbx_json_strv(json_object_get(j, "chain"));
	im->entrypoint = sbx_json_strv(json_object_get(j, "entrypoint"));
	im->cmd = sbx_json_strv(json_object_get(j, "cmd"));
}

/* --- secrets (the value is never written) ------------------------------------------------ */

json_t *sbx_secrets_json(const struct sbx_config *c)
{
	json_t *a = json_array();

	for (size_t i = 0; i < c->n_secrets; i++)
		json_array_append_new(a,
				      json_pack("{s:s, s:o, s:s}", "name", c->secrets[i].name,
						"hosts", strv_json(c->secrets[i].hosts),
						"placeholder", c->secrets[i].placeholder));
	return a;
}

static void secrets_from_json(const json_t *a, struct sbx_config *c)
{
	size_t i;
	json_t *v;

	json_array_foreach (a, i, v) {
		const char *name = sbx_json_str(v, "name"), *ph = sbx_json_str(v, "placeholder");
		char **hosts = sbx_json_strv(json_object_get(v, "hosts"));
		if (!name || !ph || !hosts || !hosts[0]) {
			sbx_strv_free(hosts);
			continue;
		}
		c->secrets = xrealloc(c->secrets, (c->n_secrets + 1) * sizeof(*c->secrets));
		c->secrets[c->n_secrets++] = (struct sbx_secret){ xstrdup(name), hosts, xstrdup(ph),
								  NULL };
	}
}

void sbx_secret_clear(struct sbx_secret *s)
{
	free(s->name);
	sbx_strv_free(s->hosts);
	free(s->placeholder);
	if (s->value) /* no copy of it left in freed memory */
		explicit_bzero(s->value, strlen(s->value));
	free(s->value);
	*s = (struct sbx_secret){ 0 };
}

void sbx_secrets_free(struct sbx_secret *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbx_secret_clear(&s[i]);
	free(s);
}

json_t *sbx_config_labels_json(const struct sbx_config *c)
{
	json_t *labels = json_object();

	for (char **l = c->labels; l && *l; l++) {
		const char *eq = strchr(*l, '=');
		_cleanup_free_ char *k = eq ? xstrndup(*l, (size_t)(eq - *l)) : xstrdup(*l);
		json_object_set_new(labels, k, json_string(eq ? eq + 1 : ""));
	}
	return labels;
}

json_t *sbx_config_to_json(const struct sbx_config *c)
{
	json_t *j = json_object(), *vols = json_array();

	json_object_set_new(j, "version", json_integer(SBX_CONFIG_VERSION));
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];
		if (f->type == F_STR && *AT(c, f, char *))
			json_object_set_new(j, f->key, json_string(*AT(c, f, char *)));
		else if (f->type == F_STRV)
			json_object_set_new(j, f->key, strv_json(*AT(c, f, char **)));
		else if (f->type == F_LL && *AT(c, f, long long))
			json_object_set_new(j, f->key, json_integer(*AT(c, f, long long)));
		else if (f->type == F_BOOL && *AT(c, f, bool))
			json_object_set_new(j, f->key, json_true());
	}
	for (size_t i = 0; i < c->n_volumes; i++)
		json_array_append_new(vols,
				      json_pack("{s:s, s:s, s:b}", "host", c->volumes[i].host,
						"dest", c->volumes[i].dest, "read_only",
						c->volumes[i].ro));
	json_object_set_new(j, "volumes", vols);
	json_object_set_new(j, "labels", sbx_config_labels_json(c));
	if (c->ttl_ms)
		json_object_set_new(j, "ttl_action", json_string(c->ttl_rm ? "rm" : "pause"));
	if (c->ttl_ms && c->ttl_hard)
		json_object_set_new(j, "ttl_hard", json_true());
	/* a policy, or a companion flag given without --net */
	if (c->net.set || c->net.n_add_hosts || c->net.n_host_ports || c->net.allow_private ||
	    c->net.n_rates)
		json_object_set_new(j, "net", net_json(&c->net));
	if (c->image.ref)
		json_object_set_new(j, "image", image_json(&c->image));
	if (c->n_secrets)
		json_object_set_new(j, "secrets", sbx_secrets_json(c));
	if (c->n_ports) {
		json_t *ports = json_array();
		for (size_t i = 0; i < c->n_ports; i++)
			json_array_append_new(ports, json_integer(c->ports[i]));
		json_object_set_new(j, "ports", ports);
	}
	return j;
}

int sbx_config_from_json(const json_t *j, struct sbx_config *c, struct sbx_err *err)
{
	const char *k;
	json_t *v;
	size_t i;

	sbx_config_init(c);
	if (!json_is_object(j))
		return 0;
	/* records written before the version was stored have this layout */
	long long version = sbx_json_int(j, "version", 1);
	if (version < 1 || version > SBX_CONFIG_VERSION)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "its options are of layout %lld, and this sbx reads up to %d: "
				   "use a newer sbx",
				   version, SBX_CONFIG_VERSION);
	for (i = 0; i < ARRAY_SIZE(fields); i++) {
		const struct field *f = &fields[i];
		json_t *m = json_object_get(j, f->key);
		if (f->type == F_STR)
			*AT(c, f, char *) = json_is_string(m) ? xstrdup(json_string_value(m))
							      : NULL;
		else if (f->type == F_STRV)
			*AT(c, f, char **) = sbx_json_strv(m);
		else if (f->type == F_BOOL)
			*AT(c, f, bool) = json_is_true(m);
		else if (json_is_integer(m))
			*AT(c, f, long long) = json_integer_value(m);
	}
	json_array_foreach (json_object_get(j, "volumes"), i, v) {
		const char *host = sbx_json_str(v, "host"), *dest = sbx_json_str(v, "dest");
		if (!host || !dest)
			continue;
		c->volumes = xrealloc(c->volumes, (c->n_volumes + 1) * sizeof(*c->volumes));
		c->volumes[c->n_volumes++] = (struct sbx_volume){
			xstrdup(host), xstrdup(dest), json_is_true(json_object_get(v, "read_only"))
		};
	}
	json_t *labels = json_object_get(j, "labels");
	size_t n = 0;
	c->labels = xcalloc(json_object_size(labels) + 1, sizeof(char *));
	json_object_foreach (labels, k, v)
		if (json_is_string(v))
			c->labels[n++] = xasprintf("%s=%s", k, json_string_value(v));
	const char *act = sbx_json_str(j, "ttl_action");
	c->ttl_rm = act && streq(act, "rm");
	c->ttl_hard = json_is_true(json_object_get(j, "ttl_hard"));
	net_from_json(json_object_get(j, "net"), &c->net);
	image_from_json(json_object_get(j, "image"), &c->image);
	secrets_from_json(json_object_get(j, "secrets"), c);
	json_array_foreach (json_object_get(j, "ports"), i, v)
		if (json_is_integer(v) && json_integer_value(v) > 0 &&
		    json_integer_value(v) <= 65535 &&
		    !sbx_config_has_port(c, (int)json_integer_value(v))) {
			c->ports = xrealloc(c->ports, (c->n_ports + 1) * sizeof(*c->ports));
			c->ports[c->n_ports++] = (int)json_integer_value(v);
		}
	return 0;
}

int sbx_port_arg(struct sbx_config *c, const char *arg, char *msg, size_t len)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > 65535) {
		snprintf(msg, len, "invalid --port '%s': a port inside the sandbox, 1 to 65535",
			 arg);
		return -1;
	}
	if (c->n_ports && sbx_config_has_port(c, (int)v))
		return 0;
	c->ports = xrealloc(c->ports, (c->n_ports + 1) * sizeof(*c->ports));
	c->ports[c->n_ports++] = (int)v;
	return 0;
}

bool sbx_config_has_port(const struct sbx_config *c, int port)
{
	for (size_t i = 0; i < c->n_ports; i++)
		if (c->ports[i] == port)
			return true;
	return false;
}

int sbx_config_runtime_ok(const struct sbx_config *c, const char *const *runtimes,
			  const char *provider, struct sbx_err *err)
{
	if (!c->runtime)
		return 0;
	struct strbuf names = STRBUF_INIT;
	for (size_t i = 0; runtimes && runtimes[i]; i++) {
		if (streq(runtimes[i], "*") || streq(runtimes[i], c->runtime)) {
			strbuf_release(&names);
			return 0;
		}
		strbuf_addf(&names, "%s%s", names.len ? ", " : "", runtimes[i]);
	}
	if (!names.len)
		sbx_err_set(err, SBX_E_UNSUPPORTED,
			    "provider '%s' has no runtime but its own: --runtime %s is not "
			    "supported",
			    provider, c->runtime);
	else
		sbx_err_set(err, SBX_E_UNSUPPORTED,
			    "provider '%s' has no runtime '%s' (it has: %s)", provider, c->runtime,
			    names.buf);
	strbuf_release(&names);
	return -1;
}

void sbx_config_init(struct sbx_config *c)
{
	*c = (struct sbx_config){ .version = SBX_CONFIG_VERSION,
				  .net = { .mode = SBX_NET_ALLOW, .preset = true } };
}

void sbx_config_release(struct sbx_config *c)
{
	struct sbx_net_config *n = &c->net;

	sbx_strv_free(c->env);
	free(c->workdir);
	free(c->user);
	free(c->hostname);
	sbx_strv_free(c->labels);
	for (size_t i = 0; i < c->n_volumes; i++) {
		free(c->volumes[i].host);
		free(c->volumes[i].dest);
	}
	free(c->volumes);
	for (size_t i = 0; i < n->n_allow; i++)
		free(n->allow[i].pattern);
	free(n->allow);
	for (size_t i = 0; i < n->n_add_hosts; i++) {
		free(n->add_hosts[i].name);
		free(n->add_hosts[i].addr);
	}
	free(n->add_hosts);
	free(n->host_ports);
	for (size_t i = 0; i < n->n_rates; i++)
		free(n->rates[i].pattern);
	free(n->rates);
	free(c->from);
	free(c->runtime);
	free(c->ports);
	free(c->image.ref);
	free(c->image.name);
	free(c->image.id);
	sbx_strv_free(c->image.layers);
	sbx_strv_free(c->image.chain);
	sbx_strv_free(c->image.entrypoint);
	sbx_strv_free(c->image.cmd);
	sbx_secrets_free(c->secrets, c->n_secrets);
	sbx_config_init(c);
}

/* --- what a provider must be able to do for it ----------------------------------------------- */

/* a member that asks for something when it is not 0 (or, for the net modes, when a policy of
 * that mode is recorded) */
enum ask {
	A_LL,
	A_SIZE,
	A_BOOL,
	A_PTR,
	A_NET_MODE
};
static const struct need {
	unsigned cap;
	const char *flag;
	enum ask kind;
	size_t off;
	enum sbx_net_mode mode;
} needs[] = {
	/* first: a provider without it is told so, whatever else it lacks */
	{ SBX_CAP_SECRETS, "--secret", A_SIZE, offsetof(struct sbx_config, n_secrets) },
	{ SBX_CAP_VOLUMES, "--volume", A_SIZE, offsetof(struct sbx_config, n_volumes) },
	{ SBX_CAP_LIMIT_PIDS, "--pids-limit", A_LL, offsetof(struct sbx_config, pids_limit) },
	{ SBX_CAP_LIMIT_MEMORY, "--memory", A_LL, offsetof(struct sbx_config, memory) },
	{ SBX_CAP_LIMIT_CPU, "--cpus", A_LL, offsetof(struct sbx_config, cpu_millis) },
	{ SBX_CAP_DISK, "--disk", A_LL, offsetof(struct sbx_config, disk) },
	{ SBX_CAP_ADD_HOST, "--add-host", A_SIZE, offsetof(struct sbx_config, net.n_add_hosts) },
	{ SBX_CAP_HOST_PORT, "--host-port", A_SIZE, offsetof(struct sbx_config, net.n_host_ports) },
	{ SBX_CAP_NET_ALLOW, "--net-allow-private", A_BOOL,
	  offsetof(struct sbx_config, net.allow_private) },
	{ SBX_CAP_NET_ALLOW, "--net allow=", A_NET_MODE, 0, SBX_NET_ALLOW },
	{ SBX_CAP_NET_NONE, "--net none", A_NET_MODE, 0, SBX_NET_NONE },
	{ SBX_CAP_NET_OPEN, "--net open", A_NET_MODE, 0, SBX_NET_OPEN },
	{ SBX_CAP_NET_HOST, "--net host", A_NET_MODE, 0, SBX_NET_HOST },
	{ SBX_CAP_NET_RATE, "--net-rate", A_SIZE, offsetof(struct sbx_config, net.n_rates) },
	{ SBX_CAP_TTL, "--ttl", A_LL, offsetof(struct sbx_config, ttl_ms) },
	{ SBX_CAP_HOSTNAME, "--hostname", A_PTR, offsetof(struct sbx_config, hostname) },
	{ SBX_CAP_IMAGE | SBX_CAP_TEMPLATE, "--image", A_PTR,
	  offsetof(struct sbx_config, image.ref) },
	{ SBX_CAP_NESTED, "--nested", A_BOOL, offsetof(struct sbx_config, nested) },
	{ SBX_CAP_SNAPSHOT, "--from (snapshots)", A_PTR, offsetof(struct sbx_config, from) },
};

static bool asks(const struct sbx_config *c, const struct need *n)
{
	switch (n->kind) {
	case A_LL:
		return *AT(c, n, long long) != 0;
	case A_SIZE:
		return *AT(c, n, size_t) != 0;
	case A_BOOL:
		return *AT(c, n, bool);
	case A_PTR:
		return *AT(c, n, void *) != NULL;
	case A_NET_MODE:
		return c->net.set && c->net.mode == n->mode;
	}
	return false;
}

int sbx_config_supported(const struct sbx_config *c, unsigned caps, const char *provider,
			 struct sbx_err *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(needs); i++)
		if (!(caps & needs[i].cap) && asks(c, &needs[i]))
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "provider '%s' does not support %s", provider,
					   needs[i].flag);
	return 0;
}

/* s is text: the record keeps the options as JSON, which has no other strings (jansson would
 * drop such a value, and the sandbox would silently lack it) */
static int text_ok(const char *s, const char *what, size_t i, char *msg, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = s ? strlen(s) : 0;

	for (size_t k = 0; k < n;) {
		size_t l = sbx_utf8_seq_len(p + k, n - k);
		if (!l) {
			_cleanup_free_ char *safe = sbx_term_safe(s);
			_cleanup_free_ char *w = i ? xasprintf("%s %zu", what, i) : xstrdup(what);
			snprintf(msg, len,
				 "%s '%.80s' is not valid UTF-8: options are kept as text", w,
				 safe);
			return -1;
		}
		k += l;
	}
	return 0;
}

int sbx_config_text(const struct sbx_config *c, char *msg, size_t len)
{
	size_t i;

	for (i = 0; c->env && c->env[i]; i++)
		if (text_ok(c->env[i], "variable", i + 1, msg, len) < 0)
			return -1;
	for (i = 0; c->labels && c->labels[i]; i++)
		if (text_ok(c->labels[i], "label", i + 1, msg, len) < 0)
			return -1;
	for (i = 0; i < c->n_volumes; i++)
		if (text_ok(c->volumes[i].host, "volume", i + 1, msg, len) < 0 ||
		    text_ok(c->volumes[i].dest, "volume", i + 1, msg, len) < 0)
			return -1;
	if (text_ok(c->workdir, "-w", 0, msg, len) < 0 ||
	    text_ok(c->hostname, "--hostname", 0, msg, len) < 0 ||
	    text_ok(c->image.ref, "--image", 0, msg, len) < 0 ||
	    text_ok(c->runtime, "--runtime", 0, msg, len) < 0)
		return -1;
	return 0;
}

int sbx_config_validate(const struct sbx_config *c, char *msg, size_t len)
{
	return sbx_net_validate(&c->net, msg, len);
}
