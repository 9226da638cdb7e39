/* The supervisor's network service: the listeners of the egress proxy (HTTP with CONNECT, and
 * SOCKS5, inside the sandbox), of the --host-port forwarders (inside), of previews (on the
 * host) and of the control socket sbx preview talks to, all served by one thread's epoll loop
 * (the connections themselves are net-conn.c's). No thread runs while the sandbox is idle. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <malloc.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <time.h>

#include "core/json.h"

#define IDLE_DEFAULT_MS (5 * 60 * 1000) /* a relay with no byte either way */
#define SWEEP_MS 250			/* deadlines are checked this often while there is work */
#define PAUSE_MS 100			/* a listener out of descriptors rests so long */
#define ACCEPT_BURST 32			/* connections taken from one listener per round */
#define FDS_PER_CONN 6			/* client, upstream, two pipes */
#define FD_RESERVE (96 + LOCAL_MAX_PREVIEWS) /* listeners, logs, lookups, the refused */
#define EVENTS 64

static const int pool_share[LOCAL_P_N] = {
	[LOCAL_P_PROXY] = 160, [LOCAL_P_FWD] = 40, [LOCAL_P_PREVIEW] = 48, [LOCAL_P_CTL] = 8
};

/* the loop's clock: deadlines do not move when the wall clock does */
static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- listeners ----------------------------------------------------------------------------- */

static struct local_listener *listener_add(struct local_net *n, struct local_listener *l, int fd,
					   int kind)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->ep };

	l->ep.type = LOCAL_EP_LISTEN;
	l->fd = fd;
	l->kind = kind;
	local_set_nonblock(fd);
	(void)epoll_ctl(n->epfd, EPOLL_CTL_ADD, fd, &ev);
	return l;
}

static void listener_drop(struct local_net *n, struct local_listener *l)
{
	close(l->fd); /* which takes it out of the epoll set */
	l->fd = -1;
	l->dead = true;
	l->dead_next = n->dead_l; /* freed after this round of events */
	n->dead_l = l;
}

/* out of descriptors (or memory): this listener is not polled for PAUSE_MS, so that a
 * pending connection does not make the loop spin */
static void listener_pause(struct local_net *n, struct local_listener *l)
{
	struct epoll_event ev = { .events = 0, .data.ptr = &l->ep };

	l->paused_until = n->now + PAUSE_MS;
	(void)epoll_ctl(n->epfd, EPOLL_CTL_MOD, l->fd, &ev);
}

static void listener_wake(struct local_net *n, struct local_listener *l)
{
	if (!l || !l->paused_until || n->now < l->paused_until)
		return;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->ep };
	l->paused_until = 0;
	(void)epoll_ctl(n->epfd, EPOLL_CTL_MOD, l->fd, &ev);
}

static bool listeners_paused(const struct local_net *n)
{
	bool p = (n->http && n->http->paused_until) || (n->socks && n->socks->paused_until) ||
		n->ctl->paused_until;

	for (size_t i = 0; i < n->n_fwd && !p; i++)
		p = n->fwd[i]->paused_until != 0;
	for (size_t i = 0; i < n->n_prev && !p; i++)
		p = n->prev[i]->l.paused_until != 0;
	return p;
}

static void listeners_wake(struct local_net *n)
{
	listener_wake(n, n->http);
	listener_wake(n, n->socks);
	listener_wake(n, n->ctl);
	for (size_t i = 0; i < n->n_fwd; i++)
		listener_wake(n, n->fwd[i]);
	for (size_t i = 0; i < n->n_prev; i++)
		listener_wake(n, &n->prev[i]->l);
}

static void accept_some(struct local_net *n, struct local_listener *l)
{
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && errno == EAGAIN)
			return;
		if (fd < 0) {
			if ((errno == EMFILE || errno == ENFILE) && n->spare_fd >= 0) {
				/* the spare descriptor makes room to take the connection and close
				 * it, rather than leave it pending */
				close(n->spare_fd);
				int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
				if (c >= 0)
					close(c);
				n->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			listener_pause(n, l);
			return;
		}
		(void)local_conn_accept(n, l, fd);
	}
}

/* --- previews ------------------------------------------------------------------------------ */

static char *public_addr(void)
{
	struct ifaddrs *ifs = NULL;
	char a[INET_ADDRSTRLEN] = "127.0.0.1";

	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
			if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    !(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP)) {
				inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
					  a, sizeof(a));
				break;
			}
		freeifaddrs(ifs);
	}
	return xstrdup(a);
}

