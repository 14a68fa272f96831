// SPDX-License-Identifier: MIT
/*
 * The server halves of forwarded functions that need more than the driver
 * call (forward.def's `hook`): each checks what the driver cannot check for
 * us — that an address lies in memory the client owns, that an attribute
 * carries plain values rather than pointers into the client or handles of
 * someone else's objects — and then calls the driver.
 */
#include <errno.h>
#include <string.h>

#include "server/driver.h"
#include "server/forward.h"
#include "server/galloc.h"
#include "server/server.h"
#include "server/streams.h"

/* Stream attributes that hold plain values (the rest are launch attributes,
 * some of which carry events or pointers). */
static bool stream_attr_plain(CUstreamAttrID id)
{
	switch ((int)id) {
	case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
	case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
		return true;
	default:
		return false;
	}
}

CUresult mps__hook_cuStreamSetAttribute(struct mps_client *c, struct mps_sstream *hStream, CUstreamAttrID attr,
					const CUstreamAttrValue *value)
{
	(void)c;
	if (!stream_attr_plain(attr))
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuStreamSetAttribute)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuStreamSetAttribute(hStream->s, attr, value);
}

CUresult mps__hook_cuGraphKernelNodeSetAttribute(struct mps_client *c, CUgraphNode hNode, CUkernelNodeAttrID attr,
						 const CUkernelNodeAttrValue *value)
{
	(void)c;
	if (!mps_launch_attr_plain((uint32_t)attr))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!mps_drv.cuGraphKernelNodeSetAttribute)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuGraphKernelNodeSetAttribute(hNode, attr, value);
}

/* 0 if every row a memset node writes lies in the client's memory. */
static int memset_ok(struct mps_client *c, const CUDA_MEMSET_NODE_PARAMS *p)
{
	uint64_t row;

	if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
		return -EINVAL;
	if (!p->width || !p->height)
		return 0;
	if (p->width > UINT64_MAX / p->elementSize)
		return -EOVERFLOW;
	row = (uint64_t)p->width * p->elementSize;
	if (p->height > 1 && (p->pitch < row || (p->height - 1) > (UINT64_MAX - row) / p->pitch))
		return -EINVAL;
	return mps_galloc_check(c, p->dst, (uint64_t)(p->height - 1) * p->pitch + row);
}

CUresult mps__hook_cuGraphAddMemsetNode(struct mps_client *c, CUgraphNode *phGraphNode, CUgraph hGraph,
					const CUgraphNode *dependencies, size_t numDependencies,
					const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	if (memset_ok(c, memsetParams) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuGraphAddMemsetNode)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuGraphAddMemsetNode(phGraphNode, hGraph, dependencies, numDependencies, memsetParams, ctx);
}

CUresult mps__hook_cuGraphMemsetNodeSetParams(struct mps_client *c, CUgraphNode hNode,
					      const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	if (memset_ok(c, nodeParams) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuGraphMemsetNodeSetParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuGraphMemsetNodeSetParams(hNode, nodeParams);
}

CUresult mps__hook_cuGraphExecMemsetNodeSetParams(struct mps_client *c, CUgraphExec hGraphExec, CUgraphNode hNode,
						  const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	if (memset_ok(c, memsetParams) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuGraphExecMemsetNodeSetParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, memsetParams, ctx);
}

CUresult mps__hook_cuGraphAddMemFreeNode(struct mps_client *c, CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies, CUdeviceptr dptr)
{
	const struct mps_mrange *rg = mps_memacct_find(&c->mem, dptr);
	CUresult r;

	/* Only memory of the client's own may be freed by its graph: an
	 * allocation it holds, or one of its graphs' allocations, freed for
	 * now, that the graph's next launch brings back. */
	if ((!rg || rg->base != dptr || rg->kind != MPS_MEM_DEVICE) && !mps_galloc_known(c, dptr))
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuGraphAddMemFreeNode)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps_drv.cuGraphAddMemFreeNode(phGraphNode, hGraph, dependencies, numDependencies, dptr);
	/* Freed by the graph from now on, as a captured cuMemFreeAsync is
	 * (ops_mem.c): no longer the client's to name or hold, and the
	 * driver may give the address to the graph's next allocation. The
	 * launches of executable graphs made from it keep the account
	 * (galloc.h). */
	if (r == CUDA_SUCCESS && rg && rg->base == dptr) {
		if (rg->device >= 0 && rg->device < MPS_MAX_DEVICES)
			c->graph_mem_devs |= 1u << rg->device;
		mps_memacct_remove(&c->mem, dptr, MPS_MEM_DEVICE, NULL);
	}
	return r;
}

