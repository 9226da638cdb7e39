/* main(): global options, the command table, exit statuses, the stdout check. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <strings.h>

#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0.1.0"
#endif
#ifndef SBX_COMMIT
#define SBX_COMMIT "unknown"
#endif

const struct sbx_command sbx_commands[] = {
	{ "create", cmd_create, "Create a sandbox and print its id", "sbx create [OPTIONS]",
	  "      --json             print the record as JSON instead of the id\n", create_help },
	{ "exec", cmd_exec, "Run a command in a sandbox",
	  "sbx exec [OPTIONS] SB [--] CMD [ARG...]\n       sbx exec [OPTIONS] SB -c 'SHELL STRING'",
	  "  -i, --interactive      keep stdin open to the command (default: /dev/null)\n"
	  "  -t, --tty              give the command a terminal (a pty of the sandbox's own)\n"
	  "  -u, --user USER[:GROUP]\n"
	  "                         run as USER (name from the sandbox's /etc/passwd, or number)\n"
	  "  -d, --detach           run in the background, print its exec id (for sbx ps, logs,\n"
	  "                         wait, kill); output goes to 'sbx logs SB [EXECID]'\n"
	  "  -e, --env K=V|K        set a variable (K alone: the caller's value)\n"
	  "      --env-file FILE    read K=V lines from FILE\n"
	  "  -w, --workdir DIR      working directory inside\n"
	  "      --timeout DUR      kill the command's process group after DUR (exit 124)\n"
	  "      --resume           resume the sandbox first if it is paused, released or stopped\n"
	  "      --json             capture the output; print one JSON object of the result\n"
	  "                         (exit code, signal, timeout, OOM, time, output) on stdout\n"
	  "      --max-output SIZE  with --json: keep at most SIZE of each stream (default 1M;\n"
	  "                         the rest is counted)\n"
	  "  -c STRING              run STRING with /bin/sh -c\n" },
	{ "cp", cmd_cp, "Copy files between the host and a sandbox",
	  "sbx cp [-a] [-L] SRC|- SB:PATH\n       sbx cp [-a] [-L] SB:PATH DEST|-",
	  "  -a, --archive          keep the uid/gid of the source files\n"
	  "  -L, --follow-link      copy what SRC points at when it is a symbolic link\n"
	  "                         (resolved where it lives: inside the sandbox for SB:PATH)\n" },
	{ "fs", cmd_fs, "Read, write, list and change files in a sandbox",
	  "sbx fs read SB PATH\n"
	  "       sbx fs write [--mode OCTAL] [-p] SB PATH\n"
	  "       sbx fs ls [--json] [-R] SB PATH\n"
	  "       sbx fs stat [--json] SB PATH\n"
	  "       sbx fs rm [-r] [-f] SB PATH...\n"
	  "       sbx fs mkdir [-p] SB PATH...\n"
	  "       sbx fs mv SB SRC DST",
	  "      --mode OCTAL       write: the file's mode (default 0644 for a new file; an\n"
	  "                         existing file keeps its own)\n"
	  "  -p, --parents          mkdir: make missing parents, no error if it exists;\n"
	  "                         write: accepted (the parents are always made)\n"
	  "      --json             ls: a JSON array of entries; stat: one entry object\n"
	  "  -R, -r, --recursive    ls: every entry below PATH; rm: directories and all\n"
	  "                         they hold\n"
	  "  -f, --force            rm: a missing PATH is no error\n" },
	{ "logs", cmd_logs, "Print the output of detached commands, or the egress log",
	  "sbx logs [OPTIONS] SB [EXECID]\n       sbx logs --egress [--json] [OPTIONS] SB",
	  "  -f, --follow           keep printing new output until the sandbox stops (with\n"
	  "                         EXECID: until that command ended)\n"
	  "      --egress           the sandbox's egress log: one line per connection\n"
	  "      --json             with --egress: JSON lines\n" },
	{ "ps", cmd_ps, "List the detached commands of a sandbox", "sbx ps [--json] [-a] SB",
	  "      --json             print a JSON array: id, pid, command, state, exit_code,\n"
	  "                         signal, started_at, finished_at\n"
	  "  -a, --all              no effect: running and finished commands are listed\n" },
	{ "wait", cmd_wait, "Wait for a detached command to end, or a sandbox to stop",
	  "sbx wait [--timeout DUR] SB [EXECID]\n       sbx wait --state STATE [--timeout DUR] SB",
	  "      --state STATE      wait until 'sbx inspect' shows STATE (running, paused,\n"
	  "                         released, stopped, ..., or removed)\n"
	  "      --timeout DUR      give up after DUR (exit 125, error code timeout)\n"
	  "      --json             errors as JSON on stderr\n" },
	{ "kill", cmd_kill, "Signal a detached command, or every process of a sandbox",
	  "sbx kill [-s SIGNAL] SB [EXECID]",
	  "  -s, --signal SIGNAL    the signal, by name (TERM, SIGTERM) or number (default KILL)\n"
	  "      --json             errors as JSON on stderr\n" },
	{ "preview", cmd_preview, "Reach a port inside a sandbox from the host by URL",
	  "sbx preview [OPTIONS] SB PORT\n       sbx preview [--json] SB\n"
	  "       sbx preview --rm SB PORT",
	  "      --host-port N      listen on host port N (default: an ephemeral port)\n"
	  "      --public           listen on every interface (requests need the URL's token)\n"
	  "      --no-auth          no token: any local user may use the loopback URL\n"
	  "      --rm               close the preview of PORT\n"
	  "      --json             print {url, port, host_port, public, auth, token} (with SB\n"
	  "                         only: a list of them)\n" },
	{ "ls", cmd_ls, "List sandboxes", "sbx ls [OPTIONS]",
	  "      --json             print a JSON array of records\n"
	  "      --filter KEY=VALUE only the sandboxes that match: id=ID (or a prefix),\n"
	  "                         name=NAME, label=K=V or label=K, state=STATE,\n"
	  "                         provider=P (repeatable: the same key ORs, keys AND)\n"
	  "  -q, --quiet            print ids only\n" },
	{ "inspect", cmd_inspect, "Show the records of sandboxes as JSON",
	  "sbx inspect [--json] SB...",
	  "      --json             errors as JSON too (the output is JSON already)\n" },
	{ "pause", cmd_pause, "Freeze sandboxes, or release their processes",
	  "sbx pause [--release [--grace DUR] | --checkpoint] SB...",
	  "      --release          end every process (SIGTERM, then SIGKILL); keep the files\n"
	  "      --grace DUR        with --release: how long SIGTERM has (default 10s)\n"
	  "      --checkpoint       write the processes and their memory to disk, then\n"
	  "                         release (--runtime gvisor); resume restores them\n" },
	{ "resume", cmd_resume, "Resume paused sandboxes; start released or stopped ones again",
	  "sbx resume SB...", "" },
	{ "update", cmd_update, "Change the egress policy, limits or idle timeout of sandboxes",
	  "sbx update [OPTIONS] SB...",
	  "      --net MODE         none, allow=DOMAIN[:PORT],... (the whole allow list) or\n"
	  "                         open; a running sandbox keeps a proxy, or none\n"
	  "      --net-preset default|none  with allow=: the preset of registries too, or not\n"
	  "      --net-allow DOMAIN[:PORT]  add to the allow list (repeatable)\n"
	  "      --net-deny DOMAIN[:PORT]   take out of the allow list (repeatable)\n"
	  "      --secret NAME@HOST,...  rotate or add a secret (the value read as create's\n"
	  "                         --secret reads it; a rotated one keeps its placeholder)\n"
	  "      --net-rate [DOMAIN=]LIMIT,...  request and byte limits, as sbx create's;\n"
	  "                         [DOMAIN=]none removes one (repeatable)\n"
	  "      --ttl DUR          a new idle timeout, counted from now\n"
	  "      --cpus N           a new CPU quota, in CPUs (and the CPUs it may run on)\n"
	  "      --memory SIZE      a new memory limit (refused below what the sandbox uses)\n" },
	{ "keepalive", cmd_keepalive, "Start the idle timeout of sandboxes again from now",
	  "sbx keepalive [--ttl DUR] SB...",
	  "      --ttl DUR          a new idle timeout first (as sbx update --ttl)\n" },
	{ "stats", cmd_stats, "Show what running sandboxes use: CPU, memory, processes, network",
	  "sbx stats [--json] [SB...]",
	  "      --json             print a JSON array of {id, name, cpu_ms, cpu_percent,\n"
	  "                         memory_bytes, memory_limit_bytes, pids, disk_bytes,\n"
	  "                         net_rx_bytes, net_tx_bytes}\n"
	  "      --no-stream        one sample (the default; accepted as docker's)\n" },
	{ "rm", cmd_rm, "Remove sandboxes", "sbx rm [OPTIONS] SB...",
	  "  -f, --force            remove running sandboxes too, and records that cannot be read\n"
	  "      --ignore-missing   a sandbox that does not exist is no error (exit 0)\n" },
	{ "run", cmd_run, "Create a sandbox, run a command in it, remove it",
	  "sbx run [CREATE OPTIONS] [--timeout DUR] [-i] -- CMD [ARG...]\n"
	  "       sbx run --image REF [CREATE OPTIONS] [-- CMD [ARG...]]",
	  "  -i, --interactive      keep stdin open to the command\n"
	  "      --timeout DUR      kill the command after DUR (exit 124)\n"
	  "  and the options of 'sbx create' but --json (with --image and no CMD, the\n"
	  "  image's Entrypoint and Cmd run):\n",
	  create_help },
	{ "commit", cmd_commit, "Make a new image of an image sandbox's changes",
	  "sbx commit [-c CHANGE]... [-m MSG] SB IMAGE[:TAG]",
	  "  -c, --change CHANGE    apply a Dockerfile instruction to the config: CMD,\n"
	  "                         ENTRYPOINT (JSON array or shell form), ENV K=V,\n"
	  "                         WORKDIR DIR, USER U, LABEL K=V, EXPOSE PORT[/PROTO]\n"
	  "  -m, --message MSG      the comment of the new history entry\n" },
	{ "image", cmd_image, "Build, pull, import, save, tag, list and remove OCI images",
	  "sbx image build -t NAME[:TAG] [-f DOCKERFILE] [--build-arg K=V]... [--target STAGE] "
	  "[--no-cache] [--net MODE] [-q] CONTEXT\n"
	  "       sbx image pull [--platform OS/ARCH] [--insecure] [-q] REF\n"
	  "       sbx image import [--name NAME[:TAG]] FILE|-\n"
	  "       sbx image import --rootfs DIR|TAR NAME[:TAG]\n"
	  "       sbx image save [-o FILE] IMAGE...\n"
	  "       sbx image tag SOURCE NAME[:TAG]\n"
	  "       sbx image ls [--json] [-q]\n"
	  "       sbx image rm [-f] REF...\n"
	  "       sbx image prune",
	  "      --platform OS/ARCH[/VARIANT]\n"
	  "                         pull: the image of a multi-platform index (default\n"
	  "                         linux/amd64)\n"
	  "      --insecure         pull: plain HTTP to a registry not on loopback\n"
	  "  -q, --quiet            pull: no progress; ls: image ids only; build: only the\n"
	  "                         image id (and a failing RUN's output)\n"
	  "      --rootfs           import: a one-layer image from a directory or a tar\n"
	  "      --name NAME[:TAG]  import: the name of the archive's image that has none\n"
	  "                         (or only a tag)\n"
	  "  -o, --output FILE      save: write the tar to FILE (default: stdout, never a\n"
	  "                         terminal)\n"
	  "      --json             ls: a JSON array\n"
	  "  -f, --force            rm: even while a sandbox uses the image\n"
	  "  -t, --tag              build: the image's NAME[:TAG] (required)\n"
	  "  -f, --file             build: the DOCKERFILE to run (default CONTEXT/Dockerfile;\n"
	  "                         - reads it from standard input)\n"
	  "      --build-arg K=V    build: an ARG's value (K alone: from the environment)\n"
	  "      --target STAGE     build: end with that stage\n"
	  "      --no-cache         build: run every step again\n"
	  "      --net MODE         build: RUN's network, as create --net\n"
	  "" },
	{ "secret", cmd_secret, "List the secrets of a sandbox (names and hosts, never values)",
	  "sbx secret ls [--json] SB", "      --json             a JSON array: name, hosts\n" },
	{ "snapshot", cmd_snapshot, "Save, list, remove and restore snapshots of sandboxes' files",
	  "sbx snapshot create SB [--name NAME] [--memory] [--json]\n"
	  "       sbx snapshot ls [SB] [--json] [-q]\n"
	  "       sbx snapshot rm SNAP...\n"
	  "       sbx snapshot restore SB SNAP",
	  "      --name NAME        create: a unique name for the snapshot\n"
	  "      --memory           create: the processes and their memory too (--runtime\n"
	  "                         gvisor --net none): its forks start with them running\n"
	  "      --json             create: print its record; ls: a JSON array of records\n"
	  "  -q, --quiet            ls: snapshot ids only\n"
	  "  A snapshot holds the files the sandbox wrote (its own tree, or the layer it\n"
	  "  wrote over its image), not what bind volumes (-v) hold, nor (without\n"
	  "  --memory) its memory.\n" },
	{ "fork", cmd_fork, "Create sandboxes from a sandbox's files or a snapshot",
	  "sbx fork SRC [-n COUNT] [CREATE OPTIONS]",
	  "  -n, --count COUNT      make COUNT sandboxes (with --name NAME: NAME-1, NAME-2...)\n"
	  "  SRC is a sandbox (its files now; not what bind volumes hold) or a snapshot;\n"
	  "  and the options of 'sbx create' but --json and --from:\n",
	  create_help },
	{ "provider", cmd_provider, "List the providers and whether each is configured",
	  "sbx provider ls [--json]",
	  "      --json             print a JSON array of {name, summary, remote, configured,\n"
	  "                         key_variable, api_url, capabilities, not_ready}\n" },
	{ "mcp", cmd_mcp, "Serve the Model Context Protocol on stdio", "sbx mcp [--sandbox SB]",
	  "      --sandbox SB       serve one sandbox only: its tools take no sandbox, and\n"
	  "                         no other sandbox can be reached\n" },
	{ "version", cmd_version, "Show which sbx this is", "sbx version", "" },
	{ "help", cmd_help, "Show help for a command", "sbx help [COMMAND]", "" },
	{ "__complete", cmd_complete, NULL,
	  "sbx __complete commands|sandboxes|snapshots|providers|images|value-options|options CMD "
	  "[SUB]",
	  "" },
	{ NULL, NULL, NULL, NULL, NULL },
};

const struct sbx_command *cmd_find(const char *name)
{
	for (const struct sbx_command *c = sbx_commands; c->name; c++)
		if (streq(c->name, name))
			return c;
	return NULL;
}

static void main_usage(FILE *f)
{
	fputs("Usage: sbx [--debug] COMMAND [ARGS...]\n\n"
	      "Disposable sandboxes for agents, scripts and developers.\n\n"
	      "Commands:\n",
	      f);
	for (const struct sbx_command *c = sbx_commands; c->name; c++)
		if (c->summary)
			fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fputs("\nGlobal options:\n"
	      "      --debug            print debug messages (also SBX_DEBUG=1)\n"
	      "  -h, --help             show this help\n"
	      "  -V, --version          show the version\n\n"
	      "Run 'sbx COMMAND --help' for a command's options.\n",
	      f);
}

int cmd_exit_code(const struct sbx_err *err)
{
	switch (err->kind) {
	case SBX_E_CMD_NOEXEC:
		return 126;
	case SBX_E_CMD_NOTFOUND:
		return 127;
	default:
		return 125;
	}
}

bool cmd_json_errors;

/* SBX_JSON=1 (any value but "", "0", "false", "no") */
static bool env_json(void)
{
	const char *v = getenv("SBX_JSON");

	return v && *v && !streq(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no");
}

bool cmd_json_mode(void)
{
	return cmd_json_errors || env_json();
}

/* {"error": {"code": "...", "message": "..."}} on one line; the message terminal-safe as the
 * text one (valid UTF-8 too, which a JSON string must be) */
static void error_json(const char *code, const char *safe)
{
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", safe);
	char *s = j ? json_dumps(j, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER) : NULL;

	if (s)
		fprintf(stderr, "%s\n", s);
	else
		fprintf(stderr, "{\"error\": {\"code\": \"%s\", \"message\": \"\"}}\n", code);
	free(s);
	json_decref(j);
}

/* every "sbx: error:" line: a message carries names and answers a sandbox or a provider chose
 * (tar entries, HTTP error bodies), which must not reach the terminal as control sequences */
static void error_line(const char *code, const char *msg, size_t n)
{
	_cleanup_free_ char *safe = sbx_term_safe_n(msg, n);

	if (cmd_json_mode())
		error_json(code, n ? safe : "unknown error");
	else
		fprintf(stderr, "sbx: error: %s\n", n ? safe : "unknown error");
}

int cmd_report(const struct sbx_err *err)
{
	error_line(sbx_err_code(err), err->msg, strnlen(err->msg, sizeof(err->msg)));
	return cmd_exit_code(err);
}

int cmd_error(enum sbx_errkind kind, const char *fmt, ...)
{
	struct sbx_err err = { .kind = kind };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
	va_end(ap);
	return cmd_report(&err);
}

static int unknown_command(const char *name)
{
	cmd_error(SBX_E_USAGE, "unknown command '%s'", name);
	if (!cmd_json_mode())
		fputs("Run 'sbx --help' to list the commands.\n", stderr);
	return 125;
}

int cmd_usage_error(const char *cmd, const char *fmt, ...)
{
	const struct sbx_command *c = cmd_find(cmd);
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	error_line("invalid_argument", msg ? msg : "", msg ? strlen(msg) : 0);
	if (cmd_json_mode())
		return 125; /* the JSON line is all: no usage text around it */
	if (c)
		fprintf(stderr, "Usage: %s\n", c->usage);
	fprintf(stderr, "Run 'sbx %s --help' for more information.\n", cmd);
	return 125;
}

/* whether the short option ch of a command's --help text takes a value: "-e, --env K=V" and
 * "-c STRING" do, "-q, --quiet   print ..." does not */
static bool help_short_takes_value(const char *help, int ch)
{
	for (const char *l = help; l && *l;) {
		const char *p = l + strspn(l, " ");
		const char *eol = strchrnul(l, '\n');
		l = *eol ? eol + 1 : eol;
		if (p[0] != '-' || p[1] != ch || p[1] == '-')
			continue;
		p += 2;
		if (*p == ',') { /* ", --long" */
			p += strspn(p, ", ");
			p += strcspn(p, " \n");
		}
		return p[0] == ' ' && p[1] != ' ' && p[1] != '\n' && p[1];
	}
	return false;
}

/* the long options in the option column of a command's --help text that start with prefix
 * ("--net-"), into sb separated by ", "; how many there are */
static int help_long_matches(const char *help, const char *prefix, size_t plen, struct strbuf *sb)
{
	int n = 0;

	for (const char *l = help; l && *l;) {
		const char *eol = strchrnul(l, '\n'), *line = l;
		l = *eol ? eol + 1 : eol;
		if (line[strspn(line, " ")] != '-')
			continue;
		for (const char *p = line; p < eol && p - line < 24; p++) {
			if (strncmp(p, "--", 2) || (p > line && p[-1] != ' '))
				continue;
			size_t len = strcspn(p, " ,=\n");
			if (len >= plen && !strncmp(p, prefix, plen)) {
				if (n++)
					strbuf_addstr(sb, ", ");
				strbuf_add(sb, p, len);
			}
			p += len;
		}
	}
	return n;
}

int cmd_bad_option(const char *cmd, int argc, char **argv)
{
	const struct sbx_command *c = cmd_find(cmd);
	/* its options, create's too for create and run */
	_cleanup_free_ char *help = c ? cmd_help_text(c) : NULL;
	const char *arg = optind - 1 < argc && optind > 0 ? argv[optind - 1] : "?";
	/* "sbx ls"; a subcommand's argv[0] is its own name: "sbx image pull" */
	_cleanup_free_ char *who = argc > 0 && startswith(argv[0], "sbx ")
		? xstrdup(argv[0])
		: xasprintf("sbx %s %s", cmd, argc > 0 ? argv[0] : "");

	/* a --json the command does not take does not make its errors JSON */
	if (streq(arg, "--json") || startswith(arg, "--json="))
		cmd_json_errors = false;
	if (startswith(arg, "--")) {
		/* getopt_long says '?' for an unknown option (optopt 0), a missing value and a
		 * value given to an option that takes none (optopt: the option's code) */
		const char *eq = strchr(arg, '=');
		size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
		if (optopt && eq)
			return cmd_usage_error(cmd, "option '%.*s' takes no value", (int)len, arg);
		if (optopt)
			return cmd_usage_error(cmd, "option '%s' needs a value", arg);
		struct strbuf sb = STRBUF_INIT;
		int n = help_long_matches(help, arg, len, &sb);
		int r = n > 1 ? cmd_usage_error(cmd, "option '%.*s' is ambiguous for '%s' (%s)",
						(int)len, arg, who, strbuf_str(&sb))
			      : cmd_usage_error(cmd, "unknown option '%.*s' for '%s'", (int)len,
						arg, who);
		strbuf_release(&sb);
		return r;
	}
	if (!optopt)
		return cmd_usage_error(cmd, "unknown option '%s' for '%s'", arg, who);
	/* getopt says '?' both for a short option the command does not have and for one that
	 * takes a value and came last with none: only the help text tells them apart */
	if (help_short_takes_value(help, optopt))
		return cmd_usage_error(cmd, "option '-%c' needs a value", optopt);
	return cmd_usage_error(cmd, "unknown option '-%c' for '%s'", optopt, who);
}

char *cmd_help_text(const struct sbx_command *c)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addstr(&sb, c->help ? c->help : "");
	if (c->more_help)
		c->more_help(&sb);
	return strbuf_detach(&sb);
}

