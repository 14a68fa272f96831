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
#include <stdarg.h>
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

/* The line being written. */
struct line {
	char buf[512];
	size_t len;
};

/* Appends to the line what fmt says, as much as fits. */
static void __attribute__((format(printf, 2, 3))) add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= sizeof(l->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len += (size_t)n;
}

/* µs from the wait's start to at. */
static double us(const struct mps_wait_trace *t, uint64_t at)
{
	return (double)(at - t->start) / 1000.0;
}

void mps__wait_traced(const struct mps_wait_trace *t, uint32_t kind, uint64_t end)
{
	struct line l = { .len = 0 };
	char what[32];

	add(&l, "began %s, spin advised %u us", state_name(t->st0), t->hint_ns / 1000);
	if (t->gpu)
		add(&l, "; handed to the GPU %.0f", us(t, t->gpu));
	if (t->nap)
		add(&l, "; nap %.0f-%.0f", us(t, t->nap), us(t, t->nap_end));
	if (t->flagged)
		add(&l, "; flagged %.0f", us(t, t->flagged));
	if (t->asked)
		add(&l, "; asked %.0f", us(t, t->asked));
	if (t->sleeps)
		add(&l, "; slept %u", t->sleeps);
	if (t->sleeps && t->woken)
		add(&l, "; woken %.0f", us(t, t->woken));
	if (t->yields)
		add(&l, "; %u yields", t->yields);
	if (kind & MPS_WAIT_STAGE)
		snprintf(what, sizeof(what), "a staging chunk");
	else
		snprintf(what, sizeof(what), "op %u", kind & 0xffffu);
	mps_log_info("openmps: wait %.0f us, %s, %u message%s since the thread's last wait, pid %d thread %d: %s",
		     us(t, end), what, (kind >> 20) & 0xffu, ((kind >> 20) & 0xffu) == 1 ? "" : "s",
		     (int)getpid(), (int)gettid(), l.buf);
}
