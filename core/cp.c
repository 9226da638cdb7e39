/* sbx cp: host paths and tar streams to and from SB:PATH, over the providers' cp_in/cp_out. */
#define _GNU_SOURCE
#include "core/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "core/archive.h"
#include "core/confine.h"
#include "core/log.h"
#include "providers/provider.h"

/* SB's record and provider, with the sandbox's lock held (shared, as exec holds it) for the
 * whole copy: a pause, a release, a resume or an rm waits for the copy to end, and the copy
 * never meets a sandbox half-way through one of them */
static int resolve(struct sbx_ctx *ctx, const char *sb, bool out, int *ret_lock,
		   struct sbx_record **ret_rec, const struct sbx_provider **ret_p,
		   struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_free_ char *id = NULL;
	const struct sbx_provider *p;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, false, err);
	if (lk < 0 || sbx_sandbox_open(ctx, id, &rec, &p, err) < 0)
		return -1;
	if (out ? !p->cp_out : !p->cp_in)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support cp",
				   p->name);
	/* a reader that goes away is an EPIPE error of whoever writes, never a silent death */
	signal(SIGPIPE, SIG_IGN);
	/* before any child: conversion tables from the host's files, once */
	sbx_confine_prepare();
	*ret_lock = TAKE_FD(lk);
	*ret_rec = TAKE_PTR(rec);
	*ret_p = p;
	return 0;
}

int sbx_sandbox_cp_in(struct sbx_ctx *ctx, const char *sb, int tar_fd, const char *dest,
		      const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;

	if (resolve(ctx, sb, false, &lk, &rec, &p, err) < 0)
		return -1;
	sbx_debug("cp: tar stream into %s:%s (provider %s)", rec->id, dest, p->name);
	if (p->cp_in(ctx, rec, tar_fd, dest, opts, err) < 0)
		return sbx_err_prefix(err, "cannot copy standard input to '%s:%s'", sb, dest);
	return 0;
}

int sbx_sandbox_cp_out(struct sbx_ctx *ctx, const char *sb, const char *src, int tar_fd,
		       const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;

	if (resolve(ctx, sb, true, &lk, &rec, &p, err) < 0)
		return -1;
	sbx_debug("cp: tar stream of %s:%s (provider %s)", rec->id, src, p->name);
	if (p->cp_out(ctx, rec, src, tar_fd, opts, err) < 0)
		return sbx_err_prefix(err, "cannot copy '%s:%s' to standard output", sb, src);
	return 0;
}

/* the host's half of a copy, in a child: packs src onto fd, or unpacks fd at dest */
struct host_job {
	int fd;
	int other_fd;		      /* the pipe's other end, closed in the child */
	const struct sbx_cp_src *src; /* pack */
	bool follow;
	const char *dest; /* unpack */
	const char *top;
	unsigned flags;
	const char *tree; /* unpack: the one directory the jailed unpacker sees */
	const char *store_root;
};

static int extract_in_jail(void *arg, struct sbx_err *err)
{
	const struct host_job *j = arg;

	return sbx_archive_extract(j->fd, j->dest, j->top, j->flags, err);
}

/* unpacks what a sandbox (or a provider) packed: in a jail that holds only the destination */
static int jailed_extract(const struct host_job *j, struct sbx_err *err)
{
	const struct sbx_jail_tree tree = { .path = j->tree, .ro = false };
	const struct sbx_jail jail = { .trees = &tree,
				       .n_trees = 1,
				       .store_root = j->store_root,
				       .keep = &j->fd,
				       .n_keep = 1,
				       .what = "unpacking" };

	return sbx_jail_run(&jail, extract_in_jail, (void *)j, err);
}

