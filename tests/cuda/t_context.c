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
	REQUIRE_CU(cuMemAlloc(&d, sizeof(host)));
	REQUIRE_CU(cuMemsetD32(d, pattern, 257));
	REQUIRE_CU(cuMemcpyDtoH(host, d, sizeof(host)));
	for (size_t i = 0; i < 257; i++) {
		if (!CHECK(host[i] == pattern, "word %zu is 0x%08x, expected 0x%08x", i, host[i], pattern))
			break;
	}
	REQUIRE_CU(cuMemFree(d));
}

static CUcontext current(void)
{
	CUcontext c = (CUcontext)(uintptr_t)0x1;

	REQUIRE_CU(cuCtxGetCurrent(&c));
	return c;
}

static void test_primary(CUdevice dev)
{
	unsigned int flags = 0xdead;
	int active = -1;
	CUcontext p1 = NULL, p2 = NULL;
	unsigned int ctxflags = 0, version = 0;
	CUdevice d = -1;

	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 0, "primary context active (%d) before any retain", active);

	/* Flags set before the context exists are the ones it is made with. */
	REQUIRE_CU(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary flags 0x%x after SetFlags", flags);
	CHECK(active == 0, "primary context active (%d) after SetFlags alone", active);

	REQUIRE_CU(cuDevicePrimaryCtxRetain(&p1, dev));
	REQUIRE(p1 != NULL, "cuDevicePrimaryCtxRetain gave a NULL context");
	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 1, "primary context inactive (%d) after retain", active);
	REQUIRE_CU(cuDevicePrimaryCtxRetain(&p2, dev));
	CHECK(p1 == p2, "two retains gave different primary contexts %p and %p", (void *)p1, (void *)p2);

	/* Retaining does not make it current. */
	CHECK(current() == NULL, "a context is current after retain alone");
	CHECK_CU(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
	REQUIRE_CU(cuCtxSetCurrent(p1));
	REQUIRE_CU(cuProfilerStart());
	REQUIRE_CU(cuProfilerStop());
	CHECK(current() == p1, "cuCtxSetCurrent(primary) did not make it current");
	REQUIRE_CU(cuCtxGetFlags(&ctxflags));
	CHECK((ctxflags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary context flags 0x%x", ctxflags);
	REQUIRE_CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
	REQUIRE_CU(cuCtxGetFlags(&ctxflags));
	CHECK((ctxflags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD, "flags 0x%x after cuCtxSetFlags(YIELD)", ctxflags);
	REQUIRE_CU(cuCtxGetDevice(&d));
	CHECK(d == dev, "cuCtxGetDevice gave %d, expected %d", d, dev);
	REQUIRE_CU(cuCtxGetApiVersion(p1, &version));
	CHECK(version >= 3020, "primary context API version %u", version);
	REQUIRE_CU(cuCtxSynchronize());
	use_context(0x5eed1234u);
	REQUIRE_CU(cuCtxSetCurrent(NULL));
	CHECK(current() == NULL, "cuCtxSetCurrent(NULL) left a context current");

	/* The last release destroys it. */
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 1, "primary context inactive (%d) with one reference left", active);
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 0, "primary context still active (%d) after the last release", active);

	REQUIRE_CU(cuDevicePrimaryCtxReset(dev));
	REQUIRE_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 0, "primary context active (%d) after reset", active);

	/* And it comes back on the next retain, usable. */
	REQUIRE_CU(cuDevicePrimaryCtxRetain(&p1, dev));
	REQUIRE_CU(cuCtxPushCurrent(p1));
	use_context(0x0badf00du);
	REQUIRE_CU(cuCtxPopCurrent(&p2));
	CHECK(p2 == p1, "popped %p, expected the primary context %p", (void *)p2, (void *)p1);
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
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
	REQUIRE_CU(cuCtxGetCurrent(&a->seen_at_start));
	REQUIRE_CU(cuCtxSetCurrent(a->ctx));
	REQUIRE_CU(cuCtxGetCurrent(&a->seen_after_set));
	a->alloc_ok = cuMemAlloc(&d, 4096) == CUDA_SUCCESS;
	if (a->alloc_ok)
		REQUIRE_CU(cuMemFree(d));
	use_context(0x7e57c0deu);
	REQUIRE_CU(cuCtxSetCurrent(NULL));
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
	REQUIRE_CU(cuCtxCreate(&c1, NULL, 0, dev));
	REQUIRE(c1 != NULL, "cuCtxCreate gave a NULL context");
	CHECK(current() == c1, "a created context is not current");
	REQUIRE_CU(cuCtxGetDevice(&d));
	CHECK(d == dev, "cuCtxGetDevice gave %d, expected %d", d, dev);
	REQUIRE_CU(cuCtxGetApiVersion(c1, &version));
	CHECK(version >= 3020, "created context API version %u", version);
	REQUIRE_CU(cuCtxSynchronize());
	use_context(0xc1c1c1c1u);

	REQUIRE_CU(cuCtxCreate(&c2, NULL, CU_CTX_SCHED_SPIN, dev));
	REQUIRE(c2 != NULL && c2 != c1, "second context %p (first %p)", (void *)c2, (void *)c1);
	CHECK(current() == c2, "the second created context is not current");
	REQUIRE_CU(cuCtxGetFlags(&flags));
	CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN, "flags 0x%x, expected SCHED_SPIN", flags);
	use_context(0xc2c2c2c2u);

	/* The stack: [c1, c2] with c2 on top. */
	REQUIRE_CU(cuCtxPopCurrent(&popped));
	CHECK(popped == c2, "popped %p, expected c2 %p", (void *)popped, (void *)c2);
	CHECK(current() == c1, "after one pop, c1 is not current");
	REQUIRE_CU(cuCtxPopCurrent(&popped));
	CHECK(popped == c1, "popped %p, expected c1 %p", (void *)popped, (void *)c1);
	CHECK(current() == NULL, "after popping both, a context is current");
	r = cuCtxPopCurrent(&popped);
	CHECK(r != CUDA_SUCCESS, "cuCtxPopCurrent on an empty stack succeeded");
	CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	REQUIRE_CU(cuCtxSetCurrent(NULL));           /* a no-op on an empty stack */

	REQUIRE_CU(cuCtxPushCurrent(c1));
	REQUIRE_CU(cuCtxPushCurrent(c2));
	CHECK(current() == c2, "pushed c2 is not current");
	REQUIRE_CU(cuCtxPopCurrent(&popped));
	CHECK(popped == c2 && current() == c1, "push/pop order: popped %p, current %p", (void *)popped,
	      (void *)current());
	REQUIRE_CU(cuCtxSetCurrent(c2));             /* replaces the top: [c2] */
	CHECK(current() == c2, "cuCtxSetCurrent(c2) did not make it current");
	REQUIRE_CU(cuCtxPopCurrent(&popped));
	CHECK(popped == c2 && current() == NULL, "set replaces the top: popped %p, current %p", (void *)popped,
	      (void *)current());

	/* Limits belong to a context. */
	REQUIRE_CU(cuCtxSetCurrent(c1));
	REQUIRE_CU(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
	CHECK(v > 0 && v <= (1u << 20), "default stack size %zu", v);
	REQUIRE_CU(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	CHECK(fifo > 0, "printf FIFO size %zu", fifo);
	REQUIRE_CU(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
	CHECK(heap > 0, "malloc heap size %zu", heap);
	REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
	REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)32 << 20));
	REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, (size_t)3 << 20));
	REQUIRE_CU(cuCtxResetPersistingL2Cache());
	REQUIRE_CU(cuCtxSetCurrent(c2));
	REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192));
	REQUIRE_CU(cuCtxGetLimit(&v2, CU_LIMIT_STACK_SIZE));
	CHECK(v2 >= 8192 && v2 < 65536, "c2 stack size %zu after setting 8192", v2);
	REQUIRE_CU(cuCtxSetCurrent(c1));
	REQUIRE_CU(cuCtxGetLimit(&v1, CU_LIMIT_STACK_SIZE));
	CHECK(v1 >= 4096 && v1 < 8192, "c1 stack size %zu after setting 4096 (and 8192 in c2)", v1);
	REQUIRE_CU(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
	CHECK(heap >= ((size_t)32 << 20), "malloc heap %zu after setting 32 MiB", heap);
	REQUIRE_CU(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
	CHECK(fifo >= ((size_t)3 << 20), "printf FIFO %zu after setting 3 MiB", fifo);
	r = cuCtxGetLimit(&v, CU_LIMIT_MAX);
	CHECK(r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_UNSUPPORTED_LIMIT,
	      "cuCtxGetLimit(CU_LIMIT_MAX) -> %s", t_errname(r));

	REQUIRE_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
	CHECK(least >= greatest, "stream priorities: least %d, greatest %d", least, greatest);
	CHECK(least - greatest < 64, "stream priority range %d..%d is implausible", greatest, least);

	/* A new thread starts with no current context; its changes stay its own. */
	REQUIRE_CU(cuCtxSetCurrent(c2));
	memset(&arg, 0, sizeof(arg));
	arg.ctx = c1;
	REQUIRE(pthread_create(&th, NULL, thread_main, &arg) == 0, "pthread_create");
	pthread_join(th, NULL);
	CHECK(arg.seen_at_start == NULL, "a new thread starts with context %p current", (void *)arg.seen_at_start);
	CHECK(arg.seen_after_set == c1, "the thread set c1 but sees %p", (void *)arg.seen_after_set);
	CHECK(arg.alloc_ok, "cuMemAlloc failed in the thread");
	CHECK(current() == c2, "the thread's cuCtxSetCurrent changed this thread's context");
	use_context(0x12345678u);

	/* Destroying the current context pops it. */
	REQUIRE_CU(cuCtxDestroy(c1));
	CHECK(current() == c2, "destroying a non-current context changed the current one");
	REQUIRE_CU(cuCtxDestroy(c2));
	CHECK(current() == NULL, "the destroyed current context is still current");
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
