// SPDX-License-Identifier: MIT
/*
 * See replay.h. State per client (struct mps_replay, made at its first
 * plain launch): the run under way (launches recorded with their argument
 * bytes, some of them held), the learned run and its graph, with the
 * arguments each node was last given.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/gputime.h"
#include "server/replay.h"
#include "server/sched.h"
#include "server/server.h"
#include "server/smshare.h"

#define RUN_MIN      4    /* shorter runs save too little to hold */
#define RUN_MAX      256  /* a small model's forward pass */
#define BUILDS_BURST 32   /* graphs a client may build at once ... */
#define BUILD_EVERY_NS (100ull * 1000 * 1000)   /* ... and one more each this long */
#define LAUNCH_ARGS  4096         /* a launch with more argument bytes ends replay for its run */
#define RUN_BYTES    (256u << 10) /* nor may a run's arguments pass this: what a client can make us keep */
#define ALTS         3            /* executable graphs kept besides the first, for other arguments */
#define SEG_LEN      8            /* launches a graph of the learned run covers (OPENMPS_REPLAY_SEGMENT) */

enum { OFF, BUSY_ONLY, ALWAYS };

static int mode = BUSY_ONLY;
static uint64_t hold_ns = 4000ull * 1000;
static unsigned int seg_len = SEG_LEN;   /* 0: one graph for the whole run */
static bool grids_vary;                  /* OPENMPS_REPLAY_GRIDS: a node's grid may change */
static uint64_t expired, let_go;   /* atomic: holds that ran out, that a launch or message ended */

struct launch {                 /* one launch of a run */
	struct mps_sfunc *f;
	uint32_t grid[3], block[3], smem;
	uint32_t nattrs;
	uint8_t *args;              /* f->arg_size bytes, then (8-aligned) nattrs CUlaunchAttribute */
	uint32_t cap;
};

/* Where the attributes start after arg_size argument bytes: aligned for them. */
static uint32_t attrs_at(uint32_t arg_size)
{
	return (arg_size + 7u) & ~7u;
}

static const CUlaunchAttribute *attrs_of(const struct launch *l)
{
	return l->nattrs ? (const CUlaunchAttribute *)(l->args + attrs_at(l->f->arg_size)) : NULL;
}

/* One graph of the learned run: its launches [first, first + n) as a chain
 * of kernel nodes, instantiated, and more executable graphs of it, each
 * with the arguments its nodes were last given (every node's, one after
 * another): a framework's caching allocator often hands a request one of a
 * few sets of blocks, and a graph whose nodes already hold the set needs no
 * node set at all (each costs 1-1.5 µs). The first executable graph's
 * arguments and grids are the learned run's (exp[i].args, exp[i].grid). */
struct seg {
	unsigned int first, n;
	CUgraph graph;
	CUgraphExec exec;
	struct {
		CUgraphExec exec;
		uint8_t *args;
		uint32_t (*grid)[3];   /* each node's grid, as args */
	} alt[ALTS];
	unsigned int nalt;
};

struct mps_replay {
	/* The run under way. */
	struct mps_sstream *st;     /* its stream; NULL before its first launch */
	uint32_t key_stream, key_ctx;   /* the stream as messages name it */
	unsigned int n;             /* launches so far */
	uint32_t bytes;             /* their argument bytes */
	unsigned int sent;          /* the first `sent` went as graphs (whole segments) ... */
	unsigned int held;          /* ... the next `held` are held (then sent + held == n) */
	bool broken;                /* too long to keep */
	struct launch run[RUN_MAX];

	/* A run seen lately that differs from the learned one: it replaces
	 * the learned one when seen twice in a row. */
	struct launch cand[RUN_MAX];
	unsigned int ncand, cand_seen;
	struct mps_sstream *cand_st;

	/* The learned run, and its graphs (nseg: none yet). */
	struct launch exp[RUN_MAX]; /* args: what each node was last given */
	unsigned int nexp;
	unsigned int builds;        /* graphs it may build now (a token bucket) */
	uint64_t built_ns;          /* when the bucket was last filled */
	struct mps_sstream *exp_st;
	struct mps_green *exp_green;
	struct seg *seg;
	unsigned int nseg;
	CUgraphNode node[RUN_MAX];  /* launch i's node, in its segment's graph */
};

