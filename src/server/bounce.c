// SPDX-License-Identifier: MIT
/*
 * The bounce ring (bounce.h): registered memory handed out as a byte ring
 * (common/bytering.h); each copy holds its stretch and an event recorded
 * after its copy, in a ring of entries in the same order. Room is made by
 * asking the events (reclaim()); nothing ever waits.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/bytering.h"
#include "common/log.h"
#include "server/bounce.h"
#include "server/driver.h"
#include "server/placement.h"
#include "server/server.h"

#define RING_BYTES (512u * 1024u)   /* room for eight of the largest inline copies */
#define ENTRIES    64u              /* copies in flight at most */

struct bounce_entry {
	uint64_t end;       /* `head` once this copy was handed its bytes */
	CUevent ev;         /* recorded after the copy; kept for reuse */
	int device;         /* the event's */
};

struct mps_bounce {
	uint8_t *base;
	uint64_t head, tail;            /* bytes handed out, taken back */
	unsigned int first, n;          /* oldest entry, entries in flight */
	CUstream last;                  /* the stream of the newest entry */
	bool mixed;                     /* the entries in flight are on more than one stream */
	bool failed;                    /* the ring could not be made: do not try again */
	struct bounce_entry e[ENTRIES];
};

static struct mps_bounce *get(struct mps_client *c)
{
	struct mps_bounce *b = c->bounce;
	void *p;

	if (b)
		return b->failed ? NULL : b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	c->bounce = b;
	for (unsigned int i = 0; i < ENTRIES; i++)
		b->e[i].device = -1;
	p = mps_place_host_map(-1, RING_BYTES);
	if (!p) {
		b->failed = true;
		return NULL;
	}
	if (mps_drv.cuMemHostRegister(p, RING_BYTES, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
		munmap(p, RING_BYTES);
		mps_log_debug("client %d: no bounce ring (registration failed): copies go the driver's way",
			      (int)c->pid);
		b->failed = true;
		return NULL;
	}
	b->base = p;
	return b;
}

/* Takes back the copies the GPU has finished. All on one stream (the
 * usual case), the newest one's event answers for them all: one query
 * (each costs 0.4 µs, 2.5 with four threads in the driver). Else oldest
 * first, up to the first not finished. */
static void reclaim(struct mps_bounce *b)
{
	if (b->n && !b->mixed &&
	    mps_drv.cuEventQuery(b->e[(b->first + b->n - 1) % ENTRIES].ev) == CUDA_SUCCESS) {
		b->tail = b->head;
		b->first = (b->first + b->n) % ENTRIES;
		b->n = 0;
		return;
	}
	while (b->n) {
		struct bounce_entry *e = &b->e[b->first];

		if (mps_drv.cuEventQuery(e->ev) != CUDA_SUCCESS)
			return;   /* not reached yet (or failed: the stream's teardown settles it) */
		b->tail = e->end;
		b->first = (b->first + 1) % ENTRIES;
		b->n--;
	}
}

/* Where n bytes fit now, or NULL; *end is `head` once they are handed out. */
static uint8_t *room(struct mps_bounce *b, size_t n, uint64_t *end)
{
	if (b->n == ENTRIES || !mps_bytering_fit(b->head, b->tail, RING_BYTES, n, end))
		return NULL;
	return b->base + (*end - n) % RING_BYTES;
}

CUresult mps_bounce_h2d(struct mps_client *c, struct mps_sstream *st, CUdeviceptr dst, const void *src, size_t n)
{
	struct mps_bounce *b;
	struct bounce_entry *e;
	uint64_t end;
	uint8_t *p;
	CUresult r;

	if (!n || n > RING_BYTES / 4 || !(b = get(c)))
		return CUDA_ERROR_NOT_SUPPORTED;
	p = room(b, n, &end);
	if (!p) {
		reclaim(b);
		p = room(b, n, &end);
		if (!p)
			return CUDA_ERROR_NOT_SUPPORTED;
	}
	e = &b->e[(b->first + b->n) % ENTRIES];
	if (e->device != st->ctx->device) {
		/* An event is its context's: made where the stream's is current. */
		if (e->ev)
			mps_drv.cuEventDestroy(e->ev);
		e->ev = NULL;
		e->device = -1;
		if (mps_drv.cuEventCreate(&e->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
			e->ev = NULL;
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		e->device = st->ctx->device;
	}
	memcpy(p, src, n);
	r = mps_drv.cuMemcpyHtoDAsync(dst, p, n, st->s);
	if (r != CUDA_SUCCESS)
		return r;   /* nothing queued reads the bytes: they are free again */
	if (mps_drv.cuEventRecord(e->ev, st->s) != CUDA_SUCCESS) {
		/* Nothing would say when the copy is done: wait for it here,
		 * once (the context has failed, or is failing). */
		mps_drv.cuStreamSynchronize(st->s);
		return CUDA_SUCCESS;
	}
	e->end = end;
	b->head = end;
	b->mixed = b->n && (b->mixed || b->last != st->s);
	b->last = st->s;
	b->n++;
	return CUDA_SUCCESS;
}

void mps_bounce_free(struct mps_client *c)
{
	struct mps_bounce *b = c->bounce;

	if (!b)
		return;
	for (unsigned int i = 0; i < ENTRIES; i++)
		if (b->e[i].ev)
			mps_drv.cuEventDestroy(b->e[i].ev);
	if (b->base) {
		mps_drv.cuMemHostUnregister(b->base);
		munmap(b->base, RING_BYTES);
	}
	free(b);
	c->bounce = NULL;
}
