/* Fuzzes the decoding of a sandbox record (sandbox.json, read back on every command): whatever
 * decodes re-encodes, and decodes again to the same record. */
#define _GNU_SOURCE
#include "core/json.h"
#include "core/store.h"
#include "tests/fuzz/fuzz.h"

static bool str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && streq(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_err err = { 0 };
	struct sbx_record *rec = NULL, *again = NULL;

	if (sbx_record_parse((const char *)data, size, "sandbox.json", &rec, &err) < 0) {
		FUZZ_CHECK(err.msg[0] && err.kind != SBX_E_NONE, "an error without a message");
		return 0;
	}
	FUZZ_CHECK(sbx_id_valid(rec->id), "id '%s'", rec->id);
	FUZZ_CHECK(rec->provider != NULL, "provider missing");

	/* what sbx_store_save writes, read back */
	json_t *j = sbx_record_to_json(rec);
	char *text = sbx_json_dump(j, true);
	json_decref(j);
	FUZZ_CHECK(!fuzz_term_unsafe(text), "the stored record holds %s", fuzz_term_unsafe(text));
	int r = sbx_record_parse(text, strlen(text), "again", &again, &err);
	FUZZ_CHECK(r == 0, "a saved record does not decode: %s\n%s", err.msg, text);
	FUZZ_CHECK(streq(rec->id, again->id), "id");
	FUZZ_CHECK(str_same(rec->name, again->name), "name");
	FUZZ_CHECK(streq(rec->provider, again->provider), "provider");
	FUZZ_CHECK(str_same(rec->provider_id, again->provider_id), "provider_id");
	FUZZ_CHECK(rec->state == again->state, "state %d, then %d", rec->state, again->state);
	FUZZ_CHECK(str_same(rec->state_reason, again->state_reason), "state_reason");
	FUZZ_CHECK(rec->created == again->created, "created %lld, then %lld", rec->created,
		   again->created);
	/* the typed configuration: decoded, encoded, decoded again, the same */
	json_t *o1 = sbx_config_to_json(&rec->config), *o2 = sbx_config_to_json(&again->config);
	FUZZ_CHECK(json_equal(o1, o2), "options");
	json_decref(o1);
	json_decref(o2);
	FUZZ_CHECK((!rec->extra && !again->extra) || json_equal(rec->extra, again->extra), "extra");

	/* what ls shows of it */
	char *name = sbx_term_safe(rec->name ? rec->name : "-");
	char *prov = sbx_term_safe(rec->provider);
	FUZZ_CHECK(!fuzz_term_unsafe(name) && !strchr(name, '\n'), "name shown with %s",
		   fuzz_term_unsafe(name));
	FUZZ_CHECK(!fuzz_term_unsafe(prov) && !strchr(prov, '\n'), "provider shown with %s",
		   fuzz_term_unsafe(prov));
	free(name);
	free(prov);
	free(text);
	sbx_record_free(again);
	sbx_record_free(rec);
	return 0;
}
