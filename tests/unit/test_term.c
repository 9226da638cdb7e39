/* Unit tests: text made terminal-safe (sbx_term_safe) and JSON output that is (sbx_json_dumps). */
#define _GNU_SOURCE
#include "core/json.h"
#include "core/util.h"
#include "tests/unit/harness.h"

static void check_safe(const char *in, size_t n, const char *want)
{
	char *got = sbx_term_safe_n(in, n);
	CHECK(streq(got, want), "term_safe: '%s', wanted '%s'", got, want);
	free(got);
}

void test_term(void)
{
	/* printable ASCII and UTF-8 stay as they are, the backslash too */
	check_safe("web-1 ok", 8, "web-1 ok");
	check_safe("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", 14,
		   "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
	check_safe("a\\x1b", 5, "a\\x1b");
	check_safe("\xc2\xa0\xc2\xbf", 4, "\xc2\xa0\xc2\xbf"); /* U+00A0, past the C1 range */
	/* C0 controls, DEL */
	check_safe("\x1b[31mred\x1b[0m", 12, "\\x1b[31mred\\x1b[0m");
	check_safe("a\nb\tc\rd", 7, "a\\nb\\tc\\rd");
	check_safe("\x07\x7f\x01", 3, "\\x07\\x7f\\x01");
	check_safe("a\0b", 3, "a\\x00b");
	/* C1 controls, encoded in UTF-8: both bytes shown */
	check_safe("\xc2\x9b"
		   "31m",
		   5, "\\xc2\\x9b31m");
	check_safe("\xc2\x80\xc2\x9f", 4, "\\xc2\\x80\\xc2\\x9f");
	/* not UTF-8: a raw C1 byte, a stray continuation, overlong forms, surrogates, past
	 * U+10FFFF, a cut sequence */
	check_safe("\x9b", 1, "\\x9b");
	check_safe("\x80x", 2, "\\x80x");
	check_safe("\xc0\xaf", 2, "\\xc0\\xaf");
	check_safe("\xe0\x80\xaf", 3, "\\xe0\\x80\\xaf");
	check_safe("\xed\xa0\x80", 3, "\\xed\\xa0\\x80");
	check_safe("\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80");
	check_safe("\xe6\x97", 2, "\\xe6\\x97");
	check_safe("\xff\xfe", 2, "\\xff\\xfe");
	char *s = sbx_term_safe("");
	CHECK(streq(s, ""), "term_safe of nothing");
	free(s);
	s = sbx_term_safe("ok\x1b]0;title\x07");
	CHECK(streq(s, "ok\\x1b]0;title\\x07"), "term_safe of a string: %s", s);
	free(s);

	CHECK(sbx_utf8_seq_len((const unsigned char *)"\xe6\x97\xa5", 3) == 3, "utf8 3 bytes");
	CHECK(sbx_utf8_seq_len((const unsigned char *)"\xe6\x97\xa5", 2) == 0, "utf8 cut short");
	CHECK(sbx_utf8_seq_len((const unsigned char *)"", 0) == 0, "utf8 of nothing");

	/* JSON output: printable ASCII whatever the strings hold, and the same document back */
	json_t *j = json_pack("{s:s, s:s}", "name", "caf\xc3\xa9\x7f\xc2\x9b\x1b", "k\x7f", "v");
	char *t = sbx_json_dump(j, false);
	CHECK(streq(t, "{\"k\\u007f\":\"v\",\"name\":\"caf\\u00E9\\u007f\\u009B\\u001B\"}"),
	      "json output: %s", t);
	json_t *back = json_loads(t, 0, NULL);
	CHECK(back && json_equal(j, back), "json output reads back");
	json_decref(back);
	free(t);
	json_decref(j);
	t = sbx_json_dumps(json_string("\x7f"), JSON_ENCODE_ANY);
	CHECK(streq(t, "\"\\u007f\""), "a DEL alone: %s", t);
	free(t);

	/* a time struct tm cannot hold is shown as the epoch, never from an unset struct */
	t = sbx_time_rfc3339(9223372036854775807LL);
	CHECK(streq(t, "1970-01-01T00:00:00Z"), "rfc3339 of a huge time: %s", t);
	free(t);
}
