/* The supervisor's network service: the egress proxy (HTTP with CONNECT, and SOCKS5) that it
 * serves inside the sandbox, the --host-port forwarders, previews, and the control socket
 * that `sbx preview` talks to. One thread per connection; none while the sandbox is idle. */
#define _GNU_SOURCE
#include "providers/local.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "core/json.h"
#include "core/net.h"

#define PROXY_HTTP_PORT 3128
#define PROXY_SOCKS_PORT 1080
#define MAX_PREVIEWS 64
#define HEAD_MAX 16384
#define HEAD_TIMEOUT_MS 30000
#define DIAL_TIMEOUT_MS 10000
#define RELAY_BUF (256 * 1024)
#define LOG_MAX_DEFAULT (4LL << 20)
#define EXECS_MAX (1 << 20)

struct preview {
	int port, host_port;
	bool public;
	char token[33];
	int fd;
};

struct local_net {
	const struct local_setup *s;
	int factory_fd;
	pthread_mutex_t factory_lock;
	bool proxy, open, preset;
	char **allow;
	int *allow_port;
	size_t n_allow;
	char **host_name, **host_addr;
	size_t n_hosts;
	int ctl_fd, http_fd, socks_fd;
	int *fwd_fd, *fwd_host;
	size_t n_fwd;
	struct preview prev[MAX_PREVIEWS];
	size_t n_prev;
	pthread_mutex_t log_lock;
	int log_fd;
	long long log_max;
};

/* --- small helpers ------------------------------------------------------------------------ */

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };

	for (;;) {
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ETIMEDOUT;
		return r > 0 ? 0 : -1;
	}
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR))
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_fd(fd, POLLOUT, HEAD_TIMEOUT_MS) < 0)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static void hex(char *out, size_t bytes)
{
	unsigned char b[32];

	if (bytes > sizeof(b) || getrandom(b, bytes, 0) != (ssize_t)bytes)
		abort(); /* the kernel's random source failed: nothing sensible is left */
	for (size_t i = 0; i < bytes; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static bool ct_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* an HTTP response with a one-line plain-text body, then the connection ends */
static void http_reply(int fd, int code, const char *status, const char *extra_headers,
		       const char *body)
{
	_cleanup_free_ char *r = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
					   "charset=utf-8\r\nContent-Length: %zu\r\n%sConnection: "
					   "close\r\n\r\n%s", code, status, strlen(body),
					   extra_headers ? extra_headers : "", body);
	(void)send_all(fd, r, strlen(r));
}

/* reads until the end of an HTTP head (CRLF CRLF); returns the head's length, bytes read in
 * *got (the rest is body), -1 on error, timeout or a head over HEAD_MAX */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *got)
{
	*got = 0;
	while (*got < cap - 1) {
		if (wait_fd(fd, POLLIN, HEAD_TIMEOUT_MS) < 0)
			return -1;
		ssize_t n = recv(fd, buf + *got, cap - 1 - *got, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		*got += (size_t)n;
		buf[*got] = 0;
		char *end = strstr(buf, "\r\n\r\n");
		if (end)
			return end + 4 - buf;
	}
	return -1;
}

/* the value of header name in an HTTP head (case-insensitive), copied into out */
static bool header_value(const char *head, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2] && !(l[2] == '\r');
	     l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2;
		if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
			const char *v = h + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			const char *e = strstr(v, "\r\n");
			size_t vl = e ? (size_t)(e - v) : strlen(v);
			if (vl >= len)
				vl = len - 1;
			memcpy(out, v, vl);
			out[vl] = 0;
			return true;
		}
	}
	return false;
}

/* --- policy -------------------------------------------------------------------------------- */

static bool allowed(const struct local_net *n, const char *host, int port)
{
	if (n->open)
		return true;
	for (size_t i = 0; i < n->n_allow; i++)
		if ((n->allow_port[i] == 0 || n->allow_port[i] == port) &&
		    sbx_net_match(n->allow[i], host))
			return true;
	for (size_t i = 0; n->preset && sbx_net_preset[i]; i++) {
		_cleanup_free_ char *pat = NULL;
		int p;
		if (sbx_net_parse_allow(sbx_net_preset[i], &pat, &p) == 0 && (p == 0 || p == port) &&
		    sbx_net_match(pat, host))
			return true;
	}
	return false;
}

/* why the proxy must not dial an IPv4 address (host order), or NULL */
static const char *forbidden_v4(uint32_t a)
{
	if ((a >> 24) == 127)
		return "a loopback address";
	if (a == 0xa9fea9feu || a == 0xa83f8110u || a == 0x646464c8u) /* 169.254.169.254,
									* 168.63.129.16, 100.100.100.200 */
		return "a cloud metadata address";
	if ((a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a >> 22) == 0x191)
		return "a private address"; /* 10/8, 172.16/12, 192.168/16, 100.64/10 */
	if ((a >> 16) == 0xa9fe)
		return "a link-local address";
	if ((a >> 28) == 0xe)
		return "a multicast address";
	if ((a >> 24) == 0 || (a >> 28) == 0xf || (a >> 8) == 0xc00000 || (a >> 17) == (0xc612u >> 1))
		return "a reserved address"; /* 0/8, 240/4, 192.0.0/24, 198.18/15 */
	return NULL;
}

static const char *forbidden_v6(const unsigned char *b)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b };
	static const unsigned char zero[16];

	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0)
		return forbidden_v4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
				    (uint32_t)b[14] << 8 | b[15]);
	if (memcmp(b, zero, 15) == 0 && b[15] == 1)
		return "a loopback address";
	if (memcmp(b, zero, 16) == 0)
		return "an unspecified address";
	if (b[0] == 0xfd && b[1] == 0x00 && b[2] == 0x0e && b[3] == 0xc2)
		return "a cloud metadata address";
	if ((b[0] & 0xfe) == 0xfc)
		return "a private address";
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return "a link-local address";
	if (b[0] == 0xff)
		return "a multicast address";
	return NULL;
}

const char *local_net_forbidden(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return forbidden_v6(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
	if (sa->sa_family == AF_INET)
		return forbidden_v4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	return "not an internet address";
}

static const char *add_host_of(const struct local_net *n, const char *host)
{
	for (size_t i = 0; i < n->n_hosts; i++)
		if (streq(n->host_name[i], host))
			return n->host_addr[i];
	return NULL;
}

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len)
{
	set_nonblock(fd, true);
	if (connect(fd, sa, len) < 0) {
		if (errno != EINPROGRESS)
			return -1;
		if (wait_fd(fd, POLLOUT, DIAL_TIMEOUT_MS) < 0)
			return -1;
		int e = 0;
		socklen_t el = sizeof(e);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
			errno = e ? e : errno;
			return -1;
		}
	}
	return 0;
}

