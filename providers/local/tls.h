/* OpenSSL for --secret, loaded on first use (libssl.so.3, libcrypto.so.3): a sandbox's CA,
 * the leaf certificates its supervisor presents for the hosts of its secrets, the TLS
 * contexts. Used by the CLI (create: the CA) and the supervisor (net-tls.c); a sandbox
 * without secrets never loads it. */
#ifndef SBX_PROVIDERS_LOCAL_TLS_H
#define SBX_PROVIDERS_LOCAL_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

/* loads OpenSSL (once); CONFIG naming the Debian package when it is missing */
int local_tls_load(struct sbx_err *err);
/* a new CA (an EC P-256 key, a self-signed certificate for ten years, CN naming label):
 * both in PEM, malloc'd */
int local_tls_make_ca(const char *label, char **ret_cert, char **ret_key, struct sbx_err *err);

struct local_tls;
/* the supervisor's: the CA (PEM) that signs leaves, a client context that verifies upstreams
 * against the host's trust store (OpenSSL's default paths: SSL_CERT_FILE applies) */
struct local_tls *local_tls_new(const char *ca_cert, const char *ca_key, struct sbx_err *err);
/* one TLS session over a connected socket */
struct local_tls_conn;
/* the sandbox's side: a leaf for host (minted once, kept), ALPN http/1.1 alone; the handshake
 * within timeout_ms; NULL with why */
struct local_tls_conn *local_tls_accept(struct local_tls *t, int fd, const char *host,
					int timeout_ms, char *why, size_t wlen);
/* the upstream's side: SNI host, its certificate verified for host; NULL with why */
struct local_tls_conn *local_tls_connect(struct local_tls *t, int fd, const char *host,
					 int timeout_ms, char *why, size_t wlen);
/* reads: > 0 bytes, 0 the end, -1 an error; -2 nothing now (a non-blocking socket) */
long local_tls_read(struct local_tls_conn *c, void *buf, size_t len);
/* writes all of it (waiting up to timeout_ms for the socket); 0 or -1 */
int local_tls_write(struct local_tls_conn *c, const void *buf, size_t len, int timeout_ms);
/* bytes already decrypted and waiting */
bool local_tls_pending(struct local_tls_conn *c);
void local_tls_close(struct local_tls_conn *c);

#endif
