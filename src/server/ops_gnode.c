// SPDX-License-Identifier: MIT
/*
 * Graph nodes whose parameters name memory or make objects: copy nodes,
 * allocation nodes and conditional nodes.
 *
 * A copy node's sides come as device addresses or as offsets in the
 * client's pinned host regions (never a raw client address): each side's
 * whole span must lie in memory the client owns, checked here as for a
 * copy. A host region a graph names stays mapped and registered until the
 * client leaves, even once the client frees it (ops_mem.c), so a graph
 * launched after the free reads stale bytes rather than faulting the
 * server's context. Read back, a host side is told as region and offset
 * again.
 *
 * An allocation node's bytes are charged to the client when the node is
 * made, and its address becomes the client's (checked, freed with it), as
 * for an allocation captured from cuMemAllocAsync (ops_pool.c).
 *
 * A conditional node's body graphs belong to the node: the client gets
 * handles for them to fill, and they go with the node.
 */
#include <stdlib.h>
#include <string.h>

#include "common/copy3d.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/galloc.h"
#include "server/server.h"

/* Fills one side of the driver's parameters from the wire's: CUDA_SUCCESS
 * when it lies in memory the client owns. */
static CUresult side_in(struct mps_client *c, const struct mps_copy3d_side *s, const struct mps_copy3d *p,
			CUmemorytype *type, void **host, CUdeviceptr *dev, CUarray *array)
{
	uint64_t start = 0, span;
	struct mps_shost *h;
	CUresult r;

	/* An array: the handle is all there is to check; the driver keeps
	 * the box inside the array, whose memory is its own. */
	if (s->array) {
		if (s->region || !mps__fwd_get(c, MPS_H_ARRAY, s->array, (void **)array, &r))
			return CUDA_ERROR_INVALID_VALUE;
		*type = CU_MEMORYTYPE_ARRAY;
		return CUDA_SUCCESS;
	}
	span = mps_copy3d_span(s, p, &start);
	if (span == UINT64_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!s->region) {
		if (span && mps_galloc_check(c, s->addr + start, span) < 0)
			return CUDA_ERROR_INVALID_VALUE;
		*type = CU_MEMORYTYPE_DEVICE;
		*dev = (CUdeviceptr)s->addr;
		return CUDA_SUCCESS;
	}
	h = mps__host_get(c, s->region);
	if (!h || s->addr > h->size || start > h->size - s->addr || span > h->size - s->addr - start)
		return CUDA_ERROR_INVALID_VALUE;
	h->graphed = true;
	*type = CU_MEMORYTYPE_HOST;
	*host = (uint8_t *)h->addr + s->addr;
	return CUDA_SUCCESS;
}

static CUresult params_in(struct mps_client *c, const struct mps_copy3d *w, CUDA_MEMCPY3D *p)
{
	CUresult r;

	memset(p, 0, sizeof(*p));
	r = side_in(c, &w->src, w, &p->srcMemoryType, (void **)&p->srcHost, &p->srcDevice, &p->srcArray);
	if (r == CUDA_SUCCESS)
		r = side_in(c, &w->dst, w, &p->dstMemoryType, &p->dstHost, &p->dstDevice, &p->dstArray);
	if (r != CUDA_SUCCESS)
		return r;
	mps_copy3d_geometry_out(p, w);
	return CUDA_SUCCESS;
}

struct host_match {
	uintptr_t addr;
	struct mps_shost *h;
};

static void match_host(void *obj, void *arg)
{
	struct mps_shost *h = obj;
	struct host_match *w = arg;

	if (w->addr >= (uintptr_t)h->addr && w->addr - (uintptr_t)h->addr < h->size)
		w->h = h;
}

/* One side of the driver's answer as the wire tells it. */
static CUresult side_out(struct mps_client *c, CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
			 struct mps_copy3d_side *s)
{
	struct host_match w = { .addr = (uintptr_t)host };

