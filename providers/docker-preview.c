/* The Docker provider's previews: a port published at create (--port) on the loopback of the
 * daemon's host, reached through sbx's forwarder with its token in front (providers/fwd.c):
 * over TCP for a daemon on this host (a unix socket, or tcp:// to loopback), through ssh's own
 * channel to the remote loopback for DOCKER_HOST=ssh:// (the same ssh options as the engine's
 * connections). The published port is looked up again when the way answers nothing (a
 * container started again after a release publishes anew). */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/dial.h"
#include "core/log.h"
#include "providers/fwd.h"
#include "providers/remote.h"

#define CONNECT_MS 10000

struct way {
	const struct sbx_record *rec;
	int port;	       /* inside */
	int host_port;	       /* published on the daemon's host, as last looked up */
	const char *ssh;       /* DOCKER_HOST=ssh://...: the record's; NULL: this host */
	struct sbx_dial *dial; /* ssh: the connection's own (a child per connection) */
};

/* the host port the daemon published port on: 0 when not published */
static int published(const struct docker *d, const struct sbx_record *rec, int port, int *ret_port,
		     struct sbx_err *err)
{
	_cleanup_json_ json_t *resp = NULL;
	_cleanup_free_ char *path = xasprintf("/containers/%s/json", rec->provider_id);
	struct docker_call c = { .path = path, .what = "look up the container" };

	if (docker_do(d, &c, &resp, err) < 0)
		return -1;
	_cleanup_free_ char *key = xasprintf("%d/tcp", port);
	json_t *ports = json_object_get(json_object_get(resp, "NetworkSettings"), "Ports");
	json_t *b = json_array_get(json_object_get(ports, key), 0);
	const char *hp = sbx_json_str(b, "HostPort");
	long long v;
	*ret_port = hp && sbx_parse_int(hp, 1, 65535, &v) == 0 ? (int)v : 0;
	return 0;
}

/* a TCP connection to 127.0.0.1:port, within CONNECT_MS */
static int connect_loopback(int port, int *ret_fd, char *why, size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0;
	socklen_t el = sizeof(e);

	if (fd < 0) {
		snprintf(why, n, "cannot make a socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (errno != EINPROGRESS || poll(&p, 1, CONNECT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e) {
			snprintf(why, n, "127.0.0.1:%d: %s", port,
				 strerror(e				 ? e
						  : errno == EINPROGRESS ? ETIMEDOUT
									 : errno));
			close(fd);
			return -1;
		}
	}
	(void)fcntl(fd, F_SETFL, 0);
	*ret_fd = fd;
	return 0;
}

/* --- in the forwarding process ------------------------------------------------------------ */

static void way_start(void *arg)
{
	/* the caller's ssh connections stay the caller's; this process makes its own */
	sbx_dial_shared_forget();
}

static int way_dial(void *arg, bool again, int *ret_fd, char *why, size_t n)
{
	struct way *w = arg;

	if (again || !w->host_port) {
		struct docker d = { 0 };
		struct sbx_err e = { 0 };
		int hp = 0, r = docker_init(&d, w->rec, &e);
		if (r == 0) {
			r = published(&d, w->rec, w->port, &hp, &e);
			docker_release(&d);
		}
		sbx_dial_shared_forget(); /* its ssh, if any, ends now */
		if (r < 0) {
			snprintf(why, n, "%s", e.msg);
			return -1;
		}
		if (!hp) {
			snprintf(why, n, "the port is no longer published");
			return -1;
		}
		w->host_port = hp;
	}
	if (!w->ssh)
		return connect_loopback(w->host_port, ret_fd, why, n);
	struct sbx_err e = { 0 };
	if (sbx_dial_new(w->ssh, &w->dial, &e) < 0) {
		snprintf(why, n, "%s", e.msg);
		return -1;
	}
	sbx_dial_forward(w->dial, w->host_port);
	if (sbx_dial_open(w->dial, ret_fd, &e) < 0) {
		snprintf(why, n, "%s", e.msg);
		sbx_dial_free(w->dial);
		w->dial = NULL;
		return -1;
	}
	return 0;
}

static void way_hangup(void *arg, int fd)
{
	struct way *w = arg;

	if (!w->dial) {
		close(fd);
		return;
	}
	(void)sbx_dial_close(w->dial, fd);
	if (w->dial->failed[0])
		sbx_debug("%s", w->dial->failed);
	sbx_dial_free(w->dial);
	w->dial = NULL;
}

/* --- sbx preview -------------------------------------------------------------------------- */

int docker_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		   const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };

	if (docker_need_id(rec, err) < 0)
		return -1;
	if (!o->port) {
		*ret = fwd_list(rec, "docker");
		return 0;
	}
	if (o->rm)
		return fwd_close(rec, "docker", o->port, err);
	if (remote_check_running("Docker", rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	if (!docker_ports_reachable(&d))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "cannot preview port %d of '%s': the Docker daemon at %s "
				   "publishes it on its own loopback, which sbx cannot reach from "
				   "here (DOCKER_HOST=ssh://HOST can)",
				   o->port, remote_label(rec), d.host);
	struct way w = { .rec = rec, .port = o->port, .ssh = d.dial ? d.host : NULL };
	if (published(&d, rec, o->port, &w.host_port, err) < 0)
		return -1;
	if (!w.host_port)
		return sbx_err_set(err, SBX_E_USAGE,
				   "port %d of '%s' is not published: Docker publishes ports at "
				   "create only ('sbx create --provider docker --net open --port "
				   "%d ...')",
				   o->port, remote_label(rec), o->port);
	_cleanup_free_ char *up = xasprintf("127.0.0.1:%d%s%s", w.host_port, w.ssh ? " via " : "",
					    w.ssh ? w.ssh : "");
	struct fwd_spec s = { .kind = "docker",
			      .port = o->port,
			      .upstream = up,
			      .start = way_start,
			      .dial = way_dial,
			      .hangup = way_hangup,
			      .arg = &w };
	return fwd_open(rec, &s, ret, err);
}