/* dials host:port from the host side, after the policy; -1 with a reason (deny true when the
 * policy refused, false when the dial failed) */
static int dial(const struct local_net *n, const char *host, int port, char *reason, size_t rlen,
		bool *deny)
{
	char portstr[8];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	const char *mapped = add_host_of(n, host);

	*deny = true;
	if (!allowed(n, host, port)) {
		bool other_port = false;
		for (int p = 1; p <= 65535 && !other_port; p = p == 1 ? 80 : p == 80 ? 443 : 65536)
			other_port = allowed(n, host, p);
		for (size_t i = 0; i < n->n_allow && !other_port; i++)
			other_port = sbx_net_match(n->allow[i], host);
		if (other_port)
			snprintf(reason, rlen, "port %d of %s is not in this sandbox's allow list "
				 "(allow it with: sbx create --net allow=%s:%d,...)", port, host,
				 host, port);
		else
			snprintf(reason, rlen, "%s is not in this sandbox's allow list (allow it "
				 "with: sbx create --net allow=%s,...)", host, host);
		return -1;
	}
	snprintf(portstr, sizeof(portstr), "%d", port);
	if (mapped)
		hints.ai_flags |= AI_NUMERICHOST;
	int r = getaddrinfo(mapped ? mapped : host, portstr, &hints, &res);
	if (r != 0) {
		*deny = false;
		snprintf(reason, rlen, "cannot resolve %s: %s", host, gai_strerror(r));
		return -1;
	}
	if (!mapped)
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			const char *why = local_net_forbidden(ai->ai_addr);
			if (why) {
				char a[INET6_ADDRSTRLEN] = "?";
				if (ai->ai_family == AF_INET)
					inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, a, sizeof(a));
				else if (ai->ai_family == AF_INET6)
					inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, a, sizeof(a));
				snprintf(reason, rlen, "%s resolves to %s, %s (map it with --add-host "
					 "%s:ADDR)", host, a, why, host);
				freeaddrinfo(res);
				return -1;
			}
		}
	*deny = false;
	int fd = -1, e = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect_timeout(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(reason, rlen, "cannot connect to %s:%d: %s", host, port, strerror(e));
	else
		set_nonblock(fd, false);
	return fd;
}

/* --- the egress log ------------------------------------------------------------------------ */

struct conn {
	struct local_net *n;
	int fd;
	int kind;		/* what accepted it */
	int index;		/* forwarder or preview */
	long long t0;
	char exec[13];
	char *command;
	const char *proto;
	char domain[256];
	int port;
	bool deny;
	char reason[400];
	long long up, down;
};

static char *log_path(const char *dir, const char *suffix)
{
	return xasprintf("%s/egress.log%s", dir, suffix);
}

static void log_conn(struct conn *c)
{
	struct local_net *n = c->n;
	char t[64];
	time_t sec = (time_t)(c->t0 / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	size_t l = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + l, sizeof(t) - l, ".%03lldZ", c->t0 % 1000);
	json_t *j = json_pack("{s:s, s:o, s:o, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I}", "time", t,
			      "exec", c->exec[0] ? json_string(c->exec) : json_null(), "command",
			      c->command ? json_string(c->command) : json_null(), "proto", c->proto,
			      "domain", c->domain, "port", c->port, "verdict",
			      c->deny ? "deny" : "allow", "reason", c->reason, "bytes_up",
			      (json_int_t)c->up, "bytes_down", (json_int_t)c->down, "duration_ms",
			      (json_int_t)(sbx_now_ms() - c->t0));
	if (!j)
		return;
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return;
	_cleanup_free_ char *line = xasprintf("%s\n", s);
	free(s);
	pthread_mutex_lock(&n->log_lock);
	_cleanup_free_ char *p = log_path(n->s->dir, "");
	if (n->log_fd < 0)
		n->log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	if (n->log_fd >= 0 && fstat(n->log_fd, &st) == 0 &&
	    st.st_size + (off_t)strlen(line) > n->log_max) {
		/* capped: the older half goes to egress.log.1, replacing what was there */
		_cleanup_free_ char *old = log_path(n->s->dir, ".1");
		(void)rename(p, old);
		close(n->log_fd);
		n->log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	}
	if (n->log_fd >= 0)
		(void)sbx_write_all(n->log_fd, line, strlen(line));
	pthread_mutex_unlock(&n->log_lock);
}

/* the exec that holds this credential: 1 found (command set), 0 unknown id, -1 wrong secret */
static int exec_lookup(const struct local_net *n, const char *id, const char *secret,
		       char **command)
{
	static const char *const files[] = { "execs", "execs.1" };

	for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", n->s->dir, files[f]);
		_cleanup_free_ char *text = sbx_read_file(p, 4 * EXECS_MAX, NULL);
		for (char *l = text; l && *l;) {
			char *nl = strchr(l, '\n');
			if (nl)
				*nl = 0;
			if (strncmp(l, id, 12) == 0 && l[12] == ' ') {
				if (strncmp(l + 13, secret, 32) != 0 || l[45] != ' ')
					return -1;
				json_t *argv = json_loads(l + 46, 0, NULL);
				struct strbuf_tmp { char *s; } b = { xstrdup("") };
				size_t i;
				json_t *v;
				json_array_foreach(argv, i, v) {
					char *nb = xasprintf("%s%s%s", b.s, i ? " " : "",
							     json_string_value(v) ?: "");
					free(b.s);
					b.s = nb;
				}
				json_decref(argv);
				*command = b.s;
				return 1;
			}
			l = nl ? nl + 1 : l + strlen(l);
		}
	}
	return 0;
}

/* "ID:SECRET" from a proxy credential: 0 none given, 1 a known exec, -1 refused */
static int credential(struct conn *c, const char *user, const char *pass)
{
	if (!user || !*user)
		return 0;
	if (strlen(user) != 12 || strspn(user, "0123456789abcdef") != 12 || !pass ||
	    strlen(pass) != 32)
		return -1;
	int r = exec_lookup(c->n, user, pass, &c->command);
	if (r < 0)
		return -1;
	memcpy(c->exec, user, 13);
	return 1;
}

