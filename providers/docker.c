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
#include "providers/remote.h"

#define CONTROL_TIMEOUT_MS 30000
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
			   "invalid DOCKER_HOST '%s': use unix:///PATH or tcp://HOST:PORT", host);
}

int docker_init(struct docker *d, const struct sbx_record *rec, struct sbx_err *err)
{
	const char *host = rec ? sbx_json_str(rec->extra, "docker_host") : NULL;
	const char *ver = rec ? sbx_json_str(rec->extra, "api_version") : NULL;

	memset(d, 0, sizeof(*d));
	if (!host)
		host = getenv("DOCKER_HOST");
	if (!host || !*host)
		host = "unix://" DEFAULT_SOCKET;
	snprintf(d->version, sizeof(d->version), "%s",
		 ver && strlen(ver) < sizeof(d->version) ? ver : DOCKER_API_VERSION);
	if (parse_host(d, host, err) < 0) {
		docker_release(d);
		return -1;
	}
	return 0;
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

struct pull {
	struct strbuf line;
	char error[300];
	bool show;
};

/* the JSON lines of a pull or a load: progress to a terminal, the first error kept */
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
		const char *e = sbx_json_str(j, "error");
		if (e && !pl->error[0])
			snprintf(pl->error, sizeof(pl->error), "%s", e);
		const char *st = sbx_json_str(j, "status"), *id = sbx_json_str(j, "id");
		if (pl->show && st && !json_object_get(j, "progressDetail")) {
			_cleanup_free_ char *s = xasprintf("%s%s%s", id ? id : "", id ? ": " : "",
							   st);
			/* the registry's words: printable ASCII only reach the terminal */
			for (char *c = s; *c; c++)
				if ((unsigned char)*c < ' ' || (unsigned char)*c > '~')
					*c = '?';
			fprintf(stderr, "%s\n", s);
		}
	}
	return true;
}

/* a streamed image call (pull, load): body_fd sent when >= 0 */
static int image_stream(const struct docker *d, const char *path, int body_fd, long long size,
			const char *what, bool show, struct sbx_err *err)
{
	_cleanup_free_ char *url = docker_url(d, path);
	const char *hdrs[] = { "Content-Type: application/x-tar", NULL };
	struct pull pl = { .line = STRBUF_INIT, .show = show };
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
	sbx_http_resp_release(&resp);
	strbuf_release(&pl.line);
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
	return image_stream(d, "/images/load?quiet=1", fd, size, what, false, err);
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
	/* pulled by the daemon: its progress lines on a terminal, nothing otherwise */
	strbuf_addstr(&p, "/images/create?fromImage=");
	sbx_url_escape(&p, ref);
	_cleanup_free_ char *what = xasprintf("pull image '%s'", ref);
	int r = image_stream(d, p.buf, -1, 0, what, isatty(2) == 1, err);
	strbuf_release(&p);
	return r;
}

/* --- create --------------------------------------------------------------------------------- */

static json_t *env_array(char **env)
{
	json_t *a = json_array();

	for (; env && *env; env++) {
		if (strchr(*env, '=')) {
			json_array_append_new(a, json_string(*env));
			continue;
		}
		const char *v = getenv(*env);
		if (v)
			json_array_append_new(a, json_string_nocheck(xasprintf("%s=%s", *env, v)));
	}
	return a;
}

static json_t *create_body(const struct sbx_record *rec, const struct docker *d,
			   struct sbx_err *err)
{
	const struct sbx_config *o = &rec->config;
	json_t *labels = remote_labels(rec);
	json_t *hc = json_object();

