// SPDX-License-Identifier: MIT
/*
 * Linux futex system call wrappers; see futex.h.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/futex.h"

int mps_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	long r;

	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
		ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
		tsp = &ts;
	}
	r = syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, NULL, 0);
	if (r == 0)
		return 0;
	if (errno == EAGAIN)
		return 0;
	return -errno;
}

void mps_futex_wake(uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}
