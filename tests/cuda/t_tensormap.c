// SPDX-License-Identifier: MIT
/*
 * Tensor maps (TMA descriptors), as Triton's and CUTLASS's Hopper kernels
 * use them: a 2-D float tensor is encoded with cuTensorMapEncodeTiled, and a
 * kernel (tma_tile) loads boxes of it through the tensor memory accelerator
 * at coordinates inside, across the edge and before the origin; each box
 * is checked against the host's copy (outside the tensor reads 0). The
 * innermost coordinate stays a multiple of 16 bytes: the hardware faults
 * (illegal instruction) on a box that starts elsewhere in a row. The same
 * arguments encode the same bytes, also after other encodings in between
 * (a client that keeps answers must key them on every argument); a map
 * whose address cuTensorMapReplaceAddress changed reads the other tensor.
 * The caller's arrays have exactly the documented lengths (strides rank - 1,
 * im2col corners rank - 2), on the heap, so a read past them shows under
 * AddressSanitizer. Arguments the documentation rules out are refused with
 * CUDA_ERROR_INVALID_VALUE, but for a descriptor aligned to 16 bytes
 * rather than 64: the driver writes that one. Needs compute capability 9.0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define W   100   /* elements per row (400 bytes: a multiple of 16) */
#define H   37
#define BOX 16

static CUtensorMap maps[4];   /* 64-byte aligned by their type */

/* Encodes a W x H float tensor at addr with 16 x 16 boxes. The strides
 * array has one element (rank - 1), on the heap. */
static CUresult encode(CUtensorMap *map, CUdeviceptr addr, cuuint32_t box0)
{
	cuuint64_t dim[2] = { W, H }, *stride = malloc(sizeof(*stride));
	cuuint32_t box[2] = { box0, BOX }, es[2] = { 1, 1 };
	CUresult r;

	REQUIRE(stride, "out of memory");
	stride[0] = W * sizeof(float);
	r = cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)addr, dim, stride, box, es,
				   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
				   CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	free(stride);
	return r;
}

/* Loads the box at (x0, y0) through map and checks it against host[]. */
static void check_box(CUfunction f, const CUtensorMap *map, CUdeviceptr out, const float *host, int x0, int y0,
		      const char *what)
{
	float got[BOX * BOX], want[BOX * BOX];
	CUtensorMap arg = *map;
	void *params[] = { &arg, &out, &x0, &y0 };
	char label[96];

	REQUIRE_CU(cuMemsetD32(out, 0x7fc00000u, BOX * BOX));   /* NaN: a box never written shows */
	REQUIRE_CU(cuLaunchKernel(f, 1, 1, 1, BOX * BOX, 1, 1, 0, NULL, params, NULL));
	REQUIRE_CU(cuCtxSynchronize());
	REQUIRE_CU(cuMemcpyDtoH(got, out, sizeof(got)));
	for (int y = 0; y < BOX; y++) {
		for (int x = 0; x < BOX; x++) {
			int gx = x0 + x, gy = y0 + y;

			want[y * BOX + x] = gx >= 0 && gy >= 0 && gx < W && gy < H ? host[gy * W + gx] : 0.0f;
		}
	}
	snprintf(label, sizeof(label), "%s box at (%d, %d)", what, x0, y0);
	CMP_F32(got, want, BOX * BOX, 0.0f, 0.0f, label);
}

