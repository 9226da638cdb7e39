/* The local provider's network service: what its net-*.c files share. All of them run in the
 * supervisor but net-ctl.c (the CLI) and net-proxy.c and net-inject.c (pure, either).
 *
 * Which file does what, from the bottom up (no file calls one above it, but two: net-dial.c
 * starts a dialled request's exchange in net-http.c, which dials its next request again, and
 * tells net-loop.c which loopback a preview reached):
 *   net-proxy.c   pure functions over bytes: the HTTP proxy's request head, the SOCKS5
 *                 handshake, a preview's token, address classes, the log's escaping,
 *                 a DNS answer's addresses (no sockets, no state: fuzzed by tests/fuzz/)
 *   net-inject.c  pure too: the requests on a connection whose TLS the proxy ends for its
 *                 secrets (--secret), checked whole, placeholders replaced (fuzzed)
 *   net-ctl.c     the CLI's side: sbx preview's request on the control socket, the proxy
 *                 credential of each sbx exec, the paths of the log, sbx update --secret
 *   net-rate.c    --net-rate's token buckets (the supervisor; below net-egress.c)
 *   net-egress.c  the supervisor's policy (allow list, --add-host, the addresses no
 *                 sandbox may reach), the egress log, exec credentials
 *   net-resolve.c the resolver: a cache honouring TTLs, one lookup per name in flight, the
 *                 threads that block in it (the event loop never does)
 *   net-relay.c   a connection's life (answers, closing) and the splice relay both ways
 *   net-dial.c    dialling: the policy's check, connecting, init's socket factory
 *   net-http.c    the proxy's absolute-URL exchanges, kept alive, and the pool of idle
 *                 upstream connections
 *   net-tls.c     --secret: the sandbox's secrets, and a thread for each connection to their
 *                 hosts (TLS ended with tls.c's OpenSSL, requests through net-inject.c)
 *   net-conn.c    the supervisor's connections, each a state machine: a proxy request or
 *                 SOCKS handshake, a lookup, a dial, the relay, an answer; caps, deadlines
 *   net-exec.c    the attached execs registered by their callers: a killed caller's
 *                 command ends (and the idle timeout waits while one runs)
 *   net-loop.c    the supervisor's event loop: listeners, previews, the control socket,
 *                 and local_net_start / local_net_wait for supervisor.c */
#ifndef SBX_PROVIDERS_LOCAL_NET_H
#define SBX_PROVIDERS_LOCAL_NET_H

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "providers/local/local.h"

#define LOCAL_PROXY_HTTP_PORT 3128
#define LOCAL_PROXY_SOCKS_PORT 1080
#define LOCAL_HEAD_MAX 16384 /* an HTTP request head, the whole of it */
#define LOCAL_HOST_MAX 255   /* a host name, as a client sent it */
#define LOCAL_TOKEN_LEN 32   /* a preview's token: hexadecimal digits */

/* --- net-proxy.c: parsers ---------------------------------------------------------------- */

/* the length of the HTTP head at buf[0..len) through its CRLF CRLF, or 0 while it has not
 * ended; from: where to start looking (the length seen before, the search backs up 3) */
size_t local_http_head_len(const char *buf, size_t len, size_t from);

/* a proxy request: "CONNECT host:port" or a request for an absolute http:// URL */
struct local_http_req {
	char method[16];
	bool connect;
	char host[LOCAL_HOST_MAX + 1]; /* lowercased; any byte but NUL, space and controls */
	size_t host_len;
	int port;
	size_t target_off, target_len; /* the request target, within the head */
	size_t path_off, path_len;     /* absolute URL: its path and query, within the head */
	bool path_slash;	       /* ... which needs a '/' in front (http://h?q, http://h) */
	char version[9];	       /* "HTTP/1.0" or "HTTP/1.1" */
};
/* parses the head buf[0..hl) (hl from local_http_head_len): 0, or -1 with *ret_why the
 * one-line body of a 400 answer */
