// SPDX-License-Identifier: MIT
/*
 * Driver initialisation and device queries: cuInit, cuDriverGetVersion, the
 * device count, handles, names, UUIDs, total memory and attributes, checked
 * for sanity and for agreement with each other (the PCI bus id string
 * against the PCI attributes, the device found by that string against the
 * device asked). Then the error paths a client library must reproduce
 * exactly: calls before cuInit, a bad ordinal, a bad attribute, NULL output
 * pointers, and the error-string functions. Last, the graphics interop
 * functions, which the driver exports though the toolkit's stub library
 * does not, and which NVIDIA's video library looks up by name (it stops
 * for good when one is missing): found by dlsym and by cuGetProcAddress;
 * a client of openmps answers them CUDA_ERROR_NOT_SUPPORTED.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static void check_attributes(CUdevice dev)
{
	int major = 0, minor = 0, warp = 0, sms = 0, tpb = 0, bx = 0, by = 0, bz = 0, gx = 0, gy = 0, gz = 0;
	int tpsm = 0, smem_blk = 0, smem_sm = 0, regs_blk = 0, uva = 0, maphost = 0, mode = -1, l2 = 0;
	int conc = 0, blocks_sm = 0, async = 0, coop = 0, prio = 0;

	REQUIRE_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&tpb, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&bx, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&by, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&bz, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&gx, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&gy, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&gz, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&tpsm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&smem_blk, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&smem_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&regs_blk, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&uva, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&maphost, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&conc, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&blocks_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&async, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&prio, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, dev));

	printf("  compute capability %d.%d, %d SMs, warp %d, %d threads/block, %d KiB smem/block\n",
	       major, minor, sms, warp, tpb, smem_blk / 1024);

	/* openmps needs Volta or later; the stand-in reports a Hopper-like part. */
	CHECK(major >= 7 && major <= 20, "compute capability major %d", major);
	CHECK(minor >= 0 && minor <= 9, "compute capability minor %d", minor);
	CHECK(warp == 32, "warp size %d", warp);
	CHECK(sms > 0 && sms <= 1024, "multiprocessor count %d", sms);
	CHECK(tpb >= 512 && tpb <= 4096, "max threads per block %d", tpb);
	CHECK(bx >= tpb && by >= 1 && bz >= 1 && by <= bx, "max block dims %d x %d x %d", bx, by, bz);
	CHECK(gx >= 65535 && gy >= 65535 && gz >= 65535, "max grid dims %d x %d x %d", gx, gy, gz);
	CHECK(tpsm >= tpb, "threads per SM %d < threads per block %d", tpsm, tpb);
	CHECK(smem_blk >= 16 * 1024, "shared memory per block %d", smem_blk);
	CHECK(smem_sm >= smem_blk, "shared memory per SM %d < per block %d", smem_sm, smem_blk);
	CHECK(regs_blk >= 16 * 1024, "registers per block %d", regs_blk);
	CHECK(uva == 1, "unified addressing %d", uva);
	CHECK(maphost == 1, "can map host memory %d", maphost);
	CHECK(mode >= CU_COMPUTEMODE_DEFAULT && mode <= CU_COMPUTEMODE_EXCLUSIVE_PROCESS, "compute mode %d", mode);
	CHECK(l2 > 0, "L2 cache size %d", l2);
	CHECK(conc == 0 || conc == 1, "concurrent kernels %d", conc);
	CHECK(blocks_sm > 0 && blocks_sm <= tpsm, "max blocks per SM %d", blocks_sm);
	CHECK(async >= 0 && async <= 16, "async engine count %d", async);
	CHECK(coop == 0 || coop == 1, "cooperative launch %d", coop);
	CHECK(prio == 0 || prio == 1, "stream priorities supported %d", prio);
}

