// SPDX-License-Identifier: MIT
/*
 * What a stream thread runs: copies, memsets and kernels, each with the
 * stand-in lock dropped.
 *
 * Before touching device or registered memory an operation pins the range it
 * lies in (ranges.c), so that a concurrent cuMemFree or cuMemHostUnregister
 * cannot pull the memory away mid-copy; a range that has gone away by the time
 * the operation runs is a fault, CUDA_ERROR_ILLEGAL_ADDRESS, as touching
 * freed memory is on a GPU. Pageable host memory is never pinned: a source was
 * copied into a staging buffer at enqueue, and the caller of a copy into it
 * waits for the copy.
 *
 * Kernels run through their C twin (twins.c), which sees the launch through
 * struct si_launch and asks mps__launch_access for every span it reads or
 * writes.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct si_op *mps__op_new(enum si_op_kind kind)
{
	struct si_op *op = calloc(1, sizeof(*op));

	if (op)
		op->kind = kind;
	return op;
}

void mps__op_free(struct si_op *op)
{
	switch (op->kind) {
	case SI_OP_COPY:
		free(op->copy.staging);
		free(op->copy.params);
		break;
	case SI_OP_KERNEL:
		free(op->kernel.params);
		if (op->kernel.mod)
			mps__module_put(op->kernel.mod);
		break;
	case SI_OP_RECORD:
	case SI_OP_WAIT:
		if (op->rec)
			mps__record_put(op->rec);
		break;
	case SI_OP_MEMSET:
	case SI_OP_MARKER:
	case SI_OP_HOSTFN:
	case SI_OP_VALUE_WAIT:
	case SI_OP_VALUE_WRITE:
		break;
	}
	free(op);
}

struct si_op *mps__op_clone(const struct si_op *op)
{
	struct si_op *c = mps__op_new(op->kind);

	if (!c)
		return NULL;
	switch (op->kind) {
	case SI_OP_COPY:
		c->copy = op->copy;
		c->copy.staging = NULL;
		c->copy.params = NULL;   /* only a capture reads them, from the original */
		if (op->copy.staging) {
			c->copy.staging = malloc(op->copy.bytes ? op->copy.bytes : 1);
			if (!c->copy.staging)
				goto err;
			memcpy(c->copy.staging, op->copy.staging, op->copy.bytes);
		}
		break;
	case SI_OP_MEMSET:
		c->memset = op->memset;
		break;
	case SI_OP_KERNEL:
		c->kernel = op->kernel;
		c->kernel.params = malloc(op->kernel.entry->param_bytes + 1);
		if (!c->kernel.params)
			goto err;
		memcpy(c->kernel.params, op->kernel.params, op->kernel.entry->param_bytes);
		c->kernel.mod->refs++;
		break;
	case SI_OP_HOSTFN:
		c->hostfn = op->hostfn;
		break;
	case SI_OP_VALUE_WAIT:
	case SI_OP_VALUE_WRITE:
		c->value_wait = op->value_wait;
		break;
	default:
		c->kind = SI_OP_MARKER;   /* records and waits are made afresh, not copied */
		break;
	}
	return c;
err:
	free(c);
	return NULL;
}

/* The bytes one side of a copy spans. */
static size_t copy_span(const struct si_op *op, size_t pitch, size_t slice)
{
	size_t rows = op->copy.rows ? op->copy.rows : 1, slices = op->copy.slices ? op->copy.slices : 1;

	return (slices - 1) * slice + (rows - 1) * pitch + op->copy.bytes;
}

