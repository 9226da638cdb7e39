/* Kubernetes exec: the pods/exec subresource over a WebSocket (v5.channel.k8s.io, v4 as the
 * fallback): channel 0 stdin, 1 stdout, 2 stderr, 3 the final metav1.Status, 4 resize, and in
 * v5 255 to close a channel. cp is a tar stream through exec's stdin or stdout. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/log.h"
#include "core/ws.h"

#define CH_STDIN 0
#define CH_STDOUT 1
#define CH_STDERR 2
#define CH_ERROR 3
#define CH_RESIZE 4
#define CH_CLOSE 255
#define STDIN_CHUNK 32768
#define PING_MS 5000
#define UPGRADE_TRIES 5
#define RETRY_WAIT_MAX_S 30
#define CAPTURE_MAX (1 << 20)

/* where one stream goes: an fd, or a buffer (capped) */
struct sink {
	int fd;
	struct strbuf *buf;
};

struct kexec {
	char **argv;
	char **debug_argv; /* argv as --debug shows it (-e's values redacted), or NULL: argv */
	int in_fd;	   /* -1: no stdin */
	bool tty;
	struct sink out, errs;
	long long backstop_ms; /* give up locally after this long (0: never) */
	bool backstop_124;     /* ... as --timeout does, with its status 124 */
	bool needs_eof;	       /* stdin's end must reach the command (v5 only) */
};

static volatile sig_atomic_t winch;

static void on_winch(int sig)
{
	(void)sig;
	winch = 1;
}

static int sink_write(struct sink *s, const uint8_t *p, size_t n, struct sbx_err *err)
{
	if (s->buf) {
		size_t room = s->buf->len < CAPTURE_MAX ? CAPTURE_MAX - s->buf->len : 0;
		strbuf_add(s->buf, p, n < room ? n : room);
		return 0;
	}
	if (s->fd >= 0 && sbx_write_all(s->fd, p, n) < 0 && errno != EPIPE)
		return sbx_err_errno(err, "cannot write the command's output");
	return 0;
}

static char *exec_url(const struct kube *k, const char *pod, const struct kexec *x, char **argv)
{
	struct strbuf q = STRBUF_INIT;
	strbuf_addstr(&q, "/exec?container=" KUBE_CONTAINER);
	for (char **a = argv; *a; a++) {
		strbuf_addstr(&q, "&command=");
		sbx_url_escape(&q, *a);
	}
	strbuf_addstr(&q, "&stdout=true");
	strbuf_addstr(&q, x->tty ? "&tty=true" : "&stderr=true");
	if (x->in_fd >= 0)
		strbuf_addstr(&q, "&stdin=true");
	struct strbuf u = STRBUF_INIT;
	strbuf_addf(&u, "%s/api/v1/namespaces/", k->r.api);
	sbx_url_escape(&u, k->ns);
	strbuf_addstr(&u, "/pods/");
	sbx_url_escape(&u, pod);
	strbuf_addstr(&u, q.buf);
	strbuf_release(&q);
	return strbuf_detach(&u);
}

static void sleep_s(long s)
{
	struct timespec ts = { s, 0 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !remote_got_signal)
		;
}

/* SBX_KUBE_EXEC_PROTOCOL=v4: offer v4 alone (an apiserver or a proxy that mishandles v5) */
static bool v4_only(void)
{
	const char *v = getenv("SBX_KUBE_EXEC_PROTOCOL");
	return v && streq(v, "v4");
}

/* the upgrade, retried on 429 (Retry-After) and 5xx; a refusal in Kubernetes' words */
static int open_ws(struct kube *k, const char *pod, const struct kexec *x, struct sbx_ws *ws,
		   struct sbx_err *err)
{
	_cleanup_free_ char *url = exec_url(k, pod, x, x->argv);
	/* -e's values are in the URL's query (the API has no other way): --debug hides them */
	_cleanup_free_ char *shown = sbx_debug_enabled && x->debug_argv
		? exec_url(k, pod, x, x->debug_argv)
		: NULL;
	const char *hdrs[] = { k->r.auth, NULL };
	struct sbx_ws_opts o = { .url = url,
				 .headers = k->r.auth ? hdrs : NULL,
				 .protocols = v4_only() ? "v4.channel.k8s.io"
							: "v5.channel.k8s.io, v4.channel.k8s.io",
				 .setup = sbx_kubeconfig_curl_setup,
				 .setup_arg = (void *)&k->kc,
				 .connect_timeout_ms = 30000,
				 .what = "Kubernetes",
				 .debug_url = shown,
				 .tls_hint = k->tls_hint };
	long waited = 0;

