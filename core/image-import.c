/* sbx image import: docker save and OCI-layout archives, and one-layer images from a rootfs. */
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

static char *norm_name(const char *name, struct sbx_err *err)
{
	struct sbx_ref r = { 0 };
	if (sbx_ref_parse(name, &r, err) < 0)
		return NULL;
	char *n = TAKE_PTR(r.name);
	sbx_ref_release(&r);
	return n;
}

/* --name: the name of the archive's one image without a name of its own */
struct import_names {
	const char *name;
	bool used;
};

static void add_line(char ***lines, size_t *n, char *line)
{
	*lines = xrealloc(*lines, (*n + 2) * sizeof(char *));
	(*lines)[(*n)++] = line;
	(*lines)[*n] = NULL;
}

/* the line import prints for an image recorded under key: "NAME ID", or the id alone */
static char *name_line(const char *key, const char *config)
{
	if (streq(key, config))
		return xstrdup(config);
	_cleanup_free_ char *fam = sbx_ref_familiar(key);
	return xasprintf("%s %s", fam, config);
}

/* what an image the archive does not name is recorded under: NAME given to --name (once: it
 * names one image), else the image's id; a bare tag the archive gives ("1.0") goes with a NAME
 * given without one */
static char *unnamed_key(struct import_names *in, const char *config, const char *bare,
			 struct sbx_err *err)
{
	if (!in->name)
		return xstrdup(config);
	if (in->used) {
		sbx_err_set(err, SBX_E_USAGE,
			    "the archive holds more than one image without a name, and --name "
			    "names one; import without --name, then 'sbx image tag ID NAME'");
		return NULL;
	}
	in->used = true;
	const char *slash = strrchr(in->name, '/');
	bool has_tag = strchr(slash ? slash : in->name, ':') || strchr(in->name, '@');
	_cleanup_free_ char *full = bare && !has_tag ? xasprintf("%s:%s", in->name, bare)
						     : xstrdup(in->name);
	return norm_name(full, err);
}

static int import_docker(struct sbx_store *st, const char *dir, json_t *mf, char ***lines,
			 size_t *nl, struct import_names *in, struct sbx_err *err)
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
			if (!lf || img_adopt_blob(st, lf, NULL, d, err) < 0) {
				sbx_strv_free(layers);
				return -1;
			}
			layers[k] = xstrdup(d);
		}
		json_t *cj = NULL;
		if (img_adopt_blob(st, cf, NULL, config, err) < 0 ||
		    !(cj = img_blob_json(st, config, err)) ||
		    img_make_manifest(st, config, layers, n, manifest, err) < 0) {
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
			/* unnamed: --name's, or known by its id */
			_cleanup_free_ char *nm = unnamed_key(in, config, NULL, err);
			r = nm ? img_add_ref(st, nm, manifest, config, layers, n, "imported", err)
			       : -1;
			if (r == 0)
				add_line(lines, nl, name_line(nm, config));
		}
		json_array_foreach (tags, t, tag) {
			_cleanup_free_ char *nm = norm_name(json_string_value(tag) ?: "", err);
			if (!nm ||
			    (r = img_add_ref(st, nm, manifest, config, layers, n, "imported",
					     err)) < 0) {
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
			       const char *name, const char *bare, char ***lines, size_t *nl,
			       struct import_names *in, struct sbx_err *err)
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
		int r = pick ? import_oci_manifest(st, dir, pick, depth + 1, name, bare, lines, nl,
						   in, err)
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
		if (!f || img_adopt_blob(st, f, ld, d, err) < 0) {
			r = -1;
			break;
		}
		layers[k] = xstrdup(d);
	}
	if (r == 0) {
		_cleanup_free_ char *rel = xasprintf("blobs/sha256/%s", config + 7);
		_cleanup_free_ char *f = member(dir, rel, err);
		json_t *cj = NULL;
		if (!f || img_adopt_blob(st, f, config, d, err) < 0 ||
		    !(cj = img_blob_json(st, config, err)) ||
		    img_put_blob(st, text, n, mdig, err) < 0)
			r = -1;
		if (cj)
			json_decref(cj);
	}
	if (r == 0) {
		_cleanup_free_ char *nm = name ? norm_name(name, err)
					       : unnamed_key(in, config, bare, err);
		if (!nm || img_add_ref(st, nm, mdig, config, layers, cnt, "imported", err) < 0)
			r = -1;
		else
			add_line(lines, nl,
				 name ? xasprintf("%s %s", name, config) : name_line(nm, config));
	}
	sbx_strv_free(layers);
	json_decref(m);
	return r;
}

static int import_oci(struct sbx_store *st, const char *dir, json_t *index, char ***lines,
		      size_t *nl, struct import_names *in, struct sbx_err *err)
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
		const char *bare = NULL;
		if (name && !strchr(name, ':') && !strchr(name, '/')) {
			bare = name;
			name = NULL;
		}
		if (import_oci_manifest(st, dir, sbx_json_str(d, "digest"), 0, name, bare, lines,
					nl, in, err) < 0)
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

int sbx_image_import(struct sbx_store *st, const char *path, const char *name, char ***ret_lines,
		     struct sbx_err *err)
{
	struct import_names in = { .name = name };
	char rnd[SBX_ID_LEN + 1];
	size_t nl = 0;
	int r = -1;

	*ret_lines = NULL;
	if (img_ensure_dirs(st, err) < 0 || sbx_id_generate(rnd, err) < 0)
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
			r = import_docker(st, dir, mf, ret_lines, &nl, &in, err);
			json_decref(mf);
		}
		goto out;
	}
	t = sbx_read_file(idxp, MANIFEST_MAX, &n);
	if (t) {
		json_t *idx = sbx_json_parse(t, n, "index.json", err);
		free(t);
		if (idx) {
			r = import_oci(st, dir, idx, ret_lines, &nl, &in, err);
			json_decref(idx);
		}
		goto out;
	}
	sbx_err_set(err, SBX_E_USAGE,
		    "'%s' is neither a docker save archive (manifest.json) nor an "
		    "OCI layout (index.json)",
		    path);
out:
	img_lease_drop();
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
	if (img_ensure_dirs(st, err) < 0 || sbx_id_generate(rnd, err) < 0)
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
	if (r < 0 || img_adopt_blob(st, tmp, NULL, layer, err) < 0) {
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
	if (img_put_blob(st, ct, strlen(ct), config, err) < 0 ||
	    img_make_manifest(st, config, layers, 1, manifest, err) < 0 ||
	    img_add_ref(st, nm, manifest, config, layers, 1, "imported", err) < 0)
		return -1;
	*ret_id = xstrdup(config);
	return 0;
}

int sbx_image_import_rootfs(struct sbx_store *st, const char *path, const char *name, char **ret_id,
			    struct sbx_err *err)
{
	int r = import_rootfs(st, path, name, ret_id, err);

	img_lease_drop();
	return r;
}
