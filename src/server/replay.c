// SPDX-License-Identifier: MIT
/*
 * See replay.h. State per client (struct mps_replay, made at its first
 * plain launch): the chunk under way (launches recorded with their
 * argument bytes, some of them held), and the chunks kept, each with its
 * graph once seen twice and the arguments each node was last given.
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

#define CHUNK_MIN    8    /* launches a chunk has before it may end (content-defined chunks) ... */
#define CHUNK_DIV    4    /* ... then it ends after a launch whose shape hashes to 0 modulo this ... */
#define CHUNK_MAX    32   /* ... or at this many */
#define LEARN_MIN    2    /* a chunk of one saves nothing (a graph launch costs what a launch does) */
#define RUN_MAX      1024 /* launches a chunk may have when a whole run is one (OPENMPS_REPLAY_SEGMENT=0) */
#define SEGS         128  /* chunks a client's server keeps */
#define BUILDS_BURST 32   /* graphs a client may build at once ... */
#define BUILD_EVERY_NS (20ull * 1000 * 1000)    /* ... and one more each this long */
#define LAUNCH_ARGS  4096         /* a launch with more argument bytes ends its chunk's replay */
#define RUN_BYTES    (256u << 10) /* nor may a chunk's arguments pass this ... */
#define KEEP_BYTES   (2u << 20)   /* ... nor the kept chunks' (their graphs' copies too): what a client can make us keep */
#define EXECS        256          /* executable graphs of a client's kept chunks (OPENMPS_REPLAY_EXECS) */
#define ALTS         3            /* executable graphs kept besides the first, for other arguments ... */
#define ALTS_MAX     15           /* ... (OPENMPS_REPLAY_ALTS) at most */
#define SEG_MAX      256          /* OPENMPS_REPLAY_SEGMENT's most */

enum { OFF, BUSY_ONLY, ALWAYS };

static int mode = BUSY_ONLY;
static uint64_t hold_ns = 4000ull * 1000;
static unsigned int seg_len;             /* OPENMPS_REPLAY_SEGMENT: chunks of this many; 0: a run; unset: by content */
static bool by_content = true;
static bool grids_vary = true;           /* OPENMPS_REPLAY_GRIDS: a node's grid may change */
static unsigned int alts = ALTS;
static unsigned int execs_max = EXECS;
static struct mps_replay_counts counts;  /* atomic each */

struct launch {                 /* one launch of a chunk */
	struct mps_sfunc *f;
	uint32_t grid[3], block[3], smem;
	uint32_t nattrs;
	uint8_t *args;              /* f->arg_size bytes, then (8-aligned) nattrs CUlaunchAttribute */
	uint32_t cap;               /* 0: args lie in a kept chunk's blob */
};

/* Where the attributes start after arg_size argument bytes: aligned for them. */
static uint32_t attrs_at(uint32_t arg_size)
{
	return (arg_size + 7u) & ~7u;
}

/* The bytes a launch of `l`'s shape keeps: arguments, then attributes;
 * rounded up so that a kept chunk's launches, one after another in its
 * blob, each start aligned for attributes. */
static uint32_t launch_size(const struct launch *l)
{
	uint32_t asize = l->f->arg_size;

	return attrs_at(l->nattrs ? attrs_at(asize) + l->nattrs * (uint32_t)sizeof(CUlaunchAttribute) : asize);
}

static const CUlaunchAttribute *attrs_of(const struct launch *l)
{
	return l->nattrs ? (const CUlaunchAttribute *)(l->args + attrs_at(l->f->arg_size)) : NULL;
}

/* A kept chunk: its launches' shapes (and the arguments its first
 * executable graph's nodes were last given), the hash of each prefix of
 * them, and, once it was seen a second time, its graph: a chain of kernel
 * nodes captured from its launches on its stream, instantiated, and more
 * executable graphs of it, each with the arguments its nodes were last
 * given (every node's, one after another): the same chunk comes with a
 * few sets of arguments (a model's layers, a caching allocator's blocks),
 * and a graph whose nodes already hold the set needs no node set at all
 * (each costs 1-1.5 µs). */
