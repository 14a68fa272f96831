// SPDX-License-Identifier: MIT
/*
 * Host functions in stream order (cuLaunchHostFunc, cuStreamAddCallback).
 *
 * Both directions of the order: behind a kernel that spins ~100 ms and then
 * stores a word, and a copy of it to pinned memory, a host function must
 * see the stored word; it then sleeps and writes pinned memory that a
 * later copy and kernel on the stream take, so work after it must wait for
 * it to return. Many host functions on several streams (more than a
 * thousand in flight) each run once, in their stream's order. A stream
 * callback gets its stream and CUDA_SUCCESS; bad arguments are refused.
 * The legacy and per-thread default streams take host functions too.
 * In a graph, built with a host node (cuGraphAddHostNode, or cuGraphAddNode
 * with its parameters set again by cuGraphNodeSetParams) or captured, the
 * function runs once per launch, after the work before it and before the
 * work after it; a stream callback cannot be captured. A host node set in
 * one executable graph changes that one alone. Two executable graphs of
 * one graph launched on two streams at once each wait for their own run
 * of the host node. Host functions make no CUDA call, as the driver
 * requires.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define N      4096
#define FLAG   0x5a5a1234u
#define POISON 0xdeadbeefu

struct order {
	const uint32_t *seen;   /* pinned: the copy of the spinning kernel's word */
	uint32_t *give;         /* pinned: what the function writes for later work */
	uint32_t mul, add;
	uint32_t got;           /* what it saw */
	int ran;
};

