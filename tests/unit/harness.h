/* Minimal TAP-like harness for the unit tests: ok / not ok counts. */
#ifndef SBX_TESTS_UNIT_HARNESS_H
#define SBX_TESTS_UNIT_HARNESS_H

#include <stdio.h>

extern int unit_pass, unit_fail, unit_skip;

#define CHECK(cond, ...)                                                \
	do {                                                            \
		if (cond) {                                             \
			unit_pass++;                                    \
		} else {                                                \
			unit_fail++;                                    \
			printf("not ok - %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                            \
			printf("\n");                                   \
		}                                                       \
	} while (0)

void test_util(void);
void test_strbuf(void);
void test_err(void);
void test_json(void);
void test_store(void);
void test_options(void);
void test_lazy(void);
void test_net(void);
void test_net_http(void);
void test_net_inject(void);
void test_config(void);
void test_registry(void);
void test_term(void);
void test_dockerfile(void);
void test_dial(void);
void test_kube(void);

#endif
