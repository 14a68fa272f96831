// SPDX-License-Identifier: MIT
/*
 * Copies and memsets. How a copy travels depends on where its host side is:
 *
 *   pinned host memory   "offset N of region R": the server's DMA reads or
 *                        writes the very pages the program uses, truly
 *                        asynchronously, with no extra copy;
 *   small pageable       host-to-device bytes ride inside the message, or
 *                        from 4 KiB on (asynchronous copies) go through a
 *                        small pinned ring shared with the server, whose
 *                        DMA reads them there: the server neither copies
 *                        them out of the message nor stages them again;
 *                        device-to-host bytes come back in the reply slot;
 *   large pageable       staged through a pinned staging region shared with
 *                        the server, in chunks, pipelined: the program's
 *                        bytes are copied into one chunk while the server's
 *                        DMA drains another (as the real driver does for
 *                        pageable memory).
 *
 * As in CUDA, an asynchronous copy from pageable memory returns once the
 * bytes are staged, and one to pageable memory returns when they have
 * arrived. A synchronous copy returns when it is complete, except where
 * the driver's does not wait either and the client can vouch for the
 * pointers (an upload from pageable memory onto a stream known idle, a
 * device-to-device copy, a memset of device memory, each within one
 * allocation of the program's own): those are sent with a fence, so that
 * the program's later work on every stream follows them, and return at
 * once, as if done, as far as anything the program can look at tells.
 * A 2D copy goes a row at a time, each row as a 1D copy between the same
 * kinds of memory. Captured into a graph, a copy on pageable memory
 * becomes a copy node through a staging buffer (gstage.c), which moves the
 * bytes when the graph runs.
 */
#include <string.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "common/atomics.h"
#include "common/bytering.h"
#include "common/log.h"

#define INLINE_MAX   (60u * 1024u)        /* host-to-device bytes sent in the message (< MPS_MSG_MAX) */
#define STAGE_CHUNK  (2u * 1024u * 1024u) /* bytes per staging chunk */
#define STAGE_COUNT  8u                   /* chunks (<= MPS_STAGE_MAX) */

_Static_assert(STAGE_COUNT <= MPS_STAGE_MAX, "staging chunks fit the region's state words");
_Static_assert(INLINE_MAX + 256 <= MPS_MSG_MAX, "inline bytes and their copy message fit one message");
_Static_assert(MPS_SLOT_DATA >= 4096, "small device-to-host copies fit a reply slot");

/* The small ring: bytes of asynchronous host-to-device copies of SRING_MIN
 * to INLINE_MAX bytes, handed out in order. A stretch is the program's
 * again once its copy's stream has been seen idle after the copy was sent
 * (mps__copy_settled: a synchronize, a copy to the host), which frameworks
 * do after each such upload; taken back in order. A copy that finds no
 * room rides in its message, as smaller ones do. */
#define SRING_BYTES   (1u << 20)
#define SRING_MIN     4096u
#define SRING_ENTRIES 64u

static struct {
	pthread_mutex_t lock;
	uint32_t handle;
	uint8_t *base;
	bool failed;                    /* could not be made: not tried again */
	uint64_t head, tail;            /* bytes handed out, taken back */
	unsigned int first, n;          /* oldest entry, entries held */
	struct {
		uint64_t end;           /* head once this copy had its bytes */
		uint32_t stream, ctx, seq;
		bool settled;           /* its stream was seen idle after it */
	} e[SRING_ENTRIES];
} sring = { .lock = PTHREAD_MUTEX_INITIALIZER };

void mps__copy_settled(uint32_t stream, uint32_t ctx, uint32_t seq)
{
	if (!mps_load_relaxed(&sring.n))
		return;
	pthread_mutex_lock(&sring.lock);
	for (unsigned int i = 0; i < sring.n; i++) {
		unsigned int k = (sring.first + i) % SRING_ENTRIES;

		if (sring.e[k].stream == stream && sring.e[k].ctx == ctx && (int32_t)(sring.e[k].seq - seq) <= 0)
			sring.e[k].settled = true;
	}
	while (sring.n && sring.e[sring.first].settled) {
		sring.tail = sring.e[sring.first].end;
		sring.first = (sring.first + 1) % SRING_ENTRIES;
		mps_store_relaxed(&sring.n, sring.n - 1);
	}
	pthread_mutex_unlock(&sring.lock);
}

/* Sends q (an asynchronous host-to-device copy of n bytes from src) with
 * its bytes in the small ring. CUDA_ERROR_NOT_SUPPORTED if it has no room
 * now (nothing sent). */
