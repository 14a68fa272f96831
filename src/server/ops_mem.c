// SPDX-License-Identifier: MIT
/*
 * Device memory and pinned host memory. Every device allocation is charged
 * to the client before it is made (memacct.h: the one place a per-client
 * limit applies) and recorded, so copies can be checked and whatever the
 * client leaves behind is freed when it goes.
 *
 * Pinned host memory (cuMemAllocHost / cuMemHostAlloc) is a sealed memfd the
 * server maps and registers with the driver; the client maps the same fd,
 * preferably at the same address, so the one buffer is the program's host
 * memory, the server's DMA source or target, and (through unified
 * addressing) the kernels' zero-copy view, all at once.
 *
 * A placed allocation (placement.h) is a mapping the driver knows no
 * allocation of, so its cuMemFreeAsync is the server's: an event recorded
 * on the stream, the allocation held (charged, its granules not given
 * again) until the event has passed, then unmapped — looked at whenever
 * the client allocates, frees or asks for its memory, waited for where an
 * allocation would not fit otherwise and when the client goes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/log.h"
#include "common/shm.h"
#include "common/sock.h"
#include "server/driver.h"
#include "server/ipc.h"
#include "server/placement.h"
#include "server/replay.h"
#include "server/server.h"
#include "server/streams.h"

#define HOST_ALLOC_MAX (1ull << 40)   /* refuse absurd requests outright */

struct mps_held_free {
	struct mps_held_free *next;
	CUevent reached;      /* recorded on the stream after the free's place */
	uint64_t base, charged;
	int device;           /* the memory's */
	int stream_device;    /* the stream's, and the event's */
};

/* Charges an allocation to the client; past its limit, logs and answers
 * the message with CUDA_ERROR_OUT_OF_MEMORY, and returns false. */
static bool charge(struct mps_client *c, const struct mps_msg *m, int device, uint64_t bytes)
{
	if (mps_memacct_charge(&c->mem, device, bytes) == 0)
		return true;
	/* The graphs the server made of its launches (replay.h, charged to
	 * it) give way to its own memory. */
	if (mps_replay_shed(c) && mps_memacct_charge(&c->mem, device, bytes) == 0)
		return true;
	/* And so do its frees still on their way down its streams. */
	if (c->held_frees) {
		mps__held_frees_reap(c, true);
		if (mps_memacct_charge(&c->mem, device, bytes) == 0)
			return true;
	}
	mps_log_info("client %d: allocation of %llu bytes refused by its memory limit", (int)c->pid,
		     (unsigned long long)bytes);
	mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
	return false;
}

/* A client's allocation at a random place (placement.h), with the pitch
 * cuMemAllocPitch would give (rows of 512-byte multiples); *mapped is what
 * it takes. CUDA_ERROR_NOT_SUPPORTED: the driver is to place it. */
static CUresult place(struct mps_client *c, int device, const struct mps_msg_mem_alloc *q, uint64_t bytes,
		      CUdeviceptr *p, size_t *pitch, uint64_t *mapped)
{
	size_t room = SIZE_MAX, total = SIZE_MAX;
	bool clearing = false;
	CUresult r;

	if (!mps_place_on(device))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (q->elem) {
		*pitch = (size_t)((q->width + 511) / 512 * 512);
		bytes = (uint64_t)*pitch * q->height;
	}
	/* Spare granules in a new chunk stay within the client's limit. */
	mps_memacct_view(&c->mem, device, &room, &total);
	r = mps_place_alloc(device, c->id, bytes, room, p, mapped, &clearing);
	if (clearing)   /* its work waits for the new memory's clear */
		mps_stream_after_clear(c, device);
	return r;
}

