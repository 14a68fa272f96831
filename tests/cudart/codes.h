// SPDX-License-Identifier: MIT
/*
 * The cudart programs check with tests/check.h like every test; this adds
 * the runtime's names for its result codes, so that a failed CHECK_CU or
 * REQUIRE_CU names cudaErrorInvalidValue rather than 1. Each program's
 * main() calls check_name_codes(cudart_code_name) first.
 */
#ifndef TESTS_CUDART_CODES_H
#define TESTS_CUDART_CODES_H

#include <cuda_runtime.h>

#include "../check.h"

static inline const char *cudart_code_name(int code)
{
	return cudaGetErrorName(static_cast<cudaError_t>(code));
}

#endif
