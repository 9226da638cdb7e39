/* jansson helpers. */
#include "core/json.h"

json_t *sbx_json_parse(const char *text, size_t len, const char *what, struct sbx_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);

	if (!j) {
		sbx_err_set(err, SBX_E_CONFIG, "cannot parse %s: %s at line %d column %d", what,
			    je.text, je.line, je.column);
		return NULL;
	}
	return j;
}

const char *sbx_json_str(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int sbx_json_get_str(const json_t *obj, const char *key, const char **ret, struct sbx_err *err)
{
	const char *s = sbx_json_str(obj, key);

	if (!s)
		return sbx_err_set(err, SBX_E_CONFIG, "missing or non-string key '%s'", key);
	*ret = s;
	return 0;
}

long long sbx_json_int(const json_t *obj, const char *key, long long dflt)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

char *sbx_json_dumps(const json_t *j, size_t flags)
{
	char *s = json_dumps(j, flags | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	size_t n = 0, dels = 0;

	if (!s)
		return xstrdup("null");
	for (; s[n]; n++)
		dels += s[n] == 0x7f;
	if (!dels)
		return s;
	/* a raw DEL can only be inside a string: its escape keeps the JSON the same */
	char *out = xmalloc(n + 5 * dels + 1), *o = out;
	for (const char *p = s; *p; p++) {
		if (*p == 0x7f) {
			memcpy(o, "\\u007f", 6);
			o += 6;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
	free(s);
	return out;
}

char *sbx_json_dump(const json_t *j, bool pretty)
{
	return sbx_json_dumps(j, JSON_SORT_KEYS | (pretty ? JSON_INDENT(2) : JSON_COMPACT));
}

char **sbx_json_strv(const json_t *a)
{
	size_t i, n = 0;
	json_t *v;

	if (!json_is_array(a))
		return NULL;
	char **r = xcalloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach (a, i, v)
		if (json_is_string(v))
			r[n++] = xstrdup(json_string_value(v));
	return r;
}
