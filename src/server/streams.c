// SPDX-License-Identifier: MIT
/*
 * See streams.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/placement.h"
#include "server/replay.h"
#include "server/smshare.h"
#include "server/streams.h"

int mps_stream_effective_priority(const struct mps_client *c, int priority)
{
	/* Below normal: the lowest level, whatever it asked. Normal: one level
	 * above what it asked where the range allows, so every stream of a
	 * normal client outranks every stream of a below-normal one. */
	if (mps_load_acquire(&((struct mps_client *)c)->priority) > 0)
		return mps_srv.prio_least;
	return priority - 1 < mps_srv.prio_greatest ? mps_srv.prio_greatest : priority - 1;
}

CUresult mps_stream_new(struct mps_client *c, struct mps_sctx *ctx, unsigned int flags, int priority,
			struct mps_sstream **out)
{
	struct mps_sstream *s;
	CUresult r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mps__bind_device(c, ctx->device);
	if (r != CUDA_SUCCESS)
		goto err_free;
	/* Always non-blocking on the server: the client's own legacy-stream
	 * semantics are rebuilt in mps_stream_before(). In the client's SM
	 * share. */
	s->green = mps_sm_bind(c, ctx->device);
	r = mps_stream_raw_new(ctx->device, s->green, mps_stream_effective_priority(c, priority), &s->s);
	if (r != CUDA_SUCCESS)
		goto err_free;
	r = mps_drv.cuEventCreate(&s->ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS)
		goto err_stream;
	s->ctx = ctx;
	s->flags = flags;
	s->priority = priority;
	s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
	s->legacy_seen = ctx->legacy_gen;
	s->next = ctx->streams;
	ctx->streams = s;
	*out = s;
	return CUDA_SUCCESS;

err_stream:
	mps_stream_raw_free(ctx->device, s->s);
err_free:
	free(s);
	return r;
}

CUresult mps_stream_raw_new(int dev, struct mps_green *green, int priority, CUstream *out)
{
	struct mps_device *d = &mps_srv.dev[dev];
	unsigned int n, peak;
	CUresult r;

	if (green)
		r = mps_sm_stream_new(green, priority, out);
	else
		r = mps_drv.cuStreamCreateWithPriority(out, CU_STREAM_NON_BLOCKING, priority);
	if (r != CUDA_SUCCESS) {
		*out = NULL;
		return r;
	}
	n = mps_fetch_add(&d->streams, 1u) + 1;
	peak = mps_load_relaxed(&d->streams_peak);
	while (n > peak && !mps_cas(&d->streams_peak, &peak, n))
		;
	return CUDA_SUCCESS;
}

void mps_stream_raw_free(int dev, CUstream s)
{
	mps_drv.cuStreamDestroy(s);
	mps_fetch_sub(&mps_srv.dev[dev].streams, 1u);
}

CUresult mps_stream_join(struct mps_client *c, struct mps_sctx *ctx, CUstream *join)
{
	CUresult r = mps__bind_device(c, ctx->device);

	if (r == CUDA_SUCCESS && !ctx->join)
		r = mps_stream_raw_new(ctx->device, NULL, 0, &ctx->join);   /* NULL if it failed */
	*join = ctx->join;
	return r;
}

