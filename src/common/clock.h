// SPDX-License-Identifier: MIT
/*
 * Monotonic time in nanoseconds, for spin budgets and timeouts.
 */
#ifndef MPS_COMMON_CLOCK_H
#define MPS_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mps_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