	for (int tries = 1;; tries++) {
		struct sbx_ws_refusal ref;
		if (sbx_ws_connect(ws, &o, &ref, err) == 0)
			return 0;
		sbx_ws_close(ws);
		long st = ref.status;
		if (!st) {
			sbx_ws_refusal_release(&ref);
			return -1;
		}
		/* a credential plugin's refused token: the plugin is asked again, once */
		if (st == 401 && kube_reauth(k)) {
			hdrs[0] = k->r.auth;
			o.headers = k->r.auth ? hdrs : NULL;
			sbx_ws_refusal_release(&ref);
			*err = (struct sbx_err){ 0 };
			continue;
		}
		long wait = -1;
		long long ra;
		if (ref.retry_after && sbx_parse_int(ref.retry_after, 0, 3600, &ra) == 0)
			wait = (long)ra;
		bool again = tries < UPGRADE_TRIES &&
			((st == 429 && wait <= RETRY_WAIT_MAX_S &&
			  waited + (wait < 0 ? 1 : wait) <= RETRY_WAIT_MAX_S) ||
			 st >= 500);
		if (again) {
			long s = wait >= 0 ? wait : 1;
			sbx_debug("exec upgrade: HTTP %ld; trying again in %ld s", st, s);
			sbx_ws_refusal_release(&ref);
			sleep_s(s);
			waited += s;
			*err = (struct sbx_err){ 0 };
			if (remote_got_signal)
				return sbx_err_set(err, SBX_E_SYSTEM, "exec interrupted");
			continue;
		}
		*err = (struct sbx_err){ 0 };
		remote_status_error(&k->r, "run the command", st, &ref.body, err);
		kube_reword(err);
		sbx_ws_refusal_release(&ref);
		return -1;
	}
}

/* the command's end, from the Status on channel 3 */
static int exit_status(const char *js, size_t n, int *ret, struct sbx_err *err)
{
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(js, n, 0, &je);
	const char *st = sbx_json_str(j, "status");
	if (!j || !st)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "Kubernetes ended the command with a malformed status");
	if (streq(st, "Success")) {
		*ret = 0;
		return 0;
	}
	const char *reason = sbx_json_str(j, "reason");
	json_t *causes = json_object_get(json_object_get(j, "details"), "causes");
	size_t i;
	json_t *c;
	json_array_foreach (causes, i, c) {
		const char *cr = sbx_json_str(c, "reason"), *m = sbx_json_str(c, "message");
		long long code;
		if (cr && streq(cr, "ExitCode") && m && sbx_parse_int(m, 0, 255, &code) == 0) {
			*ret = (int)code;
			return 0;
		}
	}
	_cleanup_free_ char *msg = sbx_term_safe(
		sbx_json_str(j, "message") ? sbx_json_str(j, "message") : "");
	if (strlen(msg) > 300)
		msg[300] = 0;
	if (strstr(msg, "executable file not found") || strstr(msg, "no such file or directory") ||
	    strstr(msg, "No such file or directory"))
		return sbx_err_set(err, SBX_E_CMD_NOTFOUND, "command not found in the pod: %s",
				   msg);
	if (strstr(msg, "permission denied"))
		return sbx_err_set(err, SBX_E_CMD_NOEXEC, "command cannot be run in the pod: %s",
				   msg);
	return sbx_err_set(err, SBX_E_REMOTE,
			   "Kubernetes ended the command without an exit status (%s%s%s)",
			   reason ? reason : "no reason", *msg ? ": " : "", msg);
}

static int send_resize(struct sbx_ws *ws, struct sbx_err *err)
{
	struct winsize w;
	if (ioctl(0, TIOCGWINSZ, &w) < 0 || !w.ws_col)
		return 0;
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%c{\"Width\":%u,\"Height\":%u}", CH_RESIZE, w.ws_col,
			 w.ws_row);
	return sbx_ws_send(ws, SBX_WS_BINARY, buf, (size_t)n, err);
}

