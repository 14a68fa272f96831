// SPDX-License-Identifier: MIT
/*
 * Host functions and memory operations in stream order: cuLaunchHostFunc
 * queues a call of the function on the stream's thread when the stream
 * reaches it (the stream's later work waits for it to return);
 * cuStreamWaitValue32/64 hold the stream until a word in device or
 * registered host memory compares as asked (GEQ with the driver's cyclic
 * comparison, EQ, AND, NOR), polling it as the GPU would (a reset or a
 * destroyed context ends a wait); cuStreamWriteValue32/64 store one;
 * cuStreamBatchMemOp queues its operations one after another. In graphs: host nodes and batch
 * memory-operation nodes of one 32-bit wait or write. Stream capture of
 * either call is not modelled (a graph gets them as nodes).
 */
#include <time.h>

#include "standin.h"

/* Whether the word lets the stream on. */
static bool value_ok(const struct si_op *op)
{
	uint64_t v, want = op->value_wait.value;
	bool wide = op->value_wait.wide;

	v = wide ? __atomic_load_n((uint64_t *)op->value_wait.addr, __ATOMIC_ACQUIRE)
		 : __atomic_load_n((uint32_t *)op->value_wait.addr, __ATOMIC_ACQUIRE);
	switch (op->value_wait.flags & 0xf) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		return wide ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return v == want;
	case CU_STREAM_WAIT_VALUE_AND:
		return (v & want) != 0;
	case CU_STREAM_WAIT_VALUE_NOR:
		return (wide ? ~(v | want) : (uint32_t)~(v | want)) != 0;
	default:
		return true;
	}
}

void mps__memop_run(struct si_op *op, bool (*gone)(void *), void *arg)
{
	const struct timespec pause = { .tv_nsec = 20 * 1000 };

	if (op->kind == SI_OP_HOSTFN) {
		op->hostfn.fn(op->hostfn.data);
		return;
	}
	if (op->kind == SI_OP_VALUE_WRITE) {
		if (op->value_wait.wide)
			__atomic_store_n((uint64_t *)op->value_wait.addr, op->value_wait.value, __ATOMIC_RELEASE);
		else
			__atomic_store_n((uint32_t *)op->value_wait.addr, (uint32_t)op->value_wait.value,
					 __ATOMIC_RELEASE);
		return;
	}
	for (unsigned n = 0;; n++) {
		if (value_ok(op))
			return;
		if (n % 64 == 0 && gone(arg))
			return;
		nanosleep(&pause, NULL);
	}
}

/* Queues op on hStream; takes it. */
static CUresult queue(CUstream hStream, struct si_op *op)
{
	struct si_context *ctx;
	struct si_stream *s;
	CUresult rc;

	mps__lock();
	rc = mps__stream_enter(hStream, &ctx, &s);
	if (rc == CUDA_SUCCESS && s->cap)
		rc = CUDA_ERROR_NOT_SUPPORTED;   /* the stand-in captures neither */
	if (rc == CUDA_SUCCESS)
		mps__submit(s, op);
	else
		mps__op_free(op);
	mps__unlock();
	return rc;
}

CU_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	struct si_op *op;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	op = mps__op_new(SI_OP_HOSTFN);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->hostfn.fn = fn;
	op->hostfn.data = userData;
	return queue(hStream, op);
}

/* A wait (or write) of a 32- or 64-bit word queued on stream. */
static CUresult value_op(CUstream stream, CUdeviceptr addr, uint64_t value, unsigned int flags, bool wait, bool wide)
{
	unsigned int bytes = wide ? 8 : 4;
	struct si_range *r = NULL;
	struct si_op *op;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (addr % bytes || (wait && ((flags & 0xf) > CU_STREAM_WAIT_VALUE_NOR ||
				     (flags & ~(0xfu | CU_STREAM_WAIT_VALUE_FLUSH)))) ||
	    (!wait && (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	if (mps__range_classify((uintptr_t)addr, bytes, &r) != 1)
		r = NULL;
	mps__unlock();
	if (!r)
		return CUDA_ERROR_INVALID_VALUE;
	op = mps__op_new(wait ? SI_OP_VALUE_WAIT : SI_OP_VALUE_WRITE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->value_wait.addr = (void *)(uintptr_t)addr;
	op->value_wait.value = value;
	op->value_wait.flags = wait ? flags : 0;
	op->value_wait.wide = wide;
	return queue(stream, op);
}

CU_API CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	return value_op(stream, addr, value, flags, true, false);
}

CU_API CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	return value_op(stream, addr, value, flags, true, true);
}

CU_API CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
	return value_op(stream, addr, value, flags, false, false);
}

CU_API CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	return value_op(stream, addr, value, flags, false, true);
}

