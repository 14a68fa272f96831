// SPDX-License-Identifier: MIT
/*
 * Tensor maps (TMA descriptors): cuTensorMapEncodeTiled, ...Im2col,
 * ...Im2colWide and cuTensorMapReplaceAddress. The descriptor is 128 opaque
 * bytes the driver encodes from a device address and a layout; only the
 * driver knows the format, so the server encodes (generated forwarding,
 * src/common/forward.def) and the bytes come back.
 *
 * The arguments are checked here as the driver checks them (a rank of 1 to
 * 5, the arrays present; the documentation asks for a 64-byte aligned
 * descriptor, which the driver does not hold to, so neither does this), and
 * the arrays are copied into ones of the rank's length: the driver reads
 * tensorRank - 1 strides and tensorRank - 2 im2col corners, and the message
 * carries tensorRank of each, so the caller's shorter arrays are never read
 * past their end.
 *
 * An encoding depends only on its arguments and the device, and Triton and
 * CUTLASS launchers encode again before every launch with the same ones: the
 * answers are kept (by a hash of the arguments, one entry per bucket) and a
 * repeat costs no round trip. Failures are not kept.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/gen/forward.h"

#define RANK_MAX 5
#define BUCKETS  256

enum kind { TILED = 1, IM2COL, IM2COL_WIDE };

/* Every argument of an encoding but the descriptor, zero-padded: equal
 * keys are equal calls. */
struct key {
	uint32_t kind, device, dtype, rank;
	uint64_t addr;
	uint64_t dim[RANK_MAX], stride[RANK_MAX];
	uint32_t box[RANK_MAX], estride[RANK_MAX];
	int32_t lower[RANK_MAX], upper[RANK_MAX];
	int32_t lower_w, upper_w;
	uint32_t channels, pixels;
	uint32_t interleave, swizzle, l2, oob, mode, pad;
};

static struct {
	pthread_mutex_t lock;
	struct entry {
		bool used;
		struct key key;
		CUtensorMap map;
	} e[BUCKETS];
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static unsigned int bucket(const struct key *k)
{
	const unsigned char *p = (const void *)k;
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (unsigned int)(h % BUCKETS);
}

/* A kept answer for k, into the caller's map: true if there was one. */
static bool lookup(const struct key *k, CUtensorMap *map)
{
	struct entry *e = &kept.e[bucket(k)];
	bool hit;

	pthread_mutex_lock(&kept.lock);
	hit = e->used && !memcmp(&e->key, k, sizeof(*k));
	if (hit)
		memcpy(map, &e->map, sizeof(e->map));   /* the caller's may be less aligned than the type */
	pthread_mutex_unlock(&kept.lock);
	return hit;
}

static void keep(const struct key *k, const CUtensorMap *map)
{
	struct entry *e = &kept.e[bucket(k)];

	pthread_mutex_lock(&kept.lock);
	e->used = true;
	e->key = *k;
	e->map = *map;
	pthread_mutex_unlock(&kept.lock);
}

/* The server's answer r for k: kept and given to the caller if it is one. */
static CUresult answer(const struct key *k, CUtensorMap *map, const CUtensorMap *out, CUresult r)
{
	if (r != CUDA_SUCCESS)
		return r;
	keep(k, out);
	memcpy(map, out, sizeof(*out));
	return CUDA_SUCCESS;
}

/* The checks every encoding shares, and the common part of the key. */
static CUresult begin(struct key *k, enum kind kind, const CUtensorMap *map, CUtensorMapDataType dtype,
		      cuuint32_t rank, cuuint32_t min_rank, void *addr, const cuuint64_t *dim,
		      const cuuint64_t *strides, const cuuint32_t *estrides)
{
	struct mps_ctx *ctx = mps__ctx_cur();

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!map || rank < min_rank || rank > RANK_MAX || !dim || !estrides ||
	    (rank > 1 && !strides))
		return CUDA_ERROR_INVALID_VALUE;
	memset(k, 0, sizeof(*k));
	k->kind = kind;
	k->device = (uint32_t)ctx->device;
	k->dtype = dtype;
	k->rank = rank;
	k->addr = (uint64_t)(uintptr_t)addr;
	memcpy(k->dim, dim, rank * sizeof(*dim));
	if (rank > 1)
		memcpy(k->stride, strides, (rank - 1) * sizeof(*strides));
	memcpy(k->estride, estrides, rank * sizeof(*estrides));
	return CUDA_SUCCESS;
}

