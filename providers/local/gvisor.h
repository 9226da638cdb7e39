/* --runtime gvisor on the local provider (gvisor.c, gvisor-exec.c): the sandbox's processes run
 * under gVisor's runsc, inside the namespaces sbx makes for a local sandbox. */
#ifndef SBX_PROVIDERS_LOCAL_GVISOR_H
#define SBX_PROVIDERS_LOCAL_GVISOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "providers/local/local.h"

/* does the sandbox run under gVisor */
bool local_gvisor(const struct sbx_record *rec);
/* gVisor's own network stack (runsc --network=none): --net none, run by root. runsc cannot
 * make its stack's namespace in an ordinary user's sandbox, so there --net none runs on the
 * sockets of the sandbox's own network namespace (loopback alone, no proxy), as --net allow=
 * runs on that namespace's with the proxy */
bool local_gvisor_netstack(const struct sbx_config *c);
/* create: what gVisor cannot honour, refused (UNSUPPORTED, one line) before anything is made */
int local_gvisor_check(const struct sbx_record *rec, struct sbx_err *err);
/* the CLI, before each boot: the OCI bundle (config.json) and runsc's state directory in
 * DIR/gvisor, owned by sandbox root (uid:gid) */
int local_gvisor_prepare(const struct sbx_record *rec, uid_t uid, gid_t gid, struct sbx_err *err);
/* the supervisor, once init is ready: runsc run (or restore, from a checkpoint) inside the
 * sandbox's user, network and pid namespaces; -1 with msg on failure */
int local_gvisor_boot(const char *dir, const char *id, pid_t init, bool map_range, bool net_none,
		      char *msg, size_t len);
/* runsc's state of the sandbox emptied (before a new run or restore of the same id) */
void local_gvisor_state_reset(const char *dir);
/* sbx exec through runsc exec */
int local_gvisor_exec(struct sbx_ctx *ctx, const struct sbx_record *rec,
		      const struct sbx_exec_opts *o, int *ret_status, struct sbx_err *err);

/* memory checkpoints: a runtime that can write its processes and memory to a directory and
 * start them again from it (gVisor now; a microVM later) */
struct local_runtime_ops {
	const char *name;
	/* processes and memory to DIR/gvisor/checkpoint; the sandbox's processes end */
	int (*checkpoint)(const struct sbx_record *rec, struct sbx_err *err);
	/* the same, the sandbox left running, the image then moved to dir/checkpoint.img */
	int (*snapshot)(const struct sbx_record *rec, const char *dir, struct sbx_err *err);
};
/* snapshot --memory: the runtime's image of the running sandbox's processes (left running) in
 * snapdir/memory; UNSUPPORTED naming the runtime that has it on any other sandbox */
int local_snapshot_memory(const struct sbx_record *rec, const char *snapdir, struct sbx_err *err);
/* create --from a snapshot with memory: its image copied in for the boot to restore (the
 * sandbox must be one that can: gVisor on its own network stack); 0 when it has none */
int local_fork_memory(const struct sbx_record *rec, const json_t *info, const char *tree, uid_t uid,
		      gid_t gid, struct sbx_err *err);
/* the sandbox's runtime when it can checkpoint, or NULL */
const struct local_runtime_ops *local_runtime_of(const struct sbx_record *rec);
/* the checkpoint directory of a sandbox (malloc'd); its size on disk in bytes, -1 when it has
 * none */
char *local_checkpoint_dir(const char *dir);
long long local_checkpoint_size(const char *dir);

/* runs runsc (argv after its global flags) in the sandbox's user, network and pid namespaces
 * (its processes die with init; its state names pids of that namespace) with fds 0-2 as given
 * (-1: /dev/null); its pid, or -1 with err */
struct local_runsc {
	const char *dir;
	pid_t init;
	bool map_range;
	bool net_none;	 /* --network=none (else host: the sandbox's own network namespace) */
	bool checkpoint; /* DIR/gvisor/checkpoint reachable at /tmp/checkpoint */
	bool client;	 /* a call on the running sandbox (exec, kill): runsc's own process stays
			  * out of the sandbox's cgroups, in no mount namespace of its own, its
			  * state at LOCAL_RUNSC_CLIENT_ROOT */
	int fd[3];
};
pid_t local_runsc_spawn(const struct local_runsc *r, char *const *args, struct sbx_err *err);
/* a client call's runsc state directory (DIR/gvisor/state), as runsc's paths name it */
#define LOCAL_RUNSC_STATE_FD 3
#define LOCAL_RUNSC_CLIENT_ROOT "/proc/self/fd/3"
/* waits for it: its exit status (as waitpid's), -1 on error */
int local_runsc_wait(pid_t pid);
/* the runsc binary, resolved once per sandbox: at its first boot, $SBX_RUNSC (absolute) or the
 * first runsc in an absolute directory of $PATH, as its real path, recorded in
 * DIR/gvisor/runsc.path (local_runsc_record), which every later call of any sbx process reads,
 * whatever its environment: the sandbox's sentry and each client of it are the same binary.
 * dir NULL (or a sandbox never recorded): as the environment says. NULL when there is none;
 * the string is static */
const char *local_runsc_path(const char *dir);
int local_runsc_record(const char *dir, struct sbx_err *err);

/* signals inside gVisor (gvisor-signal.c). A client call's struct local_runsc for the running
 * sandbox (STATE when it does not run) */
int local_gvisor_client(const struct sbx_record *rec, struct local_runsc *r, struct sbx_err *err);
/* sig to process n in gVisor (LEADER: runsc kill --pid, through the sentry) and to its process
 * group (GROUP: the sandbox's sh's kill; n alone when it left the group; runsc kill when no sh
 * runs), each a client call of its own, run at once, waited for. 0 sent, 1 nothing of it was
 * left, -1 when it could not be sent */
enum {
	LOCAL_GVISOR_LEADER = 1,
	LOCAL_GVISOR_GROUP = 2
};
int local_gvisor_signal_in(const struct local_runsc *base, const char *id, pid_t n, int sig,
			   unsigned how);
/* the same to process inner and its group (an exec -d's command), as one error */
int local_gvisor_signal(const struct sbx_record *rec, pid_t inner, int sig, struct sbx_err *err);
/* sig to every process of the sandbox but gVisor's init */
int local_gvisor_kill_all(const struct sbx_record *rec, int sig, struct sbx_err *err);

#endif
