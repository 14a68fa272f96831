// SPDX-License-Identifier: MIT
/*
 * See sched.h. Locking: sched.lock protects the run queue, the hot list,
 * the id table and the spinner count; it is a leaf (no driver call, no other
 * lock taken under it) and is never held while a client is served. Client
 * state moves by CAS (taking) or release store (handing back).
 *
 * Wake-ups: an idle thread sleeps in epoll_wait on one epoll set holding
 * every client's eventfd and the pool's own kick eventfd, all edge-triggered
 * (each write is one event; nothing is ever read back). epoll wakes one
 * sleeper per event.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "common/sq.h"
#include "server/control.h"
#include "server/crash.h"
#include "server/gpuwake.h"
#include "server/replay.h"
#include "server/sched.h"
#include "server/server.h"

#define ID_BUCKETS     1024u
#define SAMPLE_NS      (1000ull * 1000)       /* CPU pressure is read at most this often */
#define SLEEP_MS       100                    /* an idle thread looks around at least this often */
#define EVENTS_NS      (20ull * 1000)         /* a busy thread looks for wake-ups this often */
#define HOT_HANDOUT    8                      /* hot clients with work one scan moves to the run queue */
#define ACTIVE_NS      (10ull * 1000 * 1000)  /* a client with work this recently counts as active */
#define PARK_NS        (1000 * 1000)          /* a thread left out of the pool looks again this often */
#define PARK_STARVE_NS (2ull * 1000 * 1000)   /* ... and serves once a client has been queued this long */
#define DEMAND_NS      (20ull * 1000 * 1000)  /* the launch demand is weighed over this long ... */
#define DEMAND_HOLD_NS (1000ull * 1000 * 1000) /* ... and, once high, counts as high this long after */
#define DEMAND_MIN     64                     /* driver launches an interval needs to price one */

/* Set in mps_client.run by an eventfd event that found the client owned:
 * its owner must look at the ring again before it lets the client go. */
#define RUN_WAKE       0x100

/* One service thread's counters: written by that thread only (relaxed),
 * read by get_metrics; a cache line each. */
struct svc_stat {
	uint64_t serve_ns, launch_ns, launches, turns, wakeups, replays, replayed, replay_ns, poll_ns;
	uint64_t replay_updates, replay_update_ns;
	uint64_t op_ns[MPS_OP_STATS], op_n[MPS_OP_STATS];
} __attribute__((aligned(64)));

static __thread struct svc_stat *self;
static __thread unsigned int self_index;   /* the thread's place in the pool (serving()) */

/* CPU pressure levels, and what each allows. */
enum { FREE, BUSY, OVER };

static struct {
	pthread_mutex_t lock;
	struct mps_client *rq_head, *rq_tail;   /* run queue (rq_next) */
	unsigned int rq_len;                    /* atomic reads outside the lock */
	struct mps_client **hot;                /* the hot list */
	unsigned int nhot, hot_cap;             /* nhot: atomic reads outside the lock */
	unsigned int hot_next;                  /* where the next scan starts: each gets its turn */
	uint64_t scanned_ns;                    /* atomic: when a thread last looked at the hot list */
	struct mps_client *ids[ID_BUCKETS];     /* clients by id (id_next), for epoll events */
	unsigned int spinners;                  /* threads committed to watching the hot list */
	unsigned int sleeping;                  /* atomic: threads in epoll_wait */
	unsigned int scanning;                  /* atomic: spinners with nothing to serve */

	int epfd, kickfd, stopfd;
	unsigned int nthreads, ncpu;
	unsigned int busy_threads;              /* threads serving while crowded (0: all; serving()) */
	unsigned int started;                   /* atomic: threads running (stats read this many) */
	unsigned int active;                    /* atomic: clients with work lately (sampled) */
	pthread_t *threads;                     /* the pool, joined by mps_sched_stop */
	struct svc_stat *stat;                  /* one per thread */
	int stop;                               /* atomic: mps_sched_stop was called */
	struct reaper {                         /* teardown threads not yet joined (under lock) */
		pthread_t t;
		struct reaper *next;
	} *reapers;

	/* CPU pressure (the sampler's; read relaxed by everyone). */
	int level;
	pthread_mutex_t sample_lock;            /* the sampler's (trylock: one at a time) */
	uint64_t sampled_ns;                    /* atomic: when it last sampled */
	uint64_t psi_total_us, psi_at_ns;
	uint64_t rose_ns, hold_ns;              /* hysteresis: when pressure last rose, how long it holds */
	int psi_fd;
	uint32_t client_spin_ns;
	uint64_t spin_free_ns;                  /* OPENMPS_SPIN_US: a spinner's window with free CPUs */
	uint32_t client_free_ns;                /* OPENMPS_CLIENT_SPIN_US */
	bool strict;                            /* OPENMPS_SCHED_STRICT: a broken count aborts (tests) */

	/* Launch demand (the sampler's; launch_bound read relaxed by anyone). */
	uint64_t demand_at_ns, demand_high_ns;  /* when last weighed; when last found high */
	uint64_t kernels_seen, launches_seen, launch_ns_seen;
	uint64_t launch_cost_ns;                /* a driver launch's cost lately (0: not priced yet) */
	unsigned int demand_pct;                /* OPENMPS_REPLAY_DEMAND_PCT */
	uint64_t heavy_ns;                      /* when driver launches alone were last found heavy */
	int launch_bound, launch_heavy;
} sched = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sample_lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.kickfd = -1,
	.stopfd = -1,
	.psi_fd = -1,
	.hold_ns = 10000000ull,
};

/* ------------------------------------------------------------------ */
/* CPU pressure */

/* The total CPU stall time in microseconds (PSI "some"), or -1. */
static int64_t psi_total(void)
{
	char buf[256];
	ssize_t n;
	char *t;

	if (sched.psi_fd < 0)
		return -1;
	n = pread(sched.psi_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	t = strstr(buf, "total=");
	return t ? strtoll(t + 6, NULL, 10) : -1;
}

/* Runnable threads now, from /proc/loadavg ("0.1 0.2 0.3 R/T pid"), or -1. */
static int runnable(void)
{
	char buf[128];
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC), r = -1;
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		double a, b, c;

		buf[n] = 0;
		if (sscanf(buf, "%lf %lf %lf %d/", &a, &b, &c, &r) != 4)
			r = -1;
	}
	return r;
}

