/* The default seccomp profile (docker's default as the reference) and capability cuts. */
#define _GNU_SOURCE
#include "providers/local.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <termios.h>

/* syscalls refused with EPERM: kernel keyring, BPF, kexec, modules, accounting, swap, reboot,
 * raw clock changes, mounting, namespaces, handles, perf, userfaultfd, io_uring, cross-process
 * memory access, NUMA policy — what docker's default profile refuses to a container without
 * extra capabilities */
static const char *const denied[] = {
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
	"delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen",
	"fspick", "get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register",
	"io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
	"lookup_dcookie", "mbind", "migrate_pages", "mount", "mount_setattr", "move_mount",
	"move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "query_module",
	"quotactl", "quotactl_fd", "reboot", "request_key", "set_mempolicy", "setns",
	"settimeofday", "stime", "swapoff", "swapon", "syslog", "umount", "umount2", "unshare",
	"uselib", "userfaultfd", "ustat", "vm86", "vm86old", "_sysctl", "sysfs", "adjtimex",
	"lsm_set_self_attr",
};

int local_seccomp_build(void **ret_bpf, size_t *ret_len, struct sbx_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;

	if (!ctx)
		return sbx_err_set(err, SBX_E_SYSTEM, "cannot initialise the seccomp filter");
	for (size_t i = 0; i < ARRAY_SIZE(denied) && r == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* new user namespaces through clone; clone3 hides its flags in memory: ENOSYS makes libc
	 * fall back to clone, whose flags can be checked */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* pushing input into a terminal (CVE-2017-5226) and console tricks */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (r < 0) {
		seccomp_release(ctx);
		errno = -r;
		return sbx_err_errno(err, "cannot build the seccomp filter");
	}
	/* export through a memfd: libseccomp writes to an fd */
	int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		seccomp_release(ctx);
		return sbx_err_errno(err, "cannot export the seccomp filter");
	}
	r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r < 0) {
		close(fd);
		errno = -r;
		return sbx_err_errno(err, "cannot export the seccomp filter");
	}
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter)) {
		close(fd);
		return sbx_err_set(err, SBX_E_SYSTEM, "seccomp filter has an unexpected size");
	}
	void *buf = xmalloc((size_t)len);
	if (pread(fd, buf, (size_t)len, 0) != len) {
		free(buf);
		close(fd);
		return sbx_err_errno(err, "cannot read the seccomp filter");
	}
	close(fd);
	*ret_bpf = buf;
	*ret_len = (size_t)len;
	return 0;
}

int local_seccomp_install(const void *bpf, size_t len)
{
	struct sock_fprog prog = {
		.len = (unsigned short)(len / sizeof(struct sock_filter)),
		.filter = (struct sock_filter *)bpf,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	if (!bpf || !len)
		return 0;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* docker's default capability set */
static const int kept_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID,
	CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_SYS_CHROOT, CAP_MKNOD,
	CAP_AUDIT_WRITE, CAP_SETFCAP,
};

int local_caps_drop(void)
{
	unsigned long long keep = 0;

	for (size_t i = 0; i < ARRAY_SIZE(kept_caps); i++)
		keep |= 1ULL << kept_caps[i];
	for (int c = 0; c < 64; c++) {
		if (keep & (1ULL << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last capability */
			return -1;
		}
	}
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	d[0].effective = d[0].permitted = (unsigned)(keep & 0xffffffffu);
	d[1].effective = d[1].permitted = (unsigned)(keep >> 32);
	return (int)syscall(SYS_capset, &h, d);
}
