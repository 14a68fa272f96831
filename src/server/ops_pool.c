// SPDX-License-Identifier: MIT
/*
 * Memory pools. Every client has pools of its own: its default pool of a
 * device is made for it the first time it allocates stream-ordered memory
 * there or asks for the pool, so the release threshold one client sets, the
 * memory one pool keeps cached and a trim reach that client only, and the
 * pool goes with the client. The pools it creates are its objects like any
 * other (objects.h). Every allocation from a pool is charged to the client
 * and recorded in its memory account, exactly as cuMemAlloc's (memacct.h),
 * so the limit holds and what it leaves is freed when it goes.
 *
 * Pools live on devices here: host and host-NUMA locations are refused with
 * CUDA_ERROR_NOT_SUPPORTED, pinned host memory being the server's to give
 * (ops_mem.c). Locations a client names are device ordinals as it numbers
 * them, turned into the server's through mps__fwd_device.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/ipc.h"
#include "server/server.h"
#include "server/streams.h"

static struct mps_sobj *pool_of(struct mps_client *c, CUmemoryPool p)
{
	uint32_t h = mps_obj_find(c, MPS_H_POOL, p);

	return h ? mps_obj_get(c, MPS_H_POOL, h) : NULL;
}

/* The client's default pool of device d, made on first use. */
static struct mps_sobj *default_pool(struct mps_client *c, int d, CUresult *err)
{
	CUmemPoolProps pp = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.handleTypes = CU_MEM_HANDLE_TYPE_NONE,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)mps_srv.dev[d].dev },
	};
	struct mps_sobj *o = c->pool_default[d] ? mps_obj_get(c, MPS_H_POOL, c->pool_default[d]) : NULL;
	CUmemoryPool p;

	if (o)
		return o;
	if (!mps_drv.cuMemPoolCreate || !mps_drv.cuMemPoolDestroy || !mps_drv.cuMemAllocFromPoolAsync) {
		*err = CUDA_ERROR_NOT_SUPPORTED;
		return NULL;
	}
	*err = mps__bind_device(c, d);
	if (*err == CUDA_SUCCESS)
		*err = mps_drv.cuMemPoolCreate(&p, &pp);
	if (*err != CUDA_SUCCESS)
		return NULL;
	o = mps_obj_add(c, MPS_H_POOL, p, d, 0);
	if (!o) {
		mps_drv.cuMemPoolDestroy(p);
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	o->aux = MPS_POOL_DEFAULT;
	c->pool_default[d] = o->handle;
	return o;
}

static struct mps_sobj *current_pool(struct mps_client *c, int d, CUresult *err)
{
	struct mps_sobj *o = c->pool_current[d] ? mps_obj_get(c, MPS_H_POOL, c->pool_current[d]) : NULL;

	return o ? o : default_pool(c, d, err);
}

/* Whether the stream is being captured: an allocation there becomes a node
 * of the graph, which the driver makes only from its own graph pool. */
