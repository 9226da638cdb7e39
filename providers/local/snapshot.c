/* Snapshots of a local sandbox's files: the tree it wrote (root/, or fs/upper over an image's
 * layers) copied, in a jail that sees only the two trees, into a snapshot; a snapshot copied
 * into a new sandbox (fork, create --from) or over a sandbox's own files (restore). Where the
 * tree is a btrfs subvolume (a store on btrfs), each copy is one snapshot of it instead. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/confine.h"
#include "core/json.h"
#include "core/log.h"
#include "core/proc.h"
#include "core/subvol.h"
#include "core/test-hook.h"
#include "core/treecopy.h"

/* the tree of the sandbox's files, relative to its directory */
static const char *files_of(const struct sbx_record *rec)
{
	return rec->config.image.layers && rec->config.image.layers[0] ? "fs/upper" : "root";
}

struct copy_job {
	const char *src;      /* a directory */
	const char *dst_dir;  /* where dst_name is made */
	const char *dst_name; /* made by the copy (must not exist) */
	const char *swap;     /* restore: exchanged with dst_dir/dst_name once whole, then
			       * removed (it holds the old files then; a subvolume is left for
			       * local_snapshot_discard, outside the jail) */
	bool count;	      /* only count what src holds (into stats) */
	const char *hostname; /* NULL: run/sbx is left as copied */
	const char *hosts;
	uid_t uid; /* of sandbox root, as the jail sees it */
	gid_t gid;
	struct sbx_treecopy_stats stats;
	int stats_fd; /* the job's stats go back through it */
};

/* the sandbox's /etc/hostname and /etc/hosts (bound by init from run/sbx): written by
 * descriptor in the copy, whatever the snapshot held there */
static int write_small(int dir, const char *name, const char *text, uid_t uid, gid_t gid, bool sync,
		       struct sbx_err *err)
{
	struct stat st;
	size_t len = strlen(text);

	/* a file of its own that says so already (a restore of the sandbox's own snapshot) is
	 * left as it is: nothing to write, nothing to sync */
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_nlink == 1 && st.st_uid == uid && st.st_gid == gid &&
	    (st.st_mode & 07777) == 0644 && (size_t)st.st_size == len) {
		char buf[4096];
		_cleanup_close_ int fd = openat(dir, name,
						O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0 && len < sizeof(buf) && read(fd, buf, sizeof(buf)) == (ssize_t)len &&
		    memcmp(buf, text, len) == 0)
			return 0;
	}
	(void)unlinkat(dir, name, 0);
	_cleanup_close_ int fd = openat(dir, name,
					O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fchown(fd, uid, gid) < 0 ||
	    fchmod(fd, 0644) < 0 || (sync && fsync(fd) < 0))
		return sbx_err_errno(err, "cannot write run/sbx/%s", name);
	return 0;
}

static int subdir(int at, const char *name, uid_t uid, gid_t gid, struct sbx_err *err)
{
	struct stat st;

	/* whatever the sandbox left there that is no directory (a link to elsewhere) goes */
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    unlinkat(at, name, 0) < 0)
		return sbx_err_errno(err, "cannot replace '%s'", name);
	if (mkdirat(at, name, 0755) == 0 && fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_errno(err, "cannot create '%s'", name);
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		sbx_err_errno(err, "cannot open '%s'", name);
	return fd;
}

static int copy_tree(struct copy_job *j, int at, struct sbx_err *err);

