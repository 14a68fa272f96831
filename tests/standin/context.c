// SPDX-License-Identifier: MIT
/*
 * Primary contexts, the per-thread current context, limits and the sticky
 * error.
 *
 * Each device has exactly one context, its primary context, created at cuInit
 * and never freed, so its handle stays valid for the life of the process, as
 * the real driver's does. cuDevicePrimaryCtxRetain/Release count references;
 * when the count falls to 0 the context is torn down the way the real driver
 * destroys it — its streams stopped (their queued work dropped), its events,
 * modules, allocations and host registrations released — and comes back clean
 * on the next retain. A call made in a released context gets
 * CUDA_ERROR_CONTEXT_IS_DESTROYED.
 *
 * The sticky error: a kernel that faults (ILLEGAL_ADDRESS) kills its context.
 * From then on every call that uses the context returns that error, the
 * streams drop their remaining work, and only the release to 0 clears it.
 */
#include <errno.h>
#include <stdlib.h>

#include <cudaProfiler.h>

#include "standin.h"

/* The calling thread's current context, as a handle (0: none), and the SMs
 * of the green context it was made current as (count 0: all). */
static __thread uintptr_t current;
static __thread unsigned current_sm_first, current_sm_count;

void mps__ctx_sm_range(unsigned *first, unsigned *count)
{
	*first = current_sm_count ? current_sm_first : 0;
	*count = current_sm_count ? current_sm_count : SI_SM_COUNT;
}

static const size_t default_limits[SI_NLIMITS] = {
	1024,           /* CU_LIMIT_STACK_SIZE */
	1 << 20,        /* CU_LIMIT_PRINTF_FIFO_SIZE */
	8 << 20,        /* CU_LIMIT_MALLOC_HEAP_SIZE */
	2,              /* CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH */
	2048,           /* CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT */
	64,             /* CU_LIMIT_MAX_L2_FETCH_GRANULARITY */
	0,              /* CU_LIMIT_PERSISTING_L2_CACHE_SIZE */
	SI_SMEM_OPTIN,  /* CU_LIMIT_SHMEM_SIZE (read-only) */
	0,              /* CU_LIMIT_CIG_ENABLED (read-only) */
	0,              /* CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED */
};

int mps__contexts_create(void)
{
	for (int i = 0; i < mps__ndevices; i++) {
		struct si_context *ctx = calloc(1, sizeof(*ctx));

		if (!ctx)
			return -ENOMEM;
		ctx->handle = mps__handle_add(SI_H_CONTEXT, ctx);
		if (!ctx->handle) {
			free(ctx);
			return -ENOMEM;
		}
		ctx->device = i;
		ctx->state = SI_CTX_INACTIVE;
		ctx->sticky = CUDA_SUCCESS;
		si_list_init(&ctx->streams);
		si_list_init(&ctx->events);
		si_list_init(&ctx->modules);
		for (int l = 0; l < SI_NLIMITS; l++)
			ctx->limits[l] = default_limits[l];
		mps__devices[i].ctx = ctx;
	}
	return 0;
}

CUresult mps__ctx_current(struct si_context **out)
{
	struct si_context *ctx;

	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx = mps__handle_get(current, SI_H_CONTEXT);
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx->state != SI_CTX_ACTIVE)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = ctx;
	return CUDA_SUCCESS;
}

CUresult mps__ctx_enter(struct si_context **out)
{
	CUresult rc = mps__ctx_current(out);

	if (rc != CUDA_SUCCESS)
		return rc;
	return (*out)->sticky;
}

void mps__ctx_fault(struct si_context *ctx, CUresult err)
{
	if (ctx->sticky == CUDA_SUCCESS && ctx->state == SI_CTX_ACTIVE)
		ctx->sticky = err;
	mps__progress();        /* stream threads waiting for events drop their work */
}

/* Tears the context down after its last release. Called and returns under the lock. */
static void reset(struct si_context *ctx)
{
	ctx->state = SI_CTX_RESETTING;
	mps__progress();
	mps__streams_kill(ctx);
	mps__events_drop_context(ctx);
	while (!si_list_empty(&ctx->modules))
		mps__module_unload(si_container_of(ctx->modules.next, struct si_module, link));
	mps__ranges_drop_context(ctx);
	for (int l = 0; l < SI_NLIMITS; l++)
		ctx->limits[l] = default_limits[l];
	ctx->sticky = CUDA_SUCCESS;
	ctx->state = SI_CTX_INACTIVE;
	mps__progress();        /* retains waiting for the reset to finish */
}

CU_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct si_device *d;
	struct si_context *ctx;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	d = mps__device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	ctx = d->ctx;
	while (ctx->state == SI_CTX_RESETTING)
		mps__wait();
	ctx->retains++;
	ctx->state = SI_CTX_ACTIVE;
	*pctx = (CUcontext)ctx->handle;
	mps__unlock();
	return CUDA_SUCCESS;
}

CU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	struct si_device *d;
	struct si_context *ctx;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	d = mps__device(dev);
	if (!d)
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	ctx = d->ctx;
	while (ctx->state == SI_CTX_RESETTING)
		mps__wait();
	if (ctx->retains == 0)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (--ctx->retains == 0)
		reset(ctx);
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ctx) {
		current = 0;
		current_sm_count = 0;
		return CUDA_SUCCESS;
	}
	mps__lock();
	if (mps__handle_get((uintptr_t)ctx, SI_H_CONTEXT)) {
		current = (uintptr_t)ctx;
		current_sm_count = 0;
	} else {
		int dev;
		unsigned first, count;

		/* A green context: its device's primary context, on its SMs. */
		if (mps__green_ctx((uintptr_t)ctx, &dev, &first, &count)) {
			current = mps__devices[dev].ctx->handle;
			current_sm_first = first;
			current_sm_count = count;
		} else {
			rc = CUDA_ERROR_INVALID_CONTEXT;
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)current;
	return CUDA_SUCCESS;
}

/* No cache to keep lines in: only the context is checked. */
CU_API CUresult cuCtxResetPersistingL2Cache(void)
{
	CUcontext c = NULL;

	return cuCtxGetCurrent(&c) == CUDA_SUCCESS && c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CU_API CUresult cuCtxSynchronize(void)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__ctx_current(&ctx);
	if (rc == CUDA_SUCCESS) {
		mps__ctx_quiesce(ctx);
		rc = ctx->state == SI_CTX_ACTIVE ? ctx->sticky : CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	mps__unlock();
	mps__printf_flush();
	return rc;
}

/* Profiling range marks: nothing here records a profile; they need a
 * current context, as the driver's do. */
static CUresult profiler_mark(void)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__ctx_current(&ctx);
	mps__unlock();
	return rc;
}

CU_API CUresult cuProfilerStart(void)
{
	return profiler_mark();
}

CU_API CUresult cuProfilerStop(void)
{
	return profiler_mark();
}

CU_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	if ((int)limit < 0 || (int)limit >= SI_NLIMITS)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		*pvalue = ctx->limits[limit];
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((int)limit < 0 || (int)limit >= SI_NLIMITS)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	if ((int)limit == 7 || (int)limit == 8)         /* SHMEM_SIZE, CIG_ENABLED: query only */
		return CUDA_ERROR_INVALID_VALUE;
	/* Hints the real driver clamps. */
	if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
		value = 128;
	if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE && value > (5 << 20))
		value = 5 << 20;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		ctx->limits[limit] = value;
	mps__unlock();
	return rc;
}

CU_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* Either may be NULL. Lower numbers are higher priorities. */
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}
