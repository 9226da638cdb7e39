/* sbx create: make a sandbox and print its id (or its record with --json). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>

#include "core/json.h"
#include "core/net.h"

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
		fprintf(stderr, "sbx: error: cannot read env file '%s': %s\n", path,
			strerror(errno));
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
		fprintf(stderr, "sbx: error: cannot use volume '%s': %s\n", s, strerror(errno));
		return -1;
	}
	a->o.volumes = xrealloc(a->o.volumes, (a->o.n_volumes + 1) * sizeof(struct sbx_volume));
	a->o.volumes[a->o.n_volumes++] = (struct sbx_volume){ real, xstrdup(dest), ro };
	return 0;
}

int create_parse_opt(struct create_args *a, int c, const char *arg, const char *cmd)
{
	switch (c) {
	case OPT_NAME:
		a->o.name = arg;
		return 1;
	case 'e':
		return env_arg(&a->env_store, &a->n_env, arg, cmd) < 0 ? -1 : 1;
	case OPT_ENV_FILE:
		return env_file(&a->env_store, &a->n_env, arg, cmd) < 0 ? -1 : 1;
	case 'w':
		if (arg[0] != '/')
			return cmd_usage_error(cmd, "workdir must be an absolute path, not '%s'",
					       arg),
			       -1;
		a->o.workdir = arg;
		return 1;
	case 'v':
		return parse_volume(a, arg, cmd) < 0 ? -1 : 1;
	case OPT_LABEL:
		if (!strchr(arg, '=') || arg[0] == '=')
			return cmd_usage_error(cmd, "invalid label '%s': use K=V", arg), -1;
		strv_push(&a->label_store, &a->n_labels, xstrdup(arg));
		return 1;
	case OPT_PROVIDER:
		a->o.provider = arg;
		return 1;
	case OPT_CPUS: {
		char *end;
		errno = 0;
		double v = strtod(arg, &end);
		if (errno || end == arg || *end || !(v >= 0.01 && v <= 4096))
			return cmd_usage_error(cmd,
					       "invalid --cpus '%s': a number of CPUs such as 0.5 "
					       "or 2",
					       arg),
			       -1;
		a->o.cpu_millis = (long long)(v * 1000 + 0.5);
		return 1;
	}
	case OPT_MEMORY:
		a->o.memory = sbx_parse_bytes(arg);
		if (a->o.memory < 6 * 1024 * 1024)
			return cmd_usage_error(cmd,
					       "invalid --memory '%s': a size of at least 6m, "
					       "such as 256m or 1g",
					       arg),
			       -1;
		return 1;
	case OPT_PIDS_LIMIT:
		if (sbx_parse_int(arg, 1, 4194304, &a->o.pids_limit) < 0)
			return cmd_usage_error(cmd,
					       "invalid --pids-limit '%s': a number of "
					       "processes, at least 1",
					       arg),
			       -1;
		return 1;
	case OPT_DISK:
		a->o.disk = sbx_parse_bytes(arg);
		if (a->o.disk < 16 * 1024 * 1024)
			return cmd_usage_error(cmd,
					       "invalid --disk '%s': a size of at least 16m, such "
					       "as 512m or 10g",
					       arg),
			       -1;
		return 1;
	case OPT_TTL:
		a->o.ttl_ms = sbx_parse_duration_ms(arg);
		if (a->o.ttl_ms <= 0)
			return cmd_usage_error(cmd,
					       "invalid --ttl '%s': a duration such as 30m, 2h "
					       "or 90s",
					       arg),
			       -1;
		return 1;
	case OPT_TTL_ACTION:
		if (!streq(arg, "pause") && !streq(arg, "rm"))
			return cmd_usage_error(cmd, "invalid --ttl-action '%s': use pause or rm",
					       arg),
			       -1;
		a->o.ttl_action = arg;
		return 1;
	case OPT_NET:
		a->o.net = arg;
		return 1;
	case OPT_NET_PRESET:
		if (!streq(arg, "default") && !streq(arg, "none"))
			return cmd_usage_error(
				       cmd, "invalid --net-preset '%s': use default or none", arg),
			       -1;
		a->o.net_preset_none = streq(arg, "none");
		return 1;
	case OPT_NET_ALLOW_PRIVATE:
		a->o.net_allow_private = true;
		return 1;
	case OPT_ADD_HOST:
		strv_push(&a->add_host_store, &a->n_add_hosts, xstrdup(arg));
		return 1;
	case OPT_HOST_PORT:
		strv_push(&a->host_port_store, &a->n_host_ports, xstrdup(arg));
		return 1;
	case OPT_IMAGE:
		a->o.image = arg;
		return 1;
	}
	return 0;
}

int create_args_finish(struct create_args *a, const char *cmd)
{
	char msg[300];

	a->o.env = a->env_store;
	a->o.labels = a->label_store;
	a->o.add_hosts = a->add_host_store;
	a->o.host_ports = a->host_port_store;
	if (a->o.ttl_action && !a->o.ttl_ms)
		return cmd_usage_error(cmd, "--ttl-action goes with --ttl"), -1;
	if (sbx_net_validate(&a->o, msg, sizeof(msg)) < 0)
		return cmd_usage_error(cmd, "%s", msg), -1;
	if (a->o.net_preset_none && a->o.net && strncmp(a->o.net, "allow=", 6) != 0)
		return cmd_usage_error(cmd, "--net-preset goes with --net allow=..."), -1;
	if (a->o.net && streq(a->o.net, "host") &&
	    (!a->o.provider || streq(a->o.provider, "local")))
		fprintf(stderr,
			"sbx: warning: --net host shares the host's network: the sandbox "
			"can reach every service on this machine and its network, unlogged\n");
	return 0;
}

void create_args_release(struct create_args *a)
{
	sbx_strv_free(a->env_store);
	sbx_strv_free(a->label_store);
	sbx_strv_free(a->add_host_store);
	sbx_strv_free(a->host_port_store);
	for (size_t i = 0; i < a->o.n_volumes; i++) {
		free(a->o.volumes[i].host);
		free(a->o.volumes[i].dest);
	}
	free(a->o.volumes);
}

int cmd_create(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		CREATE_LONGOPTS,
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct create_args a = { 0 };
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL;
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h" CREATE_SHORTOPTS, opts, NULL)) != -1) {
		if (c == 'h') {
			create_args_release(&a);
			return cmd_print_help("create");
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