void mps_replay_init(void)
{
	const char *v = getenv("OPENMPS_REPLAY");

	if (!v || !*v || !strcmp(v, "1"))
		mode = BUSY_ONLY;
	else if (!strcmp(v, "0"))
		mode = OFF;
	else if (!strcmp(v, "always"))
		mode = ALWAYS;
	else
		mps_log_warn("ignoring OPENMPS_REPLAY=%s (want 0, 1 or always)", v);
	hold_ns = (uint64_t)mps_env_long("OPENMPS_REPLAY_HOLD_US", (long)(hold_ns / 1000), 1, 10 * 1000 * 1000) * 1000;
	seg_len = (unsigned int)mps_env_long("OPENMPS_REPLAY_SEGMENT", SEG_LEN, 0, RUN_MAX);
	grids_vary = mps_env_long("OPENMPS_REPLAY_GRIDS", 0, 0, 1) != 0;
}

bool mps_replay_enabled(void)
{
	return mode != OFF;
}

/* The same kernel, configuration and attributes (the arguments may differ:
 * a graph's node takes new ones). */
/* Whether a and b can be one node of a learned run: the same function,
 * block, shared memory and attributes, and the same grid unless
 * OPENMPS_REPLAY_GRIDS=1 makes the grid a node's parameter like its
 * arguments (set at launch when it differs): a decoder's kernels that walk
 * its growing cache (a concatenation, an attention over every past token)
 * may change their grid with every token, which keeps its runs from
 * matching otherwise. Off by default until measured on a GPU. */
static bool same_shape(const struct launch *a, const struct launch *b)
{
	return a->f == b->f && a->smem == b->smem && a->nattrs == b->nattrs &&
	       (grids_vary || !memcmp(a->grid, b->grid, sizeof(a->grid))) &&
	       !memcmp(a->block, b->block, sizeof(a->block)) &&
	       (!a->nattrs || !memcmp(attrs_of(a), attrs_of(b), a->nattrs * sizeof(CUlaunchAttribute)));
}

/* Copies the shape of `shape`, with the arguments and attributes given,
 * into `to`. */
static int keep(struct launch *to, const struct launch *shape, const uint8_t *args, const CUlaunchAttribute *attrs)
{
	uint32_t asize = shape->f->arg_size, size = shape->nattrs ?
		attrs_at(asize) + shape->nattrs * (uint32_t)sizeof(CUlaunchAttribute) : asize;

	if (to->cap < size) {
		uint8_t *b = realloc(to->args, size);

		if (!b)
			return -ENOMEM;
		to->args = b;
		to->cap = size;
	}
	to->f = shape->f;
	memcpy(to->grid, shape->grid, sizeof(to->grid));
	memcpy(to->block, shape->block, sizeof(to->block));
	to->smem = shape->smem;
	to->nattrs = shape->nattrs;
	if (asize)
		memcpy(to->args, args, asize);
	if (shape->nattrs)
		memcpy(to->args + attrs_at(asize), attrs, shape->nattrs * sizeof(*attrs));
	return 0;
}

/* Copies a kept launch into `to`. */
static int keep_launch(struct launch *to, const struct launch *from)
{
	return keep(to, from, from->args, attrs_of(from));
}

/* Launches l on stream s as the client asked it. */
static CUresult launch_one(const struct launch *l, CUstream s)
{
	return mps__launch(l->f, l->grid, l->block, l->smem, s, l->args, attrs_of(l), l->nattrs);
}

/* A node's parameters for an update: the attributes stay the graph's. */
static void node_params(const struct launch *l, struct mps_sstream *st, void **kp, CUDA_KERNEL_NODE_PARAMS *p)
{
	const struct mps_sfunc *f = l->f;

	memset(p, 0, sizeof(*p));
	for (uint32_t i = 0; i < f->nparams; i++)
		kp[i] = l->args + f->param[2 * i];
	if (f->is_kernel)
		p->kern = (CUkernel)f->f;
	else
		p->func = f->f;
	p->ctx = st->green && mps_sm_ctx(st->green) ? mps_sm_ctx(st->green) : mps_srv.dev[st->ctx->device].primary;
	p->gridDimX = l->grid[0];
	p->gridDimY = l->grid[1];
	p->gridDimZ = l->grid[2];
	p->blockDimX = l->block[0];
	p->blockDimY = l->block[1];
	p->blockDimZ = l->block[2];
	p->sharedMemBytes = l->smem;
	p->kernelParams = f->nparams ? kp : NULL;
}

