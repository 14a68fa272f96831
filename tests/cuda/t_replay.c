// SPDX-License-Identifier: MIT
/*
 * Serving loops: the same run of launches between an input copy and a
 * result copy, over and over, as an inference service makes it. A server
 * may learn such a run and replay it as one graph (src/server/replay.h);
 * whatever it does, every result must be the one the launches give in
 * the order they were made. So each iteration's inputs are fresh, and
 * its result is checked exactly (affine_u32 applied in a known order gives
 * a value only that order gives):
 *   - the same run with the same arguments, then with some scalars changed
 *     and the buffer switched between two (a replay must set those nodes),
 *     then over three and five buffers in turn (a server may keep a graph
 *     per set of arguments, and must pick the right one);
 *   - a run whose one kernel's grid grows with each iteration (a
 *     replayed node must be given each launch's grid);
 *   - runs that leave the learned one part way (another kernel, another
 *     grid, a launch with an attribute, one launch fewer, one more);
 *   - a run cut short whose last launch stores a flag in mapped host
 *     memory that the host then waits for without any CUDA call: whatever
 *     was held must go by itself;
 *   - two streams: a run on one, an event recorded after it, another
 *     stream waiting for the event and reading the run's result;
 *   - the run's kernels' module unloaded and loaded again: a learned run
 *     must not outlive its functions;
 *   - a decoder's step: seven different runs between copies, in turn, two
 *     of them alike for five launches and then not (turns());
 *   - more different runs than a server keeps chunks of (churn()).
 * tests/system/replay.sh runs it with the server replaying always and
 * checks that it did. T_REPLAY_LOOP_MS=M repeats the first loop for M ms
 * at least, long enough for a server to weigh its clients' launch demand;
 * T_REPLAY_TURNS=1 runs only turns(), T_REPLAY_CHURN=1 only churn(),
 * T_REPLAY_GROW=1 only grow().
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define N     1024
#define RUN   8
#define ITERS 40
#define GROW_ITERS 32
#define TURNS 20

static CUfunction f_affine, f_iota, f_store;
static uint64_t rng;

static CUresult affine(CUstream s, CUdeviceptr p, unsigned int mul, unsigned int add, unsigned int grid)
{
	int n = N;
	void *args[] = { &p, &mul, &add, &n };

	return cuLaunchKernel(f_affine, grid, 1, 1, N / grid, 1, 1, 0, s, args, NULL);
}

static void host_affine(uint32_t *v, unsigned int mul, unsigned int add)
{
	for (int i = 0; i < N; i++)
		v[i] = v[i] * mul + add;
}

/* The run: RUN affine steps with per-step (mul, add). */
struct step {
	unsigned int mul, add, grid;
};

static void make_steps(struct step *st, int k)
{
	for (int i = 0; i < RUN; i++) {
		st[i].mul = 3 + 2 * (unsigned int)i;
		st[i].add = 7 + (unsigned int)i;
		st[i].grid = 4;
	}
	if (k >= 0) {   /* changed scalars in some steps, varying with the iteration */
		st[1].add = 100 + (unsigned int)k;
		st[5].mul = 5 + 2 * (unsigned int)(k % 7);
	}
}

/* One iteration: fresh input copied in, the steps launched, the result
 * copied back and checked. `ndo` steps of `st`, plus an extra one if
 * `extra` (mul 9, add 1). */
static void iteration(CUstream s, CUdeviceptr buf, const struct step *st, int ndo, bool extra, const char *what,
		      int k)
{
	uint32_t in[N], want[N], got[N];
	char label[96];

	t_fill_u32(in, N, &rng);
	memcpy(want, in, sizeof(in));
	REQUIRE_CU(cuMemcpyHtoDAsync(buf, in, sizeof(in), s));
	for (int i = 0; i < ndo; i++) {
		REQUIRE_CU(affine(s, buf, st[i].mul, st[i].add, st[i].grid));
		host_affine(want, st[i].mul, st[i].add);
	}
	if (extra) {
		REQUIRE_CU(affine(s, buf, 9, 1, 4));
		host_affine(want, 9, 1);
	}
	REQUIRE_CU(cuMemcpyDtoHAsync(got, buf, sizeof(got), s));
	REQUIRE_CU(cuStreamSynchronize(s));
	snprintf(label, sizeof(label), "%s, iteration %d", what, k);
	CMP_U32(got, want, N, label);
}

/* A decoder's step: several different runs between copies, over and over
 * in the same order (a model's layers between the small copies of one
 * token). Run j is its own kernels' count and grid; the last two share
 * their first five launches and then part (a run that follows one learned
 * run must move to the other part way). Scalars change with each turn.
 * Each run's result is checked. */
