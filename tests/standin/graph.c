// SPDX-License-Identifier: MIT
/*
 * Graphs as the stand-in keeps them: a list of nodes, each with the nodes it
 * depends on. A kernel, copy or memset node holds the operation it stands
 * for (never submitted itself: a launch submits copies); a child-graph node
 * holds a clone of the graph it was given; event and allocation nodes hold
 * what they name. Edges are only "depends on"; the stand-in knows the
 * default edge kind alone. Every graph and node is a registry handle
 * (registry.c), so a stale one is refused. All under the stand-in lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct si_graph *mps__graph_new(void)
{
	struct si_graph *g = calloc(1, sizeof(*g));

	if (g)
		si_list_init(&g->nodes);
	return g;
}

void mps__gnode_free(struct si_gnode *n)
{
	if (n->handle)
		mps__handle_remove(n->handle);
	if (n->op)
		mps__op_free(n->op);
	if (n->child)
		mps__graph_free(n->child);
	if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		mps__graph_range_release(n->dptr);
	for (unsigned i = 0; i < n->nbodies; i++)
		if (n->bodies[i])
			mps__graph_free(n->bodies[i]);
	free(n->bodies);
	free(n->body_handles);
	si_list_del(&n->link);
	n->graph->nnodes--;
	free(n->deps);
	free(n);
}

void mps__graph_free(struct si_graph *g)
{
	while (!si_list_empty(&g->nodes))
		mps__gnode_free(si_container_of(g->nodes.next, struct si_gnode, link));
	if (g->handle)
		mps__handle_remove(g->handle);
	free(g);
}

static int dep_add(struct si_gnode *n, struct si_gnode *d)
{
	for (unsigned i = 0; i < n->ndeps; i++)
		if (n->deps[i] == d)
			return 1;
	if (n->ndeps == n->deps_cap) {
		unsigned ncap = n->deps_cap ? n->deps_cap * 2 : 4;
		struct si_gnode **nd = realloc(n->deps, ncap * sizeof(*nd));

		if (!nd)
			return -1;
		n->deps = nd;
		n->deps_cap = ncap;
	}
	n->deps[n->ndeps++] = d;
	return 0;
}

struct si_gnode *mps__gnode_add(struct si_graph *g, CUgraphNodeType type, struct si_gnode *const *deps,
				unsigned ndeps)
{
	struct si_gnode *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->graph = g;
	n->type = type;
	n->handle = mps__handle_add(SI_H_GNODE, n);
	if (!n->handle) {
		free(n);
		return NULL;
	}
	si_list_add(&g->nodes, &n->link);
	g->nnodes++;
	for (unsigned i = 0; i < ndeps; i++) {
		if (dep_add(n, deps[i]) < 0) {
			mps__gnode_free(n);
			return NULL;
		}
	}
	return n;
}

struct si_graph *mps__graph_arg(CUgraph h)
{
	return mps__handle_get((uintptr_t)h, SI_H_GRAPH);
}

struct si_gnode *mps__gnode_arg(CUgraphNode h)
{
	return mps__handle_get((uintptr_t)h, SI_H_GNODE);
}

/* Looks up ndeps dependency handles, all nodes of g, none twice. */
static CUresult deps_arg(struct si_graph *g, const CUgraphNode *h, size_t n, struct si_gnode ***out)
{
	struct si_gnode **d;

	*out = NULL;
	if (n && !h)
		return CUDA_ERROR_INVALID_VALUE;
	d = calloc(n ? n : 1, sizeof(*d));
	if (!d)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n; i++) {
		d[i] = mps__gnode_arg(h[i]);
		for (size_t j = 0; d[i] && j < i; j++)
			if (d[j] == d[i])
				d[i] = NULL;
		if (!d[i] || d[i]->graph != g) {
			free(d);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	*out = d;
	return CUDA_SUCCESS;
}

/* The common frame of the cuGraphAdd*Node calls: checks, makes the node
 * after its dependencies. */
CUresult mps__graph_add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
			     CUgraphNodeType type, struct si_gnode **node)
{
	struct si_graph *g;
	struct si_gnode **d;
	CUresult rc;

	*node = NULL;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	/* A capture's graph takes nodes too (cuStreamGetCaptureInfo gives it
	 * out for that, with cuStreamUpdateCaptureDependencies). */
	g = mps__graph_arg(hg);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	rc = deps_arg(g, deps, ndeps, &d);
	if (rc != CUDA_SUCCESS)
		return rc;
	*node = mps__gnode_add(g, type, d, (unsigned)ndeps);
	free(d);
	if (!*node)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = (CUgraphNode)(*node)->handle;
	return CUDA_SUCCESS;
}

