// SPDX-License-Identifier: MIT
/*
 * Green contexts: a device's SMs as a resource, split into disjoint groups,
 * and contexts whose streams run kernels only on one group's SMs. The
 * stand-in's SMs are numbers: a green context's stream hands its range to
 * the kernels it runs (struct si_launch), and the `spin` twin reports the SM
 * of each block from that range, as %smid does on a GPU, so a test can see
 * which SMs a client's work may use.
 *
 * Granularity is that of compute capability 7.x (2 SMs, multiples of 2), so
 * the stand-in's 16 SMs split finely enough to test quarters. A resource
 * remembers its device and first SM inside the driver's padding of
 * CUdevResource, as the real driver keeps its own state there.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

#define SM_MIN     2u
#define SM_ALIGN   2u
#define RES_MAGIC  0x5347u   /* "GS" */

struct res_state {
	uint32_t magic;
	int32_t device;
	uint32_t first;
};

struct si_resdesc {
	uintptr_t handle;
	int device;
	unsigned first, count;
};

struct si_green {
	uintptr_t handle;
	uintptr_t ctx_handle;           /* as a CUcontext, once asked for; 0: not yet */
	int device;
	unsigned first, count;
};

_Static_assert(sizeof(struct res_state) <= sizeof(((CUdevResource *)0)->_internal_padding), "resource state fits");

static void res_fill(CUdevResource *r, int device, unsigned first, unsigned count)
{
	struct res_state st = { RES_MAGIC, device, first };

	memset(r, 0, sizeof(*r));
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	memcpy(r->_internal_padding, &st, sizeof(st));
	r->sm.smCount = count;
	r->sm.minSmPartitionSize = SM_MIN;
	r->sm.smCoscheduledAlignment = SM_ALIGN;
}

/* The SM range of a resource the stand-in made, or false. */
static bool res_read(const CUdevResource *r, int *device, unsigned *first, unsigned *count)
{
	struct res_state st;

	if (!r || r->type != CU_DEV_RESOURCE_TYPE_SM)
		return false;
	memcpy(&st, r->_internal_padding, sizeof(st));
	if (st.magic != RES_MAGIC || !mps__device(st.device) || st.first + r->sm.smCount > SI_SM_COUNT ||
	    !r->sm.smCount)
		return false;
	*device = st.device;
	*first = st.first;
	*count = r->sm.smCount;
	return true;
}

CU_API CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!mps__device(device))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!resource)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_fill(resource, device, 0, SI_SM_COUNT);
	return CUDA_SUCCESS;
}

CU_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups, const CUdevResource *input,
					    CUdevResource *remaining, unsigned int useFlags, unsigned int minCount)
{
	unsigned first, count, size, groups;
	int device;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!nbGroups || !input || (result && !*nbGroups))
		return CUDA_ERROR_INVALID_VALUE;
	if (input->type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	if (!res_read(input, &device, &first, &count) || useFlags & ~3u)
		return CUDA_ERROR_INVALID_VALUE;
	if (minCount > count)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	size = minCount < SM_MIN ? SM_MIN : (minCount + SM_ALIGN - 1) / SM_ALIGN * SM_ALIGN;
	groups = size <= count ? count / size : 0;
	if (!groups)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	if (result && *nbGroups < groups)
		groups = *nbGroups;
	*nbGroups = groups;
	if (!result)
		return CUDA_SUCCESS;
	for (unsigned i = 0; i < groups; i++)
		res_fill(&result[i], device, first + i * size, size);
	if (remaining) {
		if (count > groups * size)
			res_fill(remaining, device, first + groups * size, count - groups * size);
		else
			memset(remaining, 0, sizeof(*remaining));
	}
	return CUDA_SUCCESS;
}

