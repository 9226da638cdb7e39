/* The Docker provider's exec: an exec instance started over a hijacked connection (raw stdin
 * up, 8-byte-framed stdout and stderr down, or one raw stream with a tty), its end read from
 * the exec's inspect; --timeout and kill through a second exec. */
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
/* how the runtime says a command could not start (on stdout, with exec's Pid 0) */
#define RUNTIME_FAILED "OCI runtime exec failed"
#define RUNTIME_FAILED_PODMAN "Error: "

struct sink {
	int fd;		    /* -1: buf (or dropped) */
	struct strbuf *buf; /* NULL with fd -1: dropped */
};

struct run {
	char *const *argv;
	char *const *env;
	const char *cwd, *user;
	bool tty, stdin_open;
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
	unsigned char hdr[8];
	size_t hdr_len;
	size_t left; /* of the current frame */
	int stream;
	/* the start of each stream while it reads like a runtime's failure to start the command
	 * (Docker's on stdout, Podman's on stderr), until the command is seen started */
	struct strbuf held[2];
	bool passed[2];
	bool started;
	long long checked; /* when the exec was last looked at */
	int werr;
};

static int exec_state(const struct docker *d, const char *id, bool *running, long long *code,
		      long long *pid, struct sbx_err *err);

/* the command started (the exec has a pid): what was held is its own output */
static bool seen_started(struct demux *m)
{
	bool running;
	long long code, pid;
	struct sbx_err e = { 0 };

	if (!m->started && sbx_now_ms() - m->checked >= 100) {
		m->checked = sbx_now_ms();
		m->started = exec_state(m->d, m->id, &running, &code, &pid, &e) == 0 && pid != 0;
	}
	return m->started;
}

