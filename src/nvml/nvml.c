// SPDX-License-Identifier: MIT
/*
 * libnvidia-ml.so.1 for containers that reach the GPU through openmps alone
 * (a CDI device or the device plugin's allocation: no NVIDIA driver files,
 * no /dev/nvidia*): NVML's answers for the devices the process sees through
 * openmps, asked of openmps's libcuda.so.1 (which the same LD_LIBRARY_PATH
 * loads). Programs ask NVML for the device count, names, UUIDs and memory
 * (pynvml in vLLM's memory profiling, PyTorch's NVML-based device count,
 * monitoring agents); here they get the slice the container was given:
 * its UUID, its memory limit as the total and the process's own view of
 * what is free (cuMemGetInfo, as the server accounts it). Utilisation is
 * the share of time the device's (or slice's) clients' kernels ran, from
 * the servers' GPU time (utilisation()). What openmps cannot answer
 * truthfully (temperatures, power, clocks) is NVML_ERROR_NOT_SUPPORTED,
 * never a made-up figure. The kernel driver's
 * version, which the kernel tells every namespace, is read where it is;
 * the running processes are the daemon's list of the caller's own PID
 * namespace's clients (procs.c).
 *
 * It lives in its own directory (lib/nvml), put on LD_LIBRARY_PATH only by
 * openmps's CDI spec and device plugin: on a host with NVIDIA's driver the
 * real NVML stays the one programs load.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "nvml/procs.h"

#define EXPORT __attribute__((visibility("default")))

/* NVML's return codes (nvmlReturn_t) used here. */
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_UNKNOWN = 999,
};
typedef int nvmlReturn_t;

#define MAX_DEVICES 64
#define UUID_LEN    41   /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx and its NUL */
#define NAME_LEN    96

struct nvmlDevice_st {
	unsigned int index;
	CUdevice dev;
	char uuid[UUID_LEN];
	char name[NAME_LEN];
	int pci_domain, pci_bus, pci_device, cc_major, cc_minor;
	/* Utilisation: the clients' GPU seconds at the last reading (under lock). */
	uint64_t util_at_ns;
	double util_gpu_s;
	unsigned int util_pct;
};

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* The driver API entry points used, from openmps's libcuda.so.1. */
static struct {
	CUresult (*init)(unsigned int);
	CUresult (*driver_version)(int *);
	CUresult (*count)(int *);
	CUresult (*get)(CUdevice *, int);
	CUresult (*name)(char *, int, CUdevice);
	CUresult (*uuid)(CUuuid *, CUdevice);
	CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*release)(CUdevice);
	CUresult (*push)(CUcontext);
	CUresult (*pop)(CUcontext *);
	CUresult (*mem)(size_t *, size_t *);
} cu;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int inits;              /* nvmlInit minus nvmlShutdown */
static struct nvmlDevice_st devs[MAX_DEVICES];
static unsigned int ndevs;

