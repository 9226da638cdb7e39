/* The supervisor's connections as state machines, run by net-loop.c's epoll loop: an HTTP
 * proxy request head or a SOCKS5 handshake (within HEAD_DEADLINE_MS in all), a preview's
 * token, a control request; then net-dial.c dials and net-relay.c relays or answers.
 * Each kind holds at most its share of the connections; past it a few more are told so
 * (HTTP 503, SOCKS reply 1) and the rest are closed at once. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/epoll.h>

#define HEAD_DEADLINE_MS 10000	/* the whole request head, or SOCKS handshake */
#define DIAL_DEADLINE_MS 10000	/* lookup and connect */
#define REFUSE_DEADLINE_MS 2000 /* a connection over the cap, answered and drained */
#define LINGER_MS 2000		/* after a final answer: the client's end, for so long */
#define CTL_DEADLINE_MS 2000
#define REFUSE_MAX 32 /* connections being told the cap is reached */
#define CTL_MAX 65536 /* a control request line: sbx update sends a whole allow list */

static const char *const pool_what[LOCAL_P_N] = { "the egress proxy", "the --host-port forwarding",
						  "the preview service", "the control socket" };

/* --- the steps ----------------------------------------------------------------------------- */

static void http_head(struct local_conn *c)
{
	struct local_net *n = c->n;
	struct local_http_req r;
	const char *why;
	char user[256], pass[256];

	if (local_http_parse(c->in, c->head_len, &r, &why) < 0) {
		local_conn_http(c, 400, "Bad Request", NULL, why);
		return;
	}
	c->proto = r.connect ? "connect" : "http";
	memcpy(c->host, r.host, r.host_len + 1);
	c->host_len = r.host_len;
	c->port = r.port;
	/* the exec's credential: Basic that is not base64 is a bad one; another scheme is none */
	int cr = local_http_basic(c->in, c->head_len, user, sizeof(user), pass, sizeof(pass));
	if (cr < 0 ||
	    (cr > 0 && local_egress_credential(n->eg, user, pass, c->exec, &c->command) < 0)) {
		c->deny = true;
		snprintf(c->reason, sizeof(c->reason),
			 "the proxy credential belongs to no exec of "
			 "this sandbox");
		local_conn_http(
			c, 407, "Proxy Authentication Required",
			"Proxy-Authenticate: Basic realm=\"sbx\"\r\n",
			"sbx: this proxy credential belongs to no exec of this sandbox; use the proxy "
			"variables sbx exec sets\n");
		return;
	}
	const char *leak = local_secret_in(n, c->in, c->head_len);
	if (leak) { /* a placeholder in plain HTTP, or in a CONNECT head: never sent on */
		c->deny = true;
		_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
		snprintf(c->reason, sizeof(c->reason),
			 "secret %s sent to %s in plain HTTP, not over TLS to one of its hosts: "
			 "possible exfiltration",
			 leak, h);
		_cleanup_free_ char *body = xasprintf("sbx: %s\n", c->reason);
		local_conn_http(c, 403, "Forbidden", NULL, body);
		return;
	}
	if (!r.connect) {
		size_t hl, ul;
		bool v10 = streq(r.version, "HTTP/1.0");
		if (local_http_header(c->in, c->head_len, "Upgrade", &ul)) {
			c->deny = true;
			snprintf(c->reason, sizeof(c->reason), "a protocol upgrade (WebSocket)");
			local_conn_http(c, 501, "Not Implemented", NULL,
					"sbx: this proxy does not upgrade plain-HTTP requests "
					"(WebSocket): use CONNECT\n");
			return;
		}
		if (local_http_req_body(c->in, c->head_len, &c->req) < 0) {
			local_conn_http(c, 400, "Bad Request", NULL,
					"sbx: the request body's framing is ambiguous "
					"(Content-Length and Transfer-Encoding, or two lengths)\n");
			return;
		}
		c->is_head = streq(r.method, "HEAD");
		c->http_close = local_http_conn_has(c->in, c->head_len, "close") ||
			(v10 && !local_http_conn_has(c->in, c->head_len, "keep-alive"));
		c->no_pool = false;
		c->pre = local_http_origin_head(c->in, c->head_len, &r, v10, &hl);
		c->pre_len = hl;
		c->pre_off = 0;
		/* what follows the head: its body upstream, the rest the next request's */
		memmove(c->in, c->in + c->head_len, c->in_len - c->head_len);
		c->in_len -= c->head_len;
		c->head_len = 0;
		long long k = local_body_scan(&c->req, c->in, c->in_len);
		if (k < 0) {
			local_conn_http(c, 400, "Bad Request", NULL,
					"sbx: a malformed chunked request body\n");
			return;
		}
		c->pre = xrealloc(c->pre, hl + (size_t)k + 1);
		memcpy(c->pre + hl, c->in, (size_t)k);
		c->pre_len += (size_t)k;
		memmove(c->in, c->in + k, c->in_len - (size_t)k);
		c->in_len -= (size_t)k;
	}
	local_dial_proxy(c);
}

