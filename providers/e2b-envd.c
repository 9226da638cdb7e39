/* The E2B provider's side inside the sandbox: its envd daemon, reached over HTTPS through E2B's
 * proxy: Connect server-streaming process.Process/Start with JSON envelopes (exec), /files (cp). */
#define _GNU_SOURCE
#include "providers/e2b.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>

#include "core/log.h"

#define ENVD_PORT "49983"
#define FRAME_MAX (16u << 20)

static const char *const envd_vars[] = { "SBX_E2B_SANDBOX_URL", "E2B_SANDBOX_URL", NULL };

/* --- envd: the Connect stream of a command ---------------------------------------------------- */

/* where a command's output goes: a file descriptor, or a buffer */
struct sink {
	int fd;
	struct strbuf *buf;
	bool gone; /* its reader went away (EPIPE) */
};

struct run {
	const struct sbx_record *rec;
	struct sink out, err;
	struct strbuf pending; /* bytes of an incomplete frame */
	bool started, ended, eos;
	bool detach; /* -d: done once the process started */
	long pid;
	bool exited;
	long exit_code;
	char *status;	 /* "exit status 1", "signal: killed" */
	char *end_error; /* end.error */
	char *eos_code, *eos_msg;
	char *bad; /* a malformed frame, in words */
	/* -i: a child feeds standard input once the pid is known */
	bool feed_stdin;
	pid_t feeder;
	const char *user;
	struct sbx_err *ferr;
};

static void sink_write(struct sink *s, const void *p, size_t n)
{
	if (s->buf)
		strbuf_add(s->buf, p, n);
	else if (s->fd >= 0 && !s->gone && sbx_write_all(s->fd, p, n) < 0 && errno == EPIPE)
		s->gone = true;
}

static _printf_(2, 3) void set_bad(struct run *x, const char *fmt, ...)
{
	va_list ap;

	if (x->bad)
		return;
	va_start(ap, fmt);
	if (vasprintf(&x->bad, fmt, ap) < 0)
		x->bad = NULL;
	va_end(ap);
}

static char *envd_url(const struct sbx_record *rec, const char *path)
{
	const char *base = remote_env(envd_vars);
	if (base) {
		size_t n = strlen(base);
		while (n && base[n - 1] == '/')
			n--;
		return xasprintf("%.*s%s", (int)n, base, path);
	}
	const char *domain = sbx_json_str(rec->extra, "domain");
	return xasprintf("https://" ENVD_PORT "-%s.%s%s", rec->provider_id,
			 domain && *domain ? domain : "e2b.app", path);
}

/* the headers of an envd request: the sandbox, its access token, the user, then more */
struct envd_hdrs {
	const char *h[12]; /* NULL-terminated */
	size_t n;
	char *id, *tok, *user; /* owned: the lines built here (tok is a secret) */
};

static void envd_hdrs_add(struct envd_hdrs *e, const char *line)
{
	assert(e->n < ARRAY_SIZE(e->h) - 1);
	e->h[e->n++] = line;
	e->h[e->n] = NULL;
}

static void envd_hdrs_init(struct envd_hdrs *e, const struct sbx_record *rec, const char *user)
{
	const char *tok = e2b_secret(rec, "envd_access_token");

	e->id = xasprintf("E2b-Sandbox-Id: %s", rec->provider_id);
	envd_hdrs_add(e, e->id);
	envd_hdrs_add(e, "E2b-Sandbox-Port: " ENVD_PORT);
	if (tok)
		envd_hdrs_add(e, (e->tok = xasprintf("X-Access-Token: %s", tok)));
	if (user) {
		_cleanup_free_ char *up = xasprintf("%s:", user);
		_cleanup_free_ char *b = sbx_base64_encode(up, strlen(up));
		envd_hdrs_add(e, (e->user = xasprintf("Authorization: Basic %s", b)));
	}
}

