// SPDX-License-Identifier: MIT
/*
 * Graph nodes whose parameters name memory or make objects, and the
 * generic node calls (cuGraphAddNode, cuGraphNodeSetParams,
 * cuGraphExecNodeSetParams), which come down to the per-kind ones.
 *
 * Copy nodes: a host side is told to the server as region and offset of
 * pinned memory (it cannot read the program's other memory when the graph
 * runs, long after the call): pinned or registered memory as it is;
 * pageable memory through a staging buffer, the node then a child graph of
 * the copy and a host function (gstage.c), which is a copy node to the
 * program (its parameters kept here); arrays by their handles. A host node
 * is likewise a child graph in the server (its slot kept here).
 * Allocation nodes: the location and access devices as the program numbers
 * them; what cuGraphMemAllocNodeGetParams returns lives in the node's
 * struct until the node goes. Conditional nodes: the body graphs come back
 * as graphs of the program's, owned by the node.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"
#include "client/gen/forward.h"
#include "common/atomics.h"
#include "common/copy3d.h"
#include "common/log.h"

/* Says why once per process, where a program may ask again and again. */
#define WARN_ONCE(...)                                                  \
	do {                                                            \
		static int said_;                                       \
		if (!mps_xchg(&said_, 1))  \
			mps_log_warn(__VA_ARGS__);                      \
	} while (0)

/* Whether [p, p + len) is mapped in this process (host memory; device
 * addresses are not). */
static bool mapped_here(uint64_t p, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)p & ~(page - 1);

	return len && p + len > p && msync((void *)start, (size_t)(p + len - start), MS_ASYNC) == 0;
}

/* One side of a copy node for the wire: device memory as it is, pinned
 * host memory as its region and the base's offset in it. The program's
 * pageable memory cannot be named to the server: *pageable says so (the
 * copy is then staged, gstage.c). */
