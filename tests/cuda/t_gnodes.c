// SPDX-License-Identifier: MIT
/*
 * Graph copy, allocation and conditional nodes, and the generic node calls.
 *
 * Copy nodes: random bytes from pinned host memory to device memory (1D),
 * a sub-rectangle of a pitched block to another (2D, offsets on both
 * sides), two slices of a 3D block back to pinned host memory; launched,
 * and every byte checked against the same copies done on the host. The
 * parameters read back; a new destination in the graph and a new source in
 * the executable graph, each checked by a launch. Pageable memory to the
 * device and back through a graph: each launch copies what the program
 * wrote there last, and the program reads what the graph copied back; a
 * copy node and a captured copy into a local variable of the calling
 * function (its stack), each one copy node of its graph.
 *
 * Generic calls: cuGraphAddNode for a memset and a copy node (one with
 * default edge data), cuGraphNodeSetParams and cuGraphExecNodeSetParams.
 *
 * Allocation nodes: an allocation, a memset of it, a copy out of it and its
 * free, in one graph; the parameters read back; the copy's result checked.
 *
 * Conditional nodes: an "if" whose condition defaults to 1 runs its body,
 * an "if/else" whose condition defaults to 0 its else body; the bodies are
 * the program's graphs (filled, listed); the driver clones no such graph.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define W   96      /* bytes of a row of the 2D copy */
#define H   20      /* its rows */
#define P   256     /* pitch of the pitched blocks */
#define ROWS 32     /* rows of the blocks */

static uint64_t rng;

static CUgraphExec instantiate(CUgraph g)
{
	CUgraphExec ge;

	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	return ge;
}

static void run(CUgraphExec ge, CUstream s)
{
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
}

