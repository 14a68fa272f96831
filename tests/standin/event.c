// SPDX-License-Identifier: MIT
/*
 * Events, and streams waiting for them.
 *
 * cuEventRecord captures "the stream's work so far" as a record: a small
 * refcounted object queued on the stream as an operation, reached (and
 * timestamped with CLOCK_MONOTONIC) when the stream thread gets to it. The
 * event points at its latest record; re-recording replaces the pointer, so
 * queries and synchronizes see the latest record while a cuStreamWaitEvent
 * issued earlier keeps waiting for the record it captured. An event never
 * recorded has no record and is complete.
 *
 * A record dropped because its context died is completed with the error, so
 * nothing waits for it forever.
 *
 * Recorded on a capturing stream, an event instead remembers where the
 * capture stood (capture.c): a stream that waits for it then follows those
 * nodes, joining the capture if it was not in it. Queried or synchronized,
 * such an event refuses, as capture work has not run.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct si_event {
	uintptr_t handle;
	struct si_context *ctx;
	unsigned flags;
	struct si_record *rec;          /* latest record, referenced; NULL: never recorded */
	struct si_list link;            /* in ctx->events */
	/* Last recorded in a capture (cap_id names it: captures come and go). */
	struct si_capture *cap;
	uint64_t cap_id;
	struct si_gnode **cap_deps;
	unsigned ncap_deps;
	struct si_stream *cap_from;
	uint64_t cap_ops;
};

struct si_capture *mps__capture_live(struct si_capture *cap, uint64_t id);

struct si_op *mps__event_wait_op(CUevent ev, CUresult *rc)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);
	struct si_op *op;

	*rc = e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (!e || !e->rec)
		return NULL;    /* never recorded: nothing to wait for */
	op = mps__op_new(SI_OP_WAIT);
	if (!op) {
		*rc = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	op->rec = e->rec;
	op->rec->refs++;
	return op;
}

struct si_capture *mps__event_capture(CUevent ev, struct si_gnode ***deps, unsigned *ndeps,
				      struct si_stream **from, uint64_t *ops)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);

	if (!e || !e->cap || !mps__capture_live(e->cap, e->cap_id))
		return NULL;
	*deps = e->cap_deps;
	*ndeps = e->ncap_deps;
	*from = e->cap_from;
	*ops = e->cap_ops;
	return e->cap;
}

void mps__event_set_capture(CUevent ev, struct si_capture *cap, struct si_gnode *const *deps, unsigned ndeps,
			    struct si_stream *from, uint64_t ops)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);
	struct si_gnode **d = ndeps ? malloc(ndeps * sizeof(*d)) : NULL;

	if (!e || (ndeps && !d)) {
		free(d);
		return;
	}
	if (ndeps)
		memcpy(d, deps, ndeps * sizeof(*d));
	free(e->cap_deps);
	e->cap = cap;
	e->cap_id = cap->id;
	e->cap_deps = d;
	e->ncap_deps = ndeps;
	e->cap_from = from;
	e->cap_ops = ops;
}

struct si_record *mps__record_new(void)
{
	struct si_record *rec = calloc(1, sizeof(*rec));

	if (rec)
		rec->refs = 1;
	return rec;
}

void mps__record_put(struct si_record *rec)
{
	if (--rec->refs == 0)
		free(rec);
}

void mps__record_complete(struct si_record *rec, CUresult err)
{
	if (err == CUDA_SUCCESS) {
		clock_gettime(CLOCK_MONOTONIC, &rec->at);
		rec->timed = true;
	} else {
		rec->err = err;
	}
	rec->done = true;
}

CUresult mps__event_record(struct si_context *ctx, struct si_stream *s, CUevent ev)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);
	struct si_record *rec;
	struct si_op *op;

	if (!e || e->ctx != ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	rec = mps__record_new();
	op = mps__op_new(SI_OP_RECORD);
	if (!rec || !op) {
		free(rec);
		free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	rec->refs++;            /* the event's and the operation's */
	op->rec = rec;
	if (e->rec)
		mps__record_put(e->rec);
	e->rec = rec;
	e->cap = NULL;          /* recorded outside any capture now */
	mps__submit(s, op);
	return CUDA_SUCCESS;
}

CUresult mps__event_check(CUevent ev, struct si_context *ctx)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);

	return e && e->ctx == ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void event_free(struct si_event *e)
{
	mps__handle_remove(e->handle);
	si_list_del(&e->link);
	if (e->rec)
		mps__record_put(e->rec);
	free(e->cap_deps);
	free(e);
}

void mps__events_drop_context(struct si_context *ctx)
{
	while (!si_list_empty(&ctx->events))
		event_free(si_container_of(ctx->events.next, struct si_event, link));
}

