/* sbx create: make a sandbox and print its id (or its record with --json). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <ctype.h>
#include <errno.h>

#include "core/json.h"
#include "core/net.h"
#include "core/strbuf.h"

void strv_push(char ***v, size_t *n, char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(char *));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

static bool env_key_valid(const char *k, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (k[i] == '=' || k[i] == 0 || k[i] == ' ')
			return false;
	return true;
}

int env_arg(char ***v, size_t *n, const char *arg, const char *cmd)
{
	const char *eq = strchr(arg, '=');

	if (!env_key_valid(arg, eq ? (size_t)(eq - arg) : strlen(arg)))
		return cmd_usage_error(cmd, "invalid variable '%s': use K=V or K", arg), -1;
	if (eq) {
		strv_push(v, n, xstrdup(arg));
		return 0;
	}
	const char *val = getenv(arg);
	if (val) /* docker: an unset K is simply not passed */
		strv_push(v, n, xasprintf("%s=%s", arg, val));
	return 0;
}

int env_file(char ***v, size_t *n, const char *path, const char *cmd)
{
	_cleanup_free_ char *text = sbx_read_file(path, 1 << 20, NULL);
	char *save = NULL;
	int lineno = 0;

	if (!text) {
		cmd_error(SBX_E_IO, "cannot read env file '%s': %s", path, strerror(errno));
		return -1;
	}
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		size_t l = strlen(line);
		if (l && line[l - 1] == '\r')
			line[--l] = 0;
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#')
			continue;
		if (env_arg(v, n, line, cmd) < 0)
			return -1;
	}
	return 0;
}

static int parse_volume(struct create_args *a, const char *arg, const char *cmd)
{
	struct sbx_config *c = &a->o.config;
	_cleanup_free_ char *s = xstrdup(arg);
	char *dest = strchr(s, ':');
	bool ro = false;

	if (!dest)
		return cmd_usage_error(cmd, "invalid volume '%s': use HOST:DEST[:ro]", arg), -1;
	*dest++ = 0;
	char *mode = strchr(dest, ':');
	if (mode) {
		*mode++ = 0;
		if (streq(mode, "ro"))
			ro = true;
		else if (!streq(mode, "rw"))
			return cmd_usage_error(cmd, "invalid volume mode '%s': use ro or rw", mode),
			       -1;
	}
	if (s[0] != '/' || dest[0] != '/')
		return cmd_usage_error(cmd, "invalid volume '%s': both paths must be absolute",
				       arg),
		       -1;
	char *real = realpath(s, NULL);
	if (!real) {
		cmd_error(errno == ENOENT ? SBX_E_NOTFOUND : SBX_E_IO, "cannot use volume '%s': %s",
			  s, strerror(errno));
		return -1;
	}
	c->volumes = xrealloc(c->volumes, (c->n_volumes + 1) * sizeof(struct sbx_volume));
	c->volumes[c->n_volumes++] = (struct sbx_volume){ real, xstrdup(dest), ro };
	return 0;
}

/* --- the option table: one row per option, its parser writes the typed configuration ------ */

#define CFG (&a->o.config)
#define USAGE(...) (cmd_usage_error(cmd, __VA_ARGS__), -1)
#define PARSER(name) static int name(struct create_args *a, const char *arg, const char *cmd)

static void set_str(char **field, const char *arg)
{
	free(*field);
	*field = xstrdup(arg);
}

PARSER(opt_name)
{
	a->o.name = arg;
	return 0;
}

PARSER(opt_env)
{
	return env_arg(&CFG->env, &a->n_env, arg, cmd);
}

PARSER(opt_env_file)
{
	return env_file(&CFG->env, &a->n_env, arg, cmd);
}

PARSER(opt_workdir)
{
	if (arg[0] != '/')
		return USAGE("workdir must be an absolute path, not '%s'", arg);
	set_str(&CFG->workdir, arg);
	return 0;
}

