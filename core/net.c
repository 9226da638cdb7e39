/* --net, --net-allow-private, --add-host, --host-port: parsed into a sandbox's typed network
 * policy (struct sbx_net_config), and checked. */
#define _GNU_SOURCE
#include "core/net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>

#include "core/util.h"

const char *const sbx_net_preset[] = {
	/* Debian and Ubuntu */
	"deb.debian.org:80",
	"deb.debian.org:443",
	"security.debian.org:80",
	"security.debian.org:443",
	"*.debian.org:80",
	"*.debian.org:443",
	"archive.ubuntu.com:80",
	"archive.ubuntu.com:443",
	"security.ubuntu.com:80",
	"security.ubuntu.com:443",
	/* npm and yarn */
	"registry.npmjs.org:443",
	"registry.yarnpkg.com:443",
	/* PyPI */
	"pypi.org:443",
	"files.pythonhosted.org:443",
	/* crates.io */
	"crates.io:443",
	"index.crates.io:443",
	"static.crates.io:443",
	/* the Go module proxy and checksum database */
	"proxy.golang.org:443",
	"sum.golang.org:443",
	/* GitHub and GitLab, https and ssh */
	"github.com:443",
	"github.com:22",
	"*.github.com:443",
	"*.githubusercontent.com:443",
	"gitlab.com:443",
	"gitlab.com:22",
	"*.gitlab.com:443",
	NULL,
};

static bool label_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* a host name: labels of [A-Za-z0-9_-] joined by dots, at most 253 characters */
static bool hostname_valid(const char *s)
{
	size_t n = strlen(s), lab = 0;

	if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			if (lab == 0)
				return false;
			lab = 0;
		} else if (!label_char(*p) || ++lab > 63) {
			return false;
		}
	}
	return true;
}

static int parse_port(const char *s, int *ret)
{
	long long v;

	if (sbx_parse_int(s, 1, 65535, &v) < 0)
		return -1;
	*ret = (int)v;
	return 0;
}

int sbx_net_parse_allow(const char *s, char **ret_pattern, int *ret_port)
{
	_cleanup_free_ char *t = xstrdup(s);
	int port = 0;
	char *colon = strrchr(t, ':');

	if (colon) {
		*colon = 0;
		if (parse_port(colon + 1, &port) < 0)
			return -1;
	}
	for (char *p = t; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	const char *host = strncmp(t, "*.", 2) == 0 ? t + 2 : t;
	struct in6_addr a6;
	if (!hostname_valid(host) && !(host == t && inet_pton(AF_INET6, host, &a6) == 1))
		return -1;
	*ret_pattern = TAKE_PTR(t);
	*ret_port = port;
	return 0;
}

int sbx_net_parse_add_host(const char *s, char **ret_name, char **ret_addr)
{
	const char *colon = strchr(s, ':');
	unsigned char buf[sizeof(struct in6_addr)];

	if (!colon)
		return -1;
	_cleanup_free_ char *name = xstrndup(s, (size_t)(colon - s));
	const char *addr = colon + 1;
	if (!hostname_valid(name))
		return -1;
	if (inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1)
		return -1;
	for (char *p = name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	*ret_name = TAKE_PTR(name);
	*ret_addr = xstrdup(addr);
	return 0;
}

int sbx_net_parse_host_port(const char *s, int *ret_host, int *ret_inside)
{
	_cleanup_free_ char *t = xstrdup(s);
	char *colon = strchr(t, ':');

	if (colon)
		*colon++ = 0;
	if (parse_port(t, ret_host) < 0)
		return -1;
	if (!colon) {
		*ret_inside = *ret_host;
		return 0;
	}
	return parse_port(colon, ret_inside);
}

int sbx_net_parse_mode(const char *arg, struct sbx_net_config *n, char *msg, size_t len)
{
	static const char *const modes[] = { "allow", "none", "open", "host" };

	for (size_t i = 1; i < ARRAY_SIZE(modes); i++)
		if (streq(arg, modes[i])) {
			n->set = true;
			n->mode = (enum sbx_net_mode)i;
			n->preset = false;
			return 0;
		}
	if (!startswith(arg, "allow=")) {
		snprintf(msg, len,
			 "invalid --net '%s': use none, allow=DOMAIN[:PORT],..., open or host",
			 arg);
		return -1;
	}
	_cleanup_free_ char *list = xstrdup(arg + 6);
	char *save = NULL;
	n->set = true;
	n->mode = SBX_NET_ALLOW;
	/* the preset comes with the default mode and with a list; "--net allow=" alone (an empty
	 * list) asks for nothing and gets nothing */
	n->preset = arg[6] != 0;
	for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		struct sbx_net_rule r;
		if (sbx_net_parse_allow(e, &r.pattern, &r.port) < 0) {
			snprintf(msg, len,
				 "invalid domain '%s' in --net: use example.com, *.example.com, "
				 "optionally with :PORT",
				 e);
			return -1;
		}
		n->allow = xrealloc(n->allow, (n->n_allow + 1) * sizeof(*n->allow));
		n->allow[n->n_allow++] = r;
	}
	return 0;
}

int sbx_net_add_host_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len)
{
	struct sbx_host_alias a;

	if (sbx_net_parse_add_host(arg, &a.name, &a.addr) < 0) {
		snprintf(msg, len,
			 "invalid --add-host '%s': use NAME:ADDR, such as db.test:10.0.0.5", arg);
		return -1;
	}
	n->add_hosts = xrealloc(n->add_hosts, (n->n_add_hosts + 1) * sizeof(*n->add_hosts));
	n->add_hosts[n->n_add_hosts++] = a;
	return 0;
}

