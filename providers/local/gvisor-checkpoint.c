/* Memory checkpoints: the runtime interface (struct local_runtime_ops) and gVisor's filling of
 * it. runsc checkpoint in the CLI (pause --checkpoint, snapshot --memory), runsc restore in the
 * supervisor's boot (or the CLI's, for a snapshot), the image a fork starts from.
 *
 * A checkpoint cut short. runsc checkpoint hands the image's file to gVisor's sentry, which
 * writes it and then ends the sandbox's processes, whether it could write it or not; it goes
 * on when its caller dies. So the CLI writes a note first, DIR/gvisor/checkpointing ("PID
 * START", its own), runs runsc so that it dies with it, and once runsc has returned and
 * nothing of runsc's runs any more, marks the note "written". Whoever looks at a sandbox whose
 * note's writer is dead (look(), lifecycle.c) tells what is true from what is left:
 *  - written, and runsc's sandbox does not run: the processes are in the image: stopped
 *    (inspect: checkpointed), and resume restores them. If it runs, a snapshot's restore
 *    brought it back: running (the note goes);
 *  - a process of runsc's holds the image open: the sentry is writing it: stopped, not yet
 *    checkpointed; resume waits for it;
 *  - no image (or an empty one) and runsc's sandbox runs: the checkpoint never began: it is
 *    undone (the note goes) and the sandbox runs on;
 *  - else its processes ended: stopped, checkpointed when an image is there. Resume tries it;
 *    should it not restore (its writing failed), it goes and the error says so: the next
 *    resume boots on the files.
 * A restore moves the image aside first (DIR/gvisor/checkpoint/restore), where one cut short
 * is found again while the note is there, and removes it once it ran: an image is restored
 * once, never after its processes ran on. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "core/json.h"
#include "core/proc.h"
#include "core/store.h"
#include "core/strbuf.h"
#include "core/test-hook.h"

static const char *label_of(const struct sbx_record *rec)
{
	return rec->name ? rec->name : rec->id;
}

char *local_checkpoint_dir(const char *dir)
{
	return xasprintf("%s/gvisor/checkpoint", dir);
}

static char *note_path(const char *dir)
{
	return xasprintf("%s/gvisor/checkpointing", dir);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* --- the image --------------------------------------------------------------------------- */

