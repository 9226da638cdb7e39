/* sbx exec without -t: the caller's terminals relayed through pipes (never given to the
 * command), and --json's output read in the same loop. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/proc.h"

/* --- a terminal without -t ---------------------------------------------------------------- */

/* Without -t, a terminal of the caller's never enters the sandbox: a process left behind
 * could read what is typed after sbx exec returned, or write to it. Each standard descriptor
 * that is a terminal is relayed through a pipe instead (pipes and files still go straight
 * through); the relay ends with the command, so a process left behind holds only a pipe
 * nobody reads. */

static bool same_tty(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_rdev == sb.st_rdev &&
		S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode);
}

/* pipes for the terminals among 0-2; the child's ends go into fd[] */
int local_plain_relay_open(const struct sbx_exec_opts *o, struct local_plain_relay *r, int fd[3],
			   int child_end[3], struct sbx_err *err)
{
	int p[2];

	r->in_w = r->out_r = r->err_r = -1;
	r->in_done = false;
	r->res = NULL;
	if (o->tty || o->detach)
		return 0;
	if (o->result && o->result->take) { /* --json: both streams read here, apart */
		r->res = o->result;
		for (int i = 1; i <= 2; i++) {
			if (pipe2(p, O_CLOEXEC) < 0)
				return sbx_err_errno(err, "cannot create a pipe");
			fd[i] = child_end[i] = p[1];
			*(i == 1 ? &r->out_r : &r->err_r) = p[0];
		}
	}
	if (o->interactive && isatty(0)) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return sbx_err_errno(err, "cannot create a pipe");
		fd[0] = child_end[0] = p[0];
		r->in_w = p[1];
		local_set_nonblock(r->in_w);
	}
	if (fd[1] < 0 && isatty(1)) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return sbx_err_errno(err, "cannot create a pipe");
		fd[1] = child_end[1] = p[1];
		r->out_r = p[0];
	}
	if (fd[2] < 0 && isatty(2)) {
		if (r->out_r >= 0 && same_tty(1, 2)) {
			fd[2] = fd[1]; /* one pipe: the order of what both say is kept */
		} else {
			if (pipe2(p, O_CLOEXEC) < 0)
				return sbx_err_errno(err, "cannot create a pipe");
			fd[2] = child_end[2] = p[1];
			r->err_r = p[0];
		}
	}
	return 0;
}

void local_plain_relay_close(struct local_plain_relay *r)
{
	int *fds[] = { &r->in_w, &r->out_r, &r->err_r };

	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

bool local_plain_relay_active(const struct local_plain_relay *r)
{
	return r->in_w >= 0 || r->out_r >= 0 || r->err_r >= 0;
}

/* stream 1 or 2 of the command: to our own descriptor, or to --json's collecting; drain: what
 * the pipe holds now (at most 4 MiB: a process the command left behind may go on writing) */
static bool relay_out(struct local_plain_relay *r, int stream, bool drain)
{
	int from = stream == 1 ? r->out_r : r->err_r;
	char buf[16384];

	if (!r->res)
		return local_exec_pump(from, stream, drain);
	if (drain)
		local_set_nonblock(from);
	for (int k = 0; k < 256; k++) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		r->res->take(r->res, stream, buf, (size_t)n);
		if (!drain)
			return true;
	}
	return true;
}

/* until the command ends: the terminal's input to it, its output to the terminal; then what
 * it left in the pipes, and nothing after */
void local_plain_relay_run(struct local_plain_relay *r, pid_t pid)
{
	int pfd = sbx_pidfd_open(pid);
	char buf[4096];
	size_t have = 0, off = 0;

	while (pfd >= 0) {
		struct pollfd p[5];
		int np = 0, ip = -1, iw = -1, io = -1, ie = -1;
		p[np++] = (struct pollfd){ .fd = pfd, .events = POLLIN };
		if (r->in_w >= 0 && have == off && !r->in_done) {
			ip = np;
			p[np++] = (struct pollfd){ .fd = 0, .events = POLLIN };
		}
		if (r->in_w >= 0 && have > off) {
			iw = np;
			p[np++] = (struct pollfd){ .fd = r->in_w, .events = POLLOUT };
		}
		if (r->out_r >= 0) {
			io = np;
			p[np++] = (struct pollfd){ .fd = r->out_r, .events = POLLIN };
		}
		if (r->err_r >= 0) {
			ie = np;
			p[np++] = (struct pollfd){ .fd = r->err_r, .events = POLLIN };
		}
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (io >= 0 && p[io].revents && !relay_out(r, 1, false)) {
			close(r->out_r);
			r->out_r = -1;
		}
		if (ie >= 0 && p[ie].revents && !relay_out(r, 2, false)) {
			close(r->err_r);
			r->err_r = -1;
		}
		if (ip >= 0 && p[ip].revents) {
			ssize_t n = read(0, buf, sizeof(buf));
			if (n > 0) {
				have = (size_t)n;
				off = 0;
			} else if (n == 0 || errno != EINTR) {
				r->in_done = true; /* ^D: the command sees the end of its input */
				close(r->in_w);
				r->in_w = -1;
			}
		}
		if (iw >= 0 && p[iw].revents) {
			ssize_t n = write(r->in_w, buf + off, have - off);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				close(r->in_w);
				r->in_w = -1;
			}
			if (off == have)
				have = off = 0;
		}
		if (p[0].revents)
			break; /* the command ended */
	}
	if (pfd >= 0)
		close(pfd);
	if (r->out_r >= 0)
		(void)relay_out(r, 1, true);
	if (r->err_r >= 0)
		(void)relay_out(r, 2, true);
	local_plain_relay_close(r);
}