static void envd_hdrs_release(struct envd_hdrs *e)
{
	if (e->tok)
		explicit_bzero(e->tok, strlen(e->tok));
	free(e->id);
	free(e->tok);
	free(e->user);
	e->id = e->tok = e->user = NULL;
}

/* an envd answer that is not 2xx, in one line */
static int envd_failed(const struct sbx_record *rec, const char *what, long status,
		       const struct strbuf *body, struct sbx_err *err)
{
	_cleanup_free_ char *m = remote_error_message(body);
	const char *l = remote_label(rec);
	int r;

	if (status == 401 || status == 403)
		r = sbx_err_set(err, SBX_E_AUTH,
				"cannot %s: E2B refused the sandbox's access "
				"token (HTTP %ld%s%s)",
				what, status, *m ? ": " : "", m);
	else if (status == 409 || status == 502 || status == 503 || status == 404 || status == 410)
		r = sbx_err_set(err, SBX_E_STATE,
				"cannot %s: sandbox '%s' does not answer at E2B "
				"(HTTP %ld%s%s); it may be paused ('sbx resume %s') or gone ('sbx "
				"inspect %s')",
				what, l, status, *m ? ": " : "", m, l, l);
	else if (status == 429)
		r = sbx_err_set(err, SBX_E_REMOTE,
				"cannot %s: E2B is rate limiting requests (HTTP "
				"429%s%s); try again later",
				what, *m ? ": " : "", m);
	else
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: E2B answered HTTP %ld%s%s", what,
				status, *m ? ": " : "", m);
	err->http_status = status;
	return r;
}

/* one unary Connect call to envd (JSON codec), its answer in *ret when ret; 0 or -1 */
static int envd_call(const struct sbx_record *rec, const char *method, json_t *msg,
		     const char *user, long long timeout_ms, const char *what, json_t **ret,
		     struct sbx_err *err)
{
	_cleanup_free_ char *url = envd_url(rec, method);
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, user);
	envd_hdrs_add(&eh, "Content-Type: application/json");
	envd_hdrs_add(&eh, "Connect-Protocol-Version: 1");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body = body;
	q.body_len = strlen(body);
	q.timeout_ms = timeout_ms;
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (r == 0 && (resp.status < 200 || resp.status >= 300))
		r = envd_failed(rec, what, resp.status, &resp.body, err);
	else if (r == 0 && ret && !(*ret = json_loadb(resp.body.buf, resp.body.len, 0, NULL)))
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: E2B's answer is not JSON", what);
	sbx_http_resp_release(&resp);
	return r;
}

static int envd_unary(const struct sbx_record *rec, const char *method, json_t *msg,
		      const char *user, long long timeout_ms, const char *what, struct sbx_err *err)
{
	return envd_call(rec, method, msg, user, timeout_ms, what, NULL, err);
}

int e2b_envd_call(const struct sbx_record *rec, const char *method, json_t *msg, const char *what,
		  json_t **ret, struct sbx_err *err)
{
	return envd_call(rec, method, msg, NULL, 30000, what, ret, err);
}

/* -i: a child that sends what arrives on standard input to the process, then closes it */
static _noreturn_ void feed_stdin(const struct sbx_record *rec, long pid, const char *user)
{
	char buf[49152];
	struct sbx_err e = { 0 };

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		_cleanup_free_ char *b = sbx_base64_encode(buf, (size_t)n);
		_cleanup_json_ json_t *m = json_pack("{s:{s:I}, s:{s:s}}", "process", "pid",
						     (json_int_t)pid, "input", "stdin", b);
		if (envd_unary(rec, "/process.Process/SendInput", m, user, 30000,
			       "send standard input", &e) < 0) {
			sbx_debug("stdin: %s", e.msg);
			_exit(1);
		}
	}
	_cleanup_json_ json_t *m = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
	(void)envd_unary(rec, "/process.Process/CloseStdin", m, user, 30000, "close standard input",
			 &e);
	_exit(0);
}

