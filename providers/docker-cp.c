/* The Docker provider's cp: out of a path, the daemon's own tar of it (any state); otherwise tar
 * in the container (remote_cp_in/out's rules), the tar file moved through the archive
 * endpoints as a one-entry tar. */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/archive.h"
#include "providers/remote.h"

static int files_sh(void *arg, const char *script, const char *const *args, struct strbuf *out,
		    struct strbuf *errout, int *ret_status, struct sbx_err *err)
{
	return docker_sh(arg, script, args, out, errout, ret_status, err);
}

/* a ustar header for one regular file */
static void tar_header(char h[512], const char *name, long long size)
{
	memset(h, 0, 512);
	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", 0600);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011llo", size);
	snprintf(h + 136, 12, "%011o", 0);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 7, "%06o", sum);
}

static int copy_all(int from, int to, long long size)
{
	char buf[65536];

	while (size > 0) {
		ssize_t n = read(from, buf,
				 size < (long long)sizeof(buf) ? (size_t)size : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		if (sbx_write_all(to, buf, (size_t)n) < 0)
			return -1;
		size -= n;
	}
	return 0;
}

struct untar {
	int fd;
	char hdr[512];
	size_t hdr_len;
	long long left;
	bool done, bad;
};

/* the first entry's data of a tar (the one file asked for) to fd */
static bool untar_data(const char *p, size_t n, void *arg)
{
	struct untar *u = arg;

	while (n && !u->done) {
		if (u->hdr_len < 512) {
			size_t k = 512 - u->hdr_len < n ? 512 - u->hdr_len : n;
			memcpy(u->hdr + u->hdr_len, p, k);
			u->hdr_len += k;
			p += k;
			n -= k;
			if (u->hdr_len < 512)
				return true;
			char sz[13] = { 0 };
			memcpy(sz, u->hdr + 124, 12);
			u->left = strtoll(sz, NULL, 8);
			if (u->hdr[156] != '0' && u->hdr[156] != 0) {
				u->bad = true;
				return false;
			}
			u->done = u->left == 0;
			continue;
		}
		size_t k = (long long)n < u->left ? n : (size_t)u->left;
		if (sbx_write_all(u->fd, p, k) < 0)
			return false;
		u->left -= (long long)k;
		p += k;
		n -= k;
		u->done = u->left == 0;
	}
	return true;
}

static int files_transfer(void *arg, const char *path, int in_fd, long long size, int out_fd,
			  const char *what, struct sbx_err *err)
{
	const struct sbx_record *rec = arg;
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_close_ int spool = -1;
	struct strbuf p = STRBUF_INIT;
	struct untar u = { .fd = out_fd };
	struct sbx_http_req q;
	struct sbx_http_resp resp;

	if (docker_init(&d, rec, err) < 0)
		return -1;
	const char *slash = strrchr(path, '/');
	strbuf_addf(&p, "/containers/%s/archive?path=", rec->provider_id);
	if (in_fd >= 0) {
		/* the file as a one-entry tar, unpacked by the daemon in its directory */
		_cleanup_free_ char *dir = xstrndup(
			path, slash && slash != path ? (size_t)(slash - path) : 1);
		sbx_url_escape(&p, dir);
		char h[1024] = { 0 };
		tar_header(h, slash ? slash + 1 : path, size);
		int tfd;
		long long tsize;
		/* header + data + padding + the end: spooled once more */
		const char *tmp = getenv("TMPDIR");
		spool = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (spool < 0) {
			strbuf_release(&p);
			return sbx_err_errno(err, "cannot create a temporary file");
		}
		if (sbx_write_all(spool, h, 512) < 0 || copy_all(in_fd, spool, size) < 0 ||
		    sbx_write_all(spool, h + 512, (size_t)((512 - size % 512) % 512)) < 0 ||
		    sbx_write_all(spool, h + 512, 512) < 0 ||
		    sbx_write_all(spool, h + 512, 512) < 0 ||
		    (tsize = lseek(spool, 0, SEEK_CUR)) < 0 || lseek(spool, 0, SEEK_SET) < 0) {
			strbuf_release(&p);
			return sbx_err_errno(err, "cannot write a temporary file");
		}
		tfd = spool;
		docker_req_init(&d, &q, NULL);
		_cleanup_free_ char *url = docker_url(&d, p.buf);
		q.url = url;
		q.method = "PUT";
		const char *hdrs[] = { "Content-Type: application/x-tar", NULL };
		q.headers = hdrs;
		q.body_fd = tfd;
		q.body_size = tsize;
		q.stall_s = 60;
		int r = sbx_http_perform(&q, &resp, "Docker", err);
		strbuf_release(&p);
		if (r < 0)
			r = docker_unreachable(&d, err);
		else if (resp.status < 200 || resp.status >= 300)
			r = docker_status_error(what, resp.status, &resp.body, err);
		sbx_http_resp_release(&resp);
		return r;
	}
	sbx_url_escape(&p, path);
	_cleanup_free_ char *url = docker_url(&d, p.buf);
	strbuf_release(&p);
	docker_req_init(&d, &q, url);
	q.on_data = untar_data;
	q.arg = &u;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "Docker", err);
	if (r < 0)
		r = docker_unreachable(&d, err);
	else if (u.bad || resp.aborted)
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: not the file asked for", what);
	else if (resp.status < 200 || resp.status >= 300)
		r = docker_status_error(what, resp.status, &resp.body, err);
	else if (!u.done)
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s: the archive ended early", what);
	sbx_http_resp_release(&resp);
	return r;
}