/* A host function's node, and a copy through a staging buffer, are child
 * graphs in the server's graph (ops_hostfn.c); to the client they are the
 * host or copy node it made. */
CUresult mps__hook_cuGraphNodeGetType(struct mps_client *c, CUgraphNode hNode, CUgraphNodeType *type)
{
	CUresult r;

	(void)c;
	if (!mps_drv.cuGraphNodeGetType)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps_drv.cuGraphNodeGetType(hNode, type);
	if (r == CUDA_SUCCESS && *type == CU_GRAPH_NODE_TYPE_GRAPH)
		mps__hostfn_node_type(hNode, type);
	return r;
}

/* Gives resultInfo's nodes back as the client's handles, in the pointer
 * fields (the client's side turns them into its own nodes); a node the
 * client has no handle for (none) is 0. */
CUresult mps__hook_cuGraphExecUpdate_v2(struct mps_client *c, CUgraphExec hGraphExec, CUgraph hGraph,
					CUgraphExecUpdateResultInfo *resultInfo)
{
	uint32_t graph = mps_obj_find(c, MPS_H_GRAPH, hGraph);
	uint64_t h;
	CUresult r;

	if (!mps_drv.cuGraphExecUpdate_v2)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* The graph's host functions may run from it from now on (those of
	 * what it was made from stay counted: a slot is given back late, not
	 * early). */
	mps__hostfn_exec_adds(c, hGraphExec, hGraph);
	r = mps_drv.cuGraphExecUpdate_v2(hGraphExec, hGraph, resultInfo);
	h = 0;
	if (resultInfo->errorNode && mps__fwd_handle_of(c, MPS_H_NODE, resultInfo->errorNode, graph, &h) != CUDA_SUCCESS)
		h = 0;
	resultInfo->errorNode = (CUgraphNode)(uintptr_t)h;
	h = 0;
	if (resultInfo->errorFromNode &&
	    mps__fwd_handle_of(c, MPS_H_NODE, resultInfo->errorFromNode, graph, &h) != CUDA_SUCCESS)
		h = 0;
	resultInfo->errorFromNode = (CUgraphNode)(uintptr_t)h;
	return r;
}

/* Executable graphs: which graph slots of host functions each may run
 * (ops_hostfn.c), so that a slot no graph holds can serve another. */
CUresult mps__hook_cuGraphInstantiateWithFlags(struct mps_client *c, CUgraphExec *phGraphExec, CUgraph hGraph,
					       unsigned long long flags)
{
	CUresult r;

	if (!mps_drv.cuGraphInstantiateWithFlags)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps_drv.cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags);
	if (r == CUDA_SUCCESS)
		r = mps_galloc_exec_adds(c, *phGraphExec, hGraph);
	if (r == CUDA_SUCCESS)
		mps__hostfn_exec_adds(c, *phGraphExec, hGraph);
	else if (*phGraphExec)
		mps_drv.cuGraphExecDestroy(*phGraphExec);
	return r;
}

/* Graph allocations freed since the last launch come back (galloc.h). */
CUresult mps__hook_cuGraphLaunch(struct mps_client *c, CUgraphExec hGraphExec, struct mps_sstream *hStream)
{
	if (!mps_drv.cuGraphLaunch)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_galloc_launch(c, hGraphExec, hStream);
}

CUresult mps__hook_cuGraphExecDestroy(struct mps_client *c, CUgraphExec hGraphExec)
{
	CUresult r;

	if (!mps_drv.cuGraphExecDestroy)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps_drv.cuGraphExecDestroy(hGraphExec);
	if (r == CUDA_SUCCESS) {
		mps__hostfn_exec_gone(c, hGraphExec);
		mps_galloc_exec_gone(c, hGraphExec);
	}
	return r;
}

CUresult mps__hook_cuGraphExecChildGraphNodeSetParams(struct mps_client *c, CUgraphExec hGraphExec, CUgraphNode hNode,
						      CUgraph childGraph)
{
	if (!mps_drv.cuGraphExecChildGraphNodeSetParams)
		return CUDA_ERROR_NOT_SUPPORTED;
	mps__hostfn_exec_adds(c, hGraphExec, childGraph);
	return mps_drv.cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, childGraph);
}
