// SPDX-License-Identifier: MIT
/*
 * Device memory, pinned host memory and pointer queries.
 *
 * The client keeps two small sorted tables, each under a reader-writer lock:
 * the device allocations it made (so cuMemcpy can tell a device pointer from
 * a host one without asking), and its pinned host regions (so a copy from or
 * to pinned memory is sent as "offset N of region R", which the server turns
 * into real DMA on the same pages). The server keeps its own, authoritative
 * account; these are for routing, and for answering pointer queries: what
 * the server said of an allocation that cannot change while it lives is kept
 * with it (Triton asks a pointer attribute of every tensor it launches on).
 *
 * Pinned memory: the server creates and registers a sealed memfd and passes
 * it over the socket; the client maps it at the server's address when that
 * address is free here too, so that host pointer, device pointer and server
 * pointer are one number, as unified addressing promises.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "client/forward.h"
#include "common/log.h"
#include "common/shm.h"

/* The driver's answers about one allocation, kept as they came (see
 * kept_attrs()): attribute a's result and value for pointer at. */
#define PTR_ATTRS 32

struct ptrattrs {
	uint32_t have;            /* bit a: attribute a is kept */
	int32_t result[PTR_ATTRS];
	uint64_t value[PTR_ATTRS];
	uint64_t at[PTR_ATTRS];
};

struct devrange {
	uint64_t base, size;
	struct mps_ctx *ctx;
	const void *owner;   /* NULL for allocations; the module for its globals */
	bool reserved;       /* we hold the same addresses here (see reserve()) */
	bool shared;         /* reached by others: IPC handles, exported pointers (mps__devmem_private) */
	struct ptrattrs *attrs;   /* answers kept, or NULL (under the table's lock) */
};

struct hostreg {
	uint8_t *addr;
	size_t size;
	uint32_t handle;
	unsigned int flags;
	uint64_t devptr;
	void *user;          /* registered memory (hostreg.c): the pointer the program gave; NULL if allocated */
	bool adopted;        /* shared memory of the library's making pinned for it (managed memory,
			      * hostreg.c): not registered memory to the program */
};

struct table {
	pthread_rwlock_t lock;
	void *v;
	size_t n, cap, elem;
};

static struct table devmem = { PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0, sizeof(struct devrange) };
static struct table hostmem = { PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0, sizeof(struct hostreg) };

static uint64_t key(const struct table *t, size_t i)
{
	const uint8_t *e = (const uint8_t *)t->v + i * t->elem;

	return t == &devmem ? ((const struct devrange *)e)->base : (uint64_t)(uintptr_t)((const struct hostreg *)e)->addr;
}

static uint64_t extent(const struct table *t, size_t i)
{
	const uint8_t *e = (const uint8_t *)t->v + i * t->elem;

	return t == &devmem ? ((const struct devrange *)e)->size : ((const struct hostreg *)e)->size;
}

/* Index of the first entry with key > k. Caller holds the lock. */
static size_t upper(const struct table *t, uint64_t k)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (key(t, mid) <= k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The entry containing [k, k + len), or -1. Caller holds the lock. */
static long find(const struct table *t, uint64_t k, uint64_t len)
{
	size_t i = upper(t, k);

	if (i == 0)
		return -1;
	i--;
	if (k - key(t, i) >= extent(t, i) || len > extent(t, i) - (k - key(t, i)))
		return -1;
	return (long)i;
}

static int insert(struct table *t, const void *e, uint64_t k)
{
	size_t i;

	pthread_rwlock_wrlock(&t->lock);
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		void *nv = realloc(t->v, ncap * t->elem);

		if (!nv) {
			pthread_rwlock_unlock(&t->lock);
			return -ENOMEM;
		}
		t->v = nv;
		t->cap = ncap;
	}
	i = upper(t, k);
	memmove((uint8_t *)t->v + (i + 1) * t->elem, (uint8_t *)t->v + i * t->elem, (t->n - i) * t->elem);
	memcpy((uint8_t *)t->v + i * t->elem, e, t->elem);
	t->n++;
	pthread_rwlock_unlock(&t->lock);
	return 0;
}

