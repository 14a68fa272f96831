// SPDX-License-Identifier: MIT
/*
 * See completion.h. Lock order: comp.lock is a leaf (nothing else is taken
 * while it is held, and no driver call is made under it).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/log.h"
#include "server/crash.h"
#include "server/driver.h"
#include "server/gpuwake.h"
#include "server/server.h"
#include "server/streams.h"

void mps_comp_stage_done(struct mps_client *c, uint32_t stage, CUresult r)
{
	struct mps_region *reg = c->region;

	mps_store_relaxed(&reg->stage_result[stage], (int32_t)r);   /* see mps__reply */
	/* Release: the result is visible before the state says DONE. */
	switch (mps_xchg(&reg->stage_state[stage], MPS_STAGE_DONE)) {
	case MPS_STAGE_SLEEPING:
	case MPS_STAGE_GPU_SLEEPING:
		mps_futex_wake(&reg->stage_state[stage], 1);
		break;
	}
}

/* The word MPS_OP_SLOT_WAKE number w names. */
static uint32_t *wake_word(struct mps_client *c, uint32_t w)
{
	return mps_region_wake_word(c->region, w);
}

/* Once the stream got past the GPU's store into word w (r: how it went):
 * wake the client; if the stream failed on the way the store never comes,
 * and its error r is the answer. */
static void wake_answer(struct mps_client *c, uint32_t w, CUresult r)
{
	if (r == CUDA_SUCCESS)
		mps_futex_wake(wake_word(c, w), 1);
	else if (w < MPS_SLOT_COUNT)
		mps__reply(c, w, r);
	else
		mps_comp_stage_done(c, w - MPS_SLOT_COUNT, r);
}

/* Takes a lazy completion off its stream's list. */
static void unlazy(struct mps_pending *p)
{
	if (!p->lazy)
		return;
	for (struct mps_pending **pp = &p->lazy->lazy; *pp; pp = &(*pp)->lazy_next) {
		if (*pp == p) {
			*pp = p->lazy_next;
			break;
		}
	}
	p->lazy = NULL;
	p->lazy_next = NULL;
}

/* What a completion without an event comes to. */
static CUresult eventless(const struct mps_pending *p)
{
	return p->known ? p->result : CUDA_ERROR_OUT_OF_MEMORY;   /* no event could be recorded for it */
}

static void finish(struct mps_client *c, struct mps_pending *p, CUresult r)
{
	unlazy(p);
	if (p->kind == MPS_PEND_REPLY) {
		if (r == CUDA_SUCCESS && p->deferred_ok)
			r = mps__take_deferred(c);
		mps__reply(c, p->index, r);
	} else if (p->kind == MPS_PEND_WAKE) {
		wake_answer(c, p->index, r);
	} else {
		mps_comp_stage_done(c, p->index, r);
	}
	if (p->mirror)
		mps_drv.cuEventDestroy(p->mirror);
	if (p->pooled && p->ev)
		mps_comp_event_put(c, p->ev, p->device);
	free(p);
}

