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
/* the limits of the host's cgroups of a gVisor sandbox, for what c asks inside (gVisor's own
 * processes need room beside the sandbox's: see gvisor.c) */
void local_gvisor_host_limits(const struct sbx_config *c, struct local_limits *lim);
/* the CLI, before each boot: the OCI bundle (config.json), runsc's state directory and the
 * sandbox's /etc/hostname and /etc/hosts (hosts: its text) in DIR/gvisor, the first two owned
 * by sandbox root (uid:gid) */
int local_gvisor_prepare(const struct sbx_record *rec, uid_t uid, gid_t gid, const char *hosts,
			 struct sbx_err *err);
/* the supervisor, once init is ready: runsc run (or restore, from a checkpoint) inside the
 * sandbox's user, network and pid namespaces, waited for at most SBX_GVISOR_BOOT_TIMEOUT
 * seconds (60); -1 with msg on failure */
int local_gvisor_boot(const struct local_setup *s, pid_t init, char *msg, size_t len);
/* runsc run, or restore from the image in DIR/gvisor/checkpoint/IMAGE, for sandbox s (its
 * messages to logfd), waited for as the boot is; then its gVisor kernel recorded; -1 with msg
 * when runsc failed, -2 with msg when it ran but its kernel could not be recorded */
int local_gvisor_start(const struct local_setup *s, pid_t init, const char *image, int logfd,
		       char *msg, size_t len);
/* the processes sbx-ginit killed for --memory since the sandbox's last boot */
long long local_gvisor_oom_kills(const char *dir);
/* the same from the CLI, for a sandbox whose init runs (a snapshot's restore) */
int local_gvisor_reboot(const struct sbx_record *rec, pid_t init, char *msg, size_t len);
/* the sandbox's gVisor kernel (runsc's sandbox process, found at boot) has ended while its
 * init runs: true, and why in why */
bool local_gvisor_gone(const struct sbx_record *rec, char *why, size_t len);
/* runsc's state of the sandbox emptied (before a new run or restore of the same id) */
void local_gvisor_state_reset(const char *dir);
/* sbx exec through runsc exec */
int local_gvisor_exec(struct sbx_ctx *ctx, const struct sbx_record *rec,
		      const struct sbx_exec_opts *o, int *ret_status, struct sbx_err *err);

/* --- memory checkpoints (gvisor-checkpoint.c) ---------------------------------------------
 * A runtime that can write a sandbox's processes and memory to an image and start them again
 * from it: gVisor now, a microVM runtime later. A sandbox's image lives in its directory (for
 * gVisor DIR/gvisor/checkpoint); a memory snapshot keeps one of its own (SNAPDIR/memory); a
 * fork of it starts from a copy. */

/* what a boot restores with (the supervisor's, or a snapshot's in the CLI) */
struct local_boot {
	const struct local_setup *setup; /* the sandbox's (its directory, id, options) */
	pid_t init;
};

struct local_runtime_ops {
	const char *name; /* its --runtime NAME */
	/* the options its checkpoints need, and why (the refusals say it); a fork of a memory
	 * snapshot runs with the same (its record says which) */
	bool needs_net_none;
	const char *net_none_why;
	bool needs_root;
	const char *root_why;
	/* the CLI: the processes and memory of running sandbox rec to its image; they end, and
	 * nothing of the runtime's is left running (its memory freed) */
	int (*checkpoint)(const struct sbx_record *rec, struct sbx_err *err);
	/* at boot, when the sandbox has an image: its processes started from it, the image then
	 * spent (an image is restored once); -1 with msg */
	int (*restore)(const struct local_boot *b, char *msg, size_t len);
	/* the CLI: the image of running sandbox rec into directory to; while its processes are
	 * stopped, stopped(arg) runs (the copy of its files: both are of one moment); then they
	 * run on from the image */
	int (*snapshot)(const struct sbx_record *rec, const char *to,
			int (*stopped)(void *arg, struct sbx_err *err), void *arg,
			struct sbx_err *err);
	/* the CLI, at create --from: the image a snapshot kept in directory from, copied into
	 * new sandbox dir's for its first boot to restore (owned by sandbox root, uid:gid) */
	int (*fork)(const char *from, const char *dir, uid_t uid, gid_t gid, struct sbx_err *err);
	/* the size on disk of sandbox dir's image, -1 when it has none */
	long long (*image_size)(const char *dir);
};

/* gVisor's (gvisor.c's boot restores through it) */
extern const struct local_runtime_ops local_runtime_gvisor;
/* the runtime of sandbox rec when it can checkpoint, or NULL; the one named so, or NULL */
const struct local_runtime_ops *local_runtime_of(const struct sbx_record *rec);
const struct local_runtime_ops *local_runtime_named(const char *name);
/* pause --checkpoint (what, for the message): rec's runtime, once it is sure it can; on a
 * runtime without checkpoints UNSUPPORTED, naming the runtime that has them */
