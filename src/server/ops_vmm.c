// SPDX-License-Identifier: MIT
/*
 * Virtual memory management: address reservations, physical allocations and
 * the mappings between them, made in the server's address space on the
 * client's behalf.
 *
 * What a client may touch is what it reserved: a reservation is a range of
 * its memory account (MPS_MEM_VA), so copies and memsets reach whatever it
 * mapped there, and mapping is refused anywhere else. Physical memory is
 * charged to the client when it is created, against its limit, and given
 * back when the allocation is gone for the driver too: released by the
 * client and no longer mapped (the refs/maps counts of its record,
 * objects.h). The server holds one driver reference per allocation; the
 * client's references are counted here, so a client's release never frees
 * memory a mapping of its still uses, and retaining a handle by address
 * (cuMemRetainAllocationHandle) gives back the same handle.
 *
 * Shareable handles are POSIX file descriptors passed over the client's
 * socket: an export sends the driver's fd ahead of the reply, an import
 * takes the fd the client sent ahead of its message. An imported allocation
 * is not charged to the importer (the driver does not say its size): the
 * exporter's account holds it. The address space one client may reserve is
 * bounded (eight times the devices' memory, at least 1 TiB), so that no
 * client can take the address space from the others.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/placement.h"
#include "server/server.h"

#define RESERVE_FLOOR (1ull << 40)

static uint64_t reserve_cap(void)
{
	uint64_t total = 0;

	for (int i = 0; i < mps_srv.ndev; i++)
		total += mps_srv.dev[i].info.total_mem;
	return total * 8 > RESERVE_FLOOR ? total * 8 : RESERVE_FLOOR;
}

/* A physical allocation record the client may name. */
static struct mps_sobj *alloc_of(struct mps_client *c, uint32_t h)
{
	return mps_obj_get(c, MPS_H_ALLOC, h);
}

/* Frees an allocation the client can no longer reach, if nothing maps it. */
static void alloc_settle(struct mps_client *c, struct mps_sobj *o)
{
	if (o->refs == 0 && o->maps == 0)
		mps_obj_del(c, o->handle, true);
}