static void preview_head(struct local_conn *c)
{
	char *loc = NULL;

	switch (local_preview_token(c->in, c->head_len, c->token, &loc)) {
	case LOCAL_TOKEN_OK:
		local_dial_inside(c);
		return;
	case LOCAL_TOKEN_REDIRECT: {
		_cleanup_free_ char *l = loc;
		_cleanup_free_ char *hdr = xasprintf(
			"Location: %s\r\nSet-Cookie: sbx_preview_token_%d=%s; "
			"HttpOnly; Path=/; SameSite=Lax\r\n",
			l, c->host_port, c->token);
		local_conn_http(c, 302, "Found", hdr, "sbx: signed in to this preview\n");
		return;
	}
	case LOCAL_TOKEN_BAD:
		local_conn_http(c, 400, "Bad Request", NULL,
				"sbx: this preview takes HTTP/1.x requests\n");
		return;
	default:
		local_conn_http(
			c, 401, "Unauthorized", NULL,
			"sbx: this preview needs its token: open the URL 'sbx preview' printed, or "
			"send the header X-Sbx-Preview-Token\n");
	}
}

static int step_head(struct local_conn *c)
{
	size_t seen = c->scan_from;
	int r = local_conn_read(c, LOCAL_HEAD_MAX);

	c->head_len = local_http_head_len(c->in, c->in_len, seen);
	c->scan_from = c->in_len;
	if (c->head_len == 0) {
		if (r < 0) {
			local_conn_close(c);
			return LOCAL_STEP_WAIT;
		}
		if (c->in_len < LOCAL_HEAD_MAX)
			return LOCAL_STEP_WAIT;
		local_conn_http(c, 431, "Request Header Fields Too Large", NULL,
				"sbx: the request head is over 16 KiB\n");
		return LOCAL_STEP_AGAIN;
	}
	if (c->kind == LOCAL_K_HTTP)
		http_head(c);
	else
		preview_head(c);
	return LOCAL_STEP_AGAIN;
}

static int step_socks(struct local_conn *c)
{
	struct local_socks m;
	int r = local_conn_read(c, LOCAL_HEAD_MAX);
	int st = local_socks_parse((const unsigned char *)c->in, c->in_len, &m);

	if (st == LOCAL_SOCKS_BAD) {
		local_conn_close(c);
		return LOCAL_STEP_WAIT;
	}
	if (st == LOCAL_SOCKS_BAD_ATYP) {
		local_conn_socks(c, 8); /* address type not supported */
		return LOCAL_STEP_AGAIN;
	}
	if (st >= LOCAL_SOCKS_GREETING && c->socks_step < 1) {
		unsigned char choice[2] = { 5, m.method };
		local_conn_out(c, choice, 2);
		c->socks_step = 1;
		if (m.method == 0xff) {
			c->state = LOCAL_S_REPLY;
			c->deadline = c->n->now + LINGER_MS;
			return LOCAL_STEP_AGAIN;
		}
	}
	if (st >= LOCAL_SOCKS_AUTH && m.method == 2 && c->socks_step < 2) {
		int cr = m.auth_nul ? -1
			: c->refusing
			? 0
			: local_egress_credential(c->n->eg, m.user, m.pass, c->exec, &c->command);
		unsigned char status[2] = { 1, cr < 0 ? 1 : 0 };
		local_conn_out(c, status, 2);
		c->socks_step = 2;
		if (cr < 0) {
			c->state = LOCAL_S_REPLY;
			c->deadline = c->n->now + LINGER_MS;
			return LOCAL_STEP_AGAIN;
		}
	}
	if (local_conn_flush(c) < 0) {
		local_conn_close(c);
		return LOCAL_STEP_WAIT;
	}
	if (st < LOCAL_SOCKS_REQUEST) {
		if (r < 0)
			local_conn_close(c);
		return LOCAL_STEP_WAIT;
	}
	c->socks_step = 3;
	c->socks_req_len = m.request_len;
	c->proto = "socks";
	memcpy(c->host, m.host, m.host_len);
	c->host[m.host_len] = 0;
	c->host_len = m.host_len;
	c->port = m.port;
	if (c->refusing) {
		snprintf(c->reason, sizeof(c->reason), "%s has %d connections open, its limit",
			 pool_what[c->pool], c->n->pool_cap[c->pool]);
		c->deny = true;
		local_conn_socks(c, 1);
	} else if (m.cmd != 1) {
		c->deny = true;
		snprintf(c->reason, sizeof(c->reason), "only CONNECT is supported");
		local_conn_socks(c, 7); /* command not supported */
	} else {
		local_dial_proxy(c);
	}
	return LOCAL_STEP_AGAIN;
}

