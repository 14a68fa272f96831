// SPDX-License-Identifier: MIT
/*
 * CUDA graphs and stream capture.
 *
 * Capture: on a stream of its own, a kernel that transforms a buffer in
 * place, a device-to-device copy of it, and a memset of a second buffer,
 * with a fork to a second stream and back (events); the graph it ends in is
 * instantiated and launched three times, each on fresh random input copied
 * in before, and every element checked. While capturing: the stream reports
 * itself capturing with one open dependency; a synchronize fails and spoils
 * the capture; an unjoined fork spoils the end; an allocation where the
 * capture mode forbids one fails, and is allowed in relaxed mode; the
 * legacy stream cannot be captured.
 *
 * Built by hand: a memset node, a kernel node after it, an empty node,
 * edges, the graph's nodes, roots and edges read back, a clone and a node
 * found in it, kernel parameters read back and changed (in the graph and in
 * the executable graph), a node disabled, an update that keeps the topology
 * and one that does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N 4096

static CUfunction affine, iota;
static uint64_t rng;

/* affine_u32(p, mul, add, n): p[i] = p[i] * mul + add. */
static void affine_params(void **kp, CUdeviceptr *p, unsigned *mul, unsigned *add, int *n)
{
	kp[0] = p;
	kp[1] = mul;
	kp[2] = add;
	kp[3] = n;
}

static void fill(unsigned *h)
{
	t_fill_bytes(h, N * sizeof(*h), &rng);
}

