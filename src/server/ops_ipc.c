// SPDX-License-Identifier: MIT
/*
 * The IPC ops: the client's side of ipc.h. An allocation opened by handle
 * becomes a range of the importer's memory account (MPS_MEM_IPC, or
 * MPS_MEM_IPC_DRIVER for another process's), never charged to it, so its
 * copies and memsets may reach it until it closes the handle or leaves; an
 * event opened by handle becomes one of its events. What the exporter
 * frees while others hold it open waits for them (ipc.c). The same goes
 * for memory pools shared by file descriptor and their pointers
 * (MPS_MEM_POOL_PTR, MPS_MEM_POOL_PTR_DRIVER), which the importer frees
 * with cuMemFree or cuMemFreeAsync (ops_mem.c).
 */
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "common/sock.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/ipc.h"
#include "server/server.h"
#include "server/streams.h"

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

	/* Whoever opens it is not ordered after the client's fence. */
	if (r)
		mps_stream_fence_settle(c);
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

/* The client's pool named by handle, or NULL. */
static struct mps_sobj *pool_obj(struct mps_client *c, uint32_t h)
{
	return mps_obj_get(c, MPS_H_POOL, h);
}

void mps__op_pool_export(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_sobj *o = pool_obj(c, q->handle);
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_EXPORT };
	int fd = -1;
	CUresult r;

	if (!o || q->flags || o->aux == MPS_POOL_IMPORTED || o->aux == MPS_POOL_IMPORTED_DRIVER)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (q->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		r = q->type == CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	else
		r = mps_ipc_export_pool(c, (CUmemoryPool)o->real, o->device, &fd);
	if (r == CUDA_SUCCESS) {
		if (mps_sock_send(c->sock, &fm, sizeof(fm), fd) < 0)
			r = CUDA_ERROR_OPERATING_SYSTEM;
		close(fd);
	}
	mps__reply(c, m->slot, r);
}

void mps__op_pool_import(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	int fd = mps__take_fd(c);   /* first, whatever the answer: it must not linger */
	CUmemoryPool pool = NULL;
	struct mps_sobj *o;
	bool ours = false;
	int device = 0;
	CUresult r;

	if (fd < 0 || q->flags) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (q->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	r = mps__bind_device(c, mps__cur_device() < 0 ? 0 : mps__cur_device());
	if (r == CUDA_SUCCESS)
		r = mps_ipc_import_pool(c, fd, &pool, &device, &ours);
	if (r != CUDA_SUCCESS)
		goto out;
	/* Imported twice: one pool, as the driver answers. */
	if (mps_obj_find(c, MPS_H_POOL, pool)) {
		if (ours)
			mps_ipc_close_pool(c, pool, true);
		s->val[0] = mps_obj_find(c, MPS_H_POOL, pool);
		goto out;
	}
	o = mps_obj_add(c, MPS_H_POOL, pool, device, 0);
	if (!o) {
		mps_ipc_close_pool(c, pool, ours);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	o->aux = ours ? MPS_POOL_IMPORTED : MPS_POOL_IMPORTED_DRIVER;
	s->val[0] = o->handle;
out:
	if (fd >= 0)
		close(fd);
	mps__reply(c, m->slot, r);
}

void mps__op_pool_export_ptr(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const struct mps_mrange *r = mps_memacct_find(&c->mem, q->ptr);
	CUresult rc;

	/* Whoever opens it is not ordered after the client's fence. */
	if (r)
		mps_stream_fence_settle(c);
	rc = r ? mps_ipc_export_pool_ptr(c, q->ptr, r->device, s->data) : CUDA_ERROR_INVALID_VALUE;
	s->len = rc == CUDA_SUCCESS ? MPS_IPC_HANDLE_SIZE : 0;
	mps__reply(c, m->slot, rc);
}

void mps__op_pool_import_ptr(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_ipc *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sobj *o = pool_obj(c, q->event);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	uint64_t base = 0, size = 0;
	bool ours = false;
	int device = 0;
	CUresult rc;

	if (!o || (o->aux != MPS_POOL_IMPORTED && o->aux != MPS_POOL_IMPORTED_DRIVER)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	rc = mps__bind_device(c, o->device);
	if (rc == CUDA_SUCCESS)
		rc = mps_ipc_open_pool_ptr(c, (CUmemoryPool)o->real, q->bytes, &base, &size, &device, &ours);
	if (rc != CUDA_SUCCESS) {
		mps__reply(c, m->slot, rc);
		return;
	}
	if (mps_memacct_add(&c->mem, base, size, ours ? MPS_MEM_POOL_PTR : MPS_MEM_POOL_PTR_DRIVER, device,
			    x->handle) < 0) {
		mps_ipc_close_pool_ptr(c, base, ours);
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);   /* imported already */
		return;
	}
	s->val[0] = base;
	s->val[1] = size;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}
