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
	REQUIRE_CU(cuInit(0));
	{
		/* openmps's library, if it is the one loaded, says it passes through. */
		int (*mode)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openmps_client_mode");

		CHECK(!mode || mode() == 1, "openmps's library is not passing through (mode %d)", mode ? mode() : -1);
	}
	REQUIRE_CU(cuDeviceGetCount(&count));
	REQUIRE_CU(cuDeviceGetName(name, sizeof(name), 0));
	REQUIRE_CU(cuDeviceGetUuid(&uuid, 0));
	REQUIRE_CU(cuDeviceTotalMem(&total, 0));
	REQUIRE_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	REQUIRE_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	printf("%d device(s); device 0: %s, %zu bytes, cc %d.x, %d SMs, uuid byte0 %02x\n", count, name, total,
	       major, sms, (unsigned char)uuid.bytes[0]);
	t_primary(0);
	vadd = t_func(t_module(), "vadd");
	for (int i = 0; i < N; i++) {
		a[i] = (float)(i % 17) + 1;
		b[i] = (float)(i % 5) * 2 - 3;
	}
	REQUIRE_CU(cuMemAlloc(&da, sizeof(a)));
	REQUIRE_CU(cuMemAlloc(&db, sizeof(b)));
	REQUIRE_CU(cuMemAlloc(&dc, sizeof(c)));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&e0, 0));
	REQUIRE_CU(cuEventCreate(&e1, 0));
	REQUIRE_CU(cuMemcpyHtoDAsync(da, a, sizeof(a), s));
	REQUIRE_CU(cuMemcpyHtoDAsync(db, b, sizeof(b), s));
	REQUIRE_CU(cuEventRecord(e0, s));
	{
		void *args[] = { &da, &db, &dc, &n };

		REQUIRE_CU(t_launch(vadd, (N + 127) / 128, 128, s, args));
	}
	REQUIRE_CU(cuEventRecord(e1, s));
	REQUIRE_CU(cuMemcpyDtoHAsync(c, dc, sizeof(c), s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuEventElapsedTime(&ms, e0, e1));
	for (int i = 0; i < N; i++) {
		CHECK(c[i] == a[i] + b[i], "c[%d] = %g, want %g", i, c[i], a[i] + b[i]);
		sum += (unsigned long long)(c[i] + 100);
	}
	printf("vadd of %d elements: checksum %llu, elapsed time %s\n", N, sum, ms >= 0 ? "valid" : "negative");
	CHECK_CU(cuMemFree(dc + 4), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
	REQUIRE_CU(cuEventDestroy(e0));
	REQUIRE_CU(cuEventDestroy(e1));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(0));
	return check_failures() ? T_FAIL : T_PASS;
}
