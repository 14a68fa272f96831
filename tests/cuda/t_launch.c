// SPDX-License-Identifier: MIT
/*
 * Kernel launches and how their parameters travel: pointers and ints
 * (vadd), a float by value (saxpy), a struct by value with padding
 * (mixed_arg), the `extra` packed-buffer form (CU_LAUNCH_PARAM_BUFFER_*),
 * cuLaunchKernelEx with and without attributes, cooperative launches, a
 * CUkernel launched as a CUfunction, grids of many blocks, occupancy
 * queries, and launches that must fail (too many threads per block, too
 * much shared memory, an empty grid) without spoiling the context.
 *
 * Results are compared with host references: exactly where the arithmetic
 * is exact (float adds, sums of small integers, integer maths), within an
 * ulp-scale bound where the device may fuse a multiply-add.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static CUdevice dev;
static CUmodule mod;
/* A blocking stream, so the synchronous copies and memsets (legacy default
 * stream, possibly still in flight when they return) are ordered before it. */
static CUstream stream;
static uint64_t rng;
static int sm_count;

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	REQUIRE(p, "malloc(%zu)", n);
	return p;
}

static void test_vadd_big(void)
{
	const int n = 1000003;          /* 3907 blocks of 256 and a ragged tail */
	size_t bytes = (size_t)n * sizeof(float);
	float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes + 64), *ref = xmalloc(bytes);
	CUdeviceptr da, db, dc;
	CUfunction f = t_func(mod, "vadd");
	int nn = n;
	void *args[] = { &da, &db, &dc, &nn };

	t_fill_f32(a, (size_t)n, &rng);
	t_fill_f32(b, (size_t)n, &rng);
	for (int i = 0; i < n; i++)
		ref[i] = a[i] + b[i];
	REQUIRE_CU(cuMemAlloc(&da, bytes));
	REQUIRE_CU(cuMemAlloc(&db, bytes));
	REQUIRE_CU(cuMemAlloc(&dc, bytes + 64));     /* 16 floats past n must stay untouched */
	REQUIRE_CU(cuMemcpyHtoD(da, a, bytes));
	REQUIRE_CU(cuMemcpyHtoD(db, b, bytes));
	REQUIRE_CU(cuMemsetD32(dc, 0x7fc00001u, (size_t)n + 16));
	REQUIRE_CU(t_launch(f, (unsigned)((n + 255) / 256), 256, stream, args));
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(c, dc, bytes + 64));
	CMP_F32(c, ref, (size_t)n, 0.0f, 0.0f, "vadd over 3907 blocks");
	for (int i = 0; i < 16; i++) {
		uint32_t w;

		memcpy(&w, &c[n + i], 4);
		CHECK(w == 0x7fc00001u, "vadd wrote past n at element %d", n + i);
	}
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
	free(a);
	free(b);
	free(c);
	free(ref);
}

/* saxpy with a float by value, launched through kernelParams and through a
 * packed buffer whose layout has padding after the float. */
static void test_saxpy(void)
{
	const int n = 70001;
	size_t bytes = (size_t)n * sizeof(float);
	float *x = xmalloc(bytes), *y = xmalloc(bytes), *out = xmalloc(bytes), *ref = xmalloc(bytes);
	float alpha = 1.5f + (float)(t_rand(&rng) % 1000) / 1000.0f;
	CUdeviceptr dx, dy;
	CUfunction f = t_func(mod, "saxpy");
	int nn = n;

	t_fill_f32(x, (size_t)n, &rng);
	t_fill_f32(y, (size_t)n, &rng);
	for (int i = 0; i < n; i++)
		ref[i] = alpha * x[i] + y[i];
	REQUIRE_CU(cuMemAlloc(&dx, bytes));
	REQUIRE_CU(cuMemAlloc(&dy, bytes));
	REQUIRE_CU(cuMemcpyHtoD(dx, x, bytes));

	for (int form = 0; form < 2; form++) {
		REQUIRE_CU(cuMemcpyHtoD(dy, y, bytes));
		if (form == 0) {
			void *args[] = { &alpha, &dx, &dy, &nn };

			REQUIRE_CU(cuLaunchKernel(f, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1, 0, stream, args,
						  NULL));
		} else {
			unsigned char buf[28];
			size_t size = sizeof(buf);
			void *extra[] = {
				CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
				CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
				CU_LAUNCH_PARAM_END,
			};

			memset(buf, 0xcc, sizeof(buf));
			memcpy(buf + 0, &alpha, 4);     /* 4 bytes of padding follow */
			memcpy(buf + 8, &dx, 8);
			memcpy(buf + 16, &dy, 8);
			memcpy(buf + 24, &nn, 4);
			REQUIRE_CU(cuLaunchKernel(f, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1, 0, stream, NULL,
						  extra));
		}
		REQUIRE_CU(cuStreamSynchronize(stream));
		memset(out, 0, bytes);
		REQUIRE_CU(cuMemcpyDtoH(out, dy, bytes));
		/* The device may fuse a*x+y into one rounding. */
		CMP_F32(out, ref, (size_t)n, 1e-6f, 1e-5f, form ? "saxpy (extra buffer)" : "saxpy (kernelParams)");
	}
	REQUIRE_CU(cuMemFree(dx));
	REQUIRE_CU(cuMemFree(dy));
	free(x);
	free(y);
	free(out);
	free(ref);
}

