/* The local provider's internals (providers/local/): Linux namespaces on this host.
 *
 * Which file runs in which process. A sandbox has four kinds: the sbx CLI (one call: create,
 * exec, cp, pause, ...), its supervisor (forked by create, on the host side for the sandbox's
 * life), its init (PID 1 inside), and short-lived helper children (cp's child, the jail).
 *   lifecycle.c   the CLI: create (which forks the supervisor), state by looking, pause,
 *                 resume, rm (with subordinate ids, in a jail of the sandbox's id map); the
 *                 provider's table
 *   exec.c        the CLI, then its child that joined the sandbox: sbx exec
 *   exec-plain.c  the CLI, joined: exec's output without -t (terminals relayed, --json read)
 *   jobs.c        the CLI, then exec -d's waiter (forked before joining; it joins all but the
 *                 sandbox's pid namespace): background commands, their records and logs
 *   trampoline/   the exec trampoline: a static program without libc, run from a sealed memfd,
 *                 that execs the command (so the sbx binary never runs a sandbox's file)
 *   user.c        exec's child, inside: exec -u (the sandbox's passwd and group); for gVisor's
 *                 exec, the same read in cp's confined helper
 *   cp.c          the CLI, then a confined helper child in (or around) the sandbox: sbx cp
 *   fs.c          the CLI, then cp.c's confined helper child: sbx fs
 *   commit.c      the CLI: sbx commit (the sandbox frozen, its upper directory read in a jail)
 *   snapshot.c    the CLI, then a jail that sees the two trees: sbx snapshot, restore, fork
 *                 (the sandbox's files copied by core/treecopy.c)
 *   net-ctl.c     the CLI: sbx preview's request to the supervisor, exec's proxy credential
 *   supervisor.c  the supervisor: clones init, writes its id maps, reports to the CLI, holds
 *                 the sandbox (idle timeout)
 *   net-*.c       the supervisor (but net-ctl.c): egress proxy, forwarders, previews, the
 *                 control socket (net.h maps them)
 *   secrets.c     the CLI: --secret's files (the sandbox's CA, the values), the CA bundle
 *                 inside, the variables of each exec
 *   tls.c         the CLI (the CA) and the supervisor (net-tls.c): OpenSSL, dlopen'ed
 *   init.c        init: the sandbox's root and mounts, then PID 1 (reaper, socket factory)
 *   gvisor.c      --runtime gvisor: the CLI (the bundle, checkpoints), the supervisor (runsc
 *                 run or restore), and runsc in the sandbox's namespaces (gvisor.h)
 *   gvisor-runsc.c  runsc for each of them, in the sandbox's namespaces and a root of its own
 *   trampoline/ginit.c  a gVisor sandbox's first process (static, no libc), inside gVisor
 *   gvisor-exec.c the CLI (and exec -d's waiter): sbx exec on a gVisor sandbox, through runsc
 *                 exec; its watcher, a child that ends the command when the CLI is killed
 *   gvisor-signal.c the CLI, exec's watcher: signals to processes inside gVisor (jobs.c's kill);
 *                 the CLI and the supervisor: gVisor's own pause (runsc pause, resume)
 *   gvisor-checkpoint.c  memory checkpoints (struct local_runtime_ops): the CLI (pause
 *                 --checkpoint, snapshot --memory, a fork's image, what a checkpoint cut
 *                 short left) and the supervisor's boot (runsc restore)
 *   pause.c       the CLI and the supervisor (--ttl): a sandbox's processes frozen and thawed,
 *                 by its cgroup, SIGSTOP (state.c) or gVisor's own pause (gvisor-signal.c)
 * Below the processes, used by any of them (they call no file above):
 *   state.c       the sandbox's pids file, joining its namespaces, its activity clock, its
 *                 image's layers, freezing it without a cgroup
 *   cgroup.c      the sandbox's cgroups (limits, freezer)
 *   disk.c        --disk: a filesystem of its own in a file
 * Generic process helpers (/proc/PID/stat, pidfds, a child's report) are core/proc.c's;
 * confinement of helpers (seccomp, capabilities, Landlock, the jail) is core/confine.c's. */
#ifndef SBX_PROVIDERS_LOCAL_LOCAL_H
#define SBX_PROVIDERS_LOCAL_LOCAL_H

