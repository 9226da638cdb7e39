/* sbx commit: an image sandbox's writable layer (the overlay's upper directory) made a layer. */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <sys/stat.h>

#include "core/image.h"
#include "core/log.h"
#include "core/test-hook.h"

static int commit_maps(pid_t pid, void *map)
{
	return local_write_maps(pid, map);
}

int local_commit(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_layer *ret,
		 struct sbx_err *err)
{
	const char *l = rec->name ? rec->name : rec->id;
	/* sbx's own files of the upper directory: the sandbox's /run/sbx (hostname, hosts) and
	 * the empty /etc files init makes to bind them over, when the image has none */
	static const char *const skip[] = { "run/sbx", NULL };
	static const char *const skip_empty[] = { "etc/hostname", "etc/hosts", NULL };

	if (local_disk_size(rec) > 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "sandbox '%s' keeps its files on a disk of its own (--disk), "
				   "which sbx commit cannot read yet",
				   l);
	_cleanup_free_ char *upper = xasprintf("%s/fs/upper", rec->dir);
	struct stat st;
	if (lstat(upper, &st) < 0 || !S_ISDIR(st.st_mode))
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
	struct local_pids pids;
	bool thaw = false;
	if (rec->state == SBX_STATE_RUNNING && local_read_pids(rec->dir, &pids) == 0) {
		/* frozen while its files are read, as sbx pause freezes it */
		if (local_freeze(rec->dir, &pids, true, err) < 0)
			return sbx_err_prefix(err, "cannot freeze sandbox '%s' to commit it", l);
		thaw = true;
	}
	sbx_test_hook("commit-frozen");
	sbx_debug("commit: reading %s", upper);
	int r = sbx_test_fail("commit-read")
		? (errno = ENOSPC, sbx_err_errno(err, "cannot write the layer"))
		: sbx_image_layer_from_dir(&ctx->store, &src, ret, err);
	if (thaw) {
		struct sbx_err e2 = { 0 };
		if (local_freeze(rec->dir, &pids, false, &e2) < 0 && r == 0) {
			*err = e2;
			r = sbx_err_prefix(err, "cannot thaw sandbox '%s' after the commit", l);
		}
	}
	return r;
}
