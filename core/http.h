/* HTTP over libcurl (dlopen'ed on first use): the function table, debug output with secrets
 * redacted, and one request at a time for the hosted providers' REST and streaming calls. */
#ifndef SBX_CORE_HTTP_H
#define SBX_CORE_HTTP_H

#include <jansson.h>
#include <signal.h>

/* the deprecated bitmask options are the fallback for a libcurl older than 7.85 */
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>

#include "core/dial.h"
#include "core/digest.h"
#include "core/err.h"
#include "core/strbuf.h"

/* clang-format off */
#define SBX_CURL_FNS(X)                                                                  \
	X(global_init) X(easy_init) X(easy_setopt) X(easy_perform) X(easy_cleanup)       \
	X(easy_getinfo) X(easy_strerror) X(easy_reset) X(slist_append) X(slist_free_all) \
	X(mime_init) X(mime_addpart) X(mime_name) X(mime_filename) X(mime_type)          \
	X(mime_data_cb) X(mime_free) X(easy_send) X(easy_recv)
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

/* a connection kept between the requests of one caller (one thread), e.g. one image pull */
struct sbx_http_session {
	CURL *h;
};
void sbx_http_session_release(struct sbx_http_session *s);

struct sbx_http_req {
	const char *method;	    /* NULL: GET, or POST with a body */
	const char *url;	    /* http:// only to a loopback host */
	const char *const *headers; /* "Name: value", NULL-terminated */
	const char *body;	    /* a request body in memory (body_len bytes), or */
	size_t body_len;
	int body_fd; /* one read from this file of body_size bytes (-1: none) */
	long long body_size;
	/* or body_size bytes from this (a short read is the sender's end: the request fails) */
	ssize_t (*read_body)(char *buf, size_t n, void *arg);
	const char *upload_name; /* with body_fd: a multipart/form-data part "file" named so */
	/* a 2xx body: handed to on_data as it arrives (return false to abort), or written to
	 * out_fd, or kept in resp->body (at most 16 MiB) */
	bool (*on_data)(const char *p, size_t n, void *arg);
	void *arg;
	/* called once the final answer's head is in, before any of its body (or at its end when it
	 * has none), with its status and resp's header_list; with it, on_data takes the body of
	 * every status, not only 2xx (a relay). Returns false to stop. */
	bool (*on_head)(long status, const json_t *header_list, void *arg);
	bool path_as_is;      /* the URL's path goes as it is ("/../" not collapsed by libcurl) */
	int out_fd;	      /* -1: none */
	long long timeout_ms; /* the whole exchange (0: none) */
	long stall_s;	      /* no byte for this long: fail (0: 30) */
	volatile sig_atomic_t *cancel;	  /* non-zero: stop (checked about once a second) */
	struct sbx_http_session *session; /* NULL: a connection for this request alone */
	bool follow; /* follow up to 5 redirects (a custom Authorization stays with the first host) */
	bool insecure; /* plain http to any host, not only to loopback (the user asked for it) */
	long long max_body; /* a longer 2xx body fails (0: none; in memory at most 16 MiB anyway) */
	/* with out_fd, a file being filled: fed each byte written (a verified download), and
	 * written back every 2 MiB as it goes, so that an fsync at the end has little left to do */
	struct sbx_sha256 *sha;
	bool writeback;
	/* the 2xx body bytes so far, after each piece and about once a second (gets arg) */
	void (*on_progress)(long long got, void *arg);
	const char *fetching; /* what the request fetches ("the manifest"), for messages, or NULL */
	const char *tls_hint; /* appended to the message of a TLS failure */
	/* the transport: an AF_UNIX socket instead of the URL's host (plain http is fine over it);
	 * a CA bundle, a client certificate and its key (PEM files) for https */
	const char *unix_socket;
	const char *tls_ca, *tls_cert, *tls_key;
	/* connections through ssh (DOCKER_HOST=ssh://, core/dial.h) instead of to the URL's host,
	 * which is then only the Host header (plain http allowed: ssh is the transport) */
	struct sbx_dial *dial;
	/* called on the handle after sbx's own options (client certificates, a CA of a
	 * provider's configuration) */
	void (*setup)(CURL *h, void *arg);
	void *setup_arg;
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
	long long got;	    /* bytes of a 2xx body */
	bool too_big;	    /* the body passed max_body (or 16 MiB in memory) */
	bool transient;	    /* a transport failure worth another attempt of an idempotent request */
	json_t *header_list; /* every header of the last response, in order: [lowercase name, value] */
};

void sbx_http_resp_release(struct sbx_http_resp *r);
const char *sbx_http_header(const struct sbx_http_resp *r, const char *lower_name);

/* performs req: 0 when an answer came (any status, resp->status set), -1 with err for a
 * transport failure (SBX_E_NETWORK: connect, TLS, timeout; names the host, never the path;
 * SBX_E_REMOTE: a body over its cap, a redirect refused). what: who answers, for messages
 * ("E2B", "Daytona", "registry"). The one place that sets libcurl's options and words its errors. */
int sbx_http_perform(const struct sbx_http_req *req, struct sbx_http_resp *resp, const char *what,
		     struct sbx_err *err);

/* connects as req would (its URL, transport and timeouts) and stops there, for a protocol of
 * the caller's own over the connection (an HTTP upgrade): *ret a handle whose
 * curl_easy_send/recv move the bytes (the caller cleans it up), *ret_fd its socket to poll */
int sbx_http_connect(const struct sbx_http_req *req, CURL **ret, int *ret_fd, const char *what,
		     struct sbx_err *err);

/* percent-encoding of a query value or path segment */
void sbx_url_escape(struct strbuf *sb, const char *s);

#endif
