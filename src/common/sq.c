// SPDX-License-Identifier: MIT
/*
 * Submission queue: the single-producer single-consumer byte ring described
 * in region.h and sq.h. The memory orders:
 *   producer: write message bytes, then store-release sq_tail;
 *   consumer: load-acquire sq_tail, read message bytes, copy them out, then
 *             store-release sq_head, so the producer cannot overwrite bytes
 *             that are still being copied;
 *   producer: load-acquire sq_head before reusing space.
 * The wakeup flag needs a full fence on both sides (store flag / fence / load
 * index against store index / fence / load flag), or each side could miss the
 * other's store and the consumer would sleep with work queued.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/futex.h"
#include "common/sq.h"

#define SQ_MASK (MPS_SQ_SIZE - 1)

void mps_sq_producer_init(struct mps_sq_producer *p, void *region)
{
	p->region = region;
	p->ring = mps_region_sq(region);
	p->tail = mps_load_acquire(&p->region->sq_tail.v);
	p->head_cache = mps_load_acquire(&p->region->sq_head.v);
	p->pending = 0;
	p->wake_fd = -1;
}

void mps_sq_consumer_init(struct mps_sq_consumer *c, void *region)
{
	c->region = region;
	c->ring = mps_region_sq(region);
	c->head = 0;
}

void *mps_sq_reserve(struct mps_sq_producer *p, uint32_t len)
{
	uint32_t off = p->tail & SQ_MASK;
	uint32_t contiguous = MPS_SQ_SIZE - off;
	uint32_t need = len <= contiguous ? len : contiguous + len;

	if (MPS_SQ_SIZE - (p->tail - p->head_cache) < need) {
		/* Acquire: the consumer has finished copying what it released. */
		p->head_cache = mps_load_acquire(&p->region->sq_head.v);
		if (MPS_SQ_SIZE - (p->tail - p->head_cache) < need)
			return NULL;
	}
	if (len > contiguous) {
		struct mps_msg *pad = (struct mps_msg *)(p->ring + off);

		pad->op = 0; /* MPS_OP_PAD */
		pad->flags = 0;
		pad->len = contiguous;
		pad->slot = 0;
		pad->ctx = 0;
		p->tail += contiguous;
		off = 0;
	}
	p->pending = len;
	return p->ring + off;
}

void mps_sq_commit(struct mps_sq_producer *p)
{
	p->tail += p->pending;
	p->pending = 0;
	/* Release: the message bytes are visible before the new tail. */
	mps_store_release(&p->region->sq_tail.v, p->tail);
	/* Store tail / load flag: pairs with the fence in mps_sq_prepare_sleep. */
	mps_fence();
	if (mps_load_relaxed(&p->region->sq_need_wakeup.v) == MPS_SQ_NEED_WAKEUP &&
	    mps_xchg(&p->region->sq_need_wakeup.v, MPS_SQ_AWAKE) == MPS_SQ_NEED_WAKEUP) {
		uint64_t one = 1;

		/* A failed write means the server is gone; the caller's wait
		 * finds that out. */
		if (p->wake_fd < 0)
			mps_futex_wake(&p->region->sq_need_wakeup.v, 1);
		else if (write(p->wake_fd, &one, sizeof(one)) < 0)
			mps_fence();
	}
}

bool mps_sq_drained(struct mps_sq_producer *p)
{
	return mps_load_acquire(&p->region->sq_head.v) == p->tail;
}

int mps_sq_pop(struct mps_sq_consumer *c, void *buf)
{
	for (;;) {
		/* Acquire: the producer's message bytes are visible. */
		uint32_t tail = mps_load_acquire(&c->region->sq_tail.v);
		uint32_t avail = tail - c->head;
		uint32_t off = c->head & SQ_MASK;
		struct mps_msg hdr;

		if (avail == 0)
			return 0;
		if (avail > MPS_SQ_SIZE || avail % MPS_MSG_ALIGN)
			return -EPROTO;
		memcpy(&hdr, c->ring + off, sizeof(hdr));
		if (hdr.len < sizeof(hdr) || hdr.len % MPS_MSG_ALIGN || hdr.len > avail ||
		    hdr.len > MPS_SQ_SIZE - off)
			return -EPROTO;
		if (hdr.op == 0) {
			/* A pad always runs exactly to the end of the ring. */
			if (hdr.len != MPS_SQ_SIZE - off)
				return -EPROTO;
			c->head += hdr.len;
			mps_store_release(&c->region->sq_head.v, c->head);
			continue;
		}
		if (hdr.len > MPS_MSG_MAX)
			return -EPROTO;
		memcpy(buf, c->ring + off, hdr.len);
		/* The producer may have changed the header since we checked it:
		 * keep the checked one. */
		memcpy(buf, &hdr, sizeof(hdr));
		c->head += hdr.len;
		/* Release: our copy is complete before the producer may reuse it. */
		mps_store_release(&c->region->sq_head.v, c->head);
		return (int)hdr.len;
	}
}

bool mps_sq_prepare_sleep(struct mps_sq_consumer *c)
{
	mps_store_relaxed(&c->region->sq_need_wakeup.v, MPS_SQ_NEED_WAKEUP);
	/* Store flag / load tail: pairs with the fence in mps_sq_commit. */
	mps_fence();
	if (mps_load_acquire(&c->region->sq_tail.v) != c->head) {
		mps_store_relaxed(&c->region->sq_need_wakeup.v, MPS_SQ_AWAKE);
		return false;
	}
	return true;
}

void mps_sq_sleep(struct mps_sq_consumer *c, uint64_t timeout_ns)
{
	mps_futex_wait(&c->region->sq_need_wakeup.v, MPS_SQ_NEED_WAKEUP, timeout_ns);
}

void mps_sq_awake(struct mps_sq_consumer *c)
{
	mps_store_relaxed(&c->region->sq_need_wakeup.v, MPS_SQ_AWAKE);
}

void mps_sq_kick(void *region)
{
	struct mps_region *r = region;

	mps_store_release(&r->sq_need_wakeup.v, MPS_SQ_AWAKE);
	mps_futex_wake(&r->sq_need_wakeup.v, 1);
}
