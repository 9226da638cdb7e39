/* The Docker provider's exec: an exec instance started over a hijacked connection (raw stdin
 * up, 8-byte-framed stdout and stderr down, or one raw stream with a tty), its end read from
 * the exec's inspect; a command the runtime could not start told apart from one that ran (by
 * the runtime's own words, held back meanwhile); --timeout and interrupts through
 * docker_kill_exec (docker-proc.c). */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "core/log.h"
#include "providers/remote.h"

#define HEAD_MAX 16384
#define HELD_MAX 4096
/* after --timeout's kill, how long the stream may stay open (a process that escaped holds it) */
#define TIMEOUT_GRACE_MS 2000
/* how the runtime says a command could not start: Docker on stdout (exec's Pid 0), also for an
 * unknown -u; Podman on stderr; runc's last words when a file it found could not be executed
 * (a missing #! interpreter), on stderr with status 1 */
#define RUNTIME_FAILED "OCI runtime exec failed"
#define RUNTIME_NO_USER "unable to find "
#define RUNTIME_FAILED_PODMAN "Error: "
#define RUNTIME_EXEC "exec "
#define RUNTIME_ENOENT ": no such file or directory"

struct sink {
	int fd;		    /* -1: buf (or dropped) */
	struct strbuf *buf; /* NULL with fd -1: dropped */
};

struct run {
	char *const *argv;
	char *const *env;
	const char *cwd, *user;
	bool tty, stdin_open;
	bool quiet_args; /* sbx's own command (cp, logs): a bad argument is named by its value */
	bool podman;	 /* the engine is Podman's (how it words a failure) */
	long long timeout_ms;
	struct sink out, err;
	struct sbx_exec_result *res;
};

static int sink_put(const struct sink *s, const char *p, size_t n)
{
	if (s->fd >= 0)
		return sbx_write_all(s->fd, p, n);
	if (s->buf && s->buf->len < (64u << 20))
		strbuf_add(s->buf, p, n);
	return 0;
}

/* --- the hijacked connection ---------------------------------------------------------------- */

struct conn {
	CURL *h;
	int fd;
	char in[65536];
	size_t in_len;
};

static void conn_close(struct conn *c)
{
	if (c->h)
		sbx_curl.easy_cleanup(c->h);
	c->h = NULL;
}

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r;
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR && !remote_got_signal);
	return r;
}

static int conn_send(struct conn *c, const char *p, size_t n, struct sbx_err *err)
{
	while (n) {
		size_t sent = 0;
		CURLcode r = sbx_curl.easy_send(c->h, p, n, &sent);
		if (r == CURLE_AGAIN) {
			if (wait_fd(c->fd, POLLOUT, 30000) <= 0)
				return sbx_err_set(err, SBX_E_NETWORK,
						   "the Docker daemon stopped reading");
			continue;
		}
		if (r != CURLE_OK)
			return sbx_err_set(err, SBX_E_NETWORK,
					   "the connection to the Docker daemon broke: %s",
					   sbx_curl.easy_strerror(r));
		p += sent;
		n -= sent;
	}
	return 0;
}

/* what is there now: >0 bytes, 0 at the end, -2 nothing yet, -1 a broken connection */
static ssize_t conn_recv(struct conn *c, char *buf, size_t n)
{
	size_t got = 0;
	CURLcode r = sbx_curl.easy_recv(c->h, buf, n, &got);
	if (r == CURLE_AGAIN)
		return -2;
	if (r != CURLE_OK)
		return -1;
	return (ssize_t)got;
}

/* POST path with body over a new connection, upgraded to the raw stream: 0 with the bytes
 * after the answer's head in c->in; -1 with the daemon's refusal or a transport failure */
static int conn_open(const struct docker *d, const char *path, const char *body, const char *what,
		     struct conn *c, struct sbx_err *err)
{
	_cleanup_free_ char *url = docker_url(d, path);
	_cleanup_free_ char *host = d->sock ? xstrdup("docker") : sbx_url_host(d->root);
	struct sbx_http_req q;

