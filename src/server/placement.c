// SPDX-License-Identifier: MIT
/*
 * See placement.h. Per device: the reserved range, its granularity, and a
 * bitmap of the slots mapped; the chunks mapped for clients, each with its
 * owner and a bit per granule given out; the granules carved for small
 * allocations, each with its owner, its chunk and a bitmap of its 512-byte
 * units; one sorted array of the placed allocations (base, size, device,
 * granule if carved, chunk if taken from one) for frees. One lock over
 * all, never held across a driver call that waits for the GPU.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "common/atomics.h"
#include "common/env.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/placement.h"
#include "server/server.h"

#define TRIES   64     /* random slots looked at before an allocation goes to the driver */
#define MIN_GIB 64     /* the smallest range worth reserving (15 bits of 2 MiB slots) */
#define UNIT    512    /* a carved allocation's alignment and size step (cuMemAlloc's alignment) */
#define CHUNK_MAX 256  /* granules a chunk holds at most (a bit each) */

/* Host mappings: pages in [HOST_LO, HOST_HI), under the 47 bits of user
 * space x86-64 gives and the 48 arm64 does; the kernel puts mappings of
 * its own choosing near the top, far above. */
#define HOST_LO    (1ull << 44)
#define HOST_HI    (1ull << 46)
#define HOST_GUARD (1ull << 20)   /* free on either side when mapped */
#define HOST_TRIES 8
#define PAGE       4096ull

/* ThreadSanitizer keeps a program's memory to ranges of its own and takes
 * any other address for its bookkeeping: in such a build host mappings
 * stay where the kernel puts them. */
#if defined(__SANITIZE_THREAD__)
#define HOST_PLACEABLE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOST_PLACEABLE 0
#endif
#endif
#ifndef HOST_PLACEABLE
#define HOST_PLACEABLE 1
#endif

struct space {
	bool on;
	bool rdma;         /* memory made so that NICs can reach it (GPUDirect RDMA), as cuMemAlloc's */
	CUstream zero;     /* the server's own, for clearing new allocations ... */
	CUevent cleared;   /* ... recorded there after each clear */
	CUdeviceptr base;
	uint64_t size, gran, nslots;
	uint64_t *used;    /* a bit per slot */
};

/* Granules mapped at once for one client on one device, at random slots
 * with a free slot on either side: its allocations of up to CHUNK_MAX
 * granules, and the granules its small allocations are carved from, are
 * taken from its chunks, so that mapping memory is paid once a chunk: on
 * an H200 making and mapping 2 MiB costs ~53 µs (set access alone 36) and
 * 64 MiB ~65, about as much, so chunks of up to 512 MiB make a client's
 * 64 MiB blocks cheaper than the driver's cuMemAlloc too. A new chunk is
 * as large as what the client holds on the device in chunks already (at
 * least what is asked, at most CHUNK_MAX granules): it holds at most as
 * much unused as it uses, and a chunk a handful of its allocations. A
 * granule given back stays the client's, its bytes its own, until the
 * whole chunk is free and goes. */
struct chunk {
	struct chunk *next;
	CUdeviceptr base;
	uint64_t owner;
	int device;
	uint32_t ngran;
	uint32_t ntaken;                  /* granules given out ... */
	uint64_t taken[CHUNK_MAX / 64];   /* ... a bit each */
};

/* A granule of one client's, holding its small allocations. */
struct granule {
	struct granule *next;
	CUdeviceptr base;
	struct chunk *c;        /* what it was taken from */
	uint64_t owner;
	int device;
	uint32_t units, used;   /* of UNIT bytes: in it, taken */
	uint64_t map[];         /* a bit per unit, set when taken */
};

struct placed {
	CUdeviceptr base;
	uint64_t size;
	int device;
	struct granule *g;      /* carved from it, or NULL */
	struct chunk *c;        /* granules of it, or NULL (carved, or mapped whole) */
	uint64_t id;            /* its buffer id (mps_place_id) */
};