static void copy_nodes(CUstream s)
{
	const size_t n = 64 * 1024, blk = (size_t)P * ROWS;
	uint8_t *hin, *hout, *want, *page, *back;
	CUdeviceptr a, b, c;
	CUDA_MEMCPY3D cp, got;
	CUgraphNode n1, n2, n3, np, np2;
	CUgraph g, gp;
	CUgraphExec ge;

	REQUIRE_CU(cuMemAllocHost((void **)&hin, n));
	REQUIRE_CU(cuMemAllocHost((void **)&hout, n));
	want = malloc(n);
	page = malloc(n);
	REQUIRE(want && page, "out of memory");
	REQUIRE_CU(cuMemAlloc(&a, blk));
	REQUIRE_CU(cuMemAlloc(&b, blk));
	REQUIRE_CU(cuMemAlloc(&c, blk));
	t_fill_bytes(hin, n, &rng);
	memset(hout, 0xEE, n);
	REQUIRE_CU(cuMemsetD8(b, 0x11, blk));
	REQUIRE_CU(cuGraphCreate(&g, 0));

	/* hin[0, blk) -> a. */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.srcHost = hin;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = a;
	cp.WidthInBytes = blk;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n1, g, NULL, 0, &cp, NULL));

	/* a's rows 3.. at byte 5 -> b's rows 7.. at byte 40 (2D). */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.srcDevice = a;
	cp.srcXInBytes = 5;
	cp.srcY = 3;
	cp.srcPitch = P;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = b;
	cp.dstXInBytes = 40;
	cp.dstY = 7;
	cp.dstPitch = P;
	cp.WidthInBytes = W;
	cp.Height = H;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n2, g, &n1, 1, &cp, NULL));

	/* b as 2 slices of ROWS/2 rows -> hout (3D, whole slices). */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.srcDevice = b;
	cp.srcPitch = P;
	cp.srcHeight = ROWS / 2;
	cp.dstMemoryType = CU_MEMORYTYPE_HOST;
	cp.dstHost = hout;
	cp.dstPitch = P;
	cp.dstHeight = ROWS / 2;
	cp.WidthInBytes = P;
	cp.Height = ROWS / 2;
	cp.Depth = 2;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n3, g, &n2, 1, &cp, NULL));

	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphMemcpyNodeGetParams(n2, &got));
	CHECK(got.srcDevice == a && got.dstDevice == b && got.srcXInBytes == 5 && got.srcY == 3 &&
	      got.dstXInBytes == 40 && got.dstY == 7 && got.WidthInBytes == W && got.Height == H &&
	      got.srcPitch == P, "a 2D copy node's parameters read back wrong");
	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphMemcpyNodeGetParams(n3, &got));
	CHECK(got.dstMemoryType == CU_MEMORYTYPE_HOST && got.dstHost == hout && got.Depth == 2 &&
	      got.srcHeight == ROWS / 2, "a 3D copy node's host side read back wrong (%d, %p)",
	      (int)got.dstMemoryType, got.dstHost);

	ge = instantiate(g);
	run(ge, s);
	memset(want, 0x11, blk);
	for (int y = 0; y < H; y++)
		memcpy(want + (size_t)(7 + y) * P + 40, hin + (size_t)(3 + y) * P + 5, W);
	CMP_BYTES(hout, want, blk, "pinned -> device -> 2D -> 3D -> pinned");

	/* A new destination in the graph: the 1D copy lands in c. */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.srcHost = hin + blk;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = c;
	cp.WidthInBytes = blk;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphMemcpyNodeSetParams(n1, &cp));
	REQUIRE_CU(cuGraphExecDestroy(ge));
	ge = instantiate(g);
	REQUIRE_CU(cuMemsetD8(b, 0x22, blk));
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(want, c, blk));
	CMP_BYTES(want, hin + blk, blk, "the copy node's new destination");

	/* A new source in the executable graph only: the 1D copy reads hin's
	 * start again, so c gets it. */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.srcHost = hin;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = c;
	cp.WidthInBytes = blk;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphExecMemcpyNodeSetParams(ge, n1, &cp, NULL));
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(want, c, blk));
	CMP_BYTES(want, hin, blk, "the executable graph's new source");

	/* The driver updates one-row copies only: the 3D node stays as it was. */
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.srcDevice = c;
	cp.srcPitch = P;
	cp.srcHeight = ROWS / 2;
	cp.dstMemoryType = CU_MEMORYTYPE_HOST;
	cp.dstHost = hout;
	cp.dstPitch = P;
	cp.dstHeight = ROWS / 2;
	cp.WidthInBytes = P;
	cp.Height = ROWS / 2;
	cp.Depth = 2;
	CHECK_CU(cuGraphExecMemcpyNodeSetParams(ge, n3, &cp, NULL), CUDA_ERROR_INVALID_VALUE);

	/* A bad node: past the end of the destination. */
	cp.Depth = 3;
	CHECK_CU(cuGraphMemcpyNodeSetParams(n3, &cp), CUDA_ERROR_INVALID_VALUE);

	/* Pageable memory, both ways: what the program writes there after
	 * making the graph is what each launch copies, and what the graph
	 * copies back is what the program reads. */
	back = malloc(256 * 1024);
	REQUIRE(back, "out of memory");
	REQUIRE_CU(cuGraphCreate(&gp, 0));
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.srcHost = page;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = a;
	cp.WidthInBytes = blk;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&np, gp, NULL, 0, &cp, NULL));
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.srcDevice = a;
	cp.dstMemoryType = CU_MEMORYTYPE_HOST;
	cp.dstHost = back;
	cp.WidthInBytes = blk;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&np2, gp, &np, 1, &cp, NULL));
	{
		CUgraphExec gpe = instantiate(gp);

		for (int i = 0; i < 2; i++) {
			t_fill_bytes(page, blk, &rng);
			memset(back, 0, blk);
			run(gpe, s);
			CMP_BYTES(back, page, blk, "pageable memory through a graph and back");
		}
		REQUIRE_CU(cuGraphExecDestroy(gpe));
	}
	REQUIRE_CU(cuGraphDestroy(gp));

	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	REQUIRE_CU(cuMemFree(c));
	REQUIRE_CU(cuMemFreeHost(hin));
	REQUIRE_CU(cuMemFreeHost(hout));
	free(want);
	free(page);
	free(back);
}

