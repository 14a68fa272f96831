// SPDX-License-Identifier: MIT
/*
 * copy [--quick]
 *
 * Bandwidth of 256 MiB copies between the host and the device, from pinned
 * memory (cuMemAllocHost) and from pageable memory (malloc, touched first),
 * each the best of 5 runs (2 with --quick). A run is the synchronous copy
 * followed by cuCtxSynchronize, since a pageable host-to-device copy may
 * return before its last DMA lands. Prints GB/s (10^9 bytes per second):
 *   h2d_pinned_gbs d2h_pinned_gbs h2d_pageable_gbs d2h_pageable_gbs
 * The data are checked once at the end so a copy that did nothing fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define BYTES ((size_t)256 << 20)

static CUdeviceptr dev_buf;

static double best(int runs, int to_device, void *host)
{
	double top = 0;

	for (int r = 0; r < runs; r++) {
		double t0 = b_now(), gbs;

		if (to_device)
			B_CHECK(cuMemcpyHtoD(dev_buf, host, BYTES));
		else
			B_CHECK(cuMemcpyDtoH(host, dev_buf, BYTES));
		B_CHECK(cuCtxSynchronize());
		gbs = (double)BYTES / (b_now() - t0) / 1e9;
		if (gbs > top)
			top = gbs;
	}
	return top;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 2 : 5;
	CUcontext ctx;
	unsigned char *pinned = NULL, *pageable;

	b_setup(&ctx);
	B_CHECK(cuMemAlloc(&dev_buf, BYTES));
	B_CHECK(cuMemAllocHost((void **)&pinned, BYTES));
	pageable = malloc(BYTES);
	if (!pageable)
		b_die("malloc(256 MiB) failed");
	for (size_t i = 0; i < BYTES; i++)
		pinned[i] = (unsigned char)(i * 131 + 7);
	memset(pageable, 0, BYTES);

	/* One untimed copy each way first: the first touch of device pages. */
	B_CHECK(cuMemcpyHtoD(dev_buf, pinned, BYTES));
	B_CHECK(cuMemcpyDtoH(pageable, dev_buf, BYTES));
	if (memcmp(pinned, pageable, BYTES) != 0)
		b_die("256 MiB round trip pinned -> device -> pageable corrupted the data");

	printf("h2d_pinned_gbs=%.2f\n", best(runs, 1, pinned));
	printf("d2h_pinned_gbs=%.2f\n", best(runs, 0, pinned));
	printf("h2d_pageable_gbs=%.2f\n", best(runs, 1, pageable));
	printf("d2h_pageable_gbs=%.2f\n", best(runs, 0, pageable));
	if (memcmp(pinned, pageable, BYTES) != 0)
		b_die("the timed copies corrupted the data");

	free(pageable);
	B_CHECK(cuMemFreeHost(pinned));
	B_CHECK(cuMemFree(dev_buf));
	return 0;
}
