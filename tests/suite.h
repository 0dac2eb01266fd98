/* The end of every Check binary's main: run, report, exit status. */
#ifndef CTXGUARD_TESTS_SUITE_H
#define CTXGUARD_TESTS_SUITE_H

#include <check.h>

static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
