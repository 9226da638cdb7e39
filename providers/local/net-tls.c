/* The supervisor's side of --secret: the secrets of the sandbox (its state directory's
 * secrets/, read at start and again on a control request), and the connections to their hosts,
 * whose TLS the proxy ends. Each such connection runs in a thread of its own (at most
 * LOCAL_TLS_MAX), with blocking work bounded by deadlines: the sandbox's handshake with a leaf
 * of the sandbox's CA, the upstream's verified against the host's trust store, then the
 * requests (net-inject.c) with their placeholders replaced and the bytes relayed. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include "core/json.h"
#include "core/log.h"
#include "providers/local/tls.h"

#define LOCAL_TLS_MAX 32	    /* connections whose TLS is ended at once */
#define HANDSHAKE_MS 10000	    /* each TLS handshake */
#define WRITE_MS 30000		    /* a write that cannot go on */
#define IDLE_MS (5 * 60 * 1000)	    /* nothing either way */
#define BUF_UP (LOCAL_HEAD_MAX * 2) /* the sandbox's bytes not yet sent on */
#define BUF_DOWN (256 * 1024)	    /* the server's bytes, read as far as they came, then sent */

struct local_secrets {
	struct local_secret *s;
	size_t n;
	struct local_tls *tls;
};

static atomic_int running;
/* the bytes the connections with secrets moved, each direction (sbx stats) */
static atomic_llong moved_up, moved_down;

void local_tls_moved(long long *up, long long *down)
{
	*up = atomic_load(&moved_up);
	*down = atomic_load(&moved_down);
}

static void secrets_free(struct local_secret *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(s[i].name);
		free(s[i].placeholder);
		if (s[i].value)
			explicit_bzero(s[i].value, strlen(s[i].value));
		free(s[i].value);
		sbx_strv_free(s[i].hosts);
	}
	free(s);
}

/* secrets/values.json: [{"name", "placeholder", "value", "hosts"}] */
static int values_read(const char *dir, struct local_secret **ret, size_t *ret_n, char *msg,
		       size_t len)
{
	_cleanup_free_ char *p = xasprintf("%s/secrets/values.json", dir);
	size_t tl = 0;
	char *text = sbx_read_file(p, 1 << 20, &tl);
	json_t *a = text ? json_loads(text, 0, NULL) : NULL;
	size_t i;
	json_t *v;

	if (text)
		explicit_bzero(text, tl);
	free(text);
	*ret = NULL;
	*ret_n = 0;
	if (!json_is_array(a)) {
		json_decref(a);
		snprintf(msg, len, "cannot read the sandbox's secrets '%s'", p);
		return -1;
	}
	struct local_secret *s = xcalloc(json_array_size(a) + 1, sizeof(*s));
	size_t n = 0;
	json_array_foreach (a, i, v) {
		const char *name = sbx_json_str(v, "name"), *ph = sbx_json_str(v, "placeholder");
		const char *val = sbx_json_str(v, "value");
		char **hosts = sbx_json_strv(json_object_get(v, "hosts"));
		if (!name || !ph || strlen(ph) < 16 || !val || !*val || !hosts || !hosts[0] ||
		    n == LOCAL_INJECT_MAX) {
			sbx_strv_free(hosts);
			continue;
		}
		s[n++] = (struct local_secret){ xstrdup(name), xstrdup(ph), xstrdup(val), hosts };
	}
	/* the value's copies in jansson's strings */
	json_array_foreach (a, i, v) {
		json_t *val = json_object_get(v, "value");
		if (json_is_string(val))
			explicit_bzero((char *)json_string_value(val), json_string_length(val));
	}
	json_decref(a);
	*ret = s;
	*ret_n = n;
	return 0;
}

