// SPDX-License-Identifier: MIT
/*
 * Memory pools: each device's default pool (made on first use) and current
 * pool, created pools, stream-ordered allocation from them and its free,
 * attributes, access and trimming.
 *
 * An allocation from a pool is device memory like cuMemAlloc's (ranges.c),
 * remembering its pool. A pool's bookkeeping follows the driver's numbers:
 * used memory is what is allocated from it; reserved memory is what it
 * holds, which grows with use and, when memory is freed, keeps up to the
 * release threshold beyond what is used (the driver releases the rest at
 * the next synchronization; here at once), and falls to what is used (or
 * the minimum asked) when trimmed. The bytes themselves are freed at once:
 * the stand-in keeps no cache, only the driver's account of one. A
 * destroyed pool leaves the registry; its record goes with its last
 * allocation. A pool made with the POSIX handle type exports a memfd that
 * names it, and its allocations export data that names them; both can be
 * imported only in this process.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "standin.h"

struct si_pool {
	uintptr_t handle;
	int device;
	bool is_default;
	bool destroyed;
	unsigned handle_types;
	size_t max;                 /* 0: no limit */
	int reuse[3];               /* the three CU_MEMPOOL_ATTR_REUSE_* flags */
	uint64_t threshold;
	uint64_t used, used_high, reserved, reserved_high;
	uint32_t access;            /* bit d: device d may read and write */
	unsigned outstanding;       /* allocations not yet freed */
};

static struct si_pool *default_pool[SI_MAX_DEVICES];
static struct si_pool *current_pool[SI_MAX_DEVICES];

uintptr_t mps__pool_handle(const struct si_pool *p)
{
	return p ? p->handle : 0;
}

static struct si_pool *pool_new(int device, bool is_default)
{
	struct si_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->device = device;
	p->is_default = is_default;
	p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
	p->access = 1u << device;
	p->handle = mps__handle_add(SI_H_POOL, p);
	if (!p->handle) {
		free(p);
		return NULL;
	}
	return p;
}

/* The device's default pool, made on first use. Under the lock. */
static struct si_pool *default_of(int device)
{
	if (!default_pool[device])
		default_pool[device] = pool_new(device, true);
	return default_pool[device];
}

static struct si_pool *current_of(int device)
{
	return current_pool[device] ? current_pool[device] : default_of(device);
}

static struct si_pool *pool_arg(CUmemoryPool pool)
{
	return mps__handle_get((uintptr_t)pool, SI_H_POOL);
}

static void pool_put(struct si_pool *p)
{
	if (p->destroyed && !p->outstanding)
		free(p);
}

/* ---- the device's pools ---------------------------------------------------- */

static CUresult device_pool(CUmemoryPool *out, CUdevice dev, bool current)
{
	struct si_pool *p;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	p = current ? current_of(dev) : default_of(dev);
	if (p)
		*out = (CUmemoryPool)p->handle;
	mps__unlock();
	return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CU_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	return device_pool(pool_out, dev, false);
}

CU_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return device_pool(pool, dev, true);
}

CU_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!mps__device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	p = pool_arg(pool);
	if (!p || p->device != dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		current_pool[dev] = p;
	mps__unlock();
	return rc;
}

static CUresult location_device(const CUmemLocation *loc, CUmemAllocationType type, CUdevice *dev)
{
	if (!loc || type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED;
	*dev = loc->id;
	return CUDA_SUCCESS;
}

CU_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
	CUdevice dev;
	CUresult rc = location_device(location, type, &dev);

	return rc != CUDA_SUCCESS ? rc : device_pool(pool_out, dev, false);
}

CU_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
	CUdevice dev;
	CUresult rc = location_device(location, type, &dev);

	return rc != CUDA_SUCCESS ? rc : device_pool(pool, dev, true);
}

CU_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
	CUdevice dev;
	CUresult rc = location_device(location, type, &dev);

	return rc != CUDA_SUCCESS ? rc : cuDeviceSetMemPool(dev, pool);
}

/* ---- created pools -------------------------------------------------------- */

