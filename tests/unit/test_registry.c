/* Unit tests: image references, WWW-Authenticate, docker credentials, platforms, JSON depth. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>

#include "core/image.h"
#include "core/registry.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "tests/unit/harness.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void ref_ok(const char *in, const char *registry, const char *host, const char *repo,
		   const char *tag, const char *digest, const char *name)
{
	struct sbx_ref r = { 0 };
	struct sbx_err err = { 0 };

	int rc = sbx_ref_parse(in, &r, &err);
	CHECK(rc == 0, "parse '%s': %s", in, err.msg);
	if (rc < 0)
		return;
	CHECK(streq(r.registry, registry), "'%s' registry %s", in, r.registry);
	CHECK(streq(r.host, host), "'%s' host %s", in, r.host);
	CHECK(streq(r.repo, repo), "'%s' repo %s", in, r.repo);
	CHECK(tag ? r.tag && streq(r.tag, tag) : !r.tag, "'%s' tag %s", in, r.tag ? r.tag : "NULL");
	CHECK(digest ? r.digest && streq(r.digest, digest) : !r.digest, "'%s' digest %s", in,
	      r.digest ? r.digest : "NULL");
	CHECK(streq(r.name, name), "'%s' name %s", in, r.name);
	sbx_ref_release(&r);
	CHECK(!r.name && !r.repo, "release clears");
}

static void ref_bad(const char *in, const char *why)
{
	struct sbx_ref r = { 0 };
	struct sbx_err err = { 0 };

	CHECK(sbx_ref_parse(in, &r, &err) < 0 && err.kind == SBX_E_USAGE, "'%s' refused", in);
	CHECK(!r.name, "'%s': nothing set on failure", in);
	CHECK(!why || strstr(err.msg, why), "'%s': message '%s' lacks '%s'", in, err.msg, why);
	sbx_ref_release(&r); /* fine on a zeroed struct */
}

static void test_refs(void)
{
	ref_ok("busybox", "docker.io", "registry-1.docker.io", "library/busybox", "latest", NULL,
	       "docker.io/library/busybox:latest");
	ref_ok("debian:12", "docker.io", "registry-1.docker.io", "library/debian", "12", NULL,
	       "docker.io/library/debian:12");
	ref_ok("ghcr.io/org/x:tag", "ghcr.io", "ghcr.io", "org/x", "tag", NULL,
	       "ghcr.io/org/x:tag");
	ref_ok("localhost:5000/a/b@sha256:" HEX64, "localhost:5000", "localhost:5000", "a/b", NULL,
	       "sha256:" HEX64, "localhost:5000/a/b@sha256:" HEX64);
	ref_ok("127.0.0.1:5000/x", "127.0.0.1:5000", "127.0.0.1:5000", "x", "latest", NULL,
	       "127.0.0.1:5000/x:latest");
	ref_ok("localhost/x", "localhost", "localhost", "x", "latest", NULL, "localhost/x:latest");
	ref_ok("org/app:v1.2_3-rc", "docker.io", "registry-1.docker.io", "org/app", "v1.2_3-rc",
	       NULL, "docker.io/org/app:v1.2_3-rc");
	ref_ok("index.docker.io/library/alpine", "docker.io", "registry-1.docker.io",
	       "library/alpine", "latest", NULL, "docker.io/library/alpine:latest");
	ref_ok("docker.io/alpine", "docker.io", "registry-1.docker.io", "library/alpine", "latest",
	       NULL, "docker.io/library/alpine:latest");
	ref_ok("alpine:3@sha256:" HEX64, "docker.io", "registry-1.docker.io", "library/alpine",
	       NULL, "sha256:" HEX64, "docker.io/library/alpine@sha256:" HEX64);
	ref_ok("[::1]:5000/a_b/c__d/e-f/g--h.i", "[::1]:5000", "[::1]:5000", "a_b/c__d/e-f/g--h.i",
	       "latest", NULL, "[::1]:5000/a_b/c__d/e-f/g--h.i:latest");
	ref_ok("Example.COM/x", "Example.COM", "Example.COM", "x", "latest", NULL,
	       "Example.COM/x:latest");

	ref_bad("Busybox", "lowercase");
	ref_bad("docker.io/Org/x", "lowercase");
	ref_bad("", "empty");
	ref_bad("a:b:c", NULL);
	ref_bad("busybox@sha256:abc", "digest");
	ref_bad("busybox@md5:" HEX64, "digest");
	ref_bad("busybox@sha256:" HEX64 "00", "digest");
	ref_bad(HEX64, "image id");
	ref_bad("a//b", NULL);
	ref_bad("-a", NULL);
	ref_bad("a_", NULL);
	ref_bad("a/b:.x", "tag");
	ref_bad("a:", "tag");
	ref_bad("bad host:5000/x", "space");
	ref_bad("localhost:50x0/x", "registry");
	ref_bad("ex-.com/x", "registry");
	ref_bad(":tag", "empty");
	ref_bad("a___b", NULL);

	struct strbuf t = STRBUF_INIT;
	strbuf_addstr(&t, "busybox:");
	for (int i = 0; i < 129; i++)
		strbuf_addch(&t, 'a');
	ref_bad(t.buf, "tag");
	strbuf_reset(&t);
	strbuf_addstr(&t, "org/");
	for (int i = 0; i < 260; i++)
		strbuf_addch(&t, 'a');
	ref_bad(t.buf, "255");
	strbuf_release(&t);
}