int main(int argc, char **argv)
{
	static const int at[][2] = { { 0, 0 }, { 32, 8 }, { W - 8, H - 5 }, { -4, -2 }, { 80, 30 } };
	float *a = malloc(W * H * sizeof(float)), *b = malloc(W * H * sizeof(float));
	CUdeviceptr da, db, out;
	CUtensorMap *m = maps;
	uint64_t rng;
	CUmodule mod;
	CUfunction f;
	CUdevice dev;
	int major = 0;

	t_init(argc, argv);
	dev = t_device();
	t_primary(dev);
	REQUIRE_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	if (major < 9) {
		printf("tensor maps need compute capability 9.0 (this device: %d.x): skipped\n", major);
		return T_SKIP;
	}
	REQUIRE(a && b, "out of memory");
	rng = t_rng(0);
	t_fill_f32(a, W * H, &rng);
	t_fill_f32(b, W * H, &rng);
	mod = t_module();
	f = t_func(mod, "tma_tile");
	REQUIRE_CU(cuMemAlloc(&da, W * H * sizeof(float)));
	REQUIRE_CU(cuMemAlloc(&db, W * H * sizeof(float)));
	REQUIRE_CU(cuMemAlloc(&out, BOX * BOX * sizeof(float)));
	REQUIRE_CU(cuMemcpyHtoD(da, a, W * H * sizeof(float)));
	REQUIRE_CU(cuMemcpyHtoD(db, b, W * H * sizeof(float)));

	/* Boxes of a, then of b. */
	REQUIRE_CU(encode(&m[0], da, BOX));
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		check_box(f, &m[0], out, a, at[i][0], at[i][1], "tensor a:");
	REQUIRE_CU(encode(&m[1], db, BOX));
	check_box(f, &m[1], out, b, 8, 7, "tensor b:");

	/* The same arguments, the same bytes, with other encodings between. */
	REQUIRE_CU(encode(&m[2], da, BOX));
	CHECK(!memcmp(&m[2], &m[0], sizeof(m[0])), "a encoded again after b: other bytes");
	REQUIRE_CU(encode(&m[2], da, 8));
	CHECK(memcmp(&m[2], &m[0], sizeof(m[0])), "a with 8-wide boxes encoded as with 16-wide ones");
	REQUIRE_CU(encode(&m[2], da, BOX));
	CHECK(!memcmp(&m[2], &m[0], sizeof(m[0])), "a encoded a third time: other bytes");

	/* a's map moved to b reads b. */
	m[3] = m[0];
	REQUIRE_CU(cuTensorMapReplaceAddress(&m[3], (void *)db));
	check_box(f, &m[3], out, b, 32, 8, "a's map moved to b:");
	CHECK(!memcmp(&m[0], &m[2], sizeof(m[0])), "the moved copy changed the original");

	/* What the documentation rules out. */
	{
		static unsigned char raw[192] __attribute__((aligned(64)));
		cuuint64_t dim[2] = { W, H }, st[1] = { W * sizeof(float) }, bad_st[1] = { W * sizeof(float) + 4 };
		cuuint32_t box[2] = { BOX, BOX }, zero_box[2] = { 0, BOX }, es[2] = { 1, 1 };
		const CUtensorMapInterleave il = CU_TENSOR_MAP_INTERLEAVE_NONE;
		const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_NONE;
		const CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
		const CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
		const CUtensorMapDataType f32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;

		/* A descriptor 16 bytes off the documented 64: the driver writes it. */
		CHECK_CU(cuTensorMapEncodeTiled((CUtensorMap *)(raw + 16), f32, 2, (void *)da, dim, st, box, es, il, sw,
						 l2, oob), CUDA_SUCCESS);
		CHECK(!memcmp(raw + 16, &m[0], sizeof(m[0])), "a descriptor at 16 bytes: other bytes");
		CHECK_CU(cuTensorMapEncodeTiled(&m[2], f32, 0, (void *)da, dim, st, box, es, il, sw, l2, oob),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuTensorMapEncodeTiled(&m[2], f32, 2, (void *)(da + 4), dim, st, box, es, il, sw, l2, oob),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuTensorMapEncodeTiled(&m[2], f32, 2, (void *)da, dim, bad_st, box, es, il, sw, l2, oob),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuTensorMapEncodeTiled(&m[2], f32, 2, (void *)da, dim, st, zero_box, es, il, sw, l2, oob),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuTensorMapEncodeTiled(&m[2], f32, 2, (void *)da, dim, st, NULL, es, il, sw, l2, oob),
			 CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(cuTensorMapReplaceAddress((CUtensorMap *)(raw + 16), (void *)db), CUDA_SUCCESS);
		CHECK(!memcmp(raw + 16, &m[3], sizeof(m[3])), "a descriptor at 16 bytes moved to b: other bytes");
		CHECK_CU(cuTensorMapReplaceAddress(&m[3], (void *)(db + 4)), CUDA_ERROR_INVALID_VALUE);
	}

	/* Im2col over an NHWC tensor (1 x 8 x 8 x 16 floats): encodes, and
	 * encodes the same bytes again; the corners arrays are rank - 2 long. */
	{
		cuuint64_t dim[4] = { 16, 8, 8, 1 }, *st = malloc(3 * sizeof(*st));
		cuuint32_t es[4] = { 1, 1, 1, 1 };
		int *lo = malloc(2 * sizeof(*lo)), *hi = malloc(2 * sizeof(*hi));
		CUtensorMap x[2];
		CUresult r[2];

		REQUIRE(st && lo && hi, "out of memory");
		st[0] = 16 * 4;
		st[1] = 16 * 4 * 8;
		st[2] = 16 * 4 * 64;
		lo[0] = lo[1] = -1;
		hi[0] = hi[1] = 1;
		for (int i = 0; i < 2; i++)
			r[i] = cuTensorMapEncodeIm2col(&x[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, (void *)da, dim, st, lo,
						       hi, 16, 64, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
						       CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
						       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
		CHECK_CU(r[0], CUDA_SUCCESS);
		CHECK_CU(r[1], CUDA_SUCCESS);
		CHECK(!memcmp(&x[0], &x[1], sizeof(x[0])), "an im2col map encoded twice: other bytes");
		free(st);
		free(lo);
		free(hi);
	}

	REQUIRE_CU(cuMemFree(out));
	REQUIRE_CU(cuMemFree(db));
	REQUIRE_CU(cuMemFree(da));
	REQUIRE_CU(cuModuleUnload(mod));
	free(a);
	free(b);
	return t_finish();
}
