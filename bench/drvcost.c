// SPDX-License-Identifier: MIT
/*
 * drvcost [THREADS] [ITERATIONS]
 *
 * What the driver calls a server makes for one request cost, each on its
 * own: THREADS threads (default 1) of one process, each with a stream of
 * its own in the device's primary context, make ITERATIONS (default 20000)
 * calls of one kind at once, synchronizing their stream after every 256;
 * then the next kind. Prints, per kind, the time a call takes in the
 * calling thread, averaged over the threads (`<kind>_us=`; the
 * synchronizes are not counted), so a request's server cost can be read as
 * a sum of these, and how it grows when threads call the driver at once.
 * With bench/cpuprof.c preloaded it also prints the ioctl calls a call
 * makes (`<kind>_ioctls=`): the driver's trips into the kernel.
 * Kinds:
 *
 *   launch          cuLaunchKernel of the empty kernel
 *   graph14         cuGraphLaunch of a chain of 14 empty kernel nodes (per graph)
 *   graph14_args    the same with 14 nodes of a kernel that stores a value
 *   graph14_set4    4 of those nodes given new arguments, then the launch
 *   graph14_set4k   the same with the kernel as a CUkernel of a library
 *                   (node parameters name the kernel and the context), as
 *                   cudart's own kernels come since CUDA 12
 *   graph14_16s     graph14_args on 16 streams of the thread's in turn, as
 *                   a server's thread launches for many clients
 *   h2d_pageable    cuMemcpyHtoDAsync of 48 KiB from malloc'd memory
 *   h2d_pinned      cuMemcpyHtoDAsync of 48 KiB from cuMemAllocHost memory
 *   h2d_registered  the same from malloc'd memory made pinned by cuMemHostRegister
 *   memcpy          memcpy of 48 KiB between two host buffers (no driver)
 *   d2h_pinned      cuMemcpyDtoHAsync of 64 bytes into pinned memory
 *   d2h_pageable    cuMemcpyDtoHAsync of 64 bytes into malloc'd memory
 *   d2h_registered  the same into cuMemHostRegister'd memory
 *   write_value     cuStreamWriteValue32 into a pinned, mapped host word
 *   event_record    cuEventRecord of a timing-disabled event
 *   stream_query    cuStreamQuery of the thread's idle stream
 *   launch_d2h      launch, then d2h_pinned and write_value: a request's
 *                   last kernel and its result's copy and completion word
 *   graph_d2h       the same after graph14_args instead of the launch (is
 *                   a copy after a graph launch dearer than after a launch?)
 *
 * DRVCOST_STREAMS says where each thread's stream lives: `primary` (the
 * default: every thread in the one primary context, as a server's threads
 * are), `green` (each thread's stream in a green context of its own that
 * holds every SM of the device; memory and kernels stay the primary
 * context's), or `context` (each thread with a context, memory and module
 * of its own: what separate processes would contend on).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define BATCH 256
#define COPY_BYTES (48u * 1024u)
#define NODES 14
#define SETS 4       /* nodes graph14_set4 gives new arguments */
#define STREAMS 16   /* graph14_16s */

enum kind { LAUNCH, GRAPH14, GRAPH14_ARGS, GRAPH14_SET4, GRAPH14_SET4K, GRAPH14_16S, H2D_PAGEABLE, H2D_PINNED, H2D_REGISTERED, MEMCPY, D2H_PINNED, D2H_PAGEABLE,
	    D2H_REGISTERED, WRITE_VALUE, EVENT_RECORD, STREAM_QUERY, LAUNCH_D2H, GRAPH_D2H, KINDS };
static const char *const kind_names[KINDS] = {
	"launch", "graph14", "graph14_args", "graph14_set4", "graph14_set4k", "graph14_16s", "h2d_pageable", "h2d_pinned", "h2d_registered", "memcpy", "d2h_pinned",
	"d2h_pageable", "d2h_registered", "write_value", "event_record", "stream_query", "launch_d2h", "graph_d2h",
};

