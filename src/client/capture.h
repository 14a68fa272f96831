// SPDX-License-Identifier: MIT
/*
 * What other client files ask of stream capture (capture.c).
 */
#ifndef MPS_CLIENT_CAPTURE_H
#define MPS_CLIENT_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

/* For a potentially unsafe call (an allocation): CUDA_SUCCESS if the calling
 * thread may make it now; else CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the
 * captures that forbid it are invalidated, as the driver does. */
CUresult mps__capture_check(void);

/* Whether a capture this process began is going on the server's stream
 * handle stream (a stream drawn into it by an event is not seen here). */
bool mps__capture_on(uint32_t stream);

/* Whether any capture of this process is going (one began, none ended). */
bool mps__capture_active(void);

/* A call the capture on stream cannot take ends it as the driver does: its
 * end gives CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph. */
void mps__capture_invalidate(uint32_t stream);

/* Whether s (per-thread default stream if pt) is in an active capture,
 * its own or one it joined by waiting for a capturing stream's event: the
 * server's answer, a round trip. */
bool mps__capture_joined(CUstream s, bool pt);

/* n bytes between device memory dev and the program's pageable memory
 * host, captured on s (to_host: from the device): a copy node through a
 * staging buffer added to the capture's graph after its dependencies, which
 * it becomes (gstage.c). */
CUresult mps__capture_pageable_copy(CUstream s, bool pt, bool to_host, uint64_t dev, void *host, size_t n);

#endif
