/* Orchestration of sandbox operations over the store and the providers. */
#define _GNU_SOURCE
#include "core/sandbox.h"

#include <errno.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>
#include <time.h>

#include "core/http.h"
#include "core/image.h"
#include "core/json.h"
#include "core/log.h"
#include "core/net.h"
#include "core/snapshot.h"
#include "core/test-hook.h"
#include "providers/provider.h"

/* "K=V" entries: a later K replaces an earlier one in place */
static void env_merge(char ***env, const char *kv)
{
	size_t klen = strcspn(kv, "="), n = 0;

	for (char **e = *env; e && *e; e++, n++)
		if (strncmp(*e, kv, klen) == 0 && ((*e)[klen] == '=' || !(*e)[klen])) {
			free(*e);
			*e = xstrdup(kv);
			return;
		}
	*env = xrealloc(*env, (n + 2) * sizeof(char *));
	(*env)[n] = xstrdup(kv);
	(*env)[n + 1] = NULL;
}

/* a hosted provider's --image naming an image made here (committed or built): the provider
 * pulls from a registry, which has never seen it */
static int hosted_local_image(struct sbx_ctx *ctx, const struct sbx_provider *p, const char *ref,
			      struct sbx_err *err)
{
	_cleanup_free_ char *origin = sbx_image_local_origin(&ctx->store, ref);

	if (!origin)
		return 0;
	return sbx_err_set(err, SBX_E_UNSUPPORTED,
			   "image '%s' was %s here and is only in sbx's local store; provider "
			   "'%s' cannot reach it: push it to a registry the provider can pull "
			   "from ('sbx image save' writes a tar for docker load or skopeo copy) "
			   "and give --image that reference",
			   ref, origin, p->name);
}

/* --image, an OCI image: pulled when the store lacks it; its config's defaults go under the
 * flags: Env, then -e; WorkingDir unless -w; User (exec -u overrides) */
static int image_config(struct sbx_ctx *ctx, struct sbx_config *c, struct sbx_err *err)
{
	struct sbx_image img = { 0 };
	struct sbx_image_config *im = &c->image;

	if (sbx_image_find(&ctx->store, im->ref, &img, err) < 0) {
		if (err->kind != SBX_E_NOTFOUND)
			return -1;
		*err = (struct sbx_err){ 0 };
		struct sbx_image_pull_opts po = { .progress = isatty(2) == 1 };
		if (sbx_image_pull(&ctx->store, im->ref, &po, &img, err) < 0)
			return -1;
	}
	json_t *cfg = json_object_get(img.config, "config");
	char **env = NULL;
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(cfg, "Env"), i, v)
		if (json_is_string(v))
			env_merge(&env, json_string_value(v));
	for (char **e = c->env; e && *e; e++)
		env_merge(&env, *e);
	sbx_strv_free(c->env);
	c->env = env ? env : xcalloc(1, sizeof(char *));
	const char *wd = sbx_json_str(cfg, "WorkingDir");
	if (!c->workdir && wd && *wd)
		c->workdir = xstrdup(wd);
	const char *user = sbx_json_str(cfg, "User");
	if (user && *user) {
		free(c->user);
		c->user = xstrdup(user);
	}
	im->name = img.name ? xstrdup(img.name) : NULL;
	im->id = xstrdup(img.id);
	im->layers = xcalloc(img.n_layers + 1, sizeof(char *));
	im->chain = xcalloc(img.n_layers + 1, sizeof(char *));
	for (size_t k = 0; k < img.n_layers; k++) {
		im->layers[k] = xstrdup(img.layers[k]);
		im->chain[k] = xstrdup(img.chain[k]);
	}
	im->entrypoint = sbx_json_strv(json_object_get(cfg, "Entrypoint"));
	im->cmd = sbx_json_strv(json_object_get(cfg, "Cmd"));
	sbx_image_release(&img);
	return 0;
}

static const char *label_of(const struct sbx_record *rec)
{
	return rec->name ? rec->name : rec->id;
}

static const struct sbx_provider *provider_of(const struct sbx_record *rec, struct sbx_err *err)
{
	const struct sbx_provider *p = sbx_provider_find(rec->provider);

	if (!p)
		sbx_err_set(err, SBX_E_CONFIG,
			    "sandbox '%s' uses provider '%s', which this sbx was built without",
			    rec->id, rec->provider);
	return p;
}

