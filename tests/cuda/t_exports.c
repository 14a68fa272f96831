// SPDX-License-Identifier: MIT
/*
 * The driver's private export tables that NVIDIA's libraries call, driven
 * the way they drive them (docs/EXPORT-TABLES.md): run on the real driver it
 * checks what the docs say the driver does; under openmps, that openmps
 * does the same. Also cuModuleGetFunctionCount and cuModuleEnumerateFunctions,
 * which the module-functions slot is built on.
 *
 *   6e163fbe [7]   a module's functions through a callback, as cuFFT gets
 *                  its kernels: each one named, its attributes read, one
 *                  launched through the handle it gave;
 *   21318c60 [4]   a context's id; [51] and [39] a stream's object and id;
 *   1734dc26 [4]   two byte maps handed out, [13] frees them;
 *   263e8860 [2]   writes 0 through its second argument;
 *   sizes in slot 0 of every table served, and an unknown id refused.
 *
 * Slot 51 is called with a fourth argument of 0, as cuBLAS leaves it.
 *
 * Lines starting "info:" record what the driver answered where the docs
 * leave it open (the words of a function object, the maps' first bytes, the
 * stream ids), for comparing a native run with one under openmps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static CUdevice dev;
static uint64_t rng;

static const uint8_t ID_CUDART[16] = { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
				       0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 };
static const uint8_t ID_CHECKS[16] = { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
				       0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e };
static const uint8_t ID_F8CF[16] = { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
				     0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 };
static const uint8_t ID_2131[16] = { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
				     0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 };
static const uint8_t ID_6E16[16] = { 0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
				     0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e };
static const uint8_t ID_1734[16] = { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
				     0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca };
static const uint8_t ID_69A2[16] = { 0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47,
				     0xb0, 0x30, 0xc5, 0xda, 0x33, 0x0e, 0xa4, 0xe9 };
static const uint8_t ID_DA91[16] = { 0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41,
				     0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3, 0x28 };
static const uint8_t ID_UNKNOWN[16] = { 0x0d, 0xd0, 0xca, 0xfe, 0x01, 0x02, 0x03, 0x04,
					0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c };

static const void *const *table(const uint8_t id[16], CUresult *rc)
{
	const void *t = NULL;
	CUuuid u;

	memcpy(u.bytes, id, 16);
	*rc = cuGetExportTable(&t, &u);
	return *rc == CUDA_SUCCESS ? t : NULL;
}

/* A table that must be there, with size bytes in slot 0. */
static const void *const *need_table(const uint8_t id[16], size_t size, const char *what)
{
	CUresult rc;
	const void *const *t = table(id, &rc);

	int empty = 0;

	REQUIRE(t, "table %s: cuGetExportTable returned %s", what, t_errname(rc));
	CHECK((size_t)(uintptr_t)t[0] == size, "table %s has %zu bytes in slot 0, expected %zu", what,
	      (size_t)(uintptr_t)t[0], size);
	/* The driver leaves a few slots NULL; openmps none. */
	for (size_t i = 1; i < size / sizeof(void *) && (size_t)(uintptr_t)t[0] == size; i++)
		empty += t[i] == NULL;
	if (empty)
		printf("info: table %s has %d NULL slots\n", what, empty);
	return t;
}

/* The kernels' names, in the order of the PTX. */
static int entries(const char *ptx, char names[][1200], int max)
{
	int n = 0;

	for (const char *p = strstr(ptx, ".entry "); p && n < max; p = strstr(p + 1, ".entry ")) {
		const char *s = p + 7, *e = s;

		while (*e && *e != '(' && *e != ' ' && *e != '\n')
			e++;
		if ((size_t)(e - s) < sizeof(names[0])) {
			memcpy(names[n], s, (size_t)(e - s));
			names[n][e - s] = 0;
			n++;
		}
	}
	return n;
}

static int find_name(char names[][1200], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (name && !strcmp(names[i], name))
			return i;
	return -1;
}

/* Runs iota_u32 through f and checks every word. */
static void run_iota(CUfunction f, const char *what)
{
	enum { N = 1000 };
	static uint32_t out[N];
	uint32_t base = (uint32_t)t_rand(&rng) | 1;
	CUdeviceptr d;
	int n = N;
	void *args[] = { &d, &base, &n };

	REQUIRE_CU(cuMemAlloc(&d, sizeof(out)));
	REQUIRE_CU(t_launch(f, (N + 127) / 128, 128, 0, args));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(out, d, sizeof(out)));
	for (int i = 0; i < N; i++) {
		if (out[i] != base + (uint32_t)i) {
			CHECK(0, "%s: word %d is 0x%x, expected 0x%x", what, i, out[i], base + (uint32_t)i);
			break;
		}
	}
	REQUIRE_CU(cuMemFree(d));
}

