// SPDX-License-Identifier: MIT
/*
 * Contexts as the program sees them. Each thread has its own stack of
 * current contexts (cuCtxPush/Pop/SetCurrent), kept here in thread-local
 * storage; the server only hears about a context when it is created or
 * destroyed, and every message carries the context it is made in.
 *
 * A device's primary context is one struct for the life of the process (the
 * handle cuDevicePrimaryCtxRetain returns never changes). On the server it
 * exists while it is active: the first retain (or first use) creates it,
 * release to zero or reset destroys it and everything made in it, and the
 * next use creates it afresh, as the real driver does.
 */
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>
#include <cudaProfiler.h>

#include "client/api.h"
#include "client/client.h"
#include "client/exports/exports.h"
#include "common/atomics.h"

#define STACK_MAX 64

static __thread struct mps_ctx *stack[STACK_MAX];
static __thread int depth;

/* Primary contexts and the list of created ones; held across create and
 * destroy calls, and recursive because destroying runs context-local-storage
 * destructors, which may call back into the library. */
static pthread_mutex_t ctx_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct mps_ctx primary[MPS_MAX_DEVICES];
static struct mps_ctx *created;   /* contexts made by cuCtxCreate, under ctx_lock */

void *mps__obj(const void *h, uint32_t magic)
{
	/* The special stream handles and NULL are small numbers, never objects. */
	if ((uintptr_t)h < 4096 || *(const uint32_t *)h != magic)
		return NULL;
	return (void *)h;
}

struct mps_ctx *mps__ctx_cur(void)
{
	return depth ? stack[depth - 1] : NULL;
}

static struct mps_ctx *primary_of(CUdevice dev)
{
	struct mps_ctx *p;

	if (dev < 0 || dev >= mps_conn.ndev)
		return NULL;
	p = &primary[dev];
	if (!mps_load_acquire(&p->magic)) {
		pthread_mutex_lock(&ctx_lock);
		if (!p->magic) {
			p->device = dev;
			p->primary = true;
			p->api_version = 3020;
			mps_store_release(&p->magic, MPS_MAGIC_CTX);
		}
		pthread_mutex_unlock(&ctx_lock);
	}
	return p;
}

static CUresult server_create(struct mps_ctx *ctx)
{
	struct mps_msg_ctx_create q = { .device = ctx->device, .flags = ctx->flags };
	struct mps_call call;
	CUresult r;

	q.hdr.flags = ctx->primary ? MPS_CTX_PRIMARY : 0;
	mps_store_relaxed(&ctx->limits_set, 0);   /* a new context on the server has set none */
	r = mps__call(MPS_OP_CTX_CREATE, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS)
		mps_store_release(&ctx->handle, (uint32_t)call.s->val[0]);
	mps__call_end(&call);
	return r;
}

/* Destroys ctx on the server and forgets what the client kept for it. */
static CUresult server_destroy(struct mps_ctx *ctx)
{
	uint32_t h = ctx->handle;
	CUresult r;

	if (!h)
		return CUDA_SUCCESS;
	mps__devout_take(0, h);   /* the driver empties its printf buffer when a context ends */
	mps__cls_context_destroyed((CUcontext)ctx);
	r = mps__call_handle(MPS_OP_CTX_DESTROY, h, 0);
	mps_store_release(&ctx->handle, 0);
	mps__ctx_forget(ctx);
	return r;
}

CUresult mps__ctx_handle(struct mps_ctx *ctx, uint32_t *handle)
{
	CUresult r = CUDA_SUCCESS;

	*handle = mps_load_acquire(&ctx->handle);
	if (*handle)
		return CUDA_SUCCESS;
	if (!ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&ctx_lock);
	if (!ctx->handle)
		r = server_create(ctx);
	*handle = ctx->handle;
	pthread_mutex_unlock(&ctx_lock);
	return r;
}

struct mps_ctx *mps__ctx_by_handle(uint32_t handle)
{
	struct mps_ctx *found = NULL;

	if (!handle)
		return NULL;
	pthread_mutex_lock(&ctx_lock);
	for (int i = 0; i < MPS_MAX_DEVICES && !found; i++)
		if (primary[i].magic && primary[i].handle == handle)
			found = &primary[i];
	for (struct mps_ctx *c = created; c && !found; c = c->next)
		if (c->handle == handle)
			found = c;
	pthread_mutex_unlock(&ctx_lock);
	return found;
}

void mps__ctx_forget(struct mps_ctx *ctx)
{
	mps__devmem_forget(ctx, NULL);
	mps__per_thread_forget(ctx);
}

