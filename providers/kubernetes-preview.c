/* Kubernetes previews: a small forwarding process of sbx's (forked by sbx preview, detached)
 * listens on 127.0.0.1, lets in a client that has sbx's own token (the URL's sbx_token, then a
 * cookie, or an X-Sbx-Preview-Token header) and forwards each request to the pod's proxy
 * subresource (.../pods/POD:PORT/proxy/PATH) with the kubeconfig's credentials, which never
 * leave this process. One request per connection, 16 connections at a time, each bounded in
 * size and time; the process ends with preview --rm, with rm, or once the record is gone. */
#define _GNU_SOURCE
#include "providers/kubernetes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/proc.h"
#include "providers/local/net.h"

#define BODY_MAX (1LL << 40) /* streamed: a bound only against nonsense */
#define IO_TIMEOUT_S 30
#define CHECK_MS 5000
#define CONNS_MAX 16   /* connections served at once */
#define CONN_MAX_S 120 /* the most one connection may take */

static char *state_path(const struct sbx_record *rec, int port)
{
	return xasprintf("%s/kube-preview-%d.json", rec->dir, port);
}

static json_t *state_load(const struct sbx_record *rec, int port)
{
	_cleanup_free_ char *p = state_path(rec, port);
	size_t n = 0;
	_cleanup_free_ char *t = sbx_read_file(p, 65536, &n);
	json_error_t je;
	json_t *j = t ? json_loadb(t, n, 0, &je) : NULL;
	long long pid = sbx_json_int(j, "pid", 0), start = sbx_json_int(j, "start", 0);
	if (j && (pid <= 0 || !sbx_proc_alive((pid_t)pid, (unsigned long long)start))) {
		json_decref(j);
		(void)unlink(p);
		return NULL;
	}
	return j;
}

/* the object sbx preview prints */
static json_t *preview_json(const json_t *st)
{
	int hp = (int)sbx_json_int(st, "host_port", 0);
	const char *tok = sbx_json_str(st, "token");
	_cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/?sbx_token=%s", hp, tok);
	return json_pack("{s:s, s:I, s:i, s:b, s:b, s:s, s:n}", "url", url, "port",
			 sbx_json_int(st, "port", 0), "host_port", hp, "public", 0, "auth", 1,
			 "token", tok, "upstream");
}

static void stop(const json_t *st)
{
	long long pid = sbx_json_int(st, "pid", 0), start = sbx_json_int(st, "start", 0);
	if (pid > 0 && sbx_proc_alive((pid_t)pid, (unsigned long long)start))
		(void)kill((pid_t)pid, SIGTERM);
}

/* --- the forwarding process --------------------------------------------------------------- */

static void answer(int c, int code, const char *reason, const char *extra, const char *ctype,
		   const char *body, size_t n)
{
	_cleanup_free_ char *h = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: "
					   "%zu\r\nConnection: close\r\n%s\r\n",
					   code, reason, ctype ? ctype : "text/plain", n,
					   extra ? extra : "");
	if (sbx_write_all(c, h, strlen(h)) == 0 && n)
		(void)sbx_write_all(c, body, n);
}

static void text(int c, int code, const char *reason, const char *msg)
{
	answer(c, code, reason, NULL, "text/plain", msg, strlen(msg));
}

/* the client's headers that go on to the pod (never its Authorization: the cluster's goes) */
static const char *const passed[] = {
	"accept",
	"accept-language",
	"cache-control",
	"content-encoding",
	"content-type",
	"if-match",
	"if-modified-since",
	"if-none-match",
	"if-range",
	"if-unmodified-since",
	"origin",
	"range",
	"referer",
	"user-agent",
	"x-requested-with",
};

/* the pod's headers that come back (Location rewritten, Set-Cookie each) */
static const char *const returned[] = {
	"accept-ranges",
	"cache-control",
	"content-disposition",
	"content-encoding",
	"content-language",
	"content-length",
	"content-range",
	"content-type",
	"etag",
	"expires",
	"last-modified",
	"location",
	"set-cookie",
	"vary",
	"www-authenticate",
};

static int hexval(int c)
{
	return c >= '0' && c <= '9'    ? c - '0'
		: c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10
				       : -1;
}