static void generic_nodes(CUstream s)
{
	const size_t n = 4096;
	CUgraphNodeParams p;
	CUgraphEdgeData edge;
	CUgraphNode ms, cp;
	CUdeviceptr a, b;
	CUgraphExec ge;
	CUgraph g;
	uint32_t *out = malloc(n * 4);

	REQUIRE(out, "out of memory");
	REQUIRE_CU(cuMemAlloc(&a, n * 4));
	REQUIRE_CU(cuMemAlloc(&b, n * 4));
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_MEMSET;
	p.memset.dst = a;
	p.memset.elementSize = 4;
	p.memset.width = n;
	p.memset.height = 1;
	p.memset.pitch = n * 4;
	p.memset.value = 0x600df00du;
	REQUIRE_CU(cuGraphAddNode(&ms, g, NULL, NULL, 0, &p));
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
	p.memcpy.copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	p.memcpy.copyParams.srcDevice = a;
	p.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	p.memcpy.copyParams.dstDevice = b;
	p.memcpy.copyParams.WidthInBytes = n * 4;
	p.memcpy.copyParams.Height = 1;
	p.memcpy.copyParams.Depth = 1;
	memset(&edge, 0, sizeof(edge));
	REQUIRE_CU(cuGraphAddNode(&cp, g, &ms, &edge, 1, &p));
	ge = instantiate(g);
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(out, b, n * 4));
	CHECK(out[0] == 0x600df00du && out[n - 1] == 0x600df00du, "generic memset then copy: %#x", out[0]);

	/* New memset value in the executable graph, then in the graph. */
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_MEMSET;
	p.memset.dst = a;
	p.memset.elementSize = 4;
	p.memset.width = n;
	p.memset.height = 1;
	p.memset.pitch = n * 4;
	p.memset.value = 0x12345678u;
	REQUIRE_CU(cuGraphExecNodeSetParams(ge, ms, &p));
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(out, b, n * 4));
	CHECK(out[n / 2] == 0x12345678u, "after cuGraphExecNodeSetParams: %#x", out[n / 2]);
	p.memset.value = 0x0badcafeu;
	REQUIRE_CU(cuGraphNodeSetParams(ms, &p));
	REQUIRE_CU(cuGraphExecDestroy(ge));
	ge = instantiate(g);
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(out, b, n * 4));
	CHECK(out[7] == 0x0badcafeu, "after cuGraphNodeSetParams: %#x", out[7]);

	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	free(out);
}

static void alloc_nodes(CUdevice dev, CUstream s)
{
	const size_t n = 1 << 20;
	CUDA_MEM_ALLOC_NODE_PARAMS ap, got;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUDA_MEMCPY3D cp;
	CUgraphNode na, nm, nc, nf;
	CUdeviceptr out, freed = 0;
	CUcontext cur;
	CUgraphExec ge;
	CUgraph g;
	uint8_t *h = malloc(n);

	REQUIRE(h, "out of memory");
	REQUIRE_CU(cuMemAlloc(&out, n));
	REQUIRE_CU(cuMemsetD8(out, 0, n));
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&ap, 0, sizeof(ap));
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.poolProps.location.id = dev;
	ap.bytesize = n;
	REQUIRE_CU(cuGraphAddMemAllocNode(&na, g, NULL, 0, &ap));
	CHECK(ap.dptr != 0, "an allocation node gave no address");
	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphMemAllocNodeGetParams(na, &got));
	CHECK(got.dptr == ap.dptr && got.bytesize == n && got.poolProps.location.id == dev &&
	      got.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE,
	      "allocation node parameters read back wrong (size %zu, device %d)", got.bytesize,
	      got.poolProps.location.id);

	memset(&mp, 0, sizeof(mp));
	mp.dst = ap.dptr;
	mp.elementSize = 1;
	mp.width = n;
	mp.height = 1;
	mp.pitch = n;
	mp.value = 0xC3;
	/* The driver cannot find the context of memory a graph has yet to
	 * allocate: a memset node on it names its context, as cudart does. */
	REQUIRE_CU(cuCtxGetCurrent(&cur));
	REQUIRE_CU(cuGraphAddMemsetNode(&nm, g, &na, 1, &mp, cur));
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.srcDevice = ap.dptr;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = out;
	cp.WidthInBytes = n;
	cp.Height = 1;
	cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&nc, g, &nm, 1, &cp, NULL));
	REQUIRE_CU(cuGraphAddMemFreeNode(&nf, g, &nc, 1, ap.dptr));
	REQUIRE_CU(cuGraphMemFreeNodeGetParams(nf, &freed));
	CHECK(freed == ap.dptr, "the free node names %#llx", (unsigned long long)freed);

	ge = instantiate(g);
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(h, out, n));
	CHECK_FILL(h, n, 0xC3, "the graph allocation's bytes, copied out");
	run(ge, s);   /* allocated and freed again */

	/* The device's graph memory: at least this graph's at its most; only
	 * the high marks may be set, and only back to the current figures. */
	{
		cuuint64_t v = 0, zero = 0, five = 5;

		REQUIRE_CU(cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v));
		CHECK(v >= n, "the graph memory reserved at most: %llu bytes, want at least %zu", (unsigned long long)v, n);
		REQUIRE_CU(cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
		CHECK(v >= n, "the graph memory used at most: %llu bytes, want at least %zu", (unsigned long long)v, n);
		REQUIRE_CU(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
		CHECK_CU(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &five),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuDeviceGetGraphMemAttribute(dev, (CUgraphMem_attribute)99, &v), CUDA_ERROR_INVALID_VALUE);
	}
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemFree(out));
	free(h);
}