	switch (type) {
	case CU_MEMORYTYPE_DEVICE:
		s->addr = dev;
		return CUDA_SUCCESS;
	case CU_MEMORYTYPE_HOST:
		mps_handles_foreach(&c->handles, MPS_H_HOST, match_host, &w);
		if (!w.h || w.h->freed)
			return CUDA_ERROR_NOT_SUPPORTED;
		s->region = w.h->handle;
		s->addr = w.addr - (uintptr_t)w.h->addr;
		return CUDA_SUCCESS;
	case CU_MEMORYTYPE_ARRAY:
		s->array = mps_obj_find(c, MPS_H_ARRAY, array);
		return s->array ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* The context a node's operation runs in: the message's, or the one named. */
static CUcontext node_ctx(struct mps_client *c, const struct mps_msg *m, uint32_t ctx, int *device)
{
	struct mps_sctx *x = mps__obj(c, ctx ? ctx : m->ctx, MPS_H_CTX);

	if (!x)
		return NULL;
	*device = x->device;
	return mps_srv.dev[x->device].primary;
}

/* The dependencies that follow a node message: driver handles of the
 * graph's nodes (malloc'ed), or NULL with *err set. */
static CUgraphNode *deps_in(struct mps_client *c, const struct mps_msg *m, size_t head, uint32_t n, CUresult *err)
{
	const uint8_t *at = (const uint8_t *)m + head, *end = (const uint8_t *)m + m->len;
	const void *wire = mps__fwd_array(&at, end, n, sizeof(uint32_t), err);

	return wire ? mps__fwd_handles(c, MPS_H_NODE, wire, n, err) : NULL;
}

void mps__op_memcpy_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_memcpy_node *q = (const void *)m;
	CUgraphNode *deps = NULL, node = NULL;
	CUgraphExec exec = NULL;
	CUgraph graph = NULL;
	CUDA_MEMCPY3D p;
	CUcontext ctx;
	int device = 0;
	CUresult r;

	ctx = node_ctx(c, m, q->ctx, &device);
	if (!ctx) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	switch (m->flags) {
	case MPS_KNODE_ADD:
		if (!mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r) ||
		    !(deps = deps_in(c, m, sizeof(*q), q->ndeps, &r)))
			goto out;
		break;
	case MPS_KNODE_EXEC_SET:
		if (!mps__fwd_get(c, MPS_H_EXEC, q->exec, (void **)&exec, &r))
			goto out;
		/* fall through */
	case MPS_KNODE_SET:
		if (q->ndeps) {
			r = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		if (!mps__fwd_get(c, MPS_H_NODE, q->node, (void **)&node, &r))
			goto out;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = params_in(c, &q->p, &p);
	if (r == CUDA_SUCCESS)
		r = mps__bind_device(c, device);
	if (r != CUDA_SUCCESS)
		goto out;
	switch (m->flags) {
	case MPS_KNODE_ADD:
		r = mps_drv.cuGraphAddMemcpyNode ?
			    mps_drv.cuGraphAddMemcpyNode(&node, graph, deps, q->ndeps, &p, ctx) : CUDA_ERROR_NOT_SUPPORTED;
		if (r == CUDA_SUCCESS)
			r = mps__fwd_new(c, MPS_H_NODE, node, q->graph, &mps__slot(c, m->slot)->val[0]);
		break;
	case MPS_KNODE_SET:
		r = mps_drv.cuGraphMemcpyNodeSetParams ? mps_drv.cuGraphMemcpyNodeSetParams(node, &p) :
							 CUDA_ERROR_NOT_SUPPORTED;
		break;
	default:
		r = mps_drv.cuGraphExecMemcpyNodeSetParams ?
			    mps_drv.cuGraphExecMemcpyNodeSetParams(exec, node, &p, ctx) : CUDA_ERROR_NOT_SUPPORTED;
		break;
	}
out:
	free(deps);
	mps__reply(c, m->slot, r);
}

void mps__op_memcpy_node_get(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_copy3d *o = (void *)mps__slot(c, m->slot)->data;
	CUDA_MEMCPY3D p;
	CUgraphNode node;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_NODE, q->handle, (void **)&node, &r))
		goto out;
	if (!mps_drv.cuGraphMemcpyNodeGetParams) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	memset(&p, 0, sizeof(p));
	r = mps_drv.cuGraphMemcpyNodeGetParams(node, &p);
	if (r != CUDA_SUCCESS)
		goto out;
	memset(o, 0, sizeof(*o));
	r = side_out(c, p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray, &o->src);
	if (r == CUDA_SUCCESS)
		r = side_out(c, p.dstMemoryType, p.dstHost, p.dstDevice, p.dstArray, &o->dst);
	mps_copy3d_geometry_in(o, &p);
out:
	mps__reply(c, m->slot, r);
}

