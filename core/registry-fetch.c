/* Registry transfers: one GET with the pull's credentials and retries, and blobs into the store. */
#define _GNU_SOURCE
#include "core/registry-int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"

#define MiB (1024.0 * 1024.0)

int reg_hold(const struct reg_sess *s, const char *digest, struct sbx_err *err)
{
	return s->o && s->o->hold ? s->o->hold(s->o->hold_arg, digest, err) : 0;
}

static void progress_show(struct reg_get *g, long long got, bool force)
{
	long long now = sbx_now_ms();

	if (!g->label || (!force && now - g->tlast < 200))
		return;
	g->tlast = now;
	g->shown = true;
	double secs = (double)(now - g->t0) / 1000.0;
	double speed = secs > 0.05 ? (double)got / secs : 0;
	fprintf(stderr, "\r%s: %.1f/%.1f MiB  %.1f MiB/s\033[K", g->label, (double)got / MiB,
		(double)g->limit / MiB, speed / MiB);
	fflush(stderr);
}

static void on_progress(long long got, void *arg)
{
	progress_show(arg, got, false);
}

/* resets a transfer for another attempt */
static int get_restart(struct reg_get *g, struct sbx_err *err)
{
	g->t0 = g->tlast = sbx_now_ms();
	if (g->fd >= 0) {
		if (ftruncate(g->fd, 0) < 0 || lseek(g->fd, 0, SEEK_SET) < 0)
			return sbx_err_errno(err, "cannot save %s", g->what);
		sbx_sha256_release(g->sha);
		if (sbx_sha256_init(g->sha, err) < 0)
			return -1;
	}
	return 0;
}

long reg_get(struct reg_sess *s, const char *url, const char *accept, struct reg_get *g,
	     struct sbx_http_resp *resp, struct sbx_err *err)
{
	bool authed = false;

	for (int attempt = 1;;) {
		if (get_restart(g, err) < 0)
			return -1;
		const char *hdrs[3] = { NULL, NULL, NULL };
		size_t nh = 0;
		if (accept)
			hdrs[nh++] = accept;
		if (s->auth)
			hdrs[nh++] = s->auth;
		struct sbx_http_req q = SBX_HTTP_REQ_INIT;
		q.url = url;
		q.headers = hdrs;
		q.session = &s->http;
		q.follow = true;
		q.insecure = s->plain;
		q.stall_s = s->stall;
		q.max_body = g->limit;
		q.out_fd = g->fd;
		q.sha = g->fd >= 0 ? g->sha : NULL;
		q.writeback = g->fd >= 0;
		q.on_progress = g->label ? on_progress : NULL;
		q.arg = g;
		q.fetching = g->what;
		q.tls_hint = s->plain
			? NULL
			: " (if the registry serves plain HTTP, pull with --insecure)";
		sbx_http_resp_release(resp);
		int pr = sbx_http_perform(&q, resp, REG_WHAT, err);
		bool retry = pr < 0 ? resp->transient : resp->status >= 500;
		if (retry && attempt < 3) {
			sbx_debug("%s: %s; trying again", g->what,
				  pr < 0 ? err->msg : "server error");
			struct timespec ts = { 0, 500000000L * attempt };
			nanosleep(&ts, NULL);
			attempt++;
			continue;
		}
		if (pr < 0)
			return -1;
		long status = resp->status;
		if (status == 401 && !authed) {
			/* a first answer, or a token that expired meanwhile */
			if (reg_authenticate(s, resp, err) < 0)
				return -1;
			authed = true;
			continue;
		}
		if (status == 401 || status == 403)
			return reg_access_denied(s, status, &resp->body, err);
		if (status >= 500 || status == 429) {
			_cleanup_free_ char *m = reg_message(&resp->body);
			sbx_err_set(err, SBX_E_REMOTE,
				    "the registry answered HTTP %ld%s while "
				    "fetching %s%s; try again later",
				    status, m, g->what, status >= 500 ? " (3 attempts)" : "");
			err->http_status = status;
			return -1;
		}
		return status;
	}
}

int reg_http_failed(const struct sbx_http_resp *r, const char *what, struct sbx_err *err)
{
	_cleanup_free_ char *m = reg_message(&r->body);
	sbx_err_set(err, SBX_E_REMOTE, "the registry answered HTTP %ld%s while fetching %s",
		    r->status, m, what);
	err->http_status = r->status;
	return -1;
}

/* --- the store -------------------------------------------------------------------------------- */

