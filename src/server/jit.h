// SPDX-License-Identifier: MIT
/*
 * JIT options on the server's side (see jit.c): the program's numeric
 * options, and the server's own log buffers and wall time in place of the
 * program's, for the driver calls that compile or link (cuLinkCreate,
 * cuLinkAddData, cuModuleLoadDataEx).
 */
#ifndef MPS_SERVER_JIT_H
#define MPS_SERVER_JIT_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "common/wire.h"

#define MPS_JIT_LOG_BYTES 3072   /* each log; both fit a reply slot */
#define MPS_JIT_OWN_OPTS 5       /* the logs, their sizes, the wall time */

struct mps_client;

/* Options for one driver call, and what the driver writes through them; it
 * must live as long as the driver may write (a link: until destroyed). */
struct mps_jit {
	unsigned int n;
	CUjit_option opt[MPS_LINK_OPTS + MPS_JIT_OWN_OPTS];
	void *val[MPS_LINK_OPTS + MPS_JIT_OWN_OPTS];
	char info[MPS_JIT_LOG_BYTES], error[MPS_JIT_LOG_BYTES];
	size_t info_mark, error_mark;     /* each log's length when this step began */
	uint64_t info_sum, error_sum;     /* and a hash of it then */
};

/* The client's options (n of them) into opt/val; every one must be a plain
 * number, one an input takes if per_input. Returns how many, or -1. */
int mps_jit_options(const struct mps_link_opt *in, uint32_t n, bool per_input, CUjit_option *opt, void **val);

/* j with the client's options and the server's logs and wall time after
 * them. 0, or -1 if an option is not a plain number. */
int mps_jit_init(struct mps_jit *j, const struct mps_link_opt *in, uint32_t n);

/* A link's next step (an input, the completion) begins: its answer gives
 * what the driver adds to each log from now on, as the program's buffers
 * hold natively after each step, where the driver would append to what the
 * step before wrote. */
void mps_jit_step(struct mps_jit *j);

/* Answers the call in slot with r and j's logs, wall time and threads per
 * block (struct mps_link_reply in the slot's data); j may be NULL. */
void mps_jit_answer(struct mps_client *c, uint32_t slot, const struct mps_jit *j, CUresult r);

#endif
