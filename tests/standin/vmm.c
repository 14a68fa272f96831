// SPDX-License-Identifier: MIT
/*
 * Virtual memory management: physical allocations, address reservations,
 * mappings, access, and sharing by POSIX file descriptor.
 *
 * A physical allocation is a memfd of its size, counted against its device
 * (so cuMemGetInfo falls by it) from cuMemCreate until it is both released
 * and unmapped. A reservation is inaccessible address space in the device
 * window (ranges.c); mapping puts the memfd's pages there (MAP_SHARED |
 * MAP_FIXED), still inaccessible until cuMemSetAccess opens them, and
 * records the mapping in the range table as device memory, so copies,
 * memsets and kernels reach it like any allocation. Unmapping waits for the
 * operations using the mapping, as cuMemFree does, then puts the
 * reservation back. An exported handle is a duplicate of the memfd; an
 * import makes a new allocation record on the same memory (charged to its
 * creator only). The granularity is 2 MiB, an H100's. Unlike the driver,
 * one copy or memset may not span two adjacent mappings: each is a range
 * of its own here.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "standin.h"

#define GRANULARITY (2ull << 20)

struct si_phys {
	uintptr_t handle;
	int fd;
	size_t size;
	int device;
	unsigned types;        /* requested handle types */
	unsigned refs;         /* handles the program holds */
	unsigned maps;         /* mappings */
	bool charged;          /* counted against the device (made here, not imported) */
};

struct si_vres {
	uintptr_t base;
	size_t size;
	struct si_vres *next;
};

static struct si_vres *reservations;   /* under the lock */

/* A physical allocation the program may name. Under the lock. */
static struct si_phys *phys_arg(CUmemGenericAllocationHandle h)
{
	struct si_phys *p = mps__handle_get((uintptr_t)h, SI_H_PHYS);

	return p && p->refs ? p : NULL;
}

/* Frees an allocation nobody holds or maps any more. Under the lock. */
static void phys_put(struct si_phys *p)
{
	if (p->refs || p->maps)
		return;
	mps__handle_remove(p->handle);
	if (p->charged)
		mps__devices[p->device].used_mem -= p->size;
	close(p->fd);
	free(p);
}

static CUresult prop_device(const CUmemAllocationProp *prop, int *device)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!mps__device(prop->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = prop->location.id;
	return CUDA_SUCCESS;
}

CU_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					      CUmemAllocationGranularity_flags option)
{
	int d;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	rc = prop_device(prop, &d);
	if (rc == CUDA_SUCCESS)
		*granularity = GRANULARITY;
	return rc;
}

/* A new allocation record on fd (taken), of device d. Under the lock. */
static struct si_phys *phys_new(int fd, size_t size, int d, unsigned types, bool charged)
{
	struct si_phys *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->fd = fd;
	p->size = size;
	p->device = d;
	p->types = types;
	p->refs = 1;
	p->charged = charged;
	p->handle = mps__handle_add(SI_H_PHYS, p);
	if (!p->handle) {
		free(p);
		return NULL;
	}
	if (charged)
		mps__devices[d].used_mem += size;
	return p;
}

CU_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			   unsigned long long flags)
{
	struct si_device *dev;
	struct si_phys *p;
	CUresult rc;
	int d = 0, fd;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || !size || size % GRANULARITY || flags)
		return CUDA_ERROR_INVALID_VALUE;
	rc = prop_device(prop, &d);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	fd = memfd_create("openmps-standin-vmm", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)size) < 0) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	mps__lock();
	dev = &mps__devices[d];
	if (size > dev->total_mem - dev->used_mem) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	} else if (!(p = phys_new(fd, size, d, prop->requestedHandleTypes, true))) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		*handle = p->handle;
		fd = -1;
	}
	mps__unlock();
	if (fd >= 0)
		close(fd);
	return rc;
}

CU_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct si_phys *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	p = phys_arg(handle);
	if (!p) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		p->refs--;
		phys_put(p);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	struct si_phys *p;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	p = phys_arg(handle);
	if (!p) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		memset(prop, 0, sizeof(*prop));
		prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop->requestedHandleTypes = (CUmemAllocationHandleType)p->types;
		prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop->location.id = p->device;
	}
	mps__unlock();
	return rc;
}

/* ---- reservations ---------------------------------------------------------- */

static struct si_vres *vres_of(uintptr_t addr, size_t size)
{
	for (struct si_vres *v = reservations; v; v = v->next)
		if (addr >= v->base && addr - v->base < v->size && size <= v->size - (addr - v->base))
			return v;
	return NULL;
}

CU_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				   unsigned long long flags)
{
	struct si_vres *v;
	void *p = NULL;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || !size || size % GRANULARITY || (alignment & (alignment - 1)) || flags)
		return CUDA_ERROR_INVALID_VALUE;
	v = calloc(1, sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (alignment < GRANULARITY)
		alignment = GRANULARITY;
	/* The address wished for, if it is free and aligned; else any. */
	if (addr && addr % alignment == 0) {
		p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != (void *)(uintptr_t)addr) {
			if (p != MAP_FAILED)
				munmap(p, size);
			p = NULL;
		}
	}
	mps__lock();
	if (!p)
		p = mps__window_reserve(size, alignment);
	if (p) {
		v->base = (uintptr_t)p;
		v->size = size;
		v->next = reservations;
		reservations = v;
		*ptr = (CUdeviceptr)v->base;
	}
	mps__unlock();
	if (!p)
		free(v);
	return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Whether a mapping lies in [addr, addr + size). Under the lock. */
