/* main(): global options, the command table, exit statuses, the stdout check. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <stdarg.h>

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
	  "  -d, --detach           run in the background, print its pid; output goes to 'sbx logs'\n"
	  "  -e, --env K=V|K        set a variable (K alone: the caller's value)\n"
	  "      --env-file FILE    read K=V lines from FILE\n"
	  "  -w, --workdir DIR      working directory inside\n"
	  "      --timeout DUR      kill the command's process group after DUR (exit 124)\n"
	  "      --resume           resume the sandbox first if it is paused, released or stopped\n"
	  "  -c STRING              run STRING with /bin/sh -c\n" },
	{ "cp", cmd_cp, "Copy files between the host and a sandbox",
	  "sbx cp [-a] [-L] SRC|- SB:PATH\n       sbx cp [-a] [-L] SB:PATH DEST|-",
	  "  -a, --archive          keep the uid/gid of the source files\n"
	  "  -L, --follow-link      copy what SRC points at when it is a symbolic link\n"
	  "                         (resolved where it lives: inside the sandbox for SB:PATH)\n" },
	{ "logs", cmd_logs, "Print the output of detached commands, or the egress log",
	  "sbx logs [OPTIONS] SB\n       sbx logs --egress [--json] [OPTIONS] SB",
	  "  -f, --follow           keep printing new output until the sandbox stops\n"
	  "      --egress           the sandbox's egress log: one line per connection\n"
	  "      --json             with --egress: JSON lines\n" },
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
	  "  -q, --quiet            print ids only\n" },
	{ "inspect", cmd_inspect, "Show the records of sandboxes as JSON",
	  "sbx inspect [--json] SB...",
	  "      --json             no effect: the output is JSON already (as with ls --json)\n" },
	{ "pause", cmd_pause, "Freeze sandboxes, or release their processes",
	  "sbx pause [--release [--grace DUR]] SB...",
	  "      --release          end every process (SIGTERM, then SIGKILL); keep the files\n"
	  "      --grace DUR        with --release: how long SIGTERM has (default 10s)\n" },
	{ "resume", cmd_resume, "Resume paused sandboxes; start released or stopped ones again",
	  "sbx resume SB...", "" },
	{ "update", cmd_update, "Change the egress policy of sandboxes, running or not",
	  "sbx update [OPTIONS] SB...",
	  "      --net MODE         none, allow=DOMAIN[:PORT],... (the whole allow list) or\n"
	  "                         open; a running sandbox keeps a proxy, or none\n"
	  "      --net-preset default|none  with allow=: the preset of registries too, or not\n"
	  "      --net-allow DOMAIN[:PORT]  add to the allow list (repeatable)\n"
	  "      --net-deny DOMAIN[:PORT]   take out of the allow list (repeatable)\n"
	  "      --net-rate [DOMAIN=]LIMIT,...  request and byte limits, as sbx create's;\n"
	  "                         [DOMAIN=]none removes one (repeatable)\n" },
	{ "rm", cmd_rm, "Remove sandboxes", "sbx rm [OPTIONS] SB...",
	  "  -f, --force            remove running sandboxes too, and records that cannot be read\n" },
	{ "run", cmd_run, "Create a sandbox, run a command in it, remove it",
	  "sbx run [CREATE OPTIONS] [--timeout DUR] [-i] -- CMD [ARG...]\n"
	  "       sbx run --image REF [CREATE OPTIONS] [-- CMD [ARG...]]",
	  "  -i, --interactive      keep stdin open to the command\n"
	  "      --timeout DUR      kill the command after DUR (exit 124)\n"
	  "  and the options of 'sbx create' but --json (with --image and no CMD, the\n"
	  "  image's Entrypoint and Cmd run):\n",
	  create_help },
	{ "image", cmd_image, "Pull, import, list and remove OCI images",
	  "sbx image pull [--platform OS/ARCH] [--insecure] [-q] REF\n"
	  "       sbx image import FILE|-\n"
	  "       sbx image import --rootfs DIR|TAR NAME[:TAG]\n"
	  "       sbx image ls [--json] [-q]\n"
	  "       sbx image rm [-f] REF...\n"
	  "       sbx image prune",
	  "      --platform OS/ARCH[/VARIANT]\n"
	  "                         pull: the image of a multi-platform index (default\n"
	  "                         linux/amd64)\n"
	  "      --insecure         pull: plain HTTP to a registry not on loopback\n"
	  "  -q, --quiet            pull: no progress; ls: image ids only\n"
	  "      --rootfs           import: a one-layer image from a directory or a tar\n"
	  "      --json             ls: a JSON array\n"
	  "  -f, --force            rm: even while a sandbox uses the image\n" },
	{ "snapshot", cmd_snapshot, "Save, list, remove and restore snapshots of sandboxes' files",
	  "sbx snapshot create SB [--name NAME] [--json]\n"
	  "       sbx snapshot ls [SB] [--json] [-q]\n"
	  "       sbx snapshot rm SNAP...\n"
	  "       sbx snapshot restore SB SNAP",
	  "      --name NAME        create: a unique name for the snapshot\n"
	  "      --json             create: print its record; ls: a JSON array of records\n"
	  "  -q, --quiet            ls: snapshot ids only\n"
	  "  A snapshot holds the files the sandbox wrote (its own tree, or the layer it\n"
	  "  wrote over its image), not what bind volumes (-v) hold, nor its memory.\n" },
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

/* every "sbx: error:" line: a message carries names and answers a sandbox or a provider chose
 * (tar entries, HTTP error bodies), which must not reach the terminal as control sequences */