void mps__op_alloc_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_alloc_node *q = (const void *)m;
	const uint8_t *at = (const uint8_t *)(q + 1), *end = (const uint8_t *)m + m->len;
	struct mps_slot *s = mps__slot(c, m->slot);
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	CUmemAccessDesc *acc = NULL, *in = NULL;
	CUgraphNode *deps = NULL, node = NULL;
	const struct mps_access *wa;
	const void *wire;
	CUgraph graph;
	CUmemLocation loc = { .type = (CUmemLocationType)q->loc_type, .id = q->loc_id };
	int d = -1;
	bool charged = false;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r))
		goto out;
	wire = mps__fwd_array(&at, end, q->ndeps, sizeof(uint32_t), &r);
	if (!wire || !(deps = mps__fwd_handles(c, MPS_H_NODE, wire, q->ndeps, &r)))
		goto out;
	wa = mps__fwd_array(&at, end, q->naccess, sizeof(*wa), &r);
	if (!wa)
		goto out;
	if (q->naccess > MPS_ALLOC_NODE_ACCESS_MAX || q->bytesize == 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = mps__fwd_location(c, &loc, &d);
	if (r != CUDA_SUCCESS)
		goto out;
	if (q->naccess) {
		in = calloc(q->naccess, sizeof(*in));
		if (!in) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		for (uint32_t i = 0; i < q->naccess; i++) {
			in[i].location.type = (CUmemLocationType)wa[i].loc_type;
			in[i].location.id = wa[i].loc_id;
			in[i].flags = (CUmemAccess_flags)wa[i].flags;
		}
		acc = mps__fwd_access(c, in, q->naccess, &r);
		if (!acc)
			goto out;
	}
	if (mps_memacct_charge(&c->mem, d, q->bytesize) < 0) {
		mps_log_info("client %d: graph allocation of %llu bytes refused by its memory limit", (int)c->pid,
			     (unsigned long long)q->bytesize);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	charged = true;
	memset(&p, 0, sizeof(p));
	p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = mps_srv.dev[d].dev;
	p.accessDescs = acc;
	p.accessDescCount = q->naccess;
	p.bytesize = (size_t)q->bytesize;
	r = mps__bind_device(c, d);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuGraphAddMemAllocNode ? mps_drv.cuGraphAddMemAllocNode(&node, graph, deps, q->ndeps, &p)
						   : CUDA_ERROR_NOT_SUPPORTED;
	if (r != CUDA_SUCCESS)
		goto out;
	if (mps_memacct_add(&c->mem, p.dptr, q->bytesize, MPS_MEM_DEVICE, d, m->ctx) < 0) {
		if (mps_drv.cuGraphDestroyNode)
			mps_drv.cuGraphDestroyNode(node);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	charged = false;   /* the range holds the charge now */
	c->graph_mem_devs |= 1u << d;
	r = mps__fwd_new(c, MPS_H_NODE, node, q->graph, &s->val[0]);
	s->val[1] = p.dptr;
out:
	if (charged)
		mps_memacct_uncharge(&c->mem, d, q->bytesize);
	free(in);
	free(acc);
	free(deps);
	mps__reply(c, m->slot, r);
}

void mps__op_alloc_node_get(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_access *o = (void *)s->data;
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	CUgraphNode node;
	size_t n;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_NODE, q->handle, (void **)&node, &r))
		goto out;
	if (!mps_drv.cuGraphMemAllocNodeGetParams) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	memset(&p, 0, sizeof(p));
	r = mps_drv.cuGraphMemAllocNodeGetParams(node, &p);
	if (r != CUDA_SUCCESS)
		goto out;
	n = p.accessDescs ? p.accessDescCount : 0;
	if (n > MPS_ALLOC_NODE_ACCESS_MAX)
		n = MPS_ALLOC_NODE_ACCESS_MAX;
	for (size_t i = 0; i < n; i++) {
		o[i].loc_type = p.accessDescs[i].location.type;
		o[i].loc_id = mps__device_index(p.accessDescs[i].location.id);
		o[i].flags = p.accessDescs[i].flags;
		o[i].pad = 0;
	}
	s->val[0] = p.dptr;
	s->val[1] = p.bytesize;
	s->val[2] = (uint64_t)(int64_t)mps__device_index(p.poolProps.location.id);
	s->val[3] = n;
out:
	mps__reply(c, m->slot, r);
}

