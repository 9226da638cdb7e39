/* --secret's argument: the name, the value read from the caller, the hosts, a placeholder. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "core/config.h"
#include "core/net.h"
#include "core/util.h"

static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 128 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* "sbx-secret-" and 32 letters and digits: the shape of a token, worth nothing */
static char *placeholder(void)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char r[32];
	char *p = xmalloc(sizeof(SBX_SECRET_PREFIX) + 32);

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		abort(); /* the kernel's random source failed */
	memcpy(p, SBX_SECRET_PREFIX, sizeof(SBX_SECRET_PREFIX) - 1);
	for (size_t i = 0; i < 32; i++)
		p[sizeof(SBX_SECRET_PREFIX) - 1 + i] = al[r[i] % 62];
	p[sizeof(SBX_SECRET_PREFIX) - 1 + 32] = 0;
	return p;
}

/* the values read in this process, by name: the record's configuration, decoded again from
 * its JSON on its way to the provider, never holds them */
#define HELD_MAX 64
static struct {
	char *name, *value;
} held[HELD_MAX];

static void hold(const char *name, const char *value)
{
	for (size_t i = 0; i < HELD_MAX; i++)
		if (!held[i].name || streq(held[i].name, name)) {
			if (held[i].value)
				explicit_bzero(held[i].value, strlen(held[i].value));
			free(held[i].value);
			free(held[i].name);
			held[i].name = xstrdup(name);
			held[i].value = xstrdup(value);
			return;
		}
}

const char *sbx_secret_value(const struct sbx_secret *s)
{
	if (s->value)
		return s->value;
	for (size_t i = 0; i < HELD_MAX && held[i].name; i++)
		if (streq(held[i].name, s->name))
			return held[i].value;
	return NULL;
}

int sbx_secret_arg(struct sbx_config *c, const char *arg, char *msg, size_t len)
{
	const char *at = strrchr(arg, '@'), *eq = strchr(arg, '=');
	_cleanup_free_ char *value = NULL;
	char **hosts = NULL;
	size_t nh = 0;

	if (!at || (eq && eq > at))
		eq = NULL;
	size_t nl = eq ? (size_t)(eq - arg) : at ? (size_t)(at - arg) : strlen(arg);
	if (!at || !name_ok(arg, nl) || (eq && (eq[1] != '@' || eq + 1 == at))) {
		snprintf(msg, len,
			 "invalid --secret '%s': use NAME@HOST[,HOST...] (the value from the "
			 "environment variable NAME) or NAME=@FILE@HOST[,HOST...]",
			 arg);
		return -1;
	}
	_cleanup_free_ char *name = xstrndup(arg, nl);
	if (eq) {
		_cleanup_free_ char *file = xstrndup(eq + 2, (size_t)(at - eq - 2));
		size_t vl = 0;
		value = sbx_read_file(file, SBX_SECRET_VALUE_MAX + 2, &vl);
		if (!value) {
			snprintf(msg, len, "--secret %s: cannot read '%s': %s", name, file,
				 strerror(errno));
			return -1;
		}
		if (vl && value[vl - 1] == '\n') /* a file's last newline is not the value's */
			value[--vl] = 0;
		if (vl && value[vl - 1] == '\r')
			value[--vl] = 0;
		if (strlen(value) != vl) {
			snprintf(msg, len, "--secret %s: '%s' holds a NUL byte", name, file);
			return -1;
		}
	} else {
		const char *v = getenv(name);
		if (!v || !*v) {
			snprintf(msg, len,
				 "--secret %s: the environment variable %s is not set (or use "
				 "%s=@FILE@HOST)",
				 name, name, name);
			return -1;
		}
		value = xstrdup(v);
	}
	size_t vl = strlen(value);
	bool bad = vl == 0 || vl > SBX_SECRET_VALUE_MAX;
	for (size_t i = 0; i < vl && !bad; i++)
		bad = (unsigned char)value[i] < 0x20 || value[i] == 0x7f;
	if (bad) {
		explicit_bzero(value, vl);
		snprintf(msg, len,
			 "--secret %s: the value must be 1 to %d bytes without control characters "
			 "(it goes into HTTP headers)",
			 name, SBX_SECRET_VALUE_MAX);
		return -1;
	}
	_cleanup_free_ char *list = xstrdup(at + 1);
	char *save = NULL;
	for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
		char *pat = NULL;
		int port = 0;
		if (sbx_net_parse_allow(h, &pat, &port) < 0 || port) {
			free(pat);
			sbx_strv_free(hosts);
			explicit_bzero(value, vl);
			snprintf(msg, len,
				 "--secret %s: invalid host '%s': use example.com or "
				 "*.example.com (no port)",
				 name, h);
			return -1;
		}
		hosts = xrealloc(hosts, (nh + 2) * sizeof(char *));
		hosts[nh++] = pat;
		hosts[nh] = NULL;
	}
	if (!nh) {
		explicit_bzero(value, vl);
		snprintf(msg, len, "--secret %s: no host after '@'", name);
		return -1;
	}
	if (c->n_secrets >= HELD_MAX) {
		explicit_bzero(value, vl);
		sbx_strv_free(hosts);
		snprintf(msg, len, "too many secrets: at most %d", HELD_MAX);
		return -1;
	}
	hold(name, value);
	_cleanup_free_ char *ph = NULL;
	for (size_t i = 0; i < c->n_secrets; i++)
		if (streq(c->secrets[i].name, name)) {
			/* rotated: the placeholder stays, so that what runs keeps working */
			ph = TAKE_PTR(c->secrets[i].placeholder);
			sbx_secret_clear(&c->secrets[i]);
			c->secrets[i] = c->secrets[--c->n_secrets];
			break;
		}
	c->secrets = xrealloc(c->secrets, (c->n_secrets + 1) * sizeof(*c->secrets));
	c->secrets[c->n_secrets++] = (struct sbx_secret){ TAKE_PTR(name), hosts,
							  ph ? TAKE_PTR(ph) : placeholder(),
							  TAKE_PTR(value) };
	return 0;
}

int sbx_secrets_validate(const struct sbx_config *c, char *msg, size_t len)
{
	const struct sbx_net_config *n = &c->net;

	if (c->n_secrets && c->from) {
		snprintf(
			msg, len,
			"--secret does not go with --from or fork: the files of a snapshot come "
			"with another sandbox's CA bundle; create the sandbox, then copy files in");
		return -1;
	}
	for (size_t i = 0; i < c->n_secrets; i++) {
		const struct sbx_secret *s = &c->secrets[i];
		if (!n->set || (n->mode != SBX_NET_ALLOW && n->mode != SBX_NET_OPEN)) {
			snprintf(
				msg, len,
				"--secret %s needs the egress proxy: --net allow=%s (or --net open)",
				s->name, s->hosts[0]);
			return -1;
		}
		for (char **h = s->hosts; *h && n->mode == SBX_NET_ALLOW; h++) {
			bool ok = false;
			for (size_t k = 0; k < n->n_allow && !ok; k++)
				ok = (n->allow[k].port == 0 || n->allow[k].port == 443) &&
					(streq(n->allow[k].pattern, *h) ||
					 sbx_net_match(n->allow[k].pattern, *h));
			if (!ok) {
				snprintf(
					msg, len,
					"--secret %s: %s is not in the allow list: add it to --net "
					"allow=... (a secret goes only to hosts the sandbox may reach)",
					s->name, *h);
				return -1;
			}
		}
	}
	return 0;
}
