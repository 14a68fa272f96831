// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime calls frameworks make around their kernels, each result
 * checked: device properties and attributes, memory info, occupancy,
 * function attributes (a kernel allowed more dynamic shared memory, then
 * launched with it), cudaLaunchKernelEx, events (query before and after,
 * elapsed time), stream queries, and four host threads each launching on
 * a stream of its own at the same time, its memory allocated and freed in
 * stream order (cudaMallocAsync, cudaFreeAsync), each result exact; the
 * __managed__ variable m_counter through the CPU and a kernel.
 * Built like r_threads (PTX only, uncompressed) to run on the stand-in too.
 */
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "../kernels/kernels.cu"
#include "codes.h"

enum { N = 4099 };

static bool iota_ok(const unsigned *h, unsigned base, int n)
{
	for (int i = 0; i < n; i++)
		if (h[i] != base + (unsigned)i)
			return false;
	return true;
}

static void properties()
{
	cudaDeviceProp p;
	int dev = -1, count = 0, sms = 0, maxt = 0;
	size_t fr = 0, total = 0;

	CHECK_CU(cudaGetDeviceCount(&count), cudaSuccess);
	CHECK(count >= 1, "%d devices", count);
	CHECK_CU(cudaGetDevice(&dev), cudaSuccess);
	CHECK(dev == 0, "current device %d", dev);
	std::memset(&p, 0, sizeof(p));
	CHECK_CU(cudaGetDeviceProperties(&p, 0), cudaSuccess);
	CHECK_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
	CHECK_CU(cudaDeviceGetAttribute(&maxt, cudaDevAttrMaxThreadsPerBlock, 0), cudaSuccess);
	CHECK(p.name[0] && sms > 0 && sms == p.multiProcessorCount && maxt == p.maxThreadsPerBlock,
	      "properties: '%s', %d SMs (attribute %d), %d threads (attribute %d)", p.name, p.multiProcessorCount, sms,
	      p.maxThreadsPerBlock, maxt);
	CHECK_CU(cudaMemGetInfo(&fr, &total), cudaSuccess);
	CHECK(total > 0 && fr <= total, "memory: %zu free of %zu", fr, total);
}