static void erase(struct table *t, size_t i)
{
	memmove((uint8_t *)t->v + i * t->elem, (uint8_t *)t->v + (i + 1) * t->elem, (t->n - i - 1) * t->elem);
	t->n--;
}

/* Unified addressing means a device address is never also a host address
 * of the process. The device's addresses were handed out in the server, so
 * the client holds the same range here, inaccessible and uncommitted, to keep
 * its own future mappings (the heap, mmap) out of it. If the range is
 * already in use here, telling pointers apart is left to luck: say so. */
static bool reserve(uint64_t base, uint64_t size)
{
	void *want = (void *)(uintptr_t)(base & ~4095ull);
	size_t len = (size_t)(((base + size + 4095) & ~4095ull) - (base & ~4095ull));
	void *p = mmap(want, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
		       -1, 0);

	if (p == want)
		return true;
	if (p != MAP_FAILED)
		munmap(p, len);
	mps_log_debug("openmps: device range %#llx+%llu overlaps this process's own memory",
		      (unsigned long long)base, (unsigned long long)size);
	return false;
}

/* What an entry holds, as it leaves the table. */
static void range_release(const struct devrange *d)
{
	free(d->attrs);
	if (d->reserved)
		munmap((void *)(uintptr_t)(d->base & ~4095ull),
		       (size_t)(((d->base + d->size + 4095) & ~4095ull) - (d->base & ~4095ull)));
}

void mps__devmem_add(uint64_t base, uint64_t size, struct mps_ctx *ctx, const void *owner)
{
	struct devrange d = { .base = base, .size = size, .ctx = ctx, .owner = owner };

	pthread_rwlock_rdlock(&devmem.lock);
	long have = find(&devmem, base, 1);
	pthread_rwlock_unlock(&devmem.lock);
	if (have >= 0)
		return;
	d.reserved = reserve(base, size);
	if (insert(&devmem, &d, base) < 0)
		range_release(&d);
}

void mps__devmem_remove(uint64_t base)
{
	long i;

	pthread_rwlock_wrlock(&devmem.lock);
	i = find(&devmem, base, 1);
	if (i >= 0 && key(&devmem, (size_t)i) == base) {
		range_release((struct devrange *)devmem.v + i);
		erase(&devmem, (size_t)i);
	}
	pthread_rwlock_unlock(&devmem.lock);
}

void mps__devmem_forget(struct mps_ctx *ctx, const void *owner)
{
	pthread_rwlock_wrlock(&devmem.lock);
	for (size_t i = devmem.n; i-- > 0;) {
		struct devrange *d = (struct devrange *)devmem.v + i;

		if ((ctx && d->ctx == ctx && !d->owner) || (owner && d->owner == owner)) {
			range_release(d);
			erase(&devmem, i);
		}
	}
	pthread_rwlock_unlock(&devmem.lock);
}

/* A copy of the range holding [addr, addr + size), if one does. */
static bool range_of(uint64_t addr, uint64_t size, struct devrange *out)
{
	long i;

	pthread_rwlock_rdlock(&devmem.lock);
	i = find(&devmem, addr, size);
	if (i >= 0)
		*out = ((const struct devrange *)devmem.v)[i];
	pthread_rwlock_unlock(&devmem.lock);
	return i >= 0;
}

bool mps__devmem_reserved(uint64_t addr, uint64_t size)
{
	struct devrange d;

	return range_of(addr, size, &d) && d.reserved;
}

bool mps__devmem_has(uint64_t addr)
{
	long i;

	pthread_rwlock_rdlock(&devmem.lock);
	i = find(&devmem, addr, 1);
	pthread_rwlock_unlock(&devmem.lock);
	return i >= 0;
}

bool mps__devmem_private(uint64_t addr, uint64_t size)
{
	struct devrange d;

	return range_of(addr, size, &d) && d.ctx && !d.owner && !d.shared;
}

