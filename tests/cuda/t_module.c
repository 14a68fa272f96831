// SPDX-License-Identifier: MIT
/*
 * Modules and libraries: loading the kernels' PTX with cuModuleLoadData,
 * cuModuleLoadDataEx (with JIT log options, and a broken image that must be
 * refused) and cuLibraryLoadData; looking up functions, kernels and the
 * __device__ variable g_counter (its size, and that writes through the
 * returned address are what bump_global sees); each module owning its own
 * copy of that variable; function and kernel attributes, read and set;
 * cuFuncGetParamInfo against the C layout of the parameters; unloading;
 * the __managed__ variable m_counter through the CPU and a kernel.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "../kernels/long_name.h"

static CUdevice dev;
static uint64_t rng;

/* Runs vadd from f on random floats and checks the sums exactly. */
static void run_vadd(CUfunction f, const char *what)
{
	t_run_vadd(f, &rng, what);
}

/* Writes `start` to the counter at `addr`, runs bump_global three times
 * and checks the sum. */
static void run_bump(CUfunction bump, CUdeviceptr addr, const char *what)
{
	uint32_t start = (uint32_t)t_rand(&rng) | 1, by[3], want, got = 0;

	REQUIRE_CU(cuMemcpyHtoD(addr, &start, 4));
	want = start;
	for (int i = 0; i < 3; i++) {
		void *args[] = { &by[i] };

		by[i] = ((uint32_t)t_rand(&rng) >> 8) | 1;
		want += by[i];
		REQUIRE_CU(t_launch(bump, 1, 32, 0, args));
	}
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(&got, addr, 4));
	CHECK(got == want, "%s: g_counter is %u, expected %u", what, got, want);
}

/* Runs an iota kernel over n words (not a multiple of the block) and checks
 * every word and the one past the end. */
static void run_iota(CUfunction f, const char *what)
{
	enum { N = 3001 };
	static uint32_t out[N + 1];
	uint32_t base = (uint32_t)t_rand(&rng) | 1;
	CUdeviceptr d;
	int n = N;
	void *args[] = { &d, &base, &n };

	REQUIRE_CU(cuMemAlloc(&d, sizeof(out)));
	REQUIRE_CU(cuMemsetD32(d, 0xa5a5a5a5u, N + 1));
	REQUIRE_CU(t_launch(f, (N + 127) / 128, 128, 0, args));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(out, d, sizeof(out)));
	for (int i = 0; i < N; i++) {
		if (out[i] != base + (uint32_t)i) {
			CHECK(0, "%s: word %d is 0x%x, expected 0x%x", what, i, out[i], base + (uint32_t)i);
			break;
		}
	}
	CHECK(out[N] == 0xa5a5a5a5u, "%s: wrote past the end (0x%x)", what, out[N]);
	REQUIRE_CU(cuMemFree(d));
}

/* Kernels and globals whose names are over 1 KiB long, as C++ template
 * kernels' mangled names are: found by module and by library, launched,
 * their memory reached; a name of 100 KiB that exists nowhere is not found. */
static void test_long_names(const char *ptx)
{
	static const char kname[] = LN_STR(LONG_KERNEL_NAME), gname[] = LN_STR(LONG_GLOBAL_NAME);
	size_t huge_len = 100 * 1024, bytes = 0;
	char *huge = malloc(huge_len + 1);
	uint32_t v = 0x5eed1234u, got = 0;
	CUmodule m;
	CUlibrary lib;
	CUkernel k;
	CUfunction f;
	CUdeviceptr g = 0;

	CHECK(sizeof(kname) > 1024 && sizeof(gname) > 1024, "the long names are %zu and %zu bytes", sizeof(kname),
	      sizeof(gname));
	REQUIRE_CU(cuModuleLoadData(&m, ptx));
	REQUIRE_CU(cuModuleGetFunction(&f, m, kname));
	run_iota(f, "a kernel with a 1 KiB name");
	REQUIRE_CU(cuModuleGetGlobal(&g, &bytes, m, gname));
	CHECK(g && bytes == 4, "a global with a 1 KiB name: 0x%llx, %zu bytes", (unsigned long long)g, bytes);
	REQUIRE_CU(cuMemcpyHtoD(g, &v, 4));
	REQUIRE_CU(cuMemcpyDtoH(&got, g, 4));
	CHECK(got == v, "the long-named global holds 0x%x after writing 0x%x", got, v);
	if (huge) {
		memset(huge, 'k', huge_len);
		huge[huge_len] = 0;
		CHECK_CU(cuModuleGetFunction(&f, m, huge), CUDA_ERROR_NOT_FOUND);
		CHECK_CU(cuModuleGetGlobal(&g, &bytes, m, huge), CUDA_ERROR_NOT_FOUND);
		huge[2000] = 0;
		CHECK_CU(cuModuleGetFunction(&f, m, huge), CUDA_ERROR_NOT_FOUND);
	}
	REQUIRE_CU(cuModuleUnload(m));

	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetKernel(&k, lib, kname));
	REQUIRE_CU(cuKernelGetFunction(&f, k));
	run_iota(f, "a library kernel with a 1 KiB name");
	REQUIRE_CU(cuLibraryGetGlobal(&g, &bytes, lib, gname));
	CHECK(g && bytes == 4, "a library global with a 1 KiB name: %zu bytes", bytes);
	if (huge)
		CHECK_CU(cuLibraryGetKernel(&k, lib, huge), CUDA_ERROR_NOT_FOUND);
	REQUIRE_CU(cuLibraryUnload(lib));
	free(huge);
}