static void test_mixed(void)
{
	CUfunction f = t_func(mod, "mixed_arg");
	CUdeviceptr dout;
	double got = 0, want;
	struct t_mixed m;
	void *args[] = { &m, &dout };

	memset(&m, 0x77, sizeof(m));    /* padding holds junk on purpose */
	m.a = (int)(t_rand(&rng) % 2000001) - 1000000;
	if (m.a == 0)
		m.a = 17;
	m.b = (double)(int64_t)(t_rand(&rng) % 1000000) / 7.0 + 0.25;
	for (int k = 0; k < 5; k++) {
		signed char c = (signed char)(t_rand(&rng) >> 56);

		m.c[k] = (char)(c ? c : 1);
	}
	want = m.a + m.b;
	for (int k = 0; k < 5; k++)
		want += m.c[k];

	REQUIRE_CU(cuMemAlloc(&dout, 8));
	REQUIRE_CU(cuMemsetD32(dout, 0xffffffffu, 2));      /* a NaN */
	REQUIRE_CU(t_launch(f, 1, 32, 0, args));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(&got, dout, 8));
	CHECK(got == want, "mixed_arg(a=%d b=%.17g c=%d,%d,%d,%d,%d) = %.17g, expected %.17g", m.a, m.b, m.c[0],
	      m.c[1], m.c[2], m.c[3], m.c[4], got, want);
	REQUIRE_CU(cuMemFree(dout));
}

static void check_iota(CUdeviceptr d, uint32_t base, int n, const char *what)
{
	uint32_t *got = xmalloc((size_t)n * 4), *want = xmalloc((size_t)n * 4);

	for (int i = 0; i < n; i++)
		want[i] = base + (uint32_t)i;
	REQUIRE_CU(cuMemcpyDtoH(got, d, (size_t)n * 4));
	CMP_U32(got, want, (size_t)n, what);
	free(got);
	free(want);
}

static void test_iota_and_ex(void)
{
	const int n = 70001;
	CUfunction f = t_func(mod, "iota_u32");
	CUdeviceptr d;
	uint32_t base;
	int nn = n, least = 0, greatest = 0;
	void *args[] = { &d, &base, &nn };
	CUlaunchConfig cfg;
	CUlaunchAttribute attr[2];

	REQUIRE_CU(cuMemAlloc(&d, (size_t)n * 4));

	base = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
	REQUIRE_CU(t_launch(f, (unsigned)((n + 255) / 256), 256, stream, args));
	REQUIRE_CU(cuStreamSynchronize(stream));
	check_iota(d, base, n, "iota_u32");

	/* cuLaunchKernelEx without attributes. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = (unsigned)((n + 127) / 128);
	cfg.gridDimY = 1;
	cfg.gridDimZ = 1;
	cfg.blockDimX = 128;
	cfg.blockDimY = 1;
	cfg.blockDimZ = 1;
	cfg.hStream = stream;
	base = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
	REQUIRE_CU(cuLaunchKernelEx(&cfg, f, args, NULL));
	REQUIRE_CU(cuStreamSynchronize(stream));
	check_iota(d, base, n, "iota_u32 through cuLaunchKernelEx");

	/* With a launch attribute: the highest stream priority. */
	REQUIRE_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
	memset(attr, 0, sizeof(attr));
	attr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	attr[0].value.priority = greatest;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	base = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
	REQUIRE_CU(cuLaunchKernelEx(&cfg, f, args, NULL));
	REQUIRE_CU(cuStreamSynchronize(stream));
	check_iota(d, base, n, "iota_u32 through cuLaunchKernelEx with a priority");

	/* With the packed-buffer form of the parameters. */
	{
		unsigned char buf[16];  /* p at 0, base at 8, n at 12 */
		size_t size = sizeof(buf);
		void *extra[] = {
			CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
			CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			CU_LAUNCH_PARAM_END,
		};

		base = (uint32_t)t_rand(&rng) | 1;
		memcpy(buf, &d, 8);
		memcpy(buf + 8, &base, 4);
		memcpy(buf + 12, &nn, 4);
		cfg.numAttrs = 0;
		cfg.attrs = NULL;
		REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
		REQUIRE_CU(cuLaunchKernelEx(&cfg, f, NULL, extra));
		REQUIRE_CU(cuStreamSynchronize(stream));
		check_iota(d, base, n, "iota_u32 through cuLaunchKernelEx with extra");
	}
	REQUIRE_CU(cuMemFree(d));
}

