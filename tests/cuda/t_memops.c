// SPDX-License-Identifier: MIT
/*
 * Stream memory operations: cuStreamWaitValue32/64 and
 * cuStreamWriteValue32/64 between two streams. A stream that waits for a
 * word runs its later work only once another stream, behind a kernel that
 * spins ~50 ms and then stores a flag, has written the word: the work after
 * the wait sees the flag. The same with a 64-bit word and EQ, and with a
 * word in pinned host memory that the program itself writes, and a batch
 * (cuStreamBatchMemOp) of a wait and two writes. Last, a synchronize (of
 * the stream, then of an event) held by such a wait returns only after
 * another thread lets the stream go, and soon after: under openmps with
 * OPENMPS_CLIENT_YIELD_US=0 (tests/system/replies.sh) the waiting thread
 * sleeps after its spin and the server must wake it, well before the
 * client's own 100 ms liveness check would. A large pageable copy queued
 * behind such a wait returns once its staging (the driver's, or openmps's
 * chunks) has room again, after the release, with every byte arriving.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define FLAG 0x600dcafeu

struct release {
	uint32_t *word;
	uint64_t at_ns;   /* when it stored the word */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *release_later(void *arg)
{
	struct release *r = arg;
	const struct timespec nap = { .tv_nsec = 30 * 1000 * 1000 };

	nanosleep(&nap, NULL);
	r->at_ns = now_ns();
	__atomic_store_n(r->word, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Holds s behind a wait for *word (device address mapped), queues a copy of
 * d's first word into *out, and synchronizes (the stream, or an event
 * recorded after the copy) while another thread lets the stream go. */
static void held_sync(CUstream s, uint32_t *word, CUdeviceptr mapped, CUdeviceptr d, uint32_t *out, bool event)
{
	struct release rel = { .word = word };
	CUevent ev = NULL;
	pthread_t t;
	uint64_t back;

	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	*out = 0;
	REQUIRE_CU(cuStreamWaitValue32(s, mapped, 1, CU_STREAM_WAIT_VALUE_GEQ));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d, 4, s));
	if (event) {
		REQUIRE_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
		REQUIRE_CU(cuEventRecord(ev, s));
	}
	REQUIRE(pthread_create(&t, NULL, release_later, &rel) == 0, "pthread_create");
	REQUIRE_CU(event ? cuEventSynchronize(ev) : cuStreamSynchronize(s));
	back = now_ns();
	pthread_join(t, NULL);
	CHECK(rel.at_ns && back >= rel.at_ns, "a %s synchronize returned before the stream was let go",
	      event ? "event" : "stream");
	/* A wake that was missed ends the client's sleep at its 100 ms
	 * liveness timeout, begun as the synchronize began, 30 ms before the
	 * release: 70 ms after it. 60 ms tells the two apart with room for a
	 * sanitized build on a crowded machine (44 ms seen). */
	CHECK(back - rel.at_ns < 60ull * 1000 * 1000, "a %s synchronize returned %.1f ms after the stream was let go",
	      event ? "event" : "stream", (double)(back - rel.at_ns) / 1e6);
	CHECK(*out == 9, "the copy behind the wait: %u", *out);
	if (ev)
		REQUIRE_CU(cuEventDestroy(ev));
}

/* Holds s behind a wait for *word, then copies `n` bytes of pageable
 * memory to dst on s, asynchronously: more than any staging holds, so the
 * call returns only once the stream has been let go. */
static void held_copy(CUstream s, uint32_t *word, CUdeviceptr mapped, CUdeviceptr dst, size_t n)
{
	struct release rel = { .word = word };
	uint32_t *src = malloc(n), *back = malloc(n);
	uint64_t rng = t_rng(11), done;
	pthread_t t;

	REQUIRE(src && back, "out of memory");
	t_fill_u32(src, n / 4, &rng);
	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	REQUIRE_CU(cuStreamWaitValue32(s, mapped, 1, CU_STREAM_WAIT_VALUE_GEQ));
	REQUIRE(pthread_create(&t, NULL, release_later, &rel) == 0, "pthread_create");
	REQUIRE_CU(cuMemcpyHtoDAsync(dst, src, n, s));
	done = now_ns();
	pthread_join(t, NULL);
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(rel.at_ns && done >= rel.at_ns, "a pageable copy behind a held stream returned before the release");
	REQUIRE_CU(cuMemcpyDtoH(back, dst, n));
	CHECK(memcmp(src, back, n) == 0, "a pageable copy behind a held stream: the bytes differ");
	free(src);
	free(back);
}

