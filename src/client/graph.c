// SPDX-License-Identifier: MIT
/*
 * The graph functions that are more than one forwarded call: the older and
 * the parameter-block forms of instantiation, which come down to
 * cuGraphInstantiateWithFlags (and an upload); the executable-graph update,
 * whose answer names nodes; and kernel nodes, whose arguments are packed as
 * for a launch and, read back, live in a buffer the node keeps until it is
 * read again or destroyed. Most graph functions are forwarded by generated
 * code (src/common/forward.def).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

	if (r == CUDA_SUCCESS)
		mps__exec_hosts_forget(exec);
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

/* The function a kernel node's parameters name: func, or kern in ctx. */
static CUresult node_func(const CUDA_KERNEL_NODE_PARAMS *p, struct mps_func **f, uint32_t *ctx)
{
	*ctx = 0;
	if (p->func) {
		*f = mps__func(p->func);
		return *f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	}
	*f = mps__func(p->kern);
	if (!*f || !(*f)->is_kernel)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->ctx) {
		struct mps_ctx *x = mps__obj(p->ctx, MPS_MAGIC_CTX);

		return x ? mps__ctx_handle(x, ctx) : CUDA_ERROR_INVALID_CONTEXT;
	}
	return CUDA_SUCCESS;
}

/* New parameters for a kernel node of an executable graph, which XLA sets
 * for every node before every launch of its command buffers: sent without
 * waiting when the node is one this client made as a kernel node and the
 * configuration is one the driver takes (the function was found above);
 * what is left for the driver to refuse (a node of another graph) comes
 * back at the next synchronising call. */
static bool exec_set_checked(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);

	return g && g->type == MPS_H_NODE && g->kernel_node && p->gridDimX && p->gridDimY && p->gridDimZ &&
	       p->blockDimX && p->blockDimY && p->blockDimZ &&
	       (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ <= 1024 && !p->extra;
}

CUresult mps__kernel_node(int what, CUgraphNode *out, CUgraph graph, CUgraphExec exec, CUgraphNode node,
			  const CUgraphNode *deps, size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct mps_msg_kernel_node q = { .ndeps = (uint32_t)ndeps };
	const void *packed;
	struct mps_call call;
	struct mps_func *f;
	size_t arg_size = 0, packed_len = 0, dep_bytes = (ndeps * 4 + 7) & ~(size_t)7;
	uint8_t *extra;
	uint32_t cur = 0;
	uint64_t h;
	CUresult r;

	if (!p || (ndeps && !deps) || ndeps > MPS_MSG_MAX / 4)
		return CUDA_ERROR_INVALID_VALUE;
	r = node_func(p, &f, &q.ctx);
	if (r == CUDA_SUCCESS)
		r = mps__args_size(f, p->kernelParams, p->extra, &packed, &packed_len, &arg_size);
	if (r != CUDA_SUCCESS)
		return r;
	if (sizeof(q) + dep_bytes + arg_size > MPS_MSG_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	mps__cur_handle(&cur);
	q.hdr.flags = (uint16_t)what;
	if (graph && (r = mps__fwd_h_graph(graph, &h)) == CUDA_SUCCESS)
		q.graph = (uint32_t)h;
	if (r == CUDA_SUCCESS && node && (r = mps__fwd_h_node(node, &h)) == CUDA_SUCCESS)
		q.node = (uint32_t)h;
	if (r == CUDA_SUCCESS && exec && (r = mps__fwd_h_exec(exec, &h)) == CUDA_SUCCESS)
		q.exec = (uint32_t)h;
	if (r != CUDA_SUCCESS)
		return r;
	q.func = f->handle;
	q.grid[0] = p->gridDimX;
	q.grid[1] = p->gridDimY;
	q.grid[2] = p->gridDimZ;
	q.block[0] = p->blockDimX;
	q.block[1] = p->blockDimY;
	q.block[2] = p->blockDimZ;
	q.shared_mem = p->sharedMemBytes;
	q.arg_size = (uint32_t)arg_size;
	extra = calloc(1, dep_bytes + arg_size + 1);
	if (!extra)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < ndeps && r == CUDA_SUCCESS; i++) {
		r = mps__fwd_h_node(deps[i], &h);
		((uint32_t *)extra)[i] = (uint32_t)h;
	}
	if (r == CUDA_SUCCESS) {
		mps__args_pack(f, p->kernelParams, packed, packed_len, arg_size, extra + dep_bytes);
		if (what == MPS_KNODE_EXEC_SET && exec_set_checked(node, p)) {
			r = mps__post(MPS_OP_KERNEL_NODE, cur, &q.hdr, sizeof(q), extra, dep_bytes + arg_size);
		} else {
			r = mps__call(MPS_OP_KERNEL_NODE, cur, &q.hdr, sizeof(q), extra, dep_bytes + arg_size, &call);
			if (r == CUDA_SUCCESS && out)
				r = mps__fwd_obj(MPS_H_NODE, (uint32_t)call.s->val[0], q.graph, (void **)out);
			if (r == CUDA_SUCCESS && out)
				((struct mps_gobj *)*out)->kernel_node = true;
			mps__call_end(&call);
		}
	}
	free(extra);
	return r;
}

