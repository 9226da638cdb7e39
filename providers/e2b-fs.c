/* sbx fs on E2B: envd's /files for read and write, its filesystem service (Stat, ListDir,
 * MakeDir, Move, Remove) for the rest, as the template's default user. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/e2b.h"

#define LIST_DEPTH_R 64 /* ls -R: the levels ListDir is asked for */

/* a 2xx answer's JSON ({} when empty), NULL with err */
static json_t *answer(const struct sbx_http_resp *resp, struct sbx_err *err)
{
	if (!resp->body.len)
		return json_object();
	return sbx_json_parse(resp->body.buf, resp->body.len, "E2B's answer", err);
}

/* a file call that failed: what the path's error says (not_found, ...), else as exec's */
static int fail(const struct sbx_record *rec, const char *what, const char *path,
		const struct sbx_http_resp *resp, struct sbx_err *err)
{
	struct sbx_err ignored = { 0 };
	_cleanup_json_ json_t *j = resp->body.len
		? sbx_json_parse(resp->body.buf, resp->body.len, "", &ignored)
		: NULL;
	const json_t *code = j ? json_object_get(j, "code") : NULL;
	const char *c = json_is_string(code) ? json_string_value(code) : "";
	_cleanup_free_ char *m = remote_error_message(&resp->body);
	int r;

	if (streq(c, "not_found") || (json_is_integer(code) && json_integer_value(code) == 404))
		r = sbx_err_set(err, SBX_E_NOTFOUND, "cannot %s '%s': it does not exist", what,
				path);
	else if (streq(c, "already_exists"))
		r = sbx_err_set(err, SBX_E_EXISTS, "cannot %s '%s': it exists", what, path);
	else if (streq(c, "invalid_argument") || resp->status == 400)
		r = sbx_err_set(err, SBX_E_USAGE, "cannot %s '%s'%s%s", what, path, *m ? ": " : "",
				m);
	else if (resp->status == 507)
		r = sbx_err_set(err, SBX_E_IO, "cannot %s '%s': the sandbox's disk is full", what,
				path);
	else
		return e2b_envd_failed(rec, what, resp->status, &resp->body, err);
	err->http_status = resp->status;
	return r;
}

/* one filesystem call: *ret its answer (NULL: not wanted); -1 with err */
static int call(const struct sbx_record *rec, const char *method, json_t *msg, const char *what,
		const char *path, json_t **ret, struct sbx_err *err)
{
	struct sbx_http_resp resp;
	_cleanup_free_ char *m = xasprintf("/filesystem.Filesystem/%s", method);
	int r = e2b_envd_rpc(rec, m, msg, &resp, err);

	json_decref(msg);
	if (r < 0)
		sbx_err_prefix(err, "cannot %s '%s'", what, path);
	else if (resp.status < 200 || resp.status >= 300)
		r = fail(rec, what, path, &resp, err);
	else if (ret && !(*ret = answer(&resp, err)))
		r = -1;
	sbx_http_resp_release(&resp);
	return r;
}

/* an EntryInfo as an entry; its strings stay j's */
static void entry_of(const json_t *j, struct sbx_fs_entry *e)
{
	const char *t = sbx_json_str(j, "type");
	const json_t *size = json_object_get(j, "size");

	*e = (struct sbx_fs_entry){ .uid = -1, .gid = -1 };
	e->path = sbx_json_str(j, "path");
	if (!e->path)
		e->path = "";
	e->type = !t				  ? 'o'
		: streq(t, "FILE_TYPE_FILE")	  ? 'f'
		: streq(t, "FILE_TYPE_DIRECTORY") ? 'd'
		: streq(t, "FILE_TYPE_SYMLINK")	  ? 'l'
						  : 'o';
	if (json_is_string(size))
		e->size = strtoll(json_string_value(size), NULL, 10);
	else if (json_is_integer(size))
		e->size = json_integer_value(size);
	e->mode = (unsigned)sbx_json_int(j, "mode", 0) & 0777;
	e->mtime = sbx_fs_parse_time(sbx_json_str(j, "modifiedTime"));
	e->link_target = sbx_json_str(j, "symlinkTarget");
}

static int stat_path(const struct sbx_record *rec, const char *path, const char *what, json_t **ret,
		     struct sbx_err *err)
{
	_cleanup_json_ json_t *a = NULL;

	if (call(rec, "Stat", json_pack("{s:s}", "path", path), what, path, &a, err) < 0)
		return -1;
	json_t *e = json_object_get(a, "entry");
	if (!json_is_object(e))
		return sbx_err_set(err, SBX_E_REMOTE, "cannot %s '%s': E2B answered no entry", what,
				   path);
	*ret = json_incref(e);
	return 0;
}

