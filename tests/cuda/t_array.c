// SPDX-License-Identifier: MIT
/*
 * CUDA arrays and the copies that reach them: a 2D float array filled from
 * a pitched host matrix (cuMemcpy2D) and read into pitched device memory
 * and back; a 1D array of 4-channel bytes written at an offset from the
 * host, copied to a second array, to device memory and back to the host
 * (the 1D forms, synchronous and asynchronous); a 3D array of 2-channel
 * words written and read as a box inside it (cuMemcpy3D, async); a layered
 * array's layers; a mipmapped array's second level. Every byte compared,
 * what lies outside each box included; descriptors read back; and what
 * the driver refuses: three channels, a box past the array's end. Then
 * texture and surface objects: a kernel reads a linear float texture
 * (tex1Dfetch) and its result is checked; objects over an array, a
 * mipmapped array and pitched memory are made, read back and destroyed.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static uint64_t rng;
static CUstream stream;

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	REQUIRE(p, "out of memory");
	return p;
}

static void test_2d(void)
{
	enum { W = 64, H = 32, HP = W * 4 + 40 };   /* floats per row, rows, host pitch in bytes */
	unsigned char *in = xmalloc(HP * H), *out = xmalloc(HP * H);
	CUDA_ARRAY_DESCRIPTOR ad = { .Width = W, .Height = H, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 }, got;
	CUDA_MEMCPY2D c;
	CUdeviceptr dp;
	size_t pitch;
	CUarray a;

	t_fill_bytes(in, HP * H, &rng);
	REQUIRE_CU(cuArrayCreate(&a, &ad));
	REQUIRE_CU(cuArrayGetDescriptor(&got, a));
	CHECK(got.Width == W && got.Height == H && got.Format == CU_AD_FORMAT_FLOAT && got.NumChannels == 1,
	      "the descriptor read back: %zu x %zu, format %d, %u channels", got.Width, got.Height, (int)got.Format,
	      got.NumChannels);
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = HP;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.WidthInBytes = W * 4;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2D(&c));
	REQUIRE_CU(cuMemAllocPitch(&dp, &pitch, W * 4, H, 4));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = a;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dp;
	c.dstPitch = pitch;
	c.WidthInBytes = W * 4;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2DAsync(&c, stream));
	memset(&c, 0, sizeof(c));
	memset(out, 0x5c, HP * H);
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = dp;
	c.srcPitch = pitch;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = HP;
	c.WidthInBytes = W * 4;
	c.Height = H;
	REQUIRE_CU(cuMemcpy2DAsync(&c, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (int r = 0; r < H; r++) {
		if (CMP_BYTES(out + r * HP, in + r * HP, W * 4, "a row through a 2D array"))
			break;
		if (CHECK_FILL(out + r * HP + W * 4, HP - W * 4, 0x5c, "a row's padding"))
			break;
	}
	/* Past the array's last row: refused. */
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = HP;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.dstY = 1;
	c.WidthInBytes = W * 4;
	c.Height = H;
	CHECK(cuMemcpy2D(&c) != CUDA_SUCCESS, "a copy past the array's last row was taken");
	REQUIRE_CU(cuMemFree(dp));
	REQUIRE_CU(cuArrayDestroy(a));
	free(in);
	free(out);
}

static void test_1d(void)
{
	enum { W = 1000, BYTES = W * 4, OFF = 400, N = 2000 };   /* 4-channel bytes: 4 bytes an element */
	CUDA_ARRAY_DESCRIPTOR ad = { .Width = W, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
	unsigned char *in = xmalloc(N), *out = xmalloc(BYTES), *zero = calloc(1, BYTES);
	CUarray a, b;
	CUdeviceptr d;

	REQUIRE(zero, "out of memory");
	t_fill_bytes(in, N, &rng);
	REQUIRE_CU(cuArrayCreate(&a, &ad));
	REQUIRE_CU(cuArrayCreate(&b, &ad));
	REQUIRE_CU(cuMemAlloc(&d, BYTES));
	/* Both arrays zero first, so what lies outside the copies is known. */
	REQUIRE_CU(cuMemcpyHtoA(a, 0, zero, BYTES));
	REQUIRE_CU(cuMemcpyHtoA(b, 0, zero, BYTES));
	REQUIRE_CU(cuMemcpyHtoAAsync(a, OFF, in, N, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyAtoA(b, 0, a, 0, BYTES));
	REQUIRE_CU(cuMemcpyAtoD(d, b, 0, BYTES));
	memset(out, 0x5c, BYTES);
	REQUIRE_CU(cuMemcpyDtoH(out, d, BYTES));
	CHECK_FILL(out, OFF, 0, "the bytes before the copy's offset");
	CMP_BYTES(out + OFF, in, N, "a 1D array's bytes, host -> array -> array -> device -> host");
	CHECK_FILL(out + OFF + N, BYTES - OFF - N, 0, "the bytes after the copy");
	memset(out, 0x5c, BYTES);
	REQUIRE_CU(cuMemcpyDtoA(a, 0, d, BYTES));
	REQUIRE_CU(cuMemcpyAtoHAsync(out, a, OFF, N, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	CMP_BYTES(out, in, N, "device -> array -> host at an offset");
	REQUIRE_CU(cuMemcpyAtoH(out, b, OFF, N));
	CMP_BYTES(out, in, N, "array -> host, synchronous");
	CHECK(cuMemcpyHtoA(a, BYTES - 8, in, 16) != CUDA_SUCCESS, "a copy past a 1D array's end was taken");
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuArrayDestroy(a));
	REQUIRE_CU(cuArrayDestroy(b));
	free(in);
	free(out);
	free(zero);
}

/* A box of a 3D (or layered) array: written from a padded host volume at an
 * offset, read back whole into a packed host volume. */
static void box_3d(unsigned flags)
{
	enum { W = 16, H = 8, D = 4, E = 8 };   /* elements, rows, slices; bytes an element */
	enum { BX = 2, BY = 1, BZ = 1, BW = 10, BH = 6, BD = 3 };   /* the box, in elements */
	CUDA_ARRAY3D_DESCRIPTOR ad = { .Width = W, .Height = H, .Depth = D, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
				       .NumChannels = 2, .Flags = flags }, got;
	size_t vol = (size_t)W * E * H * D, hp = BW * E + 24, hh = BH + 2;
	unsigned char *in = xmalloc(hp * hh * BD), *out = xmalloc(vol), *zero = calloc(1, vol);
	CUDA_MEMCPY3D c;
	CUarray a;

	REQUIRE(zero, "out of memory");
	t_fill_bytes(in, hp * hh * BD, &rng);
	REQUIRE_CU(cuArray3DCreate(&a, &ad));
	REQUIRE_CU(cuArray3DGetDescriptor(&got, a));
	CHECK(got.Width == W && got.Height == H && got.Depth == D && got.NumChannels == 2 && got.Flags == flags,
	      "the 3D descriptor read back: %zu x %zu x %zu, flags %#x", got.Width, got.Height, got.Depth, got.Flags);
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = zero;
	c.srcPitch = W * E;
	c.srcHeight = H;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.WidthInBytes = W * E;
	c.Height = H;
	c.Depth = D;
	REQUIRE_CU(cuMemcpy3D(&c));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = hp;
	c.srcHeight = hh;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.dstXInBytes = BX * E;
	c.dstY = BY;
	c.dstZ = BZ;
	c.WidthInBytes = BW * E;
	c.Height = BH;
	c.Depth = BD;
	REQUIRE_CU(cuMemcpy3DAsync(&c, stream));
	memset(&c, 0, sizeof(c));
	memset(out, 0x5c, vol);
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = a;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = W * E;
	c.dstHeight = H;
	c.WidthInBytes = W * E;
	c.Height = H;
	c.Depth = D;
	REQUIRE_CU(cuMemcpy3DAsync(&c, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	for (int z = 0; z < D; z++)
		for (int y = 0; y < H; y++) {
			const unsigned char *row = out + ((size_t)z * H + y) * W * E;
			int in_box = z >= BZ && z < BZ + BD && y >= BY && y < BY + BH;

			if (!in_box) {
				if (CHECK_FILL(row, W * E, 0, flags ? "a layer's row outside the box" :
								      "a 3D array's row outside the box"))
					return;
				continue;
			}
			if (CHECK_FILL(row, BX * E, 0, "the bytes before the box in its row") ||
			   CMP_BYTES(row + BX * E, in + ((size_t)(z - BZ) * hh + (y - BY)) * hp, BW * E,
				     "a row of the box") ||
			   CHECK_FILL(row + (BX + BW) * E, (W - BX - BW) * E, 0, "the bytes after the box"))
				return;
		}
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = hp;
	c.srcHeight = hh;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.dstZ = D - 1;
	c.WidthInBytes = BW * E;
	c.Height = BH;
	c.Depth = 2;   /* one slice past the last */
	CHECK(cuMemcpy3D(&c) != CUDA_SUCCESS, "a box past the array's last slice was taken");
	REQUIRE_CU(cuArrayDestroy(a));
	free(in);
	free(out);
	free(zero);
}

static void test_mipmap(void)
{
	enum { W = 64, L1 = W / 2 };
	CUDA_ARRAY3D_DESCRIPTOR ad = { .Width = W, .Height = W, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
				       .NumChannels = 1 }, got;
	uint32_t *in = xmalloc(L1 * L1 * 4), *out = xmalloc(L1 * L1 * 4);
	CUmipmappedArray m;
	CUarray level;
	CUDA_MEMCPY2D c;

	t_fill_u32(in, L1 * L1, &rng);
	REQUIRE_CU(cuMipmappedArrayCreate(&m, &ad, 3));
	REQUIRE_CU(cuMipmappedArrayGetLevel(&level, m, 1));
	REQUIRE_CU(cuArray3DGetDescriptor(&got, level));
	CHECK(got.Width == L1 && got.Height == L1, "level 1 is %zu x %zu, want %d x %d", got.Width, got.Height, L1, L1);
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = L1 * 4;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = level;
	c.WidthInBytes = L1 * 4;
	c.Height = L1;
	REQUIRE_CU(cuMemcpy2D(&c));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = level;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = L1 * 4;
	c.WidthInBytes = L1 * 4;
	c.Height = L1;
	REQUIRE_CU(cuMemcpy2D(&c));
	CMP_U32(out, in, L1 * L1, "a mipmapped array's level 1");
	CHECK(cuMipmappedArrayGetLevel(&level, m, 3) != CUDA_SUCCESS, "level 3 of 3 levels was given");
	REQUIRE_CU(cuMipmappedArrayDestroy(m));
	free(in);
	free(out);
}

static void test_textures(void)
{
	enum { N = 4096 };
	CUfunction fetch = t_func(t_module(), "tex_fetch");
	float *in = xmalloc(N * 4), *out = xmalloc(N * 4), *want = xmalloc(N * 4);
	CUDA_ARRAY3D_DESCRIPTOR ad = { .Width = 32, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1,
				       .Flags = CUDA_ARRAY3D_SURFACE_LDST };
	CUDA_RESOURCE_DESC rd, back;
	CUDA_TEXTURE_DESC td, tback;
	CUtexObject t, ta, tm, tp;
	CUsurfObject sf;
	CUmipmappedArray mm;
	CUdeviceptr d, o, p;
	size_t pitch;
	CUarray a;
	int n = N;

	t_fill_f32_int(in, N, &rng);
	for (int i = 0; i < N; i++)
		want[i] = 2.0f * in[i] + 1.0f;
	REQUIRE_CU(cuMemAlloc(&d, N * 4));
	REQUIRE_CU(cuMemAlloc(&o, N * 4));
	/* On the kernel's stream: a synchronous copy from pageable memory may
	 * return before its bytes land, and the stream is non-blocking. */
	REQUIRE_CU(cuMemcpyHtoDAsync(d, in, N * 4, stream));
	memset(&rd, 0, sizeof(rd));
	rd.resType = CU_RESOURCE_TYPE_LINEAR;
	rd.res.linear.devPtr = d;
	rd.res.linear.format = CU_AD_FORMAT_FLOAT;
	rd.res.linear.numChannels = 1;
	rd.res.linear.sizeInBytes = N * 4;
	memset(&td, 0, sizeof(td));
	td.filterMode = CU_TR_FILTER_MODE_POINT;
	td.addressMode[0] = CU_TR_ADDRESS_MODE_CLAMP;
	REQUIRE_CU(cuTexObjectCreate(&t, &rd, &td, NULL));
	CHECK(t != 0, "a texture object of value 0");
	{
		void *args[] = { &t, &o, &n };

		REQUIRE_CU(t_launch(fetch, (N + 255) / 256, 256, stream, args));
	}
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(out, o, N * 4));
	CMP_F32(out, want, N, 0, 0, "a kernel's reads of a linear texture");
	REQUIRE_CU(cuTexObjectGetResourceDesc(&back, t));
	CHECK(back.resType == CU_RESOURCE_TYPE_LINEAR && back.res.linear.devPtr == d &&
		      back.res.linear.sizeInBytes == N * 4 && back.res.linear.format == CU_AD_FORMAT_FLOAT,
	      "the texture's resource read back");
	REQUIRE_CU(cuTexObjectGetTextureDesc(&tback, t));
	CHECK(tback.filterMode == CU_TR_FILTER_MODE_POINT, "the texture's filter mode read back");
	REQUIRE_CU(cuTexObjectDestroy(t));

	/* Sized past the allocation's end, as programs that pad do: the
	 * driver takes it, and reads inside the allocation are the same. */
	rd.res.linear.sizeInBytes = N * 4 + 65536;
	REQUIRE_CU(cuMemsetD32Async(o, 0, N, stream));
	REQUIRE_CU(cuTexObjectCreate(&t, &rd, &td, NULL));
	{
		void *args[] = { &t, &o, &n };

		REQUIRE_CU(t_launch(fetch, (N + 255) / 256, 256, stream, args));
	}
	REQUIRE_CU(cuStreamSynchronize(stream));
	REQUIRE_CU(cuMemcpyDtoH(out, o, N * 4));
	CMP_F32(out, want, N, 0, 0, "a kernel's reads of a linear texture sized past its allocation");
	REQUIRE_CU(cuTexObjectGetResourceDesc(&back, t));
	CHECK(back.res.linear.sizeInBytes == N * 4 + 65536, "the padded texture's size read back as given");

	/* Over an array (and a surface over the same), a mipmapped array and
	 * pitched memory. */
	REQUIRE_CU(cuArray3DCreate(&a, &ad));
	memset(&rd, 0, sizeof(rd));
	rd.resType = CU_RESOURCE_TYPE_ARRAY;
	rd.res.array.hArray = a;
	REQUIRE_CU(cuTexObjectCreate(&ta, &rd, &td, NULL));
	REQUIRE_CU(cuSurfObjectCreate(&sf, &rd));
	REQUIRE_CU(cuSurfObjectGetResourceDesc(&back, sf));
	CHECK(back.resType == CU_RESOURCE_TYPE_ARRAY && back.res.array.hArray == a,
	      "the surface's array read back");
	ad.Flags = 0;
	REQUIRE_CU(cuMipmappedArrayCreate(&mm, &ad, 2));
	memset(&rd, 0, sizeof(rd));
	rd.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
	rd.res.mipmap.hMipmappedArray = mm;
	td.mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
	td.maxMipmapLevelClamp = 1;
	REQUIRE_CU(cuTexObjectCreate(&tm, &rd, &td, NULL));
	REQUIRE_CU(cuMemAllocPitch(&p, &pitch, 64 * 4, 16, 4));
	memset(&rd, 0, sizeof(rd));
	rd.resType = CU_RESOURCE_TYPE_PITCH2D;
	rd.res.pitch2D.devPtr = p;
	rd.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
	rd.res.pitch2D.numChannels = 1;
	rd.res.pitch2D.width = 64;
	rd.res.pitch2D.height = 16;
	rd.res.pitch2D.pitchInBytes = pitch;
	td.mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
	td.maxMipmapLevelClamp = 0;
	REQUIRE_CU(cuTexObjectCreate(&tp, &rd, &td, NULL));
	REQUIRE_CU(cuTexObjectDestroy(tp));
	REQUIRE_CU(cuTexObjectDestroy(tm));
	REQUIRE_CU(cuSurfObjectDestroy(sf));
	REQUIRE_CU(cuTexObjectDestroy(ta));
	REQUIRE_CU(cuTexObjectDestroy(t));
	REQUIRE_CU(cuMipmappedArrayDestroy(mm));
	REQUIRE_CU(cuArrayDestroy(a));
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuMemFree(o));
	free(in);
	free(out);
	free(want);
}

/* Copy nodes with an array on one side, in a graph: pageable host memory
 * into a 2D array, the array into device memory, that back to pinned host
 * memory; launched twice with new host bytes each time, every row checked;
 * the array node's parameters read back with the array; and the same
 * array-to-device copy captured from a stream. */
static void test_graph_nodes(void)
{
	enum { W = 48, H = 16, HP = W * 4 + 24 };
	unsigned char *in = xmalloc(HP * H), *out;
	CUDA_ARRAY_DESCRIPTOR ad = { .Width = W, .Height = H, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
	CUDA_MEMCPY3D c, got;
	CUgraphNode n1, n2, n3, n4;
	CUgraph g, cg;
	CUgraphExec ge, cge;
	CUdeviceptr dp, dp2;
	CUarray a;

	REQUIRE_CU(cuArrayCreate(&a, &ad));
	REQUIRE_CU(cuMemAlloc(&dp, W * 4 * H));
	REQUIRE_CU(cuMemAlloc(&dp2, W * 4 * H));
	REQUIRE_CU(cuMemAllocHost((void **)&out, HP * H));
	REQUIRE_CU(cuGraphCreate(&g, 0));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = HP;
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = a;
	c.WidthInBytes = W * 4;
	c.Height = H;
	c.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n1, g, NULL, 0, &c, NULL));
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = a;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dp;
	c.dstPitch = W * 4;
	c.dstHeight = H;
	c.WidthInBytes = W * 4;
	c.Height = H;
	c.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n2, g, &n1, 1, &c, NULL));
	memset(&got, 0, sizeof(got));
	REQUIRE_CU(cuGraphMemcpyNodeGetParams(n2, &got));
	CHECK(got.srcMemoryType == CU_MEMORYTYPE_ARRAY && got.srcArray == a && got.dstMemoryType == CU_MEMORYTYPE_DEVICE &&
		      got.dstDevice == dp && got.WidthInBytes == W * 4 && got.Height == H,
	      "an array copy node's parameters read back wrong (type %d, array %p)", (int)got.srcMemoryType,
	      (void *)got.srcArray);
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = dp;
	c.srcPitch = W * 4;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = HP;
	c.WidthInBytes = W * 4;
	c.Height = H;
	c.Depth = 1;
	REQUIRE_CU(cuGraphAddMemcpyNode(&n3, g, &n2, 1, &c, NULL));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&ge, g, 0));
	for (int round = 0; round < 2; round++) {
		t_fill_bytes(in, HP * H, &rng);
		memset(out, 0x5c, HP * H);
		REQUIRE_CU(cuGraphLaunch(ge, stream));
		REQUIRE_CU(cuStreamSynchronize(stream));
		for (int r = 0; r < H; r++) {
			if (CMP_BYTES(out + r * HP, in + r * HP, W * 4, "a row through a graph's array copies"))
				break;
			if (CHECK_FILL(out + r * HP + W * 4, HP - W * 4, 0x5c, "a row's padding after a graph"))
				break;
		}
	}
	/* Captured: the array into a second buffer, read back. */
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = a;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dp2;
	c.dstPitch = W * 4;
	c.dstHeight = H;
	c.WidthInBytes = W * 4;
	c.Height = H;
	c.Depth = 1;
	REQUIRE_CU(cuMemsetD8(dp2, 0, W * 4 * H));
	REQUIRE_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
	REQUIRE_CU(cuMemcpy3DAsync(&c, stream));
	REQUIRE_CU(cuStreamEndCapture(stream, &cg));
	REQUIRE_CU(cuGraphInstantiateWithFlags(&cge, cg, 0));
	REQUIRE_CU(cuGraphLaunch(cge, stream));
	REQUIRE_CU(cuStreamSynchronize(stream));
	{
		unsigned char *back = xmalloc(W * 4 * H);

		REQUIRE_CU(cuMemcpyDtoH(back, dp2, W * 4 * H));
		for (int r = 0; r < H; r++)
			if (CMP_BYTES(back + r * W * 4, in + r * HP, W * 4, "a row through a captured array copy"))
				break;
		free(back);
	}
	{
		CUgraphNode nodes[4];
		size_t nn = 4;

		REQUIRE_CU(cuGraphGetNodes(cg, nodes, &nn));
		n4 = nn ? nodes[0] : NULL;
		CHECK(nn == 1, "a captured array copy made %zu nodes", nn);
		if (n4) {
			memset(&got, 0, sizeof(got));
			REQUIRE_CU(cuGraphMemcpyNodeGetParams(n4, &got));
			CHECK(got.srcMemoryType == CU_MEMORYTYPE_ARRAY && got.srcArray == a,
			      "a captured array copy's node names type %d, array %p", (int)got.srcMemoryType,
			      (void *)got.srcArray);
		}
	}
	REQUIRE_CU(cuGraphExecDestroy(cge));
	REQUIRE_CU(cuGraphDestroy(cg));
	REQUIRE_CU(cuGraphExecDestroy(ge));
	REQUIRE_CU(cuGraphDestroy(g));
	REQUIRE_CU(cuMemFreeHost(out));
	REQUIRE_CU(cuMemFree(dp));
	REQUIRE_CU(cuMemFree(dp2));
	REQUIRE_CU(cuArrayDestroy(a));
	free(in);
}

int main(int argc, char **argv)
{
	CUDA_ARRAY_DESCRIPTOR bad = { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 3 };
	CUarray a;

	t_init(argc, argv);
	t_primary(t_device());
	rng = t_rng(1);
	REQUIRE_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	test_2d();
	test_1d();
	box_3d(0);
	box_3d(CUDA_ARRAY3D_LAYERED);
	test_mipmap();
	test_textures();
	test_graph_nodes();
	CHECK_CU(cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuStreamDestroy(stream));
	return t_finish();
}