struct seg {
	uint64_t *prefix;           /* prefix[i]: the hash of launches 0..i */
	struct launch *exp;         /* n launches; args and grids: the first executable graph's */
	uint8_t *blob;
	unsigned int n;
	uint32_t bytes;             /* the blob's, and its graphs' argument copies */
	struct mps_sstream *st;
	struct mps_green *green;    /* the SM share its nodes run in */
	unsigned int seen;          /* 1, then 2 */
	uint64_t used;              /* the client's chunk count when last seen */
	bool failed;                /* its graph could not be made: not tried again */
	CUgraph graph;
	CUgraphExec exec;
	CUgraphNode *node;          /* launch i's node */
	struct {
		CUgraphExec exec;
		uint8_t *args;
		uint32_t (*grid)[3];   /* each node's grid, as args */
		uint32_t bytes;
	} alt[ALTS_MAX];
	unsigned int nalt;
	uint64_t charged;           /* device memory its executable graphs are charged (charge_exec) */
	int charged_dev;
};

struct mps_replay {
	/* The chunk under way. */
	struct mps_sstream *st;     /* its run's stream; NULL before the run's first launch */
	uint32_t key_stream, key_ctx;   /* the stream as messages name it */
	unsigned int n;             /* launches in the chunk so far */
	uint32_t bytes;             /* their argument bytes */
	unsigned int held;          /* the first `held` are held; while held == n the chunk may be */
	bool broken;                /* too long to keep */
	uint64_t hash;              /* of its shapes so far */
	struct launch *run;         /* cap launches */
	unsigned int cap;
	struct seg *like;           /* the kept chunk with graph it last matched a prefix of */

	/* The chunks kept. */
	struct seg seg[SEGS];
	unsigned int nseg;
	uint64_t chunks;            /* chunks ended: the clock of `used` */
	uint32_t kept;              /* bytes over seg */
	unsigned int execs;         /* executable graphs over seg */
	unsigned int builds;        /* graphs it may build now (a token bucket) */
	uint64_t built_ns;          /* when the bucket was last filled */
	struct mps_memacct *mem;    /* the client's memory account */
	unsigned int told;          /* node updates described in the log (tell_update) */
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
	v = getenv("OPENMPS_REPLAY_SEGMENT");
	if (v && *v) {
		long n = mps_env_long("OPENMPS_REPLAY_SEGMENT", -1, 0, SEG_MAX);

		if (n >= 0) {
			seg_len = (unsigned int)n;
			by_content = false;
		}
	}
	grids_vary = mps_env_long("OPENMPS_REPLAY_GRIDS", 1, 0, 1) != 0;
	alts = (unsigned int)mps_env_long("OPENMPS_REPLAY_ALTS", ALTS, 0, ALTS_MAX);
	execs_max = (unsigned int)mps_env_long("OPENMPS_REPLAY_EXECS", EXECS, 1, 65536);
}

bool mps_replay_enabled(void)
{
	return mode != OFF;
}

static void count(uint64_t *what)
{
	mps_fetch_add(what, 1);
}

/* Whether a and b can be one node of a kept chunk: the same function,
 * block, shared memory and attributes, and the same grid only with
 * OPENMPS_REPLAY_GRIDS=0; by default the grid is a node's parameter like
 * its arguments (set at launch when it differs): a decoder's kernels that
 * walk its growing cache (a concatenation, an attention over every past
 * token) may change their grid with every token. */
static bool same_shape(const struct launch *a, const struct launch *b)
{
	return a->f == b->f && a->smem == b->smem && a->nattrs == b->nattrs &&
	       (grids_vary || !memcmp(a->grid, b->grid, sizeof(a->grid))) &&
	       !memcmp(a->block, b->block, sizeof(a->block)) &&
	       (!a->nattrs || !memcmp(attrs_of(a), attrs_of(b), a->nattrs * sizeof(CUlaunchAttribute)));
}

/* h with launch l's shape mixed in (what same_shape compares, less the
 * attributes' values): kept chunks are looked up by it, then compared. */