static void out_put(struct demux *m, int stream, const char *p, size_t n)
{
	static const char *const prefix[2] = { RUNTIME_FAILED, RUNTIME_FAILED_PODMAN };
	int i = stream == 2 ? 1 : 0;
	const struct sink *s = i ? &m->r->err : &m->r->out;
	struct strbuf *h = &m->held[i];

	if (!m->passed[i]) {
		size_t pl = strlen(prefix[i]);
		strbuf_add(h, p, n);
		size_t k = h->len < pl ? h->len : pl;
		if (h->len <= HELD_MAX && !memcmp(h->buf, prefix[i], k) && !seen_started(m))
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
	if (m->raw) {
		out_put(m, 1, p, n);
		return;
	}
	while (n) {
		if (m->left == 0) {
			size_t k = 8 - m->hdr_len < n ? 8 - m->hdr_len : n;
			memcpy(m->hdr + m->hdr_len, p, k);
			m->hdr_len += k;
			p += k;
			n -= k;
			if (m->hdr_len < 8)
				return;
			m->hdr_len = 0;
			m->stream = m->hdr[0];
			m->left = (size_t)m->hdr[4] << 24 | (size_t)m->hdr[5] << 16 |
				(size_t)m->hdr[6] << 8 | m->hdr[7];
			continue;
		}
		size_t k = m->left < n ? m->left : n;
		out_put(m, m->stream == 2 ? 2 : 1, p, k);
		m->left -= k;
		p += k;
		n -= k;
	}
}

/* --- exec instances --------------------------------------------------------------------------- */

static char *exec_create(const struct docker *d, const struct sbx_record *rec, const struct run *r,
			 bool attach, struct sbx_err *err)
{
	json_t *cmd = json_array(), *env = json_array();
	_cleanup_json_ json_t *resp = NULL;

	for (char *const *a = r->argv; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	for (char *const *e = r->env; e && *e; e++) {
		if (strchr(*e, '=')) {
			json_array_append_new(env, json_string(*e));
		} else if (getenv(*e)) {
			_cleanup_free_ char *kv = xasprintf("%s=%s", *e, getenv(*e));
			json_array_append_new(env, json_string(kv));
		}
	}
	_cleanup_json_ json_t *body = json_pack("{s:o, s:o, s:b, s:b, s:b, s:b}", "Cmd", cmd, "Env",
						env, "AttachStdin", r->stdin_open, "AttachStdout",
						attach, "AttachStderr", attach, "Tty", r->tty);
	if (r->cwd)
		json_object_set_new(body, "WorkingDir", json_string(r->cwd));
	if (r->user)
		json_object_set_new(body, "User", json_string(r->user));
	_cleanup_free_ char *path = xasprintf("/containers/%s/exec", rec->provider_id);
	struct docker_call c = {
		.method = "POST", .path = path, .body = body, .what = "start the command"
	};
	if (docker_do(d, &c, &resp, err) < 0) {
		if (err->kind == SBX_E_STATE && strstr(err->msg, "paused"))
			return sbx_err_set(err, SBX_E_STATE,
					   "sandbox '%s' is paused; run 'sbx resume %s' (or 'sbx "
					   "exec --resume')",
					   remote_label(rec), remote_label(rec)),
			       NULL;
		return NULL;
	}
	const char *id = sbx_json_str(resp, "Id");
	if (!id || strlen(id) != 64 || strspn(id, "0123456789abcdef") != 64) {
		sbx_err_set(err, SBX_E_REMOTE,
			    "cannot start the command: Docker's answer has no "
			    "valid Id");
		return NULL;
	}
	return xstrdup(id);
}

/* GET /exec/ID/json: running, exit code, pid (the daemon host's) */
static int exec_state(const struct docker *d, const char *id, bool *running, long long *code,
		      long long *pid, struct sbx_err *err)
{
	_cleanup_json_ json_t *resp = NULL;
	_cleanup_free_ char *path = xasprintf("/exec/%s/json", id);
	struct docker_call c = { .path = path, .what = "read the command's end" };

	if (docker_do(d, &c, &resp, err) < 0)
		return -1;
	*running = json_is_true(json_object_get(resp, "Running"));
	*code = sbx_json_int(resp, "ExitCode", -1);
	*pid = sbx_json_int(resp, "Pid", 0);
	return 0;
}

/* the processes of exec token tok get signal sig (a second exec: the API has no exec kill) */
int docker_kill_token(const struct docker *d, const struct sbx_record *rec, const char *tok,
		      int sig, struct sbx_err *err)
{
	_cleanup_free_ char *sigs = xasprintf("%d", sig);
	char *by_token[] = {
		"/bin/sh",
		"-c",
		"for p in /proc/[0-9]*; do [ \"${p#/proc/}\" = $$ ] && continue; "
		"tr '\\000' '\\n' <$p/environ 2>/dev/null | grep -qx \"SBX_EXEC_ID=$2\" && "
		"kill -$1 ${p#/proc/} 2>/dev/null; done; exit 0",
		"sh",
		sigs,
		(char *)tok,
		NULL
	};
	/* no token: every process but init (and this shell) */
	char *every[] = { "/bin/sh", "-c", "kill -$1 -1 2>/dev/null; exit 0", "sh", sigs, NULL };
	char **argv = tok ? by_token : every;
	struct run r = {
		.argv = argv, .cwd = "/", .user = "0", .out = { -1, NULL }, .err = { -1, NULL }
	};
	_cleanup_free_ char *id = exec_create(d, rec, &r, false, err);
	if (!id)
		return -1;
	_cleanup_free_ char *path = xasprintf("/exec/%s/start", id);
	_cleanup_json_ json_t *body = json_pack("{s:b, s:b}", "Detach", 1, "Tty", 0);
	struct docker_call c = {
		.method = "POST", .path = path, .body = body, .what = "stop the command"
	};
	if (docker_do(d, &c, NULL, err) < 0)
		return -1;
	for (int i = 0; i < 100; i++) {
		bool running;
		long long code, pid;
		if (exec_state(d, id, &running, &code, &pid, err) < 0)
			return -1;
		if (!running && pid)
			return 0;
		usleep(20000);
	}
	return 0;
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

/* --- one command -------------------------------------------------------------------------------
 */

/* runs r to its end: *ret_status its status (128+N for a signal, 124 after --timeout) */
static int run(const struct docker *d, const struct sbx_record *rec, struct run *r, int *ret_status,
	       struct sbx_err *err)
{
	char tok[17];
	remote_random_hex(tok, 16);
	/* the command's processes carry the token: what --timeout ends */
	size_t ne = 0;
	while (r->env && r->env[ne])
		ne++;
	char **env = xcalloc(ne + 2, sizeof(*env));
	for (size_t i = 0; i < ne; i++)
		env[i] = r->env[i];
	env[ne] = xasprintf("SBX_EXEC_ID=%s", tok);
	char *const *old_env = r->env;
	r->env = env;
	_cleanup_free_ char *id = exec_create(d, rec, r, true, err);
	r->env = old_env;
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
		if (deadline && !timed_out) {
			long long left = deadline - sbx_now_ms();
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
			(void)docker_kill_token(d, rec, tok, killed_sig, &e);
		}
		if (deadline && !timed_out && sbx_now_ms() >= deadline) {
			timed_out = true;
			if (docker_kill_token(d, rec, tok, SIGKILL, err) < 0)
				goto out;
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
	for (int i = 0; i < 50 && running; i++) {
		if (exec_state(d, id, &running, &code, &pid, err) < 0) {
			sbx_err_prefix(err, "the command's end is unknown");
			goto out;
		}
		if (running)
			usleep(20000);
	}
	if (running) {
		sbx_err_set(err, SBX_E_REMOTE,
			    broken ? "the connection to the Docker daemon broke during the command"
				   : "the Docker daemon ended the command's output early");
		goto out;
	}
	if (pid == 0 && (code == 126 || code == 127)) {
		/* it never started: the runtime's words go to stderr */
		const char *o = strbuf_str(&m.held[0]), *e = strbuf_str(&m.held[1]);
		bool nf = strstr(o, "executable file not found") ||
			strstr(o, "no such file or directory") ||
			strstr(e, "executable file not found") ||
			strstr(e, "no such file or directory");
		sbx_err_set(err, nf ? SBX_E_CMD_NOTFOUND : SBX_E_CMD_NOEXEC,
			    nf ? "'%s': command not found in sandbox '%s'"
			       : "'%s': cannot execute in sandbox '%s': permission denied",
			    r->argv[0], remote_label(rec));
		goto out;
	}
	if (m.held[0].len && sink_put(&r->out, m.held[0].buf, m.held[0].len) < 0 && !m.werr)
		m.werr = errno;
	if (m.held[1].len && sink_put(&r->err, m.held[1].buf, m.held[1].len) < 0 && !m.werr)
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
	if (o->detach) {
		/* its output to a log in the container, its processes marked (sbx logs, kill) */
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
		r.argv = argv;
		r.env = env;
		r.stdin_open = false;
		_cleanup_free_ char *id = exec_create(&d, rec, &r, false, err);
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
			 .out = { -1, out },
			 .err = { -1, errout } };
	return run(&d, rec, &r, ret_status, err);
}
