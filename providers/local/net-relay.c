/* A supervisor connection's life (its end, its entry in the egress log), its answers to the
 * client, and the relay: a pipe each way, filled and drained with splice(2) so that the bytes
 * never enter this process, edge-triggered (every socket read to EAGAIN, or its pipe full). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>

#define LINGER_MS 2000	      /* after a final answer: the client's end, for so long */
#define PUMP_BUDGET (1 << 20) /* bytes one relay moves before the others get a turn */
#define IN_MIN 2048

void local_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* a relayed TCP socket sends what it is given at once: the bytes were already held back (or
 * not) by the program that wrote them; Nagle's algorithm here would add a round trip, or a
 * delayed ACK's 40 ms, to every small write after the first (a TLS record, a request) */
void local_set_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* what came is acknowledged at once (not sticky: the kernel goes back to delaying ACKs, so
 * asked again after each read): a peer that writes a message in two parts with Nagle's
 * algorithm on (a head, then its body) waits for that ACK before the second part, and on a
 * kept-alive connection the ACK was delayed 40 ms, a response (or request) each */
void local_quickack(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

int local_ep_add(struct local_net *n, int fd, unsigned events, struct local_ep_tag *ep)
{
	struct epoll_event ev = { .events = events, .data.ptr = ep };

	return epoll_ctl(n->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void local_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* a complete HTTP answer with a one-line plain-text body, which ends the connection */
char *local_http_text(int code, const char *status, const char *extra, const char *body,
		      size_t *ret_len)
{
	char *r = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n%s",
			    code, status, strlen(body), extra ? extra : "", body);
	*ret_len = strlen(r);
	return r;
}

void local_conn_out(struct local_conn *c, const void *b, size_t len)
{
	c->out = xrealloc(c->out, c->out_len + len + 1);
	memcpy(c->out + c->out_len, b, len);
	c->out_len += len;
}

/* --- a connection's life ----------------------------------------------------------------- */

void local_conn_log(struct local_conn *c)
{
	if ((c->kind != LOCAL_K_HTTP && c->kind != LOCAL_K_SOCKS) || c->host_len == 0 ||
	    !c->proto || c->logged)
		return;
	c->logged = true;
	c->n->rx_bytes += c->down_bytes;
	c->n->tx_bytes += c->up_bytes;
	struct local_egress_entry x = {
		.t0 = c->t0,
		.exec = c->exec,
		.command = c->command,
		.proto = c->proto,
		.domain = c->host,
		.domain_len = c->host_len,
		.port = c->port,
		.deny = c->deny,
		.reason = c->reason,
		.up = c->up_bytes,
		.down = c->down_bytes,
		.throttled_ms = c->throttled_ms,
	};
	local_egress_log(c->n->eg, &x);
}

void local_conn_close(struct local_conn *c)
{
	struct local_net *n = c->n;

	if (c->dead)
		return;
	c->dead = true;
	local_conn_log(c);
	if (c->kind == LOCAL_K_PREVIEW)
		local_touch_activity(n->s->dir);
	if (c->job)
		local_resolve_cancel(n->rs, c->job);
	if (c->fq_slot >= 0)
		n->fq[c->fq_slot] = NULL;
	local_close_fd(&c->fd);
	local_close_fd(&c->up);
	for (int d = 0; d < 2; d++) {
		local_close_fd(&c->pipe[d][0]);
		local_close_fd(&c->pipe[d][1]);
	}
	free(c->in);
	free(c->out);
	free(c->pre);
	free(c->command);
	free(c->rb);
	free(c->retry);
	c->in = c->out = c->pre = c->command = c->rb = c->retry = NULL;
	if (c->refusing)
		n->refusing--;
	else
		n->pool_used[c->pool]--;
	n->n_conns--;
	if (c->prev)
		c->prev->next = c->next;
	else
		n->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->dead_next = n->dead; /* freed after this round of events, which may still name it */
	n->dead = c;
}

void local_conn_later(struct local_conn *c)
{
	if (c->on_ready || c->dead)
		return;
	c->on_ready = true;
	c->ready_next = c->n->ready;
	c->n->ready = c;
}

/* --- talking to the client ----------------------------------------------------------------- */

/* 1 when c->out is all sent, 0 when the rest waits for the socket, -1 on an error */
int local_conn_flush(struct local_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return -1;
		c->out_off += (size_t)w;
	}
	return 1;
}

/* reads what the client sent into c->in (up to max bytes); -1 on EOF or an error */
int local_conn_read(struct local_conn *c, size_t max)
{
	bool tcp = c->kind == LOCAL_K_HTTP || c->kind == LOCAL_K_SOCKS, acked = false;

	for (;;) {
		if (c->in_len == c->in_cap) {
			if (c->in_cap >= max)
				return 0;
			c->in_cap = c->in_cap ? c->in_cap * 2 : IN_MIN;
			if (c->in_cap > max)
				c->in_cap = max;
			c->in = xrealloc(c->in, c->in_cap + 1);
		}
		ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0)
			return -1;
		if (tcp && !acked) {
			local_quickack(c->fd);
			acked = true;
		}
		c->in_len += (size_t)r;
		c->in[c->in_len] = 0;
	}
}

