/* The supervisor's resolver: a cache of answers, kept for their DNS TTL (clamped to
 * TTL_MIN_S..TTL_MAX_S; a name that does not exist for NEG_TTL_S), one lookup at a time per
 * name however many connections wait for it, and at most RESOLVER_THREADS threads doing the
 * blocking part (made when a lookup waits, gone after RESOLVER_IDLE_MS without one).
 *
 * A thread asks the nameservers of /etc/resolv.conf with res_nsearch (the search list as
 * getaddrinfo applies it) for A records, and AAAA only for a name with no A record: the TTLs
 * come with the answer. A temporary failure (SERVFAIL, a timeout, a dropped burst) is asked
 * again, after a pause that doubles, before the lookup fails. A name in /etc/hosts, or any
 * name when no nameserver is configured, goes to getaddrinfo and is kept for GAI_TTL_S.
 * res_nsearch, dn_skipname and the resolver state are glibc's libc itself (2.34 on): no
 * library is linked or loaded for them, so the binary's start-up pays nothing.
 *
 * The cache and the waiting connections belong to the event loop's thread alone; the threads
 * share only the queue of names to look up and the list of names looked up (under lock). */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <resolv.h>
#include <signal.h>
#include <stdio.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <time.h>

#define RESOLVER_THREADS 4
#define RESOLVER_IDLE_MS 3000
#define RESOLVER_STACK (256 * 1024)
#define TTL_MIN_S 1 /* a TTL of 0 still answers a burst of connections once */
#define TTL_MAX_S 600
#define NEG_TTL_S 5
#define GAI_TTL_S 30
#define TRIES 4		/* DNS attempts, one query each, on a temporary failure */
#define BACKOFF_MS 200	/* before the second attempt; doubled before the next */
#define CACHE_MAX 512	/* names kept */
#define ANSWER_MAX 4096 /* a DNS answer */

enum {
	E_PENDING, /* queued or being looked up */
	E_OK,
	E_NEG /* an error, kept until it expires (0: not kept) */
};

struct rentry {
	char host[LOCAL_HOST_MAX + 1];
	int state, gai;
	size_t n;
	struct sockaddr_storage addr[LOCAL_RESOLVE_MAX]; /* port 0 */
	long long expires, used;			 /* the loop's clock, ms */
	unsigned ttl_s;					 /* the thread's answer */
	struct local_resolve *waiters;			 /* the loop's */
	struct rentry *next, *qnext;
};

struct local_resolver {
	struct rentry *cache; /* the loop's */
	size_t n_cache;
	struct local_resolve *done, **done_tail; /* the loop's: answered, not yet taken */
	/* under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rentry *queue, **queue_tail, *finished;
	int threads, idle;
	int efd;
};

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct local_resolver *local_resolver_new(bool on)
{
	struct local_resolver *rs = xcalloc(1, sizeof(*rs));
	pthread_condattr_t ca;

	pthread_mutex_init(&rs->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rs->cond, &ca);
	pthread_condattr_destroy(&ca);
	rs->queue_tail = &rs->queue;
	rs->done_tail = &rs->done;
	rs->efd = on ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
	return rs;
}

int local_resolver_fd(const struct local_resolver *rs)
{
	return rs->efd;
}

/* --- a thread's lookup --------------------------------------------------------------------- */

/* whether the file at path has a line whose first word is word, or (word NULL) one naming host
 * after its address */
static bool file_has(const char *path, const char *word, const char *host)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *save = NULL, *w = strtok_r(line, " \t\r\n", &save);
		if (!w || w[0] == '#')
			continue;
		if (word) {
			found = streq(w, word);
			continue;
		}
		while (!found && (w = strtok_r(NULL, " \t\r\n", &save)) && w[0] != '#')
			found = strcasecmp(w, host) == 0;
	}
	fclose(f);
	return found;
}

static void gai_lookup(struct rentry *x)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;

	x->n = 0;
	x->gai = getaddrinfo(x->host, NULL, &hints, &res);
	for (struct addrinfo *ai = res; ai && x->n < LOCAL_RESOLVE_MAX; ai = ai->ai_next)
		if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
		    ai->ai_addrlen <= sizeof(x->addr[0]))
			memcpy(&x->addr[x->n++], ai->ai_addr, ai->ai_addrlen);
	if (res)
		freeaddrinfo(res);
	if (x->gai == 0 && x->n == 0)
		x->gai = EAI_NONAME;
	x->ttl_s = x->gai == 0 ? GAI_TTL_S : x->gai == EAI_NONAME ? NEG_TTL_S : 0;
}

