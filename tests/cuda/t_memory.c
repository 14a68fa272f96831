// SPDX-License-Identifier: MIT
/*
 * Memory: device allocations (plain and pitched), what cuMemGetInfo and
 * cuMemGetAddressRange say about them, pinned host memory (cuMemAllocHost,
 * cuMemHostAlloc with each flag), pointer attributes of device, pinned and
 * unknown pointers, copies in every direction (sync and async, pinned and
 * pageable, sizes from 1 byte to 64 MiB at unaligned offsets, and the
 * unified cuMemcpy), memsets of each width at odd offsets and lengths, and
 * kernels reading and writing pinned host memory through its device
 * pointer.
 *
 * Every destination is poisoned first and its bytes outside the written
 * range are checked afterwards, so short, long and misplaced copies fail.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define MiB ((size_t)1 << 20)
#define GUARD 64                /* poisoned bytes kept around each copy */

static CUcontext ctx;
static CUmodule mod;
/* A blocking stream: work queued by the synchronous calls (on the legacy
 * default stream), which may still be in flight when they return, is
 * ordered before what this stream runs. */
static CUstream stream;
static uint64_t rng;

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	REQUIRE(p, "malloc(%zu)", n);
	return p;
}

static void test_alloc(void)
{
	static const size_t sizes[] = { 1, 256, 4099, MiB + 7 };
	CUdeviceptr d[4], base, dp, bogus;
	size_t size, pitch = 0;
	unsigned char *host;
	int stack_var = 1;

	CHECK_CU(cuMemAlloc(&dp, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);

	for (int i = 0; i < 4; i++) {
		d[i] = 0;
		REQUIRE_CU(cuMemAlloc(&d[i], sizes[i]));
		CHECK(d[i] != 0, "cuMemAlloc(%zu) gave a NULL pointer", sizes[i]);
		CHECK(d[i] % 256 == 0, "cuMemAlloc(%zu) gave 0x%llx, not 256-byte aligned", sizes[i],
		      (unsigned long long)d[i]);
		for (int j = 0; j < i; j++)
			CHECK(d[i] >= d[j] + sizes[j] || d[j] >= d[i] + sizes[i],
			      "allocations %d and %d overlap", j, i);
	}
	for (int i = 0; i < 4; i++) {
		CUdeviceptr probes[3] = { d[i], d[i] + sizes[i] / 2, d[i] + sizes[i] - 1 };

		for (int k = 0; k < 3; k++) {
			base = 0;
			size = 0;
			REQUIRE_CU(cuMemGetAddressRange(&base, &size, probes[k]));
			CHECK(base == d[i], "range of 0x%llx: base 0x%llx, expected 0x%llx",
			      (unsigned long long)probes[k], (unsigned long long)base, (unsigned long long)d[i]);
			CHECK(size >= sizes[i] && size <= sizes[i] + 2 * MiB, "range of a %zu-byte allocation: %zu bytes",
			      sizes[i], size);
		}
		/* Either output may be NULL. */
		base = 0;
		REQUIRE_CU(cuMemGetAddressRange(&base, NULL, d[i] + sizes[i] / 3));
		CHECK(base == d[i], "range base with NULL size: 0x%llx", (unsigned long long)base);
		size = 0;
		REQUIRE_CU(cuMemGetAddressRange(NULL, &size, d[i]));
		CHECK(size >= sizes[i], "range size with NULL base: %zu", size);
	}
	/* A host stack address is no allocation. The documentation lists
	 * NOT_FOUND and INVALID_VALUE; either is accepted, success is not. */
	bogus = (CUdeviceptr)(uintptr_t)&stack_var;
	{
		CUresult r = cuMemGetAddressRange(&base, &size, bogus);

		CHECK(r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE,
		      "cuMemGetAddressRange on a stack address -> %s", t_errname(r));
	}
	for (int i = 0; i < 4; i++)
		REQUIRE_CU(cuMemFree(d[i]));

	/* Pitched: rows of 1000 bytes, 33 of them, 4-byte elements. */
	REQUIRE_CU(cuMemAllocPitch(&dp, &pitch, 1000, 33, 4));
	CHECK(pitch >= 1000 && pitch <= 1000 + 4096, "pitch %zu for 1000-byte rows", pitch);
	CHECK(pitch % 4 == 0, "pitch %zu is not a multiple of the element size", pitch);
	CHECK(dp % 256 == 0, "pitched allocation 0x%llx is not 256-byte aligned", (unsigned long long)dp);
	base = 0;
	size = 0;
	REQUIRE_CU(cuMemGetAddressRange(&base, &size, dp + pitch * 32 + 999));
	CHECK(base == dp && size >= pitch * 33, "range of the last pitched row: base 0x%llx size %zu",
	      (unsigned long long)base, size);
	host = xmalloc(pitch * 33);
	memset(host, 0, pitch * 33);
	REQUIRE_CU(cuMemsetD8(dp, 0x6b, pitch * 33));
	REQUIRE_CU(cuMemcpyDtoH(host, dp, pitch * 33));
	CHECK_FILL(host, pitch * 33, 0x6b, "pitched allocation after memset");
	free(host);
	REQUIRE_CU(cuMemFree(dp));
}

static void test_meminfo(CUdevice dev)
{
	const size_t big = 256 * MiB;
	size_t free0 = 0, total = 0, free1 = 0, free2 = 0, devtotal = 0, t = 0;
	CUdeviceptr d;

	REQUIRE_CU(cuDeviceTotalMem(&devtotal, dev));
	REQUIRE_CU(cuMemGetInfo(&free0, &total));
	CHECK(total > 0 && total <= devtotal, "cuMemGetInfo total %zu, device total %zu", total, devtotal);
	CHECK(free0 > 0 && free0 <= total, "cuMemGetInfo free %zu of %zu", free0, total);
	if (free0 < 2 * big) {
		printf("  (only %zu MiB free: skipping the cuMemGetInfo accounting check)\n", free0 / MiB);
		return;
	}
	REQUIRE_CU(cuMemAlloc(&d, big));
	REQUIRE_CU(cuMemsetD8(d, 0x11, big));        /* touch it: backing must exist */
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemGetInfo(&free1, &t));
	CHECK(t == total, "total changed from %zu to %zu", total, t);
	CHECK(free1 < free0, "free memory did not drop: %zu then %zu", free0, free1);
	if (free1 < free0) {
		size_t drop = free0 - free1;

		printf("  allocating %zu MiB dropped free memory by %.1f MiB\n", big / MiB, (double)drop / (double)MiB);
		CHECK(drop >= big - 4 * MiB && drop <= big + 64 * MiB,
		      "allocating %zu MiB dropped free memory by %zu bytes", big / MiB, drop);
	}
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuMemGetInfo(&free2, &t));
	CHECK(free2 > free1 && free2 - free1 >= big - 64 * MiB,
	      "freeing %zu MiB raised free memory from %zu to %zu", big / MiB, free1, free2);
}