static void on_event(struct run *x, json_t *ev)
{
	json_t *v;

	if ((v = json_object_get(ev, "start"))) {
		x->started = true;
		json_t *pid = json_object_get(v, "pid");
		x->pid = json_is_integer(pid) ? (long)json_integer_value(pid) : 0;
		if (x->detach)
			return;
		if (x->feed_stdin && !x->feeder && x->pid > 0) {
			fflush(NULL);
			pid_t c = fork();
			if (c == 0)
				feed_stdin(x->rec, x->pid, x->user);
			x->feeder = c > 0 ? c : 0;
		}
	} else if ((v = json_object_get(ev, "data"))) {
		const char *which[] = { "stdout", "stderr", "pty" };
		for (size_t i = 0; i < ARRAY_SIZE(which); i++) {
			const char *b = sbx_json_str(v, which[i]);
			if (!b)
				continue;
			size_t n;
			_cleanup_free_ char *d = sbx_base64_decode(b, &n);
			if (!d) {
				set_bad(x, "E2B sent %s data that is not base64", which[i]);
				return;
			}
			sink_write(i == 1 ? &x->err : &x->out, d, n);
		}
		if (x->out.gone)
			set_bad(x, "standard output went away");
	} else if ((v = json_object_get(ev, "end"))) {
		x->ended = true;
		json_t *code = json_object_get(v, "exitCode");
		x->exit_code = json_is_integer(code) ? (long)json_integer_value(code) : 0;
		x->exited = json_is_true(json_object_get(v, "exited"));
		free(x->status);
		x->status = sbx_json_str(v, "status") ? xstrdup(sbx_json_str(v, "status")) : NULL;
		free(x->end_error);
		x->end_error = sbx_json_str(v, "error") ? xstrdup(sbx_json_str(v, "error")) : NULL;
	}
	/* keepalive and anything newer: nothing to do */
}

static void on_frame(struct run *x, unsigned flags, const char *p, size_t n)
{
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(p, n, 0, &je);

	if (!j || !json_is_object(j)) {
		set_bad(x, "E2B sent a malformed frame (%s)", j ? "not an object" : je.text);
		return;
	}
	if (flags & 2) {
		x->eos = true;
		json_t *e = json_object_get(j, "error");
		if (e) {
			const char *c = sbx_json_str(e, "code"), *m = sbx_json_str(e, "message");
			x->eos_code = xstrdup(c ? c : "unknown");
			x->eos_msg = xstrdup(m ? m : "");
		}
		return;
	}
	if (flags & 1) {
		set_bad(x, "E2B sent a compressed frame, which was not asked for");
		return;
	}
	json_t *ev = json_object_get(j, "event");
	if (ev)
		on_event(x, ev);
}

static bool on_stream(const char *p, size_t n, void *arg)
{
	struct run *x = arg;

	strbuf_add(&x->pending, p, n);
	size_t off = 0;
	while (!x->bad && x->pending.len - off >= 5) {
		const unsigned char *h = (const unsigned char *)x->pending.buf + off;
		uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 |
			h[4];
		if (len > FRAME_MAX) {
			set_bad(x, "E2B sent a frame of %u bytes", len);
			break;
		}
		if (x->pending.len - off - 5 < len)
			break;
		on_frame(x, h[0], x->pending.buf + off + 5, len);
		off += 5 + len;
		if (x->detach && x->started)
			return false; /* envd keeps the process when the stream closes */
	}
	if (off) {
		memmove(x->pending.buf, x->pending.buf + off, x->pending.len - off);
		x->pending.len -= off;
	}
	return !x->bad;
}

static int signal_number(const char *name)
{
	for (int s = 1; s < 65; s++) {
		const char *d = strsignal(s);
		if (d && !strncasecmp(d, name, strlen(d)) &&
		    (!name[strlen(d)] || name[strlen(d)] == ' '))
			return s;
	}
	return 0;
}

struct cmd {
	char *const *argv;
	const char *const *env; /* "K=V" */
	const char *cwd;
	const char *user;
	long long timeout_ms;
	bool stdin_open;
	bool detach;
	long *ret_pid;
	bool foreground;	     /* the user's command: signals and a closed stdout end it */
	struct sbx_exec_result *res; /* exec --json: how it ended */
	long connect_pid; /* > 0: attach to this process (Connect) instead of starting one */
};

