// SPDX-License-Identifier: MIT
//
// Name and version resolution for cuGetProcAddress: which exported driver function a program
// gets when it asks for an API name ("cuMemAlloc") built against a given CUDA version, with the
// legacy or the per-thread default stream. The answers come from the generated table in
// client/gen/procaddr_table.c and follow what the real driver resolves; the caller turns the
// symbol index into a function pointer (the stub for that symbol) and the CUresult.

#ifndef MPS_CLIENT_PROCADDR_H
#define MPS_CLIENT_PROCADDR_H

#include <stdint.h>

// Returns the enum mps_sym index to hand out for `name` at `cuda_version` (1000 * major +
// 10 * minor), or -1. `flags` is a CUdriverProcAddress_flags value: CU_GET_PROC_ADDRESS_DEFAULT
// and _LEGACY_STREAM resolve to the legacy default stream variant; _PER_THREAD_DEFAULT_STREAM
// to the per-thread one (_ptsz/_ptds) for functions that have one, else to the legacy variant.
// The caller rejects other flag values before calling. `*status` (status may be NULL) gets a
// CUdriverProcAddressQueryResult:
//   CU_GET_PROC_ADDRESS_SUCCESS                the index is returned;
//   CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND       name is not an API name (NULL, unknown, or an
//                                              exported symbol such as "cuMemAlloc_v2", which
//                                              the driver does not resolve either);
//   CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT the name is known, but cuda_version is below its
//                                              first variant (for the per-thread flag: below
//                                              its first per-thread variant, as the driver).
// Thread-safe: it only reads constant tables.
int mps__procaddr_lookup(const char *name, int cuda_version, uint64_t flags, int *status);

#endif
