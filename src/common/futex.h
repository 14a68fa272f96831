// SPDX-License-Identifier: MIT
/*
 * Futex waits and wakes on 32-bit words, also on words in memory shared
 * between processes (so never FUTEX_PRIVATE). Callers use them for the
 * "sleep only after announcing it, wake only when announced" handshakes of the
 * ring and the reply slots; spurious wakeups are allowed, so every caller
 * re-checks its condition in a loop.
 */
#ifndef MPS_COMMON_FUTEX_H
#define MPS_COMMON_FUTEX_H

#include <stdint.h>

/* Sleeps while *word == expected, at most timeout_ns (0: no limit).
 * Returns 0 when woken (or the word had changed), -ETIMEDOUT, or -EINTR. */
int mps_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);

/* Wakes up to n waiters on word. */
void mps_futex_wake(uint32_t *word, int n);

#endif