static CUresult run_copy(struct si_op *op)
{
	struct si_range *d = NULL, *s = NULL;
	size_t rows = op->copy.rows ? op->copy.rows : 1, slices = op->copy.slices ? op->copy.slices : 1;
	const uint8_t *src = op->copy.staging ? op->copy.staging : op->copy.src;
	bool ok = true;

	mps__lock();
	if (op->copy.pin_dst)
		ok = (d = mps__range_pin((uintptr_t)op->copy.dst, copy_span(op, op->copy.dpitch, op->copy.dslice),
					 -1)) != NULL;
	if (ok && op->copy.pin_src)
		ok = (s = mps__range_pin((uintptr_t)op->copy.src, copy_span(op, op->copy.spitch, op->copy.sslice),
					 -1)) != NULL;
	mps__unlock();
	for (size_t z = 0; ok && z < slices; z++)
		for (size_t y = 0; y < rows; y++)
			memmove((uint8_t *)op->copy.dst + z * op->copy.dslice + y * op->copy.dpitch,
				src + z * op->copy.sslice + y * op->copy.spitch, op->copy.bytes);
	mps__lock();
	if (d)
		mps__range_unpin(d);
	if (s)
		mps__range_unpin(s);
	mps__unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

static CUresult run_memset(struct si_op *op)
{
	size_t bytes = op->memset.count * op->memset.width;
	struct si_range *r;

	mps__lock();
	r = mps__range_pin((uintptr_t)op->memset.dst, bytes, -1);
	mps__unlock();
	if (!r)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	switch (op->memset.width) {
	case 1:
		memset(op->memset.dst, (int)op->memset.value, op->memset.count);
		break;
	case 2: {
		uint16_t *p = op->memset.dst, v = (uint16_t)op->memset.value;

		for (size_t i = 0; i < op->memset.count; i++)
			p[i] = v;
		break;
	}
	default: {
		uint32_t *p = op->memset.dst, v = op->memset.value;

		for (size_t i = 0; i < op->memset.count; i++)
			p[i] = v;
		break;
	}
	}
	mps__lock();
	mps__range_unpin(r);
	mps__unlock();
	return CUDA_SUCCESS;
}

static CUresult run_kernel(struct si_op *op, int device, unsigned sm_first, unsigned sm_count)
{
	struct si_launch l = {
		.params = op->kernel.params,
		.entry = op->kernel.entry,
		.mod = op->kernel.mod,
		.device = device,
		.sm_first = op->kernel.sm_count ? op->kernel.sm_first : sm_first,
		.sm_count = op->kernel.sm_count ? op->kernel.sm_count : sm_count ? sm_count : SI_SM_COUNT,
	};
	CUresult res;

	memcpy(l.grid, op->kernel.grid, sizeof(l.grid));
	memcpy(l.block, op->kernel.block, sizeof(l.block));
	res = op->kernel.twin->run(&l);
	mps__lock();
	for (unsigned i = 0; i < l.npinned; i++)
		mps__range_unpin(l.pinned[i]);
	mps__unlock();
	return res;
}

CUresult mps__op_execute(struct si_op *op, int device, unsigned sm_first, unsigned sm_count)
{
	switch (op->kind) {
	case SI_OP_COPY:
		return run_copy(op);
	case SI_OP_MEMSET:
		return run_memset(op);
	case SI_OP_KERNEL:
		return run_kernel(op, device, sm_first, sm_count);
	default:
		return CUDA_SUCCESS;
	}
}

const void *mps__launch_param(const struct si_launch *l, unsigned i)
{
	return l->params + l->entry->params[i].offset;
}

CUresult mps__launch_access(struct si_launch *l, uint64_t addr, size_t bytes, size_t align,
			    void **out)
{
	struct si_range *r;

	if (align > 1 && addr % align)
		return CUDA_ERROR_MISALIGNED_ADDRESS;
	if (l->npinned == sizeof(l->pinned) / sizeof(l->pinned[0]))
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;      /* a twin touching too many buffers */
	mps__lock();
	r = mps__range_pin((uintptr_t)addr, bytes ? bytes : 1, l->device);
	mps__unlock();
	if (!r)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	l->pinned[l->npinned++] = r;
	*out = (void *)(uintptr_t)addr;
	return CUDA_SUCCESS;
}

CUresult mps__launch_global(struct si_launch *l, const char *name, size_t bytes, void **out)
{
	int g = mps__ptx_global(&l->mod->img, name);

	if (g < 0 || l->mod->img.globals[g].size < bytes)
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	return mps__launch_access(l, l->mod->globals[g]->base, bytes, 1, out);
}