int sbx_sandbox_create(struct sbx_ctx *ctx, const struct sbx_create_opts *o,
		       struct sbx_record **ret_rec, struct sbx_err *err)
{
	/* --from without --provider: the snapshot's provider */
	_cleanup_free_ char *snap_provider = !o->provider && o->config.from
		? sbx_snapshot_provider(&ctx->store, o->config.from)
		: NULL;
	const char *pname = o->provider ? o->provider : snap_provider ? snap_provider : "local";
	const struct sbx_provider *p = sbx_provider_find(pname);
	_cleanup_free_ char *id = NULL;
	char msg[300];

	if (!p)
		return sbx_err_set(err, SBX_E_USAGE,
				   "unknown provider '%s' ('sbx provider ls' lists the "
				   "providers this sbx was built with)",
				   pname);
	if (o->name && !sbx_name_valid(o->name))
		return sbx_err_set(err, SBX_E_USAGE,
				   "invalid name '%s': use letters, digits, '_', '.' and '-', "
				   "starting with a letter or digit, at most %d characters",
				   o->name, SBX_NAME_MAX);
	if (sbx_config_validate(&o->config, msg, sizeof(msg)) < 0 ||
	    sbx_config_text(&o->config, msg, sizeof(msg)) < 0 ||
	    sbx_secrets_validate(&o->config, msg, sizeof(msg)) < 0)
		return sbx_err_set(err, SBX_E_USAGE, "%s", msg);
	/* what the provider cannot do, or cannot do now, is said before anything exists */
	if (sbx_config_supported(&o->config, p->caps, p->name, err) < 0 ||
	    sbx_config_runtime_ok(&o->config, p->runtimes, p->name, err) < 0 ||
	    (p->check && p->check(&o->config, err) < 0))
		return -1;
	if (o->config.image.ref && !(p->caps & SBX_CAP_IMAGE) && !p->local_images &&
	    hosted_local_image(ctx, p, o->config.image.ref, err) < 0)
		return -1;
	if (p->ready && p->ready(err) < 0)
		return -1;
	long long t0 = sbx_now_ms();
	_cleanup_record_ struct sbx_record *rec = sbx_record_new();
	/* the provider sees the configuration as a later call decodes it from the record */
	_cleanup_json_ json_t *stored = sbx_config_to_json(&o->config);
	if (sbx_config_from_json(stored, &rec->config, err) < 0)
		return -1;
	struct sbx_config *c = &rec->config;
	/* --from: the snapshot is held (not removed) until its files are copied */
	_cleanup_close_ int snap_lk = -1;
	if (c->from && sbx_snapshot_prepare_create(ctx, c, p->name, &snap_lk, err) < 0)
		return -1;
	if (p->caps & SBX_CAP_NET_ALLOW)
		c->net.set = true; /* a provider that keeps a policy records the default one */
	if (sbx_store_claim(&ctx->store, o->name, &id, err) < 0)
		return -1;
	sbx_debug("claimed id %s%s%s", id, o->name ? " for name " : "", o->name ? o->name : "");

	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, true, err);
	rec->id = xstrdup(id);
	rec->name = o->name ? xstrdup(o->name) : NULL;
	rec->provider = xstrdup(p->name);
	rec->state = SBX_STATE_CREATING;
	rec->created = time(NULL);
	rec->dir = sbx_store_dir(&ctx->store, id);
	if (lk < 0 || sbx_store_save(&ctx->store, rec, false, err) < 0)
		goto fail;
	sbx_test_hook("create-record-saved");
	/* the record says "starting" while the image is pulled (which can take a while) and the
	 * provider boots it; a hosted provider's --image names its template or snapshot. The
	 * image's WorkingDir comes before the provider's default */
	sbx_test_hold("create-starting");
	if (c->image.ref && (p->caps & SBX_CAP_IMAGE) && image_config(ctx, c, err) < 0)
		goto fail;
	if (!c->workdir && p->default_workdir)
		c->workdir = xstrdup(p->default_workdir);
	if (p->create(ctx, rec, err) < 0)
		goto fail;
	sbx_test_hook("create-provider-done");
	rec->state = SBX_STATE_RUNNING;
	if (sbx_store_save(&ctx->store, rec, true, err) < 0)
		goto fail;
	sbx_debug("created %s with provider %s in %lld ms", id, p->name, sbx_now_ms() - t0);
	*ret_rec = TAKE_PTR(rec);
	return 0;