/* Takes a build from the client's bucket (refilled by the time gone):
 * false if it is empty. A client whose runs keep changing would otherwise
 * build without end. */
static bool take_build(struct mps_replay *rp, uint64_t now)
{
	if (rp->builds < BUILDS_BURST) {
		uint64_t more = (now - rp->built_ns) / BUILD_EVERY_NS;

		rp->builds = more >= BUILDS_BURST - rp->builds ? BUILDS_BURST : rp->builds + (unsigned int)more;
		if (more)
			rp->built_ns = now;
	}
	if (!rp->builds)
		return false;
	rp->builds--;
	return true;
}

static void drop_graph(struct mps_replay *rp)
{
	for (unsigned int i = 0; rp->seg && i < rp->nseg; i++) {
		struct seg *g = &rp->seg[i];

		for (unsigned int k = 0; k < g->nalt; k++) {
			mps_drv.cuGraphExecDestroy(g->alt[k].exec);
			free(g->alt[k].args);
			free(g->alt[k].grid);
		}
		if (g->exec)
			mps_drv.cuGraphExecDestroy(g->exec);
		if (g->graph)
			mps_drv.cuGraphDestroy(g->graph);
	}
	free(rp->seg);
	rp->seg = NULL;
	rp->nseg = 0;
}

/* Segment g of the learned run as a graph: its launches captured on the
 * run's stream (so each attribute means in the graph what it meant on the
 * stream, as the driver's capture makes it), which must give a chain of
 * g->n kernel nodes in launch order; instantiated. */
static CUresult build_seg(struct mps_replay *rp, struct seg *g)
{
	CUstream s = rp->exp_st->s;
	CUgraphNode node;
	size_t n = 1;
	CUresult r = mps_drv.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);

	if (r != CUDA_SUCCESS)
		return r;
	for (unsigned int i = g->first; i < g->first + g->n && r == CUDA_SUCCESS; i++)
		r = launch_one(&rp->exp[i], s);
	if (mps_drv.cuStreamEndCapture(s, &g->graph) != CUDA_SUCCESS)
		g->graph = NULL;
	if (r != CUDA_SUCCESS)
		return r;
	if (!g->graph)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	/* The chain: one root, then each node's one dependent. */
	r = mps_drv.cuGraphGetRootNodes(g->graph, &node, &n);
	for (unsigned int i = 0; r == CUDA_SUCCESS && n == 1 && i < g->n; i++) {
		CUgraphEdgeData edge;   /* asked for: a programmatic edge would make the query lossy */
		CUgraphNodeType type;

		if (mps_drv.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL)
			break;
		rp->node[g->first + i] = node;
		n = 1;
		r = mps_drv.cuGraphNodeGetDependentNodes_v2(node, &node, &edge, &n);
		if (r == CUDA_SUCCESS && n == 0 && i + 1 == g->n) {
			r = mps_drv.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
			if (r != CUDA_SUCCESS)
				g->exec = NULL;
			return r;
		}
	}
	return r != CUDA_SUCCESS ? r : CUDA_ERROR_NOT_SUPPORTED;   /* not a chain of kernels */
}

/* The learned run as graphs of seg_len launches each (the last may have
 * fewer): while a request's later launches are still coming, the GPU
 * runs its earlier ones, so what is left when its result is asked for is
 * one segment's kernels, not the whole run's. */
static void build(struct mps_client *c, struct mps_replay *rp)
{
	unsigned int len = seg_len ? seg_len : rp->nexp, nseg = (rp->nexp + len - 1) / len;
	CUresult r;

	if (!take_build(rp, mps_now_ns()))
		return;
	rp->seg = calloc(nseg, sizeof(*rp->seg));
	if (!rp->seg)
		return;
	rp->nseg = nseg;
	r = mps__bind_device(c, rp->exp_st->ctx->device);
	for (unsigned int k = 0; k < nseg && r == CUDA_SUCCESS; k++) {
		struct seg *g = &rp->seg[k];

		g->first = k * len;
		g->n = rp->nexp - g->first < len ? rp->nexp - g->first : len;
		r = build_seg(rp, g);
	}
	if (r != CUDA_SUCCESS) {
		mps_log_debug("client %d: a run of %u launches did not make graphs (%d)", (int)c->pid, rp->nexp,
			      (int)r);
		drop_graph(rp);
		return;
	}
	rp->exp_green = rp->exp_st->green;
}

static void note_held(struct mps_client *c, uint64_t at)
{
	mps_store_relaxed(&c->replay_held_at, at);
}

