/* sbx exec on a gVisor sandbox (the CLI): runsc exec in the sandbox's namespaces (gvisor.c),
 * the command's environment and exit status as a local sandbox's. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "core/proc.h"
#include "core/strbuf.h"
#include "providers/local/net.h"

struct gv_env {
	char **v;
	size_t n;
};

static void gv_env_set(void *arg, const char *kv)
{
	struct gv_env *e = arg;
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], kv, klen) == 0 && e->v[i][klen] == '=') {
			free(e->v[i]);
			e->v[i] = xstrdup(kv);
			return;
		}
	e->v = xrealloc(e->v, (e->n + 2) * sizeof(char *));
	e->v[e->n++] = xstrdup(kv);
	e->v[e->n] = NULL;
}

static volatile sig_atomic_t timed_out;
static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
}

/* -u: numbers only (gVisor's runsc exec takes UID[:GID]) */
static int user_arg(const char *spec, const char *label, char **ret, struct sbx_err *err)
{
	long long uid, gid = -1;
	_cleanup_free_ char *copy = xstrdup(spec);
	char *colon = strchr(copy, ':');

	if (colon)
		*colon++ = 0;
	if (sbx_parse_int(copy, 0, 4294967294LL, &uid) < 0 ||
	    (colon && sbx_parse_int(colon, 0, 4294967294LL, &gid) < 0))
		return sbx_err_set(
			err, SBX_E_UNSUPPORTED,
			"exec -u '%s' in gVisor sandbox '%s': give a uid[:gid] by number", spec,
			label);
	*ret = gid >= 0 ? xasprintf("--user=%lld:%lld", uid, gid) : xasprintf("--user=%lld", uid);
	return 0;
}

int local_gvisor_exec(struct sbx_ctx *ctx, const struct sbx_record *rec,
		      const struct sbx_exec_opts *o, int *ret_status, struct sbx_err *err)
{
	const char *label = rec->name ? rec->name : rec->id;
	struct local_pids pids;

	if (o->tty)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "exec -t is not supported on --runtime gvisor yet");
	if (o->detach)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "exec -d is not supported on --runtime gvisor yet");
	if (o->result)
		return sbx_err_set(err, SBX_E_UNSUPPORTED,
				   "exec --json is not supported on --runtime gvisor yet");
	_cleanup_close_ int lk = sbx_store_lock(&ctx->store, rec->id, false, err);
	if (lk < 0)
		return -1;
	if (local_read_pids(rec->dir, &pids) < 0 ||
	    !sbx_proc_alive(pids.init_pid, pids.init_start) ||
	    !sbx_proc_alive(pids.sup_pid, pids.sup_start))
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is %s; run 'sbx resume %s'",
				   label, rec->state == SBX_STATE_RELEASED ? "released" : "stopped",
				   label);
	if (local_is_frozen(rec->dir, &pids) == 1)
		return sbx_err_set(err, SBX_E_STATE, "sandbox '%s' is paused; run 'sbx resume %s'",
				   label, label);
	local_touch_activity(rec->dir);
	_cleanup_free_ char *user = NULL;
	if (o->user && user_arg(o->user, label, &user, err) < 0)
		return -1;

	struct gv_env env = { NULL, 0 };
	gv_env_set(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	gv_env_set(&env, "HOME=/root");
	_cleanup_free_ char *hn = xasprintf("HOSTNAME=%s", local_hostname(rec));
	gv_env_set(&env, hn);
	if (local_net_exec_env(rec, o->argv, gv_env_set, &env, err) < 0) {
		sbx_strv_free(env.v);
		return -1;
	}
	for (char **e = rec->config.env; e && *e; e++)
		gv_env_set(&env, *e);
	for (char **e = o->env; e && *e; e++)
		gv_env_set(&env, *e);
	struct local_exec_watch watch;
	local_net_exec_watch(rec, &watch);

	const char *workdir = o->workdir ? o->workdir : rec->config.workdir;
	struct strbuf a = STRBUF_INIT;
	size_t nargv = 0;
	while (o->argv[nargv])
		nargv++;
	char **args = xcalloc(env.n + nargv + 12, sizeof(char *));
	size_t k = 0;
	args[k++] = xstrdup("exec");
	args[k++] = xasprintf("--cwd=%s", workdir ? workdir : "/workspace");
	if (user)
		args[k++] = xstrdup(user);
	for (size_t i = 0; i < env.n; i++)
		args[k++] = xasprintf("--env=%s", env.v[i]);
	args[k++] = xstrdup(rec->id);
	/* the shell's exec says 126 (not executable) and 127 (not found) as a local sandbox's
	 * exec does; runsc alone says 128 for both */
	args[k++] = xstrdup("/bin/sh");
	args[k++] = xstrdup("-c");
	args[k++] = xstrdup("exec \"$0\" \"$@\"");
	for (size_t i = 0; i < nargv; i++)
		args[k++] = xstrdup(o->argv[i]);
	args[k] = NULL;
	strbuf_release(&a);

	struct local_idmap m;
	local_idmap_of(rec, &m);
	struct local_runsc r = { .dir = rec->dir,
				 .init = pids.init_pid,
				 .map_range = m.kind != LOCAL_MAP_SELF,
				 .net_none = local_gvisor_netstack(&rec->config),
				 .fd = { o->interactive ? 0 : -1, 1, 2 } };
	struct sigaction sa = { .sa_handler = on_alarm }, old_alrm;
	sigaction(SIGALRM, &sa, &old_alrm);
	pid_t pid = local_runsc_spawn(&r, args, err);
	sbx_strv_free(args);
	if (pid < 0) {
		local_net_exec_unwatch(&watch);
		sbx_strv_free(env.v);
		return -1;
	}
	close(lk);
	lk = -1;
	/* signals for the command: runsc exec passes them on */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if (o->timeout_ms > 0) {
		struct itimerval it = { .it_value = { .tv_sec = o->timeout_ms / 1000,
						      .tv_usec = (o->timeout_ms % 1000) * 1000 } };
		setitimer(ITIMER_REAL, &it, NULL);
	}
	int st;
	bool sent_term = false;
	for (;;) {
		pid_t w = waitpid(pid, &st, 0);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			local_net_exec_unwatch(&watch);
			sbx_strv_free(env.v);
			return sbx_err_errno(err, "cannot wait for runsc exec");
		}
		if (timed_out && !sent_term) {
			/* runsc exec hands SIGKILL-like ends poorly: the command gets SIGTERM, then
			 * runsc itself goes */
			kill(pid, SIGTERM);
			sent_term = true;
			struct itimerval it = { .it_value = { .tv_sec = 2 } };
			timed_out = 0;
			setitimer(ITIMER_REAL, &it, NULL);
		} else if (timed_out) {
			kill(pid, SIGKILL);
		}
	}
	struct itimerval off = { 0 };
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old_alrm, NULL);
	local_net_exec_refusals(rec, &watch, env.v);
	sbx_strv_free(env.v);
	local_touch_activity(rec->dir);
	if (sent_term) {
		*ret_status = 124;
		return 0;
	}
	if (WIFSIGNALED(st))
		*ret_status = 128 + WTERMSIG(st);
	else
		*ret_status = WEXITSTATUS(st);
	return 0;
}
