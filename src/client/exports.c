// SPDX-License-Identifier: MIT
//
// The private export tables served in server mode (see client/exports.h).
//
// A table is an array of pointers; most begin with their own size in bytes
// in slot 0 (layout per public reverse-engineering notes, ZLUDA dark_api).
// The sizes here are the ones the real driver 580.159 reports (measured on
// an H200), which can be larger than the slots anyone is known to call:
// unknown slots hold stubs that name themselves when called (below). Slot
// signatures are the ones traced on that driver and described by the same
// notes; a wrong one crashes cudart.
//
// The tables are `static const` and the functions in them static, so their
// addresses are fixed once the library is loaded: the integrity check
// hashes those addresses and cudart hashes the ones it was handed, and the
// two must agree every time it asks.
#include "client/exports.h"

#include <fatbinary_section.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "client/integrity.h"
#include "common/log.h"

// Slot 0 of a sized table: its size in bytes, stored as a pointer.
#define TABLE_SIZE(slots) ((const void *)(uintptr_t)((slots) * sizeof(void *)))

#define TOOLS_CONTEXT_MAX_SLOTS 96

// Slots nobody is known to call hold a stub that says which slot was called
// (once) and fails, rather than a NULL that would crash the caller with no
// clue. The stubs take no arguments: under the x86-64 calling convention a
// caller's arguments are simply ignored.
static uint8_t missing_warned[8][TOOLS_CONTEXT_MAX_SLOTS];

static void missing_slot(int table, const char *name, int slot)
{
	if (__atomic_exchange_n(&missing_warned[table][slot], 1, __ATOMIC_RELAXED))
		return;
	mps_log_warn("openmps: cudart called slot %d of the %s export table, which openmps does not "
		     "implement; it returns CUDA_ERROR_NOT_SUPPORTED", slot, name);
}

#define MISSING(t, name, n) \
	static CUresult missing_##name##_##n(void) \
	{ \
		missing_slot(t, #name, n); \
		return CUDA_ERROR_NOT_SUPPORTED; \
	}
#define M(name, n) [n] = (const void *)missing_##name##_##n

MISSING(0, cudart_interface, 3)
MISSING(0, cudart_interface, 4)
MISSING(0, cudart_interface, 5)
MISSING(0, cudart_interface, 9)
MISSING(0, cudart_interface, 10)
MISSING(0, cudart_interface, 11)
MISSING(3, context_local_storage, 3)
MISSING(4, context_checks, 1)
MISSING(4, context_checks, 4)
MISSING(4, context_checks, 5)
MISSING(4, context_checks, 6)
MISSING(4, context_checks, 7)
MISSING(4, context_checks, 8)
MISSING(4, context_checks, 9)
MISSING(4, context_checks, 10)
MISSING(4, context_checks, 11)
MISSING(4, context_checks, 12)
MISSING(4, context_checks, 13)
MISSING(4, context_checks, 14)

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

// [1] get_module_from_cubin
static CUresult cudart_module_from_wrapper(CUmodule *out, const void *wrapper)
{
	return load_wrapped(out, wrapper);
}

// [2] the device's primary context, called once at start-up by PyTorch and
// CuPy.
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__primary_ctx_get(pctx, dev);
}

// [6] get_module_from_cubin_ext1. The three extra arguments' meaning is
// unknown; public reverse-engineering notes (ZLUDA) see them NULL/0 and
// refuse anything else with CUDA_ERROR_NOT_SUPPORTED, and so do we.
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

// [8] get_module_from_cubin_ext2: note the order, the fatbin itself (not a
// wrapper) first and the module second.
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

static const void *const cudart_interface[13] = {
	[0] = TABLE_SIZE(13),
	[1] = (const void *)cudart_module_from_wrapper,
	[2] = (const void *)cudart_primary_ctx,
	[6] = (const void *)cudart_module_from_wrapper_ext1,
	[7] = (const void *)cudart_slot7,
	[8] = (const void *)cudart_module_from_fatbin_ext2,
	[12] = (const void *)cudart_load_compilers,
	M(cudart_interface, 3), M(cudart_interface, 4), M(cudart_interface, 5),
	M(cudart_interface, 9), M(cudart_interface, 10), M(cudart_interface, 11),
};

// ---------------------------------------------------------------------------
// TOOLS_RUNTIME_CALLBACK_HOOKS a094798c-2e74-2e74-93f2-0800200c0a66,
// 7 slots (56 bytes)
//
// [2] and [6] each hand out a process-wide scratch buffer, once at start-up.
// Public reverse-engineering notes report sizes 1024 and 14 and back them
// with that many 32-bit words; whether the caller reads the size as bytes
// or as words, a buffer of that many 64-bit words is large enough.

#define SCRATCH1_SIZE 1024
#define SCRATCH2_SIZE 14
static uint64_t scratch1[SCRATCH1_SIZE] __attribute__((aligned(64)));
static uint64_t scratch2[SCRATCH2_SIZE] __attribute__((aligned(64)));

