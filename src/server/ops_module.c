// SPDX-License-Identifier: MIT
/*
 * Modules, libraries, kernels and functions. A client uploads an image (PTX,
 * cubin or fatbin) through the ring in pieces (MPS_OP_BLOB_APPEND) and then
 * loads it; the server keeps the image for as long as the module lives,
 * since the driver may read it again when it loads kernels lazily.
 *
 * Getting a function answers with its parameter layout — the offset and size
 * of every parameter, from cuFuncGetParamInfo / cuKernelGetParamInfo — so the
 * client can pack a launch's arguments into one buffer itself and launches
 * never need a round trip.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/jit.h"
#include "server/replay.h"
#include "server/server.h"

#define BLOB_MAX   (4ull << 30)    /* largest image a client may upload */
#define BLOB_FIRST (256u << 10)    /* first buffer; it doubles as pieces arrive */

static void drop_upload(struct mps_client *c)
{
	free(c->blob);
	c->blob = NULL;
	c->blob_len = c->blob_total = c->blob_cap = 0;
}

/* The buffer grows as pieces arrive, not to the size announced: a client
 * that announces 4 GiB and sends a few bytes holds a few bytes. */
static bool make_room(struct mps_client *c, size_t n)
{
	size_t want = c->blob_len + n, cap = c->blob_cap ? c->blob_cap : BLOB_FIRST;
	uint8_t *p;

	if (want <= c->blob_cap)
		return true;
	while (cap < want)
		cap *= 2;
	if (cap > c->blob_total)
		cap = c->blob_total;
	p = realloc(c->blob, cap);
	if (!p)
		return false;
	c->blob = p;
	c->blob_cap = cap;
	return true;
}

void mps__op_blob_append(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_blob *q = (const void *)m;
	size_t n = q->bytes;

	if (m->flags & MPS_BLOB_RESET) {
		drop_upload(c);
		if (q->total == 0 || q->total > BLOB_MAX) {
			mps__defer_error(c, CUDA_ERROR_INVALID_IMAGE, "module upload");
			return;
		}
		c->blob_total = (size_t)q->total;
		c->uploading = true;
	}
	if (!c->uploading)
		return;   /* the upload already failed; the load will say so */
	if (n > m->len - sizeof(*q) || n > c->blob_total - c->blob_len) {
		/* More than the message carries, or than announced: drop the
		 * upload, and the load that follows fails. */
		mps__defer_error(c, CUDA_ERROR_INVALID_IMAGE, "module upload");
		drop_upload(c);
		c->uploading = false;
		return;
	}
	if (n == 0)
		return;
	if (!make_room(c, n)) {
		mps__defer_error(c, CUDA_ERROR_OUT_OF_MEMORY, "module upload");
		drop_upload(c);
		c->uploading = false;
		return;
	}
	memcpy(c->blob + c->blob_len, (const uint8_t *)q + sizeof(*q), n);
	c->blob_len += n;
}

uint8_t *mps__upload_take(struct mps_client *c, uint64_t size)
{
	uint8_t *b = NULL;

	if (c->uploading && c->blob_len == c->blob_total && size == c->blob_total)
		b = realloc(c->blob, c->blob_len + 1);
	if (b) {
		b[c->blob_len] = 0;
		c->blob = NULL;
	}
	drop_upload(c);
	c->uploading = false;
	return b;
}

