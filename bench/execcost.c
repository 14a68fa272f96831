// SPDX-License-Identifier: MIT
/*
 * execcost [COUNT] [NODES]
 *
 * What an executable graph costs to keep and to change, which bounds how
 * many a server replaying its clients' chunks of launches (see
 * src/server/replay.h) may keep per client: a chain of NODES (default 8)
 * saxpy kernel nodes, instantiated COUNT times (default 1000). Prints the
 * device memory (cuMemGetInfo) and the process's resident memory each
 * executable graph took, the time an instantiation takes, the time
 * cuGraphExecKernelNodeSetParams takes per node (new pointer arguments,
 * as a replay of another layer's chunk sets them), and a graph launch's
 * time on the CPU. Every executable graph is launched once; every 97th
 * one's result is checked (each node doubles y: y = 2^NODES x).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define N 4096

struct saxpy_args {
	float a;
	CUdeviceptr x, y;
	int n;
};

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 1000, nodes = argc > 2 ? atoi(argv[2]) : 8;
	CUDA_KERNEL_NODE_PARAMS np;
	struct saxpy_args sa = { 1.0f, 0, 0, N };
	void *kp[] = { &sa.a, &sa.x, &sa.y, &sa.n };
	CUgraphNode *node;
	CUgraphExec *exec;
	CUdeviceptr x, y;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	CUgraph g;
	CUdevice dev;
	size_t free0, free1, total;
	long rss0, rss1;
	double t0, t_inst, t_set, t_launch;
	float hx[N], hy[N];

	if (count < 1 || nodes < 1)
		b_die("usage: execcost [COUNT] [NODES]");
	node = calloc((size_t)nodes, sizeof(*node));
	exec = calloc((size_t)count, sizeof(*exec));
	if (!node || !exec)
		b_die("out of memory");
	B_CHECK(cuInit(0));
	B_CHECK(cuDeviceGet(&dev, 0));
	B_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	B_CHECK(cuCtxSetCurrent(ctx));
	B_CHECK(cuModuleLoadData(&mod, b_read_ptx()));
	B_CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));
	B_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	B_CHECK(cuMemAlloc(&x, N * sizeof(float)));
	B_CHECK(cuMemAlloc(&y, N * sizeof(float)));
	for (int i = 0; i < N; i++)
		hx[i] = (float)(i % 97) + 1.0f;
	B_CHECK(cuMemcpyHtoD(x, hx, sizeof(hx)));

	/* saxpy: y = a * x + y, with x = y: each node doubles y (a = 1). */
	sa.x = y;
	sa.y = y;
	memset(&np, 0, sizeof(np));
	np.func = fn;
	np.gridDimX = N / 256;
	np.gridDimY = np.gridDimZ = 1;
	np.blockDimX = 256;
	np.blockDimY = np.blockDimZ = 1;
	np.kernelParams = kp;
	B_CHECK(cuGraphCreate(&g, 0));
	for (int i = 0; i < nodes; i++)
		B_CHECK(cuGraphAddKernelNode(&node[i], g, i ? &node[i - 1] : NULL, i ? 1 : 0, &np));

	B_CHECK(cuCtxSynchronize());
	B_CHECK(cuMemGetInfo(&free0, &total));
	rss0 = rss_kib();
	t0 = b_now();
	for (int i = 0; i < count; i++)
		B_CHECK(cuGraphInstantiateWithFlags(&exec[i], g, 0));
	t_inst = b_now() - t0;
	B_CHECK(cuMemGetInfo(&free1, &total));
	rss1 = rss_kib();

	/* Every node of every executable graph given the pointers again (as
	 * another layer's chunk would give its own), then each launched once
	 * on y = x and checked. */
	t0 = b_now();
	for (int i = 0; i < count; i++)
		for (int k = 0; k < nodes; k++)
			B_CHECK(cuGraphExecKernelNodeSetParams(exec[i], node[k], &np));
	t_set = b_now() - t0;
	t_launch = 0;
	for (int i = 0; i < count; i++) {
		double want_mul = 1.0;

		B_CHECK(cuMemcpyDtoDAsync(y, x, N * sizeof(float), s));
		t0 = b_now();
		B_CHECK(cuGraphLaunch(exec[i], s));
		t_launch += b_now() - t0;
		if (i % 97 == 0 || i == count - 1) {
			B_CHECK(cuMemcpyDtoHAsync(hy, y, sizeof(hy), s));
			B_CHECK(cuStreamSynchronize(s));
			for (int k = 0; k < nodes; k++)
				want_mul *= 2.0;
			for (int j = 0; j < N; j++)
				if (hy[j] != (float)(hx[j] * want_mul))
					b_die("graph %d: y[%d] = %g, expected %g", i, j, hy[j], hx[j] * want_mul);
		}
	}
	B_CHECK(cuStreamSynchronize(s));
	printf("execs=%d\nnodes=%d\n", count, nodes);
	printf("device_bytes_per_exec=%.0f\n", (double)(free0 - free1) / count);
	printf("host_kib_per_exec=%.1f\n", (double)(rss1 - rss0) / count);
	printf("instantiate_us=%.2f\n", t_inst * 1e6 / count);
	printf("set_params_us_per_node=%.3f\n", t_set * 1e6 / count / nodes);
	printf("graph_launch_us=%.2f\n", t_launch * 1e6 / count);
	for (int i = 0; i < count; i++)
		B_CHECK(cuGraphExecDestroy(exec[i]));
	B_CHECK(cuGraphDestroy(g));
	return 0;
}
