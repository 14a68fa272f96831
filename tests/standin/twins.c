// SPDX-License-Identifier: MIT
/*
 * The C twins of tests/kernels/kernels.cu: for each kernel, by entry name,
 * a function that computes exactly what the CUDA code computes, over the
 * whole grid and block, on the stream thread.
 *
 * Every thread of the launch computes its index as the kernel does,
 * i = blockIdx.x * blockDim.x + threadIdx.x, so the x extent gives the index
 * range [0, grid.x * block.x) and the y/z extents repeat it; twins loop in
 * that order. Before touching memory a twin checks (and pins) each span it
 * will read or write with mps__launch_access, which reports the fault a GPU
 * would raise for an address outside every allocation of the device — the
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS — before anything is written.
 *
 * A twin is used only when the entry's parameter sizes are the ones it
 * expects, so a different kernel that happens to share a name is refused
 * (CUDA_ERROR_NOT_SUPPORTED at launch) instead of misread.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"
#include "../kernels/long_name.h"

/* How many times each index i is computed: the y/z extents of grid and block. */
static uint64_t repeats(const struct si_launch *l)
{
	return (uint64_t)l->grid[1] * l->grid[2] * l->block[1] * l->block[2];
}

/* Number of indices i < n the launch covers. */
static size_t covered(const struct si_launch *l, int n)
{
	uint64_t x = (uint64_t)l->grid[0] * l->block[0];

	if (n <= 0)
		return 0;
	return (size_t)(x < (uint64_t)n ? x : (uint64_t)n);
}

static uint64_t u64_param(const struct si_launch *l, unsigned i)
{
	uint64_t v;

	memcpy(&v, mps__launch_param(l, i), sizeof(v));
	return v;
}

static uint32_t u32_param(const struct si_launch *l, unsigned i)
{
	uint32_t v;

	memcpy(&v, mps__launch_param(l, i), sizeof(v));
	return v;
}

static float f32_param(const struct si_launch *l, unsigned i)
{
	float v;

	memcpy(&v, mps__launch_param(l, i), sizeof(v));
	return v;
}

/* The spinning kernels busy-wait `cycles` clock cycles; a 2 GHz clock makes
 * that cycles / 2000 microseconds, slept once per launch. */
static void spin_for(long long cycles)
{
	long long us = cycles > 0 ? cycles / 2000 : 0;
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts))
		;
}

#define ACCESS(l, addr, bytes, align, out)                                           \
	do {                                                                         \
		CUresult rc_ = mps__launch_access(l, addr, bytes, align, (void **)(out)); \
		if (rc_ != CUDA_SUCCESS)                                             \
			return rc_;                                                  \
	} while (0)

static CUresult vadd(struct si_launch *l)
{
	size_t m = covered(l, (int)u32_param(l, 3));
	const float *a, *b;
	float *c;

	if (!m)
		return CUDA_SUCCESS;
	ACCESS(l, u64_param(l, 0), m * sizeof(float), 4, &a);
	ACCESS(l, u64_param(l, 1), m * sizeof(float), 4, &b);
	ACCESS(l, u64_param(l, 2), m * sizeof(float), 4, &c);
	for (uint64_t r = repeats(l); r; r--)
		for (size_t i = 0; i < m; i++)
			c[i] = a[i] + b[i];
	return CUDA_SUCCESS;
}

static CUresult saxpy(struct si_launch *l)
{
	float a = f32_param(l, 0);
	size_t m = covered(l, (int)u32_param(l, 3));
	const float *x;
	float *y;

	if (!m)
		return CUDA_SUCCESS;
	ACCESS(l, u64_param(l, 1), m * sizeof(float), 4, &x);
	ACCESS(l, u64_param(l, 2), m * sizeof(float), 4, &y);
	for (uint64_t r = repeats(l); r; r--)
		for (size_t i = 0; i < m; i++)
			y[i] = fmaf(a, x[i], y[i]);     /* the PTX is fma.rn.f32 */
	return CUDA_SUCCESS;
}

