/* sbx exec --json: the command's output captured (the first --max-output bytes of each stream
 * kept, the rest counted) by the provider's own loop that waits for the command (local), or
 * through pipes by a collector process (hosted providers), then one JSON object. */
#define _GNU_SOURCE
#include "cmd/exec-json.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"

/* what the collector reads after the command ended: what the pipes hold then, not what a
 * process left behind keeps writing */
#define DRAIN_READS 64

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* one stream: pipe's read end, its memfd; false at its end */
static bool collect_one(int *fd, int mfd, size_t cap, uint64_t *total, char *buf, size_t bn)
{
	ssize_t n = read(*fd, buf, bn);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		close_fd(fd);
		return false;
	}
	if (*total < cap) {
		size_t keep = (size_t)n < cap - *total ? (size_t)n : (size_t)(cap - *total);
		(void)!sbx_write_all(mfd, buf, keep);
	}
	*total += (uint64_t)n;
	return true;
}

static _noreturn_ void collector(int rd[2], int mfd[2], int ctl, int res, size_t cap)
{
	static char buf[65536];
	uint64_t total[2] = { 0, 0 };
	bool ended = false;

	/* ended by the command's end (ctl closed), not by the terminal's ^C to the group */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTSTP, SIG_IGN);
	while (rd[0] >= 0 || rd[1] >= 0) {
		struct pollfd p[3] = { { .fd = rd[0], .events = POLLIN },
				       { .fd = rd[1], .events = POLLIN },
				       { .fd = ctl, .events = POLLIN } };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++)
			if (rd[i] >= 0 && p[i].revents)
				(void)collect_one(&rd[i], mfd[i], cap, &total[i], buf, sizeof(buf));
		if (p[2].revents) {
			ended = true;
			break;
		}
	}
	if (ended) /* the command is over: what it left in the pipes, a bounded read */
		for (int i = 0; i < 2; i++) {
			if (rd[i] < 0)
				continue;
			(void)fcntl(rd[i], F_SETFL, O_NONBLOCK);
			for (int k = 0; k < DRAIN_READS && rd[i] >= 0; k++) {
				ssize_t n = read(rd[i], buf, sizeof(buf));
				if (n <= 0)
					break;
				if (total[i] < cap) {
					size_t keep = (size_t)n < cap - total[i]
						? (size_t)n
						: (size_t)(cap - total[i]);
					(void)!sbx_write_all(mfd[i], buf, keep);
				}
				total[i] += (uint64_t)n;
			}
		}
	(void)!sbx_write_all(res, total, sizeof(total));
	_exit(0);
}

/* r->begin: the collector, a child process reading the pipes (for a provider that writes the
 * output to out_fd and err_fd) */
static void capture_begin(struct sbx_exec_result *r)
{
	struct exec_capture *c = r->begin_arg;
	int pc[2], pr[2];

	if (c->pid || c->rd[0] < 0)
		return;
	if (pipe2(pc, O_CLOEXEC) < 0)
		return;
	if (pipe2(pr, O_CLOEXEC) < 0) {
		close(pc[0]);
		close(pc[1]);
		return;
	}
	fflush(stdout);
	fflush(stderr);
	c->pid = fork(); /* the child ends with _exit: no stdio buffer is written twice */
	if (c->pid == 0) {
		close(c->out_w);
		close(c->err_w);
		close(pc[1]);
		close(pr[0]);
		collector(c->rd, c->mfd, pc[0], pr[1], c->cap);
	}
	close(pc[0]);
	close(pr[1]);
	if (c->pid < 0) {
		c->pid = 0;
		close(pc[1]);
		close(pr[0]);
		return;
	}
	close_fd(&c->rd[0]);
	close_fd(&c->rd[1]);
	c->ctl_w = pc[1];
	c->res_r = pr[0];
}

/* r->take: a piece of the output a provider read itself, kept in this process */
static void capture_take(struct sbx_exec_result *r, int stream, const char *buf, size_t n)
{
	struct exec_capture *c = r->begin_arg;
	int i = stream == 2 ? 1 : 0;

	if (c->taken[i] < c->cap) {
		size_t keep = n < c->cap - c->taken[i] ? n : (size_t)(c->cap - c->taken[i]);
		(void)!sbx_write_all(c->mfd[i], buf, keep);
	}
	c->taken[i] += n;
}

int exec_capture_start(struct exec_capture *c, struct sbx_exec_result *r, size_t cap,
		       struct sbx_err *err)
{
	int po[2], pe[2];

	*c = (struct exec_capture){ .out_w = -1,
				    .err_w = -1,
				    .rd = { -1, -1 },
				    .ctl_w = -1,
				    .res_r = -1,
				    .mfd = { -1, -1 },
				    .cap = cap };
	c->mfd[0] = memfd_create("sbx-stdout", MFD_CLOEXEC);
	c->mfd[1] = memfd_create("sbx-stderr", MFD_CLOEXEC);
	if (c->mfd[0] < 0 || c->mfd[1] < 0) {
		sbx_err_errno(err, "cannot make a buffer for the output");
		exec_capture_abort(c);
		return -1;
	}
	if (pipe2(po, O_CLOEXEC) < 0)
		goto fail;
	c->rd[0] = po[0];
	c->out_w = po[1];
	if (pipe2(pe, O_CLOEXEC) < 0)
		goto fail;
	c->rd[1] = pe[0];
	c->err_w = pe[1];
	r->out_fd = c->out_w;
	r->err_fd = c->err_w;
	r->begin = capture_begin;
	r->take = capture_take;
	r->begin_arg = c;
	return 0;
fail:
	sbx_err_errno(err, "cannot create a pipe");
	exec_capture_abort(c);
	return -1;
}

