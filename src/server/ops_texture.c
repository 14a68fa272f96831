// SPDX-License-Identifier: MIT
/*
 * Texture and surface objects. A client's resource names an array or a
 * mipmapped array of its own (its handle, which the server turns into the
 * driver's) or device memory it owns (linear, or pitched 2D: every byte of
 * the rows must be the client's); anything else is refused before the
 * driver sees it; a linear one sized past the end of the client's
 * allocation ends there. The object the driver makes is the client's object too
 * (destroyed with it), and its value goes back to the client, which passes
 * it to kernels by value; destroying one checks it is the client's.
 */
#include <string.h>

#include "server/driver.h"
#include "server/forward.h"
#include "server/memacct.h"
#include "server/objects.h"
#include "server/server.h"

static uint64_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 0;
	}
}

/* The resource with the driver's handles and checked memory, in *res. */
static CUresult resource(struct mps_client *c, const struct mps_msg_texobj *q, bool surface, CUDA_RESOURCE_DESC *res)
{
	const struct mps_mrange *m;
	uint64_t elem, row, span;
	void *real;
	CUresult r;

	*res = q->res;
	switch (res->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		if (!mps__fwd_get(c, MPS_H_ARRAY, q->array, &real, &r))
			return r;
		res->res.array.hArray = real;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		if (surface)
			return CUDA_ERROR_INVALID_VALUE;
		if (!mps__fwd_get(c, MPS_H_MIPMAP, q->array, &real, &r))
			return r;
		res->res.mipmap.hMipmappedArray = real;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_LINEAR:
		elem = format_bytes(res->res.linear.format) * res->res.linear.numChannels;
		if (surface || !elem || !res->res.linear.sizeInBytes)
			return CUDA_ERROR_INVALID_VALUE;
		if (mps_memacct_check(&c->mem, res->res.linear.devPtr, res->res.linear.sizeInBytes) == 0)
			return CUDA_SUCCESS;
		/* The driver takes a size past the allocation's end (programs
		 * pad it: NVIDIA's convolutionFFT2D); the texture here ends
		 * where the client's memory does, whole elements, and fetches
		 * past it read zero instead of whatever lies beyond. */
		m = mps_memacct_find(&c->mem, res->res.linear.devPtr);
		if (!m)
			return CUDA_ERROR_INVALID_VALUE;
		span = (m->base + m->size - res->res.linear.devPtr) / elem * elem;
		if (!span)
			return CUDA_ERROR_INVALID_VALUE;
		res->res.linear.sizeInBytes = span;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_PITCH2D:
		elem = format_bytes(res->res.pitch2D.format) * res->res.pitch2D.numChannels;
		if (surface || !elem || !res->res.pitch2D.width || !res->res.pitch2D.height ||
		    res->res.pitch2D.width > UINT32_MAX || res->res.pitch2D.height > UINT32_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		row = res->res.pitch2D.width * elem;
		if (res->res.pitch2D.pitchInBytes < row ||
		    res->res.pitch2D.pitchInBytes > UINT64_MAX / res->res.pitch2D.height)
			return CUDA_ERROR_INVALID_VALUE;
		span = res->res.pitch2D.pitchInBytes * (res->res.pitch2D.height - 1) + row;
		if (mps_memacct_check(&c->mem, res->res.pitch2D.devPtr, span) < 0)
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

void mps__op_texobj(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_texobj *q = (const void *)m;
	bool surface = m->flags == MPS_SURF_CREATE || m->flags == MPS_SURF_DESTROY;
	int type = surface ? MPS_H_SURFOBJ : MPS_H_TEXOBJ;
	struct mps_sobj *o;
	CUDA_RESOURCE_DESC res;
	uint64_t obj = 0;
	uint32_t h;
	CUresult r;

	switch (m->flags) {
	case MPS_TEX_CREATE:
	case MPS_SURF_CREATE:
		r = resource(c, q, surface, &res);
		if (r == CUDA_SUCCESS)
			r = mps__fwd_begin(c, m, true);
		if (r != CUDA_SUCCESS)
			break;
		if (surface)
			r = mps_drv.cuSurfObjectCreate ? mps_drv.cuSurfObjectCreate((CUsurfObject *)&obj, &res) :
							 CUDA_ERROR_NOT_SUPPORTED;
		else
			r = mps_drv.cuTexObjectCreate ? mps_drv.cuTexObjectCreate((CUtexObject *)&obj, &res, &q->tex,
										  q->view ? &q->view_desc : NULL) :
							CUDA_ERROR_NOT_SUPPORTED;
		if (r != CUDA_SUCCESS)
			break;
		o = mps_obj_add(c, type, (void *)(uintptr_t)obj, mps__cur_device(), 0);
		if (!o) {
			if (surface)
				mps_drv.cuSurfObjectDestroy((CUsurfObject)obj);
			else
				mps_drv.cuTexObjectDestroy((CUtexObject)obj);
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		mps__slot(c, m->slot)->val[0] = obj;
		break;
	case MPS_TEX_DESTROY:
	case MPS_SURF_DESTROY:
		/* Only one of the client's own: the driver's destroy of it here. */
		h = mps_obj_find(c, type, (void *)(uintptr_t)q->object);
		if (!h) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		mps_obj_del(c, h, true);
		r = CUDA_SUCCESS;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	mps__reply(c, m->slot, r);
}