void mps__devmem_share(uint64_t addr)
{
	long i;

	pthread_rwlock_wrlock(&devmem.lock);
	i = find(&devmem, addr, 1);
	if (i >= 0)
		((struct devrange *)devmem.v + i)->shared = true;
	pthread_rwlock_unlock(&devmem.lock);
}

bool mps__hostmem_find(const void *p, size_t len, uint32_t *region, uint64_t *offset)
{
	long i;

	pthread_rwlock_rdlock(&hostmem.lock);
	i = find(&hostmem, (uint64_t)(uintptr_t)p, len ? len : 1);
	if (i >= 0) {
		struct hostreg *h = (struct hostreg *)hostmem.v + i;

		*region = h->handle;
		*offset = (uint64_t)((const uint8_t *)p - h->addr);
	}
	pthread_rwlock_unlock(&hostmem.lock);
	return i >= 0;
}

void *mps__hostmem_base(uint32_t region)
{
	void *base = NULL;

	pthread_rwlock_rdlock(&hostmem.lock);
	for (size_t i = 0; i < hostmem.n && !base; i++)
		if (((struct hostreg *)hostmem.v)[i].handle == region)
			base = ((struct hostreg *)hostmem.v)[i].addr;
	pthread_rwlock_unlock(&hostmem.lock);
	return base;
}

bool mps__hostmem_overlaps(const void *p, size_t len)
{
	uint64_t k = (uint64_t)(uintptr_t)p;
	size_t i;
	bool any;

	/* The regions do not overlap and are sorted: only the last one that
	 * starts at or before p and the first one after it can meet the range. */
	pthread_rwlock_rdlock(&hostmem.lock);
	i = upper(&hostmem, k);
	any = (i > 0 && k - key(&hostmem, i - 1) < extent(&hostmem, i - 1)) ||
	      (i < hostmem.n && key(&hostmem, i) - k < len);
	pthread_rwlock_unlock(&hostmem.lock);
	return any;
}