CU_API CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
				      unsigned int flags)
{
	CUresult rc = CUDA_SUCCESS;

	if (!count || !paramArray || flags)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < count && rc == CUDA_SUCCESS; i++) {
		const CUstreamBatchMemOpParams *p = &paramArray[i];

		switch (p->operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
			rc = value_op(stream, p->waitValue.address, p->waitValue.value, p->waitValue.flags, true, false);
			break;
		case CU_STREAM_MEM_OP_WAIT_VALUE_64:
			rc = value_op(stream, p->waitValue.address, p->waitValue.value64, p->waitValue.flags, true, true);
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
			rc = value_op(stream, p->writeValue.address, p->writeValue.value, p->writeValue.flags, false,
				      false);
			break;
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			rc = value_op(stream, p->writeValue.address, p->writeValue.value64, p->writeValue.flags, false,
				      true);
			break;
		case CU_STREAM_MEM_OP_BARRIER:
		case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
			break;   /* the stand-in's memory is coherent */
		default:
			rc = CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	return rc;
}

/* A wait or write of one 32-bit word, as a batch memory-operation node has it. */
static CUresult memop_from(const CUstreamBatchMemOpParams *p, struct si_op **out)
{
	struct si_range *r = NULL;
	struct si_op *op;
	bool wait;

	if (p->operation != CU_STREAM_MEM_OP_WAIT_VALUE_32 && p->operation != CU_STREAM_MEM_OP_WRITE_VALUE_32)
		return CUDA_ERROR_NOT_SUPPORTED;
	wait = p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32;
	if (p->waitValue.address % 4 || mps__range_classify((uintptr_t)p->waitValue.address, 4, &r) != 1 ||
	    (wait && (p->waitValue.flags & 0xf) > CU_STREAM_WAIT_VALUE_NOR))
		return CUDA_ERROR_INVALID_VALUE;
	op = mps__op_new(wait ? SI_OP_VALUE_WAIT : SI_OP_VALUE_WRITE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* waitValue and writeValue share their address and value's place. */
	op->value_wait.addr = (void *)(uintptr_t)p->waitValue.address;
	op->value_wait.value = wait ? p->waitValue.value : p->writeValue.value;
	op->value_wait.flags = wait ? p->waitValue.flags : 0;
	op->value_wait.wide = false;
	*out = op;
	return CUDA_SUCCESS;
}

CU_API CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				   size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct si_gnode *n;
	struct si_op *op;
	CUresult rc;

	if (!nodeParams || !nodeParams->fn)
		return CUDA_ERROR_INVALID_VALUE;
	op = mps__op_new(SI_OP_HOSTFN);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->hostfn.fn = nodeParams->fn;
	op->hostfn.data = nodeParams->userData;
	mps__lock();
	rc = mps__graph_add_op_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_HOST, op, &n);
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct si_gnode *n;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	n = mps__gnode_arg(hNode);
	if (n && n->type == CU_GRAPH_NODE_TYPE_HOST && n->op) {
		nodeParams->fn = n->op->hostfn.fn;
		nodeParams->userData = n->op->hostfn.data;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
	struct si_gnode *n;
	struct si_op *op = NULL;
	CUresult rc;

	if (!nodeParams || !nodeParams->paramArray || !nodeParams->count)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodeParams->count != 1)
		return CUDA_ERROR_NOT_SUPPORTED;   /* the stand-in keeps one operation a node */
	mps__lock();
	rc = memop_from(&nodeParams->paramArray[0], &op);
	if (rc == CUDA_SUCCESS)
		rc = mps__graph_add_op_node(phGraphNode, hGraph, dependencies, numDependencies,
					    CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, op, &n);
	mps__unlock();
	return rc;
}