bool kube_preview_path_ok(const char *t, size_t n)
{
	size_t plen = 0;

	if (!n || t[0] != '/')
		return false;
	while (plen < n && t[plen] != '?' && t[plen] != '#')
		plen++;
	/* the path decoded once (%2e is '.', %2f is '/'), then no segment may be . or .. */
	struct strbuf d = STRBUF_INIT;
	bool ok = true;
	for (size_t i = 0; i < plen && ok; i++) {
		unsigned char ch = (unsigned char)t[i];
		if (ch == '%') {
			int hi = i + 2 < plen ? hexval(t[i + 1]) : -1;
			int lo = i + 2 < plen ? hexval(t[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				ok = false;
				break;
			}
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		/* a backslash is a separator to some servers; NUL and controls are nobody's */
		if (ch == '\\' || ch < 0x20 || ch == 0x7f)
			ok = false;
		strbuf_addch(&d, (char)ch);
	}
	const char *s = d.buf ? d.buf : "";
	for (const char *seg = s; ok && seg;) {
		const char *sl = strchr(seg, '/');
		size_t sn = sl ? (size_t)(sl - seg) : strlen(seg);
		if ((sn == 1 && seg[0] == '.') || (sn == 2 && seg[0] == '.' && seg[1] == '.'))
			ok = false;
		seg = sl ? sl + 1 : NULL;
	}
	strbuf_release(&d);
	return ok;
}

char *kube_preview_location(const char *loc, const char *server, const char *prefix)
{
	size_t sl = strlen(server), pl = strlen(prefix);
	const char *rest = NULL;

	/* the apiserver's proxy writes the pod's "/x" as its own URL: back to the preview's */
	if (!strncmp(loc, server, sl) && !strncmp(loc + sl, prefix, pl))
		rest = loc + sl + pl;
	else if (!strncmp(loc, prefix, pl))
		rest = loc + pl;
	if (rest && (*rest == '/' || *rest == '?' || *rest == '#' || !*rest))
		return *rest == '/' ? xstrdup(rest) : xasprintf("/%s", rest);
	return xstrdup(loc);
}

char *kube_preview_cookie(const char *v, size_t n)
{
	struct strbuf out = STRBUF_INIT;
	const char *end = v + n;

	while (v < end) {
		const char *e = memchr(v, ';', (size_t)(end - v));
		if (!e)
			e = end;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		/* sbx's own token stays here */
		bool own = (size_t)(e - v) > 17 && !strncmp(v, "sbx_preview_token", 17) &&
			(v[17] == '=' || v[17] == '_');
		if (!own && e > v) {
			if (out.len)
				strbuf_addstr(&out, "; ");
			strbuf_add(&out, v, (size_t)(e - v));
		}
		v = e + 1;
	}
	return out.len ? strbuf_detach(&out) : (strbuf_release(&out), NULL);
}

/* one relayed exchange: the client's socket, what of its body came with the head */
struct relay {
	int c;
	const char *early; /* body bytes read with the head */
	size_t early_len, early_off;
	const char *server, *prefix;
	bool head_sent;
};

static ssize_t relay_read(char *buf, size_t n, void *arg)
{
	struct relay *r = arg;
	if (r->early_off < r->early_len) {
		size_t k = r->early_len - r->early_off < n ? r->early_len - r->early_off : n;
		memcpy(buf, r->early + r->early_off, k);
		r->early_off += k;
		return (ssize_t)k;
	}
	ssize_t k;
	do
		k = read(r->c, buf, n);
	while (k < 0 && errno == EINTR);
	return k;
}

/* a header value from the cluster, for the client: printable bytes only */
static bool value_ok(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			return false;
	return true;
}

static bool relay_head(long status, const json_t *list, void *arg)
{
	struct relay *r = arg;
	struct strbuf h = STRBUF_INIT;
	size_t i;
	json_t *kv;

	if (status < 100 || status > 999)
		status = 502;
	strbuf_addf(&h, "HTTP/1.1 %ld Proxied\r\n", status);
	json_array_foreach (list, i, kv) {
		const char *k = json_string_value(json_array_get(kv, 0));
		const char *v = json_string_value(json_array_get(kv, 1));
		bool keep = false;
		for (size_t j = 0; k && v && j < ARRAY_SIZE(returned); j++)
			keep = keep || streq(k, returned[j]);
		if (!keep || !value_ok(v))
			continue;
		if (streq(k, "location")) {
			_cleanup_free_ char *l = kube_preview_location(v, r->server, r->prefix);
			strbuf_addf(&h, "Location: %s\r\n", l);
		} else {
			strbuf_addf(&h, "%s: %s\r\n", k, v);
		}
	}
	strbuf_addstr(&h, "Connection: close\r\n\r\n");
	int w = sbx_write_all(r->c, h.buf, h.len);
	strbuf_release(&h);
	r->head_sent = true;
	return w == 0;
}

static bool relay_body(const char *p, size_t n, void *arg)
{
	struct relay *r = arg;
	return sbx_write_all(r->c, p, n) == 0;
}

static void serve_one(struct kube *k, const char *pod, int port, const char *token, int c)
{
	char head[LOCAL_HEAD_MAX + 1];
	size_t len = 0, hl = 0;

	while (!hl) {
		if (len == LOCAL_HEAD_MAX)
			return text(c, 431, "Request Header Fields Too Large",
				    "sbx: head too long\n");
		ssize_t r = read(c, head + len, LOCAL_HEAD_MAX - len);
		if (r <= 0)
			return;
		size_t was = len;
		len += (size_t)r;
		hl = local_http_head_len(head, len, was);
	}
	head[len] = 0;
	_cleanup_free_ char *loc = NULL;
	switch (local_preview_token(head, hl, token, &loc)) {
	case LOCAL_TOKEN_OK:
		break;
	case LOCAL_TOKEN_REDIRECT: {
		_cleanup_free_ char *hdr = xasprintf(
			"Location: %s\r\nSet-Cookie: sbx_preview_token_%d=%s; HttpOnly; Path=/; "
			"SameSite=Lax\r\n",
			loc, port, token);
		return answer(c, 302, "Found", hdr, "text/plain", "sbx: signed in\n", 15);
	}
	case LOCAL_TOKEN_BAD:
		return text(c, 400, "Bad Request", "sbx: this preview takes HTTP/1.x requests\n");
	default:
		return text(c, 401, "Unauthorized", "sbx: this preview needs its token\n");
	}
	struct local_http_req q;
	if (local_http_head_parse(head, hl, &q) < 0 || !q.target_len || head[q.target_off] != '/')
		return text(c, 400, "Bad Request", "sbx: malformed request\n");
	/* the pod's proxy and nothing above it: no dot segments, however written */
	if (!kube_preview_path_ok(head + q.target_off, q.target_len))
		return text(
			c, 400, "Bad Request",
			"sbx: the path has a '.' or '..' segment, which this preview refuses\n");
	size_t vl = 0;
	if (local_http_header(head, hl, "transfer-encoding", &vl))
		return text(c, 411, "Length Required", "sbx: send a Content-Length\n");
	const char *cl = local_http_header(head, hl, "content-length", &vl);
	long long blen = 0;
	_cleanup_free_ char *cls = cl ? xstrndup(cl, vl) : NULL;
	if (cls && sbx_parse_int(cls, 0, BODY_MAX, &blen) < 0)
		return text(c, 413, "Payload Too Large", "sbx: body too large\n");
	/* the request, with the cluster's credentials and a few of the client's headers */
	const char *hdrs[ARRAY_SIZE(passed) + 3];
	char *own[ARRAY_SIZE(passed) + 1] = { 0 };
	size_t nh = 0;
	const char *tok = NULL;
	struct sbx_err err = { 0 };
	if (sbx_kubeconfig_token(&k->kc, &tok, &err) < 0)
		return text(c, 502, "Bad Gateway", "sbx: no credentials for the cluster\n");
	_cleanup_free_ char *auth = tok ? xasprintf("Authorization: Bearer %s", tok) : NULL;
	if (auth)
		hdrs[nh++] = auth;
	for (size_t i = 0; i < ARRAY_SIZE(passed); i++) {
		const char *v = local_http_header(head, hl, passed[i], &vl);
		if (v)
			hdrs[nh++] = own[i] = xasprintf("%s: %.*s", passed[i], (int)vl, v);
	}
	/* the app's cookies go on; sbx's token does not */
	const char *ck = local_http_header(head, hl, "cookie", &vl);
	_cleanup_free_ char *cookies = ck ? kube_preview_cookie(ck, vl) : NULL;
	if (cookies)
		hdrs[nh++] = own[ARRAY_SIZE(passed)] = xasprintf("Cookie: %s", cookies);
	hdrs[nh] = NULL;
	_cleanup_free_ char *target = xstrndup(head + q.target_off, q.target_len);
	struct strbuf pre = STRBUF_INIT;
	strbuf_addstr(&pre, "/api/v1/namespaces/");
	sbx_url_escape(&pre, k->ns);
	strbuf_addstr(&pre, "/pods/");
	sbx_url_escape(&pre, pod);
	strbuf_addf(&pre, ":%d/proxy", port);
	_cleanup_free_ char *url = xasprintf("%s%s%s", k->r.api, pre.buf, target);
	struct relay rl = { .c = c,
			    .early = head + hl,
			    .early_len = len - hl < (size_t)blen ? len - hl : (size_t)blen,
			    .server = k->r.api,
			    .prefix = pre.buf };
	struct sbx_http_req r = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	r.method = q.method;
	r.url = url;
	r.headers = hdrs;
	if (blen) {
		r.read_body = relay_read;
		r.body_size = blen;
	}
	r.on_head = relay_head;
	r.on_data = relay_body;
	r.arg = &rl;
	r.path_as_is = true; /* what was checked above is what is asked for */
	r.timeout_ms = CONN_MAX_S * 1000LL;
	r.setup = sbx_kubeconfig_curl_setup;
	r.setup_arg = &k->kc;
	if (sbx_http_perform(&r, &resp, "Kubernetes", &err) < 0 && !rl.head_sent) {
		_cleanup_free_ char *m = xasprintf("sbx: %s\n", err.msg);
		text(c, 502, "Bad Gateway", m);
	}
	sbx_http_resp_release(&resp);
	strbuf_release(&pre);
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		free(own[i]);
}

/* each connection in a child of its own (at most CONNS_MAX at once, each ended after
 * CONN_MAX_S), so that a slow client holds up no other */
static void serve(struct kube *k, const char *pod, int port, const char *token, int lfd,
		  const char *record)
{
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	int live = 0;

	for (;;) {
		while (live > 0 && waitpid(-1, NULL, WNOHANG) > 0)
			live--;
		struct pollfd p = { .fd = lfd, .events = live < CONNS_MAX ? POLLIN : 0 };
		int r = poll(&p, 1, live < CONNS_MAX ? CHECK_MS : 100);
		if (access(record, F_OK) < 0)
			_exit(0); /* the sandbox was removed */
		if (r <= 0 || live >= CONNS_MAX)
			continue;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		(void)setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		pid_t child = fork();
		if (child == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(lfd);
			alarm(CONN_MAX_S);
			serve_one(k, pod, port, token, c);
			_exit(0);
		}
		if (child > 0)
			live++;
		close(c);
	}
}

/* the forwarder, detached: its pid and start time through the pipe */
static int spawn(struct kube *k, const struct sbx_record *rec, int port, const char *token, int lfd,
		 pid_t *ret_pid, struct sbx_err *err)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot make a pipe");
	_cleanup_free_ char *record = xasprintf("%s/sandbox.json", rec->dir);
	pid_t a = fork();
	if (a < 0)
		return sbx_err_errno(err, "cannot fork");
	if (a == 0) {
		(void)setsid();
		pid_t b = fork();
		if (b != 0)
			_exit(b < 0);
		pid_t me = getpid();
		(void)!write(pfd[1], &me, sizeof(me));
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			(void)dup2(nul, 0);
			(void)dup2(nul, 1);
			(void)dup2(nul, 2);
		}
		if (dup2(lfd, 3) < 0)
			_exit(1);
		(void)close_range(4, ~0U, 0); /* the record's lock, the pipe, the caller's */
		struct sigaction sa = { .sa_handler = SIG_IGN };
		(void)sigaction(SIGPIPE, &sa, NULL);
		(void)sigaction(SIGHUP, &sa, NULL);
		sa.sa_handler = SIG_DFL;
		(void)sigaction(SIGTERM, &sa, NULL);
		(void)sigaction(SIGINT, &sa, NULL);
		serve(k, kube_pod(rec), port, token, 3, record);
		_exit(0);
	}
	close(pfd[1]);
	int st;
	while (waitpid(a, &st, 0) < 0 && errno == EINTR)
		;
	pid_t pid = 0;
	ssize_t n = read(pfd[0], &pid, sizeof(pid));
	close(pfd[0]);
	if (n != sizeof(pid) || pid <= 0)
		return sbx_err_set(err, SBX_E_SYSTEM, "the preview's forwarder did not start");
	*ret_pid = pid;
	return 0;
}

