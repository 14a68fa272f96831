// SPDX-License-Identifier: MIT
/*
 * __managed__ variables: a module's globals declared managed, which the
 * program's CPU reads and writes at the address the driver gives for them
 * (cudart asks with cuLibraryGetManaged and hands the address to the host
 * code; cuModuleGetGlobal and cuLibraryGetGlobal give it too). That memory
 * is managed memory of the server's process, which this one cannot map;
 * so the library maps memory of its own at that very address, a copy of
 * the variable, and keeps copy and variable in step where a program may
 * rely on seeing the other side's writes:
 *
 *   - before work that may read the variable goes to a stream (a kernel,
 *     a graph) or a synchronous copy, what the program changed since the
 *     last step is sent, in stream order ahead of the work;
 *   - after the program has waited for the device (a synchronize of the
 *     context, a stream or an event, a query that finds the work done, a
 *     synchronous copy), the device's values are fetched, after the
 *     program's own unsent changes went first.
 *
 * A change is found by comparing the copy with what was last exchanged, so
 * only variables the program wrote are sent. The cost is paid only by
 * programs that have managed variables: a comparison per launch, one small
 * copy each way per variable where they changed or were waited for. What
 * is not kept: a CPU and a kernel touching one variable at the same time
 * (a flag a running kernel spins on) see each other's writes only at those
 * points, not while the kernel runs; memory from cuMemAllocManaged is
 * another matter (managed.c), coherent throughout.
 *
 * If the address is taken in this process the variable cannot be served:
 * cuLibraryGetManaged says CUDA_ERROR_NOT_SUPPORTED, logged.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "common/atomics.h"
#include "common/log.h"

struct mvar {
	uint64_t addr;       /* the server's address, and this process's copy's */
	size_t size;
	uint8_t *sent;       /* what was last exchanged with the device */
	const void *owner;   /* the module or library */
	bool fresh;          /* the copy has had the device's value once */
};

/* Pages mapped here for copies, [lo, hi) each, kept for the process's life
 * (a later variable may share one). */
struct span {
	uintptr_t lo, hi;
};

static struct {
	pthread_mutex_t lock;
	struct mvar *v;
	size_t n, cap;
	struct span *pages;
	size_t npages, pages_cap;
} mv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int any;   /* whether there are variables at all: read without the lock */

/* Whether [lo, hi) is all pages mapped here for copies. */
static bool ours(uintptr_t lo, uintptr_t hi)
{
	for (uintptr_t at = lo; at < hi;) {
		size_t i;

		for (i = 0; i < mv.npages; i++)
			if (mv.pages[i].lo <= at && at < mv.pages[i].hi)
				break;
		if (i == mv.npages)
			return false;
		at = mv.pages[i].hi;
	}
	return true;
}

/* The pages of [addr, addr + size) mapped here, each page once: over the
 * range memory.c holds for the device's addresses (inaccessible) where it
 * holds it, else where nothing is. */
static bool map_pages(uint64_t addr, size_t size)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr & ~(page - 1), hi = ((uintptr_t)addr + size + page - 1) & ~(page - 1);
	int fixed = mps__devmem_reserved(addr, size) ? MAP_FIXED : MAP_FIXED_NOREPLACE;

	for (uintptr_t at = lo; at < hi; at += page) {
		void *p;

		if (ours(at, at + page))
			continue;
		p = mmap((void *)at, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
		if (p != (void *)at) {
			if (p != MAP_FAILED)
				munmap(p, page);   /* a kernel without MAP_FIXED_NOREPLACE put it elsewhere */
			return false;
		}
		if (mv.npages == mv.pages_cap) {
			size_t cap = mv.pages_cap ? 2 * mv.pages_cap : 8;
			struct span *v = realloc(mv.pages, cap * sizeof(*v));

			if (!v) {
				munmap(p, page);
				return false;
			}
			mv.pages = v;
			mv.pages_cap = cap;
		}
		mv.pages[mv.npages++] = (struct span){ at, at + page };
	}
	return true;
}

