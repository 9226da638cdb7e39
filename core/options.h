/* The options of each sandbox operation, as cmd/ fills them and core and the providers read
 * them; a sandbox's lasting configuration is struct sbx_config (core/config.h). */
#ifndef SBX_CORE_OPTIONS_H
#define SBX_CORE_OPTIONS_H

#include <stdbool.h>

#include "core/config.h"
#include "core/store.h"

struct sbx_ctx {
	struct sbx_store store;
	bool debug;
};

struct sbx_create_opts {
	const char *name;     /* NULL: unnamed */
	const char *provider; /* NULL: local */
	struct sbx_config config;
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
	bool checkpoint;    /* --checkpoint: the runtime writes the processes and their memory to
			     * disk, then they end (released; resume starts them from there) */
};

/* sbx update: what changes in a sandbox's configuration (NULL / false: unchanged); the
 * strings as the flags took them (cmd/ has checked them) */
struct sbx_update_opts {
	const char *net;	/* --net MODE: the mode and the whole allow list */
	const char *net_preset; /* --net-preset default|none */
	char **net_allow;	/* --net-allow DOMAIN[:PORT]: added, NULL-terminated */
	char **net_deny;	/* --net-deny DOMAIN[:PORT]: removed */
	char **net_rate;	/* --net-rate SPEC: each replaces the limit of its domain */
	long long ttl_ms;	/* --ttl: the new idle timeout (0: unchanged) */
	long long cpu_millis;	/* --cpus, in thousandths (0: unchanged) */
	long long memory;	/* --memory, bytes (0: unchanged) */
	char **secrets;		/* --secret NAME@HOST,...: added, or rotated (NULL-terminated) */
};

/* sbx exec --json: where the command's output goes, and what the provider tells of its end */
struct sbx_exec_result {
	int out_fd, err_fd; /* in: the command's stdout and stderr (sbx's own lines stay on 2) */
	/* out (as the provider knows them; the caller sets the defaults below first) */
	int signal;	       /* the signal that ended the command; 0: none */
	bool timed_out;	       /* --timeout ended it */
	bool oom_killed;       /* the kernel killed it (or one of its processes) out of memory */
	double cpu_ms;	       /* user + system; < 0: unknown */
	long long peak_memory; /* bytes; < 0: unknown */
	/* starts what reads out_fd and err_fd (a process of its own: sbx exec may join a
	 * sandbox's namespaces, which a threaded process cannot); core calls it before a remote
	 * provider's exec. Called again: no effect */
	void (*begin)(struct sbx_exec_result *);
	/* or, for a provider that reads the command's output itself (the local one, in the loop
	 * that waits for it): each piece of stream 1 or 2, in order; out_fd and err_fd unused */
	void (*take)(struct sbx_exec_result *, int stream, const char *buf, size_t n);
	void *begin_arg;
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
	char *ret_exec_id;    /* -d: SBX_EXEC_ID_MAX bytes, set to its exec id (for ps, logs,
			       * wait, kill); left "" by a provider that has none */
	bool resume;	      /* --resume: a paused, released or stopped sandbox resumes first */
	struct sbx_exec_result *result; /* --json: set, not -t or -d; NULL: the caller's 1, 2 */
};

struct sbx_cp_opts {
	bool follow_links; /* -L: SRC, when it is a symbolic link, is followed (where it lives) */
	bool archive;	   /* -a: keep the uid/gid of the source files */
	/* cp_in only: NULL for a tar stream ('-'), unpacked into dest, an existing directory;
	 * for a path copy, the name every entry starts with ("." for a directory's contents),
	 * and the provider names the result as docker cp does (sbx_archive_extract) */
	const char *top;
};

#define SBX_EXEC_ID_MAX 65

/* exec statuses beyond the command's own */
#define SBX_EXIT_TIMEOUT 124
#define SBX_EXIT_FAILURE 125
#define SBX_EXIT_NOEXEC 126
#define SBX_EXIT_NOTFOUND 127

#endif