static int step_ctl(struct local_conn *c)
{
	int r = local_conn_read(c, CTL_MAX);

	if ((c->in_len && memchr(c->in, '\n', c->in_len)) || c->in_len >= CTL_MAX ||
	    (r < 0 && c->in_len)) {
		c->state = LOCAL_S_CTL_READY; /* net-loop.c answers */
		c->n->ctl_ready++;
		return LOCAL_STEP_WAIT;
	}
	if (r < 0)
		local_conn_close(c);
	return LOCAL_STEP_WAIT;
}

static int step_reply(struct local_conn *c)
{
	int r = local_conn_flush(c);

	if (r < 0 || (r > 0 && c->kind == LOCAL_K_CTL)) {
		local_conn_close(c);
		return LOCAL_STEP_WAIT;
	}
	if (r == 0)
		return LOCAL_STEP_WAIT;
	(void)shutdown(c->fd, SHUT_WR);
	c->state = LOCAL_S_LINGER;
	return LOCAL_STEP_AGAIN;
}

/* after a final answer: what the client still sends is read and dropped until it closes, so
 * that closing with unread bytes does not reset the connection before it read the answer */
static int step_linger(struct local_conn *c)
{
	char buf[4096];

	for (;;) {
		ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return LOCAL_STEP_WAIT;
		if (r <= 0) {
			local_conn_close(c);
			return LOCAL_STEP_WAIT;
		}
	}
}

