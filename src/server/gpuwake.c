// SPDX-License-Identifier: MIT
/*
 * See gpuwake.h. A client thread that waits long for a word the GPU stores
 * sets the word's bit in its region's gpu_sleepers, moves the word to
 * GPU_SLEEPING, asks to be woken (MPS_OP_SLOT_WAKE) and sleeps on it. The
 * asking is the slow way (completion.c: an event behind the store, then a
 * blocking wait on the client's waiter thread, an interrupt and two thread
 * wake-ups; with the CPUs crowded that took 200-600 µs). Here the service
 * threads look at every client's bits between their other work, at most
 * every LOOK_NS (more with more clients) for a while after any client
 * asked, every SLOW_NS otherwise (a request may wait in its ring while the
 * threads serve others), and wake each sleeper whose word says DONE: one
 * futex call, no driver call, microseconds after the store. The asking
 * still happens, and is what wakes a sleeper while no service thread runs,
 * or with a stream's error.
 *
 * The same words tell the scheduler which clients wait for the GPU: each
 * word the server has the GPU store into is noted (mps_gpuwake_handed), and
 * while one still says GPU the client is about to send its next message,
 * so a thread keeps watching it rather than going to sleep.
 *
 * Locking: one thread looks at a time, holding the client list's lock
 * (trylock: a thread that finds it taken goes on), which also keeps every
 * listed client's region mapped (service.c unmaps under it). No driver
 * call is made. The bits are the client's to set: whichever side clears a
 * bit wakes, so a client flagging words it does not sleep on costs at
 * most one futex call per bit it sets again, on its own words.
 */
#include <pthread.h>

#include "common/atomics.h"
#include "common/futex.h"
#include "common/region.h"
#include "server/gpuwake.h"
#include "server/server.h"

#define LOOK_NS        5000ull                  /* the least time between two looks ... */
#define LOOK_CLIENT_NS 500ull                   /* ... and this much more a client listed, */
#define ASKED_NS       (10ull * 1000 * 1000)    /* for this long after the last wake request; */
#define SLOW_NS        50000ull                 /* else (a request not yet read) this often ... */
#define SLOW_CLIENT_NS 2000ull                  /* ... and this much more a client */

static uint64_t asked_ns, looked_ns;   /* atomic */
static uint64_t looks, wakes;          /* atomic */
static uint64_t listed;                /* atomic: the clients the last look went over */

/* Whether a word handed to the GPU still waits for its store. */
static bool unstored(uint32_t st)
{
	return st == MPS_SLOT_GPU || st == MPS_SLOT_GPU_SLEEPING;
}

void mps_gpuwake_note(uint64_t now)
{
	if (mps_load_relaxed(&asked_ns) != now)
		mps_store_relaxed(&asked_ns, now);
}

/* One client's flagged words: the sleepers woken. */
static unsigned int look(struct mps_region *r)
{
	uint64_t bits = mps_load_acquire(&r->gpu_sleepers) & ((1ull << MPS_WAKE_COUNT) - 1);
	unsigned int woken = 0;

	while (bits) {
		unsigned int w = (unsigned int)__builtin_ctzll(bits);
		uint64_t bit = 1ull << w;
		uint32_t *word = mps_region_wake_word(r, w);
		uint32_t st = mps_load_acquire(word);

		bits &= bits - 1;
		if (unstored(st))
			continue;   /* the store has not come */
		/* DONE: the sleeper's (or, with another value, a bit left
		 * behind, which only goes). */
		if ((mps_fetch_and(&r->gpu_sleepers, ~bit) & bit) && st == MPS_SLOT_DONE) {
			mps_futex_wake(word, 1);
			woken++;
		}
	}
	return woken;
}

void mps_gpuwake_poll(uint64_t now)
{
	uint64_t last = mps_load_relaxed(&looked_ns), n = 0, every;
	unsigned int woken = 0;

	/* Often while clients ask to be woken; seldom otherwise, for the
	 * sleeper whose request waits in its ring behind a busy thread. */
	if ((int64_t)(now - mps_load_relaxed(&asked_ns)) <= (int64_t)ASKED_NS)
		every = LOOK_NS + LOOK_CLIENT_NS * mps_load_relaxed(&listed);
	else
		every = SLOW_NS + SLOW_CLIENT_NS * mps_load_relaxed(&listed);
	if ((int64_t)(now - last) < (int64_t)every || !mps_cas(&looked_ns, &last, now))
		return;
	if (pthread_mutex_trylock(&mps_srv.lock))
		return;
	for (struct mps_client *c = mps_srv.clients; c; c = c->next, n++) {
		struct mps_region *r = mps_load_acquire(&c->region);

		if (r)
			woken += look(r);
	}
	pthread_mutex_unlock(&mps_srv.lock);
	mps_store_relaxed(&listed, n);
	mps_fetch_add(&looks, 1);
	if (woken)
		mps_fetch_add(&wakes, woken);
}

void mps_gpuwake_stats(uint64_t *n_looks, uint64_t *n_wakes)
{
	*n_looks = mps_load_relaxed(&looks);
	*n_wakes = mps_load_relaxed(&wakes);
}

void mps_gpuwake_handed(struct mps_client *c, uint32_t w, uint64_t now)
{
	mps_store_relaxed(&c->comp.gpu_wait_ns, now);
	mps_fetch_or(&c->comp.gpu_waits, 1ull << w);
}

bool mps_gpuwake_waiting(struct mps_client *c, uint64_t now)
{
	struct mps_completions *q = &c->comp;
	uint64_t bits = mps_load_relaxed(&q->gpu_waits), left = bits;
	struct mps_region *r = mps_load_acquire(&c->region);

	if (!bits || !r)
		return false;
	for (uint64_t b = bits; b; b &= b - 1) {
		unsigned int w = (unsigned int)__builtin_ctzll(b);
		if (w >= MPS_WAKE_COUNT || !unstored(mps_load_acquire(mps_region_wake_word(r, w))))
			left &= ~(1ull << w);   /* stored (or the word went on): that wait is over */
	}
	if (left != bits) {
		mps_fetch_and(&q->gpu_waits, ~(bits & ~left));
		mps_store_relaxed(&c->active_ns, now);
	}
	return left && (int64_t)(now - mps_load_relaxed(&q->gpu_wait_ns)) < (int64_t)MPS_GPU_WATCH_NS;
}
