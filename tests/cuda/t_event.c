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

	REQUIRE_CU(t_launch(spin_store, 1, 32, s, args));
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

		REQUIRE_CU(cuEventCreate(&e, flags[i]));
		CHECK(e != NULL, "cuEventCreate(0x%x) gave NULL", flags[i]);
		/* Never recorded: complete by definition. */
		CHECK_CU(cuEventQuery(e), CUDA_SUCCESS);
		REQUIRE_CU(cuEventSynchronize(e));
		REQUIRE_CU(cuEventRecord(e, 0));
		REQUIRE_CU(cuEventSynchronize(e));
		CHECK_CU(cuEventQuery(e), CUDA_SUCCESS);
		REQUIRE_CU(cuEventDestroy(e));
	}
	{
		CUevent e;

		/* INTERPROCESS requires DISABLE_TIMING. */
		CHECK_CU(cuEventCreate(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
	}
}

static void test_query_and_elapsed(CUstream s)
{
	CUevent start, end, mid, blocking;
	float ms_short = -1, ms_long = -1, ms = -1;
	double t0, host_ms;

	REQUIRE_CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
	REQUIRE_CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
	REQUIRE_CU(cuEventCreate(&mid, CU_EVENT_DEFAULT));
	REQUIRE_CU(cuEventCreate(&blocking, CU_EVENT_BLOCKING_SYNC));

	/* Both never recorded. */
	CHECK_CU(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_INVALID_HANDLE);

	/* ~200 ms between start and end; end is pending for a while. */
	t0 = t_now();
	REQUIRE_CU(cuEventRecord(start, s));
	spin(s, T_SPIN_200MS);
	REQUIRE_CU(cuEventRecord(end, s));
	CHECK_CU(cuEventQuery(end), CUDA_ERROR_NOT_READY);
	CHECK_CU(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_NOT_READY);
	REQUIRE_CU(cuEventSynchronize(end));
	host_ms = (t_now() - t0) * 1e3;
	CHECK_CU(cuEventQuery(end), CUDA_SUCCESS);
	REQUIRE_CU(cuEventElapsedTime(&ms_long, start, end));
	printf("  ~200 ms spin: %.2f ms between events, %.2f ms on the host\n", (double)ms_long, host_ms);
	CHECK(ms_long >= 50.0f && ms_long <= 5000.0f, "elapsed %.3f ms around a ~200 ms spin", (double)ms_long);
	CHECK(host_ms >= 50.0, "the host waited only %.3f ms for a ~200 ms spin", host_ms);

	/* ~1 ms: shorter than the long one, and positive. */
	REQUIRE_CU(cuEventRecord(start, s));
	spin(s, T_SPIN_1MS);
	REQUIRE_CU(cuEventRecord(end, s));
	REQUIRE_CU(cuEventSynchronize(end));
	REQUIRE_CU(cuEventElapsedTime(&ms_short, start, end));
	printf("  ~1 ms spin: %.3f ms between events\n", (double)ms_short);
	CHECK(ms_short > 0.0f && ms_short < ms_long, "elapsed %.3f ms around a ~1 ms spin (long one %.3f)",
	      (double)ms_short, (double)ms_long);

	/* cuEventRecordWithFlags, and a blocking-sync event. */
	REQUIRE_CU(cuEventRecordWithFlags(start, s, CU_EVENT_RECORD_DEFAULT));
	spin(s, T_SPIN_100MS);
	REQUIRE_CU(cuEventRecordWithFlags(mid, s, CU_EVENT_RECORD_DEFAULT));
	REQUIRE_CU(cuEventRecord(blocking, s));
	CHECK_CU(cuEventQuery(mid), CUDA_ERROR_NOT_READY);
	REQUIRE_CU(cuEventSynchronize(blocking));
	CHECK_CU(cuEventQuery(mid), CUDA_SUCCESS);
	REQUIRE_CU(cuEventElapsedTime(&ms, start, mid));
	CHECK(ms >= 25.0f && ms <= 2500.0f, "elapsed %.3f ms around a ~100 ms spin (RecordWithFlags)", (double)ms);

	REQUIRE_CU(cuEventDestroy(start));
	REQUIRE_CU(cuEventDestroy(end));
	REQUIRE_CU(cuEventDestroy(mid));
	REQUIRE_CU(cuEventDestroy(blocking));
}

static void test_disable_timing(CUstream s)
{
	CUevent a, b, timed;
	float ms = -1;

	REQUIRE_CU(cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuEventCreate(&b, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuEventCreate(&timed, CU_EVENT_DEFAULT));
	REQUIRE_CU(cuEventRecord(a, s));
	REQUIRE_CU(cuEventRecord(timed, s));
	spin(s, T_SPIN_1MS);
	REQUIRE_CU(cuEventRecord(b, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK_CU(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventElapsedTime(&ms, timed, b), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventElapsedTime(&ms, a, timed), CUDA_ERROR_INVALID_HANDLE);
	REQUIRE_CU(cuEventDestroy(a));
	REQUIRE_CU(cuEventDestroy(b));
	REQUIRE_CU(cuEventDestroy(timed));
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
	REQUIRE_CU(cuMemAlloc(&flag, 4));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	test_create_flags();
	test_query_and_elapsed(s);
	test_query_and_elapsed(0);
	test_disable_timing(s);

	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuMemFree(flag));
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
