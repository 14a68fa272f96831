// SPDX-License-Identifier: MIT
/*
 * The layout of the shared-memory region between one client process and the
 * server: the pinned ABI of the transport. The server creates the region (a
 * sealed memfd, so the client can neither shrink nor grow it), registers it
 * with the driver as pinned host memory, and passes the fd to the client at
 * the handshake. Both sides map it whole.
 *
 *   offset 0             struct mps_region     header, ring indices, staging states
 *   MPS_SQ_OFFSET        submission queue      byte ring of messages, client -> server
 *   MPS_SLOT_OFFSET      reply slots           one per outstanding synchronous call
 *
 * Submission queue: single producer (the client library, which serialises its
 * threads with a lock), single consumer (the server's worker for that client).
 * Free-running uint32_t indices in bytes, masked by MPS_SQ_SIZE - 1; the client
 * writes only sq_tail, the server only sq_head. A message never wraps: when one
 * does not fit before the end, the producer writes a MPS_OP_PAD message up to
 * the end and starts again at offset 0. Messages are multiples of
 * MPS_MSG_ALIGN bytes, so a pad always has room for its header.
 *
 * Reply slots: a thread making a synchronous call owns a slot (the client
 * hands them out), sends the slot number with the message, and waits on the
 * slot's state word; the server fills in the reply and stores MPS_SLOT_DONE
 * with release order. A reply that only waits for the GPU (a synchronize, a
 * small synchronous copy) is written by the GPU itself: the server fills in
 * the result, moves the word from BUSY to MPS_SLOT_GPU, and queues on the
 * stream a write of MPS_SLOT_DONE into the word (the region is registered
 * with the driver, so the GPU can store into it). The client polls the word
 * and, to sleep instead, sets the word's bit in gpu_sleepers, moves it to
 * MPS_SLOT_GPU_SLEEPING and sends MPS_OP_SLOT_WAKE. The server's threads
 * look at the words whose bits are set as they go about their work and
 * wake the sleeper once the GPU has stored DONE (clearing the bit: the one
 * that clears it wakes); MPS_OP_SLOT_WAKE is the way when no thread is
 * awake to look, and the way a stream's error reaches the sleeper. A word
 * the client already moved to SLEEPING is answered by the server as
 * before. A staging chunk's state word goes the same way
 * (MPS_STAGE_GPU, with the same values), so the chunk comes back the moment
 * its copy is done.
 *
 * Wakeups follow the NEED_WAKEUP pattern: a side that is about to sleep sets
 * its flag, issues a full fence, re-checks for work, and only then sleeps; a
 * side that produces work issues a full fence after publishing and wakes the
 * other only if the flag is set. The client wakes the server by writing the
 * eventfd it was given at the handshake (the server's threads sleep on many
 * clients at once); the server wakes a client by a futex wake on the word
 * the client sleeps on.
 *
 * The client is untrusted: the server copies each message out of the ring
 * before looking at it, checks every index and length it reads here, and
 * never reads back a value that only it writes (it keeps private copies).
 */
#ifndef MPS_COMMON_REGION_H
#define MPS_COMMON_REGION_H

#include <stddef.h>
#include <stdint.h>

#define MPS_REGION_MAGIC    0x53504d4fu /* "OMPS" little-endian */
#define MPS_REGION_VERSION  6

#define MPS_SQ_SIZE         (256u * 1024u)     /* power of two */
#define MPS_MSG_ALIGN       16u
#define MPS_REGION_DEVICES  16                 /* = MPS_MAX_DEVICES (wire.h checks) */
#define MPS_MSG_MAX         (64u * 1024u)      /* largest message, header included */

#define MPS_SLOT_COUNT      32u
#define MPS_SLOT_SIZE       8192u
#define MPS_SLOT_HDR        64u
#define MPS_SLOT_DATA       (MPS_SLOT_SIZE - MPS_SLOT_HDR)

#define MPS_STAGE_MAX       16u                /* staging chunks a client may use */
#define MPS_REGION_LIMITS   16                 /* context limits published (CUlimit values below it) */
#define MPS_LIMIT_UNKNOWN   UINT64_MAX         /* a published limit the client must ask for */

#define MPS_HEADER_SIZE     4096u
#define MPS_SQ_OFFSET       MPS_HEADER_SIZE
#define MPS_SLOT_OFFSET     (MPS_SQ_OFFSET + MPS_SQ_SIZE)
#define MPS_REGION_SIZE     (MPS_SLOT_OFFSET + MPS_SLOT_COUNT * MPS_SLOT_SIZE)