static uint64_t shape_hash(uint64_t h, const struct launch *l)
{
	uint64_t v[5] = { (uint64_t)(uintptr_t)l->f, l->block[0] | (uint64_t)l->block[1] << 32,
			  l->block[2] | (uint64_t)l->smem << 32, l->nattrs, 0 };

	if (!grids_vary)
		v[4] = l->grid[0] ^ (uint64_t)l->grid[1] << 21 ^ (uint64_t)l->grid[2] << 42;
	for (unsigned int i = 0; i < 5; i++) {
		h ^= v[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* Copies the shape of `shape`, with the arguments and attributes given,
 * into `to` (its own buffer, grown as needed; a blob's slot is already the
 * size of every launch of its shape). */
static int keep(struct launch *to, const struct launch *shape, const uint8_t *args, const CUlaunchAttribute *attrs)
{
	uint32_t asize = shape->f->arg_size, size = launch_size(shape);

	if (to->cap < size && (to->cap || !to->args)) {
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
 * false if it is empty. A client whose chunks keep changing would
 * otherwise build without end. */
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

/* What an executable graph holds of the device's memory, charged to its
 * client (whose limit counts what the server holds on its behalf): per
 * kernel node, as bench/execcost measured it (an 8-kernel chain holds 132
 * KiB on an H200). */
#define EXEC_NODE_BYTES (16u << 10)

/* Charges one more executable graph of g; false (counted) past the
 * client's limit, and no graph is made. */
static bool charge_exec(struct mps_replay *rp, struct seg *g)
{
	uint64_t b = (uint64_t)g->n * EXEC_NODE_BYTES;
	int d = g->st->ctx->device;

	if (g->charged && g->charged_dev != d)
		return false;   /* its graphs stay on one device */
	if (mps_memacct_charge(rp->mem, d, b) < 0) {
		count(&counts.over_limit);
		return false;
	}
	g->charged += b;
	g->charged_dev = d;
	return true;
}

static void uncharge_exec(struct mps_replay *rp, struct seg *g, uint64_t b)
{
	mps_memacct_uncharge(rp->mem, g->charged_dev, b);
	g->charged -= b;
}

static void drop_graph(struct mps_replay *rp, struct seg *g)
{
	for (unsigned int k = 0; k < g->nalt; k++) {
		mps_drv.cuGraphExecDestroy(g->alt[k].exec);
		free(g->alt[k].args);
		free(g->alt[k].grid);
		rp->kept -= g->alt[k].bytes;
		g->bytes -= g->alt[k].bytes;
		rp->execs--;
	}
	g->nalt = 0;
	if (g->exec) {
		mps_drv.cuGraphExecDestroy(g->exec);
		rp->execs--;
	}
	if (g->charged)
		uncharge_exec(rp, g, g->charged);
	if (g->graph)
		mps_drv.cuGraphDestroy(g->graph);
	g->exec = NULL;
	g->graph = NULL;
	if (rp->like == g)
		rp->like = NULL;
}

/* Kept chunk g's graph: its launches captured on its stream (so each
 * attribute means in the graph what it meant on the stream, as the
 * driver's capture makes it), which must give a chain of g->n kernel
 * nodes in launch order; instantiated. */
static CUresult build_graph(struct seg *g)
{
	CUstream s = g->st->s;
	CUgraphNode node;
	size_t n = 1;
	CUresult r = mps_drv.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);

	if (r != CUDA_SUCCESS)
		return r;
	for (unsigned int i = 0; i < g->n && r == CUDA_SUCCESS; i++)
		r = launch_one(&g->exp[i], s);
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
		g->node[i] = node;
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

/* Makes room for one more executable graph: the graphs of the chunk seen
 * longest ago go (not `keep`'s). False if there is no room. */
static bool room_for_exec(struct mps_replay *rp, const struct seg *keep)
{
	while (rp->execs >= execs_max) {
		struct seg *old = NULL;

		for (unsigned int i = 0; i < rp->nseg; i++)
			if (&rp->seg[i] != keep && rp->seg[i].exec && (!old || rp->seg[i].used < old->used))
				old = &rp->seg[i];
		if (!old)
			return false;
		drop_graph(rp, old);
	}
	return true;
}

/* Kept chunk g, seen again, becomes a graph. */
static void build(struct mps_client *c, struct mps_replay *rp, struct seg *g)
{
	CUresult r;

	if (!room_for_exec(rp, g) || !charge_exec(rp, g))
		return;
	if (!take_build(rp, mps_now_ns())) {
		uncharge_exec(rp, g, g->charged);
		return;
	}
	r = mps__bind_device(c, g->st->ctx->device);
	if (r == CUDA_SUCCESS)
		r = build_graph(g);
	if (r != CUDA_SUCCESS) {
		uncharge_exec(rp, g, g->charged);
		mps_log_debug("client %d: a chunk of %u launches did not make a graph (%d)", (int)c->pid, g->n, (int)r);
		count(&counts.unbuilt);
		if (g->graph)   /* no executable graph: build_graph made none */
			mps_drv.cuGraphDestroy(g->graph);
		g->graph = NULL;
		g->failed = true;
		return;
	}
	rp->execs++;
	count(&counts.built);
	g->green = g->st->green;
}

static void note_held(struct mps_client *c, uint64_t at)
{
	mps_store_relaxed(&c->replay_held_at, at);
}

/* Launches the held launches one by one, in order; no more of the chunk
 * is held. */
static void release_held(struct mps_client *c, struct mps_replay *rp)
{
	CUresult r;

	if (!rp->held)
		return;
	r = mps__bind_device(c, rp->st->ctx->device);
	for (unsigned int i = 0; i < rp->held; i++) {
		uint64_t t0 = mps_now_ns();

		if (r == CUDA_SUCCESS)
			r = launch_one(&rp->run[i], rp->st->s);
		mps_sched_note_launch(mps_now_ns() - t0);
		mps__defer_error(c, r, "cuLaunchKernel");
	}
	rp->held = 0;   /* and no more this chunk: held == n no longer holds */
	note_held(c, 0);
}

/* Where g's executable graph v keeps node i's grid. */
static uint32_t *had_grid(struct seg *g, unsigned int v, unsigned int i)
{
	return v ? g->alt[v - 1].grid[i] : g->exp[i].grid;
}

/* Whether launch l needs its node set in a graph holding args and grid. */
static bool node_differs(const struct launch *l, const uint8_t *args, const uint32_t *grid)
{
	uint32_t size = l->f->arg_size;

	return (size && memcmp(l->args, args, size) != 0) || memcmp(l->grid, grid, sizeof(l->grid)) != 0;
}

/* At debug level, the first UPDATES_TOLD node updates of a client, with
 * what changed: which kernels' arguments differ from one run of a chunk to
 * the next, so that replay must set nodes at every launch. */
#define UPDATES_TOLD 64

static void tell_update(const struct mps_client *c, struct mps_replay *rp, unsigned int i, const struct launch *now,
			const uint8_t *had, const uint32_t *grid)
{
	const struct mps_sfunc *f = now->f;
	uint32_t first = UINT32_MAX, n = 0, param = 0;

	if (rp->told >= UPDATES_TOLD || !mps_log_enabled(MPS_LOG_DEBUG))
		return;
	rp->told++;
	for (uint32_t b = 0; b < f->arg_size; b++)
		if (now->args[b] != had[b]) {
			if (first == UINT32_MAX)
				first = b;
			n++;
		}
	for (uint32_t k = 0; first != UINT32_MAX && f->param && k < f->nparams; k++)
		if (f->param[2 * k] <= first && first < (uint32_t)f->param[2 * k] + f->param[2 * k + 1])
			param = k;
	if (n)
		mps_log_debug("client %d: replay sets node %u (%s): %u of %u argument bytes differ, the first at %u "
			      "(parameter %u, from 0)%s", (int)c->pid, i, f->name ? f->name : "?", n, f->arg_size, first, param,
			      memcmp(now->grid, grid, sizeof(now->grid)) ? "; its grid too" : "");
	else
		mps_log_debug("client %d: replay sets node %u (%s): its grid differs", (int)c->pid, i,
			      f->name ? f->name : "?");
}

/* The nodes of g's executable graph v whose arguments or grid differ from
 * the chunk's. */
static unsigned int var_diff(struct mps_replay *rp, struct seg *g, unsigned int v)
{
	unsigned int n = 0;
	uint32_t off = 0;

	for (unsigned int i = 0; i < g->n; i++) {
		const uint8_t *had = v ? g->alt[v - 1].args + off : g->exp[i].args;

		n += node_differs(&rp->run[i], had, had_grid(g, v, i));
		off += rp->run[i].f->arg_size;
	}
	return n;
}

/* A new executable graph of g (a build from the bucket, within the
 * client's graphs and bytes); its nodes hold the capture's arguments and
 * grids, which it records as unknown (a byte of each argument flipped,
 * grids of 0) so every node is set before its first launch. Its number,
 * or 0 if none could be made. */
static unsigned int var_new(struct mps_replay *rp, struct seg *g)
{
	uint32_t bytes = 0;
	uint8_t *args;
	uint32_t (*grid)[3];
	CUgraphExec exec;

	if (g->nalt >= alts || !g->graph || rp->execs >= execs_max)
		return 0;
	for (unsigned int i = 0; i < g->n; i++)
		bytes += g->exp[i].f->arg_size;
	if (rp->kept + bytes + g->n * sizeof(*grid) > KEEP_BYTES)
		return 0;
	args = malloc(bytes ? bytes : 1);
	grid = calloc(g->n, sizeof(*grid));
	if (!args || !grid || !charge_exec(rp, g)) {
		free(args);
		free(grid);
		return 0;
	}
	if (!take_build(rp, mps_now_ns()) || mps_drv.cuGraphInstantiateWithFlags(&exec, g->graph, 0) != CUDA_SUCCESS) {
		uncharge_exec(rp, g, (uint64_t)g->n * EXEC_NODE_BYTES);
		free(args);
		free(grid);
		return 0;
	}
	g->alt[g->nalt].exec = exec;
	g->alt[g->nalt].args = args;
	g->alt[g->nalt].grid = grid;
	g->alt[g->nalt].bytes = bytes + g->n * (uint32_t)sizeof(*grid);
	rp->kept += g->alt[g->nalt].bytes;
	g->bytes += g->alt[g->nalt].bytes;
	rp->execs++;
	g->nalt++;
	for (unsigned int i = 0, off = 0; i < g->n; off += rp->run[i].f->arg_size, i++)
		for (uint32_t b = 0; b < rp->run[i].f->arg_size; b++)
			args[off + b] = (uint8_t)~rp->run[i].args[b];
	return g->nalt;
}

/* The chunk, held whole, is kept chunk g: g's graph goes, with the chunk's
 * arguments: the executable graph whose nodes need the fewest new
 * arguments (a new one, while few are kept, when every one needs some). */
static void launch_graph(struct mps_client *c, struct mps_replay *rp, struct seg *g)
{
	void *kp[MPS_FUNC_PARAMS_MAX];
	CUDA_KERNEL_NODE_PARAMS p;
	uint64_t t0 = mps_now_ns(), t1;
	CUresult r = mps__bind_device(c, rp->st->ctx->device);
	unsigned int updates = 0, v = 0, best = var_diff(rp, g, 0);
	bool fresh = false;   /* a new executable graph: every node is set */
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
			fresh = true;
		}
	}
	exec = v ? g->alt[v - 1].exec : g->exec;
	for (unsigned int i = 0, off = 0; best && i < g->n && r == CUDA_SUCCESS; i++) {
		struct launch *now = &rp->run[i];
		/* Where graph v keeps node i's arguments and grid (as var_diff reads them). */
		uint8_t *had = v ? g->alt[v - 1].args + off : g->exp[i].args;
		uint32_t *grid = had_grid(g, v, i);

		off += now->f->arg_size;
		if (!node_differs(now, had, grid))
			continue;
		if (!fresh)
			tell_update(c, rp, i, now, had, grid);
		node_params(now, rp->st, kp, &p);
		r = mps_drv.cuGraphExecKernelNodeSetParams_v2(exec, g->node[i], &p);
		if (r == CUDA_SUCCESS) {
			memcpy(had, now->args, now->f->arg_size);
			memcpy(grid, now->grid, sizeof(now->grid));
		}
		updates++;
	}
	t1 = mps_now_ns();
	if (r != CUDA_SUCCESS) {
		/* Nothing of the chunk launched yet: launch it the usual way,
		 * and let the graph go (it may no longer match what the
		 * driver holds). */
		mps_log_debug("client %d: replay refused (%d): launched one by one", (int)c->pid, (int)r);
		release_held(c, rp);
		drop_graph(rp, g);
		g->failed = true;
		return;
	}
	/* GPU time (gputime.h): the chunk counts as one launch, the graph's
	 * time as its time. */
	timed = mps_gputime_begin(c, rp->st);
	r = mps_drv.cuGraphLaunch(exec, rp->st->s);
	if (timed >= 0)
		mps_gputime_end(c, rp->st, timed, r == CUDA_SUCCESS);
	mps_sched_note_replay(g->n, mps_now_ns() - t0, updates, t1 - t0);
	mps__defer_error(c, r, "cuLaunchKernel");
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
			c->replay->mem = &c->mem;
		}
	}
	return c->replay;
}

/* The most launches a chunk may have. */
static unsigned int chunk_max(void)
{
	return by_content ? CHUNK_MAX : seg_len ? seg_len : RUN_MAX;
}

/* A slot for the chunk's next launch (the array grows as needed). */
static struct launch *next_slot(struct mps_replay *rp)
{
	if (rp->n == rp->cap) {
		unsigned int cap = rp->cap ? rp->cap * 2 : 16;
		struct launch *run;

		if (cap > RUN_MAX)
			cap = RUN_MAX;
		if (cap <= rp->cap || !(run = realloc(rp->run, cap * sizeof(*run))))
			return NULL;
		memset(run + rp->cap, 0, (cap - rp->cap) * sizeof(*run));
		rp->run = run;
		rp->cap = cap;
	}
	return &rp->run[rp->n];
}

/* The hash of a chunk of no launches on stream st: chunks of different
 * streams differ from their first launch on. */
static uint64_t chunk_seed(const struct mps_sstream *st)
{
	return (uint64_t)(uintptr_t)st;
}

/* The chunk under way is over: the next launch starts another. */
static void new_chunk(struct mps_replay *rp)
{
	rp->n = 0;
	rp->bytes = 0;
	rp->held = 0;
	rp->broken = false;
	rp->hash = chunk_seed(rp->st);
}

/* Whether the chunk's launches have g's shapes. */
static bool chunk_is(const struct mps_replay *rp, const struct seg *g)
{
	if (g->st != rp->st || g->n != rp->n || g->prefix[g->n - 1] != rp->hash)
		return false;
	for (unsigned int i = 0; i < g->n; i++)
		if (!same_shape(&rp->run[i], &g->exp[i]))
			return false;
	return true;
}

/* The kept chunk with a graph, on the chunk's stream, whose first n
 * launches hash as the chunk's do: the one it matched last if it still
 * does, else any (one comparison a launch while a chunk goes as one did
 * before). NULL if none. */
static struct seg *graph_like(struct mps_replay *rp)
{
	unsigned int i = rp->n - 1;
	struct seg *g = rp->like;

	if (g && g->exec && g->n > i && g->prefix[i] == rp->hash && g->st == rp->st)
		return g;
	for (unsigned int k = 0; k < rp->nseg; k++) {
		g = &rp->seg[k];
		if (g->exec && g->n > i && g->prefix[i] == rp->hash && g->st == rp->st)
			return rp->like = g;
	}
	return NULL;
}

/* The kept chunk the ended chunk is, if any. */
static struct seg *find(struct mps_replay *rp)
{
	if (rp->like && chunk_is(rp, rp->like))
		return rp->like;
	for (unsigned int k = 0; k < rp->nseg; k++)
		if (chunk_is(rp, &rp->seg[k]))
			return &rp->seg[k];
	return NULL;
}

/* Kept chunk k goes. */
static void forget_one(struct mps_replay *rp, unsigned int k)
{
	struct seg *g = &rp->seg[k];

	drop_graph(rp, g);
	rp->kept -= g->bytes;
	free(g->exp);
	free(g->blob);
	free(g->node);
	free(g->prefix);
	if (rp->like == &rp->seg[rp->nseg - 1])
		rp->like = g;   /* it moves into k's place */
	else if (rp->like == g)
		rp->like = NULL;
	rp->seg[k] = rp->seg[--rp->nseg];
	memset(&rp->seg[rp->nseg], 0, sizeof(rp->seg[rp->nseg]));
}

/* The kept chunk that goes for a new one: while chunks seen once hold half
 * the slots, the one of them seen longest ago (chunks that never come back
 * do not push out those that do); else the one seen longest ago. */
static unsigned int victim(const struct mps_replay *rp)
{
	unsigned int once = 0, v = 0, v1 = SEGS;

	for (unsigned int k = 0; k < rp->nseg; k++) {
		if (rp->seg[k].seen < 2) {
			once++;
			if (v1 == SEGS || rp->seg[k].used < rp->seg[v1].used)
				v1 = k;
		}
		if (rp->seg[k].used < rp->seg[v].used)
			v = k;
	}
	return once >= SEGS / 2 ? v1 : v;
}

/* The ended chunk, seen for the first time, is kept. */
static void learn_new(struct mps_replay *rp)
{
	struct seg *g;
	uint32_t bytes = 0;
	uint64_t h = chunk_seed(rp->st);

	for (unsigned int i = 0; i < rp->n; i++)
		bytes += launch_size(&rp->run[i]);
	if (bytes > KEEP_BYTES / 4)
		return;
	while (rp->nseg && (rp->nseg == SEGS || rp->kept + bytes > KEEP_BYTES)) {
		forget_one(rp, victim(rp));
		count(&counts.dropped);
	}
	g = &rp->seg[rp->nseg];
	memset(g, 0, sizeof(*g));
	g->exp = calloc(rp->n, sizeof(*g->exp));
	g->node = calloc(rp->n, sizeof(*g->node));
	g->prefix = calloc(rp->n, sizeof(*g->prefix));
	g->blob = malloc(bytes ? bytes : 1);
	if (!g->exp || !g->node || !g->prefix || !g->blob) {
		free(g->exp);
		free(g->node);
		free(g->prefix);
		free(g->blob);
		memset(g, 0, sizeof(*g));
		return;
	}
	for (unsigned int i = 0, off = 0; i < rp->n; off += launch_size(&rp->run[i]), i++) {
		g->exp[i].args = g->blob + off;   /* cap 0: the slot is the launch's size */
		keep_launch(&g->exp[i], &rp->run[i]);
		h = shape_hash(h, &rp->run[i]);
		g->prefix[i] = h;
	}
	g->n = rp->n;
	g->bytes = bytes;
	g->st = rp->st;
	g->seen = 1;
	g->used = rp->chunks;
	rp->kept += bytes;
	rp->nseg++;
	count(&counts.learned);
}

/* The chunk under way ends (its last launch came, or its run ended):
 * launched as its kept graph if it is held whole and has one, else what
 * is held goes one by one; then it is learned from: a chunk seen a second
 * time becomes a graph, its nodes given that chunk's arguments. */
static void end_chunk(struct mps_client *c, struct mps_replay *rp)
{
	struct seg *g;

	if (!rp->n)
		return;
	g = rp->broken ? NULL : find(rp);
	if (g && rp->held == rp->n && g->exec && rp->st->green == g->green)
		launch_graph(c, rp, g);
	else if (rp->held)
		count(&counts.let_go);
	release_held(c, rp);
	if (rp->broken) {
		/* nothing to learn */
	} else if (rp->n >= (!by_content && seg_len && seg_len < LEARN_MIN ? seg_len : LEARN_MIN)) {
		rp->chunks++;
		if (!g) {
			learn_new(rp);
		} else {
			count(&counts.seen);
			g->used = rp->chunks;
			if (g->seen < 2)
				g->seen++;
			if (g->exec && g->green != rp->st->green)
				drop_graph(rp, g);   /* its nodes run in the SM share the stream left */
			if (!g->exec && !g->failed) {
				for (unsigned int i = 0; i < rp->n; i++)
					keep_launch(&g->exp[i], &rp->run[i]);   /* the same shapes: the same sizes */
				build(c, rp, g);
			}
		}
	}
	new_chunk(rp);
}

/* A function's key for chunking: its name's hash and parameters, the same
 * in every process and every run (its address is not). */
static uint32_t func_key(struct mps_sfunc *f)
{
	uint32_t h = mps_load_relaxed(&f->replay_key);

	if (!h) {   /* the same value whoever computes it first */
		h = 2166136261u ^ f->arg_size ^ f->nparams << 16;
		for (const char *s = f->name; s && *s; s++)
			h = (h ^ (uint8_t)*s) * 16777619u;
		h |= 1;
		mps_store_relaxed(&f->replay_key, h);
	}
	return h;
}

/* Whether the chunk ends with its launch l, its n-th. By content (the
 * default), after a launch of certain kernels once it has CHUNK_MIN: the
 * same sequence of kernels is cut the same way wherever it starts (each of
 * a model's layers, every token of a decoder, whatever came before), so
 * its chunks are found again though runs differ. */
static bool chunk_ends(struct mps_sfunc *f, const struct launch *l, unsigned int n)
{
	uint32_t h;

	if (!by_content)
		return n == chunk_max();
	if (n >= CHUNK_MAX)
		return true;
	if (n < CHUNK_MIN)
		return false;
	h = func_key(f) ^ l->block[0] * 0x9e3779b1u ^ l->smem;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return h % CHUNK_DIV == 0;
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
	struct launch l = { 0 }, *slot;
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
		rp->hash = chunk_seed(st);
	}
	if (rp->broken)
		return false;
	if (f->arg_size > LAUNCH_ARGS) {
		end_chunk(c, rp);   /* what came before may be a kept chunk; this one goes alone */
		count(&counts.too_long);
		return false;
	}
	if (rp->bytes + f->arg_size > RUN_BYTES)
		end_chunk(c, rp);   /* a chunk keeps so much at most: this launch starts the next */
	slot = next_slot(rp);
	if (!slot) {
		release_held(c, rp);
		rp->broken = true;   /* out of memory: the rest of the run goes one by one */
		return false;
	}
	rp->bytes += f->arg_size;
	l.f = f;
	memcpy(l.grid, q->grid, sizeof(l.grid));
	memcpy(l.block, q->block, sizeof(l.block));
	l.smem = q->shared_mem;
	l.nattrs = nattrs;
	if (keep(slot, &l, args, attrs) < 0) {
		release_held(c, rp);
		rp->broken = true;
		return false;
	}
	rp->hash = shape_hash(rp->hash, slot);
	rp->n++;
	/* Held while every launch of the chunk so far was, and a kept chunk
	 * with a graph starts as it does. */
	hold = rp->held == rp->n - 1 && (mode == ALWAYS || mps_sched_busy() || mps_sched_launch_bound()) &&
	       (g = graph_like(rp)) && st->green == g->green;
	if (hold) {
		rp->held++;
		note_held(c, mps_now_ns());
	} else if (rp->held) {
		count(&counts.let_go);
		release_held(c, rp);
	}
	if (chunk_ends(f, slot, rp->n))
		end_chunk(c, rp);   /* launches it as a graph, or what it holds */
	return hold;
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
	if (rp->st && !forget && mode != OFF)
		end_chunk(c, rp);   /* a run's last chunk may be one kept */
	else
		release_held(c, rp);
	if (forget)
		while (rp->nseg)
			forget_one(rp, rp->nseg - 1);
	rp->st = NULL;
	new_chunk(rp);
}