#include <sys/types.h>

#include "providers/provider.h"

/* what `pids` in the sandbox directory holds: written by the supervisor once init is ready */
struct local_pids {
	pid_t init_pid;
	unsigned long long init_start;
	pid_t sup_pid;
	unsigned long long sup_start;
};

/* resource limits (0: none) */
struct local_limits {
	long long memory; /* bytes */
	long long pids;
	long long cpu_millis; /* thousandths of a CPU */
};

/* a cgroup hierarchy of the sandbox, as init mounts it under /sys/fs/cgroup: name "" is a
 * cgroup2 mounted there itself (v2 alone); otherwise a directory of that name on a tmpfs, with a
 * v1 hierarchy of the controllers opts ("cpu,cpuacct") or, v2 set, the unified hierarchy */
struct local_cgroup_mount {
	char name[64];
	char opts[64];
	bool v2;
};
#define LOCAL_CGROUP_MOUNTS 8
/* how a sandbox's ids are the host's: decided at create, kept in the record (extra's "id_map";
 * a record without it reads by its uid_count, as sandboxes made before it) */
enum local_map_kind {
	LOCAL_MAP_SELF,	 /* only sandbox 0, as the caller's uid and gid */
	LOCAL_MAP_RANGE, /* run by root: sandbox 0..LOCAL_UID_COUNT-1 as LOCAL_UID_BASE.. */
	LOCAL_MAP_SUBID, /* an ordinary user with subordinate ids (/etc/subuid, /etc/subgid):
			  * sandbox 0 as the caller, 1..count as its ranges, written by
			  * /usr/bin/newuidmap and newgidmap (as podman does) */
};
struct local_idmap {
	enum local_map_kind kind;
	unsigned long sub_uid, sub_gid; /* SUBID: the host ids of sandbox id 1 */
	unsigned long count;		/* SUBID: how many ids from 1 on */
};

/* everything the supervisor and init need, prepared by the CLI before the fork */
struct local_setup {
	const char *dir;	/* the sandbox directory on the host */
	const char *store_root; /* $SBX_HOME, for the supervisor's idle timeout */
	const char *id;
	long long ttl_ms; /* idle timeout (0: none) */
	bool ttl_rm;	  /* at the timeout: remove, rather than pause */
	const char *hostname;
	const char *workdir;
	struct local_idmap map;
	bool map_range; /* map.kind is LOCAL_MAP_RANGE: sandbox root is LOCAL_UID_BASE */
	uid_t uid;	/* host uid/gid that sandbox root maps to */
	gid_t gid;
	unsigned long map_count;
	const struct sbx_volume *volumes;
	size_t n_volumes;
	const void *bpf;
	size_t bpf_len;
	bool net_host;			 /* --net host: the host's network namespace */
	const struct sbx_config *config; /* the sandbox's configuration (its net policy) */
	const char *label;		 /* name or id, for messages */
	char **layers;			 /* --image: the unpacked layer directories, base first */
	const char *ca_pem; /* --secret: the sandbox's CA (PEM), which init makes trusted */
	size_t n_layers;    /* 0: root/ alone, no overlay */
	bool image;	    /* on an image (else the host's system view) */
	bool disk;	    /* --disk: root/ (or fs/ with an image) is the sandbox's disk.img */
	/* the sandbox's cgroups at /sys/fs/cgroup inside (from local_cgroup_mounts at boot) */
	struct local_cgroup_mount cgroup_mounts[LOCAL_CGROUP_MOUNTS];
	size_t n_cgroup_mounts;
	/* mounted read-write, the sandbox's cgroup delegated to its root (nested sandboxes);
	 * otherwise read-only */
	bool cgroup_writable;
	bool nested; /* --nested: seccomp.bpf is the nested profile; /proc and /sys stay fully
		      * visible, so a user namespace made inside may mount its own */
	bool gvisor; /* --runtime gvisor: the supervisor boots runsc once init is ready */
};

/* the supervisor's report to the creating CLI */
struct local_report {
	int ok;
	struct local_pids pids;
	char msg[400];
};

#define LOCAL_UID_BASE 100000u
#define LOCAL_UID_COUNT 65536u

