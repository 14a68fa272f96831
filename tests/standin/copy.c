// SPDX-License-Identifier: MIT
/*
 * Asynchronous copies and memsets, with the real driver's rules for host
 * memory:
 *  - from pageable (unregistered) host memory, the source is copied into a
 *    private staging buffer before the call returns, so the caller may reuse
 *    it at once;
 *  - into pageable host memory, the call returns only once the copy has been
 *    done in stream order;
 *  - from or to registered host memory (and device memory), the copy is
 *    truly asynchronous and touches the memory when the stream gets to it.
 * cuMemcpyAsync works the direction out from the addresses (unified
 * addressing). A span that starts inside an allocation or registration but
 * runs past its end, or a device-side span that lies in none, is refused with
 * CUDA_ERROR_INVALID_VALUE at enqueue.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

enum { NEED_DST = 1, NEED_SRC = 2 };    /* sides that must be device-visible memory */

static CUresult copy_async(CUstream h, void *dst, const void *src, size_t bytes, unsigned need)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_range *r;
	struct si_op *op;
	void *staging = NULL;
	int dk, sk;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__stream_enter(h, &ctx, &s);
	if (rc != CUDA_SUCCESS || !bytes)
		goto out_unlock;
	sk = mps__range_classify((uintptr_t)src, bytes, &r);
	if (sk < 0 || (sk == 0 && (need & NEED_SRC))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out_unlock;
	}
	if (sk == 0) {
		/* Stage the pageable source without holding the lock: it is
		 * the caller's memory, and may be large. */
		mps__unlock();
		staging = malloc(bytes);
		if (!staging)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(staging, src, bytes);
		mps__lock();
		rc = mps__stream_enter(h, &ctx, &s);    /* it may have gone meanwhile */
		if (rc != CUDA_SUCCESS)
			goto out_free;
	}
	dk = mps__range_classify((uintptr_t)dst, bytes, &r);
	if (dk < 0 || (dk == 0 && (need & NEED_DST))) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out_free;
	}
	op = mps__op_new(SI_OP_COPY);
	if (!op) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_free;
	}
	op->copy.dst = dst;
	op->copy.src = src;
	op->copy.bytes = bytes;
	op->copy.pin_dst = dk == 1;
	op->copy.pin_src = sk == 1;
	op->copy.staging = staging;
	if (dk == 0)
		rc = mps__submit_wait(s, op);
	else
		mps__submit(s, op);
	mps__unlock();
	return rc;

out_free:
	free(staging);
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
				     CUstream hStream)
{
	return copy_async(hStream, (void *)(uintptr_t)dstDevice, srcHost, ByteCount, NEED_DST);
}

CU_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				     CUstream hStream)
{
	return copy_async(hStream, dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, NEED_SRC);
}

CU_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
				     CUstream hStream)
{
	return copy_async(hStream, (void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice,
			  ByteCount, NEED_DST | NEED_SRC);
}

CU_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return copy_async(hStream, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, ByteCount, 0);
}

static CUresult memset_async(CUdeviceptr dst, uint32_t value, unsigned width, size_t count,
			     CUstream h)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_range *r;
	struct si_op *op;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__stream_enter(h, &ctx, &s);
	if (rc != CUDA_SUCCESS || !count)
		goto out_unlock;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (dst % width || count > (size_t)-1 / width ||
	    mps__range_classify((uintptr_t)dst, count * width, &r) != 1)
		goto out_unlock;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	op = mps__op_new(SI_OP_MEMSET);
	if (!op)
		goto out_unlock;
	op->memset.dst = (void *)(uintptr_t)dst;
	op->memset.count = count;
	op->memset.width = width;
	op->memset.value = value;
	mps__submit(s, op);
	rc = CUDA_SUCCESS;
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return memset_async(dstDevice, uc, 1, N, hStream);
}

CU_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	return memset_async(dstDevice, us, 2, N, hStream);
}

CU_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	return memset_async(dstDevice, ui, 4, N, hStream);
}

/* Rows one after another; each row must lie in one allocation, and the
 * rows between them are left alone. */
static CUresult memset2d_async(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned width, size_t w, size_t h,
			       CUstream hs)
{
	CUresult rc = CUDA_SUCCESS;

	if (!w || !h)
		return memset_async(dst, value, width, 0, hs);
	if (h > 1 && (pitch < w * width || pitch % width))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < h && rc == CUDA_SUCCESS; i++)
		rc = memset_async(dst + i * pitch, value, width, w, hs);
	return rc;
}

CU_API CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
				  size_t Height, CUstream hStream)
{
	return memset2d_async(dstDevice, dstPitch, uc, 1, Width, Height, hStream);
}

CU_API CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
				   size_t Height, CUstream hStream)
{
	return memset2d_async(dstDevice, dstPitch, us, 2, Width, Height, hStream);
}

CU_API CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
				   size_t Height, CUstream hStream)
{
	return memset2d_async(dstDevice, dstPitch, ui, 4, Width, Height, hStream);
}

/* cuMemcpy3D between device memory, arrays and host memory: one copy
 * operation of rows and slices on the stream (graphnodes.c builds it). A
 * pageable host side is read or written when the copy runs: the
 * synchronous form waits for it. */
static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream h, bool wait)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_op *op;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (p && (!p->WidthInBytes || !p->Height || !p->Depth))
		return CUDA_SUCCESS;
	mps__lock();
	rc = mps__stream_enter(h, &ctx, &s);
	if (rc == CUDA_SUCCESS)
		rc = mps__copy3d_op(p, &op);
	/* Captured, the node reads back the parameters, as the driver's does. */
	if (rc == CUDA_SUCCESS && s->cap && (op->copy.params = malloc(sizeof(*p))))
		*op->copy.params = *p;
	if (rc == CUDA_SUCCESS) {
		if (wait)
			rc = mps__submit_wait(s, op);
		else
			mps__submit(s, op);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	return copy3d(pCopy, hStream, false);
}

CU_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
	return copy3d(pCopy, NULL, true);
}
