// SPDX-License-Identifier: MIT
/*
 * cuPointerGetAttribute and cuPointerGetAttributes over the range table.
 *
 * Device allocations and module globals report CU_MEMORYTYPE_DEVICE and have
 * no host pointer; registered host memory reports CU_MEMORYTYPE_HOST and is
 * mapped at its own address. Each attribute is written with the width the
 * real driver writes: booleans and small enums as 32-bit integers, addresses,
 * sizes and ids as 64-bit. cuPointerGetAttribute fails on a pointer it does
 * not know (CUDA_ERROR_INVALID_VALUE); cuPointerGetAttributes instead
 * succeeds and writes empty values, as cuda.h says.
 */
#include <string.h>

#include "standin.h"

/* Attributes newer than the oldest headers we build against. */
#define ATTR_ALLOWED_HANDLE_TYPES       14
#define ATTR_IS_GPU_DIRECT_RDMA_CAPABLE 15
#define ATTR_ACCESS_FLAGS               16
#define ATTR_MEMPOOL_HANDLE             17
#define ATTR_MAPPING_SIZE               18
#define ATTR_MAPPING_BASE_ADDR          19
#define ATTR_MEMORY_BLOCK_ID            20
#define ATTR_IS_HW_DECOMPRESS_CAPABLE   21

/* Bytes written for an attribute, 0 for one we do not answer. */
static size_t attr_width(int a)
{
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case ATTR_MEMPOOL_HANDLE:
	case ATTR_MAPPING_SIZE:
	case ATTR_MAPPING_BASE_ADDR:
	case ATTR_MEMORY_BLOCK_ID:
		return 8;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case ATTR_ALLOWED_HANDLE_TYPES:
	case ATTR_IS_GPU_DIRECT_RDMA_CAPABLE:
	case ATTR_ACCESS_FLAGS:
	case ATTR_IS_HW_DECOMPRESS_CAPABLE:
		return 4;
	default:
		return 0;
	}
}

static void put32(void *data, uint32_t v)
{
	memcpy(data, &v, sizeof(v));
}

static void put64(void *data, uint64_t v)
{
	memcpy(data, &v, sizeof(v));
}

/* Writes attribute a of a pointer inside r. CUDA_ERROR_INVALID_VALUE when
 * the pointer has no such value (the host pointer of device memory). */
static CUresult attr_value(const struct si_range *r, int a, uintptr_t ptr, void *data)
{
	bool host = r->kind == SI_RANGE_HOST;

	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		put64(data, r->ctx->handle);
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		put32(data, host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		put64(data, ptr);
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!host && !r->managed)   /* managed memory's is its own address */
			return CUDA_ERROR_INVALID_VALUE;
		put64(data, ptr);
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case ATTR_MEMORY_BLOCK_ID:
		put64(data, r->buffer_id);
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		put32(data, (uint32_t)r->ctx->device);
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		put32(data, r->kind == SI_RANGE_DEVICE);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case ATTR_MAPPING_BASE_ADDR:
		put64(data, r->base);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case ATTR_MAPPING_SIZE:
		put64(data, r->size);
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		put32(data, 1);
		break;
	case ATTR_ACCESS_FLAGS:
		put32(data, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
		break;
	case ATTR_MEMPOOL_HANDLE:
		put64(data, mps__pool_handle(r->pool));
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		put32(data, r->managed);
		break;
	default:        /* SYNC_MEMOPS, handle types, RDMA, decompression */
		put32(data, 0);
		break;
	}
	return CUDA_SUCCESS;
}

CU_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct si_range *r;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (attribute == CU_POINTER_ATTRIBUTE_P2P_TOKENS)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!attr_width((int)attribute))
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	r = mps__range_find((uintptr_t)ptr);
	rc = r ? attr_value(r, (int)attribute, (uintptr_t)ptr, data) : CUDA_ERROR_INVALID_VALUE;
	mps__unlock();
	return rc;
}

CU_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
				       void **data, CUdeviceptr ptr)
{
	struct si_range *r;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!numAttributes || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < numAttributes; i++)
		if (!data[i] || !attr_width((int)attributes[i]))
			return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	r = mps__range_find((uintptr_t)ptr);
	for (unsigned i = 0; i < numAttributes; i++) {
		int a = (int)attributes[i];

		memset(data[i], 0, attr_width(a));
		if (r)
			(void)attr_value(r, a, (uintptr_t)ptr, data[i]);
		else if (a == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			put32(data[i], (uint32_t)-2);   /* what the runtime calls cudaInvalidDeviceId */
	}
	mps__unlock();
	return CUDA_SUCCESS;
}
