// SPDX-License-Identifier: MIT
/*
 * How long a wait for the GPU's store may sleep before it starts looking.
 * A serving loop waits for the same things request after request (the
 * synchronize after a GEMM, the copy of a result back), and with more
 * processes than CPUs each of those waits lasts about as long as the last
 * few did, since the GPU runs everyone's work in turn. A wait that spins
 * through all of it keeps a CPU that the server's threads need to answer
 * the others; one that sleeps until a server thread wakes it pays for the
 * wake when CPUs are crowded. The middle way: sleep on a timer (no one
 * needs to wake it) until a little before the earliest its store came in
 * this thread's recent waits of the same kind, then look as before.
 *
 * Per thread, a few kinds (the call that waits, and how many messages the
 * thread sent since its last wait: conn.c), each with the lengths of its
 * last NAP_HISTORY waits. A length is a lower bound: the last moment
 * the wait saw its word not yet stored, so a nap that overslept records
 * where it began, never the oversleep — the prediction can only fall
 * because of a nap, never climb, and a kind whose waits shrink follows them
 * down within one wait. A wait that ended asleep (past the nap and the
 * watch after it, conn.c) records where it fell asleep too, so waits much
 * longer than the watch are learnt a watch at a time: their naps fall
 * short, never long.
 */
#include <stdint.h>

#include "client/client.h"

#define NAP_KINDS   16    /* kinds a thread keeps (direct-mapped: kind_of) */
#define NAP_HISTORY 8     /* waits a kind remembers */
#define NAP_KNOWN   4     /* waits a kind needs before it naps */
#define MARGIN_NS   (20ull * 1000)   /* woken this much before, plus an eighth */

struct kind {
	uint32_t key;                 /* which kind (0: none yet) */
	uint32_t n, next;             /* waits recorded (up to NAP_HISTORY); where the next goes */
	uint64_t ns[NAP_HISTORY];
};

static __thread struct kind kinds[NAP_KINDS];

static struct kind *kind_of(uint32_t key)
{
	return &kinds[(key * 0x9e3779b1u) >> 28];   /* the top 4 bits: NAP_KINDS places */
}

uint64_t mps__nap_until(uint32_t key)
{
	const struct kind *k = kind_of(key + 1);
	uint64_t least = UINT64_MAX, margin;

	if (k->key != key + 1 || k->n < NAP_KNOWN)
		return 0;
	for (uint32_t i = 0; i < k->n; i++)
		if (k->ns[i] < least)
			least = k->ns[i];
	margin = MARGIN_NS + least / 8;
	return least > margin ? least - margin : 0;
}

void mps__nap_record(uint32_t key, uint64_t ns)
{
	struct kind *k = kind_of(key + 1);

	if (k->key != key + 1) {
		/* Another kind had the place: its history says nothing of this one. */
		k->key = key + 1;
		k->n = k->next = 0;
	}
	k->ns[k->next] = ns;
	k->next = (k->next + 1) % NAP_HISTORY;
	if (k->n < NAP_HISTORY)
		k->n++;
}
