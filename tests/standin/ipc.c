// SPDX-License-Identifier: MIT
/*
 * Interprocess handles as far as one process can tell them: a handle names
 * this process and the allocation (its base and buffer id) or the event,
 * so getting one checks what the driver checks (an address in a device
 * allocation, which names all of it; an interprocess event without timing). Opening a handle in
 * the process that made it is refused with CUDA_ERROR_INVALID_CONTEXT, as
 * on the driver; memory of another process cannot be reached from here, so
 * its handles are refused too.
 */
#include <string.h>
#include <unistd.h>

#include "standin.h"

#define IPC_MAGIC 0x43504953u   /* "SIPC" */

struct ipc_handle {
	uint32_t magic;
	uint32_t pid;
	uint64_t id;      /* buffer id, or event handle */
	uint64_t base;
	uint8_t pad[40];
};

_Static_assert(sizeof(struct ipc_handle) == sizeof(CUipcMemHandle), "an IPC handle is 64 bytes");

CU_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	struct ipc_handle h = { .magic = IPC_MAGIC, .pid = (uint32_t)getpid() };
	struct si_range *r;
	CUresult rc = CUDA_SUCCESS;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	r = mps__range_find((uintptr_t)dptr);
	if (!r || r->kind != SI_RANGE_DEVICE) {
		rc = CUDA_ERROR_INVALID_VALUE;
	} else {   /* any address in it names the whole allocation */
		h.id = r->buffer_id;
		h.base = r->base;
	}
	mps__unlock();
	if (rc == CUDA_SUCCESS)
		memcpy(pHandle, &h, sizeof(h));
	return rc;
}

/* What opening a handle gets here: never the memory or event itself. */
static CUresult open_handle(const void *bytes)
{
	struct ipc_handle h;

	memcpy(&h, bytes, sizeof(h));
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (h.magic == IPC_MAGIC && h.pid == (uint32_t)getpid())
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_ERROR_INVALID_VALUE;
}

CU_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	if (!pdptr)
		return CUDA_ERROR_INVALID_VALUE;
	(void)Flags;
	return open_handle(&handle);
}

CU_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	(void)dptr;
	return mps__initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
}

CU_API CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
	struct ipc_handle h = { .magic = IPC_MAGIC, .pid = (uint32_t)getpid(), .id = (uintptr_t)event };
	const unsigned want = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
	int flags;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	flags = mps__event_flags(event);
	mps__unlock();
	if (flags < 0)
		return CUDA_ERROR_INVALID_HANDLE;
	if (((unsigned)flags & want) != want)
		return CUDA_ERROR_INVALID_HANDLE;   /* as the driver answers */
	memcpy(pHandle, &h, sizeof(h));
	return CUDA_SUCCESS;
}

CU_API CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
	if (!phEvent)
		return CUDA_ERROR_INVALID_VALUE;
	return open_handle(&handle);
}
