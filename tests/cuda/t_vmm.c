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

	CHECK(cuMemSetAccess(p, size, &a, 1));
}

static void test_granularity(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	size_t rec = 0;

	CHECK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK(cuMemGetAllocationGranularity(&rec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	EXPECT(gran && !(gran & (gran - 1)), "granularity %zu is not a power of two", gran);
	EXPECT(rec >= gran && rec % gran == 0, "recommended granularity %zu, minimum %zu", rec, gran);
	CHECK_ERR(cuMemGetAllocationGranularity(NULL, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
	CHECK_ERR(cuMemGetAllocationGranularity(&rec, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
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
	CHECK(cuMemGetInfo(&fr0, &total));
	CHECK(cuMemCreate(&h, size, &p, 0));
	CHECK(cuMemGetInfo(&fr1, &total));
	EXPECT(fr1 + size <= fr0 + gran, "a %zu-byte physical allocation: free %zu -> %zu", size, fr0, fr1);
	CHECK(cuMemAddressReserve(&res, 4 * gran, 0, 0, 0));
	EXPECT(res && res % gran == 0, "reservation at %#llx", (unsigned long long)res);
	va = res + gran;
	CHECK(cuMemMap(va, size, 0, h, 0));
	set_rw(va, size);

	CHECK(cuMemcpyHtoD(va, in, size));
	CHECK(t_launch(affine, (unsigned)((n + 255) / 256), 256, NULL, args));
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(out, va, size));
	for (size_t i = 0; i < n; i++)
		in[i] = in[i] * mul + add;
	CMP_U32(out, in, n, "mapped memory after a kernel");
	CHECK(cuMemsetD32(va + 4096, 0xa5a5a5a5u, 1024));
	CHECK(cuMemcpyDtoH(out, va, 8192));
	for (size_t i = 1024; i < 2048; i++)
		in[i] = 0xa5a5a5a5u;
	CMP_U32(out, in, 2048, "mapped memory after a memset");

	CHECK(cuMemGetAddressRange(&got_base, &got_size, va + 12345));
	EXPECT(got_base == va && got_size == size, "address range of a mapping: %#llx+%zu, want %#llx+%zu",
	       (unsigned long long)got_base, got_size, (unsigned long long)va, size);

	/* Released while mapped: still there, and retained again by address. */
	CHECK(cuMemRelease(h));
	CHECK(cuMemcpyDtoH(out, va + size - 4096, 4096));
	CMP_U32(out, in + n - 1024, 1024, "mapped memory after its handle was released");
	CHECK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 777)));
	CHECK(cuMemGetAllocationPropertiesFromHandle(&back, h2));
	EXPECT(back.location.type == CU_MEM_LOCATION_TYPE_DEVICE && back.location.id == (int)dev &&
	       back.type == CU_MEM_ALLOCATION_TYPE_PINNED, "properties of a retained handle: type %d at %d/%d",
	       (int)back.type, (int)back.location.type, back.location.id);
	CHECK(cuMemRelease(h2));

	CHECK_ERR(cuMemUnmap(va, gran), CUDA_ERROR_INVALID_VALUE);   /* half a mapping */
	CHECK(cuMemUnmap(va, size));
	CHECK(cuMemGetInfo(&fr2, &total));
	EXPECT(fr2 + gran >= fr1 + size, "unmapped and released: free %zu -> %zu", fr1, fr2);
	CHECK(cuMemAddressFree(res, 4 * gran));
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

	CHECK(cuMemCreate(&a, gran, &p, 0));
	CHECK(cuMemCreate(&b, gran, &p, 0));
	CHECK(cuMemAddressReserve(&res, 2 * gran, 0, 0, 0));
	CHECK(cuMemMap(res, gran, 0, a, 0));
	CHECK(cuMemMap(res + gran, gran, 0, b, 0));
	set_rw(res, 2 * gran);
	/* Each side of the boundary its own pattern. */
	CHECK(cuMemsetD32(res, 0x01020304u, gran / 4));
	CHECK(cuMemsetD32(res + gran, 0x05060708u, gran / 4));
	CHECK(cuMemcpyDtoH(&w[0], res + gran - 4, 4));
	CHECK(cuMemcpyDtoH(&w[1], res + gran, 4));
	EXPECT(w[0] == 0x01020304u && w[1] == 0x05060708u, "either side of two mappings: %#x %#x", w[0], w[1]);
	/* Mapping over a mapping is refused. */
	EXPECT(cuMemMap(res, gran, 0, b, 0) != CUDA_SUCCESS, "mapped twice at one address");
	CHECK(cuMemUnmap(res, 2 * gran));
	CHECK(cuMemRelease(a));
	CHECK(cuMemRelease(b));
	CHECK(cuMemAddressFree(res, 2 * gran));
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
	CHECK(cuMemCreate(&h, gran, &p, 0));
	CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	EXPECT(fd >= 0, "exported fd %d", fd);
	CHECK(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	CHECK(cuMemAddressReserve(&r1, gran, 0, 0, 0));
	CHECK(cuMemAddressReserve(&r2, gran, 0, 0, 0));
	CHECK(cuMemMap(r1, gran, 0, h, 0));
	CHECK(cuMemMap(r2, gran, 0, h2, 0));
	set_rw(r1, gran);
	set_rw(r2, gran);
	CHECK(cuMemcpyHtoD(r1, in, gran));
	CHECK(cuMemcpyDtoH(out, r2, gran));
	CMP_U32(out, in, gran / 4, "the imported allocation, read through a second mapping");
	CHECK(cuMemUnmap(r1, gran));
	CHECK(cuMemUnmap(r2, gran));
	CHECK(cuMemRelease(h));
	CHECK(cuMemRelease(h2));
	CHECK(cuMemAddressFree(r1, gran));
	CHECK(cuMemAddressFree(r2, gran));
	free(in);
	free(out);
}

static void test_errors(void)
{
	CUmemAllocationProp p = prop_of(CU_MEM_HANDLE_TYPE_NONE);
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr res = 0, plain = 0;

	CHECK_ERR(cuMemCreate(NULL, gran, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_ERR(cuMemCreate(&h, gran, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_ERR(cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_ERR(cuMemAddressReserve(NULL, gran, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_ERR(cuMemAddressReserve(&res, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemCreate(&h, gran, &p, 0));
	CHECK(cuMemAddressReserve(&res, 2 * gran, 0, 0, 0));
	/* Past the allocation's end, or outside any reservation. */
	EXPECT(cuMemMap(res, 2 * gran, 0, h, 0) != CUDA_SUCCESS, "mapped 2 granules of a 1-granule allocation");
	CHECK(cuMemAlloc(&plain, gran));
	EXPECT(cuMemMap(plain, gran, 0, h, 0) != CUDA_SUCCESS, "mapped over a cuMemAlloc allocation");
	CHECK(cuMemFree(plain));
	CHECK_ERR(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)res), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemMap(res, gran, 0, h, 0));
	EXPECT(cuMemFree(res) != CUDA_SUCCESS, "cuMemFree freed a mapping");
	EXPECT(cuMemAddressFree(res, gran) != CUDA_SUCCESS, "freed half of a reservation");
	CHECK_ERR(cuMemAddressFree(res, 2 * gran), CUDA_ERROR_INVALID_VALUE);   /* still mapped */
	CHECK(cuMemUnmap(res, gran));
	CHECK(cuMemRelease(h));
	CHECK(cuMemAddressFree(res, 2 * gran));
}

int main(int argc, char **argv)
{
	int vmm = 0;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	t_primary(dev);
	CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
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
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
