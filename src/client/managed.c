// SPDX-License-Identifier: MIT
/*
 * Managed memory: cuMemAllocManaged, cuMemAdvise, cuMemRangeGetAttribute(s),
 * cuStreamAttachMemAsync, and what cuMemFree, cuMemPrefetchAsync, the
 * pointer attributes and cuMemGetAddressRange answer for it (memory.c asks
 * here first).
 *
 * One pointer must be valid in the program and in its kernels, and the
 * program's CPU must read and write what the GPU does. The allocation is
 * shared memory of the client's making (a sealed memfd mapped here), pinned
 * in the server at the same address (hostreg.c), which with unified
 * addressing is also its device address: the CPU works on its own pages,
 * the GPU reaches them through the mapping, coherent at the points where
 * the driver's managed memory is (a kernel's start and end, a
 * synchronize), and concurrent access from both is allowed, as on devices
 * with concurrentManagedAccess. Nothing migrates: kernels read and write
 * managed memory at the host link's speed, not the device memory's, and
 * prefetching and advice move nothing (they are checked and kept: the
 * range attributes report what the program asked). The allocation counts
 * against the client's pinned host memory, not its device memory. Where
 * the server cannot map the memory at the client's address the client
 * tries other addresses.
 *
 * Advice and prefetch locations are kept per allocation; a range must lie
 * inside one managed allocation.
 *
 * With OPENMPS_MANAGED=device an allocation is device memory instead, with
 * a copy here kept in step by page protection (migrate.c): kernels run at
 * the device memory's speed, and a prefetch moves the range. The table
 * here still answers for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "common/log.h"
#include "common/shm.h"
#include "common/wire.h"

#define ATTACH_FLAGS (CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST | CU_MEM_ATTACH_SINGLE)
#define ADDRESS_TRIES 8

struct managed {
	uint64_t base;
	uint64_t size;       /* as asked for */
	size_t len;          /* as mapped: whole pages */
	int device;          /* of the context it was made in */
	bool read_mostly;
	int preferred;       /* CU_DEVICE_INVALID if none */
	int prefetched;      /* CU_DEVICE_INVALID if never */
	uint64_t accessed_by;
	bool on_device;      /* device memory with a copy here (migrate.c) */
};

static struct {
	pthread_mutex_t lock;
	struct managed *v;
	size_t n, cap;
} tab = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The index of the allocation holding [p, p + count) (count 0: p alone),
 * or -1. Under the lock. */
static long find_locked(uint64_t p, uint64_t count)
{
	for (size_t i = 0; i < tab.n; i++) {
		const struct managed *m = &tab.v[i];

		if (p >= m->base && p - m->base < m->size && (count ? count : 1) <= m->size - (p - m->base))
			return (long)i;
	}
	return -1;
}

/* The allocation holding [p, p + count), copied into *out. */
static bool find(uint64_t p, uint64_t count, struct managed *out)
{
	long i;

	pthread_mutex_lock(&tab.lock);
	i = find_locked(p, count);
	if (i >= 0)
		*out = tab.v[i];
	pthread_mutex_unlock(&tab.lock);
	return i >= 0;
}

/* Fresh shared memory of len bytes (a sealed memfd, its fd in *fd) mapped
 * here: at hint if that is free, else where the kernel puts it. */
static void *shared_map(size_t len, void *hint, int *fd)
{
	void *p;

	*fd = mps_shm_create("openmps-managed", len);
	if (*fd < 0) {
		*fd = -1;
		return NULL;
	}
	p = mmap(hint, len, PROT_READ | PROT_WRITE, MAP_SHARED | (hint ? MAP_FIXED_NOREPLACE : 0), *fd, 0);
	if (p == MAP_FAILED && hint)
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p != MAP_FAILED)
		return p;
	close(*fd);
	*fd = -1;
	return NULL;
}

