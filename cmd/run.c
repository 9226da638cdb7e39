/* sbx run: create, exec and rm in one call (the ephemeral pattern). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core/log.h"

static volatile sig_atomic_t run_child;

static void run_forward(int sig)
{
	if (run_child > 0)
		kill(run_child, sig);
}

int cmd_run(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option own[] = {
		{ "interactive", no_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_free_ struct option *opts = create_longopts(own);
	_cleanup_free_ char *shortopts = create_shortopts("hi");
	struct create_args a = { 0 };
	struct sbx_exec_opts x = { 0 };
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL;
	int c, status = 0, ret;

	sbx_config_init(&a.o.config);
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		if (c == 'h') {
			create_args_release(&a);
			return create_help_or_hostname(argc, argv, "run");
		}
		if (c == 'i') {
			x.interactive = true;
			continue;
		}
		if (c == OPT_TIMEOUT) {
			x.timeout_ms = sbx_parse_duration_ms(optarg);
			if (x.timeout_ms <= 0) {
				create_args_release(&a);
				return cmd_usage_error(
					"run", "invalid duration '%s' (use e.g. 30s, 5m)", optarg);
			}
			continue;
		}
		int r = c == '?' ? 0 : create_parse_opt(&a, c, optarg, "run");
		if (r == 1)
			continue;
		create_args_release(&a);
		return r < 0 ? 125 : cmd_bad_option("run", argc, argv);
	}
	if (optind < argc && streq(argv[optind], "--"))
		optind++;
	if (optind >= argc && !a.o.config.image.ref) {
		create_args_release(&a);
		return cmd_usage_error("run", "missing command");
	}
	x.argv = argv + optind;
	if (create_args_finish(&a, "run") < 0) {
		create_args_release(&a);
		return 125;
	}
	if (sbx_sandbox_create(ctx, &a.o, &rec, &err) < 0) {
		create_args_release(&a);
		return cmd_report(&err);
	}
	/* no command: the image's Entrypoint and Cmd, as docker run does */
	_cleanup_(strv_freep) char **image_argv = NULL;
	if (optind >= argc) {
		size_t n = 0;
		char **parts[] = { rec->config.image.entrypoint, rec->config.image.cmd };
		for (size_t k = 0; k < 2; k++)
			for (char **v = parts[k]; v && *v; v++)
				strv_push(&image_argv, &n, xstrdup(*v));
		if (!n) {
			struct sbx_err e2 = { 0 };
			(void)sbx_sandbox_rm(ctx, rec->id, true, &e2);
			ret = cmd_usage_error(
				"run", "missing command: image '%s' has no Entrypoint or Cmd",
				a.o.config.image.ref);
			sbx_record_free(rec);
			create_args_release(&a);
			return ret;
		}
		x.argv = image_argv;
	}
	/* exec joins the sandbox's namespaces, so it runs in a child; this process stays on the
	 * host to remove the sandbox afterwards */
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* if this process is killed (SIGKILL), the exec dies too, and with it the command
		 * (the supervisor ends what sbx exec leaves) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(125);
		int r = sbx_sandbox_exec(ctx, rec->id, &x, &status, &err);
		if (r < 0)
			_exit(cmd_report(&err));
		fflush(NULL);
		_exit(status);
	}
	/* signals go to the exec child (which passes them to the command); this process must
	 * live on to remove the sandbox */
	run_child = pid;
	struct sigaction sa = { .sa_handler = run_forward };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	int st = 0;
	if (pid < 0) {
		ret = 125;
		cmd_error(SBX_E_SYSTEM, "cannot start the command");
	} else {
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		ret = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	struct sbx_err e2 = { 0 };
	if (sbx_sandbox_rm(ctx, rec->id, true, &e2) < 0) {
		cmd_report(&e2);
		if (ret == 0)
			ret = 125;
	}
	sbx_record_free(rec);
	create_args_release(&a);
	return ret;
}
