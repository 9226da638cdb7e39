/* The local provider's exec: join the sandbox by setns, then run the command — with a pty
 * (-t), as another user (-u), or detached with its output in the sandbox's log (-d). */
#define _GNU_SOURCE
#include "providers/local/local.h"
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>

#include "core/confine.h"
#include "core/json.h"
#include "core/proc.h"
#include "core/test-hook.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

static const char default_path[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t timed_out;
static volatile sig_atomic_t winch;
static volatile sig_atomic_t ending; /* an interrupt or termination signal came */

/* the command is the leader of a process group of its own (its session's): an interrupt or a
 * termination goes to the whole group, as a terminal's ^C would; other signals to it alone */
static void forward_signal(int sig)
{
	int e = errno;
	bool group = sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;

	if (group)
		ending = sig;
	if (child_pid > 0 && (!group || kill(-child_pid, sig) < 0))
		kill(child_pid, sig);
	errno = e;
}

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
	if (child_pid > 0) {
		kill(-child_pid, SIGKILL);
		kill(child_pid, SIGKILL);
	}
}

static void on_winch(int sig)
{
	(void)sig;
	winch = 1;
}

/* the caller's terminal, restored on every way out */
static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
	if (tio_saved) {
		(void)tcsetattr(0, TCSAFLUSH, &saved_tio);
		tio_saved = false;
	}
}

static void restore_and_forward(int sig)
{
	restore_tty();
	forward_signal(sig);
}

/* "K=V" list with later keys replacing earlier ones */
static void env_set(char ***env, size_t *n, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

	for (size_t i = 0; i < *n; i++) {
		if (strncmp((*env)[i], kv, klen) == 0 && (*env)[i][klen] == '=') {
			free((*env)[i]);
			(*env)[i] = xstrdup(kv);
			return;
		}
	}
	*env = xrealloc(*env, (*n + 2) * sizeof(char *));
	(*env)[(*n)++] = xstrdup(kv);
	(*env)[*n] = NULL;
}

struct env_list {
	char **v;
	size_t n;
};

static void env_list_set(void *l, const char *kv)
{
	struct env_list *e = l;

	env_set(&e->v, &e->n, kv);
}

static void env_list_free(struct env_list *l)
{
	sbx_strv_free(l->v);
	l->v = NULL;
}

static bool env_has(char **env, const char *key)
{
	size_t k = strlen(key);
	for (; env && *env; env++)
		if (strncmp(*env, key, k) == 0 && (*env)[k] == '=')
			return true;
	return false;
}

enum {
	STAGE_CHDIR = 1,
	STAGE_SETUP,
	STAGE_EXEC,
	STAGE_USER,
};

struct exec_msg {
	int stage;
	int errnum;
	long pid;
};

static _noreturn_ void child_fail(int fd, int stage)
{
	struct exec_msg f = { stage, errno, 0 };
	(void)sbx_proc_report(fd, &f, sizeof(f));
	_exit(SBX_EXIT_FAILURE);
}

/* --- the exec trampoline ------------------------------------------------------------------ */

/* providers/local/trampoline/exec.c, built by the Makefile and embedded here: the command is
 * started by that small program, run from a sealed memfd, so the process that executes the sandbox's
 * file is never the sbx binary (a sandbox making something resolve to /proc/self/exe reaches
 * only the sealed copy: CVE-2019-5736) */
#ifdef SBX_TRAMPOLINE
__asm__(".section .rodata\n.balign 16\nsbx_tramp_start:\n.incbin \"" SBX_TRAMPOLINE "\"\n"
	"sbx_tramp_end:\n.previous\n");
#else
__asm__(".section .rodata\nsbx_tramp_start:\nsbx_tramp_end:\n.previous\n");
#endif
extern const unsigned char sbx_tramp_start[] __attribute__((visibility("hidden")));
extern const unsigned char sbx_tramp_end[] __attribute__((visibility("hidden")));

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

