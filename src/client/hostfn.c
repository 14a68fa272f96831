// SPDX-License-Identifier: MIT
/*
 * Host functions in stream order: cuLaunchHostFunc and cuStreamAddCallback
 * (and their per-thread-stream forms) run the program's function in this
 * process, on a thread of the library's own, when the stream reaches it;
 * the stream's later work waits for it to return.
 *
 * On first use the library makes a pinned region of MPS_HOSTFN_SLOTS words
 * and a pipe, gives both to the server (HOSTFN_SETUP, wire.h) and starts
 * the runner thread. Each host function takes a free slot and that slot's
 * next sequence number; the server queues a note into the pipe and a wait
 * on the slot's word. The runner reads the note, calls the function, stores
 * the sequence number into the word (the stream goes on) and frees the
 * slot. A program with every slot in flight waits for one in the call, as
 * a queue that is full would.
 *
 * Captured into a graph (a capture this process began) or added as a host
 * node (gnode.c), the function keeps its slot: every launch of the graph
 * notes it and waits for it again, and the slot's word counts the runs in
 * flight (the server adds one at each note, the runner takes it off), so
 * two launches at once of graphs sharing the slot each wait for both runs
 * rather than one ending the other's wait early. At most MAX_KEPT are kept at once; at
 * the limit, the server says which no graph, capture or executable graph
 * of the program's holds any more, and those come back (collect()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "common/atomics.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/wire.h"

struct slot {
	bool busy;
	bool kept;                  /* a graph's: not freed when it has run */
	bool pinned;                /* kept for good (a staging buffer's, gstage.c) */
	bool callback;              /* cuStreamAddCallback's form */
	uint32_t seq;               /* the last sequence number given out */
	uint64_t runs;              /* a kept slot's: its function's runs that have returned */
	CUhostFn fn;
	CUstreamCallback cb;
	CUstream stream;            /* as the program named it, for the callback */
	void *data;
};

/* Slots a graph may keep for good: the rest stay for streams. */
#define MAX_KEPT (MPS_HOSTFN_SLOTS / 2)

static struct {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	bool ready;
	bool gone;                  /* the server closed the pipe */
	CUresult failed;            /* the set-up's error, for every later call */
	uint32_t *words;
	int rfd;
	uint32_t nfree, nkept;
	struct slot slot[MPS_HOSTFN_SLOTS];
} hf = { .lock = PTHREAD_MUTEX_INITIALIZER, .freed = PTHREAD_COND_INITIALIZER, .rfd = -1 };

static unsigned long hf_runs;    /* host functions run: released after each */
static unsigned long hf_posts;   /* work that may run one, released as it goes */

void mps__hostfn_acquire(void)
{
	(void)mps_load_acquire(&hf_runs);
}

void mps__hostfn_release(void)
{
	mps_fetch_add(&hf_posts, 1);
}

/* Gives back slot i. Under hf.lock. */
static void give(uint32_t i)
{
	if (hf.slot[i].kept) {
		hf.nkept--;
	} else {
		hf.nfree++;
		pthread_cond_signal(&hf.freed);
	}
	hf.slot[i].busy = false;
	hf.slot[i].kept = false;
	hf.slot[i].pinned = false;
}

/* The graphs' slots that nothing of the program's holds any more, given
 * back: the server says which (HOSTFN_DEAD), having made every node the
 * slots were given for, walked the client's graphs, captures and
 * executable graphs. Under hf.lock; CUDA_SUCCESS if any came back. */
