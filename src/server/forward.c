// SPDX-License-Identifier: MIT
/*
 * See forward.h. Handles of the kinds the core already keeps (contexts,
 * streams, events, functions, modules) are looked up in their own records;
 * the rest are objects.h's.
 */
#include <stdlib.h>
#include <string.h>

#include "server/driver.h"
#include "server/forward.h"
#include "server/objects.h"
#include "server/server.h"
#include "server/streams.h"

#define OUT_CAP_MAX (1u << 20)   /* elements of one output array the server fills */

CUresult mps__fwd_begin(struct mps_client *c, const struct mps_msg *m, bool need_ctx)
{
	struct mps_sctx *x;

	if (!m->ctx)
		return need_ctx ? CUDA_ERROR_INVALID_CONTEXT : mps__bind_device(c, 0);
	x = mps__msg_ctx(c, m);
	if (!x)
		return CUDA_ERROR_INVALID_CONTEXT;
	return mps__bind_device(c, x->device);
}

struct mps_sstream *mps__fwd_stream(struct mps_client *c, const struct mps_msg *m, uint32_t h, bool work,
				    CUresult *err)
{
	struct mps_sstream *st;

	if (work)
		return mps_stream_for_work(c, m, h, err);
	st = mps_stream_resolve(c, h ? NULL : mps__msg_ctx(c, m), h, err);
	if (!st)
		return NULL;
	*err = mps__bind_device(c, st->ctx->device);
	return *err == CUDA_SUCCESS ? st : NULL;
}

