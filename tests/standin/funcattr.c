// SPDX-License-Identifier: MIT
/*
 * Function and kernel attributes, cache configuration and parameter layout:
 * cuFuncGet/SetAttribute, cuFuncSetCacheConfig, cuFuncGetParamInfo and their
 * CUkernel counterparts. The fixed attributes describe a plain sm_90 kernel
 * (32 registers, no static shared, local or constant memory); the settable
 * ones live in struct si_fattrs with the real driver's ranges: dynamic shared
 * memory up to 227 KiB, a carveout of -1..100, cluster dimensions, and so on.
 * A CUkernel cast to CUfunction is accepted wherever a CUfunction is.
 */
#include "standin.h"

CUresult mps__fattr_get(const struct si_entry *e, const struct si_fattrs *a, unsigned ptx_version,
			CUfunction_attribute attr, int *out)
{
	switch ((int)attr) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *out = (int)e->max_threads; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *out = 0; break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *out = 0; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *out = 0; break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *out = 32; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *out = (int)ptx_version; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *out = 90; break;
	case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *out = 0; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *out = a->max_dyn_smem; break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *out = a->carveout; break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *out = 0; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *out = a->cluster[0]; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *out = a->cluster[1]; break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *out = a->cluster[2]; break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *out = a->non_portable_cluster; break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *out = a->cluster_policy; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult mps__fattr_set(struct si_fattrs *a, CUfunction_attribute attr, int value)
{
	switch ((int)attr) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		if (value < 0 || value > SI_SMEM_OPTIN)
			return CUDA_ERROR_INVALID_VALUE;
		a->max_dyn_smem = value;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		if (value < -1 || value > 100)
			return CUDA_ERROR_INVALID_VALUE;
		a->carveout = value;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		if (value < 0 || value > 16)
			return CUDA_ERROR_INVALID_VALUE;
		a->cluster[attr - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = value;
		break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		if (value != 0 && value != 1)
			return CUDA_ERROR_INVALID_VALUE;
		a->non_portable_cluster = value;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
		    value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
			return CUDA_ERROR_INVALID_VALUE;
		a->cluster_policy = value;
		break;
	default:        /* read-only or unknown */
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* Resolves a function for an attribute call; sticky errors of its context too. */
static CUresult function_enter(CUfunction hfunc, struct si_function **fn)
{
	CUresult rc = mps__function_resolve(hfunc, NULL, fn);

	return rc == CUDA_SUCCESS ? (*fn)->mod->ctx->sticky : rc;
}

CU_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = function_enter(hfunc, &fn);
	if (rc == CUDA_SUCCESS)
		rc = mps__fattr_get(fn->entry, fn->attrs, fn->mod->img.ptx_version, attrib, pi);
	mps__unlock();
	return rc;
}

CU_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = function_enter(hfunc, &fn);
	if (rc == CUDA_SUCCESS)
		rc = mps__fattr_set(fn->attrs, attrib, value);
	mps__unlock();
	return rc;
}

CU_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((int)config < CU_FUNC_CACHE_PREFER_NONE || (int)config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = function_enter(hfunc, &fn);
	if (rc == CUDA_SUCCESS)
		fn->attrs->cache_config = (int)config;
	mps__unlock();
	return rc;
}

static CUresult param_info(const struct si_entry *e, size_t index, size_t *offset, size_t *size)
{
	if (index >= e->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*offset = e->params[index].offset;
	if (size)       /* may be NULL */
		*size = e->params[index].size;
	return CUDA_SUCCESS;
}

CU_API CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
				   size_t *paramSize)
{
	struct si_function *fn;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!paramOffset)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = function_enter(func, &fn);
	if (rc == CUDA_SUCCESS)
		rc = param_info(fn->entry, paramIndex, paramOffset, paramSize);
	mps__unlock();
	return rc;
}

/* The kernel behind a CUkernel and its settable attributes on device dev. */
static CUresult kernel_enter(CUkernel kernel, CUdevice dev, struct si_kernel **k)
{
	if (!mps__device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*k = mps__handle_get((uintptr_t)kernel, SI_H_KERNEL);
	return *k ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CU_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
	struct si_kernel *k;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = kernel_enter(kernel, dev, &k);
	if (rc == CUDA_SUCCESS)
		rc = mps__fattr_get(&k->lib->img.entries[k->index], &k->attrs[dev],
				    k->lib->img.ptx_version, attrib, pi);
	mps__unlock();
	return rc;
}

CU_API CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
	struct si_kernel *k;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	mps__lock();
	rc = kernel_enter(kernel, dev, &k);
	if (rc == CUDA_SUCCESS)
		rc = mps__fattr_set(&k->attrs[dev], attrib, val);
	mps__unlock();
	return rc;
}

CU_API CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	struct si_kernel *k;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if ((int)config < CU_FUNC_CACHE_PREFER_NONE || (int)config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = kernel_enter(kernel, dev, &k);
	if (rc == CUDA_SUCCESS)
		k->attrs[dev].cache_config = (int)config;
	mps__unlock();
	return rc;
}

CU_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
				     size_t *paramSize)
{
	struct si_kernel *k;
	CUresult rc = CUDA_ERROR_INVALID_HANDLE;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!paramOffset)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	k = mps__handle_get((uintptr_t)kernel, SI_H_KERNEL);
	if (k)
		rc = param_info(&k->lib->img.entries[k->index], paramIndex, paramOffset, paramSize);
	mps__unlock();
	return rc;
}
