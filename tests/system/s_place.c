// SPDX-License-Identifier: MIT
/*
 * Where two clients' allocations land with OPENMPS_PLACEMENT=random
 * (src/server/placement.h; tests/system/placement.sh starts the daemon).
 * Two processes each make ALLOCS allocations of random sizes (4 KiB to 5
 * MiB, some through cuMemAllocPitch), write a pattern of their own into
 * each and send their addresses and sizes to the parent over a pipe, then
 * wait. The parent checks that every allocation past 1 MiB starts on a 2
 * MiB boundary and every smaller one is 512-byte aligned inside one 2 MiB
 * granule; that granules of different clients' are never next to each
 * other: a client's granules in a row (its chunks, src/server/placement.c)
 * are an unmapped granule apart from any other's (no granule holds two
 * clients' memory, and none touches another's); and that those runs spread
 * over the range (S_PLACE_GIB, the daemon's OPENMPS_PLACEMENT_GIB): their
 * span is at least a quarter of it and no 1/16th of it holds more than
 * half of them. Then each child reads its patterns back (the other's
 * allocations and frees did not touch them), frees half, allocates again
 * and checks the new ones likewise; a new allocation holds nothing but
 * zeros and the child's own patterns (the server clears new chunks: freed
 * ones held the other client's patterns; a granule a client gave back
 * holds its own until its chunk goes; on the stand-in new physical memory
 * is zeros anyway, on a GPU the clearing is what makes it so). Each child also makes HOSTS pinned allocations and reads each
 * through its device address; with placement the parent checks that none
 * lies within 1 MiB of another, either client's, and that they span more
 * than a TiB (the server maps each at a random page). Each child also
 * makes RESVS address reservations of 4 MiB with memory of its own mapped
 * in half of each, read back through them; with placement the parent
 * checks that none lies within a granule of another reservation or of an
 * allocation, and that they span at least a quarter of the range. With
 * placement off (S_PLACE_GIB unset) it only checks the patterns. First of
 * all each child writes the end of a new 160 MiB allocation on a stream of
 * its own at once and reads it back (written_at_once); last, with
 * placement, the first child fills a chunk of more than 64 granules and
 * reuses holes in it (wide_chunk).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

/* The server places host mappings but in a ThreadSanitizer build
 * (src/server/placement.c), which this one is too. */
#if defined(__SANITIZE_THREAD__)
#define HOST_PLACED 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOST_PLACED 0
#endif
#endif
#ifndef HOST_PLACED
#define HOST_PLACED 1
#endif

#define ALLOCS 40
#define HOSTS  8    /* pinned allocations a child makes */
#define RESVS  6    /* address reservations a child makes, 4 MiB each */
#define GRAN   (2ull << 20)
#define SMALL  (GRAN / 2)   /* carved from a granule of the client's own */
#define TAG0   0xa5000000u   /* the first child's tag */

struct alloc {
	CUdeviceptr p;
	uint64_t size;
	int owner;          /* set by the parent: which child */
};

/* Word k of allocation i's pattern in the child tagged tag. */
static uint32_t pattern(uint32_t tag, int i, int k)
{
	return tag ^ (uint32_t)(k * 2654435761u) ^ (uint32_t)i;
}

/* The most words a pinned allocation's pattern has (pinned()). */
#define PINNED_WORDS ((4096 + (256u << 10)) / 4)

/* Every word of every pattern a child writes into device memory (its
 * allocations', and its pinned allocations' copied through a temporary
 * allocation) with the tag taken out, sorted. */
#define UNTAGGED (ALLOCS * 1024 + HOSTS * PINNED_WORDS)
static uint32_t untagged[UNTAGGED];

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* A word a new allocation may hold: zero, or a word of one of its own
 * client's patterns (memory it freed, given again, at any offset). */
