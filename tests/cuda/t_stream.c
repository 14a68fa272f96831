// SPDX-License-Identifier: MIT
/*
 * Streams: creation with flags and priorities (clamped to the context's
 * range), queries, and above all ordering. Work on one stream runs in
 * issue order (50 affine updates whose result depends on that order); an
 * event wait orders two streams; the legacy default stream waits for, and
 * is waited on by, blocking streams; the per-thread default stream and
 * non-blocking streams run work in order.
 *
 * The slow side of each ordering check is spin_then_store: it spins for
 * about 200 ms and then writes a flag, so a consumer that is not ordered
 * after it reads the poison still in the flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static CUmodule mod;
static CUfunction spin_store;
static CUdeviceptr flag;
static uint32_t *pinned;          /* a pinned word the flag is copied into */
static uint64_t rng;

#define POISON 0xdeadbeefu

static void launch_spin_store(CUstream s, long long cycles, uint32_t value)
{
	void *args[] = { &cycles, &flag, &value };

	CHECK(t_launch(spin_store, 1, 32, s, args));
}

static void reset_flag(void)
{
	CHECK(cuMemsetD32(flag, POISON, 1));
	CHECK(cuCtxSynchronize());
	*pinned = 0x0u;
}

static void test_create(void)
{
	CUstream s;
	unsigned int flags = 99;
	int least = 0, greatest = 0, prio = 99;
	CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_ACTIVE;

	CHECK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CHECK(cuStreamGetFlags(s, &flags));
	EXPECT(flags == CU_STREAM_DEFAULT, "flags of a default stream: 0x%x", flags);
	CHECK(cuStreamGetPriority(s, &prio));
	EXPECT(prio == 0, "priority of a stream created without one: %d", prio);
	CHECK(cuStreamIsCapturing(s, &cap));
	EXPECT(cap == CU_STREAM_CAPTURE_STATUS_NONE, "a new stream is capturing (%d)", (int)cap);
	CHECK(cuStreamQuery(s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuStreamDestroy(s));

	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamGetFlags(s, &flags));
	EXPECT(flags == CU_STREAM_NON_BLOCKING, "flags of a non-blocking stream: 0x%x", flags);
	CHECK(cuStreamDestroy(s));

	CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
	printf("  stream priorities %d (least) .. %d (greatest)\n", least, greatest);
	CHECK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest));
	CHECK(cuStreamGetPriority(s, &prio));
	EXPECT(prio == greatest, "priority %d, expected %d", prio, greatest);
	CHECK(cuStreamGetFlags(s, &flags));
	EXPECT(flags == CU_STREAM_NON_BLOCKING, "flags of a prioritised non-blocking stream: 0x%x", flags);
	CHECK(cuStreamDestroy(s));
	CHECK(cuStreamCreateWithPriority(&s, 0, greatest - 100));
	CHECK(cuStreamGetPriority(s, &prio));
	EXPECT(prio == greatest, "priority %d beyond the range was not clamped to %d: %d", greatest - 100, greatest,
	       prio);
	CHECK(cuStreamDestroy(s));
	CHECK(cuStreamCreateWithPriority(&s, 0, least + 100));
	CHECK(cuStreamGetPriority(s, &prio));
	EXPECT(prio == least, "priority %d beyond the range was not clamped to %d: %d", least + 100, least, prio);
	CHECK(cuStreamDestroy(s));
}

/* 50 launches of p = p * mul + add: any reordering changes the result. */
static void test_order(void)
{
	enum { N = 4096, K = 50 };
	static uint32_t init[N], want[N], got[N];
	uint32_t mul[K], add[K];
	CUfunction f = t_func(mod, "affine_u32");
	CUstream s;
	CUdeviceptr d;
	int n = N;

	t_fill_u32(init, N, &rng);
	for (int k = 0; k < K; k++) {
		mul[k] = (uint32_t)t_rand(&rng) | 1;
		add[k] = (uint32_t)t_rand(&rng);
	}
	for (int i = 0; i < N; i++) {
		uint32_t v = init[i];

		for (int k = 0; k < K; k++)
			v = v * mul[k] + add[k];
		want[i] = v;
	}
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&d, sizeof(init)));
	CHECK(cuMemcpyHtoDAsync(d, init, sizeof(init), s));
	for (int k = 0; k < K; k++) {
		void *args[] = { &d, &mul[k], &add[k], &n };

		CHECK(t_launch(f, N / 128, 128, s, args));
	}
	memset(got, 0, sizeof(got));
	CHECK(cuMemcpyDtoHAsync(got, d, sizeof(got), s));
	CHECK(cuStreamSynchronize(s));
	CMP_U32(got, want, N, "50 affine_u32 launches on one stream");
	CHECK(cuMemFree(d));
	CHECK(cuStreamDestroy(s));
}

static void test_query(void)
{
	CUstream s;
	CUresult r;

	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	reset_flag();
	launch_spin_store(s, T_SPIN_200MS, 0x600du);
	r = cuStreamQuery(s);
	CHECK_ERR(r, CUDA_ERROR_NOT_READY);
	CHECK(cuStreamSynchronize(s));
	CHECK_ERR(cuStreamQuery(s), CUDA_SUCCESS);
	CHECK(cuMemcpyDtoH(pinned, flag, 4));
	EXPECT(*pinned == 0x600du, "flag 0x%x after synchronize, expected 0x600d", *pinned);
	CHECK(cuStreamDestroy(s));
}