static CUresult side_to_wire(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
			     const struct mps_copy3d *p, struct mps_copy3d_side *s, bool *pageable)
{
	uint64_t start, span, off, h;
	uint32_t region;
	const uint8_t *base;
	CUresult r;

	*pageable = false;
	switch (type) {
	case CU_MEMORYTYPE_DEVICE:
		s->addr = dev;
		return CUDA_SUCCESS;
	case CU_MEMORYTYPE_ARRAY:
		r = mps__fwd_h_array(array, &h);
		s->array = (uint32_t)h;
		return r == CUDA_SUCCESS && !h ? CUDA_ERROR_INVALID_VALUE : r;
	case CU_MEMORYTYPE_UNIFIED:
		base = (const uint8_t *)(uintptr_t)dev;
		break;
	case CU_MEMORYTYPE_HOST:
		base = host;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	span = mps_copy3d_span(s, p, &start);
	if (span == UINT64_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!span) {
		s->addr = (uint64_t)(uintptr_t)base;   /* nothing to copy: the server checks no memory */
		return type == CU_MEMORYTYPE_HOST ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	}
	if (!mps__hostmem_find(base + start, span, &region, &off)) {
		bool here = mapped_here((uint64_t)(uintptr_t)base + start, span);

		/* A unified address not mapped here is the device's. */
		if (type == CU_MEMORYTYPE_UNIFIED && (mps__devmem_has(dev + start) || !here)) {
			s->addr = dev;
			return CUDA_SUCCESS;
		}
		if (!here)
			return CUDA_ERROR_INVALID_VALUE;
		*pageable = true;
		return CUDA_SUCCESS;
	}
	s->region = region;
	if (off >= start) {
		s->addr = off - start;
	} else {   /* a base before the region, offsets reaching into it */
		s->addr = off;
		s->x = s->y = s->z = 0;
	}
	return CUDA_SUCCESS;
}

/* The copy for the wire; *staged: which side (0 src, 1 dst) is pageable
 * memory, left for a staging buffer to take, or -1. */
static CUresult copy_to_wire(const CUDA_MEMCPY3D *c, struct mps_copy3d *w, int *staged)
{
	bool ps = false, pd = false;
	CUresult r;

	memset(w, 0, sizeof(*w));
	mps_copy3d_geometry_in(w, c);
	*staged = -1;
	if (c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1)
		return CUDA_ERROR_INVALID_VALUE;
	r = side_to_wire(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, w, &w->src, &ps);
	if (r == CUDA_SUCCESS)
		r = side_to_wire(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, w, &w->dst, &pd);
	if (r == CUDA_SUCCESS && ps && pd) {
		WARN_ONCE("graph copy nodes between two pieces of pageable memory are not served");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	*staged = ps ? 0 : pd ? 1 : -1;
	return r;
}

/* The staging buffer for the pageable side (0 src, 1 dst) of w, as the
 * program's copy c names it. */
static CUresult stage_of(const CUDA_MEMCPY3D *c, const struct mps_copy3d *w, int side, struct mps_gstage **out)
{
	const struct mps_copy3d_side *s = side ? &w->dst : &w->src;
	const uint8_t *base = side ? (c->dstMemoryType == CU_MEMORYTYPE_HOST ? c->dstHost : (void *)(uintptr_t)c->dstDevice)
				   : (c->srcMemoryType == CU_MEMORYTYPE_HOST ? c->srcHost : (void *)(uintptr_t)c->srcDevice);
	struct mps_gstage want = {
		.to_host = side == 1, .x = s->x, .y = s->y, .z = s->z, .pitch = s->pitch, .height = s->height,
		.width = w->width, .rows = w->height, .depth = w->depth,
	};

	want.span = mps_copy3d_span(s, w, &want.start);
	want.host = (uint8_t *)(uintptr_t)base + want.start;
	return mps__gstage_get(&want, out);
}

/* That side of w naming the staging buffer g instead: it holds the span
 * from its first byte, the box's rows relative to it, as for a region
 * whose base is before it. */
static void side_staged(struct mps_copy3d_side *s, const struct mps_gstage *g)
{
	s->region = g->region;
	s->addr = 0;
	s->x = s->y = s->z = 0;
}

/* One side of the server's answer as the program's parameters name it. */
static CUresult side_from_wire(const struct mps_copy3d_side *s, CUmemorytype *type, void **host, CUdeviceptr *dev,
			       CUarray *array)
{
	uint8_t *base;

	if (s->array) {
		*type = CU_MEMORYTYPE_ARRAY;
		return mps__fwd_obj(MPS_H_ARRAY, s->array, 0, (void **)array);
	}
	if (s->region) {
		base = mps__hostmem_base(s->region);
		if (!base)
			return CUDA_ERROR_NOT_SUPPORTED;
		*type = CU_MEMORYTYPE_HOST;
		*host = base + s->addr;
		return CUDA_SUCCESS;
	}
	*type = CU_MEMORYTYPE_DEVICE;
	*dev = s->addr;
	return CUDA_SUCCESS;
}

static CUresult copy_from_wire(const struct mps_copy3d *w, CUDA_MEMCPY3D *c)
{
	CUresult r;

	memset(c, 0, sizeof(*c));
	mps_copy3d_geometry_out(c, w);
	r = side_from_wire(&w->src, &c->srcMemoryType, (void **)&c->srcHost, &c->srcDevice, &c->srcArray);
	return r == CUDA_SUCCESS ? side_from_wire(&w->dst, &c->dstMemoryType, &c->dstHost, &c->dstDevice, &c->dstArray)
				 : r;
}

/* The dependencies as server handles, in a buffer padded to 8 bytes. */
static CUresult deps_to_wire(const CUgraphNode *deps, size_t n, uint32_t **out, size_t *bytes)
{
	uint64_t h;
	CUresult r = CUDA_SUCCESS;

	*out = NULL;
	*bytes = (n * 4 + 7) & ~(size_t)7;
	if ((n && !deps) || n > MPS_MSG_MAX / 4)
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, *bytes + sizeof(struct mps_access) * MPS_ALLOC_NODE_ACCESS_MAX + 8);
	if (!*out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
		r = mps__fwd_h_node(deps[i], &h);
		(*out)[i] = (uint32_t)h;
	}
	if (r != CUDA_SUCCESS) {
		free(*out);
		*out = NULL;
	}
	return r;
}

static CUresult ctx_to_wire(CUcontext ctx, uint32_t *h)
{
	struct mps_ctx *x;

	*h = 0;
	if (!ctx)
		return CUDA_SUCCESS;
	x = mps__obj(ctx, MPS_MAGIC_CTX);
	return x ? mps__ctx_handle(x, h) : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult staged_copy_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
				 const CUDA_MEMCPY3D *p, CUcontext ctx, struct mps_gstage *g);
static const CUDA_MEMCPY3D *staged_params(CUgraphNode node);

static CUresult memcpy_node(int what, CUgraphNode *out, CUgraph graph, CUgraphExec exec, CUgraphNode node,
			    const CUgraphNode *deps, size_t ndeps, const CUDA_MEMCPY3D *p, CUcontext ctx,
			    struct mps_gstage *stage)
{
	struct mps_msg_memcpy_node q = { .ndeps = (uint32_t)ndeps };
	struct mps_call call;
	uint32_t *wdeps = NULL, cur = 0;
	size_t dep_bytes = 0;
	int staged = -1;
	uint64_t h;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_ctx(&cur, true);
	if (r == CUDA_SUCCESS)
		r = ctx_to_wire(ctx, &q.ctx);
	if (r == CUDA_SUCCESS)
		r = copy_to_wire(p, &q.p, &staged);
	if (r == CUDA_SUCCESS && staged >= 0) {
		/* The program's pageable memory: a node of its own through a
		 * staging buffer; or, inside that node, the copy that names it. */
		if (what != MPS_KNODE_ADD) {
			WARN_ONCE("new parameters naming pageable memory for a graph copy node are not served");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		if (!stage) {
			r = stage_of(p, &q.p, staged, &stage);
			return r == CUDA_SUCCESS ? staged_copy_node(out, graph, deps, ndeps, p, ctx, stage) : r;
		}
		side_staged(staged ? &q.p.dst : &q.p.src, stage);
	}
	if (r == CUDA_SUCCESS && graph && (r = mps__fwd_h_graph(graph, &h)) == CUDA_SUCCESS)
		q.graph = (uint32_t)h;
	if (r == CUDA_SUCCESS && node && (r = mps__fwd_h_node(node, &h)) == CUDA_SUCCESS)
		q.node = (uint32_t)h;
	if (r == CUDA_SUCCESS && exec && (r = mps__fwd_h_exec(exec, &h)) == CUDA_SUCCESS)
		q.exec = (uint32_t)h;
	if (r == CUDA_SUCCESS)
		r = deps_to_wire(deps, ndeps, &wdeps, &dep_bytes);
	if (r != CUDA_SUCCESS)
		return r;
	q.hdr.flags = (uint16_t)what;
	r = mps__call(MPS_OP_MEMCPY_NODE, cur, &q.hdr, sizeof(q), wdeps, dep_bytes, &call);
	if (r == CUDA_SUCCESS && out)
		r = mps__fwd_obj(MPS_H_NODE, (uint32_t)call.s->val[0], q.graph, (void **)out);
	mps__call_end(&call);
	free(wdeps);
	return r;
}

static CUresult add_memcpy_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
				const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	if (!out || !graph)
		return CUDA_ERROR_INVALID_VALUE;
	return memcpy_node(MPS_KNODE_ADD, out, graph, NULL, NULL, deps, ndeps, p, ctx, NULL);
}

CUresult mps__graph_add_copy(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			     const CUDA_MEMCPY3D *p)
{
	return add_memcpy_node(out, graph, deps, ndeps, p, NULL);
}

static CUresult memcpy_node_set(CUgraphNode node, const CUDA_MEMCPY3D *p)
{
	if (!node)
		return CUDA_ERROR_INVALID_VALUE;
	return memcpy_node(MPS_KNODE_SET, NULL, NULL, NULL, node, NULL, 0, p, NULL, NULL);
}

static CUresult exec_memcpy_node_set(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	if (!exec || !node)
		return CUDA_ERROR_INVALID_VALUE;
	return memcpy_node(MPS_KNODE_EXEC_SET, NULL, NULL, exec, node, NULL, 0, p, ctx, NULL);
}

/* A node handle of the program's as the server's, checked to be a node. */
static CUresult node_handle(CUgraphNode node, uint32_t *h)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);

	if (!node)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->type != MPS_H_NODE)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = g->handle;
	return CUDA_SUCCESS;
}

