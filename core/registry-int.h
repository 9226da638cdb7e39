/* What the registry client's files share. Which file does what (each calls only those below it):
 *   registry.c        manifests (through image indexes to one platform), then the pull itself
 *   registry-fetch.c  one GET with the session's credentials and retries; blobs into the store
 *   registry-auth.c   answering a 401: docker's credentials, Basic, Bearer tokens from a realm
 *   registry-parse.c  references, challenges, platforms, bounded JSON: parsing only, no I/O
 * Every request goes through core/http.c. */
#ifndef SBX_CORE_REGISTRY_INT_H
#define SBX_CORE_REGISTRY_INT_H

#include "core/digest.h"
#include "core/http.h"
#include "core/registry.h"
#include "core/strbuf.h"

#define REG_WHAT "registry" /* who answers, in core/http.c's messages */

/* one pull's session with one registry */
struct reg_sess {
	const struct sbx_ref *ref;
	const char *images;	      /* IMAGES_DIR */
	struct sbx_http_session http; /* one connection kept between the pull's requests */
	char *base;		      /* "https://HOST/v2/REPO/" */
	bool plain;		      /* plain http allowed (loopback or --insecure) */
	long stall;		      /* seconds without a byte that fail a transfer */
	bool progress;
	char *auth; /* "Authorization: ..." for the registry, or NULL */
	bool creds_loaded;
	int have_creds;
	struct sbx_registry_creds creds;
	const struct sbx_pull_opts *o;
};

/* --- registry-auth.c ------------------------------------------------------------------------ */

/* " (CODE: message)" from a registry's {"errors": [...]} body, or "" */
char *reg_message(const struct strbuf *body);
/* SBX_E_REMOTE: access denied to the repository, with what to do; returns -1 */
int reg_access_denied(struct reg_sess *s, long status, const struct strbuf *body,
		      struct sbx_err *err);
/* answers a 401 (its WWW-Authenticate challenge): Bearer -> a token, Basic -> the configured
 * credentials; sets s->auth */
int reg_authenticate(struct reg_sess *s, const struct sbx_http_resp *r, struct sbx_err *err);

/* --- registry-fetch.c ----------------------------------------------------------------------- */

/* GET url (an Accept header line or NULL) with the session's auth, answering a 401 once and
 * trying a 5xx or a broken transfer 3 times. The body of a 2xx answer lands in resp->body (at
 * most limit bytes), or in fd (truncated first) with its sha256 in *sha (restarted). Returns the
 * final HTTP status (2xx, or a 4xx other than 401/403 for the caller to word), or -1 with err. */
struct reg_get {
	const char *what;	/* "the manifest", "blob sha256:..." */
	int fd;			/* -1: the body in memory */
	struct sbx_sha256 *sha; /* with fd */
	long long limit;	/* most bytes accepted */
	const char *label;	/* progress on stderr under this label (12 hex), or NULL */
	bool shown;		/* a progress line is on the screen */
	long long t0, tlast;	/* start, last progress line */
};
long reg_get(struct reg_sess *s, const char *url, const char *accept, struct reg_get *g,
	     struct sbx_http_resp *resp, struct sbx_err *err);
/* SBX_E_REMOTE for an unexpected status while fetching WHAT; returns -1 */
int reg_http_failed(const struct sbx_http_resp *r, const char *what, struct sbx_err *err);

/* what the pull's caller wants told before a digest is looked for (sbx_pull_opts.hold) */
int reg_hold(const struct reg_sess *s, const char *digest, struct sbx_err *err);
char *reg_blob_path(const struct reg_sess *s, const char *digest);
/* bytes already in memory (a manifest) into the store as blob DIGEST */
int reg_store_bytes(const struct reg_sess *s, const char *digest, const char *data, size_t n,
		    struct sbx_err *err);
/* one blob into the store, verified; already there (at the right size) counts as done */
int reg_fetch_blob(struct reg_sess *s, const char *digest, long long size, bool progress,
		   struct sbx_err *err);

#endif
