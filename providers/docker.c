/* The Docker provider: the daemon's address (DOCKER_HOST), its calls and errors, and the
 * container's life (create with its image, states, pause, release, preview, rm); exec and cp
 * are providers/docker-exec.c. */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/image.h"
#include "core/log.h"
#include "providers/fwd.h"
#include "providers/remote.h"

#define CONTROL_TIMEOUT_MS 30000
#define LIST_TIMEOUT_MS 5000
#define CREATE_TIMEOUT_MS 120000
#define DEFAULT_SOCKET "/var/run/docker.sock"
/* the container's init: sleeps, and ends at once on SIGTERM (stop, release) */
#define INIT_SCRIPT "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"

/* --- the daemon's address ------------------------------------------------------------------ */

void docker_release(struct docker *d)
{
	free(d->host);
	free(d->root);
	free(d->sock);
	free(d->ca);
	free(d->cert);
	free(d->key);
	memset(d, 0, sizeof(*d));
}

bool docker_is_local(const struct docker *d)
{
	return d->sock != NULL;
}

/* DOCKER_HOST's forms: unix://PATH, tcp://HOST:PORT (TLS with DOCKER_TLS_VERIFY, the files
 * in DOCKER_CERT_PATH or ~/.docker, as docker's CLI reads them) */
static int parse_host(struct docker *d, const char *host, struct sbx_err *err)
{
	d->host = xstrdup(host);
	if (!strncmp(host, "unix://", 7)) {
		if (host[7] != '/')
			return sbx_err_set(err, SBX_E_CONFIG,
					   "invalid DOCKER_HOST '%s': unix:// takes an absolute "
					   "path",
					   host);
		d->sock = xstrdup(host + 7);
		d->root = xstrdup("http://docker");
		return 0;
	}
	if (!strncmp(host, "tcp://", 6)) {
		const char *hp = host + 6;
		size_t n = strcspn(hp, "/?#");
		if (!n || !memchr(hp, ':', n) || (hp[n] && !(hp[n] == '/' && !hp[n + 1])))
			return sbx_err_set(err, SBX_E_CONFIG,
					   "invalid DOCKER_HOST '%s': tcp:// takes HOST:PORT",
					   host);
		const char *v = getenv("DOCKER_TLS_VERIFY");
		if (v && *v) {
			const char *cp = getenv("DOCKER_CERT_PATH"), *home = getenv("HOME");
			_cleanup_free_ char *dir = cp && *cp
				? xstrdup(cp)
				: xasprintf("%s/.docker", home ? home : "");
			d->ca = xasprintf("%s/ca.pem", dir);
			d->cert = xasprintf("%s/cert.pem", dir);
			d->key = xasprintf("%s/key.pem", dir);
			d->root = xasprintf("https://%.*s", (int)n, hp);
		} else {
			d->root = xasprintf("http://%.*s", (int)n, hp);
			d->insecure = true; /* the user chose a daemon without TLS */
		}
		return 0;
	}
	if (sbx_dial_is_ssh(host)) {
		/* docker system dial-stdio on the remote, as docker's client does (core/dial.c) */
		if (sbx_dial_shared(host, &d->dial, err) < 0)
			return -1;
		d->root = xstrdup("http://docker");
		return 0;
	}
	return sbx_err_set(err, SBX_E_CONFIG,
			   "invalid DOCKER_HOST '%s': use unix:///PATH, tcp://HOST:PORT or "
			   "ssh://[USER@]HOST[:PORT]",
			   host);
}

int docker_init_host(struct docker *d, const char *host, const char *version, struct sbx_err *err)
{
	memset(d, 0, sizeof(*d));
	if (!host || !*host)
		host = getenv("DOCKER_HOST");
	if (!host || !*host)
		host = "unix://" DEFAULT_SOCKET;
	snprintf(d->version, sizeof(d->version), "%s",
		 version && strlen(version) < sizeof(d->version) ? version : DOCKER_API_VERSION);
	if (parse_host(d, host, err) < 0) {
		docker_release(d);
		return -1;
	}
	return 0;
}

int docker_init(struct docker *d, const struct sbx_record *rec, struct sbx_err *err)
{
	return docker_init_host(d, rec ? sbx_json_str(rec->extra, "docker_host") : NULL,
				rec ? sbx_json_str(rec->extra, "api_version") : NULL, err);
}

bool docker_is_podman(const struct sbx_record *rec)
{
	return streq(sbx_json_str(rec->extra, "engine") ?: "", "podman");
}