static void capture_graph(CUcontext ctx)
{
	unsigned mul = 2654435761u, add = 0x9e37u, zval = 0x5a5a1234u, *in = malloc(N * 4), *out = malloc(N * 4);
	CUdeviceptr x, y, z;
	CUstream s, s2;
	CUevent fork, back;
	CUgraph g;
	CUgraphExec ge;
	CUstreamCaptureStatus st;
	const CUgraphNode *deps;
	size_t ndeps = 9;
	cuuint64_t id = 0;
	int n = N;
	void *kp[4];

	REQUIRE(in && out, "out of memory");
	REQUIRE_CU(cuMemAlloc(&x, N * 4));
	REQUIRE_CU(cuMemAlloc(&y, N * 4));
	REQUIRE_CU(cuMemAlloc(&z, N * 4));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuEventCreate(&back, CU_EVENT_DISABLE_TIMING));

	REQUIRE_CU(cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "a fresh stream reports capture status %d", st);
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	affine_params(kp, &x, &mul, &add, &n);
	REQUIRE_CU(t_launch(affine, N / 256, 256, s, kp));
	REQUIRE_CU(cuStreamGetCaptureInfo(s, &st, &id, NULL, &deps, NULL, &ndeps));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && ndeps == 1,
	      "while capturing: status %d, id %llu, %zu open dependencies (want active, an id, 1)", st,
	      (unsigned long long)id, ndeps);
	/* Fork: the second stream copies while the first sets z; then join. */
	REQUIRE_CU(cuEventRecord(fork, s));
	REQUIRE_CU(cuStreamWaitEvent(s2, fork, 0));
	REQUIRE_CU(cuStreamIsCapturing(s2, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "a stream that waited for the capture is not in it (%d)", st);
	REQUIRE_CU(cuMemcpyDtoDAsync(y, x, N * 4, s2));
	REQUIRE_CU(cuMemsetD32Async(z, zval, N, s));
	REQUIRE_CU(cuEventRecord(back, s2));
	REQUIRE_CU(cuStreamWaitEvent(s, back, 0));
	REQUIRE_CU(cuStreamEndCapture(s, &g));
	REQUIRE(g, "capture ended without a graph");
	REQUIRE_CU(cuStreamIsCapturing(s2, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "a joined stream still captures after the end (%d)", st);
	{
		size_t nn = 0;

		REQUIRE_CU(cuGraphGetNodes(g, NULL, &nn));
		CHECK(nn == 3, "the captured graph has %zu nodes, want 3 (kernel, copy, memset)", nn);
	}
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	for (int round = 0; round < 3; round++) {
		fill(in);
		REQUIRE_CU(cuMemcpyHtoD(x, in, N * 4));
		REQUIRE_CU(cuMemsetD32(z, 0, N));
		REQUIRE_CU(cuGraphLaunch(ge, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		REQUIRE_CU(cuMemcpyDtoH(out, y, N * 4));
		for (int i = 0; i < N; i++)
			if (!CHECK(out[i] == in[i] * mul + add, "round %d: y[%d] = %#x, want %#x", round, i, out[i],
				   in[i] * mul + add))
				break;
		REQUIRE_CU(cuMemcpyDtoH(out, z, N * 4));
		for (int i = 0; i < N; i++)
			if (!CHECK(out[i] == zval, "round %d: z[%d] = %#x, want %#x", round, i, out[i], zval))
				break;
	}
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));

	/* A synchronize while capturing fails and spoils the capture. */
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	REQUIRE_CU(t_launch(affine, N / 256, 256, s, kp));
	CHECK_CU(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	g = (CUgraph)1;
	CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(g == NULL, "an invalidated capture gave a graph");

	/* A fork never joined back spoils the end. */
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	REQUIRE_CU(cuEventRecord(fork, s));
	REQUIRE_CU(cuStreamWaitEvent(s2, fork, 0));
	REQUIRE_CU(cuMemsetD32Async(z, 1, N, s2));
	CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);

	/* Allocating is unsafe while this thread captures in global mode; in
	 * relaxed mode it is allowed. */
	{
		CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		CUdeviceptr tmp;

		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		REQUIRE_CU(t_launch(affine, N / 256, 256, s, kp));
		REQUIRE_CU(cuThreadExchangeStreamCaptureMode(&mode));
		REQUIRE_CU(cuMemAlloc(&tmp, 4096));
		REQUIRE_CU(cuMemFree(tmp));
		REQUIRE_CU(cuThreadExchangeStreamCaptureMode(&mode));
		CHECK(mode == CU_STREAM_CAPTURE_MODE_RELAXED, "the thread's capture mode came back as %d", mode);
		CHECK_CU(cuMemAlloc(&tmp, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
		CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	}
	CHECK_CU(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
		 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);

	REQUIRE_CU(cuEventDestroy(fork));
	REQUIRE_CU(cuEventDestroy(back));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuStreamDestroy(s2));
	REQUIRE_CU(cuMemFree(x));
	REQUIRE_CU(cuMemFree(y));
	REQUIRE_CU(cuMemFree(z));
	free(in);
	free(out);
	(void)ctx;
}

static void explicit_graph(void)
{
	unsigned base = (unsigned)t_rand(&rng), mul = 0x01000193u, add = (unsigned)t_rand(&rng), *out = malloc(N * 4);
	unsigned zval = 0x77aa0011u;
	CUDA_KERNEL_NODE_PARAMS kpar, got;
	CUDA_MEMSET_NODE_PARAMS mpar;
	CUgraphNode ms, k1, k2, e, nodes[8], roots[8], from[8], to[8], found;
	CUdeviceptr p, z;
	CUgraph g, g2, clone;
	CUgraphExec ge;
	CUgraphExecUpdateResultInfo info;
	CUgraphNodeType type;
	CUstream s;
	size_t nn, nr, ne;
	CUresult r;
	int n = N;
	void *kp[4], *ip[3];

	REQUIRE(out, "out of memory");
	REQUIRE_CU(cuMemAlloc(&p, N * 4));
	REQUIRE_CU(cuMemAlloc(&z, N * 4));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuGraphCreate(&g, 0));

	/* z = zval; p = base + i; p = p * mul + add; then an empty node. */
	memset(&mpar, 0, sizeof(mpar));
	mpar.dst = z;
	mpar.elementSize = 4;
	mpar.width = N;
	mpar.height = 1;
	mpar.pitch = N * 4;
	mpar.value = zval;
	REQUIRE_CU(cuGraphAddMemsetNode(&ms, g, NULL, 0, &mpar, NULL));
	ip[0] = &p;
	ip[1] = &base;
	ip[2] = &n;
	memset(&kpar, 0, sizeof(kpar));
	kpar.func = iota;
	kpar.gridDimX = N / 256;
	kpar.gridDimY = kpar.gridDimZ = 1;
	kpar.blockDimX = 256;
	kpar.blockDimY = kpar.blockDimZ = 1;
	kpar.kernelParams = ip;
	REQUIRE_CU(cuGraphAddKernelNode(&k1, g, &ms, 1, &kpar));
	affine_params(kp, &p, &mul, &add, &n);
	kpar.func = affine;
	kpar.kernelParams = kp;
	REQUIRE_CU(cuGraphAddKernelNode(&k2, g, NULL, 0, &kpar));
	REQUIRE_CU(cuGraphAddDependencies(g, &k1, &k2, NULL, 1));
	REQUIRE_CU(cuGraphAddEmptyNode(&e, g, &k2, 1));

	nn = 8;
	REQUIRE_CU(cuGraphGetNodes(g, nodes, &nn));
	CHECK(nn == 4, "the graph has %zu nodes, want 4", nn);
	nr = 8;
	REQUIRE_CU(cuGraphGetRootNodes(g, roots, &nr));
	CHECK(nr == 1 && roots[0] == ms, "%zu roots (want 1, the memset node)", nr);
	ne = 8;
	REQUIRE_CU(cuGraphGetEdges(g, from, to, NULL, &ne));
	CHECK(ne == 3, "the graph has %zu edges, want 3", ne);
	REQUIRE_CU(cuGraphNodeGetType(k2, &type));
	CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL, "a kernel node has type %d", type);
	/* A cycle: the driver refuses it here or at instantiation. */
	r = cuGraphAddDependencies(g, &e, &ms, NULL, 1);
	if (r == CUDA_SUCCESS) {
		CHECK(cuGraphInstantiateWithFlags(&ge, g, 0) != CUDA_SUCCESS, "a graph with a cycle was instantiated");
		REQUIRE_CU(cuGraphRemoveDependencies(g, &e, &ms, NULL, 1));
	} else {
		CHECK(r == CUDA_ERROR_INVALID_VALUE, "a cycle refused with %s", t_errname(r));
	}

	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphKernelNodeGetParams(k2, &got));
	CHECK(got.func == affine && got.gridDimX == N / 256 && got.blockDimX == 256 && got.kernelParams &&
	      *(unsigned *)got.kernelParams[1] == mul && *(unsigned *)got.kernelParams[2] == add,
	      "kernel node parameters read back wrong");

	/* Its picture in Graphviz's language, in a file the program names. */
	{
		char path[] = "/tmp/t_graph_dot.XXXXXX", text[256] = "";
		int fd = mkstemp(path);
		FILE *f;

		REQUIRE(fd >= 0, "mkstemp");
		close(fd);
		REQUIRE_CU(cuGraphDebugDotPrint(g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
		f = fopen(path, "r");
		REQUIRE(f, "the dot file %s is missing", path);
		CHECK(fread(text, 1, sizeof(text) - 1, f) > 0 && strstr(text, "digraph"), "the dot file reads '%.60s'",
		      text);
		fclose(f);
		unlink(path);
		CHECK_CU(cuGraphDebugDotPrint(g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	}
	REQUIRE_CU(cuGraphClone(&clone, g));
	REQUIRE_CU(cuGraphNodeFindInClone(&found, k2, clone));
	REQUIRE_CU(cuGraphNodeGetType(found, &type));
	CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL && found != k2, "the clone's copy of a kernel node is wrong");

	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(out, p, N * 4));
	for (int i = 0; i < N; i++)
		if (!CHECK(out[i] == (base + (unsigned)i) * mul + add, "p[%d] = %#x, want %#x", i, out[i],
			   (base + (unsigned)i) * mul + add))
			break;
	REQUIRE_CU(cuMemcpyDtoH(out, z, N * 4));
	CHECK(out[0] == zval && out[N - 1] == zval, "the memset node did not run");

	/* New parameters in the executable graph only. */
	add = (unsigned)t_rand(&rng);
	REQUIRE_CU(cuGraphExecKernelNodeSetParams(ge, k2, &kpar));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(out, p, N * 4));
	CHECK(out[7] == (base + 7u) * mul + add, "after an executable-graph update p[7] = %#x, want %#x", out[7],
	      (base + 7u) * mul + add);

	/* The transform disabled: p is the iota alone. */
	REQUIRE_CU(cuGraphNodeSetEnabled(ge, k2, 0));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(out, p, N * 4));
	CHECK(out[9] == base + 9u, "with the node disabled p[9] = %#x, want %#x", out[9], base + 9u);
	REQUIRE_CU(cuGraphNodeSetEnabled(ge, k2, 1));

	/* An update from a graph of the same shape takes; from another, not. */
	REQUIRE_CU(cuGraphExecUpdate(ge, clone, &info));
	CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update from the clone: result %d", info.result);
	REQUIRE_CU(cuGraphCreate(&g2, 0));
	REQUIRE_CU(cuGraphAddEmptyNode(&e, g2, NULL, 0));
	CHECK_CU(cuGraphExecUpdate(ge, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	CHECK(info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS, "an update across topologies reported success");

	REQUIRE_CU(cuGraphDestroyNode(e));
	nn = 8;
	REQUIRE_CU(cuGraphGetNodes(g2, nodes, &nn));
	CHECK(nn == 0, "a destroyed node is still listed (%zu)", nn);

	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g2));
	/* The clone outlives the graph it was made from: it still runs, and is
	 * destroyed on its own. */
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemsetD32(z, 0, N));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, clone, 0));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(out, z, N * 4));
	CHECK(out[0] == zval && out[N - 1] == zval, "the clone's memset node did not run once the original was gone");
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(clone));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuMemFree(z));
	free(out);
}

