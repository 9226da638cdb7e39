/* --net-rate in the supervisor: token buckets of requests (over the limit, a request is
 * answered 429) and of bytes, for the whole sandbox and for the domains a limit names. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <pthread.h>
#include <time.h>

#include "core/net.h"

struct bucket {
	struct sbx_net_rate r; /* r.pattern owned */
	double tokens;	       /* requests */
	long long t;	       /* when tokens was right (monotonic ms) */
	double bytes[2];       /* bytes, up and down */
	long long bt[2];
};

#define BYTES_MIN 4096 /* a throttled relay moves at least so much at once */

/* the loop and the threads of connections with secrets (net-tls.c) share it */
struct local_rate {
	pthread_mutex_t mu;
	struct bucket *b;
	size_t n;
};

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct local_rate *local_rate_new(const struct sbx_net_config *n)
{
	struct local_rate *r = xcalloc(1, sizeof(*r));

	pthread_mutex_init(&r->mu, NULL);
	local_rate_set(r, n);
	return r;
}

void local_rate_set(struct local_rate *r, const struct sbx_net_config *n)
{
	struct bucket *b = xcalloc(n->n_rates + 1, sizeof(*b));
	long long now = mono_ms();

	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < n->n_rates; i++) {
		b[i].r = n->rates[i];
		b[i].r.pattern = n->rates[i].pattern ? xstrdup(n->rates[i].pattern) : NULL;
		b[i].tokens = (double)b[i].r.reqs; /* a full bucket: the limit is a burst too */
		b[i].t = b[i].bt[0] = b[i].bt[1] = now;
		b[i].bytes[0] = b[i].bytes[1] = (double)b[i].r.bytes;
		/* a limit that stays keeps what it had used */
		for (size_t k = 0; k < r->n; k++) {
			const char *p = r->b[k].r.pattern, *q = b[i].r.pattern;
			if ((p == q || (p && q && streq(p, q))) && r->b[k].tokens < b[i].tokens) {
				b[i].tokens = r->b[k].tokens;
				b[i].t = r->b[k].t;
			}
		}
	}
	for (size_t k = 0; k < r->n; k++)
		free(r->b[k].r.pattern);
	free(r->b);
	r->b = b;
	r->n = n->n_rates;
	pthread_mutex_unlock(&r->mu);
}

static void refill(struct bucket *b, long long now)
{
	if (!b->r.reqs || now <= b->t)
		return;
	b->tokens += (double)(now - b->t) * (double)b->r.reqs / (double)(b->r.per_s * 1000);
	if (b->tokens > (double)b->r.reqs)
		b->tokens = (double)b->r.reqs;
	b->t = now;
}

/* the limit of the whole sandbox, and the first one naming host */
static void buckets_of(struct local_rate *r, const char *host, struct bucket **all,
		       struct bucket **dom)
{
	*all = *dom = NULL;
	for (size_t i = 0; i < r->n; i++) {
		if (!r->b[i].r.pattern && !*all)
			*all = &r->b[i];
		else if (r->b[i].r.pattern && !*dom && sbx_net_match(r->b[i].r.pattern, host))
			*dom = &r->b[i];
	}
}

static int rate_request(struct local_rate *r, const char *host, const char *label, char *reason,
			size_t rlen);

int local_rate_request(struct local_rate *r, const char *host, const char *label, char *reason,
		       size_t rlen)
{
	pthread_mutex_lock(&r->mu);
	int ret = rate_request(r, host, label, reason, rlen);
	pthread_mutex_unlock(&r->mu);
	return ret;
}

static int rate_request(struct local_rate *r, const char *host, const char *label, char *reason,
			size_t rlen)
{
	struct bucket *all, *dom, *over = NULL;
	long long now = mono_ms();

	buckets_of(r, host, &all, &dom);
	if (all && all->r.reqs) {
		refill(all, now);
		if (all->tokens < 1)
			over = all;
	}
	if (!over && dom && dom->r.reqs) {
		refill(dom, now);
		if (dom->tokens < 1)
			over = dom;
	}
	if (!over) {
		if (all && all->r.reqs)
			all->tokens -= 1;
		if (dom && dom->r.reqs)
			dom->tokens -= 1;
		return 0;
	}
	char unit = over->r.per_s == 1 ? 's' : over->r.per_s == 60 ? 'm' : 'h';
	const char *p = over->r.pattern;
	snprintf(reason, rlen,
		 "over the rate limit of sandbox '%s', %lldr/%c%s%s (raise it: sbx update %s "
		 "--net-rate %s%s%lldr/%c)",
		 label, over->r.reqs, unit, p ? " for " : "", p ? p : "", label, p ? p : "",
		 p ? "=" : "", over->r.reqs * 2, unit);
	return -1;
}

