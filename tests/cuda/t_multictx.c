// SPDX-License-Identifier: MIT
/*
 * Two contexts on device 0 in one process, each with its own module,
 * stream and memory. Work in one must not disturb the other: memory keeps
 * its contents while the other context runs kernels and memsets, each
 * module has its own g_counter, pointers report their own context, work
 * interleaved between the two comes out right in both, cuCtxSynchronize
 * works in each, and destroying one leaves the other whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define N 65536

struct side {
	const char *name;
	CUcontext ctx;
	CUmodule mod;
	CUfunction affine, iota, bump;
	CUstream stream;
	CUdeviceptr buf, counter;
	uint32_t host[N];       /* what buf should hold */
	uint32_t counter_val;   /* what g_counter should hold */
};

static struct side sides[2];
static uint32_t scratch[N];
static uint64_t rng;

static void enter(struct side *s)
{
	REQUIRE_CU(cuCtxSetCurrent(s->ctx));
}

static void setup(struct side *s, CUdevice dev, const char *name)
{
	size_t bytes = 0;

	s->name = name;
	REQUIRE_CU(cuCtxCreate(&s->ctx, NULL, 0, dev));
	enter(s);
	s->mod = t_module();
	s->affine = t_func(s->mod, "affine_u32");
	s->iota = t_func(s->mod, "iota_u32");
	s->bump = t_func(s->mod, "bump_global");
	REQUIRE_CU(cuModuleGetGlobal(&s->counter, &bytes, s->mod, "g_counter"));
	/* Blocking: the synchronous copies below are ordered before its work. */
	REQUIRE_CU(cuStreamCreate(&s->stream, CU_STREAM_DEFAULT));
	REQUIRE_CU(cuMemAlloc(&s->buf, sizeof(s->host)));
	t_fill_u32(s->host, N, &rng);
	REQUIRE_CU(cuMemcpyHtoD(s->buf, s->host, sizeof(s->host)));
	s->counter_val = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemcpyHtoD(s->counter, &s->counter_val, 4));
	REQUIRE_CU(cuCtxSynchronize());
}

/* Queues p = p * mul + add on the side's stream and updates the expectation. */
static void queue_affine(struct side *s)
{
	uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
	int n = N;
	void *args[] = { &s->buf, &mul, &add, &n };

	REQUIRE_CU(t_launch(s->affine, N / 256, 256, s->stream, args));
	for (int i = 0; i < N; i++)
		s->host[i] = s->host[i] * mul + add;
}

static void queue_bump(struct side *s)
{
	uint32_t by = ((uint32_t)t_rand(&rng) >> 4) | 1;
	void *args[] = { &by };

	REQUIRE_CU(t_launch(s->bump, 1, 32, s->stream, args));
	s->counter_val += by;
}

/* Reads the side's buffer and counter back (its context current) and compares. */
static void verify(struct side *s, const char *when)
{
	char what[128];
	uint32_t c = 0;

	memset(scratch, 0, sizeof(scratch));
	REQUIRE_CU(cuMemcpyDtoH(scratch, s->buf, sizeof(scratch)));
	snprintf(what, sizeof(what), "context %s buffer %s", s->name, when);
	CMP_U32(scratch, s->host, N, what);
	REQUIRE_CU(cuMemcpyDtoH(&c, s->counter, 4));
	CHECK(c == s->counter_val, "context %s g_counter %s: %u, expected %u", s->name, when, c, s->counter_val);
}

int main(int argc, char **argv)
{
	CUdevice dev;
	struct side *a = &sides[0], *b = &sides[1];
	CUcontext owner = NULL;
	CUdeviceptr extra;

	t_init(argc, argv);
	rng = t_rng(4);
	dev = t_device();
	setup(a, dev, "A");
	setup(b, dev, "B");
	CHECK(a->ctx != b->ctx, "two cuCtxCreate calls gave the same context");

	/* Each pointer belongs to its own context. */
	enter(a);
	REQUIRE_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a->buf));
	CHECK(owner == a->ctx, "A's buffer reports context %p, expected %p", (void *)owner, (void *)a->ctx);
	REQUIRE_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b->buf));
	CHECK(owner == b->ctx, "B's buffer reports context %p, expected %p", (void *)owner, (void *)b->ctx);

	/* B works hard; A's memory and counter must not move. */
	enter(b);
	for (int k = 0; k < 20; k++) {
		queue_affine(b);
		queue_bump(b);
	}
	REQUIRE_CU(cuMemAlloc(&extra, sizeof(scratch)));
	REQUIRE_CU(cuMemsetD32Async(extra, 0xffffffffu, N, b->stream));
	REQUIRE_CU(cuStreamSynchronize(b->stream));
	REQUIRE_CU(cuCtxSynchronize());
	verify(b, "after its own work");
	enter(a);
	REQUIRE_CU(cuCtxSynchronize());
	verify(a, "after B's work");

	/* Interleaved: launches alternate between the contexts. */
	for (int k = 0; k < 25; k++) {
		enter(a);
		queue_affine(a);
		queue_bump(a);
		enter(b);
		queue_affine(b);
		queue_bump(b);
	}
	enter(a);
	REQUIRE_CU(cuCtxSynchronize());
	verify(a, "after interleaved work");
	enter(b);
	REQUIRE_CU(cuCtxSynchronize());
	verify(b, "after interleaved work");

	/* Destroying B leaves A whole and working. */
	REQUIRE_CU(cuMemFree(extra));
	REQUIRE_CU(cuStreamDestroy(b->stream));
	REQUIRE_CU(cuModuleUnload(b->mod));
	REQUIRE_CU(cuCtxDestroy(b->ctx));
	enter(a);
	verify(a, "after B was destroyed");
	queue_affine(a);
	queue_bump(a);
	REQUIRE_CU(cuStreamSynchronize(a->stream));
	verify(a, "after work following B's destruction");

	REQUIRE_CU(cuMemFree(a->buf));
	REQUIRE_CU(cuStreamDestroy(a->stream));
	REQUIRE_CU(cuModuleUnload(a->mod));
	REQUIRE_CU(cuCtxDestroy(a->ctx));
	return t_finish();
}
