// SPDX-License-Identifier: MIT
/*
 * The wake of clients asleep on words the GPU stores (src/server/gpuwake.c),
 * on its own, with clients whose regions are plain memory:
 *   - the looks' spacing: every 5 µs (and 0.5 µs a client) for 10 ms after
 *     a client's wake request was read, every 50 µs (and 2 µs a client)
 *     otherwise, for a sleeper whose request has not been read;
 *   - a flagged word the GPU has stored (DONE) loses its bit and its sleeper
 *     is woken: a thread really asleep on it in a futex wait returns, for a
 *     reply slot and for a staging chunk;
 *   - a flagged word still waiting for the store (GPU, GPU_SLEEPING) keeps
 *     its bit and wakes no one; a bit over a word in another state (left
 *     behind by the client) goes without a wake;
 *   - a bit the client cleared first (it saw DONE itself) wakes no one;
 *   - bits past the words that exist are ignored;
 *   - a client whose region is gone (teardown) is passed over;
 *   - which clients wait for the GPU (mps_gpuwake_waiting): a word handed
 *     to the GPU keeps its client waiting while the word says GPU or
 *     GPU_SLEEPING, for MPS_GPU_WATCH_NS at most; a word stored (or moved
 *     on by the client) ends that wait and makes the client active at that
 *     instant; of two words, the one still out keeps the client waiting;
 *     a bit past the words ends; a client without a region waits for
 *     nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "common/futex.h"
#include "common/region.h"
#include "server/gpuwake.h"
#include "server/server.h"
#include "../check.h"

struct mps_server mps_srv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct mps_client clients[3];
static uint64_t now = 1000000000ull;   /* the test's clock, in ns */

static void add_client(struct mps_client *c, bool mapped)
{
	c->region = mapped ? aligned_alloc(4096, MPS_REGION_SIZE) : NULL;
	if (mapped) {
		REQUIRE(c->region, "no memory for a region");
		memset(c->region, 0, MPS_REGION_SIZE);
	}
	c->next = mps_srv.clients;
	mps_srv.clients = c;
	mps_srv.nclients++;
}

static uint32_t *slot_word(struct mps_client *c, unsigned int i)
{
	return &mps_region_slot(c->region, i)->state;
}

/* Polls once, far enough past the last look; returns the wakes it made. */
static uint64_t poll_once(void)
{
	uint64_t looks0, wakes0, looks1, wakes1;

	mps_gpuwake_stats(&looks0, &wakes0);
	now += 100 * 1000;
	mps_gpuwake_poll(now);
	mps_gpuwake_stats(&looks1, &wakes1);
	CHECK(looks1 == looks0 + 1, "a poll 100 µs after the last made no look");
	return wakes1 - wakes0;
}

struct sleeper {
	uint32_t *word;
	uint32_t value;
	int woke;   /* atomic */
};

static void *sleep_main(void *arg)
{
	struct sleeper *s = arg;

	/* Bounded, so a lost wake fails the test instead of hanging it. */
	while (mps_load_acquire(s->word) == s->value)
		if (mps_futex_wait(s->word, s->value, 2000ull * 1000 * 1000) == -ETIMEDOUT)
			break;
	mps_store_release(&s->woke, mps_load_acquire(s->word) == s->value ? -1 : 1);
	return NULL;
}

/* Polls at `at` (the test's clock); whether it looked. */
static bool looked_at(uint64_t at)
{
	uint64_t looks0, wakes0, looks1, wakes1;

	mps_gpuwake_stats(&looks0, &wakes0);
	mps_gpuwake_poll(at);
	mps_gpuwake_stats(&looks1, &wakes1);
	return looks1 != looks0;
}

