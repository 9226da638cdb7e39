/* The Docker provider: a Docker Engine (or Podman's compatible service) through its HTTP API.
 * Every file runs in the sbx CLI process: docker.c (the daemon's address, calls, create,
 * states, pause, preview, rm), docker-exec.c (exec through the hijacked stream), docker-cp.c
 * (cp through exec and the archive endpoints). Calls go down that list's reverse only:
 * docker-cp.c uses docker-exec.c and docker.c, docker-exec.c uses docker.c. */
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
};

/* DOCKER_HOST (rec NULL), or the daemon rec was made on and its API version */
int docker_init(struct docker *d, const struct sbx_record *rec, struct sbx_err *err);
void docker_release(struct docker *d);
/* the daemon runs on this host (a unix socket): host paths mean the same to it */
bool docker_is_local(const struct docker *d);
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

/* the record's container id, or SBX_E_STATE */
int docker_need_id(const struct sbx_record *rec, struct sbx_err *err);

/* docker-exec.c: "/bin/sh -c SCRIPT sh ARGS..." as root in the container, cwd "/", its
 * output collected */
int docker_sh(const struct sbx_record *rec, const char *script, const char *const *args,
	      struct strbuf *out, struct strbuf *errout, int *ret_status, struct sbx_err *err);
int docker_exec(struct sbx_ctx *ctx, const struct sbx_record *rec, const struct sbx_exec_opts *o,
		int *ret_status, struct sbx_err *err);
/* the processes of an exec (those with SBX_EXEC_ID=tok; tok NULL: every one but init) get
 * signal sig, through a second exec (the API has no exec kill) */
int docker_kill_token(const struct docker *d, const struct sbx_record *rec, const char *tok,
		      int sig, struct sbx_err *err);
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
/* docker-cp.c */
int docker_cp_in(struct sbx_ctx *ctx, const struct sbx_record *rec, int tar_fd, const char *dest,
		 const struct sbx_cp_opts *o, struct sbx_err *err);
int docker_cp_out(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *src, int tar_fd,
		  const struct sbx_cp_opts *o, struct sbx_err *err);

#endif
