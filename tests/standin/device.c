// SPDX-License-Identifier: MIT
/*
 * cuInit and the device queries. The stand-in shows OPENMPS_STANDIN_DEVICES
 * devices (default 1, at most 8; 0 makes cuInit fail with
 * CUDA_ERROR_NO_DEVICE as a machine without GPUs would), each with
 * OPENMPS_STANDIN_MEMORY bytes (default 1 GiB, K/M/G suffixes). Each looks
 * like a small Hopper part: compute capability 9.0, 16 SMs, 1024 threads per
 * block, unified addressing. Names, UUIDs and PCI bus ids are deterministic
 * and distinct per device, and the PCI attributes agree with
 * cuDeviceGetPCIBusId.
 *
 * CUDA_VISIBLE_DEVICES picks among them as the driver does: a comma list
 * of ordinals and UUIDs ("GPU-" and any unique prefix of the rest), in
 * the order given, ending at the first entry that names no device (or one
 * named already); an empty list leaves none (CUDA_ERROR_NO_DEVICE). A
 * device keeps its name, UUID and PCI bus id whatever ordinal it gets.
 */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "standin.h"

struct si_device mps__devices[SI_MAX_DEVICES];
int mps__ndevices;

static atomic_bool initialized;

bool mps__initialized(void)
{
	/* Acquire pairs with the release in cuInit: whoever sees true also
	 * sees the devices and contexts it set up. */
	return atomic_load_explicit(&initialized, memory_order_acquire);
}

struct si_device *mps__device(CUdevice dev)
{
	return dev >= 0 && dev < mps__ndevices ? &mps__devices[dev] : NULL;
}

/* Parses "123", "64K", "256M", "2G" (also "2GiB", "2gb"). 0 or -EINVAL. */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (shift && (*end == 'b' || *end == 'B'))
		end++;
	if (*end || v == 0 || v > (~0ull >> shift))
		return -EINVAL;
	*out = (size_t)(v << shift);
	return 0;
}

/* The UUID of the stand-in's physical device `phys`. */
static void phys_uuid(int phys, uint8_t u[16])
{
	uint64_t h = 0xcbf29ce484222325ull;     /* FNV-1a of a per-device string */
	char seed[48];

	snprintf(seed, sizeof(seed), "openmps stand-in device %d", phys);
	for (int i = 0; i < 16; i++) {
		for (const char *c = seed; *c; c++)
			h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
		h = (h ^ (uint64_t)i) * 0x100000001b3ull;
		u[i] = (uint8_t)(h >> 56);
	}
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);       /* looks like a v4 UUID */
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
	u[15] = (uint8_t)phys;    /* distinct whatever the hash does */
}

/* The physical device an entry of CUDA_VISIBLE_DEVICES names (len bytes
 * at e), or -1. */
static int visible_entry(const char *e, size_t len, int nphys)
{
	int found = -1;

	if (len && isdigit((unsigned char)e[0])) {
		long v = 0;

		for (size_t i = 0; i < len; i++) {
			if (!isdigit((unsigned char)e[i]) || v > SI_MAX_DEVICES)
				return -1;
			v = v * 10 + (e[i] - '0');
		}
		return v < nphys ? (int)v : -1;
	}
	if (len <= 4 || strncmp(e, "GPU-", 4))
		return -1;
	for (int p = 0; p < nphys; p++) {
		char text[48];
		uint8_t u[16];
		size_t n;

		phys_uuid(p, u);
		n = (size_t)snprintf(text, sizeof(text),
				     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
				     u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
		if (len <= n && !strncasecmp(text, e, len)) {
			if (found >= 0)
				return -1;   /* a prefix of two */
			found = p;
		}
	}
	return found;
}

/* Which of nphys physical devices the program sees, in order (map), by
 * CUDA_VISIBLE_DEVICES: their count. */
static int visible_devices(int nphys, int *map)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	int n = 0;

	if (!v) {
		for (int p = 0; p < nphys; p++)
			map[p] = p;
		return nphys;
	}
	while (*v && n < nphys) {
		const char *end = strchr(v, ',');
		size_t len = end ? (size_t)(end - v) : strlen(v);
		int p;

		while (len && isspace((unsigned char)*v)) {
			v++;
			len--;
		}
		while (len && isspace((unsigned char)v[len - 1]))
			len--;
		p = visible_entry(v, len, nphys);
		for (int i = 0; i < n && p >= 0; i++)
			if (map[i] == p)
				p = -1;
		if (p < 0)
			break;
		map[n++] = p;
		if (!end)
			break;
		v = end + 1;
	}
	return n;
}