/* the bytes on disk of the regular files directly in dfd (runsc writes its image flat) */
static long long files_size(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long long sum = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			sum += (long long)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* each regular file of directory from linked (or, copy, copied and given to uid:gid) into
 * directory to, or moved there (move) */
enum carry {
	CARRY_LINK,
	CARRY_MOVE,
	CARRY_COPY
};

static int copy_file(int from, int to, const char *name, uid_t uid, gid_t gid)
{
	_cleanup_close_ int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -1;
	_cleanup_close_ int out = openat(
		to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -1;
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (sbx_write_all(out, buf, (size_t)n) < 0)
			return -1;
	if (n < 0 || fsync(out) < 0 || fchown(out, uid, gid) < 0)
		return -1;
	return 0;
}

static int carry_files(const char *from, const char *to, enum carry how, uid_t uid, gid_t gid)
{
	_cleanup_close_ int t = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = opendir(from);
	struct dirent *e;
	int r = 0;

	if (!d || t < 0) {
		if (d)
			closedir(d);
		return -1;
	}
	while (r == 0 && (e = readdir(d))) {
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (how == CARRY_LINK)
			r = linkat(dirfd(d), e->d_name, t, e->d_name, 0);
		else if (how == CARRY_MOVE)
			r = renameat(dirfd(d), e->d_name, t, e->d_name);
		else
			r = copy_file(dirfd(d), t, e->d_name, uid, gid);
	}
	closedir(d);
	if (r == 0 && fsync(t) < 0)
		r = -1;
	return r;
}

struct note {
	bool present;
	bool owner_alive; /* the sbx that wrote it is still at it */
	bool written;	  /* runsc checkpoint returned and nothing of runsc's runs */
};

static void read_note(const char *dir, struct note *n)
{
	_cleanup_free_ char *p = note_path(dir);
	_cleanup_free_ char *text = sbx_read_file(p, 128, NULL);
	int pid = 0;
	unsigned long long start = 0;
	char word[16] = "";

	*n = (struct note){ 0 };
	if (!text)
		return;
	n->present = true;
	int got = sscanf(text, "%d %llu %15s", &pid, &start, word);
	n->owner_alive = got >= 2 && pid > 0 && sbx_proc_alive((pid_t)pid, start);
	n->written = got == 3 && streq(word, "written");
}

static int write_note(const char *dir, bool written, struct sbx_err *err)
{
	unsigned long long start = 0;
	_cleanup_free_ char *p = note_path(dir);

	(void)sbx_proc_starttime(getpid(), &start);
	_cleanup_free_ char *text = xasprintf("%d %llu%s\n", (int)getpid(), start,
					      written ? " written" : "");
	return sbx_write_atomic(p, text, strlen(text), true, err);
}

/* the directory that holds the image a boot would restore: the checkpoint's, or, while a
 * note says a restore of it was cut short, the one it was set aside in; NULL */
static char *image_dir(const char *dir)
{
	_cleanup_free_ char *ck = local_checkpoint_dir(dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
	_cleanup_free_ char *aside = xasprintf("%s/restore/checkpoint.img", ck);
	_cleanup_free_ char *np = note_path(dir);
	struct stat st;

	if (lstat(img, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		return TAKE_PTR(ck);
	if (access(np, F_OK) == 0 && lstat(aside, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size > 0)
		return xasprintf("%s/restore", ck);
	return NULL;
}

bool local_checkpoint_noted(const char *dir)
{
	_cleanup_free_ char *np = note_path(dir);
	_cleanup_free_ char *d = image_dir(dir);

	return d || access(np, F_OK) == 0;
}

static long long gvisor_image_size(const char *dir)
{
	_cleanup_free_ char *d = image_dir(dir);

	return d ? files_size(d) : -1;
}

/* --- runsc's processes -------------------------------------------------------------------- */

/* the host pids of init's children (runsc's sandbox and gofer), at most max */
static size_t children_of(pid_t init, pid_t *out, size_t max)
{
	char p[64];
	size_t n = 0;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)init, (int)init);
	_cleanup_free_ char *text = sbx_read_file(p, 4096, NULL);
	if (text) {
		char *s = text, *end;
		for (long v; n < max && (v = strtol(s, &end, 10)) > 0 && end != s; s = end)
			out[n++] = (pid_t)v;
		return n;
	}
	/* a kernel without /proc/PID/task/TID/children: every process's parent */
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && n < max && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || *end)
			continue;
		snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
		_cleanup_free_ char *st = sbx_read_file(p, 4096, NULL);
		char *rp = st ? strrchr(st, ')') : NULL;
		int ppid = 0;
		if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == (int)init)
			out[n++] = (pid_t)pid;
	}
	if (d)
		closedir(d);
	return n;
}

/* process pid has the file st open */
static bool holds(pid_t pid, const struct stat *img)
{
	char p[64];
	struct dirent *e;
	bool found = false;

	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(p);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		found = fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_dev == img->st_dev &&
			st.st_ino == img->st_ino;
	}
	closedir(d);
	return found;
}

/* runsc's container of the sandbox runs (its state says so: not one being made or restored,
 * nor one whose sentry is gone) */
static bool runsc_runs(const char *dir, pid_t init)
{
	pid_t kids[16];
	_cleanup_free_ char *st = xasprintf("%s/gvisor/state", dir);
	struct dirent *e;
	bool runs = false;

	if (!children_of(init, kids, ARRAY_SIZE(kids)))
		return false;
	DIR *d = opendir(st);
	while (d && !runs && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 7 || strcmp(e->d_name + len - 6, ".state"))
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", st, e->d_name);
		_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_free_ char *text = fd >= 0 ? sbx_read_fd(fd, 1 << 20, NULL) : NULL;
		_cleanup_json_ json_t *j = text ? json_loads(text, 0, NULL) : NULL;
		const char *status = j ? sbx_json_str(j, "status") : NULL;
		runs = status && streq(status, "running");
	}
	if (d)
		closedir(d);
	return runs;
}

/* what a checkpoint that its sbx did not see to the end left (see the top of this file) */
enum cut {
	CUT_RAN,     /* runsc's sandbox runs: never began (undone), or restored */
	CUT_WRITING, /* the image is being written */
	CUT_STOPPED, /* the processes ended (into the image, when there is one) */
};

