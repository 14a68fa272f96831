// SPDX-License-Identifier: MIT
//
// The driver's private export tables as the client library serves them in
// server mode: what cuGetExportTable(table, id) hands to NVIDIA's libraries
// — cudart (static or shared, also inside cuBLAS, cuDNN, PyTorch), cuBLAS,
// cuBLASLt, cuFFT, NVML, NVRTC, nvJitLink — which call into them.
//
// Served: every table those libraries were seen asking for on driver
// 580.159 (docs/EXPORT-TABLES.md lists them, their slots and what each
// does). In each, the slots seen called are implemented and every other
// slot below the table's size is a stub that logs once and returns
// CUDA_ERROR_NOT_SUPPORTED (client/exports/etbl.h). Any other id is refused.
//
// exports/lookup.c looks tables up; exports/cudart.c serves cudart's own tables,
// exports/tools.c those that take the program's contexts, streams and
// modules, exports/driver.c those served with the real driver's functions.
// The tables never move, so their addresses (which the integrity check
// hashes) are stable for the life of the process.
#ifndef OPENMPS_CLIENT_EXPORTS_H
#define OPENMPS_CLIENT_EXPORTS_H

#include <stdint.h>

#include <cuda.h>

#include "client/exports/cls.h"

// Server-mode cuGetExportTable. caller: the code address that asked (for
// the log), or NULL.
//   CUDA_SUCCESS              *table = the table for id
//   CUDA_ERROR_INVALID_VALUE  table or id is NULL, or id is a table we do
//                             not serve (*table = NULL then; each such id is
//                             logged once with mps_log_warn)
CUresult mps__export_table(const void **table, const CUuuid *id, const void *caller);

// ---------------------------------------------------------------------------
// Hooks: implemented by the context, device and module code of the client
// library (tests provide fakes). The tables call them from whatever thread
// the libraries use, so they must be thread-safe. The tables also call the
// library's own public entry points (cuCtxGetId, cuStreamGetId,
// cuCtxGetDevice, cuDeviceGetAttribute).

// What cuDriverGetVersion returns to this process.
int mps__driver_version(void);

// What cuDeviceGetCount returns (>= 0), or < 0 when it would fail.
int mps__device_count(void);

// For device ordinal: what cuDeviceGetUuid_v2 (the cuDeviceGetUuid of current
// headers) and cuDeviceGetAttribute with CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID /
// _PCI_BUS_ID / _PCI_DEVICE_ID return. 0 or -errno. These must be
// bit-identical to the public answers: cudart hashes the public ones and
// compares with the integrity check's.
int mps__device_identity(int ordinal, CUuuid *uuid, int *pci_domain, int *pci_bus,
			 int *pci_device);

// The calling thread's current context, NULL when there is none.
CUcontext mps__ctx_current(void);

// CUDART_INTERFACE slot [2]: the device's primary context handle, the one
// cuDevicePrimaryCtxRetain returns, without retaining or activating it
// (public reverse-engineering notes observe the primary context still
// inactive afterwards). pctx is non-NULL. Errors as cuDevicePrimaryCtxRetain.
CUresult mps__primary_ctx_get(CUcontext *pctx, CUdevice dev);

// Loads a module into the current context from an image in memory: a fatbin
// (after the wrapper has been removed), a cubin or NUL-terminated PTX, as
// cuModuleLoadData accepts. out is non-NULL.
CUresult mps__module_load_image(CUmodule *out, const void *image);

// The functions of a module, as cuModuleGetFunctionCount and
// cuModuleEnumerateFunctions give them: *count = how many the module has,
// and the first min(max, *count) of them go to fns (which may be NULL when
// max is 0). CUDA_ERROR_INVALID_HANDLE if mod is not a module.
CUresult mps__module_functions(CUmodule mod, CUfunction *fns, unsigned int max, unsigned int *count);

// Slot 4 of table 1734dc26 answered by the server's driver for the current
// context's device: two malloc()ed maps. Errors as the driver's, or
// CUDA_ERROR_INVALID_CONTEXT without a current context.
CUresult mps__server_tpc_maps(uint8_t **a, uint8_t **b);

// The handle of function f as a library that reads the driver's function
// object sees it (client/exports/funcview.c): accepted wherever f is, and the same
// for f each time. NULL if f is not a function or no memory is left.
void *mps__func_view(CUfunction f);

#endif