int local_http_parse(const char *buf, size_t hl, struct local_http_req *r, const char **ret_why);
/* the request line and headers of any HTTP/1.x request head (target not looked at): 0 or -1 */
int local_http_head_parse(const char *buf, size_t hl, struct local_http_req *r);
/* the value of the first header called name (any case), trimmed: a pointer into buf and its
 * length in *ret_len, or NULL */
const char *local_http_header(const char *buf, size_t hl, const char *name, size_t *ret_len);
/* Proxy-Authorization: 0 none (absent, or not Basic), 1 Basic with user and pass set (pass ""
 * when it has no ':'), -1 Basic that is malformed (not base64, a NUL, too long) */
int local_http_basic(const char *buf, size_t hl, char *user, size_t ulen, char *pass, size_t plen);
/* the head to send to the server of an absolute-URL request: the request line in origin
 * form, the client's headers but Proxy-*, Connection and Keep-Alive, and "Connection: close"
 * when close (else none: HTTP/1.1 keeps the connection); malloc'd, its length in *ret_len */
char *local_http_origin_head(const char *buf, size_t hl, const struct local_http_req *r, bool close,
			     size_t *ret_len);
/* whether a Connection header of the head lists token (any case) */
bool local_http_conn_has(const char *buf, size_t hl, const char *token);

/* an HTTP message's body: how it is framed, and where it ends (local_body_scan) */
enum {
	LOCAL_BODY_NONE,
	LOCAL_BODY_LENGTH,  /* Content-Length: left bytes */
	LOCAL_BODY_CHUNKED, /* Transfer-Encoding: chunked */
	LOCAL_BODY_CLOSE    /* until the connection ends (a response only) */
};
struct local_body {
	int kind;
	unsigned long long left; /* LENGTH: bytes left; CHUNKED: of the chunk */
	int cs;			 /* CHUNKED: where in the coding */
	bool digits, done;
};
/* a request's body from its head: 0, or -1 when its framing is ambiguous (Content-Length with
 * Transfer-Encoding, two lengths that differ, a coding that does not end in chunked) */
int local_http_req_body(const char *buf, size_t hl, struct local_body *b);
/* how many bytes of buf[0..len) belong to the body (b->done once it ended): the rest is the
 * next message's; -1 when a chunked coding is malformed */
long long local_body_scan(struct local_body *b, const char *buf, size_t len);
/* a server's response head */
struct local_http_resp {
	int status;
	bool v10, close; /* HTTP/1.0; the server ends the connection after it */
	struct local_body body;
};
/* parses buf[0..hl) (a whole head); head: the request was HEAD (no body); 0 or -1 */
int local_http_resp_parse(const char *buf, size_t hl, bool head, struct local_http_resp *r);
/* the head for the client: Connection, Keep-Alive and Proxy-Connection dropped, and
 * "Connection: close" when close (malloc'd) */
char *local_http_resp_head(const char *buf, size_t hl, bool close, size_t *ret_len);
/* host and port from "host:port", "[v6]:port" or "host" (port def); the host lowercased */
bool local_split_hostport(const char *s, size_t n, char *host, size_t hlen, int *port, int def);
/* a name the proxy may look up (letters, digits, '-', '_', dots) or an address literal */
bool local_host_dialable(const char *host);

/* the SOCKS5 handshake, as much of it as a client sent, parsed from its first byte */
struct local_socks {
	size_t greeting_len;
	unsigned char method; /* chosen: 0 none, 2 user/pass, 0xff none acceptable */
	size_t auth_len;      /* method 2 */
	char user[256], pass[256];
	bool auth_nul;	    /* user or pass holds a NUL: no credential of ours */
	size_t request_len; /* greeting, auth and request: what follows is data */
	unsigned char cmd, atyp;
	char host[LOCAL_HOST_MAX + 1]; /* a domain (raw bytes, lowercased) or an address */
	size_t host_len;
	int port;
};
enum {
	LOCAL_SOCKS_BAD = -1,	   /* not SOCKS5: close */
	LOCAL_SOCKS_BAD_ATYP = -2, /* an address type we do not know: reply 8, close */
	LOCAL_SOCKS_NONE = 0,	   /* nothing complete yet */
	LOCAL_SOCKS_GREETING = 1,  /* greeting complete (method chosen) */
	LOCAL_SOCKS_AUTH = 2,	   /* user/pass complete (method 2 only) */
	LOCAL_SOCKS_REQUEST = 3,   /* request complete */
};
/* the last step of the handshake buf[0..len) completes, or an error */
int local_socks_parse(const unsigned char *buf, size_t len, struct local_socks *s);