fail:
	sbx_debug("create of %s failed (%s); cleaning up", id, err->msg);
	{
		struct sbx_err e2 = { 0 };
		if (p->rm)
			(void)p->rm(ctx, rec, true, &e2);
		(void)sbx_store_remove(&ctx->store, id, o->name, &e2);
	}
	return -1;
}

static int need(const struct sbx_provider *p, unsigned cap, const char *what, struct sbx_err *err)
{
	if (p->caps & cap)
		return 0;
	return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support %s", p->name,
			   what);
}

int sbx_sandbox_provider_name_max(void)
{
	int n = 0;
	for (const struct sbx_provider *const *pp = sbx_provider_all(); *pp; pp++)
		if ((int)strlen((*pp)->name) > n)
			n = (int)strlen((*pp)->name);
	return n;
}

json_t *sbx_sandbox_providers(void)
{
	json_t *a = json_array();

	for (const struct sbx_provider *const *pp = sbx_provider_all(); *pp; pp++) {
		const struct sbx_provider *p = *pp;
		struct sbx_err err = { 0 };
		bool ok = !p->ready || p->ready(&err) == 0;
		_cleanup_free_ char *url = p->api_url ? p->api_url() : NULL;
		json_t *caps = json_array();
		for (size_t i = 0; sbx_cap_names[i]; i++)
			if (p->caps & (1u << i))
				json_array_append_new(caps, json_string(sbx_cap_names[i]));
		json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:o}", "name", p->name, "summary",
				      p->summary, "remote", p->remote, "configured", ok,
				      "capabilities", caps);
		json_object_set_new(o, "key_variable",
				    p->key_var ? json_string(p->key_var) : json_null());
		json_object_set_new(o, "api_url", url ? json_string(url) : json_null());
		json_t *rt = json_array();
		for (size_t i = 0; p->runtimes && p->runtimes[i]; i++)
			json_array_append_new(rt, json_string(p->runtimes[i]));
		json_object_set_new(o, "runtimes", rt);
		if (!ok)
			json_object_set_new(o, "not_ready", json_string(err.msg));
		json_array_append_new(a, o);
	}
	return a;
}

/* the state by looking: ask the provider; a record stuck in 'starting' whose creator is gone
 * (its lock is free) is an error */
static void refresh(struct sbx_ctx *ctx, struct sbx_record *rec)
{
	const struct sbx_provider *p = sbx_provider_find(rec->provider);
	enum sbx_state was = rec->state;
	struct sbx_err err = { 0 };

	if (p && p->inspect && p->inspect(ctx, rec, &err) < 0) {
		if (p->remote) {
			/* unreachable, or refusing: the state last seen, and why it is not fresh */
			json_decref(rec->live);
			rec->live = json_pack("{s:s}", "remote_error", err.msg);
			return;
		}
		rec->state = SBX_STATE_ERROR;
		free(rec->state_reason);
		rec->state_reason = xstrdup(err.msg);
		return;
	}
	/* (a hosted sandbox its provider knows is in the state the provider says: "starting" on
	 * its own way to running, perhaps) */
	if (was == SBX_STATE_CREATING && rec->state != SBX_STATE_RUNNING && !rec->provider_id) {
		_cleanup_free_ char *lp = xasprintf("%s/lock", rec->dir);
		_cleanup_close_ int fd = open(lp, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
			rec->state = SBX_STATE_CREATING;
		} else {
			rec->state = SBX_STATE_ERROR;
			free(rec->state_reason);
			rec->state_reason = xstrdup(
				"creation did not finish; remove it with 'sbx rm'");
		}
	}
}

int sbx_sandbox_get(struct sbx_ctx *ctx, const char *sb, struct sbx_record **ret_rec,
		    struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	struct sbx_record *rec;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	if (sbx_store_load(&ctx->store, id, &rec, err) < 0)
		return -1;
	refresh(ctx, rec);
	*ret_rec = rec;
	return 0;
}

int sbx_sandbox_open(struct sbx_ctx *ctx, const char *sb, struct sbx_record **ret_rec,
		     const struct sbx_provider **ret_provider, struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	if (sbx_store_load(&ctx->store, id, &rec, err) < 0)
		return -1;
	if (!(p = provider_of(rec, err)))
		return -1;
	*ret_rec = TAKE_PTR(rec);
	*ret_provider = p;
	return 0;
}

