/* sbx commit: an image sandbox's writable layer (the overlay's upper directory) made a layer. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "core/image.h"
#include "core/log.h"
#include "core/test-hook.h"

static int commit_maps(pid_t pid, void *map)
{
	return local_write_maps(pid, map);
}

/* --disk: the sandbox's fs/ lives on its disk, which only a stopped or released sandbox lets
 * anyone else mount. A child mounts it over fs/ in a mount namespace of its own, where the
 * layer is read (the jail is made from that namespace); the host's mount table never sees it */
static int from_disk(struct sbx_ctx *ctx, const struct sbx_record *rec,
		     const struct sbx_layer_src *src, struct sbx_layer *ret, struct sbx_err *err)
{
	_cleanup_close_ int lock = -1;
	_cleanup_close_ int m = local_disk_mount(rec->dir, &lock, err);
	if (m < 0)
		return -1;
	struct sbx_layer *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return sbx_err_errno(err, "cannot map memory");
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		munmap(shared, sizeof(*shared));
		return sbx_err_errno(err, "cannot create a pipe");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(ep[0]);
		close(ep[1]);
		munmap(shared, sizeof(*shared));
		return sbx_err_errno(err, "cannot fork");
	}
	if (pid == 0) {
		struct sbx_err e = { 0 };
		_cleanup_free_ char *fs = xasprintf("%s/fs", rec->dir);
		close(ep[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			sbx_err_errno(&e, "cannot make a mount namespace");
		else if (syscall(SYS_move_mount, m, "", AT_FDCWD, fs, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			sbx_err_errno(&e, "cannot attach the sandbox's disk");
		else if (sbx_image_layer_from_dir(&ctx->store, src, shared, &e) == 0) {
			sbx_err_send(ep[1], NULL);
			_exit(0);
		}
		sbx_err_send(ep[1], &e);
		_exit(1);
	}
	close(ep[1]);
	int r = sbx_err_recv(ep[0], pid, "reading the sandbox's disk", err);
	close(ep[0]);
	if (r == 0)
		*ret = *shared;
	munmap(shared, sizeof(*shared));
	return r;
}

/* r, after the sandbox is thawed if *thaw (then unset) */
static int thaw_after(const struct sbx_record *rec, const struct local_pids *pids, bool *thaw,
		      int r, struct sbx_err *err)
{
	struct sbx_err e2 = { 0 };

	if (!*thaw)
		return r;
	*thaw = false;
	if (local_sandbox_freeze(rec, pids, false, &e2) < 0 && r == 0) {
		*err = e2;
		return sbx_err_prefix(err, "cannot thaw sandbox '%s' after the commit",
				      rec->name ? rec->name : rec->id);
	}
	return r;
}

int local_commit(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_layer *ret,
		 struct sbx_err *err)
{
	const char *l = rec->name ? rec->name : rec->id;
	/* sbx's own files of the upper directory: the sandbox's /run/sbx (hostname, hosts) and
	 * the empty /etc files init makes to bind them over, when the image has none */
	static const char *const skip[] = { "run/sbx", NULL };
	static const char *const skip_empty[] = { "etc/hostname", "etc/hosts", NULL };

	bool disk = local_disk_size(rec) > 0;
	if (disk && (rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' keeps its files on a disk of its own (--disk), "
				   "which only it may mount while it runs; release it first "
				   "('sbx pause --release %s'), then commit it",
				   l, l);
	_cleanup_free_ char *upper = xasprintf("%s/fs/upper", rec->dir);
	struct stat st;
	if (!disk && (lstat(upper, &st) < 0 || !S_ISDIR(st.st_mode)))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' has no files of its own (its creation did not "
				   "finish)",
				   l);
	struct local_idmap m;
	local_idmap_of(rec, &m);
	/* root's range: the upper's owners are the sandbox's moved up by LOCAL_UID_BASE (read
	 * in a jail that maps every id to itself); otherwise the jail maps ids as the sandbox
	 * did, so the owners read as the sandbox's own */
	struct sbx_layer_src src = { .dir = upper,
				     .shift = m.kind == LOCAL_MAP_RANGE ? (long)LOCAL_UID_BASE : -1,
				     .maps = m.kind == LOCAL_MAP_SUBID ? commit_maps : NULL,
				     .maps_arg = &m,
				     .skip = skip,
				     .skip_empty = skip_empty };
	if (disk)
		return from_disk(ctx, rec, &src, ret, err);
	struct local_pids pids;
	bool thaw = false;
	if (rec->state == SBX_STATE_RUNNING && local_read_pids(rec->dir, &pids) == 0) {
		/* frozen while its files are read, as sbx pause freezes it */
		if (local_sandbox_freeze(rec, &pids, true, err) < 0)
			return sbx_err_prefix(err, "cannot freeze sandbox '%s' to commit it", l);
		thaw = true;
	}
	sbx_test_hook("commit-frozen");
	/* stacked on a snapshot: the snapshot's files and the upper, merged into one tree while
	 * frozen, make the layer (read after the thaw) */
	_cleanup_free_ char *base = local_base_of(rec->dir);
	_cleanup_free_ char *merged = base ? xasprintf("%s/commit.tmp", rec->dir) : NULL;
	int r = 0;
	if (merged) {
		sbx_debug("commit: merging %s over snapshot %s", upper, base);
		r = thaw_after(rec, &pids, &thaw, local_files_merged(ctx, rec, merged, err), err);
		src.dir = merged;
	}
	if (r == 0) {
		sbx_debug("commit: reading %s", src.dir);
		r = sbx_test_fail("commit-read")
			? (errno = ENOSPC, sbx_err_errno(err, "cannot write the layer"))
			: sbx_image_layer_from_dir(&ctx->store, &src, ret, err);
	}
	r = thaw_after(rec, &pids, &thaw, r, err);
	if (merged)
		local_files_drop(ctx, rec, merged);
	return r;
}
