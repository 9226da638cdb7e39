/* The CLI's side of a local sandbox's network service: sbx preview's request on the
 * supervisor's control socket, the proxy credential every sbx exec gets, the egress log's
 * path. */
#define _GNU_SOURCE
#include "providers/local/net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "core/json.h"
#include "core/log.h"

#define EXECS_MAX (1 << 20)
#define CTL_TIMEOUT_MS 10000

socklen_t local_ctl_addr(const char *dir, int dirfd, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(dir) + 5 < sizeof(a->sun_path))
		snprintf(a->sun_path, sizeof(a->sun_path), "%s/ctl", dir);
	else
		snprintf(a->sun_path, sizeof(a->sun_path), "/proc/self/fd/%d/ctl", dirfd);
	return (socklen_t)sizeof(*a);
}

void local_hex(char *out, size_t bytes)
{
	unsigned char b[32];

	if (bytes > sizeof(b) || getrandom(b, bytes, 0) != (ssize_t)bytes)
		abort(); /* the kernel's random source failed: nothing sensible is left */
	for (size_t i = 0; i < bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

char *local_egress_log_at(const char *dir, const char *suffix)
{
	return xasprintf("%s/egress.log%s", dir, suffix);
}

char *local_egress_log_path(const struct sbx_record *rec)
{
	return local_egress_log_at(rec->dir, "");
}

static bool proxied(const struct sbx_record *rec)
{
	const struct sbx_net_config *n = &rec->config.net;

	return n->set && (n->mode == SBX_NET_ALLOW || n->mode == SBX_NET_OPEN);
}

int local_net_exec_env(const struct sbx_record *rec, char *const *argv,
		       void (*set)(void *, const char *), void *env, struct sbx_err *err)
{
	char id[13], secret[33];
	char kv[160];

	local_hex(id, 6);
	snprintf(kv, sizeof(kv), "SBX_EXEC_ID=%s", id);
	set(env, kv);
	if (!proxied(rec))
		return 0;
	local_hex(secret, 16);
	/* the credential, for the supervisor to check and to name the exec in the log */
	json_t *a = json_array();
	for (char *const *p = argv; p && *p; p++)
		json_array_append_new(a, json_stringn_nocheck(*p, strlen(*p)));
	char *s = json_dumps(a, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(a);
	_cleanup_free_ char *line = xasprintf("%s %s %s\n", id, secret, s ? s : "[]");
	free(s);
	_cleanup_free_ char *p = xasprintf("%s/execs", rec->dir);
	int fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	int w = -1;
	if (fd >= 0) {
		struct stat st;
		(void)flock(fd, LOCK_EX);
		if (fstat(fd, &st) == 0 && st.st_size > EXECS_MAX) {
			_cleanup_free_ char *old = xasprintf("%s/execs.1", rec->dir);
			(void)rename(p, old);
			close(fd);
			fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
			if (fd >= 0)
				(void)flock(fd, LOCK_EX);
		}
		if (fd >= 0) {
			w = sbx_write_all(fd, line, strlen(line));
			int e = errno;
			if (close(fd) < 0 && w == 0)
				w = -1;
			else
				errno = e;
		}
	}
	/* out of descriptors or memory, the exec would not get far: it fails here, saying so */
	if (w < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM))
		return sbx_err_errno(err, "cannot record this exec's proxy credential in '%s'", p);
	/* not recorded (a full disk): the command still runs, so that it can be used to make
	 * room, but its egress is logged without its name, and the caller is told */
	char cred[64] = "";
	if (w == 0)
		snprintf(cred, sizeof(cred), "%s:%s@", id, secret);
	else
		sbx_warn("cannot record this exec's proxy credential in '%s': %s; its egress is "
			 "logged without its command",
			 p, strerror(errno));
	static const char *const http[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					    "https_proxy" };
	for (size_t i = 0; i < ARRAY_SIZE(http); i++) {
		snprintf(kv, sizeof(kv), "%s=http://%s127.0.0.1:%d", http[i], cred,
			 LOCAL_PROXY_HTTP_PORT);
		set(env, kv);
	}
	snprintf(kv, sizeof(kv), "ALL_PROXY=socks5h://%s127.0.0.1:%d", cred,
		 LOCAL_PROXY_SOCKS_PORT);
	set(env, kv);
	snprintf(kv, sizeof(kv), "all_proxy=socks5h://%s127.0.0.1:%d", cred,
		 LOCAL_PROXY_SOCKS_PORT);
	set(env, kv);
	set(env, "NO_PROXY=localhost,127.0.0.1");
	set(env, "no_proxy=localhost,127.0.0.1");
	set(env, "NODE_USE_ENV_PROXY=1");
	return 0;
}

static json_t *previews_read(const struct sbx_record *rec)
{
	_cleanup_free_ char *p = xasprintf("%s/previews.json", rec->dir);
	_cleanup_free_ char *text = sbx_read_file(p, 1 << 20, NULL);
	json_t *a = text ? json_loads(text, 0, NULL) : NULL;

	if (!json_is_array(a)) {
		json_decref(a);
		a = json_array();
	}
	return a;
}

/* waits for fd to be ready (ev) until deadline (unix ms); -1 with errno on a timeout */
static int wait_until(int fd, short ev, long long deadline)
{
	for (;;) {
		long long left = deadline - sbx_now_ms();
		struct pollfd p = { .fd = fd, .events = ev };
		int r = poll(&p, 1, left > 0 ? (int)left : 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ETIMEDOUT;
		return r > 0 ? 0 : -1;
	}
}

static int send_line(int fd, const char *s, long long deadline)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
			if (errno == EAGAIN && wait_until(fd, POLLOUT, deadline) < 0)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

int local_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		  const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	long long deadline = sbx_now_ms() + CTL_TIMEOUT_MS;

	(void)ctx;
	if (o->port == 0) {
		*ret = previews_read(rec);
		return 0;
	}
	if (o->public && o->no_auth)
		return sbx_err_set(err, SBX_E_USAGE,
				   "--no-auth goes with a loopback preview: a "
				   "--public one always needs its token");
	if (rec->state != SBX_STATE_RUNNING && rec->state != SBX_STATE_PAUSED)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; run 'sbx resume %s'",
				   label, sbx_state_name(rec->state), label);
	local_touch_activity(rec->dir);
	_cleanup_close_ int dfd = open(rec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = local_ctl_addr(rec->dir, dfd, &a);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, al) < 0)
		return sbx_err_errno(err,
				     "cannot reach the supervisor of sandbox '%s' (run 'sbx "
				     "resume %s' if it was stopped)",
				     label, label);
	json_t *req = json_pack("{s:s, s:i, s:i, s:b, s:b}", "op", o->rm ? "preview-rm" : "preview",
				"port", o->port, "host_port", o->host_port, "public", o->public,
				"no_auth", o->no_auth);
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	_cleanup_free_ char *line = xasprintf("%s\n", s);
	free(s);
	if (send_line(fd, line, deadline) < 0)
		return sbx_err_errno(err, "cannot talk to the supervisor of sandbox '%s'", label);
	char buf[4096];
	size_t got = 0;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		if (wait_until(fd, POLLIN, deadline) < 0)
			return sbx_err_errno(err, "the supervisor of sandbox '%s' did not answer",
					     label);
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	_cleanup_json_ json_t *resp = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (!resp)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "the supervisor of sandbox '%s' gave no "
				   "answer",
				   label);
	if (!json_is_true(json_object_get(resp, "ok"))) {
		const char *kind = sbx_json_str(resp, "kind");
		return sbx_err_set(err,
				   kind && streq(kind, "notfound")	     ? SBX_E_NOTFOUND
					   : kind && streq(kind, "conflict") ? SBX_E_STATE
									     : SBX_E_SYSTEM,
				   "%s", sbx_json_str(resp, "error") ?: "the preview failed");
	}
	json_t *p = json_object_get(resp, "preview");
	*ret = p ? json_incref(p) : json_null();
	return 0;
}

