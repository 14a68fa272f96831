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

	REQUIRE_CU(t_launch(spin_store, 1, 32, s, args));
}

static void reset_flag(void)
{
	REQUIRE_CU(cuMemsetD32(flag, POISON, 1));
	REQUIRE_CU(cuCtxSynchronize());
	*pinned = 0x0u;
}

static void test_create(void)
{
	CUstream s;
	unsigned int flags = 99;
	int least = 0, greatest = 0, prio = 99;
	CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_ACTIVE;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	REQUIRE_CU(cuStreamGetFlags(s, &flags));
	CHECK(flags == CU_STREAM_DEFAULT, "flags of a default stream: 0x%x", flags);
	REQUIRE_CU(cuStreamGetPriority(s, &prio));
	CHECK(prio == 0, "priority of a stream created without one: %d", prio);
	REQUIRE_CU(cuStreamIsCapturing(s, &cap));
	CHECK(cap == CU_STREAM_CAPTURE_STATUS_NONE, "a new stream is capturing (%d)", (int)cap);
	REQUIRE_CU(cuStreamQuery(s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuStreamDestroy(s));

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamGetFlags(s, &flags));
	CHECK(flags == CU_STREAM_NON_BLOCKING, "flags of a non-blocking stream: 0x%x", flags);
	REQUIRE_CU(cuStreamDestroy(s));

	REQUIRE_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
	printf("  stream priorities %d (least) .. %d (greatest)\n", least, greatest);
	REQUIRE_CU(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest));
	REQUIRE_CU(cuStreamGetPriority(s, &prio));
	CHECK(prio == greatest, "priority %d, expected %d", prio, greatest);
	REQUIRE_CU(cuStreamGetFlags(s, &flags));
	CHECK(flags == CU_STREAM_NON_BLOCKING, "flags of a prioritised non-blocking stream: 0x%x", flags);
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuStreamCreateWithPriority(&s, 0, greatest - 100));
	REQUIRE_CU(cuStreamGetPriority(s, &prio));
	CHECK(prio == greatest, "priority %d beyond the range was not clamped to %d: %d", greatest - 100, greatest,
	      prio);
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuStreamCreateWithPriority(&s, 0, least + 100));
	REQUIRE_CU(cuStreamGetPriority(s, &prio));
	CHECK(prio == least, "priority %d beyond the range was not clamped to %d: %d", least + 100, least, prio);
	REQUIRE_CU(cuStreamDestroy(s));
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
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemAlloc(&d, sizeof(init)));
	REQUIRE_CU(cuMemcpyHtoDAsync(d, init, sizeof(init), s));
	for (int k = 0; k < K; k++) {
		void *args[] = { &d, &mul[k], &add[k], &n };

		REQUIRE_CU(t_launch(f, N / 128, 128, s, args));
	}
	memset(got, 0, sizeof(got));
	REQUIRE_CU(cuMemcpyDtoHAsync(got, d, sizeof(got), s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CMP_U32(got, want, N, "50 affine_u32 launches on one stream");
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s));
}

static void test_query(void)
{
	CUstream s;
	CUresult r;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	reset_flag();
	launch_spin_store(s, T_SPIN_200MS, 0x600du);
	r = cuStreamQuery(s);
	CHECK_CU(r, CUDA_ERROR_NOT_READY);
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK_CU(cuStreamQuery(s), CUDA_SUCCESS);
	REQUIRE_CU(cuMemcpyDtoH(pinned, flag, 4));
	CHECK(*pinned == 0x600du, "flag 0x%x after synchronize, expected 0x600d", *pinned);
	REQUIRE_CU(cuStreamDestroy(s));
}

/* A serving loop's waits: the same synchronize, then the same small copy
 * back, again and again, each after a kernel that takes 20 ms (long enough
 * that a server slowed by a loaded machine still hands the reply to the
 * GPU well before the kernel ends) — then much shorter kernels, so that a
 * wait that napped as long as the earlier ones lasted
 * (OPENMPS_CLIENT_SPIN_US=0 makes openmps's client nap:
 * tests/system/naps.sh) wakes after the store and must still see it, and a
 * kernel's store must never be missed or taken from an earlier round. */
