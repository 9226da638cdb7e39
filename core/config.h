/* A sandbox's configuration: what create was asked for, typed and versioned. It is decoded from
 * the record once (sbx_config_from_json), handed to the provider as it is, and written back in
 * one place (sbx_config_to_json). A create option is a field here, a row of its JSON mapping
 * and of its capability check (core/config.c), and a row of create's option table (cmd/). */
#ifndef SBX_CORE_CONFIG_H
#define SBX_CORE_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

/* the layout written; a record of a later one is refused, not misread */
#define SBX_CONFIG_VERSION 1

/* what a provider can honour (struct sbx_provider.caps); sbx_cap_names names them */
enum sbx_cap {
	SBX_CAP_EXEC_STDIN = 1u << 0,	/* exec -i */
	SBX_CAP_EXEC_TTY = 1u << 1,	/* exec -t */
	SBX_CAP_EXEC_USER = 1u << 2,	/* exec -u */
	SBX_CAP_EXEC_DETACH = 1u << 3,	/* exec -d, and logs */
	SBX_CAP_PAUSE_MEMORY = 1u << 4, /* pause keeps the processes and their memory */
	SBX_CAP_RELEASE = 1u << 5,	/* pause --release */
	SBX_CAP_PREVIEW = 1u << 6,	/* preview PORT */
	SBX_CAP_PREVIEW_AUTH = 1u << 7, /* preview --public (a token), --no-auth, --host-port */
	SBX_CAP_LIMIT_CPU = 1u << 8,	/* --cpus */
	SBX_CAP_LIMIT_MEMORY = 1u << 9, /* --memory */
	SBX_CAP_LIMIT_PIDS = 1u << 10,	/* --pids-limit */
	SBX_CAP_DISK = 1u << 11,	/* --disk */
	SBX_CAP_VOLUMES = 1u << 12,	/* --volume */
	SBX_CAP_NET_NONE = 1u << 13,	/* --net none */
	SBX_CAP_NET_OPEN = 1u << 14,	/* --net open */
	SBX_CAP_NET_ALLOW = 1u << 15,	/* --net allow=, --net-preset, --net-allow-private */
	SBX_CAP_NET_HOST = 1u << 16,	/* --net host */
	SBX_CAP_ADD_HOST = 1u << 17,	/* --add-host */
	SBX_CAP_HOST_PORT = 1u << 18,	/* --host-port */
	SBX_CAP_IMAGE = 1u << 19,	/* --image: an OCI image pulled to this host */
	SBX_CAP_TEMPLATE = 1u << 20,	/* --image: a template or snapshot of the provider's */
	SBX_CAP_TTL = 1u << 21,		/* --ttl, --ttl-action */
	SBX_CAP_HOSTNAME = 1u << 22,	/* --hostname */
	SBX_CAP_CP = 1u << 23,		/* cp */
	SBX_CAP_EGRESS_LOG = 1u << 24,	/* logs --egress */
	SBX_CAP_SNAPSHOT = 1u << 25,	/* snapshot, restore, fork, create --from (files) */
	SBX_CAP_NESTED = 1u << 26,	/* --nested: namespaces and mounts of its own inside */
	SBX_CAP_NET_RATE = 1u << 27,	/* --net-rate */
	SBX_CAP_NET_UPDATE = 1u << 28,	/* update --net, --net-allow, --net-deny, --net-rate */
	SBX_CAP_FS = 1u << 29,		/* fs: the file verbs */
	SBX_CAP_SECRETS = 1u << 30,	/* --secret: credentials the egress proxy injects */
	SBX_CAP_CHECKPOINT = 1u << 31,	/* pause --checkpoint (with a runtime that has it) */
};
/* "exec-stdin", ... in bit order, NULL-terminated */
extern const char *const sbx_cap_names[];

struct sbx_volume {
	char *host; /* a resolved absolute path */
	char *dest;
	bool ro;
};

enum sbx_net_mode {
	SBX_NET_ALLOW, /* through the proxy, to the allow list (and the preset) */
	SBX_NET_NONE,
	SBX_NET_OPEN, /* through the proxy, anywhere, logged */
	SBX_NET_HOST,
};

struct sbx_net_rule {
	char *pattern; /* "example.com", "*.example.com" (lowercase) */
	int port;      /* 0: any */
};

struct sbx_host_alias {
	char *name; /* lowercase */
	char *addr;
};

struct sbx_port_forward {
	int host, inside;
};

/* --net-rate: a token bucket of requests, and one of bytes, for the whole sandbox or for the
 * domains a pattern matches (together) */
struct sbx_net_rate {
	char *pattern;	       /* as in --net allow= (no port); NULL: the whole sandbox */
	long long reqs, per_s; /* reqs requests per per_s seconds (0: no request limit) */
	long long bytes;       /* bytes per second, each way (0: no byte limit) */
};

struct sbx_net_config {
	bool set; /* recorded: --net given, or the provider keeps a policy by default */
	enum sbx_net_mode mode;
	struct sbx_net_rule *allow;
	size_t n_allow;
	bool preset;	    /* with allow: the preset of package registries and code hosts too */
	bool allow_private; /* the proxy may dial private addresses */
	struct sbx_host_alias *add_hosts;
	size_t n_add_hosts;
	struct sbx_port_forward *host_ports;
	size_t n_host_ports;
	struct sbx_net_rate *rates;
	size_t n_rates;
};

