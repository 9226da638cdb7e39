/* The CLI's side of a local sandbox's network service: sbx preview's request on the
 * supervisor's control socket, the proxy credential every sbx exec gets, the egress log's
 * path. */
#define _GNU_SOURCE
#include "providers/local/net.h"
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "core/json.h"
#include "core/log.h"

#define EXECS_MAX (1 << 20)
#define CTL_TIMEOUT_MS 10000
#define CTL_LINE_MAX 65000 /* below the supervisor's CTL_MAX */

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
	local_secrets_env(rec, set, env);
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
	/* ALL_PROXY is the HTTP proxy too: a client that reads it for every scheme and knows no
	 * SOCKS (Python's httpx, under the OpenAI and Anthropic SDKs, refuses to start at all
	 * with a socks5h:// one) works; the SOCKS5 proxy's URL is in a variable of sbx's own,
	 * for what is pointed at it by hand */
	static const char *const all[] = { "ALL_PROXY", "all_proxy" };
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		snprintf(kv, sizeof(kv), "%s=http://%s127.0.0.1:%d", all[i], cred,
			 LOCAL_PROXY_HTTP_PORT);
		set(env, kv);
	}
	snprintf(kv, sizeof(kv), "SBX_SOCKS_PROXY=socks5h://%s127.0.0.1:%d", cred,
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

/* one request on the supervisor's control socket, and its answer (ok or not) in *ret */
int local_ctl_call(const struct sbx_record *rec, json_t *req, json_t **ret, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	long long deadline = sbx_now_ms() + CTL_TIMEOUT_MS;
	_cleanup_close_ int dfd = open(rec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sockaddr_un a;
	socklen_t al = local_ctl_addr(rec->dir, dfd, &a);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, al) < 0)
		return sbx_err_errno(err,
				     "cannot reach the supervisor of sandbox '%s' (run 'sbx "
				     "resume %s' if it was stopped)",
				     label, label);
	char *s = json_dumps(req, JSON_COMPACT);
	_cleanup_free_ char *line = xasprintf("%s\n", s ? s : "{}");
	free(s);
	if (strlen(line) > CTL_LINE_MAX)
		return sbx_err_set(err, SBX_E_USAGE,
				   "the request to the supervisor of sandbox '%s' is too long (%zu "
				   "bytes, at most %d): a shorter allow list, or *.DOMAIN patterns",
				   label, strlen(line), CTL_LINE_MAX);
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
	*ret = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (!*ret)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "the supervisor of sandbox '%s' gave no "
				   "answer",
				   label);
	return 0;
}

int local_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		  const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;

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
	/* gVisor's own network stack is no namespace the supervisor can dial into */
	if (!o->rm && local_gvisor(rec) && local_gvisor_netstack(&rec->config))
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"sandbox '%s' runs gVisor's own network stack (--runtime gvisor "
			"--net none, run by root), which a preview cannot reach: make it "
			"with --net allow= for a sandbox without egress that previews reach",
			label);
	local_touch_activity(rec->dir);
	_cleanup_json_ json_t *req = json_pack(
		"{s:s, s:i, s:i, s:b, s:b}", "op", o->rm ? "preview-rm" : "preview", "port",
		o->port, "host_port", o->host_port, "public", o->public, "no_auth", o->no_auth);
	_cleanup_json_ json_t *resp = NULL;
	if (local_ctl_call(rec, req, &resp, err) < 0)
		return -1;
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

/* --- sbx update ---------------------------------------------------------------------------- */

json_t *local_policy_entry(const struct sbx_config *c)
{
	static const char *const modes[] = { "allow", "none", "open", "host" };
	const struct sbx_net_config *n = &c->net;
	char t[64];
	long long now = sbx_now_ms();
	time_t sec = (time_t)(now / 1000);
	struct tm tm;
	json_t *allow = json_array();

	gmtime_r(&sec, &tm);
	size_t l = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + l, sizeof(t) - l, ".%03lldZ", now % 1000);
	for (size_t i = 0; i < n->n_allow; i++)
		json_array_append_new(allow,
				      n->allow[i].port ? json_sprintf("%s:%d", n->allow[i].pattern,
								      n->allow[i].port)
						       : json_string(n->allow[i].pattern));
	return json_pack("{s:s, s:s, s:s, s:o, s:b, s:o}", "time", t, "policy", "update", "mode",
			 modes[n->mode], "allow", allow, "preset", n->preset, "rates",
			 sbx_net_rates_json(n));
}