void mps__op_cond_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_cond_node *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	uint32_t *bodies = (uint32_t *)s->data;
	CUgraph graph;
	CUgraphNode *deps = NULL, node = NULL;
	CUgraphNodeParams p;
	CUcontext ctx;
	int device = 0;
	uint64_t h;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r) ||
	    !(deps = deps_in(c, m, sizeof(*q), q->ndeps, &r)))
		goto out;
	if (!q->size || q->size > MPS_COND_BODIES_MAX) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	ctx = node_ctx(c, m, q->ctx, &device);
	if (!ctx) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	r = mps__bind_device(c, device);
	if (r != CUDA_SUCCESS)
		goto out;
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	p.conditional.handle = (CUgraphConditionalHandle)q->handle;
	p.conditional.type = (CUgraphConditionalNodeType)q->type;
	p.conditional.size = q->size;
	p.conditional.ctx = ctx;
	r = mps_drv.cuGraphAddNode_v2 ? mps_drv.cuGraphAddNode_v2(&node, graph, deps, NULL, q->ndeps, &p)
				      : CUDA_ERROR_NOT_SUPPORTED;
	if (r != CUDA_SUCCESS)
		goto out;
	r = mps__fwd_new(c, MPS_H_NODE, node, q->graph, &s->val[0]);
	if (r != CUDA_SUCCESS)
		goto out;
	/* The driver points phGraph_out at an array of its own. */
	for (uint32_t i = 0; i < q->size && r == CUDA_SUCCESS; i++) {
		h = 0;
		r = p.conditional.phGraph_out && p.conditional.phGraph_out[i]
			    ? mps__fwd_handle_of(c, MPS_H_GRAPH, p.conditional.phGraph_out[i], (uint32_t)s->val[0], &h)
			    : CUDA_ERROR_UNKNOWN;
		bodies[i] = (uint32_t)h;
	}
	if (r != CUDA_SUCCESS) {   /* the node, and the bodies named so far, go */
		mps__fwd_del(c, MPS_H_NODE, (uint32_t)s->val[0]);
		if (mps_drv.cuGraphDestroyNode)
			mps_drv.cuGraphDestroyNode(node);
	}
out:
	free(deps);
	mps__reply(c, m->slot, r);
}

/* The device of the message's context, current: where a host function's
 * nodes go. */
static CUresult host_device(struct mps_client *c, const struct mps_msg *m, int *device)
{
	if (!node_ctx(c, m, 0, device))
		return CUDA_ERROR_INVALID_CONTEXT;
	return mps__bind_device(c, *device);
}

/* cuGraphExecHostNodeSetParams: the node's function in that executable
 * graph alone is the one the client kept in a slot of its own for it. */
void mps__op_exec_host_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_exec_host_node *q = (const void *)m;
	CUgraphExec exec;
	CUgraphNode node;
	int device = 0;
	CUresult r;

	if (mps__fwd_get(c, MPS_H_EXEC, q->exec, (void **)&exec, &r) &&
	    mps__fwd_get(c, MPS_H_NODE, q->node, (void **)&node, &r) && (r = host_device(c, m, &device)) == CUDA_SUCCESS)
		r = mps__hostfn_exec_node(c, exec, node, device, q->slot, q->seq);
	mps__reply(c, m->slot, r);
}

/* cuGraphAddHostNode: the host function's nodes (ops_hostfn.c); the client
 * names the last of them. */
void mps__op_graph_host_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_graph_host_node *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	CUgraphNode *deps = NULL, last = NULL;
	CUgraph graph;
	int device = 0;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r) ||
	    !(deps = deps_in(c, m, sizeof(*q), q->ndeps, &r)))
		goto out;
	r = host_device(c, m, &device);
	if (r == CUDA_SUCCESS)
		r = mps__hostfn_nodes(c, graph, deps, q->ndeps, device, q->slot, q->seq, &last);
	if (r == CUDA_SUCCESS)
		r = mps__fwd_new(c, MPS_H_NODE, last, q->graph, &s->val[0]);
out:
	free(deps);
	mps__reply(c, m->slot, r);
}