static void check_host_alloc(unsigned int flags, const char *what)
{
	const size_t n = MiB + 3;
	unsigned char *h = NULL, *src = xmalloc(n), *back = xmalloc(n);
	unsigned int got = 0;
	CUdeviceptr d;

	REQUIRE_CU(cuMemHostAlloc((void **)&h, n, flags));
	REQUIRE(h != NULL, "cuMemHostAlloc(%s) gave NULL", what);
	REQUIRE_CU(cuMemHostGetFlags(&got, h));
	CHECK((got & flags) == flags, "cuMemHostGetFlags on %s memory gave 0x%x", what, got);
	t_fill_bytes(src, n, &rng);
	memcpy(h, src, n);
	memset(back, 0xc3, n);
	REQUIRE_CU(cuMemAlloc(&d, n));
	REQUIRE_CU(cuMemsetD8(d, 0xa5, n));
	REQUIRE_CU(cuMemcpyHtoD(d, h, n));
	memset(h, 0x3c, n);
	REQUIRE_CU(cuMemcpyDtoH(h, d, n));
	REQUIRE_CU(cuMemcpyDtoH(back, d, n));
	CMP_BYTES(back, src, n, what);
	CMP_BYTES(h, src, n, what);
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuMemFreeHost(h));
	free(src);
	free(back);
}

/* Kernels that read and write pinned host memory through its device pointer. */
static void test_zero_copy(void)
{
	const int n = 100003;
	CUfunction iota = t_func(mod, "iota_u32"), vadd = t_func(mod, "vadd");
	uint32_t *hp = NULL, base = (uint32_t)t_rand(&rng) | 1, *want = xmalloc(n * sizeof(uint32_t));
	float *ha = NULL, *hb = NULL, *c = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
	CUdeviceptr dp = 0, da = 0, db = 0, dc;
	int nn = n;
	unsigned grid = (unsigned)((n + 255) / 256);

	REQUIRE_CU(cuMemHostAlloc((void **)&hp, n * sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
	REQUIRE_CU(cuMemHostGetDevicePointer(&dp, hp, 0));
	CHECK(dp != 0, "cuMemHostGetDevicePointer gave NULL");
	memset(hp, 0xee, n * sizeof(uint32_t));
	{
		void *args[] = { &dp, &base, &nn };

		REQUIRE_CU(t_launch(iota, grid, 256, 0, args));
	}
	REQUIRE_CU(cuCtxSynchronize());
	for (int i = 0; i < n; i++)
		want[i] = base + (uint32_t)i;
	CMP_U32(hp, want, (size_t)n, "iota_u32 written into pinned host memory");

	REQUIRE_CU(cuMemHostAlloc((void **)&ha, n * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	REQUIRE_CU(cuMemHostAlloc((void **)&hb, n * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP));
	t_fill_f32(ha, (size_t)n, &rng);
	t_fill_f32(hb, (size_t)n, &rng);
	for (int i = 0; i < n; i++)
		ref[i] = ha[i] + hb[i];
	REQUIRE_CU(cuMemHostGetDevicePointer(&da, ha, 0));
	REQUIRE_CU(cuMemHostGetDevicePointer(&db, hb, 0));
	REQUIRE_CU(cuMemAlloc(&dc, n * sizeof(float)));
	REQUIRE_CU(cuMemsetD32(dc, 0x7fc00001u, (size_t)n));    /* a NaN: never equals a sum */
	{
		void *args[] = { &da, &db, &dc, &nn };

		REQUIRE_CU(t_launch(vadd, grid, 256, stream, args));
	}
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(c, dc, n * sizeof(float)));
	CMP_F32(c, ref, (size_t)n, 0.0f, 0.0f, "vadd reading pinned host memory");

	REQUIRE_CU(cuMemFree(dc));
	REQUIRE_CU(cuMemFreeHost(ha));
	REQUIRE_CU(cuMemFreeHost(hb));
	REQUIRE_CU(cuMemFreeHost(hp));
	free(want);
	free(c);
	free(ref);
}

static void test_host_memory(void)
{
	void *h = NULL;
	CUdeviceptr dptr = 0, dptr2 = 0;
	int local = 0;
	CUresult r;

	REQUIRE_CU(cuMemAllocHost(&h, 4 * MiB + 3));
	REQUIRE(h != NULL, "cuMemAllocHost gave NULL");
	memset(h, 0x42, 4 * MiB + 3);          /* it must be writable host memory */
	REQUIRE_CU(cuMemHostGetDevicePointer(&dptr, h, 0));
	REQUIRE_CU(cuMemHostGetDevicePointer(&dptr2, (char *)h + 4096, 0));
	CHECK(dptr2 == dptr + 4096, "device pointer of an interior host address: 0x%llx, expected 0x%llx",
	      (unsigned long long)dptr2, (unsigned long long)(dptr + 4096));
	REQUIRE_CU(cuMemFreeHost(h));

	r = cuMemHostGetDevicePointer(&dptr, &local, 0);
	CHECK(r != CUDA_SUCCESS, "cuMemHostGetDevicePointer on a stack address succeeded");

	check_host_alloc(0, "cuMemHostAlloc(0)");
	check_host_alloc(CU_MEMHOSTALLOC_PORTABLE, "cuMemHostAlloc(PORTABLE)");
	check_host_alloc(CU_MEMHOSTALLOC_DEVICEMAP, "cuMemHostAlloc(DEVICEMAP)");
	check_host_alloc(CU_MEMHOSTALLOC_WRITECOMBINED, "cuMemHostAlloc(WRITECOMBINED)");
	check_host_alloc(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP, "cuMemHostAlloc(PORTABLE|DEVICEMAP)");
	test_zero_copy();
}

static void test_pointer_attributes(void)
{
	CUdeviceptr d, d2, got_dptr = 0, start = 0;
	void *h = NULL, *got_hptr = NULL;
	unsigned int type = 0, type2 = 0, managed = 7;
	CUcontext got_ctx = NULL;
	int ordinal = -1;
	size_t range = 0;
	unsigned long long id1 = 0, id2 = 0;
	char *unknown = xmalloc(4096);
	CUpointer_attribute attrs[3] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
	};
	void *data[3];

	REQUIRE_CU(cuMemAlloc(&d, MiB));
	REQUIRE_CU(cuMemAlloc(&d2, 4096));
	REQUIRE_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100));
	CHECK(type == CU_MEMORYTYPE_DEVICE, "memory type of device memory: %u", type);
	REQUIRE_CU(cuPointerGetAttribute(&got_ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d));
	CHECK(got_ctx == ctx, "context of device memory: %p, expected %p", (void *)got_ctx, (void *)ctx);
	REQUIRE_CU(cuPointerGetAttribute(&got_dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 100));
	CHECK(got_dptr == d + 100, "device pointer of device memory: 0x%llx", (unsigned long long)got_dptr);
	REQUIRE_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
	CHECK(ordinal == 0, "device ordinal of device memory: %d", ordinal);
	REQUIRE_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 12345));
	CHECK(start == d, "range start of an interior pointer: 0x%llx, expected 0x%llx",
	      (unsigned long long)start, (unsigned long long)d);
	REQUIRE_CU(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 12345));
	CHECK(range >= MiB, "range size of a 1 MiB allocation: %zu", range);
	REQUIRE_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
	CHECK(managed == 0, "cuMemAlloc memory reported as managed (%u)", managed);
	REQUIRE_CU(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
	REQUIRE_CU(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2));
	CHECK(id1 != id2, "two allocations share buffer id %llu", id1);

	/* The same through cuPointerGetAttributes. */
	type = 0;
	got_ctx = NULL;
	got_dptr = 0;
	data[0] = &type;
	data[1] = &got_ctx;
	data[2] = &got_dptr;
	REQUIRE_CU(cuPointerGetAttributes(3, attrs, data, d2 + 8));
	CHECK(type == CU_MEMORYTYPE_DEVICE && got_ctx == ctx && got_dptr == d2 + 8,
	      "cuPointerGetAttributes on device memory: type %u ctx %p dptr 0x%llx", type, (void *)got_ctx,
	      (unsigned long long)got_dptr);

	/* Pinned host memory. */
	REQUIRE_CU(cuMemAllocHost(&h, 64 * 1024));
	REQUIRE_CU(cuPointerGetAttribute(&type2, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h));
	CHECK(type2 == CU_MEMORYTYPE_HOST, "memory type of pinned host memory: %u", type2);
	REQUIRE_CU(cuPointerGetAttribute(&got_hptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)h + 5));
	CHECK(got_hptr == (char *)h + 5, "host pointer of pinned memory: %p, expected %p", got_hptr,
	      (void *)((char *)h + 5));
	got_ctx = NULL;
	REQUIRE_CU(cuPointerGetAttribute(&got_ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)h));
	CHECK(got_ctx == ctx, "context of pinned memory: %p, expected %p", (void *)got_ctx, (void *)ctx);
	got_dptr = 0;
	REQUIRE_CU(cuPointerGetAttribute(&got_dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)h));
	{
		CUdeviceptr mapped = 0;

		REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, h, 0));
		CHECK(got_dptr == mapped, "device pointer attribute 0x%llx, cuMemHostGetDevicePointer 0x%llx",
		      (unsigned long long)got_dptr, (unsigned long long)mapped);
	}

	/* Memory CUDA does not know: an error from the single query, NULLs from the plural one. */
	type = 0;
	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)unknown),
		 CUDA_ERROR_INVALID_VALUE);
	type = 0xabc;
	got_ctx = (CUcontext)(uintptr_t)0x1234;
	got_dptr = 0x5678;
	REQUIRE_CU(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)unknown));
	CHECK(type == 0 && got_ctx == NULL && got_dptr == 0,
	      "cuPointerGetAttributes on unknown memory: type %u ctx %p dptr 0x%llx", type, (void *)got_ctx,
	      (unsigned long long)got_dptr);

	REQUIRE_CU(cuMemFreeHost(h));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuMemFree(d2));
	free(unknown);
}

