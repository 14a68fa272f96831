// SPDX-License-Identifier: MIT
/*
 * The stand-in's copy, allocation and conditional graph nodes.
 *
 * A copy node holds one copy operation: rows of a slice and slices, each
 * side at its own pitch, between device memory, registered host memory or
 * (as the driver allows in a node) pageable memory. The parameters are kept
 * as given, for reading back. An allocation node allocates its memory when
 * it is made and keeps it: a free (cuMemFree, cuMemFreeAsync, a free node's
 * launch) marks it freed, a launch of the allocation node brings it back,
 * and a second free before that is refused, as the driver's graph memory
 * behaves (the stand-in does not refuse use while it is freed). An
 * allocation node made after a free node of the graph takes the freed
 * allocation's address when it fits, as the driver's does. A conditional node owns its body graphs; it can be made,
 * filled, cloned and destroyed, but a graph holding one is not
 * instantiated (the stand-in runs no device code that could set its
 * condition). All under the stand-in lock.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

/* One side of a copy: its first byte and the bytes it spans; *pitch and
 * *height are an array's own. Under the lock. */
static CUresult copy_side(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t x, size_t y,
			  size_t z, size_t *pitch_io, size_t *height_io, const CUDA_MEMCPY3D *p, uint8_t **at,
			  size_t *span, bool *pinned)
{
	size_t pitch = *pitch_io, height = *height_io, slices;
	struct si_range *r;
	uintptr_t base;
	CUresult rc;
	int k;

	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = (uintptr_t)host;
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		base = (uintptr_t)dev;
		break;
	case CU_MEMORYTYPE_ARRAY:
		/* The box must lie inside the array, as the driver checks. */
		rc = mps__array_side(array, &base, &pitch, &height, &slices);
		if (rc != CUDA_SUCCESS)
			return rc;
		if (x + p->WidthInBytes > pitch || y + p->Height > height || z + p->Depth > slices)
			return CUDA_ERROR_INVALID_VALUE;
		*pitch_io = pitch;
		*height_io = height;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if ((p->Height > 1 || p->Depth > 1) && pitch < x + p->WidthInBytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->Depth > 1 && height < y + p->Height)
		return CUDA_ERROR_INVALID_VALUE;
	*at = (uint8_t *)base + z * height * pitch + y * pitch + x;
	*span = (p->Depth - 1) * height * pitch + (p->Height - 1) * pitch + p->WidthInBytes;
	k = mps__range_classify((uintptr_t)*at, *span, &r);
	if (k < 0 || (k == 0 && type == CU_MEMORYTYPE_DEVICE))
		return CUDA_ERROR_INVALID_VALUE;
	*pinned = k == 1;
	return CUDA_SUCCESS;
}

CUresult mps__copy3d_op(const CUDA_MEMCPY3D *p, struct si_op **out)
{
	uint8_t *src, *dst;
	size_t sspan, dspan;
	bool spin, dpin;
	struct si_op *op;
	CUresult rc;

	*out = NULL;
	if (!p || !p->WidthInBytes || !p->Height || !p->Depth || p->srcLOD || p->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	size_t spitch = p->srcPitch, sheight = p->srcHeight, dpitch = p->dstPitch, dheight = p->dstHeight;

	rc = copy_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
		       &spitch, &sheight, p, &src, &sspan, &spin);
	if (rc == CUDA_SUCCESS)
		rc = copy_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY,
			       p->dstZ, &dpitch, &dheight, p, &dst, &dspan, &dpin);
	if (rc != CUDA_SUCCESS)
		return rc;
	op = mps__op_new(SI_OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->copy.dst = dst;
	op->copy.src = src;
	op->copy.bytes = p->WidthInBytes;
	op->copy.pin_dst = dpin;
	op->copy.pin_src = spin;
	op->copy.rows = p->Height;
	op->copy.slices = p->Depth;
	op->copy.spitch = spitch;
	op->copy.dpitch = dpitch;
	op->copy.sslice = spitch * sheight;
	op->copy.dslice = dpitch * dheight;
	*out = op;
	return CUDA_SUCCESS;
}

