// SPDX-License-Identifier: MIT
/*
 * Which server thread serves which client, and when threads spin or sleep.
 *
 * A fixed pool of service threads (OPENMPS_THREADS, default a quarter of
 * the CPUs, at least three)
 * serves every client: a thread takes a client, runs up to a turn's worth of
 * its messages (MPS_TURN_MSGS or MPS_TURN_NS, whichever comes first), polls
 * its completions, and puts it back at the tail of the run queue if it has
 * more — so one client's flood of launches delays another's synchronize by
 * at most one turn. At any moment a client is owned by at most one thread,
 * which alone touches its handles, objects and memory account.
 *
 * A client whose ring is empty becomes "hot" for a while: threads that have
 * nothing queued spin over the hot clients' rings and completions (in the
 * spirit of io_uring's SQPOLL), so a launch or a synchronize is picked up
 * within a microsecond without a wake-up. How many threads may spin, and for
 * how long, follows the CPU pressure (/proc/pressure/cpu, else the run queue
 * length in /proc/loadavg): with free CPUs a few spin; when runnable threads
 * outnumber the CPUs none does, and clients are told through their region
 * to spin less too. A client idle past its hot time is "armed": its pending
 * completions go to its waiter thread, it sets NEED_WAKEUP in its ring, and
 * its next message writes its eventfd, on which idle threads sleep (epoll).
 *
 * States (mps_client.run, atomic; a thread takes a client by a CAS to OWNED,
 * and only the owner moves it elsewhere):
 *   IDLE     armed; its eventfd brings it back
 *   QUEUED   in the run queue
 *   HOT      in the hot list, watched by the spinning threads
 *   OWNED    a thread is serving it
 *   GONE     being torn down
 * A client is HOT only while at least one thread spins: the last spinner to
 * stop arms every hot client first. So no message is ever left unseen.
 */
#ifndef MPS_SERVER_SCHED_H
#define MPS_SERVER_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"

/* Operation counters: the operations, then copies by their host side. */
#define MPS_OP_STATS (MPS_OP_COUNT + 6)

struct mps_client;

enum mps_run_state {
	MPS_RUN_IDLE = 0,
	MPS_RUN_QUEUED,
	MPS_RUN_HOT,
	MPS_RUN_OWNED,
	MPS_RUN_GONE,
};

#define MPS_TURN_MSGS 64
#define MPS_TURN_NS   (200ull * 1000)

/* Starts the service threads. 0 or -errno. */
int mps_sched_start(void);

/* Stops the threads, once every client is gone (the server is ending), and
 * joins them and the teardown threads. */
void mps_sched_stop(void);

/* Hands a new client to the threads, which set it up, greet it and serve
 * it. The client is in the server's list already. */
void mps_sched_add(struct mps_client *c);

/* Makes a thread look at the client soon (it has died). Any thread. */
void mps_sched_kick(struct mps_client *c);

/* The spin time clients are told to use now, in nanoseconds (also written
 * into each client's region when it changes). */
uint32_t mps_sched_client_spin_ns(void);

/* Where the service threads' time went since the server started, summed
 * over the pool (get_metrics): what an operator needs to tell forwarding
 * from polling, and the server's own work from the driver's. */
struct mps_sched_stats {
	uint64_t cpu_ns;        /* CPU time of the service threads */
	uint64_t serve_ns;      /* wall time running clients' messages */
	uint64_t launch_ns;     /* of which inside the driver's launch calls */
	uint64_t launches;      /* those calls */
	uint64_t turns;         /* turns that ran at least one message */
	uint64_t wakeups;       /* sleeps in epoll that ended with an event */
	uint64_t replays;       /* graph launches that stood for a chunk of launches (replay.h) */
	uint64_t replayed;      /* the kernels in them */
	uint64_t replay_ns;     /* time in those graph launches, their parameter updates included */
	uint64_t replay_updates;        /* kernel nodes given new arguments before such a launch */
	uint64_t replay_update_ns;      /* the time those updates took */
	uint64_t poll_ns;       /* wall time looking at clients' pending completions */
	uint64_t op_ns[MPS_OP_STATS];   /* wall time running messages, by operation (mps_sched_op_name) */
	uint64_t op_n[MPS_OP_STATS];    /* and how many */
};

/* Name of the operation counter i: an operation, or a copy by where its
 * host side is (MPS_OP_COPY's own counter then stays at zero). NULL past
 * the last. */
const char *mps_sched_op_name(unsigned int i);

void mps_sched_stats(struct mps_sched_stats *s);

/* Counts one driver launch call of `ns` on the calling service thread
 * (other threads' calls are not counted). */
void mps_sched_note_launch(uint64_t ns);

/* Counts a graph launch standing for `kernels` launches (replay.h), `ns`
 * in all, of which `update_ns` giving `updates` nodes new arguments. */
void mps_sched_note_replay(unsigned int kernels, uint64_t ns, unsigned int updates, uint64_t update_ns);

/* Whether CPUs are scarce now: runnable threads waited for a CPU over a
 * fifth of the time, or clients active in the last 10 ms number three
 * quarters of the CPUs (each wants one). Sampled every millisecond. */
bool mps_sched_busy(void);

/* Whether the clients' launches, priced one by one at what a driver launch
 * costs lately, would take over OPENMPS_REPLAY_DEMAND_PCT (default 75) of
 * the serving threads' time: the service threads are then the clients'
 * bottleneck, whether or not CPUs are scarce. Weighed every 20 ms; a high
 * reading holds for a second. */
bool mps_sched_launch_bound(void);

#endif
