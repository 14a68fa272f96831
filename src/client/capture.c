// SPDX-License-Identifier: MIT
/*
 * Stream capture, as the program sees it. The capture itself happens on
 * the server (server/ops_capture.c: the driver captures the client's
 * private stream, always in relaxed mode). What the capture modes promise
 * the program is kept here, for its own threads:
 *
 *   a thread whose mode (cuThreadExchangeStreamCaptureMode) is not relaxed
 *   may not make "potentially unsafe" calls — allocations — while it has a
 *   capture of its own going that was not begun in relaxed mode; a thread
 *   in global mode may not either while another thread has a global-mode
 *   capture going. Such a call returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 *   and invalidates those captures: ending them then returns
 *   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph.
 *
 * One record per capture the program began (by the server's stream handle),
 * under a mutex; each thread counts its own non-relaxed captures.
 */
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "client/forward.h"
#include "client/gen/forward.h"
#include "common/atomics.h"

struct capture {
	uint32_t stream;          /* the server's stream handle */
	CUstreamCaptureMode mode;
	pthread_t thread;         /* that began it */
	bool invalidated;         /* by an unsafe call elsewhere, or one not captured */
	bool to_graph;            /* into a graph the program has (cuStreamBeginCaptureToGraph) */
	struct capture *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture *captures;
static int global_captures;                 /* atomic: global-mode captures going */
static int active;                          /* atomic: captures going, of any mode */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static __thread int own_strict;             /* this thread's non-relaxed captures going */
static __thread int own_global;             /* of which global */

/* Dependencies the last capture-info call on this thread returned: valid
 * until its next one, as the driver's are until the next call on the stream. */
static __thread CUgraphNode *info_deps;
static __thread CUgraphEdgeData *info_edges;
static __thread size_t info_cap;

CUresult mps__capture_check(void)
{
	bool forbidden;

	if (!mps_load_relaxed(&global_captures) && !own_strict)
		return CUDA_SUCCESS;
	forbidden = thread_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
		    (own_strict > 0 ||
		     (thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && mps_load_relaxed(&global_captures) > own_global));
	if (!forbidden)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	for (struct capture *k = captures; k; k = k->next)
		if (k->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
		    (k->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && pthread_equal(k->thread, pthread_self())))
			k->invalidated = true;
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

void mps__capture_invalidate(uint32_t stream)
{
	pthread_mutex_lock(&lock);
	for (struct capture *k = captures; k; k = k->next)
		if (k->stream == stream)
			k->invalidated = true;
	pthread_mutex_unlock(&lock);
}

bool mps__capture_on(uint32_t stream)
{
	bool on = false;

	if (!mps_load_relaxed(&active))
		return false;
	pthread_mutex_lock(&lock);
	for (struct capture *k = captures; k && !on; k = k->next)
		on = k->stream == stream;
	pthread_mutex_unlock(&lock);
	return on;
}

bool mps__capture_active(void)
{
	return mps_load_acquire(&active) != 0;
}

/* Removes the record of the capture on stream, or NULL. Caller holds the lock. */
static struct capture *unlink_capture(uint32_t stream)
{
	for (struct capture **pp = &captures; *pp; pp = &(*pp)->next) {
		if ((*pp)->stream == stream) {
			struct capture *k = *pp;

			*pp = k->next;
			return k;
		}
	}
	return NULL;
}

static void forget(struct capture *k)
{
	mps_fetch_sub(&active, 1);
	if (k->mode != CU_STREAM_CAPTURE_MODE_RELAXED && pthread_equal(k->thread, pthread_self()))
		own_strict--;
	if (k->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
		mps_fetch_sub(&global_captures, 1);
		if (pthread_equal(k->thread, pthread_self()))
			own_global--;
	}
	free(k);
}

static CUresult begin(CUstream s, CUstreamCaptureMode mode, bool pt, CUgraph graph, const CUgraphNode *deps,
		      const CUgraphEdgeData *edges, size_t ndeps)
{
	struct mps_msg_capture_begin q = { .mode = mode };
	uint32_t *wire = NULL;
	struct mps_call call;
	struct capture *k;
	size_t extra = 0;
	uint32_t ctx;
	CUresult r;

	if ((unsigned int)mode > CU_STREAM_CAPTURE_MODE_RELAXED || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, pt, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (!q.stream)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* the legacy stream */
	if (graph) {
		uint64_t h;

		r = mps__fwd_h_graph(graph, &h);
		if (r != CUDA_SUCCESS)
			return r;
		q.graph = (uint32_t)h;
		if (ndeps > (MPS_MSG_MAX - sizeof(q)) / (4 + sizeof(*edges)))
			return CUDA_ERROR_INVALID_VALUE;
		extra = ((ndeps * 4 + 7) & ~(size_t)7) + (edges ? ndeps * sizeof(*edges) : 0);
		wire = calloc(1, extra ? extra : 1);
		if (!wire)
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; i < ndeps && r == CUDA_SUCCESS; i++) {
			r = mps__fwd_h_node(deps[i], &h);
			wire[i] = (uint32_t)h;
		}
		if (edges)
			memcpy((uint8_t *)wire + ((ndeps * 4 + 7) & ~(size_t)7), edges, ndeps * sizeof(*edges));
		q.ndeps = (uint32_t)ndeps;
		q.hdr.flags = edges ? MPS_CAPTURE_EDGES : 0;
	}
	k = calloc(1, sizeof(*k));
	if (!k || r != CUDA_SUCCESS) {
		free(wire);
		free(k);
		return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = mps__call(MPS_OP_CAPTURE_BEGIN, ctx, &q.hdr, sizeof(q), wire, extra, &call);
	mps__call_end(&call);
	free(wire);
	if (r != CUDA_SUCCESS) {
		free(k);
		return r;
	}
	k->stream = q.stream;
	k->mode = mode;
	k->to_graph = graph != NULL;
	k->thread = pthread_self();
	pthread_mutex_lock(&lock);
	k->next = captures;
	captures = k;
	pthread_mutex_unlock(&lock);
	mps_fetch_add(&active, 1);
	if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		own_strict++;
	if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
		own_global++;
		mps_fetch_add(&global_captures, 1);
	}
	return CUDA_SUCCESS;
}

static CUresult end(CUstream s, CUgraph *graph, bool pt)
{
	struct mps_msg_handle q = { 0 };
	struct capture *k;
	struct mps_call call;
	uint32_t ctx, gh = 0;
	bool to_graph = false;
	CUgraph none;
	CUresult r;

	r = mps__stream_resolve(s, pt, &q.handle, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	for (k = captures; k && k->stream != q.handle; k = k->next)
		;
	/* A capture that is not relaxed ends on the thread that began it. */
	if (k && k->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(k->thread, pthread_self())) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	}
	pthread_mutex_unlock(&lock);
	/* The program need not take the graph (NVIDIA's graphConditionalNodes
	 * passes NULL, capturing into a graph of its own): the capture ends
	 * all the same, and a new graph nobody can name is destroyed. */
	if (!graph)
		graph = &none;
	*graph = NULL;
	r = mps__call(MPS_OP_CAPTURE_END, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (call.s)
		gh = (uint32_t)call.s->val[0];
	mps__call_end(&call);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && r != CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
		return r;   /* still capturing (or never was) */
	pthread_mutex_lock(&lock);
	k = unlink_capture(q.handle);
	pthread_mutex_unlock(&lock);
	if (k && k->invalidated && r == CUDA_SUCCESS) {
		CUgraph g;

		/* Invalidated here, by an unsafe call: no graph, as the driver. */
		if (mps__fwd_obj(MPS_H_GRAPH, gh, 0, (void **)&g) == CUDA_SUCCESS)
			mps__fwd_cuGraphDestroy(g);
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		gh = 0;
	}
	if (k) {
		to_graph = k->to_graph;
		forget(k);
	}
	if (r == CUDA_SUCCESS && gh)
		r = mps__fwd_obj(MPS_H_GRAPH, gh, 0, (void **)graph);
	if (r == CUDA_SUCCESS && graph == &none && none && !to_graph)
		mps__fwd_cuGraphDestroy(none);
	return r;
}

static bool invalidated(uint32_t stream)
{
	bool inv = false;

	pthread_mutex_lock(&lock);
	for (struct capture *k = captures; k; k = k->next)
		if (k->stream == stream)
			inv = k->invalidated;
	pthread_mutex_unlock(&lock);
	return inv;
}

static CUresult info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
		     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, bool pt)
{
	struct mps_msg_handle q = { 0 };
	struct mps_call call;
	size_t n = 0;
	uint32_t ctx;
	CUresult r;

	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, pt, &q.handle, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	/* No capture begun, none joined: no stream captures (frameworks ask
	 * this on every allocation; it costs no round trip then). */
	if (!mps_load_acquire(&active)) {
		*status = CU_STREAM_CAPTURE_STATUS_NONE;
		if (id)
			*id = 0;
		if (graph)
			*graph = NULL;
		if (deps)
			*deps = NULL;
		if (edges)
			*edges = NULL;
		if (ndeps)
			*ndeps = 0;
		return CUDA_SUCCESS;
	}
	r = mps__call(MPS_OP_CAPTURE_INFO, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		*status = (CUstreamCaptureStatus)call.s->val[0];
		if (id)
			*id = call.s->val[1];
		n = (size_t)call.s->val[3];
		if (*status == CU_STREAM_CAPTURE_STATUS_ACTIVE && invalidated(q.handle))
			*status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
	}
	if (r == CUDA_SUCCESS && *status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		const uint32_t *h = (const uint32_t *)call.s->data;
		uint32_t gh = (uint32_t)call.s->val[2];

		if (n > MPS_CAPTURE_DEPS_MAX) {
			r = CUDA_ERROR_INVALID_VALUE;
		} else if (n > info_cap) {
			CUgraphNode *nd = realloc(info_deps, n * sizeof(*nd));
			CUgraphEdgeData *ne = nd ? realloc(info_edges, n * sizeof(*ne)) : NULL;

			if (nd)
				info_deps = nd;
			if (ne) {
				info_edges = ne;
				info_cap = n;
			} else {
				r = CUDA_ERROR_OUT_OF_MEMORY;
			}
		}
		if (r == CUDA_SUCCESS && graph)
			r = mps__fwd_obj(MPS_H_GRAPH, gh, 0, (void **)graph);
		for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
			r = mps__fwd_obj(MPS_H_NODE, h[i], gh, (void **)&info_deps[i]);
		if (r == CUDA_SUCCESS && n)
			memcpy(info_edges, call.s->data + ((n * 4 + 7) & ~(size_t)7), n * sizeof(*info_edges));
	} else if (r == CUDA_SUCCESS) {
		n = 0;
		if (graph)
			*graph = NULL;
	}
	mps__call_end(&call);
	if (r != CUDA_SUCCESS)
		return r;
	if (deps)
		*deps = n ? info_deps : NULL;
	if (edges)
		*edges = n ? info_edges : NULL;
	if (ndeps)
		*ndeps = n;
	return CUDA_SUCCESS;
}

/* The first generation took no mode: global. (cudaTypedefs.h keeps its
 * type out of sight.) */
typedef CUresult (*begin_v1_fn)(CUstream hStream);

static CUresult begin_v1(CUstream s) { return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, false, NULL, NULL, NULL, 0); }
static CUresult begin_v1_ptsz(CUstream s) { return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, true, NULL, NULL, NULL, 0); }