/* The allocation's bytes, after the stream's work: all v. */
static void check_words(CUdeviceptr d, uint32_t *h, size_t n, uint32_t v, CUstream s, const char *when)
{
	size_t bad = 0;

	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(h, d, n * 4));
	for (size_t i = 0; i < n; i++)
		bad += h[i] != v;
	CHECK(bad == 0, "%s: %zu of %zu words not %#x (first %#x)", when, bad, n, v, h[0]);
}

/* A graph allocation outlives the graph it was made in and each of its
 * frees: every launch of the executable graph brings it back at its
 * address, and it may be freed outside the graph each time (by
 * cuMemFreeAsync, by cuMemFree, by a free node of another graph made while
 * it is freed), as NVIDIA's graphMemoryNodes sample does; the same for an
 * allocation captured from cuMemAllocAsync. */
static void allocs_relaunched(CUdevice dev, CUstream s)
{
	const size_t n = 64 << 10;
	CUDA_MEM_ALLOC_NODE_PARAMS ap;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUgraphNode na, nm, nf;
	CUgraphExec ge, gf = NULL;
	CUgraph g, gfree;
	CUcontext cur;
	CUdeviceptr p, q = 0;
	uint32_t *h = malloc(n * 4), v;

	REQUIRE(h, "out of memory");
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&ap, 0, sizeof(ap));
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.poolProps.location.id = dev;
	ap.bytesize = n * 4;
	REQUIRE_CU(cuGraphAddMemAllocNode(&na, g, NULL, 0, &ap));
	p = ap.dptr;
	memset(&mp, 0, sizeof(mp));
	mp.dst = p;
	mp.elementSize = 4;
	mp.width = n;
	mp.height = 1;
	mp.pitch = n * 4;
	mp.value = 0x11110000u;
	REQUIRE_CU(cuCtxGetCurrent(&cur));
	REQUIRE_CU(cuGraphAddMemsetNode(&nm, g, &na, 1, &mp, cur));
	ge = instantiate(g);   /* g stays: its memset node is set below */

	for (int round = 0; round < 3; round++) {
		v = 0x11110000u + (uint32_t)(t_rand(&rng) & 0xffff) + 1;
		mp.value = v;
		if (round == 2) {
			/* Made while the allocation is freed, as the sample does. */
			REQUIRE_CU(cuGraphCreate(&gfree, 0));
			REQUIRE_CU(cuGraphAddMemFreeNode(&nf, gfree, NULL, 0, p));
			gf = instantiate(gfree);
			REQUIRE_CU(cuGraphDestroy(gfree));
		}
		/* While freed, the node's parameters may still be set. */
		REQUIRE_CU(cuGraphExecMemsetNodeSetParams(ge, nm, &mp, cur));
		REQUIRE_CU(cuGraphLaunch(ge, s));
		check_words(p, h, n, v, s, round == 0 ? "first launch" : "launched again after a free outside");
		if (round == 0) {
			REQUIRE_CU(cuMemFreeAsync(p, s));
		} else if (round == 1) {
			REQUIRE_CU(cuMemFree(p));
		} else {
			REQUIRE_CU(cuGraphLaunch(gf, s));
			REQUIRE_CU(cuStreamSynchronize(s));
			REQUIRE_CU(cuGraphExecDestroy(gf));
		}
	}
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));

	/* Captured: the allocation and a memset, freed outside each time; the
	 * executable graph keeps the address once the graph is gone. */
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	REQUIRE_CU(cuMemAllocAsync(&q, n * 4, s));
	v = 0x22220000u + (uint32_t)(t_rand(&rng) & 0xffff);
	REQUIRE_CU(cuMemsetD32Async(q, v, n, s));
	REQUIRE_CU(cuStreamEndCapture(s, &g));
	ge = instantiate(g);
	REQUIRE_CU(cuGraphDestroy(g));
	for (int round = 0; round < 3; round++) {
		REQUIRE_CU(cuGraphLaunch(ge, s));
		check_words(q, h, n, v, s, "a captured allocation, launched");
		REQUIRE_CU(cuMemFreeAsync(q, s));
	}
	REQUIRE_CU(cuStreamSynchronize(s));

	/* Captured with its free: launched again and again, nothing to free. */
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	REQUIRE_CU(cuMemAllocAsync(&q, n * 4, s));
	REQUIRE_CU(cuMemsetD32Async(q, v + 1, n, s));
	REQUIRE_CU(cuMemFreeAsync(q, s));
	REQUIRE_CU(cuStreamEndCapture(s, &g));
	gf = instantiate(g);
	REQUIRE_CU(cuGraphDestroy(g));
	for (int round = 0; round < 3; round++)
		REQUIRE_CU(cuGraphLaunch(gf, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuGraphExecDestroy(gf));
	REQUIRE_CU(cuGraphExecDestroy(ge));

	/* Freed and allocated again inside one graph (the driver may give the
	 * second allocation the first one's address): the second is what the
	 * launch leaves, freed outside each time. */
	CUdeviceptr first;

	{
		CUgraphNode a1, m1, f1, a2, m2;

		REQUIRE_CU(cuGraphCreate(&g, 0));
		REQUIRE_CU(cuGraphAddMemAllocNode(&a1, g, NULL, 0, &ap));
		first = ap.dptr;
		mp.dst = first;
		mp.value = 0x33330000u;
		REQUIRE_CU(cuGraphAddMemsetNode(&m1, g, &a1, 1, &mp, cur));
		REQUIRE_CU(cuGraphAddMemFreeNode(&f1, g, &m1, 1, first));
		REQUIRE_CU(cuGraphAddMemAllocNode(&a2, g, &f1, 1, &ap));
		q = ap.dptr;
		v = 0x44440000u + (uint32_t)(t_rand(&rng) & 0xffff);
		mp.dst = q;
		mp.value = v;
		REQUIRE_CU(cuGraphAddMemsetNode(&m2, g, &a2, 1, &mp, cur));
		printf("t_gnodes: a graph's second allocation %s the first one's address\n",
		       q == first ? "takes" : "does not take");
		ge = instantiate(g);
		REQUIRE_CU(cuGraphDestroy(g));
		for (int round = 0; round < 3; round++) {
			REQUIRE_CU(cuGraphLaunch(ge, s));
			check_words(q, h, n, v, s, "a graph's second allocation, launched");
			REQUIRE_CU(cuMemFreeAsync(q, s));
		}
		REQUIRE_CU(cuStreamSynchronize(s));
		REQUIRE_CU(cuGraphExecDestroy(ge));
	}

	/* A graph that frees another graph's allocation and then allocates
	 * (the driver may give it the freed address): after its launch what
	 * it allocated is live, what it freed is not. */
	{
		CUgraphNode a1, fa, b, mb;
		CUgraph g2;

		REQUIRE_CU(cuGraphCreate(&g, 0));
		REQUIRE_CU(cuGraphAddMemAllocNode(&a1, g, NULL, 0, &ap));
		first = ap.dptr;
		ge = instantiate(g);
		REQUIRE_CU(cuGraphLaunch(ge, s));
		REQUIRE_CU(cuGraphCreate(&g2, 0));
		REQUIRE_CU(cuGraphAddMemFreeNode(&fa, g2, NULL, 0, first));
		REQUIRE_CU(cuGraphAddMemAllocNode(&b, g2, &fa, 1, &ap));
		q = ap.dptr;
		v = 0x55550000u + (uint32_t)(t_rand(&rng) & 0xffff);
		mp.dst = q;
		mp.value = v;
		REQUIRE_CU(cuGraphAddMemsetNode(&mb, g2, &b, 1, &mp, cur));
		gf = instantiate(g2);
		REQUIRE_CU(cuGraphLaunch(gf, s));
		check_words(q, h, n, v, s, "an allocation after a free of another graph's");
		REQUIRE_CU(cuMemFreeAsync(q, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		REQUIRE_CU(cuGraphExecDestroy(gf));
		REQUIRE_CU(cuGraphExecDestroy(ge));
		REQUIRE_CU(cuGraphDestroy(g2));
		REQUIRE_CU(cuGraphDestroy(g));
	}
	free(h);
}

/* A conditional node of a type with `bodies` bodies after nothing, its
 * handle's default value v; each body gets a memset of buf to its index+1. */
static CUgraph cond_graph(CUcontext ctx, CUgraphConditionalNodeType type, unsigned bodies, unsigned v, CUdeviceptr buf,
			  size_t n, CUgraphNode *node)
{
	CUgraphNodeParams p;
	CUgraphConditionalHandle h;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUgraph g, *body;
	CUgraphNode ms, listed[4];
	CUgraphNodeType t;
	size_t nn;

	REQUIRE_CU(cuGraphCreate(&g, 0));
	REQUIRE_CU(cuGraphConditionalHandleCreate(&h, g, ctx, v, CU_GRAPH_COND_ASSIGN_DEFAULT));
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	p.conditional.handle = h;
	p.conditional.type = type;
	p.conditional.size = bodies;
	p.conditional.ctx = ctx;
	REQUIRE_CU(cuGraphAddNode(node, g, NULL, NULL, 0, &p));
	/* The driver points phGraph_out at the node's own array of bodies. */
	body = p.conditional.phGraph_out;
	REQUIRE(body && body[0], "a conditional node gave no body graphs");
	REQUIRE_CU(cuGraphNodeGetType(*node, &t));
	CHECK(t == CU_GRAPH_NODE_TYPE_CONDITIONAL, "a conditional node has type %d", (int)t);
	for (unsigned i = 0; i < bodies; i++) {
		memset(&mp, 0, sizeof(mp));
		mp.dst = buf;
		mp.elementSize = 4;
		mp.width = n;
		mp.height = 1;
		mp.pitch = n * 4;
		mp.value = i + 1;
		REQUIRE_CU(cuGraphAddMemsetNode(&ms, body[i], NULL, 0, &mp, ctx));
		nn = 4;
		REQUIRE_CU(cuGraphGetNodes(body[i], listed, &nn));
		CHECK(nn == 1 && listed[0] == ms, "body %u lists %zu nodes", i, nn);
	}
	return g;
}

static void conditional_nodes(CUcontext ctx, CUstream s)
{
	const size_t n = 1024;
	CUdeviceptr buf;
	CUgraphExec ge;
	CUgraphNode node;
	CUgraph g, clone;
	uint32_t out[4];

	REQUIRE_CU(cuMemAlloc(&buf, n * 4));

	/* if (1): body 0 runs. */
	REQUIRE_CU(cuMemsetD32(buf, 0xdead, n));
	g = cond_graph(ctx, CU_GRAPH_COND_TYPE_IF, 1, 1, buf, n, &node);
	ge = instantiate(g);
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(out, buf, sizeof(out)));
	CHECK(out[0] == 1 && out[3] == 1, "if (1) left %#x", out[0]);
	/* The driver clones no graph with a conditional node. */
	CHECK(cuGraphClone(&clone, g) != CUDA_SUCCESS, "a graph with a conditional node was cloned");
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));

	/* if (0) else: body 1 runs. */
	REQUIRE_CU(cuMemsetD32(buf, 0xdead, n));
	g = cond_graph(ctx, CU_GRAPH_COND_TYPE_IF, 2, 0, buf, n, &node);
	ge = instantiate(g);
	run(ge, s);
	REQUIRE_CU(cuMemcpyDtoH(out, buf, sizeof(out)));
	CHECK(out[0] == 2, "if (0) else left %#x", out[0]);
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));

	REQUIRE_CU(cuMemFree(buf));
}