static void test_enumerate(CUmodule mod, char names[][1200], int nnames)
{
	CUfunction fns[64], few[4];
	unsigned int count = 0;
	int same = 0;

	REQUIRE_CU(cuModuleGetFunctionCount(&count, mod));
	CHECK((int)count == nnames, "cuModuleGetFunctionCount: %u, the PTX has %d kernels", count, nnames);
	REQUIRE(count <= 64, "too many functions: %u", count);
	REQUIRE_CU(cuModuleEnumerateFunctions(fns, count, mod));
	for (unsigned int i = 0; i < count; i++) {
		const char *name = NULL;
		CUfunction g;

		REQUIRE_CU(cuFuncGetName(&name, fns[i]));
		CHECK(find_name(names, nnames, name) >= 0, "function %u is named %.60s, not a kernel of the PTX", i,
		      name ? name : "(null)");
		if (name && cuModuleGetFunction(&g, mod, name) == CUDA_SUCCESS && g == fns[i])
			same++;
	}
	printf("info: cuModuleEnumerateFunctions gave %u functions, %d the same handles as cuModuleGetFunction\n",
	       count, same);
	/* Fewer than there are: only that many written. */
	memset(few, 0, sizeof(few));
	if (count > 3) {
		REQUIRE_CU(cuModuleEnumerateFunctions(few, 3, mod));
		CHECK(few[0] && few[1] && few[2] && !few[3], "asking for 3 of %u functions wrote %d", count,
		      !!few[0] + !!few[1] + !!few[2] + !!few[3]);
	}
	CHECK(cuModuleGetFunctionCount(NULL, mod) != CUDA_SUCCESS, "cuModuleGetFunctionCount took a NULL count");
}

/* What slot 7's callback was given. */
struct seen {
	void *fn[64];
	uint64_t word1[64];
	int n;
};

static void on_function(void *user, void *fn, uint64_t word1)
{
	struct seen *s = user;

	if (s->n < 64) {
		s->fn[s->n] = fn;
		s->word1[s->n] = word1;
	}
	s->n++;
}

typedef uint64_t (*module_functions_fn)(CUcontext, CUmodule, void (*)(void *, void *, uint64_t), void *, CUmodule,
					 void *);

static void test_module_functions(CUcontext ctx, CUmodule mod, char names[][1200], int nnames)
{
	const void *const *t = need_table(ID_6E16, 792, "6e163fbe");
	struct seen s = { .n = 0 };
	uint64_t n;
	int iota = -1, words1 = 0;

	n = ((module_functions_fn)(uintptr_t)t[7])(ctx, mod, on_function, &s, mod, NULL);
	CHECK((int)n == nnames && s.n == nnames, "6e163fbe[7] returned %llu and called back %d times; %d kernels",
	      (unsigned long long)n, s.n, nnames);
	for (int i = 0; i < s.n && i < 64; i++) {
		const char *name = NULL;
		uint64_t w[4];
		int maxt = 0, blocks = 0;

		REQUIRE_CU(cuFuncGetName(&name, (CUfunction)s.fn[i]));
		CHECK(find_name(names, nnames, name) >= 0, "6e163fbe[7] gave a function named %.60s",
		      name ? name : "(null)");
		REQUIRE_CU(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUfunction)s.fn[i]));
		CHECK(maxt > 0, "6e163fbe[7]'s function %d: %d threads per block", i, maxt);
		REQUIRE_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (CUfunction)s.fn[i], 128, 0));
		CHECK(blocks > 0, "6e163fbe[7]'s function %d: %d blocks per SM", i, blocks);
		memcpy(w, s.fn[i], sizeof(w));
		words1 += w[1] == s.word1[i];
		if (name && !strcmp(name, "iota_u32")) {
			iota = i;
			printf("info: 6e163fbe[7] object of iota_u32: %016llx %016llx %016llx %016llx; callback word %s\n",
			       (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2],
			       (unsigned long long)w[3], w[1] == s.word1[i] ? "= word 1" : "!= word 1");
		}
	}
	printf("info: 6e163fbe[7] callback's third argument was word 1 of the object for %d of %d\n", words1, s.n);
	REQUIRE(iota >= 0, "6e163fbe[7] did not give iota_u32");
	run_iota((CUfunction)s.fn[iota], "iota_u32 from 6e163fbe[7]");
	/* Asked again for the same module: the same function objects. */
	{
		struct seen again = { .n = 0 };

		((module_functions_fn)(uintptr_t)t[7])(ctx, mod, on_function, &again, mod, NULL);
		CHECK(again.n == s.n && again.fn[iota] == s.fn[iota], "6e163fbe[7] asked again gave other objects");
	}
}

typedef CUresult (*ctx_id_fn)(CUcontext, unsigned long long *);
typedef CUresult (*stream_object_fn)(CUcontext, CUstream, void **, uint64_t);
typedef CUresult (*stream_id_fn)(CUcontext, void *, uint64_t *);

