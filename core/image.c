/* The image store: verified blobs, layers unpacked once and shared, refs naming images. */
#define _GNU_SOURCE
#include "core/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/archive.h"
#include "core/confine.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/util.h"

#define MANIFEST_MAX (4 << 20)

void sbx_image_release(struct sbx_image *img)
{
	free(img->name);
	free(img->id);
	free(img->manifest);
	sbx_strv_free(img->layers);
	sbx_strv_free(img->chain);
	if (img->config)
		json_decref(img->config);
	memset(img, 0, sizeof(*img));
}

static char *images_dir(const struct sbx_store *st)
{
	return xasprintf("%s/images", st->root);
}

static char *blob_path(const struct sbx_store *st, const char *digest)
{
	return xasprintf("%s/images/blobs/sha256/%s", st->root, digest + 7);
}

char *sbx_image_layer_dir(const struct sbx_store *st, const char *digest)
{
	return xasprintf("%s/images/layers/%s", st->root, digest + 7);
}

static int ensure_dirs(const struct sbx_store *st, struct sbx_err *err)
{
	static const char *const sub[] = { "", "/blobs/sha256", "/layers", "/tmp" };

	for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
		_cleanup_free_ char *p = xasprintf("%s/images%s", st->root, sub[i]);
		if (sbx_mkdir_p(p, 0700) < 0)
			return sbx_err_errno(err, "cannot create '%s'", p);
	}
	return 0;
}

/* the store's lock: exclusive while refs.json changes and while prune runs */
static int lock_images(const struct sbx_store *st, bool exclusive, struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/images/lock", st->root);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return sbx_err_errno(err, "cannot open '%s'", p);
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR) {
			close(fd);
			return sbx_err_errno(err, "cannot lock '%s'", p);
		}
	return fd;
}

/* A lease: the digests a pull or an import is about to name (blobs, layer directories), in a
 * file of tmp/ the process holds locked; prune keeps what a live lease lists. A digest enters the
 * lease under the store's shared lock before its blob or directory is looked for, so a prune
 * (under the exclusive lock) either sees it or has finished before the look. */
static struct {
	int fd;
	char *path;
} lease = { -1, NULL };

static int hold(const struct sbx_store *st, const char *digest, struct sbx_err *err)
{
	_cleanup_close_ int lk = lock_images(st, false, err);

	if (lk < 0)
		return -1;
	if (lease.fd < 0) {
		char rnd[SBX_ID_LEN + 1];
		if (sbx_id_generate(rnd, err) < 0)
			return -1;
		char *p = xasprintf("%s/images/tmp/lease-%s", st->root, rnd);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
			sbx_err_errno(err, "cannot create '%s'", p);
			if (fd >= 0) {
				(void)unlink(p);
				close(fd);
			}
			free(p);
			return -1;
		}
		lease.fd = fd;
		lease.path = p;
	}
	_cleanup_free_ char *line = xasprintf("%s\n", digest);
	if (sbx_write_all(lease.fd, line, strlen(line)) < 0)
		return sbx_err_errno(err, "cannot write '%s'", lease.path);
	return 0;
}

static void lease_drop(void)
{
	if (lease.fd >= 0) {
		(void)unlink(lease.path);
		close(lease.fd);
	}
	free(lease.path);
	lease.fd = -1;
	lease.path = NULL;
}

/* what the live leases of tmp/ hold, into keep; dead ones (their process gone) are removed */
static void leases_read(const struct sbx_store *st, json_t *keep)
{
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp", st->root);
	DIR *dp = opendir(tmp);
	struct dirent *de;

	if (!dp)
		return;
	while ((de = readdir(dp))) {
		if (!startswith(de->d_name, "lease-"))
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", tmp, de->d_name);
		_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			(void)unlink(p);
			continue;
		}
		size_t n;
		_cleanup_free_ char *t = sbx_read_file(p, 1 << 20, &n);
		char *save = NULL;
		for (char *l = t ? strtok_r(t, "\n", &save) : NULL; l;
		     l = strtok_r(NULL, "\n", &save))
			if (sbx_digest_valid(l))
				json_object_set_new(keep, l, json_true());
	}
	closedir(dp);
}

static json_t *refs_load(const struct sbx_store *st, struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/images/refs.json", st->root);
	size_t n;
	_cleanup_free_ char *t = sbx_read_file(p, 16 << 20, &n);

	if (!t) {
		if (errno == ENOENT)
			return json_object();
		sbx_err_errno(err, "cannot read '%s'", p);
		return NULL;
	}
	json_t *j = sbx_json_parse(t, n, p, err);
	if (j && !json_is_object(j)) {
		json_decref(j);
		sbx_err_set(err, SBX_E_STATE, "'%s' is not a JSON object; remove it and pull again",
			    p);
		return NULL;
	}
	return j;
}

static int refs_save(const struct sbx_store *st, json_t *refs, struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/images/refs.json", st->root);
	_cleanup_free_ char *t = json_dumps(refs, JSON_INDENT(2) | JSON_SORT_KEYS);

	return sbx_write_atomic(p, t, strlen(t), true, err);
}