/* A copy node and a captured copy into the calling function's own local
 * variables, as programs write (a result into a double on the stack): the
 * graph runs long after the call that made the node, while the function
 * goes on using its stack. Each round's value must arrive, and the
 * function's other locals must be intact afterwards. */
static __attribute__((noinline)) void stack_round(CUstream s, CUdeviceptr d, int round, bool capture)
{
	volatile uint64_t guard_lo = 0x1111111111111111ull * (unsigned)(round + 1);
	uint64_t value = 0, want = 0x0123456789abcdefull ^ (uint64_t)round * 0x9e3779b97f4a7c15ull;
	volatile uint64_t guard_hi = ~guard_lo;
	CUgraph g;
	CUgraphExec ge;

	REQUIRE_CU(cuMemcpyHtoD(d, &want, sizeof(want)));
	if (capture) {
		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		REQUIRE_CU(cuMemcpyDtoHAsync(&value, d, sizeof(value), s));
		REQUIRE_CU(cuStreamEndCapture(s, &g));
		{
			CUgraphNode nodes[4];
			CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
			size_t nn = 4;

			REQUIRE_CU(cuGraphGetNodes(g, nodes, &nn));
			if (nn == 1)
				REQUIRE_CU(cuGraphNodeGetType(nodes[0], &t));
			CHECK(nn == 1 && t == CU_GRAPH_NODE_TYPE_MEMCPY,
			      "a captured copy into a local: %zu nodes in the graph, the first of type %d", nn, (int)t);
		}
	} else {
		CUDA_MEMCPY3D cp;
		CUgraphNode n;

		memset(&cp, 0, sizeof(cp));
		cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		cp.srcDevice = d;
		cp.dstMemoryType = CU_MEMORYTYPE_HOST;
		cp.dstHost = &value;
		cp.WidthInBytes = sizeof(value);
		cp.Height = 1;
		cp.Depth = 1;
		REQUIRE_CU(cuGraphCreate(&g, 0));
		REQUIRE_CU(cuGraphAddMemcpyNode(&n, g, NULL, 0, &cp, NULL));
		/* One copy node to the program, in the graph and in a clone. */
		{
			CUgraphNode nodes[4], cn;
			CUgraphNodeType t;
			CUDA_MEMCPY3D got;
			size_t nn = 4;
			CUgraph cl;

			REQUIRE_CU(cuGraphGetNodes(g, nodes, &nn));
			CHECK(nn == 1 && nodes[0] == n, "a copy node into a local: %zu nodes in its graph", nn);
			REQUIRE_CU(cuGraphMemcpyNodeGetParams(n, &got));
			CHECK(got.dstHost == &value && got.srcDevice == d && got.WidthInBytes == sizeof(value),
			      "a copy node into a local reads back other parameters");
			REQUIRE_CU(cuGraphClone(&cl, g));
			REQUIRE_CU(cuGraphNodeFindInClone(&cn, n, cl));
			REQUIRE_CU(cuGraphNodeGetType(cn, &t));
			CHECK(t == CU_GRAPH_NODE_TYPE_MEMCPY, "the clone's copy node into a local has type %d", (int)t);
			REQUIRE_CU(cuGraphDestroy(cl));
		}
	}
	ge = instantiate(g);
	run(ge, s);
	CHECK(value == want, "%s copy into a local, round %d: %#llx, want %#llx", capture ? "a captured" : "a node's",
	      round, (unsigned long long)value, (unsigned long long)want);
	CHECK(guard_lo == 0x1111111111111111ull * (unsigned)(round + 1) && guard_hi == ~guard_lo,
	      "round %d: the locals beside the copied one changed", round);
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
}

