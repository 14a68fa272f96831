// SPDX-License-Identifier: MIT
/*
 * See common.h. The counts of checks are tests/check.h's, kept under its
 * lock because t_threads checks from eight threads at once; everything else
 * here is either read-only after t_init or owned by the caller (random
 * states).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MAX_REPORTED 8          /* differences printed per comparison */

static uint64_t run_seed;
static const char *prog = "test";
static const char *ptx_arg;
static char seed_line[160];     /* printed before the first failure */

const char *t_errname(CUresult r)
{
	const char *s = NULL;

	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "unknown CUresult";
	return s;
}

static const char *code_name(int code)
{
	return t_errname((CUresult)code);
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void t_init(int argc, char **argv)
{
	const char *s = getenv("OPENMPS_TEST_SEED");
	const char *slash;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 0 && argv[0]) {
		slash = strrchr(argv[0], '/');
		prog = slash ? slash + 1 : argv[0];
	}
	if (argc > 1)
		ptx_arg = argv[1];
	if (s && *s) {
		run_seed = strtoull(s, NULL, 0);
	} else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		run_seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
	}
	snprintf(seed_line, sizeof(seed_line), "%s: seed %" PRIu64 " (replay with OPENMPS_TEST_SEED=%" PRIu64 ")",
		 prog, run_seed, run_seed);
	check_set_context(seed_line);
	check_name_codes(code_name);
}

CUdevice t_device(void)
{
	CUresult r = cuInit(0);
	CUdevice dev;
	int n = 0;

	if (r == CUDA_ERROR_NO_DEVICE) {
		printf("%s: SKIP (cuInit: no CUDA device)\n", prog);
		exit(T_SKIP);
	}
	REQUIRE_CU(r);
	REQUIRE_CU(cuDeviceGetCount(&n));
	if (n < 1) {
		printf("%s: SKIP (no CUDA device)\n", prog);
		exit(T_SKIP);
	}
	REQUIRE_CU(cuDeviceGet(&dev, 0));
	return dev;
}

CUcontext t_primary(CUdevice dev)
{
	CUcontext ctx;

	REQUIRE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	REQUIRE_CU(cuCtxSetCurrent(ctx));
	return ctx;
}

const char *t_ptx_path(void)
{
	const char *env = getenv("OPENMPS_TEST_PTX");

	if (env && *env)
		return env;
	if (ptx_arg && *ptx_arg)
		return ptx_arg;
	return "build/tests/kernels.ptx";
}

/* The PTX at path, as a NUL-terminated string. */
static char *read_ptx(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f) {
		fprintf(stderr, "%s: cannot open the kernels' PTX %s: %s (set OPENMPS_TEST_PTX or pass the path)\n",
			prog, path, strerror(errno));
		exit(T_FAIL);
	}
	do {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap + 1);
			REQUIRE(buf, "out of host memory reading %s", path);
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	REQUIRE(!ferror(f), "error reading %s", path);
	fclose(f);
	buf[len] = '\0';
	REQUIRE(strstr(buf, ".entry") != NULL, "%s holds no kernel entry: not PTX?", path);
	return buf;
}

char *t_ptx(void)
{
	return read_ptx(t_ptx_path());
}

char *t_ptx_beside(const char *name)
{
	const char *kernels = t_ptx_path(), *slash = strrchr(kernels, '/');
	size_t dir = slash ? (size_t)(slash - kernels) + 1 : 0;
	char *path = malloc(dir + strlen(name) + 1), *text;

	REQUIRE(path, "out of host memory");
	memcpy(path, kernels, dir);
	strcpy(path + dir, name);
	text = read_ptx(path);
	free(path);
	return text;
}

CUmodule t_module(void)
{
	char *ptx = t_ptx();
	CUmodule mod;

	REQUIRE_CU(cuModuleLoadData(&mod, ptx));
	free(ptx);
	return mod;
}

CUfunction t_func(CUmodule mod, const char *name)
{
	CUfunction f;
	CUresult r = cuModuleGetFunction(&f, mod, name);

	if (r != CUDA_SUCCESS) {
		check_fail_code(__FILE__, __LINE__, name, (int)r, 0);
		check_stop();
	}
	return f;
}

CUresult t_launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void **params)
{
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

uint64_t t_seed(void)
{
	return run_seed;
}

uint64_t t_rng(unsigned stream)
{
	uint64_t x = run_seed + 0x632be59bd9b4e019ull * (stream + 1);

	return splitmix64(&x) | 1;
}

uint64_t t_rand(uint64_t *state)
{
	/* xorshift64*: the state never becomes 0 when it starts non-zero. */
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

void t_fill_bytes(void *p, size_t n, uint64_t *state)
{
	unsigned char *b = p;
	size_t i = 0;

	while (i < n) {
		uint64_t r = t_rand(state);

		for (int k = 0; k < 8 && i < n; k++, r >>= 8) {
			unsigned char v = (unsigned char)r;

			b[i++] = v ? v : 0x5a;
		}
	}
}

void t_fill_u32(uint32_t *p, size_t n, uint64_t *state)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)(t_rand(state) >> 32);

		p[i] = v ? v : 0x9e3779b9u;
	}
}

