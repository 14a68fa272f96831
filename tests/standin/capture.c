// SPDX-License-Identifier: MIT
/*
 * Stream capture. A capturing stream keeps the nodes its next work follows
 * (its dependency set); work submitted to it becomes a node of the capture
 * graph after those nodes, and becomes the set. An event recorded on a
 * capturing stream remembers the set (event.c); a stream that waits for it
 * adds that set to its own, and a stream not yet capturing joins the capture
 * that way (a fork). The capture ends on the stream that began it, and only
 * when every stream forked into it has been joined back (the origin waited
 * for an event recorded after that stream's last work): else
 * CUDA_ERROR_STREAM_CAPTURE_UNJOINED. A synchronizing call on a capturing
 * stream fails and invalidates the capture; ending it then gives no graph.
 *
 * Captures are kept in a list, so an event that names one that has ended is
 * recognised. All under the stand-in lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct live {
	struct si_capture *cap;
	struct live *next;
};

static struct live *captures;
static uint64_t next_id = 1;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

struct si_capture *mps__capture_live(struct si_capture *cap, uint64_t id);

struct si_capture *mps__capture_live(struct si_capture *cap, uint64_t id)
{
	for (struct live *l = captures; l; l = l->next)
		if (l->cap == cap && cap->id == id)
			return cap;
	return NULL;
}

static int set_deps(struct si_stream *s, struct si_gnode *const *deps, unsigned n)
{
	if (n > s->cap_deps_cap) {
		struct si_gnode **nd = realloc(s->cap_deps, n * sizeof(*nd));

		if (!nd)
			return -1;
		s->cap_deps = nd;
		s->cap_deps_cap = n;
	}
	if (n)
		memmove(s->cap_deps, deps, n * sizeof(*deps));
	s->ncap_deps = n;
	return 0;
}

static int add_deps(struct si_stream *s, struct si_gnode *const *deps, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		bool have = false;

		for (unsigned j = 0; j < s->ncap_deps && !have; j++)
			have = s->cap_deps[j] == deps[i];
		if (have)
			continue;
		if (s->ncap_deps == s->cap_deps_cap) {
			unsigned ncap = s->cap_deps_cap ? s->cap_deps_cap * 2 : 4;
			struct si_gnode **nd = realloc(s->cap_deps, ncap * sizeof(*nd));

			if (!nd)
				return -1;
			s->cap_deps = nd;
			s->cap_deps_cap = ncap;
		}
		s->cap_deps[s->ncap_deps++] = deps[i];
	}
	return 0;
}

static void join(struct si_stream *s, struct si_capture *cap)
{
	s->cap = cap;
	s->ncap_deps = 0;
	s->cap_ops = 0;
	s->cap_unjoined = false;
}

void mps__capture_leave(struct si_stream *s)
{
	if (!s->cap)
		return;
	if (s->cap->origin == s)
		s->cap->origin = NULL;   /* the capture is lost with its stream */
	s->cap = NULL;
	s->ncap_deps = 0;
}

/* A node of type after the stream's dependencies in its capture graph,
 * which the stream then depends on; NULL (the capture invalidated) when it
 * cannot be added. */
static struct si_gnode *capture_node(struct si_stream *s, CUgraphNodeType type)
{
	struct si_capture *cap = s->cap;
	struct si_gnode *n = cap->invalidated ? NULL : mps__gnode_add(cap->graph, type, s->cap_deps, s->ncap_deps);

	if (!n) {
		cap->invalidated = true;
		return NULL;
	}
	if (set_deps(s, &n, 1) < 0)
		cap->invalidated = true;
	s->cap_ops++;
	if (s != cap->origin)
		s->cap_unjoined = true;
	return n;
}

