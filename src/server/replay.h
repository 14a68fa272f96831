// SPDX-License-Identifier: MIT
/*
 * Launch replay: a client's repeating run of kernel launches, made as one
 * graph launch.
 *
 * Every client's launches reach the driver through the server's threads in
 * one context, where the driver's launch path costs 3.7 us of CPU alone and
 * 6-9 us with 4-8 threads launching at once; a 14-kernel graph costs 0.7-1.1
 * us a kernel (bench/mtlaunch.c, MTLAUNCH_GRAPH). Serving loops repeat
 * themselves: between a request's input copy and its result copy, the same
 * kernels with the same shapes, most arguments the same (a caching
 * allocator hands back the same blocks).
 *
 * A run is the launches of one client on one stream between two other
 * messages of that client. Each run's launches are recorded (function,
 * grid, block, shared memory, attributes, argument bytes: at most 4 KiB a
 * launch and 256 KiB a run, so a client cannot make the server keep much).
 * A run seen twice in a row (4 to 256 launches) becomes graphs, one for
 * each segment of OPENMPS_REPLAY_SEGMENT launches (default 8; 0: one for
 * the whole run): a chain of kernel nodes in that order, instantiated.
 * Then, while CPUs are scarce (the scheduler's pressure is not "free":
 * replay trades a segment's first kernel's start for CPU), while the
 * service threads are launch-bound (mps_sched_launch_bound) or with
 * OPENMPS_REPLAY=always, the launches of a run that matches it so far (the
 * same functions, grids, blocks, shared memory and attributes in order;
 * with OPENMPS_REPLAY_GRIDS=1 grids may differ) are held; when a segment's last one
 * comes, nodes whose arguments or grid differ are set, and the segment's graph is launched on the stream (of up to four
 * executable graphs of it, each with the arguments it last had, the one
 * needing the fewest nodes set; a new one is a build). Segments keep the
 * GPU busy while the client is still making the run's later launches: with
 * one graph for a whole run the GPU started a request's first kernel only
 * once its last was launched, and the request's result waited for all of
 * them (a 14-kernel CNN at 16 processes: 185 µs of a 486 µs request; 123
 * µs of 438 with segments of 8). Each graph launch costs the server about
 * as much as a kernel launch (7-9 µs with two threads in the context), so
 * shorter segments cost more than they save (4: 35 µs of graph launches a
 * request against 20 with 8 and 14 with one graph). A
 * launch that does not match, any other message of the client, or a hold
 * with no launch added for OPENMPS_REPLAY_HOLD_US (default 4000: longer
 * than a busy machine keeps a client from its CPU; the scheduler watches
 * a client that holds launches, and checks) launches what is held one by
 * one first, in order: nothing is reordered, and a held launch always
 * goes. A run that differs from the learned one replaces it after it
 * too is seen twice; a client builds at most 32 graphs at once and then
 * one more every 100 ms, however its runs change. The
 * graph is captured from the run's launches on their stream, so launch
 * attributes (cluster shape, programmatic serialization, priority ...)
 * mean in it what they meant on the stream. Launches of a client with a
 * stream capture under way are never held. Freeing a stream or a module
 * forgets what was learned.
 *
 * OPENMPS_REPLAY: 0 off; 1 (default) hold while CPUs are busy or the service
 * threads are launch-bound (mps_sched_launch_bound); always.
 * OPENMPS_REPLAY_SEGMENT: launches a graph covers (0: the whole run).
 * OPENMPS_REPLAY_GRIDS: 1: a node's grid is set like its arguments; 0
 * (default) a launch with another grid ends the match.
 * Only the client's owner (its service thread) calls these; held_at is read
 * by any thread.
 */
#ifndef MPS_SERVER_REPLAY_H
#define MPS_SERVER_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "common/wire.h"

struct mps_client;
struct mps_sfunc;
struct mps_sstream;

/* Reads OPENMPS_REPLAY, OPENMPS_REPLAY_HOLD_US and OPENMPS_REPLAY_SEGMENT. */
void mps_replay_init(void);

/* Whether runs of launches are ever replayed (OPENMPS_REPLAY is not 0). */
bool mps_replay_enabled(void);

/* Before a launch's stream is resolved: held launches of another stream
 * go first (resolving may order streams with events). */
void mps_replay_before(struct mps_client *c, const struct mps_msg *m, uint32_t stream);

/* A launch on st, its arguments packed, its attributes checked: recorded,
 * and held or made part of a graph launch (true: the caller launches
 * nothing), or left to the caller (false) after whatever was held went. */
bool mps_replay_launch(struct mps_client *c, const struct mps_msg *m, struct mps_sstream *st, struct mps_sfunc *f,
		       const struct mps_msg_launch *q, const uint8_t *args, const CUlaunchAttribute *attrs,
		       unsigned int nattrs);

/* Any other message of the client: the run ends; what is held goes first.
 * forget: the learned runs go too. */
void mps_replay_boundary(struct mps_client *c, bool forget);

/* A stream or module of the client is going: what was learned may name it. */
void mps_replay_forget(struct mps_client *c);

/* Launches what is held if `all` or the hold is older than the hold time. */
void mps_replay_expire(struct mps_client *c, uint64_t now, bool all);

/* Whether the client holds launches (any thread: a client that does is
 * kept watched, not left to sleep). */
bool mps_replay_holds(const struct mps_client *c);

/* Whether it holds launches the hold time has passed for (any thread: a
 * scanner takes the client to launch them). */
bool mps_replay_due(const struct mps_client *c, uint64_t now);

/* Holds that ran out of time, and holds a launch or a message that did not
 * match ended, since the server started. */
void mps_replay_stats(uint64_t *expired, uint64_t *let_go);

/* The client is gone: drops what is held, frees the graph. */
void mps_replay_free(struct mps_client *c);

#endif
