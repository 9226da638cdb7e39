/* The state store under $SBX_HOME: sandbox records, the name index, ids, locks. */
#ifndef SBX_CORE_STORE_H
#define SBX_CORE_STORE_H

#include <jansson.h>

#include "core/config.h"
#include "core/err.h"

#define SBX_ID_LEN 12
#define SBX_NAME_MAX 63

enum sbx_state {
	SBX_STATE_UNKNOWN,
	SBX_STATE_CREATING, /* "starting": being made (an image pulled, the provider's boot) */
	SBX_STATE_RUNNING,
	SBX_STATE_PAUSED,
	SBX_STATE_RELEASED,
	SBX_STATE_STOPPED,
	SBX_STATE_ERROR,
	SBX_STATE_MISSING,
};

const char *sbx_state_name(enum sbx_state s);
enum sbx_state sbx_state_parse(const char *s);

struct sbx_store {
	char *root; /* $SBX_HOME */
};

struct sbx_record {
	char *id;
	char *name; /* NULL when unnamed */
	char *provider;
	char *provider_id; /* provider's own id, NULL for local */
	enum sbx_state state;
	char *state_reason;	  /* for SBX_STATE_ERROR */
	long long created;	  /* unix seconds */
	struct sbx_config config; /* what it was created with, typed: the record's "options" */
	json_t *extra;		  /* provider-private, stored opaquely */
	json_t *live;		  /* what looking found (inspect): never stored */
	char *dir;		  /* $SBX_HOME/sandboxes/ID (not stored) */
};

struct sbx_record *sbx_record_new(void);
void sbx_record_free(struct sbx_record *rec);
static inline void sbx_record_freep(struct sbx_record **r)
{
	sbx_record_free(*r);
}
#define _cleanup_record_ _cleanup_(sbx_record_freep)
json_t *sbx_record_to_json(const struct sbx_record *rec);
int sbx_record_from_json(const json_t *j, struct sbx_record **ret, struct sbx_err *err);
/* the text of a sandbox.json (PATH names it in errors) -> a record: what sbx_store_load decodes,
 * without the file and without the check that its id is the directory's */
int sbx_record_parse(const char *text, size_t len, const char *path, struct sbx_record **ret,
		     struct sbx_err *err);

/* opens the store (creating it 0700 when create is set); path from $SBX_HOME or ~/.sbx */
int sbx_store_open(struct sbx_store *st, bool create, struct sbx_err *err);
void sbx_store_release(struct sbx_store *st);

bool sbx_id_valid(const char *s);
bool sbx_name_valid(const char *s);
/* 12 lowercase hex characters from getrandom */
int sbx_id_generate(char ret[SBX_ID_LEN + 1], struct sbx_err *err);

/* SB (id, name, or unique id prefix) -> id; NOTFOUND or ambiguity error otherwise */
int sbx_store_resolve(struct sbx_store *st, const char *sb, char **ret_id, struct sbx_err *err);
/* claims a fresh id and (optional) name, creating the sandbox directory */
int sbx_store_claim(struct sbx_store *st, const char *name, char **ret_id, struct sbx_err *err);
/* drops the name link (when it still points at id) */
void sbx_store_unclaim_name(struct sbx_store *st, const char *name, const char *id);

char *sbx_store_dir(const struct sbx_store *st, const char *id);
int sbx_store_load(struct sbx_store *st, const char *id, struct sbx_record **ret,
		   struct sbx_err *err);
/* temp file + fsync + rename; durable=false skips the fsync (for the transient 'creating'
 * record, whose loss after a power cut leaves a directory 'sbx rm -f' removes) */
int sbx_store_save(struct sbx_store *st, const struct sbx_record *rec, bool durable,
		   struct sbx_err *err);
/* removes the sandbox directory and its name; -1 if something could not be removed */
int sbx_store_remove(struct sbx_store *st, const char *id, const char *name, struct sbx_err *err);
/* ids of every sandbox directory, sorted */
int sbx_store_list_ids(struct sbx_store *st, char ***ret_ids, size_t *ret_n, struct sbx_err *err);

/* flock on the sandbox's lock file; returns the fd (close to unlock) or -1.
 * Fails with NOTFOUND when the sandbox went away while waiting. */
int sbx_store_lock(struct sbx_store *st, const char *id, bool exclusive, struct sbx_err *err);

/* write a file atomically (temp + fsync + rename), mode 0600 */
int sbx_write_atomic(const char *path, const char *data, size_t len, bool sync,
		     struct sbx_err *err);

#endif
