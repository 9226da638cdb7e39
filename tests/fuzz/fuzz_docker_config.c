/* Fuzzes the reading of docker's credentials ($DOCKER_CONFIG/config.json) for image pull. */
#define _GNU_SOURCE
#include "core/registry.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("DOCKER_CONFIG", fuzz_dir(), 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const registries[] = { "docker.io", "ghcr.io", "localhost:5000",
						  "127.0.0.1:5000", "Registry.Example.com" };

	fuzz_file(fuzz_dir(), "config.json", data, size);
	for (size_t i = 0; i < ARRAY_SIZE(registries); i++) {
		struct sbx_registry_creds c = { 0 };
		struct sbx_err err = { 0 };
		int r = sbx_registry_credentials(registries[i], &c, &err);
		if (r < 0) {
			FUZZ_CHECK(err.msg[0] && err.kind != SBX_E_NONE,
				   "an error without a message");
			continue;
		}
		FUZZ_CHECK(r == 0 || r == 1, "returned %d", r);
		if (r == 1)
			FUZZ_CHECK((c.username && c.password) || c.identity_token,
				   "credentials without a user or a token");
		else
			FUZZ_CHECK(!c.username && !c.password && !c.identity_token,
				   "0 with values");
		sbx_registry_creds_release(&c);
	}
	return 0;
}
