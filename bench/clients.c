// SPDX-License-Identifier: MIT
/*
 * clients STATUS_DIR INDEX GO_FILE
 *
 * One client of the "most clients at once" measurement: creates a context,
 * allocates 1 MiB, runs iota_u32 over it, checks the result, and then holds
 * everything until GO_FILE appears (up to 10 minutes). It reports by
 * creating STATUS_DIR/ok.INDEX, or STATUS_DIR/fail.INDEX holding the step
 * and the error name, so the script can count how many clients were alive
 * and working at the same time.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define WORDS (256 * 1024)      /* 1 MiB of uint32_t */

static const char *status_dir, *index_str;

static void report(const char *what, const char *step, CUresult r)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", status_dir, what, index_str);
	f = fopen(path, "w");
	if (f) {
		if (step)
			fprintf(f, "%s: %s\n", step, b_errname(r));
		fclose(f);
	}
}

#define STEP(call)                                                \
	do {                                                      \
		CUresult s_r_ = (call);                           \
		if (s_r_ != CUDA_SUCCESS) {                       \
			report("fail", #call, s_r_);              \
			fprintf(stderr, "error: %s -> %s\n", #call, b_errname(s_r_)); \
			return 1;                                 \
		}                                                 \
	} while (0)

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr d;
	unsigned int base, *host;
	int n = WORDS;
	void *args[] = { &d, &base, &n };
	char *ptx;

	if (argc != 4) {
		fprintf(stderr, "usage: %s STATUS_DIR INDEX GO_FILE\n", argv[0]);
		return 2;
	}
	status_dir = argv[1];
	index_str = argv[2];
	base = 0x1000u + (unsigned int)atoi(index_str) * 7919u;
	host = malloc(WORDS * sizeof(*host));
	ptx = b_read_ptx();
	if (!host || !ptx) {
		report("fail", "reading the PTX", CUDA_ERROR_FILE_NOT_FOUND);
		return 1;
	}

	STEP(cuInit(0));
	STEP(cuDeviceGet(&dev, 0));
	STEP(cuCtxCreate(&ctx, NULL, 0, dev));
	STEP(cuMemAlloc(&d, WORDS * sizeof(*host)));
	STEP(cuModuleLoadData(&mod, ptx));
	STEP(cuModuleGetFunction(&f, mod, "iota_u32"));
	STEP(cuMemsetD32(d, 0xeeeeeeeeu, WORDS));
	STEP(cuLaunchKernel(f, WORDS / 256, 1, 1, 256, 1, 1, 0, 0, args, NULL));
	STEP(cuCtxSynchronize());
	STEP(cuMemcpyDtoH(host, d, WORDS * sizeof(*host)));
	for (int i = 0; i < WORDS; i++) {
		if (host[i] != base + (unsigned int)i) {
			report("fail", "verifying iota_u32", CUDA_ERROR_UNKNOWN);
			return 1;
		}
	}
	report("ok", NULL, CUDA_SUCCESS);
	b_wait_file(argv[3], 600);

	STEP(cuMemFree(d));
	STEP(cuModuleUnload(mod));
	STEP(cuCtxDestroy(ctx));
	free(host);
	free(ptx);
	return 0;
}