static CUresult iota_u32(struct si_launch *l)
{
	uint32_t base = u32_param(l, 1);
	size_t m = covered(l, (int)u32_param(l, 2));
	uint32_t *p;

	if (!m)
		return CUDA_SUCCESS;
	ACCESS(l, u64_param(l, 0), m * sizeof(uint32_t), 4, &p);
	for (size_t i = 0; i < m; i++)
		p[i] = base + (uint32_t)i;
	return CUDA_SUCCESS;
}

static CUresult affine_u32(struct si_launch *l)
{
	uint32_t mul = u32_param(l, 1), add = u32_param(l, 2);
	size_t m = covered(l, (int)u32_param(l, 3));
	uint32_t *p;

	if (!m)
		return CUDA_SUCCESS;
	ACCESS(l, u64_param(l, 0), m * sizeof(uint32_t), 4, &p);
	for (uint64_t r = repeats(l); r; r--)
		for (size_t i = 0; i < m; i++)
			p[i] = p[i] * mul + add;
	return CUDA_SUCCESS;
}

/* Thread 0 of each block writes the SM it ran on: block b "runs" on SM b % 16. */
static CUresult spin(struct si_launch *l)
{
	int32_t *out;

	ACCESS(l, u64_param(l, 1), (size_t)l->grid[0] * sizeof(int32_t), 4, &out);
	spin_for((long long)u64_param(l, 0));
	for (unsigned b = 0; b < l->grid[0]; b++)
		out[b] = (int32_t)(l->sm_first + b % l->sm_count);   /* the stream's SMs, in turn */
	return CUDA_SUCCESS;
}

static CUresult spin_then_store(struct si_launch *l)
{
	uint32_t *flag;

	ACCESS(l, u64_param(l, 1), sizeof(uint32_t), 4, &flag);
	spin_for((long long)u64_param(l, 0));
	*flag = u32_param(l, 2);
	return CUDA_SUCCESS;
}

/* struct mixed { int a; double b; char c[5]; } at PTX offsets 0, 8 and 16. */
static CUresult mixed_arg(struct si_launch *l)
{
	const unsigned char *m = mps__launch_param(l, 0);
	int32_t a;
	double b, s;
	double *out;

	ACCESS(l, u64_param(l, 1), sizeof(double), 8, &out);
	memcpy(&a, m, sizeof(a));
	memcpy(&b, m + 8, sizeof(b));
	s = (double)a + b;
	for (int k = 0; k < 5; k++)
		s += (double)(signed char)m[16 + k];
	*out = s;
	return CUDA_SUCCESS;
}

static CUresult reduce_sum(struct si_launch *l)
{
	size_t m = covered(l, (int)u32_param(l, 2));
	const float *x;
	float *out;

	if (!m)
		return CUDA_SUCCESS;
	ACCESS(l, u64_param(l, 0), m * sizeof(float), 4, &x);
	ACCESS(l, u64_param(l, 1), sizeof(float), 4, &out);
	for (uint64_t r = repeats(l); r; r--)
		for (size_t i = 0; i < m; i++)
			*out += x[i];
	return CUDA_SUCCESS;
}

/* The module's variable `name` = variable * mul + the argument, as the one
 * thread with blockIdx.x == 0 and threadIdx.x == 0 does. */
static CUresult bump(struct si_launch *l, const char *name, uint32_t mul)
{
	uint32_t *counter;
	CUresult rc = mps__launch_global(l, name, sizeof(uint32_t), (void **)&counter);

	if (rc != CUDA_SUCCESS)
		return rc;
	for (uint64_t r = repeats(l); r; r--)
		*counter = *counter * mul + u32_param(l, 0);
	return CUDA_SUCCESS;
}

static CUresult bump_global(struct si_launch *l)
{
	return bump(l, "g_counter", 1);
}

static CUresult bump_managed(struct si_launch *l)
{
	return bump(l, "m_counter", 3);
}

static CUresult store_at(struct si_launch *l)
{
	uint32_t *p;

	ACCESS(l, u64_param(l, 0), sizeof(uint32_t), 4, &p);
	*p = u32_param(l, 1);
	return CUDA_SUCCESS;
}

