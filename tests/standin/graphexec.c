// SPDX-License-Identifier: MIT
/*
 * Executable graphs. Instantiating copies a graph's work into a list of
 * steps in an order that keeps every dependency (a child graph's steps in
 * its node's place), so the executable graph no longer depends on the graph.
 * A launch queues the steps on the stream, in that order: a stream runs one
 * operation at a time, so the order is all the dependencies need. Steps
 * remember the node they came from, for the calls that update one.
 * All under the stand-in lock.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct step {
	CUgraphNodeType type;
	uintptr_t node;                 /* the node it came from */
	uintptr_t top;                  /* the executable graph's own node it is part of */
	struct si_op *op;               /* kernel, copy, memset */
	CUevent event;                  /* event record / wait */
	CUdeviceptr dptr;               /* mem alloc / free */
	bool disabled;
};

struct si_gexec {
	uintptr_t handle;
	struct step *steps;
	unsigned nsteps, cap;
	cuuint64_t flags;
};

static void exec_free(struct si_gexec *x)
{
	for (unsigned i = 0; i < x->nsteps; i++) {
		if (x->steps[i].op)
			mps__op_free(x->steps[i].op);
		if (x->steps[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			mps__graph_range_release(x->steps[i].dptr);
	}
	if (x->handle)
		mps__handle_remove(x->handle);
	free(x->steps);
	free(x);
}

static CUresult step_add(struct si_gexec *x, const struct si_gnode *n, uintptr_t top)
{
	struct step *st;

	if (x->nsteps == x->cap) {
		unsigned ncap = x->cap ? x->cap * 2 : 16;
		struct step *ns = realloc(x->steps, ncap * sizeof(*ns));

		if (!ns)
			return CUDA_ERROR_OUT_OF_MEMORY;
		x->steps = ns;
		x->cap = ncap;
	}
	st = &x->steps[x->nsteps];
	memset(st, 0, sizeof(*st));
	st->type = n->type;
	st->node = n->handle;
	st->top = top;
	st->event = n->event;
	st->dptr = n->dptr;
	if (n->op && !(st->op = mps__op_clone(n->op)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		mps__graph_range_hold(n->dptr);
	x->nsteps++;
	return CUDA_SUCCESS;
}

static CUresult flatten(struct si_gexec *x, struct si_graph *g, uintptr_t top);

/* A conditional node: nothing in the stand-in's device code sets a
 * condition, so it holds its default value at every launch, and the body
 * that value picks is the one the node runs, unrolled here. A loop that
 * would run is refused. */
static CUresult conditional(struct si_gexec *x, struct si_gnode *n, uintptr_t top)
{
	unsigned v;

	if (mps__cond_value(n->cond, &v) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	switch (n->cond_type) {
	case CU_GRAPH_COND_TYPE_IF:
		if (v)
			return flatten(x, n->bodies[0], top);
		return n->nbodies > 1 ? flatten(x, n->bodies[1], top) : CUDA_SUCCESS;
	case CU_GRAPH_COND_TYPE_WHILE:
		return v ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
	default:
		return v < n->nbodies ? flatten(x, n->bodies[v], top) : CUDA_SUCCESS;
	}
}

/* Adds n after everything it depends on (marks: 1 on the way, 2 done);
 * top: the executable graph's node it is inside (0: n is one). */
static CUresult visit(struct si_gexec *x, struct si_gnode *n, uintptr_t top)
{
	uintptr_t t = top ? top : n->handle;
	CUresult rc;

	if (n->mark == 2)
		return CUDA_SUCCESS;
	if (n->mark == 1)
		return CUDA_ERROR_INVALID_VALUE;   /* a cycle */
	n->mark = 1;
	for (unsigned i = 0; i < n->ndeps; i++) {
		rc = visit(x, n->deps[i], top);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_GRAPH:
		rc = flatten(x, n->child, t);
		break;
	case CU_GRAPH_NODE_TYPE_KERNEL:
	case CU_GRAPH_NODE_TYPE_MEMCPY:
	case CU_GRAPH_NODE_TYPE_MEMSET:
	case CU_GRAPH_NODE_TYPE_EMPTY:
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:   /* the memory is there from the node's making */
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
	case CU_GRAPH_NODE_TYPE_HOST:
	case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
		rc = step_add(x, n, t);
		break;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		rc = conditional(x, n, t);
		break;
	default:
		rc = CUDA_ERROR_NOT_SUPPORTED;
		break;
	}
	n->mark = 2;
	return rc;
}

static CUresult flatten(struct si_gexec *x, struct si_graph *g, uintptr_t top)
{
	CUresult rc = CUDA_SUCCESS;

	for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next)
		si_container_of(l, struct si_gnode, link)->mark = 0;
	for (struct si_list *l = g->nodes.next; rc == CUDA_SUCCESS && l != &g->nodes; l = l->next)
		rc = visit(x, si_container_of(l, struct si_gnode, link), top);
	return rc;
}

CU_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
	struct si_context *ctx;
	struct si_gexec *x;
	struct si_graph *g;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phGraphExec || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		goto out;
	g = mps__handle_get((uintptr_t)hGraph, SI_H_GRAPH);
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!g || g->cap)
		goto out;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	x = calloc(1, sizeof(*x));
	if (!x)
		goto out;
	x->flags = flags;
	rc = flatten(x, g, 0);
	if (rc == CUDA_SUCCESS && !(x->handle = mps__handle_add(SI_H_GEXEC, x)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc != CUDA_SUCCESS) {
		exec_free(x);
		goto out;
	}
	*phGraphExec = (CUgraphExec)x->handle;
out:
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	struct si_gexec *x;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	if (x && flags) {
		*flags = x->flags;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	struct si_gexec *x;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	if (x) {
		/* Launched work holds copies of its own: it runs on. */
		exec_free(x);
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

static CUresult launch(CUgraphExec hGraphExec, CUstream hStream, bool upload_only)
{
	struct si_context *ctx;
	struct si_stream *s;
	struct si_gexec *x;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc != CUDA_SUCCESS)
		goto out;
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!x)
		goto out;
	rc = CUDA_SUCCESS;
	if (upload_only)
		goto out;
	for (unsigned i = 0; rc == CUDA_SUCCESS && i < x->nsteps; i++) {
		struct step *st = &x->steps[i];
		struct si_op *op = NULL;

		if (st->disabled)
			continue;
		switch (st->type) {
		case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
			rc = s->cap ? mps__capture_record(s, st->event) : mps__event_record(ctx, s, st->event);
			continue;
		case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
			if (s->cap) {
				rc = mps__capture_wait(s, st->event);
				continue;
			}
			op = mps__event_wait_op(st->event, &rc);
			break;
		case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		case CU_GRAPH_NODE_TYPE_MEM_FREE: {
			/* The memory itself stays; only its state changes. */
			struct si_range *r = mps__range_find((uintptr_t)st->dptr);

			if (r && r->graph && r->base == (uintptr_t)st->dptr)
				r->freed = st->type == CU_GRAPH_NODE_TYPE_MEM_FREE;
			continue;
		}
		case CU_GRAPH_NODE_TYPE_EMPTY:
			continue;
		default:
			op = mps__op_clone(st->op);
			if (!op)
				rc = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		if (op)
			mps__submit(s, op);
	}
out:
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return launch(hGraphExec, hStream, false);
}

CU_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return launch(hGraphExec, hStream, true);
}

/* A child graph node's work in the executable graph becomes childGraph's,
 * which must have the same shape (the same steps in the same order). */
CU_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
	struct si_gexec *x, y = { 0 };
	struct si_gnode *n;
	struct si_graph *g;
	unsigned first = 0, count = 0;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	n = mps__handle_get((uintptr_t)hNode, SI_H_GNODE);
	g = mps__handle_get((uintptr_t)childGraph, SI_H_GRAPH);
	if (!x || !n || !g || n->type != CU_GRAPH_NODE_TYPE_GRAPH || g->cap)
		goto out;
	for (unsigned i = 0; i < x->nsteps; i++)
		if (x->steps[i].top == (uintptr_t)hNode && !count++)
			first = i;
	rc = flatten(&y, g, (uintptr_t)hNode);
	if (rc != CUDA_SUCCESS)
		goto out;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (y.nsteps != count)
		goto out;
	for (unsigned i = 0; i < count; i++)
		if (y.steps[i].type != x->steps[first + i].type)
			goto out;
	for (unsigned i = 0; i < count; i++) {
		struct step *st = &x->steps[first + i];
		bool disabled = st->disabled;

		if (st->op)
			mps__op_free(st->op);
		*st = y.steps[i];
		st->disabled = disabled;
		y.steps[i].op = NULL;
	}
	rc = CUDA_SUCCESS;
out:
	for (unsigned i = 0; i < y.nsteps; i++)
		if (y.steps[i].op)
			mps__op_free(y.steps[i].op);
	free(y.steps);
	mps__unlock();
	return rc;
}

static struct step *step_of(struct si_gexec *x, CUgraphNode node)
{
	for (unsigned i = 0; i < x->nsteps; i++)
		if (x->steps[i].node == (uintptr_t)node)
			return &x->steps[i];
	return NULL;
}

CU_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						  const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct si_context *ctx;
	struct si_function *fn;
	struct si_gexec *x;
	struct step *st;
	struct si_op *op;
	CUresult rc;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	st = x ? step_of(x, hNode) : NULL;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!st || st->type != CU_GRAPH_NODE_TYPE_KERNEL)
		goto out;
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__function_resolve(nodeParams->func ? nodeParams->func : (CUfunction)nodeParams->kern, ctx, &fn);
	if (rc == CUDA_SUCCESS)
		rc = mps__kernel_op(fn, (const unsigned[3]){ nodeParams->gridDimX, nodeParams->gridDimY, nodeParams->gridDimZ },
				    (const unsigned[3]){ nodeParams->blockDimX, nodeParams->blockDimY, nodeParams->blockDimZ },
				    nodeParams->sharedMemBytes, nodeParams->kernelParams, nodeParams->extra, &op);
	if (rc == CUDA_SUCCESS) {
		mps__op_free(st->op);
		st->op = op;
	}
out:
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					       const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	struct si_gexec *x;
	struct step *st;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	(void)ctx;
	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	st = x ? step_of(x, hNode) : NULL;
	if (st && st->type == CU_GRAPH_NODE_TYPE_MEMSET && memsetParams && memsetParams->height == 1 &&
	    memsetParams->elementSize == st->op->memset.width && mps__range_find((uintptr_t)memsetParams->dst)) {
		st->op->memset.dst = (void *)(uintptr_t)memsetParams->dst;
		st->op->memset.count = memsetParams->width;
		st->op->memset.value = memsetParams->value;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					       const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	struct si_gexec *x;
	struct step *st;
	struct si_op *op;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	(void)ctx;
	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	st = x ? step_of(x, hNode) : NULL;
	/* As the driver: the node's copy and the new one must both be of one row. */
	if (st && st->type == CU_GRAPH_NODE_TYPE_MEMCPY && st->op && st->op->copy.rows <= 1 && st->op->copy.slices <= 1 &&
	    copyParams && copyParams->Height <= 1 && copyParams->Depth <= 1 &&
	    (rc = mps__copy3d_op(copyParams, &op)) == CUDA_SUCCESS) {
		mps__op_free(st->op);
		st->op = op;
	}
	mps__unlock();
	return rc;
}

static CUresult exec_event(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event, CUgraphNodeType type)
{
	struct si_context *ctx;
	struct si_gexec *x;
	struct step *st;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	st = x ? step_of(x, hNode) : NULL;
	if (st && st->type == type && (rc = mps__ctx_enter(&ctx)) == CUDA_SUCCESS &&
	    (rc = mps__event_check(event, ctx)) == CUDA_SUCCESS)
		st->event = event;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
	return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CU_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
	return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

static CUresult enabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned *get, unsigned set)
{
	struct si_gexec *x;
	struct step *st;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	st = x ? step_of(x, hNode) : NULL;
	if (st && (st->type == CU_GRAPH_NODE_TYPE_KERNEL || st->type == CU_GRAPH_NODE_TYPE_MEMCPY ||
		   st->type == CU_GRAPH_NODE_TYPE_MEMSET)) {
		if (get)
			*get = !st->disabled;
		else
			st->disabled = !set;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
	return enabled(hGraphExec, hNode, NULL, isEnabled);
}

CU_API CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
	return isEnabled ? enabled(hGraphExec, hNode, isEnabled, 0) : CUDA_ERROR_INVALID_VALUE;
}

CU_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	struct si_gexec *x, *y = NULL;
	struct si_graph *g;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!resultInfo)
		return CUDA_ERROR_INVALID_VALUE;
	memset(resultInfo, 0, sizeof(*resultInfo));
	mps__lock();
	x = mps__handle_get((uintptr_t)hGraphExec, SI_H_GEXEC);
	g = mps__handle_get((uintptr_t)hGraph, SI_H_GRAPH);
	if (!x || !g)
		goto out;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	y = calloc(1, sizeof(*y));
	if (!y)
		goto out;
	rc = flatten(y, g, 0);
	if (rc != CUDA_SUCCESS)
		goto out;
	/* The same work in the same order, node for node: take its parameters. */
	rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
	if (y->nsteps != x->nsteps)
		goto out;
	for (unsigned i = 0; i < x->nsteps; i++) {
		if (y->steps[i].type != x->steps[i].type) {
			resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
			resultInfo->errorNode = (CUgraphNode)y->steps[i].node;
			goto out;
		}
	}
	for (unsigned i = 0; i < x->nsteps; i++) {
		struct si_op *op = x->steps[i].op;

		x->steps[i].op = y->steps[i].op;
		x->steps[i].event = y->steps[i].event;
		x->steps[i].node = y->steps[i].node;
		y->steps[i].op = op;
	}
	resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	rc = CUDA_SUCCESS;
out:
	if (y)
		exec_free(y);
	mps__unlock();
	return rc;
}