int sbx_sandbox_exec(struct sbx_ctx *ctx, const char *sb, const struct sbx_exec_opts *o,
		     int *ret_status, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->exec)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support exec",
				   p->name);
	if ((o->tty && need(p, SBX_CAP_EXEC_TTY, "exec -t", err) < 0) ||
	    (o->detach && need(p, SBX_CAP_EXEC_DETACH, "exec -d", err) < 0) ||
	    (o->interactive && need(p, SBX_CAP_EXEC_STDIN, "exec -i", err) < 0) ||
	    (o->user && need(p, SBX_CAP_EXEC_USER, "exec -u", err) < 0))
		return -1;
	if (o->resume) {
		/* --resume: whatever the state, running first (a no-op when it is) */
		if (sbx_sandbox_resume(ctx, rec->id, err) < 0)
			return -1;
		sbx_record_free(TAKE_PTR(rec));
		if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
			return -1;
	}
	sbx_debug("exec in %s (provider %s): %s", rec->id, p->name, o->argv[0]);
	if (o->result && o->result->begin && p->remote)
		o->result->begin(o->result);
	return p->exec(ctx, rec, o, ret_status, err);
}

/* SB, locked, its state confirmed by looking */
static int open_locked(struct sbx_ctx *ctx, const char *sb, int *ret_lock,
		       struct sbx_record **ret_rec, const struct sbx_provider **ret_p,
		       struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_record_ struct sbx_record *rec = NULL;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, true, err);
	if (lk < 0 || sbx_store_load(&ctx->store, id, &rec, err) < 0)
		return -1;
	if (!(*ret_p = provider_of(rec, err)))
		return -1;
	refresh(ctx, rec);
	*ret_lock = TAKE_FD(lk);
	*ret_rec = TAKE_PTR(rec);
	return 0;
}

int sbx_sandbox_open_locked(struct sbx_ctx *ctx, const char *sb, int *ret_lock,
			    struct sbx_record **ret_rec, const struct sbx_provider **ret_provider,
			    struct sbx_err *err)
{
	return open_locked(ctx, sb, ret_lock, ret_rec, ret_provider, err);
}

int sbx_sandbox_pause(struct sbx_ctx *ctx, const char *sb, const struct sbx_pause_opts *o,
		      struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;

	if (open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	if (!p->pause)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support pause",
				   p->name);
	if (o->release && need(p, SBX_CAP_RELEASE, "pause --release", err) < 0)
		return -1;
	if (o->checkpoint && !(p->caps & SBX_CAP_CHECKPOINT))
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"pause --checkpoint needs --runtime gvisor of the local provider "
			"(provider '%s' cannot write a sandbox's memory to disk)",
			p->name);
	const char *l = label_of(rec);
	switch (rec->state) {
	case SBX_STATE_RUNNING:
		break;
	case SBX_STATE_PAUSED:
		if (!o->release && !o->checkpoint)
			return 0; /* already what was asked */
		break;
	case SBX_STATE_RELEASED:
		if (o->release)
			return 0;
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is released (nothing runs to "
				   "pause); run 'sbx resume %s' to start it again",
				   l, l);
	case SBX_STATE_STOPPED:
		if (o->release)
			break; /* tidies what a crash left, keeps the files */
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is stopped (nothing runs to "
				   "pause); run 'sbx resume %s' to start it again",
				   l, l);
	default:
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s%s%s; it cannot be paused",
				   l, sbx_state_name(rec->state), rec->state_reason ? ": " : "",
				   rec->state_reason ? rec->state_reason : "");
	}
	sbx_debug("%s %s (state %s)", o->release ? "releasing" : "pausing", rec->id,
		  sbx_state_name(rec->state));
	if (p->pause(ctx, rec, o, err) < 0)
		return -1;
	sbx_test_hook("pause-provider-done");
	/* paused is seen by looking (the freezer); released must be remembered, and so must
	 * every state a hosted provider reports */
	return o->release || o->checkpoint || p->remote
		? sbx_store_save(&ctx->store, rec, true, err)
		: 0;
}

