/* sbx logs: print (and follow) the output of a sandbox's detached commands (exec -d). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "core/jobs.h"
#include "core/json.h"

static int copy_out(int fd)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (sbx_write_all(1, buf, (size_t)n) < 0)
			return -1;
	}
	return 0;
}

/* --- sbx logs --egress ---------------------------------------------------------------------- */

static void egress_line(const char *line, bool json, bool *header)
{
	if (json) {
		puts(line);
		return;
	}
	json_t *j = json_loads(line, 0, NULL);
	if (!j)
		return;
	if (!*header) {
		printf("%-24s  %-12s  %-7s  %-28s  %-7s  %9s  %9s  %s\n", "TIME", "EXEC", "PROTO",
		       "DESTINATION", "VERDICT", "UP", "DOWN", "COMMAND / REASON");
		*header = true;
	}
	if (sbx_json_str(j, "policy")) {
		/* sbx update changed the policy: the new one, on a row of its own */
		_cleanup_free_ char *t = sbx_term_safe(sbx_json_str(j, "time") ?: "?");
		_cleanup_free_ char *mode = sbx_term_safe(sbx_json_str(j, "mode") ?: "?");
		_cleanup_free_ char *allow = json_dumps(json_object_get(j, "allow"), JSON_COMPACT);
		_cleanup_free_ char *rates = json_dumps(json_object_get(j, "rates"), JSON_COMPACT);
		_cleanup_free_ char *what = xasprintf(
			"mode %s, allow %s%s, rates %s", mode, allow ? allow : "[]",
			json_is_true(json_object_get(j, "preset")) ? " and the preset" : "",
			rates ? rates : "[]");
		_cleanup_free_ char *safe = sbx_term_safe(what);
		printf("%-24s  %-12s  %-7s  %-28s  %-7s  %9s  %9s  %s\n", t, "-", "policy", "-",
		       "update", "-", "-", safe);
		json_decref(j);
		return;
	}
	/* one table row stays one line, and what a sandbox asked for (a domain, a command) is
	 * shown as text, never as terminal controls: every field, whatever wrote the line */
	_cleanup_free_ char *t = sbx_term_safe(sbx_json_str(j, "time") ?: "?");
	_cleanup_free_ char *exec = sbx_term_safe(sbx_json_str(j, "exec") ?: "-");
	_cleanup_free_ char *proto = sbx_term_safe(sbx_json_str(j, "proto") ?: "?");
	long long port = (long long)json_integer_value(json_object_get(j, "port"));
	_cleanup_free_ char *dest_raw = xasprintf("%s:%lld", sbx_json_str(j, "domain") ?: "?",
						  port);
	_cleanup_free_ char *dest = sbx_term_safe(dest_raw);
	const char *verdict = sbx_json_str(j, "verdict") ?: "?";
	bool deny = streq(verdict, "deny");
	_cleanup_free_ char *v = sbx_term_safe(verdict);
	const char *raw = deny ? sbx_json_str(j, "reason") : sbx_json_str(j, "command");
	_cleanup_free_ char *what = raw ? sbx_term_safe(raw) : NULL;
	printf("%-24s  %-12s  %-7s  %-28s  %-7s  %9lld  %9lld  %s\n", t, exec, proto, dest, v,
	       (long long)json_integer_value(json_object_get(j, "bytes_up")),
	       (long long)json_integer_value(json_object_get(j, "bytes_down")), what ? what : "-");
	json_decref(j);
}

/* prints the whole lines that can be read from fd; a partial last line waits in pend */
static void egress_drain(int fd, char **pend, bool json, bool *header)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		char *all = xasprintf("%s%.*s", *pend ? *pend : "", (int)n, buf);
		free(*pend);
		char *l = all, *nl;
		while ((nl = strchr(l, '\n'))) {
			*nl = 0;
			if (*l)
				egress_line(l, json, header);
			l = nl + 1;
		}
		*pend = xstrdup(l);
		free(all);
	}
	fflush(stdout);
}

static int egress_logs(struct sbx_ctx *ctx, const char *sb, bool json, bool follow)
{
	_cleanup_free_ char *path = NULL, *id = NULL;
	struct sbx_err err = { 0 };
	bool header = false;
	_cleanup_free_ char *pend = NULL;

	if (sbx_sandbox_egress_log_path(ctx, sb, &path, &id, &err) < 0)
		return cmd_report(&err);
	_cleanup_free_ char *old = xasprintf("%s.1", path);
	int ofd = open(old, O_RDONLY | O_CLOEXEC);
	if (ofd >= 0) {
		egress_drain(ofd, &pend, json, &header);
		close(ofd);
		free(pend);
		pend = NULL;
	}
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		egress_drain(fd, &pend, json, &header);
	if (!follow && !json && !header)
		fprintf(stderr, "sbx: no egress recorded for sandbox '%s' yet\n", sb);
	for (int tick = 0; follow; tick++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		struct stat a, b;
		/* rotated: finish the old file, go on with the new one */
		if (fd >= 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino != b.st_ino) {
			egress_drain(fd, &pend, json, &header);
			close(fd);
			fd = -1;
		}
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			egress_drain(fd, &pend, json, &header);
		if (tick % 5 == 4) {
			struct sbx_record *rec;
			struct sbx_err e2 = { 0 };
			if (sbx_sandbox_get(ctx, id, &rec, &e2) < 0)
				break;
			bool up = rec->state == SBX_STATE_RUNNING || rec->state == SBX_STATE_PAUSED;
			sbx_record_free(rec);
			if (!up)
				break;
		}
	}
	return 0;
}

int cmd_logs(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "egress", no_argument, NULL, OPT_EGRESS },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool follow = false, egress = false, json = false;
	struct sbx_err err = { 0 };
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			return cmd_print_help("logs");
		case 'f':
			follow = true;
			break;
		case OPT_EGRESS:
			egress = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			return cmd_bad_option("logs", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("logs", "missing sandbox");
	if (optind + 2 < argc || (egress && optind + 1 < argc))
		return cmd_usage_error("logs", "unexpected argument '%s'", argv[argc - 1]);
	if (json && !egress)
		return cmd_usage_error("logs", "--json goes with --egress");
	if (optind + 1 < argc) {
		/* one exec's own log */
		fflush(stdout);
		if (sbx_sandbox_job_logs(ctx, argv[optind], argv[optind + 1], follow, &err) < 0)
			return cmd_report(&err);
		return 0;
	}
	if (egress)
		return egress_logs(ctx, argv[optind], json, follow);
	_cleanup_free_ char *path = NULL, *id = NULL;
	if (sbx_sandbox_log_path(ctx, argv[optind], &path, &id, &err) < 0)
		return cmd_report(&err);
	fflush(stdout);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		return cmd_error(SBX_E_IO, "cannot read '%s': %s", path, strerror(errno));
	}
	if (fd >= 0 && copy_out(fd) < 0)
		return errno == EPIPE ? 0 : 125;
	/* --follow: new output as it comes, until the sandbox stops or goes */
	for (int tick = 0; follow; tick++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && copy_out(fd) < 0)
			return errno == EPIPE ? 0 : 125;
		if (tick % 5 == 4) {
			struct sbx_record *rec;
			struct sbx_err e2 = { 0 };
			if (sbx_sandbox_get(ctx, id, &rec, &e2) < 0)
				break;
			bool running = rec->state == SBX_STATE_RUNNING;
			sbx_record_free(rec);
			if (!running) {
				if (fd >= 0)
					(void)copy_out(fd);
				break;
			}
		}
	}
	return 0;
}