static bool mapped_within(uintptr_t addr, size_t size)
{
	for (size_t off = 0; off < size; off += GRANULARITY) {
		struct si_range *r = mps__range_find(addr + off);

		if (r && r->kind == SI_RANGE_MAPPED)
			return true;
	}
	return false;
}

CU_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	for (struct si_vres **pv = &reservations; *pv; pv = &(*pv)->next) {
		struct si_vres *v = *pv;

		if (v->base != ptr || v->size != size)
			continue;
		if (!mapped_within(v->base, v->size)) {   /* as the driver: unmap first */
			*pv = v->next;
			munmap((void *)v->base, v->size);
			free(v);
			rc = CUDA_SUCCESS;
		}
		break;
	}
	mps__unlock();
	return rc;
}

/* ---- mappings --------------------------------------------------------------- */

CU_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			unsigned long long flags)
{
	struct si_context *ctx;
	struct si_range *r;
	struct si_phys *p;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!size || size % GRANULARITY || offset % GRANULARITY || ptr % GRANULARITY || flags)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	p = rc == CUDA_SUCCESS ? phys_arg(handle) : NULL;
	if (rc == CUDA_SUCCESS &&
	    (!p || offset > p->size || size > p->size - offset || !vres_of(ptr, size) || mapped_within(ptr, size)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS &&
	    mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) == MAP_FAILED)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		rc = mps__range_map(ctx, ptr, size, &r);
		if (rc == CUDA_SUCCESS) {
			r->block = p;
			p->maps++;
		} else {
			mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		}
	}
	mps__unlock();
	return rc;
}

/* The mappings that exactly cover [addr, addr + size), at most max of them,
 * into out; their count, or -1. Under the lock. */
static int mappings(uintptr_t addr, size_t size, struct si_range **out, int max)
{
	uintptr_t at = addr;
	int n = 0;

	while (at < addr + size) {
		struct si_range *r = mps__range_find(at);

		if (!r || r->kind != SI_RANGE_MAPPED || r->base != at || n == max)
			return -1;
		out[n++] = r;
		at += r->size;
	}
	return at == addr + size && n ? n : -1;
}

CU_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct si_range *r[64];
	int n;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	n = mappings(ptr, size, r, 64);
	/* Wait for the work submitted before, as cuMemFree does (the wait drops
	 * the lock: look again after it). */
	if (n > 0 && r[0]->ctx->state == SI_CTX_ACTIVE && r[0]->ctx->sticky == CUDA_SUCCESS) {
		mps__ctx_quiesce(r[0]->ctx);
		n = mappings(ptr, size, r, 64);
	}
	if (n < 0) {
		mps__unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* And for what still runs on them: pinned while it waits, the records
	 * outlive the wait. */
	for (int i = 0; i < n; i++) {
		r[i]->pins++;
		mps__range_remove(r[i]);
	}
	for (int i = 0; i < n; i++) {
		struct si_phys *p = r[i]->block;

		while (r[i]->pins > 1)
			mps__wait();
		mmap((void *)r[i]->base, r[i]->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		     -1, 0);
		p->maps--;
		phys_put(p);
		mps__range_unpin(r[i]);
	}
	mps__unlock();
	return CUDA_SUCCESS;
}

static int prot_of(CUmemAccess_flags f)
{
	return f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
	       : f == CU_MEM_ACCESS_FLAGS_PROT_READ   ? PROT_READ
						      : PROT_NONE;
}

CU_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	CUmemAccess_flags most = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	struct si_range *r[64];
	int n;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !mps__device(desc[i].location.id))
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
		if (desc[i].flags > most)
			most = desc[i].flags;   /* one address space: the widest right wins */
	}
	mps__lock();
	n = mappings(ptr, size, r, 64);
	for (int i = 0; i < n; i++) {
		mprotect((void *)r[i]->base, r[i]->size, prot_of(most));
		r[i]->flags = most;
	}
	mps__unlock();
	return n < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CU_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	struct si_range *r;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!flags || !location)
		return CUDA_ERROR_INVALID_VALUE;
	if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !mps__device(location->id))
		return CUDA_ERROR_INVALID_DEVICE;
	mps__lock();
	r = mps__range_find(ptr);
	if (!r || r->kind != SI_RANGE_MAPPED)
		rc = CUDA_ERROR_INVALID_VALUE;
	else
		*flags = r->flags;
	mps__unlock();
	return rc;
}

CU_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct si_range *r;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	r = mps__range_find((uintptr_t)addr);
	if (!r || r->kind != SI_RANGE_MAPPED) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {
		struct si_phys *p = r->block;

		p->refs++;
		*handle = p->handle;
	}
	mps__unlock();
	return rc;
}

/* ---- sharing ----------------------------------------------------------------- */

CU_API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
					     CUmemAllocationHandleType handleType, unsigned long long flags)
{
	struct si_phys *p;
	int fd = -1;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!shareableHandle || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	mps__lock();
	p = phys_arg(handle);
	if (!p || !(p->types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if ((fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0)) < 0)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	mps__unlock();
	if (rc == CUDA_SUCCESS)
		memcpy(shareableHandle, &fd, sizeof(fd));
	return rc;
}

CU_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					       CUmemAllocationHandleType shHandleType)
{
	int fd = (int)(intptr_t)osHandle, own;
	struct si_phys *p;
	struct stat st;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* Only memory made here: a memfd of a whole number of granules. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size % GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mps__lock();
	p = phys_new(own, (size_t)st.st_size, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, false);
	if (p)
		*handle = p->handle;
	mps__unlock();
	if (!p)
		close(own);
	return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