static CUresult add_kernel_node(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
				const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!out || !graph)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__kernel_node(MPS_KNODE_ADD, out, graph, NULL, NULL, deps, ndeps, p);
}

static CUresult kernel_node_set(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!node)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__kernel_node(MPS_KNODE_SET, NULL, NULL, NULL, node, NULL, 0, p);
}

static CUresult exec_kernel_node_set(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!exec || !node)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__kernel_node(MPS_KNODE_EXEC_SET, NULL, NULL, exec, node, NULL, 0, p);
}

static CUresult kernel_node_get(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
	struct mps_gobj *g = mps__obj(node, MPS_MAGIC_GOBJ);
	struct mps_msg_handle q = { 0 };
	const struct mps_kernel_node_out *o;
	struct mps_call call;
	struct mps_func *f;
	uint32_t cur = 0;
	CUresult r;

	if (!p || !node)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->type != MPS_H_NODE)
		return CUDA_ERROR_INVALID_HANDLE;
	q.handle = g->handle;
	mps__cur_handle(&cur);
	r = mps__call(MPS_OP_KERNEL_NODE_GET, cur, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r != CUDA_SUCCESS) {
		mps__call_end(&call);
		return r;
	}
	o = (const void *)call.s->data;
	f = mps__func_by_handle((uint32_t)call.s->val[0]);
	if (!f || o->arg_size != f->arg_size || sizeof(*o) + o->arg_size > MPS_SLOT_DATA) {
		r = CUDA_ERROR_NOT_SUPPORTED;
	} else {
		/* The node keeps the arguments the parameters point into. */
		/* At least 8 bytes: a node's data starts with a kind's magic for
		 * some kinds (gnode.c), which a check of any node reads. */
		void **ptrs = malloc(f->nparams * sizeof(void *) + f->arg_size + 8);

		if (!ptrs) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			uint8_t *args = (uint8_t *)(ptrs + f->nparams);

			memcpy(args, o + 1, f->arg_size);
			for (uint32_t i = 0; i < f->nparams; i++)
				ptrs[i] = args + f->param[2 * i];
			free(g->data);
			g->data = ptrs;
			memset(p, 0, sizeof(*p));
			if (f->is_kernel)
				p->kern = (CUkernel)f;
			else
				p->func = (CUfunction)f;
			p->gridDimX = o->grid[0];
			p->gridDimY = o->grid[1];
			p->gridDimZ = o->grid[2];
			p->blockDimX = o->block[0];
			p->blockDimY = o->block[1];
			p->blockDimZ = o->block[2];
			p->sharedMemBytes = o->shared_mem;
			p->kernelParams = f->nparams ? ptrs : NULL;
		}
	}
	mps__call_end(&call);
	return r;
}

/* The first generation's parameters lack kern and ctx. */
static CUresult add_kernel_node_v1(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
				   const CUDA_KERNEL_NODE_PARAMS_v1 *p1)
{
	CUDA_KERNEL_NODE_PARAMS p = { 0 };

	if (!p1)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&p, p1, sizeof(*p1));
	return add_kernel_node(out, graph, deps, ndeps, &p);
}

static CUresult kernel_node_set_v1(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p1)
{
	CUDA_KERNEL_NODE_PARAMS p = { 0 };

	if (!p1)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&p, p1, sizeof(*p1));
	return kernel_node_set(node, &p);
}

static CUresult exec_kernel_node_set_v1(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p1)
{
	CUDA_KERNEL_NODE_PARAMS p = { 0 };

	if (!p1)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&p, p1, sizeof(*p1));
	return exec_kernel_node_set(exec, node, &p);
}

static CUresult kernel_node_get_v1(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p1)
{
	CUDA_KERNEL_NODE_PARAMS p;
	CUresult r;

	if (!p1)
		return CUDA_ERROR_INVALID_VALUE;
	r = kernel_node_get(node, &p);
	if (r == CUDA_SUCCESS && !p.func)
		r = CUDA_ERROR_NOT_SUPPORTED;   /* a kernel: the old form cannot say so */
	if (r == CUDA_SUCCESS)
		memcpy(p1, &p, sizeof(*p1));
	return r;
}

typedef CUresult (*add_v1_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS_v1 *);
typedef CUresult (*set_v1_fn)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
typedef CUresult (*exec_set_v1_fn)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *);
typedef CUresult (*get_v1_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1 *);