CUresult mps__hostmem_add_registered(void *addr, size_t size, uint32_t handle, unsigned int flags, uint64_t devptr,
				     void *user)
{
	struct hostreg reg = { .addr = addr, .size = size, .handle = handle, .flags = flags, .devptr = devptr,
			       .user = user, .adopted = !user };
	return insert(&hostmem, &reg, (uint64_t)(uintptr_t)addr) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* Takes out the region holding p if it is the one registered at the
 * program's pointer p, or (adopted) the adopted one starting at p; its
 * handle in *handle. */
static bool take(const void *p, bool adopted, uint32_t *handle)
{
	const struct hostreg *h;
	long i;

	pthread_rwlock_wrlock(&hostmem.lock);
	i = find(&hostmem, (uint64_t)(uintptr_t)p, 1);
	h = i >= 0 ? (struct hostreg *)hostmem.v + i : NULL;
	if (h && (adopted ? h->adopted && h->addr == p : h->user == p)) {
		*handle = h->handle;
		erase(&hostmem, (size_t)i);
	} else {
		i = -1;
	}
	pthread_rwlock_unlock(&hostmem.lock);
	return i >= 0;
}

bool mps__hostmem_take_adopted(const void *addr, uint32_t *handle)
{
	return take(addr, true, handle);
}

bool mps__hostmem_take_registered(const void *user, uint32_t *handle)
{
	return take(user, false, handle);
}

/* A copy of the host region containing p. */
static bool hostreg_of(const void *p, struct hostreg *out)
{
	long i;

	pthread_rwlock_rdlock(&hostmem.lock);
	i = find(&hostmem, (uint64_t)(uintptr_t)p, 1);
	if (i >= 0 && ((struct hostreg *)hostmem.v)[i].adopted)
		i = -1;   /* pageable memory to the program */
	if (i >= 0)
		*out = ((struct hostreg *)hostmem.v)[i];
	pthread_rwlock_unlock(&hostmem.lock);
	return i >= 0;
}

static CUresult alloc(CUdeviceptr *dptr, size_t *pitch, size_t size, size_t width, size_t height,
		      unsigned int elem)
{
	struct mps_msg_mem_alloc q = { .size = size, .width = width, .height = height, .elem = elem };
	struct mps_ctx *ctx = mps__ctx_cur();
	struct mps_call call;
	uint32_t h;
	CUresult r;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__cur_handle(&h);
	if (r == CUDA_SUCCESS)
		r = mps__capture_check();   /* an allocation is unsafe during capture */
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__call(MPS_OP_MEM_ALLOC, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		*dptr = (CUdeviceptr)call.s->val[0];
		if (pitch)
			*pitch = (size_t)call.s->val[1];
		mps__devmem_add(call.s->val[0], elem ? call.s->val[1] * height : size, ctx, NULL);
	}
	mps__call_end(&call);
	return r;
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size)
{
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc(dptr, NULL, size, 0, 0, 0);
}

static CUresult mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem)
{
	if (!pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	return alloc(dptr, pitch, 0, width, height, elem);
}

static CUresult mem_free(CUdeviceptr p)
{
	struct mps_msg_ptr q = { .ptr = p };
	struct mps_call call;
	uint32_t h = 0;
	CUresult r;

	if (p == 0)
		return CUDA_SUCCESS;
	if (mps__managed_free(p, &r))
		return r;
	mps__cur_handle(&h);
	r = mps__call(MPS_OP_MEM_FREE, h, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	if (r == CUDA_SUCCESS)
		mps__devmem_remove(p);
	return r;
}

/* Stream-ordered allocation: the server allocates on its stream for ours
 * and answers with the pointer at once; the free is queued, like a launch. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, bool per_thread)
{
	struct mps_msg_mem_async q = { .value = size };
	struct mps_call call;
	uint32_t ctx;
	CUresult r;

	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, per_thread, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__call(MPS_OP_MEM_ALLOC_ASYNC, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		*dptr = (CUdeviceptr)call.s->val[0];
		mps__devmem_add(call.s->val[0], size, mps__ctx_by_handle(ctx), NULL);
	}
	mps__call_end(&call);
	return r;
}

static CUresult free_async(CUdeviceptr p, CUstream s, bool per_thread)
{
	struct mps_msg_mem_async q = { .value = p };
	uint32_t ctx;
	CUresult r;

	if (p == 0)
		return CUDA_SUCCESS;
	r = mps__stream_resolve(s, per_thread, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__post(MPS_OP_MEM_FREE_ASYNC, ctx, &q.hdr, sizeof(q), NULL, 0);
	/* Captured, the free is a node that frees graph memory when a
	 * launch reaches it, and refuses any other: the memory stays. */
	if (r == CUDA_SUCCESS && !mps__capture_on(q.stream))
		mps__devmem_remove(p);
	return r;
}

static CUresult mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
	return alloc_async(dptr, size, s, false);
}

static CUresult mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
	return alloc_async(dptr, size, s, true);
}

static CUresult mem_free_async(CUdeviceptr p, CUstream s)
{
	return free_async(p, s, false);
}

static CUresult mem_free_async_ptsz(CUdeviceptr p, CUstream s)
{
	return free_async(p, s, true);
}

static CUresult mem_get_info(size_t *fr, size_t *total)
{
	struct mps_msg q;
	struct mps_call call;
	uint32_t h;
	CUresult r;

	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	memset(&q, 0, sizeof(q));
	r = mps__call(MPS_OP_MEM_INFO, h, &q, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		if (fr)
			*fr = (size_t)call.s->val[0];
		if (total)
			*total = (size_t)call.s->val[1];
	}
	mps__call_end(&call);
	return r;
}

