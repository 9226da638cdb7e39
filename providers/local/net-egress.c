/* The supervisor's egress policy (the allow list, --add-host, the addresses no sandbox may
 * reach), its log, and the exec credentials it checks (the resolver: net-resolve.c). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "core/json.h"
#include "core/net.h"

#define LOG_MAX_DEFAULT (4LL << 20)
#define EXECS_MAX (1 << 20)
#define CRED_CACHE 16

struct cred {
	char id[13], secret[33];
	char *command;
};

struct local_egress {
	const struct local_setup *s;
	bool proxy, open, preset, allow_private;
	char **allow;
	int *allow_port;
	size_t n_allow;
	char **host_name, **host_addr;
	size_t n_hosts;
	struct local_rate *rate;
	int log_fd;
	long long log_max;
	struct cred cache[CRED_CACHE];
	unsigned cache_next;
};

static void log_line(struct local_egress *e, const char *s);

/* the allow list of net, replacing any */
static void allow_set(struct local_egress *e, const struct sbx_net_config *net)
{
	for (size_t i = 0; i < e->n_allow; i++)
		free(e->allow[i]);
	free(e->allow);
	free(e->allow_port);
	e->n_allow = 0;
	e->allow = xcalloc(net->n_allow + 1, sizeof(char *));
	e->allow_port = xcalloc(net->n_allow + 1, sizeof(int));
	for (size_t i = 0; i < net->n_allow; i++) {
		e->allow[e->n_allow] = xstrdup(net->allow[i].pattern);
		e->allow_port[e->n_allow++] = net->allow[i].port;
	}
}

struct local_egress *local_egress_new(const struct local_setup *s)
{
	struct local_egress *e = xcalloc(1, sizeof(*e));
	const struct sbx_net_config *net = &s->config->net;

	e->s = s;
	e->log_fd = -1;
	const char *lm = getenv("SBX_TEST_EGRESS_LOG_MAX");
	long long lmv;
	e->log_max = lm && sbx_parse_int(lm, 1, LLONG_MAX, &lmv) == 0 ? lmv : LOG_MAX_DEFAULT;
	e->proxy = net->set && (net->mode == SBX_NET_ALLOW || net->mode == SBX_NET_OPEN);
	e->open = net->set && net->mode == SBX_NET_OPEN;
	e->preset = net->preset;
	e->allow_private = net->allow_private;
	allow_set(e, net);
	e->rate = local_rate_new(net);
	e->host_name = xcalloc(net->n_add_hosts + 1, sizeof(char *));
	e->host_addr = xcalloc(net->n_add_hosts + 1, sizeof(char *));
	for (size_t i = 0; i < net->n_add_hosts; i++) {
		e->host_name[e->n_hosts] = xstrdup(net->add_hosts[i].name);
		e->host_addr[e->n_hosts++] = xstrdup(net->add_hosts[i].addr);
	}
	return e;
}

bool local_egress_proxied(const struct local_egress *e)
{
	return e->proxy;
}

bool local_egress_open(const struct local_egress *e)
{
	return e->open;
}

/* --- the allow list and the addresses ------------------------------------------------------ */

static bool allowed_port(const struct local_egress *e, const char *host, int port)
{
	if (e->open)
		return true;
	for (size_t i = 0; i < e->n_allow; i++)
		if ((e->allow_port[i] == 0 || e->allow_port[i] == port) &&
		    sbx_net_match(e->allow[i], host))
			return true;
	for (size_t i = 0; e->preset && sbx_net_preset[i]; i++) {
		_cleanup_free_ char *pat = NULL;
		int p;
		if (sbx_net_parse_allow(sbx_net_preset[i], &pat, &p) == 0 &&
		    (p == 0 || p == port) && sbx_net_match(pat, host))
			return true;
	}
	return false;
}

bool local_egress_allowed(const struct local_egress *e, const char *host, int port, char *reason,
			  size_t rlen)
{
	if (allowed_port(e, host, port))
		return true;
	bool other_port = allowed_port(e, host, 80) || allowed_port(e, host, 443);
	for (size_t i = 0; i < e->n_allow && !other_port; i++)
		other_port = sbx_net_match(e->allow[i], host);
	_cleanup_free_ char *h = local_escape_name(host, strlen(host));
	const char *l = e->s->label;
	if (other_port)
		snprintf(reason, rlen,
			 "port %d is not in the allow list of sandbox '%s' (allow it: sbx update "
			 "%s --net-allow %s:%d)",
			 port, l, l, h, port);
	else
		snprintf(reason, rlen,
			 "not in the allow list of sandbox '%s' (allow it: sbx update %s "
			 "--net-allow %s)",
			 l, l, h);
	return false;
}

int local_egress_decide(struct local_egress *e, const char *host, int port, char *reason,
			size_t rlen)
{
	if (!local_egress_allowed(e, host, port, reason, rlen))
		return 403;
	if (local_rate_request(e->rate, host, e->s->label, reason, rlen) < 0)
		return 429;
	return 0;
}

struct local_rate *local_egress_rate(struct local_egress *e)
{
	return e->rate;
}