/* Launches the held launches one by one, in order. */
static void release_held(struct mps_client *c, struct mps_replay *rp)
{
	CUresult r;

	if (!rp->held)
		return;
	r = mps__bind_device(c, rp->st->ctx->device);
	for (unsigned int i = rp->sent; i < rp->sent + rp->held; i++) {
		uint64_t t0 = mps_now_ns();

		if (r == CUDA_SUCCESS)
			r = launch_one(&rp->run[i], rp->st->s);
		mps_sched_note_launch(mps_now_ns() - t0);
		mps__defer_error(c, r, "cuLaunchKernel");
	}
	rp->held = 0;   /* and no more this run: sent + held == n no longer holds */
	note_held(c, 0);
}

/* Where segment g's executable graph v keeps node i's grid. */
static uint32_t *had_grid(struct mps_replay *rp, const struct seg *g, unsigned int v, unsigned int i)
{
	return v ? g->alt[v - 1].grid[i - g->first] : rp->exp[i].grid;
}

/* Whether launch l needs its node set in a graph holding args and grid. */
static bool node_differs(const struct launch *l, const uint8_t *args, const uint32_t *grid)
{
	uint32_t size = l->f->arg_size;

	return (size && memcmp(l->args, args, size) != 0) || memcmp(l->grid, grid, sizeof(l->grid)) != 0;
}

/* The nodes of segment g's executable graph v whose arguments or grid
 * differ from this run's. */
static unsigned int var_diff(struct mps_replay *rp, const struct seg *g, unsigned int v)
{
	unsigned int n = 0;
	uint32_t off = 0;

	for (unsigned int i = g->first; i < g->first + g->n; i++) {
		const uint8_t *had = v ? g->alt[v - 1].args + off : rp->exp[i].args;

		n += node_differs(&rp->run[i], had, had_grid(rp, g, v, i));
		off += rp->run[i].f->arg_size;
	}
	return n;
}

/* A new executable graph of segment g (a build from the bucket); its nodes
 * hold the capture's arguments and grids, which it records as unknown (a
 * byte of each argument flipped, grids of 0) so every node is set before
 * its first launch. Its number, or 0 if none could be made. */
static unsigned int var_new(struct mps_replay *rp, struct seg *g)
{
	uint32_t bytes = 0;
	uint8_t *args;
	uint32_t (*grid)[3];
	CUgraphExec exec;

	if (g->nalt == ALTS || !g->graph)
		return 0;
	for (unsigned int i = g->first; i < g->first + g->n; i++)
		bytes += rp->exp[i].f->arg_size;
	args = malloc(bytes ? bytes : 1);
	grid = calloc(g->n, sizeof(*grid));
	if (!args || !grid || !take_build(rp, mps_now_ns()) ||
	    mps_drv.cuGraphInstantiateWithFlags(&exec, g->graph, 0) != CUDA_SUCCESS) {
		free(args);
		free(grid);
		return 0;
	}
	g->alt[g->nalt].exec = exec;
	g->alt[g->nalt].args = args;
	g->alt[g->nalt].grid = grid;
	g->nalt++;
	for (unsigned int i = g->first, off = 0; i < g->first + g->n; off += rp->run[i].f->arg_size, i++)
		for (uint32_t b = 0; b < rp->run[i].f->arg_size; b++)
			args[off + b] = (uint8_t)~rp->run[i].args[b];
	return g->nalt;
}

/* Segment g of the learned run is held whole: its graph goes, with the
 * arguments of this run: the executable graph whose nodes need the fewest
 * new arguments (a new one, while few are kept, when every one needs
 * some). */