static long long file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (long long)st.st_size : 0;
}

/* a blob of the store, parsed (manifests and configs) */
static json_t *blob_json(const struct sbx_store *st, const char *digest, struct sbx_err *err)
{
	if (!sbx_digest_valid(digest)) {
		sbx_err_set(err, SBX_E_USAGE, "invalid digest '%s'", digest);
		return NULL;
	}
	_cleanup_free_ char *p = blob_path(st, digest);
	size_t n;
	_cleanup_free_ char *t = sbx_read_file(p, MANIFEST_MAX, &n);
	if (!t) {
		sbx_err_errno(err, "cannot read blob '%s'", digest);
		return NULL;
	}
	return sbx_json_parse(t, n, digest, err);
}

/* stores data as a blob under its digest (into ret, 72 bytes) */
static int put_blob(const struct sbx_store *st, const char *data, size_t len, char *ret,
		    struct sbx_err *err)
{
	if (sbx_sha256_buf(data, len, ret, err) < 0 || hold(st, ret, err) < 0)
		return -1;
	_cleanup_free_ char *p = blob_path(st, ret);
	if (access(p, F_OK) == 0)
		return 0;
	return sbx_write_atomic(p, data, len, true, err);
}

/* puts a file (of the same filesystem) into the blob store under its digest, checked against
 * want when given */
static int adopt_blob(const struct sbx_store *st, const char *file, const char *want, char *ret,
		      struct sbx_err *err)
{
	if (sbx_sha256_file(file, ret, err) < 0)
		return -1;
	if (want && !streq(want, ret))
		return sbx_err_set(err, SBX_E_USAGE,
				   "blob '%s' does not match its digest (it is %s)", want, ret);
	if (hold(st, ret, err) < 0)
		return -1;
	_cleanup_free_ char *p = blob_path(st, ret);
	/* a link, not a move: an archive may name one file for two images */
	if (link(file, p) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot store blob '%s'", ret);
	return 0;
}

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

/* an unpacking under way: a child unpacks a layer blob into tmp, which becomes dir */
struct unpack_job {
	pid_t pid; /* 0: none */
	int ep;	   /* the child's report */
	char *tmp, *dir, *what;
};

static int unpack_finish(struct unpack_job *j, struct sbx_err *err)
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
			char *const *below, size_t n_below, struct unpack_job *j,
			struct sbx_err *err)
{
	_cleanup_free_ char *dir = sbx_image_layer_dir(st, key);
	_cleanup_free_ char *blob = blob_path(st, digest);
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
	*j = (struct unpack_job){ .pid = pid,
				  .ep = ep[0],
				  .tmp = TAKE_PTR(tmp),
				  .dir = TAKE_PTR(dir),
				  .what = xasprintf("unpacking layer %.19s", digest) };
	return 0;
}

/* the key of layer i (keys[0..i-1] known), held, and its unpacking started */
static int layer_start(const struct sbx_store *st, char *const *layers, char **keys, size_t i,
		       struct unpack_job *j, struct sbx_err *err)
{
	char key[72];

	if (chain_key(i ? keys[i - 1] : NULL, layers[i], key, err) < 0 || hold(st, key, err) < 0)
		return -1;
	keys[i] = xstrdup(key);
	return unpack_start(st, layers[i], key, keys, i, j, err);
}

/* records NAME -> the image whose blobs are in the store, its layers unpacked first */
static int add_ref(struct sbx_store *st, const char *name, const char *manifest, const char *config,
		   char *const *layers, size_t n, struct sbx_err *err)
{
	long long size = 0;
	json_t *ls = json_array(), *cs = json_array();
	char **keys = xcalloc(n + 1, sizeof(char *));

	for (size_t i = 0; i < n; i++) {
		struct unpack_job j;
		if (layer_start(st, layers, keys, i, &j, err) < 0 || unpack_finish(&j, err) < 0) {
			json_decref(ls);
			json_decref(cs);
			sbx_strv_free(keys);
			return -1;
		}
		const char *key = keys[i];
		_cleanup_free_ char *b = blob_path(st, layers[i]);
		size += file_size(b);
		json_array_append_new(ls, json_string(layers[i]));
		json_array_append_new(cs, json_string(key));
	}
	sbx_strv_free(keys);
	json_t *e = json_pack("{s:s, s:s, s:o, s:o, s:I, s:I}", "manifest", manifest, "config",
			      config, "layers", ls, "chain", cs, "size", (json_int_t)size,
			      "created", (json_int_t)(sbx_now_ms() / 1000));
	_cleanup_close_ int lk = lock_images(st, true, err);
	if (lk < 0) {
		json_decref(e);
		return -1;
	}
	json_t *refs = refs_load(st, err);
	if (!refs) {
		json_decref(e);
		return -1;
	}
	json_object_set_new(refs, name, e);
	int r = refs_save(st, refs, err);
	json_decref(refs);
	return r;
}

