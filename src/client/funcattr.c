// SPDX-License-Identifier: MIT
/*
 * Function and kernel attributes, answered in the client. Frameworks ask
 * them per launch (cudart asks cuKernelGetAttribute before launching a
 * kernel; attention kernels set their dynamic shared memory every step),
 * where the driver answers in a tenth of a microsecond: a round trip to the
 * server for each would cost more than the launch.
 *
 * The first query of a function (or of a kernel on a device) fetches every
 * attribute at once, each with the driver's own result, and keeps them with
 * the function. Nothing else can change them: a function is this client's
 * alone in the server, and every set goes through here. A set that leaves
 * the value as it is costs nothing; one that changes the dynamic shared
 * memory or the carveout is checked here as the driver checks it and then
 * sent without waiting (the server reports a failure at the next
 * synchronising call, as for a launch); any other set, and a value the
 * check refuses, waits for the driver's answer. A kernel and the functions
 * got from it in contexts share their attributes in the driver, so a set
 * through one forgets what was kept for the others, which ask again.
 *
 * Occupancy answers (blocks per SM, dynamic shared memory per block), which
 * libraries ask before launches (cuBLAS, CuPy's reductions, PyTorch), are
 * functions of the attributes and the device: the last few of each
 * function are kept, and forgotten with its attributes.
 *
 * What is kept is guarded by the module's lock; the driver's answers are
 * copied out under it.
 */
#include <stdlib.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"
#include "client/exports/exports.h"

/* What is kept of one function, or of one kernel on one device. */
struct mps_fattrs {
	struct mps_fattrs *next;
	int device;       /* as sent: the kernel's device, 0 for a function */
	int32_t value[MPS_FATTR_COUNT];
	int32_t result[MPS_FATTR_COUNT];
};

/* Occupancy answers (blocks per SM, dynamic shared memory per block) of
 * one function, the last OCC_KEPT asked: a function of its attributes and
 * its device only, forgotten with them. */
#define OCC_KEPT 16

struct mps_occ {
	unsigned int next;
	unsigned int n;
	struct {
		int device;
		uint32_t kind, flags;
		int32_t block, nblocks;
		uint64_t smem, value;
	} e[OCC_KEPT];
};

/* Caller holds f->mod->lock. */
static struct mps_fattrs *kept(struct mps_func *f, int device)
{
	for (struct mps_fattrs *a = f->attrs; a; a = a->next)
		if (a->device == device)
			return a;
	return NULL;
}

void mps__fattr_drop(struct mps_func *f)
{
	while (f->attrs) {
		struct mps_fattrs *a = f->attrs;

		f->attrs = a->next;
		free(a);
	}
	free(f->occ);
	f->occ = NULL;
}

bool mps__occ_find(struct mps_func *f, int device, const struct mps_msg_occupancy *q, uint64_t *value)
{
	bool found = false;

	pthread_mutex_lock(&f->mod->lock);
	for (unsigned int i = 0; f->occ && i < f->occ->n && !found; i++) {
		if (f->occ->e[i].device == device && f->occ->e[i].kind == q->kind && f->occ->e[i].flags == q->flags &&
		    f->occ->e[i].block == q->block && f->occ->e[i].nblocks == q->num_blocks &&
		    f->occ->e[i].smem == q->dyn_smem) {
			*value = f->occ->e[i].value;
			found = true;
		}
	}
	pthread_mutex_unlock(&f->mod->lock);
	return found;
}

void mps__occ_keep(struct mps_func *f, int device, const struct mps_msg_occupancy *q, uint64_t value)
{
	unsigned int i;

	pthread_mutex_lock(&f->mod->lock);
	if (!f->occ)
		f->occ = calloc(1, sizeof(*f->occ));
	if (f->occ) {
		i = f->occ->next;
		f->occ->next = (i + 1) % OCC_KEPT;
		if (f->occ->n < OCC_KEPT)
			f->occ->n++;
		f->occ->e[i].device = device;
		f->occ->e[i].kind = q->kind;
		f->occ->e[i].flags = q->flags;
		f->occ->e[i].block = q->block;
		f->occ->e[i].nblocks = q->num_blocks;
		f->occ->e[i].smem = q->dyn_smem;
		f->occ->e[i].value = value;
	}
	pthread_mutex_unlock(&f->mod->lock);
}

/* Forgets what the functions sharing f's attributes keep (a kernel and
 * the functions got from it), and what f keeps but for device `keep`
 * (-1: all of it). Caller holds f->mod->lock. */