static bool own_or_zero(uint32_t w, uint32_t tag)
{
	uint32_t key = w ^ tag;

	static bool sorted;

	if (!sorted) {
		size_t n = 0;

		for (int i = 0; i < ALLOCS; i++)
			for (int k = 0; k < 1024; k++)
				untagged[n++] = pattern(0, i, k);
		for (int i = 0; i < HOSTS; i++)
			for (int k = 0; k < (int)PINNED_WORDS; k++)
				untagged[n++] = pattern(0, ALLOCS + i, k);
		qsort(untagged, UNTAGGED, sizeof(*untagged), cmp_u32);
		sorted = true;
	}
	return w == 0 || bsearch(&key, untagged, UNTAGGED, sizeof(*untagged), cmp_u32);
}

static bool placed;   /* S_PLACE_GIB set: the server places at random */

static void put(int fd, const void *p, size_t n)
{
	REQUIRE(write(fd, p, n) == (ssize_t)n, "pipe write");
}

static void get(int fd, void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = read(fd, (char *)p + done, n - done);

		REQUIRE(k > 0, "pipe read");
		done += (size_t)k;
	}
}

/* An allocation of a random size, its first 4 KiB holding `tag` words. */
static struct alloc make(uint64_t *rng, uint32_t tag, int i)
{
	uint32_t words[1024];
	struct alloc a;
	size_t pitch;

	if (i % 5 == 4) {
		size_t width = 256 + t_rand(rng) % 4000, height = 8 + t_rand(rng) % 200;

		REQUIRE_CU(cuMemAllocPitch(&a.p, &pitch, width, height, 4));
		a.size = (uint64_t)pitch * height;
	} else {
		a.size = 4096 + t_rand(rng) % (5u << 20);
		REQUIRE_CU(cuMemAlloc(&a.p, a.size));
	}
	if (placed) {   /* cleared: nothing of another client's allocations freed before it */
		REQUIRE_CU(cuMemcpyDtoH(words, a.p, sizeof(words)));
		for (int k = 0; k < 1024; k++)
			if (!CHECK(own_or_zero(words[k], tag),
				   "new allocation %d (%llu bytes) word %d: %#x, not cleared", i,
				   (unsigned long long)a.size, k, words[k]))
				break;
	}
	for (int k = 0; k < 1024; k++)
		words[k] = pattern(tag, i, k);
	REQUIRE_CU(cuMemcpyHtoD(a.p, words, sizeof(words)));
	return a;
}

static void check(const struct alloc *a, uint32_t tag, int i, const char *when)
{
	uint32_t words[1024];

	REQUIRE_CU(cuMemcpyDtoH(words, a->p, sizeof(words)));
	for (int k = 0; k < 1024; k++)
		if (!CHECK(words[k] == pattern(tag, i, k),
			   "%s: allocation %d word %d: %#x", when, i, k, words[k]))
			return;
}

/* A pinned allocation of a random size holding `tag` words, read through
 * its device address into device memory and back: the server's mapping of
 * it is the program's memory. Its device address and size go in *a. */
static void *pinned(uint64_t *rng, uint32_t tag, int i, struct alloc *a)
{
	uint32_t *h, *back;
	CUdeviceptr d;
	size_t n;

	a->size = 4096 + t_rand(rng) % (256u << 10);
	n = (size_t)a->size / 4;
	REQUIRE_CU(cuMemAllocHost((void **)&h, (size_t)a->size));
	back = malloc((size_t)a->size);
	REQUIRE(back, "out of memory");
	for (size_t k = 0; k < n; k++)
		h[k] = pattern(tag, ALLOCS + i, (int)k);
	REQUIRE_CU(cuMemHostGetDevicePointer(&a->p, h, 0));
	/* Past SMALL: granules of the client's own, which its later
	 * allocations may be given again (own_or_zero knows these words). */
	REQUIRE_CU(cuMemAlloc(&d, SMALL + 4096));
	REQUIRE_CU(cuMemcpyDtoD(d, a->p, (size_t)a->size));
	REQUIRE_CU(cuMemcpyDtoH(back, d, (size_t)a->size));
	CMP_U32(back, h, n, "pinned memory read through its device address");
	REQUIRE_CU(cuMemFree(d));
	free(back);
	return h;
}

