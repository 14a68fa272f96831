// SPDX-License-Identifier: MIT
/*
 * Events. Recording and waiting are asynchronous messages; synchronize,
 * query and elapsed time ask the server, which answers a synchronize only
 * when the GPU has passed the event's record as it stood at the call.
 */
#include <stdlib.h>
#include <string.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"

#define EVENT_BUCKETS 1024u

/* Live events by their server handle, for the calls that return an event
 * the program made (a graph's event nodes). */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mps_event *table[EVENT_BUCKETS];

static uint32_t bucket_of(uint32_t handle)
{
	return (handle * 2654435761u) >> 22 & (EVENT_BUCKETS - 1);
}

static void table_add(struct mps_event *ev)
{
	pthread_mutex_lock(&table_lock);
	ev->hnext = table[bucket_of(ev->handle)];
	table[bucket_of(ev->handle)] = ev;
	pthread_mutex_unlock(&table_lock);
}

static void table_del(struct mps_event *ev)
{
	pthread_mutex_lock(&table_lock);
	for (struct mps_event **pp = &table[bucket_of(ev->handle)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == ev) {
			*pp = ev->hnext;
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
}

struct mps_event *mps__event_by_handle(uint32_t handle)
{
	struct mps_event *ev;

	pthread_mutex_lock(&table_lock);
	for (ev = table[bucket_of(handle)]; ev && ev->handle != handle; ev = ev->hnext)
		;
	pthread_mutex_unlock(&table_lock);
	return ev;
}

CUresult mps__event_adopt(uint32_t handle, struct mps_ctx *ctx, unsigned int flags, CUevent *out)
{
	struct mps_event *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ev->handle = handle;
	ev->ctx = ctx;
	ev->flags = flags;
	ev->magic = MPS_MAGIC_EVENT;
	table_add(ev);
	*out = (CUevent)ev;
	return CUDA_SUCCESS;
}

static struct mps_event *event_arg(CUevent e)
{
	return mps__obj(e, MPS_MAGIC_EVENT);
}

static CUresult event_create(CUevent *pe, unsigned int flags)
{
	struct mps_msg_event_create q = { .flags = flags };
	struct mps_ctx *ctx = mps__ctx_cur();
	struct mps_event *ev;
	struct mps_call call;
	uint32_t h;
	CUresult r;

	if (!pe)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__ctx_handle(ctx, &h);
	if (r != CUDA_SUCCESS)
		return r;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mps__call(MPS_OP_EVENT_CREATE, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		ev->handle = (uint32_t)call.s->val[0];
		ev->ctx = ctx;
		ev->flags = flags;
		ev->magic = MPS_MAGIC_EVENT;
		table_add(ev);
		*pe = (CUevent)ev;
	} else {
		free(ev);
	}
	mps__call_end(&call);
	return r;
}

static CUresult event_destroy(CUevent e)
{
	struct mps_event *ev = event_arg(e);
	CUresult r;

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	r = mps__post_handle(MPS_OP_EVENT_DESTROY, 0, ev->handle);
	table_del(ev);
	ev->magic = MPS_MAGIC_DEAD;
	free(ev);
	return r;
}

static CUresult record(CUevent e, CUstream s, unsigned int flags, bool pt)
{
	struct mps_event *ev = event_arg(e);
	struct mps_msg_event_record q = { .flags = flags };
	uint32_t ctx;
	CUresult r;

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned int)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, pt, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	q.event = ev->handle;
	r = mps__post(MPS_OP_EVENT_RECORD, ctx, &q.hdr, sizeof(q), NULL, 0);
	if (r == CUDA_SUCCESS && (ev->flags & CU_EVENT_INTERPROCESS) && !mps__capture_active()) {
		/* Another process may wait for this record as soon as we
		 * return (its handle passed by a pipe, a queue): the record must
		 * be in the server by then, not still in our ring behind other
		 * work. A query, which the server answers after the record, is
		 * the round trip that makes sure; its answer is not the
		 * record's. (While a capture is going the record may be a node,
		 * run when the graph runs, and a query could disturb it.) */
		(void)mps__call_handle(MPS_OP_EVENT_QUERY, 0, ev->handle);
	}
	return r;
}

static CUresult event_record(CUevent e, CUstream s) { return record(e, s, 0, false); }
static CUresult event_record_ptsz(CUevent e, CUstream s) { return record(e, s, 0, true); }
static CUresult event_record_with_flags(CUevent e, CUstream s, unsigned int f) { return record(e, s, f, false); }
static CUresult event_record_with_flags_ptsz(CUevent e, CUstream s, unsigned int f) { return record(e, s, f, true); }

static CUresult ask(uint16_t op, CUevent e)
{
	struct mps_event *ev = event_arg(e);
	CUresult r = ev ? mps__call_handle(op, 0, ev->handle) : CUDA_ERROR_INVALID_HANDLE;
	uint32_t h = 0;

	if (r != CUDA_SUCCESS)
		return r;
	mps__cur_handle(&h);
	if (op == MPS_OP_EVENT_SYNC)
		mps__devout_take(0, h);
	return mps__waited(0, h);
}

static CUresult event_synchronize(CUevent e) { return ask(MPS_OP_EVENT_SYNC, e); }
static CUresult event_query(CUevent e) { return ask(MPS_OP_EVENT_QUERY, e); }

static CUresult event_elapsed_time(float *ms, CUevent a, CUevent b)
{
	struct mps_event *ea = event_arg(a), *eb = event_arg(b);
	struct mps_msg_elapsed q;
	struct mps_call call;
	uint32_t bits;
	CUresult r;

	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ea || !eb)
		return CUDA_ERROR_INVALID_HANDLE;
	memset(&q, 0, sizeof(q));
	q.start = ea->handle;
	q.end = eb->handle;
	r = mps__call(MPS_OP_EVENT_ELAPSED, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		bits = (uint32_t)call.s->val[0];
		memcpy(ms, &bits, sizeof(*ms));
	}
	mps__call_end(&call);
	return r;
}

const struct mps_impl mps__event_api[] = {
	MPS_IMPL(cuEventCreate, event_create),
	MPS_IMPL(cuEventDestroy_v2, event_destroy),
	MPS_IMPL_AS(cuEventDestroy, cuEventDestroy_v2, event_destroy),
	MPS_IMPL(cuEventRecord, event_record),
	MPS_IMPL_AS(cuEventRecord_ptsz, cuEventRecord, event_record_ptsz),
	MPS_IMPL(cuEventRecordWithFlags, event_record_with_flags),
	MPS_IMPL_AS(cuEventRecordWithFlags_ptsz, cuEventRecordWithFlags, event_record_with_flags_ptsz),
	MPS_IMPL(cuEventSynchronize, event_synchronize),
	MPS_IMPL(cuEventQuery, event_query),
	MPS_IMPL(cuEventElapsedTime_v2, event_elapsed_time),
	MPS_IMPL(cuEventElapsedTime, event_elapsed_time),
	MPS_IMPL_END
};