CU_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct si_context *ctx;
	struct si_event *e;
	CUresult rc;
	const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phEvent || (Flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	e = calloc(1, sizeof(*e));
	if (!e)
		goto out_unlock;
	e->handle = mps__handle_add(SI_H_EVENT, e);
	if (!e->handle) {
		free(e);
		goto out_unlock;
	}
	e->ctx = ctx;
	e->flags = Flags;
	si_list_add(&ctx->events, &e->link);
	*phEvent = (CUevent)e->handle;
	rc = CUDA_SUCCESS;
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	struct si_context *ctx;
	struct si_stream *s;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc == CUDA_SUCCESS && s->cap)
		rc = mps__capture_record(s, hEvent);
	else if (rc == CUDA_SUCCESS)
		rc = mps__event_record(ctx, s, hEvent);
	mps__unlock();
	return rc;
}

CU_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return cuEventRecordWithFlags(hEvent, hStream, CU_EVENT_RECORD_DEFAULT);
}

CU_API CUresult cuEventQuery(CUevent hEvent)
{
	struct si_event *e;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	e = mps__handle_get((uintptr_t)hEvent, SI_H_EVENT);
	if (e && e->cap && mps__capture_live(e->cap, e->cap_id)) {
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* its work is in a graph, not run */
	} else if (e) {
		rc = e->ctx->sticky;
		if (rc == CUDA_SUCCESS && e->rec)
			rc = e->rec->done ? e->rec->err : CUDA_ERROR_NOT_READY;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuEventSynchronize(CUevent hEvent)
{
	struct si_event *e;
	struct si_context *ctx;
	struct si_record *rec;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	e = mps__handle_get((uintptr_t)hEvent, SI_H_EVENT);
	if (!e)
		goto out_unlock;
	if (e->cap && mps__capture_live(e->cap, e->cap_id)) {
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out_unlock;
	}
	ctx = e->ctx;           /* contexts live forever; the event may not */
	rec = e->rec;
	rc = CUDA_SUCCESS;
	if (rec) {
		rec->refs++;
		while (!rec->done)      /* reached, or dropped with an error */
			mps__wait();
		rc = rec->err;
		mps__record_put(rec);
	}
	if (ctx->sticky != CUDA_SUCCESS)
		rc = ctx->sticky;
out_unlock:
	mps__unlock();
	mps__printf_flush();
	return rc;
}

CU_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct si_event *a, *b;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	a = mps__handle_get((uintptr_t)hStart, SI_H_EVENT);
	b = mps__handle_get((uintptr_t)hEnd, SI_H_EVENT);
	if (!a || !b || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) || !a->rec || !b->rec) {
		rc = CUDA_ERROR_INVALID_HANDLE;
	} else if ((rc = a->ctx->sticky) != CUDA_SUCCESS || (rc = b->ctx->sticky) != CUDA_SUCCESS) {
		/* the context is dead */
	} else if (!a->rec->done || !b->rec->done) {
		rc = CUDA_ERROR_NOT_READY;
	} else if (!a->rec->timed || !b->rec->timed) {
		rc = a->rec->err != CUDA_SUCCESS ? a->rec->err : b->rec->err;
	} else {
		double ms = (double)(b->rec->at.tv_sec - a->rec->at.tv_sec) * 1e3 +
			    (double)(b->rec->at.tv_nsec - a->rec->at.tv_nsec) / 1e6;

		*pMilliseconds = (float)ms;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
	struct si_event *e;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	e = mps__handle_get((uintptr_t)hEvent, SI_H_EVENT);
	if (e) {
		/* A queued record of it still completes: the operation holds
		 * its own reference. */
		rc = e->ctx->sticky;
		event_free(e);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_event *e;
	struct si_op *op;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	e = mps__handle_get((uintptr_t)hEvent, SI_H_EVENT);
	if (!e) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out_unlock;
	}
	if (s->cap || (e->cap && mps__capture_live(e->cap, e->cap_id))) {
		rc = mps__capture_wait(s, hEvent);
		goto out_unlock;
	}
	if (!e->rec)
		goto out_unlock;        /* never recorded: nothing to wait for */
	op = mps__op_new(SI_OP_WAIT);
	if (!op) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unlock;
	}
	/* The record captured now; re-recording the event later changes nothing. */
	op->rec = e->rec;
	op->rec->refs++;
	mps__submit(s, op);
out_unlock:
	mps__unlock();
	return rc;
}

int mps__event_flags(CUevent ev)
{
	struct si_event *e = mps__handle_get((uintptr_t)ev, SI_H_EVENT);

	return e ? (int)e->flags : -1;
}
