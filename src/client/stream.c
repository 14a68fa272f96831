// SPDX-License-Identifier: MIT
/*
 * Streams. A stream handle is a struct here naming the server's stream; the
 * special handles are resolved per call: 0 and CU_STREAM_LEGACY name the
 * current context's legacy default stream (the server emulates its ordering
 * rules), CU_STREAM_PER_THREAD — and 0 in the _ptsz/_ptds entry points —
 * names the calling thread's own default stream in the current context,
 * which is an ordinary blocking stream made on first use and dropped when the
 * thread exits. Synchronize and query go to the server; the rest is answered
 * here.
 */
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "common/atomics.h"
#include "common/env.h"

#define PER_THREAD_MAX 8

/* A thread's default streams, one per context it used; `ctx_handle`
 * tells a stream made for an earlier life of a primary context from one
 * made for its present life. */
struct per_thread {
	struct mps_ctx *ctx;
	uint32_t ctx_handle;
	uint32_t stream;
};

static __thread struct per_thread per_thread[PER_THREAD_MAX];
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg)
{
	struct per_thread *pt = arg;

	for (int i = 0; i < PER_THREAD_MAX; i++) {
		if (!pt[i].stream || pt[i].ctx->handle != pt[i].ctx_handle)
			continue;
		mps__post_handle(MPS_OP_STREAM_DESTROY, pt[i].ctx_handle, pt[i].stream);
		pt[i].stream = 0;
	}
}

static void make_key(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

static CUresult create_on_server(uint32_t ctx, unsigned int flags, int priority, uint32_t *handle, int *prio_out)
{
	struct mps_msg_stream_create q = { .flags = flags, .priority = priority };
	struct mps_call call;
	CUresult r;

	r = mps__call(MPS_OP_STREAM_CREATE, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		*handle = (uint32_t)call.s->val[0];
		if (prio_out)
			*prio_out = (int)(int64_t)call.s->val[1];
	}
	mps__call_end(&call);
	return r;
}

CUresult mps__per_thread_stream(struct mps_ctx *ctx, uint32_t *handle)
{
	struct per_thread *free_slot = NULL;
	uint32_t ch;
	CUresult r;

	r = mps__ctx_handle(ctx, &ch);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < PER_THREAD_MAX; i++) {
		struct per_thread *p = &per_thread[i];

		if (p->stream && p->ctx == ctx && p->ctx_handle == ch) {
			*handle = p->stream;
			return CUDA_SUCCESS;
		}
		/* A slot of a context that has since died can be reused. */
		if (!free_slot && (!p->stream || p->ctx->handle != p->ctx_handle))
			free_slot = p;
	}
	if (!free_slot)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = create_on_server(ch, 0, 0, handle, NULL);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_once(&exit_once, make_key);
	pthread_setspecific(exit_key, per_thread);
	*free_slot = (struct per_thread){ .ctx = ctx, .ctx_handle = ch, .stream = *handle };
	return CUDA_SUCCESS;
}

void mps__per_thread_forget(struct mps_ctx *ctx)
{
	/* Nothing to do: entries are recognised as stale by their ctx_handle. */
	(void)ctx;
}

CUresult mps__stream_resolve(CUstream s, bool per_thread_default, uint32_t *stream, uint32_t *ctx)
{
	struct mps_stream *st;
	struct mps_ctx *cur;
	CUresult r;

	if (!s && per_thread_default)
		s = CU_STREAM_PER_THREAD;
	if (!s || s == CU_STREAM_LEGACY) {
		*stream = 0;
		return mps__cur_handle(ctx);
	}
	if (s == CU_STREAM_PER_THREAD) {
		cur = mps__ctx_cur();
		if (!cur)
			return CUDA_ERROR_INVALID_CONTEXT;
		r = mps__per_thread_stream(cur, stream);
		if (r != CUDA_SUCCESS)
			return r;
		return mps__ctx_handle(cur, ctx);
	}
	st = mps__obj(s, MPS_MAGIC_STREAM);
	if (!st)
		return CUDA_ERROR_INVALID_HANDLE;
	*stream = st->handle;
	return mps__ctx_handle(st->ctx, ctx);
}

