// SPDX-License-Identifier: MIT
/*
 * OPENMPS_CLIENT_TRACE_WAITS_US=N: every wait for a reply that lasts N µs
 * or more is logged with its phases, so that a request slower than it
 * should be shows where the time went: whether the server took long to
 * take the message (the word still the server's), the GPU long to store
 * it (handed to the GPU early, stored late), or the client slept and was
 * woken late (asleep, the GPU's store long past). One line a wait, times
 * in µs from its start:
 *
 *   openmps: wait 1834 us, op 12, 17 messages since the thread's last
 *   wait, pid 123 thread 125: began BUSY, spin advised 0 us; handed to
 *   the GPU 40; nap 41-520; flagged 1322; asked 1322; slept 1; woken
 *   1830; 3 yields
 *
 * A phase the wait never reached is left out. The word is looked at 64
 * times before the clock is first read, so "handed" is the first look
 * after those. Off (0) by default, when a wait costs nothing more.
 */
#include <stdio.h>
#include <unistd.h>

#include "client/client.h"
#include "common/log.h"

static const char *state_name(uint32_t st)
{
	switch (st) {
	case MPS_SLOT_BUSY:
		return "BUSY";
	case MPS_SLOT_SLEEPING:
		return "SLEEPING";
	case MPS_SLOT_DONE:
		return "DONE";
	case MPS_SLOT_GPU:
		return "GPU";
	case MPS_SLOT_GPU_SLEEPING:
		return "GPU_SLEEPING";
	default:
		return "?";
	}
}

/* Appends " WHAT T" (µs after start) to buf at *len, if the phase came. */
static void phase(char *buf, size_t size, size_t *len, const char *what, uint64_t at, uint64_t start)
{
	int n;

	if (!at || *len >= size)
		return;
	n = snprintf(buf + *len, size - *len, "; %s %.0f", what, (double)(at - start) / 1000.0);
	if (n > 0)
		*len += (size_t)n;
}

void mps__wait_traced(const struct mps_wait_trace *t, uint32_t kind, uint64_t end)
{
	char buf[512], what[32];
	size_t len = 0;
	int n;

	n = snprintf(buf, sizeof(buf), "began %s, spin advised %u us", state_name(t->st0), t->hint_ns / 1000);
	if (n > 0)
		len = (size_t)n;
	phase(buf, sizeof(buf), &len, "handed to the GPU", t->gpu, t->start);
	if (t->nap && len < sizeof(buf)) {
		n = snprintf(buf + len, sizeof(buf) - len, "; nap %.0f-%.0f", (double)(t->nap - t->start) / 1000.0,
			     (double)(t->nap_end - t->start) / 1000.0);
		if (n > 0)
			len += (size_t)n;
	}
	phase(buf, sizeof(buf), &len, "flagged", t->flagged, t->start);
	phase(buf, sizeof(buf), &len, "asked", t->asked, t->start);
	if (t->sleeps && len < sizeof(buf)) {
		n = snprintf(buf + len, sizeof(buf) - len, "; slept %u", t->sleeps);
		if (n > 0)
			len += (size_t)n;
		phase(buf, sizeof(buf), &len, "woken", t->woken, t->start);
	}
	if (t->yields && len < sizeof(buf))
		snprintf(buf + len, sizeof(buf) - len, "; %u yields", t->yields);
	if (kind & MPS_WAIT_STAGE)
		snprintf(what, sizeof(what), "a staging chunk");
	else
		snprintf(what, sizeof(what), "op %u", kind & 0xffffu);
	mps_log_info("openmps: wait %.0f us, %s, %u message%s since the thread's last wait, pid %d thread %d: %s",
		     (double)(end - t->start) / 1000.0, what, (kind >> 20) & 0xffu, ((kind >> 20) & 0xffu) == 1 ? "" : "s",
		     (int)getpid(), (int)gettid(), buf);
}
