// SPDX-License-Identifier: MIT
/*
 * What serving one client is, whichever service thread does it (sched.c
 * decides): setting the client up (its shared region, registered with the
 * driver, and the welcome with every device's properties), checking each
 * message against the op table and running its handler, and at the end
 * tearing the client down — waiting for its GPU work and freeing, in
 * dependency order, everything it made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/log.h"
#include "common/shm.h"
#include "common/sock.h"
#include "server/bounce.h"
#include "server/control.h"
#include "server/crash.h"
#include "server/devout.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/galloc.h"
#include "server/ipc.h"
#include "server/replay.h"
#include "server/sched.h"
#include "server/placement.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/vdevice.h"


/* Built from the op list in wire.h. */
static const struct {
	mps_op_fn *fn;
	uint32_t min;      /* smallest valid message */
	uint8_t sync;      /* enum mps_op_sync */
	const char *name;
} op_table[MPS_OP_COUNT] = {
#define OP(name, fn, type, sync) [MPS_OP_##name] = { mps__op_##fn, sizeof(struct type), sync, #name },
	MPS_OPS(OP)
#undef OP
};

const char *mps__op_name(unsigned int op)
{
	return op < MPS_OP_COUNT ? op_table[op].name : NULL;
}

/* The device whose primary context is current on this thread. */
static __thread int bound_dev = -1;

CUresult mps__bind_device(struct mps_client *c, int dev)
{
	CUresult r;

	(void)c;
	if (dev == bound_dev)
		return CUDA_SUCCESS;
	if (dev < 0 || dev >= mps_srv.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	r = mps_drv.cuCtxSetCurrent(mps_srv.dev[dev].primary);
	if (r == CUDA_SUCCESS)
		bound_dev = dev;
	return r;
}

int mps__cur_device(void)
{
	return bound_dev;
}

void mps__defer_error(struct mps_client *c, CUresult r, const char *what)
{
	int none = CUDA_SUCCESS;

	if (r == CUDA_SUCCESS)
		return;
	mps_fault_check(r);
	mps_fetch_add(&c->stats.errors, 1);
	mps_log_debug("client %d: %s failed asynchronously: %s", (int)c->pid, what, mps_driver_errname(r));
	/* The first error wins, as CUDA reports the first failure. */
	mps_cas(&c->deferred, &none, (int)r);
}

CUresult mps__take_deferred(struct mps_client *c)
{
	return (CUresult)mps_xchg(&c->deferred, CUDA_SUCCESS);
}

struct mps_slot *mps__slot(struct mps_client *c, uint32_t slot)
{
	return mps_region_slot(c->region, slot);
}

void mps__reply(struct mps_client *c, uint32_t slot, CUresult r)
{
	struct mps_slot *s = mps__slot(c, slot);

	mps_fault_check(r);
	if (r != CUDA_SUCCESS)
		mps_fetch_add(&c->stats.errors, 1);
	/* Atomic: the thread answering this slot's previous call may not be
	 * this one, and what orders the two goes through the client. */
	mps_store_relaxed(&s->result, (int32_t)r);
	/* Release: the reply's data and result are visible before DONE. */
	switch (mps_xchg(&s->state, MPS_SLOT_DONE)) {
	case MPS_SLOT_SLEEPING:
	case MPS_SLOT_GPU_SLEEPING:
		mps_futex_wake(&s->state, 1);
		break;
	}
}

void *mps__obj(struct mps_client *c, uint32_t handle, int type)
{
	return mps_handle_get(&c->handles, handle, type);
}

struct mps_sctx *mps__msg_ctx(struct mps_client *c, const struct mps_msg *m)
{
	return mps__obj(c, m->ctx, MPS_H_CTX);
}

/* Checks a message against the op table and runs it. A message that is
 * well framed but wrong gets an error reply (if it asked for one) and the
 * client goes on; the log says what was wrong. */
void mps__dispatch(struct mps_client *c, const struct mps_msg *m)
{
	const char *why = NULL;
	uint16_t op = m->op;

	if (m->slot != MPS_NO_SLOT && m->slot >= MPS_SLOT_COUNT) {
		mps_log_warn("client %d sent a message with reply slot %u (of %u); ignored",
			     (int)c->pid, m->slot, MPS_SLOT_COUNT);
		return;
	}
	if (op >= MPS_OP_COUNT || !op_table[op].fn)
		why = "unknown operation";
	else if (m->len < op_table[op].min)
		why = "message too short for its operation";
	else if (op_table[op].sync == MPS_SYNC && m->slot == MPS_NO_SLOT)
		why = "synchronous operation without a reply slot";
	else if (op_table[op].sync == MPS_ASYNC && m->slot != MPS_NO_SLOT)
		why = "asynchronous operation with a reply slot";
	if (why) {
		mps_log_warn("client %d sent a malformed message (op %u, %u bytes): %s",
			     (int)c->pid, (unsigned int)op, m->len, why);
		if (m->slot != MPS_NO_SLOT)
			mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		else
			mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "malformed message");
		return;
	}
	/* Launch replay (replay.h): any other message ends a run of launches
	 * (and its last chunk). */
	if (c->replay && op != MPS_OP_LAUNCH)
		mps_replay_boundary(c, false);
	op_table[op].fn(c, m);
	/* Read by get_metrics; only this client's owner writes them. */
	mps_store_relaxed(&c->ops, c->ops + 1);
	if (m->slot != MPS_NO_SLOT)
		mps_store_relaxed(&c->trips, c->trips + 1);
}

