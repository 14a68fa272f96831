// SPDX-License-Identifier: MIT
/*
 * hold READY_FILE GO_FILE
 *
 * An idle client for the server-CPU measurement of bench/infer.sh: creates
 * a context, allocates 1 MiB, runs iota_u32 over it and checks the result,
 * touches READY_FILE, and then sleeps until GO_FILE appears (looking every
 * 20 ms, up to 5 minutes) before it frees everything and exits.
 *
 * It sleeps where the other programs poll every 50 µs (b_wait_file): what
 * is measured is the server's CPU while its clients do nothing, and 16
 * clients waking 20,000 times a second each would take CPU from the
 * server and make it look busier than it is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define WORDS (256 * 1024)      /* 1 MiB of uint32_t */

int main(int argc, char **argv)
{
	struct timespec nap = { 0, 20 * 1000 * 1000 };
	unsigned int base = 0x2000u, *host;
	int n = WORDS, waited = 0;
	void *args[3];
	CUcontext ctx;
	CUdevice dev;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr d;

	if (argc != 3) {
		fprintf(stderr, "usage: %s READY_FILE GO_FILE\n", argv[0]);
		return 2;
	}
	host = malloc(WORDS * sizeof(*host));
	if (!host)
		b_die("malloc(1 MiB) failed");
	B_CHECK(cuInit(0));
	B_CHECK(cuDeviceGet(&dev, 0));
	B_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
	B_CHECK(cuMemAlloc(&d, WORDS * sizeof(*host)));
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&f, mod, "iota_u32"));
	args[0] = &d;
	args[1] = &base;
	args[2] = &n;
	B_CHECK(cuLaunchKernel(f, WORDS / 256, 1, 1, 256, 1, 1, 0, 0, args, NULL));
	B_CHECK(cuCtxSynchronize());
	B_CHECK(cuMemcpyDtoH(host, d, WORDS * sizeof(*host)));
	for (int i = 0; i < WORDS; i++)
		if (host[i] != base + (unsigned int)i)
			b_die("iota_u32 wrote %u at %d, expected %u", host[i], i, base + (unsigned int)i);

	b_touch(argv[1]);
	while (access(argv[2], F_OK) != 0) {
		if (++waited > 5 * 60 * 50)
			b_die("%s did not appear within 5 minutes", argv[2]);
		nanosleep(&nap, NULL);
	}

	B_CHECK(cuMemFree(d));
	B_CHECK(cuModuleUnload(mod));
	B_CHECK(cuCtxDestroy(ctx));
	free(host);
	printf("hold=ok\n");
	return 0;
}