static json_t *preview_json(const struct local_preview *p)
{
	_cleanup_free_ char *addr = p->public ? public_addr() : xstrdup("127.0.0.1");
	_cleanup_free_ char *url = p->auth
		? xasprintf("http://%s:%d/?sbx_token=%s", addr, p->host_port, p->token)
		: xasprintf("http://%s:%d/", addr, p->host_port);

	return json_pack("{s:s, s:i, s:i, s:b, s:b, s:o, s:o}", "url", url, "port", p->port,
			 "host_port", p->host_port, "public", p->public, "auth", p->auth, "token",
			 p->auth ? json_string(p->token) : json_null(), "upstream",
			 p->upstream[0] ? json_string(p->upstream) : json_null());
}

static void previews_save(struct local_net *n)
{
	json_t *a = json_array();
	struct sbx_err err = { 0 };

	for (size_t i = 0; i < n->n_prev; i++)
		json_array_append_new(a, preview_json(n->prev[i]));
	char *s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	_cleanup_free_ char *p = xasprintf("%s/previews.json", n->s->dir);
	if (s)
		(void)sbx_write_atomic(p, s, strlen(s), false, &err);
	free(s);
}

void local_preview_upstream(struct local_net *n, int port, int host_port, const char *upstream)
{
	for (size_t i = 0; i < n->n_prev; i++) {
		struct local_preview *p = n->prev[i];
		char a[sizeof(p->upstream)];
		snprintf(a, sizeof(a), "%s:%d", upstream, port);
		if (p->port == port && p->host_port == host_port && !streq(p->upstream, a)) {
			memcpy(p->upstream, a, sizeof(a));
			previews_save(n); /* written when it changes, not per connection */
		}
	}
}

static bool token_valid(const char *t)
{
	return t && strlen(t) == LOCAL_TOKEN_LEN &&
		strspn(t, "0123456789abcdef") == LOCAL_TOKEN_LEN;
}

/* listens on host_port (0: any) of 127.0.0.1, or of every address; the preview's index */
static int preview_open(struct local_net *n, int port, int host_port, bool public, bool auth,
			const char *token, char *msg, size_t len)
{
	if (n->n_prev >= LOCAL_MAX_PREVIEWS) {
		snprintf(msg, len,
			 "sandbox '%s' has %d previews open already; close one with 'sbx "
			 "preview --rm'",
			 n->s->label, LOCAL_MAX_PREVIEWS);
		return -1;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)host_port),
				 .sin_addr.s_addr = htonl(public ? INADDR_ANY : INADDR_LOOPBACK) };
	int one = 1;
	socklen_t al = sizeof(a);
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		snprintf(msg, len, "cannot listen on host port %d: %s%s", host_port,
			 strerror(errno),
			 errno == EADDRINUSE ? " (pick another with --host-port, or leave it out)"
					     : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct local_preview *p = xcalloc(1, sizeof(*p));
	p->port = port;
	p->host_port = ntohs(a.sin_port);
	p->public = public;
	p->auth = auth || public;
	if (token_valid(token))
		memcpy(p->token, token, LOCAL_TOKEN_LEN + 1);
	else
		local_hex(p->token, LOCAL_TOKEN_LEN / 2);
	p->l.pv = p;
	listener_add(n, &p->l, fd, LOCAL_K_PREVIEW);
	n->prev[n->n_prev] = p;
	return (int)n->n_prev++;
}

static json_t *ctl_error(const char *msg, const char *kind)
{
	json_t *j = json_pack("{s:b, s:s}", "ok", 0, "error", msg);

	if (kind)
		json_object_set_new(j, "kind", json_string(kind));
	return j;
}

/* sbx update: the egress policy of the options sent, from the next request on */
static json_t *ctl_net_update(struct local_net *n, json_t *req)
{
	struct sbx_config c;
	struct sbx_err err = { 0 };
	char msg[300];

	if (sbx_config_from_json(json_object_get(req, "options"), &c, &err) < 0)
		return ctl_error(err.msg, NULL);
	int r = local_egress_update(n->eg, &c, msg, sizeof(msg));
	sbx_config_release(&c);
	return r < 0 ? ctl_error(msg, NULL) : json_pack("{s:b}", "ok", 1);
}