CU_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned int nbResources)
{
	struct si_resdesc *d;
	unsigned first = 0, count = 0;
	int device = -1;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phDesc || !resources || !nbResources)
		return CUDA_ERROR_INVALID_VALUE;
	/* Several resources must be adjacent ranges of one device here. */
	for (unsigned i = 0; i < nbResources; i++) {
		unsigned f, n;
		int dv;

		if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM)
			return CUDA_ERROR_INVALID_RESOURCE_TYPE;
		if (!res_read(&resources[i], &dv, &f, &n))
			return CUDA_ERROR_INVALID_VALUE;
		if (i == 0) {
			device = dv;
			first = f;
		} else if (dv != device || f != first + count) {
			return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
		}
		count += n;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->device = device;
	d->first = first;
	d->count = count;
	mps__lock();
	d->handle = mps__handle_add(SI_H_RESDESC, d);
	mps__unlock();
	if (!d->handle) {
		free(d);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phDesc = (CUdevResourceDesc)d->handle;   /* lives as long as the process, as the driver's */
	return CUDA_SUCCESS;
}

CU_API CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
{
	struct si_resdesc *d;
	struct si_green *g;
	CUcontext primary;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phCtx || flags != CU_GREEN_CTX_DEFAULT_STREAM)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mps__lock();
	d = mps__handle_get((uintptr_t)desc, SI_H_RESDESC);
	if (d) {
		g->device = d->device;
		g->first = d->first;
		g->count = d->count;
	}
	mps__unlock();
	if (!d || g->device != dev) {
		free(g);
		return d ? CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION : CUDA_ERROR_INVALID_VALUE;
	}
	/* A green context holds its device's primary context. */
	rc = cuDevicePrimaryCtxRetain(&primary, dev);
	if (rc != CUDA_SUCCESS) {
		free(g);
		return rc;
	}
	mps__lock();
	g->handle = mps__handle_add(SI_H_GREEN, g);
	mps__unlock();
	if (!g->handle) {
		cuDevicePrimaryCtxRelease_v2(dev);
		free(g);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phCtx = (CUgreenCtx)g->handle;
	return CUDA_SUCCESS;
}

CU_API CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
	struct si_green *g;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	g = mps__handle_get((uintptr_t)hCtx, SI_H_GREEN);
	if (g) {
		mps__handle_remove(g->handle);
		if (g->ctx_handle)
			mps__handle_remove(g->ctx_handle);
	}
	mps__unlock();
	if (!g)
		return CUDA_ERROR_INVALID_CONTEXT;
	/* Its streams live on, as the driver says (they leak there). */
	cuDevicePrimaryCtxRelease_v2(g->device);
	free(g);
	return CUDA_SUCCESS;
}

CU_API CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource, CUdevResourceType type)
{
	struct si_green *g;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!resource)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	mps__lock();
	g = mps__handle_get((uintptr_t)hCtx, SI_H_GREEN);
	if (g)
		res_fill(resource, g->device, g->first, g->count);
	else
		rc = CUDA_ERROR_INVALID_CONTEXT;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority)
{
	struct si_green *g;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* The driver asks for a non-blocking stream here. */
	if (!phStream || flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	g = mps__handle_get((uintptr_t)greenCtx, SI_H_GREEN);
	if (!g)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (mps__devices[g->device].ctx->state != SI_CTX_ACTIVE)
		rc = CUDA_ERROR_CONTEXT_IS_DESTROYED;
	else
		rc = mps__stream_create_in(mps__devices[g->device].ctx, flags, priority, g->first, g->count, phStream);
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
	struct si_green *g;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pContext)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	g = mps__handle_get((uintptr_t)hCtx, SI_H_GREEN);
	if (!g)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (!g->ctx_handle && !(g->ctx_handle = mps__handle_add(SI_H_GREENCTX, g)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else
		*pContext = (CUcontext)g->ctx_handle;
	mps__unlock();
	return rc;
}

bool mps__green_ctx(uintptr_t handle, int *device, unsigned *first, unsigned *count)
{
	struct si_green *g = mps__handle_get(handle, SI_H_GREENCTX);

	if (!g)
		return false;
	*device = g->device;
	*first = g->first;
	*count = g->count;
	return true;
}