	docker_req_init(d, &q, url);
	memset(c, 0, sizeof(*c));
	if (sbx_http_connect(&q, &c->h, &c->fd, "Docker", err) < 0)
		return docker_unreachable(d, err);
	_cleanup_free_ char *req = xasprintf("POST /v%s%s HTTP/1.1\r\nHost: %s\r\n"
					     "User-Agent: sbx\r\nContent-Type: application/json\r\n"
					     "Connection: Upgrade\r\nUpgrade: tcp\r\n"
					     "Content-Length: %zu\r\n\r\n%s",
					     d->version, path, host, strlen(body), body);
	if (conn_send(c, req, strlen(req), err) < 0)
		return -1;
	struct strbuf head = STRBUF_INIT;
	char *end = NULL;
	while (!end) {
		char buf[4096];
		ssize_t n = conn_recv(c, buf, sizeof(buf));
		if (n == -2) {
			if (wait_fd(c->fd, POLLIN, 30000) <= 0)
				break;
			continue;
		}
		if (n <= 0)
			break;
		strbuf_add(&head, buf, (size_t)n);
		end = strstr(head.buf, "\r\n\r\n");
		if (!end && head.len > HEAD_MAX)
			break;
	}
	if (!end) {
		strbuf_release(&head);
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot %s: the Docker daemon's answer ended "
				   "early or was too long",
				   what);
	}
	size_t hl = (size_t)(end + 4 - head.buf);
	long st = 0;
	(void)sscanf(head.buf, "HTTP/%*d.%*d %ld", &st);
	if (st == 101 || st == 200) {
		c->in_len = head.len - hl;
		memcpy(c->in, head.buf + hl, c->in_len);
		strbuf_release(&head);
		return 0;
	}
	/* a refusal: its JSON body, as long as it says (it is short) */
	const char *cl = strcasestr(head.buf, "\r\ncontent-length:");
	size_t want = cl ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
	if (want > HEAD_MAX)
		want = HEAD_MAX;
	while (head.len - hl < want) {
		char buf[4096];
		ssize_t n = conn_recv(c, buf, sizeof(buf));
		if (n == -2 && wait_fd(c->fd, POLLIN, 5000) > 0)
			continue;
		if (n <= 0)
			break;
		strbuf_add(&head, buf, (size_t)n);
	}
	struct strbuf b = STRBUF_INIT;
	strbuf_add(&b, head.buf + hl, head.len - hl);
	strbuf_release(&head);
	docker_status_error(what, st, &b, err);
	strbuf_release(&b);
	return -1;
}

/* --- the stream ------------------------------------------------------------------------------ */

struct demux {
	const struct run *r;
	const struct docker *d;
	const char *id; /* the exec's */
	bool raw;	/* a tty: one stream, no frames */
	struct docker_frames f;
	/* the start of each stream while it reads like the runtime's failure to start the
	 * command, until the command is seen started (or, for runc's last words, to the end) */
	struct strbuf held[2];
	bool passed[2];
	bool started;
	long long checked; /* when the exec was last looked at */
	size_t total[2];   /* bytes of each stream */
	int werr;
};

/* the command started (the exec has a pid): what was held is its own output */
static bool seen_started(struct demux *m)
{
	bool running;
	long long code, pid;
	struct sbx_err e = { 0 };

	if (!m->started && sbx_now_ms() - m->checked >= 100) {
		m->checked = sbx_now_ms();
		m->started = docker_exec_state(m->d, m->id, &running, &code, &pid, &e) == 0 &&
			pid != 0;
	}
	return m->started;
}

/* h (so far) could be the start of word */
static bool could_be(const struct strbuf *h, const char *word)
{
	size_t k = strlen(word);
	return !memcmp(h->buf, word, h->len < k ? h->len : k);
}

/* h (so far) could be runc's one line "exec PATH: no such file or directory" */
static bool could_be_enoent_line(const struct strbuf *h)
{
	const char *nl = memchr(h->buf, '\n', h->len);
	size_t k = strlen(RUNTIME_ENOENT);

	if (!could_be(h, RUNTIME_EXEC))
		return false;
	if (!nl)
		return true;
	size_t n = (size_t)(nl - h->buf);
	if (n && h->buf[n - 1] == '\r')
		n--;
	return nl == h->buf + h->len - 1 && n > k && !memcmp(h->buf + n - k, RUNTIME_ENOENT, k);
}