CUresult mps__fwd_device(struct mps_client *c, uint64_t v, CUdevice *out)
{
	int d = v > INT32_MAX ? -1 : mps__client_device(c, (int64_t)v);

	if (d < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = mps_srv.dev[d].dev;
	return CUDA_SUCCESS;
}

int mps__device_index(CUdevice d)
{
	for (int i = 0; i < mps_srv.ndev; i++)
		if (mps_srv.dev[i].dev == d)
			return i;
	return -1;
}

CUresult mps__fwd_location(struct mps_client *c, const CUmemLocation *loc, int *index)
{
	CUdevice dev;
	CUresult r;

	if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return loc->type == CU_MEM_LOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	if (loc->id < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	r = mps__fwd_device(c, (uint64_t)loc->id, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	*index = mps__device_index(dev);
	return *index < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUmemAccessDesc *mps__fwd_access(struct mps_client *c, const CUmemAccessDesc *in, size_t n, CUresult *err)
{
	CUmemAccessDesc *v = calloc(n ? n : 1, sizeof(*v));
	int d;

	*err = v ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n && *err == CUDA_SUCCESS; i++) {
		v[i] = in[i];
		*err = mps__fwd_location(c, &v[i].location, &d);
		if (*err == CUDA_SUCCESS)
			v[i].location.id = (int)mps_srv.dev[d].dev;
	}
	if (*err != CUDA_SUCCESS) {
		free(v);
		v = NULL;
	}
	return v;
}

/* A stand-in object for "no context": non-NULL, never dereferenced. */
static char no_ctx;

void *mps__fwd_get(struct mps_client *c, int type, uint64_t h, void **real, CUresult *err)
{
	struct mps_sobj *o;

	*real = NULL;
	if (h > UINT32_MAX)
		goto bad;
	switch (type) {
	case MPS_H_CTX: {
		struct mps_sctx *x;

		if (!h)
			return &no_ctx;
		x = mps__obj(c, (uint32_t)h, MPS_H_CTX);
		if (!x) {
			*err = CUDA_ERROR_INVALID_CONTEXT;
			return NULL;
		}
		*real = mps_srv.dev[x->device].primary;
		return x;
	}
	case MPS_H_EVENT: {
		struct mps_sevent *e = mps__obj(c, (uint32_t)h, MPS_H_EVENT);

		if (!e)
			goto bad;
		*real = e->ev;
		return e;
	}
	case MPS_H_FUNC: {
		struct mps_sfunc *f = mps__obj(c, (uint32_t)h, MPS_H_FUNC);

		if (!f)
			goto bad;
		*real = f->f;
		return f;
	}
	case MPS_H_MODULE: {
		struct mps_smodule *mod = mps__obj(c, (uint32_t)h, MPS_H_MODULE);

		if (!mod)
			goto bad;
		*real = mod->kind == MPS_MODULE ? (void *)mod->mod : (void *)mod->lib;
		return mod;
	}
	default:
		o = mps_obj_get(c, type, (uint32_t)h);
		if (!o)
			goto bad;
		*real = o->real;
		return o;
	}
bad:
	*err = type == MPS_H_ALLOC || type == MPS_H_GRAPH || type == MPS_H_NODE || type == MPS_H_EXEC ?
		       CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
	return NULL;
}

/* Destroys what the driver made when we cannot keep it. */
static void undo(struct mps_client *c, int type, void *real)
{
	(void)c;
	switch (type) {
	case MPS_H_GRAPH:
		if (mps_drv.cuGraphDestroy)
			mps_drv.cuGraphDestroy((CUgraph)real);
		break;
	case MPS_H_EXEC:
		if (mps_drv.cuGraphExecDestroy)
			mps_drv.cuGraphExecDestroy((CUgraphExec)real);
		break;
	case MPS_H_POOL:
		if (mps_drv.cuMemPoolDestroy)
			mps_drv.cuMemPoolDestroy((CUmemoryPool)real);
		break;
	case MPS_H_ALLOC:
		if (mps_drv.cuMemRelease)
			mps_drv.cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)real);
		break;
	default:
		break;
	}
}

static int cur_device(void)
{
	int d = mps__cur_device();

	return d < 0 ? 0 : d;
}

CUresult mps__fwd_new(struct mps_client *c, int type, void *real, uint32_t owner, uint64_t *handle)
{
	uint32_t h = mps_obj_find(c, type, real);
	struct mps_sobj *o;

	/* Known already, as the driver's (a capture's graph, seen while it was
	 * being captured): it is the client's now. */
	if (h && (o = mps_obj_get(c, type, h))) {
		o->borrowed = false;
		o->owner = owner;
		*handle = h;
		return CUDA_SUCCESS;
	}
	o = mps_obj_add(c, type, real, cur_device(), owner);

	if (!o) {
		undo(c, type, real);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*handle = o->handle;
	return CUDA_SUCCESS;
}

struct event_match {
	CUevent ev;
	uint32_t handle;
};

static void match_event(void *obj, void *arg)
{
	struct mps_sevent *e = obj;
	struct event_match *w = arg;

	if (e->ev == w->ev)
		w->handle = e->handle;
}

CUresult mps__fwd_handle_of(struct mps_client *c, int type, void *real, uint32_t owner, uint64_t *handle)
{
	struct mps_sobj *o;
	uint32_t h;

	if (type == MPS_H_EVENT) {
		struct event_match w = { .ev = real };

		/* A node's event is one of the client's own, or none it can name. */
		mps_handles_foreach(&c->handles, MPS_H_EVENT, match_event, &w);
		*handle = w.handle;
		return w.handle ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	}
	h = mps_obj_find(c, type, real);
	if (h) {
		*handle = h;
		return CUDA_SUCCESS;
	}
	o = mps_obj_add(c, type, real, cur_device(), owner);
	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* What we did not make, the driver frees with its owner. */
	o->borrowed = true;
	*handle = o->handle;
	return CUDA_SUCCESS;
}

void mps__fwd_del(struct mps_client *c, int type, uint32_t handle)
{
	(void)type;
	mps_obj_del(c, handle, false);
}

uint32_t mps__fwd_owner(struct mps_client *c, uint32_t node)
{
	struct mps_sobj *o = mps_obj_get(c, MPS_H_NODE, node);

	return o ? o->owner : 0;
}

const void *mps__fwd_array(const uint8_t **at, const uint8_t *end, uint64_t n, size_t size, CUresult *err)
{
	const uint8_t *p = *at;
	uint64_t bytes;

	if (n > (uint64_t)(end - p) / size) {
		*err = CUDA_ERROR_INVALID_VALUE;
		return NULL;
	}
	bytes = (n * size + 7) & ~(uint64_t)7;
	if (bytes > (uint64_t)(end - p)) {
		*err = CUDA_ERROR_INVALID_VALUE;
		return NULL;
	}
	*at = p + bytes;
	return p;
}

const char *mps__fwd_str(const uint8_t **at, const uint8_t *end, uint64_t len, CUresult *err)
{
	const char *s;

	if (len >= (uint64_t)(end - *at)) {
		*err = CUDA_ERROR_INVALID_VALUE;
		return NULL;
	}
	s = mps__fwd_array(at, end, len + 1, 1, err);
	if (s && s[len] != 0) {
		*err = CUDA_ERROR_INVALID_VALUE;
		return NULL;
	}
	return s;
}

void *mps__fwd_handles(struct mps_client *c, int type, const void *wire, size_t n, CUresult *err)
{
	void **out = calloc(n ? n : 1, sizeof(*out));

	if (!out) {
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t h;

		memcpy(&h, (const uint8_t *)wire + i * sizeof(h), sizeof(h));
		if (!mps__fwd_get(c, type, h, &out[i], err)) {
			free(out);
			return NULL;
		}
	}
	return out;
}

size_t mps__fwd_out_cap(uint64_t n)
{
	return n > OUT_CAP_MAX ? OUT_CAP_MAX : (size_t)n;
}

size_t mps__fwd_chunk(size_t filled, uint64_t off, size_t chunk)
{
	if (off >= filled)
		return 0;
	return filled - off < chunk ? filled - off : chunk;
}