static void test_spacing(void)
{
	struct mps_region *r = clients[0].region;

	/* No request read yet (it may wait in its ring behind a busy
	 * thread): the slow looks still find the sleeper. */
	*slot_word(&clients[0], 3) = MPS_SLOT_DONE;
	r->gpu_sleepers = 1ull << 3;
	now += 1000 * 1000;
	CHECK(looked_at(now) && r->gpu_sleepers == 0, "no slow look, or it did not wake: bits %#llx",
	      (unsigned long long)r->gpu_sleepers);
	r->gpu_sleepers = 1ull << 3;
	now += 20 * 1000;
	CHECK(!looked_at(now) && r->gpu_sleepers == 1ull << 3, "a slow look 20 µs after the last");
	/* A request read: looks every 5 µs + 0.5 µs a client. */
	mps_gpuwake_note(now);
	now += 7 * 1000;
	CHECK(looked_at(now) && r->gpu_sleepers == 0, "no look 7 µs after the last, with a request");
	r->gpu_sleepers = 1ull << 3;
	CHECK(!looked_at(now + 1000), "looked twice within 1 µs");
	/* Long after the last request: slow again. */
	now += 200ull * 1000 * 1000;
	CHECK(looked_at(now), "no slow look 200 ms on");
	CHECK(!looked_at(now + 7 * 1000), "a fast look 200 ms after the last request");
	CHECK(looked_at(now + 100 * 1000), "no slow look 100 µs on");
	now += 100 * 1000;
	CHECK(r->gpu_sleepers == 0, "bits left: %#llx", (unsigned long long)r->gpu_sleepers);
	mps_gpuwake_note(now);
}

static void test_states(void)
{
	struct mps_region *r = clients[0].region;
	uint64_t bits = 0;

	*slot_word(&clients[0], 0) = MPS_SLOT_GPU_SLEEPING;    /* store not come: kept */
	*slot_word(&clients[0], 1) = MPS_SLOT_GPU;             /* the same */
	*slot_word(&clients[0], 2) = MPS_SLOT_BUSY;            /* left behind: goes, no wake */
	*slot_word(&clients[0], 31) = MPS_SLOT_DONE;           /* woken */
	r->stage_state[0] = MPS_STAGE_GPU_SLEEPING;            /* kept */
	r->stage_state[MPS_STAGE_MAX - 1] = MPS_STAGE_DONE;    /* woken */
	bits = 1ull << 0 | 1ull << 1 | 1ull << 2 | 1ull << 31 | 1ull << MPS_WAKE_STAGE(0) |
	       1ull << MPS_WAKE_STAGE(MPS_STAGE_MAX - 1) | 1ull << 63;   /* past every word: ignored */
	r->gpu_sleepers = bits;
	mps_gpuwake_note(now);
	CHECK(poll_once() == 2, "wakes for two stored words");
	CHECK(r->gpu_sleepers == (1ull << 0 | 1ull << 1 | 1ull << MPS_WAKE_STAGE(0) | 1ull << 63),
	      "bits left: %#llx", (unsigned long long)r->gpu_sleepers);

	/* The stores come: those go too. */
	*slot_word(&clients[0], 0) = MPS_SLOT_DONE;
	*slot_word(&clients[0], 1) = MPS_SLOT_DONE;
	r->stage_state[0] = MPS_STAGE_DONE;
	CHECK(poll_once() == 3, "wakes once the stores came");
	CHECK(r->gpu_sleepers == 1ull << 63, "bits left: %#llx", (unsigned long long)r->gpu_sleepers);
	r->gpu_sleepers = 0;
}

/* Real sleepers, on two clients, one of them a staging chunk; a third
 * client's region is gone. */
static void test_sleepers(void)
{
	struct sleeper s[2] = {
		{ .word = slot_word(&clients[0], 7), .value = MPS_SLOT_GPU_SLEEPING },
		{ .word = &clients[1].region->stage_state[5], .value = MPS_STAGE_GPU_SLEEPING },
	};
	pthread_t t[2];

	*s[0].word = s[0].value;
	*s[1].word = s[1].value;
	mps_fetch_or(&clients[0].region->gpu_sleepers, 1ull << 7);
	mps_fetch_or(&clients[1].region->gpu_sleepers, 1ull << MPS_WAKE_STAGE(5));
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, sleep_main, &s[i]) == 0, "no thread");
	mps_gpuwake_note(now);
	CHECK(poll_once() == 0, "woke sleepers whose stores have not come");
	/* The GPU's stores (as cuStreamWriteValue32 makes them: a plain write). */
	mps_store_release(s[0].word, MPS_SLOT_DONE);
	mps_store_release(s[1].word, MPS_STAGE_DONE);
	CHECK(poll_once() == 2, "two sleepers not woken");
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK(s[i].woke == 1, "sleeper %d did not see its word", i);
	}
	CHECK(clients[0].region->gpu_sleepers == 0 && clients[1].region->gpu_sleepers == 0, "bits left");

	/* The client saw DONE itself and cleared its bit first: no wake. */
	*slot_word(&clients[0], 9) = MPS_SLOT_DONE;
	clients[0].region->gpu_sleepers = 0;
	CHECK(poll_once() == 0, "woke for a bit the client had cleared");
}