const struct local_runtime_ops *local_checkpoint_runtime(const struct sbx_record *rec,
							 const char *what, struct sbx_err *err);
/* snapshot --memory: the runtime's image of the running sandbox's processes in
 * snapdir/memory (info records the runtime and network its forks take), stopped(arg) run
 * while they are stopped, then they run on; UNSUPPORTED naming the runtime that has it on any
 * other sandbox */
int local_snapshot_memory(const struct sbx_record *rec, const char *snapdir, json_t *info,
			  int (*stopped)(void *arg, struct sbx_err *err), void *arg,
			  struct sbx_err *err);
/* create --from a snapshot with memory: its image copied in for the boot to restore (the
 * sandbox must be of the snapshot's runtime and able to restore); 0 when it has none */
int local_fork_memory(const struct sbx_record *rec, const json_t *info, const char *tree, uid_t uid,
		      gid_t gid, struct sbx_err *err);
/* the checkpoint directory of a sandbox (malloc'd) */
char *local_checkpoint_dir(const char *dir);
/* inspect: the size on disk of the sandbox's whole image (one being written is not yet), -1 */
long long local_checkpoint_bytes(const struct sbx_record *rec);
/* look() at a sandbox whose init and supervisor live: when a checkpoint of it was cut short
 * (its sbx killed), true with what it is now in *ret (stopped: its processes are in the image
 * or being written there; a checkpoint that never began is undone and false returned) */
bool local_checkpoint_look(const struct sbx_record *rec, const struct local_pids *pids,
			   enum sbx_state *ret);
/* a checkpoint of sandbox dir is under way, cut short or kept (its gVisor kernel ended into
 * it rather than died) */
bool local_checkpoint_noted(const char *dir);
/* resume of a stopped or released sandbox: a checkpoint cut short settled first (an image
 * still being written is waited for; what is left of one that cannot be restored goes) */
int local_checkpoint_settle(const struct sbx_record *rec, struct sbx_err *err);

/* runs runsc (argv after its global flags) in the sandbox's user, network and pid namespaces
 * (its processes die with init; its state names pids of that namespace) and in a root of its
 * own (gvisor-runsc.c) with fds 0-2 as given (-1: /dev/null); its pid, or -1 with err */
struct local_runsc {
	const char *dir;
	pid_t init;
	bool map_range;
	bool net_none;	 /* --network=none (else host: the sandbox's own network namespace) */
	bool checkpoint; /* DIR/gvisor/checkpoint reachable at /tmp/checkpoint */
	/* killed when its caller dies (a checkpoint's runsc: what an sbx killed midway left
	 * must not go on changing the sandbox after the look that found it) */
	bool die_with_caller;
	bool client;   /* a call on the running sandbox (exec, kill): runsc's own process stays
			  * out of the sandbox's cgroups, in no mount namespace of its own, its
			  * state at LOCAL_RUNSC_CLIENT_ROOT */
	bool own_root; /* a client call that saves runsc's state (pause, resume): in a root of
			* its own all the same, its state at /tmp/state, where run recorded it */
	int fd[3];
	/* run and restore (the supervisor's boot): the sandbox's set-up; its root, the bundle
	 * (at /tmp/sbx/bundle) and what it binds are there too */
	const struct local_setup *setup;
};
pid_t local_runsc_spawn(const struct local_runsc *r, char *const *args, struct sbx_err *err);
/* a client call's runsc state directory (DIR/gvisor/state), as runsc's paths name it */
#define LOCAL_RUNSC_STATE_FD 3
#define LOCAL_RUNSC_CLIENT_ROOT "/proc/self/fd/3"
/* waits for it: its exit status (as waitpid's), -1 on error */
int local_runsc_wait(pid_t pid);
/* runsc's last message: the last line of what logfd holds (read from its last KiB), else
 * none; into buf */
void local_runsc_log_tail(int logfd, char *buf, size_t len, const char *none);
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
/* a graceful stop: SIGTERM to every process of the sandbox but gVisor's init, from inside
 * gVisor, then waits up to grace_ms for them to end (0 also when they did not: what is left
 * is killed with init); -1 when it could not be sent */
int local_gvisor_stop_all(const struct sbx_record *rec, long long grace_ms, struct sbx_err *err);
/* runsc pause (every task inside stops, its CPU time too) or runsc resume of the running
 * sandbox, a client call waited for (at most 60 s); a sandbox already so counts as done */
int local_gvisor_pause(const struct sbx_record *rec, bool pause, struct sbx_err *err);

#endif
