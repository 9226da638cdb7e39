/* sbx exec on a gVisor sandbox (the CLI; for -d, jobs.c's waiter): runsc exec in the sandbox's
 * namespaces (gvisor.c), with the environment, users, streams and exit statuses of a local
 * sandbox's exec.
 *
 *  - No shell between: the command is runsc exec's own. Once it runs, runsc writes its pid in
 *    gVisor (--internal-pid-file) into the sandbox's runsc state directory (DIR/gvisor/state,
 *    out of the sandbox's reach). Until then what comes on the command's stderr (its pty with
 *    -t) is held back: when runsc ends without that pid the command never ran, and what was
 *    held is runsc's message saying why, which becomes one line of sbx's: 127 (not found), 126
 *    (not executable), 125 (no such -w directory). A file the kernel cannot run (no #!) runs
 *    under /bin/sh, as execvp does.
 *  - runsc's process is a client of the sandbox's sentry: it stays out of the sandbox's cgroups
 *    (what it starts runs in the sentry, charged there), so an exec costs no cgroup migration.
 *  - Ending the command happens inside gVisor, never to runsc's client (killing the client
 *    leaves the command running): runsc kill --pid for the command (through the sentry), and
 *    the sandbox's own sh's kill, run by runsc exec, for its process group (gVisor starts each
 *    exec'd command as the leader of a session and group of its own). --timeout kills both; an
 *    interrupt, termination, hangup or quit signal to sbx goes to the group, and once the
 *    command ended what is left of its group is killed, as on a local sandbox; SIGUSR1 and
 *    SIGUSR2 go to the command alone. A watcher process holds a pipe whose other end only sbx
 *    has: when sbx ends before the command did (SIGKILL too), the watcher kills the command and
 *    its group.
 *  - -t: a pty of our own whose other side is the controlling terminal of runsc's session (a
 *    helper leads it), given to runsc exec as the command's console: the terminal's ^C and
 *    window changes signal runsc, which passes them on to the foreground group of the
 *    command's terminal in gVisor; sbx relays it as a local exec -t does (raw mode, resizes).
 *  - -u USER[:GROUP]: looked up in the sandbox's /etc/passwd and /etc/group by cp's confined
 *    helper (local_confined: in the sandbox's namespaces, Landlock on its root, seccomp), never
 *    by sbx on the host; runsc exec --user runs the command with those ids, HOME is the home.
 *  - -d: jobs.c's waiter runs this exec with the job's pipe for its output; the job's record
 *    keeps the command's pid in gVisor, which ps shows and kill signals (local_gvisor_signal).
 *  - The streams go through pipes we relay (gVisor writes a file it is given at an offset of
 *    its own: two execs into one file would overwrite each other); --json takes them there.
 *    runsc reports a death by signal N as status 128 + N, which --json names as signal N. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>

#include "core/proc.h"
#include "providers/local/net.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* what is held back until the command runs (runsc's message is far smaller) */
#define HOLD_MAX 65536
/* reads of what a pipe holds once the command ended (a process it left behind may go on) */
#define DRAIN_MAX 64
/* after --timeout killed the command, how long runsc's client has to end */
#define CLIENT_GRACE_MS 10000
/* how long runsc may take to start a command */
#define WAIT_MAX_MS 60000

struct gv_env {
	char **v;
	size_t n;
};

static void gv_env_set(void *arg, const char *kv)
{
	struct gv_env *e = arg;
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], kv, klen) == 0 && e->v[i][klen] == '=') {
			free(e->v[i]);
			e->v[i] = xstrdup(kv);
			return;
		}
	e->v = xrealloc(e->v, (e->n + 2) * sizeof(char *));
	e->v[e->n++] = xstrdup(kv);
	e->v[e->n] = NULL;
}

/* --- the command in gVisor ---------------------------------------------------------------- */

/* one exec: runsc's client, and what it started */
struct gv {
	const struct sbx_record *rec;
	const char *label;
	struct local_runsc r; /* a client call in the sandbox's namespaces */
	int state;	      /* DIR/gvisor/state (O_PATH) */
	char pidname[48];     /* where runsc writes the command's pid, in state */
	pid_t pid;	      /* runsc's process (with -t, the helper leading its session) */
	int pidfd;
	pid_t inner; /* the command's pid in gVisor; 0 until runsc wrote it */
	bool ended;  /* pid ended */
};

