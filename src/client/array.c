// SPDX-License-Identifier: MIT
/*
 * Copies to, from and between CUDA arrays. An array is the server's (made
 * through the generated layer: cuArrayCreate, cuArray3DCreate, mipmapped
 * arrays); a copy between arrays and device memory is one server operation
 * (MPS_OP_ARRAY_COPY) on the stream; host memory goes through a device
 * buffer of the box's size, made and freed in stream order around the
 * copy, so a host side costs one more device copy than natively. The 1D
 * forms (cuMemcpyHtoA, AtoH, DtoA, AtoD, AtoA) are boxes of one row.
 */
#include <stdbool.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"
#include "common/copy3d.h"

/* The per-thread-stream forms cuda.h declares only under the plain names. */
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream s);
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);

/* One array copy on the server; neither side host memory. */
static CUresult send_copy(const CUDA_MEMCPY3D *p, CUstream s, bool per_thread, bool async)
{
	struct mps_msg_array_copy q;
	struct mps_call call;
	uint64_t h;
	uint32_t ctx;
	CUresult r;

	memset(&q, 0, sizeof(q));
	mps_copy3d_geometry_in(&q.p, p);
	if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY) {
		if ((r = mps__fwd_h_array(p->srcArray, &h)) != CUDA_SUCCESS)
			return r;
		q.src_array = (uint32_t)h;
	} else {
		q.p.src.addr = p->srcDevice;
	}
	if (p->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
		if ((r = mps__fwd_h_array(p->dstArray, &h)) != CUDA_SUCCESS)
			return r;
		q.dst_array = (uint32_t)h;
	} else {
		q.p.dst.addr = p->dstDevice;
	}
	r = mps__stream_resolve(s, per_thread, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (async)
		return mps__post(MPS_OP_ARRAY_COPY, ctx, &q.hdr, sizeof(q), NULL, 0);
	r = mps__call(MPS_OP_ARRAY_COPY, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	return r;
}

static CUresult linear3d(const CUDA_MEMCPY3D *p, CUstream s, bool per_thread, bool async)
{
	if (async)
		return per_thread ? cuMemcpy3DAsync_v2_ptsz(p, s) : cuMemcpy3DAsync(p, s);
	return per_thread ? cuMemcpy3D_v2_ptds(p) : cuMemcpy3D(p);
}

/* Side `side` (src or dst) of copy c becomes the packed device buffer buf
 * of c's box: rows of WidthInBytes, Height rows to a slice. */
#define PACKED(c, side, buf)                                            \
	do {                                                            \
		(c).side##MemoryType = CU_MEMORYTYPE_DEVICE;            \
		(c).side##Host = NULL;                                  \
		(c).side##Device = (buf);                               \
		(c).side##Array = NULL;                                 \
		(c).side##XInBytes = (c).side##Y = (c).side##Z = 0;     \
		(c).side##Pitch = (c).WidthInBytes;                     \
		(c).side##Height = (c).Height;                          \
	} while (0)

CUresult mps__array_copy3d(const CUDA_MEMCPY3D *p, CUstream s, bool per_thread, bool async)
{
	bool from_host = p->srcMemoryType == CU_MEMORYTYPE_HOST, to_host = p->dstMemoryType == CU_MEMORYTYPE_HOST;
	size_t box;
	CUDA_MEMCPY3D a, b;
	CUdeviceptr tmp = 0;
	CUresult r, f;

	if ((p->srcMemoryType != CU_MEMORYTYPE_ARRAY && p->dstMemoryType != CU_MEMORYTYPE_ARRAY) ||
	    (from_host && to_host))
		return CUDA_ERROR_INVALID_VALUE;
	if (!p->WidthInBytes || !p->Height || !p->Depth)
		return CUDA_SUCCESS;
	if (!from_host && !to_host)
		return send_copy(p, s, per_thread, async);
	/* Through a packed device buffer of the box: host <-> buffer is a
	 * linear 3D copy, buffer <-> array the server's. */
	if (p->Height > SIZE_MAX / p->WidthInBytes || p->Depth > SIZE_MAX / (p->WidthInBytes * p->Height))
		return CUDA_ERROR_INVALID_VALUE;
	box = p->WidthInBytes * p->Height * p->Depth;
	r = per_thread ? cuMemAllocAsync_ptsz(&tmp, box, s) : cuMemAllocAsync(&tmp, box, s);
	if (r != CUDA_SUCCESS)
		return r;
	a = *p;   /* the host side, against the buffer */
	b = *p;   /* the array side, against the buffer */
	if (from_host) {
		PACKED(a, dst, tmp);
		PACKED(b, src, tmp);
		r = linear3d(&a, s, per_thread, true);
		if (r == CUDA_SUCCESS)
			r = send_copy(&b, s, per_thread, async);
	} else {
		PACKED(b, dst, tmp);
		PACKED(a, src, tmp);
		r = send_copy(&b, s, per_thread, true);
		if (r == CUDA_SUCCESS)
			r = linear3d(&a, s, per_thread, async);
	}
	f = per_thread ? cuMemFreeAsync_ptsz(tmp, s) : cuMemFreeAsync(tmp, s);
	if (r == CUDA_SUCCESS && !async)
		r = cuStreamSynchronize(per_thread && !s ? CU_STREAM_PER_THREAD : s);
	return r != CUDA_SUCCESS ? r : f;
}

/* A 1D copy as a box of one row. */
static CUresult copy1d(CUmemorytype dt, void *dh, CUdeviceptr dd, CUarray da, size_t doff, CUmemorytype st,
		       const void *sh, CUdeviceptr sd, CUarray sa, size_t soff, size_t bytes, CUstream s,
		       bool per_thread, bool async)
{
	CUDA_MEMCPY3D p;

	memset(&p, 0, sizeof(p));
	p.dstMemoryType = dt;
	p.dstHost = dh;
	p.dstDevice = dd;
	p.dstArray = da;
	p.dstXInBytes = doff;
	p.dstPitch = doff + bytes;
	p.dstHeight = 1;
	p.srcMemoryType = st;
	p.srcHost = sh;
	p.srcDevice = sd;
	p.srcArray = sa;
	p.srcXInBytes = soff;
	p.srcPitch = soff + bytes;
	p.srcHeight = 1;
	p.WidthInBytes = bytes;
	p.Height = 1;
	p.Depth = 1;
	if (dt == CU_MEMORYTYPE_ARRAY && !da)
		return CUDA_ERROR_INVALID_VALUE;
	if (st == CU_MEMORYTYPE_ARRAY && !sa)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__array_copy3d(&p, s, per_thread, async);
}

#define A CU_MEMORYTYPE_ARRAY
#define H CU_MEMORYTYPE_HOST
#define D CU_MEMORYTYPE_DEVICE

static CUresult htoa(CUarray d, size_t off, const void *src, size_t n)
{ return copy1d(A, NULL, 0, d, off, H, src, 0, NULL, 0, n, NULL, false, false); }
static CUresult htoa_ptds(CUarray d, size_t off, const void *src, size_t n)
{ return copy1d(A, NULL, 0, d, off, H, src, 0, NULL, 0, n, NULL, true, false); }
static CUresult htoa_async(CUarray d, size_t off, const void *src, size_t n, CUstream s)
{ return copy1d(A, NULL, 0, d, off, H, src, 0, NULL, 0, n, s, false, true); }
static CUresult htoa_async_ptsz(CUarray d, size_t off, const void *src, size_t n, CUstream s)
{ return copy1d(A, NULL, 0, d, off, H, src, 0, NULL, 0, n, s, true, true); }
static CUresult atoh(void *dst, CUarray a, size_t off, size_t n)
{ return copy1d(H, dst, 0, NULL, 0, A, NULL, 0, a, off, n, NULL, false, false); }
static CUresult atoh_ptds(void *dst, CUarray a, size_t off, size_t n)
{ return copy1d(H, dst, 0, NULL, 0, A, NULL, 0, a, off, n, NULL, true, false); }
static CUresult atoh_async(void *dst, CUarray a, size_t off, size_t n, CUstream s)
{ return copy1d(H, dst, 0, NULL, 0, A, NULL, 0, a, off, n, s, false, true); }
static CUresult atoh_async_ptsz(void *dst, CUarray a, size_t off, size_t n, CUstream s)
{ return copy1d(H, dst, 0, NULL, 0, A, NULL, 0, a, off, n, s, true, true); }
static CUresult dtoa(CUarray d, size_t off, CUdeviceptr src, size_t n)
{ return copy1d(A, NULL, 0, d, off, D, NULL, src, NULL, 0, n, NULL, false, false); }
static CUresult dtoa_ptds(CUarray d, size_t off, CUdeviceptr src, size_t n)
{ return copy1d(A, NULL, 0, d, off, D, NULL, src, NULL, 0, n, NULL, true, false); }
static CUresult atod(CUdeviceptr dst, CUarray a, size_t off, size_t n)
{ return copy1d(D, NULL, dst, NULL, 0, A, NULL, 0, a, off, n, NULL, false, false); }
static CUresult atod_ptds(CUdeviceptr dst, CUarray a, size_t off, size_t n)
{ return copy1d(D, NULL, dst, NULL, 0, A, NULL, 0, a, off, n, NULL, true, false); }
static CUresult atoa(CUarray d, size_t doff, CUarray a, size_t soff, size_t n)
{ return copy1d(A, NULL, 0, d, doff, A, NULL, 0, a, soff, n, NULL, false, false); }
static CUresult atoa_ptds(CUarray d, size_t doff, CUarray a, size_t soff, size_t n)
{ return copy1d(A, NULL, 0, d, doff, A, NULL, 0, a, soff, n, NULL, true, false); }

#undef A
#undef H
#undef D

const struct mps_impl mps__array_api[] = {
	MPS_IMPL(cuMemcpyHtoA_v2, htoa),
	MPS_IMPL_AS(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA_v2, htoa_ptds),
	MPS_IMPL(cuMemcpyHtoAAsync_v2, htoa_async),
	MPS_IMPL_AS(cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync_v2, htoa_async_ptsz),
	MPS_IMPL(cuMemcpyAtoH_v2, atoh),
	MPS_IMPL_AS(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH_v2, atoh_ptds),
	MPS_IMPL(cuMemcpyAtoHAsync_v2, atoh_async),
	MPS_IMPL_AS(cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync_v2, atoh_async_ptsz),
	MPS_IMPL(cuMemcpyDtoA_v2, dtoa),
	MPS_IMPL_AS(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA_v2, dtoa_ptds),
	MPS_IMPL(cuMemcpyAtoD_v2, atod),
	MPS_IMPL_AS(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD_v2, atod_ptds),
	MPS_IMPL(cuMemcpyAtoA_v2, atoa),
	MPS_IMPL_AS(cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA_v2, atoa_ptds),
	MPS_IMPL_END
};