static CUresult collect(void)
{
	struct mps_msg_hostfn_dead q = { .n = 0 };
	struct mps_hostfn_slotseq *pairs = malloc(MAX_KEPT * sizeof(*pairs));
	const uint64_t *dead;
	struct mps_call call;
	uint32_t cur = 0, freed = 0;
	CUresult r;

	if (!pairs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = MAX_KEPT; i < MPS_HOSTFN_SLOTS && q.n < MAX_KEPT; i++)
		if (hf.slot[i].busy && hf.slot[i].kept && !hf.slot[i].pinned)
			pairs[q.n++] = (struct mps_hostfn_slotseq){ .slot = i, .seq = hf.slot[i].seq };
	mps__cur_handle(&cur);
	r = mps__call(MPS_OP_HOSTFN_DEAD, cur, &q.hdr, sizeof(q), pairs, q.n * sizeof(*pairs), &call);
	if (r == CUDA_SUCCESS && call.s->len >= MPS_HOSTFN_SLOTS / 8) {
		dead = (const uint64_t *)call.s->data;
		for (uint32_t k = 0; k < q.n; k++) {
			uint32_t i = pairs[k].slot;

			if (dead[i / 64] & (1ull << (i % 64))) {
				give(i);
				freed++;
			}
		}
	}
	mps__call_end(&call);
	free(pairs);
	if (r == CUDA_SUCCESS && !freed)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	return r;
}

static __thread bool is_runner;   /* this thread runs the program's host functions */

bool mps__hostfn_runner(void)
{
	return is_runner;
}

static void *runner(void *arg)
{
	struct mps_hostfn_note n;
	ssize_t got;

	(void)arg;
	is_runner = true;
	for (;;) {
		got = read(hf.rfd, &n, sizeof(n));
		if (got < 0 && errno == EINTR)
			continue;
		if (got != sizeof(n)) {
			/* The server has gone: nobody waiting for a slot may wait on. */
			pthread_mutex_lock(&hf.lock);
			hf.gone = true;
			pthread_cond_broadcast(&hf.freed);
			pthread_mutex_unlock(&hf.lock);
			return NULL;
		}
		mps_log_debug("openmps: host function note: slot %u seq %u", n.slot, n.seq);
		pthread_mutex_lock(&hf.lock);
		struct slot s = hf.slot[n.slot % MPS_HOSTFN_SLOTS];
		bool ours = n.slot < MPS_HOSTFN_SLOTS && s.busy && s.seq == n.seq;
		pthread_mutex_unlock(&hf.lock);
		if (!ours) {
			mps_log_warn("openmps: a host function note for slot %u that is not in flight", n.slot);
			continue;
		}
		/* What the program wrote before the work that runs it. */
		(void)mps_load_acquire(&hf_posts);
		if (s.callback)
			s.cb(s.stream, CUDA_SUCCESS, s.data);
		else
			s.fn(s.data);
		/* What the function wrote is the program's to read once it
		 * has waited for the stream (mps__hostfn_acquire), and the
		 * device's, where it wrote managed memory on the device,
		 * before the stream goes on (migrate.c). */
		mps_fetch_add(&hf_runs, 1);
		mps__migrate_settle();
		if (s.kept) {
			/* A graph's word counts its runs in flight (server's
			 * ops_hostfn.c): this one is done. The graph runs it
			 * again; its next launch waits anew. */
			pthread_mutex_lock(&hf.lock);
			hf.slot[n.slot].runs++;
			pthread_mutex_unlock(&hf.lock);
			mps_fetch_sub(&hf.words[n.slot], 1);
			continue;
		}
		/* The stream goes on once the word holds the number. */
		mps_store_release(&hf.words[n.slot], n.seq);
		pthread_mutex_lock(&hf.lock);
		give(n.slot);
		pthread_mutex_unlock(&hf.lock);
	}
}