PARSER(opt_volume)
{
	return parse_volume(a, arg, cmd);
}

PARSER(opt_label)
{
	if (!strchr(arg, '=') || arg[0] == '=')
		return USAGE("invalid label '%s': use K=V", arg);
	strv_push(&CFG->labels, &a->n_labels, xstrdup(arg));
	return 0;
}

PARSER(opt_provider)
{
	a->o.provider = arg;
	return 0;
}

PARSER(opt_from)
{
	if (!*arg)
		return USAGE("--from needs a snapshot");
	free(CFG->from);
	CFG->from = xstrdup(arg);
	return 0;
}

PARSER(opt_hostname)
{
	/* a host name as the kernel takes it: labels of letters, digits and '-' */
	size_t n = strlen(arg), lab = 0;
	bool ok = n > 0 && n <= 64 && arg[0] != '.' && arg[n - 1] != '.';
	for (const char *p = arg; ok && *p; p++) {
		if (*p == '.')
			ok = lab > 0, lab = 0;
		else
			ok = (isalnum((unsigned char)*p) || (*p == '-' && lab > 0)) && ++lab <= 63;
	}
	if (!ok)
		return USAGE("invalid --hostname '%s': letters, digits, '-' and '.', at most 64",
			     arg);
	set_str(&CFG->hostname, arg);
	return 0;
}

PARSER(opt_cpus)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.01 && v <= 4096))
		return USAGE("invalid --cpus '%s': a number of CPUs such as 0.5 or 2", arg);
	CFG->cpu_millis = (long long)(v * 1000 + 0.5);
	return 0;
}

PARSER(opt_memory)
{
	CFG->memory = sbx_parse_bytes(arg);
	if (CFG->memory < 6 * 1024 * 1024)
		return USAGE("invalid --memory '%s': a size of at least 6m, such as 256m or 1g",
			     arg);
	return 0;
}

PARSER(opt_pids_limit)
{
	if (sbx_parse_int(arg, 1, 4194304, &CFG->pids_limit) < 0)
		return USAGE("invalid --pids-limit '%s': a number of processes, at least 1", arg);
	return 0;
}

PARSER(opt_disk)
{
	CFG->disk = sbx_parse_bytes(arg);
	if (CFG->disk < 16 * 1024 * 1024)
		return USAGE("invalid --disk '%s': a size of at least 16m, such as 512m or 10g",
			     arg);
	return 0;
}

PARSER(opt_ttl)
{
	CFG->ttl_ms = sbx_parse_duration_ms(arg);
	if (CFG->ttl_ms <= 0)
		return USAGE("invalid --ttl '%s': a duration such as 30m, 2h or 90s", arg);
	return 0;
}

PARSER(opt_ttl_action)
{
	if (!streq(arg, "pause") && !streq(arg, "rm"))
		return USAGE("invalid --ttl-action '%s': use pause or rm", arg);
	CFG->ttl_rm = streq(arg, "rm");
	a->ttl_action = true;
	return 0;
}

PARSER(opt_ttl_hard)
{
	(void)arg;
	CFG->ttl_hard = true;
	return 0;
}