/* One round trip host -> device A -> device B -> host, each end at its own offset. */
static void copy_case(size_t n, int async, int pinned, size_t ho, size_t oa, size_t ob, size_t hdo)
{
	size_t hs_len = n + ho, hd_len = n + hdo + GUARD, dev_len = n + GUARD + 16;
	unsigned char *hs, *hd, *check = xmalloc(dev_len);
	CUdeviceptr da, db;
	char what[160];

	snprintf(what, sizeof(what), "%zu bytes, %s, %s, offsets host %zu dev %zu/%zu back %zu", n,
		 async ? "async" : "sync", pinned ? "pinned" : "pageable", ho, oa, ob, hdo);
	if (pinned) {
		REQUIRE_CU(cuMemAllocHost((void **)&hs, hs_len));
		REQUIRE_CU(cuMemAllocHost((void **)&hd, hd_len));
	} else {
		hs = xmalloc(hs_len);
		hd = xmalloc(hd_len);
	}
	REQUIRE_CU(cuMemAlloc(&da, dev_len));
	REQUIRE_CU(cuMemAlloc(&db, dev_len));

	t_fill_bytes(hs + ho, n, &rng);
	memset(hd, 0xc3, hd_len);
	REQUIRE_CU(cuMemsetD8(da, 0xa5, dev_len));
	REQUIRE_CU(cuMemsetD8(db, 0x5a, dev_len));

	if (async) {
		REQUIRE_CU(cuMemcpyHtoDAsync(da + oa, hs + ho, n, stream));
		REQUIRE_CU(cuMemcpyDtoDAsync(db + ob, da + oa, n, stream));
		REQUIRE_CU(cuMemcpyDtoHAsync(hd + hdo, db + ob, n, stream));
		REQUIRE_CU(cuStreamSynchronize(stream));
	} else {
		REQUIRE_CU(cuMemcpyHtoD(da + oa, hs + ho, n));
		REQUIRE_CU(cuMemcpyDtoD(db + ob, da + oa, n));
		REQUIRE_CU(cuMemcpyDtoH(hd + hdo, db + ob, n));
	}
	if (CMP_BYTES(hd + hdo, hs + ho, n, what) == 0) {
		CHECK_FILL(hd, hdo, 0xc3, "host bytes before the copy-back");
		CHECK_FILL(hd + hdo + n, GUARD, 0xc3, "host bytes after the copy-back");
		/* Nothing outside the written ranges changed on the device. */
		REQUIRE_CU(cuMemcpyDtoH(check, da, dev_len));
		CHECK_FILL(check, oa, 0xa5, "device A before the copy");
		CHECK_FILL(check + oa + n, dev_len - oa - n, 0xa5, "device A after the copy");
		REQUIRE_CU(cuMemcpyDtoH(check, db, dev_len));
		CHECK_FILL(check, ob, 0x5a, "device B before the copy");
		CHECK_FILL(check + ob + n, dev_len - ob - n, 0x5a, "device B after the copy");
	}

	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	if (pinned) {
		REQUIRE_CU(cuMemFreeHost(hs));
		REQUIRE_CU(cuMemFreeHost(hd));
	} else {
		free(hs);
		free(hd);
	}
	free(check);
}

static void test_copies(void)
{
	static const size_t sizes[] = { 1, 4, 4099, 65536 + 5, MiB + 7, 64 * MiB };
	static const size_t offs[] = { 0, 1, 3, 7, 13, 8, 5, 16 };
	int k = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int async = 0; async < 2; async++) {
			for (int pinned = 0; pinned < 2; pinned++, k++) {
				/* Aligned at every end once per size, unaligned otherwise. */
				if (async == 0 && pinned == 0)
					copy_case(sizes[i], async, pinned, 0, 0, 0, 0);
				copy_case(sizes[i], async, pinned, offs[k % 8], offs[(k + 1) % 8], offs[(k + 3) % 8],
					  offs[(k + 5) % 8]);
			}
		}
	}
}

