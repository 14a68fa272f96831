// SPDX-License-Identifier: MIT
/*
 * Peer access between two devices: what cuDeviceCanAccessPeer and
 * cuDeviceGetP2PAttribute say, enabling and disabling access with the
 * driver's errors, peer copies (cuMemcpyPeer, its async form, a 3D peer
 * copy of a box into a padded box, and the plain
 * device-to-device copy across devices) checked against the source, and a
 * kernel on device 0 that reads and writes device 1's memory. Skipped with
 * fewer than two devices or where the two cannot reach each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define WORDS (3u << 18)   /* 3 MiB */

int main(int argc, char **argv)
{
	CUdevice d0, d1;
	CUcontext c0, c1;
	CUdeviceptr a, b, c;
	CUstream s;
	CUfunction affine;
	uint32_t *in, *out;
	unsigned int mul = 5, add = 7;
	int n = 0, can01 = 0, can10 = 0, v = -1, words = WORDS;
	void *args[] = { &b, &mul, &add, &words };
	uint64_t rng;

	t_init(argc, argv);
	rng = t_rng(0);
	REQUIRE_CU(cuInit(0));
	REQUIRE_CU(cuDeviceGetCount(&n));
	if (n < 2) {
		printf("t_peer: one device only\n");
		return T_SKIP;
	}
	REQUIRE_CU(cuDeviceGet(&d0, 0));
	REQUIRE_CU(cuDeviceGet(&d1, 1));
	REQUIRE_CU(cuDeviceCanAccessPeer(&can01, d0, d1));
	REQUIRE_CU(cuDeviceCanAccessPeer(&can10, d1, d0));
	if (!can01 || !can10) {
		printf("t_peer: devices 0 and 1 cannot reach each other\n");
		return T_SKIP;
	}
	REQUIRE_CU(cuDeviceCanAccessPeer(&v, d0, d0));
	CHECK(v == 0, "a device is its own peer (%d)", v);
	REQUIRE_CU(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, d0, d1));
	CHECK(v == 1, "P2P access supported reads %d", v);
	CHECK_CU(cuDeviceGetP2PAttribute(NULL, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, d0, d1),
		 CUDA_ERROR_INVALID_VALUE);

	REQUIRE_CU(cuDevicePrimaryCtxRetain(&c1, d1));
	REQUIRE_CU(cuDevicePrimaryCtxRetain(&c0, d0));
	REQUIRE_CU(cuCtxSetCurrent(c0));
	affine = t_func(t_module(), "affine_u32");
	CHECK_CU(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	REQUIRE_CU(cuCtxEnablePeerAccess(c1, 0));
	CHECK_CU(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	CHECK(cuCtxEnablePeerAccess(c0, 0) != CUDA_SUCCESS, "peer access to its own context enabled");

	in = malloc(WORDS * 4);
	out = malloc(WORDS * 4);
	REQUIRE(in && out, "malloc");
	t_fill_u32(in, WORDS, &rng);
	REQUIRE_CU(cuMemAlloc(&a, WORDS * 4));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuCtxSetCurrent(c1));
	REQUIRE_CU(cuMemAlloc(&b, WORDS * 4));
	REQUIRE_CU(cuMemsetD32(b, 0xdeadbeefu, WORDS));
	REQUIRE_CU(cuCtxSetCurrent(c0));

	/* Device 0 to device 1, then back through a third buffer. */
	REQUIRE_CU(cuMemcpyHtoD(a, in, WORDS * 4));
	REQUIRE_CU(cuMemcpyPeer(b, c1, a, c0, WORDS * 4));
	REQUIRE_CU(cuMemAlloc(&c, WORDS * 4));
	REQUIRE_CU(cuMemcpyPeerAsync(c, c0, b, c1, WORDS * 4, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoH(out, c, WORDS * 4));
	CMP_U32(out, in, WORDS, "device 0 -> device 1 -> device 0");

	/* A kernel on device 0 over device 1's memory. */
	REQUIRE_CU(t_launch(affine, WORDS / 256, 256, s, args));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemcpyDtoD(a, b, WORDS * 4));   /* across devices, plain */
	REQUIRE_CU(cuMemcpyDtoH(out, a, WORDS * 4));
	for (uint32_t i = 0; i < WORDS; i++)
		in[i] = in[i] * mul + add;
	CMP_U32(out, in, WORDS, "device 1's memory after a kernel on device 0");

	/* A 3D peer copy: a 64 x 8 x 4 box of device 0's words (rows of 256
	 * bytes, slices of 8 rows) into a padded box of device 1's, and back. */
	{
		CUDA_MEMCPY3D_PEER p3;

		REQUIRE_CU(cuMemcpyHtoD(a, in, WORDS * 4));
		REQUIRE_CU(cuMemsetD32(b, 0, WORDS));
		memset(&p3, 0, sizeof(p3));
		p3.srcMemoryType = p3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		p3.srcDevice = a;
		p3.srcContext = c0;
		p3.srcPitch = 256;
		p3.srcHeight = 8;
		p3.dstDevice = b;
		p3.dstContext = c1;
		p3.dstPitch = 512;
		p3.dstHeight = 9;
		p3.dstXInBytes = 4;
		p3.WidthInBytes = 256;
		p3.Height = 8;
		p3.Depth = 4;
		REQUIRE_CU(cuMemcpy3DPeer(&p3));
		REQUIRE_CU(cuMemcpyDtoH(out, b, WORDS * 4));
		for (int z = 0; z < 4; z++)
			for (int y = 0; y < 8; y++)
				if (CMP_U32(out + (z * 9 + y) * 128 + 1, in + (z * 8 + y) * 64, 64, "a row of a 3D peer copy"))
					goto done;
		CHECK(out[0] == 0 && out[65] == 0, "3D peer copy wrote outside its box");
		p3.dstContext = NULL;
		{
			CUresult r = cuMemcpy3DPeerAsync(&p3, s);

			CHECK(r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_VALUE,
			      "a 3D peer copy with no destination context: %s", t_errname(r));
		}
	}
done:
	REQUIRE_CU(cuCtxDisablePeerAccess(c1));
	CHECK_CU(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuMemFree(b));
	REQUIRE_CU(cuMemFree(c));
	REQUIRE_CU(cuStreamDestroy(s));
	free(in);
	free(out);
	REQUIRE_CU(cuDevicePrimaryCtxRelease(d0));
	REQUIRE_CU(cuDevicePrimaryCtxRelease(d1));
	return t_finish();
}
