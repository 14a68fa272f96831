// SPDX-License-Identifier: MIT
/*
 * The registry of live handles. Every CUcontext, CUstream, CUevent, CUmodule,
 * CUfunction, CUlibrary and CUkernel the stand-in hands out is a number drawn
 * from a counter that never repeats, mapped here to its object and kind. A
 * call looks its handle up before touching anything, so a destroyed handle, a
 * handle of the wrong kind or plain garbage is reported as the real driver
 * would (CUDA_ERROR_INVALID_HANDLE, mostly) and never dereferenced.
 *
 * A chained hash table keyed by the handle; it doubles when it gets full.
 * All calls are made under the stand-in lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "standin.h"

struct entry {
	struct entry *next;
	uintptr_t handle;
	enum si_kind kind;
	void *obj;
};

static struct entry **buckets;
static size_t nbuckets;
static size_t count;
/* Handles start high and step by 16 so that they look like nothing else: not
 * NULL, not CU_STREAM_LEGACY (1) or CU_STREAM_PER_THREAD (2), not small ints. */
static uintptr_t next_handle = 0x5e0000;

static size_t slot(uintptr_t h, size_t n)
{
	uint64_t x = (uint64_t)h * 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 32) & (n - 1);
}

static int grow(void)
{
	size_t n = nbuckets ? nbuckets * 2 : 256;
	struct entry **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < nbuckets; i++) {
		struct entry *e = buckets[i], *next;

		for (; e; e = next) {
			size_t k = slot(e->handle, n);

			next = e->next;
			e->next = b[k];
			b[k] = e;
		}
	}
	free(buckets);
	buckets = b;
	nbuckets = n;
	return 0;
}

uintptr_t mps__handle_add(enum si_kind kind, void *obj)
{
	struct entry *e;
	size_t k;

	if (count >= nbuckets && grow() < 0)
		return 0;
	e = malloc(sizeof(*e));
	if (!e)
		return 0;
	e->handle = next_handle;
	next_handle += 16;
	e->kind = kind;
	e->obj = obj;
	k = slot(e->handle, nbuckets);
	e->next = buckets[k];
	buckets[k] = e;
	count++;
	return e->handle;
}

void *mps__handle_lookup(uintptr_t handle, enum si_kind *kind)
{
	if (!nbuckets)
		return NULL;
	for (struct entry *e = buckets[slot(handle, nbuckets)]; e; e = e->next) {
		if (e->handle == handle) {
			if (kind)
				*kind = e->kind;
			return e->obj;
		}
	}
	return NULL;
}

void *mps__handle_get(uintptr_t handle, enum si_kind kind)
{
	enum si_kind k;
	void *obj = mps__handle_lookup(handle, &k);

	return obj && k == kind ? obj : NULL;
}

void mps__handle_remove(uintptr_t handle)
{
	struct entry **pp;

	if (!nbuckets || !handle)
		return;
	for (pp = &buckets[slot(handle, nbuckets)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->handle == handle) {
			struct entry *e = *pp;

			*pp = e->next;
			free(e);
			count--;
			return;
		}
	}
}