json_t *docker_text(const char *s, const char *what, struct sbx_err *err)
{
	json_t *j = json_string(s);

	if (!j) {
		/* JSON strings are Unicode: the daemon would read such bytes as U+FFFD */
		_cleanup_free_ char *safe = sbx_term_safe(s);
		sbx_err_set(
			err, SBX_E_USAGE,
			"%s%s'%.80s' is not valid UTF-8: the Docker Engine API carries text only",
			what ? what : "", what ? " " : "", safe);
	}
	return j;
}

json_t *docker_env(char *const *env, const char *opt, struct sbx_err *err)
{
	json_t *a = json_array();

	for (size_t i = 0; env && env[i]; i++) {
		_cleanup_free_ char *kv = NULL;
		_cleanup_free_ char *what = NULL;
		if (strchr(env[i], '=')) {
			kv = xstrdup(env[i]);
			what = xasprintf("variable %zu of %s", i + 1, opt);
		} else {
			const char *v = getenv(env[i]);
			if (!v)
				continue; /* -e NAME of a variable the caller does not have */
			kv = xasprintf("%s=%s", env[i], v);
			what = xasprintf("variable %zu of %s, from the environment,", i + 1, opt);
		}
		json_t *s = docker_text(kv, what, err);
		if (!s) {
			json_decref(a);
			return NULL;
		}
		json_array_append_new(a, s);
	}
	return a;
}

char *docker_url(const struct docker *d, const char *path)
{
	return xasprintf("%s/v%s%s", d->root, d->version, path);
}

void docker_req_init(const struct docker *d, struct sbx_http_req *q, const char *url)
{
	/* the transport of every request: a unix socket, TCP, or TLS with the client's
	 * certificate; a transport of another kind (ssh) is chosen here too */
	*q = (struct sbx_http_req)SBX_HTTP_REQ_INIT;
	q->url = url;
	q->unix_socket = d->sock;
	q->insecure = d->insecure;
	q->tls_ca = d->ca;
	q->tls_cert = d->cert;
	q->tls_key = d->key;
	q->tls_hint = d->ca ? " (check DOCKER_CERT_PATH's ca.pem, cert.pem and key.pem)" : NULL;
	q->dial = d->dial;
	q->session = d->dial ? d->dial->session : NULL;
}

int docker_unreachable(const struct docker *d, struct sbx_err *err)
{
	/* ssh's own line says it best */
	if (d->dial && startswith(err->msg, "ssh to "))
		return -1;
	/* libcurl's reason, without the host it names (for a socket, a made-up one) */
	const char *why = err->msg, *p;
	while ((p = strstr(why, ": ")))
		why = p + 2;
	_cleanup_free_ char *w = xstrdup(why);
	if (d->sock && access(d->sock, F_OK) < 0) {
		free(w);
		w = xasprintf("%s", strerror(errno));
	}
	return sbx_err_set(err, SBX_E_NETWORK,
			   "cannot reach the Docker daemon at %s: %s (is dockerd running? "
			   "DOCKER_HOST)",
			   d->host, w);
}

int docker_status_error(const char *what, long status, const struct strbuf *body,
			struct sbx_err *err)
{
	_cleanup_free_ char *m = remote_error_message(body);
	enum sbx_errkind k = status == 404 ? SBX_E_NOTFOUND
		: status == 409		   ? SBX_E_STATE
		: status == 400		   ? SBX_E_USAGE
					   : SBX_E_REMOTE;
	if (*m)
		return sbx_err_set(err, k, "cannot %s: Docker says: %.300s", what, m);
	return sbx_err_set(err, k, "cannot %s: Docker answered HTTP %ld", what, status);
}

long docker_do(const struct docker *d, const struct docker_call *c, json_t **ret,
	       struct sbx_err *err)
{
	_cleanup_free_ char *url = docker_url(d, c->path);
	_cleanup_free_ char *body = c->body ? json_dumps(c->body, JSON_COMPACT) : NULL;
	const char *hdrs[] = { "Content-Type: application/json", NULL };
	struct sbx_http_req q;
	struct sbx_http_resp resp;

	docker_req_init(d, &q, url);
	q.method = c->method;
	q.headers = hdrs;
	q.body = body;
	q.body_len = body ? strlen(body) : 0;
	q.timeout_ms = c->timeout_ms ? c->timeout_ms : CONTROL_TIMEOUT_MS;
	if (sbx_http_perform(&q, &resp, "Docker", err) < 0) {
		sbx_http_resp_release(&resp);
		return err->kind == SBX_E_NETWORK ? docker_unreachable(d, err) : -1;
	}
	long st = resp.status;
	bool ok = st >= 200 && st < 300;
	for (const long *a = c->accept; !ok && a && *a; a++)
		ok = *a == st;
	if (!ok) {
		docker_status_error(c->what, st, &resp.body, err);
		sbx_http_resp_release(&resp);
		return -1;
	}
	if (ret && st >= 200 && st < 300 && resp.body.len) {
		json_error_t je;
		*ret = json_loadb(resp.body.buf, resp.body.len, 0, &je);
		if (!*ret) {
			sbx_http_resp_release(&resp);
			return sbx_err_set(err, SBX_E_REMOTE,
					   "cannot %s: Docker's answer is not JSON", c->what);
		}
	} else if (ret) {
		*ret = NULL;
	}
	sbx_http_resp_release(&resp);
	return st;
}

