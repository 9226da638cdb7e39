/* sbx logs: print (and follow) the output of a sandbox's detached commands (exec -d). */
#define _GNU_SOURCE
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>

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

int cmd_logs(int argc, char **argv, struct sbx_ctx *ctx)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool follow = false;
	struct sbx_err err = { 0 };
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hf", opts, NULL)) != -1) {
		switch (c) {
		case 'h': return cmd_print_help("logs");
		case 'f': follow = true; break;
		default: return cmd_bad_option("logs", argc, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error("logs", "missing sandbox");
	if (optind + 1 < argc)
		return cmd_usage_error("logs", "unexpected argument '%s'", argv[optind + 1]);
	_cleanup_free_ char *path = NULL, *id = NULL;
	if (sbx_sandbox_log_path(ctx, argv[optind], &path, &id, &err) < 0)
		return cmd_report(&err);
	fflush(stdout);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		fprintf(stderr, "sbx: error: cannot read '%s': %s\n", path, strerror(errno));
		return 125;
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
