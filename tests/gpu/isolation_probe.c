// SPDX-License-Identifier: MIT
/*
 * tests/gpu/isolation_probe.c: what one client's kernels can find of
 * another's memory (tests/gpu/isolation.sh runs it in pairs).
 *
 *   isolation_probe own FILE    allocates 256 KiB and 4 MiB, fills both with
 *                               secret words (0x3f5ec7NN, normal floats),
 *                               writes "SMALL LARGE" to FILE and keeps them
 *                               until FILE.done appears (60 s at most)
 *   isolation_probe read ADDR   a kernel reads 4 words at ADDR (an address
 *                               the API never gave this process)
 *   isolation_probe scan MIB    allocates 256 KiB of its own, then reads 4
 *                               words every 64 KiB outward from it, up to
 *                               MIB MiB either side, one launch and one
 *                               synchronize a read, until the first fault
 *
 * Each prints one line: "read: secret|other|fault (...)" or "scan: N reads,
 * S secret words, fault at D KiB|no fault". The kernel is the test
 * kernels' vadd (a[i] + 0.0f: a read that keeps a normal float's bits).
 * Exit status: 0, or 2 on a usage or set-up error.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/common.h"

#define SECRET_HI 0x3f5ec700u
#define SMALL     (256u << 10)
#define LARGE     (4u << 20)
#define STEP      (64u << 10)

static CUfunction vadd;
static CUdeviceptr zeros, out;

static bool secret(uint32_t w)
{
	return (w & 0xffffff00u) == SECRET_HI;
}

static void setup(void)
{
	CUmodule mod;

	t_primary(t_device());
	mod = t_module();
	vadd = t_func(mod, "vadd");
	REQUIRE_CU(cuMemAlloc(&zeros, 16));
	REQUIRE_CU(cuMemAlloc(&out, 16));
	REQUIRE_CU(cuMemsetD32(zeros, 0, 4));
}

/* Reads 4 words at addr into w: CUDA_SUCCESS, or the fault's error. */
static CUresult peek(uint64_t addr, uint32_t w[4])
{
	int n = 4;
	void *args[] = { &addr, &zeros, &out, &n };
	CUresult r;

	r = t_launch(vadd, 1, 32, NULL, args);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	if (r == CUDA_SUCCESS)
		r = cuMemcpyDtoH(w, out, 16);
	return r;
}

static CUdeviceptr filled(size_t bytes)
{
	uint32_t *h = malloc(bytes);
	CUdeviceptr d;

	REQUIRE(h, "out of memory");
	for (size_t i = 0; i < bytes / 4; i++)
		h[i] = SECRET_HI | (uint32_t)(i & 0xff);
	REQUIRE_CU(cuMemAlloc(&d, bytes));
	REQUIRE_CU(cuMemcpyHtoD(d, h, bytes));
	free(h);
	return d;
}

static int own(const char *file)
{
	char done[4096];
	CUdeviceptr s, l;
	FILE *f;

	setup();
	s = filled(SMALL);
	l = filled(LARGE);
	snprintf(done, sizeof(done), "%s.tmp", file);
	f = fopen(done, "w");
	REQUIRE(f, "cannot write %s", done);
	fprintf(f, "%#" PRIx64 " %#" PRIx64 "\n", (uint64_t)s, (uint64_t)l);
	fclose(f);
	REQUIRE(rename(done, file) == 0, "cannot rename %s", done);
	snprintf(done, sizeof(done), "%s.done", file);
	for (int i = 0; i < 600 && access(done, F_OK) != 0; i++)
		usleep(100000);
	return 0;   /* its memory goes with the process, or with a server that ended it */
}

static int read_at(uint64_t addr)
{
	uint32_t w[4] = { 0 };
	CUresult r;

	setup();
	r = peek(addr, w);
	if (r != CUDA_SUCCESS)
		printf("read: fault (%s)\n", t_errname(r));
	else
		printf("read: %s (%#x %#x %#x %#x)\n", secret(w[0]) && secret(w[3]) ? "secret" : "other", w[0], w[1],
		       w[2], w[3]);
	return 0;
}

static int scan(uint64_t mib)
{
	uint64_t reads = 0, found = 0, steps = (mib << 20) / STEP;
	CUdeviceptr mine;
	CUresult r = CUDA_SUCCESS;
	int64_t at = 0;

	setup();
	REQUIRE_CU(cuMemAlloc(&mine, SMALL));
	for (uint64_t k = 1; k <= steps && r == CUDA_SUCCESS; k++) {
		for (int side = 0; side < 2 && r == CUDA_SUCCESS; side++) {
			uint32_t w[4];

			at = side ? -(int64_t)(k * STEP) : (int64_t)(k * STEP);
			if (!side && k * STEP < SMALL)
				continue;   /* its own allocation */
			r = peek(mine + (uint64_t)at, w);
			if (r != CUDA_SUCCESS)
				break;
			reads++;
			for (int i = 0; i < 4; i++)
				found += secret(w[i]);
		}
	}
	if (r != CUDA_SUCCESS)
		printf("scan: %" PRIu64 " reads, %" PRIu64 " secret words, fault at %" PRId64 " KiB (%s)\n", reads, found,
		       at / 1024, t_errname(r));
	else
		printf("scan: %" PRIu64 " reads, %" PRIu64 " secret words, no fault within %" PRIu64 " MiB\n", reads, found,
		       mib);
	return 0;
}

int main(int argc, char **argv)
{
	t_init(1, argv);   /* its arguments are not the test kernels' path */
	if (argc == 3 && !strcmp(argv[1], "own"))
		return own(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "read"))
		return read_at(strtoull(argv[2], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "scan"))
		return scan(strtoull(argv[2], NULL, 0));
	fprintf(stderr, "usage: %s own FILE | read ADDR | scan MIB\n", argv[0]);
	return 2;
}
