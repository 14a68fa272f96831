// SPDX-License-Identifier: MIT
/*
 * A client's bounce ring: pinned memory of the server's through which a
 * host-to-device copy of bytes carried in a message goes to the GPU.
 *
 * The message's bytes live in memory the driver does not know (the
 * service thread's copy of the message), and the driver's own copy from
 * such memory stages it under the context's lock: 6.6 µs for 48 KiB from
 * one thread and 15 µs with four threads at once on an H200
 * (bench/drvcost.c), where a memcpy into pinned memory and a copy from it
 * take 1.5 and 2.1-2.4 µs whatever the threads. So the bytes are copied
 * into this ring, the copy goes from there, and an event recorded after it
 * says when that stretch of the ring may be reused. Stretches are handed
 * out in order and taken back in order; a copy that finds no room (the GPU
 * is far behind) goes the driver's way. (Clients send copies from 4 KiB on
 * from a pinned ring of their own when it has room, client/copy.c: these
 * are the smaller ones, and the rest.)
 *
 * Only the thread that owns the client uses its ring; the teardown frees
 * it once the client's streams have finished.
 */
#ifndef OPENMPS_SERVER_BOUNCE_H
#define OPENMPS_SERVER_BOUNCE_H

#include <cuda.h>
#include <stddef.h>

struct mps_client;
struct mps_sstream;

/* Copies n bytes at src to dst in stream order on st (bound, not
 * capturing) through the client's ring. CUDA_ERROR_NOT_SUPPORTED when the
 * ring cannot take it now (too large, no room, no ring): nothing was
 * queued, the caller copies another way. Else what queueing returned. */
CUresult mps_bounce_h2d(struct mps_client *c, struct mps_sstream *st, CUdeviceptr dst, const void *src, size_t n);

/* Frees the client's ring and its events (its streams are done). */
void mps_bounce_free(struct mps_client *c);

#endif