/* An address reservation of 4 MiB (cuMemAddressReserve, no address asked
 * for) with 2 MiB of memory of the child's own mapped in its second half,
 * holding `tag` words read back through it. */
static CUmemGenericAllocationHandle reserved(uint32_t tag, int i, struct alloc *a)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h;
	uint32_t words[1024], back[1024];

	a->size = 2 * GRAN;
	REQUIRE_CU(cuMemAddressReserve(&a->p, (size_t)a->size, 0, 0, 0));
	REQUIRE_CU(cuMemCreate(&h, GRAN, &prop, 0));
	REQUIRE_CU(cuMemMap(a->p + GRAN, GRAN, 0, h, 0));
	REQUIRE_CU(cuMemSetAccess(a->p + GRAN, GRAN, &acc, 1));
	for (int k = 0; k < 1024; k++)
		words[k] = pattern(tag, ALLOCS + HOSTS + i, k);
	REQUIRE_CU(cuMemcpyHtoD(a->p + GRAN, words, sizeof(words)));
	REQUIRE_CU(cuMemcpyDtoH(back, a->p + GRAN, sizeof(back)));
	CMP_U32(back, words, 1024, "memory mapped in an address reservation");
	return h;
}

/* A large allocation written at its end on another stream right away,
 * then read: the server clears new memory on a stream of its own without
 * waiting (placement.h), and the client's streams wait for that clear;
 * work that did not would have its words zeroed by the clear under way
 * (160 MiB: a chunk of its own, whose clear takes the stand-in's stream
 * ~20 ms). Natively, and with placement off, the same holds trivially. */
static void written_at_once(uint32_t tag)
{
	const size_t size = 160u << 20;
	uint32_t words[1024];
	CUdeviceptr p;
	CUstream s;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemAlloc(&p, size));
	REQUIRE_CU(cuMemsetD32Async(p + size - sizeof(words), tag, 1024, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(words, p + size - sizeof(words), sizeof(words)));
	for (int k = 0; k < 1024; k++)
		if (!CHECK(words[k] == tag, "a new allocation's words written at once: word %d is %#x", k, words[k]))
			break;
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuStreamDestroy(s));
}

/* A chunk past 64 granules (a bitmap of several words, placement.c): 4
 * MiB allocations fill chunks of 2, 2, 4, ... 64 granules, and the 65th
 * opens one of 128. Holes freed in it: a 4 MiB allocation takes the first
 * (first fit), a 6 MiB one skips the holes too small for it and takes the
 * run where two allocations went either side of granule 64 (a word's
 * end). Each allocation's first and last words keep their own values. */