static json_t *ctl_handle(struct local_net *n, json_t *req)
{
	const char *op = sbx_json_str(req, "op");
	int port = (int)json_integer_value(json_object_get(req, "port"));
	char msg[300];

	if (op && streq(op, "net-update"))
		return ctl_net_update(n, req);
	if (op && streq(op, "secrets")) { /* sbx update --secret: the file changed */
		if (local_secrets_load(n, msg, sizeof(msg)) < 0)
			return ctl_error(msg, NULL);
		return json_pack("{s:b}", "ok", 1);
	}
	if (op && streq(op, "stats")) {
		/* sbx stats: the proxied bytes, of the exchanges logged and of those under way */
		long long rx = n->rx_bytes, tx = n->tx_bytes, tls_up, tls_down;
		/* and what connections with secrets moved (their threads count as they go) */
		local_tls_moved(&tls_up, &tls_down);
		rx += tls_down, tx += tls_up;
		for (struct local_conn *c = n->conns; c; c = c->next)
			if ((c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS) && !c->logged)
				rx += c->down_bytes, tx += c->up_bytes;
		return json_pack("{s:b, s:I, s:I}", "ok", 1, "rx_bytes", (json_int_t)rx, "tx_bytes",
				 (json_int_t)tx);
	}
	if (op && streq(op, "ttl")) {
		/* sbx update --ttl, keepalive --ttl: the supervisor's idle timeout from now on */
		json_int_t t = json_integer_value(json_object_get(req, "ttl_ms"));
		if (t <= 0 || t > 100LL * 365 * 86400 * 1000)
			return ctl_error("bad ttl", NULL);
		n->ttl_ms = t;
		n->ttl_changed = true;
		return json_pack("{s:b}", "ok", 1);
	}
	if (!op || port < 1 || port > 65535)
		return ctl_error("bad request", NULL);
	size_t i;
	for (i = 0; i < n->n_prev && n->prev[i]->port != port; i++)
		;
	if (streq(op, "preview-rm")) {
		if (i == n->n_prev) {
			snprintf(msg, sizeof(msg), "sandbox '%s' has no preview of port %d",
				 n->s->label, port);
			return ctl_error(msg, "notfound");
		}
		listener_drop(n, &n->prev[i]->l); /* its connections carry on */
		memmove(&n->prev[i], &n->prev[i + 1], (n->n_prev - i - 1) * sizeof(n->prev[0]));
		n->n_prev--;
		previews_save(n);
		return json_pack("{s:b}", "ok", 1);
	}
	int hp = (int)json_integer_value(json_object_get(req, "host_port"));
	bool pub = json_is_true(json_object_get(req, "public"));
	bool no_auth = json_is_true(json_object_get(req, "no_auth"));
	if (pub && no_auth)
		return ctl_error("a public preview always needs its token", NULL);
	if (i < n->n_prev) {
		struct local_preview *p = n->prev[i];
		if ((hp && hp != p->host_port) || (pub && !p->public) || (no_auth && p->auth)) {
			snprintf(msg, sizeof(msg),
				 "port %d of sandbox '%s' has a preview already, on "
				 "host port %d%s; close it first with 'sbx preview --rm %s %d'",
				 port, n->s->label, p->host_port,
				 p->public	   ? " (public)"
					 : p->auth ? " (with a token)"
						   : " (no token)",
				 n->s->label, port);
			return ctl_error(msg, "conflict");
		}
		return json_pack("{s:b, s:o}", "ok", 1, "preview", preview_json(p));
	}
	int k = preview_open(n, port, hp, pub, !no_auth, NULL, msg, sizeof(msg));
	if (k < 0)
		return ctl_error(msg, NULL);
	previews_save(n);
	return json_pack("{s:b, s:o}", "ok", 1, "preview", preview_json(n->prev[k]));
}

/* a control connection's request line is in: its answer goes out */
static void ctl_answer(struct local_net *n, struct local_conn *c)
{
	json_t *req = json_loadb(c->in, c->in_len, JSON_DISABLE_EOF_CHECK, NULL);
	const char *op = req ? sbx_json_str(req, "op") : NULL;
	json_t *resp = !req		  ? ctl_error("bad request", NULL)
		: op && streq(op, "exec") ? local_exec_add(n, c->fd, req)
					  : ctl_handle(n, req);

	json_decref(req);
	char *s = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	char *line = xasprintf("%s\n", s ? s : "{\"ok\":false}");
	free(s);
	local_conn_answer(c, line);
}

/* --- start and loop ------------------------------------------------------------------------ */

