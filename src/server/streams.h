// SPDX-License-Identifier: MIT
/*
 * A client's streams on the server. Every client stream is a private
 * non-blocking stream of the server's primary context, so no client's work
 * ever waits on another's. CUDA's legacy default stream is emulated per
 * client context: it is one more private stream, and the ordering CUDA gives
 * it ("waits for all blocking streams, and they wait for it") is rebuilt with
 * events, only when a program actually mixes the two:
 *   - before work on the legacy stream, it waits for each blocking stream
 *     that has had work since it last waited for it;
 *   - before work on a blocking stream, it waits for the legacy stream if
 *     the legacy stream has had work since this stream last waited for it.
 * This file is the one place client streams are created: each is made in
 * the client's SM share (smshare.h) and moves when the share changes.
 */
#ifndef MPS_SERVER_STREAMS_H
#define MPS_SERVER_STREAMS_H

#include "server/server.h"

/* The priority the driver gives a stream that client c asked `priority`
 * for: its client priority (CUDA_MPS_CLIENT_PRIORITY) ranks it first. */
int mps_stream_effective_priority(const struct mps_client *c, int priority);

/* Creates a stream of ctx. flags: CU_STREAM_*. Records it in ctx's list. */
CUresult mps_stream_new(struct mps_client *c, struct mps_sctx *ctx, unsigned int flags, int priority,
			struct mps_sstream **out);

/* A driver stream (non-blocking, of that priority) of the current context on
 * device dev, or of the SM share `green` (smshare.h) unless NULL, counted
 * in mps_srv.dev[dev].streams (*out NULL on failure); every stream the
 * server makes comes from here and goes back through mps_stream_raw_free. */
CUresult mps_stream_raw_new(int dev, struct mps_green *green, int priority, CUstream *out);
void mps_stream_raw_free(int dev, CUstream s);

/* The context's internal join stream, made on first use: work that must
 * follow every stream of the context (synchronizes) is queued behind it. */
CUresult mps_stream_join(struct mps_client *c, struct mps_sctx *ctx, CUstream *join);

/* Destroys a stream (its queued work still completes, as with CUDA). */
void mps_stream_free(struct mps_client *c, struct mps_sstream *s);

/* The stream a wire handle names in ctx (0: the legacy stream, made on
 * first use). NULL with *err set when the handle is invalid or belongs to
 * another device. */
struct mps_sstream *mps_stream_resolve(struct mps_client *c, struct mps_sctx *ctx, uint32_t handle, CUresult *err);

/* Orders s after what CUDA says work queued on it now must follow. Call
 * before every operation queued on a client stream. */
CUresult mps_stream_before(struct mps_client *c, struct mps_sstream *s);

/* Fences. A client answers a synchronize of a stream itself when all that
 * stream did since it was last seen idle is uploads whose bytes the client
 * had already handed over (copies from pageable memory into device memory
 * only it holds): the program cannot tell whether those are done, except
 * through later work, which the server orders. It says so with
 * MPS_OP_STREAM_FENCE, or with MPS_COPY_FENCE on a synchronous copy or
 * memset it answered itself (client/copy.c): the server records the
 * stream's `fence` event of its context there, and the client's other
 * streams (of any of its contexts,
 * made before or after) wait for it before their next work, as they would
 * have started only after the synchronize returned. Work on the fenced
 * stream itself is in order anyway. */
CUresult mps_stream_fence(struct mps_client *c, struct mps_sstream *s);

/* Waits (on the worker) until the client's latest fence has passed; for
 * the calls that hand the client's memory to someone whose work the server
 * does not order after the fence (an IPC handle). */
CUresult mps_stream_fence_settle(struct mps_client *c);

/* New memory of the client's on device is being cleared on the server's
 * own stream (placement.h): its streams wait for that, as for a fence,
 * before their next work, and a settle waits for it too. */
void mps_stream_after_clear(struct mps_client *c, int device);

/* The stream a message names (handle h, or the legacy stream of the
 * message's context for 0), with its device bound on the worker and ordered
 * for new work. NULL with *err set on failure. */
struct mps_sstream *mps_stream_for_work(struct mps_client *c, const struct mps_msg *m, uint32_t h, CUresult *err);

/* True if the stream is capturing (begun by the client, or joined to a
 * capture by a wait); answered without a driver call while the client has
 * no capture going (ops_capture.c). */
bool mps_stream_capturing(struct mps_client *c, struct mps_sstream *st);

/* Queues a reply to `slot` once every stream of ctx has finished its work. */
CUresult mps_stream_sync_all(struct mps_client *c, struct mps_sctx *ctx, uint32_t slot);

#endif