static void launch_graph(struct mps_client *c, struct mps_replay *rp, struct seg *g)
{
	void *kp[MPS_FUNC_PARAMS_MAX];
	CUDA_KERNEL_NODE_PARAMS p;
	uint64_t t0 = mps_now_ns(), t1;
	CUresult r = mps__bind_device(c, rp->st->ctx->device);
	unsigned int updates = 0, v = 0, best = var_diff(rp, g, 0);
	CUgraphExec exec;
	int timed;

	for (unsigned int k = 1; best && k <= g->nalt; k++) {
		unsigned int d = var_diff(rp, g, k);

		if (d < best) {
			best = d;
			v = k;
		}
	}
	if (best && r == CUDA_SUCCESS) {
		unsigned int k = var_new(rp, g);

		if (k) {
			v = k;
			best = g->n;
		}
	}
	exec = v ? g->alt[v - 1].exec : g->exec;
	for (unsigned int i = g->first, off = 0; best && i < g->first + g->n && r == CUDA_SUCCESS; i++) {
		struct launch *now = &rp->run[i];
		/* Where graph v keeps node i's arguments and grid (as var_diff reads them). */
		uint8_t *had = v ? g->alt[v - 1].args + off : rp->exp[i].args;
		uint32_t *grid = had_grid(rp, g, v, i);

		off += now->f->arg_size;
		if (!node_differs(now, had, grid))
			continue;
		node_params(now, rp->st, kp, &p);
		r = mps_drv.cuGraphExecKernelNodeSetParams_v2(exec, rp->node[i], &p);
		if (r == CUDA_SUCCESS) {
			memcpy(had, now->args, now->f->arg_size);
			memcpy(grid, now->grid, sizeof(now->grid));
		}
		updates++;
	}
	t1 = mps_now_ns();
	if (r != CUDA_SUCCESS) {
		/* Nothing of the segment launched yet: launch it the usual way,
		 * and let the graphs go (they may no longer match what the
		 * driver holds). */
		mps_log_debug("client %d: replay refused (%d): launched one by one", (int)c->pid, (int)r);
		release_held(c, rp);
		drop_graph(rp);
		return;
	}
	/* GPU time (gputime.h): the segment counts as one launch, the graph's
	 * time as its time. */
	timed = mps_gputime_begin(c, rp->st);
	r = mps_drv.cuGraphLaunch(exec, rp->st->s);
	if (timed >= 0)
		mps_gputime_end(c, rp->st, timed, r == CUDA_SUCCESS);
	mps_sched_note_replay(g->n, mps_now_ns() - t0, updates, t1 - t0);
	mps__defer_error(c, r, "cuLaunchKernel");
	rp->sent += g->n;
	rp->held = 0;
	note_held(c, 0);
}

static struct mps_replay *get(struct mps_client *c)
{
	if (!c->replay) {
		c->replay = calloc(1, sizeof(*c->replay));
		if (c->replay) {
			c->replay->builds = BUILDS_BURST;
			c->replay->built_ns = mps_now_ns();
		}
	}
	return c->replay;
}

void mps_replay_before(struct mps_client *c, const struct mps_msg *m, uint32_t stream)
{
	struct mps_replay *rp = c->replay;

	if (rp && rp->st && (rp->key_stream != stream || (!stream && rp->key_ctx != m->ctx)))
		mps_replay_boundary(c, false);
}

bool mps_replay_launch(struct mps_client *c, const struct mps_msg *m, struct mps_sstream *st, struct mps_sfunc *f,
		       const struct mps_msg_launch *q, const uint8_t *args, const CUlaunchAttribute *attrs,
		       unsigned int nattrs)
{
	struct mps_replay *rp;
	struct launch l = { 0 };
	struct seg *g;
	bool hold;

	if (mode == OFF || c->captures || !(rp = get(c)))
		return false;
	if (rp->st && rp->st != st)
		mps_replay_boundary(c, false);
	if (!rp->st) {
		rp->st = st;
		rp->key_stream = q->stream;
		rp->key_ctx = m->ctx;
	}
	if (rp->n == RUN_MAX || f->arg_size > LAUNCH_ARGS || rp->bytes + f->arg_size > RUN_BYTES) {
		release_held(c, rp);
		rp->broken = true;
		return false;
	}
	rp->bytes += f->arg_size;
	l.f = f;
	memcpy(l.grid, q->grid, sizeof(l.grid));
	memcpy(l.block, q->block, sizeof(l.block));
	l.smem = q->shared_mem;
	l.nattrs = nattrs;
	if (keep(&rp->run[rp->n], &l, args, attrs) < 0) {
		release_held(c, rp);
		rp->broken = true;
		return false;
	}
	hold = rp->nseg && !rp->broken && rp->sent + rp->held == rp->n && st == rp->exp_st &&
	       st->green == rp->exp_green && rp->n < rp->nexp && same_shape(&rp->run[rp->n], &rp->exp[rp->n]) &&
	       (mode == ALWAYS || mps_sched_busy() || mps_sched_launch_bound());
	rp->n++;
	if (!hold) {
		if (rp->held)
			mps_fetch_add(&let_go, 1);
		release_held(c, rp);
		return false;
	}
	rp->held++;
	/* The segment being held starts where those sent end; every segment
	 * but the last is as long as the first. */
	g = &rp->seg[rp->sent / rp->seg[0].n];
	if (rp->held == g->n)
		launch_graph(c, rp, g);
	else
		note_held(c, mps_now_ns());
	return true;
}

