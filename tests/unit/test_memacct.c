// SPDX-License-Identifier: MIT
/*
 * The server's memory account (src/server/memacct.c), on its own:
 *   - ranges: a long random sequence of adds, removes, finds and checks,
 *     compared after every step with a plain list searched linearly
 *     (overlaps refused, a remove needs the exact base and kind, a check
 *     must lie inside one range, address arithmetic at the top of the
 *     address space never wraps);
 *   - the limit: charges up to it succeed, one byte past it fails, removing
 *     a device range gives its bytes back, globals and host ranges are not
 *     counted; a range that holds more than it spans (whole granules)
 *     gives back what it was charged;
 *   - the view of cuMemGetInfo a limited client gets: the limit as the
 *     total, what is left of it as free, never more than the device has;
 *   - pinned host memory: each client's own limit and the pool all clients
 *     share, charged from several threads at once without ever passing it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/memacct.h"
#include "../check.h"

#define REF_MAX 512

struct ref { uint64_t base, size; int kind, live; };

static struct ref ref[REF_MAX];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static uint64_t next_in(uint64_t *s, uint64_t n)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s % n;
}

static const struct ref *ref_find(uint64_t addr)
{
	for (int i = 0; i < REF_MAX; i++)
		if (ref[i].live && addr >= ref[i].base && addr - ref[i].base < ref[i].size)
			return &ref[i];
	return NULL;
}

static int ref_overlaps(uint64_t base, uint64_t size)
{
	for (int i = 0; i < REF_MAX; i++)
		if (ref[i].live && base < ref[i].base + ref[i].size && ref[i].base < base + size)
			return 1;
	return 0;
}

static void test_ranges(void)
{
	struct mps_memacct m;
	uint64_t dev_bytes = 0;

	mps_memacct_init(&m);
	for (int step = 0; step < 200000 && check_failures() < 20; step++) {
		/* Addresses in a small window so that ranges collide often. */
		uint64_t base = 0x7f0000000000ull + (next() % 4096) * 64;
		uint64_t size = 1 + next() % 1024;
		int op = (int)(next() % 4), kind = 1 + (int)(next() % 3);

		if (op == 0) {
			int slot = (int)(next() % REF_MAX), want, got;

			if (ref[slot].live)
				continue;
			want = ref_overlaps(base, size) ? -EEXIST : 0;
			if (kind == MPS_MEM_DEVICE && mps_memacct_charge(&m, 0, size) < 0) {
				CHECK(0, "charge without a limit failed");
				continue;
			}
			got = mps_memacct_add(&m, base, size, kind, 0, 7);
			CHECK(got == want, "add [%#llx, +%llu): %d, want %d", (unsigned long long)base,
			      (unsigned long long)size, got, want);
			if (got == 0) {
				ref[slot] = (struct ref){ base, size, kind, 1 };
				if (kind == MPS_MEM_DEVICE)
					dev_bytes += size;
			} else if (kind == MPS_MEM_DEVICE) {
				mps_memacct_uncharge(&m, 0, size);
			}
		} else if (op == 1) {
			int slot = (int)(next() % REF_MAX);
			struct mps_mrange out;

			if (!ref[slot].live) {
				/* An address that starts no range of that kind. */
				const struct ref *r = ref_find(base);
				int want = (r && r->base == base && r->kind == kind) ? 0 : -ENOENT;
				int got = mps_memacct_remove(&m, base, kind, &out);

				CHECK(got == want, "remove %#llx kind %d: %d, want %d", (unsigned long long)base, kind, got, want);
				if (got == 0) {
					((struct ref *)r)->live = 0;
					if (kind == MPS_MEM_DEVICE)
						dev_bytes -= r->size;
				}
				continue;
			}
			/* The right base with the wrong kind is refused. */
			int wrong = ref[slot].kind % 3 + 1;

			CHECK(mps_memacct_remove(&m, ref[slot].base, wrong, NULL) == -ENOENT, "remove with the wrong kind");
			CHECK(mps_memacct_remove(&m, ref[slot].base, ref[slot].kind, &out) == 0, "remove of a live range");
			CHECK(out.base == ref[slot].base && out.size == ref[slot].size && out.kind == ref[slot].kind &&
			      out.ctx == 7, "removed range's record");
			ref[slot].live = 0;
			if (ref[slot].kind == MPS_MEM_DEVICE)
				dev_bytes -= ref[slot].size;
		} else if (op == 2) {
			uint64_t addr = base + next() % 64;
			const struct mps_mrange *got = mps_memacct_find(&m, addr);
			const struct ref *want = ref_find(addr);

			CHECK((got == NULL) == (want == NULL) && (!got || (got->base == want->base && got->size == want->size)),
			      "find %#llx", (unsigned long long)addr);
		} else {
			const struct ref *r = ref_find(base);
			int want = (r && size <= r->size - (base - r->base)) ? 0 : -EFAULT;

			CHECK(mps_memacct_check(&m, base, size) == want, "check [%#llx, +%llu)",
			      (unsigned long long)base, (unsigned long long)size);
		}
		CHECK(m.bytes[0] == dev_bytes, "device bytes %llu, want %llu", (unsigned long long)m.bytes[0],
		      (unsigned long long)dev_bytes);
	}
	/* The top of the address space: no wrap-around. */
	CHECK(mps_memacct_add(&m, UINT64_MAX - 15, 32, MPS_MEM_HOST, 0, 1) == -EINVAL, "a range that wraps");
	CHECK(mps_memacct_add(&m, 0, 0, MPS_MEM_HOST, 0, 1) == -EINVAL, "an empty range");
	CHECK(mps_memacct_add(&m, UINT64_MAX - 31, 16, MPS_MEM_HOST, 0, 1) == 0, "a range near the top");
	CHECK(mps_memacct_check(&m, UINT64_MAX - 23, 8) == 0, "check inside the top range");
	CHECK(mps_memacct_check(&m, UINT64_MAX - 23, 9) == -EFAULT, "check past its end");
	CHECK(mps_memacct_check(&m, UINT64_MAX - 23, UINT64_MAX) == -EFAULT, "check with a huge size");
	CHECK(mps_memacct_find(&m, UINT64_MAX - 15) == NULL, "find just past the top range");
	mps_memacct_free(&m);
	CHECK(m.n == 0 && m.r == NULL, "free leaves an empty account");
}

