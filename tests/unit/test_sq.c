// SPDX-License-Identifier: MIT
/*
 * The submission queue under random traffic, differentially: a producer
 * thread sends messages of random sizes (from one header up to the largest
 * message) and random contents through the lock-free ring, and records each
 * in a plain mutex-protected queue as well; a consumer thread pops from the
 * ring and checks every message against the reference queue, byte for byte,
 * in order. The consumer also sleeps on the ring from time to time, so the
 * wakeup handshake is exercised; a lost wakeup shows up as a stall, which
 * the test reports. Finally, a ring whose producer breaks the rules (a bad
 * length, a pad that does not run to the end, a tail beyond the ring) must
 * make the consumer report -EPROTO.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/sq.h"
#include "common/wire.h"

#include "../check.h"

/* Fewer under ThreadSanitizer, which slows every access tenfold or more. */
#if defined(__SANITIZE_THREAD__)
#define MESSAGES 20000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MESSAGES 20000
#endif
#endif
#ifndef MESSAGES
#define MESSAGES 200000
#endif

struct ref {
	pthread_mutex_t lock;
	uint32_t *len;        /* per message: length */
	uint64_t *seed;       /* per message: content seed */
	size_t n;             /* messages recorded */
};

static struct ref ref = { .lock = PTHREAD_MUTEX_INITIALIZER };
static void *region;

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void nap(void)
{
	struct timespec ts = { 0, 20000 };

	nanosleep(&ts, NULL);
}

/* Message lengths are multiples of 8 (mps_msg_size), so whole words. */
static void fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	for (uint32_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w = next(&seed);

		memcpy(p + i, &w, 8);
	}
}

static void *producer(void *arg)
{
	struct mps_sq_producer p;
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	(void)arg;
	mps_sq_producer_init(&p, region);
	for (int i = 0; i < MESSAGES; i++) {
		/* Mostly small, sometimes the largest, so the ring wraps often. */
		uint64_t r = next(&rng);
		uint32_t len = r % 8 == 0 ? MPS_MSG_MAX : mps_msg_size(sizeof(struct mps_msg) + (r >> 8) % 4000);
		uint64_t seed = next(&rng) | 1;
		struct mps_msg *m;

		if (r % 64 == 1)
			len = mps_msg_size(sizeof(struct mps_msg) + (r >> 8) % (MPS_MSG_MAX - 16));
		/* Spin briefly, then nap: on a busy machine with few CPUs a
		 * spinning producer would burn the time the consumer needs. */
		for (int spins = 0; !(m = mps_sq_reserve(&p, len)); spins++) {
			if (spins < 64)
				mps_cpu_relax();
			else
				nap();
		}
		fill((uint8_t *)m, len, seed);
		m->op = 1 + (uint16_t)(i % 100);
		m->len = len;
		m->slot = (uint32_t)i;
		pthread_mutex_lock(&ref.lock);
		ref.len[ref.n] = len;
		ref.seed[ref.n] = seed;
		ref.n++;
		pthread_mutex_unlock(&ref.lock);
		mps_sq_commit(&p);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct mps_sq_consumer c;
	uint8_t *buf = malloc(MPS_MSG_MAX), *want = malloc(MPS_MSG_MAX);
	uint64_t idle = 0;
	int got = 0, sleeps = 0, empty = 0;

	(void)arg;
	mps_sq_consumer_init(&c, region);
	while (got < MESSAGES) {
		int n = mps_sq_pop(&c, buf);
		uint32_t len;
		uint64_t seed;

		if (!CHECK(n >= 0, "the consumer saw a broken ring after %d messages", got))
			break;
		if (n == 0) {
			if (!idle)
				idle = mps_now_ns();
			if (mps_now_ns() - idle > 5000000000ull) {
				CHECK(got == MESSAGES, "stalled after %d messages (lost wakeup?)", got);
				break;
			}
			/* Sleep now and then, as the server's worker does. */
			if (got % 97 == 3 && mps_sq_prepare_sleep(&c)) {
				mps_sq_sleep(&c, 100000000ull);
				mps_sq_awake(&c);
				sleeps++;
			} else if (++empty > 64) {
				nap();
			} else {
				mps_cpu_relax();
			}
			continue;
		}
		idle = 0;
		empty = 0;
		pthread_mutex_lock(&ref.lock);
		len = ref.len[got];
		seed = ref.seed[got];
		pthread_mutex_unlock(&ref.lock);
		fill(want, len, seed);
		((struct mps_msg *)want)->op = 1 + (uint16_t)(got % 100);
		((struct mps_msg *)want)->len = len;
		((struct mps_msg *)want)->slot = (uint32_t)got;
		if (!CHECK((uint32_t)n == len && !memcmp(buf, want, len), "message %d differs (got %d bytes, want %u)",
			   got, n, len))
			break;
		got++;
	}
	printf("test_sq: %d messages checked, consumer slept %d times\n", got, sleeps);
	free(buf);
	free(want);
	return NULL;
}

/* A producer that breaks the rules must be detected, not followed. */
static void check_broken(void)
{
	struct mps_region *r = region;
	struct mps_sq_consumer c;
	uint8_t *buf = malloc(MPS_MSG_MAX);
	struct mps_msg *m = (struct mps_msg *)mps_region_sq(region);

	memset(region, 0, MPS_REGION_SIZE);
	mps_sq_consumer_init(&c, region);
	/* Length not a multiple of the alignment. */
	m->op = 1;
	m->len = 24;
	mps_store_release(&r->sq_tail.v, 32u);
	CHECK(mps_sq_pop(&c, buf) == -EPROTO, "a misaligned length was accepted");
	/* A length beyond what was published. */
	mps_sq_consumer_init(&c, region);
	m->len = 64;
	mps_store_release(&r->sq_tail.v, 32u);
	CHECK(mps_sq_pop(&c, buf) == -EPROTO, "a message longer than published was accepted");
	/* A pad that stops short of the end. */
	mps_sq_consumer_init(&c, region);
	m->op = 0;
	m->len = 32;
	mps_store_release(&r->sq_tail.v, 32u);
	CHECK(mps_sq_pop(&c, buf) == -EPROTO, "a short pad was accepted");
	/* A tail more than a ring ahead. */
	mps_sq_consumer_init(&c, region);
	mps_store_release(&r->sq_tail.v, MPS_SQ_SIZE + 16);
	CHECK(mps_sq_pop(&c, buf) == -EPROTO, "a tail beyond the ring was accepted");
	/* A message larger than the largest allowed (but within the ring). */
	mps_sq_consumer_init(&c, region);
	m->op = 1;
	m->len = MPS_MSG_MAX + 16;
	mps_store_release(&r->sq_tail.v, MPS_MSG_MAX + 16);
	CHECK(mps_sq_pop(&c, buf) == -EPROTO, "an oversized message was accepted");
	free(buf);
}

int main(void)
{
	pthread_t pt, ct;

	region = mmap(NULL, MPS_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ref.len = calloc(MESSAGES, sizeof(*ref.len));
	ref.seed = calloc(MESSAGES, sizeof(*ref.seed));
	if (region == MAP_FAILED || !ref.len || !ref.seed)
		return 1;
	pthread_create(&ct, NULL, consumer, NULL);
	pthread_create(&pt, NULL, producer, NULL);
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	check_broken();
	return check_finish("test_sq");
}
