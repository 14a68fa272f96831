// SPDX-License-Identifier: MIT
/*
 * A kernel that prints, apart from kernels.cu so that only the test of
 * device printf loads a module that prints (a process whose modules print
 * asks the server for their output at every synchronize). Each thread
 * prints one line; tests/standin/twins.c prints the same lines. assert_u32
 * fails a device assert in thread 0 when v is not 0 (the driver prints the
 * assert's message, the context dies with CUDA_ERROR_ASSERT).
 */
#include <assert.h>

extern "C" __global__ void printf_u32(unsigned int v)
{
	printf("openmps printf %u thread %u\n", v, threadIdx.x);
}

extern "C" __global__ void assert_u32(unsigned int v)
{
	assert(v == 0u || threadIdx.x != 0);
}
