// SPDX-License-Identifier: MIT
/*
 * See memacct.h. Ranges never overlap (the driver never hands out the same
 * address twice while both are live), so a sorted array and binary search
 * find the range containing an address.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "server/memacct.h"

void mps_memacct_init(struct mps_memacct *m)
{
	memset(m, 0, sizeof(*m));
}

void mps_memacct_free(struct mps_memacct *m)
{
	free(m->r);
	m->r = NULL;
	m->n = m->cap = 0;
}

int mps_memacct_charge(struct mps_memacct *m, int device, uint64_t size)
{
	uint64_t held, lim;

	if (device < 0 || device >= MPS_MAX_DEVICES)
		return -EINVAL;
	held = mps_load_relaxed(&m->bytes[device]);
	lim = mps_load_relaxed(&m->limit[device]);   /* set_client_device_pinned_mem_limit may change it */
	if (lim && (size > lim || held > lim - size))
		return -ENOMEM;
	mps_store_relaxed(&m->bytes[device], held + size);
	if (held + size > mps_load_relaxed(&m->peak[device]))
		mps_store_relaxed(&m->peak[device], held + size);
	return 0;
}

void mps_memacct_uncharge(struct mps_memacct *m, int device, uint64_t size)
{
	if (device < 0 || device >= MPS_MAX_DEVICES)
		return;
	mps_store_relaxed(&m->bytes[device], mps_load_relaxed(&m->bytes[device]) - size);
}

int mps_memacct_charge_host(struct mps_memacct *m, uint64_t size)
{
	uint64_t held = mps_load_relaxed(&m->host_bytes);
	struct mps_hostpool *p = m->pool;

	if (m->host_limit && (size > m->host_limit || held > m->host_limit - size))
		return -ENOMEM;
	if (p) {
		uint64_t used = mps_load_relaxed(&p->used);

		do {
			if (p->limit && (size > p->limit || used > p->limit - size))
				return -ENOMEM;
		} while (!mps_cas(&p->used, &used, used + size));
	}
	mps_store_relaxed(&m->host_bytes, held + size);
	return 0;
}

void mps_memacct_uncharge_host(struct mps_memacct *m, uint64_t size)
{
	mps_store_relaxed(&m->host_bytes, mps_load_relaxed(&m->host_bytes) - size);
	if (m->pool)
		mps_fetch_sub(&m->pool->used, size);
}

void mps_memacct_view(const struct mps_memacct *m, int device, size_t *free_b, size_t *total_b)
{
	uint64_t lim, held, left;

	if (device < 0 || device >= MPS_MAX_DEVICES || !(lim = mps_load_relaxed(&((struct mps_memacct *)m)->limit[device])))
		return;
	held = mps_load_relaxed(&m->bytes[device]);
	left = held < lim ? lim - held : 0;
	if (*total_b > lim)
		*total_b = lim;
	if (*free_b > left)
		*free_b = left;
}

/* Index of the first range whose base is > addr. */
static size_t upper(const struct mps_memacct *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->r[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mps_memacct_add(struct mps_memacct *m, uint64_t base, uint64_t size, int kind, int device, uint32_t ctx)
{
	return mps_memacct_add_charged(m, base, size, size, kind, device, ctx);
}

int mps_memacct_add_charged(struct mps_memacct *m, uint64_t base, uint64_t size, uint64_t charged, int kind,
			    int device, uint32_t ctx)
{
	size_t i;

	if (size == 0 || base + size < base)
		return -EINVAL;
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 32;
		struct mps_mrange *nr = realloc(m->r, ncap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		m->r = nr;
		m->cap = ncap;
	}
	i = upper(m, base);
	/* Refuse overlaps: they would mean our bookkeeping is wrong. */
	if (i > 0 && m->r[i - 1].base + m->r[i - 1].size > base)
		return -EEXIST;
	if (i < m->n && m->r[i].base < base + size)
		return -EEXIST;
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(*m->r));
	m->r[i] = (struct mps_mrange){ .base = base, .size = size, .charged = charged, .ctx = ctx,
				       .device = (int16_t)device, .kind = (uint8_t)kind };
	m->n++;
	return 0;
}

int mps_memacct_remove(struct mps_memacct *m, uint64_t base, int kind, struct mps_mrange *out)
{
	size_t i = upper(m, base);

	if (i == 0 || m->r[i - 1].base != base || m->r[i - 1].kind != kind)
		return -ENOENT;
	i--;
	if (out)
		*out = m->r[i];
	if (m->r[i].kind == MPS_MEM_DEVICE)
		mps_memacct_uncharge(m, m->r[i].device, m->r[i].charged);
	memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(*m->r));
	m->n--;
	return 0;
}

const struct mps_mrange *mps_memacct_find(const struct mps_memacct *m, uint64_t addr)
{
	size_t i = upper(m, addr);

	if (i == 0)
		return NULL;
	if (addr - m->r[i - 1].base >= m->r[i - 1].size)
		return NULL;
	return &m->r[i - 1];
}

int mps_memacct_check(const struct mps_memacct *m, uint64_t addr, uint64_t size)
{
	const struct mps_mrange *r = mps_memacct_find(m, addr);

	if (!r || size > r->size - (addr - r->base))
		return -EFAULT;
	return 0;
}