static void turns(CUstream s, CUdeviceptr buf)
{
	static const struct { int n; unsigned int grid, grid2; } run[] = {
		{ 4, 1, 1 }, { 6, 2, 2 }, { 9, 8, 8 }, { 12, 16, 16 }, { 16, 32, 32 }, { 10, 4, 4 }, { 10, 4, 8 },
	};

	for (int k = 0; k < TURNS; k++)
		for (unsigned int j = 0; j < sizeof(run) / sizeof(run[0]); j++) {
			uint32_t in[N], want[N], got[N];
			char label[64];

			t_fill_u32(in, N, &rng);
			memcpy(want, in, sizeof(in));
			REQUIRE_CU(cuMemcpyHtoDAsync(buf, in, sizeof(in), s));
			for (int i = 0; i < run[j].n; i++) {
				unsigned int mul = 3 + 2 * (unsigned int)(i + (int)j), add = 1 + (unsigned int)(k * 7 + i);

				REQUIRE_CU(affine(s, buf, mul, add, i < 5 ? run[j].grid : run[j].grid2));
				host_affine(want, mul, add);
			}
			REQUIRE_CU(cuMemcpyDtoHAsync(got, buf, sizeof(got), s));
			REQUIRE_CU(cuStreamSynchronize(s));
			snprintf(label, sizeof(label), "turns: run %u of turn %d", j, k);
			CMP_U32(got, want, N, label);
		}
}

/* More chunks than a server keeps: CHURN runs, each one of TEMPLATES
 * sequences of 2 to 40 launches with random grids (so blocks, and shapes,
 * differ), each seen about seven times in all; the scalars change every
 * run. A server that replays keeps some, builds graphs for those seen
 * again, and drops others as new ones come (tests/system/replay.sh checks
 * that it did, with few executable graphs allowed); every result must
 * still be the one the launches give. */
#define TEMPLATES 60
#define CHURN     450
static void churn(CUstream s, CUdeviceptr buf)
{
	static const unsigned int grids[] = { 1, 2, 4, 8, 16, 32 };
	static uint8_t tmpl[TEMPLATES][40];
	static int len[TEMPLATES];
	uint64_t r = t_rng(7);

	for (int t = 0; t < TEMPLATES; t++) {
		len[t] = 2 + (int)(t_rand(&r) % 39);
		for (int i = 0; i < len[t]; i++)
			tmpl[t][i] = (uint8_t)(t_rand(&r) % 6);
	}
	for (int k = 0; k < CHURN; k++) {
		int t = (int)(t_rand(&r) % TEMPLATES);
		uint32_t in[N], want[N], got[N];
		char label[64];

		t_fill_u32(in, N, &rng);
		memcpy(want, in, sizeof(in));
		REQUIRE_CU(cuMemcpyHtoDAsync(buf, in, sizeof(in), s));
		for (int i = 0; i < len[t]; i++) {
			unsigned int mul = 3 + 2 * (unsigned int)(t_rand(&r) % 50), add = (unsigned int)t_rand(&r);

			REQUIRE_CU(affine(s, buf, mul, add, grids[tmpl[t][i]]));
			host_affine(want, mul, add);
		}
		REQUIRE_CU(cuMemcpyDtoHAsync(got, buf, sizeof(got), s));
		REQUIRE_CU(cuStreamSynchronize(s));
		snprintf(label, sizeof(label), "churn: run %d (sequence %d, %d launches)", k, t, len[t]);
		CMP_U32(got, want, N, label);
	}
}

/* A growing cache: one step writes the first n elements with a grid of
 * n / 32 blocks, n growing by 32 each time (a decoder's kernels over
 * its cache: no grid comes twice). Its arguments stay the same (its
 * bound is the buffer's), only the grid says how far it goes: a server
 * that replays the run must give that node each launch's grid, or it
 * writes too few elements or too many. */
static void grow(CUstream s, CUdeviceptr a)
{
	struct step st[RUN];

	make_steps(st, -1);
	for (int k = 0; k < GROW_ITERS; k++) {
		uint32_t in[N], want[N], got[N];
		unsigned int base = 5000;
		int n = 32 * (1 + k), bound = N;
		void *iota_args[] = { &a, &base, &bound };
		char label[64];

		t_fill_u32(in, N, &rng);
		memcpy(want, in, sizeof(in));
		REQUIRE_CU(cuMemcpyHtoDAsync(a, in, sizeof(in), s));
		for (int i = 0; i < RUN; i++) {
			if (i == 2) {
				REQUIRE_CU(cuLaunchKernel(f_iota, (unsigned int)n / 32, 1, 1, 32, 1, 1, 0, s, iota_args, NULL));
				for (int j = 0; j < n; j++)
					want[j] = base + (uint32_t)j;
			}
			REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
			host_affine(want, st[i].mul, st[i].add);
		}
		REQUIRE_CU(cuMemcpyDtoHAsync(got, a, sizeof(got), s));
		REQUIRE_CU(cuStreamSynchronize(s));
		snprintf(label, sizeof(label), "a growing cache, %d elements", n);
		CMP_U32(got, want, N, label);
	}
}

