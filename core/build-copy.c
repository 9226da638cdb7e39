/* sbx image build's COPY and ADD: the context (or another stage) into a staging directory, a layer. */
#define _GNU_SOURCE
#include "core/build-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/digest.h"
#include "core/image-int.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/util.h"

#define COPY_DEPTH_MAX 128
#define COPY_ENTRIES_MAX 200000
#define LINK_MAX_LEN 4096

struct copy_walk {
	struct build *b;
	const struct copy_req *rq;
	struct sbx_sha256 *h; /* the digest of what is read */
	bool write;	      /* into the staging directory (else only digested) */
	char *staging;	      /* the staging root's path (ADD's archives unpack by path) */
	size_t entries;
	struct sbx_err *err;
};

static void hash_str(struct copy_walk *w, const char *s)
{
	sbx_sha256_update(w->h, s, strlen(s) + 1);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the names in a directory, sorted (NULL-terminated) */
static char **names_of(int dfd, struct sbx_err *err)
{
	int fd = dup(dfd);
	DIR *dp = fd < 0 ? NULL : fdopendir(fd);
	if (!dp) {
		if (fd >= 0)
			close(fd);
		sbx_err_errno(err, "cannot list a directory of the context");
		return NULL;
	}
	rewinddir(dp);
	char **v = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(dp))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		v = xrealloc(v, (n + 2) * sizeof(char *));
		v[n++] = xstrdup(de->d_name);
	}
	closedir(dp);
	if (!v)
		v = xcalloc(1, sizeof(char *));
	v[n] = NULL;
	qsort(v, n, sizeof(char *), cmp_names);
	return v;
}

static bool is_archive(const unsigned char *p, size_t n)
{
	return (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) || (n >= 3 && !memcmp(p, "BZh", 3)) ||
		(n >= 6 && !memcmp(p, "\xfd\x37\x7a\x58\x5a\x00", 6)) ||
		(n >= 4 && !memcmp(p, "\x28\xb5\x2f\xfd", 4)) ||
		(n >= 262 && !memcmp(p + 257, "ustar", 5));
}

static int copy_item(struct copy_walk *w, int sfd, const char *name, const char *rel, int dfd,
		     const char *dname, const char *dpath, int depth);

/* what directory sfd holds, into dfd (dpath: its path, for ADD's archives) */
static int copy_children(struct copy_walk *w, int sfd, const char *rel, int dfd, const char *dpath,
			 int depth)
{
	_cleanup_(strv_freep) char **names = names_of(sfd, w->err);
	if (!names)
		return -1;
	for (char **n = names; *n; n++) {
		_cleanup_free_ char *r = *rel ? xasprintf("%s/%s", rel, *n) : xstrdup(*n);
		if (!w->rq->from && sbx_dockerignore_match(w->b->ignore, r))
			continue;
		_cleanup_free_ char *dp = dpath ? xasprintf("%s/%s", dpath, *n) : NULL;
		if (copy_item(w, sfd, *n, r, dfd, *n, dp, depth + 1) < 0)
			return -1;
	}
	return 0;
}