int local_read_pids(const char *dir, struct local_pids *ret);
/* does this sandbox map ids beyond 0 (root's range, or the caller's subordinate ids), so that
 * setgroups and other users work inside, or only the caller's uid */
bool local_map_range_of(const struct sbx_record *rec);
/* the id map of a sandbox, from its record */
void local_idmap_of(const struct sbx_record *rec, struct local_idmap *m);
/* the id map for a new sandbox: root's range when we hold it; an ordinary user's first range
 * of 65536 or more ids (else its largest) in both /etc/subuid and /etc/subgid (by name or uid)
 * when /usr/bin/newuidmap and newgidmap exist; otherwise the caller's uid alone */
void local_idmap_find(struct local_idmap *m);
/* the record's "id_map": {"uid": [[inside, outside, count], ...], "gid": [...]} */
json_t *local_idmap_json(const struct local_idmap *m);
/* is sandbox uid (and gid) mapped */
bool local_idmap_has(const struct local_idmap *m, unsigned long uid);
/* the id maps of a sandbox's user namespace, for its first process pid (every user namespace
 * made for the sandbox: init's, a stopped sandbox's cp, rm's cleaner); -1 with errno */
int local_write_maps(pid_t pid, const struct local_idmap *m);
/* what a user meets who has no subordinate ids: "add 'USER:100000:65536' to /etc/subuid and
 * /etc/subgid (and install uidmap) and recreate it", malloc'd */
char *local_subid_advice(void);
/* the seccomp filter written at create (sandboxes/ID/seccomp.bpf); a read error (EMFILE, ...)
 * as such, STATE naming label when it is missing or not a whole filter */
int local_seccomp_of(const struct sbx_record *rec, const char *label, void **ret, size_t *ret_len,
		     struct sbx_err *err);
/* its --hostname, or its name, or its id */
const char *local_hostname(const struct sbx_record *rec);
/* a detached copy of the tree at path (open_tree with OPEN_TREE_CLONE, recursive), to be
 * attached with move_mount; -1 with errno */
int local_clone_tree(const char *path);
/* --net host: the sandbox shares the host's network namespace */
bool local_net_host(const struct sbx_record *rec);
/* setns into every namespace of the running sandbox whose init is init_pid (pidfd on it);
 * the network namespace too, unless it is the host's */
int local_join(const struct sbx_record *rec, pid_t init_pid, int pidfd, struct sbx_err *err);

/* marks exec/cp/preview traffic for the idle timeout */
void local_touch_activity(const char *dir);
/* the unpacked layer directories of an image sandbox, base first (NULL, 0 for one on the
 * host's system view); STATE when the record is broken or a layer left the store */
int local_image_layers(struct sbx_ctx *ctx, const struct sbx_record *rec, char ***ret,
		       size_t *ret_n, struct sbx_err *err);
/* the idle deadline (unix ms) of a running sandbox with a TTL, or 0 */
long long local_idle_deadline(const char *dir, long long ttl_ms);
/* freezes (pause) or thaws every process of a running sandbox: its cgroup, or SIGSTOP/SIGCONT
 * to every process of its pid namespace when no cgroup freezer is writable. Not for a gVisor
 * sandbox's processes: the CLI and the supervisor call local_sandbox_freeze */
int local_freeze(const char *dir, const struct local_pids *pids, bool freeze, struct sbx_err *err);
/* SIGSTOP (waited for until it stopped) or SIGCONT to the sandbox's init alone: beside a
 * runtime's own pause, what says the sandbox is paused when no cgroup freezer is writable */
int local_freeze_init(const struct local_pids *pids, bool freeze, struct sbx_err *err);
/* 1 when the sandbox's processes are frozen (its cgroup, or a stopped init) */
int local_is_frozen(const char *dir, const struct local_pids *pids);
/* pause.c: the processes of running sandbox rec frozen or thawed as its runtime allows (its
 * cgroup freezer; without one SIGSTOP, or for gVisor runsc pause with init stopped), so that
 * local_is_frozen tells */
int local_sandbox_freeze(const struct sbx_record *rec, const struct local_pids *pids, bool freeze,
			 struct sbx_err *err);

/* cgroups (cgroup.c): the sandbox's directories are listed in DIR/cgroups */
int local_cgroup_setup(const char *sbdir, const char *id, const struct local_limits *lim,
		       struct sbx_err *err);