int local_egress_update(struct local_egress *e, const struct sbx_config *c, char *msg, size_t len)
{
	const struct sbx_net_config *net = &c->net;

	/* the namespace was made with the proxy: it stays proxied (the CLI checked it too) */
	if (!e->proxy || !net->set || (net->mode != SBX_NET_ALLOW && net->mode != SBX_NET_OPEN)) {
		snprintf(msg, len, "sandbox '%s' cannot switch to another mode while it runs",
			 e->s->label);
		return -1;
	}
	e->open = net->mode == SBX_NET_OPEN;
	e->preset = net->preset;
	allow_set(e, net);
	local_rate_set(e->rate, net);
	json_t *j = local_policy_entry(c);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(j);
	if (s)
		log_line(e, s);
	free(s);
	return 0;
}

const char *local_egress_mapped(const struct local_egress *e, const char *host)
{
	for (size_t i = 0; i < e->n_hosts; i++)
		if (streq(e->host_name[i], host))
			return e->host_addr[i];
	return NULL;
}

/* the address of sa (v4, or v6 with an IPv4-mapped one as v4) into out[16], its length */
static size_t addr_bytes(const struct sockaddr *sa, unsigned char *out)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (memcmp(b, mapped, 12) == 0) {
			memcpy(out, b + 12, 4);
			return 4;
		}
		memcpy(out, b, 16);
		return 16;
	}
	return 0;
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	unsigned char x[16], y[16];
	size_t xl = addr_bytes(a, x), yl = addr_bytes(b, y);

	return xl && xl == yl && memcmp(x, y, xl) == 0;
}

/* 1 when sa is an address of one of this host's interfaces (or their broadcast), 0 not, -1
 * when they cannot be listed. Asked afresh each time: an address added later counts too. */
static int host_own(struct ifaddrs *ifs, const struct sockaddr *sa)
{
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (i->ifa_addr && same_addr(i->ifa_addr, sa))
			return 1;
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && i->ifa_broadaddr &&
		    same_addr(i->ifa_broadaddr, sa))
			return 1;
	}
	return 0;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	snprintf(out, len, "?");
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
			  (socklen_t)len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  (socklen_t)len);
}

int local_egress_check(const struct local_egress *e, const char *name, bool literal, bool mapped,
		       const struct sockaddr_storage *addrs, size_t n, char *reason, size_t rlen)
{
	struct ifaddrs *ifs = NULL;

	if (getifaddrs(&ifs) < 0) {
		snprintf(reason, rlen,
			 "cannot list this host's addresses to check %s against them: "
			 "%s",
			 literal ? "the address" : "where the name leads", strerror(errno));
		return -1;
	}
	for (size_t k = 0; k < n; k++) {
		const struct sockaddr *sa = (const struct sockaddr *)&addrs[k];
		const char *why = local_addr_class(sa);
		bool priv = why && streq(why, LOCAL_CLASS_PRIVATE);
		if ((!why || priv) &&
		    host_own(ifs, sa)) { /* the host's own: never, private or not */
			why = "an address of this host";
			priv = false;
		}
		if (!why || (priv && (e->allow_private || mapped)))
			continue;
		freeifaddrs(ifs);
		char a[INET6_ADDRSTRLEN];
		addr_text(sa, a, sizeof(a));
		_cleanup_free_ char *h = local_escape_name(name, strlen(name));
		_cleanup_free_ char *subject = literal ? xasprintf("%s is %s", a, why)
			: mapped ? xasprintf("%s is mapped to %s by --add-host, %s", h, a, why)
				 : xasprintf("%s resolves to %s, %s", h, a, why);
		if (priv && literal)
			snprintf(reason, rlen,
				 "%s (allow private addresses with: sbx create "
				 "--net-allow-private)",
				 subject);
		else if (priv)
			snprintf(reason, rlen,
				 "%s (allow private addresses with: sbx create "
				 "--net-allow-private, or this name alone with --add-host %s:%s)",
				 subject, h, a);
		else if (strstr(why, "loopback") || strstr(why, "this host"))
			snprintf(reason, rlen,
				 "%s, which a sandbox can never reach (the host is "
				 "reached only through the ports of sbx create --host-port)",
				 subject);
		else
			snprintf(reason, rlen, "%s, which a sandbox can never reach", subject);
		return -1;
	}
	freeifaddrs(ifs);
	return 0;
}

bool local_egress_is_self(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);

	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		return true; /* cannot tell: as good as refused */
	return same_addr((struct sockaddr *)&me, (struct sockaddr *)&peer);
}

/* --- exec credentials ---------------------------------------------------------------------- */

