// SPDX-License-Identifier: MIT
/*
 * Copies and memsets. The host side of a copy is never a raw client address
 * (the server cannot see the client's memory): it is either inline bytes in
 * the message (small host-to-device copies), the reply slot (small
 * device-to-host copies), or an offset in one of the client's pinned host
 * regions — its own cuMemAllocHost buffers, or the staging region the client
 * library uses for large pageable copies. The device side must lie inside
 * memory the client owns. Every copy is queued on the client's stream; a
 * synchronous one is answered when the GPU has finished it, and a staged one
 * hands its staging chunk back to the client at that moment (both stores
 * the GPU makes itself where it can: completion.h). A few aligned bytes
 * from the message go to the device as the stream's own stores of values
 * (small_h2d), with no staging of host memory at all; more bytes from the
 * message go through the client's bounce ring (bounce.h), pinned memory
 * the DMA reads without the driver staging them under its lock.
 */
#include <string.h>

#include "common/atomics.h"
#include "common/copy3d.h"
#include "server/bounce.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/streams.h"

/* Resolves the host side of a copy to a server address. */
static void *host_side(struct mps_client *c, const struct mps_msg_copy *q, const struct mps_msg *m, CUresult *err)
{
	struct mps_shost *h;

	switch (q->host_region) {
	case MPS_HOST_INLINE:
		if (q->kind != MPS_COPY_H2D || q->size > m->len - sizeof(*q))
			break;
		return (uint8_t *)q + sizeof(*q);
	case MPS_HOST_SLOT:
		/* The reply slot is registered memory: a synchronous copy of a few
		 * KiB either way DMAs straight from or into it. */
		if (m->slot == MPS_NO_SLOT || q->size > MPS_SLOT_DATA)
			break;
		return mps__slot(c, m->slot)->data;
	default:
		h = mps__host_get(c, q->host_region);
		if (!h || q->host_offset > h->size || q->size > h->size - q->host_offset)
			break;
		return (uint8_t *)h->addr + q->host_offset;
	}
	*err = CUDA_ERROR_INVALID_VALUE;
	return NULL;
}

/* What to do once the copy or memset is queued (or failed to be). `staged`:
 * a synchronous copy whose source the server already holds (host to device
 * from bytes in the message) on a stream that was idle, answered before it
 * was queued (mps__op_copy); what queueing it returned is the client's next
 * call's, as an asynchronous copy's. */
static void finish(struct mps_client *c, const struct mps_msg *m, struct mps_sstream *st, uint32_t stage,
		   CUresult r, const char *what, bool staged)
{
	if (r == CUDA_SUCCESS && (m->flags & MPS_COPY_FENCE))
		r = mps_stream_fence(c, st);   /* a synchronous form the client did not wait for */
	if ((m->flags & MPS_COPY_STAGE) && stage < MPS_STAGE_MAX) {
		CUresult sr = r;

		if (sr == CUDA_SUCCESS && !mps_comp_gpu_stage(c, st, stage))
			sr = mps_comp_after_stream(c, st, MPS_PEND_STAGE, stage, false);
		if (sr != CUDA_SUCCESS)
			mps_comp_stage_done(c, stage, sr);   /* hand the chunk back at once */
	}
	if (m->slot != MPS_NO_SLOT && staged) {
		mps__defer_error(c, r, what);
	} else if (m->slot != MPS_NO_SLOT) {
		if (r == CUDA_SUCCESS && (r = mps_comp_after_stream(c, st, MPS_PEND_REPLY, m->slot, true)) == CUDA_SUCCESS)
			;   /* answered when the GPU is done */
		else
			mps__reply(c, m->slot, r);
	} else {
		mps__defer_error(c, r, what);
	}
}

/* Up to this many bytes from the message go as stores of values. */
#define SMALL_H2D_MAX 32

/* A small host-to-device copy of bytes the server holds, as the stream's
 * own 32- and 64-bit stores (one cuStreamBatchMemOp): stream-ordered like
 * the copy, with none of a pageable copy's staging, so it costs the server
 * a fraction of cuMemcpyHtoDAsync. Needs 4-byte alignment and length; any
 * failure leaves it to the caller's copy. */