int sbx_net_host_port_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len)
{
	struct sbx_port_forward f;

	if (sbx_net_parse_host_port(arg, &f.host, &f.inside) < 0) {
		snprintf(msg, len,
			 "invalid --host-port '%s': use PORT or PORT:INSIDE, ports 1-65535", arg);
		return -1;
	}
	for (size_t i = 0; i < n->n_host_ports; i++)
		if (n->host_ports[i].inside == f.inside) {
			snprintf(msg, len, "--host-port '%d:%d' and '%s' both use port %d inside",
				 n->host_ports[i].host, f.inside, arg, f.inside);
			return -1;
		}
	n->host_ports = xrealloc(n->host_ports, (n->n_host_ports + 1) * sizeof(*n->host_ports));
	n->host_ports[n->n_host_ports++] = f;
	return 0;
}

int sbx_net_validate(const struct sbx_net_config *n, char *msg, size_t len)
{
	static const char *const modes[] = { "allow", "none", "open", "host" };
	bool proxy = n->mode == SBX_NET_ALLOW || n->mode == SBX_NET_OPEN;

	for (size_t i = 0; proxy && i < n->n_host_ports; i++) {
		int in = n->host_ports[i].inside;
		if (in == 3128 || in == 1080) {
			snprintf(msg, len,
				 "invalid --host-port '%d:%d': port %d inside is the sandbox's "
				 "egress proxy; pick another inside port (PORT:INSIDE)",
				 n->host_ports[i].host, in, in);
			return -1;
		}
	}
	if (n->allow_private && !proxy) {
		snprintf(msg, len,
			 "--net-allow-private goes with --net allow=... or open: with --net %s no "
			 "proxy dials out",
			 modes[n->mode]);
		return -1;
	}
	if (n->n_rates && !proxy) {
		snprintf(msg, len,
			 "--net-rate goes with --net allow=... or open: with --net %s no proxy "
			 "counts requests",
			 modes[n->mode]);
		return -1;
	}
	if (n->mode == SBX_NET_HOST && n->n_host_ports) {
		snprintf(msg, len,
			 "--host-port has no use with --net host: the sandbox shares the host's "
			 "network");
		return -1;
	}
	return 0;
}

