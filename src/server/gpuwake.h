// SPDX-License-Identifier: MIT
/*
 * Waking the client threads that sleep on a word the GPU answers (a reply
 * slot or a staging chunk the GPU stores DONE into, common/region.h) as
 * soon as the store has come, with no driver call: the service threads look
 * at the words the clients flagged (mps_region.gpu_sleepers) as they go
 * about their work. And telling, from the same words, which clients wait
 * for the GPU now (the scheduler keeps a thread watching them).
 */
#ifndef MPS_SERVER_GPUWAKE_H
#define MPS_SERVER_GPUWAKE_H

#include <stdbool.h>
#include <stdint.h>

/* A client asked to be woken (MPS_OP_SLOT_WAKE): clients sleep on GPU
 * words now, so the service threads look for a while. */
void mps_gpuwake_note(uint64_t now);

/* Called by service threads wherever they loop: at most one looks at a
 * time, at most every few microseconds, and only for a while after a
 * client last asked to be woken. */
void mps_gpuwake_poll(uint64_t now);

struct mps_client;

/* How long after the server hands a wait to the GPU it counts the client as
 * waiting (a client spins through at most 2 ms of a GPU wait, then sleeps). */
#define MPS_GPU_WATCH_NS (4ull * 1000 * 1000)

/* The server has had the GPU store DONE into the client's word w (a reply
 * slot or a staging chunk, numbered as in MPS_OP_SLOT_WAKE): the client
 * waits on it from now. Called by the client's owner. */
void mps_gpuwake_handed(struct mps_client *c, uint32_t w, uint64_t now);

/* True while the client waits for a word the GPU stores (handed to it less
 * than MPS_GPU_WATCH_NS ago, the store not seen yet): its next message
 * comes the moment the store does, so the scheduler keeps it hot and a
 * thread watching. A wait seen ended makes the client active now. Reads
 * the words in the client's region (advice only: a client that tampers
 * with them changes only how closely it is watched). Caller owns the
 * client, or holds the scheduler's lock while it is hot. */
bool mps_gpuwake_waiting(struct mps_client *c, uint64_t now);

/* For get_metrics: the looks made and the sleepers they woke. */
void mps_gpuwake_stats(uint64_t *looks, uint64_t *wakes);

#endif
