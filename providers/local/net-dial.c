/* Dialling for the supervisor's connections: the policy's last word on the addresses, the
 * resolver threads' answers, init's sockets of the sandbox's network for previews, and the
 * non-blocking connect, within DIAL_DEADLINE_MS (net-conn.c enforces it). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sys/epoll.h>

#define DIAL_DEADLINE_MS 10000 /* lookup and connect */

/* the connection to the upstream is made */
void local_dial_done(struct local_conn *c)
{
	struct local_net *n = c->n;

	if (c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS) {
		if (local_egress_is_self(c->up)) {
			local_close_fd(&c->up);
			snprintf(c->reason, sizeof(c->reason),
				 "it leads to this host itself, which "
				 "a sandbox can never reach (the host is reached only through the "
				 "ports of sbx create --host-port)");
			local_proxy_fail(c, LOCAL_F_DENY);
			return;
		}
		snprintf(c->reason, sizeof(c->reason), "%s",
			 local_egress_open(n->eg) ? "open" : "allowed");
	}
	if (c->kind == LOCAL_K_HTTP && strcmp(c->proto, "http") == 0) {
		local_http_start(c); /* net-http.c: the request and its response */
		return;
	}
	size_t rest = c->in_len > c->head_len ? c->in_len - c->head_len : 0;
	bool secrets = (c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS) &&
		local_tls_intercepts(n, c->host);
	if (c->kind == LOCAL_K_HTTP) {
		if (c->pre == NULL && strcmp(c->proto, "connect") == 0) {
			static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
			free(c->out);
			c->out = xstrdup(ok);
			c->out_len = sizeof(ok) - 1;
			c->out_off = 0;
			c->pre = xmalloc(rest + 1);
			memcpy(c->pre, c->in + c->head_len, rest);
			c->pre_len = rest;
		}
	} else if (c->kind == LOCAL_K_SOCKS) {
		static const unsigned char ok[10] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
		local_conn_out(c, ok, sizeof(ok));
		rest = c->in_len - c->socks_req_len;
		c->pre = xmalloc(rest + 1);
		memcpy(c->pre, c->in + c->socks_req_len, rest);
		c->pre_len = rest;
	} else if (c->kind == LOCAL_K_PREVIEW && c->in_len) {
		c->pre = TAKE_PTR(c->in); /* the request the token was checked in goes on */
		c->pre_len = c->in_len;
	}
	if (c->kind == LOCAL_K_PREVIEW && c->next_addr > 0)
		local_preview_upstream(
			n, c->inside_port, c->host_port,
			c->addrs[c->next_addr - 1].ss_family == AF_INET6 ? "[::1]" : "127.0.0.1");
	free(c->in);
	c->in = NULL;
	c->in_len = c->in_cap = 0;
	if (secrets) {
		local_tls_start(c); /* net-tls.c: TLS ended, the placeholders replaced */
		return;
	}
	local_relay_start(c);
}

static void factory_ask(struct local_conn *c);

/* connects to the next address of c->addrs; when none is left, the answer saying so */
void local_dial_next(struct local_conn *c)
{
	struct local_net *n = c->n;

	/* a preview's next address inside: with a socket of init's */
	if (c->kind == LOCAL_K_PREVIEW && !n->s->net_host && c->next_addr < c->n_addrs) {
		factory_ask(c);
		return;
	}
	while (c->next_addr < c->n_addrs) {
		const struct sockaddr_storage *a = &c->addrs[c->next_addr++];
		socklen_t al = a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							: sizeof(struct sockaddr_in);
		c->up = socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->up < 0) {
			c->dial_errno = errno;
			continue;
		}
		c->up_event = false;
		local_set_nodelay(c->up);
		int r = connect(c->up, (const struct sockaddr *)a, al);
		if (r < 0 && errno != EINPROGRESS) {
			c->dial_errno = errno;
			local_close_fd(&c->up);
			continue;
		}
		if (local_ep_add(n, c->up, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->up_ep) <
		    0) {
			c->dial_errno = errno;
			local_close_fd(&c->up);
			continue;
		}
		if (r == 0) {
			local_dial_done(c);
			return;
		}
		c->state = LOCAL_S_CONNECT;
		return;
	}
	/* none left */
	if (c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS) {
		_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
		snprintf(c->reason, sizeof(c->reason), "cannot connect to %s:%d: %s", h, c->port,
			 strerror(c->dial_errno ? c->dial_errno : ECONNREFUSED));
		local_proxy_fail(c, LOCAL_F_FAIL);
	} else if (c->kind == LOCAL_K_PREVIEW) {
		_cleanup_free_ char *why = xasprintf(
			"does not answer on 127.0.0.1:%d or [::1]:%d: %s", c->inside_port,
			c->inside_port, strerror(c->dial_errno ?: ECONNREFUSED));
		local_preview_fail(c, 502, "Bad Gateway", why);
	} else {
		local_conn_close(c);
	}
}

