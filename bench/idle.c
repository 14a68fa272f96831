// SPDX-License-Identifier: MIT
/*
 * idle READY_FILE GO_FILE
 *
 * An idle client for the memory-per-client measurement: retains the
 * primary context, makes it current, allocates nothing, touches READY_FILE
 * and waits (up to 5 minutes) for GO_FILE before it releases the context
 * and exits. The script reads the GPU's used memory while these wait.
 */
#include <stdio.h>

#include "bench.h"

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUdevice dev;

	if (argc != 3) {
		fprintf(stderr, "usage: %s READY_FILE GO_FILE\n", argv[0]);
		return 2;
	}
	dev = b_setup(&ctx);
	B_CHECK(cuCtxSynchronize());
	b_touch(argv[1]);
	b_wait_file(argv[2], 300);
	B_CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("idle=ok\n");
	return 0;
}
