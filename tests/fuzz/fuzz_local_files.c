/* Fuzzes what the local provider reads back from a sandbox's directory: the pids file
 * (local_read_pids), previews.json (preview's list, inspect) and the cgroups list (inspect).
 * The input is the three files, separated by lines "----". */
#define _GNU_SOURCE
#include "core/json.h"
#include "core/proc.h"
#include "core/store.h"
#include "providers/local/local.h"
#include "tests/fuzz/fuzz.h"

static const char *const files[] = { "pids", "previews.json", "cgroups" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *part[3];
	size_t len[3];
	size_t n = fuzz_split(data, size, part, len, 3);
	const char *dir = fuzz_dir();

	for (size_t i = 0; i < 3; i++)
		fuzz_file(dir, files[i], i < n ? part[i] : NULL, i < n ? len[i] : 0);

	struct local_pids pids = { 0 };
	if (local_read_pids(dir, &pids) == 0) {
		/* a pid the file names is only ever used after sbx_proc_alive said yes */
		if (pids.init_pid <= 0)
			FUZZ_CHECK(!sbx_proc_alive(pids.init_pid, pids.init_start), "pid %d alive",
				   (int)pids.init_pid);
	}

	struct sbx_record *rec = sbx_record_new();
	rec->id = xstrdup("0123456789ab");
	rec->provider = xstrdup("local");
	rec->state = SBX_STATE_STOPPED;
	rec->dir = xstrdup(dir);
	struct sbx_err err = { 0 };

	/* sbx inspect: pids, cgroups and previews into rec->live */
	FUZZ_CHECK(sbx_provider_local.inspect(NULL, rec, &err) == 0, "inspect: %s", err.msg);
	FUZZ_CHECK(json_is_array(json_object_get(rec->live, "previews")), "no previews list");
	char *t = sbx_json_dump(rec->live, true);
	FUZZ_CHECK(!fuzz_term_unsafe(t), "inspect prints %s", fuzz_term_unsafe(t));
	free(t);

	/* sbx preview SB: the list */
	struct sbx_preview_opts po = { 0 };
	json_t *list = NULL;
	FUZZ_CHECK(local_preview(NULL, rec, &po, &list, &err) == 0, "preview list: %s", err.msg);
	FUZZ_CHECK(json_is_array(list), "the list is not an array");
	size_t i;
	json_t *v;
	json_array_foreach (list, i, v) {
		const char *url = sbx_json_str(v, "url");
		char *safe = sbx_term_safe(url ? url : "");
		FUZZ_CHECK(!fuzz_term_unsafe(safe) && !strchr(safe, '\n'), "url shown with %s",
			   fuzz_term_unsafe(safe));
		free(safe);
	}
	t = sbx_json_dump(list, false);
	FUZZ_CHECK(!fuzz_term_unsafe(t), "preview --json prints %s", fuzz_term_unsafe(t));
	free(t);
	json_decref(list);
	sbx_record_free(rec);
	return 0;
}