static void forget_family(struct mps_func *f, int keep)
{
	struct mps_func *k = f->is_kernel ? f : NULL;
	struct mps_fattrs **pp = &f->attrs;

	for (struct mps_func *m = f->mod->funcs; m && !k; m = m->next)
		for (struct mps_func *g = m->per_ctx; g && !k; g = g->per_ctx)
			if (g == f)
				k = m;
	free(f->occ);
	f->occ = NULL;
	f->attrs_gen++;
	while (*pp) {
		struct mps_fattrs *a = *pp;

		if (a->device == keep) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		free(a);
	}
	if (!k)
		return;
	if (k != f) {
		mps__fattr_drop(k);
		k->attrs_gen++;
	}
	for (struct mps_func *g = k->per_ctx; g; g = g->per_ctx) {
		if (g != f) {
			mps__fattr_drop(g);
			g->attrs_gen++;
		}
	}
}

static CUresult attr_call(struct mps_func *f, int kind, int attr, int value, int device, int *out, bool wait)
{
	struct mps_msg_func_attr q = { .kind = (uint32_t)kind, .attr = attr, .value = value, .device = device };
	struct mps_call call;
	uint32_t h = 0;
	CUresult r;

	q.func = f->handle;
	mps__cur_handle(&h);
	if (!wait)
		return mps__post(MPS_OP_FUNC_ATTR, h, &q.hdr, sizeof(q), NULL, 0);
	r = mps__call(MPS_OP_FUNC_ATTR, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && out)
		*out = (int)(int64_t)call.s->val[0];
	mps__call_end(&call);
	return r;
}

/* Fetches every attribute into *got; keeps them unless an answer was a
 * failure of the moment rather than of the attribute (a context error). */
static CUresult fetch(struct mps_func *f, int device, struct mps_fattrs *got)
{
	struct mps_msg_func_attr q = { .device = device };
	struct mps_fattrs *a;
	struct mps_call call;
	bool keep = true;
	uint32_t h = 0, gen;
	CUresult r;

	q.kind = f->is_kernel && device >= 0 ? MPS_KERNEL_GET_ALL : MPS_FUNC_GET_ALL;
	q.func = f->handle;
	pthread_mutex_lock(&f->mod->lock);
	gen = f->attrs_gen;   /* a set meanwhile makes these answers old */
	pthread_mutex_unlock(&f->mod->lock);
	mps__cur_handle(&h);
	r = mps__call(MPS_OP_FUNC_ATTR, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && call.s->len != sizeof(struct mps_fattr_all))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		const struct mps_fattr_all *all = (const void *)call.s->data;

		memcpy(got->value, all->value, sizeof(got->value));
		memcpy(got->result, all->result, sizeof(got->result));
	}
	mps__call_end(&call);
	if (r != CUDA_SUCCESS)
		return r;
	got->device = device;
	for (int i = 0; i < MPS_FATTR_COUNT; i++)
		keep &= got->result[i] == CUDA_SUCCESS || got->result[i] == CUDA_ERROR_INVALID_VALUE ||
			got->result[i] == CUDA_ERROR_NOT_SUPPORTED;
	if (!keep || !(a = malloc(sizeof(*a))))
		return CUDA_SUCCESS;
	*a = *got;
	pthread_mutex_lock(&f->mod->lock);
	if (kept(f, device) || f->attrs_gen != gen) {
		free(a);   /* another thread was first, or a set came since */
	} else {
		a->next = f->attrs;
		f->attrs = a;
	}
	pthread_mutex_unlock(&f->mod->lock);
	return CUDA_SUCCESS;
}

/* A kernel's device must be one the program sees; a function's is its own. */
static bool device_ok(struct mps_func *f, int device)
{
	return f->is_kernel ? device >= 0 && device < mps__device_count() : device == 0;
}

/* The attributes of f on device: what is kept, else fetched. Of what is
 * kept, only attribute `attr`'s value and result are copied out (a get
 * before every launch needs no more), or all of them with attr -1. */
static CUresult view(struct mps_func *f, int device, int attr, struct mps_fattrs *out)
{
	struct mps_fattrs *a;

	pthread_mutex_lock(&f->mod->lock);
	a = kept(f, device);
	if (a && attr < 0) {
		*out = *a;
	} else if (a) {
		out->value[attr] = a->value[attr];
		out->result[attr] = a->result[attr];
	}
	pthread_mutex_unlock(&f->mod->lock);
	return a ? CUDA_SUCCESS : fetch(f, device, out);
}