int docker_need_id(const struct sbx_record *rec, struct sbx_err *err)
{
	return remote_need_id("Docker", rec, err);
}

/* the API version: ours, or the daemon's when it is older; fails when it cannot be reached */
static int negotiate(struct docker *d, struct sbx_err *err)
{
	_cleanup_free_ char *url = xasprintf("%s/version", d->root);
	struct sbx_http_req q;
	struct sbx_http_resp resp;

	docker_req_init(d, &q, url);
	q.timeout_ms = 5000;
	if (sbx_http_perform(&q, &resp, "Docker", err) < 0) {
		sbx_http_resp_release(&resp);
		return docker_unreachable(d, err);
	}
	if (resp.status != 200) {
		int r = docker_status_error("ask the Docker daemon its version", resp.status,
					    &resp.body, err);
		sbx_http_resp_release(&resp);
		return r;
	}
	_cleanup_json_ json_t *j = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
	sbx_http_resp_release(&resp);
	const char *v = sbx_json_str(j, "ApiVersion");
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(j, "Components"), i, c)
		if (streq(sbx_json_str(c, "Name") ?: "", "Podman Engine"))
			d->podman = true;
	int maj, min;
	if (v && sscanf(v, "%d.%d", &maj, &min) == 2 && maj == 1 && min < 41 && min >= 12)
		snprintf(d->version, sizeof(d->version), "1.%d", min);
	return 0;
}

static int docker_ready(struct sbx_err *err)
{
	struct docker d;

	if (docker_init(&d, NULL, err) < 0)
		return -1;
	int r = negotiate(&d, err);
	docker_release(&d);
	return r;
}

static char *docker_api_url(void)
{
	const char *h = getenv("DOCKER_HOST");
	return xstrdup(h && *h ? h : "unix://" DEFAULT_SOCKET);
}

/* --- images: the daemon's, sbx's store's (loaded), or pulled --------------------------------- */

enum pull_show {
	PULL_QUIET,
	PULL_LINES, /* a line per step of each layer (not a terminal) */
	PULL_BAR    /* one line, redrawn (a terminal) */
};

struct pull {
	struct strbuf line;
	char error[300];
	enum pull_show show;
	const char *ref;
	json_t *layers;	 /* id -> {"status", "cur", "total"} */
	long long drawn; /* when the bar was last drawn (0: never) */
};

#define MiB (1024.0 * 1024.0)

/* the daemon's words, printable ASCII only, on a line of their own */
static void pull_print(const char *id, const char *st)
{
	_cleanup_free_ char *s = xasprintf("%s%s%s", id ? id : "", id ? ": " : "", st);
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < ' ' || (unsigned char)*c > '~')
			*c = '?';
	fprintf(stderr, "%s\n", s);
}

/* the bar: layers done of those seen, bytes downloaded of those known */
static void pull_draw(struct pull *pl, bool force)
{
	long long now = sbx_now_ms(), cur = 0, total = 0;
	size_t done = 0;
	const char *id;
	json_t *l;

	if (!force && pl->drawn && now - pl->drawn < 200)
		return;
	pl->drawn = now;
	json_object_foreach (pl->layers, id, l) {
		const char *st = sbx_json_str(l, "status") ?: "";
		long long t = sbx_json_int(l, "total", 0);
		bool got = streq(st, "Download complete") || streq(st, "Verifying Checksum") ||
			startswith(st, "Extracting") || streq(st, "Pull complete") ||
			streq(st, "Already exists");
		total += t;
		cur += got ? t : sbx_json_int(l, "cur", 0);
		done += streq(st, "Pull complete") || streq(st, "Already exists");
	}
	_cleanup_free_ char *ref = sbx_term_safe(pl->ref);
	fprintf(stderr, "\rpulling %.60s: %zu/%zu layers, %.1f/%.1f MiB\033[K", ref, done,
		json_object_size(pl->layers), (double)cur / MiB, (double)total / MiB);
	fflush(stderr);
}

