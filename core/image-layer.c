/* Image layers: each unpacked once, in a jailed child, under its chain key; an image recorded. */
#define _GNU_SOURCE
#include "core/image-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/confine.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/util.h"

/* owners kept, shifted into the range root-run sandboxes map; when that range does not exist
 * here (an ordinary user, or root of a user namespace without it), the caller owns everything */
static long image_shift(void)
{
	return sbx_ids_mapped(SBX_IMAGE_ID_SHIFT, 65536) ? SBX_IMAGE_ID_SHIFT : -1;
}

/* A layer's directory is named by its chain key: the blob's digest for the base layer, and
 * sha256("KEY-BELOW BLOB") above it (docker's ChainID, over blob digests): what a layer
 * unpacks to depends on the layers below (see sbx_archive_unpack_layer), so it is shared only
 * by images that agree on everything under it. */
static int chain_key(const char *below, const char *blob, char *ret, struct sbx_err *err)
{
	if (!below) {
		snprintf(ret, 72, "%s", blob);
		return 0;
	}
	_cleanup_free_ char *t = xasprintf("%s %s", below, blob);
	return sbx_sha256_buf(t, strlen(t), ret, err);
}

int img_unpack_finish(struct img_unpack_job *j, struct sbx_err *err)
{
	int r = 0;

	if (!j->pid)
		return 0;
	r = sbx_err_recv(j->ep, j->pid, j->what, err);
	close(j->ep);
	if (r < 0) {
		(void)sbx_rm_rf(j->tmp);
	} else if (rename(j->tmp, j->dir) < 0) {
		int e = errno;
		(void)sbx_rm_rf(j->tmp);
		if (e != EEXIST && e != ENOTEMPTY) /* another pull won: its copy is as good */
			r = (errno = e, sbx_err_errno(err, "cannot store layer '%s'", j->dir));
	}
	free(j->tmp);
	free(j->dir);
	free(j->what);
	memset(j, 0, sizeof(*j));
	return r;
}

/* a layer's unpacking, in a jail that holds only the new layer's directory (writable) and the
 * layers below it (read-only, for the modes of the directories it implies) */
struct layer_work {
	int fd; /* the blob */
	const char *dest;
	long shift;
	char **lowers; /* topmost first */
	size_t n_lowers;
};

static int unpack_work(void *arg, struct sbx_err *err)
{
	struct layer_work *w = arg;

	umask(0);
	return sbx_archive_unpack_layer(w->fd, w->dest, w->shift, w->lowers, w->n_lowers, err);
}

static int unpack_jailed(const struct sbx_store *st, struct layer_work *w, struct sbx_err *err)
{
	struct sbx_jail_tree *t = xcalloc(w->n_lowers + 1, sizeof(*t));
	t[0] = (struct sbx_jail_tree){ .path = w->dest, .ro = false };
	for (size_t i = 0; i < w->n_lowers; i++)
		t[i + 1] = (struct sbx_jail_tree){ .path = w->lowers[i], .ro = true };
	const struct sbx_jail jail = { .trees = t,
				       .n_trees = w->n_lowers + 1,
				       .store_root = st->root,
				       .keep = &w->fd,
				       .n_keep = 1,
				       .what = "unpacking the layer" };
	int r = sbx_jail_run(&jail, unpack_work, w, err);
	free(t);
	return r;
}

/* starts unpacking a layer blob into layers/KEY, over the layers below (their keys, base
 * first; they must be unpacked already), unless it is there; a child does it (the unpacker
 * changes directory), and unpack_finish waits for it */
static int unpack_start(const struct sbx_store *st, const char *digest, const char *key,
			char *const *below, size_t n_below, struct img_unpack_job *j,
			struct sbx_err *err)
{
	_cleanup_free_ char *dir = sbx_image_layer_dir(st, key);
	_cleanup_free_ char *blob = img_blob_path(st, digest);
	char rnd[SBX_ID_LEN + 1];

