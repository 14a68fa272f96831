// SPDX-License-Identifier: MIT
/*
 * Completions: work the server must finish once the GPU gets past a point in
 * a stream — answer a synchronous call (stream or event synchronize, a
 * synchronous copy), or hand a staging chunk back to the client. Each is an
 * event recorded at that point plus what to do when it completes.
 *
 * The worker polls its completions (cuEventQuery) between messages and while
 * it spins, which answers short waits within microseconds. Those events are
 * plain ones: an event made with CU_EVENT_BLOCKING_SYNC costs an interrupt
 * and a wake-up of the driver's event thread each time it completes, which
 * on the CPU that takes the interrupt stalls whatever spins there — up to
 * four times the latency of a launch and synchronize.
 *
 * A completion that waits for everything queued on a client stream so far
 * (a stream synchronize, a synchronous copy) starts without an event: it
 * polls the stream itself (cuStreamQuery), which saves recording one on the
 * way to the answer. Only if more work is queued on that stream before it
 * completes — or it is handed to the waiter — is an event recorded at that
 * point in the stream ("settling" it), before the new work.
 *
 * When the worker has been idle for its spin budget it hands what is left to
 * the client's waiter thread and goes to sleep on the ring. For each
 * completion it first records a blocking-sync "mirror" event on a helper
 * stream that waits for the completion's event: the waiter sleeps in
 * cuEventSynchronize on the mirror rather than spinning, and only long waits
 * pay for the interrupt. A completion belongs to exactly one of the two at a
 * time.
 *
 * Most replies need none of this: a reply that only waits for the GPU, and
 * a staging chunk's return, are written by the GPU (region.h, MPS_SLOT_GPU),
 * so no server thread polls for them and the client waits on its own
 * memory, as it would on the driver.
 * Only a client that goes to sleep on such a reply (MPS_OP_SLOT_WAKE) gets
 * a completion, of kind MPS_PEND_WAKE, that wakes it.
 */
#ifndef MPS_SERVER_COMPLETION_H
#define MPS_SERVER_COMPLETION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "common/region.h"
#include "common/wire.h"

struct mps_client;

enum mps_pend_kind {
	MPS_PEND_REPLY = 1,   /* write the result into reply slot `index` */
	MPS_PEND_STAGE,       /* mark staging chunk `index` done */
	MPS_PEND_WAKE,        /* the GPU answers word `index` (MPS_OP_SLOT_WAKE's numbering): wake its sleeper */
};

/* Where the GPU will answer a reply slot, for a later MPS_OP_SLOT_WAKE: a
 * client stream (handle; 0 the legacy stream) or the context's join stream,
 * looked up again by handle, so a stream destroyed since is not touched. */
enum { MPS_GPU_NONE, MPS_GPU_STREAM, MPS_GPU_JOIN };

struct mps_gpu_reply {
	uint8_t kind;
	uint32_t ctx;
	uint32_t stream;
};

struct mps_sstream;
struct mps_sctx;

struct mps_pending {
	struct mps_pending *next;
	CUevent ev;                   /* NULL while it polls its stream (lazy) */
	struct mps_sstream *lazy;     /* the stream it polls until settled */
	struct mps_pending *lazy_next;  /* the stream's other lazy completions */
	CUevent mirror;       /* blocking-sync, completes right after ev; the waiter's */
	bool pooled;          /* ev came from the pool and goes back to it */
	bool known;           /* no event: the result is `result` already */
	CUresult result;
	bool deferred_ok;     /* a success may carry a deferred error instead */
	uint8_t kind;
	int device;
	uint32_t index;
};

struct mps_completions {
	struct mps_pending *head, *tail;   /* worker's, in order of creation */
	unsigned int count;                /* owner writes; spinners read (atomic) */
	CUstream helper[MPS_MAX_DEVICES];  /* worker's: records the mirrors */

	pthread_mutex_t lock;              /* protects everything below */
	pthread_cond_t cond;
	struct mps_pending *wait_head, *wait_tail;  /* handed to the waiter */
	bool stop;
	bool waiter_started;
	pthread_t waiter;
	CUdeviceptr region_dp[MPS_MAX_DEVICES];      /* the region as each device sees it; 0: none */
	struct mps_gpu_reply gpu[MPS_WAKE_COUNT];    /* worker's: the words the GPU answers */
	/* Words handed to the GPU whose DONE has not been seen yet (bit w as
	 * in gpu[]), and when the last was handed: the client is waiting on
	 * the GPU and sends its next message the moment the store comes
	 * (gpuwake.h: mps_gpuwake_waiting). Set by the owner, cleared by the
	 * owner or, for a hot client, a scanner under the scheduler's lock
	 * (atomic). */
	uint64_t gpu_waits, gpu_wait_ns;
	CUevent *pool;                     /* free internal events, per device */
	int *pool_dev;
	unsigned int pool_n, pool_cap;
};

int mps_comp_init(struct mps_client *c);

/* Stops the waiter after it has finished everything handed to it, finishes
 * what the worker still holds (waiting for the GPU), and frees the pool. */
void mps_comp_shutdown(struct mps_client *c);

/* An internal event on device (from the pool or new), or NULL. */
CUevent mps_comp_event(struct mps_client *c, int device);
void mps_comp_event_put(struct mps_client *c, CUevent ev, int device);

/* Records a pooled event on stream and queues a completion after it.
 * Returns CUDA_SUCCESS or the failure (nothing queued then). */
CUresult mps_comp_after(struct mps_client *c, CUstream stream, int device, int kind, uint32_t index,
			bool deferred_ok);

/* Queues a completion for when a client stream has finished the work
 * queued on it so far, polling the stream until more work comes (see
 * above); a reply the GPU can store itself needs none. Returns
 * CUDA_SUCCESS or the failure (nothing queued then). */
CUresult mps_comp_after_stream(struct mps_client *c, struct mps_sstream *st, int kind, uint32_t index,
			       bool deferred_ok);

/* Records an event for each lazy completion of st at this point of the
 * stream: call before queuing work on st, or destroying it. */
CUresult mps_comp_settle(struct mps_client *c, struct mps_sstream *st);

/* Queues a completion on an event the caller owns (a client's event). */
CUresult mps_comp_on_event(struct mps_client *c, CUevent ev, int device, int kind, uint32_t index,
			   bool deferred_ok);

/* Answers reply slot `slot` once ctx's join stream (made and bound) gets
 * past what it waits for now: by the GPU's store where it can, else by a
 * completion. Returns CUDA_SUCCESS or the failure (nothing queued then). */
CUresult mps_comp_after_join(struct mps_client *c, struct mps_sctx *ctx, uint32_t slot);

/* Has the GPU hand staging chunk `stage` (< MPS_STAGE_MAX) back to the
 * client once its copy on st is done. True if it will; false if the
 * caller must queue a completion. */
bool mps_comp_gpu_stage(struct mps_client *c, struct mps_sstream *st, uint32_t stage);

/* MPS_OP_SLOT_WAKE: the client sleeps on word w (< MPS_WAKE_COUNT, see
 * region.h), which the GPU answers; wakes it once the stream has got
 * there, or answers with the stream's error. */
void mps_comp_gpu_wake(struct mps_client *c, uint32_t w);

/* Finishes the completions whose events are done. Returns how many. */
unsigned int mps_comp_poll(struct mps_client *c);

/* Hands staging chunk `stage` (< MPS_STAGE_MAX) back to the client with result r. */
void mps_comp_stage_done(struct mps_client *c, uint32_t stage, CUresult r);

/* Hands every pending completion to the waiter thread (from the worker). */
void mps_comp_handoff(struct mps_client *c);

#endif
