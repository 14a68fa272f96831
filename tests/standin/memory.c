// SPDX-License-Identifier: MIT
/*
 * Device memory and host registration: cuMemAlloc/AllocPitch/Free/GetInfo/
 * GetAddressRange, and cuMemHostRegister/
 * Unregister/GetDevicePointer.
 *
 * Device memory is host memory taken from the range table (ranges.c) and
 * counted against the device, so cuMemGetInfo falls by what is allocated and
 * over-allocation fails with CUDA_ERROR_OUT_OF_MEMORY. Registered host memory
 * keeps its address as its device address, as with unified addressing on a
 * real GPU. Freeing and unregistering first wait for the work already
 * submitted to the owning context (cuda.h: cuMemFree "may perform implicit
 * synchronization"), so work queued earlier still sees the memory.
 * OPENMPS_STANDIN_SLOW_REGISTER slows one size of registration down, for
 * tests of what happens meanwhile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "standin.h"

CU_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct si_context *ctx;
	struct si_range *r;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__range_alloc(ctx, bytesize, SI_RANGE_DEVICE, &r);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)r->base;
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				   size_t Height, unsigned int ElementSizeBytes)
{
	size_t pitch;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr || !pPitch || !WidthInBytes || !Height)
		return CUDA_ERROR_INVALID_VALUE;
	if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
		return CUDA_ERROR_INVALID_VALUE;
	if (WidthInBytes > ((size_t)-1 >> 1))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = (WidthInBytes + 511) & ~(size_t)511;
	if (Height > (size_t)-1 / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = cuMemAlloc_v2(dptr, pitch * Height);
	if (rc == CUDA_SUCCESS)
		*pPitch = pitch;
	return rc;
}

/*
 * Finds the range whose base is addr and is of kind, waits for the owning
 * context's work to drain, and takes it out of the table. The wait drops the
 * lock, so the range is looked up again afterwards by address and buffer id:
 * another thread may have freed it, and malloc may even have reused the
 * address. Returns 0, or -1 when there is no such range (any more).
 */
static int remove_synchronized(uintptr_t addr, enum si_range_kind kind)
{
	struct si_range *r = mps__range_find(addr);
	uint64_t id;

	if (!r || r->base != addr || r->kind != kind)
		return -1;
	id = r->buffer_id;
	if (r->ctx->state == SI_CTX_ACTIVE && r->ctx->sticky == CUDA_SUCCESS) {
		mps__ctx_quiesce(r->ctx);
		r = mps__range_find(addr);
		if (!r || r->buffer_id != id)
			return -1;
	}
	if (r->graph) {
		/* Its address stays the graph's; the next launch of an
		 * executable graph made from it brings it back. */
		if (r->freed)
			return -1;
		r->freed = true;
	} else if (kind == SI_RANGE_HOST) {
		/* The caller may free the memory as soon as we return: wait
		 * for operations that pinned it before it left the table.
		 * Our own pin keeps the struct alive meanwhile. */
		r->pins++;
		mps__range_remove(r);
		while (r->pins > 1)
			mps__wait();
		mps__range_unpin(r);
	} else {
		mps__range_remove(r);
	}
	return 0;
}

CU_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__ctx_current(&ctx);
	if (rc == CUDA_SUCCESS) {
		if (remove_synchronized((uintptr_t)dptr, SI_RANGE_DEVICE) < 0)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			rc = ctx->sticky;       /* freed, but the context is still dead */
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS) {
		struct si_device *d = &mps__devices[ctx->device];

		*total = d->total_mem;
		*free = d->total_mem - d->used_mem;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct si_context *ctx;
	struct si_range *r;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS) {
		r = mps__range_find((uintptr_t)dptr);
		if (!r || r->kind == SI_RANGE_HOST) {
			rc = CUDA_ERROR_NOT_FOUND;
		} else {
			/* Both outputs are optional. */
			if (pbase)
				*pbase = (CUdeviceptr)r->base;
			if (psize)
				*psize = r->size;
		}
	}
	mps__unlock();
	return rc;
}

/* OPENMPS_STANDIN_SLOW_REGISTER=BYTES:MS makes registering exactly BYTES
 * take MS milliseconds more (outside the lock): a test's way to have
 * something happen while one registration is under way. */
static void slow_register(size_t bytesize)
{
	const char *v = getenv("OPENMPS_STANDIN_SLOW_REGISTER");
	unsigned long long bytes, ms;

	if (v && sscanf(v, "%llu:%llu", &bytes, &ms) == 2 && bytes == bytesize && ms <= 60000)
		usleep((useconds_t)(ms * 1000));
}

CU_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	struct si_context *ctx;
	struct si_range *r;
	CUresult rc;
	const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
			       CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p || !bytesize || (Flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	slow_register(bytesize);
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__range_register(ctx, p, bytesize, Flags, &r);
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemHostUnregister(void *p)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_current(&ctx);
	if (rc == CUDA_SUCCESS) {
		/* Unregistered even in a dead context: the caller is about to
		 * free the memory, and nothing may touch it afterwards. */
		if (remove_synchronized((uintptr_t)p, SI_RANGE_HOST) < 0)
			rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
		else
			rc = ctx->sticky;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	struct si_context *ctx;
	struct si_range *r;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pdptr || !p || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS) {
		r = mps__range_find((uintptr_t)p);
		if (!r || r->kind != SI_RANGE_HOST)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			*pdptr = (CUdeviceptr)(uintptr_t)p;     /* unified addressing */
	}
	mps__unlock();
	return rc;
}
