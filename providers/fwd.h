/* Previews through a forwarding process of sbx's, for providers whose engine cannot check sbx's
 * token itself: sbx preview forks it (detached, a session of its own), it listens on 127.0.0.1,
 * lets in a client that has the preview's token (the URL's sbx_token, then a cookie, or an
 * X-Sbx-Preview-Token header: providers/local/net.h's rules) and then splices the connection
 * to what the provider's dial gives (a port published on this host, an ssh channel), both
 * ways, or hands it to the provider's own serve (a request relayed through an API). Each
 * connection in a child of its own (16 at once, its head in 30 s, idle 5 minutes at most); the
 * process ends with preview --rm, with rm (fwd_stop_all), or once the record is gone.
 * Its state (pid, start time, ports, token) is a file in the sandbox's directory. */
#ifndef SBX_PROVIDERS_FWD_H
#define SBX_PROVIDERS_FWD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/store.h"

struct fwd_spec {
	const char *kind; /* "docker": the state file is DIR/KIND-preview-PORT.json */
	int port;	  /* inside the sandbox */
	char *upstream;	  /* where it forwards, as preview's listing shows it (or NULL) */
	/* in the forwarding process, before it serves: drop what of the caller's it must not
	 * use (connections, cached state) */
	void (*start)(void *arg);
	/* in a connection's child: a connected stream socket to the port (again: the last one
	 * answered nothing, look the way up again); -1 with a one-line why */
	int (*dial)(void *arg, bool again, int *ret_fd, char *why, size_t n);
	/* after the connection: fd closed, and what dial started for it ended */
	void (*hangup)(void *arg, int fd);
	/* or, in place of dial and hangup: in a connection's child, once the client showed the
	 * token, serves client c itself; head holds the len bytes read so far (NUL-terminated),
	 * the request head their first hl */
	void (*serve)(void *arg, int c, const char *head, size_t hl, size_t len);
	int conn_max_s; /* a connection's whole time, at most (0: bounded by idleness alone) */
	void *arg;
};

/* the preview of port s->port: the open one, or a new forwarder; *ret the object preview
 * prints ({url, port, host_port, public, auth, token, upstream}) */
int fwd_open(const struct sbx_record *rec, const struct fwd_spec *s, json_t **ret,
	     struct sbx_err *err);
/* the open previews of kind, as an array of such objects */
json_t *fwd_list(const struct sbx_record *rec, const char *kind);
/* ends the preview of port (NOTFOUND when there is none) */
int fwd_close(const struct sbx_record *rec, const char *kind, int port, struct sbx_err *err);
/* ends every preview forwarder of kind (rm) */
void fwd_stop_all(const struct sbx_record *rec, const char *kind);

#endif