/* one exec, to its end: *ret_status the command's exit status */
static int run(struct kube *k, const char *pod, struct kexec *x, int *ret_status,
	       struct sbx_err *err)
{
	struct sbx_ws ws;
	struct strbuf status = STRBUF_INIT;
	bool got_status = false, in_open = x->in_fd >= 0, v5;
	long long t0 = sbx_now_ms(), last_ping = t0;
	int r = -1;

	if (open_ws(k, pod, x, &ws, err) < 0)
		return -1;
	v5 = ws.protocol && streq(ws.protocol, "v5.channel.k8s.io");
	if (!ws.protocol || (!v5 && !streq(ws.protocol, "v4.channel.k8s.io"))) {
		sbx_err_set(
			err, SBX_E_REMOTE,
			"Kubernetes chose no exec protocol sbx speaks (v5 or v4.channel.k8s.io)");
		goto out;
	}
	sbx_debug("exec in %s over %s", pod, ws.protocol);
	if (!v5 && x->in_fd >= 0 && x->needs_eof) {
		sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"copying into the sandbox needs v5.channel.k8s.io: over %s the end of the "
			"tar stream cannot reach tar",
			ws.protocol);
		goto out;
	}
	if (!v5 && x->in_fd >= 0)
		sbx_warn("Kubernetes chose %s, which cannot tell the command that stdin ended",
			 ws.protocol);
	if (x->tty && send_resize(&ws, err) < 0)
		goto out;
	for (;;) {
		int op;
		const uint8_t *d;
		size_t n;
		int got;
		while ((got = sbx_ws_recv(&ws, &op, &d, &n, err)) == 1) {
			if (op == SBX_WS_CLOSE)
				break;
			if (op != SBX_WS_BINARY || n == 0)
				continue;
			int ch = d[0];
			if (ch == CH_STDOUT && sink_write(&x->out, d + 1, n - 1, err) < 0)
				goto out;
			if (ch == CH_STDERR && sink_write(&x->errs, d + 1, n - 1, err) < 0)
				goto out;
			if (ch == CH_ERROR && n > 1) {
				if (status.len + n > 65536) {
					sbx_err_set(err, SBX_E_REMOTE,
						    "Kubernetes sent an oversized exec status");
					goto out;
				}
				strbuf_add(&status, d + 1, n - 1);
				got_status = true;
			}
		}
		if (got < 0 && !got_status)
			goto out;
		if (got < 0 || ws.close_got || (got == 1 && op == SBX_WS_CLOSE))
			break;
		if (remote_got_signal) {
			sbx_err_set(err, SBX_E_SYSTEM,
				    "interrupted (the command may still run in the pod)");
			goto out;
		}
		if (x->backstop_ms && sbx_now_ms() - t0 > x->backstop_ms) {
			if (!x->backstop_124) {
				sbx_err_set(err, SBX_E_TIMEOUT, "the command did not end in time");
				goto out;
			}
			/* the command was ended, but something holds its streams open (a
			 * kubelet waits for them): its time is up all the same */
			sbx_warn("the command's streams stayed open past --timeout; sbx stops "
				 "waiting for them");
			*ret_status = SBX_EXIT_TIMEOUT;
			r = 0;
			goto out;
		}
		if (winch) {
			winch = 0;
			if (send_resize(&ws, err) < 0)
				goto out;
		}
		if (sbx_now_ms() - last_ping >= PING_MS) {
			last_ping = sbx_now_ms();
			if (sbx_ws_send(&ws, SBX_WS_PING, "", 0, err) < 0)
				goto out;
		}
		struct pollfd pf[2] = { { .fd = sbx_ws_fd(&ws), .events = POLLIN },
					{ .fd = in_open ? x->in_fd : -1, .events = POLLIN } };
		if (poll(pf, 2, 1000) < 0 && errno != EINTR) {
			sbx_err_errno(err, "cannot wait for the command");
			goto out;
		}
		if (in_open && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			uint8_t buf[STDIN_CHUNK + 1];
			ssize_t m = read(x->in_fd, buf + 1, STDIN_CHUNK);
			if (m < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (m <= 0) {
				in_open = false;
				/* v5 closes stdin; v4 cannot say EOF */
				if (v5) {
					uint8_t c[2] = { CH_CLOSE, CH_STDIN };
					if (sbx_ws_send(&ws, SBX_WS_BINARY, c, 2, err) < 0)
						goto out;
				}
				continue;
			}
			buf[0] = CH_STDIN;
			if (sbx_ws_send(&ws, SBX_WS_BINARY, buf, (size_t)m + 1, err) < 0) {
				if (got_status || ws.close_got)
					break;
				goto out;
			}
		}
	}
	if (!got_status) {
		sbx_err_set(err, SBX_E_NETWORK,
			    "Kubernetes closed the exec stream before the command's exit status");
		goto out;
	}
	*err = (struct sbx_err){ 0 };
	r = exit_status(status.buf, status.len, ret_status, err);
out:
	strbuf_release(&status);
	sbx_ws_close(&ws);
	return r;
}