CUresult mps__graph_add_op_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
				CUgraphNodeType type, struct si_op *op, struct si_gnode **node)
{
	CUresult rc = mps__graph_add_node(out, hg, deps, ndeps, type, node);

	if (rc == CUDA_SUCCESS)
		(*node)->op = op;
	else
		mps__op_free(op);
	return rc;
}

CU_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct si_graph *g;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	g = mps__graph_new();
	if (g) {
		g->handle = mps__handle_add(SI_H_GRAPH, g);
		if (g->handle) {
			*phGraph = (CUgraph)g->handle;
			rc = CUDA_SUCCESS;
		} else {
			free(g);
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphDestroy(CUgraph hGraph)
{
	struct si_graph *g;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	g = mps__graph_arg(hGraph);
	/* Not while it is being captured, nor a child graph (its node owns it). */
	if (g && !g->cap && !g->parent) {
		mps__graph_free(g);
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				    size_t numDependencies)
{
	struct si_gnode *n;
	CUresult rc;

	mps__lock();
	rc = mps__graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EMPTY, &n);
	mps__unlock();
	return rc;
}

/* The kernel operation node parameters describe: their function resolved in
 * their context (or the current one). A kernel (not a function) runs on the
 * SMs of the context named, a green one's included (or the current one's);
 * a function on its own context's, all of them. */
static CUresult kernel_from(const CUDA_KERNEL_NODE_PARAMS *p, struct si_op **op, const struct si_function **fn)
{
	struct si_context *ctx;
	struct si_function *f;
	CUresult rc;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = mps__function_resolve(p->func ? p->func : (CUfunction)p->kern, ctx, &f);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = mps__kernel_op(f, (const unsigned[3]){ p->gridDimX, p->gridDimY, p->gridDimZ },
			    (const unsigned[3]){ p->blockDimX, p->blockDimY, p->blockDimZ }, p->sharedMemBytes,
			    p->kernelParams, p->extra, op);
	if (rc != CUDA_SUCCESS)
		return rc;
	*fn = f;
	(*op)->kernel.sm_first = 0;
	(*op)->kernel.sm_count = SI_SM_COUNT;
	if (!p->func) {
		int dev;

		if (!p->ctx)
			mps__ctx_sm_range(&(*op)->kernel.sm_first, &(*op)->kernel.sm_count);
		else if (!mps__green_ctx((uintptr_t)p->ctx, &dev, &(*op)->kernel.sm_first, &(*op)->kernel.sm_count))
			(*op)->kernel.sm_count = SI_SM_COUNT;
	}
	return CUDA_SUCCESS;
}

CU_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	const struct si_function *fn;
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc;

	mps__lock();
	rc = kernel_from(nodeParams, &op, &fn);
	if (rc == CUDA_SUCCESS &&
	    (rc = mps__graph_add_op_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_KERNEL,
					 op, &n)) == CUDA_SUCCESS)
		n->fn = fn;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	static __thread void *ptrs[64];
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && nodeParams && n->type == CU_GRAPH_NODE_TYPE_KERNEL && n->op->kernel.entry->nparams <= 64) {
		const struct si_entry *e = n->op->kernel.entry;

		memset(nodeParams, 0, sizeof(*nodeParams));
		/* A captured kernel has no function recorded: name it by its
		 * module's function of that entry. */
		for (unsigned i = 0; !n->fn && i < n->op->kernel.mod->img.nentries; i++)
			if (&n->op->kernel.mod->img.entries[i] == e)
				n->fn = &n->op->kernel.mod->funcs[i];
		nodeParams->func = n->fn ? (CUfunction)n->fn->handle : NULL;
		nodeParams->gridDimX = n->op->kernel.grid[0];
		nodeParams->gridDimY = n->op->kernel.grid[1];
		nodeParams->gridDimZ = n->op->kernel.grid[2];
		nodeParams->blockDimX = n->op->kernel.block[0];
		nodeParams->blockDimY = n->op->kernel.block[1];
		nodeParams->blockDimZ = n->op->kernel.block[2];
		for (unsigned i = 0; i < e->nparams; i++)
			ptrs[i] = n->op->kernel.params + e->params[i].offset;
		nodeParams->kernelParams = e->nparams ? ptrs : NULL;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	const struct si_function *fn;
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
		rc = kernel_from(nodeParams, &op, &fn);
		if (rc == CUDA_SUCCESS) {
			mps__op_free(n->op);
			n->op = op;
			n->fn = fn;
		}
	}
	mps__unlock();
	return rc;
}

