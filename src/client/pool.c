// SPDX-License-Identifier: MIT
/*
 * The memory-pool functions that are more than one forwarded call.
 * Allocating from a pool records the pointer as device memory here (so
 * copies route it), and a pool attribute's value is an int or a cuuint64_t
 * by attribute, which the wire carries widened. The rest of the pool API is
 * forwarded by generated code (src/common/forward.def); the server keeps a
 * default pool per client and device (server/ops_pool.c).
 *
 * Sharing: a pool's file descriptor travels over the socket (one transfer
 * at a time, mps_conn.fd_lock), from the server on export and to it on
 * import; a pointer's export data is the server's 64 bytes (server/ipc.h).
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

static CUresult pool_call(uint16_t op, void *q, size_t len, uint64_t *v, void *data, size_t data_len)
{
	struct mps_call call;
	uint32_t ctx = 0;
	CUresult r;

	mps__cur_handle(&ctx);
	r = mps__call(op, ctx, q, (uint32_t)len, NULL, 0, &call);
	if (r == CUDA_SUCCESS && v)
		memcpy(v, call.s->val, 2 * sizeof(uint64_t));
	if (r == CUDA_SUCCESS && data)
		memcpy(data, call.s->data, data_len);
	mps__call_end(&call);
	return r;
}

static CUresult pool_export(void *handle_out, CUmemoryPool pool, CUmemAllocationHandleType type,
			    unsigned long long flags)
{
	struct mps_msg_vmm q = { .type = (uint32_t)type, .flags = flags };
	uint64_t h;
	CUresult r = mps__fwd_h_pool(pool, &h);

	if (r != CUDA_SUCCESS)
		return r;
	q.handle = (uint32_t)h;
	return mps__fd_export(MPS_OP_POOL_EXPORT, &q, handle_out);
}

static CUresult pool_import(CUmemoryPool *pool_out, void *handle, CUmemAllocationHandleType type,
			    unsigned long long flags)
{
	struct mps_msg_vmm q = { .type = (uint32_t)type, .flags = flags };
	uint64_t h = 0;
	CUresult r;

	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fd_import(MPS_OP_POOL_IMPORT, &q, handle, &h);
	if (r == CUDA_SUCCESS)
		r = mps__fwd_obj(MPS_H_POOL, (uint32_t)h, 0, (void **)pool_out);
	return r;
}

static CUresult pool_export_pointer(CUmemPoolPtrExportData *out, CUdeviceptr ptr)
{
	struct mps_msg_ipc q = { .ptr = ptr };

	_Static_assert(sizeof(*out) == MPS_IPC_HANDLE_SIZE, "export data travels as a handle's bytes");
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	mps__devmem_share(ptr);
	return pool_call(MPS_OP_POOL_EXPORT_PTR, &q, sizeof(q), NULL, out, sizeof(*out));
}

static CUresult pool_import_pointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *data)
{
	struct mps_msg_ipc q = { 0 };
	uint64_t h, v[2];
	CUresult r;

	if (!ptr_out || !data)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__fwd_h_pool(pool, &h);
	if (r != CUDA_SUCCESS)
		return r;
	q.event = (uint32_t)h;
	memcpy(q.bytes, data, sizeof(*data));
	r = pool_call(MPS_OP_POOL_IMPORT_PTR, &q, sizeof(q), v, NULL, 0);
	if (r == CUDA_SUCCESS) {
		*ptr_out = (CUdeviceptr)v[0];
		mps__devmem_add(v[0], v[1], mps__ctx_cur(), NULL);
		mps__devmem_share(v[0]);
	}
	return r;
}

const struct mps_impl mps__pool_api[] = {
	MPS_IMPL(cuMemPoolExportToShareableHandle, pool_export),
	MPS_IMPL(cuMemPoolImportFromShareableHandle, pool_import),
	MPS_IMPL(cuMemPoolExportPointer, pool_export_pointer),
	MPS_IMPL(cuMemPoolImportPointer, pool_import_pointer),
	MPS_IMPL(cuMemAllocFromPoolAsync, mem_alloc_from_pool_async),
	MPS_IMPL_AS(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, mem_alloc_from_pool_async_ptsz),
	MPS_IMPL(cuMemPoolSetAttribute, pool_set_attribute),
	MPS_IMPL(cuMemPoolGetAttribute, pool_get_attribute),
	MPS_IMPL_END
};
