// SPDX-License-Identifier: MIT
/*
 * The scheduler's time slice of the calling thread. Linux's EEVDF scheduler
 * (6.12 and later) lets a thread ask for a slice of its own: when runnable
 * threads outnumber the CPUs, one that waits for a CPU waits at most about
 * the slices of those ahead of it (3.75 ms each by default on 16 CPUs),
 * while its CPU share stays what its nice value gives.
 */
#ifndef OPENMPS_COMMON_SLICE_H
#define OPENMPS_COMMON_SLICE_H

#include <stdint.h>

/* Asks for a slice of `ns` (0: the default) for the calling thread.
 * Returns 0, or -errno where the kernel cannot (older kernels: -EINVAL). */
int mps_set_slice(uint64_t ns);

#endif
