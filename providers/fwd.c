/* Previews through a forwarding process of sbx's with the preview's token in front (fwd.h):
 * the CLI's side (open, list, close: the state files) and the forwarding process (the listener,
 * and a child per connection that checks the token and splices). */
#define _GNU_SOURCE
#include "providers/fwd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/proc.h"
#include "core/util.h"
#include "providers/local/net.h"
#include "providers/remote.h"

#define HEAD_S 30     /* a client's first request head, at most */
#define IDLE_S 300    /* a spliced connection with no byte either way */
#define CHECK_MS 5000 /* how often the forwarder looks whether its sandbox is still there */
#define CONNS_MAX 16  /* connections served at once */
#define PORTS_MAX 256

static char *state_path(const struct sbx_record *rec, const char *kind, int port)
{
	return xasprintf("%s/%s-preview-%d.json", rec->dir, kind, port);
}

/* the state of port's preview, when its forwarder runs (a stale file is removed) */
static json_t *state_load(const struct sbx_record *rec, const char *kind, int port)
{
	_cleanup_free_ char *p = state_path(rec, kind, port);
	size_t n = 0;
	_cleanup_free_ char *t = sbx_read_file(p, 65536, &n);
	json_error_t je;
	json_t *j = t ? json_loadb(t, n, 0, &je) : NULL;
	long long pid = sbx_json_int(j, "pid", 0), start = sbx_json_int(j, "start", 0);

	if (j && (pid <= 0 || !sbx_proc_alive((pid_t)pid, (unsigned long long)start))) {
		json_decref(j);
		(void)unlink(p);
		return NULL;
	}
	return j;
}

/* the object sbx preview prints */
static json_t *preview_json(const json_t *st)
{
	int hp = (int)sbx_json_int(st, "host_port", 0);
	const char *tok = sbx_json_str(st, "token"), *up = sbx_json_str(st, "upstream");
	_cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/?sbx_token=%s", hp, tok);

	return json_pack("{s:s, s:I, s:i, s:b, s:b, s:s, s:o}", "url", url, "port",
			 sbx_json_int(st, "port", 0), "host_port", hp, "public", 0, "auth", 1,
			 "token", tok, "upstream", up ? json_string(up) : json_null());
}

static void stop(const json_t *st)
{
	long long pid = sbx_json_int(st, "pid", 0), start = sbx_json_int(st, "start", 0);

	if (pid > 0 && sbx_proc_alive((pid_t)pid, (unsigned long long)start))
		(void)kill((pid_t)pid, SIGTERM);
}

/* the ports of kind with a state file, at most max */
static size_t ports_of(const struct sbx_record *rec, const char *kind, int *ports, size_t max)
{
	_cleanup_free_ char *prefix = xasprintf("%s-preview-", kind);
	DIR *d = rec->dir ? opendir(rec->dir) : NULL;
	struct dirent *e;
	size_t n = 0, pl = strlen(prefix);

	while (d && n < max && (e = readdir(d))) {
		long long port;
		if (strncmp(e->d_name, prefix, pl) != 0)
			continue;
		_cleanup_free_ char *s = xstrndup(e->d_name + pl, strcspn(e->d_name + pl, "."));
		if (sbx_parse_int(s, 1, 65535, &port) == 0)
			ports[n++] = (int)port;
	}
	if (d)
		closedir(d);
	return n;
}

/* --- a connection ------------------------------------------------------------------------- */

static void answer(int c, int code, const char *reason, const char *extra, const char *body)
{
	_cleanup_free_ char *h = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
					   "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s",
					   code, reason, strlen(body), extra ? extra : "", body);
	(void)sbx_write_all(c, h, strlen(h));
}

/* both ways until both ends are done, or nothing moves for IDLE_S, or the way ends before it
 * answered a byte; the bytes that came back in *ret_down, and (more) whether the client sent
 * any beyond what was read before */
static void splice_both(int c, int up, long long *ret_down, bool *more)
{
	char buf[65536];
	bool open[2] = { true, true }; /* c -> up, up -> c */

	while (open[0] || open[1]) {
		struct pollfd p[2] = { { .fd = open[0] ? c : -1, .events = POLLIN },
				       { .fd = open[1] ? up : -1, .events = POLLIN } };
		int r = poll(p, 2, IDLE_S * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			int from = i ? up : c, to = i ? c : up;
			ssize_t n = read(from, buf, sizeof(buf));
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0 && i && !*ret_down)
				return; /* nothing answered: the client is told, or it tries again */
			if (n <= 0) {
				open[i] = false;
				(void)shutdown(to, SHUT_WR);
				continue;
			}
			if (sbx_write_all(to, buf, (size_t)n) < 0)
				return;
			if (i)
				*ret_down += n;
			else
				*more = true;
		}
	}
}

