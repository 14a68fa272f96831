// SPDX-License-Identifier: MIT
/*
 * See smshare.h. Locking: each device's pool has a mutex of its own, held
 * while a green context is chosen or made (cuGreenCtxCreate, about 1.5 ms,
 * once per set of groups) and while a stream is made in one: the driver
 * does not serialise calls that use the same green context from several
 * threads. A green context is never made current. Nothing else is held
 * meanwhile.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common/atomics.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/server.h"
#include "server/smshare.h"

#define SM_GROUPS_MAX 64u   /* groups of one split (132 SMs / 8 = 16 on an H200) */
#define SM_POOL_MAX   32u   /* green contexts kept per device */

struct mps_green {
	CUgreenCtx g;
	CUcontext ctx;            /* the green context as a context (NULL: the driver has none) */
	uint64_t groups;          /* bit i: group i */
	unsigned int sms;
	int dev;
};

static struct sm_device {
	pthread_mutex_t lock;
	bool on;                  /* shares are enforced */
	unsigned int total;       /* SMs of the device */
	unsigned int ngroups, group_sms;
	CUdevResource group[SM_GROUPS_MAX];
	unsigned int load[SM_GROUPS_MAX];   /* clients whose share holds group i */
	struct mps_green pool[SM_POOL_MAX];
	unsigned int npool;
} sm_dev[MPS_MAX_DEVICES] = {
	[0 ... MPS_MAX_DEVICES - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

void mps_sm_init(int dev)
{
	struct sm_device *d = &sm_dev[dev];
	CUdevResource all;
	unsigned int n = SM_GROUPS_MAX;
	CUresult r;

	d->total = (unsigned int)mps_srv.dev[dev].info.attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
	if (!mps_drv.cuDeviceGetDevResource || !mps_drv.cuDevSmResourceSplitByCount ||
	    !mps_drv.cuDevResourceGenerateDesc || !mps_drv.cuGreenCtxCreate || !mps_drv.cuGreenCtxStreamCreate) {
		mps_log_info("device %d: the driver has no green contexts; active thread percentages are not enforced",
			     dev);
		return;
	}
	r = mps_drv.cuDeviceGetDevResource(mps_srv.dev[dev].dev, &all, CU_DEV_RESOURCE_TYPE_SM);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuDevSmResourceSplitByCount(d->group, &n, &all, NULL, 0, all.sm.minSmPartitionSize);
	if (r != CUDA_SUCCESS || n < 2 || !d->group[0].sm.smCount) {
		mps_log_warn("device %d: cannot split its SMs (%s); active thread percentages are not enforced", dev,
			     r != CUDA_SUCCESS ? mps_driver_errname(r) : "one group");
		return;
	}
	d->total = all.sm.smCount;
	d->ngroups = n;
	d->group_sms = d->group[0].sm.smCount;
	d->on = true;
	mps_log_info("device %d: %u SMs, shares in %u groups of %u", dev, d->total, d->ngroups, d->group_sms);
}

/* How many groups a share of pct gets; 0: the whole device. */
static unsigned int groups_for(const struct sm_device *d, int pct)
{
	double want = (double)d->total * pct / 10000.0;
	unsigned int k;

	if (!d->on || pct >= 10000)
		return 0;
	k = (unsigned int)(want / d->group_sms + 0.5);
	if (k < 1)
		k = 1;
	if (k >= d->ngroups) {
		k = d->ngroups;
		/* The whole device when every group is asked for, or it is at
		 * least as near. */
		if (k * d->group_sms >= d->total || (double)d->total - want <= want - (double)(k * d->group_sms))
			return 0;
	}
	return k;
}

unsigned int mps_sm_count(int dev, int pct)
{
	struct sm_device *d = &sm_dev[dev];
	unsigned int k = groups_for(d, pct);

	return k ? k * d->group_sms : d->total;
}

static unsigned int popcount64(uint64_t v)
{
	return (unsigned int)__builtin_popcountll(v);
}

static unsigned int load_of(const struct sm_device *d, uint64_t groups)
{
	unsigned int sum = 0;

	for (unsigned int i = 0; i < d->ngroups; i++)
		if (groups & (1ull << i))
			sum += d->load[i];
	return sum;
}

/* The k groups fewest clients use (the lowest first among equals, so equal
 * shares meet the same pool entries again). */
static uint64_t least_loaded(const struct sm_device *d, unsigned int k)
{
	uint64_t set = 0;

	for (unsigned int n = 0; n < k; n++) {
		unsigned int best = SM_GROUPS_MAX;

		for (unsigned int i = 0; i < d->ngroups; i++)
			if (!(set & (1ull << i)) && (best == SM_GROUPS_MAX || d->load[i] < d->load[best]))
				best = i;
		set |= 1ull << best;
	}
	return set;
}

static CUresult green_make(struct sm_device *d, int dev, uint64_t groups, struct mps_green **out)
{
	CUdevResource res[SM_GROUPS_MAX];
	struct mps_green *g = &d->pool[d->npool];
	CUdevResourceDesc desc;
	unsigned int n = 0;
	CUresult r;

	for (unsigned int i = 0; i < d->ngroups; i++)
		if (groups & (1ull << i))
			res[n++] = d->group[i];
	r = mps_drv.cuDevResourceGenerateDesc(&desc, res, n);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuGreenCtxCreate(&g->g, desc, mps_srv.dev[dev].dev, CU_GREEN_CTX_DEFAULT_STREAM);
	if (r != CUDA_SUCCESS)
		return r;
	g->ctx = NULL;
	if (mps_drv.cuCtxFromGreenCtx && mps_drv.cuCtxFromGreenCtx(&g->ctx, g->g) != CUDA_SUCCESS)
		g->ctx = NULL;
	g->groups = groups;
	g->sms = n * d->group_sms;
	g->dev = dev;
	d->npool++;
	mps_log_info("device %d: green context %u of %u SMs", dev, d->npool, g->sms);
	*out = g;
	return CUDA_SUCCESS;
}

/* A green context of k groups for a new user. Under d->lock. */
static CUresult green_get(struct sm_device *d, int dev, unsigned int k, struct mps_green **out)
{
	uint64_t want = least_loaded(d, k);
	struct mps_green *best = NULL;

	for (unsigned int i = 0; i < d->npool; i++) {
		struct mps_green *g = &d->pool[i];

		if (g->groups == want) {
			best = g;
			break;
		}
		if (popcount64(g->groups) == k && (!best || load_of(d, g->groups) < load_of(d, best->groups)))
			best = g;
	}
	/* A new set of groups while the pool has room and the best one kept
	 * is busier than the free groups. */
	if ((!best || best->groups != want) && d->npool < SM_POOL_MAX &&
	    (!best || load_of(d, best->groups) > load_of(d, want))) {
		CUresult r = green_make(d, dev, want, &best);

		if (r != CUDA_SUCCESS)
			return r;
	}
	if (!best)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned int i = 0; i < d->ngroups; i++)
		if (best->groups & (1ull << i))
			d->load[i]++;
	*out = best;
	return CUDA_SUCCESS;
}

static void green_put(struct sm_device *d, struct mps_green *g)
{
	for (unsigned int i = 0; i < d->ngroups; i++)
		if (g->groups & (1ull << i) && d->load[i])
			d->load[i]--;
}

struct mps_green *mps_sm_bind(struct mps_client *c, int dev)
{
	struct sm_device *d = &sm_dev[dev];
	struct mps_smbind *b = &c->sm[dev];
	int pct = mps_load_relaxed(&c->thread_pct);
	struct mps_green *g = NULL;
	unsigned int k;

	if (b->pct == pct)
		return b->green;
	k = groups_for(d, pct);
	pthread_mutex_lock(&d->lock);
	if (b->green && k && popcount64(b->green->groups) == k) {
		g = b->green;   /* the same size: keep its SMs */
	} else {
		if (k) {
			CUresult r = green_get(d, dev, k, &g);

			if (r != CUDA_SUCCESS) {
				mps_log_warn("client %d: no green context of %u SMs on device %d (%s); it runs on all %u",
					     (int)c->pid, k * d->group_sms, dev, mps_driver_errname(r), d->total);
				g = NULL;
			}
		}
		if (b->green)
			green_put(d, b->green);
	}
	pthread_mutex_unlock(&d->lock);
	if (g != b->green)
		mps_log_info("client %d: %u of %u SMs on device %d", (int)c->pid, g ? g->sms : d->total, d->total, dev);
	b->green = g;
	b->pct = pct;
	if (c->region)
		mps_store_relaxed(&c->region->sm_count[dev], g ? g->sms : d->total);
	return g;
}

CUresult mps_sm_stream_new(struct mps_green *g, int priority, CUstream *out)
{
	struct sm_device *d = &sm_dev[g->dev];
	CUresult r;

	pthread_mutex_lock(&d->lock);
	r = mps_drv.cuGreenCtxStreamCreate(out, g->g, CU_STREAM_NON_BLOCKING, priority);
	pthread_mutex_unlock(&d->lock);
	return r;
}

CUcontext mps_sm_ctx(struct mps_green *g)
{
	return g->ctx;
}

void mps_sm_publish(struct mps_client *c)
{
	int pct = mps_load_relaxed(&c->thread_pct);

	if (!c->region)
		return;
	for (int dev = 0; dev < mps_srv.ndev; dev++)
		mps_store_relaxed(&c->region->sm_count[dev], mps_sm_count(dev, pct));
}

void mps_sm_release(struct mps_client *c)
{
	for (int dev = 0; dev < mps_srv.ndev; dev++) {
		struct mps_smbind *b = &c->sm[dev];

		if (b->green) {
			pthread_mutex_lock(&sm_dev[dev].lock);
			green_put(&sm_dev[dev], b->green);
			pthread_mutex_unlock(&sm_dev[dev].lock);
		}
		b->green = NULL;
		b->pct = 0;
	}
}

unsigned int mps_sm_greens(int dev)
{
	struct sm_device *d = &sm_dev[dev];
	unsigned int n;

	pthread_mutex_lock(&d->lock);
	n = d->npool;
	pthread_mutex_unlock(&d->lock);
	return n;
}
