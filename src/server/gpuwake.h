// SPDX-License-Identifier: MIT
/*
 * Waking the client threads that sleep on a word the GPU answers (a reply
 * slot or a staging chunk the GPU stores DONE into, common/region.h) as
 * soon as the store has come, with no driver call: the service threads look
 * at the words the clients flagged (mps_region.gpu_sleepers) as they go
 * about their work.
 */
#ifndef MPS_SERVER_GPUWAKE_H
#define MPS_SERVER_GPUWAKE_H

#include <stdint.h>

/* A client asked to be woken (MPS_OP_SLOT_WAKE): clients sleep on GPU
 * words now, so the service threads look for a while. */
void mps_gpuwake_note(uint64_t now);

/* Called by service threads wherever they loop: at most one looks at a
 * time, at most every few microseconds, and only for a while after a
 * client last asked to be woken. */
void mps_gpuwake_poll(uint64_t now);

/* For get_metrics: the looks made and the sleepers they woke. */
void mps_gpuwake_stats(uint64_t *looks, uint64_t *wakes);

#endif
