/* Unit tests: a sandbox's typed configuration, its JSON mapping and its capability check. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "core/config.h"
#include "core/json.h"
#include "core/net.h"
#include "core/util.h"
#include "tests/unit/harness.h"

static char **strv(const char *a, const char *b)
{
	char **v = xcalloc(3, sizeof(char *));
	v[0] = a ? xstrdup(a) : NULL;
	v[1] = b ? xstrdup(b) : NULL;
	return v;
}

void test_config(void)
{
	struct sbx_config c, d;
	struct sbx_err err = { 0 };
	char msg[300];

	sbx_config_init(&c);
	c.env = strv("A=1", "B=two");
	c.labels = strv("team=a", "x=y");
	c.workdir = xstrdup("/src");
	c.hostname = xstrdup("web-1");
	c.memory = 64 << 20;
	c.ttl_ms = 1000;
	c.ttl_rm = true;
	c.volumes = xcalloc(1, sizeof(*c.volumes));
	c.volumes[0] = (struct sbx_volume){ xstrdup("/tmp"), xstrdup("/data"), true };
	c.n_volumes = 1;
	CHECK(sbx_net_parse_mode("allow=a.test:443,*.b.test", &c.net, msg, sizeof(msg)) == 0,
	      "--net allow=");
	CHECK(sbx_net_add_host_arg(&c.net, "db.test:10.0.0.5", msg, sizeof(msg)) == 0,
	      "--add-host");
	CHECK(sbx_net_host_port_arg(&c.net, "5432:6000", msg, sizeof(msg)) == 0, "--host-port");
	c.image.ref = xstrdup("tmpl");

	json_t *j = sbx_config_to_json(&c);
	CHECK(sbx_json_int(j, "version", 0) == SBX_CONFIG_VERSION, "the layout is written");
	CHECK(streq(sbx_json_str(json_object_get(j, "labels"), "team"), "a"),
	      "labels are an object");
	CHECK(streq(sbx_json_str(j, "ttl_action"), "rm"), "ttl_action with ttl_ms");
	CHECK(!json_object_get(j, "disk"), "an unset number is left out");
	CHECK(sbx_config_from_json(j, &d, &err) == 0, "decodes: %s", err.msg);
	json_t *k = sbx_config_to_json(&d);
	CHECK(json_equal(j, k), "decode then encode gives the same JSON");
	CHECK(d.n_volumes == 1 && d.volumes[0].ro && streq(d.volumes[0].dest, "/data"), "volumes");
	CHECK(d.net.set && d.net.mode == SBX_NET_ALLOW && d.net.n_allow == 2 &&
		      d.net.allow[0].port == 443 && streq(d.net.allow[1].pattern, "*.b.test") &&
		      d.net.preset,
	      "the allow list");
	CHECK(d.net.n_host_ports == 1 && d.net.host_ports[0].inside == 6000, "host ports");
	CHECK(d.ttl_rm && d.memory == 64 << 20 && streq(d.hostname, "web-1"), "scalars");
	json_decref(k);
	sbx_config_release(&d);

	/* what each capability refuses, and that one present lets it through */
	CHECK(sbx_config_supported(&c, ~0u, "p", &err) == 0, "every capability: accepted");
	CHECK(sbx_config_supported(&c, ~0u & ~SBX_CAP_VOLUMES, "p", &err) < 0 &&
		      err.kind == SBX_E_UNSUPPORTED && strstr(err.msg, "--volume"),
	      "no volumes: %s", err.msg);
	CHECK(sbx_config_supported(&c, ~0u & ~SBX_CAP_HOSTNAME, "p", &err) < 0 &&
		      strstr(err.msg, "--hostname"),
	      "no hostname: %s", err.msg);
	CHECK(sbx_config_supported(&c, ~0u & ~(SBX_CAP_IMAGE | SBX_CAP_TEMPLATE), "p", &err) < 0 &&
		      strstr(err.msg, "--image"),
	      "no images: %s", err.msg);
	CHECK(sbx_config_supported(&c, ~0u & ~SBX_CAP_IMAGE, "p", &err) == 0,
	      "a template stands for an image");
	sbx_config_release(&c);
	sbx_config_init(&c);
	CHECK(sbx_config_supported(&c, 0, "p", &err) == 0, "nothing asked: nothing needed");
	CHECK(sbx_net_parse_mode("none", &c.net, msg, sizeof(msg)) == 0 &&
		      sbx_config_supported(&c, 0, "p", &err) < 0 && strstr(err.msg, "--net none"),
	      "--net none needs net-none: %s", err.msg);

	/* companions of --net given without it are kept, under the default policy */
	sbx_config_release(&c);
	sbx_config_init(&c);
	CHECK(sbx_net_host_port_arg(&c.net, "5432", msg, sizeof(msg)) == 0 && !c.net.set,
	      "--host-port alone");
	json_t *hp = sbx_config_to_json(&c);
	CHECK(sbx_config_from_json(hp, &d, &err) == 0 && d.net.n_host_ports == 1 &&
		      d.net.mode == SBX_NET_ALLOW && d.net.preset,
	      "--host-port without --net survives the record");
	json_decref(hp);
	sbx_config_release(&d);

	/* --nested: written only when asked, read back, and a capability of its own */
	c.nested = true;
	hp = sbx_config_to_json(&c);
	CHECK(json_is_true(json_object_get(hp, "nested")) &&
		      sbx_config_from_json(hp, &d, &err) == 0 && d.nested,
	      "--nested survives the record");
	CHECK(sbx_config_supported(&c, ~0u & ~SBX_CAP_NESTED, "p", &err) < 0 &&
		      strstr(err.msg, "--nested"),
	      "no nested: %s", err.msg);
	json_decref(hp);
	sbx_config_release(&d);
	c.nested = false;
	hp = sbx_config_to_json(&c);
	CHECK(!json_object_get(hp, "nested"), "no --nested: no member");
	json_decref(hp);

	/* a later layout is refused, an older record (no version) read */
	json_object_set_new(j, "version", json_integer(SBX_CONFIG_VERSION + 1));
	CHECK(sbx_config_from_json(j, &d, &err) < 0 && err.kind == SBX_E_CONFIG,
	      "a later layout is refused");
	sbx_config_release(&d);
	json_object_del(j, "version");
	CHECK(sbx_config_from_json(j, &d, &err) == 0 && d.n_volumes == 1,
	      "a record without a version");
	sbx_config_release(&d);
	sbx_config_release(&c);
	json_decref(j);
	size_t n = 0;
	while (sbx_cap_names[n])
		n++;
	CHECK(n <= 32 && 1u << (n - 1) == SBX_CAP_CHECKPOINT, "a name for each capability bit");
}
