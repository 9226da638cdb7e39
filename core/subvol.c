/* Btrfs subvolumes (see subvol.h) */
#define _GNU_SOURCE
#include "core/subvol.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/util.h"

/* the inode number of every subvolume's root directory on btrfs */
#define SUBVOL_ROOT_INO 256
/* and of the empty directory a snapshot holds where its source held a subvolume */
#define SUBVOL_PLACEHOLDER_INO 2

bool sbx_subvol_fs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 &&
		(unsigned long)sf.f_type == (unsigned long)BTRFS_SUPER_MAGIC;
}

static bool vol_name(char *dst, size_t n, const char *name)
{
	size_t len = strlen(name);

	if (!len || len >= n || strchr(name, '/')) {
		errno = EINVAL;
		return false;
	}
	memcpy(dst, name, len + 1);
	return true;
}

bool sbx_subvol_root(int dirfd, const char *name, const struct stat *st)
{
	struct statx sx;

	if (!S_ISDIR(st->st_mode) ||
	    (st->st_ino != SUBVOL_ROOT_INO && st->st_ino != SUBVOL_PLACEHOLDER_INO))
		return false;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_INO, &sx) < 0 ||
	    ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	     (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)))
		return false; /* a mount point is never taken for a subvolume */
	_cleanup_close_ int fd = openat(dirfd, name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 && sbx_subvol_fs(fd);
}

bool sbx_subvol_root_fd(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_ino == SUBVOL_ROOT_INO &&
		sbx_subvol_fs(fd);
}

int sbx_subvol_create(int at, const char *name)
{
	struct btrfs_ioctl_vol_args a;

	memset(&a, 0, sizeof(a));
	if (!vol_name(a.name, sizeof(a.name), name))
		return -1;
	if (!sbx_subvol_fs(at)) {
		errno = ENOTTY;
		return -1;
	}
	if (ioctl(at, BTRFS_IOC_SUBVOL_CREATE, &a) < 0)
		return -1;
	/* the mode the kernel gave (the umask applies) made exact */
	if (fchmodat(at, name, 0755, 0) < 0) {
		int e = errno;
		(void)unlinkat(at, name, AT_REMOVEDIR);
		errno = e;
		return -1;
	}
	return 0;
}

int sbx_subvol_snapshot(int src, int at, const char *name)
{
	struct btrfs_ioctl_vol_args_v2 a;

	memset(&a, 0, sizeof(a));
	if (!vol_name(a.name, sizeof(a.name), name))
		return -1;
	a.fd = src;
	return ioctl(at, BTRFS_IOC_SNAP_CREATE_V2, &a);
}

int sbx_subvol_destroy(int at, const char *name)
{
	struct btrfs_ioctl_vol_args a;

	memset(&a, 0, sizeof(a));
	if (!vol_name(a.name, sizeof(a.name), name))
		return -1;
	return ioctl(at, BTRFS_IOC_SNAP_DESTROY, &a);
}

int sbx_subvol_set_writable(int fd)
{
	__u64 flags = 0;

	if (ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) < 0)
		return -1;
	if (!(flags & BTRFS_SUBVOL_RDONLY))
		return 0;
	flags &= ~(__u64)BTRFS_SUBVOL_RDONLY;
	return ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags);
}

int sbx_subvol_has_nested(int fd)
{
	struct btrfs_ioctl_get_subvol_rootref_args a;

	memset(&a, 0, sizeof(a));
	if (ioctl(fd, BTRFS_IOC_GET_SUBVOL_ROOTREF, &a) < 0)
		return errno == EOVERFLOW ? 1 : -1; /* more than a buffer's worth */
	return a.num_items > 0;
}