static CUresult sring_h2d(struct mps_msg_copy *q, uint32_t ctx, const void *src, size_t n)
{
	uint64_t start, end;
	CUresult r = CUDA_ERROR_NOT_SUPPORTED;
	void *base;

	pthread_mutex_lock(&sring.lock);
	if (!sring.base && !sring.failed) {
		if (mps__host_region(SRING_BYTES, &sring.handle, &base) == CUDA_SUCCESS)
			sring.base = base;
		else
			sring.failed = true;
	}
	if (!sring.base || sring.n == SRING_ENTRIES || !mps_bytering_fit(sring.head, sring.tail, SRING_BYTES, n, &end))
		goto out;
	start = end - n;
	memcpy(sring.base + start % SRING_BYTES, src, n);
	q->host_region = sring.handle;
	q->host_offset = start % SRING_BYTES;
	r = mps__post(MPS_OP_COPY, ctx, &q->hdr, sizeof(*q), NULL, 0);
	if (r == CUDA_SUCCESS) {
		unsigned int k = (sring.first + sring.n) % SRING_ENTRIES;

		sring.e[k].end = end;
		sring.e[k].stream = q->stream;
		sring.e[k].ctx = ctx;
		sring.e[k].seq = mps__last_seq();
		sring.e[k].settled = false;
		sring.head = end;
		mps_store_relaxed(&sring.n, sring.n + 1);
	}
out:
	pthread_mutex_unlock(&sring.lock);
	return r;
}

/* The staging region: one user at a time. */
static struct {
	pthread_mutex_t lock;
	uint32_t handle;
	uint8_t *base;
} stage = { .lock = PTHREAD_MUTEX_INITIALIZER };

static CUresult stage_setup(void)
{
	void *base;
	CUresult r;

	if (stage.base)
		return CUDA_SUCCESS;
	r = mps__host_region((size_t)STAGE_CHUNK * STAGE_COUNT, &stage.handle, &base);
	if (r == CUDA_SUCCESS)
		stage.base = base;
	return r;
}

/* Makes chunk k ours again: waits for the server's copy through it and
 * returns that copy's result. */
static CUresult chunk_reclaim(unsigned int k)
{
	uint32_t *st = &mps_conn.region->stage_state[k];
	CUresult r;

	if (mps_load_acquire(st) == MPS_STAGE_IDLE)
		return CUDA_SUCCESS;
	mps__stats_round_trip();
	r = mps__wait_reply(st, MPS_WAKE_STAGE(k), MPS_WAIT_STAGE);
	if (r != CUDA_SUCCESS)
		return r;
	r = (CUresult)mps_conn.region->stage_result[k];
	mps_store_relaxed(st, MPS_STAGE_IDLE);
	return r;
}

static CUresult chunk_send(unsigned int k, int kind, uint64_t dev, size_t len, uint32_t stream, uint32_t ctx)
{
	struct mps_msg_copy q = {
		.kind = (uint32_t)kind, .stream = stream, .host_region = stage.handle, .stage = k,
		.host_offset = (uint64_t)k * STAGE_CHUNK, .size = len,
	};
	CUresult r;

	if (kind == MPS_COPY_H2D)
		q.dst = dev;
	else
		q.src = dev;
	q.hdr.flags = MPS_COPY_STAGE;
	/* Handed to the server before it can possibly see the message. */
	mps_store_relaxed(&mps_conn.region->stage_state[k], MPS_STAGE_INFLIGHT);
	r = mps__post(MPS_OP_COPY, ctx, &q.hdr, sizeof(q), NULL, 0);
	if (r != CUDA_SUCCESS)
		mps_store_relaxed(&mps_conn.region->stage_state[k], MPS_STAGE_IDLE);
	return r;
}

static CUresult staged_h2d(uint64_t dst, const uint8_t *src, size_t n, uint32_t stream, uint32_t ctx, bool async)
{
	CUresult r, first = CUDA_SUCCESS;
	unsigned int k = 0;

	pthread_mutex_lock(&stage.lock);
	r = stage_setup();
	for (size_t off = 0; r == CUDA_SUCCESS && off < n; off += STAGE_CHUNK, k = (k + 1) % STAGE_COUNT) {
		size_t len = n - off < STAGE_CHUNK ? n - off : STAGE_CHUNK;

		r = chunk_reclaim(k);
		if (r != CUDA_SUCCESS && r != CUDA_ERROR_MPS_CONNECTION_FAILED) {
			if (first == CUDA_SUCCESS)
				first = r;   /* an earlier copy's failure: report it, go on */
			r = CUDA_SUCCESS;
		}
		if (r != CUDA_SUCCESS)
			break;
		mps__pcopy(stage.base + (size_t)k * STAGE_CHUNK, src + off, len);
		r = chunk_send(k, MPS_COPY_H2D, dst + off, len, stream, ctx);
	}
	/* A synchronous copy is complete only when every chunk has landed. */
	for (unsigned int i = 0; !async && i < STAGE_COUNT; i++) {
		CUresult cr = chunk_reclaim(i);

		if (first == CUDA_SUCCESS)
			first = cr;
	}
	pthread_mutex_unlock(&stage.lock);
	return r != CUDA_SUCCESS ? r : first;
}