static void *waiter_main(void *arg)
{
	struct mps_client *c = arg;
	struct mps_completions *q = &c->comp;
	int bound = -1;

	pthread_setname_np(pthread_self(), "omps-waiter");
	mps_crash_thread(c->pid);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct mps_pending *p;
		CUresult r;

		while (!q->wait_head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (!q->wait_head)
			break;
		p = q->wait_head;
		q->wait_head = p->next;
		if (!q->wait_head)
			q->wait_tail = NULL;
		pthread_mutex_unlock(&q->lock);

		if (bound != p->device) {
			mps_drv.cuCtxSetCurrent(mps_srv.dev[p->device].primary);
			bound = p->device;
		}
		if (!p->ev) {
			r = eventless(p);
		} else if (p->mirror) {
			r = mps_drv.cuEventSynchronize(p->mirror);
			/* Done by now: this only reads its state. */
			if (r == CUDA_SUCCESS)
				r = mps_drv.cuEventSynchronize(p->ev);
		} else {
			r = mps_drv.cuEventSynchronize(p->ev);   /* spins: no mirror could be made */
		}
		finish(c, p, r);
		pthread_mutex_lock(&q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int mps_comp_init(struct mps_client *c)
{
	struct mps_completions *q = &c->comp;
	int r;

	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	r = pthread_create(&q->waiter, NULL, waiter_main, c);
	if (r)
		return -r;
	q->waiter_started = true;
	return 0;
}

void mps_comp_shutdown(struct mps_client *c)
{
	struct mps_completions *q = &c->comp;
	struct mps_pending *p;

	/* What the worker still holds goes to the waiter too, so waiting for
	 * a dead client's last kernels sleeps rather than spins. */
	if (q->waiter_started)
		mps_comp_handoff(c);
	if (q->waiter_started) {
		pthread_mutex_lock(&q->lock);
		q->stop = true;
		pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
		pthread_join(q->waiter, NULL);
		q->waiter_started = false;
	}
	while ((p = q->head)) {
		q->head = p->next;
		mps__bind_device(c, p->device);
		finish(c, p, p->ev ? mps_drv.cuEventSynchronize(p->ev) : eventless(p));
	}
	q->tail = NULL;
	mps_store_relaxed(&q->count, 0);
	for (int d = 0; d < MPS_MAX_DEVICES; d++) {
		if (q->helper[d] && mps__bind_device(c, d) == CUDA_SUCCESS)
			mps_stream_raw_free(d, q->helper[d]);
		q->helper[d] = NULL;
	}
	for (unsigned int i = 0; i < q->pool_n; i++) {
		mps__bind_device(c, q->pool_dev[i]);
		mps_drv.cuEventDestroy(q->pool[i]);
	}
	free(q->pool);
	free(q->pool_dev);
	q->pool = NULL;
	q->pool_dev = NULL;
	q->pool_n = q->pool_cap = 0;
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
}

CUevent mps_comp_event(struct mps_client *c, int device)
{
	struct mps_completions *q = &c->comp;
	CUevent ev = NULL;

	pthread_mutex_lock(&q->lock);
	for (unsigned int i = q->pool_n; i-- > 0;) {
		if (q->pool_dev[i] == device) {
			ev = q->pool[i];
			q->pool[i] = q->pool[q->pool_n - 1];
			q->pool_dev[i] = q->pool_dev[q->pool_n - 1];
			q->pool_n--;
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	if (ev)
		return ev;
	/* Called from the worker, whose current context is device's. A plain
	 * event: see completion.h. */
	if (mps_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
		return NULL;
	return ev;
}

void mps_comp_event_put(struct mps_client *c, CUevent ev, int device)
{
	struct mps_completions *q = &c->comp;

	pthread_mutex_lock(&q->lock);
	if (q->pool_n == q->pool_cap) {
		unsigned int ncap = q->pool_cap ? q->pool_cap * 2 : 16;
		CUevent *np = realloc(q->pool, ncap * sizeof(*np));
		int *nd = np ? realloc(q->pool_dev, ncap * sizeof(*nd)) : NULL;

		if (np)
			q->pool = np;
		if (!nd) {
			pthread_mutex_unlock(&q->lock);
			/* Out of memory: drop the event rather than leak the lock. */
			mps_drv.cuEventDestroy(ev);
			return;
		}
		q->pool_dev = nd;
		q->pool_cap = ncap;
	}
	q->pool[q->pool_n] = ev;
	q->pool_dev[q->pool_n] = device;
	q->pool_n++;
	pthread_mutex_unlock(&q->lock);
}

static CUresult queue(struct mps_client *c, CUevent ev, bool pooled, int device, int kind, uint32_t index,
		      bool deferred_ok)
{
	struct mps_completions *q = &c->comp;
	struct mps_pending *p = calloc(1, sizeof(*p));

	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->ev = ev;
	p->pooled = pooled;
	p->kind = (uint8_t)kind;
	p->device = device;
	p->index = index;
	p->deferred_ok = deferred_ok;
	if (q->tail)
		q->tail->next = p;
	else
		q->head = p;
	q->tail = p;
	mps_store_relaxed(&q->count, q->count + 1);
	return CUDA_SUCCESS;
}

CUresult mps_comp_after(struct mps_client *c, CUstream stream, int device, int kind, uint32_t index,
			bool deferred_ok)
{
	CUevent ev = mps_comp_event(c, device);
	CUresult r;

	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mps_drv.cuEventRecord(ev, stream);
	if (r == CUDA_SUCCESS)
		r = queue(c, ev, true, device, kind, index, deferred_ok);
	if (r != CUDA_SUCCESS)
		mps_comp_event_put(c, ev, device);
	return r;
}

CUresult mps_comp_on_event(struct mps_client *c, CUevent ev, int device, int kind, uint32_t index,
			   bool deferred_ok)
{
	return queue(c, ev, false, device, kind, index, deferred_ok);
}

/* Has the GPU store DONE into *state (a reply slot's or a staging chunk's
 * word, whose result is *result) once the stream gets to this point; wake
 * is the word's number in MPS_OP_SLOT_WAKE. */
static bool gpu_store(struct mps_client *c, struct mps_sctx *ctx, struct mps_sstream *st, uint32_t *state,
		      int32_t *result, uint32_t wake)
{
	struct mps_completions *q = &c->comp;
	CUdeviceptr word = q->region_dp[ctx->device];
	CUstream stream = st ? st->s : ctx->join;
	uint32_t exp = MPS_SLOT_BUSY;
	CUresult r;

	if (!mps_srv.gpu_replies || !word || !stream || (st && mps_stream_capturing(c, st)))
		return false;
	mps_store_relaxed(result, CUDA_SUCCESS);   /* see mps__reply */
	/* Release: the result is visible before the word says GPU. A client
	 * already asleep (SLEEPING) is answered the usual way. */
	if (!mps_cas(state, &exp, MPS_SLOT_GPU))
		return false;
	word += (CUdeviceptr)((uint8_t *)state - (uint8_t *)c->region);
	/* With the default flags the write follows a memory barrier: the
	 * stream's earlier work, a copy into the slot's data or the chunk
	 * included, is visible before the word says DONE. */
	r = mps_drv.cuStreamWriteValue32_v2(stream, word, MPS_SLOT_DONE, 0);
	if (r != CUDA_SUCCESS) {
		/* Back to BUSY for the caller's completion; a client that went
		 * to sleep meanwhile sleeps as on BUSY (its wake message finds
		 * no GPU store and only wakes it). */
		exp = MPS_SLOT_GPU;
		if (!mps_cas(state, &exp, MPS_SLOT_BUSY))
			mps_store_release(state, MPS_SLOT_SLEEPING);
		q->gpu[wake].kind = MPS_GPU_NONE;
		return false;
	}
	q->gpu[wake] = (struct mps_gpu_reply){
		.kind = st ? MPS_GPU_STREAM : MPS_GPU_JOIN,
		.ctx = ctx->handle,
		.stream = st ? st->handle : 0,
	};
	mps_gpuwake_handed(c, wake, mps_now_ns());
	return true;
}

/* Has the GPU answer reply slot `slot` once the stream gets to this point:
 * st, or ctx's join stream if st is NULL (bound and ready). True if it
 * will; false if the caller must queue a completion (the client sleeps
 * already, an error of an earlier call is waiting to be reported, the
 * stream captures, the driver cannot). */
static bool gpu_reply(struct mps_client *c, struct mps_sctx *ctx, struct mps_sstream *st, uint32_t slot)
{
	struct mps_slot *s = mps__slot(c, slot);

	/* An earlier call's error is reported by the server's reply. */
	if (mps_load_relaxed(&c->deferred) != CUDA_SUCCESS)
		return false;
	return gpu_store(c, ctx, st, &s->state, &s->result, slot);
}

CUresult mps_comp_after_stream(struct mps_client *c, struct mps_sstream *st, int kind, uint32_t index,
			       bool deferred_ok)
{
	struct mps_completions *q = &c->comp;
	CUresult r;

	if (kind == MPS_PEND_REPLY && deferred_ok && gpu_reply(c, st->ctx, st, index))
		return CUDA_SUCCESS;
	r = queue(c, NULL, true, st->ctx->device, kind, index, deferred_ok);

	if (r != CUDA_SUCCESS)
		return r;
	q->tail->lazy = st;
	q->tail->lazy_next = st->lazy;
	st->lazy = q->tail;
	return CUDA_SUCCESS;
}

CUresult mps_comp_after_join(struct mps_client *c, struct mps_sctx *ctx, uint32_t slot)
{
	if (gpu_reply(c, ctx, NULL, slot))
		return CUDA_SUCCESS;
	return mps_comp_after(c, ctx->join, ctx->device, MPS_PEND_REPLY, slot, true);
}

bool mps_comp_gpu_stage(struct mps_client *c, struct mps_sstream *st, uint32_t stage)
{
	struct mps_region *reg = c->region;

	return gpu_store(c, st->ctx, st, &reg->stage_state[stage], &reg->stage_result[stage], MPS_WAKE_STAGE(stage));
}

void mps_comp_gpu_wake(struct mps_client *c, uint32_t w)
{
	struct mps_gpu_reply *g = &c->comp.gpu[w];
	struct mps_sctx *x = g->kind ? mps__obj(c, g->ctx, MPS_H_CTX) : NULL;
	CUstream s = NULL;
	CUresult r;

	if (mps_load_acquire(wake_word(c, w)) == MPS_SLOT_DONE) {
		/* Stored already (and the sleeper woken, or about to be, by
		 * gpuwake.c): nothing to wait for. */
		g->kind = MPS_GPU_NONE;
		wake_answer(c, w, CUDA_SUCCESS);
		return;
	}
	if (x && mps__bind_device(c, x->device) == CUDA_SUCCESS) {
		if (g->kind == MPS_GPU_JOIN) {
			s = x->join;
		} else {
			struct mps_sstream *st = g->stream ? mps_stream_resolve(c, x, g->stream, &r) : x->legacy;

			if (st && !mps_stream_capturing(c, st))
				s = st->s;
		}
	}
	g->kind = MPS_GPU_NONE;
	/* A stream that is done has made the store: wake the client now.
	 * Else an event recorded now follows the store, and its completion
	 * wakes the client. Without a stream to look at (destroyed since: its
	 * work is queued still, but nothing to wait on is left), wake the
	 * client at once; it sleeps again, a bounded sleep, if the store has
	 * not come yet. A stream that reports an error has failed (a fault):
	 * the GPU will never answer, and the error is the reply. */
	r = s ? mps_drv.cuStreamQuery(s) : CUDA_SUCCESS;
	if (r == CUDA_ERROR_NOT_READY) {
		r = mps_comp_after(c, s, x->device, MPS_PEND_WAKE, w, false);
		if (r == CUDA_SUCCESS)
			return;   /* its completion answers */
	}
	wake_answer(c, w, r);
}

CUresult mps_comp_settle(struct mps_client *c, struct mps_sstream *st)
{
	CUresult first = CUDA_SUCCESS;

	while (st->lazy) {
		struct mps_pending *p = st->lazy;
		CUevent ev = mps_comp_event(c, p->device);
		CUresult r;

		r = ev ? mps_drv.cuEventRecord(ev, st->s) : CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS) {
			p->ev = ev;
		} else {
			/* No event to stand for the stream: wait for it here,
			 * once, so that nothing polls the stream after it is
			 * gone. Its result is the completion's. */
			if (ev)
				mps_comp_event_put(c, ev, p->device);
			p->result = mps_drv.cuStreamSynchronize(st->s);
			p->known = true;
			if (first == CUDA_SUCCESS)
				first = r;
		}
		unlazy(p);
	}
	return first;
}

unsigned int mps_comp_poll(struct mps_client *c)
{
	struct mps_completions *q = &c->comp;
	struct mps_pending **pp = &q->head, *prev = NULL;
	unsigned int done = 0;

	while (*pp) {
		struct mps_pending *p = *pp;
		CUresult r;

		mps__bind_device(c, p->device);
		if (p->kind == MPS_PEND_WAKE && mps_load_acquire(wake_word(c, p->index)) == MPS_SLOT_DONE)
			r = CUDA_SUCCESS;   /* stored: the event, recorded later, may be far behind */
		else if (p->lazy)
			r = mps_drv.cuStreamQuery(p->lazy->s);
		else
			r = p->ev ? mps_drv.cuEventQuery(p->ev) : eventless(p);
		if (r == CUDA_ERROR_NOT_READY) {
			prev = p;
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (q->tail == p)
			q->tail = prev;
		mps_store_relaxed(&q->count, q->count - 1);
		finish(c, p, r);
		done++;
	}
	return done;
}

/* Records p's mirror: a blocking-sync event on the device's helper stream,
 * behind p's event. Without one the waiter spins on p's event instead. */
static void mirror(struct mps_client *c, struct mps_pending *p)
{
	struct mps_completions *q = &c->comp;
	CUstream *h = &q->helper[p->device];
	CUevent m;

	if (!p->ev || mps__bind_device(c, p->device) != CUDA_SUCCESS)
		return;
	/* A stream of the server's own that runs no work, only waits: a raw
	 * one (streams.c counts it), not a client's. */
	if (!*h && mps_stream_raw_new(p->device, NULL, 0, h) != CUDA_SUCCESS)
		return;
	if (mps_drv.cuEventCreate(&m, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS)
		return;
	if (mps_drv.cuStreamWaitEvent(*h, p->ev, 0) != CUDA_SUCCESS || mps_drv.cuEventRecord(m, *h) != CUDA_SUCCESS) {
		mps_drv.cuEventDestroy(m);
		return;
	}
	p->mirror = m;
}

void mps_comp_handoff(struct mps_client *c)
{
	struct mps_completions *q = &c->comp;

	if (!q->head)
		return;
	for (struct mps_pending *p = q->head; p; p = p->next) {
		/* The waiter waits on events: a lazy one gets its event now (or,
		 * if none can be made, the waiter answers it with an error). */
		if (p->lazy && (mps__bind_device(c, p->device) != CUDA_SUCCESS || mps_comp_settle(c, p->lazy) != CUDA_SUCCESS)) {
			unlazy(p);
			continue;
		}
		mirror(c, p);
	}
	pthread_mutex_lock(&q->lock);
	if (q->wait_tail)
		q->wait_tail->next = q->head;
	else
		q->wait_head = q->head;
	q->wait_tail = q->tail;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	q->head = q->tail = NULL;
	mps_store_relaxed(&q->count, 0);
}