static void familiar(const char *in, const char *want)
{
	char *f = sbx_ref_familiar(in);
	CHECK(streq(f, want), "familiar '%s' = '%s', want '%s'", in, f, want);
	free(f);
}

static void test_familiar(void)
{
	familiar("docker.io/library/busybox:latest", "busybox:latest");
	familiar("docker.io/library/debian@sha256:" HEX64, "debian@sha256:" HEX64);
	familiar("docker.io/org/x:1", "org/x:1");
	familiar("docker.io/library/a/b:1", "library/a/b:1");
	familiar("ghcr.io/org/x:tag", "ghcr.io/org/x:tag");
	familiar("localhost:5000/x:latest", "localhost:5000/x:latest");
}

static void test_challenge(void)
{
	struct sbx_challenge c = { 0 };

	CHECK(sbx_registry_parse_challenge(
		      "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
		      "scope=\"repository:library/busybox:pull\"",
		      &c) == 0 &&
		      streq(c.scheme, "Bearer") && streq(c.realm, "https://auth.docker.io/token") &&
		      streq(c.service, "registry.docker.io") &&
		      streq(c.scope, "repository:library/busybox:pull"),
	      "docker hub challenge");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("  bearer  Realm = \"http://127.0.0.1:1/t?a=b\" , "
					   "Service=sbx-test",
					   &c) == 0 &&
		      streq(c.scheme, "bearer") && streq(c.realm, "http://127.0.0.1:1/t?a=b") &&
		      streq(c.service, "sbx-test") && !c.scope,
	      "spaces, case, unquoted value");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("Bearer realm=\"a\\\"b\",error=\"insufficient_scope\","
					   "scope=\"repository:x:pull,push\"",
					   &c) == 0 &&
		      streq(c.realm, "a\"b") && streq(c.scope, "repository:x:pull,push"),
	      "escaped quote, unknown parameter, comma in a quoted value");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("Basic realm=\"Registry Realm\"", &c) == 0 &&
		      streq(c.scheme, "Basic") && streq(c.realm, "Registry Realm") && !c.service,
	      "basic challenge");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("Basic", &c) == 0 && streq(c.scheme, "Basic") &&
		      !c.realm,
	      "scheme alone");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("Bearer realm=\"a\", Basic realm=\"b\"", &c) == 0 &&
		      streq(c.scheme, "Bearer") && streq(c.realm, "a"),
	      "first of two challenges");
	sbx_challenge_release(&c);

	CHECK(sbx_registry_parse_challenge("Bearer realm=\"unterminated", &c) < 0,
	      "unterminated quote");
	CHECK(sbx_registry_parse_challenge("", &c) < 0, "empty");
	CHECK(sbx_registry_parse_challenge("Bearer realm=\"a\" junk=", &c) < 0 || c.scheme,
	      "trailing junk does not crash");
	sbx_challenge_release(&c);
	CHECK(sbx_registry_parse_challenge("Bearer =x", &c) < 0, "parameter without a name");
	CHECK(sbx_registry_parse_challenge("\"Bearer\"", &c) < 0, "quoted scheme");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int creds(const char *registry, struct sbx_registry_creds *c, struct sbx_err *err)
{
	memset(c, 0, sizeof(*c));
	sbx_err_clear(err);
	return sbx_registry_credentials(registry, c, err);
}