/* a preview's token in the first request of a connection */
enum {
	LOCAL_TOKEN_BAD = -1,	  /* not an HTTP request: 400 */
	LOCAL_TOKEN_DENY = 0,	  /* no valid token: 401 */
	LOCAL_TOKEN_OK = 1,	  /* header X-Sbx-Preview-Token or a cookie sbx_preview_token* */
	LOCAL_TOKEN_REDIRECT = 2, /* the query's sbx_token: 302 to *ret_location, a cookie */
};
/* checks the head buf[0..hl) for token (LOCAL_TOKEN_LEN hex digits); with REDIRECT,
 * *ret_location is the request target without the sbx_token parameter (malloc'd) */
int local_preview_token(const char *buf, size_t hl, const char *token, char **ret_location);
/* constant-time equality of a[0..an) and the NUL-terminated b */
bool local_ct_equal(const char *a, size_t an, const char *b);

/* an address the proxy must not dial: NULL when none of the classes below holds, else
 * "a loopback address", "a private address" (the only class --net-allow-private and
 * --add-host lift), "a link-local address", "a cloud metadata address", ... */
const char *local_addr_class(const struct sockaddr *sa);
#define LOCAL_CLASS_PRIVATE "a private address"

/* a name the sandbox sent, for the egress log and messages: printable ASCII but '\' kept,
 * every other byte as \xNN (malloc'd) */
char *local_escape_name(const char *s, size_t n);
/* valid UTF-8 but control characters kept, every other byte as \xNN (malloc'd) */
char *local_escape_utf8(const char *s, size_t n);

/* the A (ns_t_a) or AAAA (ns_t_aaaa) records of the DNS answer m[0..len) appended to
 * addr[*n..max) (port 0), *ttl lowered to the smallest TTL of the answer's records; the count
 * added (0 for a message too short or malformed before its answers) */
size_t local_dns_answer(const unsigned char *m, size_t len, int type, struct sockaddr_storage *addr,
			size_t *n, size_t max, unsigned *ttl);

/* --- net-inject.c: requests on a connection whose TLS the proxy ends (--secret) ---------- */

struct local_secret {
	char *name, *placeholder, *value;
	char **hosts; /* patterns, NULL-terminated */
};
#define LOCAL_INJECT_MAX 64 /* secrets a sandbox may have */
enum {
	LOCAL_INJECT_REFUSE = -1,
	LOCAL_INJECT_OK = 0,
	LOCAL_INJECT_MORE = 1 /* the head has not ended yet */
};
struct local_inject {
	char *head; /* OK: the head to send on, placeholders replaced (malloc'd) */
	size_t head_len, consumed;
	struct local_body body;	     /* OK: the body that follows */
	unsigned long long injected; /* OK: bit i, secret i was put in */
	int code;		     /* REFUSE: the status, and why (the answer's body) */
	const char *status;
	char why[400];
	int exfil; /* REFUSE: the secret whose placeholder went elsewhere (-1 none) */
};
/* whether host is one of s's hosts */
bool local_secret_host(const struct local_secret *s, const char *host);
/* the next request of buf[0..len) on a connection to host: its head checked (HTTP/1.x, no
 * HTTP/2 preface, no ambiguous body framing, a Host header naming host, at most
 * LOCAL_HEAD_MAX bytes), each placeholder of the secrets s[0..n) replaced by its value when
 * host is one of its hosts, the request refused when it is not */
int local_inject_request(const char *buf, size_t len, const char *host,
			 const struct local_secret *s, size_t n, struct local_inject *x);

/* --- net-ctl.c: the CLI's side, and what the supervisor shares with it ----------------- */

