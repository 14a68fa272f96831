// SPDX-License-Identifier: MIT
/*
 * A program written against the CUDA runtime (cudart, linked statically),
 * as most programs are, rather than the driver API: cudart reaches the
 * driver through its private export tables and loads its kernels lazily,
 * from whichever thread first launches one — which may be a thread that has
 * no context yet (PyTorch's autograd thread is one). Checked:
 *   - a thread that never called cudaSetDevice launches the program's first
 *     kernel (cudart loads its library there) and gets the right result;
 *   - the main thread then launches another kernel of the same library;
 *   - pinned memory (cudaMallocHost) copied asynchronously on a stream,
 *     ordered by an event, round trip exact;
 *   - cudaGetLastError and cudaDeviceSynchronize report no error.
 * Built with nvcc for PTX only and with the PTX uncompressed, so that it
 * runs on the stand-in driver as well as on a GPU.
 */
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <cuda_runtime.h>

#include "../kernels/kernels.cu"
#include "codes.h"

enum { N = 5000 };

static void check_iota(const unsigned *h, unsigned base, const char *what)
{
	for (int i = 0; i < N; i++) {
		if (h[i] != base + (unsigned)i) {
			CHECK(false, "%s: word %d is %u, expected %u", what, i, h[i], base + (unsigned)i);
			return;
		}
	}
}

int main()
{
	static unsigned h[N];
	unsigned *d = nullptr, *pinned = nullptr, base = 0x1234u + (unsigned)std::rand() % 1000;
	cudaStream_t s;
	cudaEvent_t ev;

	check_name_codes(cudart_code_name);

	CHECK_CU(cudaMalloc(&d, N * sizeof(unsigned)), cudaSuccess);
	CHECK_CU(cudaMemset(d, 0xa5, N * sizeof(unsigned)), cudaSuccess);
	CHECK_CU(cudaDeviceSynchronize(), cudaSuccess);

	/* The first launch of the program, from a thread with no context. */
	std::thread t([&] {
		iota_u32<<<(N + 127) / 128, 128>>>(d, base, N);
		CHECK_CU(cudaGetLastError(), cudaSuccess);
		CHECK_CU(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
	});
	t.join();
	check_iota(h, base, "iota_u32 launched first from a new thread");

	/* Another kernel of the same library, from the main thread: p = p * 3 + 7. */
	affine_u32<<<(N + 255) / 256, 256>>>(d, 3u, 7u, N);
	CHECK_CU(cudaGetLastError(), cudaSuccess);
	CHECK_CU(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
	for (int i = 0; i < N; i++) {
		unsigned want = (base + (unsigned)i) * 3u + 7u;

		if (h[i] != want) {
			CHECK(false, "affine_u32: word %d is %u, expected %u", i, h[i], want);
			break;
		}
	}

	/* Pinned memory on a stream, ordered by an event. */
	CHECK_CU(cudaMallocHost(&pinned, N * sizeof(unsigned)), cudaSuccess);
	CHECK_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	CHECK_CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
	if (pinned) {
		for (int i = 0; i < N; i++)
			pinned[i] = 0x9e3779b9u * (unsigned)(i + 1);
		CHECK_CU(cudaMemcpyAsync(d, pinned, N * sizeof(unsigned), cudaMemcpyHostToDevice, s), cudaSuccess);
		CHECK_CU(cudaEventRecord(ev, s), cudaSuccess);
		CHECK_CU(cudaStreamWaitEvent(0, ev, 0), cudaSuccess);
		affine_u32<<<(N + 255) / 256, 256>>>(d, 1u, 1u, N);
		CHECK_CU(cudaGetLastError(), cudaSuccess);
		CHECK_CU(cudaDeviceSynchronize(), cudaSuccess);
		for (int i = 0; i < N; i++)
			pinned[i] = 0;
		CHECK_CU(cudaMemcpyAsync(pinned, d, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s), cudaSuccess);
		CHECK_CU(cudaStreamSynchronize(s), cudaSuccess);
		for (int i = 0; i < N; i++) {
			unsigned want = 0x9e3779b9u * (unsigned)(i + 1) + 1u;

			if (pinned[i] != want) {
				CHECK(false, "pinned round trip: word %d is %u, expected %u", i, pinned[i], want);
				break;
			}
		}
	}
	CHECK_CU(cudaEventDestroy(ev), cudaSuccess);
	CHECK_CU(cudaStreamDestroy(s), cudaSuccess);
	CHECK_CU(cudaFreeHost(pinned), cudaSuccess);
	CHECK_CU(cudaFree(d), cudaSuccess);
	CHECK_CU(cudaDeviceSynchronize(), cudaSuccess);
	return check_finish("r_threads");
}