static void check_pci(CUdevice dev)
{
	char bus[64], upper[64];
	int domain = -1, busno = -1, devno = -1;
	unsigned int d = 0, b = 0, s = 0, fn = 0;
	CUdevice again = -1;

	REQUIRE_CU(cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&busno, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev));
	REQUIRE_CU(cuDeviceGetAttribute(&devno, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev));
	memset(bus, 'X', sizeof(bus));
	REQUIRE_CU(cuDeviceGetPCIBusId(bus, (int)sizeof(bus), dev));
	REQUIRE(memchr(bus, '\0', sizeof(bus)) != NULL, "PCI bus id is not NUL-terminated");
	printf("  PCI %s (domain %d bus %d device %d)\n", bus, domain, busno, devno);
	/* The documented form is domain:bus:device.function in hex. */
	CHECK(sscanf(bus, "%x:%x:%x.%x", &d, &b, &s, &fn) == 4, "PCI bus id \"%s\" is not dddd:bb:dd.f", bus);
	CHECK((int)d == domain && (int)b == busno && (int)s == devno,
	      "PCI bus id \"%s\" disagrees with attributes %x:%x:%x", bus, domain, busno, devno);

	REQUIRE_CU(cuDeviceGetByPCIBusId(&again, bus));
	CHECK(again == dev, "cuDeviceGetByPCIBusId(\"%s\") gave device %d, expected %d", bus, again, dev);
	/* Case must not matter: the id is hex. */
	for (size_t i = 0; i < sizeof(upper); i++)
		upper[i] = (char)((bus[i] >= 'a' && bus[i] <= 'f') ? bus[i] - 'a' + 'A' : bus[i]);
	again = -1;
	REQUIRE_CU(cuDeviceGetByPCIBusId(&again, upper));
	CHECK(again == dev, "cuDeviceGetByPCIBusId(\"%s\") gave device %d, expected %d", upper, again, dev);
}