#define WIDE 100
static void wide_chunk(uint32_t tag)
{
	const size_t sz = 4u << 20;
	CUdeviceptr a[WIDE + 2];
	uint32_t w;

	for (int i = 0; i < WIDE; i++) {
		REQUIRE_CU(cuMemAlloc(&a[i], sz));
		REQUIRE_CU(cuMemsetD32(a[i], tag ^ (uint32_t)i, 1));
		REQUIRE_CU(cuMemsetD32(a[i] + sz - 4, ~tag ^ (uint32_t)i, 1));
	}
	/* The 65th (index 64) starts the chunk of 128 granules; index 95
	 * holds its granules 62 and 63, index 96 granules 64 and 65. */
	CHECK(a[65] == a[64] + sz && a[96] == a[95] + sz, "allocations 64 to 96 are not one chunk in a row");
	REQUIRE_CU(cuMemFree(a[65]));
	REQUIRE_CU(cuMemFree(a[67]));
	REQUIRE_CU(cuMemFree(a[95]));
	REQUIRE_CU(cuMemFree(a[96]));
	REQUIRE_CU(cuMemAlloc(&a[WIDE], sz + (2u << 20)));
	CHECK(a[WIDE] == a[95], "a 6 MiB allocation at %#llx, not across granule 64 at %#llx",
	      (unsigned long long)a[WIDE], (unsigned long long)a[95]);
	REQUIRE_CU(cuMemAlloc(&a[WIDE + 1], sz));
	CHECK(a[WIDE + 1] == a[65], "a 4 MiB allocation at %#llx, not in the first hole at %#llx",
	      (unsigned long long)a[WIDE + 1], (unsigned long long)a[65]);
	REQUIRE_CU(cuMemsetD32(a[WIDE], 0x5a5a5a5a, (sz + (2u << 20)) / 4));
	REQUIRE_CU(cuMemsetD32(a[WIDE + 1], 0xa5a5a5a5, sz / 4));
	for (int i = 0; i < WIDE; i++) {
		if (i == 65 || i == 67 || i == 95 || i == 96)
			continue;
		REQUIRE_CU(cuMemcpyDtoH(&w, a[i], 4));
		CHECK(w == (tag ^ (uint32_t)i), "wide chunk: allocation %d's first word %#x", i, w);
		REQUIRE_CU(cuMemcpyDtoH(&w, a[i] + sz - 4, 4));
		CHECK(w == (~tag ^ (uint32_t)i), "wide chunk: allocation %d's last word %#x", i, w);
	}
	for (int i = 0; i < WIDE + 2; i++)
		if (i != 65 && i != 67 && i != 95 && i != 96)
			REQUIRE_CU(cuMemFree(a[i]));
}

static int child(int to, int from, uint32_t tag)
{
	uint64_t rng = t_rng(tag);
	struct alloc a[ALLOCS], ha[HOSTS], ra[RESVS];
	CUmemGenericAllocationHandle rh[RESVS];
	void *hp[HOSTS];
	char c;

	t_primary(t_device());
	written_at_once(tag);
	for (int i = 0; i < ALLOCS; i++)
		a[i] = make(&rng, tag, i);
	for (int i = 0; i < HOSTS; i++)
		hp[i] = pinned(&rng, tag, i, &ha[i]);
	for (int i = 0; i < RESVS; i++)
		rh[i] = reserved(tag, i, &ra[i]);
	put(to, a, sizeof(a));
	put(to, ha, sizeof(ha));
	put(to, ra, sizeof(ra));
	get(from, &c, 1);
	for (int i = 0; i < ALLOCS; i++)
		check(&a[i], tag, i, "after both allocated");
	for (int i = 0; i < ALLOCS; i += 2)
		REQUIRE_CU(cuMemFree(a[i].p));
	for (int i = 0; i < ALLOCS; i += 2)
		a[i] = make(&rng, tag, i);
	for (int i = 0; i < ALLOCS; i++)
		check(&a[i], tag, i, "after half were made again");
	put(to, a, sizeof(a));
	get(from, &c, 1);
	for (int i = 0; i < ALLOCS; i++)
		REQUIRE_CU(cuMemFree(a[i].p));
	for (int i = 0; i < HOSTS; i++)
		REQUIRE_CU(cuMemFreeHost(hp[i]));
	for (int i = 0; i < RESVS; i++) {
		REQUIRE_CU(cuMemUnmap(ra[i].p + GRAN, GRAN));
		REQUIRE_CU(cuMemRelease(rh[i]));
		REQUIRE_CU(cuMemAddressFree(ra[i].p, (size_t)ra[i].size));
	}
	if (placed && tag == TAG0)   /* one child: 400 MiB and more */
		wide_chunk(tag);
	return t_finish();
}

/* Both children's reservations: none within a granule of another's or of
 * any allocation's memory, and spread over at least a quarter of the
 * range. */