static void run_release(struct run *x)
{
	strbuf_release(&x->pending);
	free(x->status);
	free(x->end_error);
	free(x->eos_code);
	free(x->eos_msg);
	free(x->bad);
}

/* what a decoded stream says of the command: 0 and *ret_status, or -1 with err */
static int run_outcome(const struct run *x, const struct cmd *cmd, const char *l, int *ret_status,
		       struct sbx_err *err)
{
	if (x->bad)
		return sbx_err_set(err, SBX_E_REMOTE, "cannot run '%s' in sandbox '%s': %s",
				   cmd->argv[0], l, x->bad);
	if (cmd->connect_pid > 0 && x->eos_code && !x->ended && streq(x->eos_code, "not_found"))
		return sbx_err_set(err, SBX_E_NOTFOUND,
				   "no exec '%ld' in sandbox '%s' (E2B forgets a process once it "
				   "ended)",
				   cmd->connect_pid, l);
	if (cmd->detach && x->started) {
		if (cmd->ret_pid)
			*cmd->ret_pid = x->pid;
		*ret_status = 0;
		return 0;
	}
	if (x->eos_code && streq(x->eos_code, "deadline_exceeded") && cmd->connect_pid > 0)
		return sbx_err_set(err, SBX_E_TIMEOUT, "timed out waiting for exec '%ld'",
				   cmd->connect_pid);
	if (x->eos_code && streq(x->eos_code, "deadline_exceeded") && cmd->timeout_ms > 0) {
		*ret_status = SBX_EXIT_TIMEOUT;
		if (cmd->res)
			cmd->res->timed_out = true;
		return 0;
	}
	if (x->eos_code && !x->ended) {
		const char *m = x->eos_msg;
		if (strstr(m, "executable file not found") ||
		    strstr(m, "no such file or directory"))
			return sbx_err_set(err, SBX_E_CMD_NOTFOUND,
					   "'%s': command not found in "
					   "sandbox '%s'",
					   cmd->argv[0], l);
		if (strstr(m, "permission denied"))
			return sbx_err_set(err, SBX_E_CMD_NOEXEC,
					   "'%s': cannot execute in sandbox "
					   "'%s': permission denied",
					   cmd->argv[0], l);
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B says "
				   "%s: %.200s",
				   cmd->argv[0], l, x->eos_code, m);
	}
	if (!x->ended || !x->eos)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B's stream "
				   "ended before the command did",
				   cmd->argv[0], l);
	if (x->exited) {
		*ret_status = (int)(x->exit_code & 0xff);
	} else if (x->status && startswith(x->status, "signal: ")) {
		int s = signal_number(x->status + 8);
		*ret_status = s ? 128 + s : 128 + SIGKILL;
		if (cmd->res)
			cmd->res->signal = s ? s : SIGKILL;
	} else if (x->exit_code > 0) {
		*ret_status = (int)(x->exit_code & 0xff);
	} else {
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot run '%s' in sandbox '%s': E2B reports "
				   "neither an exit status nor a signal%s%.200s",
				   cmd->argv[0], l, x->end_error ? ": " : "",
				   x->end_error ? x->end_error : "");
	}
	return 0;
}

/* runs a command through envd: 0 and *ret_status (the command's, 124 on --timeout, 128+N on a
 * signal), or -1 with err */
static int envd_run(const struct sbx_record *rec, const struct cmd *cmd, struct sink out,
		    struct sink errs, int *ret_status, struct sbx_err *err)
{
	json_t *args = json_array(), *envs = json_object();
	const char *l = remote_label(rec);