/* moves pid into every cgroup of the sandbox's processes; -1 with errno */
int local_cgroup_enter(const char *sbdir, pid_t pid);
/* moves pid (the supervisor) into the sandbox's cgroups beside them, but the freezer's */
int local_cgroup_enter_supervisor(const char *sbdir, pid_t pid);
/* the supervisor, about to remove its sandbox's cgroups, goes back where it came from */
void local_cgroup_leave(pid_t pid);
bool local_cgroup_can_freeze(const char *sbdir);
int local_cgroup_freeze(const char *sbdir, bool freeze, struct sbx_err *err);
/* 1 frozen (or freezing), 0 not, -1 no freezer */
int local_cgroup_frozen(const char *sbdir);
/* processes the kernel killed for the memory limit; -1 when unknown */
long long local_cgroup_oom_kills(const char *sbdir);
/* "v2", "v1", "hybrid" or "none" */
char *local_cgroup_describe(const char *sbdir);
/* what init mounts at /sys/fs/cgroup: the sandbox's hierarchies, at most max; their number */
size_t local_cgroup_mounts(const char *sbdir, struct local_cgroup_mount *m, size_t max);
/* delegation: the sandbox's own cgroup (its leaf) made writable by sandbox root, host uid:gid,
 * so that it can make cgroups under it; the limits stay on the directory above */
int local_cgroup_delegate(const char *sbdir, uid_t uid, gid_t gid, struct sbx_err *err);
/* inspect: "memory_stats" (usage, limit, failcnt or the events high and max) and "pressure"
 * (memory and cpu PSI, some and full avg10) of the sandbox's cgroups into live */
void local_cgroup_stats(const char *sbdir, json_t *live);
/* exec's OOM report: watch opens the sandbox's OOM counters and the host's /proc before exec
 * joins the sandbox; pid notes the command's pid (the host's) once forked; say, after it
 * ended with wait status st, prints one line when the kernel killed a process for the memory
 * limit meanwhile, and closes what watch opened */
struct local_oom_watch {
	int fd[3];
	int procfd;
	long long before;
	long long limit;
	pid_t pid; /* the command's, as the sandbox sees it (0: unknown) */
};
void local_cgroup_oom_watch(const char *sbdir, long long limit, struct local_oom_watch *w);
void local_cgroup_oom_pid(struct local_oom_watch *w, pid_t pid);
bool local_cgroup_oom_say(struct local_oom_watch *w, const char *label, const char *cmd, int st);
/* exec --json: what wait4 told of the command (st, its rusage) */
struct rusage;
void local_exec_result(struct sbx_exec_result *r, const struct rusage *ru, int st, bool timed_out);
/* --cpus: pid (init) may run on ceil(cpu_millis / 1000) of the CPUs the caller may use, a run
 * of them chosen by the sandbox's id, so that nproc and runtimes count what they get */
void local_cpu_affinity(pid_t pid, const char *id, long long cpu_millis);
/* thaws the v1 freezer cgroups a delegated sandbox froze under its own: its processes there
 * could not die */
void local_cgroup_thaw_below(const char *sbdir);
/* removes the sandbox's cgroup directories (waiting briefly for the last tasks) */
void local_cgroup_remove(const char *sbdir);

/* exec -u (user.c): SPEC (USER[:GROUP], names or numbers) in the sandbox's /etc/passwd
 * and /etc/group, which are the process's own once it joined the sandbox; home is allocated */
struct local_user {
	uid_t uid;
	gid_t gid;
	char *home;
};
int local_user_resolve(const char *spec, const char *label, struct local_user *u,
		       struct sbx_err *err);
/* the same for an exec that does not join the sandbox itself (--runtime gvisor): the files read
 * by cp's confined helper (local_confined) inside the running sandbox, never by sbx on the
 * host; home is allocated */
int local_user_resolve_in(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *spec,
			  struct local_user *u, struct sbx_err *err);
/* is u's uid and gid mapped in the sandbox (map m): otherwise one line naming the id, and
 * advice (local_subid_advice, made before joining the sandbox) when only the caller's uid is */
int local_user_check_mapped(const struct local_idmap *m, const struct local_user *u,
			    const char *advice, const char *label, struct sbx_err *err);
/* the image (its layer directories, base first) has users other than root in its
 * /etc/passwd: their names, the first few, in names (len bytes) */