CU_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	struct si_pool *p;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!mps__device(poolProps->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	if (poolProps->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	mps__lock();
	p = pool_new(poolProps->location.id, false);
	if (p) {
		p->handle_types = poolProps->handleTypes;
		p->max = poolProps->maxSize;
		*pool = (CUmemoryPool)p->handle;
	}
	mps__unlock();
	return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CU_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	p = pool_arg(pool);
	if (!p || p->is_default) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		if (current_pool[p->device] == p)
			current_pool[p->device] = NULL;
		mps__handle_remove(p->handle);
		p->destroyed = true;
		pool_put(p);
	}
	mps__unlock();
	return rc;
}

/* ---- allocation ------------------------------------------------------------ */

/* Under the lock. */
static CUresult stream_ok(CUstream s)
{
	if (mps__stream_is_legacy(s) || s == CU_STREAM_PER_THREAD)
		return CUDA_SUCCESS;
	return mps__handle_get((uintptr_t)s, SI_H_STREAM) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Allocates from p (NULL: the current pool of the current context's device). */
static CUresult pool_alloc(CUdeviceptr *dptr, size_t bytes, struct si_pool *p, CUstream s)
{
	struct si_context *ctx;
	struct si_stream *st = NULL;
	struct si_range *r;
	CUresult rc;

	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = stream_ok(s);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!p && mps__stream_enter(s, &ctx, &st) == CUDA_SUCCESS && st && st->cap) {
		/* Captured: a node of the graph, its memory the graph's. */
		rc = mps__range_alloc(ctx, bytes, SI_RANGE_DEVICE, &r);
		if (rc != CUDA_SUCCESS)
			return rc;
		r->graph = true;
		r->graph_refs = 1;
		rc = mps__capture_mem(st, CU_GRAPH_NODE_TYPE_MEM_ALLOC, (CUdeviceptr)r->base, bytes);
		if (rc != CUDA_SUCCESS) {
			mps__range_remove(r);
			return rc;
		}
		*dptr = (CUdeviceptr)r->base;
		return CUDA_SUCCESS;
	}
	if (!p && !(p = current_of(ctx->device)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (p->max && p->used + bytes > p->max)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = mps__range_alloc(ctx, bytes, SI_RANGE_DEVICE, &r);
	if (rc != CUDA_SUCCESS)
		return rc;
	r->pool = p;
	p->outstanding++;
	p->used += bytes;
	if (p->used > p->used_high)
		p->used_high = p->used;
	if (p->used > p->reserved)
		p->reserved = p->used;
	if (p->reserved > p->reserved_high)
		p->reserved_high = p->reserved;
	*dptr = (CUdeviceptr)r->base;
	return CUDA_SUCCESS;
}

CU_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = pool_alloc(dptr, bytesize, NULL, hStream);
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	struct si_pool *p;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg(pool);
	if (!p)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (!bytesize)
		rc = (*dptr = 0, CUDA_SUCCESS);   /* nothing asked, nothing given: the driver's answer */
	else
		rc = pool_alloc(dptr, bytesize, p, hStream);
	mps__unlock();
	return rc;
}

/* Freed once the work submitted before the free has run (cuMemFree's own
 * wait), after checking that the stream is one: the stand-in's simplest
 * correct form of a stream-ordered free. */
CU_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	struct si_context *ctx;
	struct si_stream *st = NULL;
	struct si_range *r;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = stream_ok(hStream);
	if (rc == CUDA_SUCCESS && mps__stream_enter(hStream, &ctx, &st) == CUDA_SUCCESS && st && st->cap) {
		/* Captured: a free node, of graph memory only. */
		r = mps__range_find((uintptr_t)dptr);
		rc = r && r->base == (uintptr_t)dptr && r->graph
			     ? mps__capture_mem(st, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr, 0)
			     : CUDA_ERROR_INVALID_VALUE;
		mps__unlock();
		return rc;
	}
	mps__unlock();
	return rc == CUDA_SUCCESS ? cuMemFree_v2(dptr) : rc;
}

void mps__pool_freed(struct si_range *r)
{
	struct si_pool *p = r->pool;

	if (!p)
		return;
	r->pool = NULL;
	p->used -= r->size;
	if (p->reserved > p->used + p->threshold)
		p->reserved = p->used + p->threshold;
	p->outstanding--;
	pool_put(p);
}

/* ---- attributes, access, trim --------------------------------------------- */

CU_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;
	uint64_t v = 0;
	int i = 0;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg(pool);
	if (!p) {
		mps__unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		memcpy(&i, value, sizeof(i));
		p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = i != 0;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		memcpy(&v, value, sizeof(v));
		p->threshold = v;
		if (p->reserved > p->used + v)
			p->reserved = p->used + v;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		/* High-water marks may only be reset, to zero (then: the current value). */
		memcpy(&v, value, sizeof(v));
		if (v)
			rc = CUDA_ERROR_INVALID_VALUE;
		else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
			p->used_high = p->used;
		else
			p->reserved_high = p->reserved;
		break;
	default:   /* the current values are read-only */
		rc = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;
	uint64_t v = 0;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg(pool);
	if (!p) {
		mps__unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		memcpy(value, &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES], sizeof(int));
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	if (rc == CUDA_SUCCESS && attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
		memcpy(value, &v, sizeof(v));
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	p = pool_arg(pool);
	if (!p)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (p->reserved > p->used && p->reserved > minBytesToKeep)
		p->reserved = p->used > minBytesToKeep ? p->used : minBytesToKeep;
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (count && !map)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg(pool);
	if (!p)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
		int d = map[i].location.id;

		if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !mps__device(d))
			rc = CUDA_ERROR_INVALID_DEVICE;
		else if (d == p->device && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			rc = CUDA_ERROR_INVALID_DEVICE;   /* its own device keeps full access */
	}
	for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++) {
		uint32_t bit = 1u << map[i].location.id;

		p->access = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? p->access & ~bit : p->access | bit;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
	struct si_pool *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!flags || !location)
		return CUDA_ERROR_INVALID_VALUE;
	if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !mps__device(location->id))
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	p = pool_arg(memPool);
	if (!p)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*flags = (p->access >> location->id) & 1 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
							 : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	mps__unlock();
	return rc;
}