/* one DNS attempt for type: 1 addresses, 0 the name has none of that type, -1 no such name,
 * -2 a temporary failure, -3 another failure */
static int dns_query(res_state st, struct rentry *x, int type, unsigned *ttl)
{
	unsigned char ans[ANSWER_MAX];
	int len = res_nsearch(st, x->host, ns_c_in, type, ans, sizeof(ans));

	if (len < 0)
		return st->res_h_errno == HOST_NOT_FOUND ? -1
			: st->res_h_errno == NO_DATA	 ? 0
			: st->res_h_errno == TRY_AGAIN	 ? -2
							 : -3;
	return local_dns_answer(ans, len > (int)sizeof(ans) ? (size_t)sizeof(ans) : (size_t)len,
				type, x->addr, &x->n, LOCAL_RESOLVE_MAX, ttl) > 0;
}

static void dns_lookup(struct rentry *x)
{
	struct __res_state st;
	int r = -2;
	unsigned ttl = TTL_MAX_S;

	x->n = 0;
	for (int i = 0; i < TRIES && r == -2; i++) {
		if (i > 0) {
			struct timespec ts = { 0, (long)(BACKOFF_MS << (i - 1)) * 1000000L };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		memset(&st, 0, sizeof(st));
		if (res_ninit(&st) < 0)
			break;
		/* a second per attempt, and the attempts are ours (with their pauses): all of them
		 * within 5.4 s, inside the dial's deadline */
		st.retrans = 1;
		st.retry = 1;
		ttl = TTL_MAX_S;
		r = dns_query(&st, x, ns_t_a, &ttl);
		if (r == 0)
			r = dns_query(&st, x, ns_t_aaaa, &ttl);
		res_nclose(&st);
	}
	if (r == 1) {
		x->gai = 0;
		x->ttl_s = ttl < TTL_MIN_S ? TTL_MIN_S : ttl;
	} else if (r == 0 || r == -1) {
		x->gai = r == 0 ? EAI_NODATA : EAI_NONAME;
		x->ttl_s = NEG_TTL_S;
	} else {
		gai_lookup(x); /* the last word: whatever else the system's resolver knows */
		if (x->gai == EAI_NONAME)
			x->ttl_s = 0; /* DNS failed: not known not to exist */
	}
}

static void lookup(struct rentry *x)
{
	if (file_has("/etc/hosts", NULL, x->host) ||
	    !file_has("/etc/resolv.conf", "nameserver", NULL))
		gai_lookup(x);
	else
		dns_lookup(x);
}

static void *resolver_main(void *arg)
{
	struct local_resolver *rs = arg;

	pthread_mutex_lock(&rs->lock);
	for (;;) {
		if (!rs->queue) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += RESOLVER_IDLE_MS / 1000;
			rs->idle++;
			int w = 0;
			while (!rs->queue && w != ETIMEDOUT)
				w = pthread_cond_timedwait(&rs->cond, &rs->lock, &ts);
			rs->idle--;
			if (!rs->queue)
				break;
		}
		struct rentry *x = rs->queue;
		rs->queue = x->qnext;
		if (!rs->queue)
			rs->queue_tail = &rs->queue;
		pthread_mutex_unlock(&rs->lock);
		lookup(x); /* the entry is pending: the loop does not touch it meanwhile */
		pthread_mutex_lock(&rs->lock);
		x->qnext = rs->finished;
		rs->finished = x;
		uint64_t one = 1;
		(void)!write(rs->efd, &one, sizeof(one));
	}
	rs->threads--;
	pthread_mutex_unlock(&rs->lock);
	return NULL;
}

/* under lock: a thread for the queue when none is free; false when one cannot be made */
static bool spawn_locked(struct local_resolver *rs)
{
	if (!rs->queue || rs->idle > 0 || rs->threads >= RESOLVER_THREADS)
		return true;
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, RESOLVER_STACK);
	/* signals stay with the event loop's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&t, &at, resolver_main, rs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (r != 0)
		return false; /* EAGAIN under a pids limit: the lookups wait, and we retry */
	rs->threads++;
	return true;
}

/* --- the loop's side ----------------------------------------------------------------------- */

static void answer(struct local_resolver *rs, struct rentry *x, struct local_resolve *r)
{
	r->gai = x->state == E_OK ? 0 : x->gai;
	r->n = x->state == E_OK ? x->n : 0;
	for (size_t i = 0; i < r->n; i++) {
		r->addr[i] = x->addr[i];
		if (r->addr[i].ss_family == AF_INET)
			((struct sockaddr_in *)&r->addr[i])->sin_port = htons((uint16_t)r->port);
		else
			((struct sockaddr_in6 *)&r->addr[i])->sin6_port = htons((uint16_t)r->port);
	}
	r->entry = NULL;
	r->next = NULL;
	*rs->done_tail = r;
	rs->done_tail = &r->next;
}

