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
#include "check.h"

enum { N = 5000 };

static void check_iota(const unsigned *h, unsigned base, const char *what)
{
	for (int i = 0; i < N; i++) {
		if (h[i] != base + (unsigned)i) {
			EXPECT(false, "%s: word %d is %u, expected %u", what, i, h[i], base + (unsigned)i);
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

	CK(cudaMalloc(&d, N * sizeof(unsigned)));
	CK(cudaMemset(d, 0xa5, N * sizeof(unsigned)));
	CK(cudaDeviceSynchronize());

	/* The first launch of the program, from a thread with no context. */
	std::thread t([&] {
		iota_u32<<<(N + 127) / 128, 128>>>(d, base, N);
		CK(cudaGetLastError());
		CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	});
	t.join();
	check_iota(h, base, "iota_u32 launched first from a new thread");

	/* Another kernel of the same library, from the main thread: p = p * 3 + 7. */
	affine_u32<<<(N + 255) / 256, 256>>>(d, 3u, 7u, N);
	CK(cudaGetLastError());
	CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++) {
		unsigned want = (base + (unsigned)i) * 3u + 7u;

		if (h[i] != want) {
			EXPECT(false, "affine_u32: word %d is %u, expected %u", i, h[i], want);
			break;
		}
	}

	/* Pinned memory on a stream, ordered by an event. */
	CK(cudaMallocHost(&pinned, N * sizeof(unsigned)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	if (pinned) {
		for (int i = 0; i < N; i++)
			pinned[i] = 0x9e3779b9u * (unsigned)(i + 1);
		CK(cudaMemcpyAsync(d, pinned, N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
		CK(cudaEventRecord(ev, s));
		CK(cudaStreamWaitEvent(0, ev, 0));
		affine_u32<<<(N + 255) / 256, 256>>>(d, 1u, 1u, N);
		CK(cudaGetLastError());
		CK(cudaDeviceSynchronize());
		for (int i = 0; i < N; i++)
			pinned[i] = 0;
		CK(cudaMemcpyAsync(pinned, d, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		for (int i = 0; i < N; i++) {
			unsigned want = 0x9e3779b9u * (unsigned)(i + 1) + 1u;

			if (pinned[i] != want) {
				EXPECT(false, "pinned round trip: word %d is %u, expected %u", i, pinned[i], want);
				break;
			}
		}
	}
	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(pinned));
	CK(cudaFree(d));
	CK(cudaDeviceSynchronize());
	return finish("r_threads");
}