/* What a thread with no current context got (cudart loads its kernels
 * lazily from whichever thread first needs them: PyTorch's autograd thread
 * has no context when it does). */
struct no_ctx_run {
	const char *ptx;
	CUcontext primary, had;
	CUresult cur, mod, lib, kern, set, fn;
	CUlibrary l;
	CUkernel k;
	CUfunction f;
};

static void *no_ctx_thread(void *arg)
{
	struct no_ctx_run *t = arg;
	CUmodule m;

	t->had = (CUcontext)(uintptr_t)1;
	t->cur = cuCtxGetCurrent(&t->had);
	t->mod = cuModuleLoadData(&m, t->ptx);
	t->lib = cuLibraryLoadData(&t->l, t->ptx, NULL, NULL, 0, NULL, NULL, 0);
	if (t->lib == CUDA_SUCCESS)
		t->kern = cuLibraryGetKernel(&t->k, t->l, "iota_u32");
	t->set = cuCtxSetCurrent(t->primary);
	if (t->lib == CUDA_SUCCESS && t->kern == CUDA_SUCCESS)
		t->fn = cuKernelGetFunction(&t->f, t->k);
	return NULL;
}

/* A library is loaded, and its kernels found, from a thread with no
 * current context; a module cannot be. Once the thread makes the primary
 * context current, the kernel's function runs there. */
static void test_library_without_context(const char *ptx)
{
	struct no_ctx_run t = { .ptx = ptx, .kern = CUDA_ERROR_UNKNOWN, .fn = CUDA_ERROR_UNKNOWN };
	pthread_t th;

	REQUIRE_CU(cuCtxGetCurrent(&t.primary));
	CHECK(pthread_create(&th, NULL, no_ctx_thread, &t) == 0, "pthread_create");
	pthread_join(th, NULL);
	CHECK(t.cur == CUDA_SUCCESS && t.had == NULL, "a new thread's current context: %d, %p", (int)t.cur,
	      (void *)t.had);
	CHECK(t.mod == CUDA_ERROR_INVALID_CONTEXT, "cuModuleLoadData without a context: %d", (int)t.mod);
	CHECK(t.lib == CUDA_SUCCESS, "cuLibraryLoadData without a context: %d", (int)t.lib);
	CHECK(t.kern == CUDA_SUCCESS, "cuLibraryGetKernel without a context: %d", (int)t.kern);
	CHECK(t.set == CUDA_SUCCESS && t.fn == CUDA_SUCCESS, "cuKernelGetFunction once current: %d, %d", (int)t.set,
	      (int)t.fn);
	if (t.fn == CUDA_SUCCESS)
		run_iota(t.f, "a kernel of a library loaded without a context");
	if (t.lib == CUDA_SUCCESS)
		REQUIRE_CU(cuLibraryUnload(t.l));
}

static void check_params(CUfunction f, const char *name, int count, const size_t *offsets, const size_t *sizes)
{
	for (int i = 0; i < count; i++) {
		size_t off = 999, size = 999;

		REQUIRE_CU(cuFuncGetParamInfo(f, (size_t)i, &off, &size));
		CHECK(off == offsets[i] && size == sizes[i], "%s parameter %d: offset %zu size %zu, expected %zu/%zu",
		      name, i, off, size, offsets[i], sizes[i]);
	}
	{
		size_t off = 999;

		REQUIRE_CU(cuFuncGetParamInfo(f, 0, &off, NULL));    /* the size is optional */
		CHECK(off == offsets[0], "%s parameter 0 offset %zu with NULL size", name, off);
	}
	CHECK_CU(cuFuncGetParamInfo(f, (size_t)count, &(size_t){ 0 }, &(size_t){ 0 }), CUDA_ERROR_INVALID_VALUE);
}

