/* Unit tests: WebSocket framing (RFC 6455: frames, masking, lengths, fragments, control frames,
 * the accept key) and kubeconfig reading (YAML to JSON, contexts merged, credentials, plugins'
 * ExecCredential). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/kubeconfig.h"
#include "core/util.h"
#include "core/ws.h"
#include "providers/kubernetes.h"
#include "tests/unit/harness.h"

static void test_ws_frames(void)
{
	struct sbx_err err = { 0 };
	struct sbx_ws_frame f;
	struct strbuf sb = STRBUF_INIT;

	/* RFC 6455 §1.3's example */
	char *acc = sbx_ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==");
	CHECK(streq(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "accept key: %s", acc);
	free(acc);

	/* §5.7: a masked "Hello" from a client, an unmasked one from a server */
	uint8_t masked[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	long n = sbx_ws_parse_frame(masked, sizeof(masked), false, &f, &err);
	CHECK(n == 11 && f.fin && f.opcode == SBX_WS_TEXT && f.len == 5 &&
		      !memcmp(f.payload, "Hello", 5),
	      "masked Hello: %ld", n);
	uint8_t plain[] = { 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' };
	CHECK(sbx_ws_parse_frame(plain, sizeof(plain), true, &f, &err) == 7, "server Hello");
	uint8_t again[] = { 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' };
	CHECK(sbx_ws_parse_frame(again, sizeof(again), false, &f, &err) < 0,
	      "a client frame must be masked");
	uint8_t masked2[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	CHECK(sbx_ws_parse_frame(masked2, sizeof(masked2), true, &f, &err) < 0,
	      "a server frame must not be masked");
	for (size_t k = 0; k < sizeof(plain); k++)
		CHECK(sbx_ws_parse_frame(plain, k, true, &f, &err) == 0, "%zu bytes: need more", k);

	/* lengths: 7-bit, 16-bit, 64-bit, each built then parsed back */
	size_t sizes[] = { 0, 125, 126, 65535, 65536, 300000 };
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		char *data = xmalloc(sizes[i] + 1);
		for (size_t k = 0; k < sizes[i]; k++)
			data[k] = (char)(k * 7);
		uint8_t key[4] = { 1, 2, 3, 4 };
		strbuf_reset(&sb);
		sbx_ws_build_frame(&sb, SBX_WS_BINARY, true, data, sizes[i], key);
		n = sbx_ws_parse_frame((uint8_t *)sb.buf, sb.len, false, &f, &err);
		CHECK(n == (long)sb.len && f.len == sizes[i] &&
			      (sizes[i] == 0 || !memcmp(f.payload, data, sizes[i])),
		      "%zu bytes round trip", sizes[i]);
		free(data);
	}
	/* refused: reserved bits, unknown opcodes, long or fragmented control frames, lengths
	 * not minimally encoded */
	uint8_t rsv[] = { 0xc1, 0x00 }, op3[] = { 0x83, 0x00 }, ping_frag[] = { 0x09, 0x00 };
	uint8_t ping_long[130] = { 0x89, 126, 0, 126 };
	uint8_t nonmin[] = { 0x82, 126, 0, 5, 1, 2, 3, 4, 5 };
	uint8_t huge[] = { 0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0 };
	CHECK(sbx_ws_parse_frame(rsv, 2, true, &f, &err) < 0, "reserved bits");
	CHECK(sbx_ws_parse_frame(op3, 2, true, &f, &err) < 0, "opcode 3");
	CHECK(sbx_ws_parse_frame(ping_frag, 2, true, &f, &err) < 0, "fragmented ping");
	CHECK(sbx_ws_parse_frame(ping_long, sizeof(ping_long), true, &f, &err) < 0, "long ping");
	CHECK(sbx_ws_parse_frame(nonmin, sizeof(nonmin), true, &f, &err) < 0, "non-minimal");
	CHECK(sbx_ws_parse_frame(huge, sizeof(huge), true, &f, &err) < 0, "a 2^63 length");

	/* the reader: a fragmented message with a ping between its fragments */
	struct sbx_ws_reader rd = { 0 };
	sbx_ws_build_frame(&rd.in, SBX_WS_BINARY, false,
			   "\x01"
			   "ab",
			   3, NULL);
	sbx_ws_build_frame(&rd.in, SBX_WS_PING, true, "p", 1, NULL);
	sbx_ws_build_frame(&rd.in, SBX_WS_CONT, true, "cd", 2, NULL);
	sbx_ws_build_frame(&rd.in, SBX_WS_CLOSE, true, "\x03\xe8", 2, NULL);
	int op;
	const uint8_t *d;
	size_t len;
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) == 1 && op == SBX_WS_PING && len == 1,
	      "the ping comes first");
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) == 1 && op == SBX_WS_BINARY &&
		      len == 5 &&
		      !memcmp(d,
			      "\x01"
			      "abcd",
			      5),
	      "the message whole");
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) == 1 && op == SBX_WS_CLOSE, "close");
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) == 0, "then nothing");
	sbx_ws_build_frame(&rd.in, SBX_WS_CONT, true, "x", 1, NULL);
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) < 0, "a continuation of nothing");
	sbx_ws_reader_release(&rd);
	sbx_ws_build_frame(&rd.in, SBX_WS_TEXT, false, "a", 1, NULL);
	sbx_ws_build_frame(&rd.in, SBX_WS_TEXT, true, "b", 1, NULL);
	CHECK(sbx_ws_reader_next(&rd, &op, &d, &len, &err) < 0, "a message inside another");
	sbx_ws_reader_release(&rd);
	strbuf_release(&sb);
}