static CUresult memcpy_node_get(CUgraphNode node, CUDA_MEMCPY3D *p)
{
	struct mps_msg_handle q = { 0 };
	const CUDA_MEMCPY3D *staged = staged_params(node);
	struct mps_call call;
	uint32_t cur = 0;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (staged) {
		*p = *staged;
		return CUDA_SUCCESS;
	}
	r = node_handle(node, &q.handle);
	if (r != CUDA_SUCCESS)
		return r;
	mps__cur_handle(&cur);
	r = mps__call(MPS_OP_MEMCPY_NODE_GET, cur, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS)
		r = copy_from_wire((const void *)call.s->data, p);
	mps__call_end(&call);
	return r;
}

/* The program's ordinal of one of the server's devices, or -1. */
static int ordinal_of(int64_t index)
{
	for (int i = 0; i < mps_conn.ndev; i++)
		if (mps_conn.server_index[i] == index)
			return i;
	return -1;
}

static CUresult add_alloc_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			       CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	struct mps_msg_alloc_node q = { .ndeps = (uint32_t)ndeps };
	struct mps_access *acc;
	struct mps_call call;
	uint32_t *wdeps = NULL, cur = 0;
	size_t dep_bytes = 0;
	uint64_t h;
	CUresult r;

	if (!out || !graph || !p || (p->accessDescCount && !p->accessDescs))
		return CUDA_ERROR_INVALID_VALUE;
	if (p->accessDescCount > MPS_ALLOC_NODE_ACCESS_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED || p->poolProps.handleTypes ||
	    p->poolProps.win32SecurityAttributes)
		return p->poolProps.allocType == CU_MEM_ALLOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE
										 : CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_ctx(&cur, true);
	if (r == CUDA_SUCCESS && (r = mps__fwd_h_graph(graph, &h)) == CUDA_SUCCESS)
		q.graph = (uint32_t)h;
	if (r == CUDA_SUCCESS)
		r = deps_to_wire(deps, ndeps, &wdeps, &dep_bytes);
	if (r != CUDA_SUCCESS)
		return r;
	q.loc_type = p->poolProps.location.type;
	q.loc_id = p->poolProps.location.id;
	q.naccess = (uint32_t)p->accessDescCount;
	q.bytesize = p->bytesize;
	acc = (struct mps_access *)((uint8_t *)wdeps + dep_bytes);
	for (size_t i = 0; i < p->accessDescCount; i++) {
		acc[i].loc_type = p->accessDescs[i].location.type;
		acc[i].loc_id = p->accessDescs[i].location.id;
		acc[i].flags = p->accessDescs[i].flags;
	}
	r = mps__call(MPS_OP_ALLOC_NODE, cur, &q.hdr, sizeof(q), wdeps,
		      dep_bytes + p->accessDescCount * sizeof(*acc), &call);
	if (r == CUDA_SUCCESS) {
		p->dptr = call.s->val[1];
		r = mps__fwd_obj(MPS_H_NODE, (uint32_t)call.s->val[0], q.graph, (void **)out);
	}
	mps__call_end(&call);
	free(wdeps);
	return r;
}