/* --- relaying ------------------------------------------------------------------------------ */

/* copies both ways until both sides are done (half-closes passed on); counts bytes. Each way
 * goes through a pipe with splice(2), so the data never enters this process; a read buffer
 * and send(2) are the way when no pipe can be had. */
static void relay_copy(int client, int upstream, long long *up, long long *down)
{
	struct side {
		int from, to;
		char *buf;
		size_t len, off;
		bool eof;
		long long *count;
	} d[2] = { { client, upstream, NULL, 0, 0, false, up },
		   { upstream, client, NULL, 0, 0, false, down } };

	set_nonblock(client, true);
	set_nonblock(upstream, true);
	d[0].buf = xmalloc(RELAY_BUF);
	d[1].buf = xmalloc(RELAY_BUF);
	for (;;) {
		struct pollfd p[4];
		int np = 0, idx[2][2] = { { -1, -1 }, { -1, -1 } };
		for (int i = 0; i < 2; i++) {
			if (d[i].len > d[i].off) {
				idx[i][1] = np;
				p[np++] = (struct pollfd){ .fd = d[i].to, .events = POLLOUT };
			} else if (!d[i].eof) {
				idx[i][0] = np;
				p[np++] = (struct pollfd){ .fd = d[i].from, .events = POLLIN };
			}
		}
		if (np == 0)
			break;
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		bool dead = false;
		for (int i = 0; i < 2 && !dead; i++) {
			if (idx[i][0] >= 0 && p[idx[i][0]].revents) {
				ssize_t r = recv(d[i].from, d[i].buf, RELAY_BUF, 0);
				if (r > 0) {
					d[i].len = (size_t)r;
					d[i].off = 0;
					*d[i].count += r;
				} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
					d[i].eof = true;
					(void)shutdown(d[i].to, SHUT_WR);
					if (r < 0)
						dead = true;
				}
			}
			if (idx[i][1] >= 0 && p[idx[i][1]].revents) {
				ssize_t w = send(d[i].to, d[i].buf + d[i].off, d[i].len - d[i].off,
						 MSG_NOSIGNAL);
				if (w > 0) {
					d[i].off += (size_t)w;
					if (d[i].off == d[i].len)
						d[i].len = d[i].off = 0;
				} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
					dead = true;
				}
			}
		}
		if (dead)
			break;
	}
	free(d[0].buf);
	free(d[1].buf);
}

struct way {
	int from, to, pipe[2];
	size_t inpipe;
	bool eof, shut, full; /* full: the pipe took no more, though not at cap bytes */
	long long *count;
};

static void relay(int client, int upstream, long long *up, long long *down)
{
	struct way d[2] = { { client, upstream, { -1, -1 }, 0, false, false, false, up },
			    { upstream, client, { -1, -1 }, 0, false, false, false, down } };
	const unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
	size_t cap = RELAY_BUF;

	for (int i = 0; i < 2; i++) {
		if (pipe2(d[i].pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
			if (i)
				close(d[0].pipe[0]), close(d[0].pipe[1]);
			relay_copy(client, upstream, up, down);
			return;
		}
		(void)fcntl(d[i].pipe[1], F_SETPIPE_SZ, RELAY_BUF);
		int sz = fcntl(d[i].pipe[1], F_GETPIPE_SZ);
		if (sz > 0 && (size_t)sz < cap)
			cap = (size_t)sz;
	}
	set_nonblock(client, true);
	set_nonblock(upstream, true);
	for (bool dead = false; !dead;) {
		struct pollfd p[4];
		int np = 0, in[2] = { -1, -1 }, out[2] = { -1, -1 };
		for (int i = 0; i < 2; i++) {
			if (!d[i].eof && !d[i].full && d[i].inpipe < cap) {
				in[i] = np;
				p[np++] = (struct pollfd){ .fd = d[i].from, .events = POLLIN };
			}
			if (d[i].inpipe > 0) {
				out[i] = np;
				p[np++] = (struct pollfd){ .fd = d[i].to, .events = POLLOUT };
			}
		}
		if (np == 0)
			break;
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2 && !dead; i++) {
			struct way *w = &d[i];
			if (in[i] >= 0 && p[in[i]].revents) {
				ssize_t r = splice(w->from, NULL, w->pipe[1], NULL, cap - w->inpipe, flags);
				if (r > 0) {
					w->inpipe += (size_t)r;
					*w->count += r;
				} else if (r == 0) {
					w->eof = true;
				} else if (errno == EAGAIN && w->inpipe > 0) {
					w->full = true; /* its slots are taken: wait for the other end */
				} else if (errno != EAGAIN && errno != EINTR) {
					w->eof = true;
					dead = true;
				}
			}
			if (out[i] >= 0 && p[out[i]].revents && w->inpipe > 0) {
				ssize_t r = splice(w->pipe[0], NULL, w->to, NULL, w->inpipe, flags);
				if (r > 0) {
					w->inpipe -= (size_t)r;
					w->full = false;
				} else if (r < 0 && errno != EAGAIN && errno != EINTR)
					dead = true;
			}
			if (w->eof && w->inpipe == 0 && !w->shut) {
				(void)shutdown(w->to, SHUT_WR);
				w->shut = true;
			}
		}
	}
	for (int i = 0; i < 2; i++) {
		close(d[i].pipe[0]);
		close(d[i].pipe[1]);
	}
}

/* --- sockets inside the sandbox ------------------------------------------------------------ */

void local_factory_reply(int fd, int sock, int e)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (sock >= 0) {
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sock, sizeof(int));
	}
	(void)sendmsg(fd, &m, MSG_NOSIGNAL);
}

/* a TCP socket of the sandbox's network ('S'), or one listening on 127.0.0.1:port there
 * ('L'); -1 with errno. With --net host the sandbox's network is the host's. */