static int open_preview(const struct sbx_record *rec, int port, json_t **ret, struct sbx_err *err)
{
	_cleanup_(kube_close) struct kube k = { 0 };
	_cleanup_close_ int lfd = -1;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char token[LOCAL_TOKEN_LEN + 1];

	if (kube_open(&k, rec, err) < 0)
		return -1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		return sbx_err_errno(err, "cannot listen on 127.0.0.1 for the preview");
	remote_random_hex(token, LOCAL_TOKEN_LEN);
	pid_t pid = 0;
	if (spawn(&k, rec, port, token, lfd, &pid, err) < 0)
		return -1;
	unsigned long long start = 0;
	(void)sbx_proc_starttime(pid, &start);
	_cleanup_json_ json_t *st = json_pack(
		"{s:i, s:i, s:I, s:I, s:s}", "port", port, "host_port", (int)ntohs(sa.sin_port),
		"pid", (json_int_t)pid, "start", (json_int_t)start, "token", token);
	_cleanup_free_ char *s = json_dumps(st, JSON_COMPACT);
	_cleanup_free_ char *p = state_path(rec, port);
	if (sbx_write_atomic(p, s, strlen(s), false, err) < 0) {
		stop(st);
		return -1;
	}
	*ret = preview_json(st);
	return 0;
}