/* cuMemcpy infers the direction from the pointers (unified addressing). */
static void test_unified_copy(void)
{
	const size_t n = 100003;
	unsigned char *src = xmalloc(n + 8), *dst = xmalloc(n + 8), *pin = NULL, *pin2 = NULL;
	CUdeviceptr d1, d2;

#define U(p) ((CUdeviceptr)(uintptr_t)(p))
	REQUIRE_CU(cuMemAllocHost((void **)&pin, n + 8));
	REQUIRE_CU(cuMemAllocHost((void **)&pin2, n + 8));
	REQUIRE_CU(cuMemAlloc(&d1, n + 8));
	REQUIRE_CU(cuMemAlloc(&d2, n + 8));

	/* pageable -> device -> device -> pageable */
	t_fill_bytes(src, n + 8, &rng);
	memset(dst, 0xc3, n + 8);
	REQUIRE_CU(cuMemsetD8(d1, 0xa5, n + 8));
	REQUIRE_CU(cuMemsetD8(d2, 0x5a, n + 8));
	REQUIRE_CU(cuMemcpy(d1 + 1, U(src + 3), n));
	REQUIRE_CU(cuMemcpy(d2 + 5, d1 + 1, n));
	REQUIRE_CU(cuMemcpy(U(dst + 2), d2 + 5, n));
	CMP_BYTES(dst + 2, src + 3, n, "cuMemcpy pageable->device->device->pageable");
	CHECK_FILL(dst, 2, 0xc3, "bytes before cuMemcpy's destination");
	CHECK_FILL(dst + 2 + n, 6, 0xc3, "bytes after cuMemcpy's destination");

	/* pinned -> device -> pinned */
	t_fill_bytes(pin, n + 8, &rng);
	memset(pin2, 0xc3, n + 8);
	REQUIRE_CU(cuMemcpy(d1, U(pin + 1), n));
	REQUIRE_CU(cuMemcpy(U(pin2 + 7), d1, n));
	CMP_BYTES(pin2 + 7, pin + 1, n, "cuMemcpy pinned->device->pinned");

	/* host -> host, both kinds */
	memset(dst, 0xc3, n + 8);
	REQUIRE_CU(cuMemcpy(U(dst), U(pin), n));
	CMP_BYTES(dst, pin, n, "cuMemcpy pinned->pageable");
	t_fill_bytes(src, n + 8, &rng);
	memset(dst, 0xc3, n + 8);
	REQUIRE_CU(cuMemcpy(U(dst + 1), U(src), n));
	CMP_BYTES(dst + 1, src, n, "cuMemcpy pageable->pageable");

	/* The async form on a stream. */
	t_fill_bytes(pin, n + 8, &rng);
	memset(pin2, 0xc3, n + 8);
	REQUIRE_CU(cuMemsetD8(d2, 0x5a, n + 8));
	REQUIRE_CU(cuMemcpyAsync(d1 + 3, U(pin), n, stream));
	REQUIRE_CU(cuMemcpyAsync(d2, d1 + 3, n, stream));
	REQUIRE_CU(cuMemcpyAsync(U(pin2), d2, n, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	CMP_BYTES(pin2, pin, n, "cuMemcpyAsync pinned->device->device->pinned");
#undef U

	REQUIRE_CU(cuMemFree(d1));
	REQUIRE_CU(cuMemFree(d2));
	REQUIRE_CU(cuMemFreeHost(pin));
	REQUIRE_CU(cuMemFreeHost(pin2));
	free(src);
	free(dst);
}

/* Little-endian stores into the host image of the buffer, as the device does them. */
static void image_set(unsigned char *img, size_t off, size_t count, unsigned width, uint32_t v)
{
	for (size_t i = 0; i < count; i++)
		for (unsigned b = 0; b < width; b++)
			img[off + i * width + b] = (unsigned char)(v >> (8 * b));
}

static void test_memset(void)
{
	const size_t len = 256 * 1024 + 100;
	unsigned char *img = xmalloc(len), *got = xmalloc(len);
	CUdeviceptr d;
	static const struct {
		unsigned width;
		int async;
		size_t off, count;
		uint32_t value;
	} ops[] = {
		{ 1, 0, 3, 4097, 0x3c },
		{ 1, 1, 1, 1, 0x81 },
		{ 1, 0, 0, 65537, 0xf7 },
		{ 2, 0, 2, 1001, 0xbeef },
		{ 2, 1, 6, 33333, 0x1357 },
		{ 4, 0, 4, 777, 0xdeadbeef },
		{ 4, 1, 12, 12345, 0x01020304 },
		{ 4, 0, 256, 65000, 0x89abcdef },
	};

	REQUIRE_CU(cuMemAlloc(&d, len));
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		char what[96];

		memset(img, 0xee, len);
		memset(got, 0x11, len);
		REQUIRE_CU(cuMemsetD8(d, 0xee, len));
		image_set(img, ops[k].off, ops[k].count, ops[k].width, ops[k].value);
		switch (ops[k].width * 2 + ops[k].async) {
		case 2: REQUIRE_CU(cuMemsetD8(d + ops[k].off, (unsigned char)ops[k].value, ops[k].count)); break;
		case 3: REQUIRE_CU(cuMemsetD8Async(d + ops[k].off, (unsigned char)ops[k].value, ops[k].count, stream)); break;
		case 4: REQUIRE_CU(cuMemsetD16(d + ops[k].off, (unsigned short)ops[k].value, ops[k].count)); break;
		case 5: REQUIRE_CU(cuMemsetD16Async(d + ops[k].off, (unsigned short)ops[k].value, ops[k].count, stream)); break;
		case 8: REQUIRE_CU(cuMemsetD32(d + ops[k].off, ops[k].value, ops[k].count)); break;
		case 9: REQUIRE_CU(cuMemsetD32Async(d + ops[k].off, ops[k].value, ops[k].count, stream)); break;
		}
		if (ops[k].async)
			REQUIRE_CU(cuStreamSynchronize(stream));
		REQUIRE_CU(cuMemcpyDtoH(got, d, len));
		snprintf(what, sizeof(what), "cuMemsetD%u%s(offset %zu, count %zu, 0x%x)", ops[k].width * 8,
			 ops[k].async ? "Async" : "", ops[k].off, ops[k].count, ops[k].value);
		CMP_BYTES(got, img, len, what);
	}
	REQUIRE_CU(cuMemFree(d));
	free(img);
	free(got);
}

/* 2D memsets: rows of a pitched block set, the bytes between the rows
 * (and around the block) left as they were, at each element size, plain
 * and on a stream; a pitch narrower than a row refused. */
static void test_memset_2d(void)
{
	const size_t pitch = 4096, rows = 37, len = pitch * rows;
	unsigned char *img = xmalloc(len), *got = xmalloc(len);
	CUdeviceptr d;
	static const struct {
		unsigned width;
		int async;
		size_t off, w, h;
		uint32_t value;
	} ops[] = {
		{ 1, 0, 5, 1000, 7, 0x5a },
		{ 1, 1, 0, 4096, 3, 0xc3 },
		{ 2, 0, 2, 700, 20, 0xa55a },
		{ 2, 1, 64, 1, 36, 0x0ff0 },
		{ 4, 0, 8, 1023, 2, 0x12345678 },
		{ 4, 1, 4, 333, 30, 0xfedcba98 },
	};

	REQUIRE_CU(cuMemAlloc(&d, len));
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		CUdeviceptr at = d + ops[k].off;
		char what[96];

		t_fill_bytes(img, len, &rng);
		REQUIRE_CU(cuMemcpyHtoD(d, img, len));
		for (size_t r = 0; r < ops[k].h; r++)
			image_set(img, ops[k].off + r * pitch, ops[k].w, ops[k].width, ops[k].value);
		switch (ops[k].width * 2 + ops[k].async) {
		case 2: REQUIRE_CU(cuMemsetD2D8(at, pitch, (unsigned char)ops[k].value, ops[k].w, ops[k].h)); break;
		case 3: REQUIRE_CU(cuMemsetD2D8Async(at, pitch, (unsigned char)ops[k].value, ops[k].w, ops[k].h, stream)); break;
		case 4: REQUIRE_CU(cuMemsetD2D16(at, pitch, (unsigned short)ops[k].value, ops[k].w, ops[k].h)); break;
		case 5: REQUIRE_CU(cuMemsetD2D16Async(at, pitch, (unsigned short)ops[k].value, ops[k].w, ops[k].h, stream)); break;
		case 8: REQUIRE_CU(cuMemsetD2D32(at, pitch, ops[k].value, ops[k].w, ops[k].h)); break;
		case 9: REQUIRE_CU(cuMemsetD2D32Async(at, pitch, ops[k].value, ops[k].w, ops[k].h, stream)); break;
		}
		if (ops[k].async)
			REQUIRE_CU(cuStreamSynchronize(stream));
		memset(got, 0, len);
		REQUIRE_CU(cuMemcpyDtoH(got, d, len));
		snprintf(what, sizeof(what), "cuMemsetD2D%u%s(offset %zu, %zu x %zu, 0x%x)", ops[k].width * 8,
			 ops[k].async ? "Async" : "", ops[k].off, ops[k].w, ops[k].h, ops[k].value);
		CMP_BYTES(got, img, len, what);
	}
	CHECK_CU(cuMemsetD2D32(d, 100, 1, 100, 2), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(d));
	free(img);
	free(got);
}