static void hooks_scratch1(void **ptr, size_t *size)
{
	if (ptr)
		*ptr = scratch1;
	if (size)
		*size = SCRATCH1_SIZE;
}

static void hooks_scratch2(void **ptr, size_t *size)
{
	if (ptr)
		*ptr = scratch2;
	if (size)
		*size = SCRATCH2_SIZE;
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

static const void *const tools_runtime_callback_hooks[7] = {
	[0] = TABLE_SIZE(7),
	[2] = (const void *)hooks_scratch1,
	[6] = (const void *)hooks_scratch2,
	[1] = (const void *)hooks_nothing, [3] = (const void *)hooks_nothing,
	[4] = (const void *)hooks_query, [5] = (const void *)hooks_nothing,
};

// ---------------------------------------------------------------------------
// TOOLS_TLS 42d85a81-23f6-cb47-8298-f6e78a3aecdc, 3 slots (24 bytes).
// [2] gives the calling thread's current context (CUcontext *out): cuBLASLt
// keys its kernel registry on it, and treats a failure as "no kernels"
// (public notes of other replacement drivers; seen called under PyTorch).

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

static const void *const tools_tls[3] = {
	[0] = TABLE_SIZE(3),
	[1] = (const void *)tls_nothing,
	[2] = (const void *)tls_current_context,
};

// ---------------------------------------------------------------------------
// TOOLS_CONTEXT 21318c60-9714-3248-8ca6-41ff7324c8f2, 93 slots (744 bytes, as
// the real driver reports). cuBLAS and cuFFT use a few slots; the meanings
// below are from public notes of other replacement drivers that run them:
//   [4]  (CUcontext, unsigned long long *id): the context's unique id, as
//        cuCtxGetId;
//   [39] (x, y, uint64_t *out): reports 0 (taken on cuBLAS's graph-capture
//        path);
//   [51] (x, CUstream, void **out): a per-stream tools object; cuBLAS only
//        needs it to exist, so every stream gets one zeroed object;
//        UINT64_MAX as the stream is refused as an invalid handle.
// Callers do not always check the size slot, so every slot holds a function.

static CUresult tools_context_id(CUcontext ctx, unsigned long long *id)
{
	return cuCtxGetId(ctx, id);
}

static CUresult tools_context_39(uint64_t a, uint64_t b, uint64_t *out)
{
	(void)a;
	if (!b || !out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = 0;
	return CUDA_SUCCESS;
}

static uint64_t tools_stream_object[64];

static CUresult tools_context_51(uint64_t a, uint64_t stream, void **out)
{
	(void)a;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (stream == UINT64_MAX)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = tools_stream_object;
	return CUDA_SUCCESS;
}

#define TOOLS_CONTEXT_SLOTS 93

/* Slots 1-92 but 4, 39 and 51: one stub each, naming itself when called. */
#define TC(n) MISSING(6, tools_context, n)
TC(1) TC(2) TC(3) TC(5) TC(6) TC(7) TC(8) TC(9) TC(10) TC(11) TC(12) TC(13) TC(14) TC(15) TC(16)
TC(17) TC(18) TC(19) TC(20) TC(21) TC(22) TC(23) TC(24) TC(25) TC(26) TC(27) TC(28) TC(29) TC(30)
TC(31) TC(32) TC(33) TC(34) TC(35) TC(36) TC(37) TC(38) TC(40) TC(41) TC(42) TC(43) TC(44) TC(45)
TC(46) TC(47) TC(48) TC(49) TC(50) TC(52) TC(53) TC(54) TC(55) TC(56) TC(57) TC(58) TC(59) TC(60)
TC(61) TC(62) TC(63) TC(64) TC(65) TC(66) TC(67) TC(68) TC(69) TC(70) TC(71) TC(72) TC(73) TC(74)
TC(75) TC(76) TC(77) TC(78) TC(79) TC(80) TC(81) TC(82) TC(83) TC(84) TC(85) TC(86) TC(87) TC(88)
TC(89) TC(90) TC(91) TC(92)
#undef TC

#define T(n) M(tools_context, n)
static const void *const tools_context[TOOLS_CONTEXT_SLOTS] = {
	[0] = TABLE_SIZE(TOOLS_CONTEXT_SLOTS),
	[4] = (const void *)tools_context_id,
	[39] = (const void *)tools_context_39,
	[51] = (const void *)tools_context_51,
	T(1), T(2), T(3), T(5), T(6), T(7), T(8), T(9), T(10), T(11), T(12), T(13), T(14), T(15), T(16),
	T(17), T(18), T(19), T(20), T(21), T(22), T(23), T(24), T(25), T(26), T(27), T(28), T(29), T(30),
	T(31), T(32), T(33), T(34), T(35), T(36), T(37), T(38), T(40), T(41), T(42), T(43), T(44), T(45),
	T(46), T(47), T(48), T(49), T(50), T(52), T(53), T(54), T(55), T(56), T(57), T(58), T(59), T(60),
	T(61), T(62), T(63), T(64), T(65), T(66), T(67), T(68), T(69), T(70), T(71), T(72), T(73), T(74),
	T(75), T(76), T(77), T(78), T(79), T(80), T(81), T(82), T(83), T(84), T(85), T(86), T(87), T(88),
	T(89), T(90), T(91), T(92),
};
#undef T

// ---------------------------------------------------------------------------
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 c693336e-1121-df11-a8c3-68f355d89593:
// no size slot, the functions start at [0] (client/cls.h).

static const void *const context_local_storage[4] = {
	[0] = (const void *)mps__cls_put,
	[1] = (const void *)mps__cls_delete,
	[2] = (const void *)mps__cls_get,
	M(context_local_storage, 3),
};

// ---------------------------------------------------------------------------
// CONTEXT_CHECKS 263e8860-7cd2-6143-92f6-bbd5006dfa7e, 15 slots (120 bytes)
//
// Per public reverse-engineering notes these test flags that are never
// observably set: [2] reports 0 through out1 and leaves out2 alone, [3]
// returns 0.

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

static const void *const context_checks[15] = {
	[0] = TABLE_SIZE(15),
	[2] = (const void *)context_check,
	[3] = (const void *)context_check_fn3,
	M(context_checks, 1), M(context_checks, 4), M(context_checks, 5), M(context_checks, 6),
	M(context_checks, 7), M(context_checks, 8), M(context_checks, 9), M(context_checks, 10),
	M(context_checks, 11), M(context_checks, 12), M(context_checks, 13), M(context_checks, 14),
};

// ---------------------------------------------------------------------------
// INTEGRITY_CHECK d4082055-bde6-704b-8d34-ba123c66e1f2, 3 slots (24 bytes)

static const void *const integrity_check[3];

// [1] called three times at start-up by cudart. Hashes this library's own
// table addresses and this function's address, read back from the table so
// they are exactly what cudart was given.
static CUresult integrity_check_slot(uint32_t version, uint64_t unix_seconds,
				     uint64_t result[2])
{
	return mps__integrity_check(version, unix_seconds, result, cudart_interface,
				    integrity_check, integrity_check[1]);
}

// [2] takes a flag and succeeds (public notes of other replacement drivers:
// the runtime probes it and expects a function).
static CUresult integrity_check_probe(int flag)
{
	(void)flag;
	return CUDA_SUCCESS;
}

static const void *const integrity_check[3] = {
	[0] = TABLE_SIZE(3),
	[1] = (const void *)integrity_check_slot,
	[2] = (const void *)integrity_check_probe,
};

// ---------------------------------------------------------------------------
// Lookup. UUID bytes are in the order of the textual form.

struct export_entry {
	uint8_t id[16];
	const void *const *table;
};

static const struct export_entry exports[] = {
	{ { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
	    0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, cudart_interface },
	{ { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74,
	    0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, tools_runtime_callback_hooks },
	{ { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
	    0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, tools_tls },
	{ { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
	    0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, tools_context },
	{ { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
	    0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, context_local_storage },
	{ { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
	    0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, context_checks },
	{ { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
	    0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, integrity_check },
};

// Unknown ids already reported, so a program that asks in a loop logs once.
#define MAX_REPORTED 32
static pthread_mutex_t reported_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t reported[MAX_REPORTED][16];
static int nreported;

static void report_unknown(const uint8_t id[16])
{
	int first = 1, full = 0;

	pthread_mutex_lock(&reported_lock);
	for (int i = 0; i < nreported; i++)
		if (!memcmp(reported[i], id, 16))
			first = 0;
	if (first) {
		if (nreported < MAX_REPORTED)
			memcpy(reported[nreported++], id, 16);
		else
			full = 1;
	}
	pthread_mutex_unlock(&reported_lock);
	if (!first || full)
		return;
	/* Debug level: programs run fine without these tables, and this would
	 * otherwise print on every start of every PyTorch or CuPy program. */
	mps_log_debug("cuGetExportTable: table %02x%02x%02x%02x-%02x%02x-%02x%02x-"
		      "%02x%02x-%02x%02x%02x%02x%02x%02x is not provided in server mode",
		      id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8],
		      id[9], id[10], id[11], id[12], id[13], id[14], id[15]);
}

CUresult mps__export_table(const void **table, const CUuuid *id)
{
	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(exports) / sizeof(exports[0]); i++) {
		if (!memcmp(exports[i].id, id->bytes, 16)) {
			*table = exports[i].table;
			return CUDA_SUCCESS;
		}
	}
	*table = NULL;
	// The real driver's code for an unknown id is not documented; public
	// reverse-engineering notes (ZLUDA) answer CUDA_ERROR_INVALID_VALUE and
	// real cudart copes with it. tests/gpu/integrity_vs_driver.c prints
	// what the real driver returns.
	report_unknown((const uint8_t *)id->bytes);
	return CUDA_ERROR_INVALID_VALUE;
}