static int step_connect(struct local_conn *c)
{
	if (!c->up_event)
		return LOCAL_STEP_WAIT;
	int e = 0;
	socklen_t el = sizeof(e);
	if (getsockopt(c->up, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		e = errno;
	if (e == 0) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		if (getpeername(c->up, (struct sockaddr *)&peer, &pl) < 0) {
			if (errno != ENOTCONN)
				e = errno;
			else
				return LOCAL_STEP_WAIT; /* not yet */
		}
	}
	if (e) {
		c->dial_errno = e;
		local_close_fd(&c->up);
		local_dial_next(c);
		return LOCAL_STEP_AGAIN;
	}
	local_dial_done(c);
	return LOCAL_STEP_AGAIN;
}

void local_conn_run(struct local_conn *c)
{
	for (int guard = 0; guard < 64 && !c->dead; guard++) {
		int r = LOCAL_STEP_WAIT;
		unsigned char before = c->state;
		switch (c->state) {
		case LOCAL_S_HEAD:
			r = step_head(c);
			break;
		case LOCAL_S_SOCKS:
			r = step_socks(c);
			break;
		case LOCAL_S_CONNECT:
			r = step_connect(c);
			break;
		case LOCAL_S_RELAY:
			r = local_relay_pump(c);
			break;
		case LOCAL_S_HTTP:
			r = local_http_pump(c);
			break;
		case LOCAL_S_REPLY:
			r = step_reply(c);
			break;
		case LOCAL_S_LINGER:
			r = step_linger(c);
			break;
		case LOCAL_S_CTL:
			r = step_ctl(c);
			break;
		default:
			break; /* waiting on the resolver, the factory, or net-loop.c */
		}
		if (r == LOCAL_STEP_YIELD) {
			local_conn_later(c);
			return;
		}
		if (r == LOCAL_STEP_WAIT && c->state == before)
			return;
	}
}

void local_conn_answer(struct local_conn *c, char *line)
{
	local_conn_reply(c, line, strlen(line));
	local_conn_run(c);
}

/* --- accepting ----------------------------------------------------------------------------- */

static enum local_pool pool_of(int kind)
{
	return kind == LOCAL_K_HTTP || kind == LOCAL_K_SOCKS ? LOCAL_P_PROXY
		: kind == LOCAL_K_FWD			     ? LOCAL_P_FWD
		: kind == LOCAL_K_PREVIEW		     ? LOCAL_P_PREVIEW
							     : LOCAL_P_CTL;
}

/* the oldest connection that was told the cap is reached and has had its answer */
static struct local_conn *oldest_answered(struct local_net *n)
{
	struct local_conn *old = NULL;

	for (struct local_conn *c = n->conns; c; c = c->next) /* newest first */
		if (c->refusing && c->state == LOCAL_S_LINGER)
			old = c;
	return old;
}

struct local_conn *local_conn_accept(struct local_net *n, struct local_listener *l, int fd)
{
	enum local_pool pool = pool_of(l->kind);
	bool refusing = n->pool_used[pool] >= n->pool_cap[pool];

	if (refusing && n->refusing >= REFUSE_MAX && l->kind != LOCAL_K_FWD &&
	    l->kind != LOCAL_K_CTL) {
		/* the newest gets the answer: an older one already has it */
		struct local_conn *old = oldest_answered(n);
		if (old)
			local_conn_close(old);
	}
	if (refusing &&
	    (n->refusing >= REFUSE_MAX || l->kind == LOCAL_K_FWD || l->kind == LOCAL_K_CTL)) {
		close(fd); /* a forwarder has no way to say why; the rest are too many */
		return NULL;
	}
	struct local_conn *c = xcalloc(1, sizeof(*c));
	c->cl_ep.type = LOCAL_EP_CLIENT;
	c->up_ep.type = LOCAL_EP_UP;
	c->n = n;
	c->kind = (unsigned char)l->kind;
	c->pool = (unsigned char)pool;
	c->refusing = refusing;
	c->fd = fd;
	if (l->kind != LOCAL_K_CTL)
		local_set_nodelay(fd);
	c->up = -1;
	c->fq_slot = -1;
	for (int d = 0; d < 2; d++)
		c->pipe[d][0] = c->pipe[d][1] = -1;
	c->t0 = sbx_now_ms();
	c->deadline = n->now + (refusing ? REFUSE_DEADLINE_MS : HEAD_DEADLINE_MS);
	if (refusing)
		n->refusing++;
	else
		n->pool_used[pool]++;
	n->n_conns++;
	c->next = n->conns;
	if (n->conns)
		n->conns->prev = c;
	n->conns = c;
	if (local_ep_add(n, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->cl_ep) < 0) {
		local_conn_close(c);
		return NULL;
	}
	if (l->kind == LOCAL_K_PREVIEW) {
		local_touch_activity(n->s->dir);
		c->inside_port = l->pv->port;
		c->host_port = l->pv->host_port;
		c->auth = l->pv->auth;
		memcpy(c->token, l->pv->token, sizeof(c->token));
	}
	if (refusing && l->kind != LOCAL_K_SOCKS) {
		_cleanup_free_ char *body = xasprintf(
			"sbx: %s of this sandbox has %d connections open, "
			"its limit; retry when some have closed\n",
			pool_what[pool], n->pool_cap[pool]);
		local_conn_http(c, 503, "Service Unavailable", NULL, body);
		c->deadline = n->now + REFUSE_DEADLINE_MS;
	} else {
		switch (l->kind) {
		case LOCAL_K_HTTP:
			c->state = LOCAL_S_HEAD;
			break;
		case LOCAL_K_SOCKS:
			c->state = LOCAL_S_SOCKS;
			break;
		case LOCAL_K_CTL:
			c->state = LOCAL_S_CTL;
			c->deadline = n->now + CTL_DEADLINE_MS;
			break;
		case LOCAL_K_FWD: {
			/* the host's 127.0.0.1, then its ::1 (a server bound to "localhost") */
			struct sockaddr_in *a = (struct sockaddr_in *)&c->addrs[0];
			struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&c->addrs[1];
			a->sin_family = AF_INET;
			a->sin_port = htons((uint16_t)l->fwd_host);
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			memset(a6, 0, sizeof(*a6));
			a6->sin6_family = AF_INET6;
			a6->sin6_port = htons((uint16_t)l->fwd_host);
			a6->sin6_addr = in6addr_loopback;
			c->n_addrs = 2;
			c->fwd_host = l->fwd_host;
			c->deadline = n->now + DIAL_DEADLINE_MS;
			local_dial_next(c);
			break;
		}
		case LOCAL_K_PREVIEW:
			if (c->auth)
				c->state = LOCAL_S_HEAD;
			else
				local_dial_inside(c);
			break;
		}
	}
	local_conn_run(c);
	return c->dead ? NULL : c;
}

/* --- time ---------------------------------------------------------------------------------- */

static void deadline_passed(struct local_conn *c)
{
	switch (c->state) {
	case LOCAL_S_HEAD:
		if ((c->kind == LOCAL_K_HTTP && !(c->served && c->in_len == 0)) ||
		    c->kind == LOCAL_K_PREVIEW) { /* a kept-alive connection idle: just closed */
			size_t len;
			_cleanup_free_ char *r = local_http_text(
				408, "Request Timeout", NULL,
				"sbx: the request head did not arrive "
				"within 10 s\n",
				&len);
			(void)!send(c->fd, r, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		local_conn_close(c);
		return;
	case LOCAL_S_RESOLVE:
	case LOCAL_S_CONNECT:
	case LOCAL_S_FACTORY:
		if (c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS) {
			_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
			if (c->state == LOCAL_S_RESOLVE && local_resolver_starved(c->n->rs))
				snprintf(
					c->reason, sizeof(c->reason),
					"cannot resolve %s: no thread "
					"could be started to look it up (is the sandbox at its process "
					"limit?)",
					h);
			else if (c->state == LOCAL_S_RESOLVE)
				snprintf(c->reason, sizeof(c->reason),
					 "cannot resolve %s: no answer "
					 "within %d s",
					 h, DIAL_DEADLINE_MS / 1000);
			else
				snprintf(c->reason, sizeof(c->reason),
					 "%s:%d did not answer within "
					 "%d s",
					 h, c->port, DIAL_DEADLINE_MS / 1000);
			c->dial_errno = ETIMEDOUT;
			if (c->job)
				local_resolve_cancel(c->n->rs, c->job);
			c->job = NULL;
			local_close_fd(&c->up);
			local_proxy_fail(c, LOCAL_F_TIMEOUT);
		} else if (c->kind == LOCAL_K_PREVIEW) {
			if (c->fq_slot >= 0)
				c->n->fq[c->fq_slot] = NULL;
			c->fq_slot = -1;
			local_close_fd(&c->up);
			local_preview_fail(c, 504, "Gateway Timeout",
					   "did not answer within 10 s (is the "
					   "sandbox paused?)");
		} else {
			local_conn_close(c);
			return;
		}
		local_conn_run(c);
		return;
	default:
		local_conn_close(c);
	}
}

void local_conn_sweep(struct local_net *n)
{
	for (struct local_conn *c = n->conns, *next; c; c = next) {
		next = c->next;
		if (c->state == LOCAL_S_RELAY || c->state == LOCAL_S_HTTP) {
			if (c->throttle_until && n->now >= c->throttle_until) {
				c->throttle_until = 0; /* a byte limit's wait is over */
				c->last_io = n->now;
				local_conn_later(c);
			} else if (n->now - c->last_io >= n->idle_ms) {
				local_conn_close(c);
			}
		} else if (c->deadline && n->now >= c->deadline) {
			deadline_passed(c);
		}
	}
	local_pool_sweep(n, false);
	if (local_resolver_starved(n->rs))
		local_resolver_tick(n->rs);
}

void local_conn_ready(struct local_net *n)
{
	struct local_conn *list = n->ready;

	n->ready = NULL;
	while (list) {
		struct local_conn *c = list;
		list = c->ready_next;
		c->on_ready = false;
		if (!c->dead)
			local_conn_run(c);
	}
}

void local_conn_reap(struct local_net *n)
{
	struct local_conn **pp = &n->dead;

	while (*pp) {
		struct local_conn *c = *pp;
		if (c->on_ready) { /* still on the ready list: the next round frees it */
			pp = &c->dead_next;
			continue;
		}
		*pp = c->dead_next;
		free(c);
	}
}