/* Stream-ordered allocation: memory from cuMemAllocAsync is usable in the
 * stream's order at once (set, copied in and out on the stream, exact),
 * counts in the free memory while held, and cuMemFreeAsync queued behind
 * the work gives it back; several in a row on the legacy stream too. */
/* 2D copies: a host matrix into a pitched allocation at an offset, from
 * there to a second one, and back, in both the synchronous and the
 * asynchronous form; every row checked, padding bytes included. */
static void test_copy_2d(void)
{
	enum { W = 1000, H = 37, HP = 1024 + 8 };   /* row bytes, rows, host pitch */
	unsigned char *in = xmalloc(HP * H), *out = xmalloc(HP * H);
	CUdeviceptr a, b;
	size_t pa, pb;
	CUDA_MEMCPY2D c;

	t_fill_bytes(in, HP * H, &rng);
	REQUIRE_CU(cuMemAllocPitch(&a, &pa, W + 64, H + 2, 4));
	REQUIRE_CU(cuMemAllocPitch(&b, &pb, W, H, 4));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = HP;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = a;
	c.dstPitch = pa;
	c.dstXInBytes = 64;
	c.dstY = 2;
	c.WidthInBytes = W;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2D(&c));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = a;
	c.srcPitch = pa;
	c.srcXInBytes = 64;
	c.srcY = 2;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = b;
	c.dstPitch = pb;
	c.WidthInBytes = W;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2DAsync(&c, stream));
	memset(&c, 0, sizeof(c));
	memset(out, 0x5c, HP * H);
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = b;
	c.srcPitch = pb;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = HP;
	c.WidthInBytes = W;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2DAsync(&c, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (int r = 0; r < H; r++) {
		if (CMP_BYTES(out + r * HP, in + r * HP, W, "a row after three 2D copies"))
			break;
		for (int x = W; x < HP; x++)
			if (!CHECK(out[r * HP + x] == 0x5c, "padding byte %d of row %d written", x, r))
				break;
	}
	c.dstPitch = W - 1;   /* rows would overlap */
	CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	free(in);
	free(out);
}

/* 3D copies: a host volume (pitch and height both padded) into a box of a
 * larger device volume at an offset in x, y and z, from there to a packed
 * device volume, and back to the host, synchronous and asynchronous; every
 * row checked, padding included; then what the driver refuses. */
