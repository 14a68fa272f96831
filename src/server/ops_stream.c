// SPDX-License-Identifier: MIT
/*
 * Streams and events. Synchronizing calls never block the worker: the GPU
 * answers them itself (a store into the reply slot queued on the stream), or
 * they queue a completion (completion.h) that answers the client when the GPU
 * gets there, so the client's other threads keep submitting meanwhile. An event
 * synchronize is taken through the context's join stream (wait for the event,
 * record an internal one): that captures the event's record at the moment of
 * the call, as cuEventSynchronize does, and never touches the client's event
 * after the client might have destroyed it.
 */
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/gpuwake.h"
#include "server/server.h"
#include "server/streams.h"

void mps__op_stream_create(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_stream_create *q = (const void *)m;
	struct mps_sctx *x = mps__msg_ctx(c, m);
	struct mps_sstream *st;
	int prio = q->priority;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (q->flags & ~(unsigned int)CU_STREAM_NON_BLOCKING) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	/* CUDA clamps priorities into the device's range. */
	if (prio > mps_srv.prio_least)
		prio = mps_srv.prio_least;
	if (prio < mps_srv.prio_greatest)
		prio = mps_srv.prio_greatest;
	r = mps_stream_new(c, x, q->flags, prio, &st);
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	st->handle = mps_handle_new(&c->handles, MPS_H_STREAM, st);
	if (!st->handle) {
		mps_stream_free(c, st);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	mps__slot(c, m->slot)->val[0] = st->handle;
	mps__slot(c, m->slot)->val[1] = (uint64_t)(int64_t)prio;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_stream_destroy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_sstream *st = mps__obj(c, q->handle, MPS_H_STREAM);

	if (!st) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy");
		return;
	}
	mps_handle_del(&c->handles, st->handle);
	mps_stream_free(c, st);
}

/* The stream a synchronize or query names, its device bound. For the legacy
 * stream the ordering step makes it wait for the blocking streams too, as a
 * synchronize on it does in CUDA. */
static struct mps_sstream *stream_to_wait(struct mps_client *c, const struct mps_msg *m, CUresult *r)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_sstream *st;

	st = q->handle ? mps_stream_resolve(c, NULL, q->handle, r) : mps_stream_for_work(c, m, 0, r);
	if (st)
		*r = mps__bind_device(c, st->ctx->device);
	return st && *r == CUDA_SUCCESS ? st : NULL;
}

void mps__op_stream_sync(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_sstream *st;
	CUresult r;

	st = stream_to_wait(c, m, &r);
	if (st)
		r = mps_comp_after_stream(c, st, MPS_PEND_REPLY, m->slot, true);
	if (r != CUDA_SUCCESS)
		mps__reply(c, m->slot, r);
}

void mps__op_stream_fence(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_sstream *st;
	CUresult r;

	st = stream_to_wait(c, m, &r);
	if (st)
		r = mps_stream_fence(c, st);
	if (r == CUDA_SUCCESS)   /* a synchronize the client answered */
		mps_store_relaxed(&c->fences, c->fences + 1);
	mps__defer_error(c, r, "cuStreamSynchronize");
}

void mps__op_stream_query(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_sstream *st;
	CUresult r;

	st = stream_to_wait(c, m, &r);
	if (st)
		r = mps_drv.cuStreamQuery(st->s);
	mps__reply(c, m->slot, r);
}

void mps__op_stream_wait_event(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_stream_wait *q = (const void *)m;
	struct mps_sevent *e = mps__obj(c, q->event, MPS_H_EVENT);
	struct mps_sstream *st;
	CUresult r;

	if (!e) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent");
		return;
	}
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (st)
		r = mps_drv.cuStreamWaitEvent(st->s, e->ev, q->flags);
	mps__defer_error(c, r, "cuStreamWaitEvent");
}

void mps__op_event_create(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_event_create *q = (const void *)m;
	const unsigned int known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
	struct mps_sctx *x = mps__msg_ctx(c, m);
	struct mps_sevent *e;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (q->flags & ~known) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if ((q->flags & CU_EVENT_INTERPROCESS) && !(q->flags & CU_EVENT_DISABLE_TIMING)) {
		/* As the driver: an interprocess event must not record timing. */
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuEventCreate(&e->ev, q->flags);
	if (r != CUDA_SUCCESS) {
		free(e);
		mps__reply(c, m->slot, r);
		return;
	}
	e->ctx = x;
	e->flags = q->flags;
	e->handle = mps_handle_new(&c->handles, MPS_H_EVENT, e);
	if (!e->handle) {
		mps_drv.cuEventDestroy(e->ev);
		free(e);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	mps__slot(c, m->slot)->val[0] = e->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_event_destroy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_sevent *e = mps__obj(c, q->handle, MPS_H_EVENT);

	if (!e) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy");
		return;
	}
	mps__event_free(c, e);
}

void mps__op_event_record(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_event_record *q = (const void *)m;
	struct mps_sevent *e = mps__obj(c, q->event, MPS_H_EVENT);
	struct mps_sstream *st;
	CUresult r;

	if (!e) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuEventRecord");
		return;
	}
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (st && st->ctx->device != e->ctx->device)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (st)
		r = q->flags ? mps_drv.cuEventRecordWithFlags(e->ev, st->s, q->flags) : mps_drv.cuEventRecord(e->ev, st->s);
	mps__defer_error(c, r, "cuEventRecord");
}

void mps__op_event_sync(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_sevent *e = mps__obj(c, q->handle, MPS_H_EVENT);
	struct mps_sctx *x;
	CUstream join;
	CUresult r;

	if (!e) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	x = e->ctx;
	r = mps__bind_device(c, x->device);
	/* An event recorded in a capture: waiting for it would join our stream
	 * to the capture; the driver refuses to synchronize it anyway. */
	if (r == CUDA_SUCCESS && c->captures) {
		r = mps_drv.cuEventQuery(e->ev);
		if (r == CUDA_ERROR_NOT_READY)
			r = CUDA_SUCCESS;
	}
	if (r == CUDA_SUCCESS)
		r = mps_stream_join(c, x, &join);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuStreamWaitEvent(join, e->ev, 0);
	if (r == CUDA_SUCCESS)
		r = mps_comp_after_join(c, x, m->slot);
	if (r != CUDA_SUCCESS)
		mps__reply(c, m->slot, r);
}

void mps__op_slot_wake(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;

	if (q->handle >= MPS_WAKE_COUNT) {
		mps_log_warn("client %d asked to be woken on word %u (of %u); ignored", (int)c->pid, q->handle,
			     MPS_WAKE_COUNT);
		return;
	}
	mps_gpuwake_note(mps_now_ns());
	mps_comp_gpu_wake(c, q->handle);
}

void mps__op_event_query(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_sevent *e = mps__obj(c, q->handle, MPS_H_EVENT);
	CUresult r;

	if (!e) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	r = mps__bind_device(c, e->ctx->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuEventQuery(e->ev);
	mps__reply(c, m->slot, r);
}

void mps__op_event_elapsed(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_elapsed *q = (const void *)m;
	struct mps_sevent *a = mps__obj(c, q->start, MPS_H_EVENT);
	struct mps_sevent *b = mps__obj(c, q->end, MPS_H_EVENT);
	float ms = 0;
	uint32_t bits;
	CUresult r;

	if (!a || !b) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	r = mps__bind_device(c, a->ctx->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuEventElapsedTime(&ms, a->ev, b->ev);
	memcpy(&bits, &ms, sizeof(bits));
	mps__slot(c, m->slot)->val[0] = bits;
	mps__reply(c, m->slot, r);
}