static CUresult small_h2d(struct mps_sstream *st, uint64_t dst, const uint8_t *src, uint64_t size)
{
	CUstreamBatchMemOpParams op[SMALL_H2D_MAX / 4];
	unsigned int n = 0;

	if (!mps_drv.cuStreamBatchMemOp_v2 || size > SMALL_H2D_MAX || size % 4 || dst % 4)
		return CUDA_ERROR_NOT_SUPPORTED;
	memset(op, 0, sizeof(op));
	for (uint64_t at = 0; at < size; n++) {
		if ((dst + at) % 8 == 0 && size - at >= 8) {
			op[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
			memcpy(&op[n].writeValue.value64, src + at, 8);
			op[n].writeValue.address = (CUdeviceptr)(dst + at);
			at += 8;
		} else {
			op[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
			memcpy(&op[n].writeValue.value, src + at, 4);
			op[n].writeValue.address = (CUdeviceptr)(dst + at);
			at += 4;
		}
	}
	return mps_drv.cuStreamBatchMemOp_v2(st->s, n, op, 0);
}

void mps__op_copy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_copy *q = (const void *)m;
	struct mps_sstream *st = NULL;
	CUresult r = CUDA_SUCCESS;
	void *host = NULL;
	bool inline_h2d, staged;

	if ((m->flags & MPS_COPY_STAGE) && q->stage >= MPS_STAGE_MAX) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto fail;
	}
	if (q->kind == MPS_COPY_H2D || q->kind == MPS_COPY_D2H) {
		host = host_side(c, q, m, &r);
		if (!host)
			goto fail;
	} else if (q->kind != MPS_COPY_D2D) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto fail;
	}
	if (q->size && (((q->kind == MPS_COPY_H2D || q->kind == MPS_COPY_D2D) &&
			 mps_memacct_check(&c->mem, q->dst, q->size) < 0) ||
			((q->kind == MPS_COPY_D2H || q->kind == MPS_COPY_D2D) &&
			 mps_memacct_check(&c->mem, q->src, q->size) < 0))) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto fail;
	}
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st)
		goto fail;
	/* Bytes that live in the message or a staging chunk cannot be captured
	 * into a graph: they are gone when it runs (the driver refuses pageable
	 * memory in a capture too). Pinned memory of the client's can be. */
	if (host && mps_stream_capturing(c, st)) {
		struct mps_shost *h = q->host_region == MPS_HOST_INLINE || q->host_region == MPS_HOST_SLOT ||
						      (m->flags & MPS_COPY_STAGE) ? NULL : mps__host_get(c, q->host_region);

		if (!h) {
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			goto fail;
		}
		h->graphed = true;   /* kept for the graph (ops_gnode.c) */
	}
	/* As the driver's cuMemcpyHtoD from pageable memory, which returns once
	 * the stream's earlier work is done and the bytes are staged: bytes in
	 * the message are staged already (they stay until this call returns,
	 * and the driver stages them again before cuMemcpyHtoDAsync returns),
	 * so on an idle stream the client is answered before the copy is even
	 * queued. Its later calls come after this one, on this thread. A stream
	 * whose only work since it was idle is such copies counts as idle: what
	 * is left of them is DMA out of staging, which the driver's own staged
	 * copy leaves in flight too. */
	inline_h2d = q->kind == MPS_COPY_H2D && q->host_region == MPS_HOST_INLINE && !(m->flags & MPS_COPY_STAGE);
	staged = m->slot != MPS_NO_SLOT && inline_h2d &&
		 ((st->staged_at && st->staged_at + 1 == st->work) || mps_drv.cuStreamQuery(st->s) == CUDA_SUCCESS);
	if (staged) {
		st->staged_at = st->work;
		mps__reply(c, m->slot, mps__take_deferred(c));
	}
	if (q->size) {
		uint64_t *n = q->kind == MPS_COPY_H2D ? &c->stats.h2d : q->kind == MPS_COPY_D2H ? &c->stats.d2h : &c->stats.d2d;

		mps_store_relaxed(n, *n + q->size);
		switch (q->kind) {
		case MPS_COPY_H2D:
			r = inline_h2d ? small_h2d(st, q->dst, host, q->size) : CUDA_ERROR_NOT_SUPPORTED;
			if (r != CUDA_SUCCESS && inline_h2d)
				r = mps_bounce_h2d(c, st, (CUdeviceptr)q->dst, host, (size_t)q->size);
			if (r != CUDA_SUCCESS)
				r = mps_drv.cuMemcpyHtoDAsync((CUdeviceptr)q->dst, host, (size_t)q->size, st->s);
			break;
		case MPS_COPY_D2H:
			r = mps_drv.cuMemcpyDtoHAsync(host, (CUdeviceptr)q->src, (size_t)q->size, st->s);
			if (q->host_region == MPS_HOST_SLOT)
				mps__slot(c, m->slot)->len = (uint32_t)q->size;
			break;
		default:
			r = mps_drv.cuMemcpyDtoDAsync((CUdeviceptr)q->dst, (CUdeviceptr)q->src, (size_t)q->size, st->s);
			break;
		}
	}
	finish(c, m, st, q->stage, r, "cuMemcpyAsync", staged);
	return;

fail:
	if ((m->flags & MPS_COPY_STAGE) && q->stage < MPS_STAGE_MAX)
		mps_comp_stage_done(c, q->stage, r);
	if (m->slot != MPS_NO_SLOT)
		mps__reply(c, m->slot, r);
	else
		mps__defer_error(c, r, "cuMemcpyAsync");
}