static CUresult begin_v2(CUstream s, CUstreamCaptureMode mode) { return begin(s, mode, false, NULL, NULL, NULL, 0); }
static CUresult begin_v2_ptsz(CUstream s, CUstreamCaptureMode mode) { return begin(s, mode, true, NULL, NULL, NULL, 0); }

static CUresult begin_to_graph(CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *e, size_t n,
			       CUstreamCaptureMode mode)
{
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	return begin(s, mode, false, g, d, e, n);
}

static CUresult begin_to_graph_ptsz(CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *e,
				    size_t n, CUstreamCaptureMode mode)
{
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	return begin(s, mode, true, g, d, e, n);
}

static CUresult end_capture(CUstream s, CUgraph *g) { return end(s, g, false); }
static CUresult end_capture_ptsz(CUstream s, CUgraph *g) { return end(s, g, true); }

static CUresult is_capturing(CUstream s, CUstreamCaptureStatus *status, bool pt)
{
	return info(s, status, NULL, NULL, NULL, NULL, NULL, pt);
}

static CUresult is_capturing_legacy(CUstream s, CUstreamCaptureStatus *st) { return is_capturing(s, st, false); }
static CUresult is_capturing_ptsz(CUstream s, CUstreamCaptureStatus *st) { return is_capturing(s, st, true); }

