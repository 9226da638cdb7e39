/* What the hosted providers share: keys, calls with bounded retries, errors, cp through files. */
#define _GNU_SOURCE
#include "providers/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "core/archive.h"
#include "core/log.h"

#define RETRY_AFTER_MAX_S 30 /* a longer wait asked for is not waited for */
#define RATE_ATTEMPTS 5
#define ERROR_ATTEMPTS 3

const char *remote_env(const char *const *vars)
{
	for (; vars && *vars; vars++) {
		const char *v = getenv(*vars);
		if (v && *v)
			return v;
	}
	return NULL;
}

int remote_init(struct remote *r, const char *label, const char *key_var,
		const char *const *url_vars, const char *dflt, const char *auth_prefix,
		struct sbx_err *err)
{
	const char *key = getenv(key_var);
	const char *url = remote_env(url_vars);

	memset(r, 0, sizeof(*r));
	r->label = label;
	r->key_var = key_var;
	if (!key || !*key)
		return sbx_err_set(err, SBX_E_AUTH, "%s is not set: export your %s API key in it",
				   key_var, label);
	if (strpbrk(key, "\r\n"))
		return sbx_err_set(err, SBX_E_AUTH, "%s holds a line break; it is not an API key",
				   key_var);
	r->api = xstrdup(url ? url : dflt);
	for (size_t n = strlen(r->api); n && r->api[n - 1] == '/'; n--)
		r->api[n - 1] = 0;
	r->auth = xasprintf("%s%s", auth_prefix, key);
	return 0;
}

void remote_release(struct remote *r)
{
	if (r->auth)
		explicit_bzero(r->auth, strlen(r->auth));
	free(r->auth);
	free(r->api);
	r->auth = r->api = NULL;
}

char *remote_error_message(const struct strbuf *body)
{
	json_error_t je;
	json_t *j = body->len ? json_loadb(body->buf, body->len, 0, &je) : NULL;
	struct strbuf m = STRBUF_INIT;

	if (j) {
		json_t *msg = json_object_get(j, "message");
		if (json_is_string(msg)) {
			strbuf_addstr(&m, json_string_value(msg));
		} else if (json_is_array(msg)) { /* a list of validation errors */
			size_t i;
			json_t *v;
			json_array_foreach (msg, i, v) {
				if (!json_is_string(v))
					continue;
				if (m.len)
					strbuf_addstr(&m, "; ");
				strbuf_addstr(&m, json_string_value(v));
			}
		} else if (json_is_object(json_object_get(j, "error"))) { /* Connect */
			const char *s = sbx_json_str(json_object_get(j, "error"), "message");
			strbuf_addstr(&m, s ? s : "");
		} else if (sbx_json_str(j, "error")) {
			strbuf_addstr(&m, sbx_json_str(j, "error"));
		}
		json_decref(j);
	}
	if (m.len > 200) {
		m.len = 200;
		m.buf[200] = 0;
		strbuf_addstr(&m, "...");
	}
	for (size_t i = 0; i < m.len; i++)
		if ((unsigned char)m.buf[i] < ' ' || m.buf[i] == 0x7f)
			m.buf[i] = ' ';
	return strbuf_detach(&m);
}

int remote_status_error(const struct remote *r, const char *what, long status,
			const struct strbuf *body, struct sbx_err *err)
{
	_cleanup_free_ char *m = remote_error_message(body);
	_cleanup_free_ char *detail = *m ? xasprintf(": %s", m) : xstrdup("");
	int rc;

	if (status == 401 || status == 403)
		rc = sbx_err_set(err, SBX_E_AUTH, "%s rejected the API key (HTTP %ld%s); check %s",
				 r->label, status, detail, r->key_var);
	else if (status == 404)
		rc = sbx_err_set(err, SBX_E_NOTFOUND,
				 "cannot %s: %s has no such sandbox (HTTP "
				 "404%s)",
				 what, r->label, detail);
	else if (status == 409)
		rc = sbx_err_set(err, SBX_E_STATE,
				 "cannot %s: %s refused it in the sandbox's "
				 "present state (HTTP 409%s)",
				 what, r->label, detail);
	else if (status == 429)
		rc = sbx_err_set(err, SBX_E_REMOTE,
				 "cannot %s: %s is rate limiting requests (HTTP "
				 "429%s); try again later",
				 what, r->label, detail);
	else if (status >= 500)
		rc = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: %s failed (HTTP %ld%s)", what,
				 r->label, status, detail);
	else
		rc = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: %s answered HTTP %ld%s", what,
				 r->label, status, detail);
	err->http_status = status;
	return rc;
}