static CUresult mem_alloc_managed(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	void *missed[ADDRESS_TRIES];
	struct mps_ctx *ctx = mps__ctx_cur();
	struct managed m;
	int nmissed = 0;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	bool on_device = false;
	void *p = NULL;

	if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) ||
	    bytesize > SIZE_MAX - page)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	len = (bytesize + page - 1) & ~(page - 1);
	if (mps__migrate_on()) {
		uint32_t h;

		r = mps__ctx_handle(ctx, &h);
		if (r == CUDA_SUCCESS)
			r = mps__migrate_alloc(bytesize, flags, h, (CUdeviceptr *)&p);
		on_device = r == CUDA_SUCCESS;
		if (on_device)
			goto record;
		if (r != CUDA_ERROR_NOT_SUPPORTED)
			return r;
		p = NULL;   /* not on the device: in host memory, below */
	}
	while (nmissed < ADDRESS_TRIES) {
		uint64_t devptr = 0;
		void *hint = NULL;
		int fd;

		/* After a miss, further down each time (256 MiB, then 4 times
		 * as far, 256 GiB at most): where processes lay out memory
		 * alike (no address randomization, as under ThreadSanitizer) the
		 * server's mappings at the next addresses down can be large (a
		 * placement range is 64 GiB or more). */
		if (nmissed) {
			uintptr_t last = (uintptr_t)missed[nmissed - 1];
			uintptr_t stride = nmissed > 5 ? (uintptr_t)256 << 30 : (uintptr_t)256 << (20 + 2 * (nmissed - 1));

			if (last > stride + len)
				hint = (void *)((last - stride) & ~(uintptr_t)(page - 1));
		}
		p = shared_map(len, hint, &fd);
		if (!p) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		r = mps__host_pin_shared(p, len, fd, &devptr);
		close(fd);   /* mapped here, and the server has its own */
		if (r != CUDA_SUCCESS)
			break;
		if (devptr == (uint64_t)(uintptr_t)p)
			break;
		/* The server holds other memory at this address: keep it mapped
		 * here while trying again, so the next try lands elsewhere. */
		mps__host_unpin_shared(p);
		missed[nmissed++] = p;
		p = NULL;
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < nmissed; i++)
		munmap(missed[i], len);
	if (r != CUDA_SUCCESS) {
		if (p)
			munmap(p, len);
		if (nmissed == ADDRESS_TRIES)
			mps_log_warn("openmps: cuMemAllocManaged: no address free in both this process and the server "
				     "after %d tries", ADDRESS_TRIES);
		return r;
	}
record:
	memset(&m, 0, sizeof(m));
	m.on_device = on_device;
	m.base = (uint64_t)(uintptr_t)p;
	m.size = bytesize;
	m.len = len;
	m.device = ctx->device;
	m.preferred = m.prefetched = CU_DEVICE_INVALID;
	pthread_mutex_lock(&tab.lock);
	if (tab.n == tab.cap) {
		size_t cap = tab.cap ? 2 * tab.cap : 16;
		struct managed *v = realloc(tab.v, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&tab.lock);
			if (m.on_device) {
				mps__migrate_free(m.base, &r);
			} else {
				mps__host_unpin_shared(p);
				munmap(p, len);
			}
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		tab.v = v;
		tab.cap = cap;
	}
	tab.v[tab.n++] = m;
	pthread_mutex_unlock(&tab.lock);
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

bool mps__managed_free(uint64_t p, CUresult *r)
{
	struct managed m;
	CUresult sync;
	long i;

	pthread_mutex_lock(&tab.lock);
	i = find_locked(p, 0);
	if (i < 0 || tab.v[i].base != p) {
		pthread_mutex_unlock(&tab.lock);
		/* Inside one but not at its start: the driver's answer. */
		*r = CUDA_ERROR_INVALID_VALUE;
		return i >= 0;
	}
	m = tab.v[i];
	tab.v[i] = tab.v[--tab.n];
	pthread_mutex_unlock(&tab.lock);
	if (m.on_device && mps__migrate_free(m.base, r))
		return true;
	/* As cuMemFree of managed memory: the GPU's work that may use it
	 * comes first (and its error, if it failed, is the answer). */
	sync = cuCtxSynchronize();
	*r = mps__host_unpin_shared((void *)(uintptr_t)m.base);
	if (*r == CUDA_SUCCESS && sync != CUDA_ERROR_INVALID_CONTEXT)
		*r = sync;
	munmap((void *)(uintptr_t)m.base, m.len);
	return true;
}

