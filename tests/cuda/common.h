// SPDX-License-Identifier: MIT
/*
 * Helpers shared by the driver-API test programs in tests/cuda.
 *
 * Each program is written against cuda.h alone and linked against the
 * toolkit's stub libcuda, so one binary runs on the real driver, under
 * openmps on a GPU, and under openmps on the software stand-in. A program
 * exits 0 when every check passed, 1 when one failed, 77 when there is no
 * device to test.
 *
 * Checks come in two strengths: CHECK and REQUIRE end the program at once
 * (what follows depends on them), CHECK_ERR and EXPECT count a failure and
 * go on, so one run reports every broken call. Every message names
 * file:line; CUDA failures add the call text and cuGetErrorName of the
 * result. The random seed is printed with the first failure and can be
 * replayed with OPENMPS_TEST_SEED.
 *
 * The kernels come from tests/kernels/kernels.cu compiled to PTX, found
 * through $OPENMPS_TEST_PTX, else argv[1], else build/tests/kernels.ptx.
 */
#ifndef OPENMPS_TESTS_CUDA_COMMON_H
#define OPENMPS_TESTS_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#define T_PASS 0
#define T_FAIL 1
#define T_SKIP 77

/* Spin lengths in clock cycles. The stand-in sleeps cycles / 2000 µs; a
 * GPU at 1.4–2 GHz takes about as long or a little longer. */
#define T_SPIN_1MS   2000000LL
#define T_SPIN_100MS 200000000LL
#define T_SPIN_200MS 400000000LL

/* Mirrors struct mixed in kernels.cu: int at 0, double at 8, char[5] at 16. */
struct t_mixed {
	int a;
	double b;
	char c[5];
};

/* Records a failure (thread-safe) and prints the seed with the first one. */
void t_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void t_fail_cu(const char *file, int line, const char *call, CUresult got, CUresult want);
const char *t_errname(CUresult r);
int t_failures(void);

/* Fatal: a CUDA call that must succeed. */
#define CHECK(call)                                                              \
	do {                                                                     \
		CUresult t_r_ = (call);                                          \
		if (t_r_ != CUDA_SUCCESS) {                                      \
			t_fail_cu(__FILE__, __LINE__, #call, t_r_, CUDA_SUCCESS); \
			t_exit_failed();                                         \
		}                                                                \
	} while (0)

/* Not fatal: a CUDA call must return exactly `want`. Evaluates to 1 when it did. */
#define CHECK_ERR(call, want)                                                     \
	({                                                                        \
		CUresult t_r_ = (call);                                           \
		int t_ok_ = t_r_ == (want);                                       \
		if (!t_ok_)                                                       \
			t_fail_cu(__FILE__, __LINE__, #call, t_r_, (want));       \
		t_ok_;                                                            \
	})

/* Not fatal: a condition with a printf-style explanation. Evaluates to 1 when it held. */
#define EXPECT(cond, ...)                                                         \
	({                                                                        \
		int t_ok_ = !!(cond);                                             \
		if (!t_ok_)                                                       \
			t_fail(__FILE__, __LINE__, __VA_ARGS__);                  \
		t_ok_;                                                            \
	})

/* Fatal form of EXPECT. */
#define REQUIRE(cond, ...)                                                        \
	do {                                                                      \
		if (!(cond)) {                                                    \
			t_fail(__FILE__, __LINE__, __VA_ARGS__);                  \
			t_exit_failed();                                          \
		}                                                                 \
	} while (0)

/* Ends the process with T_FAIL after a fatal check. */
void t_exit_failed(void) __attribute__((noreturn));

/* Names the program, picks the seed, makes stdout line-buffered. */
void t_init(int argc, char **argv);

/* cuInit(0), then device 0. Exits with T_SKIP when there is no device. */
CUdevice t_device(void);

/* Retains dev's primary context and makes it current. */
CUcontext t_primary(CUdevice dev);

/* The kernels' PTX as a NUL-terminated string (free() it). Exits T_FAIL
 * when it cannot be read: a missing PTX is a broken build, not a skip. */
char *t_ptx(void);
/* The path t_ptx() reads. */
const char *t_ptx_path(void);

/* Loads the kernels into the current context. */
CUmodule t_module(void);
CUfunction t_func(CUmodule mod, const char *name);

/* A 1-D launch with kernelParams. */
CUresult t_launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void **params);

/* Random numbers: a state per user (thread), seeded from the run's seed. */
uint64_t t_seed(void);
uint64_t t_rng(unsigned stream);
uint64_t t_rand(uint64_t *state);
/* Fills with random non-zero values. */
void t_fill_bytes(void *p, size_t n, uint64_t *state);
void t_fill_u32(uint32_t *p, size_t n, uint64_t *state);
/* Non-zero floats with small integer values (1..16 with random sign):
 * sums of fewer than 2^20 of them are exact in any order. */
void t_fill_f32_int(float *p, size_t n, uint64_t *state);
/* Non-zero floats of either sign with magnitude in [0.5, 4). */
void t_fill_f32(float *p, size_t n, uint64_t *state);

/* Comparisons. Each prints the first few differences and returns how many
 * elements differ (0 when equal). `what` names the buffer in messages. */
size_t t_cmp_bytes(const char *file, int line, const void *got, const void *want, size_t n, const char *what);
size_t t_cmp_u32(const char *file, int line, const uint32_t *got, const uint32_t *want, size_t n, const char *what);
/* |got - want| <= abs_tol + rel_tol * |want| per element; NaN never matches. */
size_t t_cmp_f32(const char *file, int line, const float *got, const float *want, size_t n,
		 float rel_tol, float abs_tol, const char *what);
int t_near(double got, double want, double rel_tol, double abs_tol);

#define CMP_BYTES(got, want, n, what) t_cmp_bytes(__FILE__, __LINE__, (got), (want), (n), (what))
#define CMP_U32(got, want, n, what)   t_cmp_u32(__FILE__, __LINE__, (got), (want), (n), (what))
#define CMP_F32(got, want, n, rel, abs, what) \
	t_cmp_f32(__FILE__, __LINE__, (got), (want), (n), (rel), (abs), (what))

/* Checks that every byte of p[0..n) is `v`; counts a failure if not. */
size_t t_expect_fill(const char *file, int line, const void *p, size_t n, unsigned char v, const char *what);

/* Device 0's free memory as a fresh client sees it, asked in a child
 * process (so the caller need not have initialised CUDA, and may fork
 * later); -1 if it cannot be read. */
long long t_free_memory(void);

/* Runs the test kernels' vadd from f on a few thousand random floats drawn
 * from *rng, in the current context, and checks every sum exactly. */
void t_run_vadd(CUfunction f, uint64_t *rng, const char *what);
#define EXPECT_FILL(p, n, v, what) t_expect_fill(__FILE__, __LINE__, (p), (n), (v), (what))

/* Monotonic seconds. */
double t_now(void);

/* Prints the closing line and returns the exit status (T_PASS or T_FAIL). */
int t_finish(void);

#endif
