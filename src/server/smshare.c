// SPDX-License-Identifier: MIT
/*
 * See smshare.h. Locking: each device's pool has a mutex of its own, held
 * while a green context is chosen or made (cuGreenCtxCreate, about 1.5 ms,
 * once per set of groups) and while a stream is made in one: the driver
 * does not serialise calls that use the same green context from several
 * threads. A green context is never made current. Nothing else is held
 * meanwhile.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/atomics.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/server.h"
#include "server/smshare.h"

#define SM_GROUPS_MAX 64u   /* groups of one split (132 SMs / 8 = 16 on an H200) */
#define SM_POOL_MAX   32u   /* green contexts kept per device */
#define SM_PARTS_MAX  32u   /* partitions per device */
#define SM_NAMES_MAX  64u   /* partition names ever named (clients may name one before it exists) */

struct mps_green {
	CUgreenCtx g;
	CUcontext ctx;            /* the green context as a context (NULL: the driver has none) */
	uint64_t groups;          /* bit i: group i */
	unsigned int sms;
	int dev;
};

struct sm_part {
	int name;                 /* mps_sm_name_id's; 0: free slot */
	uint64_t groups;          /* reserved; 0: it did not fit */
	bool lend;                /* its groups serve shares while it has no client */
	unsigned int users;       /* clients bound in it */
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
	struct sm_part part[SM_PARTS_MAX];
	unsigned int gen;         /* atomic: bumped when the groups open to shares change */
} sm_dev[MPS_MAX_DEVICES] = {
	[0 ... MPS_MAX_DEVICES - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* Partition names, interned: an id stays the name's for good. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char names[SM_NAMES_MAX][MPS_SM_PARTITION_NAME];
static unsigned int nnames;

int mps_sm_name_id(const char *name, bool add)
{
	int id = 0;

	if (!name || !*name || strlen(name) >= MPS_SM_PARTITION_NAME)
		return 0;
	pthread_mutex_lock(&names_lock);
	for (unsigned int i = 0; i < nnames && !id; i++)
		if (!strcmp(names[i], name))
			id = (int)i + 1;
	if (!id && add && nnames < SM_NAMES_MAX) {
		strcpy(names[nnames], name);
		id = (int)++nnames;
	}
	pthread_mutex_unlock(&names_lock);
	if (!id && add)
		mps_log_warn("SM partition name '%s' ignored: %u names are known already", name, SM_NAMES_MAX);
	return id;
}

const char *mps_sm_name_of(int id)
{
	return id > 0 && (unsigned int)id <= SM_NAMES_MAX ? names[id - 1] : "";
}

/* The partition a client asks for on device dev: a virtual device's for
 * its GPU, else the one it named. */
static int part_asked(const struct mps_client *c, int dev)
{
	return c->vpart[dev] ? c->vpart[dev] : mps_load_relaxed(&((struct mps_client *)c)->sm_part);
}

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

static unsigned int popcount64(uint64_t v)
{
	return (unsigned int)__builtin_popcountll(v);
}

static uint64_t all_groups(const struct sm_device *d)
{
	return d->ngroups >= 64 ? ~0ull : (1ull << d->ngroups) - 1;
}

/* The groups shares may use: those no partition holds, and those of a
 * partition that lends them while it has no client. Under d->lock. */
static uint64_t open_groups(const struct sm_device *d)
{
	uint64_t held = 0;

	for (unsigned int i = 0; i < SM_PARTS_MAX; i++)
		if (d->part[i].name && !(d->part[i].lend && !d->part[i].users))
			held |= d->part[i].groups;
	return all_groups(d) & ~held;
}

static struct sm_part *part_named(struct sm_device *d, int name)
{
	for (unsigned int i = 0; name && i < SM_PARTS_MAX; i++)
		if (d->part[i].name == name)
			return &d->part[i];
	return NULL;
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

/* What client settings (pct, partition name) come to on device d: the
 * groups (0 with *whole: all SMs, the primary context). Under d->lock. */
static uint64_t wanted(struct sm_device *d, int pct, int name, bool *whole, unsigned int *k)
{
	struct sm_part *p = part_named(d, name);
	uint64_t open = open_groups(d);

	*whole = false;
	if (p && p->groups) {
		*k = popcount64(p->groups);
		return p->groups;
	}
	*k = groups_for(d, pct);
	/* Nothing open (partitions hold every group): the whole device,
	 * theirs included, rather than nothing. */
	if ((!*k && open == all_groups(d)) || !open) {
		*whole = true;
		return 0;
	}
	if (!*k || *k > popcount64(open))
		*k = popcount64(open);
	return open;   /* k of these */
}

unsigned int mps_sm_client_count(const struct mps_client *c, int dev)
{
	struct sm_device *d = &sm_dev[dev];
	unsigned int k;
	bool whole;

	if (!d->on)
		return d->total;
	pthread_mutex_lock(&d->lock);
	wanted(d, mps_load_relaxed(&((struct mps_client *)c)->thread_pct), part_asked(c, dev), &whole, &k);
	pthread_mutex_unlock(&d->lock);
	return whole ? d->total : k * d->group_sms;
}

static unsigned int load_of(const struct sm_device *d, uint64_t groups)
{
	unsigned int sum = 0;

	for (unsigned int i = 0; i < d->ngroups; i++)
		if (groups & (1ull << i))
			sum += d->load[i];
	return sum;
}

/* The k groups of `from` fewest clients use (the lowest first among
 * equals, so equal shares meet the same pool entries again). */
static uint64_t least_loaded(const struct sm_device *d, unsigned int k, uint64_t from)
{
	uint64_t set = 0;

	for (unsigned int n = 0; n < k; n++) {
		unsigned int best = SM_GROUPS_MAX;

		for (unsigned int i = 0; i < d->ngroups; i++)
			if ((from & (1ull << i)) && !(set & (1ull << i)) &&
			    (best == SM_GROUPS_MAX || d->load[i] < d->load[best]))
				best = i;
		if (best == SM_GROUPS_MAX)
			break;
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

/* A green context of k groups of `from` for a new user (exactly `from`
 * when exact). Under d->lock. */
static CUresult green_get(struct sm_device *d, int dev, unsigned int k, uint64_t from, bool exact,
			  struct mps_green **out)
{
	uint64_t want = exact ? from : least_loaded(d, k, from);
	struct mps_green *best = NULL;

	for (unsigned int i = 0; i < d->npool; i++) {
		struct mps_green *g = &d->pool[i];

		if (g->groups == want) {
			best = g;
			break;
		}
		if (!exact && popcount64(g->groups) == k && !(g->groups & ~from) &&
		    (!best || load_of(d, g->groups) < load_of(d, best->groups)))
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

/* A client joins or leaves partition p: one that lends its groups takes
 * them back from shares at its first client and lends them at its last.
 * True when the groups open to shares changed. */
static bool part_users(struct sm_device *d, struct sm_part *p, int delta)
{
	if (!p)
		return false;
	if (delta < 0 && p->users)
		p->users--;
	else if (delta > 0)
		p->users++;
	if (p->lend && p->users == (delta > 0 ? 1u : 0u)) {
		mps_fetch_add(&d->gen, 1u);
		return true;
	}
	return false;
}

/* The open groups changed: every client's SM count, told again (they move
 * at their next work). Takes mps_srv.lock: no device lock may be held. */
static void publish_all(void)
{
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next)
		mps_sm_publish(c);
	pthread_mutex_unlock(&mps_srv.lock);
}

struct mps_green *mps_sm_bind(struct mps_client *c, int dev)
{
	struct sm_device *d = &sm_dev[dev];
	struct mps_smbind *b = &c->sm[dev];
	int pct = mps_load_relaxed(&c->thread_pct), name = part_asked(c, dev);
	struct mps_green *g = NULL;
	struct sm_part *p;
	uint64_t from;
	unsigned int k;
	bool whole, keep, changed = false;

	if (!d->on || (b->pct == pct && b->part == name && b->gen == mps_load_relaxed(&d->gen)))
		return b->green;
	pthread_mutex_lock(&d->lock);
	b->gen = mps_load_relaxed(&d->gen);
	from = wanted(d, pct, name, &whole, &k);
	p = part_named(d, name);
	if (p && !p->groups)
		p = NULL;
	/* The same SMs still open to it, in the same number: it stays. */
	keep = !whole && b->green && popcount64(b->green->groups) == k &&
	       (p ? b->green->groups == from : !(b->green->groups & ~from)) && b->in_part == (p != NULL);
	if (keep) {
		g = b->green;
	} else {
		if (!whole) {
			CUresult r = green_get(d, dev, k, from, p != NULL, &g);

			if (r != CUDA_SUCCESS) {
				mps_log_warn("client %d: no green context of %u SMs on device %d (%s); it runs on all %u",
					     (int)c->pid, k * d->group_sms, dev, mps_driver_errname(r), d->total);
				g = NULL;
			}
		}
		if (b->green)
			green_put(d, b->green);
		if (b->in_part)
			changed |= part_users(d, part_named(d, b->part), -1);
		b->in_part = p != NULL && g != NULL;
		if (b->in_part)
			changed |= part_users(d, p, +1);
	}
	pthread_mutex_unlock(&d->lock);
	if (changed)
		publish_all();
	if (g != b->green)
		mps_log_info("client %d: %u of %u SMs on device %d%s%s", (int)c->pid, g ? g->sms : d->total, d->total,
			     dev, b->in_part ? ", partition " : "", b->in_part ? mps_sm_name_of(name) : "");
	b->green = g;
	b->pct = pct;
	b->part = name;
	if (c->region)
		mps_store_relaxed(&c->region->sm_count[dev], g ? g->sms : d->total);
	return g;
}

int mps_sm_partition_set(int dev, const char *name, unsigned int sms, bool lend)
{
	struct sm_device *d = &sm_dev[dev];
	int id = mps_sm_name_id(name, true);
	struct sm_part *p;
	uint64_t free_groups = 0;
	unsigned int k;

	if (!id)
		return -EINVAL;
	if (!d->on) {
		mps_log_warn("SM partition %s ignored: device %d has no SM shares", name, dev);
		return -ENOTSUP;
	}
	pthread_mutex_lock(&d->lock);
	p = part_named(d, id);
	for (unsigned int i = 0; !p && i < SM_PARTS_MAX; i++)
		if (!d->part[i].name)
			p = &d->part[i];
	if (!p) {
		pthread_mutex_unlock(&d->lock);
		mps_log_warn("SM partition %s ignored: device %d has %u already", name, dev, SM_PARTS_MAX);
		return -ENOSPC;
	}
	p->name = 0;   /* redefined: its own groups are free to choose again */
	free_groups = all_groups(d);
	for (unsigned int i = 0; i < SM_PARTS_MAX; i++)
		if (d->part[i].name)
			free_groups &= ~d->part[i].groups;
	k = (sms + d->group_sms / 2) / d->group_sms;
	if (k < 1)
		k = 1;
	p->name = id;
	p->lend = lend;
	p->groups = 0;
	/* From the top: shares start at the bottom. */
	if (k <= popcount64(free_groups)) {
		for (int i = (int)d->ngroups - 1; i >= 0 && popcount64(p->groups) < k; i--)
			if (free_groups & (1ull << i))
				p->groups |= 1ull << i;
	}
	mps_fetch_add(&d->gen, 1u);
	pthread_mutex_unlock(&d->lock);
	publish_all();
	if (!p->groups) {
		mps_log_warn("SM partition %s: %u SMs do not fit on device %d (%u SMs free); its clients share the "
			     "rest", name, sms, dev, popcount64(free_groups) * d->group_sms);
		return -ENOSPC;
	}
	mps_log_info("SM partition %s: %u SMs of device %d%s", name, k * d->group_sms, dev,
		     lend ? ", lent while it has no client" : "");
	return 0;
}

void mps_sm_partition_remove(const char *name)
{
	int id = mps_sm_name_id(name, false);
	bool removed = false;

	for (int dev = 0; id && dev < mps_srv.ndev; dev++) {
		struct sm_device *d = &sm_dev[dev];
		struct sm_part *p;

		pthread_mutex_lock(&d->lock);
		p = part_named(d, id);
		if (p) {
			memset(p, 0, sizeof(*p));   /* its clients share again at their next work */
			mps_fetch_add(&d->gen, 1u);
			removed = true;
			mps_log_info("SM partition %s removed from device %d", name, dev);
		}
		pthread_mutex_unlock(&d->lock);
	}
	if (removed)
		publish_all();
}

void mps_sm_partition_metrics(FILE *f, int server)
{
	for (int dev = 0; dev < mps_srv.ndev; dev++) {
		struct sm_device *d = &sm_dev[dev];

		pthread_mutex_lock(&d->lock);
		for (unsigned int i = 0; i < SM_PARTS_MAX; i++) {
			const struct sm_part *p = &d->part[i];

			if (!p->name)
				continue;
			fprintf(f, "openmps_server_sm_partition_sms{server=\"%d\",device=\"%d\",partition=\"%s\"} %u\n",
				server, dev, mps_sm_name_of(p->name), popcount64(p->groups) * d->group_sms);
			fprintf(f, "openmps_server_sm_partition_clients{server=\"%d\",device=\"%d\",partition=\"%s\"} %u\n",
				server, dev, mps_sm_name_of(p->name), p->users);
		}
		pthread_mutex_unlock(&d->lock);
	}
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
	struct mps_region *r = mps_load_acquire(&c->region);

	for (int dev = 0; r && dev < mps_srv.ndev; dev++)
		mps_store_relaxed(&r->sm_count[dev], mps_sm_client_count(c, dev));
}

void mps_sm_release(struct mps_client *c)
{
	for (int dev = 0; dev < mps_srv.ndev; dev++) {
		struct mps_smbind *b = &c->sm[dev];
		bool changed = false;

		if (b->green) {
			pthread_mutex_lock(&sm_dev[dev].lock);
			green_put(&sm_dev[dev], b->green);
			if (b->in_part)
				changed = part_users(&sm_dev[dev], part_named(&sm_dev[dev], b->part), -1);
			pthread_mutex_unlock(&sm_dev[dev].lock);
		}
		memset(b, 0, sizeof(*b));
		if (changed)
			publish_all();
	}
}

unsigned int mps_sm_group_sms(int dev, unsigned int *ngroups)
{
	*ngroups = sm_dev[dev].on ? sm_dev[dev].ngroups : 0;
	return sm_dev[dev].on ? sm_dev[dev].group_sms : 0;
}

unsigned int mps_sm_partition_sms(int dev, const char *name)
{
	struct sm_device *d = &sm_dev[dev];
	int id = mps_sm_name_id(name, false);
	struct sm_part *p;
	unsigned int n = 0;

	pthread_mutex_lock(&d->lock);
	p = part_named(d, id);
	if (p)
		n = popcount64(p->groups) * d->group_sms;
	pthread_mutex_unlock(&d->lock);
	return n;
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