/* The server hands the text over as a file descriptor; the file is written
 * here, where the path means what the program meant. */
static CUresult debug_dot_print(CUgraph graph, const char *path, unsigned int flags)
{
	struct mps_msg_graph_dot q = { .flags = flags };
	struct mps_call call;
	uint64_t h = 0, size = 0;
	uint32_t ctx = 0;
	char buf[4096];
	CUresult r;
	int in, out;

	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_h_graph(graph, &h);
	if (r != CUDA_SUCCESS)
		return r;
	q.graph = (uint32_t)h;
	mps__cur_handle(&ctx);
	pthread_mutex_lock(&mps_conn.fd_lock);
	r = mps__call(MPS_OP_GRAPH_DOT, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	in = r == CUDA_SUCCESS ? mps__recv_fd(MPS_FD_DOT, &size) : -1;
	pthread_mutex_unlock(&mps_conn.fd_lock);
	if (r != CUDA_SUCCESS)
		return r;
	if (in < 0)
		return mps__ended_or(CUDA_ERROR_OPERATING_SYSTEM);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0)
		r = CUDA_ERROR_OPERATING_SYSTEM;
	for (uint64_t off = 0; r == CUDA_SUCCESS && off < size;) {
		ssize_t n = pread(in, buf, sizeof(buf), (off_t)off);

		if (n <= 0 || write(out, buf, (size_t)n) != n)
			r = CUDA_ERROR_OPERATING_SYSTEM;
		else
			off += (uint64_t)n;
	}
	if (out >= 0 && close(out) < 0 && r == CUDA_SUCCESS)
		r = CUDA_ERROR_OPERATING_SYSTEM;
	close(in);
	return r;
}

/* A graph's kernels may read __managed__ variables: the program's changes
 * to them go ahead of the launch (mvar.c); its host functions (a staged
 * copy's, gstage.c) read what the program wrote before it. */
static CUresult launch(CUgraphExec exec, CUstream s, bool pt)
{
	uint32_t stream, ctx;
	CUresult r = mps__stream_resolve(s, pt, &stream, &ctx);

	if (r == CUDA_SUCCESS)
		r = mps__mvar_send(stream, ctx);
	if (r == CUDA_SUCCESS)
		r = mps__migrate_to_device(stream, 0, 0);   /* and to managed memory (migrate.c) */
	if (r != CUDA_SUCCESS)
		return r;
	mps__hostfn_release();   /* its host functions see what the program wrote */
	r = pt ? mps__fwd_cuGraphLaunch_ptsz(exec, s) : mps__fwd_cuGraphLaunch(exec, s);
	if (r == CUDA_SUCCESS)
		mps__exec_hosts_launched(exec);
	return r;
}

static CUresult graph_launch(CUgraphExec exec, CUstream s) { return launch(exec, s, false); }
static CUresult graph_launch_ptsz(CUgraphExec exec, CUstream s) { return launch(exec, s, true); }

const struct mps_impl mps__graph_api[] = {
	MPS_IMPL(cuGraphDebugDotPrint, debug_dot_print),
	MPS_IMPL(cuGraphLaunch, graph_launch),
	MPS_IMPL_AS(cuGraphLaunch_ptsz, cuGraphLaunch, graph_launch_ptsz),
	MPS_IMPL(cuGraphAddKernelNode_v2, add_kernel_node),
	MPS_IMPL(cuGraphKernelNodeSetParams_v2, kernel_node_set),
	MPS_IMPL(cuGraphExecKernelNodeSetParams_v2, exec_kernel_node_set),
	MPS_IMPL(cuGraphKernelNodeGetParams_v2, kernel_node_get),
	MPS_IMPL_PFN(cuGraphAddKernelNode, add_v1_fn, add_kernel_node_v1),
	MPS_IMPL_PFN(cuGraphKernelNodeSetParams, set_v1_fn, kernel_node_set_v1),
	MPS_IMPL_PFN(cuGraphExecKernelNodeSetParams, exec_set_v1_fn, exec_kernel_node_set_v1),
	MPS_IMPL_PFN(cuGraphKernelNodeGetParams, get_v1_fn, kernel_node_get_v1),
	MPS_IMPL_PFN(cuGraphInstantiate, instantiate_old_fn, instantiate_old),
	MPS_IMPL_PFN(cuGraphInstantiate_v2, instantiate_old_fn, instantiate_old),
	MPS_IMPL(cuGraphInstantiateWithParams, instantiate_with_params),
	MPS_IMPL_AS(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, instantiate_with_params_ptsz),
	MPS_IMPL(cuGraphExecUpdate_v2, exec_update),
	MPS_IMPL_PFN(cuGraphExecUpdate, PFN_cuGraphExecUpdate_v10020, exec_update_v1),
	MPS_IMPL_END
};