static void CUDA_CB order_fn(void *arg)
{
	struct order *o = arg;
	const struct timespec nap = { .tv_nsec = 100 * 1000 * 1000 };

	__atomic_store_n(&o->got, __atomic_load_n(&o->seen[0], __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	nanosleep(&nap, NULL);   /* later work that does not wait reads the poison */
	for (uint32_t i = 0; i < N; i++)
		o->give[i] = i * o->mul + o->add;
	__atomic_store_n(&o->ran, 1, __ATOMIC_RELEASE);
}

static void both_directions(CUstream s)
{
	CUfunction spin = t_func(t_module(), "spin_then_store"), affine = t_func(t_module(), "affine_u32");
	uint64_t rng = t_rng(1);
	struct order o = { .mul = (uint32_t)t_rand(&rng) | 1, .add = (uint32_t)t_rand(&rng) };
	uint32_t *seen, *give, *want = malloc(N * 4), mul2 = (uint32_t)t_rand(&rng) | 1, add2 = (uint32_t)t_rand(&rng);
	long long cycles = 200LL * 1000 * 1000;
	uint32_t value = FLAG;
	CUdeviceptr d;
	int n = N;

	REQUIRE(want, "out of memory");
	REQUIRE_CU(cuMemAlloc(&d, N * 4));
	REQUIRE_CU(cuMemAllocHost((void **)&seen, N * 4));
	REQUIRE_CU(cuMemAllocHost((void **)&give, N * 4));
	for (int i = 0; i < N; i++)
		give[i] = POISON;
	seen[0] = POISON;
	o.seen = seen;
	o.give = give;
	REQUIRE_CU(cuMemsetD32(d, POISON, N));
	REQUIRE_CU(cuCtxSynchronize());

	{
		void *args[] = { &cycles, &d, &value };

		REQUIRE_CU(t_launch(spin, 1, 1, s, args));
	}
	REQUIRE_CU(cuMemcpyDtoHAsync(seen, d, 4, s));
	REQUIRE_CU(cuLaunchHostFunc(s, order_fn, &o));
	REQUIRE_CU(cuMemcpyHtoDAsync(d, give, N * 4, s));
	{
		void *args[] = { &d, &mul2, &add2, &n };

		REQUIRE_CU(t_launch(affine, N / 256, 256, s, args));
	}
	REQUIRE_CU(cuMemcpyDtoHAsync(seen, d, N * 4, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(__atomic_load_n(&o.ran, __ATOMIC_ACQUIRE) == 1, "the host function did not run");
	CHECK(__atomic_load_n(&o.got, __ATOMIC_ACQUIRE) == FLAG,
	      "the host function ran before the work ahead of it (saw %#x)", o.got);
	for (uint32_t i = 0; i < N; i++)
		want[i] = (i * o.mul + o.add) * mul2 + add2;
	CMP_U32(seen, want, N, "the work after the host function, on what it wrote");
	REQUIRE_CU(cuMemFreeHost(seen));
	REQUIRE_CU(cuMemFreeHost(give));
	REQUIRE_CU(cuMemFree(d));
	free(want);
}

#define STREAMS 3
#define EACH    700     /* STREAMS * EACH host functions queued before any may finish */

struct counter {
	int next;               /* the index the next call must carry */
	int wrong;
};

struct tick {
	struct counter *c;
	int index;
};

static void CUDA_CB tick_fn(void *arg)
{
	struct tick *t = arg;

	if (__atomic_load_n(&t->c->next, __ATOMIC_ACQUIRE) != t->index)
		__atomic_fetch_add(&t->c->wrong, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&t->c->next, t->index + 1, __ATOMIC_RELEASE);
}

static void many(void)
{
	struct counter c[STREAMS];
	struct tick *t = calloc(STREAMS * EACH, sizeof(*t));
	CUstream s[STREAMS];
	CUevent go;
	CUfunction spin = t_func(t_module(), "spin");
	CUdeviceptr out;
	long long cycles = 50LL * 1000 * 1000;

	REQUIRE(t, "out of memory");
	memset(c, 0, sizeof(c));
	REQUIRE_CU(cuMemAlloc(&out, 4));
	REQUIRE_CU(cuEventCreate(&go, CU_EVENT_DISABLE_TIMING));
	for (int i = 0; i < STREAMS; i++)
		REQUIRE_CU(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
	{
		/* Every stream waits behind a spinning kernel, so all of them
		 * are queued before the first runs. */
		void *args[] = { &cycles, &out };

		REQUIRE_CU(t_launch(spin, 1, 1, s[0], args));
		REQUIRE_CU(cuEventRecord(go, s[0]));
	}
	for (int i = 0; i < STREAMS; i++) {
		if (i)
			REQUIRE_CU(cuStreamWaitEvent(s[i], go, 0));
		for (int k = 0; k < EACH; k++) {
			t[i * EACH + k].c = &c[i];
			t[i * EACH + k].index = k;
			REQUIRE_CU(cuLaunchHostFunc(s[i], tick_fn, &t[i * EACH + k]));
		}
	}
	for (int i = 0; i < STREAMS; i++) {
		REQUIRE_CU(cuStreamSynchronize(s[i]));
		int next = __atomic_load_n(&c[i].next, __ATOMIC_ACQUIRE), wrong = __atomic_load_n(&c[i].wrong, __ATOMIC_ACQUIRE);

		CHECK(next == EACH && !wrong, "stream %d: %d host functions ran, %d out of order", i, next, wrong);
		REQUIRE_CU(cuStreamDestroy(s[i]));
	}
	REQUIRE_CU(cuEventDestroy(go));
	REQUIRE_CU(cuMemFree(out));
	free(t);
}

struct cbseen {
	CUstream stream;
	CUresult status;
	int calls;
};

static void CUDA_CB callback(CUstream hStream, CUresult status, void *arg)
{
	struct cbseen *c = arg;

	__atomic_store_n(&c->stream, hStream, __ATOMIC_RELAXED);
	__atomic_store_n(&c->status, status, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->calls, 1, __ATOMIC_RELEASE);
}

static void CUDA_CB count_fn(void *arg)
{
	__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELEASE);
}

static void callbacks_and_defaults(CUstream s)
{
	struct cbseen c = { .status = CUDA_ERROR_UNKNOWN };
	int legacy = 0, per_thread = 0;

	REQUIRE_CU(cuStreamAddCallback(s, callback, &c, 0));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(__atomic_load_n(&c.calls, __ATOMIC_ACQUIRE) == 1 && __atomic_load_n(&c.stream, __ATOMIC_RELAXED) == s &&
	      __atomic_load_n(&c.status, __ATOMIC_RELAXED) == CUDA_SUCCESS,
	      "a stream callback: %d calls, stream %p, status %d", c.calls, (void *)c.stream, (int)c.status);
	CHECK_CU(cuStreamAddCallback(s, callback, &c, 1), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

	REQUIRE_CU(cuLaunchHostFunc(NULL, count_fn, &legacy));
	REQUIRE_CU(cuLaunchHostFunc(CU_STREAM_PER_THREAD, count_fn, &per_thread));
	REQUIRE_CU(cuCtxSynchronize());
	CHECK(__atomic_load_n(&legacy, __ATOMIC_ACQUIRE) == 1 && __atomic_load_n(&per_thread, __ATOMIC_ACQUIRE) == 1,
	      "default streams: %d and %d host functions ran", legacy, per_thread);
}

/* A graph's host function, between a kernel that fills a pinned word
 * through device memory and a memset after it: each launch runs it once,
 * after the kernel, and the memset waits for it. */
struct graph_run {
	const uint32_t *word;   /* pinned: copied from the device before the function */
	uint32_t want;          /* what this launch's kernel stored */
	int runs, wrong;
};

static void CUDA_CB graph_fn(void *arg)
{
	struct graph_run *g = arg;
	const struct timespec nap = { .tv_nsec = 20 * 1000 * 1000 };

	if (__atomic_load_n(&g->word[0], __ATOMIC_ACQUIRE) != __atomic_load_n(&g->want, __ATOMIC_ACQUIRE))
		__atomic_fetch_add(&g->wrong, 1, __ATOMIC_RELEASE);
	nanosleep(&nap, NULL);   /* the memset after it must not have run */
	__atomic_fetch_add(&g->runs, 1, __ATOMIC_RELEASE);
}

enum { BUILT, CAPTURED, BUILT_GENERIC };

/* The graph: spin_then_store(value) -> copy to the pinned word -> host
 * function -> memset of the device word to 0, built by hand (a host node
 * from cuGraphAddHostNode or from cuGraphAddNode) or by capture. */
static CUgraph graph_with_host(CUstream s, int how, struct graph_run *g, CUdeviceptr d, uint32_t *word,
			       uint32_t *value)
{
	CUfunction spin = t_func(t_module(), "spin_then_store");
	long long cycles = 20LL * 1000 * 1000;
	CUgraph graph;

	if (how == CAPTURED) {
		void *args[] = { &cycles, &d, value };

		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		REQUIRE_CU(t_launch(spin, 1, 1, s, args));
		REQUIRE_CU(cuMemcpyDtoHAsync(word, d, 4, s));
		REQUIRE_CU(cuLaunchHostFunc(s, graph_fn, g));
		REQUIRE_CU(cuMemsetD32Async(d, 0, 1, s));
		REQUIRE_CU(cuStreamEndCapture(s, &graph));
	} else {
		CUDA_KERNEL_NODE_PARAMS kp;
		CUDA_MEMCPY3D cp;
		CUDA_HOST_NODE_PARAMS hp = { .fn = graph_fn, .userData = g }, got;
		CUDA_MEMSET_NODE_PARAMS mp;
		CUgraphNode k, c, h, m;
		CUcontext ctx;
		void *args[] = { &cycles, &d, value };

		REQUIRE_CU(cuCtxGetCurrent(&ctx));
		REQUIRE_CU(cuGraphCreate(&graph, 0));
		memset(&kp, 0, sizeof(kp));
		kp.func = spin;
		kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
		kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
		kp.kernelParams = args;
		REQUIRE_CU(cuGraphAddKernelNode(&k, graph, NULL, 0, &kp));
		memset(&cp, 0, sizeof(cp));
		cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		cp.srcDevice = d;
		cp.dstMemoryType = CU_MEMORYTYPE_HOST;
		cp.dstHost = word;
		cp.WidthInBytes = 4;
		cp.Height = 1;
		cp.Depth = 1;
		REQUIRE_CU(cuGraphAddMemcpyNode(&c, graph, &k, 1, &cp, ctx));
		if (how == BUILT_GENERIC) {
			CUgraphNodeParams np;

			memset(&np, 0, sizeof(np));
			np.type = CU_GRAPH_NODE_TYPE_HOST;
			np.host.fn = graph_fn;
			np.host.userData = NULL;
			REQUIRE_CU(cuGraphAddNode(&h, graph, &c, NULL, 1, &np));
			np.host.userData = g;   /* and set through the generic call */
			REQUIRE_CU(cuGraphNodeSetParams(h, &np));
		} else {
			REQUIRE_CU(cuGraphAddHostNode(&h, graph, &c, 1, &hp));
		}
		memset(&got, 0, sizeof(got));
		REQUIRE_CU(cuGraphHostNodeGetParams(h, &got));
		CHECK(got.fn == graph_fn && got.userData == g, "a host node's parameters read back wrong");
		{
			CUgraphNodeType t;

			REQUIRE_CU(cuGraphNodeGetType(h, &t));
			CHECK(t == CU_GRAPH_NODE_TYPE_HOST, "a host node has type %d", (int)t);
		}
		memset(&mp, 0, sizeof(mp));
		mp.dst = d;
		mp.elementSize = 4;
		mp.width = 1;
		mp.height = 1;
		mp.value = 0;
		REQUIRE_CU(cuGraphAddMemsetNode(&m, graph, &h, 1, &mp, ctx));
	}
	return graph;
}

/* The graph as the program sees it: four nodes in a chain, the host
 * function one of them with its type, as natively. */
static void graph_shape(CUgraph graph, bool capture)
{
	const CUgraphNodeType want[] = { CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_HOST,
					 CU_GRAPH_NODE_TYPE_MEMSET };
	CUgraphNode nodes[8], next[8];
	size_t n = 8, roots = 8, edges = 0;
	int hosts = 0;

	REQUIRE_CU(cuGraphGetNodes(graph, nodes, &n));
	REQUIRE_CU(cuGraphGetRootNodes(graph, next, &roots));
	REQUIRE_CU(cuGraphGetEdges(graph, NULL, NULL, NULL, &edges));
	REQUIRE(n == 4 && roots == 1 && edges == 3, "%s graph: %zu nodes, %zu roots, %zu edges (want 4, 1, 3)",
		capture ? "a captured" : "a built", n, roots, edges);
	/* Walk the chain from its root: each node's type in order. */
	for (int i = 0; i < 4; i++) {
		CUgraphNodeType t;
		size_t after = 8;

		REQUIRE_CU(cuGraphNodeGetType(next[0], &t));
		CHECK(t == want[i], "%s graph: node %d has type %d, want %d", capture ? "a captured" : "a built", i,
		      (int)t, (int)want[i]);
		hosts += t == CU_GRAPH_NODE_TYPE_HOST;
		REQUIRE_CU(cuGraphNodeGetDependentNodes(next[0], next, NULL, &after));
		if (!CHECK(after == (i < 3 ? 1u : 0u), "node %d has %zu dependents", i, after))
			break;
	}
	CHECK(hosts == 1, "%d host nodes", hosts);
}

static void graphs(CUstream s)
{
	uint32_t *word, value = 0, back;
	CUdeviceptr d;
	CUgraph none = NULL;

	/* A stream callback cannot be captured: the capture is over. */
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK_CU(cuStreamAddCallback(s, callback, NULL, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_CU(cuStreamEndCapture(s, &none), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(!none, "an invalidated capture gave a graph");

	REQUIRE_CU(cuMemAlloc(&d, 4));
	REQUIRE_CU(cuMemAllocHost((void **)&word, 4));
	for (int how = BUILT; how <= BUILT_GENERIC; how++) {
		struct graph_run g = { .word = word };
		const char *what = how == CAPTURED ? "a captured" : how == BUILT ? "a built" : "a generically built";
		CUgraphExec ge;
		CUgraph graph;

		value = FLAG;
		graph = graph_with_host(s, how, &g, d, word, &value);
		graph_shape(graph, how == CAPTURED);
		REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, graph, 0));
		for (int i = 0; i < 3; i++) {
			__atomic_store_n(&word[0], POISON, __ATOMIC_RELEASE);
			__atomic_store_n(&g.want, FLAG, __ATOMIC_RELEASE);
			REQUIRE_CU(cuMemsetD32Async(d, POISON, 1, s));
			REQUIRE_CU(cuGraphLaunch(ge, s));
			REQUIRE_CU(cuMemcpyDtoHAsync(&back, d, 4, s));
			REQUIRE_CU(cuStreamSynchronize(s));
			CHECK(back == 0, "%s graph, launch %d: the memset after the host function left %#x", what, i,
			      back);
		}
		CHECK(__atomic_load_n(&g.runs, __ATOMIC_ACQUIRE) == 3 && !__atomic_load_n(&g.wrong, __ATOMIC_ACQUIRE),
		      "%s graph: its host function ran %d times for 3 launches, %d early", what, g.runs, g.wrong);
		REQUIRE_CU(cuGraphExecDestroy(ge));
		REQUIRE_CU(cuGraphDestroy(graph));
	}
	REQUIRE_CU(cuMemFreeHost(word));
	REQUIRE_CU(cuMemFree(d));
}

static void CUDA_CB add_fn(void *arg)
{
	__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

/* A loop that captures a host function into a new graph every round, as
 * programs that re-capture do, for more rounds than a process's graphs
 * could hold host functions at once (openmps gives back those of graphs
 * that are gone): every round's function runs once per launch. The first
 * round's executable graph lives on and still runs its own function at
 * the end, and so does a graph built by hand in round 100 and kept. */
static void many_captures(CUstream s)
{
	enum { ROUNDS = 1200 };
	static int runs[ROUNDS];
	CUgraphExec first = NULL;
	CUgraph kept = NULL;
	int bad = 0;

	for (int i = 0; i < ROUNDS && !bad; i++) {
		CUgraphExec ge;
		CUgraph g;

		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		REQUIRE_CU(cuLaunchHostFunc(s, add_fn, &runs[i]));
		REQUIRE_CU(cuStreamEndCapture(s, &g));
		REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
		if (i == 100) {
			CUDA_HOST_NODE_PARAMS hp = { .fn = add_fn, .userData = &runs[i] };
			CUgraphNode h;

			REQUIRE_CU(cuGraphCreate(&kept, 0));
			REQUIRE_CU(cuGraphAddHostNode(&h, kept, NULL, 0, &hp));
		}
		REQUIRE_CU(cuGraphDestroy(g));
		REQUIRE_CU(cuGraphLaunch(ge, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		bad = !CHECK(__atomic_load_n(&runs[i], __ATOMIC_RELAXED) == 1, "round %d: its function ran %d times", i,
			     runs[i]);
		if (i == 0)
			first = ge;
		else
			REQUIRE_CU(cuGraphExecDestroy(ge));
	}
	REQUIRE_CU(cuGraphLaunch(first, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(__atomic_load_n(&runs[0], __ATOMIC_RELAXED) == 2, "the first round's graph, kept, ran its function %d "
	      "times for 2 launches", runs[0]);
	{
		CUgraphExec ke;

		REQUIRE_CU(cuGraphInstantiateWithFlags(&ke, kept, 0));
		REQUIRE_CU(cuGraphLaunch(ke, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(__atomic_load_n(&runs[100], __ATOMIC_RELAXED) == 2, "a graph built in round 100, kept, ran its "
		      "function %d times for 2 launches", runs[100]);
		REQUIRE_CU(cuGraphExecDestroy(ke));
	}
	REQUIRE_CU(cuGraphExecDestroy(first));
	REQUIRE_CU(cuGraphDestroy(kept));
}

struct tally {
	int ran;
};

static void CUDA_CB tally_one(void *arg)
{
	__atomic_fetch_add(&((struct tally *)arg)->ran, 1, __ATOMIC_RELEASE);
}

static void CUDA_CB tally_hundred(void *arg)
{
	__atomic_fetch_add(&((struct tally *)arg)->ran, 100, __ATOMIC_RELEASE);
}

static int ran(struct tally *c)
{
	return __atomic_load_n(&c->ran, __ATOMIC_ACQUIRE);
}

/* A host node's function changed in one executable graph alone
 * (cuGraphExecHostNodeSetParams, or cuGraphExecNodeSetParams with a host
 * node's parameters): that graph runs the new one from its next launch;
 * the graph's node, another executable graph of it and a later one keep
 * the node's own. Set again and again on one executable graph, the last
 * setting is what runs. */
static void exec_params(CUstream s)
{
	struct tally a = { 0 }, b = { 0 }, c = { 0 };
	CUDA_HOST_NODE_PARAMS hp = { .fn = tally_one, .userData = &a }, got;
	CUgraphNodeParams np;
	CUgraphExec e1, e2, e3;
	CUgraphNode h;
	CUgraph graph;

	REQUIRE_CU(cuGraphCreate(&graph, 0));
	REQUIRE_CU(cuGraphAddHostNode(&h, graph, NULL, 0, &hp));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e1, graph, 0));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e2, graph, 0));
	hp.userData = &b;
	REQUIRE_CU(cuGraphExecHostNodeSetParams(e1, h, &hp));
	REQUIRE_CU(cuGraphLaunch(e1, s));
	REQUIRE_CU(cuGraphLaunch(e2, s));
	REQUIRE_CU(cuGraphLaunch(e1, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(ran(&a) == 1 && ran(&b) == 2, "after one executable graph's host node was set: the node's "
	      "function ran %d times (want 1), the new one %d (want 2)", ran(&a), ran(&b));

	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_HOST;
	np.host.fn = tally_hundred;
	np.host.userData = &c;
	REQUIRE_CU(cuGraphExecNodeSetParams(e1, h, &np));
	REQUIRE_CU(cuGraphLaunch(e1, s));
	REQUIRE_CU(cuGraphLaunch(e2, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(ran(&a) == 2 && ran(&b) == 2 && ran(&c) == 100,
	      "set again through cuGraphExecNodeSetParams: %d / %d / %d runs (want 2 / 2 / 100)", ran(&a), ran(&b),
	      ran(&c));

	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphHostNodeGetParams(h, &got));
	CHECK(got.fn == tally_one && got.userData == &a, "the graph's own host node changed with an executable graph's");
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e3, graph, 0));
	REQUIRE_CU(cuGraphLaunch(e3, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(ran(&a) == 3, "a later executable graph ran the node's function %d times (want 3)", ran(&a));

	/* Updated from the graph, the executable graph runs the node's own
	 * function again, and a setting after that takes effect. */
	{
		CUgraphExecUpdateResultInfo info;

		REQUIRE_CU(cuGraphExecUpdate(e1, graph, &info));
		REQUIRE_CU(cuGraphLaunch(e1, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(ran(&a) == 4 && ran(&c) == 100, "after cuGraphExecUpdate: %d / %d runs (want 4 / 100)", ran(&a),
		      ran(&c));
		hp.fn = tally_hundred;
		hp.userData = &c;
		REQUIRE_CU(cuGraphExecHostNodeSetParams(e1, h, &hp));
		REQUIRE_CU(cuGraphLaunch(e1, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(ran(&a) == 4 && ran(&c) == 200, "set after cuGraphExecUpdate: %d / %d runs (want 4 / 200)",
		      ran(&a), ran(&c));
	}

	for (int i = 0; i < 2000; i++) {
		hp.fn = i % 2 ? tally_one : tally_hundred;
		hp.userData = i % 2 ? &b : &c;
		REQUIRE_CU(cuGraphExecHostNodeSetParams(e2, h, &hp));
	}
	REQUIRE_CU(cuGraphLaunch(e2, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(ran(&a) == 4 && ran(&b) == 3 && ran(&c) == 200,
	      "after 2000 settings of one executable graph: %d / %d / %d runs (want 4 / 3 / 200)", ran(&a),
	      ran(&b), ran(&c));

	REQUIRE_CU(cuGraphExecDestroy(e1));
	REQUIRE_CU(cuGraphExecDestroy(e2));
	REQUIRE_CU(cuGraphExecDestroy(e3));
	REQUIRE_CU(cuGraphDestroy(graph));
}

/* Settings while launches wait: each launch runs the function set when it
 * was launched, as natively, though none has reached the node when the
 * next setting comes (the stream waits on a word the program writes last). */
static void exec_params_queued(CUstream s)
{
	struct tally a = { 0 }, b = { 0 }, c = { 0 };
	CUDA_HOST_NODE_PARAMS hp = { .fn = tally_one, .userData = &a };
	volatile uint32_t *gate;
	CUdeviceptr dgate;
	CUgraphExec e;
	CUgraphNode h;
	CUgraph graph;

	REQUIRE_CU(cuGraphCreate(&graph, 0));
	REQUIRE_CU(cuGraphAddHostNode(&h, graph, NULL, 0, &hp));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e, graph, 0));
	REQUIRE_CU(cuMemHostAlloc((void **)&gate, 4, CU_MEMHOSTALLOC_DEVICEMAP));
	*gate = 0;
	REQUIRE_CU(cuMemHostGetDevicePointer(&dgate, (void *)gate, 0));
	for (int round = 0; round < 2; round++) {
		REQUIRE_CU(cuStreamWaitValue32(s, dgate, (uint32_t)round + 1, CU_STREAM_WAIT_VALUE_GEQ));
		hp.fn = tally_one;
		hp.userData = &b;
		REQUIRE_CU(cuGraphExecHostNodeSetParams(e, h, &hp));
		REQUIRE_CU(cuGraphLaunch(e, s));
		hp.userData = &c;
		REQUIRE_CU(cuGraphExecHostNodeSetParams(e, h, &hp));
		REQUIRE_CU(cuGraphLaunch(e, s));
		hp.fn = tally_hundred;
		hp.userData = &a;
		REQUIRE_CU(cuGraphExecHostNodeSetParams(e, h, &hp));
		REQUIRE_CU(cuGraphLaunch(e, s));
		CHECK(ran(&a) == 100 * round && ran(&b) == round && ran(&c) == round,
		      "round %d: a launch ran before the stream was let go", round);
		__atomic_store_n(gate, (uint32_t)round + 1, __ATOMIC_RELEASE);
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(ran(&a) == 100 * (round + 1) && ran(&b) == round + 1 && ran(&c) == round + 1,
		      "round %d: three launches, each after a new setting: %d / %d / %d runs (want %d / %d / %d)", round,
		      ran(&a), ran(&b), ran(&c), 100 * (round + 1), round + 1, round + 1);
	}
	REQUIRE_CU(cuGraphExecDestroy(e));
	REQUIRE_CU(cuGraphDestroy(graph));
	REQUIRE_CU(cuMemFreeHost((void *)gate));
}

struct late {
	int runs, finished;
	volatile float *flag;   /* pinned, mapped: what the kernel after the function reads */
};

/* The slot's second run takes 200 ms, then raises the flag. */
static void CUDA_CB late_second(void *arg)
{
	struct late *w = arg;

	if (__atomic_fetch_add(&w->runs, 1, __ATOMIC_ACQ_REL) == 1) {
		const struct timespec nap = { .tv_nsec = 200 * 1000 * 1000 };

		nanosleep(&nap, NULL);
		*w->flag = 1.0f;
	}
	__atomic_fetch_add(&w->finished, 1, __ATOMIC_RELEASE);
}

/* Two executable graphs of one graph (a host node, then a kernel that
 * adds the flag to a word of its own), launched on two streams at once:
 * each kernel runs after its own graph's function has returned, so the
 * kernel after the slow second run sees the flag raised, whichever graph
 * that run is. (A kernel let go by the other graph's run would read it
 * down: both words 0.) */
static void shared_host_node(void)
{
	CUfunction saxpy = t_func(t_module(), "saxpy");
	CUstream s1, s2;
	struct late w = { 0 };
	CUDA_HOST_NODE_PARAMS hp = { .fn = late_second, .userData = &w };
	CUDA_KERNEL_NODE_PARAMS kp;
	CUdeviceptr flag_d, out;
	CUgraphExec e1, e2;
	CUgraphNode h, k;
	CUgraph graph;
	float a = 1.0f, got[2] = { -1, -1 };
	int one = 1;
	void *flag_h, *args1[4], *args2[4];
	CUdeviceptr y1, y2;

	REQUIRE_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemHostAlloc(&flag_h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	w.flag = flag_h;
	*w.flag = 0.0f;
	REQUIRE_CU(cuMemHostGetDevicePointer(&flag_d, flag_h, 0));
	REQUIRE_CU(cuMemAlloc(&out, 2 * sizeof(float)));
	REQUIRE_CU(cuMemsetD32(out, 0, 2));
	y1 = out, y2 = out + sizeof(float);
	args1[0] = &a, args1[1] = &flag_d, args1[2] = &y1, args1[3] = &one;
	args2[0] = &a, args2[1] = &flag_d, args2[2] = &y2, args2[3] = &one;
	REQUIRE_CU(cuGraphCreate(&graph, 0));
	REQUIRE_CU(cuGraphAddHostNode(&h, graph, NULL, 0, &hp));
	memset(&kp, 0, sizeof(kp));
	kp.func = saxpy;
	kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
	kp.blockDimX = 32, kp.blockDimY = kp.blockDimZ = 1;
	kp.kernelParams = args1;
	REQUIRE_CU(cuGraphAddKernelNode(&k, graph, &h, 1, &kp));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e1, graph, 0));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&e2, graph, 0));
	kp.kernelParams = args2;
	REQUIRE_CU(cuGraphExecKernelNodeSetParams(e2, k, &kp));
	REQUIRE_CU(cuGraphLaunch(e1, s1));
	REQUIRE_CU(cuGraphLaunch(e2, s2));
	REQUIRE_CU(cuStreamSynchronize(s1));
	REQUIRE_CU(cuStreamSynchronize(s2));
	REQUIRE_CU(cuMemcpyDtoH(got, out, sizeof(got)));
	/* Both runs are over once both streams are (if not, the memory they
	 * write must outlive them all the same). */
	for (int i = 0; i < 300 && __atomic_load_n(&w.finished, __ATOMIC_ACQUIRE) < 2; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	CHECK(__atomic_load_n(&w.finished, __ATOMIC_ACQUIRE) == 2, "the host node ran %d times (want 2)",
	      w.finished);
	CHECK(got[0] == 1.0f || got[1] == 1.0f,
	      "no kernel after a host node saw the flag its slow run raised: %g, %g (one launch let the other go)",
	      got[0], got[1]);
	REQUIRE_CU(cuGraphExecDestroy(e1));
	REQUIRE_CU(cuGraphExecDestroy(e2));
	REQUIRE_CU(cuGraphDestroy(graph));
	REQUIRE_CU(cuMemFree(out));
	REQUIRE_CU(cuMemFreeHost(flag_h));
	REQUIRE_CU(cuStreamDestroy(s1));
	REQUIRE_CU(cuStreamDestroy(s2));
}

int main(int argc, char **argv)
{
	CUstream s;

	t_init(argc, argv);
	t_primary(t_device());
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	both_directions(s);
	many();
	callbacks_and_defaults(s);
	graphs(s);
	exec_params(s);
	exec_params_queued(s);
	shared_host_node();
	many_captures(s);
	REQUIRE_CU(cuStreamDestroy(s));
	return t_finish();
}
