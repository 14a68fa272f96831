// SPDX-License-Identifier: MIT
/*
 * Events: creation with each flag, record (plain and WithFlags), query
 * while a ~200 ms spin is running and after, synchronize, and elapsed time
 * around spins of known length (positive, plausible, and longer for a
 * longer spin; the bounds are generous because a GPU's clock and a
 * server's queueing both stretch time). The error cases the driver
 * defines: elapsed time on a DISABLE_TIMING event, on an event never
 * recorded, and on one not yet complete.
 */
#include <stdio.h>

#include "common.h"

static CUfunction spin_store;
static CUdeviceptr flag;

static void spin(CUstream s, long long cycles)
{
	uint32_t value = 0x5eed;
	void *args[] = { &cycles, &flag, &value };

	CHECK(t_launch(spin_store, 1, 32, s, args));
}

static void test_create_flags(void)
{
	static const unsigned int flags[] = {
		CU_EVENT_DEFAULT, CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING,
		CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING,
		CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS,
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		CUevent e = NULL;

		CHECK(cuEventCreate(&e, flags[i]));
		EXPECT(e != NULL, "cuEventCreate(0x%x) gave NULL", flags[i]);
		/* Never recorded: complete by definition. */
		CHECK_ERR(cuEventQuery(e), CUDA_SUCCESS);
		CHECK(cuEventSynchronize(e));
		CHECK(cuEventRecord(e, 0));
		CHECK(cuEventSynchronize(e));
		CHECK_ERR(cuEventQuery(e), CUDA_SUCCESS);
		CHECK(cuEventDestroy(e));
	}
	{
		CUevent e;

		/* INTERPROCESS requires DISABLE_TIMING. */
		CHECK_ERR(cuEventCreate(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
	}
}

static void test_query_and_elapsed(CUstream s)
{
	CUevent start, end, mid, blocking;
	float ms_short = -1, ms_long = -1, ms = -1;
	double t0, host_ms;

	CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&mid, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&blocking, CU_EVENT_BLOCKING_SYNC));

	/* Both never recorded. */
	CHECK_ERR(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_INVALID_HANDLE);

	/* ~200 ms between start and end; end is pending for a while. */
	t0 = t_now();
	CHECK(cuEventRecord(start, s));
	spin(s, T_SPIN_200MS);
	CHECK(cuEventRecord(end, s));
	CHECK_ERR(cuEventQuery(end), CUDA_ERROR_NOT_READY);
	CHECK_ERR(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_NOT_READY);
	CHECK(cuEventSynchronize(end));
	host_ms = (t_now() - t0) * 1e3;
	CHECK_ERR(cuEventQuery(end), CUDA_SUCCESS);
	CHECK(cuEventElapsedTime(&ms_long, start, end));
	printf("  ~200 ms spin: %.2f ms between events, %.2f ms on the host\n", (double)ms_long, host_ms);
	EXPECT(ms_long >= 50.0f && ms_long <= 5000.0f, "elapsed %.3f ms around a ~200 ms spin", (double)ms_long);
	EXPECT(host_ms >= 50.0, "the host waited only %.3f ms for a ~200 ms spin", host_ms);

	/* ~1 ms: shorter than the long one, and positive. */
	CHECK(cuEventRecord(start, s));
	spin(s, T_SPIN_1MS);
	CHECK(cuEventRecord(end, s));
	CHECK(cuEventSynchronize(end));
	CHECK(cuEventElapsedTime(&ms_short, start, end));
	printf("  ~1 ms spin: %.3f ms between events\n", (double)ms_short);
	EXPECT(ms_short > 0.0f && ms_short < ms_long, "elapsed %.3f ms around a ~1 ms spin (long one %.3f)",
	       (double)ms_short, (double)ms_long);

	/* cuEventRecordWithFlags, and a blocking-sync event. */
	CHECK(cuEventRecordWithFlags(start, s, CU_EVENT_RECORD_DEFAULT));
	spin(s, T_SPIN_100MS);
	CHECK(cuEventRecordWithFlags(mid, s, CU_EVENT_RECORD_DEFAULT));
	CHECK(cuEventRecord(blocking, s));
	CHECK_ERR(cuEventQuery(mid), CUDA_ERROR_NOT_READY);
	CHECK(cuEventSynchronize(blocking));
	CHECK_ERR(cuEventQuery(mid), CUDA_SUCCESS);
	CHECK(cuEventElapsedTime(&ms, start, mid));
	EXPECT(ms >= 25.0f && ms <= 2500.0f, "elapsed %.3f ms around a ~100 ms spin (RecordWithFlags)", (double)ms);

	CHECK(cuEventDestroy(start));
	CHECK(cuEventDestroy(end));
	CHECK(cuEventDestroy(mid));
	CHECK(cuEventDestroy(blocking));
}

static void test_disable_timing(CUstream s)
{
	CUevent a, b, timed;
	float ms = -1;

	CHECK(cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&b, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&timed, CU_EVENT_DEFAULT));
	CHECK(cuEventRecord(a, s));
	CHECK(cuEventRecord(timed, s));
	spin(s, T_SPIN_1MS);
	CHECK(cuEventRecord(b, s));
	CHECK(cuStreamSynchronize(s));
	CHECK_ERR(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
	CHECK_ERR(cuEventElapsedTime(&ms, timed, b), CUDA_ERROR_INVALID_HANDLE);
	CHECK_ERR(cuEventElapsedTime(&ms, a, timed), CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuEventDestroy(a));
	CHECK(cuEventDestroy(b));
	CHECK(cuEventDestroy(timed));
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUmodule mod;
	CUstream s;

	t_init(argc, argv);
	dev = t_device();
	t_primary(dev);
	mod = t_module();
	spin_store = t_func(mod, "spin_then_store");
	CHECK(cuMemAlloc(&flag, 4));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	test_create_flags();
	test_query_and_elapsed(s);
	test_query_and_elapsed(0);
	test_disable_timing(s);

	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(flag));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