/* seconds to wait from a Retry-After header (delta seconds or an HTTP date); -1 if absent */
static long retry_after(const char *v)
{
	struct tm tm = { 0 };
	long long n;

	if (!v || !*v)
		return -1;
	if (sbx_parse_int(v, 0, 1 << 30, &n) == 0)
		return (long)n;
	if (strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
		long long d = (long long)timegm(&tm) - (long long)time(NULL);
		return d < 0 ? 0 : (long)(d > 1 << 30 ? 1 << 30 : d);
	}
	return -1;
}

static void sleep_ms(long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

long remote_do(const struct remote *r, const struct remote_call *c, json_t **ret_json,
	       char **ret_next, struct sbx_err *err)
{
	_cleanup_free_ char *body = c->body ? json_dumps(c->body, JSON_COMPACT) : NULL;
	const char *hdrs[16];
	size_t nh = 0;
	int rate_tries = 0, err_tries = 0;
	long long waited = 0;

	/* SBX_REMOTE_TIMEOUT (seconds) caps every control call, for slow or flaky networks */
	long long cap = 0;
	const char *ct = getenv("SBX_REMOTE_TIMEOUT");
	if (ct && *ct && sbx_parse_int(ct, 1, 86400, &cap) < 0)
		cap = 0;
	if (r->auth)
		hdrs[nh++] = r->auth;
	hdrs[nh++] = "Accept: application/json";
	bool typed = false; /* a call's own Content-Type (a PATCH's) replaces JSON's */
	for (const char *const *h = c->headers; h && *h; h++)
		typed = typed || !strncasecmp(*h, "Content-Type:", 13);
	if (body && !typed)
		hdrs[nh++] = "Content-Type: application/json";
	for (const char *const *h = c->headers; h && *h && nh < ARRAY_SIZE(hdrs) - 1; h++)
		hdrs[nh++] = *h;
	hdrs[nh] = NULL;
	for (;;) {
		struct sbx_http_req q = SBX_HTTP_REQ_INIT;
		struct sbx_http_resp resp;
		q.method = c->method;
		q.url = c->url;
		q.headers = hdrs;
		q.body = body;
		q.body_len = body ? strlen(body) : 0;
		q.timeout_ms = c->timeout_ms ? c->timeout_ms : 30000;
		if (cap && q.timeout_ms > cap * 1000)
			q.timeout_ms = cap * 1000;
		q.stall_s = (long)(q.timeout_ms / 1000) + 1;
		q.cancel = c->cancel;
		q.setup = r->setup;
		q.setup_arg = r->setup_arg;
		q.tls_hint = r->tls_hint;
		struct sbx_err e = { 0 };
		int pr = sbx_http_perform(&q, &resp, r->label, &e);
		if (c->cancel && *c->cancel) {
			sbx_http_resp_release(&resp);
			return sbx_err_set(err, SBX_E_SYSTEM, "cannot %s: interrupted", c->what);
		}
		if (pr < 0) {
			bool again = (c->flags & REMOTE_IDEMPOTENT) && !resp.timed_out &&
				++err_tries < ERROR_ATTEMPTS && e.kind == SBX_E_NETWORK &&
				!strstr(e.msg, "TLS") && !strstr(e.msg, "stalled");
			sbx_http_resp_release(&resp);
			if (again) {
				sbx_debug("%s: %s; trying again", c->what, e.msg);
				sleep_ms(200LL << err_tries);
				continue;
			}
			*err = e;
			return sbx_err_prefix(err, "cannot %s", c->what);
		}
		long st = resp.status;
		if (st == 429 && ++rate_tries < RATE_ATTEMPTS) {
			long ra = retry_after(sbx_http_header(&resp, "retry-after"));
			long long ms = ra >= 0 ? ra * 1000LL : 1000LL << (rate_tries - 1);
			if (ra <= RETRY_AFTER_MAX_S && waited + ms <= RETRY_AFTER_MAX_S * 1000LL) {
				sbx_debug("%s: rate limited, waiting %lld ms", c->what, ms);
				sbx_http_resp_release(&resp);
				sleep_ms(ms);
				waited += ms;
				continue;
			}
		}
		if (st >= 500 && (c->flags & REMOTE_IDEMPOTENT) && ++err_tries < ERROR_ATTEMPTS) {
			sbx_debug("%s: HTTP %ld; trying again", c->what, st);
			sbx_http_resp_release(&resp);
			sleep_ms(200LL << err_tries);
			continue;
		}
		bool ok = st >= 200 && st < 300;
		for (const long *a = c->accept; !ok && a && *a; a++)
			ok = *a == st;
		if (!ok) {
			if (st == 429 && rate_tries) {
				long ra = retry_after(sbx_http_header(&resp, "retry-after"));
				_cleanup_free_ char *m = remote_error_message(&resp.body);
				if (ra > RETRY_AFTER_MAX_S)
					sbx_err_set(
						err, SBX_E_REMOTE,
						"cannot %s: %s is rate limiting "
						"requests and asks to wait %ld s; try again then",
						c->what, r->label, ra);
				else
					sbx_err_set(
						err, SBX_E_REMOTE,
						"cannot %s: %s went on rate "
						"limiting requests (HTTP 429%s%s) after %d tries; "
						"try again later",
						c->what, r->label, *m ? ": " : "", m, rate_tries);
				err->http_status = 429;
			} else {
				remote_status_error(r, c->what, st, &resp.body, err);
			}
			sbx_http_resp_release(&resp);
			return -1;
		}
		if (ret_json)
			*ret_json = NULL;
		if (ret_json && st >= 200 && st < 300 && resp.body.len) {
			json_error_t je;
			json_t *j = json_loadb(resp.body.buf, resp.body.len,
					       c->flags & REMOTE_ALLOW_NUL ? JSON_ALLOW_NUL : 0,
					       &je);
			if (!j) {
				sbx_err_set(err, SBX_E_REMOTE,
					    "cannot %s: %s sent a malformed answer "
					    "(HTTP %ld, line %d column %d: %s)",
					    c->what, r->label, st, je.line, je.column, je.text);
				sbx_http_resp_release(&resp);
				return -1;
			}
			*ret_json = j;
		}
		if (ret_next) {
			const char *n = sbx_http_header(&resp, "x-next-token");
			*ret_next = n && *n ? xstrdup(n) : NULL;
		}
		sbx_http_resp_release(&resp);
		return st;
	}
}

void remote_random_hex(char *buf, size_t n)
{
	unsigned char b[16] = { 0 };

	if (getrandom(b, sizeof(b), 0) < 0) {
		long long t = sbx_now_ms() ^ (long long)getpid() << 20;
		memcpy(b, &t, sizeof(t));
	}
	for (size_t i = 0; i < n && i < 32; i++)
		buf[i] = "0123456789abcdef"[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	buf[n < 32 ? n : 32] = 0;
}

void remote_sh_quote(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_addstr(sb, "'\\''");
		else
			strbuf_addch(sb, *s);
	}
	strbuf_addch(sb, '\'');
}

int remote_spool(int fd, int *ret_fd, long long *ret_size, struct sbx_err *err)
{
	const char *dir = getenv("TMPDIR");
	char buf[65536];
	long long size = 0;

	if (!dir || !*dir)
		dir = "/tmp";
	_cleanup_close_ int t = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (t < 0) {
		_cleanup_free_ char *p = xasprintf("%s/sbx-cp.XXXXXX", dir);
		t = mkostemp(p, O_CLOEXEC);
		if (t < 0)
			return sbx_err_errno(err, "cannot create a temporary file in '%s'", dir);
		(void)unlink(p);
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_errno(err, "cannot read the tar stream");
		if (n == 0)
			break;
		if (sbx_write_all(t, buf, (size_t)n) < 0)
			return sbx_err_errno(err, "cannot write a temporary file in '%s'", dir);
		size += n;
	}
	if (lseek(t, 0, SEEK_SET) < 0)
		return sbx_err_errno(err, "cannot rewind a temporary file");
	*ret_fd = TAKE_FD(t);
	*ret_size = size;
	return 0;
}

/* --- cp: a tar file in /tmp of the sandbox, packed or unpacked there by tar ---------------- */

/* $1 the tar, $2 dest, $3 the name entries start with ('' for a stream), $4 1: keep owners.
 * Docker cp's naming: into an existing directory, as dest otherwise (its parent must exist).
 * Without $4, what lands belongs to the sandbox's default user, as docker cp gives it to the
 * container's user: the owner of the uploaded tar, which the file API wrote as that user.
 * Exit 4: something does not exist; 3: refused (the message on stderr). */
static const char cp_in_script[] =
	"f=$1 d=$2 t=$3; trap 'rm -f \"$f\"' EXIT\n"
	"o=-o; [ \"$4\" = 1 ] && o=\n"
	"own() { [ -z \"$o\" ] || [ \"$(id -u)\" != 0 ] && return 0\n"
	"  ug=$(stat -c %u:%g \"$f\") || return 0; [ \"$ug\" = 0:0 ] && return 0\n"
	"  for n in \"$@\"; do chown -R -h \"$ug\" \"$n\" || return 1; done; }\n"
	"tops() { tar -t -f \"$f\" | sed -e 's|^\\./||' -e 's|/.*||' -e '/^\\.\\{0,1\\}$/d' | sort -u |\n"
	"  while IFS= read -r n; do own \"$1/$n\" || exit 1; done; }\n"
	"if [ -z \"$t\" ]; then\n"
	"  [ -e \"$d\" ] || { echo \"directory '$d' does not exist\" >&2; exit 4; }\n"
	"  [ -d \"$d\" ] || { echo \"'$d' is not a directory\" >&2; exit 3; }\n"
	"  tar -x $o -f \"$f\" -C \"$d\" && tops \"$d\"; exit\n"
	"fi\n"
	"if [ -d \"$d\" ]; then\n"
	"  tar -x $o -f \"$f\" -C \"$d\" || exit\n"
	"  if [ \"$t\" = . ]; then tops \"$d\"; else own \"$d/$t\"; fi; exit\n"
	"fi\n"
	"case $d in */) echo \"directory '$d' does not exist\" >&2; exit 4;; esac\n"
	"p=$(dirname -- \"$d\")\n"
	"[ -e \"$p\" ] || { echo \"directory '$p' does not exist\" >&2; exit 4; }\n"
	"[ -d \"$p\" ] || { echo \"'$p' is not a directory\" >&2; exit 3; }\n"
	"w=$(mktemp -d \"$p/.sbx-cp.XXXXXX\") || exit 3\n"
	"tar -x $o -f \"$f\" -C \"$w\" || { rm -rf \"$w\"; exit 3; }\n"
	"s=$w/$t; [ \"$t\" = . ] && s=$w\n"
	"if [ -d \"$s\" ] && [ -e \"$d\" ]; then rm -rf \"$w\"\n"
	"  echo \"cannot copy a directory onto file '$d'\" >&2; exit 3; fi\n"
	"own \"$s\" || { rm -rf \"$w\"; exit 3; }\n"
	"if [ \"$t\" = . ]; then mv -f \"$w\" \"$d\"; exit; fi\n"
	"mv -f \"$s\" \"$d\" && rmdir \"$w\"\n";

/* $1 src, $2 the name entries start with, $3 the tar to write, $4 1: follow src if a link */
static const char cp_out_script[] =
	"s=$1 t=$2 f=$3; umask 022\n"
	"[ -e \"$s\" ] || [ -L \"$s\" ] || { echo \"'$s' does not exist\" >&2; exit 4; }\n"
	"if [ \"$t\" = . ]; then\n"
	"  [ -d \"$s\" ] || { echo \"'$s' is not a directory\" >&2; exit 3; }\n"
	"  tar -c -f \"$f\" -C \"$s\" .; exit\n"
	"fi\n"
	"if [ \"$4\" = 1 ] && [ -L \"$s\" ]; then\n"
	"  w=$(mktemp -d) || exit 3\n"
	"  cp -pRH \"$s\" \"$w/$t\" && tar -c -f \"$f\" -C \"$w\" \"$t\"; r=$?; rm -rf \"$w\"; exit $r\n"
	"fi\n"
	"tar -c -f \"$f\" -C \"$(dirname -- \"$s\")\" \"$t\"\n";

/* a cp script that failed: the first line it or tar wrote on stderr */
static int script_failed(const char *what, int status, const struct strbuf *errout,
			 struct sbx_err *err)
{
	const char *s = strbuf_str(errout);

	s += strspn(s, "\r\n");
	_cleanup_free_ char *line = xstrndup(s, strcspn(s, "\r\n"));
	for (char *c = line; *c; c++)
		if ((unsigned char)*c < ' ')
			*c = ' ';
	enum sbx_errkind k = status == 4 ? SBX_E_NOTFOUND
		: status == 3		 ? SBX_E_USAGE
					 : SBX_E_REMOTE;
	if (*line)
		return sbx_err_set(err, k, "%.400s", line);
	return sbx_err_set(err, k, "%s failed inside the sandbox (exit status %d)", what, status);
}

static char *tmp_tar_path(void)
{
	char hex[17];
	remote_random_hex(hex, 16);
	return xasprintf("/tmp/.sbx-cp-%s.tar", hex);
}

int remote_cp_in(const struct remote_files *f, int tar_fd, const char *dest,
		 const struct sbx_cp_opts *o, struct sbx_err *err)
{
	_cleanup_close_ int spool = -1;
	_cleanup_free_ char *tmp = tmp_tar_path();
	long long size;
	struct strbuf out = STRBUF_INIT, eout = STRBUF_INIT;
	int status = 0;

	if (remote_spool(tar_fd, &spool, &size, err) < 0)
		return -1;
	if (size == 0)
		return sbx_err_set(err, SBX_E_USAGE, "the tar stream is empty");
	if (f->transfer(f->arg, tmp, spool, size, -1, "upload the tar to the sandbox", err) < 0)
		return -1;
	const char *args[] = { tmp, dest, o->top ? o->top : "", o->archive ? "1" : "0", NULL };
	int r = f->sh(f->arg, cp_in_script, args, &out, &eout, &status, err);
	if (r == 0 && status != 0)
		r = script_failed("unpacking", status, &eout, err);
	strbuf_release(&out);
	strbuf_release(&eout);
	return r;
}

int remote_cp_out(const struct remote_files *f, const char *src, int tar_fd,
		  const struct sbx_cp_opts *o, struct sbx_err *err)
{
	_cleanup_free_ char *tmp = tmp_tar_path();
	struct sbx_cp_src s;
	struct strbuf out = STRBUF_INIT, eout = STRBUF_INIT;
	int status = 0;

	sbx_cp_src_parse(src, &s);
	const char *args[] = { s.path, s.top, tmp, o->follow_links ? "1" : "0", NULL };
	int r = f->sh(f->arg, cp_out_script, args, &out, &eout, &status, err);
	if (r == 0 && status != 0)
		r = script_failed("packing", status, &eout, err);
	if (r == 0)
		r = f->transfer(f->arg, tmp, -1, 0, tar_fd, "download the tar from the sandbox",
				err);
	/* the tar in the sandbox goes, whatever happened */
	const char *rm_args[] = { tmp, NULL };
	struct sbx_err e2 = { 0 };
	int st2;
	strbuf_reset(&out);
	strbuf_reset(&eout);
	(void)f->sh(f->arg, "rm -f \"$1\"", rm_args, &out, &eout, &st2, &e2);
	strbuf_release(&out);
	strbuf_release(&eout);
	sbx_cp_src_release(&s);
	return r;
}

const char *remote_label(const struct sbx_record *rec)
{
	return rec->name ? rec->name : rec->id;
}

int remote_need_id(const char *what, const struct sbx_record *rec, struct sbx_err *err)
{
	const char *l = remote_label(rec);

	if (!rec->provider_id || !*rec->provider_id)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' has no %s id (its creation did "
				   "not finish); remove it with 'sbx rm -f %s'",
				   l, what, l);
	return 0;
}