static void test_limit(void)
{
	struct mps_memacct m;
	const uint64_t mib = 1 << 20;
	struct mps_mrange out;

	mps_memacct_init(&m);
	m.limit[1] = 64 * mib;
	CHECK(mps_memacct_charge(&m, 1, 40 * mib) == 0, "40 MiB under a 64 MiB limit");
	CHECK(mps_memacct_add(&m, 0x1000000, 40 * mib, MPS_MEM_DEVICE, 1, 1) == 0, "add 40 MiB");
	CHECK(mps_memacct_charge(&m, 1, 24 * mib + 1) == -ENOMEM, "one byte past the limit");
	CHECK(mps_memacct_charge(&m, 1, UINT64_MAX) == -ENOMEM, "a huge charge");
	CHECK(mps_memacct_charge(&m, 1, 24 * mib) == 0, "up to the limit exactly");
	mps_memacct_uncharge(&m, 1, 24 * mib);
	CHECK(mps_memacct_charge(&m, 0, 1024 * mib) == 0, "another device has no limit");
	CHECK(mps_memacct_charge(&m, MPS_MAX_DEVICES, 1) == -EINVAL, "a device out of range");
	CHECK(mps_memacct_charge(&m, -1, 1) == -EINVAL, "a negative device");
	/* Globals and pinned host memory do not count. */
	CHECK(mps_memacct_add(&m, 0x9000000, 512 * mib, MPS_MEM_GLOBAL, 1, 1) == 0, "a global");
	CHECK(mps_memacct_add(&m, 0x40000000, 512 * mib, MPS_MEM_HOST, 1, 1) == 0, "a host range");
	CHECK(m.bytes[1] == 40 * mib, "only device memory is counted: %llu", (unsigned long long)m.bytes[1]);

	/* The view: total is the limit, free what is left of it. */
	size_t fr = 80000 * mib, total = 141000 * mib;

	mps_memacct_view(&m, 1, &fr, &total);
	CHECK(total == 64 * mib && fr == 24 * mib, "view under the limit: %zu of %zu", fr, total);
	/* The device fuller than the limit allows: free is the device's. */
	fr = 10 * mib, total = 141000 * mib;
	mps_memacct_view(&m, 1, &fr, &total);
	CHECK(total == 64 * mib && fr == 10 * mib, "view on a full device: %zu of %zu", fr, total);
	/* A limit larger than the device: the device's own figures. */
	m.limit[2] = 1ull << 50;
	fr = 5 * mib, total = 8 * mib;
	mps_memacct_view(&m, 2, &fr, &total);
	CHECK(total == 8 * mib && fr == 5 * mib, "a limit past the device: %zu of %zu", fr, total);
	/* No limit: unchanged. */
	fr = 5 * mib, total = 8 * mib;
	mps_memacct_view(&m, 0, &fr, &total);
	CHECK(total == 8 * mib && fr == 5 * mib, "no limit: %zu of %zu", fr, total);
	mps_memacct_view(&m, MPS_MAX_DEVICES, &fr, &total);
	CHECK(total == 8 * mib && fr == 5 * mib, "a device out of range is left alone");
	/* A limit lowered below what is held: nothing free, never negative. */
	m.limit[1] = 16 * mib;
	fr = 80000 * mib, total = 141000 * mib;
	mps_memacct_view(&m, 1, &fr, &total);
	CHECK(total == 16 * mib && fr == 0, "over the limit: %zu of %zu", fr, total);

	/* Removing the device range gives its bytes back. */
	CHECK(mps_memacct_remove(&m, 0x1000000, MPS_MEM_DEVICE, &out) == 0 && out.size == 40 * mib, "remove");
	CHECK(m.bytes[1] == 0, "bytes back after remove: %llu", (unsigned long long)m.bytes[1]);
	fr = 80000 * mib, total = 141000 * mib;
	mps_memacct_view(&m, 1, &fr, &total);
	CHECK(total == 16 * mib && fr == 16 * mib, "view after remove: %zu of %zu", fr, total);

	/* A placed allocation holds whole granules: 3 MiB seen, 4 MiB
	 * charged; its range is what the program asked for, and its removal
	 * gives back all it held. */
	CHECK(mps_memacct_charge(&m, 1, 4 * mib) == 0, "charge 4 MiB");
	CHECK(mps_memacct_add_charged(&m, 0x2000000, 3 * mib, 4 * mib, MPS_MEM_DEVICE, 1, 1) == 0, "add 3 of 4 MiB");
	CHECK(mps_memacct_find(&m, 0x2000000 + 3 * mib) == NULL, "the granule's tail is not the program's");
	CHECK(mps_memacct_check(&m, 0x2000000, 3 * mib) == 0 && mps_memacct_check(&m, 0x2000000, 3 * mib + 1) < 0,
	      "checks stop at what was asked for");
	CHECK(m.bytes[1] == 4 * mib, "charged 4 MiB: %llu", (unsigned long long)m.bytes[1]);
	CHECK(mps_memacct_remove(&m, 0x2000000, MPS_MEM_DEVICE, &out) == 0 && out.size == 3 * mib &&
	      out.charged == 4 * mib, "remove the placed range");
	CHECK(m.bytes[1] == 0, "all 4 MiB back: %llu", (unsigned long long)m.bytes[1]);
	mps_memacct_free(&m);
}

