// SPDX-License-Identifier: MIT
/*
 * The queries frameworks make on every step, asked as they ask them: many
 * times over, between launches, with the sets that change their answers.
 * Function and kernel attributes (all sixteen, read a thousand times, set
 * to the same value a thousand times, changed and read back), cache
 * preferences, context limits (every one, and after a set), capture status
 * the current context's device, and pointer attributes of allocations.
 * Every answer must be the driver's and
 * stay the same until a set changes it; a launch whose dynamic shared
 * memory needs the changed attribute proves the change reached the driver
 * before the launch did (a launch asking more than the attribute allows
 * fails). tests/system/queries.sh also counts, under openmps, how many of
 * these calls reached the server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define ROUNDS 1000
#define NATTR  16

static CUdevice dev;
static uint64_t rng;

/* Reads every attribute of f (or of kernel k on dev) into v/r. */
static void read_all(CUfunction f, CUkernel k, int *v, CUresult *r)
{
	for (int a = 0; a < NATTR; a++) {
		v[a] = -12345;
		r[a] = k ? cuKernelGetAttribute(&v[a], (CUfunction_attribute)a, k, dev) :
			   cuFuncGetAttribute(&v[a], (CUfunction_attribute)a, f);
	}
}

/* Reads them ROUNDS times more: the same answers each time. */
static void read_again(CUfunction f, CUkernel k, const int *v, const CUresult *r, const char *what)
{
	int v2[NATTR];
	CUresult r2[NATTR];

	for (int i = 0; i < ROUNDS; i++) {
		read_all(f, k, v2, r2);
		for (int a = 0; a < NATTR; a++) {
			if (!CHECK(r2[a] == r[a] && (r[a] != CUDA_SUCCESS || v2[a] == v[a]),
				   "%s attribute %d, round %d: %s %d, first %s %d", what, a, i, t_errname(r2[a]), v2[a],
				   t_errname(r[a]), v[a]))
				return;
		}
	}
}

/* A block of 256 threads adding two vectors with `smem` bytes of dynamic
 * shared memory asked (vadd does not use it): the launch fails unless the
 * function's attribute allows that much. */
static CUresult launch_with_smem(CUfunction f, unsigned int smem)
{
	enum { N = 4096 };
	static float a[N], b[N], c[N];
	CUdeviceptr da, db, dc;
	int n = N;
	void *args[] = { &da, &db, &dc, &n };
	CUresult r;

	t_fill_f32_int(a, N, &rng);
	t_fill_f32_int(b, N, &rng);
	REQUIRE_CU(cuMemAlloc(&da, sizeof(a)));
	REQUIRE_CU(cuMemAlloc(&db, sizeof(b)));
	REQUIRE_CU(cuMemAlloc(&dc, sizeof(c)));
	REQUIRE_CU(cuMemcpyHtoD(da, a, sizeof(a)));
	REQUIRE_CU(cuMemcpyHtoD(db, b, sizeof(b)));
	REQUIRE_CU(cuMemsetD8(dc, 0, sizeof(c)));
	r = cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, smem, NULL, args, NULL);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	if (r == CUDA_SUCCESS) {
		REQUIRE_CU(cuMemcpyDtoH(c, dc, sizeof(c)));
		for (int i = 0; i < N; i++) {
			if (!CHECK(c[i] == a[i] + b[i], "vadd with %u bytes of shared memory: element %d is %g, want %g",
				   smem, i, c[i], a[i] + b[i]))
				break;
		}
	}
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
	return r;
}

