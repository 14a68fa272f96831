// SPDX-License-Identifier: MIT
/*
 * The table of memory ranges the stand-in knows: device allocations, module
 * globals (both host memory we allocated, 256-byte aligned, so C twins can
 * use the addresses directly) and host registrations. It answers "which
 * allocation holds this address" for copies, memsets, address-range and
 * pointer-attribute queries and the kernels' fault checks, and counts each
 * device's memory.
 *
 * A sorted array of disjoint ranges, searched by binary search. Operations
 * running on a stream thread pin the ranges they touch; a range freed or
 * unregistered meanwhile leaves the table at once (so nothing new can find
 * it) and its storage goes when the last pin does, so no thread ever touches
 * freed memory. All calls are made under the stand-in lock.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "standin.h"

#define ALLOC_ALIGN 256

/* Device memory lives in its own window of the address space, as a real
 * driver's does (it reserves a range for unified addressing): so a device
 * address never equals a heap address of some other process, and a client
 * that keeps its own host memory elsewhere can tell the two apart. */
#define DEVICE_WINDOW 0x200000000000ull
#define PAGE          4096ull

static uintptr_t window_next = DEVICE_WINDOW;

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* ThreadSanitizer keeps its shadow where the window would be; under it,
 * device memory goes wherever the kernel puts it. */
#if defined(__SANITIZE_THREAD__)
#define WINDOW_OK 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WINDOW_OK 0
#endif
#endif
#ifndef WINDOW_OK
#define WINDOW_OK 1
#endif