static void stack_copies(CUstream s)
{
	CUdeviceptr d;

	REQUIRE_CU(cuMemAlloc(&d, 8));
	for (int round = 0; round < 4; round++)
		stack_round(s, d, round, round & 1);
	REQUIRE_CU(cuMemFree(d));
}

/* Pageable copies on a stream that joined a capture by waiting for an
 * event the capturing stream recorded, as NVIDIA's graphMemoryNodes sample
 * makes them: both ways, on more than a page at an odd length, the side
 * stream rejoined before the capture ends. Each launch copies what the
 * pages hold when it runs. */
static void joined_copies(CUstream s)
{
	const size_t n = 4096 + 44;
	uint8_t *in = malloc(n), *out = malloc(n);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUevent fork_ev, join_ev;
	CUdeviceptr d;
	CUstream side;
	CUgraphExec ge;
	CUgraph g;

	REQUIRE(in && out, "out of memory");
	REQUIRE_CU(cuMemAlloc(&d, n));
	REQUIRE_CU(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	REQUIRE_CU(cuEventRecord(fork_ev, s));
	REQUIRE_CU(cuStreamWaitEvent(side, fork_ev, 0));
	REQUIRE_CU(cuStreamIsCapturing(side, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "a stream that joined a capture reads status %d", (int)st);
	REQUIRE_CU(cuMemcpyHtoDAsync(d, in, n, side));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d, n, side));
	REQUIRE_CU(cuEventRecord(join_ev, side));
	REQUIRE_CU(cuStreamWaitEvent(s, join_ev, 0));
	REQUIRE_CU(cuStreamEndCapture(s, &g));
	REQUIRE_CU(cuStreamIsCapturing(side, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "the side stream after the capture ended reads status %d", (int)st);
	ge = instantiate(g);
	for (int round = 0; round < 3; round++) {
		t_fill_bytes(in, n, &rng);
		memset(out, 0, n);
		run(ge, s);
		CMP_BYTES(out, in, n, "pageable memory through a joined stream's captured copies and back");
	}
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuEventDestroy(fork_ev));
	REQUIRE_CU(cuEventDestroy(join_ev));
	REQUIRE_CU(cuStreamDestroy(side));
	REQUIRE_CU(cuMemFree(d));
	free(in);
	free(out);
}