bool local_image_users(char *const *layers, size_t n, char *names, size_t len);
/* the entry of passwd or group text named name (or, name NULL, whose third field is id),
 * copied into line (len bytes: a longer entry is skipped) and split on ':' into fields (nf;
 * those an entry lacks are ""); entries of fewer than 3 fields are skipped */
bool local_user_entry(const char *text, const char *name, long long id, char *line, size_t len,
		      char **fields, int nf);

/* --secret (secrets.c): the sandbox's CA and the values, in its directory's secrets/ (0700,
 * files 0600), the CA made once; each exec's $NAME placeholders and the variables that point
 * TLS clients at the bundle init writes (/run/sbx/ca-bundle.crt) */
int local_secrets_write(const struct sbx_record *rec, const struct sbx_config *c,
			struct sbx_err *err);
void local_secrets_env(const struct sbx_record *rec, void (*set)(void *, const char *), void *env);
/* sbx update --secret (net-ctl.c): whether c's secrets differ from rec's (or were read
 * again); the values written, and a running supervisor told to read them */
bool local_secrets_changed(const struct sbx_record *rec, const struct sbx_config *c);
int local_secrets_update(const struct sbx_record *rec, const struct sbx_config *c, bool live,
			 struct sbx_err *err);

int local_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
	       int *ret_status, struct sbx_err *err);
/* where detached commands (exec -d) write their output */
char *local_log_path(const struct sbx_record *rec);

/* exec -d and the commands it started (jobs.c): ps, logs, wait and kill of one exec */
#define LOCAL_JOB_ID_LEN 12
struct local_job;
/* local_exec's body: job NULL for an attached exec */
typedef int (*local_exec_fn)(struct sbx_ctx *, const struct sbx_record *,
			     const struct sbx_exec_opts *, struct local_job *job, int *ret_status,
			     struct sbx_err *);
/* the CLI's exec -d: the exec's files, then a waiter (forked here, in the host's pid
 * namespace) that calls run with its job; the CLI returns once the command runs */
int local_job_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		   int *ret_status, struct sbx_err *err, local_exec_fn run);
/* in the waiter: where the command's stdout and stderr go; then, the command forked (pid,
 * the host's), the CLI is told; then its output is relayed until it ended (its end recorded,
 * *ret_st its wait status) and nothing holds its output any longer */
int local_job_out_fd(const struct local_job *j);
/* inner: the command's pid as the sandbox sees it, when the host's process (pid) is not the
 * command but runsc's client for it (--runtime gvisor); 0 otherwise */
void local_job_started(struct local_job *j, pid_t pid, pid_t inner);
/* in the waiter, for a command that never started: what its output pipe holds (len bytes at
 * most), which is then no longer the job's */
size_t local_job_pending(struct local_job *j, char *buf, size_t len);
void local_job_relay(struct local_job *j, pid_t pid, int *ret_st);
bool local_job_id_valid(const char *id);
int local_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		    struct sbx_err *err);
int local_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		  struct sbx_err *err);
int local_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		   int out, struct sbx_err *err);
int local_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		   struct sbx_err *err);

/* the supervisor asks init for sockets of the sandbox's network namespace over a
 * SOCK_SEQPACKET pair: op 'S' a plain TCP socket, '6' a plain TCP socket of IPv6 (to dial
 * ::1), 'L' one listening on 127.0.0.1:port; init
 * answers with an int (0, or an errno) and the socket (SCM_RIGHTS) */
struct local_factory_req {
	char op;
	unsigned short port;
};

/* the supervisor's network service (net-loop.c): egress proxy, --host-port forwarders,
 * previews and the control socket */
struct local_net;
/* before the supervisor reports: opens the listeners; NULL with msg on failure */
struct local_net *local_net_start(const struct local_setup *s, int factory_fd, char *msg,
				  size_t len);
/* waits up to timeout_ms (-1: forever) for init's pidfd, serving the network meanwhile;
 * 1 when the pidfd is ready, 0 on timeout */
int local_net_wait(struct local_net *n, int pidfd, long long timeout_ms);
/* the idle timeout (ms, 0: none): the sandbox's --ttl, or what sbx update set since (a
 * change makes local_net_wait return 0 at once, so that the timeout is looked at again) */
