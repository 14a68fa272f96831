// SPDX-License-Identifier: MIT
/*
 * Virtual memory management: allocation granularity, physical allocations
 * mapped into reserved address ranges and given access, then used as device
 * memory by copies, memsets and kernels; what cuMemGetAddressRange and
 * cuMemGetInfo say about them; the reference rules (a released allocation
 * stays while mapped, a handle retained by address, memory returned once
 * unmapped); unmapping adjacent mappings at once; sharing through a POSIX
 * file descriptor (export, import, a second mapping that sees the same
 * bytes); and the errors for ranges and handles that are not the caller's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static CUdevice dev;
static CUmodule mod;
static uint64_t rng;
static size_t gran;

static CUmemAllocationProp prop_of(CUmemAllocationHandleType types)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.requestedHandleTypes = types;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = (int)dev;
	return p;
}

static void set_rw(CUdeviceptr p, size_t size)
{
	CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev },
			      .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	REQUIRE_CU(cuMemSetAccess(p, size, &a, 1));
}

static void test_granularity(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	size_t rec = 0;

	REQUIRE_CU(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	REQUIRE_CU(cuMemGetAllocationGranularity(&rec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	CHECK(gran && !(gran & (gran - 1)), "granularity %zu is not a power of two", gran);
	CHECK(rec >= gran && rec % gran == 0, "recommended granularity %zu, minimum %zu", rec, gran);
	CHECK_CU(cuMemGetAllocationGranularity(NULL, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemGetAllocationGranularity(&rec, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
}

/* Maps 2 granules at 1 granule into a 4-granule reservation and uses them. */
static void test_map_and_use(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	size_t size = 2 * gran, n = size / 4, fr0, fr1, fr2, total, got_size;
	uint32_t *in = malloc(size), *out = malloc(size);
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUdeviceptr res = 0, va, got_base;
	CUfunction affine = t_func(mod, "affine_u32");
	unsigned int mul = 3, add = 11;
	int cnt = (int)n;
	void *args[] = { &va, &mul, &add, &cnt };
	CUmemAllocationProp back;

	REQUIRE(in && out, "malloc");
	t_fill_u32(in, n, &rng);
	REQUIRE_CU(cuMemGetInfo(&fr0, &total));
	REQUIRE_CU(cuMemCreate(&h, size, &p, 0));
	REQUIRE_CU(cuMemGetInfo(&fr1, &total));
	CHECK(fr1 + size <= fr0 + gran, "a %zu-byte physical allocation: free %zu -> %zu", size, fr0, fr1);
	REQUIRE_CU(cuMemAddressReserve(&res, 4 * gran, 0, 0, 0));
	CHECK(res && res % gran == 0, "reservation at %#llx", (unsigned long long)res);
	va = res + gran;
	REQUIRE_CU(cuMemMap(va, size, 0, h, 0));
	set_rw(va, size);

	REQUIRE_CU(cuMemcpyHtoD(va, in, size));
	REQUIRE_CU(t_launch(affine, (unsigned)((n + 255) / 256), 256, NULL, args));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(out, va, size));
	for (size_t i = 0; i < n; i++)
		in[i] = in[i] * mul + add;
	CMP_U32(out, in, n, "mapped memory after a kernel");
	REQUIRE_CU(cuMemsetD32(va + 4096, 0xa5a5a5a5u, 1024));
	REQUIRE_CU(cuMemcpyDtoH(out, va, 8192));
	for (size_t i = 1024; i < 2048; i++)
		in[i] = 0xa5a5a5a5u;
	CMP_U32(out, in, 2048, "mapped memory after a memset");

	REQUIRE_CU(cuMemGetAddressRange(&got_base, &got_size, va + 12345));
	CHECK(got_base == va && got_size == size, "address range of a mapping: %#llx+%zu, want %#llx+%zu",
	      (unsigned long long)got_base, got_size, (unsigned long long)va, size);

	/* Released while mapped: still there, and retained again by address. */
	REQUIRE_CU(cuMemRelease(h));
	REQUIRE_CU(cuMemcpyDtoH(out, va + size - 4096, 4096));
	CMP_U32(out, in + n - 1024, 1024, "mapped memory after its handle was released");
	REQUIRE_CU(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 777)));
	REQUIRE_CU(cuMemGetAllocationPropertiesFromHandle(&back, h2));
	CHECK(back.location.type == CU_MEM_LOCATION_TYPE_DEVICE && back.location.id == (int)dev &&
	      back.type == CU_MEM_ALLOCATION_TYPE_PINNED, "properties of a retained handle: type %d at %d/%d",
	      (int)back.type, (int)back.location.type, back.location.id);
	REQUIRE_CU(cuMemRelease(h2));

	CHECK_CU(cuMemUnmap(va, gran), CUDA_ERROR_INVALID_VALUE);   /* half a mapping */
	REQUIRE_CU(cuMemUnmap(va, size));
	REQUIRE_CU(cuMemGetInfo(&fr2, &total));
	CHECK(fr2 + gran >= fr1 + size, "unmapped and released: free %zu -> %zu", fr1, fr2);
	REQUIRE_CU(cuMemAddressFree(res, 4 * gran));
	free(in);
	free(out);
}