/* the descriptor limit raised to its hard limit; the caps scaled below what it leaves */
static void caps_init(struct local_net *n)
{
	struct rlimit rl;
	long long avail = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
			(void)getrlimit(RLIMIT_NOFILE, &rl);
		}
		avail = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (long long)rl.rlim_cur;
	}
	long long total = 0;
	for (int p = 0; p < LOCAL_P_N; p++)
		total += pool_share[p];
	long long fit = (avail - FD_RESERVE) / FDS_PER_CONN;
	for (int p = 0; p < LOCAL_P_N; p++) {
		long long cap = fit >= total ? pool_share[p] : pool_share[p] * fit / total;
		n->pool_cap[p] = cap < 1 ? 1 : (int)cap;
	}
}

struct local_net *local_net_start(const struct local_setup *s, int factory_fd, char *msg,
				  size_t len)
{
	struct local_net *n = xcalloc(1, sizeof(*n));
	const struct sbx_net_config *net = &s->config->net;

	/* one malloc arena: the resolver threads need no heaps of their own */
	(void)mallopt(M_ARENA_MAX, 1);
	n->s = s;
	n->ttl_ms = s->ttl_ms;
	n->factory_fd = factory_fd;
	n->pidfd = -1;
	n->now = mono_ms();
	const char *idle = getenv("SBX_TEST_NET_IDLE_MS");
	long long iv;
	n->idle_ms = idle && sbx_parse_int(idle, 1, LLONG_MAX, &iv) == 0 ? iv : IDLE_DEFAULT_MS;
	caps_init(n);
	n->eg = local_egress_new(s);
	n->rate = local_egress_rate(n->eg);
	if (local_egress_proxied(n->eg) && local_secrets_load(n, msg, len) < 0)
		return NULL;
	n->rs = local_resolver_new(local_egress_proxied(n->eg));
	n->epfd = epoll_create1(EPOLL_CLOEXEC);
	n->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (n->epfd < 0) {
		snprintf(msg, len, "cannot start the network service: %s", strerror(errno));
		return NULL;
	}
	n->pidfd_ep.type = LOCAL_EP_PIDFD;
	n->resolver_ep.type = LOCAL_EP_RESOLVER;
	n->factory_ep.type = LOCAL_EP_FACTORY;
	if (local_egress_proxied(n->eg)) {
		int h = local_conn_listen_inside(n, LOCAL_PROXY_HTTP_PORT), k = -1;
		if (h < 0 || (k = local_conn_listen_inside(n, LOCAL_PROXY_SOCKS_PORT)) < 0) {
			snprintf(msg, len, "cannot start the egress proxy inside the sandbox: %s",
				 strerror(errno));
			return NULL;
		}
		n->http = listener_add(n, xcalloc(1, sizeof(*n->http)), h, LOCAL_K_HTTP);
		n->socks = listener_add(n, xcalloc(1, sizeof(*n->socks)), k, LOCAL_K_SOCKS);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->resolver_ep };
		if (local_resolver_fd(n->rs) >= 0)
			(void)epoll_ctl(n->epfd, EPOLL_CTL_ADD, local_resolver_fd(n->rs), &ev);
	}
	n->fwd = xcalloc(net->n_host_ports + 1, sizeof(*n->fwd));
	for (size_t i = 0; !s->net_host && i < net->n_host_ports; i++) {
		int hp = net->host_ports[i].host, in = net->host_ports[i].inside;
		int fd = local_conn_listen_inside(n, in);
		if (fd < 0) {
			snprintf(msg, len,
				 "cannot listen on port %d inside the sandbox for "
				 "--host-port %d:%d: %s",
				 in, hp, in, strerror(errno));
			return NULL;
		}
		struct local_listener *l = xcalloc(1, sizeof(*l));
		l->fwd_host = hp;
		n->fwd[n->n_fwd++] = listener_add(n, l, fd, LOCAL_K_FWD);
	}
	/* init answers socket requests of previews on the same pair, from now on read here */
	if (!s->net_host) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->factory_ep };
		(void)epoll_ctl(n->epfd, EPOLL_CTL_ADD, factory_fd, &ev);
	}
	/* the control socket, for sbx preview */
	_cleanup_close_ int dfd = open(s->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = local_ctl_addr(s->dir, dfd, &a);
	_cleanup_free_ char *ctlp = xasprintf("%s/ctl", s->dir);
	(void)unlink(ctlp);
	int cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || bind(cfd, (struct sockaddr *)&a, al) < 0 || listen(cfd, 16) < 0) {
		snprintf(msg, len, "cannot create the control socket '%s': %s", ctlp,
			 strerror(errno));
		return NULL;
	}
	n->ctl = listener_add(n, xcalloc(1, sizeof(*n->ctl)), cfd, LOCAL_K_CTL);
	/* previews from before a release or a stop come back, on the same host ports, with the
	 * same tokens */
	_cleanup_free_ char *pp = xasprintf("%s/previews.json", s->dir);
	_cleanup_free_ char *text = sbx_read_file(pp, 1 << 20, NULL);
	json_t *old = text ? json_loads(text, 0, NULL) : NULL;
	size_t i;
	json_t *v;
	json_array_foreach (old, i, v) {
		char m[300];
		int port = (int)json_integer_value(json_object_get(v, "port"));
		/* a preview saved without "auth" (older) gets a token like any other */
		bool auth = !json_is_false(json_object_get(v, "auth"));
		if (port > 0 && port < 65536)
			(void)preview_open(n, port,
					   (int)json_integer_value(json_object_get(v, "host_port")),
					   json_is_true(json_object_get(v, "public")), auth,
					   sbx_json_str(v, "token"), m, sizeof(m));
	}
	json_decref(old);
	if (text)
		previews_save(n);
	return n;
}