/* Makes the client's shared region: sealed memfd, mapped here, registered
 * with the driver so copies into its reply slots are real DMA. */
static int region_setup(struct mps_client *c)
{
	struct mps_region *r;
	CUresult cr;
	int err;

	c->region_fd = mps_shm_create("openmps-region", MPS_REGION_SIZE);
	if (c->region_fd < 0)
		return c->region_fd;
	r = mps_place_host_map(c->region_fd, MPS_REGION_SIZE);
	if (!r) {
		err = -errno;
		goto err_close;
	}
	r->magic = MPS_REGION_MAGIC;
	r->version = MPS_REGION_VERSION;
	r->header_size = MPS_HEADER_SIZE;
	r->region_size = MPS_REGION_SIZE;
	r->sq_offset = MPS_SQ_OFFSET;
	r->sq_size = MPS_SQ_SIZE;
	r->slot_offset = MPS_SLOT_OFFSET;
	r->slot_count = MPS_SLOT_COUNT;
	r->slot_size = MPS_SLOT_SIZE;
	r->spin_hint_ns = mps_sched_client_spin_ns();   /* kept up to date by sched.c */
	cr = mps__bind_device(c, 0);
	if (cr == CUDA_SUCCESS)
		cr = mps_drv.cuMemHostRegister(r, MPS_REGION_SIZE, CU_MEMHOSTREGISTER_PORTABLE);
	if (cr != CUDA_SUCCESS) {
		mps_log_error("client %d: cannot register its shared region: %s", (int)c->pid,
			      mps_driver_errname(cr));
		err = -ENOMEM;
		goto err_unmap;
	}
	/* Where each device stores the replies it answers (registered as
	 * portable: every context may). */
	for (int d = 0; d < mps_srv.ndev; d++) {
		if (mps__bind_device(c, d) != CUDA_SUCCESS ||
		    mps_drv.cuMemHostGetDevicePointer(&c->comp.region_dp[d], r, 0) != CUDA_SUCCESS)
			c->comp.region_dp[d] = 0;
	}
	mps_sq_consumer_init(&c->sq, r);
	mps_store_release(&c->region, r);   /* the main thread may kick it from now on */
	mps_limits_publish(c);
	return 0;

err_unmap:
	munmap(r, MPS_REGION_SIZE);
err_close:
	close(c->region_fd);
	c->region_fd = -1;
	return err;
}

static void region_teardown(struct mps_client *c)
{
	struct mps_region *r = c->region;

	if (!r)
		return;
	/* Before the unmap, under the list lock: whoever writes advice into
	 * the regions of listed clients (sched.c, smshare.c) holds it. */
	pthread_mutex_lock(&mps_srv.lock);
	mps_store_release(&c->region, NULL);
	pthread_mutex_unlock(&mps_srv.lock);
	mps__bind_device(c, 0);
	mps_drv.cuMemHostUnregister(r);
	munmap(r, MPS_REGION_SIZE);
	close(c->region_fd);
	c->region_fd = -1;
}

static int send_welcome(struct mps_client *c)
{
	size_t len = sizeof(struct mps_welcome) + (size_t)(mps_srv.ndev + MPS_MAX_VDEVICES) * sizeof(struct mps_wire_device);
	struct mps_welcome *w = calloc(1, len);
	ssize_t n;

	if (!w)
		return -ENOMEM;
	w->nvirt = (uint16_t)mps_vdev_welcome(c, &w->dev[mps_srv.ndev]);
	len = sizeof(struct mps_welcome) + (size_t)(mps_srv.ndev + w->nvirt) * sizeof(struct mps_wire_device);
	w->magic = MPS_WELCOME_MAGIC;
	w->version = MPS_WIRE_VERSION;
	w->ndev = (uint16_t)mps_srv.ndev;
	w->server_pid = (uint32_t)getpid();
	w->client_id = c->id;
	w->driver_version = mps_srv.driver_version;
	w->prio_least = mps_srv.prio_least;
	w->prio_greatest = mps_srv.prio_greatest;
	w->region_size = MPS_REGION_SIZE;
	for (int i = 0; i < mps_srv.ndev; i++)
		w->dev[i] = mps_srv.dev[i].info;
	n = mps_sock_send(c->sock, w, len, c->region_fd);
	free(w);
	if (n >= 0) {
		/* Then the eventfd its ring wakes us through. */
		struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_WAKE };

		n = mps_sock_send(c->sock, &fm, sizeof(fm), c->evfd);
	}
	return n < 0 ? (int)n : 0;
}

