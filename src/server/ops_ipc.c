// SPDX-License-Identifier: MIT
/*
 * The IPC ops: the client's side of ipc.h. An allocation opened by handle
 * becomes a range of the importer's memory account (MPS_MEM_IPC, or
 * MPS_MEM_IPC_DRIVER for another process's), never charged to it, so its
 * copies and memsets may reach it until it closes the handle or leaves; an
 * event opened by handle becomes one of its events. What the exporter
 * frees while others hold it open waits for them (ipc.c).
 */
#include <stdlib.h>
#include <string.h>

#include "server/driver.h"
#include "server/ipc.h"
#include "server/server.h"

void mps__event_free(struct mps_client *c, struct mps_sevent *e)
{
	mps__bind_device(c, e->ctx->device);
	if (e->ipc != MPS_EVENT_OWN)
		mps_ipc_close_event(c, e->ev, e->ipc == MPS_EVENT_IPC);
	else if (!mps_ipc_orphan_event(c, e->ev))
		mps_drv.cuEventDestroy(e->ev);
	mps_handle_del(&c->handles, e->handle);
	free(e);
}

void mps__op_ipc_get_mem(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const struct mps_mrange *r = mps_memacct_find(&c->mem, q->ptr);
	CUresult rc;

	rc = r ? mps_ipc_export_mem(c, q->ptr, r->device, s->data) : CUDA_ERROR_INVALID_VALUE;
	s->len = rc == CUDA_SUCCESS ? MPS_IPC_HANDLE_SIZE : 0;
	mps__reply(c, m->slot, rc);
}

void mps__op_ipc_open_mem(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	uint64_t base = 0, size = 0;
	bool ours = false;
	int device = 0;
	CUresult rc;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (q->flags & ~(uint32_t)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	rc = mps__bind_device(c, x->device);
	if (rc == CUDA_SUCCESS)
		rc = mps_ipc_open_mem(c, q->bytes, q->flags, &base, &size, &device, &ours);
	if (rc != CUDA_SUCCESS) {
		mps__reply(c, m->slot, rc);
		return;
	}
	/* Opened twice by one client: one view, as the driver counts it. */
	if (mps_memacct_add(&c->mem, base, size, ours ? MPS_MEM_IPC : MPS_MEM_IPC_DRIVER, device, x->handle) < 0) {
		mps_ipc_close_mem(c, base, ours);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	s->val[0] = base;
	s->val[1] = size;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_ipc_close_mem(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_mrange r;

	if (mps_memacct_remove(&c->mem, q->ptr, MPS_MEM_IPC, &r) == 0)
		mps_ipc_close_mem(c, r.base, true);
	else if (mps_memacct_remove(&c->mem, q->ptr, MPS_MEM_IPC_DRIVER, &r) == 0)
		mps_ipc_close_mem(c, r.base, false);
	else {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_ipc_get_event(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sevent *e = mps__obj(c, q->event, MPS_H_EVENT);
	CUresult rc;

	if (!e || e->ipc != MPS_EVENT_OWN)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if ((e->flags & (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)) !=
		 (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING))
		rc = CUDA_ERROR_INVALID_HANDLE;   /* the driver's answer for an event not made for it */
	else
		rc = mps_ipc_export_event(c, e->ev, e->ctx->device, s->data);
	s->len = rc == CUDA_SUCCESS ? MPS_IPC_HANDLE_SIZE : 0;
	mps__reply(c, m->slot, rc);
}

void mps__op_ipc_open_event(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	struct mps_sevent *e;
	bool ours = false;
	CUresult rc;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	rc = mps__bind_device(c, x->device);
	if (rc == CUDA_SUCCESS)
		rc = mps_ipc_open_event(c, q->bytes, &e->ev, &ours);
	if (rc != CUDA_SUCCESS) {
		free(e);
		mps__reply(c, m->slot, rc);
		return;
	}
	e->ctx = x;
	e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
	e->ipc = ours ? MPS_EVENT_IPC : MPS_EVENT_IPC_DRIVER;
	e->handle = mps_handle_new(&c->handles, MPS_H_EVENT, e);
	if (!e->handle) {
		mps_ipc_close_event(c, e->ev, ours);
		free(e);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	s->val[0] = e->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}