CUresult mps__cur_handle(uint32_t *handle)
{
	struct mps_ctx *ctx = mps__ctx_cur();

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	return mps__ctx_handle(ctx, handle);
}

static struct mps_ctx *ctx_arg(CUcontext c)
{
	return mps__obj(c, MPS_MAGIC_CTX);
}

static CUresult create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct mps_ctx *ctx;
	CUresult r;
	int n;

	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	r = cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS)
		return r;
	if (dev < 0 || dev >= n)
		return CUDA_ERROR_INVALID_DEVICE;
	if (depth >= STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx->device = dev;
	ctx->flags = flags;
	ctx->api_version = 3020;
	r = server_create(ctx);
	if (r != CUDA_SUCCESS) {
		free(ctx);
		return r;
	}
	ctx->magic = MPS_MAGIC_CTX;
	pthread_mutex_lock(&ctx_lock);
	ctx->next = created;
	created = ctx;
	pthread_mutex_unlock(&ctx_lock);
	stack[depth++] = ctx;   /* a new context is pushed current */
	*pctx = (CUcontext)ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_create_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return create(pctx, flags, dev);
}

static CUresult ctx_create_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
			      CUdevice dev)
{
	if (n < 0 || (n > 0 && !params))
		return CUDA_ERROR_INVALID_VALUE;
	if (n > 0) {
		mps__unsupported("cuCtxCreate_v3 (execution affinity)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return create(pctx, flags, dev);
}

static CUresult ctx_create_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	if (params && (params->numExecAffinityParams > 0 || params->cigParams)) {
		mps__unsupported("cuCtxCreate_v4 (affinity or CIG parameters)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext c)
{
	struct mps_ctx *ctx = ctx_arg(c);
	CUresult r;
	int j = 0;

	if (!ctx || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&ctx_lock);
	for (struct mps_ctx **pp = &created; *pp; pp = &(*pp)->next) {
		if (*pp == ctx) {
			*pp = ctx->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx_lock);
	r = server_destroy(ctx);
	/* Take it off this thread's stack wherever it is. */

	for (int i = 0; i < depth; i++)
		if (stack[i] != ctx)
			stack[j++] = stack[i];
	depth = j;
	ctx->magic = MPS_MAGIC_DEAD;
	free(ctx);
	return r;
}

static CUresult ctx_set_current(CUcontext c)
{
	struct mps_ctx *ctx = NULL;

	if (c && !(ctx = ctx_arg(c)))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth == 0) {
		if (ctx)
			stack[depth++] = ctx;
	} else if (ctx) {
		stack[depth - 1] = ctx;
	} else {
		depth--;
	}
	return CUDA_SUCCESS;
}

static CUresult ctx_get_current(CUcontext *pc)
{
	if (!pc)
		return CUDA_ERROR_INVALID_VALUE;
	*pc = (CUcontext)mps__ctx_cur();
	return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext c)
{
	struct mps_ctx *ctx = ctx_arg(c);

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (depth >= STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	stack[depth++] = ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pc)
{
	if (depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	depth--;
	if (pc)
		*pc = (CUcontext)stack[depth];
	return CUDA_SUCCESS;
}

static CUresult ctx_get_device(CUdevice *dev)
{
	struct mps_ctx *ctx = mps__ctx_cur();

	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = ctx->device;
	return CUDA_SUCCESS;
}

static CUresult ctx_get_device_v2(CUdevice *dev, CUcontext c)
{
	struct mps_ctx *ctx = c ? ctx_arg(c) : mps__ctx_cur();

	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = ctx->device;
	return CUDA_SUCCESS;
}

static CUresult sync_ctx(struct mps_ctx *ctx)
{
	uint32_t h;
	CUresult r;

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__ctx_handle(ctx, &h);
	if (r == CUDA_SUCCESS)
		r = mps__call_handle(MPS_OP_CTX_SYNC, h, 0);
	if (r == CUDA_SUCCESS)
		mps__devout_take(0, h);
	return r == CUDA_SUCCESS ? mps__waited(0, h) : r;
}

static CUresult ctx_synchronize(void)
{
	return sync_ctx(mps__ctx_cur());
}

static CUresult ctx_synchronize_v2(CUcontext c)
{
	return sync_ctx(c ? ctx_arg(c) : mps__ctx_cur());
}

/* Profiling ranges: the work runs in the server's context, where a profiler
 * attached to this process cannot see it, so the range marks are accepted and
 * change nothing. Programs that bracket their hot loop with them keep running. */
static CUresult profiler_mark(void)
{
	return mps__ctx_cur() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult ctx_get_flags(unsigned int *flags)
{
	struct mps_ctx *ctx = mps__ctx_cur();

	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*flags = ctx->flags;
	return CUDA_SUCCESS;
}

static CUresult ctx_set_flags(unsigned int flags)
{
	struct mps_ctx *ctx = mps__ctx_cur();

	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx->flags = flags;
	return CUDA_SUCCESS;
}

static CUresult ctx_get_api_version(CUcontext c, unsigned int *v)
{
	struct mps_ctx *ctx = c ? ctx_arg(c) : mps__ctx_cur();

	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*v = (unsigned int)ctx->api_version;
	return CUDA_SUCCESS;
}

static CUresult ctx_get_id(CUcontext c, unsigned long long *id)
{
	struct mps_ctx *ctx = c ? ctx_arg(c) : mps__ctx_cur();

	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*id = (unsigned long long)(uintptr_t)ctx;
	return CUDA_SUCCESS;
}

static CUresult limit_call(CUlimit limit, int set, size_t value, size_t *out)
{
	struct mps_msg_ctx_limit q = { .limit = (uint32_t)limit, .set = (uint32_t)set, .value = value };
	struct mps_call call;
	uint32_t h;
	CUresult r;

	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__call(MPS_OP_CTX_LIMIT, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && out)
		*out = (size_t)call.s->val[0];
	mps__call_end(&call);
	return r;
}

/* A limit is what the context set, else the primary context's as the
 * server publishes it (ops_ctx.c); only one it does not know is asked for. */
static CUresult ctx_get_limit(size_t *value, CUlimit limit)
{
	struct mps_ctx *ctx;
	uint64_t v;
	uint32_t h;
	CUresult r;

	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	ctx = mps__ctx_cur();
	if ((unsigned int)limit < MPS_REGION_LIMITS) {
		if (mps_load_acquire(&ctx->limits_set) & (1u << limit)) {
			*value = (size_t)mps_load_relaxed(&ctx->limit[limit]);
			return CUDA_SUCCESS;
		}
		v = mps_load_relaxed(&mps_conn.region->limit[mps_conn.server_index[ctx->device]][limit]);
		if (v != MPS_LIMIT_UNKNOWN) {
			*value = (size_t)v;
			return CUDA_SUCCESS;
		}
	}
	return limit_call(limit, 0, 0, value);
}

/* Setting what the context already set changes nothing and costs nothing. */
static CUresult ctx_set_limit(CUlimit limit, size_t value)
{
	struct mps_ctx *ctx = mps__ctx_cur();
	CUresult r;

	if (ctx && (unsigned int)limit < MPS_REGION_LIMITS && mps_load_acquire(&ctx->handle) &&
	    (mps_load_acquire(&ctx->limits_set) & (1u << limit)) && mps_load_relaxed(&ctx->limit[limit]) == value)
		return CUDA_SUCCESS;
	r = limit_call(limit, 1, value, NULL);
	if (r == CUDA_SUCCESS && ctx && (unsigned int)limit < MPS_REGION_LIMITS) {
		mps_store_relaxed(&ctx->limit[limit], value);
		mps_fetch_or(&ctx->limits_set, 1u << limit);
	}
	return r;
}

static CUresult ctx_get_stream_priority_range(int *least, int *greatest)
{
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	if (least)
		*least = mps_conn.welcome->prio_least;
	if (greatest)
		*greatest = mps_conn.welcome->prio_greatest;
	return CUDA_SUCCESS;
}

static __thread CUfunc_cache cache_pref;

static CUresult ctx_get_cache_config(CUfunc_cache *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	*c = cache_pref;
	return CUDA_SUCCESS;
}

static CUresult ctx_set_cache_config(CUfunc_cache c)
{
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	/* A preference only; the shared context keeps the driver's choice. */
	cache_pref = c;
	return CUDA_SUCCESS;
}

static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
	struct mps_ctx *p;
	CUresult r;
	int n;

	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	r = cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS)
		return r;
	p = primary_of(dev);
	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ctx_lock);
	if (!p->handle)
		r = server_create(p);
	if (r == CUDA_SUCCESS)
		p->retain++;
	pthread_mutex_unlock(&ctx_lock);
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)p;
	return r;
}

static CUresult primary_release(CUdevice dev)
{
	struct mps_ctx *p = primary_of(dev);
	CUresult r = CUDA_SUCCESS;

	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ctx_lock);
	if (p->retain <= 0) {
		pthread_mutex_unlock(&ctx_lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--p->retain == 0)
		r = server_destroy(p);
	pthread_mutex_unlock(&ctx_lock);
	return r;
}

static CUresult primary_get_state(CUdevice dev, unsigned int *flags, int *active)
{
	struct mps_ctx *p = primary_of(dev);

	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = p->flags;
	*active = mps_load_acquire(&p->handle) != 0;
	return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags)
{
	const unsigned int known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
				   CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;
	struct mps_ctx *p = primary_of(dev);

	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags & ~known)
		return CUDA_ERROR_INVALID_VALUE;
	p->flags = flags;
	return CUDA_SUCCESS;
}

static CUresult primary_reset(CUdevice dev)
{
	struct mps_ctx *p = primary_of(dev);
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ctx_lock);
	r = server_destroy(p);
	pthread_mutex_unlock(&ctx_lock);
	return r;
}

/* Hooks for the export tables (exports.h). */
CUcontext mps__ctx_current(void)
{
	return (CUcontext)mps__ctx_cur();
}

CUresult mps__primary_ctx_get(CUcontext *pctx, CUdevice dev)
{
	struct mps_ctx *p = mps_conn.welcome ? primary_of(dev) : NULL;

	if (!p)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = (CUcontext)p;
	return CUDA_SUCCESS;
}

const struct mps_impl mps__context_api[] = {
	MPS_IMPL_PFN(cuCtxCreate_v2, PFN_cuCtxCreate_v3020, ctx_create_v2),
	MPS_IMPL_PFN(cuCtxCreate_v3, PFN_cuCtxCreate_v11040, ctx_create_v3),
	MPS_IMPL(cuCtxCreate_v4, ctx_create_v4),
	MPS_IMPL(cuCtxDestroy_v2, ctx_destroy),
	MPS_IMPL(cuCtxSetCurrent, ctx_set_current),
	MPS_IMPL(cuCtxGetCurrent, ctx_get_current),
	MPS_IMPL(cuCtxPushCurrent_v2, ctx_push),
	MPS_IMPL(cuCtxPopCurrent_v2, ctx_pop),
	MPS_IMPL(cuCtxGetDevice, ctx_get_device),
	MPS_IMPL(cuCtxGetDevice_v2, ctx_get_device_v2),
	MPS_IMPL(cuCtxSynchronize, ctx_synchronize),
	MPS_IMPL(cuCtxSynchronize_v2, ctx_synchronize_v2),
	MPS_IMPL(cuCtxGetFlags, ctx_get_flags),
	MPS_IMPL(cuCtxSetFlags, ctx_set_flags),
	MPS_IMPL(cuCtxGetApiVersion, ctx_get_api_version),
	MPS_IMPL(cuCtxGetId, ctx_get_id),
	MPS_IMPL(cuCtxGetLimit, ctx_get_limit),
	MPS_IMPL(cuCtxSetLimit, ctx_set_limit),
	MPS_IMPL(cuCtxGetStreamPriorityRange, ctx_get_stream_priority_range),
	MPS_IMPL(cuCtxGetCacheConfig, ctx_get_cache_config),
	MPS_IMPL(cuProfilerStart, profiler_mark),
	MPS_IMPL(cuProfilerStop, profiler_mark),
	MPS_IMPL(cuCtxSetCacheConfig, ctx_set_cache_config),
	MPS_IMPL(cuDevicePrimaryCtxRetain, primary_retain),
	MPS_IMPL(cuDevicePrimaryCtxRelease_v2, primary_release),
	MPS_IMPL(cuDevicePrimaryCtxGetState, primary_get_state),
	MPS_IMPL(cuDevicePrimaryCtxSetFlags_v2, primary_set_flags),
	MPS_IMPL(cuDevicePrimaryCtxReset_v2, primary_reset),
	/* First versions with the same prototypes as the current ones. */
	MPS_IMPL_PFN(cuCtxCreate, PFN_cuCtxCreate_v3020, ctx_create_v2),
	MPS_IMPL_AS(cuCtxDestroy, cuCtxDestroy_v2, ctx_destroy),
	MPS_IMPL_AS(cuCtxPushCurrent, cuCtxPushCurrent_v2, ctx_push),
	MPS_IMPL_AS(cuCtxPopCurrent, cuCtxPopCurrent_v2, ctx_pop),
	MPS_IMPL_AS(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, primary_release),
	MPS_IMPL_AS(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2, primary_set_flags),
	MPS_IMPL_AS(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, primary_reset),
	MPS_IMPL_END
};
