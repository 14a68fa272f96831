// SPDX-License-Identifier: MIT
/*
 * spin CYCLES ITERS [READY_FILE GO_FILE]
 *
 * One client of the concurrency benchmark: launches ITERS one-block
 * (128-thread) kernels that each spin for CYCLES clock cycles, on the
 * default stream, then synchronizes; prints the time per kernel. Run N at
 * once: time-sliced processes take turns on the GPU, MPS-like clients share
 * it, and the time per kernel shows which.
 *
 * With READY_FILE and GO_FILE the timed loop starts only after the file GO
 * appears, so that N processes start together after each has paid for its
 * context, module load and a warm-up launch.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr out;
	long long cycles;
	int iters;
	double t0, t1;
	void *args[2];

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: %s CYCLES ITERS [READY_FILE GO_FILE]\n", argv[0]);
		return 2;
	}
	cycles = atoll(argv[1]);
	iters = atoi(argv[2]);
	if (cycles <= 0 || iters <= 0)
		b_die("CYCLES and ITERS must be positive");

	b_setup(&ctx);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&f, mod, "spin"));
	B_CHECK(cuMemAlloc(&out, 4096 * sizeof(int)));
	args[0] = &cycles;
	args[1] = &out;
	/* Warm-up: the first launch pays for lazy loading. */
	B_CHECK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, 0, args, NULL));
	B_CHECK(cuCtxSynchronize());

	if (argc == 5) {
		b_touch(argv[3]);
		b_wait_file(argv[4], 120);
	}
	t0 = b_now();
	for (int i = 0; i < iters; i++)
		B_CHECK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, 0, args, NULL));
	B_CHECK(cuCtxSynchronize());
	t1 = b_now();

	printf("per_kernel_us=%.2f\n", (t1 - t0) / iters * 1e6);
	printf("run_s=%.4f\n", t1 - t0);
	B_CHECK(cuMemFree(out));
	B_CHECK(cuModuleUnload(mod));
	return 0;
}
