// SPDX-License-Identifier: MIT
/*
 * Eight threads at once, each with its own stream: six share the primary
 * context (and its module), two create contexts of their own (and load
 * the module there). Each thread runs 100 rounds of allocate, copy in,
 * launch, copy out, verify, free, with sizes and data of its own, so any
 * mix-up between threads' streams, buffers or contexts shows as a wrong
 * result. The threads are released together by a barrier.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define THREADS 8
#define OWN_CONTEXT_FROM 6      /* threads 6 and 7 create their own context */
#define ROUNDS 100

static CUdevice dev;
static CUcontext primary;
static CUmodule primary_mod;
static pthread_barrier_t start;

struct worker {
	int id;
	int rounds_done;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	REQUIRE(p, "malloc(%zu)", n);
	return p;
}

/* One round of vadd: a + b on the device, checked exactly. */
static void round_vadd(CUfunction f, CUstream s, int n, uint64_t *rng, float *a, float *b, float *c, int id, int r)
{
	CUdeviceptr da, db, dc;
	size_t bytes = (size_t)n * sizeof(float);
	void *args[] = { &da, &db, &dc, &n };
	char what[64];
	float *ref = xmalloc(bytes);

	t_fill_f32(a, (size_t)n, rng);
	t_fill_f32(b, (size_t)n, rng);
	for (int i = 0; i < n; i++)
		ref[i] = a[i] + b[i];
	REQUIRE_CU(cuMemAlloc(&da, bytes));
	REQUIRE_CU(cuMemAlloc(&db, bytes));
	REQUIRE_CU(cuMemAlloc(&dc, bytes));
	REQUIRE_CU(cuMemsetD32Async(dc, 0x7fc00001u, (size_t)n, s));
	REQUIRE_CU(cuMemcpyHtoDAsync(da, a, bytes, s));
	REQUIRE_CU(cuMemcpyHtoDAsync(db, b, bytes, s));
	REQUIRE_CU(t_launch(f, (unsigned)((n + 127) / 128), 128, s, args));
	memset(c, 0, bytes);
	REQUIRE_CU(cuMemcpyDtoHAsync(c, dc, bytes, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	snprintf(what, sizeof(what), "thread %d round %d: vadd of %d", id, r, n);
	CMP_F32(c, ref, (size_t)n, 0.0f, 0.0f, what);
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
	free(ref);
}

/* One round of three affine updates in place, checked exactly. */
static void round_affine(CUfunction f, CUstream s, int n, uint64_t *rng, uint32_t *in, uint32_t *out, int id, int r)
{
	CUdeviceptr d;
	size_t bytes = (size_t)n * 4;
	uint32_t mul[3], add[3];
	uint32_t *want = xmalloc(bytes);
	char what[64];

	t_fill_u32(in, (size_t)n, rng);
	for (int k = 0; k < 3; k++) {
		mul[k] = (uint32_t)t_rand(rng) | 1;
		add[k] = (uint32_t)t_rand(rng);
	}
	for (int i = 0; i < n; i++) {
		uint32_t v = in[i];

		for (int k = 0; k < 3; k++)
			v = v * mul[k] + add[k];
		want[i] = v;
	}
	REQUIRE_CU(cuMemAlloc(&d, bytes));
	REQUIRE_CU(cuMemcpyHtoDAsync(d, in, bytes, s));
	for (int k = 0; k < 3; k++) {
		void *args[] = { &d, &mul[k], &add[k], &n };

		REQUIRE_CU(t_launch(f, (unsigned)((n + 255) / 256), 256, s, args));
	}
	memset(out, 0, bytes);
	REQUIRE_CU(cuMemcpyDtoHAsync(out, d, bytes, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	snprintf(what, sizeof(what), "thread %d round %d: affine of %d", id, r, n);
	CMP_U32(out, want, (size_t)n, what);
	REQUIRE_CU(cuMemFree(d));
	free(want);
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	const int max_n = 24000;
	uint64_t rng = t_rng(100 + (unsigned)w->id);
	CUcontext own = NULL, cur = NULL;
	CUmodule mod;
	CUfunction vadd, affine;
	CUstream s;
	float *a, *b, *c;
	uint32_t *in, *out;
	int pinned = w->id % 2;

	if (w->id >= OWN_CONTEXT_FROM) {
		REQUIRE_CU(cuCtxCreate(&own, NULL, 0, dev));
		mod = t_module();
	} else {
		REQUIRE_CU(cuCtxSetCurrent(primary));
		mod = primary_mod;
	}
	vadd = t_func(mod, "vadd");
	affine = t_func(mod, "affine_u32");
	/* Odd threads use blocking streams and pinned buffers, even ones the opposite. */
	REQUIRE_CU(cuStreamCreate(&s, pinned ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
	if (pinned) {
		REQUIRE_CU(cuMemAllocHost((void **)&a, (size_t)max_n * 4));
		REQUIRE_CU(cuMemAllocHost((void **)&b, (size_t)max_n * 4));
		REQUIRE_CU(cuMemAllocHost((void **)&c, (size_t)max_n * 4));
	} else {
		a = xmalloc((size_t)max_n * 4);
		b = xmalloc((size_t)max_n * 4);
		c = xmalloc((size_t)max_n * 4);
	}
	in = (uint32_t *)(void *)a;
	out = (uint32_t *)(void *)c;

	pthread_barrier_wait(&start);
	for (int r = 0; r < ROUNDS; r++) {
		int n = 1000 + (int)((unsigned)(r * 7919 + w->id * 104729) % (unsigned)(max_n - 1000));

		if ((r + w->id) % 2)
			round_vadd(vadd, s, n, &rng, a, b, c, w->id, r);
		else
			round_affine(affine, s, n, &rng, in, out, w->id, r);
		w->rounds_done++;
	}
	REQUIRE_CU(cuCtxGetCurrent(&cur));
	CHECK(cur == (own ? own : primary), "thread %d: current context changed to %p during the run", w->id,
	      (void *)cur);

	REQUIRE_CU(cuStreamDestroy(s));
	if (pinned) {
		REQUIRE_CU(cuMemFreeHost(a));
		REQUIRE_CU(cuMemFreeHost(b));
		REQUIRE_CU(cuMemFreeHost(c));
	} else {
		free(a);
		free(b);
		free(c);
	}
	if (own) {
		REQUIRE_CU(cuModuleUnload(mod));
		REQUIRE_CU(cuCtxDestroy(own));
	} else {
		REQUIRE_CU(cuCtxSetCurrent(NULL));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	struct worker w[THREADS];
	double t0;

	t_init(argc, argv);
	dev = t_device();
	primary = t_primary(dev);
	primary_mod = t_module();
	REQUIRE(pthread_barrier_init(&start, NULL, THREADS) == 0, "pthread_barrier_init");

	t0 = t_now();
	for (int i = 0; i < THREADS; i++) {
		w[i].id = i;
		w[i].rounds_done = 0;
		REQUIRE(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK(w[i].rounds_done == ROUNDS, "thread %d finished %d of %d rounds", i, w[i].rounds_done, ROUNDS);
	}
	printf("  %d threads x %d rounds in %.2f s\n", THREADS, ROUNDS, t_now() - t0);
	pthread_barrier_destroy(&start);

	REQUIRE_CU(cuModuleUnload(primary_mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
