// SPDX-License-Identifier: MIT
/*
 * Parallel memcpy for the pageable-copy path. Staged copies move every byte
 * through a CPU copy between the program's memory and the staging region,
 * and one core copies at a fraction of what the DMA engine does (about
 * 10 GB/s against 55), so a large copy is split among a few threads. The
 * same threads write memory into a file (mps__pwrite_parallel: the pages
 * registration moves into shared memory), where the kernel fills new
 * pages from the caller's without faulting or zeroing them first: 256 MiB
 * in 90 ms from one thread against 190 through a mapping.
 *
 * A small pool, made on first use: OPENMPS_COPY_THREADS threads in all
 * (default: 4, or fewer on smaller machines; 1 turns this off), the caller
 * being one of them. The caller publishes a generation number (a futex
 * word), the helpers copy their slices and count down, and the caller waits
 * for the count to reach zero. One copy at a time (a mutex); copies under
 * 256 KiB are not worth waking anyone for.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "common/atomics.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/futex.h"

#define MAX_THREADS 16
#define MIN_PARALLEL (256u * 1024u)

static struct {
	pthread_mutex_t lock;       /* one parallel copy at a time */
	pthread_once_t once;
	int nthreads;               /* helpers + the caller */
	uint32_t gen;               /* futex word: bumped for each copy */
	uint32_t remaining;         /* helpers still copying */
	uint8_t *dst;               /* memcpy to dst, or (dst NULL) pwrite to fd at off */
	const uint8_t *src;
	size_t n;
	int fd;
	off_t off;
	int err;                    /* atomic: a pwrite's first error (-errno) */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

/* The byte range of slice i of n over t threads: cuts `align`-byte aligned
 * (a power of two), and the slices together cover all n bytes. */
static void slice(size_t n, int t, int i, size_t align, size_t *off, size_t *len)
{
	size_t per = ((n + (size_t)t - 1) / (size_t)t + align - 1) & ~(align - 1);
	size_t start = per * (size_t)i;

	*off = start < n ? start : n;
	*len = start < n ? (n - start < per ? n - start : per) : 0;
}

/* Bytes [from, from + n) of src written to fd at off + from. 0 or -errno. */
static int pwrite_all(int fd, const uint8_t *src, off_t off, size_t from, size_t n)
{
	while (n) {
		ssize_t w = pwrite(fd, src + from, n, off + (off_t)from);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		from += (size_t)w;
		n -= (size_t)w;
	}
	return 0;
}

/* Thread i's share of the job. */
static void run_slice(int i)
{
	size_t off, len;

	if (pool.dst) {
		slice(pool.n, pool.nthreads, i, 64, &off, &len);
		if (len)
			memcpy(pool.dst + off, pool.src + off, len);
	} else {
		int r;

		slice(pool.n, pool.nthreads, i, 4096, &off, &len);   /* whole pages a thread */
		r = len ? pwrite_all(pool.fd, pool.src, pool.off, off, len) : 0;
		if (r) {
			int none = 0;

			mps_cas(&pool.err, &none, r);
		}
	}
}

static void *helper(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint32_t seen = 0;
	uint64_t idle = 0;

	for (;;) {
		uint32_t g = mps_load_acquire(&pool.gen);

		if (g == seen) {
			/* A large copy comes in 2 MiB chunks back to back: stay
			 * awake a little before sleeping. */
			if (!idle)
				idle = mps_now_ns();
			if (mps_now_ns() - idle < 200000) {
				mps_cpu_relax();
				continue;
			}
			mps_futex_wait(&pool.gen, g, 0);
			continue;
		}
		idle = 0;
		seen = g;
		/* Acquire on gen: the job's fields are visible. */
		run_slice(id);
		mps_fetch_sub(&pool.remaining, 1);
	}
	return NULL;
}

static void start(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int t = (int)mps_env_long("OPENMPS_COPY_THREADS", ncpu >= 8 ? 4 : ncpu >= 4 ? 2 : 1, 1, MAX_THREADS);
	pool.nthreads = 1;
	for (int i = 1; i < t; i++) {
		pthread_attr_t attr;
		pthread_t th;

		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		if (pthread_create(&th, &attr, helper, (void *)(intptr_t)i) == 0)
			pool.nthreads++;
		pthread_attr_destroy(&attr);
		if (pool.nthreads != i + 1)
			break;
	}
}

/* Runs the job published in pool (under pool.lock): the helpers' slices
 * and the caller's, then waits for the helpers. */
static void run_job(void)
{
	mps_store_relaxed(&pool.remaining, (uint32_t)(pool.nthreads - 1));
	/* Release: the job is published before the new generation. */
	mps_fetch_add(&pool.gen, 1);
	mps_futex_wake(&pool.gen, pool.nthreads - 1);
	run_slice(0);
	while (mps_load_acquire(&pool.remaining))
		mps_cpu_relax();
}

void mps__pcopy(void *dst, const void *src, size_t n)
{
	if (n < MIN_PARALLEL) {
		memcpy(dst, src, n);
		return;
	}
	pthread_once(&pool.once, start);
	if (pool.nthreads == 1) {
		memcpy(dst, src, n);
		return;
	}
	pthread_mutex_lock(&pool.lock);
	pool.dst = dst;
	pool.src = src;
	pool.n = n;
	run_job();
	pthread_mutex_unlock(&pool.lock);
}

int mps__pwrite_parallel(int fd, const void *src, off_t off, size_t n)
{
	int r;

	pthread_once(&pool.once, start);
	if (n < MIN_PARALLEL || pool.nthreads == 1)
		return pwrite_all(fd, src, off, 0, n);
	pthread_mutex_lock(&pool.lock);
	pool.dst = NULL;
	pool.src = src;
	pool.n = n;
	pool.fd = fd;
	pool.off = off;
	pool.err = 0;
	run_job();
	r = mps_load_relaxed(&pool.err);
	pthread_mutex_unlock(&pool.lock);
	return r;
}
