// SPDX-License-Identifier: MIT
/*
 * Modules: PTX loaded into a context. Loading parses the image (ptx.c),
 * gives each kernel entry a CUfunction (with its C twin, if it has one) and
 * each module-scope variable zeroed device memory of its own, per loaded
 * module, so two loads of one image do not share globals.
 *
 * The stand-in cannot run machine code: an ELF cubin is refused with
 * CUDA_ERROR_INVALID_IMAGE, as is anything else that is not PTX text. A
 * fatbin (what cudart registers) is taken for the PTX it carries, when that
 * is not compressed (nvcc -Xfatbin -compress=false), so that programs built
 * with nvcc and cudart run on the stand-in too.
 *
 * A module is referenced by its handle and by each queued launch of one of
 * its kernels (the twin of bump_global reaches the module's g_counter when it
 * runs), so cuModuleUnload with launches in flight is safe: the handles go
 * at once, the memory when the last launch completes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

void mps__fattrs_default(struct si_fattrs *a)
{
	memset(a, 0, sizeof(*a));
	a->max_dyn_smem = SI_SMEM_DEFAULT;
	a->carveout = -1;
	a->cache_config = CU_FUNC_CACHE_PREFER_NONE;
}

bool mps__image_is_binary(const void *image)
{
	const unsigned char *b = image;

	/* Byte by byte, so that a short text image is never read past its end. */
	if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
		return true;    /* cubin */
	if (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba)
		return true;    /* fatbin */
	if (b[0] == 0xb1 && b[1] == 0x43 && b[2] == 0x62 && b[3] == 0x46)
		return true;    /* fatbin wrapper */
	return false;
}

/* A fatbin: a 16-byte header (magic, version, header size, size of what
 * follows), then entries, each a header (kind: 1 PTX, 2 ELF; its own size;
 * the payload's size; flags, 0x8000 when the payload is compressed) and its
 * payload. The first uncompressed PTX payload, copied with a NUL, or NULL. */
static char *fatbin_ptx(const unsigned char *p)
{
	uint16_t header_size, kind;
	uint32_t entry_header;
	uint64_t fat_size, size, flags, off;

	memcpy(&header_size, p + 6, 2);
	memcpy(&fat_size, p + 8, 8);
	for (off = header_size; off + 0x38 <= (uint64_t)header_size + fat_size; off += entry_header + size) {
		const unsigned char *e = p + off;
		char *text;

		memcpy(&kind, e, 2);
		memcpy(&entry_header, e + 4, 4);
		memcpy(&size, e + 8, 8);
		memcpy(&flags, e + 0x28, 8);
		if (entry_header < 0x38 || off + entry_header + size > (uint64_t)header_size + fat_size)
			return NULL;
		if (kind != 1 || (flags & 0x8000))
			continue;
		text = malloc(size + 1);
		if (!text)
			return NULL;
		memcpy(text, e + entry_header, size);
		text[size] = 0;
		return text;
	}
	return NULL;
}

char *mps__image_text(const void *image)
{
	const unsigned char *b = image;

	if (b[0] == 0xb1 && b[1] == 0x43 && b[2] == 0x62 && b[3] == 0x46) {
		const void *data;

		/* The wrapper: magic, version, then a pointer to the fatbin. */
		memcpy(&data, b + 8, sizeof(data));
		if (!data)
			return NULL;
		b = data;
	}
	if (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba)
		return fatbin_ptx(b);
	if (mps__image_is_binary(b))
		return NULL;
	return strdup((const char *)b);
}

CUresult mps__image_error(int err)
{
	switch (err) {
	case -ENOEXEC: return CUDA_ERROR_INVALID_IMAGE;
	case -EBADMSG: return CUDA_ERROR_INVALID_PTX;
	default: return CUDA_ERROR_OUT_OF_MEMORY;
	}
}

static void module_free(struct si_module *m)
{
	for (unsigned i = 0; m->funcs && i < m->img.nentries; i++)
		if (m->funcs[i].handle)
			mps__handle_remove(m->funcs[i].handle);
	for (unsigned i = 0; m->globals && i < m->img.nglobals; i++)
		if (m->globals[i])
			mps__range_remove(m->globals[i]);
	free(m->funcs);
	free(m->globals);
	mps__ptx_release(&m->img);
	free(m);
}

