// SPDX-License-Identifier: MIT
/*
 * The checks every test program uses (tests/unit, tests/cuda, tests/system,
 * tests/standin, tests/cudart), one vocabulary for all:
 *
 *   CHECK(cond, fmt, ...)    counts a failure and goes on when cond is false;
 *                            evaluates to 1 when it held
 *   REQUIRE(cond, fmt, ...)  the same, but ends the program (exit 1): what
 *                            follows depends on it
 *   CHECK_CU(call, want)     a CUDA call (driver or runtime) must return
 *                            exactly `want`; goes on; 1 when it did
 *   REQUIRE_CU(call)         a CUDA call must succeed (return 0); else ends
 *                            the program
 *   check_finish(name)       prints "NAME: N passed, N failed" and answers
 *                            the exit status (0, or 1 after any failure)
 *
 * A failure prints "file:line: FAIL: expression: message" on stderr (for
 * the _CU forms the call and the code it returned, named by the function
 * given to check_name_codes()). Messages and their arguments are only
 * evaluated on failure. A context line set with check_set_context() (the
 * random seed, say) is printed once, before the first failure. The counts
 * are kept under a lock, so threads may check at once; a forked child
 * counts its own and reports through its exit status.
 *
 * The header is whole in itself, for C and for nvcc's C++ alike, with no
 * object to link: its functions are static inline, and the one state they
 * share is a weak definition, so the files of one program share one count.
 */
#ifndef OPENMPS_TESTS_CHECK_H
#define OPENMPS_TESTS_CHECK_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct check_state {
	pthread_mutex_t lock;              /* guards the rest; a leaf */
	int passed, failed;
	int context_shown;
	const char *context;               /* printed before the first failure */
	const char *(*name_code)(int code); /* names a CUDA result code */
};

__attribute__((weak)) struct check_state check_state = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, NULL, NULL };

/* Sets the line printed once before the first failure; `line` must live on. */
static inline void check_set_context(const char *line)
{
	pthread_mutex_lock(&check_state.lock);
	check_state.context = line;
	pthread_mutex_unlock(&check_state.lock);
}

/* Sets how CHECK_CU and REQUIRE_CU name a result code in their messages. */
static inline void check_name_codes(const char *(*name_code)(int code))
{
	pthread_mutex_lock(&check_state.lock);
	check_state.name_code = name_code;
	pthread_mutex_unlock(&check_state.lock);
}

static inline void check_pass(void)
{
	pthread_mutex_lock(&check_state.lock);
	check_state.passed++;
	pthread_mutex_unlock(&check_state.lock);
}

/* Counts and prints a failure: "file:line: FAIL: expr: message" (expr may be NULL). */
static inline void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&check_state.lock);
	check_state.failed++;
	if (check_state.context && !check_state.context_shown)
		fprintf(stderr, "%s\n", check_state.context);
	check_state.context_shown = 1;
	if (expr)
		fprintf(stderr, "%s:%d: FAIL: %s: %s\n", file, line, expr, msg);
	else
		fprintf(stderr, "%s:%d: FAIL: %s\n", file, line, msg);
	pthread_mutex_unlock(&check_state.lock);
}

static inline const char *check_code_name(int code)
{
	const char *s = check_state.name_code ? check_state.name_code(code) : NULL;

	return s ? s : "?";
}

/* A CUDA call returned `got` where `want` was due. */
static inline void check_fail_code(const char *file, int line, const char *call, int got, int want)
{
	if (want == 0)
		check_fail(file, line, call, "returned %s (%d)", check_code_name(got), got);
	else
		check_fail(file, line, call, "returned %s (%d), expected %s (%d)", check_code_name(got), got,
			   check_code_name(want), want);
}

static inline int check_failures(void)
{
	int n;

	pthread_mutex_lock(&check_state.lock);
	n = check_state.failed;
	pthread_mutex_unlock(&check_state.lock);
	return n;
}

/* Ends the program after a failed REQUIRE. */
static inline void check_stop(void) __attribute__((noreturn));
static inline void check_stop(void)
{
	fprintf(stderr, "%s: stopped at a failed REQUIRE (%d failed)\n", program_invocation_short_name,
		check_failures());
	exit(1);
}

/* Prints the closing line "NAME: N passed, N failed"; the exit status. */
static inline int check_finish(const char *name)
{
	int passed, failed;

	pthread_mutex_lock(&check_state.lock);
	passed = check_state.passed;
	failed = check_state.failed;
	pthread_mutex_unlock(&check_state.lock);
	fflush(stderr);
	printf("%s: %d passed, %d failed\n", name, passed, failed);
	fflush(stdout);
	return failed ? 1 : 0;
}

#define CHECK(cond, ...)                                                    \
	__extension__({                                                     \
		int check_ok_ = !!(cond);                                   \
		if (check_ok_)                                              \
			check_pass();                                       \
		else                                                        \
			check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
		check_ok_;                                                  \
	})

#define REQUIRE(cond, ...)                                                  \
	do {                                                                \
		if (cond) {                                                 \
			check_pass();                                       \
		} else {                                                    \
			check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
			check_stop();                                       \
		}                                                           \
	} while (0)

#define CHECK_CU(call, want)                                                          \
	__extension__({                                                               \
		int check_got_ = (int)(call), check_want_ = (int)(want);              \
		int check_ok_ = check_got_ == check_want_;                            \
		if (check_ok_)                                                        \
			check_pass();                                                 \
		else                                                                  \
			check_fail_code(__FILE__, __LINE__, #call, check_got_, check_want_); \
		check_ok_;                                                            \
	})

#define REQUIRE_CU(call)                                                       \
	do {                                                                   \
		int check_got_ = (int)(call);                                  \
		if (check_got_ == 0) {                                         \
			check_pass();                                          \
		} else {                                                       \
			check_fail_code(__FILE__, __LINE__, #call, check_got_, 0); \
			check_stop();                                          \
		}                                                              \
	} while (0)

#endif