/* tex1Dfetch of a linear float texture: elements past its end read 0, as
 * the hardware's border does for fetches. */
static CUresult tex_fetch(struct si_launch *l)
{
	size_t m = covered(l, (int)u32_param(l, 2)), bytes = 0, have;
	CUarray_format format = CU_AD_FORMAT_FLOAT;
	unsigned channels = 0;
	uintptr_t base = 0;
	const float *src = NULL;
	float *out;
	bool ok;

	if (!m)
		return CUDA_SUCCESS;
	mps__lock();
	ok = mps__texture_linear(u64_param(l, 0), &base, &bytes, &format, &channels);
	mps__unlock();
	if (!ok || format != CU_AD_FORMAT_FLOAT || channels != 1)
		return CUDA_ERROR_ILLEGAL_ADDRESS;   /* not a texture this kernel can read */
	have = bytes / sizeof(float);
	if (have)
		ACCESS(l, base, have * sizeof(float), 4, &src);
	ACCESS(l, u64_param(l, 1), m * sizeof(float), 4, &out);
	for (size_t i = 0; i < m; i++)
		out[i] = 2.0f * (i < have ? src[i] : 0.0f) + 1.0f;
	return CUDA_SUCCESS;
}

/* One box of a 2-D float tensor map at (x0, y0), row by row; what lies
 * outside the tensor reads 0 (the map's out-of-bounds fill). An x0 that is
 * not a multiple of 16 bytes faults, as on the GPU. */
static CUresult tma_tile(struct si_launch *l)
{
	int x0 = (int)u32_param(l, 2), y0 = (int)u32_param(l, 3);
	struct si_tmap t;
	float *out;

	if (!mps__tensormap_tile(mps__launch_param(l, 0), &t) || t.rank != 2 || t.esize != 4 ||
	    (uint64_t)t.box[0] * t.box[1] > 256 || l->block[0] != t.box[0] * t.box[1])
		return CUDA_ERROR_ILLEGAL_INSTRUCTION;   /* not a map this kernel can use */
	if (((int64_t)x0 * 4) % 16)
		return CUDA_ERROR_ILLEGAL_INSTRUCTION;   /* as the hardware: a box starts 16-byte aligned */
	ACCESS(l, u64_param(l, 1), (size_t)t.box[0] * t.box[1] * sizeof(float), 4, &out);
	/* The part of the box inside the tensor, [gx0, gx1) x [gy0, gy1),
	 * reached as one span. */
	int64_t gx0 = x0 > 0 ? x0 : 0, gy0 = y0 > 0 ? y0 : 0;
	int64_t gx1 = (int64_t)x0 + t.box[0], gy1 = (int64_t)y0 + t.box[1];
	const unsigned char *src = NULL;

	if (gx1 > (int64_t)t.dim[0])
		gx1 = (int64_t)t.dim[0];
	if (gy1 > (int64_t)t.dim[1])
		gy1 = (int64_t)t.dim[1];
	if (gx0 < gx1 && gy0 < gy1)
		ACCESS(l, t.addr + (uint64_t)gy0 * t.stride[0] + (uint64_t)gx0 * 4,
		       (size_t)(gy1 - 1 - gy0) * t.stride[0] + (size_t)(gx1 - gx0) * 4, 4, &src);
	for (uint32_t y = 0; y < t.box[1]; y++) {
		int64_t gy = (int64_t)y0 + y;

		for (uint32_t x = 0; x < t.box[0]; x++) {
			int64_t gx = (int64_t)x0 + x;
			float v = 0.0f;

			if (gx >= gx0 && gx < gx1 && gy >= gy0 && gy < gy1)
				memcpy(&v, src + (uint64_t)(gy - gy0) * t.stride[0] + (uint64_t)(gx - gx0) * 4, 4);
			out[y * t.box[0] + x] = v;
		}
	}
	return CUDA_SUCCESS;
}