static bool capturing(struct mps_client *c, struct mps_sstream *st)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;

	return c->captures && mps_drv.cuStreamIsCapturing &&
	       mps_drv.cuStreamIsCapturing(st->s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult mps__pool_alloc(struct mps_client *c, struct mps_sstream *st, struct mps_sobj *pool, uint64_t size,
			 CUdeviceptr *out)
{
	/* The driver's own cuMemAllocAsync while captured, or with no pools. */
	bool graph = !pool && (capturing(c, st) || !mps_drv.cuMemPoolCreate || !mps_drv.cuMemAllocFromPoolAsync);
	int dev = pool ? pool->device : st->ctx->device;
	CUdeviceptr p = 0;
	CUresult r = CUDA_SUCCESS;

	*out = 0;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!pool && !graph && !(pool = current_pool(c, dev, &r)))
		return r;
	if (mps_memacct_charge(&c->mem, dev, size) < 0) {
		mps_log_info("client %d: allocation of %llu bytes refused by its memory limit", (int)c->pid,
			     (unsigned long long)size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = mps__bind_device(c, st->ctx->device);
	if (r == CUDA_SUCCESS)
		r = graph ? mps_drv.cuMemAllocAsync(&p, (size_t)size, st->s)
			  : mps_drv.cuMemAllocFromPoolAsync(&p, (size_t)size, (CUmemoryPool)pool->real, st->s);
	if (r == CUDA_SUCCESS && mps_memacct_add(&c->mem, p, size, MPS_MEM_DEVICE, dev, st->ctx->handle) < 0) {
		mps_drv.cuMemFreeAsync(p, st->s);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r != CUDA_SUCCESS) {
		mps_memacct_uncharge(&c->mem, dev, size);
		return r;
	}
	if (graph)
		c->graph_mem_devs |= 1u << dev;   /* a node of the captured graph (galloc.h) */
	*out = p;
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuMemAllocFromPoolAsync(struct mps_client *c, CUdeviceptr *dptr, size_t bytesize,
					   CUmemoryPool pool, struct mps_sstream *hStream)
{
	struct mps_sobj *o = pool_of(c, pool);
	CUresult r;

	/* As the driver: an imported pool is for imported pointers only. */
	if (!o || o->aux == MPS_POOL_IMPORTED || o->aux == MPS_POOL_IMPORTED_DRIVER)
		return CUDA_ERROR_INVALID_VALUE;
	if (bytesize == 0) {   /* the driver's answer: nothing, successfully */
		*dptr = 0;
		return CUDA_SUCCESS;
	}
	r = mps_stream_before(c, hStream);
	if (r != CUDA_SUCCESS)
		return r;
	return mps__pool_alloc(c, hStream, o, bytesize, dptr);
}

CUresult mps__hook_cuDeviceGetDefaultMemPool(struct mps_client *c, CUmemoryPool *pool_out, CUdevice dev)
{
	int d = mps__device_index(dev);
	struct mps_sobj *o;
	CUresult r = CUDA_ERROR_INVALID_DEVICE;

	if (d < 0 || !(o = default_pool(c, d, &r)))
		return r;
	*pool_out = o->real;
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuDeviceGetMemPool(struct mps_client *c, CUmemoryPool *pool, CUdevice dev)
{
	int d = mps__device_index(dev);
	struct mps_sobj *o;
	CUresult r = CUDA_ERROR_INVALID_DEVICE;

	if (d < 0 || !(o = current_pool(c, d, &r)))
		return r;
	*pool = o->real;
	return CUDA_SUCCESS;
}

/* Makes pool (one of the client's, of device d) its current pool there. */
static CUresult set_current(struct mps_client *c, int d, CUmemoryPool pool)
{
	struct mps_sobj *o = pool_of(c, pool);

	if (!o || o->device != d)
		return CUDA_ERROR_INVALID_VALUE;
	c->pool_current[d] = o->aux == MPS_POOL_DEFAULT ? 0 : o->handle;
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuDeviceSetMemPool(struct mps_client *c, CUdevice dev, CUmemoryPool pool)
{
	int d = mps__device_index(dev);

	return d < 0 ? CUDA_ERROR_INVALID_DEVICE : set_current(c, d, pool);
}

CUresult mps__hook_cuMemGetDefaultMemPool(struct mps_client *c, CUmemoryPool *pool_out, CUmemLocation *loc,
					  CUmemAllocationType type)
{
	struct mps_sobj *o;
	CUresult r;
	int d;

	if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return type == CU_MEM_ALLOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, loc, &d);
	if (r != CUDA_SUCCESS || !(o = default_pool(c, d, &r)))
		return r;
	*pool_out = o->real;
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuMemGetMemPool(struct mps_client *c, CUmemoryPool *pool, CUmemLocation *loc,
				   CUmemAllocationType type)
{
	struct mps_sobj *o;
	CUresult r;
	int d;

	if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return type == CU_MEM_ALLOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, loc, &d);
	if (r != CUDA_SUCCESS || !(o = current_pool(c, d, &r)))
		return r;
	*pool = o->real;
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuMemSetMemPool(struct mps_client *c, CUmemLocation *loc, CUmemAllocationType type,
				   CUmemoryPool pool)
{
	CUresult r;
	int d;

	if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return type == CU_MEM_ALLOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, loc, &d);
	return r != CUDA_SUCCESS ? r : set_current(c, d, pool);
}

CUresult mps__hook_cuMemPoolCreate(struct mps_client *c, CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	CUmemPoolProps pp = *poolProps;
	CUresult r;
	int d;

	if (pp.allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemPoolCreate)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* Shareable handles the server can pass on: file descriptors. */
	if (pp.handleTypes & ~(unsigned int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, &pp.location, &d);
	if (r != CUDA_SUCCESS)
		return r;
	pp.location.id = (int)mps_srv.dev[d].dev;
	pp.win32SecurityAttributes = NULL;   /* a pointer of the client's means nothing here */
	r = mps__bind_device(c, d);   /* the pool's record takes the bound device */
	if (r != CUDA_SUCCESS)
		return r;
	return mps_drv.cuMemPoolCreate(pool, &pp);
}

CUresult mps__hook_cuMemPoolDestroy(struct mps_client *c, CUmemoryPool pool)
{
	struct mps_sobj *o = pool_of(c, pool);

	/* As the driver: a default pool cannot be destroyed. */
	if (!o || o->aux == MPS_POOL_DEFAULT)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemPoolDestroy)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (c->pool_current[o->device] == o->handle)
		c->pool_current[o->device] = 0;
	return mps__pool_release(c, o);
}

CUresult mps__pool_release(struct mps_client *c, struct mps_sobj *o)
{
	CUmemoryPool p = (CUmemoryPool)o->real;

	if (!mps_drv.cuMemPoolDestroy)
		return CUDA_SUCCESS;
	if (o->aux == MPS_POOL_IMPORTED || o->aux == MPS_POOL_IMPORTED_DRIVER) {
		mps_ipc_close_pool(c, p, o->aux == MPS_POOL_IMPORTED);
		return CUDA_SUCCESS;
	}
	if (mps_ipc_orphan_pool(c, p))
		return CUDA_SUCCESS;   /* the last importer destroys it */
	return mps_drv.cuMemPoolDestroy(p);
}

CUresult mps__hook_cuMemPoolSetAccess(struct mps_client *c, CUmemoryPool pool, const CUmemAccessDesc *map,
				      size_t count)
{
	CUmemAccessDesc *v;
	CUresult r;

	if (!mps_drv.cuMemPoolSetAccess)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!count)
		return mps_drv.cuMemPoolSetAccess(pool, map, 0);
	v = mps__fwd_access(c, map, count, &r);
	if (!v)
		return r;
	r = mps_drv.cuMemPoolSetAccess(pool, v, count);
	free(v);
	return r;
}

CUresult mps__hook_cuMemPoolGetAccess(struct mps_client *c, CUmemAccess_flags *flags, CUmemoryPool memPool,
				      CUmemLocation *loc)
{
	CUmemLocation l = *loc;
	CUresult r;
	int d;

	if (!mps_drv.cuMemPoolGetAccess)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, &l, &d);
	if (r != CUDA_SUCCESS)
		return r;
	l.id = (int)mps_srv.dev[d].dev;
	return mps_drv.cuMemPoolGetAccess(flags, memPool, &l);
}

struct trim {
	struct mps_client *c;
	int device;
};

/* Synchronizes the streams of a context of the device that are idle: the
 * driver retires a pool's pending frees at a synchronization, and the
 * client's own synchronizations are answered here without one. */
static void settle_idle(void *obj, void *arg)
{
	struct mps_sctx *x = obj;
	struct trim *t = arg;

	if (x->device != t->device)
		return;
	for (struct mps_sstream *st = x->streams; st; st = st->next)
		if (mps_drv.cuStreamQuery(st->s) == CUDA_SUCCESS)
			mps_drv.cuStreamSynchronize(st->s);
}

CUresult mps__hook_cuMemPoolTrimTo(struct mps_client *c, CUmemoryPool pool, size_t minBytesToKeep)
{
	struct mps_sobj *o = pool_of(c, pool);
	struct trim t = { .c = c };
	CUresult r;

	if (!o)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemPoolTrimTo)
		return CUDA_ERROR_NOT_SUPPORTED;
	t.device = o->device;
	r = mps__bind_device(c, o->device);
	if (r != CUDA_SUCCESS)
		return r;
	mps_handles_foreach(&c->handles, MPS_H_CTX, settle_idle, &t);
	return mps_drv.cuMemPoolTrimTo(pool, minBytesToKeep);
}

/* cuMemPoolGetAttribute / SetAttribute: the value's width is the
 * attribute's (int for the reuse flags, cuuint64_t for the rest). */
void mps__op_pool_attr(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_pool_attr *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sobj *o = mps_obj_get(c, MPS_H_POOL, q->pool);
	union {
		int i;
		cuuint64_t u;
	} v = { 0 };
	bool wide;
	CUresult r;

	if (!o) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	switch (q->attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		wide = false;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		wide = true;
		break;
	default:
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (!mps_drv.cuMemPoolSetAttribute || !mps_drv.cuMemPoolGetAttribute) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	if (q->set) {
		if (wide)
			v.u = q->value;
		else
			v.i = (int)q->value;
	}
	r = mps__bind_device(c, o->device);
	if (r == CUDA_SUCCESS)
		r = q->set ? mps_drv.cuMemPoolSetAttribute((CUmemoryPool)o->real, (CUmemPool_attribute)q->attr, &v)
			   : mps_drv.cuMemPoolGetAttribute((CUmemoryPool)o->real, (CUmemPool_attribute)q->attr, &v);
	s->val[0] = wide ? v.u : (uint64_t)(uint32_t)v.i;
	mps__reply(c, m->slot, r);
}