int cmd_print_help(const char *cmd)
{
	const struct sbx_command *c = cmd_find(cmd);

	printf("Usage: %s\n\n%s.\n", c->usage, c->summary ? c->summary : "Internal");
	_cleanup_free_ char *help = cmd_help_text(c);
	printf("\nOptions:\n%s", help);
	printf("  -h, --help             show this help\n");
	printf("\nSee sbx-%s(1).\n", cmd);
	return 0;
}

int cmd_version(int argc, char **argv, struct sbx_ctx *ctx)
{
	if (argc > 1 && (streq(argv[1], "-h") || streq(argv[1], "--help")))
		return cmd_print_help("version");
	if (argc > 1)
		return cmd_usage_error("version", "unexpected argument '%s'", argv[1]);
	printf("sbx %s (commit %s)\n", SBX_VERSION, SBX_COMMIT);
	printf("sbx: disposable sandboxes for coding agents (local Linux namespaces, hosted "
	       "providers)\n");
	json_t *ps = sbx_sandbox_providers();
	size_t i;
	json_t *p;
	printf("providers:");
	json_array_foreach (ps, i, p)
		printf(" %s", sbx_json_str(p, "name"));
	printf("\n");
	json_decref(ps);
	(void)ctx;
	return 0;
}

int cmd_help(int argc, char **argv, struct sbx_ctx *ctx)
{
	(void)ctx;
	if (argc < 2) {
		main_usage(stdout);
		return 0;
	}
	if (streq(argv[1], "-h") || streq(argv[1], "--help"))
		return cmd_print_help("help");
	const struct sbx_command *c = cmd_find(argv[1]);
	if (!c || !c->summary)
		return unknown_command(argv[1]);
	return cmd_print_help(c->name);
}

