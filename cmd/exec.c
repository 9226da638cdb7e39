/* sbx exec: run a command inside a sandbox and exit with its status. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <signal.h>

#include "cmd/exec-json.h"

/* --json: the output captured, one result object on stdout, the command's status */
static int exec_json(struct sbx_ctx *ctx, const char *sb, struct sbx_exec_opts *o, long long cap)
{
	struct sbx_exec_result r = { .cpu_ms = -1, .peak_memory = -1 };
	struct exec_capture cap_ = { 0 };
	struct sbx_err err = { 0 };
	int status = 0;

	if (exec_capture_start(&cap_, &r, (size_t)cap, &err) < 0)
		return cmd_report(&err);
	o->result = &r;
	double t0 = exec_now_ms();
	if (sbx_sandbox_exec(ctx, sb, o, &status, &err) < 0) {
		exec_capture_abort(&cap_);
		return cmd_report(&err);
	}
	double t1 = exec_now_ms();
	if (exec_capture_print(&cap_, status, &r, t1 - t0, &err) < 0)
		return cmd_report(&err);
	return status;
}

int cmd_exec(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "interactive", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ "detach", no_argument, NULL, 'd' },
		{ "user", required_argument, NULL, 'u' },
		{ "env", required_argument, NULL, 'e' },
		{ "env-file", required_argument, NULL, OPT_ENV_FILE },
		{ "workdir", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "resume", no_argument, NULL, OPT_RESUME },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_exec_opts o = { 0 };
	struct sbx_err err = { 0 };
	char **env = NULL;
	size_t n_env = 0;
	const char *shell = NULL;
	int c, status = 0, ret;
	bool json = false;
	long long cap = 0;

	opterr = 0;
	long detached_pid = 0;
	while ((c = getopt_long(argc, argv, "+hitdu:e:w:c:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			sbx_strv_free(env);
			return cmd_print_help("exec");
		case 'i':
			o.interactive = true;
			break;
		case 't':
			o.tty = true;
			break;
		case 'd':
			o.detach = true;
			break;
		case 'u':
			if (!*optarg || *optarg == ':') {
				cmd_usage_error("exec", "invalid user '%s': use USER[:GROUP]",
						optarg);
				goto usage;
			}
			o.user = optarg;
			break;
		case 'e':
			if (env_arg(&env, &n_env, optarg, "exec") < 0)
				goto usage;
			break;
		case OPT_ENV_FILE:
			if (env_file(&env, &n_env, optarg, "exec") < 0)
				goto usage;
			break;
		case 'w':
			if (optarg[0] != '/') {
				cmd_usage_error("exec",
						"workdir must be an absolute path, not '%s'",
						optarg);
				goto usage;
			}
			o.workdir = optarg;
			break;
		case 'c':
			shell = optarg;
			break;
		case OPT_RESUME:
			o.resume = true;
			break;
		case OPT_JSON:
			json = true;
			cmd_json_errors = true;
			break;
		case OPT_MAX_OUTPUT:
			cap = sbx_parse_bytes(optarg);
			if (cap <= 0 || cap > EXEC_JSON_MAX_CAP) {
				cmd_usage_error("exec",
						"invalid size '%s' for --max-output (1 to 64M, "
						"e.g. 10k, 4M)",
						optarg);
				goto usage;
			}
			break;
		case OPT_TIMEOUT:
			o.timeout_ms = sbx_parse_duration_ms(optarg);
			if (o.timeout_ms <= 0) {
				cmd_usage_error("exec",
						"invalid duration '%s' (use e.g. 30s, 5m, 1h)",
						optarg);
				goto usage;
			}
			break;
		default:
			cmd_bad_option("exec", argc, argv);
			goto usage;
		}
	}
	if (optind >= argc) {
		cmd_usage_error("exec", "missing sandbox");
		goto usage;
	}
	const char *sb = argv[optind++];
	if (!shell && optind < argc && streq(argv[optind], "-c")) {
		if (optind + 1 >= argc) {
			cmd_usage_error("exec", "option '-c' needs a value");
			goto usage;
		}
		shell = argv[optind + 1];
		optind += 2;
	}
	if (optind < argc && streq(argv[optind], "--"))
		optind++;
	char *sh[] = { "/bin/sh", "-c", (char *)shell, NULL };
	if (shell) {
		if (optind < argc) {
			cmd_usage_error("exec", "give either -c STRING or a command, not both");
			goto usage;
		}
		o.argv = sh;
	} else {
		if (optind >= argc) {
			cmd_usage_error("exec", "missing command");
			goto usage;
		}
		o.argv = argv + optind;
	}
	if (o.detach && (o.tty || o.interactive)) {
		cmd_usage_error("exec", "-d runs in the background: it cannot take -t or -i");
		goto usage;
	}
	if (o.detach && o.timeout_ms) {
		cmd_usage_error("exec", "-d runs in the background: --timeout does not apply");
		goto usage;
	}
	if (cap && !json) {
		cmd_usage_error("exec", "--max-output goes with --json");
		goto usage;
	}
	if (json && (o.tty || o.detach)) {
		cmd_usage_error("exec", "--json captures the output: it cannot take -t or -d");
		goto usage;
	}
	o.env = env;
	char exec_id[SBX_EXEC_ID_MAX] = "";
	o.ret_pid = &detached_pid;
	o.ret_exec_id = exec_id;
	if (json) {
		ret = exec_json(ctx, sb, &o, cap ? cap : EXEC_JSON_DEFAULT_CAP);
		sbx_strv_free(env);
		return ret;
	}
	if (sbx_sandbox_exec(ctx, sb, &o, &status, &err) < 0) {
		ret = cmd_report(&err);
	} else {
		ret = status;
		if (o.detach && *exec_id)
			printf("%s\n", exec_id);
		else if (o.detach)
			printf("%ld\n", detached_pid);
	}
	sbx_strv_free(env);
	return ret;
usage:
	sbx_strv_free(env);
	return 125;
}