static CUresult staged_d2h(uint8_t *dst, uint64_t src, size_t n, uint32_t stream, uint32_t ctx)
{
	size_t nch = (n + STAGE_CHUNK - 1) / STAGE_CHUNK;
	CUresult r, first = CUDA_SUCCESS;

	pthread_mutex_lock(&stage.lock);
	r = stage_setup();
	/* Chunks still draining an earlier asynchronous upload come back first. */
	for (unsigned int i = 0; r == CUDA_SUCCESS && i < STAGE_COUNT; i++) {
		CUresult cr = chunk_reclaim(i);

		if (cr == CUDA_ERROR_MPS_CONNECTION_FAILED)
			r = cr;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < nch && i < STAGE_COUNT; i++) {
		size_t len = n - i * STAGE_CHUNK < STAGE_CHUNK ? n - i * STAGE_CHUNK : STAGE_CHUNK;

		r = chunk_send((unsigned int)i, MPS_COPY_D2H, src + i * STAGE_CHUNK, len, stream, ctx);
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < nch; i++) {
		unsigned int k = (unsigned int)(i % STAGE_COUNT);
		size_t len = n - i * STAGE_CHUNK < STAGE_CHUNK ? n - i * STAGE_CHUNK : STAGE_CHUNK;
		CUresult cr = chunk_reclaim(k);

		if (cr == CUDA_ERROR_MPS_CONNECTION_FAILED) {
			r = cr;
			break;
		}
		if (cr != CUDA_SUCCESS && first == CUDA_SUCCESS)
			first = cr;
		if (cr == CUDA_SUCCESS)
			mps__pcopy(dst + i * STAGE_CHUNK, stage.base + (size_t)k * STAGE_CHUNK, len);
		if (i + STAGE_COUNT < nch) {
			size_t nlen = n - (i + STAGE_COUNT) * STAGE_CHUNK;

			r = chunk_send(k, MPS_COPY_D2H, src + (i + STAGE_COUNT) * STAGE_CHUNK,
				       nlen < STAGE_CHUNK ? nlen : STAGE_CHUNK, stream, ctx);
		}
	}
	/* On an error, leave no chunk in flight behind us. */
	for (unsigned int i = 0; r != CUDA_SUCCESS && r != CUDA_ERROR_MPS_CONNECTION_FAILED && i < STAGE_COUNT; i++)
		chunk_reclaim(i);
	pthread_mutex_unlock(&stage.lock);
	return r != CUDA_SUCCESS ? r : first;
}

/* Sends one MPS_OP_COPY; with async false, waits for its completion. */
static CUresult copy_msg(struct mps_msg_copy *q, uint32_t ctx, const void *inline_data, size_t inline_len,
			 bool async, void *slot_dst)
{
	struct mps_call call;
	CUresult r;

	if (async && !slot_dst)
		return mps__post(MPS_OP_COPY, ctx, &q->hdr, sizeof(*q), inline_data, inline_len);
	r = mps__call(MPS_OP_COPY, ctx, &q->hdr, sizeof(*q), inline_data, inline_len, &call);
	if (r == CUDA_SUCCESS && slot_dst) {
		if (call.s->len == q->size) {
			memcpy(slot_dst, call.s->data, (size_t)q->size);
			/* Answered once the stream got past the copy. */
			mps__stream_idle(q->stream, ctx, call.seq);
		} else {
			r = CUDA_ERROR_UNKNOWN;
		}
	}
	mps__call_end(&call);
	return r;
}

/* From pageable memory: the bytes are copied out of the program's memory
 * (into the message, the reply slot, the small ring or staging) before
 * this returns. */