static int resolve(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);

	if (!h)
		return -1;
	cu.init = (CUresult (*)(unsigned int))dlsym(h, "cuInit");
	cu.driver_version = (CUresult (*)(int *))dlsym(h, "cuDriverGetVersion");
	cu.count = (CUresult (*)(int *))dlsym(h, "cuDeviceGetCount");
	cu.get = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
	cu.name = (CUresult (*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetName");
	cu.uuid = (CUresult (*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid_v2");
	cu.attr = (CUresult (*)(int *, CUdevice_attribute, CUdevice))dlsym(h, "cuDeviceGetAttribute");
	cu.retain = (CUresult (*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
	cu.release = (CUresult (*)(CUdevice))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
	cu.push = (CUresult (*)(CUcontext))dlsym(h, "cuCtxPushCurrent_v2");
	cu.pop = (CUresult (*)(CUcontext *))dlsym(h, "cuCtxPopCurrent_v2");
	cu.mem = (CUresult (*)(size_t *, size_t *))dlsym(h, "cuMemGetInfo_v2");
	/* The handle stays open: the process keeps using the library. */
	return cu.init && cu.driver_version && cu.count && cu.get && cu.name && cu.uuid && cu.attr && cu.retain &&
	       cu.release && cu.push && cu.pop && cu.mem ? 0 : -1;
}

static void uuid_text(char *out, const CUuuid *u)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(out, UUID_LEN, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static nvmlReturn_t discover(void)
{
	int n = 0;

	if (resolve() < 0)
		return NVML_ERROR_LIBRARY_NOT_FOUND;
	if (cu.init(0) != CUDA_SUCCESS || cu.count(&n) != CUDA_SUCCESS)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	ndevs = 0;
	for (int i = 0; i < n && ndevs < MAX_DEVICES; i++) {
		struct nvmlDevice_st *d = &devs[ndevs];
		CUuuid u;

		memset(d, 0, sizeof(*d));
		if (cu.get(&d->dev, i) != CUDA_SUCCESS || cu.name(d->name, NAME_LEN, d->dev) != CUDA_SUCCESS ||
		    cu.uuid(&u, d->dev) != CUDA_SUCCESS)
			return NVML_ERROR_UNKNOWN;
		uuid_text(d->uuid, &u);
		cu.attr(&d->pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d->dev);
		cu.attr(&d->pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d->dev);
		cu.attr(&d->pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d->dev);
		cu.attr(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
		cu.attr(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
		d->index = ndevs++;
	}
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	nvmlReturn_t r = NVML_SUCCESS;

	(void)flags;
	pthread_mutex_lock(&lock);
	if (inits == 0)
		r = discover();
	if (r == NVML_SUCCESS)
		inits++;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	return nvmlInitWithFlags(0);
}

EXPORT nvmlReturn_t nvmlInit(void)
{
	return nvmlInitWithFlags(0);
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	nvmlReturn_t r = NVML_SUCCESS;

	pthread_mutex_lock(&lock);
	if (inits == 0)
		r = NVML_ERROR_UNINITIALIZED;
	else
		inits--;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
	case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	default: return "Unknown Error";
	}
}

static int ready(void)
{
	int ok;

	pthread_mutex_lock(&lock);
	ok = inits > 0;
	pthread_mutex_unlock(&lock);
	return ok;
}

/* A handle this library gave, or NULL. */
static struct nvmlDevice_st *device(nvmlDevice_t h)
{
	uintptr_t p = (uintptr_t)h, first = (uintptr_t)devs;

	if (p < first || p >= first + ndevs * sizeof(devs[0]) || (p - first) % sizeof(devs[0]))
		return NULL;
	return h;
}

/* What every device query checks first, in NVML's order: initialised, a
 * handle this library gave, somewhere to answer (`out`). *d is the device. */
static nvmlReturn_t take(nvmlDevice_t h, const void *out, struct nvmlDevice_st **d)
{
	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	*d = device(h);
	return *d && out ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t copy_text(char *out, unsigned int len, const char *text)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(text) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(out, text, strlen(text) + 1);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!v)
		return NVML_ERROR_INVALID_ARGUMENT;
	return cu.driver_version(v) == CUDA_SUCCESS ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
	return nvmlSystemGetCudaDriverVersion(v);
}

/* The kernel driver's version ("580.159.04") into out, or -1. The kernel
 * says it to every namespace: sysfs's module version, else the first
 * version-like word after "Module" in /proc/driver/nvidia/version (both
 * the proprietary and the open module's wording). OPENMPS_NVML_ROOT, when
 * set, is where /sys and /proc are read from (tests). */
static int kernel_driver_version(char *out, size_t len)
{
	const char *root = getenv("OPENMPS_NVML_ROOT");
	char path[512], line[512];
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "%s/sys/module/nvidia/version", root ? root : "");
	f = fopen(path, "re");
	if (f) {
		if (len >= 64 && fgets(line, sizeof(line), f) && sscanf(line, "%63[0-9.]", out) == 1 &&
		    strchr(out, '.'))
			r = 0;
		fclose(f);
		if (r == 0)
			return 0;
	}
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/version", root ? root : "");
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f)) {
		char *save = NULL, *m = strstr(line, "Module");

		for (char *t = m ? strtok_r(m, " \t\n", &save) : NULL; t && r < 0; t = strtok_r(NULL, " \t\n", &save))
			if (t[0] >= '0' && t[0] <= '9' && strchr(t, '.') && strspn(t, "0123456789.") == strlen(t) &&
			    strlen(t) < len)
				r = snprintf(out, len, "%s", t) > 0 ? 0 : -1;
	}
	fclose(f);
	return r;
}

/* The kernel driver's version, as the kernel tells every namespace; a
 * container that cannot read it gets NOT_SUPPORTED, not a made-up one. */
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned int len)
{
	char v[64];

	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (kernel_driver_version(v, sizeof(v)) < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	return copy_text(out, len, v);
}

/* NVML's version is the CUDA major version and the driver's: "13.580.159.04". */
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *out, unsigned int len)
{
	char v[64], text[96];
	int cuda = 0;

	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (kernel_driver_version(v, sizeof(v)) < 0 || cu.driver_version(&cuda) != CUDA_SUCCESS || cuda <= 0)
		return NVML_ERROR_NOT_SUPPORTED;
	snprintf(text, sizeof(text), "%d.%s", cuda / 1000, v);
	return copy_text(out, len, text);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!n)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = ndevs;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *n)
{
	return nvmlDeviceGetCount_v2(n);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h)
{
	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!h || i >= ndevs)
		return NVML_ERROR_INVALID_ARGUMENT;
	*h = &devs[i];
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *h)
{
	return nvmlDeviceGetHandleByIndex_v2(i, h);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *h)
{
	if (!ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!uuid || !h)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned int i = 0; i < ndevs; i++) {
		if (!strcasecmp(devs[i].uuid, uuid)) {
			*h = &devs[i];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int *i)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, i, &d);

	if (r == NVML_SUCCESS)
		*i = d->index;
	return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *out, unsigned int len)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, out, &d);

	return r == NVML_SUCCESS ? copy_text(out, len, d->name) : r;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *out, unsigned int len)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, out, &d);

	return r == NVML_SUCCESS ? copy_text(out, len, d->uuid) : r;
}