int local_secrets_load(struct local_net *n, char *msg, size_t len)
{
	_cleanup_free_ char *d = xasprintf("%s/secrets", n->s->dir);
	struct sbx_err err = { 0 };

	if (access(d, F_OK) < 0)
		return 0; /* no secrets: OpenSSL is never loaded */
	struct local_secrets *sc = n->secrets ? n->secrets : xcalloc(1, sizeof(*sc));
	struct local_secret *s;
	size_t k;
	if (values_read(n->s->dir, &s, &k, msg, len) < 0)
		return -1;
	if (!sc->tls) {
		_cleanup_free_ char *cp = xasprintf("%s/ca.crt", d),
				    *kp = xasprintf("%s/ca.key", d);
		_cleanup_free_ char *cert = sbx_read_file(cp, 1 << 16, NULL);
		size_t kl = 0;
		char *key = sbx_read_file(kp, 1 << 16, &kl);
		sc->tls = cert && key ? local_tls_new(cert, key, &err) : NULL;
		if (key)
			explicit_bzero(key, kl);
		free(key);
		if (!sc->tls) {
			secrets_free(s, k);
			snprintf(msg, len, "cannot load the sandbox's CA from '%s': %s", d,
				 err.msg[0] ? err.msg : strerror(errno));
			return -1;
		}
	}
	secrets_free(sc->s, sc->n);
	sc->s = s;
	sc->n = k;
	n->secrets = sc;
	return 0;
}

bool local_tls_intercepts(struct local_net *n, const char *host)
{
	if (!n->secrets)
		return false;
	for (size_t i = 0; i < n->secrets->n; i++)
		if (local_secret_host(&n->secrets->s[i], host))
			return true;
	return false;
}

const char *local_secret_in(struct local_net *n, const char *buf, size_t len)
{
	for (size_t i = 0; n->secrets && i < n->secrets->n; i++)
		if (memmem(buf, len, n->secrets->s[i].placeholder,
			   strlen(n->secrets->s[i].placeholder)))
			return n->secrets->s[i].name;
	return NULL;
}

/* --- one connection ------------------------------------------------------------------------ */

struct job {
	int cfd, ufd;
	char host[LOCAL_HOST_MAX + 1];
	int port;
	char exec[13];
	char *command;
	char *out; /* the proxy's answer to CONNECT or SOCKS, still to send */
	size_t out_len;
	struct local_secret *s; /* a copy: sbx update may change the loop's meanwhile */
	size_t n;
	struct local_tls *tls;
	struct local_egress *eg;
	struct local_rate *rate; /* --net-rate's (the loop's, shared under its lock) */
	char *label;		 /* the sandbox's, for a refusal over a rate limit */
	long long t0, up, down;
	long long throttled; /* ms held back by --net-rate's byte limits */
	char reason[400];
	bool deny;
};

static void job_log(struct job *j, const char *proto, bool deny, const char *reason,
		    const char **names, size_t nn, long long t0)
{
	struct local_egress_entry x = {
		.t0 = t0,
		.exec = j->exec,
		.command = j->command,
		.proto = proto,
		.domain = j->host,
		.domain_len = strlen(j->host),
		.port = j->port,
		.deny = deny,
		.reason = reason,
		.up = deny || streq(proto, "https") ? 0 : j->up, /* a request's: no bytes */
		.down = deny || streq(proto, "https") ? 0 : j->down,
		.throttled_ms = streq(proto, "https") ? 0 : j->throttled,
		.secrets = names,
		.n_secrets = nn,
	};
	local_egress_log(j->eg, &x);
}

/* sends all of buf to a plain socket (the proxy's answer before TLS) */
static int plain_send(int fd, const char *buf, size_t len)
{
	long long deadline = sbx_now_ms() + WRITE_MS;

	while (len) {
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		long long left = deadline - sbx_now_ms();
		if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
			return -1;
	}
	return 0;
}

/* an answer of the proxy's own on the sandbox's TLS session, which then ends */
static void tls_answer(struct local_tls_conn *cl, int code, const char *status, const char *why)
{
	_cleanup_free_ char *body = xasprintf("sbx: %s\n", why);
	_cleanup_free_ char *a = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
					   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
					   code, status, strlen(body), body);
	(void)local_tls_write(cl, a, strlen(a), WRITE_MS);
}

/* n bytes about to go up (d 0) or down (1): counted, and let through by --net-rate's byte
 * limits (waiting for them) */
static void sent(struct job *j, int d, size_t n)
{
	if (j->rate)
		j->throttled += local_rate_take(j->rate, j->host, d, n);
	atomic_fetch_add(d ? &moved_down : &moved_up, (long long)n);
}