CUresult mps__module_load(struct si_context *ctx, const char *text, struct si_library *lib,
			  struct si_module **out)
{
	struct si_module *m;
	CUresult rc;
	int err;

	if (mps__image_is_binary(text))
		return CUDA_ERROR_INVALID_IMAGE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = mps__ptx_parse(text, &m->img);
	if (err) {
		free(m);
		return mps__image_error(err);
	}
	m->ctx = ctx;
	m->lib = lib;
	m->refs = 1;
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	m->funcs = calloc(m->img.nentries + 1, sizeof(*m->funcs));
	m->globals = calloc(m->img.nglobals + 1, sizeof(*m->globals));
	if (!m->funcs || !m->globals)
		goto out_free;
	for (unsigned i = 0; i < m->img.nglobals; i++) {
		rc = mps__range_alloc(ctx, m->img.globals[i].size, SI_RANGE_GLOBAL, &m->globals[i]);
		if (rc == CUDA_SUCCESS)
			m->globals[i]->managed = m->img.globals[i].managed;
		if (rc != CUDA_SUCCESS)
			goto out_free;
	}
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < m->img.nentries; i++) {
		struct si_function *f = &m->funcs[i];

		f->mod = m;
		f->entry = &m->img.entries[i];
		f->twin = mps__twin_find(f->entry);
		mps__fattrs_default(&f->own);
		/* A library's kernel keeps its attributes per device, shared
		 * by the function it has in that device's context. */
		f->attrs = lib ? &lib->kernels[i].attrs[ctx->device] : &f->own;
		f->handle = mps__handle_add(SI_H_FUNCTION, f);
		if (!f->handle)
			goto out_free;
	}
	m->handle = mps__handle_add(SI_H_MODULE, m);
	if (!m->handle)
		goto out_free;
	si_list_add(&ctx->modules, &m->link);
	*out = m;
	return CUDA_SUCCESS;

out_free:
	module_free(m);
	return rc;
}

void mps__module_unload(struct si_module *m)
{
	if (!m->handle)
		return;
	mps__handle_remove(m->handle);
	m->handle = 0;
	for (unsigned i = 0; i < m->img.nentries; i++) {
		mps__handle_remove(m->funcs[i].handle);
		m->funcs[i].handle = 0;
	}
	si_list_del(&m->link);
	if (m->lib)
		m->lib->mods[m->ctx->device] = NULL;
	mps__module_put(m);
}

void mps__module_put(struct si_module *m)
{
	if (--m->refs == 0)
		module_free(m);
}