/* whether stream i's start, held in h, is held on */
static bool hold(struct demux *m, int i, const struct strbuf *h)
{
	if (h->len > HELD_MAX)
		return false;
	bool out = i == 0, err = i == 1 || m->raw;
	if (err && could_be_enoent_line(h))
		return true; /* to the end: the command did start, as the daemon sees it */
	if (m->r->podman ? err && could_be(h, RUNTIME_FAILED_PODMAN)
			 : out && (could_be(h, RUNTIME_FAILED) || could_be(h, RUNTIME_NO_USER)))
		return !seen_started(m);
	return false;
}

static void out_put(void *arg, int stream, const char *p, size_t n)
{
	struct demux *m = arg;
	int i = stream == 2 ? 1 : 0;
	const struct sink *s = i ? &m->r->err : &m->r->out;
	struct strbuf *h = &m->held[i];

	m->total[i] += n;
	if (!m->passed[i]) {
		strbuf_add(h, p, n);
		if (hold(m, i, h))
			return;
		m->passed[i] = true;
		p = h->buf;
		n = h->len;
	}
	if (n && sink_put(s, p, n) < 0 && !m->werr)
		m->werr = errno;
	if (p == h->buf)
		strbuf_reset(h);
}

static void demux_feed(struct demux *m, const char *p, size_t n)
{
	if (m->raw)
		out_put(m, 1, p, n);
	else
		docker_frames_feed(&m->f, p, n, out_put, m);
}

/* --- a command that did not start ------------------------------------------------------------ */

enum start_fail {
	SF_NONE,
	SF_NOTFOUND, /* 127 */
	SF_NOEXEC,   /* 126 */
	SF_INTERP,   /* 126: found, but its interpreter is missing */
	SF_CWD,	     /* 125: -w */
	SF_USER,     /* 125: -u */
	SF_OTHER     /* 125: the runtime's words */
};

