// SPDX-License-Identifier: MIT
//
// The private tables NVIDIA's cudart (static or shared, also inside cuBLAS,
// cuDNN, cuFFT and the frameworks) asks for at start-up, as served in server
// mode: CUDART_INTERFACE, TOOLS_RUNTIME_CALLBACK_HOOKS, TOOLS_TLS,
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301, CONTEXT_CHECKS, INTEGRITY_CHECK and
// f8cff951. docs/EXPORT-TABLES.md says what each slot is seen doing on the
// real driver 580.159 and what is done here.
//
// The sizes in slot 0 are the ones the real driver reports. The tables are
// `const` and the functions in them static, so their addresses are fixed
// once the library is loaded: the integrity check hashes the addresses of
// CUDART_INTERFACE, of INTEGRITY_CHECK and of its check function, cudart
// hashes the ones it was handed, and the two must agree every time it asks.
#include <fatbinary_section.h>
#include <stdarg.h>
#include <stdint.h>

#include "client/client.h"
#include "client/exports/cls.h"
#include "client/exports/etbl.h"
#include "client/exports/exports.h"
#include "client/exports/integrity.h"

#pragma GCC diagnostic ignored "-Woverride-init"

// ---------------------------------------------------------------------------
// CUDART_INTERFACE 6bd5fb6c-5bf4-e74a-8987-d93912fd9df9, 13 slots (104 bytes)

// The wrapper nvcc emits around a fatbin (__fatBinC_Wrapper_t in the
// toolkit's fatbinary_section.h): magic, version, pointer to the fatbin.
// Anything without the magic is handed to the loader as is, which accepts
// a bare fatbin, cubin or PTX and rejects the rest with
// CUDA_ERROR_INVALID_IMAGE. The version is not checked: versions 1 and 2
// share the first three fields, and version 2's prelinked fatbins (the
// fourth) are not loaded here.
static CUresult load_wrapped(CUmodule *out, const void *wrapper)
{
	const __fatBinC_Wrapper_t *w = wrapper;

	if (!out || !wrapper)
		return CUDA_ERROR_INVALID_VALUE;
	if ((uint32_t)w->magic != (uint32_t)FATBINC_MAGIC)
		return mps__module_load_image(out, wrapper);
	if (!w->data)
		return CUDA_ERROR_INVALID_IMAGE;
	return mps__module_load_image(out, w->data);
}

// [1] a module from a fatbin wrapper.
static CUresult cudart_module_from_wrapper(CUmodule *out, const void *wrapper)
{
	return load_wrapped(out, wrapper);
}

// [2] the device's primary context (CUcontext *, CUdevice), called once at
// start-up by every cudart.
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__primary_ctx_get(pctx, dev);
}

// [6] [1] with three more arguments whose meaning is unknown; public
// reverse-engineering notes (ZLUDA) see them NULL/0 and refuse anything
// else with CUDA_ERROR_NOT_SUPPORTED, and so do we.
static CUresult cudart_module_from_wrapper_ext1(CUmodule *out, const void *wrapper,
						 void *arg3, void *arg4, unsigned arg5)
{
	if (arg3 || arg4 || arg5)
		return CUDA_ERROR_NOT_SUPPORTED;
	return load_wrapped(out, wrapper);
}

// [7] takes a size; nothing observable depends on it.
static void cudart_slot7(size_t arg)
{
	(void)arg;
}

// [8] as [6], but the fatbin itself (not a wrapper) first and the module
// second.
static CUresult cudart_module_from_fatbin_ext2(const void *fatbin, CUmodule *out,
						void *arg3, void *arg4, unsigned arg5)
{
	if (arg3 || arg4 || arg5)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!out || !fatbin)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__module_load_image(out, fatbin);
}

// [12] the real driver loads its JIT compilers here; the server has its
// own, so there is nothing to do and success is all cudart needs.
static CUresult cudart_load_compilers(void)
{
	return CUDA_SUCCESS;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_CUDART)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_CUDART, 1)

const void *const mps__etbl_cudart[20] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_CUDART)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_CUDART, 1)
	[0] = MPS_ETBL_SIZE(13),
	[1] = (const void *)cudart_module_from_wrapper,
	[2] = (const void *)cudart_primary_ctx,
	[6] = (const void *)cudart_module_from_wrapper_ext1,
	[7] = (const void *)cudart_slot7,
	[8] = (const void *)cudart_module_from_fatbin_ext2,
	[12] = (const void *)cudart_load_compilers,
};

// ---------------------------------------------------------------------------
// TOOLS_RUNTIME_CALLBACK_HOOKS a094798c-2e74-2e74-93f2-0800200c0a66,
// 7 slots (56 bytes)
//
// [2] and [6] (void **ptr, size_t *size) each hand out a process-wide
// scratch buffer, once at start-up: the driver writes the buffer and its
// size, 1024 and 14, and leaves the buffer's address in the return
// register, as we do. Whether the caller reads the size as bytes or as
// 32-bit words, a buffer of that many 64-bit words is large enough.

#define SCRATCH1_SIZE 1024
#define SCRATCH2_SIZE 14
static uint64_t scratch1[SCRATCH1_SIZE] __attribute__((aligned(64)));
static uint64_t scratch2[SCRATCH2_SIZE] __attribute__((aligned(64)));

static void *hooks_scratch1(void **ptr, size_t *size)
{
	if (ptr)
		*ptr = scratch1;
	if (size)
		*size = SCRATCH1_SIZE;
	return scratch1;
}

