/* sbx fs on Daytona: the toolbox's file API (download, upload, list, info, folder, move,
 * permissions, delete), as the sandbox's user. */
#define _GNU_SOURCE
#include "providers/daytona.h"

#include <stdlib.h>
#include <string.h>

#define LIST_DEPTH_R 64 /* ls -R: directories deeper are refused */

struct dfs {
	struct remote r;
	const struct sbx_record *rec;
	const struct sbx_fs_op *op;
};

static char *url_of(const struct dfs *d, const char *route, const char *k1, const char *v1,
		    const char *k2, const char *v2)
{
	struct strbuf t = STRBUF_INIT;

	strbuf_addf(&t, "/files%s?%s=", route, k1);
	sbx_url_escape(&t, v1);
	if (k2) {
		strbuf_addf(&t, "&%s=", k2);
		sbx_url_escape(&t, v2);
	}
	char *u = daytona_toolbox_url(&d->r, d->rec, t.buf);
	strbuf_release(&t);
	return u;
}

/* a status that is not 2xx, for path */
static int status_error(const char *what, const char *path, long status, struct sbx_err *err)
{
	int r;

	if (status == 404)
		r = sbx_err_set(err, SBX_E_NOTFOUND, "cannot %s '%s': it does not exist", what,
				path);
	else if (status == 400)
		r = sbx_err_set(err, SBX_E_USAGE, "cannot %s '%s': Daytona refused it (HTTP 400)",
				what, path);
	else if (status == 403)
		r = sbx_err_set(err, SBX_E_IO, "cannot %s '%s': permission denied", what, path);
	else
		r = sbx_err_set(err, SBX_E_REMOTE, "cannot %s '%s': Daytona answered HTTP %ld",
				what, path, status);
	err->http_status = status;
	return r;
}

/* one JSON call of the file API; *ret its answer (may be NULL); -1 with err */
static int call(const struct dfs *d, const char *method, char *url, const char *what,
		const char *path, json_t **ret, struct sbx_err *err)
{
	static const long accept[] = { 400, 403, 404, 0 };
	const struct remote_call c = { .method = method,
				       .url = url,
				       .accept = accept,
				       .flags = streq(method, "GET") ? REMOTE_IDEMPOTENT : 0,
				       .what = what };
	json_t *j = NULL;
	long st = remote_do(&d->r, &c, &j, NULL, err);

	free(url);
	if (st < 0)
		return -1;
	if (st < 200 || st >= 300) {
		json_decref(j);
		return status_error(what, path, st, err);
	}
	if (ret)
		*ret = j;
	else
		json_decref(j);
	return 0;
}

/* a FileInfo as an entry at path; its strings stay j's */
static void entry_of(const json_t *j, const char *path, struct sbx_fs_entry *e)
{
	const char *mode = sbx_json_str(j, "mode"), *perm = sbx_json_str(j, "permissions");
	const char *t = sbx_json_str(j, "modifiedAt");

	*e = (struct sbx_fs_entry){ .path = path, .uid = -1, .gid = -1 };
	e->type = json_is_true(json_object_get(j, "isDir")) ? 'd'
		: mode && mode[0] == 'L'		    ? 'l'
		: mode && mode[0] == '-'		    ? 'f'
							    : 'o';
	e->size = sbx_json_int(j, "size", 0);
	e->mode = perm ? (unsigned)strtoul(perm, NULL, 8) & 07777 : 0;
	e->mtime = sbx_fs_parse_time(t);
}

static int info(const struct dfs *d, const char *path, const char *what, json_t **ret,
		struct sbx_err *err)
{
	return call(d, "GET", url_of(d, "/info", "path", path, NULL, NULL), what, path, ret, err);
}

static int transfer(const struct dfs *d, const char *path, int in_fd, long long size, int out_fd,
		    struct sbx_err *err)
{
	const char *what = in_fd >= 0 ? "write" : "read";
	_cleanup_free_ char *url = url_of(d, in_fd >= 0 ? "/upload" : "/download", "path", path,
					  NULL, NULL);
	const char *h[] = { d->r.auth, NULL };
	struct sbx_http_req q = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;

	q.url = url;
	q.headers = h;
	q.body_fd = in_fd;
	q.body_size = size;
	q.upload_name = in_fd >= 0 ? path : NULL;
	q.out_fd = out_fd;
	q.stall_s = 60;
	int r = sbx_http_perform(&q, &resp, "Daytona", err);
	if (r < 0)
		sbx_err_prefix(err, "cannot %s '%s'", what, path);
	else if (resp.status < 200 || resp.status >= 300)
		r = status_error(what, path, resp.status, err);
	sbx_http_resp_release(&resp);
	return r;
}

static int fs_write(const struct dfs *d, struct sbx_err *err)
{
	const struct sbx_fs_op *op = d->op;
	_cleanup_free_ char *parent = xstrdup(op->path);
	char *slash = strrchr(parent, '/');
	_cleanup_close_ int spool = -1;
	long long size;

	if (remote_spool(op->fd, &spool, &size, err) < 0)
		return -1;
	if (slash && slash != parent) {
		*slash = 0;
		if (call(d, "POST", url_of(d, "/folder", "path", parent, "mode", "0755"),
			 "create directory", parent, NULL, err) < 0)
			return -1;
	}
	if (transfer(d, op->path, spool, size, -1, err) < 0)
		return -1;
	if (op->mode < 0)
		return 0;
	char mode[16];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)op->mode);
	return call(d, "POST", url_of(d, "/permissions", "path", op->path, "mode", mode),
		    "set the mode of", op->path, NULL, err);
}

