/* The local sandbox's supervisor (host side, forked by the creating CLI): it detaches the trees
 * init needs, clones init into the new namespaces, writes their id maps, reports to the CLI,
 * then holds the sandbox: its network (net-*.c) and its idle timeout. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/proc.h"
#include "core/store.h"
#include "core/test-hook.h"
#include "providers/local/gvisor.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

static void report(int fd, struct local_report *r)
{
	/* if the creating CLI is gone, nobody will own this sandbox: take it down */
	if (sbx_proc_report(fd, r, sizeof(*r)) < 0 && r->ok) {
		kill(r->pids.init_pid, SIGKILL);
		_exit(1);
	}
}

static _noreturn_ _printf_(3, 4) void sup_fail(int report_fd, pid_t init, const char *fmt, ...)
{
	struct local_report r = { 0 };
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
	va_end(ap);
	if (e && n > 0 && (size_t)n < sizeof(r.msg))
		snprintf(r.msg + n, sizeof(r.msg) - (size_t)n, ": %s", strerror(e));
	if (init > 0)
		kill(init, SIGKILL);
	report(report_fd, &r);
	close(report_fd);
	_exit(1);
}

/* the idle timeout fired: pause the sandbox, or remove it, under its lock, as the CLI would.
 * Returns the time to sleep before looking again (ms), or -1 once the sandbox is gone. */
static long long idle_timeout(const struct local_setup *s, pid_t init, struct local_net *net)
{
	struct sbx_store st = { .root = (char *)s->store_root };
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL;
	long long left, ttl = local_net_ttl(net);

	/* an attached exec's command runs: the sandbox is not idle (unless --ttl-hard); its end
	 * restarts the clock */
	if (!s->config->ttl_hard && local_net_execs(net) > 0)
		return ttl;
	_cleanup_close_ int lk = sbx_store_lock(&st, s->id, true, &err);
	if (lk < 0 || sbx_store_load(&st, s->id, &rec, &err) < 0) {
		sbx_record_free(rec);
		return lk < 0 && err.kind == SBX_E_NOTFOUND ? -1 : ttl;
	}
	struct local_pids pids;
	if (local_read_pids(s->dir, &pids) < 0 || pids.init_pid != init) {
		sbx_record_free(rec);
		return ttl;
	}
	/* traffic while we waited for the lock, or paused already: look again later */
	left = local_idle_deadline(s->dir, ttl) - sbx_now_ms();
	if (left > 0 || local_is_frozen(s->dir, &pids) == 1) {
		sbx_record_free(rec);
		return left > 0 ? left : ttl;
	}
	if (s->ttl_rm) {
		kill(init, SIGKILL);
		while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
			;
		local_cgroup_leave(getpid());
		local_cgroup_remove(s->dir);
		(void)sbx_store_remove(&st, s->id, rec->name, &err);
		sbx_record_free(rec);
		return -1;
	}
	if (local_sandbox_freeze(rec, &pids, true, &err) == 0) {
		rec->state = SBX_STATE_PAUSED;
		(void)sbx_store_save(&st, rec, true, &err);
	}
	sbx_record_free(rec);
	return ttl;
}

/* holds the sandbox until init ends, acting on the idle timeout */
static _noreturn_ void hold(const struct local_setup *s, pid_t init, struct local_net *net)
{
	int pidfd = sbx_pidfd_open(init);
	long long wait_ms = -1;

	if (local_net_ttl(net) > 0 && pidfd >= 0) {
		wait_ms = local_idle_deadline(s->dir, local_net_ttl(net)) - sbx_now_ms();
		if (wait_ms < 0)
			wait_ms = 0;
	}
	for (;;) {
		/* the proxy, forwarders and previews are served meanwhile */
		int r = pidfd >= 0 ? local_net_wait(net, pidfd, wait_ms) : 1;
		if (r != 0)
			break;
		/* a timeout, or sbx update changed the timeout (from none, perhaps) */
		if (local_net_ttl(net) <= 0) {
			wait_ms = -1;
			continue;
		}
		wait_ms = idle_timeout(s, init, net);
		if (wait_ms < 0)
			break;
	}
	for (;;) {
		int st;
		pid_t w = waitpid(init, &st, 0);
		if (w == init || (w < 0 && errno != EINTR))
			break;
	}
	_exit(0);
}