static CUresult mem_get_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct mps_msg_ptr q = { .ptr = p };
	struct mps_call call;
	uint64_t mb, ms;
	uint32_t h = 0;
	CUresult r;

	if (mps__managed_range(p, &mb, &ms)) {
		if (base)
			*base = (CUdeviceptr)mb;
		if (size)
			*size = (size_t)ms;
		return CUDA_SUCCESS;
	}
	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__call(MPS_OP_MEM_RANGE, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		if (base)
			*base = (CUdeviceptr)call.s->val[0];
		if (size)
			*size = (size_t)call.s->val[1];
	}
	mps__call_end(&call);
	return r;
}

/* A new pinned host region from the server, mapped here at the server's
 * address when that is free (else anywhere). */
static CUresult region_new(size_t size, unsigned int flags, struct hostreg *reg)
{
	struct mps_msg_host_alloc q = { .size = size, .flags = flags };
	struct mps_call call;
	uint64_t got = 0;
	void *server_addr;
	uint32_t h = 0;
	CUresult r;
	int fd;

	mps__cur_handle(&h);
	/* The fd arrives on the socket just before the reply: one at a time. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	r = mps__call(MPS_OP_HOST_ALLOC, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r != CUDA_SUCCESS) {
		mps__call_end(&call);
		pthread_mutex_unlock(&mps_conn.fd_lock);
		return r;
	}
	reg->handle = (uint32_t)call.s->val[0];
	server_addr = (void *)(uintptr_t)call.s->val[1];
	reg->size = (size_t)call.s->val[2];
	reg->devptr = call.s->val[3];
	reg->flags = flags;
	reg->user = NULL;
	reg->adopted = false;
	mps__call_end(&call);
	fd = mps__recv_fd(reg->handle, &got);
	pthread_mutex_unlock(&mps_conn.fd_lock);
	if (fd < 0 || got != reg->size || mps_shm_sealed_size(fd) != (long long)reg->size) {
		if (fd >= 0)
			close(fd);
		r = mps__ended_or(CUDA_ERROR_OUT_OF_MEMORY);
		if (r == CUDA_ERROR_OUT_OF_MEMORY)
			mps_log_warn("openmps: pinned allocation of %zu bytes: bad answer from the server", size);
		return r;
	}
	reg->addr = mps_shm_map(fd, reg->size, server_addr);
	if (!reg->addr)
		reg->addr = mps_shm_map(fd, reg->size, NULL);
	close(fd);
	return reg->addr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult mps__host_region(size_t size, uint32_t *handle, void **addr)
{
	struct hostreg reg;
	CUresult r = region_new(size, 0, &reg);

	if (r == CUDA_SUCCESS) {
		*handle = reg.handle;
		*addr = reg.addr;
	}
	return r;
}

static CUresult host_alloc(void **pp, size_t size, unsigned int flags)
{
	struct hostreg reg;
	CUresult r;

	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
		return CUDA_ERROR_INVALID_VALUE;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__capture_check();
	if (r != CUDA_SUCCESS)
		return r;
	r = region_new(size, flags, &reg);
	if (r != CUDA_SUCCESS)
		return r;
	if (insert(&hostmem, &reg, (uint64_t)(uintptr_t)reg.addr) < 0) {
		munmap(reg.addr, reg.size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = reg.addr;
	return CUDA_SUCCESS;
}

static CUresult mem_alloc_host(void **pp, size_t size)
{
	return host_alloc(pp, size, 0);
}

static CUresult mem_host_alloc(void **pp, size_t size, unsigned int flags)
{
	return host_alloc(pp, size, flags);
}

static CUresult mem_free_host(void *p)
{
	struct mps_msg_handle q;
	struct hostreg reg;
	struct mps_call call;
	CUresult r;
	long i;

	pthread_rwlock_wrlock(&hostmem.lock);
	i = find(&hostmem, (uint64_t)(uintptr_t)p, 1);
	if (i < 0 || ((struct hostreg *)hostmem.v)[i].addr != p || ((struct hostreg *)hostmem.v)[i].user ||
	    ((struct hostreg *)hostmem.v)[i].adopted) {
		pthread_rwlock_unlock(&hostmem.lock);
		return CUDA_ERROR_INVALID_VALUE;   /* registered memory is the program's to free */
	}
	reg = ((struct hostreg *)hostmem.v)[i];
	erase(&hostmem, (size_t)i);
	pthread_rwlock_unlock(&hostmem.lock);
	memset(&q, 0, sizeof(q));
	q.handle = reg.handle;
	r = mps__call(MPS_OP_HOST_FREE, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	munmap(reg.addr, reg.size);
	return r;
}

