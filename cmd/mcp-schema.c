/* sbx mcp: checks a tool call's arguments against the tool's inputSchema (the subset of JSON
 * Schema those schemas use), so that a verb only ever sees arguments of the right shapes. */
#define _GNU_SOURCE
#include "cmd/mcp.h"

static bool type_is(const char *type, const json_t *v)
{
	if (streq(type, "string"))
		return json_is_string(v);
	if (streq(type, "integer"))
		return json_is_integer(v);
	if (streq(type, "number"))
		return json_is_number(v);
	if (streq(type, "boolean"))
		return json_is_boolean(v);
	if (streq(type, "array"))
		return json_is_array(v);
	if (streq(type, "object"))
		return json_is_object(v);
	if (streq(type, "null"))
		return json_is_null(v);
	return false;
}

static int bad(char **msg, const char *where, const char *what)
{
	*msg = xasprintf("invalid params: %s %s", where, what);
	return -1;
}

/* the patterns of the schemas: octal modes, "^[0-7]{3,4}$" */
static bool pattern_ok(const char *pattern, const char *s)
{
	if (!streq(pattern, "^[0-7]{3,4}$"))
		return true;
	size_t n = strlen(s);
	return (n == 3 || n == 4) && strspn(s, "01234567") == n;
}

int mcp_schema_check(const json_t *schema, const json_t *v, const char *where, char **msg)
{
	json_t *type = json_object_get(schema, "type"), *x;

	if (json_is_string(type) && !type_is(json_string_value(type), v))
		return bad(msg, where, "has the wrong type");
	if (json_is_array(type)) {
		bool any = false;
		size_t i;
		json_array_foreach (type, i, x)
			any = any || type_is(json_string_value(x) ?: "", v);
		if (!any)
			return bad(msg, where, "has the wrong type");
	}
	if ((x = json_object_get(schema, "enum"))) {
		bool any = false;
		size_t i;
		json_t *e;
		json_array_foreach (x, i, e)
			any = any || json_equal(e, v);
		if (!any)
			return bad(msg, where, "is not one of the allowed values");
	}
	if ((x = json_object_get(schema, "anyOf"))) {
		size_t i;
		json_t *alt;
		bool any = false;
		json_array_foreach (x, i, alt) {
			char *m = NULL;
			if (mcp_schema_check(alt, v, where, &m) == 0)
				any = true;
			free(m);
			if (any)
				break;
		}
		if (!any)
			return bad(msg, where, "matches none of the allowed forms");
	}
	if (json_is_string(v)) {
		if ((x = json_object_get(schema, "minLength")) &&
		    json_string_length(v) < (size_t)json_integer_value(x))
			return bad(msg, where, "is too short");
		if ((x = json_object_get(schema, "pattern")) &&
		    !pattern_ok(json_string_value(x), json_string_value(v)))
			return bad(msg, where, "does not match its pattern");
	}
	if (json_is_number(v)) {
		double d = json_number_value(v);
		if ((x = json_object_get(schema, "minimum")) && d < json_number_value(x))
			return bad(msg, where, "is too small");
		if ((x = json_object_get(schema, "exclusiveMinimum")) && d <= json_number_value(x))
			return bad(msg, where, "is too small");
		if ((x = json_object_get(schema, "maximum")) && d > json_number_value(x))
			return bad(msg, where, "is too large");
	}
	if (json_is_array(v)) {
		json_t *items = json_object_get(schema, "items"), *e;
		size_t i;
		if ((x = json_object_get(schema, "minItems")) &&
		    json_array_size(v) < (size_t)json_integer_value(x))
			return bad(msg, where, "has too few items");
		json_array_foreach (v, i, e) {
			_cleanup_free_ char *w = xasprintf("%s[%zu]", where, i);
			if (items && mcp_schema_check(items, e, w, msg) < 0)
				return -1;
		}
	}
	if (json_is_object(v)) {
		json_t *props = json_object_get(schema, "properties");
		json_t *extra = json_object_get(schema, "additionalProperties"), *e;
		const char *k;
		size_t i;
		json_array_foreach (json_object_get(schema, "required"), i, e)
			if (!json_object_get(v, json_string_value(e) ?: "")) {
				_cleanup_free_ char *w = xasprintf("%s: '%s'", where,
								   json_string_value(e) ?: "");
				return bad(msg, w, "is missing");
			}
		json_object_foreach ((json_t *)v, k, e) {
			_cleanup_free_ char *safe = mcp_utf8_clean(k, strlen(k), NULL);
			_cleanup_free_ char *w = xasprintf("%s.%.100s", where, safe);
			json_t *sub = json_object_get(props, k);
			if (!sub && json_is_false(extra))
				return bad(msg, w, "is not a parameter of this tool");
			if (!sub && json_is_object(extra))
				sub = extra;
			if (sub && mcp_schema_check(sub, e, w, msg) < 0)
				return -1;
		}
	}
	return 0;
}