PARSER(opt_net)
{
	char msg[300];
	if (sbx_net_parse_mode(arg, &CFG->net, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	a->net_given = true;
	return 0;
}

PARSER(opt_net_preset)
{
	if (!streq(arg, "default") && !streq(arg, "none"))
		return USAGE("invalid --net-preset '%s': use default or none", arg);
	a->preset_none = streq(arg, "none");
	return 0;
}

PARSER(opt_net_allow_private)
{
	CFG->net.allow_private = true;
	return 0;
}

PARSER(opt_add_host)
{
	char msg[300];
	if (sbx_net_add_host_arg(&CFG->net, arg, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	return 0;
}

PARSER(opt_host_port)
{
	char msg[300];
	if (sbx_net_host_port_arg(&CFG->net, arg, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	return 0;
}

PARSER(opt_net_rate)
{
	char msg[300];
	if (sbx_net_rate_arg(&CFG->net, arg, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	return 0;
}

PARSER(opt_port)
{
	char msg[300];
	if (sbx_port_arg(CFG, arg, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	return 0;
}

PARSER(opt_runtime)
{
	if (!*arg || strlen(arg) > 64 ||
	    strspn(arg,
		   "abcdefghijklmnopqrstuvwxyz"
		   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(arg))
		return USAGE("invalid --runtime '%s': a runtime's name, letters, digits, '_', '.' "
			     "and '-'",
			     arg);
	set_str(&CFG->runtime, arg);
	return 0;
}

PARSER(opt_image)
{
	set_str(&CFG->image.ref, arg);
	return 0;
}

PARSER(opt_secret)
{
	char msg[400];
	if (sbx_secret_arg(CFG, arg, msg, sizeof(msg)) < 0)
		return USAGE("%s", msg);
	return 0;
}

PARSER(opt_nested)
{
	CFG->nested = true;
	return 0;
}

#define ARG required_argument
/* getopt's val for a row without a short option: its index past this */
#define OPT_CREATE_BASE 2000
static const struct create_option {
	const char *name;
	int has_arg;
	char short_opt;
	const char *help; /* "METAVAR<TAB>text": --help's line(s); \n continues the text */
	int (*parse)(struct create_args *a, const char *arg, const char *cmd);
} create_options[] = {
	{ "name", ARG, 0, "NAME\ta unique name ([a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 63)",
	  opt_name },
	{ "env", ARG, 'e', "K=V|K\tset a variable for every exec (K alone: the caller's value)",
	  opt_env },
	{ "env-file", ARG, 0, "FILE\tread K=V lines from FILE ('#' comments)", opt_env_file },
	{ "workdir", ARG, 'w', "DIR\tdefault working directory (default /workspace)", opt_workdir },
	{ "volume", ARG, 'v', "HOST:DEST[:ro]\tbind a host path into the sandbox", opt_volume },
	{ "label", ARG, 0, "K=V\tattach a label", opt_label },
	{ "provider", ARG, 0, "NAME\tbackend (default local; 'sbx provider ls' lists them)",
	  opt_provider },
	{ "hostname", ARG, 0, "NAME\tthe sandbox's host name (default: its name, or its id)",
	  opt_hostname },
	{ "cpus", ARG, 0, "N\tCPU quota, in CPUs (0.5: half of one)", opt_cpus },
	{ "memory", ARG, 0, "SIZE\tmemory limit (256m, 1g); past it the kernel kills inside",
	  opt_memory },
	{ "pids-limit", ARG, 0, "N\tat most N processes", opt_pids_limit },
	{ "disk", ARG, 0, "SIZE\tat most SIZE written (512m, 10g): a filesystem of its own",
	  opt_disk },
	{ "ttl", ARG, 0, "DUR\tafter DUR without exec, cp or preview traffic: pause", opt_ttl },
	{ "ttl-action", ARG, 0, "pause|rm\twhat the idle timeout does (default pause)",
	  opt_ttl_action },
	{ "ttl-hard", no_argument, 0,
	  "\tthe idle timeout runs out even while an exec runs (default: it waits)", opt_ttl_hard },
	{ "net", ARG, 0,
	  "MODE\tegress: none, allow=DOMAIN[:PORT],... (default: allow= with\n"
	  "the preset of package registries and code hosts), open\n"
	  "(every domain, logged) or host (unsafe: the host's network)",
	  opt_net },
	{ "net-preset", ARG, 0, "default|none\twith allow=: add the preset (default) or not",
	  opt_net_preset },
	{ "net-allow-private", no_argument, 0,
	  "\twith allow= or open: the proxy may dial private addresses\n"
	  "(10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)",
	  opt_net_allow_private },
	{ "net-rate", ARG, 0,
	  "[DOMAIN=]LIMIT,...\twith allow= or open: at most N requests (50r/s,\n"
	  "600r/m: past it 429) and SIZE a second each way (10MiB/s:\n"
	  "slowed down), for the sandbox or for DOMAIN; repeatable",
	  opt_net_rate },
	{ "add-host", ARG, 0, "NAME:ADDR\tNAME resolves to ADDR, in /etc/hosts and for the proxy",
	  opt_add_host },
	{ "host-port", ARG, 0,
	  "PORT[:INSIDE]\tthe host's 127.0.0.1:PORT at 127.0.0.1:INSIDE inside", opt_host_port },
	{ "port", ARG, 'p',
	  "PORT\ta port inside to publish for previews (where ports are\n"
	  "fixed at create, as on Docker); repeatable",
	  opt_port },
	{ "runtime", ARG, 0,
	  "NAME\twhat runs it: the provider's runtime NAME (local: gvisor;\n"
	  "docker: a runtime the daemon has, such as runsc)",
	  opt_runtime },
	{ "image", ARG, 0,
	  "REF\tan OCI image's files as the root (pulled when missing);\n"
	  "its Env, WorkingDir and User are the defaults",
	  opt_image },
	{ "from", ARG, 0, "SNAP\tstart with the files of snapshot SNAP (and its image): a fork",
	  opt_from },
	{ "secret", ARG, 0,
	  "NAME@HOST,...\t$NAME inside is a placeholder; the egress proxy puts\n"
	  "the caller's $NAME in its place in HTTPS requests to HOST\n"
	  "(NAME=@FILE@HOST: the value from FILE); repeatable",
	  opt_secret },
	{ "nested", no_argument, 0,
	  "\tits processes may make namespaces and mounts of their own\n"
	  "(rootless podman, bwrap, unshare -r, Chromium's sandbox)",
	  opt_nested },
};

static int val_of(size_t i)
{
	return create_options[i].short_opt ? create_options[i].short_opt : OPT_CREATE_BASE + (int)i;
}

struct option *create_longopts(const struct option *own)
{
	size_t n = 0, k = 0;

	while (own[n].name)
		n++;
	struct option *o = xcalloc(ARRAY_SIZE(create_options) + n + 1, sizeof(*o));
	for (size_t i = 0; i < ARRAY_SIZE(create_options); i++)
		o[k++] = (struct option){ create_options[i].name, create_options[i].has_arg, NULL,
					  val_of(i) };
	for (size_t i = 0; i < n; i++)
		o[k++] = own[i];
	return o;
}

char *create_shortopts(const char *own)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addf(&sb, "+%s", own);
	for (size_t i = 0; i < ARRAY_SIZE(create_options); i++)
		if (create_options[i].short_opt)
			strbuf_addf(&sb, "%c%s", create_options[i].short_opt,
				    create_options[i].has_arg == ARG ? ":" : "");
	return strbuf_detach(&sb);
}

void create_help(struct strbuf *sb)
{
	for (size_t i = 0; i < ARRAY_SIZE(create_options); i++) {
		const struct create_option *o = &create_options[i];
		const char *tab = strchr(o->help, '\t');
		char head[80];
		int n = snprintf(head, sizeof(head), "  %c%c%c --%s%s%.*s",
				 o->short_opt ? '-' : ' ', o->short_opt ? o->short_opt : ' ',
				 o->short_opt ? ',' : ' ', o->name, tab - o->help ? " " : "",
				 (int)(tab - o->help), o->help);
		const char *text = tab + 1;
		/* the text starts in column 25, on the option's line when it fits */
		if (n < 24)
			strbuf_addf(sb, "%-25s", head);
		else
			strbuf_addf(sb, "%s\n%25s", head, "");
		for (const char *l = text; *l;) {
			size_t len = strcspn(l, "\n");
			strbuf_addf(sb, "%.*s\n", (int)len, l);
			l += len;
			if (*l == '\n' && *++l)
				strbuf_addf(sb, "%25s", "");
		}
	}
}

int create_parse_opt(struct create_args *a, int c, const char *arg, const char *cmd)
{
	for (size_t i = 0; i < ARRAY_SIZE(create_options); i++)
		if (val_of(i) == c)
			return create_options[i].parse(a, arg, cmd) < 0 ? -1 : 1;
	return 0;
}

int create_args_finish(struct create_args *a, const char *cmd)
{
	struct sbx_config *c = &a->o.config;
	char msg[300];

	if (a->ttl_action && !c->ttl_ms)
		return cmd_usage_error(cmd, "--ttl-action goes with --ttl"), -1;
	if (c->ttl_hard && !c->ttl_ms)
		return cmd_usage_error(cmd, "--ttl-hard goes with --ttl"), -1;
	if (a->preset_none) {
		if (a->net_given && c->net.mode != SBX_NET_ALLOW)
			return cmd_usage_error(cmd, "--net-preset goes with --net allow=..."), -1;
		c->net.set = true;
		c->net.preset = false;
	}
	if (!c->env)
		c->env = xcalloc(1, sizeof(char *));
	if (!c->labels)
		c->labels = xcalloc(1, sizeof(char *));
	if (sbx_config_validate(c, msg, sizeof(msg)) < 0)
		return cmd_usage_error(cmd, "%s", msg), -1;
	if (sbx_secrets_validate(c, msg, sizeof(msg)) < 0)
		return cmd_usage_error(cmd, "%s", msg), -1;
	if (c->net.set && c->net.mode == SBX_NET_HOST &&
	    (!a->o.provider || streq(a->o.provider, "local")))
		fprintf(stderr,
			"sbx: warning: --net host shares the host's network: the sandbox "
			"can reach every service on this machine and its network, unlogged\n");
	return 0;
}

void create_args_release(struct create_args *a)
{
	sbx_config_release(&a->o.config);
}

/* docker's -h is --hostname; here -h is help: alone it prints it, with anything else it is a
 * mistake to say, not to act on */
int create_help_or_hostname(int argc, char **argv, const char *cmd)
{
	if (streq(argv[optind - 1], "-h") && argc > 2)
		return cmd_usage_error(cmd,
				       "-h is --help here, and takes nothing else; to set the host "
				       "name, use --hostname NAME");
	return cmd_print_help(cmd);
}

int cmd_create(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option own[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	_cleanup_free_ struct option *opts = create_longopts(own);
	_cleanup_free_ char *shortopts = create_shortopts("h");
	struct create_args a = { 0 };
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL;
	int c, ret = 0;

	sbx_config_init(&a.o.config);
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		if (c == 'h') {
			create_args_release(&a);
			return create_help_or_hostname(argc, argv, "create");
		}
		if (c == OPT_JSON) {
			a.json = true;
			continue;
		}
		int r = c == '?' ? 0 : create_parse_opt(&a, c, optarg, "create");
		if (r == 1)
			continue;
		create_args_release(&a);
		return r < 0 ? 125 : cmd_bad_option("create", argc, argv);
	}
	if (optind < argc) {
		create_args_release(&a);
		return cmd_usage_error("create", "unexpected argument '%s'", argv[optind]);
	}
	if (create_args_finish(&a, "create") < 0) {
		create_args_release(&a);
		return 125;
	}
	if (sbx_sandbox_create(ctx, &a.o, &rec, &err) < 0) {
		ret = cmd_report(&err);
	} else if (a.json) {
		json_t *j = cmd_record_view(rec);
		char *s = sbx_json_dump(j, true);
		puts(s);
		free(s);
		json_decref(j);
	} else {
		puts(rec->id);
	}
	sbx_record_free(rec);
	create_args_release(&a);
	return ret;
}
