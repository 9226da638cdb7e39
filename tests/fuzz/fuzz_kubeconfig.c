/* Fuzzes kubeconfig reading: YAML to JSON through libyaml (aliases and deep nesting refused),
 * then the current context resolved from it (base64 fields, paths, plugins and what they would
 * be given). No file is read and no plugin run. */
#define _GNU_SOURCE
#include "core/kubeconfig.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_err err = { 0 };
	struct sbx_kubeconfig kc = { 0 };

	if (size > 65536)
		return 0;
	json_t *j = sbx_yaml_to_json((const char *)data, size, "the kubeconfig", &err);
	if (!j) {
		FUZZ_CHECK(err.msg[0], "a failure without a message");
		return 0;
	}
	const char *path = "/k/config";
	if (sbx_kubeconfig_from_json(&j, &path, 1, NULL, &kc, &err) == 0) {
		FUZZ_CHECK(kc.server &&
				   (startswith(kc.server, "https://") ||
				    startswith(kc.server, "http://")),
			   "a server that is not a URL");
		FUZZ_CHECK(!kc.token || !strpbrk(kc.token, "\r\n"), "a token with a line break");
		/* a path (made absolute from the file's folder), or a bare name for PATH */
		FUZZ_CHECK(!kc.exec.command || kc.exec.command[0] == '/' ||
				   !strchr(kc.exec.command, '/'),
			   "a plugin by a relative path");
		if (kc.exec.command) {
			/* what the plugin would be given is JSON */
			char *info = sbx_kubeconfig_exec_info(&kc, size & 1);
			json_error_t je;
			json_t *ij = json_loads(info, 0, &je);
			FUZZ_CHECK(ij && json_is_object(json_object_get(ij, "spec")),
				   "KUBERNETES_EXEC_INFO that is not JSON");
			json_decref(ij);
			free(info);
		}
		sbx_kubeconfig_release(&kc);
	} else {
		FUZZ_CHECK(err.msg[0], "a failure without a message");
	}
	json_decref(j);
	return 0;
}
