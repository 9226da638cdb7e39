/* Snapshots of a local sandbox's files: the tree it wrote (root/, or fs/upper over an image's
 * layers) copied, in a jail that sees only the two trees, into a snapshot; a snapshot copied
 * into a new sandbox (fork, create --from) or over a sandbox's own files (restore). Where the
 * tree is a btrfs subvolume (a store on btrfs), each copy is one snapshot of it instead. */
#define _GNU_SOURCE
#include "providers/local/local.h"
#include "providers/local/gvisor.h"

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
#include "core/store.h"
#include "core/strbuf.h"
#include "core/subvol.h"
#include "core/test-hook.h"
#include "core/treecopy.h"

static bool on_image(const struct sbx_record *rec)
{
	return rec->config.image.layers && rec->config.image.layers[0];
}

/* the kind of tree a snapshot of the sandbox holds: a layer over an image, or a root */
static const char *kind_of(const struct sbx_record *rec)
{
	return on_image(rec) ? "fs/upper" : "root";
}

char *local_base_of(const char *dir)
{
	_cleanup_free_ char *p = xasprintf("%s/fs/base", dir);
	_cleanup_free_ char *id = sbx_read_file(p, 64, NULL);

	if (!id)
		return NULL;
	id[strcspn(id, "\n")] = 0;
	return sbx_id_valid(id) ? TAKE_PTR(id) : NULL;
}

/* the tree of the sandbox's files, relative to its directory: over a snapshot it stacks on,
 * or an image, the overlay's upper directory */
static const char *files_of(const struct sbx_record *rec)
{
	_cleanup_free_ char *base = local_base_of(rec->dir);
	return on_image(rec) || base ? "fs/upper" : "root";
}

