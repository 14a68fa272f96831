// SPDX-License-Identifier: MIT
/*
 * Memory pools: the device's default and current pool, stream-ordered
 * allocations from them and from a created pool (written by a kernel and
 * read back), the pool a pointer came from, the attributes (reuse flags,
 * release threshold, reserved and used memory as allocations come, are
 * freed and are trimmed), access, making a created pool current, and
 * destroying a pool while an allocation from it is still out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MiB ((size_t)1 << 20)

static CUdevice dev;
static CUmodule mod;
static CUstream stream;
static uint64_t rng;

static cuuint64_t attr64(CUmemoryPool p, CUmemPool_attribute a)
{
	cuuint64_t v = 0;

	REQUIRE_CU(cuMemPoolGetAttribute(p, a, &v));
	return v;
}

static void test_default_pool(void)
{
	CUmemoryPool def = NULL, cur = NULL, byloc = NULL, of = NULL;
	CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)dev };
	cuuint64_t max = ~(cuuint64_t)0, zero = 0;
	CUdeviceptr d = 0;
	uint32_t *in = malloc(8 * MiB), *out = malloc(8 * MiB);
	CUmemAccess_flags fl = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	int reuse = -1, off = 0;

	REQUIRE(in && out, "malloc");
	REQUIRE_CU(cuDeviceGetDefaultMemPool(&def, dev));
	REQUIRE_CU(cuDeviceGetMemPool(&cur, dev));
	CHECK(def && def == cur, "default pool %p, current %p", (void *)def, (void *)cur);
	REQUIRE_CU(cuMemGetDefaultMemPool(&byloc, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
	CHECK(byloc == def, "default pool by location %p, by device %p", (void *)byloc, (void *)def);
	CHECK_CU(cuDeviceGetDefaultMemPool(NULL, dev), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemPoolGetAccess(&fl, def, &loc));
	CHECK(fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "the default pool's own device has access %d", (int)fl);

	/* Cached memory: kept up to the release threshold, trimmed on request. */
	REQUIRE_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
	CHECK(attr64(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == max, "release threshold not kept");
	REQUIRE_CU(cuMemAllocAsync(&d, 32 * MiB, stream));
	CHECK(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 32 * MiB, "used %llu after 32 MiB",
	      (unsigned long long)attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
	t_fill_u32(in, 2 * MiB, &rng);
	REQUIRE_CU(cuMemcpyHtoDAsync(d + 3 * MiB, in, 8 * MiB, stream));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d + 3 * MiB, 8 * MiB, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	CMP_U32(out, in, 2 * MiB, "an allocation of the default pool");
	REQUIRE_CU(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, d));
	CHECK(of == def, "pool of a pointer: %p, want %p", (void *)of, (void *)def);
	REQUIRE_CU(cuMemFreeAsync(d, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	CHECK(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 32 * MiB, "reserved %llu after a free under "
	      "an unlimited threshold", (unsigned long long)attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
	CHECK(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= 32 * MiB, "used high-water mark %llu",
	      (unsigned long long)attr64(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH));
	REQUIRE_CU(cuMemPoolTrimTo(def, 0));
	CHECK(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
	      "trimmed: reserved %llu, used %llu",
	      (unsigned long long)attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
	      (unsigned long long)attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
	REQUIRE_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
	REQUIRE_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
	CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero) != CUDA_SUCCESS,
	      "the used-memory counter was set");

	REQUIRE_CU(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
	CHECK(reuse == 0 || reuse == 1, "reuse flag %d", reuse);
	REQUIRE_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off));
	REQUIRE_CU(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
	CHECK(reuse == 0, "reuse flag set to 0 reads %d", reuse);
	reuse = 1;
	REQUIRE_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
	CHECK_CU(cuMemPoolGetAttribute(def, (CUmemPool_attribute)999, &reuse), CUDA_ERROR_INVALID_VALUE);
	free(in);
	free(out);
}

static void test_created_pool(void)
{
	CUmemPoolProps props;
	CUmemoryPool pool = NULL, cur = NULL, def = NULL, of = NULL;
	CUdeviceptr a = 0, b = 0, c = 0;
	CUfunction iota = t_func(mod, "iota_u32");
	unsigned int base = 1000;
	int n = 1 << 20;
	void *args[] = { &a, &base, &n };
	uint32_t *out = malloc((size_t)n * 4);

	REQUIRE(out, "malloc");
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = (int)dev;
	REQUIRE_CU(cuMemPoolCreate(&pool, &props));
	REQUIRE_CU(cuMemAllocFromPoolAsync(&a, (size_t)n * 4, pool, stream));
	REQUIRE_CU(t_launch(iota, (unsigned)(n / 256), 256, stream, args));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, a, (size_t)n * 4, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (int i = 0; i < n; i++) {
		if (out[i] != base + (unsigned)i) {
			CHECK(0, "word %d of a pool allocation after iota: %u", i, out[i]);
			break;
		}
	}
	REQUIRE_CU(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
	CHECK(of == pool, "pool of a pointer: %p, want %p", (void *)of, (void *)pool);
	CHECK(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= (cuuint64_t)n * 4, "created pool's used memory");

	/* Current: cuMemAllocAsync takes from it. */
	REQUIRE_CU(cuDeviceSetMemPool(dev, pool));
	REQUIRE_CU(cuDeviceGetMemPool(&cur, dev));
	CHECK(cur == pool, "current pool %p, set %p", (void *)cur, (void *)pool);
	REQUIRE_CU(cuMemAllocAsync(&b, MiB, stream));
	REQUIRE_CU(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
	CHECK(of == pool, "cuMemAllocAsync with a pool current came from %p", (void *)of);
	REQUIRE_CU(cuMemFreeAsync(b, stream));

	/* Destroyed with an allocation out: the allocation stays usable. */
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemPoolDestroy(pool));
	REQUIRE_CU(cuDeviceGetMemPool(&cur, dev));
	REQUIRE_CU(cuDeviceGetDefaultMemPool(&def, dev));
	CHECK(cur == def, "after destroying the current pool, current is %p, default %p", (void *)cur, (void *)def);
	REQUIRE_CU(cuMemcpyDtoH(out, a + 4096, 4096));
	CHECK(out[0] == base + 1024, "a destroyed pool's allocation reads %u", out[0]);
	REQUIRE_CU(cuMemFreeAsync(a, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));

	CHECK_CU(cuMemPoolCreate(NULL, &props), CUDA_ERROR_INVALID_VALUE);
	props.location.id = 1000;
	CHECK(cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS, "a pool on device 1000");
	/* Nothing asked, nothing given: the driver calls that a success. */
	REQUIRE_CU(cuMemAllocFromPoolAsync(&c, 0, def, stream));
	if (c)
		REQUIRE_CU(cuMemFreeAsync(c, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	free(out);
}

int main(int argc, char **argv)
{
	int pools = 0;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	t_primary(dev);
	REQUIRE_CU(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
	if (!pools) {
		printf("memory pools are not supported here\n");
		return T_SKIP;
	}
	mod = t_module();
	REQUIRE_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	test_default_pool();
	test_created_pool();
	REQUIRE_CU(cuStreamDestroy(stream));
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