void mps__capture_op(struct si_stream *s, struct si_op *op)
{
	static const CUgraphNodeType types[] = {
		[SI_OP_COPY] = CU_GRAPH_NODE_TYPE_MEMCPY,
		[SI_OP_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
		[SI_OP_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL,
	};
	struct si_gnode *n;

	if (op->kind == SI_OP_MARKER) {
		mps__op_free(op);
		return;
	}
	if (op->kind != SI_OP_COPY && op->kind != SI_OP_MEMSET && op->kind != SI_OP_KERNEL) {
		/* Records and waits come through mps__capture_record/wait. */
		mps__op_free(op);
		s->cap->invalidated = true;
		return;
	}
	n = capture_node(s, types[op->kind]);
	if (!n) {
		mps__op_free(op);
		return;
	}
	n->op = op;
	if (op->kind == SI_OP_COPY && op->copy.params)
		n->copy = *op->copy.params;
	/* A captured kernel runs on its stream's SMs wherever the graph is
	 * launched (the node carries the stream's context). */
	if (op->kind == SI_OP_KERNEL && !op->kernel.sm_count) {
		op->kernel.sm_first = s->sm_count ? s->sm_first : 0;
		op->kernel.sm_count = s->sm_count ? s->sm_count : SI_SM_COUNT;
	}
}

CUresult mps__capture_mem(struct si_stream *s, CUgraphNodeType type, CUdeviceptr dptr, size_t bytes)
{
	struct si_gnode *n = capture_node(s, type);

	if (!n)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	n->dptr = dptr;
	n->bytes = bytes;
	return CUDA_SUCCESS;
}

CUresult mps__capture_refuse(struct si_stream *s)
{
	s->cap->invalidated = true;
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult mps__capture_record(struct si_stream *s, CUevent ev)
{
	CUresult rc = mps__event_check(ev, s->ctx);

	if (rc != CUDA_SUCCESS)
		return rc;
	mps__event_set_capture(ev, s->cap, s->cap_deps, s->ncap_deps, s, s->cap_ops);
	return CUDA_SUCCESS;
}

CUresult mps__capture_wait(struct si_stream *s, CUevent ev)
{
	struct si_gnode **deps;
	struct si_stream *from;
	struct si_capture *cap;
	unsigned n;
	uint64_t ops;

	cap = mps__event_capture(ev, &deps, &n, &from, &ops);
	if (!cap)
		/* Work outside the capture cannot be waited for inside it. */
		return s->cap ? CUDA_ERROR_STREAM_CAPTURE_ISOLATION : CUDA_SUCCESS;
	if (s->cap && s->cap != cap)
		return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
	if (!s->cap) {
		join(s, cap);
		s->cap_unjoined = true;
	}
	if (add_deps(s, deps, n) < 0) {
		cap->invalidated = true;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* The origin waiting for everything a forked stream did joins it back. */
	if (s == cap->origin && from && from != s && from->cap == cap && from->cap_ops == ops)
		from->cap_unjoined = false;
	return CUDA_SUCCESS;
}

static CUresult begin(CUstream h, CUgraph into, const CUgraphNode *deps, size_t ndeps, CUstreamCaptureMode mode)
{
	struct si_capture *cap = NULL;
	struct si_context *ctx;
	struct si_stream *s;
	struct live *l = NULL;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	if (mps__stream_is_legacy(h))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	mps__lock();
	rc = mps__stream_enter(h, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out;
	rc = CUDA_ERROR_ILLEGAL_STATE;
	if (s->cap)
		goto out;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	cap = calloc(1, sizeof(*cap));
	l = calloc(1, sizeof(*l));
	if (!cap || !l)
		goto out;
	if (into) {
		cap->graph = mps__handle_get((uintptr_t)into, SI_H_GRAPH);
		rc = CUDA_ERROR_INVALID_VALUE;
		if (!cap->graph || cap->graph->cap)
			goto out;
		cap->to_graph = true;
	} else {
		cap->graph = mps__graph_new();
		if (!cap->graph)
			goto out;
	}
	cap->id = next_id++;
	cap->origin = s;
	cap->mode = mode;
	cap->graph->cap = cap;
	join(s, cap);
	for (size_t i = 0; i < ndeps; i++) {
		struct si_gnode *d = mps__handle_get((uintptr_t)deps[i], SI_H_GNODE);

		rc = CUDA_ERROR_INVALID_VALUE;
		if (!d || d->graph != cap->graph || add_deps(s, &d, 1) < 0) {
			mps__capture_leave(s);
			cap->graph->cap = NULL;
			if (!cap->to_graph)
				mps__graph_free(cap->graph);
			goto out;
		}
	}
	l->cap = cap;
	l->next = captures;
	captures = l;
	cap = NULL;
	l = NULL;
	rc = CUDA_SUCCESS;
out:
	free(cap);
	free(l);
	mps__unlock();
	return rc;
}

CU_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin(hStream, NULL, NULL, 0, mode);
}

CU_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
					    const CUgraphEdgeData *dependencyData, size_t numDependencies,
					    CUstreamCaptureMode mode)
{
	(void)dependencyData;   /* edge data: the default kind is all the stand-in has */
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	return begin(hStream, hGraph, dependencies, numDependencies, mode);
}

CU_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_capture *cap;
	bool unjoined = false;
	CUresult rc;

	CUgraph none;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out;
	cap = s->cap;
	rc = CUDA_ERROR_ILLEGAL_STATE;
	if (!cap)
		goto out;
	rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	if (cap->origin != s)
		goto out;
	/* The graph need not be taken (the driver ends the capture all the
	 * same); a new one nobody takes is freed. */
	if (!phGraph)
		phGraph = &none;
	/* Every stream leaves the capture; any forked one not joined back
	 * spoils it. */
	for (struct si_list *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct si_stream *t = si_container_of(l, struct si_stream, link);

		if (t->cap != cap)
			continue;
		if (t != s && t->cap_unjoined)
			unjoined = true;
		mps__capture_leave(t);
	}
	for (struct live **pp = &captures; *pp; pp = &(*pp)->next) {
		if ((*pp)->cap == cap) {
			struct live *l = *pp;

			*pp = l->next;
			free(l);
			break;
		}
	}
	cap->graph->cap = NULL;
	*phGraph = NULL;
	if (unjoined || cap->invalidated) {
		if (!cap->to_graph)
			mps__graph_free(cap->graph);
		rc = unjoined ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		rc = CUDA_SUCCESS;
		if (!cap->graph->handle) {
			cap->graph->handle = mps__handle_add(SI_H_GRAPH, cap->graph);
			if (!cap->graph->handle) {
				mps__graph_free(cap->graph);
				rc = CUDA_ERROR_OUT_OF_MEMORY;
			}
		}
		if (rc == CUDA_SUCCESS)
			*phGraph = (CUgraph)cap->graph->handle;
		if (rc == CUDA_SUCCESS && phGraph == &none && !cap->to_graph)
			mps__graph_free(cap->graph);
	}
	free(cap);
out:
	mps__unlock();
	return rc;
}

/* The dependencies info() hands out live per thread until its next call,
 * as the driver's do; a thread's array goes when the thread does. */
static pthread_key_t deps_key;
static pthread_once_t deps_once = PTHREAD_ONCE_INIT;

static void deps_key_make(void)
{
	pthread_key_create(&deps_key, free);
}

static CUresult info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
		     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	static __thread CUgraphNode *out;
	static __thread unsigned out_cap;
	struct si_context *ctx;
	struct si_stream *s;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__stream_enter(h, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out;
	*status = !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE :
		  s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (id)
		*id = s->cap ? s->cap->id : 0;
	if (graph)
		*graph = NULL;
	if (edges)
		*edges = NULL;
	if (deps)
		*deps = NULL;
	if (ndeps)
		*ndeps = 0;
	if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		goto out;
	if (graph) {
		/* Named while it is built, so the caller can add to it. */
		if (!s->cap->graph->handle)
			s->cap->graph->handle = mps__handle_add(SI_H_GRAPH, s->cap->graph);
		*graph = (CUgraph)s->cap->graph->handle;
	}
	if (s->ncap_deps > out_cap) {
		CUgraphNode *n = realloc(out, s->ncap_deps * sizeof(*n));

		if (!n) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		out = n;
		out_cap = s->ncap_deps;
		pthread_once(&deps_once, deps_key_make);
		pthread_setspecific(deps_key, out);   /* freed with the thread */
	}
	for (unsigned i = 0; i < s->ncap_deps; i++)
		out[i] = (CUgraphNode)s->cap_deps[i]->handle;
	if (deps)
		*deps = s->ncap_deps ? out : NULL;
	if (ndeps)
		*ndeps = s->ncap_deps;
out:
	mps__unlock();
	return rc;
}

CU_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

CU_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					  cuuint64_t *id_out, CUgraph *graph_out,
					  const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
					  size_t *numDependencies_out)
{
	return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
		    numDependencies_out);
}

CU_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
						     const CUgraphEdgeData *dependencyData, size_t numDependencies,
						     unsigned int flags)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_gnode **d = NULL;
	CUresult rc;

	(void)dependencyData;
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((numDependencies && !dependencies) ||
	    (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out;
	rc = CUDA_ERROR_ILLEGAL_STATE;
	if (!s->cap)
		goto out;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	d = calloc(numDependencies ? numDependencies : 1, sizeof(*d));
	if (!d)
		goto out;
	rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < numDependencies; i++) {
		d[i] = mps__handle_get((uintptr_t)dependencies[i], SI_H_GNODE);
		if (!d[i] || d[i]->graph != s->cap->graph)
			goto out;
	}
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
		s->ncap_deps = 0;
	if (add_deps(s, d, (unsigned)numDependencies) == 0)
		rc = CUDA_SUCCESS;
out:
	free(d);
	mps__unlock();
	return rc;
}

CU_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old;

	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	old = thread_mode;
	thread_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}
