/* sbx exec --json: capturing a command's output and printing its result as one JSON object. */
#ifndef SBX_CMD_EXEC_JSON_H
#define SBX_CMD_EXEC_JSON_H

#include "cmd/cmd.h"

#include <stdint.h>

/* --max-output's default, per stream, and the most it may be */
#define EXEC_JSON_DEFAULT_CAP (1LL << 20)
#define EXEC_JSON_MAX_CAP (64LL << 20)

struct exec_capture {
	int out_w, err_w;  /* the command's stdout and stderr, for a provider that writes there */
	int rd[2];	   /* their read ends, until a collector takes them */
	int mfd[2];	   /* what was kept of each */
	uint64_t taken[2]; /* the bytes take() was given */
	int ctl_w;	   /* closed: the command ended */
	int res_r;	   /* the collector's counts */
	pid_t pid;	   /* the collector, once r->begin started it */
	size_t cap;
};

/* the buffers and pipes, and in r how a provider hands over the output: take() (no process
 * more), or out_fd and err_fd once begin() started a collector process */
int exec_capture_start(struct exec_capture *c, struct sbx_exec_result *r, size_t cap,
		       struct sbx_err *err);
/* after the command: ends the collector, prints the result object on stdout */
int exec_capture_print(struct exec_capture *c, int status, const struct sbx_exec_result *r,
		       double duration_ms, struct sbx_err *err);
/* after a failure: ends the collector, drops what it kept */
void exec_capture_abort(struct exec_capture *c);
/* a monotonic clock, in milliseconds */
double exec_now_ms(void);

#endif