/* libcurl's WebSocket path: the header lines it hands over, read as sbx's own head is */
static void test_ws_headers(void)
{
	char *v = NULL;
	const char l1[] = "Retry-After: 7\r\n", l2[] = "retry-after:   12 \t\r\n";
	CHECK(sbx_ws_header_value(l1, strlen(l1), "retry-after", &v) && streq(v, "7"),
	      "Retry-After: %s", v ? v : "(none)");
	CHECK(!sbx_ws_header_value(l2, strlen(l2), "retry-after", &v) && streq(v, "7"),
	      "the first one counts");
	free(v);
	v = NULL;
	CHECK(sbx_ws_header_value(l2, strlen(l2), "retry-after", &v) && streq(v, "12"),
	      "any case, trimmed: '%s'", v ? v : "(none)");
	free(v);
	v = NULL;
	const char l3[] = "Retry-After-Not: 1\r\n",
		   l4[] = "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n";
	CHECK(!sbx_ws_header_value(l3, strlen(l3), "retry-after", &v) && !v, "another header");
	CHECK(sbx_ws_header_value(l4, strlen(l4), "sec-websocket-protocol", &v) &&
		      streq(v, "v5.channel.k8s.io"),
	      "the protocol: %s", v ? v : "(none)");
	free(v);
	v = NULL;
	CHECK(!sbx_ws_header_value("HTTP/1.1 429 Too Many\r\n", 23, "retry-after", &v) && !v,
	      "a status line is no header");
}

static json_t *yaml(const char *s)
{
	struct sbx_err err = { 0 };
	return sbx_yaml_to_json(s, strlen(s), "the test YAML", &err);
}