static void test_waiting(void)
{
	struct mps_client *c = &clients[0];
	uint32_t *slot = slot_word(c, 4), *stage = &c->region->stage_state[2];

	memset(&c->comp, 0, sizeof(c->comp));
	c->active_ns = 0;
	CHECK(!mps_gpuwake_waiting(c, now), "waits with nothing handed to the GPU");

	/* A synchronize answered by the GPU: the word says GPU until the store. */
	*slot = MPS_SLOT_GPU;
	mps_gpuwake_handed(c, 4, now);
	CHECK(mps_gpuwake_waiting(c, now + 1000), "a word the GPU has not stored is not a wait");
	*slot = MPS_SLOT_GPU_SLEEPING;   /* the client went to sleep on it */
	CHECK(mps_gpuwake_waiting(c, now + 2000), "a sleeper's word is not a wait");
	CHECK(c->active_ns == 0, "a wait under way made the client active");
	CHECK(!mps_gpuwake_waiting(c, now + MPS_GPU_WATCH_NS), "watched past MPS_GPU_WATCH_NS");
	CHECK(c->comp.gpu_waits == 1u << 4, "the bit went with the watch: %#llx",
	      (unsigned long long)c->comp.gpu_waits);
	mps_store_release(slot, MPS_SLOT_DONE);
	CHECK(!mps_gpuwake_waiting(c, now + 3000), "a stored word is still a wait");
	CHECK(c->comp.gpu_waits == 0 && c->active_ns == now + 3000,
	      "the end of the wait: bits %#llx, active at %llu", (unsigned long long)c->comp.gpu_waits,
	      (unsigned long long)c->active_ns);

	/* A slot and a staging chunk out; the chunk's copy ends first. */
	*slot = MPS_SLOT_GPU;
	mps_gpuwake_handed(c, 4, now + 4000);
	*stage = MPS_STAGE_GPU;
	mps_gpuwake_handed(c, MPS_WAKE_STAGE(2), now + 5000);
	mps_store_release(stage, MPS_STAGE_DONE);
	CHECK(mps_gpuwake_waiting(c, now + 6000), "the slot still out is not a wait");
	CHECK(c->comp.gpu_waits == 1u << 4 && c->active_ns == now + 6000, "the chunk's end: bits %#llx",
	      (unsigned long long)c->comp.gpu_waits);
	/* The client reused the slot for another call (BUSY): that wait is over. */
	*slot = MPS_SLOT_BUSY;
	CHECK(!mps_gpuwake_waiting(c, now + 7000) && c->comp.gpu_waits == 0, "a word moved on is still a wait");

	/* Bits past the words (never handed out so) end at the first look. */
	c->comp.gpu_waits = 1ull << 63;
	c->comp.gpu_wait_ns = now + 8000;
	CHECK(!mps_gpuwake_waiting(c, now + 9000) && c->comp.gpu_waits == 0, "a bit past the words");

	/* A client torn down (no region) waits for nothing. */
	clients[2].comp.gpu_waits = 1;
	clients[2].comp.gpu_wait_ns = now;
	CHECK(!mps_gpuwake_waiting(&clients[2], now + 1), "a client without a region waits");
	clients[2].comp.gpu_waits = 0;
	*slot = 0;
	*stage = 0;
}

int main(void)
{
	add_client(&clients[2], false);   /* torn down: no region */
	add_client(&clients[1], true);
	add_client(&clients[0], true);
	test_spacing();
	test_states();
	test_sleepers();
	test_waiting();
	return check_finish("test_gpuwake");
}
