/* The proxy's absolute-URL (plain http://) exchanges, kept alive on both sides: a request goes
 * upstream with its body framed as the client framed it (Content-Length or chunked), the
 * response comes back framed as the server framed it (Content-Length, chunked, until the
 * server's end, none for HEAD, 1xx, 204 and 304), and then the client's connection reads its
 * next request (pipelined ones wait in the socket and are answered in order) while the
 * upstream connection goes to a small pool of idle ones (POOL_PER_DEST per host:port,
 * POOL_MAX in all, closed after POOL_IDLE_MS) for the next request to the same destination.
 * A body with a length, or until the end, moves by splice(2) through the connection's pipe;
 * a chunked one through a buffer, whose chunk sizes are read on the way. A request sent on a
 * pooled connection the server closed meanwhile is sent again on a new one (when it had no
 * body). Everything is non-blocking: net-conn.c runs it on the connection's events. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>

/* a body read of fewer bytes is acknowledged at once (local_quickack) */
#define QUICKACK_BELOW 16384

#define POOL_MAX 16
#define POOL_PER_DEST 4
#define POOL_IDLE_MS 10000
#define CLIENT_IDLE_MS 30000 /* a client's connection between requests */
#define CHUNK_BUF 65536
#define PUMP_BUDGET (1 << 20)

struct local_idle {
	int fd, port;
	long long expires;
	char host[LOCAL_HOST_MAX + 1];
	struct local_idle *next;
};

/* --- the pool of idle upstream connections ------------------------------------------------ */

static void pool_drop(struct local_net *n, struct local_idle **pp)
{
	struct local_idle *x = *pp;

	*pp = x->next;
	close(x->fd);
	free(x);
	n->n_idle--;
}

void local_pool_sweep(struct local_net *n, bool all)
{
	for (struct local_idle **pp = &n->idle; *pp;)
		if (all || (*pp)->expires <= n->now)
			pool_drop(n, pp);
		else
			pp = &(*pp)->next;
}

static void pool_put(struct local_conn *c)
{
	struct local_net *n = c->n;
	struct local_idle **last = NULL;
	int same = 0;

	(void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, c->up, NULL);
	for (struct local_idle **pp = &n->idle; *pp; pp = &(*pp)->next)
		if ((*pp)->port == c->port && streq((*pp)->host, c->host))
			same++;
	if (same >= POOL_PER_DEST || n->n_idle >= POOL_MAX) /* the oldest (the list's end) goes */
		for (struct local_idle **pp = &n->idle; *pp; pp = &(*pp)->next)
			if (n->n_idle >= POOL_MAX ||
			    ((*pp)->port == c->port && streq((*pp)->host, c->host)))
				last = pp;
	if (last)
		pool_drop(n, last);
	struct local_idle *x = xcalloc(1, sizeof(*x));
	x->fd = c->up;
	x->port = c->port;
	x->expires = n->now + POOL_IDLE_MS;
	memcpy(x->host, c->host, c->host_len + 1);
	x->next = n->idle;
	n->idle = x;
	n->n_idle++;
	c->up = -1;
}

/* an idle connection to c->host:c->port that the server has not closed, into c->up */
static bool pool_take(struct local_conn *c)
{
	struct local_net *n = c->n;

	for (struct local_idle **pp = &n->idle; *pp;) {
		struct local_idle *x = *pp;
		if (x->port != c->port || !streq(x->host, c->host)) {
			pp = &x->next;
			continue;
		}
		char b;
		ssize_t r = recv(x->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN) {
			c->up = x->fd;
			x->fd = -1;
			*pp = x->next;
			free(x);
			n->n_idle--;
			return true;
		}
		pool_drop(n, pp); /* closed, reset, or it sent what nobody asked for */
	}
	return false;
}

/* --- an exchange -------------------------------------------------------------------------- */

static void http_fail(struct local_conn *c, const char *why)
{
	_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);

	snprintf(c->reason, sizeof(c->reason), "%s:%d %s", h, c->port, why);
	c->deny = false;
	local_close_fd(&c->up);
	if (c->got_resp) { /* part of the answer is sent: it can only be cut short */
		local_conn_close(c);
		return;
	}
	_cleanup_free_ char *body = xasprintf("sbx: egress to %s:%d failed: %s\n", h, c->port,
					      c->reason);
	local_conn_http(c, 502, "Bad Gateway", NULL, body);
}