CUresult mps__function_resolve(CUfunction f, struct si_context *ctx, struct si_function **out)
{
	enum si_kind kind;
	void *obj = mps__handle_lookup((uintptr_t)f, &kind);
	struct si_kernel *k;
	struct si_module *m;
	CUresult rc;

	if (obj && kind == SI_H_FUNCTION) {
		*out = obj;
		return CUDA_SUCCESS;
	}
	if (!obj || kind != SI_H_KERNEL)
		return CUDA_ERROR_INVALID_HANDLE;
	/* A CUkernel cast to CUfunction: its function in the context. */
	if (!ctx) {
		rc = mps__ctx_enter(&ctx);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	k = obj;
	rc = mps__library_module(k->lib, ctx, &m);
	if (rc == CUDA_SUCCESS)
		*out = &m->funcs[k->index];
	return rc;
}

/*
 * The JIT options that are outputs: report an empty log and no time spent,
 * and put a message in the error log when loading failed. Each value lives in
 * the option's own slot of optionValues, as cuda.h describes.
 */
static void jit_outputs(unsigned n, CUjit_option *options, void **values, CUresult rc)
{
	size_t info_size = 0, error_size = 0;

	for (unsigned i = 0; i < n; i++) {
		if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			info_size = (size_t)(uintptr_t)values[i];
		if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			error_size = (size_t)(uintptr_t)values[i];
	}
	for (unsigned i = 0; i < n; i++) {
		const char *msg = rc == CUDA_SUCCESS ? "" : "openmps stand-in: image is not PTX it can load";
		float zero = 0.0f;

		switch (options[i]) {
		case CU_JIT_WALL_TIME:
			memcpy(&values[i], &zero, sizeof(zero));
			break;
		case CU_JIT_INFO_LOG_BUFFER:
			if (info_size && values[i])
				*(char *)values[i] = '\0';
			break;
		case CU_JIT_ERROR_LOG_BUFFER:
			if (error_size && values[i]) {
				strncpy(values[i], msg, error_size - 1);
				((char *)values[i])[error_size - 1] = '\0';
			}
			break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
			values[i] = (void *)(uintptr_t)0;
			break;
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
			values[i] = (void *)(uintptr_t)(error_size ? strnlen(msg, error_size - 1) : 0);
			break;
		default:
			break;
		}
	}
}

CU_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				   CUjit_option *options, void **optionValues)
{
	struct si_context *ctx;
	struct si_module *m;
	CUresult rc;
	char *text;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!module || !image || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	text = mps__image_text(image);
	if (!text)
		return CUDA_ERROR_INVALID_IMAGE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc == CUDA_SUCCESS)
		rc = mps__module_load(ctx, text, NULL, &m);
	if (rc == CUDA_SUCCESS)
		*module = (CUmodule)m->handle;
	mps__unlock();
	free(text);
	if (numOptions)
		jit_outputs(numOptions, options, optionValues, rc);
	return rc;
}

CU_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return cuModuleLoadDataEx(module, image, 0, NULL, NULL);
}

CU_API CUresult cuModuleUnload(CUmodule hmod)
{
	struct si_module *m;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	m = mps__handle_get((uintptr_t)hmod, SI_H_MODULE);
	if (m && !m->lib) {
		rc = m->ctx->sticky;
		mps__module_unload(m);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct si_module *m;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;
	int i;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	m = mps__handle_get((uintptr_t)hmod, SI_H_MODULE);
	if (m) {
		rc = m->ctx->sticky;
		i = mps__ptx_entry(&m->img, name);
		if (rc == CUDA_SUCCESS && i < 0)
			rc = CUDA_ERROR_NOT_FOUND;
		if (rc == CUDA_SUCCESS)
			*hfunc = (CUfunction)m->funcs[i].handle;
	}
	mps__unlock();
	return rc;
}

CUresult mps__module_global(struct si_module *m, const char *name, CUdeviceptr *dptr, size_t *bytes)
{
	int g = mps__ptx_global(&m->img, name);

	if (g < 0)
		return CUDA_ERROR_NOT_FOUND;
	/* Either output may be NULL. */
	if (dptr)
		*dptr = (CUdeviceptr)m->globals[g]->base;
	if (bytes)
		*bytes = m->img.globals[g].size;
	return CUDA_SUCCESS;
}

CU_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	struct si_module *m;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	m = mps__handle_get((uintptr_t)hmod, SI_H_MODULE);
	if (m) {
		rc = m->ctx->sticky;
		if (rc == CUDA_SUCCESS)
			rc = mps__module_global(m, name, dptr, bytes);
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule hmod)
{
	struct si_module *m;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	m = mps__handle_get((uintptr_t)hmod, SI_H_MODULE);
	if (m && !m->lib) {
		*count = m->img.nentries;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

/* The kernels in the order the PTX defines them, as cuModuleGetFunction
 * gives them. */
CU_API CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int n, CUmodule hmod)
{
	struct si_module *m;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!functions)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	m = mps__handle_get((uintptr_t)hmod, SI_H_MODULE);
	if (m && !m->lib) {
		for (unsigned i = 0; i < n && i < m->img.nentries; i++)
			functions[i] = (CUfunction)m->funcs[i].handle;
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	struct si_function *f;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!name || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__function_resolve(hfunc, NULL, &f);
	if (rc == CUDA_SUCCESS)
		*name = f->entry->name;
	mps__unlock();
	return rc;
}