bool mps__managed_range(uint64_t p, uint64_t *base, uint64_t *size)
{
	struct managed m;

	if (!find(p, 0, &m))
		return false;
	*base = m.base;
	*size = m.size;
	return true;
}

/* Attribute a of p, inside allocation m, into *v. */
static void attr(const struct managed *m, uint64_t p, CUpointer_attribute a, uint64_t *v)
{
	switch (a) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*v = CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*v = p;
		break;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*v = (uint64_t)(uintptr_t)mps__ctx_cur();
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*v = (uint64_t)m->device;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*v = m->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*v = m->size;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*v = 1;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*v = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*v = m->base;   /* unique while it lives */
		break;
	default:           /* sync memops, IPC, handle types, RDMA, pools: none */
		*v = 0;
		break;
	}
}

bool mps__managed_attrs(uint64_t p, unsigned int n, const CUpointer_attribute *attrs, uint64_t *vals,
			CUresult *res)
{
	struct managed m;

	if (!find(p, 0, &m))
		return false;
	for (unsigned int i = 0; i < n; i++) {
		attr(&m, p, attrs[i], &vals[i]);
		res[i] = CUDA_SUCCESS;
	}
	return true;
}

int mps__location_id(CUmemLocation loc)
{
	int n = 0;

	if (loc.type == CU_MEM_LOCATION_TYPE_HOST)
		return CU_DEVICE_CPU;
	if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE || cuDeviceGetCount(&n) != CUDA_SUCCESS || loc.id < 0 ||
	    loc.id >= n)
		return CU_DEVICE_INVALID;
	return loc.id;
}

CUmemLocation mps__device_location(CUdevice d)
{
	CUmemLocation loc = { .type = d == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE,
			      .id = d };

	return loc;
}

bool mps__managed_prefetch(uint64_t p, size_t count, int to, CUresult *r)
{
	long i;

	bool on_device = false;

	pthread_mutex_lock(&tab.lock);
	i = find_locked(p, count);
	if (i >= 0) {
		*r = to == CU_DEVICE_INVALID ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
		if (*r == CUDA_SUCCESS)
			tab.v[i].prefetched = to;
		on_device = tab.v[i].on_device;
	}
	pthread_mutex_unlock(&tab.lock);
	/* Memory on the device (migrate.c) moves: there, or back here. */
	if (on_device && *r == CUDA_SUCCESS)
		*r = to == CU_DEVICE_CPU ? mps__migrate_to_host(p, count) : mps__migrate_to_device(0, p, 0);
	return i >= 0;
}