static const char *mode_text(const struct sbx_net_config *n)
{
	static const char *const modes[] = { "allow=...", "none", "open", "host" };

	return modes[n->mode];
}

int local_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		 struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	const struct sbx_net_config *old = &rec->config.net, *new = &c->net;
	bool live = rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED;

	(void)ctx;
	/* the namespace a sandbox runs in was made with the proxy or without it */
	if (live &&
	    (proxied(rec) !=
		     (new->set && (new->mode == SBX_NET_ALLOW || new->mode == SBX_NET_OPEN)) ||
	     (old->mode == SBX_NET_HOST) != (new->mode == SBX_NET_HOST)))
		return sbx_err_set(
			err, SBX_E_STATE,
			"sandbox '%s' runs with --net %s, set up %s the egress proxy: it "
			"cannot switch to --net %s while it runs (stop it with 'sbx "
			"pause --release %s', update it, then resume it)",
			label, mode_text(old), proxied(rec) ? "with" : "without", mode_text(new),
			label);
	/* the policy alone goes (a control request is short): a configuration of it alone */
	struct sbx_config only;
	sbx_config_init(&only);
	only.net = c->net; /* borrowed, not released */
	_cleanup_json_ json_t *opts = sbx_config_to_json(&only);
	_cleanup_json_ json_t *req = json_pack("{s:s, s:O}", "op", "net-update", "options", opts);
	if (!live) {
		/* nothing runs to tell: the record alone (the next boot reads it), and the log */
		_cleanup_free_ char *p = local_egress_log_at(rec->dir, "");
		json_t *e = local_policy_entry(c);
		char *s = e ? json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(e);
		_cleanup_close_ int fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		_cleanup_free_ char *line = xasprintf("%s\n", s ? s : "{}");
		free(s);
		if (fd >= 0)
			(void)sbx_write_all(fd, line, strlen(line));
		return 0;
	}
	if (!proxied(rec))
		return 0; /* none stays none */
	_cleanup_json_ json_t *resp = NULL;
	if (local_ctl_call(rec, req, &resp, err) < 0)
		return -1;
	if (!json_is_true(json_object_get(resp, "ok")))
		return sbx_err_set(err, SBX_E_SYSTEM, "%s",
				   sbx_json_str(resp, "error") ?: "the update failed");
	return 0;
}

bool local_secrets_changed(const struct sbx_record *rec, const struct sbx_config *c)
{
	_cleanup_json_ json_t *was = sbx_secrets_json(&rec->config), *now = sbx_secrets_json(c);
	bool changed = !json_equal(was, now);

	for (size_t i = 0; i < c->n_secrets && !changed; i++)
		changed = sbx_secret_value(&c->secrets[i]) != NULL; /* read again: rotated */
	return changed;
}

int local_secrets_update(const struct sbx_record *rec, const struct sbx_config *c, bool live,
			 struct sbx_err *err)
{
	if (local_secrets_write(rec, c, err) < 0)
		return -1;
	if (!live || !proxied(rec))
		return 0; /* the next boot reads them */
	_cleanup_json_ json_t *req = json_pack("{s:s}", "op", "secrets");
	_cleanup_json_ json_t *resp = NULL;
	if (local_ctl_call(rec, req, &resp, err) < 0)
		return -1;
	if (!json_is_true(json_object_get(resp, "ok")))
		return sbx_err_set(err, SBX_E_SYSTEM, "%s",
				   sbx_json_str(resp, "error") ?: "the update failed");
	return 0;
}

/* one entry of the egress log refused for exec id: "host:port (why)" into *sb */
static bool refusal_of(const char *line, const char *id, char *out, size_t len)
{
	_cleanup_json_ json_t *j = json_loads(line, 0, NULL);
	const char *ex = sbx_json_str(j, "exec"), *v = sbx_json_str(j, "verdict");
	const char *dom = sbx_json_str(j, "domain"), *why = sbx_json_str(j, "reason");

	if (!ex || !v || !dom || !streq(ex, id) || !streq(v, "deny"))
		return false;
	why = !why			    ? "refused"
		: strstr(why, "allow list") ? "not allowed"
		: strstr(why, "rate limit") ? "over the rate limit"
		: strstr(why, "address")    ? "a forbidden address"
		: strstr(why, "credential") ? "a bad credential"
					    : "refused";
	snprintf(out, len, "%s:%lld (%s)", dom, sbx_json_int(j, "port", 0), why);
	return true;
}