/* --- exec's registration ------------------------------------------------------------------- */

#define EXEC_REG_TIMEOUT_MS 2000

int local_exec_ctl_open(const struct sbx_record *rec)
{
	_cleanup_close_ int dfd = open(rec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = local_ctl_addr(rec->dir, dfd, &a);
	/* non-blocking: a supervisor with a full backlog does not hold the exec up */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, al) < 0) {
		sbx_debug("exec: no supervisor to register with: %s", strerror(errno));
		close(fd);
		fd = -1;
	}
	return fd;
}

void local_exec_register(int ctl, pid_t pid)
{
	long long deadline = sbx_now_ms() + EXEC_REG_TIMEOUT_MS;
	char line[64], buf[512];
	size_t got = 0;

	snprintf(line, sizeof(line), "{\"op\":\"exec\",\"pid\":%d}\n", (int)pid);
	if (send_line(ctl, line, deadline) < 0) {
		sbx_debug("exec: cannot register with the supervisor: %s", strerror(errno));
		return;
	}
	/* the answer says the registration is in place: from then on, the command ends with us */
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		if (wait_until(ctl, POLLIN, deadline) < 0)
			break;
		ssize_t r = recv(ctl, buf + got, sizeof(buf) - 1 - got, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	if (!strstr(buf, "\"ok\":true"))
		sbx_debug("exec: the supervisor did not register the command: %s", buf);
}
