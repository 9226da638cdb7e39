/* The provider vtable: one backend per struct, NULL slot = unsupported. */
#ifndef SBX_PROVIDERS_PROVIDER_H
#define SBX_PROVIDERS_PROVIDER_H

#include <jansson.h>
#include <stdbool.h>

#include "core/err.h"
#include "core/store.h"

struct sbx_ctx {
	struct sbx_store store;
	bool debug;
};

struct sbx_volume {
	char *host;
	char *dest;
	bool ro;
};

struct sbx_create_opts {
	const char *name;
	const char *provider;
	char **env;	     /* "K=V", NULL-terminated */
	const char *workdir; /* default /workspace */
	struct sbx_volume *volumes;
	size_t n_volumes;
	char **labels;		/* "K=V", NULL-terminated */
	long long memory;	/* --memory, bytes (0: none) */
	long long cpu_millis;	/* --cpus, thousandths of a CPU (0: none) */
	long long pids_limit;	/* --pids-limit (0: none) */
	long long disk;		/* --disk, bytes: what the sandbox may write at most (0: no cap) */
	long long ttl_ms;	/* --ttl: idle time before ttl_action (0: none) */
	const char *ttl_action; /* "pause" (default) or "rm" */
	const char *net;	/* --net: none, open, host or allow=LIST (NULL: allow= + preset) */
	bool net_preset_none;	/* --net-preset none: the allow list only */
	bool net_allow_private; /* --net-allow-private: the proxy may dial private addresses */
	char **add_hosts;	/* --add-host NAME:ADDR, NULL-terminated */
	char **host_ports;	/* --host-port PORT[:INSIDE], NULL-terminated */
	const char *image;	/* --image REF (NULL: the host's system view) */
};

/* sbx preview: open (port > 0, rm false), close (rm) or list (port 0) */
struct sbx_preview_opts {
	int port;      /* inside the sandbox */
	int host_port; /* 0: an ephemeral port */
	bool public;   /* bind every interface, require a token */
	bool no_auth;  /* --no-auth: a loopback preview without a token */
	bool rm;
};

struct sbx_pause_opts {
	bool release;	    /* end every process, keep the files and the record */
	long long grace_ms; /* release: SIGTERM, then SIGKILL after this long */
};

struct sbx_exec_opts {
	char **argv;	      /* NULL-terminated */
	char **env;	      /* "K=V" added for this exec, NULL-terminated */
	const char *workdir;  /* NULL: the sandbox's default */
	bool interactive;     /* -i: keep stdin */
	bool tty;	      /* -t: a pty from the sandbox's devpts */
	bool detach;	      /* -d: run in the background, output to the sandbox's log */
	const char *user;     /* -u USER[:GROUP], by name or number; NULL: root */
	long long timeout_ms; /* 0: none */
	long *ret_pid;	      /* -d: set to the command's pid inside the sandbox */
	bool resume;	      /* --resume: a paused, released or stopped sandbox resumes first */
};

struct sbx_cp_opts {
	bool follow_links; /* -L: SRC, when it is a symbolic link, is followed (where it lives) */
	bool archive;	   /* -a: keep the uid/gid of the source files */
	/* cp_in only: NULL for a tar stream ('-'), unpacked into dest, an existing directory;
	 * for a path copy, the name every entry starts with ("." for a directory's contents),
	 * and the provider names the result as docker cp does (sbx_archive_extract) */
	const char *top;
};

/* exec statuses beyond the command's own */
#define SBX_EXIT_TIMEOUT 124
#define SBX_EXIT_FAILURE 125
#define SBX_EXIT_NOEXEC 126
#define SBX_EXIT_NOTFOUND 127

struct sbx_provider {
	const char *name, *summary;
	bool remote;	     /* hosted: states are remembered in the record, not seen locally */
	const char *key_var; /* the variable holding the API key (NULL: none needed) */
	bool (*configured)(void); /* whether it can be used as things stand (NULL: always) */
	char *(*api_url)(void);	  /* where its API is reached (NULL: nowhere) */
	int (*create)(struct sbx_ctx *, const struct sbx_create_opts *, struct sbx_record *,
		      struct sbx_err *);
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
	/* refresh rec->state (and state_reason) by looking */
	int (*inspect)(struct sbx_ctx *, struct sbx_record *, struct sbx_err *);
	/* every sandbox the provider has: *ret maps provider_id -> enum sbx_state (an integer);
	 * a short timeout, as ls waits on it (optional) */
	int (*list)(struct sbx_ctx *, json_t **ret, struct sbx_err *);
};

extern const struct sbx_provider sbx_provider_local;
extern const struct sbx_provider sbx_provider_e2b;
extern const struct sbx_provider sbx_provider_daytona;

const struct sbx_provider *sbx_provider_find(const char *name);
/* NULL-terminated */
const struct sbx_provider *const *sbx_provider_all(void);

#endif