static unsigned int spin_max(void);
static unsigned int serving(void);

/* Whether only sched.busy_threads serve: CPUs are crowded and the
 * launches that go one by one leave those few threads enough time. */
static bool crowded(void)
{
	return sched.busy_threads && mps_sched_busy() && !mps_load_relaxed(&sched.launch_heavy);
}

/* Clients spin while CPUs are free; else they give the CPU away between
 * looks (a spinning client would take the CPU the server needs to answer
 * it). CPUs are not free when the pressure says so, nor when the clients
 * with work and the service threads that may be on a CPU at once (those
 * that serve while CPUs are crowded, else the spinners) outnumber them:
 * each of those spins through its waits, so a thread that wakes (a service
 * thread, a client back from a nap) finds every CPU taken and waits for a
 * scheduler tick, 4 ms on many kernels — CUDA's own waits stop spinning
 * past one context per CPU for the same reason. Sixteen clients on sixteen
 * CPUs with two service threads serving: a p99 of 1.0-1.4 ms against 4.3-4.5
 * with the service threads left out of the count. */
static uint32_t client_spin_for(int level, unsigned int active)
{
	unsigned int threads = crowded() ? sched.busy_threads : spin_max();

	return level == FREE && active + threads <= sched.ncpu ? sched.client_free_ns : 0;
}

/* Tells every client how long to spin now. */
static void publish_client_spin(uint32_t ns)
{
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		struct mps_region *r = mps_load_acquire(&c->region);

		if (r)
			mps_store_relaxed(&r->spin_hint_ns, ns);
	}
	pthread_mutex_unlock(&mps_srv.lock);
}

/* What the CPUs look like now: FREE, BUSY or OVER. */
static int measure(uint64_t now)
{
	int64_t total = psi_total();
	int level = FREE;

	if (total >= 0) {
		/* The share of the last interval in which some runnable thread
		 * waited for a CPU. */
		uint64_t dt = now - sched.psi_at_ns;
		uint64_t stall_ns = (uint64_t)(total - (int64_t)sched.psi_total_us) * 1000;

		if (sched.psi_at_ns && dt) {
			if (stall_ns * 5 > dt)          /* over 20% */
				level = OVER;
			else if (stall_ns * 50 > dt)    /* over 2% */
				level = BUSY;
		}
		sched.psi_total_us = (uint64_t)total;
		sched.psi_at_ns = now;
	} else {
		int r = runnable();

		if (r > (int)sched.ncpu)
			level = OVER;
		else if (r >= 0 && (unsigned int)r * 4 > sched.ncpu * 3)
			level = BUSY;
	}
	return level;
}

/* Counts the clients that had work in the last ACTIVE_NS. */
static void count_active(uint64_t now)
{
	unsigned int n = 0;

	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next)
		n += now - mps_load_relaxed(&c->active_ns) < ACTIVE_NS;
	pthread_mutex_unlock(&mps_srv.lock);
	mps_store_relaxed(&sched.active, n);
}

/* Whether a reading is high now or was less than DEMAND_HOLD_NS ago (*at:
 * when it last was, 0 never; updated). */
static bool held_high(uint64_t *at, bool high, uint64_t now)
{
	if (high)
		*at = now;
	return *at && now - *at < DEMAND_HOLD_NS;
}

/* Weighs the launch demand every DEMAND_NS (under sample_lock): the
 * kernels the clients launched, whether one by one or replayed, priced at
 * what a driver launch cost lately, against the CPU time of the threads
 * serving. When that passes demand_pct of it the service threads are the
 * clients' bottleneck (a launch costs 5-8 µs of one context's time, more
 * with more threads launching), and replaying runs of launches as graphs
 * (0.7-1 µs a kernel) pays for the latency a held segment costs. Replayed
 * kernels are priced as launches, so the demand does not fall because
 * replay lowered the cost, and a high reading holds for DEMAND_HOLD_NS.
 * The launches that still go one by one (runs that change every time, as
 * a decoder's, whose attention grows with each token) are weighed against
 * the threads that serve while CPUs are crowded: past demand_pct of them,
 * every thread serves (serving()). */
static void weigh_demand(uint64_t now)
{
	uint64_t kernels = 0, launches = 0, launch_ns = 0, dt = now - sched.demand_at_ns;
	unsigned int n = mps_load_acquire(&sched.started);
	bool high = false, heavy = false;

	if (dt < DEMAND_NS)
		return;
	for (unsigned int i = 0; i < n; i++) {
		const struct svc_stat *t = &sched.stat[i];

		launches += mps_load_relaxed(&t->launches);
		launch_ns += mps_load_relaxed(&t->launch_ns);
		kernels += mps_load_relaxed(&t->replayed);
	}
	kernels += launches;
	if (sched.demand_at_ns) {
		uint64_t dl = launches - sched.launches_seen, dk = kernels - sched.kernels_seen;

		if (dl >= DEMAND_MIN) {
			uint64_t cost = (launch_ns - sched.launch_ns_seen) / dl;

			sched.launch_cost_ns = sched.launch_cost_ns ? (3 * sched.launch_cost_ns + cost) / 4 : cost;
		}
		high = sched.launch_cost_ns &&
		       dk * sched.launch_cost_ns * 100 > (uint64_t)sched.demand_pct * serving() * dt;
		heavy = sched.launch_cost_ns && sched.busy_threads &&
			dl * sched.launch_cost_ns * 100 > (uint64_t)sched.demand_pct * sched.busy_threads * dt;
	}
	mps_store_relaxed(&sched.launch_bound, held_high(&sched.demand_high_ns, high, now));
	mps_store_relaxed(&sched.launch_heavy, held_high(&sched.heavy_ns, heavy, now));
	sched.demand_at_ns = now;
	sched.kernels_seen = kernels;
	sched.launches_seen = launches;
	sched.launch_ns_seen = launch_ns;
}