int sbx_sandbox_resume(struct sbx_ctx *ctx, const char *sb, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;

	if (open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	if (!p->resume)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support resume",
				   p->name);
	const char *l = label_of(rec);
	switch (rec->state) {
	case SBX_STATE_RUNNING:
		return 0;
	case SBX_STATE_PAUSED:
	case SBX_STATE_RELEASED:
	case SBX_STATE_STOPPED:
		break;
	default:
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s%s%s; remove it with "
				   "'sbx rm -f %s'",
				   l, sbx_state_name(rec->state), rec->state_reason ? ": " : "",
				   rec->state_reason ? rec->state_reason : "", l);
	}
	sbx_debug("resuming %s (state %s)", rec->id, sbx_state_name(rec->state));
	enum sbx_state was = rec->state;
	long long t0 = sbx_now_ms();
	if (was != SBX_STATE_PAUSED) {
		/* no longer 'released': a boot that dies half-way leaves a stopped sandbox */
		rec->state = SBX_STATE_STOPPED;
		if (sbx_store_save(&ctx->store, rec, false, err) < 0)
			return -1;
		rec->state = was;
	}
	if (p->resume(ctx, rec, err) < 0)
		return sbx_err_prefix(err, "cannot resume '%s'", l);
	sbx_test_hook("resume-provider-done");
	/* a thaw changes nothing stored; a boot has new pids and must not read 'released' */
	if (was != SBX_STATE_PAUSED || rec->state != SBX_STATE_RUNNING || p->remote) {
		rec->state = SBX_STATE_RUNNING;
		int saved = sbx_test_fail("resume-save")
			? (errno = ENOSPC, sbx_err_errno(err, "cannot save the record"))
			: sbx_store_save(&ctx->store, rec, true, err);
		if (saved < 0) {
			/* the exit status says it failed: so it did, nothing of it is left running */
			struct sbx_pause_opts po = { .release = was != SBX_STATE_PAUSED };
			struct sbx_err e2 = { 0 };
			if (p->pause && p->pause(ctx, rec, &po, &e2) < 0)
				sbx_debug("cannot undo the resume of %s: %s", rec->id, e2.msg);
			return sbx_err_prefix(err, "cannot resume '%s' (it was %s again)", l,
					      po.release ? "stopped" : "paused");
		}
	}
	sbx_debug("resumed %s in %lld ms", rec->id, sbx_now_ms() - t0);
	return 0;
}

int sbx_sandbox_log_path(struct sbx_ctx *ctx, const char *sb, char **ret_path, char **ret_id,
			 struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->log_path)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support logs",
				   p->name);
	*ret_path = p->log_path(rec);
	*ret_id = xstrdup(rec->id);
	return 0;
}

int sbx_sandbox_egress_log_path(struct sbx_ctx *ctx, const char *sb, char **ret_path, char **ret_id,
				struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->egress_log_path)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' keeps no egress log",
				   p->name);
	*ret_path = p->egress_log_path(rec);
	*ret_id = xstrdup(rec->id);
	return 0;
}

int sbx_sandbox_preview(struct sbx_ctx *ctx, const char *sb, const struct sbx_preview_opts *o,
			json_t **ret, struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_record_ struct sbx_record *rec = NULL;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	/* shared: a preview may open beside execs, not while a pause or an rm is under way */
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, false, err);
	if (lk < 0 || sbx_store_load(&ctx->store, id, &rec, err) < 0)
		return -1;
	const struct sbx_provider *p = provider_of(rec, err);
	if (!p)
		return -1;
	if (!p->preview)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' has no previews",
				   p->name);
	if ((o->public && need(p, SBX_CAP_PREVIEW_AUTH, "--public", err) < 0) ||
	    (o->no_auth && need(p, SBX_CAP_PREVIEW_AUTH, "--no-auth", err) < 0) ||
	    (o->host_port && need(p, SBX_CAP_PREVIEW_AUTH, "--host-port", err) < 0))
		return -1;
	refresh(ctx, rec);
	return p->preview(ctx, rec, o, ret, err);
}

