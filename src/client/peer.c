// SPDX-License-Identifier: MIT
/*
 * Peer access between devices. Every client's memory lives in the server's
 * contexts, one per device, and the server enabled peer access between them
 * wherever the driver allows it when it started (server/device.c): a
 * kernel on one device may read another's memory, and a copy between them
 * goes over NVLink or PCIe directly. What a program enables or disables is
 * kept here, per context, only so each call answers as the driver would
 * (already enabled, not enabled, unsupported). Peer copies are device to
 * device copies in the unified address space, which the server's driver
 * routes between the devices.
 */
#include "client/api.h"
#include "client/client.h"
#include "common/atomics.h"

/* The per-thread-stream forms, which cuda.h declares only under the plain
 * names (this library exports them all). */
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream s);
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p);

/* The current context and the peer context's device bit, or an error. */
static CUresult peer_of(CUcontext peer, struct mps_ctx **cur, uint32_t *bit)
{
	struct mps_ctx *p = mps__obj(peer, MPS_MAGIC_CTX);

	*cur = mps__ctx_cur();
	if (!*cur || !p)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p->device == (*cur)->device)
		return CUDA_ERROR_INVALID_DEVICE;
	*bit = 1u << p->device;
	return mps__peer_capable((*cur)->device, p->device) ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

static CUresult ctx_enable_peer_access(CUcontext peer, unsigned int flags)
{
	struct mps_ctx *cur;
	uint32_t bit = 0;
	CUresult r;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	r = peer_of(peer, &cur, &bit);
	if (r != CUDA_SUCCESS)
		return r;
	return mps_fetch_or(&cur->peers, bit) & bit ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
}

static CUresult ctx_disable_peer_access(CUcontext peer)
{
	struct mps_ctx *cur;
	uint32_t bit = 0;
	CUresult r = peer_of(peer, &cur, &bit);

	if (r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
		return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	if (r != CUDA_SUCCESS)
		return r;
	return mps_fetch_and(&cur->peers, ~bit) & bit ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

static CUresult check_contexts(CUcontext dst, CUcontext src)
{
	if (!mps__obj(dst, MPS_MAGIC_CTX) || !mps__obj(src, MPS_MAGIC_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_SUCCESS;
}

static CUresult memcpy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n)
{
	CUresult r = check_contexts(dst_ctx, src_ctx);

	return r != CUDA_SUCCESS ? r : cuMemcpyDtoD(dst, src, n);
}

static CUresult memcpy_peer_async(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
				  CUstream s)
{
	CUresult r = check_contexts(dst_ctx, src_ctx);

	return r != CUDA_SUCCESS ? r : cuMemcpyDtoDAsync(dst, src, n, s);
}

static CUresult memcpy_peer_async_ptsz(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
				       size_t n, CUstream s)
{
	CUresult r = check_contexts(dst_ctx, src_ctx);

	return r != CUDA_SUCCESS ? r : cuMemcpyDtoDAsync_v2_ptsz(dst, src, n, s);
}

static CUresult memcpy_peer_ptds(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n)
{
	CUresult r = check_contexts(dst_ctx, src_ctx);

	return r != CUDA_SUCCESS ? r : cuMemcpyDtoD_v2_ptds(dst, src, n);
}

/* A 3D peer copy as a 3D copy (the unified address space names both
 * sides), once both contexts are known; the peer form has no reserved
 * fields, so none is carried over. */
static CUresult peer3d(const CUDA_MEMCPY3D_PEER *p, CUDA_MEMCPY3D *c)
{
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_contexts(p->dstContext, p->srcContext);
	if (r != CUDA_SUCCESS)
		return r;
	*c = (CUDA_MEMCPY3D){
		.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
		.srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
		.srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
		.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
		.dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
		.dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
		.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
	};
	return CUDA_SUCCESS;
}

static CUresult memcpy_3d_peer(const CUDA_MEMCPY3D_PEER *p)
{
	CUDA_MEMCPY3D c;
	CUresult r = peer3d(p, &c);

	return r != CUDA_SUCCESS ? r : cuMemcpy3D(&c);
}

static CUresult memcpy_3d_peer_ptds(const CUDA_MEMCPY3D_PEER *p)
{
	CUDA_MEMCPY3D c;
	CUresult r = peer3d(p, &c);

	return r != CUDA_SUCCESS ? r : cuMemcpy3D_v2_ptds(&c);
}

static CUresult memcpy_3d_peer_async(const CUDA_MEMCPY3D_PEER *p, CUstream s)
{
	CUDA_MEMCPY3D c;
	CUresult r = peer3d(p, &c);

	return r != CUDA_SUCCESS ? r : cuMemcpy3DAsync(&c, s);
}

static CUresult memcpy_3d_peer_async_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream s)
{
	CUDA_MEMCPY3D c;
	CUresult r = peer3d(p, &c);

	return r != CUDA_SUCCESS ? r : cuMemcpy3DAsync_v2_ptsz(&c, s);
}

const struct mps_impl mps__peer_api[] = {
	MPS_IMPL(cuCtxEnablePeerAccess, ctx_enable_peer_access),
	MPS_IMPL(cuCtxDisablePeerAccess, ctx_disable_peer_access),
	MPS_IMPL(cuMemcpy3DPeer, memcpy_3d_peer),
	MPS_IMPL_AS(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, memcpy_3d_peer_ptds),
	MPS_IMPL(cuMemcpy3DPeerAsync, memcpy_3d_peer_async),
	MPS_IMPL_AS(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, memcpy_3d_peer_async_ptsz),
	MPS_IMPL(cuMemcpyPeer, memcpy_peer),
	MPS_IMPL_AS(cuMemcpyPeer_ptds, cuMemcpyPeer, memcpy_peer_ptds),
	MPS_IMPL(cuMemcpyPeerAsync, memcpy_peer_async),
	MPS_IMPL_AS(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, memcpy_peer_async_ptsz),
	MPS_IMPL_END
};