/* --json among a command's arguments makes its errors JSON from the first one on (a usage
 * error may come before getopt reaches it): up to "--", and for a command that runs one, up to
 * the first word that is not an option (exec SB CMD --json: the command's) */
static bool args_want_json(const char *cmd, int argc, char **argv)
{
	bool runs = streq(cmd, "exec") || streq(cmd, "run");

	for (int i = 1; i < argc; i++) {
		if (streq(argv[i], "--"))
			break;
		if (streq(argv[i], "--json"))
			return true;
		if (runs && argv[i][0] != '-')
			break;
	}
	return false;
}

static int finish(int code)
{
	/* git's run_builtin check: a result nobody received is a failure */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno != EPIPE) {
			return cmd_error(SBX_E_IO, "cannot write to standard output: %s",
					 strerror(errno));
		}
	}
	if (fclose(stdout) != 0 && errno != EPIPE && code == 0) {
		return cmd_error(SBX_E_IO, "cannot write to standard output: %s", strerror(errno));
	}
	return code;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "debug", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_ctx ctx = { 0 };
	int c;
	const char *d = getenv("SBX_DEBUG");

	if (d && *d && !streq(d, "0"))
		sbx_debug_enabled = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			sbx_debug_enabled = 1;
			break;
		case 'h':
			main_usage(stdout);
			return finish(0);
		case 'V':
			return finish(cmd_version(1, argv, &ctx));
		default:
			cmd_error(SBX_E_USAGE, "unknown option '%s'", argv[optind - 1]);
			if (!cmd_json_mode())
				fputs("Run 'sbx --help' for more information.\n", stderr);
			return 125;
		}
	}
	if (optind >= argc) {
		if (!cmd_json_mode())
			main_usage(stderr);
		return cmd_error(SBX_E_USAGE, "no command given");
	}
	ctx.debug = sbx_debug_enabled;
	const struct sbx_command *cmd = cmd_find(argv[optind]);
	if (!cmd)
		return unknown_command(argv[optind]);
	/* commands that need no store */
	bool needs_store = !streq(cmd->name, "version") && !streq(cmd->name, "help");
	int sub_argc = argc - optind;
	char **sub_argv = argv + optind;
	if (args_want_json(cmd->name, sub_argc, sub_argv))
		cmd_json_errors = true;
	/* --help works even where the store cannot be opened */
	/* (where create's options are taken, -h is help only alone: create_help_or_hostname) */
	if (sub_argc > 1 &&
	    (streq(sub_argv[1], "--help") ||
	     (streq(sub_argv[1], "-h") && (sub_argc == 2 || !cmd->more_help))) &&
	    cmd->summary)
		return finish(cmd_print_help(cmd->name));
	if (needs_store) {
		struct sbx_err err = { 0 };
		/* completion runs on every TAB: it never creates state */
		if (sbx_store_open(&ctx.store, !streq(cmd->name, "__complete"), &err) < 0)
			return cmd_report(&err);
	}
	_cleanup_free_ char *name = xasprintf("sbx %s", cmd->name);
	sub_argv[0] = name;
	optind = 0;
	int r = cmd->fn(sub_argc, sub_argv, &ctx);
	sbx_store_release(&ctx.store);
	return finish(r);
}

#if defined(__SANITIZE_ADDRESS__)
/* sanitizer builds (make check-san): LeakSanitizer stops the world with ptrace, which cannot
 * work in a process that joined a sandbox's user namespace and made itself non-dumpable */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif
