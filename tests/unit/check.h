// SPDX-License-Identifier: MIT
/*
 * The unit tests' check: CHECK(condition, format, ...) prints the file, the
 * line and the message when the condition is false, and counts the failure
 * in `failures`, which the test's main() reports and turns into its exit
 * status. A test goes on after a failed check, so one run shows them all.
 */
#ifndef TESTS_UNIT_CHECK_H
#define TESTS_UNIT_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		failures++; \
	} \
} while (0)

#endif