void mps__op_module_load(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_module_load *q = (const void *)m;
	struct mps_sctx *x = mps__msg_ctx(c, m);
	struct mps_smodule *mod = NULL;
	struct mps_jit *jit = NULL;
	CUresult r;

	if (!c->uploading || c->blob_len != c->blob_total || q->size != c->blob_total ||
	    (q->kind != MPS_MODULE && q->kind != MPS_LIBRARY) ||
	    /* The driver finds the image's end itself: it must lie within the upload. */
	    !mps_image_extent(c->blob, c->blob_len)) {
		r = CUDA_ERROR_INVALID_IMAGE;
		goto answer;
	}
	/* A library belongs to no context: it may be loaded without one. */
	if (!x && q->kind == MPS_MODULE) {
		r = CUDA_ERROR_INVALID_CONTEXT;
		goto answer;
	}
	r = CUDA_ERROR_OUT_OF_MEMORY;
	jit = calloc(1, sizeof(*jit));   /* no logs until the driver writes some */
	if (!jit)
		goto answer;
	if (mps_jit_init(jit, q->opts, q->nopts) < 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto answer;
	}
	mod = calloc(1, sizeof(*mod));
	if (!mod)
		goto answer;
	mod->kind = (int)q->kind;
	mod->device = x ? x->device : 0;
	mod->ctx = x ? x->handle : 0;
	r = mps__bind_device(c, mod->device);
	if (r == CUDA_SUCCESS) {
		if (q->kind == MPS_MODULE && mps_drv.cuModuleLoadDataEx)
			r = mps_drv.cuModuleLoadDataEx(&mod->mod, c->blob, jit->n, jit->opt, jit->val);
		else if (q->kind == MPS_MODULE)
			r = mps_drv.cuModuleLoadData(&mod->mod, c->blob);
		else
			r = mps_drv.cuLibraryLoadData(&mod->lib, c->blob, jit->opt, jit->val, jit->n, NULL, NULL, 0);
	}
	if (r != CUDA_SUCCESS)
		goto err_mod;
	mod->image = c->blob;
	c->blob = NULL;
	c->blob_len = c->blob_total = c->blob_cap = 0;
	c->uploading = false;
	mod->handle = mps_handle_new(&c->handles, MPS_H_MODULE, mod);
	if (!mod->handle) {
		if (mod->kind == MPS_MODULE)
			mps_drv.cuModuleUnload(mod->mod);
		else
			mps_drv.cuLibraryUnload(mod->lib);
		free(mod->image);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_mod;
	}
	mps__slot(c, m->slot)->val[0] = mod->handle;
	goto answer;

err_mod:
	free(mod);
answer:
	mps_jit_answer(c, m->slot, jit, r);
	free(jit);
}

static void module_free(struct mps_client *c, struct mps_smodule *mod)
{
	mps_replay_forget(c);   /* a kept chunk may name its functions */
	while (mod->funcs) {
		struct mps_sfunc *f = mod->funcs;

		mod->funcs = f->next;
		mps_handle_del(&c->handles, f->handle);
		free(f->param);
		free(f);
	}
	/* Its globals stop being the client's memory. */
	for (size_t i = c->mem.n; i-- > 0;) {
		if (c->mem.r[i].kind == MPS_MEM_GLOBAL && c->mem.r[i].ctx == mod->handle)
			mps_memacct_remove(&c->mem, c->mem.r[i].base, MPS_MEM_GLOBAL, NULL);
	}
	mps__bind_device(c, mod->device);
	if (mod->kind == MPS_MODULE)
		mps_drv.cuModuleUnload(mod->mod);
	else
		mps_drv.cuLibraryUnload(mod->lib);
	mps_handle_del(&c->handles, mod->handle);
	free(mod->image);
	free(mod);
}