/* ---- sharing ----------------------------------------------------------------- */

#define EXPORT_MAGIC 0x6c6f6f5069737ull   /* in a pool's fd and a pointer's export data */

/* A pool's file descriptor: a memfd holding the magic and the pool's
 * handle, which only this process can name. */
CU_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
						 CUmemAllocationHandleType handleType, unsigned long long flags)
{
	uint64_t rec[2] = { EXPORT_MAGIC, 0 };
	struct si_pool *p;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	int fd;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle_out || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg(pool);
	if (p && (p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		rec[1] = p->handle;
		fd = memfd_create("standin-pool", MFD_CLOEXEC);
		rc = CUDA_ERROR_OPERATING_SYSTEM;
		if (fd >= 0 && pwrite(fd, rec, sizeof(rec), 0) == sizeof(rec)) {
			*(int *)handle_out = fd;
			rc = CUDA_SUCCESS;
		} else if (fd >= 0) {
			close(fd);
		}
	}
	mps__unlock();
	return rc;
}

/* Only this process's own pools can be named by an fd here. */
CU_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
						   CUmemAllocationHandleType handleType, unsigned long long flags)
{
	uint64_t rec[2];
	struct si_pool *p;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool_out || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	if (pread((int)(uintptr_t)handle, rec, sizeof(rec), 0) != sizeof(rec) || rec[0] != EXPORT_MAGIC)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = pool_arg((CUmemoryPool)(uintptr_t)rec[1]);
	if (p) {
		*pool_out = (CUmemoryPool)p->handle;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	uint64_t rec[3] = { EXPORT_MAGIC, 0, ptr };
	struct si_range *r;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!shareData_out)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	r = mps__range_find((uintptr_t)ptr);
	if (r && r->base == (uintptr_t)ptr && r->pool && (r->pool->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		rec[1] = r->pool->handle;
		memset(shareData_out, 0, sizeof(*shareData_out));
		memcpy(shareData_out->reserved, rec, sizeof(rec));
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData)
{
	uint64_t rec[3];
	struct si_range *r;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr_out || !shareData)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(rec, shareData->reserved, sizeof(rec));
	mps__lock();
	r = mps__range_find((uintptr_t)rec[2]);
	if (rec[0] == EXPORT_MAGIC && rec[1] == (uintptr_t)pool && r && r->pool && r->pool->handle == rec[1]) {
		*ptr_out = rec[2];
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}