int sbx_sandbox_rm(struct sbx_ctx *ctx, const char *sb, bool force, struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, true, err);
	if (lk < 0)
		return -1;
	if (sbx_store_load(&ctx->store, id, &rec, err) < 0) {
		if (err->kind == SBX_E_NOTFOUND && !force) {
			/* a directory without a record: an interrupted create or rm */
			return sbx_err_set(
				err, SBX_E_STATE,
				"sandbox '%s' has no record (an interrupted create or rm); "
				"remove it with 'sbx rm -f %s'",
				id, id);
		}
		if (!force)
			return sbx_err_prefix(
				err, "cannot remove '%s' (use -f to remove it anyway)", sb);
		/* unreadable record: clean what the local provider left, by what is on disk */
		rec = sbx_record_new();
		rec->id = xstrdup(id);
		rec->provider = xstrdup("local");
		rec->dir = sbx_store_dir(&ctx->store, id);
		sbx_err_clear(err);
	}
	if (!(p = provider_of(rec, err)))
		return -1;
	refresh(ctx, rec);
	if ((rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED) && !force)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s; remove it anyway with 'sbx rm -f %s'",
				   label_of(rec), sbx_state_name(rec->state), label_of(rec));
	sbx_debug("removing %s (state %s)", id, sbx_state_name(rec->state));
	if (p->rm && p->rm(ctx, rec, force, err) < 0)
		return -1;
	sbx_test_hook("rm-provider-done");
	return sbx_store_remove(&ctx->store, id, rec->name, err);
}

/* one hosted provider's listing, asked in a thread of its own */
struct listing_job {
	struct sbx_ctx *ctx;
	const struct sbx_provider *p;
	pthread_t thread;
	bool started;
	json_t *states; /* provider_id -> state, or NULL when the listing failed */
	struct sbx_err err;
};

static void *listing_thread(void *arg)
{
	struct listing_job *j = arg;

	if (j->p->list(j->ctx, &j->states, &j->err) < 0)
		j->states = NULL;
	return NULL;
}

/* the states of the records of hosted providers, from one listing per provider, asked
 * concurrently; a provider that cannot be reached leaves its records as last seen */
static void list_remote(struct sbx_ctx *ctx, struct sbx_record **recs, size_t n)
{
	struct listing_job jobs[16];
	size_t nj = 0;

	for (size_t i = 0; i < n; i++) {
		const struct sbx_provider *p = sbx_provider_find(recs[i]->provider);
		bool seen = false;
		if (!p || !p->remote || !p->list)
			continue;
		for (size_t k = 0; k < nj; k++)
			seen = seen || jobs[k].p == p;
		if (!seen && nj < ARRAY_SIZE(jobs))
			jobs[nj++] = (struct listing_job){ .ctx = ctx, .p = p };
	}
	if (!nj)
		return;
	struct sbx_err e = { 0 };
	if (sbx_curl_load(&e) < 0) { /* once, before any thread */
		sbx_warn("%s", e.msg);
		return;
	}
	for (size_t k = 0; k < nj; k++)
		jobs[k].started = pthread_create(&jobs[k].thread, NULL, listing_thread, &jobs[k]) ==
			0;
	for (size_t k = 0; k < nj; k++) {
		if (jobs[k].started)
			(void)pthread_join(jobs[k].thread, NULL);
		else
			listing_thread(&jobs[k]);
		if (!jobs[k].states)
			sbx_warn("cannot list %s sandboxes, showing their states as last seen: %s",
				 jobs[k].p->name, jobs[k].err.msg);
	}
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec = recs[i];
		for (size_t k = 0; k < nj; k++) {
			if (!jobs[k].states || !streq(jobs[k].p->name, rec->provider))
				continue;
			if (!rec->provider_id) {
				refresh(ctx, rec); /* creating, or its creation died */
				continue;
			}
			json_t *st = json_object_get(jobs[k].states, rec->provider_id);
			rec->state = st ? (enum sbx_state)json_integer_value(st)
					: SBX_STATE_MISSING;
		}
	}
	for (size_t k = 0; k < nj; k++)
		json_decref(jobs[k].states);
}

int sbx_sandbox_list(struct sbx_ctx *ctx, struct sbx_listing *ret, struct sbx_err *err)
{
	char **ids;
	size_t n;

	memset(ret, 0, sizeof(*ret));
	if (sbx_store_list_ids(&ctx->store, &ids, &n, err) < 0)
		return -1;
	ret->recs = xcalloc(n + 1, sizeof(*ret->recs));
	ret->bad = xcalloc(n + 1, sizeof(*ret->bad));
	for (size_t i = 0; i < n; i++) {
		struct sbx_record *rec;
		struct sbx_err e = { 0 };
		if (sbx_store_load(&ctx->store, ids[i], &rec, &e) < 0) {
			_cleanup_free_ char *p = xasprintf("%s/sandboxes/%s/sandbox.json",
							   ctx->store.root, ids[i]);
			if (e.kind == SBX_E_NOTFOUND && access(p, F_OK) < 0) {
				/* removed while we listed, or not yet written */
				_cleanup_free_ char *d = sbx_store_dir(&ctx->store, ids[i]);
				if (access(d, F_OK) < 0)
					continue;
			}
			ret->bad[ret->n_bad++] = xstrdup(p);
			continue;
		}
		const struct sbx_provider *p = sbx_provider_find(rec->provider);
		if (!p || !p->remote || !p->list)
			refresh(ctx, rec);
		ret->recs[ret->n++] = rec;
	}
	sbx_strv_free(ids);
	list_remote(ctx, ret->recs, ret->n);
	return 0;
}