static void test_copy_3d(void)
{
	enum { W = 300, H = 13, D = 7, HP = 320, HH = 16 };   /* row bytes, rows, slices; host pitch and height */
	enum { BP = 512, BH = 20, BD = 10 };                  /* the big device volume */
	unsigned char *in = xmalloc(HP * HH * D), *out = xmalloc(HP * HH * D);
	CUdeviceptr big, packed;
	CUDA_MEMCPY3D c;

	t_fill_bytes(in, HP * HH * D, &rng);
	REQUIRE_CU(cuMemAlloc(&big, BP * BH * BD));
	REQUIRE_CU(cuMemAlloc(&packed, W * H * D));
	REQUIRE_CU(cuMemsetD8(big, 0, BP * BH * BD));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = HP;
	c.srcHeight = HH;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = big;
	c.dstPitch = BP;
	c.dstHeight = BH;
	c.dstXInBytes = 100;
	c.dstY = 3;
	c.dstZ = 2;
	c.WidthInBytes = W;
	c.Height = H;
	c.Depth = D;
	REQUIRE_CU(cuMemcpy3D(&c));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = big;
	c.srcPitch = BP;
	c.srcHeight = BH;
	c.srcXInBytes = 100;
	c.srcY = 3;
	c.srcZ = 2;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = packed;
	c.dstPitch = W;
	c.dstHeight = H;
	c.WidthInBytes = W;
	c.Height = H;
	c.Depth = D;
	REQUIRE_CU(cuMemcpy3DAsync(&c, stream));
	memset(&c, 0, sizeof(c));
	memset(out, 0x5c, HP * HH * D);
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = packed;
	c.srcPitch = W;
	c.srcHeight = H;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = HP;
	c.dstHeight = HH;
	c.WidthInBytes = W;
	c.Height = H;
	c.Depth = D;
	REQUIRE_CU(cuMemcpy3DAsync(&c, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (int z = 0; z < D; z++)
		for (int r = 0; r < HH; r++) {
			const unsigned char *o = out + (z * HH + r) * HP, *i = in + (z * HH + r) * HP;
			int n = r < H ? W : 0;

			if (n && CMP_BYTES(o, i, n, "a row after three 3D copies"))
				goto checked;
			for (int x = n; x < HP; x++)
				if (!CHECK(o[x] == 0x5c, "byte %d of row %d of slice %d written (outside the box)", x, r, z))
					goto checked;
		}
checked:
	/* The big volume outside the box is still zero: one row above it. */
	REQUIRE_CU(cuMemcpyDtoH(out, big + (2 * BH + 2) * BP, BP));
	for (int x = 0; x < BP; x++)
		if (!CHECK(out[x] == 0, "byte %d of the row above the box written", x))
			break;
	c.dstHeight = H - 1;   /* slices would overlap */
	CHECK_CU(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
	c.dstHeight = HH;
	c.reserved0 = (void *)&c;   /* the driver copies all the same */
	REQUIRE_CU(cuMemcpy3D(&c));
	c.reserved0 = NULL;
	c.dstPitch = W - 1;   /* rows would overlap */
	CHECK_CU(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(big));
	REQUIRE_CU(cuMemFree(packed));
	free(in);
	free(out);
}

/* Writes 1 into *word 20 ms after it starts (a thread of the program). */
struct release {
	uint32_t *word;
};

static void *release_later(void *arg)
{
	struct release *rel = arg;

	nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
	__atomic_store_n(rel->word, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* cuMemFreeAsync of memory from cuMemAlloc: the free waits in the stream
 * behind the work queued before it (a copy out of the memory sees what a
 * memset on the same stream wrote), the memory goes once the stream gets
 * there (the free memory is back after a synchronize, and the pointer is
 * no allocation any more), and allocations freed one after another on a
 * stream, without a wait between, leave no error behind. A slow kernel
 * goes first, so the frees are queued long before the stream reaches
 * them. With
 * OPENMPS_PLACEMENT=random (tests/system/placed.sh) these are placed: a
 * large one whole granules, a small one carved from a granule. */
static void test_free_async_alloc(void)
{
	enum { BIG = 3 * MiB, SMALL = 4096, LOOPS = 12 };
	uint32_t *out = xmalloc(BIG);
	CUdeviceptr big, small, keep, again, d[LOOPS];
	size_t fr0, fr1, total, size;
	CUstream other;
	CUfunction spin = t_func(mod, "spin");
	long long cycles = T_SPIN_100MS;
	CUdeviceptr base;
	void *args[2];
	CUresult r;

	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemGetInfo(&fr0, &total));
	REQUIRE_CU(cuMemAlloc(&big, BIG));
	REQUIRE_CU(cuMemAlloc(&small, SMALL));
	memset(out, 0, BIG);
	args[0] = &cycles;
	args[1] = &small;
	REQUIRE_CU(t_launch(spin, 1, 1, stream, args));   /* the rest waits behind it */
	REQUIRE_CU(cuMemsetD32Async(big, 0x5eed0001u, BIG / 4, stream));
	REQUIRE_CU(cuMemsetD32Async(small, 0x5eed0002u, SMALL / 4, stream));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, big, BIG, stream));
	REQUIRE_CU(cuMemcpyDtoHAsync(out + BIG / 4 - SMALL / 4, small, SMALL, stream));
	REQUIRE_CU(cuMemFreeAsync(big, stream));
	REQUIRE_CU(cuMemFreeAsync(small, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (size_t i = 0; i < BIG / 4; i++) {
		uint32_t want = i < (BIG - SMALL) / 4 ? 0x5eed0001u : 0x5eed0002u;

		if (out[i] != want) {
			CHECK(0, "word %zu copied before cuMemFreeAsync: 0x%x, want 0x%x", i, out[i], want);
			break;
		}
	}
	r = cuMemGetAddressRange(&base, &size, big);
	CHECK(r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE,
	      "the range of an allocation freed by cuMemFreeAsync -> %s", t_errname(r));
	CHECK_CU(cuMemFree(small), CUDA_ERROR_INVALID_VALUE);

	/* Memory given back by a free the stream has not reached yet is not
	 * given again under the work still queued before that free: the
	 * memset queued behind the slow kernel must land before a new
	 * allocation (the same bytes, where an allocator hands them back at
	 * once) is written on another stream, or it overwrites it. */
	REQUIRE_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemAlloc(&keep, SMALL));   /* keeps a carved allocation's granule */
	REQUIRE_CU(cuMemAlloc(&small, SMALL));
	REQUIRE_CU(t_launch(spin, 1, 1, stream, args));
	REQUIRE_CU(cuMemsetD32Async(small, 0x5eed0003u, SMALL / 4, stream));
	REQUIRE_CU(cuMemFreeAsync(small, stream));
	REQUIRE_CU(cuMemAlloc(&again, SMALL));
	REQUIRE_CU(cuMemsetD32Async(again, 0x5eed0004u, SMALL / 4, other));
	REQUIRE_CU(cuStreamSynchronize(other));
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(out, again, SMALL));
	for (size_t i = 0; i < SMALL / 4; i++) {
		if (out[i] != 0x5eed0004u) {
			CHECK(0, "word %zu of an allocation made after a queued free%s: 0x%x, want 0x5eed0004", i,
			      again == small ? " (the same bytes)" : "", out[i]);
			break;
		}
	}
	REQUIRE_CU(cuMemFree(again));
	REQUIRE_CU(cuMemFree(keep));
	REQUIRE_CU(cuStreamDestroy(other));

	/* A free queued behind a stream held back by a word in host memory,
	 * which a thread of the program writes a little later: the calls
	 * after it (a copy on another stream) are answered, and the free
	 * goes once the word lets the stream go. */
	{
		struct release rel;
		uint32_t *word, got = 0;
		CUdeviceptr mapped;
		pthread_t t;

		REQUIRE_CU(cuMemAllocHost((void **)&word, 4));
		REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, word, 0));
		__atomic_store_n(word, 0, __ATOMIC_RELEASE);
		REQUIRE_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
		REQUIRE_CU(cuMemAlloc(&keep, SMALL));
		REQUIRE_CU(cuMemsetD32(keep, 0x5eed0006u, SMALL / 4));
		REQUIRE_CU(cuMemAlloc(&big, BIG));
		REQUIRE_CU(cuStreamWaitValue32(stream, mapped, 1, CU_STREAM_WAIT_VALUE_GEQ));
		REQUIRE_CU(cuMemsetD32Async(big, 0x5eed0007u, BIG / 4, stream));
		rel.word = word;
		REQUIRE(pthread_create(&t, NULL, release_later, &rel) == 0, "pthread_create");
		REQUIRE_CU(cuMemFreeAsync(big, stream));
		REQUIRE_CU(cuMemcpyDtoHAsync(&got, keep, 4, other));
		REQUIRE_CU(cuStreamSynchronize(other));
		CHECK(got == 0x5eed0006u, "a copy on another stream behind a held free: 0x%x", got);
		REQUIRE_CU(cuStreamSynchronize(stream));
		pthread_join(t, NULL);
		REQUIRE_CU(cuMemFree(keep));
		REQUIRE_CU(cuStreamDestroy(other));
		REQUIRE_CU(cuMemFreeHost(word));
	}

	/* Captured, a free must name graph memory: one of cuMemAlloc's is
	 * refused (by the free or, where its error comes later, by the end
	 * of the capture or the next synchronize) and stays the program's. */
	{
		CUresult fr, er, sr;
		CUgraph g = NULL;

		REQUIRE_CU(cuMemAlloc(&small, SMALL));
		REQUIRE_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
		fr = cuMemFreeAsync(small, stream);
		er = cuStreamEndCapture(stream, &g);
		if (g)
			REQUIRE_CU(cuGraphDestroy(g));
		sr = cuStreamSynchronize(stream);
		CHECK(fr != CUDA_SUCCESS || er != CUDA_SUCCESS || sr != CUDA_SUCCESS,
		      "a captured cuMemFreeAsync of cuMemAlloc memory was not refused");
		REQUIRE_CU(cuMemsetD32(small, 0x5eed0005u, SMALL / 4));
		REQUIRE_CU(cuMemcpyDtoH(out, small, 4));
		CHECK(out[0] == 0x5eed0005u, "memory whose captured free was refused: 0x%x", out[0]);
		REQUIRE_CU(cuMemFree(small));
	}

	/* In a row on one stream, each written before it goes. */
	for (int i = 0; i < LOOPS; i++) {
		REQUIRE_CU(cuMemAlloc(&d[i], (size_t)(i % 3 == 2 ? SMALL : 8 * MiB)));
		REQUIRE_CU(cuMemsetD8Async(d[i], (unsigned char)(0x21 + i), i % 3 == 2 ? SMALL : 8 * MiB, stream));
		REQUIRE_CU(cuMemFreeAsync(d[i], stream));
	}
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemGetInfo(&fr1, &total));
	CHECK(fr1 + 16 * MiB >= fr0, "free memory after allocations freed by cuMemFreeAsync: %zu -> %zu", fr0, fr1);
	free(out);
}