static int copy_file(struct copy_walk *w, int sfd, const char *name, const char *rel, int dfd,
		     const char *dname, const char *dpath, const struct stat *st, int depth)
{
	_cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return sbx_err_errno(w->err, "cannot open '%s' in the context", rel);
	unsigned char head[512];
	ssize_t hn = pread(in, head, sizeof(head), 0);
	bool unpack = w->rq->add && depth == 0 && hn > 0 && is_archive(head, (size_t)hn);
	mode_t mode = w->rq->mode >= 0 ? (mode_t)w->rq->mode : st->st_mode & 07777;
	_cleanup_close_ int out = -1;
	if (w->write && !unpack &&
	    (out = openat(dfd, dname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			  0600)) < 0)
		return sbx_err_errno(w->err, "cannot write '%s'", dname);
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_errno(w->err, "cannot read '%s' in the context", rel);
		if (n == 0)
			break;
		sbx_sha256_update(w->h, buf, (size_t)n);
		if (out >= 0 && sbx_write_all(out, buf, (size_t)n) < 0)
			return sbx_err_errno(w->err, "cannot write '%s'", dname);
	}
	if (out >= 0 && fchmod(out, mode) < 0)
		return sbx_err_errno(w->err, "cannot set the mode of '%s'", dname);
	if (unpack && w->write) {
		/* ADD of a local archive: its entries into the destination directory, never
		 * outside it (sbx_archive_extract's rules: no '..', no absolute names, no writing
		 * through a link) */
		if (lseek(in, 0, SEEK_SET) < 0)
			return sbx_err_errno(w->err, "cannot read '%s' in the context", rel);
		_cleanup_free_ char *into = xstrdup(dpath);
		char *sl = strrchr(into, '/');
		if (sl && w->rq->dest_dir)
			*sl = 0; /* into the destination directory */
		else if (mkdirat(dfd, dname, 0755) < 0 && errno != EEXIST)
			return sbx_err_errno(w->err, "cannot create '%s'", dname);
		if (sbx_archive_extract(in, into, NULL, 0, w->err) < 0)
			return sbx_err_prefix(w->err, "ADD cannot unpack '%s'", rel);
	}
	return 0;
}

static int copy_item(struct copy_walk *w, int sfd, const char *name, const char *rel, int dfd,
		     const char *dname, const char *dpath, int depth)
{
	struct stat st;

	if (++w->entries > COPY_ENTRIES_MAX)
		return sbx_err_set(w->err, SBX_E_USAGE, "the copy holds more than %d files",
				   COPY_ENTRIES_MAX);
	if (depth > COPY_DEPTH_MAX)
		return sbx_err_set(w->err, SBX_E_USAGE, "'%s' nests more than %d deep", rel,
				   COPY_DEPTH_MAX);
	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_errno(w->err, "cannot stat '%s' in the context", rel);
	char tag[64];
	snprintf(tag, sizeof(tag), "%o", (unsigned)st.st_mode);
	hash_str(w, rel);
	hash_str(w, tag);
	if (S_ISREG(st.st_mode))
		return copy_file(w, sfd, name, rel, dfd, dname, dpath, &st, depth);
	if (S_ISLNK(st.st_mode)) {
		/* a link is copied as a link, never followed (docker's rule too) */
		char target[LINK_MAX_LEN];
		ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return sbx_err_errno(w->err, "cannot read the link '%s'", rel);
		target[n] = 0;
		hash_str(w, target);
		if (w->write && symlinkat(target, dfd, dname) < 0)
			return sbx_err_errno(w->err, "cannot write '%s'", dname);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return 0; /* devices, fifos, sockets: nothing a layer of a copy carries */
	_cleanup_close_ int s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0)
		return sbx_err_errno(w->err, "cannot open '%s' in the context", rel);
	_cleanup_close_ int d = -1;
	if (w->write) {
		if (mkdirat(dfd, dname, 0700) < 0 && errno != EEXIST)
			return sbx_err_errno(w->err, "cannot create '%s'", dname);
		d = openat(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d < 0)
			return sbx_err_errno(w->err, "cannot open '%s'", dname);
	}
	if (copy_children(w, s, rel, d, dpath, depth) < 0)
		return -1;
	mode_t mode = w->rq->mode >= 0 ? (mode_t)w->rq->mode : st.st_mode & 07777;
	if (d >= 0 && fchmod(d, mode) < 0)
		return sbx_err_errno(w->err, "cannot set the mode of '%s'", dname);
	return 0;
}

/* a context path (cleaned, relative) opened as (its parent, its name): no component is a link */
static int ctx_parent(struct copy_walk *w, const char *rel, int *ret_fd, const char **ret_name)
{
	int fd = dup(w->b->ctx_fd);
	const char *p = rel;
	for (const char *sl; (sl = strchr(p, '/')); p = sl + 1) {
		_cleanup_free_ char *c = xstrndup(p, (size_t)(sl - p));
		int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		if (nfd < 0) {
			errno = e;
			return e == ELOOP || e == ENOTDIR
				? sbx_err_set(w->err, SBX_E_USAGE,
					      "COPY source '%s': '%s' on its way is no directory "
					      "of the context (a link is not followed)",
					      rel, c)
				: sbx_err_errno(w->err, "COPY source '%s' is not in the context",
						rel);
		}
		fd = nfd;
	}
	*ret_fd = fd;
	*ret_name = p;
	return 0;
}