static enum cut cut_of(const char *dir, pid_t init, const struct note *n)
{
	pid_t kids[16];
	size_t nk = children_of(init, kids, ARRAY_SIZE(kids));

	if (n->written)
		return nk && runsc_runs(dir, init) ? CUT_RAN : CUT_STOPPED;
	_cleanup_free_ char *img = xasprintf("%s/gvisor/checkpoint/checkpoint.img", dir);
	struct stat st;
	bool some = lstat(img, &st) == 0 && S_ISREG(st.st_mode);
	for (size_t i = 0; some && i < nk; i++)
		if (holds(kids[i], &st))
			return CUT_WRITING;
	if (!(some && st.st_size > 0) && nk && runsc_runs(dir, init))
		return CUT_RAN;
	return CUT_STOPPED;
}

/* the note goes, with what is left of a checkpoint or a restore that has no use now */
static void tidy(const char *dir)
{
	_cleanup_free_ char *np = note_path(dir);
	_cleanup_free_ char *ck = local_checkpoint_dir(dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
	_cleanup_free_ char *aside = xasprintf("%s/restore", ck);
	struct stat st;

	(void)unlink(np);
	(void)sbx_rm_rf(aside);
	if (lstat(img, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
		(void)unlink(img);
}

/* --- checkpoint --------------------------------------------------------------------------- */

/* runsc checkpoint failed: gVisor ends the processes of a sandbox once it was handed the
 * image, whether it could write it or not. Either way the image goes; the note stays for a
 * sandbox whose processes ended, so that it looks stopped, as it is */
static int checkpoint_failed(const struct sbx_record *rec, pid_t init, const char *why,
			     struct sbx_err *err)
{
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", ck);
	struct note n = { .present = true };
	struct stat st;

	for (int i = 0; i < 6000 && cut_of(rec->dir, init, &n) == CUT_WRITING; i++)
		sleep_ms(10);
	if (lstat(img, &st) == 0)
		(void)unlink(img);
	if (runsc_runs(rec->dir, init)) {
		tidy(rec->dir);
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot checkpoint sandbox '%s': %s",
				   label_of(rec), why);
	}
	return sbx_err_set(err, SBX_E_SYSTEM,
			   "cannot checkpoint sandbox '%s': %s (its processes ended; 'sbx resume "
			   "%s' starts it again on its files)",
			   label_of(rec), why, label_of(rec));
}

/* runsc checkpoint into DIR/gvisor/checkpoint: the sandbox's processes end (runsc's
 * --leave-running never returns here), and so does everything of runsc's */
static int checkpoint(const struct sbx_record *rec, struct sbx_err *err)
{
	const char *label = label_of(rec);
	struct local_pids pids;
	struct local_idmap m;
	struct stat st;

	if (local_read_pids(rec->dir, &pids) < 0 || !sbx_proc_alive(pids.init_pid, pids.init_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is not running", label);
	if (local_is_frozen(rec->dir, &pids) == 1)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is paused; run 'sbx resume %s'",
				   label, label);
	local_idmap_of(rec, &m);
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	_cleanup_free_ char *root = xasprintf("%s/root", rec->dir);
	(void)sbx_rm_rf(ck);
	if (stat(root, &st) < 0 || mkdir(ck, 0700) < 0 || lchown(ck, st.st_uid, st.st_gid) < 0)
		return sbx_err_errno(err, "cannot create '%s'", ck);
	/* runsc's messages to a file: a sandbox left running may hold what it was given */
	_cleanup_free_ char *logp = xasprintf("%s/gvisor/checkpoint.log", rec->dir);
	_cleanup_close_ int logfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
					 0600);
	if (logfd < 0)
		return sbx_err_errno(err, "cannot create '%s'", logp);
	if (write_note(rec->dir, false, err) < 0)
		return -1;
	sbx_test_hook("checkpoint-noted");
	struct local_runsc r = { .dir = rec->dir,
				 .init = pids.init_pid,
				 .map_range = m.kind != LOCAL_MAP_SELF,
				 .net_none = true,
				 .checkpoint = true,
				 .die_with_caller = true,
				 .fd = { -1, logfd, logfd } };
	char *args[] = { "checkpoint", "--image-path=/tmp/checkpoint", rec->id, NULL };
	pid_t pid = local_runsc_spawn(&r, args, err);
	if (pid < 0) {
		tidy(rec->dir);
		return -1;
	}
	sbx_test_hook("checkpoint-started");
	int ws = local_runsc_wait(pid);
	if (ws != 0) {
		char why[1024];
		local_runsc_log_tail(logfd, why, sizeof(why), "runsc checkpoint failed");
		return checkpoint_failed(rec, pids.init_pid, why, err);
	}
	/* the sentry and the gofer end once the image is written: nothing of runsc's stays, and
	 * the sandbox's memory is freed */
	pid_t kids[16];
	for (int i = 0; i < 3000 && children_of(pids.init_pid, kids, ARRAY_SIZE(kids)); i++)
		sleep_ms(10);
	if (children_of(pids.init_pid, kids, ARRAY_SIZE(kids)))
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "gVisor's sandbox of '%s' did not end after its checkpoint",
				   label);
	sbx_test_hook("checkpoint-ended");
	if (write_note(rec->dir, true, err) < 0)
		return -1;
	sbx_test_hook("checkpoint-written");
	return 0;
}

/* --- restore ------------------------------------------------------------------------------ */

static int gvisor_restore(const struct local_boot *b, char *msg, size_t len)
{
	const char *dir = b->setup->dir;
	struct note n;
	struct stat st;
	_cleanup_free_ char *ck = local_checkpoint_dir(dir);
	_cleanup_free_ char *aside = xasprintf("%s/restore", ck);
	_cleanup_free_ char *from = image_dir(dir);

	read_note(dir, &n);
	if (!from) {
		snprintf(msg, len, "the checkpoint of '%s' is gone", dir);
		return -1;
	}
	/* set aside first: an image that ran is never restored again */
	if (streq(from, ck) &&
	    (sbx_rm_rf(aside) < 0 || stat(ck, &st) < 0 || mkdir(aside, 0700) < 0 ||
	     lchown(aside, st.st_uid, st.st_gid) < 0 ||
	     carry_files(ck, aside, CARRY_MOVE, 0, 0) < 0)) {
		snprintf(msg, len, "cannot set the checkpoint aside in '%s': %s", aside,
			 strerror(errno));
		return -1;
	}
	sbx_test_hook("restore-set-aside");
	_cleanup_free_ char *logp = xasprintf("%s/gvisor/runsc.log", dir);
	_cleanup_close_ int logfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
					 0600);
	if (logfd < 0) {
		snprintf(msg, len, "cannot create '%s': %s", logp, strerror(errno));
		return -1;
	}
	char why[1024];
	int r = local_gvisor_start(b->setup, b->init, "restore", logfd, why, sizeof(why));
	if (r != -1) {
		/* it ran: the image is spent (even should the boot fail after it) */
		sbx_test_hook("restore-ran");
		_cleanup_free_ char *np = note_path(dir);
		(void)unlink(np);
		(void)sbx_rm_rf(aside);
		if (r < 0)
			snprintf(msg, len, "%s", why);
		return r < 0 ? -1 : 0;
	}
	if (n.present && !n.written) {
		/* an image whose writing was cut short, and that does not restore: it goes */
		tidy(dir);
		snprintf(
			msg, len,
			"%s; its checkpoint was cut short and is removed (the next resume starts it "
			"on its files)",
			why);
		return -1;
	}
	(void)carry_files(aside, ck, CARRY_MOVE, 0, 0);
	snprintf(msg, len, "%s", why);
	return -1;
}

