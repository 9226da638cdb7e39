/* HTTP over libcurl (dlopen'ed on first use): the function table, debug output with secrets
 * redacted, and one request at a time for the hosted providers' REST and streaming calls. */
#ifndef SBX_CORE_HTTP_H
#define SBX_CORE_HTTP_H

#include <jansson.h>
#include <signal.h>

/* the deprecated bitmask options are the fallback for a libcurl older than 7.85 */
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>

#include "core/err.h"
#include "core/strbuf.h"

/* clang-format off */
#define SBX_CURL_FNS(X)                                                                  \
	X(global_init) X(easy_init) X(easy_setopt) X(easy_perform) X(easy_cleanup)       \
	X(easy_getinfo) X(easy_strerror) X(easy_reset) X(slist_append) X(slist_free_all) \
	X(mime_init) X(mime_addpart) X(mime_name) X(mime_filename) X(mime_type)          \
	X(mime_data_cb) X(mime_free)
/* clang-format on */

struct sbx_curl_fns {
#define X(f) __typeof__(curl_##f) *f;
	SBX_CURL_FNS(X)
#undef X
};

/* valid after sbx_curl_load() */
extern struct sbx_curl_fns sbx_curl;

/* loads libcurl.so.4 and initialises it (once per process; call before starting threads) */
int sbx_curl_load(struct sbx_err *err);

/* CURLOPT_DEBUGFUNCTION for --debug: headers with credentials and tokens redacted, no bodies */
int sbx_curl_debug(CURL *h, curl_infotype type, char *data, size_t n, void *u);
/* the host[:port] of a URL, for messages (never its path, query or user info) */
char *sbx_url_host(const char *url);
/* whether the URL's host is 127.0.0.0/8, ::1 or localhost */
bool sbx_url_is_loopback(const char *url);
bool sbx_curl_tls_error(CURLcode c);
/* a failure worth another attempt of an idempotent request */
bool sbx_curl_transient(CURLcode c);
/* http and https (plain) or https only, for requests and redirects */
int sbx_curl_protocols(CURL *h, bool plain);

/* --- one request -------------------------------------------------------------------------- */

struct sbx_http_req {
	const char *method;	    /* NULL: GET, or POST with a body */
	const char *url;	    /* http:// only to a loopback host */
	const char *const *headers; /* "Name: value", NULL-terminated */
	const char *body;	    /* a request body in memory (body_len bytes), or */
	size_t body_len;
	int body_fd; /* one read from this file of body_size bytes (-1: none) */
	long long body_size;
	const char *upload_name; /* with body_fd: a multipart/form-data part "file" named so */
	/* a 2xx body: handed to on_data as it arrives (return false to abort), or written to
	 * out_fd, or kept in resp->body (at most 16 MiB) */
	bool (*on_data)(const char *p, size_t n, void *arg);
	void *arg;
	int out_fd;		       /* -1: none */
	long long timeout_ms;	       /* the whole exchange (0: none) */
	long stall_s;		       /* no byte for this long: fail (0: 30) */
	volatile sig_atomic_t *cancel; /* non-zero: stop (checked about once a second) */
};

#define SBX_HTTP_REQ_INIT                   \
	{                                   \
		.body_fd = -1, .out_fd = -1 \
	}

struct sbx_http_resp {
	long status;	    /* 0: no answer */
	struct strbuf body; /* the body kept in memory (an error body is always kept, capped) */
	json_t *headers;    /* lowercase name -> last value */
	bool timed_out;	    /* timeout_ms passed */
	bool aborted;	    /* on_data said stop, or cancel was set */
	int write_errno;    /* out_fd failed */
};

void sbx_http_resp_release(struct sbx_http_resp *r);
const char *sbx_http_header(const struct sbx_http_resp *r, const char *lower_name);

/* performs req: 0 when an answer came (any status, resp->status set), -1 with err for a
 * transport failure (SBX_E_NETWORK: connect, TLS, timeout; names the host, never the path).
 * what: "E2B" or "Daytona", for messages. */
int sbx_http_perform(const struct sbx_http_req *req, struct sbx_http_resp *resp, const char *what,
		     struct sbx_err *err);

/* percent-encoding of a query value or path segment */
void sbx_url_escape(struct strbuf *sb, const char *s);

#endif
