/* Runs every unit test group and prints the totals. */
#include "tests/unit/harness.h"

int unit_pass, unit_fail, unit_skip;

int main(void)
{
	test_util();
	test_strbuf();
	test_err();
	test_json();
	test_store();
	test_options();
	test_lazy();
	test_net();
	test_net_http();
	test_net_inject();
	test_config();
	test_registry();
	test_term();
	test_dockerfile();
	test_dial();
	test_kube();
	printf("# unit: %d ok, %d not ok, %d skipped\n", unit_pass, unit_fail, unit_skip);
	return unit_fail ? 1 : 0;
}
