/* Fuzzes the reader of a sandbox's /etc/passwd and /etc/group (exec -u): by name and by id,
 * every field it hands back is a string inside the line buffer or "". */
#define _GNU_SOURCE
#include "providers/local/local.h"
#include "tests/fuzz/fuzz.h"

static void check(const char *text, const char *name, long long id)
{
	char line[1024], *f[7];

	if (!local_user_entry(text, name, id, line, sizeof(line), f, 7))
		return;
	for (int i = 0; i < 7; i++) {
		FUZZ_CHECK(f[i] != NULL, "field %d unset", i);
		FUZZ_CHECK(!*f[i] || (f[i] >= line && f[i] < line + sizeof(line)),
			   "field %d outside the line", i);
		FUZZ_CHECK(strlen(f[i]) < sizeof(line), "field %d unterminated", i);
	}
	if (name)
		FUZZ_CHECK(streq(f[0], name), "found '%s' for '%s'", f[0], name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_str(data, size);
	/* the first line names what is looked for */
	char *nl = strchr(text, '\n');
	const char *name = "root";
	if (nl) {
		*nl = 0;
		name = text;
	}
	const char *body = nl ? nl + 1 : text;
	check(body, name, -1);
	check(body, NULL, 0);
	check(body, NULL, 1000);
	check(body, NULL, (long long)size);
	return 0;
}
