// SPDX-License-Identifier: MIT
/*
 * CUDA arrays: a descriptor and, behind it, device memory of the current
 * context laid out plainly (rows of Width elements, Height rows per slice,
 * Depth slices or layers), which the copy operations address like any
 * device memory (graphnodes.c's copy sides). A mipmapped array is its
 * levels, each an array of half the size of the one before (at least 1).
 * The driver's checks on descriptors are made; texture layouts are not
 * modelled: a kernel cannot read an array here.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct si_array {
	uintptr_t handle;
	CUDA_ARRAY3D_DESCRIPTOR desc;
	CUdeviceptr mem;
	size_t row, rows, slices;       /* bytes per row; rows per slice; slices */
	bool level;                     /* a mipmapped array's: freed with it */
};

#define SI_MAX_LEVELS 16

struct si_mipmap {
	uintptr_t handle;
	unsigned nlevels;
	struct si_array *level[SI_MAX_LEVELS];
};

static size_t format_bytes(CUarray_format f)
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

#define KNOWN_FLAGS (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP | \
		     CUDA_ARRAY3D_TEXTURE_GATHER)

/* A new array (its memory in the current context). Without the lock. */
static CUresult array_new(const CUDA_ARRAY3D_DESCRIPTOR *d, bool level, struct si_array **out)
{
	size_t elem = format_bytes(d->Format) * d->NumChannels;
	struct si_array *a;
	CUresult rc;

	if (!elem || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) || !d->Width ||
	    (d->Flags & ~(unsigned)KNOWN_FLAGS) || (!d->Height && d->Depth && !(d->Flags & CUDA_ARRAY3D_LAYERED)) ||
	    ((d->Flags & CUDA_ARRAY3D_CUBEMAP) && (d->Width != d->Height || d->Depth % 6 || !d->Depth)) ||
	    ((d->Flags & CUDA_ARRAY3D_LAYERED) && !d->Depth) || d->Width > (1u << 20) || d->Height > (1u << 20) ||
	    d->Depth > 4096)
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->desc = *d;
	a->level = level;
	a->row = d->Width * elem;
	a->rows = d->Height ? d->Height : 1;
	a->slices = d->Depth ? d->Depth : 1;
	rc = cuMemAlloc_v2(&a->mem, a->row * a->rows * a->slices);
	if (rc != CUDA_SUCCESS) {
		free(a);
		return rc;
	}
	mps__lock();
	a->handle = mps__handle_add(SI_H_ARRAY, a);
	mps__unlock();
	if (!a->handle) {
		cuMemFree_v2(a->mem);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = a;
	return CUDA_SUCCESS;
}

static void array_free(struct si_array *a)
{
	mps__lock();
	mps__handle_remove(a->handle);
	mps__unlock();
	cuMemFree_v2(a->mem);
	free(a);
}

CU_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	struct si_array *a;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pHandle || !pAllocateArray)
		return CUDA_ERROR_INVALID_VALUE;
	rc = array_new(pAllocateArray, false, &a);
	if (rc == CUDA_SUCCESS)
		*pHandle = (CUarray)a->handle;
	return rc;
}

CU_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	CUDA_ARRAY3D_DESCRIPTOR d;

	if (!pAllocateArray)
		return CUDA_ERROR_INVALID_VALUE;
	memset(&d, 0, sizeof(d));
	d.Width = pAllocateArray->Width;
	d.Height = pAllocateArray->Height;
	d.Format = pAllocateArray->Format;
	d.NumChannels = pAllocateArray->NumChannels;
	return cuArray3DCreate_v2(pHandle, &d);
}

/* The array behind a handle, or NULL. Under the lock. */
static struct si_array *array_get(CUarray h)
{
	return mps__handle_get((uintptr_t)h, SI_H_ARRAY);
}

CU_API CUresult cuArrayDestroy(CUarray hArray)
{
	struct si_array *a;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	a = array_get(hArray);
	mps__unlock();
	if (!a || a->level)
		return CUDA_ERROR_INVALID_HANDLE;
	array_free(a);
	return CUDA_SUCCESS;
}

CU_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
	struct si_array *a;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pArrayDescriptor)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	a = array_get(hArray);
	if (a)
		*pArrayDescriptor = a->desc;
	mps__unlock();
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CU_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUresult rc;

	if (!pArrayDescriptor)
		return CUDA_ERROR_INVALID_VALUE;
	rc = cuArray3DGetDescriptor_v2(&d, hArray);
	if (rc != CUDA_SUCCESS)
		return rc;
	pArrayDescriptor->Width = d.Width;
	pArrayDescriptor->Height = d.Height;
	pArrayDescriptor->Format = d.Format;
	pArrayDescriptor->NumChannels = d.NumChannels;
	return CUDA_SUCCESS;
}

CUresult mps__array_side(CUarray h, uintptr_t *base, size_t *pitch, size_t *height, size_t *slices)
{
	struct si_array *a = array_get(h);

	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	*base = (uintptr_t)a->mem;
	*pitch = a->row;
	*height = a->rows;
	*slices = a->slices;
	return CUDA_SUCCESS;
}

CU_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
				       unsigned int numMipmapLevels)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	struct si_mipmap *m;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pHandle || !pMipmappedArrayDesc || !numMipmapLevels || numMipmapLevels > SI_MAX_LEVELS)
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d = *pMipmappedArrayDesc;
	for (unsigned i = 0; i < numMipmapLevels && rc == CUDA_SUCCESS; i++) {
		rc = array_new(&d, true, &m->level[i]);
		if (rc == CUDA_SUCCESS)
			m->nlevels++;
		d.Width = d.Width > 1 ? d.Width / 2 : 1;
		d.Height = d.Height > 1 ? d.Height / 2 : d.Height;
		if (!(d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)))
			d.Depth = d.Depth > 1 ? d.Depth / 2 : d.Depth;
	}
	if (rc == CUDA_SUCCESS) {
		mps__lock();
		m->handle = mps__handle_add(SI_H_MIPMAP, m);
		mps__unlock();
		if (!m->handle)
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc != CUDA_SUCCESS) {
		for (unsigned i = 0; i < m->nlevels; i++)
			array_free(m->level[i]);
		free(m);
		return rc;
	}
	*pHandle = (CUmipmappedArray)m->handle;
	return CUDA_SUCCESS;
}

CU_API CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level)
{
	struct si_mipmap *m;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pLevelArray)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	m = mps__handle_get((uintptr_t)hMipmappedArray, SI_H_MIPMAP);
	if (!m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (level >= m->nlevels)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*pLevelArray = (CUarray)m->level[level]->handle;
	mps__unlock();
	return rc;
}

CU_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	struct si_mipmap *m;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	m = mps__handle_get((uintptr_t)hMipmappedArray, SI_H_MIPMAP);
	if (m)
		mps__handle_remove(m->handle);
	mps__unlock();
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	for (unsigned i = 0; i < m->nlevels; i++)
		array_free(m->level[i]);
	free(m);
	return CUDA_SUCCESS;
}
