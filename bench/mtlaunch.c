// SPDX-License-Identifier: MIT
/*
 * mtlaunch THREADS SECONDS same|own|green
 *
 * How far the driver's launch path scales with threads of one process,
 * which is what a server forwarding many clients' launches depends on.
 * THREADS threads each launch the empty kernel on a stream of their own,
 * synchronizing that stream after every 256 launches, for SECONDS:
 *   same   every thread's stream in the device's primary context
 *   own    every thread in a context of its own (cuCtxCreate)
 *   green  every thread in a green context of its own, each given all of
 *          the device's SMs (cuGreenCtxCreate), a stream made in it
 * Prints the aggregate launches per second, the launches per second of the
 * slowest thread, and the CPU time the process used per launch. The
 * threads start together once all of them are set up.
 *
 * MTLAUNCH_API picks the call: plain (cuLaunchKernel of the empty kernel,
 * the default), ex (cuLaunchKernelEx, no attributes), params (saxpy's four
 * parameters through kernelParams, with n = 0) or extra (the same through
 * CU_LAUNCH_PARAM_BUFFER_POINTER). MTLAUNCH_IDLE_STREAMS=K makes each
 * thread also create K streams it never uses, as a server holding many
 * clients' streams does. MTLAUNCH_GRAPH=G makes each thread launch its
 * kernels G at a time as one executable graph (a chain of G kernel nodes,
 * cuGraphLaunch), counted as G launches: what replaying a request's
 * launches as a graph would cost; MTLAUNCH_GRAPH_SET=1 also sets every
 * node's parameters (cuGraphExecKernelNodeSetParams) before each launch.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

#define BATCH 256

enum mode { SAME, OWN, GREEN };
enum api { PLAIN, EX, PARAMS, EXTRA };
static const char *const api_names[] = { "plain", "ex", "params", "extra" };

struct worker {
	pthread_t tid;
	long launches;
	double secs;
};

static enum mode mode;
static enum api api;
static int idle_streams, graph_nodes, graph_set;
static CUdevice dev;
static CUcontext primary;
static CUfunction shared_empty, shared_saxpy;
static char *ptx;
static double run_secs;
static pthread_barrier_t start;

static double process_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The calling thread's context, stream and kernel for its mode. */
static void worker_setup(CUstream *s, CUfunction *fn)
{
	CUmodule mod;

	if (mode == SAME) {
		B_CHECK(cuCtxSetCurrent(primary));
		B_CHECK(cuStreamCreate(s, CU_STREAM_NON_BLOCKING));
		*fn = api >= PARAMS ? shared_saxpy : shared_empty;
		goto idle;
	}
	if (mode == OWN) {
		CUcontext ctx;

		B_CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
		B_CHECK(cuStreamCreate(s, CU_STREAM_NON_BLOCKING));
	} else {
		CUgreenCtx g = b_green_all(dev);
		CUcontext ctx;

		B_CHECK(cuCtxFromGreenCtx(&ctx, g));
		B_CHECK(cuCtxSetCurrent(ctx));
		B_CHECK(cuGreenCtxStreamCreate(s, g, CU_STREAM_NON_BLOCKING, 0));
	}
	B_CHECK(cuModuleLoadData(&mod, ptx));
	B_CHECK(cuModuleGetFunction(fn, mod, api >= PARAMS ? "saxpy" : "empty"));
idle:
	for (int i = 0; i < idle_streams; i++) {
		CUstream unused;

		B_CHECK(cuStreamCreate(&unused, CU_STREAM_NON_BLOCKING));
	}
}

struct saxpy_args {
	float a;
	CUdeviceptr x, y;
	int n;
};

static void launch(CUfunction fn, CUstream s)
{
	static const struct saxpy_args sa = { 2.0f, 0, 0, 0 };
	void *kp[] = { (void *)&sa.a, (void *)&sa.x, (void *)&sa.y, (void *)&sa.n };
	size_t size = sizeof(sa);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)&sa, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };
	CUlaunchConfig cfg;

	switch (api) {
	case PLAIN:
		B_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
		break;
	case EX:
		memset(&cfg, 0, sizeof(cfg));
		cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
		cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
		cfg.hStream = s;
		B_CHECK(cuLaunchKernelEx(&cfg, fn, NULL, NULL));
		break;
	case PARAMS:
		B_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, kp, NULL));
		break;
	case EXTRA:
		B_CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
		break;
	}
}

/* A chain of graph_nodes kernel nodes of fn (*g), instantiated. */
static CUgraphExec graph_make(CUfunction fn, CUDA_KERNEL_NODE_PARAMS *np, void **kp, CUgraph *g)
{
	CUgraphNode prev = NULL, node;
	CUgraphExec exec;

	memset(np, 0, sizeof(*np));
	np->func = fn;
	np->gridDimX = np->gridDimY = np->gridDimZ = 1;
	np->blockDimX = np->blockDimY = np->blockDimZ = 1;
	np->kernelParams = api >= PARAMS ? kp : NULL;
	B_CHECK(cuGraphCreate(g, 0));
	for (int i = 0; i < graph_nodes; i++) {
		B_CHECK(cuGraphAddKernelNode(&node, *g, prev ? &prev : NULL, prev ? 1 : 0, np));
		prev = node;
	}
	B_CHECK(cuGraphInstantiate(&exec, *g, 0));
	return exec;
}

