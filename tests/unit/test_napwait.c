// SPDX-License-Identifier: MIT
/*
 * The naps of a client's waits for the GPU (src/client/napwait.c): no nap
 * until a kind of wait has a history; then until a margin before the
 * shortest of its recent waits (one short wait brings the naps down until
 * it leaves the history); kinds sharing a place start afresh, never
 * answering from another's history; each thread keeps its own.
 */
#include <pthread.h>
#include <stdint.h>

#include "client/client.h"

#include "../check.h"

#define US 1000ull

/* What napwait.c takes off the shortest wait. */
static uint64_t expect(uint64_t least)
{
	uint64_t margin = 20 * US + least / 8;

	return least > margin ? least - margin : 0;
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* The main thread's history of kind 7 is not this thread's. */
	CHECK(mps__nap_until(7) == 0, "a new thread has no history");
	for (int i = 0; i < 4; i++)
		mps__nap_record(7, 100 * US);
	CHECK(mps__nap_until(7) == expect(100 * US), "got %llu", (unsigned long long)mps__nap_until(7));
	return NULL;
}

int main(void)
{
	pthread_t t;

	/* No history, then too little. */
	CHECK(mps__nap_until(7) == 0, "nothing recorded");
	for (int i = 0; i < 3; i++) {
		mps__nap_record(7, 1000 * US);
		CHECK(mps__nap_until(7) == 0, "%d waits are not enough", i + 1);
	}
	mps__nap_record(7, 1200 * US);
	CHECK(mps__nap_until(7) == expect(1000 * US), "four waits: got %llu",
	      (unsigned long long)mps__nap_until(7));
	CHECK(expect(1000 * US) == 855 * US, "the margin is 20 us and an eighth");

	/* The shortest of the history counts: a short one brings the naps
	 * down to it until eight longer ones have pushed it out. */
	mps__nap_record(7, 30 * US);
	CHECK(mps__nap_until(7) == expect(30 * US) && expect(30 * US) < 10 * US, "a 30 us wait: got %llu",
	      (unsigned long long)mps__nap_until(7));
	for (int i = 0; i < 7; i++) {
		mps__nap_record(7, 900 * US + (uint64_t)i * US);
		CHECK(mps__nap_until(7) == expect(30 * US), "the short wait is still remembered after %d", i + 1);
	}
	mps__nap_record(7, 2000 * US);
	CHECK(mps__nap_until(7) == expect(900 * US), "the short wait is forgotten: got %llu",
	      (unsigned long long)mps__nap_until(7));
	mps__nap_record(7, 0);
	CHECK(mps__nap_until(7) == 0, "a wait answered at once: no nap");

	/* Seventeen kinds in sixteen places: each answers from its own
	 * history or not at all, never from another's; the last recorded
	 * always has its own, and at least one lost its place. */
	{
		unsigned int lost = 0;

		for (uint32_t k = 100; k < 117; k++)
			for (int i = 0; i < 4; i++)
				mps__nap_record(k, (k - 99) * 100 * US);
		for (uint32_t k = 100; k < 117; k++) {
			uint64_t got = mps__nap_until(k);

			CHECK(got == 0 || got == expect((k - 99) * 100 * US), "kind %u: got %llu", k,
			      (unsigned long long)got);
			lost += got == 0;
		}
		CHECK(mps__nap_until(116) == expect(1700 * US), "the last kind recorded");
		CHECK(lost >= 1, "seventeen kinds cannot all keep a place among sixteen");
	}

	/* Kind 0 and the staging chunks' kind are kinds like any other. */
	for (int i = 0; i < 4; i++)
		mps__nap_record(0, 300 * US);
	CHECK(mps__nap_until(0) == expect(300 * US), "kind 0");
	for (int i = 0; i < 4; i++)
		mps__nap_record(MPS_WAIT_STAGE, 600 * US);
	CHECK(mps__nap_until(MPS_WAIT_STAGE) == expect(600 * US), "staging");

	/* A history never predicts past its shortest wait, however long the rest. */
	for (int i = 0; i < 8; i++)
		mps__nap_record(9, (uint64_t)(i + 1) * 1000 * US);
	CHECK(mps__nap_until(9) == expect(1000 * US) && mps__nap_until(9) < 1000 * US, "bounded by the shortest");

	REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
	pthread_join(t, NULL);
	CHECK(mps__nap_until(7) == 0, "the other thread's waits are not this one's (this one's last was 0)");
	return check_finish("test_napwait");
}
