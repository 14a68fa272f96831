// SPDX-License-Identifier: MIT
/*
 * The memory-pool functions that are more than one forwarded call.
 * Allocating from a pool records the pointer as device memory here (so
 * copies route it), and a pool attribute's value is an int or a cuuint64_t
 * by attribute, which the wire carries widened. The rest of the pool API is
 * forwarded by generated code (src/common/forward.def); the server keeps a
 * default pool per client and device (server/ops_pool.c).
 */
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"
#include "client/gen/forward.h"

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s, bool per_thread)
{
	CUresult r = per_thread ? mps__fwd_cuMemAllocFromPoolAsync_ptsz(dptr, size, pool, s)
				: mps__fwd_cuMemAllocFromPoolAsync(dptr, size, pool, s);

	if (r == CUDA_SUCCESS)
		mps__devmem_add(*dptr, size, mps__ctx_cur(), NULL);
	return r;
}

static CUresult mem_alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
	return alloc_from_pool(dptr, size, pool, s, false);
}

static CUresult mem_alloc_from_pool_async_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
	return alloc_from_pool(dptr, size, pool, s, true);
}

/* Whether an attribute's value is a cuuint64_t (else an int); -1: unknown. */
static int attr_wide(CUmemPool_attribute a)
{
	switch (a) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		return 0;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		return 1;
	default:
		return -1;
	}
}

static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute a, void *value, bool set)
{
	struct mps_msg_pool_attr q = { .attr = (uint32_t)a, .set = set };
	int wide = attr_wide(a);
	struct mps_call call;
	uint64_t h;
	uint32_t ctx = 0;
	CUresult r;

	if (!value || wide < 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_h_pool(pool, &h);
	if (r != CUDA_SUCCESS)
		return r;
	q.pool = (uint32_t)h;
	if (set) {
		if (wide)
			memcpy(&q.value, value, sizeof(cuuint64_t));
		else {
			int v;

			memcpy(&v, value, sizeof(v));
			q.value = (uint64_t)(uint32_t)v;
		}
	}
	mps__cur_handle(&ctx);
	r = mps__call(MPS_OP_POOL_ATTR, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && !set) {
		uint64_t v = call.s->val[0];

		if (wide)
			memcpy(value, &v, sizeof(cuuint64_t));
		else {
			int w = (int)(uint32_t)v;

			memcpy(value, &w, sizeof(w));
		}
	}
	mps__call_end(&call);
	return r;
}

static CUresult pool_set_attribute(CUmemoryPool pool, CUmemPool_attribute a, void *value)
{
	return pool_attr(pool, a, value, true);
}

static CUresult pool_get_attribute(CUmemoryPool pool, CUmemPool_attribute a, void *value)
{
	return pool_attr(pool, a, value, false);
}

const struct mps_impl mps__pool_api[] = {
	MPS_IMPL(cuMemAllocFromPoolAsync, mem_alloc_from_pool_async),
	MPS_IMPL_AS(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, mem_alloc_from_pool_async_ptsz),
	MPS_IMPL(cuMemPoolSetAttribute, pool_set_attribute),
	MPS_IMPL(cuMemPoolGetAttribute, pool_get_attribute),
	MPS_IMPL_END
};