/* the text of s from after the first `from` (or its start) up to the next ": " (or its end) */
static void part(const char *s, const char *from, char *out, size_t n)
{
	const char *p = from ? strstr(s, from) : NULL;
	p = p ? p + strlen(from) : s;
	const char *e = strstr(p, ": ");
	snprintf(out, n, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
}

/* what the runtime's line l says: runc's and crun's words (as Docker and Podman pass them on)
 * and gVisor's; why gets the reason of a -w or -u failure, or the line itself */
static enum start_fail classify(const char *l, char *why, size_t n)
{
	static const char *const podman_end[] = {
		": OCI runtime attempted to invoke a command that was not found",
		": OCI permission denied", ": OCI runtime error", ": unknown"
	};
	if (strstr(l, "chdir to cwd (\""))
		return part(l, ") set in config.json failed: ", why, n), SF_CWD; /* runc */
	if (strstr(l, "chdir to `"))
		return part(l, "`: ", why, n), SF_CWD; /* crun */
	if (strstr(l, "failed to find initial working directory \""))
		return part(l, "\": ", why, n), SF_CWD; /* runsc */
	const char *u = strstr(l, "unable to find user ");
	if (!u)
		u = strstr(l, "unable to find group ");
	if (u) {
		snprintf(why, n, "%s", u);
		for (size_t i = 0; i < ARRAY_SIZE(podman_end); i++) {
			char *e = strstr(why, podman_end[i]);
			if (e)
				*e = 0;
		}
		return SF_USER;
	}
	if (strstr(l, "executable file not found in $PATH") ||		    /* runc */
	    (strstr(l, "executable file `") && strstr(l, "` not found")) || /* crun */
	    strstr(l, "error finding executable \""))			    /* runsc */
		return SF_NOTFOUND;
	/* runc: exec: "X": stat X: ...; crun: open executable: ...; runsc: failed to load X: ... */
	if (strstr(l, "exec: \"") || strstr(l, "open executable: ") ||
	    strstr(l, "failed to load ")) {
		if (strcasestr(l, "no such file or directory"))
			return SF_NOTFOUND;
		if (strcasestr(l, "permission denied"))
			return SF_NOEXEC;
	}
	const char *p = l;
	if (startswith(p, RUNTIME_FAILED_PODMAN))
		p += strlen(RUNTIME_FAILED_PODMAN);
	if (startswith(p, RUNTIME_FAILED ": "))
		p += strlen(RUNTIME_FAILED ": ");
	snprintf(why, n, "%s", p);
	return SF_OTHER;
}

/* the first line of h, without its line end */
static char *first_line(const struct strbuf *h)
{
	const char *s = strbuf_str(h);
	size_t n = strcspn(s, "\r\n");
	return xstrndup(s, n);
}

/* h is all runc said: "exec PATH: no such file or directory", PATH the command's (its path as
 * given, or as found in PATH) */
static bool runc_enoent(const struct strbuf *h, const char *cmd)
{
	if (!could_be_enoent_line(h) || !memchr(h->buf, '\n', h->len))
		return false;
	_cleanup_free_ char *l = first_line(h);
	size_t n = strlen(l) - strlen(RUNTIME_ENOENT), k = strlen(cmd);
	const char *path = l + strlen(RUNTIME_EXEC);
	size_t pl = n - strlen(RUNTIME_EXEC);
	if (strchr(cmd, '/'))
		return pl == k && !memcmp(path, cmd, k);
	return pl > k && path[0] == '/' && path[pl - k - 1] == '/' &&
		!memcmp(path + pl - k, cmd, k);
}

/* whether the exec that ended (code, pid) never ran its command; if so err says why */
static bool start_failed(const struct demux *m, long long code, long long pid,
			 const struct sbx_record *rec, struct sbx_err *err)
{
	const struct run *r = m->r;
	const struct strbuf *o = &m->held[0], *e = m->raw ? &m->held[0] : &m->held[1];
	bool held_o = !m->passed[0] && o->len, held_e = !m->passed[m->raw ? 0 : 1] && e->len;
	enum start_fail f = SF_NONE;
	char why[300] = "";

	if (code == 1 && held_e && (m->raw || !m->total[0]) && runc_enoent(e, r->argv[0]))
		f = SF_INTERP;
	else if (!r->podman && pid == 0) {
		/* Docker: it never had a process; its words on stdout */
		_cleanup_free_ char *l = first_line(held_o ? o : e);
		f = *l ? classify(l, why, sizeof(why)) : SF_OTHER;
		if (!*l)
			snprintf(why, sizeof(why), "Docker reports status %lld and no process",
				 code);
	} else if (r->podman && (code == 125 || code == 126 || code == 127) && held_e &&
		   could_be(e, RUNTIME_FAILED_PODMAN)) {
		_cleanup_free_ char *l = first_line(e);
		if (strstr(l, ": OCI ")) /* Podman's own ending of a runtime's failure */
			f = classify(l, why, sizeof(why));
	}
	const char *label = remote_label(rec), *cmd = r->argv[0];
	switch (f) {
	case SF_NONE:
		return false;
	case SF_NOTFOUND:
		sbx_err_set(err, SBX_E_CMD_NOTFOUND, "'%s': command not found in sandbox '%s'", cmd,
			    label);
		break;
	case SF_NOEXEC:
		sbx_err_set(err, SBX_E_CMD_NOEXEC,
			    "'%s': cannot execute in sandbox '%s': permission denied", cmd, label);
		break;
	case SF_INTERP:
		sbx_err_set(err, SBX_E_CMD_NOEXEC,
			    "'%s': cannot execute in sandbox '%s': no such file or directory (its "
			    "interpreter is missing)",
			    cmd, label);
		break;
	case SF_CWD:
		sbx_err_set(err, SBX_E_USAGE, "cannot change to directory '%s' in sandbox '%s': %s",
			    r->cwd ? r->cwd : "", label, why);
		break;
	case SF_USER:
		sbx_err_set(err, SBX_E_USAGE, "cannot run as user '%s' in sandbox '%s': %s",
			    r->user ? r->user : "", label, why);
		break;
	case SF_OTHER:
		sbx_err_set(err, SBX_E_REMOTE, "cannot start '%s' in sandbox '%s': %s", cmd, label,
			    why);
		break;
	}
	return true;
}

/* --- the caller's terminal (-t) --------------------------------------------------------------- */

static int winch_pipe[2] = { -1, -1 };

static void on_winch(int sig)
{
	int e = errno;
	(void)sig;
	if (write(winch_pipe[1], "w", 1) < 0) {
	}
	errno = e;
}

static void resize(const struct docker *d, const char *id)
{
	struct winsize ws;
	struct sbx_err e = { 0 };

	if (ioctl(1, TIOCGWINSZ, &ws) < 0 && ioctl(0, TIOCGWINSZ, &ws) < 0)
		return;
	if (!ws.ws_row || !ws.ws_col)
		return;
	_cleanup_free_ char *path = xasprintf("/exec/%s/resize?h=%u&w=%u", id, ws.ws_row,
					      ws.ws_col);
	struct docker_call c = { .method = "POST", .path = path, .what = "resize the terminal" };
	(void)docker_do(d, &c, NULL, &e);
}

/* --- one command -------------------------------------------------------------------------- */

/* runs r to its end: *ret_status its status (128+N for a signal, 124 after --timeout) */
static int run(const struct docker *d, const struct sbx_record *rec, struct run *r, int *ret_status,
	       struct sbx_err *err)
{
	char tok[17];
	remote_random_hex(tok, 16);
	/* the command's processes carry the token too: where the exec's pid cannot be found
	 * inside (gVisor), --timeout ends what kept it */
	size_t ne = 0;
	while (r->env && r->env[ne])
		ne++;
	char **env = xcalloc(ne + 2, sizeof(*env));
	for (size_t i = 0; i < ne; i++)
		env[i] = r->env[i];
	env[ne] = xasprintf("SBX_EXEC_ID=%s", tok);
	struct docker_exec_spec spec = { .argv = r->argv,
					 .env = env,
					 .cwd = r->cwd,
					 .user = r->user,
					 .tty = r->tty,
					 .stdin_open = r->stdin_open,
					 .attach = true,
					 .quiet_args = r->quiet_args };
	_cleanup_free_ char *id = docker_exec_create(d, rec, &spec, err);
	free(env[ne]);
	free(env);
	if (!id)
		return -1;
	_cleanup_free_ char *path = xasprintf("/exec/%s/start", id);
	_cleanup_free_ char *body = xasprintf("{\"Detach\":false,\"Tty\":%s}",
					      r->tty ? "true" : "false");
	struct conn c;
	struct demux m = {
		.r = r, .d = d, .id = id, .raw = r->tty, .held = { STRBUF_INIT, STRBUF_INIT }
	};
	struct termios saved;
	bool restore_tty = false;
	struct sigaction old_winch;
	int res = -1;

	if (conn_open(d, path, body, "start the command", &c, err) < 0) {
		conn_close(&c);
		/* Podman refuses an unknown -u at the start */
		const char *u = strstr(err->msg, "unable to find ");
		if (r->user && u && err->kind != SBX_E_NETWORK) {
			_cleanup_free_ char *why = xstrdup(u);
			sbx_err_set(err, SBX_E_USAGE, "cannot run as user '%s' in sandbox '%s': %s",
				    r->user, remote_label(rec), why);
		}
		return -1;
	}
	if (r->tty) {
		if (isatty(0) && tcgetattr(0, &saved) == 0) {
			struct termios raw = saved;
			cfmakeraw(&raw);
			restore_tty = tcsetattr(0, TCSANOW, &raw) == 0;
		}
		if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
			struct sigaction sa = { .sa_handler = on_winch, .sa_flags = SA_RESTART };
			(void)sigaction(SIGWINCH, &sa, &old_winch);
		}
		resize(d, id);
	}
	if (c.in_len)
		demux_feed(&m, c.in, c.in_len);
	long long deadline = r->timeout_ms > 0 ? sbx_now_ms() + r->timeout_ms : 0;
	long long cut = 0; /* timed out: when the stream is closed at the latest */
	bool in_open = r->stdin_open, timed_out = false, broken = false;
	int killed_sig = 0;
	/* stdin read but not sent yet: sent as the connection takes it, while the output is
	 * read on (a daemon that stops reading until its output is taken must not stall us) */
	char pend[65536];
	size_t pend_off = 0, pend_len = 0;
	bool in_eof = false;
	if (!in_open && !r->tty)
		(void)shutdown(c.fd, SHUT_WR);
	for (;;) {
		struct pollfd p[3] = { { .fd = c.fd, .events = POLLIN | (pend_len ? POLLOUT : 0) },
				       { .fd = in_open && !pend_len ? 0 : -1, .events = POLLIN },
				       { .fd = r->tty ? winch_pipe[0] : -1, .events = POLLIN } };
		int ms = 1000; /* a signal, or the deadline, is looked at once a second at least */
		long long until = timed_out ? cut : deadline;
		if (until) {
			long long left = until - sbx_now_ms();
			ms = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
		}
		int n = poll(p, 3, ms);
		if (n < 0 && errno != EINTR) {
			sbx_err_errno(err, "cannot wait for the command");
			goto out;
		}
		if (remote_got_signal && remote_got_signal != killed_sig) {
			/* the caller was interrupted: the command gets the same signal */
			killed_sig = remote_got_signal;
			struct sbx_err e = { 0 };
			(void)docker_kill_exec(d, rec, id, tok, killed_sig, &e);
		}
		if (deadline && !timed_out && sbx_now_ms() >= deadline) {
			timed_out = true;
			if (docker_kill_exec(d, rec, id, tok, SIGKILL, err) < 0)
				goto out;
			cut = sbx_now_ms() + TIMEOUT_GRACE_MS;
		}
		if (timed_out && sbx_now_ms() >= cut) {
			sbx_debug("docker: the stream of exec %.12s stayed open after its kill: "
				  "closed",
				  id);
			break;
		}
		if (n > 0 && p[2].revents) {
			char b[64];
			while (read(winch_pipe[0], b, sizeof(b)) > 0)
				;
			resize(d, id);
		}
		if (n > 0 && p[1].revents) {
			ssize_t k = read(0, pend, sizeof(pend));
			if (k < 0 && errno != EINTR && errno != EAGAIN) {
				sbx_err_errno(err, "cannot read standard input");
				goto out;
			}
			if (k > 0) {
				pend_off = 0;
				pend_len = (size_t)k;
			} else if (k == 0) {
				in_open = false;
				in_eof = true;
			}
		}
		if (n > 0 && (p[0].revents & POLLOUT) && pend_len) {
			size_t sent = 0;
			CURLcode rc = sbx_curl.easy_send(c.h, pend + pend_off, pend_len, &sent);
			if (rc != CURLE_OK && rc != CURLE_AGAIN) {
				sbx_err_set(err, SBX_E_NETWORK,
					    "the connection to the Docker daemon broke: %s",
					    sbx_curl.easy_strerror(rc));
				goto out;
			}
			pend_off += sent;
			pend_len -= sent;
		}
		if (in_eof && !pend_len) {
			/* the end of stdin: the end of what the connection carries up */
			in_eof = false;
			if (!r->tty)
				(void)shutdown(c.fd, SHUT_WR);
		}
		if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			bool end = false;
			for (;;) {
				ssize_t k = conn_recv(&c, c.in, sizeof(c.in));
				if (k == -2)
					break;
				if (k <= 0) {
					broken = k < 0;
					end = true;
					break;
				}
				demux_feed(&m, c.in, (size_t)k);
			}
			if (end)
				break;
		}
	}
	/* the end: the exec's inspect says how (and whether the daemon is still there) */
	bool running = true;
	long long code = -1, pid = 0;
	for (int i = 0; i < (timed_out ? 1 : 50) && running; i++) {
		if (docker_exec_state(d, id, &running, &code, &pid, err) < 0) {
			sbx_err_prefix(err, "the command's end is unknown");
			goto out;
		}
		if (running && !timed_out)
			usleep(20000);
	}
	if (running && !timed_out) {
		sbx_err_set(err, SBX_E_REMOTE,
			    broken ? "the connection to the Docker daemon broke during the command"
				   : "the Docker daemon ended the command's output early");
		goto out;
	}
	if (!timed_out && start_failed(&m, code, pid, rec, err))
		goto out;
	for (int i = 0; i < 2; i++)
		if (!m.passed[i] && m.held[i].len &&
		    sink_put(i ? &r->err : &r->out, m.held[i].buf, m.held[i].len) < 0 && !m.werr)
			m.werr = errno;
	if (m.werr) {
		errno = m.werr;
		sbx_err_errno(err, "cannot write the command's output");
		goto out;
	}
	*ret_status = timed_out ? SBX_EXIT_TIMEOUT : (int)code;
	if (r->res) {
		r->res->timed_out = timed_out;
		if (code > 128 && code < 160 && !timed_out)
			r->res->signal = (int)(code - 128);
	}
	res = 0;
