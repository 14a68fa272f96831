// SPDX-License-Identifier: MIT
/*
 * Kernel launches. The client packed the arguments into one buffer with the
 * layout the server gave it (ops_module.c), so the server only points an
 * argument array into the message and launches: no round trip, no second
 * copy. Launch attributes are accepted only from a list of those that carry
 * plain values — an attribute holding an event or a pointer into the client
 * would let a client name something that is not its own. A plain launch
 * may be held and made as part of a graph of its run (replay.h).
 */
#include <string.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/replay.h"
#include "server/sched.h"
#include "server/server.h"
#include "server/streams.h"

CUresult mps__launch(const struct mps_sfunc *f, const uint32_t grid[3], const uint32_t block[3], uint32_t smem,
		     CUstream s, const uint8_t *args, const CUlaunchAttribute *attrs, unsigned int nattrs)
{
	void *kp[MPS_FUNC_PARAMS_MAX];
	CUlaunchConfig cfg;

	for (uint32_t i = 0; i < f->nparams; i++)
		kp[i] = (void *)(args + f->param[2 * i]);
	if (!nattrs)
		return mps_drv.cuLaunchKernel(f->f, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, s,
					      f->nparams ? kp : NULL, NULL);
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = grid[0];
	cfg.gridDimY = grid[1];
	cfg.gridDimZ = grid[2];
	cfg.blockDimX = block[0];
	cfg.blockDimY = block[1];
	cfg.blockDimZ = block[2];
	cfg.sharedMemBytes = smem;
	cfg.hStream = s;
	cfg.attrs = (CUlaunchAttribute *)attrs;
	cfg.numAttrs = nattrs;
	return mps_drv.cuLaunchKernelEx(&cfg, f->f, f->nparams ? kp : NULL, NULL);
}

void mps__op_launch(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_launch *q = (const void *)m;
	const struct mps_launch_attr *wa = (const void *)(q + 1);
	CUlaunchAttribute at[MPS_LAUNCH_ATTRS_MAX + 1];
	struct mps_sfunc *f = mps__obj(c, q->func, MPS_H_FUNC);
	struct mps_sstream *st;
	const uint8_t *args;
	unsigned int na = 0;
	int timed;
	uint64_t t0;
	CUresult r;

	if (!f) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel");
		return;
	}
	if (q->nattrs > MPS_LAUNCH_ATTRS_MAX || q->arg_size > MPS_ARGS_MAX || q->arg_size < f->arg_size ||
	    sizeof(*q) + q->nattrs * sizeof(*wa) + q->arg_size > m->len) {
		mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel");
		return;
	}
	args = (const uint8_t *)(wa + q->nattrs);
	mps_replay_before(c, m, q->stream);
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st) {
		mps__defer_error(c, r, "cuLaunchKernel");
		return;
	}
	if (!f->is_kernel && f->device != st->ctx->device) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel");
		return;
	}
	for (uint32_t i = 0; i < q->nattrs; i++) {
		if (!mps_launch_attr_plain(wa[i].id)) {
			mps__defer_error(c, CUDA_ERROR_NOT_SUPPORTED, "cuLaunchKernelEx");
			return;
		}
		memset(&at[na], 0, sizeof(at[na]));
		at[na].id = (CUlaunchAttributeID)wa[i].id;
		memcpy(&at[na].value, wa[i].value, sizeof(wa[i].value));
		na++;
	}
	if (m->flags & MPS_LAUNCH_COOPERATIVE) {
		memset(&at[na], 0, sizeof(at[na]));
		at[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
		at[na].value.cooperative = 1;
		na++;
	}
	mps_fault_note_kernel(c, f);
	mps_store_relaxed(&c->stats.launches, c->stats.launches + 1);
	if (mps_replay_launch(c, m, st, f, q, args, at, na))
		return;   /* held, or launched in its run's graph */
	timed = mps_gputime_begin(c, st);
	t0 = mps_now_ns();
	r = mps__launch(f, q->grid, q->block, q->shared_mem, st->s, args, at, na);
	mps_sched_note_launch(mps_now_ns() - t0);
	if (timed >= 0)
		mps_gputime_end(c, st, timed, r == CUDA_SUCCESS);
	mps__defer_error(c, r, "cuLaunchKernel");
}