/* A client's address reservation, its slots taken. */
struct resv {
	CUdeviceptr base;
	uint64_t size;
	int device;
};

static struct space space[MPS_MAX_DEVICES];
static struct resv *resvs;
static size_t nresvs, cap_resvs;
static uint64_t n_reserves;   /* atomic */
static struct granule *granules;
static struct chunk *chunks;
static struct placed *placed;
static size_t nplaced, cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t n_allocs, n_bytes, n_fallbacks;   /* atomic */
static uint64_t next_id = 1ull << 62;              /* buffer ids, under the lock: far from the driver's */
static bool host_on;                                /* set once, before any client */
static uint64_t n_host_maps, n_host_fallbacks;      /* atomic */
static int host_warned;                             /* atomic */

static bool slot_used(const struct space *s, uint64_t i)
{
	return s->used[i / 64] >> (i % 64) & 1;
}

/* Sets or clears bits [first, first + n) of map. */
static void bits_set(uint64_t *map, uint64_t first, uint64_t n, bool on)
{
	for (uint64_t i = first; i < first + n; i++) {
		if (on)
			map[i / 64] |= 1ull << (i % 64);
		else
			map[i / 64] &= ~(1ull << (i % 64));
	}
}

static void slots_set(struct space *s, uint64_t first, uint64_t n, bool used)
{
	bits_set(s->used, first, n, used);
}

/* Whether slots [first - 1, first + n] are all free: the n slots and an
 * unmapped one on each side. */
static bool run_free(const struct space *s, uint64_t first, uint64_t n)
{
	for (uint64_t i = first - 1; i <= first + n; i++)
		if (slot_used(s, i))
			return false;
	return true;
}

static uint64_t random64(void)
{
	uint64_t v = 0;

	while (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		;   /* interrupted; the kernel's pool is ready long before a server starts */
	return v;
}

static void reserve(int d)
{
	struct space *s = &space[d];
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
						   .id = mps_srv.dev[d].dev } };
	long gib = mps_env_long("OPENMPS_PLACEMENT_GIB", 4096, MIN_GIB, 1L << 20);
	size_t gran = 0;
	CUresult r;

	r = mps_drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS || !gran || (gran & (gran - 1))) {
		mps_log_warn("device %d: no allocation granularity (%s): allocations placed by the driver", d,
			     mps_driver_errname(r));
		return;
	}
	/* The largest range the driver grants, from the one asked down. */
	for (; gib >= MIN_GIB; gib /= 2) {
		uint64_t size = (uint64_t)gib << 30;

		size -= size % gran;
		r = mps_drv.cuMemAddressReserve(&s->base, (size_t)size, gran, 0, 0);
		if (r == CUDA_SUCCESS) {
			s->size = size;
			break;
		}
	}
	if (!s->size) {
		mps_log_warn("device %d: no address range to place allocations in (%s): placed by the driver", d,
			     mps_driver_errname(r));
		return;
	}
	s->gran = gran;
	s->nslots = s->size / gran;
	s->used = calloc((s->nslots + 63) / 64, sizeof(uint64_t));
	r = s->used ? mps_drv.cuStreamCreateWithPriority(&s->zero, CU_STREAM_NON_BLOCKING, 0) : CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS && (r = mps_drv.cuEventCreate(&s->cleared, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
		mps_drv.cuStreamDestroy(s->zero);
	if (r != CUDA_SUCCESS) {
		mps_log_warn("device %d: cannot set up random placement (%s)", d, mps_driver_errname(r));
		free(s->used);
		s->used = NULL;
		mps_drv.cuMemAddressFree(s->base, (size_t)s->size);
		return;
	}
	/* cuMemAlloc's memory can be registered with a NIC; a physical
	 * allocation only when made so, where the device allows it. */
	{
		int v = 0;

		s->rdma = mps_drv.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
						       mps_srv.dev[d].dev) == CUDA_SUCCESS && v;
	}
	s->on = true;
	mps_log_info("device %d: client allocations placed at random in %llu GiB (%llu slots of %llu KiB)", d,
		     (unsigned long long)(s->size >> 30), (unsigned long long)s->nslots,
		     (unsigned long long)(gran >> 10));
}