static void *window_map(size_t bytes)
{
	size_t len = (bytes + PAGE - 1) & ~(PAGE - 1);

	if (!WINDOW_OK) {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		return p == MAP_FAILED ? NULL : p;
	}

	for (int tries = 0; tries < 64; tries++) {
		void *p = mmap((void *)window_next, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		if (p == (void *)window_next) {
			window_next += len + PAGE;   /* a guard page between blocks */
			return p;
		}
		if (p != MAP_FAILED)
			munmap(p, len);
		window_next += 1ull << 30;       /* taken: skip ahead */
	}
	return NULL;
}

static struct si_range **table;
static size_t nranges, capacity;
static uint64_t next_buffer_id = 1;

/* Index of the first range whose base is above addr. */
static size_t upper_bound(uintptr_t addr)
{
	size_t lo = 0, hi = nranges;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (table[mid]->base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int insert(struct si_range *r)
{
	size_t pos;

	if (nranges == capacity) {
		size_t n = capacity ? capacity * 2 : 64;
		struct si_range **t = realloc(table, n * sizeof(*t));

		if (!t)
			return -1;
		table = t;
		capacity = n;
	}
	pos = upper_bound(r->base);
	memmove(&table[pos + 1], &table[pos], (nranges - pos) * sizeof(*table));
	table[pos] = r;
	nranges++;
	return 0;
}

struct si_range *mps__range_find(uintptr_t addr)
{
	size_t i = upper_bound(addr);
	struct si_range *r;

	if (i == 0)
		return NULL;
	r = table[i - 1];
	return addr - r->base < r->size ? r : NULL;
}

int mps__range_classify(uintptr_t addr, size_t bytes, struct si_range **out)
{
	struct si_range *r = mps__range_find(addr);

	if (!r)
		return 0;
	if (bytes > r->size - (addr - r->base))
		return -1;
	*out = r;
	return 1;
}

static void destroy(struct si_range *r)
{
	if (r->kind == SI_RANGE_DEVICE || r->kind == SI_RANGE_GLOBAL)
		munmap(r->block, r->mapped);
	else if (r->kind != SI_RANGE_MAPPED)   /* a mapping's memory is vmm.c's */
		free(r->block);
	free(r);
}

void *mps__window_reserve(size_t bytes, size_t align)
{
	size_t len = (bytes + PAGE - 1) & ~(PAGE - 1);
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

	if (align < PAGE)
		align = PAGE;
	if (!WINDOW_OK) {
		/* Over-reserve and trim to the alignment. */
		uint8_t *p = mmap(NULL, len + align, PROT_NONE, flags, -1, 0);
		uintptr_t at;

		if (p == MAP_FAILED)
			return NULL;
		at = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
		if (at > (uintptr_t)p)
			munmap(p, at - (uintptr_t)p);
		munmap((void *)(at + len), (uintptr_t)p + len + align - (at + len));
		return (void *)at;
	}
	for (int tries = 0; tries < 64; tries++) {
		uintptr_t at = (window_next + align - 1) & ~(uintptr_t)(align - 1);
		void *p = mmap((void *)at, len, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);

		if (p == (void *)at) {
			window_next = at + len + PAGE;
			return p;
		}
		if (p != MAP_FAILED)
			munmap(p, len);
		window_next = at + (1ull << 30);
	}
	return NULL;
}

CUresult mps__range_map(struct si_context *ctx, uintptr_t base, size_t bytes, struct si_range **out)
{
	struct si_range *r = calloc(1, sizeof(*r));

	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->base = base;
	r->size = bytes;
	r->kind = SI_RANGE_MAPPED;
	r->ctx = ctx;
	r->buffer_id = next_buffer_id++;
	if (insert(r) < 0) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = r;
	return CUDA_SUCCESS;
}

CUresult mps__range_alloc(struct si_context *ctx, size_t bytes, enum si_range_kind kind,
			  struct si_range **out)
{
	struct si_device *dev = &mps__devices[ctx->device];
	size_t charged;
	struct si_range *r;
	void *block;

	if (bytes > dev->total_mem - dev->used_mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	charged = (bytes + ALLOC_ALIGN - 1) & ~(size_t)(ALLOC_ALIGN - 1);
	if (charged > dev->total_mem - dev->used_mem)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	block = window_map(charged);   /* zeroed, page-aligned */
	if (!block) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->base = (uintptr_t)block;
	r->size = bytes;
	r->kind = kind;
	r->ctx = ctx;
	r->buffer_id = next_buffer_id++;
	r->block = block;
	r->mapped = (charged + PAGE - 1) & ~(PAGE - 1);
	r->charged = charged;
	if (insert(r) < 0) {
		destroy(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	dev->used_mem += charged;
	*out = r;
	return CUDA_SUCCESS;
}

CUresult mps__range_register(struct si_context *ctx, void *p, size_t bytes, unsigned flags,
			     struct si_range **out)
{
	uintptr_t base = (uintptr_t)p;
	size_t i;
	struct si_range *r;

	if (base + bytes < base)
		return CUDA_ERROR_INVALID_VALUE;
	/* Ranges are disjoint and sorted: only the one at or below base and
	 * the one after it can overlap [base, base + bytes). */
	i = upper_bound(base);
	for (size_t k = i ? i - 1 : 0; k < nranges && k <= i; k++) {
		struct si_range *o = table[k];

		if (o->base < base + bytes && base < o->base + o->size)
			return o->kind == SI_RANGE_HOST ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
							: CUDA_ERROR_INVALID_VALUE;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->base = base;
	r->size = bytes;
	r->kind = SI_RANGE_HOST;
	r->ctx = ctx;
	r->buffer_id = next_buffer_id++;
	r->flags = flags;
	if (insert(r) < 0) {
		free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = r;
	return CUDA_SUCCESS;
}

void mps__range_remove(struct si_range *r)
{
	size_t i = upper_bound(r->base);

	if (i && table[i - 1] == r) {
		memmove(&table[i - 1], &table[i], (nranges - i) * sizeof(*table));
		nranges--;
	}
	mps__devices[r->ctx->device].used_mem -= r->charged;
	r->charged = 0;
	mps__pool_freed(r);
	r->removed = true;
	if (!r->pins)
		destroy(r);
}

struct si_range *mps__range_pin(uintptr_t addr, size_t bytes, int device)
{
	struct si_range *r;

	if (mps__range_classify(addr, bytes, &r) != 1)
		return NULL;
	if (device >= 0 && r->kind != SI_RANGE_HOST && r->ctx->device != device &&
	    !mps__peer_enabled(device, r->ctx->device))
		return NULL;
	r->pins++;
	return r;
}

void mps__range_unpin(struct si_range *r)
{
	if (--r->pins == 0 && r->removed)
		destroy(r);
	mps__progress();        /* an unregister may be waiting for the pins to drain */
}

void mps__ranges_drop_context(struct si_context *ctx)
{
	for (size_t i = nranges; i-- > 0;) {
		struct si_range *r = table[i];

		/* Globals belong to their module, mappings to their reservation. */
		if (r->ctx == ctx && r->kind != SI_RANGE_GLOBAL && r->kind != SI_RANGE_MAPPED)
			mps__range_remove(r);
	}
}