/* one JSON line of a pull or a load: the first error kept, progress shown */
static void pull_one(struct pull *pl, const json_t *j)
{
	const char *e = sbx_json_str(j, "error");
	if (e && !pl->error[0])
		snprintf(pl->error, sizeof(pl->error), "%s", e);
	const char *st = sbx_json_str(j, "status"), *id = sbx_json_str(j, "id");
	if (!st || pl->show == PULL_QUIET)
		return;
	json_t *pd = json_object_get(j, "progressDetail");
	if (!id || !pd) {
		/* "Pulling from library/x", "Digest: sha256:...", "Status: Downloaded ...": the
		 * bar as it ends, then the line below it */
		if (pl->show == PULL_BAR && pl->drawn) {
			pull_draw(pl, true);
			fputc('\n', stderr);
			pl->drawn = 0;
		}
		pull_print(id, st);
		return;
	}
	json_t *l = json_object_get(pl->layers, id);
	if (!l) {
		l = json_object();
		json_object_set_new(pl->layers, id, l);
	}
	bool changed = !streq(sbx_json_str(l, "status") ?: "", st);
	json_object_set_new(l, "status", json_string(st));
	long long cur = sbx_json_int(pd, "current", -1), total = sbx_json_int(pd, "total", -1);
	if (streq(st, "Downloading") && total > 0) {
		json_object_set_new(l, "cur", json_integer(cur > 0 ? cur : 0));
		json_object_set_new(l, "total", json_integer(total));
	}
	if (pl->show == PULL_BAR)
		pull_draw(pl, changed); /* each step drawn, the ticks between at most 5 a second */
	else if (changed)
		pull_print(id, st); /* a step, not each tick of it */
}

/* the JSON lines of a pull or a load, as they come */
static bool pull_line(const char *p, size_t n, void *arg)
{
	struct pull *pl = arg;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n') {
			if (pl->line.len < 65536)
				strbuf_addch(&pl->line, p[i]);
			continue;
		}
		_cleanup_json_ json_t *j = json_loadb(pl->line.buf, pl->line.len, 0, NULL);
		strbuf_reset(&pl->line);
		if (j)
			pull_one(pl, j);
	}
	return true;
}

/* a streamed image call (pull, load) of ref: body_fd sent when >= 0 */
static int image_stream(const struct docker *d, const char *path, const char *ref, int body_fd,
			long long size, const char *what, enum pull_show show, struct sbx_err *err)
{
	_cleanup_free_ char *url = docker_url(d, path);
	const char *hdrs[] = { "Content-Type: application/x-tar", NULL };
	struct pull pl = { .line = STRBUF_INIT, .show = show, .ref = ref, .layers = json_object() };
	struct sbx_http_req q;
	struct sbx_http_resp resp;

	docker_req_init(d, &q, url);
	q.method = "POST";
	q.headers = body_fd >= 0 ? hdrs : NULL;
	q.body_fd = body_fd;
	q.body_size = size;
	q.on_data = pull_line;
	q.arg = &pl;
	q.stall_s = 300;
	int r = sbx_http_perform(&q, &resp, "Docker", err);
	if (r < 0)
		r = err->kind == SBX_E_NETWORK ? docker_unreachable(d, err) : -1;
	else if (resp.status < 200 || resp.status >= 300)
		r = docker_status_error(what, resp.status, &resp.body, err);
	else if (pl.error[0])
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: Docker says: %s", what, pl.error);
	if (pl.show == PULL_BAR && pl.drawn) {
		if (r == 0)
			pull_draw(&pl, true);
		fputc('\n', stderr); /* an error line goes below the bar */
	}
	sbx_http_resp_release(&resp);
	strbuf_release(&pl.line);
	json_decref(pl.layers);
	return r;
}

/* sbx's store's image ref as a docker save archive, loaded into the daemon */
static int load_from_store(struct sbx_ctx *ctx, const struct docker *d, const char *ref,
			   struct sbx_err *err)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	_cleanup_close_ int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_errno(err, "cannot create a temporary file in '%s'", dir);
	char *refs[] = { (char *)ref, NULL };
	if (sbx_image_save(&ctx->store, refs, 1, fd, err) < 0)
		return sbx_err_prefix(err, "cannot hand image '%s' to Docker", ref);
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_errno(err, "cannot rewind a temporary file");
	_cleanup_free_ char *what = xasprintf("load image '%s' into Docker", ref);
	sbx_debug("docker: loading %s from sbx's store (%lld bytes)", ref, (long long)size);
	return image_stream(d, "/images/load?quiet=1", ref, fd, size, what, PULL_QUIET, err);
}

static int ensure_image(struct sbx_ctx *ctx, const struct docker *d, const char *ref,
			struct sbx_err *err)
{
	static const long accept[] = { 404, 0 };
	struct strbuf p = STRBUF_INIT;