/* a final answer: sent, then the connection drains (LINGER) and ends */
void local_conn_reply(struct local_conn *c, char *data, size_t len)
{
	free(c->out);
	c->out = data;
	c->out_len = len;
	c->out_off = 0;
	c->state = LOCAL_S_REPLY;
	c->deadline = c->n->now + LINGER_MS;
}

void local_conn_http(struct local_conn *c, int code, const char *status, const char *extra,
		     const char *body)
{
	size_t len;
	char *r = local_http_text(code, status, extra, body, &len);

	local_conn_reply(c, r, len);
}

void local_conn_socks(struct local_conn *c, unsigned char code)
{
	unsigned char r[10] = { 5, code, 0, 1, 0, 0, 0, 0, 0, 0 };

	local_conn_out(c, r, sizeof(r));
	c->state = LOCAL_S_REPLY;
	c->deadline = c->n->now + LINGER_MS;
}

static int socks_code(int e)
{
	return e == ECONNREFUSED ? 5 : e == ENETUNREACH ? 3 : 4;
}

/* the proxy gives up on a connection: a refusal (the policy), a failure, or a timeout */
void local_proxy_fail(struct local_conn *c, enum local_fail f)
{
	_cleanup_free_ char *h = local_escape_name(c->host, c->host_len);
	bool refused = f == LOCAL_F_DENY || f == LOCAL_F_RATE;

	c->deny = refused;
	if (refused) /* logged now: the exec that asked sees it once its command ends */
		local_conn_log(c);
	if (c->kind == LOCAL_K_SOCKS) {
		local_conn_socks(c, refused ? 2 : socks_code(c->dial_errno));
		return;
	}
	_cleanup_free_ char *line = xasprintf("sbx: egress to %s:%d %s: %s", h, c->port,
					      refused ? "refused" : "failed", c->reason);
	/* a refusal says why in the status line and a header too: for CONNECT most clients
	 * show nothing else (the line is printable ASCII: names and reasons are escaped) */
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	_cleanup_free_ char *body = xasprintf("%s\n", line);
	_cleanup_free_ char *extra = xasprintf("X-Sbx-Reason: %s\r\n%s", line,
					       f == LOCAL_F_RATE ? "Retry-After: 1\r\n" : "");
	if (f == LOCAL_F_DENY)
		local_conn_http(c, 403, line, extra, body);
	else if (f == LOCAL_F_RATE)
		local_conn_http(c, 429, line, extra, body);
	else if (f == LOCAL_F_TIMEOUT)
		local_conn_http(c, 504, "Gateway Timeout", NULL, body);
	else
		local_conn_http(c, 502, "Bad Gateway", NULL, body);
}

void local_preview_fail(struct local_conn *c, int code, const char *status, const char *why)
{
	_cleanup_free_ char *body = xasprintf("sbx: port %d inside sandbox '%s' %s\n",
					      c->inside_port, c->n->s->label, why);

	local_conn_http(c, code, status, NULL, body);
}

/* --- relaying ------------------------------------------------------------------------------ */

