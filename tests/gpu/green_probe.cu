// SPDX-License-Identifier: MIT
/*
 * tests/gpu/green_probe.cu: what the real driver allows with green contexts,
 * asked once so the server's SM limits rest on answers rather than guesses.
 * Natively, on one device: how the SMs split (granularity, groups), what a
 * green context costs (time, device memory), whether work the server queues
 * with the primary context current runs on a green context's stream —
 * kernels of modules and libraries loaded in the primary context, graphs,
 * copies, memsets, stream memory operations, host functions, events waited
 * on across contexts — and whether kernels then really stay on the green
 * context's SMs (each block records %smid) and how much longer a full-GPU
 * spin grid takes. Prints one line per answer. Build and run:
 *   nvcc -o /tmp/green_probe tests/gpu/green_probe.cu -lcuda && /tmp/green_probe
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(x) try_call((x), #x, __LINE__)
#define MUST(x) do { if (TRY(x) != CUDA_SUCCESS) exit(1); } while (0)

static CUresult try_call(CUresult r, const char *what, int line)
{
	if (r != CUDA_SUCCESS) {
		const char *name = "?";
		cuGetErrorName(r, &name);
		printf("  line %d: %s -> %s\n", line, what, name);
	}
	return r;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

extern "C" __global__ void smid(unsigned int *out)
{
	if (threadIdx.x == 0) {
		unsigned int s;
		asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
		long long t0 = clock64();
		while (clock64() - t0 < 20000)
			;
		out[blockIdx.x] = s + 1;
	}
}

extern "C" __global__ void spin(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

static int distinct(const unsigned int *v, int n, int *zeros)
{
	static unsigned char seen[4096];
	int d = 0;
	memset(seen, 0, sizeof(seen));
	*zeros = 0;
	for (int i = 0; i < n; i++) {
		if (!v[i]) { (*zeros)++; continue; }
		if (v[i] < 4096 && !seen[v[i]]) { seen[v[i]] = 1; d++; }
	}
	return d;
}

static CUfunction f_smid, f_spin, k_smid;
static CUdeviceptr d_ids;
enum { NBLK = 4096 };

/* Launches smid on s and reports how many distinct SMs ran it. */
static int sms_used(const char *label, CUfunction f, CUstream s)
{
	static unsigned int h[NBLK];
	void *args[] = { &d_ids };
	int zeros, d;
	CUresult r;

	memset(h, 0, sizeof(h));
	if (TRY(cuMemsetD32(d_ids, 0, NBLK)) != CUDA_SUCCESS)
		return -1;
	r = TRY(cuLaunchKernel(f, NBLK, 1, 1, 32, 1, 1, 0, s, args, NULL));
	if (r == CUDA_SUCCESS)
		r = TRY(cuStreamSynchronize(s));
	if (r == CUDA_SUCCESS)
		r = TRY(cuMemcpyDtoH(h, d_ids, sizeof(h)));
	if (r != CUDA_SUCCESS) {
		printf("%-48s FAILED\n", label);
		return -1;
	}
	d = distinct(h, NBLK, &zeros);
	printf("%-48s ok: %d SMs, %d blocks unwritten\n", label, d, zeros);
	return d;
}

static double spin_ms(CUstream s, int blocks)
{
	long long cycles = 2000000;
	void *args[] = { &cycles };
	double t0;

	MUST(cuStreamSynchronize(s));
	t0 = now();
	MUST(cuLaunchKernel(f_spin, blocks, 1, 1, 1024, 1, 1, 0, s, args, NULL));
	MUST(cuStreamSynchronize(s));
	return (now() - t0) * 1e3;
}

static void host_fn(void *p) { *(volatile int *)p = 42; }