/* Values of mps_region.sq_need_wakeup (written by the server). */
#define MPS_SQ_AWAKE        0u
#define MPS_SQ_NEED_WAKEUP  1u

/* Values of a reply slot's state word. */
#define MPS_SLOT_FREE       0u  /* not in use (client-side bookkeeping) */
#define MPS_SLOT_BUSY       1u  /* request sent, reply not yet written */
#define MPS_SLOT_SLEEPING   2u  /* as BUSY, and the client sleeps on the word */
#define MPS_SLOT_DONE       3u  /* reply written */
#define MPS_SLOT_GPU        4u  /* result written; the GPU stores DONE when the stream gets there */
#define MPS_SLOT_GPU_SLEEPING 5u /* as GPU, and the client sleeps on the word (it sent SLOT_WAKE) */

/* Values of a staging chunk's state word (see mps_region.stage). */
#define MPS_STAGE_IDLE      0u  /* owned by the client */
#define MPS_STAGE_INFLIGHT  1u  /* handed to the server, copy not finished */
#define MPS_STAGE_SLEEPING  2u  /* as INFLIGHT, and the client sleeps on the word */
#define MPS_STAGE_DONE      3u  /* the server's copy finished; result in stage_result */
#define MPS_STAGE_GPU       4u  /* as INFLIGHT; the GPU stores DONE when the copy is done */
#define MPS_STAGE_GPU_SLEEPING 5u /* as GPU, and the client sleeps on the word (it sent SLOT_WAKE) */

/* A wake-up request (MPS_OP_SLOT_WAKE) names reply slot i as i and staging
 * chunk k as MPS_WAKE_STAGE(k). */
#define MPS_WAKE_STAGE(k)   (MPS_SLOT_COUNT + (k))
#define MPS_WAKE_COUNT      (MPS_SLOT_COUNT + MPS_STAGE_MAX)

/* One index on its own cache line, so producer and consumer don't false-share. */
struct mps_line32 {
	uint32_t v;
	uint8_t pad[60];
};

struct mps_region {
	/* Written once by the server before the client maps the region. */
	uint32_t magic;
	uint16_t version;
	uint16_t header_size;
	uint32_t region_size;
	uint32_t sq_offset;
	uint32_t sq_size;
	uint32_t slot_offset;
	uint32_t slot_count;
	uint32_t slot_size;
	uint8_t pad0[32];

	struct mps_line32 sq_tail;        /* client writes: bytes produced */
	struct mps_line32 sq_head;        /* server writes: bytes consumed */
	struct mps_line32 sq_need_wakeup; /* server writes; futex word */

	/* Staging chunks for pageable copies: state words (futex words) written
	 * by both sides as documented at MPS_STAGE_*, and the server's result. */
	uint32_t stage_state[MPS_STAGE_MAX];
	int32_t stage_result[MPS_STAGE_MAX];

	/* Written by the server: how long a waiting client thread should spin
	 * before it sleeps, in nanoseconds (long while CPUs are free, short
	 * when they are not). Advice only. */
	uint32_t spin_hint_ns;

	/* Written by the server: the SMs the client's kernels may use on each
	 * of the server's devices (its active thread percentage as SMs, see
	 * server/smshare.h), kept current when the percentage changes; 0: not
	 * known yet. What the client answers for the SM count. */
	uint32_t sm_count[MPS_REGION_DEVICES];
	uint32_t pad1;

	/* Written by the server: each context limit (CUlimit) of each of its
	 * devices' primary contexts as it is now, or MPS_LIMIT_UNKNOWN, kept
	 * current as clients change them. What a client context that set
	 * none of its own reads, with no round trip. */
	uint64_t limit[MPS_REGION_DEVICES][MPS_REGION_LIMITS];

	/* Written by both sides, atomically: bit w (a word's number in
	 * MPS_OP_SLOT_WAKE) is set by a client thread about to sleep on a
	 * word the GPU answers, and cleared by whichever side sees the wait
	 * end first (the server then wakes the sleeper). Advice to the
	 * server: a bit it does not find a sleeper behind costs nothing. */
	uint64_t gpu_sleepers;
	uint8_t pad2[MPS_HEADER_SIZE - 64 - 3 * 64 - MPS_STAGE_MAX * 8 - 4 - 4 * MPS_REGION_DEVICES - 4 -
		     8 * MPS_REGION_DEVICES * MPS_REGION_LIMITS - 8];
};

/* Every message starts with this header. */
struct mps_msg {
	uint16_t op;      /* enum mps_op */
	uint16_t flags;   /* op-specific */
	uint32_t len;     /* whole message in bytes, multiple of MPS_MSG_ALIGN */
	uint32_t slot;    /* reply slot, or MPS_NO_SLOT for asynchronous calls */
	uint32_t ctx;     /* the client context the call is made in (a handle) */
};

