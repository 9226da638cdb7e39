/* OpenSSL for --secret, dlopen'ed on first use as core/lazy.c does for libcurl: a sandbox's CA,
 * leaf certificates minted for the hosts of its secrets (kept in memory), TLS sessions over
 * non-blocking sockets with deadlines. Nothing of TLS or X.509 is done here by hand. */
#define _GNU_SOURCE
#include "providers/local/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "core/lazy.h"
#include "core/util.h"

/* the functions used, resolved by name (their types from OpenSSL's headers) */
#define CRYPTO_FNS(X)                    \
	X(EVP_PKEY_Q_keygen)             \
	X(EVP_PKEY_free)                 \
	X(EVP_sha256)                    \
	X(X509_new)                      \
	X(X509_free)                     \
	X(X509_set_version)              \
	X(X509_get_serialNumber)         \
	X(ASN1_INTEGER_set_uint64)       \
	X(X509_getm_notBefore)           \
	X(X509_getm_notAfter)            \
	X(X509_gmtime_adj)               \
	X(X509_set_pubkey)               \
	X(X509_get_subject_name)         \
	X(X509_set_issuer_name)          \
	X(X509_NAME_add_entry_by_txt)    \
	X(X509V3_set_ctx)                \
	X(X509V3_EXT_conf_nid)           \
	X(X509_add_ext)                  \
	X(X509_EXTENSION_free)           \
	X(X509_sign)                     \
	X(X509_verify_cert_error_string) \
	X(BIO_new)                       \
	X(BIO_s_mem)                     \
	X(BIO_new_mem_buf)               \
	X(BIO_ctrl)                      \
	X(BIO_free)                      \
	X(PEM_write_bio_X509)            \
	X(PEM_write_bio_PrivateKey)      \
	X(PEM_read_bio_X509)             \
	X(PEM_read_bio_PrivateKey)       \
	X(ERR_get_error)                 \
	X(ERR_error_string_n)            \
	X(ERR_clear_error)
#define SSL_FNS(X)                          \
	X(TLS_server_method)                \
	X(TLS_client_method)                \
	X(SSL_CTX_new)                      \
	X(SSL_CTX_set_default_verify_paths) \
	X(SSL_CTX_set_verify)               \
	X(SSL_CTX_ctrl)                     \
	X(SSL_CTX_set_alpn_select_cb)       \
	X(SSL_new)                          \
	X(SSL_free)                         \
	X(SSL_set_fd)                       \
	X(SSL_accept)                       \
	X(SSL_connect)                      \
	X(SSL_read)                         \
	X(SSL_write)                        \
	X(SSL_get_error)                    \
	X(SSL_shutdown)                     \
	X(SSL_ctrl)                         \
	X(SSL_set1_host)                    \
	X(SSL_set_alpn_protos)              \
	X(SSL_has_pending)                  \
	X(SSL_get_verify_result)            \
	X(SSL_use_certificate)              \
	X(SSL_use_PrivateKey)               \
	X(SSL_get1_session)                 \
	X(SSL_set_session)                  \
	X(SSL_SESSION_free)                 \
	X(SSL_SESSION_is_resumable)

#define FIELD(f) __typeof__(f) *f;
static struct {
	CRYPTO_FNS(FIELD)
	SSL_FNS(FIELD)
} o;
#undef FIELD

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;

int local_tls_load(struct sbx_err *err)
{
#define NAME(f) #f,
	static const char *const cn[] = { CRYPTO_FNS(NAME) };
	static const char *const sn[] = { SSL_FNS(NAME) };
#undef NAME
	void *cf[ARRAY_SIZE(cn)], *sf[ARRAY_SIZE(sn)];
	int r = 0;

	pthread_mutex_lock(&load_lock);
	if (!loaded) {
		/* libssl first: it brings the libcrypto it was built with */
		r = sbx_lazy_load(&sbx_lazy_ssl, sn, sf, ARRAY_SIZE(sn), err);
		if (r == 0)
			r = sbx_lazy_load(&sbx_lazy_crypto, cn, cf, ARRAY_SIZE(cn), err);
		if (r == 0) {
			size_t i = 0, k = 0;
#define SET(f) o.f = (__typeof__(f) *)cf[i++];
			CRYPTO_FNS(SET)
#undef SET
#define SET(f) o.f = (__typeof__(f) *)sf[k++];
			SSL_FNS(SET)
#undef SET
			loaded = true;
		}
	}
	pthread_mutex_unlock(&load_lock);
	return r;
}

