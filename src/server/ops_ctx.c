// SPDX-License-Identifier: MIT
/*
 * Client contexts. A client context is virtual: every context of a client on
 * device N runs in the server's primary context of device N, and owns only
 * its streams, events, modules and memory. So its synchronize waits for that
 * context's own streams, and destroying it frees exactly what was made in it
 * — never anything of another context or client. Limits are shared by the
 * whole primary context, so a client may raise a size limit but never lower
 * one another client relies on; it reads back what it set. What the primary
 * contexts' limits are now is published in every client's region, where a
 * context that set none of its own reads them without asking.
 */
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "common/env.h"
#include "common/log.h"
#include "server/control.h"
#include "server/driver.h"
#include "server/placement.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/vdevice.h"
#include "server/streams.h"

void mps__op_ctx_create(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ctx_create *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x;

	int device = mps__client_device(c, q->device);

	if (device < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_DEVICE);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	x->device = device;
	x->primary = (m->flags & MPS_CTX_PRIMARY) != 0;
	x->flags = q->flags;
	x->handle = mps_handle_new(&c->handles, MPS_H_CTX, x);
	if (!x->handle) {
		free(x);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	s->val[0] = x->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
	mps_control_client_device(c, x->device);   /* for ps and get_device_client_list */
}

struct ctx_sweep {
	struct mps_client *c;
	struct mps_sctx *x;   /* NULL: every context */
};

static void drop_event(void *obj, void *arg)
{
	struct mps_sevent *e = obj;
	struct ctx_sweep *w = arg;

	if (w->x && e->ctx != w->x)
		return;
	mps__event_free(w->c, e);
}

static void drop_stream_handle(void *obj, void *arg)
{
	struct mps_sstream *s = obj;
	struct ctx_sweep *w = arg;

	if (w->x && s->ctx != w->x)
		return;
	mps_handle_del(&w->c->handles, s->handle);
}

/* Waits for a context's work, then frees its events, streams and memory.
 * Its modules go with it too (modules belong to a context in CUDA). */
static void ctx_free(struct mps_client *c, struct mps_sctx *x)
{
	struct ctx_sweep w = { .c = c, .x = x };

	mps__bind_device(c, x->device);
	/* A stream synchronized here has nothing left for the join stream to
	 * wait for when it is freed (which would make one just for that). */
	for (struct mps_sstream *t = x->streams; t; t = t->next)
		if (mps_drv.cuStreamSynchronize(t->s) == CUDA_SUCCESS)
			t->busy = false;
	mps_handles_foreach(&c->handles, MPS_H_EVENT, drop_event, &w);
	mps_handles_foreach(&c->handles, MPS_H_STREAM, drop_stream_handle, &w);
	while (x->streams)
		mps_stream_free(c, x->streams);
	/* Idle before it goes (the streams freed may have made it wait for
	 * their last work). */
	if (x->join) {
		mps_drv.cuStreamSynchronize(x->join);
		mps_stream_raw_free(x->device, x->join);
	}
	if (c->fence_ctx == x) {
		c->fence_ctx = NULL;   /* its streams are done (above) */
		c->fence_gen++;
	}
	if (x->fence)
		mps_drv.cuEventDestroy(x->fence);
	mps__modules_release_ctx(c, x->handle);
	for (size_t i = c->mem.n; i-- > 0;) {
		struct mps_mrange r = c->mem.r[i];

		if (r.kind != MPS_MEM_DEVICE || r.ctx != x->handle)
			continue;
		mps_memacct_remove(&c->mem, r.base, r.kind, NULL);
		mps_place_mem_free((CUdeviceptr)r.base, true);   /* its streams are done (above) */
	}
	mps_handle_del(&c->handles, x->handle);
	free(x);
}

void mps__op_ctx_destroy(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_sctx *x = mps__msg_ctx(c, m);

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	ctx_free(c, x);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

static void free_ctx_cb(void *obj, void *arg)
{
	ctx_free(arg, obj);
}

void mps__ctx_release_all(struct mps_client *c)
{
	mps_handles_foreach(&c->handles, MPS_H_CTX, free_ctx_cb, c);
}

void mps__op_ctx_sync(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_sctx *x = mps__msg_ctx(c, m);
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	r = mps_stream_sync_all(c, x, m->slot);
	if (r != CUDA_SUCCESS)
		mps__reply(c, m->slot, r);
}

#define DEVICE_HEAP_MB 256

_Static_assert(CU_LIMIT_MAX <= MPS_REGION_LIMITS, "every limit has a word in the region");

void mps_limits_read(int dev)
{
	for (int l = 0; l < MPS_REGION_LIMITS; l++) {
		size_t v = 0;
		uint64_t w = MPS_LIMIT_UNKNOWN;

		if (l < CU_LIMIT_MAX && mps_drv.cuCtxGetLimit(&v, (CUlimit)l) == CUDA_SUCCESS)
			w = v;
		mps_store_relaxed(&mps_srv.dev[dev].limit[l], w);
	}
}

/* The device heap (device malloc's) is the context's, and the driver fixes
 * its size for good once any kernel that calls malloc has run there: in a
 * context every client shares, a client asking for a larger heap after
 * another's such kernel would be refused, as no process is natively. So the
 * heap is sized up front (OPENMPS_DEVICE_HEAP_MB, default 256), and any
 * request up to that succeeds whenever it comes; the driver takes the
 * memory only when such a kernel first runs. Clients are shown the
 * driver's default, read before, until they set their own. */
void mps_limits_preset(int dev)
{
	long mb = mps_env_long("OPENMPS_DEVICE_HEAP_MB", DEVICE_HEAP_MB, 0, 1L << 20);
	size_t cur = 0, want = (size_t)mb << 20;
	CUresult r;

	if (!mb || mps_drv.cuCtxGetLimit(&cur, CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS || cur >= want)
		return;
	r = mps_drv.cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, want);
	if (r != CUDA_SUCCESS)
		mps_log_warn("device %d: the device heap not sized to %ld MiB: %s", dev, mb, mps_driver_errname(r));
}

/* Under mps_srv.lock, as every change is: a change either finds the
 * region listed or is already there to copy. */
void mps_limits_publish(struct mps_client *c)
{
	pthread_mutex_lock(&mps_srv.lock);
	for (int d = 0; d < MPS_REGION_DEVICES; d++)
		for (int l = 0; l < MPS_REGION_LIMITS; l++)
			mps_store_relaxed(&c->region->limit[d][l],
					  d < mps_srv.ndev ? mps_load_relaxed(&mps_srv.dev[d].limit[l]) : MPS_LIMIT_UNKNOWN);
	pthread_mutex_unlock(&mps_srv.lock);
}

/* Device dev's limit l is now v: every client reads it from now on. */
static void limit_changed(int dev, unsigned int l, uint64_t v)
{
	pthread_mutex_lock(&mps_srv.lock);
	mps_store_relaxed(&mps_srv.dev[dev].limit[l], v);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		struct mps_region *r = mps_load_acquire(&c->region);

		if (r)
			mps_store_relaxed(&r->limit[dev][l], v);
	}
	pthread_mutex_unlock(&mps_srv.lock);
}

/* Limits that size shared resources: raising them is safe for everyone. */
static int is_size_limit(unsigned int limit)
{
	return limit == CU_LIMIT_STACK_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE ||
	       limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT;
}

/* A context reads back the value it set. The primary context underneath is
 * shared, so a size limit is raised there if the new value is larger (and
 * never lowered under another client), and the other limits, which would
 * change every client's behaviour, are kept only as this context's value. */
void mps__op_ctx_limit(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ctx_limit *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	size_t cur = 0;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (q->limit >= CU_LIMIT_MAX) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuCtxGetLimit(&cur, (CUlimit)q->limit);
	if (r != CUDA_SUCCESS || !q->set) {
		uint64_t shown = mps_load_relaxed(&mps_srv.dev[x->device].limit[q->limit]);

		s->val[0] = (x->limits_set & (1u << q->limit)) ? x->limit[q->limit]
			    : shown != MPS_LIMIT_UNKNOWN      ? shown
							      : cur;
		mps__reply(c, m->slot, r);
		return;
	}
	if (is_size_limit(q->limit) && q->value > cur) {
		r = mps_drv.cuCtxSetLimit((CUlimit)q->limit, (size_t)q->value);
		if (r == CUDA_SUCCESS && mps_drv.cuCtxGetLimit(&cur, (CUlimit)q->limit) == CUDA_SUCCESS)
			limit_changed(x->device, q->limit, cur);
	}
	if (r == CUDA_SUCCESS) {
		x->limit[q->limit] = q->value;
		x->limits_set |= 1u << q->limit;
	}
	mps__reply(c, m->slot, r);
}

/* The devices the client sees: once, before it has made any context. */
void mps__op_devices(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_devices *q = (const void *)m;
	uint32_t seen = 0;

	if (c->devmask || q->count > (uint32_t)mps_srv.ndev) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	/* Each a GPU, or a virtual device its welcome listed; no GPU twice. */
	for (uint32_t i = 0; i < q->count; i++) {
		int d = q->map[i] < mps_srv.ndev ? q->map[i] :
			q->map[i] - mps_srv.ndev < (int)c->nvwelcome ? c->vwelcome[q->map[i] - mps_srv.ndev].dev : -1;

		if (d < 0 || (seen & (1u << d))) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_DEVICE);
			return;
		}
		seen |= 1u << d;
	}
	for (uint32_t i = 0; i < q->count; i++)
		c->vis[i] = (uint8_t)(q->map[i] < mps_srv.ndev ? q->map[i] :
				      mps_vdev_select(c, (unsigned int)(q->map[i] - mps_srv.ndev)));
	c->nvis = (int)q->count;
	mps_sm_publish(c);   /* a slice's SMs, before it asks */
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_client_limits(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_client_limits *q = (const void *)m;
	int d;

	if (c->devmask || q->thread_pct > 10000 || q->priority < -1 || q->priority > 1) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (q->thread_pct && q->thread_pct < (uint32_t)c->thread_pct) {
		mps_store_relaxed(&c->thread_pct, (int)q->thread_pct);
		mps_sm_publish(c);
		mps_log_info("client %d: active thread percentage %d.%d (its own)", (int)c->pid, c->thread_pct / 100,
			     c->thread_pct % 100 / 10);
	}
	if (q->sm_partition[0]) {
		char name[sizeof(q->sm_partition)];

		memcpy(name, q->sm_partition, sizeof(name));
		name[sizeof(name) - 1] = 0;
		mps_store_relaxed(&c->sm_part, mps_sm_name_id(name, false));
		mps_sm_publish(c);
		if (mps_load_relaxed(&c->sm_part))
			mps_log_info("client %d: SM partition %s (its own)", (int)c->pid, name);
		else
			mps_log_warn("client %d: no SM partition named %s; it shares the SMs", (int)c->pid, name);
	}
	if (q->priority > c->priority) {
		c->priority = q->priority;
		c->priority_applied = q->priority;   /* no stream yet */
		mps_log_info("client %d: priority below normal (its own)", (int)c->pid);
	}
	for (int i = 0; i < MPS_MAX_DEVICES; i++) {
		if (!q->mem_limit[i] || (d = mps__client_device(c, i)) < 0)
			continue;
		if (!c->mem.limit[d] || q->mem_limit[i] < c->mem.limit[d])
			c->mem.limit[d] = q->mem_limit[i];
		mps_log_info("client %d: device %d pinned memory limit %llu MiB (its own)", (int)c->pid, d,
			     (unsigned long long)(c->mem.limit[d] >> 20));
	}
	mps__reply(c, m->slot, CUDA_SUCCESS);
}
