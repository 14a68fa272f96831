// SPDX-License-Identifier: MIT
/*
 * Peer access: every pair of distinct stand-in devices may reach each
 * other's memory (it is all host memory), so cuDeviceCanAccessPeer says yes,
 * cuDeviceGetP2PAttribute answers as for two GPUs on one NVLink switch, and
 * cuCtxEnablePeerAccess / Disable keep, per pair of devices, whether access
 * is enabled, with the driver's errors for enabling twice, disabling what is
 * not enabled, and a context of the same device. Copies between devices
 * need nothing more: device addresses are unified.
 */
#include "standin.h"

static uint32_t enabled[SI_MAX_DEVICES];   /* bit j of [i]: device i's contexts reach device j's; under the lock */

CU_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(dev) || !mps__device(peerDev))
		return CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
					CUdevice dstDevice)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(srcDevice) || !mps__device(dstDevice) || srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
		*value = 0;
		return CUDA_SUCCESS;
	case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
		*value = 1;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* The current context's device and the peer context's, under the lock. */
static CUresult pair(CUcontext peer, int *from, int *to)
{
	struct si_context *cur, *p;
	CUresult rc = mps__ctx_current(&cur);

	if (rc != CUDA_SUCCESS)
		return rc;
	p = mps__handle_get((uintptr_t)peer, SI_H_CONTEXT);
	if (!p)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p->device == cur->device)
		return CUDA_ERROR_INVALID_DEVICE;
	*from = cur->device;
	*to = p->device;
	return CUDA_SUCCESS;
}

CU_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	CUresult rc;
	int from, to;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = pair(peerContext, &from, &to);
	if (rc == CUDA_SUCCESS) {
		if (enabled[from] & (1u << to))
			rc = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
		enabled[from] |= 1u << to;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	CUresult rc;
	int from, to;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = pair(peerContext, &from, &to);
	if (rc == CUDA_SUCCESS) {
		if (!(enabled[from] & (1u << to)))
			rc = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
		enabled[from] &= ~(1u << to);
	}
	mps__unlock();
	return rc;
}

bool mps__peer_enabled(int from, int to)
{
	return from >= 0 && from < SI_MAX_DEVICES && to >= 0 && to < SI_MAX_DEVICES && (enabled[from] & (1u << to));
}