static CUresult mem_host_get_device_pointer(CUdeviceptr *dp, void *p, unsigned int flags)
{
	struct hostreg reg;

	if (!dp || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!hostreg_of(p, &reg))
		return CUDA_ERROR_INVALID_VALUE;
	*dp = (CUdeviceptr)(reg.devptr + (uint64_t)((uint8_t *)p - reg.addr));
	return CUDA_SUCCESS;
}

static CUresult mem_host_get_flags(unsigned int *flags, void *p)
{
	struct hostreg reg;

	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!hostreg_of(p, &reg))
		return CUDA_ERROR_INVALID_VALUE;
	*flags = reg.flags;
	return CUDA_SUCCESS;
}

/* Bytes the driver writes for each attribute. */
static size_t attr_size(CUpointer_attribute a)
{
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return 8;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		return 4;
	default:
		return 0;
	}
}

static void put_value(void *data, CUpointer_attribute a, uint64_t v)
{
	if (attr_size(a) == 8)
		memcpy(data, &v, 8);
	else {
		uint32_t w = (uint32_t)v;

		memcpy(data, &w, 4);
	}
}

/* Answers for pinned host memory, which the client knows best. */
static CUresult host_attr(const struct hostreg *reg, CUdeviceptr ptr, CUpointer_attribute a, uint64_t *v)
{
	uint64_t off = (uint64_t)ptr - (uint64_t)(uintptr_t)reg->addr;
	struct mps_ctx *ctx = mps__ctx_cur();

	switch (a) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*v = CU_MEMORYTYPE_HOST;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*v = (uint64_t)ptr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*v = reg->devptr + off;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*v = (uint64_t)(uintptr_t)ctx;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*v = ctx ? (uint64_t)ctx->device : 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*v = (uint64_t)(uintptr_t)reg->addr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*v = reg->size;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*v = 1;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*v = a == CU_POINTER_ATTRIBUTE_BUFFER_ID ? reg->handle : 0;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* What an allocation is does not change while it lives: the attributes
 * kept. Not kept: the access flags, which are the current context's and
 * change with cuMemSetAccess, and the mapping attributes of virtual memory.
 * The device and host pointers are kept as offsets from where they were
 * asked: they follow the pointer within the allocation. */
static bool keepable(CUpointer_attribute a, CUresult r)
{
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED)
		return false;
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		return true;
	default:
		return false;
	}
}

static bool follows_pointer(CUpointer_attribute a)
{
	return a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER || a == CU_POINTER_ATTRIBUTE_HOST_POINTER;
}

/* Answers all n from what is kept of ptr's allocation, or none. */
static bool kept_attrs(CUdeviceptr ptr, unsigned int n, const CUpointer_attribute *attrs, uint64_t *vals, CUresult *res)
{
	const struct ptrattrs *k;
	bool all = false;
	long e;

	pthread_rwlock_rdlock(&devmem.lock);
	e = find(&devmem, ptr, 1);
	k = e >= 0 ? ((const struct devrange *)devmem.v + e)->attrs : NULL;
	if (k) {
		all = true;
		for (unsigned int i = 0; i < n && all; i++)
			all = (unsigned int)attrs[i] < PTR_ATTRS && (k->have & (1u << attrs[i]));
		for (unsigned int i = 0; i < n && all; i++) {
			unsigned int a = (unsigned int)attrs[i];

			res[i] = (CUresult)k->result[a];
			vals[i] = k->value[a];
			if (res[i] == CUDA_SUCCESS && follows_pointer(attrs[i]))
				vals[i] += (uint64_t)ptr - k->at[a];
		}
	}
	pthread_rwlock_unlock(&devmem.lock);
	return all;
}

