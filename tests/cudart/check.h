// SPDX-License-Identifier: MIT
/*
 * The checks the cudart programs share: CK(call) for a CUDA runtime call that
 * must succeed, EXPECT(condition, format, ...) for a result. Each failure is
 * printed with the file and line and counted in `failures`; the program
 * ends with "NAME: PASS" or "NAME: FAIL" and its exit status from that.
 */
#ifndef TESTS_CUDART_CHECK_H
#define TESTS_CUDART_CHECK_H

#include <atomic>
#include <cstdio>

#include <cuda_runtime.h>

static std::atomic<int> failures;

#define CK(x) do { \
	cudaError_t e_ = (x); \
	if (e_ != cudaSuccess) { \
		std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); \
		failures++; \
	} \
} while (0)

#define EXPECT(cond, ...) do { \
	if (!(cond)) { \
		std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
		std::fprintf(stderr, __VA_ARGS__); \
		std::fputc('\n', stderr); \
		failures++; \
	} \
} while (0)

/* Prints the verdict; the program's exit status. */
static int finish(const char *name)
{
	std::printf("%s: %s\n", name, failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

#endif