static void test_function(CUmodule m)
{
	CUfunction vadd = t_func(m, "vadd"), saxpy = t_func(m, "saxpy");
	int v[NATTR], sv[NATTR], optin = 0, x = -1, big;
	CUresult r[NATTR], sr[NATTR];

	read_all(vadd, NULL, v, r);
	for (int a = 0; a < NATTR; a++)
		printf("  vadd attribute %2d: %s %d\n", a, t_errname(r[a]), r[a] == CUDA_SUCCESS ? v[a] : 0);
	CHECK(r[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] == CUDA_SUCCESS &&
	      v[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] >= 256, "vadd's max threads per block");
	read_again(vadd, NULL, v, r, "vadd");
	CHECK_CU(cuFuncGetAttribute(&x, (CUfunction_attribute)99, vadd), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, vadd), CUDA_ERROR_INVALID_VALUE);

	/* The same value, over and over, as attention kernels set it each step. */
	REQUIRE(r[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] == CUDA_SUCCESS, "no dynamic shared memory attribute");
	for (int i = 0; i < ROUNDS; i++)
		REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					      v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]));
	read_again(vadd, NULL, v, r, "vadd after setting what it was");

	/* A launch past the default fails, then passes once the attribute
	 * allows it: the set reached the driver ahead of the launch. */
	REQUIRE_CU(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
	big = optin - v[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
	REQUIRE(big > v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], "opt-in %d is no more than the default %d",
		optin, v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]);
	CHECK(launch_with_smem(vadd, (unsigned int)big) != CUDA_SUCCESS,
	      "vadd launched with %d bytes of shared memory before it was allowed", big);
	REQUIRE_CU(cuCtxSynchronize());   /* a refused launch leaves no error behind */
	REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, big));
	REQUIRE_CU(launch_with_smem(vadd, (unsigned int)big));
	REQUIRE_CU(cuFuncGetAttribute(&x, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, vadd));
	CHECK(x == big, "max dynamic shared memory reads %d after setting %d", x, big);
	/* Too much is refused, and leaves the value as it was. */
	CHECK_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, big + 1),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1),
		 CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuFuncGetAttribute(&x, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, vadd));
	CHECK(x == big, "max dynamic shared memory reads %d after refused sets, want %d", x, big);
	/* Back down: a launch asking more fails again. */
	REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024));
	CHECK(launch_with_smem(vadd, 2048) != CUDA_SUCCESS, "vadd launched with 2048 bytes of shared memory, 1024 allowed");
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(launch_with_smem(vadd, 1024));

	/* The carveout: a percentage or -1, each read back. */
	for (int c = -1; c <= 100; c += 101 / 4) {
		REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, c));
		REQUIRE_CU(cuFuncGetAttribute(&x, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, vadd));
		CHECK(x == c, "carveout reads %d after setting %d", x, c);
	}
	REQUIRE_CU(cuFuncSetCacheConfig(vadd, CU_FUNC_CACHE_PREFER_SHARED));
	REQUIRE_CU(cuFuncSetCacheConfig(vadd, CU_FUNC_CACHE_PREFER_L1));
	REQUIRE_CU(launch_with_smem(vadd, 0));

	/* Another function of the module kept its own values throughout. */
	read_all(saxpy, NULL, sv, sr);
	CHECK(sr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] == CUDA_SUCCESS &&
	      sv[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] == v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES],
	      "saxpy's max dynamic shared memory %d followed vadd's", sv[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]);
	read_again(saxpy, NULL, sv, sr, "saxpy");
}

static void test_kernel(const char *ptx)
{
	CUlibrary lib;
	CUkernel k;
	CUfunction f;
	int v[NATTR], x = -1;
	CUresult r[NATTR];

	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetKernel(&k, lib, "vadd"));
	read_all(NULL, k, v, r);
	read_again(NULL, k, v, r, "kernel vadd");
	CHECK_CU(cuKernelGetAttribute(&x, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 99), CUDA_ERROR_INVALID_DEVICE);
	for (int i = 0; i < ROUNDS; i++)
		REQUIRE_CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					        v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], k, dev));
	REQUIRE_CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 4096, k, dev));
	REQUIRE_CU(cuKernelGetAttribute(&x, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, dev));
	CHECK(x == 4096, "kernel's max dynamic shared memory reads %d after setting 4096", x);
	/* Its function in this context launches with what the kernel allows. */
	REQUIRE_CU(cuKernelGetFunction(&f, k));
	REQUIRE_CU(launch_with_smem(f, 4096));
	REQUIRE_CU(cuKernelSetCacheConfig(k, CU_FUNC_CACHE_PREFER_EQUAL, dev));
	REQUIRE_CU(cuLibraryUnload(lib));
}

static void test_limits(CUfunction vadd)
{
	size_t v[CU_LIMIT_MAX], x;
	CUresult r[CU_LIMIT_MAX];

	for (int l = 0; l < CU_LIMIT_MAX; l++) {
		v[l] = 0;
		r[l] = cuCtxGetLimit(&v[l], (CUlimit)l);
		printf("  limit %d: %s %zu\n", l, t_errname(r[l]), v[l]);
	}
	CHECK(r[CU_LIMIT_STACK_SIZE] == CUDA_SUCCESS && v[CU_LIMIT_STACK_SIZE] > 0, "no stack size");
	for (int i = 0; i < ROUNDS; i++) {
		for (int l = 0; l < CU_LIMIT_MAX; l++) {
			CUresult r2;

			x = 0;
			r2 = cuCtxGetLimit(&x, (CUlimit)l);
			if (!CHECK(r2 == r[l] && (r2 != CUDA_SUCCESS || x == v[l]), "limit %d, round %d: %s %zu, first %s %zu",
				   l, i, t_errname(r2), x, t_errname(r[l]), v[l]))
				return;
		}
	}
	CHECK(cuCtxGetLimit(&x, (CUlimit)99) != CUDA_SUCCESS, "limit 99 answered");
	CHECK_CU(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
	/* Raised: read back at least as much, as often as asked. */
	REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, v[CU_LIMIT_STACK_SIZE] + 4096));
	for (int i = 0; i < ROUNDS; i++) {
		REQUIRE_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, v[CU_LIMIT_STACK_SIZE] + 4096));
		REQUIRE_CU(cuCtxGetLimit(&x, CU_LIMIT_STACK_SIZE));
		if (!CHECK(x >= v[CU_LIMIT_STACK_SIZE] + 4096, "stack size %zu after setting %zu", x,
			   v[CU_LIMIT_STACK_SIZE] + 4096))
			break;
	}
	REQUIRE_CU(launch_with_smem(vadd, 0));
}

