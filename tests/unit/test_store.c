/* Unit tests: ids, names, records, prefix resolution, atomic writes, corrupt records. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/store.h"
#include "tests/unit/harness.h"

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static struct sbx_record *mkrec(const char *id, const char *name)
{
	struct sbx_record *r = sbx_record_new();
	r->id = xstrdup(id);
	r->name = name ? xstrdup(name) : NULL;
	r->provider = xstrdup("local");
	r->state = SBX_STATE_RUNNING;
	r->created = 1700000000;
	return r;
}

void test_store(void)
{
	char tmpl[] = "/tmp/sbx-unit-XXXXXX";
	char *root = mkdtemp(tmpl);
	struct sbx_store st = { 0 };
	struct sbx_err err = { 0 };
	char id[SBX_ID_LEN + 1];

	CHECK(root != NULL, "mkdtemp");
	CHECK(sbx_id_valid("0123456789ab"), "valid id");
	CHECK(!sbx_id_valid("0123456789AB"), "upper-case id invalid");
	CHECK(!sbx_id_valid("0123456789a"), "short id invalid");
	CHECK(!sbx_id_valid("0123456789abc"), "long id invalid");
	CHECK(sbx_id_generate(id, &err) == 0 && sbx_id_valid(id), "generated id valid: %s", id);
	char id2[SBX_ID_LEN + 1];
	sbx_id_generate(id2, &err);
	CHECK(!streq(id, id2), "two ids differ");

	CHECK(sbx_name_valid("web"), "name web");
	CHECK(sbx_name_valid("a.b-c_d9"), "name with punctuation");
	CHECK(!sbx_name_valid("-web"), "leading dash");
	CHECK(!sbx_name_valid(".web"), "leading dot");
	CHECK(!sbx_name_valid("we b"), "space");
	CHECK(!sbx_name_valid("a/b"), "slash");
	CHECK(!sbx_name_valid(""), "empty");
	char longname[80];
	memset(longname, 'a', 63);
	longname[63] = 0;
	CHECK(sbx_name_valid(longname), "63 characters");
	longname[63] = 'a';
	longname[64] = 0;
	CHECK(!sbx_name_valid(longname), "64 characters");

	CHECK(sbx_state_parse("paused") == SBX_STATE_PAUSED, "state parse");
	CHECK(streq(sbx_state_name(SBX_STATE_STOPPED), "stopped"), "state name");
	CHECK(sbx_state_parse("bogus") == SBX_STATE_UNKNOWN, "unknown state");

	setenv("SBX_HOME", root, 1);
	CHECK(sbx_store_open(&st, true, &err) == 0, "store open: %s", err.msg);
	char *p = xasprintf("%s/sandboxes", root);
	struct stat sb;
	CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0700, "sandboxes dir is 0700");
	free(p);

	char *a = NULL, *b = NULL, *c = NULL;
	CHECK(sbx_store_claim(&st, "web", &a, &err) == 0, "claim web");
	CHECK(sbx_store_claim(&st, "web", &b, &err) < 0 && err.kind == SBX_E_EXISTS,
	      "duplicate name refused: %s", err.msg);
	b = NULL;
	CHECK(sbx_store_claim(&st, NULL, &b, &err) == 0, "claim unnamed");
	struct sbx_record *r = mkrec(a, "web");
	CHECK(sbx_store_save(&st, r, true, &err) == 0, "save");
	sbx_record_free(r);
	r = NULL;
	CHECK(sbx_store_load(&st, a, &r, &err) == 0 && streq(r->name, "web") &&
		      r->state == SBX_STATE_RUNNING && r->created == 1700000000,
	      "load round trip");
	sbx_record_free(r);
	p = xasprintf("%s/sandboxes/%s/sandbox.json.tmp.%d", root, a, (int)getpid());
	CHECK(access(p, F_OK) < 0, "no temp file left");
	free(p);

	char *got = NULL;
	CHECK(sbx_store_resolve(&st, "web", &got, &err) == 0 && streq(got, a), "resolve name");
	free(got);
	CHECK(sbx_store_resolve(&st, a, &got, &err) == 0 && streq(got, a), "resolve id");
	free(got);
	char pre[5];
	memcpy(pre, a, 4);
	pre[4] = 0;
	if (strncmp(a, b, 4) != 0) {
		CHECK(sbx_store_resolve(&st, pre, &got, &err) == 0 && streq(got, a),
		      "resolve prefix");
		free(got);
	}
	CHECK(sbx_store_resolve(&st, "nope", &got, &err) < 0 && err.kind == SBX_E_NOTFOUND,
	      "unknown: %s", err.msg);

	/* ambiguous prefix: two ids sharing a first character, made by hand */
	p = xasprintf("%s/sandboxes/aaaaaaaaaaa1", root);
	mkdir(p, 0700);
	free(p);
	p = xasprintf("%s/sandboxes/aaaaaaaaaaa2", root);
	mkdir(p, 0700);
	free(p);
	CHECK(sbx_store_resolve(&st, "aaa", &got, &err) < 0 && err.kind == SBX_E_USAGE &&
		      strstr(err.msg, "aaaaaaaaaaa1") && strstr(err.msg, "aaaaaaaaaaa2"),
	      "ambiguous lists matches: %s", err.msg);
	CHECK(sbx_store_resolve(&st, "aaaaaaaaaaa1", &got, &err) == 0, "exact id beats prefix");
	free(got);

	/* a corrupt record is an error naming the file, never a crash */
	p = xasprintf("%s/sandboxes/aaaaaaaaaaa1/sandbox.json", root);
	put(p, "{ not json");
	CHECK(sbx_store_load(&st, "aaaaaaaaaaa1", &r, &err) < 0 && strstr(err.msg, p),
	      "corrupt record: %s", err.msg);
	put(p, "{\"version\": 1, \"id\": \"bbbbbbbbbbbb\", \"provider\": \"local\"}");
	CHECK(sbx_store_load(&st, "aaaaaaaaaaa1", &r, &err) < 0, "id mismatch refused");
	put(p, "[1,2,3]");
	CHECK(sbx_store_load(&st, "aaaaaaaaaaa1", &r, &err) < 0, "non-object refused");
	free(p);

	char **ids;
	size_t n;
	CHECK(sbx_store_list_ids(&st, &ids, &n, &err) == 0 && n == 4, "list ids: %zu", n);
	sbx_strv_free(ids);

	/* removal drops the name, and the name is free again */
	CHECK(sbx_store_remove(&st, a, "web", &err) == 0, "remove");
	CHECK(sbx_store_resolve(&st, "web", &got, &err) < 0, "name gone after remove");
	CHECK(sbx_store_claim(&st, "web", &c, &err) == 0, "name reusable");
	/* a stale name link (its directory gone) does not block a new claim */
	p = xasprintf("%s/sandboxes/%s", root, c);
	char *lockp = xasprintf("%s/lock", p);
	unlink(lockp);
	rmdir(p);
	free(lockp);
	free(p);
	char *d = NULL;
	CHECK(sbx_store_claim(&st, "web", &d, &err) == 0, "stale name link replaced: %s", err.msg);

	int fd = sbx_store_lock(&st, d, true, &err);
	CHECK(fd >= 0, "lock");
	if (fd >= 0)
		close(fd);
	CHECK(sbx_store_lock(&st, "cccccccccccc", true, &err) < 0 && err.kind == SBX_E_NOTFOUND,
	      "lock of a missing sandbox");

	free(a);
	free(b);
	free(c);
	free(d);
	sbx_store_release(&st);
	sbx_rm_rf(root);
	CHECK(access(root, F_OK) < 0, "rm_rf removed the tree");
}