/* Reads the CPU pressure if the last reading is older than SAMPLE_NS
 * (one thread at a time) and sets the level. Spinning is itself a load, so
 * a level that rises because we spin would fall again once we stop, and
 * rise again: the level rises at once but falls one step at a time, only
 * after it has held for hold_ns, which doubles (up to a second) each time
 * it rises again soon after falling, and starts over after a quiet spell. */
static void sample(uint64_t now)
{
	int was, level, m;
	uint32_t hint;

	if (now - mps_load_relaxed(&sched.sampled_ns) < SAMPLE_NS || pthread_mutex_trylock(&sched.sample_lock))
		return;
	if (now - mps_load_relaxed(&sched.sampled_ns) < SAMPLE_NS) {
		pthread_mutex_unlock(&sched.sample_lock);
		return;
	}
	mps_store_relaxed(&sched.sampled_ns, now);
	weigh_demand(now);
	was = level = mps_load_relaxed(&sched.level);   /* written only under sample_lock */
	count_active(now);
	m = measure(now);
	if (m > level) {
		if (now - sched.rose_ns < 2 * sched.hold_ns)
			sched.hold_ns = sched.hold_ns * 2 > 1000000000ull ? 1000000000ull : sched.hold_ns * 2;
		else
			sched.hold_ns = 10000000ull;
		sched.rose_ns = now;
		level = m;
	} else if (m < level && now - sched.rose_ns > sched.hold_ns) {
		sched.rose_ns = now;
		level--;
	}
	hint = client_spin_for(level, mps_load_relaxed(&sched.active));
	if (level == was && hint == sched.client_spin_ns) {
		pthread_mutex_unlock(&sched.sample_lock);
		return;
	}
	if (level != was)
		mps_log_debug("CPU pressure: %s", level == FREE ? "free" : level == BUSY ? "busy" : "over");
	mps_store_relaxed(&sched.level, level);
	mps_store_relaxed(&sched.client_spin_ns, hint);
	pthread_mutex_unlock(&sched.sample_lock);
	publish_client_spin(hint);
}

uint32_t mps_sched_client_spin_ns(void)
{
	return mps_load_relaxed(&sched.client_spin_ns);
}

/* How many threads may spin at this level, and for how long. One always
 * may: a spinning thread that finds work saves every client a wake-up, and
 * the window is short when CPUs are scarce. */
static unsigned int spin_max(void)
{
	if (!sched.spin_free_ns)
		return 0;
	return mps_load_relaxed(&sched.level) == FREE && sched.ncpu >= 8 ? sched.ncpu / 4 : 1;
}

static uint64_t spin_window(void)
{
	return sched.spin_free_ns;
}

/* ------------------------------------------------------------------ */
/* The client table, the run queue and the hot list (under sched.lock) */

static unsigned int id_bucket(uint32_t id)
{
	return id & (ID_BUCKETS - 1);
}

static void id_add(struct mps_client *c)
{
	c->id_next = sched.ids[id_bucket(c->id)];
	sched.ids[id_bucket(c->id)] = c;
}

static void id_del(struct mps_client *c)
{
	for (struct mps_client **pp = &sched.ids[id_bucket(c->id)]; *pp; pp = &(*pp)->id_next) {
		if (*pp == c) {
			*pp = c->id_next;
			return;
		}
	}
}