long long local_net_ttl(const struct local_net *n);
/* why the proxy must not dial an address for a name the sandbox chose ("a loopback address",
 * "a private address", ...), or NULL */
struct sockaddr;
const char *local_net_forbidden(const struct sockaddr *sa);
/* the CLI's side of sbx preview */
int local_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		  const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err);
char *local_egress_log_path(const struct sbx_record *rec);
/* exec: a proxy credential for this exec, registered for the supervisor to check; adds the
 * proxy variables and SBX_EXEC_ID to env. A credential that cannot be recorded (a full disk)
 * is left out with a warning, so the command still runs; -1 only out of descriptors */
int local_net_exec_env(const struct sbx_record *rec, char *const *argv,
		       void (*set)(void *, const char *), void *env, struct sbx_err *err);
/* sbx update: the new configuration c recorded by core, told to the supervisor when it runs */
int local_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		 struct sbx_err *err);
/* one request line to the supervisor's control socket, its answer in *ret */
int local_ctl_call(const struct sbx_record *rec, json_t *req, json_t **ret, struct sbx_err *err);
/* live.c (the CLI): sbx update as a whole (limits and --ttl, then the egress policy through
 * local_update), keepalive and stats */
int local_live_update(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_config *c,
		      struct sbx_err *err);
int local_keepalive(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_err *err);
int local_stats(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		struct sbx_err *err);
/* every process of the pid namespace of init (malloc'd in *ret); their number */
size_t local_ns_members(pid_t init, pid_t **ret);
/* an exec's watch on the egress log: taken before it joins the sandbox, then, once its command
 * ended (env: what local_net_exec_env set), one line on stderr saying which of its requests
 * the egress policy refused, if any (the watch is closed) */
struct local_exec_watch {
	int fd; /* the egress log, read from its end when the exec started */
};
void local_net_exec_watch(const struct sbx_record *rec, struct local_exec_watch *w);
void local_net_exec_refusals(const struct sbx_record *rec, struct local_exec_watch *w,
			     char *const *env);
