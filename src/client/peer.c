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

const struct mps_impl mps__peer_api[] = {
	MPS_IMPL(cuCtxEnablePeerAccess, ctx_enable_peer_access),
	MPS_IMPL(cuCtxDisablePeerAccess, ctx_disable_peer_access),
	MPS_IMPL(cuMemcpyPeer, memcpy_peer),
	MPS_IMPL_AS(cuMemcpyPeer_ptds, cuMemcpyPeer, memcpy_peer_ptds),
	MPS_IMPL(cuMemcpyPeerAsync, memcpy_peer_async),
	MPS_IMPL_AS(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, memcpy_peer_async_ptsz),
	MPS_IMPL_END
};