static size_t ports_of(const struct sbx_record *rec, int *ports, size_t max);

int kube_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		 const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	if (remote_need_id("Kubernetes", rec, err) < 0)
		return -1;
	if (!o->port) {
		json_t *a = json_array();
		int ports[256];
		size_t n = ports_of(rec, ports, ARRAY_SIZE(ports));
		for (size_t i = 0; i < n; i++) {
			_cleanup_json_ json_t *st = state_load(rec, ports[i]);
			if (st)
				json_array_append_new(a, preview_json(st));
		}
		*ret = a;
		return 0;
	}
	_cleanup_json_ json_t *st = state_load(rec, o->port);
	if (o->rm) {
		if (!st)
			return sbx_err_set(err, SBX_E_NOTFOUND,
					   "sandbox '%s' has no preview of port %d",
					   remote_label(rec), o->port);
		stop(st);
		_cleanup_free_ char *p = state_path(rec, o->port);
		(void)unlink(p);
		return 0;
	}
	if (remote_check_running("Kubernetes", rec, err) < 0)
		return -1;
	if (st) {
		*ret = preview_json(st);
		return 0;
	}
	return open_preview(rec, o->port, ret, err);
}

/* the ports with a preview's state file, at most max */
static size_t ports_of(const struct sbx_record *rec, int *ports, size_t max)
{
	DIR *d = rec->dir ? opendir(rec->dir) : NULL;
	struct dirent *e;
	size_t n = 0;
	while (d && n < max && (e = readdir(d))) {
		long long port;
		if (!startswith(e->d_name, "kube-preview-"))
			continue;
		_cleanup_free_ char *s = xstrndup(e->d_name + 13, strcspn(e->d_name + 13, "."));
		if (sbx_parse_int(s, 1, 65535, &port) == 0)
			ports[n++] = (int)port;
	}
	if (d)
		closedir(d);
	return n;
}

void kube_previews_stop(const struct sbx_record *rec)
{
	int ports[256];
	size_t n = ports_of(rec, ports, ARRAY_SIZE(ports));
	for (size_t i = 0; i < n; i++) {
		_cleanup_json_ json_t *st = state_load(rec, ports[i]);
		if (st)
			stop(st);
	}
}
