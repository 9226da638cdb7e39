/* The Docker provider's exec instances and their processes: exec create and inspect, the 8-byte
 * frames of a multiplexed stream, a helper command's output collected (a plain start, no
 * hijacked stream), and signals to the processes of an exec. The API has no exec kill, and the
 * pid an exec's inspect gives is the daemon host's: the root process of the exec is found
 * inside the container by that pid through /containers/ID/top (Podman names both pids; for
 * Docker the two views of the container's processes are put side by side, each in the order
 * the processes began, and checked by their parents), then a second exec signals its session, its descendants and every
 * process that holds its output (a daemonised child, after `env -i` too), and any process that
 * still carries the exec's SBX_EXEC_ID (the fallback where the pid cannot be found: gVisor). */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "core/log.h"
#include "providers/remote.h"

#define COLLECT_MAX (1 << 20)
#define MAP_TRIES 3

/* --- frames --------------------------------------------------------------------------------- */

void docker_frames_feed(struct docker_frames *f, const char *p, size_t n,
			void (*put)(void *arg, int stream, const char *p, size_t n), void *arg)
{
	while (n) {
		if (f->left == 0) {
			size_t k = 8 - f->hdr_len < n ? 8 - f->hdr_len : n;
			memcpy(f->hdr + f->hdr_len, p, k);
			f->hdr_len += k;
			p += k;
			n -= k;
			if (f->hdr_len < 8)
				return;
			f->hdr_len = 0;
			f->stream = f->hdr[0] == 2 ? 2 : 1;
			f->left = (size_t)f->hdr[4] << 24 | (size_t)f->hdr[5] << 16 |
				(size_t)f->hdr[6] << 8 | f->hdr[7];
			continue;
		}
		size_t k = f->left < n ? f->left : n;
		put(arg, f->stream, p, k);
		f->left -= k;
		p += k;
		n -= k;
	}
}

/* --- exec instances ------------------------------------------------------------------------- */

char *docker_exec_create(const struct docker *d, const struct sbx_record *rec,
			 const struct docker_exec_spec *s, struct sbx_err *err)
{
	json_t *cmd = json_array(), *env, *j;
	_cleanup_json_ json_t *resp = NULL;

	for (size_t i = 0; s->argv[i]; i++) {
		_cleanup_free_ char *what = s->quiet_args ? NULL
			: i ? xasprintf("argument %zu of the command", i)
			    : xstrdup("the command");
		json_t *a = docker_text(s->argv[i], what, err);
		if (!a) {
			json_decref(cmd);
			return NULL;
		}
		json_array_append_new(cmd, a);
	}
	if (!(env = docker_env(s->env, "exec -e", err))) {
		json_decref(cmd);
		return NULL;
	}
	_cleanup_json_ json_t *body = json_pack(
		"{s:o, s:o, s:b, s:b, s:b, s:b}", "Cmd", cmd, "Env", env, "AttachStdin",
		s->stdin_open, "AttachStdout", s->attach, "AttachStderr", s->attach, "Tty", s->tty);
	if (s->cwd) {
		if (!(j = docker_text(s->cwd, "-w", err)))
			return NULL;
		json_object_set_new(body, "WorkingDir", j);
	}
	if (s->user) {
		if (!(j = docker_text(s->user, "-u", err)))
			return NULL;
		json_object_set_new(body, "User", j);
	}
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
			    "cannot start the command: Docker's answer has no valid Id");
		return NULL;
	}
	return xstrdup(id);
}

