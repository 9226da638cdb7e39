/* sbx exec on a gVisor sandbox (the CLI): runsc exec in the sandbox's namespaces (gvisor.c),
 * the command's environment and exit status as a local sandbox's. */
#define _GNU_SOURCE
#include "providers/local/gvisor.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
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
	enum sbx_state cut;
	if (local_checkpoint_look(rec, &pids, &cut))
		return sbx_err_set(err, SBX_E_STATE,
				   "sandbox '%s' is stopped (its checkpoint was cut short); run "
				   "'sbx resume %s'",
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
				 .fd = { -1, -1, -1 } };
	/* the command's streams through pipes we relay: gVisor writes a file it is given at an
	 * offset of its own (two execs into one file would overwrite each other) */
	int in_p[2] = { -1, -1 }, out_p[2], err_p[2];
	if ((o->interactive && pipe2(in_p, O_CLOEXEC) < 0) || pipe2(out_p, O_CLOEXEC) < 0 ||
	    pipe2(err_p, O_CLOEXEC) < 0) {
		local_net_exec_unwatch(&watch);
		sbx_strv_free(env.v);
		sbx_strv_free(args);
		return sbx_err_errno(err, "cannot create pipes");
	}
	r.fd[0] = in_p[0];
	r.fd[1] = out_p[1];
	r.fd[2] = err_p[1];
	pid_t pid = local_runsc_spawn(&r, args, err);
	sbx_strv_free(args);
	if (in_p[0] >= 0)
		close(in_p[0]);
	close(out_p[1]);
	close(err_p[1]);
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
	signal(SIGPIPE, SIG_IGN);
	int pidfd = sbx_pidfd_open(pid);
	long long deadline = o->timeout_ms > 0 ? sbx_now_ms() + o->timeout_ms : 0;
	bool sent_term = false, ended = false;
	struct pollfd pf[4];
	int in_w = in_p[1], from[2] = { out_p[0], err_p[0] };
	static char in_buf[65536];
	size_t in_off = 0, in_len = 0;
	if (in_w >= 0)
		local_set_nonblock(in_w);
	for (;;) {
		int n = 0, ix_in = -1, ix_out[2] = { -1, -1 }, ix_pid = -1;
		if (in_w >= 0) {
			/* stdin: read only once what was read is in the pipe */
			pf[n] = in_len ? (struct pollfd){ .fd = in_w, .events = POLLOUT }
				       : (struct pollfd){ .fd = 0, .events = POLLIN };
			ix_in = n++;
		}
		for (int q = 0; q < 2; q++)
			if (from[q] >= 0) {
				pf[n] = (struct pollfd){ .fd = from[q], .events = POLLIN };
				ix_out[q] = n++;
			}
		if (!ended && pidfd >= 0) {
			pf[n] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
			ix_pid = n++;
		}
		if (ended && from[0] < 0 && from[1] < 0)
			break;
		long long now = sbx_now_ms();
		int tmo = ended ? 0 : deadline ? (int)(deadline > now ? deadline - now : 0) : -1;
		int pr = poll(pf, (nfds_t)n, tmo);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr == 0 && ended) {
			/* the command ended: what its pipes held is out; a background process that
			 * kept them is not waited for */
			break;
		}
		if (pr == 0 && deadline && !ended) {
			kill(pid, sent_term ? SIGKILL : SIGTERM);
			sent_term = true;
			deadline = sbx_now_ms() + 2000;
			continue;
		}
		if (ix_in >= 0 && pf[ix_in].revents) {
			ssize_t got = in_len ? write(in_w, in_buf + in_off, in_len)
					     : read(0, in_buf, sizeof(in_buf));
			if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
				(void)0;
			} else if (got <= 0) {
				close(in_w); /* end-of-file, or the command stopped reading */
				in_w = -1;
			} else if (in_len) {
				in_off += (size_t)got;
				in_len -= (size_t)got;
			} else {
				in_off = 0;
				in_len = (size_t)got;
			}
		}
		for (int q = 0; q < 2; q++)
			if (ix_out[q] >= 0 && pf[ix_out[q]].revents) {
				char buf[65536];
				ssize_t got = read(from[q], buf, sizeof(buf));
				if (got <= 0) {
					close(from[q]);
					from[q] = -1;
				} else {
					(void)sbx_write_all(q + 1, buf, (size_t)got);
				}
			}
		if (ix_pid >= 0 && pf[ix_pid].revents)
			ended = true;
		if (pidfd < 0 && waitpid(pid, NULL, WNOHANG) == pid)
			break;
	}
	for (int q = 0; q < 2; q++)
		if (from[q] >= 0)
			close(from[q]);
	if (in_w >= 0)
		close(in_w);
	if (pidfd >= 0)
		close(pidfd);
	int st = local_runsc_wait(pid);
	if (st < 0) {
		local_net_exec_unwatch(&watch);
		sbx_strv_free(env.v);
		return sbx_err_errno(err, "cannot wait for runsc exec");
	}
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
