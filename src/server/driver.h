// SPDX-License-Identifier: MIT
/*
 * The real driver, as the server sees it: one table of function pointers
 * looked up by their exported names in whatever library was loaded (NVIDIA's
 * libcuda.so.1, or the software stand-in the tests use). Calls are written
 * mps_drv.cuMemAlloc(...): cuda.h's macros turn both the field name and the
 * looked-up symbol into the current versioned name (cuMemAlloc_v2), so the
 * server always calls the same ABI it was compiled against.
 */
#ifndef MPS_SERVER_DRIVER_H
#define MPS_SERVER_DRIVER_H

#include <cuda.h>

#include "server/gen/forward_driver.h"

#define MPS_DRIVER_API(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName) \
	X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetUuid) \
	X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) \
	X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuCtxGetLimit) X(cuCtxSetLimit) \
	X(cuCtxGetStreamPriorityRange) \
	X(cuMemAlloc) X(cuMemAllocPitch) X(cuMemFree) X(cuMemGetInfo) X(cuMemGetAddressRange) \
	X(cuMemAllocAsync) X(cuMemFreeAsync) \
	X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) \
	X(cuPointerGetAttribute) \
	X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) \
	X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
	X(cuMemsetD2D8Async) X(cuMemsetD2D16Async) X(cuMemsetD2D32Async) \
	X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal) \
	X(cuModuleLoadDataEx) X(cuLinkCreate_v2) X(cuLinkAddData_v2) X(cuLinkComplete) X(cuLinkDestroy) \
	X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuLibraryGetGlobal) \
	X(cuKernelGetFunction) X(cuKernelGetAttribute) X(cuKernelSetAttribute) \
	X(cuKernelGetParamInfo) X(cuFuncGetAttribute) X(cuFuncSetAttribute) \
	X(cuFuncSetCacheConfig) X(cuFuncGetParamInfo) \
	X(cuLaunchKernel) X(cuLaunchKernelEx) \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) \
	X(cuOccupancyAvailableDynamicSMemPerBlock) X(cuOccupancyMaxActiveClusters) \
	X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) \
	X(cuStreamQuery) X(cuStreamWaitEvent) \
	X(cuEventCreate) X(cuEventRecord) X(cuEventRecordWithFlags) X(cuEventSynchronize) \
	X(cuEventQuery) X(cuEventElapsedTime) X(cuEventDestroy)

/* Functions a driver may lack (an older one, or the stand-in): NULL then,
 * and what needs them answers CUDA_ERROR_NOT_SUPPORTED. The generated
 * forwarding layer adds the ones it calls (gen/forward_driver.h). */
#define MPS_DRIVER_OPT(X) \
	X(cuKernelSetCacheConfig) X(cuMemRelease) X(cuMemCreate) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) \
	X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) \
	X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle) \
	X(cuMemPoolSetAttribute) X(cuMemPoolGetAttribute) \
	X(cuGraphDebugDotPrint) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle) \
	X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuStreamIsCapturing) \
	X(cuStreamGetCaptureInfo_v3) X(cuThreadExchangeStreamCaptureMode) X(cuStreamBeginCaptureToGraph) \
	X(cuGraphAddKernelNode_v2) X(cuGraphKernelNodeSetParams_v2) X(cuGraphExecKernelNodeSetParams_v2) \
	X(cuGraphKernelNodeGetParams_v2) \
	X(cuGraphAddMemcpyNode) X(cuGraphMemcpyNodeGetParams) X(cuGraphMemcpyNodeSetParams) \
	X(cuGraphExecMemcpyNodeSetParams) X(cuGraphAddMemAllocNode) X(cuGraphMemAllocNodeGetParams) \
	X(cuGraphAddNode_v2) \
	X(cuMemPoolExportToShareableHandle) X(cuMemPoolImportFromShareableHandle) X(cuMemPoolExportPointer) \
	X(cuMemPoolImportPointer) \
	X(cuModuleGetFunctionCount) X(cuModuleEnumerateFunctions) X(cuFuncGetName) X(cuGetExportTable) \
	X(cuLaunchHostFunc) X(cuGraphAddHostNode) X(cuGraphHostNodeGetParams) X(cuGraphAddBatchMemOpNode) \
	X(cuDeviceGetDevResource) X(cuDevSmResourceSplitByCount) X(cuDevResourceGenerateDesc) \
	X(cuGreenCtxCreate) X(cuGreenCtxStreamCreate) X(cuCtxFromGreenCtx) X(cuMemcpy3DAsync) \
	X(cuTexObjectCreate) X(cuTexObjectDestroy) X(cuSurfObjectCreate) X(cuSurfObjectDestroy) \
	X(cuLibraryGetManaged)

#define MPS_DRIVER_FIELD(name) __typeof__(&name) name;

struct mps_driver {
	void *lib;
	char path[512];
	MPS_DRIVER_API(MPS_DRIVER_FIELD)
	MPS_DRIVER_OPT(MPS_DRIVER_FIELD)
	MPS_DRIVER_FWD(MPS_DRIVER_FIELD)
};

extern struct mps_driver mps_drv;

/* Loads the driver (see common/driver_path.h) and every function above.
 * Returns 0, or -1 with the reason logged. */
int mps_driver_load(void);

/* The driver's name for a result, for logs ("CUDA_ERROR_INVALID_VALUE"). */
const char *mps_driver_errname(CUresult r);

#endif
