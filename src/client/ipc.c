// SPDX-License-Identifier: MIT
/*
 * Interprocess handles: the driver's handles of the server's allocations
 * and events (server/ipc.h). A handle one client gets, another client of
 * the same server opens as the very same memory or event; a process on the
 * real driver opens it as usual, and a handle from such a process is
 * opened by the server's driver. An opened allocation is recorded as device
 * memory here until it is closed, so copies route it to the server.
 */
#include <string.h>

#include "client/api.h"
#include "client/client.h"

/* The owner of opened allocations in the device-range table: no context's. */
static const char opened_owner;

static CUresult ipc_call(uint16_t op, struct mps_msg_ipc *q, uint64_t *val, void *handle_out)
{
	struct mps_call call;
	uint32_t ctx = 0;
	CUresult r;

	mps__cur_handle(&ctx);
	r = mps__call(op, ctx, &q->hdr, sizeof(*q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && val) {
		val[0] = call.s->val[0];
		val[1] = call.s->val[1];
	}
	if (r == CUDA_SUCCESS && handle_out) {
		if (call.s->len == MPS_IPC_HANDLE_SIZE)
			memcpy(handle_out, call.s->data, MPS_IPC_HANDLE_SIZE);
		else
			r = CUDA_ERROR_UNKNOWN;
	}
	mps__call_end(&call);
	return r;
}

static CUresult ipc_get_mem_handle(CUipcMemHandle *h, CUdeviceptr p)
{
	struct mps_msg_ipc q = { .ptr = p };

	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	mps__devmem_share(p);   /* before: the handle may be in use once it exists */
	return ipc_call(MPS_OP_IPC_GET_MEM, &q, NULL, h);
}

static CUresult ipc_open_mem_handle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags)
{
	struct mps_msg_ipc q = { .flags = flags };
	struct mps_ctx *ctx = mps__ctx_cur();
	uint64_t v[2];
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	memcpy(q.bytes, &h, MPS_IPC_HANDLE_SIZE);
	r = ipc_call(MPS_OP_IPC_OPEN_MEM, &q, v, NULL);
	if (r == CUDA_SUCCESS) {
		*p = (CUdeviceptr)v[0];
		mps__devmem_add(v[0], v[1], NULL, &opened_owner);
	}
	return r;
}

static CUresult ipc_close_mem_handle(CUdeviceptr p)
{
	struct mps_msg_ipc q = { .ptr = p };
	CUresult r = ipc_call(MPS_OP_IPC_CLOSE_MEM, &q, NULL, NULL);

	if (r == CUDA_SUCCESS)
		mps__devmem_remove(p);
	return r;
}

static CUresult ipc_get_event_handle(CUipcEventHandle *h, CUevent e)
{
	struct mps_event *ev = mps__obj(e, MPS_MAGIC_EVENT);
	struct mps_msg_ipc q;

	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	memset(&q, 0, sizeof(q));
	q.event = ev->handle;
	return ipc_call(MPS_OP_IPC_GET_EVENT, &q, NULL, h);
}

static CUresult ipc_open_event_handle(CUevent *e, CUipcEventHandle h)
{
	struct mps_msg_ipc q;
	struct mps_ctx *ctx = mps__ctx_cur();
	uint64_t v[2];
	CUresult r;

	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	memset(&q, 0, sizeof(q));
	memcpy(q.bytes, &h, MPS_IPC_HANDLE_SIZE);
	r = ipc_call(MPS_OP_IPC_OPEN_EVENT, &q, v, NULL);
	if (r == CUDA_SUCCESS) {
		r = mps__event_adopt((uint32_t)v[0], ctx, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, e);
		if (r != CUDA_SUCCESS)
			mps__post_handle(MPS_OP_EVENT_DESTROY, 0, (uint32_t)v[0]);
	}
	return r;
}

const struct mps_impl mps__ipc_api[] = {
	MPS_IMPL(cuIpcGetMemHandle, ipc_get_mem_handle),
	MPS_IMPL(cuIpcOpenMemHandle_v2, ipc_open_mem_handle),
	MPS_IMPL_AS(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2, ipc_open_mem_handle),
	MPS_IMPL(cuIpcCloseMemHandle, ipc_close_mem_handle),
	MPS_IMPL(cuIpcGetEventHandle, ipc_get_event_handle),
	MPS_IMPL(cuIpcOpenEventHandle, ipc_open_event_handle),
	MPS_IMPL_END
};
