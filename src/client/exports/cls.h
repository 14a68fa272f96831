// SPDX-License-Identifier: MIT
//
// Context-local storage: the driver-side store behind the private table
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 (c693336e-1121-df11-a8c3-68f355d89593).
//
// cudart, cuBLAS and others keep their per-context state here: a value per
// (context, key) with a destructor that must run when the context goes away
// (destroyed, or a primary context reset), so their state does not outlive
// the context. The three entry points have the exact signatures of the
// table's slots [0] put, [1] delete, [2] get (as traced on driver 580.159
// and described by public reverse-engineering notes, ZLUDA dark_api), so
// the table points straight at them.
//
// In server mode contexts are the client's own handles, so the store lives
// in the client library. Thread-safe: one mutex guards the store; it is
// never held while a destructor or a hook runs, so destructors may call back
// into the store or the driver.
#ifndef OPENMPS_CLIENT_CLS_H
#define OPENMPS_CLIENT_CLS_H

#include <cuda.h>

// dtor(ctx, key, value); may be NULL.
typedef void (*mps_cls_dtor)(CUcontext ctx, void *key, void *value);

// A NULL ctx means the calling thread's current context (mps__ctx_current());
// with none current these return CUDA_ERROR_INVALID_CONTEXT.

// Stores value and dtor for (ctx, key), replacing an earlier entry for the
// same pair without running its destructor (as public reverse-engineering
// notes show the driver doing). CUDA_ERROR_OUT_OF_MEMORY if no entry can be
// allocated.
CUresult mps__cls_put(CUcontext ctx, void *key, void *value, mps_cls_dtor dtor);

// Drops (ctx, key) without running its destructor: the caller is releasing
// its own state. Deleting an absent entry succeeds, as in public
// reverse-engineering notes (ZLUDA), which real cudart runs against.
CUresult mps__cls_delete(CUcontext ctx, void *key);

// *value = the stored value; CUDA_ERROR_INVALID_HANDLE when (ctx, key) has
// no entry, CUDA_ERROR_INVALID_VALUE when value is NULL.
CUresult mps__cls_get(void **value, CUcontext ctx, void *key);

// Called by the context code when ctx is destroyed or a primary context is
// reset: removes every entry of ctx, then runs their destructors (newest
// first, each exactly once) with dtor(ctx, key, value), outside the lock.
// Entries a destructor puts for ctx again survive. NULL ctx: nothing.
void mps__cls_context_destroyed(CUcontext ctx);

#endif