static CUresult read_config(int *ndev, size_t *mem)
{
	const char *d = getenv("OPENMPS_STANDIN_DEVICES");
	const char *m = getenv("OPENMPS_STANDIN_MEMORY");

	*ndev = 1;
	*mem = (size_t)1 << 30;
	if (d && *d) {
		char *end;
		long v = strtol(d, &end, 10);

		if (*end || v < 0 || v > SI_MAX_DEVICES) {
			fprintf(stderr, "openmps stand-in: OPENMPS_STANDIN_DEVICES=%s is not 0..%d\n",
				d, SI_MAX_DEVICES);
			return CUDA_ERROR_INVALID_VALUE;
		}
		if (v == 0)
			return CUDA_ERROR_NO_DEVICE;
		*ndev = (int)v;
	}
	if (m && *m && (parse_size(m, mem) < 0 || *mem < 256)) {
		fprintf(stderr, "openmps stand-in: OPENMPS_STANDIN_MEMORY=%s is not a size\n", m);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CU_API CUresult cuInit(unsigned int Flags)
{
	CUresult rc = CUDA_SUCCESS;
	int ndev, phys[SI_MAX_DEVICES];
	size_t mem;

	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (mps__initialized())
		return CUDA_SUCCESS;
	mps__lock();
	if (mps__initialized())
		goto out_unlock;
	rc = read_config(&ndev, &mem);
	if (rc != CUDA_SUCCESS)
		goto out_unlock;
	ndev = visible_devices(ndev, phys);
	if (!ndev) {
		rc = CUDA_ERROR_NO_DEVICE;
		goto out_unlock;
	}
	mps__ndevices = ndev;
	for (int i = 0; i < ndev; i++) {
		mps__devices[i].ordinal = i;
		mps__devices[i].phys = phys[i];
		mps__devices[i].total_mem = mem;
		mps__devices[i].used_mem = 0;
	}
	if (mps__contexts_create() < 0) {
		mps__ndevices = 0;
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unlock;
	}
	atomic_store_explicit(&initialized, true, memory_order_release);
out_unlock:
	mps__unlock();
	return rc;
}

/* Works before cuInit, as the real one does. */
CU_API CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SI_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceGetCount(int *count)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = mps__ndevices;
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

/* Checks the common preconditions of a device query. */
static CUresult device_check(const void *out, CUdevice dev)
{
	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__device(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult rc = device_check(name, dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "openmps stand-in device %d", mps__devices[dev].phys);
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	CUresult rc = device_check(uuid, dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	phys_uuid(mps__devices[dev].phys, (uint8_t *)uuid->bytes);
	return CUDA_SUCCESS;
}

CU_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult rc = device_check(bytes, dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	*bytes = mps__devices[dev].total_mem;
	return CUDA_SUCCESS;
}

/* Physical device N sits on PCI bus N + 1 of domain 0. */
static int pci_bus(CUdevice dev)
{
	return mps__devices[dev].phys + 1;
}

CU_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult rc = device_check(pciBusId, dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "%04x:%02x:%02x.0", 0, pci_bus(dev), 0);
	return CUDA_SUCCESS;
}

/*
 * The value of every attribute below CU_DEVICE_ATTRIBUTE_MAX. Those the
 * stand-in cannot honour (managed memory, ...) read 0 so that callers do
 * not try them. Memory pools, virtual memory management with POSIX file
 * descriptors, and peer access between its devices it models.
 */
static int attribute(int a, CUdevice dev)
{
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return SI_MAX_THREADS;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 0x7fffffff;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return SI_SMEM_DEFAULT;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 0x7fffffff;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 2000000;    /* kHz: the 2 GHz the spin twin assumes */
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return SI_SM_COUNT;
	case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS: return 2048;
	case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return pci_bus(dev);
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
	case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 8 << 20;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS: return 2048;
	case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER: return 1;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE: return 8192;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE: return 8192;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE: return 32768;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS: return 2046;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: return 65536;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS: return 2048;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS: return 2048;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS: return 2046;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: return 268435456;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH: return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: return 65000;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: return 2097120;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT: return 32768;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH: return 32768;
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return SI_SMEM_PER_SM;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 0;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return dev;
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0;
	case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 0;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return SI_SMEM_OPTIN;
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 5 << 20;
	case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return SI_SMEM_RESERVED;
	case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
	case 126: return 4;             /* MEM_SYNC_DOMAIN_COUNT */
	case 131: return -1;            /* NUMA_ID */
	case 134: return -1;            /* HOST_NUMA_ID */
	case 139: return 0x233010de;    /* GPU_PCI_DEVICE_ID: device 0x2330, vendor 0x10de */
	case 140: return 0x16c110de;    /* GPU_PCI_SUBSYSTEM_ID */
	default: return 0;
	}
}

CU_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult rc = device_check(pi, dev);

	if (rc != CUDA_SUCCESS)
		return rc;
	if ((int)attrib <= 0 || (int)attrib >= (int)CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attribute((int)attrib, dev);
	return CUDA_SUCCESS;
}
