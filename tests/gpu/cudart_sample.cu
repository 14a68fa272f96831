// SPDX-License-Identifier: MIT
/*
 * A small CUDA runtime program of the kind users run: a vector add with
 * pinned host memory, a stream, and events around the work. tests/gpu/run.sh
 * builds it twice, with the static cudart (nvcc's default) and with
 * `-cudart shared`, and runs each on the real driver and under openmps: the
 * runtime reaches the driver through cuGetProcAddress and its private export
 * tables, which is what this exercises. Exits 0 when every element is right.
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

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

int main()
{
	const int n = 1 << 22;
	const size_t bytes = n * sizeof(float);
	float *ha, *hb, *hc, *da, *db, *dc, ms = -1;
	cudaStream_t s;
	cudaEvent_t start, stop;
	cudaDeviceProp prop;
	int count = 0, runtime = 0, driver = 0, bad = 0;

	CK(cudaGetDeviceCount(&count));
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaRuntimeGetVersion(&runtime));
	CK(cudaDriverGetVersion(&driver));
	printf("%d device(s); device 0: %s, %d SMs; runtime %d, driver %d\n", count, prop.name,
	       prop.multiProcessorCount, runtime, driver);

	CK(cudaMallocHost(&ha, bytes));
	CK(cudaMallocHost(&hb, bytes));
	CK(cudaMallocHost(&hc, bytes));
	for (int i = 0; i < n; i++) {
		ha[i] = (float)(i % 1000) * 0.5f + 1.0f;
		hb[i] = (float)(i % 977) * 0.25f - 3.0f;
		hc[i] = -12345.0f;
	}
	CK(cudaMalloc(&da, bytes));
	CK(cudaMalloc(&db, bytes));
	CK(cudaMalloc(&dc, bytes));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreate(&start));
	CK(cudaEventCreate(&stop));

	CK(cudaEventRecord(start, s));
	CK(cudaMemcpyAsync(da, ha, bytes, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(db, hb, bytes, cudaMemcpyHostToDevice, s));
	CK(cudaMemsetAsync(dc, 0xff, bytes, s));
	vadd<<<(n + 255) / 256, 256, 0, s>>>(da, db, dc, n);
	CK(cudaGetLastError());
	CK(cudaMemcpyAsync(hc, dc, bytes, cudaMemcpyDeviceToHost, s));
	CK(cudaEventRecord(stop, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaEventElapsedTime(&ms, start, stop));

	for (int i = 0; i < n; i++) {
		if (hc[i] != ha[i] + hb[i]) {
			if (bad++ < 5)
				fprintf(stderr, "c[%d] = %g, expected %g\n", i, hc[i], ha[i] + hb[i]);
		}
	}
	printf("vadd of %d floats: %s, %.3f ms between events\n", n, bad ? "WRONG" : "correct", ms);
	if (!(ms > 0.0f)) {
		fprintf(stderr, "elapsed time %g ms is not positive\n", ms);
		bad++;
	}

	CK(cudaEventDestroy(start));
	CK(cudaEventDestroy(stop));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dc));
	CK(cudaFreeHost(ha));
	CK(cudaFreeHost(hb));
	CK(cudaFreeHost(hc));
	return bad ? 1 : 0;
}