int main(int argc, char **argv)
{
	CUfunction spin;
	CUdeviceptr d, mapped;
	CUstream s1, s2;
	uint32_t *host, flag = FLAG;
	long long cycles = 100LL * 1000 * 1000;
	const uint64_t big = 0x123456789abcdef1ull;
	const struct timespec nap = { .tv_nsec = 50 * 1000 * 1000 };

	t_init(argc, argv);
	t_primary(t_device());
	spin = t_func(t_module(), "spin_then_store");
	REQUIRE_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemAlloc(&d, 64));
	REQUIRE_CU(cuMemsetD32(d, 0, 16));
	REQUIRE_CU(cuMemAllocHost((void **)&host, 64));
	memset(host, 0, 64);
	REQUIRE_CU(cuCtxSynchronize());

	/* 32-bit, GEQ: s2 waits for s1's write, which follows the kernel. */
	REQUIRE_CU(cuStreamWaitValue32(s2, d, 7, CU_STREAM_WAIT_VALUE_GEQ));
	REQUIRE_CU(cuMemcpyDtoHAsync(&host[8], d + 32, 4, s2));   /* pinned: a pageable one would wait here */
	{
		CUdeviceptr f = d + 32;
		void *args[] = { &cycles, &f, &flag };

		REQUIRE_CU(t_launch(spin, 1, 1, s1, args));
	}
	REQUIRE_CU(cuStreamWriteValue32(s1, d, 9, 0));
	REQUIRE_CU(cuStreamSynchronize(s2));
	CHECK(host[8] == FLAG, "the work after a 32-bit wait ran before the write it waited for (%#x)", host[8]);

	/* 64-bit, EQ. */
	REQUIRE_CU(cuMemsetD32(d + 32, 0, 2));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuStreamWaitValue64(s2, d + 8, big, CU_STREAM_WAIT_VALUE_EQ));
	REQUIRE_CU(cuMemcpyDtoHAsync(&host[9], d + 32, 4, s2));
	{
		CUdeviceptr f = d + 32;
		void *args[] = { &cycles, &f, &flag };

		REQUIRE_CU(t_launch(spin, 1, 1, s1, args));
	}
	REQUIRE_CU(cuStreamWriteValue64(s1, d + 8, big, 0));
	REQUIRE_CU(cuStreamSynchronize(s2));
	CHECK(host[9] == FLAG, "the work after a 64-bit wait ran before the write it waited for (%#x)", host[9]);
	{
		uint64_t back = 0;

		REQUIRE_CU(cuMemcpyDtoH(&back, d + 8, 8));
		CHECK(back == big, "a 64-bit write left %#llx", (unsigned long long)back);
	}

	/* A word in pinned host memory, written by the program. */
	REQUIRE_CU(cuMemHostGetDevicePointer(&mapped, host, 0));
	REQUIRE_CU(cuStreamWaitValue32(s2, mapped, 5, CU_STREAM_WAIT_VALUE_EQ));
	REQUIRE_CU(cuStreamWriteValue32(s2, mapped + 4, 11, 0));
	nanosleep(&nap, NULL);
	CHECK(__atomic_load_n(&host[1], __ATOMIC_ACQUIRE) == 0, "the write after a wait on host memory ran first");
	__atomic_store_n(&host[0], 5, __ATOMIC_RELEASE);
	REQUIRE_CU(cuStreamSynchronize(s2));
	CHECK(__atomic_load_n(&host[1], __ATOMIC_ACQUIRE) == 11, "the write after a wait on host memory: %u",
	      host[1]);

	/* A batch: wait for a word the program writes, then write two. */
	{
		CUstreamBatchMemOpParams ops[3];

		memset(ops, 0, sizeof(ops));
		ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
		ops[0].waitValue.address = mapped + 8;
		ops[0].waitValue.value = 3;
		ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
		ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
		ops[1].writeValue.address = mapped + 12;
		ops[1].writeValue.value = 21;
		ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
		ops[2].writeValue.address = mapped + 16;
		ops[2].writeValue.value64 = big;
		__atomic_store_n(&host[2], 0, __ATOMIC_RELEASE);
		REQUIRE_CU(cuStreamBatchMemOp(s2, 3, ops, 0));
		nanosleep(&nap, NULL);
		CHECK(__atomic_load_n(&host[3], __ATOMIC_ACQUIRE) == 0, "a batch's write ran before its wait");
		__atomic_store_n(&host[2], 3, __ATOMIC_RELEASE);
		REQUIRE_CU(cuStreamSynchronize(s2));
		CHECK(__atomic_load_n(&host[3], __ATOMIC_ACQUIRE) == 21 &&
		      __atomic_load_n((uint64_t *)&host[4], __ATOMIC_ACQUIRE) == big,
		      "a batch's writes: %u and %#llx", host[3], (unsigned long long)*(uint64_t *)&host[4]);
	}

	/* A long synchronize, released by another thread. d's first word is
	 * 9 since the first case. */
	held_sync(s2, &host[6], mapped + 24, d, &host[7], false);
	held_sync(s2, &host[6], mapped + 24, d, &host[7], true);
	{
		const size_t n = 18u << 20;   /* just past openmps's 16 MiB of staging */
		CUdeviceptr big_d;

		REQUIRE_CU(cuMemAlloc(&big_d, n));
		held_copy(s2, &host[6], mapped + 24, big_d, n);
		REQUIRE_CU(cuMemFree(big_d));
	}

	REQUIRE_CU(cuMemFreeHost(host));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s1));
	REQUIRE_CU(cuStreamDestroy(s2));
	return t_finish();
}