static void test_host(void)
{
	const uint64_t mib = 1 << 20;
	struct mps_hostpool pool = { .limit = 96 * mib };
	struct mps_memacct a, b;

	mps_memacct_init(&a);
	mps_memacct_init(&b);
	a.host_limit = b.host_limit = 64 * mib;
	a.pool = b.pool = &pool;
	CHECK(mps_memacct_charge_host(&a, 48 * mib) == 0, "48 of a's 64");
	CHECK(mps_memacct_charge_host(&a, 32 * mib) == -ENOMEM, "past a's own limit");
	CHECK(mps_memacct_charge_host(&a, 16 * mib) == 0, "up to a's limit");
	CHECK(mps_memacct_charge_host(&b, 48 * mib) == -ENOMEM, "past the pool");
	CHECK(a.host_bytes == 64 * mib && b.host_bytes == 0 && pool.used == 64 * mib,
	      "a refused charge leaves no trace: %llu %llu %llu", (unsigned long long)a.host_bytes,
	      (unsigned long long)b.host_bytes, (unsigned long long)pool.used);
	CHECK(mps_memacct_charge_host(&b, 32 * mib) == 0, "what is left of the pool");
	CHECK(mps_memacct_charge_host(&b, UINT64_MAX) == -ENOMEM, "a huge charge");
	mps_memacct_uncharge_host(&a, 48 * mib);
	CHECK(pool.used == 48 * mib && a.host_bytes == 16 * mib, "uncharge returns to both");
	CHECK(mps_memacct_charge_host(&b, 32 * mib) == 0, "b up to its limit");
	CHECK(mps_memacct_charge_host(&a, 17 * mib) == -ENOMEM, "past the pool (80 of 96 used)");
	CHECK(mps_memacct_charge_host(&a, 16 * mib) == 0, "the pool exactly full");
	/* No limits: anything goes. */
	a.host_limit = 0;
	a.pool = NULL;
	CHECK(mps_memacct_charge_host(&a, 1ull << 45) == 0, "no limits");
	mps_memacct_free(&a);
	mps_memacct_free(&b);
}

