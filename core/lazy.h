/* dlopen of libcurl and libarchive on first use: start-up time is a feature (DESIGN.md §2). */
#ifndef SBX_CORE_LAZY_H
#define SBX_CORE_LAZY_H

#include "core/err.h"

/* a library reached by soname and the symbols resolved from it */
struct sbx_lazy_lib {
	const char *soname;  /* "libarchive.so.13" */
	const char *package; /* Debian package that ships it, for the error message */
	void *handle;
};

extern struct sbx_lazy_lib sbx_lazy_archive;
extern struct sbx_lazy_lib sbx_lazy_curl;
extern struct sbx_lazy_lib sbx_lazy_crypto; /* core/digest.c */
extern struct sbx_lazy_lib sbx_lazy_ssl;    /* --secret (providers/local/tls.c) */

/* loads lib (once) and resolves each name into the matching slot of ret_fns */
int sbx_lazy_load(struct sbx_lazy_lib *lib, const char *const *names, void **ret_fns, size_t n,
		  struct sbx_err *err);
/* whether lib is loaded in this process (for tests and --debug) */
bool sbx_lazy_loaded(const struct sbx_lazy_lib *lib);

#endif