int main(int argc, char **argv)
{
	const char *cubin = argc > 1 ? argv[1] : "/tmp/green_probe.cubin";
	CUdevice dev;
	CUcontext primary, gctx;
	CUdevResource all, groups[64], rem;
	CUdevResourceDesc desc;
	CUgreenCtx g[16];
	CUstream ps, gs, gs2;
	CUmodule mod;
	CUlibrary lib;
	CUkernel kern;
	size_t free0, free1, total;
	unsigned int n;
	int nsm, pct_list[] = { 25, 50 };
	double t0;

	MUST(cuInit(0));
	MUST(cuDeviceGet(&dev, 0));
	MUST(cuDevicePrimaryCtxRetain(&primary, dev));
	MUST(cuCtxSetCurrent(primary));
	MUST(cuDeviceGetAttribute(&nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	MUST(cuModuleLoad(&mod, cubin));
	MUST(cuModuleGetFunction(&f_smid, mod, "smid"));
	MUST(cuModuleGetFunction(&f_spin, mod, "spin"));
	MUST(cuLibraryLoadFromFile(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
	MUST(cuLibraryGetKernel(&kern, lib, "smid"));
	k_smid = (CUfunction)kern;
	MUST(cuMemAlloc(&d_ids, NBLK * sizeof(unsigned int)));
	MUST(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));

	MUST(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
	printf("device: %d SMs (attribute %d), min partition %u, co-scheduled alignment %u\n", all.sm.smCount, nsm,
	       all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);
	for (unsigned int flags = 0; flags < 2; flags++) {
		unsigned int counts[] = { 1, 2, 4, 8, 16, 33, 40, 66, 99, 132 };
		for (unsigned int i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			n = 64;
			memset(&rem, 0, sizeof(rem));
			if (TRY(cuDevSmResourceSplitByCount(groups, &n, &all, &rem, flags, counts[i])) != CUDA_SUCCESS)
				continue;
			printf("split flags %u min %3u: %2u groups of %3u SMs, remainder %u\n", flags, counts[i], n,
			       n ? groups[0].sm.smCount : 0, rem.sm.smCount);
		}
	}

	/* One green context of about a quarter, its cost. */
	n = 64;
	MUST(cuDevSmResourceSplitByCount(groups, &n, &all, &rem, 0, (unsigned int)(all.sm.smCount / 4)));
	MUST(cuMemGetInfo(&free0, &total));
	t0 = now();
	MUST(cuDevResourceGenerateDesc(&desc, &groups[0], 1));
	MUST(cuGreenCtxCreate(&g[0], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	printf("green context of %u SMs: created in %.1f us\n", groups[0].sm.smCount, (now() - t0) * 1e6);
	t0 = now();
	MUST(cuGreenCtxStreamCreate(&gs, g[0], CU_STREAM_NON_BLOCKING, -1));
	printf("green stream created in %.1f us\n", (now() - t0) * 1e6);
	MUST(cuMemGetInfo(&free1, &total));
	printf("device memory for one green context + stream: %.1f MiB\n", (double)(free0 - free1) / 1048576.0);
	{
		int prio = 99;
		TRY(cuStreamGetPriority(gs, &prio));
		printf("green stream priority: %d\n", prio);
	}

	printf("-- with the primary context current\n");
	sms_used("primary stream, module function", f_smid, ps);
	sms_used("green stream, module function", f_smid, gs);
	sms_used("green stream, library kernel", k_smid, gs);
	{
		CUcontext cur = NULL;
		TRY(cuCtxGetCurrent(&cur));
		printf("current context still primary: %s\n", cur == primary ? "yes" : "no");
	}
	/* Copies, memsets, stream memory operations, host functions. */
	{
		static unsigned int src[1024], back[1024];
		volatile int flag = 0;
		CUevent ev;
		CUresult r;
		for (int i = 0; i < 1024; i++)
			src[i] = 0x1000 + i;
		r = TRY(cuMemcpyHtoDAsync(d_ids, src, sizeof(src), gs));
		printf("%-48s %s\n", "green stream, cuMemcpyHtoDAsync", r ? "FAILED" : "ok");
		r = TRY(cuMemsetD32Async(d_ids + 4096, 7, 1024, gs));
		printf("%-48s %s\n", "green stream, cuMemsetD32Async", r ? "FAILED" : "ok");
		r = TRY(cuStreamWriteValue32(gs, d_ids + 8, 0xabcd, 0));
		printf("%-48s %s\n", "green stream, cuStreamWriteValue32", r ? "FAILED" : "ok");
		r = TRY(cuLaunchHostFunc(gs, host_fn, (void *)&flag));
		printf("%-48s %s\n", "green stream, cuLaunchHostFunc", r ? "FAILED" : "ok");
		MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
		r = TRY(cuEventRecord(ev, gs));
		if (!r)
			r = TRY(cuStreamWaitEvent(ps, ev, 0));
		printf("%-48s %s\n", "event on green stream, primary stream waits", r ? "FAILED" : "ok");
		r = TRY(cuEventRecord(ev, ps));
		if (!r)
			r = TRY(cuStreamWaitEvent(gs, ev, 0));
		printf("%-48s %s\n", "event on primary stream, green stream waits", r ? "FAILED" : "ok");
		MUST(cuStreamSynchronize(ps));
		MUST(cuStreamSynchronize(gs));
		MUST(cuMemcpyDtoH(back, d_ids, sizeof(back)));
		src[2] = 0xabcd;
		printf("%-48s %s\n", "copy + write value landed", memcmp(src, back, sizeof(back)) ? "NO" : "yes");
		MUST(cuMemcpyDtoH(back, d_ids + 4096, sizeof(back)));
		printf("%-48s %s\n", "memset landed", back[0] == 7 && back[1023] == 7 ? "yes" : "NO");
		printf("%-48s %s\n", "host function ran", flag == 42 ? "yes" : "NO");
		cuEventDestroy(ev);
	}
	/* A graph captured on a primary stream, launched on the green stream. */
	{
		CUgraph graph;
		CUgraphExec exec;
		void *args[] = { &d_ids };
		static unsigned int h[NBLK];
		int zeros;
		CUresult r;
		MUST(cuMemsetD32(d_ids, 0, NBLK));
		MUST(cuStreamBeginCapture(ps, CU_STREAM_CAPTURE_MODE_RELAXED));
		MUST(cuLaunchKernel(f_smid, NBLK, 1, 1, 32, 1, 1, 0, ps, args, NULL));
		MUST(cuStreamEndCapture(ps, &graph));
		MUST(cuGraphInstantiate(&exec, graph, 0));
		r = TRY(cuGraphLaunch(exec, gs));
		if (!r)
			r = TRY(cuStreamSynchronize(gs));
		if (!r)
			r = TRY(cuMemcpyDtoH(h, d_ids, sizeof(h)));
		if (r)
			printf("%-48s FAILED\n", "graph on green stream");
		else
			printf("%-48s ok: %d SMs\n", "graph on green stream", distinct(h, NBLK, &zeros));
	}
	/* The same graph instantiated while the green context is current. */
	{
		CUcontext gc;
		CUgraph graph;
		CUgraphExec exec;
		void *args[] = { &d_ids };
		static unsigned int h[NBLK];
		int zeros;
		CUresult r;
		MUST(cuCtxFromGreenCtx(&gc, g[0]));
		MUST(cuStreamBeginCapture(ps, CU_STREAM_CAPTURE_MODE_RELAXED));
		MUST(cuLaunchKernel(f_smid, NBLK, 1, 1, 32, 1, 1, 0, ps, args, NULL));
		MUST(cuStreamEndCapture(ps, &graph));
		MUST(cuCtxSetCurrent(gc));
		r = TRY(cuGraphInstantiate(&exec, graph, 0));
		MUST(cuCtxSetCurrent(primary));
		for (int where = 0; where < 2 && !r; where++) {
			MUST(cuMemsetD32(d_ids, 0, NBLK));
			r = TRY(cuGraphLaunch(exec, where ? ps : gs));
			if (!r)
				r = TRY(cuStreamSynchronize(where ? ps : gs));
			if (!r)
				r = TRY(cuMemcpyDtoH(h, d_ids, sizeof(h)));
			printf("%-48s %s: %d SMs\n", where ? "graph instantiated in green, primary stream" :
			       "graph instantiated in green, green stream", r ? "FAILED" : "ok",
			       r ? 0 : distinct(h, NBLK, &zeros));
		}
		/* Instantiated in the primary, launched with the green current. */
		MUST(cuGraphInstantiate(&exec, graph, 0));
		MUST(cuCtxSetCurrent(gc));
		MUST(cuMemsetD32(d_ids, 0, NBLK));
		r = TRY(cuGraphLaunch(exec, gs));
		if (!r)
			r = TRY(cuStreamSynchronize(gs));
		MUST(cuCtxSetCurrent(primary));
		if (!r)
			r = TRY(cuMemcpyDtoH(h, d_ids, sizeof(h)));
		printf("%-48s %s: %d SMs\n", "graph from primary, launched with green current", r ? "FAILED" : "ok",
		       r ? 0 : distinct(h, NBLK, &zeros));
	}
	/* Graphs whose kernels come from the green context: captured on its
	 * stream, or added with it named. */
	{
		CUcontext gc;
		void *args[] = { &d_ids };
		static unsigned int h[NBLK];
		const char *label[] = { "captured on green stream (module function)", "captured on green stream (library kernel)",
					"node: library kernel + green ctx", "node: function got while green current" };
		MUST(cuCtxFromGreenCtx(&gc, g[0]));
		for (int v = 0; v < 4; v++) {
			CUgraph graph = NULL;
			CUgraphExec exec;
			CUresult r = CUDA_SUCCESS;
			int zeros;
			if (v < 2) {
				MUST(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_RELAXED));
				r = TRY(cuLaunchKernel(v ? k_smid : f_smid, NBLK, 1, 1, 32, 1, 1, 0, gs, args, NULL));
				MUST(cuStreamEndCapture(gs, &graph));
			} else {
				CUDA_KERNEL_NODE_PARAMS kp;
				CUgraphNode node;
				memset(&kp, 0, sizeof(kp));
				if (v == 2) {
					kp.kern = kern;
					kp.ctx = gc;
				} else {
					MUST(cuCtxSetCurrent(gc));
					r = TRY(cuKernelGetFunction(&kp.func, kern));
					MUST(cuCtxSetCurrent(primary));
				}
				kp.gridDimX = NBLK;
				kp.gridDimY = kp.gridDimZ = 1;
				kp.blockDimX = 32;
				kp.blockDimY = kp.blockDimZ = 1;
				kp.kernelParams = args;
				MUST(cuGraphCreate(&graph, 0));
				if (!r)
					r = TRY(cuGraphAddKernelNode(&node, graph, NULL, 0, &kp));
			}
			if (!r)
				r = TRY(cuGraphInstantiate(&exec, graph, 0));
			for (int where = 0; where < 2 && !r; where++) {
				MUST(cuMemsetD32(d_ids, 0, NBLK));
				r = TRY(cuGraphLaunch(exec, where ? ps : gs));
				if (!r)
					r = TRY(cuStreamSynchronize(where ? ps : gs));
				if (!r)
					r = TRY(cuMemcpyDtoH(h, d_ids, sizeof(h)));
				printf("%-44s %-7s %s: %d SMs\n", label[v], where ? "primary" : "green", r ? "FAILED" : "ok",
				       r ? 0 : distinct(h, NBLK, &zeros));
			}
			if (r)
				printf("%-44s FAILED\n", label[v]);
		}
	}
	/* One green context over non-adjacent groups of one split. */
	{
		CUdevResource pick[4];
		CUgreenCtx gg;
		CUstream st;
		n = 64;
		MUST(cuDevSmResourceSplitByCount(groups, &n, &all, &rem, 0, all.sm.minSmPartitionSize));
		for (int i = 0; i < 4; i++)
			pick[i] = groups[2 * i];
		if (TRY(cuDevResourceGenerateDesc(&desc, pick, 4)) == CUDA_SUCCESS &&
		    TRY(cuGreenCtxCreate(&gg, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)) == CUDA_SUCCESS) {
			MUST(cuGreenCtxStreamCreate(&st, gg, CU_STREAM_NON_BLOCKING, 0));
			printf("groups 0,2,4,6 of %u x %u SMs: ", n, groups[0].sm.smCount);
			sms_used("one green context", f_smid, st);
			{
				double full = spin_ms(ps, 4 * nsm), t;
				full = spin_ms(ps, 4 * nsm);
				t = spin_ms(st, 4 * nsm);
				t = spin_ms(st, 4 * nsm);
				printf("spin grid on them: %.2f ms, %.2fx the whole device\n", t, t / full);
			}
			cuStreamDestroy(st);
		} else {
			printf("green context over non-adjacent groups: FAILED\n");
		}
	}
	/* A stream made with the green context current, then primary again. */
	MUST(cuCtxFromGreenCtx(&gctx, g[0]));
	MUST(cuCtxSetCurrent(gctx));
	MUST(cuStreamCreate(&gs2, CU_STREAM_NON_BLOCKING));
	printf("-- with the green context current\n");
	sms_used("green stream, module function", f_smid, gs);
	sms_used("null stream, module function", f_smid, NULL);
	MUST(cuCtxSetCurrent(primary));
	printf("-- primary current again\n");
	sms_used("stream made while green was current", f_smid, gs2);
	sms_used("primary stream", f_smid, ps);

	/* Spin grids: one block per SM, a few waves. */
	printf("-- a grid of %d blocks x 1024 threads spinning 2M cycles each\n", 4 * nsm);
	{
		double full = spin_ms(ps, 4 * nsm);
		full = spin_ms(ps, 4 * nsm);
		printf("primary: %.2f ms\n", full);
		for (unsigned int i = 0; i < 2; i++) {
			CUgreenCtx gg;
			CUstream st;
			unsigned int want = (unsigned int)(all.sm.smCount * pct_list[i] / 100);
			double t;
			n = 64;
			MUST(cuDevSmResourceSplitByCount(groups, &n, &all, &rem, 0, want));
			MUST(cuDevResourceGenerateDesc(&desc, &groups[0], 1));
			MUST(cuGreenCtxCreate(&gg, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
			MUST(cuGreenCtxStreamCreate(&st, gg, CU_STREAM_NON_BLOCKING, 0));
			t = spin_ms(st, 4 * nsm);
			t = spin_ms(st, 4 * nsm);
			printf("%d%% (%u SMs): %.2f ms, %.2fx\n", pct_list[i], groups[0].sm.smCount, t, t / full);
			cuStreamDestroy(st);
			cuGreenCtxDestroy(gg);
		}
	}

	/* Many green contexts: device memory and time each. */
	{
		CUstream st[16];
		MUST(cuMemGetInfo(&free0, &total));
		n = 64;
		MUST(cuDevSmResourceSplitByCount(groups, &n, &all, &rem, 0, 8));
		t0 = now();
		for (int i = 1; i < 16; i++) {
			MUST(cuDevResourceGenerateDesc(&desc, &groups[i % n], 1));
			MUST(cuGreenCtxCreate(&g[i], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
			MUST(cuGreenCtxStreamCreate(&st[i], g[i], CU_STREAM_NON_BLOCKING, 0));
		}
		printf("15 more green contexts + a stream each: %.1f us each\n", (now() - t0) * 1e6 / 15);
		MUST(cuMemGetInfo(&free1, &total));
		printf("device memory for them: %.1f MiB\n", (double)(free0 - free1) / 1048576.0);
		/* Same group twice: two green contexts on the same SMs. */
		MUST(cuDevResourceGenerateDesc(&desc, &groups[1], 1));
		{
			CUgreenCtx twin;
			CUresult r = TRY(cuGreenCtxCreate(&twin, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
			printf("%-48s %s\n", "second green context on the same group", r ? "FAILED" : "ok");
			if (!r)
				cuGreenCtxDestroy(twin);
		}
		t0 = now();
		for (int i = 1; i < 16; i++) {
			MUST(cuStreamDestroy(st[i]));
			MUST(cuGreenCtxDestroy(g[i]));
		}
		printf("destroyed in %.1f us each\n", (now() - t0) * 1e6 / 15);
		MUST(cuMemGetInfo(&free1, &total));
		printf("device memory after destroying them: %.1f MiB kept\n", (double)(free0 - free1) / 1048576.0);
	}
	MUST(cuStreamDestroy(gs));
	MUST(cuStreamDestroy(gs2));
	MUST(cuGreenCtxDestroy(g[0]));
	printf("probe done\n");
	return 0;
}