/* drops the entry of the cache least recently used that nobody waits for */
static void evict(struct local_resolver *rs, long long now)
{
	struct rentry **victim = NULL;

	for (struct rentry **pp = &rs->cache; *pp; pp = &(*pp)->next) {
		struct rentry *x = *pp;
		if (x->state == E_PENDING)
			continue;
		if (x->expires <= now || !victim || x->used < (*victim)->used)
			victim = pp;
		if (x->expires <= now)
			break;
	}
	if (victim) {
		struct rentry *x = *victim;
		*victim = x->next;
		free(x);
		rs->n_cache--;
	}
}

struct local_resolve *local_resolve_start(struct local_resolver *rs, const char *host, int port,
					  void *owner)
{
	struct local_resolve *r = xcalloc(1, sizeof(*r));
	long long now = mono_ms();
	struct rentry *x;

	snprintf(r->host, sizeof(r->host), "%s", host);
	r->port = port;
	r->owner = owner;
	for (x = rs->cache; x && strcmp(x->host, r->host) != 0; x = x->next)
		;
	if (x && (x->state == E_PENDING || x->expires > now)) {
		x->used = now;
		if (x->state == E_PENDING) { /* the lookup under way answers this one too */
			r->entry = x;
			r->next = x->waiters;
			x->waiters = r;
		} else {
			uint64_t one = 1;
			answer(rs, x, r);
			(void)!write(rs->efd, &one, sizeof(one));
		}
		return r;
	}
	if (!x) {
		if (rs->n_cache >= CACHE_MAX)
			evict(rs, now);
		x = xcalloc(1, sizeof(*x));
		memcpy(x->host, r->host, sizeof(x->host));
		x->next = rs->cache;
		rs->cache = x;
		rs->n_cache++;
	}
	x->state = E_PENDING;
	x->used = now;
	r->entry = x;
	r->next = x->waiters;
	x->waiters = r;
	pthread_mutex_lock(&rs->lock);
	x->qnext = NULL;
	*rs->queue_tail = x;
	rs->queue_tail = &x->qnext;
	if (rs->idle > 0)
		pthread_cond_signal(&rs->cond);
	else
		(void)spawn_locked(rs);
	pthread_mutex_unlock(&rs->lock);
	return r;
}

static bool unlink_from(struct local_resolve **pp, struct local_resolve *r)
{
	for (; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return true;
		}
	return false;
}

void local_resolve_cancel(struct local_resolver *rs, struct local_resolve *r)
{
	struct rentry *x = r->entry;

	if (!(x && unlink_from(&x->waiters, r)) && unlink_from(&rs->done, r)) {
		rs->done_tail = &rs->done;
		while (*rs->done_tail)
			rs->done_tail = &(*rs->done_tail)->next;
	}
	free(r);
}

struct local_resolve *local_resolve_done(struct local_resolver *rs)
{
	uint64_t v;
	long long now = mono_ms();

	(void)!read(rs->efd, &v, sizeof(v));
	pthread_mutex_lock(&rs->lock);
	struct rentry *fin = rs->finished;
	rs->finished = NULL;
	pthread_mutex_unlock(&rs->lock);
	while (fin) {
		struct rentry *x = fin;
		fin = x->qnext;
		x->state = x->gai == 0 ? E_OK : E_NEG;
		x->expires = now + (long long)x->ttl_s * 1000;
		struct local_resolve *w = x->waiters;
		x->waiters = NULL;
		while (w) {
			struct local_resolve *next = w->next;
			answer(rs, x, w);
			w = next;
		}
	}
	struct local_resolve *r = rs->done;
	if (r) {
		rs->done = r->next;
		if (!rs->done)
			rs->done_tail = &rs->done;
		r->next = NULL;
	}
	return r;
}

bool local_resolver_starved(struct local_resolver *rs)
{
	pthread_mutex_lock(&rs->lock);
	bool starved = rs->queue && rs->threads == 0;
	pthread_mutex_unlock(&rs->lock);
	return starved;
}

void local_resolver_tick(struct local_resolver *rs)
{
	pthread_mutex_lock(&rs->lock);
	(void)spawn_locked(rs);
	pthread_mutex_unlock(&rs->lock);
}