	strbuf_addstr(&p, "/images/");
	sbx_url_escape(&p, ref);
	strbuf_addstr(&p, "/json");
	struct docker_call c = { .path = p.buf, .accept = accept, .what = "look up the image" };
	long st = docker_do(d, &c, NULL, err);
	strbuf_release(&p);
	if (st < 0)
		return -1;
	if (st != 404)
		return 0;
	struct sbx_image img = { 0 };
	struct sbx_err e = { 0 };
	if (sbx_image_find(&ctx->store, ref, &img, &e) == 0) {
		sbx_image_release(&img);
		return load_from_store(ctx, d, ref, err);
	}
	/* pulled by the daemon: its progress as one line redrawn on a terminal, a line per step
	 * of each layer otherwise */
	strbuf_addstr(&p, "/images/create?fromImage=");
	sbx_url_escape(&p, ref);
	_cleanup_free_ char *what = xasprintf("pull image '%s'", ref);
	int r = image_stream(d, p.buf, ref, -1, 0, what, isatty(2) == 1 ? PULL_BAR : PULL_LINES,
			     err);
	strbuf_release(&p);
	return r;
}

/* --- create --------------------------------------------------------------------------------- */

/* sets key of o to s as a JSON string; -1 (err set) when s is not valid UTF-8 */
static int set_text(json_t *o, const char *key, const char *s, const char *what,
		    struct sbx_err *err)
{
	json_t *j = docker_text(s, what, err);

	if (!j)
		return -1;
	json_object_set_new(o, key, j);
	return 0;
}

static json_t *labels_of(const struct sbx_record *rec, struct sbx_err *err)
{
	size_t i = 0;

	/* what remote_labels would drop silently, refused */
	for (char **l = rec->config.labels; l && *l; l++, i++) {
		_cleanup_free_ char *what = xasprintf("label %zu", i + 1);
		json_t *j = docker_text(*l, what, err);
		if (!j)
			return NULL;
		json_decref(j);
	}
	json_t *labels = remote_labels(rec);
	json_object_set_new(labels, "sbx.managed", json_string("1"));
	return labels;
}

/* where a port published on the daemon's host can be reached from here (previews): a daemon on
 * this host or reached over ssh (sbx's forwarder); not a tcp:// daemon elsewhere, whose
 * loopback sbx cannot reach (and publishing on its public address would take the token away) */
bool docker_ports_reachable(const struct docker *d)
{
	return docker_is_local(d) || d->dial || sbx_url_is_loopback(d->root);
}