/* OpenSSL's last error, or what */
static void why_of(char *why, size_t wlen, const char *what)
{
	unsigned long e = o.ERR_get_error();
	char buf[256] = "";

	if (e)
		o.ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(why, wlen, "%s%s%s", what, *buf ? ": " : "", buf);
	o.ERR_clear_error();
}

static char *pem_of(BIO *b)
{
	char *p = NULL;
	long n = o.BIO_ctrl(b, BIO_CTRL_INFO, 0, (void *)&p);
	char *s = n > 0 ? xstrndup(p, (size_t)n) : NULL;
	o.BIO_free(b);
	return s;
}

static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;

	o.X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = o.X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return false;
	int r = o.X509_add_ext(x, e, -1);
	o.X509_EXTENSION_free(e);
	return r == 1;
}

/* a certificate for key, CN cn, signed by ca_key (issuer ca; NULL: itself), san: a leaf's */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *ca, EVP_PKEY *ca_key, const char *san,
		       long days)
{
	X509 *x = o.X509_new();
	uint64_t serial;

	if (!x || getrandom(&serial, sizeof(serial), 0) != (ssize_t)sizeof(serial))
		goto fail;
	serial = (serial >> 2) | 1; /* positive, never 0 */
	if (o.X509_set_version(x, 2) != 1 ||
	    o.ASN1_INTEGER_set_uint64(o.X509_get_serialNumber(x), serial) != 1 ||
	    !o.X509_gmtime_adj(o.X509_getm_notBefore(x), -3600) ||
	    !o.X509_gmtime_adj(o.X509_getm_notAfter(x), days * 86400) ||
	    o.X509_set_pubkey(x, key) != 1 ||
	    o.X509_NAME_add_entry_by_txt(o.X509_get_subject_name(x), "CN", MBSTRING_UTF8,
					 (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    o.X509_set_issuer_name(x, o.X509_get_subject_name(ca ? ca : x)) != 1)
		goto fail;
	if (!ca) {
		if (!add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
		    !add_ext(x, x, NID_subject_key_identifier, "hash"))
			goto fail;
	} else if (!add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") ||
		   !add_ext(x, ca, NID_key_usage, "critical,digitalSignature") ||
		   !add_ext(x, ca, NID_ext_key_usage, "serverAuth") ||
		   !add_ext(x, ca, NID_subject_alt_name, san) ||
		   !add_ext(x, ca, NID_authority_key_identifier, "keyid")) {
		goto fail;
	}
	if (o.X509_sign(x, ca_key, o.EVP_sha256()) <= 0)
		goto fail;
	return x;
fail:
	if (x)
		o.X509_free(x);
	return NULL;
}

int local_tls_make_ca(const char *label, char **ret_cert, char **ret_key, struct sbx_err *err)
{
	char why[300];

	if (local_tls_load(err) < 0)
		return -1;
	EVP_PKEY *k = o.EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	_cleanup_free_ char *cn = xasprintf("sbx sandbox %s secrets CA", label);
	X509 *x = k ? make_cert(k, cn, NULL, k, NULL, 3650) : NULL;
	if (!x) {
		why_of(why, sizeof(why), "cannot make the sandbox's CA");
		if (k)
			o.EVP_PKEY_free(k);
		return sbx_err_set(err, SBX_E_SYSTEM, "%s", why);
	}
	BIO *bc = o.BIO_new(o.BIO_s_mem()), *bk = o.BIO_new(o.BIO_s_mem());
	if (bc)
		o.PEM_write_bio_X509(bc, x);
	if (bk)
		o.PEM_write_bio_PrivateKey(bk, k, NULL, NULL, 0, NULL, NULL);
	*ret_cert = bc ? pem_of(bc) : NULL;
	*ret_key = bk ? pem_of(bk) : NULL;
	o.X509_free(x);
	o.EVP_PKEY_free(k);
	if (!*ret_cert || !*ret_key) {
		free(*ret_cert);
		free(*ret_key);
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot write the sandbox's CA");
	}
	return 0;
}

/* --- the supervisor's ------------------------------------------------------------------------ */

#define LEAF_MAX 64 /* hosts of secrets with a leaf kept (patterns: each name asked for) */

struct leaf {
	char host[256];
	X509 *cert;
	EVP_PKEY *key;
	SSL_SESSION *upstream; /* the last session with the host's server, to resume */
};

struct local_tls {
	X509 *ca;
	EVP_PKEY *ca_key;
	SSL_CTX *server, *client;
	pthread_mutex_t lock;
	struct leaf leaves[LEAF_MAX];
	size_t n_leaves, next;
};

struct local_tls_conn {
	SSL *ssl;
	int fd;
	struct local_tls *t;
	char host[256]; /* an upstream's: its session is kept at the end */
};

static const unsigned char alpn_h1[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };

/* the sandbox's client offers protocols: http/1.1 alone is taken (none: the handshake goes on
 * without ALPN, and HTTP/1.1 is what the client speaks then) */
static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *arg)
{
	(void)s;
	(void)arg;
	for (unsigned i = 0; i < inlen;) {
		unsigned l = in[i];
		if (i + 1 + l > inlen)
			break;
		if (l == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + l;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

struct local_tls *local_tls_new(const char *ca_cert, const char *ca_key, struct sbx_err *err)
{
	char why[300];

	if (local_tls_load(err) < 0)
		return NULL;
	struct local_tls *t = xcalloc(1, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	BIO *b = o.BIO_new_mem_buf(ca_cert, -1);
	t->ca = b ? o.PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	if (b)
		o.BIO_free(b);
	b = o.BIO_new_mem_buf(ca_key, -1);
	t->ca_key = b ? o.PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	if (b)
		o.BIO_free(b);
	t->server = o.SSL_CTX_new(o.TLS_server_method());
	t->client = o.SSL_CTX_new(o.TLS_client_method());
	if (!t->ca || !t->ca_key || !t->server || !t->client) {
		why_of(why, sizeof(why), "cannot read the sandbox's CA");
		sbx_err_set(err, SBX_E_STATE, "%s", why);
		return NULL; /* the supervisor gives up: a leak is moot */
	}
	o.SSL_CTX_ctrl(t->server, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	o.SSL_CTX_ctrl(t->client, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	o.SSL_CTX_set_alpn_select_cb(t->server, alpn_select, NULL);
	/* whole records in one read where they came together: fewer system calls */
	o.SSL_CTX_ctrl(t->server, SSL_CTRL_SET_READ_AHEAD, 1, NULL);
	o.SSL_CTX_ctrl(t->client, SSL_CTRL_SET_READ_AHEAD, 1, NULL);
	/* upstream sessions are resumed (kept by host below, not in OpenSSL's cache) */
	o.SSL_CTX_ctrl(t->client, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_CLIENT, NULL);
	/* the host's trust store: OpenSSL's default paths, SSL_CERT_FILE and SSL_CERT_DIR */
	o.SSL_CTX_set_default_verify_paths(t->client);
	o.SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
	return t;
}

/* the leaf for host, minted on the first use (the lock held) */
static struct leaf *leaf_for(struct local_tls *t, const char *host)
{
	for (size_t i = 0; i < t->n_leaves; i++)
		if (streq(t->leaves[i].host, host))
			return &t->leaves[i];
	EVP_PKEY *k = o.EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	struct in6_addr a;
	_cleanup_free_ char *san = xasprintf(
		"%s:%s",
		inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1 ? "IP"
											: "DNS",
		host);
	X509 *x = k ? make_cert(k, host, t->ca, t->ca_key, san, 30) : NULL;
	if (!x) {
		if (k)
			o.EVP_PKEY_free(k);
		return NULL;
	}
	struct leaf *l;
	if (t->n_leaves < LEAF_MAX) {
		l = &t->leaves[t->n_leaves++];
	} else { /* the oldest goes (an SSL using it holds a reference of its own) */
		l = &t->leaves[t->next++ % LEAF_MAX];
		o.X509_free(l->cert);
		o.EVP_PKEY_free(l->key);
		if (l->upstream)
			o.SSL_SESSION_free(l->upstream);
	}
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->cert = x;
	l->key = k;
	l->upstream = NULL;
	return l;
}

/* runs a handshake step until it completes or the deadline passes: 1, or 0 with why */
static int handshake(SSL *s, int fd, bool accept, long long deadline)
{
	for (;;) {
		int r = accept ? o.SSL_accept(s) : o.SSL_connect(s);
		if (r == 1)
			return 1;
		int e = o.SSL_get_error(s, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return 0;
		long long left = deadline - sbx_now_ms();
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd p = { .fd = fd,
				    .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT };
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return 0;
	}
}

struct local_tls_conn *local_tls_accept(struct local_tls *t, int fd, const char *host,
					int timeout_ms, char *why, size_t wlen)
{
	SSL *s = o.SSL_new(t->server);

	if (!s) {
		why_of(why, wlen, "cannot start TLS");
		return NULL;
	}
	pthread_mutex_lock(&t->lock);
	struct leaf *l = leaf_for(t, host);
	bool ok = l && o.SSL_use_certificate(s, l->cert) == 1 &&
		o.SSL_use_PrivateKey(s, l->key) == 1;
	pthread_mutex_unlock(&t->lock);
	if (!ok) {
		why_of(why, wlen, "cannot make a certificate for the host");
		o.SSL_free(s);
		return NULL;
	}
	o.SSL_set_fd(s, fd);
	int r = handshake(s, fd, true, sbx_now_ms() + timeout_ms);
	if (r <= 0) {
		if (r < 0)
			snprintf(why, wlen, "the sandbox's TLS handshake took over %d s",
				 timeout_ms / 1000);
		else
			why_of(why, wlen, "the sandbox's TLS handshake failed");
		o.SSL_free(s);
		return NULL;
	}
	struct local_tls_conn *c = xcalloc(1, sizeof(*c));
	c->ssl = s;
	c->fd = fd;
	return c;
}

struct local_tls_conn *local_tls_connect(struct local_tls *t, int fd, const char *host,
					 int timeout_ms, char *why, size_t wlen)
{
	SSL *s = o.SSL_new(t->client);

	if (!s) {
		why_of(why, wlen, "cannot start TLS");
		return NULL;
	}
	o.SSL_set_fd(s, fd);
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n_leaves; i++)
		if (streq(t->leaves[i].host, host) && t->leaves[i].upstream)
			o.SSL_set_session(s, t->leaves[i].upstream);
	pthread_mutex_unlock(&t->lock);
	o.SSL_ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)host);
	o.SSL_set1_host(s, host);
	o.SSL_set_alpn_protos(s, alpn_h1, sizeof(alpn_h1));
	int r = handshake(s, fd, false, sbx_now_ms() + timeout_ms);
	if (r <= 0) {
		long v = o.SSL_get_verify_result(s);
		if (r < 0)
			snprintf(why, wlen, "the TLS handshake with %s took over %d s", host,
				 timeout_ms / 1000);
		else if (v != X509_V_OK)
			snprintf(why, wlen, "the certificate of %s is not trusted: %s", host,
				 o.X509_verify_cert_error_string(v));
		else
			why_of(why, wlen, "the TLS handshake with the host failed");
		o.ERR_clear_error();
		o.SSL_free(s);
		return NULL;
	}
	struct local_tls_conn *c = xcalloc(1, sizeof(*c));
	c->ssl = s;
	c->fd = fd;
	c->t = t;
	snprintf(c->host, sizeof(c->host), "%s", host);
	return c;
}

long local_tls_read(struct local_tls_conn *c, void *buf, size_t len)
{
	int r = o.SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);

	if (r > 0)
		return r;
	int e = o.SSL_get_error(c->ssl, r);
	o.ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return -2;
	return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

int local_tls_write(struct local_tls_conn *c, const void *buf, size_t len, int timeout_ms)
{
	long long deadline = sbx_now_ms() + timeout_ms;
	const char *p = buf;

	while (len) {
		int n = len > (1 << 20) ? 1 << 20 : (int)len;
		int r = o.SSL_write(c->ssl, p, n);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		int e = o.SSL_get_error(c->ssl, r);
		o.ERR_clear_error();
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return -1;
		long long left = deadline - sbx_now_ms();
		struct pollfd pf = { .fd = c->fd,
				     .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT };
		if (left <= 0 || (poll(&pf, 1, (int)left) < 0 && errno != EINTR))
			return -1;
	}
	return 0;
}

bool local_tls_pending(struct local_tls_conn *c)
{
	return o.SSL_has_pending(c->ssl) == 1; /* read ahead: records not yet decrypted too */
}

void local_tls_close(struct local_tls_conn *c)
{
	if (!c)
		return;
	SSL_SESSION *ss = c->t ? o.SSL_get1_session(c->ssl) : NULL;
	if (ss && o.SSL_SESSION_is_resumable(ss)) { /* the next connection to the host resumes */
		pthread_mutex_lock(&c->t->lock);
		for (size_t i = 0; i < c->t->n_leaves && ss; i++)
			if (streq(c->t->leaves[i].host, c->host)) {
				if (c->t->leaves[i].upstream)
					o.SSL_SESSION_free(c->t->leaves[i].upstream);
				c->t->leaves[i].upstream = ss;
				ss = NULL;
			}
		pthread_mutex_unlock(&c->t->lock);
	}
	if (ss)
		o.SSL_SESSION_free(ss);
	(void)o.SSL_shutdown(c->ssl);
	o.ERR_clear_error();
	o.SSL_free(c->ssl);
	free(c);
}
