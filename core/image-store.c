/* The image store on disk: its directories and lock, leases, refs.json, blobs by digest. */
#define _GNU_SOURCE
#include "core/image-int.h"

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

char *img_dir(const struct sbx_store *st)
{
	return xasprintf("%s/images", st->root);
}

char *img_blob_path(const struct sbx_store *st, const char *digest)
{
	return xasprintf("%s/images/blobs/sha256/%s", st->root, digest + 7);
}

char *sbx_image_layer_dir(const struct sbx_store *st, const char *digest)
{
	return xasprintf("%s/images/layers/%s", st->root, digest + 7);
}

int img_ensure_dirs(const struct sbx_store *st, struct sbx_err *err)
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
int img_lock_images(const struct sbx_store *st, bool exclusive, struct sbx_err *err)
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

int img_hold(const struct sbx_store *st, const char *digest, struct sbx_err *err)
{
	_cleanup_close_ int lk = img_lock_images(st, false, err);

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

void img_lease_drop(void)
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
void img_leases_read(const struct sbx_store *st, json_t *keep)
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

json_t *img_refs_load(const struct sbx_store *st, struct sbx_err *err)
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

int img_refs_save(const struct sbx_store *st, json_t *refs, struct sbx_err *err)
{
	_cleanup_free_ char *p = xasprintf("%s/images/refs.json", st->root);
	_cleanup_free_ char *t = json_dumps(refs, JSON_INDENT(2) | JSON_SORT_KEYS);

	return sbx_write_atomic(p, t, strlen(t), true, err);
}

long long img_file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (long long)st.st_size : 0;
}

/* a blob of the store, parsed (manifests and configs) */
json_t *img_blob_json(const struct sbx_store *st, const char *digest, struct sbx_err *err)
{
	if (!sbx_digest_valid(digest)) {
		sbx_err_set(err, SBX_E_USAGE, "invalid digest '%s'", digest);
		return NULL;
	}
	_cleanup_free_ char *p = img_blob_path(st, digest);
	size_t n;
	_cleanup_free_ char *t = sbx_read_file(p, MANIFEST_MAX, &n);
	if (!t) {
		sbx_err_errno(err, "cannot read blob '%s'", digest);
		return NULL;
	}
	return sbx_json_parse(t, n, digest, err);
}

/* stores data as a blob under its digest (into ret, 72 bytes) */
int img_put_blob(const struct sbx_store *st, const char *data, size_t len, char *ret,
		 struct sbx_err *err)
{
	if (sbx_sha256_buf(data, len, ret, err) < 0 || img_hold(st, ret, err) < 0)
		return -1;
	_cleanup_free_ char *p = img_blob_path(st, ret);
	if (access(p, F_OK) == 0)
		return 0;
	return sbx_write_atomic(p, data, len, true, err);
}

/* puts a file (of the same filesystem) into the blob store under its digest, checked against
 * want when given */
int img_adopt_blob(const struct sbx_store *st, const char *file, const char *want, char *ret,
		   struct sbx_err *err)
{
	if (sbx_sha256_file(file, ret, err) < 0)
		return -1;
	if (want && !streq(want, ret))
		return sbx_err_set(err, SBX_E_USAGE,
				   "blob '%s' does not match its digest (it is %s)", want, ret);
	if (img_hold(st, ret, err) < 0)
		return -1;
	_cleanup_free_ char *p = img_blob_path(st, ret);
	/* a link, not a move: an archive may name one file for two images */
	if (link(file, p) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot store blob '%s'", ret);
	return 0;
}

void img_refs_drop_unnamed(json_t *refs, const char *config)
{
	json_object_del(refs, config);
}

/* the media type of a layer blob, by its first bytes */
static const char *layer_media_type(const char *path)
{
	unsigned char m[4] = { 0 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && read(fd, m, sizeof(m)) == (ssize_t)sizeof(m)) {
		if (m[0] == 0x1f && m[1] == 0x8b)
			return "application/vnd.oci.image.layer.v1.tar+gzip";
		if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
			return "application/vnd.oci.image.layer.v1.tar+zstd";
	}
	return "application/vnd.oci.image.layer.v1.tar";
}

int img_make_manifest(struct sbx_store *st, const char *config, char *const *layers, size_t n,
		      char *ret, struct sbx_err *err)
{
	json_t *ls = json_array();
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *b = img_blob_path(st, layers[i]);
		json_array_append_new(ls,
				      json_pack("{s:s, s:s, s:I}", "mediaType", layer_media_type(b),
						"digest", layers[i], "size",
						(json_int_t)img_file_size(b)));
	}
	_cleanup_free_ char *cb = img_blob_path(st, config);
	json_t *m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
			      "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
			      "application/vnd.oci.image.config.v1+json", "digest", config, "size",
			      (json_int_t)img_file_size(cb), "layers", ls);
	_cleanup_free_ char *t = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(m);
	return img_put_blob(st, t, strlen(t), ret, err);
}
