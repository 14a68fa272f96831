// SPDX-License-Identifier: MIT
/*
 * What other client files ask of stream capture (capture.c).
 */
#ifndef MPS_CLIENT_CAPTURE_H
#define MPS_CLIENT_CAPTURE_H

#include <cuda.h>

/* For a potentially unsafe call (an allocation): CUDA_SUCCESS if the calling
 * thread may make it now; else CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the
 * captures that forbid it are invalidated, as the driver does. */
CUresult mps__capture_check(void);

#endif
