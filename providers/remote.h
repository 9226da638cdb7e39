/* What the hosted providers share: keys and base URLs from the environment, JSON calls with
 * bounded retries and one-line errors, and cp as tar files moved through a file API. */
#ifndef SBX_PROVIDERS_REMOTE_H
#define SBX_PROVIDERS_REMOTE_H

#include "core/http.h"
#include "core/json.h"
#include "providers/provider.h"

struct remote {
	const char *label;   /* "E2B", for messages */
	const char *key_var; /* "E2B_API_KEY" */
	char *api;	     /* base URL, no trailing '/' */
	char *auth;	     /* the header line that carries the key (a secret), or NULL */
	/* TLS set-up of each request (sbx_http_req.setup), or NULL */
	void (*setup)(CURL *h, void *arg);
	void *setup_arg;
	const char *tls_hint; /* appended to the message of a TLS failure */
};

/* the first of the variables (NULL-terminated) that is set and not empty, or NULL */
const char *remote_env(const char *const *vars);
/* r->api from the first variable set (else dflt) and r->auth = auth_prefix + the key;
 * a missing key is SBX_E_CONFIG naming key_var */
int remote_init(struct remote *r, const char *label, const char *key_var,
		const char *const *url_vars, const char *dflt, const char *auth_prefix,
		struct sbx_err *err);
void remote_release(struct remote *r);

#define REMOTE_IDEMPOTENT 1u /* 5xx and dropped connections are retried */
#define REMOTE_ALLOW_NUL 2u  /* the answer's strings may hold NUL ("\u0000": a command's output) */

struct remote_call {
	const char *method;
	const char *url;	    /* absolute */
	json_t *body;		    /* borrowed; sent as application/json */
	const char *const *headers; /* more "Name: value" lines */
	unsigned flags;
	const long *accept;	       /* non-2xx statuses returned rather than failed (0-ended) */
	long long timeout_ms;	       /* per attempt (0: 30 s) */
	const char *what;	       /* "create the sandbox", for messages */
	volatile sig_atomic_t *cancel; /* non-zero: give up (an "interrupted" error) */
};

/* one call, retried within bounds (429 honouring Retry-After, any method; 5xx and transport
 * failures for idempotent calls): the final status, *ret_json the parsed body of a 2xx (NULL
 * when empty), *ret_next the X-Next-Token header when asked; -1 with a one-line err */
long remote_do(const struct remote *r, const struct remote_call *c, json_t **ret_json,
	       char **ret_next, struct sbx_err *err);

/* an HTTP status that is not the one wanted, as one line ("E2B rejected the API key ...") */
int remote_status_error(const struct remote *r, const char *what, long status,
			const struct strbuf *body, struct sbx_err *err);
/* the message a provider's error body carries ("" when none), sanitised */
char *remote_error_message(const struct strbuf *body);

/* a random lowercase hex string of n characters (n <= 32) */
void remote_random_hex(char *buf, size_t n);
/* shell quoting for one word */
void remote_sh_quote(struct strbuf *sb, const char *s);

/* copies fd (a pipe) into an unnamed temporary file; its fd, rewound, and its size */
int remote_spool(int fd, int *ret_fd, long long *ret_size, struct sbx_err *err);

/* a provider's means of moving files, for cp */
struct remote_files {
	void *arg;
	/* runs "sh -c SCRIPT sh ARGS..." as the sandbox's most privileged user, cwd "/",
	 * collecting stdout and stderr */
	int (*sh)(void *arg, const char *script, const char *const *args, struct strbuf *out,
		  struct strbuf *errout, int *ret_status, struct sbx_err *err);
	/* in_fd >= 0: uploads size bytes from it to path; else downloads path to out_fd */
	int (*transfer)(void *arg, const char *path, int in_fd, long long size, int out_fd,
			const char *what, struct sbx_err *err);
};

int remote_cp_in(const struct remote_files *f, int tar_fd, const char *dest,
		 const struct sbx_cp_opts *o, struct sbx_err *err);
int remote_cp_out(const struct remote_files *f, const char *src, int tar_fd,
		  const struct sbx_cp_opts *o, struct sbx_err *err);

/* a record's name, or its id */
const char *remote_label(const struct sbx_record *rec);
/* SBX_E_STATE unless the record has the provider's id (what = "E2B") */
int remote_need_id(const char *what, const struct sbx_record *rec, struct sbx_err *err);
/* that, and SBX_E_STATE with the resume hint when the record says paused, released or stopped */
int remote_check_running(const char *what, const struct sbx_record *rec, struct sbx_err *err);
/* what a hosted preview refuses (--public, --host-port: the provider serves its URLs; --rm:
 * nothing to close), and the list of open ones (empty: every port has its URL): -1 with err,
 * 1 when *ret holds the answer, 0 to go on and give the URL of o->port */
int remote_preview_start(const char *provider, const char *what, const struct sbx_record *rec,
			 const struct sbx_preview_opts *o, json_t **ret, struct sbx_err *err);
/* BASE/COLLECTION[/ID escaped]TAIL */
char *remote_url(const struct remote *r, const char *collection, const char *id, const char *tail);

/* while a command runs: SIGINT, SIGTERM and SIGHUP are noted in remote_got_signal (for
 * sbx_http_req.cancel), SIGPIPE is ignored; restore puts the old handlers back */
extern volatile sig_atomic_t remote_got_signal;
struct remote_sigs {
	struct sigaction old[4];
};
void remote_sigs_catch(struct remote_sigs *s);
void remote_sigs_restore(const struct remote_sigs *s);

/* labels "K=V" into a JSON object, plus sbx's own id and name */
json_t *remote_labels(const struct sbx_record *rec);
json_t *remote_env_object(char **env);

#endif