int remote_check_running(const char *what, const struct sbx_record *rec, struct sbx_err *err)
{
	const char *l = remote_label(rec);

	if (remote_need_id(what, rec, err) < 0)
		return -1;
	if (rec->state == SBX_STATE_PAUSED || rec->state == SBX_STATE_STOPPED ||
	    rec->state == SBX_STATE_RELEASED)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s; run 'sbx resume %s' (or "
				   "'sbx exec --resume')",
				   l, sbx_state_name(rec->state), l);
	return 0;
}

int remote_preview_start(const char *provider, const char *what, const struct sbx_record *rec,
			 const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err)
{
	if (remote_need_id(what, rec, err) < 0)
		return -1;
	if (o->rm)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' has no previews to close: "
				   "every port has its URL while the sandbox runs",
				   provider);
	if (!o->port) {
		*ret = json_array();
		return 1;
	}
	return 0;
}

char *remote_url(const struct remote *r, const char *collection, const char *id, const char *tail)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addf(&sb, "%s/%s", r->api, collection);
	if (id) {
		strbuf_addch(&sb, '/');
		sbx_url_escape(&sb, id);
	}
	strbuf_addstr(&sb, tail);
	return strbuf_detach(&sb);
}

volatile sig_atomic_t remote_got_signal;

static void on_signal(int sig)
{
	remote_got_signal = sig;
}