static CUresult h2d_pageable(struct mps_msg_copy q, uint32_t ctx, const void *src, bool async)
{
	uint64_t dst = q.dst;
	size_t n = (size_t)q.size;

	if (!async && n <= INLINE_MAX && !mps__capture_active() && mps__stream_settled(q.stream, ctx) &&
	    mps__devmem_private(dst, n)) {
		/* Synchronous onto a stream whose earlier work is known done,
		 * into memory of the program's own: as the driver's, it returns
		 * once the bytes are staged (in the message), the DMA maybe
		 * still to come. The program's later work on any stream waits
		 * for it (a fence), as if it had been done on return. */
		q.host_region = MPS_HOST_INLINE;
		q.hdr.flags = MPS_COPY_FENCE;
		return copy_msg(&q, ctx, src, n, true, NULL);
	}
	if (!async && n <= MPS_SLOT_DATA) {
		/* Synchronous and small: the bytes go in the reply slot, which the
		 * server's DMA reads directly (registered memory); the answer
		 * comes once the stream got past the copy. */
		struct mps_call call;
		CUresult r;

		q.host_region = MPS_HOST_SLOT;
		r = mps__call_slot_in(MPS_OP_COPY, ctx, &q.hdr, sizeof(q), src, n, &call);
		if (r == CUDA_SUCCESS)
			mps__stream_idle(q.stream, ctx, call.seq);
		mps__call_end(&call);
		return r;
	}
	if (async && n >= SRING_MIN && n <= INLINE_MAX && !mps__capture_active()) {
		CUresult r = sring_h2d(&q, ctx, src, n);

		if (r != CUDA_ERROR_NOT_SUPPORTED)
			return r;
	}
	if (n <= INLINE_MAX) {
		q.host_region = MPS_HOST_INLINE;
		return copy_msg(&q, ctx, src, n, async, NULL);
	}
	return staged_h2d(dst, src, n, q.stream, ctx, async);
}

static CUresult h2d(uint64_t dst, const void *src, size_t n, uint32_t stream, uint32_t ctx, bool async)
{
	struct mps_msg_copy q = { .kind = MPS_COPY_H2D, .stream = stream, .dst = dst, .size = n };
	uint32_t posted;
	CUresult r;

	if (!src)
		return CUDA_ERROR_INVALID_VALUE;
	if (mps__hostmem_find(src, n, &q.host_region, &q.host_offset))
		return copy_msg(&q, ctx, NULL, 0, async, NULL);
	posted = mps__posted();
	r = h2d_pageable(q, ctx, src, async);
	if (r == CUDA_SUCCESS)
		mps__stream_uploaded(stream, ctx, dst, n, mps__posted() - posted);
	return r;
}

static CUresult d2h(void *dst, uint64_t src, size_t n, uint32_t stream, uint32_t ctx, bool async)
{
	struct mps_msg_copy q = { .kind = MPS_COPY_D2H, .stream = stream, .src = src, .size = n };

	if (!dst)
		return CUDA_ERROR_INVALID_VALUE;
	if (mps__hostmem_find(dst, n, &q.host_region, &q.host_offset))
		return copy_msg(&q, ctx, NULL, 0, async, NULL);
	/* To pageable memory a copy is synchronous, even an "async" one. */
	if (n <= MPS_SLOT_DATA) {
		q.host_region = MPS_HOST_SLOT;
		return copy_msg(&q, ctx, NULL, 0, false, dst);
	}
	return staged_d2h(dst, src, n, stream, ctx);
}

CUresult mps__copy_h2d(uint64_t dst, const void *src, size_t n, uint32_t stream, uint32_t ctx)
{
	return h2d(dst, src, n, stream, ctx, true);
}

CUresult mps__copy_d2h(void *dst, uint64_t src, size_t n, uint32_t stream, uint32_t ctx)
{
	return d2h(dst, src, n, stream, ctx, false);
}

/* A synchronous device-to-device copy does not wait for the device (the
 * driver's neither): between allocations of the program's own, known good
 * here, it is only sent, fenced so that the program's later work on any
 * stream follows it; otherwise the server's answer tells. */
static CUresult d2d(uint64_t dst, uint64_t src, size_t n, uint32_t stream, uint32_t ctx, bool async)
{
	struct mps_msg_copy q = { .kind = MPS_COPY_D2D, .stream = stream, .dst = dst, .src = src, .size = n };

	if (!async && !mps__capture_active() && mps__devmem_private(dst, n) && mps__devmem_private(src, n)) {
		q.hdr.flags = MPS_COPY_FENCE;
		async = true;
	}
	return copy_msg(&q, ctx, NULL, 0, async, NULL);
}

/* Resolves the stream, then copies in the direction given (or, for the
 * unified cuMemcpy*, the one the pointers say). */
enum dir { H2D, D2H, D2D, UNIFIED };

