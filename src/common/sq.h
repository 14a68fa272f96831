// SPDX-License-Identifier: MIT
/*
 * The submission queue's two ends, over the layout in region.h. The producer
 * end is used by the client library (its caller holds a lock: many threads,
 * one producer at a time); the consumer end by the server's worker for that
 * client (single consumer). Each end keeps its own index privately and only
 * publishes it; the other side's index is read with acquire order and never
 * trusted beyond the checks made here.
 */
#ifndef MPS_COMMON_SQ_H
#define MPS_COMMON_SQ_H

#include <stdbool.h>
#include <stdint.h>

#include "common/region.h"

struct mps_sq_producer {
	struct mps_region *region;
	uint8_t *ring;
	uint32_t tail;       /* private copy of what we published */
	uint32_t head_cache; /* last head seen; refreshed when the ring looks full */
	uint32_t pending;    /* bytes reserved and not yet committed */
	int wake_fd;         /* eventfd that wakes the consumer; -1: a futex wake on the flag */
};

struct mps_sq_consumer {
	struct mps_region *region;
	uint8_t *ring;
	uint32_t head;       /* private copy of what we published */
};

void mps_sq_producer_init(struct mps_sq_producer *p, void *region);
void mps_sq_consumer_init(struct mps_sq_consumer *c, void *region);

/* Reserves room for one message of len bytes (a multiple of MPS_MSG_ALIGN, at
 * most MPS_MSG_MAX). Returns where to write it, or NULL when the ring is full
 * (the caller waits for the consumer and tries again). At most one message
 * may be reserved and not committed at a time. */
void *mps_sq_reserve(struct mps_sq_producer *p, uint32_t len);

/* Publishes the reserved message and wakes the consumer if it sleeps: a
 * write to p->wake_fd, or a futex wake on the flag if there is none. */
void mps_sq_commit(struct mps_sq_producer *p);

/* True when the consumer has taken everything published so far. */
bool mps_sq_drained(struct mps_sq_producer *p);

/* Copies the next message into buf (MPS_MSG_MAX bytes) and releases its room
 * in the ring. Returns the message length, 0 when the ring is empty, or
 * -EPROTO when the producer broke the ring's rules (the connection is then
 * unusable). Pad messages are skipped. */
int mps_sq_pop(struct mps_sq_consumer *c, void *buf);

/* Consumer's sleep handshake: announces that it is going to sleep and
 * returns true if it may, false if work arrived meanwhile (the flag is then
 * already cleared). After sleeping, call mps_sq_awake(). */
bool mps_sq_prepare_sleep(struct mps_sq_consumer *c);
void mps_sq_awake(struct mps_sq_consumer *c);

/* Sleeps on the ring after a successful mps_sq_prepare_sleep(), at most
 * timeout_ns. */
void mps_sq_sleep(struct mps_sq_consumer *c, uint64_t timeout_ns);

/* Wakes a consumer sleeping in mps_sq_sleep() whatever the ring holds (used
 * by the server itself to make a worker look at other state). */
void mps_sq_kick(void *region);

#endif
