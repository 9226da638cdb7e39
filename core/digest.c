/* sha256 through libcrypto (OpenSSL 3), reached with dlopen on first use. */
#define _GNU_SOURCE
#include "core/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/lazy.h"
#include "core/util.h"

struct sbx_lazy_lib sbx_lazy_crypto = { "libcrypto.so.3", "libssl3", NULL };

static struct {
	void *(*ctx_new)(void);
	void (*ctx_free)(void *);
	const void *(*sha256)(void);
	int (*init)(void *, const void *, void *);
	int (*update)(void *, const void *, size_t);
	int (*final)(void *, unsigned char *, unsigned int *);
} ev;

static int load(struct sbx_err *err)
{
	static const char *const names[] = { "EVP_MD_CTX_new",	 "EVP_MD_CTX_free",
					     "EVP_sha256",	 "EVP_DigestInit_ex",
					     "EVP_DigestUpdate", "EVP_DigestFinal_ex" };
	if (ev.final)
		return 0;
	void *fns[ARRAY_SIZE(names)];
	if (sbx_lazy_load(&sbx_lazy_crypto, names, fns, ARRAY_SIZE(names), err) < 0)
		return -1;
	ev.ctx_new = (void *(*)(void))fns[0];
	ev.ctx_free = (void (*)(void *))fns[1];
	ev.sha256 = (const void *(*)(void))fns[2];
	ev.init = (int (*)(void *, const void *, void *))fns[3];
	ev.update = (int (*)(void *, const void *, size_t))fns[4];
	ev.final = (int (*)(void *, unsigned char *, unsigned int *))fns[5];
	return 0;
}

int sbx_sha256_init(struct sbx_sha256 *h, struct sbx_err *err)
{
	h->ctx = NULL;
	if (load(err) < 0)
		return -1;
	h->ctx = ev.ctx_new();
	if (!h->ctx || ev.init(h->ctx, ev.sha256(), NULL) != 1) {
		sbx_sha256_release(h);
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot start a sha256 digest (libcrypto)");
	}
	return 0;
}

void sbx_sha256_update(struct sbx_sha256 *h, const void *data, size_t len)
{
	if (h->ctx && len)
		(void)ev.update(h->ctx, data, len);
}

void sbx_sha256_final(struct sbx_sha256 *h, char out[72])
{
	unsigned char md[32];
	unsigned int n = 0;

	memcpy(out, "sha256:", 7);
	if (!h->ctx || ev.final(h->ctx, md, &n) != 1 || n != 32)
		memset(md, 0, sizeof(md));
	for (int i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	sbx_sha256_release(h);
}

void sbx_sha256_release(struct sbx_sha256 *h)
{
	if (h->ctx)
		ev.ctx_free(h->ctx);
	h->ctx = NULL;
}

int sbx_sha256_buf(const void *data, size_t len, char out[72], struct sbx_err *err)
{
	struct sbx_sha256 h;

	if (sbx_sha256_init(&h, err) < 0)
		return -1;
	sbx_sha256_update(&h, data, len);
	sbx_sha256_final(&h, out);
	return 0;
}

int sbx_sha256_file(const char *path, char out[72], struct sbx_err *err)
{
	struct sbx_sha256 h;
	char buf[65536];
	ssize_t n;

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_errno(err, "cannot open '%s'", path);
	if (sbx_sha256_init(&h, err) < 0) {
		close(fd);
		return -1;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			sbx_sha256_release(&h);
			close(fd);
			errno = e;
			return sbx_err_errno(err, "cannot read '%s'", path);
		}
		sbx_sha256_update(&h, buf, (size_t)n);
	}
	close(fd);
	sbx_sha256_final(&h, out);
	return 0;
}

bool sbx_digest_valid(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71)
		return false;
	for (const char *p = d + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}