static inline void local_net_exec_unwatch(struct local_exec_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* exec: a connection to the supervisor's control socket (before joining the sandbox), or -1;
 * then the command's registration on it: the supervisor ends the command's process group
 * (pid, its leader) if the calling process dies first, and holds the idle timeout while it
 * runs. Best effort: without a supervisor the command runs unregistered */
int local_exec_ctl_open(const struct sbx_record *rec);
void local_exec_register(int ctl, pid_t pid);
/* commands of attached execs that run now (net-exec.c, the supervisor's registry) */
struct local_net;
size_t local_net_execs(struct local_net *n);

/* exec without -t (exec-plain.c): each of the caller's terminals among 0-2 relayed through a
 * pipe, never given to the command; with o->result->take, both streams read for --json */
struct local_plain_relay {
	int in_w;	  /* our end of the command's stdin (-1: none) */
	int out_r, err_r; /* our ends of its stdout, stderr (-1: none) */
	bool in_done;
	struct sbx_exec_result *res; /* --json: the output goes to res->take, not to 1 and 2 */
};
int local_plain_relay_open(const struct sbx_exec_opts *o, struct local_plain_relay *r, int fd[3],
			   int child_end[3], struct sbx_err *err);
bool local_plain_relay_active(const struct local_plain_relay *r);
/* until the command (pid) ends, then what it left in the pipes; closes them */
void local_plain_relay_run(struct local_plain_relay *r, pid_t pid);
void local_plain_relay_close(struct local_plain_relay *r);
/* one read from a readable descriptor (a pipe, the pty), or with drain everything it holds
 * now, to fd; false once it is closed or fd fails */
bool local_exec_pump(int from, int to, bool drain);
void local_set_nonblock(int fd);

/* runs in the forked supervisor; reports on report_fd; never returns */
_noreturn_ void local_supervisor(const struct local_setup *s, int report_fd);
/* runs in the sandbox's init, just cloned by the supervisor into the new namespaces: waits
 * for a byte on sync_fd (its id maps are written), sets the sandbox up from the trees the
 * supervisor detached (-1: opened here), says "" (ready) or why not on report_fd, then
 * serves as PID 1 until sync_fd ends; never returns */
_noreturn_ void local_init(const struct local_setup *s, int rootfd, int *volfds, int *layerfds,
			   int sync_fd, int report_fd);

/* --disk (disk.c): the size asked for (0: none); whether it can be had here; the
 * filesystem made in DIR/disk.img, its root owned by uid:gid; a detached mount of it (a mount
 * fd), with *ret_lock holding it mounted once at a time until closed */
long long local_disk_size(const struct sbx_record *rec);
int local_disk_check(struct sbx_err *err);
int local_disk_make(const char *sbdir, long long bytes, uid_t uid, gid_t gid, struct sbx_err *err);
int local_disk_mount(const char *sbdir, int *ret_lock, struct sbx_err *err);

/* sbx commit (commit.c): the sandbox's overlay upper directory as a layer in the store */
int local_commit(struct sbx_ctx *ctx, const struct sbx_record *rec, struct sbx_layer *ret,
		 struct sbx_err *err);
/* snapshots (snapshot.c): the sandbox's files (root/, or fs/upper on an image) copied into
 * dest in a jail, the sandbox frozen meanwhile when it runs; info gets "files", "id_map",
 * "map_kind", "size" and "file_count" */
int local_snapshot(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *dest,
		   json_t *info, struct sbx_err *err);
/* removes the snapshot directory path (info: its record, or NULL), files owned by subordinate
 * ids in a jail of their map */
int local_snapshot_rm(struct sbx_ctx *ctx, const char *path, const json_t *info,
		      struct sbx_err *err);
/* a snapshot froze the sandbox and died before it thawed it: true once (the note goes) */
bool local_snapshot_froze(const char *dir);
/* the snapshot (its record info) fits the sandbox (the same kind of files, image and id map;
 * no --disk): STATE or UNSUPPORTED saying why not */
int local_snapshot_check(const struct sbx_record *rec, const json_t *info, bool replace,
			 struct sbx_err *err);
/* the snapshot tree (its record info) copied in as the sandbox's files: a new sandbox's
 * (replace unset), or over its own, exchanged once whole (replace); run/sbx/hostname and hosts
 * are written from hostname and hosts. STATE when the snapshot does not fit the sandbox */
int local_snapshot_unpack(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *tree,
			  const json_t *info, bool replace, const char *hostname, const char *hosts,
			  struct sbx_err *err);
/* what a restore left of the old files (a subvolume, which the jail leaves: it goes here, at
 * once where the caller may), removed; a failure is a warning (the next restore retries) */
void local_snapshot_discard(struct sbx_ctx *ctx, const struct sbx_record *rec);
/* the snapshot whose tree the files of the sandbox in dir stack on (fs/base: its id), as an
 * overlay's lower layer under fs/upper, or NULL (malloc'd) */
char *local_base_of(const char *dir);
/* the files of a sandbox stacked on a snapshot, as one tree (the snapshot's, with fs/upper
 * applied over it; whiteouts kept on an image), copied to dest (which must not exist) in a
 * jail of the sandbox's map; the caller freezes a running sandbox meanwhile */
int local_files_merged(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *dest,
		       struct sbx_err *err);
/* such a copy removed (in a jail of the sandbox's map where it must be); a failure warns */
void local_files_drop(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *path);
/* struct sbx_provider.snapshot_users */
char *local_snapshot_users(struct sbx_ctx *ctx, const char *id);

/* sbx cp (cp.c): in a child that joined the sandbox (or, stopped, entered its files) */
int local_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		const struct sbx_cp_opts *opts, struct sbx_err *err);
int local_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		 const struct sbx_cp_opts *opts, struct sbx_err *err);
/* the same confined helper for other work: fn(arg, fd) runs as cp's copy does, inside a
 * running or paused sandbox, or in a stopped one's files (fd its one descriptor); drain(arg)
 * runs in the CLI meanwhile (NULL: none). Its outcome, else drain's */
int local_confined(struct sbx_ctx *ctx, const struct sbx_record *rec, int fd,
		   int (*fn)(void *arg, int fd, struct sbx_err *err),
		   int (*drain)(void *arg, struct sbx_err *err), void *arg, struct sbx_err *err);
/* sbx fs (fs.c): the file verbs, each in local_confined's helper */
int local_fs(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_fs_op *op,
	     struct sbx_err *err);

#endif
