/* The E2B provider's background commands: exec -d's processes through envd (process.Process
 * List, Connect, SendSignal). The exec id is the process's pid. envd knows a process only while
 * it runs: a finished one is not listed, its exit status is known only to a wait attached
 * before it ended, and its past output is not kept (logs can only follow it from now on). */
#define _GNU_SOURCE
#include "providers/e2b.h"

#include <errno.h>
#include <signal.h>

#include "core/json.h"

/* the pid an exec id names, or 0 */
static long id_pid(const char *id)
{
	char *end;
	long pid;

	if (!*id || *id < '1' || *id > '9')
		return 0;
	errno = 0;
	pid = strtol(id, &end, 10);
	return *end || errno || pid <= 0 ? 0 : pid;
}

static int not_found(const struct sbx_record *rec, const char *id, struct sbx_err *err)
{
	_cleanup_free_ char *safe = sbx_term_safe(id);
	return sbx_err_set(err, SBX_E_NOTFOUND,
			   "no exec '%s' in sandbox '%s' (E2B forgets a process once it ended)",
			   safe, remote_label(rec));
}

static json_t *view(json_t *p)
{
	json_t *cfg = json_object_get(p, "config");
	json_t *argv = json_array();
	json_int_t pid = json_integer_value(json_object_get(p, "pid"));
	char id[24];

	json_array_append_new(argv, json_string(sbx_json_str(cfg, "cmd") ?: ""));
	size_t i;
	json_t *a;
	json_array_foreach (json_object_get(cfg, "args"), i, a)
		json_array_append(argv, a);
	snprintf(id, sizeof(id), "%lld", (long long)pid);
	/* envd lists running processes only, without their start */
	return json_pack("{s:s, s:I, s:o, s:s, s:n, s:n, s:n, s:n}", "id", id, "pid", pid,
			 "command", argv, "state", "running", "exit_code", "signal", "started_at",
			 "finished_at");
}

int e2b_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		  struct sbx_err *err)
{
	_cleanup_json_ json_t *msg = json_object(), *res = NULL;

	(void)ctx;
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	if (e2b_envd_call(rec, "/process.Process/List", msg, "list the processes", &res, err) < 0)
		return -1;
	*ret = json_array();
	size_t i;
	json_t *p;
	json_array_foreach (json_object_get(res, "processes"), i, p) {
		/* every process envd runs: exec -d's, and attached execs running meanwhile */
		json_array_append_new(*ret, view(p));
	}
	return 0;
}

int e2b_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		struct sbx_err *err)
{
	_cleanup_json_ json_t *all = NULL;
	long pid = id_pid(id);

	if (!pid)
		return not_found(rec, id, err);
	if (e2b_jobs_list(ctx, rec, &all, err) < 0)
		return -1;
	size_t i;
	json_t *j;
	json_array_foreach (all, i, j) {
		if (json_integer_value(json_object_get(j, "pid")) == pid) {
			*ret = json_incref(j);
			return 0;
		}
	}
	return not_found(rec, id, err);
}

int e2b_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		 int fd, struct sbx_err *err)
{
	long pid = id_pid(id);
	int st;

	(void)ctx;
	if (!follow)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'e2b' keeps no output of a detached command: "
				   "'sbx logs -f' follows it from now on");
	if (!pid)
		return not_found(rec, id, err);
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return e2b_envd_connect(rec, pid, fd, 0, &st, err);
}

int e2b_job_wait(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id,
		 long long timeout_ms, int *ret_status, struct sbx_err *err)
{
	long pid = id_pid(id);

	(void)ctx;
	if (!pid)
		return not_found(rec, id, err);
	if (remote_check_running("E2B", rec, err) < 0)
		return -1;
	return e2b_envd_connect(rec, pid, -1, timeout_ms, ret_status, err);
}

/* envd's signals: SIGKILL and SIGTERM only, to the process (not its group) */
static int signal_one(const struct sbx_record *rec, long pid, int sig, struct sbx_err *err)
{
	_cleanup_json_ json_t *m = json_pack("{s:{s:I}, s:s}", "process", "pid", (json_int_t)pid,
					     "signal",
					     sig == SIGKILL ? "SIGNAL_SIGKILL" : "SIGNAL_SIGTERM");
	return e2b_envd_call(rec, "/process.Process/SendSignal", m, "signal the process", NULL,
			     err);
}

int e2b_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		 struct sbx_err *err)
{
	if (sig != SIGKILL && sig != SIGTERM)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "provider 'e2b' sends only SIGKILL and SIGTERM");
	if (id) {
		long pid = id_pid(id);
		if (!pid)
			return not_found(rec, id, err);
		if (remote_check_running("E2B", rec, err) < 0)
			return -1;
		if (signal_one(rec, pid, sig, err) < 0)
			return err->http_status == 404 ? not_found(rec, id, err) : -1;
		return 0;
	}
	/* every process envd runs (what it did not start is out of its reach) */
	_cleanup_json_ json_t *msg = json_object(), *res = NULL;
	if (remote_check_running("E2B", rec, err) < 0 ||
	    e2b_envd_call(rec, "/process.Process/List", msg, "list the processes", &res, err) < 0)
		return -1;
	(void)ctx;
	size_t i;
	json_t *p;
	json_array_foreach (json_object_get(res, "processes"), i, p) {
		struct sbx_err e = { 0 };
		long pid = (long)json_integer_value(json_object_get(p, "pid"));
		if (pid > 0 && signal_one(rec, pid, sig, &e) < 0 && e.http_status != 404) {
			*err = e;
			return -1;
		}
	}
	return 0;
}
