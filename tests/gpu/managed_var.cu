// SPDX-License-Identifier: MIT
/*
 * __managed__ variables, as CUDA runtime programs use them: a counter and
 * an array declared __managed__ in the program's own code, written by the
 * CPU, changed by kernels, read back by the CPU after a synchronize, many
 * times over, and copied with cudaMemcpyToSymbol/FromSymbol. The runtime
 * finds the variables when it loads the program's module and hands the
 * host code their addresses: the CPU reads and writes them there. Exits 0
 * when every value is right.
 */
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(call)                                                                          \
	do {                                                                              \
		cudaError_t e_ = (call);                                                  \
		if (e_ != cudaSuccess) {                                                  \
			fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, \
				cudaGetErrorName(e_), cudaGetErrorString(e_));            \
			return 1;                                                         \
		}                                                                         \
	} while (0)

#define N 4096

__managed__ int counter = 7;
__managed__ float vec[N];
__device__ int plain = 3;

__global__ void bump(int by)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		counter += by + plain;
}

__global__ void scale(float f)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < N)
		vec[i] = vec[i] * f + (float)i;
}

int main()
{
	int expect = 7, bad = 0, got = 0;

	if (counter != 7) {
		fprintf(stderr, "counter starts at %d, not 7\n", counter);
		return 1;
	}
	for (int round = 1; round <= 50; round++) {
		counter += round;   /* the CPU's write, seen by the next kernel */
		expect += round;
		bump<<<1, 32>>>(round);
		CK(cudaGetLastError());
		CK(cudaDeviceSynchronize());
		expect += round + 3;
		if (counter != expect) {
			fprintf(stderr, "round %d: counter %d, expected %d\n", round, counter, expect);
			return 1;
		}
	}
	for (int i = 0; i < N; i++)
		vec[i] = (float)(i % 97);
	scale<<<(N + 255) / 256, 256>>>(2.0f);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < N; i++)
		if (vec[i] != (float)(i % 97) * 2.0f + (float)i && bad++ < 5)
			fprintf(stderr, "vec[%d] = %g, expected %g\n", i, vec[i], (float)(i % 97) * 2.0f + (float)i);
	CK(cudaMemcpyFromSymbol(&got, counter, sizeof(got)));
	if (got != expect) {
		fprintf(stderr, "cudaMemcpyFromSymbol: %d, expected %d\n", got, expect);
		return 1;
	}
	got = 1000;
	CK(cudaMemcpyToSymbol(counter, &got, sizeof(got)));
	if (counter != 1000) {
		fprintf(stderr, "after cudaMemcpyToSymbol the CPU reads %d, expected 1000\n", counter);
		return 1;
	}
	if (bad) {
		fprintf(stderr, "%d wrong elements\n", bad);
		return 1;
	}
	printf("managed_var: ok (counter %d)\n", counter);
	return 0;
}