/* Once: the region, the pipe, the server told, the runner started. Under hf.lock. */
static CUresult setup(void)
{
	struct mps_msg_hostfn_setup q = { .offset = 0 };
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_IMPORT };
	struct mps_call call;
	pthread_attr_t attr;
	pthread_t t;
	uint32_t cur = 0;
	void *addr;
	int p[2] = { -1, -1 };
	CUresult r;

	if (hf.ready || hf.failed)
		return hf.failed;
	r = mps__host_region(MPS_HOSTFN_SLOTS * sizeof(uint32_t), &q.region, &addr);
	if (r != CUDA_SUCCESS)
		return r;   /* a passing failure (no context yet): tried again next time */
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto fail;
	}
	mps__cur_handle(&cur);
	/* The pipe's write end goes ahead of the message that takes it. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	if (mps_sock_send(mps_conn.sock, &fm, sizeof(fm), p[1]) < 0) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
	} else {
		r = mps__call(MPS_OP_HOSTFN_SETUP, cur, &q.hdr, sizeof(q), NULL, 0, &call);
		mps__call_end(&call);
	}
	pthread_mutex_unlock(&mps_conn.fd_lock);
	close(p[1]);
	if (r != CUDA_SUCCESS)
		goto fail;
	hf.words = addr;
	hf.rfd = p[0];
	hf.nfree = MPS_HOSTFN_SLOTS - MAX_KEPT;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, runner, NULL) != 0) {
		pthread_attr_destroy(&attr);
		hf.rfd = -1;
		r = CUDA_ERROR_OPERATING_SYSTEM;
		goto fail;
	}
	pthread_attr_destroy(&attr);
	hf.ready = true;
	return CUDA_SUCCESS;
fail:
	if (p[0] >= 0)
		close(p[0]);
	mps_log_warn("openmps: host functions cannot be set up: %s", mps__error_name(r));
	hf.failed = r;
	return r;
}

/* A free slot, filled in, with its next sequence number (never 0, the
 * word's first value); a kept one fails at the limit instead of waiting.
 * Under hf.lock, set up. */
