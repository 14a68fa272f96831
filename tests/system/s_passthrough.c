// SPDX-License-Identifier: MIT
/*
 * A program that must behave identically with the real driver and with the
 * openmps client library when no daemon runs (pass-through). It uses only
 * functions every driver exports — the software stand-in's list included —
 * and prints everything it computes, deterministically, so the two runs'
 * outputs can be compared byte for byte (tests/system/passthrough.sh).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../cuda/common.h"

#define N 1000

int main(int argc, char **argv)
{
	float a[N], b[N], c[N];
	CUdeviceptr da, db, dc;
	CUfunction vadd;
	CUstream s;
	CUevent e0, e1;
	CUuuid uuid;
	char name[256];
	int n = N, count, major, sms;
	size_t total;
	unsigned long long sum = 0;
	float ms;

	t_init(argc, argv);
	CHECK(cuInit(0));
	{
		/* openmps's library, if it is the one loaded, says it passes through. */
		int (*mode)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openmps_client_mode");

		EXPECT(!mode || mode() == 1, "openmps's library is not passing through (mode %d)", mode ? mode() : -1);
	}
	CHECK(cuDeviceGetCount(&count));
	CHECK(cuDeviceGetName(name, sizeof(name), 0));
	CHECK(cuDeviceGetUuid(&uuid, 0));
	CHECK(cuDeviceTotalMem(&total, 0));
	CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	printf("%d device(s); device 0: %s, %zu bytes, cc %d.x, %d SMs, uuid byte0 %02x\n", count, name, total,
	       major, sms, (unsigned char)uuid.bytes[0]);
	t_primary(0);
	vadd = t_func(t_module(), "vadd");
	for (int i = 0; i < N; i++) {
		a[i] = (float)(i % 17) + 1;
		b[i] = (float)(i % 5) * 2 - 3;
	}
	CHECK(cuMemAlloc(&da, sizeof(a)));
	CHECK(cuMemAlloc(&db, sizeof(b)));
	CHECK(cuMemAlloc(&dc, sizeof(c)));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&e0, 0));
	CHECK(cuEventCreate(&e1, 0));
	CHECK(cuMemcpyHtoDAsync(da, a, sizeof(a), s));
	CHECK(cuMemcpyHtoDAsync(db, b, sizeof(b), s));
	CHECK(cuEventRecord(e0, s));
	{
		void *args[] = { &da, &db, &dc, &n };

		CHECK(t_launch(vadd, (N + 127) / 128, 128, s, args));
	}
	CHECK(cuEventRecord(e1, s));
	CHECK(cuMemcpyDtoHAsync(c, dc, sizeof(c), s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuEventElapsedTime(&ms, e0, e1));
	for (int i = 0; i < N; i++) {
		EXPECT(c[i] == a[i] + b[i], "c[%d] = %g, want %g", i, c[i], a[i] + b[i]);
		sum += (unsigned long long)(c[i] + 100);
	}
	printf("vadd of %d elements: checksum %llu, elapsed time %s\n", N, sum, ms >= 0 ? "valid" : "negative");
	CHECK_ERR(cuMemFree(dc + 4), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemFree(da));
	CHECK(cuMemFree(db));
	CHECK(cuMemFree(dc));
	CHECK(cuEventDestroy(e0));
	CHECK(cuEventDestroy(e1));
	CHECK(cuStreamDestroy(s));
	CHECK(cuDevicePrimaryCtxRelease(0));
	return t_failures() ? T_FAIL : T_PASS;
}
