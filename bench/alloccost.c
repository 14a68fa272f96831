// SPDX-License-Identifier: MIT
/*
 * alloccost [COUNT] [KIB]
 *
 * What an allocation and a free cost the caller: COUNT (default 200)
 * cuMemAlloc of KIB KiB (default 2048) each, every one written with a
 * pattern and read back (so the memory is really there and the caller's),
 * then COUNT cuMemFree. Prints the mean wall time of an allocation and of
 * a free in µs, the device memory cuMemGetInfo said was used per
 * allocation while all were held, and the spread of their addresses: the
 * span from the lowest to the highest in MiB and the bits of the highest
 * address that differ between them (what one allocation's address tells
 * of the others'). bench/placement.sh runs it natively, under openmps as
 * the driver places, and under openmps with OPENMPS_PLACEMENT=random.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 200;
	size_t bytes = (size_t)(argc > 2 ? atol(argv[2]) : 2048) << 10;
	CUdeviceptr *p, lo = ~(CUdeviceptr)0, hi = 0, differ = 0;
	uint32_t word, back;
	size_t free0, free1, total;
	double t0, t_alloc, t_free;
	CUcontext ctx;
	CUdevice dev;
	int bits = 0;

	if (count < 1 || bytes < 4)
		b_die("usage: alloccost [COUNT] [KIB]");
	p = calloc((size_t)count, sizeof(*p));
	if (!p)
		b_die("out of memory");
	B_CHECK(cuInit(0));
	B_CHECK(cuDeviceGet(&dev, 0));
	B_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	B_CHECK(cuCtxSetCurrent(ctx));
	B_CHECK(cuMemGetInfo(&free0, &total));
	t0 = b_now();
	for (int i = 0; i < count; i++)
		B_CHECK(cuMemAlloc(&p[i], bytes));
	t_alloc = b_now() - t0;
	B_CHECK(cuMemGetInfo(&free1, &total));
	for (int i = 0; i < count; i++) {
		word = 0x5eed0000u + (uint32_t)i;
		B_CHECK(cuMemcpyHtoD(p[i] + bytes - 4, &word, 4));
		B_CHECK(cuMemcpyDtoH(&back, p[i] + bytes - 4, 4));
		if (back != word)
			b_die("allocation %d: read %#x, wrote %#x", i, back, word);
		lo = p[i] < lo ? p[i] : lo;
		hi = p[i] > hi ? p[i] : hi;
		differ |= p[i] ^ p[0];
	}
	while (differ >> bits)
		bits++;
	t0 = b_now();
	for (int i = 0; i < count; i++)
		B_CHECK(cuMemFree(p[i]));
	t_free = b_now() - t0;
	printf("allocs=%d\nkib=%zu\n", count, bytes >> 10);
	printf("alloc_us=%.2f\nfree_us=%.2f\n", t_alloc * 1e6 / count, t_free * 1e6 / count);
	printf("device_kib_per_alloc=%.0f\n", free0 > free1 ? (double)(free0 - free1) / 1024 / count : 0.0);
	printf("span_mib=%llu\naddress_bits_differing=%d\n", (unsigned long long)((hi - lo) >> 20), bits);
	free(p);
	return 0;
}