static void error_line(const char *msg, size_t n)
{
	_cleanup_free_ char *safe = sbx_term_safe_n(msg, n);

	fprintf(stderr, "sbx: error: %s\n", n ? safe : "unknown error");
}

int cmd_report(const struct sbx_err *err)
{
	error_line(err->msg, strnlen(err->msg, sizeof(err->msg)));
	return cmd_exit_code(err);
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
	error_line(msg ? msg : "", msg ? strlen(msg) : 0);
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
	if (!c || !c->summary) {
		_cleanup_free_ char *safe = sbx_term_safe(argv[1]);
		fprintf(stderr,
			"sbx: error: unknown command '%s'\nRun 'sbx --help' to list the "
			"commands.\n",
			safe);
		return 125;
	}
	return cmd_print_help(c->name);
}

static int finish(int code)
{
	/* git's run_builtin check: a result nobody received is a failure */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno != EPIPE) {
			fprintf(stderr, "sbx: error: cannot write to standard output: %s\n",
				strerror(errno));
			return 125;
		}
	}
	if (fclose(stdout) != 0 && errno != EPIPE && code == 0) {
		fprintf(stderr, "sbx: error: cannot write to standard output: %s\n",
			strerror(errno));
		return 125;
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
		default: {
			_cleanup_free_ char *safe = sbx_term_safe(argv[optind - 1]);
			fprintf(stderr,
				"sbx: error: unknown option '%s'\nRun 'sbx --help' for more "
				"information.\n",
				safe);
			return 125;
		}
		}
	}
	if (optind >= argc) {
		main_usage(stderr);
		fprintf(stderr, "sbx: error: no command given\n");
		return 125;
	}
	ctx.debug = sbx_debug_enabled;
	const struct sbx_command *cmd = cmd_find(argv[optind]);
	if (!cmd) {
		_cleanup_free_ char *safe = sbx_term_safe(argv[optind]);
		fprintf(stderr,
			"sbx: error: unknown command '%s'\nRun 'sbx --help' to list the "
			"commands.\n",
			safe);
		return 125;
	}
	/* commands that need no store */
	bool needs_store = !streq(cmd->name, "version") && !streq(cmd->name, "help");
	int sub_argc = argc - optind;
	char **sub_argv = argv + optind;
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