static bool hex_prefix(const char *s)
{
	if (startswith(s, "sha256:"))
		s += 7;
	size_t n = strlen(s);
	if (n < 4 || n > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static int fill(struct sbx_store *st, const char *name, json_t *e, struct sbx_image *ret,
		struct sbx_err *err)
{
	const char *config = sbx_json_str(e, "config"), *manifest = sbx_json_str(e, "manifest");
	json_t *ls = json_object_get(e, "layers"), *cs = json_object_get(e, "chain");
	size_t n = json_array_size(ls);

	if (!sbx_digest_valid(config) || !sbx_digest_valid(manifest) || !json_is_array(ls) ||
	    json_array_size(cs) != n)
		return sbx_err_set(err, SBX_E_STATE,
				   "the store's entry for '%s' is damaged; "
				   "remove it with 'sbx image rm -f %s' and pull it again",
				   name, name);
	memset(ret, 0, sizeof(*ret));
	ret->config = blob_json(st, config, err);
	if (!ret->config)
		return -1;
	ret->name = name ? xstrdup(name) : NULL;
	ret->id = xstrdup(config);
	ret->manifest = xstrdup(manifest);
	ret->n_layers = n;
	ret->layers = xcalloc(n + 1, sizeof(char *));
	ret->chain = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const char *d = json_string_value(json_array_get(ls, i));
		const char *c = json_string_value(json_array_get(cs, i));
		if (!sbx_digest_valid(d) || !sbx_digest_valid(c)) {
			sbx_image_release(ret);
			return sbx_err_set(err, SBX_E_STATE,
					   "the store's entry for '%s' names an "
					   "invalid layer",
					   name);
		}
		ret->layers[i] = xstrdup(d);
		ret->chain[i] = xstrdup(c);
	}
	ret->size = json_integer_value(json_object_get(e, "size"));
	ret->created = json_integer_value(json_object_get(e, "created"));
	return 0;
}

int sbx_image_find(struct sbx_store *st, const char *ref, struct sbx_image *ret,
		   struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;
	int r;

	if (ensure_dirs(st, err) < 0 || (lk = lock_images(st, false, err)) < 0)
		return -1;
	if (!(refs = refs_load(st, err)))
		return -1;
	struct sbx_ref pr = { 0 };
	struct sbx_err perr = { 0 };
	json_t *e = NULL;
	const char *key = NULL;
	if (sbx_ref_parse(ref, &pr, &perr) == 0)
		e = json_object_get(refs, key = pr.name);
	if (!e && hex_prefix(ref)) {
		/* an id or a prefix of one: every name of one image is fine, two images are not */
		const char *want = startswith(ref, "sha256:") ? ref : NULL;
		_cleanup_free_ char *full = want ? NULL : xasprintf("sha256:%s", ref);
		const char *k;
		json_t *v, *found = NULL;
		json_object_foreach (refs, k, v) {
			const char *id = sbx_json_str(v, "config");
			if (!id || !startswith(id, want ? want : full))
				continue;
			if (found && !streq(sbx_json_str(found, "config"), id)) {
				sbx_ref_release(&pr);
				json_decref(refs);
				return sbx_err_set(err, SBX_E_USAGE,
						   "image id prefix '%s' is "
						   "ambiguous; give more of it",
						   ref);
			}
			found = v;
			key = NULL;
		}
		e = found;
	}
	if (!e) {
		bool bad = perr.kind != SBX_E_NONE && !hex_prefix(ref);
		if (bad)
			*err = perr;
		else
			sbx_err_set(err, SBX_E_NOTFOUND,
				    "no image '%s' in the store (see 'sbx image "
				    "ls'; 'sbx image pull %s' fetches it)",
				    ref, ref);
		sbx_ref_release(&pr);
		json_decref(refs);
		return -1;
	}
	r = fill(st, key, e, ret, err);
	sbx_ref_release(&pr);
	json_decref(refs);
	return r;
}

/* --- pull ------------------------------------------------------------------------------------- */

/* a pull unpacks each layer while the next ones download */
struct pull_state {
	struct sbx_store *st;
	char **layers, **keys;
	struct unpack_job job;
};

static int pull_hold(void *arg, const char *digest, struct sbx_err *err)
{
	return hold(((struct pull_state *)arg)->st, digest, err);
}

static void pull_state_release(struct pull_state *ps)
{
	sbx_strv_free(ps->layers);
	sbx_strv_free(ps->keys);
}

static int pull_fetched(void *arg, size_t i, size_t n, const char *digest, struct sbx_err *err)
{
	struct pull_state *ps = arg;

	if (!ps->layers) {
		ps->layers = xcalloc(n + 1, sizeof(char *));
		ps->keys = xcalloc(n + 1, sizeof(char *));
	}
	ps->layers[i] = xstrdup(digest);
	/* the layer below first: it must be whole before this one is unpacked over it */
	if (unpack_finish(&ps->job, err) < 0)
		return -1;
	return layer_start(ps->st, ps->layers, ps->keys, i, &ps->job, err);
}

int sbx_image_pull(struct sbx_store *st, const char *ref, const struct sbx_image_pull_opts *o,
		   struct sbx_image *ret, struct sbx_err *err)
{
	struct sbx_ref r = { 0 };
	struct sbx_pulled p = { 0 };
	int rc = -1;
	_cleanup_free_ char *dir = images_dir(st);

	if (sbx_ref_parse(ref, &r, err) < 0)
		return -1;
	if (ensure_dirs(st, err) < 0)
		goto out;
	struct sbx_pull_opts po = { .platform = o ? o->platform : NULL,
				    .insecure = o && o->insecure,
				    .progress = o && o->progress };
	struct pull_state ps = { .st = st };
	po.hold = pull_hold;
	po.fetched = pull_fetched;
	po.hold_arg = &ps;
	const char *stall = getenv("SBX_TEST_STALL_TIMEOUT");
	if (stall)
		po.stall_timeout_s = atol(stall);
	if (sbx_registry_pull(&r, &po, dir, &p, err) < 0) {
		struct sbx_err ignored = { 0 };
		(void)unpack_finish(&ps.job, &ignored);
		pull_state_release(&ps);
		goto out;
	}
	rc = unpack_finish(&ps.job, err);
	pull_state_release(&ps);
	if (rc < 0)
		goto out;
	char **layers = xcalloc(p.n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < p.n_layers; i++)
		layers[i] = xstrdup(p.layers[i].digest);
	rc = add_ref(st, r.name, p.manifest_digest, p.config_digest, layers, p.n_layers, err);
	sbx_strv_free(layers);
	if (rc == 0 && ret)
		rc = sbx_image_find(st, r.name, ret, err);
out:
	lease_drop();
	sbx_pulled_release(&p);
	sbx_ref_release(&r);
	return rc;
}

/* --- import ----------------------------------------------------------------------------------- */

/* a file of the unpacked archive, by a name the archive gave (never leaving the directory) */
static char *member(const char *dir, const char *name, struct sbx_err *err)
{
	if (!name || !*name || name[0] == '/' || strstr(name, "..")) {
		sbx_err_set(err, SBX_E_USAGE, "the archive names a file outside itself: '%s'",
			    name ? name : "");
		return NULL;
	}
	char *p = xasprintf("%s/%s", dir, name);
	struct stat st;
	if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
		sbx_err_set(err, SBX_E_USAGE, "the archive lacks '%s' (or it is not a file)", name);
		free(p);
		return NULL;
	}
	return p;
}

/* a manifest for an image that came without one (docker save): the blobs as they are */
static int make_manifest(struct sbx_store *st, const char *config, char *const *layers, size_t n,
			 char *ret, struct sbx_err *err)
{
	json_t *ls = json_array();
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *b = blob_path(st, layers[i]);
		json_array_append_new(ls,
				      json_pack("{s:s, s:s, s:I}", "mediaType",
						"application/vnd.oci.image.layer.v1.tar", "digest",
						layers[i], "size", (json_int_t)file_size(b)));
	}
	_cleanup_free_ char *cb = blob_path(st, config);
	json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
			      "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
			      "application/vnd.oci.image.config.v1+json", "digest", config, "size",
			      (json_int_t)file_size(cb), "layers", ls);
	_cleanup_free_ char *t = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(m);
	return put_blob(st, t, strlen(t), ret, err);
}

static char *norm_name(const char *name, struct sbx_err *err)
{
	struct sbx_ref r = { 0 };
	if (sbx_ref_parse(name, &r, err) < 0)
		return NULL;
	char *n = TAKE_PTR(r.name);
	sbx_ref_release(&r);
	return n;
}

static void add_line(char ***lines, size_t *n, char *line)
{
	*lines = xrealloc(*lines, (*n + 2) * sizeof(char *));
	(*lines)[(*n)++] = line;
	(*lines)[*n] = NULL;
}

static int import_docker(struct sbx_store *st, const char *dir, json_t *mf, char ***lines,
			 size_t *nl, struct sbx_err *err)
{
	size_t i;
	json_t *img;

	if (!json_is_array(mf) || !json_array_size(mf))
		return sbx_err_set(err, SBX_E_USAGE, "manifest.json of the archive lists no image");
	json_array_foreach (mf, i, img) {
		char config[72], manifest[72];
		_cleanup_free_ char *cf = member(dir, sbx_json_str(img, "Config"), err);
		json_t *ls = json_object_get(img, "Layers");
		if (!cf || !json_is_array(ls))
			return cf ? sbx_err_set(err, SBX_E_USAGE, "manifest.json lists no layers")
				  : -1;
		size_t n = json_array_size(ls);
		char **layers = xcalloc(n + 1, sizeof(char *));
		for (size_t k = 0; k < n; k++) {
			char d[72];
			_cleanup_free_ char *lf = member(
				dir, json_string_value(json_array_get(ls, k)), err);
			if (!lf || adopt_blob(st, lf, NULL, d, err) < 0) {
				sbx_strv_free(layers);
				return -1;
			}
			layers[k] = xstrdup(d);
		}
		json_t *cj = NULL;
		if (adopt_blob(st, cf, NULL, config, err) < 0 ||
		    !(cj = blob_json(st, config, err)) ||
		    make_manifest(st, config, layers, n, manifest, err) < 0) {
			if (cj)
				json_decref(cj);
			sbx_strv_free(layers);
			return -1;
		}
		json_decref(cj);
		json_t *tags = json_object_get(img, "RepoTags");
		size_t t;
		json_t *tag;
		int r = 0;
		if (!json_array_size(tags)) {
			/* unnamed: known by its id */
			_cleanup_free_ char *nm = xasprintf("sbx.local/untagged/%.12s:latest",
							    config + 7);
			r = add_ref(st, nm, manifest, config, layers, n, err);
			if (r == 0)
				add_line(lines, nl, xstrdup(config));
		}
		json_array_foreach (tags, t, tag) {
			_cleanup_free_ char *nm = norm_name(json_string_value(tag) ?: "", err);
			if (!nm || (r = add_ref(st, nm, manifest, config, layers, n, err)) < 0) {
				r = -1;
				break;
			}
			add_line(lines, nl, xasprintf("%s %s", json_string_value(tag), config));
		}
		sbx_strv_free(layers);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* an OCI manifest (or, for an index, the linux/amd64 one) in the layout's blobs: in the store */
static int import_oci_manifest(struct sbx_store *st, const char *dir, const char *digest, int depth,
			       const char *name, char ***lines, size_t *nl, struct sbx_err *err)
{
	char got[72];

	if (!sbx_digest_valid(digest))
		return sbx_err_set(err, SBX_E_USAGE, "invalid digest '%s' in the archive",
				   digest ? digest : "");
	if (depth > 2)
		return sbx_err_set(err, SBX_E_USAGE, "the archive's indexes nest too deep");
	_cleanup_free_ char *mp = xasprintf("%s/blobs/sha256/%s", dir, digest + 7);
	size_t n;
	_cleanup_free_ char *text = sbx_read_file(mp, MANIFEST_MAX, &n);
	if (!text)
		return sbx_err_errno(err, "the archive lacks blob '%s' (or it is over 4 MiB)",
				     digest);
	json_t *m = sbx_json_parse(text, n, digest, err);
	if (!m)
		return -1;
	if (sbx_sha256_buf(text, n, got, err) < 0 || !streq(got, digest)) {
		json_decref(m);
		return err->kind != SBX_E_NONE ? -1
					       : sbx_err_set(err, SBX_E_USAGE,
							     "blob '%s' of the archive does "
							     "not match its digest",
							     digest);
	}
	json_t *manifests = json_object_get(m, "manifests");
	if (json_is_array(manifests)) {
		size_t i;
		json_t *d;
		const char *pick = NULL;
		json_array_foreach (manifests, i, d) {
			json_t *pl = json_object_get(d, "platform");
			const char *os = sbx_json_str(pl, "os"),
				   *arch = sbx_json_str(pl, "architecture");
			if (!pl || (os && arch && streq(os, "linux") && streq(arch, "amd64"))) {
				pick = sbx_json_str(d, "digest");
				break;
			}
		}
		int r = pick ? import_oci_manifest(st, dir, pick, depth + 1, name, lines, nl, err)
			     : sbx_err_set(err, SBX_E_USAGE,
					   "the archive's index has no linux/amd64 "
					   "image");
		json_decref(m);
		return r;
	}
	const char *config = sbx_json_str(json_object_get(m, "config"), "digest");
	json_t *ls = json_object_get(m, "layers");
	if (!sbx_digest_valid(config) || !json_is_array(ls)) {
		json_decref(m);
		return sbx_err_set(err, SBX_E_USAGE,
				   "manifest '%s' of the archive has no config or "
				   "layers",
				   digest);
	}
	size_t k, cnt = json_array_size(ls);
	json_t *l;
	char **layers = xcalloc(cnt + 1, sizeof(char *));
	int r = 0;
	char d[72], mdig[72];
	json_array_foreach (ls, k, l) {
		const char *ld = sbx_json_str(l, "digest");
		if (!sbx_digest_valid(ld)) {
			r = sbx_err_set(err, SBX_E_USAGE, "invalid layer digest in manifest '%s'",
					digest);
			break;
		}
		_cleanup_free_ char *rel = xasprintf("blobs/sha256/%s", ld + 7);
		_cleanup_free_ char *f = member(dir, rel, err);
		if (!f || adopt_blob(st, f, ld, d, err) < 0) {
			r = -1;
			break;
		}
		layers[k] = xstrdup(d);
	}
	if (r == 0) {
		_cleanup_free_ char *rel = xasprintf("blobs/sha256/%s", config + 7);
		_cleanup_free_ char *f = member(dir, rel, err);
		json_t *cj = NULL;
		if (!f || adopt_blob(st, f, config, d, err) < 0 ||
		    !(cj = blob_json(st, config, err)) || put_blob(st, text, n, mdig, err) < 0)
			r = -1;
		if (cj)
			json_decref(cj);
	}
	if (r == 0) {
		_cleanup_free_ char *nm = name
			? norm_name(name, err)
			: xasprintf("sbx.local/untagged/%.12s:latest", config + 7);
		if (!nm || add_ref(st, nm, mdig, config, layers, cnt, err) < 0)
			r = -1;
		else
			add_line(lines, nl,
				 name ? xasprintf("%s %s", name, config) : xstrdup(config));
	}
	sbx_strv_free(layers);
	json_decref(m);
	return r;
}

static int import_oci(struct sbx_store *st, const char *dir, json_t *index, char ***lines,
		      size_t *nl, struct sbx_err *err)
{
	json_t *ms = json_object_get(index, "manifests");
	size_t i;
	json_t *d;

	if (!json_array_size(ms))
		return sbx_err_set(err, SBX_E_USAGE, "index.json of the archive lists no image");
	json_array_foreach (ms, i, d) {
		const char *name = sbx_json_str(json_object_get(d, "annotations"),
						"io.containerd.image.name");
		if (!name)
			name = sbx_json_str(json_object_get(d, "annotations"),
					    "org.opencontainers.image.ref.name");
		/* a bare tag ("1.0") names nothing by itself */
		if (name && !strchr(name, ':') && !strchr(name, '/'))
			name = NULL;
		if (import_oci_manifest(st, dir, sbx_json_str(d, "digest"), 0, name, lines, nl,
					err) < 0)
			return -1;
	}
	return 0;
}

struct archive_work {
	int fd;
	const char *dir;
};

static int archive_work(void *arg, struct sbx_err *err)
{
	struct archive_work *w = arg;

	return sbx_archive_extract(w->fd, w->dir, NULL, 0, err);
}

/* unpacks the archive at path (or stdin) into dir, with sbx cp's refusals, in a jail that holds
 * only dir */
static int unpack_archive(const char *store_root, const char *path, const char *dir,
			  struct sbx_err *err)
{
	if (sbx_archive_load(err) < 0)
		return -1;
	int fd = streq(path, "-") ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_errno(err, "cannot open '%s'", path);
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		close(fd);
		return sbx_err_errno(err, "cannot create a pipe");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd);
		close(ep[0]);
		close(ep[1]);
		return sbx_err_errno(err, "cannot fork");
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		close(ep[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		struct archive_work w = { .fd = fd, .dir = dir };
		const struct sbx_jail_tree t = { .path = dir, .ro = false };
		const struct sbx_jail jail = { .trees = &t,
					       .n_trees = 1,
					       .store_root = store_root,
					       .keep = &fd,
					       .n_keep = 1,
					       .what = "reading the image archive" };
		if (sbx_jail_run(&jail, archive_work, &w, &e) == 0) {
			sbx_err_send(ep[1], NULL);
			_exit(0);
		}
		sbx_err_send(ep[1], &e);
		_exit(1);
	}
	close(fd);
	close(ep[1]);
	int r = sbx_err_recv(ep[0], pid, "reading the image archive", err);
	close(ep[0]);
	return r;
}

int sbx_image_import(struct sbx_store *st, const char *path, char ***ret_lines, struct sbx_err *err)
{
	char rnd[SBX_ID_LEN + 1];
	size_t nl = 0;
	int r = -1;

	*ret_lines = NULL;
	if (ensure_dirs(st, err) < 0 || sbx_id_generate(rnd, err) < 0)
		return -1;
	_cleanup_free_ char *dir = xasprintf("%s/images/tmp/import.%s", st->root, rnd);
	_cleanup_free_ char *mfp = xasprintf("%s/manifest.json", dir);
	_cleanup_free_ char *idxp = xasprintf("%s/index.json", dir);
	if (mkdir(dir, 0700) < 0)
		return sbx_err_errno(err, "cannot create '%s'", dir);
	if (unpack_archive(st->root, path, dir, err) < 0)
		goto out;
	size_t n;
	char *t = sbx_read_file(mfp, MANIFEST_MAX, &n);
	if (t) {
		json_t *mf = sbx_json_parse(t, n, "manifest.json", err);
		free(t);
		if (mf) {
			r = import_docker(st, dir, mf, ret_lines, &nl, err);
			json_decref(mf);
		}
		goto out;
	}
	t = sbx_read_file(idxp, MANIFEST_MAX, &n);
	if (t) {
		json_t *idx = sbx_json_parse(t, n, "index.json", err);
		free(t);
		if (idx) {
			r = import_oci(st, dir, idx, ret_lines, &nl, err);
			json_decref(idx);
		}
		goto out;
	}
	sbx_err_set(err, SBX_E_USAGE,
		    "'%s' is neither a docker save archive (manifest.json) nor an "
		    "OCI layout (index.json)",
		    path);
out:
	lease_drop();
	(void)sbx_rm_rf(dir);
	if (r < 0) {
		sbx_strv_free(*ret_lines);
		*ret_lines = NULL;
	}
	return r;
}

static int import_rootfs(struct sbx_store *st, const char *path, const char *name, char **ret_id,
			 struct sbx_err *err)
{
	char rnd[SBX_ID_LEN + 1], layer[72], config[72], manifest[72];
	struct stat sb;

	_cleanup_free_ char *nm = norm_name(name, err);
	if (!nm)
		return -1;
	if (stat(path, &sb) < 0)
		return sbx_err_errno(err, "cannot use '%s'", path);
	if (ensure_dirs(st, err) < 0 || sbx_id_generate(rnd, err) < 0)
		return -1;
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp/rootfs.%s.tar", st->root, rnd);
	int r = -1;
	if (S_ISDIR(sb.st_mode)) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return sbx_err_errno(err, "cannot create '%s'", tmp);
		_cleanup_free_ char *src = xasprintf("%s/.", path);
		struct sbx_cp_src s;
		sbx_cp_src_parse(src, &s);
		r = sbx_archive_pack(fd, &s, false, err);
		sbx_cp_src_release(&s);
		if (close(fd) < 0 && r == 0)
			r = sbx_err_errno(err, "cannot write '%s'", tmp);
	} else {
		/* a tar as it is (compressed or not): its bytes become the layer blob */
		int in = open(path, O_RDONLY | O_CLOEXEC);
		int out = in < 0 ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (in < 0 || out < 0) {
			r = sbx_err_errno(err, "cannot copy '%s'", path);
		} else {
			char buf[65536];
			ssize_t k;
			r = 0;
			while ((k = read(in, buf, sizeof(buf))) > 0)
				if (sbx_write_all(out, buf, (size_t)k) < 0) {
					r = sbx_err_errno(err, "cannot write '%s'", tmp);
					break;
				}
			if (k < 0 && r == 0)
				r = sbx_err_errno(err, "cannot read '%s'", path);
		}
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
	}
	if (r < 0 || adopt_blob(st, tmp, NULL, layer, err) < 0) {
		(void)unlink(tmp);
		return -1;
	}
	(void)unlink(tmp);
	_cleanup_free_ char *created = sbx_time_rfc3339(sbx_now_ms() / 1000);
	json_t *cfg = json_pack("{s:s, s:s, s:s, s:{s:[s]}, s:{s:s, s:[s]}}", "architecture",
				"amd64", "os", "linux", "created", created, "config", "Env",
				"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"rootfs", "type", "layers", "diff_ids", layer);
	_cleanup_free_ char *ct = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(cfg);
	char *layers[] = { layer, NULL };
	if (put_blob(st, ct, strlen(ct), config, err) < 0 ||
	    make_manifest(st, config, layers, 1, manifest, err) < 0 ||
	    add_ref(st, nm, manifest, config, layers, 1, err) < 0)
		return -1;
	*ret_id = xstrdup(config);
	return 0;
}

int sbx_image_import_rootfs(struct sbx_store *st, const char *path, const char *name, char **ret_id,
			    struct sbx_err *err)
{
	int r = import_rootfs(st, path, name, ret_id, err);

	lease_drop();
	return r;
}

/* --- ls, rm, prune ------------------------------------------------------------------------------ */

int sbx_image_list(struct sbx_store *st, json_t **ret, struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;

	if (ensure_dirs(st, err) < 0 || (lk = lock_images(st, false, err)) < 0)
		return -1;
	if (!(refs = refs_load(st, err)))
		return -1;
	json_t *a = json_array();
	const char *k;
	json_t *v;
	json_object_foreach (refs, k, v) {
		_cleanup_free_ char *fam = sbx_ref_familiar(k);
		const char *at = strrchr(fam, '@'), *colon = strrchr(fam, ':');
		if (colon && strchr(colon, '/'))
			colon = NULL; /* a registry's port, not a tag */
		_cleanup_free_ char *repo = at ? xstrndup(fam, (size_t)(at - fam))
			: colon		       ? xstrndup(fam, (size_t)(colon - fam))
					       : xstrdup(fam);
		const char *tag = at ? "<none>" : colon ? colon + 1 : "latest";
		json_array_append_new(
			a,
			json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:O}", "name", k,
				  "repository", repo, "tag", tag, "id",
				  sbx_json_str(v, "config") ?: "", "digest",
				  sbx_json_str(v, "manifest") ?: "", "size",
				  json_integer_value(json_object_get(v, "size")), "created",
				  json_integer_value(json_object_get(v, "created")), "layers",
				  json_object_get(v, "layers") ?: json_array()));
	}
	json_decref(refs);
	*ret = a;
	return 0;
}

/* the image ids and layers the sandboxes of this store were made from */
static void sandbox_uses(struct sbx_store *st, json_t *ids, json_t *layers, json_t *who)
{
	char **v = NULL;
	size_t n = 0;
	struct sbx_err e = { 0 };

	if (sbx_store_list_ids(st, &v, &n, &e) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec = NULL;
		struct sbx_err e2 = { 0 };
		if (sbx_store_load(st, v[i], &rec, &e2) < 0)
			continue;
		const struct sbx_image_config *img = &rec->config.image;
		const char *id = img->id;
		if (id) {
			json_object_set_new(ids, id, json_true());
			if (who && !json_object_get(who, id))
				json_object_set_new(who, id,
						    json_string(rec->name ? rec->name : rec->id));
		}
		for (char **l = img->chain; l && *l; l++)
			json_object_set_new(layers, *l, json_true());
		sbx_record_free(rec);
	}
	sbx_strv_free(v);
}

int sbx_image_rm(struct sbx_store *st, const char *ref, bool force, struct sbx_err *err)
{
	struct sbx_image img = { 0 };

	if (sbx_image_find(st, ref, &img, err) < 0)
		return -1;
	json_t *ids = json_object(), *layers = json_object(), *who = json_object();
	sandbox_uses(st, ids, layers, who);
	const char *user = sbx_json_str(who, img.id);
	int r = 0;
	_cleanup_close_ int lk = -1;
	if (user && !force) {
		r = sbx_err_set(err, SBX_E_STATE,
				"image '%s' is used by sandbox '%s'; remove the "
				"sandbox first, or use 'sbx image rm -f'",
				ref, user);
		goto out;
	}
	lk = lock_images(st, true, err);
	json_t *refs = lk < 0 ? NULL : refs_load(st, err);
	if (!refs) {
		r = -1;
		goto out;
	}
	if (img.name) {
		json_object_del(refs, img.name);
	} else {
		/* by id: every name of that image */
		const char *k;
		json_t *v;
		void *tmp;
		json_object_foreach_safe (refs, tmp, k, v)
			if (streq(sbx_json_str(v, "config") ?: "", img.id))
				json_object_del(refs, k);
	}
	r = refs_save(st, refs, err);
	json_decref(refs);
out:
	json_decref(ids);
	json_decref(layers);
	json_decref(who);
	sbx_image_release(&img);
	return r;
}