static const char kc_a[] = "apiVersion: v1\n"
			   "kind: Config\n"
			   "current-context: a\n"
			   "clusters:\n"
			   "- name: c1\n"
			   "  cluster:\n"
			   "    server: https://k.example:6443/\n"
			   "    certificate-authority-data: LS0tQ0EtLS0K\n"
			   "contexts:\n"
			   "- name: a\n"
			   "  context: {cluster: c1, user: u1, namespace: team}\n"
			   "- name: b\n"
			   "  context:\n"
			   "    cluster: c1\n"
			   "    user: u2\n"
			   "users:\n"
			   "- name: u1\n"
			   "  user:\n"
			   "    token: \"t0k\"\n"
			   "- name: u2\n"
			   "  user:\n"
			   "    client-certificate: certs/u2.crt\n"
			   "    client-key-data: S0VZ\n"
			   "    exec:\n"
			   "      command: ./bin/plugin\n"
			   "      args: [--x, '1']\n"
			   "      env:\n"
			   "      - {name: A, value: b}\n";

/* a second file: its current-context loses, its own context wins where the first has none */
static const char kc_b[] =
	"current-context: b\n"
	"clusters:\n"
	"- name: c1\n"
	"  cluster: {server: https://other.example}\n"
	"- name: c2\n"
	"  cluster: {server: 'https://two.example', insecure-skip-tls-verify: true}\n"
	"contexts:\n"
	"- name: c\n"
	"  context: {cluster: c2, user: u1}\n"
	"users:\n"
	"- name: u1\n"
	"  user: {token: other}\n";