static bool has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* the paths under dfd a glob matches (sorted; in the context, .dockerignore's aside) */
static int glob_walk(struct copy_walk *w, int dfd, const char *rel, const char *pat, char ***v,
		     size_t *n, int depth, bool context)
{
	_cleanup_(strv_freep) char **names = names_of(dfd, w->err);
	if (!names)
		return -1;
	for (char **nm = names; *nm; nm++) {
		_cleanup_free_ char *r = *rel ? xasprintf("%s/%s", rel, *nm) : xstrdup(*nm);
		if (++w->entries > COPY_ENTRIES_MAX || depth > COPY_DEPTH_MAX)
			return sbx_err_set(w->err, SBX_E_USAGE, "the context is too large to glob");
		if (context && sbx_dockerignore_match(w->b->ignore, r))
			continue;
		if (sbx_glob_match(pat, r)) {
			*v = xrealloc(*v, (*n + 2) * sizeof(char *));
			(*v)[(*n)++] = xstrdup(r);
			(*v)[*n] = NULL;
			continue;
		}
		_cleanup_close_ int c = openat(dfd, *nm,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (c >= 0 && glob_walk(w, c, r, pat, v, n, depth + 1, context) < 0)
			return -1;
	}
	return 0;
}

/* the requested sources as cleaned context paths */
static char **ctx_sources(struct copy_walk *w, struct sbx_err *err)
{
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0;

	for (char **s = w->rq->srcs; *s; s++) {
		const char *p = *s;
		while (*p == '/')
			p++;
		char *c = sbx_df_clean(*p ? p : ".");
		if (!c) {
			sbx_strv_free(v);
			sbx_err_set(err, SBX_E_USAGE,
				    "COPY source '%s' is outside the build context", *s);
			return NULL;
		}
		if (has_glob(c)) {
			size_t before = n;
			w->entries = 0;
			if (glob_walk(w, w->b->ctx_fd, "", c, &v, &n, 0, true) < 0) {
				free(c);
				sbx_strv_free(v);
				return NULL;
			}
			free(c);
			if (n == before) {
				sbx_strv_free(v);
				sbx_err_set(err, SBX_E_USAGE,
					    "COPY source '%s' matches nothing in the context", *s);
				return NULL;
			}
			continue;
		}
		if (!streq(c, ".") && sbx_dockerignore_match(w->b->ignore, c)) {
			sbx_strv_free(v);
			sbx_err_set(err, SBX_E_USAGE,
				    "COPY source '%s' is excluded by .dockerignore", *s);
			free(c);
			return NULL;
		}
		v = xrealloc(v, (n + 2) * sizeof(char *));
		v[n++] = c;
		v[n] = NULL;
	}
	w->entries = 0;
	return v;
}

/* makes the directories of rel (absolute in the image) under root; their fd */
static int mkdirs(int root, const char *rel, struct sbx_err *err)
{
	int fd = dup(root);
	_cleanup_free_ char *t = xstrdup(rel);
	char *save = NULL;
	for (char *c = strtok_r(t, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
			close(fd);
			return sbx_err_errno(err, "cannot create '%s'", c);
		}
		int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
	}
	if (fd < 0)
		sbx_err_errno(err, "cannot create '%s'", rel);
	return fd;
}

/* "a/b/c" -> "a", "a/b", "a/b/c" (upto: how many components) */
static char **ancestors(const char *rel, bool self)
{
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0;
	_cleanup_free_ char *t = sbx_df_clean(rel);
	if (!t || streq(t, "."))
		return v;
	for (char *p = t;; p++) {
		if (*p == '/' || (!*p && self)) {
			v = xrealloc(v, (n + 2) * sizeof(char *));
			v[n++] = xstrndup(t, (size_t)(p - t));
			v[n] = NULL;
		}
		if (!*p)
			break;
	}
	return v;
}

int build_copy_digest(struct build *b, const struct copy_req *rq, char ret[72], struct sbx_err *err)
{
	struct sbx_sha256 h;
	struct copy_walk w = { .b = b, .rq = rq, .h = &h, .err = err };

	if (sbx_sha256_init(&h, err) < 0)
		return -1;
	if (rq->from) {
		/* another stage's files: what made that stage says what they are */
		hash_str(&w, rq->from->key);
		for (char **s = rq->srcs; *s; s++)
			hash_str(&w, *s);
		sbx_sha256_final(&h, ret);
		return 0;
	}
	_cleanup_(strv_freep) char **srcs = ctx_sources(&w, err);
	if (!srcs) {
		sbx_sha256_release(&h);
		return -1;
	}
	for (char **s = srcs; *s; s++) {
		int pfd;
		const char *name;
		if (streq(*s, ".")) {
			hash_str(&w, ".");
			if (copy_children(&w, b->ctx_fd, "", -1, NULL, 0) < 0)
				goto fail;
			continue;
		}
		if (ctx_parent(&w, *s, &pfd, &name) < 0)
			goto fail;
		int r = copy_item(&w, pfd, name, *s, -1, name, NULL, 0);
		close(pfd);
		if (r < 0)
			goto fail;
	}
	sbx_sha256_final(&h, ret);
	return 0;
fail:
	if (err->kind == SBX_E_SYSTEM && err->errnum == ENOENT)
		sbx_err_prefix(err, "COPY");
	sbx_sha256_release(&h);
	return -1;
}

/* one source (or what a glob matched) of --from, unpacked at xfd/name: a directory's contents
 * go into the destination, anything else by its name (or as the destination) */
static int copy_from_one(struct copy_walk *w, int xfd, const char *name, int dfd, const char *dname)
{
	struct stat st;

	if (fstatat(xfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_errno(w->err, "cannot stat '%s'", name);
	if (!S_ISDIR(st.st_mode))
		return copy_item(w, xfd, name, name, dfd,
				 dname			      ? dname
					 : strrchr(name, '/') ? strrchr(name, '/') + 1
							      : name,
				 NULL, 0);
	_cleanup_close_ int c = openat(xfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* into the destination, made when it names the directory itself */
	_cleanup_close_ int into = -1;
	if (dname && mkdirat(dfd, dname, 0755) < 0 && errno != EEXIST)
		return sbx_err_errno(w->err, "cannot create '%s'", dname);
	if (dname &&
	    (into = openat(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return sbx_err_errno(w->err, "cannot open '%s'", dname);
	if (c < 0)
		return sbx_err_errno(w->err, "cannot open '%s'", name);
	return copy_children(w, c, name, dname ? into : dfd, NULL, 0);
}

/* the part of a source before its first component with a pattern ("/" at least), and the
 * pattern after it */
static void glob_split(const char *src, char **ret_dir, char **ret_pat)
{
	_cleanup_free_ char *c = sbx_df_clean(src);
	const char *p = c ? c : ".";
	const char *g = strpbrk(p, "*?[");
	const char *cut = g;
	while (cut > p && cut[-1] != '/')
		cut--;
	*ret_dir = cut > p ? xasprintf("/%.*s", (int)(cut - p - 1), p) : xstrdup("/");
	*ret_pat = xstrdup(cut);
}

/* --from: each source read out of a sandbox of that stage, unpacked into dfd; a pattern reads
 * the directory above its first wildcard and copies what it matches there */
static int copy_from_stage(struct copy_walk *w, const char *tmp, int dfd, const char *dpath,
			   const char *dname)
{
	_cleanup_free_ char *sb = NULL;
	bool added = false;
	if (build_sandbox(w->b, w->rq->from, &sb, &added, w->err) < 0)
		return -1;
	int r = 0;
	size_t i = 0;
	for (char **s = w->rq->srcs; r == 0 && *s; s++, i++) {
		_cleanup_free_ char *gdir = NULL, *pat = NULL;
		if (has_glob(*s))
			glob_split(*s, &gdir, &pat);
		_cleanup_free_ char *tar = xasprintf("%s/from-%zu.tar", tmp, i);
		_cleanup_free_ char *x = xasprintf("%s/from-%zu", tmp, i);
		_cleanup_close_ int fd = open(tar, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		const struct sbx_cp_opts co = { 0 };
		if (fd < 0 || mkdir(x, 0700) < 0)
			r = sbx_err_errno(w->err, "cannot create '%s'", tar);
		else if (sbx_sandbox_cp_out(w->b->ctx, sb, gdir ? gdir : *s, fd, &co, w->err) < 0)
			r = sbx_err_prefix(w->err, "COPY --from");
		else if (lseek(fd, 0, SEEK_SET) < 0)
			r = sbx_err_errno(w->err, "cannot read '%s'", tar);
		else
			r = sbx_archive_extract(fd, x, NULL, 0, w->err);
		if (r < 0)
			break;
		/* the one entry the tar holds: a directory's contents go into the destination,
		 * anything else by its name (or as the destination) */
		_cleanup_close_ int xfd = open(x, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_cleanup_(strv_freep) char **names = xfd < 0 ? NULL : names_of(xfd, w->err);
		if (!names || !names[0]) {
			r = names ? sbx_err_set(w->err, SBX_E_USAGE,
						"COPY --from: '%s' holds nothing", *s)
				  : -1;
			break;
		}
		if (!pat) {
			r = copy_from_one(w, xfd, names[0], dfd, dname);
			continue;
		}
		/* what the pattern matches under the directory read, in order */
		_cleanup_close_ int top = openat(xfd, names[0],
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_(strv_freep) char **m = xcalloc(1, sizeof(char *));
		size_t n = 0;
		w->entries = 0;
		if (top < 0)
			r = sbx_err_set(w->err, SBX_E_USAGE, "COPY --from: '%s' is no directory",
					gdir);
		else if (glob_walk(w, top, "", pat, &m, &n, 0, false) < 0)
			r = -1;
		else if (!n)
			r = sbx_err_set(w->err, SBX_E_USAGE, "COPY --from: '%s' matches nothing",
					*s);
		else if (n > 1 && dname)
			r = sbx_err_set(w->err, SBX_E_USAGE,
					"COPY --from: '%s' matches %zu files: the destination must "
					"be a directory (end it with /)",
					*s, n);
		w->entries = 0;
		for (size_t k = 0; r == 0 && k < n; k++)
			r = copy_from_one(w, top, m[k], dfd, dname);
	}
	build_sandbox_rm(w->b, w->rq->from, sb, added);
	return r;
}

static int make_layer(struct build *b, const char *root, char **bare, long uid, long gid,
		      struct sbx_layer *ret, struct sbx_err *err)
{
	const struct sbx_layer_src src = { .dir = root,
					   .shift = -1,
					   .bare = (const char *const *)bare,
					   .own = true,
					   .uid = uid < 0 ? 0 : uid,
					   .gid = gid < 0 ? (uid < 0 ? 0 : uid) : gid };
	return sbx_image_layer_from_dir(&b->ctx->store, &src, ret, err);
}

static char *staging_dir(struct build *b, struct sbx_err *err)
{
	char rnd[SBX_ID_LEN + 1];
	if (img_ensure_dirs(&b->ctx->store, err) < 0 || sbx_id_generate(rnd, err) < 0)
		return NULL;
	char *d = xasprintf("%s/images/tmp/build.%s", b->ctx->store.root, rnd);
	_cleanup_free_ char *root = xasprintf("%s/root", d);
	if (mkdir(d, 0700) < 0 || mkdir(root, 0755) < 0) {
		sbx_err_errno(err, "cannot create '%s'", d);
		(void)sbx_rm_rf(d);
		free(d);
		return NULL;
	}
	return d;
}

static int copy_into(struct build *b, const struct copy_req *rq, const char *tmp,
		     struct sbx_layer *ret, struct sbx_err *err)
{
	_cleanup_free_ char *root = xasprintf("%s/root", tmp);
	struct sbx_sha256 h;
	struct copy_walk w = { .b = b, .rq = rq, .h = &h, .write = true, .err = err };
	_cleanup_(strv_freep) char **srcs = NULL;
	int r = -1;

	/* the destination: a directory the sources go into, or a file's name */
	_cleanup_free_ char *dest = sbx_df_clean(rq->dest);
	_cleanup_free_ char *dir = NULL;
	const char *dname = NULL;
	if (!dest)
		dest = xstrdup(".");
	if (rq->dest_dir || streq(dest, ".")) {
		dir = xstrdup(dest);
	} else {
		char *sl = strrchr(dest, '/');
		dir = sl ? xstrndup(dest, (size_t)(sl - dest)) : xstrdup(".");
		dname = sl ? sl + 1 : dest;
	}
	_cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return sbx_err_errno(err, "cannot open '%s'", root);
	_cleanup_close_ int dfd = mkdirs(rfd, streq(dir, ".") ? "" : dir, err);
	if (dfd < 0 || sbx_sha256_init(&h, err) < 0)
		return -1;
	_cleanup_free_ char *dpath = xasprintf("%s/%s", root, dir);
	if (rq->from) {
		r = copy_from_stage(&w, tmp, dfd, dpath, dname);
	} else if ((srcs = ctx_sources(&w, err))) {
		r = 0;
		for (char **s = srcs; r == 0 && *s; s++) {
			int pfd;
			const char *name;
			if (streq(*s, ".")) {
				r = copy_children(&w, b->ctx_fd, "", dfd, dpath, 0);
				continue;
			}
			if ((r = ctx_parent(&w, *s, &pfd, &name)) < 0)
				break;
			struct stat st;
			bool isdir = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				S_ISDIR(st.st_mode);
			if (isdir) {
				/* a directory: its contents */
				_cleanup_close_ int c = openat(
					pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				r = c < 0 ? sbx_err_errno(err, "cannot open '%s'", *s)
					  : copy_children(&w, c, *s, dfd, dpath, 0);
			} else {
				const char *to = dname ? dname : name;
				_cleanup_free_ char *tp = xasprintf("%s/%s", dpath, to);
				r = copy_item(&w, pfd, name, *s, dfd, to, tp, 0);
			}
			close(pfd);
		}
	}
	sbx_sha256_release(&h);
	if (r < 0)
		return -1;
	_cleanup_(strv_freep) char **bare = ancestors(dir, true);
	return make_layer(b, root, bare, rq->uid, rq->gid, ret, err);
}

int build_copy_layer(struct build *b, const struct copy_req *rq, struct sbx_layer *ret,
		     struct sbx_err *err)
{
	_cleanup_free_ char *tmp = staging_dir(b, err);
	if (!tmp)
		return -1;
	int r = copy_into(b, rq, tmp, ret, err);
	(void)sbx_rm_rf(tmp);
	return r;
}

static int workdir_into(struct build *b, const char *dir, const char *tmp, struct sbx_layer *ret,
			struct sbx_err *err)
{
	_cleanup_free_ char *root = xasprintf("%s/root", tmp);
	_cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *rel = sbx_df_clean(dir[0] == '/' ? dir + 1 : dir);
	if (rfd < 0)
		return sbx_err_errno(err, "cannot open '%s'", root);
	/* the directories' own entries are left out (an existing one keeps its mode and owner;
	 * a missing one is made by the unpacking); what makes the layer name them is a whiteout
	 * of a name nothing has */
	_cleanup_close_ int dfd = mkdirs(rfd, rel && !streq(rel, ".") ? rel : "", err);
	if (dfd < 0)
		return -1;
	_cleanup_close_ int f = openat(dfd, ".sbx-workdir", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				       0600);
	if (f < 0 || fsetxattr(f, "user.overlay.whiteout", "", 0, 0) < 0)
		return sbx_err_errno(err, "cannot make WORKDIR's layer");
	_cleanup_(strv_freep) char **bare = ancestors(rel ? rel : ".", true);
	return make_layer(b, root, bare, 0, 0, ret, err);
}

int build_workdir_layer(struct build *b, const char *dir, struct sbx_layer *ret,
			struct sbx_err *err)
{
	_cleanup_free_ char *tmp = staging_dir(b, err);
	if (!tmp)
		return -1;
	int r = workdir_into(b, dir, tmp, ret, err);
	(void)sbx_rm_rf(tmp);
	return r;
}
