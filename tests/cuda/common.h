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
 * Checks are tests/check.h's: CHECK and CHECK_CU count a failure and go
 * on, so one run reports every broken call; REQUIRE and REQUIRE_CU end the
 * program at once (what follows depends on them). Every message names
 * file:line and the expression; a CUDA result is named by cuGetErrorName.
 * The random seed is printed with the first failure and can be replayed
 * with OPENMPS_TEST_SEED. CMP_BYTES, CMP_U32, CMP_F32 and CHECK_FILL
 * compare buffers and count as one check each.
 *
 * The kernels come from tests/kernels/kernels.cu compiled to PTX, found
 * through $OPENMPS_TEST_PTX, else argv[1], else build/tests/kernels.ptx.
 */
#ifndef OPENMPS_TESTS_CUDA_COMMON_H
#define OPENMPS_TESTS_CUDA_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "../check.h"

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

const char *t_errname(CUresult r);

/* Names the program, picks the seed (the context of the first failure),
 * makes stdout line-buffered. */
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
/* Another PTX file built beside the kernels' (e.g. "printf.ptx"), as t_ptx. */
char *t_ptx_beside(const char *name);

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
size_t t_check_fill(const char *file, int line, const void *p, size_t n, unsigned char v, const char *what);

/* Device 0's free memory as a fresh client sees it, asked in a child
 * process (so the caller need not have initialised CUDA, and may fork
 * later); -1 if it cannot be read. */
long long t_free_memory(void);

/* Runs the test kernels' vadd from f on a few thousand random floats drawn
 * from *rng, in the current context, and checks every sum exactly. */
void t_run_vadd(CUfunction f, uint64_t *rng, const char *what);
#define CHECK_FILL(p, n, v, what) t_check_fill(__FILE__, __LINE__, (p), (n), (v), (what))

/* Monotonic seconds. */
double t_now(void);

/* Prints the closing line "PROGRAM: N passed, N failed" and returns the
 * exit status (T_PASS or T_FAIL). */
int t_finish(void);

#endif