int main(int argc, char **argv)
{
	struct step st[RUN];
	CUdeviceptr a, b;
	CUstream s, s2;
	CUmodule mod;
	CUevent ev;
	CUdevice dev;

	t_init(argc, argv);
	dev = t_device();
	t_primary(dev);
	rng = t_rng(0);
	mod = t_module();
	f_affine = t_func(mod, "affine_u32");
	f_iota = t_func(mod, "iota_u32");
	f_store = t_func(mod, "store_at");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuMemAlloc(&a, N * sizeof(uint32_t)));
	REQUIRE_CU(cuMemAlloc(&b, N * sizeof(uint32_t)));

	if (getenv("T_REPLAY_TURNS")) {   /* only the decoder's steps (tests/system/replay.sh counts them) */
		turns(s, a);
		goto out;
	}
	if (getenv("T_REPLAY_CHURN")) {   /* only more chunks than are kept */
		churn(s, a);
		goto out;
	}
	if (getenv("T_REPLAY_GROW")) {   /* only the growing cache */
		grow(s, a);
		goto out;
	}

	/* The same run, then with scalars changed and buffers switched. */
	make_steps(st, -1);
	{
		const char *v = getenv("T_REPLAY_LOOP_MS");
		double until = t_now() + (v ? atof(v) / 1000 : 0);

		for (int k = 0; k < ITERS || t_now() < until; k++)
			iteration(s, a, st, RUN, false, "the same run", k);
	}
	for (int k = 0; k < ITERS; k++) {
		make_steps(st, k);
		iteration(s, k % 3 ? a : b, st, RUN, false, "changed arguments", k);
	}

	/* The same run over buffers taken in turn, as a caching allocator
	 * hands a request one of a few sets of blocks: three (a server may
	 * keep a graph for each), then five (more than it keeps). */
	make_steps(st, -1);
	{
		CUdeviceptr more[5] = { a, b, 0, 0, 0 };

		for (int i = 2; i < 5; i++)
			REQUIRE_CU(cuMemAlloc(&more[i], N * sizeof(uint32_t)));
		for (int k = 0; k < ITERS; k++)
			iteration(s, more[k % 3], st, RUN, false, "three buffers in turn", k);
		for (int k = 0; k < ITERS; k++)
			iteration(s, more[k % 5], st, RUN, false, "five buffers in turn", k);
		for (int i = 2; i < 5; i++)
			REQUIRE_CU(cuMemFree(more[i]));
	}

	grow(s, a);

	/* Runs that leave the learned one part way, each between learned ones. */
	make_steps(st, -1);
	for (int k = 0; k < 4; k++)
		iteration(s, a, st, RUN, false, "learned again", k);
	{
		uint32_t got[N], want[N];
		unsigned int base = 1000;
		int n = N;
		void *iota_args[] = { &a, &base, &n };

		/* Another kernel in the middle: iota resets the buffer. */
		for (int i = 0; i < 4; i++)
			REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
		REQUIRE_CU(cuLaunchKernel(f_iota, 4, 1, 1, N / 4, 1, 1, 0, s, iota_args, NULL));
		for (int i = 0; i < N; i++)
			want[i] = base + (uint32_t)i;
		for (int i = 5; i < RUN; i++) {
			REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
			host_affine(want, st[i].mul, st[i].add);
		}
		REQUIRE_CU(cuMemcpyDtoHAsync(got, a, sizeof(got), s));   /* s does not wait for the legacy stream */
		REQUIRE_CU(cuStreamSynchronize(s));
		CMP_U32(got, want, N, "a run with another kernel in the middle");
	}
	iteration(s, a, st, RUN, false, "learned after another kernel", 0);
	st[3].grid = 8;   /* another grid */
	iteration(s, a, st, RUN, false, "a run with another grid", 0);
	st[3].grid = 4;
	iteration(s, a, st, RUN, false, "learned after another grid", 0);
	{
		/* The fourth step through cuLaunchKernelEx with an attribute: a
		 * launch a server never holds must still come after the three
		 * before it and before the rest. */
		uint32_t in[N], want[N], got[N];
		CUlaunchAttribute at = { .id = CU_LAUNCH_ATTRIBUTE_PRIORITY };
		CUlaunchConfig cfg = { .gridDimX = st[3].grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = N / st[3].grid,
				       .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &at, .numAttrs = 1 };
		unsigned int mul = st[3].mul, add = st[3].add;
		int n = N;
		void *args[] = { &a, &mul, &add, &n };

		at.value.priority = 0;
		for (int k = 0; k < 3; k++) {
			t_fill_u32(in, N, &rng);
			memcpy(want, in, sizeof(in));
			REQUIRE_CU(cuMemcpyHtoDAsync(a, in, sizeof(in), s));
			for (int i = 0; i < RUN; i++) {
				if (i == 3)
					REQUIRE_CU(cuLaunchKernelEx(&cfg, f_affine, args, NULL));
				else
					REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
				host_affine(want, st[i].mul, st[i].add);
			}
			REQUIRE_CU(cuMemcpyDtoHAsync(got, a, sizeof(got), s));
			REQUIRE_CU(cuStreamSynchronize(s));
			CMP_U32(got, want, N, "a run with a launch that has an attribute");
		}
	}
	iteration(s, a, st, RUN, false, "learned after a launch with an attribute", 0);
	iteration(s, a, st, RUN - 1, false, "a run one launch short", 0);
	iteration(s, a, st, RUN, false, "learned after a short run", 0);
	iteration(s, a, st, RUN, true, "a run one launch longer", 0);
	for (int k = 0; k < 3; k++)
		iteration(s, a, st, RUN, false, "learned after a longer run", k);

	/* A run cut short whose last launch stores a flag the host waits for
	 * with no CUDA call: what was held must go by itself. */
	{
		volatile uint32_t *flag;
		CUdeviceptr dflag;
		uint32_t in[N];

		REQUIRE_CU(cuMemHostAlloc((void **)&flag, sizeof(*flag), CU_MEMHOSTALLOC_DEVICEMAP));
		REQUIRE_CU(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));
		for (int k = 0; k < 12; k++) {
			unsigned int v = 0x5000u + (unsigned int)k;
			void *sargs[] = { &dflag, &v };
			double t0;
			bool cut = k >= 6 && k % 2 == 0;

			*flag = 0;
			t_fill_u32(in, N, &rng);
			REQUIRE_CU(cuMemcpyHtoDAsync(a, in, sizeof(in), s));
			for (int i = 0; i < 3; i++)
				REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
			REQUIRE_CU(cuLaunchKernel(f_store, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL));
			if (!cut)
				for (int i = 3; i < RUN; i++)
					REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
			t0 = t_now();
			while (*flag != v && t_now() - t0 < 10.0)
				;
			CHECK(*flag == v, "round %d%s: the flag was not stored within 10 s (%#x)", k,
			      cut ? " (run cut short)" : "", *flag);
			REQUIRE_CU(cuStreamSynchronize(s));
		}
		REQUIRE_CU(cuMemFreeHost((void *)flag));
	}

	/* Two streams: the run on s, an event after it, s2 waits and adds. */
	for (int k = 0; k < 6; k++) {
		uint32_t in[N], want[N], got[N];

		t_fill_u32(in, N, &rng);
		memcpy(want, in, sizeof(in));
		REQUIRE_CU(cuMemcpyHtoD(a, in, sizeof(in)));
		for (int i = 0; i < RUN; i++) {
			REQUIRE_CU(affine(s, a, st[i].mul, st[i].add, st[i].grid));
			host_affine(want, st[i].mul, st[i].add);
		}
		REQUIRE_CU(cuEventRecord(ev, s));
		REQUIRE_CU(cuStreamWaitEvent(s2, ev, 0));
		REQUIRE_CU(affine(s2, a, 1, 11, 4));
		host_affine(want, 1, 11);
		REQUIRE_CU(cuStreamSynchronize(s2));
		REQUIRE_CU(cuMemcpyDtoH(got, a, sizeof(got)));
		CMP_U32(got, want, N, "a run on one stream read by another after an event");
	}

	/* The module goes and comes back: the same run with new functions. */
	REQUIRE_CU(cuModuleUnload(mod));
	mod = t_module();
	f_affine = t_func(mod, "affine_u32");
	f_iota = t_func(mod, "iota_u32");
	f_store = t_func(mod, "store_at");
	for (int k = 0; k < 6; k++)
		iteration(s, a, st, RUN, false, "after the module was loaded again", k);
	turns(s, a);

out:
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	REQUIRE_CU(cuEventDestroy(ev));
	REQUIRE_CU(cuStreamDestroy(s2));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuModuleUnload(mod));
	return t_finish();
}