static CUresult alloc_node_get(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);
	struct mps_msg_handle q = { 0 };
	const struct mps_access *acc;
	CUmemAccessDesc *descs = NULL;
	struct mps_call call;
	uint32_t cur = 0;
	size_t n;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = node_handle(node, &q.handle);
	if (r != CUDA_SUCCESS)
		return r;
	mps__cur_handle(&cur);
	r = mps__call(MPS_OP_ALLOC_NODE_GET, cur, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r != CUDA_SUCCESS)
		goto out;
	n = call.s->val[3] < MPS_ALLOC_NODE_ACCESS_MAX ? call.s->val[3] : MPS_ALLOC_NODE_ACCESS_MAX;
	acc = (const void *)call.s->data;
	/* The node keeps the descriptors the answer points to. */
	descs = calloc(n + 1, sizeof(*descs));
	if (!descs) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		descs[i].location.type = (CUmemLocationType)acc[i].loc_type;
		descs[i].location.id = ordinal_of(acc[i].loc_id);
		descs[i].flags = (CUmemAccess_flags)acc[i].flags;
	}
	free(g->data);
	g->data = descs;
	memset(p, 0, sizeof(*p));
	p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p->poolProps.location.id = ordinal_of((int64_t)call.s->val[2]);
	p->accessDescs = n ? descs : NULL;
	p->accessDescCount = n;
	p->bytesize = call.s->val[1];
	p->dptr = call.s->val[0];
out:
	mps__call_end(&call);
	return r;
}