static void judge_resv(const struct alloc *r, int nr, const struct alloc *all, int na, uint64_t range)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (int i = 0; i < nr; i++) {
		uint64_t from = r[i].p - GRAN, to = r[i].p + r[i].size + GRAN;

		for (int j = 0; j < nr; j++)
			if (j != i && !CHECK(r[j].p >= to || r[j].p + r[j].size <= from,
					     "reservations at %#llx and %#llx (clients %d, %d) are within a granule",
					     (unsigned long long)r[i].p, (unsigned long long)r[j].p, r[i].owner,
					     r[j].owner))
				return;
		for (int j = 0; j < na; j++)
			if (!CHECK(all[j].p >= to || all[j].p + all[j].size <= from,
				   "a reservation at %#llx (client %d) is within a granule of an allocation at %#llx",
				   (unsigned long long)r[i].p, r[i].owner, (unsigned long long)all[j].p))
				return;
		lo = r[i].p < lo ? r[i].p : lo;
		hi = r[i].p > hi ? r[i].p : hi;
	}
	CHECK(hi - lo >= range / 4, "%d reservations span only %llu MiB of a %llu GiB range", nr,
	      (unsigned long long)((hi - lo) >> 20), (unsigned long long)(range >> 30));
	printf("s_place: %d address reservations over %llu GiB\n", nr, (unsigned long long)((hi - lo) >> 30));
}

static int cmp_alloc(const void *x, const void *y)
{
	const struct alloc *a = x, *b = y;

	return a->p < b->p ? -1 : a->p > b->p;
}

/* Both children's pinned allocations, by device address: each at least 1
 * MiB from the next, whoever's (the server maps each at a random page with
 * room around it, where the kernel would stack them), spread over more
 * than a TiB. */
static void judge_host(struct alloc *h, int n)
{
	uint64_t span;

	qsort(h, (size_t)n, sizeof(*h), cmp_alloc);
	for (int i = 1; i < n; i++)
		if (!CHECK(h[i].p >= h[i - 1].p + h[i - 1].size + (1u << 20),
			   "pinned allocation at %#llx (client %d) is %lld bytes past the end of one at %#llx (client %d)",
			   (unsigned long long)h[i].p, h[i].owner, (long long)(h[i].p - h[i - 1].p - h[i - 1].size),
			   (unsigned long long)h[i - 1].p, h[i - 1].owner))
			break;
	span = h[n - 1].p - h[0].p;
	CHECK(span >= 1ull << 40, "%d pinned allocations span only %llu MiB", n, (unsigned long long)(span >> 20));
	printf("s_place: %d pinned allocations over %llu GiB of addresses\n", n, (unsigned long long)(span >> 30));
}

/* The granules an allocation takes: [first, last], its owner, and whether
 * it is carved (small). */
struct block {
	uint64_t first, last;
	int owner;
	bool small;
};

static int cmp_block(const void *x, const void *y)
{
	const struct block *a = x, *b = y;

	return a->first < b->first ? -1 : a->first > b->first;
}

