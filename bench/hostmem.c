// SPDX-License-Identifier: MIT
/*
 * hostmem MIB
 *
 * What managed and registered host memory cost, for MIB MiB of 32-bit
 * words, each step timed (milliseconds) and the data checked at the end:
 *
 *   managed (cuMemAllocManaged, global):
 *     managed_cpu_write_ms   the CPU fills it (first touch)
 *     managed_gpu_first_ms   a kernel (p[i] = p[i] * 3 + 1) over all of it,
 *                            the first GPU touch: the data go to the GPU
 *     managed_gpu_again_ms   the same kernel again, data on the GPU
 *     managed_cpu_read_ms    the CPU reads it all back (and checks it)
 *     managed_prefetch_ms    cuMemPrefetchAsync to the device and the
 *                            kernel, after the CPU wrote it again
 *   registered (malloc + cuMemHostRegister, DEVICEMAP):
 *     reg_register_ms        cuMemHostRegister
 *     reg_h2d_gbs, reg_d2h_gbs   synchronous copies to / from device memory
 *     reg_zerocopy_gbs       the kernel on the host memory itself, through
 *                            cuMemHostGetDevicePointer (bytes read + written)
 *     reg_unregister_ms      cuMemHostUnregister
 *
 * Run it natively and under openmps and compare the lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static CUfunction affine;

static void run_affine(CUdeviceptr p, int n)
{
	unsigned int mul = 3, add = 1;
	void *args[] = { &p, &mul, &add, &n };

	B_CHECK(cuLaunchKernel(affine, (unsigned int)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	B_CHECK(cuCtxSynchronize());
}

/* Every word is w(i) after `rounds` kernels. */
static void check(const uint32_t *p, int n, int rounds, const char *what)
{
	for (int i = 0; i < n; i++) {
		uint32_t v = (uint32_t)i;

		for (int r = 0; r < rounds; r++)
			v = v * 3 + 1;
		if (p[i] != v)
			b_die("%s: word %d is %u, want %u", what, i, p[i], v);
	}
}

static void managed(int n, size_t bytes, CUdevice dev)
{
	CUdeviceptr dp;
	uint32_t *p;
	double t;

	B_CHECK(cuMemAllocManaged(&dp, bytes, CU_MEM_ATTACH_GLOBAL));
	p = (uint32_t *)(uintptr_t)dp;
	t = b_now();
	for (int i = 0; i < n; i++)
		p[i] = (uint32_t)i;
	printf("managed_cpu_write_ms=%.3f\n", (b_now() - t) * 1e3);
	t = b_now();
	run_affine(dp, n);
	printf("managed_gpu_first_ms=%.3f\n", (b_now() - t) * 1e3);
	t = b_now();
	run_affine(dp, n);
	printf("managed_gpu_again_ms=%.3f\n", (b_now() - t) * 1e3);
	t = b_now();
	check(p, n, 2, "managed memory");
	printf("managed_cpu_read_ms=%.3f\n", (b_now() - t) * 1e3);
	for (int i = 0; i < n; i++)
		p[i] = (uint32_t)i;
	t = b_now();
	{
		CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev };

		B_CHECK(cuMemPrefetchAsync_v2(dp, bytes, loc, 0, NULL));
	}
	run_affine(dp, n);
	printf("managed_prefetch_ms=%.3f\n", (b_now() - t) * 1e3);
	check(p, n, 1, "managed memory after a prefetch");
	B_CHECK(cuMemFree(dp));
}

static void registered(int n, size_t bytes)
{
	uint32_t *h = aligned_alloc(4096, bytes);
	CUdeviceptr d, hd;
	double t;

	if (!h)
		b_die("out of memory");
	for (int i = 0; i < n; i++)
		h[i] = (uint32_t)i;
	B_CHECK(cuMemAlloc(&d, bytes));
	t = b_now();
	B_CHECK(cuMemHostRegister(h, bytes, CU_MEMHOSTREGISTER_DEVICEMAP));
	printf("reg_register_ms=%.3f\n", (b_now() - t) * 1e3);
	B_CHECK(cuMemcpyHtoD(d, h, bytes));   /* untimed: first touch of the device pages */
	t = b_now();
	B_CHECK(cuMemcpyHtoD(d, h, bytes));
	B_CHECK(cuCtxSynchronize());
	printf("reg_h2d_gbs=%.2f\n", (double)bytes / (b_now() - t) / 1e9);
	run_affine(d, n);
	t = b_now();
	B_CHECK(cuMemcpyDtoH(h, d, bytes));
	printf("reg_d2h_gbs=%.2f\n", (double)bytes / (b_now() - t) / 1e9);
	check(h, n, 1, "registered memory copied back");
	B_CHECK(cuMemHostGetDevicePointer(&hd, h, 0));
	t = b_now();
	run_affine(hd, n);
	printf("reg_zerocopy_gbs=%.2f\n", 2.0 * (double)bytes / (b_now() - t) / 1e9);
	check(h, n, 2, "registered memory written by the GPU");
	t = b_now();
	B_CHECK(cuMemHostUnregister(h));
	printf("reg_unregister_ms=%.3f\n", (b_now() - t) * 1e3);
	B_CHECK(cuMemFree(d));
	free(h);
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 256;
	size_t bytes;
	CUcontext ctx;
	CUdevice dev;
	int n;

	if (mib < 1 || mib > 4096)
		b_die("usage: hostmem MIB (1 to 4096)");
	bytes = (size_t)mib << 20;
	n = (int)(bytes / sizeof(uint32_t));
	dev = b_setup(&ctx);
	B_CHECK(cuModuleGetFunction(&affine, b_module(), "affine_u32"));
	managed(n, bytes, dev);
	registered(n, bytes);
	return 0;
}
