/* The Docker provider's background commands (exec -d): a detached exec instance whose shell
 * writes the command's output to /tmp/.sbx-jobs/TOKEN.log in the container and whose
 * processes carry SBX_EXEC_ID=TOKEN. The exec id is Docker's; the daemon's inspect of it
 * gives its state, status and (in its arguments) the token. */
#define _GNU_SOURCE
#include "providers/docker.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "core/log.h"
#include "providers/remote.h"

#define JOB_DIR "/tmp/.sbx-jobs"
/* what runs: sh -c JOB_SCRIPT TOKEN ARGV... */
#define JOB_SCRIPT "mkdir -p " JOB_DIR " && exec \"$@\" </dev/null >>" JOB_DIR "/$0.log 2>&1"

char **docker_job_argv(char *const *argv, const char *token)
{
	size_t n = 0;
	while (argv[n])
		n++;
	char **a = xcalloc(n + 5, sizeof(*a));
	a[0] = xstrdup("/bin/sh");
	a[1] = xstrdup("-c");
	a[2] = xstrdup(JOB_SCRIPT);
	a[3] = xstrdup(token);
	for (size_t i = 0; i < n; i++)
		a[4 + i] = xstrdup(argv[i]);
	return a;
}

static bool id_ok(const char *id)
{
	return id && strlen(id) == 64 && strspn(id, "0123456789abcdef") == 64;
}

static int not_found(const struct sbx_record *rec, const char *id, struct sbx_err *err)
{
	_cleanup_free_ char *safe = sbx_term_safe(id);
	return sbx_err_set(err, SBX_E_NOTFOUND, "no exec '%s' in sandbox '%s'", safe,
			   remote_label(rec));
}

/* the exec's inspect as sbx's job object, and its token; NOTFOUND for what exec -d did not
 * start */
static int job_view(const struct docker *d, const struct sbx_record *rec, const char *id,
		    json_t **ret, char **ret_token, struct sbx_err *err)
{
	_cleanup_json_ json_t *resp = NULL;
	static const long accept[] = { 404, 0 };

	if (!id_ok(id))
		return not_found(rec, id, err);
	_cleanup_free_ char *path = xasprintf("/exec/%s/json", id);
	struct docker_call c = { .path = path, .accept = accept, .what = "look up the exec" };
	long st = docker_do(d, &c, &resp, err);
	if (st < 0)
		return -1;
	json_t *pc = json_object_get(resp, "ProcessConfig");
	json_t *args = json_object_get(pc, "arguments");
	const char *script = json_string_value(json_array_get(args, 1));
	const char *tok = json_string_value(json_array_get(args, 2));
	if (st == 404 || !script || !streq(script, JOB_SCRIPT) || !tok ||
	    !streq(sbx_json_str(resp, "ContainerID") ?: "", rec->provider_id))
		return not_found(rec, id, err);
	bool running = json_is_true(json_object_get(resp, "Running"));
	long long code = sbx_json_int(resp, "ExitCode", -1);
	json_t *cmd = json_array();
	for (size_t i = 3; i < json_array_size(args); i++)
		json_array_append(cmd, json_array_get(args, i));
	/* Docker's pid is the daemon host's: the command's own is not known here */
	json_t *o = json_pack("{s:s, s:n, s:o, s:s, s:n, s:n, s:n, s:n}", "id", id, "pid",
			      "command", cmd, "state", running ? "running" : "exited", "exit_code",
			      "signal", "started_at", "finished_at");
	if (!running && code >= 0) {
		json_object_set_new(o, "exit_code", json_integer(code));
		if (code > 128 && code < 160)
			json_object_set_new(o, "signal", json_integer(code - 128));
	}
	*ret = o;
	if (ret_token)
		*ret_token = xstrdup(tok);
	return 0;
}

int docker_job_get(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, json_t **ret,
		   struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };

	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	return job_view(&d, rec, id, ret, NULL, err);
}

int docker_jobs_list(struct sbx_ctx *ctx, const struct sbx_record *rec, json_t **ret,
		     struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *resp = NULL;

	if (docker_need_id(rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	_cleanup_free_ char *path = xasprintf("/containers/%s/json", rec->provider_id);
	struct docker_call c = { .path = path, .what = "look up the container" };
	if (docker_do(&d, &c, &resp, err) < 0)
		return -1;
	json_t *all = json_array(), *v;
	size_t i;
	/* the daemon keeps an exec's record a while after it ended (and forgets it on restart) */
	json_array_foreach (json_object_get(resp, "ExecIDs"), i, v) {
		json_t *j = NULL;
		struct sbx_err e = { 0 };
		if (job_view(&d, rec, json_string_value(v), &j, NULL, &e) == 0)
			json_array_append_new(all, j);
	}
	*ret = all;
	return 0;
}

int docker_job_kill(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, int sig,
		    struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *tok = NULL;

	if (remote_check_running("Docker", rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	if (!id)
		return docker_kill_all(&d, rec, sig, err);
	if (job_view(&d, rec, id, &j, &tok, err) < 0)
		return -1;
	if (!streq(sbx_json_str(j, "state") ?: "", "running"))
		return 0;
	return docker_kill_exec(&d, rec, id, tok, sig, err);
}

int docker_job_logs(struct sbx_ctx *ctx, const struct sbx_record *rec, const char *id, bool follow,
		    int fd, struct sbx_err *err)
{
	_cleanup_(docker_release) struct docker d = { 0 };
	_cleanup_free_ char *tok = NULL;
	long long off = 0;

	if (remote_check_running("Docker", rec, err) < 0 || docker_init(&d, rec, err) < 0)
		return -1;
	for (;;) {
		_cleanup_json_ json_t *j = NULL;
		free(TAKE_PTR(tok));
		if (job_view(&d, rec, id, &j, &tok, err) < 0)
			return -1;
		bool running = streq(sbx_json_str(j, "state") ?: "", "running");
		/* what the log has past off, as it is now (the state was read first: nothing
		 * written before the end is missed) */
		struct strbuf out = STRBUF_INIT, eout = STRBUF_INIT;
		_cleanup_free_ char *from = xasprintf("%lld", off + 1);
		_cleanup_free_ char *file = xasprintf(JOB_DIR "/%s.log", tok);
		const char *args[] = { file, from, NULL };
		int st = 0;
		int r = docker_sh(rec, "[ ! -e \"$1\" ] || tail -c +\"$2\" \"$1\"", args, &out,
				  &eout, &st, err);
		if (r == 0 && out.len && sbx_write_all(fd, out.buf, out.len) < 0)
			r = sbx_err_errno(err, "cannot write the exec's output");
		off += (long long)out.len;
		strbuf_release(&out);
		strbuf_release(&eout);
		if (r < 0)
			return -1;
		if (!follow || !running)
			return 0;
		usleep(200000);
	}
}