static void test_alloc_async(void)
{
	enum { WORDS = 70001 };
	uint32_t *in = xmalloc(WORDS * 4), *out = xmalloc(WORDS * 4);
	CUdeviceptr d = 0, e[8] = { 0 };
	size_t fr0, fr1, total;

	for (int i = 0; i < WORDS; i++)
		in[i] = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemGetInfo(&fr0, &total));
	REQUIRE_CU(cuMemAllocAsync(&d, 64 << 20, stream));
	CHECK(d != 0, "cuMemAllocAsync gave NULL");
	REQUIRE_CU(cuMemsetD32Async(d, 0x5a5a5a5au, 16 << 20, stream));
	REQUIRE_CU(cuMemcpyHtoDAsync(d + 4096, in, WORDS * 4, stream));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d + 4096, WORDS * 4, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	CMP_BYTES(out, in, WORDS * 4, "a stream-ordered allocation, copied in and out");
	REQUIRE_CU(cuMemcpyDtoH(out, d, 4096));
	for (int i = 0; i < 1024; i++) {
		if (out[i] != 0x5a5a5a5au) {
			CHECK(0, "word %d of a stream-ordered allocation after a memset: 0x%x", i, out[i]);
			break;
		}
	}
	REQUIRE_CU(cuMemGetInfo(&fr1, &total));
	CHECK(fr1 + (64 << 20) <= fr0 + (16 << 20), "64 MiB allocated in stream order: free %zu -> %zu", fr0, fr1);
	REQUIRE_CU(cuMemFreeAsync(d, stream));
	for (int i = 0; i < 8; i++) {
		REQUIRE_CU(cuMemAllocAsync(&e[i], (size_t)(i + 1) << 16, CU_STREAM_LEGACY));
		REQUIRE_CU(cuMemsetD8Async(e[i], (unsigned char)(0x10 + i), (size_t)(i + 1) << 16, CU_STREAM_LEGACY));
	}
	for (int i = 0; i < 8; i++) {
		unsigned char b[2] = { 0, 0 };

		REQUIRE_CU(cuMemcpyDtoH(b, e[i] + ((size_t)(i + 1) << 16) - 2, 2));
		CHECK(b[0] == 0x10 + i && b[1] == 0x10 + i, "allocation %d ends in 0x%x 0x%x", i, b[0], b[1]);
		REQUIRE_CU(cuMemFreeAsync(e[i], CU_STREAM_LEGACY));
	}
	REQUIRE_CU(cuCtxSynchronize());
	free(in);
	free(out);
}

/* Copies of a few bytes from pageable memory at every small length and
 * alignment (the server writes aligned ones as values), and their order on
 * a stream against kernels writing the same words either side. */
static void test_small_copies(void)
{
	static const size_t sizes[] = { 1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32, 36, 40, 64 };
	static const size_t offs[] = { 0, 4, 8, 12, 2, 1 };
	CUfunction iota = t_func(mod, "iota_u32");
	uint32_t words[64], back[64], host[4];
	unsigned int base = 1000;
	int n = 64;
	void *args[] = { NULL, &base, &n };
	CUdeviceptr d;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++)
			for (int async = 0; async < 2; async++)
				copy_case(sizes[i], async, 0, j, offs[j], offs[(j + 1) % 6], 0);

	REQUIRE_CU(cuMemAlloc(&d, sizeof(words)));
	args[0] = &d;
	for (int round = 0; round < 20; round++) {
		t_fill_u32(host, 4, &rng);
		base = (unsigned int)t_rand(&rng);
		/* kernel, then the copy over words 8..11: the copy's bytes win */
		REQUIRE_CU(t_launch(iota, 1, 64, stream, args));
		REQUIRE_CU(cuMemcpyHtoDAsync(d + 8 * 4, host, sizeof(host), stream));
		REQUIRE_CU(cuMemcpyDtoHAsync(back, d, sizeof(back), stream));
		REQUIRE_CU(cuStreamSynchronize(stream));
		for (int k = 0; k < 64; k++)
			words[k] = k >= 8 && k < 12 ? host[k - 8] : base + (unsigned int)k;
		CMP_BYTES(back, words, sizeof(words), "a kernel, then a 16-byte copy over part of its output");
		/* the copy, then the kernel: the kernel's words win */
		REQUIRE_CU(cuMemcpyHtoDAsync(d + 20 * 4, host, sizeof(host), stream));
		REQUIRE_CU(t_launch(iota, 1, 64, stream, args));
		REQUIRE_CU(cuMemcpyDtoHAsync(back, d, sizeof(back), stream));
		REQUIRE_CU(cuStreamSynchronize(stream));
		for (int k = 0; k < 64; k++)
			words[k] = base + (unsigned int)k;
		CMP_BYTES(back, words, sizeof(words), "a 16-byte copy, then a kernel over it");
		/* synchronous copies back to back, then read by a copy on the stream */
		for (int k = 0; k < 16; k++)
			REQUIRE_CU(cuMemcpyHtoD(d + (CUdeviceptr)k * 4, &host[k % 4], 4));
		REQUIRE_CU(cuMemcpyDtoHAsync(back, d, 16 * 4, stream));
		REQUIRE_CU(cuStreamSynchronize(stream));
		for (int k = 0; k < 16; k++)
			words[k] = host[k % 4];
		CMP_BYTES(back, words, 16 * 4, "sixteen 4-byte synchronous copies back to back");
	}
	REQUIRE_CU(cuMemFree(d));
}

/* The synchronous forms that need not wait for the device (a memset of
 * device memory, a device-to-device copy, an upload from pageable memory
 * once it is staged) may return before their work is done, as the
 * driver's do: what later work on the default stream and on a blocking
 * stream reads must still be theirs, in order, mixed with kernels; a bad
 * pointer is refused by the call itself, never later; a memset of pinned
 * memory is done when it returns. */