void local_net_exec_watch(const struct sbx_record *rec, struct local_exec_watch *w)
{
	*w = (struct local_exec_watch){ .fd = -1 };
	if (!proxied(rec))
		return;
	/* opened here, on the host, before exec joins the sandbox (where the path would name
	 * something else, and the file could not be opened); created empty when no request was
	 * logged yet, as the supervisor would */
	_cleanup_free_ char *p = local_egress_log_at(rec->dir, "");
	w->fd = open(p, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	if (w->fd >= 0 &&
	    (fstat(w->fd, &st) < 0 || !S_ISREG(st.st_mode) || lseek(w->fd, 0, SEEK_END) < 0)) {
		close(w->fd);
		w->fd = -1;
	}
}

/* the line saying which requests of exec id the log text shows refused, or NULL */
static char *refusals_line(const struct sbx_record *rec, const char *id, char *text)
{
	size_t n = 0, k = 0; /* refusals, and the different ones kept */
	char shown[3][300];

	for (char *l = text; l && *l;) {
		char *nl = strchr(l, '\n'), entry[300];
		if (nl)
			*nl = 0;
		/* a cheap test first: most lines are another exec's */
		if (strstr(l, id) && refusal_of(l, id, entry, sizeof(entry))) {
			bool dup = false;
			for (size_t i = 0; i < k && i < ARRAY_SIZE(shown); i++)
				dup = dup || streq(shown[i], entry);
			if (!dup && k < ARRAY_SIZE(shown))
				snprintf(shown[k++], sizeof(shown[0]), "%s", entry);
			else if (!dup)
				k = ARRAY_SIZE(shown) + 1; /* more than shown */
			n++;
		}
		l = nl ? nl + 1 : l + strlen(l);
	}
	if (n == 0)
		return NULL;
	char list[1000] = "";
	size_t m = k < ARRAY_SIZE(shown) ? k : ARRAY_SIZE(shown);
	for (size_t i = 0; i < m; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
			 shown[i]);
	const char *label = rec->name ? rec->name : rec->id;
	/* a domain the allow list lacks: the command that adds it */
	_cleanup_free_ char *advice = strstr(list, "(not allowed)")
		? xasprintf(" (sbx update %s --net-allow DOMAIN allows one)", label)
		: xstrdup("");
	return xasprintf("sbx: %zu request%s %s refused by the egress policy: %s%s; see sbx logs "
			 "--egress %s%s",
			 n, n == 1 ? "" : "s", n == 1 ? "was" : "were", list, k > m ? ", ..." : "",
			 label, advice);
}

void local_net_exec_refusals(const struct sbx_record *rec, struct local_exec_watch *w,
			     char *const *env)
{
	const char *id = NULL;

	for (; env && *env && !id; env++)
		if (startswith(*env, "SBX_EXEC_ID="))
			id = *env + strlen("SBX_EXEC_ID=");
	if (id && w->fd >= 0) {
		/* what was logged since the exec started (a rotation meanwhile: up to it) */
		_cleanup_free_ char *text = sbx_read_fd(w->fd, 8 << 20, NULL);
		_cleanup_free_ char *line = refusals_line(rec, id, text);
		/* names the sandbox asked for: whatever bytes they hold, they cannot drive the
		 * caller's terminal */
		_cleanup_free_ char *safe = line ? sbx_term_safe_n(line, strlen(line)) : NULL;
		if (safe)
			fprintf(stderr, "%s\n", safe);
	}
	local_net_exec_unwatch(w);
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
	char line[64];

	snprintf(line, sizeof(line), "{\"op\":\"exec\",\"pid\":%d}\n", (int)pid);
	if (send_line(ctl, line, sbx_now_ms() + EXEC_REG_TIMEOUT_MS) < 0)
		sbx_debug("exec: cannot register with the supervisor: %s", strerror(errno));
}
