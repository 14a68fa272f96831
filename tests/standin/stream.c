// SPDX-License-Identifier: MIT
/*
 * Streams: each is a thread with a FIFO of operations (copy, memset, kernel,
 * event record, event wait) that it runs in order, one at a time, while the
 * caller goes on — the asynchrony the server relies on. Different streams run
 * concurrently. The thread takes the next operation under the stand-in lock
 * and runs copies and kernels with the lock dropped.
 *
 * The legacy stream (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) has no
 * thread: an operation on it waits until all work submitted to the context's
 * streams so far has completed, then runs in the caller, so it is ordered
 * after everything before it and everything after it is ordered after it.
 *
 * Lifetime: a stream is referenced by its handle, by its thread and by any
 * caller waiting on it. cuStreamDestroy drops the handle at once; queued work
 * still runs and the thread exits when the queue is empty, as with the real
 * driver. A context reset kills its streams: their queued work is dropped and
 * the reset waits for every thread to exit. Once the context has a sticky
 * error its streams drop their work too, completing it with that error.
 */
#include <signal.h>
#include <stdlib.h>

#include "standin.h"

static uint64_t serial;         /* last serial handed to an operation */

bool mps__stream_is_legacy(CUstream h)
{
	return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

CUresult mps__stream_enter(CUstream h, struct si_context **ctx, struct si_stream **s)
{
	struct si_context *cur;
	struct si_stream *st;
	CUresult rc = mps__ctx_enter(&cur);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (mps__stream_is_legacy(h)) {
		*ctx = cur;
		*s = NULL;
		return CUDA_SUCCESS;
	}
	st = mps__handle_get((uintptr_t)h, SI_H_STREAM);
	if (!st)
		return CUDA_ERROR_INVALID_HANDLE;
	if (st->ctx->sticky != CUDA_SUCCESS)
		return st->ctx->sticky;
	*ctx = st->ctx;
	*s = st;
	return CUDA_SUCCESS;
}

void mps__stream_put(struct si_stream *s)
{
	if (--s->refs)
		return;
	pthread_cond_destroy(&s->wake);
	free(s);
}

/* Completes an operation: reaches its record, wakes its waiter, frees it. */
static void finish(struct si_op *op, CUresult res)
{
	if (op->kind == SI_OP_RECORD)
		mps__record_complete(op->rec, res);
	if (op->waiter) {
		op->waiter->done = true;
		op->waiter->result = res;
	}
	mps__op_free(op);
	mps__progress();
}

/* Runs one operation of a stream thread. Under the lock; drops it while a
 * copy or kernel runs. Returns the operation's result. */
static CUresult dispatch(struct si_stream *s, struct si_op *op)
{
	struct si_context *ctx = s->ctx;
	CUresult res;

	if (s->killed)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (ctx->sticky != CUDA_SUCCESS)
		return ctx->sticky;
	switch (op->kind) {
	case SI_OP_RECORD:
		return CUDA_SUCCESS;
	case SI_OP_WAIT:
		while (!op->rec->done && !s->killed && ctx->sticky == CUDA_SUCCESS)
			mps__wait();
		if (s->killed)
			return CUDA_ERROR_CONTEXT_IS_DESTROYED;
		return ctx->sticky;
	default:
		mps__unlock();
		res = mps__op_execute(op, ctx->device);
		mps__lock();
		if (res != CUDA_SUCCESS)
			mps__ctx_fault(ctx, res);
		return res;
	}
}

static void *stream_thread(void *arg)
{
	struct si_stream *s = arg;
	struct si_context *ctx = s->ctx;

	mps__lock();
	for (;;) {
		struct si_op *op;
		CUresult res;

		while (!s->head && !s->destroyed && !s->killed)
			mps__wait_on(&s->wake);
		op = s->head;
		if (!op)
			break;          /* destroyed or killed, and drained */
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->running = op;
		res = dispatch(s, op);
		s->running = NULL;
		s->completed++;
		finish(op, res);
	}
	si_list_del(&s->link);
	ctx->nstreams--;
	mps__progress();        /* a reset waits for its streams' threads */
	mps__stream_put(s);
	mps__unlock();
	return NULL;
}

/* Runs an operation of the legacy stream in the caller. Under the lock. */
static CUresult run_inline(struct si_context *ctx, struct si_op *op)
{
	CUresult res;

	mps__ctx_quiesce(ctx);
	if (ctx->state != SI_CTX_ACTIVE) {
		res = CUDA_ERROR_CONTEXT_IS_DESTROYED;
	} else if (ctx->sticky != CUDA_SUCCESS) {
		res = ctx->sticky;
	} else if (op->kind == SI_OP_RECORD) {
		res = CUDA_SUCCESS;
	} else if (op->kind == SI_OP_WAIT) {
		while (!op->rec->done && ctx->sticky == CUDA_SUCCESS && ctx->state == SI_CTX_ACTIVE)
			mps__wait();
		res = ctx->state == SI_CTX_ACTIVE ? ctx->sticky : CUDA_ERROR_CONTEXT_IS_DESTROYED;
	} else {
		/* Counted so that a reset waits for it before freeing memory. */
		ctx->inline_ops++;
		mps__unlock();
		res = mps__op_execute(op, ctx->device);
		mps__lock();
		ctx->inline_ops--;
		if (res != CUDA_SUCCESS)
			mps__ctx_fault(ctx, res);
	}
	finish(op, res);
	return res;
}

CUresult mps__submit(struct si_context *ctx, struct si_stream *s, struct si_op *op)
{
	if (!s)
		return run_inline(ctx, op);
	op->serial = ++serial;
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->enqueued++;
	pthread_cond_signal(&s->wake);
	return CUDA_SUCCESS;
}

CUresult mps__submit_wait(struct si_context *ctx, struct si_stream *s, struct si_op *op)
{
	struct si_waiter w = { .done = false, .result = CUDA_SUCCESS };

	op->waiter = &w;
	mps__submit(ctx, s, op);
	while (!w.done)         /* the operation always completes: run or dropped */
		mps__wait();
	return w.result;
}

/* Serial of the oldest operation of s not yet completed; UINT64_MAX when idle. */
static uint64_t oldest(const struct si_stream *s)
{
	if (s->running)
		return s->running->serial;
	return s->head ? s->head->serial : UINT64_MAX;
}

/*
 * Serials are handed out in submission order, so "everything submitted so
 * far" is "every operation with a serial up to now". Waiting on that, rather
 * than on the streams going idle, cannot be starved by work submitted later.
 */
void mps__ctx_quiesce(struct si_context *ctx)
{
	uint64_t target = serial;

	for (;;) {
		bool busy = ctx->inline_ops > 0;

		for (struct si_list *l = ctx->streams.next; !busy && l != &ctx->streams; l = l->next)
			busy = oldest(si_container_of(l, struct si_stream, link)) <= target;
		if (!busy)
			return;
		mps__wait();
	}
}

void mps__streams_kill(struct si_context *ctx)
{
	for (struct si_list *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct si_stream *s = si_container_of(l, struct si_stream, link);

		s->killed = true;
		if (s->handle) {
			mps__handle_remove(s->handle);
			s->handle = 0;
			mps__stream_put(s);     /* the handle's reference; the thread holds one */
		}
		pthread_cond_signal(&s->wake);
	}
	mps__progress();        /* threads waiting for an event */
	while (ctx->nstreams || ctx->inline_ops)
		mps__wait();
}

static CUresult stream_create(CUstream *phStream, unsigned flags, int priority)
{
	struct si_context *ctx;
	struct si_stream *s;
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t all, old;
	CUresult rc;
	int err;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	/* Out-of-range priorities are clamped, as cuda.h documents. */
	if (priority < -5)
		priority = -5;
	if (priority > 0)
		priority = 0;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out_unlock;
	if (pthread_cond_init(&s->wake, NULL))
		goto out_free;
	s->ctx = ctx;
	s->flags = flags;
	s->priority = priority;
	s->refs = 2;            /* the handle and the thread */
	s->handle = mps__handle_add(SI_H_STREAM, s);
	if (!s->handle)
		goto out_cond;
	/* The thread takes no signals: they belong to the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, stream_thread, s);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto out_handle;
	si_list_add(&ctx->streams, &s->link);
	ctx->nstreams++;
	*phStream = (CUstream)s->handle;
	mps__unlock();
	return CUDA_SUCCESS;

out_handle:
	mps__handle_remove(s->handle);
out_cond:
	pthread_cond_destroy(&s->wake);
out_free:
	free(s);
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

CU_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return stream_create(phStream, flags, priority);
}

CU_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
	struct si_stream *s;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	s = mps__stream_is_legacy(hStream) ? NULL : mps__handle_get((uintptr_t)hStream, SI_H_STREAM);
	if (s) {
		/* Returns at once; the thread finishes the queue, then exits. */
		mps__handle_remove(s->handle);
		s->handle = 0;
		s->destroyed = true;
		pthread_cond_signal(&s->wake);
		rc = s->ctx->sticky;
		mps__stream_put(s);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuStreamSynchronize(CUstream hStream)
{
	struct si_context *ctx;
	struct si_stream *s;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	if (mps__stream_is_legacy(hStream)) {
		rc = mps__ctx_current(&ctx);
		if (rc == CUDA_SUCCESS) {
			mps__ctx_quiesce(ctx);
			rc = ctx->state == SI_CTX_ACTIVE ? ctx->sticky : CUDA_ERROR_CONTEXT_IS_DESTROYED;
		}
	} else if ((s = mps__handle_get((uintptr_t)hStream, SI_H_STREAM))) {
		uint64_t target = s->enqueued;

		s->refs++;
		while (s->completed < target)
			mps__wait();
		rc = s->killed ? CUDA_ERROR_CONTEXT_IS_DESTROYED : s->ctx->sticky;
		mps__stream_put(s);
	} else {
		rc = CUDA_ERROR_INVALID_HANDLE;
	}
	mps__unlock();
	return rc;
}

static bool ctx_idle(const struct si_context *ctx)
{
	if (ctx->inline_ops)
		return false;
	for (const struct si_list *l = ctx->streams.next; l != &ctx->streams; l = l->next)
		if (oldest(si_container_of(l, struct si_stream, link)) != UINT64_MAX)
			return false;
	return true;
}

CU_API CUresult cuStreamQuery(CUstream hStream)
{
	struct si_context *ctx;
	struct si_stream *s;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	if (mps__stream_is_legacy(hStream)) {
		/* The legacy stream is done when every stream of the context is. */
		rc = mps__ctx_enter(&ctx);
		if (rc == CUDA_SUCCESS && !ctx_idle(ctx))
			rc = CUDA_ERROR_NOT_READY;
	} else if ((s = mps__handle_get((uintptr_t)hStream, SI_H_STREAM))) {
		rc = s->ctx->sticky;
		if (rc == CUDA_SUCCESS && s->completed != s->enqueued)
			rc = CUDA_ERROR_NOT_READY;
	} else {
		rc = CUDA_ERROR_INVALID_HANDLE;
	}
	mps__unlock();
	return rc;
}
