/* --net, --net-allow-private, --add-host, --host-port: parsing and the stored form. */
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

static const char *mode_of(const char *net)
{
	if (!net || strncmp(net, "allow=", 6) == 0)
		return "allow";
	return net;
}

int sbx_net_validate(const struct sbx_create_opts *o, char *msg, size_t len)
{
	const char *mode = mode_of(o->net);

	if (!streq(mode, "allow") && !streq(mode, "none") && !streq(mode, "open") &&
	    !streq(mode, "host")) {
		snprintf(msg, len,
			 "invalid --net '%s': use none, allow=DOMAIN[:PORT],..., open or "
			 "host",
			 o->net);
		return -1;
	}
	if (o->net && streq(mode, "allow")) {
		_cleanup_free_ char *list = xstrdup(o->net + 6);
		char *save = NULL;
		for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
			_cleanup_free_ char *pat = NULL;
			int port;
			if (sbx_net_parse_allow(e, &pat, &port) < 0) {
				snprintf(msg, len,
					 "invalid domain '%s' in --net: use example.com, "
					 "*.example.com, optionally with :PORT",
					 e);
				return -1;
			}
		}
	}
	bool proxy = streq(mode, "allow") || streq(mode, "open");
	for (char **h = o->host_ports; h && *h; h++) {
		int hp, in;
		if (sbx_net_parse_host_port(*h, &hp, &in) < 0) {
			snprintf(msg, len,
				 "invalid --host-port '%s': use PORT or PORT:INSIDE, ports "
				 "1-65535",
				 *h);
			return -1;
		}
		if (proxy && (in == 3128 || in == 1080)) {
			snprintf(msg, len,
				 "invalid --host-port '%s': port %d inside is the sandbox's "
				 "egress proxy; pick another inside port (PORT:INSIDE)",
				 *h, in);
			return -1;
		}
		for (char **g = o->host_ports; g < h; g++) {
			int hp2, in2;
			if (sbx_net_parse_host_port(*g, &hp2, &in2) == 0 && in2 == in) {
				snprintf(msg, len,
					 "--host-port '%s' and '%s' both use port %d inside", *g,
					 *h, in);
				return -1;
			}
		}
	}
	if (o->net_allow_private && !proxy) {
		snprintf(msg, len,
			 "--net-allow-private goes with --net allow=... or open: with --net "
			 "%s no proxy dials out",
			 mode);
		return -1;
	}
	if (streq(mode, "host") && o->host_ports && *o->host_ports) {
		snprintf(msg, len,
			 "--host-port has no use with --net host: the sandbox shares the "
			 "host's network");
		return -1;
	}
	for (char **a = o->add_hosts; a && *a; a++) {
		_cleanup_free_ char *n = NULL, *ad = NULL;
		if (sbx_net_parse_add_host(*a, &n, &ad) < 0) {
			snprintf(msg, len,
				 "invalid --add-host '%s': use NAME:ADDR, such as "
				 "db.test:10.0.0.5",
				 *a);
			return -1;
		}
	}
	return 0;
}

json_t *sbx_net_json(const struct sbx_create_opts *o)
{
	const char *mode = mode_of(o->net);
	json_t *j = json_object(), *allow = json_array(), *hosts = json_array(),
	       *ports = json_array();

	json_object_set_new(j, "mode", json_string(mode));
	if (o->net && streq(mode, "allow")) {
		_cleanup_free_ char *list = xstrdup(o->net + 6);
		char *save = NULL;
		for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
			_cleanup_free_ char *pat = NULL;
			int port;
			if (sbx_net_parse_allow(e, &pat, &port) < 0)
				continue;
			_cleanup_free_ char *norm = port ? xasprintf("%s:%d", pat, port)
							 : xstrdup(pat);
			json_array_append_new(allow, json_string(norm));
		}
	}
	json_object_set_new(j, "allow", allow);
	/* the preset comes with the default mode and with a list; "--net allow=" alone (an empty
	 * list) asks for nothing and gets nothing */
	bool empty = o->net && streq(o->net, "allow=");
	json_object_set_new(j, "preset",
			    json_boolean(streq(mode, "allow") && !o->net_preset_none && !empty));
	json_object_set_new(j, "allow_private", json_boolean(o->net_allow_private));
	for (char **a = o->add_hosts; a && *a; a++) {
		_cleanup_free_ char *n = NULL, *ad = NULL;
		if (sbx_net_parse_add_host(*a, &n, &ad) < 0)
			continue;
		json_array_append_new(hosts, json_pack("{s:s, s:s}", "name", n, "addr", ad));
	}
	json_object_set_new(j, "add_hosts", hosts);
	for (char **h = o->host_ports; h && *h; h++) {
		int hp, in;
		if (sbx_net_parse_host_port(*h, &hp, &in) == 0)
			json_array_append_new(ports,
					      json_pack("{s:i, s:i}", "host", hp, "inside", in));
	}
	json_object_set_new(j, "host_ports", ports);
	return j;
}

bool sbx_net_match(const char *pattern, const char *host)
{
	if (strncmp(pattern, "*.", 2) == 0) {
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".example.com" */
		return hl > pl && streq(host + hl - pl, pattern + 1);
	}
	return streq(pattern, host);
}