/* reduce_sum adds into *out: start it at a known non-zero value. Small
 * integer inputs make the sum exact in any order of the atomics. */
static void test_reduce(void)
{
	const int n = 100000;
	float *x = xmalloc((size_t)n * 4), start = 1000.0f, got, want = start;
	CUdeviceptr dx, dout;
	CUfunction f = t_func(mod, "reduce_sum");
	int nn = n;

	t_fill_f32_int(x, (size_t)n, &rng);
	for (int i = 0; i < n; i++)
		want += x[i];
	REQUIRE_CU(cuMemAlloc(&dx, (size_t)n * 4));
	REQUIRE_CU(cuMemAlloc(&dout, 4));
	REQUIRE_CU(cuMemcpyHtoD(dx, x, (size_t)n * 4));

	for (int form = 0; form < 2; form++) {
		REQUIRE_CU(cuMemcpyHtoD(dout, &start, 4));
		if (form == 0) {
			void *args[] = { &dx, &dout, &nn };

			REQUIRE_CU(t_launch(f, (unsigned)((n + 255) / 256), 256, stream, args));
		} else {
			struct reduce_args {
				CUdeviceptr x, out;
				int n;
			} packed;
			/* The parameters end after n: no tail padding. */
			size_t size = offsetof(struct reduce_args, n) + sizeof(int);
			void *extra[] = {
				CU_LAUNCH_PARAM_BUFFER_POINTER, &packed,
				CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
				CU_LAUNCH_PARAM_END,
			};

			memset(&packed, 0, sizeof(packed));
			packed.x = dx;
			packed.out = dout;
			packed.n = n;
			REQUIRE_CU(cuLaunchKernel(f, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, stream, NULL,
						  extra));
		}
		REQUIRE_CU(cuStreamSynchronize(stream));
		got = 0;
		REQUIRE_CU(cuMemcpyDtoH(&got, dout, 4));
		CHECK(got == want, "reduce_sum (%s) = %.1f, expected %.1f", form ? "extra" : "kernelParams",
		      (double)got, (double)want);
	}
	REQUIRE_CU(cuMemFree(dx));
	REQUIRE_CU(cuMemFree(dout));
	free(x);
}

static void test_cooperative(void)
{
	CUfunction f = t_func(mod, "vadd");
	int coop = 0, per_sm = 0, n;
	unsigned grid;
	float *a, *b, *c, *ref;
	CUdeviceptr da, db, dc;

	REQUIRE_CU(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
	if (!coop) {
		printf("  (no cooperative launch on this device)\n");
		return;
	}
	REQUIRE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 128, 0));
	REQUIRE(per_sm > 0, "occupancy of vadd at 128 threads: %d blocks per SM", per_sm);
	grid = (unsigned)(per_sm * sm_count);
	if (grid > 64)
		grid = 64;
	n = (int)grid * 128;
	a = xmalloc((size_t)n * 4);
	b = xmalloc((size_t)n * 4);
	c = xmalloc((size_t)n * 4);
	ref = xmalloc((size_t)n * 4);
	t_fill_f32(a, (size_t)n, &rng);
	t_fill_f32(b, (size_t)n, &rng);
	for (int i = 0; i < n; i++)
		ref[i] = a[i] + b[i];
	REQUIRE_CU(cuMemAlloc(&da, (size_t)n * 4));
	REQUIRE_CU(cuMemAlloc(&db, (size_t)n * 4));
	REQUIRE_CU(cuMemAlloc(&dc, (size_t)n * 4));
	REQUIRE_CU(cuMemcpyHtoD(da, a, (size_t)n * 4));
	REQUIRE_CU(cuMemcpyHtoD(db, b, (size_t)n * 4));

	for (int form = 0; form < 2; form++) {
		void *args[] = { &da, &db, &dc, &n };

		REQUIRE_CU(cuMemsetD32(dc, 0x7fc00001u, (size_t)n));
		if (form == 0) {
			REQUIRE_CU(cuLaunchCooperativeKernel(f, grid, 1, 1, 128, 1, 1, 0, stream, args));
		} else {
			CUlaunchConfig cfg;
			CUlaunchAttribute attr;

			memset(&cfg, 0, sizeof(cfg));
			memset(&attr, 0, sizeof(attr));
			attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
			attr.value.cooperative = 1;
			cfg.gridDimX = grid;
			cfg.gridDimY = cfg.gridDimZ = 1;
			cfg.blockDimX = 128;
			cfg.blockDimY = cfg.blockDimZ = 1;
			cfg.hStream = stream;
			cfg.attrs = &attr;
			cfg.numAttrs = 1;
			REQUIRE_CU(cuLaunchKernelEx(&cfg, f, args, NULL));
		}
		REQUIRE_CU(cuStreamSynchronize(stream));
		REQUIRE_CU(cuMemcpyDtoH(c, dc, (size_t)n * 4));
		CMP_F32(c, ref, (size_t)n, 0.0f, 0.0f, form ? "vadd, cooperative through cuLaunchKernelEx"
							     : "vadd through cuLaunchCooperativeKernel");
	}
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
	free(a);
	free(b);
	free(c);
	free(ref);
}

