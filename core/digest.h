/* sha256 through OpenSSL's libcrypto, dlopen'ed on first use like libcurl and libarchive. */
#ifndef SBX_CORE_DIGEST_H
#define SBX_CORE_DIGEST_H

#include <stddef.h>

#include "core/err.h"

struct sbx_sha256 {
	void *ctx; /* an EVP_MD_CTX */
};

/* starts a digest (loads libcrypto.so.3 the first time) */
int sbx_sha256_init(struct sbx_sha256 *h, struct sbx_err *err);
void sbx_sha256_update(struct sbx_sha256 *h, const void *data, size_t len);
/* "sha256:" and 64 lowercase hex digits into out (at least 72 bytes); frees the context */
void sbx_sha256_final(struct sbx_sha256 *h, char out[72]);
/* frees a context that will not be finished (safe on one never started or finished) */
void sbx_sha256_release(struct sbx_sha256 *h);
/* the digest of a whole buffer, or of a file's content */
int sbx_sha256_buf(const void *data, size_t len, char out[72], struct sbx_err *err);
int sbx_sha256_file(const char *path, char out[72], struct sbx_err *err);
/* "sha256:" + 64 lowercase hex digits, nothing else */
bool sbx_digest_valid(const char *d);

#endif
