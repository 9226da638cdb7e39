/* sbx image build: a Dockerfile run into an image of the store, each RUN in a local sandbox. */
#ifndef SBX_CORE_BUILD_H
#define SBX_CORE_BUILD_H

#include <stdbool.h>
#include <stdio.h>

#include "core/options.h"

struct sbx_build_opts {
	const char *context;	/* the directory COPY and ADD read */
	const char *dockerfile; /* NULL: CONTEXT/Dockerfile */
	const char *tag;	/* NAME[:TAG] */
	char *const *args;	/* --build-arg "K=V" (or "K": its value from the environment) */
	const char *target;	/* the stage to end with; NULL: the last */
	const char *net;	/* --net MODE for RUN's sandboxes; NULL: create's default */
	bool no_cache;
	bool quiet;    /* no progress; a failing RUN's output only */
	bool terminal; /* progress for a terminal */
	FILE *out;     /* progress and RUN's output */
};

/* builds o->tag; *ret_id the image's id. A failing RUN: SBX_E_STATE "Dockerfile:LINE: RUN ...
 * failed with exit status N" */
int sbx_build(struct sbx_ctx *ctx, const struct sbx_build_opts *o, char **ret_id,
	      struct sbx_err *err);
/* what builds that ended without cleaning up left (their sandboxes, their unnamed images):
 * removed. Each build holds a lock on a file of images/builds/ while it runs */
void sbx_build_sweep(struct sbx_ctx *ctx);

#endif