static CUresult info_v1(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return info(s, st, id, NULL, NULL, NULL, NULL, false);
}

static CUresult info_v1_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return info(s, st, id, NULL, NULL, NULL, NULL, true);
}

static CUresult info_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d,
			size_t *n)
{
	return info(s, st, id, g, d, NULL, n, false);
}

static CUresult info_v2_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
			     const CUgraphNode **d, size_t *n)
{
	return info(s, st, id, g, d, NULL, n, true);
}

static CUresult info_v3(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d,
			const CUgraphEdgeData **e, size_t *n)
{
	return info(s, st, id, g, d, e, n, false);
}

static CUresult info_v3_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
			     const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n)
{
	return info(s, st, id, g, d, e, n, true);
}

bool mps__capture_joined(CUstream s, bool pt)
{
	CUstreamCaptureStatus status;

	return info(s, &status, NULL, NULL, NULL, NULL, NULL, pt) == CUDA_SUCCESS &&
	       status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

CUresult mps__capture_pageable_copy(CUstream s, bool pt, bool to_host, uint64_t dev, void *host, size_t n)
{
	CUDA_MEMCPY3D p = { .WidthInBytes = n, .Height = 1, .Depth = 1 };
	CUstreamCaptureStatus status;
	const CUgraphNode *deps = NULL;
	CUgraphNode node;
	CUgraph g = NULL;
	size_t ndeps = 0;
	CUresult r;

	if (to_host) {
		p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		p.srcDevice = dev;
		p.dstMemoryType = CU_MEMORYTYPE_HOST;
		p.dstHost = host;
	} else {
		p.srcMemoryType = CU_MEMORYTYPE_HOST;
		p.srcHost = host;
		p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		p.dstDevice = dev;
	}
	r = info(s, &status, NULL, &g, &deps, NULL, &ndeps, pt);
	if (r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (r == CUDA_SUCCESS)
		r = mps__graph_add_copy(&node, g, deps, ndeps, &p);
	if (r == CUDA_SUCCESS)
		r = pt ? mps__fwd_cuStreamUpdateCaptureDependencies_v2_ptsz(s, &node, NULL, 1,
									      CU_STREAM_SET_CAPTURE_DEPENDENCIES)
		       : mps__fwd_cuStreamUpdateCaptureDependencies_v2(s, &node, NULL, 1,
									 CU_STREAM_SET_CAPTURE_DEPENDENCIES);
	return r;
}

static CUresult exchange_mode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old;

	if (!mode || (unsigned int)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	old = thread_mode;
	thread_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

const struct mps_impl mps__capture_api[] = {
	MPS_IMPL_PFN(cuStreamBeginCapture, begin_v1_fn, begin_v1),
	MPS_IMPL_PFN(cuStreamBeginCapture_ptsz, begin_v1_fn, begin_v1_ptsz),
	MPS_IMPL(cuStreamBeginCapture_v2, begin_v2),
	MPS_IMPL_AS(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2, begin_v2_ptsz),
	MPS_IMPL(cuStreamBeginCaptureToGraph, begin_to_graph),
	MPS_IMPL_AS(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, begin_to_graph_ptsz),
	MPS_IMPL(cuStreamEndCapture, end_capture),
	MPS_IMPL_AS(cuStreamEndCapture_ptsz, cuStreamEndCapture, end_capture_ptsz),
	MPS_IMPL(cuStreamIsCapturing, is_capturing_legacy),
	MPS_IMPL_AS(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, is_capturing_ptsz),
	MPS_IMPL_PFN(cuStreamGetCaptureInfo, PFN_cuStreamGetCaptureInfo_v10010, info_v1),
	MPS_IMPL_PFN(cuStreamGetCaptureInfo_ptsz, PFN_cuStreamGetCaptureInfo_v10010, info_v1_ptsz),
	MPS_IMPL_PFN(cuStreamGetCaptureInfo_v2, PFN_cuStreamGetCaptureInfo_v11030, info_v2),
	MPS_IMPL_PFN(cuStreamGetCaptureInfo_v2_ptsz, PFN_cuStreamGetCaptureInfo_v11030, info_v2_ptsz),
	MPS_IMPL(cuStreamGetCaptureInfo_v3, info_v3),
	MPS_IMPL_AS(cuStreamGetCaptureInfo_v3_ptsz, cuStreamGetCaptureInfo_v3, info_v3_ptsz),
	MPS_IMPL(cuThreadExchangeStreamCaptureMode, exchange_mode),
	MPS_IMPL_END
};
