// SPDX-License-Identifier: MIT
/*
 * The kernels every driver-API test loads, as PTX. They are written so that
 * each result can be checked on the host against a reference computed there.
 * On a GPU they are real kernels; under the software stand-in driver
 * (tests/standin) each one has a C twin, matched by name, that computes the
 * same thing. Keep the two in step: a kernel added here needs its twin there.
 */
#include <stdint.h>

#include "long_name.h"

struct mixed {               /* exercises parameter alignment and packing */
	int a;
	double b;
	char c[5];
};

__device__ unsigned int g_counter;     /* read and written through cuModuleGetGlobal */

extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

extern "C" __global__ void iota_u32(unsigned int *p, unsigned int base, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = base + (unsigned int)i;
}

/* iota_u32 and a word of memory again, under names of over 1 KiB. */
__device__ unsigned int LONG_GLOBAL_NAME;

extern "C" __global__ void LONG_KERNEL_NAME(unsigned int *p, unsigned int base, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = base + (unsigned int)i;
}

/* p[i] = p[i] * mul + add: applying it in a known order gives a value that
 * depends on that order, which is how the stream-ordering tests see reordering. */
extern "C" __global__ void affine_u32(unsigned int *p, unsigned int mul, unsigned int add, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = p[i] * mul + add;
}

/* Busy-waits `cycles` clock cycles, then records the SM it ran on. The
 * stand-in sleeps cycles / 2000 microseconds (a 2 GHz clock). */
extern "C" __global__ void spin(long long cycles, int *out)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
	if (threadIdx.x == 0) {
		int s;
		asm("mov.u32 %0, %%smid;" : "=r"(s));
		out[blockIdx.x] = s;
	}
}

/* Spins, then writes `value` to *flag: a slow producer for ordering tests. */
extern "C" __global__ void spin_then_store(long long cycles, unsigned int *flag, unsigned int value)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*flag = value;
}

extern "C" __global__ void mixed_arg(struct mixed m, double *out)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		double s = m.a + m.b;
		for (int k = 0; k < 5; k++)
			s += m.c[k];
		*out = s;
	}
}

extern "C" __global__ void reduce_sum(const float *x, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		atomicAdd(out, x[i]);
}

extern "C" __global__ void bump_global(unsigned int by)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		g_counter += by;
}

/* A __managed__ variable: the program's CPU reads and writes it where
 * cuLibraryGetManaged says it is. */
__managed__ unsigned int m_counter;

extern "C" __global__ void bump_managed(unsigned int by)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		m_counter = m_counter * 3u + by;
}

/* Writes through a pointer it is given: pass an invalid one to cause a fault. */
extern "C" __global__ void store_at(unsigned int *p, unsigned int v)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*p = v;
}

extern "C" __global__ void empty(void)
{
}

/* out[i] = 2 * (element i of a linear float texture) + 1, for i < n. */
extern "C" __global__ void tex_fetch(unsigned long long tex, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = 2.0f * tex1Dfetch<float>((cudaTextureObject_t)tex, i) + 1.0f;
}