void local_supervisor(const struct local_setup *s, int report_fd)
{
	int sync_p[2], ready_p[2];
	char p[PATH_MAX];

	setsid();
	prctl(PR_SET_NAME, "sbx-supervisor", 0, 0, 0);
	/* descriptors the caller passed down (a harness's pipes) must not be held open for the
	 * sandbox's lifetime */
	if (report_fd > 3)
		syscall(SYS_close_range, 3, (unsigned)report_fd - 1, 0);
	syscall(SYS_close_range, (unsigned)report_fd + 1, ~0U, 0);
	signal(SIGPIPE, SIG_IGN);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		close(null);
	}
	/* run by root, sandbox root maps to an unprivileged uid that cannot traverse root's
	 * home: detach copies of the trees it needs here, while we still can */
	int rootfd = -1;
	int *volfds = xcalloc(s->n_volumes + 1, sizeof(int));
	for (size_t i = 0; i < s->n_volumes; i++)
		volfds[i] = -1;
	int *layerfds = xcalloc(s->n_layers + 1, sizeof(int));
	for (size_t i = 0; i <= s->n_layers; i++)
		layerfds[i] = -1;
	if (s->disk) {
		/* --disk: the disk is the sandbox's root (or its fs/ with an image); the lock on it
		 * is held for as long as the supervisor lives */
		struct sbx_err derr = { 0 };
		int disk_lock, m = local_disk_mount(s->dir, &disk_lock, &derr);
		if (m < 0) {
			errno = 0;
			sup_fail(report_fd, 0, "%s", derr.msg);
		}
		if (s->n_layers)
			layerfds[s->n_layers] = m;
		else
			rootfd = m;
	}
	if (s->map_range) {
		snprintf(p, sizeof(p), "%s/root", s->dir);
		if (!s->n_layers && rootfd < 0 && (rootfd = local_clone_tree(p)) < 0)
			sup_fail(report_fd, 0, "cannot open '%s'", p);
		for (size_t i = 0; s->n_layers && i <= s->n_layers; i++) {
			if (layerfds[i] >= 0)
				continue;
			if (i < s->n_layers)
				snprintf(p, sizeof(p), "%s", s->layers[i]);
			else
				snprintf(p, sizeof(p), "%s/fs", s->dir);
			if ((layerfds[i] = local_clone_tree(p)) < 0)
				sup_fail(report_fd, 0, "cannot open '%s'", p);
		}
		for (size_t i = 0; i < s->n_volumes; i++)
			if ((volfds[i] = local_clone_tree(s->volumes[i].host)) < 0)
				sup_fail(report_fd, 0, "cannot open volume '%s'",
					 s->volumes[i].host);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync_p) < 0 ||
	    pipe2(ready_p, O_CLOEXEC) < 0)
		sup_fail(report_fd, 0, "cannot create pipes");
	/* its work for the sandbox is the sandbox's: charged to its memory, pids and CPU */
	if (local_cgroup_enter_supervisor(s->dir, getpid()) < 0)
		sup_fail(report_fd, 0, "cannot move the supervisor into the sandbox's cgroup");

	pid_t sup = getpid();
	/* the cgroup namespace comes later: init makes it once it is in the sandbox's cgroups */
	pid_t pid = (pid_t)syscall(SYS_clone,
				   CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
					   (s->net_host ? 0 : CLONE_NEWNET) | CLONE_NEWUTS |
					   CLONE_NEWIPC | SIGCHLD,
				   NULL, NULL, NULL, NULL);
	if (pid < 0)
		sup_fail(report_fd, 0, "cannot create the sandbox's namespaces");
	if (pid == 0) {
		close(report_fd);
		close(sync_p[1]);
		close(ready_p[0]);
		local_init(s, rootfd, volfds, layerfds, sync_p[0], ready_p[1]);
	}
	close(sync_p[0]);
	close(ready_p[1]);
	if (rootfd >= 0)
		close(rootfd);
	for (size_t i = 0; i <= s->n_layers; i++)
		if (layerfds[i] >= 0)
			close(layerfds[i]);
	free(layerfds);
	int *volfds_keep = volfds; /* closed once the id maps are in place */

	if (local_write_maps(pid, &s->map) < 0)
		sup_fail(
			report_fd, pid,
			s->map.kind == LOCAL_MAP_SUBID
				? "cannot write the user namespace's id maps with /usr/bin/newuidmap "
				  "and /usr/bin/newgidmap (see /etc/subuid and /etc/subgid)"
				: "cannot write the user namespace's id maps");
	/* not before: the maps of a child are written through its /proc files, which a process
	 * that cannot be dumped (and its child) own as root */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (local_cgroup_enter(s->dir, pid) < 0)
		sup_fail(report_fd, pid, "cannot move the sandbox into its cgroup");
	/* --cpus N: init (and so every process after it) runs on ceil(N) CPUs */
	local_cpu_affinity(pid, s->id, s->config ? s->config->cpu_millis : 0);
	/* run by root, volumes are id-mapped through the sandbox's user namespace, so what host
	 * root owns there, sandbox root owns (podman's :idmap); filesystems without id-mapped
	 * mounts keep plain ownership */
	if (s->map_range && s->n_volumes) {
		char nsp[64];
		snprintf(nsp, sizeof(nsp), "/proc/%d/ns/user", (int)pid);
		int nsfd = open(nsp, O_RDONLY | O_CLOEXEC);
		for (size_t i = 0; nsfd >= 0 && i < s->n_volumes; i++) {
			struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP,
						.userns_fd = (unsigned)nsfd };
			(void)syscall(SYS_mount_setattr, volfds_keep[i], "",
				      AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a));
		}
		if (nsfd >= 0)
			close(nsfd);
	}
	if (sbx_write_all(sync_p[1], "", 1) < 0)
		sup_fail(report_fd, pid, "sandbox init did not start");
	/* sync_p[1] stays open for our whole life: init's lifeline */
	for (size_t i = 0; i < s->n_volumes; i++)
		if (volfds_keep[i] >= 0)
			close(volfds_keep[i]);
	free(volfds_keep);

	/* init's report: "" once it is ready, or why it is not */
	char msg[400];
	ssize_t n = sbx_proc_read_report(ready_p[0], msg, sizeof(msg) - 1);
	close(ready_p[0]);
	if (n != 1 || msg[0] != 0) {
		errno = 0;
		if (n > 0) {
			msg[n] = 0;
			sup_fail(report_fd, pid, "sandbox set-up failed: %s", msg);
		}
		sup_fail(report_fd, pid, "sandbox init exited during set-up");
	}

	struct local_report r = { .ok = 1 };
	r.pids.init_pid = pid;
	r.pids.sup_pid = sup;
	if (sbx_proc_starttime(pid, &r.pids.init_start) < 0 ||
	    sbx_proc_starttime(sup, &r.pids.sup_start) < 0)
		sup_fail(report_fd, pid, "cannot read process start times");
	/* the egress proxy and forwarders listen before anyone can exec */
	char nmsg[300];
	struct local_net *net = local_net_start(s, sync_p[1], nmsg, sizeof(nmsg));
	if (!net) {
		errno = 0;
		sup_fail(report_fd, pid, "%s", nmsg);
	}
	/* --runtime gvisor: runsc's sandbox, in init's namespaces, before anyone can exec */
	if (s->gvisor && local_gvisor_boot(s, pid, nmsg, sizeof(nmsg)) < 0) {
		errno = 0;
		sup_fail(report_fd, pid, "%s", nmsg);
	}
	sbx_test_hook("supervisor-ready");
	/* the CLI takes the sandbox only once it has the report and says so: until then, a CLI
	 * that dies takes the sandbox down with it, before anything of it looks running (the
	 * pids file is what says a sandbox runs) */
	report(report_fd, &r);
	char ack;
	ssize_t an;
	do
		an = read(report_fd, &ack, 1);
	while (an < 0 && errno == EINTR);
	if (an != 1) {
		kill(pid, SIGKILL);
		_exit(1);
	}
	char text[128];
	snprintf(text, sizeof(text), "%d %llu %d %llu\n", (int)pid, r.pids.init_start, (int)sup,
		 r.pids.sup_start);
	snprintf(p, sizeof(p), "%s/pids", s->dir);
	struct sbx_err err = { 0 };
	if (sbx_write_atomic(p, text, strlen(text), false, &err) < 0) {
		kill(pid, SIGKILL);
		_exit(1); /* the CLI sees no 'done' and reports */
	}
	(void)sbx_write_all(report_fd, "", 1);
	close(report_fd);

	hold(s, pid, net);
}
