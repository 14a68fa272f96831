// SPDX-License-Identifier: MIT
/*
 * What the queries frameworks make on every step cost the caller, in ns a
 * call: a decode step of an HF model asks the driver for the current
 * context's device hundreds of times, for the primary context's state,
 * kernel attributes, limits, capture status and error strings (145,000
 * calls for 32 tokens of GPT-2; docs/CALLS.md). Natively the driver answers
 * each; under openmps the client library does, so the figures compare the
 * two directly. (What a launch costs the caller is bench/launch.c's.)
 *
 *   queries [CALLS]   (default 1,000,000 a query)
 *
 * Prints key=value lines: <query>_ns for each.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static CUfunction empty;
static CUstream stream;

static void q_ctx_get_device(void)
{
	CUdevice d;

	B_CHECK(cuCtxGetDevice(&d));
}

static void q_ctx_get_current(void)
{
	CUcontext c;

	B_CHECK(cuCtxGetCurrent(&c));
}

static void q_primary_state(void)
{
	unsigned int flags;
	int active;

	B_CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active));
}

static void q_func_attribute(void)
{
	int v;

	B_CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, empty));
}

static void q_ctx_get_limit(void)
{
	size_t v;

	B_CHECK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
}

static void q_stream_is_capturing(void)
{
	CUstreamCaptureStatus s;

	B_CHECK(cuStreamIsCapturing(stream, &s));
}

static void q_error_string(void)
{
	const char *s;

	B_CHECK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
}

static void q_device_attribute(void)
{
	int v;

	B_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
}

static void q_device_get(void)
{
	CUdevice d;

	B_CHECK(cuDeviceGet(&d, 0));
}

static const struct {
	const char *name;
	void (*fn)(void);
} queries[] = {
	{ "ctx_get_device", q_ctx_get_device },
	{ "ctx_get_current", q_ctx_get_current },
	{ "primary_ctx_get_state", q_primary_state },
	{ "func_get_attribute", q_func_attribute },
	{ "ctx_get_limit", q_ctx_get_limit },
	{ "stream_is_capturing", q_stream_is_capturing },
	{ "get_error_string", q_error_string },
	{ "device_get_attribute", q_device_attribute },
	{ "device_get", q_device_get },
};

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1000000;
	CUcontext ctx;
	CUmodule mod;
	double t;

	if (calls < 1000)
		b_die("want at least 1000 calls, not %ld", calls);
	b_setup(&ctx);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&empty, mod, "empty"));
	B_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
		for (long i = 0; i < 1000; i++)   /* first calls fetch and cache */
			queries[q].fn();
		t = b_now();
		for (long i = 0; i < calls; i++)
			queries[q].fn();
		printf("%s_ns=%.1f\n", queries[q].name, (b_now() - t) / (double)calls * 1e9);
	}
	B_CHECK(cuStreamDestroy(stream));
	B_CHECK(cuModuleUnload(mod));
	B_CHECK(cuDevicePrimaryCtxRelease(0));
	return 0;
}