int sbx_image_prune(struct sbx_store *st, long long *ret_layers, long long *ret_blobs,
		    long long *ret_bytes, struct sbx_err *err)
{
	_cleanup_close_ int lk = -1;
	json_t *refs;

	*ret_layers = *ret_blobs = *ret_bytes = 0;
	if (ensure_dirs(st, err) < 0 || (lk = lock_images(st, true, err)) < 0)
		return -1;
	if (!(refs = refs_load(st, err)))
		return -1;
	json_t *keep = json_object(), *ids = json_object(), *layers = json_object();
	sandbox_uses(st, ids, layers, NULL);
	const char *k;
	json_t *v;
	json_object_foreach (layers, k, v)
		json_object_set_new(keep, k, json_true());
	json_object_foreach (refs, k, v) {
		size_t i;
		json_t *l;
		json_object_set_new(keep, sbx_json_str(v, "config") ?: "", json_true());
		json_object_set_new(keep, sbx_json_str(v, "manifest") ?: "", json_true());
		json_array_foreach (json_object_get(v, "layers"), i, l)
			if (json_is_string(l))
				json_object_set_new(keep, json_string_value(l), json_true());
		json_array_foreach (json_object_get(v, "chain"), i, l)
			if (json_is_string(l))
				json_object_set_new(keep, json_string_value(l), json_true());
	}
	/* what pulls and imports running now are about to name */
	leases_read(st, keep);
	/* a sandbox's config blob stays too: its record names it */
	json_object_foreach (ids, k, v)
		json_object_set_new(keep, k, json_true());
	static const char *const sub[] = { "layers", "blobs/sha256" };
	for (size_t s = 0; s < ARRAY_SIZE(sub); s++) {
		_cleanup_free_ char *d = xasprintf("%s/images/%s", st->root, sub[s]);
		DIR *dp = opendir(d);
		struct dirent *de;
		if (!dp)
			continue;
		while ((de = readdir(dp))) {
			if (de->d_name[0] == '.')
				continue;
			_cleanup_free_ char *dg = xasprintf("sha256:%s", de->d_name);
			if (json_object_get(keep, dg))
				continue;
			_cleanup_free_ char *p = xasprintf("%s/%s", d, de->d_name);
			if (s == 1) {
				*ret_bytes += file_size(p);
				if (unlink(p) == 0)
					(*ret_blobs)++;
			} else if (sbx_rm_rf(p) == 0) {
				(*ret_layers)++;
			}
		}
		closedir(dp);
	}
	/* what interrupted pulls and imports left (an hour old: one running now keeps its files) */
	_cleanup_free_ char *tmp = xasprintf("%s/images/tmp", st->root);
	DIR *dp = opendir(tmp);
	if (dp) {
		struct dirent *de;
		while ((de = readdir(dp)))
			if (de->d_name[0] != '.' && !startswith(de->d_name, "lease-")) {
				_cleanup_free_ char *p = xasprintf("%s/%s", tmp, de->d_name);
				struct stat sb;
				if (lstat(p, &sb) == 0 &&
				    sb.st_mtime < (time_t)(sbx_now_ms() / 1000) - 3600)
					(void)sbx_rm_rf(p);
			}
		closedir(dp);
	}
	json_decref(keep);
	json_decref(ids);
	json_decref(layers);
	json_decref(refs);
	return 0;
}
