/* Confinement of sbx's own processes that touch sandbox content: seccomp, capabilities,
 * Landlock, no-exec mount views, and a jail for the helpers that run on the host's side. */
#ifndef SBX_CORE_CONFINE_H
#define SBX_CORE_CONFINE_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"

/* the seccomp profiles: strict (docker's default as the reference) for sbx's helpers and a
 * sandbox's processes; nested for the processes of a sandbox created with --nested, which
 * may also make namespaces (clone, clone3, unshare, setns) and use the mount API (mount,
 * umount2, pivot_root, open_tree, move_mount, fsopen, fsmount, fsconfig, fspick,
 * mount_setattr). Everything else the strict one refuses stays refused */
enum sbx_seccomp_profile {
	SBX_SECCOMP_STRICT,
	SBX_SECCOMP_NESTED,
};
/* a profile as raw BPF */
int sbx_seccomp_build_profile(enum sbx_seccomp_profile p, void **ret_bpf, size_t *ret_len,
			      struct sbx_err *err);
/* the same, compiled once per build of sbx and kept under store_root */
int sbx_seccomp_cached_profile(const char *store_root, enum sbx_seccomp_profile p, void **ret_bpf,
			       size_t *ret_len, struct sbx_err *err);
/* the strict profile, built or cached */
int sbx_seccomp_build(void **ret_bpf, size_t *ret_len, struct sbx_err *err);
int sbx_seccomp_cached(const char *store_root, void **ret_bpf, size_t *ret_len,
		       struct sbx_err *err);
/* installs a raw BPF filter (no_new_privs first); -1 with errno */
int sbx_seccomp_install(const void *bpf, size_t len);
/* cuts capabilities (bounding, permitted, effective, ambient) to docker's default set */
int sbx_caps_drop(void);

/* Landlock: no file of any kind may be opened, executed, made or removed outside the tree of
 * the process's root ('/'), so a magic link of /proc that leads to the host (/proc/self/exe,
 * a descriptor of another process) leads nowhere. 0; 1 when the kernel has no Landlock (the
 * other layers still hold); -1 with errno */
int sbx_landlock_root(void);

/* Landlock for a command whose exec cannot go through sbx's sealed trampoline: nothing outside
 * the tree of '/' may be executed (only execution is restricted). 0; 1 without Landlock; -1 */
int sbx_landlock_exec_root(void);

/* to call before a process joins a sandbox: whatever glibc would read once and keep (the
 * charset conversion table libarchive's name conversions use) is read now, from the host's
 * files, never from the sandbox's */
void sbx_confine_prepare(void);

/* every mount of the process's mount namespace becomes noexec, nosuid and nodev: no code can be
 * mapped from the files it sees (a library, a conversion module, a program). With private set,
 * the process first gets a copy of its mount namespace of its own, so the sandbox's own mounts
 * are untouched. -1 with err */
int sbx_confine_noexec(bool private, struct sbx_err *err);

/* the last steps of a helper, in this order: an empty environment, no descriptor but keep[]
 * (0-2 not kept become null_fd, /dev/null opened on the host), capabilities cut,
 * no_new_privs, Landlock on '/', the seccomp filter (bpf, len) */
int sbx_confine_finish(const int *keep, size_t n_keep, int null_fd, const void *bpf, size_t bpf_len,
		       struct sbx_err *err);

/* A jail for work done on the host's side over content a sandbox, a registry or a provider
 * chose (a tar to unpack): the work runs in a child in new user, mount, pid, net, ipc, uts and
 * cgroup namespaces, whose '/' is a small tmpfs holding only the given trees, each at its own
 * absolute path (so paths and messages stay the host's), everything noexec, then
 * sbx_confine_finish. Run by root, the user namespace maps every id to itself; otherwise the
 * caller's uid and gid to 0. */
struct sbx_jail_tree {
	const char *path; /* an existing directory, absolute */
	bool ro;
};

struct sbx_jail {
	const struct sbx_jail_tree *trees;
	size_t n_trees;
	const char *cwd;	/* where the work starts (NULL: '/') */
	const char *store_root; /* where the seccomp filter is cached */
	const int *keep;	/* descriptors the work uses */
	size_t n_keep;
	const char *what; /* for messages: "unpacking the layer" */
	/* NULL: the maps above; else what writes the id maps of the jail's user namespace (they
	 * must allow setgroups, which the jail calls to drop the caller's groups) */
	int (*maps)(pid_t pid, void *arg);
	void *maps_arg;
};

/* root, in a user namespace where ids base..base+count-1 exist (the initial one, or one that
 * maps them): they may be given to a sandbox or a layer's files */
bool sbx_ids_mapped(unsigned long base, unsigned long count);

/* the parent's half of a child that made a user namespace of its own: waits until the child
 * says so on ready, writes its id maps with maps(pid, arg), lets it go on with a byte on go;
 * closes both. -1 with errno when the maps cannot be written (the child is killed and
 * reaped); 0 too when the child died first (its report says why) */
int sbx_userns_release(pid_t pid, int ready, int go, int (*maps)(pid_t, void *), void *arg);

/* runs fn(arg, err) in the jail and waits for it: fn's outcome, or the jail's failure */
int sbx_jail_run(const struct sbx_jail *j, int (*fn)(void *arg, struct sbx_err *err), void *arg,
		 struct sbx_err *err);

#endif