char *reg_blob_path(const struct reg_sess *s, const char *digest)
{
	return xasprintf("%s/blobs/sha256/%s", s->images, digest + 7);
}

/* a fresh IMAGES/tmp/<hex>.<random>, open for writing */
static int tmp_open(const struct reg_sess *s, const char *digest, char **ret_path,
		    struct sbx_err *err)
{
	for (int i = 0; i < 10; i++) {
		unsigned char rnd[8];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			long long t = sbx_now_ms() ^ ((long long)getpid() << 20) ^ i;
			memcpy(rnd, &t, sizeof(rnd));
		}
		char *p = xasprintf("%s/tmp/%s.%02x%02x%02x%02x%02x%02x%02x%02x", s->images,
				    digest + 7, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
				    rnd[6], rnd[7]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*ret_path = p;
			return fd;
		}
		if (errno != EEXIST) {
			sbx_err_errno(err, "cannot create '%s'", p);
			free(p);
			return -1;
		}
		free(p);
	}
	return sbx_err_set(err, SBX_E_SYSTEM, "cannot create a temporary file in '%s/tmp'",
			   s->images);
}

/* fsync, close and rename a finished temporary file into place; removes it on failure */
static int tmp_commit(int fd, const char *tmp, const char *path, struct sbx_err *err)
{
	if (fsync(fd) < 0) {
		sbx_err_errno(err, "cannot save '%s'", path);
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		sbx_err_errno(err, "cannot save '%s'", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

int reg_store_bytes(const struct reg_sess *s, const char *digest, const char *data, size_t n,
		    struct sbx_err *err)
{
	_cleanup_free_ char *path = reg_blob_path(s, digest), *tmp = NULL;
	struct stat st;

	if (reg_hold(s, digest, err) < 0)
		return -1;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == n)
		return 0;
	int fd = tmp_open(s, digest, &tmp, err);
	if (fd < 0)
		return -1;
	if (sbx_write_all(fd, data, n) < 0) {
		sbx_err_errno(err, "cannot write '%s'", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	return tmp_commit(fd, tmp, path, err);
}

int reg_fetch_blob(struct reg_sess *s, const char *digest, long long size, bool progress,
		   struct sbx_err *err)
{
	_cleanup_free_ char *path = reg_blob_path(s, digest), *tmp = NULL;
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	char label[13];
	struct stat st;

	snprintf(label, sizeof(label), "%.12s", digest + 7);
	if (reg_hold(s, digest, err) < 0)
		return -1;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size) {
		if (progress)
			fprintf(stderr, "%s: already present\n", label);
		return 0;
	}
	int fd = tmp_open(s, digest, &tmp, err);
	if (fd < 0)
		return -1;
	struct sbx_sha256 sha = { 0 };
	struct reg_get g = {
		.what = what, .fd = fd, .sha = &sha, .limit = size, .label = progress ? label : NULL
	};
	struct sbx_http_resp resp = { 0 };
	_cleanup_free_ char *url = xasprintf("%sblobs/%s", s->base, digest);
	long status = reg_get(s, url, NULL, &g, &resp, err);
	int r = -1;
	char got[72];
	if (status < 0) {
		/* err is set */
	} else if (status == 404) {
		sbx_err_set(err, SBX_E_NOTFOUND,
			    "blob unknown: the registry lacks %s of '%s' "
			    "(push the image again)",
			    digest, s->ref->repo);
		err->http_status = 404;
	} else if (status < 200 || status >= 300) {
		reg_http_failed(&resp, what, err);
	} else if (resp.got != size) {
		sbx_err_set(err, SBX_E_REMOTE,
			    "blob %s: the registry sent %lld bytes, the manifest "
			    "says %lld",
			    digest, resp.got, size);
	} else {
		sbx_sha256_final(&sha, got);
		if (!streq(got, digest))
			sbx_err_set(err, SBX_E_REMOTE,
				    "blob verification failed: expected %s, "
				    "got %s (the registry or a proxy corrupted it; pull again)",
				    digest, got);
		else
			r = 0;
	}
	sbx_sha256_release(&sha);
	sbx_http_resp_release(&resp);
	if (r == 0)
		r = tmp_commit(fd, tmp, path, err);
	else {
		close(fd);
		unlink(tmp);
	}
	if (r < 0) {
		if (g.shown)
			fputc('\n', stderr); /* the error line goes below the progress */
		return -1;
	}
	if (progress) {
		fprintf(stderr, "\r%s: done\033[K\n", label);
		fflush(stderr);
	}
	return 0;
}
