/* Local provider internals shared by local.c, local-init.c and local-seccomp.c. */
#ifndef SBX_PROVIDERS_LOCAL_H
#define SBX_PROVIDERS_LOCAL_H

#include <sys/types.h>

#include "providers/provider.h"

/* what `pids` in the sandbox directory holds: written by the supervisor once init is ready */
struct local_pids {
	pid_t init_pid;
	unsigned long long init_start;
	pid_t sup_pid;
	unsigned long long sup_start;
};

/* everything the supervisor and init need, prepared by the CLI before the fork */
struct local_setup {
	const char *dir;	/* the sandbox directory on the host */
	const char *hostname;
	const char *workdir;
	bool map_range;		/* run by root: map sandbox root to uid_base.. */
	uid_t uid;		/* host uid/gid that sandbox root maps to */
	gid_t gid;
	unsigned long map_count;
	const struct sbx_volume *volumes;
	size_t n_volumes;
	const void *bpf;
	size_t bpf_len;
};

/* the supervisor's report to the creating CLI */
struct local_report {
	int ok;
	struct local_pids pids;
	char msg[400];
};

#define LOCAL_UID_BASE 100000u
#define LOCAL_UID_COUNT 65536u

int local_starttime(pid_t pid, unsigned long long *ret);
int local_read_pids(const char *dir, struct local_pids *ret);
/* 1 alive (same start time), 0 gone */
int local_alive(pid_t pid, unsigned long long start);

int local_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	       int *ret_status, struct sbx_err *err);
/* where detached commands (exec -d) write their output */
char *local_log_path(const struct sbx_record *rec);

/* runs in the forked supervisor; reports on report_fd; never returns */
_noreturn_ void local_supervisor(const struct local_setup *s, int report_fd);

/* sbx cp (local-cp.c): in a child that joined the sandbox (or, stopped, entered its files) */
int local_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		const struct sbx_cp_opts *opts, struct sbx_err *err);
int local_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		 const struct sbx_cp_opts *opts, struct sbx_err *err);

/* seccomp profile as raw BPF, exported with libseccomp */
int local_seccomp_build(void **ret_bpf, size_t *ret_len, struct sbx_err *err);
/* installs a raw BPF filter (no_new_privs first); -1 with errno */
int local_seccomp_install(const void *bpf, size_t len);
/* cuts capabilities to docker's default set; -1 with errno */
int local_caps_drop(void);

#endif