static void test_module(const char *ptx)
{
	CUmodule m1, m2;
	CUfunction f, bump1, bump2, missing;
	CUdeviceptr g1 = 0, g2 = 0, g = 0;
	size_t bytes = 0;
	uint32_t v2;
	char info[4096], error[4096];
	CUjit_option opts[5] = {
		CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL,
	};
	void *vals[5];
	CUresult r;

	REQUIRE_CU(cuModuleLoadData(&m1, ptx));
	REQUIRE_CU(cuModuleGetFunction(&f, m1, "vadd"));
	run_vadd(f, "vadd from cuModuleLoadData");
	CHECK_CU(cuModuleGetFunction(&missing, m1, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);

	memset(info, 0, sizeof(info));
	memset(error, 0, sizeof(error));
	vals[0] = info;
	vals[1] = (void *)(uintptr_t)sizeof(info);
	vals[2] = error;
	vals[3] = (void *)(uintptr_t)sizeof(error);
	vals[4] = (void *)(uintptr_t)3;
	REQUIRE_CU(cuModuleLoadDataEx(&m2, ptx, 5, opts, vals));
	/* The size slots come back holding the bytes written. */
	CHECK((uintptr_t)vals[1] <= sizeof(info) && (uintptr_t)vals[3] <= sizeof(error),
	      "JIT log sizes %zu/%zu exceed the buffers", (size_t)(uintptr_t)vals[1], (size_t)(uintptr_t)vals[3]);
	CHECK(memchr(info, '\0', sizeof(info)) && memchr(error, '\0', sizeof(error)), "JIT logs not terminated");
	REQUIRE_CU(cuModuleGetFunction(&f, m2, "vadd"));
	run_vadd(f, "vadd from cuModuleLoadDataEx");

	/* g_counter: one per module. */
	REQUIRE_CU(cuModuleGetGlobal(&g1, &bytes, m1, "g_counter"));
	CHECK(bytes == 4, "g_counter is %zu bytes, expected 4", bytes);
	CHECK(g1 != 0, "g_counter address is NULL");
	REQUIRE_CU(cuModuleGetGlobal(&g2, NULL, m2, "g_counter"));   /* either output may be NULL */
	CHECK(g2 != 0 && g2 != g1, "the two modules' g_counter at 0x%llx and 0x%llx", (unsigned long long)g1,
	      (unsigned long long)g2);
	bytes = 0;
	REQUIRE_CU(cuModuleGetGlobal(NULL, &bytes, m2, "g_counter"));
	CHECK(bytes == 4, "g_counter size with NULL address: %zu", bytes);
	CHECK_CU(cuModuleGetGlobal(&g, &bytes, m1, "no_such_global"), CUDA_ERROR_NOT_FOUND);

	REQUIRE_CU(cuModuleGetFunction(&bump1, m1, "bump_global"));
	REQUIRE_CU(cuModuleGetFunction(&bump2, m2, "bump_global"));
	v2 = 0x2222u;
	REQUIRE_CU(cuMemcpyHtoD(g2, &v2, 4));
	run_bump(bump1, g1, "module 1");
	v2 = 0;
	REQUIRE_CU(cuMemcpyDtoH(&v2, g2, 4));
	CHECK(v2 == 0x2222u, "bumping module 1's counter changed module 2's to 0x%x", v2);
	run_bump(bump2, g2, "module 2");
	run_bump(bump1, g1, "module 1 again");

	/* A broken image is refused, not crashed on. */
	memset(error, 0, sizeof(error));
	vals[1] = (void *)(uintptr_t)sizeof(info);
	vals[3] = (void *)(uintptr_t)sizeof(error);
	{
		CUmodule bad = NULL;

		r = cuModuleLoadDataEx(&bad, "this is not PTX\n", 5, opts, vals);
		CHECK(r != CUDA_SUCCESS, "loading garbage as a module succeeded");
		if (r == CUDA_SUCCESS)
			cuModuleUnload(bad);
	}

	REQUIRE_CU(cuModuleUnload(m1));
	REQUIRE_CU(cuModuleUnload(m2));
}

static void test_attributes(const char *ptx)
{
	CUmodule m;
	CUfunction vadd, saxpy, mixed, spin;
	int v = -1, optin = 0, ptxv = 0, binv = 0, regs = -1, smem = -1, local = -1;
	static const size_t vadd_off[] = { 0, 8, 16, 24 }, vadd_size[] = { 8, 8, 8, 4 };
	static const size_t saxpy_off[] = { 0, 8, 16, 24 }, saxpy_size[] = { 4, 8, 8, 4 };
	static const size_t mixed_off[] = { 0, 24 }, mixed_size[] = { 24, 8 };
	static const size_t spin_off[] = { 0, 8 }, spin_size[] = { 8, 8 };

	REQUIRE_CU(cuModuleLoadData(&m, ptx));
	vadd = t_func(m, "vadd");
	saxpy = t_func(m, "saxpy");
	mixed = t_func(m, "mixed_arg");
	spin = t_func(m, "spin");

	REQUIRE_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, vadd));
	CHECK(v >= 128 && v <= 1024, "vadd max threads per block %d", v);
	REQUIRE_CU(cuFuncGetAttribute(&ptxv, CU_FUNC_ATTRIBUTE_PTX_VERSION, vadd));
	CHECK(ptxv >= 50 && ptxv < 1000, "vadd PTX version %d", ptxv);
	REQUIRE_CU(cuFuncGetAttribute(&binv, CU_FUNC_ATTRIBUTE_BINARY_VERSION, vadd));
	CHECK(binv >= 70 && binv < 1000, "vadd binary version %d", binv);
	REQUIRE_CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, vadd));
	CHECK(regs >= 0 && regs <= 255, "vadd uses %d registers", regs);
	REQUIRE_CU(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, vadd));
	CHECK(smem == 0, "vadd has %d bytes of static shared memory", smem);
	REQUIRE_CU(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, vadd));
	CHECK(local >= 0 && local < 4096, "vadd local memory %d", local);
	printf("  vadd: PTX %d, binary %d, %d registers\n", ptxv, binv, regs);

	REQUIRE_CU(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
	CHECK(optin >= 48 * 1024, "opt-in shared memory per block %d", optin);
	REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8192));
	v = -1;
	REQUIRE_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, vadd));
	CHECK(v == 8192, "max dynamic shared memory %d after setting 8192", v);
	CHECK_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin + 4096),
		 CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuFuncSetAttribute(vadd, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
	/* Another function of the module keeps its own value. */
	v = -1;
	REQUIRE_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, saxpy));
	CHECK(v != 8192 && v >= 0, "saxpy's max dynamic shared memory followed vadd's: %d", v);
	run_vadd(vadd, "vadd after setting attributes");

	check_params(vadd, "vadd", 4, vadd_off, vadd_size);
	check_params(saxpy, "saxpy", 4, saxpy_off, saxpy_size);
	check_params(mixed, "mixed_arg", 2, mixed_off, mixed_size);
	check_params(spin, "spin", 2, spin_off, spin_size);
	REQUIRE_CU(cuModuleUnload(m));
}

