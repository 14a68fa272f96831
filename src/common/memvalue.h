// SPDX-License-Identifier: MIT
/*
 * Memory sizes as NVIDIA's control daemon writes them: an integer followed by
 * M or G ("512M", "10G"), or a plain 0 for "no limit". Used by the control
 * daemon for the pinned device memory limits and by the server for its own
 * limits on pinned host memory.
 */
#ifndef MPS_COMMON_MEMVALUE_H
#define MPS_COMMON_MEMVALUE_H

#include <stdint.h>

#define MPS_MEM_VALUE_MAX (1ull << 50)   /* 1 PiB: no device or host has more */

/* 0 and the value in bytes, or -EINVAL. */
int mps_parse_mem_value(const char *text, uint64_t *bytes);

#endif
