// SPDX-License-Identifier: MIT
//
// The driver's private export tables as the client library serves them in
// server mode: what cuGetExportTable(table, id) hands to NVIDIA's cudart
// (static or shared, also inside cuBLAS, cuDNN, PyTorch), which refuses to
// run without them.
//
// Served: CUDART_INTERFACE, TOOLS_RUNTIME_CALLBACK_HOOKS, TOOLS_TLS,
// CONTEXT_LOCAL_STORAGE_INTERFACE_V0301, CONTEXT_CHECKS and INTEGRITY_CHECK,
// with the slots seen called on driver 580.159 (traced on an H200) and
// described by public reverse-engineering notes (ZLUDA dark_api).
// Every other UUID is refused. The tables are static and never change, so
// their addresses (which the integrity check hashes) are stable for the
// life of the process.
#ifndef OPENMPS_CLIENT_EXPORTS_H
#define OPENMPS_CLIENT_EXPORTS_H

#include <cuda.h>

#include "client/cls.h"

// Server-mode cuGetExportTable.
//   CUDA_SUCCESS              *table = the table for id
//   CUDA_ERROR_INVALID_VALUE  table or id is NULL, or id is a table we do
//                             not serve (*table = NULL then; each unknown id
//                             is logged once with mps_log_warn)
CUresult mps__export_table(const void **table, const CUuuid *id);

// ---------------------------------------------------------------------------
// Hooks: implemented by the context, device and module code of the client
// library (tests provide fakes). The tables call them from whatever thread
// cudart uses, so they must be thread-safe.

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

#endif