int docker_exec_state(const struct docker *d, const char *id, bool *running, long long *code,
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

struct collect {
	struct docker_frames f;
	struct strbuf *out;
};

static void collect_put(void *arg, int stream, const char *p, size_t n)
{
	struct collect *c = arg;
	if (stream == 1 && c->out->len + n <= COLLECT_MAX)
		strbuf_add(c->out, p, n);
}

static bool collect_data(const char *p, size_t n, void *arg)
{
	docker_frames_feed(&((struct collect *)arg)->f, p, n, collect_put, arg);
	return true;
}

/* "/bin/sh -c SCRIPT sh ARGS..." as root in "/", to its end (out NULL: its output dropped);
 * its stdout into out. Attached: the answer's body, the exec's stream, ends when it does (a
 * detached exec's inspect is no guide: Podman says it runs long after it ended) */
static int helper(const struct docker *d, const struct sbx_record *rec, const char *script,
		  char *const *args, struct strbuf *out, struct sbx_err *err)
{
	char *argv[12] = { "/bin/sh", "-c", (char *)script, "sh" };
	size_t n = 4;
	for (; args && *args && n < ARRAY_SIZE(argv) - 1; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	struct docker_exec_spec s = {
		.argv = argv, .cwd = "/", .user = "0", .attach = true, .quiet_args = true
	};
	_cleanup_free_ char *id = docker_exec_create(d, rec, &s, err);
	if (!id)
		return -1;
	/* without an upgrade the daemon answers with the stream as the body, to its end */
	_cleanup_free_ char *path = xasprintf("/exec/%s/start", id);
	_cleanup_free_ char *url = docker_url(d, path);
	struct strbuf dropped = STRBUF_INIT;
	const char *hdrs[] = { "Content-Type: application/json", NULL };
	const char *body = "{\"Detach\":false,\"Tty\":false}";
	struct collect c = { .out = out ? out : &dropped };
	struct sbx_http_req q;
	struct sbx_http_resp resp;
	docker_req_init(d, &q, url);
	q.method = "POST";
	q.headers = hdrs;
	q.body = body;
	q.body_len = strlen(body);
	q.on_data = collect_data;
	q.arg = &c;
	q.timeout_ms = 30000;
	int r = sbx_http_perform(&q, &resp, "Docker", err);
	if (r < 0)
		r = err->kind == SBX_E_NETWORK ? docker_unreachable(d, err) : -1;
	else if (resp.status < 200 || resp.status >= 300)
		r = docker_status_error("run sbx's helper", resp.status, &resp.body, err);
	sbx_http_resp_release(&resp);
	strbuf_release(&dropped);
	return r;
}

/* --- an exec's root inside the container ---------------------------------------------------- */

struct proc {
	long long pid, ppid, start; /* start: in clock ticks since boot (inside only) */
};

/* the order the processes began in: by start time, then (a tick's ties) by pid */
static int proc_cmp(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static long long num(const char *s)
{
	long long v;
	return s && sbx_parse_int(s, 0, 1LL << 40, &v) == 0 ? v : -1;
}

/* GET /containers/ID/top?ps_args=ARGS: the rows' columns a and b (by title), in the daemon's
 * order; -1 when the daemon refuses or a row is not numbers */
static ssize_t top(const struct docker *d, const struct sbx_record *rec, const char *args,
		   const char *ta, const char *tb, struct proc **ret)
{
	_cleanup_json_ json_t *resp = NULL;
	struct sbx_err e = { 0 };
	struct strbuf p = STRBUF_INIT;
	size_t i, ia = SIZE_MAX, ib = SIZE_MAX;
	json_t *v;

	strbuf_addf(&p, "/containers/%s/top?ps_args=", rec->provider_id);
	sbx_url_escape(&p, args);
	struct docker_call c = { .path = p.buf, .what = "list the container's processes" };
	long st = docker_do(d, &c, &resp, &e);
	strbuf_release(&p);
	if (st < 0)
		return -1;
	json_array_foreach (json_object_get(resp, "Titles"), i, v) {
		const char *t = json_string_value(v);
		if (t && streq(t, ta))
			ia = i;
		if (t && streq(t, tb))
			ib = i;
	}
	json_t *rows = json_object_get(resp, "Processes");
	if (ia == SIZE_MAX || ib == SIZE_MAX || !json_is_array(rows))
		return -1;
	size_t n = json_array_size(rows);
	struct proc *a = xcalloc(n + 1, sizeof(*a));
	json_array_foreach (rows, i, v) {
		a[i].pid = num(json_string_value(json_array_get(v, ia)));
		a[i].ppid = num(json_string_value(json_array_get(v, ib)));
		if (a[i].pid < 0 || a[i].ppid < 0) {
			free(a);
			return -1;
		}
	}
	*ret = a;
	return (ssize_t)n;
}

/* every process but the helper's own shell, as "PID PPID START" lines (builtins only: the
 * helper has no child to list) */
#define LIST_SCRIPT                                                                         \
	"for p in /proc/[0-9]*; do n=${p#/proc/}; [ \"$n\" = $$ ] && continue; "            \
	"read -r l <\"$p/stat\" || continue; set -- ${l##*) }; echo \"$n $2 ${20}\"; done " \
	"2>/dev/null; exit 0"

static ssize_t inside(const struct docker *d, const struct sbx_record *rec, struct proc **ret)
{
	struct strbuf out = STRBUF_INIT;
	struct sbx_err e = { 0 };

	if (helper(d, rec, LIST_SCRIPT, NULL, &out, &e) < 0) {
		strbuf_release(&out);
		return -1;
	}
	size_t cap = 64, n = 0;
	struct proc *a = xcalloc(cap, sizeof(*a));
	char *save = NULL;
	for (char *l = strtok_r(out.buf ? out.buf : (char[]){ 0 }, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		long long p, pp, st;
		if (sscanf(l, "%lld %lld %lld", &p, &pp, &st) != 3)
			continue;
		if (n == cap)
			a = xrealloc(a, (cap *= 2) * sizeof(*a));
		a[n++] = (struct proc){ p, pp, st };
	}
	strbuf_release(&out);
	qsort(a, n, sizeof(*a), proc_cmp);
	*ret = a;
	return (ssize_t)n;
}

static ssize_t find(const struct proc *a, size_t n, long long pid)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].pid == pid)
			return (ssize_t)i;
	return -1;
}

/* the host's view h and the container's c of the same processes, each in the order they
 * began, side by side: every parent where the pairing puts it (a parent outside the
 * container, inside none) */
static bool paired(const struct proc *h, const struct proc *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ssize_t k = find(h, n, h[i].ppid);
		if (k < 0 ? c[i].ppid != 0 : c[i].ppid != c[k].pid)
			return false;
	}
	return true;
}

