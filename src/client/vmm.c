// SPDX-License-Identifier: MIT
/*
 * Virtual memory management: physical allocations, address reservations and
 * mappings, made by the server in its address space (server/ops_vmm.c) and
 * named here by the same addresses and by the server's allocation handles.
 * A reservation is recorded as device memory (so copies route addresses in
 * it to the server) and held inaccessible in this process too, as every
 * device range is (memory.c). Shareable handles are file descriptors that
 * travel over the socket, one transfer at a time (mps_conn.fd_lock). Access
 * rights, granularity and properties are forwarded by generated code.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "client/api.h"
#include "client/client.h"
#include "common/sock.h"

/* The owner of reservations in the device-range table: never a context's,
 * so destroying a context leaves them. */
static const char reservation_owner;

static CUresult vmm_call(enum mps_op op, struct mps_msg_vmm *q, uint64_t *out)
{
	struct mps_call call;
	uint32_t ctx = 0;
	CUresult r;

	mps__cur_handle(&ctx);
	r = mps__call(op, ctx, &q->hdr, sizeof(*q), NULL, 0, &call);
	if (r == CUDA_SUCCESS && out)
		*out = call.s->val[0];
	mps__call_end(&call);
	return r;
}

static CUresult mem_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			   unsigned long long flags)
{
	struct mps_msg_vmm q = { .size = size, .flags = flags };
	uint64_t h = 0;
	CUresult r;

	if (!handle || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	q.prop.type = (uint32_t)prop->type;
	q.prop.handle_types = (uint32_t)prop->requestedHandleTypes;
	q.prop.loc_type = (int32_t)prop->location.type;
	q.prop.loc_id = prop->location.id;
	q.prop.compression = prop->allocFlags.compressionType;
	q.prop.rdma = prop->allocFlags.gpuDirectRDMACapable;
	q.prop.usage = prop->allocFlags.usage;
	r = vmm_call(MPS_OP_VMM_CREATE, &q, &h);
	if (r == CUDA_SUCCESS)
		*handle = h;
	return r;
}

static CUresult mem_release(CUmemGenericAllocationHandle handle)
{
	struct mps_msg_vmm q = { .handle = (uint32_t)handle };

	if (handle > UINT32_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	return vmm_call(MPS_OP_VMM_RELEASE, &q, NULL);
}

static CUresult address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				unsigned long long flags)
{
	struct mps_msg_vmm q = { .ptr = addr, .size = size, .arg = alignment, .flags = flags };
	uint64_t p = 0;
	CUresult r;

	if (!ptr)
		return CUDA_ERROR_INVALID_VALUE;
	r = vmm_call(MPS_OP_VMM_RESERVE, &q, &p);
	if (r == CUDA_SUCCESS) {
		*ptr = (CUdeviceptr)p;
		mps__devmem_add(p, size, NULL, &reservation_owner);
	}
	return r;
}

static CUresult address_free(CUdeviceptr ptr, size_t size)
{
	struct mps_msg_vmm q = { .ptr = ptr, .size = size };
	CUresult r = vmm_call(MPS_OP_VMM_FREE, &q, NULL);

	if (r == CUDA_SUCCESS)
		mps__devmem_remove(ptr);
	return r;
}

static CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			unsigned long long flags)
{
	struct mps_msg_vmm q = { .ptr = ptr, .size = size, .arg = offset, .handle = (uint32_t)handle,
				 .flags = flags };

	if (handle > UINT32_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	return vmm_call(MPS_OP_VMM_MAP, &q, NULL);
}

static CUresult mem_unmap(CUdeviceptr ptr, size_t size)
{
	struct mps_msg_vmm q = { .ptr = ptr, .size = size };

	return vmm_call(MPS_OP_VMM_UNMAP, &q, NULL);
}

static CUresult retain_allocation_handle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct mps_msg_vmm q = { .ptr = (uint64_t)(uintptr_t)addr };
	uint64_t h = 0;
	CUresult r;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	r = vmm_call(MPS_OP_VMM_RETAIN, &q, &h);
	if (r == CUDA_SUCCESS)
		*handle = h;
	return r;
}

CUresult mps__fd_export(enum mps_op op, struct mps_msg_vmm *q, void *out)
{
	uint64_t size = 0;
	CUresult r;
	int fd;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	/* The fd comes over the socket just before the reply. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	r = vmm_call(op, q, NULL);
	fd = r == CUDA_SUCCESS ? mps__recv_fd(MPS_FD_EXPORT, &size) : -1;
	pthread_mutex_unlock(&mps_conn.fd_lock);
	if (r != CUDA_SUCCESS)
		return r;
	if (fd < 0)
		return mps__ended_or(CUDA_ERROR_OPERATING_SYSTEM);
	memcpy(out, &fd, sizeof(fd));
	return CUDA_SUCCESS;
}

CUresult mps__fd_import(enum mps_op op, struct mps_msg_vmm *q, void *os_handle, uint64_t *out)
{
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_IMPORT };
	int fd = (int)(intptr_t)os_handle;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (q->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return q->type == CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* The fd goes ahead of the message, which the server answers by taking it. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	if (mps_sock_send(mps_conn.sock, &fm, sizeof(fm), fd) < 0)
		r = CUDA_ERROR_OPERATING_SYSTEM;
	else
		r = vmm_call(op, q, out);
	pthread_mutex_unlock(&mps_conn.fd_lock);
	return r;
}

static CUresult export_to_shareable_handle(void *shareable, CUmemGenericAllocationHandle handle,
					   CUmemAllocationHandleType type, unsigned long long flags)
{
	struct mps_msg_vmm q = { .handle = (uint32_t)handle, .type = (uint32_t)type, .flags = flags };

	if (handle > UINT32_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__fd_export(MPS_OP_VMM_EXPORT, &q, shareable);
}

static CUresult import_from_shareable_handle(CUmemGenericAllocationHandle *handle, void *os_handle,
					     CUmemAllocationHandleType type)
{
	struct mps_msg_vmm q = { .type = (uint32_t)type };
	uint64_t h = 0;
	CUresult r;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__fd_import(MPS_OP_VMM_IMPORT, &q, os_handle, &h);
	if (r == CUDA_SUCCESS)
		*handle = h;
	return r;
}

const struct mps_impl mps__vmm_api[] = {
	MPS_IMPL(cuMemCreate, mem_create),
	MPS_IMPL(cuMemRelease, mem_release),
	MPS_IMPL(cuMemAddressReserve, address_reserve),
	MPS_IMPL(cuMemAddressFree, address_free),
	MPS_IMPL(cuMemMap, mem_map),
	MPS_IMPL(cuMemUnmap, mem_unmap),
	MPS_IMPL(cuMemRetainAllocationHandle, retain_allocation_handle),
	MPS_IMPL(cuMemExportToShareableHandle, export_to_shareable_handle),
	MPS_IMPL(cuMemImportFromShareableHandle, import_from_shareable_handle),
	MPS_IMPL_END
};