/* a unix socket address for DIR/ctl, however long DIR is (through /proc/self/fd/DIRFD) */
socklen_t local_ctl_addr(const char *dir, int dirfd, struct sockaddr_un *a);
/* bytes random hex digits (2 * bytes of them) and a NUL into out */
void local_hex(char *out, size_t bytes);
/* DIR/egress.log + suffix */
char *local_egress_log_at(const char *dir, const char *suffix);
/* the egress log's line for a policy that changed (sbx update): {"time", "policy": "update",
 * "mode", "allow", "preset", "rates"} */
json_t *local_policy_entry(const struct sbx_config *c);

/* --- net-rate.c: --net-rate's buckets (the supervisor) ---------------------------------- */

struct local_rate;
struct local_rate *local_rate_new(const struct sbx_net_config *n);
/* n's limits from now on (a limit that stays keeps what it had used) */
void local_rate_set(struct local_rate *r, const struct sbx_net_config *n);
/* a request to host: 0 within the limits (counted), -1 over one (why into reason, naming the
 * sandbox label and how to raise it) */
int local_rate_request(struct local_rate *r, const char *host, const char *label, char *reason,
		       size_t rlen);
void local_rate_free(struct local_rate *r);
struct local_conn;
/* a relay (d: 0 up, 1 down) may move at most this many of want bytes now: 0 over a byte limit
 * (c->throttle_until says when to try again; the sweep wakes it) */
size_t local_rate_room(struct local_conn *c, int d, size_t want);
/* ... and moved these */
void local_rate_spent(struct local_conn *c, int d, size_t bytes);
/* bytes to host (d: 0 up, 1 down) taken from the byte limits, waiting (in a thread of its own:
 * a connection with secrets) until they let them through; the ms it waited */
long long local_rate_take(struct local_rate *r, const char *host, int d, size_t bytes);

/* --- net-egress.c: policy, log, credentials (the supervisor) -------------------- */

struct local_egress;
struct local_egress *local_egress_new(const struct local_setup *s);
/* allow= or open: the proxy runs */
bool local_egress_proxied(const struct local_egress *e);
bool local_egress_open(const struct local_egress *e);
/* the allow list: true when host:port may be dialled; else why into reason */
bool local_egress_allowed(const struct local_egress *e, const char *host, int port, char *reason,
			  size_t rlen);
/* the policy's word on a request for host:port: 0 allowed, 403 not (local_egress_allowed), 429
 * over a --net-rate request limit; why into reason */
int local_egress_decide(struct local_egress *e, const char *host, int port, char *reason,
			size_t rlen);
/* sbx update: the policy of c from now on (mode allow or open, the allow list, the preset,
 * the rate limits), logged; -1 with why in msg */
int local_egress_update(struct local_egress *e, const struct sbx_config *c, char *msg, size_t len);
/* the rate limits' buckets */
struct local_rate *local_egress_rate(struct local_egress *e);
/* the address --add-host maps host to, or NULL */
const char *local_egress_mapped(const struct local_egress *e, const char *host);
/* whether the addresses a name led to may be dialled (all of them): 0, or -1 with the
 * reason (the address, its class, and how to allow it or that it cannot be); literal: the
 * name was an address, mapped: --add-host gave them */
int local_egress_check(const struct local_egress *e, const char *name, bool literal, bool mapped,
		       const struct sockaddr_storage *addrs, size_t n, char *reason, size_t rlen);
/* a connection made: is its peer this host itself (an address the check did not know)? */
bool local_egress_is_self(int fd);
/* an exec's proxy credential: 0 none given, 1 a known exec (exec and *command set; the
 * command malloc'd), -1 refused */
int local_egress_credential(struct local_egress *e, const char *user, const char *pass,
			    char exec[13], char **command);

struct local_egress_entry {
	long long t0;	     /* unix ms */
	const char *exec;    /* "" none */
	const char *command; /* NULL none */
	const char *proto;   /* "http", "connect", "socks" */
	const char *domain;  /* as the sandbox sent it, any bytes */
	size_t domain_len;
	int port;
	bool deny;
	const char *reason;
	long long up, down;
	long long throttled_ms; /* held back by a byte limit */
	const char **secrets;	/* --secret: the names injected, or the one refused */
	size_t n_secrets;
};
/* appends one JSON line to the egress log (rotating it at its cap) */
void local_egress_log(struct local_egress *e, const struct local_egress_entry *x);

