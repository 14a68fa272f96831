// SPDX-License-Identifier: MIT
/*
 * What the generated client side of forwarded functions (gen/forward.c)
 * calls to turn a program's handles into the server's and back.
 *
 * The kinds the forwarding layer brings (graphs, nodes, executable graphs,
 * memory pools, user objects) are one small struct each here, found by the
 * server's handle in a hash table, so a handle the server returns twice (a
 * graph's nodes, asked for again) is the same CUgraphNode both times, as
 * with the driver. Destroying an object forgets what it owns, as on the
 * server (objects.h): a graph's nodes, a node's child graph.
 */
#ifndef MPS_CLIENT_FORWARD_H
#define MPS_CLIENT_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "common/wire.h"

#define MPS_MAGIC_GOBJ 0x6a624f47u

struct mps_gobj {
	uint32_t magic;
	uint32_t handle;        /* the server's */
	uint32_t owner;         /* the server's handle of its owner; 0: none */
	int type;               /* MPS_H_* as the server numbers them */
	bool kernel_node;       /* a node this client made with cuGraphAddKernelNode */
	struct mps_gobj *next;  /* hash chain */
	struct mps_gobj *child, *sibling;   /* what it owns */
	void *data;             /* per kind (a kernel node's copied arguments) */
};

/* The current context's handle; with none, CUDA_ERROR_INVALID_CONTEXT if
 * `need`, else 0. */
CUresult mps__fwd_ctx(uint32_t *ctx, bool need);

/* A stream argument (per_thread: the _ptsz/_ptds twin), and the handle of
 * the context it belongs to. */
CUresult mps__fwd_stream(CUstream s, bool per_thread, uint64_t *h, uint32_t *ctx);

/* A device ordinal as the program numbers it. */
CUresult mps__fwd_device(CUdevice d, uint64_t *h);

/* Handle arguments of each kind. NULL contexts name the current one. */
CUresult mps__fwd_h_ctx(CUcontext x, uint64_t *h);
CUresult mps__fwd_h_event(CUevent e, uint64_t *h);
CUresult mps__fwd_h_func(CUfunction f, uint64_t *h);
CUresult mps__fwd_h_module(CUmodule m, uint64_t *h);
CUresult mps__fwd_h_library(CUlibrary l, uint64_t *h);
CUresult mps__fwd_h_graph(CUgraph g, uint64_t *h);
CUresult mps__fwd_h_node(CUgraphNode n, uint64_t *h);
CUresult mps__fwd_h_exec(CUgraphExec x, uint64_t *h);
CUresult mps__fwd_h_pool(CUmemoryPool p, uint64_t *h);
CUresult mps__fwd_h_userobj(CUuserObject u, uint64_t *h);
CUresult mps__fwd_h_array(CUarray a, uint64_t *h);
CUresult mps__fwd_h_mipmap(CUmipmappedArray m, uint64_t *h);
CUresult mps__fwd_h_alloc(CUmemGenericAllocationHandle a, uint64_t *h);

/* The program's handle for a server handle of a type: the existing struct,
 * or a new one owned by `owner`. */
CUresult mps__fwd_obj(int type, uint32_t handle, uint32_t owner, void **out);

/* The struct behind a server handle of a type, or NULL. */
struct mps_gobj *mps__fwd_find(int type, uint32_t handle);

/* The program's event for a server event handle. */
CUresult mps__fwd_event_of(uint32_t handle, CUevent *out);

/* Forgets an object the program destroyed, and what it owned. */
void mps__fwd_drop(int type, uint32_t handle);

#endif
