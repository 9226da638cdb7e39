/* The provider vtable: one backend per struct, NULL slot = unsupported. */
#ifndef SBX_PROVIDERS_PROVIDER_H
#define SBX_PROVIDERS_PROVIDER_H

#include <jansson.h>
#include <stdbool.h>

#include "core/config.h"
#include "core/err.h"
#include "core/fs.h"
#include "core/options.h"
#include "core/store.h"

struct sbx_layer;

struct sbx_provider {
	const char *name, *summary;
	bool remote;	     /* hosted: states are remembered in the record, not seen locally */
	const char *key_var; /* the variable holding the API key (NULL: none needed) */
	unsigned caps;	     /* enum sbx_cap: what it can honour (core checks first) */
	const char *default_workdir; /* recorded when create has no -w (NULL: the provider's) */
	/* the names --runtime takes (NULL-terminated; "*": any the engine knows), or NULL: none
	 * but its default */
	const char *const *runtimes;
	/* --image may name an image of sbx's local store, which the provider hands its engine
	 * itself (else such an image, made here, is refused) */
	bool local_images;
	/* whether it can be used as things stand, and if not why (NULL: always); asked before
	 * anything is created */
	int (*ready)(struct sbx_err *);
	/* refuses a combination of create's options it cannot honour, before an id is claimed
	 * (optional; no network: only what the options say) */
	int (*check)(const struct sbx_config *, struct sbx_err *);
	char *(*api_url)(void); /* where its API is reached (NULL: nowhere) */
	/* makes the sandbox rec->config describes (an id claimed, the record saved as creating) */
	int (*create)(struct sbx_ctx *, struct sbx_record *, struct sbx_err *);
	int (*exec)(struct sbx_ctx *, const struct sbx_record *, const struct sbx_exec_opts *,
		    int *ret_status, struct sbx_err *);
	/* unpack the tar on tar_fd at dest inside / write a tar of src inside to tar_fd */
	int (*cp_in)(struct sbx_ctx *, const struct sbx_record *, int tar_fd, const char *dest,
		     const struct sbx_cp_opts *, struct sbx_err *);
	int (*cp_out)(struct sbx_ctx *, const struct sbx_record *, const char *src, int tar_fd,
		      const struct sbx_cp_opts *, struct sbx_err *);
	int (*rm)(struct sbx_ctx *, struct sbx_record *, bool force, struct sbx_err *);
	/* rec->state is fresh (running, or for release also paused/stopped); called locked */
	int (*pause)(struct sbx_ctx *, struct sbx_record *, const struct sbx_pause_opts *,
		     struct sbx_err *);
	/* back to running from paused, released or stopped (rec->state fresh); called locked */
	int (*resume)(struct sbx_ctx *, struct sbx_record *, struct sbx_err *);
	/* the output of detached commands: a path on this host, or NULL (unsupported) */
	char *(*log_path)(const struct sbx_record *);
	/* previews: *ret is the opened preview's object, or the array of open previews */
	int (*preview)(struct sbx_ctx *, const struct sbx_record *, const struct sbx_preview_opts *,
		       json_t **ret, struct sbx_err *);
	/* the egress log (JSON lines; PATH.1 is the rotated part): a path, or NULL */
	char *(*egress_log_path)(const struct sbx_record *);
	/* applies the configuration c, which replaces rec->config, to a running, paused, stopped
	 * or released sandbox (rec->state fresh; core saves the record after); called locked */
	int (*update)(struct sbx_ctx *, const struct sbx_record *, const struct sbx_config *c,
		      struct sbx_err *);
	/* sbx fs: one file verb (struct sbx_fs_op) on the sandbox's files; NOTFOUND for a missing
	 * path, UNSUPPORTED naming a verb the provider's API cannot do */
	int (*fs)(struct sbx_ctx *, const struct sbx_record *, const struct sbx_fs_op *,
		  struct sbx_err *);
	/* the idle deadline starts again from now, as traffic would start it (rec->state fresh:
	 * running); a --ttl changed with it went through update first */
	int (*keepalive)(struct sbx_ctx *, const struct sbx_record *, struct sbx_err *);
	/* one sample of what a running sandbox uses: *ret an object of sbx stats' fields (cpu_ms,
	 * cpu_percent, memory_bytes, memory_limit_bytes, pids, disk_bytes, net_rx_bytes,
	 * net_tx_bytes; null where the provider cannot tell) */
	int (*stats)(struct sbx_ctx *, const struct sbx_record *, json_t **ret, struct sbx_err *);
	/* background commands (exec -d, which sets opts' ret_exec_id): all of them as a JSON
	 * array of the objects one gives ({id, pid, command, state, exit_code, signal,
	 * started_at, finished_at}); NOTFOUND for an unknown exec id */
	int (*jobs_list)(struct sbx_ctx *, const struct sbx_record *, json_t **ret,
			 struct sbx_err *);
	int (*job_get)(struct sbx_ctx *, const struct sbx_record *, const char *id, json_t **ret,
		       struct sbx_err *);
	/* until it ended: *ret_status its exit status (128+N), TIMEOUT after timeout_ms (0: none);
	 * optional: core polls job_get without it */
	int (*job_wait)(struct sbx_ctx *, const struct sbx_record *, const char *id,
			long long timeout_ms, int *ret_status, struct sbx_err *);
	/* its output (stdout and stderr as written) to fd; follow: until it ended */
	int (*job_logs)(struct sbx_ctx *, const struct sbx_record *, const char *id, bool follow,
			int fd, struct sbx_err *);
	/* sig to its process group, or (id NULL) to every process of the sandbox but its init */
	int (*job_kill)(struct sbx_ctx *, const struct sbx_record *, const char *id, int sig,
			struct sbx_err *);
	/* snapshots (SBX_CAP_SNAPSHOT; a fork is a create whose config.from names one): the
	 * sandbox's files copied into dest, a directory the call makes, held still meanwhile;
	 * info gets what a restore or a fork needs (rec->state fresh; called locked) */
	int (*snapshot)(struct sbx_ctx *, const struct sbx_record *, const char *dest, json_t *info,
			struct sbx_err *);
	/* the sandbox's files become the snapshot's (tree, and its record info): its processes
	 * end and it boots on them; a paused one is frozen again, a released or stopped one
	 * stays so (rec->state fresh; called locked) */
	int (*restore)(struct sbx_ctx *, struct sbx_record *, const char *tree, const json_t *info,
		       struct sbx_err *);
	/* removes the directory path of a snapshot it made (info: its record, or NULL for one
	 * killed before it had one), where the caller may not remove every file itself
	 * (optional: else the core removes it) */
	int (*snapshot_rm)(struct sbx_ctx *, const char *path, const json_t *info,
			   struct sbx_err *);
	/* the sandboxes whose files stack on snapshot id (names, or ids, comma-separated;
	 * malloc'd), or NULL when none does: such a snapshot is not removed (optional) */
	char *(*snapshot_users)(struct sbx_ctx *, const char *id);
	/* refresh rec->state (and state_reason) by looking */
	int (*inspect)(struct sbx_ctx *, struct sbx_record *, struct sbx_err *);
	/* every sandbox the provider has: *ret maps provider_id -> enum sbx_state (an integer);
	 * a short timeout, as ls waits on it (optional) */
	int (*list)(struct sbx_ctx *, json_t **ret, struct sbx_err *);
	/* sbx commit: what the sandbox changed in its image (rec->config.image.id set), as a
	 * layer in the store; a running sandbox frozen meanwhile (rec->state fresh); called
	 * locked */
	int (*commit)(struct sbx_ctx *, const struct sbx_record *, struct sbx_layer *ret,
		      struct sbx_err *);
};

extern const struct sbx_provider sbx_provider_local;
extern const struct sbx_provider sbx_provider_e2b;
extern const struct sbx_provider sbx_provider_daytona;
extern const struct sbx_provider sbx_provider_docker;
extern const struct sbx_provider sbx_provider_kubernetes;

const struct sbx_provider *sbx_provider_find(const char *name);
/* NULL-terminated */
const struct sbx_provider *const *sbx_provider_all(void);

#endif