static CUresult copy(enum dir d, uint64_t dst, uint64_t src, size_t n, CUstream s, bool per_thread, bool async)
{
	uint32_t stream, ctx;
	CUresult r;

	r = mps__stream_resolve(s, per_thread, &stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	/* Managed memory on the device (migrate.c): what the CPU wrote goes
	 * there first, and the copy is the device's. */
	if (mps__migrate_on()) {
		if ((r = mps__migrate_to_device(stream, src, dst)) != CUDA_SUCCESS)
			return r;
		if (d == H2D && mps__migrate_has(src))
			d = D2D;
		else if (d == D2H && mps__migrate_has(dst))
			d = D2D;
	}
	if (d == UNIFIED) {
		bool ddev = mps__devmem_has(dst), sdev = mps__devmem_has(src);

		if (!ddev && !sdev) {
			/* Host to host: nothing for the GPU to do. */
			if (!dst || !src)
				return CUDA_ERROR_INVALID_VALUE;
			memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
			return CUDA_SUCCESS;
		}
		d = ddev && sdev ? D2D : ddev ? H2D : D2H;
	}
	if (async && d != D2D && mps__capture_active()) {
		/* Captured, pageable memory: a copy node through a staging
		 * buffer (gstage.c), made by hand in the capture's graph. The
		 * stream began a capture, or joined one (it waited for an event
		 * a capturing stream recorded), which only the server knows. */
		void *host = (void *)(uintptr_t)(d == H2D ? src : dst);
		uint64_t off;
		uint32_t rg;

		if (host && !mps__hostmem_find(host, n, &rg, &off) &&
		    (mps__capture_on(stream) || mps__capture_joined(s, per_thread)))
			return mps__capture_pageable_copy(s, per_thread, d == D2H, d == D2H ? src : dst, host, n);
	}
	/* A synchronous copy is a point where __managed__ variables meet
	 * (mvar.c): the program's changes go first, the device's come back. */
	if (!async && (r = mps__mvar_send(stream, ctx)) != CUDA_SUCCESS)
		return r;
	switch (d) {
	case H2D:
		r = h2d(dst, (const void *)(uintptr_t)src, n, stream, ctx, async);
		break;
	case D2H:
		r = d2h((void *)(uintptr_t)dst, src, n, stream, ctx, async);
		break;
	default:
		r = d2d(dst, src, n, stream, ctx, async);
		break;
	}
	if (!async && r == CUDA_SUCCESS) {
		mps__devout_take(stream, ctx);   /* a blocking copy empties the driver's printf buffer */
		r = mps__mvar_fetch(stream, ctx);
	}
	return r;
}

#define P(x) ((uint64_t)(uintptr_t)(x))

static CUresult memcpy_htod(CUdeviceptr d, const void *s, size_t n) { return copy(H2D, d, P(s), n, NULL, false, false); }
static CUresult memcpy_dtoh(void *d, CUdeviceptr s, size_t n) { return copy(D2H, P(d), s, n, NULL, false, false); }
static CUresult memcpy_dtod(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(D2D, d, s, n, NULL, false, false); }
static CUresult memcpy_unified(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(UNIFIED, d, s, n, NULL, false, false); }
static CUresult memcpy_htod_ptds(CUdeviceptr d, const void *s, size_t n) { return copy(H2D, d, P(s), n, NULL, true, false); }
static CUresult memcpy_dtoh_ptds(void *d, CUdeviceptr s, size_t n) { return copy(D2H, P(d), s, n, NULL, true, false); }
static CUresult memcpy_dtod_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(D2D, d, s, n, NULL, true, false); }
static CUresult memcpy_unified_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(UNIFIED, d, s, n, NULL, true, false); }

static CUresult memcpy_htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) { return copy(H2D, d, P(s), n, st, false, true); }
static CUresult memcpy_dtoh_async(void *d, CUdeviceptr s, size_t n, CUstream st) { return copy(D2H, P(d), s, n, st, false, true); }
static CUresult memcpy_dtod_async(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(D2D, d, s, n, st, false, true); }
static CUresult memcpy_unified_async(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(UNIFIED, d, s, n, st, false, true); }
static CUresult memcpy_htod_async_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream st) { return copy(H2D, d, P(s), n, st, true, true); }
static CUresult memcpy_dtoh_async_ptsz(void *d, CUdeviceptr s, size_t n, CUstream st) { return copy(D2H, P(d), s, n, st, true, true); }
static CUresult memcpy_dtod_async_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(D2D, d, s, n, st, true, true); }
static CUresult memcpy_unified_async_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(UNIFIED, d, s, n, st, true, true); }

/* One side of a 2D or 3D copy: its first byte (slice z of `height` rows),
 * and the direction it gives. */
static bool side3d(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t z, size_t pitch,
		   size_t height, uint64_t *at, int *kind)
{
	uint64_t base, row;

	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = P(host);
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		base = dev;
		break;
	default:
		return false;
	}
	if (z && height > (UINT64_MAX - y) / z)
		return false;
	row = z * height + y;
	if (!base || (row && pitch > (UINT64_MAX - x) / row) || row * pitch + x > UINT64_MAX - base)
		return false;
	*at = base + row * pitch + x;
	*kind = (int)type;
	return true;
}

static enum dir direction(int sk, int dk)
{
	if (sk == CU_MEMORYTYPE_HOST && dk == CU_MEMORYTYPE_DEVICE)
		return H2D;
	if (sk == CU_MEMORYTYPE_DEVICE && dk == CU_MEMORYTYPE_HOST)
		return D2H;
	if (sk == CU_MEMORYTYPE_DEVICE && dk == CU_MEMORYTYPE_DEVICE)
		return D2D;
	return UNIFIED;
}