/* the counts: the collector's, told at its end and reaped (false when it did not say), or
 * what take() was given when no collector ran (what the pipes hold then is read too: a
 * provider that wrote there without starting it) */
static bool capture_end(struct exec_capture *c, uint64_t total[2])
{
	bool ok = true;

	close_fd(&c->out_w);
	close_fd(&c->err_w);
	total[0] = c->taken[0];
	total[1] = c->taken[1];
	for (int i = 0; i < 2; i++) {
		if (c->rd[i] < 0)
			continue;
		(void)fcntl(c->rd[i], F_SETFL, O_NONBLOCK);
		char buf[16384];
		for (int k = 0; k < 256; k++) {
			ssize_t n = read(c->rd[i], buf, sizeof(buf));
			if (n <= 0)
				break;
			struct sbx_exec_result r = { .begin_arg = c };
			capture_take(&r, i + 1, buf, (size_t)n);
		}
		total[i] = c->taken[i];
		close_fd(&c->rd[i]);
	}
	close_fd(&c->ctl_w);
	if (c->res_r >= 0) {
		ssize_t n;
		do
			n = read(c->res_r, total, 2 * sizeof(uint64_t));
		while (n < 0 && errno == EINTR);
		ok = n == (ssize_t)(2 * sizeof(uint64_t));
	}
	close_fd(&c->res_r);
	if (c->pid > 0)
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	c->pid = 0;
	return ok;
}

void exec_capture_abort(struct exec_capture *c)
{
	uint64_t total[2];

	(void)capture_end(c, total);
	close_fd(&c->mfd[0]);
	close_fd(&c->mfd[1]);
}

/* the length of buf's longest prefix that ends on a whole UTF-8 sequence (a cut at the cap may
 * split one); n when it is whole */
static size_t utf8_whole(const unsigned char *buf, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char b = buf[n - back];
		if ((b & 0xc0) == 0x80)
			continue; /* a continuation byte: its lead is further back */
		size_t len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
		return len > back ? n - back : n;
	}
	return n;
}

static void add_stream(json_t *j, const char *name, int mfd, uint64_t total, size_t cap)
{
	size_t have = total < cap ? (size_t)total : cap;
	_cleanup_free_ unsigned char *buf = xmalloc(have + 1);
	ssize_t n = have ? pread(mfd, buf, have, 0) : 0;
	size_t len = n > 0 ? (size_t)n : 0;
	bool truncated = total > len;
	json_t *s = json_stringn((const char *)buf, truncated ? utf8_whole(buf, len) : len);
	char key[32];

	if (s) {
		json_object_set_new(j, name, s);
		snprintf(key, sizeof(key), "%s_encoding", name);
		json_object_set_new(j, key, json_string("utf-8"));
	} else {
		_cleanup_free_ char *b64 = sbx_base64_encode(buf, len);
		json_object_set_new(j, name, json_string(b64));
		snprintf(key, sizeof(key), "%s_encoding", name);
		json_object_set_new(j, key, json_string("base64"));
	}
	snprintf(key, sizeof(key), "%s_truncated", name);
	json_object_set_new(j, key, json_boolean(truncated));
	snprintf(key, sizeof(key), "%s_bytes", name);
	json_object_set_new(j, key, json_integer((json_int_t)total));
}

static json_t *nullable_real(double v)
{
	return v < 0 ? json_null() : json_real((double)(long long)(v * 1000 + 0.5) / 1000);
}

int exec_capture_print(struct exec_capture *c, int status, const struct sbx_exec_result *r,
		       double duration_ms, struct sbx_err *err)
{
	uint64_t total[2] = { 0, 0 };

	if (!capture_end(c, total)) {
		exec_capture_abort(c);
		return sbx_err_set(err, SBX_E_INTERNAL,
				   "the output's collector ended without a word");
	}
	json_t *j = json_object();
	json_object_set_new(j, "exit_code", json_integer(status));
	if (r->signal > 0) {
		const char *abbr = sigabbrev_np(r->signal);
		_cleanup_free_ char *name = abbr ? xasprintf("SIG%s", abbr)
						 : xasprintf("SIG%d", r->signal);
		json_object_set_new(j, "signal", json_string(name));
	} else {
		json_object_set_new(j, "signal", json_null());
	}
	json_object_set_new(j, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(j, "oom_killed", json_boolean(r->oom_killed));
	json_object_set_new(j, "duration_ms", nullable_real(duration_ms));
	json_object_set_new(j, "cpu_ms", nullable_real(r->cpu_ms));
	json_object_set_new(j, "peak_memory_bytes",
			    r->peak_memory < 0 ? json_null() : json_integer(r->peak_memory));
	add_stream(j, "stdout", c->mfd[0], total[0], c->cap);
	add_stream(j, "stderr", c->mfd[1], total[1], c->cap);
	close_fd(&c->mfd[0]);
	close_fd(&c->mfd[1]);
	char *s = sbx_json_dumps(j, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	fputs(s, stdout);
	fputc('\n', stdout);
	free(s);
	json_decref(j);
	return 0;
}

double exec_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
