/* Snapshots of sandboxes' files: the store under $SBX_HOME/snapshots and the verbs over it.
 * A snapshot is built in ID.tmp (its creator holding ID.tmp.lock) and renamed to ID once whole,
 * so a killed snapshot leaves nothing that passes for one; a later call sweeps what it left. */
#define _GNU_SOURCE
#include "core/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/test-hook.h"
#include "providers/provider.h"

static char *snap_root(const struct sbx_store *st)
{
	return xasprintf("%s/snapshots", st->root);
}

static int open_root(const struct sbx_store *st, struct sbx_err *err)
{
	_cleanup_free_ char *root = snap_root(st);
	if (mkdir(root, 0700) < 0 && errno != EEXIST)
		return sbx_err_errno(err, "cannot create '%s'", root);
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		sbx_err_errno(err, "cannot open '%s'", root);
	return fd;
}

/* a lock file under the snapshots directory, flocked; -1 with err (or, nonblocking, errno
 * EWOULDBLOCK and err untouched) */
static int lock_at(int root, const char *name, int op, struct sbx_err *err)
{
	int fd = openat(root, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_err_errno(err, "cannot open the snapshot lock '%s'", name);
	while (flock(fd, op) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		errno = e;
		if (e == EWOULDBLOCK)
			return -1;
		return sbx_err_errno(err, "cannot lock '%s'", name);
	}
	return fd;
}

/* removes a snapshot's directory (path: under root, name) with what made it: files owned by
 * ids the caller cannot remove itself (subordinate ids) go in the provider's jail */
static int remove_dir(struct sbx_ctx *ctx, int root, const char *name)
{
	_cleanup_free_ char *path = xasprintf("%s/snapshots/%s", ctx->store.root, name);
	char rec[PATH_MAX];
	snprintf(rec, sizeof(rec), "%s/snapshot.json", name);
	_cleanup_free_ char *text = sbx_read_fileat(root, rec, 1 << 20, NULL);
	_cleanup_json_ json_t *info = text ? json_loads(text, 0, NULL) : NULL;
	const char *pname = sbx_json_str(info, "provider");
	const struct sbx_provider *p = sbx_provider_find(pname ? pname : "local");

	if (p && p->snapshot_rm) {
		struct sbx_err e = { 0 };
		if (p->snapshot_rm(ctx, path, info, &e) < 0) {
			sbx_debug("cannot remove '%s': %s", path, e.msg);
			errno = e.errnum ? e.errnum : EPERM;
			return -1;
		}
		return 0;
	}
	return sbx_rm_rf(path);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && streq(s + a - b, suffix);
}

/* what killed snapshots (and removals) left: ID.tmp whose ID.tmp.lock nobody holds */
static void sweep(struct sbx_ctx *ctx, int root)
{
	DIR *d = fdopendir(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!ends_with(de->d_name, ".tmp.lock"))
			continue;
		struct sbx_err e = { 0 };
		int lk = lock_at(root, de->d_name, LOCK_EX | LOCK_NB, &e);
		if (lk < 0)
			continue; /* its maker is at work */
		_cleanup_free_ char *tmp = xstrndup(de->d_name, strlen(de->d_name) - 5);
		sbx_debug("removing '%s', left by a snapshot that did not finish", tmp);
		if (remove_dir(ctx, root, tmp) == 0)
			(void)unlinkat(root, de->d_name, 0);
		close(lk);
	}
	closedir(d);
}

static json_t *load_info(int root, const char *id);

/* the sandboxes whose files stack on snapshot id (see struct sbx_provider.snapshot_users) */
static char *users_of(struct sbx_ctx *ctx, int root, const char *id)
{
	_cleanup_json_ json_t *info = load_info(root, id);
	const char *pname = sbx_json_str(info, "provider");
	const struct sbx_provider *p = sbx_provider_find(pname ? pname : "local");

	return p && p->snapshot_users ? p->snapshot_users(ctx, id) : NULL;
}

