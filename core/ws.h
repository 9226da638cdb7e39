/* A WebSocket client (RFC 6455) over libcurl: libcurl connects (DNS, proxies, TLS, certificates,
 * timeouts) and moves the bytes; this code does the upgrade and the framing. When the libcurl
 * loaded has its own WebSocket support (curl_ws_send/recv), that is used instead. */
#ifndef SBX_CORE_WS_H
#define SBX_CORE_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/http.h"
#include "core/strbuf.h"

enum {
	SBX_WS_CONT = 0x0,
	SBX_WS_TEXT = 0x1,
	SBX_WS_BINARY = 0x2,
	SBX_WS_CLOSE = 0x8,
	SBX_WS_PING = 0x9,
	SBX_WS_PONG = 0xa,
};

#define SBX_WS_MSG_MAX (16 << 20) /* a longer message (all its fragments) is refused */

/* one frame as read from the wire */
struct sbx_ws_frame {
	bool fin;
	int opcode;
	const uint8_t *payload; /* unmasked in place */
	uint64_t len;
};

/* parses one frame at buf (n bytes); a server's frames must not be masked (server false: a
 * client's, which must be): the bytes the frame took, 0 when more are needed, -1 with err for
 * a malformed one. Unmasks the payload in buf. */
long sbx_ws_parse_frame(uint8_t *buf, size_t n, bool server, struct sbx_ws_frame *ret,
			struct sbx_err *err);
/* appends one frame; mask: a client's 4-byte key (NULL: unmasked, a server's) */
void sbx_ws_build_frame(struct strbuf *sb, int opcode, bool fin, const void *data, size_t n,
			const uint8_t *mask);
/* the Sec-WebSocket-Accept for a Sec-WebSocket-Key (malloc'd) */
char *sbx_ws_accept_for(const char *key);

/* reassembles messages out of frames: feed bytes, take messages */
struct sbx_ws_reader {
	struct strbuf in; /* bytes not parsed yet */
	size_t off;
	struct strbuf msg; /* the fragments of a message so far */
	int msg_op;	   /* its opcode, 0: none under way */
};
void sbx_ws_reader_release(struct sbx_ws_reader *r);
/* the next whole message (a control frame is one), 1; 0 when more bytes are needed; -1 with
 * err for a protocol error. *ret_data stays valid until the next call. */
int sbx_ws_reader_next(struct sbx_ws_reader *r, int *ret_op, const uint8_t **ret_data,
		       size_t *ret_len, struct sbx_err *err);

struct sbx_ws_opts {
	const char *url;	    /* http:// (loopback) or https:// */
	const char *const *headers; /* "Name: value" lines, NULL-terminated */
	const char *protocols;	    /* Sec-WebSocket-Protocol offered (comma list), or NULL */
	/* called on the libcurl handle after sbx's own options: credentials, CAs */
	void (*setup)(CURL *h, void *arg);
	void *setup_arg;
	long long connect_timeout_ms; /* the connection and the upgrade (0: 30 s) */
	const char *what;	      /* who answers, for messages ("Kubernetes") */
	/* the URL as --debug shows it (values in its query that are secrets redacted), or NULL:
	 * url itself */
	const char *debug_url;
	const char *tls_hint; /* appended to a TLS failure's message */
};

struct sbx_ws {
	CURL *h;
	int fd;
	bool curl_ws; /* libcurl's own WebSocket API */
	struct sbx_ws_reader rd;
	char *protocol; /* the subprotocol the server chose, or NULL */
	bool close_sent, close_got;
	int close_code; /* the server's (0: none given) */
	char *what;
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's words on the last failure (TLS alerts...) */
};

/* a failed upgrade: the status and the body of the server's answer (capped) */
struct sbx_ws_refusal {
	long status;
	struct strbuf body;
	char *retry_after;
};

/* connects and upgrades; -1 with err, and *refusal filled when the server answered with
 * something other than 101 (refusal may be NULL). Both ways report a refusal alike: libcurl's
 * WebSocket API reads only a refusal's head, so the upgrade is then asked again with sbx's
 * framing, which reads its Retry-After and its body */
int sbx_ws_connect(struct sbx_ws *ws, const struct sbx_ws_opts *o, struct sbx_ws_refusal *refusal,
		   struct sbx_err *err);
void sbx_ws_close(struct sbx_ws *ws);
/* a header line "Name: value\r\n" of that name (any case): its value trimmed into *ret,
 * unless *ret is set already (the first one counts); false when it is another */
bool sbx_ws_header_value(const char *line, size_t n, const char *name, char **ret);
void sbx_ws_refusal_release(struct sbx_ws_refusal *r);
/* the socket to poll for reading */
int sbx_ws_fd(const struct sbx_ws *ws);
/* sends one whole message (blocking) */
int sbx_ws_send(struct sbx_ws *ws, int opcode, const void *data, size_t n, struct sbx_err *err);
/* the next message without blocking: 1 with it (pings are answered here and not returned; a
 * close is returned, and answered), 0 when none is complete yet, -1 with err (the connection
 * ended without a close: SBX_E_NETWORK) */
int sbx_ws_recv(struct sbx_ws *ws, int *ret_op, const uint8_t **ret_data, size_t *ret_len,
		struct sbx_err *err);

#endif