static int factory_get(struct local_net *n, char op, int port)
{
	if (n->s->net_host) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0 || op == 'S')
			return s;
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int one = 1;
		(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0) {
			int e = errno;
			close(s);
			errno = e;
			return -1;
		}
		return s;
	}
	struct local_factory_req req = { .op = op, .port = (unsigned short)port };
	int e = 0, fd = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &e, .iov_len = sizeof(e) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };

	pthread_mutex_lock(&n->factory_lock);
	ssize_t r = send(n->factory_fd, &req, sizeof(req), MSG_NOSIGNAL);
	if (r == (ssize_t)sizeof(req)) {
		do
			r = recvmsg(n->factory_fd, &m, MSG_CMSG_CLOEXEC);
		while (r < 0 && errno == EINTR);
	}
	pthread_mutex_unlock(&n->factory_lock);
	if (r != (ssize_t)sizeof(e)) {
		errno = EPIPE;
		return -1;
	}
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0) {
		errno = e ? e : EPROTO;
		return -1;
	}
	/* only a socket is accepted as an answer */
	int type = 0;
	socklen_t tl = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM) {
		close(fd);
		errno = EPROTO;
		return -1;
	}
	return fd;
}

/* --- the proxies --------------------------------------------------------------------------- */

/* host:port from "host:port", "[v6]:port" or "host" (default port) */
static bool split_hostport(const char *s, char *host, size_t hlen, int *port, int def)
{
	const char *colon;

	if (*s == '[') {
		const char *e = strchr(s, ']');
		if (!e || (size_t)(e - s - 1) >= hlen)
			return false;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = 0;
		colon = e[1] == ':' ? e + 1 : NULL;
		if (e[1] && !colon)
			return false;
	} else {
		colon = strrchr(s, ':');
		size_t l = colon ? (size_t)(colon - s) : strlen(s);
		if (l == 0 || l >= hlen)
			return false;
		memcpy(host, s, l);
		host[l] = 0;
	}
	for (char *p = host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	*port = def;
	if (colon) {
		long long v;
		if (sbx_parse_int(colon + 1, 1, 65535, &v) < 0)
			return false;
		*port = (int)v;
	}
	return *host != 0;
}

static void http_proxy(struct conn *c)
{
	_cleanup_free_ char *buf = xmalloc(HEAD_MAX + 1);
	size_t got;
	ssize_t hl = read_head(c->fd, buf, HEAD_MAX + 1, &got);
	char method[16], target[4096], version[16], auth[512];

	c->proto = "http";
	if (hl < 0)
		return;
	if (sscanf(buf, "%15s %4095s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		http_reply(c->fd, 400, "Bad Request", NULL, "sbx: not an HTTP proxy request\n");
		return;
	}
	bool connect_ = streq(method, "CONNECT");
	const char *hostport = target;
	const char *path = "/";
	char hp[512];
	if (connect_) {
		c->proto = "connect";
		if (!split_hostport(target, c->domain, sizeof(c->domain), &c->port, 443)) {
			http_reply(c->fd, 400, "Bad Request", NULL, "sbx: CONNECT needs HOST:PORT\n");
			return;
		}
	} else {
		if (strncasecmp(target, "http://", 7) != 0) {
			http_reply(c->fd, 400, "Bad Request", NULL,
				   strncasecmp(target, "https://", 8) == 0
					   ? "sbx: use CONNECT for https through this proxy\n"
					   : "sbx: this is the sandbox's egress proxy: send absolute "
					     "http:// URLs, or CONNECT\n");
			return;
		}
		hostport = target + 7;
		const char *slash = strpbrk(hostport, "/?#");
		size_t l = slash ? (size_t)(slash - hostport) : strlen(hostport);
		if (l >= sizeof(hp))
			l = sizeof(hp) - 1;
		memcpy(hp, hostport, l);
		hp[l] = 0;
		char *at = strrchr(hp, '@'); /* userinfo in the URL is not ours */
		if (!split_hostport(at ? at + 1 : hp, c->domain, sizeof(c->domain), &c->port, 80)) {
			http_reply(c->fd, 400, "Bad Request", NULL, "sbx: bad host in the URL\n");
			return;
		}
		if (slash && *slash == '/')
			path = slash;
	}
	/* the exec's credential */
	if (header_value(buf, "Proxy-Authorization", auth, sizeof(auth))) {
		size_t n;
		bool basic = strncasecmp(auth, "Basic ", 6) == 0;
		_cleanup_free_ char *dec = basic ? sbx_base64_decode(auth + 6, &n) : NULL;
		char *colon = dec ? strchr(dec, ':') : NULL;
		if (colon)
			*colon++ = 0;
		/* Basic that is not base64 is a bad credential; another scheme is none */
		if ((basic && !dec) || credential(c, dec, colon) < 0) {
			c->deny = true;
			snprintf(c->reason, sizeof(c->reason), "the proxy credential belongs to no "
				 "exec of this sandbox");
			http_reply(c->fd, 407, "Proxy Authentication Required",
				   "Proxy-Authenticate: Basic realm=\"sbx\"\r\n",
				   "sbx: this proxy credential belongs to no exec of this sandbox; "
				   "use the proxy variables sbx exec sets\n");
			return;
		}
	}
	bool deny;
	int up = dial(c->n, c->domain, c->port, c->reason, sizeof(c->reason), &deny);
	if (up < 0) {
		c->deny = deny;
		_cleanup_free_ char *body = xasprintf("sbx: egress to %s:%d %s: %s\n", c->domain,
						      c->port, deny ? "refused" : "failed", c->reason);
		if (deny)
			http_reply(c->fd, 403, "Forbidden", NULL, body);
		else
			http_reply(c->fd, 502, "Bad Gateway", NULL, body);
		return;
	}
	snprintf(c->reason, sizeof(c->reason), "%s", c->n->open ? "open" : "allowed");
	if (connect_) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		if (send_all(c->fd, ok, sizeof(ok) - 1) < 0 ||
		    (got > (size_t)hl && send_all(up, buf + hl, got - (size_t)hl) < 0)) {
			close(up);
			return;
		}
		c->up += (long long)(got - (size_t)hl);
	} else {
		/* origin-form request line; our headers dropped; one request per connection */
		_cleanup_free_ char *head = xasprintf("%s %s %s\r\n", method, path, version);
		const char *l = strstr(buf, "\r\n") + 2;
		while (l < buf + hl - 2) {
			const char *e = strstr(l, "\r\n");
			size_t len = (size_t)(e - l);
			if (strncasecmp(l, "Proxy-", 6) != 0 && strncasecmp(l, "Connection:", 11) != 0 &&
			    strncasecmp(l, "Keep-Alive:", 11) != 0) {
				char *nh = xasprintf("%s%.*s\r\n", head, (int)len, l);
				free(head);
				head = nh;
			}
			l = e + 2;
		}
		char *nh = xasprintf("%sConnection: close\r\n\r\n", head);
		free(head);
		head = nh;
		if (send_all(up, head, strlen(head)) < 0 ||
		    (got > (size_t)hl && send_all(up, buf + hl, got - (size_t)hl) < 0)) {
			close(up);
			return;
		}
		c->up += (long long)(strlen(head) + got - (size_t)hl);
	}
	relay(c->fd, up, &c->up, &c->down);
	close(up);
}

static int recv_n(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		if (wait_fd(fd, POLLIN, HEAD_TIMEOUT_MS) < 0)
			return -1;
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void socks_reply(int fd, unsigned char code)
{
	unsigned char r[10] = { 5, code, 0, 1, 0, 0, 0, 0, 0, 0 };

	(void)send_all(fd, r, sizeof(r));
}

static void socks_proxy(struct conn *c)
{
	unsigned char b[262];

	c->proto = "socks";
	if (recv_n(c->fd, b, 2) < 0 || b[0] != 5 || recv_n(c->fd, b + 2, b[1]) < 0)
		return;
	bool userpass = memchr(b + 2, 2, b[1]) != NULL, none = memchr(b + 2, 0, b[1]) != NULL;
	unsigned char choice[2] = { 5, userpass ? 2 : none ? 0 : 0xff };
	if (send_all(c->fd, choice, 2) < 0 || choice[1] == 0xff)
		return;
	if (userpass) {
		char user[256], pass[256];
		if (recv_n(c->fd, b, 2) < 0 || b[0] != 1 || recv_n(c->fd, user, b[1]) < 0)
			return;
		user[b[1]] = 0;
		if (recv_n(c->fd, b, 1) < 0 || recv_n(c->fd, pass, b[0]) < 0)
			return;
		pass[b[0]] = 0;
		unsigned char st[2] = { 1, credential(c, user, pass) < 0 ? 1 : 0 };
		if (send_all(c->fd, st, 2) < 0 || st[1])
			return;
	}
	if (recv_n(c->fd, b, 4) < 0 || b[0] != 5)
		return;
	unsigned char cmd = b[1], atyp = b[3];
	if (atyp == 1) {
		if (recv_n(c->fd, b, 4) < 0)
			return;
		inet_ntop(AF_INET, b, c->domain, sizeof(c->domain));
	} else if (atyp == 4) {
		if (recv_n(c->fd, b, 16) < 0)
			return;
		inet_ntop(AF_INET6, b, c->domain, sizeof(c->domain));
	} else if (atyp == 3) {
		if (recv_n(c->fd, b, 1) < 0 || recv_n(c->fd, c->domain, b[0]) < 0)
			return;
		c->domain[b[0]] = 0;
		for (char *p = c->domain; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	} else {
		socks_reply(c->fd, 8); /* address type not supported */
		return;
	}
	if (recv_n(c->fd, b, 2) < 0)
		return;
	c->port = b[0] << 8 | b[1];
	if (cmd != 1) {
		socks_reply(c->fd, 7); /* only CONNECT */
		c->deny = true;
		snprintf(c->reason, sizeof(c->reason), "only CONNECT is supported");
		return;
	}
	bool deny;
	int up = dial(c->n, c->domain, c->port, c->reason, sizeof(c->reason), &deny);
	if (up < 0) {
		c->deny = deny;
		socks_reply(c->fd, deny ? 2 : strstr(c->reason, "refused") ? 5 : 4);
		return;
	}
	snprintf(c->reason, sizeof(c->reason), "%s", c->n->open ? "open" : "allowed");
	socks_reply(c->fd, 0);
	relay(c->fd, up, &c->up, &c->down);
	close(up);
}

/* --- forwarders ---------------------------------------------------------------------------- */

static void host_port_forward(struct conn *c)
{
	int hp = c->n->fwd_host[c->index];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)hp),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (up < 0)
		return;
	if (connect_timeout(up, (struct sockaddr *)&a, sizeof(a)) == 0)
		relay(c->fd, up, &c->up, &c->down);
	close(up);
}

/* the token of a public preview: header, cookie or (once) the query string */
static int preview_auth(struct conn *c, const struct preview *pv, char *buf, size_t *got,
			ssize_t *ret_hl)
{
	char val[512], method[16], target[4096];
	ssize_t hl = read_head(c->fd, buf, HEAD_MAX + 1, got);

	*ret_hl = hl;
	if (hl < 0)
		return -1;
	if (header_value(buf, "X-Sbx-Preview-Token", val, sizeof(val)) && ct_equal(val, pv->token))
		return 0;
	if (header_value(buf, "Cookie", val, sizeof(val))) {
		char *save = NULL;
		for (char *k = strtok_r(val, ";", &save); k; k = strtok_r(NULL, ";", &save)) {
			while (*k == ' ')
				k++;
			if (strncmp(k, "sbx_preview_token=", 18) == 0 && ct_equal(k + 18, pv->token))
				return 0;
		}
	}
	if (sscanf(buf, "%15s %4095s", method, target) == 2) {
		char *q = strchr(target, '?');
		for (char *p = q; p; p = strchr(p + 1, '&')) {
			char *k = p + 1;
			if (strncmp(k, "sbx_token=", 10) != 0)
				continue;
			char *e = strchr(k, '&');
			_cleanup_free_ char *tok = e ? xstrndup(k + 10, (size_t)(e - k - 10))
						     : xstrdup(k + 10);
			if (!ct_equal(tok, pv->token))
				break;
			/* the same URL without the token, which lives on in a cookie */
			if (e)
				memmove(k, e + 1, strlen(e + 1) + 1);
			else
				*p = 0;
			if (q[0] == '?' && q[1] == 0)
				*q = 0;
			_cleanup_free_ char *hdr = xasprintf(
				"Location: %s\r\nSet-Cookie: sbx_preview_token=%s; HttpOnly; Path=/; "
				"SameSite=Lax\r\n", *target ? target : "/", pv->token);
			http_reply(c->fd, 302, "Found", hdr, "sbx: signed in to this preview\n");
			return 1;
		}
	}
	http_reply(c->fd, 401, "Unauthorized", NULL,
		   "sbx: this preview is public and needs its token: open the URL 'sbx preview' "
		   "printed, or send the header X-Sbx-Preview-Token\n");
	return 1;
}

static void preview_forward(struct conn *c)
{
	struct local_net *n = c->n;
	struct preview pv = n->prev[c->index];
	_cleanup_free_ char *buf = xmalloc(HEAD_MAX + 1);
	size_t got = 0;
	ssize_t hl = 0;

	local_touch_activity(n->s->dir);
	if (pv.public && preview_auth(c, &pv, buf, &got, &hl) != 0)
		return;
	int in = factory_get(n, 'S', 0);
	if (in < 0)
		return;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)pv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect_timeout(in, (struct sockaddr *)&a, sizeof(a)) < 0) {
		_cleanup_free_ char *body = xasprintf("sbx: nothing answers on port %d inside sandbox "
						      "'%s': %s\n", pv.port, n->s->label,
						      strerror(errno));
		http_reply(c->fd, 502, "Bad Gateway", NULL, body);
		close(in);
		return;
	}
	if (got && send_all(in, buf, got) < 0) {
		close(in);
		return;
	}
	relay(c->fd, in, &c->up, &c->down);
	close(in);
	local_touch_activity(n->s->dir);
}