void mps_replay_expire(struct mps_client *c, uint64_t now, bool all)
{
	struct mps_replay *rp = c->replay;

	if (rp && rp->held && (all || mps_replay_due(c, now))) {
		count(&counts.expired);
		release_held(c, rp);
	}
}

void mps_replay_stats(struct mps_replay_counts *out)
{
	out->expired = mps_load_relaxed(&counts.expired);
	out->let_go = mps_load_relaxed(&counts.let_go);
	out->learned = mps_load_relaxed(&counts.learned);
	out->seen = mps_load_relaxed(&counts.seen);
	out->too_long = mps_load_relaxed(&counts.too_long);
	out->dropped = mps_load_relaxed(&counts.dropped);
	out->built = mps_load_relaxed(&counts.built);
	out->unbuilt = mps_load_relaxed(&counts.unbuilt);
	out->over_limit = mps_load_relaxed(&counts.over_limit);
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

bool mps_replay_shed(struct mps_client *c)
{
	struct mps_replay *rp = c->replay;
	bool any = false;

	for (unsigned int i = 0; rp && i < rp->nseg; i++) {
		if (!rp->seg[i].charged)
			continue;
		drop_graph(rp, &rp->seg[i]);
		any = true;
	}
	if (any)
		mps_log_info("client %d: its launches' graphs make way for its allocation", (int)c->pid);
	return any;
}

void mps_replay_free(struct mps_client *c)
{
	struct mps_replay *rp = c->replay;

	if (!rp)
		return;
	while (rp->nseg)
		forget_one(rp, rp->nseg - 1);
	for (unsigned int i = 0; i < rp->cap; i++)
		free(rp->run[i].args);
	free(rp->run);
	free(rp);
	c->replay = NULL;
}