static void test_creds(void)
{
	char tmpl[] = "/tmp/sbx-unit-reg-XXXXXX";
	char *dir = mkdtemp(tmpl);
	struct sbx_registry_creds c;
	struct sbx_err err = { 0 };

	CHECK(dir != NULL, "mkdtemp");
	if (!dir)
		return;
	char *old = getenv("DOCKER_CONFIG") ? xstrdup(getenv("DOCKER_CONFIG")) : NULL;
	_cleanup_free_ char *path = xasprintf("%s/config.json", dir);
	setenv("DOCKER_CONFIG", dir, 1);

	CHECK(creds("docker.io", &c, &err) == 0, "no config.json: no credentials");

	write_file(path,
		   "{\"auths\": {"
		   "\"https://index.docker.io/v1/\": {\"auth\": \"YWxpY2U6czNjcjpldA==\"},"
		   "\"localhost:5000\": {\"username\": \"bob\", \"password\": \"pw\"},"
		   "\"ghcr.io\": {\"identitytoken\": \"refresh-me\"},"
		   "\"http://myreg.test:5000/v2/\": {\"auth\": \"dXNlcjpwYXNz\"},"
		   "\"quay.io\": {}"
		   "}, \"credsStore\": \"desktop\"}");
	CHECK(creds("docker.io", &c, &err) == 1 && streq(c.username, "alice") &&
		      streq(c.password, "s3cr:et") && !c.identity_token,
	      "docker.io through index.docker.io/v1/, a colon in the password");
	sbx_registry_creds_release(&c);
	CHECK(!c.username, "release clears");
	CHECK(creds("localhost:5000", &c, &err) == 1 && streq(c.username, "bob") &&
		      streq(c.password, "pw"),
	      "username and password fields");
	sbx_registry_creds_release(&c);
	CHECK(creds("ghcr.io", &c, &err) == 1 && !c.username &&
		      streq(c.identity_token, "refresh-me"),
	      "identity token");
	sbx_registry_creds_release(&c);
	CHECK(creds("myreg.test:5000", &c, &err) == 1 && streq(c.username, "user") &&
		      streq(c.password, "pass"),
	      "a key with scheme and path");
	sbx_registry_creds_release(&c);
	CHECK(creds("quay.io", &c, &err) == 0, "an empty entry (credential helper) is none");
	CHECK(creds("example.com", &c, &err) == 0, "no entry");
	CHECK(creds("localhost", &c, &err) == 0, "the port matters");

	write_file(path,
		   "{\"auths\": {\"bad.test\": {\"auth\": \"bm9jb2xvbg==\"},"
		   "\"worse.test\": {\"auth\": \"!!!\"}}}");
	CHECK(creds("bad.test", &c, &err) < 0 && err.kind == SBX_E_CONFIG &&
		      strstr(err.msg, "docker login bad.test") && !strstr(err.msg, "nocolon"),
	      "auth without a colon: %s", err.msg);
	CHECK(creds("worse.test", &c, &err) < 0 && strstr(err.msg, "base64"), "not base64: %s",
	      err.msg);

	write_file(path, "{\"auths\": ");
	CHECK(creds("docker.io", &c, &err) < 0 && err.kind == SBX_E_CONFIG && strstr(err.msg, path),
	      "malformed config.json: %s", err.msg);
	write_file(path, "[]");
	CHECK(creds("docker.io", &c, &err) < 0, "config.json that is not an object");

	unlink(path);
	rmdir(dir);
	if (old)
		setenv("DOCKER_CONFIG", old, 1);
	else
		unsetenv("DOCKER_CONFIG");
	free(old);
}

