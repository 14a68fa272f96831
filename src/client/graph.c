// SPDX-License-Identifier: MIT
/*
 * The graph functions that are more than one forwarded call: the older and
 * the parameter-block forms of instantiation, which come down to
 * cuGraphInstantiateWithFlags (and an upload), and the executable-graph
 * update, whose answer names nodes. Most graph functions are forwarded by
 * generated code (src/common/forward.def).
 */
#include <string.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"
#include "client/gen/forward.h"

/* The CUDA 10 and 11 forms: an error node and a log buffer. A failure has
 * no node to name here; the log is left empty. */
static CUresult instantiate_old(CUgraphExec *exec, CUgraph graph, CUgraphNode *err_node, char *log, size_t size)
{
	if (err_node)
		*err_node = NULL;
	if (log && size)
		log[0] = 0;
	return mps__fwd_cuGraphInstantiateWithFlags(exec, graph, 0);
}

typedef CUresult (*instantiate_old_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);

static CUresult instantiate_params(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool pt)
{
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	p->hErrNode_out = NULL;
	r = mps__fwd_cuGraphInstantiateWithFlags(exec, graph, p->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
		r = pt ? mps__fwd_cuGraphUpload_ptsz(*exec, p->hUploadStream) : mps__fwd_cuGraphUpload(*exec, p->hUploadStream);
		if (r != CUDA_SUCCESS) {
			mps__fwd_cuGraphExecDestroy(*exec);
			*exec = NULL;
		}
	}
	switch (r) {
	case CUDA_SUCCESS:
		p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
		break;
	case CUDA_ERROR_INVALID_VALUE:
		p->result_out = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
		break;
	case CUDA_ERROR_NOT_SUPPORTED:
		p->result_out = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
		break;
	default:
		p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
		break;
	}
	return r;
}

static CUresult instantiate_with_params(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return instantiate_params(exec, graph, p, false);
}

static CUresult instantiate_with_params_ptsz(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return instantiate_params(exec, graph, p, true);
}

/* A node of the update's answer: the server sent its handle in the
 * pointer's place (server/hooks.c). */
static CUgraphNode answer_node(CUgraphNode wire, CUgraph graph)
{
	uint32_t h = (uint32_t)(uintptr_t)wire;
	struct mps_gobj *g = mps__obj(graph, MPS_MAGIC_GOBJ);
	void *node = NULL;

	if (!h || mps__fwd_obj(MPS_H_NODE, h, g ? g->handle : 0, &node) != CUDA_SUCCESS)
		return NULL;
	return node;
}

static CUresult exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
	CUresult r = mps__fwd_cuGraphExecUpdate_v2(exec, graph, info);

	if (info) {
		info->errorNode = answer_node(info->errorNode, graph);
		info->errorFromNode = answer_node(info->errorFromNode, graph);
	}
	return r;
}

static CUresult exec_update_v1(CUgraphExec exec, CUgraph graph, CUgraphNode *err_node, CUgraphExecUpdateResult *result)
{
	CUgraphExecUpdateResultInfo info;
	CUresult r;

	if (!err_node || !result)
		return CUDA_ERROR_INVALID_VALUE;
	memset(&info, 0, sizeof(info));
	r = exec_update(exec, graph, &info);
	*err_node = info.errorNode;
	*result = info.result;
	return r;
}

const struct mps_impl mps__graph_api[] = {
	MPS_IMPL_PFN(cuGraphInstantiate, instantiate_old_fn, instantiate_old),
	MPS_IMPL_PFN(cuGraphInstantiate_v2, instantiate_old_fn, instantiate_old),
	MPS_IMPL(cuGraphInstantiateWithParams, instantiate_with_params),
	MPS_IMPL_AS(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, instantiate_with_params_ptsz),
	MPS_IMPL(cuGraphExecUpdate_v2, exec_update),
	MPS_IMPL_PFN(cuGraphExecUpdate, PFN_cuGraphExecUpdate_v10020, exec_update_v1),
	MPS_IMPL_END
};