bool sbx_snapshot_in_use(struct sbx_ctx *ctx, const char *id)
{
	struct sbx_err e = { 0 };
	_cleanup_close_ int root = open_root(&ctx->store, &e);
	_cleanup_free_ char *who = root >= 0 ? users_of(ctx, root, id) : NULL;

	return who != NULL;
}

/* implicit snapshots (a fork's) whose fork is gone, and that no sandbox stacks on */
static void sweep_implicit(struct sbx_ctx *ctx, int root)
{
	DIR *d = fdopendir(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!sbx_id_valid(de->d_name))
			continue;
		_cleanup_json_ json_t *j = load_info(root, de->d_name);
		if (!j || !json_is_true(json_object_get(j, "implicit")))
			continue;
		_cleanup_free_ char *who = users_of(ctx, root, de->d_name);
		if (who)
			continue;
		char lk_name[300], tmp[300], tmplock[300];
		snprintf(lk_name, sizeof(lk_name), "%s/lock", de->d_name);
		snprintf(tmp, sizeof(tmp), "%s.tmp", de->d_name);
		snprintf(tmplock, sizeof(tmplock), "%s.tmp.lock", de->d_name);
		struct sbx_err e = { 0 };
		_cleanup_close_ int lk = lock_at(root, lk_name, LOCK_EX | LOCK_NB, &e);
		if (lk < 0)
			continue;
		_cleanup_close_ int tl = lock_at(root, tmplock, LOCK_EX | LOCK_NB, &e);
		if (tl < 0 || renameat(root, de->d_name, root, tmp) < 0)
			continue;
		sbx_debug("removing snapshot %s, left by a fork that did not finish", de->d_name);
		if (remove_dir(ctx, root, tmp) == 0)
			(void)unlinkat(root, tmplock, 0);
	}
	closedir(d);
}

static json_t *load_info(int root, const char *id)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/snapshot.json", id);
	_cleanup_free_ char *text = sbx_read_fileat(root, path, 1 << 20, NULL);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/* every snapshot's record, oldest first */
static json_t *load_all(int root)
{
	json_t *a = json_array();
	DIR *d = fdopendir(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	struct dirent *de;

	if (!d)
		return a;
	while ((de = readdir(d)))
		if (sbx_id_valid(de->d_name)) {
			json_t *j = load_info(root, de->d_name);
			if (j)
				json_array_append_new(a, j);
		}
	closedir(d);
	/* insertion sort by created_unix, then id: a few hundred at most */
	size_t n = json_array_size(a);
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0; k--) {
			json_t *x = json_array_get(a, k - 1), *y = json_array_get(a, k);
			long long tx = sbx_json_int(x, "created_unix", 0),
				  ty = sbx_json_int(y, "created_unix", 0);
			const char *ix = sbx_json_str(x, "id"), *iy = sbx_json_str(y, "id");
			if (tx < ty || (tx == ty && strcmp(ix ? ix : "", iy ? iy : "") <= 0))
				break;
			json_incref(x);
			json_array_set(a, k - 1, y);
			json_array_set_new(a, k, x);
		}
	return a;
}

static const char *name_owner(const json_t *all, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach (all, i, v) {
		const char *n = sbx_json_str(v, "name");
		if (n && streq(n, name))
			return sbx_json_str(v, "id");
	}
	return NULL;
}

int sbx_snapshot_resolve(struct sbx_store *st, const char *snap, char **ret_id, struct sbx_err *err)
{
	_cleanup_close_ int root = open_root(st, err);
	if (root < 0)
		return -1;
	if (!*snap)
		return sbx_err_set(err, SBX_E_USAGE, "empty snapshot name");
	_cleanup_json_ json_t *all = load_all(root);
	size_t i, hits = 0;
	json_t *v;
	const char *match = NULL;
	json_array_foreach (all, i, v) {
		const char *id = sbx_json_str(v, "id");
		if (id && streq(id, snap)) {
			*ret_id = xstrdup(id);
			return 0;
		}
	}
	const char *named = name_owner(all, snap);
	if (named) {
		*ret_id = xstrdup(named);
		return 0;
	}
	json_array_foreach (all, i, v) {
		const char *id = sbx_json_str(v, "id");
		if (id && startswith(id, snap)) {
			hits++;
			match = id;
		}
	}
	if (hits == 1) {
		*ret_id = xstrdup(match);
		return 0;
	}
	if (hits > 1)
		return sbx_err_set(err, SBX_E_USAGE,
				   "snapshot '%s' is ambiguous: %zu snapshot ids start with it",
				   snap, hits);
	return sbx_err_set(err, SBX_E_NOTFOUND, "no such snapshot: '%s'", snap);
}

