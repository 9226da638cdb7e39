/* sbx mcp: a tool call runs one verb by its command-line contract, in a forked child that
 * calls the command's function through the command table (no program is executed by path). */
#define _GNU_SOURCE
#include "cmd/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/strbuf.h"

#define ERR_CAP (64 * 1024)

/* pin, pout, perr: the pipes' ends, [0] read, [1] write */
_noreturn_ static void child(struct sbx_ctx *ctx, char *const *argv, const int pin[2],
			     const int pout[2], const int perr[2])
{
	const struct sbx_command *c = cmd_find(argv[0]);
	int argc = 0;

	if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0)
		_exit(125);
	/* no exec follows: the pipes' other copies close here, or the verb's stdin would never
	 * end (this process holding its write end) */
	for (int i = 0; i < 2; i++) {
		close(pin[i]);
		close(pout[i]);
		close(perr[i]);
	}
	/* the server ignores SIGPIPE; what the verb runs must not inherit that */
	signal(SIGPIPE, SIG_DFL);
	/* errors as {"error": {"code", "message"}} on stderr */
	setenv("SBX_JSON", "1", 1);
	while (argv[argc])
		argc++;
	char **av = xmalloc((size_t)(argc + 1) * sizeof(*av));
	av[0] = xasprintf("sbx %s", argv[0]);
	for (int i = 1; i <= argc; i++)
		av[i] = argv[i];
	optind = 0;
	opterr = 0;
	if (!c) {
		/* a verb this build of sbx does not have */
		fprintf(stderr,
			"{\"error\": {\"code\": \"unsupported\", \"message\": \"this sbx has no "
			"'%s' command\"}}\n",
			argv[0]);
		fflush(stderr);
		_exit(125);
	}
	int r = c->fn(argc, av, ctx);
	fflush(stdout);
	fflush(stderr);
	_exit(r & 0xff);
}

static void keep(char **buf, size_t *len, size_t cap, const char *data, size_t n)
{
	size_t room = *len < cap ? cap - *len : 0;
	if (n > room)
		n = room;
	if (!n)
		return;
	*buf = xrealloc(*buf, *len + n + 1);
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
}

int mcp_run_verb(struct sbx_ctx *ctx, char *const *argv, const void *in, size_t in_len,
		 size_t out_cap, struct mcp_run *r, struct sbx_err *err)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };

	memset(r, 0, sizeof(*r));
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot make a pipe: %s", strerror(errno));
		goto fail;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		sbx_err_set(err, SBX_E_SYSTEM, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		child(ctx, argv, pin, pout, perr);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	pin[0] = pout[1] = perr[1] = -1;
	(void)fcntl(pin[1], F_SETFL, O_NONBLOCK);
	if (!in_len) {
		close(pin[1]);
		pin[1] = -1;
	}
	/* the verb's output is what it wrote until it exited: a command it left running in the
	 * background (exec -d) may hold the pipes open for long after */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	bool exited = false;
	size_t off = 0;
	char buf[65536];
	while (pout[0] >= 0 || perr[0] >= 0) {
		struct pollfd p[4] = {
			{ .fd = pout[0], .events = POLLIN },
			{ .fd = perr[0], .events = POLLIN },
			{ .fd = pin[1], .events = POLLOUT },
			{ .fd = exited ? -1 : pidfd, .events = POLLIN },
		};
		if (!exited && poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pin[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n = write(pin[1], (const char *)in + off, in_len - off);
			if (n > 0)
				off += (size_t)n;
			if ((n < 0 && errno != EAGAIN && errno != EINTR) || off == in_len) {
				close(pin[1]);
				pin[1] = -1;
			}
		}
		if (!exited && (p[3].revents & POLLIN)) {
			/* it is gone: what it wrote is in the pipes; read that, and no more */
			exited = true;
			for (int i = 0; i < 2; i++)
				if ((i ? perr[0] : pout[0]) >= 0)
					(void)fcntl(i ? perr[0] : pout[0], F_SETFL, O_NONBLOCK);
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &perr[0] : &pout[0];
			if (*fd < 0 || (!exited && !(p[i].revents & (POLLIN | POLLHUP | POLLERR))))
				continue;
			ssize_t n = read(*fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(*fd);
				*fd = -1;
				continue;
			}
			if (i) {
				keep(&r->err, &r->err_len, ERR_CAP, buf, (size_t)n);
			} else {
				keep(&r->out, &r->out_len, out_cap, buf, (size_t)n);
				r->out_total += (size_t)n;
			}
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	if (pin[1] >= 0)
		close(pin[1]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (!r->out)
		r->out = xstrdup("");
	if (!r->err)
		r->err = xstrdup("");
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	return -1;
}

void mcp_run_release(struct mcp_run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

json_t *mcp_run_error(const struct mcp_run *r)
{
	const char *code = r->status == 127 ? "command_not_found"
		: r->status == 126	    ? "command_not_executable"
					    : "internal";
	_cleanup_free_ char *msg = NULL;

	/* the last line that is an {"error": ...} object, else the first "sbx: error:" line */
	for (const char *l = r->err; *l;) {
		const char *eol = strchrnul(l, '\n');
		json_t *j = *l == '{' ? json_loadb(l, (size_t)(eol - l), 0, NULL) : NULL;
		json_t *e = json_object_get(j, "error");
		if (json_is_object(e) && sbx_json_str(e, "code") && sbx_json_str(e, "message")) {
			json_t *o = json_pack("{s:s,s:s}", "code", sbx_json_str(e, "code"),
					      "message", sbx_json_str(e, "message"));
			json_decref(j);
			return o;
		}
		json_decref(j);
		if (!msg && startswith(l, "sbx: error: "))
			msg = mcp_utf8_clean(l + 12, (size_t)(eol - l - 12), NULL);
		l = *eol ? eol + 1 : eol;
	}
	if (!msg) {
		size_t n = strlen(r->err);
		while (n && (r->err[n - 1] == '\n' || r->err[n - 1] == ' '))
			n--;
		msg = n ? mcp_utf8_clean(r->err, n, NULL)
			: xasprintf("the command failed with exit status %d", r->status);
	}
	return json_pack("{s:s,s:s}", "code", code, "message", msg);
}

char *mcp_utf8_clean(const char *s, size_t n, bool *ret_was_clean)
{
	struct strbuf sb = STRBUF_INIT;
	bool clean = true;

	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80	     ? 1
			: (c & 0xe0) == 0xc0 ? 2
			: (c & 0xf0) == 0xe0 ? 3
			: (c & 0xf8) == 0xf0 ? 4
					     : 0;
		bool ok = len && i + len <= n && c != 0;
		for (size_t k = 1; ok && k < len; k++)
			ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
		if (ok && len > 1) {
			/* overlong forms, surrogates and past U+10FFFF are no UTF-8 either */
			unsigned int cp = c & (0x7f >> len);
			for (size_t k = 1; k < len; k++)
				cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3f);
			ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) &&
				!(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
				!(cp >= 0xd800 && cp <= 0xdfff);
		}
		if (!ok) {
			strbuf_addstr(&sb, "\xef\xbf\xbd");
			clean = false;
			i++;
			continue;
		}
		strbuf_add(&sb, s + i, len);
		i += len;
	}
	if (ret_was_clean)
		*ret_was_clean = clean;
	return strbuf_detach(&sb);
}
