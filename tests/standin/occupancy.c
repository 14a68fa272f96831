// SPDX-License-Identifier: MIT
/*
 * Occupancy: a simple model of one SM, consistent across the calls. An SM
 * holds at most 32 blocks, 64 warps (2048 threads; at 32 registers a thread
 * the register file allows the same) and 228 KiB of shared memory, of which
 * each block also takes 1 KiB reserved by the driver. A block larger than the
 * function allows, or asking for more dynamic shared memory than its
 * MAX_DYNAMIC_SHARED_SIZE_BYTES, fits 0 times.
 */
#include "standin.h"

static int min_int(int a, int b)
{
	return a < b ? a : b;
}

static int warps_of(int threads)
{
	return (threads + 31) / 32;
}

int mps__occupancy(const struct si_function *fn, int block_threads, size_t dyn_smem)
{
	if (block_threads <= 0 || block_threads > (int)fn->entry->max_threads)
		return 0;
	if (dyn_smem > (size_t)fn->attrs->max_dyn_smem)
		return 0;
	return min_int(min_int(32, 64 / warps_of(block_threads)),
		       (int)(SI_SMEM_PER_SM / (dyn_smem + SI_SMEM_RESERVED)));
}

static CUresult occupancy_call(int *numBlocks, CUfunction func, int blockSize, size_t dyn,
			       unsigned flags)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!numBlocks || blockSize <= 0 || (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__function_resolve(func, NULL, &fn);
	if (rc == CUDA_SUCCESS)
		*numBlocks = mps__occupancy(fn, blockSize, dyn);
	mps__unlock();
	return rc;
}

CU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
							    int blockSize, size_t dynamicSMemSize)
{
	return occupancy_call(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

CU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
								     int blockSize, size_t dynamicSMemSize,
								     unsigned int flags)
{
	return occupancy_call(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

CU_API CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
							int numBlocks, int blockSize)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__function_resolve(func, NULL, &fn);
	if (rc == CUDA_SUCCESS) {
		size_t per_block = SI_SMEM_PER_SM / (size_t)numBlocks;

		if (blockSize > (int)fn->entry->max_threads ||
		    numBlocks > min_int(32, 64 / warps_of(blockSize)) || per_block <= SI_SMEM_RESERVED)
			*dynamicSmemSize = 0;
		else if (per_block - SI_SMEM_RESERVED > SI_SMEM_OPTIN)
			*dynamicSmemSize = SI_SMEM_OPTIN;
		else
			*dynamicSmemSize = per_block - SI_SMEM_RESERVED;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
	struct si_function *fn;
	unsigned cluster = 0;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!numClusters || !config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];

		if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			cluster = a->value.clusterDim.x * a->value.clusterDim.y * a->value.clusterDim.z;
	}
	mps__lock();
	rc = mps__function_resolve(func, NULL, &fn);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	if (!cluster)   /* the function's compile-time cluster, if any */
		cluster = (unsigned)(fn->attrs->cluster[0] * (fn->attrs->cluster[1] ? fn->attrs->cluster[1] : 1) *
				     (fn->attrs->cluster[2] ? fn->attrs->cluster[2] : 1));
	if (!cluster || cluster > (fn->attrs->non_portable_cluster ? 16u : 8u)) {
		rc = CUDA_ERROR_INVALID_CLUSTER_SIZE;
		goto out_unlock;
	}
	*numClusters = mps__occupancy(fn, (int)(config->blockDimX * config->blockDimY * config->blockDimZ),
				      config->sharedMemBytes) * SI_SM_COUNT / (int)cluster;
out_unlock:
	mps__unlock();
	return rc;
}
