// SPDX-License-Identifier: MIT
/*
 * launch [--quick]
 *
 * What a launch and a tiny copy cost the client, with the empty kernel on
 * the default stream (as the reference measurement did):
 *   burst_us      enqueue time per launch in bursts of 1000 (they fit in
 *                 the queues, so this is the call's own cost); median of 20
 *   sustained_us  enqueue time per launch over 100000 back to back (queues
 *                 fill up, so this is the throughput the pipeline sustains)
 *   drain_us      the same including the final synchronize
 *   roundtrip_us  launch + cuCtxSynchronize
 *   h2d4_us       4-byte cuMemcpyHtoD from pageable memory (the copies
 *                 may return before their DMA is done, as the driver's
 *                 do: the closing synchronize is counted)
 *   memset4_us    cuMemsetD32 of one word and cuMemcpyDtoD of it to a
 *   d2d4_us       second word (asynchronous with respect to the host, as
 *                 the driver documents; the closing synchronize counted)
 *   d2h4_us       4-byte cuMemcpyDtoH to pageable memory
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static CUfunction empty;

static void launch(void)
{
	B_CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int sustained = quick ? 20000 : 100000, trips = quick ? 5000 : 20000, copies = quick ? 5000 : 20000;
	double bursts[20], t0, t1, t2;
	CUcontext ctx;
	CUmodule mod;
	CUdeviceptr d;
	unsigned int h = 1;

	b_setup(&ctx);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&empty, mod, "empty"));
	B_CHECK(cuMemAlloc(&d, 16));
	for (int i = 0; i < 200; i++)
		launch();
	B_CHECK(cuCtxSynchronize());

	for (int r = 0; r < 20; r++) {
		t0 = b_now();
		for (int i = 0; i < 1000; i++)
			launch();
		t1 = b_now();
		B_CHECK(cuCtxSynchronize());
		bursts[r] = (t1 - t0) / 1000 * 1e6;
	}
	printf("burst_us=%.3f\n", b_median(bursts, 20));

	t0 = b_now();
	for (int i = 0; i < sustained; i++)
		launch();
	t1 = b_now();
	B_CHECK(cuCtxSynchronize());
	t2 = b_now();
	printf("sustained_us=%.3f\n", (t1 - t0) / sustained * 1e6);
	printf("drain_us=%.3f\n", (t2 - t0) / sustained * 1e6);

	t0 = b_now();
	for (int i = 0; i < trips; i++) {
		launch();
		B_CHECK(cuCtxSynchronize());
	}
	t1 = b_now();
	printf("roundtrip_us=%.3f\n", (t1 - t0) / trips * 1e6);

	t0 = b_now();
	for (int i = 0; i < copies; i++) {
		h = (unsigned int)i;
		B_CHECK(cuMemcpyHtoD(d, &h, 4));
	}
	B_CHECK(cuCtxSynchronize());
	t1 = b_now();
	printf("h2d4_us=%.3f\n", (t1 - t0) / copies * 1e6);

	t0 = b_now();
	for (int i = 0; i < copies; i++)
		B_CHECK(cuMemsetD32(d + 4, (unsigned int)i, 1));
	B_CHECK(cuCtxSynchronize());
	t1 = b_now();
	printf("memset4_us=%.3f\n", (t1 - t0) / copies * 1e6);

	t0 = b_now();
	for (int i = 0; i < copies; i++)
		B_CHECK(cuMemcpyDtoD(d + 8, d + 4, 4));
	B_CHECK(cuCtxSynchronize());
	t1 = b_now();
	printf("d2d4_us=%.3f\n", (t1 - t0) / copies * 1e6);
	B_CHECK(cuMemcpyDtoH(&h, d + 8, 4));
	if (h != (unsigned int)(copies - 1))
		b_die("the memsets and device copies left %u, expected %u", h, (unsigned int)(copies - 1));

	t0 = b_now();
	for (int i = 0; i < copies; i++)
		B_CHECK(cuMemcpyDtoH(&h, d, 4));
	t1 = b_now();
	printf("d2h4_us=%.3f\n", (t1 - t0) / copies * 1e6);
	if (h != (unsigned int)(copies - 1))
		b_die("the 4-byte copies read back %u, expected %u", h, (unsigned int)(copies - 1));

	B_CHECK(cuMemFree(d));
	B_CHECK(cuModuleUnload(mod));
	return 0;
}