static json_t *create_body(const struct sbx_record *rec, const struct docker *d,
			   struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;
	json_t *env = docker_env(o->env, "-e", err);
	json_t *labels = env ? labels_of(rec, err) : NULL;

	if (!labels) {
		json_decref(env);
		return NULL;
	}
	_cleanup_json_ json_t *b = json_pack("{s:[sss], s:o, s:o, s:b, s:b, s:{}}", "Entrypoint",
					     "/bin/sh", "-c", INIT_SCRIPT, "Env", env, "Labels",
					     labels, "Tty", 0, "OpenStdin", 0, "HostConfig");
	json_t *hc = json_object_get(b, "HostConfig");
	if (set_text(b, "Image", o->image.ref, "--image", err) < 0 ||
	    (o->workdir && set_text(b, "WorkingDir", o->workdir, "-w", err) < 0) ||
	    (o->hostname && set_text(b, "Hostname", o->hostname, "--hostname", err) < 0) ||
	    (o->runtime && set_text(hc, "Runtime", o->runtime, "--runtime", err) < 0))
		return NULL;
	if (o->runtime && (strstr(o->runtime, "runsc") || strstr(o->runtime, "gvisor")))
		/* gVisor gives a /tmp the spec does not mount a tmpfs of its own, which the
		 * daemon's archive endpoints (cp) cannot see: a volume of the container's there
		 * is the same /tmp to both (removed with it) */
		json_object_set_new(b, "Volumes", json_pack("{s:{}}", "/tmp"));
	if (o->memory)
		json_object_set_new(hc, "Memory", json_integer(o->memory));
	if (o->cpu_millis)
		json_object_set_new(hc, "NanoCpus", json_integer(o->cpu_millis * 1000000));
	if (o->pids_limit)
		json_object_set_new(hc, "PidsLimit", json_integer(o->pids_limit));
	/* --net open: the daemon's network (SBX_DOCKER_NETWORK, else its default bridge); no
	 * --net, as --net none: Docker cannot hold egress to an allow list */
	const char *net = getenv("SBX_DOCKER_NETWORK");
	bool open = o->net.set && o->net.mode == SBX_NET_OPEN;
	if (set_text(hc, "NetworkMode", open ? (net && *net ? net : "bridge") : "none",
		     "SBX_DOCKER_NETWORK", err) < 0)
		return NULL;
	if (o->n_volumes) {
		if (!docker_is_local(d))
			return sbx_err_set(err, SBX_E_UNSUPPORTED,
					   "provider 'docker' takes --volume only from a daemon on "
					   "this host (DOCKER_HOST unix://), not from %s",
					   d->host),
			       NULL;
		json_t *binds = json_array();
		json_object_set_new(hc, "Binds", binds);
		for (size_t i = 0; i < o->n_volumes; i++) {
			_cleanup_free_ char *bind = xasprintf("%s:%s%s", o->volumes[i].host,
							      o->volumes[i].dest,
							      o->volumes[i].ro ? ":ro" : "");
			_cleanup_free_ char *what = xasprintf("volume %zu", i + 1);
			json_t *j = docker_text(bind, what, err);
			if (!j)
				return NULL;
			json_array_append_new(binds, j);
		}
	}
	if (o->n_ports) {
		if (!open)
			return sbx_err_set(err, SBX_E_USAGE,
					   "provider 'docker' publishes --port only on a network: "
					   "add --net open"),
			       NULL;
		if (!docker_ports_reachable(d))
			return sbx_err_set(
				       err, SBX_E_UNSUPPORTED,
				       "provider 'docker' publishes --port on the loopback of "
				       "the daemon's host, which %s does not reach from here: use "
				       "DOCKER_HOST=ssh://HOST for previews of a daemon elsewhere",
				       d->host),
			       NULL;
		json_t *exp = json_object(), *pb = json_object();
		for (size_t i = 0; i < o->n_ports; i++) {
			_cleanup_free_ char *k = xasprintf("%d/tcp", o->ports[i]);
			json_object_set_new(exp, k, json_object());
			/* loopback only: sbx's forwarder, with its token, is the way in */
			json_object_set_new(
				pb, k,
				json_pack("[{s:s, s:s}]", "HostIp", "127.0.0.1", "HostPort", ""));
		}
		json_object_set_new(b, "ExposedPorts", exp);
		json_object_set_new(hc, "PortBindings", pb);
	}
	return TAKE_PTR(b);
}