static int fs_read(const struct sbx_record *rec, const struct sbx_fs_op *op, struct sbx_err *err)
{
	struct sbx_http_resp resp;
	int r = e2b_envd_files(rec, op->path, -1, 0, op->fd, &resp, err);

	if (r < 0)
		sbx_err_prefix(err, "cannot read '%s'", op->path);
	else if (resp.status < 200 || resp.status >= 300)
		r = fail(rec, "read", op->path, &resp, err);
	sbx_http_resp_release(&resp);
	return r;
}

static int fs_write(const struct sbx_record *rec, const struct sbx_fs_op *op, struct sbx_err *err)
{
	_cleanup_close_ int spool = -1;
	long long size;
	struct sbx_http_resp resp;

	if (op->mode >= 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "E2B's file API cannot set a file's mode: write without --mode "
				   "(then 'sbx exec SB chmod')");
	/* its size first: the upload is one body of known length, never held in memory */
	if (remote_spool(op->fd, &spool, &size, err) < 0)
		return -1;
	int r = e2b_envd_files(rec, op->path, spool, size, -1, &resp, err);
	if (r < 0)
		sbx_err_prefix(err, "cannot write '%s'", op->path);
	else if (resp.status < 200 || resp.status >= 300)
		r = fail(rec, "write", op->path, &resp, err);
	sbx_http_resp_release(&resp);
	return r;
}

static int fs_ls(const struct sbx_record *rec, const struct sbx_fs_op *op, bool just_stat,
		 struct sbx_err *err)
{
	_cleanup_json_ json_t *top = NULL, *a = NULL;
	struct sbx_fs_entry one;

	if (stat_path(rec, op->path, just_stat ? "stat" : "list", &top, err) < 0)
		return -1;
	entry_of(top, &one);
	if (just_stat || one.type != 'd')
		return sbx_fs_emit_sorted(&one, 1, op, err);
	json_t *msg = json_pack("{s:s,s:i}", "path", op->path, "depth",
				op->recursive ? LIST_DEPTH_R : 1);
	if (call(rec, "ListDir", msg, "list", op->path, &a, err) < 0)
		return -1;
	json_t *list = json_object_get(a, "entries");
	size_t n = json_array_size(list);
	_cleanup_free_ struct sbx_fs_entry *v = xcalloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		entry_of(json_array_get(list, i), &v[i]);
	return sbx_fs_emit_sorted(v, n, op, err);
}

static int fs_rm(const struct sbx_record *rec, const struct sbx_fs_op *op, struct sbx_err *err)
{
	_cleanup_json_ json_t *e = NULL;
	struct sbx_fs_entry st;

	if (stat_path(rec, op->path, "remove", &e, err) < 0)
		return op->force && err->kind == SBX_E_NOTFOUND ? (sbx_err_clear(err), 0) : -1;
	entry_of(e, &st);
	if (st.type == 'd' && !op->recursive)
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is a directory (remove it with -r)",
				   op->path);
	return call(rec, "Remove", json_pack("{s:s}", "path", op->path), "remove", op->path, NULL,
		    err);
}

static int fs_mkdir(const struct sbx_record *rec, const struct sbx_fs_op *op, struct sbx_err *err)
{
	if (!op->parents) {
		/* MakeDir makes the parents: without -p, the parent must be there */
		_cleanup_free_ char *parent = xstrdup(op->path);
		char *slash = strrchr(parent, '/');
		_cleanup_json_ json_t *e = NULL;
		if (slash && slash != parent) {
			*slash = 0;
			if (stat_path(rec, parent, "create directory", &e, err) < 0)
				return -1;
		}
	}
	int r = call(rec, "MakeDir", json_pack("{s:s}", "path", op->path), "create directory",
		     op->path, NULL, err);
	if (r < 0 && op->parents && err->kind == SBX_E_EXISTS) {
		sbx_err_clear(err);
		return 0;
	}
	return r;
}

int e2b_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	   struct sbx_err *err)
{
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	switch (op->verb) {
	case SBX_FS_READ:
		return fs_read(rec, op, err);
	case SBX_FS_WRITE:
		return fs_write(rec, op, err);
	case SBX_FS_LS:
		return fs_ls(rec, op, false, err);
	case SBX_FS_STAT:
		return fs_ls(rec, op, true, err);
	case SBX_FS_RM:
		return fs_rm(rec, op, err);
	case SBX_FS_MKDIR:
		return fs_mkdir(rec, op, err);
	case SBX_FS_MV:
		return call(rec, "Move",
			    json_pack("{s:s,s:s}", "source", op->path, "destination", op->dst),
			    "move", op->path, NULL, err);
	}
	return sbx_err_set(err, SBX_E_INTERNAL, "unknown file verb");
}