/* Keeps the server's answers about ptr's allocation, if it is one of ours. */
static void keep_attrs(CUdeviceptr ptr, unsigned int n, const CUpointer_attribute *attrs, const uint64_t *vals,
		       const CUresult *res)
{
	struct devrange *d;
	long e;

	pthread_rwlock_wrlock(&devmem.lock);
	e = find(&devmem, ptr, 1);
	d = e >= 0 ? (struct devrange *)devmem.v + e : NULL;
	if (d && !d->attrs)
		d->attrs = calloc(1, sizeof(*d->attrs));
	for (unsigned int i = 0; d && d->attrs && i < n; i++) {
		unsigned int a = (unsigned int)attrs[i];

		if (a >= PTR_ATTRS || !keepable(attrs[i], res[i]))
			continue;
		d->attrs->result[a] = (int32_t)res[i];
		d->attrs->value[a] = vals[i];
		d->attrs->at[a] = (uint64_t)ptr;
		d->attrs->have |= 1u << a;
	}
	pthread_rwlock_unlock(&devmem.lock);
}

/* Asks for n attributes of ptr; vals/res get each value and result. */
static CUresult query(unsigned int n, const CUpointer_attribute *attrs, CUdeviceptr ptr, uint64_t *vals, CUresult *res)
{
	struct mps_msg_pointer_attr q = { .ptr = ptr, .count = n };
	struct hostreg reg;
	struct mps_call call;
	CUresult r;

	if (n && mps__managed_attrs(ptr, n, attrs, vals, res))
		return CUDA_SUCCESS;
	if (hostreg_of((void *)(uintptr_t)ptr, &reg)) {
		for (unsigned int i = 0; i < n; i++)
			res[i] = host_attr(&reg, ptr, attrs[i], &vals[i]);
		return CUDA_SUCCESS;
	}
	if (n && kept_attrs(ptr, n, attrs, vals, res))
		return CUDA_SUCCESS;
	for (unsigned int i = 0; i < n; i++)
		q.attr[i] = (uint32_t)attrs[i];
	r = mps__call(MPS_OP_POINTER_ATTR, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && call.s->len == n * sizeof(struct mps_attr_value)) {
		const struct mps_attr_value *v = (const void *)call.s->data;

		for (unsigned int i = 0; i < n; i++) {
			res[i] = (CUresult)v[i].result;
			vals[i] = v[i].value;
			if (attrs[i] == CU_POINTER_ATTRIBUTE_CONTEXT && res[i] == CUDA_SUCCESS)
				vals[i] = (uint64_t)(uintptr_t)mps__ctx_by_handle((uint32_t)vals[i]);
			if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE && res[i] == CUDA_SUCCESS) {
				void *pool = NULL;

				if (vals[i])
					mps__fwd_obj(MPS_H_POOL, (uint32_t)vals[i], 0, &pool);
				vals[i] = (uint64_t)(uintptr_t)pool;
			}
		}
		keep_attrs(ptr, n, attrs, vals, res);
	} else if (r == CUDA_SUCCESS) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	mps__call_end(&call);
	return r;
}

static CUresult pointer_get_attribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
	uint64_t v = 0;
	CUresult res, r;

	if (!data || !attr_size(a))
		return CUDA_ERROR_INVALID_VALUE;
	r = query(1, &a, ptr, &v, &res);
	if (r != CUDA_SUCCESS)
		return r;
	if (res == CUDA_SUCCESS)
		put_value(data, a, v);
	return res;
}

