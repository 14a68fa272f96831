// SPDX-License-Identifier: MIT
/*
 * What the generated handlers of forwarded functions (gen/forward.c) call:
 * the context and device a call runs on, handle translation in both
 * directions, and the checks on the variable part of a message. Every
 * function here refuses what the client does not own with the error the
 * driver gives for a bad handle, and never reads past the message.
 */
#ifndef MPS_SERVER_FORWARD_H
#define MPS_SERVER_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "common/wire.h"
#include "server/gen/forward_hooks.h"

struct mps_client;
struct mps_sstream;

/* Makes the message's context's device current. Without a context: an
 * error if the function needs one, else device 0 (or the device of the
 * first object the call names, bound later by mps__fwd_get). */
CUresult mps__fwd_begin(struct mps_client *c, const struct mps_msg *m, bool need_ctx);

/* The stream a handle names (0: the message context's legacy stream), its
 * device bound; for work (async calls) also ordered as CUDA orders it. */
struct mps_sstream *mps__fwd_stream(struct mps_client *c, const struct mps_msg *m, uint32_t h, bool work,
				    CUresult *err);

/* A device ordinal of the client's, as the server's CUdevice. */
CUresult mps__fwd_device(struct mps_client *c, uint64_t v, CUdevice *out);

/* The server's index of one of its devices, or -1. */
int mps__device_index(CUdevice d);

/* A memory location the client named (a device as it numbers it) as the
 * server's device index: CUDA_ERROR_INVALID_VALUE for no location,
 * CUDA_ERROR_NOT_SUPPORTED for host ones, CUDA_ERROR_INVALID_DEVICE. */
CUresult mps__fwd_location(struct mps_client *c, const CUmemLocation *loc, int *index);

/* n access descriptors with their locations as the server's devices
 * (malloc'ed), or NULL with *err set. */
CUmemAccessDesc *mps__fwd_access(struct mps_client *c, const CUmemAccessDesc *in, size_t n, CUresult *err);

/* Looks handle h of a type up: returns the object (never NULL on success)
 * and the driver's handle in *real, or NULL with *err set. A context handle
 * of 0 is the NULL context (the current one). */
void *mps__fwd_get(struct mps_client *c, int type, uint64_t h, void **real, CUresult *err);

/* Registers an object the driver just made for the client, owned by
 * `owner` (0: none), and gives its handle; on failure destroys it. */
CUresult mps__fwd_new(struct mps_client *c, int type, void *real, uint32_t owner, uint64_t *handle);

/* The handle of an object the driver returned that may already have one
 * (a node, a child graph, an event); makes one, owned by `owner`, if not. */
CUresult mps__fwd_handle_of(struct mps_client *c, int type, void *real, uint32_t owner, uint64_t *handle);

/* Forgets an object the client destroyed, and everything it owned. */
void mps__fwd_del(struct mps_client *c, int type, uint32_t handle);

/* The owner (a graph) of a node. */
uint32_t mps__fwd_owner(struct mps_client *c, uint32_t node);

/* The next input array of n elements of `size` bytes in the message:
 * *at moves past it (8-byte padded). NULL with *err set if it overruns. */
const void *mps__fwd_array(const uint8_t **at, const uint8_t *end, uint64_t n, size_t size, CUresult *err);

/* The next string of len bytes (and its NUL), as mps__fwd_array. */
const char *mps__fwd_str(const uint8_t **at, const uint8_t *end, uint64_t len, CUresult *err);

/* Translates n wire handles of a type into driver handles (malloc'ed), or
 * NULL with *err set. */
void *mps__fwd_handles(struct mps_client *c, int type, const void *wire, size_t n, CUresult *err);

/* The capacity the server gives an output array the client asked n of. */
size_t mps__fwd_out_cap(uint64_t n);

/* How many of `filled` elements, starting at `off`, fit in a chunk of `chunk`. */
size_t mps__fwd_chunk(size_t filled, uint64_t off, size_t chunk);

#endif