	for (char *const *a = cmd->argv + 1; *a; a++)
		json_array_append_new(args, json_string(*a));
	for (const char *const *e = cmd->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		_cleanup_free_ char *k = xstrndup(*e, (size_t)(eq - *e));
		json_object_set_new(envs, k, json_string(eq + 1));
	}
	_cleanup_json_ json_t *msg = cmd->connect_pid > 0
		? json_pack("{s:{s:I}}", "process", "pid", (json_int_t)cmd->connect_pid)
		: json_pack("{s:{s:s, s:o, s:o}, s:b}", "process", "cmd", cmd->argv[0], "args",
			    args, "envs", envs, "stdin", cmd->stdin_open);
	if (cmd->connect_pid > 0) {
		json_decref(args);
		json_decref(envs);
	}
	if (cmd->cwd && cmd->connect_pid <= 0)
		json_object_set_new(json_object_get(msg, "process"), "cwd", json_string(cmd->cwd));
	char tag[24] = "sbx-";
	remote_random_hex(tag + 4, 16);
	if (cmd->foreground)
		json_object_set_new(msg, "tag", json_string(tag));
	_cleanup_free_ char *payload = json_dumps(msg, JSON_COMPACT);
	size_t plen = strlen(payload);
	_cleanup_free_ char *frame = xmalloc(plen + 5);
	frame[0] = 0;
	frame[1] = (char)(plen >> 24);
	frame[2] = (char)(plen >> 16);
	frame[3] = (char)(plen >> 8);
	frame[4] = (char)plen;
	memcpy(frame + 5, payload, plen);

	_cleanup_free_ char *url = envd_url(
		rec, cmd->connect_pid > 0 ? "/process.Process/Connect" : "/process.Process/Start");
	_cleanup_free_ char *tmo = cmd->timeout_ms > 0
		? xasprintf("Connect-Timeout-Ms: %lld", cmd->timeout_ms)
		: NULL;
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };
	envd_hdrs_init(&eh, rec, cmd->user);
	envd_hdrs_add(&eh, "Content-Type: application/connect+json");
	envd_hdrs_add(&eh, "Connect-Protocol-Version: 1");
	envd_hdrs_add(&eh, "Keepalive-Ping-Interval: 10");
	if (tmo)
		envd_hdrs_add(&eh, tmo);

	struct run x = { .rec = rec,
			 .out = out,
			 .err = errs,
			 .feed_stdin = cmd->stdin_open,
			 .user = cmd->user,
			 .detach = cmd->detach };
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body = frame;
	q.body_len = plen + 5;
	q.on_data = on_stream;
	q.arg = &x;
	/* envd ends the command at the deadline; this is only if it does not */
	q.timeout_ms = cmd->timeout_ms > 0 ? cmd->timeout_ms + 10000 : 0;
	q.stall_s = 60; /* keepalives come every 10 s */
	struct remote_sigs sigs;
	if (cmd->foreground) {
		remote_sigs_catch(&sigs);
		q.cancel = &remote_got_signal;
	}
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (cmd->foreground)
		remote_sigs_restore(&sigs);
	int got_signal = cmd->foreground ? remote_got_signal : 0;
	/* what still runs inside when sbx stops reading: ended, as a local exec would be */
	int ended_by = got_signal	  ? got_signal
		: x.out.gone		  ? SIGPIPE
		: r < 0 && resp.timed_out ? SIGALRM
					  : 0;
	if (cmd->foreground && ended_by && !x.ended) {
		/* by its tag: the signal may have come before the start event told the pid, and
		 * envd may register the process a moment after the stream was dropped */
		_cleanup_json_ json_t *m = json_pack(
			"{s:{s:s}, s:s}", "process", "tag", tag, "signal",
			ended_by == SIGALRM || ended_by == SIGPIPE ? "SIGNAL_SIGKILL"
								   : "SIGNAL_SIGTERM");
		for (int i = 0; i < 10; i++) {
			struct sbx_err e2 = { 0 };
			if (envd_unary(rec, "/process.Process/SendSignal", m, cmd->user, 10000,
				       "signal the command", &e2) == 0)
				break;
			sbx_debug("%s", e2.msg);
			if (e2.http_status != 404)
				break;
			struct timespec ts = { 0, 100000000L };
			nanosleep(&ts, NULL);
		}
	}
	if (x.feeder > 0) {
		(void)kill(x.feeder, SIGTERM);
		(void)waitpid(x.feeder, NULL, 0);
	}
	if (r < 0) {
		if (resp.timed_out && cmd->timeout_ms > 0 && cmd->connect_pid > 0) {
			sbx_err_clear(err);
			r = sbx_err_set(err, SBX_E_TIMEOUT, "timed out waiting for exec '%ld'",
					cmd->connect_pid);
		} else if (resp.timed_out && cmd->timeout_ms > 0) {
			sbx_err_clear(err);
			*ret_status = SBX_EXIT_TIMEOUT;
			if (cmd->res)
				cmd->res->timed_out = true;
			r = 0;
		} else {
			sbx_err_prefix(err, "cannot run '%s' in sandbox '%s'", cmd->argv[0], l);
		}
		goto out;
	}
	if (cmd->foreground && (got_signal || x.out.gone)) {
		*ret_status = 128 + (got_signal ? got_signal : SIGPIPE);
		goto out;
	}
	if (resp.status < 200 || resp.status >= 300) {
		_cleanup_free_ char *what = xasprintf("run '%s' in sandbox '%s'", cmd->argv[0], l);
		r = envd_failed(rec, what, resp.status, &resp.body, err);
		goto out;
	}
	r = run_outcome(&x, cmd, l, ret_status, err);