static CUresult take(bool kept, bool callback, CUhostFn fn, CUstreamCallback cb, CUstream stream, void *data,
		     uint32_t *slot, uint32_t *seq)
{
	uint32_t i;

	/* Streams' slots below MAX_KEPT, graphs' above: a word a graph clears
	 * never holds a stream's number. At the limit, the slots of graphs
	 * that are gone come back first. */
	if (kept && hf.nkept >= MAX_KEPT && collect() != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	while (!kept && !hf.nfree && !hf.gone)
		pthread_cond_wait(&hf.freed, &hf.lock);
	if (hf.gone)
		return mps__ended_or(CUDA_ERROR_MPS_CONNECTION_FAILED);
	for (i = kept ? MAX_KEPT : 0; hf.slot[i].busy; i++)
		;
	if (kept)
		hf.nkept++;
	else
		hf.nfree--;
	hf.slot[i].busy = true;
	hf.slot[i].kept = kept;
	hf.slot[i].callback = callback;
	hf.slot[i].fn = fn;
	hf.slot[i].cb = cb;
	hf.slot[i].stream = stream;
	hf.slot[i].data = data;
	hf.slot[i].runs = 0;
	if (!++hf.slot[i].seq)
		hf.slot[i].seq = 1;
	*slot = i;
	*seq = hf.slot[i].seq;
	return CUDA_SUCCESS;
}

static CUresult host_func(CUstream stream, bool pt, bool callback, CUhostFn fn, CUstreamCallback cb, void *data)
{
	struct mps_msg_hostfn q = { .flags = 0 };
	uint32_t ctx;
	bool kept;
	CUresult r;

	if (callback ? !cb : !fn)
		return CUDA_ERROR_INVALID_VALUE;
	if (mps_conn.forked)
		return CUDA_ERROR_NOT_INITIALIZED;   /* as every call in a forked child; its runner is the parent's */
	r = mps__stream_resolve(stream, pt, &q.stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	/* Captured, the function is the graph's for good (wire.h). */
	kept = mps__capture_on(q.stream);
	if (kept && callback) {
		/* As the driver: no callbacks in a capture, which it ends. */
		mps__capture_invalidate(q.stream);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	pthread_mutex_lock(&hf.lock);
	r = setup();
	if (r == CUDA_SUCCESS)
		r = take(kept, callback, fn, cb, stream, data, &q.slot, &q.seq);
	if (r != CUDA_SUCCESS) {
		pthread_mutex_unlock(&hf.lock);
		return r;
	}
	q.flags = kept ? MPS_HOSTFN_CAPTURED : 0;
	mps__hostfn_release();
	/* Posted under the lock: the note can only follow the message. */
	r = mps__post(MPS_OP_HOSTFN, ctx, &q.hdr, sizeof(q), NULL, 0);
	if (r != CUDA_SUCCESS)
		give(q.slot);
	pthread_mutex_unlock(&hf.lock);
	return r;
}

CUresult mps__hostfn_keep(CUhostFn fn, void *data, uint32_t *slot, uint32_t *seq)
{
	CUresult r;

	if (mps_conn.forked)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&hf.lock);
	r = setup();
	if (r == CUDA_SUCCESS)
		r = take(true, false, fn, NULL, NULL, data, slot, seq);
	pthread_mutex_unlock(&hf.lock);
	return r;
}

void mps__hostfn_pin(uint32_t slot)
{
	pthread_mutex_lock(&hf.lock);
	if (slot < MPS_HOSTFN_SLOTS && hf.slot[slot].kept)
		hf.slot[slot].pinned = true;
	pthread_mutex_unlock(&hf.lock);
}

void mps__hostfn_unkeep(uint32_t slot)
{
	pthread_mutex_lock(&hf.lock);
	if (slot < MPS_HOSTFN_SLOTS && hf.slot[slot].busy)
		give(slot);
	pthread_mutex_unlock(&hf.lock);
}

uint64_t mps__hostfn_runs(uint32_t slot)
{
	uint64_t n = 0;

	pthread_mutex_lock(&hf.lock);
	if (slot < MPS_HOSTFN_SLOTS)
		n = hf.slot[slot].runs;
	pthread_mutex_unlock(&hf.lock);
	return n;
}

CUresult mps__hostfn_params(uint32_t slot, CUDA_HOST_NODE_PARAMS *get, const CUDA_HOST_NODE_PARAMS *set)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&hf.lock);
	if (slot < MPS_HOSTFN_SLOTS && hf.slot[slot].kept) {
		if (get) {
			get->fn = hf.slot[slot].fn;
			get->userData = hf.slot[slot].data;
			r = CUDA_SUCCESS;
		} else if (set && set->fn) {
			hf.slot[slot].fn = set->fn;
			hf.slot[slot].data = set->userData;
			r = CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&hf.lock);
	return r;
}

static CUresult launch_host_func(CUstream s, CUhostFn fn, void *data) { return host_func(s, false, false, fn, NULL, data); }
static CUresult launch_host_func_ptsz(CUstream s, CUhostFn fn, void *data) { return host_func(s, true, false, fn, NULL, data); }

static CUresult add_callback(CUstream s, CUstreamCallback cb, void *data, unsigned int flags)
{
	return flags ? CUDA_ERROR_INVALID_VALUE : host_func(s, false, true, NULL, cb, data);
}

static CUresult add_callback_ptsz(CUstream s, CUstreamCallback cb, void *data, unsigned int flags)
{
	return flags ? CUDA_ERROR_INVALID_VALUE : host_func(s, true, true, NULL, cb, data);
}

const struct mps_impl mps__hostfn_api[] = {
	MPS_IMPL(cuLaunchHostFunc, launch_host_func),
	MPS_IMPL_AS(cuLaunchHostFunc_ptsz, cuLaunchHostFunc, launch_host_func_ptsz),
	MPS_IMPL(cuStreamAddCallback, add_callback),
	MPS_IMPL_AS(cuStreamAddCallback_ptsz, cuStreamAddCallback, add_callback_ptsz),
	MPS_IMPL_END
};
