// SPDX-License-Identifier: MIT
//
// Two private tables that take the program's contexts, streams and modules,
// so they are answered here from the client's own objects:
//
//   21318c60-9714-3248-8ca6-41ff7324c8f2, 93 slots (744 bytes): contexts and
//     streams, for cuBLAS, cuBLASLt and cuFFT;
//   6e163fbe-b958-444d-835c-e182aff1991e, 99 slots (792 bytes): a module's
//     functions, for cuFFT.
//
// What each implemented slot does on the real driver 580.159 (traced with
// every argument's memory before and after) is in docs/EXPORT-TABLES.md;
// the comments below say what is done here. Every other slot is a stub
// (client/exports/etbl.h).
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/exports/etbl.h"
#include "client/exports/exports.h"
#include "common/atomics.h"
#include "common/log.h"

#pragma GCC diagnostic ignored "-Woverride-init"

// ---------------------------------------------------------------------------
// 21318c60: contexts and streams

// [4] (CUcontext, unsigned long long *id): the context's unique id, as
// cuCtxGetId gives it. cuBLASLt calls it, with TOOLS_TLS [2], before most
// of its calls; cuFFT when it makes a plan.
static CUresult tools_context_id(CUcontext ctx, unsigned long long *id)
{
	return cuCtxGetId(ctx, id);
}

// [51] (CUcontext, CUstream, void **out) hands out an object for the
// stream, the same one each time; [39] (CUcontext, that object, uint64_t
// *out) gives an id for it. cuBLAS calls [51] then [39] for its stream. The
// driver's object begins {1, 0, the context}; ours does too, and is 512
// bytes of which the caller may use any. [39] answers with cuStreamGetId of
// the stream the object stands for, so different streams get different ids.

#define STREAM_OBJECT_WORDS 64
#define STREAM_OBJECTS_MAX  1024

struct stream_object {
	uint64_t *words;               /* what the caller gets */
	CUcontext ctx;                 /* as the caller named them */
	CUstream stream;
};

// The objects handed out, for the life of the process. A program that has
// used more than STREAM_OBJECTS_MAX streams gets the oldest objects again,
// re-aimed at its new streams.
static pthread_mutex_t stream_objects_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_object stream_objects[STREAM_OBJECTS_MAX];
static unsigned nstream_objects, next_reused;

static CUresult tools_stream_object(CUcontext ctx, CUstream stream, void **out)
{
	struct stream_object *o = NULL;
	CUresult r = CUDA_SUCCESS;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if ((uintptr_t)stream == UINTPTR_MAX)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&stream_objects_lock);
	for (unsigned i = 0; i < nstream_objects; i++) {
		if (stream_objects[i].ctx == ctx && stream_objects[i].stream == stream) {
			o = &stream_objects[i];
			break;
		}
	}
	if (!o && nstream_objects < STREAM_OBJECTS_MAX) {
		uint64_t *w = calloc(STREAM_OBJECT_WORDS, sizeof(*w));

		if (w) {
			o = &stream_objects[nstream_objects++];
			o->words = w;
		}
	} else if (!o) {
		o = &stream_objects[next_reused];
		next_reused = (next_reused + 1) % STREAM_OBJECTS_MAX;
		memset(o->words, 0, STREAM_OBJECT_WORDS * sizeof(uint64_t));
	}
	if (o) {
		o->ctx = ctx;
		o->stream = stream;
		o->words[0] = 1;
		o->words[2] = (uint64_t)(uintptr_t)(ctx ? ctx : mps__ctx_current());
		*out = o->words;
	} else {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&stream_objects_lock);
	return r;
}