bool sbx_net_match(const char *pattern, const char *host)
{
	if (strncmp(pattern, "*.", 2) == 0) {
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".example.com" */
		return hl > pl && streq(host + hl - pl, pattern + 1);
	}
	return streq(pattern, host);
}

/* one LIMIT of --net-rate into r; -1 when invalid */
static int rate_part(const char *p, struct sbx_net_rate *r)
{
	size_t n = strlen(p);
	long long v;

	if (n > 3 && strchr("smh", p[n - 1]) && p[n - 2] == '/' && p[n - 3] == 'r') {
		_cleanup_free_ char *num = xstrndup(p, n - 3);
		if (r->reqs || sbx_parse_int(num, 1, 1000000, &v) < 0)
			return -1;
		r->reqs = v;
		r->per_s = p[n - 1] == 's' ? 1 : p[n - 1] == 'm' ? 60 : 3600;
		return 0;
	}
	if (n > 2 && p[n - 2] == '/' && p[n - 1] == 's') {
		_cleanup_free_ char *size = xstrndup(p, n - 2);
		size_t l = strlen(size);
		/* 10MiB as 10MB: sizes here are binary anyway */
		if (l > 3 && (size[l - 2] == 'i' || size[l - 2] == 'I') &&
		    (size[l - 1] == 'B' || size[l - 1] == 'b'))
			memmove(size + l - 2, size + l - 1, 2);
		long long b = sbx_parse_bytes(size);
		if (r->bytes || b < 1)
			return -1;
		r->bytes = b;
		return 0;
	}
	return -1;
}