static void test_repeated_waits(void)
{
	CUstream s;
	CUevent e;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	for (int round = 0; round < 24; round++) {
		uint32_t v = (uint32_t)t_rand(&rng) | 1u, got = 0;
		long long cycles = round < 12 ? 20 * T_SPIN_1MS : T_SPIN_1MS / 8;

		launch_spin_store(s, cycles, v);
		if (round % 3 == 2) {
			REQUIRE_CU(cuEventRecord(e, s));
			REQUIRE_CU(cuEventSynchronize(e));
		} else {
			REQUIRE_CU(cuStreamSynchronize(s));
		}
		CHECK_CU(cuStreamQuery(s), CUDA_SUCCESS);
		launch_spin_store(s, cycles, v ^ 0x5a5a5a5au);
		REQUIRE_CU(cuMemcpyDtoHAsync(&got, flag, 4, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(got == (v ^ 0x5a5a5a5au), "round %d: flag 0x%x after the copy back, expected 0x%x", round, got,
		      v ^ 0x5a5a5a5au);
	}
	REQUIRE_CU(cuEventDestroy(e));
	REQUIRE_CU(cuStreamDestroy(s));
}

/* B waits for an event recorded on A after the slow store. */
static void test_wait_event(void)
{
	CUstream a, b;
	CUevent ev;
	uint32_t v = (uint32_t)t_rand(&rng) | 1;

	REQUIRE_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	reset_flag();
	launch_spin_store(a, T_SPIN_200MS, v);
	REQUIRE_CU(cuEventRecord(ev, a));
	REQUIRE_CU(cuStreamWaitEvent(b, ev, 0));
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, b));
	REQUIRE_CU(cuStreamSynchronize(b));
	CHECK(*pinned == v, "stream B copied 0x%x before A's store of 0x%x (cuStreamWaitEvent)", *pinned, v);
	REQUIRE_CU(cuStreamSynchronize(a));
	REQUIRE_CU(cuEventDestroy(ev));
	REQUIRE_CU(cuStreamDestroy(a));
	REQUIRE_CU(cuStreamDestroy(b));
}

