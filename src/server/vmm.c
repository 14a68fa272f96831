// SPDX-License-Identifier: MIT
/*
 * The bookkeeping behind vmm.h: sorted arrays searched by binary search.
 * Reservations never overlap (the driver hands them out), mappings never
 * overlap (mps_vmm_map_add refuses it), so "the last entry starting at or
 * below addr" is the only candidate to hold addr.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/vmm.h"

void mps_vmm_free(struct mps_vmm *v)
{
	free(v->res);
	free(v->map);
	memset(v, 0, sizeof(*v));
}

/* How many entries of a sorted array of n start at or below addr (both
 * kinds of entry begin with their base address). */
static size_t upper(const void *arr, size_t n, size_t elem, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t base;

		memcpy(&base, (const char *)arr + mid * elem, sizeof(base));
		if (base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#define UPPER(arr, n, addr) upper((arr), (n), sizeof(*(arr)), (addr))

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

int mps_vmm_res_add(struct mps_vmm *v, uint64_t base, uint64_t size)
{
	size_t i;

	if (grow((void **)&v->res, &v->cres, v->nres, sizeof(*v->res)) < 0)
		return -ENOMEM;
	i = UPPER(v->res, v->nres, base);
	memmove(&v->res[i + 1], &v->res[i], (v->nres - i) * sizeof(*v->res));
	v->res[i] = (struct mps_vres){ .base = base, .size = size };
	v->nres++;
	v->reserved += size;
	return 0;
}

void mps_vmm_res_del(struct mps_vmm *v, uint64_t base)
{
	size_t i = UPPER(v->res, v->nres, base);

	if (i == 0 || v->res[i - 1].base != base)
		return;
	i--;
	v->reserved -= v->res[i].size;
	memmove(&v->res[i], &v->res[i + 1], (v->nres - i - 1) * sizeof(*v->res));
	v->nres--;
}

const struct mps_vres *mps_vmm_res_find(const struct mps_vmm *v, uint64_t addr, uint64_t size)
{
	size_t i = UPPER(v->res, v->nres, addr);
	const struct mps_vres *r;

	if (i == 0)
		return NULL;
	r = &v->res[i - 1];
	if (addr - r->base >= r->size || size > r->size - (addr - r->base))
		return NULL;
	return r;
}

int mps_vmm_map_add(struct mps_vmm *v, const struct mps_vmap *m)
{
	size_t i;

	if (mps_vmm_map_any(v, m->base, m->size))
		return -EEXIST;
	if (grow((void **)&v->map, &v->cmap, v->nmap, sizeof(*v->map)) < 0)
		return -ENOMEM;
	i = UPPER(v->map, v->nmap, m->base);
	memmove(&v->map[i + 1], &v->map[i], (v->nmap - i) * sizeof(*v->map));
	v->map[i] = *m;
	v->nmap++;
	return 0;
}

const struct mps_vmap *mps_vmm_map_find(const struct mps_vmm *v, uint64_t addr)
{
	size_t i = UPPER(v->map, v->nmap, addr);

	if (i == 0 || addr - v->map[i - 1].base >= v->map[i - 1].size)
		return NULL;
	return &v->map[i - 1];
}

long mps_vmm_map_span(const struct mps_vmm *v, uint64_t addr, uint64_t size, size_t *n)
{
	size_t i = UPPER(v->map, v->nmap, addr), j;
	uint64_t at;

	if (i == 0 || v->map[i - 1].base != addr || size == 0)
		return -1;
	i--;
	at = addr;
	for (j = i; j < v->nmap && v->map[j].base == at; j++) {
		at += v->map[j].size;
		if (at - addr == size) {
			*n = j - i + 1;
			return (long)i;
		}
		if (at - addr > size)
			return -1;
	}
	return -1;
}

int mps_vmm_map_any(const struct mps_vmm *v, uint64_t addr, uint64_t size)
{
	size_t i = UPPER(v->map, v->nmap, addr);

	/* The one starting at or below addr, and the next, are all that can overlap. */
	if (i > 0 && addr - v->map[i - 1].base < v->map[i - 1].size)
		return 1;
	return i < v->nmap && v->map[i].base - addr < size;
}

void mps_vmm_map_del(struct mps_vmm *v, size_t i, size_t n)
{
	memmove(&v->map[i], &v->map[i + n], (v->nmap - i - n) * sizeof(*v->map));
	v->nmap -= n;
}