/* height rows of width bytes, pitches apart: one copy when both sides are
 * contiguous, else a row at a time, each going the way a 1D copy between
 * the same kinds of memory goes. */
static CUresult copy_rows(enum dir d, uint64_t dst, size_t dpitch, uint64_t src, size_t spitch, size_t width,
			  size_t height, CUstream s, bool per_thread, bool async)
{
	CUresult r;

	if (height == 1 || (spitch == width && dpitch == width))
		return copy(d, dst, src, width * height, s, per_thread, async);
	for (size_t h = 0; h < height; h++) {
		r = copy(d, dst + h * dpitch, src + h * spitch, width, s, per_thread, async);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* cuMemcpy2D and its forms (copy_rows; arrays: array.c). */
static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream s, bool per_thread, bool async)
{
	uint64_t src, dst;
	int sk, dk;
	enum dir d;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
		CUDA_MEMCPY3D c3 = {
			.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
			.srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
			.srcPitch = p->srcPitch, .srcHeight = p->Height + p->srcY,
			.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
			.dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray,
			.dstPitch = p->dstPitch, .dstHeight = p->Height + p->dstY,
			.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = 1,
		};

		return mps__array_copy3d(&c3, s, per_thread, async);
	}
	if (!side3d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0, &src, &sk) ||
	    !side3d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0, p->dstPitch, 0, &dst, &dk))
		return CUDA_ERROR_INVALID_VALUE;
	/* As the driver: rows may not overlap. */
	if (p->Height > 1 && (p->srcPitch < p->WidthInBytes + p->srcXInBytes ||
			      p->dstPitch < p->WidthInBytes + p->dstXInBytes))
		return CUDA_ERROR_INVALID_VALUE;
	d = direction(sk, dk);
	if (!p->WidthInBytes || !p->Height)
		return copy(d, dst, src, 0, s, per_thread, async);
	return copy_rows(d, dst, p->dstPitch, src, p->srcPitch, p->WidthInBytes, p->Height, s, per_thread, async);
}

/* cuMemcpy3D and its forms: a slice at a time, each as a 2D copy (one copy
 * when both sides are contiguous throughout; arrays: array.c); levels of
 * detail must be zero. The reserved fields are not looked at: the driver
 * copies with reserved0 set. */
static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream s, bool per_thread, bool async)
{
	uint64_t src, dst;
	int sk, dk;
	enum dir d;
	CUresult r;

	if (!p || p->srcLOD || p->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
		return mps__array_copy3d(p, s, per_thread, async);
	if (!side3d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
		    p->srcHeight, &src, &sk) ||
	    !side3d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
		    p->dstHeight, &dst, &dk))
		return CUDA_ERROR_INVALID_VALUE;
	/* Rows may not overlap, nor slices. */
	if ((p->Height > 1 || p->Depth > 1) && (p->srcPitch < p->WidthInBytes + p->srcXInBytes ||
						p->dstPitch < p->WidthInBytes + p->dstXInBytes))
		return CUDA_ERROR_INVALID_VALUE;
	if (p->Depth > 1 && (p->srcHeight < p->Height + p->srcY || p->dstHeight < p->Height + p->dstY))
		return CUDA_ERROR_INVALID_VALUE;
	d = direction(sk, dk);
	if (!p->WidthInBytes || !p->Height || !p->Depth)
		return copy(d, dst, src, 0, s, per_thread, async);
	if (p->srcPitch == p->WidthInBytes && p->dstPitch == p->WidthInBytes &&
	    (p->Depth == 1 || (p->srcHeight == p->Height && p->dstHeight == p->Height)))
		return copy(d, dst, src, p->WidthInBytes * p->Height * p->Depth, s, per_thread, async);
	for (size_t z = 0; z < p->Depth; z++) {
		r = copy_rows(d, dst + z * p->dstHeight * p->dstPitch, p->dstPitch, src + z * p->srcHeight * p->srcPitch,
			      p->srcPitch, p->WidthInBytes, p->Height, s, per_thread, async);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

static CUresult memcpy_3d(const CUDA_MEMCPY3D *p) { return copy3d(p, NULL, false, false); }
static CUresult memcpy_3d_ptds(const CUDA_MEMCPY3D *p) { return copy3d(p, NULL, true, false); }
static CUresult memcpy_3d_async(const CUDA_MEMCPY3D *p, CUstream s) { return copy3d(p, s, false, true); }
static CUresult memcpy_3d_async_ptsz(const CUDA_MEMCPY3D *p, CUstream s) { return copy3d(p, s, true, true); }

static CUresult memcpy_2d(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, false, false); }
static CUresult memcpy_2d_ptds(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, true, false); }
static CUresult memcpy_2d_async(const CUDA_MEMCPY2D *p, CUstream s) { return copy2d(p, s, false, true); }
static CUresult memcpy_2d_async_ptsz(const CUDA_MEMCPY2D *p, CUstream s) { return copy2d(p, s, true, true); }