static CUresult stream_create_common(CUstream *ps, unsigned int flags, int priority)
{
	struct mps_ctx *ctx = mps__ctx_cur();
	struct mps_stream *st;
	uint32_t h;
	CUresult r;

	if (!ps || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__ctx_handle(ctx, &h);
	if (r != CUDA_SUCCESS)
		return r;
	st = calloc(1, sizeof(*st));
	if (!st)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = create_on_server(h, flags, priority, &st->handle, &st->priority);
	if (r != CUDA_SUCCESS) {
		free(st);
		return r;
	}
	st->ctx = ctx;
	st->flags = flags;
	st->magic = MPS_MAGIC_STREAM;
	*ps = (CUstream)st;
	return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *ps, unsigned int flags)
{
	return stream_create_common(ps, flags, 0);
}

static CUresult stream_create_with_priority(CUstream *ps, unsigned int flags, int priority)
{
	return stream_create_common(ps, flags, priority);
}

static CUresult stream_destroy(CUstream s)
{
	struct mps_stream *st = mps__obj(s, MPS_MAGIC_STREAM);
	uint32_t h = 0;
	CUresult r;

	if (!st)
		return CUDA_ERROR_INVALID_HANDLE;
	mps__ctx_handle(st->ctx, &h);
	mps__migrate_attach_gone(st->handle);   /* managed memory attached to it */
	r = mps__post_handle(MPS_OP_STREAM_DESTROY, h, st->handle);
	st->magic = MPS_MAGIC_DEAD;
	free(st);
	return r;
}

/* The stream this thread last saw finish all its work, and the number of
 * the message whose reply showed it (see mps__stream_idle); `staged`: the
 * number of the last message of an unbroken row of staged uploads to it
 * sent right after (seq if none). */
static __thread struct {
	uint32_t stream, ctx, seq, staged;
	bool known;
} idle;

void mps__stream_idle(uint32_t stream, uint32_t ctx, uint32_t seq)
{
	idle.stream = stream;
	idle.ctx = ctx;
	idle.seq = seq;
	idle.staged = seq;
	idle.known = true;
	mps__copy_settled(stream, ctx, seq);
}

/* OPENMPS_STAGED_SYNC (default 1): a synchronize after staged uploads only
 * is answered here; 0 sends it to the server, which waits for the GPU. */
static bool staged_sync_on(void)
{
	static int on = -1;

	if (on < 0)
		mps_store_relaxed(&on, (int)mps_env_long("OPENMPS_STAGED_SYNC", 1, 0, 1));
	return on;
}

/* The stream is the one this thread last saw idle. */
static bool idle_on(uint32_t stream, uint32_t ctx)
{
	return idle.known && idle.stream == stream && idle.ctx == ctx;
}

void mps__stream_uploaded(uint32_t stream, uint32_t ctx, uint64_t dst, size_t n, uint32_t posted)
{
	/* Messages are numbered in the order sent, by every thread: the row is
	 * unbroken if these are the very next numbers after it. */
	if (!idle_on(stream, ctx) || !posted || mps__last_seq() - posted != idle.staged)
		return;
	if (staged_sync_on() && !mps__capture_active() && mps__devmem_private(dst, n))
		idle.staged = mps__last_seq();
}

/* Nothing was sent to the server since the reply that found the stream
 * done (by any thread: the ring's count says), so it is done still, and
 * no asynchronous failure can have come since that reply reported none.
 * A frameworks' copy to the host followed by a synchronize is one round
 * trip, as the driver's is one wait. */
static bool known_idle(uint32_t stream, uint32_t ctx)
{
	return idle_on(stream, ctx) && mps_load_acquire(&mps_conn.sent) == idle.seq && !mps__capture_active();
}

/* All that was sent since the stream was seen idle is staged uploads to
 * it, and a capture could not have begun since. */
static bool staged_only(uint32_t stream, uint32_t ctx)
{
	return idle_on(stream, ctx) && idle.staged != idle.seq && mps_load_acquire(&mps_conn.sent) == idle.staged &&
	       !mps__capture_active();
}

bool mps__stream_settled(uint32_t stream, uint32_t ctx)
{
	return known_idle(stream, ctx) || staged_only(stream, ctx);
}

static CUresult sync_or_query(uint16_t op, CUstream s, bool pt)
{
	struct mps_msg_handle q = { 0 };
	struct mps_call call;
	uint32_t stream, ctx;
	CUresult r;

	r = mps__stream_resolve(s, pt, &stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	q.handle = stream;
	if (staged_only(stream, ctx)) {   /* never known idle as well: the count moved past seq */
		/* Nothing the program can look at waits for these uploads but
		 * later work, which the fence orders after them: done, as far as
		 * it can tell. Their staging is not free until the stream is seen
		 * idle for real (mps__copy_settled). */
		r = mps__post(MPS_OP_STREAM_FENCE, ctx, &q.hdr, sizeof(q), NULL, 0);
		if (r != CUDA_SUCCESS)
			return r;
		idle.seq = idle.staged = mps__last_seq();
	}
	if (!known_idle(stream, ctx)) {
		r = mps__call(op, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
		if (r == CUDA_SUCCESS)
			mps__stream_idle(stream, ctx, call.seq);
		mps__call_end(&call);
	}
	if (r == CUDA_SUCCESS && op == MPS_OP_STREAM_SYNC)
		mps__devout_take(stream, ctx);
	return r == CUDA_SUCCESS ? mps__waited(stream, ctx) : r;
}

CUresult mps__waited(uint32_t stream, uint32_t ctx)
{
	mps__hostfn_acquire();
	return mps__mvar_fetch(stream, ctx);
}

static CUresult stream_synchronize(CUstream s) { return sync_or_query(MPS_OP_STREAM_SYNC, s, false); }
static CUresult stream_synchronize_ptsz(CUstream s) { return sync_or_query(MPS_OP_STREAM_SYNC, s, true); }
static CUresult stream_query(CUstream s) { return sync_or_query(MPS_OP_STREAM_QUERY, s, false); }
static CUresult stream_query_ptsz(CUstream s) { return sync_or_query(MPS_OP_STREAM_QUERY, s, true); }

static CUresult wait_event(CUstream s, CUevent e, unsigned int flags, bool pt)
{
	struct mps_event *ev = mps__obj(e, MPS_MAGIC_EVENT);
	struct mps_msg_stream_wait q = { .event = 0, .flags = flags };
	uint32_t ctx;
	CUresult r;

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned int)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, pt, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	q.event = ev->handle;
	return mps__post(MPS_OP_STREAM_WAIT_EVENT, ctx, &q.hdr, sizeof(q), NULL, 0);
}

static CUresult stream_wait_event(CUstream s, CUevent e, unsigned int flags) { return wait_event(s, e, flags, false); }
static CUresult stream_wait_event_ptsz(CUstream s, CUevent e, unsigned int flags) { return wait_event(s, e, flags, true); }

/* The stream object behind s, NULL for the special streams; INVALID_HANDLE
 * for anything else. */
static CUresult stream_arg(CUstream s, bool pt, struct mps_stream **out)
{
	*out = NULL;
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return mps__ctx_cur() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	*out = mps__obj(s, MPS_MAGIC_STREAM);
	(void)pt;
	return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult get_priority(CUstream s, int *p, bool pt)
{
	struct mps_stream *st;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_arg(s, pt, &st);
	if (r == CUDA_SUCCESS)
		*p = st ? st->priority : 0;
	return r;
}

static CUresult stream_get_priority(CUstream s, int *p) { return get_priority(s, p, false); }
static CUresult stream_get_priority_ptsz(CUstream s, int *p) { return get_priority(s, p, true); }

static CUresult get_flags(CUstream s, unsigned int *f, bool pt)
{
	struct mps_stream *st;
	CUresult r;

	if (!f)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_arg(s, pt, &st);
	if (r == CUDA_SUCCESS)
		*f = st ? st->flags : CU_STREAM_DEFAULT;
	return r;
}

static CUresult stream_get_flags(CUstream s, unsigned int *f) { return get_flags(s, f, false); }
static CUresult stream_get_flags_ptsz(CUstream s, unsigned int *f) { return get_flags(s, f, true); }

static CUresult get_ctx(CUstream s, CUcontext *pc, bool pt)
{
	struct mps_stream *st;
	CUresult r;

	if (!pc)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_arg(s, pt, &st);
	if (r == CUDA_SUCCESS)
		*pc = (CUcontext)(st ? st->ctx : mps__ctx_cur());
	return r;
}

static CUresult stream_get_ctx(CUstream s, CUcontext *pc) { return get_ctx(s, pc, false); }
static CUresult stream_get_ctx_ptsz(CUstream s, CUcontext *pc) { return get_ctx(s, pc, true); }

static CUresult stream_get_ctx_v2(CUstream s, CUcontext *pc, CUgreenCtx *pg)
{
	if (!pg)
		return CUDA_ERROR_INVALID_VALUE;
	*pg = NULL;
	return get_ctx(s, pc, false);
}

static CUresult stream_get_device(CUstream s, CUdevice *d)
{
	CUcontext c;
	CUresult r;

	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	r = get_ctx(s, &c, false);
	if (r == CUDA_SUCCESS)
		*d = ((struct mps_ctx *)c)->device;
	return r;
}

static CUresult get_id(CUstream s, unsigned long long *id, bool pt)
{
	struct mps_stream *st;
	CUresult r;

	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_arg(s, pt, &st);
	if (r == CUDA_SUCCESS)
		*id = st ? st->handle : (s == CU_STREAM_PER_THREAD || pt ? 2 : 1);
	return r;
}

static CUresult stream_get_id(CUstream s, unsigned long long *id) { return get_id(s, id, false); }
static CUresult stream_get_id_ptsz(CUstream s, unsigned long long *id) { return get_id(s, id, true); }

const struct mps_impl mps__stream_api[] = {
	MPS_IMPL(cuStreamCreate, stream_create),
	MPS_IMPL(cuStreamCreateWithPriority, stream_create_with_priority),
	MPS_IMPL(cuStreamDestroy_v2, stream_destroy),
	MPS_IMPL_AS(cuStreamDestroy, cuStreamDestroy_v2, stream_destroy),
	MPS_IMPL(cuStreamSynchronize, stream_synchronize),
	MPS_IMPL_AS(cuStreamSynchronize_ptsz, cuStreamSynchronize, stream_synchronize_ptsz),
	MPS_IMPL(cuStreamQuery, stream_query),
	MPS_IMPL_AS(cuStreamQuery_ptsz, cuStreamQuery, stream_query_ptsz),
	MPS_IMPL(cuStreamWaitEvent, stream_wait_event),
	MPS_IMPL_AS(cuStreamWaitEvent_ptsz, cuStreamWaitEvent, stream_wait_event_ptsz),
	MPS_IMPL(cuStreamGetPriority, stream_get_priority),
	MPS_IMPL_AS(cuStreamGetPriority_ptsz, cuStreamGetPriority, stream_get_priority_ptsz),
	MPS_IMPL(cuStreamGetFlags, stream_get_flags),
	MPS_IMPL_AS(cuStreamGetFlags_ptsz, cuStreamGetFlags, stream_get_flags_ptsz),
	MPS_IMPL(cuStreamGetCtx, stream_get_ctx),
	MPS_IMPL_AS(cuStreamGetCtx_ptsz, cuStreamGetCtx, stream_get_ctx_ptsz),
	MPS_IMPL(cuStreamGetCtx_v2, stream_get_ctx_v2),
	MPS_IMPL(cuStreamGetDevice, stream_get_device),
	MPS_IMPL(cuStreamGetId, stream_get_id),
	MPS_IMPL_AS(cuStreamGetId_ptsz, cuStreamGetId, stream_get_id_ptsz),
	MPS_IMPL_END
};