static void kick(void)
{
	uint64_t one = 1;

	if (write(sched.kickfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		mps_log_warn("cannot wake a service thread: %s", strerror(errno));
}

/* Queues a client its thread hands back with work left (or a new one). */
static void rq_push(struct mps_client *c)
{
	bool wake;

	/* Queued clients are served anyway: a pending WAKE may go. */
	mps_store_release(&c->run, MPS_RUN_QUEUED);
	pthread_mutex_lock(&sched.lock);
	c->rq_next = NULL;
	c->rq_at = mps_now_ns();
	if (sched.rq_tail)
		sched.rq_tail->rq_next = c;
	else
		sched.rq_head = c;
	sched.rq_tail = c;
	mps_store_relaxed(&sched.rq_len, sched.rq_len + 1);
	/* More queued than idle threads awake to take it: wake a sleeper. */
	wake = sched.rq_len > mps_load_relaxed(&sched.scanning) && mps_load_acquire(&sched.sleeping) > 0;
	pthread_mutex_unlock(&sched.lock);
	if (wake)
		kick();
}

static struct mps_client *rq_pop(void)
{
	struct mps_client *c;

	if (!mps_load_relaxed(&sched.rq_len))
		return NULL;
	pthread_mutex_lock(&sched.lock);
	c = sched.rq_head;
	if (c) {
		sched.rq_head = c->rq_next;
		if (!sched.rq_head)
			sched.rq_tail = NULL;
		mps_store_relaxed(&sched.rq_len, sched.rq_len - 1);
	}
	pthread_mutex_unlock(&sched.lock);
	if (c)
		mps_store_relaxed(&c->run, MPS_RUN_OWNED);
	return c;
}

/* Caller holds the lock. */
static int hot_add(struct mps_client *c)
{
	if (sched.nhot == sched.hot_cap) {
		unsigned int ncap = sched.hot_cap ? sched.hot_cap * 2 : 64;
		struct mps_client **nh = realloc(sched.hot, ncap * sizeof(*nh));

		if (!nh)
			return -ENOMEM;
		sched.hot = nh;
		sched.hot_cap = ncap;
	}
	sched.hot[sched.nhot] = c;
	mps_store_relaxed(&sched.nhot, sched.nhot + 1);
	return 0;
}

/* Caller holds the lock. */
static void hot_del(struct mps_client *c)
{
	for (unsigned int i = 0; i < sched.nhot; i++) {
		if (sched.hot[i] == c) {
			sched.hot[i] = sched.hot[sched.nhot - 1];
			mps_store_relaxed(&sched.nhot, sched.nhot - 1);
			return;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Serving one client */

/* For the owner: has the client published messages we have not taken? */
static bool ring_pending(struct mps_client *c)
{
	struct mps_region *r = c->region;

	return r && mps_load_acquire(&r->sq_tail.v) != c->sq.head;
}

/* For a spinner, which does not own the client: the indices as published.
 * The client can lie about sq_head; that only makes us look for nothing. */
static bool ring_maybe(struct mps_client *c)
{
	struct mps_region *r = mps_load_acquire(&c->region);

	return r && mps_load_acquire(&r->sq_tail.v) != mps_load_acquire(&r->sq_head.v);
}

/* Lets an owned client go to state `to`; false if an eventfd event came
 * meanwhile (the caller still owns the client and must look again). */
static bool release(struct mps_client *c, int to)
{
	int expect = MPS_RUN_OWNED;

	if (mps_cas(&c->run, &expect, to))
		return true;
	mps_store_relaxed(&c->run, MPS_RUN_OWNED);   /* drop the WAKE: we are looking */
	return false;
}

/* The client is gone: hand it to a thread of its own that waits for its
 * GPU work and frees everything (which may take long), so the pool goes on. */
static void *teardown_main(void *arg)
{
	struct mps_client *c = arg;

	pthread_setname_np(pthread_self(), "omps-teardown");
	mps_crash_thread(c->pid);
	mps__client_finish(c);
	return NULL;
}

static void retire(struct mps_client *c)
{
	struct reaper *rp = malloc(sizeof(*rp));

	mps_store_release(&c->run, MPS_RUN_GONE);
	pthread_mutex_lock(&sched.lock);
	id_del(c);
	hot_del(c);
	pthread_mutex_unlock(&sched.lock);
	epoll_ctl(sched.epfd, EPOLL_CTL_DEL, c->evfd, NULL);
	if (!rp || pthread_create(&rp->t, NULL, teardown_main, c) != 0) {
		free(rp);
		mps__client_finish(c);   /* no thread to spare: do it here */
		return;
	}
	/* Joined by the next retire, or at the end (mps_sched_stop). */
	pthread_mutex_lock(&sched.lock);
	rp->next = sched.reapers;
	sched.reapers = rp;
	pthread_mutex_unlock(&sched.lock);
}

/* Joins the teardown threads that have finished (all of them if `all`). */
static void reap(bool all)
{
	struct reaper *list;

	pthread_mutex_lock(&sched.lock);
	list = sched.reapers;
	sched.reapers = NULL;
	pthread_mutex_unlock(&sched.lock);
	while (list) {
		struct reaper *rp = list;

		list = rp->next;
		if (all || pthread_tryjoin_np(rp->t, NULL) == 0) {
			if (all)
				pthread_join(rp->t, NULL);
			free(rp);
			continue;
		}
		pthread_mutex_lock(&sched.lock);
		rp->next = sched.reapers;
		sched.reapers = rp;
		pthread_mutex_unlock(&sched.lock);
	}
}

/* Arms an idle client: its completions go to its waiter, and its next
 * message wakes us through its eventfd. Returns true if work arrived
 * meanwhile: the caller still owns the client. */
static bool arm(struct mps_client *c)
{
	mps_replay_expire(c, 0, true);   /* nobody will watch it: what it holds goes */
	mps_comp_handoff(c);
	/* NEED_WAKEUP, fence, ring empty (the client publishes, fences, and
	 * reads the flag: one of us sees the other). A wake-up that comes
	 * between here and the release sets WAKE, and the release fails. */
	if (!mps_sq_prepare_sleep(&c->sq) || mps_load_acquire(&c->dead)) {
		mps_sq_awake(&c->sq);
		return true;
	}
	if (release(c, MPS_RUN_IDLE))
		return false;
	mps_sq_awake(&c->sq);
	return true;
}

/* A client whose eventfd fired, seen by a busy thread: queue it (the
 * thread goes on with what it was doing; the run queue keeps the turns
 * fair). */
static void queue_event(uint32_t id)
{
	struct mps_client *c;
	int expect = MPS_RUN_IDLE | RUN_WAKE;

	pthread_mutex_lock(&sched.lock);
	for (c = sched.ids[id_bucket(id)]; c && c->id != id; c = c->id_next)
		;
	if (!c || (mps_fetch_or(&c->run, RUN_WAKE) & ~RUN_WAKE) != MPS_RUN_IDLE ||
	    !mps_cas(&c->run, &expect, MPS_RUN_OWNED))
		c = NULL;
	pthread_mutex_unlock(&sched.lock);
	if (c)
		rq_push(c);
}

/* Busy threads never sleep in epoll, where idle clients' wake-ups arrive:
 * so, when no thread sleeps there to take them, they look there now and
 * then (at most every EVENTS_NS each). */
static void drain_events(uint64_t now)
{
	static __thread uint64_t last;
	struct epoll_event evs[16];
	int n;

	/* A thread asleep in epoll gets them (one per event): none to look for. */
	if (now - last < EVENTS_NS || mps_load_acquire(&sched.sleeping) > 0)
		return;
	last = now;
	n = epoll_wait(sched.epfd, evs, 16, 0);
	for (int i = 0; i < n; i++)
		if (evs[i].data.u64 != UINT64_MAX)
			queue_event((uint32_t)evs[i].data.u64);
}

/* Looks at the client's pending completions (mps_comp_poll), counting the
 * time on this thread. */
static bool poll_comp(struct mps_client *c)
{
	uint64_t start = mps_now_ns();
	bool done = mps_comp_poll(c);

	if (self)
		mps_store_relaxed(&self->poll_ns, self->poll_ns + (mps_now_ns() - start));
	return done;
}

/* Keeps watching an owned client while it is the only one with anything
 * going (nothing queued, nothing hot): its ring and its completions are
 * polled right here, with no locking, as a thread of its own would, so a
 * launch-then-synchronize is answered within a poll. Returns true when the
 * client has work again; false when another client needs the thread or the
 * spin window passed without work. */
static bool linger(struct mps_client *c)
{
	for (;;) {
		uint64_t now = mps_now_ns();

		if (mps_load_acquire(&c->dead) || ring_pending(c))
			return true;
		if (c->comp.head && poll_comp(c))
			mps_store_relaxed(&c->active_ns, now);
		mps_replay_expire(c, now, false);
		mps_gpuwake_poll(now);
		if (mps_load_relaxed(&sched.rq_len) || mps_load_relaxed(&sched.nhot))
			return false;
		if (!c->comp.head && now - c->active_ns >= spin_window() && !mps_gpuwake_waiting(c, now))
			return false;
		drain_events(now);
		mps_cpu_relax();
	}
}

/* Copies are counted by where their host side is, as each way costs the
 * driver differently: these follow the operations in the counters. */
enum { COPY_H2D_INLINE = MPS_OP_COUNT, COPY_H2D_SLOT, COPY_H2D_PINNED, COPY_D2H_SLOT, COPY_D2H_PINNED,
       COPY_D2D };
static const char *const copy_names[MPS_OP_STATS - MPS_OP_COUNT] = {
	"COPY_H2D_INLINE", "COPY_H2D_SLOT", "COPY_H2D_PINNED", "COPY_D2H_SLOT", "COPY_D2H_PINNED", "COPY_D2D",
};

const char *mps_sched_op_name(unsigned int i)
{
	return i < MPS_OP_COUNT ? mps__op_name(i) : i < MPS_OP_STATS ? copy_names[i - MPS_OP_COUNT] : NULL;
}

/* The counter a message of operation `op` goes to. */
static unsigned int op_stat(const struct mps_msg *m)
{
	const struct mps_msg_copy *q = (const void *)m;

	if (m->op != MPS_OP_COPY || m->len < sizeof(*q))
		return m->op;
	if (q->kind == MPS_COPY_H2D)
		return q->host_region == MPS_HOST_INLINE ? COPY_H2D_INLINE :
		       q->host_region == MPS_HOST_SLOT ? COPY_H2D_SLOT : COPY_H2D_PINNED;
	if (q->kind == MPS_COPY_D2H)
		return q->host_region == MPS_HOST_SLOT ? COPY_D2H_SLOT : COPY_D2H_PINNED;
	return COPY_D2D;
}

/* Counts one message (counter `i`, op_stat) that ran from *at until now;
 * *at becomes now (the next message's start). */
static void note_op(unsigned int i, uint64_t *at)
{
	uint64_t now = mps_now_ns();

	if (self && i < MPS_OP_STATS) {
		mps_store_relaxed(&self->op_ns[i], self->op_ns[i] + (now - *at));
		mps_store_relaxed(&self->op_n[i], self->op_n[i] + 1);
	}
	*at = now;
}

/* Runs turns of an owned client until it is handed on: queued again if it
 * has more, hot if it had work lately or waits for the GPU and a thread
 * watches the hot list, else armed. `spinner`: the caller is one of the
 * threads that watch. Returns true if the caller has just become one (it
 * must spin next: a client it made hot relies on it). */
static bool serve(struct mps_client *c, bool spinner)
{
	bool committed = false;

	mps_crash_client(c->pid);
	for (;;) {
		uint64_t start = mps_now_ns(), now = start;
		unsigned int n = 0;
		bool hot = false;

		sample(start);   /* busy threads must see the pressure change too */

		if (!c->ready && !mps_load_acquire(&c->dead) && mps__client_greet(c) < 0)
			mps_client_kill(c, NULL);
		while (!mps_load_acquire(&c->dead) && n < MPS_TURN_MSGS) {
			int len = mps_sq_pop(&c->sq, c->msg);
			unsigned int stat;

			if (len < 0) {
				mps_client_kill(c, "broke the ring protocol");
				break;
			}
			if (len == 0)
				break;
			stat = op_stat((const struct mps_msg *)c->msg);
			mps__dispatch(c, (const struct mps_msg *)c->msg);
			note_op(stat, &now);
			if (++n % 32 == 0) {
				if (c->comp.head)
					poll_comp(c);
				now = mps_now_ns();
				if (now - start > MPS_TURN_NS)
					break;
			}
		}
		now = mps_now_ns();
		if (n) {
			mps_store_relaxed(&c->active_ns, now);
			if (self) {
				mps_store_relaxed(&self->serve_ns, self->serve_ns + (now - start));
				mps_store_relaxed(&self->turns, self->turns + 1);
			}
		}
		if (c->comp.head && poll_comp(c))
			mps_store_relaxed(&c->active_ns, now);
		mps_replay_expire(c, now, false);
		mps_gpuwake_poll(now);
		if (mps_load_acquire(&c->dead)) {
			mps_crash_client(0);
			retire(c);
			return committed;
		}
		if (ring_pending(c)) {
			mps_crash_client(0);
			rq_push(c);
			return committed;
		}
		if (!spinner && !committed && spin_max() > 0) {
			pthread_mutex_lock(&sched.lock);
			if (sched.spinners < spin_max()) {
				sched.spinners++;
				committed = true;
			}
			pthread_mutex_unlock(&sched.lock);
		}
		if ((spinner || committed) && linger(c))
			continue;
		now = mps_now_ns();
		if (c->comp.head || mps_replay_holds(c) || now - c->active_ns < spin_window() ||
		    mps_gpuwake_waiting(c, now)) {
			pthread_mutex_lock(&sched.lock);
			if (spinner || committed || sched.spinners > 0)
				hot = hot_add(c) == 0 && (release(c, MPS_RUN_HOT) || (hot_del(c), false));
			pthread_mutex_unlock(&sched.lock);
		}
		if (hot) {
			mps_crash_client(0);
			return committed;
		}
		if (!arm(c)) {
			mps_crash_client(0);
			return committed;
		}
	}
}

/* Takes a hot client back from the list; true if it is ours now. Caller
 * holds the lock. */
static bool take_hot(struct mps_client *c)
{
	int expect = MPS_RUN_HOT;

	if (!mps_cas(&c->run, &expect, MPS_RUN_OWNED)) {
		expect = MPS_RUN_HOT | RUN_WAKE;
		if (!mps_cas(&c->run, &expect, MPS_RUN_OWNED))
			return false;
	}
	hot_del(c);
	return true;
}

/* Arms every hot client (the last spinner is stopping). */
static void arm_all_hot(void)
{
	for (;;) {
		struct mps_client *c = NULL;

		pthread_mutex_lock(&sched.lock);
		while (sched.nhot && !c) {
			c = sched.hot[sched.nhot - 1];
			if (!take_hot(c))
				c = NULL;
		}
		pthread_mutex_unlock(&sched.lock);
		if (!c)
			return;
		if (mps_load_acquire(&c->dead))
			retire(c);
		else if (arm(c))
			rq_push(c);   /* work came: the pool takes it from the queue */
	}
}

/* One look over the hot list: serves the first client with work, arms one
 * that has cooled. Returns true if it served something. */
static bool scan_hot(uint64_t now)
{
	struct mps_client *c = NULL, *more[HOT_HANDOUT];
	unsigned int nmore = 0;
	bool cool = false;

	mps_store_relaxed(&sched.scanned_ns, now);
	pthread_mutex_lock(&sched.lock);
	for (unsigned int j = 0; j < sched.nhot; j++) {
		unsigned int i = (sched.hot_next + j) % sched.nhot;
		struct mps_client *h = sched.hot[i];
		bool waits = mps_load_relaxed(&h->comp.count) != 0;

		/* A client holding launches stays hot until they go (replay.h);
		 * one waiting for the GPU's store until it comes. */
		cool = !waits && !mps_replay_holds(h) && now - mps_load_relaxed(&h->active_ns) >= spin_window() &&
		       !mps_gpuwake_waiting(h, now);
		if ((ring_maybe(h) || waits || cool || mps_replay_due(h, now) || mps_load_relaxed(&h->dead)) &&
		    take_hot(h)) {
			c = h;
			sched.hot_next = i;   /* hot_del moved the last one here */
			break;
		}
	}
	/* Others with messages waiting go to the run queue, where threads
	 * that are not spinning help (rq_push wakes one if needed). */
	for (unsigned int i = 0; c && i < sched.nhot && nmore < HOT_HANDOUT;) {
		struct mps_client *h = sched.hot[i];

		if (ring_maybe(h) && take_hot(h))
			more[nmore++] = h;   /* hot_del moved another one here */
		else
			i++;
	}
	pthread_mutex_unlock(&sched.lock);
	if (!c)
		return false;
	/* This thread is about to serve: it no longer counts as one that
	 * will take what it queues, so rq_push wakes sleepers for it. */
	mps_fetch_sub(&sched.scanning, 1);
	for (unsigned int i = 0; i < nmore; i++)
		rq_push(more[i]);
	if (mps_load_acquire(&c->dead)) {
		retire(c);
		mps_fetch_add(&sched.scanning, 1);
		return true;
	}
	if (cool && !ring_pending(c)) {
		if (arm(c))
			serve(c, true);
		cool = true;
	} else {
		serve(c, true);
		cool = false;
	}
	mps_fetch_add(&sched.scanning, 1);
	return !cool;
}

/* True if a hot client waits for a word the GPU stores: it sends its next
 * message the moment the store comes, and a thread asleep in epoll_wait
 * answers that message only after a wake-up, which on virtual machines
 * took up to milliseconds (8 processes of GEMM+FFT on an H200 VM: the
 * gap from the GPU's store to the client's next command on the GPU had a
 * p99 of 2.3-7.5 ms with the spinners stopping after their window, under
 * 0.1 ms with them watching). */
static bool hot_gpu_waiting(uint64_t now)
{
	bool waiting = false;

	pthread_mutex_lock(&sched.lock);
	for (unsigned int i = 0; i < sched.nhot && !waiting; i++)
		waiting = mps_gpuwake_waiting(sched.hot[i], now);
	pthread_mutex_unlock(&sched.lock);
	return waiting;
}

/* How many of the pool's threads serve now. While launches are replayed
 * (CPUs crowded: mps_sched_busy) a request costs the server a few driver
 * calls and two threads keep up; each thread more takes a CPU from the
 * clients and makes the driver's calls dearer for the others (they share
 * one context's locks). On a 16-CPU H200, batch-1 inference at 16 and 32
 * processes served 3-17% more requests with two threads than with four,
 * but at 8, where launches are not replayed, 36% fewer. Launches that go
 * one by one all the same (crowded(): launch_heavy) need every thread. */
static unsigned int serving(void)
{
	return crowded() ? sched.busy_threads : sched.nthreads;
}

/* Spins while that pays: returns when the run queue has work, or when no
 * work came for the spin window (or the CPUs got busy, or the thread was
 * left out of the pool: serving()). The caller has
 * counted itself in sched.spinners. */
static void spin(void)
{
	uint64_t last = mps_now_ns();
	bool last_one;

	mps_fetch_add(&sched.scanning, 1);
	for (;;) {
		uint64_t now = mps_now_ns();
		struct mps_client *c;

		bool found;

		/* Hot and queued clients by turns: one look at the hot list,
		 * one queued client, so neither kind waits for the other. */
		drain_events(now);
		mps_gpuwake_poll(now);
		found = scan_hot(now);
		c = rq_pop();
		if (c) {
			mps_fetch_sub(&sched.scanning, 1);
			serve(c, true);
			mps_fetch_add(&sched.scanning, 1);
			found = true;
		}
		if (found) {
			last = mps_now_ns();
			continue;
		}
		sample(now);
		if (now - last > spin_window() && hot_gpu_waiting(now))
			last = now;   /* a wait's end is a message to come: keep watching */
		if (now - last > spin_window() || spin_max() == 0 || self_index >= serving())
			break;
		mps_cpu_relax();
	}
	mps_fetch_sub(&sched.scanning, 1);
	pthread_mutex_lock(&sched.lock);
	sched.spinners--;
	last_one = sched.spinners == 0;
	pthread_mutex_unlock(&sched.lock);
	if (last_one)
		arm_all_hot();
}

/* A client whose eventfd fired: take it if it is idle and serve it; else
 * tell whoever has it to look again. Returns true if it served the client;
 * *committed is set if the caller must spin next (see serve()). */
static bool on_event(uint32_t id, bool *committed)
{
	struct mps_client *c;
	int expect = MPS_RUN_IDLE | RUN_WAKE;

	pthread_mutex_lock(&sched.lock);
	for (c = sched.ids[id_bucket(id)]; c && c->id != id; c = c->id_next)
		;
	if (c && (mps_fetch_or(&c->run, RUN_WAKE) & ~RUN_WAKE) == MPS_RUN_IDLE &&
	    mps_cas(&c->run, &expect, MPS_RUN_OWNED))
		;   /* ours */
	else
		c = NULL;
	pthread_mutex_unlock(&sched.lock);
	if (!c)
		return false;
	/* A thread that has committed to spin is one spinner, however many
	 * clients it serves before it does. */
	if (serve(c, *committed))
		*committed = true;
	return true;
}

/* After serving: spin next if this thread committed to (serve() says so)
 * or there is room for another spinner. A thread spins only after it has
 * done work, and sleeps once a spin found none: an idle pool sleeps. */
static void spin_after(bool committed)
{
	bool may_spin = committed;

	if (!may_spin) {
		sample(mps_now_ns());
		pthread_mutex_lock(&sched.lock);
		may_spin = sched.spinners < spin_max();
		if (may_spin)
			sched.spinners++;
		pthread_mutex_unlock(&sched.lock);
	}
	if (may_spin)
		spin();
}

/* A thread past serving() waits, holding nothing, and looks again. True
 * when it should serve this once all the same: a client has waited in the
 * run queue longer than PARK_STARVE_NS (the serving threads are held up in
 * long calls). */
static bool park(void)
{
	bool starved = false;

	if (mps_load_relaxed(&sched.rq_len)) {
		pthread_mutex_lock(&sched.lock);
		starved = sched.rq_head && mps_now_ns() - sched.rq_head->rq_at > PARK_STARVE_NS;
		pthread_mutex_unlock(&sched.lock);
	}
	if (starved)
		return true;
	nanosleep(&(struct timespec){ .tv_nsec = PARK_NS }, NULL);
	reap(false);
	return false;
}

static void *thread_main(void *arg)
{
	self = arg;
	self_index = (unsigned int)(self - sched.stat);
	pthread_setname_np(pthread_self(), "omps-service");
	mps_crash_thread(0);
	while (!mps_load_acquire(&sched.stop)) {
		struct epoll_event ev;
		struct mps_client *c;
		bool served = false, committed = false;
		int n;

		if (self_index >= serving() && !park())
			continue;
		c = rq_pop();
		if (c) {
			committed = serve(c, false);
			drain_events(mps_now_ns());
			spin_after(committed);
			continue;
		}
		mps_fetch_add(&sched.sleeping, 1);
		/* A client queued between the look above and here kicked us.
		 * One event a sleeper: when clients wake together (a burst
		 * after a quiet spell), the kernel hands the events still
		 * ready to the other sleepers, where taking them all served
		 * every client of the burst on this thread, one after
		 * another. */
		n = mps_load_relaxed(&sched.rq_len) ? 0 : epoll_wait(sched.epfd, &ev, 1, SLEEP_MS);
		mps_fetch_sub(&sched.sleeping, 1);
		if (n > 0)
			mps_store_relaxed(&self->wakeups, self->wakeups + 1);
		reap(false);
		if (n > 0 && ev.data.u64 != UINT64_MAX)
			served = on_event((uint32_t)ev.data.u64, &committed);
		if (served) {
			spin_after(committed);
		} else if (n == 0 && mps_load_relaxed(&sched.nhot) &&
			   mps_now_ns() - mps_load_relaxed(&sched.scanned_ns) > SLEEP_MS * 1000000ull / 2) {
			/* Hot clients nobody has looked at for a while: the threads
			 * that watch them are all held up in long calls. Watch too. */
			mps_log_debug("hot clients unwatched: a sleeping thread takes over");
			pthread_mutex_lock(&sched.lock);
			sched.spinners++;
			pthread_mutex_unlock(&sched.lock);
			spin();
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */

/* The CPUs this server may use: its affinity, less where a cgroup's CPU
 * quota (v2 cpu.max) allows fewer, or OPENMPS_CPUS. */
static unsigned int cpus(void)
{
	cpu_set_t set;
	long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");

	if (f) {
		long long quota, period;

		if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0 &&
		    (quota + period - 1) / period < n)
			n = (long)((quota + period - 1) / period);
		fclose(f);
	}
	if (n < 1)
		n = 1;
	return (unsigned int)mps_env_long("OPENMPS_CPUS", n, 1, 4096);
}

/* How many service threads by default: a quarter of the CPUs, at least
 * three and at most sixteen (or all of them, at least two, where there are
 * fewer). The service threads make every client's launches in one
 * context, where the driver's launch path grows dearer with each thread
 * in it (3.7 us of CPU a launch alone, 8.7 with eight); with runs of
 * launches replayed as graphs (replay.h) a request's launches cost them a
 * few microseconds, and idle threads only take CPU from the clients. On a
 * 16-CPU H200 host, batch-1 inference (14 launches a request) at 16 and 32
 * processes served 24,500 and 24,900 requests/s with 4 threads against
 * 22,100 and 20,700 with 8 in one run; in another, 31,600 and 31,100 with 3
 * and 26,500 and 28,500 with 6 (bench/infer.sh, docs/BENCHMARKS.md). An
 * idle thread sleeps, and at most a quarter of the CPUs' worth of them
 * spin. */
static unsigned int default_threads(unsigned int ncpu)
{
	unsigned int n = ncpu / 4;

	if (n < 3)
		n = ncpu < 3 ? ncpu : 3;
	if (n > 16)
		n = 16;
	return n < 2 ? 2 : n;
}

int mps_sched_start(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = UINT64_MAX };
	pthread_attr_t attr;

	sched.ncpu = cpus();
	sched.strict = getenv("OPENMPS_SCHED_STRICT") && *getenv("OPENMPS_SCHED_STRICT") == '1';
	sched.nthreads = (unsigned int)mps_env_long("OPENMPS_THREADS", default_threads(sched.ncpu), 1, 256);
	sched.busy_threads = (unsigned int)mps_env_long("OPENMPS_BUSY_THREADS", 2, 0, 256);
	sched.demand_pct = (unsigned int)mps_env_long("OPENMPS_REPLAY_DEMAND_PCT", 75, 1, 100000);
	if (sched.busy_threads >= sched.nthreads || !mps_replay_enabled())
		sched.busy_threads = 0;   /* every thread serves, always */
	sched.spin_free_ns = mps_srv.spin_ns;
	sched.client_free_ns = (uint32_t)mps_env_long("OPENMPS_CLIENT_SPIN_US", 1000, 0, 1000000) * 1000;
	sched.client_spin_ns = sched.client_free_ns;
	sched.psi_fd = open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC);
	sched.epfd = epoll_create1(EPOLL_CLOEXEC);
	sched.kickfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sched.stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sched.epfd < 0 || sched.kickfd < 0 || sched.stopfd < 0 ||
	    epoll_ctl(sched.epfd, EPOLL_CTL_ADD, sched.kickfd, &ev) < 0)
		return -errno;
	ev.events = EPOLLIN;
	if (epoll_ctl(sched.epfd, EPOLL_CTL_ADD, sched.stopfd, &ev) < 0)
		return -errno;
	sched.threads = calloc(sched.nthreads, sizeof(*sched.threads));
	sched.stat = aligned_alloc(64, sched.nthreads * sizeof(*sched.stat));
	if (!sched.threads || !sched.stat)
		return -ENOMEM;
	memset(sched.stat, 0, sched.nthreads * sizeof(*sched.stat));
	pthread_attr_init(&attr);
	/* The driver may compile PTX on these threads (deep recursion in its
	 * JIT): full-size stacks; untouched pages cost nothing. */
	pthread_attr_setstacksize(&attr, 16 * 1024 * 1024);
	for (unsigned int i = 0; i < sched.nthreads; i++) {
		int r = pthread_create(&sched.threads[i], &attr, thread_main, &sched.stat[i]);

		if (r) {
			sched.nthreads = i;
			mps_store_release(&sched.started, i);
			pthread_attr_destroy(&attr);
			return -r;
		}
	}
	mps_store_release(&sched.started, sched.nthreads);
	pthread_attr_destroy(&attr);
	mps_log_info("%u service threads for %u CPUs; CPU pressure from %s", sched.nthreads, sched.ncpu,
		     sched.psi_fd >= 0 ? "/proc/pressure/cpu" : "/proc/loadavg");
	return 0;
}

void mps_sched_stop(void)
{
	uint64_t one = 1;

	mps_store_release(&sched.stop, 1);
	/* Level-triggered: every sleeper wakes, and any that sleeps later. */
	if (write(sched.stopfd, &one, sizeof(one)) < 0)
		mps_log_warn("cannot stop the service threads: %s", strerror(errno));
	for (unsigned int i = 0; i < sched.nthreads; i++)
		pthread_join(sched.threads[i], NULL);
	reap(true);
	if (sched.spinners || sched.nhot)
		mps_log_error("service threads stopped with %u spinner(s) counted and %u hot client(s)", sched.spinners,
			      sched.nhot);
	if ((sched.spinners || sched.nhot) && sched.strict)
		abort();
	mps_store_release(&sched.started, 0);
	free(sched.threads);
	free(sched.stat);
	sched.threads = NULL;
	sched.stat = NULL;
	sched.nthreads = 0;
}

void mps_sched_note_launch(uint64_t ns)
{
	if (!self)
		return;
	mps_store_relaxed(&self->launch_ns, self->launch_ns + ns);
	mps_store_relaxed(&self->launches, self->launches + 1);
}

void mps_sched_note_replay(unsigned int kernels, uint64_t ns, unsigned int updates, uint64_t update_ns)
{
	if (!self)
		return;
	mps_store_relaxed(&self->replays, self->replays + 1);
	mps_store_relaxed(&self->replayed, self->replayed + kernels);
	mps_store_relaxed(&self->replay_ns, self->replay_ns + ns);
	mps_store_relaxed(&self->replay_updates, self->replay_updates + updates);
	mps_store_relaxed(&self->replay_update_ns, self->replay_update_ns + update_ns);
}

bool mps_sched_launch_bound(void)
{
	return mps_load_relaxed(&sched.launch_bound);
}

bool mps_sched_busy(void)
{
	unsigned int many = sched.ncpu * 3 / 4;

	return mps_load_relaxed(&sched.level) == OVER || mps_load_relaxed(&sched.active) >= (many < 2 ? 2 : many);
}

void mps_sched_stats(struct mps_sched_stats *s)
{
	unsigned int n = mps_load_acquire(&sched.started);

	memset(s, 0, sizeof(*s));
	for (unsigned int i = 0; i < n; i++) {
		const struct svc_stat *t = &sched.stat[i];
		struct timespec ts;
		clockid_t cid;

		s->serve_ns += mps_load_relaxed(&t->serve_ns);
		s->launch_ns += mps_load_relaxed(&t->launch_ns);
		s->launches += mps_load_relaxed(&t->launches);
		s->turns += mps_load_relaxed(&t->turns);
		s->wakeups += mps_load_relaxed(&t->wakeups);
		s->replays += mps_load_relaxed(&t->replays);
		s->replayed += mps_load_relaxed(&t->replayed);
		s->replay_ns += mps_load_relaxed(&t->replay_ns);
		s->poll_ns += mps_load_relaxed(&t->poll_ns);
		s->replay_updates += mps_load_relaxed(&t->replay_updates);
		s->replay_update_ns += mps_load_relaxed(&t->replay_update_ns);
		for (unsigned int op = 0; op < MPS_OP_STATS; op++) {
			s->op_ns[op] += mps_load_relaxed(&t->op_ns[op]);
			s->op_n[op] += mps_load_relaxed(&t->op_n[op]);
		}
		if (pthread_getcpuclockid(sched.threads[i], &cid) == 0 && clock_gettime(cid, &ts) == 0)
			s->cpu_ns += (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
}

void mps_sched_add(struct mps_client *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = c->id };

	pthread_mutex_lock(&sched.lock);
	id_add(c);
	pthread_mutex_unlock(&sched.lock);
	if (epoll_ctl(sched.epfd, EPOLL_CTL_ADD, c->evfd, &ev) < 0)
		mps_log_warn("client %d: cannot watch its eventfd: %s", (int)c->pid, strerror(errno));
	rq_push(c);
}

void mps_sched_kick(struct mps_client *c)
{
	uint64_t one = 1;

	/* Whatever its state, a thread will look: an idle client's eventfd
	 * wakes one; a queued, hot or owned one is looked at anyway. */
	if (c->evfd >= 0 && write(c->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		mps_log_debug("client %d: cannot kick: %s", (int)c->pid, strerror(errno));
}