/* The bytes from a memset's first to its last: false if they overflow. */
static bool memset_span(const struct mps_msg_memset *q, uint64_t *span)
{
	uint64_t row, rows;

	if (__builtin_mul_overflow(q->count, (uint64_t)q->elem, &row))
		return false;
	if (q->height <= 1) {
		*span = row;
		return true;
	}
	return !__builtin_mul_overflow(q->pitch, q->height - 1, &rows) && !__builtin_add_overflow(rows, row, span);
}

/* Sends a memset on its stream. The stream is resolved first (a bad one is
 * an error even with nothing to set); then `empty` (nothing to set) is a
 * success and `bad` (a misaligned or overlapping shape) an error. */
static CUresult send_memset(struct mps_msg_memset *q, CUstream s, bool per_thread, bool async, bool empty, bool bad)
{
	struct mps_call call;
	uint64_t span;
	uint32_t ctx;
	CUresult r;

	r = mps__stream_resolve(s, per_thread, &q->stream, &ctx);
	if (r != CUDA_SUCCESS || empty)
		return r;
	if (bad)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = mps__migrate_to_device(q->stream, q->dst, 0)) != CUDA_SUCCESS)
		return r;
	/* The synchronous form does not wait for the device when it sets
	 * device memory (the driver's neither; pinned and managed memory it
	 * sets before returning): into an allocation of the program's own,
	 * known good here, it is only sent, fenced so that the program's
	 * later work on any stream follows it. */
	if (!async && !mps__capture_active() && memset_span(q, &span) && mps__devmem_private(q->dst, span)) {
		q->hdr.flags = MPS_COPY_FENCE;
		async = true;
	}
	if (async)
		return mps__post(MPS_OP_MEMSET, ctx, &q->hdr, sizeof(*q), NULL, 0);
	r = mps__call(MPS_OP_MEMSET, ctx, &q->hdr, sizeof(*q), NULL, 0, &call);
	mps__call_end(&call);
	return r;
}

/* count elements of elem bytes. */
static CUresult memset_any(CUdeviceptr dst, uint32_t value, unsigned int elem, size_t count, CUstream s,
			   bool per_thread, bool async)
{
	struct mps_msg_memset q = { .elem = elem, .dst = dst, .count = count, .value = value };

	return send_memset(&q, s, per_thread, async, count == 0, dst % elem != 0);
}

/* 2D: height rows of width elements, pitch bytes apart. */
static CUresult memset2d_any(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned int elem, size_t width,
			     size_t height, CUstream s, bool per_thread, bool async)
{
	struct mps_msg_memset q = { .elem = elem, .dst = dst, .count = width, .value = value, .pitch = pitch,
				    .height = height };

	return send_memset(&q, s, per_thread, async, width == 0 || height == 0,
			   dst % elem || (height > 1 && (pitch < width * elem || pitch % elem)));
}

/* Each width's plain and per-thread-stream forms, synchronous and async. */
#define MEMSET(name, T, elem, per_thread)                                                              \
	static CUresult name(CUdeviceptr d, T v, size_t n)                                             \
	{                                                                                              \
		return memset_any(d, v, elem, n, NULL, per_thread, false);                             \
	}                                                                                              \
	static CUresult name##_async(CUdeviceptr d, T v, size_t n, CUstream s)                         \
	{                                                                                              \
		return memset_any(d, v, elem, n, s, per_thread, true);                                 \
	}
#define MEMSET2D(name, T, elem, per_thread)                                                            \
	static CUresult name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h)                     \
	{                                                                                              \
		return memset2d_any(d, pitch, v, elem, w, h, NULL, per_thread, false);                 \
	}                                                                                              \
	static CUresult name##_async(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) \
	{                                                                                              \
		return memset2d_any(d, pitch, v, elem, w, h, s, per_thread, true);                     \
	}
MEMSET(memset_d8, unsigned char, 1, false)
MEMSET(memset_d16, unsigned short, 2, false)
MEMSET(memset_d32, unsigned int, 4, false)
MEMSET(memset_d8_pt, unsigned char, 1, true)
MEMSET(memset_d16_pt, unsigned short, 2, true)
MEMSET(memset_d32_pt, unsigned int, 4, true)
MEMSET2D(memset2d_d8, unsigned char, 1, false)
MEMSET2D(memset2d_d16, unsigned short, 2, false)
MEMSET2D(memset2d_d32, unsigned int, 4, false)
MEMSET2D(memset2d_d8_pt, unsigned char, 1, true)
MEMSET2D(memset2d_d16_pt, unsigned short, 2, true)
MEMSET2D(memset2d_d32_pt, unsigned int, 4, true)
#undef MEMSET
#undef MEMSET2D