void mps__op_vmm_create(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h = 0;
	struct mps_sobj *o;
	CUresult r;
	int d;

	if (!mps_drv.cuMemCreate || !mps_drv.cuMemRelease) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	r = mps__fwd_location(c, &(CUmemLocation){ .type = (CUmemLocationType)q->prop.loc_type, .id = q->prop.loc_id },
			      &d);
	if (r == CUDA_SUCCESS && (q->size == 0 || q->prop.type != CU_MEM_ALLOCATION_TYPE_PINNED))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && (q->prop.handle_types & ~(uint32_t)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		r = CUDA_ERROR_NOT_SUPPORTED;
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	if (mps_memacct_charge(&c->mem, d, q->size) < 0) {
		mps_log_info("client %d: physical allocation of %llu bytes refused by its memory limit", (int)c->pid,
			     (unsigned long long)q->size);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = (CUmemAllocationHandleType)q->prop.handle_types;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = (int)mps_srv.dev[d].dev;
	prop.allocFlags.compressionType = q->prop.compression;
	prop.allocFlags.gpuDirectRDMACapable = q->prop.rdma;
	prop.allocFlags.usage = q->prop.usage;
	r = mps__bind_device(c, d);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemCreate(&h, (size_t)q->size, &prop, q->flags);
	if (r != CUDA_SUCCESS)
		goto err_uncharge;
	o = mps_obj_add(c, MPS_H_ALLOC, (void *)(uintptr_t)h, d, 0);
	if (!o) {
		mps_drv.cuMemRelease(h);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_uncharge;
	}
	o->bytes = q->size;
	o->refs = 1;
	s->val[0] = o->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
	return;

err_uncharge:
	mps_memacct_uncharge(&c->mem, d, q->size);
	mps__reply(c, m->slot, r);
}

void mps__op_vmm_release(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_sobj *o = alloc_of(c, q->handle);

	if (!o) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	o->refs--;
	alloc_settle(c, o);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_vmm_reserve(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	CUdeviceptr p = 0;
	CUresult r;
	int dev;

	if (!mps_drv.cuMemAddressReserve || !mps_drv.cuMemAddressFree || !mps_drv.cuMemMap || !mps_drv.cuMemUnmap) {
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	if (q->size == 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (q->size > reserve_cap() - c->vmm.reserved) {
		mps_log_info("client %d: refused %llu bytes of address space: it holds %llu", (int)c->pid,
			     (unsigned long long)q->size, (unsigned long long)c->vmm.reserved);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	dev = mps__cur_device() < 0 ? 0 : mps__cur_device();
	r = mps__bind_device(c, dev);
	if (r == CUDA_SUCCESS) {
		/* Where nothing tells, when placing at random (placement.h),
		 * unless the client asked for an address. */
		r = !q->ptr && !q->flags ? mps_place_reserve(dev, q->size, q->arg, &p) : CUDA_ERROR_NOT_SUPPORTED;
		if (r == CUDA_ERROR_NOT_SUPPORTED)
			r = mps_drv.cuMemAddressReserve(&p, (size_t)q->size, (size_t)q->arg, (CUdeviceptr)q->ptr,
							q->flags);
	}
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	if (mps_vmm_res_add(&c->vmm, p, q->size) < 0)
		goto err_free;
	if (mps_memacct_add(&c->mem, p, q->size, MPS_MEM_VA, 0, 0) < 0)
		goto err_res;
	s->val[0] = p;
	mps__reply(c, m->slot, CUDA_SUCCESS);
	return;

err_res:
	mps_vmm_res_del(&c->vmm, p);
err_free:
	if (!mps_place_unreserve(p, q->size))
		mps_drv.cuMemAddressFree(p, (size_t)q->size);
	mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
}

/* Unmaps n mappings from index i (the driver already has, if `done`). */
static CUresult unmap(struct mps_client *c, size_t i, size_t n, bool done)
{
	uint64_t base = c->vmm.map[i].base;
	uint64_t size = c->vmm.map[i + n - 1].base + c->vmm.map[i + n - 1].size - base;
	uint32_t *allocs = malloc(n * sizeof(*allocs));
	CUresult r = CUDA_SUCCESS;

	if (!allocs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!done) {
		r = mps_drv.cuMemUnmap((CUdeviceptr)base, (size_t)size);
		if (r != CUDA_SUCCESS) {
			free(allocs);
			return r;
		}
	}
	for (size_t k = 0; k < n; k++)
		allocs[k] = c->vmm.map[i + k].alloc;
	mps_vmm_map_del(&c->vmm, i, n);
	for (size_t k = 0; k < n; k++) {
		struct mps_sobj *o = mps_obj_any(c, MPS_H_ALLOC, allocs[k]);

		if (o) {
			o->maps--;
			alloc_settle(c, o);
		}
	}
	free(allocs);
	return CUDA_SUCCESS;
}

/* Frees a reservation, unmapping what is still mapped in it first (the
 * client's teardown; a client's own free must have unmapped). */
static CUresult address_free(struct mps_client *c, uint64_t base, uint64_t size)
{
	CUresult r;

	for (size_t i = 0; i < c->vmm.nmap;) {
		const struct mps_vmap *v = &c->vmm.map[i];

		if (v->base - base < size) {
			r = unmap(c, i, 1, false);
			if (r != CUDA_SUCCESS)
				return r;
		} else {
			i++;
		}
	}
	r = mps_place_unreserve(base, size) ? CUDA_SUCCESS : mps_drv.cuMemAddressFree((CUdeviceptr)base, (size_t)size);
	if (r != CUDA_SUCCESS)
		return r;
	mps_memacct_remove(&c->mem, base, MPS_MEM_VA, NULL);
	mps_vmm_res_del(&c->vmm, base);
	return CUDA_SUCCESS;
}

void mps__op_vmm_free(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	const struct mps_vres *res = mps_vmm_res_find(&c->vmm, q->ptr, q->size);

	/* The whole of one reservation with nothing mapped, as the driver wants it. */
	if (!res || res->base != q->ptr || res->size != q->size || mps_vmm_map_any(&c->vmm, q->ptr, q->size)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	mps__reply(c, m->slot, address_free(c, q->ptr, q->size));
}

void mps__op_vmm_map(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_sobj *o = alloc_of(c, q->handle);
	struct mps_vmap v = { .base = q->ptr, .size = q->size, .offset = q->arg, .alloc = q->handle };
	CUresult r;

	if (!o || q->size == 0 || !mps_vmm_res_find(&c->vmm, q->ptr, q->size) ||
	    (o->bytes && (q->arg > o->bytes || q->size > o->bytes - q->arg)) ||
	    mps_vmm_map_any(&c->vmm, q->ptr, q->size)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	r = mps__bind_device(c, o->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemMap((CUdeviceptr)q->ptr, (size_t)q->size, (size_t)q->arg,
				     (CUmemGenericAllocationHandle)(uintptr_t)o->real, q->flags);
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	if (mps_vmm_map_add(&c->vmm, &v) < 0) {
		mps_drv.cuMemUnmap((CUdeviceptr)q->ptr, (size_t)q->size);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	o->maps++;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_vmm_unmap(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	size_t n = 0;
	long i = mps_vmm_map_span(&c->vmm, q->ptr, q->size, &n);

	/* Whole mappings of the client's only. */
	if (i < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	mps__reply(c, m->slot, unmap(c, (size_t)i, n, false));
}

void mps__op_vmm_retain(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const struct mps_vmap *v = mps_vmm_map_find(&c->vmm, q->ptr);
	struct mps_sobj *o = v ? mps_obj_any(c, MPS_H_ALLOC, v->alloc) : NULL;

	if (!o) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	o->refs++;
	s->val[0] = o->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__op_vmm_export(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_sobj *o = alloc_of(c, q->handle);
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_EXPORT };
	int fd = -1;
	CUresult r;

	if (!o) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (q->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !mps_drv.cuMemExportToShareableHandle) {
		mps__reply(c, m->slot, q->type == CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE
									  : CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	r = mps__bind_device(c, o->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemExportToShareableHandle(&fd, (CUmemGenericAllocationHandle)(uintptr_t)o->real,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, q->flags);
	if (r == CUDA_SUCCESS) {
		fm.size = o->bytes;
		if (mps_sock_send(c->sock, &fm, sizeof(fm), fd) < 0)
			r = CUDA_ERROR_OPERATING_SYSTEM;
		close(fd);
	}
	mps__reply(c, m->slot, r);
}

int mps__take_fd(struct mps_client *c)
{
	struct mps_fdmsg fm;
	int fd = -1;
	ssize_t n = mps_sock_recv_nowait(c->sock, &fm, sizeof(fm), &fd);

	if (n != sizeof(fm) || fm.magic != MPS_FDMSG_MAGIC || fm.region != MPS_FD_IMPORT) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

void mps__op_vmm_import(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_vmm *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	int fd = mps__take_fd(c);   /* first, whatever the answer: it must not linger */
	CUmemGenericAllocationHandle h = 0;
	CUmemAllocationProp prop;
	struct mps_sobj *o;
	uint32_t known;
	CUresult r;
	int d = 0;

	if (fd < 0) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	if (q->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !mps_drv.cuMemImportFromShareableHandle ||
	    !mps_drv.cuMemRelease) {
		close(fd);
		mps__reply(c, m->slot, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	r = mps__bind_device(c, mps__cur_device() < 0 ? 0 : mps__cur_device());
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
							   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	close(fd);
	if (r != CUDA_SUCCESS) {
		mps__reply(c, m->slot, r);
		return;
	}
	/* The driver may hand back a handle it gave before: one record each. */
	known = mps_obj_find(c, MPS_H_ALLOC, (void *)(uintptr_t)h);
	o = known ? mps_obj_any(c, MPS_H_ALLOC, known) : NULL;
	if (o) {
		o->extra++;
		o->refs++;
		s->val[0] = o->handle;
		mps__reply(c, m->slot, CUDA_SUCCESS);
		return;
	}
	if (mps_drv.cuMemGetAllocationPropertiesFromHandle &&
	    mps_drv.cuMemGetAllocationPropertiesFromHandle(&prop, h) == CUDA_SUCCESS &&
	    prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		int i = mps__device_index(prop.location.id);

		d = i < 0 ? 0 : i;
	}
	o = mps_obj_add(c, MPS_H_ALLOC, (void *)(uintptr_t)h, d, 0);
	if (!o) {
		mps_drv.cuMemRelease(h);
		mps__reply(c, m->slot, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	o->refs = 1;
	s->val[0] = o->handle;
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

void mps__vmm_release_all(struct mps_client *c)
{
	while (c->vmm.nres) {
		const struct mps_vres *res = &c->vmm.res[c->vmm.nres - 1];

		mps__bind_device(c, mps__cur_device() < 0 ? 0 : mps__cur_device());
		if (address_free(c, res->base, res->size) != CUDA_SUCCESS) {
			/* Forget it anyway: the client is gone. */
			mps_log_debug("client %d: freeing reservation %#llx failed", (int)c->pid,
				      (unsigned long long)res->base);
			for (size_t i = c->vmm.nmap; i-- > 0;)
				if (c->vmm.map[i].base - res->base < res->size)
					unmap(c, i, 1, true);
			mps_memacct_remove(&c->mem, res->base, MPS_MEM_VA, NULL);
			mps_vmm_res_del(&c->vmm, res->base);
		}
	}
	mps_vmm_free(&c->vmm);
}

/* ---- the forwarded ones (forward.def's hooks) ---------------------------- */

/* The client's properties with its device as the server's, and no pointer. */
static CUresult server_prop(struct mps_client *c, const CUmemAllocationProp *in, CUmemAllocationProp *out)
{
	CUresult r;
	int d;

	*out = *in;
	out->win32HandleMetaData = NULL;
	r = mps__fwd_location(c, &in->location, &d);
	if (r == CUDA_SUCCESS)
		out->location.id = (int)mps_srv.dev[d].dev;
	return r;
}

CUresult mps__hook_cuMemGetAllocationGranularity(struct mps_client *c, size_t *granularity,
						 const CUmemAllocationProp *prop,
						 CUmemAllocationGranularity_flags option)
{
	CUmemAllocationProp p;
	CUresult r = server_prop(c, prop, &p);

	if (r != CUDA_SUCCESS)
		return r;
	if (!mps_drv.cuMemGetAllocationGranularity)
		return CUDA_ERROR_NOT_SUPPORTED;
	return mps_drv.cuMemGetAllocationGranularity(granularity, &p, option);
}

CUresult mps__hook_cuMemGetAllocationPropertiesFromHandle(struct mps_client *c, CUmemAllocationProp *prop,
							  CUmemGenericAllocationHandle handle)
{
	CUresult r = mps_drv.cuMemGetAllocationPropertiesFromHandle
			     ? mps_drv.cuMemGetAllocationPropertiesFromHandle(prop, handle)
			     : CUDA_ERROR_NOT_SUPPORTED;
	int d;

	if (r != CUDA_SUCCESS)
		return r;
	prop->win32HandleMetaData = NULL;
	/* The device as the client numbers it. */
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && (d = mps__device_index(prop->location.id)) >= 0)
		prop->location.id = mps__client_ordinal(c, d);
	return CUDA_SUCCESS;
}

CUresult mps__hook_cuMemSetAccess(struct mps_client *c, CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				  size_t count)
{
	CUmemAccessDesc *v;
	CUresult r;

	if (!mps_vmm_res_find(&c->vmm, ptr, size) || !count)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemSetAccess)
		return CUDA_ERROR_NOT_SUPPORTED;
	v = mps__fwd_access(c, desc, count, &r);
	if (!v)
		return r;
	r = mps_drv.cuMemSetAccess(ptr, size, v, count);
	free(v);
	return r;
}

CUresult mps__hook_cuMemGetAccess(struct mps_client *c, unsigned long long *flags, const CUmemLocation *location,
				  CUdeviceptr ptr)
{
	CUmemLocation l = *location;
	CUresult r;
	int d;

	if (!mps_vmm_res_find(&c->vmm, ptr, 1))
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemGetAccess)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps__fwd_location(c, &l, &d);
	if (r != CUDA_SUCCESS)
		return r;
	l.id = (int)mps_srv.dev[d].dev;
	return mps_drv.cuMemGetAccess(flags, &l, ptr);
}