void mps_place_init(void)
{
	const char *v = getenv("OPENMPS_PLACEMENT");

	if (!v || !*v || !strcmp(v, "driver"))
		return;
	if (strcmp(v, "random")) {
		mps_log_warn("ignoring OPENMPS_PLACEMENT=%s (want driver or random)", v);
		return;
	}
	host_on = HOST_PLACEABLE;
	if (host_on)
		mps_log_info("host memory the GPU reaches mapped at random in [%llu, %llu) TiB", HOST_LO >> 40,
			     HOST_HI >> 40);
	else
		mps_log_info("host memory the GPU reaches mapped where the kernel puts it (a TSan build)");
	if (!mps_drv.cuMemCreate || !mps_drv.cuMemMap || !mps_drv.cuMemAddressReserve || !mps_drv.cuMemSetAccess ||
	    !mps_drv.cuMemGetAllocationGranularity) {
		mps_log_warn("OPENMPS_PLACEMENT=random: the driver has no virtual memory management; not placing");
		return;
	}
	for (int d = 0; d < mps_srv.ndev; d++) {
		mps_drv.cuCtxSetCurrent(mps_srv.dev[d].primary);
		reserve(d);
	}
	if (mps_srv.ndev)
		mps_drv.cuCtxSetCurrent(mps_srv.dev[0].primary);
}

bool mps_place_on(int device)
{
	return device >= 0 && device < mps_srv.ndev && space[device].on;
}

CUevent mps_place_cleared(int device)
{
	return space[device].cleared;
}

/* Takes n free slots of s, with a free one on each side, whose address is
 * a multiple of step slots (1: any), at random: the first slot, or
 * UINT64_MAX if TRIES draws found none. Under the lock. */
static uint64_t take_aligned(struct space *s, uint64_t n, uint64_t step)
{
	uint64_t skew = (s->base / s->gran) % step;

	if (n + step + 1 > s->nslots)
		return UINT64_MAX;
	for (int t = 0; t < TRIES; t++) {
		/* Drawn so that, moved up to the next slot whose address is a
		 * multiple of the step, a free slot still follows the run. */
		uint64_t first = 1 + random64() % (s->nslots - n - step);

		first += (step - (skew + first) % step) % step;
		if (run_free(s, first, n)) {
			slots_set(s, first, n, true);
			return first;
		}
	}
	return UINT64_MAX;
}

static uint64_t take(struct space *s, uint64_t n)
{
	return take_aligned(s, n, 1);
}

CUresult mps_place_reserve(int device, uint64_t size, uint64_t align, CUdeviceptr *at)
{
	struct space *s;
	uint64_t first, step;

	if (!mps_place_on(device))
		return CUDA_ERROR_NOT_SUPPORTED;
	s = &space[device];
	/* The driver's answers for sizes and alignments not of whole granules. */
	if (!size || size % s->gran || (align > s->gran && align % s->gran) || (align && (align & (align - 1))))
		return CUDA_ERROR_NOT_SUPPORTED;
	step = align > s->gran ? align / s->gran : 1;
	pthread_mutex_lock(&lock);
	if (nresvs == cap_resvs) {
		size_t ncap = cap_resvs ? 2 * cap_resvs : 16;
		struct resv *v = realloc(resvs, ncap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		resvs = v;
		cap_resvs = ncap;
	}
	first = take_aligned(s, size / s->gran, step);
	if (first == UINT64_MAX) {
		pthread_mutex_unlock(&lock);
		mps_fetch_add(&n_fallbacks, 1);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	*at = s->base + first * s->gran;
	resvs[nresvs++] = (struct resv){ *at, size, device };
	pthread_mutex_unlock(&lock);
	mps_fetch_add(&n_reserves, 1);
	return CUDA_SUCCESS;
}

bool mps_place_unreserve(CUdeviceptr at, uint64_t size)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nresvs; i++) {
		struct space *s = &space[resvs[i].device];

		if (resvs[i].base != at || resvs[i].size != size)
			continue;
		slots_set(s, (at - s->base) / s->gran, size / s->gran, false);
		resvs[i] = resvs[--nresvs];
		found = true;
		break;
	}
	pthread_mutex_unlock(&lock);
	return found;
}

