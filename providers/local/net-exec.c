/* The supervisor's registry of attached execs: each sbx exec registers its command (the leader
 * of a process group of its own) on the control socket; the supervisor holds a pidfd of the
 * sbx exec process (the connection's peer) and one of the command. If sbx exec dies while its
 * command still runs (SIGKILL, which it cannot act on), the supervisor kills the command's
 * whole process group, so nothing of it keeps running or keeps the caller's pipes open. The
 * idle timeout asks the registry whether a command is in flight. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>

#include "core/json.h"
#include "core/proc.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

struct local_exec_reg {
	struct local_ep_tag ep; /* LOCAL_EP_EXEC: the caller's pidfd */
	int caller, cmd;	/* pidfds (-1: a free slot) */
	pid_t pgid;
};

static bool ended(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

static void reg_drop(struct local_exec_reg *r)
{
	local_close_fd(&r->caller); /* which takes it out of the epoll set */
	local_close_fd(&r->cmd);
	r->pgid = 0;
}

/* commands that ended are dropped (never from within a round of events, which may name them) */
static void sweep(struct local_net *n)
{
	for (size_t i = 0; n->execs && i < LOCAL_EXECS_MAX; i++)
		if (n->execs[i].caller >= 0 && ended(n->execs[i].cmd))
			reg_drop(&n->execs[i]);
}

static json_t *refuse(const char *why)
{
	return json_pack("{s:b, s:s}", "ok", 0, "error", why);
}

json_t *local_exec_add(struct local_net *n, int fd, json_t *req)
{
	json_int_t v = json_integer_value(json_object_get(req, "pid"));
	pid_t pid = v > 1 && v <= INT32_MAX ? (pid_t)v : 0;
	struct ucred cr;
	socklen_t l = sizeof(cr);

	if (!pid)
		return refuse("bad request");
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || cr.pid <= 0)
		return refuse("cannot identify the caller");
	/* only the sandbox's owner (or root) reaches the socket; still, a caller names only a
	 * child of its own that leads its own group */
	if (cr.uid != geteuid() && cr.uid != 0)
		return refuse("not the sandbox's owner");
	if (!n->execs) {
		n->execs = xcalloc(LOCAL_EXECS_MAX, sizeof(*n->execs));
		for (size_t i = 0; i < LOCAL_EXECS_MAX; i++)
			n->execs[i].caller = n->execs[i].cmd = -1;
	}
	sweep(n);
	size_t i;
	for (i = 0; i < LOCAL_EXECS_MAX && n->execs[i].caller >= 0; i++)
		;
	if (i == LOCAL_EXECS_MAX)
		return refuse("too many execs are registered");
	/* the caller's pidfd from the connection itself, so that it names the process that
	 * connected (before 6.5: by its pid, alive while it waits for this answer) */
	int caller = -1;
	l = sizeof(caller);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &caller, &l) < 0 || caller < 0) {
		caller = sbx_pidfd_open(cr.pid);
		if (caller < 0)
			return refuse("cannot watch the caller");
	}
	(void)fcntl(caller, F_SETFD, FD_CLOEXEC);
	/* the command is the caller's child: unreaped while the caller waits for this answer, so
	 * its pid names it; checked again once its pidfd is held */
	pid_t pp = 0, pg = 0;
	int cmd = -1;
	if (sbx_proc_parent_group(pid, &pp, &pg) < 0 || pp != cr.pid || pg != pid ||
	    (cmd = sbx_pidfd_open(pid)) < 0 || sbx_proc_parent_group(pid, &pp, &pg) < 0 ||
	    pp != cr.pid) {
		local_close_fd(&cmd);
		close(caller);
		return refuse("not a command of the caller's");
	}
	struct local_exec_reg *r = &n->execs[i];
	r->ep.type = LOCAL_EP_EXEC;
	r->caller = caller;
	r->cmd = cmd;
	r->pgid = pid;
	if (local_ep_add(n, caller, EPOLLIN, &r->ep) < 0) {
		reg_drop(r);
		return refuse("cannot watch the caller");
	}
	return json_pack("{s:b}", "ok", 1);
}

void local_exec_caller_ended(struct local_net *n, struct local_ep_tag *ep)
{
	struct local_exec_reg *r = (struct local_exec_reg *)(void *)ep;

	(void)n;
	if (r->caller < 0)
		return;
	/* its leader has not ended: no other group can have its id */
	if (!ended(r->cmd)) {
		(void)kill(-r->pgid, SIGKILL);
		(void)sbx_pidfd_signal(r->cmd, SIGKILL); /* if it left its group */
	}
	reg_drop(r);
}

size_t local_net_execs(struct local_net *n)
{
	size_t k = 0;

	sweep(n);
	for (size_t i = 0; n->execs && i < LOCAL_EXECS_MAX; i++)
		if (n->execs[i].caller >= 0 && !ended(n->execs[i].caller))
			k++;
	return k;
}