enum { K_HTTP, K_SOCKS, K_FWD, K_PREVIEW };

static void *conn_thread(void *arg)
{
	struct conn *c = arg;

	c->t0 = sbx_now_ms();
	switch (c->kind) {
	case K_HTTP:
		http_proxy(c);
		break;
	case K_SOCKS:
		socks_proxy(c);
		break;
	case K_FWD:
		host_port_forward(c);
		break;
	case K_PREVIEW:
		preview_forward(c);
		break;
	}
	if ((c->kind == K_HTTP || c->kind == K_SOCKS) && c->domain[0])
		log_conn(c);
	close(c->fd);
	free(c->command);
	free(c);
	return NULL;
}

static void spawn(struct local_net *n, int lfd, int kind, int index)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	struct conn *c = xcalloc(1, sizeof(*c));
	c->n = n;
	c->fd = fd;
	c->kind = kind;
	c->index = index;
	pthread_attr_t at;
	pthread_t t;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	if (pthread_create(&t, &at, conn_thread, c) != 0) {
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&at);
}

/* --- previews and the control socket ------------------------------------------------------ */

static char *public_addr(void)
{
	struct ifaddrs *ifs = NULL;
	char a[INET_ADDRSTRLEN] = "127.0.0.1";

	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
			if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			    !(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP)) {
				inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a,
					  sizeof(a));
				break;
			}
		freeifaddrs(ifs);
	}
	return xstrdup(a);
}