/* The legacy default stream waits for blocking streams, and they wait for it. */
static void test_legacy(void)
{
	CUstream s;
	uint32_t v;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));

	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(s, T_SPIN_200MS, v);
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, 0));
	REQUIRE_CU(cuStreamSynchronize(0));
	CHECK(*pinned == v, "stream 0 copied 0x%x before a blocking stream's store of 0x%x", *pinned, v);
	REQUIRE_CU(cuStreamSynchronize(s));

	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(s, T_SPIN_200MS, v);
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, CU_STREAM_LEGACY));
	REQUIRE_CU(cuStreamSynchronize(CU_STREAM_LEGACY));
	CHECK(*pinned == v, "CU_STREAM_LEGACY copied 0x%x before a blocking stream's store of 0x%x", *pinned, v);
	REQUIRE_CU(cuStreamSynchronize(s));

	/* The other direction. */
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(0, T_SPIN_200MS, v);
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(*pinned == v, "a blocking stream copied 0x%x before stream 0's store of 0x%x", *pinned, v);
	REQUIRE_CU(cuCtxSynchronize());

	REQUIRE_CU(cuStreamDestroy(s));
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

	REQUIRE_CU(cuMemAlloc(&d, sizeof(got)));
	for (int i = 0; i < N; i++)
		want[i] = base + (uint32_t)i;

	/* CU_STREAM_PER_THREAD is a stream like any other. */
	REQUIRE_CU(cuMemsetD32Async(d, 0xeeeeeeeeu, N, CU_STREAM_PER_THREAD));
	REQUIRE_CU(t_launch(iota, (N + 255) / 256, 256, CU_STREAM_PER_THREAD, args));
	memset(got, 0, sizeof(got));
	REQUIRE_CU(cuMemcpyDtoHAsync(got, d, sizeof(got), CU_STREAM_PER_THREAD));
	REQUIRE_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CMP_U32(got, want, N, "iota_u32 on CU_STREAM_PER_THREAD");
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(CU_STREAM_PER_THREAD, T_SPIN_100MS, v);
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, CU_STREAM_PER_THREAD));
	REQUIRE_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CHECK(*pinned == v, "CU_STREAM_PER_THREAD copied 0x%x before its own store of 0x%x", *pinned, v);

	/* A non-blocking stream runs its work, in order. */
	REQUIRE_CU(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	base ^= 0x5a5a0000u;
	for (int i = 0; i < N; i++)
		want[i] = base + (uint32_t)i;
	REQUIRE_CU(cuMemsetD32Async(d, 0xeeeeeeeeu, N, nb));
	REQUIRE_CU(t_launch(iota, (N + 255) / 256, 256, nb, args));
	memset(got, 0, sizeof(got));
	REQUIRE_CU(cuMemcpyDtoHAsync(got, d, sizeof(got), nb));
	REQUIRE_CU(cuStreamSynchronize(nb));
	CMP_U32(got, want, N, "iota_u32 on a non-blocking stream");
	reset_flag();
	v = (uint32_t)t_rand(&rng) | 1;
	launch_spin_store(nb, T_SPIN_100MS, v);
	REQUIRE_CU(cuMemcpyDtoHAsync(pinned, flag, 4, nb));
	REQUIRE_CU(cuStreamSynchronize(nb));
	CHECK(*pinned == v, "a non-blocking stream copied 0x%x before its own store of 0x%x", *pinned, v);
	REQUIRE_CU(cuStreamDestroy(nb));
	REQUIRE_CU(cuMemFree(d));
}

/* Destroying a stream with work in flight lets the work finish. */
static void test_destroy_busy(void)
{
	CUstream s;
	uint32_t v = (uint32_t)t_rand(&rng) | 1;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	reset_flag();
	launch_spin_store(s, T_SPIN_100MS, v);
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(pinned, flag, 4));
	CHECK(*pinned == v, "work on a stream destroyed while busy: flag 0x%x, expected 0x%x", *pinned, v);
}

/* A synchronize after uploads from pageable memory (the program's buffer
 * is overwritten at once, as it may be): the stream is done for a query,
 * and what another stream, a stream made afterwards, a kernel and the
 * legacy stream read is the upload. openmps may answer such a synchronize
 * in the client and order later work after the uploads on the server
 * (server/streams.h: fences); with OPENMPS_STANDIN_SLOW_COPY_MS the
 * uploads land late, so a reader not ordered after them finds the old
 * contents. */
