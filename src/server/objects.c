// SPDX-License-Identifier: MIT
/*
 * See objects.h. The reverse index is open addressing with linear probing
 * over (type, driver handle); deleted keys leave a tombstone. Once keys and
 * tombstones fill half the table it is rebuilt without the tombstones,
 * twice as large if the keys alone fill a quarter of it: so a probe always
 * meets an empty slot, however many objects a client makes and destroys.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/objects.h"
#include "server/server.h"

static const int generic_types[] = { MPS_H_GRAPH, MPS_H_NODE,   MPS_H_EXEC,  MPS_H_POOL,   MPS_H_ALLOC,
				     MPS_H_LINK,  MPS_H_ARRAY,  MPS_H_MIPMAP, MPS_H_TEXOBJ, MPS_H_SURFOBJ };

static uint32_t hash(int type, void *real)
{
	uint64_t x = (uint64_t)(uintptr_t)real * 0x9e3779b97f4a7c15ull + (uint64_t)type;

	return (uint32_t)(x >> 32);
}

void mps_objindex_free(struct mps_objindex *x)
{
	free(x->k);
	memset(x, 0, sizeof(*x));
}

static int index_put(struct mps_objindex *x, int type, void *real, uint32_t handle);

static int grow(struct mps_objindex *x)
{
	struct mps_objindex nx = { .cap = !x->cap ? 64 : (x->n + 1) * 4 > x->cap ? x->cap * 2 : x->cap };

	nx.k = calloc(nx.cap, sizeof(*nx.k));
	if (!nx.k)
		return -ENOMEM;
	for (uint32_t i = 0; i < x->cap; i++)
		if (x->k[i].handle && !x->k[i].tomb)
			index_put(&nx, x->k[i].type, x->k[i].real, x->k[i].handle);
	free(x->k);
	*x = nx;
	return 0;
}

static int index_put(struct mps_objindex *x, int type, void *real, uint32_t handle)
{
	uint32_t i;

	if ((x->used + 1) * 2 > x->cap && grow(x) < 0)
		return -ENOMEM;
	for (i = hash(type, real) & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
		struct mps_objkey *k = &x->k[i];

		if (!k->handle || k->tomb) {
			if (!k->handle)
				x->used++;
			*k = (struct mps_objkey){ .real = real, .handle = handle, .type = (uint8_t)type };
			x->n++;
			return 0;
		}
	}
}

static struct mps_objkey *index_find(struct mps_objindex *x, int type, void *real)
{
	if (!x->cap)
		return NULL;
	for (uint32_t i = hash(type, real) & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
		struct mps_objkey *k = &x->k[i];

		if (!k->handle)
			return NULL;
		if (!k->tomb && k->type == type && k->real == real)
			return k;
	}
}

struct mps_sobj *mps_obj_add(struct mps_client *c, int type, void *real, int device, uint32_t owner)
{
	struct mps_sobj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->real = real;
	o->type = (uint8_t)type;
	o->device = (int16_t)device;
	o->owner = owner;
	o->handle = mps_handle_new(&c->handles, type, o);
	if (!o->handle || index_put(&c->objindex, type, real, o->handle) < 0) {
		if (o->handle)
			mps_handle_del(&c->handles, o->handle);
		free(o);
		return NULL;
	}
	return o;
}

struct mps_sobj *mps_obj_any(struct mps_client *c, int type, uint32_t handle)
{
	return mps_handle_get(&c->handles, handle, type);
}

struct mps_sobj *mps_obj_get(struct mps_client *c, int type, uint32_t handle)
{
	struct mps_sobj *o = mps_obj_any(c, type, handle);

	if (o && type == MPS_H_ALLOC && o->refs == 0)
		return NULL;
	return o;
}

uint32_t mps_obj_find(struct mps_client *c, int type, void *real)
{
	struct mps_objkey *k = index_find(&c->objindex, type, real);

	return k ? k->handle : 0;
}

/* Gives back the device memory charged for the object. */
static void uncharge(struct mps_client *c, struct mps_sobj *o)
{
	if (o->bytes)
		mps_memacct_uncharge(&c->mem, o->device, o->bytes);
	o->bytes = 0;
}

