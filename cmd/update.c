/* sbx update: change the configuration of a sandbox, running or not (its egress policy, its
 * limits, its idle timeout). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>

#include "core/net.h"

enum {
	OPT_NET = 3000,
	OPT_NET_PRESET,
	OPT_NET_ALLOW,
	OPT_NET_DENY,
	OPT_NET_RATE,
	OPT_TTL,
	OPT_CPUS,
	OPT_MEMORY,
	OPT_SECRET,
};

int cmd_update(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "net", required_argument, NULL, OPT_NET },
		{ "net-preset", required_argument, NULL, OPT_NET_PRESET },
		{ "net-allow", required_argument, NULL, OPT_NET_ALLOW },
		{ "net-deny", required_argument, NULL, OPT_NET_DENY },
		{ "net-rate", required_argument, NULL, OPT_NET_RATE },
		{ "ttl", required_argument, NULL, OPT_TTL },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "memory", required_argument, NULL, OPT_MEMORY },
		{ "secret", required_argument, NULL, OPT_SECRET },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_update_opts o = { 0 };
	_cleanup_(strv_freep) char **allow = NULL, **deny = NULL, **rate = NULL, **secrets = NULL;
	size_t n_allow = 0, n_deny = 0, n_rate = 0, n_secrets = 0;
	struct sbx_config check;
	char msg[300];
	int c, ret = 0;

	opterr = 0;
	/* docker update's order, SB then the options, as well as the other */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		/* each value is checked here, so that a mistake is a usage error before anything
		 * is looked at */
		sbx_config_init(&check);
		int bad = 0;
		switch (c) {
		case 'h':
			return cmd_print_help("update");
		case OPT_NET:
			bad = sbx_net_parse_mode(optarg, &check.net, msg, sizeof(msg));
			o.net = optarg;
			break;
		case OPT_NET_PRESET:
			if (!streq(optarg, "default") && !streq(optarg, "none"))
				bad = -1,
				snprintf(msg, sizeof(msg),
					 "invalid --net-preset '%s': use default or none", optarg);
			o.net_preset = optarg;
			break;
		case OPT_NET_ALLOW:
		case OPT_NET_DENY: {
			char *pat = NULL;
			int port;
			if (sbx_net_parse_allow(optarg, &pat, &port) < 0)
				bad = -1,
				snprintf(msg, sizeof(msg),
					 "invalid --net-%s '%s': use example.com, "
					 "*.example.com, optionally with :PORT",
					 c == OPT_NET_ALLOW ? "allow" : "deny", optarg);
			free(pat);
			if (c == OPT_NET_ALLOW)
				strv_push(&allow, &n_allow, xstrdup(optarg));
			else
				strv_push(&deny, &n_deny, xstrdup(optarg));
			break;
		}
		case OPT_NET_RATE:
			bad = sbx_net_rate_arg(&check.net, optarg, msg, sizeof(msg));
			strv_push(&rate, &n_rate, xstrdup(optarg));
			break;
		case OPT_SECRET: /* the value is read here, once: core takes it from there */
			bad = sbx_secret_arg(&check, optarg, msg, sizeof(msg));
			strv_push(&secrets, &n_secrets, xstrdup(optarg));
			break;
		case OPT_TTL:
			o.ttl_ms = sbx_parse_duration_ms(optarg);
			if (o.ttl_ms <= 0)
				bad = -1,
				snprintf(msg, sizeof(msg),
					 "invalid --ttl '%s': a duration such as 30m, 2h "
					 "or 90s",
					 optarg);
			break;
		case OPT_CPUS: {
			char *end;
			errno = 0;
			double v = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(v >= 0.01 && v <= 4096))
				bad = -1,
				snprintf(msg, sizeof(msg),
					 "invalid --cpus '%s': a number of CPUs such as "
					 "0.5 or 2",
					 optarg);
			else
				o.cpu_millis = (long long)(v * 1000 + 0.5);
			break;
		}
		case OPT_MEMORY:
			o.memory = sbx_parse_bytes(optarg);
			if (o.memory < 6 * 1024 * 1024)
				bad = -1,
				snprintf(msg, sizeof(msg),
					 "invalid --memory '%s': a size of at least 6m, "
					 "such as 256m or 1g",
					 optarg);
			break;
		default:
			sbx_config_release(&check);
			return cmd_bad_option("update", argc, argv);
		}
		sbx_config_release(&check);
		if (bad < 0)
			return cmd_usage_error("update", "%s", msg);
	}
	o.net_allow = allow;
	o.net_deny = deny;
	o.net_rate = rate;
	o.secrets = secrets;
	if (optind >= argc)
		return cmd_usage_error("update", "missing sandbox");
	if (!o.net && !o.net_preset && !allow && !deny && !rate && !o.ttl_ms && !o.cpu_millis &&
	    !o.memory && !secrets)
		return cmd_usage_error("update",
				       "nothing to change: give --net, --net-allow, "
				       "--net-deny, --net-preset, --net-rate, --ttl, --cpus, "
				       "--memory or --secret");
	for (int i = optind; i < argc; i++) {
		struct sbx_err err = { 0 };
		if (sbx_sandbox_update(ctx, argv[i], &o, &err) < 0)
			ret = cmd_report(&err);
		else
			puts(argv[i]);
	}
	return ret;
}