int sbx_net_parse_rate(const char *s, struct sbx_net_rate *r)
{
	_cleanup_free_ char *t = xstrdup(s);
	char *eq = strchr(t, '='), *limits = t, *save = NULL;

	*r = (struct sbx_net_rate){ .per_s = 1 };
	if (eq) {
		int port;
		*eq = 0;
		limits = eq + 1;
		if (strchr(t, ':') || sbx_net_parse_allow(t, &r->pattern, &port) < 0)
			return -1;
	}
	if (streq(limits, "none"))
		return 0;
	if (!*limits || limits[strlen(limits) - 1] == ',')
		goto bad;
	for (char *p = strtok_r(limits, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (rate_part(p, r) < 0)
			goto bad;
	return 0;
bad:
	free(r->pattern);
	r->pattern = NULL;
	return -1;
}

int sbx_net_rate_arg(struct sbx_net_config *n, const char *arg, char *msg, size_t len)
{
	struct sbx_net_rate r;

	if (sbx_net_parse_rate(arg, &r) < 0) {
		snprintf(msg, len,
			 "invalid --net-rate '%s': use [DOMAIN=]LIMIT[,LIMIT], LIMIT being "
			 "requests (50r/s, 600r/m) or bytes a second (10MiB/s), or "
			 "[DOMAIN=]none",
			 arg);
		return -1;
	}
	for (size_t i = 0; i < n->n_rates; i++) {
		const char *p = n->rates[i].pattern;
		if (!(p == r.pattern || (p && r.pattern && streq(p, r.pattern))))
			continue;
		free(n->rates[i].pattern);
		memmove(&n->rates[i], &n->rates[i + 1], (n->n_rates - i - 1) * sizeof(r));
		n->n_rates--;
		break;
	}
	if (!r.reqs && !r.bytes) { /* none */
		free(r.pattern);
		return 0;
	}
	n->rates = xrealloc(n->rates, (n->n_rates + 1) * sizeof(*n->rates));
	n->rates[n->n_rates++] = r;
	return 0;
}

char *sbx_net_rate_text(const struct sbx_net_rate *r)
{
	char req[64] = "", bytes[64] = "";

	if (r->reqs)
		snprintf(req, sizeof(req), "%lldr/%c", r->reqs,
			 r->per_s == 1		  ? 's'
				 : r->per_s == 60 ? 'm'
						  : 'h');
	if (r->bytes % (1 << 20) == 0)
		snprintf(bytes, sizeof(bytes), "%lldMiB/s", r->bytes >> 20);
	else if (r->bytes % 1024 == 0)
		snprintf(bytes, sizeof(bytes), "%lldKiB/s", r->bytes >> 10);
	else
		snprintf(bytes, sizeof(bytes), "%lld/s", r->bytes);
	if (!r->bytes)
		bytes[0] = 0;
	return xasprintf("%s%s%s%s%s", r->pattern ? r->pattern : "", r->pattern ? "=" : "", req,
			 *req && *bytes ? "," : "", bytes);
}

/* the rules of n equal to r (a port of 0 in r: every port of its pattern) out of n */
static size_t allow_remove(struct sbx_net_config *n, const struct sbx_net_rule *r)
{
	size_t k = 0, gone = 0;

	for (size_t i = 0; i < n->n_allow; i++) {
		if (streq(n->allow[i].pattern, r->pattern) &&
		    (r->port == 0 || r->port == n->allow[i].port)) {
			free(n->allow[i].pattern);
			gone++;
			continue;
		}
		n->allow[k++] = n->allow[i];
	}
	n->n_allow = k;
	return gone;
}

int sbx_net_update(struct sbx_net_config *n, const struct sbx_update_opts *o, char *msg, size_t len)
{
	if (o->net) {
		struct sbx_config fresh;
		sbx_config_init(&fresh);
		if (sbx_net_parse_mode(o->net, &fresh.net, msg, len) < 0) {
			sbx_config_release(&fresh);
			return -1;
		}
		for (size_t i = 0; i < n->n_allow; i++)
			free(n->allow[i].pattern);
		free(n->allow);
		n->set = true;
		n->mode = fresh.net.mode;
		n->preset = fresh.net.preset;
		n->allow = TAKE_PTR(fresh.net.allow);
		n->n_allow = fresh.net.n_allow;
		fresh.net.n_allow = 0;
		sbx_config_release(&fresh);
	}
	if (o->net_preset)
		n->preset = streq(o->net_preset, "default");
	for (char **a = o->net_allow; a && *a; a++) {
		struct sbx_net_rule r;
		if (sbx_net_parse_allow(*a, &r.pattern, &r.port) < 0) {
			snprintf(msg, len,
				 "invalid --net-allow '%s': use example.com, *.example.com, "
				 "optionally with :PORT",
				 *a);
			return -1;
		}
		(void)allow_remove(n, &r); /* no twice */
		n->allow = xrealloc(n->allow, (n->n_allow + 1) * sizeof(*n->allow));
		n->allow[n->n_allow++] = r;
	}
	for (char **d = o->net_deny; d && *d; d++) {
		_cleanup_free_ char *pat = NULL;
		struct sbx_net_rule r;
		if (sbx_net_parse_allow(*d, &pat, &r.port) < 0) {
			snprintf(msg, len,
				 "invalid --net-deny '%s': use example.com, *.example.com, "
				 "optionally with :PORT",
				 *d);
			return -1;
		}
		r.pattern = pat;
		(void)allow_remove(n, &r);
	}
	for (char **r = o->net_rate; r && *r; r++)
		if (sbx_net_rate_arg(n, *r, msg, len) < 0)
			return -1;
	if ((o->net_allow || o->net_deny || o->net_preset) && n->mode != SBX_NET_ALLOW) {
		static const char *const modes[] = { "allow", "none", "open", "host" };
		snprintf(msg, len,
			 "--net-allow, --net-deny and --net-preset go with --net allow=...: the "
			 "sandbox's egress is --net %s",
			 modes[n->mode]);
		return -1;
	}
	if (o->net_rate && n->n_rates && n->mode != SBX_NET_ALLOW && n->mode != SBX_NET_OPEN) {
		snprintf(msg, len,
			 "--net-rate goes with --net allow=... or open: other modes have no "
			 "proxy to count requests");
		return -1;
	}
	return 0;
}