void mps__op_mem_alloc(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_mem_alloc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	CUdeviceptr p = 0;
	size_t pitch = 0;
	uint64_t bytes, mapped = 0, seen;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (q->elem) {
		if ((q->elem != 4 && q->elem != 8 && q->elem != 16) || !q->width || !q->height ||
		    q->height > UINT64_MAX / (q->width + 512)) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
			return;
		}
		/* Charge the most the pitch can round up to; corrected below. */
		bytes = (q->width + 511) / 512 * 512 * q->height;
	} else {
		bytes = q->size;
	}
	if (bytes == 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	mps__held_frees_reap(c, false);
	if (!charge(c, m, x->device, bytes))
		return;
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = place(c, x->device, q, bytes, &p, &pitch, &mapped);
	if (r == CUDA_ERROR_OUT_OF_MEMORY && c->held_frees) {   /* the device is full: they may make room */
		mps__held_frees_reap(c, true);
		r = mps__bind_device(c, x->device);
		if (r == CUDA_SUCCESS)
			r = place(c, x->device, q, bytes, &p, &pitch, &mapped);
	}
	if (r == CUDA_ERROR_NOT_SUPPORTED) {   /* not placed here: the driver places it */
		if (q->elem)
			r = mps_drv.cuMemAllocPitch(&p, &pitch, (size_t)q->width, (size_t)q->height, q->elem);
		else
			r = mps_drv.cuMemAlloc(&p, (size_t)bytes);
	}
	if (r != CUDA_SUCCESS) {
		mps_memacct_uncharge(&c->mem, x->device, bytes);
		mps__reply(c, m->slot, r);
		return;
	}
	/* What the program sees: what it asked for, or the rows of its
	 * pitch. */
	seen = q->elem ? (uint64_t)pitch * q->height : bytes;
	if (q->elem || mapped) {
		/* Charge what the pitch, or the mapping (placement.h: whole
		 * granules, all of it the client's), really came to instead of
		 * the estimate. */
		uint64_t used = mapped ? mapped : seen;

		mps_memacct_uncharge(&c->mem, x->device, bytes);
		bytes = used;
		if (mps_memacct_charge(&c->mem, x->device, bytes) < 0) {
			mps_place_mem_free(p, true);
			mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
			return;
		}
	}
	if (mps_memacct_add_charged(&c->mem, p, seen, bytes, MPS_MEM_DEVICE, x->device, x->handle) < 0) {
		mps_log_error("client %d: bookkeeping failed for allocation %#llx", (int)c->pid, (unsigned long long)p);
		mps_place_mem_free(p, true);
		mps_memacct_uncharge(&c->mem, x->device, bytes);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	s->val[0] = p;
	s->val[1] = pitch;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

struct sync_arg {
	struct mps_client *c;
	int device;   /* -1: every device */
};

/* Waits for the work of context obj's streams (on arg's device). */
static void sync_streams(void *obj, void *arg)
{
	const struct sync_arg *a = arg;
	struct mps_sctx *x = obj;

	if (a->device >= 0 && x->device != a->device)
		return;
	mps__bind_device(a->c, x->device);
	for (struct mps_sstream *t = x->streams; t; t = t->next)
		mps_drv.cuStreamSynchronize(t->s);
}

/* Waits for the client's work on device (-1: every device): what cuMemFree
 * waits for in a process of its own. Other clients' work goes on. */
static void sync_client(struct mps_client *c, int device)
{
	struct sync_arg a = { c, device };

	mps_handles_foreach(&c->handles, MPS_H_CTX, sync_streams, &a);
}

void mps__op_mem_free(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ptr *q = (const void *)m;
	struct mps_mrange r;
	CUresult cr;

	mps__held_frees_reap(c, false);
	if (mps__free_pool_ptr(c, q->ptr)) {
		mps__reply(c, m->slot, CUDA_SUCCESS);
		return;
	}
	if (mps_memacct_remove(&c->mem, q->ptr, MPS_MEM_DEVICE, &r) < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	cr = mps__bind_device(c, r.device);
	if (cr == CUDA_SUCCESS && !mps_ipc_orphan_mem(c, r.base)) {   /* others may still have it open */
		if (mps_place_is((CUdeviceptr)r.base))
			sync_client(c, r.device);   /* an unmap does not wait for it (placement.h) */
		cr = mps_place_mem_free((CUdeviceptr)r.base, true);
	}
	mps__reply(c, m->slot, cr);
}

bool mps__free_pool_ptr(struct mps_client *c, uint64_t ptr)
{
	struct mps_mrange r;

	if (mps_memacct_remove(&c->mem, ptr, MPS_MEM_POOL_PTR, &r) == 0)
		mps_ipc_close_pool_ptr(c, r.base, true);
	else if (mps_memacct_remove(&c->mem, ptr, MPS_MEM_POOL_PTR_DRIVER, &r) == 0)
		mps_ipc_close_pool_ptr(c, r.base, false);
	else
		return false;
	return true;
}

/* Stream-ordered allocation, from the client's current pool of the device
 * (ops_pool.c). The memory is the client's (charged, checked, freed with it)
 * from the moment the pointer is handed out; freeing removes it at once, so
 * no later message can name it, while work already queued before the free
 * still runs. */
void mps__op_mem_alloc_async(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_mem_async *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sstream *st;
	CUdeviceptr p = 0;
	CUresult r;

	st = mps_stream_for_work(c, m, q->stream, &r);
	if (st)
		r = mps__pool_alloc(c, st, NULL, q->value, &p);
	s->val[0] = p;
	mps__reply(c, m->slot, r);
}

static CUresult hold_free(struct mps_client *c, struct mps_sstream *st, const struct mps_mrange *r);

void mps__op_mem_free_async(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_mem_async *q = (const void *)m;
	const struct mps_mrange *rg = mps_memacct_find(&c->mem, q->value);
	struct mps_sstream *st;
	struct mps_mrange r;
	CUresult cr;

	mps__held_frees_reap(c, false);
	if (mps__free_pool_ptr(c, q->value))
		return;
	if (!rg || rg->base != q->value || rg->kind != MPS_MEM_DEVICE) {
		mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "cuMemFreeAsync");
		return;
	}
	st = mps_stream_for_work(c, m, q->stream, &cr);
	if (!st) {
		mps__defer_error(c, cr, "cuMemFreeAsync");
		return;
	}
	if (mps_stream_capturing(c, st)) {
		/* Captured, a free is a graph's free node, of graph memory
		 * only: the driver's answer, and its effect on the capture;
		 * memory it refuses (cuMemAlloc's, placed or not) stays the
		 * client's. */
		cr = mps__bind_device(c, rg->device);
		if (cr == CUDA_SUCCESS)
			cr = mps_drv.cuMemFreeAsync((CUdeviceptr)q->value, st->s);
		if (cr == CUDA_SUCCESS)
			mps_memacct_remove(&c->mem, q->value, MPS_MEM_DEVICE, &r);
		mps__defer_error(c, cr, "cuMemFreeAsync");
		return;
	}
	mps_memacct_remove(&c->mem, q->value, MPS_MEM_DEVICE, &r);
	cr = mps__bind_device(c, r.device);
	if (cr != CUDA_SUCCESS || mps_ipc_orphan_mem(c, r.base)) {   /* others may have imported it */
		mps__defer_error(c, cr, "cuMemFreeAsync");
		return;
	}
	if (mps_place_is((CUdeviceptr)r.base))
		cr = hold_free(c, st, &r);
	else
		cr = mps_drv.cuMemFreeAsync((CUdeviceptr)r.base, st->s);
	mps__defer_error(c, cr, "cuMemFreeAsync");
}

/* Placed allocation r (removed from the client's ranges) freed on st in
 * stream order: held, still charged, until st reaches this point (and so
 * everything st waits for), since an unmap does not wait for the work
 * that uses the memory (placement.h) and its granules, given again, would
 * meet that work. Without an event, the stream is waited for here. */
static CUresult hold_free(struct mps_client *c, struct mps_sstream *st, const struct mps_mrange *r)
{
	struct mps_held_free *h = calloc(1, sizeof(*h));
	CUresult cr = h ? mps__bind_device(c, st->ctx->device) : CUDA_ERROR_OUT_OF_MEMORY;

	if (cr == CUDA_SUCCESS)
		cr = mps_drv.cuEventCreate(&h->reached, CU_EVENT_DISABLE_TIMING);
	if (cr == CUDA_SUCCESS) {
		cr = mps_drv.cuEventRecord(h->reached, st->s);
		if (cr != CUDA_SUCCESS)
			mps_drv.cuEventDestroy(h->reached);
	}
	if (cr != CUDA_SUCCESS) {
		free(h);
		cr = mps_drv.cuStreamSynchronize(st->s);
		if (cr == CUDA_SUCCESS)
			cr = mps__bind_device(c, r->device);
		return cr == CUDA_SUCCESS ? mps_place_mem_free((CUdeviceptr)r->base, true) : cr;
	}
	h->base = r->base;
	h->device = r->device;
	h->stream_device = st->ctx->device;
	/* Charged again (removing the range gave its bytes back): a limit
	 * lowered meanwhile lets it go uncharged. */
	h->charged = mps_memacct_charge(&c->mem, r->device, r->charged) == 0 ? r->charged : 0;
	h->next = c->held_frees;
	c->held_frees = h;
	return CUDA_SUCCESS;
}

void mps__held_frees_reap(struct mps_client *c, bool wait)
{
	struct mps_held_free **pp = &c->held_frees, *h;

	while ((h = *pp)) {
		CUresult r = mps__bind_device(c, h->stream_device);

		if (r == CUDA_SUCCESS)
			r = wait ? mps_drv.cuEventSynchronize(h->reached) : mps_drv.cuEventQuery(h->reached);
		if (r == CUDA_ERROR_NOT_READY) {
			pp = &h->next;
			continue;
		}
		/* Reached; or the device failed, and nothing of the client's
		 * runs there any more (the unmap then waits for the device). */
		*pp = h->next;
		mps_drv.cuEventDestroy(h->reached);
		if (mps__bind_device(c, h->device) == CUDA_SUCCESS)
			mps_place_mem_free((CUdeviceptr)h->base, r == CUDA_SUCCESS);
		mps_memacct_uncharge(&c->mem, h->device, h->charged);
		free(h);
	}
}

void mps__op_mem_info(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	size_t fr = 0, total = 0;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	mps__held_frees_reap(c, false);
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemGetInfo(&fr, &total);
	if (r == CUDA_SUCCESS)
		mps_memacct_view(&c->mem, x->device, &fr, &total);
	s->val[0] = fr;
	s->val[1] = total;
	mps__reply(c, m->slot, r);
}

/* The allocation holding ptr, in range r of the client's: the range itself,
 * or in an address reservation the mapping there (-ENOENT if none). */
static int span_of(struct mps_client *c, const struct mps_mrange *r, uint64_t ptr, uint64_t *base, uint64_t *size)
{
	const struct mps_vmap *v;

	if (r->kind != MPS_MEM_VA) {
		*base = r->base;
		*size = r->size;
		return 0;
	}
	v = mps_vmm_map_find(&c->vmm, ptr);
	if (!v)
		return -ENOENT;
	*base = v->base;
	*size = v->size;
	return 0;
}

void mps__op_mem_range(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ptr *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const struct mps_mrange *r = mps_memacct_find(&c->mem, q->ptr);

	uint64_t base, size;

	/* Only the client's own memory is visible to it. */
	if (!r || r->kind == MPS_MEM_HOST || span_of(c, r, q->ptr, &base, &size) < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_FOUND);
		return;
	}
	s->val[0] = base;
	s->val[1] = size;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_pointer_attr(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_pointer_attr *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_attr_value *out = (struct mps_attr_value *)s->data;
	const struct mps_mrange *rg = mps_memacct_find(&c->mem, q->ptr);
	uint32_t n = q->count;

	if (n > MPS_POINTER_ATTRS_MAX) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	uint64_t base = 0, size = 0;
	unsigned int managed = 0;

	if (rg && span_of(c, rg, q->ptr, &base, &size) < 0)
		rg = NULL;   /* reserved, but nothing mapped there */
	/* A module's __managed__ variable: managed memory, which the program's
	 * CPU reaches at the same address (the client keeps it there,
	 * client/mvar.c). Asked of the driver only where an answer needs it. */
	for (uint32_t i = 0; rg && rg->kind == MPS_MEM_GLOBAL && i < n; i++) {
		if (q->attr[i] != CU_POINTER_ATTRIBUTE_IS_MANAGED && q->attr[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER)
			continue;
		if (mps__bind_device(c, rg->device) != CUDA_SUCCESS ||
		    mps_drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)q->ptr) !=
			    CUDA_SUCCESS)
			managed = 0;
		break;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct mps_attr_value *v = &out[i];
		uint64_t big = 0;

		memset(v, 0, sizeof(*v));
		if (!rg) {
			v->result = CUDA_ERROR_INVALID_VALUE;
			continue;
		}
		switch (q->attr[i]) {
		case CU_POINTER_ATTRIBUTE_CONTEXT:
			/* The client knows its contexts by handle. */
			v->value = rg->kind == MPS_MEM_DEVICE ? rg->ctx : 0;
			break;
		case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
			v->value = rg->kind == MPS_MEM_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
			v->value = q->ptr;
			break;
		case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			/* Device memory has none; for host memory the client knows
			 * its own address; managed memory's is its own. */
			v->value = managed ? q->ptr : 0;
			v->result = rg->kind == MPS_MEM_HOST || managed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
			int ord = mps__client_ordinal(c, rg->device);

			v->value = ord < 0 ? 0 : (uint64_t)ord;
			v->result = ord < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
			break;
		}
		case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
			v->value = base;
			break;
		case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
			v->value = size;
			break;
		case CU_POINTER_ATTRIBUTE_IS_MANAGED:
			v->value = managed;
			break;
		case CU_POINTER_ATTRIBUTE_MAPPED:
			v->value = 1;
			break;
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
			/* A placed allocation is a mapping (placement.h): the driver
			 * would name its granule and refuse it legacy IPC, which the
			 * server gives it. */
			if (rg->kind == MPS_MEM_DEVICE && mps_place_id((CUdeviceptr)q->ptr, &big)) {
				v->value = q->attr[i] == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE ? 1 : big;
				break;
			}
			/* fall through */
		case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			/* Plain values the driver knows; ask it, for this validated pointer. */
			v->result = mps__bind_device(c, rg->device);
			if (v->result == CUDA_SUCCESS)
				v->result = mps_drv.cuPointerGetAttribute(&big, (CUpointer_attribute)q->attr[i],
									  (CUdeviceptr)q->ptr);
			if (q->attr[i] == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)   /* as the client's handle */
				big = big ? mps_obj_find(c, MPS_H_POOL, (void *)(uintptr_t)big) : 0;
			v->value = big;
			break;
		default:
			v->result = CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	s->len = n * (uint32_t)sizeof(*out);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

/* Pinned host memory of the client's in fd (size bytes, sealed against
 * shrinking): mapped here (at hint if given and free), registered with the
 * driver, charged, named. Takes fd (closed on failure). NULL and *err. */
static struct mps_shost *host_adopt(struct mps_client *c, int fd, size_t size, void *hint, int device,
				    CUdeviceptr *dp, CUresult *err)
{
	struct mps_shost *h;
	CUresult r;

	*err = CUDA_ERROR_OUT_OF_MEMORY;
	if (mps_memacct_charge_host(&c->mem, size) < 0) {
		mps_log_warn("client %d: refused %zu bytes of pinned host memory: it holds %llu, may hold %llu; "
			     "all clients hold %llu of %llu", (int)c->pid, size,
			     (unsigned long long)c->mem.host_bytes, (unsigned long long)c->mem.host_limit,
			     (unsigned long long)mps_srv.host_pool.used, (unsigned long long)mps_srv.host_pool.limit);
		close(fd);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		goto err_close;
	h->fd = fd;
	h->addr = hint ? mps_shm_map(fd, size, hint) : NULL;
	if (!h->addr)
		h->addr = mps_place_host_map(fd, size);
	if (!h->addr) {
		mps_log_warn("client %d: cannot map %zu bytes of its pinned host memory: %s", (int)c->pid, size,
			     strerror(errno));
		goto err_free;
	}
	h->size = size;
	r = mps__bind_device(c, device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemHostRegister(h->addr, size,
					      CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r != CUDA_SUCCESS) {
		mps_log_warn("client %d: cannot pin %zu bytes of host memory: %s", (int)c->pid, size,
			     mps_driver_errname(r));
		goto err_unmap;
	}
	if (mps_drv.cuMemHostGetDevicePointer(dp, h->addr, 0) != CUDA_SUCCESS)
		*dp = (CUdeviceptr)(uintptr_t)h->addr;
	h->handle = mps_handle_new(&c->handles, MPS_H_HOST, h);
	if (!h->handle)
		goto err_unregister;
	if (mps_memacct_add(&c->mem, *dp, size, MPS_MEM_HOST, device, h->handle) < 0)
		goto err_handle;
	*err = CUDA_SUCCESS;
	return h;

err_handle:
	mps_handle_del(&c->handles, h->handle);
err_unregister:
	mps_drv.cuMemHostUnregister(h->addr);
err_unmap:
	munmap(h->addr, size);
err_free:
	free(h);
err_close:
	close(fd);
	mps_memacct_uncharge_host(&c->mem, size);
	return NULL;
}

static void host_free(struct mps_client *c, struct mps_shost *h);

void mps__op_host_alloc(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_host_alloc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC };
	struct mps_sctx *x = mps__msg_ctx(c, m);
	int device = x ? x->device : 0;   /* pinned memory is portable: any device will do */
	struct mps_shost *h;
	CUdeviceptr dp = 0;
	size_t size;
	CUresult r;
	int fd;

	if (q->size == 0 || q->size > HOST_ALLOC_MAX) {
		mps__reply(c, m->slot, q->size ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE);
		return;
	}
	size = (size_t)((q->size + 4095) & ~4095ull);
	fd = mps_shm_create("openmps-host", size);
	if (fd < 0) {
		mps_log_warn("client %d: no shared memory for %zu bytes of pinned host memory: %s", (int)c->pid, size,
			     strerror(-fd));
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	h = host_adopt(c, fd, size, NULL, device, &dp, &r);
	if (!h) {
		mps__reply(c, m->slot, r);
		return;
	}
	fm.region = h->handle;
	fm.size = size;
	if (mps_sock_send(c->sock, &fm, sizeof(fm), h->fd) < 0) {
		if (!mps_load_relaxed(&c->dead))
			mps_log_warn("client %d: cannot send its pinned host memory: %s", (int)c->pid, strerror(errno));
		host_free(c, h);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	s->val[0] = h->handle;
	s->val[1] = (uint64_t)(uintptr_t)h->addr;
	s->val[2] = size;
	s->val[3] = dp;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

/* cuMemHostRegister: the client moved the pages into a sealed memfd of its
 * own, sent ahead; the server maps it, at the client's address if that is
 * free here (so the device address is the program's), and pins it. */
void mps__op_host_register(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_host_register *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	int fd = mps__take_fd(c);   /* first, whatever the answer: it must not linger */
	struct mps_shost *h;
	CUdeviceptr dp = 0;
	long long have;
	CUresult r;

	if (fd < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	have = mps_shm_sealed_size(fd);
	if (!q->size || q->size % 4096 || q->addr % 4096 || q->size > HOST_ALLOC_MAX || have < 0 ||
	    (unsigned long long)have < q->size) {
		mps_log_info("client %d: a host registration of %llu bytes without a sealed memfd that size",
			     (int)c->pid, (unsigned long long)q->size);
		close(fd);
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	h = host_adopt(c, fd, (size_t)q->size, (void *)(uintptr_t)q->addr, x ? x->device : 0, &dp, &r);
	if (!h) {
		mps__reply(c, m->slot, r);
		return;
	}
	s->val[0] = h->handle;
	s->val[1] = (uint64_t)(uintptr_t)h->addr;
	s->val[2] = q->size;
	s->val[3] = dp;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

/* Forgets the region's device address: whatever range carries its handle. */
static void host_unrange(struct mps_client *c, struct mps_shost *h)
{
	const struct mps_mrange *rg;

	for (size_t i = 0; i < c->mem.n; i++) {
		rg = &c->mem.r[i];
		if (rg->kind == MPS_MEM_HOST && rg->ctx == h->handle) {
			mps_memacct_remove(&c->mem, rg->base, MPS_MEM_HOST, NULL);
			break;
		}
	}
}

static void host_free(struct mps_client *c, struct mps_shost *h)
{
	if (!h->freed)
		host_unrange(c, h);
	mps__bind_device(c, mps__cur_device() < 0 ? 0 : mps__cur_device());
	mps_drv.cuMemHostUnregister(h->addr);
	munmap(h->addr, h->size);
	close(h->fd);
	mps_memacct_uncharge_host(&c->mem, h->size);
	mps_handle_del(&c->handles, h->handle);
	free(h);
}

void mps__op_host_free(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_shost *h = mps__host_get(c, q->handle);

	if (!h) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	/* As cuMemFreeHost, wait for the client's work that may still use it. */
	sync_client(c, -1);
	if (h->graphed) {
		/* A graph may still copy to or from it when launched: the pages
		 * stay ours (and charged) until the client leaves. */
		host_unrange(c, h);
		h->freed = true;
	} else {
		host_free(c, h);
	}
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

struct mps_shost *mps__host_get(struct mps_client *c, uint32_t handle)
{
	struct mps_shost *h = mps__obj(c, handle, MPS_H_HOST);

	return h && !h->freed ? h : NULL;
}

static void host_free_cb(void *obj, void *arg)
{
	host_free(arg, obj);
}

void mps__host_release_all(struct mps_client *c)
{
	mps_handles_foreach(&c->handles, MPS_H_HOST, host_free_cb, c);
}
