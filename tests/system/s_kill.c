// SPDX-License-Identifier: MIT
/*
 * A client killed with SIGKILL in the middle of its work: the server must
 * free everything it held and the other clients must not notice.
 *
 * The victim allocates device, pinned and managed memory (a kernel still
 * writing the managed memory when it dies), memory of its pools (one it
 * made, whose freed memory stays cached, and its default pool) and a
 * physical allocation it mapped and released, a graph allocation left
 * allocated and pinned memory freed under a graph's copy node, queues many
 * spin kernels and launches of a graph, leaves a stream capture open, and
 * keeps a thread in a large pageable copy (so staging chunks are in flight)
 * and another inside a host function that a stream waits for when it is
 * killed, with a graph's host node launched three times behind it, and a
 * stream waits for a word in its memory that nobody writes. A survivor runs verified work all along. After the kill, a fresh
 * client checks that the device's free memory is back to what it was before
 * the victim started, and that new clients still work. It does so twice:
 * the first round sets the mark the second must come back to.
 *
 * S_KILL_SKIP leaves parts of the victim out, to tell which one a leak
 * comes from: p (pools and mappings), g (graph memory), c (captures and
 * graph launches), h (the stuck host function), w (the unwritten wait),
 * t (the copying thread), m (managed memory).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "../cuda/common.h"

#define VICTIM_BYTES (96u << 20)
#define COPY_BYTES   (24u << 20)
#define SLACK        (4ll << 20)   /* a real driver's own bookkeeping may move a little */


static void *copy_forever(void *arg)
{
	CUdeviceptr d = *(CUdeviceptr *)arg;
	uint8_t *buf = malloc(COPY_BYTES);

	memset(buf, 0x5a, COPY_BYTES);
	for (;;) {
		cuMemcpyHtoD(d, buf, COPY_BYTES);
		cuMemcpyDtoH(buf, d, COPY_BYTES);
	}
	return NULL;
}

/* Pool memory (cached and in use) and a mapping whose handle is released:
 * what only the server's teardown can give back. */
static void hold_pools_and_mappings(CUstream s)
{
	CUmemPoolProps pp = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
			      .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	CUmemAllocationProp ap = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				   .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	CUmemAccessDesc acc = { .location = ap.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	cuuint64_t keep = ~(cuuint64_t)0;
	CUmemGenericAllocationHandle h;
	CUdeviceptr a, b, c, va;
	CUmemoryPool pool;
	size_t gran;

	REQUIRE_CU(cuMemPoolCreate(&pool, &pp));
	REQUIRE_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
	REQUIRE_CU(cuMemAllocFromPoolAsync(&a, 8u << 20, pool, s));
	REQUIRE_CU(cuMemAllocFromPoolAsync(&b, 8u << 20, pool, s));
	REQUIRE_CU(cuMemFreeAsync(a, s));
	REQUIRE_CU(cuMemAllocAsync(&c, 8u << 20, s));
	REQUIRE_CU(cuMemsetD32Async(b, 0x11111111u, 2u << 20, s));
	REQUIRE_CU(cuMemsetD32Async(c, 0x22222222u, 2u << 20, s));
	REQUIRE_CU(cuMemGetAllocationGranularity(&gran, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	REQUIRE_CU(cuMemCreate(&h, 4 * gran, &ap, 0));
	REQUIRE_CU(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0));
	REQUIRE_CU(cuMemMap(va, 4 * gran, 0, h, 0));
	REQUIRE_CU(cuMemSetAccess(va, 4 * gran, &acc, 1));
	REQUIRE_CU(cuMemRelease(h));
	REQUIRE_CU(cuMemsetD32Async(va, 0x33333333u, gran, s));
	REQUIRE_CU(cuStreamSynchronize(s));
}

/* Graph memory: a copy node from pinned memory that is freed before the
 * graph runs (the server keeps the pages for the graph), and an allocation
 * node whose memory the graph leaves allocated. */
static void hold_graph_memory(CUdevice dev, CUdeviceptr d, CUstream s)
{
	CUDA_MEM_ALLOC_NODE_PARAMS ap;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUDA_MEMCPY3D cp;
	CUgraphNode n, a;
	CUgraphExec ge;
	CUgraph g;
	void *pinned;

	REQUIRE_CU(cuMemAllocHost(&pinned, 1u << 20));
	memset(pinned, 0x5c, 1u << 20);
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&cp, 0, sizeof(cp));
	cp.srcMemoryType = CU_MEMORYTYPE_HOST;
	cp.srcHost = pinned;
	cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	cp.dstDevice = d;
	cp.WidthInBytes = 1u << 20;
	cp.Height = cp.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n, g, NULL, 0, &cp, NULL));
	memset(&ap, 0, sizeof(ap));
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.poolProps.location.id = dev;
	ap.bytesize = 8u << 20;
	REQUIRE_CU(cuGraphAddMemAllocNode(&a, g, &n, 1, &ap));
	memset(&mp, 0, sizeof(mp));
	mp.dst = ap.dptr;
	mp.elementSize = 4;
	mp.width = (8u << 20) / 4;
	mp.height = 1;
	mp.value = 0x44444444u;
	REQUIRE_CU(cuGraphAddMemsetNode(&n, g, &a, 1, &mp, NULL));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	REQUIRE_CU(cuMemFreeHost(pinned));
	REQUIRE_CU(cuGraphLaunch(ge, s));
	REQUIRE_CU(cuStreamSynchronize(s));
}