static int copy_in_jail(void *arg, struct sbx_err *err)
{
	struct copy_job *j = arg;
	_cleanup_close_ int at = open(j->dst_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (j->count) {
		_cleanup_close_ int fd = open(j->src,
					      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || sbx_tree_count(fd, &j->stats, err) < 0)
			return fd < 0 ? sbx_err_errno(err, "cannot open '%s'", j->src) : -1;
		if (write(j->stats_fd, &j->stats, sizeof(j->stats)) != sizeof(j->stats))
			return sbx_err_errno(err, "cannot report the count");
		return 0;
	}
	if (at < 0)
		return sbx_err_errno(err, "cannot open '%s'", j->dst_dir);
	_cleanup_free_ char *dst = xasprintf("%s/%s", j->dst_dir, j->dst_name);
	/* what a restore killed midway left */
	if (j->swap && sbx_rm_rf(dst) < 0)
		return sbx_err_errno(err, "cannot remove '%s'", dst);
	if (copy_tree(j, at, err) == 0)
		return 0;
	/* nothing half-made stays */
	if (sbx_rm_rf(dst) < 0)
		sbx_warn("cannot remove '%s': %s", dst, strerror(errno));
	return -1;
}

static int copy_tree(struct copy_job *j, int at, struct sbx_err *err)
{
	_cleanup_close_ int src = open(j->src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (src < 0)
		return sbx_err_errno(err, "cannot open '%s'", j->src);
	/* a subvolume: one snapshot of it, whatever it holds (what fails there is copied). Not
	 * one that holds subvolumes the sandbox made: a snapshot would leave them out (btrfs puts
	 * an empty directory in their place), the copy does not */
	j->stats.subvol = !j->stats.test_enospc && sbx_subvol_root_fd(src) &&
		sbx_subvol_has_nested(src) == 0 && sbx_subvol_snapshot(src, at, j->dst_name) == 0;
	if (!j->stats.subvol && mkdirat(at, j->dst_name, 0700) < 0)
		return sbx_err_errno(err, "cannot create '%s/%s'", j->dst_dir, j->dst_name);
	_cleanup_close_ int dst = openat(at, j->dst_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dst < 0)
		return sbx_err_errno(err, "cannot open '%s/%s'", j->dst_dir, j->dst_name);
	if (!j->stats.subvol && sbx_tree_copy(src, dst, true, &j->stats, err) < 0)
		return -1;
	if (j->hostname) {
		_cleanup_close_ int run = subdir(dst, "run", j->uid, j->gid, err);
		_cleanup_close_ int sbx = run >= 0 ? subdir(run, "sbx", j->uid, j->gid, err) : -1;
		bool sync = j->stats.subvol;
		if (sbx < 0 ||
		    write_small(sbx, "hostname", j->hostname, j->uid, j->gid, sync, err) < 0 ||
		    write_small(sbx, "hosts", j->hosts, j->uid, j->gid, sync, err) < 0 ||
		    (sync && fsync(sbx) < 0))
			return -1;
	}
	/* on disk before it is taken for whole; a btrfs snapshot is (its creation commits), and
	 * what was written in it since is synced above */
	if (!j->stats.subvol && syncfs(dst) < 0)
		return sbx_err_errno(err, "cannot write '%s/%s'", j->dst_dir, j->dst_name);
	if (j->swap) {
		if (renameat2(at, j->dst_name, at, j->swap, RENAME_EXCHANGE) < 0)
			return sbx_err_errno(err, "cannot put the files in place in '%s'",
					     j->dst_dir);
		/* the old files, now where the new were: the exchange is done, so a failure
		 * here leaves only a directory the next restore removes */
		_cleanup_free_ char *old = xasprintf("%s/%s", j->dst_dir, j->dst_name);
		if (!j->stats.subvol && sbx_rm_rf(old) < 0)
			sbx_warn("cannot remove '%s': %s", old, strerror(errno));
	}
	if (write(j->stats_fd, &j->stats, sizeof(j->stats)) != sizeof(j->stats))
		return sbx_err_errno(err, "cannot report the copy");
	return 0;
}

static int jail_maps(pid_t pid, void *map)
{
	return local_write_maps(pid, map);
}

/* runs j in a jail that sees src (read-only) and j->dst_dir, with the ids of the sandbox's
 * map m (root's range as itself; the caller's uid, and subordinate ids, as the sandbox has
 * them) */
static int run_copy(struct sbx_ctx *ctx, struct copy_job *j, const struct local_idmap *m,
		    struct sbx_err *err)
{
	struct sbx_jail_tree trees[2] = { { .path = j->src, .ro = true },
					  { .path = j->dst_dir, .ro = false } };
	int p[2];

	/* the jail's environment is empty: the fault is read here */
	j->stats.test_enospc = sbx_test_fail("treecopy-write");
	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_errno(err, "cannot create a pipe");
	j->stats_fd = p[1];
	struct sbx_jail jail = { .trees = trees,
				 .n_trees = 2,
				 .store_root = ctx->store.root,
				 .keep = &p[1],
				 .n_keep = 1,
				 .what = "copying the sandbox's files",
				 .maps = m->kind == LOCAL_MAP_SUBID ? jail_maps : NULL,
				 .maps_arg = (void *)m };
	int r = sbx_jail_run(&jail, copy_in_jail, j, err);
	close(p[1]);
	if (r == 0 && read(p[0], &j->stats, sizeof(j->stats)) != sizeof(j->stats))
		memset(&j->stats, 0, sizeof(j->stats));
	close(p[0]);
	return r;
}

static int refuse_disk(const struct sbx_record *rec, const char *what, struct sbx_err *err)
{
	if (local_disk_size(rec) > 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "sandbox '%s' keeps its files on a disk of its own (--disk), "
				   "which %s does not support",
				   rec->name ? rec->name : rec->id, what);
	return 0;
}

/* the sandbox's files copied by j, a running sandbox frozen meanwhile, and only then: a note
 * says who froze it, so that a snapshot killed meanwhile does not leave it frozen (the next
 * look at it thaws it) */
static int capture(struct sbx_ctx *ctx, const struct sbx_record *rec, struct copy_job *j,
		   const struct local_idmap *m, struct sbx_err *err)
{
	struct local_pids pids;
	bool thaw = false;
	_cleanup_free_ char *note = xasprintf("%s/snapshot-freeze", rec->dir);

	if (rec->state == SBX_STATE_RUNNING && local_read_pids(rec->dir, &pids) == 0) {
		unsigned long long start = 0;
		(void)sbx_proc_starttime(getpid(), &start);
		_cleanup_free_ char *who = xasprintf("%d %llu\n", (int)getpid(), start);
		if (sbx_write_atomic(note, who, strlen(who), false, err) < 0)
			return -1;
		if (local_freeze(rec->dir, &pids, true, err) < 0) {
			(void)unlink(note);
			return sbx_err_prefix(err, "cannot freeze sandbox '%s' for the snapshot",
					      rec->id);
		}
		thaw = true;
	}
	sbx_test_hook("snapshot-frozen");
	int r = run_copy(ctx, j, m, err);
	if (thaw) {
		struct sbx_err e2 = { 0 };
		if (local_freeze(rec->dir, &pids, false, &e2) < 0) {
			if (r == 0)
				*err = e2;
			r = -1;
		} else {
			(void)unlink(note);
		}
	}
	return r;
}

static int remove_tree(struct sbx_ctx *ctx, const char *path, const struct local_idmap *m,
		       struct sbx_err *err);

int local_snapshot(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *dest,
		   json_t *info, struct sbx_err *err)
{
	struct local_idmap m;

	if (refuse_disk(rec, "snapshot", err) < 0)
		return -1;
	local_idmap_of(rec, &m);
	_cleanup_free_ char *src = xasprintf("%s/%s", rec->dir, files_of(rec));
	_cleanup_free_ char *dir = xstrdup(dest);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return sbx_err_set(err, SBX_E_SYSTEM, "bad snapshot path '%s'", dest);
	*slash = 0;
	struct copy_job j = { .src = src, .dst_dir = dir, .dst_name = slash + 1 };
	if (capture(ctx, rec, &j, &m, err) < 0)
		return -1;
	if (j.stats.subvol) {
		/* one btrfs snapshot: what it holds is counted once the sandbox runs again, in
		 * the sandbox's own tree (whose inodes are in memory; the snapshot's are not yet) */
		struct copy_job c = { .src = src, .dst_dir = dir, .count = true };
		if (run_copy(ctx, &c, &m, err) < 0)
			return -1;
		j.stats = c.stats;
	}
	json_object_set_new(info, "files", json_string(files_of(rec)));
	json_object_set_new(info, "id_map", local_idmap_json(&m));
	json_object_set_new(info, "map_kind", json_integer(m.kind));
	json_object_set_new(info, "size", json_integer((json_int_t)j.stats.size));
	json_object_set_new(info, "file_count",
			    json_integer((json_int_t)(j.stats.files + j.stats.dirs)));
	return 0;
}

bool local_snapshot_froze(const char *dir)
{
	_cleanup_free_ char *note = xasprintf("%s/snapshot-freeze", dir);
	_cleanup_free_ char *text = sbx_read_file(note, 64, NULL);
	int pid = 0;
	unsigned long long start = 0;

	if (!text)
		return false;
	if (sscanf(text, "%d %llu", &pid, &start) == 2 && pid > 0 &&
	    sbx_proc_alive((pid_t)pid, start))
		return false;
	(void)unlink(note);
	return true;
}

/* the snapshot fits this sandbox: the same kind of tree, the same image, the same id map */
static int fits(const struct sbx_record *rec, const json_t *info, const struct local_idmap *m,
		struct sbx_err *err)
{
	const char *files = sbx_json_str(info, "files");
	const char *img = sbx_json_str(info, "image_id");
	const char *mine = rec->config.image.id;

	if (!files || !streq(files, files_of(rec)) || (img && !mine) || (!img && mine) ||
	    (img && mine && !streq(img, mine)))
		return sbx_err_set(err, SBX_E_STATE,
				   "the snapshot was taken of a sandbox on %s%s, and sandbox '%s' "
				   "runs on %s%s: they do not fit",
				   img ? "image " : "the host's system", img ? img : "",
				   rec->name ? rec->name : rec->id,
				   mine ? "image " : "the host's system", mine ? mine : "");
	if (sbx_json_int(info, "map_kind", -1) != (long long)m->kind)
		return sbx_err_set(err, SBX_E_STATE,
				   "the snapshot's files are owned by other ids than sandbox '%s' "
				   "maps (made by another user, or with other subordinate ids)",
				   rec->name ? rec->name : rec->id);
	return 0;
}

/* the id map of the sandbox the snapshot goes into */
static void map_for(const struct sbx_record *rec, bool replace, struct local_idmap *m)
{
	local_idmap_of(rec, m);
	if (!replace && !(rec->extra && json_object_get(rec->extra, "uid_count")))
		local_idmap_find(m); /* a sandbox being made: its map is this caller's now */
}

int local_snapshot_check(const struct sbx_record *rec, const json_t *info, bool replace,
			 struct sbx_err *err)
{
	struct local_idmap m;

	if (refuse_disk(rec, replace ? "restore" : "a fork", err) < 0)
		return -1;
	map_for(rec, replace, &m);
	return fits(rec, info, &m, err);
}

int local_snapshot_unpack(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *tree,
			  const json_t *info, bool replace, const char *hostname, const char *hosts,
			  struct sbx_err *err)
{
	struct local_idmap m;

	if (local_snapshot_check(rec, info, replace, err) < 0)
		return -1;
	map_for(rec, replace, &m);
	bool image = streq(files_of(rec), "fs/upper");
	_cleanup_free_ char *dir = xasprintf(image ? "%s/fs" : "%s", rec->dir);
	const char *name = image ? "upper" : "root";
	struct copy_job j = { .src = tree,
			      .dst_dir = dir,
			      .dst_name = replace ? "restore.new" : name,
			      .swap = replace ? name : NULL,
			      .hostname = hostname,
			      .hosts = hosts,
			      .uid = m.kind == LOCAL_MAP_RANGE ? LOCAL_UID_BASE : 0,
			      .gid = m.kind == LOCAL_MAP_RANGE ? LOCAL_UID_BASE : 0 };
	return run_copy(ctx, &j, &m, err);
}

void local_snapshot_discard(struct sbx_ctx *ctx, const struct sbx_record *rec)
{
	struct local_idmap m;
	bool image = streq(files_of(rec), "fs/upper");
	_cleanup_free_ char *old = xasprintf(image ? "%s/fs/restore.new" : "%s/restore.new",
					     rec->dir);
	struct stat st;
	struct sbx_err e = { 0 };

	if (lstat(old, &st) < 0)
		return;
	map_for(rec, true, &m);
	if (remove_tree(ctx, old, &m, &e) < 0)
		sbx_warn("cannot remove the old files: %s (the next restore does)", e.msg);
}

/* a snapshot's files, removed in a jail of the map they were made with */
struct rm_job {
	const char *path;
};

static int rm_in_jail(void *arg, struct sbx_err *err)
{
	const struct rm_job *j = arg;
	_cleanup_close_ int fd = open(j->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(TAKE_FD(fd)) : NULL;
	struct dirent *de;
	int r = 0;

	if (!d)
		return sbx_err_errno(err, "cannot open '%s'", j->path);
	/* a subvolume made read-only (by hand) is writable again */
	if (sbx_subvol_root_fd(dirfd(d)))
		(void)sbx_subvol_set_writable(dirfd(d));
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", j->path, de->d_name);
		if (sbx_rm_rf(p) < 0 && r == 0)
			r = sbx_err_errno(err, "cannot remove '%s'", p);
	}
	closedir(d);
	return r;
}

int local_snapshot_rm(struct sbx_ctx *ctx, const char *path, const json_t *info,
		      struct sbx_err *err)
{
	struct local_idmap m;
	json_t *uid = json_object_get(json_object_get(info, "id_map"), "uid");
	json_t *gid = json_object_get(json_object_get(info, "id_map"), "gid");

	/* the map its files were made with: the record's, or this caller's for one that has none
	 * (killed before it was written) */
	if (info && sbx_json_int(info, "map_kind", -1) != LOCAL_MAP_SUBID)
		return sbx_rm_rf(path) < 0 ? sbx_err_errno(err, "cannot remove '%s'", path) : 0;
	if (info) {
		json_t *u1 = json_array_get(uid, 1), *g1 = json_array_get(gid, 1);
		m = (struct local_idmap){
			.kind = LOCAL_MAP_SUBID,
			.sub_uid = (unsigned long)json_integer_value(json_array_get(u1, 1)),
			.sub_gid = (unsigned long)json_integer_value(json_array_get(g1, 1)),
			.count = (unsigned long)json_integer_value(json_array_get(u1, 2)),
		};
		if (!m.sub_uid || !m.sub_gid || !m.count)
			return sbx_err_set(err, SBX_E_STATE, "the snapshot's id map is broken");
	} else {
		local_idmap_find(&m);
	}
	return remove_tree(ctx, path, &m, err);
}

/* the tree path removed: by the caller, or, with subordinate ids, what it holds in a jail of
 * the map m, and then path itself (the caller's) */
static int remove_tree(struct sbx_ctx *ctx, const char *path, const struct local_idmap *m,
		       struct sbx_err *err)
{
	if (m->kind != LOCAL_MAP_SUBID)
		return sbx_rm_rf(path) < 0 ? sbx_err_errno(err, "cannot remove '%s'", path) : 0;
	/* a subvolume, at once where the filesystem lets this caller */
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		_cleanup_close_ int at = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (at >= 0 && fstatat(at, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    sbx_subvol_root(at, slash + 1, &st) && sbx_subvol_destroy(at, slash + 1) == 0)
			return 0;
	}
	struct sbx_jail_tree tree = { .path = path, .ro = false };
	struct rm_job j = { .path = path };
	struct sbx_jail jail = { .trees = &tree,
				 .n_trees = 1,
				 .store_root = ctx->store.root,
				 .what = "removing a snapshot's files",
				 .maps = jail_maps,
				 .maps_arg = (void *)m };
	if (sbx_jail_run(&jail, rm_in_jail, &j, err) < 0)
		return -1;
	return rmdir(path) < 0 && errno != ENOENT ? sbx_err_errno(err, "cannot remove '%s'", path)
						  : 0;
}