static const char index_json[] =
	"{\"schemaVersion\": 2, \"mediaType\": \"application/vnd.oci.image.index.v1+json\","
	" \"manifests\": ["
	"  {\"digest\": \"sha256:" HEX64 "\", \"platform\": {\"os\": \"unknown\","
	"   \"architecture\": \"unknown\"}},"
	"  {\"mediaType\": \"application/vnd.oci.image.manifest.v1+json\","
	"   \"digest\": \"sha256:1111111111111111111111111111111111111111111111111111111111111111\","
	"   \"platform\": {\"os\": \"linux\", \"architecture\": \"amd64\"}},"
	"  {\"digest\": \"sha256:2222222222222222222222222222222222222222222222222222222222222222\","
	"   \"platform\": {\"os\": \"linux\", \"architecture\": \"arm64\", \"variant\": \"v8\"}},"
	"  {\"digest\": \"sha256:3333333333333333333333333333333333333333333333333333333333333333\","
	"   \"platform\": {\"os\": \"linux\", \"architecture\": \"arm\", \"variant\": \"v6\"}},"
	"  {\"digest\": \"sha256:4444444444444444444444444444444444444444444444444444444444444444\","
	"   \"platform\": {\"os\": \"linux\", \"architecture\": \"arm\", \"variant\": \"v7\"}},"
	"  {\"digest\": \"sha256:5555555555555555555555555555555555555555555555555555555555555555\","
	"   \"platform\": {\"os\": \"windows\", \"architecture\": \"amd64\"}},"
	"  {\"digest\": \"sha256:" HEX64 "\", \"platform\": {\"os\": \"linux\","
	"   \"architecture\": \"amd64\"}, \"annotations\": {\"vnd.docker.reference.type\":"
	"   \"attestation-manifest\"}}"
	"]}";

static void pick(const json_t *idx, const char *platform, char want)
{
	char *d = NULL, *mt = NULL;
	struct sbx_err err = { 0 };
	int rc = sbx_registry_select_platform(idx, platform, &d, &mt, &err);

	CHECK(rc == 0 && d && strlen(d) == 71 && d[7] == want && d[70] == want,
	      "%s picks %c: %s %s", platform, want, d ? d : "none", err.msg);
	free(d);
	free(mt);
}

static void test_platform(void)
{
	json_error_t je;
	json_t *idx = json_loads(index_json, 0, &je);
	char *d = NULL, *mt = NULL;
	struct sbx_err err = { 0 };

	CHECK(idx != NULL, "index parses: %s", je.text);
	if (!idx)
		return;
	pick(idx, "linux/amd64", '1');
	pick(idx, "linux/x86_64", '1');
	pick(idx, "linux/arm64", '2');
	pick(idx, "linux/arm64/v8", '2');
	pick(idx, "linux/aarch64", '2');
	pick(idx, "linux/arm", '4');
	pick(idx, "linux/arm/v7", '4');
	pick(idx, "linux/arm/v6", '3');
	pick(idx, "windows/amd64", '5');

	CHECK(sbx_registry_select_platform(idx, "linux/amd64", &d, &mt, &err) == 0 && mt &&
		      streq(mt, "application/vnd.oci.image.manifest.v1+json"),
	      "media type returned");
	free(d);
	free(mt);
	d = mt = NULL;

	CHECK(sbx_registry_select_platform(idx, "linux/riscv64", &d, NULL, &err) < 0 &&
		      err.kind == SBX_E_NOTFOUND && strstr(err.msg, "linux/riscv64") &&
		      strstr(err.msg, "linux/arm64/v8") && !strstr(err.msg, "unknown"),
	      "no match lists what there is: %s", err.msg);
	CHECK(sbx_registry_select_platform(idx, "linux/arm64/v9", &d, NULL, &err) < 0,
	      "an explicit variant must match");
	CHECK(sbx_registry_select_platform(idx, "linux", &d, NULL, &err) < 0 &&
		      err.kind == SBX_E_USAGE,
	      "platform without arch");
	CHECK(sbx_registry_select_platform(idx, "linux/amd64/v2/x", &d, NULL, &err) < 0,
	      "too many parts");
	CHECK(sbx_registry_select_platform(idx, "Linux/amd64", &d, NULL, &err) < 0,
	      "uppercase platform");
	CHECK(sbx_registry_select_platform(idx, "/amd64", &d, NULL, &err) < 0, "empty os");
	json_decref(idx);

	json_t *empty = json_pack("{s:[]}", "manifests");
	CHECK(sbx_registry_select_platform(empty, "linux/amd64", &d, NULL, &err) < 0 &&
		      strstr(err.msg, "none"),
	      "empty index: %s", err.msg);
	json_decref(empty);
}