/* --- snapshot and fork -------------------------------------------------------------------- */

static int gvisor_snapshot(const struct sbx_record *rec, const char *to,
			   int (*stopped)(void *arg, struct sbx_err *err), void *arg,
			   struct sbx_err *err)
{
	struct local_pids pids;
	char msg[600];

	if (checkpoint(rec, err) < 0)
		return -1;
	/* the image kept (linked into the snapshot), then the files copied while nothing runs:
	 * both of one moment */
	_cleanup_free_ char *ck = local_checkpoint_dir(rec->dir);
	int r = carry_files(ck, to, CARRY_LINK, 0, 0) < 0
		? sbx_err_errno(err, "cannot keep the checkpoint of '%s'", label_of(rec))
		: 0;
	sbx_test_hook("snapshot-memory-stopped");
	if (r == 0)
		r = stopped(arg, err);
	/* and it runs on from the image, whatever happened */
	local_gvisor_state_reset(rec->dir);
	if (local_read_pids(rec->dir, &pids) < 0)
		snprintf(msg, sizeof(msg), "its init is gone");
	else if (local_gvisor_reboot(rec, pids.init_pid, msg, sizeof(msg)) == 0)
		return r;
	if (r == 0)
		sbx_err_set(err, SBX_E_SYSTEM,
			    "cannot start sandbox '%s' again: %s (it is stopped; 'sbx resume %s' "
			    "restores it from its checkpoint)",
			    label_of(rec), msg, label_of(rec));
	return -1;
}