void sbx_listing_release(struct sbx_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		sbx_record_free(l->recs[i]);
	for (size_t i = 0; i < l->n_bad; i++)
		free(l->bad[i]);
	free(l->recs);
	free(l->bad);
	memset(l, 0, sizeof(*l));
}

/* --- update ---------------------------------------------------------------------------------- */

int sbx_sandbox_update(struct sbx_ctx *ctx, const char *sb, const struct sbx_update_opts *o,
		       struct sbx_err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;
	char msg[400];

	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, true, err);
	if (lk < 0 || sbx_store_load(&ctx->store, id, &rec, err) < 0 ||
	    !(p = provider_of(rec, err)))
		return -1;
	/* before anything is asked of the provider */
	bool net = o->net || o->net_preset || o->net_allow || o->net_deny || o->net_rate;
	if (net && (!p->update || !(p->caps & SBX_CAP_NET_UPDATE)))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' cannot change the egress policy of a sandbox "
				   "(sbx update --net...)",
				   p->name);
	if (o->secrets && (!p->update || !(p->caps & SBX_CAP_SECRETS)))
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' does not support --secret", p->name);
	bool limits = o->ttl_ms || o->cpu_millis || o->memory;
	if (limits && !p->update)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' cannot change --ttl, --cpus or --memory of a "
				   "sandbox",
				   p->name);
	refresh(ctx, rec);
	const char *l = label_of(rec);
	switch (rec->state) {
	case SBX_STATE_RUNNING:
	case SBX_STATE_PAUSED:
	case SBX_STATE_STOPPED:
	case SBX_STATE_RELEASED:
		break;
	default:
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s%s%s; it cannot be updated",
				   l, sbx_state_name(rec->state), rec->state_reason ? ": " : "",
				   rec->state_reason ? rec->state_reason : "");
	}
	/* the new configuration: a copy of the old through its stored form, then the flags */
	_cleanup_json_ json_t *j = sbx_config_to_json(&rec->config);
	struct sbx_config c;
	if (sbx_config_from_json(j, &c, err) < 0)
		return -1;
	if (o->net && startswith(o->net, "host") && rec->config.net.mode != SBX_NET_HOST) {
		sbx_config_release(&c);
		return sbx_err_set(err, SBX_E_USAGE,
				   "--net host is chosen when a sandbox is created, not by update");
	}
	if (net &&
	    (sbx_net_update(&c.net, o, msg, sizeof(msg)) < 0 ||
	     sbx_config_validate(&c, msg, sizeof(msg)) < 0)) {
		sbx_config_release(&c);
		return sbx_err_set(err, SBX_E_USAGE, "%s", msg);
	}
	if (o->secrets && !c.n_secrets) {
		sbx_config_release(&c);
		return sbx_err_set(
			err, SBX_E_USAGE,
			"sandbox '%s' was created without --secret (its CA is made then): "
			"create it again with --secret",
			l);
	}
	for (char **s = o->secrets; s && *s; s++)
		if (sbx_secret_arg(&c, *s, msg, sizeof(msg)) < 0 ||
		    sbx_secrets_validate(&c, msg, sizeof(msg)) < 0) {
			sbx_config_release(&c);
			return sbx_err_set(err, SBX_E_USAGE, "%s", msg);
		}
	if (o->ttl_ms)
		c.ttl_ms = o->ttl_ms;
	if (o->cpu_millis)
		c.cpu_millis = o->cpu_millis;
	if (o->memory)
		c.memory = o->memory;
	if (sbx_config_supported(&c, p->caps, p->name, err) < 0 ||
	    (p->update && p->update(ctx, rec, &c, err) < 0)) {
		sbx_config_release(&c);
		return -1;
	}
	struct sbx_config old = rec->config;
	rec->config = c;
	if (sbx_store_save(&ctx->store, rec, true, err) < 0) {
		/* not recorded: what runs goes back to the recorded policy */
		struct sbx_err e2 = { 0 };
		if (p->update && p->update(ctx, rec, &old, &e2) < 0)
			sbx_debug("cannot undo the update of %s: %s", rec->id, e2.msg);
		rec->config = old;
		sbx_config_release(&c);
		return sbx_err_prefix(err, "cannot update '%s'", l);
	}
	sbx_config_release(&old);
	return 0;
}