/* What the process sees of the device's memory: the server's account of
 * it (a limit or a virtual device's memory as the total). */
static nvmlReturn_t memory(struct nvmlDevice_st *d, unsigned long long *total, unsigned long long *free_b,
			   unsigned long long *used)
{
	CUcontext ctx, prev;
	size_t f = 0, t = 0;
	CUresult r;

	if (cu.retain(&ctx, d->dev) != CUDA_SUCCESS)
		return NVML_ERROR_UNKNOWN;
	r = cu.push(ctx);
	if (r == CUDA_SUCCESS) {
		r = cu.mem(&f, &t);
		cu.pop(&prev);
	}
	cu.release(d->dev);
	if (r != CUDA_SUCCESS)
		return NVML_ERROR_UNKNOWN;
	*total = t;
	*free_b = f;
	*used = t - f;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, m, &d);

	return r == NVML_SUCCESS ? memory(d, &m->total, &m->free, &m->used) : r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, m, &d);

	if (r != NVML_SUCCESS)
		return r;
	if (m->version != NVML_MEMORY_V2)
		return NVML_ERROR_INVALID_ARGUMENT;   /* NVML's answer to a version it does not know */
	m->reserved = 0;
	return memory(d, &m->total, &m->free, &m->used);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *p)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, p, &d);

	if (r != NVML_SUCCESS)
		return r;
	memset(p, 0, sizeof(*p));
	p->domain = (unsigned int)d->pci_domain;
	p->bus = (unsigned int)d->pci_bus;
	p->device = (unsigned int)d->pci_device;
	snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04x:%02x:%02x.0", p->domain, p->bus, p->device);
	snprintf(p->busId, sizeof(p->busId), "%08x:%02x:%02x.0", p->domain, p->bus, p->device);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t *p)
{
	return nvmlDeviceGetPciInfo_v3(h, p);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *major, int *minor)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, minor, &d);

	if (r != NVML_SUCCESS)
		return r;
	if (!major)
		return NVML_ERROR_INVALID_ARGUMENT;
	*major = d->cc_major;
	*minor = d->cc_minor;
	return NVML_SUCCESS;
}

/* NVML's process records: v1 (nvmlDeviceGetComputeRunningProcesses), and
 * v2, which _v2 and _v3 take. Outside MIG the instance IDs are all ones. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

#define MAX_PROCS 1024

static struct mps_nvml_proc found[MAX_PROCS];   /* the daemon's last list (under lock) */

/* The processes on device h as the daemon lists them to this process (its
 * own PID namespace's: a pod's own), as v1 or v2 records. */