static int gvisor_fork(const char *from, const char *dir, uid_t uid, gid_t gid, struct sbx_err *err)
{
	_cleanup_free_ char *g = xasprintf("%s/gvisor", dir);
	_cleanup_free_ char *ck = local_checkpoint_dir(dir);
	_cleanup_free_ char *img = xasprintf("%s/checkpoint.img", from);
	struct stat st;

	if (lstat(img, &st) < 0 || !S_ISREG(st.st_mode))
		return sbx_err_errno(err, "cannot open the memory image '%s'", img);
	if ((mkdir(g, 0700) < 0 && errno != EEXIST) || (mkdir(ck, 0700) < 0 && errno != EEXIST) ||
	    lchown(ck, uid, gid) < 0)
		return sbx_err_errno(err, "cannot create '%s'", ck);
	if (carry_files(from, ck, CARRY_COPY, uid, gid) < 0)
		return sbx_err_errno(err, "cannot copy the memory image into '%s'", ck);
	return 0;
}

const struct local_runtime_ops local_runtime_gvisor = {
	.name = "gvisor",
	.needs_net_none = true,
	.net_none_why = "gVisor cannot checkpoint a sandbox on its network namespace's sockets",
	.needs_root = true,
	.root_why = "runsc cannot make its own network stack in an ordinary user's sandbox",
	.checkpoint = checkpoint,
	.restore = gvisor_restore,
	.snapshot = gvisor_snapshot,
	.fork = gvisor_fork,
	.image_size = gvisor_image_size,
};

/* --- for every runtime -------------------------------------------------------------------- */

static const struct local_runtime_ops *const runtimes[] = { &local_runtime_gvisor, NULL };

const struct local_runtime_ops *local_runtime_named(const char *name)
{
	for (size_t i = 0; name && runtimes[i]; i++)
		if (streq(runtimes[i]->name, name))
			return runtimes[i];
	return NULL;
}

const struct local_runtime_ops *local_runtime_of(const struct sbx_record *rec)
{
	return local_gvisor(rec) ? &local_runtime_gvisor : NULL;
}

/* why rt cannot checkpoint rec (what does it, for the message), or 0 */
static int can(const struct local_runtime_ops *rt, const struct sbx_record *rec, const char *what,
	       struct sbx_err *err)
{
	const struct sbx_net_config *net = &rec->config.net;

	if (rt->needs_net_none && !(net->set && net->mode == SBX_NET_NONE))
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "%s needs --net none (%s)", what,
				   rt->net_none_why);
	if (rt->needs_root && geteuid() != 0)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "%s needs root (%s)", what,
				   rt->root_why);
	return 0;
}

const struct local_runtime_ops *local_checkpoint_runtime(const struct sbx_record *rec,
							 const char *what, struct sbx_err *err)
{
	const struct local_runtime_ops *rt = local_runtime_of(rec);

	if (!rt) {
		struct strbuf names = STRBUF_INIT;
		for (size_t i = 0; runtimes[i]; i++)
			strbuf_addf(&names, "%s--runtime %s", i ? " or " : "", runtimes[i]->name);
		_cleanup_free_ char *runs = rec->config.runtime
			? xasprintf("runtime '%s'", rec->config.runtime)
			: xstrdup("the default runtime");
		sbx_err_set(err, SBX_E_UNSUPPORTED, "%s needs %s (sandbox '%s' runs on %s)", what,
			    names.buf, label_of(rec), runs);
		strbuf_release(&names);
		return NULL;
	}
	_cleanup_free_ char *full = xasprintf("%s of sandbox '%s'", what, label_of(rec));
	return can(rt, rec, full, err) < 0 ? NULL : rt;
}