out:
	sbx_http_resp_release(&resp);
	run_release(&x);
	return r;
}

int e2b_decode_stream(const char *data, size_t len, size_t chunk, long long timeout_ms,
		      struct strbuf *out, struct strbuf *errs, int *ret_status, struct sbx_err *err)
{
	char *const argv[] = { "cmd", NULL };
	struct cmd c = { .argv = argv, .timeout_ms = timeout_ms, .foreground = true };
	struct run x = { .out = { .fd = -1, .buf = out }, .err = { .fd = -1, .buf = errs } };

	/* as the network hands it over: in pieces, until the decoder has seen enough */
	for (size_t off = 0; off < len;) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;
		if (!on_stream(data + off, n, &x))
			break;
		off += n;
	}
	int r = run_outcome(&x, &c, "sandbox", ret_status, err);
	run_release(&x);
	return r;
}

int e2b_envd_connect(const struct sbx_record *rec, long pid, int out_fd, long long timeout_ms,
		     int *ret_status, struct sbx_err *err)
{
	char name[32];
	snprintf(name, sizeof(name), "exec %ld", pid);
	char *const argv[] = { name, NULL };
	struct cmd c = { .argv = argv, .timeout_ms = timeout_ms, .connect_pid = pid };

	return envd_run(rec, &c, (struct sink){ .fd = out_fd }, (struct sink){ .fd = out_fd },
			ret_status, err);
}

int e2b_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	     int *ret_status, struct sbx_err *err)
{
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	struct cmd c = { .argv = o->argv,
			 .env = (const char *const *)o->env,
			 .cwd = o->workdir ? o->workdir : rec->config.workdir,
			 .user = o->user,
			 .timeout_ms = o->timeout_ms,
			 .stdin_open = o->interactive,
			 .detach = o->detach,
			 .ret_pid = o->ret_pid,
			 .foreground = true,
			 .res = o->result };
	if (o->user && strchr(o->user, ':'))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'e2b' takes a user name for -u, "
				   "not USER:GROUP");
	long pid = 0;
	if (o->detach)
		c.ret_pid = &pid;
	int r = envd_run(rec, &c, (struct sink){ .fd = o->result ? o->result->out_fd : 1 },
			 (struct sink){ .fd = o->result ? o->result->err_fd : 2 }, ret_status, err);
	/* -d: the pid is the exec id (sbx ps, logs, wait, kill) */
	if (r == 0 && o->detach) {
		if (o->ret_pid)
			*o->ret_pid = pid;
		if (o->ret_exec_id)
			snprintf(o->ret_exec_id, SBX_EXEC_ID_MAX, "%ld", pid);
	}
	return r;
}

