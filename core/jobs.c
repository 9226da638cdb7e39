/* Background commands and waiting: the provider's job ops, with wait's polling in core. */
#define _GNU_SOURCE
#include "core/jobs.h"

#include <time.h>

#include "core/json.h"
#include "core/sandbox.h"
#include "providers/provider.h"

int sbx_sandbox_jobs(struct sbx_ctx *ctx, const char *sb, json_t **ret, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p = NULL;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->jobs_list)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support ps",
				   p->name);
	return p->jobs_list(ctx, rec, ret, err);
}

int sbx_sandbox_job_logs(struct sbx_ctx *ctx, const char *sb, const char *id, bool follow,
			 struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p = NULL;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->job_logs)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider '%s' does not support logs of one exec", p->name);
	return p->job_logs(ctx, rec, id, follow, 1, err);
}

static void nap(const struct sbx_provider *p)
{
	/* a hosted provider is asked over the network: less often */
	struct timespec ts = { 0, (p && p->remote ? 500 : 100) * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static int timed_out(long long deadline, const char *what, struct sbx_err *err)
{
	if (deadline && sbx_now_ms() >= deadline)
		return sbx_err_set(err, SBX_E_TIMEOUT, "timed out waiting for %s", what);
	return 0;
}

int sbx_sandbox_job_wait(struct sbx_ctx *ctx, const char *sb, const char *id, long long timeout_ms,
			 int *ret_status, struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p = NULL;
	long long deadline = timeout_ms > 0 ? sbx_now_ms() + timeout_ms : 0;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->job_get)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support wait",
				   p->name);
	if (p->job_wait)
		return p->job_wait(ctx, rec, id, timeout_ms, ret_status, err);
	_cleanup_free_ char *safe = sbx_term_safe(id);
	_cleanup_free_ char *what = xasprintf("exec '%s'", safe);
	for (;;) {
		_cleanup_json_ json_t *j = NULL;
		if (p->job_get(ctx, rec, id, &j, err) < 0)
			return -1;
		const char *state = sbx_json_str(j, "state");
		if (state && !streq(state, "running")) {
			json_t *code = json_object_get(j, "exit_code");
			if (!json_is_integer(code))
				return sbx_err_set(err, SBX_E_STATE,
						   "the exit status of exec '%s' is unknown (its "
						   "sandbox stopped under it)",
						   safe);
			*ret_status = (int)json_integer_value(code);
			return 0;
		}
		if (timed_out(deadline, what, err) < 0)
			return -1;
		nap(p);
	}
}

int sbx_sandbox_wait_state(struct sbx_ctx *ctx, const char *sb, const char *state,
			   long long timeout_ms, struct sbx_err *err)
{
	long long deadline = timeout_ms > 0 ? sbx_now_ms() + timeout_ms : 0;
	_cleanup_free_ char *id = NULL;
	const struct sbx_provider *p = NULL;

	/* by its id from here on: a new sandbox of the same name is another one */
	if (sbx_store_resolve(&ctx->store, sb, &id, err) < 0)
		return -1;
	_cleanup_free_ char *what = state ? xasprintf("sandbox '%s' to be %s", sb, state)
					  : xasprintf("sandbox '%s' to stop", sb);
	for (;;) {
		struct sbx_record *rec = NULL;
		struct sbx_err e = { 0 };
		if (sbx_sandbox_get(ctx, id, &rec, &e) < 0) {
			if (e.kind == SBX_E_NOTFOUND && (!state || streq(state, "removed")))
				return 0;
			*err = e;
			return -1;
		}
		if (!p)
			p = sbx_provider_find(rec->provider);
		const char *now = sbx_state_name(rec->state);
		bool done = state
			? streq(now, state)
			: (rec->state == SBX_STATE_STOPPED || rec->state == SBX_STATE_RELEASED);
		sbx_record_free(rec);
		if (done)
			return 0;
		if (timed_out(deadline, what, err) < 0)
			return -1;
		nap(p);
	}
}

int sbx_sandbox_job_kill(struct sbx_ctx *ctx, const char *sb, const char *id, int sig,
			 struct sbx_err *err)
{
	_cleanup_record_ struct sbx_record *rec = NULL;
	const struct sbx_provider *p = NULL;

	if (sbx_sandbox_open(ctx, sb, &rec, &p, err) < 0)
		return -1;
	if (!p->job_kill)
		return sbx_err_set(err, SBX_E_UNSUPPORTED, "provider '%s' does not support kill",
				   p->name);
	return p->job_kill(ctx, rec, id, sig, err);
}