void mps_stream_free(struct mps_client *c, struct mps_sstream *s)
{
	struct mps_sctx *ctx = s->ctx;
	struct mps_sstream **pp;
	CUstream join;

	mps_replay_forget(c);

	for (pp = &ctx->streams; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	if (ctx->legacy == s)
		ctx->legacy = NULL;
	mps__bind_device(c, ctx->device);
	mps_comp_settle(c, s);
	/* Its queued work still counts: a later context synchronize waits for
	 * it, and so does later legacy-stream work if it was a blocking stream. */
	if (s->capture_origin) {
		CUgraph g = NULL;

		/* Destroyed while capturing: the capture ends with it. */
		if (mps_drv.cuStreamEndCapture && mps_drv.cuStreamEndCapture(s->s, &g) == CUDA_SUCCESS && g &&
		    mps_drv.cuGraphDestroy)
			mps_drv.cuGraphDestroy(g);
		s->capture_origin = false;
		c->captures--;
	}
	if (s->busy && !mps_stream_capturing(c, s) && mps_drv.cuEventRecord(s->ev, s->s) == CUDA_SUCCESS) {
		if (mps_stream_join(c, ctx, &join) == CUDA_SUCCESS &&
		    mps_drv.cuStreamWaitEvent(join, s->ev, 0) == CUDA_SUCCESS)
			ctx->join_busy = true;
		if (s->blocking && s->dirty && ctx->legacy)
			mps_drv.cuStreamWaitEvent(ctx->legacy->s, s->ev, 0);
	}
	mps_drv.cuEventDestroy(s->ev);
	mps_stream_raw_free(ctx->device, s->s);
	free(s);
}

struct mps_sstream *mps_stream_resolve(struct mps_client *c, struct mps_sctx *ctx, uint32_t handle, CUresult *err)
{
	struct mps_sstream *s;

	if (handle == 0) {
		if (!ctx) {
			*err = CUDA_ERROR_INVALID_CONTEXT;
			return NULL;
		}
		if (!ctx->legacy) {
			*err = mps_stream_new(c, ctx, 0, 0, &s);
			if (*err != CUDA_SUCCESS)
				return NULL;
			ctx->legacy = s;
		}
		return ctx->legacy;
	}
	s = mps__obj(c, handle, MPS_H_STREAM);
	if (!s) {
		*err = CUDA_ERROR_INVALID_HANDLE;
		return NULL;
	}
	return s;
}

/* s waits for the client's latest fence, once. */
static CUresult fence_wait(struct mps_client *c, struct mps_sstream *s)
{
	CUresult r;

	if (s->fence_seen == c->fence_gen)
		return CUDA_SUCCESS;
	/* Work captured into a graph runs when the graph is launched, on a
	 * stream that waits then: the fence stays unseen until the stream's
	 * first work past the capture. */
	if (mps_stream_capturing(c, s))
		return CUDA_SUCCESS;
	if (c->fence_ctx) {
		r = mps_drv.cuStreamWaitEvent(s->s, c->fence_ctx->fence, 0);
		if (r != CUDA_SUCCESS)
			return r;
		s->staged_at = 0;   /* it waits for other work now */
	}
	for (uint32_t m = c->clear_devs; m; m &= m - 1) {
		r = mps_drv.cuStreamWaitEvent(s->s, mps_place_cleared(__builtin_ctz(m)), 0);
		if (r != CUDA_SUCCESS)
			return r;
	}
	s->fence_seen = c->fence_gen;
	return CUDA_SUCCESS;
}

CUresult mps_stream_before(struct mps_client *c, struct mps_sstream *s)
{
	struct mps_sctx *ctx = s->ctx;
	CUresult r = CUDA_SUCCESS;

	/* A synchronize waiting for the stream as it was gets its event first. */
	if (s->lazy) {
		r = mps_comp_settle(c, s);
		if (r != CUDA_SUCCESS)
			return r;
	}
	s->busy = true;
	s->work++;
	r = fence_wait(c, s);
	if (r != CUDA_SUCCESS)
		return r;
	if (s == ctx->legacy) {
		for (struct mps_sstream *t = ctx->streams; t; t = t->next) {
			if (t == s || !t->blocking || !t->dirty)
				continue;
			/* The legacy stream cannot wait for a capturing stream: the
			 * driver's own answer to such an implicit dependency. */
			if (mps_stream_capturing(c, t))
				return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
			r = mps_drv.cuEventRecord(t->ev, t->s);
			if (r == CUDA_SUCCESS)
				r = mps_drv.cuStreamWaitEvent(s->s, t->ev, 0);
			if (r != CUDA_SUCCESS)
				return r;
			t->dirty = false;
			s->staged_at = 0;   /* it waits for other work now */
		}
		ctx->legacy_gen++;
		return CUDA_SUCCESS;
	}
	if (!s->blocking)
		return CUDA_SUCCESS;
	s->dirty = true;
	/* Work captured into a graph has no order with the legacy stream's. */
	if (ctx->legacy && s->legacy_seen != ctx->legacy_gen && !mps_stream_capturing(c, s)) {
		if (ctx->legacy_ev_gen != ctx->legacy_gen) {
			r = mps_drv.cuEventRecord(ctx->legacy->ev, ctx->legacy->s);
			if (r != CUDA_SUCCESS)
				return r;
			ctx->legacy_ev_gen = ctx->legacy_gen;
		}
		r = mps_drv.cuStreamWaitEvent(s->s, ctx->legacy->ev, 0);
		if (r != CUDA_SUCCESS)
			return r;
		s->legacy_seen = ctx->legacy_gen;
		s->staged_at = 0;
	}
	return CUDA_SUCCESS;
}

static void reprioritize_ctx(void *obj, void *arg)
{
	struct mps_sctx *x = obj;
	struct mps_client *c = arg;
	CUstreamAttrValue v;

	if (mps__bind_device(c, x->device) != CUDA_SUCCESS)
		return;
	for (struct mps_sstream *t = x->streams; t; t = t->next) {
		memset(&v, 0, sizeof(v));
		v.priority = mps_stream_effective_priority(c, t->priority);
		mps_drv.cuStreamSetAttribute(t->s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v);
	}
}

/* set_client_priority changed the client's priority: its streams follow,
 * where the driver can change a stream's priority (new ones always do). */
static void reprioritize(struct mps_client *c)
{
	int dev = mps__cur_device();

	c->priority_applied = mps_load_relaxed(&c->priority);
	if (!mps_drv.cuStreamSetAttribute)
		return;
	mps_handles_foreach(&c->handles, MPS_H_CTX, reprioritize_ctx, c);
	if (dev >= 0)
		mps__bind_device(c, dev);
}

/* The client's SM share changed: the stream's work from now on goes to a
 * driver stream in the new share, after everything queued on the old one
 * (which the driver finishes after it is destroyed). A capturing stream
 * keeps its stream until the capture ends. */
static void stream_move(struct mps_client *c, struct mps_sstream *s, struct mps_green *green)
{
	int dev = s->ctx->device;
	CUstream ns;
	CUresult r;

	if (mps_stream_capturing(c, s))
		return;
	r = mps_comp_settle(c, s);
	if (r == CUDA_SUCCESS)
		r = mps_stream_raw_new(dev, green, mps_stream_effective_priority(c, s->priority), &ns);
	if (r != CUDA_SUCCESS) {
		mps_log_warn("client %d: stream %u stays in its old SM share (%s)", (int)c->pid, s->handle,
			     mps_driver_errname(r));
		s->green = green;   /* not again */
		return;
	}
	if (s->work && (mps_drv.cuEventRecord(s->ev, s->s) != CUDA_SUCCESS ||
			mps_drv.cuStreamWaitEvent(ns, s->ev, 0) != CUDA_SUCCESS))
		mps_drv.cuStreamSynchronize(s->s);   /* the order, at the cost of a wait */
	mps_stream_raw_free(dev, s->s);
	s->s = ns;
	s->green = green;
}

struct mps_sstream *mps_stream_for_work(struct mps_client *c, const struct mps_msg *m, uint32_t h, CUresult *err)
{
	struct mps_sstream *st = mps_stream_resolve(c, h ? NULL : mps__msg_ctx(c, m), h, err);
	struct mps_green *green;

	if (!st)
		return NULL;
	*err = mps__bind_device(c, st->ctx->device);
	if (*err != CUDA_SUCCESS)
		return NULL;
	green = mps_sm_bind(c, st->ctx->device);
	if (green != st->green)
		stream_move(c, st, green);
	*err = mps_stream_before(c, st);
	if (*err != CUDA_SUCCESS)
		return NULL;
	if (mps_load_relaxed(&c->priority) != c->priority_applied)
		reprioritize(c);
	mps_fault_note_work(c, st->ctx->device, st->handle);
	return st;
}

CUresult mps_stream_fence(struct mps_client *c, struct mps_sstream *s)
{
	struct mps_sctx *x = s->ctx;
	CUresult r;

	if (mps_stream_capturing(c, s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (!x->fence && (r = mps_drv.cuEventCreate(&x->fence, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) {
		x->fence = NULL;
		return r;
	}
	/* The latest fence covers every earlier one: this stream may not have
	 * waited for the one before (no work since it came). Those uploads
	 * wait for nothing, so waiting for them cannot close a cycle. */
	r = fence_wait(c, s);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuEventRecord(x->fence, s->s);
	if (r != CUDA_SUCCESS)
		return r;
	c->fence_gen++;
	c->fence_ctx = x;
	c->clear_devs = 0;   /* s waited for them: its fence covers them */
	s->fence_seen = c->fence_gen;
	return CUDA_SUCCESS;
}

void mps_stream_after_clear(struct mps_client *c, int device)
{
	c->clear_devs |= 1u << device;
	c->fence_gen++;
}

CUresult mps_stream_fence_settle(struct mps_client *c)
{
	struct mps_sctx *x = c->fence_ctx;
	CUresult r = CUDA_SUCCESS;

	for (; c->clear_devs && r == CUDA_SUCCESS; c->clear_devs &= c->clear_devs - 1)
		r = mps_drv.cuEventSynchronize(mps_place_cleared(__builtin_ctz(c->clear_devs)));
	if (!x || r != CUDA_SUCCESS)
		return r;
	c->fence_ctx = NULL;   /* later streams need not wait: it has passed */
	c->fence_gen++;
	if (mps__bind_device(c, x->device) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_CONTEXT;
	return mps_drv.cuEventSynchronize(x->fence);
}

CUresult mps_stream_sync_all(struct mps_client *c, struct mps_sctx *ctx, uint32_t slot)
{
	struct mps_sstream *only = NULL;
	unsigned int busy = 0;
	CUstream join;
	CUresult r;

	r = mps__bind_device(c, ctx->device);
	if (r != CUDA_SUCCESS)
		return r;
	for (struct mps_sstream *t = ctx->streams; t; t = t->next) {
		if (!t->busy)
			continue;
		/* A context synchronize while one of its streams captures is what
		 * the driver refuses too. */
		if (mps_stream_capturing(c, t))
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		busy++;
		only = t;
	}
	/* The common case, one stream with work: wait on it directly, which
	 * saves the GPU a cross-stream hop on the way to the answer. */
	if (busy == 1 && !ctx->join_busy) {
		only->busy = false;
		return mps_comp_after_stream(c, only, MPS_PEND_REPLY, slot, true);
	}
	r = mps_stream_join(c, ctx, &join);
	if (r != CUDA_SUCCESS)
		return r;
	for (struct mps_sstream *t = ctx->streams; t; t = t->next) {
		if (!t->busy)
			continue;
		r = mps_drv.cuEventRecord(t->ev, t->s);
		if (r == CUDA_SUCCESS)
			r = mps_drv.cuStreamWaitEvent(join, t->ev, 0);
		if (r != CUDA_SUCCESS)
			return r;
		t->busy = false;
	}
	ctx->join_busy = false;
	return mps_comp_after_join(c, ctx, slot);
}