static CUresult add_cond_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			      CUDA_CONDITIONAL_NODE_PARAMS *p)
{
	struct mps_msg_cond_node q = { .ndeps = (uint32_t)ndeps };
	struct mps_call call;
	CUgraph *bodies = NULL;
	uint32_t *wdeps = NULL, cur = 0;
	size_t dep_bytes = 0;
	uint64_t h;
	CUresult r;

	if (!p->size || p->size > MPS_COND_BODIES_MAX)
		return p->size > MPS_COND_BODIES_MAX ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_ctx(&cur, true);
	if (r == CUDA_SUCCESS)
		r = ctx_to_wire(p->ctx, &q.ctx);
	if (r == CUDA_SUCCESS && (r = mps__fwd_h_graph(graph, &h)) == CUDA_SUCCESS)
		q.graph = (uint32_t)h;
	if (r == CUDA_SUCCESS)
		r = deps_to_wire(deps, ndeps, &wdeps, &dep_bytes);
	if (r != CUDA_SUCCESS)
		return r;
	q.type = p->type;
	q.size = p->size;
	q.handle = p->handle;
	r = mps__call(MPS_OP_COND_NODE, cur, &q.hdr, sizeof(q), wdeps, dep_bytes, &call);
	if (r == CUDA_SUCCESS)
		r = mps__fwd_obj(MPS_H_NODE, (uint32_t)call.s->val[0], q.graph, (void **)out);
	/* As the driver: the bodies in an array the node owns, which
	 * phGraph_out is set to point at. */
	if (r == CUDA_SUCCESS && !(bodies = calloc(p->size, sizeof(*bodies))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; r == CUDA_SUCCESS && i < p->size; i++)
		r = mps__fwd_obj(MPS_H_GRAPH, ((const uint32_t *)call.s->data)[i], (uint32_t)call.s->val[0],
				 (void **)&bodies[i]);
	if (r == CUDA_SUCCESS) {
		struct mps_gobj *g = (struct mps_gobj *)*out;

		free(g->data);
		g->data = bodies;
		p->phGraph_out = bodies;
		bodies = NULL;
	}
	free(bodies);
	mps__call_end(&call);
	free(wdeps);
	return r;
}

/* A host node's data: its slot among the host functions (hostfn.c). */
#define HOST_NODE_MAGIC 0x54534f48u

struct host_node {
	uint32_t magic;
	uint32_t slot;
};

/* A staged copy node's data: the parameters as the program gave them. */
#define STAGED_NODE_MAGIC 0x47415453u

struct staged_node {
	uint32_t magic;
	CUDA_MEMCPY3D p;
};

/* The server's node for the host function kept in slot (seq), after deps
 * in graph: the program's node in *out, its data set to data (taken). */
static CUresult host_node_add(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps, uint32_t slot,
			      uint32_t seq, void *data)
{
	struct mps_msg_graph_host_node q = { .ndeps = (uint32_t)ndeps, .slot = slot, .seq = seq };
	struct mps_call call;
	uint32_t *wdeps = NULL, cur = 0;
	size_t dep_bytes = 0;
	uint64_t h;
	CUresult r;

	r = mps__fwd_ctx(&cur, true);
	if (r == CUDA_SUCCESS && (r = mps__fwd_h_graph(graph, &h)) == CUDA_SUCCESS)
		q.graph = (uint32_t)h;
	if (r == CUDA_SUCCESS)
		r = deps_to_wire(deps, ndeps, &wdeps, &dep_bytes);
	if (r != CUDA_SUCCESS) {
		free(data);
		return r;
	}
	r = mps__call(MPS_OP_GRAPH_HOST_NODE, cur, &q.hdr, sizeof(q), wdeps, dep_bytes, &call);
	if (r == CUDA_SUCCESS)
		r = mps__fwd_obj(MPS_H_NODE, (uint32_t)call.s->val[0], q.graph, (void **)out);
	if (r == CUDA_SUCCESS) {
		struct mps_gobj *g = (struct mps_gobj *)*out;

		free(g->data);
		g->data = data;
		data = NULL;
	}
	mps__call_end(&call);
	free(data);
	free(wdeps);
	return r;
}

static CUresult add_host_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			      const CUDA_HOST_NODE_PARAMS *p)
{
	struct host_node *hn;
	uint32_t slot, seq;
	CUresult r;

	if (!out || !p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	hn = malloc(sizeof(*hn));
	if (!hn)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mps__hostfn_keep(p->fn, p->userData, &slot, &seq);
	if (r != CUDA_SUCCESS) {
		free(hn);
		return r;
	}
	hn->magic = HOST_NODE_MAGIC;
	hn->slot = slot;
	r = host_node_add(out, graph, deps, ndeps, slot, seq, hn);
	if (r != CUDA_SUCCESS)
		mps__hostfn_unkeep(slot);
	return r;
}

/* A copy node on pageable memory: a child graph of the copy through the
 * staging buffer g and the host function that fills or empties it, one
 * node to the program (gstage.c). */
static CUresult staged_copy_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
				 const CUDA_MEMCPY3D *p, CUcontext ctx, struct mps_gstage *g)
{
	struct staged_node *sn;
	CUgraphNode copy, host;
	CUgraph sub = NULL;
	CUresult r;

	if (!out || !graph)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_cuGraphCreate(&sub, 0);
	if (r != CUDA_SUCCESS)
		return r;
	if (g->to_host) {
		r = memcpy_node(MPS_KNODE_ADD, &copy, sub, NULL, NULL, NULL, 0, p, ctx, g);
		if (r == CUDA_SUCCESS)
			r = host_node_add(&host, sub, &copy, 1, g->slot, g->seq, NULL);
	} else {
		r = host_node_add(&host, sub, NULL, 0, g->slot, g->seq, NULL);
		if (r == CUDA_SUCCESS)
			r = memcpy_node(MPS_KNODE_ADD, &copy, sub, NULL, NULL, &host, 1, p, ctx, g);
	}
	if (r == CUDA_SUCCESS)
		r = mps__fwd_cuGraphAddChildGraphNode(out, graph, deps, ndeps, sub);
	mps__fwd_cuGraphDestroy(sub);
	if (r != CUDA_SUCCESS)
		return r;
	sn = malloc(sizeof(*sn));
	if (sn) {
		struct mps_gobj *o = (struct mps_gobj *)*out;

		sn->magic = STAGED_NODE_MAGIC;
		sn->p = *p;
		free(o->data);
		o->data = sn;
	}
	return CUDA_SUCCESS;
}

/* The parameters a staged copy node was made with, or NULL. */
static const CUDA_MEMCPY3D *staged_params(CUgraphNode node)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);
	const struct staged_node *sn = g ? g->data : NULL;

	return sn && sn->magic == STAGED_NODE_MAGIC ? &sn->p : NULL;
}