static void refill_bytes(struct bucket *b, int d, long long now)
{
	if (now <= b->bt[d])
		return;
	b->bytes[d] += (double)(now - b->bt[d]) * (double)b->r.bytes / 1000.0;
	if (b->bytes[d] > (double)b->r.bytes)
		b->bytes[d] = (double)b->r.bytes;
	b->bt[d] = now;
}

/* how many of want bytes b lets through now (want when it has no byte limit); else the ms
 * until it lets some through into *wait */
static size_t bytes_room(struct bucket *b, int d, size_t want, long long now, long long *wait)
{
	if (!b || !b->r.bytes)
		return want;
	refill_bytes(b, d, now);
	double need = (double)(want < BYTES_MIN ? want : BYTES_MIN);
	if (need > (double)b->r.bytes)
		need = (double)b->r.bytes;
	if (b->bytes[d] >= need)
		return b->bytes[d] >= (double)want ? want : (size_t)b->bytes[d];
	long long w = (long long)((need - b->bytes[d]) * 1000.0 / (double)b->r.bytes) + 1;
	if (w > *wait)
		*wait = w;
	return 0;
}

size_t local_rate_room(struct local_conn *c, int d, size_t want)
{
	struct local_rate *r = c->n->rate;
	struct bucket *all, *dom;
	long long wait = 0;

	if (!want || !r || !r->n || (c->kind != LOCAL_K_HTTP && c->kind != LOCAL_K_SOCKS))
		return want;
	pthread_mutex_lock(&r->mu);
	buckets_of(r, c->host, &all, &dom);
	size_t room = bytes_room(all, d, want, c->n->now, &wait);
	room = bytes_room(dom, d, room, c->n->now, &wait);
	pthread_mutex_unlock(&r->mu);
	if (room == 0 && c->throttle_until <= c->n->now) {
		c->throttle_until = c->n->now + wait;
		c->throttled_ms += wait;
	}
	return room;
}

void local_rate_spent(struct local_conn *c, int d, size_t bytes)
{
	struct local_rate *r = c->n->rate;
	struct bucket *b[2];

	if (!r || !r->n || (c->kind != LOCAL_K_HTTP && c->kind != LOCAL_K_SOCKS))
		return;
	pthread_mutex_lock(&r->mu);
	buckets_of(r, c->host, &b[0], &b[1]);
	for (int i = 0; i < 2; i++)
		if (b[i] && b[i]->r.bytes)
			b[i]->bytes[d] -= (double)bytes;
	pthread_mutex_unlock(&r->mu);
}

long long local_rate_take(struct local_rate *r, const char *host, int d, size_t bytes)
{
	long long waited = 0;

	while (r && bytes) {
		struct bucket *all, *dom;
		long long wait = 0;
		pthread_mutex_lock(&r->mu);
		if (!r->n) {
			pthread_mutex_unlock(&r->mu);
			break;
		}
		long long now = mono_ms();
		buckets_of(r, host, &all, &dom);
		size_t room = bytes_room(all, d, bytes, now, &wait);
		room = bytes_room(dom, d, room, now, &wait);
		struct bucket *both[2] = { all, dom };
		for (int i = 0; i < 2; i++)
			if (both[i] && both[i]->r.bytes)
				both[i]->bytes[d] -= (double)room;
		pthread_mutex_unlock(&r->mu);
		bytes -= room;
		if (bytes && !room) {
			/* a second at most, then the limits are read again (sbx update) */
			long long ms = wait < 1 ? 1 : wait > 1000 ? 1000 : wait;
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
			nanosleep(&ts, NULL);
			waited += ms;
		}
	}
	return waited;
}

void local_rate_free(struct local_rate *r)
{
	if (!r)
		return;
	for (size_t k = 0; k < r->n; k++)
		free(r->b[k].r.pattern);
	free(r->b);
	pthread_mutex_destroy(&r->mu);
	free(r);
}
