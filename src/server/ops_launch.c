// SPDX-License-Identifier: MIT
/*
 * Kernel launches. The client packed the arguments into one buffer with the
 * layout the server gave it (ops_module.c), so the server only points an
 * argument array into the message and launches: no round trip, no second
 * copy. Launch attributes are accepted only from a list of those that carry
 * plain values — an attribute holding an event or a pointer into the client
 * would let a client name something that is not its own.
 */
#include <string.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/sched.h"
#include "server/server.h"
#include "server/streams.h"

void mps__op_launch(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_launch *q = (const void *)m;
	const struct mps_launch_attr *wa = (const void *)(q + 1);
	CUlaunchAttribute at[MPS_LAUNCH_ATTRS_MAX + 1];
	void *kp[MPS_FUNC_PARAMS_MAX];
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
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st) {
		mps__defer_error(c, r, "cuLaunchKernel");
		return;
	}
	if (!f->is_kernel && f->device != st->ctx->device) {
		mps__defer_error(c, CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel");
		return;
	}
	for (uint32_t i = 0; i < f->nparams; i++)
		kp[i] = (void *)(args + f->param[2 * i]);
	mps_fault_note_kernel(c, f);
	mps_store_relaxed(&c->stats.launches, c->stats.launches + 1);
	timed = mps_gputime_begin(c, st);
	t0 = mps_now_ns();
	if (q->nattrs == 0 && !(m->flags & MPS_LAUNCH_COOPERATIVE)) {
		r = mps_drv.cuLaunchKernel(f->f, q->grid[0], q->grid[1], q->grid[2], q->block[0], q->block[1],
					   q->block[2], q->shared_mem, st->s, f->nparams ? kp : NULL, NULL);
	} else {
		CUlaunchConfig cfg;

		for (uint32_t i = 0; i < q->nattrs; i++) {
			if (!mps_launch_attr_plain(wa[i].id)) {
				if (timed >= 0)
					mps_gputime_end(c, st, timed, false);
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
		memset(&cfg, 0, sizeof(cfg));
		cfg.gridDimX = q->grid[0];
		cfg.gridDimY = q->grid[1];
		cfg.gridDimZ = q->grid[2];
		cfg.blockDimX = q->block[0];
		cfg.blockDimY = q->block[1];
		cfg.blockDimZ = q->block[2];
		cfg.sharedMemBytes = q->shared_mem;
		cfg.hStream = st->s;
		cfg.attrs = na ? at : NULL;
		cfg.numAttrs = na;
		r = mps_drv.cuLaunchKernelEx(&cfg, f->f, f->nparams ? kp : NULL, NULL);
	}
	mps_sched_note_launch(mps_now_ns() - t0);
	if (timed >= 0)
		mps_gputime_end(c, st, timed, r == CUDA_SUCCESS);
	mps__defer_error(c, r, "cuLaunchKernel");
}
