// SPDX-License-Identifier: MIT
/*
 * The occupancy calculator. Blocks per SM and dynamic shared memory per
 * block are the server's answers (the driver's, in its context), kept by
 * funcattr.c once given, so a framework asking per launch costs no round
 * trip; active clusters always ask. The search for the best block size runs
 * here, since it calls the program's own callback for each size.
 */
#include <stdbool.h>
#include <stdint.h>

#include "client/api.h"
#include "client/client.h"

/* Blocks per SM and dynamic shared memory per block are answered from what
 * funcattr.c keeps once the server has answered them. */
static CUresult occupancy(struct mps_msg_occupancy *q, struct mps_func *f, uint64_t *out)
{
	struct mps_ctx *ctx = mps__ctx_cur();
	int device = ctx ? ctx->device : -1;
	bool keep = q->kind == MPS_OCC_BLOCKS_PER_SM || q->kind == MPS_OCC_DYN_SMEM;
	struct mps_call call;
	uint32_t h = 0;
	CUresult r;

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (keep && mps__occ_find(f, device, q, out))
		return CUDA_SUCCESS;
	q->func = f->handle;
	mps__cur_handle(&h);
	r = mps__call(MPS_OP_OCCUPANCY, h, &q->hdr, sizeof(*q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		*out = call.s->val[0];
		if (keep)
			mps__occ_keep(f, device, q, *out);
	}
	mps__call_end(&call);
	return r;
}

static CUresult occ_blocks_flags(int *n, CUfunction hf, int block, size_t smem, unsigned int flags)
{
	struct mps_msg_occupancy q = { .kind = MPS_OCC_BLOCKS_PER_SM, .block = block, .dyn_smem = smem, .flags = flags };
	uint64_t v = 0;
	CUresult r;

	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	r = occupancy(&q, mps__func(hf), &v);
	if (r == CUDA_SUCCESS)
		*n = (int)(int64_t)v;
	return r;
}

static CUresult occ_blocks(int *n, CUfunction hf, int block, size_t smem)
{
	return occ_blocks_flags(n, hf, block, smem, 0);
}

static CUresult occ_dyn_smem(size_t *size, CUfunction hf, int nblocks, int block)
{
	struct mps_msg_occupancy q = { .kind = MPS_OCC_DYN_SMEM, .block = block, .num_blocks = nblocks };
	uint64_t v = 0;
	CUresult r;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	r = occupancy(&q, mps__func(hf), &v);
	if (r == CUDA_SUCCESS)
		*size = (size_t)v;
	return r;
}

static CUresult occ_clusters(int *n, CUfunction hf, const CUlaunchConfig *cfg)
{
	struct mps_msg_occupancy q = { .kind = MPS_OCC_CLUSTERS };
	uint64_t v = 0;
	CUresult r;

	if (!n || !cfg)
		return CUDA_ERROR_INVALID_VALUE;
	q.grid[0] = cfg->gridDimX;
	q.grid[1] = cfg->gridDimY;
	q.grid[2] = cfg->gridDimZ;
	q.blockdim[0] = cfg->blockDimX;
	q.blockdim[1] = cfg->blockDimY;
	q.blockdim[2] = cfg->blockDimZ;
	q.dyn_smem = cfg->sharedMemBytes;
	for (unsigned int i = 0; i < cfg->numAttrs && cfg->attrs; i++) {
		if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
			q.cluster[0] = cfg->attrs[i].value.clusterDim.x;
			q.cluster[1] = cfg->attrs[i].value.clusterDim.y;
			q.cluster[2] = cfg->attrs[i].value.clusterDim.z;
		}
	}
	r = occupancy(&q, mps__func(hf), &v);
	if (r == CUDA_SUCCESS)
		*n = (int)(int64_t)v;
	return r;
}

/* The occupancy calculator's search, here because its callback is code in
 * this process: the block size (a multiple of the warp size, up to the
 * function's and the caller's limit) that keeps the most threads resident. */
static CUresult occ_potential_flags(int *min_grid, int *block_out, CUfunction hf, CUoccupancyB2DSize cb,
				    size_t smem, int limit, unsigned int flags)
{
	struct mps_func *f = mps__func(hf);
	struct mps_ctx *ctx = mps__ctx_cur();
	int warp = 32, sms = 1, best = 0, best_blocks = 0, maxt;
	CUresult r;

	if (!min_grid || !block_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, ctx->device);
	cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->device);
	maxt = f->max_threads > 0 ? f->max_threads : 1024;
	if (limit > 0 && limit < maxt)
		maxt = limit;
	for (int bs = maxt - maxt % warp; bs > 0; bs -= warp) {
		int n = 0;

		r = occ_blocks_flags(&n, hf, bs, cb ? cb(bs) : smem, flags);
		if (r != CUDA_SUCCESS)
			return r;
		if (n * bs > best * best_blocks || !best) {
			if (n > 0 || !best) {
				best = bs;
				best_blocks = n;
			}
		}
		if (n * bs == maxt - maxt % warp && n * bs >= best * best_blocks)
			break;   /* full occupancy at the largest size: done */
	}
	*block_out = best;
	*min_grid = best_blocks * sms;
	return CUDA_SUCCESS;
}

static CUresult occ_potential(int *min_grid, int *block, CUfunction hf, CUoccupancyB2DSize cb, size_t smem, int limit)
{
	return occ_potential_flags(min_grid, block, hf, cb, smem, limit, 0);
}

const struct mps_impl mps__occupancy_api[] = {
	MPS_IMPL(cuOccupancyMaxActiveBlocksPerMultiprocessor, occ_blocks),
	MPS_IMPL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, occ_blocks_flags),
	MPS_IMPL(cuOccupancyAvailableDynamicSMemPerBlock, occ_dyn_smem),
	MPS_IMPL(cuOccupancyMaxActiveClusters, occ_clusters),
	MPS_IMPL(cuOccupancyMaxPotentialBlockSize, occ_potential),
	MPS_IMPL(cuOccupancyMaxPotentialBlockSizeWithFlags, occ_potential_flags),
	MPS_IMPL_END
};
