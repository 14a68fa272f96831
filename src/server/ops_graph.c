// SPDX-License-Identifier: MIT
/*
 * Kernel nodes of graphs built by hand: the arguments come packed as for a
 * launch (ops_launch.c), so the node's parameter array points into the
 * message — the driver copies the arguments when it makes or updates the
 * node. Reading a node back returns the function's handle and the
 * arguments packed again; a node whose function the client cannot name (a
 * kernel the driver resolved itself) is not readable. The rest of the graph
 * API is forwarded by generated code (forward.def).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/sock.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/smshare.h"

/* The device a kernel node's function runs on: the function's own (a
 * CUfunction), or the context's the message names (a CUkernel). */
static int node_device(struct mps_client *c, const struct mps_msg *m, const struct mps_msg_kernel_node *q,
		       const struct mps_sfunc *f, CUcontext *ctx)
{
	struct mps_green *green;
	struct mps_sctx *x;

	*ctx = NULL;
	if (!f->is_kernel)
		return f->device;
	x = mps__obj(c, q->ctx ? q->ctx : m->ctx, MPS_H_CTX);
	if (!x)
		return -1;
	/* The context a kernel (not a function) runs in: the client's SM
	 * share's, where it has one. */
	green = mps_sm_bind(c, x->device);
	*ctx = green && mps_sm_ctx(green) ? mps_sm_ctx(green) : mps_srv.dev[x->device].primary;
	return x->device;
}

void mps__op_kernel_node(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_kernel_node *q = (const void *)m;
	const uint8_t *at = (const uint8_t *)(q + 1), *end = (const uint8_t *)m + m->len;
	struct mps_sfunc *f = mps__obj(c, q->func, MPS_H_FUNC);
	void *kp[MPS_FUNC_PARAMS_MAX];
	CUDA_KERNEL_NODE_PARAMS p;
	CUgraphNode *deps = NULL, node = NULL;
	CUgraphExec exec = NULL;
	CUgraph graph = NULL;
	const uint8_t *args;
	int device;
	CUresult r;

	if (m->slot == MPS_NO_SLOT && m->flags != MPS_KNODE_EXEC_SET) {
		r = CUDA_ERROR_INVALID_VALUE;   /* only an executable graph's node may be set without a reply */
		goto out;
	}
	if (!f) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (q->arg_size > MPS_ARGS_MAX || q->arg_size < f->arg_size) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (m->flags == MPS_KNODE_ADD) {
		const void *wire = mps__fwd_array(&at, end, q->ndeps, sizeof(uint32_t), &r);

		if (!wire || !mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r))
			goto out;
		deps = mps__fwd_handles(c, MPS_H_NODE, wire, q->ndeps, &r);
		if (!deps)
			goto out;
	} else if (m->flags == MPS_KNODE_SET || m->flags == MPS_KNODE_EXEC_SET) {
		if (q->ndeps || !mps__fwd_get(c, MPS_H_NODE, q->node, (void **)&node, &r) ||
		    (m->flags == MPS_KNODE_EXEC_SET && !mps__fwd_get(c, MPS_H_EXEC, q->exec, (void **)&exec, &r))) {
			if (q->ndeps)
				r = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
	} else {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	args = mps__fwd_array(&at, end, q->arg_size, 1, &r);
	if (!args)
		goto out;
	memset(&p, 0, sizeof(p));
	device = node_device(c, m, q, f, &p.ctx);
	if (device < 0) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto out;
	}
	r = mps__bind_device(c, device);
	if (r != CUDA_SUCCESS)
		goto out;
	for (uint32_t i = 0; i < f->nparams; i++)
		kp[i] = (void *)(args + f->param[2 * i]);
	if (f->is_kernel)
		p.kern = (CUkernel)f->f;
	else
		p.func = f->f;
	p.gridDimX = q->grid[0];
	p.gridDimY = q->grid[1];
	p.gridDimZ = q->grid[2];
	p.blockDimX = q->block[0];
	p.blockDimY = q->block[1];
	p.blockDimZ = q->block[2];
	p.sharedMemBytes = q->shared_mem;
	p.kernelParams = f->nparams ? kp : NULL;
	switch (m->flags) {
	case MPS_KNODE_ADD:
		r = mps_drv.cuGraphAddKernelNode_v2 ?
			    mps_drv.cuGraphAddKernelNode_v2(&node, graph, deps, q->ndeps, &p) : CUDA_ERROR_NOT_SUPPORTED;
		if (r == CUDA_SUCCESS)
			r = mps__fwd_new(c, MPS_H_NODE, node, q->graph, &mps__slot(c, m->slot)->val[0]);
		break;
	case MPS_KNODE_SET:
		r = mps_drv.cuGraphKernelNodeSetParams_v2 ? mps_drv.cuGraphKernelNodeSetParams_v2(node, &p) :
							     CUDA_ERROR_NOT_SUPPORTED;
		break;
	default:
		r = mps_drv.cuGraphExecKernelNodeSetParams_v2 ?
			    mps_drv.cuGraphExecKernelNodeSetParams_v2(exec, node, &p) : CUDA_ERROR_NOT_SUPPORTED;
		break;
	}
out:
	free(deps);
	if (m->slot != MPS_NO_SLOT)
		mps__reply(c, m->slot, r);
	else if (r != CUDA_SUCCESS)
		mps__defer_error(c, r, "cuGraphExecKernelNodeSetParams");
}