	memset(j, 0, sizeof(*j));
	if (access(dir, F_OK) == 0)
		return 0;
	/* loaded here, from the host's libraries: the jail has none to load */
	if (sbx_archive_load(err) < 0 || sbx_id_generate(rnd, err) < 0)
		return -1;
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp/layer-%.12s.%s", st->root, digest + 7,
					     rnd);
	long shift = image_shift();
	if (mkdir(tmp, 0755) < 0)
		return sbx_err_errno(err, "cannot create '%s'", tmp);
	if (shift >= 0 && chown(tmp, (uid_t)shift, (gid_t)shift) < 0) {
		sbx_err_errno(err, "cannot hand '%s' to sandboxes", tmp);
		(void)sbx_rm_rf(tmp);
		return -1;
	}
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		sbx_err_errno(err, "cannot create a pipe");
		(void)sbx_rm_rf(tmp);
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		sbx_err_errno(err, "cannot fork");
		close(ep[0]);
		close(ep[1]);
		(void)sbx_rm_rf(tmp);
		return -1;
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		close(ep[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		struct layer_work w = { .dest = tmp, .shift = shift, .n_lowers = n_below };
		w.lowers = xcalloc(n_below + 1, sizeof(char *));
		for (size_t i = 0; i < n_below; i++)
			w.lowers[i] = sbx_image_layer_dir(st, below[n_below - 1 - i]);
		w.fd = open(blob, O_RDONLY | O_CLOEXEC);
		if (w.fd < 0)
			sbx_err_errno(&e, "cannot open layer blob '%s'", digest);
		else if (unpack_jailed(st, &w, &e) == 0) {
			sbx_err_send(ep[1], NULL);
			_exit(0);
		}
		sbx_err_send(ep[1], &e);
		_exit(1);
	}
	close(ep[1]);
	*j = (struct img_unpack_job){ .pid = pid,
				      .ep = ep[0],
				      .tmp = TAKE_PTR(tmp),
				      .dir = TAKE_PTR(dir),
				      .what = xasprintf("unpacking layer %.19s", digest) };
	return 0;
}

/* the key of layer i (keys[0..i-1] known), held, and its unpacking started */
int img_layer_start(const struct sbx_store *st, char *const *layers, char **keys, size_t i,
		    struct img_unpack_job *j, struct sbx_err *err)
{
	char key[72];

	if (chain_key(i ? keys[i - 1] : NULL, layers[i], key, err) < 0 ||
	    img_hold(st, key, err) < 0)
		return -1;
	keys[i] = xstrdup(key);
	return unpack_start(st, layers[i], key, keys, i, j, err);
}

/* records NAME -> the image whose blobs are in the store, its layers unpacked first */
int img_add_ref(struct sbx_store *st, const char *name, const char *manifest, const char *config,
		char *const *layers, size_t n, const char *origin, struct sbx_err *err)
{
	long long size = 0;
	json_t *ls = json_array(), *cs = json_array();
	char **keys = xcalloc(n + 1, sizeof(char *));

	for (size_t i = 0; i < n; i++) {
		struct img_unpack_job j;
		if (img_layer_start(st, layers, keys, i, &j, err) < 0 ||
		    img_unpack_finish(&j, err) < 0) {
			json_decref(ls);
			json_decref(cs);
			sbx_strv_free(keys);
			return -1;
		}
		const char *key = keys[i];
		_cleanup_free_ char *b = img_blob_path(st, layers[i]);
		size += img_file_size(b);
		json_array_append_new(ls, json_string(layers[i]));
		json_array_append_new(cs, json_string(key));
	}
	sbx_strv_free(keys);
	json_t *e = json_pack("{s:s, s:s, s:o, s:o, s:I, s:I, s:s}", "manifest", manifest, "config",
			      config, "layers", ls, "chain", cs, "size", (json_int_t)size,
			      "created", (json_int_t)(sbx_now_ms() / 1000), "origin", origin);
	_cleanup_close_ int lk = img_lock_images(st, true, err);
	if (lk < 0) {
		json_decref(e);
		return -1;
	}
	json_t *refs = img_refs_load(st, err);
	if (!refs) {
		json_decref(e);
		return -1;
	}
	/* a named image is no longer known by its id alone */
	img_refs_drop_unnamed(refs, config);
	json_object_set_new(refs, name, e);
	int r = img_refs_save(st, refs, err);
	json_decref(refs);
	return r;
}