const char *mps__client_setup(struct mps_client *c)
{
	c->msg = aligned_alloc(64, MPS_MSG_MAX);
	if (!c->msg)
		return "the server is out of memory";
	if (region_setup(c) < 0)
		return "the server cannot set up shared memory for this client";
	if (mps_comp_init(c) < 0)
		return "the server cannot start a thread for this client";
	return NULL;
}

/* Phase 2 of teardown: the client is gone or going. Wait for its GPU work,
 * then free everything it held, in dependency order. */
void mps__client_teardown(struct mps_client *c)
{
	mps_devout_client_gone(c);     /* what its kernels printed and it did not take: to the log */
	mps_comp_shutdown(c);
	mps_replay_free(c);            /* what it held, and its graph */
	mps__hostfn_release(c);        /* its streams no longer wait for its callbacks */
	mps__memwaits_release(c);      /* nor for values in its memory */
	mps__ctx_release_all(c);       /* waits for and destroys streams, events, contexts */
	mps_bounce_free(c);            /* no stream reads its bounce ring now */
	mps_gputime_collect(c, true);  /* its last samples, and their events */
	mps_sm_release(c);             /* its SM shares, now that no stream is in them */
	mps_vdev_release(c);
	mps__hostfn_free(c);
	mps__vmm_release_all(c);       /* mappings, then address reservations */
	mps_obj_release_all(c);        /* executable graphs, graphs, pools, physical allocations */
	mps_galloc_free(c);            /* what those executable graphs allocate */
	mps__modules_release_all(c);   /* functions, modules, libraries */
	mps__host_release_all(c);      /* pinned host regions */
	mps__held_frees_reap(c, true); /* placed memory freed in stream order (its streams are done) */
	/* Device memory: whatever the client did not free. */
	while (c->mem.n) {
		struct mps_mrange r = c->mem.r[c->mem.n - 1];

		mps_memacct_remove(&c->mem, r.base, r.kind, NULL);
		if (r.kind == MPS_MEM_IPC || r.kind == MPS_MEM_IPC_DRIVER)
			mps_ipc_close_mem(c, r.base, r.kind == MPS_MEM_IPC);
		else if (r.kind == MPS_MEM_POOL_PTR || r.kind == MPS_MEM_POOL_PTR_DRIVER)
			mps_ipc_close_pool_ptr(c, r.base, r.kind == MPS_MEM_POOL_PTR);
		else if (r.kind == MPS_MEM_DEVICE && mps__bind_device(c, r.device) == CUDA_SUCCESS &&
			 !mps_ipc_orphan_mem(c, r.base))
			mps_place_mem_free((CUdeviceptr)r.base, true);   /* its work is done */
	}
	/* The driver keeps freed graph allocations' memory for later graphs
	 * until it is trimmed: give back what this client's graphs left. */
	for (int d = 0; d < MPS_MAX_DEVICES && mps_drv.cuDeviceGraphMemTrim; d++)
		if ((c->graph_mem_devs & (1u << d)) && mps__bind_device(c, d) == CUDA_SUCCESS)
			mps_drv.cuDeviceGraphMemTrim(mps_srv.dev[d].dev);
	mps_handles_free(&c->handles);
	mps_memacct_free(&c->mem);
	region_teardown(c);
	free(c->blob);
	c->blob = NULL;
	free(c->msg);
	c->msg = NULL;
}

int mps__client_greet(struct mps_client *c)
{
	const char *why = mps__client_setup(c);

	c->ready = true;
	if (why) {
		mps__refuse(c->sock, CUDA_ERROR_OUT_OF_MEMORY, why);
		return -ENOMEM;
	}
	mps_sm_publish(c);   /* the SM counts it will see, before it looks */
	if (send_welcome(c) < 0) {
		mps_log_warn("client %d left before the handshake finished", (int)c->pid);
		return -EPIPE;
	}
	mps_log_info("Client {PID: %d, Context ID: %u} connected", (int)c->pid, c->id);
	mps_control_client_event(c, MPS_CHAN_CLIENT_UP, 0);
	return 0;
}

void mps__client_finish(struct mps_client *c)
{
	mps__client_teardown(c);
	mps_log_info("Client {PID: %d, Context ID: %u} disconnected (%llu calls)", (int)c->pid, c->id,
		     (unsigned long long)c->ops);
	mps_control_client_event(c, MPS_CHAN_CLIENT_DOWN, 0);
	mps_client_put(c);   /* the list's reference */
}