struct worker {
	pthread_t tid;
	CUstream s;
	CUevent ev;
	CUgraphExec graph;
	CUgraph sgraph;           /* 14 store_at nodes, kept for their node handles */
	CUgraphExec sexec;
	CUgraphNode snodes[NODES];
	CUgraph kgraph;           /* the same with the library's kernel */
	CUgraphExec kexec;
	CUgraphNode knodes[NODES];
	CUstream more[STREAMS];
	unsigned int calls;
	CUdeviceptr dev;
	void *pageable, *pageable2, *pinned, *registered;
	CUdeviceptr pinned_dev;
	CUfunction fn, store;
	double in_calls;    /* seconds inside the calls of the current kind */
};

enum place { PRIMARY, GREEN, CONTEXT };

static CUcontext primary;
static CUdevice device;
static CUfunction empty, store_at;
static CUkernel store_kernel;   /* store_at of a library */
static enum place place;
static long iterations;
static enum kind current;
static pthread_barrier_t start, done;

/* The arguments of node i of the store graph: its word of w->dev, and v. */
static void store_params(struct worker *w, int i, unsigned int v, CUDA_KERNEL_NODE_PARAMS *p, void **kp,
			 CUdeviceptr *at, unsigned int *val)
{
	*at = w->dev + 4u * (unsigned int)i;
	*val = v;
	kp[0] = at;
	kp[1] = val;
	memset(p, 0, sizeof(*p));
	p->func = w->store;
	p->gridDimX = p->gridDimY = p->gridDimZ = 1;
	p->blockDimX = p->blockDimY = p->blockDimZ = 1;
	p->kernelParams = kp;
}

/* The same, naming the library's kernel and the context. */
static void kernel_params(struct worker *w, int i, unsigned int v, CUDA_KERNEL_NODE_PARAMS *p, void **kp,
			  CUdeviceptr *at, unsigned int *val)
{
	store_params(w, i, v, p, kp, at, val);
	p->func = NULL;
	p->kern = store_kernel;
	B_CHECK(cuCtxGetCurrent(&p->ctx));
}

/* The graph of 14 stores, built node by node so its nodes are known. */
static void stores(struct worker *w)
{
	B_CHECK(cuGraphCreate(&w->sgraph, 0));
	for (int i = 0; i < NODES; i++) {
		CUDA_KERNEL_NODE_PARAMS p;
		void *kp[2];
		CUdeviceptr at;
		unsigned int val;

		store_params(w, i, 1, &p, kp, &at, &val);
		B_CHECK(cuGraphAddKernelNode(&w->snodes[i], w->sgraph, i ? &w->snodes[i - 1] : NULL, i ? 1 : 0, &p));
	}
	B_CHECK(cuGraphInstantiate(&w->sexec, w->sgraph, 0));
	B_CHECK(cuGraphCreate(&w->kgraph, 0));
	for (int i = 0; i < NODES; i++) {
		CUDA_KERNEL_NODE_PARAMS p;
		void *kp[2];
		CUdeviceptr at;
		unsigned int val;

		kernel_params(w, i, 1, &p, kp, &at, &val);
		B_CHECK(cuGraphAddKernelNode(&w->knodes[i], w->kgraph, i ? &w->knodes[i - 1] : NULL, i ? 1 : 0, &p));
	}
	B_CHECK(cuGraphInstantiate(&w->kexec, w->kgraph, 0));
}

