// SPDX-License-Identifier: MIT
/*
 * Libraries (cuLibrary*) and their kernels (CUkernel). A library is context
 * independent, as in the real driver: loading it only parses and keeps the
 * PTX; the first use in a context (cuKernelGetFunction, cuLibraryGetGlobal,
 * or a launch of a CUkernel cast to CUfunction) loads it there as a module,
 * which lives until the library is unloaded or the context is reset.
 *
 * Kernel attributes set with cuKernelSetAttribute are kept per device in the
 * kernel and shared with its function in that device's context, so setting
 * them through either handle is seen through both.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

CUresult mps__library_module(struct si_library *lib, struct si_context *ctx, struct si_module **out)
{
	CUresult rc;

	if (!lib->mods[ctx->device]) {
		rc = mps__module_load(ctx, lib->text, lib, &lib->mods[ctx->device]);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	*out = lib->mods[ctx->device];
	return CUDA_SUCCESS;
}

static void library_free(struct si_library *lib)
{
	for (int d = 0; d < SI_MAX_DEVICES; d++)
		if (lib->mods[d])
			mps__module_unload(lib->mods[d]);
	for (unsigned i = 0; lib->kernels && i < lib->img.nentries; i++)
		if (lib->kernels[i].handle)
			mps__handle_remove(lib->kernels[i].handle);
	if (lib->handle)
		mps__handle_remove(lib->handle);
	free(lib->kernels);
	mps__ptx_release(&lib->img);
	free(lib->text);
	free(lib);
}

CU_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				  void **jitOptionsValues, unsigned int numJitOptions,
				  CUlibraryOption *libraryOptions, void **libraryOptionValues,
				  unsigned int numLibraryOptions)
{
	struct si_library *lib;
	CUresult rc;
	char *text;
	int err;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* Option counts with NULL arrays are no options: cudart passes them. */
	if (!library || !code)
		return CUDA_ERROR_INVALID_VALUE;
	text = mps__image_text(code);
	if (!text)
		return CUDA_ERROR_INVALID_IMAGE;
	lib = calloc(1, sizeof(*lib));
	if (!lib) {
		free(text);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	err = mps__ptx_parse(text, &lib->img);
	if (err) {
		free(text);
		free(lib);
		return mps__image_error(err);
	}
	mps__lock();
	rc = CUDA_ERROR_OUT_OF_MEMORY;
	lib->text = text;
	lib->kernels = calloc(lib->img.nentries + 1, sizeof(*lib->kernels));
	if (!lib->text || !lib->kernels)
		goto out_free;
	for (unsigned i = 0; i < lib->img.nentries; i++) {
		struct si_kernel *k = &lib->kernels[i];

		k->lib = lib;
		k->index = i;
		for (int d = 0; d < SI_MAX_DEVICES; d++)
			mps__fattrs_default(&k->attrs[d]);
		k->handle = mps__handle_add(SI_H_KERNEL, k);
		if (!k->handle)
			goto out_free;
	}
	lib->handle = mps__handle_add(SI_H_LIBRARY, lib);
	if (!lib->handle)
		goto out_free;
	*library = (CUlibrary)lib->handle;
	mps__unlock();
	return CUDA_SUCCESS;

out_free:
	library_free(lib);
	mps__unlock();
	return rc;
}

CU_API CUresult cuLibraryUnload(CUlibrary library)
{
	struct si_library *lib;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	lib = mps__handle_get((uintptr_t)library, SI_H_LIBRARY);
	if (lib) {
		library_free(lib);
		rc = CUDA_SUCCESS;
	}
	mps__unlock();
	return rc;
}

CU_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	struct si_library *lib;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;
	int i;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pKernel || !name)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	lib = mps__handle_get((uintptr_t)library, SI_H_LIBRARY);
	if (lib) {
		i = mps__ptx_entry(&lib->img, name);
		rc = i < 0 ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
		if (i >= 0)
			*pKernel = (CUkernel)lib->kernels[i].handle;
	}
	mps__unlock();
	return rc;
}

/* A global of the library's module in the current context: any (managed
 * false) or a __managed__ one (.attribute(.managed) in the PTX), whose
 * memory is the module's like a plain global's, in host RAM like all the
 * stand-in's. */
static CUresult library_global(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name, bool managed)
{
	struct si_library *lib;
	struct si_context *ctx;
	struct si_module *m;
	CUresult rc;
	int g;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	lib = mps__handle_get((uintptr_t)library, SI_H_LIBRARY);
	if (!lib) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out_unlock;
	}
	g = mps__ptx_global(&lib->img, name);
	if (g < 0 || (managed && !lib->img.globals[g].managed)) {
		rc = CUDA_ERROR_NOT_FOUND;
		goto out_unlock;
	}
	rc = mps__library_module(lib, ctx, &m);
	if (rc == CUDA_SUCCESS)
		rc = mps__module_global(m, name, dptr, bytes);
out_unlock:
	mps__unlock();
	return rc;
}

CU_API CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return library_global(dptr, bytes, library, name, true);
}

CU_API CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return library_global(dptr, bytes, library, name, false);
}

CU_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct si_context *ctx;
	struct si_kernel *k;
	struct si_module *m;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	k = mps__handle_get((uintptr_t)kernel, SI_H_KERNEL);
	if (!k) {
		rc = CUDA_ERROR_INVALID_HANDLE;
		goto out_unlock;
	}
	rc = mps__library_module(k->lib, ctx, &m);
	if (rc == CUDA_SUCCESS)
		*pFunc = (CUfunction)m->funcs[k->index].handle;
out_unlock:
	mps__unlock();
	return rc;
}
