// SPDX-License-Identifier: MIT
/*
 * Kernel launches: the hot path. A launch is one message built in place in
 * the ring — the launch header, any launch attributes, then the arguments
 * packed at the offsets the server gave for this function — and the call
 * returns as soon as it is queued. What the driver would refuse at the
 * launch itself (bad dimensions, too many threads per block, arguments given
 * two ways) is refused here, synchronously, as the driver does; anything the
 * GPU reports later surfaces at the next synchronising call.
 */
#include <string.h>

#include "client/api.h"
#include "client/client.h"

/* wire.h names the attributes that may travel by number. */
_Static_assert(CU_LAUNCH_ATTRIBUTE_COOPERATIVE == 2 && CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == 4 &&
	       CU_LAUNCH_ATTRIBUTE_PRIORITY == 8 && CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN == 10 &&
	       CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT == 14, "launch attribute numbers");

struct launch {
	unsigned int grid[3], block[3], shared;
	CUstream stream;
	bool per_thread;
	void **params;
	void **extra;
	const CUlaunchAttribute *attrs;
	unsigned int nattrs;
	uint16_t flags;
};

CUresult mps__args_size(const struct mps_func *f, void **params, void **extra, const void **packed,
			size_t *packed_len, size_t *size)
{
	*packed = NULL;
	*packed_len = 0;
	*size = f->arg_size;
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra) {
		const void *buf = NULL;
		size_t n = 0, *psize = NULL;

		for (void **e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
			if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = e[1];
			else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE)
				psize = e[1];
			else
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (psize)
			n = *psize;
		/* A buffer shorter than the parameters is the driver's to accept
		 * (NCCL passes only the part of its argument block it uses): the
		 * rest goes as zeros. */
		if ((f->arg_size && !buf) || n > MPS_ARGS_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		*packed = buf;
		*packed_len = n;
		*size = n > f->arg_size ? n : f->arg_size;
	} else if (f->nparams && !params) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

void mps__args_pack(const struct mps_func *f, void **params, const void *packed, size_t packed_len, size_t size,
		    uint8_t *dst)
{
	if (packed) {
		memcpy(dst, packed, packed_len);
		memset(dst + packed_len, 0, size - packed_len);
		return;
	}
	memset(dst, 0, size);
	for (uint32_t i = 0; i < f->nparams; i++)
		memcpy(dst + f->param[2 * i], params[i], f->param[2 * i + 1]);
}

static CUresult launch(CUfunction hf, const struct launch *l)
{
	struct mps_func *f = mps__func(hf);
	const void *packed = NULL;
	size_t arg_size, packed_len, threads;
	struct mps_msg_launch *m;
	uint32_t stream, ctx, na = 0;
	uint8_t *args, small[1024], *own = NULL;
	CUresult r;

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	for (int i = 0; i < 3; i++)
		if (!l->grid[i] || !l->block[i])
			return CUDA_ERROR_INVALID_VALUE;
	if (l->grid[1] > 65535 || l->grid[2] > 65535 || l->grid[0] > 0x7fffffffu ||
	    l->block[0] > 1024 || l->block[1] > 1024 || l->block[2] > 64)
		return CUDA_ERROR_INVALID_VALUE;
	threads = (size_t)l->block[0] * l->block[1] * l->block[2];
	if (threads > 1024 || (f->max_threads > 0 && threads > (size_t)f->max_threads))
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__args_size(f, l->params, l->extra, &packed, &packed_len, &arg_size);
	if (r != CUDA_SUCCESS)
		return r;
	for (unsigned int i = 0; i < l->nattrs; i++) {
		if (l->attrs[i].id == CU_LAUNCH_ATTRIBUTE_IGNORE)
			continue;
		if (!mps_launch_attr_plain(l->attrs[i].id)) {
			mps__unsupported("cuLaunchKernelEx with that launch attribute");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		if (++na > MPS_LAUNCH_ATTRS_MAX)
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (!packed && l->params && arg_size && mps__migrate_on()) {
		/* An argument may sit in managed memory that is about to go to
		 * the device (migrate.c); the copy of it is taken now, not while
		 * the ring is held, where its fault could not be served. */
		own = arg_size <= sizeof(small) ? small : malloc(arg_size);
		if (!own)
			return CUDA_ERROR_OUT_OF_MEMORY;
		mps__args_pack(f, l->params, NULL, 0, arg_size, own);
		packed = own;
		packed_len = arg_size;
	}
	r = mps__stream_resolve(l->stream, l->per_thread, &stream, &ctx);
	if (r == CUDA_SUCCESS)
		r = mps__mvar_send(stream, ctx);   /* the program's changes to __managed__ variables, ahead */
	if (r == CUDA_SUCCESS)
		r = mps__migrate_to_device(stream, 0, 0);   /* and to managed memory (migrate.c) */
	if (r != CUDA_SUCCESS)
		goto out;
	m = mps__ring_begin(MPS_OP_LAUNCH, ctx,
			    (uint32_t)(sizeof(*m) + na * sizeof(struct mps_launch_attr) + arg_size), l->flags, &r);
	if (!m)
		goto out;
	m->func = f->handle;
	m->stream = stream;
	memcpy(m->grid, l->grid, sizeof(m->grid));
	memcpy(m->block, l->block, sizeof(m->block));
	m->shared_mem = l->shared;
	m->nattrs = na;
	m->arg_size = (uint32_t)arg_size;
	m->pad = 0;
	na = 0;
	for (unsigned int i = 0; i < l->nattrs; i++) {
		struct mps_launch_attr *a = (struct mps_launch_attr *)(m + 1) + na;

		if (l->attrs[i].id == CU_LAUNCH_ATTRIBUTE_IGNORE)
			continue;
		a->id = (uint32_t)l->attrs[i].id;
		a->pad = 0;
		memcpy(a->value, &l->attrs[i].value, sizeof(a->value));
		na++;
	}
	args = (uint8_t *)((struct mps_launch_attr *)(m + 1) + na);
	mps__args_pack(f, l->params, packed, packed_len, arg_size, args);
	mps__ring_end();
	r = CUDA_SUCCESS;
out:
	if (own && own != small)
		free(own);
	return r;
}

static CUresult launch_kernel_common(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
				     CUstream s, void **params, void **extra, bool per_thread, uint16_t flags)
{
	struct launch l = {
		.grid = { gx, gy, gz }, .block = { bx, by, bz }, .shared = shared, .stream = s,
		.per_thread = per_thread, .params = params, .extra = extra, .flags = flags,
	};

	return launch(f, &l);
}

static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			      unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
			      void **extra)
{
	return launch_kernel_common(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, false, 0);
}

static CUresult launch_kernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
				   void **extra)
{
	return launch_kernel_common(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, true, 0);
}

static CUresult launch_cooperative(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params)
{
	return launch_kernel_common(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL, false, MPS_LAUNCH_COOPERATIVE);
}

static CUresult launch_cooperative_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
					unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
					CUstream s, void **params)
{
	return launch_kernel_common(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL, true, MPS_LAUNCH_COOPERATIVE);
}

