// SPDX-License-Identifier: MIT
/*
 * Helpers shared by the benchmark programs in bench/. Each program is a
 * driver-API client linked against the toolkit's stub libcuda, so the same
 * binary measures the real driver (native, or under NVIDIA MPS) and
 * openmps, depending only on which libcuda.so.1 LD_LIBRARY_PATH finds.
 *
 * Programs print their results as `key=value` lines on stdout, which
 * bench/run.sh parses; errors go to stderr as `error: ...` and end the
 * program with status 2. Processes that must start a timed section
 * together wait for a "go" file after touching a "ready" file: the script
 * creates the go file once every process is ready.
 */
#ifndef OPENMPS_BENCH_H
#define OPENMPS_BENCH_H

#include <cuda.h>

/* A CUDA call that must succeed; on failure prints it and exits 2. */
#define B_CHECK(call)                                                         \
	do {                                                                  \
		CUresult b_r_ = (call);                                       \
		if (b_r_ != CUDA_SUCCESS)                                     \
			b_fail_cu(__FILE__, __LINE__, #call, b_r_);           \
	} while (0)

void b_fail_cu(const char *file, int line, const char *call, CUresult r) __attribute__((noreturn));
void b_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
const char *b_errname(CUresult r);

/* Monotonic seconds. */
double b_now(void);

/* cuInit, device 0, its primary context retained and made current. */
CUdevice b_setup(CUcontext *ctx);

/* A green context holding every SM of `dev`. */
CUgreenCtx b_green_all(CUdevice dev);

/* The kernels' PTX ($OPENMPS_TEST_PTX, else build/tests/kernels.ptx) loaded
 * into the current context. */
CUmodule b_module(void);
/* The same PTX as a NUL-terminated string (free() it); NULL if unreadable. */
char *b_read_ptx(void);

/* Creates an empty file (the "ready" signal). */
void b_touch(const char *path);
/* Waits until path exists, polling every 50 µs; exits 3 after timeout_s. */
void b_wait_file(const char *path, double timeout_s);

/* Forks nproc children that each run child(go, out, arg) (then exit 0):
 * go is the read end of the starting gun, one byte for each child once
 * all have had a second to set up (the child reads it to start), out the
 * write end of the results pipe. Returns the results pipe's read end. */
int b_start_children(int nproc, void (*child)(int go, int out, void *arg), void *arg);

/* Median of n values (sorts them in place). */
double b_median(double *v, int n);

#endif