static void check_errors(int count, CUdevice dev)
{
	CUdevice d;
	int v;
	size_t bytes;
	char name[64];
	const char *s;

	CHECK_CU(cuDeviceGet(&d, count), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceGet(&d, count + 100), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, (CUdevice)(count + 7)),
		 CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceGetName(name, (int)sizeof(name), (CUdevice)(count + 7)), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceTotalMem(&bytes, (CUdevice)(count + 7)), CUDA_ERROR_INVALID_DEVICE);

	CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, dev), CUDA_ERROR_INVALID_VALUE);

	CHECK_CU(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetName(NULL, 64, dev), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceTotalMem(NULL, dev), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetUuid(NULL, dev), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetPCIBusId(NULL, 64, dev), CUDA_ERROR_INVALID_VALUE);

	/* Names are the enum spellings; strings are the driver's sentences. */
	s = NULL;
	if (CHECK_CU(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS))
		CHECK(s && strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0, "name of INVALID_VALUE is %s", s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorName(CUDA_ERROR_NOT_READY, &s), CUDA_SUCCESS))
		CHECK(s && strcmp(s, "CUDA_ERROR_NOT_READY") == 0, "name of NOT_READY is %s", s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorName(CUDA_SUCCESS, &s), CUDA_SUCCESS))
		CHECK(s && strcmp(s, "CUDA_SUCCESS") == 0, "name of SUCCESS is %s", s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s), CUDA_SUCCESS))
		CHECK(s && strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0, "name of ILLEGAL_ADDRESS is %s",
		      s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorString(CUDA_SUCCESS, &s), CUDA_SUCCESS))
		CHECK(s && strcmp(s, "no error") == 0, "string of SUCCESS is %s", s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS))
		CHECK(s && strstr(s, "memory") != NULL, "string of OUT_OF_MEMORY is %s", s ? s : "NULL");
	s = NULL;
	if (CHECK_CU(cuGetErrorString(CUDA_ERROR_INVALID_DEVICE, &s), CUDA_SUCCESS))
		CHECK(s && *s && strcmp(s, "CUDA_ERROR_INVALID_DEVICE") != 0, "string of INVALID_DEVICE is %s",
		      s ? s : "NULL");
	/* An unknown code: INVALID_VALUE and a NULL string. */
	s = "untouched";
	CHECK_CU(cuGetErrorName((CUresult)987654, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL, "name of an unknown code is \"%s\", expected NULL", s ? s : "");
	s = "untouched";
	CHECK_CU(cuGetErrorString((CUresult)987654, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL, "string of an unknown code is \"%s\", expected NULL", s ? s : "");
}

static void check_interop(void)
{
	static const char *const names[] = {
		"cuGLGetDevices", "cuGLGetDevices_v2", "cuGLCtxCreate_v2", "cuGLInit", "cuGraphicsGLRegisterBuffer",
		"cuGraphicsGLRegisterImage", "cuGLMapBufferObject_v2_ptds", "cuGLMapBufferObjectAsync_v2_ptsz",
		"cuVDPAUGetDevice", "cuVDPAUCtxCreate_v2", "cuGraphicsVDPAURegisterVideoSurface",
		"cuEGLStreamConsumerConnect", "cuGraphicsEGLRegisterImage", "cuGraphicsResourceGetMappedEglFrame",
	};
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	int (*mode)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openmps_client_mode");
	CUresult (*get_devices)(unsigned int *, CUdevice *, unsigned int, int) = NULL;
	CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *fn = NULL;

	if (!CHECK(lib != NULL, "libcuda.so.1 is not loaded: %s", dlerror()))
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(dlsym(lib, names[i]) != NULL, "libcuda.so.1 does not export %s", names[i]);
	CHECK_CU(cuGetProcAddress("cuGLGetDevices", &fn, 6050, CU_GET_PROC_ADDRESS_DEFAULT, &q), CUDA_SUCCESS);
	CHECK(q == CU_GET_PROC_ADDRESS_SUCCESS && fn == dlsym(lib, "cuGLGetDevices_v2"),
	      "cuGetProcAddress(cuGLGetDevices, 6050) gave %p (status %d), not cuGLGetDevices_v2", fn, (int)q);
	/* Served: no GL context can reach the server's. */
	get_devices = (CUresult (*)(unsigned int *, CUdevice *, unsigned int, int))dlsym(lib, "cuGLGetDevices_v2");
	if (mode && mode() == 2 && get_devices) {
		unsigned int n = 7;
		CUdevice devs[4];

		CHECK_CU(get_devices(&n, devs, 4, 1), CUDA_ERROR_NOT_SUPPORTED);
	}
	dlclose(lib);
}

int main(int argc, char **argv)
{
	int version = 0, count = -1, version2 = 0;
	CUresult r;
	CUuuid uuids[16];

	t_init(argc, argv);

	/* cuDriverGetVersion works before cuInit; device calls do not. */
	REQUIRE_CU(cuDriverGetVersion(&version));
	CHECK(version >= 12000 && version < 100000, "driver version %d", version);
	CHECK_CU(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);

	r = cuInit(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		printf("t_device: SKIP (no CUDA device)\n");
		return T_SKIP;
	}
	REQUIRE_CU(r);
	REQUIRE_CU(cuInit(0));                       /* a second cuInit is harmless */
	REQUIRE_CU(cuDriverGetVersion(&version2));
	CHECK(version2 == version, "driver version changed from %d to %d after cuInit", version, version2);
	printf("  driver version %d\n", version);

	REQUIRE_CU(cuDeviceGetCount(&count));
	if (count < 1) {
		printf("t_device: SKIP (no CUDA device)\n");
		return T_SKIP;
	}
	CHECK(count <= 64, "device count %d", count);

	for (int i = 0; i < count && i < 16; i++) {
		CUdevice dev = -1;
		char name[256];
		size_t total = 0;
		int nonzero = 0;

		REQUIRE_CU(cuDeviceGet(&dev, i));
		CHECK(dev == i, "cuDeviceGet(%d) gave handle %d", i, dev);

		memset(name, 'X', sizeof(name));
		REQUIRE_CU(cuDeviceGetName(name, (int)sizeof(name), dev));
		CHECK(memchr(name, '\0', sizeof(name)) != NULL, "device name is not NUL-terminated");
		name[sizeof(name) - 1] = '\0';
		CHECK(strlen(name) > 0, "device name is empty");
		printf("device %d: %s\n", i, name);

		memset(&uuids[i], 0, sizeof(uuids[i]));
		REQUIRE_CU(cuDeviceGetUuid(&uuids[i], dev));
		for (size_t k = 0; k < sizeof(uuids[i].bytes); k++)
			nonzero |= uuids[i].bytes[k] != 0;
		CHECK(nonzero, "device %d UUID is all zeros", i);
		for (int j = 0; j < i; j++)
			CHECK(memcmp(&uuids[i], &uuids[j], sizeof(CUuuid)) != 0, "devices %d and %d share a UUID", j, i);

		REQUIRE_CU(cuDeviceTotalMem(&total, dev));
		CHECK(total >= ((size_t)256 << 20), "total memory %zu bytes", total);
		printf("  total memory %zu MiB\n", total >> 20);

		check_attributes(dev);
		check_pci(dev);
	}
	check_errors(count, 0);
	check_interop();
	return t_finish();
}