/* The host function slot behind node, or -1. */
static int64_t host_slot(CUgraphNode node)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);
	const struct host_node *hn = g ? g->data : NULL;

	return hn && hn->magic == HOST_NODE_MAGIC ? (int64_t)hn->slot : -1;
}

static CUresult host_node_get(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p)
{
	int64_t slot = host_slot(node);

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return slot < 0 ? CUDA_ERROR_INVALID_VALUE : mps__hostfn_params((uint32_t)slot, p, NULL);
}

/* Changes what every launch of the node runs, instantiated or not. */
static CUresult host_node_set(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
	int64_t slot = host_slot(node);

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return slot < 0 ? CUDA_ERROR_INVALID_VALUE : mps__hostfn_params((uint32_t)slot, NULL, p);
}

/* An executable graph's data: the slots each of its host nodes was given
 * of its own (cuGraphExecHostNodeSetParams), by the node's server handle.
 * A launch runs the function its node's slot holds when the launch gets
 * there, and natively a setting leaves launches made before it alone; so
 * a slot with launches still to run it is not changed: the node goes to
 * another of its slots (up to EXEC_RING) whose launches have all run, and
 * only when every one still has launches to come is the current one
 * changed in place. Under exec_lock (a launch on another thread counts
 * its launch). */
#define EXEC_HOSTS_MAGIC 0x53545845u
#define EXEC_RING 4

struct exec_slot {
	uint32_t slot, seq;
	uint64_t launched;   /* launches of the executable graph while the node ran it */
	uint64_t base;       /* the slot's runs when it became the node's */
};

struct exec_hosts {
	uint32_t magic;
	uint32_t n, cap;
	struct {
		uint32_t node;
		uint32_t nslots, cur;
		struct exec_slot ring[EXEC_RING];
	} at[];
};

static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether every launch that ran e's slot has run its function. */
static bool exec_slot_done(const struct exec_slot *e)
{
	return (int64_t)(e->launched - (mps__hostfn_runs(e->slot) - e->base)) <= 0;
}