void mps__op_module_unload(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_smodule *mod = mps__obj(c, q->handle, MPS_H_MODULE);

	if (!mod) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	module_free(c, mod);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

struct module_sweep {
	struct mps_client *c;
	uint32_t ctx;   /* 0: all */
};

static void module_free_cb(void *obj, void *arg)
{
	struct module_sweep *w = arg;
	struct mps_smodule *mod = obj;

	if (w->ctx && (mod->kind != MPS_MODULE || mod->ctx != w->ctx))
		return;
	module_free(w->c, mod);
}

void mps__modules_release_ctx(struct mps_client *c, uint32_t ctx)
{
	struct module_sweep w = { .c = c, .ctx = ctx };

	mps_handles_foreach(&c->handles, MPS_H_MODULE, module_free_cb, &w);
}

void mps__modules_release_all(struct mps_client *c)
{
	struct module_sweep w = { .c = c, .ctx = 0 };

	mps_handles_foreach(&c->handles, MPS_H_MODULE, module_free_cb, &w);
}

/* Fills in a function's parameter layout and the reply describing it. */
static CUresult describe(struct mps_client *c, struct mps_sfunc *f, int device, struct mps_slot *s)
{
	struct mps_func_info *info = (struct mps_func_info *)s->data;
	uint16_t *pp = (uint16_t *)(s->data + sizeof(*info));
	uint32_t n = 0, end = 0;
	int maxt = 0;
	CUresult r;

	for (;;) {
		size_t off = 0, size = 0;

		if (n >= MPS_FUNC_PARAMS_MAX)
			return CUDA_ERROR_NOT_SUPPORTED;
		if (f->is_kernel)
			r = mps_drv.cuKernelGetParamInfo((CUkernel)f->f, n, &off, &size);
		else
			r = mps_drv.cuFuncGetParamInfo(f->f, n, &off, &size);
		if (r != CUDA_SUCCESS)
			break;
		if (off + size > MPS_ARGS_MAX || size > 0xffff)
			return CUDA_ERROR_NOT_SUPPORTED;
		pp[2 * n] = (uint16_t)off;
		pp[2 * n + 1] = (uint16_t)size;
		if (off + size > end)
			end = (uint32_t)(off + size);
		n++;
	}
	if (f->is_kernel)
		r = mps_drv.cuKernelGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUkernel)f->f,
						 mps_srv.dev[device].dev);
	else
		r = mps_drv.cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f->f);
	if (r != CUDA_SUCCESS)
		maxt = 0;   /* unknown: the client leaves the check to the server */
	f->param = malloc((n ? n : 1) * 2 * sizeof(uint16_t));
	if (!f->param)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(f->param, pp, n * 2 * sizeof(uint16_t));
	f->nparams = n;
	f->arg_size = end;
	info->nparams = n;
	info->arg_size = end;
	info->max_threads = maxt;
	s->len = (uint32_t)(sizeof(*info) + n * 4);
	return CUDA_SUCCESS;
}

/* The name must lie inside the message, be non-empty, end in its NUL and
 * hold no other. */
static int name_ok(const struct mps_msg_get_symbol *q)
{
	uint32_t n = q->name_len;

	return n > 0 && n <= MPS_SYMBOL_MAX && q->hdr.len >= sizeof(*q) + n + 1 && q->name[n] == 0 &&
	       !memchr(q->name, 0, n);
}

void mps__op_get_function(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_get_symbol *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_smodule *mod = NULL;
	struct mps_sfunc *f, *parent = NULL;
	struct mps_sctx *x = mps__msg_ctx(c, m);
	int device;
	CUresult r;

	if (q->kind == MPS_FUNC_OF_KERNEL) {
		parent = mps__obj(c, q->parent, MPS_H_FUNC);
		if (!parent || !parent->is_kernel) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
			return;
		}
		if (!x) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
			return;
		}
		mod = parent->owner;
		device = x->device;
	} else {
		mod = mps__obj(c, q->parent, MPS_H_MODULE);
		if (!mod || (q->kind == MPS_FUNC_OF_MODULE && mod->kind != MPS_MODULE) ||
		    (q->kind == MPS_KERNEL_OF_LIBRARY && mod->kind != MPS_LIBRARY) ||
		    (q->kind != MPS_FUNC_OF_MODULE && q->kind != MPS_KERNEL_OF_LIBRARY)) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
			return;
		}
		if (!name_ok(q)) {
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
			return;
		}
		device = mod->kind == MPS_MODULE ? mod->device : (x ? x->device : 0);
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	r = mps__bind_device(c, device);
	if (r == CUDA_SUCCESS) {
		if (q->kind == MPS_FUNC_OF_MODULE) {
			r = mps_drv.cuModuleGetFunction(&f->f, mod->mod, q->name);
		} else if (q->kind == MPS_KERNEL_OF_LIBRARY) {
			CUkernel k;

			r = mps_drv.cuLibraryGetKernel(&k, mod->lib, q->name);
			f->f = (CUfunction)k;
			f->is_kernel = true;
		} else {
			r = mps_drv.cuKernelGetFunction(&f->f, (CUkernel)parent->f);
		}
	}
	if (r == CUDA_SUCCESS)
		r = describe(c, f, device, s);
	if (r == CUDA_SUCCESS) {
		f->handle = mps_handle_new(&c->handles, MPS_H_FUNC, f);
		if (!f->handle)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r != CUDA_SUCCESS) {
		free(f->param);
		free(f);
		mps__reply(c, m->slot, r);
		return;
	}
	f->owner = mod;
	f->device = device;
	f->name = parent ? parent->name : mps_fault_name(q->name);
	f->next = mod->funcs;
	mod->funcs = f;
	s->val[0] = f->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