/* --- cp: tar through /files ------------------------------------------------------------------ */

static int files_sh(void *arg, const char *script, const char *const *args, struct strbuf *out,
		    struct strbuf *errout, int *ret_status, struct sbx_err *err)
{
	const struct sbx_record *rec = arg;
	const char *argv[10] = { "/bin/sh", "-c", script, "sh" };
	size_t n = 4;

	for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	struct cmd c = { .argv = (char *const *)argv, .cwd = "/", .user = "root" };
	return envd_run(rec, &c, (struct sink){ .fd = -1, .buf = out },
			(struct sink){ .fd = -1, .buf = errout }, ret_status, err);
}

/* as the template's default user: the tar it uploads tells the cp script who that is */
static char *files_url(const struct sbx_record *rec, const char *path)
{
	struct strbuf u = STRBUF_INIT;
	_cleanup_free_ char *base = envd_url(rec, "/files?path=");
	strbuf_addstr(&u, base);
	sbx_url_escape(&u, path);
	return strbuf_detach(&u);
}

static int files_transfer(void *arg, const char *path, int in_fd, long long size, int out_fd,
			  const char *what, struct sbx_err *err)
{
	const struct sbx_record *rec = arg;
	_cleanup_free_ char *url = files_url(rec, path);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, NULL);
	if (in_fd >= 0)
		envd_hdrs_add(&eh, "Content-Type: application/octet-stream");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	q.url = url;
	q.headers = eh.h;
	q.body_fd = in_fd;
	q.body_size = size;
	q.out_fd = out_fd;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "E2B", err);
	if (r < 0)
		sbx_err_prefix(err, "cannot %s", what);
	else if (resp.status < 200 || resp.status >= 300)
		r = envd_failed(rec, what, resp.status, &resp.body, err);
	sbx_http_resp_release(&resp);
	return r;
}

int e2b_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
	      const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { (void *)rec, files_sh, files_transfer };
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return remote_cp_in(&f, tar_fd, dest, o, err);
}

int e2b_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
	       const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { (void *)rec, files_sh, files_transfer };
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return remote_cp_out(&f, src, tar_fd, o, err);
}

/* --- fs: the filesystem service and /files, for e2b-fs.c ------------------------------------ */

int e2b_envd_rpc(const struct sbx_record *rec, const char *method, json_t *msg,
		 struct sbx_http_resp *resp, struct sbx_err *err)
{
	_cleanup_free_ char *url = envd_url(rec, method);
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, NULL);
	envd_hdrs_add(&eh, "Content-Type: application/json");
	envd_hdrs_add(&eh, "Connect-Protocol-Version: 1");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	q.url = url;
	q.headers = eh.h;
	q.body = body;
	q.body_len = strlen(body);
	q.timeout_ms = 60000;
	return sbx_http_perform(&q, resp, "E2B", err);
}

int e2b_envd_files(const struct sbx_record *rec, const char *path, int in_fd, long long size,
		   int out_fd, struct sbx_http_resp *resp, struct sbx_err *err)
{
	_cleanup_free_ char *url = files_url(rec, path);
	_cleanup_(envd_hdrs_release) struct envd_hdrs eh = { 0 };

	envd_hdrs_init(&eh, rec, NULL);
	if (in_fd >= 0)
		envd_hdrs_add(&eh, "Content-Type: application/octet-stream");
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	q.url = url;
	q.headers = eh.h;
	q.body_fd = in_fd;
	q.body_size = size;
	q.out_fd = out_fd;
	q.stall_s = 60;
	return sbx_http_perform(&q, resp, "E2B", err);
}

int e2b_envd_failed(const struct sbx_record *rec, const char *what, long status,
		    const struct strbuf *body, struct sbx_err *err)
{
	return envd_failed(rec, what, status, body, err);
}
