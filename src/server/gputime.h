// SPDX-License-Identifier: MIT
/*
 * GPU time: how long a client's kernels ran, for get_metrics and ps -v
 * (NVIDIA's tools charge every client's work to the server process). One
 * launch in OPENMPS_GPU_TIME_SAMPLE (default 16; 1: every launch) is timed
 * between two timing events recorded on its stream just before and just
 * after it, so the time counts from when the stream reached the kernel to
 * when the kernel ended — the kernel running, or waiting for SMs other
 * work holds, not the queue before it. Each sample stands for itself and
 * the launches since the last one (up to N - 1 launches since the last
 * sample are not counted yet): an estimate, exact with 1. Samples are
 * read back at the client's next sample, at get_metrics (on the main
 * thread) and at its teardown, never waited for but at teardown; a mutex
 * per client covers the slots (taken only by sampled launches and
 * readers), so launches between samples cost one counter. Graph launches
 * are not sampled; a run of launches the server replays as a graph
 * (replay.h) counts as one launch, timed as a whole.
 */
#ifndef MPS_SERVER_GPUTIME_H
#define MPS_SERVER_GPUTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#define MPS_GPUTIME_SLOTS 4

struct mps_client;
struct mps_sstream;

struct mps_gputime {
	pthread_mutex_t lock;               /* covers the slots and pending */
	uint32_t since;                     /* worker's: launches since the last sample */
	unsigned int pending;               /* slots in flight */
	struct mps_gputime_slot {
		CUevent a, b;                   /* made on first use, on `dev` */
		int dev;
		uint32_t weight;                /* launches it stands for; 0: free */
	} slot[MPS_GPUTIME_SLOTS];
	uint64_t ns;                        /* atomic: the estimate so far */
};

/* The sampling rate (main, at start). */
void mps_gputime_init(void);

/* Around a launch on st: begin returns the slot to end with, or -1 when
 * this launch is not sampled (then end is not called); end says whether
 * the kernel was launched. */
int mps_gputime_begin(struct mps_client *c, struct mps_sstream *st);
void mps_gputime_end(struct mps_client *c, struct mps_sstream *st, int slot, bool launched);

/* Adds what finished samples measured; with wait, waits for the rest
 * (teardown), and frees the events. Takes the client's lock. */
void mps_gputime_collect(struct mps_client *c, bool wait);

/* The client's lock, made when it is (0, or an errno). */
int mps_gputime_setup(struct mps_client *c);
void mps_gputime_free(struct mps_client *c);

#endif