static void test_library(const char *ptx)
{
	CUlibrary lib;
	CUkernel kv, kb, missing;
	CUfunction fv, fb;
	CUdeviceptr g = 0;
	size_t bytes = 0;
	int v = -1;

	{
		/* With JIT options: logs within their buffers, terminated. */
		static char info[1024], error[1024];
		CUjit_option jo[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
				      CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL };
		void *jv[] = { info, (void *)(uintptr_t)sizeof(info), error, (void *)(uintptr_t)sizeof(error),
			       (void *)(uintptr_t)2 };
		CUlibrary l2;

		memset(info, 0x55, sizeof(info));
		memset(error, 0x55, sizeof(error));
		REQUIRE_CU(cuLibraryLoadData(&l2, ptx, jo, jv, 5, NULL, NULL, 0));
		CHECK((uintptr_t)jv[1] <= sizeof(info) && (uintptr_t)jv[3] <= sizeof(error),
		      "library JIT log sizes %zu/%zu exceed the buffers", (size_t)(uintptr_t)jv[1],
		      (size_t)(uintptr_t)jv[3]);
		CHECK(memchr(info, '\0', sizeof(info)) && memchr(error, '\0', sizeof(error)),
		      "library JIT logs not terminated");
		REQUIRE_CU(cuLibraryUnload(l2));
	}
	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetKernel(&kv, lib, "vadd"));
	REQUIRE_CU(cuLibraryGetKernel(&kb, lib, "bump_global"));
	CHECK_CU(cuLibraryGetKernel(&missing, lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	REQUIRE_CU(cuKernelGetFunction(&fv, kv));
	REQUIRE_CU(cuKernelGetFunction(&fb, kb));
	run_vadd(fv, "vadd from a library");

	REQUIRE_CU(cuLibraryGetGlobal(&g, &bytes, lib, "g_counter"));
	CHECK(bytes == 4, "library g_counter is %zu bytes", bytes);
	run_bump(fb, g, "library");
	CHECK_CU(cuLibraryGetGlobal(&g, &bytes, lib, "no_such_global"), CUDA_ERROR_NOT_FOUND);

	REQUIRE_CU(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kv, dev));
	CHECK(v >= 128 && v <= 1024, "kernel max threads per block %d", v);
	REQUIRE_CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 4096, kv, dev));
	v = -1;
	REQUIRE_CU(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kv, dev));
	CHECK(v == 4096, "kernel max dynamic shared memory %d after setting 4096", v);
	run_vadd(fv, "vadd from a library after setting attributes");
	REQUIRE_CU(cuKernelSetCacheConfig(kv, CU_FUNC_CACHE_PREFER_SHARED, dev));
	CHECK_CU(cuKernelSetCacheConfig(kv, (CUfunc_cache)77, dev), CUDA_ERROR_INVALID_VALUE);
	run_vadd(fv, "vadd from a library after a cache preference");

	REQUIRE_CU(cuLibraryUnload(lib));
}