static nvmlReturn_t processes(nvmlDevice_t h, unsigned int *count, void *infos, int version)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, count, &d);
	int n;

	if (r != NVML_SUCCESS)
		return r;
	if (*count && !infos)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&lock);
	n = mps_nvml_procs(d->uuid, found, MAX_PROCS);
	if (n < 0) {
		r = NVML_ERROR_NOT_SUPPORTED;   /* no daemon to ask */
	} else if ((unsigned int)n > *count) {
		*count = (unsigned int)n;
		r = NVML_ERROR_INSUFFICIENT_SIZE;
	} else {
		for (int i = 0; i < n && i < MAX_PROCS; i++) {
			if (version == 1)
				((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){ found[i].pid, found[i].bytes };
			else
				((nvmlProcessInfo_v2_t *)infos)[i] =
					(nvmlProcessInfo_v2_t){ found[i].pid, found[i].bytes, 0xffffffffu, 0xffffffffu };
		}
		*count = (unsigned int)n;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned int *count, void *infos)
{
	return processes(h, count, infos, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned int *count, void *infos)
{
	return processes(h, count, infos, 2);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *count, void *infos)
{
	return processes(h, count, infos, 2);
}

/* openmps serves compute work only: no graphics processes. */
static nvmlReturn_t no_processes(nvmlDevice_t h, unsigned int *count)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, count, &d);

	if (r == NVML_SUCCESS)
		*count = 0;
	return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t h, unsigned int *count, void *infos)
{
	(void)infos;
	return no_processes(h, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t h, unsigned int *count, void *infos)
{
	(void)infos;
	return no_processes(h, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned int *count, void *infos)
{
	(void)infos;
	return no_processes(h, count);
}

#define UTIL_MIN_NS   (100ull * 1000 * 1000)        /* the shortest period a reading covers */
#define UTIL_STALE_NS (10ull * 1000 * 1000 * 1000)  /* a reading older than this starts over */

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The seconds the kernels of device d's clients have run (of the clients
 * the daemon lists to this process, procs.c), or -1. Under lock. */
static double gpu_seconds(const struct nvmlDevice_st *d)
{
	double s = 0;
	int n = mps_nvml_procs(d->uuid, found, MAX_PROCS);

	if (n < 0)
		return -1;
	for (int i = 0; i < n && i < MAX_PROCS; i++)
		s += found[i].gpu_s;
	return s;
}

/* NVML's "percent of time over the past sample period during which one or
 * more kernels was executing": the GPU seconds the device's clients gained
 * since the last reading (at least 100 ms ago; the first reading of a
 * process, or one after 10 s, waits 100 ms for its own), over the time
 * gone, at most 100. The servers sample one launch in 16 for GPU time
 * (OPENMPS_GPU_TIME_SAMPLE) and count a kernel when it ends; kernels of
 * clients running at once add up (hence the cap); a client that leaves
 * takes its seconds with it (the reading then falls, never below 0); a
 * client using two devices counts on both. Memory utilisation is not
 * measured: it reads 0. */
static nvmlReturn_t utilisation(struct nvmlDevice_st *d, nvmlUtilization_t *u)
{
	uint64_t t = now_ns();
	double s = gpu_seconds(d);

	if (s < 0)
		return NVML_ERROR_NOT_SUPPORTED;   /* no daemon to ask */
	if (!d->util_at_ns || t - d->util_at_ns > UTIL_STALE_NS) {
		struct timespec w = { 0, (long)UTIL_MIN_NS };

		d->util_at_ns = t;
		d->util_gpu_s = s;
		nanosleep(&w, NULL);
		t = now_ns();
		s = gpu_seconds(d);
		if (s < 0)
			return NVML_ERROR_NOT_SUPPORTED;
	}
	if (t - d->util_at_ns >= UTIL_MIN_NS) {
		double pct = (s - d->util_gpu_s) * 1e11 / (double)(t - d->util_at_ns);

		d->util_pct = pct <= 0 ? 0 : pct >= 100 ? 100 : (unsigned int)(pct + 0.5);
		d->util_at_ns = t;
		d->util_gpu_s = s;
	}
	u->gpu = d->util_pct;
	u->memory = 0;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u)
{
	struct nvmlDevice_st *d;
	nvmlReturn_t r = take(h, u, &d);

	if (r != NVML_SUCCESS)
		return r;
	pthread_mutex_lock(&lock);
	r = utilisation(d, u);
	pthread_mutex_unlock(&lock);
	return r;
}

/* Asked often by monitoring and profiling code; openmps has no truthful
 * answer for them inside a container. */
#define NOT_SUPPORTED(fn, ...)                                                       \
	EXPORT nvmlReturn_t fn(__VA_ARGS__)                                          \
	{                                                                            \
		return ready() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED; \
	}

NOT_SUPPORTED(nvmlDeviceGetTemperature, nvmlDevice_t h, int sensor, unsigned int *t)
NOT_SUPPORTED(nvmlDeviceGetPowerUsage, nvmlDevice_t h, unsigned int *mw)
NOT_SUPPORTED(nvmlDeviceGetMinorNumber, nvmlDevice_t h, unsigned int *minor)
NOT_SUPPORTED(nvmlDeviceGetClockInfo, nvmlDevice_t h, int type, unsigned int *mhz)
NOT_SUPPORTED(nvmlDeviceGetMaxClockInfo, nvmlDevice_t h, int type, unsigned int *mhz)
NOT_SUPPORTED(nvmlDeviceGetPersistenceMode, nvmlDevice_t h, int *mode)
NOT_SUPPORTED(nvmlDeviceGetComputeMode, nvmlDevice_t h, int *mode)
NOT_SUPPORTED(nvmlDeviceGetNvLinkState, nvmlDevice_t h, unsigned int link, int *active)
NOT_SUPPORTED(nvmlDeviceGetP2PStatus, nvmlDevice_t a, nvmlDevice_t b, int index, int *status)