static void test_kubeconfig(void)
{
	struct sbx_err err = { 0 };
	struct sbx_kubeconfig kc = { 0 };

	json_t *j = yaml("a: [1, '2', ~]\nb: {c: null, d: \"x\"}\n");
	if (!j) {
		CHECK(0, "libyaml: cannot parse");
		return;
	}
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK(streq(s, "{\"a\":[\"1\",\"2\",null],\"b\":{\"c\":null,\"d\":\"x\"}}"), "yaml: %s", s);
	free(s);
	json_decref(j);
	CHECK(!yaml("a: &x 1\nb: *x\n"), "an alias is refused");
	CHECK(!yaml("a: [\n"), "broken YAML is refused");
	struct strbuf deep = STRBUF_INIT;
	for (int i = 0; i < 100; i++)
		strbuf_addch(&deep, '[');
	CHECK(!yaml(deep.buf), "100 levels are refused");
	strbuf_release(&deep);

	json_t *docs[2] = { yaml(kc_a), yaml(kc_b) };
	const char *paths[2] = { "/etc/k/a.yaml", "/home/u/b.yaml" };
	CHECK(sbx_kubeconfig_from_json(docs, paths, 2, NULL, &kc, &err) == 0, "from_json: %s",
	      err.msg);
	CHECK(streq(kc.context, "a") && streq(kc.server, "https://k.example:6443") &&
		      streq(kc.namespace, "team") && streq(kc.token, "t0k") && kc.ca_len == 9 &&
		      !memcmp(kc.ca, "---CA---\n", 9) && !kc.insecure,
	      "context a: the first file's");
	sbx_kubeconfig_release(&kc);
	CHECK(sbx_kubeconfig_from_json(docs, paths, 2, "b", &kc, &err) == 0, "b: %s", err.msg);
	CHECK(streq(kc.cert_file, "/etc/k/certs/u2.crt") && kc.key_len == 3 &&
		      streq(kc.exec.command, "/etc/k/./bin/plugin") &&
		      streq(kc.exec.args[0], "--x") && streq(kc.exec.args[1], "1") &&
		      streq(kc.exec.env[0], "A=b") && !kc.namespace,
	      "context b: paths from its file's folder, the plugin");
	/* the plugin's ExecCredential */
	const char ok[] = "{\"status\":{\"token\":\"pt\",\"expirationTimestamp\":"
			  "\"2030-01-01T00:00:00Z\"}}";
	CHECK(sbx_kubeconfig_exec_credential(&kc, ok, strlen(ok), 1700000000, &err) == 0 &&
		      streq(kc.token, "pt") && kc.token_expiry == 1893456000,
	      "a valid credential: %s", err.msg);
	CHECK(sbx_kubeconfig_exec_credential(&kc, ok, strlen(ok), 1893456000, &err) < 0 &&
		      strstr(err.msg, "expired"),
	      "an expired one");
	CHECK(sbx_kubeconfig_exec_credential(&kc, "{}", 2, 0, &err) < 0, "no token");
	CHECK(sbx_kubeconfig_exec_credential(&kc, "nope", 4, 0, &err) < 0, "not JSON");
	sbx_kubeconfig_release(&kc);
	CHECK(sbx_kubeconfig_from_json(docs, paths, 2, "c", &kc, &err) == 0 &&
		      streq(kc.server, "https://two.example") && kc.insecure &&
		      streq(kc.token, "t0k"),
	      "context c of the second file, its user the first file's");
	sbx_kubeconfig_release(&kc);
	CHECK(sbx_kubeconfig_from_json(docs, paths, 2, "zz", &kc, &err) < 0 &&
		      strstr(err.msg, "no context 'zz'"),
	      "a missing context");
	json_decref(docs[0]);
	json_decref(docs[1]);
	/* a plugin by its bare name: looked up in the caller's PATH when it runs */
	json_t *bare = yaml("current-context: x\ncontexts:\n- name: x\n  context: {cluster: y, "
			    "user: z}\nclusters:\n- name: y\n  cluster:\n    server: https://s\n"
			    "    certificate-authority-data: LS0tQ0EtLS0K\n"
			    "    tls-server-name: k.internal\n"
			    "    extensions:\n    - name: client.authentication.k8s.io/exec\n"
			    "      extension: {audience: sbx}\n"
			    "users:\n- name: z\n  user:\n    exec:\n"
			    "      apiVersion: client.authentication.k8s.io/v1\n"
			    "      command: aws\n      interactiveMode: Never\n"
			    "      provideClusterInfo: true\n      installHint: get it\n");
	CHECK(sbx_kubeconfig_from_json(&bare, paths, 1, NULL, &kc, &err) == 0 &&
		      streq(kc.exec.command, "aws") && kc.exec.interactive == SBX_KUBE_NEVER &&
		      streq(kc.exec.install_hint, "get it"),
	      "a plugin by name: %s", err.msg);
	char *info = sbx_kubeconfig_exec_info(&kc, false);
	json_error_t je;
	json_t *ij = json_loads(info, 0, &je);
	json_t *cl = json_object_get(json_object_get(ij, "spec"), "cluster");
	CHECK(ij && streq(sbx_json_str(ij, "apiVersion"), "client.authentication.k8s.io/v1") &&
		      json_is_false(json_object_get(json_object_get(ij, "spec"), "interactive")) &&
		      streq(sbx_json_str(cl, "server"), "https://s") &&
		      streq(sbx_json_str(cl, "tls-server-name"), "k.internal") &&
		      streq(sbx_json_str(cl, "certificate-authority-data"), "LS0tQ0EtLS0K") &&
		      streq(sbx_json_str(json_object_get(cl, "config"), "audience"), "sbx"),
	      "provideClusterInfo: %s", info);
	json_decref(ij);
	free(info);
	sbx_kubeconfig_release(&kc);
	json_decref(bare);
	bare = yaml(
		"current-context: x\ncontexts:\n- name: x\n  context: {cluster: y, user: z}\n"
		"clusters:\n- name: y\n  cluster: {server: https://s}\nusers:\n- name: z\n"
		"  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: a}\n");
	CHECK(sbx_kubeconfig_from_json(&bare, paths, 1, NULL, &kc, &err) < 0 &&
		      strstr(err.msg, "interactiveMode"),
	      "v1 without interactiveMode is refused, as kubectl refuses it: %s", err.msg);
	json_decref(bare);
	info = sbx_kubeconfig_exec_info(&(struct sbx_kubeconfig){ .exec.api_version = "v" }, true);
	CHECK(streq(info,
		    "{\"apiVersion\":\"v\",\"kind\":\"ExecCredential\",\"spec\":{"
		    "\"interactive\":true}}"),
	      "without provideClusterInfo: %s", info);
	free(info);

	/* PATH: absolute entries only, the first executable regular file */
	char dir[] = "/tmp/sbx-unit-path.XXXXXX";
	if (mkdtemp(dir)) {
		char *a = xasprintf("%s/a", dir), *b = xasprintf("%s/b", dir);
		char *pa = xasprintf("%s/plug", a), *pb = xasprintf("%s/plug", b);
		(void)mkdir(a, 0700);
		(void)mkdir(b, 0700);
		FILE *f = fopen(pa, "w"); /* not executable: passed over */
		if (f)
			fclose(f);
		f = fopen(pb, "w");
		if (f)
			fclose(f);
		(void)chmod(pb, 0700);
		char *path = xasprintf(".::relative:%s:%s", a, b);
		char *got = sbx_kubeconfig_lookpath("plug", path);
		CHECK(got && streq(got, pb), "lookpath: %s", got ? got : "(none)");
		free(got);
		CHECK(!sbx_kubeconfig_lookpath("plug", ".:relative"), "relative entries: not");
		CHECK(!sbx_kubeconfig_lookpath("nope", path), "a missing name: none");
		CHECK(!sbx_kubeconfig_lookpath("a/plug", dir), "a name with a '/': not looked up");
		(void)unlink(pa);
		(void)unlink(pb);
		(void)rmdir(a);
		(void)rmdir(b);
		(void)rmdir(dir);
		free(path);
		free(a);
		free(b);
		free(pa);
		free(pb);
	}
}