/* the pid inside the container of the daemon host's pid hpid: 0 when it cannot be told (the
 * process is gone, the runtime keeps pids of its own: gVisor) */
static long long container_pid(const struct docker *d, const struct sbx_record *rec, long long hpid)
{
	struct proc *h = NULL, *h2 = NULL, *c = NULL;
	long long found = 0;

	if (docker_is_podman(rec)) {
		/* Podman's top takes its own descriptors: both pids at once */
		ssize_t n = top(d, rec, "pid,hpid", "HPID", "PID", &h);
		ssize_t k = n > 0 ? find(h, (size_t)n, hpid) : -1;
		found = k >= 0 ? h[k].ppid : 0;
		free(h);
		return found;
	}
	/* ps on the daemon's host, its processes in the order they began (their pids may have
	 * wrapped around since) */
	static const char *const ps = "-e -o pid,ppid --sort=start_time,pid";
	for (int t = 0; t < MAP_TRIES && !found; t++) {
		ssize_t n = top(d, rec, ps, "PID", "PPID", &h);
		if (n <= 0 || find(h, (size_t)n, hpid) < 0) {
			free(h);
			break; /* not a process of the container's, as the host sees them */
		}
		ssize_t m = inside(d, rec, &c);
		ssize_t n2 = m >= 0 ? top(d, rec, ps, "PID", "PPID", &h2) : -1;
		/* the processes stood still while they were looked at from both sides */
		if (m == n && n2 == n && !memcmp(h, h2, (size_t)n * sizeof(*h)) &&
		    paired(h, c, (size_t)n))
			found = c[find(h, (size_t)n, hpid)].pid;
		free(h);
		free(h2);
		free(c);
		h = h2 = c = NULL;
	}
	return found;
}