uint64_t mps_place_reserve_stats(void)
{
	return mps_load_relaxed(&n_reserves);
}

/* How many placed allocations start at or before p (the array is sorted
 * by base): the one holding p, if any, is the last of them. Under the lock. */
static size_t upto(CUdeviceptr p)
{
	size_t lo = 0, hi = nplaced;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (placed[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Records a placed allocation, keeping the array sorted by base. */
static int record(CUdeviceptr base, uint64_t size, int device, struct granule *g, struct chunk *c)
{
	size_t at;

	if (nplaced == cap) {
		size_t ncap = cap ? cap * 2 : 64;
		struct placed *p = realloc(placed, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		placed = p;
		cap = ncap;
	}
	at = upto(base);
	memmove(&placed[at + 1], &placed[at], (nplaced - at) * sizeof(*placed));
	placed[at] = (struct placed){ base, size, device, g, c, next_id++ };
	nplaced++;
	return 0;
}

/* The index of the placed allocation starting at base, or -1. */
static long find(CUdeviceptr base)
{
	size_t i = upto(base);

	return i && placed[i - 1].base == base ? (long)(i - 1) : -1;
}

/* Read and write access for device d and every device that reaches d's
 * memory (device.c enabled peer access once for all). */
static unsigned int access_list(int d, CUmemAccessDesc *desc)
{
	unsigned int n = 0;

	for (int i = 0; i < mps_srv.ndev; i++)
		if (i == d || (mps_srv.dev[i].info.peers & (1u << d)))
			desc[n++] = (CUmemAccessDesc){ .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
								     .id = mps_srv.dev[i].dev },
						       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	return n;
}

/* Maps `size` bytes (whole granules) of new physical memory at random
 * slots of device's range; *at its address. The memory is cleared on the
 * device's own stream, which the call does not wait for: the client's work
 * waits for the clear (mps_place_cleared), and a mapping that goes waits
 * for it first (unmap). A 64 MiB clear is ~22 µs of GPU time. */
static CUresult map_new(int device, uint64_t size, CUdeviceptr *at)
{
	struct space *s = &space[device];
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
						   .id = mps_srv.dev[device].dev } };
	CUmemAccessDesc desc[MPS_MAX_DEVICES];
	CUmemGenericAllocationHandle h;
	uint64_t first;
	CUresult r;

	pthread_mutex_lock(&lock);
	first = take(s, size / s->gran);
	pthread_mutex_unlock(&lock);
	if (first == UINT64_MAX) {
		mps_fetch_add(&n_fallbacks, 1);
		return CUDA_ERROR_NOT_SUPPORTED;   /* the caller asks the driver */
	}
	*at = s->base + first * s->gran;
	prop.allocFlags.gpuDirectRDMACapable = mps_load_relaxed(&s->rdma);
	r = mps_drv.cuMemCreate(&h, (size_t)size, &prop, 0);
	if (r != CUDA_SUCCESS && prop.allocFlags.gpuDirectRDMACapable && r != CUDA_ERROR_OUT_OF_MEMORY) {
		/* Refused made so: made as before, and not asked again. */
		mps_store_relaxed(&s->rdma, false);
		mps_log_warn("device %d: placed memory made without GPUDirect RDMA (%s)", device, mps_driver_errname(r));
		prop.allocFlags.gpuDirectRDMACapable = 0;
		r = mps_drv.cuMemCreate(&h, (size_t)size, &prop, 0);
	}
	if (r != CUDA_SUCCESS)
		goto unslot;
	r = mps_drv.cuMemMap(*at, (size_t)size, 0, h, 0);
	mps_drv.cuMemRelease(h);   /* the mapping keeps the memory until it goes */
	if (r != CUDA_SUCCESS)
		goto unslot;
	r = mps_drv.cuMemSetAccess(*at, (size_t)size, desc, access_list(device, desc));
	/* Cleared, so nothing of an earlier client's memory can be read in
	 * it, whatever the driver gives a new physical allocation. Records
	 * from several threads: each comes after its own clear, so the
	 * latest, whichever it is, comes after every clear of a call that
	 * has returned. */
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemsetD8Async(*at, 0, (size_t)size, s->zero);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuEventRecord(s->cleared, s->zero);
	if (r != CUDA_SUCCESS)
		goto unmap;
	mps_fetch_add(&n_bytes, size);
	return CUDA_SUCCESS;

unmap:
	mps_drv.cuMemUnmap(*at, (size_t)size);
unslot:
	pthread_mutex_lock(&lock);
	slots_set(s, first, size / s->gran, false);
	pthread_mutex_unlock(&lock);
	return r;
}

/* Gives a mapping back: its slots free again. */
static CUresult unmap(int device, CUdeviceptr at, uint64_t size)
{
	struct space *s = &space[device];
	CUresult r;

	/* Its clear may still be under way (freed with no work since). */
	mps_drv.cuEventSynchronize(s->cleared);
	r = mps_drv.cuMemUnmap(at, (size_t)size);

	if (r != CUDA_SUCCESS) {
		mps_log_error("device %d: placed memory at %#llx did not go (%s); its slots stay taken", device,
			      (unsigned long long)at, mps_driver_errname(r));
		return r;
	}
	pthread_mutex_lock(&lock);
	slots_set(s, (at - s->base) / s->gran, size / s->gran, false);
	pthread_mutex_unlock(&lock);
	mps_fetch_add(&n_bytes, -size);
	return CUDA_SUCCESS;
}

/* The last bit set of map in [first, first + n), or -1 if none is. */
static long last_set(const uint64_t *map, uint32_t first, uint32_t n)
{
	for (uint32_t i = first + n; i-- > first;)
		if (map[i / 64] >> (i % 64) & 1)
			return i;
	return -1;
}

/* n granules in a row of one of owner's chunks on device: taken, and
 * their address (*out their chunk), or 0 if none has room. Under the
 * lock. */
static CUdeviceptr chunk_take(uint64_t owner, int device, uint32_t n, struct chunk **out)
{
	for (struct chunk *c = chunks; c; c = c->next) {
		if (c->owner != owner || c->device != device || c->ngran - c->ntaken < n)
			continue;
		for (uint32_t i = 0; i + n <= c->ngran;) {
			long busy = last_set(c->taken, i, n);

			if (busy >= 0) {   /* no run of n starts at or before it */
				i = (uint32_t)busy + 1;
				continue;
			}
			bits_set(c->taken, i, n, true);
			c->ntaken += n;
			*out = c;
			return c->base + (uint64_t)i * space[device].gran;
		}
	}
	return 0;
}

/* n granules for owner on device, from a chunk of its own, a new one
 * mapped when none has room (*clearing set) with at most `spare` bytes
 * more than asked. */
static CUresult granules_get(int device, uint64_t owner, uint32_t n, uint64_t spare, CUdeviceptr *at,
			     struct chunk **out, bool *clearing)
{
	struct space *s = &space[device];
	uint64_t held = 0;
	struct chunk *c;
	uint32_t want;
	CUresult r;

	pthread_mutex_lock(&lock);
	*at = chunk_take(owner, device, n, out);
	for (c = chunks; c && !*at; c = c->next)
		if (c->owner == owner && c->device == device)
			held += c->ngran;
	pthread_mutex_unlock(&lock);
	if (*at)
		return CUDA_SUCCESS;
	want = (uint32_t)(held < n ? n : held > CHUNK_MAX ? CHUNK_MAX : held);
	if (want - n > spare / s->gran)
		want = n + (uint32_t)(spare / s->gran);
	if (want > n) {
		/* No spare on a device short of memory: granules a client holds
		 * unused are no one else's until its chunk goes. */
		size_t free_b = 0, total_b = 0;

		if (mps_drv.cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS || free_b < total_b / 8 ||
		    free_b - total_b / 8 < (uint64_t)want * s->gran)
			want = n;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = map_new(device, (uint64_t)want * s->gran, &c->base);
	if ((r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_NOT_SUPPORTED) && want > n) {
		want = n;   /* no room for the spare: just what is asked */
		r = map_new(device, (uint64_t)want * s->gran, &c->base);
	}
	if (r != CUDA_SUCCESS) {
		free(c);
		return r;
	}
	*clearing = true;
	c->owner = owner;
	c->device = device;
	c->ngran = want;
	bits_set(c->taken, 0, n, true);
	c->ntaken = n;
	pthread_mutex_lock(&lock);
	c->next = chunks;
	chunks = c;
	pthread_mutex_unlock(&lock);
	*at = c->base;
	*out = c;
	return CUDA_SUCCESS;
}

/* Gives n granules at `at` back to c; true if c is left with none given
 * out, and out of the list (the caller unmaps and frees it). Under the
 * lock. */
static bool granules_put(struct chunk *c, CUdeviceptr at, uint32_t n)
{
	bits_set(c->taken, (at - c->base) / space[c->device].gran, n, false);
	c->ntaken -= n;
	if (c->ntaken)
		return false;
	for (struct chunk **pp = &chunks; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	return true;
}

/* Unmaps a chunk that granules_put emptied. */
static CUresult chunk_drop(struct chunk *c)
{
	CUresult r = unmap(c->device, c->base, (uint64_t)c->ngran * space[c->device].gran);

	free(c);
	return r;
}

/* The first run of n free units of g, or UINT32_MAX. Under the lock. */
static uint32_t units_find(const struct granule *g, uint32_t n)
{
	uint32_t run = 0;

	for (uint32_t i = 0; i < g->units; i++) {
		run = g->map[i / 64] >> (i % 64) & 1 ? 0 : run + 1;
		if (run == n)
			return i + 1 - n;
	}
	return UINT32_MAX;
}

static void units_set(struct granule *g, uint32_t first, uint32_t n, bool taken)
{
	bits_set(g->map, first, n, taken);
	g->used = taken ? g->used + n : g->used - n;
}

/* Takes granule g out of the list once its last allocation went; true if
 * it was (the caller unmaps it). Under the lock. */
static bool granule_empty(struct granule *g)
{
	if (g->used)
		return false;
	for (struct granule **pp = &granules; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	return true;
}

/* Takes n units in one of owner's granules on device that has them, and
 * records the allocation there; 0 if none has room. Under the lock. */
static CUdeviceptr carve(uint64_t owner, int device, uint32_t n)
{
	for (struct granule *g = granules; g; g = g->next) {
		uint32_t first;
		CUdeviceptr at;

		if (g->owner != owner || g->device != device || g->units - g->used < n)
			continue;
		first = units_find(g, n);
		if (first == UINT32_MAX)
			continue;
		at = g->base + (uint64_t)first * UNIT;
		if (record(at, (uint64_t)n * UNIT, device, g, NULL) < 0)
			return 0;
		units_set(g, first, n, true);
		return at;
	}
	return 0;
}

/* A small allocation: in a granule of the owner's own, never beside
 * another client's data; a new granule when none of its has room. */
static CUresult place_small(uint64_t owner, int device, uint64_t bytes, uint64_t spare, CUdeviceptr *ptr,
			    uint64_t *mapped, bool *clearing)
{
	struct space *s = &space[device];
	uint32_t n = (uint32_t)((bytes + UNIT - 1) / UNIT);
	struct granule *g;
	CUdeviceptr at;
	CUresult r;

	pthread_mutex_lock(&lock);
	at = carve(owner, device, n);
	pthread_mutex_unlock(&lock);
	if (!at) {
		g = calloc(1, sizeof(*g) + (s->gran / UNIT + 63) / 64 * sizeof(uint64_t));
		if (!g)
			return CUDA_ERROR_OUT_OF_MEMORY;
		r = granules_get(device, owner, 1, spare, &g->base, &g->c, clearing);
		if (r != CUDA_SUCCESS) {
			free(g);
			return r;
		}
		g->owner = owner;
		g->device = device;
		g->units = (uint32_t)(s->gran / UNIT);
		pthread_mutex_lock(&lock);
		g->next = granules;
		granules = g;
		at = carve(owner, device, n);
		/* Left empty (the record failed, or another granule of the
		 * owner's made meanwhile had room): nothing would free it. */
		if (!granule_empty(g))
			g = NULL;
		else if (!granules_put(g->c, g->base, 1))
			g->c = NULL;
		pthread_mutex_unlock(&lock);
		if (g) {
			if (g->c)
				chunk_drop(g->c);
			free(g);
		}
		if (!at)   /* only the record can fail */
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	mps_fetch_add(&n_allocs, 1);
	*ptr = at;
	*mapped = (uint64_t)n * UNIT;
	return CUDA_SUCCESS;
}

CUresult mps_place_alloc(int device, uint64_t owner, uint64_t bytes, uint64_t spare, CUdeviceptr *ptr,
			 uint64_t *mapped, bool *clearing)
{
	struct space *s = &space[device];
	uint64_t size;
	CUdeviceptr at;
	CUresult r;

	if (!mps_place_on(device) || !bytes || bytes > UINT64_MAX - s->gran)
		return CUDA_ERROR_INVALID_VALUE;
	if (bytes <= s->gran / 2)
		return place_small(owner, device, bytes, spare, ptr, mapped, clearing);
	size = (bytes + s->gran - 1) / s->gran * s->gran;
	if (size / s->gran <= CHUNK_MAX) {
		uint32_t n = (uint32_t)(size / s->gran);
		struct chunk *c;
		bool empty;

		r = granules_get(device, owner, n, spare, &at, &c, clearing);
		if (r != CUDA_SUCCESS)
			return r;
		pthread_mutex_lock(&lock);
		if (record(at, size, device, NULL, c) < 0) {
			empty = granules_put(c, at, n);
			pthread_mutex_unlock(&lock);
			if (empty)
				chunk_drop(c);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		pthread_mutex_unlock(&lock);
	} else {
		r = map_new(device, size, &at);
		if (r != CUDA_SUCCESS)
			return r;
		*clearing = true;
		pthread_mutex_lock(&lock);
		if (record(at, size, device, NULL, NULL) < 0) {
			pthread_mutex_unlock(&lock);
			unmap(device, at, size);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		pthread_mutex_unlock(&lock);
	}
	mps_fetch_add(&n_allocs, 1);
	*ptr = at;
	*mapped = size;
	return CUDA_SUCCESS;
}

bool mps_place_free(CUdeviceptr p, bool idle, CUresult *r)
{
	struct granule *gone = NULL;
	struct chunk *empty = NULL;
	struct placed a;
	long i;

	pthread_mutex_lock(&lock);
	i = find(p);
	if (i < 0) {
		pthread_mutex_unlock(&lock);
		return false;
	}
	a = placed[i];
	memmove(&placed[i], &placed[i + 1], (nplaced - (size_t)i - 1) * sizeof(*placed));
	nplaced--;
	pthread_mutex_unlock(&lock);
	/* The work that may use it ends before the memory goes, or before the
	 * owner can be given the same units again. */
	*r = idle ? CUDA_SUCCESS : mps_drv.cuCtxSynchronize();
	if (*r != CUDA_SUCCESS) {
		mps_log_error("device %d: placed memory at %#llx kept: the device failed (%s)", a.device,
			      (unsigned long long)a.base, mps_driver_errname(*r));
		return true;
	}
	if (!a.g && !a.c) {
		*r = unmap(a.device, a.base, a.size);
		return true;
	}
	pthread_mutex_lock(&lock);
	if (a.c) {
		if (granules_put(a.c, a.base, (uint32_t)(a.size / space[a.device].gran)))
			empty = a.c;
	} else {
		units_set(a.g, (uint32_t)((a.base - a.g->base) / UNIT), (uint32_t)(a.size / UNIT), false);
		if (granule_empty(a.g)) {
			gone = a.g;
			if (granules_put(gone->c, gone->base, 1))
				empty = gone->c;
		}
	}
	pthread_mutex_unlock(&lock);
	free(gone);
	if (empty)
		*r = chunk_drop(empty);
	return true;
}

bool mps_place_id(CUdeviceptr p, uint64_t *id)
{
	bool in;
	size_t i;

	pthread_mutex_lock(&lock);
	i = upto(p);
	in = i && p - placed[i - 1].base < placed[i - 1].size;
	if (in)
		*id = placed[i - 1].id;
	pthread_mutex_unlock(&lock);
	return in;
}

bool mps_place_is(CUdeviceptr p)
{
	bool is;

	pthread_mutex_lock(&lock);
	is = find(p) >= 0;
	pthread_mutex_unlock(&lock);
	return is;
}

CUresult mps_place_mem_free(CUdeviceptr p, bool idle)
{
	CUresult r;

	if (mps_place_free(p, idle, &r))
		return r;
	return mps_drv.cuMemFree(p);
}

/* Whether [at - HOST_GUARD, at + size + HOST_GUARD) is free: held for a
 * moment without memory behind it, then let go. */
static bool host_room(uint64_t at, size_t size)
{
	void *want = (void *)(uintptr_t)(at - HOST_GUARD);
	size_t span = size + 2 * HOST_GUARD;
	void *p = mmap(want, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return false;
	munmap(p, span);
	return p == want;   /* an old kernel takes MAP_FIXED_NOREPLACE as a hint */
}

void *mps_place_host_map(int fd, size_t size)
{
	int flags = fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS;
	uint64_t pages;
	void *p;

	size = (size + PAGE - 1) & ~(PAGE - 1);
	if (host_on && size && size <= (HOST_HI - HOST_LO) / 2) {
		pages = (HOST_HI - HOST_LO - size - 2 * HOST_GUARD) / PAGE;
		for (int i = 0; i < HOST_TRIES; i++) {
			uint64_t at = HOST_LO + HOST_GUARD + random64() % pages * PAGE;

			if (!host_room(at, size))
				continue;
			/* Another thread may map there in between: never over it. */
			p = mmap((void *)(uintptr_t)at, size, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, fd, 0);
			if (p == (void *)(uintptr_t)at) {
				mps_fetch_add(&n_host_maps, 1);
				return p;
			}
			if (p != MAP_FAILED)
				munmap(p, size);
		}
		mps_fetch_add(&n_host_fallbacks, 1);
		if (!mps_fetch_add(&host_warned, 1))
			mps_log_warn("no free random place for %zu bytes of host memory in %d tries: where the kernel "
				     "puts it (said once)", size, HOST_TRIES);
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void mps_place_host_stats(uint64_t *maps, uint64_t *fallbacks)
{
	*maps = mps_load_relaxed(&n_host_maps);
	*fallbacks = mps_load_relaxed(&n_host_fallbacks);
}

void mps_place_stats(uint64_t *allocs, uint64_t *bytes, uint64_t *fallbacks)
{
	*allocs = mps_load_relaxed(&n_allocs);
	*bytes = mps_load_relaxed(&n_bytes);
	*fallbacks = mps_load_relaxed(&n_fallbacks);
}