/* --- net-resolve.c: the resolver (the supervisor) ------------------------------------------ */

/* a connection's lookup of a name */
#define LOCAL_RESOLVE_MAX 8
struct local_resolve {
	char host[LOCAL_HOST_MAX + 1];
	int port;
	void *owner; /* the event loop's */
	/* the answer */
	int gai; /* getaddrinfo's status (EAI_NONAME, EAI_AGAIN, ...) */
	size_t n;
	struct sockaddr_storage addr[LOCAL_RESOLVE_MAX]; /* with the port */
	/* the resolver's */
	void *entry;
	struct local_resolve *next;
};
struct local_resolver;
/* on: the proxy runs (else no lookup is ever made) */
struct local_resolver *local_resolver_new(bool on);
/* an eventfd that is readable when an answer waits (-1 when none could be made) */
int local_resolver_fd(const struct local_resolver *rs);
/* a lookup; it is answered through local_resolve_done (from the cache: at the next round) */
struct local_resolve *local_resolve_start(struct local_resolver *rs, const char *host, int port,
					  void *owner);
/* the owner gives up on it (the lookup goes on for the cache) */
void local_resolve_cancel(struct local_resolver *rs, struct local_resolve *r);
/* the next answered lookup (the caller frees it), or NULL */
struct local_resolve *local_resolve_done(struct local_resolver *rs);
/* lookups wait with no thread to run them: call local_resolver_tick soon */
bool local_resolver_starved(struct local_resolver *rs);
/* starts a thread for waiting lookups when none runs (thread creation can fail under a pids
 * limit: they wait until one can be made, or their owner's deadline) */
void local_resolver_tick(struct local_resolver *rs);

/* --- net-conn.c and net-loop.c: the supervisor's event loop ---------------------------- */

#define LOCAL_MAX_PREVIEWS 64
#define LOCAL_FACTORY_QUEUE 64 /* socket requests to init in flight */

enum local_kind {
	LOCAL_K_HTTP,
	LOCAL_K_SOCKS,
	LOCAL_K_FWD,
	LOCAL_K_PREVIEW,
	LOCAL_K_CTL
};
/* each kind's share of the connections, so that one cannot starve the others */
enum local_pool {
	LOCAL_P_PROXY,
	LOCAL_P_FWD,
	LOCAL_P_PREVIEW,
	LOCAL_P_CTL,
	LOCAL_P_N
};
enum local_state {
	LOCAL_S_HEAD,	   /* reading an HTTP request head (the proxy, a preview's token) */
	LOCAL_S_SOCKS,	   /* reading the SOCKS5 handshake */
	LOCAL_S_RESOLVE,   /* waiting for a resolver thread */
	LOCAL_S_FACTORY,   /* waiting for init's socket (a preview) */
	LOCAL_S_CONNECT,   /* a non-blocking connect under way */
	LOCAL_S_RELAY,	   /* splicing both ways */
	LOCAL_S_REPLY,	   /* sending a final answer */
	LOCAL_S_LINGER,	   /* answered: reading until the client's end */
	LOCAL_S_CTL,	   /* reading a control request line */
	LOCAL_S_CTL_READY, /* ... which net-loop.c answers (local_conn_answer) */
	LOCAL_S_HTTP,	   /* an absolute-URL request and its response (net-http.c) */
};
/* what an epoll event is about: the first member of what its data points to */
enum local_ep {
	LOCAL_EP_LISTEN,
	LOCAL_EP_CLIENT,
	LOCAL_EP_UP,
	LOCAL_EP_PIDFD,
	LOCAL_EP_RESOLVER,
	LOCAL_EP_FACTORY,
	LOCAL_EP_EXEC
};
struct local_ep_tag {
	unsigned char type;
};