static void test_upload_sync(void)
{
	static const size_t sizes[] = { 16, 48 << 10, 256 << 10 };
	CUfunction f = t_func(mod, "affine_u32");

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t bytes = sizes[k], n = bytes / 4;
		uint32_t *src = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
		uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
		int ni = (int)n;
		CUstream a, b, c;
		CUdeviceptr d;

		REQUIRE(src && want && got, "out of memory");
		REQUIRE_CU(cuMemAlloc(&d, bytes));
		REQUIRE_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
		REQUIRE_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
		REQUIRE_CU(cuMemsetD32(d, POISON, n));
		REQUIRE_CU(cuStreamSynchronize(a));
		for (int round = 0; round < 4; round++) {
			void *args[] = { &d, &mul, &add, &ni };

			t_fill_u32(src, n, &rng);
			memcpy(want, src, bytes);
			REQUIRE_CU(cuStreamSynchronize(a));   /* seen idle: the upload follows that */
			REQUIRE_CU(cuMemcpyHtoDAsync(d, src, bytes, a));
			memset(src, 0xee, bytes);
			REQUIRE_CU(cuStreamSynchronize(a));
			CHECK_CU(cuStreamQuery(a), CUDA_SUCCESS);
			memset(got, 0, bytes);
			switch (round) {
			case 0:   /* another stream */
				REQUIRE_CU(cuMemcpyDtoHAsync(got, d, bytes, b));
				REQUIRE_CU(cuStreamSynchronize(b));
				break;
			case 1:   /* a stream made after, with a kernel */
				for (size_t i = 0; i < n; i++)
					want[i] = want[i] * mul + add;
				REQUIRE_CU(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
				REQUIRE_CU(t_launch(f, (unsigned int)(n + 127) / 128, 128, c, args));
				REQUIRE_CU(cuMemcpyDtoHAsync(got, d, bytes, c));
				REQUIRE_CU(cuStreamSynchronize(c));
				REQUIRE_CU(cuStreamDestroy(c));
				break;
			case 2:   /* the legacy stream, synchronously */
				REQUIRE_CU(cuMemcpyDtoH(got, d, bytes));
				break;
			default:  /* the same stream, after a second synchronize */
				REQUIRE_CU(cuStreamSynchronize(a));
				REQUIRE_CU(cuMemcpyDtoHAsync(got, d, bytes, a));
				REQUIRE_CU(cuStreamSynchronize(a));
				break;
			}
			CMP_U32(got, want, n, "an upload read after a synchronize");
		}
		REQUIRE_CU(cuStreamDestroy(a));
		REQUIRE_CU(cuStreamDestroy(b));
		REQUIRE_CU(cuMemFree(d));
		free(src);
		free(want);
		free(got);
	}
}

/* A synchronous upload and device copy return before their work is done
 * (as the driver's may; openmps's send them with a fence): a kernel
 * captured afterwards on a non-blocking stream, its graph launched there,
 * must still read them. With OPENMPS_STANDIN_SLOW_COPY_MS the copies land
 * late, so a graph not ordered after them reads the old contents. */
static void test_sync_copy_then_graph(void)
{
	enum { N = 64 };
	CUfunction f = t_func(mod, "affine_u32");
	uint32_t src[N], want[N], got[N], mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
	CUdeviceptr d, e;
	CUgraphExec ge;
	CUstream s;
	CUgraph g;
	int ni = N;

	REQUIRE_CU(cuMemAlloc(&d, sizeof(src)));
	REQUIRE_CU(cuMemAlloc(&e, sizeof(src)));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int round = 0; round < 4; round++) {
		CUdeviceptr x = round % 2 ? e : d;
		void *args[] = { &x, &mul, &add, &ni };

		t_fill_u32(src, N, &rng);
		REQUIRE_CU(cuMemcpyHtoD(d, src, sizeof(src)));
		if (round % 2)
			REQUIRE_CU(cuMemcpyDtoD(e, d, sizeof(src)));
		for (int i = 0; i < N; i++)
			want[i] = src[i] * mul + add;
		memset(src, 0xee, sizeof(src));
		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
		REQUIRE_CU(t_launch(f, 1, N, s, args));
		REQUIRE_CU(cuStreamEndCapture(s, &g));
		REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
		REQUIRE_CU(cuGraphLaunch(ge, s));
		REQUIRE_CU(cuMemcpyDtoHAsync(got, x, sizeof(got), s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CMP_U32(got, want, N, round % 2 ? "a device copy read by a graph captured after it"
						 : "a synchronous upload read by a graph captured after it");
		REQUIRE_CU(cuGraphExecDestroy(ge));
		REQUIRE_CU(cuGraphDestroy(g));
	}
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuMemFree(e));
	REQUIRE_CU(cuMemFree(d));
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
	REQUIRE_CU(cuMemAlloc(&flag, 4));
	REQUIRE_CU(cuMemAllocHost((void **)&pinned, 4));

	test_create();
	test_order();
	test_query();
	test_repeated_waits();
	test_wait_event();
	test_legacy();
	test_per_thread_and_nonblocking();
	test_destroy_busy();
	test_upload_sync();
	test_sync_copy_then_graph();

	REQUIRE_CU(cuMemFreeHost(pinned));
	REQUIRE_CU(cuMemFree(flag));
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