/* A memset node's operation, its span checked as cuMemsetD2D*Async checks. */
static CUresult memset_from(const CUDA_MEMSET_NODE_PARAMS *p, struct si_op **out)
{
	struct si_op *op;

	if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width || !p->height ||
	    (p->height > 1 && p->pitch < p->width * p->elementSize))
		return CUDA_ERROR_INVALID_VALUE;
	/* The stand-in sets whole rows: a pitched memset must be packed. */
	if (p->height > 1 && p->pitch != p->width * p->elementSize)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!mps__range_find((uintptr_t)p->dst))
		return CUDA_ERROR_INVALID_VALUE;
	op = mps__op_new(SI_OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->memset.dst = (void *)(uintptr_t)p->dst;
	op->memset.count = p->width * p->height;
	op->memset.width = p->elementSize;
	op->memset.value = p->value;
	*out = op;
	return CUDA_SUCCESS;
}

CU_API CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				     size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
				     CUcontext ctx)
{
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc;

	(void)ctx;
	mps__lock();
	rc = memset_from(memsetParams, &op);
	if (rc == CUDA_SUCCESS)
		rc = mps__graph_add_op_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMSET,
					    op, &n);
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && nodeParams && n->type == CU_GRAPH_NODE_TYPE_MEMSET) {
		memset(nodeParams, 0, sizeof(*nodeParams));
		nodeParams->dst = (CUdeviceptr)(uintptr_t)n->op->memset.dst;
		nodeParams->elementSize = n->op->memset.width;
		nodeParams->width = n->op->memset.count;
		nodeParams->height = 1;
		nodeParams->pitch = n->op->memset.count * n->op->memset.width;
		nodeParams->value = n->op->memset.value;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && n->type == CU_GRAPH_NODE_TYPE_MEMSET && (rc = memset_from(nodeParams, &op)) == CUDA_SUCCESS) {
		mps__op_free(n->op);
		n->op = op;
	}
	mps__unlock();
	return rc;
}

