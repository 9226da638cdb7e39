/* --disk: what a local sandbox writes lives in a filesystem of a fixed size (ext4 in the
 * sandbox's disk.img, loop-mounted), so filling it fills that file, not the host's disk.
 *
 * The filesystem is made once at create (mkfs.ext4 on a sparse file: the size is a cap, not a
 * reservation) and mounted with the new mount API into a detached mount, never into a mount
 * table: whoever needs it (the supervisor for init, cp for a stopped sandbox) gets a mount fd
 * and attaches it in its own namespace, and it is gone with that namespace. The loop device
 * clears itself once nothing holds it. A flock on disk.img keeps it mounted once at a time:
 * two mounts of one ext4 would corrupt it. Mounting needs root (CAP_SYS_ADMIN of the host). */
#define _GNU_SOURCE
#include "providers/local/local.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core/json.h"
#include "core/log.h"

#define DISK_FILE "disk.img"

long long local_disk_size(const struct sbx_record *rec)
{
	return rec->config.disk;
}

int local_disk_check(struct sbx_err *err)
{
	if (geteuid() != 0)
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"--disk needs root: the sandbox's disk is "
			"an ext4 filesystem in a file, loop-mounted, and only root may mount "
			"it; run sbx as root, or leave --disk out (then nothing bounds what a "
			"sandbox writes but the host's free space)");
	return 0;
}

static const char *mkfs_path(void)
{
	static const char *const cand[] = { "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4" };

	for (size_t i = 0; i < ARRAY_SIZE(cand); i++)
		if (access(cand[i], X_OK) == 0)
			return cand[i];
	return NULL;
}

int local_disk_make(const char *sbdir, long long bytes, uid_t uid, gid_t gid, struct sbx_err *err)
{
	_cleanup_free_ char *img = xasprintf("%s/" DISK_FILE, sbdir);
	const char *mkfs = mkfs_path();

	if (!mkfs)
		return sbx_err_set(err, SBX_E_CONFIG,
				   "--disk needs mkfs.ext4 (install the Debian "
				   "package e2fsprogs)");
	_cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_errno(err, "cannot create '%s'", img);
	if (ftruncate(fd, bytes) < 0)
		return sbx_err_errno(err, "cannot size '%s'", img);
	/* the root directory belongs to the sandbox's root; no blocks kept for the host's root;
	 * inodes and the journal initialised lazily, by the kernel */
	_cleanup_free_ char *ext = xasprintf("root_owner=%u:%u,lazy_itable_init=1,"
					     "lazy_journal_init=1,nodiscard",
					     (unsigned)uid, (unsigned)gid);
	char *const argv[] = { (char *)mkfs, "-q", "-F", "-m", "0", "-E", ext, img, NULL };
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LC_ALL=C",
			       NULL };
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return sbx_err_errno(err, "cannot run '%s'", mkfs);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execve(mkfs, argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return sbx_err_errno(err, "cannot wait for '%s'", mkfs);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return sbx_err_set(err, SBX_E_SYSTEM,
				   "cannot make the sandbox's disk: '%s %s' "
				   "failed (status %d)",
				   mkfs, img, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	if (fsync(fd) < 0)
		return sbx_err_errno(err, "cannot write '%s'", img);
	return 0;
}

/* a free loop device backed by fd, which clears itself once its last holder lets go */
static int loop_attach(int fd, char *dev, size_t len, struct sbx_err *err)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return sbx_err_errno(err, "cannot open /dev/loop-control");
	for (int tries = 0; tries < 64; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return sbx_err_errno(err, "cannot find a free loop device");
		snprintf(dev, len, "/dev/loop%d", n);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			if (errno == ENOENT)
				continue;
			return sbx_err_errno(err, "cannot open '%s'", dev);
		}
		struct loop_config cfg = { .fd = (unsigned)fd };
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
			return lfd;
		int e = errno;
		close(lfd);
		if (e != EBUSY) /* another process took it meanwhile: the next free one */
			return errno = e, sbx_err_errno(err, "cannot set up '%s'", dev);
	}
	return sbx_err_set(err, SBX_E_SYSTEM, "cannot find a free loop device");
}

int local_disk_mount(const char *sbdir, int *ret_lock, struct sbx_err *err)
{
	_cleanup_free_ char *img = xasprintf("%s/" DISK_FILE, sbdir);
	char dev[64];

	_cleanup_close_ int fd = open(img, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_errno(err, "cannot open the sandbox's disk '%s'", img);
	/* one mount at a time: waits for a copy into the stopped sandbox to finish */
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return sbx_err_errno(err, "cannot lock '%s'", img);
	_cleanup_close_ int lfd = loop_attach(fd, dev, sizeof(dev), err);
	if (lfd < 0)
		return -1;
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return sbx_err_errno(err, "cannot mount the sandbox's disk (ext4)");
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return sbx_err_errno(err, "cannot mount the sandbox's disk '%s'", img);
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (m < 0)
		return sbx_err_errno(err, "cannot mount the sandbox's disk '%s'", img);
	*ret_lock = TAKE_FD(fd);
	return m;
}