/* Whether the run under way has the shape of the n launches of `l` on st. */
static bool run_is(const struct mps_replay *rp, const struct launch *l, unsigned int n, const struct mps_sstream *st)
{
	if (rp->n != n || rp->st != st)
		return false;
	for (unsigned int i = 0; i < n; i++)
		if (!same_shape(&rp->run[i], &l[i]))
			return false;
	return true;
}

/* Copies the run under way into `to`; the count copied. */
static unsigned int keep_run(struct launch *to, const struct mps_replay *rp)
{
	unsigned int n = 0;

	while (n < rp->n && keep_launch(&to[n], &rp->run[n]) == 0)
		n++;
	return n;
}

/* The run under way has ended: learn from it. The learned run becomes a
 * graph when seen a second time; another run takes its place once seen
 * twice in a row, so a run seen once among learned ones costs nothing. */
static void learn(struct mps_client *c, struct mps_replay *rp)
{
	if (rp->nexp && run_is(rp, rp->exp, rp->nexp, rp->exp_st)) {
		rp->cand_seen = 0;
		if (rp->nseg && rp->exp_green != rp->st->green)
			drop_graph(rp);   /* its nodes run in the SM share the stream left */
		if (!rp->nseg && keep_run(rp->exp, rp) == rp->n)
			build(c, rp);   /* the nodes get this run's arguments */
		return;
	}
	if (rp->cand_seen && run_is(rp, rp->cand, rp->ncand, rp->cand_st)) {
		rp->cand_seen++;
	} else {
		rp->ncand = keep_run(rp->cand, rp);
		rp->cand_st = rp->st;
		rp->cand_seen = rp->ncand == rp->n ? 1 : 0;
	}
	if (rp->nexp && rp->cand_seen < 2)
		return;
	drop_graph(rp);
	rp->nexp = keep_run(rp->exp, rp);
	rp->exp_st = rp->st;
	if (rp->nexp != rp->n) {
		rp->nexp = 0;
		rp->exp_st = NULL;
	} else if (rp->cand_seen >= 2) {
		build(c, rp);
	}
	rp->cand_seen = 0;
}

void mps_replay_forget(struct mps_client *c)
{
	mps_replay_boundary(c, true);
}

void mps_replay_boundary(struct mps_client *c, bool forget)
{
	struct mps_replay *rp = c->replay;

	if (!rp)
		return;
	if (rp->held)
		mps_fetch_add(&let_go, 1);
	release_held(c, rp);
	if (rp->st && !rp->broken && rp->n >= RUN_MIN && !forget && mode != OFF)
		learn(c, rp);
	if (forget) {
		drop_graph(rp);
		rp->nexp = rp->cand_seen = 0;
		rp->exp_st = rp->cand_st = NULL;
	}
	rp->st = NULL;
	rp->n = rp->sent = 0;
	rp->bytes = 0;
	rp->broken = false;
}

void mps_replay_expire(struct mps_client *c, uint64_t now, bool all)
{
	struct mps_replay *rp = c->replay;

	if (rp && rp->held && (all || mps_replay_due(c, now))) {
		mps_fetch_add(&expired, 1);
		release_held(c, rp);
	}
}

void mps_replay_stats(uint64_t *n_expired, uint64_t *n_let_go)
{
	*n_expired = mps_load_relaxed(&expired);
	*n_let_go = mps_load_relaxed(&let_go);
}

bool mps_replay_holds(const struct mps_client *c)
{
	return mps_load_relaxed(&c->replay_held_at) != 0;
}

bool mps_replay_due(const struct mps_client *c, uint64_t now)
{
	uint64_t at = mps_load_relaxed(&c->replay_held_at);

	return at && now - at >= hold_ns;
}

void mps_replay_free(struct mps_client *c)
{
	struct mps_replay *rp = c->replay;

	if (!rp)
		return;
	drop_graph(rp);
	for (unsigned int i = 0; i < RUN_MAX; i++) {
		free(rp->run[i].args);
		free(rp->cand[i].args);
		free(rp->exp[i].args);
	}
	free(rp);
	c->replay = NULL;
}