static void join(struct strbuf *b, const char *dir, const char *name)
{
	strbuf_reset(b);
	strbuf_addstr(b, dir);
	if (!b->len || b->buf[b->len - 1] != '/')
		strbuf_addch(b, '/');
	strbuf_addstr(b, name);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct sbx_fs_entry *)a)->path,
		      ((const struct sbx_fs_entry *)b)->path);
}

/* the entries of the directory path (sorted), and with -R those below, depth first */
static int list_dir(const struct dfs *d, const char *path, int depth, struct sbx_err *err)
{
	_cleanup_json_ json_t *a = NULL;

	if (depth > LIST_DEPTH_R)
		return sbx_err_set(err, SBX_E_IO, "'%.200s' is nested too deeply", path);
	if (call(d, "GET", url_of(d, "", "path", path, NULL, NULL), "list", path, &a, err) < 0)
		return -1;
	size_t n = json_array_size(a), n_ok;
	_cleanup_free_ struct sbx_fs_entry *v = xcalloc(n ? n : 1, sizeof(*v));
	char **paths = xcalloc(n ? n : 1, sizeof(char *));
	struct strbuf b = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		json_t *j = json_array_get(a, i);
		const char *name = sbx_json_str(j, "name");
		/* a name is one component: anything else is not recursed into, nor shown */
		if (!name || !*name || streq(name, ".") || streq(name, "..") || strchr(name, '/')) {
			paths[i] = NULL;
			continue;
		}
		join(&b, path, name);
		paths[i] = xstrdup(b.buf);
		entry_of(j, paths[i], &v[i]);
	}
	strbuf_release(&b);
	int r = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (paths[i])
			v[k++] = v[i];
	n_ok = k;
	if (n_ok)
		qsort(v, n_ok, sizeof(*v), by_path);
	for (size_t i = 0; r == 0 && i < n_ok; i++) {
		if (d->op->entry && (r = d->op->entry(d->op->arg, &v[i], err)) < 0)
			break;
		if (d->op->recursive && v[i].type == 'd')
			r = list_dir(d, v[i].path, depth + 1, err);
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return r;
}

static int fs_ls(const struct dfs *d, bool just_stat, struct sbx_err *err)
{
	const struct sbx_fs_op *op = d->op;
	_cleanup_json_ json_t *top = NULL;
	struct sbx_fs_entry one;

	if (info(d, op->path, just_stat ? "stat" : "list", &top, err) < 0)
		return -1;
	entry_of(top, op->path, &one);
	if (just_stat || one.type != 'd')
		return sbx_fs_emit_sorted(&one, 1, op, err);
	return list_dir(d, op->path, 0, err);
}

static int fs_rm(const struct dfs *d, struct sbx_err *err)
{
	const struct sbx_fs_op *op = d->op;
	_cleanup_json_ json_t *top = NULL;
	struct sbx_fs_entry one;

	if (info(d, op->path, "remove", &top, err) < 0)
		return op->force && err->kind == SBX_E_NOTFOUND ? (sbx_err_clear(err), 0) : -1;
	entry_of(top, op->path, &one);
	if (one.type == 'd' && !op->recursive)
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is a directory (remove it with -r)",
				   op->path);
	return call(d, "DELETE",
		    url_of(d, "", "path", op->path, "recursive", op->recursive ? "true" : "false"),
		    "remove", op->path, NULL, err);
}

static int fs_mkdir(const struct dfs *d, struct sbx_err *err)
{
	const struct sbx_fs_op *op = d->op;

	if (!op->parents) {
		/* the folder call makes parents and takes an existing directory: not mkdir's */
		_cleanup_json_ json_t *e = NULL;
		_cleanup_free_ char *parent = xstrdup(op->path);
		char *slash = strrchr(parent, '/');
		if (info(d, op->path, "create directory", &e, err) == 0)
			return sbx_err_set(err, SBX_E_EXISTS,
					   "cannot create directory '%s': it exists", op->path);
		if (err->kind != SBX_E_NOTFOUND)
			return -1;
		sbx_err_clear(err);
		if (slash && slash != parent) {
			*slash = 0;
			json_t *p = NULL;
			if (info(d, parent, "create directory", &p, err) < 0)
				return -1;
			json_decref(p);
		}
	}
	return call(d, "POST", url_of(d, "/folder", "path", op->path, "mode", "0755"),
		    "create directory", op->path, NULL, err);
}

static int run(const struct dfs *d, struct sbx_err *err)
{
	const struct sbx_fs_op *op = d->op;

	switch (op->verb) {
	case SBX_FS_READ:
		return transfer(d, op->path, -1, 0, op->fd, err);
	case SBX_FS_WRITE:
		return fs_write(d, err);
	case SBX_FS_LS:
		return fs_ls(d, false, err);
	case SBX_FS_STAT:
		return fs_ls(d, true, err);
	case SBX_FS_RM:
		return fs_rm(d, err);
	case SBX_FS_MKDIR:
		return fs_mkdir(d, err);
	case SBX_FS_MV:
		return call(d, "POST",
			    url_of(d, "/move", "source", op->path, "destination", op->dst), "move",
			    op->path, NULL, err);
	}
	return sbx_err_set(err, SBX_E_INTERNAL, "unknown file verb");
}

int daytona_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	       struct sbx_err *err)
{
	struct dfs d = { .rec = rec, .op = op };

	if (remote_check_running("Daytona", rec, err) < 0 || daytona_remote(&d.r, err) < 0)
		return -1;
	int r = run(&d, err);
	remote_release(&d.r);
	return r;
}
