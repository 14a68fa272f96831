// SPDX-License-Identifier: MIT
/*
 * Texture and surface objects: made from a resource the stand-in checks (an
 * array or mipmapped array of its own, or device memory, allocated or
 * mapped, for linear and pitched textures; surfaces take arrays only) and
 * kept until destroyed.
 * No kernel here reads them: their value only has to be valid to destroy.
 */
#include <stdlib.h>

#include "standin.h"

struct si_texobj {
	uintptr_t handle;
	bool surface;
	CUDA_RESOURCE_DESC res;
};

static CUresult check_resource(const CUDA_RESOURCE_DESC *r, bool surface)
{
	struct si_range *range;

	switch (r->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		return mps__handle_get((uintptr_t)r->res.array.hArray, SI_H_ARRAY) ? CUDA_SUCCESS :
										       CUDA_ERROR_INVALID_HANDLE;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		if (surface)
			return CUDA_ERROR_INVALID_VALUE;
		return mps__handle_get((uintptr_t)r->res.mipmap.hMipmappedArray, SI_H_MIPMAP) ?
			       CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	case CU_RESOURCE_TYPE_LINEAR:
		if (surface || !r->res.linear.sizeInBytes ||
		    mps__range_classify((uintptr_t)r->res.linear.devPtr, r->res.linear.sizeInBytes, &range) != 1 ||
		    (range->kind != SI_RANGE_DEVICE && range->kind != SI_RANGE_MAPPED))
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_PITCH2D:
		if (surface || !r->res.pitch2D.height || !r->res.pitch2D.width ||
		    mps__range_classify((uintptr_t)r->res.pitch2D.devPtr,
					r->res.pitch2D.pitchInBytes * r->res.pitch2D.height, &range) != 1 ||
		    (range->kind != SI_RANGE_DEVICE && range->kind != SI_RANGE_MAPPED))
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult create(uint64_t *out, const CUDA_RESOURCE_DESC *res, bool surface)
{
	struct si_texobj *t;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !res)
		return CUDA_ERROR_INVALID_VALUE;
	t = calloc(1, sizeof(*t));
	if (!t)
		return CUDA_ERROR_OUT_OF_MEMORY;
	t->surface = surface;
	t->res = *res;
	mps__lock();
	rc = check_resource(res, surface);
	if (rc == CUDA_SUCCESS && !(t->handle = mps__handle_add(SI_H_TEXOBJ, t)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	mps__unlock();
	if (rc != CUDA_SUCCESS) {
		free(t);
		return rc;
	}
	*out = t->handle;
	return CUDA_SUCCESS;
}

static CUresult destroy(uint64_t value, bool surface)
{
	struct si_texobj *t;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	t = mps__handle_get((uintptr_t)value, SI_H_TEXOBJ);
	if (t && t->surface == surface)
		mps__handle_remove(t->handle);
	else
		t = NULL;
	mps__unlock();
	if (!t)
		return CUDA_ERROR_INVALID_VALUE;
	free(t);
	return CUDA_SUCCESS;
}

CU_API CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
				  const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	uint64_t v;
	CUresult rc;

	(void)pResViewDesc;
	if (!pTexDesc)
		return CUDA_ERROR_INVALID_VALUE;
	rc = create(&v, pResDesc, false);
	if (rc == CUDA_SUCCESS)
		*pTexObject = (CUtexObject)v;
	return rc;
}

CU_API CUresult cuTexObjectDestroy(CUtexObject texObject)
{
	return destroy(texObject, false);
}

CU_API CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
	uint64_t v;
	CUresult rc = create(&v, pResDesc, true);

	if (rc == CUDA_SUCCESS)
		*pSurfObject = (CUsurfObject)v;
	return rc;
}

CU_API CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
	return destroy(surfObject, true);
}

bool mps__texture_linear(uint64_t value, uintptr_t *base, size_t *bytes, CUarray_format *format,
			 unsigned *channels)
{
	struct si_texobj *t = mps__handle_get((uintptr_t)value, SI_H_TEXOBJ);

	if (!t || t->surface || t->res.resType != CU_RESOURCE_TYPE_LINEAR)
		return false;
	*base = (uintptr_t)t->res.res.linear.devPtr;
	*bytes = t->res.res.linear.sizeInBytes;
	*format = t->res.res.linear.format;
	*channels = t->res.res.linear.numChannels;
	return true;
}