static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };

void remote_sigs_catch(struct remote_sigs *s)
{
	remote_got_signal = 0;
	for (size_t k = 0; k < ARRAY_SIZE(caught); k++) {
		struct sigaction sa = { .sa_handler = caught[k] == SIGPIPE ? SIG_IGN : on_signal };
		(void)sigaction(caught[k], &sa, &s->old[k]);
	}
}

void remote_sigs_restore(const struct remote_sigs *s)
{
	for (size_t k = 0; k < ARRAY_SIZE(caught); k++)
		(void)sigaction(caught[k], &s->old[k], NULL);
}

json_t *remote_labels(const struct sbx_record *rec)
{
	json_t *j = sbx_config_labels_json(&rec->config);

	json_object_set_new(j, "sbx.id", json_string(rec->id));
	if (rec->name)
		json_object_set_new(j, "sbx.name", json_string(rec->name));
	return j;
}

json_t *remote_env_object(char **env)
{
	json_t *j = json_object();

	for (; env && *env; env++) {
		const char *eq = strchr(*env, '=');
		if (!eq) {
			const char *v = getenv(*env);
			if (v)
				json_object_set_new(j, *env, json_string(v));
			continue;
		}
		_cleanup_free_ char *k = xstrndup(*env, (size_t)(eq - *env));
		json_object_set_new(j, k, json_string(eq + 1));
	}
	return j;
}