/* Pointer attributes of two allocations, at many offsets: what Triton asks
 * of every tensor it launches on, and cudaPointerGetAttributes of copies. */
static void test_pointers(void)
{
	CUdeviceptr a, b, p, base = 0;
	CUcontext ctx, cur;
	CUmemorytype type = 0;
	unsigned long long id_a = 0, id_b = 0, id;
	size_t size = 0;
	int ordinal = -1;

	REQUIRE_CU(cuCtxGetCurrent(&cur));
	REQUIRE_CU(cuMemAlloc(&a, 1 << 20));
	REQUIRE_CU(cuMemAlloc(&b, 3 << 20));
	REQUIRE_CU(cuPointerGetAttribute(&id_a, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
	REQUIRE_CU(cuPointerGetAttribute(&id_b, CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
	CHECK(id_a != id_b, "two allocations share buffer id %llu", id_a);
	for (int i = 0; i < ROUNDS; i++) {
		CUdeviceptr q = (i & 1 ? b : a), at = q + (CUdeviceptr)((t_rand(&rng) % (1 << 20)) & ~3ull);
		CUpointer_attribute want[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
					       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_IS_MANAGED };
		int managed = -1;
		void *data[] = { &type, &ctx, &ordinal, &managed };

		REQUIRE_CU(cuPointerGetAttribute(&p, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, at));
		REQUIRE_CU(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, at));
		REQUIRE_CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, at));
		REQUIRE_CU(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, at));
		REQUIRE_CU(cuPointerGetAttributes(4, want, data, at));
		if (!CHECK(p == at && base == q && size == (q == a ? 1u << 20 : 3u << 20) && id == (q == a ? id_a : id_b) &&
			   type == CU_MEMORYTYPE_DEVICE && ctx == cur && ordinal == (int)dev && managed == 0,
			   "round %d, %#llx: device pointer %#llx, range %#llx+%zu, id %llu, type %d, context %p, "
			   "device %d, managed %d", i, (unsigned long long)at, (unsigned long long)p,
			   (unsigned long long)base, size, id, (int)type, (void *)ctx, ordinal, managed))
			break;
	}
	CHECK_CU(cuPointerGetAttribute(&p, CU_POINTER_ATTRIBUTE_HOST_POINTER, a), CUDA_ERROR_INVALID_VALUE);
	/* Freed and allocated again: nothing of the old one is answered. */
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemAlloc(&a, 2 << 20));
	REQUIRE_CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a));
	CHECK(size == 2u << 20, "a new allocation of 2 MiB has range size %zu", size);
	REQUIRE_CU(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
	CHECK(id != id_a && id != id_b, "a new allocation has an old buffer id %llu", id);
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
}

static void test_context_queries(void)
{
	CUstream s;
	CUstreamCaptureStatus st;
	CUdevice d;
	CUcontext c, cur;
	cuuint64_t id;

	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuCtxGetCurrent(&cur));
	for (int i = 0; i < ROUNDS; i++) {
		REQUIRE_CU(cuStreamIsCapturing(s, &st));
		CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "stream capturing (%d)", (int)st);
		REQUIRE_CU(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
		REQUIRE_CU(cuCtxGetDevice(&d));
		CHECK(d == dev, "current device %d", (int)d);
		REQUIRE_CU(cuStreamGetCtx(s, &c));
		if (!CHECK(c == cur, "stream's context %p, current %p", (void *)c, (void *)cur))
			break;
	}
	REQUIRE_CU(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
	char *ptx;
	CUmodule m;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	t_primary(dev);
	ptx = t_ptx();
	REQUIRE_CU(cuModuleLoadData(&m, ptx));
	test_function(m);
	test_kernel(ptx);
	test_limits(t_func(m, "vadd"));
	test_pointers();
	test_context_queries();
	REQUIRE_CU(cuModuleUnload(m));
	free(ptx);
	return t_finish();
}