static void attributes_and_launch_ex()
{
	cudaFuncAttributes a;
	unsigned *d = nullptr, h[N];
	int blocks = 0, n = N;
	unsigned base = 77;

	std::memset(&a, 0, sizeof(a));
	CHECK_CU(cudaFuncGetAttributes(&a, iota_u32), cudaSuccess);
	CHECK(a.maxThreadsPerBlock >= 128, "iota_u32: %d threads per block at most", a.maxThreadsPerBlock);
	CHECK_CU(cudaFuncSetAttribute(iota_u32, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024), cudaSuccess);
	std::memset(&a, 0, sizeof(a));
	CHECK_CU(cudaFuncGetAttributes(&a, iota_u32), cudaSuccess);
	CHECK(a.maxDynamicSharedSizeBytes == 64 * 1024, "max dynamic shared memory %d after setting 64 KiB",
	      a.maxDynamicSharedSizeBytes);
	CHECK_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, iota_u32, 128, 0), cudaSuccess);
	CHECK(blocks > 0, "occupancy: %d blocks per SM", blocks);

	CHECK_CU(cudaMalloc(&d, sizeof(h)), cudaSuccess);
	/* 48 KiB of dynamic shared memory: more than the default allows. */
	iota_u32<<<(N + 127) / 128, 128, 48 * 1024>>>(d, base, n);
	CHECK_CU(cudaGetLastError(), cudaSuccess);
	CHECK_CU(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK(iota_ok(h, base, N), "iota_u32 with 48 KiB of dynamic shared memory");

	cudaLaunchConfig_t cfg;
	cudaLaunchAttribute attr[1];
	std::memset(&cfg, 0, sizeof(cfg));
	cfg.gridDim = dim3((N + 63) / 64);
	cfg.blockDim = dim3(64);
	attr[0].id = cudaLaunchAttributePriority;
	attr[0].val.priority = 0;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	base = 4242;
	CHECK_CU(cudaLaunchKernelEx(&cfg, iota_u32, d, base, n), cudaSuccess);
	CHECK_CU(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK(iota_ok(h, base, N), "iota_u32 through cudaLaunchKernelEx");
	CHECK_CU(cudaFree(d), cudaSuccess);
}

static void events_and_queries()
{
	cudaStream_t s;
	cudaEvent_t a, b;
	int *flag = nullptr;
	float ms = -1;

	CHECK_CU(cudaStreamCreate(&s), cudaSuccess);
	CHECK_CU(cudaEventCreate(&a), cudaSuccess);
	CHECK_CU(cudaEventCreate(&b), cudaSuccess);
	CHECK_CU(cudaMalloc(&flag, sizeof(int)), cudaSuccess);
	CHECK_CU(cudaEventRecord(a, s), cudaSuccess);
	/* About 20 ms of spinning: queries see it unfinished. */
	spin<<<1, 32, 0, s>>>(40000000LL, flag);
	CHECK_CU(cudaEventRecord(b, s), cudaSuccess);
	cudaError_t q = cudaStreamQuery(s), e = cudaEventQuery(b);
	CHECK(q == cudaErrorNotReady || q == cudaSuccess, "stream query while busy: %s", cudaGetErrorName(q));
	CHECK(e == cudaErrorNotReady || e == cudaSuccess, "event query while busy: %s", cudaGetErrorName(e));
	(void)cudaGetLastError();   /* a NotReady answer is not an error to keep */
	CHECK_CU(cudaEventSynchronize(b), cudaSuccess);
	CHECK_CU(cudaStreamQuery(s), cudaSuccess);
	CHECK_CU(cudaEventQuery(b), cudaSuccess);
	CHECK_CU(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
	CHECK(ms > 0 && ms < 60000, "elapsed %f ms", ms);
	CHECK_CU(cudaFree(flag), cudaSuccess);
	CHECK_CU(cudaEventDestroy(a), cudaSuccess);
	CHECK_CU(cudaEventDestroy(b), cudaSuccess);
	CHECK_CU(cudaStreamDestroy(s), cudaSuccess);
}

static void threads()
{
	enum { T = 4 };
	std::vector<std::thread> ts;
	static unsigned h[T][N];
	bool ok[T] = {};

	for (int t = 0; t < T; t++) {
		ts.emplace_back([t, &ok] {
			cudaStream_t s;
			unsigned *d = nullptr, base = 1000u * (unsigned)(t + 1);
			int n = N;

			CHECK_CU(cudaSetDevice(0), cudaSuccess);
			CHECK_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
			CHECK_CU(cudaMallocAsync(&d, sizeof(h[t]), s), cudaSuccess);
			for (int r = 0; r < 20; r++)
				iota_u32<<<(N + 127) / 128, 128, 0, s>>>(d, base + (unsigned)r, n);
			CHECK_CU(cudaGetLastError(), cudaSuccess);
			CHECK_CU(cudaMemcpyAsync(h[t], d, sizeof(h[t]), cudaMemcpyDeviceToHost, s), cudaSuccess);
			CHECK_CU(cudaStreamSynchronize(s), cudaSuccess);
			ok[t] = iota_ok(h[t], base + 19, N);
			CHECK_CU(cudaFreeAsync(d, s), cudaSuccess);
			CHECK_CU(cudaStreamSynchronize(s), cudaSuccess);
			CHECK_CU(cudaStreamDestroy(s), cudaSuccess);
		});
	}
	for (auto &t : ts)
		t.join();
	for (int t = 0; t < T; t++)
		CHECK(ok[t], "thread %d's result", t);
}

/* The kernels' __managed__ variable m_counter, as host code uses one: the
 * CPU writes it, a kernel changes it (bump_managed: m = m * 3 + by), the
 * CPU reads the result after a synchronize, round after round; and
 * cudaMemcpyFromSymbol / ToSymbol meet the CPU's view of it. */
static void managed_variable(void)
{
	unsigned int want = 0, got = 0;

	CHECK(m_counter == 0, "m_counter starts at %u", m_counter);
	for (unsigned int round = 1; round <= 20; round++) {
		m_counter = round * 1000u;
		want = round * 3000u + round;
		bump_managed<<<1, 32>>>(round);
		CHECK_CU(cudaGetLastError(), cudaSuccess);
		CHECK_CU(cudaDeviceSynchronize(), cudaSuccess);
		if (m_counter != want) {
			CHECK(m_counter == want, "round %u: m_counter %u, want %u", round, m_counter, want);
			return;
		}
	}
	CHECK_CU(cudaMemcpyFromSymbol(&got, m_counter, sizeof(got)), cudaSuccess);
	CHECK(got == want, "cudaMemcpyFromSymbol(m_counter): %u, want %u", got, want);
	got = 0xabcdu;
	CHECK_CU(cudaMemcpyToSymbol(m_counter, &got, sizeof(got)), cudaSuccess);
	CHECK(m_counter == 0xabcdu, "after cudaMemcpyToSymbol the CPU reads m_counter %#x, want 0xabcd", m_counter);
}

int main()
{
	check_name_codes(cudart_code_name);
	managed_variable();
	properties();
	attributes_and_launch_ex();
	events_and_queries();
	threads();
	CHECK_CU(cudaDeviceSynchronize(), cudaSuccess);
	return check_finish("r_runtime");
}
