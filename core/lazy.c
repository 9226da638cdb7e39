/* Lazy loading of the heavy libraries: dlopen by soname, dlsym into function tables. */
#define _GNU_SOURCE
#include "core/lazy.h"

#include <dlfcn.h>

#include "core/log.h"

struct sbx_lazy_lib sbx_lazy_archive = { "libarchive.so.13", "libarchive13", NULL };
struct sbx_lazy_lib sbx_lazy_curl = { "libcurl.so.4", "libcurl4", NULL };
struct sbx_lazy_lib sbx_lazy_ssl = { "libssl.so.3", "libssl3", NULL };

int sbx_lazy_load(struct sbx_lazy_lib *lib, const char *const *names, void **ret_fns, size_t n,
		  struct sbx_err *err)
{
	if (!lib->handle) {
		lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
		if (!lib->handle)
			return sbx_err_set(err, SBX_E_CONFIG,
					   "cannot load %s (install the Debian package %s): %s",
					   lib->soname, lib->package, dlerror());
		sbx_debug("loaded %s", lib->soname);
	}
	for (size_t i = 0; i < n; i++) {
		void *f = dlsym(lib->handle, names[i]);
		if (!f)
			return sbx_err_set(err, SBX_E_CONFIG, "%s has no symbol '%s' (too old?)",
					   lib->soname, names[i]);
		ret_fns[i] = f;
	}
	return 0;
}

bool sbx_lazy_loaded(const struct sbx_lazy_lib *lib)
{
	return lib->handle != NULL;
}