/* The __managed__ variable m_counter, as a CUDA runtime program uses one:
 * the CPU reads and writes it where cuLibraryGetManaged says it is, a
 * kernel (bump_managed: m = m * 3 + by) sees what the CPU wrote before the
 * launch, and the CPU sees what the kernel wrote once it has waited (a
 * context synchronize, a stream synchronize, an event synchronize), many
 * times over; synchronous copies to and from the variable meet the CPU's
 * view; a capture records no copy of it. */
static void test_managed_variable(const char *ptx)
{
	CUlibrary lib;
	CUkernel k;
	CUfunction f;
	CUstream s;
	CUevent e;
	CUdeviceptr p = 0, g = 0;
	size_t bytes = 0;
	volatile unsigned int *m;
	unsigned int want, got;

	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetManaged(&p, &bytes, lib, "m_counter"));
	REQUIRE(p && bytes == 4, "m_counter at %#llx, %zu bytes", (unsigned long long)p, bytes);
	CHECK_CU(cuLibraryGetManaged(&g, &bytes, lib, "g_counter"), CUDA_ERROR_NOT_FOUND);
	REQUIRE_CU(cuLibraryGetKernel(&k, lib, "bump_managed"));
	REQUIRE_CU(cuKernelGetFunction(&f, k));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	m = (volatile unsigned int *)(uintptr_t)p;
	CHECK(*m == 0, "m_counter starts at %u", *m);
	/* Managed memory, as the pointer's attributes say (libNVVM's uvmlite
	 * sample takes the host pointer from them). */
	{
		unsigned int managed = 0;
		void *host = NULL;

		REQUIRE_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
		CHECK(managed == 1, "CU_POINTER_ATTRIBUTE_IS_MANAGED of a __managed__ variable is %u", managed);
		REQUIRE_CU(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p));
		CHECK(host == (void *)(uintptr_t)p, "the host pointer of a __managed__ variable is %p, want %#llx", host,
		      (unsigned long long)p);
	}
	for (int round = 0; round < 30; round++) {
		unsigned int start = (unsigned int)t_rand(&rng), by = (unsigned int)t_rand(&rng);
		void *args[] = { &by };

		*m = start;   /* the CPU's write, for the kernel */
		want = start * 3u + by;
		REQUIRE_CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, round % 3 ? s : NULL, args, NULL));
		switch (round % 3) {
		case 0:
			REQUIRE_CU(cuCtxSynchronize());
			break;
		case 1:
			REQUIRE_CU(cuStreamSynchronize(s));
			break;
		default:
			REQUIRE_CU(cuEventRecord(e, s));
			REQUIRE_CU(cuEventSynchronize(e));
			break;
		}
		if (!CHECK(*m == want, "round %d: m_counter %u after the kernel, want %u", round, *m, want))
			break;
	}
	/* Copies: the CPU's write reaches a copy from the variable, a copy to
	 * it reaches the CPU. */
	*m = 0x1234567u;
	REQUIRE_CU(cuMemcpyDtoH(&got, p, 4));
	CHECK(got == 0x1234567u, "a copy from m_counter read %#x, the CPU wrote 0x1234567", got);
	want = 0x7654321u;
	REQUIRE_CU(cuMemcpyHtoD(p, &want, 4));
	CHECK(*m == want, "after a copy to m_counter the CPU reads %#x, want %#x", *m, want);
	/* Captured launches leave the variable to the graph's run. */
	{
		unsigned int by = 5;
		void *args[] = { &by };
		CUgraph graph;
		CUgraphExec ge;

		REQUIRE_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		REQUIRE_CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
		REQUIRE_CU(cuStreamEndCapture(s, &graph));
		REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, graph, 0));
		*m = 10;
		REQUIRE_CU(cuGraphLaunch(ge, s));
		REQUIRE_CU(cuStreamSynchronize(s));
		CHECK(*m == 35u, "a graph's kernel left m_counter %u, want 35", *m);
		REQUIRE_CU(cuGraphExecDestroy(ge));
		REQUIRE_CU(cuGraphDestroy(graph));
	}
	REQUIRE_CU(cuEventDestroy(e));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuLibraryUnload(lib));
}