/* Points exec's copy of host node `node` at slot (seq). */
static CUresult exec_point(struct mps_gobj *x, struct mps_gobj *n, uint32_t slot, uint32_t seq)
{
	struct mps_msg_exec_host_node q = { 0 };
	struct mps_call call;
	uint32_t cur = 0;
	CUresult r = mps__fwd_ctx(&cur, true);

	if (r != CUDA_SUCCESS)
		return r;
	q.exec = x->handle;
	q.node = n->handle;
	q.slot = slot;
	q.seq = seq;
	r = mps__call(MPS_OP_EXEC_HOST_NODE, cur, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	return r;
}

/* Makes host node `node` run p's function in exec alone, as the driver
 * does, from exec's next launch on: in a slot of its own that exec's copy
 * of the node is pointed at (EXEC_HOST_NODE), a slot no launch made
 * before still has to run. The graph and other executable graphs keep
 * theirs. Under exec_lock. */
static CUresult exec_host_set(struct mps_gobj *x, struct mps_gobj *n, const CUDA_HOST_NODE_PARAMS *p)
{
	struct exec_hosts *eh = x->data;
	struct exec_slot *k = NULL;
	uint32_t i, slot, seq;
	CUresult r;

	for (i = 0; eh && i < eh->n && eh->at[i].node != n->handle; i++)
		;
	if (!eh || i == eh->n) {   /* its first setting: an entry with no slot yet */
		if (!eh || eh->n == eh->cap) {
			uint32_t cap = eh ? 2 * eh->cap : 4;
			struct exec_hosts *v = realloc(eh, sizeof(*v) + cap * sizeof(v->at[0]));

			if (!v)
				return CUDA_ERROR_OUT_OF_MEMORY;
			if (!eh)
				v->magic = EXEC_HOSTS_MAGIC, v->n = 0;
			v->cap = cap;
			x->data = eh = v;
		}
		eh->at[i].node = n->handle;
		eh->at[i].nslots = 0;
		eh->at[i].cur = 0;
	} else {
		struct exec_slot *was = &eh->at[i].ring[eh->at[i].cur];

		if (exec_slot_done(was))
			return mps__hostfn_params(was->slot, NULL, p);
		for (uint32_t j = 0; j < eh->at[i].nslots && !k; j++)
			if (j != eh->at[i].cur && exec_slot_done(&eh->at[i].ring[j]))
				k = &eh->at[i].ring[j];
		if (!k && eh->at[i].nslots == EXEC_RING)   /* every slot has launches to come */
			return mps__hostfn_params(was->slot, NULL, p);
	}
	if (k) {
		r = mps__hostfn_params(k->slot, NULL, p);
		if (r == CUDA_SUCCESS)
			r = exec_point(x, n, k->slot, k->seq);
		if (r != CUDA_SUCCESS)
			return r;
	} else {
		r = mps__hostfn_keep(p->fn, p->userData, &slot, &seq);
		if (r == CUDA_SUCCESS && (r = exec_point(x, n, slot, seq)) != CUDA_SUCCESS)
			mps__hostfn_unkeep(slot);
		if (r != CUDA_SUCCESS)
			return r;
		k = &eh->at[i].ring[eh->at[i].nslots++];
		k->slot = slot;
		k->seq = seq;
	}
	if (i == eh->n)
		eh->n++;
	eh->at[i].cur = (uint32_t)(k - eh->at[i].ring);
	k->launched = 0;
	k->base = mps__hostfn_runs(k->slot);
	return CUDA_SUCCESS;
}

static CUresult exec_host_node_set(CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
	struct mps_gobj *x = mps__obj(exec, MPS_MAGIC_GOBJ), *n = mps__obj(node, MPS_MAGIC_GOBJ);
	CUresult r;

	if (!p || !p->fn || !x || x->type != MPS_H_EXEC || !n || host_slot(node) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&exec_lock);
	if (x->data && ((struct exec_hosts *)x->data)->magic != EXEC_HOSTS_MAGIC)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		r = exec_host_set(x, n, p);
	pthread_mutex_unlock(&exec_lock);
	return r;
}

void mps__exec_hosts_forget(CUgraphExec exec)
{
	struct mps_gobj *x = mps__obj(exec, MPS_MAGIC_GOBJ);
	struct exec_hosts *eh;

	pthread_mutex_lock(&exec_lock);
	eh = x ? x->data : NULL;
	if (eh && eh->magic == EXEC_HOSTS_MAGIC)
		eh->n = 0;
	pthread_mutex_unlock(&exec_lock);
}

void mps__exec_hosts_launched(CUgraphExec exec)
{
	struct mps_gobj *x = mps__obj(exec, MPS_MAGIC_GOBJ);
	struct exec_hosts *eh;

	if (!x)
		return;
	pthread_mutex_lock(&exec_lock);
	eh = x->data;
	for (uint32_t i = 0; eh && eh->magic == EXEC_HOSTS_MAGIC && i < eh->n; i++)
		eh->at[i].ring[eh->at[i].cur].launched++;
	pthread_mutex_unlock(&exec_lock);
}

/* A host node's parameters as the generic calls carry them. */
static CUDA_HOST_NODE_PARAMS host_params(const CUgraphNodeParams *p)
{
	return (CUDA_HOST_NODE_PARAMS){ .fn = p->host.fn, .userData = p->host.userData };
}

/* Whether every edge is the default kind (all fields 0). */
static bool edges_default(const CUgraphEdgeData *e, size_t n)
{
	static const CUgraphEdgeData zero;

	for (size_t i = 0; e && i < n; i++)
		if (memcmp(&e[i], &zero, sizeof(zero)))
			return false;
	return true;
}

static CUresult add_node_plain(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			       CUgraphNodeParams *p)
{
	CUDA_MEMSET_NODE_PARAMS ms;

	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		if (!out || !graph)
			return CUDA_ERROR_INVALID_VALUE;
		return mps__kernel_node(MPS_KNODE_ADD, out, graph, NULL, NULL, deps, ndeps,
					(const CUDA_KERNEL_NODE_PARAMS *)&p->kernel);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (p->memcpy.flags || p->memcpy.reserved)
			return CUDA_ERROR_INVALID_VALUE;
		return add_memcpy_node(out, graph, deps, ndeps, &p->memcpy.copyParams, p->memcpy.copyCtx);
	case CU_GRAPH_NODE_TYPE_MEMSET:
		memcpy(&ms, &p->memset, sizeof(ms));
		return mps__fwd_cuGraphAddMemsetNode(out, graph, deps, ndeps, &ms, p->memset.ctx);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
			return CUDA_ERROR_NOT_SUPPORTED;
		return mps__fwd_cuGraphAddChildGraphNode(out, graph, deps, ndeps, p->graph.graph);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return mps__fwd_cuGraphAddEmptyNode(out, graph, deps, ndeps);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return mps__fwd_cuGraphAddEventRecordNode(out, graph, deps, ndeps, p->eventRecord.event);
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return mps__fwd_cuGraphAddEventWaitNode(out, graph, deps, ndeps, p->eventWait.event);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		return add_alloc_node(out, graph, deps, ndeps, (CUDA_MEM_ALLOC_NODE_PARAMS *)&p->alloc);
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		return mps__fwd_cuGraphAddMemFreeNode(out, graph, deps, ndeps, p->free.dptr);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		if (!out || !graph)
			return CUDA_ERROR_INVALID_VALUE;
		return add_cond_node(out, graph, deps, ndeps, &p->conditional);
	case CU_GRAPH_NODE_TYPE_HOST: {
		const CUDA_HOST_NODE_PARAMS hp = host_params(p);

		return add_host_node(out, graph, deps, ndeps, &hp);
	}
	case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
	case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
	case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* Edges of a kind other than the default: the node is made on its own,
 * then joined to its dependencies with their edge data. */
static CUresult add_node_v2(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
			    size_t ndeps, CUgraphNodeParams *p)
{
	CUgraphNode *to;
	CUresult r;

	if (!p || !out || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	if (edges_default(edges, ndeps))
		return add_node_plain(out, graph, deps, ndeps, p);
	to = malloc(ndeps * sizeof(*to));
	if (!to)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = add_node_plain(out, graph, NULL, 0, p);
	if (r == CUDA_SUCCESS) {
		for (size_t i = 0; i < ndeps; i++)
			to[i] = *out;
		r = mps__fwd_cuGraphAddDependencies_v2(graph, deps, to, edges, ndeps);
		if (r != CUDA_SUCCESS) {
			mps__fwd_cuGraphDestroyNode(*out);
			*out = NULL;
		}
	}
	free(to);
	return r;
}

static CUresult add_node_v1(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			    CUgraphNodeParams *p)
{
	return add_node_v2(out, graph, deps, NULL, ndeps, p);
}

static CUresult node_set_params(CUgraphNode node, CUgraphNodeParams *p)
{
	CUDA_MEMSET_NODE_PARAMS ms;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		if (!node)
			return CUDA_ERROR_INVALID_VALUE;
		return mps__kernel_node(MPS_KNODE_SET, NULL, NULL, NULL, node, NULL, 0,
					(const CUDA_KERNEL_NODE_PARAMS *)&p->kernel);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return memcpy_node_set(node, &p->memcpy.copyParams);
	case CU_GRAPH_NODE_TYPE_MEMSET:
		memcpy(&ms, &p->memset, sizeof(ms));
		return mps__fwd_cuGraphMemsetNodeSetParams(node, &ms);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return mps__fwd_cuGraphEventRecordNodeSetEvent(node, p->eventRecord.event);
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return mps__fwd_cuGraphEventWaitNodeSetEvent(node, p->eventWait.event);
	case CU_GRAPH_NODE_TYPE_HOST: {
		const CUDA_HOST_NODE_PARAMS hp = host_params(p);

		return host_node_set(node, &hp);
	}
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

static CUresult exec_node_set_params(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p)
{
	CUDA_MEMSET_NODE_PARAMS ms;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		if (!exec || !node)
			return CUDA_ERROR_INVALID_VALUE;
		return mps__kernel_node(MPS_KNODE_EXEC_SET, NULL, NULL, exec, node, NULL, 0,
					(const CUDA_KERNEL_NODE_PARAMS *)&p->kernel);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return exec_memcpy_node_set(exec, node, &p->memcpy.copyParams, p->memcpy.copyCtx);
	case CU_GRAPH_NODE_TYPE_MEMSET:
		memcpy(&ms, &p->memset, sizeof(ms));
		return mps__fwd_cuGraphExecMemsetNodeSetParams(exec, node, &ms, p->memset.ctx);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return mps__fwd_cuGraphExecChildGraphNodeSetParams(exec, node, p->graph.graph);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return mps__fwd_cuGraphExecEventRecordNodeSetEvent(exec, node, p->eventRecord.event);
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return mps__fwd_cuGraphExecEventWaitNodeSetEvent(exec, node, p->eventWait.event);
	case CU_GRAPH_NODE_TYPE_HOST: {
		const CUDA_HOST_NODE_PARAMS hp = host_params(p);

		return exec_host_node_set(exec, node, &hp);
	}
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

const struct mps_impl mps__gnode_api[] = {
	MPS_IMPL(cuGraphAddMemcpyNode, add_memcpy_node),
	MPS_IMPL(cuGraphMemcpyNodeSetParams, memcpy_node_set),
	MPS_IMPL(cuGraphMemcpyNodeGetParams, memcpy_node_get),
	MPS_IMPL(cuGraphExecMemcpyNodeSetParams, exec_memcpy_node_set),
	MPS_IMPL(cuGraphAddMemAllocNode, add_alloc_node),
	MPS_IMPL(cuGraphMemAllocNodeGetParams, alloc_node_get),
	MPS_IMPL(cuGraphAddHostNode, add_host_node),
	MPS_IMPL(cuGraphHostNodeGetParams, host_node_get),
	MPS_IMPL(cuGraphHostNodeSetParams, host_node_set),
	MPS_IMPL(cuGraphExecHostNodeSetParams, exec_host_node_set),
	MPS_IMPL(cuGraphAddNode_v2, add_node_v2),
	MPS_IMPL_PFN(cuGraphAddNode, PFN_cuGraphAddNode_v12020, add_node_v1),
	MPS_IMPL(cuGraphNodeSetParams, node_set_params),
	MPS_IMPL(cuGraphExecNodeSetParams, exec_node_set_params),
	MPS_IMPL_END
};
