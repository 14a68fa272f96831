// SPDX-License-Identifier: MIT
/*
 * GPU faults. A kernel that faults (an illegal address, a device-side
 * assert, ...) leaves its context with a sticky error that every later use
 * of the context returns: the server's one context per GPU is then dead
 * for every client of that GPU. The server does what NVIDIA MPS does, and
 * says more about it: every client is told the driver's error (it becomes
 * the answer to each of its later calls), the log and the control daemon
 * are told which client's work was running — the culprit when there was
 * one, the suspects otherwise — and the server exits, so the daemon starts
 * a fresh one for the next client. A client that wants its neighbours kept
 * out of its faults runs in a fault domain of its own (a server of its own;
 * OPENMPS_FAULT_DOMAIN, see docs/CONTROL.md).
 *
 * Detection costs nothing on the normal path: every result a client gets
 * passes mps_fault_check(), which looks further only at the sticky error
 * codes, and then asks each device's context whether it is the one dead.
 */
#ifndef MPS_SERVER_FAULT_H
#define MPS_SERVER_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "common/wire.h"

struct mps_client;
struct mps_sfunc;

/* Whether r is one of the errors that kill a context (wire.h). */
static inline bool mps_fault_sticky(CUresult r)
{
	return mps_wire_fault_result((int)r);
}

/* Sets up the wake-up the main thread waits on: 0, or -1. Its fd. */
int mps_fault_init(void);
int mps_fault_init_fd(void);

/* Raises the fault (once) if a device's context is dead and wakes the
 * main thread; whether a fault was seen (the server is about to report it
 * and exit). Any thread. */
bool mps_fault_look(void);

/* Whether a fault was seen, without looking. Any thread. */
bool mps_fault_seen(void);

/* A result some client got: if it is sticky, looks for the fault. */
static inline void mps_fault_check(CUresult r)
{
	if (mps_fault_sticky(r))
		mps_fault_look();
}

/* The interned copy of a kernel's name, for the report (NULL if out of
 * memory). */
const char *mps_fault_name(const char *name);

/* Work client c queued on stream `stream` of device dev (every piece of
 * stream work passes here, in mps_stream_for_work), then, for a launch,
 * its kernel: what names a culprit. Service thread. */
void mps_fault_note_work(struct mps_client *c, int dev, uint32_t stream);
void mps_fault_note_kernel(struct mps_client *c, const struct mps_sfunc *f);

/* Main thread, once woken: reports the fault, tells every client and the
 * daemon, and ends the server. Does not return. */
void mps_fault_finish(void) __attribute__((noreturn));

#endif