static CUresult get(struct mps_func *f, int kind, int attr, int device, int *out)
{
	struct mps_fattrs a;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (attr < 0 || attr >= MPS_FATTR_COUNT || !device_ok(f, device))
		return attr_call(f, kind, attr, 0, device, out, true);   /* the driver's answer, whatever it is */
	r = view(f, device, attr, &a);
	if (r != CUDA_SUCCESS)
		return r;
	if (a.result[attr] == CUDA_SUCCESS)
		*out = a.value[attr];
	return (CUresult)a.result[attr];
}

/* The device whose limits a function's shared memory is checked against. */
static int device_of(struct mps_func *f, int device)
{
	if (f->is_kernel)
		return device;
	if (f->ctx)
		return f->ctx->device;
	return f->mod->ctx ? f->mod->ctx->device : -1;
}

/* Would the driver take this change? Only for the values frameworks set
 * as they run, whose rules are the driver's documented ones; for anything
 * else the driver is asked. */
static bool checked(struct mps_func *f, const struct mps_fattrs *a, int attr, int value, int device)
{
	int optin = 0, dev = device_of(f, device);

	switch (attr) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		/* At most the opt-in maximum per block less the static shared memory. */
		if (dev < 0 || a->result[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] != CUDA_SUCCESS ||
		    cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) != CUDA_SUCCESS)
			return false;
		return value >= 0 && value <= optin - a->value[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		return value >= -1 && value <= 100;   /* a percentage, or -1 for the default */
	default:
		return false;
	}
}

static CUresult set(struct mps_func *f, int kind, int attr, int value, int device)
{
	struct mps_fattrs a, *k;
	bool post = false;
	CUresult r;

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (attr >= 0 && attr < MPS_FATTR_COUNT && device_ok(f, device) && view(f, device, -1, &a) == CUDA_SUCCESS &&
	    a.result[attr] == CUDA_SUCCESS && checked(f, &a, attr, value, device)) {
		if (a.value[attr] == value)
			return CUDA_SUCCESS;   /* as it is: nothing to do */
		post = true;
	}
	r = attr_call(f, kind, attr, value, device, NULL, !post);
	pthread_mutex_lock(&f->mod->lock);
	if (r == CUDA_SUCCESS && post && (k = kept(f, device))) {
		k->value[attr] = value;   /* this one knows; the others ask again */
		forget_family(f, device);
	} else {
		forget_family(f, -1);
	}
	pthread_mutex_unlock(&f->mod->lock);
	return r;
}

/* A cache preference the driver takes is one of its four; others it judges. */
static CUresult cache_config(struct mps_func *f, int kind, CUfunc_cache c, int device)
{
	bool known = c >= CU_FUNC_CACHE_PREFER_NONE && c <= CU_FUNC_CACHE_PREFER_EQUAL;

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	return attr_call(f, kind, 0, c, device, NULL, !(known && device_ok(f, device)));
}

static CUresult func_get_attribute(int *v, CUfunction_attribute a, CUfunction hf)
{
	return get(mps__func(hf), MPS_FUNC_GET, a, 0, v);
}

static CUresult func_set_attribute(CUfunction hf, CUfunction_attribute a, int v)
{
	return set(mps__func(hf), MPS_FUNC_SET, a, v, 0);
}

static CUresult func_set_cache_config(CUfunction hf, CUfunc_cache c)
{
	return cache_config(mps__func(hf), MPS_FUNC_CACHE_CONFIG, c, 0);
}

static CUresult kernel_get_attribute(int *v, CUfunction_attribute a, CUkernel k, CUdevice dev)
{
	return get(mps__func(k), MPS_KERNEL_GET, a, dev, v);
}

static CUresult kernel_set_attribute(CUfunction_attribute a, int v, CUkernel k, CUdevice dev)
{
	return set(mps__func(k), MPS_KERNEL_SET, a, v, dev);
}

static CUresult kernel_set_cache_config(CUkernel k, CUfunc_cache c, CUdevice dev)
{
	return cache_config(mps__func(k), MPS_KERNEL_CACHE_CONFIG, c, dev);
}

const struct mps_impl mps__funcattr_api[] = {
	MPS_IMPL(cuFuncGetAttribute, func_get_attribute),
	MPS_IMPL(cuFuncSetAttribute, func_set_attribute),
	MPS_IMPL(cuFuncSetCacheConfig, func_set_cache_config),
	MPS_IMPL(cuKernelGetAttribute, kernel_get_attribute),
	MPS_IMPL(cuKernelSetAttribute, kernel_set_attribute),
	MPS_IMPL(cuKernelSetCacheConfig, kernel_set_cache_config),
	MPS_IMPL_END
};
