/* Unit tests: util parsing, strbuf, err, json helpers, lazy loading. */
#define _GNU_SOURCE
#include <errno.h>
#include <dlfcn.h>

#include "core/err.h"
#include "core/json.h"
#include "core/lazy.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "tests/unit/harness.h"

void test_util(void)
{
	long long v;

	CHECK(sbx_parse_int("42", 0, 100, &v) == 0 && v == 42, "parse_int 42");
	CHECK(sbx_parse_int("101", 0, 100, &v) < 0, "parse_int out of range");
	CHECK(sbx_parse_int("4x", 0, 100, &v) < 0, "parse_int junk");
	CHECK(sbx_parse_int("", 0, 100, &v) < 0, "parse_int empty");
	CHECK(sbx_parse_int(" 4", 0, 100, &v) < 0, "parse_int leading space");
	char *t = sbx_time_rfc3339(0);
	CHECK(streq(t, "1970-01-01T00:00:00Z"), "rfc3339 epoch: %s", t);
	free(t);
	t = sbx_time_rfc3339(1700000000);
	CHECK(streq(t, "2023-11-14T22:13:20Z"), "rfc3339: %s", t);
	free(t);

	static const char *const b64[][2] = { { "", "" },
					      { "f", "Zg==" },
					      { "fo", "Zm8=" },
					      { "foo", "Zm9v" },
					      { "user:pass", "dXNlcjpwYXNz" } };
	for (size_t i = 0; i < sizeof(b64) / sizeof(b64[0]); i++) {
		size_t n = 99;
		char *e = sbx_base64_encode(b64[i][0], strlen(b64[i][0]));
		char *d = sbx_base64_decode(b64[i][1], &n);
		CHECK(streq(e, b64[i][1]), "base64 of '%s': %s", b64[i][0], e);
		CHECK(d && n == strlen(b64[i][0]) && streq(d, b64[i][0]), "base64 '%s' decoded",
		      b64[i][1]);
		free(e);
		free(d);
	}
	size_t n;
	char *d = sbx_base64_decode("_-8", &n); /* URL-safe, unpadded: ff bf bf... */
	CHECK(d && n == 2 && (unsigned char)d[0] == 0xff && (unsigned char)d[1] == 0xef,
	      "URL-safe base64");
	free(d);
	CHECK(sbx_base64_decode("Zm9v!", &n) == NULL, "base64 with a stray character");
}

void test_options(void)
{
	CHECK(sbx_parse_duration_ms("30s") == 30000, "30s");
	CHECK(sbx_parse_duration_ms("10") == 10000, "10 = seconds");
	CHECK(sbx_parse_duration_ms("1.5s") == 1500, "1.5s");
	CHECK(sbx_parse_duration_ms("500ms") == 500, "500ms");
	CHECK(sbx_parse_duration_ms("5m") == 300000, "5m");
	CHECK(sbx_parse_duration_ms("2h") == 7200000, "2h");
	CHECK(sbx_parse_duration_ms("1d") == 86400000, "1d");
	CHECK(sbx_parse_duration_ms("-1s") < 0, "negative");
	CHECK(sbx_parse_duration_ms("5x") < 0, "bad unit");
	CHECK(sbx_parse_duration_ms("") < 0, "empty");
	CHECK(sbx_parse_duration_ms("s") < 0, "unit only");
	CHECK(sbx_parse_duration_ms("nan") < 0, "nan");
	CHECK(sbx_parse_bytes("256m") == 256LL << 20, "256m");
	CHECK(sbx_parse_bytes("1g") == 1LL << 30, "1g");
	CHECK(sbx_parse_bytes("1GB") == 1LL << 30, "1GB");
	CHECK(sbx_parse_bytes("1024") == 1024, "1024");
	CHECK(sbx_parse_bytes("10k") == 10240, "10k");
	CHECK(sbx_parse_bytes("1q") < 0, "bad unit");
	CHECK(sbx_parse_bytes("-5m") < 0, "negative");
}

