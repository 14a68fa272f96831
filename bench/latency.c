// SPDX-License-Identifier: MIT
/*
 * latency REQUESTS | flood SECONDS
 *
 * The two sides of a latency-sensitive client beside a best-effort one:
 *
 *   latency N  N requests, each one small kernel (one block of 128 threads
 *              spinning 20,000 cycles, ~10 µs) and a stream synchronize;
 *              prints p50_us, p99_us and mean_us of the request times
 *              (after 100 untimed requests).
 *   flood S    for S seconds, kernels of 8 blocks of 1024 threads per SM
 *              (four waves, each block spinning 200,000 cycles, ~0.1 ms)
 *              queued back to back, at most 4 in flight; prints kernels=N.
 *              Touches $LATENCY_READY once its first kernel ran.
 *
 * The SM count it sizes the flood by is the one it reads, so under an
 * active thread percentage or a partition the flood fills its own share.
 * Priorities, percentages and partitions come from the environment
 * (CUDA_MPS_*), as for any client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void latency(CUfunction spin, CUdeviceptr out, int n)
{
	long long cycles = 20000;
	void *args[] = { &cycles, &out };
	double *t = calloc((size_t)n, sizeof(*t)), sum = 0;
	CUstream s;

	if (!t)
		b_die("out of memory");
	B_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = -100; i < n; i++) {
		double t0 = b_now();

		B_CHECK(cuLaunchKernel(spin, 1, 1, 1, 128, 1, 1, 0, s, args, NULL));
		B_CHECK(cuStreamSynchronize(s));
		if (i >= 0)
			t[i] = (b_now() - t0) * 1e6;
	}
	for (int i = 0; i < n; i++)
		sum += t[i];
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	printf("p50_us=%.1f\np99_us=%.1f\nmean_us=%.1f\n", t[n / 2], t[(n * 99) / 100], sum / n);
	free(t);
}

static void flood(CUfunction spin, CUdeviceptr out, int sms, double seconds)
{
	long long cycles = 200000;
	void *args[] = { &cycles, &out };
	const char *ready = getenv("LATENCY_READY");
	unsigned int blocks = (unsigned int)sms * 8;
	CUevent ev[4];
	CUstream s;
	long kernels = 0;
	double end;

	B_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 4; i++)
		B_CHECK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
	end = b_now() + seconds;
	while (b_now() < end) {
		int slot = (int)(kernels % 4);

		if (kernels >= 4)
			B_CHECK(cuEventSynchronize(ev[slot]));
		B_CHECK(cuLaunchKernel(spin, blocks, 1, 1, 1024, 1, 1, 0, s, args, NULL));
		B_CHECK(cuEventRecord(ev[slot], s));
		if (++kernels == 1 && ready) {
			B_CHECK(cuEventSynchronize(ev[0]));
			b_touch(ready);
		}
	}
	B_CHECK(cuStreamSynchronize(s));
	printf("kernels=%ld\n", kernels);
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUdevice dev;
	CUfunction spin;
	CUdeviceptr out;
	int sms;

	if (argc != 3 || (strcmp(argv[1], "latency") && strcmp(argv[1], "flood")))
		b_die("usage: latency latency REQUESTS | latency flood SECONDS");
	dev = b_setup(&ctx);
	B_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	B_CHECK(cuModuleGetFunction(&spin, b_module(), "spin"));
	B_CHECK(cuMemAlloc(&out, (size_t)sms * 8 * sizeof(int)));
	printf("sms=%d\n", sms);
	if (!strcmp(argv[1], "latency"))
		latency(spin, out, atoi(argv[2]) > 0 ? atoi(argv[2]) : 1000);
	else
		flood(spin, out, sms, atof(argv[2]));
	return 0;
}