static void test_preview_paths(void)
{
	static const char *const good[] = {
		"/",	"/index.html", "/a/b.c/", "/.well-known/x", "/a..b",
		"/...", "/x?y=/../..", "/%41b",	  "/a#../.."
	};
	static const char *const bad[] = {
		"/..",	       "/../api/v1/pods", "/a/../../b", "/./x",
		"/a/.",	       "/%2e%2e/api",	  "/%2E%2e/x",	"/.%2E/x",
		"/a%2f..%2fb", "/a%2F%2e%2E",	  "/a\\..\\b",	"/%",
		"/%zz",	       "/a%00b",	  "x/y",	""
	};
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		CHECK(kube_preview_path_ok(good[i], strlen(good[i])), "served: %s", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK(!kube_preview_path_ok(bad[i], strlen(bad[i])), "refused: %s", bad[i]);

	const char *srv = "https://127.0.0.1:6443", *pre = "/api/v1/namespaces/d/pods/p:80/proxy";
	struct {
		const char *in, *out;
	} locs[] = {
		{ "https://127.0.0.1:6443/api/v1/namespaces/d/pods/p:80/proxy/login", "/login" },
		{ "/api/v1/namespaces/d/pods/p:80/proxy/a?b=1", "/a?b=1" },
		{ "/api/v1/namespaces/d/pods/p:80/proxy", "/" },
		{ "/api/v1/namespaces/d/pods/p:80/proxyx",
		  "/api/v1/namespaces/d/pods/p:80/proxyx" },
		{ "/next", "/next" },
		{ "https://example.com/x", "https://example.com/x" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(locs); i++) {
		char *l = kube_preview_location(locs[i].in, srv, pre);
		CHECK(streq(l, locs[i].out), "Location %s: %s", locs[i].in, l);
		free(l);
	}
	const char *ck = "a=1; sbx_preview_token_8000=f00; b=2;sbx_preview_token=x";
	char *c = kube_preview_cookie(ck, strlen(ck));
	CHECK(c && streq(c, "a=1; b=2"), "cookies: %s", c ? c : "(none)");
	free(c);
	CHECK(!kube_preview_cookie("sbx_preview_token_1=a", 21), "sbx's alone: nothing");
}

void test_kube(void)
{
	test_preview_paths();
	test_ws_headers();
	test_ws_frames();
	test_kubeconfig();
}
