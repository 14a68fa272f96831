// SPDX-License-Identifier: MIT
/*
 * Registered host memory (cuMemHostRegister / cuMemHostUnregister) on the
 * program's own malloc'd buffer, not page-aligned: its contents survive
 * registration; asynchronous copies to and from it are right; a kernel
 * given its device pointer reads and writes it in place, and the program
 * sees the kernel's writes; registering it twice, or unregistering what is
 * not registered, gets the driver's errors; after unregistering, the data
 * is still there and free() takes the buffer back. A local array of the
 * calling function registered, used in place by a kernel, and given back
 * to the process's own stack.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define WORDS (64 * 1024)

/* A local array of the calling function registered, as NPP registers its
 * caller's stack: it must work (natively it does). The function's other
 * locals and the array keep what they held; a kernel given the array's
 * device pointer writes it in place and the function sees it; copies to
 * and from it are right; after unregistering, the stack is the process's
 * own again: a child forked then writes its copy of the array without
 * changing this one. */
static __attribute__((noinline)) void stack_array(CUfunction affine, CUdeviceptr d, uint64_t *rng)
{
	volatile uint64_t guard = 0x5eed5eed5eed5eedull;
	uint32_t local[256], back[256], mul = (uint32_t)t_rand(rng) | 1, add = (uint32_t)t_rand(rng);
	int n = 256, st = 0;
	CUdeviceptr mapped;
	pid_t child;

	t_fill_u32(local, 256, rng);
	memcpy(back, local, sizeof(local));
	REQUIRE_CU(cuMemHostRegister(local, sizeof(local), CU_MEMHOSTREGISTER_DEVICEMAP));
	CHECK(guard == 0x5eed5eed5eed5eedull && !memcmp(local, back, sizeof(local)),
	      "registering a local array changed the function's locals");
	REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, local, 0));
	{
		void *args[] = { &mapped, &mul, &add, &n };

		REQUIRE_CU(t_launch(affine, 1, 256, NULL, args));
		REQUIRE_CU(cuCtxSynchronize());
	}
	for (int i = 0; i < 256; i++)
		back[i] = back[i] * mul + add;
	CMP_U32(local, back, 256, "a kernel's writes to a registered local array, seen by the function");
	REQUIRE_CU(cuMemcpyHtoD(d, local, sizeof(local)));
	memset(local, 0, sizeof(local));
	REQUIRE_CU(cuMemcpyDtoH(local, d, sizeof(local)));
	CMP_U32(local, back, 256, "a registered local array copied out and back");
	REQUIRE_CU(cuMemHostUnregister(local));
	CMP_U32(local, back, 256, "a local array after unregistering it");
	CHECK(guard == 0x5eed5eed5eed5eedull, "a local beside the array changed");
	child = fork();
	if (child == 0) {
		memset(local, 0xee, sizeof(local));
		_exit(local[7] == 0xeeeeeeeeu ? 0 : 1);
	}
	REQUIRE(child > 0 && waitpid(child, &st, 0) == child, "fork");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's own stack");
	CMP_U32(local, back, 256, "the local array after a child wrote its copy (the stack is shared with it)");
}

/* A registration of more than a megabyte at an odd address and length,
 * whose whole pages are copied by several threads and the partial ones at
 * either end by the kernel: every byte of the pages it touches, the
 * program's bytes beside the buffer included, is as before; a kernel then
 * writes through the device pointer and the program sees it. */
static void large_unaligned(CUfunction affine, uint64_t *rng)
{
	const size_t size = (3u << 20) + 12345, words = size / 4;
	uint8_t *raw = malloc(size + 3 * 8192), *want = malloc(size + 3 * 8192);
	uint32_t *buf, mul = 5, add = 11;
	CUdeviceptr mapped;
	int n;

	REQUIRE(raw && want, "out of memory");
	buf = (uint32_t *)(raw + 4100);   /* past a page's start, not at one */
	t_fill_bytes(raw, size + 3 * 8192, rng);
	memcpy(want, raw, size + 3 * 8192);
	REQUIRE_CU(cuMemHostRegister(buf, size, CU_MEMHOSTREGISTER_DEVICEMAP));
	CMP_BYTES(raw, want, size + 3 * 8192, "a large unaligned buffer and its neighbours after registering it");
	REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, buf, 0));
	n = (int)words;
	{
		void *args[] = { &mapped, &mul, &add, &n };

		REQUIRE_CU(t_launch(affine, (unsigned)((words + 255) / 256), 256, NULL, args));
	}
	REQUIRE_CU(cuCtxSynchronize());
	for (size_t i = 0; i < words; i++) {
		uint32_t w;

		memcpy(&w, want + 4100 + 4 * i, 4);
		w = w * mul + add;
		memcpy(want + 4100 + 4 * i, &w, 4);
	}
	CMP_BYTES(raw, want, size + 3 * 8192, "a kernel's writes to a large registered buffer, and its neighbours");
	REQUIRE_CU(cuMemHostUnregister(buf));
	free(raw);
	free(want);
}

int main(int argc, char **argv)
{
	uint64_t rng;
	uint32_t *raw, *buf, *in, *out, *want, mul, add;
	CUfunction affine;
	CUdeviceptr d, mapped;
	CUstream s;
	int n = WORDS;

	t_init(argc, argv);
	t_primary(t_device());
	rng = t_rng(1);
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	raw = malloc(2 * WORDS * 4 + 64);
	want = malloc(2 * WORDS * 4);
	REQUIRE(raw && want, "out of memory");
	buf = raw + 3;                   /* not at a page's start */
	in = buf;
	out = buf + WORDS;
	t_fill_u32(buf, 2 * WORDS, &rng);
	memcpy(want, buf, 2 * WORDS * 4);

	CHECK_CU(cuMemHostRegister(NULL, 4096, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemHostRegister(buf, 0, 0), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemHostRegister(buf, 2 * WORDS * 4, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
	CMP_U32(buf, want, 2 * WORDS, "the buffer's contents after registering it");
	CHECK_CU(cuMemHostRegister(buf + 8, 64, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);

	/* Copies from and to it, around a kernel. */
	mul = (uint32_t)t_rand(&rng) | 1;
	add = (uint32_t)t_rand(&rng);
	REQUIRE_CU(cuMemAlloc(&d, WORDS * 4));
	REQUIRE_CU(cuMemcpyHtoDAsync(d, in, WORDS * 4, s));
	{
		void *args[] = { &d, &mul, &add, &n };

		REQUIRE_CU(t_launch(affine, WORDS / 256, 256, s, args));
	}
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d, WORDS * 4, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	for (int i = 0; i < WORDS; i++)
		want[WORDS + i] = want[i] * mul + add;
	CMP_U32(out, want + WORDS, WORDS, "a kernel's result copied into registered memory");

	/* A kernel on it in place, through its device pointer. */
	REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, in, 0));
	{
		void *args[] = { &mapped, &mul, &add, &n };

		REQUIRE_CU(t_launch(affine, WORDS / 256, 256, s, args));
	}
	REQUIRE_CU(cuStreamSynchronize(s));
	for (int i = 0; i < WORDS; i++)
		want[i] = want[i] * mul + add;
	CMP_U32(in, want, WORDS, "a kernel's writes to registered memory, seen by the program");

	REQUIRE_CU(cuMemHostUnregister(buf));
	CHECK_CU(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CMP_U32(buf, want, 2 * WORDS, "the buffer's contents after unregistering it");
	buf[0] ^= 1;   /* still the program's memory */
	stack_array(affine, d, &rng);
	large_unaligned(affine, &rng);
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s));
	free(raw);
	free(want);
	return t_finish();
}