struct local_listener {
	struct local_ep_tag ep;
	int fd, kind;
	int fwd_host;		  /* LOCAL_K_FWD: the host's port */
	struct local_preview *pv; /* LOCAL_K_PREVIEW */
	long long paused_until;	  /* not polled until then (0: polled) */
	bool dead;
	struct local_listener *dead_next;
};

struct local_preview {
	struct local_listener l;
	int port, host_port;
	bool public, auth;
	char token[LOCAL_TOKEN_LEN + 1];
	char upstream[48]; /* the address inside that answered last ("" none yet) */
};

struct local_conn {
	struct local_ep_tag cl_ep, up_ep;
	struct local_net *n;
	struct local_conn *prev, *next, *ready_next, *dead_next;
	unsigned char kind, state, pool;
	bool refusing, dead, on_ready, up_event;
	int fd, up;
	long long t0, deadline, last_io;
	/* from the client, before any relaying: an HTTP head, a SOCKS handshake, a ctl line */
	char *in;
	size_t in_len, in_cap, head_len;
	int socks_step; /* handshake steps answered */
	size_t socks_req_len;
	/* to the client (an answer), and to the upstream (a rewritten head, early bytes) */
	char *out, *pre;
	size_t out_len, out_off, pre_len, pre_off;
	/* relaying: one pipe each way, client to upstream [0] and back [1] */
	int pipe[2][2];
	size_t inpipe[2], pipe_cap[2];
	bool pipe_grown[2]; /* local_pipe_grow asked for its pipe already */
	bool eof[2], shut[2];
	/* dialling */
	struct local_resolve *job;
	struct sockaddr_storage addrs[LOCAL_RESOLVE_MAX];
	size_t n_addrs, next_addr;
	int dial_errno, fq_slot;
	bool literal, mapped;
	/* a forwarder's host port; a preview's, copied (the preview may close meanwhile) */
	int fwd_host, inside_port, host_port;
	bool auth;
	char token[LOCAL_TOKEN_LEN + 1];
	/* the proxy's, for the egress log */
	const char *proto;
	char host[LOCAL_HOST_MAX + 1];
	size_t host_len;
	int port;
	bool deny, logged;
	long long throttle_until, throttled_ms; /* --net-rate's byte limit */
	char exec[13];
	char *command;
	char reason[400];
	long long up_bytes, down_bytes;
	/* an absolute-URL exchange (net-http.c): the bodies' framing, the response head as it
	 * comes, the request again for a pooled connection the server closed */
	struct local_body req, resp;
	char *rb, *retry;
	size_t rb_len, retry_len, scan_from;
	bool http_close, is_head, resp_started, got_resp, up_reusable, no_pool;
	int served;	     /* requests answered on this connection */
	int lowat;	     /* the upstream socket's SO_RCVLOWAT */
	long long resp_from; /* down_bytes when the response's body began */
};

struct local_net {
	const struct local_setup *s;
	struct local_egress *eg;
	struct local_rate *rate; /* the egress policy's (sbx update changes what it holds) */
	struct local_resolver *rs;
	int epfd, spare_fd, factory_fd, pidfd;
	struct local_ep_tag pidfd_ep, resolver_ep, factory_ep;
	struct local_conn *fq[LOCAL_FACTORY_QUEUE]; /* asked of init, oldest first (NULL: gone) */
	unsigned fq_head, fq_n;
	struct local_listener *http, *socks, *ctl, **fwd;
	size_t n_fwd;
	struct local_preview *prev[LOCAL_MAX_PREVIEWS];
	size_t n_prev;
	struct local_conn *conns, *ready, *dead;
	struct local_listener *dead_l;
	int pool_cap[LOCAL_P_N], pool_used[LOCAL_P_N], refusing, n_conns;
	int ctl_ready;		      /* control requests waiting for net-loop.c's answer */
	struct local_exec_reg *execs; /* net-exec.c's registry (LOCAL_EXECS_MAX slots) */
	long long idle_ms, now;	      /* now: the loop's clock (monotonic, ms) */
	long long ttl_ms;	      /* the idle timeout, as sbx update last set it */
	long long rx_bytes, tx_bytes; /* proxied bytes of the exchanges logged so far (sbx stats) */
	bool ttl_changed;	      /* ... since local_net_wait last returned */
	struct local_idle *idle;      /* idle upstream connections (net-http.c) */
	int n_idle;
	struct local_secrets *secrets; /* --secret (net-tls.c); NULL: none */
};

