/* Memory checkpoints of a gVisor sandbox (the CLI): pause --checkpoint, snapshot --memory and
 * the memory image a fork of such a snapshot starts from (runsc checkpoint; the supervisor's
 * boot runs runsc restore, gvisor.c). The runtime interface a microVM could fill in too. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/proc.h"

/* why this sandbox cannot be checkpointed (what, for the message), or 0 */
static int can_checkpoint(const struct sbx_record *rec, const char *what, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;

	if (rec->config.net.set && rec->config.net.mode == SBX_NET_NONE && geteuid() != 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "%s of gVisor sandbox '%s' needs root (runsc cannot make its "
				   "own network stack in an ordinary user's sandbox)",
				   what, label);
	if (!local_gvisor_netstack(&rec->config))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "%s of gVisor sandbox '%s' needs --net none (gVisor cannot "
				   "checkpoint a sandbox on its network namespace's sockets)",
				   what, label);
	return 0;
}

/* runsc checkpoint into DIR/gvisor/checkpoint: the sandbox's processes end (runsc's
 * --leave-running never returns here) */
static int checkpoint(const struct sbx_record *rec, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;
	struct local_idmap m;

	if (local_read_pids(rec->dir, &pids) < 0 || !sbx_proc_alive(pids.init_pid, pids.init_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running", label);
	if (local_is_frozen(rec->dir, &pids) == 1)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is paused; run 'sbx resume %s'",
				   label, label);
	local_idmap_of(rec, &m);
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	(void)sbx_rm_rf(ck);
	struct stat st;
	_cleanup_free_ char *root = xasprintf("%s/root", rec->dir);
	if (stat(root, &st) < 0 || mkdir(ck, 0700) < 0 || lchown(ck, st.st_uid, st.st_gid) < 0)
		return sbx_err_errno(err, "cannot create '%s'", ck);
	/* runsc's messages to a file: a sandbox left running may hold what it was given */
	_cleanup_free_ char *logp = xasprintf("%s/gvisor/checkpoint.log", rec->dir);
	_cleanup_close_ int logfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
					 0600);
	if (logfd < 0)
		return sbx_err_errno(err, "cannot create '%s'", logp);
	struct local_runsc r = { .dir = rec->dir,
				 .init = pids.init_pid,
				 .map_range = m.kind != LOCAL_MAP_SELF,
				 .net_none = true,
				 .checkpoint = true,
				 .fd = { -1, logfd, logfd } };
	char *args[] = { "checkpoint", "--image-path=/tmp/checkpoint", rec->id, NULL };
	pid_t pid = local_runsc_spawn(&r, args, err);
	if (pid < 0)
		return -1;
	int ws = local_runsc_wait(pid);
	if (ws != 0) {
		char out[1024];
		ssize_t got = pread(logfd, out, sizeof(out) - 1, 0);
		size_t n = got > 0 ? (size_t)got : 0;
		out[n] = 0;
		while (n && out[n - 1] == '\n')
			out[--n] = 0;
		char *nl = strrchr(out, '\n');
		(void)sbx_rm_rf(ck);
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot checkpoint sandbox '%s': %s", label,
				   nl ? nl + 1 : (n ? out : "runsc checkpoint failed"));
	}
	return 0;
}

static int gvisor_checkpoint(const struct sbx_record *rec, struct sbx_err *err)
{
	if (can_checkpoint(rec, "pause --checkpoint", err) < 0)
		return -1;
	return checkpoint(rec, err);
}

static int gvisor_snapshot(const struct sbx_record *rec, const char *dir, struct sbx_err *err)
{
	struct local_pids pids;
	struct local_idmap m;
	char msg[400];

	if (can_checkpoint(rec, "snapshot create --memory", err) < 0 || checkpoint(rec, err) < 0)
		return -1;
	/* the image is linked into the snapshot, then the sandbox restored from it at once
	 * (which removes it from the sandbox's directory) */
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
	_cleanup_free_ char *to = xasprintf("%s/checkpoint.img", dir);
	int r = link(img, to) < 0 ? sbx_err_errno(err, "cannot keep '%s'", img) : 0;
	local_idmap_of(rec, &m);
	local_gvisor_state_reset(rec->dir);
	if (local_read_pids(rec->dir, &pids) < 0 ||
	    local_gvisor_reboot(rec, pids.init_pid, msg, sizeof(msg)) < 0) {
		(void)sbx_rm_rf(ck);
		if (r == 0)
			sbx_err_set(err, SBX_E_SYSTEM, "cannot start sandbox '%s' again: %s",
				    rec->name ? rec->name : rec->id, msg);
		return -1;
	}
	return r;
}

static const struct local_runtime_ops gvisor_ops = {
	.name = "gvisor",
	.checkpoint = gvisor_checkpoint,
	.snapshot = gvisor_snapshot,
};

const struct local_runtime_ops *local_runtime_of(const struct sbx_record *rec)
{
	return local_gvisor(rec) ? &gvisor_ops : NULL;
}

int local_snapshot_memory(const struct sbx_record *rec, const char *snapdir, struct sbx_err *err)
{
	const struct local_runtime_ops *rt = local_runtime_of(rec);

	if (!rt)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "snapshot create --memory needs --runtime gvisor (sandbox '%s' "
				   "runs on the default runtime)",
				   rec->name ? rec->name : rec->id);
	_cleanup_free_ char *mem = xasprintf("%s/memory", snapdir);
	if (mkdir(mem, 0700) < 0)
		return sbx_err_errno(err, "cannot create '%s'", mem);
	return rt->snapshot(rec, mem, err);
}

int local_fork_memory(const struct sbx_record *rec, const json_t *info, const char *tree, uid_t uid,
		      gid_t gid, struct sbx_err *err)
{
	if (!json_is_true(json_object_get(info, "memory")))
		return 0;
	if (!local_gvisor(rec) || !local_gvisor_netstack(&rec->config))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "snapshot '%s' holds processes and memory: its forks need "
				   "--runtime gvisor --net none (run by root)",
				   rec->config.from);
	_cleanup_free_ char *snapdir = xstrdup(tree);
	char *slash = strrchr(snapdir, '/');
	if (slash)
		*slash = 0;
	_cleanup_free_ char *src = xasprintf("%s/memory/checkpoint.img", snapdir);
	_cleanup_free_ char *g = xasprintf("%s/gvisor", rec->dir);
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	_cleanup_free_ char *dst = xasprintf("%s/checkpoint.img", ck);
	if ((mkdir(g, 0700) < 0 && errno != EEXIST) || (mkdir(ck, 0700) < 0 && errno != EEXIST) ||
	    lchown(ck, uid, gid) < 0)
		return sbx_err_errno(err, "cannot create '%s'", ck);
	_cleanup_close_ int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return sbx_err_errno(err, "cannot open the memory of snapshot '%s'",
				     rec->config.from);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				       0600);
	if (out < 0)
		return sbx_err_errno(err, "cannot create '%s'", dst);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (sbx_write_all(out, buf, (size_t)n) < 0)
			return sbx_err_errno(err, "cannot write '%s'", dst);
	if (n < 0 || fsync(out) < 0 || fchown(out, uid, gid) < 0)
		return sbx_err_errno(err, "cannot copy the memory of snapshot '%s'",
				     rec->config.from);
	return 0;
}