static void setup(struct worker *w)
{
	CUgraph g;

	w->fn = empty;
	w->store = store_at;
	if (place == CONTEXT) {
		CUcontext own;

		B_CHECK(cuCtxCreate(&own, NULL, 0, device));
		B_CHECK(cuModuleGetFunction(&w->fn, b_module(), "empty"));
		B_CHECK(cuModuleGetFunction(&w->store, b_module(), "store_at"));
	} else {
		B_CHECK(cuCtxSetCurrent(primary));
	}
	if (place == GREEN)
		B_CHECK(cuGreenCtxStreamCreate(&w->s, b_green_all(device), CU_STREAM_NON_BLOCKING, 0));
	else
		B_CHECK(cuStreamCreate(&w->s, CU_STREAM_NON_BLOCKING));
	B_CHECK(cuEventCreate(&w->ev, CU_EVENT_DISABLE_TIMING));
	B_CHECK(cuMemAlloc(&w->dev, COPY_BYTES));
	B_CHECK(cuMemAllocHost(&w->pinned, COPY_BYTES));
	B_CHECK(cuMemHostGetDevicePointer(&w->pinned_dev, w->pinned, 0));
	w->pageable = malloc(COPY_BYTES);
	w->pageable2 = malloc(COPY_BYTES);
	if (!w->pageable || !w->pageable2 || posix_memalign(&w->registered, 4096, COPY_BYTES))
		b_die("out of memory");
	B_CHECK(cuMemHostRegister(w->registered, COPY_BYTES, CU_MEMHOSTREGISTER_PORTABLE));
	memset(w->pageable, 1, COPY_BYTES);
	memset(w->pageable2, 2, COPY_BYTES);
	memset(w->pinned, 3, COPY_BYTES);
	B_CHECK(cuStreamBeginCapture(w->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	for (int i = 0; i < NODES; i++)
		B_CHECK(cuLaunchKernel(w->fn, 1, 1, 1, 1, 1, 1, 0, w->s, NULL, NULL));
	B_CHECK(cuStreamEndCapture(w->s, &g));
	B_CHECK(cuGraphInstantiate(&w->graph, g, 0));
	B_CHECK(cuGraphDestroy(g));
	stores(w);
	for (int i = 0; i < STREAMS; i++)
		B_CHECK(cuStreamCreate(&w->more[i], CU_STREAM_NON_BLOCKING));
}

/* SETS nodes of exec given new arguments (by the library's kernel if
 * kernel), then the launch. */
static void set_and_launch(struct worker *w, CUgraphExec exec, const CUgraphNode *nodes, bool kernel)
{
	w->calls++;
	for (int i = 0; i < SETS; i++) {
		CUDA_KERNEL_NODE_PARAMS p;
		void *kp[2];
		CUdeviceptr at;
		unsigned int val;

		if (kernel)
			kernel_params(w, i * (NODES / SETS), w->calls, &p, kp, &at, &val);
		else
			store_params(w, i * (NODES / SETS), w->calls, &p, kp, &at, &val);
		B_CHECK(cuGraphExecKernelNodeSetParams(exec, nodes[i * (NODES / SETS)], &p));
	}
	B_CHECK(cuGraphLaunch(exec, w->s));
}

static void one(struct worker *w, enum kind k)
{
	switch (k) {
	case LAUNCH:
		B_CHECK(cuLaunchKernel(w->fn, 1, 1, 1, 1, 1, 1, 0, w->s, NULL, NULL));
		break;
	case GRAPH14:
		B_CHECK(cuGraphLaunch(w->graph, w->s));
		break;
	case GRAPH14_ARGS:
		B_CHECK(cuGraphLaunch(w->sexec, w->s));
		break;
	case GRAPH14_SET4:
		set_and_launch(w, w->sexec, w->snodes, false);
		break;
	case GRAPH14_SET4K:
		set_and_launch(w, w->kexec, w->knodes, true);
		break;
	case GRAPH14_16S:
		B_CHECK(cuGraphLaunch(w->sexec, w->more[w->calls++ % STREAMS]));
		break;
	case H2D_PAGEABLE:
		B_CHECK(cuMemcpyHtoDAsync(w->dev, w->pageable, COPY_BYTES, w->s));
		break;
	case H2D_PINNED:
		B_CHECK(cuMemcpyHtoDAsync(w->dev, w->pinned, COPY_BYTES, w->s));
		break;
	case H2D_REGISTERED:
		B_CHECK(cuMemcpyHtoDAsync(w->dev, w->registered, COPY_BYTES, w->s));
		break;
	case D2H_REGISTERED:
		B_CHECK(cuMemcpyDtoHAsync(w->registered, w->dev, 64, w->s));
		break;
	case MEMCPY:
		memcpy(w->pageable2, w->pageable, COPY_BYTES);
		__asm__ volatile("" : : "r"(w->pageable2) : "memory");
		break;
	case D2H_PINNED:
		B_CHECK(cuMemcpyDtoHAsync(w->pinned, w->dev, 64, w->s));
		break;
	case D2H_PAGEABLE:
		B_CHECK(cuMemcpyDtoHAsync(w->pageable2, w->dev, 64, w->s));
		break;
	case WRITE_VALUE:
		B_CHECK(cuStreamWriteValue32(w->s, w->pinned_dev, 7, 0));
		break;
	case EVENT_RECORD:
		B_CHECK(cuEventRecord(w->ev, w->s));
		break;
	case STREAM_QUERY:
		(void)cuStreamQuery(w->s);
		break;
	case LAUNCH_D2H:
	case GRAPH_D2H:
		if (k == LAUNCH_D2H)
			B_CHECK(cuLaunchKernel(w->fn, 1, 1, 1, 1, 1, 1, 0, w->s, NULL, NULL));
		else
			B_CHECK(cuGraphLaunch(w->sexec, w->s));
		B_CHECK(cuMemcpyDtoHAsync(w->pinned, w->dev, 64, w->s));
		B_CHECK(cuStreamWriteValue32(w->s, w->pinned_dev, 7, 0));
		break;
	default:
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	setup(w);
	for (;;) {
		pthread_barrier_wait(&start);
		if (current == KINDS)
			return NULL;
		w->in_calls = 0;
		for (long i = 0; i < iterations; i++) {
			double t0 = b_now();

			one(w, current);
			w->in_calls += b_now() - t0;
			if (i % BATCH == BATCH - 1) {
				B_CHECK(cuStreamSynchronize(w->s));
				if (current == GRAPH14_16S)
					for (int j = 0; j < STREAMS; j++)
						B_CHECK(cuStreamSynchronize(w->more[j]));
			}
		}
		B_CHECK(cuStreamSynchronize(w->s));
		for (int i = 0; i < STREAMS; i++)
			B_CHECK(cuStreamSynchronize(w->more[i]));
		pthread_barrier_wait(&done);
	}
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	const char *where = getenv("DRVCOST_STREAMS");
	struct worker *w;
	CUmodule mod;
	unsigned long (*ioctls)(void), before;

	iterations = argc > 2 ? atol(argv[2]) : 20000;
	if (threads < 1 || threads > 256 || iterations < 1)
		b_die("usage: drvcost [THREADS] [ITERATIONS]");
	if (!where || !strcmp(where, "primary"))
		place = PRIMARY;
	else if (!strcmp(where, "green"))
		place = GREEN;
	else if (!strcmp(where, "context"))
		place = CONTEXT;
	else
		b_die("DRVCOST_STREAMS is primary, green or context, not %s", where);
	device = b_setup(&primary);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&empty, mod, "empty"));
	B_CHECK(cuModuleGetFunction(&store_at, mod, "store_at"));
	{
		char *ptx = b_read_ptx();
		CUlibrary lib;

		if (!ptx)
			b_die("cannot read the kernels' PTX");
		B_CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
		B_CHECK(cuLibraryGetKernel(&store_kernel, lib, "store_at"));
		free(ptx);
	}
	w = calloc((size_t)threads, sizeof(*w));
	if (!w)
		b_die("out of memory");
	pthread_barrier_init(&start, NULL, (unsigned int)threads + 1);
	pthread_barrier_init(&done, NULL, (unsigned int)threads + 1);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]))
			b_die("cannot start a thread");
	printf("threads=%d\niterations=%ld\nstreams=%s\n", threads, iterations,
	       place == GREEN ? "green" : place == CONTEXT ? "context" : "primary");
	/* bench/cpuprof.c's count of ioctl calls, when it is preloaded. */
	ioctls = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "cpuprof_ioctls");
	before = ioctls ? ioctls() : 0;
	for (int k = 0; k <= KINDS; k++) {
		double in_calls = 0;

		current = (enum kind)k;
		pthread_barrier_wait(&start);
		if (k == KINDS)
			break;
		pthread_barrier_wait(&done);
		for (int i = 0; i < threads; i++)
			in_calls += w[i].in_calls;
		printf("%s_us=%.2f\n", kind_names[k], in_calls * 1e6 / ((double)iterations * threads));
		if (ioctls) {
			unsigned long now = ioctls();

			printf("%s_ioctls=%.3f\n", kind_names[k], (double)(now - before) / ((double)iterations * threads));
			before = now;
		}
		fflush(stdout);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(w[i].tid, NULL);
	return 0;
}
