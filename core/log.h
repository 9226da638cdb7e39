/* Diagnostics on stderr: debug (only with --debug / SBX_DEBUG=1) and warnings. */
#ifndef SBX_CORE_LOG_H
#define SBX_CORE_LOG_H

#include "core/util.h"

extern int sbx_debug_enabled;
/* one line each, rendered with sbx_term_safe: a message may carry text a sandbox or a provider
 * chose (a file name, an HTTP error body) */
_printf_(1, 2) void sbx_debug(const char *fmt, ...);
_printf_(1, 2) void sbx_warn(const char *fmt, ...);

#endif