/* Two allocations side by side, unmapped by one call. */
static void test_adjacent(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	CUmemGenericAllocationHandle a = 0, b = 0;
	CUdeviceptr res = 0;
	uint32_t w[2] = { 0, 0 };

	REQUIRE_CU(cuMemCreate(&a, gran, &p, 0));
	REQUIRE_CU(cuMemCreate(&b, gran, &p, 0));
	REQUIRE_CU(cuMemAddressReserve(&res, 2 * gran, 0, 0, 0));
	REQUIRE_CU(cuMemMap(res, gran, 0, a, 0));
	REQUIRE_CU(cuMemMap(res + gran, gran, 0, b, 0));
	set_rw(res, 2 * gran);
	/* Each side of the boundary its own pattern. */
	REQUIRE_CU(cuMemsetD32(res, 0x01020304u, gran / 4));
	REQUIRE_CU(cuMemsetD32(res + gran, 0x05060708u, gran / 4));
	REQUIRE_CU(cuMemcpyDtoH(&w[0], res + gran - 4, 4));
	REQUIRE_CU(cuMemcpyDtoH(&w[1], res + gran, 4));
	CHECK(w[0] == 0x01020304u && w[1] == 0x05060708u, "either side of two mappings: %#x %#x", w[0], w[1]);
	/* Mapping over a mapping is refused. */
	CHECK(cuMemMap(res, gran, 0, b, 0) != CUDA_SUCCESS, "mapped twice at one address");
	REQUIRE_CU(cuMemUnmap(res, 2 * gran));
	REQUIRE_CU(cuMemRelease(a));
	REQUIRE_CU(cuMemRelease(b));
	REQUIRE_CU(cuMemAddressFree(res, 2 * gran));
}

static void test_share(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUdeviceptr r1 = 0, r2 = 0;
	uint32_t *in = malloc(gran), *out = malloc(gran);
	int fd = -1;

	REQUIRE(in && out, "malloc");
	t_fill_u32(in, gran / 4, &rng);
	REQUIRE_CU(cuMemCreate(&h, gran, &p, 0));
	REQUIRE_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CHECK(fd >= 0, "exported fd %d", fd);
	REQUIRE_CU(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	REQUIRE_CU(cuMemAddressReserve(&r1, gran, 0, 0, 0));
	REQUIRE_CU(cuMemAddressReserve(&r2, gran, 0, 0, 0));
	REQUIRE_CU(cuMemMap(r1, gran, 0, h, 0));
	REQUIRE_CU(cuMemMap(r2, gran, 0, h2, 0));
	set_rw(r1, gran);
	set_rw(r2, gran);
	REQUIRE_CU(cuMemcpyHtoD(r1, in, gran));
	REQUIRE_CU(cuMemcpyDtoH(out, r2, gran));
	CMP_U32(out, in, gran / 4, "the imported allocation, read through a second mapping");
	REQUIRE_CU(cuMemUnmap(r1, gran));
	REQUIRE_CU(cuMemUnmap(r2, gran));
	REQUIRE_CU(cuMemRelease(h));
	REQUIRE_CU(cuMemRelease(h2));
	REQUIRE_CU(cuMemAddressFree(r1, gran));
	REQUIRE_CU(cuMemAddressFree(r2, gran));
	free(in);
	free(out);
}

static void test_errors(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr res = 0, plain = 0;

	CHECK_CU(cuMemCreate(NULL, gran, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(&h, gran, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressReserve(NULL, gran, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressReserve(&res, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemCreate(&h, gran, &p, 0));
	REQUIRE_CU(cuMemAddressReserve(&res, 2 * gran, 0, 0, 0));
	/* Past the allocation's end, or outside any reservation. */
	CHECK(cuMemMap(res, 2 * gran, 0, h, 0) != CUDA_SUCCESS, "mapped 2 granules of a 1-granule allocation");
	REQUIRE_CU(cuMemAlloc(&plain, gran));
	CHECK(cuMemMap(plain, gran, 0, h, 0) != CUDA_SUCCESS, "mapped over a cuMemAlloc allocation");
	REQUIRE_CU(cuMemFree(plain));
	CHECK_CU(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)res), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemMap(res, gran, 0, h, 0));
	CHECK(cuMemFree(res) != CUDA_SUCCESS, "cuMemFree freed a mapping");
	CHECK(cuMemAddressFree(res, gran) != CUDA_SUCCESS, "freed half of a reservation");
	CHECK_CU(cuMemAddressFree(res, 2 * gran), CUDA_ERROR_INVALID_VALUE);   /* still mapped */
	REQUIRE_CU(cuMemUnmap(res, gran));
	REQUIRE_CU(cuMemRelease(h));
	REQUIRE_CU(cuMemAddressFree(res, 2 * gran));
}

int main(int argc, char **argv)
{
	int vmm = 0;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	t_primary(dev);
	REQUIRE_CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
	if (!vmm) {
		printf("virtual memory management is not supported here\n");
		return T_SKIP;
	}
	mod = t_module();
	test_granularity();
	test_map_and_use();
	test_adjacent();
	test_share();
	test_errors();
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