static void serve_one(const struct fwd_spec *s, const char *token, int host_port, int c)
{
	char head[LOCAL_HEAD_MAX + 1];
	size_t len = 0, hl = 0;

	while (!hl) {
		if (len == LOCAL_HEAD_MAX)
			return answer(c, 431, "Request Header Fields Too Large", NULL,
				      "sbx: the request head is over 16 KiB\n");
		ssize_t r = read(c, head + len, LOCAL_HEAD_MAX - len);
		if (r <= 0)
			return;
		size_t was = len;
		len += (size_t)r;
		hl = local_http_head_len(head, len, was);
	}
	head[len] = 0;
	_cleanup_free_ char *loc = NULL;
	switch (local_preview_token(head, hl, token, &loc)) {
	case LOCAL_TOKEN_OK:
		break;
	case LOCAL_TOKEN_REDIRECT: {
		_cleanup_free_ char *hdr = xasprintf(
			"Location: %s\r\nSet-Cookie: sbx_preview_token_%d=%s; HttpOnly; Path=/; "
			"SameSite=Lax\r\n",
			loc, host_port, token);
		return answer(c, 302, "Found", hdr, "sbx: signed in to this preview\n");
	}
	case LOCAL_TOKEN_BAD:
		return answer(c, 400, "Bad Request", NULL,
			      "sbx: this preview takes HTTP/1.x requests\n");
	default:
		return answer(c, 401, "Unauthorized", NULL,
			      "sbx: this preview needs its token: open the URL 'sbx preview' "
			      "printed, or send the header X-Sbx-Preview-Token\n");
	}
	if (s->serve)
		return s->serve(s->arg, c, head, hl, len);
	/* the client's bytes so far (its head, perhaps more) go first; a way that answers
	 * nothing is looked up once more (a container started again publishes anew) */
	char why[300] = "";
	for (int attempt = 0; attempt < 2; attempt++) {
		int up = -1;
		long long down = 0;
		bool more = false;
		if (s->dial(s->arg, attempt > 0, &up, why, sizeof(why)) < 0)
			continue; /* the way it knew is closed: looked up again */
		struct timeval none = { 0, 0 };
		(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
		if (sbx_write_all(up, head, len) == 0)
			splice_both(c, up, &down, &more);
		s->hangup(s->arg, up);
		if (down || more)
			return;
		snprintf(why, sizeof(why), "nothing answered");
	}
	_cleanup_free_ char *body = xasprintf("sbx: cannot reach port %d of the sandbox: %s\n",
					      s->port, why);
	answer(c, 502, "Bad Gateway", NULL, body);
}

/* each connection in a child of its own, at most CONNS_MAX at once */
static void serve(const struct fwd_spec *s, const char *token, int host_port, int lfd,
		  const char *record)
{
	struct timeval tv = { HEAD_S, 0 };
	int live = 0;

	for (;;) {
		while (live > 0 && waitpid(-1, NULL, WNOHANG) > 0)
			live--;
		struct pollfd p = { .fd = lfd, .events = live < CONNS_MAX ? POLLIN : 0 };
		int r = poll(&p, 1, live < CONNS_MAX ? CHECK_MS : 100);
		if (access(record, F_OK) < 0)
			_exit(0); /* the sandbox was removed */
		if (r <= 0 || live >= CONNS_MAX)
			continue;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		(void)setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		pid_t child = fork();
		if (child == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(lfd);
			if (s->conn_max_s > 0)
				alarm((unsigned)s->conn_max_s);
			serve_one(s, token, host_port, c);
			_exit(0);
		}
		if (child > 0)
			live++;
		close(c);
	}
}

/* the forwarder, detached: its pid through a pipe */
static int spawn(const struct sbx_record *rec, const struct fwd_spec *s, const char *token,
		 int host_port, int lfd, pid_t *ret_pid, struct sbx_err *err)
{
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot make a pipe");
	_cleanup_free_ char *record = xasprintf("%s/sandbox.json", rec->dir);
	fflush(NULL);
	pid_t a = fork();
	if (a < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (a == 0) {
		(void)setsid();
		pid_t b = fork();
		if (b != 0)
			_exit(b < 0);
		pid_t me = getpid();
		(void)!write(pfd[1], &me, sizeof(me));
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			(void)dup2(nul, 0);
			(void)dup2(nul, 1);
			(void)dup2(nul, 2);
		}
		if (s->start)
			s->start(s->arg); /* before close_range: what it drops, it closes */
		if (dup2(lfd, 3) < 0)
			_exit(1);
		(void)close_range(4, ~0U, 0); /* the record's lock, the pipe, the caller's */
		struct sigaction sa = { .sa_handler = SIG_IGN };
		(void)sigaction(SIGPIPE, &sa, NULL);
		(void)sigaction(SIGHUP, &sa, NULL);
		sa.sa_handler = SIG_DFL;
		(void)sigaction(SIGTERM, &sa, NULL);
		(void)sigaction(SIGINT, &sa, NULL);
		serve(s, token, host_port, 3, record);
		_exit(0);
	}
	close(pfd[1]);
	int st;
	while (waitpid(a, &st, 0) < 0 && errno == EINTR)
		;
	pid_t pid = 0;
	ssize_t n = read(pfd[0], &pid, sizeof(pid));
	close(pfd[0]);
	if (n != sizeof(pid) || pid <= 0)
		return sbx_err_set(err, SBX_E_SYSTEM, "the preview's forwarder did not start");
	*ret_pid = pid;
	return 0;
}

int fwd_open(const struct sbx_record *rec, const struct fwd_spec *s, json_t **ret,
	     struct sbx_err *err)
{
	_cleanup_json_ json_t *old = state_load(rec, s->kind, s->port);
	_cleanup_close_ int lfd = -1;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char token[LOCAL_TOKEN_LEN + 1];

	if (old) {
		*ret = preview_json(old);
		return 0;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		return sbx_err_errno(err, "cannot listen on 127.0.0.1 for the preview");
	int host_port = ntohs(sa.sin_port);
	remote_random_hex(token, LOCAL_TOKEN_LEN);
	pid_t pid = 0;
	if (spawn(rec, s, token, host_port, lfd, &pid, err) < 0)
		return -1;
	unsigned long long start = 0;
	(void)sbx_proc_starttime(pid, &start);
	_cleanup_json_ json_t *st = json_pack("{s:i, s:i, s:I, s:I, s:s}", "port", s->port,
					      "host_port", host_port, "pid", (json_int_t)pid,
					      "start", (json_int_t)start, "token", token);
	if (s->upstream)
		json_object_set_new(st, "upstream", json_string(s->upstream));
	_cleanup_free_ char *text = json_dumps(st, JSON_COMPACT);
	_cleanup_free_ char *p = state_path(rec, s->kind, s->port);
	if (sbx_write_atomic(p, text, strlen(text), false, err) < 0) {
		stop(st);
		return -1;
	}
	*ret = preview_json(st);
	return 0;
}

json_t *fwd_list(const struct sbx_record *rec, const char *kind)
{
	json_t *a = json_array();
	int ports[PORTS_MAX];
	size_t n = ports_of(rec, kind, ports, ARRAY_SIZE(ports));

	for (size_t i = 0; i < n; i++) {
		_cleanup_json_ json_t *st = state_load(rec, kind, ports[i]);
		if (st)
			json_array_append_new(a, preview_json(st));
	}
	return a;
}

int fwd_close(const struct sbx_record *rec, const char *kind, int port, struct sbx_err *err)
{
	_cleanup_json_ json_t *st = state_load(rec, kind, port);

	if (!st)
		return sbx_err_set(err, SBX_E_NOTFOUND, "sandbox '%s' has no preview of port %d",
				   remote_label(rec), port);
	stop(st);
	_cleanup_free_ char *p = state_path(rec, kind, port);
	(void)unlink(p);
	return 0;
}

void fwd_stop_all(const struct sbx_record *rec, const char *kind)
{
	int ports[PORTS_MAX];
	size_t n = ports_of(rec, kind, ports, ARRAY_SIZE(ports));

	for (size_t i = 0; i < n; i++) {
		_cleanup_json_ json_t *st = state_load(rec, kind, ports[i]);
		if (st)
			stop(st);
	}
}