/* The names of a module's functions from index q->first, each with its NUL,
 * as many as q->max_names asks and the slot holds; their count in val[1],
 * the module's function count in val[0]. A name too long for the slot ends
 * the list early (the client then fails with CUDA_ERROR_NOT_SUPPORTED). */
void mps__op_module_funcs(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_module_funcs *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_smodule *mod = mps__obj(c, q->module, MPS_H_MODULE);
	CUfunction *fns = NULL;
	unsigned int n = 0, names = 0;
	uint32_t len = 0;
	CUresult r;

	if (!mod || mod->kind != MPS_MODULE) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	if (!mps_drv.cuModuleGetFunctionCount || !mps_drv.cuModuleEnumerateFunctions || !mps_drv.cuFuncGetName) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	r = mps__bind_device(c, mod->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuModuleGetFunctionCount(&n, mod->mod);
	if (r == CUDA_SUCCESS && q->max_names && q->first < n) {
		fns = calloc(n, sizeof(*fns));
		r = fns ? mps_drv.cuModuleEnumerateFunctions(fns, n, mod->mod) : CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (unsigned int i = q->first; r == CUDA_SUCCESS && fns && i < n && names < q->max_names; i++) {
		const char *name = NULL;
		size_t l;

		r = mps_drv.cuFuncGetName(&name, fns[i]);
		if (r != CUDA_SUCCESS || !name)
			break;
		l = strlen(name) + 1;
		if (len + l > MPS_SLOT_DATA)
			break;
		memcpy(s->data + len, name, l);
		len += (uint32_t)l;
		names++;
	}
	free(fns);
	if (r == CUDA_SUCCESS) {
		s->val[0] = n;
		s->val[1] = names;
		s->len = len;
	}
	mps__reply(c, m->slot, r);
}

void mps__op_get_global(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_get_symbol *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_smodule *mod = mps__obj(c, q->parent, MPS_H_MODULE);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	CUdeviceptr p = 0;
	size_t size = 0;
	int device;
	CUresult r;

	if (!mod || (q->kind == MPS_GLOBAL_OF_MODULE && mod->kind != MPS_MODULE) ||
	    ((q->kind == MPS_GLOBAL_OF_LIBRARY || q->kind == MPS_MANAGED_OF_LIBRARY) && mod->kind != MPS_LIBRARY) ||
	    (q->kind != MPS_GLOBAL_OF_MODULE && q->kind != MPS_GLOBAL_OF_LIBRARY && q->kind != MPS_MANAGED_OF_LIBRARY)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	if (!name_ok(q)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	device = mod->kind == MPS_MODULE ? mod->device : (x ? x->device : 0);
	s->val[2] = 0;
	r = mps__bind_device(c, device);
	if (r == CUDA_SUCCESS) {
		if (mod->kind == MPS_MODULE)
			r = mps_drv.cuModuleGetGlobal(&p, &size, mod->mod, q->name);
		else if (q->kind == MPS_GLOBAL_OF_LIBRARY)
			r = mps_drv.cuLibraryGetGlobal(&p, &size, mod->lib, q->name);
		else if (mps_drv.cuLibraryGetManaged)
			r = mps_drv.cuLibraryGetManaged(&p, &size, mod->lib, q->name);
		else
			r = CUDA_ERROR_NOT_SUPPORTED;
	}
	/* A __managed__ variable: the client keeps a copy of it at the same
	 * address for its CPU (client/mvar.c). */
	if (r == CUDA_SUCCESS) {
		unsigned int managed = q->kind == MPS_MANAGED_OF_LIBRARY;

		if (!managed && mps_drv.cuPointerGetAttribute &&
		    mps_drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) != CUDA_SUCCESS)
			managed = 0;
		s->val[2] = managed;
		/* Its value now, which the client's CPU may read before any
		 * context is current there (cudart asks while it starts):
		 * managed memory is this process's CPU's to read. */
		s->len = 0;
		if (managed && size <= MPS_SLOT_DATA) {
			memcpy(s->data, (const void *)(uintptr_t)p, size);
			s->len = (uint32_t)size;
		}
	}
	/* The global becomes memory the client may copy to and from. */
	if (r == CUDA_SUCCESS && size && !mps_memacct_find(&c->mem, p) &&
	    mps_memacct_add(&c->mem, p, size, MPS_MEM_GLOBAL, device, mod->handle) < 0)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	s->val[0] = p;
	s->val[1] = size;
	mps__reply(c, m->slot, r);
}

/* One attribute of a function or kernel, as the driver answers it. */
static CUresult attr_get(struct mps_sfunc *f, int device, int attr, int *value)
{
	if (f->is_kernel)
		return mps_drv.cuKernelGetAttribute(value, (CUfunction_attribute)attr, (CUkernel)f->f,
						   mps_srv.dev[device].dev);
	return mps_drv.cuFuncGetAttribute(value, (CUfunction_attribute)attr, f->f);
}

/* Every attribute at once, each with its own result: the client keeps them
 * and answers later queries itself. */
static CUresult attr_get_all(struct mps_sfunc *f, int device, struct mps_slot *s)
{
	struct mps_fattr_all *a = (void *)s->data;

	for (int i = 0; i < MPS_FATTR_COUNT; i++) {
		int v = 0;

		a->result[i] = i < CU_FUNC_ATTRIBUTE_MAX ? (int32_t)attr_get(f, device, i, &v) :
							    CUDA_ERROR_INVALID_VALUE;
		a->value[i] = v;
	}
	s->len = sizeof(*a);
	return CUDA_SUCCESS;
}

/* Gets answer in the reply slot; a set or cache configuration sent without
 * one (the client checked it the driver's way first) reports a failure at
 * the next synchronising call. */
void mps__op_func_attr(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_func_attr *q = (const void *)m;
	struct mps_sfunc *f = mps__obj(c, q->func, MPS_H_FUNC);
	bool get = q->kind == MPS_FUNC_GET || q->kind == MPS_KERNEL_GET || q->kind == MPS_FUNC_GET_ALL ||
		   q->kind == MPS_KERNEL_GET_ALL;
	int value = 0, device = -1;
	CUresult r = CUDA_SUCCESS;

	if (get && m->slot == MPS_NO_SLOT) {
		mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "a function attribute query without a reply");
		return;
	}
	if (!f)
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r == CUDA_SUCCESS) {
		device = f->is_kernel ? mps__client_device(c, q->device) : f->device;
		if (device < 0 || device >= mps_srv.ndev)
			r = CUDA_ERROR_INVALID_DEVICE;
	}
	if (r == CUDA_SUCCESS)
		r = mps__bind_device(c, device);
	if (r == CUDA_SUCCESS) {
		switch (q->kind) {
		case MPS_FUNC_GET:
		case MPS_KERNEL_GET:
			r = attr_get(f, device, q->attr, &value);
			break;
		case MPS_FUNC_GET_ALL:
		case MPS_KERNEL_GET_ALL:
			r = attr_get_all(f, device, mps__slot(c, m->slot));
			break;
		case MPS_FUNC_SET:
		case MPS_KERNEL_SET:
			if (f->is_kernel)
				r = mps_drv.cuKernelSetAttribute((CUfunction_attribute)q->attr, q->value, (CUkernel)f->f,
								 mps_srv.dev[device].dev);
			else
				r = mps_drv.cuFuncSetAttribute(f->f, (CUfunction_attribute)q->attr, q->value);
			break;
		case MPS_FUNC_CACHE_CONFIG:
		case MPS_KERNEL_CACHE_CONFIG:
			/* A kernel's preference is per device: the driver refuses a
			 * CUkernel where a CUfunction is wanted. */
			if (!f->is_kernel)
				r = mps_drv.cuFuncSetCacheConfig(f->f, (CUfunc_cache)q->value);
			else if (mps_drv.cuKernelSetCacheConfig)
				r = mps_drv.cuKernelSetCacheConfig((CUkernel)f->f, (CUfunc_cache)q->value,
								   mps_srv.dev[device].dev);
			else
				r = CUDA_ERROR_NOT_SUPPORTED;
			break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	if (m->slot == MPS_NO_SLOT) {
		if (r != CUDA_SUCCESS)
			mps__defer_error(c, r, q->kind == MPS_FUNC_SET || q->kind == MPS_KERNEL_SET ?
						       "cuFuncSetAttribute" : "cuFuncSetCacheConfig");
		return;
	}
	mps__slot(c, m->slot)->val[0] = (uint64_t)(int64_t)value;
	mps__reply(c, m->slot, r);
}

void mps__op_occupancy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_occupancy *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sfunc *f = mps__obj(c, q->func, MPS_H_FUNC);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	int n = 0;
	size_t bytes = 0;
	CUresult r;

	if (!f) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	r = mps__bind_device(c, f->is_kernel ? (x ? x->device : 0) : f->device);
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	switch (q->kind) {
	case MPS_OCC_BLOCKS_PER_SM:
		r = mps_drv.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f->f, q->block,
										   (size_t)q->dyn_smem, q->flags);
		s->val[0] = (uint64_t)(int64_t)n;
		break;
	case MPS_OCC_DYN_SMEM:
		r = mps_drv.cuOccupancyAvailableDynamicSMemPerBlock(&bytes, f->f, q->num_blocks, q->block);
		s->val[0] = bytes;
		break;
	case MPS_OCC_CLUSTERS: {
		CUlaunchAttribute attr;
		CUlaunchConfig cfg;

		memset(&cfg, 0, sizeof(cfg));
		memset(&attr, 0, sizeof(attr));
		cfg.gridDimX = q->grid[0];
		cfg.gridDimY = q->grid[1];
		cfg.gridDimZ = q->grid[2];
		cfg.blockDimX = q->blockdim[0];
		cfg.blockDimY = q->blockdim[1];
		cfg.blockDimZ = q->blockdim[2];
		cfg.sharedMemBytes = (unsigned int)q->dyn_smem;
		if (q->cluster[0]) {
			attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
			attr.value.clusterDim.x = q->cluster[0];
			attr.value.clusterDim.y = q->cluster[1] ? q->cluster[1] : 1;
			attr.value.clusterDim.z = q->cluster[2] ? q->cluster[2] : 1;
			cfg.attrs = &attr;
			cfg.numAttrs = 1;
		}
		r = mps_drv.cuOccupancyMaxActiveClusters(&n, f->f, &cfg);
		s->val[0] = (uint64_t)(int64_t)n;
		break;
	}
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	mps__reply(c, m->slot, r);
}