static CUresult encode_tiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
			     const cuuint64_t *dim, const cuuint64_t *strides, const cuuint32_t *box,
			     const cuuint32_t *estrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
			     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	struct key k;
	CUtensorMap out;
	CUresult r = begin(&k, TILED, map, dtype, rank, 1, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	if (!box)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(k.box, box, rank * sizeof(*box));
	k.interleave = interleave;
	k.swizzle = swizzle;
	k.l2 = l2;
	k.oob = oob;
	if (lookup(&k, map))
		return CUDA_SUCCESS;
	r = mps__fwd_cuTensorMapEncodeTiled(&out, dtype, rank, addr, k.dim, k.stride, k.box, k.estride, interleave,
					    swizzle, l2, oob);
	return answer(&k, map, &out, r);
}

static CUresult encode_im2col(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
			      const cuuint64_t *dim, const cuuint64_t *strides, const int *lower, const int *upper,
			      cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estrides,
			      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
			      CUtensorMapFloatOOBfill oob)
{
	struct key k;
	CUtensorMap out;
	CUresult r = begin(&k, IM2COL, map, dtype, rank, 3, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	if (!lower || !upper)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(k.lower, lower, (rank - 2) * sizeof(*lower));
	memcpy(k.upper, upper, (rank - 2) * sizeof(*upper));
	k.channels = channels;
	k.pixels = pixels;
	k.interleave = interleave;
	k.swizzle = swizzle;
	k.l2 = l2;
	k.oob = oob;
	if (lookup(&k, map))
		return CUDA_SUCCESS;
	r = mps__fwd_cuTensorMapEncodeIm2col(&out, dtype, rank, addr, k.dim, k.stride, k.lower, k.upper, channels,
					     pixels, k.estride, interleave, swizzle, l2, oob);
	return answer(&k, map, &out, r);
}

static CUresult encode_im2col_wide(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
				   const cuuint64_t *dim, const cuuint64_t *strides, int lower_w, int upper_w,
				   cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estrides,
				   CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
				   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	struct key k;
	CUtensorMap out;
	CUresult r = begin(&k, IM2COL_WIDE, map, dtype, rank, 3, addr, dim, strides, estrides);

	if (r != CUDA_SUCCESS)
		return r;
	k.lower_w = lower_w;
	k.upper_w = upper_w;
	k.channels = channels;
	k.pixels = pixels;
	k.interleave = interleave;
	k.mode = mode;
	k.swizzle = swizzle;
	k.l2 = l2;
	k.oob = oob;
	if (lookup(&k, map))
		return CUDA_SUCCESS;
	r = mps__fwd_cuTensorMapEncodeIm2colWide(&out, dtype, rank, addr, k.dim, k.stride, lower_w, upper_w,
						 channels, pixels, k.estride, interleave, mode, swizzle, l2, oob);
	return answer(&k, map, &out, r);
}

/* The forwarding copies the descriptor in and out with memcpy: a caller's
 * less aligned than the type is fine. */
static CUresult replace_address(CUtensorMap *map, void *addr)
{
	if (!map)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__fwd_cuTensorMapReplaceAddress(map, addr);
}

const struct mps_impl mps__tensormap_api[] = {
	MPS_IMPL(cuTensorMapEncodeTiled, encode_tiled),
	MPS_IMPL(cuTensorMapEncodeIm2col, encode_im2col),
	MPS_IMPL(cuTensorMapEncodeIm2colWide, encode_im2col_wide),
	MPS_IMPL(cuTensorMapReplaceAddress, replace_address),
	MPS_IMPL_END
};