/* the sandbox's requests, until either side ends; false when one was refused */
static void relay(struct job *j, struct local_tls_conn *cl, struct local_tls_conn *up)
{
	char *ub = xmalloc(BUF_UP), *db = xmalloc(BUF_DOWN);
	size_t ul = 0;
	int requests = 0;
	bool in_body = false;
	struct local_body body = { 0 };
	long long last = sbx_now_ms();

	for (;;) {
		/* what the sandbox sent: heads checked and rewritten, bodies as they are */
		for (;;) {
			if (in_body) {
				long long k = local_body_scan(&body, ub, ul);
				if (k < 0) {
					tls_answer(cl, 400, "Bad Request",
						   "a malformed chunked body");
					goto end;
				}
				if (k > 0 &&
				    (sent(j, 0, (size_t)k),
				     local_tls_write(up, ub, (size_t)k, WRITE_MS) < 0))
					goto end;
				j->up += k;
				memmove(ub, ub + k, ul - (size_t)k);
				ul -= (size_t)k;
				if (!body.done)
					break;
				in_body = false;
			}
			if (ul == 0)
				break;
			struct local_inject x;
			int r = local_inject_request(ub, ul, j->host, j->s, j->n, &x);
			if (r == LOCAL_INJECT_MORE)
				break;
			if (r == LOCAL_INJECT_REFUSE) {
				const char *name = x.exfil >= 0 ? j->s[x.exfil].name : NULL;
				tls_answer(cl, x.code, x.status, x.why);
				job_log(j, "https", true, x.why, name ? &name : NULL, name ? 1 : 0,
					sbx_now_ms());
				goto end;
			}
			/* each request after the connection's first counts against --net-rate's
			 * request limits (the CONNECT counted for the first) */
			char over[400];
			if (j->rate && requests++ > 0 &&
			    local_rate_request(j->rate, j->host, j->label, over, sizeof(over)) <
				    0) {
				free(x.head);
				tls_answer(cl, 429, "Too Many Requests", over);
				job_log(j, "https", true, over, NULL, 0, sbx_now_ms());
				goto end;
			}
			const char *names[LOCAL_INJECT_MAX];
			size_t nn = 0;
			for (size_t i = 0; i < j->n && i < 64; i++)
				if (x.injected & (1ull << i))
					names[nn++] = j->s[i].name;
			sent(j, 0, x.head_len);
			int w = local_tls_write(up, x.head, x.head_len, WRITE_MS);
			free(x.head);
			if (w < 0)
				goto end;
			if (nn) {
				_cleanup_free_ char *why = xasprintf(
					"secret%s injected over TLS ended by the proxy",
					nn > 1 ? "s" : "");
				job_log(j, "https", false, why, names, nn, sbx_now_ms());
			}
			j->up += (long long)x.consumed;
			memmove(ub, ub + x.consumed, ul - x.consumed);
			ul -= x.consumed;
			body = x.body;
			in_body = !body.done;
		}
		struct pollfd p[2] = { { .fd = j->cfd, .events = ul < BUF_UP ? POLLIN : 0 },
				       { .fd = j->ufd, .events = POLLIN } };
		bool pend = (ul < BUF_UP && local_tls_pending(cl)) || local_tls_pending(up);
		long long left = last + IDLE_MS - sbx_now_ms();
		if (left <= 0)
			goto end;
		int r = poll(p, 2, pend ? 0 : (int)left);
		if (r < 0 && errno != EINTR)
			goto end;
		if (ul < BUF_UP && (pend || (p[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
			long got = local_tls_read(cl, ub + ul, BUF_UP - ul);
			if (got == 0 || got == -1)
				goto end;
			if (got > 0) {
				ul += (size_t)got;
				last = sbx_now_ms();
			}
		}
		if (pend || (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			/* as many records as are there (a record is at most 16 KiB), then one write */
			size_t dl = 0;
			long got;
			while (dl < BUF_DOWN &&
			       (got = local_tls_read(up, db + dl, BUF_DOWN - dl)) > 0)
				dl += (size_t)got;
			if (dl && (sent(j, 1, dl), local_tls_write(cl, db, dl, WRITE_MS) < 0))
				goto end;
			j->down += (long long)dl;
			if (dl)
				last = sbx_now_ms();
			if (got == 0 || got == -1)
				goto end;
		}
	}
end:
	free(ub);
	free(db);
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	struct local_tls_conn *cl = NULL, *up = NULL;
	char why[400] = "";

	if (plain_send(j->cfd, j->out, j->out_len) < 0)
		goto end;
	cl = local_tls_accept(j->tls, j->cfd, j->host, HANDSHAKE_MS, why, sizeof(why));
	if (!cl) {
		j->deny = true;
		snprintf(j->reason, sizeof(j->reason), "%s", why);
		goto end;
	}
	up = local_tls_connect(j->tls, j->ufd, j->host, HANDSHAKE_MS, why, sizeof(why));
	if (!up) {
		j->deny = true;
		snprintf(j->reason, sizeof(j->reason), "%s", why);
		tls_answer(cl, 502, "Bad Gateway", why);
		goto end;
	}
	relay(j, cl, up);
end:
	job_log(j, "connect", j->deny, j->reason, NULL, 0, j->t0);
	local_tls_close(up);
	local_tls_close(cl);
	close(j->cfd);
	close(j->ufd);
	secrets_free(j->s, j->n);
	free(j->command);
	free(j->label);
	free(j->out);
	free(j);
	atomic_fetch_sub(&running, 1);
	return NULL;
}

void local_tls_start(struct local_conn *c)
{
	struct local_net *n = c->n;
	struct local_secrets *sc = n->secrets;

	if (c->pre_len > c->pre_off) {
		snprintf(c->reason, sizeof(c->reason),
			 "bytes sent before the proxy answered, on a connection that carries "
			 "secrets");
		local_proxy_fail(c, LOCAL_F_DENY);
		return;
	}
	if (atomic_fetch_add(&running, 1) >= LOCAL_TLS_MAX) {
		atomic_fetch_sub(&running, 1);
		snprintf(c->reason, sizeof(c->reason),
			 "too many connections with secrets at once (at most %d)", LOCAL_TLS_MAX);
		local_proxy_fail(c, LOCAL_F_FAIL);
		return;
	}
	struct job *j = xcalloc(1, sizeof(*j));
	memcpy(j->host, c->host, c->host_len + 1);
	j->port = c->port;
	memcpy(j->exec, c->exec, sizeof(j->exec));
	j->command = c->command ? xstrdup(c->command) : NULL;
	j->out = xmalloc(c->out_len - c->out_off + 1);
	j->out_len = c->out_len - c->out_off;
	memcpy(j->out, c->out + c->out_off, j->out_len);
	j->s = xcalloc(sc->n + 1, sizeof(*j->s));
	for (size_t i = 0; i < sc->n; i++) {
		j->s[i].name = xstrdup(sc->s[i].name);
		j->s[i].placeholder = xstrdup(sc->s[i].placeholder);
		j->s[i].value = xstrdup(sc->s[i].value);
		size_t k = 0;
		while (sc->s[i].hosts[k])
			k++;
		j->s[i].hosts = xcalloc(k + 1, sizeof(char *));
		for (size_t h = 0; h < k; h++)
			j->s[i].hosts[h] = xstrdup(sc->s[i].hosts[h]);
	}
	j->n = sc->n;
	j->tls = sc->tls;
	j->eg = n->eg;
	j->rate = n->rate;
	j->label = xstrdup(n->s->label);
	j->t0 = c->t0;
	snprintf(j->reason, sizeof(j->reason), "allowed; TLS ended by the proxy for its secrets");
	/* the thread owns the two sockets from now on */
	(void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	(void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, c->up, NULL);
	j->cfd = c->fd;
	j->ufd = c->up;
	c->fd = c->up = -1;
	c->logged = true; /* the thread logs it */
	pthread_attr_t at;
	pthread_t tid;
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 512 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signal */
	int e = pthread_create(&tid, &at, job_run, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (e) {
		sbx_debug("cannot start a thread for a connection with secrets: %s", strerror(e));
		close(j->cfd);
		close(j->ufd);
		secrets_free(j->s, j->n);
		free(j->command);
		free(j->label);
		free(j->out);
		free(j);
		atomic_fetch_sub(&running, 1);
	}
	local_conn_close(c);
}