/* Destroys the driver's object, on the device it was made on. */
static void destroy(struct mps_client *c, struct mps_sobj *o)
{
	CUresult r = CUDA_SUCCESS;

	if (o->borrowed)
		return;
	mps__bind_device(c, o->device);
	switch (o->type) {
	case MPS_H_GRAPH:
		r = mps_drv.cuGraphDestroy ? mps_drv.cuGraphDestroy((CUgraph)o->real) : CUDA_SUCCESS;
		break;
	case MPS_H_EXEC:
		r = mps_drv.cuGraphExecDestroy ? mps_drv.cuGraphExecDestroy((CUgraphExec)o->real) : CUDA_SUCCESS;
		break;
	case MPS_H_POOL:
		r = mps__pool_release(c, o);
		break;
	case MPS_H_LINK:
		r = mps__link_release(o->real);
		break;
	case MPS_H_ARRAY:
		r = mps_drv.cuArrayDestroy ? mps_drv.cuArrayDestroy((CUarray)o->real) : CUDA_SUCCESS;
		break;
	case MPS_H_MIPMAP:
		r = mps_drv.cuMipmappedArrayDestroy ? mps_drv.cuMipmappedArrayDestroy((CUmipmappedArray)o->real) :
						      CUDA_SUCCESS;
		break;
	case MPS_H_TEXOBJ:
		r = mps_drv.cuTexObjectDestroy ? mps_drv.cuTexObjectDestroy((CUtexObject)(uintptr_t)o->real) :
						 CUDA_SUCCESS;
		break;
	case MPS_H_SURFOBJ:
		r = mps_drv.cuSurfObjectDestroy ? mps_drv.cuSurfObjectDestroy((CUsurfObject)(uintptr_t)o->real) :
						  CUDA_SUCCESS;
		break;
	case MPS_H_ALLOC:
		/* Every driver reference we hold; the memory goes with the last. */
		for (uint32_t i = 0; i <= o->extra && mps_drv.cuMemRelease; i++)
			r = mps_drv.cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)o->real);
		break;
	default:
		break;
	}
	if (r != CUDA_SUCCESS)
		mps_log_debug("client %d: freeing object %u: %s", (int)c->pid, o->handle, mps_driver_errname(r));
	uncharge(c, o);
}

struct owned {
	struct mps_client *c;
	uint32_t owner;
	uint32_t *h;
	size_t n, cap;
};

static void collect(void *obj, void *arg)
{
	struct mps_sobj *o = obj;
	struct owned *w = arg;

	if (o->owner != w->owner)
		return;
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 16;
		uint32_t *nh = realloc(w->h, ncap * sizeof(*nh));

		if (!nh)
			return;   /* the rest stays until the client's teardown */
		w->h = nh;
		w->cap = ncap;
	}
	w->h[w->n++] = o->handle;
}

void mps_obj_del(struct mps_client *c, uint32_t handle, bool destroy_it)
{
	struct owned w = { .c = c, .owner = handle };
	struct mps_sobj *o = NULL;
	struct mps_objkey *k;

	for (size_t t = 0; t < sizeof(generic_types) / sizeof(generic_types[0]) && !o; t++)
		o = mps_handle_get(&c->handles, handle, generic_types[t]);
	if (!o)
		return;
	/* Its own first: what it owns the driver frees with it. */
	for (size_t t = 0; t < sizeof(generic_types) / sizeof(generic_types[0]); t++)
		mps_handles_foreach(&c->handles, generic_types[t], collect, &w);
	for (size_t i = 0; i < w.n; i++)
		mps_obj_del(c, w.h[i], false);
	free(w.h);
	if (destroy_it)
		destroy(c, o);
	else
		uncharge(c, o);
	k = index_find(&c->objindex, o->type, o->real);
	if (k && k->handle == o->handle) {
		k->tomb = true;
		c->objindex.n--;
	}
	mps_handle_del(&c->handles, o->handle);
	free(o);
}

static void del_cb(void *obj, void *arg)
{
	struct mps_sobj *o = obj;

	/* Owned objects go with their owner. */
	if (!o->owner)
		mps_obj_del(arg, o->handle, true);
}

static void del_rest(void *obj, void *arg)
{
	mps_obj_del(arg, ((struct mps_sobj *)obj)->handle, true);
}

void mps_obj_release_all(struct mps_client *c)
{
	static const int order[] = { MPS_H_LINK,   MPS_H_EXEC,  MPS_H_GRAPH,  MPS_H_NODE,  MPS_H_POOL, MPS_H_ALLOC,
				     MPS_H_TEXOBJ, MPS_H_SURFOBJ, MPS_H_ARRAY, MPS_H_MIPMAP };

	for (size_t t = 0; t < sizeof(order) / sizeof(order[0]); t++)
		mps_handles_foreach(&c->handles, order[t], del_cb, c);
	for (size_t t = 0; t < sizeof(order) / sizeof(order[0]); t++)
		mps_handles_foreach(&c->handles, order[t], del_rest, c);
	mps_objindex_free(&c->objindex);
}