static void handle(struct local_net *n, struct local_ep_tag *ep, unsigned events)
{
	switch (ep->type) {
	case LOCAL_EP_LISTEN: {
		struct local_listener *l = (struct local_listener *)(void *)ep;
		if (!l->dead)
			accept_some(n, l);
		return;
	}
	case LOCAL_EP_CLIENT:
	case LOCAL_EP_UP: {
		struct local_conn *c = local_conn_of(ep);
		if (c->dead)
			return;
		if (ep->type == LOCAL_EP_UP)
			c->up_event = true;
		local_conn_run(c);
		return;
	}
	case LOCAL_EP_RESOLVER:
		local_conn_resolved(n);
		return;
	case LOCAL_EP_FACTORY:
		local_conn_factory(n);
		return;
	case LOCAL_EP_EXEC:
		local_exec_caller_ended(n, ep);
		return;
	}
	(void)events;
}

/* control requests whose line came in this round */
static void ctl_pending(struct local_net *n)
{
	if (n->ctl_ready == 0)
		return;
	n->ctl_ready = 0;
	for (struct local_conn *c = n->conns, *next; c; c = next) {
		next = c->next;
		if (!c->dead && c->state == LOCAL_S_CTL_READY)
			ctl_answer(n, c);
	}
}

long long local_net_ttl(const struct local_net *n)
{
	return n->ttl_ms;
}

int local_net_wait(struct local_net *n, int pidfd, long long timeout_ms)
{
	long long deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;
	long long next_sweep = 0;
	struct epoll_event evs[EVENTS];

	if (pidfd != n->pidfd) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->pidfd_ep };
		if (epoll_ctl(n->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0 && errno != EEXIST)
			return 1; /* cannot wait: treat as the end, the caller reaps */
		n->pidfd = pidfd;
	}
	for (;;) {
		n->now = mono_ms();
		if ((deadline >= 0 && n->now >= deadline) || n->ttl_changed) {
			n->ttl_changed = false;
			return 0;
		}
		bool busy = n->n_conns > 0 || n->n_idle > 0 || listeners_paused(n) ||
			local_resolver_starved(n->rs);
		if (busy && next_sweep == 0)
			next_sweep = n->now + SWEEP_MS;
		long long wake = deadline;
		if (busy && (wake < 0 || next_sweep < wake))
			wake = next_sweep;
		long long left = wake < 0 ? -1 : wake > n->now ? wake - n->now : 0;
		if (n->ready)
			left = 0;
		int r = epoll_wait(n->epfd, evs, EVENTS, left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno != EINTR)
			return 1;
		n->now = mono_ms();
		bool ended = false;
		for (int i = 0; i < r; i++) {
			struct local_ep_tag *ep = evs[i].data.ptr;
			if (ep->type == LOCAL_EP_PIDFD)
				ended = true;
			else
				handle(n, ep, evs[i].events);
		}
		local_conn_ready(n);
		ctl_pending(n);
		if (busy && n->now >= next_sweep) {
			local_conn_sweep(n);
			listeners_wake(n);
			next_sweep = 0;
		}
		local_conn_reap(n);
		while (n->dead_l) {
			struct local_listener *l = n->dead_l;
			n->dead_l = l->dead_next;
			free(l->pv ? (void *)l->pv : (void *)l); /* l is a preview's first member */
		}
		if (ended)
			return 1;
	}
}