/* the exec that holds this credential: 1 found (command set), 0 unknown id, -1 wrong secret */
static int exec_lookup(const struct local_egress *e, const char *id, const char *secret,
		       char **command)
{
	static const char *const files[] = { "execs", "execs.1" };

	for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", e->s->dir, files[f]);
		_cleanup_free_ char *text = sbx_read_file(p, 4 * EXECS_MAX, NULL);
		for (char *l = text; l && *l;) {
			char *nl = strchr(l, '\n');
			if (nl)
				*nl = 0;
			if (strncmp(l, id, 12) == 0 && l[12] == ' ') {
				if (strlen(l) < 46 || !local_ct_equal(l + 13, 32, secret) ||
				    l[45] != ' ')
					return -1;
				json_t *argv = json_loads(l + 46, 0, NULL);
				char *b = xstrdup("");
				size_t i;
				json_t *v;
				json_array_foreach (argv, i, v) {
					char *nb = xasprintf("%s%s%s", b, i ? " " : "",
							     json_string_value(v) ?: "");
					free(b);
					b = nb;
				}
				json_decref(argv);
				*command = b;
				return 1;
			}
			l = nl ? nl + 1 : l + strlen(l);
		}
	}
	return 0;
}

int local_egress_credential(struct local_egress *e, const char *user, const char *pass,
			    char exec[13], char **command)
{
	if (!user || !*user)
		return 0;
	if (strlen(user) != 12 || strspn(user, "0123456789abcdef") != 12 || !pass ||
	    strlen(pass) != 32)
		return -1;
	for (size_t i = 0; i < CRED_CACHE; i++) {
		struct cred *c = &e->cache[i];
		if (c->command && streq(c->id, user)) {
			if (!local_ct_equal(pass, 32, c->secret))
				return -1;
			memcpy(exec, user, 13);
			*command = xstrdup(c->command);
			return 1;
		}
	}
	char *cmd = NULL;
	int r = exec_lookup(e, user, pass, &cmd);
	if (r <= 0)
		return -1; /* a wrong secret, or an id that belongs to no exec */
	struct cred *c = &e->cache[e->cache_next++ % CRED_CACHE];
	free(c->command);
	memcpy(c->id, user, 13);
	memcpy(c->secret, pass, 33);
	c->command = cmd;
	memcpy(exec, user, 13);
	*command = xstrdup(cmd);
	return 1;
}

/* --- the egress log ------------------------------------------------------------------------ */

/* the threads of connections with secrets (net-tls.c) log too */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_line_locked(struct local_egress *e, const char *s);

/* one line of the egress log (rotating it at its cap) */
static void log_line(struct local_egress *e, const char *s)
{
	pthread_mutex_lock(&log_lock);
	log_line_locked(e, s);
	pthread_mutex_unlock(&log_lock);
}

static void log_line_locked(struct local_egress *e, const char *s)
{
	_cleanup_free_ char *line = xasprintf("%s\n", s);
	_cleanup_free_ char *p = local_egress_log_at(e->s->dir, "");
	if (e->log_fd < 0)
		e->log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	if (e->log_fd >= 0 && fstat(e->log_fd, &st) == 0 &&
	    st.st_size + (off_t)strlen(line) > e->log_max) {
		/* capped: the older half goes to egress.log.1, replacing what was there */
		_cleanup_free_ char *old = local_egress_log_at(e->s->dir, ".1");
		(void)rename(p, old);
		close(e->log_fd);
		e->log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	}
	/* a line is written whole or not at all (a full disk): never half a line, which would
	 * spoil the one after it */
	struct stat before;
	if (e->log_fd >= 0 && fstat(e->log_fd, &before) == 0 &&
	    sbx_write_all(e->log_fd, line, strlen(line)) < 0)
		(void)!ftruncate(e->log_fd, before.st_size);
}

void local_egress_log(struct local_egress *e, const struct local_egress_entry *x)
{
	char t[64];
	time_t sec = (time_t)(x->t0 / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	size_t l = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + l, sizeof(t) - l, ".%03lldZ", x->t0 % 1000);
	/* the domain is the sandbox's bytes: escaped, never dropped for not being UTF-8 */
	_cleanup_free_ char *domain = local_escape_name(x->domain, x->domain_len);
	_cleanup_free_ char *command = x->command
		? local_escape_utf8(x->command, strlen(x->command))
		: NULL;
	_cleanup_free_ char *reason = local_escape_utf8(x->reason, strlen(x->reason));
	json_t *j = json_pack("{s:s, s:o, s:o, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I}", "time", t,
			      "exec", x->exec[0] ? json_string(x->exec) : json_null(), "command",
			      command ? json_string(command) : json_null(), "proto", x->proto,
			      "domain", domain, "port", x->port, "verdict",
			      x->deny ? "deny" : "allow", "reason", reason, "bytes_up",
			      (json_int_t)x->up, "bytes_down", (json_int_t)x->down, "duration_ms",
			      (json_int_t)(sbx_now_ms() - x->t0));
	if (!j)
		return;
	if (x->throttled_ms)
		json_object_set_new(j, "throttled_ms", json_integer(x->throttled_ms));
	if (x->n_secrets) { /* names only: a value is never logged */
		json_t *a = json_array();
		for (size_t i = 0; i < x->n_secrets; i++)
			json_array_append_new(a, json_string(x->secrets[i]));
		json_object_set_new(j, "secrets", a);
	}
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(j);
	if (!s)
		return;
	log_line(e, s);
	free(s);
}
