// SPDX-License-Identifier: MIT
/*
 * Kernel launches: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel.
 *
 * A launch is checked as the real driver checks it — grid and block
 * dimensions, threads per block, dynamic shared memory against the
 * function's limit, cluster shape, cooperative grid size — and its argument
 * bytes are copied at enqueue, from kernelParams (one pointer per parameter,
 * sizes from the PTX signature) or from the `extra` buffer, so the caller may
 * reuse them at once. The kernel then runs as an operation of the stream
 * through the entry's C twin; an entry without one cannot be launched
 * (CUDA_ERROR_NOT_SUPPORTED).
 *
 * Launch attributes of cuLaunchKernelEx that only tune scheduling are
 * accepted and ignored; completion events are recorded after the kernel,
 * which is later than the real driver may fire them but never earlier.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

/* Launch attribute ids newer than the oldest headers we build against. */
#define ATTR_PREFERRED_CLUSTER_DIMENSION        11
#define ATTR_DEVICE_UPDATABLE_KERNEL_NODE       13
#define ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT   14
#define ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING     16

struct launch {
	CUfunction f;
	unsigned grid[3], block[3];
	unsigned smem;
	CUstream stream;
	void **params;
	void **extra;
	bool cooperative;
	unsigned cluster[3];            /* 0: none asked for */
	CUevent events[4];              /* recorded once the kernel completes */
	unsigned nevents;
};

/* Copies the argument bytes into a buffer laid out as the PTX declares them. */
static CUresult pack_params(const struct si_entry *e, void **kp, void **extra, unsigned char **out)
{
	unsigned char *buf;

	if (kp && extra)
		return CUDA_ERROR_INVALID_VALUE;
	buf = calloc(1, e->param_bytes + 1);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (extra) {
		void *ptr = NULL;
		size_t *size = NULL, limit;
		unsigned i = 0;

		/* { BUFFER_POINTER, p, BUFFER_SIZE, &n, END } in any order;
		 * bounded in case the list has no END. */
		while (i < 16 && extra[i] != CU_LAUNCH_PARAM_END) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				ptr = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				size = extra[i + 1];
			else
				goto out_invalid;
			i += 2;
		}
		if (i >= 16 || (e->param_bytes && (!ptr || !size)))
			goto out_invalid;
		/* Exactly the parameters, or padded to the largest alignment
		 * as a C struct holding them would be. */
		limit = (e->param_bytes + e->param_align - 1) & ~(e->param_align - 1);
		if (size && (*size < e->param_bytes || *size > limit))
			goto out_invalid;
		if (e->param_bytes)
			memcpy(buf, ptr, e->param_bytes);
	} else if (e->nparams) {
		if (!kp)
			goto out_invalid;
		for (unsigned i = 0; i < e->nparams; i++) {
			if (!kp[i])
				goto out_invalid;
			memcpy(buf + e->params[i].offset, kp[i], e->params[i].size);
		}
	}
	*out = buf;
	return CUDA_SUCCESS;