static CUresult event_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps, CUevent ev,
			   CUgraphNodeType type)
{
	struct si_context *ctx;
	struct si_gnode *n;
	CUresult rc;

	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__event_check(ev, ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__graph_add_node(out, hg, deps, ndeps, type, &n);
	if (rc == CUDA_SUCCESS)
		n->event = ev;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					  size_t numDependencies, CUevent event)
{
	return event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CU_API CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					size_t numDependencies, CUevent event)
{
	return event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

static CUresult node_event(CUgraphNode h, CUgraphNodeType type, CUevent *get, CUevent set)
{
	struct si_context *ctx;
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(h);
	if (n && n->type == type) {
		if (get) {
			*get = n->event;
			rc = CUDA_SUCCESS;
		} else if ((rc = mps__ctx_enter(&ctx)) == CUDA_SUCCESS && (rc = mps__event_check(set, ctx)) == CUDA_SUCCESS) {
			n->event = set;
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return event_out ? node_event(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event_out, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CU_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return event_out ? node_event(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event_out, NULL) : CUDA_ERROR_INVALID_VALUE;
}

CU_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return node_event(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, NULL, event);
}

CU_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return node_event(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, NULL, event);
}

/* Copies src's nodes into dst (empty), with the same edges; each original
 * notes its copy in clone_of while this runs. Under the lock. */
static CUresult copy_nodes(struct si_graph *dst, struct si_graph *src)
{
	for (struct si_list *l = src->nodes.next; l != &src->nodes; l = l->next) {
		struct si_gnode *o = si_container_of(l, struct si_gnode, link), *c;

		c = mps__gnode_add(dst, o->type, NULL, 0);
		if (!c)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->fn = o->fn;
		c->event = o->event;
		c->dptr = o->dptr;
		c->bytes = o->bytes;
		c->copy = o->copy;
		c->cond = o->cond;
		c->cond_type = o->cond_type;
		if (o->nbodies) {
			c->bodies = calloc(o->nbodies, sizeof(*c->bodies));
			if (!c->bodies)
				return CUDA_ERROR_OUT_OF_MEMORY;
			c->nbodies = o->nbodies;
			for (unsigned i = 0; i < o->nbodies; i++) {
				c->bodies[i] = mps__graph_clone(o->bodies[i]);
				if (!c->bodies[i] || !(c->bodies[i]->handle = mps__handle_add(SI_H_GRAPH, c->bodies[i])))
					return CUDA_ERROR_OUT_OF_MEMORY;
				c->bodies[i]->parent = c;
			}
		}
		c->clone_of = o;
		o->clone_of = c;
		if (o->op && !(c->op = mps__op_clone(o->op)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (o->child) {
			c->child = mps__graph_new();
			if (!c->child || !(c->child->handle = mps__handle_add(SI_H_GRAPH, c->child)))
				return CUDA_ERROR_OUT_OF_MEMORY;
			c->child->parent = c;
			if (copy_nodes(c->child, o->child) != CUDA_SUCCESS)
				return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	for (struct si_list *l = src->nodes.next; l != &src->nodes; l = l->next) {
		struct si_gnode *o = si_container_of(l, struct si_gnode, link);

		for (unsigned i = 0; i < o->ndeps; i++)
			if (dep_add(o->clone_of, o->deps[i]->clone_of) < 0)
				return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

struct si_graph *mps__graph_clone(struct si_graph *src)
{
	struct si_graph *g = mps__graph_new();

	if (!g)
		return NULL;
	if (copy_nodes(g, src) != CUDA_SUCCESS) {
		mps__graph_free(g);
		return NULL;
	}
	return g;
}

/* The driver clones no graph with memory allocation, memory free or
 * conditional nodes, at any depth. */
static bool clonable(const struct si_graph *g)
{
	for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next) {
		const struct si_gnode *n = si_container_of(l, struct si_gnode, link);

		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
		    n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL || (n->child && !clonable(n->child)))
			return false;
	}
	return true;
}

CU_API CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	struct si_graph *o, *g = NULL;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	o = mps__graph_arg(originalGraph);
	if (o && !clonable(o))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	else if (phGraphClone && o && !o->cap) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		g = mps__graph_clone(o);
		if (g && (g->handle = mps__handle_add(SI_H_GRAPH, g))) {
			*phGraphClone = (CUgraph)g->handle;
			rc = CUDA_SUCCESS;
		} else if (g) {
			mps__graph_free(g);
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph)
{
	struct si_gnode *o;
	struct si_graph *g;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	o = mps__gnode_arg(hOriginalNode);
	g = mps__graph_arg(hClonedGraph);
	/* A clone's copy points back at its original, and the original at its
	 * latest copy. */
	if (phNode && o && g) {
		for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next) {
			struct si_gnode *c = si_container_of(l, struct si_gnode, link);

			if (c->clone_of == o) {
				*phNode = (CUgraphNode)c->handle;
				rc = CUDA_SUCCESS;
				break;
			}
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, CUgraph childGraph)
{
	struct si_graph *child;
	struct si_gnode *n;
	CUresult rc;

	mps__lock();
	child = mps__graph_arg(childGraph);
	rc = CUDA_ERROR_INVALID_VALUE;
	if (child && !child->cap && child != mps__graph_arg(hGraph))
		rc = mps__graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_GRAPH, &n);
	if (rc == CUDA_SUCCESS) {
		n->child = mps__graph_clone(child);
		if (!n->child) {
			mps__gnode_free(n);
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			n->child->parent = n;
			n->child->handle = mps__handle_add(SI_H_GRAPH, n->child);
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && phGraph && n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->child->handle) {
		*phGraph = (CUgraph)n->child->handle;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && type) {
		*type = n->type;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

/* True if `to` depends on `from`, directly or not. */
static bool reaches(struct si_gnode *to, struct si_gnode *from)
{
	if (to == from)
		return true;
	for (unsigned i = 0; i < to->ndeps; i++)
		if (reaches(to->deps[i], from))
			return true;
	return false;
}

static CUresult edges(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to, size_t n, bool add)
{
	struct si_graph *g;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	g = mps__graph_arg(hg);
	if (!g || (n && (!from || !to)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct si_gnode *f = mps__gnode_arg(from[i]), *t = mps__gnode_arg(to[i]);

		rc = CUDA_ERROR_INVALID_VALUE;
		if (!f || !t || f->graph != g || t->graph != g || f == t)
			goto out;
		if (add) {
			if (reaches(f, t))
				goto out;       /* a cycle */
			if (dep_add(t, f) < 0) {
				rc = CUDA_ERROR_OUT_OF_MEMORY;
				goto out;
			}
		} else {
			unsigned j;

			for (j = 0; j < t->ndeps && t->deps[j] != f; j++)
				;
			if (j == t->ndeps)
				goto out;       /* no such edge */
			t->deps[j] = t->deps[--t->ndeps];
		}
	}
	rc = CUDA_SUCCESS;
out:
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					  const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	(void)edgeData;
	return edges(hGraph, from, to, numDependencies, true);
}

CU_API CUresult cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
					     const CUgraphEdgeData *edgeData, size_t numDependencies)
{
	(void)edgeData;
	return edges(hGraph, from, to, numDependencies, false);
}

CU_API CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && !n->graph->cap) {
		/* Its edges go with it. */
		for (struct si_list *l = n->graph->nodes.next; l != &n->graph->nodes; l = l->next) {
			struct si_gnode *o = si_container_of(l, struct si_gnode, link);

			for (unsigned j = 0; j < o->ndeps; j++)
				if (o->deps[j] == n)
					o->deps[j--] = o->deps[--o->ndeps];
		}
		mps__gnode_free(n);
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

/* Fills out[] (up to *count) with the nodes matching want(n) and sets
 * *count to how many match; out NULL: only the count. */
static CUresult list(CUgraph hg, CUgraphNode *out, size_t *count, bool roots)
{
	struct si_graph *g;
	size_t n = 0;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	g = mps__graph_arg(hg);
	if (g && count) {
		for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next) {
			struct si_gnode *o = si_container_of(l, struct si_gnode, link);

			if (roots && o->ndeps)
				continue;
			if (out && n < *count)
				out[n] = (CUgraphNode)o->handle;
			n++;
		}
		if (out)
			for (size_t i = n; i < *count; i++)
				out[i] = NULL;
		*count = out && n > *count ? *count : n;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	return list(hGraph, nodes, numNodes, false);
}

CU_API CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	return list(hGraph, rootNodes, numRootNodes, true);
}

CU_API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edgeData,
				   size_t *numEdges)
{
	struct si_graph *g;
	size_t n = 0;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	g = mps__graph_arg(hGraph);
	if (g && numEdges && !from == !to) {
		for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next) {
			struct si_gnode *o = si_container_of(l, struct si_gnode, link);

			for (unsigned j = 0; j < o->ndeps; j++, n++) {
				if (!from || n >= *numEdges)
					continue;
				from[n] = (CUgraphNode)o->deps[j]->handle;
				to[n] = (CUgraphNode)o->handle;
				if (edgeData)
					memset(&edgeData[n], 0, sizeof(edgeData[n]));
			}
		}
		*numEdges = from && n > *numEdges ? *numEdges : n;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

static CUresult neighbours(CUgraphNode h, CUgraphNode *out, CUgraphEdgeData *edge, size_t *count, bool deps)
{
	struct si_gnode *n;
	size_t k = 0;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(h);
	if (n && count) {
		if (deps) {
			for (unsigned j = 0; j < n->ndeps; j++, k++)
				if (out && k < *count)
					out[k] = (CUgraphNode)n->deps[j]->handle;
		} else {
			for (struct si_list *l = n->graph->nodes.next; l != &n->graph->nodes; l = l->next) {
				struct si_gnode *o = si_container_of(l, struct si_gnode, link);

				for (unsigned j = 0; j < o->ndeps; j++) {
					if (o->deps[j] != n)
						continue;
					if (out && k < *count)
						out[k] = (CUgraphNode)o->handle;
					k++;
				}
			}
		}
		if (edge && out)
			memset(edge, 0, (k < *count ? k : *count) * sizeof(*edge));
		*count = out && k > *count ? *count : k;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies, CUgraphEdgeData *edgeData,
					      size_t *numDependencies)
{
	return neighbours(hNode, dependencies, edgeData, numDependencies, true);
}

CU_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
						CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
	return neighbours(hNode, dependentNodes, edgeData, numDependentNodes, false);
}

/* The graph in Graphviz's language: one node per node, labelled with its
 * type, and its edges; flags choose nothing more here. */
CU_API CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
	struct si_graph *g;
	CUresult rc = CUDA_SUCCESS;
	FILE *f;

	(void)flags;
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	f = fopen(path, "w");
	if (!f)
		return CUDA_ERROR_OPERATING_SYSTEM;
	mps__lock();
	g = mps__graph_arg(hGraph);
	if (!g) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		fprintf(f, "digraph standin_graph {\n");
		for (struct si_list *l = g->nodes.next; l != &g->nodes; l = l->next) {
			struct si_gnode *o = si_container_of(l, struct si_gnode, link);

			fprintf(f, "\tn%lu [label=\"type %d\"];\n", (unsigned long)o->handle, (int)o->type);
			for (unsigned j = 0; j < o->ndeps; j++)
				fprintf(f, "\tn%lu -> n%lu;\n", (unsigned long)o->deps[j]->handle, (unsigned long)o->handle);
		}
		fprintf(f, "}\n");
	}
	mps__unlock();
	if (fclose(f) != 0 && rc == CUDA_SUCCESS)
		rc = CUDA_ERROR_OPERATING_SYSTEM;
	return rc;
}