/* the command's pid in gVisor once runsc wrote it; 0 before (and when it never will) */
static pid_t gv_inner(struct gv *g)
{
	char buf[24];
	long long v;

	if (g->inner > 0)
		return g->inner;
	int fd = openat(g->state, g->pidname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (sbx_parse_int(buf, 1, INT_MAX, &v) < 0)
		return 0;
	return g->inner = (pid_t)v;
}

static bool gv_poll_end(struct gv *g, int ms)
{
	struct pollfd p = { .fd = g->pidfd, .events = POLLIN };

	if (!g->ended && poll(&p, 1, ms) > 0)
		g->ended = true;
	return g->ended;
}

/* until the command runs (its pid known) or runsc ended without it (or, a sentry gone astray,
 * WAIT_MAX_MS passed) */
static pid_t gv_wait_inner(struct gv *g)
{
	for (int i = 0; !gv_inner(g) && i < WAIT_MAX_MS / 2; i++)
		if (gv_poll_end(g, 2))
			return gv_inner(g);
	return g->inner;
}

/* keeps only the descriptors keep[] (0-2 become /dev/null) */
static void keep_only(int *keep, size_t n)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; i < 3 && null >= 0; i++)
		(void)dup2(null, i);
	for (size_t i = 1; i < n; i++) /* ascending */
		for (size_t k = i; k > 0 && keep[k] < keep[k - 1]; k--) {
			int t = keep[k];
			keep[k] = keep[k - 1];
			keep[k - 1] = t;
		}
	unsigned from = 3;
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if (keep[i] > (int)from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

/* the watcher, a grandchild of sbx in a session of its own: sbx's end of life closing without
 * the byte that says the command ended means sbx was killed; then so are the command and its
 * group */
static _noreturn_ void gv_watch(struct gv *g, int life)
{
	static const int ign[] = { SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGPIPE, SIGUSR1,
				   SIGUSR2, SIGWINCH, SIGTSTP, SIGTTIN, SIGTTOU };
	sigset_t none;
	char b;
	ssize_t n;

	for (size_t k = 0; k < ARRAY_SIZE(ign); k++)
		signal(ign[k], SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	/* none of the caller's descriptors: a pipe of its stays open no longer than sbx does */
	int keep[] = { life, g->pidfd, g->state };
	keep_only(keep, ARRAY_SIZE(keep));
	do
		n = read(life, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0);
	if (gv_wait_inner(g) > 0 && !gv_poll_end(g, 0))
		(void)local_gvisor_signal_in(&g->r, g->rec->id, g->inner, SIGKILL,
					     LOCAL_GVISOR_LEADER | LOCAL_GVISOR_GROUP);
	/* runsc ends with the command; its pid file goes then */
	(void)gv_poll_end(g, 30000);
	(void)unlinkat(g->state, g->pidname, 0);
	_exit(0);
}

/* -t: a helper leads runsc's session, the pty's other side its controlling terminal; it waits
 * for runsc and exits as it did. The terminal's signals are runsc's to pass on (it handles
 * them whatever it inherits): the helper and runsc's waiter let them pass by */
static pid_t gv_spawn_tty(const struct gv *g, char *const *args, int replica, struct sbx_err *err)
{
	int ep[2];

	if (pipe2(ep, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	fflush(NULL);
	pid_t h = fork();
	if (h < 0) {
		close(ep[0]);
		close(ep[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (h == 0) {
		static const int ign[] = { SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU,
					   SIGHUP, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH };
		struct sbx_err e = { 0 };
		sigset_t none;
		close(ep[0]);
		for (size_t k = 0; k < ARRAY_SIZE(ign); k++)
			signal(ign[k], SIG_IGN);
		signal(SIGCHLD, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (setsid() < 0 || ioctl(replica, TIOCSCTTY, 0) < 0) {
			sbx_err_errno(&e, "cannot make the pty a terminal for runsc");
			sbx_err_send(ep[1], &e);
			_exit(125);
		}
		struct local_runsc r = g->r;
		r.fd[0] = r.fd[1] = r.fd[2] = replica;
		pid_t p = local_runsc_spawn(&r, args, &e);
		if (p < 0) {
			sbx_err_send(ep[1], &e);
			_exit(125);
		}
		sbx_err_send(ep[1], NULL);
		keep_only(NULL, 0);
		int st = local_runsc_wait(p);
		_exit(st < 0 ? 125 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	close(ep[1]);
	struct sbx_err got;
	ssize_t n = sbx_proc_read_report(ep[0], &got, sizeof(got));
	close(ep[0]);
	if (n == (ssize_t)sizeof(got) && got.kind == SBX_E_NONE)
		return h;
	(void)local_runsc_wait(h);
	if (n != (ssize_t)sizeof(got))
		return sbx_err_set(err, SBX_E_SYSTEM, "runsc exec's terminal helper failed");
	got.msg[sizeof(got.msg) - 1] = 0;
	*err = got;
	return -1;
}

/* --- why a command did not start ------------------------------------------------------------ */

enum {
	GV_RETRY_SH = 1
};

/* runsc's message for a command that never ran, said as a local exec says it; GV_RETRY_SH
 * with the file in *ret_file for one the kernel cannot run (ENOEXEC) */
static int gv_why(const char *msg, const char *argv0, const char *workdir, const char *label,
		  char **ret_file, struct sbx_err *err)
{
	/* "executing processes for container: executing command "ARGV" in sandbox: CAUSE", the
	 * command Go-quoted (a '"' in it escaped): CAUSE starts after it, its reason (an errno's
	 * text) after its last ": " */
	static const char head[] = "executing command \"", tail[] = "\" in sandbox: ";
	const char *q = strstr(msg, head);
	const char *cause = NULL;

	if (q) {
		for (q += strlen(head); *q && *q != '"' && *q != '\n';)
			q += (*q == '\\' && q[1]) ? 2 : 1;
		if (startswith(q, tail))
			cause = q + strlen(tail);
	}
	const char *from = cause ? cause : msg;
	_cleanup_free_ char *line = xstrndup(from, strcspn(from, "\n"));
	char *last = NULL;
	for (char *p = strstr(line, ": "); p; p = strstr(p + 1, ": "))
		last = p;
	_cleanup_free_ char *why = sbx_term_safe(last ? last + 2 : "");
	static const char load[] = "failed to load ";

	if (cause && startswith(line, "failed to find initial working directory "))
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot change to directory '%s' in sandbox '%s': %s", workdir,
				   label, why);
	if (cause &&
	    (startswith(line, "error finding executable ") ||
	     (startswith(line, load) && streq(why, "no such file or directory"))))
		return sbx_err_set(err, SBX_E_CMD_NOTFOUND,
				   "'%s': command not found in sandbox '%s'", argv0, label);
	if (cause && startswith(line, load)) {
		if (streq(why, "exec format error") && ret_file && last &&
		    last > line + strlen(load)) {
			*ret_file = xstrndup(line + strlen(load),
					     (size_t)(last - line) - strlen(load));
			return GV_RETRY_SH;
		}
		return sbx_err_set(err, SBX_E_CMD_NOEXEC,
				   "'%s': cannot execute in sandbox '%s': %s", argv0, label, why);
	}
	_cleanup_free_ char *safe = sbx_term_safe(line);
	return sbx_err_set(err, SBX_E_SYSTEM, "runsc exec failed in sandbox '%s': %s", label,
			   *safe ? safe : "no message");
}

/* --- the relay ----------------------------------------------------------------------------- */

static volatile sig_atomic_t gv_pending; /* bits (1 << sig): signals sbx was sent */
static volatile sig_atomic_t gv_winch;
static const int gv_fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void gv_on_signal(int sig)
{
	gv_pending |= 1 << sig;
}

static void gv_on_winch(int sig)
{
	(void)sig;
	gv_winch = 1;
}

/* the caller's terminal (-t -i), restored on the way out */
static struct termios gv_tio;
static bool gv_tio_saved;

static void gv_restore_tty(void)
{
	if (gv_tio_saved) {
		(void)tcsetattr(0, TCSAFLUSH, &gv_tio);
		gv_tio_saved = false;
	}
}

struct gv_io {
	int out, err; /* our ends of the command's stdout and stderr (-t: out is the pty) */
	int in;	      /* our end of its stdin (-t: the pty), -1: none */
	bool tty;
	struct sbx_exec_result *res; /* --json */
	char hold[HOLD_MAX + 1];     /* err (-t: out) until the command runs */
	size_t held;
	char in_buf[16384]; /* what was read from our stdin, not yet written */
	size_t in_off, in_len;
	bool in_eof;
};

static void gv_put(struct gv_io *io, int stream, const char *buf, size_t n)
{
	if (io->res && io->res->take)
		io->res->take(io->res, stream, buf, n);
	else
		(void)sbx_write_all(stream, buf, n);
}

/* the stream held back until the command runs */
static int gv_held_fd(const struct gv_io *io)
{
	return io->tty ? io->out : io->err;
}

/* one read of fd (stream 1 or 2); held back while hold; false at its end. drain: all it
 * holds now */
static bool gv_pump(struct gv_io *io, int fd, int stream, bool hold, bool drain)
{
	char buf[65536];

	for (int k = 0; k < (drain ? DRAIN_MAX : 1); k++) {
		bool keep = hold && fd == gv_held_fd(io);
		if (keep && io->held >= HOLD_MAX)
			return true;
		ssize_t n = keep ? read(fd, io->hold + io->held, HOLD_MAX - io->held)
				 : read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		if (keep)
			io->held += (size_t)n;
		else
			gv_put(io, stream, buf, (size_t)n);
	}
	return true;
}

/* stdin to the command: a read once what was read before is written; at our end of input its
 * pipe closes (-t: a ^D, as a terminal's end of input) */
static void gv_stdin(struct gv_io *io, bool readable, bool writable)
{
	if (readable && !io->in_len) {
		ssize_t n = read(0, io->in_buf, sizeof(io->in_buf));
		if (n > 0) {
			io->in_off = 0;
			io->in_len = (size_t)n;
		} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			io->in_eof = true;
			if (io->tty) {
				char eof = 4;
				(void)sbx_write_all(io->in, &eof, 1);
			} else {
				close(io->in);
				io->in = -1;
			}
		}
	}
	if (writable && io->in_len) {
		ssize_t n = write(io->in, io->in_buf + io->in_off, io->in_len);
		if (n > 0) {
			io->in_off += (size_t)n;
			io->in_len -= (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			io->in_eof = true; /* the command stopped reading */
			io->in_len = 0;
			if (!io->tty) {
				close(io->in);
				io->in = -1;
			}
		}
	}
}

struct gv_outcome {
	bool timed_out;
	int ending; /* an interrupt or termination signal came */
};

/* relays until runsc (g->pid) ended, signalling the command for a timeout and for the signals
 * sbx was sent; waitmask: the signal mask to wait with (ours blocks them) */
static void gv_relay(struct gv *g, struct gv_io *io, long long deadline, const sigset_t *waitmask,
		     struct gv_outcome *out)
{
	for (;;) {
		bool ran = gv_inner(g) > 0;
		if (ran && io->held) {
			gv_put(io, io->tty ? 1 : 2, io->hold, io->held);
			io->held = 0;
		}
		if (gv_pending) {
			int sigs = gv_pending;
			gv_pending = 0;
			if (gv_wait_inner(g) > 0 && !g->ended)
				for (size_t k = 0; k < ARRAY_SIZE(gv_fwd); k++) {
					int s = gv_fwd[k];
					if (!(sigs & (1 << s)))
						continue;
					bool group = s != SIGUSR1 && s != SIGUSR2;
					if (group)
						out->ending = s;
					(void)local_gvisor_signal_in(&g->r, g->rec->id, g->inner, s,
								     group ? LOCAL_GVISOR_GROUP
									   : LOCAL_GVISOR_LEADER);
				}
			continue;
		}
		if (deadline && out->timed_out && sbx_now_ms() >= deadline) {
			kill(g->pid, SIGKILL);
			deadline = 0;
		}
		if (deadline && !out->timed_out && sbx_now_ms() >= deadline) {
			unsigned both = LOCAL_GVISOR_LEADER | LOCAL_GVISOR_GROUP;
			out->timed_out = true;
			if (gv_wait_inner(g) > 0 && !g->ended)
				(void)local_gvisor_signal_in(&g->r, g->rec->id, g->inner, SIGKILL,
							     both);
			/* a client that does not end with its command (a sentry gone astray) is
			 * not waited for long */
			deadline = sbx_now_ms() + CLIENT_GRACE_MS;
			continue;
		}
		if (gv_winch) {
			struct winsize ws;
			gv_winch = 0;
			if (io->tty && ioctl(0, TIOCGWINSZ, &ws) == 0)
				(void)ioctl(io->out, TIOCSWINSZ, &ws);
		}
		if (g->ended)
			break;
		struct pollfd pf[5];
		int n = 0, ip = -1, ii = -1, io_ = -1, ie = -1;
		pf[n++] = (struct pollfd){ .fd = g->pidfd, .events = POLLIN };
		bool full = !ran && io->held >= HOLD_MAX;
		if (io->out >= 0 && !(full && io->tty)) {
			io_ = n;
			pf[n++] = (struct pollfd){ .fd = io->out, .events = POLLIN };
		}
		if (io->err >= 0 && !(full && !io->tty)) {
			ie = n;
			pf[n++] = (struct pollfd){ .fd = io->err, .events = POLLIN };
		}
		/* stdin flows once the command runs (a command that never ran took none of it) */
		bool want_in = io->in >= 0 && !io->in_eof;
		if (ran && want_in && !io->in_len) {
			ip = n;
			pf[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
		}
		if (ran && io->in >= 0 && io->in_len) {
			ii = n;
			pf[n++] = (struct pollfd){ .fd = io->in, .events = POLLOUT };
		}
		long long tmo = -1;
		if (deadline) {
			long long left = deadline - sbx_now_ms();
			tmo = left > 0 ? left : 0;
		}
		/* not known to run yet, with something waiting on it: look again soon */
		if (!ran && (io->held || want_in) && (tmo < 0 || tmo > 2))
			tmo = 2;
		struct timespec ts = { tmo / 1000, (tmo % 1000) * 1000000 };
		int r = ppoll(pf, (nfds_t)n, tmo < 0 ? NULL : &ts, waitmask);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (io_ >= 0 && pf[io_].revents && !gv_pump(io, io->out, 1, !ran, false)) {
			if (io->in == io->out) /* -t -i: the pty is both */
				io->in = -1;
			close(io->out);
			io->out = -1;
		}
		if (ie >= 0 && pf[ie].revents && !gv_pump(io, io->err, 2, !ran, false)) {
			close(io->err);
			io->err = -1;
		}
		if (ip >= 0 || ii >= 0)
			gv_stdin(io, ip >= 0 && pf[ip].revents, ii >= 0 && pf[ii].revents);
		if (pf[0].revents)
			g->ended = true;
	}
	/* what the command's pipes hold now is its output; a process it left behind holding them
	 * is not waited for */
	bool ran = gv_inner(g) > 0;
	if (io->out >= 0) {
		local_set_nonblock(io->out);
		(void)gv_pump(io, io->out, 1, !ran, true);
	}
	if (io->err >= 0) {
		local_set_nonblock(io->err);
		(void)gv_pump(io, io->err, 2, !ran, true);
	}
	if (ran && io->held) {
		gv_put(io, io->tty ? 1 : 2, io->hold, io->held);
		io->held = 0;
	}
}

/* --- the exec ------------------------------------------------------------------------------ */

/* runsc exec's arguments: its flags, the sandbox, argv */
static char **gv_args(const struct gv *g, const char *workdir, const char *user, bool tty,
		      char *const *env, char *const *argv)
{
	size_t ne = 0, na = 0;
	while (env[ne])
		ne++;
	while (argv[na])
		na++;
	char **a = xcalloc(ne + na + 8, sizeof(char *));
	size_t k = 0;
	a[k++] = xstrdup("exec");
	a[k++] = xasprintf("--cwd=%s", workdir);
	a[k++] = xasprintf("--internal-pid-file=" LOCAL_RUNSC_CLIENT_ROOT "/%s", g->pidname);
	if (user)
		a[k++] = xstrdup(user);
	/* runsc takes a console socket's path only to know the command's stdio is a terminal
	 * (without --detach it opens none) */
	if (tty)
		a[k++] = xstrdup("--console-socket=stdio");
	for (size_t i = 0; i < ne; i++)
		a[k++] = xasprintf("--env=%s", env[i]);
	a[k++] = xstrdup(g->rec->id);
	for (size_t i = 0; i < na; i++)
		a[k++] = xstrdup(argv[i]);
	a[k] = NULL;
	return a;
}

/* the command's environment, as a local exec's (home: -u's) */
static int gv_env_of(const struct sbx_record *rec, const struct sbx_exec_opts *o, const char *home,
		     struct gv_env *env, struct sbx_err *err)
{
	_cleanup_free_ char *homekv = xasprintf("HOME=%s", home ? home : "/root");
	_cleanup_free_ char *hn = xasprintf("HOSTNAME=%s", local_hostname(rec));
	const char *term = getenv("TERM");
	_cleanup_free_ char *termkv = xasprintf("TERM=%s", term && *term ? term : "xterm");

	gv_env_set(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	gv_env_set(env, homekv);
	gv_env_set(env, hn);
	if (o->tty)
		gv_env_set(env, termkv);
	if (local_net_exec_env(rec, o->argv, gv_env_set, env, err) < 0)
		return -1;
	for (char **e = rec->config.env; e && *e; e++)
		gv_env_set(env, *e);
	for (char **e = o->env; e && *e; e++)
		gv_env_set(env, *e);
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* one start of the command (runsc exec with args): spawned, then relayed to its end (with -d,
 * handed to the job once it runs). 1 when it ran (*ret_st: runsc's wait status), 0 when it
 * never did (io->hold: runsc's message), -1 with err. *lk, the sandbox's lock, is let go once
 * runsc runs */
static int gv_once(struct gv *g, const struct sbx_exec_opts *o, struct local_job *job,
		   char *const *args, int *lk, const sigset_t *waitmask, struct gv_io *io,
		   struct gv_outcome *out, int *ret_st, struct sbx_err *err)
{
	int in_p[2] = { -1, -1 }, out_p[2] = { -1, -1 }, err_p[2] = { -1, -1 };
	int master = -1, replica = -1, life[2] = { -1, -1 }, rc = 0;
	pid_t watcher = -1;

	*io = (struct gv_io){ .out = -1, .err = -1, .in = -1, .tty = o->tty, .res = o->result };
	g->inner = 0;
	g->ended = false;
	if (o->tty) {
		struct winsize ws;
		master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master >= 0 && unlockpt(master) == 0)
			replica = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (replica < 0)
			rc = sbx_err_errno(err, "cannot open a pty for sandbox '%s'", g->label);
		else if (ioctl(0, TIOCGWINSZ, &ws) == 0 || ioctl(1, TIOCGWINSZ, &ws) == 0)
			(void)ioctl(master, TIOCSWINSZ, &ws);
	} else if (job) {
		g->r.fd[1] = g->r.fd[2] = local_job_out_fd(job);
	} else if ((o->interactive && pipe2(in_p, O_CLOEXEC) < 0) || pipe2(out_p, O_CLOEXEC) < 0 ||
		   pipe2(err_p, O_CLOEXEC) < 0) {
		rc = sbx_err_errno(err, "cannot create pipes");
	}
	if (rc == 0 && !job && pipe2(life, O_CLOEXEC) < 0)
		rc = sbx_err_errno(err, "cannot create a pipe");
	if (rc == 0 && o->tty) {
		g->pid = gv_spawn_tty(g, args, replica, err);
	} else if (rc == 0) {
		if (!job) {
			g->r.fd[0] = in_p[0];
			g->r.fd[1] = out_p[1];
			g->r.fd[2] = err_p[1];
		}
		g->pid = local_runsc_spawn(&g->r, args, err);
	}
	close_fd(&in_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	close_fd(&replica);
	if (rc == 0 && g->pid > 0 && (g->pidfd = sbx_pidfd_open(g->pid)) < 0)
		rc = sbx_err_errno(err, "cannot watch runsc exec");
	if (rc < 0 || g->pid < 0) {
		if (g->pid > 0)
			(void)local_runsc_wait(g->pid);
		close_fd(&in_p[1]);
		close_fd(&out_p[0]);
		close_fd(&err_p[0]);
		close_fd(&master);
		close_fd(&life[0]);
		close_fd(&life[1]);
		return -1;
	}
	close_fd(lk); /* runsc runs: a pause may come (and freezes the command with the rest) */

	if (job) {
		/* -d: the command runs (its pid in gVisor known), or never will */
		if (gv_wait_inner(g) > 0) {
			local_job_started(job, g->pid, g->inner);
			local_job_relay(job, g->pid, ret_st);
			(void)unlinkat(g->state, g->pidname, 0);
			return 1;
		}
		io->held = local_job_pending(job, io->hold, HOLD_MAX);
		*ret_st = local_runsc_wait(g->pid);
		return 0;
	}
	/* the watcher: from now on, sbx's end ends the command */
	fflush(NULL);
	watcher = fork();
	if (watcher == 0) {
		/* the watcher is its child, not ours: nothing of it is ours to wait for at the end
		 * (this one is long gone by then) */
		close(life[1]);
		if (fork() == 0)
			gv_watch(g, life[0]);
		_exit(0);
	}
	close_fd(&life[0]);
	io->out = o->tty ? master : out_p[0];
	io->err = err_p[0];
	io->in = o->tty ? (o->interactive ? master : -1) : in_p[1];
	master = -1; /* io's now */
	if (io->in >= 0)
		local_set_nonblock(io->in);
	if (o->tty && o->interactive && tcgetattr(0, &gv_tio) == 0) {
		struct termios raw = gv_tio;
		cfmakeraw(&raw);
		if (tcsetattr(0, TCSANOW, &raw) == 0)
			gv_tio_saved = true;
	}
	gv_relay(g, io, o->timeout_ms > 0 ? sbx_now_ms() + o->timeout_ms : 0, waitmask, out);
	gv_restore_tty();
	if (io->in >= 0 && io->in != io->out)
		close(io->in);
	if (io->err >= 0)
		close(io->err);
	if (io->out >= 0)
		close(io->out);
	*ret_st = local_runsc_wait(g->pid);
	bool ran = gv_inner(g) > 0;
	/* interrupted or terminated: what is left of its group ends with it */
	if (ran && out->ending)
		(void)local_gvisor_signal_in(&g->r, g->rec->id, g->inner, SIGKILL,
					     LOCAL_GVISOR_GROUP);
	(void)unlinkat(g->state, g->pidname, 0);
	/* the command ended: the watcher goes */
	char done = 1;
	(void)!write(life[1], &done, 1);
	close(life[1]);
	if (watcher > 0)
		while (waitpid(watcher, NULL, 0) < 0 && errno == EINTR)
			;
	return ran;
}

static int gv_run(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		  struct local_job *job, int *ret_status, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;

	if (o->tty && !isatty(0))
		return sbx_err_set(
			err, SBX_E_USAGE,
			"the input device is not a TTY: drop -t, or run sbx from a terminal");
	/* held until runsc runs: a pause waits for it */
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, rec->id, false, err);
	if (lk < 0)
		return -1;
	if (local_read_pids(rec->dir, &pids) < 0 ||
	    !sbx_proc_alive(pids.init_pid, pids.init_start) ||
	    !sbx_proc_alive(pids.sup_pid, pids.sup_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; run 'sbx resume %s'",
				   label, rec->state == SBX_STATE_RELEASED ? "released" : "stopped",
				   label);
	if (local_is_frozen(rec->dir, &pids) == 1)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is paused; run 'sbx resume %s'",
				   label, label);
	enum sbx_state cut;
	if (local_checkpoint_look(rec, &pids, &cut))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is stopped (its checkpoint was cut short); run "
				   "'sbx resume %s'",
				   label, label);
	local_touch_activity(rec->dir);

	struct gv g = { .rec = rec, .label = label, .state = -1, .pidfd = -1, .pid = -1 };
	if (local_gvisor_client(rec, &g.r, err) < 0)
		return -1;
	/* -u, or the image's User (run by an ordinary user only uid 0 exists inside) */
	const char *uspec = o->user ? o->user : g.r.map_range ? rec->config.user : NULL;
	struct local_user u = { 0, 0, NULL };
	_cleanup_free_ char *userarg = NULL;
	if (uspec) {
		struct local_idmap idmap;
		local_idmap_of(rec, &idmap);
		_cleanup_free_ char *advice = !g.r.map_range ? local_subid_advice() : NULL;
		if (local_user_resolve_in(ctx, rec, uspec, &u, err) < 0)
			return -1;
		if (local_user_check_mapped(&idmap, &u, advice, label, err) < 0) {
			free(u.home);
			return -1;
		}
		userarg = xasprintf("--user=%u:%u", (unsigned)u.uid, (unsigned)u.gid);
	}
	_cleanup_free_ char *home = u.home;
	_cleanup_free_ char *stp = xasprintf("%s/gvisor/state", rec->dir);
	unsigned char rnd[8];
	g.state = open(stp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g.state < 0 || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		close_fd(&g.state);
		return sbx_err_errno(err, "cannot open '%s'", stp);
	}
	snprintf(g.pidname, sizeof(g.pidname), ".sbx-exec-%02x%02x%02x%02x%02x%02x%02x%02x.pid",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	struct gv_env env = { NULL, 0 };
	if (gv_env_of(rec, o, home, &env, err) < 0) {
		sbx_strv_free(env.v);
		close(g.state);
		return -1;
	}
	struct local_exec_watch watch;
	local_net_exec_watch(rec, &watch);
	const char *workdir = o->workdir ? o->workdir : rec->config.workdir;
	if (!workdir)
		workdir = "/workspace";

	/* the signals for the command wait until it runs, then go to it (-d's waiter ignores
	 * them) */
	sigset_t fwdset, oldset;
	sigemptyset(&fwdset);
	for (size_t k = 0; k < ARRAY_SIZE(gv_fwd); k++)
		sigaddset(&fwdset, gv_fwd[k]);
	sigaddset(&fwdset, SIGWINCH);
	sigprocmask(SIG_BLOCK, &fwdset, &oldset);
	struct sigaction saved[ARRAY_SIZE(gv_fwd) + 2];
	if (!job) {
		struct sigaction sa = { .sa_handler = gv_on_signal };
		struct sigaction wi = { .sa_handler = o->tty ? gv_on_winch : SIG_DFL };
		struct sigaction ign = { .sa_handler = SIG_IGN };
		sigemptyset(&sa.sa_mask);
		sigemptyset(&wi.sa_mask);
		sigemptyset(&ign.sa_mask);
		for (size_t k = 0; k < ARRAY_SIZE(gv_fwd); k++)
			sigaction(gv_fwd[k], &sa, &saved[k]);
		sigaction(SIGWINCH, &wi, &saved[ARRAY_SIZE(gv_fwd)]);
		sigaction(SIGPIPE, &ign, &saved[ARRAY_SIZE(gv_fwd) + 1]);
	}

	char *const *argv = o->argv;
	_cleanup_(strv_freep) char **sh_argv = NULL;
	struct gv_outcome out = { 0 };
	_cleanup_free_ struct gv_io *io = xcalloc(1, sizeof(*io));
	int st = 0, ran;
	for (int attempt = 0;; attempt++) {
		char **args = gv_args(&g, workdir, userarg, o->tty, env.v, argv);
		ran = gv_once(&g, o, job, args, &lk, &oldset, io, &out, &st, err);
		sbx_strv_free(args);
		close_fd(&g.pidfd);
		if (ran != 0)
			break;
		/* it never ran: runsc's message says why */
		_cleanup_free_ char *file = NULL;
		io->hold[io->held] = 0;
		if (gv_why(io->hold, argv[0], workdir, label, attempt ? NULL : &file, err) !=
		    GV_RETRY_SH) {
			ran = -1;
			break;
		}
		/* a file the kernel cannot run: the shell runs it, as execvp does */
		size_t n = 0;
		while (o->argv[n])
			n++;
		sh_argv = xcalloc(n + 2, sizeof(char *));
		sh_argv[0] = xstrdup("/bin/sh");
		sh_argv[1] = TAKE_PTR(file);
		for (size_t i = 1; i < n; i++)
			sh_argv[i + 1] = xstrdup(o->argv[i]);
		argv = sh_argv;
	}
	/* the caller's dispositions back (sbx run goes on), with what came meanwhile dropped */
	if (!job) {
		struct timespec zero = { 0, 0 };
		while (sigtimedwait(&fwdset, NULL, &zero) > 0)
			;
		for (size_t k = 0; k < ARRAY_SIZE(gv_fwd); k++)
			sigaction(gv_fwd[k], &saved[k], NULL);
		sigaction(SIGWINCH, &saved[ARRAY_SIZE(gv_fwd)], NULL);
		sigaction(SIGPIPE, &saved[ARRAY_SIZE(gv_fwd) + 1], NULL);
		gv_pending = 0;
	}
	sigprocmask(SIG_SETMASK, &oldset, NULL);
	close(g.state);
	if (ran < 0) {
		local_net_exec_unwatch(&watch);
		sbx_strv_free(env.v);
		return -1;
	}
	local_net_exec_refusals(rec, &watch, env.v);
	sbx_strv_free(env.v);
	local_touch_activity(rec->dir);
	*ret_status = 0;
	if (job)
		return 0;
	if (st < 0)
		return sbx_err_errno(err, "cannot wait for runsc exec");
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (o->result) {
		o->result->timed_out = out.timed_out;
		o->result->signal = out.timed_out  ? SIGKILL
			: code > 128 && code < 160 ? code - 128
						   : 0;
	}
	*ret_status = out.timed_out ? SBX_EXIT_TIMEOUT : code;
	return 0;
}

int local_gvisor_exec(struct sbx_ctx *ctx, const struct sbx_record *rec,
		      const struct sbx_exec_opts *o, int *ret_status, struct sbx_err *err)
{
	if (o->detach)
		return local_job_exec(ctx, rec, o, ret_status, err, gv_run);
	return gv_run(ctx, rec, o, NULL, ret_status, err);
}