/* Eight accounts charging and uncharging one pool at once: the pool never
 * holds more than its limit, and is empty at the end. */
#define RACERS 8

static struct mps_hostpool race_pool = { .limit = 100 * 4096 };
static uint64_t race_peak;

static void *racer(void *arg)
{
	struct mps_memacct m;
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;

	mps_memacct_init(&m);
	m.pool = &race_pool;
	for (int i = 0; i < 200000; i++) {
		uint64_t size = (1 + next_in(&seed, 20)) * 4096;

		if (mps_memacct_charge_host(&m, size) == 0) {
			uint64_t used = __atomic_load_n(&race_pool.used, __ATOMIC_RELAXED), peak;

			peak = __atomic_load_n(&race_peak, __ATOMIC_RELAXED);
			while (used > peak && !__atomic_compare_exchange_n(&race_peak, &peak, used, false,
									 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				;
			mps_memacct_uncharge_host(&m, size);
		}
	}
	mps_memacct_free(&m);
	return NULL;
}

static void test_host_race(void)
{
	pthread_t t[RACERS];

	for (int i = 0; i < RACERS; i++)
		CHECK(pthread_create(&t[i], NULL, racer, (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	CHECK(race_pool.used == 0, "the pool holds %llu after everything was returned",
	      (unsigned long long)race_pool.used);
	CHECK(race_peak <= race_pool.limit && race_peak > 0, "the pool peaked at %llu of %llu",
	      (unsigned long long)race_peak, (unsigned long long)race_pool.limit);
}

int main(void)
{
	test_ranges();
	test_limit();
	test_host();
	test_host_race();
	return check_finish("test_memacct");
}
