// SPDX-License-Identifier: MIT
/*
 * Managed memory (cuMemAllocManaged): one pointer that the program's CPU
 * and its kernels both use. The CPU's words reach a kernel that rewrites
 * them in place, and the CPU reads the kernel's words after a synchronize;
 * copies and memsets take it as device memory either way; the pointer
 * attributes and the address range say what it is; advice and prefetches
 * are accepted and reported back by the range attributes, and leave the
 * data as it was; attaching it to a stream is accepted; bad flags, sizes,
 * advice, attribute sizes and an interior pointer given to cuMemFree get
 * the driver's errors.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define WORDS (256 * 1024 + 5)   /* not a whole number of pages */

static int range_int(CUmem_range_attribute a, CUdeviceptr p, size_t bytes)
{
	int v = -100;

	REQUIRE_CU(cuMemRangeGetAttribute(&v, sizeof(v), a, p, bytes));
	return v;
}

int main(int argc, char **argv)
{
	const size_t bytes = (size_t)WORDS * 4;
	CUdevice dev = t_device();
	CUmemLocation here = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
	CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
	uint32_t *in = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes), *m, mul, add;
	unsigned int managed = 7;
	CUdeviceptr p, p2, d, base = 0;
	CUfunction affine;
	size_t size = 0;
	uint64_t rng;
	int n = WORDS, accessed[2];
	CUstream s;

	t_init(argc, argv);
	t_primary(dev);
	rng = t_rng(7);
	REQUIRE(in && want && back, "out of memory");
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	/* What the driver refuses. */
	CHECK_CU(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAllocManaged(&p, 4096, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAllocManaged(NULL, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);

	REQUIRE_CU(cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL));
	REQUIRE(p != 0, "cuMemAllocManaged gave a null pointer");
	m = (uint32_t *)(uintptr_t)p;
	REQUIRE_CU(cuMemAlloc(&d, bytes));

	/* What it is. */
	REQUIRE_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 64));
	CHECK(managed == 1, "CU_POINTER_ATTRIBUTE_IS_MANAGED of managed memory is %u", managed);
	REQUIRE_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
	CHECK(managed == 0, "CU_POINTER_ATTRIBUTE_IS_MANAGED of cuMemAlloc memory is %u", managed);
	REQUIRE_CU(cuMemGetAddressRange(&base, &size, p + 100));
	CHECK(base == p && size >= bytes, "address range of managed memory: %#llx + %zu", (unsigned long long)base,
	      size);

	/* The CPU's words, a kernel over them in place, the CPU reading its. */
	for (int round = 0; round < 3; round++) {
		t_fill_u32(in, WORDS, &rng);
		memcpy(m, in, bytes);
		mul = (uint32_t)t_rand(&rng) | 1;
		add = (uint32_t)t_rand(&rng);
		{
			void *args[] = { &p, &mul, &add, &n };

			REQUIRE_CU(t_launch(affine, (WORDS + 255) / 256, 256, s, args));
		}
		REQUIRE_CU(cuStreamSynchronize(s));
		for (int i = 0; i < WORDS; i++)
			want[i] = in[i] * mul + add;
		CMP_U32(m, want, WORDS, "the CPU reading a kernel's words in managed memory");
	}

	/* Copies and memsets take it as device memory. */
	REQUIRE_CU(cuMemcpyDtoH(back, p, bytes));
	CMP_U32(back, want, WORDS, "cuMemcpyDtoH from managed memory");
	t_fill_u32(in, WORDS, &rng);
	REQUIRE_CU(cuMemcpyHtoD(p, in, bytes));
	CMP_U32(m, in, WORDS, "the CPU reading what cuMemcpyHtoD wrote to managed memory");
	REQUIRE_CU(cuMemcpyDtoD(d, p, bytes));
	REQUIRE_CU(cuMemsetD32(p, 0x5eed1234u, WORDS));
	for (int i = 0; i < WORDS; i++)
		want[i] = 0x5eed1234u;
	CMP_U32(m, want, WORDS, "the CPU reading what cuMemsetD32 wrote to managed memory");
	REQUIRE_CU(cuMemcpyDtoH(back, d, bytes));
	CMP_U32(back, in, WORDS, "device memory copied from managed memory");
	REQUIRE_CU(cuMemcpyDtoDAsync(p, d, bytes, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CMP_U32(m, in, WORDS, "managed memory copied back from device memory");
	/* cuMemcpy, which tells the direction from the pointers, either way. */
	t_fill_u32(in, WORDS, &rng);
	memcpy(m, in, bytes);
	REQUIRE_CU(cuMemsetD32(d, 0, WORDS));
	REQUIRE_CU(cuMemcpy(d, p, bytes));
	REQUIRE_CU(cuMemcpyDtoH(back, d, bytes));
	CMP_U32(back, in, WORDS, "cuMemcpy from managed to device memory");
	REQUIRE_CU(cuMemsetD32(p, 0, WORDS));
	REQUIRE_CU(cuMemcpy(p, d, bytes));
	CMP_U32(m, in, WORDS, "cuMemcpy from device to managed memory");
	REQUIRE_CU(cuMemcpy((CUdeviceptr)(uintptr_t)back, p, bytes));
	CMP_U32(back, in, WORDS, "cuMemcpy from managed to pageable memory");

	/* Advice, and what the range attributes make of it. */
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_READ_MOSTLY, here));
	CHECK(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, bytes) == 1, "read-mostly after advising it");
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_UNSET_READ_MOSTLY, here));
	CHECK(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, bytes) == 0, "read-mostly after unsetting it");
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, here));
	CHECK(range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, bytes) == 0,
	      "the preferred location after setting it to device 0");
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, here));
	REQUIRE_CU(cuMemRangeGetAttribute(accessed, sizeof(accessed), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, bytes));
	CHECK(accessed[0] == 0 && accessed[1] == CU_DEVICE_INVALID, "accessed-by: %d %d", accessed[0], accessed[1]);
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_UNSET_ACCESSED_BY, here));
	REQUIRE_CU(cuMemAdvise(p, bytes, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, here));

	/* Prefetches, each way: the data stays as it was. */
	REQUIRE_CU(cuMemPrefetchAsync(p, bytes, here, 0, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, bytes) == 0,
	      "the last prefetch location after a prefetch to device 0");
	REQUIRE_CU(cuMemPrefetchAsync(p, bytes, host, 0, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, bytes) == CU_DEVICE_CPU,
	      "the last prefetch location after a prefetch to the host");
	CMP_U32(m, in, WORDS, "managed memory after prefetches");

	/* Attached to one stream, then back to all. */
	REQUIRE_CU(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_SINGLE));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_GLOBAL));
	REQUIRE_CU(cuStreamSynchronize(s));

	/* Memory attached to the host at first: the CPU's own. */
	REQUIRE_CU(cuMemAllocManaged(&p2, 12345, CU_MEM_ATTACH_HOST));
	memset((void *)(uintptr_t)p2, 0xab, 12345);
	CHECK(((uint8_t *)(uintptr_t)p2)[12344] == 0xab, "host-attached managed memory keeps the CPU's writes");
	REQUIRE_CU(cuMemFree(p2));

	CHECK_CU(cuMemRangeGetAttribute(accessed, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 4096),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemRangeGetAttribute(accessed, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, bytes),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAdvise(p, bytes, (CUmem_advise)99, here), CUDA_ERROR_INVALID_VALUE);
	/* cuStreamAttachMemAsync with no attach flag is not asked here: the
	 * real driver (580) crashes on it, where openmps answers
	 * CUDA_ERROR_INVALID_VALUE. */
	CHECK_CU(cuMemFree(p + 4096), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s));
	free(in);
	free(want);
	free(back);
	return t_finish();
}