	json_object_set_new(labels, "sbx.managed", json_string("1"));
	json_t *b = json_pack("{s:s, s:[sss], s:o, s:o, s:b, s:b}", "Image", o->image.ref,
			      "Entrypoint", "/bin/sh", "-c", INIT_SCRIPT, "Env", env_array(o->env),
			      "Labels", labels, "Tty", 0, "OpenStdin", 0);
	json_object_set_new(b, "HostConfig", hc);
	if (o->workdir)
		json_object_set_new(b, "WorkingDir", json_string(o->workdir));
	if (o->hostname)
		json_object_set_new(b, "Hostname", json_string(o->hostname));
	if (o->memory)
		json_object_set_new(hc, "Memory", json_integer(o->memory));
	if (o->cpu_millis)
		json_object_set_new(hc, "NanoCpus", json_integer(o->cpu_millis * 1000000));
	if (o->pids_limit)
		json_object_set_new(hc, "PidsLimit", json_integer(o->pids_limit));
	if (o->runtime)
		json_object_set_new(hc, "Runtime", json_string(o->runtime));
	/* --net open: the daemon's network (SBX_DOCKER_NETWORK, else its default bridge); no
	 * --net, as --net none: Docker cannot hold egress to an allow list */
	const char *net = getenv("SBX_DOCKER_NETWORK");
	bool open = o->net.set && o->net.mode == SBX_NET_OPEN;
	json_object_set_new(hc, "NetworkMode",
			    json_string(open ? (net && *net ? net : "bridge") : "none"));
	if (o->n_volumes) {
		if (!docker_is_local(d)) {
			json_decref(b);
			sbx_err_set(err, SBX_E_UNSUPPORTED,
				    "provider 'docker' takes --volume only from a daemon on this "
				    "host (DOCKER_HOST unix://), not from %s",
				    d->host);
			return NULL;
		}
		json_t *binds = json_array();
		for (size_t i = 0; i < o->n_volumes; i++)
			json_array_append_new(
				binds,
				json_string_nocheck(xasprintf("%s:%s%s", o->volumes[i].host,
							      o->volumes[i].dest,
							      o->volumes[i].ro ? ":ro" : "")));
		json_object_set_new(hc, "Binds", binds);
	}
	if (o->n_ports) {
		if (!open) {
			json_decref(b);
			sbx_err_set(err, SBX_E_USAGE,
				    "provider 'docker' publishes --port only on a network: add "
				    "--net open");
			return NULL;
		}
		json_t *exp = json_object(), *pb = json_object();
		for (size_t i = 0; i < o->n_ports; i++) {
			_cleanup_free_ char *k = xasprintf("%d/tcp", o->ports[i]);
			json_object_set_new(exp, k, json_object());
			json_object_set_new(
				pb, k,
				json_pack("[{s:s, s:s}]", "HostIp", "127.0.0.1", "HostPort", ""));
		}
		json_object_set_new(b, "ExposedPorts", exp);
		json_object_set_new(hc, "PortBindings", pb);
	}
	return b;
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
	if (docker_init(&d, NULL, err) < 0 || negotiate(&d, err) < 0)
		return -1;
	_cleanup_json_ json_t *body = create_body(rec, &d, err);
	if (!body || ensure_image(ctx, &d, o->image.ref, err) < 0)
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
	rec->extra = json_pack("{s:s, s:s, s:s}", "docker_host", d.host, "api_version", d.version,
			       "container", name);
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
	json_decref(rec->live);
	rec->live = json_pack("{s:o}", "remote", remote);
	return 0;
}

static int docker_rm(struct sbx_ctx *ctx, struct sbx_record *rec, bool force, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	static const long accept[] = { 404, 0 };

	if (!rec->provider_id)
		return 0; /* never made */
	if (docker_init(&d, rec, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/%s?force=1&v=1", rec->provider_id);
	struct docker_call c = { .method = "DELETE",
				 .path = path,
				 .accept = accept,
				 .timeout_ms = CREATE_TIMEOUT_MS,
				 .what = "remove the container" };
	return docker_do(&d, &c, NULL, err) < 0 ? -1 : 0;
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

/* a port published at create (--port): the daemon's host and the port it chose */
static int docker_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
			  const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	int pre = remote_preview_start("docker", "Docker", rec, o, ret, err);
	if (pre != 0)
		return pre < 0 ? -1 : 0;
	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/%s/json", rec->provider_id);
	struct docker_call c = { .path = path, .what = "look up the container" };
	if (docker_do(&d, &c, &resp, err) < 0)
		return -1;
	_cleanup_free_ char *key = xasprintf("%d/tcp", o->port);
	json_t *ports = json_object_get(json_object_get(resp, "NetworkSettings"), "Ports");
	json_t *b = json_array_get(json_object_get(ports, key), 0);
	const char *hp = sbx_json_str(b, "HostPort");
	long port = hp ? strtol(hp, NULL, 10) : 0;
	if (port <= 0 || port > 65535)
		return sbx_err_set(err, SBX_E_USAGE,
				   "port %d of '%s' is not published: Docker publishes ports at "
				   "create only ('sbx create --provider docker --net open --port "
				   "%d ...')",
				   o->port, remote_label(rec), o->port);
	/* a daemon elsewhere publishes on its own host */
	_cleanup_free_ char *host = docker_is_local(&d) ? xstrdup("127.0.0.1")
							: sbx_url_host(d.root);
	char *colon = docker_is_local(&d) ? NULL : strrchr(host, ':');
	if (colon)
		*colon = 0;
	_cleanup_free_ char *url = xasprintf("http://%s:%ld/", host, port);
	*ret = json_pack("{s:i, s:s, s:b}", "port", o->port, "url", url, "public", 0);
	return 0;
}

const struct sbx_provider sbx_provider_docker = {
	.name = "docker",
	.summary = "a Docker Engine or Podman service (DOCKER_HOST)",
	.remote = true,
	/* no domain allow list (--net open or none), no previews' tokens, no ttl, no snapshots */
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
};
