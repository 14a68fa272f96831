// SPDX-License-Identifier: MIT
/*
 * Streams: each is a thread with a FIFO of operations (copy, memset, kernel,
 * event record, event wait) that it runs in order, one at a time, while the
 * caller goes on — the asynchrony the server relies on. Different streams run
 * concurrently. The thread takes the next operation under the stand-in lock
 * and runs copies and kernels with the lock dropped.
 *
 * The legacy stream (0, CU_STREAM_LEGACY, and CU_STREAM_PER_THREAD, which the
 * stand-in does not tell apart) is a stream of the context like the others,
 * started on first use, with the real driver's implicit synchronization: an
 * operation on it waits for all work submitted earlier to the context's
 * blocking streams (those created without CU_STREAM_NON_BLOCKING), and an
 * operation on a blocking stream waits for all work submitted earlier to the
 * legacy stream. Every operation carries a serial number in submission order,
 * and these waits are always for lower serials, so they cannot deadlock.
 *
 * Lifetime: a stream is referenced by its handle (the context, for the legacy
 * stream), by its thread and by any caller waiting on it. cuStreamDestroy
 * drops the handle at once; queued work still runs and the thread exits when
 * the queue is empty, as with the real driver. A context reset kills its
 * streams: their queued work is dropped and the reset waits for every thread
 * to exit. Once the context has a sticky error its streams drop their work
 * too, completing it with that error.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "standin.h"

static uint64_t serial;         /* last serial handed to an operation */