/* A library is loaded once for every device: a kernel taken from it while
 * device 0's context is current yields, in device 1's context, a function
 * of device 1, which runs there on device 1's memory. Skipped with one
 * device. */
static void test_library_other_device(const char *ptx)
{
	CUcontext other;
	CUlibrary lib;
	CUkernel kv;
	CUfunction f0, f1;
	CUdevice dev1;
	int n = 0, v = -1;

	REQUIRE_CU(cuDeviceGetCount(&n));
	if (n < 2)
		return;
	REQUIRE_CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryGetKernel(&kv, lib, "vadd"));
	REQUIRE_CU(cuKernelGetFunction(&f0, kv));
	REQUIRE_CU(cuDeviceGet(&dev1, dev == 0 ? 1 : 0));
	REQUIRE_CU(cuDevicePrimaryCtxRetain(&other, dev1));
	REQUIRE_CU(cuCtxPushCurrent(other));
	REQUIRE_CU(cuKernelGetFunction(&f1, kv));
	REQUIRE_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f1));
	CHECK(v >= 128 && v <= 1024, "the other device's function: max threads per block %d", v);
	run_vadd(f1, "vadd from a library, on the other device");
	REQUIRE_CU(cuCtxPopCurrent(&other));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev1));
	run_vadd(f0, "vadd from a library, back on the first device");
	REQUIRE_CU(cuLibraryUnload(lib));
}

/* An image of several MiB (PTX padded with comment lines), so a loader that
 * moves images in pieces must put every piece in its place: one wrong byte
 * and the image does not load or its kernel computes something else. */
static void test_large_image(const char *ptx)
{
	size_t lines = 40000, n = strlen(ptx), at = 0;
	char *big = malloc(lines * 80 + n + 1);
	CUmodule m;
	CUfunction f;

	REQUIRE(big, "out of memory");
	for (size_t i = 0; i < lines; i++)
		at += (size_t)sprintf(big + at, "// line %07zu of padding, so the image spans many pieces ........\n", i);
	memcpy(big + at, ptx, n + 1);
	REQUIRE_CU(cuModuleLoadData(&m, big));
	REQUIRE_CU(cuModuleGetFunction(&f, m, "vadd"));
	run_vadd(f, "vadd from a large image");
	REQUIRE_CU(cuModuleUnload(m));
	REQUIRE_CU(cuLibraryLoadData((CUlibrary *)&m, big, NULL, NULL, 0, NULL, NULL, 0));
	REQUIRE_CU(cuLibraryUnload((CUlibrary)m));
	free(big);
}

int main(int argc, char **argv)
{
	char *ptx;

	t_init(argc, argv);
	rng = t_rng(1);
	dev = t_device();
	t_primary(dev);
	ptx = t_ptx();

	test_module(ptx);
	test_attributes(ptx);
	test_library(ptx);
	test_managed_variable(ptx);
	test_library_other_device(ptx);
	test_long_names(ptx);
	test_library_without_context(ptx);
	test_large_image(ptx);

	free(ptx);
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