int sbx_snapshot_find(struct sbx_store *st, const char *id, json_t **ret_info, char **ret_tree,
		      struct sbx_err *err)
{
	_cleanup_close_ int root = open_root(st, err);
	if (root < 0)
		return -1;
	json_t *j = sbx_id_valid(id) ? load_info(root, id) : NULL;
	if (!j)
		return sbx_err_set(err, SBX_E_NOTFOUND, "no such snapshot: '%s'", id);
	*ret_info = j;
	*ret_tree = xasprintf("%s/snapshots/%s/tree", st->root, id);
	return 0;
}

/* a shared (reading) or exclusive (removing) hold on snapshot id */
static int hold(int root, const char *id, bool exclusive, struct sbx_err *err)
{
	char name[64];
	struct stat st;
	snprintf(name, sizeof(name), "%s/lock", id);
	if (fstatat(root, id, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_set(err, SBX_E_NOTFOUND, "no such snapshot: '%s'", id);
	int fd = lock_at(root, name, exclusive ? LOCK_EX : LOCK_SH, err);
	if (fd < 0) {
		if (err->errnum == ENOENT) {
			sbx_err_clear(err);
			return sbx_err_set(err, SBX_E_NOTFOUND, "no such snapshot: '%s'", id);
		}
		return -1;
	}
	/* removed while we waited */
	if (fstatat(root, id, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		close(fd);
		return sbx_err_set(err, SBX_E_NOTFOUND, "no such snapshot: '%s'", id);
	}
	return fd;
}

static int write_info(int dir, const json_t *info, struct sbx_err *err)
{
	_cleanup_free_ char *text = sbx_json_dump(info, true);
	_cleanup_close_ int fd = openat(dir, "snapshot.json",
					O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    fsync(fd) < 0) {
		if (fd >= 0 && errno == 0)
			errno = ENOSPC;
		return sbx_err_errno(err, "cannot write the snapshot's record");
	}
	return 0;
}

int sbx_snapshot_create(struct sbx_ctx *ctx, const char *sb, const char *name, bool implicit,
			bool memory, json_t **ret, int *ret_hold, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1, root = -1, tmplk = -1, held = -1;
	const struct sbx_provider *p;
	char id[SBX_ID_LEN + 1], tmp[SBX_ID_LEN + 8], tmplock[SBX_ID_LEN + 16];

	if (name && !sbx_name_valid(name))
		return sbx_err_set(err, SBX_E_USAGE,
				   "invalid snapshot name '%s': use letters, digits, '_', '.' and "
				   "'-', starting with a letter or digit, at most %d characters",
				   name, SBX_NAME_MAX);
	if ((root = open_root(&ctx->store, err)) < 0)
		return -1;
	sweep(ctx, root);
	sweep_implicit(ctx, root);
	if (name) {
		_cleanup_json_ json_t *all = load_all(root);
		if (name_owner(all, name))
			return sbx_err_set(err, SBX_E_EXISTS, "a snapshot named '%s' exists", name);
	}
	if (sbx_sandbox_open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	if (!p->snapshot || !(p->caps & SBX_CAP_SNAPSHOT))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' does not support snapshots", p->name);
	if (memory && !(p->caps & SBX_CAP_CHECKPOINT))
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"snapshot create --memory needs --runtime gvisor of the local "
			"provider (provider '%s' cannot write a sandbox's memory to disk)",
			p->name);
	const char *l = rec->name ? rec->name : rec->id;
	if (rec->state != SBX_STATE_RUNNING && rec->state != SBX_STATE_PAUSED &&
	    rec->state != SBX_STATE_RELEASED && rec->state != SBX_STATE_STOPPED)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s; it has no files to snapshot", l,
				   sbx_state_name(rec->state));
	if (sbx_id_generate(id, err) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", id);
	snprintf(tmplock, sizeof(tmplock), "%s.tmp.lock", id);
	if ((tmplk = lock_at(root, tmplock, LOCK_EX, err)) < 0)
		return -1;
	if (mkdirat(root, tmp, 0700) < 0)
		return sbx_err_errno(err, "cannot create a snapshot in '%s/snapshots'",
				     ctx->store.root);
	_cleanup_close_ int dir = openat(root, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *tree = xasprintf("%s/snapshots/%s/tree", ctx->store.root, tmp);
	json_t *info = json_object();
	int r = -1;
	long long now = time(NULL);
	_cleanup_free_ char *when = sbx_time_rfc3339(now);
	json_object_set_new(info, "id", json_string(id));
	json_object_set_new(info, "name", name ? json_string(name) : json_null());
	json_object_set_new(info, "sandbox_id", json_string(rec->id));
	json_object_set_new(info, "sandbox_name", rec->name ? json_string(rec->name) : json_null());
	json_object_set_new(info, "provider", json_string(rec->provider));
	json_object_set_new(info, "image",
			    rec->config.image.ref ? json_string(rec->config.image.ref)
						  : json_null());
	json_object_set_new(info, "image_id",
			    rec->config.image.id ? json_string(rec->config.image.id) : json_null());
	json_object_set_new(info, "created", json_string(when));
	json_object_set_new(info, "created_unix", json_integer(now));
	json_object_set_new(info, "implicit", json_boolean(implicit));
	if (memory)
		json_object_set_new(info, "memory", json_true());
	if (dir < 0) {
		sbx_err_errno(err, "cannot open '%s'", tmp);
		goto out;
	}
	if (p->snapshot(ctx, rec, tree, info, err) < 0) {
		sbx_err_prefix(err, "cannot snapshot sandbox '%s'", l);
		goto out;
	}
	sbx_test_hook("snapshot-before-record");
	if (write_info(dir, info, err) < 0 || fsync(dir) < 0)
		goto out;
	/* an implicit snapshot is held from before it appears */
	if (ret_hold) {
		char lk_name[SBX_ID_LEN + 16];
		snprintf(lk_name, sizeof(lk_name), "%s/lock", tmp);
		if ((held = lock_at(root, lk_name, LOCK_SH, err)) < 0)
			goto out;
	}
	/* the name is claimed and the snapshot appears in one step, under the store's lock */
	{
		_cleanup_close_ int all_lk = lock_at(root, ".lock", LOCK_EX, err);
		if (all_lk < 0)
			goto out;
		_cleanup_json_ json_t *all = load_all(root);
		if (name && name_owner(all, name)) {
			sbx_err_set(err, SBX_E_EXISTS, "a snapshot named '%s' exists", name);
			goto out;
		}
		if (renameat(root, tmp, root, id) < 0 || fsync(root) < 0) {
			sbx_err_errno(err, "cannot save snapshot '%s'", id);
			goto out;
		}
	}
	(void)unlinkat(root, tmplock, 0);
	sbx_debug("snapshot %s of %s made", id, rec->id);
	if (ret_hold)
		*ret_hold = TAKE_FD(held);
	*ret = TAKE_PTR(info);
	return 0;
out : {
	if (remove_dir(ctx, root, tmp) == 0)
		(void)unlinkat(root, tmplock, 0);
	json_decref(info);
	return r;
}
}

void sbx_snapshot_sweep(struct sbx_ctx *ctx)
{
	struct sbx_err e = { 0 };
	struct stat st;
	_cleanup_free_ char *dir = xasprintf("%s/snapshots", ctx->store.root);

	if (stat(dir, &st) < 0)
		return;
	_cleanup_close_ int root = open_root(&ctx->store, &e);
	if (root >= 0)
		sweep_implicit(ctx, root);
}

int sbx_snapshot_list(struct sbx_ctx *ctx, const char *sb, json_t **ret, struct sbx_err *err)
{
	_cleanup_close_ int root = open_root(&ctx->store, err);
	if (root < 0)
		return -1;
	sweep(ctx, root);
	sweep_implicit(ctx, root);
	json_t *all = load_all(root);
	if (!sb) {
		*ret = all;
		return 0;
	}
	_cleanup_free_ char *id = NULL;
	struct sbx_err e = { 0 };
	(void)sbx_store_resolve(&ctx->store, sb, &id, &e);
	json_t *some = json_array();
	size_t i;
	json_t *v;
	json_array_foreach (all, i, v) {
		const char *sid = sbx_json_str(v, "sandbox_id"),
			   *sn = sbx_json_str(v, "sandbox_name");
		if ((id && sid && streq(id, sid)) ||
		    (!id && ((sid && streq(sid, sb)) || (sn && streq(sn, sb)))))
			json_array_append(some, v);
	}
	json_decref(all);
	*ret = some;
	return 0;
}

int sbx_snapshot_rm(struct sbx_ctx *ctx, const char *snap, struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_close_ int root = open_root(&ctx->store, err);

	if (root < 0 || sbx_snapshot_resolve(&ctx->store, snap, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = hold(root, id, true, err);
	if (lk < 0)
		return -1;
	/* the files of forks stand on it (stacked): it goes once they do */
	_cleanup_free_ char *who = users_of(ctx, root, id);
	if (who)
		return sbx_err_set(err, SBX_E_STATE,
				   "snapshot '%s' holds the files that sandboxes stack on (%s): "
				   "remove them first",
				   snap, who);
	char tmp[SBX_ID_LEN + 8], tmplock[SBX_ID_LEN + 16];
	snprintf(tmp, sizeof(tmp), "%s.tmp", id);
	snprintf(tmplock, sizeof(tmplock), "%s.tmp.lock", id);
	_cleanup_close_ int tmplk = lock_at(root, tmplock, LOCK_EX, err);
	if (tmplk < 0)
		return -1;
	/* out of sight in one step; the files go after (a sweep finishes a removal killed) */
	if (renameat(root, id, root, tmp) < 0)
		return sbx_err_errno(err, "cannot remove snapshot '%s'", id);
	if (remove_dir(ctx, root, tmp) < 0)
		return sbx_err_errno(err, "cannot remove '%s/snapshots/%s'", ctx->store.root, tmp);
	(void)unlinkat(root, tmplock, 0);
	return 0;
}

int sbx_snapshot_restore(struct sbx_ctx *ctx, const char *sb, const char *snap, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1, root = -1, slk = -1;
	_cleanup_free_ char *id = NULL, *tree = NULL;
	_cleanup_json_ json_t *info = NULL;
	const struct sbx_provider *p;

	if (sbx_sandbox_open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	if (!p->restore || !(p->caps & SBX_CAP_SNAPSHOT))
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support restore",
				   p->name);
	const char *l = rec->name ? rec->name : rec->id;
	if (rec->state != SBX_STATE_RUNNING && rec->state != SBX_STATE_PAUSED &&
	    rec->state != SBX_STATE_RELEASED && rec->state != SBX_STATE_STOPPED)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; it cannot be restored", l,
				   sbx_state_name(rec->state));
	if ((root = open_root(&ctx->store, err)) < 0 ||
	    sbx_snapshot_resolve(&ctx->store, snap, &id, err) < 0 ||
	    (slk = hold(root, id, false, err)) < 0 ||
	    sbx_snapshot_find(&ctx->store, id, &info, &tree, err) < 0)
		return -1;
	const char *prov = sbx_json_str(info, "provider");
	if (!prov || !streq(prov, rec->provider))
		return sbx_err_set(err, SBX_E_STATE,
				   "snapshot '%s' is of a sandbox of provider '%s', not '%s'", snap,
				   prov ? prov : "?", rec->provider);
	int r = p->restore(ctx, rec, tree, info, err);
	if (r < 0)
		sbx_err_prefix(err, "cannot restore sandbox '%s'", l);
	/* the state it is left in is remembered, whatever happened */
	struct sbx_err e2 = { 0 };
	if (sbx_store_save(&ctx->store, rec, true, r < 0 ? &e2 : err) < 0 && r == 0)
		return -1;
	return r;
}

char *sbx_snapshot_provider(struct sbx_store *st, const char *snap)
{
	_cleanup_free_ char *id = NULL, *tree = NULL;
	_cleanup_json_ json_t *info = NULL;
	struct sbx_err e = { 0 };

	if (sbx_snapshot_resolve(st, snap, &id, &e) < 0 ||
	    sbx_snapshot_find(st, id, &info, &tree, &e) < 0)
		return NULL;
	const char *p = sbx_json_str(info, "provider");
	return p ? xstrdup(p) : NULL;
}

/* a snapshot of processes and memory restores only on the runtime and network it was taken
 * on, which its record names: a fork takes them from it (as a container's restore takes its
 * configuration), and only an option that says otherwise is refused */
static int memory_options(struct sbx_config *c, const json_t *info, const char *snap,
			  struct sbx_err *err)
{
	const char *rt = sbx_json_str(info, "runtime"), *net = sbx_json_str(info, "net");
	char msg[300];

	if (rt && c->runtime && !streq(rt, c->runtime))
		return sbx_err_set(err, SBX_E_USAGE,
				   "snapshot '%s' holds the processes and memory of a sandbox of "
				   "--runtime %s, which restore only there: leave out --runtime %s",
				   snap, rt, c->runtime);
	if (rt && !c->runtime)
		c->runtime = xstrdup(rt);
	if (!net || !streq(net, "none"))
		return 0;
	if (c->net.set && c->net.mode != SBX_NET_NONE)
		return sbx_err_set(err, SBX_E_USAGE,
				   "snapshot '%s' holds the processes and memory of a sandbox on "
				   "--net none, which restore only there: leave out --net",
				   snap);
	c->net.set = true;
	c->net.mode = SBX_NET_NONE;
	c->net.preset = false;
	if (sbx_config_validate(c, msg, sizeof(msg)) < 0)
		return sbx_err_set(err, SBX_E_USAGE, "%s (a fork of snapshot '%s' has --net none)",
				   msg, snap);
	return 0;
}

int sbx_snapshot_prepare_create(struct sbx_ctx *ctx, struct sbx_config *c, const char *provider,
				int *ret_lock, struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL, *tree = NULL;
	_cleanup_json_ json_t *info = NULL;
	_cleanup_close_ int root = open_root(&ctx->store, err);

	if (root < 0 || sbx_snapshot_resolve(&ctx->store, c->from, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = hold(root, id, false, err);
	if (lk < 0 || sbx_snapshot_find(&ctx->store, id, &info, &tree, err) < 0)
		return -1;
	const char *prov = sbx_json_str(info, "provider"), *img = sbx_json_str(info, "image");
	if (!prov || !streq(prov, provider))
		return sbx_err_set(err, SBX_E_USAGE,
				   "snapshot '%s' is of a sandbox of provider '%s', not '%s'",
				   c->from, prov ? prov : "?", provider);
	/* a hosted provider's snapshot is a template of its own: the fork starts from it */
	const char *tpl = sbx_json_str(info, "template");
	if (tpl) {
		if (c->image.ref)
			return sbx_err_set(
				err, SBX_E_USAGE,
				"snapshot '%s' is a template of provider '%s': leave out "
				"--image",
				c->from, provider);
		c->image.ref = xstrdup(tpl);
	} else if (img && !c->image.ref)
		c->image.ref = xstrdup(img);
	else if (!img && c->image.ref)
		return sbx_err_set(
			err, SBX_E_USAGE,
			"snapshot '%s' holds the files of a sandbox on the host's system, "
			"not on an image: leave out --image",
			c->from);
	if (json_is_true(json_object_get(info, "memory")) &&
	    memory_options(c, info, c->from, err) < 0)
		return -1;
	free(c->from);
	c->from = TAKE_PTR(id);
	*ret_lock = TAKE_FD(lk);
	return 0;
}