#define MPS_NO_SLOT 0xffffffffu

struct mps_slot {
	uint32_t state;   /* MPS_SLOT_*; futex word */
	int32_t result;   /* CUresult */
	uint32_t len;     /* bytes of data[] that are valid */
	uint32_t pad;
	uint64_t val[6];  /* small results */
	uint8_t data[MPS_SLOT_DATA];
};

_Static_assert((MPS_SQ_SIZE & (MPS_SQ_SIZE - 1)) == 0, "ring size must be a power of two");
_Static_assert(MPS_SQ_SIZE % MPS_MSG_ALIGN == 0, "ring size must be a multiple of the message alignment");
_Static_assert(MPS_MSG_MAX <= MPS_SQ_SIZE / 2, "a message must fit in half the ring");
_Static_assert(MPS_STAGE_INFLIGHT == MPS_SLOT_BUSY && MPS_STAGE_SLEEPING == MPS_SLOT_SLEEPING &&
	       MPS_STAGE_DONE == MPS_SLOT_DONE && MPS_STAGE_GPU == MPS_SLOT_GPU &&
	       MPS_STAGE_GPU_SLEEPING == MPS_SLOT_GPU_SLEEPING, "slot and staging words wait alike");
_Static_assert(sizeof(struct mps_line32) == 64, "cache line");
_Static_assert(sizeof(struct mps_region) == MPS_HEADER_SIZE, "region header size");
_Static_assert(MPS_WAKE_COUNT <= 64, "a bit of gpu_sleepers for every word");
_Static_assert(offsetof(struct mps_region, gpu_sleepers) % 8 == 0, "gpu_sleepers aligned");
_Static_assert(offsetof(struct mps_region, magic) == 0, "magic first");
_Static_assert(offsetof(struct mps_region, sq_tail) == 64, "sq_tail offset");
_Static_assert(offsetof(struct mps_region, sq_head) == 128, "sq_head offset");
_Static_assert(offsetof(struct mps_region, sq_need_wakeup) == 192, "sq_need_wakeup offset");
_Static_assert(offsetof(struct mps_region, stage_state) == 256, "stage_state offset");
_Static_assert(offsetof(struct mps_region, stage_result) == 256 + 4 * MPS_STAGE_MAX, "stage_result offset");
_Static_assert(offsetof(struct mps_region, spin_hint_ns) == 256 + 8 * MPS_STAGE_MAX, "spin_hint_ns offset");
_Static_assert(offsetof(struct mps_region, sm_count) == 260 + 8 * MPS_STAGE_MAX, "sm_count offset");
_Static_assert(offsetof(struct mps_region, limit) == 264 + 8 * MPS_STAGE_MAX + 4 * MPS_REGION_DEVICES, "limit offset");
_Static_assert(offsetof(struct mps_region, limit) % 8 == 0, "limits are aligned words");
_Static_assert(sizeof(struct mps_msg) == 16, "message header size");
_Static_assert(sizeof(struct mps_msg) == MPS_MSG_ALIGN, "a pad message is one header");
_Static_assert(offsetof(struct mps_msg, len) == 4, "len offset");
_Static_assert(offsetof(struct mps_msg, slot) == 8, "slot offset");
_Static_assert(offsetof(struct mps_msg, ctx) == 12, "ctx offset");
_Static_assert(sizeof(struct mps_slot) == MPS_SLOT_SIZE, "slot size");
_Static_assert(offsetof(struct mps_slot, data) == MPS_SLOT_HDR, "slot header size");
_Static_assert(MPS_REGION_SIZE % 4096 == 0, "region is whole pages");

static inline struct mps_slot *mps_region_slot(void *region, uint32_t i)
{
	return (struct mps_slot *)((char *)region + MPS_SLOT_OFFSET + (size_t)i * MPS_SLOT_SIZE);
}

/* The state word MPS_OP_SLOT_WAKE and gpu_sleepers number w (w <
 * MPS_WAKE_COUNT): reply slot w, or staging chunk w - MPS_SLOT_COUNT. */
static inline uint32_t *mps_region_wake_word(struct mps_region *region, uint32_t w)
{
	return w < MPS_SLOT_COUNT ? &mps_region_slot(region, w)->state : &region->stage_state[w - MPS_SLOT_COUNT];
}

static inline uint8_t *mps_region_sq(void *region)
{
	return (uint8_t *)region + MPS_SQ_OFFSET;
}

#endif