/* the trampoline in a sealed memfd; -1 when none can be had (Landlock stands in then) */
static int trampoline_fd(void)
{
	size_t n = (size_t)(sbx_tramp_end - sbx_tramp_start);
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

	if (!n)
		return -1;
	int fd = memfd_create("sbx-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* kernels before 6.3 know no MFD_EXEC */
		fd = memfd_create("sbx-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (sbx_write_all(fd, sbx_tramp_start, n) < 0 ||
	    (fcntl(fd, F_ADD_SEALS, seals | F_SEAL_EXEC | F_SEAL_SEAL) < 0 &&
	     fcntl(fd, F_ADD_SEALS, seals | F_SEAL_SEAL) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

_Static_assert(sizeof(struct exec_msg) == 16, "the trampoline writes the same message");

/* everything the child needs between fork and exec */
struct child_setup {
	const struct sbx_exec_opts *o;
	char **env;
	const char *workdir;
	const struct local_user *u;
	bool map_range;
	const void *bpf;
	size_t bpf_len;
	int fd[3];	   /* what becomes 0, 1 and 2 (-1: the caller's own, not a terminal) */
	int tty_fd;	   /* -t: the pty's other side, for all three */
	int report;	   /* the exec_msg pipe */
	int report_other;  /* its read end, the parent's */
	int tramp_fd;	   /* the sealed trampoline (-1: none) */
	char **tramp_argv; /* sbx-exec REPORT FILE ARGV... (made before the fork) */
};

/* in the child: everything between fork and exec */
static _noreturn_ void run_child(const struct child_setup *c)
{
	static const int dfl[] = { SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,	SIGUSR1,
				   SIGUSR2, SIGALRM, SIGPIPE, SIGWINCH, SIGCHLD };
	const struct sbx_exec_opts *o = c->o;
	int report = c->report;

	for (size_t k = 0; k < ARRAY_SIZE(dfl); k++)
		signal(dfl[k], SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	if (c->tty_fd >= 0) {
		if (ioctl(c->tty_fd, TIOCSCTTY, 0) < 0)
			child_fail(report, STAGE_SETUP);
		if (dup2(c->tty_fd, 0) < 0 || dup2(c->tty_fd, 1) < 0 || dup2(c->tty_fd, 2) < 0)
			child_fail(report, STAGE_SETUP);
	} else {
		for (int k = 0; k < 3; k++)
			if (c->fd[k] >= 0 && dup2(c->fd[k], k) < 0)
				child_fail(report, STAGE_SETUP);
	}
	/* the caller's other descriptors stay outside */
	syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */);
	if (chdir(c->workdir) < 0)
		child_fail(report, STAGE_CHDIR);
	if (sbx_caps_drop() < 0)
		child_fail(report, STAGE_SETUP);
	/* raw system calls: the child may share the parent's memory (see start_child) */
	if (c->u->uid != 0 || c->u->gid != 0) {
		gid_t g = c->u->gid;
		if (c->map_range && syscall(SYS_setgroups, 1, &g) < 0)
			child_fail(report, STAGE_USER);
		if (syscall(SYS_setresgid, g, g, g) < 0 ||
		    syscall(SYS_setresuid, c->u->uid, c->u->uid, c->u->uid) < 0)
			child_fail(report, STAGE_USER);
	}
	if (sbx_seccomp_install(c->bpf, c->bpf_len) < 0)
		child_fail(report, STAGE_SETUP);
	if (c->tramp_fd >= 0) {
		/* the report pipe stays open into the trampoline, which closes it on success */
		if (fcntl(report, F_SETFD, 0) == 0)
			syscall(SYS_execveat, c->tramp_fd, "", c->tramp_argv, c->env,
				AT_EMPTY_PATH);
		(void)fcntl(report, F_SETFD, FD_CLOEXEC);
		child_fail(report, STAGE_SETUP);
	}
	/* no memfd that may be executed: Landlock lets nothing outside the sandbox's tree be
	 * executed, /proc/self/exe included */
	if (sbx_landlock_exec_root() != 0)
		child_fail(report, STAGE_SETUP);
	execvpe(o->argv[0], o->argv, c->env);
	child_fail(report, STAGE_EXEC);
}

static int child_main(void *arg)
{
	const struct child_setup *c = arg;

	close(c->report_other);
	run_child(c);
}

/* the command's process: it shares our memory until its exec (CLONE_VM | CLONE_VFORK, as
 * posix_spawn does), so starting it costs no copy of our page tables; it writes nothing of
 * ours (no allocation, raw system calls for credentials) and we wait until it has exec'd */
#if defined(__SANITIZE_ADDRESS__)
#define SBX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SBX_ASAN 1
#endif
#endif

static pid_t start_child(const struct child_setup *c)
{
#ifdef SBX_ASAN
	/* AddressSanitizer cannot follow a child on a stack of its own (it warns on every
	 * noreturn call there): the sanitizer build forks */
	pid_t p = fork();
	if (p == 0)
		child_main((void *)c);
	return p;
#endif
	const size_t size = 128 * 1024;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

	if (stack == MAP_FAILED)
		return -1;
	pid_t pid = clone(child_main, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)c);
	int e = errno;
	munmap(stack, size);
	errno = e;
	return pid;
}

/* one read from a readable descriptor (a pipe, the pty), or with drain everything it holds
 * now, to fd; false once it is closed or fd fails */
bool local_exec_pump(int from, int to, bool drain)
{
	char buf[16384];

	if (drain)
		local_set_nonblock(from);
	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		if (sbx_write_all(to, buf, (size_t)n) < 0)
			return false;
		if (!drain)
			return true;
	}
}

/* relays the caller's terminal and the pty until the command closes it, or, once an interrupt
 * or termination signal came, until the command (pidfd) ended */
static void relay(int master, bool input, int pidfd)
{
	char buf[16384];
	bool in_open = input, gone = false;

	for (;;) {
		if (ending && gone) {
			(void)local_exec_pump(master, 1, true);
			return;
		}
		struct pollfd p[3] = { { .fd = master, .events = POLLIN },
				       { .fd = gone ? -1 : pidfd, .events = POLLIN },
				       { .fd = 0, .events = POLLIN } };
		if (winch) {
			struct winsize ws;
			winch = 0;
			if (ioctl(0, TIOCGWINSZ, &ws) == 0)
				(void)ioctl(master, TIOCSWINSZ, &ws);
		}
		int r = poll(p, in_open ? 3 : 2, -1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[1].revents) {
			gone = true;
			continue;
		}
		/* its end is EIO: every holder of the pty's other side is gone */
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    !local_exec_pump(master, 1, false))
			return;
		if (in_open && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(0, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				char eof = 4; /* ^D: the command sees end of input */
				(void)sbx_write_all(master, &eof, 1);
				continue;
			}
			if (sbx_write_all(master, buf, (size_t)n) < 0)
				return;
		}
	}
}

static int exec_run(struct sbx_ctx *ctx, const struct sbx_record *rec,
		    const struct sbx_exec_opts *o, struct local_job *job, int *ret_status,
		    struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;

	if (o->tty && !isatty(0))
		return sbx_err_set(
			err, SBX_E_USAGE,
			"the input device is not a TTY: drop -t, or run sbx from a terminal");
	/* held until the command is forked: a pause waits for it, and then freezes the command
	 * with the rest (the descriptor closes in the child at execve) */
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, rec->id, false, err);
	if (lk < 0)
		return -1;
	_cleanup_close_ int pidfd = -1;
	errno = 0;
	if (local_read_pids(rec->dir, &pids) == 0)
		pidfd = sbx_pidfd_open(pids.init_pid);
	if (pidfd < 0 || !sbx_proc_alive(pids.init_pid, pids.init_start) ||
	    !sbx_proc_alive(pids.sup_pid, pids.sup_start)) {
		/* out of descriptors, sbx cannot tell: it never calls a running sandbox stopped */
		if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
			return sbx_err_errno(err, "cannot look at sandbox '%s'", label);
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; run 'sbx resume %s'",
				   label, rec->state == SBX_STATE_RELEASED ? "released" : "stopped",
				   label);
	}
	if (local_is_frozen(rec->dir, &pids) == 1)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is paused; run 'sbx resume %s'",
				   label, label);
	local_touch_activity(rec->dir);
	/* for the end of the command, which is traffic too: by then we are inside the sandbox */
	_cleanup_free_ char *actpath = xasprintf("%s/activity", rec->dir);
	_cleanup_close_ int actfd = open(actpath, O_WRONLY | O_CLOEXEC);

	/* everything read from the host must be read before joining the sandbox */
	size_t bpf_len = 0;
	_cleanup_free_ void *bpf = NULL;
	if (local_seccomp_of(rec, label, &bpf, &bpf_len, err) < 0)
		return -1;
	_cleanup_close_ int nullfd = -1;
	if (!o->interactive && !o->tty) {
		nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (nullfd < 0)
			return sbx_err_errno(err, "cannot open /dev/null");
	}
	/* -d: the waiter's pipe, which it relays into the logs */
	int logfd = job ? local_job_out_fd(job) : -1;
	if (o->tty && !o->interactive)
		(void)0; /* output only: the terminal stays cooked, so ^C still signals */
	if (o->tty && o->interactive) {
		if (tcgetattr(0, &saved_tio) < 0)
			return sbx_err_errno(err, "cannot read the terminal's settings");
	}
	const char *term = getenv("TERM");
	_cleanup_free_ char *termkv = xasprintf("TERM=%s", term && *term ? term : "xterm");

	/* this exec's id and proxy credential, registered on the host side */
	_cleanup_(env_list_free) struct env_list netenv = { NULL, 0 };
	if (local_net_exec_env(rec, o->argv, env_list_set, &netenv, err) < 0)
		return -1;
	_cleanup_(local_net_exec_unwatch) struct local_exec_watch watch;
	local_net_exec_watch(rec, &watch);

	/* the supervisor's control socket, reached before joining (it is a host path): the
	 * command is registered there once started, so that it ends if sbx exec is killed */
	_cleanup_close_ int ctl = o->detach ? -1 : local_exec_ctl_open(rec);

	/* a parent-death signal (sbx run's exec) is lost on joining, a change of credentials */
	int pdeath = 0;
	pid_t ppid = getppid();
	(void)prctl(PR_GET_PDEATHSIG, &pdeath);

	struct local_idmap idmap;
	local_idmap_of(rec, &idmap);
	bool map_range = idmap.kind != LOCAL_MAP_SELF;
	/* read on the host: the sandbox's passwd is no place to look for our name */
	_cleanup_free_ char *advice = !map_range && o->user ? local_subid_advice() : NULL;
	/* the OOM counters, read from the host: before joining */
	struct local_oom_watch oom;
	local_cgroup_oom_watch(rec->dir, rec->config.memory, &oom);
	/* the command's cgroups are the sandbox's: its limits, its freezer */
	if (local_cgroup_enter(rec->dir, getpid()) < 0)
		return sbx_err_errno(err, "cannot join the cgroup of sandbox '%s'", label);
	if (local_join(rec, pids.init_pid, pidfd, err) < 0)
		return -1;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if ((map_range && setgroups(0, NULL) < 0) || setresgid(0, 0, 0) < 0 ||
	    setresuid(0, 0, 0) < 0)
		return sbx_err_errno(err, "cannot become root in sandbox '%s'", label);
	if (pdeath > 0 && (prctl(PR_SET_PDEATHSIG, pdeath) < 0 || getppid() != ppid))
		raise(pdeath);
	sbx_test_hook("exec-joined");

	/* inside now: users, the environment, the pty */
	struct local_user u = { 0, 0, NULL };
	/* -u, or the image's User; run by an ordinary user only uid 0 exists inside, so an
	 * image's User is not applied then */
	const char *user = o->user;
	if (!user && map_range)
		user = rec->config.user;
	if (user &&
	    (local_user_resolve(user, label, &u, err) < 0 ||
	     local_user_check_mapped(&idmap, &u, advice, label, err) < 0)) {
		free(u.home);
		return -1;
	}
	_cleanup_free_ char *home = u.home;
	char **env = NULL;
	size_t n_env = 0;
	_cleanup_free_ char *pathkv = xasprintf("PATH=%s", default_path);
	_cleanup_free_ char *hostkv = xasprintf("HOSTNAME=%s", local_hostname(rec));
	_cleanup_free_ char *homekv = xasprintf("HOME=%s", home ? home : "/root");
	env_set(&env, &n_env, pathkv);
	env_set(&env, &n_env, homekv);
	env_set(&env, &n_env, hostkv);
	if (o->tty)
		env_set(&env, &n_env, termkv);
	for (size_t k = 0; k < netenv.n; k++)
		env_set(&env, &n_env, netenv.v[k]);
	for (char **e = rec->config.env; e && *e; e++)
		env_set(&env, &n_env, *e);
	for (char **e = o->env; e && *e; e++)
		env_set(&env, &n_env, *e);
	(void)env_has;
	const char *workdir = o->workdir ? o->workdir : rec->config.workdir;
	if (!workdir)
		workdir = "/workspace";

	_cleanup_close_ int master = -1, slave = -1;
	if (o->tty) {
		master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (master < 0 || unlockpt(master) < 0) {
			sbx_strv_free(env);
			return sbx_err_errno(err, "cannot open a pty in sandbox '%s'", label);
		}
		slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (slave < 0) {
			sbx_strv_free(env);
			return sbx_err_errno(err, "cannot open a pty in sandbox '%s'", label);
		}
		struct winsize ws;
		if (ioctl(0, TIOCGWINSZ, &ws) == 0 || ioctl(1, TIOCGWINSZ, &ws) == 0)
			(void)ioctl(master, TIOCSWINSZ, &ws);
	}

	/* the command's standard descriptors: the caller's, but never a terminal without -t */
	struct local_plain_relay pr;
	int child_end[3] = { -1, -1, -1 };
	struct child_setup cs = { .o = o,
				  .workdir = workdir,
				  .u = &u,
				  .map_range = map_range,
				  .bpf = bpf,
				  .bpf_len = bpf_len,
				  .fd = { nullfd, o->result ? o->result->out_fd : logfd,
					  o->result ? o->result->err_fd : logfd },
				  .tty_fd = slave };
	if (local_plain_relay_open(o, &pr, cs.fd, child_end, err) < 0) {
		sbx_strv_free(env);
		return -1;
	}
	cs.tramp_fd = trampoline_fd();
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		sbx_strv_free(env);
		return sbx_err_errno(err, "cannot create a pipe");
	}
	cs.env = env;
	cs.report = ep[1];
	static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
	struct sigaction sa = { .sa_handler = o->tty ? restore_and_forward : forward_signal };
	sigemptyset(&sa.sa_mask);
	if (!o->detach)
		for (size_t k = 0; k < ARRAY_SIZE(fwd); k++)
			sigaction(fwd[k], &sa, NULL);
	struct sigaction al = { .sa_handler = on_alarm };
	sigemptyset(&al.sa_mask);
	sigaction(SIGALRM, &al, NULL);
	if (o->tty) {
		struct sigaction wi = { .sa_handler = on_winch };
		sigemptyset(&wi.sa_mask);
		sigaction(SIGWINCH, &wi, NULL);
	}

	/* the trampoline's arguments: sbx-exec REPORT FILE ARGV... */
	char num[16];
	size_t argc = 0;
	while (o->argv[argc])
		argc++;
	_cleanup_free_ char **tv = xcalloc(argc + 4, sizeof(char *));
	snprintf(num, sizeof(num), "%d", ep[1]);
	tv[0] = (char *)"sbx-exec";
	tv[1] = num;
	tv[2] = o->argv[0];
	memcpy(tv + 3, o->argv, argc * sizeof(char *));
	cs.tramp_argv = tv;
	cs.report_other = ep[0];

	/* a signal that comes before the command's pid is known waits for it (blocked until
	 * child_pid is set: the child clears its mask) */
	sigset_t fwdset, oldset;
	sigemptyset(&fwdset);
	for (size_t k = 0; k < ARRAY_SIZE(fwd); k++)
		sigaddset(&fwdset, fwd[k]);
	sigaddset(&fwdset, SIGALRM);
	sigprocmask(SIG_BLOCK, &fwdset, &oldset);
	pid_t pid = start_child(&cs);
	if (pid > 0)
		child_pid = pid;
	if (pid != 0)
		sigprocmask(SIG_SETMASK, &oldset, NULL);
	if (pid < 0) {
		close(ep[0]);
		close(ep[1]);
		sbx_strv_free(env);
		return sbx_err_errno(err, "cannot start the command");
	}
	if (pid == 0) { /* the sanitizer build's fork */
		close(ep[0]);
		run_child(&cs);
	}
	child_pid = pid;
	local_cgroup_oom_pid(&oom, pid);
	close(ep[1]);
	close(TAKE_FD(lk));
	if (cs.tramp_fd >= 0)
		close(cs.tramp_fd);
	for (int k = 0; k < 3; k++)
		if (child_end[k] >= 0)
			close(child_end[k]);
	if (slave >= 0) {
		close(slave);
		slave = -1;
	}
	sbx_strv_free(env);
	if (o->timeout_ms > 0 && !o->detach) {
		struct itimerval it = { 0 };
		it.it_value.tv_sec = o->timeout_ms / 1000;
		it.it_value.tv_usec = (o->timeout_ms % 1000) * 1000;
		setitimer(ITIMER_REAL, &it, NULL);
	}

	_cleanup_close_ int cpfd = o->detach ? -1 : sbx_pidfd_open(pid);

	struct exec_msg f = { 0 };
	ssize_t n = sbx_proc_read_report(ep[0], &f, sizeof(f));
	close(ep[0]);
	bool failed = n == (ssize_t)sizeof(f);
	/* registered once the command runs (its report pipe closed on exec): only then does it
	 * lead a session and group of its own, which the supervisor checks, by its pid, as our
	 * unreaped child, when its loop reads the request; no answer is waited for (a killed
	 * exec is as unwatched before the request is read as it was before the answer came) */
	if (ctl >= 0) {
		if (!failed)
			local_exec_register(ctl, pid);
		close(TAKE_FD(ctl));
	}
	int st;
	pid_t w = pid;
	if (job && !failed) {
		/* -d: the CLI returns now; we relay the output and record the end */
		local_job_started(job, pid, 0);
		local_job_relay(job, pid, &st);
		return 0;
	}

	if (o->tty && !failed) {
		if (o->interactive) {
			struct termios raw = saved_tio;
			cfmakeraw(&raw);
			if (tcsetattr(0, TCSANOW, &raw) == 0)
				tio_saved = true;
		}
		relay(master, o->interactive, cpfd);
		restore_tty();
	}
	if (local_plain_relay_active(&pr)) {
		if (!failed)
			local_plain_relay_run(&pr, pid);
		local_plain_relay_close(&pr);
	}

	/* interrupted or terminated: what is left of the command's group ends with it (its
	 * leader, unreaped until then, keeps the group's id from being reused) */
	siginfo_t si;
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	if (ending && !o->detach)
		kill(-pid, SIGKILL);
	struct rusage ru;
	do
		w = wait4(pid, &st, 0, &ru);
	while (w < 0 && errno == EINTR);
	child_pid = 0;
	/* inside the sandbox's user namespace, a time may not be set on the host's file by name or
	 * by futimens; a truncation through the descriptor opened before sets its mtime */
	if (actfd >= 0)
		(void)!ftruncate(actfd, 0);
	if (w < 0)
		return sbx_err_errno(err, "cannot wait for the command");

	if (failed) {
		errno = f.errnum;
		switch (f.stage) {
		case STAGE_CHDIR:
			return sbx_err_errno(err, "cannot change to directory '%s' in sandbox '%s'",
					     workdir, label);
		case STAGE_USER:
			if (!map_range && (u.uid != 0 || u.gid != 0))
				return sbx_err_set(
					err, SBX_E_STATE,
					"cannot run as user '%s' in sandbox '%s': run by an "
					"ordinary user, sbx maps only uid 0 into a sandbox",
					user, label);
			return sbx_err_errno(err, "cannot run as user '%s' in sandbox '%s'", user,
					     label);
		case STAGE_EXEC:
			if (f.errnum == ENOENT)
				return sbx_err_set(err, SBX_E_CMD_NOTFOUND,
						   "'%s': command not found in sandbox '%s'",
						   o->argv[0], label);
			sbx_err_errno(err, "'%s': cannot execute in sandbox '%s'", o->argv[0],
				      label);
			err->kind = SBX_E_CMD_NOEXEC;
			return -1;
		default:
			return sbx_err_errno(err, "cannot set up the command in sandbox '%s'",
					     label);
		}
	}
	local_net_exec_refusals(rec, &watch, netenv.v);
	if (o->result)
		local_exec_result(o->result, &ru, st, timed_out);
	if (timed_out) {
		*ret_status = SBX_EXIT_TIMEOUT;
		return 0;
	}
	if (local_cgroup_oom_say(&oom, label, o->argv[0], st) && o->result)
		o->result->oom_killed = true;
	if (WIFEXITED(st))
		*ret_status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		*ret_status = 128 + WTERMSIG(st);
	else
		*ret_status = SBX_EXIT_FAILURE;
	(void)ctx;
	return 0;
}

int local_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	       int *ret_status, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	char why[300];

	/* a gVisor sandbox whose gVisor kernel ended: nothing can run in it */
	if (local_gvisor(rec) && local_gvisor_gone(rec, why, sizeof(why)))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is in error: %s; remove it with 'sbx rm -f %s'",
				   label, why, label);
	if (local_gvisor(rec))
		return local_gvisor_exec(ctx, rec, o, ret_status, err);
	if (o->detach)
		return local_job_exec(ctx, rec, o, ret_status, err, exec_run);
	return exec_run(ctx, rec, o, NULL, ret_status, err);
}