static json_t *preview_json(const struct preview *p)
{
	_cleanup_free_ char *addr = p->public ? public_addr() : xstrdup("127.0.0.1");
	_cleanup_free_ char *url = p->public
		? xasprintf("http://%s:%d/?sbx_token=%s", addr, p->host_port, p->token)
		: xasprintf("http://127.0.0.1:%d/", p->host_port);

	return json_pack("{s:s, s:i, s:i, s:b, s:o}", "url", url, "port", p->port, "host_port",
			 p->host_port, "public", p->public,
			 "token", p->public ? json_string(p->token) : json_null());
}

static void previews_save(struct local_net *n)
{
	json_t *a = json_array();
	struct sbx_err err = { 0 };

	for (size_t i = 0; i < n->n_prev; i++)
		json_array_append_new(a, preview_json(&n->prev[i]));
	char *s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	_cleanup_free_ char *p = xasprintf("%s/previews.json", n->s->dir);
	if (s)
		(void)sbx_write_atomic(p, s, strlen(s), false, &err);
	free(s);
}

static int preview_open(struct local_net *n, int port, int host_port, bool public,
			const char *token, char *msg, size_t len)
{
	if (n->n_prev >= MAX_PREVIEWS) {
		snprintf(msg, len, "sandbox '%s' has %d previews open already; close one with 'sbx "
			 "preview --rm'", n->s->label, MAX_PREVIEWS);
		return -1;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)host_port),
				 .sin_addr.s_addr = htonl(public ? INADDR_ANY : INADDR_LOOPBACK) };
	int one = 1;
	socklen_t al = sizeof(a);
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		snprintf(msg, len, "cannot listen on host port %d: %s%s", host_port, strerror(errno),
			 errno == EADDRINUSE ? " (pick another with --host-port, or leave it out)"
					     : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct preview *p = &n->prev[n->n_prev++];
	p->port = port;
	p->host_port = ntohs(a.sin_port);
	p->public = public;
	p->fd = fd;
	if (token && strlen(token) == 32)
		memcpy(p->token, token, 33);
	else
		hex(p->token, 16);
	if (!public)
		p->token[0] = 0;
	return (int)(p - n->prev);
}

static json_t *ctl_handle(struct local_net *n, json_t *req)
{
	const char *op = sbx_json_str(req, "op");
	int port = (int)json_integer_value(json_object_get(req, "port"));
	char msg[300];

	if (!op || port < 1 || port > 65535)
		return json_pack("{s:b, s:s}", "ok", 0, "error", "bad request");
	size_t i;
	for (i = 0; i < n->n_prev && n->prev[i].port != port; i++)
		;
	if (streq(op, "preview-rm")) {
		if (i == n->n_prev) {
			snprintf(msg, sizeof(msg), "sandbox '%s' has no preview of port %d",
				 n->s->label, port);
			return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", msg, "kind",
					 "notfound");
		}
		close(n->prev[i].fd);
		memmove(&n->prev[i], &n->prev[i + 1], (n->n_prev - i - 1) * sizeof(n->prev[0]));
		n->n_prev--;
		previews_save(n);
		return json_pack("{s:b}", "ok", 1);
	}
	int hp = (int)json_integer_value(json_object_get(req, "host_port"));
	bool pub = json_is_true(json_object_get(req, "public"));
	if (i < n->n_prev) {
		struct preview *p = &n->prev[i];
		if ((hp && hp != p->host_port) || (pub && !p->public)) {
			snprintf(msg, sizeof(msg), "port %d of sandbox '%s' has a preview already, on "
				 "host port %d%s; close it first with 'sbx preview --rm %s %d'", port,
				 n->s->label, p->host_port, p->public ? " (public)" : "",
				 n->s->label, port);
			return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", msg, "kind", "conflict");
		}
		return json_pack("{s:b, s:o}", "ok", 1, "preview", preview_json(p));
	}
	int k = preview_open(n, port, hp, pub, NULL, msg, sizeof(msg));
	if (k < 0)
		return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
	previews_save(n);
	return json_pack("{s:b, s:o}", "ok", 1, "preview", preview_json(&n->prev[k]));
}