/* --- names of the image's users and groups (COPY --chown) ------------------------------- */

/* the text of path in the top layer of blobs that has an entry there, read beneath the layer's
 * directory without following a link (a layer is content a registry chose), into *ret: NULL if
 * none has, or the top one's is no regular file (a whiteout, a link); -1 when a layer cannot be
 * unpacked or opened */
static int layer_file(const struct sbx_store *st, char *const *blobs, size_t n, const char *path,
		      char **ret, struct sbx_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	_cleanup_(strv_freep) char **keys = xcalloc(n + 1, sizeof(char *));

	/* unpacked where they are not yet (a build's own layers), as an image's are */
	for (size_t i = 0; i < n; i++) {
		struct img_unpack_job j;
		if (img_layer_start(st, blobs, keys, i, &j, err) < 0 ||
		    img_unpack_finish(&j, err) < 0)
			return -1;
	}
	*ret = NULL;
	for (size_t i = n; i-- > 0;) {
		_cleanup_free_ char *d = sbx_image_layer_dir(st, keys[i]);
		_cleanup_close_ int dir = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dir < 0)
			return sbx_err_errno(err, "cannot open layer %.19s", blobs[i]);
		_cleanup_close_ int fd = (int)syscall(SYS_openat2, dir, path, &how, sizeof(how));
		struct stat st_;
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd >= 0 && fstat(fd, &st_) == 0 && S_ISREG(st_.st_mode) &&
		    !(*ret = sbx_read_fd(fd, 4 << 20, NULL)))
			return sbx_err_errno(err, "cannot read %s in layer %.19s", path, blobs[i]);
		return 0;
	}
	return 0;
}

/* the id (the third field) of name in a passwd or group text */
static bool db_id(const char *text, const char *name, long *ret)
{
	size_t len = strlen(name);

	for (const char *l = text; l && *l;) {
		const char *nl = strchrnul(l, '\n');
		if ((size_t)(nl - l) > len && !strncmp(l, name, len) && l[len] == ':') {
			const char *f = memchr(l + len + 1, ':', (size_t)(nl - l - (long)len - 1));
			long long v;
			_cleanup_free_ char *id = f ? xstrndup(f + 1, strcspn(f + 1, ":\n")) : NULL;
			if (id && sbx_parse_int(id, 0, 0x7fffffff, &v) == 0) {
				*ret = (long)v;
				return true;
			}
			return false;
		}
		l = *nl ? nl + 1 : nl;
	}
	return false;
}

/* name (a number, or a name in the image's file: "etc/passwd", "etc/group") -> its id */
static int one_id(const struct sbx_store *st, char *const *blobs, size_t n, const char *name,
		  const char *file, const char *what, long *ret, struct sbx_err *err)
{
	long long x;

	if (sbx_parse_int(name, 0, 0x7fffffff, &x) == 0) {
		*ret = (long)x;
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	if (layer_file(st, blobs, n, file, &text, err) < 0)
		return -1;
	if (text && db_id(text, name, ret))
		return 0;
	if (!streq(name, "root"))
		return sbx_err_set(err, SBX_E_USAGE, "no %s '%s' in the image's /%s", what, name,
				   file);
	*ret = 0;
	return 0;
}

int sbx_image_chown_ids(const struct sbx_store *st, char *const *blobs, size_t n, const char *spec,
			long *uid, long *gid, struct sbx_err *err)
{
	_cleanup_free_ char *u = xstrdup(spec);
	char *g = strchr(u, ':');

	if (g)
		*g++ = 0;
	if (!*u || (g && !*g))
		return sbx_err_set(err, SBX_E_USAGE, "give USER[:GROUP]");
	/* numbers are ids as they are; a user without a group gives its uid as the gid too */
	if (one_id(st, blobs, n, u, "etc/passwd", "user", uid, err) < 0)
		return -1;
	if (!g)
		*gid = *uid;
	else if (one_id(st, blobs, n, g, "etc/group", "group", gid, err) < 0)
		return -1;
	return 0;
}