/* Sets every kernel node of exec (nodes[0..n)) to np again. */
static void graph_set_all(CUgraphExec exec, const CUgraphNode *nodes, size_t n, const CUDA_KERNEL_NODE_PARAMS *np)
{
	for (size_t i = 0; i < n; i++)
		B_CHECK(cuGraphExecKernelNodeSetParams(exec, nodes[i], np));
}

static void *worker_main(void *arg)
{
	static const struct saxpy_args sa = { 2.0f, 0, 0, 0 };
	void *kp[] = { (void *)&sa.a, (void *)&sa.x, (void *)&sa.y, (void *)&sa.n };
	struct worker *w = arg;
	CUDA_KERNEL_NODE_PARAMS np;
	CUgraphExec exec = NULL;
	CUgraph g = NULL;
	CUgraphNode nodes[256];
	size_t nnodes = 256;
	int per = graph_nodes ? graph_nodes : 1, rounds = (BATCH + per - 1) / per;
	CUfunction fn;
	CUstream s;
	double t0, t;

	worker_setup(&s, &fn);
	if (graph_nodes) {
		exec = graph_make(fn, &np, kp, &g);
		B_CHECK(cuGraphGetNodes(g, nodes, &nnodes));
	}
	for (int i = 0; i < rounds; i++) {
		if (exec)
			B_CHECK(cuGraphLaunch(exec, s));
		else
			launch(fn, s);
	}
	B_CHECK(cuStreamSynchronize(s));
	pthread_barrier_wait(&start);
	t0 = b_now();
	do {
		for (int i = 0; i < rounds; i++) {
			if (exec && graph_set)
				graph_set_all(exec, nodes, nnodes, &np);
			if (exec)
				B_CHECK(cuGraphLaunch(exec, s));
			else
				launch(fn, s);
		}
		B_CHECK(cuStreamSynchronize(s));
		w->launches += (long)rounds * per;
		t = b_now();
	} while (t - t0 < run_secs);
	w->secs = t - t0;
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker *w;
	CUmodule mod;
	double c0, c1, total = 0, slowest = -1;
	long launches = 0;
	const char *e;
	int n;

	if (argc != 4) {
		fprintf(stderr, "usage: %s THREADS SECONDS same|own|green\n", argv[0]);
		return 2;
	}
	n = atoi(argv[1]);
	run_secs = atof(argv[2]);
	if (strcmp(argv[3], "same") == 0)
		mode = SAME;
	else if (strcmp(argv[3], "own") == 0)
		mode = OWN;
	else if (strcmp(argv[3], "green") == 0)
		mode = GREEN;
	else
		b_die("unknown mode '%s' (same, own or green)", argv[3]);
	e = getenv("MTLAUNCH_API");
	if (!e || !*e || strcmp(e, "plain") == 0)
		api = PLAIN;
	else if (strcmp(e, "ex") == 0)
		api = EX;
	else if (strcmp(e, "params") == 0)
		api = PARAMS;
	else if (strcmp(e, "extra") == 0)
		api = EXTRA;
	else
		b_die("unknown MTLAUNCH_API '%s' (plain, ex, params or extra)", e);
	e = getenv("MTLAUNCH_IDLE_STREAMS");
	idle_streams = e && *e ? atoi(e) : 0;
	e = getenv("MTLAUNCH_GRAPH");
	graph_nodes = e && *e ? atoi(e) : 0;
	e = getenv("MTLAUNCH_GRAPH_SET");
	graph_set = e && *e == '1';
	if (graph_nodes < 0 || graph_nodes > 256)
		b_die("MTLAUNCH_GRAPH must be 0..256");
	if (n < 1 || n > 256 || run_secs <= 0 || idle_streams < 0)
		b_die("THREADS must be 1..256 and SECONDS positive");

	dev = b_setup(&primary);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&shared_empty, mod, "empty"));
	B_CHECK(cuModuleGetFunction(&shared_saxpy, mod, "saxpy"));
	ptx = b_read_ptx();
	if (!ptx)
		b_die("cannot read the kernels' PTX");
	w = calloc((size_t)n, sizeof(*w));
	if (!w)
		b_die("out of memory");
	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++)
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			b_die("pthread_create failed");
	pthread_barrier_wait(&start);
	c0 = process_cpu_s();
	for (int i = 0; i < n; i++)
		pthread_join(w[i].tid, NULL);
	c1 = process_cpu_s();
	for (int i = 0; i < n; i++) {
		double rate = (double)w[i].launches / w[i].secs;

		launches += w[i].launches;
		total += rate;
		if (slowest < 0 || rate < slowest)
			slowest = rate;
	}
	printf("threads=%d\nmode=%s\napi=%s\ngraph_nodes=%d\ngraph_set=%d\n", n, argv[3], api_names[api],
	       graph_nodes, graph_set);
	printf("launches_per_s=%.0f\n", total);
	printf("slowest_thread_per_s=%.0f\n", slowest);
	printf("cpu_us_per_launch=%.3f\n", (c1 - c0) / (double)launches * 1e6);
	free(w);
	free(ptx);
	return 0;
}