void t_fill_f32_int(float *p, size_t n, uint64_t *state)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = t_rand(state);
		float v = (float)(1 + (r >> 40) % 16);

		p[i] = (r >> 63) ? -v : v;
	}
}

void t_fill_f32(float *p, size_t n, uint64_t *state)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = t_rand(state);
		float v = 0.5f + (float)((r >> 40) & 0xffffff) / (float)0x1000000 * 3.5f;

		p[i] = (r & 1) ? -v : v;
	}
}

size_t t_cmp_bytes(const char *file, int line, const void *got, const void *want, size_t n, const char *what)
{
	const unsigned char *g = got, *w = want;
	size_t bad = 0;

	if (memcmp(g, w, n) == 0) {
		check_pass();
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (g[i] == w[i])
			continue;
		if (bad++ < MAX_REPORTED)
			check_fail(file, line, NULL, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n,
			           g[i], w[i]);
	}
	if (bad > MAX_REPORTED)
		check_fail(file, line, NULL, "%s: %zu of %zu bytes differ", what, bad, n);
	if (!bad)
		check_pass();
	return bad;
}

size_t t_cmp_u32(const char *file, int line, const uint32_t *got, const uint32_t *want, size_t n, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (got[i] == want[i])
			continue;
		if (bad++ < MAX_REPORTED)
			check_fail(file, line, NULL,
			           "%s[%zu] = %" PRIu32 " (0x%08" PRIx32 "), expected %" PRIu32 " (0x%08" PRIx32 ")",
			       what, i, got[i], got[i], want[i], want[i]);
	}
	if (bad > MAX_REPORTED)
		check_fail(file, line, NULL, "%s: %zu of %zu elements differ", what, bad, n);
	if (!bad)
		check_pass();
	return bad;
}

int t_near(double got, double want, double rel_tol, double abs_tol)
{
	return fabs(got - want) <= abs_tol + rel_tol * fabs(want);
}

size_t t_cmp_f32(const char *file, int line, const float *got, const float *want, size_t n,
		 float rel_tol, float abs_tol, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (t_near(got[i], want[i], rel_tol, abs_tol))
			continue;
		if (bad++ < MAX_REPORTED)
			check_fail(file, line, NULL, "%s[%zu] = %.9g, expected %.9g", what, i, (double)got[i],
			           (double)want[i]);
	}
	if (bad > MAX_REPORTED)
		check_fail(file, line, NULL, "%s: %zu of %zu elements differ", what, bad, n);
	if (!bad)
		check_pass();
	return bad;
}

size_t t_check_fill(const char *file, int line, const void *p, size_t n, unsigned char v, const char *what)
{
	const unsigned char *b = p;
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (b[i] == v)
			continue;
		if (bad++ < MAX_REPORTED)
			check_fail(file, line, NULL, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n,
			           b[i], v);
	}
	if (bad > MAX_REPORTED)
		check_fail(file, line, NULL, "%s: %zu of %zu bytes differ", what, bad, n);
	if (!bad)
		check_pass();
	return bad;
}

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int t_finish(void)
{
	return check_finish(prog);
}

long long t_free_memory(void)
{
	int fds[2];
	long long v = -1;
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		size_t fr = 0, total = 0;

		close(fds[0]);
		t_primary(t_device());
		REQUIRE_CU(cuMemGetInfo(&fr, &total));
		v = (long long)fr;
		if (write(fds[1], &v, sizeof(v)) != sizeof(v))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return v;
}

void t_run_vadd(CUfunction f, uint64_t *rng, const char *what)
{
	enum { N = 5000 };
	static float a[N], b[N], c[N], ref[N];
	CUdeviceptr da, db, dc;
	int n = N;
	void *args[] = { &da, &db, &dc, &n };

	t_fill_f32(a, N, rng);
	t_fill_f32(b, N, rng);
	for (int i = 0; i < N; i++)
		ref[i] = a[i] + b[i];
	REQUIRE_CU(cuMemAlloc(&da, sizeof(a)));
	REQUIRE_CU(cuMemAlloc(&db, sizeof(b)));
	REQUIRE_CU(cuMemAlloc(&dc, sizeof(c)));
	REQUIRE_CU(cuMemcpyHtoD(da, a, sizeof(a)));
	REQUIRE_CU(cuMemcpyHtoD(db, b, sizeof(b)));
	REQUIRE_CU(cuMemsetD32(dc, 0x7fc00001u, N));
	REQUIRE_CU(t_launch(f, (N + 127) / 128, 128, 0, args));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(c, dc, sizeof(c)));
	CMP_F32(c, ref, N, 0.0f, 0.0f, what);
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(dc));
}