/* The placement checks over both children's allocations. */
static void judge(const struct alloc *all, int n, uint64_t range, const char *when)
{
	struct block b[2 * ALLOCS];
	unsigned int bins[16] = { 0 };
	int nb = 0, small = 0;
	uint64_t span;

	for (int i = 0; i < n; i++) {
		const struct alloc *a = &all[i];
		struct block k = { a->p / GRAN, (a->p + a->size - 1) / GRAN, a->owner, a->size <= SMALL };

		if (k.small) {
			small++;
			CHECK(a->p % 512 == 0 && k.first == k.last, "%s: small allocation %#llx (%llu bytes) not 512-byte "
			      "aligned in one granule", when, (unsigned long long)a->p, (unsigned long long)a->size);
		} else {
			CHECK(a->p % GRAN == 0, "%s: %#llx is not on a 2 MiB boundary", when, (unsigned long long)a->p);
		}
		b[nb++] = k;
	}
	qsort(b, (size_t)nb, sizeof(*b), cmp_block);
	/* A client's granules in a row (a chunk, or one granule of its small
	 * allocations) count as one run. */
	int m = 0;

	for (int i = 0; i < nb; i++) {
		if (m && b[i].owner == b[m - 1].owner && b[i].first <= b[m - 1].last + 1) {
			if (b[i].last > b[m - 1].last)
				b[m - 1].last = b[i].last;
			continue;
		}
		b[m++] = b[i];
	}
	for (int i = 1; i < m; i++)
		if (!CHECK(b[i].first >= b[i - 1].last + 2,
			   "%s: granule %#llx (client %d%s) follows granules to %#llx (client %d%s) with no free one "
			   "between", when, (unsigned long long)(b[i].first * GRAN), b[i].owner, b[i].small ? ", small" : "",
			   (unsigned long long)(b[i - 1].last * GRAN), b[i - 1].owner, b[i - 1].small ? ", small" : ""))
			break;
	span = (b[m - 1].first - b[0].first) * GRAN;
	CHECK(span >= range / 4, "%s: %d runs of granules span %llu MiB of a %llu MiB range", when, m,
	      (unsigned long long)(span >> 20), (unsigned long long)(range >> 20));
	for (int i = 0; i < m; i++)
		bins[(b[i].first - b[0].first) * GRAN * 16 / (span + 1)]++;
	for (int k = 0; k < 16; k++)
		CHECK(bins[k] <= (unsigned int)m / 2 + 1, "%s: %u of %d runs in one sixteenth of their span", when,
		      bins[k], m);
	printf("s_place: %s: %d allocations (%d small) in %d granule runs over %llu MiB\n", when, n, small, m,
	       (unsigned long long)(span >> 20));
}

int main(int argc, char **argv)
{
	const char *gib = getenv("S_PLACE_GIB");
	uint64_t range = gib ? strtoull(gib, NULL, 10) << 30 : 0;
	int up[2][2], down[2][2];
	struct alloc all[2 * ALLOCS], hosts[2 * HOSTS], resvs[2 * RESVS];
	pid_t pid[2];
	int status;

	t_init(argc, argv);
	placed = range != 0;
	for (int k = 0; k < 2; k++) {
		REQUIRE(pipe(up[k]) == 0 && pipe(down[k]) == 0, "pipe");
		pid[k] = fork();
		REQUIRE(pid[k] >= 0, "fork");
		if (pid[k] == 0)
			_exit(child(up[k][1], down[k][0], TAG0 + (uint32_t)k * 0x10000u) == T_PASS ? 0 : 1);
	}
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 2; k++) {
			get(up[k][0], &all[k * ALLOCS], ALLOCS * sizeof(*all));
			for (int i = 0; i < ALLOCS; i++)
				all[k * ALLOCS + i].owner = k;
			if (round)
				continue;
			get(up[k][0], &hosts[k * HOSTS], HOSTS * sizeof(*hosts));
			for (int i = 0; i < HOSTS; i++)
				hosts[k * HOSTS + i].owner = k;
			get(up[k][0], &resvs[k * RESVS], RESVS * sizeof(*resvs));
			for (int i = 0; i < RESVS; i++)
				resvs[k * RESVS + i].owner = k;
		}
		if (range)
			judge(all, 2 * ALLOCS, range, round ? "after half were made again" : "first");
		if (range && !round && HOST_PLACED)
			judge_host(hosts, 2 * HOSTS);
		if (range && !round)
			judge_resv(resvs, 2 * RESVS, all, 2 * ALLOCS, range);
		for (int k = 0; k < 2; k++)
			put(down[k][1], "g", 1);
	}
	for (int k = 0; k < 2; k++) {
		REQUIRE(waitpid(pid[k], &status, 0) == pid[k], "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client %d failed (status %#x)", k, status);
	}
	return t_finish();
}