void local_relay_start(struct local_conn *c)
{
	for (int d = 0; d < 2; d++) {
		if (c->pipe[d][0] >= 0)
			continue; /* made for a kept-alive request before this CONNECT */
		if (pipe2(c->pipe[d], O_NONBLOCK | O_CLOEXEC) < 0) {
			/* out of descriptors: the cap was set below the limit, so this is rare */
			if (c->kind == LOCAL_K_HTTP)
				local_conn_http(
					c, 503, "Service Unavailable", NULL,
					"sbx: the egress proxy is out of file descriptors\n");
			else
				local_conn_close(c);
			return;
		}
		int sz = fcntl(c->pipe[d][1], F_GETPIPE_SZ);
		c->pipe_cap[d] = sz > 0 ? (size_t)sz : 4096;
		c->pipe_grown[d] = false;
	}
	c->state = LOCAL_S_RELAY;
	c->deadline = 0;
	c->last_io = c->n->now;
}

void local_pipe_grow(struct local_conn *c, int d, long long count)
{
	if (count < LOCAL_PIPE_BULK || c->pipe_cap[d] >= LOCAL_PIPE_BIG || c->pipe_grown[d])
		return;
	c->pipe_grown[d] = true; /* asked once: the kernel may refuse (the user's pipe pages) */
	if (fcntl(c->pipe[d][1], F_SETPIPE_SZ, LOCAL_PIPE_BIG) > 0) {
		int sz = fcntl(c->pipe[d][1], F_GETPIPE_SZ);
		if (sz > 0)
			c->pipe_cap[d] = (size_t)sz;
	}
}

int local_send_pending(int fd, const char *buf, size_t len, size_t *off, long long *count)
{
	while (*off < len) {
		ssize_t w = send(fd, buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return -1;
		*off += (size_t)w;
		if (count)
			*count += w;
	}
	return 1;
}

/* moves bytes both ways until both sides would block (edge-triggered: every socket is
 * drained to EAGAIN, or its pipe is full and the other side's readiness brings us back) */
int local_relay_pump(struct local_conn *c)
{
	const unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
	size_t moved = 0;

	for (;;) {
		bool progress = false;
		for (int d = 0; d < 2; d++) {
			int from = d ? c->up : c->fd, to = d ? c->fd : c->up;
			long long *count = d ? &c->down_bytes : &c->up_bytes;
			/* first what was there before the relay: an answer, a head, early bytes */
			char **buf = d ? &c->out : &c->pre;
			size_t *len = d ? &c->out_len : &c->pre_len,
			       *off = d ? &c->out_off : &c->pre_off;
			if (*buf) {
				size_t before = *off;
				int r = local_send_pending(to, *buf, *len, off, d ? NULL : count);
				if (r < 0)
					return local_conn_close(c), LOCAL_STEP_WAIT;
				progress |= *off != before;
				if (r == 0)
					continue;
				free(*buf);
				*buf = NULL;
				*len = *off = 0;
			}
			if (c->inpipe[d] > 0) {
				ssize_t w = splice(c->pipe[d][0], NULL, to, NULL, c->inpipe[d],
						   flags);
				if (w > 0) {
					c->inpipe[d] -= (size_t)w;
					moved += (size_t)w;
					progress = true;
				} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
					return local_conn_close(c), LOCAL_STEP_WAIT;
				}
			}
			/* a byte limit (--net-rate) holds reading back, not the relay */
			size_t room = c->eof[d]
				? 0
				: local_rate_room(c, d, c->pipe_cap[d] - c->inpipe[d]);
			if (room > 0) {
				ssize_t r = splice(from, NULL, c->pipe[d][1], NULL, room, flags);
				if (r > 0) {
					if (r < 16384) /* a message's parts, not a bulk stream */
						local_quickack(from);
					local_rate_spent(c, d, (size_t)r);
					c->inpipe[d] += (size_t)r;
					*count += r;
					local_pipe_grow(c, d, *count);
					moved += (size_t)r;
					progress = true;
				} else if (r == 0) {
					c->eof[d] = true;
					progress = true;
				} else if (errno != EAGAIN && errno != EINTR) {
					return local_conn_close(c), LOCAL_STEP_WAIT; /* reset */
				}
			}
			if (c->eof[d] && c->inpipe[d] == 0 && !c->shut[d]) {
				(void)shutdown(to, SHUT_WR); /* a half-close is passed on */
				c->shut[d] = true;
			}
		}
		if (c->shut[0] && c->shut[1])
			return local_conn_close(c), LOCAL_STEP_WAIT;
		if (!progress)
			return LOCAL_STEP_WAIT;
		c->last_io = c->n->now;
		if (moved >= PUMP_BUDGET)
			return LOCAL_STEP_YIELD;
	}
}
