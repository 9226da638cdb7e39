/* sbx stats: one sample of what sandboxes use (docker stats --no-stream), a table or JSON. */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include "core/json.h"
#include "core/log.h"

enum {
	OPT_NO_STREAM = 3200
};

/* "12.3MiB", "-" for null */
static void bytes_text(char *buf, size_t len, const json_t *v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double b = json_is_number(v) ? json_number_value(v) : -1;
	size_t u = 0;

	if (b < 0) {
		snprintf(buf, len, "-");
		return;
	}
	while (b >= 1024 && u + 1 < ARRAY_SIZE(unit))
		b /= 1024, u++;
	snprintf(buf, len, u ? "%.1f%s" : "%.0f%s", b, unit[u]);
}

/* the sample of rec, with its id and name in front */
static json_t *sample(struct sbx_ctx *ctx, struct sbx_record *rec, struct sbx_err *err)
{
	json_t *s = NULL;

	if (sbx_sandbox_stats(ctx, rec, &s, err) < 0)
		return NULL;
	json_t *o = json_pack("{s:s, s:o}", "id", rec->id, "name",
			      rec->name ? json_string(rec->name) : json_null());
	static const char *const keys[] = { "cpu_ms",	    "cpu_percent",
					    "memory_bytes", "memory_limit_bytes",
					    "pids",	    "disk_bytes",
					    "net_rx_bytes", "net_tx_bytes" };
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(s, keys[i]);
		json_object_set(o, keys[i], v ? v : json_null());
	}
	json_decref(s);
	return o;
}

static void print_row(const json_t *o)
{
	char mem[32], lim[32], disk[32], rx[32], tx[32], cpu[32], pids[32];
	const json_t *pct = json_object_get(o, "cpu_percent");
	const json_t *p = json_object_get(o, "pids");
	_cleanup_free_ char *id = sbx_term_safe(sbx_json_str(o, "id"));
	const char *n = sbx_json_str(o, "name");
	_cleanup_free_ char *name = sbx_term_safe(n ? n : "-");

	bytes_text(mem, sizeof(mem), json_object_get(o, "memory_bytes"));
	bytes_text(lim, sizeof(lim), json_object_get(o, "memory_limit_bytes"));
	bytes_text(disk, sizeof(disk), json_object_get(o, "disk_bytes"));
	bytes_text(rx, sizeof(rx), json_object_get(o, "net_rx_bytes"));
	bytes_text(tx, sizeof(tx), json_object_get(o, "net_tx_bytes"));
	if (json_is_number(pct))
		snprintf(cpu, sizeof(cpu), "%.2f%%", json_number_value(pct));
	else
		snprintf(cpu, sizeof(cpu), "-");
	if (json_is_integer(p))
		snprintf(pids, sizeof(pids), "%lld", (long long)json_integer_value(p));
	else
		snprintf(pids, sizeof(pids), "-");
	char usage[80];
	snprintf(usage, sizeof(usage), "%s / %s", mem, lim);
	char net[80];
	snprintf(net, sizeof(net), "%s / %s", rx, tx);
	printf("%-12s  %-20s  %-8s  %-22s  %-5s  %-10s  %s\n", id, name, cpu, usage, pids, disk,
	       net);
}

int cmd_stats(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "no-stream", no_argument, NULL, OPT_NO_STREAM },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	int c, ret = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("stats");
		case OPT_JSON:
			json = true;
			break;
		case OPT_NO_STREAM:
			break;
		default:
			return cmd_bad_option("stats", argc, argv);
		}
	}
	json_t *all = json_array();
	if (optind < argc) {
		for (int i = optind; i < argc; i++) {
			struct sbx_err err = { 0 };
			_cleanup_record_ struct sbx_record *rec = NULL;
			json_t *o = NULL;
			if (sbx_sandbox_get(ctx, argv[i], &rec, &err) < 0 ||
			    !(o = sample(ctx, rec, &err)))
				ret = cmd_report(&err);
			else
				json_array_append_new(all, o);
		}
	} else {
		/* every running sandbox, as docker stats without names */
		struct sbx_listing l;
		struct sbx_err err = { 0 };
		if (sbx_sandbox_list(ctx, &l, &err) < 0) {
			json_decref(all);
			return cmd_report(&err);
		}
		for (size_t i = 0; i < l.n; i++) {
			if (l.recs[i]->state != SBX_STATE_RUNNING)
				continue;
			struct sbx_err e = { 0 };
			json_t *o = sample(ctx, l.recs[i], &e);
			if (o)
				json_array_append_new(all, o);
			else
				sbx_debug("stats: %s: %s", l.recs[i]->id, e.msg);
		}
		sbx_listing_release(&l);
	}
	if (json) {
		char *s = sbx_json_dump(all, true);
		puts(s);
		free(s);
	} else {
		printf("%-12s  %-20s  %-8s  %-22s  %-5s  %-10s  %s\n", "ID", "NAME", "CPU %",
		       "MEM USAGE / LIMIT", "PIDS", "DISK", "NET RX / TX");
		size_t i;
		json_t *o;
		json_array_foreach (all, i, o)
			print_row(o);
	}
	json_decref(all);
	return ret;
}