CU_API CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				     size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc;

	(void)ctx;
	mps__lock();
	rc = mps__copy3d_op(copyParams, &op);
	if (rc == CUDA_SUCCESS &&
	    (rc = mps__graph_add_op_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMCPY,
					 op, &n)) == CUDA_SUCCESS)
		n->copy = *copyParams;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && nodeParams && n->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
		*nodeParams = n->copy;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && n->type == CU_GRAPH_NODE_TYPE_MEMCPY && (rc = mps__copy3d_op(nodeParams, &op)) == CUDA_SUCCESS) {
		mps__op_free(n->op);
		n->op = op;
		n->copy = *nodeParams;
	}
	mps__unlock();
	return rc;
}

/* The device's graph memory, as far as the stand-in keeps it: what its
 * allocation nodes were given (held from the node's making, never given
 * back), each figure per device, with the most it has been. */
static uint64_t graph_mem[SI_MAX_DEVICES], graph_mem_high[SI_MAX_DEVICES][2];

static void graph_mem_add(int device, uint64_t bytes)
{
	graph_mem[device] += bytes;
	for (int i = 0; i < 2; i++)
		if (graph_mem_high[device][i] < graph_mem[device])
			graph_mem_high[device][i] = graph_mem[device];
}

CU_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (device < 0 || device >= mps__ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	switch (attr) {
	case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = graph_mem[device];
		break;
	case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = graph_mem_high[device][0];
		break;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = graph_mem_high[device][1];
		break;
	default:
		rc = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	mps__unlock();
	return rc;
}

/* Only the high marks may be set, and only to 0 (back to the current). */
CU_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
	int i = attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH ? 0 : attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH ? 1 : -1;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (device < 0 || device >= mps__ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	if (i < 0 || !value || *(cuuint64_t *)value != 0)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	graph_mem_high[device][i] = graph_mem[device];
	mps__unlock();
	return CUDA_SUCCESS;
}

void mps__graph_range_hold(CUdeviceptr dptr)
{
	struct si_range *r = mps__range_find((uintptr_t)dptr);

	if (r && r->graph && r->base == (uintptr_t)dptr)
		r->graph_refs++;
}

void mps__graph_range_release(CUdeviceptr dptr)
{
	struct si_range *r = mps__range_find((uintptr_t)dptr);

	if (!r || !r->graph || r->base != (uintptr_t)dptr || --r->graph_refs)
		return;
	if (r->freed)
		mps__range_remove(r);
	else
		r->graph = false;
}

/* A graph allocation's range that one of deps (a free node) frees and that
 * holds bytes, or NULL. Under the lock. */
static struct si_range *reusable(const CUgraphNode *deps, size_t ndeps, size_t bytes)
{
	for (size_t i = 0; deps && i < ndeps; i++) {
		struct si_gnode *d = mps__gnode_arg(deps[i]);
		struct si_range *r = d && d->type == CU_GRAPH_NODE_TYPE_MEM_FREE ? mps__range_find((uintptr_t)d->dptr)
										 : NULL;

		if (r && r->graph && r->base == (uintptr_t)d->dptr && r->size >= bytes)
			return r;
	}
	return NULL;
}

CU_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				       size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	struct si_context *ctx;
	struct si_gnode *n;
	struct si_range *r;
	CUresult rc;

	if (!nodeParams || !nodeParams->bytesize || nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS && nodeParams->poolProps.location.id != ctx->device)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = mps__graph_add_node(phGraphNode, hGraph, dependencies, numDependencies,
					 CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n);
	if (rc == CUDA_SUCCESS && (r = reusable(dependencies, numDependencies, nodeParams->bytesize))) {
		/* As the driver does: the address of an allocation the graph
		 * freed just before. */
		r->graph_refs++;
		n->dptr = (CUdeviceptr)r->base;
		n->bytes = nodeParams->bytesize;
		nodeParams->dptr = n->dptr;
	} else if (rc == CUDA_SUCCESS) {
		rc = mps__range_alloc(ctx, nodeParams->bytesize, SI_RANGE_DEVICE, &r);
		if (rc == CUDA_SUCCESS) {
			r->graph = true;
			r->graph_refs = 1;
			n->dptr = (CUdeviceptr)r->base;
			n->bytes = nodeParams->bytesize;
			nodeParams->dptr = n->dptr;
			graph_mem_add(ctx->device, n->bytes);
		} else {
			mps__gnode_free(n);
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	struct si_gnode *n;
	struct si_range *r;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && params_out && n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
		r = mps__range_find((uintptr_t)n->dptr);
		memset(params_out, 0, sizeof(*params_out));
		params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
		params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		params_out->poolProps.location.id = r ? r->ctx->device : 0;
		params_out->bytesize = n->bytes;
		params_out->dptr = n->dptr;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

/* Conditional handles: made in order, each with its value at launch. */
#define COND_MAX 1024
#define COND_BASE 0x1000u

static unsigned cond_values[COND_MAX];
static unsigned cond_count;

int mps__cond_value(CUgraphConditionalHandle h, unsigned *value)
{
	if (h < COND_BASE || h - COND_BASE >= cond_count)
		return -1;
	*value = cond_values[h - COND_BASE];
	return 0;
}

CU_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph, CUcontext ctx,
					       unsigned int defaultLaunchValue, unsigned int flags)
{
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	(void)ctx;
	mps__lock();
	if (pHandle_out && mps__graph_arg(hGraph) && !(flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT)) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		if (cond_count < COND_MAX) {
			/* Without a default assigned, the value is 0 (the
			 * driver leaves it unspecified). */
			cond_values[cond_count] = flags & CU_GRAPH_COND_ASSIGN_DEFAULT ? defaultLaunchValue : 0;
			*pHandle_out = COND_BASE + cond_count++;
			rc = CUDA_SUCCESS;
		}
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies, CUdeviceptr dptr)
{
	struct si_range *r;
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	r = mps__range_find((uintptr_t)dptr);
	if (r && r->base == (uintptr_t)dptr && r->kind == SI_RANGE_DEVICE && r->graph)
		rc = mps__graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEM_FREE,
					 &n);
	if (rc == CUDA_SUCCESS)
		n->dptr = dptr;
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && dptr_out && n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
		*dptr_out = n->dptr;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

/* A conditional node and its bodies, each a graph of its own the caller
 * may fill; as the driver, phGraph_out is set to an array the node owns. */
static CUresult add_conditional(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
				CUDA_CONDITIONAL_NODE_PARAMS *p)
{
	struct si_gnode *n;
	CUresult rc;

	if (!p->size || mps__cond_value(p->handle, &(unsigned){ 0 }) < 0 || (p->type == CU_GRAPH_COND_TYPE_WHILE && p->size != 1) ||
	    (p->type == CU_GRAPH_COND_TYPE_IF && p->size > 2) || p->type > CU_GRAPH_COND_TYPE_SWITCH)
		return CUDA_ERROR_INVALID_VALUE;
	rc = mps__graph_add_node(out, hg, deps, ndeps, CU_GRAPH_NODE_TYPE_CONDITIONAL, &n);
	if (rc != CUDA_SUCCESS)
		return rc;
	n->cond = p->handle;
	n->cond_type = p->type;
	n->bodies = calloc(p->size, sizeof(*n->bodies));
	n->body_handles = calloc(p->size, sizeof(*n->body_handles));
	if (!n->bodies || !n->body_handles)
		goto oom;
	n->nbodies = p->size;
	for (unsigned i = 0; i < p->size; i++) {
		n->bodies[i] = mps__graph_new();
		if (!n->bodies[i] || !(n->bodies[i]->handle = mps__handle_add(SI_H_GRAPH, n->bodies[i])))
			goto oom;
		n->bodies[i]->parent = n;
		n->body_handles[i] = (CUgraph)n->bodies[i]->handle;
	}
	p->phGraph_out = n->body_handles;
	return CUDA_SUCCESS;
oom:
	mps__gnode_free(n);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CU_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				  const CUgraphEdgeData *dependencyData, size_t numDependencies,
				  CUgraphNodeParams *nodeParams)
{
	CUresult rc;

	if (!nodeParams || dependencyData)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodeParams->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
		return CUDA_ERROR_NOT_SUPPORTED;   /* the stand-in's callers use the per-kind calls */
	mps__lock();
	rc = add_conditional(phGraphNode, hGraph, dependencies, numDependencies, &nodeParams->conditional);
	mps__unlock();
	return rc;
}
