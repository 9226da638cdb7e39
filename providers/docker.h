/* The Docker provider: a Docker Engine (or Podman's compatible service) through its HTTP API.
 * Every file runs in the sbx CLI process but docker-preview.c's forwarder (a process of its
 * own, forked by sbx preview): docker.c (the daemon's address, calls, create, states, ls,
 * pause, rm), docker-proc.c (exec instances, signals to their processes), docker-exec.c (exec
 * through the hijacked stream), docker-jobs.c (exec -d and its logs), docker-cp.c (cp through
 * exec and the archive endpoints), docker-preview.c (previews through sbx's forwarder with
 * its token, providers/fwd.c). Calls go up that list only: docker-proc.c uses docker.c,
 * docker-exec.c both, and so on. */
#ifndef SBX_PROVIDERS_DOCKER_H
#define SBX_PROVIDERS_DOCKER_H

#include "core/http.h"
#include "core/json.h"
#include "providers/provider.h"

/* the API version asked for; an older daemon's own is taken (GET /version) */
#define DOCKER_API_VERSION "1.41"

/* where the daemon is, from DOCKER_HOST (or the one a sandbox was made on) */
struct docker {
	char *host;	       /* "unix:///var/run/docker.sock", "tcp://h:2376": for messages */
	char *root;	       /* "http://docker", "https://h:2376": URLs start so */
	char *sock;	       /* the unix socket, or NULL */
	char *ca, *cert, *key; /* TLS (DOCKER_TLS_VERIFY): DOCKER_CERT_PATH's PEM files */
	bool insecure;	       /* plain tcp:// */
	struct sbx_dial *dial; /* ssh://: the call's shared dial (core/dial.c owns it) */
	char version[16];      /* "1.41" */
	bool podman;	       /* Podman's API service (known once negotiated) */
};

/* DOCKER_HOST (rec NULL), or the daemon rec was made on and its API version */
int docker_init(struct docker *d, const struct sbx_record *rec, struct sbx_err *err);
/* host (NULL: DOCKER_HOST) with API version (NULL: ours) */
int docker_init_host(struct docker *d, const char *host, const char *version, struct sbx_err *err);
/* the record's engine is Podman's API service (its /version said so at create) */
bool docker_is_podman(const struct sbx_record *rec);
void docker_release(struct docker *d);
/* the daemon runs on this host (a unix socket): host paths mean the same to it */
bool docker_is_local(const struct docker *d);
/* a port it publishes on its host's loopback can be reached from here: a daemon on this host
 * (a unix socket, tcp:// to loopback) or through ssh://; not a tcp:// daemon elsewhere */
bool docker_ports_reachable(const struct docker *d);
/* ROOT/vVERSION + path (path starts with '/') */
char *docker_url(const struct docker *d, const char *path);
/* the one place a request to the daemon gets its transport (socket, TLS): every call, the
 * exec stream's connection included, is made from a request set up here */
void docker_req_init(const struct docker *d, struct sbx_http_req *q, const char *url);

struct docker_call {
	const char *method;   /* NULL: GET, or POST with a body */
	const char *path;     /* after the version: "/containers/json" */
	json_t *body;	      /* borrowed; sent as JSON */
	const long *accept;   /* non-2xx statuses returned, not failed (0-ended) */
	long long timeout_ms; /* 0: 30 s */
	const char *what;     /* "create the container", for messages */
};
/* one call: the status (2xx or one of accept), *ret the parsed JSON body when ret (NULL when
 * empty); -1 with one line (an unreachable daemon, its error message) */
long docker_do(const struct docker *d, const struct docker_call *c, json_t **ret,
	       struct sbx_err *err);
/* a failed call's answer as one line: "cannot WHAT: Docker says: MESSAGE" */
int docker_status_error(const char *what, long status, const struct strbuf *body,
			struct sbx_err *err);
/* a transport failure as one line naming DOCKER_HOST (err holds libcurl's words) */
int docker_unreachable(const struct docker *d, struct sbx_err *err);

/* s as a JSON string, or NULL with SBX_E_USAGE naming it (what, e.g. "argument 2 of the
 * command", may be NULL) when it is not valid UTF-8: the Engine API's JSON carries text only,
 * and a daemon reads such bytes as U+FFFD, so they are refused rather than changed */
json_t *docker_text(const char *s, const char *what, struct sbx_err *err);
/* -e's "K=V" (or "K", the caller's value, skipped when unset) as the Env array; opt names the
 * option in messages ("-e") */
json_t *docker_env(char *const *env, const char *opt, struct sbx_err *err);

/* the record's container id, or SBX_E_STATE */
int docker_need_id(const struct sbx_record *rec, struct sbx_err *err);

/* docker-proc.c: exec instances and their processes */
struct docker_exec_spec {
	char *const *argv;
	char *const *env; /* "K=V" or "K" (the caller's value) */
	const char *cwd, *user;
	bool tty, stdin_open, attach;
	bool quiet_args; /* sbx's own command (cp, logs): a bad argument is named by its value */
};
/* POST /containers/ID/exec: the exec's id, or NULL with err (a paused sandbox: the hint) */
char *docker_exec_create(const struct docker *d, const struct sbx_record *rec,
			 const struct docker_exec_spec *s, struct sbx_err *err);
/* GET /exec/ID/json: running, exit code, pid (the daemon host's; Podman says 0 once it ended) */
int docker_exec_state(const struct docker *d, const char *id, bool *running, long long *code,
		      long long *pid, struct sbx_err *err);
/* a multiplexed stream's frames: put(arg, 1 or 2, bytes) for each piece of stdout or stderr */
struct docker_frames {
	unsigned char hdr[8];
	size_t hdr_len, left;
	int stream;
};
void docker_frames_feed(struct docker_frames *f, const char *p, size_t n,
			void (*put)(void *arg, int stream, const char *p, size_t n), void *arg);
/* sig to the processes of exec exec_id (its root found by its pid, its session, descendants
 * and whatever holds its output) and to those whose environment has SBX_EXEC_ID=tok (tok may be
 * NULL); returns once the signals are sent */
int docker_kill_exec(const struct docker *d, const struct sbx_record *rec, const char *exec_id,
		     const char *tok, int sig, struct sbx_err *err);
/* sig to every process of the container but its init */
int docker_kill_all(const struct docker *d, const struct sbx_record *rec, int sig,
		    struct sbx_err *err);

/* docker-exec.c: "/bin/sh -c SCRIPT sh ARGS..." as root in the container, cwd "/", its
 * output collected */
int docker_sh(const struct sbx_record *rec, const char *script, const char *const *args,
	      struct strbuf *out, struct strbuf *errout, int *ret_status, struct sbx_err *err);
int docker_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		int *ret_status, struct sbx_err *err);
/* docker-jobs.c: what exec -d runs for argv, its output logged under token */
char **docker_job_argv(char *const *argv, const char *token);
int docker_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		   struct sbx_err *err);
int docker_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		     struct sbx_err *err);
int docker_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		    struct sbx_err *err);
int docker_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		    int fd, struct sbx_err *err);
/* docker-preview.c */
int docker_preview(struct sbx_ctx *ctx, const struct sbx_record *rec,
		   const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err);
/* docker-cp.c */
int docker_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		 const struct sbx_cp_opts *o, struct sbx_err *err);
int docker_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		  const struct sbx_cp_opts *o, struct sbx_err *err);

#endif