/* --secret NAME@HOST,...: inside, $NAME is the placeholder; the egress proxy puts the value in
 * its place in requests to the hosts. The value is never recorded (not in sbx_config_to_json):
 * the provider keeps it where the caller alone can read it */
struct sbx_secret {
	char *name;	   /* the environment variable */
	char **hosts;	   /* patterns as in --net allow= (no port), NULL-terminated */
	char *placeholder; /* "sbx-secret-" and 32 random letters and digits */
	char *value;	   /* at create and update only: read from the caller (never recorded) */
};
#define SBX_SECRET_PREFIX "sbx-secret-"
#define SBX_SECRET_VALUE_MAX 8192

struct sbx_image_config {
	char *ref; /* as given to --image; NULL: none */
	/* an OCI image (the local provider): what the store resolved the ref to */
	char *name, *id;
	char **layers, **chain; /* NULL-terminated, bottom first */
	char **entrypoint, **cmd;
};

struct sbx_config {
	int version;
	char **env;	/* "K=V", NULL-terminated: an image's Env, then -e */
	char *workdir;	/* NULL: the provider's default */
	char *user;	/* exec's default user (an image's User); NULL: root */
	char *hostname; /* NULL: the provider's default */
	char **labels;	/* "K=V", NULL-terminated */
	struct sbx_volume *volumes;
	size_t n_volumes;
	long long memory;     /* bytes (0: no limit) */
	long long cpu_millis; /* thousandths of a CPU (0: no limit) */
	long long pids_limit; /* 0: no limit */
	long long disk;	      /* bytes written at most (0: no cap) */
	long long ttl_ms;     /* idle time before the ttl action (0: none) */
	bool ttl_rm;	      /* the ttl action: rm (else pause) */
	bool nested;	      /* its processes may make namespaces and mounts of their own */
	bool ttl_hard;	      /* the ttl runs while an exec does too (else an exec holds it) */
	struct sbx_net_config net;
	struct sbx_image_config image;
	char *from; /* --from: the id of the snapshot whose files it started with */
	/* --runtime: what runs the sandbox, one of the provider's runtimes (NULL: its default) */
	char *runtime;
	/* --port: ports inside, published at create where a provider must fix them then (Docker);
	 * elsewhere any port can be previewed and these are only recorded */
	int *ports;
	size_t n_ports;
	struct sbx_secret *secrets;
	size_t n_secrets;
};

void sbx_config_init(struct sbx_config *c);
void sbx_config_release(struct sbx_config *c);
/* the stored form, the record's "options" */
json_t *sbx_config_to_json(const struct sbx_config *c);
/* the labels as an object, {K: V} */
json_t *sbx_config_labels_json(const struct sbx_config *c);
/* what to_json wrote (a member of the wrong type reads as unset); fails on a later version */
int sbx_config_from_json(const json_t *j, struct sbx_config *ret, struct sbx_err *err);
/* SBX_E_UNSUPPORTED naming the first option c asks for that caps lack */
int sbx_config_supported(const struct sbx_config *c, unsigned caps, const char *provider,
			 struct sbx_err *err);
/* --net-rate's limits as the record holds them: [{"domain", "requests", "per_s",
 * "bytes_per_s"}]; read back into n (invalid members skipped) */
json_t *sbx_net_rates_json(const struct sbx_net_config *n);
void sbx_net_rates_from_json(const json_t *a, struct sbx_net_config *n);
/* --secret's argument NAME@HOST,... or NAME=@FILE@HOST,...: the value read (the caller's
 * environment variable NAME, or FILE), a placeholder made; appended to c (a later one of the
 * same name replaces it); -1 with a usage message in msg */
int sbx_secret_arg(struct sbx_config *c, const char *arg, char *msg, size_t len);
/* the secrets as the record holds them: [{"name", "hosts", "placeholder"}] (no value) */
json_t *sbx_secrets_json(const struct sbx_config *c);
void sbx_secrets_free(struct sbx_secret *s, size_t n);
void sbx_secret_clear(struct sbx_secret *s);
/* s's value as --secret read it in this process (NULL: not read here) */
const char *sbx_secret_value(const struct sbx_secret *s);
/* every secret's hosts are reached through the egress proxy: --net open, or allow= with a rule
 * for each host; -1 with a usage message in msg */
int sbx_secrets_validate(const struct sbx_config *c, char *msg, size_t len);
/* --port's argument: a port 1..65535, added once; -1 with a usage message in msg */
int sbx_port_arg(struct sbx_config *c, const char *arg, char *msg, size_t len);
/* whether --port published port (or no --port was given: nothing is published then) */
bool sbx_config_has_port(const struct sbx_config *c, int port);
/* SBX_E_UNSUPPORTED unless runtimes (NULL-terminated; an entry "*": any name) lists
 * c->runtime, naming those there are */
int sbx_config_runtime_ok(const struct sbx_config *c, const char *const *runtimes,
			  const char *provider, struct sbx_err *err);
/* what goes together (--net and its companions); a usage message in msg */
int sbx_config_validate(const struct sbx_config *c, char *msg, size_t len);
/* every string of it (-e, --label, -v, -w, ...) is text (valid UTF-8), as the record, JSON,
 * needs; else -1 and the one-line refusal naming it in msg */
int sbx_config_text(const struct sbx_config *c, char *msg, size_t len);

#endif