static inline struct local_conn *local_conn_of(struct local_ep_tag *ep)
{
	size_t off = ep->type == LOCAL_EP_UP ? offsetof(struct local_conn, up_ep)
					     : offsetof(struct local_conn, cl_ep);
	return (struct local_conn *)(void *)((char *)ep - off);
}

/* net-relay.c: a connection's life, its answers, the relay */
enum local_step {
	LOCAL_STEP_WAIT,
	LOCAL_STEP_AGAIN,
	LOCAL_STEP_YIELD
};
enum local_fail {
	LOCAL_F_DENY,
	LOCAL_F_RATE, /* over a --net-rate request limit: 429 */
	LOCAL_F_FAIL,
	LOCAL_F_TIMEOUT
};
void local_set_nonblock(int fd);
/* TCP_NODELAY: a relay passes writes on as they came */
void local_set_nodelay(int fd);
int local_ep_add(struct local_net *n, int fd, unsigned events, struct local_ep_tag *ep);
void local_close_fd(int *fd);
/* a complete HTTP answer with a one-line plain-text body, which ends the connection */
char *local_http_text(int code, const char *status, const char *extra, const char *body,
		      size_t *ret_len);
/* appends bytes to what goes to the client */
void local_conn_out(struct local_conn *c, const void *b, size_t len);
/* its entry in the egress log (at its end; and after each request kept alive) */
void local_conn_log(struct local_conn *c);
/* sends what waits in buf[*off..len) to fd: 1 all of it, 0 the rest waits, -1 an error */
int local_send_pending(int fd, const char *buf, size_t len, size_t *off, long long *count);
/* ends a connection (logged, descriptors closed, counted out); freed by local_conn_reap */
void local_conn_close(struct local_conn *c);
/* runs it again at the end of this round (it yielded, or an answer came for it) */
void local_conn_later(struct local_conn *c);
/* 1 when what goes to the client is all sent, 0 when the rest waits, -1 on an error */
int local_conn_flush(struct local_conn *c);
/* reads what the client sent into c->in (up to max bytes); -1 on its end or an error */
int local_conn_read(struct local_conn *c, size_t max);
/* what came on fd is acknowledged at once (TCP_QUICKACK; asked after each read) */
void local_quickack(int fd);
/* a final answer (taken): sent, then the client's end is waited for, then the end */
void local_conn_reply(struct local_conn *c, char *data, size_t len);
void local_conn_http(struct local_conn *c, int code, const char *status, const char *extra,
		     const char *body);
void local_conn_socks(struct local_conn *c, unsigned char code);
/* the proxy gives up: a refusal by the policy (403, SOCKS 2; logged at once), a rate limit
 * (429, SOCKS 2), a failure (502), a timeout (504), saying c->reason */
void local_proxy_fail(struct local_conn *c, enum local_fail f);
/* a preview's answer when the port inside cannot be reached */
void local_preview_fail(struct local_conn *c, int code, const char *status, const char *why);
/* the connection is made: relaying both ways from now on */
void local_relay_start(struct local_conn *c);
/* relays until both ways would block (LOCAL_STEP_WAIT; c->dead when it ended) or its turn is
 * over (LOCAL_STEP_YIELD) */
int local_relay_pump(struct local_conn *c);

/* net-http.c: absolute-URL exchanges */
#define LOCAL_PIPE_SZ (256 * 1024) /* a relay's pipe, asked for (the kernel may give less) */
/* ... and once a direction has moved LOCAL_PIPE_BULK bytes, a bulk transfer: its pipe grows to
 * LOCAL_PIPE_BIG, fewer rounds of the loop for as many bytes. Only then: pipe pages count
 * against the user's pipe-user-pages-soft, which many small connections would exhaust */
