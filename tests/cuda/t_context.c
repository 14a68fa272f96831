// SPDX-License-Identifier: MIT
/*
 * Contexts: the primary context's reference count, state and flags; created
 * contexts (cuCtxCreate with the CUDA 13 signature: a CUctxCreateParams
 * pointer, NULL allowed); the per-thread context stack (push, pop, set,
 * get); per-context queries and limits; and that the current context is a
 * property of the calling thread. Each context is also used for a small
 * memset and copy, so a handle that only looks right is caught.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cudaProfiler.h>

#include "common.h"

/* Proves ctx (current) can hold memory and run a copy: fills a buffer with
 * `pattern` and reads it back. */
static void use_context(uint32_t pattern)
{
	CUdeviceptr d;
	uint32_t host[257];

	for (size_t i = 0; i < 257; i++)
		host[i] = ~pattern;
	CHECK(cuMemAlloc(&d, sizeof(host)));
	CHECK(cuMemsetD32(d, pattern, 257));
	CHECK(cuMemcpyDtoH(host, d, sizeof(host)));
	for (size_t i = 0; i < 257; i++) {
		if (!EXPECT(host[i] == pattern, "word %zu is 0x%08x, expected 0x%08x", i, host[i], pattern))
			break;
	}
	CHECK(cuMemFree(d));
}

static CUcontext current(void)
{
	CUcontext c = (CUcontext)(uintptr_t)0x1;

	CHECK(cuCtxGetCurrent(&c));
	return c;
}

