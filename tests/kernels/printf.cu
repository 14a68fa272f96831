// SPDX-License-Identifier: MIT
/*
 * A kernel that prints, apart from kernels.cu so that only the test of
 * device printf loads a module that prints (a process whose modules print
 * asks the server for their output at every synchronize). Each thread
 * prints one line; tests/standin/twins.c prints the same lines.
 */
extern "C" __global__ void printf_u32(unsigned int v)
{
	printf("openmps printf %u thread %u\n", v, threadIdx.x);
}