static void *hooks_scratch2(void **ptr, size_t *size)
{
	if (ptr)
		*ptr = scratch2;
	if (size)
		*size = SCRATCH2_SIZE;
	return scratch2;
}

// [1], [3], [5]: tool callbacks; with no tool attached there is nothing to
// do. [4] (in, out) reports 0 through out. Known from public notes of other
// replacement drivers that run cuBLAS, which call these.
static CUresult hooks_nothing(void)
{
	return CUDA_SUCCESS;
}

static CUresult hooks_query(const void *in, uint64_t *out)
{
	(void)in;
	if (out)
		*out = 0;
	return CUDA_SUCCESS;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_HOOKS)

const void *const mps__etbl_hooks[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_HOOKS)
	[0] = MPS_ETBL_SIZE(7),
	[1] = (const void *)hooks_nothing,
	[2] = (const void *)hooks_scratch1,
	[3] = (const void *)hooks_nothing,
	[4] = (const void *)hooks_query,
	[5] = (const void *)hooks_nothing,
	[6] = (const void *)hooks_scratch2,
};

// ---------------------------------------------------------------------------
// TOOLS_TLS 42d85a81-23f6-cb47-8298-f6e78a3aecdc, 3 slots (24 bytes).
// [2] (CUcontext *out) gives the calling thread's current context: cuBLASLt
// and cuBLAS call it before most calls they make, and cuBLASLt keys its
// kernel registry on it.

static CUresult tls_nothing(void)
{
	return CUDA_SUCCESS;
}

static CUresult tls_current_context(CUcontext *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = mps__ctx_current();
	return CUDA_SUCCESS;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_TLS)

const void *const mps__etbl_tls[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_TLS)
	[0] = MPS_ETBL_SIZE(3),
	[1] = (const void *)tls_nothing,
	[2] = (const void *)tls_current_context,
};

// ---------------------------------------------------------------------------
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 c693336e-1121-df11-a8c3-68f355d89593:
// no size slot, the three functions start at [0] (client/exports/cls.h).

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_CLS)

const void *const mps__etbl_cls[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_CLS)
	[0] = (const void *)mps__cls_put,
	[1] = (const void *)mps__cls_delete,
	[2] = (const void *)mps__cls_get,
};

// ---------------------------------------------------------------------------
// CONTEXT_CHECKS 263e8860-7cd2-6143-92f6-bbd5006dfa7e, 15 slots (120 bytes)
//
// [2] (CUcontext, uint32_t *out1, const void **out2): the driver writes 0
// to *out1 and leaves *out2; [3] (void) returns 0. Both called by cudart,
// cuBLAS, cuBLASLt, cuDNN and others, [2] before many of their calls.

static CUresult context_check(CUcontext ctx, uint32_t *out1, const void **out2)
{
	(void)ctx;
	(void)out2;
	if (out1)
		*out1 = 0;
	return CUDA_SUCCESS;
}

static uint32_t context_check_fn3(void)
{
	return 0;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_CHECKS)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_CHECKS, 1)

const void *const mps__etbl_checks[20] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_CHECKS)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_CHECKS, 1)
	[0] = MPS_ETBL_SIZE(15),
	[2] = (const void *)context_check,
	[3] = (const void *)context_check_fn3,
};

// ---------------------------------------------------------------------------
// INTEGRITY_CHECK d4082055-bde6-704b-8d34-ba123c66e1f2, 3 slots (24 bytes)

// [1] called three times at start-up by cudart. Hashes this library's own
// table addresses and this function's address, read back from the table so
// they are exactly what cudart was given.
static CUresult integrity_check_slot(uint32_t version, uint64_t unix_seconds,
				     uint64_t result[2])
{
	return mps__integrity_check(version, unix_seconds, result, mps__etbl_cudart,
				    mps__etbl_integrity, mps__etbl_integrity[1]);
}

// [2] takes a flag and succeeds (public notes of other replacement drivers:
// the runtime probes it and expects a function).
static CUresult integrity_check_probe(int flag)
{
	(void)flag;
	return CUDA_SUCCESS;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_INTEGRITY)

const void *const mps__etbl_integrity[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_INTEGRITY)
	[0] = MPS_ETBL_SIZE(3),
	[1] = (const void *)integrity_check_slot,
	[2] = (const void *)integrity_check_probe,
};

// ---------------------------------------------------------------------------
// f8cff951-2146-8b4e-b9e2-fb469e7c0dd9, 3 slots (24 bytes). Every cudart
// asks for it first thing. Slot 1 puts a message of cudart's into the
// driver's error log (cuLogs*): (source, level, printf format, the
// arguments as a va_list, a copy of it), level 0 an error and any other a
// warning; cuDNN's cudart logs "Duplicate entry kernels named ..." through
// it. Slot 2 was not seen called; it stays a stub.

static CUresult f8cff951_log(const char *source, uint64_t level, const char *fmt, va_list ap, va_list copy)
{
	(void)copy;
	mps__logs_vadd(source, level ? CU_LOG_LEVEL_WARNING : CU_LOG_LEVEL_ERROR, fmt, ap);
	return CUDA_SUCCESS;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_F8CFF951)

const void *const mps__etbl_f8cff951[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_F8CFF951)
	[0] = MPS_ETBL_SIZE(3),
	[1] = (const void *)f8cff951_log,
};