void mps__op_memset(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_memset *q = (const void *)m;
	struct mps_sstream *st;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	uint64_t row, span;

	if ((q->elem != 1 && q->elem != 2 && q->elem != 4) || q->count > UINT64_MAX / 4)
		goto fail;
	row = q->count * q->elem;
	span = row;
	if (q->height) {
		/* Rows of a pitched allocation: every byte from the first row's
		 * start to the last row's end must be the client's. */
		if ((q->height > 1 && q->pitch < row) || q->height > UINT32_MAX || q->pitch > UINT64_MAX / q->height)
			goto fail;
		span = q->pitch * (q->height - 1) + row;
		if (!row)
			span = 0;
	}
	if (span && mps_memacct_check(&c->mem, q->dst, span) < 0)
		goto fail;
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st)
		goto fail;
	if (span && q->height) {
		size_t w = (size_t)q->count, h = (size_t)q->height, pitch = (size_t)q->pitch;

		if (q->elem == 1)
			r = mps_drv.cuMemsetD2D8Async((CUdeviceptr)q->dst, pitch, (unsigned char)q->value, w, h, st->s);
		else if (q->elem == 2)
			r = mps_drv.cuMemsetD2D16Async((CUdeviceptr)q->dst, pitch, (unsigned short)q->value, w, h, st->s);
		else
			r = mps_drv.cuMemsetD2D32Async((CUdeviceptr)q->dst, pitch, q->value, w, h, st->s);
	} else if (span) {
		if (q->elem == 1)
			r = mps_drv.cuMemsetD8Async((CUdeviceptr)q->dst, (unsigned char)q->value, (size_t)q->count, st->s);
		else if (q->elem == 2)
			r = mps_drv.cuMemsetD16Async((CUdeviceptr)q->dst, (unsigned short)q->value, (size_t)q->count, st->s);
		else
			r = mps_drv.cuMemsetD32Async((CUdeviceptr)q->dst, q->value, (size_t)q->count, st->s);
	}
	finish(c, m, st, MPS_STAGE_MAX, r, "cuMemsetAsync", false);
	return;
fail:
	if (m->slot != MPS_NO_SLOT)
		mps__reply(c, m->slot, r);
	else
		mps__defer_error(c, r, "cuMemsetAsync");
}

/* One side of an array copy into the driver's form: an array of the
 * client's, or device memory the client owns over the whole box. */
static CUresult array_side(struct mps_client *c, uint32_t array, const struct mps_copy3d_side *w,
			   const struct mps_copy3d *p, CUmemorytype *type, CUarray *arr, CUdeviceptr *dev)
{
	uint64_t start, span;
	CUresult r;

	if (array) {
		if (!mps__fwd_get(c, MPS_H_ARRAY, array, (void **)arr, &r))
			return r;
		*type = CU_MEMORYTYPE_ARRAY;
		return CUDA_SUCCESS;
	}
	span = mps_copy3d_span(w, p, &start);
	if (span == UINT64_MAX || w->addr > UINT64_MAX - start ||
	    (span && mps_memacct_check(&c->mem, w->addr + start, span) < 0))
		return CUDA_ERROR_INVALID_VALUE;
	*type = CU_MEMORYTYPE_DEVICE;
	*dev = (CUdeviceptr)w->addr;
	return CUDA_SUCCESS;
}

void mps__op_array_copy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_array_copy *q = (const void *)m;
	struct mps_sstream *st = NULL;
	CUDA_MEMCPY3D d;
	CUresult r;

	memset(&d, 0, sizeof(d));
	if (!q->src_array && !q->dst_array) {
		r = CUDA_ERROR_INVALID_VALUE;   /* the plain copies have their own ops */
		goto fail;
	}
	r = array_side(c, q->src_array, &q->p.src, &q->p, &d.srcMemoryType, &d.srcArray, &d.srcDevice);
	if (r == CUDA_SUCCESS)
		r = array_side(c, q->dst_array, &q->p.dst, &q->p, &d.dstMemoryType, &d.dstArray, &d.dstDevice);
	if (r != CUDA_SUCCESS)
		goto fail;
	mps_copy3d_geometry_out(&d, &q->p);
	if (q->src_array) {
		d.srcPitch = 0;
		d.srcHeight = 0;
	}
	if (q->dst_array) {
		d.dstPitch = 0;
		d.dstHeight = 0;
	}
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st)
		goto fail;
	if (q->p.width && q->p.height && q->p.depth)
		r = mps_drv.cuMemcpy3DAsync ? mps_drv.cuMemcpy3DAsync(&d, st->s) : CUDA_ERROR_NOT_SUPPORTED;
	finish(c, m, st, MPS_STAGE_MAX, r, "cuMemcpy3DAsync", false);
	return;
fail:
	if (m->slot != MPS_NO_SLOT)
		mps__reply(c, m->slot, r);
	else
		mps__defer_error(c, r, "cuMemcpy3DAsync");
}