bool mps__stream_is_legacy(CUstream h)
{
	return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

void mps__stream_put(struct si_stream *s)
{
	if (--s->refs)
		return;
	pthread_cond_destroy(&s->wake);
	free(s->cap_deps);
	free(s);
}

/* Serial of the oldest operation of s not yet completed; UINT64_MAX when idle. */
static uint64_t oldest(const struct si_stream *s)
{
	if (s->running)
		return s->running->serial;
	return s->head ? s->head->serial : UINT64_MAX;
}

static bool blocking(const struct si_stream *s)
{
	return !(s->flags & CU_STREAM_NON_BLOCKING) && s != s->ctx->legacy;
}

/* The legacy stream's implicit synchronization: has every operation that
 * op must follow, on other streams, completed? */
static bool barrier_passed(const struct si_stream *s, const struct si_op *op)
{
	struct si_context *ctx = s->ctx;

	if (s == ctx->legacy) {
		for (struct si_list *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
			struct si_stream *b = si_container_of(l, struct si_stream, link);

			if (blocking(b) && oldest(b) < op->serial)
				return false;
		}
		return true;
	}
	return !blocking(s) || !ctx->legacy || oldest(ctx->legacy) > op->serial;
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

/* Why s must drop its work now, or CUDA_SUCCESS. */
static CUresult dropped(const struct si_stream *s)
{
	return s->killed ? CUDA_ERROR_CONTEXT_IS_DESTROYED : s->ctx->sticky;
}

/* Whether a stream waiting on a word must give up (reset or destroyed with
 * its context). Without the lock. */
static bool stream_gone(void *arg)
{
	struct si_stream *s = arg;
	bool gone;

	mps__lock();
	gone = dropped(s) != CUDA_SUCCESS;
	mps__unlock();
	return gone;
}

/* OPENMPS_STANDIN_SLOW_COPY_MS=MS: a copy into device or registered
 * memory lands MS milliseconds late, so that a test can see whether what
 * should follow it does. The delay op must wait; under the lock. */
static useconds_t slow_copy_us(const struct si_op *op)
{
	static long ms = -1;

	if (ms < 0) {
		const char *v = getenv("OPENMPS_STANDIN_SLOW_COPY_MS");

		ms = v ? strtol(v, NULL, 10) : 0;
		if (ms < 0 || ms > 10000)
			ms = 0;
	}
	return ms && op->kind == SI_OP_COPY && op->copy.pin_dst ? (useconds_t)(ms * 1000) : 0;
}

/* Runs one operation of a stream thread. Under the lock; drops it while a
 * copy, kernel, host function or wait on a word runs. Returns the
 * operation's result. */
static CUresult dispatch(struct si_stream *s, struct si_op *op)
{
	struct si_context *ctx = s->ctx;
	useconds_t late;
	CUresult res;

	while (dropped(s) == CUDA_SUCCESS && !barrier_passed(s, op))
		mps__wait();
	if (op->kind == SI_OP_WAIT)
		while (dropped(s) == CUDA_SUCCESS && !op->rec->done)
			mps__wait();
	res = dropped(s);
	if (res != CUDA_SUCCESS)
		return res;
	switch (op->kind) {
	case SI_OP_COPY:
	case SI_OP_MEMSET:
	case SI_OP_KERNEL:
		late = slow_copy_us(op);
		mps__unlock();
		if (late)
			usleep(late);
		res = mps__op_execute(op, ctx->device, s->sm_first, s->sm_count);
		mps__lock();
		if (res != CUDA_SUCCESS)
			mps__ctx_fault(ctx, res);
		return res;
	case SI_OP_HOSTFN:
	case SI_OP_VALUE_WAIT:
	case SI_OP_VALUE_WRITE:
		mps__unlock();
		mps__memop_run(op, stream_gone, s);
		mps__lock();
		return dropped(s);
	default:                /* RECORD, WAIT, MARKER: reaching them is all */
		return CUDA_SUCCESS;
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

/* Creates a stream of ctx and starts its thread. refs: the thread's, and
 * one for the caller. NULL when out of memory or threads. Under the lock. */
static struct si_stream *stream_new(struct si_context *ctx, unsigned flags, int priority)
{
	struct si_stream *s = calloc(1, sizeof(*s));
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t all, old;
	int err;

	if (!s)
		return NULL;
	if (pthread_cond_init(&s->wake, NULL))
		goto out_free;
	s->ctx = ctx;
	s->flags = flags;
	s->priority = priority;
	s->refs = 2;
	/* The thread takes no signals: they belong to the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&thread, &attr, stream_thread, s);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto out_cond;
	si_list_add(&ctx->streams, &s->link);
	ctx->nstreams++;
	return s;

out_cond:
	pthread_cond_destroy(&s->wake);
out_free:
	free(s);
	return NULL;
}

CUresult mps__stream_enter(CUstream h, struct si_context **ctx, struct si_stream **s)
{
	struct si_context *cur;
	struct si_stream *st;
	CUresult rc = mps__ctx_enter(&cur);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (mps__stream_is_legacy(h)) {
		if (!cur->legacy) {
			cur->legacy = stream_new(cur, 0, 0);
			if (!cur->legacy)
				return CUDA_ERROR_OUT_OF_MEMORY;
		}
		*ctx = cur;
		*s = cur->legacy;
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

void mps__submit(struct si_stream *s, struct si_op *op)
{
	if (s->cap) {
		mps__capture_op(s, op);
		return;
	}
	op->serial = ++serial;
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->enqueued++;
	pthread_cond_signal(&s->wake);
}

CUresult mps__submit_wait(struct si_stream *s, struct si_op *op)
{
	struct si_waiter w = { .done = false, .result = CUDA_SUCCESS };

	if (s->cap) {
		mps__op_free(op);
		return mps__capture_refuse(s);
	}
	op->waiter = &w;
	mps__submit(s, op);
	while (!w.done)         /* the operation always completes: run or dropped */
		mps__wait();
	return w.result;
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
		bool busy = false;

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
		mps__capture_leave(s);
		if (s->handle) {
			mps__handle_remove(s->handle);
			s->handle = 0;
			mps__stream_put(s);     /* the handle's reference; the thread holds one */
		}
		pthread_cond_signal(&s->wake);
	}
	if (ctx->legacy) {
		mps__stream_put(ctx->legacy);
		ctx->legacy = NULL;
	}
	mps__progress();        /* threads waiting for an event or a barrier */
	while (ctx->nstreams)
		mps__wait();
}

CUresult mps__stream_create_in(struct si_context *ctx, unsigned flags, int priority, unsigned sm_first,
			       unsigned sm_count, CUstream *out)
{
	struct si_stream *s;

	/* Out-of-range priorities are clamped, as cuda.h documents. */
	if (priority < -5)
		priority = -5;
	if (priority > 0)
		priority = 0;
	s = stream_new(ctx, flags, priority);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->sm_first = sm_first;
	s->sm_count = sm_count;
	s->handle = mps__handle_add(SI_H_STREAM, s);
	if (!s->handle) {
		s->destroyed = true;    /* the thread exits at once */
		pthread_cond_signal(&s->wake);
		mps__stream_put(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = (CUstream)s->handle;
	return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *phStream, unsigned flags, int priority)
{
	struct si_context *ctx;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__stream_create_in(ctx, flags, priority, 0, SI_SM_COUNT, phStream);
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
		mps__capture_leave(s);
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
	struct si_op *op;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	if (mps__stream_is_legacy(hStream)) {
		/* A marker on the legacy stream completes after all work the
		 * legacy stream must follow: exactly what to wait for. */
		rc = mps__stream_enter(hStream, &ctx, &s);
		if (rc == CUDA_SUCCESS) {
			op = mps__op_new(SI_OP_MARKER);
			rc = op ? mps__submit_wait(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
		}
	} else if ((s = mps__handle_get((uintptr_t)hStream, SI_H_STREAM)) && s->cap) {
		rc = mps__capture_refuse(s);
	} else if (s) {
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
	mps__printf_flush();
	return rc;
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
		/* Done when it and the blocking streams it follows are. */
		rc = mps__ctx_enter(&ctx);
		for (struct si_list *l = rc == CUDA_SUCCESS ? ctx->streams.next : NULL;
		     l && l != &ctx->streams; l = l->next) {
			struct si_stream *b = si_container_of(l, struct si_stream, link);

			if ((b == ctx->legacy || blocking(b)) && oldest(b) != UINT64_MAX) {
				rc = CUDA_ERROR_NOT_READY;
				break;
			}
		}
	} else if ((s = mps__handle_get((uintptr_t)hStream, SI_H_STREAM)) && s->cap) {
		rc = mps__capture_refuse(s);
	} else if (s) {
		rc = s->ctx->sticky;
		if (rc == CUDA_SUCCESS && s->completed != s->enqueued)
			rc = CUDA_ERROR_NOT_READY;
	} else {
		rc = CUDA_ERROR_INVALID_HANDLE;
	}
	mps__unlock();
	return rc;
}
