/* Unit tests: --net parsing and matching, the addresses the egress proxy refuses, and the
 * framing of the HTTP messages it keeps connections alive across. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdlib.h>

#include "core/net.h"
#include "core/util.h"
#include "providers/local/local.h"
#include "providers/local/net.h"
#include "tests/unit/harness.h"

static const char *why(const char *addr)
{
	static struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &a->sin6_addr);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &a->sin_addr);
	}
	return local_net_forbidden((struct sockaddr *)&ss);
}

/* the flags, parsed one by one as create does, then checked together */
static int validate(const char *net, char **hosts, char **ports)
{
	struct sbx_config c;
	char msg[300];
	int r = 0;

	sbx_config_init(&c);
	if (net)
		r = sbx_net_parse_mode(net, &c.net, msg, sizeof(msg));
	for (char **h = hosts; r == 0 && h && *h; h++)
		r = sbx_net_add_host_arg(&c.net, *h, msg, sizeof(msg));
	for (char **p = ports; r == 0 && p && *p; p++)
		r = sbx_net_host_port_arg(&c.net, *p, msg, sizeof(msg));
	if (r == 0)
		r = sbx_config_validate(&c, msg, sizeof(msg));
	sbx_config_release(&c);
	return r;
}

/* --net-rate: the parser, the flag's replacing, the stored form; sbx update's net flags */
static void test_rate(void)
{
	struct sbx_net_rate r;
	struct sbx_config c, d;
	struct sbx_err err = { 0 };
	char msg[300];

	CHECK(sbx_net_parse_rate("50r/s,10MiB/s", &r) == 0 && !r.pattern && r.reqs == 50 &&
		      r.per_s == 1 && r.bytes == 10 << 20,
	      "requests and bytes for the sandbox");
	CHECK(sbx_net_parse_rate("Registry.npmjs.org=20r/m", &r) == 0 && r.pattern &&
		      streq(r.pattern, "registry.npmjs.org") && r.reqs == 20 && r.per_s == 60 &&
		      r.bytes == 0,
	      "a domain's request limit, lowercased");
	free(r.pattern);
	CHECK(sbx_net_parse_rate("*.x.test=512k/s", &r) == 0 && streq(r.pattern, "*.x.test") &&
		      r.reqs == 0 && r.bytes == 512 * 1024,
	      "a wildcard's byte limit");
	free(r.pattern);
	CHECK(sbx_net_parse_rate("100r/h", &r) == 0 && r.per_s == 3600, "per hour");
	CHECK(sbx_net_parse_rate("none", &r) == 0 && !r.reqs && !r.bytes, "none");
	CHECK(sbx_net_parse_rate("a.test=none", &r) == 0 && !r.reqs && r.pattern,
	      "a domain's none");
	free(r.pattern);
	const char *bad[] = {
		"",	     "5x/s",	       "0r/s",	     "50r/s,",	 "50r/s,60r/s",
		"1m/s,2m/s", "a.test:80=5r/s", "=5r/s",	     "5r/s,abc", "a..b=5r/s",
		"5r/d",	     "-1r/s",	       "1000001r/s", "0/s",	 "r/s"
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(sbx_net_parse_rate(bad[i], &r) < 0 && !r.pattern, "refused: '%s'", bad[i]);

	sbx_config_init(&c);
	CHECK(sbx_net_rate_arg(&c.net, "5r/s", msg, sizeof(msg)) == 0 &&
		      sbx_net_rate_arg(&c.net, "a.test=2r/m,1m/s", msg, sizeof(msg)) == 0 &&
		      sbx_net_rate_arg(&c.net, "9r/s", msg, sizeof(msg)) == 0 && c.net.n_rates == 2,
	      "a limit replaces the one of its domain");
	char *t = sbx_net_rate_text(&c.net.rates[1]);
	CHECK(streq(t, "9r/s"), "text of the sandbox's: %s", t);
	free(t);
	t = sbx_net_rate_text(&c.net.rates[0]);
	CHECK(streq(t, "a.test=2r/m,1MiB/s"), "text of a domain's: %s", t);
	free(t);
	CHECK(sbx_net_rate_arg(&c.net, "b.test=64k/s", msg, sizeof(msg)) == 0,
	      "a byte limit alone");
	json_t *j = sbx_config_to_json(&c);
	CHECK(sbx_config_from_json(j, &d, &err) == 0 && d.net.n_rates == 3 &&
		      streq(d.net.rates[2].pattern, "b.test") && d.net.rates[2].bytes == 65536 &&
		      streq(d.net.rates[0].pattern, "a.test") && d.net.rates[0].bytes == 1 << 20 &&
		      !d.net.rates[1].pattern && d.net.rates[1].reqs == 9,
	      "the stored form reads back");
	json_decref(j);
	sbx_config_release(&d);
	CHECK(sbx_net_rate_arg(&c.net, "a.test=none", msg, sizeof(msg)) == 0 && c.net.n_rates == 2,
	      "none removes it");
	CHECK(sbx_net_rate_arg(&c.net, "fast", msg, sizeof(msg)) < 0 && strstr(msg, "--net-rate"),
	      "a usage message");
	c.net.mode = SBX_NET_NONE;
	c.net.set = true;
	CHECK(sbx_config_validate(&c, msg, sizeof(msg)) < 0, "--net-rate needs the proxy");
	sbx_config_release(&c);

	/* update: --net, then --net-allow, --net-deny */
	char *add[] = { "b.test", "c.test:443", "b.test", NULL }, *del[] = { "a.test", NULL };
	struct sbx_update_opts o = { .net = "allow=a.test,z.test",
				     .net_allow = add,
				     .net_deny = del };
	sbx_config_init(&c);
	CHECK(sbx_net_update(&c.net, &o, msg, sizeof(msg)) == 0 && c.net.n_allow == 3 &&
		      streq(c.net.allow[0].pattern, "z.test") &&
		      streq(c.net.allow[1].pattern, "c.test") && c.net.allow[1].port == 443 &&
		      streq(c.net.allow[2].pattern, "b.test"),
	      "the list replaced, added to once, taken from");
	struct sbx_update_opts o2 = { .net = "none", .net_allow = add };
	CHECK(sbx_net_update(&c.net, &o2, msg, sizeof(msg)) < 0, "--net-allow with none");
	sbx_config_release(&c);
}

void test_net(void)
{
	char *pat = NULL, *name = NULL, *addr = NULL;
	int port, hp, in;

	test_rate();
	CHECK(sbx_net_match("example.com", "example.com"), "exact match");
	CHECK(!sbx_net_match("example.com", "a.example.com"), "exact is not a wildcard");
	CHECK(sbx_net_match("*.example.com", "a.example.com"), "wildcard matches a subdomain");
	CHECK(sbx_net_match("*.example.com", "a.b.example.com"), "wildcard matches deeper");
	CHECK(!sbx_net_match("*.example.com", "example.com"), "wildcard is subdomains only");
	CHECK(!sbx_net_match("*.example.com", "badexample.com"), "wildcard needs the dot");

	CHECK(sbx_net_parse_allow("Web.Test:8080", &pat, &port) == 0 && streq(pat, "web.test") &&
		      port == 8080,
	      "allow entry with port, lowercased");
	free(pat);
	CHECK(sbx_net_parse_allow("*.zone.test", &pat, &port) == 0 && port == 0, "wildcard entry");
	free(pat);
	CHECK(sbx_net_parse_allow("a..b", &pat, &port) < 0, "empty label refused");
	CHECK(sbx_net_parse_allow("a.test:0", &pat, &port) < 0, "port 0 refused");
	CHECK(sbx_net_parse_allow("a b", &pat, &port) < 0, "space refused");
	CHECK(sbx_net_parse_allow("", &pat, &port) < 0, "empty refused");

	CHECK(sbx_net_parse_add_host("db.test:10.0.0.5", &name, &addr) == 0 &&
		      streq(name, "db.test") && streq(addr, "10.0.0.5"),
	      "add-host v4");
	free(name);
	free(addr);
	CHECK(sbx_net_parse_add_host("db.test:fd00::1", &name, &addr) == 0 &&
		      streq(addr, "fd00::1"),
	      "add-host v6");
	free(name);
	free(addr);
	CHECK(sbx_net_parse_add_host("db.test:nope", &name, &addr) < 0,
	      "add-host needs an address");
	CHECK(sbx_net_parse_add_host("db.test", &name, &addr) < 0, "add-host needs the colon");

	CHECK(sbx_net_parse_host_port("5432", &hp, &in) == 0 && hp == 5432 && in == 5432,
	      "host-port alone");
	CHECK(sbx_net_parse_host_port("5432:6000", &hp, &in) == 0 && hp == 5432 && in == 6000,
	      "host-port with inside");
	CHECK(sbx_net_parse_host_port("70000", &hp, &in) < 0, "host-port range");

	char *p3128[] = { "9000:3128", NULL }, *pdup[] = { "1:9", "2:9", NULL },
	     *pok[] = { "5432", NULL };
	CHECK(validate(NULL, NULL, NULL) == 0, "the default is valid");
	CHECK(validate("allow=a.test,*.b.test:443", NULL, NULL) == 0, "allow list");
	CHECK(validate("allow=", NULL, NULL) == 0, "allow= alone");
	CHECK(validate("everything", NULL, NULL) < 0, "unknown mode");
	CHECK(validate("allow=a..test", NULL, NULL) < 0, "bad domain");
	CHECK(validate(NULL, NULL, p3128) < 0, "inside port of the proxy");
	CHECK(validate("none", NULL, p3128) == 0, "3128 is free without a proxy");
	CHECK(validate(NULL, NULL, pdup) < 0, "two forwarders on one inside port");
	CHECK(validate("host", NULL, pok) < 0, "host-port with --net host");

	CHECK(why("127.0.0.1") && strstr(why("127.0.0.1"), "loopback"), "loopback");
	CHECK(why("10.1.2.3") && strstr(why("10.1.2.3"), "private"), "10/8");
	CHECK(why("172.31.0.1") && strstr(why("172.31.0.1"), "private"), "172.16/12");
	CHECK(!why("172.32.0.1"), "172.32 is public");
	CHECK(why("192.168.1.1") && strstr(why("192.168.1.1"), "private"), "192.168/16");
	CHECK(why("100.64.0.1") && strstr(why("100.64.0.1"), "private"), "100.64/10");
	CHECK(why("169.254.169.254") && strstr(why("169.254.169.254"), "metadata"), "metadata");
	CHECK(why("169.254.1.1") && strstr(why("169.254.1.1"), "link-local"), "link-local");
	CHECK(why("224.0.0.1") && strstr(why("224.0.0.1"), "multicast"), "multicast");
	CHECK(why("0.0.0.0") != NULL, "0.0.0.0");
	CHECK(why("198.18.0.1") != NULL, "198.18/15");
	CHECK(!why("93.184.216.34"), "a public address passes");
	CHECK(why("::1") && strstr(why("::1"), "loopback"), "::1");
	CHECK(why("::ffff:127.0.0.1") && strstr(why("::ffff:127.0.0.1"), "loopback"), "mapped v4");
	CHECK(why("fd00:ec2::254") && strstr(why("fd00:ec2::254"), "metadata"), "v6 metadata");
	CHECK(why("fe80::1") && strstr(why("fe80::1"), "link-local"), "v6 link-local");
	CHECK(why("fc00::1") && strstr(why("fc00::1"), "private"), "v6 ULA");
	CHECK(why("ff02::1") && strstr(why("ff02::1"), "multicast"), "v6 multicast");
	CHECK(!why("2606:2800:220:1::1"), "a public v6 address passes");
}

/* the bytes of buf that belong to a body framed as b, fed n bytes at a time */
static long long scan_by(struct local_body b, const char *buf, size_t n, bool *done)
{
	size_t len = strlen(buf), off = 0;

	while (off < len && !b.done) {
		size_t k = len - off < n ? len - off : n;
		long long r = local_body_scan(&b, buf + off, k);
		if (r < 0)
			return -1;
		off += (size_t)r;
		if ((size_t)r < k)
			break;
	}
	*done = b.done;
	return (long long)off;
}

static int req_body(const char *head, struct local_body *b)
{
	return local_http_req_body(head, strlen(head), b);
}

void test_net_http(void)
{
	struct local_body b;
	bool done;
	const char *ch = "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n"
			 "X-Trailer: 1\r\n\r\nGET /next";

	CHECK(req_body("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &b) == 0 &&
		      b.kind == LOCAL_BODY_CHUNKED && !b.done,
	      "chunked request");
	for (size_t n = 1; n <= 64; n *= 2)
		CHECK(scan_by(b, ch, n, &done) == (long long)strlen(ch) - 9 && done,
		      "chunked body fed %zu at a time ends before the next request", n);
	CHECK(scan_by(b, "zz\r\n", 4, &done) < 0, "a chunk size that is no hex number");
	CHECK(scan_by(b, "3\r\nabcX", 64, &done) < 0, "chunk data longer than its size");
	CHECK(scan_by(b, "5\r\nab", 64, &done) == 5 && !done, "a chunk not all there yet");
	CHECK(req_body("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &b) == 0 &&
		      b.kind == LOCAL_BODY_LENGTH && scan_by(b, "helloGET", 3, &done) == 5 && done,
	      "Content-Length");
	CHECK(req_body("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &b) == 0 && b.kind == LOCAL_BODY_NONE &&
		      b.done,
	      "no body");
	CHECK(req_body("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		       &b) < 0,
	      "Content-Length and Transfer-Encoding");
	CHECK(req_body("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &b) < 0,
	      "two lengths");
	CHECK(req_body("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &b) < 0,
	      "a negative length");
	CHECK(req_body("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", &b) < 0,
	      "a request coding that does not end in chunked");

	struct local_http_resp r;
	const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: keep-alive\r\n"
			"Keep-Alive: timeout=5\r\n\r\n";
	CHECK(local_http_resp_parse(h, strlen(h), false, &r) == 0 && r.status == 200 && !r.close &&
		      r.body.kind == LOCAL_BODY_LENGTH && r.body.left == 10,
	      "a response with a length");
	CHECK(local_http_resp_parse(h, strlen(h), true, &r) == 0 && r.body.kind == LOCAL_BODY_NONE,
	      "the response to HEAD has no body");
	h = "HTTP/1.0 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
	CHECK(local_http_resp_parse(h, strlen(h), false, &r) == 0 && r.close && r.v10 &&
		      r.body.kind == LOCAL_BODY_NONE,
	      "304: no body; HTTP/1.0: closed after");
	h = "HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n";
	CHECK(local_http_resp_parse(h, strlen(h), false, &r) == 0 && r.close &&
		      r.body.kind == LOCAL_BODY_CLOSE,
	      "no length: until the end");
	h = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
	CHECK(local_http_resp_parse(h, strlen(h), false, &r) == 0 &&
		      r.body.kind == LOCAL_BODY_CHUNKED,
	      "chunked last");
	h = "HTTP/1.1 20 OK\r\n\r\n";
	CHECK(local_http_resp_parse(h, strlen(h), false, &r) < 0, "a bad status line");

	size_t ol;
	h = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX: y\r\n\r\n";
	char *o = local_http_resp_head(h, strlen(h), true, &ol);
	CHECK(ol == strlen(o) && streq(o, "HTTP/1.1 200 OK\r\nX: y\r\nConnection: close\r\n\r\n"),
	      "the client's response head: '%s'", o);
	free(o);
	o = local_http_resp_head(h, strlen(h), false, &ol);
	CHECK(streq(o, "HTTP/1.1 200 OK\r\nX: y\r\n\r\n"), "kept alive: '%s'", o);
	free(o);

	struct local_http_req q;
	const char *why;
	h = "GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\n"
	    "Connection: Keep-Alive, close\r\n\r\n";
	CHECK(local_http_parse(h, strlen(h), &q, &why) == 0, "a request");
	CHECK(local_http_conn_has(h, strlen(h), "close") &&
		      !local_http_conn_has(h, strlen(h), "upgrade"),
	      "Connection's tokens");
	o = local_http_origin_head(h, strlen(h), &q, false, &ol);
	CHECK(streq(o, "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n"), "origin head kept alive: '%s'",
	      o);
	free(o);
}

/* Basic credentials (base64 of user:password) carry placeholders too: put in for the secret's
 * hosts, refused for another */
void test_net_inject(void)
{
	char *hosts[] = { "api.test", NULL };
	struct local_secret s = { .name = "TOKEN",
				  .placeholder = "sbx-secret-PLACEHOLDER",
				  .value = "real-value",
				  .hosts = hosts };
	_cleanup_free_ char *cred = sbx_base64_encode("x-access-token:sbx-secret-PLACEHOLDER", 37);
	_cleanup_free_ char *want = sbx_base64_encode("x-access-token:real-value", 25);
	_cleanup_free_ char *req = xasprintf(
		"GET /repo.git/info/refs HTTP/1.1\r\nHost: api.test\r\n"
		"authorization:  Basic %s\r\nX-Key: sbx-secret-PLACEHOLDER\r\n\r\n",
		cred);
	struct local_inject x;

	CHECK(local_inject_request(req, strlen(req), "api.test", &s, 1, &x) == LOCAL_INJECT_OK,
	      "a Basic credential with a placeholder is taken");
	CHECK(x.head && strstr(x.head, want) && !strstr(x.head, cred) &&
		      strstr(x.head, "X-Key: real-value\r\n") && !strstr(x.head, "PLACEHOLDER") &&
		      x.consumed == strlen(req) && (x.injected & 1),
	      "the credential and the header carry the value: %s", x.head ? x.head : "(null)");
	free(x.head);
	_cleanup_free_ char *other = xasprintf("GET / HTTP/1.1\r\nHost: other.test\r\n"
					       "Authorization: Basic %s\r\n\r\n",
					       cred);
	CHECK(local_inject_request(other, strlen(other), "other.test", &s, 1, &x) ==
			      LOCAL_INJECT_REFUSE &&
		      x.exfil == 0 && x.code == 403,
	      "a Basic credential with a placeholder to another host is refused");
	_cleanup_free_ char *plain = sbx_base64_encode("user:password", 13);
	_cleanup_free_ char *req2 = xasprintf("GET / HTTP/1.1\r\nHost: other.test\r\n"
					      "Authorization: Basic %s\r\n\r\n",
					      plain);
	CHECK(local_inject_request(req2, strlen(req2), "other.test", &s, 1, &x) ==
			      LOCAL_INJECT_OK &&
		      x.injected == 0 && x.head && strstr(x.head, plain),
	      "a Basic credential without one goes as it is");
	free(x.head);
}