static int host_start(const struct host_job *j, pid_t *ret_pid, int *ret_efd, struct sbx_err *err)
{
	int efd[2];
	pid_t parent = getpid();

	if (pipe2(efd, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(efd[0]);
		close(efd[1]);
		return sbx_err_errno(err, "cannot start the copy");
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		close(efd[0]);
		close(j->other_fd);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(1);
		int r = j->src ? sbx_archive_pack(j->fd, j->src, j->follow, &e)
			       : jailed_extract(j, &e);
		sbx_err_send(efd[1], r < 0 ? &e : NULL);
		_exit(r < 0 ? 1 : 0);
	}
	close(efd[1]);
	*ret_pid = pid;
	*ret_efd = efd[0];
	return 0;
}

/* one outcome from both halves: the source's failure explains the sink's (a truncated stream),
 * unless the source only saw its reader go away, which the sink's failure explains */
static int outcome(int src_r, const struct sbx_err *src_err, int sink_r,
		   const struct sbx_err *sink_err, struct sbx_err *err)
{
	if (src_r < 0 && src_err->errnum != EPIPE) {
		*err = *src_err;
		return -1;
	}
	if (sink_r < 0) {
		*err = *sink_err;
		return -1;
	}
	if (src_r < 0)
		sbx_debug("cp: the reader finished before the writer: %s", src_err->msg);
	return 0;
}

/* host_src, parsed as src, into the sandbox: a child packs, the provider unpacks */
static int from_host(struct sbx_ctx *ctx, const struct sbx_record *rec,
		     const struct sbx_provider *p, const struct sbx_cp_src *src, const char *dest,
		     const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	struct sbx_err serr = { 0 }, kerr = { 0 };
	struct stat st;
	int pp[2], efd;
	pid_t pid;

	if ((opts->follow_links || src->want_dir ? stat(src->path, &st) : lstat(src->path, &st)) <
	    0) {
		if (errno == ENOENT)
			return sbx_err_set(err, SBX_E_NOTFOUND, "'%s' does not exist", src->path);
		return sbx_err_errno(err, "cannot read '%s'", src->path);
	}
	if (src->want_dir && !S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is not a directory", src->path);
	if (pipe2(pp, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	struct host_job j = {
		.fd = pp[1], .other_fd = pp[0], .src = src, .follow = opts->follow_links
	};
	if (host_start(&j, &pid, &efd, err) < 0) {
		close(pp[0]);
		close(pp[1]);
		return -1;
	}
	close(pp[1]);
	struct sbx_cp_opts o = *opts;
	o.top = src->top;
	sbx_debug("cp: %s into %s:%s (provider %s, top '%s')", src->path, rec->id, dest, p->name,
		  src->top);
	int sink = p->cp_in(ctx, rec, pp[0], dest, &o, &kerr);
	close(pp[0]);
	int source = sbx_err_recv(efd, pid, "packing", &serr);
	close(efd);
	return outcome(source, &serr, sink, &kerr, err);
}

int sbx_sandbox_cp_from_host(struct sbx_ctx *ctx, const char *host_src, const char *sb,
			     const char *dest, const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;
	struct sbx_cp_src src;

	if (resolve(ctx, sb, false, &lk, &rec, &p, err) < 0)
		return -1;
	if (sbx_archive_load(err) < 0)
		return -1;
	sbx_cp_src_parse(host_src, &src);
	int r = from_host(ctx, rec, p, &src, dest, opts, err);
	sbx_cp_src_release(&src);
	if (r < 0)
		return sbx_err_prefix(err, "cannot copy '%s' to '%s:%s'", host_src, sb, dest);
	return 0;
}

/* the one directory the host side of a copy out may write: the destination when it is a
 * directory, otherwise its parent (which must exist), resolved; *ret_dest is the destination
 * as seen from there (resolved too: the jail holds no other path) */
static int host_tree(const char *dest, char **ret_tree, char **ret_dest, struct sbx_err *err)
{
	_cleanup_free_ char *d = xstrdup(dest);
	size_t n = strlen(d);
	bool slash = false;
	struct stat st;

	while (n > 1 && d[n - 1] == '/') {
		d[--n] = 0;
		slash = true;
	}
	if (stat(d, &st) == 0 && S_ISDIR(st.st_mode)) {
		char *t = realpath(d, NULL);
		if (!t)
			return sbx_err_errno(err, "cannot use '%s'", d);
		*ret_dest = xasprintf("%s%s", t, slash && !streq(t, "/") ? "/" : "");
		*ret_tree = t;
		return 0;
	}
	_cleanup_free_ char *dir = xstrdup(d);
	char *s = strrchr(dir, '/');
	const char *base = s ? s + 1 : d;
	if (!s)
		dir[0] = '.', dir[1] = 0;
	else if (s == dir)
		s[1] = 0;
	else
		*s = 0;
	char *t = realpath(dir, NULL);
	if (!t && errno == ENOENT)
		return sbx_err_set(err, SBX_E_NOTFOUND, "directory '%s' does not exist", dir);
	if (!t)
		return sbx_err_errno(err, "cannot use '%s'", dir);
	if (stat(t, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(t);
		return sbx_err_set(err, SBX_E_USAGE, "'%s' is not a directory", dir);
	}
	*ret_dest = xasprintf("%s%s%s%s", t, streq(t, "/") ? "" : "/", base, slash ? "/" : "");
	*ret_tree = t;
	return 0;
}

/* SB:src out onto the host: the provider packs, a jailed child unpacks at host_dest */
static int to_host(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_provider *p,
		   const char *src, const char *top, const char *host_dest,
		   const struct sbx_cp_opts *opts, struct sbx_err *err)
{
	struct sbx_err serr = { 0 }, kerr = { 0 };
	int pp[2], efd;
	pid_t pid;

	_cleanup_free_ char *tree = NULL, *dest = NULL;
	if (host_tree(host_dest, &tree, &dest, err) < 0)
		return -1;
	if (pipe2(pp, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	struct host_job j = { .fd = pp[0],
			      .other_fd = pp[1],
			      .dest = dest,
			      .top = top,
			      .flags = opts->archive ? SBX_EXTRACT_OWNER : 0,
			      .tree = tree,
			      .store_root = ctx->store.root };
	if (host_start(&j, &pid, &efd, err) < 0) {
		close(pp[0]);
		close(pp[1]);
		return -1;
	}
	close(pp[0]);
	sbx_debug("cp: %s:%s to %s (provider %s, top '%s')", rec->id, src, host_dest, p->name, top);
	int source = p->cp_out(ctx, rec, src, pp[1], opts, &serr);
	close(pp[1]);
	int sink = sbx_err_recv(efd, pid, "unpacking", &kerr);
	close(efd);
	return outcome(source, &serr, sink, &kerr, err);
}

int sbx_sandbox_cp_to_host(struct sbx_ctx *ctx, const char *sb, const char *src,
			   const char *host_dest, const struct sbx_cp_opts *opts,
			   struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;
	struct sbx_cp_src s;

	if (resolve(ctx, sb, true, &lk, &rec, &p, err) < 0)
		return -1;
	if (sbx_archive_load(err) < 0)
		return -1;
	sbx_cp_src_parse(src, &s);
	int r = to_host(ctx, rec, p, src, s.top, host_dest, opts, err);
	sbx_cp_src_release(&s);
	if (r < 0)
		return sbx_err_prefix(err, "cannot copy '%s:%s' to '%s'", sb, src, host_dest);
	return 0;
}