void test_strbuf(void)
{
	struct strbuf sb = STRBUF_INIT;

	CHECK(streq(strbuf_str(&sb), ""), "empty strbuf is \"\"");
	strbuf_addstr(&sb, "hello");
	strbuf_addch(&sb, ' ');
	strbuf_addf(&sb, "%s %d", "world", 42);
	CHECK(streq(sb.buf, "hello world 42") && sb.len == 14, "strbuf content '%s'", sb.buf);
	for (int i = 0; i < 1000; i++)
		strbuf_addch(&sb, 'x');
	CHECK(sb.len == 1014 && sb.buf[1014] == 0, "strbuf grows");
	strbuf_reset(&sb);
	CHECK(sb.len == 0 && sb.buf[0] == 0, "strbuf reset");
	char *d = strbuf_detach(&sb);
	CHECK(d && sb.buf == NULL, "strbuf detach");
	free(d);
	strbuf_release(&sb);
}

void test_err(void)
{
	struct sbx_err err = { 0 };

	CHECK(sbx_err_set(&err, SBX_E_NOTFOUND, "no such sandbox: '%s'", "x") == -1, "set -1");
	CHECK(err.kind == SBX_E_NOTFOUND && streq(err.msg, "no such sandbox: 'x'"), "set msg");
	errno = ENOENT;
	sbx_err_errno(&err, "cannot open '%s'", "f");
	CHECK(err.kind == SBX_E_SYSTEM && err.errnum == ENOENT, "errno kind");
	CHECK(streq(err.msg, "cannot open 'f': No such file or directory"), "errno msg: %s",
	      err.msg);
	sbx_err_prefix(&err, "cannot create '%s'", "box");
	CHECK(startswith(err.msg, "cannot create 'box': cannot open 'f'"), "prefix: %s", err.msg);
	char big[2000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	sbx_err_set(&err, SBX_E_USAGE, "%s", big);
	CHECK(strlen(err.msg) == sizeof(err.msg) - 1, "message truncated, not overflowed");
}

void test_json(void)
{
	struct sbx_err err = { 0 };
	json_t *j = sbx_json_parse("{\"a\": \"x\", \"n\": 3}", 18, "test", &err);
	const char *s;

	CHECK(j != NULL, "parse ok");
	CHECK(sbx_json_get_str(j, "a", &s, &err) == 0 && streq(s, "x"), "get a");
	CHECK(sbx_json_get_str(j, "b", &s, &err) < 0 && strstr(err.msg, "'b'"),
	      "missing key named");
	CHECK(sbx_json_int(j, "n", 0) == 3, "int");
	CHECK(sbx_json_int(j, "a", 7) == 7, "int default on string");
	char *d = sbx_json_dump(j, false);
	CHECK(streq(d, "{\"a\":\"x\",\"n\":3}"), "sorted compact dump: %s", d);
	free(d);
	json_decref(j);
	j = sbx_json_parse("{\"a\": }", 7, "test", &err);
	CHECK(!j && strstr(err.msg, "line 1"), "parse error has position: %s", err.msg);
	j = sbx_json_parse("{\"a\":1,\"a\":2}", 13, "test", &err);
	CHECK(!j, "duplicate keys rejected");
}

void test_lazy(void)
{
	struct sbx_err err = { 0 };
	static const char *const names[] = { "archive_version_string" };
	void *fns[1];

	CHECK(!sbx_lazy_loaded(&sbx_lazy_archive), "libarchive not loaded at start");
	if (sbx_lazy_load(&sbx_lazy_archive, names, fns, 1, &err) < 0) {
		CHECK(0, "lazy load libarchive: %s", err.msg);
		return;
	}
	const char *(*ver)(void) = (const char *(*)(void))fns[0];
	CHECK(startswith(ver(), "libarchive "), "libarchive answers: %s", ver());
	CHECK(sbx_lazy_loaded(&sbx_lazy_archive), "libarchive loaded after use");
	struct sbx_lazy_lib bogus = { "libsbx-does-not-exist.so.1", "none", NULL };
	CHECK(sbx_lazy_load(&bogus, names, fns, 1, &err) < 0 && strstr(err.msg, "install"),
	      "missing library: %s", err.msg);
}