static CUresult tools_stream_id(CUcontext ctx, const void *object, uint64_t *out)
{
	CUstream stream = NULL;
	bool found = false;
	unsigned long long id;
	CUresult r;

	(void)ctx;
	if (!object || !out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&stream_objects_lock);
	for (unsigned i = 0; i < nstream_objects; i++) {
		if (stream_objects[i].words == object) {
			found = true;
			stream = stream_objects[i].stream;
			break;
		}
	}
	pthread_mutex_unlock(&stream_objects_lock);
	if (!found)
		return CUDA_ERROR_INVALID_HANDLE;
	r = cuStreamGetId(stream, &id);
	if (r == CUDA_SUCCESS)
		*out = id;
	return r;
}

#define TOOLS_CONTEXT_SLOTS 93

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 1)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 2)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 3)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 4)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 5)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 6)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 7)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 8)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_TOOLS_CONTEXT, 9)

const void *const mps__etbl_tools_context[100] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 1)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 2)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 3)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 4)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 5)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 6)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 7)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 8)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_TOOLS_CONTEXT, 9)
	[0] = MPS_ETBL_SIZE(TOOLS_CONTEXT_SLOTS),
	[4] = (const void *)tools_context_id,
	[39] = (const void *)tools_stream_id,
	[51] = (const void *)tools_stream_object,
};

// ---------------------------------------------------------------------------
// 6e163fbe: a module's functions

// [7] (CUcontext, CUmodule, callback, user, CUmodule again, ?) calls
// callback(user, function, word 1 of the function) once for each function
// of the module and returns how many there were. cuFFT loads each of its
// kernels as a module of one function and gets the function this way (it
// never calls cuModuleGetFunction), then calls cuFuncGetAttribute,
// cuOccupancyMaxActiveBlocksPerMultiprocessor and cuLaunchKernel with it.
//
// Here the module's functions come from the server (by name, then each as
// cuModuleGetFunction gets it), and the callback is given each function's
// view (client/exports/funcview.c): a handle every function call of ours accepts,
// laid out where cuFFT may read it as the driver's function object is.
// Anything that fails makes it enumerate nothing and return 0, which cuFFT
// reports as an error of its own; the cause is logged once.

typedef void (*function_callback)(void *user, void *function, uint64_t word1);

static void enumerate_failed(const char *what, CUresult r)
{
	static uint8_t warned;
	char name[37];

	if (mps_xchg(&warned, 1))
		return;
	mps__etbl_name(MPS_ETBL_6E163FBE, name);
	mps_log_warn("openmps: export table %s slot 7: %s failed (%d); it enumerates no function", name,
		     what, (int)r);
}

static uint64_t module_functions(CUcontext ctx, CUmodule mod, function_callback callback, void *user,
				 CUmodule mod2, uint64_t arg5)
{
	CUfunction *fns = NULL;
	unsigned int n = 0, got = 0;
	CUresult r;

	(void)ctx;
	(void)arg5;
	r = mps__module_functions(mod, NULL, 0, &n);
	if (r == CUDA_ERROR_INVALID_HANDLE && mod2 && mod2 != mod) {
		mod = mod2;
		r = mps__module_functions(mod, NULL, 0, &n);
	}
	if (r == CUDA_SUCCESS && n) {
		fns = calloc(n, sizeof(*fns));
		r = fns ? mps__module_functions(mod, fns, n, &got) : CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS && got < n)
			n = got;
	}
	if (r != CUDA_SUCCESS) {
		free(fns);
		enumerate_failed("listing the module's functions", r);
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *view = mps__func_view(fns[i]);
		uint64_t word1;

		if (!view) {
			free(fns);
			enumerate_failed("making a function's view", CUDA_ERROR_OUT_OF_MEMORY);
			return 0;
		}
		memcpy(&word1, view + 8, sizeof(word1));
		if (callback)
			callback(user, view, word1);
	}
	free(fns);
	return n;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_6E163FBE)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 1)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 2)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 3)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 4)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 5)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 6)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 7)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 8)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_6E163FBE, 9)

const void *const mps__etbl_6e163fbe[100] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 1)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 2)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 3)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 4)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 5)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 6)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 7)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 8)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_6E163FBE, 9)
	[0] = MPS_ETBL_SIZE(99),
	[7] = (const void *)module_functions,
};