/* Copy nodes whose pageable buffers share pages: two uploads from the
 * halves of one page (and a third from the same bytes as the first), two
 * downloads into the halves of another page, in one graph, the downloads
 * after the uploads; each launch moves what the pages hold when it runs,
 * and the bytes beside each download are left as they were. */
static void shared_pages(CUstream s)
{
	const size_t half = 1500, gap = 2048;
	uint8_t *up = malloc(8192), *down = malloc(8192), *guard = malloc(8192);
	CUgraphNode u1, u2, u3, deps[3], d1, d2;
	CUDA_MEMCPY3D cp;
	CUdeviceptr a, b, c;
	CUgraphExec ge;
	CUgraph g;

	REQUIRE(up && down && guard, "out of memory");
	REQUIRE_CU(cuMemAlloc(&a, half));
	REQUIRE_CU(cuMemAlloc(&b, half));
	REQUIRE_CU(cuMemAlloc(&c, half));
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.WidthInBytes = half;
	cp.Height = 1;
	cp.Depth = 1;
	cp.srcHost = up + 100;
	cp.dstDevice = a;
	REQUIRE_CU(cuGraphAddMemcpyNode(&u1, g, NULL, 0, &cp, NULL));
	cp.srcHost = up + 100 + gap;
	cp.dstDevice = b;
	REQUIRE_CU(cuGraphAddMemcpyNode(&u2, g, NULL, 0, &cp, NULL));
	cp.srcHost = up + 100;   /* the very bytes of the first */
	cp.dstDevice = c;
	REQUIRE_CU(cuGraphAddMemcpyNode(&u3, g, NULL, 0, &cp, NULL));
	deps[0] = u1;
	deps[1] = u2;
	deps[2] = u3;
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstMemoryType = CU_MEMORYTYPE_HOST;
	cp.WidthInBytes = half;
	cp.Height = 1;
	cp.Depth = 1;
	cp.srcDevice = b;
	cp.dstHost = down + 50;
	REQUIRE_CU(cuGraphAddMemcpyNode(&d1, g, deps, 3, &cp, NULL));
	cp.srcDevice = c;
	cp.dstHost = down + 50 + gap;
	REQUIRE_CU(cuGraphAddMemcpyNode(&d2, g, deps, 3, &cp, NULL));
	ge = instantiate(g);
	for (int round = 0; round < 3; round++) {
		t_fill_bytes(up, 8192, &rng);
		t_fill_bytes(down, 8192, &rng);
		memcpy(guard, down, 8192);
		run(ge, s);
		CMP_BYTES(down + 50, up + 100 + gap, half, "the second upload's half of a shared page, back");
		CMP_BYTES(down + 50 + gap, up + 100, half, "the third upload (the first's bytes), back");
		CMP_BYTES(down, guard, 50, "the bytes before the first download");
		CMP_BYTES(down + 50 + half, guard + 50 + half, gap - half, "the bytes between the downloads");
		CMP_BYTES(down + 50 + gap + half, guard + 50 + gap + half, 8192 - 50 - gap - half,
			  "the bytes after the second download");
	}
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	REQUIRE_CU(cuMemFree(c));
	free(up);
	free(down);
	free(guard);
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	CUstream s;

	t_init(argc, argv);
	dev = t_device();
	ctx = t_primary(dev);
	rng = t_rng(1);
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	copy_nodes(s);
	stack_copies(s);
	joined_copies(s);
	shared_pages(s);
	generic_nodes(s);
	alloc_nodes(dev, s);
	allocs_relaunched(dev, s);
	conditional_nodes(ctx, s);
	REQUIRE_CU(cuStreamDestroy(s));
	return check_failures() ? T_FAIL : T_PASS;
}