#define LOCAL_PIPE_BULK (4ll << 20)
#define LOCAL_PIPE_BIG (1024 * 1024)
struct local_conn;
/* grows c's pipe of direction d once the direction is a bulk transfer (count: its bytes) */
void local_pipe_grow(struct local_conn *c, int d, long long count);
/* the request's upstream connection is there: the exchange runs (LOCAL_S_HTTP) */
void local_http_start(struct local_conn *c);
/* the same, with an idle connection of the pool to c->host:c->port; false when none */
bool local_http_pooled(struct local_conn *c);
/* moves the request and its response (LOCAL_STEP_*) */
int local_http_pump(struct local_conn *c);
/* closes the idle upstream connections past their time (all: every one) */
void local_pool_sweep(struct local_net *n, bool all);

/* net-dial.c: dialling */
/* the connection to the upstream is made: the policy's check of the peer, then the relay */
void local_dial_done(struct local_conn *c);
/* connects to the next of c->addrs; when none is left, the answer saying so */
void local_dial_next(struct local_conn *c);
/* the proxy has a destination (c->host, c->port): policy, lookup, dial */
void local_dial_proxy(struct local_conn *c);
/* a preview: a socket of the sandbox's network from init, to 127.0.0.1:PORT inside, or to
 * [::1]:PORT when nothing answers there (a server bound to "localhost" that chose ::1) */
void local_dial_inside(struct local_conn *c);

/* net-tls.c: --secret */
/* reads the sandbox's secrets (and, the first time, its CA): 0 (none: nothing loaded), or -1
 * with why in msg */
int local_secrets_load(struct local_net *n, char *msg, size_t len);
/* host has secrets: the proxy ends the TLS of CONNECT and SOCKS connections to it */
bool local_tls_intercepts(struct local_net *n, const char *host);
/* the name of a secret whose placeholder buf[0..len) holds (a plain-HTTP head), or NULL */
const char *local_secret_in(struct local_net *n, const char *buf, size_t len);
/* the bytes connections with secrets have moved, up and down (sbx stats) */
void local_tls_moved(long long *up, long long *down);
/* the connection to such a host is made: a thread of its own takes both sockets over */
void local_tls_start(struct local_conn *c);

/* net-exec.c: the commands of attached execs, each ended (its process group) when the sbx exec
 * that started it dies first */
#define LOCAL_EXECS_MAX 128
/* the control request {"op":"exec","pid":N} on connection fd: N is the peer's child, the
 * leader of its process group; the answer (a JSON object) */
struct json_t;
struct json_t *local_exec_add(struct local_net *n, int fd, struct json_t *req);
/* an exec's caller ended (the epoll event of its pidfd) */
void local_exec_caller_ended(struct local_net *n, struct local_ep_tag *ep);

/* net-loop.c: the preview of port (inside) on host_port was reached at upstream */
void local_preview_upstream(struct local_net *n, int port, int host_port, const char *upstream);

/* net-conn.c: the state machines */
/* a connection accepted on l (fd non-blocking), counted against its kind's share, or refused
 * (an answer saying so, or closed when even those are too many); NULL when none remains */
struct local_conn *local_conn_accept(struct local_net *n, struct local_listener *l, int fd);
/* runs a connection's state machine as far as it goes without blocking */
void local_conn_run(struct local_conn *c);
/* a control request's answer (a JSON line, taken): sent, then the connection ends */
void local_conn_answer(struct local_conn *c, char *line);
/* deadlines (heads, handshakes, dials, answers) and idle relays */
void local_conn_sweep(struct local_net *n);
/* the resolver threads' answers */
void local_conn_resolved(struct local_net *n);
/* init's socket factory's answers */
void local_conn_factory(struct local_net *n);
/* before the loop: a socket listening on 127.0.0.1:port inside the sandbox; -1 with errno */
int local_conn_listen_inside(struct local_net *n, int port);
/* runs the connections that had to yield; frees those closed (after a round of events) */
void local_conn_ready(struct local_net *n);
void local_conn_reap(struct local_net *n);

#endif
