// SPDX-License-Identifier: MIT
/*
 * Texture and surface objects. The server makes them (MPS_OP_TEXOBJ) from
 * the program's descriptors, its array handles turned into the server's;
 * the object's value is the driver's, which kernels take by value. The
 * library keeps each object's descriptors as the program gave them, so
 * the calls that read them back answer here, with the program's own
 * handles.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/forward.h"

struct texobj {
	struct texobj *next;
	uint64_t value;
	bool surface;
	bool view;
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC tex;
	CUDA_RESOURCE_VIEW_DESC view_desc;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct texobj *objects;

static CUresult create(uint64_t *out, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
		       const CUDA_RESOURCE_VIEW_DESC *view, bool surface)
{
	struct mps_msg_texobj q;
	struct mps_call call;
	struct texobj *t;
	uint64_t h = 0;
	uint32_t ctx;
	CUresult r;

	if (!out || !res || (!surface && !tex))
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fwd_ctx(&ctx, true);
	if (r != CUDA_SUCCESS)
		return r;
	memset(&q, 0, sizeof(q));
	q.hdr.flags = surface ? MPS_SURF_CREATE : MPS_TEX_CREATE;
	q.res = *res;
	if (res->resType == CU_RESOURCE_TYPE_ARRAY) {
		r = mps__fwd_h_array(res->res.array.hArray, &h);
		q.res.res.array.hArray = NULL;
	} else if (res->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
		r = mps__fwd_h_mipmap(res->res.mipmap.hMipmappedArray, &h);
		q.res.res.mipmap.hMipmappedArray = NULL;
	}
	if (r != CUDA_SUCCESS)
		return r;
	q.array = (uint32_t)h;
	if (tex)
		q.tex = *tex;
	if (view) {
		q.view = 1;
		q.view_desc = *view;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = mps__call(MPS_OP_TEXOBJ, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS)
		t->value = call.s->val[0];
	mps__call_end(&call);
	if (r != CUDA_SUCCESS) {
		free(t);
		return r;
	}
	t->surface = surface;
	t->res = *res;
	if (tex)
		t->tex = *tex;
	t->view = view != NULL;
	if (view)
		t->view_desc = *view;
	pthread_mutex_lock(&lock);
	t->next = objects;
	objects = t;
	pthread_mutex_unlock(&lock);
	*out = t->value;
	return CUDA_SUCCESS;
}

/* Takes the object out of the list (NULL if it is not one of that kind). */
static struct texobj *take(uint64_t value, bool surface)
{
	struct texobj *t = NULL;

	pthread_mutex_lock(&lock);
	for (struct texobj **pp = &objects; *pp; pp = &(*pp)->next) {
		if ((*pp)->value == value && (*pp)->surface == surface) {
			t = *pp;
			*pp = t->next;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return t;
}

static CUresult destroy(uint64_t value, bool surface)
{
	struct mps_msg_texobj q;
	struct mps_call call;
	struct texobj *t = take(value, surface);
	uint32_t ctx = 0;
	CUresult r;

	if (!t)
		return CUDA_ERROR_INVALID_VALUE;
	mps__cur_handle(&ctx);
	memset(&q, 0, sizeof(q));
	q.hdr.flags = surface ? MPS_SURF_DESTROY : MPS_TEX_DESTROY;
	q.object = value;
	r = mps__call(MPS_OP_TEXOBJ, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	free(t);
	return r;
}

/* Copies what a getter asks for out of the object's record. */
static CUresult read_back(uint64_t value, bool surface, void *out, size_t off, size_t len, bool need_view)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (struct texobj *t = objects; t; t = t->next) {
		if (t->value != value || t->surface != surface)
			continue;
		if (!need_view || t->view) {
			memcpy(out, (const char *)t + off, len);
			r = CUDA_SUCCESS;
		}
		break;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

static CUresult tex_create(CUtexObject *o, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
			   const CUDA_RESOURCE_VIEW_DESC *view)
{
	uint64_t v;
	CUresult r = create(&v, res, tex, view, false);

	if (r == CUDA_SUCCESS)
		*o = (CUtexObject)v;
	return r;
}

static CUresult surf_create(CUsurfObject *o, const CUDA_RESOURCE_DESC *res)
{
	uint64_t v;
	CUresult r;

	if (res && res->resType != CU_RESOURCE_TYPE_ARRAY)
		return CUDA_ERROR_INVALID_VALUE;
	r = create(&v, res, NULL, NULL, true);
	if (r == CUDA_SUCCESS)
		*o = (CUsurfObject)v;
	return r;
}

static CUresult tex_destroy(CUtexObject o) { return destroy(o, false); }
static CUresult surf_destroy(CUsurfObject o) { return destroy(o, true); }

static CUresult tex_res(CUDA_RESOURCE_DESC *d, CUtexObject o)
{
	return read_back(o, false, d, offsetof(struct texobj, res), sizeof(*d), false);
}

static CUresult tex_desc(CUDA_TEXTURE_DESC *d, CUtexObject o)
{
	return read_back(o, false, d, offsetof(struct texobj, tex), sizeof(*d), false);
}

static CUresult tex_view(CUDA_RESOURCE_VIEW_DESC *d, CUtexObject o)
{
	return read_back(o, false, d, offsetof(struct texobj, view_desc), sizeof(*d), true);
}

static CUresult surf_res(CUDA_RESOURCE_DESC *d, CUsurfObject o)
{
	return read_back(o, true, d, offsetof(struct texobj, res), sizeof(*d), false);
}

const struct mps_impl mps__texture_api[] = {
	MPS_IMPL(cuTexObjectCreate, tex_create),
	MPS_IMPL(cuTexObjectDestroy, tex_destroy),
	MPS_IMPL(cuTexObjectGetResourceDesc, tex_res),
	MPS_IMPL(cuTexObjectGetTextureDesc, tex_desc),
	MPS_IMPL(cuTexObjectGetResourceViewDesc, tex_view),
	MPS_IMPL(cuSurfObjectCreate, surf_create),
	MPS_IMPL(cuSurfObjectDestroy, surf_destroy),
	MPS_IMPL(cuSurfObjectGetResourceDesc, surf_res),
	MPS_IMPL_END
};