static int in_callback;   /* atomic */

static bool part(char p)
{
	const char *skip = getenv("S_KILL_SKIP");

	return !skip || !strchr(skip, p);
}

/* A host function that never returns: the victim dies inside it. */
static void CUDA_CB stuck(void *arg)
{
	(void)arg;
	__atomic_store_n(&in_callback, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
}

static void CUDA_CB never_reached(void *arg)
{
	(void)arg;
}

static int victim(int ready)
{
	CUdeviceptr d, out;
	CUfunction spin;
	CUstream s, cap, hs, ws;
	CUgraph g;
	CUgraphExec ge;
	pthread_t th;
	void *pinned;
	long long cycles = T_SPIN_1MS;
	CUdeviceptr managed;

	t_primary(t_device());
	spin = t_func(t_module(), "spin");
	REQUIRE_CU(cuMemAlloc(&d, VICTIM_BYTES));
	REQUIRE_CU(cuMemAlloc(&out, 4096));
	REQUIRE_CU(cuMemAllocHost(&pinned, 8u << 20));
	if (part('m')) {
		REQUIRE_CU(cuMemAllocManaged(&managed, 4u << 20, CU_MEM_ATTACH_GLOBAL));
		memset((void *)(uintptr_t)managed, 0x3c, 4u << 20);
	} else {
		managed = out;
	}
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
	if (part('p'))
		hold_pools_and_mappings(s);
	if (part('g'))
		hold_graph_memory(t_device(), d, s);
	/* A graph of two spins, launched many times; a capture left open. */
	if (!part('c'))
		goto no_capture;
	REQUIRE_CU(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
	for (int i = 0; i < 2; i++) {
		void *args[] = { &cycles, &out };

		REQUIRE_CU(t_launch(spin, 1, 32, cap, args));
	}
	REQUIRE_CU(cuStreamEndCapture(cap, &g));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	REQUIRE_CU(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
	for (int i = 0; i < 2000; i++) {
		void *args[] = { &cycles, &out }, *margs[] = { &cycles, &managed };

		REQUIRE_CU(t_launch(spin, 1, 32, s, i % 2 ? margs : args));
		if (i % 20 == 0) {
			REQUIRE_CU(cuGraphLaunch(ge, s));
			REQUIRE_CU(t_launch(spin, 1, 32, cap, args));
		}
	}
no_capture:
	/* A stream held by a host function the victim is inside of when it
	 * dies, with work behind it; and one not reached yet. */
	if (!part('h'))
		goto no_host;
	REQUIRE_CU(cuStreamCreate(&hs, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuLaunchHostFunc(hs, stuck, NULL));
	{
		CUdeviceptr out2 = out + 2048;   /* apart from the other streams' spins */
		void *args[] = { &cycles, &out2 };

		REQUIRE_CU(t_launch(spin, 1, 32, hs, args));
	}
	REQUIRE_CU(cuLaunchHostFunc(s, never_reached, NULL));
no_host:
	/* A stream waiting for a word nobody writes, with work behind it. */
	if (!part('w'))
		goto no_wait;
	REQUIRE_CU(cuStreamCreate(&ws, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamWaitValue32(ws, out + 3072, 1, CU_STREAM_WAIT_VALUE_EQ));
	{
		CUdeviceptr out3 = out + 1024;
		void *args[] = { &cycles, &out3 };

		REQUIRE_CU(t_launch(spin, 1, 32, ws, args));
	}
no_wait:
	/* A graph's host node, launched three times behind the stuck one: its
	 * waits start again at each launch. */
	if (part('h')) {
		CUDA_HOST_NODE_PARAMS hp = { .fn = never_reached, .userData = NULL };
		CUgraphNode hn;
		CUgraphExec hge;
		CUgraph hg;

		REQUIRE_CU(cuGraphCreate(&hg, 0));
		REQUIRE_CU(cuGraphAddHostNode(&hn, hg, NULL, 0, &hp));
		REQUIRE_CU(cuGraphInstantiateWithFlags(&hge, hg, 0));
		for (int i = 0; i < 3; i++)
			REQUIRE_CU(cuGraphLaunch(hge, hs));
	}
	for (int i = 0; part('h') && i < 200 && !__atomic_load_n(&in_callback, __ATOMIC_ACQUIRE); i++)
		usleep(10 * 1000);
	REQUIRE(!part('h') || __atomic_load_n(&in_callback, __ATOMIC_ACQUIRE), "the host function did not start");
	if (part('t'))
		pthread_create(&th, NULL, copy_forever, &d);
	usleep(100 * 1000);
	if (write(ready, "r", 1) != 1)
		return T_FAIL;
	for (;;)
		pause();
}

static int survivor(int stop)
{
	uint64_t rng = t_rng(7);
	uint32_t in[1024], got[1024], want[1024];
	CUdeviceptr d;
	CUfunction affine;
	int n = 1024, rounds = 0;
	char c;

	t_primary(t_device());
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuMemAlloc(&d, sizeof(in)));
	/* Work until told to stop (non-blocking read: no byte yet). */
	while (read(stop, &c, 1) != 1) {
		uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
		void *args[] = { &d, &mul, &add, &n };

		t_fill_u32(in, 1024, &rng);
		for (int i = 0; i < 1024; i++)
			want[i] = in[i] * mul + add;
		REQUIRE_CU(cuMemcpyHtoD(d, in, sizeof(in)));
		REQUIRE_CU(t_launch(affine, 4, 256, NULL, args));
		REQUIRE_CU(cuMemcpyDtoH(got, d, sizeof(got)));
		if (CMP_U32(got, want, 1024, "survivor's result"))
			return T_FAIL;
		rounds++;
	}
	printf("s_kill: survivor verified %d rounds\n", rounds);
	return rounds > 0 && !check_failures() ? T_PASS : T_FAIL;
}

/* One round: a survivor working, a victim killed in the middle of its
 * work, the survivor working on across the teardown. */
static int kill_round(void)
{
	int ready[2], stop[2], st;
	pid_t v, s;
	char c;

	if (pipe(ready) < 0 || pipe(stop) < 0)
		return T_FAIL;
	s = fork();
	if (s == 0) {
		fcntl(stop[0], F_SETFL, O_NONBLOCK);
		_exit(survivor(stop[0]));
	}
	v = fork();
	if (v == 0)
		_exit(victim(ready[1]));
	REQUIRE(read(ready[0], &c, 1) == 1, "the victim did not get going");
	kill(v, SIGKILL);
	waitpid(v, &st, 0);
	REQUIRE(WIFSIGNALED(st), "the victim was not killed");
	usleep(500 * 1000);   /* the survivor keeps working across the teardown */
	if (write(stop[1], "s", 1) != 1)
		return T_FAIL;
	waitpid(s, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the survivor failed (status %#x)", st);
	close(ready[0]);
	close(ready[1]);
	close(stop[0]);
	close(stop[1]);
	return check_failures() ? T_FAIL : T_PASS;
}

/* The device's free memory once it is back to `want` (the server frees a
 * victim's memory once its GPU work has drained), or after 10 s. */
static long long settled_free_memory(long long want)
{
	long long now = -1;

	for (int i = 0; i < 100; i++) {
		now = t_free_memory();
		if (llabs(now - want) <= SLACK)
			break;
		usleep(100 * 1000);
	}
	return now;
}

/* Two rounds. A real driver keeps some memory the first time a server's
 * context does this work (128 MiB on an H200, the same after every later
 * round), so the first round sets the mark; the second must end on it. */
int main(int argc, char **argv)
{
	long long first, before, after;

	t_init(argc, argv);
	first = t_free_memory();
	REQUIRE(first > 0, "cannot read the device's free memory");
	if (kill_round() != T_PASS)
		return T_FAIL;
	before = settled_free_memory(first);
	printf("s_kill: free device memory %lld before the first round, %lld after it\n", first, before);
	if (kill_round() != T_PASS)
		return T_FAIL;
	after = settled_free_memory(before);
	CHECK(llabs(after - before) <= SLACK, "free device memory %lld after the second kill, %lld before", after,
	      before);
	printf("s_kill: free device memory back to %lld bytes\n", after);
	return check_failures() ? T_FAIL : T_PASS;
}