static int docker_create(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *resp = NULL;
	const struct sbx_config *o = &rec->config;

	if (!o->image.ref)
		return sbx_err_set(err, SBX_E_USAGE,
				   "provider 'docker' needs --image (an image the daemon has or "
				   "can pull, or one of 'sbx image ls')");
	if (docker_init(&d, NULL, err) < 0)
		return -1;
	/* what cannot be sent is refused before the daemon is asked anything */
	_cleanup_json_ json_t *body = create_body(rec, &d, err);
	if (!body || negotiate(&d, err) < 0 || ensure_image(ctx, &d, o->image.ref, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/create?name=sbx-%s", rec->id);
	struct docker_call c = { .method = "POST",
				 .path = path,
				 .body = body,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "create the container" };
	if (docker_do(&d, &c, &resp, err) < 0)
		return -1;
	const char *id = sbx_json_str(resp, "Id");
	if (!id || strlen(id) != 64 || strspn(id, "0123456789abcdef") != 64)
		return sbx_err_set(err, SBX_E_REMOTE,
				   "cannot create the container: Docker's answer has no valid Id");
	rec->provider_id = xstrdup(id);
	_cleanup_free_ char *name = xasprintf("sbx-%s", rec->id);
	rec->extra = json_pack("{s:s, s:s, s:s, s:s}", "docker_host", d.host, "api_version",
			       d.version, "container", name, "engine",
			       d.podman ? "podman" : "docker");
	_cleanup_free_ char *start = xasprintf("/containers/%s/start", id);
	struct docker_call s = { .method = "POST",
				 .path = start,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "start the container" };
	if (docker_do(&d, &s, NULL, err) < 0)
		return -1;
	sbx_debug("docker: container %.12s of %s", id, o->image.ref);
	return 0;
}

/* --- states ----------------------------------------------------------------------------------- */

/* Docker's state; an exited container whose init ended on SIGTERM (status 0) was stopped on
 * purpose (release): its files wait for resume; otherwise it stopped by itself */
static enum sbx_state state_of(const char *s, long long exit_code)
{
	if (!s)
		return SBX_STATE_UNKNOWN;
	if (streq(s, "running") || streq(s, "restarting"))
		return SBX_STATE_RUNNING;
	if (streq(s, "created"))
		return SBX_STATE_CREATING;
	if (streq(s, "paused"))
		return SBX_STATE_PAUSED;
	if (streq(s, "exited"))
		return exit_code == 0 ? SBX_STATE_RELEASED : SBX_STATE_STOPPED;
	if (streq(s, "removing"))
		return SBX_STATE_MISSING;
	if (streq(s, "dead"))
		return SBX_STATE_ERROR;
	return SBX_STATE_UNKNOWN;
}

static int docker_inspect(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *resp = NULL;
	static const long accept[] = { 404, 0 };

	if (rec->state == SBX_STATE_CREATING && !rec->provider_id)
		return 0;
	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/%s/json", rec->provider_id);
	struct docker_call c = { .path = path, .accept = accept, .what = "look up the container" };
	long st = docker_do(&d, &c, &resp, err);
	if (st < 0)
		return -1;
	if (st == 404) {
		rec->state = SBX_STATE_MISSING;
		return 0;
	}
	/* a container of that id that is not this sandbox's (its labels say whose it is) */
	json_t *labels = json_object_get(json_object_get(resp, "Config"), "Labels");
	if (!streq(sbx_json_str(labels, "sbx.id") ?: "", rec->id)) {
		rec->state = SBX_STATE_MISSING;
		return 0;
	}
	json_t *s = json_object_get(resp, "State");
	const char *status = sbx_json_str(s, "Status");
	rec->state = state_of(status, sbx_json_int(s, "ExitCode", -1));
	if (rec->state == SBX_STATE_ERROR) {
		free(rec->state_reason);
		rec->state_reason = xstrdup("Docker says the container is dead");
	}
	json_t *remote = json_pack("{s:s, s:s}", "status", status ? status : "", "docker_host",
				   d.host);
	const char *img = sbx_json_str(json_object_get(resp, "Config"), "Image");
	if (img)
		json_object_set_new(remote, "image", json_string(img));
	json_object_set(remote, "labels", labels);
	json_decref(rec->live);
	rec->live = json_pack("{s:o}", "remote", remote);
	return 0;
}

/* the state in a listing's entry: State, and the status Status words ("Exited (0) 3 seconds
 * ago": released when 0, as inspect's ExitCode says) */
static enum sbx_state listed_state(const json_t *c)
{
	const char *st = sbx_json_str(c, "State"), *words = sbx_json_str(c, "Status");
	long long code = -1;

	if (words && startswith(words, "Exited ("))
		code = strtoll(words + 8, NULL, 10);
	return state_of(st, code);
}

/* the sbx containers of one daemon (by their label) into all, container id -> state */
static int list_daemon(const char *host, json_t *all, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *resp = NULL;
	size_t i;
	json_t *c;

	if (docker_init_host(&d, host, NULL, err) < 0)
		return -1;
	/* filters={"label":["sbx.managed=1"]} */
	struct docker_call call = {
		.path = "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22sbx.managed%3D1%22%5D%7D",
		.timeout_ms = LIST_TIMEOUT_MS,
		.what = "list the containers"
	};
	if (docker_do(&d, &call, &resp, err) < 0)
		return -1;
	json_array_foreach (resp, i, c) {
		const char *id = sbx_json_str(c, "Id");
		if (id && sbx_json_str(json_object_get(c, "Labels"), "sbx.id"))
			json_object_set_new(all, id, json_integer(listed_state(c)));
	}
	return 0;
}

/* one listing per daemon the records name (a short timeout each); a daemon that cannot be
 * reached leaves its sandboxes as last seen, with a warning, or (the only one) fails the
 * listing, which ls warns of */
static int docker_list(struct sbx_ctx *ctx, json_t **ret, struct sbx_err *err)
{
	char **ids = NULL;
	size_t n = 0, i, failed = 0;
	_cleanup_json_ json_t *hosts = json_object(); /* host -> {provider_id: last state} */
	_cleanup_json_ json_t *all = json_object();
	const char *host;
	json_t *recs;

	if (sbx_store_list_ids(&ctx->store, &ids, &n, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		_cleanup_record_ struct sbx_record *rec = NULL;
		struct sbx_err e = { 0 };
		if (sbx_store_load(&ctx->store, ids[i], &rec, &e) < 0 ||
		    !streq(rec->provider, "docker") || !rec->provider_id)
			continue;
		const char *h = sbx_json_str(rec->extra, "docker_host");
		if (!h)
			continue;
		if (!json_object_get(hosts, h))
			json_object_set_new(hosts, h, json_object());
		json_object_set_new(json_object_get(hosts, h), rec->provider_id,
				    json_integer(rec->state));
	}
	sbx_strv_free(ids);
	json_object_foreach (hosts, host, recs) {
		struct sbx_err e = { 0 };
		if (list_daemon(host, all, &e) == 0)
			continue;
		if (!failed++)
			*err = e;
		if (json_object_size(hosts) > 1)
			sbx_warn("cannot list docker sandboxes on %s, showing their states as last "
				 "seen: %s",
				 host, e.msg);
		json_object_update(all, recs);
	}
	if (failed && failed == json_object_size(hosts))
		return -1;
	*ret = TAKE_PTR(all);
	return 0;
}

static int post(const struct sbx_record *rec, const char *verb, const char *what,
		struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	static const long accept[] = { 304, 0 };

	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/%s/%s", rec->provider_id, verb);
	struct docker_call c = { .method = "POST",
				 .path = path,
				 .accept = accept,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = what };
	return docker_do(&d, &c, NULL, err) < 0 ? -1 : 0;
}

static int docker_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	static const long accept[] = { 404, 0 };

	fwd_stop_all(rec, "docker");
	if (!rec->provider_id)
		return 0; /* never made */
	if (docker_init(&d, rec, err) < 0)
		return -1;
	/* a paused container is thawed first: removed frozen, a gVisor one leaves its
	 * containerd shim running */
	struct sbx_err e = { 0 };
	if (rec->state == SBX_STATE_PAUSED)
		(void)post(rec, "unpause", "unpause the container", &e);
	_cleanup_free_ char *path = xasprintf("/containers/%s?force=1&v=1", rec->provider_id);
	struct docker_call c = { .method = "DELETE",
				 .path = path,
				 .accept = accept,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "remove the container" };
	return docker_do(&d, &c, NULL, err) < 0 ? -1 : 0;
}

static int docker_pause(struct sbx_ctx *ctx, struct sbx_record *rec, const struct sbx_pause_opts *o,
			struct sbx_err *err)
{
	if (!o->release) {
		if (post(rec, "pause", "pause the container", err) < 0)
			return -1;
		rec->state = SBX_STATE_PAUSED;
		return 0;
	}
	/* release: the processes end (SIGTERM, then SIGKILL), the container's files stay */
	if (rec->state == SBX_STATE_PAUSED &&
	    post(rec, "unpause", "unpause the container", err) < 0)
		return -1;
	long long t = o->grace_ms > 0 ? (o->grace_ms + 999) / 1000 : 2;
	_cleanup_free_ char *verb = xasprintf("stop?t=%lld", t);
	if (rec->state != SBX_STATE_STOPPED && rec->state != SBX_STATE_RELEASED &&
	    post(rec, verb, "stop the container", err) < 0)
		return -1;
	rec->state = SBX_STATE_RELEASED;
	return 0;
}

static int docker_resume(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	if (rec->state == SBX_STATE_PAUSED) {
		if (post(rec, "unpause", "unpause the container", err) < 0)
			return -1;
	} else if (rec->state != SBX_STATE_RUNNING) {
		if (post(rec, "start", "start the container", err) < 0)
			return -1;
	}
	rec->state = SBX_STATE_RUNNING;
	return 0;
}

const struct sbx_provider sbx_provider_docker = {
	.name = "docker",
	.summary = "a Docker Engine or Podman service (DOCKER_HOST)",
	.remote = true,
	/* no domain allow list (--net open or none), previews always with their token (no
	 * --public, --no-auth, --host-port), no ttl, no snapshots */
	.caps = SBX_CAP_EXEC_STDIN | SBX_CAP_EXEC_TTY | SBX_CAP_EXEC_USER | SBX_CAP_EXEC_DETACH |
		SBX_CAP_PAUSE_MEMORY | SBX_CAP_RELEASE | SBX_CAP_PREVIEW | SBX_CAP_LIMIT_CPU |
		SBX_CAP_LIMIT_MEMORY | SBX_CAP_LIMIT_PIDS | SBX_CAP_VOLUMES | SBX_CAP_NET_NONE |
		SBX_CAP_NET_OPEN | SBX_CAP_TEMPLATE | SBX_CAP_HOSTNAME | SBX_CAP_CP,
	.runtimes = (const char *const[]){ "*", NULL },
	.local_images = true,
	.ready = docker_ready,
	.api_url = docker_api_url,
	.create = docker_create,
	.exec = docker_exec,
	.jobs_list = docker_jobs_list,
	.job_get = docker_job_get,
	.job_kill = docker_job_kill,
	.job_logs = docker_job_logs,
	.cp_in = docker_cp_in,
	.cp_out = docker_cp_out,
	.rm = docker_rm,
	.pause = docker_pause,
	.resume = docker_resume,
	.preview = docker_preview,
	.inspect = docker_inspect,
	.list = docker_list,
};