/* the addresses are known: the policy's last word, then the dial */
static void check_and_dial(struct local_conn *c)
{
	if (local_egress_check(c->n->eg, c->host, c->literal, c->mapped, c->addrs, c->n_addrs,
			       c->reason, sizeof(c->reason)) < 0) {
		local_proxy_fail(c, LOCAL_F_DENY);
		return;
	}
	c->next_addr = 0;
	local_dial_next(c);
}

/* an address literal into c->addrs[0]; false when s is none */
static bool literal_addr(struct local_conn *c, const char *s, int port)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)&c->addrs[0];
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&c->addrs[0];

	memset(&c->addrs[0], 0, sizeof(c->addrs[0]));
	if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
	} else {
		return false;
	}
	c->n_addrs = 1;
	return true;
}

/* the proxy has a destination (c->host, c->port): policy, lookup, dial */
void local_dial_proxy(struct local_conn *c)
{
	struct local_net *n = c->n;

	c->deadline = n->now + DIAL_DEADLINE_MS;
	if (memchr(c->host, 0, c->host_len) || !local_host_dialable(c->host)) {
		_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
		snprintf(c->reason, sizeof(c->reason), "'%s' is not a host name", h);
		local_proxy_fail(c, LOCAL_F_DENY);
		return;
	}
	int verdict = local_egress_decide(n->eg, c->host, c->port, c->reason, sizeof(c->reason));
	if (verdict) {
		local_proxy_fail(c, verdict == 429 ? LOCAL_F_RATE : LOCAL_F_DENY);
		return;
	}
	if (c->kind == LOCAL_K_HTTP && strcmp(c->proto, "http") == 0 && local_http_pooled(c))
		return;
	const char *mapped = local_egress_mapped(n->eg, c->host);
	if (mapped) {
		c->mapped = literal_addr(c, mapped, c->port);
	} else {
		c->literal = literal_addr(c, c->host, c->port);
	}
	if (c->mapped || c->literal) {
		check_and_dial(c);
		return;
	}
	c->job = local_resolve_start(n->rs, c->host, c->port, c);
	c->state = LOCAL_S_RESOLVE;
}

/* a lookup came back */
static void resolved(struct local_conn *c, struct local_resolve *r)
{
	c->job = NULL;
	if (r->gai != 0) {
		_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
		snprintf(c->reason, sizeof(c->reason), "cannot resolve %s: %s", h,
			 gai_strerror(r->gai));
		c->dial_errno = EHOSTUNREACH;
		local_proxy_fail(c, LOCAL_F_FAIL);
		return;
	}
	c->n_addrs = r->n;
	memcpy(c->addrs, r->addr, r->n * sizeof(r->addr[0]));
	check_and_dial(c);
}

/* --- sockets inside the sandbox ------------------------------------------------------------ */

/* one answer of init's socket factory: 1 with *ret_fd (or -1 and *ret_err), 0 none yet, -1
 * when the factory is gone */
static int factory_recv(int fd, int flags, int *ret_fd, int *ret_err)
{
	int e = 0, s = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
	struct msghdr m = { .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	ssize_t r;

	*ret_fd = -1;
	*ret_err = EPIPE;
	do
		r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | flags);
	while (r < 0 && errno == EINTR);
	if (r < 0 && errno == EAGAIN)
		return 0;
	struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&s, CMSG_DATA(c), sizeof(int));
	if (r != (ssize_t)sizeof(e)) {
		if (s >= 0)
			close(s);
		return -1;
	}
	/* only a stream socket is accepted as an answer */
	int type = 0;
	socklen_t tl = sizeof(type);
	if (s >= 0 && (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM)) {
		close(s);
		s = -1;
		e = EPROTO;
	}
	*ret_fd = s;
	*ret_err = s < 0 ? (e ? e : EPROTO) : 0;
	return 1;
}

int local_conn_listen_inside(struct local_net *n, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = -1, e = 0;

	if (n->s->net_host) { /* the sandbox's network is the host's */
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd >= 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd >= 0 &&
		    (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0)) {
			e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		return fd;
	}
	struct local_factory_req req = { .op = 'L', .port = (unsigned short)port };
	if (send(n->factory_fd, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req) ||
	    factory_recv(n->factory_fd, 0, &fd, &e) != 1 || fd < 0) {
		errno = e ? e : EPIPE;
		return -1;
	}
	return fd;
}