out:
	if (restore_tty)
		(void)tcsetattr(0, TCSANOW, &saved);
	if (r->tty && winch_pipe[0] >= 0) {
		(void)sigaction(SIGWINCH, &old_winch, NULL);
		close(winch_pipe[0]);
		close(winch_pipe[1]);
		winch_pipe[0] = winch_pipe[1] = -1;
	}
	strbuf_release(&m.held[0]);
	strbuf_release(&m.held[1]);
	conn_close(&c);
	return res;
}

int docker_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		int *ret_status, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	struct remote_sigs sigs;

	if (remote_check_running("Docker", rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	struct run r = { .argv = o->argv,
			 .env = o->env,
			 .cwd = o->workdir ? o->workdir : rec->config.workdir,
			 .user = o->user,
			 .tty = o->tty,
			 .stdin_open = o->interactive,
			 .timeout_ms = o->timeout_ms,
			 .out = { o->result ? o->result->out_fd : 1, NULL },
			 .err = { o->result ? o->result->err_fd : 2, NULL },
			 .res = o->result };
	r.podman = docker_is_podman(rec);
	if (o->detach) {
		/* its output to a log in the container, its processes marked (sbx logs, kill) */
		for (size_t i = 0; o->argv[i]; i++) {
			_cleanup_free_ char *what = i ? xasprintf("argument %zu of the command", i)
						      : xstrdup("the command");
			json_t *j = docker_text(o->argv[i], what, err);
			if (!j)
				return -1;
			json_decref(j);
		}
		char tok[17];
		remote_random_hex(tok, 16);
		char **argv = docker_job_argv(o->argv, tok);
		size_t ne = 0;
		while (o->env && o->env[ne])
			ne++;
		char **env = xcalloc(ne + 2, sizeof(*env));
		for (size_t i = 0; i < ne; i++)
			env[i] = o->env[i];
		env[ne] = xasprintf("SBX_EXEC_ID=%s", tok);
		struct docker_exec_spec spec = { .argv = argv,
						 .env = env,
						 .cwd = r.cwd,
						 .user = r.user,
						 .tty = r.tty,
						 .quiet_args = true };
		_cleanup_free_ char *id = docker_exec_create(&d, rec, &spec, err);
		free(env[ne]);
		free(env);
		sbx_strv_free(argv);
		if (!id)
			return -1;
		_cleanup_free_ char *path = xasprintf("/exec/%s/start", id);
		_cleanup_json_ json_t *body = json_pack("{s:b, s:b}", "Detach", 1, "Tty", o->tty);
		struct docker_call c = {
			.method = "POST", .path = path, .body = body, .what = "start the command"
		};
		if (docker_do(&d, &c, NULL, err) < 0)
			return -1;
		/* Docker's exec id: sbx ps, logs, wait, kill */
		if (o->ret_exec_id)
			snprintf(o->ret_exec_id, SBX_EXEC_ID_MAX, "%s", id);
		*ret_status = 0;
		return 0;
	}
	remote_sigs_catch(&sigs);
	int rc = run(&d, rec, &r, ret_status, err);
	remote_sigs_restore(&sigs);
	return rc;
}

int docker_sh(const struct sbx_record *rec, const char *script, const char *const *args,
	      struct strbuf *out, struct strbuf *errout, int *ret_status, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	const char *argv[10] = { "/bin/sh", "-c", script, "sh" };
	size_t n = 4;

	for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (docker_init(&d, rec, err) < 0)
		return -1;
	struct run r = { .argv = (char *const *)argv,
			 .cwd = "/",
			 .user = "0",
			 .quiet_args = true,
			 .podman = docker_is_podman(rec),
			 .out = { -1, out },
			 .err = { -1, errout } };
	return run(&d, rec, &r, ret_status, err);
}
