// SPDX-License-Identifier: MIT
/*
 * Launch replay: a client's repeating chunks of kernel launches, each made
 * as one graph launch.
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
 * messages of that client; runs are cut into chunks, and chunks are what
 * is learned and replayed. By default a chunk ends after a launch of
 * certain kernels once it has 8 launches (a hash of the kernel's name,
 * parameters, block and shared memory; one kernel in four ends chunks),
 * at 32, or where its run ends: the same sequence of kernels is cut the
 * same way wherever it comes (each layer of a model, each token of a
 * decoder, whatever came before it), so a chunk is found again though the
 * runs around it differ. A decoder's step is a dozen runs between small
 * copies, whose kernels change with the token (another attention kernel
 * as the cache grows): kept as whole runs, 40 of its 180 runs a request
 * were new each time; as chunks, its kernels' few sequences come back.
 * OPENMPS_REPLAY_SEGMENT=N cuts every N launches instead (0: a chunk is
 * its whole run, up to 1024 launches).
 *
 * Each chunk's launches are recorded (function, grid, block, shared
 * memory, attributes, argument bytes: at most 4 KiB a launch, which
 * otherwise goes alone, and 256 KiB a chunk). A client's server keeps up
 * to 128 chunks it made (2 MiB of arguments in all, 256 executable
 * graphs); chunks seen once hold at most half the slots (the one seen
 * longest ago goes first), so chunks that never come back do not push out
 * those that do. A chunk seen a second time (2 launches or more) becomes
 * a graph: a chain of kernel nodes in that order, captured from its
 * launches on their stream (so launch attributes — cluster shape,
 * programmatic serialization, priority — mean in it what they meant on the
 * stream), instantiated.
 *
 * Then, while CPUs are scarce (the scheduler's pressure is not "free":
 * replay trades a chunk's first kernel's start for CPU), while the service
 * threads are launch-bound (mps_sched_launch_bound) or with
 * OPENMPS_REPLAY=always, the launches of a chunk that so far starts as a
 * kept chunk with a graph does (the same functions, blocks, shared memory
 * and attributes in order; grids may differ, set like arguments, unless
 * OPENMPS_REPLAY_GRIDS=0) are held. When the chunk ends as that one does,
 * nodes whose arguments or grid differ are set, and the graph is launched
 * on the stream (of up to four executable graphs of it, each with the
 * arguments it last had, the one needing the fewest nodes set; a new one
 * is a build). Chunks keep the GPU busy while the client is still making
 * its run's later launches (a 14-kernel CNN at 16 processes: one graph for
 * the whole run made the result wait 185 µs of a 486 µs request, segments
 * of 8 123 µs of 438). Each graph launch costs the server about as much as
 * a kernel launch (7-9 µs with two threads in the context), so short
 * chunks cost more than they save (4: 35 µs of graph launches a request
 * against 20 with 8 and 14 with one graph). A launch that does not match,
 * any other message of the client, or a hold with no launch added for
 * OPENMPS_REPLAY_HOLD_US (default 4000: longer than a busy machine keeps a
 * client from its CPU; the scheduler watches a client that holds launches,
 * and checks) launches what is held one by one first, in order: nothing is
 * reordered, and a held launch always goes. A client builds at most 32
 * graphs at once and then one more every 20 ms, however its chunks
 * change; when its executable graphs reach 256 (an 8-node one holds 132
 * KiB of device memory and 65 KiB of the server's, bench/execcost.c),
 * those of the chunk seen longest ago go. Launches of a client with a stream capture under way are
 * never held. Freeing a stream or a module forgets what was learned.
 *
 * OPENMPS_REPLAY: 0 off; 1 (default) hold while CPUs are busy or the service
 * threads are launch-bound (mps_sched_launch_bound); always.
 * OPENMPS_REPLAY_SEGMENT: launches a chunk has (0: the whole run; unset:
 * cut by content).
 * OPENMPS_REPLAY_GRIDS: 1 (default): a node's grid is set like its
 * arguments; 0: a launch with another grid is another chunk.
 * OPENMPS_REPLAY_ALTS: executable graphs per chunk besides the first
 * (default 3: each holds about 132 KiB of device memory; 12, for a decoder
 * whose 12 layers share chunks, did worse in a 4 s window, where new ones
 * were still being made at 47 µs and first launched at 14 µs each).
 * OPENMPS_REPLAY_EXECS: executable graphs per client (default 256).
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

/* Reads the OPENMPS_REPLAY variables. */
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
 * forget: the kept chunks go too. */
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

/* What happened to runs and holds since the server started. */
struct mps_replay_counts {
	uint64_t expired;       /* holds that ran out of time */
	uint64_t let_go;        /* holds a launch or a message that did not match ended */
	uint64_t learned;       /* chunks seen for the first time (and kept) */
	uint64_t seen;          /* chunks that were a kept one */
	uint64_t too_long;      /* launches with too many argument bytes to hold */
	uint64_t dropped;       /* kept chunks that made room for others */
	uint64_t built;         /* kept chunks made graphs */
	uint64_t unbuilt;       /* kept chunks whose graphs could not be made */
	uint64_t over_limit;    /* graphs not made: the client's memory limit would not hold them */
};

/* Drops every executable graph of the client's (their memory is charged to
 * it): an allocation past its limit may fit then. True if any went. */
bool mps_replay_shed(struct mps_client *c);
void mps_replay_stats(struct mps_replay_counts *out);

/* The client is gone: drops what is held, frees the graph. */
void mps_replay_free(struct mps_client *c);

#endif