/* Device printf: what the kernel prints waits in the context's printf
 * buffer (one for the stand-in) until a synchronize writes it to stdout,
 * as the driver does (mps__printf_flush). */
static pthread_mutex_t printf_lock = PTHREAD_MUTEX_INITIALIZER;
static char *printf_buf;
static size_t printf_len, printf_cap;

static CUresult printf_u32(struct si_launch *l)
{
	uint32_t v = u32_param(l, 0);
	uint64_t threads = (uint64_t)l->grid[0] * l->block[0];

	pthread_mutex_lock(&printf_lock);
	for (uint64_t r = repeats(l); r; r--)
		for (uint64_t i = 0; i < threads; i++) {
			char line[64];
			int n = snprintf(line, sizeof(line), "openmps printf %u thread %u\n", v,
					 (unsigned)(i % l->block[0]));

			if (printf_len + (size_t)n > printf_cap) {
				size_t cap = printf_cap ? printf_cap * 2 : 4096;
				char *nb = realloc(printf_buf, cap);

				if (!nb)
					break;
				printf_buf = nb;
				printf_cap = cap;
			}
			memcpy(printf_buf + printf_len, line, (size_t)n);
			printf_len += (size_t)n;
		}
	pthread_mutex_unlock(&printf_lock);
	return CUDA_SUCCESS;
}

void mps__printf_flush(void)
{
	pthread_mutex_lock(&printf_lock);
	if (printf_len) {
		fwrite(printf_buf, 1, printf_len, stdout);
		fflush(stdout);
		printf_len = 0;
	}
	pthread_mutex_unlock(&printf_lock);
}

/* A failed device assert: the driver's message on the process's stderr,
 * and the context's end. */
static CUresult assert_u32(struct si_launch *l)
{
	if (u32_param(l, 0) == 0)
		return CUDA_SUCCESS;
	mps__printf_flush();
	fprintf(stderr, "printf.cu:20: void assert_u32(unsigned int): block: [0,0,0], thread: [0,0,0] "
			"Assertion `v == 0u || threadIdx.x != 0` failed.\n");
	fflush(stderr);
	return CUDA_ERROR_ASSERT;
}

static CUresult empty(struct si_launch *l)
{
	(void)l;
	return CUDA_SUCCESS;
}

static const struct si_twin twins[] = {
	{ "vadd",            4, { 8, 8, 8, 4 }, vadd },
	{ "saxpy",           4, { 4, 8, 8, 4 }, saxpy },
	{ "iota_u32",        3, { 8, 4, 4 },    iota_u32 },
	{ LN_STR(LONG_KERNEL_NAME), 3, { 8, 4, 4 }, iota_u32 },
	{ "affine_u32",      4, { 8, 4, 4, 4 }, affine_u32 },
	{ "spin",            2, { 8, 8 },       spin },
	{ "spin_then_store", 3, { 8, 8, 4 },    spin_then_store },
	{ "mixed_arg",       2, { 24, 8 },      mixed_arg },
	{ "reduce_sum",      3, { 8, 8, 4 },    reduce_sum },
	{ "bump_global",     1, { 4 },          bump_global },
	{ "bump_managed",    1, { 4 },          bump_managed },
	{ "store_at",        2, { 8, 4 },       store_at },
	{ "tex_fetch",       3, { 8, 8, 4 },    tex_fetch },
	{ "empty",           0, { 0 },          empty },
	{ "printf_u32",      1, { 4 },          printf_u32 },
	{ "assert_u32",      1, { 4 },          assert_u32 },
	{ "tma_tile",        4, { 128, 8, 4, 4 }, tma_tile },
};

const struct si_twin *mps__twin_find(const struct si_entry *e)
{
	for (size_t t = 0; t < sizeof(twins) / sizeof(twins[0]); t++) {
		const struct si_twin *tw = &twins[t];

		if (strcmp(tw->name, e->name))
			continue;
		if (tw->nparams != e->nparams)
			return NULL;
		for (unsigned i = 0; i < e->nparams; i++)
			if (tw->sizes[i] != e->params[i].size)
				return NULL;
		return tw;
	}
	return NULL;
}