static void test_sync_forms(void)
{
	enum { WORDS = 256 };
	CUfunction iota = t_func(mod, "iota_u32");
	uint32_t want[WORDS], back[WORDS], v, *pinned = NULL;
	unsigned int base;
	int n = 64;
	void *args[] = { NULL, &base, &n };
	CUdeviceptr d, gone, dp = 0;
	CUresult r;

	REQUIRE_CU(cuMemAlloc(&d, WORDS * 4));
	REQUIRE_CU(cuMemsetD32(d, 0, WORDS));
	memset(want, 0, sizeof(want));
	args[0] = &d;
	for (int round = 0; round < 200; round++) {
		uint32_t at = (uint32_t)t_rand(&rng) % (WORDS - 64), to = (uint32_t)t_rand(&rng) % (WORDS - 64);
		uint32_t len = 1 + (uint32_t)t_rand(&rng) % 64, host[64];

		v = (uint32_t)t_rand(&rng);
		switch (t_rand(&rng) % 5) {
		case 0:
			REQUIRE_CU(cuMemsetD32(d + at * 4, v, len));
			for (uint32_t k = 0; k < len; k++)
				want[at + k] = v;
			break;
		case 1:
			REQUIRE_CU(cuMemcpyDtoD(d + to * 4, d + at * 4, len * 4));
			memmove(want + to, want + at, len * 4);
			break;
		case 2:
			t_fill_u32(host, len, &rng);
			REQUIRE_CU(cuMemcpyHtoD(d + at * 4, host, len * 4));
			memcpy(want + at, host, len * 4);
			memset(host, 0xa5, sizeof(host));   /* staged: nothing may read it now */
			break;
		case 3:
			/* a kernel over the first 64 words, on the default stream */
			base = v;
			REQUIRE_CU(t_launch(iota, 1, 64, 0, args));
			for (int k = 0; k < 64; k++)
				want[k] = base + (uint32_t)k;
			break;
		default:
			/* read on a blocking stream, which waits for the default one */
			REQUIRE_CU(cuMemcpyDtoHAsync(back, d, sizeof(back), stream));
			REQUIRE_CU(cuStreamSynchronize(stream));
			CMP_U32(back, want, WORDS, "synchronous memsets, copies and kernels, read on a blocking stream");
			break;
		}
	}
	REQUIRE_CU(cuMemcpyDtoH(back, d, sizeof(back)));
	CMP_U32(back, want, WORDS, "synchronous memsets, copies and kernels, read back");

	/* Refused at once, and nothing left for a later call. */
	REQUIRE_CU(cuMemAlloc(&gone, 64));
	REQUIRE_CU(cuMemFree(gone));
	r = cuMemsetD32(gone, 1, 4);
	CHECK(r != CUDA_SUCCESS, "cuMemsetD32 of freed memory: %d", (int)r);
	r = cuMemcpyDtoD(d, gone, 16);
	CHECK(r != CUDA_SUCCESS, "cuMemcpyDtoD from freed memory: %d", (int)r);
	r = cuMemcpyDtoD(gone, d, 16);
	CHECK(r != CUDA_SUCCESS, "cuMemcpyDtoD to freed memory: %d", (int)r);
	v = 7;
	r = cuMemcpyHtoD(gone, &v, 4);
	CHECK(r != CUDA_SUCCESS, "cuMemcpyHtoD to freed memory: %d", (int)r);
	r = cuMemsetD32(d + WORDS * 4 - 8, 1, 4);
	CHECK(r != CUDA_SUCCESS, "cuMemsetD32 past the end of an allocation: %d", (int)r);
	CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
	REQUIRE_CU(cuMemcpyDtoH(back, d, sizeof(back)));
	CMP_U32(back, want, WORDS, "refused memsets and copies changed nothing");

	/* Pinned memory set through its device address: done on return. */
	REQUIRE_CU(cuMemHostAlloc((void **)&pinned, 64 * 4, CU_MEMHOSTALLOC_DEVICEMAP));
	REQUIRE_CU(cuMemHostGetDevicePointer(&dp, pinned, 0));
	for (int round = 0; round < 20; round++) {
		uint32_t w[64];

		v = (uint32_t)t_rand(&rng);
		REQUIRE_CU(cuMemsetD32(dp, v, 64));
		for (int k = 0; k < 64; k++)
			w[k] = v;
		CMP_U32(pinned, w, 64, "cuMemsetD32 of pinned memory, read at once");
	}
	REQUIRE_CU(cuMemFreeHost(pinned));
	REQUIRE_CU(cuMemFree(d));
}

/* Many asynchronous copies of message-sized pageable buffers queued behind
 * a slow kernel, the one host buffer rewritten after each: every copy must
 * carry the bytes the buffer held when it was made, whether the server
 * sends it through its bounce ring or (once the ring is full, the GPU
 * being behind) another way, and sizes that do not divide the ring must
 * wrap it correctly. */
static void test_queued_copies(void)
{
	enum { COPIES = 64, MAXLEN = 40 * 1024 };
	CUfunction spin = t_func(mod, "spin");
	long long cycles = T_SPIN_100MS;
	size_t off[COPIES], len[COPIES], total = 0;
	uint8_t *host = xmalloc(MAXLEN), *want, *back;
	CUdeviceptr d, out;
	void *args[2];

	for (int i = 0; i < COPIES; i++) {
		len[i] = i % 3 == 0 ? MAXLEN : 1000 + (size_t)t_rand(&rng) % (MAXLEN - 1000);
		off[i] = total;
		total += len[i];
	}
	want = xmalloc(total);
	back = xmalloc(total);
	REQUIRE_CU(cuMemAlloc(&d, total));
	REQUIRE_CU(cuMemAlloc(&out, sizeof(int)));
	args[0] = &cycles;
	args[1] = &out;
	REQUIRE_CU(t_launch(spin, 1, 1, stream, args));
	for (int i = 0; i < COPIES; i++) {
		t_fill_bytes(host, len[i], &rng);
		memcpy(want + off[i], host, len[i]);
		REQUIRE_CU(cuMemcpyHtoDAsync(d + off[i], host, len[i], stream));
	}
	memset(host, 0x5a, MAXLEN);   /* nothing may read it now */
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(back, d, total));
	CMP_BYTES(back, want, total, "64 queued asynchronous copies from one rewritten buffer");
	REQUIRE_CU(cuMemFree(out));
	REQUIRE_CU(cuMemFree(d));
	free(back);
	free(want);
	free(host);
}

int main(int argc, char **argv)
{
	CUdevice dev;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	ctx = t_primary(dev);
	mod = t_module();
	REQUIRE_CU(cuStreamCreate(&stream, CU_STREAM_DEFAULT));

	test_alloc();
	test_meminfo(dev);
	test_pointer_attributes();
	test_host_memory();
	test_copies();
	test_small_copies();
	test_sync_forms();
	test_queued_copies();
	test_unified_copy();
	test_memset();
	test_memset_2d();
	test_copy_2d();
	test_copy_3d();
	test_alloc_async();
	test_free_async_alloc();

	REQUIRE_CU(cuStreamDestroy(stream));
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