/* --- keepalive, stats ------------------------------------------------------------------------ */

int sbx_sandbox_keepalive(struct sbx_ctx *ctx, const char *sb, long long ttl_ms,
			  struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->keepalive)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' cannot keep a sandbox alive (sbx keepalive)",
				   p->name);
	/* only a running sandbox: said before a --ttl is recorded */
	refresh(ctx, rec);
	if (rec->state != SBX_STATE_RUNNING)
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is %s: only a running sandbox is kept alive (run "
				   "'sbx resume %s' first)",
				   label_of(rec), sbx_state_name(rec->state), label_of(rec));
	if (ttl_ms) {
		struct sbx_update_opts o = { .ttl_ms = ttl_ms };
		if (sbx_sandbox_update(ctx, sb, &o, err) < 0)
			return -1;
	}
	_cleanup_free_ char *id = xstrdup(rec->id);
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, id, false, err);
	sbx_record_free(TAKE_PTR(rec));
	if (lk < 0 || sbx_store_load(&ctx->store, id, &rec, err) < 0)
		return -1;
	refresh(ctx, rec);
	if (p->keepalive(ctx, rec, err) < 0)
		return sbx_err_prefix(err, "cannot keep '%s' alive", label_of(rec));
	return 0;
}

int sbx_sandbox_stats(struct sbx_ctx *ctx, struct sbx_record *rec, json_t **ret,
		      struct sbx_err *err)
{
	const struct sbx_provider *p = provider_of(rec, err);

	if (!p)
		return -1;
	if (!p->stats)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' cannot measure a sandbox (sbx stats)", p->name);
	if (p->stats(ctx, rec, ret, err) < 0)
		return sbx_err_prefix(err, "cannot measure '%s'", label_of(rec));
	return 0;
}

/* --- commit --------------------------------------------------------------------------------- */

int sbx_sandbox_commit(struct sbx_ctx *ctx, const char *sb, const char *name,
		       const struct sbx_commit_opts *o, char **ret_id, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;
	_cleanup_free_ char *nm = NULL;

	/* what is asked is checked before the sandbox is touched */
	json_t *scratch = json_object();
	int bad = sbx_image_name(name, &nm, err) < 0 ||
		sbx_image_changes_apply(scratch, o->changes, err) < 0;
	json_decref(scratch);
	if (bad || open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	const char *l = label_of(rec);
	if (!p->commit)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support commit",
				   p->name);
	if (!rec->config.image.id)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "sandbox '%s' was made without --image: its root is the "
				   "host's and cannot be committed (only an image sandbox's "
				   "changes can)",
				   l);
	switch (rec->state) {
	case SBX_STATE_RUNNING:
	case SBX_STATE_PAUSED:
	case SBX_STATE_RELEASED:
	case SBX_STATE_STOPPED:
		break;
	default:
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; it cannot be committed",
				   l, sbx_state_name(rec->state));
	}
	struct sbx_layer layer;
	if (p->commit(ctx, rec, &layer, err) < 0)
		return sbx_err_prefix(err, "cannot commit sandbox '%s'", l);
	const struct sbx_commit_src src = { .base_id = rec->config.image.id,
					    .base_layers = rec->config.image.layers,
					    .layer = &layer };
	return sbx_image_commit(&ctx->store, name, &src, o, ret_id, err);
}

int sbx_sandbox_layer(struct sbx_ctx *ctx, const char *sb, struct sbx_layer *ret,
		      struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	_cleanup_close_ int lk = -1;
	const struct sbx_provider *p;

	if (open_locked(ctx, sb, &lk, &rec, &p, err) < 0)
		return -1;
	if (!p->commit || !rec->config.image.id)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "sandbox '%s' has no image whose changes make a layer",
				   label_of(rec));
	if (p->commit(ctx, rec, ret, err) < 0)
		return sbx_err_prefix(err, "cannot read the changes of sandbox '%s'",
				      label_of(rec));
	return 0;
}