static CUresult launch_ex_common(const CUlaunchConfig *c, CUfunction f, void **params, void **extra, bool per_thread)
{
	struct launch l;

	if (!c || (c->numAttrs && !c->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	l = (struct launch){
		.grid = { c->gridDimX, c->gridDimY, c->gridDimZ },
		.block = { c->blockDimX, c->blockDimY, c->blockDimZ },
		.shared = c->sharedMemBytes, .stream = c->hStream, .per_thread = per_thread,
		.params = params, .extra = extra, .attrs = c->attrs, .nattrs = c->numAttrs,
	};
	return launch(f, &l);
}

static CUresult launch_kernel_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	return launch_ex_common(c, f, params, extra, false);
}

static CUresult launch_kernel_ex_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	return launch_ex_common(c, f, params, extra, true);
}

const struct mps_impl mps__launch_api[] = {
	MPS_IMPL(cuLaunchKernel, launch_kernel),
	MPS_IMPL_AS(cuLaunchKernel_ptsz, cuLaunchKernel, launch_kernel_ptsz),
	MPS_IMPL(cuLaunchCooperativeKernel, launch_cooperative),
	MPS_IMPL_AS(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, launch_cooperative_ptsz),
	MPS_IMPL(cuLaunchKernelEx, launch_kernel_ex),
	MPS_IMPL_AS(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, launch_kernel_ex_ptsz),
	MPS_IMPL_END
};
