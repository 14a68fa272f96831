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

/* A tensor map as a kernel parameter: 128 bytes, aligned to 128 as
 * CUtensorMap is (cuda.h, not included here). The tensor memory accelerator
 * reads it in the parameter space at that alignment: at 64 it faults with
 * an illegal instruction. */
struct __align__(128) CUtensorMap_tile {
	unsigned long long opaque[16];
};

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

/* One box of a 2-D float tensor map, loaded by the tensor memory
 * accelerator (cp.async.bulk.tensor) at element coordinates (x0, y0) into
 * shared memory and written out row by row: out[y * w + x] for the map's
 * box of w x h (at most 16 x 16). Elements of the box outside the tensor
 * read 0; x0 * 4 must be a multiple of 16 (the hardware faults otherwise).
 * Needs compute capability 9.0; one block of w * h threads. */
extern "C" __global__ void tma_tile(const __grid_constant__ CUtensorMap_tile map, float *out, int x0, int y0)
{
	__shared__ __align__(128) float tile[16 * 16];
	__shared__ __align__(8) unsigned long long bar;
	unsigned int b = (unsigned int)__cvta_generic_to_shared(&bar);
	unsigned int t = (unsigned int)__cvta_generic_to_shared(tile);
	unsigned int n = blockDim.x;

	if (threadIdx.x == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(n * 4) : "memory");
		asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
			     " [%0], [%1, {%2, %3}], [%4];" ::"r"(t),
			     "l"(&map), "r"(x0), "r"(y0), "r"(b)
			     : "memory");
		asm volatile("{\n\t.reg .pred p;\n"
			     "WAIT:\n\t"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t"
			     "@!p bra WAIT;\n}" ::"r"(b)
			     : "memory");
	}
	__syncthreads();
	out[threadIdx.x] = tile[threadIdx.x];
}