/* --- sbx exec ------------------------------------------------------------------------------- */

/* -e, -w, --timeout, -d: the API has none of them, so a small sh script does them (the
 * command itself is "$@"; sh's own 127 and 126 come back when it cannot run) */
static char **wrap(const struct sbx_exec_opts *o, const char *workdir, bool redact,
		   struct strbuf *script)
{
	size_t n = 0;
	for (char **a = o->argv; *a; a++)
		n++;
	if (workdir) {
		strbuf_addstr(script, "cd -- ");
		remote_sh_quote(script, workdir);
		strbuf_addstr(script, " || exit 126\n");
	}
	for (char **e = o->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		const char *v = eq ? eq + 1 : getenv(*e);
		if (!v)
			continue;
		size_t nl = eq ? (size_t)(eq - *e) : strlen(*e);
		_cleanup_free_ char *kv = xasprintf("%.*s=%s", (int)nl, *e,
						    redact ? "<redacted>" : v);
		strbuf_addstr(script, "export ");
		remote_sh_quote(script, kv);
		strbuf_addch(script, '\n');
	}
	if (o->detach) {
		strbuf_addstr(script,
			      "( trap '' HUP; exec \"$@\" ) </dev/null >/dev/null 2>&1 &\n"
			      "echo $!\n");
	} else if (o->timeout_ms > 0) {
		/* the watchdog exits 0 once it fired, 1 when ended first. It ends the command's
		 * whole tree (the shells images have cannot make a process group without a
		 * terminal): the tree is stopped, looked at again, then TERM, and KILL 2 s on.
		 * Ended first, it ends its sleep too: by KILL (a TERM that came before the exec
		 * would meet the shell's own handler in the child, and be lost), and even when
		 * told between the sleep's fork and z's assignment (its trap then notes it) */
		strbuf_addf(script,
			    "\"$@\" <&0 & p=$!\n"
			    "( z= c=\n"
			    "  trap 'if [ -n \"$z\" ]; then kill -KILL $z 2>/dev/null; exit 1; fi\n"
			    "    c=1' TERM\n"
			    "  sleep %lld.%03lld & z=$!\n"
			    "  [ -z \"$c\" ] || { kill -KILL $z 2>/dev/null; exit 1; }\n"
			    "  wait $z; trap '' TERM\n"
			    "  tree() { t=\" $* \" n=0; while [ $n != ${#t} ]; do n=${#t}\n"
			    "    for s in /proc/[0-9]*/stat; do read -r l <$s || continue\n"
			    "      set -- ${l##*\") \"}; i=${s#/proc/}; i=${i%%/stat}\n"
			    "      case $t in *\" $i \"*) ;; *\" $2 \"*) t=\"$t$i \";; esac\n"
			    "    done; done; echo $t; }\n"
			    "  t=$(tree $p); kill -STOP $t; t=$(tree $t)\n"
			    "  kill -TERM $t; kill -CONT $t; sleep 2; kill -KILL $t; exit 0\n"
			    ") </dev/null >/dev/null 2>&1 & w=$!\n"
			    "wait $p 2>/dev/null; s=$?\n"
			    "kill $w 2>/dev/null; wait $w && exit 124; exit $s\n",
			    o->timeout_ms / 1000, o->timeout_ms % 1000);
	} else {
		strbuf_addstr(script, "exec \"$@\"\n");
	}
	char **argv = xcalloc(n + 5, sizeof(char *));
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = script->buf;
	argv[3] = "sh";
	for (size_t i = 0; i < n; i++)
		argv[4 + i] = o->argv[i];
	return argv;
}