/* The end of a capture need not take the graph (the driver ends the
 * capture all the same); captured into a graph the program made
 * (cuStreamBeginCaptureToGraph, which NVIDIA's graphConditionalNodes ends
 * with NULL), asked for, the end gives that same graph, holding the work. */
static void capture_to_graph(void)
{
	unsigned mul = 40503u, add = 7u, *in = malloc(2 * N * 4), *out = malloc(N * 4);
	CUdeviceptr x[2];
	CUstream s;
	CUgraph g, back = NULL;
	CUgraphExec ge;
	size_t nn = 0;
	int n = N;
	void *kp[4];

	REQUIRE(in && out, "out of memory");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuGraphCreate(&g, 0));
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	REQUIRE_CU(cuStreamEndCapture(s, NULL));
	CHECK_CU(cuStreamEndCapture(s, &back), CUDA_ERROR_ILLEGAL_STATE);   /* it ended */
	/* Two captures into it, each a kernel on a buffer of its own. */
	for (int round = 0; round < 2; round++) {
		REQUIRE_CU(cuMemAlloc(&x[round], N * 4));
		REQUIRE_CU(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
		affine_params(kp, &x[round], &mul, &add, &n);
		REQUIRE_CU(t_launch(affine, N / 256, 256, s, kp));
		if (round == 0) {
			REQUIRE_CU(cuStreamEndCapture(s, NULL));
		} else {
			back = NULL;
			REQUIRE_CU(cuStreamEndCapture(s, &back));
			CHECK(back == g, "the end of a capture into a graph gave %p, not that graph %p", (void *)back,
			      (void *)g);
		}
	}
	REQUIRE_CU(cuGraphGetNodes(g, NULL, &nn));
	CHECK(nn == 2, "the graph captured into twice has %zu nodes, want 2", nn);
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	t_fill_bytes(in, 2 * N * 4, &rng);
	/* On the graph's stream: a synchronous copy from pageable memory may
	 * return before its bytes land, and the stream is non-blocking. */
	REQUIRE_CU(cuMemcpyHtoDAsync(x[0], in, N * 4, s));
	REQUIRE_CU(cuMemcpyHtoDAsync(x[1], in + N, N * 4, s));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	for (int round = 0; round < 2; round++) {
		REQUIRE_CU(cuMemcpyDtoH(out, x[round], N * 4));
		for (int i = 0; i < N; i++)
			if (!CHECK(out[i] == in[round * N + i] * mul + add, "capture %d: x[%d] = %#x, want %#x", round,
				   i, out[i], in[round * N + i] * mul + add))
				break;
		REQUIRE_CU(cuMemFree(x[round]));
	}
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuStreamDestroy(s));
	free(in);
	free(out);
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUmodule mod;

	t_init(argc, argv);
	ctx = t_primary(t_device());
	mod = t_module();
	affine = t_func(mod, "affine_u32");
	iota = t_func(mod, "iota_u32");
	rng = t_rng(1);
	capture_graph(ctx);
	capture_to_graph();
	explicit_graph();
	REQUIRE_CU(cuModuleUnload(mod));
	return check_failures() ? T_FAIL : T_PASS;
}
