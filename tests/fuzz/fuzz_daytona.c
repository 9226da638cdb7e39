/* Fuzzes what sbx makes of Daytona's JSON answers (and a hosted provider's error bodies): the
 * first input byte picks the answer (a sandbox, a page of the list, a command's result, a
 * preview URL, an error body), the rest is its body. */
#define _GNU_SOURCE
#include "core/json.h"
#include "core/store.h"
#include "providers/remote-decode.h"
#include "tests/fuzz/fuzz.h"

static void sandbox(const json_t *j)
{
	struct sbx_record *rec = sbx_record_new();

	rec->id = xstrdup("0123456789ab");
	rec->provider = xstrdup("daytona");
	rec->provider_id = xstrdup("dt-1");
	daytona_decode_sandbox(rec, j);
	FUZZ_CHECK(rec->state >= SBX_STATE_UNKNOWN && rec->state <= SBX_STATE_MISSING, "state %d",
		   rec->state);
	FUZZ_CHECK(!rec->state_reason || startswith(rec->state_reason, "Daytona: "), "reason");
	FUZZ_CHECK(json_is_object(json_object_get(rec->live, "remote")), "live");
	/* inspect and ls print it */
	json_t *view = sbx_record_to_json(rec);
	json_object_update(view, rec->live);
	char *t = sbx_json_dump(view, true);
	FUZZ_CHECK(!fuzz_term_unsafe(t), "inspect prints %s", fuzz_term_unsafe(t));
	free(t);
	json_decref(view);
	sbx_record_free(rec);
}

static void list(const json_t *j)
{
	json_t *all = json_object();
	char *cursor = NULL;
	struct sbx_err err = { 0 };
	const char *k;
	json_t *v;

	if (daytona_decode_list(j, all, &cursor, &err) == 0) {
		json_object_foreach (all, k, v)
			FUZZ_CHECK(json_is_integer(v) &&
					   json_integer_value(v) >= SBX_STATE_UNKNOWN &&
					   json_integer_value(v) <= SBX_STATE_MISSING,
				   "state of '%s'", k);
		FUZZ_CHECK(!cursor || *cursor, "an empty cursor");
	} else {
		FUZZ_CHECK(err.msg[0] && !cursor, "an error without a message");
	}
	free(cursor);
	json_decref(all);
}

static void exec_result(const json_t *j)
{
	struct strbuf out = STRBUF_INIT, errs = STRBUF_INIT;
	struct sbx_err err = { 0 };
	int status = -1;

	if (daytona_decode_exec(j, &out, &errs, &status, &err) == 0)
		FUZZ_CHECK(status >= 0 && status <= 255, "status %d", status);
	else
		FUZZ_CHECK(err.msg[0] && !out.len && !errs.len, "an error, and output");
	strbuf_release(&out);
	strbuf_release(&errs);
}

static void preview(const json_t *j)
{
	json_t *p = NULL;
	struct sbx_err err = { 0 };

	if (daytona_decode_preview(j, 3000, &p, &err) < 0) {
		FUZZ_CHECK(err.msg[0] && !p, "an error without a message");
		return;
	}
	/* preview SB PORT prints the URL as it is */
	const char *u = sbx_json_str(p, "url");
	FUZZ_CHECK(u && *u && !fuzz_term_unsafe(u) && !strpbrk(u, " \n"), "url '%s'", u);
	char *t = sbx_json_dump(p, true);
	FUZZ_CHECK(!fuzz_term_unsafe(t), "preview --json prints %s", fuzz_term_unsafe(t));
	free(t);
	json_decref(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned which = data[0] % 5;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;

	if (which == 4) {
		/* an error body, in a message cmd_report prints */
		struct strbuf b = STRBUF_INIT;
		strbuf_add(&b, body, n);
		char *m = remote_error_message(&b);
		FUZZ_CHECK(strlen(m) <= 203, "a message of %zu bytes", strlen(m));
		for (const char *c = m; *c; c++)
			FUZZ_CHECK((unsigned char)*c >= ' ' && *c != 0x7f, "a control byte");
		struct remote r = { .label = "Daytona", .key_var = "DAYTONA_API_KEY" };
		struct sbx_err err = { 0 };
		(void)remote_status_error(&r, "look up the sandbox", 400 + data[0] % 200, &b, &err);
		char *line = sbx_term_safe(err.msg);
		FUZZ_CHECK(!fuzz_term_unsafe(line) && !strchr(line, '\n'), "error shown with %s",
			   fuzz_term_unsafe(line));
		free(line);
		free(m);
		strbuf_release(&b);
		return 0;
	}
	/* as remote_do hands an answer over */
	json_error_t je;
	json_t *j = json_loadb(body, n, 0, &je);
	if (!j)
		return 0;
	switch (which) {
	case 0:
		sandbox(j);
		break;
	case 1:
		list(j);
		break;
	case 2:
		exec_result(j);
		break;
	case 3:
		preview(j);
		break;
	}
	json_decref(j);
	return 0;
}