out_invalid:
	free(buf);
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult check_geometry(const struct launch *L, const struct si_function *fn)
{
	static const unsigned grid_max[3] = { 0x7fffffff, 65535, 65535 };
	static const unsigned block_max[3] = { 1024, 1024, 64 };
	uint64_t threads = 1;

	for (int i = 0; i < 3; i++) {
		if (!L->grid[i] || L->grid[i] > grid_max[i] || !L->block[i] || L->block[i] > block_max[i])
			return CUDA_ERROR_INVALID_VALUE;
		threads *= L->block[i];
	}
	if (threads > fn->entry->max_threads)
		return CUDA_ERROR_INVALID_VALUE;
	if (L->smem > (unsigned)fn->attrs->max_dyn_smem)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult check_cluster(const struct launch *L, const struct si_function *fn)
{
	unsigned c[3], size = 1;

	for (int i = 0; i < 3; i++) {
		c[i] = L->cluster[0] ? L->cluster[i] : (unsigned)fn->attrs->cluster[i];
		if (!c[i] && (L->cluster[0] || fn->attrs->cluster[0]))
			c[i] = 1;
	}
	if (!c[0])
		return CUDA_SUCCESS;    /* no clusters */
	for (int i = 0; i < 3; i++) {
		if (L->grid[i] % c[i])
			return CUDA_ERROR_INVALID_CLUSTER_SIZE;
		size *= c[i];
	}
	if (size > (fn->attrs->non_portable_cluster ? 16u : 8u))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	return CUDA_SUCCESS;
}

CUresult mps__kernel_op(struct si_function *fn, const unsigned grid[3], const unsigned block[3], unsigned smem,
			void **params, void **extra, struct si_op **out)
{
	struct launch L = { .smem = smem, .params = params, .extra = extra };
	unsigned char *packed;
	struct si_op *op;
	CUresult rc;

	memcpy(L.grid, grid, sizeof(L.grid));
	memcpy(L.block, block, sizeof(L.block));
	rc = check_geometry(&L, fn);
	if (rc == CUDA_SUCCESS)
		rc = check_cluster(&L, fn);
	if (rc == CUDA_SUCCESS && !fn->twin)
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS)
		rc = pack_params(fn->entry, params, extra, &packed);
	if (rc != CUDA_SUCCESS)
		return rc;
	op = mps__op_new(SI_OP_KERNEL);
	if (!op) {
		free(packed);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->kernel.twin = fn->twin;
	op->kernel.mod = fn->mod;
	fn->mod->refs++;
	op->kernel.entry = fn->entry;
	op->kernel.params = packed;
	memcpy(op->kernel.grid, grid, sizeof(op->kernel.grid));
	memcpy(op->kernel.block, block, sizeof(op->kernel.block));
	*out = op;
	return CUDA_SUCCESS;
}

static CUresult launch(const struct launch *L)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_function *fn;
	struct si_op *op;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__stream_enter(L->stream, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	/* A CUkernel resolves to its function in the stream's context. */
	rc = mps__function_resolve(L->f, ctx, &fn);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	rc = CUDA_ERROR_INVALID_HANDLE;
	if (fn->mod->ctx != ctx)
		goto out_unlock;
	rc = check_geometry(L, fn);
	if (rc == CUDA_SUCCESS)
		rc = check_cluster(L, fn);   /* with the launch's own cluster shape */
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	if (L->cooperative) {
		uint64_t blocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
		int per_sm = mps__occupancy(fn, (int)(L->block[0] * L->block[1] * L->block[2]), L->smem);

		rc = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
		if (blocks > (uint64_t)per_sm * SI_SM_COUNT)
			goto out_unlock;
	}
	for (unsigned i = 0; i < L->nevents; i++) {
		rc = mps__event_check(L->events[i], ctx);
		if (rc != CUDA_SUCCESS)
			goto out_unlock;
	}
	rc = mps__kernel_op(fn, L->grid, L->block, L->smem, L->params, L->extra, &op);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	mps__submit(s, op);
	for (unsigned i = 0; rc == CUDA_SUCCESS && i < L->nevents; i++)
		rc = mps__event_record(ctx, s, L->events[i]);
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			       void **kernelParams, void **extra)
{
	struct launch L = {
		.f = f,
		.grid = { gridDimX, gridDimY, gridDimZ },
		.block = { blockDimX, blockDimY, blockDimZ },
		.smem = sharedMemBytes,
		.stream = hStream,
		.params = kernelParams,
		.extra = extra,
	};

	return launch(&L);
}

CU_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					  unsigned int gridDimZ, unsigned int blockDimX,
					  unsigned int blockDimY, unsigned int blockDimZ,
					  unsigned int sharedMemBytes, CUstream hStream,
					  void **kernelParams)
{
	struct launch L = {
		.f = f,
		.grid = { gridDimX, gridDimY, gridDimZ },
		.block = { blockDimX, blockDimY, blockDimZ },
		.smem = sharedMemBytes,
		.stream = hStream,
		.params = kernelParams,
		.cooperative = true,
	};

	return launch(&L);
}

static CUresult read_attributes(const CUlaunchConfig *config, struct launch *L)
{
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];

		switch ((int)a->id) {
		case CU_LAUNCH_ATTRIBUTE_IGNORE:
		case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
		case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
		case CU_LAUNCH_ATTRIBUTE_PRIORITY:
		case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
		case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
		case ATTR_PREFERRED_CLUSTER_DIMENSION:
		case ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT:
		case ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING:
			break;  /* scheduling hints: a stream runs one kernel at a time anyway */
		case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
			L->cooperative = a->value.cooperative != 0;
			break;
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
			L->cluster[0] = a->value.clusterDim.x;
			L->cluster[1] = a->value.clusterDim.y;
			L->cluster[2] = a->value.clusterDim.z;
			if (!L->cluster[0] || !L->cluster[1] || !L->cluster[2])
				return CUDA_ERROR_INVALID_CLUSTER_SIZE;
			break;
		case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
			if (L->nevents == 4)
				return CUDA_ERROR_INVALID_VALUE;
			L->events[L->nevents++] = a->value.programmaticEvent.event;
			break;
		case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
			if (L->nevents == 4)
				return CUDA_ERROR_INVALID_VALUE;
			L->events[L->nevents++] = a->value.launchCompletionEvent.event;
			break;
		case ATTR_DEVICE_UPDATABLE_KERNEL_NODE:    /* graphs only */
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return CUDA_SUCCESS;
}

CU_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				 void **extra)
{
	struct launch L = { .f = f, .params = kernelParams, .extra = extra };
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	L.grid[0] = config->gridDimX;
	L.grid[1] = config->gridDimY;
	L.grid[2] = config->gridDimZ;
	L.block[0] = config->blockDimX;
	L.block[1] = config->blockDimY;
	L.block[2] = config->blockDimZ;
	L.smem = config->sharedMemBytes;
	L.stream = config->hStream;
	rc = read_attributes(config, &L);
	if (rc != CUDA_SUCCESS)
		return rc;
	return launch(&L);
}