static void test_depth(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct sbx_err err = { 0 };

	CHECK(sbx_registry_json_depth("{}", 2) == 1, "depth 1");
	CHECK(sbx_registry_json_depth("{\"a\": [1, {\"b\": []}]}", 20) == 4, "depth 4");
	CHECK(sbx_registry_json_depth("\"[[[[{{\"", 8) == 0, "brackets in a string");
	CHECK(sbx_registry_json_depth("[\"\\\"[[\"]", 8) == 1, "escaped quote in a string");

	for (int i = 0; i < SBX_REGISTRY_MAX_JSON_DEPTH; i++)
		strbuf_addch(&sb, '[');
	for (int i = 0; i < SBX_REGISTRY_MAX_JSON_DEPTH; i++)
		strbuf_addch(&sb, ']');
	json_t *j = sbx_registry_json_parse(sb.buf, sb.len, "the manifest", &err);
	CHECK(j != NULL, "64 levels parse: %s", err.msg);
	if (j)
		json_decref(j);

	strbuf_reset(&sb);
	for (int i = 0; i <= SBX_REGISTRY_MAX_JSON_DEPTH; i++)
		strbuf_addstr(&sb, "{\"a\":");
	strbuf_addstr(&sb, "1");
	for (int i = 0; i <= SBX_REGISTRY_MAX_JSON_DEPTH; i++)
		strbuf_addch(&sb, '}');
	j = sbx_registry_json_parse(sb.buf, sb.len, "the manifest", &err);
	CHECK(!j && strstr(err.msg, "deeper than 64") && err.kind == SBX_E_REMOTE,
	      "65 levels refused: %s", err.msg);

	j = sbx_registry_json_parse("{\"a\": ", 6, "the manifest", &err);
	CHECK(!j && strstr(err.msg, "the manifest"), "malformed JSON: %s", err.msg);
	strbuf_release(&sb);
}

static void test_media_types(void)
{
	CHECK(sbx_layer_is_gzip("application/vnd.oci.image.layer.v1.tar+gzip"), "oci gzip");
	CHECK(sbx_layer_is_gzip("application/vnd.docker.image.rootfs.diff.tar.gzip"),
	      "docker gzip");
	CHECK(sbx_layer_is_zstd("application/vnd.oci.image.layer.v1.tar+zstd"), "oci zstd");
	CHECK(!sbx_layer_is_gzip("application/vnd.oci.image.layer.v1.tar") &&
		      !sbx_layer_is_zstd("application/vnd.oci.image.layer.v1.tar"),
	      "plain tar");
	CHECK(sbx_layer_media_type_known("application/vnd.oci.image.layer.v1.tar"), "tar known");
	CHECK(!sbx_layer_media_type_known("application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
	      "helm chart unknown");
	CHECK(!sbx_layer_media_type_known(NULL), "NULL unknown");
}

/* sbx commit's --change instructions on an image config's "config" */
static void test_image_changes(void)
{
	struct sbx_err err = { 0 };
	json_t *c = json_pack("{s:[s, s]}", "Env", "PATH=/bin", "A=1");
	char *ok[] = { "CMD [\"sh\", \"-c\", \"x\"]",
		       "entrypoint run me",
		       "ENV A=2",
		       "ENV B two words",
		       "WORKDIR /w",
		       "USER app:app",
		       "LABEL k=v=w",
		       "EXPOSE 80 53/udp",
		       NULL };

	CHECK(sbx_image_changes_apply(c, ok, &err) == 0, "changes: %s", err.msg);
	_cleanup_free_ char *t = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK(streq(t,
		    "{\"Cmd\":[\"sh\",\"-c\",\"x\"],\"Entrypoint\":[\"/bin/sh\",\"-c\","
		    "\"run me\"],\"Env\":[\"PATH=/bin\",\"A=2\",\"B=two words\"],"
		    "\"ExposedPorts\":{\"53/udp\":{},\"80/tcp\":{}},\"Labels\":{\"k\":"
		    "\"v=w\"},\"User\":\"app:app\",\"WorkingDir\":\"/w\"}"),
	      "config after the changes: %s", t);
	static const char *const bad[] = { "FROM x",	  "CMD",      "CMD [1]",     "CMD [\"a\"",
					   "WORKDIR rel", "EXPOSE 0", "EXPOSE 80/x", "EXPOSE 8o",
					   "ENV =x",	  "LABEL",    "RUN echo hi" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *one[] = { (char *)bad[i], NULL };
		struct sbx_err e = { 0 };
		CHECK(sbx_image_changes_apply(c, one, &e) < 0 && e.kind == SBX_E_USAGE,
		      "'%s' is refused", bad[i]);
	}
	json_decref(c);
}

void test_registry(void)
{
	test_image_changes();
	test_refs();
	test_familiar();
	test_challenge();
	test_creds();
	test_platform();
	test_depth();
	test_media_types();
}