const struct mps_impl mps__copy_api[] = {
	MPS_IMPL(cuMemcpyHtoD_v2, memcpy_htod),
	MPS_IMPL(cuMemcpyDtoH_v2, memcpy_dtoh),
	MPS_IMPL(cuMemcpyDtoD_v2, memcpy_dtod),
	MPS_IMPL(cuMemcpy, memcpy_unified),
	MPS_IMPL_AS(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2, memcpy_htod_ptds),
	MPS_IMPL_AS(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2, memcpy_dtoh_ptds),
	MPS_IMPL_AS(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2, memcpy_dtod_ptds),
	MPS_IMPL_AS(cuMemcpy_ptds, cuMemcpy, memcpy_unified_ptds),
	MPS_IMPL(cuMemcpyHtoDAsync_v2, memcpy_htod_async),
	MPS_IMPL(cuMemcpyDtoHAsync_v2, memcpy_dtoh_async),
	MPS_IMPL(cuMemcpyDtoDAsync_v2, memcpy_dtod_async),
	MPS_IMPL(cuMemcpyAsync, memcpy_unified_async),
	MPS_IMPL_AS(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2, memcpy_htod_async_ptsz),
	MPS_IMPL_AS(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2, memcpy_dtoh_async_ptsz),
	MPS_IMPL_AS(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2, memcpy_dtod_async_ptsz),
	MPS_IMPL_AS(cuMemcpyAsync_ptsz, cuMemcpyAsync, memcpy_unified_async_ptsz),
	MPS_IMPL(cuMemcpy3D_v2, memcpy_3d),
	MPS_IMPL_AS(cuMemcpy3D_v2_ptds, cuMemcpy3D_v2, memcpy_3d_ptds),
	MPS_IMPL(cuMemcpy3DAsync_v2, memcpy_3d_async),
	MPS_IMPL_AS(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2, memcpy_3d_async_ptsz),
	MPS_IMPL(cuMemcpy2D_v2, memcpy_2d),
	MPS_IMPL_AS(cuMemcpy2D_v2_ptds, cuMemcpy2D_v2, memcpy_2d_ptds),
	MPS_IMPL(cuMemcpy2DUnaligned_v2, memcpy_2d),
	MPS_IMPL_AS(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2, memcpy_2d_ptds),
	MPS_IMPL(cuMemcpy2DAsync_v2, memcpy_2d_async),
	MPS_IMPL_AS(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2, memcpy_2d_async_ptsz),
	MPS_IMPL(cuMemsetD8_v2, memset_d8),
	MPS_IMPL(cuMemsetD16_v2, memset_d16),
	MPS_IMPL(cuMemsetD32_v2, memset_d32),
	MPS_IMPL_AS(cuMemsetD8_v2_ptds, cuMemsetD8_v2, memset_d8_pt),
	MPS_IMPL_AS(cuMemsetD16_v2_ptds, cuMemsetD16_v2, memset_d16_pt),
	MPS_IMPL_AS(cuMemsetD32_v2_ptds, cuMemsetD32_v2, memset_d32_pt),
	MPS_IMPL(cuMemsetD8Async, memset_d8_async),
	MPS_IMPL(cuMemsetD16Async, memset_d16_async),
	MPS_IMPL(cuMemsetD32Async, memset_d32_async),
	MPS_IMPL_AS(cuMemsetD8Async_ptsz, cuMemsetD8Async, memset_d8_pt_async),
	MPS_IMPL_AS(cuMemsetD16Async_ptsz, cuMemsetD16Async, memset_d16_pt_async),
	MPS_IMPL_AS(cuMemsetD32Async_ptsz, cuMemsetD32Async, memset_d32_pt_async),
	MPS_IMPL(cuMemsetD2D8_v2, memset2d_d8),
	MPS_IMPL(cuMemsetD2D16_v2, memset2d_d16),
	MPS_IMPL(cuMemsetD2D32_v2, memset2d_d32),
	MPS_IMPL_AS(cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2, memset2d_d8_pt),
	MPS_IMPL_AS(cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2, memset2d_d16_pt),
	MPS_IMPL_AS(cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2, memset2d_d32_pt),
	MPS_IMPL(cuMemsetD2D8Async, memset2d_d8_async),
	MPS_IMPL(cuMemsetD2D16Async, memset2d_d16_async),
	MPS_IMPL(cuMemsetD2D32Async, memset2d_d32_async),
	MPS_IMPL_AS(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, memset2d_d8_pt_async),
	MPS_IMPL_AS(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, memset2d_d16_pt_async),
	MPS_IMPL_AS(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, memset2d_d32_pt_async),
	MPS_IMPL_END
};
