/* Thin jansson helpers: typed getters that name the missing key, stable dumps. */
#ifndef SBX_CORE_JSON_H
#define SBX_CORE_JSON_H

#include <jansson.h>

#include "core/err.h"

static inline void sbx_json_decrefp(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define _cleanup_json_ _cleanup_(sbx_json_decrefp)

/* parse a document; on failure err says where (line:column) */
json_t *sbx_json_parse(const char *text, size_t len, const char *what, struct sbx_err *err);
/* string member or NULL (no error) */
const char *sbx_json_str(const json_t *obj, const char *key);
/* string member, error naming the key when absent or not a string */
int sbx_json_get_str(const json_t *obj, const char *key, const char **ret, struct sbx_err *err);
long long sbx_json_int(const json_t *obj, const char *key, long long dflt);
/* the strings of an array (other members skipped), NULL-terminated, malloc'd; NULL when a is
 * no array */
char **sbx_json_strv(const json_t *a);
/* sorted keys, 2-space indent (or compact); terminal-safe as sbx_json_dumps; caller frees */
char *sbx_json_dump(const json_t *j, bool pretty);
/* json_dumps (any value) with FLAGS, plus what makes the text safe on a terminal whatever its
 * strings hold: JSON_ENSURE_ASCII (C1 controls and all non-ASCII become \uXXXX) and DEL as
 * \u007f, which jansson leaves raw; caller frees, "null" when j cannot be encoded */
char *sbx_json_dumps(const json_t *j, size_t flags);

#endif
