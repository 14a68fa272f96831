// SPDX-License-Identifier: MIT
/*
 * Where two clients' allocations land with OPENMPS_PLACEMENT=random
 * (src/server/placement.h; tests/system/placement.sh starts the daemon).
 * Two processes each make ALLOCS allocations of random sizes (4 KiB to 5
 * MiB, some through cuMemAllocPitch), write a pattern of their own into
 * each and send their addresses and sizes to the parent over a pipe, then
 * wait. The parent checks that every allocation starts on a 2 MiB boundary,
 * that no two allocations, of one client or of both, come within 2 MiB of
 * each other (an unmapped granule between any two), and that they spread
 * over the range (S_PLACE_GIB, the daemon's OPENMPS_PLACEMENT_GIB): their
 * span is at least half of it and no 1/16th of it holds more than a
 * quarter of them. Then each child reads its patterns back (the other's
 * allocations and frees did not touch them), frees half, allocates again
 * and checks the new ones likewise; every new allocation reads as zeros
 * (the server clears it: freed ones held the other patterns; on the
 * stand-in a new physical allocation is zeros anyway, on a GPU the
 * clearing is what makes it so). With
 * placement off (S_PLACE_GIB unset) it only checks the patterns.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

#define ALLOCS 40
#define GRAN   (2ull << 20)

struct alloc {
	CUdeviceptr p;
	uint64_t size;
};

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
	if (placed) {   /* cleared: nothing of the allocations freed before it */
		REQUIRE_CU(cuMemcpyDtoH(words, a.p, sizeof(words)));
		for (int k = 0; k < 1024; k++)
			if (!CHECK(words[k] == 0, "new allocation %d word %d: %#x, not cleared", i, k, words[k]))
				break;
	}
	for (int k = 0; k < 1024; k++)
		words[k] = tag ^ (uint32_t)(k * 2654435761u) ^ (uint32_t)i;
	REQUIRE_CU(cuMemcpyHtoD(a.p, words, sizeof(words)));
	return a;
}

static void check(const struct alloc *a, uint32_t tag, int i, const char *when)
{
	uint32_t words[1024];

	REQUIRE_CU(cuMemcpyDtoH(words, a->p, sizeof(words)));
	for (int k = 0; k < 1024; k++)
		if (!CHECK(words[k] == (tag ^ (uint32_t)(k * 2654435761u) ^ (uint32_t)i),
			   "%s: allocation %d word %d: %#x", when, i, k, words[k]))
			return;
}

static int child(int to, int from, uint32_t tag)
{
	uint64_t rng = t_rng(tag);
	struct alloc a[ALLOCS];
	char c;

	t_primary(t_device());
	for (int i = 0; i < ALLOCS; i++)
		a[i] = make(&rng, tag, i);
	put(to, a, sizeof(a));
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
	return t_finish();
}

static int cmp(const void *x, const void *y)
{
	const struct alloc *a = x, *b = y;

	return a->p < b->p ? -1 : a->p > b->p;
}

/* The placement checks over both children's allocations. */
static void judge(struct alloc *all, int n, uint64_t range, const char *when)
{
	unsigned int bins[16] = { 0 };
	uint64_t span;

	qsort(all, (size_t)n, sizeof(*all), cmp);
	for (int i = 0; i < n; i++) {
		CHECK(all[i].p % GRAN == 0, "%s: %#llx is not on a 2 MiB boundary", when, (unsigned long long)all[i].p);
		if (i && !CHECK(all[i].p >= all[i - 1].p + (all[i - 1].size + GRAN - 1) / GRAN * GRAN + GRAN,
				"%s: %#llx follows %#llx (%llu bytes) with no free granule between", when,
				(unsigned long long)all[i].p, (unsigned long long)all[i - 1].p,
				(unsigned long long)all[i - 1].size))
			break;
	}
	span = all[n - 1].p - all[0].p;
	CHECK(span >= range / 2, "%s: %d allocations span %llu MiB of a %llu MiB range", when, n,
	      (unsigned long long)(span >> 20), (unsigned long long)(range >> 20));
	for (int i = 0; i < n; i++)
		bins[(all[i].p - all[0].p) * 16 / (span + 1)]++;
	for (int b = 0; b < 16; b++)
		CHECK(bins[b] <= (unsigned int)n / 4, "%s: %u of %d allocations in one sixteenth of their span", when,
		      bins[b], n);
	printf("s_place: %s: %d allocations over %llu MiB\n", when, n, (unsigned long long)(span >> 20));
}

int main(int argc, char **argv)
{
	const char *gib = getenv("S_PLACE_GIB");
	uint64_t range = gib ? strtoull(gib, NULL, 10) << 30 : 0;
	int up[2][2], down[2][2];
	struct alloc all[2 * ALLOCS];
	pid_t pid[2];
	int status;

	t_init(argc, argv);
	placed = range != 0;
	for (int k = 0; k < 2; k++) {
		REQUIRE(pipe(up[k]) == 0 && pipe(down[k]) == 0, "pipe");
		pid[k] = fork();
		REQUIRE(pid[k] >= 0, "fork");
		if (pid[k] == 0)
			_exit(child(up[k][1], down[k][0], 0xa5000000u + (uint32_t)k * 0x10000u) == T_PASS ? 0 : 1);
	}
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 2; k++)
			get(up[k][0], &all[k * ALLOCS], ALLOCS * sizeof(*all));
		if (range)
			judge(all, 2 * ALLOCS, range, round ? "after half were made again" : "first");
		for (int k = 0; k < 2; k++)
			put(down[k][1], "g", 1);
	}
	for (int k = 0; k < 2; k++) {
		REQUIRE(waitpid(pid[k], &status, 0) == pid[k], "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client %d failed (status %#x)", k, status);
	}
	return t_finish();
}