int local_snapshot_memory(const struct sbx_record *rec, const char *snapdir, json_t *info,
			  int (*stopped)(void *arg, struct sbx_err *err), void *arg,
			  struct sbx_err *err)
{
	const struct local_runtime_ops *rt = local_checkpoint_runtime(
		rec, "snapshot create --memory", err);

	if (!rt)
		return -1;
	_cleanup_free_ char *mem = xasprintf("%s/memory", snapdir);
	if (mkdir(mem, 0700) < 0)
		return sbx_err_errno(err, "cannot create '%s'", mem);
	/* what its forks run with: the image restores only there */
	json_object_set_new(info, "runtime", json_string(rt->name));
	if (rt->needs_net_none)
		json_object_set_new(info, "net", json_string("none"));
	return rt->snapshot(rec, mem, stopped, arg, err);
}

int local_fork_memory(const struct sbx_record *rec, const json_t *info, const char *tree, uid_t uid,
		      gid_t gid, struct sbx_err *err)
{
	if (!json_is_true(json_object_get(info, "memory")))
		return 0;
	/* a snapshot made before its record named the runtime: gVisor's */
	const char *name = sbx_json_str(info, "runtime");
	const struct local_runtime_ops *rt = local_runtime_named(name ? name : "gvisor");
	if (!rt)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "snapshot '%s' holds processes and memory of runtime '%s', "
				   "which this sbx does not have",
				   rec->config.from, name);
	if (local_runtime_of(rec) != rt)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "snapshot '%s' holds processes and memory: its forks need "
				   "--runtime %s",
				   rec->config.from, rt->name);
	_cleanup_free_ char *what = xasprintf("a fork of memory snapshot '%s'", rec->config.from);
	if (can(rt, rec, what, err) < 0)
		return -1;
	_cleanup_free_ char *snapdir = xstrdup(tree);
	char *slash = strrchr(snapdir, '/');
	if (slash)
		*slash = 0;
	_cleanup_free_ char *from = xasprintf("%s/memory", snapdir);
	return rt->fork(from, rec->dir, uid, gid, err);
}

/* --- a checkpoint cut short ---------------------------------------------------------------- */

long long local_checkpoint_bytes(const struct sbx_record *rec)
{
	const struct local_runtime_ops *rt = local_runtime_of(rec);
	struct local_pids pids;
	struct note n;

	if (!rt)
		return -1;
	long long size = rt->image_size(rec->dir);
	if (size < 0)
		return -1;
	read_note(rec->dir, &n);
	if (!n.present || n.written)
		return size;
	/* being written: by a checkpoint under way, or by a sentry its sbx left */
	if (n.owner_alive)
		return -1;
	if (local_read_pids(rec->dir, &pids) == 0 &&
	    sbx_proc_alive(pids.init_pid, pids.init_start) &&
	    cut_of(rec->dir, pids.init_pid, &n) == CUT_WRITING)
		return -1;
	return size;
}

bool local_checkpoint_look(const struct sbx_record *rec, const struct local_pids *pids,
			   enum sbx_state *ret)
{
	struct note n;

	if (!local_runtime_of(rec))
		return false;
	read_note(rec->dir, &n);
	if (!n.present || n.owner_alive)
		return false;
	if (cut_of(rec->dir, pids->init_pid, &n) == CUT_RAN) {
		tidy(rec->dir);
		return false;
	}
	*ret = SBX_STATE_STOPPED;
	return true;
}

int local_checkpoint_settle(const struct sbx_record *rec, struct sbx_err *err)
{
	const struct local_runtime_ops *rt = local_runtime_of(rec);
	struct local_pids pids;
	struct note n;

	if (!rt)
		return 0;
	read_note(rec->dir, &n);
	if (!n.present || n.owner_alive)
		return 0;
	if (local_read_pids(rec->dir, &pids) == 0 &&
	    sbx_proc_alive(pids.init_pid, pids.init_start)) {
		/* the sentry an sbx left writing the image: done soon */
		int i = 0;
		for (; i < 12000 && cut_of(rec->dir, pids.init_pid, &n) == CUT_WRITING; i++)
			sleep_ms(10);
		if (i == 12000)
			return sbx_err_set(err, SBX_E_STATE,
					   "the checkpoint of sandbox '%s' is still being written; "
					   "try again",
					   label_of(rec));
	}
	/* nothing to restore: a boot on the files */
	if (rt->image_size(rec->dir) < 0)
		tidy(rec->dir);
	return 0;
}