CUresult mps__mvar_add(uint64_t addr, size_t size, const void *owner, const void *value, uint32_t ctx)
{
	struct mvar *m = NULL;
	CUresult r = CUDA_SUCCESS;

	if (!addr || !size)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mv.lock);
	for (size_t i = 0; i < mv.n; i++) {
		if (mv.v[i].addr == addr) {
			pthread_mutex_unlock(&mv.lock);
			return CUDA_SUCCESS;   /* asked again */
		}
	}
	if (mv.n == mv.cap) {
		size_t cap = mv.cap ? 2 * mv.cap : 8;
		struct mvar *v = realloc(mv.v, cap * sizeof(*v));

		if (!v) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		mv.v = v;
		mv.cap = cap;
	}
	m = &mv.v[mv.n];
	m->addr = addr;
	m->size = size;
	m->owner = owner;
	m->sent = malloc(size);
	if (!m->sent) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (!map_pages(addr, size)) {
		mps_log_warn("openmps: a __managed__ variable at %#llx (%zu bytes): that address is taken in this "
			     "process, so its CPU cannot reach it",
			     (unsigned long long)addr, size);
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	/* Its value now: as the server read it, or from the device where
	 * there is a context to copy in (else at the next meeting point). */
	m->fresh = true;
	if (value)
		memcpy((void *)(uintptr_t)addr, value, size);
	else if (ctx)
		r = mps__copy_d2h((void *)(uintptr_t)addr, addr, size, 0, ctx);
	else
		m->fresh = false;
	if (r != CUDA_SUCCESS)
		goto out;
	memcpy(m->sent, (void *)(uintptr_t)addr, size);
	mv.n++;
	mps_store_release(&any, 1);
out:
	if (r != CUDA_SUCCESS && m)
		free(m->sent);
	pthread_mutex_unlock(&mv.lock);
	return r;
}

void mps__mvar_forget(const void *owner)
{
	if (!mps_load_acquire(&any))
		return;
	pthread_mutex_lock(&mv.lock);
	for (size_t i = 0; i < mv.n;) {
		struct mvar *m = &mv.v[i];

		if (m->owner != owner) {
			i++;
			continue;
		}
		/* Its pages went with the owner's hold on its range (memory.c). */
		for (size_t j = 0; j < mv.npages;) {
			if (mv.pages[j].hi > m->addr && mv.pages[j].lo < m->addr + m->size)
				mv.pages[j] = mv.pages[--mv.npages];
			else
				j++;
		}
		free(m->sent);
		*m = mv.v[--mv.n];
	}
	pthread_mutex_unlock(&mv.lock);
}

/* What the program changed, to the device on stream (ordered before what
 * follows there). Under the lock. */
static CUresult send_locked(uint32_t stream, uint32_t ctx)
{
	CUresult r = CUDA_SUCCESS;

	/* A capture records no copy of pageable memory made now: the graph
	 * reads the variable as the device holds it when it runs. */
	if (!ctx || (stream && mps__capture_on(stream)))
		return CUDA_SUCCESS;
	for (size_t i = 0; i < mv.n && r == CUDA_SUCCESS; i++) {
		struct mvar *m = &mv.v[i];

		if (!m->fresh) {   /* the device's value first */
			r = mps__copy_d2h((void *)(uintptr_t)m->addr, m->addr, m->size, stream, ctx);
			if (r == CUDA_SUCCESS) {
				memcpy(m->sent, (void *)(uintptr_t)m->addr, m->size);
				m->fresh = true;
			}
			continue;
		}
		if (!memcmp(m->sent, (void *)(uintptr_t)m->addr, m->size))
			continue;
		memcpy(m->sent, (void *)(uintptr_t)m->addr, m->size);
		r = mps__copy_h2d(m->addr, m->sent, m->size, stream, ctx);
	}
	return r;
}

CUresult mps__mvar_send(uint32_t stream, uint32_t ctx)
{
	CUresult r;

	if (!mps_load_acquire(&any))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mv.lock);
	r = send_locked(stream, ctx);
	pthread_mutex_unlock(&mv.lock);
	return r;
}

CUresult mps__mvar_fetch(uint32_t stream, uint32_t ctx)
{
	CUresult r;

	if (!ctx || !mps_load_acquire(&any))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mv.lock);
	r = send_locked(stream, ctx);
	for (size_t i = 0; i < mv.n && r == CUDA_SUCCESS; i++) {
		struct mvar *m = &mv.v[i];

		r = mps__copy_d2h(m->sent, m->addr, m->size, stream, ctx);
		if (r == CUDA_SUCCESS)
			memcpy((void *)(uintptr_t)m->addr, m->sent, m->size);
	}
	pthread_mutex_unlock(&mv.lock);
	return r;
}