static void ctl_serve(struct local_net *n)
{
	int fd = accept4(n->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
	char buf[4096];
	size_t got = 0;

	if (fd < 0)
		return;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		if (wait_fd(fd, POLLIN, 2000) < 0)
			break;
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	json_t *req = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	json_t *resp = req ? ctl_handle(n, req) : json_pack("{s:b, s:s}", "ok", 0, "error",
							       "bad request");
	json_decref(req);
	char *s = json_dumps(resp, JSON_COMPACT);
	json_decref(resp);
	if (s) {
		_cleanup_free_ char *line = xasprintf("%s\n", s);
		(void)send_all(fd, line, strlen(line));
		free(s);
	}
	close(fd);
}

/* a unix socket address for DIR/ctl, however long DIR is (through /proc/self/fd) */
static socklen_t ctl_addr(const char *dir, int dirfd, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(dir) + 5 < sizeof(a->sun_path))
		snprintf(a->sun_path, sizeof(a->sun_path), "%s/ctl", dir);
	else
		snprintf(a->sun_path, sizeof(a->sun_path), "/proc/self/fd/%d/ctl", dirfd);
	return (socklen_t)sizeof(*a);
}

/* --- start and loop ------------------------------------------------------------------------ */

struct local_net *local_net_start(const struct local_setup *s, int factory_fd, char *msg,
				  size_t len)
{
	struct local_net *n = xcalloc(1, sizeof(*n));
	const json_t *net = json_object_get(s->options, "net");
	const char *mode = sbx_json_str(net, "mode");
	size_t i;
	json_t *v;

	n->s = s;
	n->factory_fd = factory_fd;
	pthread_mutex_init(&n->factory_lock, NULL);
	pthread_mutex_init(&n->log_lock, NULL);
	n->log_fd = -1;
	n->http_fd = n->socks_fd = n->ctl_fd = -1;
	const char *lm = getenv("SBX_TEST_EGRESS_LOG_MAX");
	n->log_max = lm && atoll(lm) > 0 ? atoll(lm) : LOG_MAX_DEFAULT;
	n->proxy = mode && (streq(mode, "allow") || streq(mode, "open"));
	n->open = mode && streq(mode, "open");
	n->preset = json_is_true(json_object_get(net, "preset"));
	json_t *allow = json_object_get(net, "allow");
	n->allow = xcalloc(json_array_size(allow) + 1, sizeof(char *));
	n->allow_port = xcalloc(json_array_size(allow) + 1, sizeof(int));
	json_array_foreach(allow, i, v) {
		if (json_is_string(v) &&
		    sbx_net_parse_allow(json_string_value(v), &n->allow[n->n_allow],
					&n->allow_port[n->n_allow]) == 0)
			n->n_allow++;
	}
	json_t *hosts = json_object_get(net, "add_hosts");
	n->host_name = xcalloc(json_array_size(hosts) + 1, sizeof(char *));
	n->host_addr = xcalloc(json_array_size(hosts) + 1, sizeof(char *));
	json_array_foreach(hosts, i, v) {
		const char *nm = sbx_json_str(v, "name"), *ad = sbx_json_str(v, "addr");
		if (nm && ad) {
			n->host_name[n->n_hosts] = xstrdup(nm);
			n->host_addr[n->n_hosts++] = xstrdup(ad);
		}
	}
	if (n->proxy) {
		if ((n->http_fd = factory_get(n, 'L', PROXY_HTTP_PORT)) < 0 ||
		    (n->socks_fd = factory_get(n, 'L', PROXY_SOCKS_PORT)) < 0) {
			snprintf(msg, len, "cannot start the egress proxy inside the sandbox: %s",
				 strerror(errno));
			return NULL;
		}
	}
	json_t *fwd = json_object_get(net, "host_ports");
	n->fwd_fd = xcalloc(json_array_size(fwd) + 1, sizeof(int));
	n->fwd_host = xcalloc(json_array_size(fwd) + 1, sizeof(int));
	if (!s->net_host)
		json_array_foreach(fwd, i, v) {
			int hp = (int)json_integer_value(json_object_get(v, "host"));
			int in = (int)json_integer_value(json_object_get(v, "inside"));
			int fd = factory_get(n, 'L', in);
			if (fd < 0) {
				snprintf(msg, len, "cannot listen on port %d inside the sandbox for "
					 "--host-port %d:%d: %s", in, hp, in, strerror(errno));
				return NULL;
			}
			n->fwd_fd[n->n_fwd] = fd;
			n->fwd_host[n->n_fwd++] = hp;
		}
	/* the control socket, for sbx preview */
	_cleanup_close_ int dfd = open(s->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = ctl_addr(s->dir, dfd, &a);
	_cleanup_free_ char *ctlp = xasprintf("%s/ctl", s->dir);
	(void)unlink(ctlp);
	n->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (n->ctl_fd < 0 || bind(n->ctl_fd, (struct sockaddr *)&a, al) < 0 ||
	    listen(n->ctl_fd, 16) < 0) {
		snprintf(msg, len, "cannot create the control socket '%s': %s", ctlp,
			 strerror(errno));
		return NULL;
	}
	/* previews from before a release or a stop come back, on the same host ports */
	_cleanup_free_ char *pp = xasprintf("%s/previews.json", s->dir);
	_cleanup_free_ char *text = sbx_read_file(pp, 1 << 20, NULL);
	json_t *old = text ? json_loads(text, 0, NULL) : NULL;
	json_array_foreach(old, i, v) {
		char m[300];
		int port = (int)json_integer_value(json_object_get(v, "port"));
		if (port > 0 && port < 65536)
			(void)preview_open(n, port, (int)json_integer_value(json_object_get(v, "host_port")),
					   json_is_true(json_object_get(v, "public")),
					   sbx_json_str(v, "token"), m, sizeof(m));
	}
	json_decref(old);
	if (text)
		previews_save(n);
	return n;
}

int local_net_wait(struct local_net *n, int pidfd, long long timeout_ms)
{
	long long deadline = timeout_ms >= 0 ? sbx_now_ms() + timeout_ms : -1;

	for (;;) {
		struct pollfd p[4 + MAX_PREVIEWS + 64];
		int kind[ARRAY_SIZE(p)], index[ARRAY_SIZE(p)];
		nfds_t np = 0;
#define ADD(fd_, k_, i_)                                                       \
	do {                                                                   \
		if ((fd_) >= 0 && np < ARRAY_SIZE(p)) {                        \
			kind[np] = (k_);                                       \
			index[np] = (i_);                                      \
			p[np++] = (struct pollfd){ .fd = (fd_), .events = POLLIN }; \
		}                                                              \
	} while (0)
		ADD(pidfd, -1, 0);
		ADD(n->ctl_fd, -2, 0);
		ADD(n->http_fd, K_HTTP, 0);
		ADD(n->socks_fd, K_SOCKS, 0);
		for (size_t i = 0; i < n->n_fwd; i++)
			ADD(n->fwd_fd[i], K_FWD, (int)i);
		for (size_t i = 0; i < n->n_prev; i++)
			ADD(n->prev[i].fd, K_PREVIEW, (int)i);
#undef ADD
		long long left = deadline < 0 ? -1 : deadline - sbx_now_ms();
		if (deadline >= 0 && left <= 0)
			return 0;
		int r = poll(p, np, left < 0 ? -1 : left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 1; /* cannot wait: treat as the end, the caller reaps */
		for (nfds_t i = 0; i < np; i++) {
			if (!p[i].revents)
				continue;
			if (kind[i] == -1)
				return 1;
			if (kind[i] == -2)
				ctl_serve(n);
			else
				spawn(n, p[i].fd, kind[i], index[i]);
		}
	}
}

/* --- the CLI's side ------------------------------------------------------------------------ */

char *local_egress_log_path(const struct sbx_record *rec)
{
	return log_path(rec->dir, "");
}

static bool proxied(const struct sbx_record *rec)
{
	const char *mode = sbx_json_str(json_object_get(rec->options, "net"), "mode");

	return mode && (streq(mode, "allow") || streq(mode, "open"));
}

void local_net_exec_env(const struct sbx_record *rec, char *const *argv,
			void (*set)(void *, const char *), void *env)
{
	char id[13], secret[33];
	char kv[160];

	hex(id, 6);
	snprintf(kv, sizeof(kv), "SBX_EXEC_ID=%s", id);
	set(env, kv);
	if (!proxied(rec))
		return;
	hex(secret, 16);
	/* the credential, for the supervisor to check and to name the exec in the log */
	json_t *a = json_array();
	for (char *const *p = argv; p && *p; p++)
		json_array_append_new(a, json_stringn_nocheck(*p, strlen(*p)));
	char *s = json_dumps(a, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(a);
	_cleanup_free_ char *line = xasprintf("%s %s %s\n", id, secret, s ? s : "[]");
	free(s);
	_cleanup_free_ char *p = xasprintf("%s/execs", rec->dir);
	int fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		struct stat st;
		(void)flock(fd, LOCK_EX);
		if (fstat(fd, &st) == 0 && st.st_size > EXECS_MAX) {
			_cleanup_free_ char *old = xasprintf("%s/execs.1", rec->dir);
			(void)rename(p, old);
			close(fd);
			fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
			if (fd >= 0)
				(void)flock(fd, LOCK_EX);
		}
		if (fd >= 0) {
			(void)sbx_write_all(fd, line, strlen(line));
			close(fd);
		}
	}
	static const char *const http[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					    "https_proxy" };
	for (size_t i = 0; i < ARRAY_SIZE(http); i++) {
		snprintf(kv, sizeof(kv), "%s=http://%s:%s@127.0.0.1:%d", http[i], id, secret,
			 PROXY_HTTP_PORT);
		set(env, kv);
	}
	snprintf(kv, sizeof(kv), "ALL_PROXY=socks5h://%s:%s@127.0.0.1:%d", id, secret,
		 PROXY_SOCKS_PORT);
	set(env, kv);
	snprintf(kv, sizeof(kv), "all_proxy=socks5h://%s:%s@127.0.0.1:%d", id, secret,
		 PROXY_SOCKS_PORT);
	set(env, kv);
	set(env, "NO_PROXY=localhost,127.0.0.1");
	set(env, "no_proxy=localhost,127.0.0.1");
	set(env, "NODE_USE_ENV_PROXY=1");
}

static json_t *previews_read(const struct sbx_record *rec)
{
	_cleanup_free_ char *p = xasprintf("%s/previews.json", rec->dir);
	_cleanup_free_ char *text = sbx_read_file(p, 1 << 20, NULL);
	json_t *a = text ? json_loads(text, 0, NULL) : NULL;

	if (!json_is_array(a)) {
		json_decref(a);
		a = json_array();
	}
	return a;
}

int local_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		  const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;

	(void)ctx;
	if (o->port == 0) {
		*ret = previews_read(rec);
		return 0;
	}
	if (rec->state != SBX_STATE_RUNNING && rec->state != SBX_STATE_PAUSED)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; run 'sbx resume %s'",
				   label, sbx_state_name(rec->state), label);
	local_touch_activity(rec->dir);
	_cleanup_close_ int dfd = open(rec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = ctl_addr(rec->dir, dfd, &a);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, al) < 0)
		return sbx_err_errno(err, "cannot reach the supervisor of sandbox '%s' (run 'sbx "
				     "resume %s' if it was stopped)", label, label);
	json_t *req = json_pack("{s:s, s:i, s:i, s:b}", "op", o->rm ? "preview-rm" : "preview",
				"port", o->port, "host_port", o->host_port, "public", o->public);
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	_cleanup_free_ char *line = xasprintf("%s\n", s);
	free(s);
	if (send_all(fd, line, strlen(line)) < 0)
		return sbx_err_errno(err, "cannot talk to the supervisor of sandbox '%s'", label);
	char buf[4096];
	size_t got = 0;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		if (wait_fd(fd, POLLIN, 10000) < 0)
			return sbx_err_errno(err, "the supervisor of sandbox '%s' did not answer",
					     label);
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	_cleanup_json_ json_t *resp = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (!resp)
		return sbx_err_set(err, SBX_E_SYSTEM, "the supervisor of sandbox '%s' gave no "
				   "answer", label);
	if (!json_is_true(json_object_get(resp, "ok"))) {
		const char *kind = sbx_json_str(resp, "kind");
		return sbx_err_set(err, kind && streq(kind, "notfound") ? SBX_E_NOTFOUND
					: kind && streq(kind, "conflict") ? SBX_E_STATE : SBX_E_SYSTEM,
				   "%s", sbx_json_str(resp, "error") ?: "the preview failed");
	}
	json_t *p = json_object_get(resp, "preview");
	*ret = p ? json_incref(p) : json_null();
	return 0;
}