/* a body with a length wakes the loop when a pipe's worth of it has come, or the rest of it
 * (SO_RCVLOWAT): fewer rounds for as many bytes; back to 1 before the connection is pooled.
 * Only once the body is a bulk transfer: at the start of one on a connection that was idle
 * (pooled), the server sends a few segments and waits for ACKs that do not come while the
 * bytes are short of the mark; 100-200 ms lost in one of four 50 MiB downloads measured */
static void set_lowat(struct local_conn *c)
{
	int want = 1;

	if (c->resp.kind == LOCAL_BODY_LENGTH && !c->resp.done &&
	    c->down_bytes - c->resp_from >= LOCAL_PIPE_BULK)
		want = c->resp.left < c->pipe_cap[1] ? (int)c->resp.left : (int)c->pipe_cap[1];
	if (want != c->lowat && c->up >= 0 &&
	    setsockopt(c->up, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
		c->lowat = want;
}

/* the request is sent and answered: logged, the upstream pooled, the next request read */
static void http_done(struct local_conn *c)
{
	struct local_net *n = c->n;

	local_conn_log(c);
	set_lowat(c);
	if (c->up >= 0 && c->up_reusable && c->req.done && c->lowat == 1)
		pool_put(c);
	else
		local_close_fd(&c->up);
	free(c->retry);
	c->retry = NULL;
	if (c->http_close || !c->req.done) {
		c->proto = NULL; /* logged */
		local_conn_reply(c, NULL, 0);
		return;
	}
	c->state = LOCAL_S_HEAD;
	c->head_len = 0;
	c->scan_from = 0;
	c->served++;
	c->deadline = n->now + CLIENT_IDLE_MS;
	c->t0 = sbx_now_ms();
	c->proto = NULL;
	c->host_len = 0;
	c->host[0] = 0;
	c->deny = c->literal = c->mapped = c->got_resp = false;
	c->reason[0] = 0;
	c->exec[0] = 0;
	free(c->command);
	c->command = NULL;
	c->up_bytes = c->down_bytes = 0;
	c->logged = false;
	c->throttled_ms = 0;
	c->n_addrs = c->next_addr = 0;
	c->dial_errno = 0;
}

/* what the client sends after the request head: the body's part upstream, the rest stays in
 * c->in as the next request; -1 on a malformed body */
static int take_body(struct local_conn *c)
{
	long long k = local_body_scan(&c->req, c->in, c->in_len);

	if (k < 0)
		return -1;
	if (k > 0) {
		c->pre = xrealloc(c->pre, c->pre_len + (size_t)k + 1);
		memcpy(c->pre + c->pre_len, c->in, (size_t)k);
		c->pre_len += (size_t)k;
		memmove(c->in, c->in + k, c->in_len - (size_t)k);
		c->in_len -= (size_t)k;
	}
	return 0;
}

/* the request upstream: its head, then its body as it comes */
static int pump_up(struct local_conn *c, bool *progress)
{
	for (;;) {
		if (c->pre) {
			size_t before = c->pre_off;
			int r = local_send_pending(c->up, c->pre, c->pre_len, &c->pre_off,
						   &c->up_bytes);
			*progress |= c->pre_off != before;
			if (r < 0)
				return -1;
			if (r == 0)
				return 0;
			free(c->pre);
			c->pre = NULL;
			c->pre_len = c->pre_off = 0;
		}
		if (c->req.done)
			return 0;
		size_t had = c->in_len;
		size_t max = c->req.kind == LOCAL_BODY_LENGTH && c->req.left < CHUNK_BUF
			? (size_t)c->req.left
			: CHUNK_BUF;
		int r = local_conn_read(c, max);
		if (c->in_len == had)
			return r < 0 ? -1 : 0; /* the client ended before the body did */
		*progress = true;
		if (take_body(c) < 0)
			return -1;
	}
}

/* the response head from upstream, into c->rb; 1 when it is complete and answered */
static int resp_head(struct local_conn *c, bool *progress)
{
	for (;;) {
		if (c->rb_len == LOCAL_HEAD_MAX)
			return -2;
		if (!c->rb)
			c->rb = xmalloc(LOCAL_HEAD_MAX + 1);
		ssize_t r = recv(c->up, c->rb + c->rb_len, LOCAL_HEAD_MAX - c->rb_len,
				 MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0)
			return c->rb_len == 0 ? -3 : -1; /* -3: nothing at all came */
		*progress = true;
		local_quickack(c->up); /* a server's head and body apart: 40 ms each with apt */
		size_t seen = c->rb_len;
		c->rb_len += (size_t)r;
		for (;;) {
			size_t hl = local_http_head_len(c->rb, c->rb_len, seen);
			struct local_http_resp rp;
			if (hl == 0)
				break;
			if (local_http_resp_parse(c->rb, hl, c->is_head, &rp) < 0 ||
			    rp.status == 101)
				return -2;
			c->got_resp = true;
			if (rp.status <
			    200) { /* 100 Continue and the like: passed on as they are */
				local_conn_out(c, c->rb, hl);
				memmove(c->rb, c->rb + hl, c->rb_len - hl);
				c->rb_len -= hl;
				seen = 0;
				continue;
			}
			c->resp = rp.body;
			c->resp_from = c->down_bytes;
			c->up_reusable = !rp.close;
			if (rp.body.kind == LOCAL_BODY_CLOSE)
				c->http_close = true; /* its end is the connection's */
			size_t ol;
			_cleanup_free_ char *h = local_http_resp_head(c->rb, hl, c->http_close,
								      &ol);
			local_conn_out(c, h, ol);
			long long k = local_body_scan(&c->resp, c->rb + hl, c->rb_len - hl);
			if (k < 0)
				return -1;
			local_conn_out(c, c->rb + hl, (size_t)k);
			c->down_bytes += k;
			if ((size_t)k < c->rb_len - hl)
				c->up_reusable = false; /* bytes nobody asked for */
			free(c->rb);
			c->rb = NULL;
			c->rb_len = 0;
			return 1;
		}
	}
}

/* the response's body to the client; 1 when it is all sent */
static int pump_down(struct local_conn *c, bool *progress, size_t *moved)
{
	const unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

	for (;;) {
		if (c->out) {
			size_t before = c->out_off;
			int r = local_send_pending(c->fd, c->out, c->out_len, &c->out_off, NULL);
			*progress |= c->out_off != before;
			if (r < 0)
				return -1;
			if (r == 0)
				return 0;
			free(c->out);
			c->out = NULL;
			c->out_len = c->out_off = 0;
		}
		if (c->inpipe[1] > 0) {
			ssize_t w = splice(c->pipe[1][0], NULL, c->fd, NULL, c->inpipe[1], flags);
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (w <= 0)
				return 0;
			c->inpipe[1] -= (size_t)w;
			*moved += (size_t)w;
			*progress = true;
			continue;
		}
		if (c->resp.done)
			return 1;
		if (*moved >= PUMP_BUDGET)
			return 0;
		/* a byte limit (--net-rate) holds reading back; the sweep wakes the connection */
		size_t room = local_rate_room(c, 1, c->pipe_cap[1]);
		if (room == 0)
			return 0;
		if (c->resp.kind == LOCAL_BODY_CHUNKED) {
			char *buf = xmalloc(CHUNK_BUF);
			ssize_t r = recv(c->up, buf, room < CHUNK_BUF ? room : CHUNK_BUF,
					 MSG_DONTWAIT);
			if (r > 0) {
				local_quickack(c->up);
				local_rate_spent(c, 1, (size_t)r);
				long long k = local_body_scan(&c->resp, buf, (size_t)r);
				if (k >= 0 && k < r)
					c->up_reusable = false;
				if (k > 0) {
					c->out = buf;
					c->out_len = (size_t)k;
					c->out_off = 0;
					c->down_bytes += k;
					*moved += (size_t)k;
					buf = NULL;
				}
				free(buf);
				if (k < 0)
					return -1;
				*progress = true;
				continue;
			}
			free(buf);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				return 0;
			return -1; /* the server ended within the body */
		}
		if (c->resp.kind == LOCAL_BODY_LENGTH && c->resp.left < room)
			room = (size_t)c->resp.left;
		ssize_t r = splice(c->up, NULL, c->pipe[1][1], NULL, room, flags);
		if (r > 0) {
			if (r < QUICKACK_BELOW) /* a bulk transfer's ACKs come without it */
				local_quickack(c->up);
			local_rate_spent(c, 1, (size_t)r);
			c->inpipe[1] += (size_t)r;
			c->down_bytes += r;
			local_pipe_grow(c, 1, c->down_bytes);
			if (c->resp.kind == LOCAL_BODY_LENGTH) {
				c->resp.left -= (unsigned long long)r;
				c->resp.done = c->resp.left == 0;
			}
			*progress = true;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			set_lowat(c);
			return 0;
		}
		if (r == 0 && c->resp.kind == LOCAL_BODY_CLOSE) {
			c->resp.done = true;
			c->up_reusable = false;
			continue;
		}
		return -1;
	}
}

int local_http_pump(struct local_conn *c)
{
	size_t moved = 0;

	for (;;) {
		bool progress = false;
		int u = pump_up(c, &progress);
		if (u < 0) {
			if (!c->got_resp) {
				http_fail(c, "ended the request early");
				return LOCAL_STEP_AGAIN;
			}
			c->req.done = false; /* the client's connection ends after the answer */
		}
		if (!c->resp_started) {
			int h = resp_head(c, &progress);
			if (h == -3 && c->retry && !c->got_resp) {
				/* a pooled connection the server had closed: once more on a new one */
				local_close_fd(&c->up);
				free(c->pre);
				c->pre = TAKE_PTR(c->retry);
				c->pre_len = c->retry_len;
				c->pre_off = 0;
				c->up_bytes = 0;
				c->no_pool = true;
				local_dial_proxy(c);
				return LOCAL_STEP_AGAIN;
			}
			if (h < 0) {
				http_fail(c,
					  h == -2 ? "sent a response this proxy cannot pass on"
						  : "ended the connection before its response");
				return LOCAL_STEP_AGAIN;
			}
			c->resp_started = h == 1;
		}
		if (c->resp_started || c->out) {
			int d = pump_down(c, &progress, &moved);
			if (d < 0) {
				local_conn_close(c);
				return LOCAL_STEP_WAIT;
			}
			if (d == 1 && c->resp_started) { /* a body not all sent: the end after it */
				http_done(c);
				return LOCAL_STEP_AGAIN;
			}
		}
		if (!progress)
			return LOCAL_STEP_WAIT;
		c->last_io = c->n->now;
		if (moved >= PUMP_BUDGET)
			return LOCAL_STEP_YIELD;
	}
}

/* the request's upstream connection is there (dialled, or from the pool): the exchange */
void local_http_start(struct local_conn *c)
{
	if (c->pipe[1][0] < 0) {
		if (pipe2(c->pipe[1], O_NONBLOCK | O_CLOEXEC) < 0) {
			local_conn_http(c, 503, "Service Unavailable", NULL,
					"sbx: the egress proxy is out of file descriptors\n");
			return;
		}
		(void)fcntl(c->pipe[1][1], F_SETPIPE_SZ, LOCAL_PIPE_SZ);
		int sz = fcntl(c->pipe[1][1], F_GETPIPE_SZ);
		c->pipe_cap[1] = sz > 0 ? (size_t)sz : 4096;
		c->pipe_grown[1] = false;
	}
	c->state = LOCAL_S_HTTP;
	c->lowat = 1;
	c->deadline = 0;
	c->last_io = c->n->now;
	c->resp_started = false;
}

/* the request's upstream connection from the pool, when one is idle there */
bool local_http_pooled(struct local_conn *c)
{
	if (c->no_pool || !pool_take(c))
		return false;
	if (local_ep_add(c->n, c->up, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->up_ep) < 0) {
		local_close_fd(&c->up);
		return false;
	}
	snprintf(c->reason, sizeof(c->reason), "%s",
		 local_egress_open(c->n->eg) ? "open" : "allowed");
	if (c->req.kind == LOCAL_BODY_NONE) { /* sent again on a new one if the server closed it */
		c->retry = xmalloc(c->pre_len + 1);
		memcpy(c->retry, c->pre, c->pre_len);
		c->retry_len = c->pre_len;
	}
	local_http_start(c);
	return true;
}
