// SPDX-License-Identifier: MIT
/*
 * See gputime.h.
 */
#include <stdlib.h>

#include "common/atomics.h"
#include "common/env.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/gputime.h"
#include "server/server.h"
#include "server/streams.h"

static uint32_t rate = 16;

void mps_gputime_init(void)
{
	rate = (uint32_t)mps_env_long("OPENMPS_GPU_TIME_SAMPLE", rate, 1, 1000000);
}

int mps_gputime_setup(struct mps_client *c)
{
	return pthread_mutex_init(&c->gpu.lock, NULL);
}

void mps_gputime_free(struct mps_client *c)
{
	pthread_mutex_destroy(&c->gpu.lock);
}

/* What finished samples measured, added. Under g->lock. */
static void collect_locked(struct mps_gputime *g, bool wait)
{
	for (int i = 0; i < MPS_GPUTIME_SLOTS; i++) {
		struct mps_gputime_slot *s = &g->slot[i];
		float ms = 0;

		if (s->weight) {
			if (wait)
				mps_drv.cuEventSynchronize(s->b);
			else if (mps_drv.cuEventQuery(s->b) == CUDA_ERROR_NOT_READY)
				continue;
			if (mps_drv.cuEventElapsedTime(&ms, s->a, s->b) == CUDA_SUCCESS && ms > 0)
				mps_store_relaxed(&g->ns, g->ns + (uint64_t)((double)ms * 1e6 * s->weight));
			s->weight = 0;
			g->pending--;
		}
		if (wait && s->a) {
			mps_drv.cuEventDestroy(s->a);
			mps_drv.cuEventDestroy(s->b);
			s->a = s->b = NULL;
		}
	}
}

void mps_gputime_collect(struct mps_client *c, bool wait)
{
	pthread_mutex_lock(&c->gpu.lock);
	collect_locked(&c->gpu, wait);
	pthread_mutex_unlock(&c->gpu.lock);
}

int mps_gputime_begin(struct mps_client *c, struct mps_sstream *st)
{
	struct mps_gputime *g = &c->gpu;
	struct mps_gputime_slot *s = NULL;
	int i = -1;

	/* A capture would take the events into its graph. */
	if (mps_stream_capturing(c, st))
		return -1;
	/* Nothing between samples: finished ones are read at the next sample
	 * (and by get_metrics), not polled at every launch. */
	if (++g->since < rate)
		return -1;
	pthread_mutex_lock(&g->lock);
	if (g->pending)
		collect_locked(g, false);
	for (int k = 0; k < MPS_GPUTIME_SLOTS && !s; k++)
		if (!g->slot[k].weight)
			s = &g->slot[i = k];
	if (!s)
		goto out;   /* every slot in flight: a later launch stands for this one too */
	if (s->a && s->dev != st->ctx->device) {
		mps_drv.cuEventDestroy(s->a);
		mps_drv.cuEventDestroy(s->b);
		s->a = s->b = NULL;
	}
	if (!s->a) {
		s->dev = st->ctx->device;
		if (mps_drv.cuEventCreate(&s->a, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
			s->a = NULL;
			goto none;
		}
		if (mps_drv.cuEventCreate(&s->b, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
			mps_drv.cuEventDestroy(s->a);
			s->a = s->b = NULL;
			goto none;
		}
	}
	if (mps_drv.cuEventRecord(s->a, st->s) != CUDA_SUCCESS)
		goto none;
	s->weight = g->since;
	g->since = 0;
	goto out;   /* the lock is held until mps_gputime_end */
none:
	i = -1;
out:
	if (i < 0)
		pthread_mutex_unlock(&g->lock);
	return i;
}

void mps_gputime_end(struct mps_client *c, struct mps_sstream *st, int slot, bool launched)
{
	struct mps_gputime *g = &c->gpu;
	struct mps_gputime_slot *s = &g->slot[slot];

	if (!launched || mps_drv.cuEventRecord(s->b, st->s) != CUDA_SUCCESS)
		s->weight = 0;
	else
		g->pending++;
	pthread_mutex_unlock(&g->lock);
}