static void test_tools_context(CUcontext ctx)
{
	const void *const *t = need_table(ID_2131, 744, "21318c60");
	unsigned long long id = 0, want = 0, sid0 = 0, sid1 = 0;
	void *o0 = NULL, *o0b = NULL, *o1 = NULL;
	uint64_t i0 = 0, i1 = 0;
	CUstream s1;

	REQUIRE_CU(((ctx_id_fn)(uintptr_t)t[4])(ctx, &id));
	REQUIRE_CU(cuCtxGetId(ctx, &want));
	CHECK(id == want, "21318c60[4] gave context id %llu, cuCtxGetId %llu", id, want);

	REQUIRE_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(((stream_object_fn)(uintptr_t)t[51])(ctx, NULL, &o0, 0));
	REQUIRE_CU(((stream_object_fn)(uintptr_t)t[51])(ctx, NULL, &o0b, 0));
	REQUIRE_CU(((stream_object_fn)(uintptr_t)t[51])(ctx, s1, &o1, 0));
	CHECK(o0 && o1 && o0 != o1, "21318c60[51]: objects %p and %p for two streams", o0, o1);
	REQUIRE_CU(((stream_id_fn)(uintptr_t)t[39])(ctx, o0, &i0));
	REQUIRE_CU(((stream_id_fn)(uintptr_t)t[39])(ctx, o1, &i1));
	CHECK(i0 != i1, "21318c60[39]: both streams have id %llu", (unsigned long long)i0);
	REQUIRE_CU(cuStreamGetId(NULL, &sid0));
	REQUIRE_CU(cuStreamGetId(s1, &sid1));
	printf("info: 21318c60[51] for stream 0 twice: %s object; [39] ids %llu and %llu, cuStreamGetId %llu and %llu\n",
	       o0 == o0b ? "the same" : "another", (unsigned long long)i0, (unsigned long long)i1, sid0, sid1);
	REQUIRE_CU(cuStreamDestroy(s1));
}

typedef CUresult (*maps_fn)(uint8_t **, uint8_t **);
typedef CUresult (*free_maps_fn)(uint8_t *, uint8_t *);

static void test_maps(void)
{
	const void *const *t = need_table(ID_1734, 136, "1734dc26");
	uint8_t *a = NULL, *b = NULL;
	int sms = 0;
	CUresult rc;

	REQUIRE_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	rc = ((maps_fn)(uintptr_t)t[4])(&a, &b);
	printf("info: 1734dc26[4] returned %s on %d SMs", t_errname(rc), sms);
	/* One entry per TPC (two SMs) is all a map is known to hold. */
	for (int i = 0; a && i < 16 && i < sms / 2; i++)
		printf("%s%u", i ? "," : "; a: ", a[i]);
	for (int i = 0; b && i < 16 && i < sms / 2; i++)
		printf("%s%u", i ? "," : "; b: ", b[i]);
	printf("\n");
	/* Failing or not, the maps are there and [13] takes them back. */
	CHECK(a && b, "1734dc26[4] left a map NULL (%p, %p)", (void *)a, (void *)b);
	if (a && b)
		REQUIRE_CU(((free_maps_fn)(uintptr_t)t[13])(a, b));
}

typedef CUresult (*checks_fn)(CUcontext, uint32_t *, const void **);

static void test_small_tables(CUcontext ctx)
{
	const void *const *t = need_table(ID_CHECKS, 120, "263e8860");
	uint32_t out1 = 0xffffffffu;
	const void *out2 = &out1;
	const void *u = (const void *)1;
	CUuuid unknown;
	CUresult rc;

	need_table(ID_CUDART, 104, "6bd5fb6c");
	REQUIRE_CU(((checks_fn)(uintptr_t)t[2])(ctx, &out1, &out2));
	CHECK(out1 == 0 && out2 == &out1, "263e8860[2]: out1 %#x, out2 %s", out1, out2 == &out1 ? "kept" : "changed");
	need_table(ID_F8CF, 24, "f8cff951");
	/* Served by the driver in the process, or refused without one. */
	table(ID_69A2, &rc);
	if (rc == CUDA_SUCCESS)
		need_table(ID_69A2, 272, "69a28e9f");
	printf("info: 69a28e9f: %s\n", t_errname(rc));
	table(ID_DA91, &rc);
	if (rc == CUDA_SUCCESS)
		need_table(ID_DA91, 56, "da9151d3");
	printf("info: da9151d3: %s\n", t_errname(rc));
	memcpy(unknown.bytes, ID_UNKNOWN, 16);
	CHECK_CU(cuGetExportTable(&u, &unknown), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
	static char names[64][1200];
	char *ptx;
	CUcontext ctx;
	CUmodule mod;
	int n;

	t_init(argc, argv);
	rng = t_rng(0);
	dev = t_device();
	ctx = t_primary(dev);
	ptx = t_ptx();
	n = entries(ptx, names, 64);
	REQUIRE(n > 3, "the PTX names %d kernels", n);
	REQUIRE_CU(cuModuleLoadData(&mod, ptx));
	free(ptx);

	test_enumerate(mod, names, n);
	test_module_functions(ctx, mod, names, n);
	test_tools_context(ctx);
	test_maps();
	test_small_tables(ctx);

	REQUIRE_CU(cuModuleUnload(mod));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(dev));
	return t_finish();
}