struct func_match {
	void *real;
	struct mps_sfunc *f;
};

static void match_func(void *obj, void *arg)
{
	struct mps_sfunc *f = obj;
	struct func_match *w = arg;

	if ((void *)f->f == w->real && !w->f)
		w->f = f;
}

void mps__op_kernel_node_get(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_kernel_node_out *o = (void *)s->data;
	struct func_match w = { 0 };
	CUDA_KERNEL_NODE_PARAMS p;
	CUgraphNode node;
	CUresult r;

	if (!mps__fwd_get(c, MPS_H_NODE, q->handle, (void **)&node, &r))
		goto out;
	if (!mps_drv.cuGraphKernelNodeGetParams_v2) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	memset(&p, 0, sizeof(p));
	r = mps_drv.cuGraphKernelNodeGetParams_v2(node, &p);
	if (r != CUDA_SUCCESS)
		goto out;
	w.real = p.func ? (void *)p.func : (void *)p.kern;
	mps_handles_foreach(&c->handles, MPS_H_FUNC, match_func, &w);
	if (!w.f || sizeof(*o) + w.f->arg_size > MPS_SLOT_DATA || (w.f->nparams && !p.kernelParams)) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	s->val[0] = w.f->handle;
	s->val[1] = w.f->is_kernel;
	o->grid[0] = p.gridDimX;
	o->grid[1] = p.gridDimY;
	o->grid[2] = p.gridDimZ;
	o->block[0] = p.blockDimX;
	o->block[1] = p.blockDimY;
	o->block[2] = p.blockDimZ;
	o->shared_mem = p.sharedMemBytes;
	o->arg_size = w.f->arg_size;
	memset(o + 1, 0, w.f->arg_size);
	for (uint32_t i = 0; i < w.f->nparams; i++)
		memcpy((uint8_t *)(o + 1) + w.f->param[2 * i], p.kernelParams[i], w.f->param[2 * i + 1]);
out:
	mps__reply(c, m->slot, r);
}

/* cuGraphDebugDotPrint: the driver writes the text to a memfd of ours
 * (through /proc/self/fd, a path only this process can use), which goes to
 * the client; the client writes the file it named, in its own file system
 * view and with its own rights. */
void mps__op_graph_dot(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_graph_dot *q = (const void *)m;
	struct mps_sobj *g = mps_obj_get(c, MPS_H_GRAPH, q->graph);
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_DOT };
	char path[64];
	CUresult r;
	off_t len;
	int fd;

	if (!g) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (!mps_drv.cuGraphDebugDotPrint) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	fd = memfd_create("openmps-graph-dot", MFD_CLOEXEC);
	if (fd < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_OPERATING_SYSTEM);
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = mps__bind_device(c, g->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuGraphDebugDotPrint((CUgraph)g->real, path, q->flags);
	if (r == CUDA_SUCCESS) {
		len = lseek(fd, 0, SEEK_END);
		fm.size = len < 0 ? 0 : (uint64_t)len;
		if (len < 0 || mps_sock_send(c->sock, &fm, sizeof(fm), fd) < 0)
			r = CUDA_ERROR_OPERATING_SYSTEM;
	}
	close(fd);
	mps__reply(c, m->slot, r);
}