/* B waits for an event recorded on A after the slow store. */
static void test_wait_event(void)
{
	CUstream a, b;
	CUevent ev;
	uint32_t v = (uint32_t)t_rand(&rng) | 1;

	CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	reset_flag();
	launch_spin_store(a, T_SPIN_200MS, v);
	CHECK(cuEventRecord(ev, a));
	CHECK(cuStreamWaitEvent(b, ev, 0));
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, b));
	CHECK(cuStreamSynchronize(b));
	EXPECT(*pinned == v, "stream B copied 0x%x before A's store of 0x%x (cuStreamWaitEvent)", *pinned, v);
	CHECK(cuStreamSynchronize(a));
	CHECK(cuEventDestroy(ev));
	CHECK(cuStreamDestroy(a));
	CHECK(cuStreamDestroy(b));
}

/* The legacy default stream waits for blocking streams, and they wait for it. */
static void test_legacy(void)
{
	CUstream s;
	uint32_t v;

	CHECK(cuStreamCreate(&s, CU_STREAM_DEFAULT));

	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(s, T_SPIN_200MS, v);
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, 0));
	CHECK(cuStreamSynchronize(0));
	EXPECT(*pinned == v, "stream 0 copied 0x%x before a blocking stream's store of 0x%x", *pinned, v);
	CHECK(cuStreamSynchronize(s));

	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(s, T_SPIN_200MS, v);
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, CU_STREAM_LEGACY));
	CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
	EXPECT(*pinned == v, "CU_STREAM_LEGACY copied 0x%x before a blocking stream's store of 0x%x", *pinned, v);
	CHECK(cuStreamSynchronize(s));

	/* The other direction. */
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(0, T_SPIN_200MS, v);
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, s));
	CHECK(cuStreamSynchronize(s));
	EXPECT(*pinned == v, "a blocking stream copied 0x%x before stream 0's store of 0x%x", *pinned, v);
	CHECK(cuCtxSynchronize());

	CHECK(cuStreamDestroy(s));
}

static void test_per_thread_and_nonblocking(void)
{
	CUfunction iota = t_func(mod, "iota_u32");
	enum { N = 10007 };
	static uint32_t got[N], want[N];
	CUdeviceptr d;
	CUstream nb;
	uint32_t base = (uint32_t)t_rand(&rng) | 1, v;
	int n = N;
	void *args[] = { &d, &base, &n };

	CHECK(cuMemAlloc(&d, sizeof(got)));
	for (int i = 0; i < N; i++)
		want[i] = base + (uint32_t)i;

	/* CU_STREAM_PER_THREAD is a stream like any other. */
	CHECK(cuMemsetD32Async(d, 0xeeeeeeeeu, N, CU_STREAM_PER_THREAD));
	CHECK(t_launch(iota, (N + 255) / 256, 256, CU_STREAM_PER_THREAD, args));
	memset(got, 0, sizeof(got));
	CHECK(cuMemcpyDtoHAsync(got, d, sizeof(got), CU_STREAM_PER_THREAD));
	CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CMP_U32(got, want, N, "iota_u32 on CU_STREAM_PER_THREAD");
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(CU_STREAM_PER_THREAD, T_SPIN_100MS, v);
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, CU_STREAM_PER_THREAD));
	CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	EXPECT(*pinned == v, "CU_STREAM_PER_THREAD copied 0x%x before its own store of 0x%x", *pinned, v);

	/* A non-blocking stream runs its work, in order. */
	CHECK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	base ^= 0x5a5a0000u;
	for (int i = 0; i < N; i++)
		want[i] = base + (uint32_t)i;
	CHECK(cuMemsetD32Async(d, 0xeeeeeeeeu, N, nb));
	CHECK(t_launch(iota, (N + 255) / 256, 256, nb, args));
	memset(got, 0, sizeof(got));
	CHECK(cuMemcpyDtoHAsync(got, d, sizeof(got), nb));
	CHECK(cuStreamSynchronize(nb));
	CMP_U32(got, want, N, "iota_u32 on a non-blocking stream");
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(nb, T_SPIN_100MS, v);
	CHECK(cuMemcpyDtoHAsync(pinned, flag, 4, nb));
	CHECK(cuStreamSynchronize(nb));
	EXPECT(*pinned == v, "a non-blocking stream copied 0x%x before its own store of 0x%x", *pinned, v);
	CHECK(cuStreamDestroy(nb));
	CHECK(cuMemFree(d));
}

/* Destroying a stream with work in flight lets the work finish. */
static void test_destroy_busy(void)
{
	CUstream s;
	uint32_t v = (uint32_t)t_rand(&rng) | 1;

	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	reset_flag();
	launch_spin_store(s, T_SPIN_100MS, v);
	CHECK(cuStreamDestroy(s));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(pinned, flag, 4));
	EXPECT(*pinned == v, "work on a stream destroyed while busy: flag 0x%x, expected 0x%x", *pinned, v);
}

int main(int argc, char **argv)
{
	CUdevice dev;

	t_init(argc, argv);
	rng = t_rng(3);
	dev = t_device();
	t_primary(dev);
	mod = t_module();
	spin_store = t_func(mod, "spin_then_store");
	CHECK(cuMemAlloc(&flag, 4));
	CHECK(cuMemAllocHost((void **)&pinned, 4));

	test_create();
	test_order();
	test_query();
	test_wait_event();
	test_legacy();
	test_per_thread_and_nonblocking();
	test_destroy_busy();

	CHECK(cuMemFreeHost(pinned));
	CHECK(cuMemFree(flag));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