static void test_primary(CUdevice dev)
{
	unsigned int flags = 0xdead;
	int active = -1;
	CUcontext p1 = NULL, p2 = NULL;
	unsigned int ctxflags = 0, version = 0;
	CUdevice d = -1;

	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(active == 0, "primary context active (%d) before any retain", active);

	/* Flags set before the context exists are the ones it is made with. */
	CHECK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary flags 0x%x after SetFlags", flags);
	EXPECT(active == 0, "primary context active (%d) after SetFlags alone", active);

	CHECK(cuDevicePrimaryCtxRetain(&p1, dev));
	REQUIRE(p1 != NULL, "cuDevicePrimaryCtxRetain gave a NULL context");
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(active == 1, "primary context inactive (%d) after retain", active);
	CHECK(cuDevicePrimaryCtxRetain(&p2, dev));
	EXPECT(p1 == p2, "two retains gave different primary contexts %p and %p", (void *)p1, (void *)p2);

	/* Retaining does not make it current. */
	EXPECT(current() == NULL, "a context is current after retain alone");
	CHECK_ERR(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(cuCtxSetCurrent(p1));
	CHECK(cuProfilerStart());
	CHECK(cuProfilerStop());
	EXPECT(current() == p1, "cuCtxSetCurrent(primary) did not make it current");
	CHECK(cuCtxGetFlags(&ctxflags));
	EXPECT((ctxflags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary context flags 0x%x", ctxflags);
	CHECK(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
	CHECK(cuCtxGetFlags(&ctxflags));
	EXPECT((ctxflags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD, "flags 0x%x after cuCtxSetFlags(YIELD)", ctxflags);
	CHECK(cuCtxGetDevice(&d));
	EXPECT(d == dev, "cuCtxGetDevice gave %d, expected %d", d, dev);
	CHECK(cuCtxGetApiVersion(p1, &version));
	EXPECT(version >= 3020, "primary context API version %u", version);
	CHECK(cuCtxSynchronize());
	use_context(0x5eed1234u);
	CHECK(cuCtxSetCurrent(NULL));
	EXPECT(current() == NULL, "cuCtxSetCurrent(NULL) left a context current");

	/* The last release destroys it. */
	CHECK(cuDevicePrimaryCtxRelease(dev));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(active == 1, "primary context inactive (%d) with one reference left", active);
	CHECK(cuDevicePrimaryCtxRelease(dev));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(active == 0, "primary context still active (%d) after the last release", active);

	CHECK(cuDevicePrimaryCtxReset(dev));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(active == 0, "primary context active (%d) after reset", active);

	/* And it comes back on the next retain, usable. */
	CHECK(cuDevicePrimaryCtxRetain(&p1, dev));
	CHECK(cuCtxPushCurrent(p1));
	use_context(0x0badf00du);
	CHECK(cuCtxPopCurrent(&p2));
	EXPECT(p2 == p1, "popped %p, expected the primary context %p", (void *)p2, (void *)p1);
	CHECK(cuDevicePrimaryCtxRelease(dev));
}

struct thread_arg {
	CUcontext ctx;
	CUcontext seen_at_start;
	CUcontext seen_after_set;
	int alloc_ok;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	CUdeviceptr d = 0;

	a->seen_at_start = (CUcontext)(uintptr_t)0x1;
	CHECK(cuCtxGetCurrent(&a->seen_at_start));
	CHECK(cuCtxSetCurrent(a->ctx));
	CHECK(cuCtxGetCurrent(&a->seen_after_set));
	a->alloc_ok = cuMemAlloc(&d, 4096) == CUDA_SUCCESS;
	if (a->alloc_ok)
		CHECK(cuMemFree(d));
	use_context(0x7e57c0deu);
	CHECK(cuCtxSetCurrent(NULL));
	return NULL;
}

static void test_created(CUdevice dev)
{
	CUcontext c1 = NULL, c2 = NULL, popped = NULL;
	unsigned int flags = 0, version = 0;
	CUdevice d = -1;
	size_t v1 = 0, v2 = 0, v = 0, heap = 0, fifo = 0;
	int least = 1, greatest = 1;
	CUresult r;
	pthread_t th;
	struct thread_arg arg;

	/* cuCtxCreate makes the new context current (pushes it). */
	CHECK(cuCtxCreate(&c1, NULL, 0, dev));
	REQUIRE(c1 != NULL, "cuCtxCreate gave a NULL context");
	EXPECT(current() == c1, "a created context is not current");
	CHECK(cuCtxGetDevice(&d));
	EXPECT(d == dev, "cuCtxGetDevice gave %d, expected %d", d, dev);
	CHECK(cuCtxGetApiVersion(c1, &version));
	EXPECT(version >= 3020, "created context API version %u", version);
	CHECK(cuCtxSynchronize());
	use_context(0xc1c1c1c1u);

	CHECK(cuCtxCreate(&c2, NULL, CU_CTX_SCHED_SPIN, dev));
	REQUIRE(c2 != NULL && c2 != c1, "second context %p (first %p)", (void *)c2, (void *)c1);
	EXPECT(current() == c2, "the second created context is not current");
	CHECK(cuCtxGetFlags(&flags));
	EXPECT((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN, "flags 0x%x, expected SCHED_SPIN", flags);
	use_context(0xc2c2c2c2u);

	/* The stack: [c1, c2] with c2 on top. */
	CHECK(cuCtxPopCurrent(&popped));
	EXPECT(popped == c2, "popped %p, expected c2 %p", (void *)popped, (void *)c2);
	EXPECT(current() == c1, "after one pop, c1 is not current");
	CHECK(cuCtxPopCurrent(&popped));
	EXPECT(popped == c1, "popped %p, expected c1 %p", (void *)popped, (void *)c1);
	EXPECT(current() == NULL, "after popping both, a context is current");
	r = cuCtxPopCurrent(&popped);
	EXPECT(r != CUDA_SUCCESS, "cuCtxPopCurrent on an empty stack succeeded");
	CHECK_ERR(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(cuCtxSetCurrent(NULL));           /* a no-op on an empty stack */

	CHECK(cuCtxPushCurrent(c1));
	CHECK(cuCtxPushCurrent(c2));
	EXPECT(current() == c2, "pushed c2 is not current");
	CHECK(cuCtxPopCurrent(&popped));
	EXPECT(popped == c2 && current() == c1, "push/pop order: popped %p, current %p", (void *)popped,
	       (void *)current());
	CHECK(cuCtxSetCurrent(c2));             /* replaces the top: [c2] */
	EXPECT(current() == c2, "cuCtxSetCurrent(c2) did not make it current");
	CHECK(cuCtxPopCurrent(&popped));
	EXPECT(popped == c2 && current() == NULL, "set replaces the top: popped %p, current %p", (void *)popped,
	       (void *)current());

	/* Limits belong to a context. */
	CHECK(cuCtxSetCurrent(c1));
	CHECK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
	EXPECT(v > 0 && v <= (1u << 20), "default stack size %zu", v);
	CHECK(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	EXPECT(fifo > 0, "printf FIFO size %zu", fifo);
	CHECK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
	EXPECT(heap > 0, "malloc heap size %zu", heap);
	CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
	CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)32 << 20));
	CHECK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, (size_t)3 << 20));
	CHECK(cuCtxResetPersistingL2Cache());
	CHECK(cuCtxSetCurrent(c2));
	CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192));
	CHECK(cuCtxGetLimit(&v2, CU_LIMIT_STACK_SIZE));
	EXPECT(v2 >= 8192 && v2 < 65536, "c2 stack size %zu after setting 8192", v2);
	CHECK(cuCtxSetCurrent(c1));
	CHECK(cuCtxGetLimit(&v1, CU_LIMIT_STACK_SIZE));
	EXPECT(v1 >= 4096 && v1 < 8192, "c1 stack size %zu after setting 4096 (and 8192 in c2)", v1);
	CHECK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
	EXPECT(heap >= ((size_t)32 << 20), "malloc heap %zu after setting 32 MiB", heap);
	CHECK(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	EXPECT(fifo >= ((size_t)3 << 20), "printf FIFO %zu after setting 3 MiB", fifo);
	r = cuCtxGetLimit(&v, CU_LIMIT_MAX);
	EXPECT(r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_UNSUPPORTED_LIMIT,
	       "cuCtxGetLimit(CU_LIMIT_MAX) -> %s", t_errname(r));

	CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
	EXPECT(least >= greatest, "stream priorities: least %d, greatest %d", least, greatest);
	EXPECT(least - greatest < 64, "stream priority range %d..%d is implausible", greatest, least);

	/* A new thread starts with no current context; its changes stay its own. */
	CHECK(cuCtxSetCurrent(c2));
	memset(&arg, 0, sizeof(arg));
	arg.ctx = c1;
	REQUIRE(pthread_create(&th, NULL, thread_main, &arg) == 0, "pthread_create");
	pthread_join(th, NULL);
	EXPECT(arg.seen_at_start == NULL, "a new thread starts with context %p current", (void *)arg.seen_at_start);
	EXPECT(arg.seen_after_set == c1, "the thread set c1 but sees %p", (void *)arg.seen_after_set);
	EXPECT(arg.alloc_ok, "cuMemAlloc failed in the thread");
	EXPECT(current() == c2, "the thread's cuCtxSetCurrent changed this thread's context");
	use_context(0x12345678u);

	/* Destroying the current context pops it. */
	CHECK(cuCtxDestroy(c1));
	EXPECT(current() == c2, "destroying a non-current context changed the current one");
	CHECK(cuCtxDestroy(c2));
	EXPECT(current() == NULL, "the destroyed current context is still current");
}

int main(int argc, char **argv)
{
	CUdevice dev;

	t_init(argc, argv);
	dev = t_device();
	test_primary(dev);
	test_created(dev);
	return t_finish();
}
