// SPDX-License-Identifier: MIT
/*
 * What the files that define the private export tables share: the index of
 * each table, the stubs that fill the slots openmps does not implement, and
 * the lookup entry exports/lookup.c keeps for each table.
 *
 * A table is an array of pointers; most begin with their own size in bytes
 * in slot 0. Every slot below that size holds a function, never NULL: a slot
 * nobody is known to call holds a stub of its own that, when called, logs
 * once which table and slot it is and who called it, and returns
 * CUDA_ERROR_NOT_SUPPORTED. Stubs take no arguments: under the x86-64
 * calling convention the caller's are simply ignored.
 *
 * The stubs are defined ten at a time (MPS_ETBL_1_9, MPS_ETBL_DECADE), so a
 * table's array is rounded up to a multiple of ten slots; slot 0 says how
 * many of them the table has. The slots a file implements are written after
 * the stubs in the initializer and replace them (hence the pragma around
 * tables: -Woverride-init is the point here, not a mistake).
 */
#ifndef MPS_CLIENT_ETBL_H
#define MPS_CLIENT_ETBL_H

#include <cuda.h>
#include <stdint.h>

/* Every table served, in exports/lookup.c's lookup order. */
enum mps_etbl {
	MPS_ETBL_CUDART,         /* 6bd5fb6c CUDART_INTERFACE */
	MPS_ETBL_HOOKS,          /* a094798c TOOLS_RUNTIME_CALLBACK_HOOKS */
	MPS_ETBL_TLS,            /* 42d85a81 TOOLS_TLS */
	MPS_ETBL_CLS,            /* c693336e CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 */
	MPS_ETBL_CHECKS,         /* 263e8860 CONTEXT_CHECKS */
	MPS_ETBL_INTEGRITY,      /* d4082055 INTEGRITY_CHECK */
	MPS_ETBL_F8CFF951,       /* f8cff951, asked for by cudart at start-up */
	MPS_ETBL_TOOLS_CONTEXT,  /* 21318c60, contexts and streams (cuBLAS, cuBLASLt, cuFFT) */
	MPS_ETBL_6E163FBE,       /* 6e163fbe, a module's functions (cuFFT) */
	MPS_ETBL_1734DC26,       /* 1734dc26, cuBLASLt's fp16/bf16/fp8 matmuls */
	MPS_ETBL_69A28E9F,       /* 69a28e9f, NVML */
	MPS_ETBL_DA9151D3,       /* da9151d3, NVRTC and nvJitLink */
	MPS_ETBL_COUNT
};

#define MPS_ETBL_MAX_SLOTS 128

/* Slot 0 of a sized table: its size in bytes, stored as a pointer. */
#define MPS_ETBL_SIZE(slots) ((const void *)(uintptr_t)((slots) * sizeof(void *)))

/* The lookup entry of a table: its id (bytes in the order of the textual
 * form) and either the table itself or a function that gives it (NULL when
 * it cannot be served in this process; that function says why, once). */
struct mps_etbl_entry {
	uint8_t id[16];
	const void *const *table;
	const void *const *(*get)(void);
};

extern const struct mps_etbl_entry mps__etbl_entries[MPS_ETBL_COUNT];

/* The tables: cudart's own (exports/cudart.c), those of contexts, streams
 * and modules (exports/tools.c), and those served with the real driver's
 * help (exports/driver.c). */
extern const void *const mps__etbl_cudart[], *const mps__etbl_hooks[], *const mps__etbl_tls[],
	*const mps__etbl_cls[], *const mps__etbl_checks[], *const mps__etbl_integrity[],
	*const mps__etbl_f8cff951[], *const mps__etbl_tools_context[], *const mps__etbl_6e163fbe[],
	*const mps__etbl_1734dc26[];
const void *const *mps__etbl_69a28e9f(void);
const void *const *mps__etbl_da9151d3(void);

/* What a stub does: logs once per table and slot, names the caller (a code
 * address, or NULL), and returns CUDA_ERROR_NOT_SUPPORTED. */
CUresult mps__etbl_unimplemented(enum mps_etbl t, int slot, const void *caller);

/* "1734dc26-800d-4745-8726-c0f1e7dd8bca" for table t, into buf (37 bytes). */
void mps__etbl_name(enum mps_etbl t, char buf[37]);

/* "libcublasLt.so.13+0x330f9a6" for a code address, into buf. */
void mps__etbl_caller(const void *addr, char *buf, size_t len);

/* X(t, slot) for slots 1 to 9, and for slots d0 to d9 (d a digit 1-9). */
#define MPS_ETBL_1_9(X, t) X(t, 1) X(t, 2) X(t, 3) X(t, 4) X(t, 5) X(t, 6) X(t, 7) X(t, 8) X(t, 9)
#define MPS_ETBL_DECADE(X, t, d) \
	X(t, d##0) X(t, d##1) X(t, d##2) X(t, d##3) X(t, d##4) \
	X(t, d##5) X(t, d##6) X(t, d##7) X(t, d##8) X(t, d##9)

/* Defines table t's stub for slot s, and names it in an initializer. */
#define MPS_ETBL_STUB(t, s) \
	static CUresult t##_stub_##s(void) \
	{ \
		return mps__etbl_unimplemented(t, s, __builtin_return_address(0)); \
	}
#define MPS_ETBL_STUB_SLOT(t, s) [s] = (const void *)t##_stub_##s,

#endif