static CUresult pointer_get_attributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
	uint64_t vals[MPS_POINTER_ATTRS_MAX];
	CUresult res[MPS_POINTER_ATTRS_MAX];
	CUresult r;

	if (!attrs || !data || n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int done = 0; done < n; done += MPS_POINTER_ATTRS_MAX) {
		unsigned int k = n - done < MPS_POINTER_ATTRS_MAX ? n - done : MPS_POINTER_ATTRS_MAX;

		for (unsigned int i = 0; i < k; i++)
			if (!data[done + i] || !attr_size(attrs[done + i]))
				return CUDA_ERROR_INVALID_VALUE;
		r = query(k, attrs + done, ptr, vals, res);
		if (r != CUDA_SUCCESS)
			return r;
		/* Unlike the single query, a pointer CUDA does not know yields
		 * zeroes here, not an error. */
		for (unsigned int i = 0; i < k; i++)
			put_value(data[done + i], attrs[done + i], res[i] == CUDA_SUCCESS ? vals[i] : 0);
	}
	return CUDA_SUCCESS;
}

/* Prefetching moves nothing: device memory is where it is (libraries such
 * as cuBLAS call it on ordinary device memory and expect success; the
 * range must still be the client's), and managed memory stays where the
 * host and the device both reach it (managed.c), which keeps the location
 * as the range's last prefetch location. */
static CUresult prefetch(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags, CUstream s, bool pt)
{
	uint32_t stream, ctx;
	CUresult r;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, pt, &stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (count && mps__managed_prefetch(p, count, mps__location_id(loc), &r))
		return r;
	return count && !mps__devmem_has(p) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult mem_prefetch_async_v1(CUdeviceptr p, size_t count, CUdevice dst, CUstream s)
{
	return prefetch(p, count, mps__device_location(dst), 0, s, false);
}

static CUresult mem_prefetch_async_v1_ptsz(CUdeviceptr p, size_t count, CUdevice dst, CUstream s)
{
	return prefetch(p, count, mps__device_location(dst), 0, s, true);
}

static CUresult mem_prefetch_async(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags, CUstream s)
{
	return prefetch(p, count, loc, flags, s, false);
}

static CUresult mem_prefetch_async_ptsz(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags,
				       CUstream s)
{
	return prefetch(p, count, loc, flags, s, true);
}

const struct mps_impl mps__memory_api[] = {
	MPS_IMPL(cuMemAlloc_v2, mem_alloc),
	MPS_IMPL(cuMemAllocPitch_v2, mem_alloc_pitch),
	MPS_IMPL(cuMemFree_v2, mem_free),
	MPS_IMPL(cuMemAllocAsync, mem_alloc_async),
	MPS_IMPL_AS(cuMemAllocAsync_ptsz, cuMemAllocAsync, mem_alloc_async_ptsz),
	MPS_IMPL(cuMemFreeAsync, mem_free_async),
	MPS_IMPL_AS(cuMemFreeAsync_ptsz, cuMemFreeAsync, mem_free_async_ptsz),
	MPS_IMPL(cuMemGetInfo_v2, mem_get_info),
	MPS_IMPL(cuMemGetAddressRange_v2, mem_get_address_range),
	MPS_IMPL(cuMemAllocHost_v2, mem_alloc_host),
	MPS_IMPL(cuMemHostAlloc, mem_host_alloc),
	MPS_IMPL(cuMemFreeHost, mem_free_host),
	MPS_IMPL(cuMemHostGetDevicePointer_v2, mem_host_get_device_pointer),
	MPS_IMPL(cuMemHostGetFlags, mem_host_get_flags),
	MPS_IMPL(cuPointerGetAttribute, pointer_get_attribute),
	MPS_IMPL(cuPointerGetAttributes, pointer_get_attributes),
	MPS_IMPL(cuMemPrefetchAsync_v2, mem_prefetch_async),
	MPS_IMPL_AS(cuMemPrefetchAsync_v2_ptsz, cuMemPrefetchAsync_v2, mem_prefetch_async_ptsz),
	MPS_IMPL_PFN(cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v8000, mem_prefetch_async_v1),
	MPS_IMPL_PFN(cuMemPrefetchAsync_ptsz, PFN_cuMemPrefetchAsync_v8000_ptsz, mem_prefetch_async_v1_ptsz),
	MPS_IMPL_END
};