/* c->addrs: 127.0.0.1:PORT, then [::1]:PORT inside (a preview's) */
static void inside_addr(struct local_conn *c)
{
	struct sockaddr_in *a = (struct sockaddr_in *)&c->addrs[0];
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&c->addrs[1];

	memset(&c->addrs[0], 0, 2 * sizeof(c->addrs[0]));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)c->inside_port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a6->sin6_family = AF_INET6;
	a6->sin6_port = htons((uint16_t)c->inside_port);
	a6->sin6_addr = in6addr_loopback;
	c->n_addrs = 2;
	c->next_addr = 0;
}

/* a preview connection asks init for a socket of the sandbox's network (of the family of its
 * next address), to dial inside */
void local_dial_inside(struct local_conn *c)
{
	c->deadline = c->n->now + DIAL_DEADLINE_MS;
	inside_addr(c);
	local_dial_next(c);
}

static void factory_ask(struct local_conn *c)
{
	struct local_net *n = c->n;
	struct local_factory_req req = { .op = c->addrs[c->next_addr].ss_family == AF_INET6 ? '6'
											    : 'S' };

	if (n->factory_fd < 0 || n->fq_n == LOCAL_FACTORY_QUEUE ||
	    send(n->factory_fd, &req, sizeof(req), MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)sizeof(req)) {
		local_preview_fail(c, 503, "Service Unavailable",
				   "cannot be reached now: too many connections are being opened");
		return;
	}
	c->fq_slot = (int)((n->fq_head + n->fq_n++) % LOCAL_FACTORY_QUEUE);
	n->fq[c->fq_slot] = c;
	c->state = LOCAL_S_FACTORY;
}

/* dials inside with the socket init made */
static void factory_dial(struct local_conn *c, int fd)
{
	const struct sockaddr_storage *a = &c->addrs[c->next_addr++];
	socklen_t al = a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						: sizeof(struct sockaddr_in);

	local_set_nonblock(fd);
	local_set_nodelay(fd);
	c->up = fd;
	c->up_event = false;
	int r = connect(fd, (const struct sockaddr *)a, al);
	if (r < 0 && errno != EINPROGRESS) {
		c->dial_errno = errno;
		local_close_fd(&c->up);
		local_dial_next(c); /* none left: the 502 */
	} else if (local_ep_add(c->n, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->up_ep) <
		   0) {
		c->dial_errno = errno;
		local_close_fd(&c->up);
		local_dial_next(c);
	} else if (r == 0) {
		local_dial_done(c);
	} else {
		c->state = LOCAL_S_CONNECT;
	}
}

/* init answered: the oldest requests get their sockets */
void local_conn_factory(struct local_net *n)
{
	int fd, e;

	while (n->factory_fd >= 0) {
		int r = factory_recv(n->factory_fd, MSG_DONTWAIT, &fd, &e);
		if (r == 0)
			break;
		if (r < 0) {
			/* the factory is gone (init with it): whoever waits gets a 502 */
			(void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, n->factory_fd, NULL);
			n->factory_fd = -1;
			for (; n->fq_n;
			     n->fq_n--, n->fq_head = (n->fq_head + 1) % LOCAL_FACTORY_QUEUE) {
				struct local_conn *w = n->fq[n->fq_head];
				n->fq[n->fq_head] = NULL;
				if (w) {
					w->fq_slot = -1;
					local_preview_fail(w, 502, "Bad Gateway",
							   "cannot be reached: the "
							   "sandbox is stopping");
					local_conn_later(w);
				}
			}
			break;
		}
		struct local_conn *c = NULL;
		if (n->fq_n > 0) {
			c = n->fq[n->fq_head];
			n->fq[n->fq_head] = NULL;
			n->fq_head = (n->fq_head + 1) % LOCAL_FACTORY_QUEUE;
			n->fq_n--;
		}
		if (!c) { /* its connection gave up meanwhile */
			if (fd >= 0)
				close(fd);
			continue;
		}
		c->fq_slot = -1;
		if (fd < 0) { /* no socket of that family inside: the next address, if any */
			c->dial_errno = e;
			c->next_addr++;
			local_dial_next(c);
		} else {
			factory_dial(c, fd);
		}
		local_conn_later(c);
	}
}

/* --- lookups ------------------------------------------------------------------------------- */

void local_conn_resolved(struct local_net *n)
{
	struct local_resolve *r;

	while ((r = local_resolve_done(n->rs))) {
		struct local_conn *c = r->owner;
		if (c && !c->dead && c->job == r) {
			resolved(c, r);
			local_conn_later(c);
		}
		free(r);
	}
}