static CUresult advise(CUdeviceptr p, size_t count, CUmem_advise advice, int where)
{
	CUresult r = CUDA_SUCCESS;
	struct managed *m;
	long i;

	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&tab.lock);
	i = find_locked(p, count);
	if (i < 0) {
		pthread_mutex_unlock(&tab.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	m = &tab.v[i];
	switch (advice) {
	case CU_MEM_ADVISE_SET_READ_MOSTLY:
	case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
		m->read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
		break;
	case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
		if (where == CU_DEVICE_INVALID)
			r = CUDA_ERROR_INVALID_DEVICE;
		else
			m->preferred = where;
		break;
	case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
		m->preferred = CU_DEVICE_INVALID;
		break;
	case CU_MEM_ADVISE_SET_ACCESSED_BY:
	case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
		if (where < 0 || where >= 64) {   /* the CPU reaches managed memory anyway */
			r = where == CU_DEVICE_CPU ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
			break;
		}
		if (advice == CU_MEM_ADVISE_SET_ACCESSED_BY)
			m->accessed_by |= 1ull << where;
		else
			m->accessed_by &= ~(1ull << where);
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	pthread_mutex_unlock(&tab.lock);
	return r;
}

static CUresult mem_advise_v2(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation loc)
{
	return advise(p, count, advice, mps__location_id(loc));
}

static CUresult mem_advise_v1(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice device)
{
	return advise(p, count, advice, mps__location_id(mps__device_location(device)));
}

/* One range attribute of m into data (size bytes). */
static CUresult range_attr(const struct managed *m, void *data, size_t size, CUmem_range_attribute a)
{
	int v, at;

	switch (a) {
	case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
		v = m->read_mostly;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
		v = m->preferred;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
		v = m->prefetched;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
		at = a == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ? m->preferred : m->prefetched;
		v = at == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST
		    : at >= 0	    ? CU_MEM_LOCATION_TYPE_DEVICE
				    : CU_MEM_LOCATION_TYPE_INVALID;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
		v = m->preferred >= 0 ? m->preferred : 0;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
		v = m->prefetched >= 0 ? m->prefetched : 0;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
		size_t n = 0;

		if (!size || size % 4)
			return CUDA_ERROR_INVALID_VALUE;
		for (int d = 0; d < 64 && n < size / 4; d++)
			if (m->accessed_by & (1ull << d))
				((int *)data)[n++] = d;
		while (n < size / 4)
			((int *)data)[n++] = CU_DEVICE_INVALID;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (size != 4)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(data, &v, 4);
	return CUDA_SUCCESS;
}

static CUresult mem_range_get_attribute(void *data, size_t size, CUmem_range_attribute a, CUdeviceptr p,
					size_t count)
{
	struct managed m;

	if (!data || !count || !find(p, count, &m))
		return CUDA_ERROR_INVALID_VALUE;
	return range_attr(&m, data, size, a);
}

static CUresult mem_range_get_attributes(void **data, size_t *sizes, CUmem_range_attribute *attrs, size_t n,
					 CUdeviceptr p, size_t count)
{
	struct managed m;
	CUresult r = CUDA_SUCCESS;

	if (!data || !sizes || !attrs || !n || !count || !find(p, count, &m))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
		r = data[i] ? range_attr(&m, data[i], sizes[i], attrs[i]) : CUDA_ERROR_INVALID_VALUE;
	return r;
}

/* Attaching changes who may touch the memory on devices without concurrent
 * access; in host memory both always may, so it is checked and moves
 * nothing; on the device (migrate.c) it is followed. */
static CUresult attach(CUstream s, CUdeviceptr p, size_t length, unsigned int flags, bool per_thread)
{
	struct managed m;
	uint32_t stream, ctx;
	CUresult r;

	if (!flags || (flags & ~(unsigned int)ATTACH_FLAGS) || (flags & (flags - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__stream_resolve(s, per_thread, &stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	/* The whole allocation (length 0) or a part of it from its start. */
	if (!find(p, length, &m) || (length == 0 && m.base != p))
		return CUDA_ERROR_INVALID_VALUE;
	/* On the device it decides what a launch moves and a fault waits for
	 * (migrate.c): the whole allocation's, at once. */
	if (m.on_device)
		mps__migrate_attach(m.base, flags, stream);
	return CUDA_SUCCESS;
}

static CUresult stream_attach_mem_async(CUstream s, CUdeviceptr p, size_t length, unsigned int flags)
{
	return attach(s, p, length, flags, false);
}

static CUresult stream_attach_mem_async_ptsz(CUstream s, CUdeviceptr p, size_t length, unsigned int flags)
{
	return attach(s, p, length, flags, true);
}

const struct mps_impl mps__managed_api[] = {
	MPS_IMPL(cuMemAllocManaged, mem_alloc_managed),
	MPS_IMPL(cuMemAdvise_v2, mem_advise_v2),
	MPS_IMPL_PFN(cuMemAdvise, PFN_cuMemAdvise_v8000, mem_advise_v1),
	MPS_IMPL(cuMemRangeGetAttribute, mem_range_get_attribute),
	MPS_IMPL(cuMemRangeGetAttributes, mem_range_get_attributes),
	MPS_IMPL(cuStreamAttachMemAsync, stream_attach_mem_async),
	MPS_IMPL_AS(cuStreamAttachMemAsync_ptsz, cuStreamAttachMemAsync, stream_attach_mem_async_ptsz),
	MPS_IMPL_END
};
