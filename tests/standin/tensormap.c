// SPDX-License-Identifier: MIT
/*
 * Tensor maps. The real descriptor's format is the driver's secret; the
 * stand-in's is its own, laid out below, and read back only by the twin of
 * the kernel that uses one (twins.c, tma_tile). The checks are those the
 * driver's documentation lists for a tiled map (but the descriptor's
 * alignment, which the driver does not check either): a rank of 1 to 5, a 16-byte aligned address, non-zero
 * dimensions, strides that are multiples of 16, box sides of 1 to 256 with
 * the innermost one a multiple of 16 bytes, element strides of 1 to 8.
 *
 * 32-bit words of a stand-in map: 0 magic; 1 kind | dtype << 4 | rank << 12
 * | interleave << 16 | swizzle << 20 | l2 << 24 | oob << 28; 2-3 the
 * address; 4-13 five dimensions (64-bit); 14-21 four strides (64-bit);
 * 22-26 box sides (im2col: channels, pixels, then the lower and upper
 * corners a byte each; wide: channels, pixels, the corners, the mode);
 * 27-31 element strides.
 */
#include <string.h>

#include "standin.h"

#define MAGIC 0x50414d54u   /* "TMAP" */

static const unsigned dtype_size[] = { 1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4, 1, 1, 1 };

static CUresult check(const CUtensorMap *map, unsigned dtype, unsigned rank, unsigned min_rank, const void *addr,
		      const cuuint64_t *dim, const cuuint64_t *strides, const cuuint32_t *estrides)
{
	if (!map || rank < min_rank || rank > 5 || !dim || !estrides ||
	    (rank > 1 && !strides) || dtype >= sizeof(dtype_size) / sizeof(dtype_size[0]) ||
	    ((uintptr_t)addr & 15) || !addr)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < rank; i++) {
		if (!dim[i] || dim[i] > (1ull << 32) || !estrides[i] || estrides[i] > 8)
			return CUDA_ERROR_INVALID_VALUE;
		if (i + 1 < rank && (strides[i] % 16 || strides[i] >= (1ull << 40)))
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static void put(CUtensorMap *map, unsigned kind, unsigned dtype, unsigned rank, const void *addr,
		const cuuint64_t *dim, const cuuint64_t *strides, const uint32_t *box, const cuuint32_t *estrides,
		unsigned interleave, unsigned swizzle, unsigned l2, unsigned oob)
{
	uint32_t w[32] = { 0 };
	uint64_t a = (uint64_t)(uintptr_t)addr;

	w[0] = MAGIC;
	w[1] = kind | dtype << 4 | rank << 12 | (interleave & 15) << 16 | (swizzle & 15) << 20 | (l2 & 15) << 24 |
	       (oob & 1) << 28;
	memcpy(&w[2], &a, 8);
	memcpy(&w[4], dim, rank * 8);
	if (rank > 1)
		memcpy(&w[14], strides, (rank - 1) * 8);
	memcpy(&w[22], box, 5 * 4);
	memcpy(&w[27], estrides, rank * 4);
	memcpy(map, w, sizeof(w));
}

CU_API CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
				       const cuuint64_t *dim, const cuuint64_t *strides, const cuuint32_t *box,
				       const cuuint32_t *estrides, CUtensorMapInterleave interleave,
				       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
				       CUtensorMapFloatOOBfill oob)
{
	uint32_t b[5] = { 0 };
	CUresult r = check(map, dtype, rank, 1, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	if (!box)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < rank; i++) {
		if (!box[i] || box[i] > 256)
			return CUDA_ERROR_INVALID_VALUE;
		b[i] = box[i];
	}
	if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && (box[0] * dtype_size[dtype]) % 16)
		return CUDA_ERROR_INVALID_VALUE;
	put(map, 1, dtype, rank, addr, dim, strides, b, estrides, interleave, swizzle, l2, oob);
	return CUDA_SUCCESS;
}

CU_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
					const cuuint64_t *dim, const cuuint64_t *strides, const int *lower,
					const int *upper, cuuint32_t channels, cuuint32_t pixels,
					const cuuint32_t *estrides, CUtensorMapInterleave interleave,
					CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	uint32_t b[5] = { channels, pixels, 0, 0, 0 };
	CUresult r = check(map, dtype, rank, 3, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	if (!lower || !upper || !channels || channels > 256 || !pixels || pixels > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i + 2 < rank; i++) {
		b[2] |= (uint32_t)(lower[i] & 0xff) << (8 * i);
		b[3] |= (uint32_t)(upper[i] & 0xff) << (8 * i);
	}
	put(map, 2, dtype, rank, addr, dim, strides, b, estrides, interleave, swizzle, l2, oob);
	return CUDA_SUCCESS;
}

CU_API CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
					    void *addr, const cuuint64_t *dim, const cuuint64_t *strides, int lower_w,
					    int upper_w, cuuint32_t channels, cuuint32_t pixels,
					    const cuuint32_t *estrides, CUtensorMapInterleave interleave,
					    CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
					    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	uint32_t b[5] = { channels, pixels, (uint32_t)lower_w, (uint32_t)upper_w, (uint32_t)mode };
	CUresult r = check(map, dtype, rank, 3, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	if (!channels || channels > 256 || !pixels || pixels > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	put(map, 3, dtype, rank, addr, dim, strides, b, estrides, interleave, swizzle, l2, oob);
	return CUDA_SUCCESS;
}

CU_API CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr)
{
	uint32_t w[32];
	uint64_t a = (uint64_t)(uintptr_t)addr;

	if (!map || !addr || ((uintptr_t)addr & 15))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(w, map, sizeof(w));
	if (w[0] != MAGIC)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&w[2], &a, 8);
	memcpy(map, w, sizeof(w));
	return CUDA_SUCCESS;
}

bool mps__tensormap_tile(const void *desc, struct si_tmap *t)
{
	uint32_t w[32];

	memcpy(w, desc, sizeof(w));
	if (w[0] != MAGIC || (w[1] & 15) != 1)
		return false;
	t->dtype = (w[1] >> 4) & 15;
	t->rank = (w[1] >> 12) & 15;
	memcpy(&t->addr, &w[2], 8);
	memcpy(t->dim, &w[4], sizeof(t->dim));
	memcpy(t->stride, &w[14], sizeof(t->stride));
	memcpy(t->box, &w[22], sizeof(t->box));
	t->esize = dtype_size[t->dtype];
	return true;
}