int kube_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	      int *ret_status, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	struct strbuf script = STRBUF_INIT, pidout = STRBUF_INIT, shown_script = STRBUF_INIT;
	struct termios saved;
	bool raw = false;

	if (remote_check_running("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	bool needs_wrap = (o->env && *o->env) || o->workdir || o->timeout_ms > 0 || o->detach;
	_cleanup_free_ char **argv = needs_wrap ? wrap(o, o->workdir, false, &script) : NULL;
	_cleanup_free_ char **shown = needs_wrap && sbx_debug_enabled && o->env && *o->env
		? wrap(o, o->workdir, true, &shown_script)
		: NULL;
	struct sbx_exec_result *res = o->result;
	struct kexec x = { .argv = argv ? argv : o->argv,
			   .debug_argv = shown,
			   .in_fd = o->interactive && !o->detach ? 0 : -1,
			   .tty = o->tty,
			   .out = { .fd = res ? res->out_fd : 1 },
			   .errs = { .fd = res ? res->err_fd : 2 },
			   /* the watchdog ends it at --timeout, KILL 2 s on: 10 s of slack */
			   .backstop_ms = o->timeout_ms > 0 ? o->timeout_ms + 10000 : 0,
			   .backstop_124 = o->timeout_ms > 0 && !o->detach };
	if (o->detach)
		x.out = (struct sink){ .fd = -1, .buf = &pidout };
	struct remote_sigs sigs;
	remote_sigs_catch(&sigs);
	struct sigaction wi = { .sa_handler = on_winch }, old_wi;
	if (o->tty) {
		(void)sigaction(SIGWINCH, &wi, &old_wi);
		if (isatty(0) && tcgetattr(0, &saved) == 0) {
			struct termios t = saved;
			cfmakeraw(&t);
			raw = tcsetattr(0, TCSANOW, &t) == 0;
		}
	}
	int status = 0;
	int r = run(&k, kube_pod(rec), &x, &status, err);
	if (raw)
		(void)tcsetattr(0, TCSAFLUSH, &saved);
	if (o->tty)
		(void)sigaction(SIGWINCH, &old_wi, NULL);
	remote_sigs_restore(&sigs);
	if (r == 0 && o->timeout_ms > 0 && status == SBX_EXIT_TIMEOUT && res)
		res->timed_out = true;
	if (r == 0 && o->detach) {
		long long pid = 0;
		const char *s = strbuf_str(&pidout);
		_cleanup_free_ char *line = xstrndup(s, strcspn(s, "\r\n"));
		if (status == 0 && sbx_parse_int(line, 1, 1LL << 30, &pid) == 0) {
			if (o->ret_pid)
				*o->ret_pid = (long)pid;
			if (o->ret_exec_id)
				snprintf(o->ret_exec_id, SBX_EXEC_ID_MAX, "%lld", pid);
		}
	}
	strbuf_release(&script);
	strbuf_release(&shown_script);
	strbuf_release(&pidout);
	if (r == 0)
		*ret_status = status;
	return r;
}

/* --- cp: tar through exec ------------------------------------------------------------------- */

#define NEED_TAR                                                                                   \
	"command -v tar >/dev/null 2>&1 || { echo \"the pod's image has no tar, which cp needs\" " \
	">&2; exit 5; }\n"

/* remote.c's cp rules, streamed: $1 dest, $2 the name entries start with ('' for a stream),
 * $3 1: keep owners. The tar comes on stdin. Exit 4: something does not exist; 3: refused */
static const char cp_in_script[] = NEED_TAR
	"d=$1 t=$2; o=-o; [ \"$3\" = 1 ] && o=\n"
	"if [ -z \"$t\" ] || [ -d \"$d\" ]; then\n"
	"  [ -e \"$d\" ] || { echo \"directory '$d' does not exist\" >&2; exit 4; }\n"
	"  [ -d \"$d\" ] || { echo \"'$d' is not a directory\" >&2; exit 3; }\n"
	"  exec tar -x $o -f - -C \"$d\"\n"
	"fi\n"
	"case $d in */) echo \"directory '$d' does not exist\" >&2; exit 4;; esac\n"
	"p=$(dirname -- \"$d\")\n"
	"[ -e \"$p\" ] || { echo \"directory '$p' does not exist\" >&2; exit 4; }\n"
	"[ -d \"$p\" ] || { echo \"'$p' is not a directory\" >&2; exit 3; }\n"
	"w=$(mktemp -d \"$p/.sbx-cp.XXXXXX\") || exit 3\n"
	"tar -x $o -f - -C \"$w\" || { rm -rf \"$w\"; exit 3; }\n"
	"s=$w/$t; [ \"$t\" = . ] && s=$w\n"
	"if [ -d \"$s\" ] && [ -e \"$d\" ]; then rm -rf \"$w\"\n"
	"  echo \"cannot copy a directory onto file '$d'\" >&2; exit 3; fi\n"
	"if [ \"$t\" = . ]; then mv -f \"$w\" \"$d\"; exit; fi\n"
	"mv -f \"$s\" \"$d\" && rmdir \"$w\"\n";

/* $1 src, $2 the name entries start with, $3 1: follow src if a link; the tar on stdout */
static const char cp_out_script[] = NEED_TAR
	"s=$1 t=$2; umask 022\n"
	"[ -e \"$s\" ] || [ -L \"$s\" ] || { echo \"'$s' does not exist\" >&2; exit 4; }\n"
	"if [ \"$t\" = . ]; then\n"
	"  [ -d \"$s\" ] || { echo \"'$s' is not a directory\" >&2; exit 3; }\n"
	"  exec tar -c -f - -C \"$s\" .\n"
	"fi\n"
	"if [ \"$3\" = 1 ] && [ -L \"$s\" ]; then\n"
	"  w=$(mktemp -d) || exit 3\n"
	"  cp -pRH \"$s\" \"$w/$t\" && tar -c -f - -C \"$w\" \"$t\"; r=$?; rm -rf \"$w\"; exit $r\n"
	"fi\n"
	"exec tar -c -f - -C \"$(dirname -- \"$s\")\" \"$t\"\n";

static int cp_failed(int status, const struct strbuf *errout, struct sbx_err *err)
{
	const char *s = strbuf_str(errout);
	s += strspn(s, "\r\n");
	_cleanup_free_ char *line = sbx_term_safe_n(s, strcspn(s, "\r\n"));
	if (strlen(line) > 400)
		line[400] = 0;
	enum sbx_errkind kind = status == 4 ? SBX_E_NOTFOUND
		: status == 3		    ? SBX_E_USAGE
		: status == 5		    ? SBX_E_UNSUPPORTED
					    : SBX_E_REMOTE;
	if (*line)
		return sbx_err_set(err, kind, "%s", line);
	return sbx_err_set(err, kind, "tar failed inside the sandbox (exit status %d)", status);
}

static int cp_run(const struct sbx_record *rec, const char *script, const char *const *args,
		  int in_fd, int out_fd, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	struct strbuf errout = STRBUF_INIT;
	const char *argv[8] = { "/bin/sh", "-c", script, "sh" };
	size_t n = 4;

	if (remote_check_running("Kubernetes", rec, err) < 0 || kube_open(&k, rec, err) < 0)
		return -1;
	for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	struct kexec x = { .argv = (char **)argv,
			   .in_fd = in_fd,
			   .needs_eof = in_fd >= 0,
			   .out = { .fd = out_fd, .buf = NULL },
			   .errs = { .fd = -1, .buf = &errout } };
	if (out_fd < 0)
		x.out.buf = &errout; /* unpacking: tar's -v is off; anything said is an error */
	struct remote_sigs sigs;
	remote_sigs_catch(&sigs);
	int status = 0;
	int r = run(&k, kube_pod(rec), &x, &status, err);
	remote_sigs_restore(&sigs);
	if (r == 0 && status != 0)
		r = cp_failed(status, &errout, err);
	strbuf_release(&errout);
	return r;
}

int kube_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
	       const struct sbx_cp_opts *o, struct sbx_err *err)
{
	const char *args[] = { dest, o->top ? o->top : "", o->archive ? "1" : "0", NULL };
	return cp_run(rec, cp_in_script, args, tar_fd, -1, err);
}

int kube_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct sbx_cp_src s;
	sbx_cp_src_parse(src, &s);
	const char *args[] = { s.path, s.top, o->follow_links ? "1" : "0", NULL };
	int r = cp_run(rec, cp_out_script, args, -1, tar_fd, err);
	sbx_cp_src_release(&s);
	return r;
}