/* A CUkernel from a library, cast to CUfunction, launches in the current context. */
static void test_kernel_handle(void)
{
	char *ptx = t_ptx();
	CUlibrary lib;
	CUkernel k;
	CUdeviceptr d;
	const int n = 4099;
	uint32_t base = (uint32_t)t_rand(&rng) | 1;
	int nn = n;
	void *args[] = { &d, &base, &nn };

	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetKernel(&k, lib, "iota_u32"));
	REQUIRE_CU(cuMemAlloc(&d, (size_t)n * 4));
	REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
	REQUIRE_CU(cuLaunchKernel((CUfunction)k, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1, 0, stream, args, NULL));
	REQUIRE_CU(cuStreamSynchronize(stream));
	check_iota(d, base, n, "iota_u32 launched as a CUkernel");
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuLibraryUnload(lib));
	free(ptx);
}

static void test_occupancy(void)
{
	CUfunction f = t_func(mod, "vadd");
	int per_sm = 0, max_blocks = 0, min_grid = 0, block = 0;

	REQUIRE_CU(cuDeviceGetAttribute(&max_blocks, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, dev));
	REQUIRE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 128, 0));
	CHECK(per_sm >= 1 && per_sm <= max_blocks, "vadd at 128 threads: %d blocks per SM (max %d)", per_sm,
	      max_blocks);
	REQUIRE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 1024, 0));
	CHECK(per_sm >= 1 && per_sm <= 2, "vadd at 1024 threads: %d blocks per SM", per_sm);
	REQUIRE_CU(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, NULL, 0, 0));
	CHECK(block >= 32 && block <= 1024 && block % 32 == 0, "suggested block size %d", block);
	CHECK(min_grid >= sm_count, "suggested minimum grid %d for %d SMs", min_grid, sm_count);
	printf("  occupancy: vadd suggests %d threads, grid >= %d\n", block, min_grid);
}

/* A launch that must fail, now or at the next synchronize; the context stays usable. */
static void expect_launch_failure(CUresult launched, const char *what)
{
	CUresult r = launched;

	if (launched == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	CHECK(r != CUDA_SUCCESS, "%s: accepted, and the next synchronize succeeded too", what);
	if (r != CUDA_SUCCESS)
		printf("  %s -> %s%s\n", what, t_errname(r), launched == CUDA_SUCCESS ? " (at synchronize)" : "");
}

static void test_invalid(void)
{
	CUfunction f = t_func(mod, "iota_u32");
	CUdeviceptr d;
	uint32_t base = 0x1000;
	int n = 2048, optin = 0;
	void *args[] = { &d, &base, &n };

	REQUIRE_CU(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
	REQUIRE_CU(cuMemAlloc(&d, (size_t)n * 4));
	expect_launch_failure(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, 0, args, NULL), "2048 threads per block");
	expect_launch_failure(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, 0, args, NULL), "32x32x2 threads per block");
	expect_launch_failure(cuLaunchKernel(f, 0, 1, 1, 128, 1, 1, 0, 0, args, NULL), "a grid of 0 blocks");
	expect_launch_failure(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, (unsigned)optin + 1024, 0, args, NULL),
			      "more dynamic shared memory than the device has");

	/* None of that is sticky. */
	base = (uint32_t)t_rand(&rng) | 1;
	REQUIRE_CU(cuMemsetD32(d, 0xeeeeeeeeu, (size_t)n));
	REQUIRE_CU(t_launch(f, (unsigned)(n / 256), 256, 0, args));
	REQUIRE_CU(cuCtxSynchronize());
	check_iota(d, base, n, "iota_u32 after refused launches");
	REQUIRE_CU(cuMemFree(d));
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	rng = t_rng(2);
	dev = t_device();
	t_primary(dev);
	mod = t_module();
	REQUIRE_CU(cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	REQUIRE_CU(cuStreamCreate(&stream, CU_STREAM_DEFAULT));

	test_vadd_big();
	test_saxpy();
	test_mixed();
	test_iota_and_ex();
	test_reduce();
	test_cooperative();
	test_kernel_handle();
	test_occupancy();
	test_invalid();

	REQUIRE_CU(cuStreamDestroy(stream));
	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