struct copy_job {
	const char *src;      /* a directory */
	const char *dst_dir;  /* where dst_name is made */
	const char *dst_name; /* made by the copy (must not exist) */
	const char *swap;     /* restore: exchanged with dst_dir/dst_name once whole, then
			       * removed (it holds the old files then; a subvolume is left for
			       * local_snapshot_discard, outside the jail) */
	bool count;	      /* only count what src holds (into stats) */
	const char *base;     /* src is an overlay's upper over this tree: their merge is
			       * copied (whiteouts kept where they hide something of below) */
	bool image;
	char **below; /* the image's layers, under base */
	size_t n_below;
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
	if (j->base) {
		/* what the overlay shows of the two: the tree under, then the upper over it */
		_cleanup_close_ int b = open(j->base,
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (b < 0)
			return sbx_err_errno(err, "cannot open '%s'", j->base);
		if (mkdirat(at, j->dst_name, 0700) < 0)
			return sbx_err_errno(err, "cannot create '%s/%s'", j->dst_dir, j->dst_name);
		_cleanup_close_ int dst = openat(at, j->dst_name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct sbx_treecopy_stats ms = { .test_enospc = j->stats.test_enospc };
		if (dst < 0)
			return sbx_err_errno(err, "cannot open '%s/%s'", j->dst_dir, j->dst_name);
		int *below = xcalloc(j->n_below + 1, sizeof(int));
		int r = 0;
		for (size_t i = 0; i < j->n_below; i++) {
			below[i] = open(j->below[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (below[i] < 0 && r == 0)
				r = sbx_err_errno(err, "cannot open '%s'", j->below[i]);
		}
		if (r == 0 &&
		    (sbx_tree_copy(b, dst, true, &ms, err) < 0 ||
		     sbx_tree_merge(src, dst, true, j->image, below, j->n_below, &ms, err) < 0))
			r = -1;
		for (size_t i = 0; i < j->n_below; i++)
			if (below[i] >= 0)
				close(below[i]);
		free(below);
		if (r < 0)
			return -1;
		/* what is left of the two, counted */
		if (sbx_tree_count(dst, &j->stats, err) < 0)
			return -1;
		if (syncfs(dst) < 0)
			return sbx_err_errno(err, "cannot write '%s/%s'", j->dst_dir, j->dst_name);
		if (write(j->stats_fd, &j->stats, sizeof(j->stats)) != sizeof(j->stats))
			return sbx_err_errno(err, "cannot report the copy");
		return 0;
	}
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
	struct sbx_jail_tree *trees = xcalloc(3 + j->n_below, sizeof(*trees));
	trees[0] = (struct sbx_jail_tree){ .path = j->src, .ro = true };
	trees[1] = (struct sbx_jail_tree){ .path = j->dst_dir, .ro = false };
	trees[2] = (struct sbx_jail_tree){ .path = j->base, .ro = true };
	for (size_t i = 0; j->base && i < j->n_below; i++)
		trees[3 + i] = (struct sbx_jail_tree){ .path = j->below[i], .ro = true };
	int p[2];

	/* the jail's environment is empty: the fault is read here */
	j->stats.test_enospc = sbx_test_fail("treecopy-write");
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(trees);
		return sbx_err_errno(err, "cannot create a pipe");
	}
	j->stats_fd = p[1];
	struct sbx_jail jail = { .trees = trees,
				 .n_trees = j->base ? 3 + j->n_below : 2,
				 .store_root = ctx->store.root,
				 .keep = &p[1],
				 .n_keep = 1,
				 .what = "copying the sandbox's files",
				 .maps = m->kind == LOCAL_MAP_SUBID ? jail_maps : NULL,
				 .maps_arg = (void *)m };
	int r = sbx_jail_run(&jail, copy_in_jail, j, err);
	free(trees);
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

/* the image's layers under a stacked sandbox's snapshot (local_image_layers, but its last:
 * the snapshot's tree) */
static int layers_below(struct sbx_ctx *ctx, const struct sbx_record *rec, char ***ret,
			size_t *ret_n, struct sbx_err *err)
{
	if (local_image_layers(ctx, rec, ret, ret_n, err) < 0)
		return -1;
	if (*ret_n) {
		(*ret_n)--;
		free((*ret)[*ret_n]);
		(*ret)[*ret_n] = NULL;
	}
	return 0;
}

/* the files of snapshot id, which a sandbox stacks on */
static char *base_tree_of(struct sbx_ctx *ctx, const char *id, struct sbx_err *err)
{
	char *tree = xasprintf("%s/snapshots/%s/tree", ctx->store.root, id);
	struct stat st;

	if (lstat(tree, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(tree);
		sbx_err_set(err, SBX_E_STATE,
			    "snapshot %s, whose files the sandbox's stack on, is gone", id);
		return NULL;
	}
	return tree;
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
		if (local_sandbox_freeze(rec, &pids, true, err) < 0) {
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
		if (local_sandbox_freeze(rec, &pids, false, &e2) < 0) {
			if (r == 0)
				*err = e2;
			r = -1;
		} else {
			(void)unlink(note);
		}
	}
	return r;
}

/* the copy of a memory snapshot, run by the runtime while the sandbox's processes are stopped
 * (nothing of it runs but init: nothing to freeze) */
struct memory_copy {
	struct sbx_ctx *ctx;
	struct copy_job *j;
	const struct local_idmap *m;
};

static int copy_stopped(void *arg, struct sbx_err *err)
{
	struct memory_copy *mc = arg;

	return run_copy(mc->ctx, mc->j, mc->m, err);
}

static int remove_tree(struct sbx_ctx *ctx, const char *path, const struct local_idmap *m,
		       struct sbx_err *err);

int local_files_merged(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *dest,
		       struct sbx_err *err)
{
	struct local_idmap m;
	_cleanup_free_ char *base = local_base_of(rec->dir);
	_cleanup_free_ char *base_tree = base ? base_tree_of(ctx, base, err) : NULL;
	_cleanup_free_ char *src = xasprintf("%s/fs/upper", rec->dir);
	_cleanup_free_ char *dir = xstrdup(dest);
	char *slash = strrchr(dir, '/');

	if (!base_tree || !slash)
		return base_tree ? sbx_err_set(err, SBX_E_SYSTEM, "bad path '%s'", dest) : -1;
	*slash = 0;
	local_idmap_of(rec, &m);
	struct stat st;
	if (lstat(dest, &st) == 0 && remove_tree(ctx, dest, &m, err) < 0)
		return -1;
	_cleanup_(strv_freep) char **below = NULL;
	size_t n_below = 0;
	if (layers_below(ctx, rec, &below, &n_below, err) < 0)
		return -1;
	struct copy_job j = { .src = src,
			      .dst_dir = dir,
			      .dst_name = slash + 1,
			      .base = base_tree,
			      .image = on_image(rec),
			      .below = below,
			      .n_below = n_below };
	return run_copy(ctx, &j, &m, err);
}

void local_files_drop(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *path)
{
	struct local_idmap m;
	struct sbx_err e = { 0 };

	local_idmap_of(rec, &m);
	if (remove_tree(ctx, path, &m, &e) < 0)
		sbx_warn("cannot remove '%s': %s", path, e.msg);
}

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
	/* stacked on a snapshot: what the overlay shows of it and the upper, as one tree */
	_cleanup_free_ char *base = local_base_of(rec->dir);
	_cleanup_free_ char *base_tree = base ? base_tree_of(ctx, base, err) : NULL;
	_cleanup_(strv_freep) char **below = NULL;
	size_t n_below = 0;
	if ((base && !base_tree) || (base && layers_below(ctx, rec, &below, &n_below, err) < 0))
		return -1;
	struct copy_job j = { .src = src,
			      .dst_dir = dir,
			      .dst_name = slash + 1,
			      .base = base_tree,
			      .image = on_image(rec),
			      .below = below,
			      .n_below = n_below };
	/* --memory: the runtime's image of the processes beside the tree, which is copied while
	 * they are stopped (the files and the memory are of one moment) */
	struct memory_copy mc = { .ctx = ctx, .j = &j, .m = &m };
	if (json_is_true(json_object_get(info, "memory"))
		    ? local_snapshot_memory(rec, dir, info, copy_stopped, &mc, err) < 0
		    : capture(ctx, rec, &j, &m, err) < 0)
		return -1;
	if (j.stats.subvol) {
		/* one btrfs snapshot: what it holds is counted once the sandbox runs again, in
		 * the sandbox's own tree (whose inodes are in memory; the snapshot's are not yet) */
		struct copy_job c = { .src = src, .dst_dir = dir, .count = true };
		if (run_copy(ctx, &c, &m, err) < 0)
			return -1;
		j.stats = c.stats;
	}
	json_object_set_new(info, "files", json_string(kind_of(rec)));
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

	if (!files || !streq(files, kind_of(rec)) || (img && !mine) || (!img && mine) ||
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

/* name in at, made (a directory of mode, the sandbox root's); an empty one there is fine if
 * may_exist */
static int make_dir(int at, const char *name, mode_t mode, uid_t uid, gid_t gid, bool may_exist,
		    struct sbx_err *err)
{
	if (mkdirat(at, name, mode) < 0 && !(may_exist && errno == EEXIST))
		return sbx_err_errno(err, "cannot create '%s'", name);
	if (fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(at, name, mode, 0) < 0)
		return sbx_err_errno(err, "cannot hand '%s' to the sandbox", name);
	return 0;
}

/* the sandbox stacks on snapshot id: its files become an overlay of the snapshot's tree (as a
 * read-only lower layer, shared by every sandbox on it) and an upper of its own, empty but for
 * run/sbx (hostname, hosts). All of it is new, made by the caller (nothing of any sandbox's is
 * read): fs/ for a new sandbox, else fs.new, put in fs's place in one step (exchanged: the old
 * files are left in fs.new for local_snapshot_discard) */
static int stack(const struct sbx_record *rec, const char *id, bool replace, const char *hostname,
		 const char *hosts, const struct local_idmap *m, struct sbx_err *err)
{
	uid_t uid = m->kind == LOCAL_MAP_RANGE ? LOCAL_UID_BASE : geteuid();
	gid_t gid = m->kind == LOCAL_MAP_RANGE ? LOCAL_UID_BASE : getegid();
	const char *name = replace ? "fs.new" : "fs";
	_cleanup_close_ int at = open(rec->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (at < 0)
		return sbx_err_errno(err, "cannot open '%s'", rec->dir);
	if (replace && sbx_rm_rf_at(at, "fs.new") < 0)
		return sbx_err_errno(err, "cannot remove '%s/fs.new'", rec->dir);
	if ((!replace && make_dir(at, "root", 0755, uid, gid, true, err) < 0) ||
	    make_dir(at, name, 0755, uid, gid, !replace, err) < 0)
		return -1;
	_cleanup_close_ int fs = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fs < 0 || make_dir(fs, "work", 0700, uid, gid, !replace, err) < 0 ||
	    make_dir(fs, "upper", 0755, uid, gid, false, err) < 0)
		return fs < 0 ? sbx_err_errno(err, "cannot open '%s/%s'", rec->dir, name) : -1;
	_cleanup_close_ int up = openat(fs, "upper",
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0 || make_dir(up, "run", 0755, uid, gid, false, err) < 0)
		return up < 0 ? sbx_err_errno(err, "cannot open the upper directory") : -1;
	_cleanup_close_ int run = openat(up, "run",
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (run < 0 || make_dir(run, "sbx", 0755, uid, gid, false, err) < 0)
		return run < 0 ? sbx_err_errno(err, "cannot open run/") : -1;
	_cleanup_close_ int sbx = openat(run, "sbx",
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *line = xasprintf("%s\n", id);
	if (sbx < 0 || write_small(sbx, "hostname", hostname, uid, gid, true, err) < 0 ||
	    write_small(sbx, "hosts", hosts, uid, gid, true, err) < 0 ||
	    write_small(fs, "base", line, geteuid(), getegid(), true, err) < 0 || fsync(sbx) < 0 ||
	    fsync(run) < 0 || fsync(up) < 0 || fsync(fs) < 0)
		return sbx < 0 ? sbx_err_errno(err, "cannot open run/sbx") : -1;
	if (!replace)
		return fsync(at) < 0 ? sbx_err_errno(err, "cannot write '%s'", rec->dir) : 0;
	sbx_test_hook("restore-stacked");
	/* in place in one step: exchanged with the old fs/, or, for files that were root/, put
	 * where there was none (root/ is emptied after) */
	if (renameat2(at, "fs.new", at, "fs", RENAME_EXCHANGE) < 0 &&
	    (errno != ENOENT || renameat2(at, "fs.new", at, "fs", RENAME_NOREPLACE) < 0))
		return sbx_err_errno(err, "cannot put the files in place in '%s'", rec->dir);
	return fsync(at) < 0 ? sbx_err_errno(err, "cannot write '%s'", rec->dir) : 0;
}

int local_snapshot_unpack(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *tree,
			  const json_t *info, bool replace, const char *hostname, const char *hosts,
			  struct sbx_err *err)
{
	struct local_idmap m;

	if (local_snapshot_check(rec, info, replace, err) < 0)
		return -1;
	map_for(rec, replace, &m);
	/* a btrfs snapshot of a snapshot costs nothing and leaves the sandbox files of its own:
	 * where the tree is a subvolume, a sandbox with files of its own takes one; elsewhere
	 * (and for one already stacked) the sandbox stacks on the snapshot's tree */
	_cleanup_close_ int t = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *base = local_base_of(rec->dir);
	const char *id = sbx_json_str(info, "id");
	if (t < 0)
		return sbx_err_errno(err, "cannot open '%s'", tree);
	/* a gVisor sandbox's gofer serves one tree: it never stacks */
	if (id && sbx_id_valid(id) && (base || !sbx_subvol_root_fd(t)) && !local_gvisor(rec))
		return stack(rec, id, replace, hostname, hosts, &m, err);
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

static int empty_tree(struct sbx_ctx *ctx, const char *path, const struct local_idmap *m,
		      struct sbx_err *err);

void local_snapshot_discard(struct sbx_ctx *ctx, const struct sbx_record *rec)
{
	struct local_idmap m;
	/* the old files: a restore's copy or subvolume leaves them in restore.new (fs/ with an
	 * image), one that stacked in fs.new */
	static const char *const olds[] = { "restore.new", "fs/restore.new", "fs.new" };
	struct sbx_err e = { 0 };

	map_for(rec, true, &m);
	for (size_t i = 0; i < ARRAY_SIZE(olds); i++) {
		_cleanup_free_ char *old = xasprintf("%s/%s", rec->dir, olds[i]);
		struct stat st;
		if (lstat(old, &st) == 0 && remove_tree(ctx, old, &m, &e) < 0)
			sbx_warn("cannot remove the old files: %s (the next restore does)", e.msg);
	}
	/* files that were root/, before the sandbox stacked on a snapshot */
	_cleanup_free_ char *base = local_base_of(rec->dir);
	if (base && !on_image(rec)) {
		_cleanup_free_ char *root = xasprintf("%s/root", rec->dir);
		_cleanup_close_ int fd = open(root,
					      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(TAKE_FD(fd)) : NULL;
		struct dirent *de;
		bool some = false;
		while (d && !some && (de = readdir(d)))
			some = !streq(de->d_name, ".") && !streq(de->d_name, "..");
		if (d)
			closedir(d);
		if (some && empty_tree(ctx, root, &m, &e) < 0)
			sbx_warn("cannot remove the old files: %s (the next restore does)", e.msg);
	}
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

/* what the directory path holds removed (path stays): by the caller, or, with subordinate ids,
 * in a jail of the map m */
static int empty_tree(struct sbx_ctx *ctx, const char *path, const struct local_idmap *m,
		      struct sbx_err *err)
{
	if (m->kind != LOCAL_MAP_SUBID) {
		struct rm_job j = { .path = path };
		return rm_in_jail(&j, err);
	}
	struct sbx_jail_tree tree = { .path = path, .ro = false };
	struct rm_job j = { .path = path };
	struct sbx_jail jail = { .trees = &tree,
				 .n_trees = 1,
				 .store_root = ctx->store.root,
				 .what = "removing a sandbox's or a snapshot's files",
				 .maps = jail_maps,
				 .maps_arg = (void *)m };
	return sbx_jail_run(&jail, rm_in_jail, &j, err);
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
	if (empty_tree(ctx, path, m, err) < 0)
		return -1;
	return rmdir(path) < 0 && errno != ENOENT ? sbx_err_errno(err, "cannot remove '%s'", path)
						  : 0;
}

char *local_snapshot_users(struct sbx_ctx *ctx, const char *id)
{
	char **ids = NULL;
	size_t n = 0;
	struct sbx_err e = { 0 };
	struct strbuf who = STRBUF_INIT;

	if (sbx_store_list_ids(&ctx->store, &ids, &n, &e) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *dir = xasprintf("%s/sandboxes/%s", ctx->store.root, ids[i]);
		_cleanup_free_ char *base = local_base_of(dir);
		if (!base || !streq(base, id))
			continue;
		struct sbx_record *rec = NULL;
		(void)sbx_store_load(&ctx->store, ids[i], &rec, &e);
		strbuf_addf(&who, "%s%s", who.len ? ", " : "",
			    rec && rec->name ? rec->name : ids[i]);
		sbx_record_free(rec);
	}
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	if (!who.len) {
		strbuf_release(&who);
		return NULL;
	}
	return strbuf_detach(&who);
}
