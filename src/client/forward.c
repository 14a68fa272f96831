// SPDX-License-Identifier: MIT
/*
 * See forward.h. The generic objects live in one hash table of chains,
 * keyed by the server's handle (unique among live objects of every kind),
 * under a mutex: lookups are short and only the forwarded functions take it.
 */
#include <stdlib.h>

#include "client/client.h"
#include "client/forward.h"

#define BUCKETS 4096u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mps_gobj *bucket[BUCKETS];

static uint32_t slot_of(uint32_t handle)
{
	return (handle * 2654435761u) >> 20 & (BUCKETS - 1);
}

CUresult mps__fwd_ctx(uint32_t *ctx, bool need)
{
	struct mps_ctx *cur = mps__ctx_cur();

	*ctx = 0;
	if (!cur)
		return need ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
	return mps__ctx_handle(cur, ctx);
}

CUresult mps__fwd_stream(CUstream s, bool per_thread, uint64_t *h, uint32_t *ctx)
{
	uint32_t st;
	CUresult r = mps__stream_resolve(s, per_thread, &st, ctx);

	*h = st;
	return r;
}

CUresult mps__fwd_device(CUdevice d, uint64_t *h)
{
	if (d < 0 || d >= mps_conn.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*h = (uint64_t)d;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_h_ctx(CUcontext x, uint64_t *h)
{
	struct mps_ctx *ctx;
	uint32_t ch = 0;
	CUresult r;

	*h = 0;
	if (!x)
		return mps__fwd_ctx(&ch, false) == CUDA_SUCCESS ? (*h = ch, CUDA_SUCCESS) : CUDA_ERROR_INVALID_CONTEXT;
	ctx = mps__obj(x, MPS_MAGIC_CTX);
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__ctx_handle(ctx, &ch);
	*h = ch;
	return r;
}

CUresult mps__fwd_h_event(CUevent e, uint64_t *h)
{
	struct mps_event *ev = mps__obj(e, MPS_MAGIC_EVENT);

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = ev->handle;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_h_func(CUfunction f, uint64_t *h)
{
	struct mps_func *fn = mps__func(f);

	if (!fn)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = fn->handle;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_h_module(CUmodule m, uint64_t *h)
{
	struct mps_module *mod = mps__obj(m, MPS_MAGIC_MODULE);

	if (!mod || mod->kind != MPS_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = mod->handle;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_h_library(CUlibrary l, uint64_t *h)
{
	struct mps_module *mod = mps__obj(l, MPS_MAGIC_MODULE);

	if (!mod || mod->kind != MPS_LIBRARY)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = mod->handle;
	return CUDA_SUCCESS;
}

/* A generic object argument: NULL is an invalid value, as the driver has it;
 * anything that is not one of ours of that kind an invalid handle. */
static CUresult gobj_arg(const void *p, int type, uint64_t *h)
{
	struct mps_gobj *o = mps__obj(p, MPS_MAGIC_GOBJ);

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!o || o->type != type)
		return CUDA_ERROR_INVALID_HANDLE;
	*h = o->handle;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_h_graph(CUgraph g, uint64_t *h) { return gobj_arg(g, MPS_H_GRAPH, h); }
CUresult mps__fwd_h_node(CUgraphNode n, uint64_t *h) { return gobj_arg(n, MPS_H_NODE, h); }
CUresult mps__fwd_h_exec(CUgraphExec x, uint64_t *h) { return gobj_arg(x, MPS_H_EXEC, h); }
CUresult mps__fwd_h_pool(CUmemoryPool p, uint64_t *h) { return gobj_arg(p, MPS_H_POOL, h); }
CUresult mps__fwd_h_userobj(CUuserObject u, uint64_t *h) { return gobj_arg(u, MPS_H_USEROBJ, h); }
CUresult mps__fwd_h_array(CUarray a, uint64_t *h) { return gobj_arg(a, MPS_H_ARRAY, h); }
CUresult mps__fwd_h_mipmap(CUmipmappedArray m, uint64_t *h) { return gobj_arg(m, MPS_H_MIPMAP, h); }

CUresult mps__fwd_h_alloc(CUmemGenericAllocationHandle a, uint64_t *h)
{
	/* The program holds the server's handle itself; the server checks it. */
	*h = a;
	return CUDA_SUCCESS;
}

/* Caller holds the lock. */
static struct mps_gobj *find(uint32_t handle)
{
	for (struct mps_gobj *o = bucket[slot_of(handle)]; o; o = o->next)
		if (o->handle == handle)
			return o;
	return NULL;
}

struct mps_gobj *mps__fwd_find(int type, uint32_t handle)
{
	struct mps_gobj *o;

	pthread_mutex_lock(&lock);
	o = find(handle);
	if (o && o->type != type)
		o = NULL;
	pthread_mutex_unlock(&lock);
	return o;
}

CUresult mps__fwd_obj(int type, uint32_t handle, uint32_t owner, void **out)
{
	struct mps_gobj *o;

	pthread_mutex_lock(&lock);
	o = find(handle);
	if (o && o->type != type) {
		/* The server reused the number: what we kept is stale. */
		pthread_mutex_unlock(&lock);
		mps__fwd_drop(o->type, handle);
		pthread_mutex_lock(&lock);
		o = find(handle);
	}
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		struct mps_gobj *parent = owner ? find(owner) : NULL;

		o->magic = MPS_MAGIC_GOBJ;
		o->handle = handle;
		o->owner = parent ? owner : 0;
		o->type = type;
		o->next = bucket[slot_of(handle)];
		bucket[slot_of(handle)] = o;
		if (parent) {
			o->sibling = parent->child;
			parent->child = o;
		}
	}
	pthread_mutex_unlock(&lock);
	*out = o;
	return CUDA_SUCCESS;
}

CUresult mps__fwd_event_of(uint32_t handle, CUevent *out)
{
	struct mps_event *ev = mps__event_by_handle(handle);

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (CUevent)ev;
	return CUDA_SUCCESS;
}

/* Takes o out of its hash chain. Caller holds the lock. */
static void unhash(struct mps_gobj *o)
{
	for (struct mps_gobj **pp = &bucket[slot_of(o->handle)]; *pp; pp = &(*pp)->next) {
		if (*pp == o) {
			*pp = o->next;
			return;
		}
	}
}

/* Unlinks o and everything it owns onto *dead. Caller holds the lock. */
static void unlink_tree(struct mps_gobj *o, struct mps_gobj **dead)
{
	while (o->child) {
		struct mps_gobj *ch = o->child;

		o->child = ch->sibling;
		unlink_tree(ch, dead);
	}
	unhash(o);
	o->next = *dead;
	*dead = o;
}

/* Takes o off its owner's list of children. Caller holds the lock. */
static void unparent(struct mps_gobj *o)
{
	struct mps_gobj *p = o->owner ? find(o->owner) : NULL;

	if (!p)
		return;
	for (struct mps_gobj **pp = &p->child; *pp; pp = &(*pp)->sibling) {
		if (*pp == o) {
			*pp = o->sibling;
			return;
		}
	}
}

void mps__fwd_drop(int type, uint32_t handle)
{
	struct mps_gobj *dead = NULL;

	struct mps_gobj *o;

	(void)type;
	pthread_mutex_lock(&lock);
	o = find(handle);
	if (o) {
		unparent(o);
		unlink_tree(o, &dead);
	}
	pthread_mutex_unlock(&lock);
	while (dead) {
		struct mps_gobj *d = dead;

		dead = d->next;
		d->magic = MPS_MAGIC_DEAD;
		free(d->data);
		free(d);
	}
}