/* SIG ROOT TOKEN: ROOT (0: none), its descendants, its session, every process holding its
 * stdout or stderr (a pipe, socket or terminal of its own), and every process whose
 * environment has SBX_EXEC_ID=TOKEN get SIG; never the container's init or the helper */
#define KILL_SCRIPT                                                                              \
	"s=$1 r=$2 t=$3 me=$$ all= k=' '; "                                                      \
	"for p in /proc/[0-9]*; do n=${p#/proc/}; [ \"$n\" = \"$me\" ] && continue; "            \
	"read -r l <\"$p/stat\" || continue; set -- ${l##*) }; all=\"$all $n:$2:$4\"; "          \
	"done 2>/dev/null; "                                                                     \
	"if [ \"$r\" != 0 ] && [ -e /proc/$r ]; then k=\" $r \" g=1; "                           \
	"while [ $g = 1 ]; do g=0; for x in $all; do n=${x%%:*} y=${x#*:}; "                     \
	"case $k in *\" $n \"*) continue ;; esac; "                                              \
	"case $k in *\" ${y%%:*} \"*) k=\"$k$n \" g=1; continue ;; esac; "                       \
	"[ \"${y#*:}\" = \"$r\" ] && k=\"$k$n \" g=1; done; done; "                              \
	"o= e=; for f in 1 2; do x=/proc/$r/fd/$f; "                                             \
	"if [ -p $x ] || [ -S $x ]; then o=\"$o $x\"; "                                          \
	"else case $(readlink $x 2>/dev/null) in /dev/pts/*) o=\"$o $x\" ;; esac; fi; done; "    \
	"if [ -n \"$o\" ]; then for x in $all; do n=${x%%:*}; "                                  \
	"case $k in *\" $n \"*) continue ;; esac; for f in /proc/$n/fd/*; do for y in $o; do "   \
	"[ \"$f\" -ef $y ] && { k=\"$k$n \"; break 2; }; done; done; done; fi; fi 2>/dev/null; " \
	"if [ -n \"$t\" ]; then for x in $all; do n=${x%%:*}; "                                  \
	"tr '\\000' '\\n' <\"/proc/$n/environ\" 2>/dev/null | grep -qx \"SBX_EXEC_ID=$t\" && "   \
	"k=\"$k$n \"; done; fi; "                                                                \
	"for n in $k; do [ \"$n\" = 1 ] || [ \"$n\" = \"$me\" ] || kill -$s $n 2>/dev/null; "    \
	"done; exit 0"

int docker_kill_exec(const struct docker *d, const struct sbx_record *rec, const char *exec_id,
		     const char *tok, int sig, struct sbx_err *err)
{
	bool running = false;
	long long code, hpid = 0, cpid = 0;

	if (exec_id && docker_exec_state(d, exec_id, &running, &code, &hpid, err) < 0)
		return -1;
	if (running && hpid > 0)
		cpid = container_pid(d, rec, hpid);
	sbx_debug("docker: signal %d to exec %.12s (pid %lld, %lld inside)", sig,
		  exec_id ? exec_id : "-", hpid, cpid);
	_cleanup_free_ char *sigs = xasprintf("%d", sig);
	_cleanup_free_ char *root = xasprintf("%lld", cpid);
	char *args[] = { sigs, root, (char *)(tok ? tok : ""), NULL };
	return helper(d, rec, KILL_SCRIPT, args, NULL, err);
}

int docker_kill_all(const struct docker *d, const struct sbx_record *rec, int sig,
		    struct sbx_err *err)
{
	_cleanup_free_ char *sigs = xasprintf("%d", sig);
	char *args[] = { sigs, NULL };

	/* every process but init (and this shell) */
	return helper(d, rec, "kill -$1 -1 2>/dev/null; exit 0", args, NULL, err);
}