/* GET archive?path=PATH to fd: the entries start with PATH's last name */
static int archive_get(const struct sbx_record *rec, const char *path, int fd, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	struct strbuf p = STRBUF_INIT;
	struct sbx_http_req q;
	struct sbx_http_resp resp;

	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	strbuf_addf(&p, "/containers/%s/archive?path=", rec->provider_id);
	sbx_url_escape(&p, path);
	_cleanup_free_ char *url = docker_url(&d, p.buf);
	strbuf_release(&p);
	docker_req_init(&d, &q, url);
	q.out_fd = fd;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "Docker", err);
	if (r < 0) {
		if (err->kind == SBX_E_NETWORK)
			r = docker_unreachable(&d, err);
	} else if (resp.status == 404) {
		r = sbx_err_set(err, SBX_E_NOTFOUND, "'%s' does not exist in sandbox '%s'", path,
				remote_label(rec));
	} else if (resp.status < 200 || resp.status >= 300) {
		_cleanup_free_ char *what = xasprintf("copy '%s' out of the container", path);
		r = docker_status_error(what, resp.status, &resp.body, err);
	}
	sbx_http_resp_release(&resp);
	return r;
}

int docker_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		 const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { .arg = (void *)rec, .sh = files_sh, .transfer = files_transfer };

	if (remote_check_running("Docker", rec, err) < 0)
		return -1;
	return remote_cp_in(&f, tar_fd, dest, o, err);
}

int docker_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		  const struct sbx_cp_opts *o, struct sbx_err *err)
{
	struct remote_files f = { .arg = (void *)rec, .sh = files_sh, .transfer = files_transfer };
	struct sbx_cp_src s;

	/* a path as it is (no -L, no "dir/." or "dir/"): the daemon's own tar of it, whatever
	 * the state (paused, released) */
	sbx_cp_src_parse(src, &s);
	bool native = !o->follow_links && !s.want_dir && !streq(s.top, ".") && !streq(s.path, "/");
	int r = native ? archive_get(rec, s.path, tar_fd, err) : 1;
	sbx_cp_src_release(&s);
	if (r <= 0)
		return r;
	if (remote_check_running("Docker", rec, err) < 0)
		return -1;
	return remote_cp_out(&f, src, tar_fd, o, err);
}
