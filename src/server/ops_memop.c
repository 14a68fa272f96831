// SPDX-License-Identifier: MIT
/*
 * Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64,
 * cuStreamBatchMemOp): forwarded (forward.def) once every address is known
 * to lie in memory the client owns, device memory or its pinned host
 * memory.
 *
 * A wait for a value that never comes holds its stream for good, and a
 * client that dies leaves such waits behind: the server would then wait
 * forever for the streams it must drain. So the last MEMWAITS_KEPT waits of
 * each client are kept, and teardown writes into each word a value that
 * lets it pass (mps__memwaits_release), on a stream of its own, before it
 * waits for the client's streams: only into memory the client still owns
 * (what it freed may be another client's by now), which it is about to
 * lose.
 */
#include <stdlib.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/streams.h"

#define MEMWAITS_KEPT 256

struct memwait {
	CUdeviceptr addr;
	uint64_t value;
	unsigned int flags;
	bool wide;
	int device;
};

struct mps_memwaits {
	struct memwait w[MEMWAITS_KEPT];
	unsigned int next, n;
};

static CUresult check(struct mps_client *c, CUdeviceptr addr, uint64_t bytes)
{
	if (addr % bytes || mps_memacct_check(&c->mem, addr, bytes) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* The driver's four come together (CUDA 12 on). */
	if (!mps_drv.cuStreamWaitValue32_v2 || !mps_drv.cuStreamWaitValue64_v2 || !mps_drv.cuStreamWriteValue32_v2 ||
	    !mps_drv.cuStreamWriteValue64_v2)
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

static void keep(struct mps_client *c, struct mps_sstream *st, CUdeviceptr addr, uint64_t value, unsigned int flags,
		 bool wide)
{
	struct mps_memwaits *k = c->memwaits;

	if (!k && !(k = c->memwaits = calloc(1, sizeof(*k))))
		return;   /* the wait stands; only its release at teardown is lost */
	k->w[k->next] = (struct memwait){ addr, value, flags, wide, st->ctx->device };
	k->next = (k->next + 1) % MEMWAITS_KEPT;
	if (k->n < MEMWAITS_KEPT)
		k->n++;
}

/* A wait queued on the stream and kept for teardown. */
static CUresult wait_value(struct mps_client *c, struct mps_sstream *st, CUdeviceptr addr, uint64_t value,
			   unsigned int flags, bool wide)
{
	CUresult r = check(c, addr, wide ? 8 : 4);

	if (r != CUDA_SUCCESS)
		return r;
	r = wide ? mps_drv.cuStreamWaitValue64_v2(st->s, addr, value, flags)
		 : mps_drv.cuStreamWaitValue32_v2(st->s, addr, (cuuint32_t)value, flags);
	if (r == CUDA_SUCCESS)
		keep(c, st, addr, value, flags, wide);
	return r;
}

CUresult mps__hook_cuStreamWaitValue32_v2(struct mps_client *c, struct mps_sstream *stream, CUdeviceptr addr,
					  cuuint32_t value, unsigned int flags)
{
	return wait_value(c, stream, addr, value, flags, false);
}

CUresult mps__hook_cuStreamWaitValue64_v2(struct mps_client *c, struct mps_sstream *stream, CUdeviceptr addr,
					  cuuint64_t value, unsigned int flags)
{
	return wait_value(c, stream, addr, value, flags, true);
}

CUresult mps__hook_cuStreamWriteValue32_v2(struct mps_client *c, struct mps_sstream *stream, CUdeviceptr addr,
					   cuuint32_t value, unsigned int flags)
{
	CUresult r = check(c, addr, 4);

	return r == CUDA_SUCCESS ? mps_drv.cuStreamWriteValue32_v2(stream->s, addr, value, flags) : r;
}

CUresult mps__hook_cuStreamWriteValue64_v2(struct mps_client *c, struct mps_sstream *stream, CUdeviceptr addr,
					   cuuint64_t value, unsigned int flags)
{
	CUresult r = check(c, addr, 8);

	return r == CUDA_SUCCESS ? mps_drv.cuStreamWriteValue64_v2(stream->s, addr, value, flags) : r;
}

/* At most this many operations in one batch (the driver's own limit). */
#define BATCH_MAX 256

CUresult mps__hook_cuStreamBatchMemOp_v2(struct mps_client *c, struct mps_sstream *stream, unsigned int count,
					 CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
	CUresult r = CUDA_SUCCESS;

	if (!count || count > BATCH_MAX || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuStreamBatchMemOp_v2)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) {
		const CUstreamBatchMemOpParams *p = &paramArray[i];

		switch (p->operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
			r = check(c, p->waitValue.address, 4);   /* writeValue's address is in the same place */
			break;
		case CU_STREAM_MEM_OP_WAIT_VALUE_64:
		case CU_STREAM_MEM_OP_WRITE_VALUE_64:
			r = check(c, p->waitValue.address, 8);
			break;
		case CU_STREAM_MEM_OP_BARRIER:
		case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
			break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuStreamBatchMemOp_v2(stream->s, count, paramArray, flags);
	for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) {
		const CUstreamBatchMemOpParams *p = &paramArray[i];

		if (p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32)
			keep(c, stream, p->waitValue.address, p->waitValue.value, p->waitValue.flags, false);
		else if (p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64)
			keep(c, stream, p->waitValue.address, p->waitValue.value64, p->waitValue.flags, true);
	}
	return r;
}

/* A value that lets a wait pass, or false if none can. */
static bool passing(const struct memwait *w, uint64_t *v)
{
	uint64_t all = w->wide ? UINT64_MAX : UINT32_MAX;

	switch (w->flags & 0xf) {
	case CU_STREAM_WAIT_VALUE_GEQ:
	case CU_STREAM_WAIT_VALUE_EQ:
		*v = w->value;
		return true;
	case CU_STREAM_WAIT_VALUE_AND:
		*v = w->value;
		return (w->value & all) != 0;
	case CU_STREAM_WAIT_VALUE_NOR:
		*v = 0;
		return (w->value & all) != all;
	default:
		return false;
	}
}

void mps__memwaits_release(struct mps_client *c)
{
	struct mps_memwaits *k = c->memwaits;
	CUstream helper[MPS_MAX_DEVICES] = { 0 };
	uint64_t v;

	if (!k)
		return;
	for (unsigned int i = 0; i < k->n; i++) {
		const struct memwait *w = &k->w[i];
		int d = w->device;

		/* Only memory the client still owns: what it freed may be
		 * another client's by now. */
		if (!passing(w, &v) || check(c, w->addr, w->wide ? 8 : 4) != CUDA_SUCCESS ||
		    mps__bind_device(c, d) != CUDA_SUCCESS)
			continue;
		if (!helper[d] && mps_stream_raw_new(d, NULL, 0, &helper[d]) != CUDA_SUCCESS)
			continue;
		if (w->wide)
			mps_drv.cuStreamWriteValue64_v2(helper[d], w->addr, v, 0);
		else
			mps_drv.cuStreamWriteValue32_v2(helper[d], w->addr, (cuuint32_t)v, 0);
	}
	for (int d = 0; d < MPS_MAX_DEVICES; d++) {
		if (!helper[d] || mps__bind_device(c, d) != CUDA_SUCCESS)
			continue;
		mps_drv.cuStreamSynchronize(helper[d]);
		mps_stream_raw_free(d, helper[d]);
	}
	free(k);
	c->memwaits = NULL;
}
