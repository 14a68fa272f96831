// SPDX-License-Identifier: MIT
/*
 * Test of the stand-in driver (tests/standin), through its exported API only:
 * the program dlopen()s the library by path, as openmps-server does, and
 * loads tests/kernels/kernels.cu as PTX.
 *
 *   test_standin [LIBRARY [PTX]]
 *
 * or STANDIN_LIB / STANDIN_PTX, or else the build tree next to the program.
 * It checks that the stand-in behaves like the real driver where the server
 * relies on it: stream order, real asynchrony, pageable versus registered
 * copies, events and timing, kernel arguments, module globals, memory
 * accounting, the sticky error and its reset, handle validation, and
 * concurrency of many threads. Timing checks use generous bounds, and where a
 * check is only meaningful if this thread was not descheduled for long, it
 * measures that and skips the check otherwise rather than guess.
 *
 * Exit status: 0 pass, 1 fail.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"

/* Every symbol the stand-in must export, called through these pointers. */
#define CU_FUNCS(X)                                                            \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName)  \
	X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)                  \
	X(cuDeviceGetUuid_v2) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute)   \
	X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain)                     \
	X(cuDevicePrimaryCtxRelease_v2) X(cuCtxSetCurrent) X(cuCtxGetCurrent)  \
	X(cuCtxSynchronize) X(cuCtxGetLimit) X(cuCtxSetLimit)                  \
	X(cuCtxGetStreamPriorityRange) X(cuMemAlloc_v2) X(cuMemAllocPitch_v2)  \
	X(cuMemFree_v2) X(cuMemGetInfo_v2) X(cuMemGetAddressRange_v2)          \
	X(cuMemHostRegister_v2) X(cuMemHostUnregister)                         \
	X(cuMemHostGetDevicePointer_v2) X(cuPointerGetAttribute)               \
	X(cuPointerGetAttributes) X(cuMemcpyHtoDAsync_v2)                      \
	X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyAsync)       \
	X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async)             \
	X(cuModuleLoadData) X(cuModuleLoadDataEx) X(cuModuleUnload)            \
	X(cuModuleGetFunction) X(cuModuleGetGlobal_v2) X(cuLibraryLoadData)    \
	X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuLibraryGetGlobal)         \
	X(cuKernelGetFunction) X(cuKernelGetAttribute) X(cuKernelSetAttribute) \
	X(cuKernelGetParamInfo) X(cuFuncGetAttribute) X(cuFuncSetAttribute)    \
	X(cuFuncSetCacheConfig) X(cuFuncGetParamInfo) X(cuLaunchKernel)        \
	X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel)                       \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                         \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)                \
	X(cuOccupancyAvailableDynamicSMemPerBlock)                             \
	X(cuOccupancyMaxActiveClusters) X(cuStreamCreate)                      \
	X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2)                    \
	X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent)           \
	X(cuEventCreate) X(cuEventRecord) X(cuEventRecordWithFlags)            \
	X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime_v2)         \
	X(cuEventDestroy_v2)

#define DECLARE(name) static __typeof__(&name) p_##name;
CU_FUNCS(DECLARE)

/* The group of checks running, for the line main() prints after it. */
static const char *group = "";

/* Names a result code in a failed CHECK_CU's message (check_name_codes). */
static const char *err_name(int rc)
{
	const char *s = NULL;

	if (p_cuGetErrorName((CUresult)rc, &s) != CUDA_SUCCESS || !s)
		return "(unknown code)";
	return s;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The spin kernels sleep cycles / 2000 microseconds. */
static long long cycles_for_ms(long long ms)
{
	return ms * 2000 * 1000;
}

/* ---- fixtures ------------------------------------------------------------ */

static char *ptx;                       /* kernels.cu as PTX */
static CUcontext ctx0, ctx1;
static CUmodule mod;
static CUfunction f_vadd, f_saxpy, f_iota, f_affine, f_spin, f_spin_store, f_mixed, f_reduce,
		  f_bump, f_store, f_empty;

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

static CUresult launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void **args)
{
	return p_cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL);
}

static CUresult launch_spin(CUstream s, long long ms, CUdeviceptr out)
{
	long long cycles = cycles_for_ms(ms);
	void *args[] = { &cycles, &out };

	return launch(f_spin, 1, 32, s, args);
}

static CUresult launch_spin_store(CUstream s, long long ms, CUdeviceptr flag, unsigned value)
{
	long long cycles = cycles_for_ms(ms);
	void *args[] = { &cycles, &flag, &value };

	return launch(f_spin_store, 1, 1, s, args);
}

static CUresult launch_iota(CUstream s, CUdeviceptr p, unsigned base, int n)
{
	void *args[] = { &p, &base, &n };

	return launch(f_iota, (unsigned)(n + 255) / 256, 256, s, args);
}

static CUresult launch_affine(CUstream s, CUdeviceptr p, unsigned mul, unsigned add, int n)
{
	void *args[] = { &p, &mul, &add, &n };

	return launch(f_affine, (unsigned)(n + 127) / 128, 128, s, args);
}

static CUresult get_function(CUmodule m, CUfunction *f, const char *name)
{
	return p_cuModuleGetFunction(f, m, name);
}

/* ---- groups -------------------------------------------------------------- */

static void test_before_init(void)
{
	int v = 0, n;
	CUdeviceptr d;
	CUcontext c;
	const char *s;

	group = "before cuInit";
	CHECK_CU(p_cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(p_cuMemAlloc_v2(&d, 16), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(p_cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(p_cuStreamQuery(NULL), CUDA_ERROR_NOT_INITIALIZED);
	/* These work before cuInit, as with the real driver. */
	CHECK_CU(p_cuDriverGetVersion(&v), CUDA_SUCCESS);
	CHECK(v == 13000, "driver version %d", v);
	CHECK_CU(p_cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
	CHECK(!strcmp(s, "CUDA_ERROR_INVALID_VALUE"), "name %s", s);
}

/*
 * cuInit reads OPENMPS_STANDIN_DEVICES and OPENMPS_STANDIN_MEMORY. Each case
 * runs in a child forked before this process calls cuInit, so that it gets a
 * stand-in that has not been initialized yet.
 */
static int config_child(const char *devices, const char *memory, CUresult want_init, int want_count,
			size_t want_mem)
{
	int count = -1;
	size_t mem = 0;
	CUresult rc;

	setenv("OPENMPS_STANDIN_DEVICES", devices, 1);
	setenv("OPENMPS_STANDIN_MEMORY", memory, 1);
	rc = p_cuInit(0);
	if (rc != want_init)
		return 1;
	if (rc != CUDA_SUCCESS)
		return p_cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1;
	if (p_cuDeviceGetCount(&count) || count != want_count)
		return 1;
	if (p_cuDeviceTotalMem_v2(&mem, count - 1) || mem != want_mem)
		return 1;
	return 0;
}

static void test_configuration(void)
{
	static const struct {
		const char *devices, *memory;
		CUresult init;
		int count;
		size_t mem;
	} cases[] = {
		{ "3", "1G", CUDA_SUCCESS, 3, (size_t)1 << 30 },
		{ "", "", CUDA_SUCCESS, 1, (size_t)1 << 30 },           /* the defaults */
		{ "8", "640K", CUDA_SUCCESS, 8, 640 << 10 },
		{ "1", "12345", CUDA_SUCCESS, 1, 12345 },
		{ "0", "1G", CUDA_ERROR_NO_DEVICE, 0, 0 },
		{ "9", "1G", CUDA_ERROR_INVALID_VALUE, 0, 0 },
		{ "two", "1G", CUDA_ERROR_INVALID_VALUE, 0, 0 },
		{ "1", "lots", CUDA_ERROR_INVALID_VALUE, 0, 0 },
	};

	group = "configuration";
	fflush(NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status = -1;
		pid_t pid = fork();

		if (pid == 0)
			_exit(config_child(cases[i].devices, cases[i].memory, cases[i].init, cases[i].count,
					   cases[i].mem));
		CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0,
		      "DEVICES='%s' MEMORY='%s' not handled as expected", cases[i].devices, cases[i].memory);
	}
}

/*
 * CUDA_VISIBLE_DEVICES among 3 stand-in devices, each case in a child forked
 * before cuInit: which physical devices the ordinals are (their names say),
 * in order. A first child writes the devices' UUIDs for the UUID cases.
 */
static int visible_child(const char *visible, const char *want)
{
	char got[64] = "", name[64];
	int n = 0;
	CUresult rc;

	setenv("OPENMPS_STANDIN_DEVICES", "3", 1);
	setenv("OPENMPS_STANDIN_MEMORY", "1G", 1);
	setenv("CUDA_VISIBLE_DEVICES", visible, 1);
	rc = p_cuInit(0);
	if (rc == CUDA_ERROR_NO_DEVICE)
		return strcmp(want, "none") != 0;
	if (rc != CUDA_SUCCESS || p_cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return 1;
	for (int i = 0; i < n; i++) {
		if (p_cuDeviceGetName(name, sizeof(name), i) != CUDA_SUCCESS)
			return 1;
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "",
			 name + strlen("openmps stand-in device "));
	}
	if (strcmp(got, want))
		fprintf(stderr, "CUDA_VISIBLE_DEVICES='%s': devices %s, expected %s\n", visible, got, want);
	return strcmp(got, want) != 0;
}

/* Runs visible_child in a child: true if it saw what was wanted. */
static bool visible_case(const char *visible, const char *want)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0)
		_exit(visible_child(visible, want));
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_visible(void)
{
	static const char *const fixed[][2] = {
		{ "0,1,2", "0,1,2" }, { "2,0", "2,0" }, { "1", "1" }, { " 2 , 1 ", "2,1" },
		{ "1,7,0", "1" },      /* ends at the entry that names no device */
		{ "0,0,1", "0" },      /* or at one named already */
		{ "", "none" }, { "7", "none" }, { "x,1", "none" }, { "MIG-1", "none" }, { "GPU-", "none" },
	};
	char uuid[3][48], v[64];
	int fd[2], status = -1, starts = 0;
	FILE *f;
	pid_t pid;

	group = "visible devices";
	fflush(NULL);
	memset(uuid, 0, sizeof(uuid));
	if (!CHECK(pipe(fd) == 0, "pipe"))
		return;
	pid = fork();
	if (pid == 0) {
		CUuuid u;
		int n = 0;

		close(fd[0]);
		setenv("OPENMPS_STANDIN_DEVICES", "3", 1);
		unsetenv("CUDA_VISIBLE_DEVICES");
		if (p_cuInit(0) || p_cuDeviceGetCount(&n) || n != 3)
			_exit(1);
		for (int d = 0; d < 3; d++) {
			const unsigned char *b = (const unsigned char *)u.bytes;

			if (p_cuDeviceGetUuid_v2(&u, d))
				_exit(1);
			dprintf(fd[1], "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0],
				b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
				b[15]);
		}
		_exit(0);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	for (int d = 0; f && d < 3; d++)
		if (!fgets(uuid[d], sizeof(uuid[d]), f))
			break;
	if (f)
		fclose(f);
	else
		close(fd[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the devices' UUIDs");
	for (int d = 0; d < 3; d++)
		uuid[d][strcspn(uuid[d], "\n")] = 0;
	if (!CHECK(!strncmp(uuid[2], "GPU-", 4) && strlen(uuid[2]) == 40, "UUID '%s'", uuid[2]))
		return;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		CHECK(visible_case(fixed[i][0], fixed[i][1]), "CUDA_VISIBLE_DEVICES='%s' is not devices %s",
		      fixed[i][0], fixed[i][1]);
	CHECK(visible_case(uuid[2], "2"), "a whole UUID: %s", uuid[2]);
	snprintf(v, sizeof(v), "%.12s", uuid[1]);
	CHECK(visible_case(v, "1"), "a UUID's prefix: %s", v);
	snprintf(v, sizeof(v), "%s,0", uuid[2]);
	CHECK(visible_case(v, "2,0"), "a UUID, then an ordinal: %s", v);
	/* "GPU-" and one hex digit names a device only where one UUID alone
	 * starts so. */
	for (int d = 0; d < 3; d++)
		starts += uuid[d][4] == uuid[0][4];
	snprintf(v, sizeof(v), "GPU-%c", uuid[0][4]);
	CHECK(visible_case(v, starts == 1 ? "0" : "none"), "a prefix of %d UUIDs: %s", starts, v);
}

static void test_devices(void)
{
	int n = 0, v;
	char name[64], bus[32], want[32];
	CUuuid u0, u1;
	size_t mem;
	CUdevice d;
	const char *s = "x";

	group = "devices";
	/* The configuration the rest of the test runs with. */
	setenv("OPENMPS_STANDIN_DEVICES", "2", 1);
	setenv("OPENMPS_STANDIN_MEMORY", "256M", 1);
	CHECK_CU(p_cuInit(1), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuInit(0), CUDA_SUCCESS);
	CHECK_CU(p_cuInit(0), CUDA_SUCCESS);
	CHECK_CU(p_cuDeviceGetCount(&n), CUDA_SUCCESS);
	CHECK(n == 2, "%d devices", n);
	CHECK_CU(p_cuDeviceGet(&d, 1), CUDA_SUCCESS);
	CHECK(d == 1, "device %d", d);
	CHECK_CU(p_cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(p_cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuDeviceGetName(name, sizeof(name), 1), CUDA_SUCCESS);
	CHECK(!strcmp(name, "openmps stand-in device 1"), "name '%s'", name);
	CHECK_CU(p_cuDeviceGetUuid_v2(&u0, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuDeviceGetUuid_v2(&u1, 1), CUDA_SUCCESS);
	CHECK(memcmp(&u0, &u1, sizeof(u0)) != 0, "UUIDs are equal");
	CHECK_CU(p_cuDeviceGetUuid_v2(&u1, 0), CUDA_SUCCESS);
	CHECK(memcmp(&u0, &u1, sizeof(u0)) == 0, "UUID not deterministic");
	CHECK_CU(p_cuDeviceTotalMem_v2(&mem, 1), CUDA_SUCCESS);
	CHECK(mem == (size_t)256 << 20, "total memory %zu", mem);

	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++)
		CHECK_CU(p_cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5), CUDA_ERROR_INVALID_DEVICE);
	static const struct { CUdevice_attribute a; int v; } expect[] = {
		{ CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
		{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
		{ CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
		{ CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
		{ CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1 },
		{ CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
		{ CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0 },
	};
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		v = -1;
		CHECK_CU(p_cuDeviceGetAttribute(&v, expect[i].a, 0), CUDA_SUCCESS);
		CHECK(v == expect[i].v, "attribute %d is %d, expected %d", expect[i].a, v, expect[i].v);
	}
	for (int dev = 0; dev < 2; dev++) {
		int domain, busno, devno;

		CHECK_CU(p_cuDeviceGetPCIBusId(bus, sizeof(bus), dev), CUDA_SUCCESS);
		CHECK_CU(p_cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev), CUDA_SUCCESS);
		CHECK_CU(p_cuDeviceGetAttribute(&busno, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev), CUDA_SUCCESS);
		CHECK_CU(p_cuDeviceGetAttribute(&devno, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev), CUDA_SUCCESS);
		snprintf(want, sizeof(want), "%04x:%02x:%02x.0", domain, busno, devno);
		CHECK(!strcmp(bus, want), "bus id %s, attributes say %s", bus, want);
	}
	CHECK_CU(p_cuDeviceGetPCIBusId(want, sizeof(want), 1), CUDA_SUCCESS);
	CHECK(strcmp(bus, want) == 0 && strcmp(want, "0000:02:00.0") == 0, "bus id of device 1: %s", want);

	/* Error names and strings. */
	CHECK_CU(p_cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s), CUDA_SUCCESS);
	CHECK(!strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS"), "name %s", s);
	CHECK_CU(p_cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
	CHECK(s && *s, "empty string");
	CHECK_CU(p_cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL, "name of an unknown code is not NULL");
	s = "x";
	CHECK_CU(p_cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL, "string of an unknown code is not NULL");
	n = 0;
	for (int code = 0; code < 1000; code++) {
		const char *nm = NULL, *str = NULL;

		if (p_cuGetErrorName((CUresult)code, &nm) != CUDA_SUCCESS)
			continue;
		n++;
		CHECK(nm && !strncmp(nm, "CUDA_", 5), "name of %d", code);
		CHECK(p_cuGetErrorString((CUresult)code, &str) == CUDA_SUCCESS && str && *str,
		      "string of %d", code);
	}
	CHECK(n >= 90, "only %d error codes are named", n);
}

static void test_contexts(void)
{
	CUcontext c = (CUcontext)1, again;
	CUdeviceptr d;
	int least = 1, greatest = 1;
	size_t v = 0;

	group = "contexts";
	CHECK_CU(p_cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxGetCurrent(&c), CUDA_SUCCESS);
	CHECK(c == NULL, "a context is current before any was set");
	CHECK_CU(p_cuMemAlloc_v2(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(p_cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(p_cuCtxSetCurrent((CUcontext)0x1234), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(&c, 7), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(&ctx0, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
	CHECK(again == ctx0 && ctx0 != ctx1, "primary contexts %p %p %p", (void *)ctx0, (void *)again,
	      (void *)ctx1);
	CHECK_CU(p_cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);  /* refcount back to 1 */
	CHECK_CU(p_cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxGetCurrent(&c), CUDA_SUCCESS);
	CHECK(c == ctx0, "current context %p", (void *)c);
	CHECK_CU(p_cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
	CHECK(least == 0 && greatest == -5, "priority range [%d, %d]", greatest, least);
	CHECK_CU(p_cuCtxGetStreamPriorityRange(NULL, NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK(v > 0, "stack size %zu", v);
	CHECK_CU(p_cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
	CHECK(v == 64 << 20, "heap size %zu", v);
	CHECK_CU(p_cuCtxGetLimit(&v, (CUlimit)99), CUDA_ERROR_UNSUPPORTED_LIMIT);
	CHECK_CU(p_cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuCtxSynchronize(), CUDA_SUCCESS);
}

static void test_modules(void)
{
	CUmodule m;
	CUfunction f;
	size_t off = 99, size = 99;
	int v;
	static const unsigned char elf[] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0 };
	static const size_t vadd_off[] = { 0, 8, 16, 24 }, vadd_size[] = { 8, 8, 8, 4 };

	group = "modules";
	CHECK_CU(p_cuModuleLoadData(&m, "this is not PTX"), CUDA_ERROR_INVALID_IMAGE);
	CHECK_CU(p_cuModuleLoadData(&m, elf), CUDA_ERROR_INVALID_IMAGE);
	CHECK_CU(p_cuModuleLoadData(&m, ".version 9.0\n.target sm_90\n.visible .entry broken(.param .u32\n"),
	         CUDA_ERROR_INVALID_PTX);
	CHECK_CU(p_cuModuleLoadData(NULL, ptx), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuModuleLoadData(&mod, ptx), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	CHECK_CU(get_function(mod, &f_vadd, "vadd"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_saxpy, "saxpy"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_iota, "iota_u32"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_affine, "affine_u32"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_spin, "spin"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_spin_store, "spin_then_store"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_mixed, "mixed_arg"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_reduce, "reduce_sum"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_bump, "bump_global"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_store, "store_at"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_empty, "empty"), CUDA_SUCCESS);

	for (size_t i = 0; i < 4; i++) {
		CHECK_CU(p_cuFuncGetParamInfo(f_vadd, i, &off, &size), CUDA_SUCCESS);
		CHECK(off == vadd_off[i] && size == vadd_size[i], "vadd param %zu at %zu size %zu", i, off,
		      size);
	}
	CHECK_CU(p_cuFuncGetParamInfo(f_vadd, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuFuncGetParamInfo(f_mixed, 0, &off, &size), CUDA_SUCCESS);
	CHECK(off == 0 && size == 24, "mixed_arg param 0 at %zu size %zu", off, size);
	CHECK_CU(p_cuFuncGetParamInfo(f_mixed, 1, &off, NULL), CUDA_SUCCESS);
	CHECK(off == 24, "mixed_arg param 1 at %zu", off);
	CHECK_CU(p_cuFuncGetParamInfo(f_empty, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);

	CHECK_CU(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_vadd), CUDA_SUCCESS);
	CHECK(v == 1024, "max threads %d", v);
	CHECK_CU(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f_vadd), CUDA_SUCCESS);
	CHECK(v == 32, "registers %d", v);
	CHECK_CU(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f_empty), CUDA_SUCCESS);
	CHECK(v == 48 * 1024, "dynamic shared %d", v);
	CHECK_CU(p_cuFuncSetAttribute(f_empty, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 * 1024),
	         CUDA_SUCCESS);
	CHECK_CU(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f_empty), CUDA_SUCCESS);
	CHECK(v == 100 * 1024, "dynamic shared %d after setting it", v);
	CHECK_CU(p_cuFuncSetAttribute(f_empty, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300 * 1024),
	         CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuFuncSetAttribute(f_empty, CU_FUNC_ATTRIBUTE_NUM_REGS, 8), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuFuncSetCacheConfig(f_vadd, CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);

	CHECK_CU(p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f_vadd, 256, 0), CUDA_SUCCESS);
	CHECK(v == 8, "occupancy of 256-thread blocks: %d", v);
	CHECK_CU(p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f_empty, 32, 100 * 1024), CUDA_SUCCESS);
	CHECK(v == 2, "occupancy with 100 KiB shared: %d", v);
}

/* A chain of affine maps on one stream: any reordering changes the result. */
static void test_stream_order(void)
{
	enum { N = 4096, STEPS = 24 };
	static uint32_t host[N];
	CUstream s;
	CUdeviceptr d;

	group = "stream order";
	CHECK_CU(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&d, N * sizeof(uint32_t)), CUDA_SUCCESS);
	CHECK_CU(launch_iota(s, d, 7, N), CUDA_SUCCESS);
	for (unsigned k = 0; k < STEPS; k++)
		CHECK_CU(launch_affine(s, d, 3 + 2 * k, 11 * k + 1, N), CUDA_SUCCESS);
	memset(host, 0, sizeof(host));
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(host, d, sizeof(host), s), CUDA_SUCCESS);   /* pageable: returns when done */
	for (unsigned i = 0; i < N; i++) {
		uint32_t want = 7 + i;

		for (unsigned k = 0; k < STEPS; k++)
			want = want * (3 + 2 * k) + 11 * k + 1;
		if (host[i] != want) {
			CHECK(0, "element %u is %u, expected %u", i, host[i], want);
			break;
		}
	}
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_asynchrony(void)
{
	CUstream s;
	CUdeviceptr out;
	int32_t sm[4] = { -1, -1, -1, -1 };
	double t0, t;

	group = "asynchrony";
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&out, sizeof(sm)), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamQuery(s), CUDA_SUCCESS);
	t0 = now_ms();
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	t = now_ms() - t0;
	CHECK(t >= 190, "a 200 ms kernel completed after %.0f ms", t);
	CHECK_CU(p_cuStreamQuery(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(sm, out, sizeof(int32_t), s), CUDA_SUCCESS);
	CHECK(sm[0] == 0, "spin wrote SM %d for block 0", sm[0]);

	/* Several blocks: block b reports SM b % 16. */
	long long cycles = 0;
	void *args[] = { &cycles, &out };

	CHECK_CU(launch(f_spin, 4, 64, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(sm, out, sizeof(sm), s), CUDA_SUCCESS);
	CHECK(sm[0] == 0 && sm[1] == 1 && sm[3] == 3, "SMs %d %d %d %d", sm[0], sm[1], sm[2], sm[3]);
	CHECK_CU(p_cuMemFree_v2(out), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* A producer on stream A, an event, and a consumer on stream B. */
static void test_cross_stream(void)
{
	CUstream a, b, c;
	CUevent ev;
	CUdeviceptr flag, copy;
	uint32_t got = 0;

	group = "cross-stream wait";
	CHECK_CU(p_cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamCreate(&c, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&flag, 4), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&copy, 4), CUDA_SUCCESS);
	CHECK_CU(p_cuMemsetD32Async(flag, 0, 1, a), CUDA_SUCCESS);
	CHECK_CU(p_cuMemsetD32Async(copy, 0, 1, b), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(a), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(b), CUDA_SUCCESS);

	CHECK_CU(launch_spin_store(a, 150, flag, 0xc0ffee), CUDA_SUCCESS);
	CHECK_CU(p_cuEventRecord(ev, a), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamWaitEvent(b, ev, 0), CUDA_SUCCESS);
	/* Re-recording the event on an idle stream must not release B: it
	 * waits for the record captured when it was told to wait. */
	CHECK_CU(p_cuEventRecord(ev, c), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoDAsync_v2(copy, flag, 4, b), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&got, copy, 4, b), CUDA_SUCCESS);
	CHECK(got == 0xc0ffee, "stream B copied %#x, expected the producer's 0xc0ffee", got);
	CHECK_CU(p_cuEventSynchronize(ev), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxSynchronize(), CUDA_SUCCESS);

	/* An event never recorded is complete; a wait on it waits for nothing. */
	CUevent fresh;

	CHECK_CU(p_cuEventCreate(&fresh, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventQuery(fresh), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamWaitEvent(b, fresh, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventSynchronize(fresh), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamWaitEvent(b, fresh, 7), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuEventDestroy_v2(fresh), CUDA_SUCCESS);

	CHECK_CU(p_cuMemFree_v2(flag), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(copy), CUDA_SUCCESS);
	CHECK_CU(p_cuEventDestroy_v2(ev), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(a), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(b), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(c), CUDA_SUCCESS);
}

static void test_legacy_stream(CUstream nb, CUdeviceptr d, CUdeviceptr out, uint32_t *back, size_t n);

static void fill(uint32_t *p, size_t n, uint32_t v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = v + (uint32_t)i;
}

static bool all(const uint32_t *p, size_t n, uint32_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v + (uint32_t)i)
			return false;
	return true;
}

/*
 * Pageable versus registered host memory. The 200 ms spin ahead of each copy
 * holds the copy back; checks that depend on this thread getting past the
 * enqueue within 100 ms of the spin's launch are skipped if it did not.
 */
static void test_copy_semantics(void)
{
	enum { N = 1024 };
	static uint32_t pageable[N], pinned[N], back[N];
	CUstream s;
	CUdeviceptr d, out;
	double t0;

	group = "copy semantics";
	CHECK_CU(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&d, sizeof(pageable)), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&out, 64), CUDA_SUCCESS);
	CHECK_CU(p_cuMemHostRegister_v2(pinned, sizeof(pinned), 0), CUDA_SUCCESS);

	/* H2D from pageable memory: the source is taken at the call. */
	fill(pageable, N, 100);
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(d, pageable, sizeof(pageable), s), CUDA_SUCCESS);
	fill(pageable, N, 900);
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, sizeof(back), s), CUDA_SUCCESS);
	CHECK(all(back, N, 100), "H2D from pageable memory saw the later contents (%u)", back[0]);

	/* H2D from registered memory: read when the stream gets there. */
	fill(pinned, N, 200);
	t0 = now_ms();
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(d, pinned, sizeof(pinned), s), CUDA_SUCCESS);
	fill(pinned, N, 300);
	if (now_ms() - t0 < 100) {
		CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
		CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, sizeof(back), s), CUDA_SUCCESS);
		CHECK(all(back, N, 300), "H2D from registered memory was not deferred (%u)", back[0]);
	} else {
		fprintf(stderr, "test_standin: descheduled, registered H2D check skipped\n");
	}
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);

	/* D2H into pageable memory: returns only once the data is there. */
	CHECK_CU(launch_iota(s, d, 5000, N), CUDA_SUCCESS);
	t0 = now_ms();
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	memset(back, 0, sizeof(back));
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, sizeof(back), s), CUDA_SUCCESS);
	CHECK(all(back, N, 5000), "D2H into pageable memory returned before the copy (%u)", back[0]);
	CHECK(now_ms() - t0 >= 190, "D2H into pageable memory did not wait for the stream");

	/* D2H into registered memory: asynchronous. */
	fill(pinned, N, 1);
	t0 = now_ms();
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(pinned, d, sizeof(pinned), s), CUDA_SUCCESS);
	if (now_ms() - t0 < 100) {
		CHECK(all(pinned, N, 1), "D2H into registered memory ran at enqueue");
		CHECK_CU(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	}
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(all(pinned, N, 5000), "D2H into registered memory never landed (%u)", pinned[0]);

	/* cuMemcpyAsync works the direction out; memsets of each width. */
	fill(pageable, N, 42);
	CHECK_CU(p_cuMemcpyAsync(d, (CUdeviceptr)pageable, sizeof(pageable), s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyAsync((CUdeviceptr)pinned, d, sizeof(pinned), s), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(all(pinned, N, 42), "cuMemcpyAsync H2D + D2H gave %u", pinned[0]);
	CHECK_CU(p_cuMemsetD8Async(d, 0xab, 3, s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemsetD16Async(d + 4, 0x1234, 2, s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemsetD32Async(d + 8, 0xdeadbeef, 2, s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, 16, s), CUDA_SUCCESS);
	CHECK(back[0] == 0x00ababab && back[1] == 0x12341234 && back[2] == 0xdeadbeef &&
	      back[3] == 0xdeadbeef, "memsets gave %#x %#x %#x %#x", back[0], back[1], back[2], back[3]);
	CHECK_CU(p_cuMemsetD32Async(d + 2, 0, 1, s), CUDA_ERROR_INVALID_VALUE);      /* misaligned */

	/* Spans outside every allocation are refused at enqueue. */
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(d + 8, pageable, sizeof(pageable), s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemcpyHtoDAsync_v2((CUdeviceptr)back, pageable, 16, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, (CUdeviceptr)pageable, 16, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemcpyDtoDAsync_v2(d, d + 16, sizeof(pageable), s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemsetD8Async(d, 0, sizeof(pageable) + 1, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemsetD8Async((CUdeviceptr)back, 0, 4, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(d, pageable, 0, s), CUDA_SUCCESS);

	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	test_legacy_stream(s, d, out, back, N);

	CHECK_CU(p_cuMemHostUnregister(pinned), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(out), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/*
 * The legacy stream is asynchronous; its work follows earlier work of the
 * blocking streams, and later work of blocking streams follows it. Streams
 * created CU_STREAM_NON_BLOCKING (nb) are not synchronized with it.
 */
static void test_legacy_stream(CUstream nb, CUdeviceptr d, CUdeviceptr out, uint32_t *back, size_t n)
{
	CUstream bs;
	double t0;

	CHECK_CU(p_cuStreamCreate(&bs, 0), CUDA_SUCCESS);
	t0 = now_ms();
	CHECK_CU(launch_spin(bs, 100, out), CUDA_SUCCESS);
	CHECK_CU(launch_iota(NULL, d, 77, (int)n), CUDA_SUCCESS);
	if (now_ms() - t0 < 80)
		CHECK_CU(p_cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, n * sizeof(*back), CU_STREAM_LEGACY), CUDA_SUCCESS);
	CHECK(all(back, n, 77), "legacy-stream iota gave %u", back[0]);
	CHECK_CU(p_cuStreamQuery(bs), CUDA_SUCCESS);        /* the legacy work waited for it */
	CHECK_CU(p_cuStreamQuery(NULL), CUDA_SUCCESS);

	CHECK_CU(p_cuMemsetD32Async(d, 0, 1, NULL), CUDA_SUCCESS);
	CHECK_CU(launch_spin_store(NULL, 100, d, 31337), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoDAsync_v2(d + 64, d, 4, bs), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d + 64, 4, bs), CUDA_SUCCESS);
	CHECK(back[0] == 31337, "a blocking stream did not wait for the legacy stream (%u)", back[0]);

	t0 = now_ms();
	CHECK_CU(launch_spin(nb, 300, out + 32), CUDA_SUCCESS);
	CHECK_CU(launch_iota(NULL, d, 5, (int)n), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(NULL), CUDA_SUCCESS);
	if (now_ms() - t0 < 250)
		CHECK_CU(p_cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
	CHECK_CU(p_cuStreamSynchronize(nb), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(bs), CUDA_SUCCESS);
}

static void test_events(void)
{
	CUstream s;
	CUevent start, stop, untimed, never;
	CUdeviceptr out;
	float ms = -1;

	group = "events";
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&out, 64), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&never, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&never, 0x100), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuEventCreate(&never, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);

	CHECK_CU(p_cuEventRecord(start, s), CUDA_SUCCESS);
	CHECK_CU(launch_spin(s, 50, out), CUDA_SUCCESS);
	CHECK_CU(p_cuEventRecord(stop, s), CUDA_SUCCESS);
	CHECK_CU(p_cuEventSynchronize(stop), CUDA_SUCCESS);
	CHECK_CU(p_cuEventQuery(stop), CUDA_SUCCESS);
	CHECK_CU(p_cuEventElapsedTime_v2(&ms, start, stop), CUDA_SUCCESS);
	CHECK(ms >= 40 && ms <= 1000, "a 50 ms kernel took %.3f ms", ms);

	CHECK_CU(p_cuEventRecord(untimed, s), CUDA_SUCCESS);
	CHECK_CU(p_cuEventSynchronize(untimed), CUDA_SUCCESS);
	CHECK_CU(p_cuEventElapsedTime_v2(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventElapsedTime_v2(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventElapsedTime_v2(NULL, start, stop), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuEventQuery(never), CUDA_SUCCESS);

	/* Pending: NOT_READY from query and elapsed time, until it completes. */
	CHECK_CU(launch_spin(s, 200, out), CUDA_SUCCESS);
	CHECK_CU(p_cuEventRecordWithFlags(stop, s, CU_EVENT_RECORD_DEFAULT), CUDA_SUCCESS);
	CHECK_CU(p_cuEventQuery(stop), CUDA_ERROR_NOT_READY);
	CHECK_CU(p_cuEventElapsedTime_v2(&ms, start, stop), CUDA_ERROR_NOT_READY);
	CHECK_CU(p_cuEventRecordWithFlags(stop, s, 0x80), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuEventSynchronize(stop), CUDA_SUCCESS);
	CHECK_CU(p_cuEventElapsedTime_v2(&ms, start, stop), CUDA_SUCCESS);
	CHECK(ms >= 200, "elapsed %.3f ms across a 200 ms kernel", ms);

	/* The legacy stream records too. */
	CHECK_CU(p_cuEventRecord(start, NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuEventSynchronize(start), CUDA_SUCCESS);
	CHECK_CU(p_cuEventQuery(start), CUDA_SUCCESS);

	CHECK_CU(p_cuEventDestroy_v2(start), CUDA_SUCCESS);
	CHECK_CU(p_cuEventDestroy_v2(stop), CUDA_SUCCESS);
	CHECK_CU(p_cuEventDestroy_v2(untimed), CUDA_SUCCESS);
	CHECK_CU(p_cuEventDestroy_v2(never), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(out), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

struct saxpy_args {             /* the saxpy parameters as one buffer, for `extra` */
	float a;
	uint64_t x, y;
	int n;
};

static void test_params(void)
{
	enum { N = 1000 };
	static float x[N], y[N], r1[N], r2[N];
	CUstream s;
	CUdeviceptr dx, dy;
	float a = 1.5f;
	int n = N;
	struct saxpy_args buf;
	size_t size = sizeof(buf), bad = 12;

	group = "kernel parameters";
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&dx, sizeof(x)), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&dy, sizeof(y)), CUDA_SUCCESS);
	for (int i = 0; i < N; i++) {
		x[i] = (float)i * 0.25f;
		y[i] = 1000.0f - (float)i;
	}
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(dx, x, sizeof(x), s), CUDA_SUCCESS);

	void *kp[] = { &a, &dx, &dy, &n };

	CHECK_CU(p_cuMemcpyHtoDAsync_v2(dy, y, sizeof(y), s), CUDA_SUCCESS);
	CHECK_CU(launch(f_saxpy, 4, 256, s, kp), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(r1, dy, sizeof(r1), s), CUDA_SUCCESS);

	buf = (struct saxpy_args){ .a = a, .x = dx, .y = dy, .n = n };
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };

	CHECK_CU(p_cuMemcpyHtoDAsync_v2(dy, y, sizeof(y), s), CUDA_SUCCESS);
	CHECK_CU(p_cuLaunchKernel(f_saxpy, 4, 1, 1, 256, 1, 1, 0, s, NULL, extra), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(r2, dy, sizeof(r2), s), CUDA_SUCCESS);
	CHECK(!memcmp(r1, r2, sizeof(r1)), "kernelParams and extra disagree");
	for (int i = 0; i < N; i++) {
		if (r1[i] != fmaf(a, x[i], y[i])) {
			CHECK(0, "y[%d] = %f, expected %f", i, r1[i], fmaf(a, x[i], y[i]));
			break;
		}
	}
	void *short_extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bad,
				CU_LAUNCH_PARAM_END };

	CHECK_CU(p_cuLaunchKernel(f_saxpy, 4, 1, 1, 256, 1, 1, 0, s, NULL, short_extra),
	         CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_saxpy, 4, 1, 1, 256, 1, 1, 0, s, kp, extra), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_saxpy, 4, 1, 1, 256, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

	/* Geometry and shared memory. */
	CHECK_CU(p_cuLaunchKernel(f_empty, 1, 1, 1, 1025, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_empty, 1, 1, 1, 32, 32, 2, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_empty, 0, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_vadd, 1, 1, 1, 32, 1, 1, 64 * 1024, s, kp, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuLaunchKernel(f_empty, 2, 2, 2, 8, 8, 8, 64 * 1024, s, NULL, NULL),
	         CUDA_SUCCESS); /* opted in to 100 KiB */

	/* cuLaunchKernelEx with a cluster, and cooperative launches. */
	CUlaunchAttribute attrs[2];
	CUlaunchConfig cfg = { .gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = attrs, .numAttrs = 2 };

	memset(attrs, 0, sizeof(attrs));
	attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attrs[0].value.clusterDim.x = 2;
	attrs[0].value.clusterDim.y = 1;
	attrs[0].value.clusterDim.z = 1;
	attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(dy, y, sizeof(y), s), CUDA_SUCCESS);
	CHECK_CU(p_cuLaunchKernelEx(&cfg, f_saxpy, kp, NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(r2, dy, sizeof(r2), s), CUDA_SUCCESS);
	CHECK(!memcmp(r1, r2, sizeof(r1)), "cuLaunchKernelEx computed something else");
	attrs[0].value.clusterDim.x = 3;
	CHECK_CU(p_cuLaunchKernelEx(&cfg, f_saxpy, kp, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	CHECK_CU(p_cuLaunchKernelEx(NULL, f_saxpy, kp, NULL), CUDA_ERROR_INVALID_VALUE);
	cfg.gridDimX = 16 * 8;
	cfg.numAttrs = 1;
	attrs[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	attrs[0].value.cooperative = 1;
	CHECK_CU(p_cuLaunchKernelEx(&cfg, f_empty, NULL, NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuLaunchCooperativeKernel(f_empty, 16 * 8, 1, 1, 256, 1, 1, 0, s, NULL), CUDA_SUCCESS);
	CHECK_CU(p_cuLaunchCooperativeKernel(f_empty, 16 * 8 + 1, 1, 1, 256, 1, 1, 0, s, NULL),
	         CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);

	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(dx), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(dy), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

struct mixed {                  /* as in kernels.cu */
	int a;
	double b;
	char c[5];
};

static void test_mixed_arg(void)
{
	struct mixed m = { .a = 7, .b = 1.25, .c = { 1, -2, 3, 4, 5 } };
	CUdeviceptr out;
	double got = 0;
	void *args[] = { &m, &out };

	group = "struct argument";
	CHECK_CU(p_cuMemAlloc_v2(&out, sizeof(double)), CUDA_SUCCESS);
	CHECK_CU(launch(f_mixed, 1, 32, NULL, args), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&got, out, sizeof(got), NULL), CUDA_SUCCESS);
	CHECK(got == 7 + 1.25 + 1 - 2 + 3 + 4 + 5, "mixed_arg computed %f", got);
	CHECK_CU(p_cuMemFree_v2(out), CUDA_SUCCESS);
}

static void test_globals(void)
{
	CUmodule second;
	CUfunction bump2, kf;
	CUdeviceptr g1, g2, lg, spinout;
	size_t size = 0;
	uint32_t v = 99, by = 5;
	void *args[] = { &by };
	CUlibrary lib;
	CUkernel k, k2;
	CUstream s;
	int iv;

	group = "globals and libraries";
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuModuleGetGlobal_v2(&g1, &size, mod, "g_counter"), CUDA_SUCCESS);
	CHECK(size == 4, "g_counter is %zu bytes", size);
	CHECK_CU(p_cuModuleGetGlobal_v2(&g1, &size, mod, "nothing"), CUDA_ERROR_NOT_FOUND);
	CHECK_CU(p_cuModuleGetGlobal_v2(NULL, &size, mod, "g_counter"), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, g1, 4, s), CUDA_SUCCESS);
	CHECK(v == 0, "g_counter starts at %u", v);
	CHECK_CU(launch(f_bump, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(launch(f_bump, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, g1, 4, s), CUDA_SUCCESS);
	CHECK(v == 10, "g_counter is %u after two bumps by 5", v);

	/* A second load of the same image has globals of its own. */
	CHECK_CU(p_cuModuleLoadData(&second, ptx), CUDA_SUCCESS);
	CHECK_CU(get_function(second, &bump2, "bump_global"), CUDA_SUCCESS);
	CHECK_CU(p_cuModuleGetGlobal_v2(&g2, NULL, second, "g_counter"), CUDA_SUCCESS);
	CHECK(g1 != g2, "two modules share g_counter");
	by = 3;
	CHECK_CU(launch(bump2, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, g2, 4, s), CUDA_SUCCESS);
	CHECK(v == 3, "second module's g_counter is %u", v);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, g1, 4, s), CUDA_SUCCESS);
	CHECK(v == 10, "first module's g_counter changed to %u", v);
	/* Unloading with a launch queued is safe: it still completes. */
	CHECK_CU(p_cuMemAlloc_v2(&spinout, 64), CUDA_SUCCESS);
	CHECK_CU(launch_spin(s, 50, spinout), CUDA_SUCCESS);
	CHECK_CU(launch(bump2, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuModuleUnload(second), CUDA_SUCCESS);
	CHECK_CU(p_cuModuleUnload(second), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(get_function(second, &bump2, "bump_global"), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(spinout), CUDA_SUCCESS);

	/* Libraries: kernels, their functions, and CUkernel as CUfunction. */
	CHECK_CU(p_cuLibraryLoadData(&lib, "garbage", NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_IMAGE);
	CHECK_CU(p_cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuLibraryGetKernel(&k, lib, "bump_global"), CUDA_SUCCESS);
	CHECK_CU(p_cuLibraryGetKernel(&k2, lib, "nope"), CUDA_ERROR_NOT_FOUND);
	CHECK_CU(p_cuKernelGetFunction(&kf, k), CUDA_SUCCESS);
	CHECK_CU(p_cuLibraryGetGlobal(&lg, &size, lib, "g_counter"), CUDA_SUCCESS);
	CHECK(size == 4 && lg != g1, "library global %zu bytes", size);
	by = 4;
	CHECK_CU(launch(kf, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(launch((CUfunction)k, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, lg, 4, s), CUDA_SUCCESS);
	CHECK(v == 8, "library g_counter is %u after bumps through CUfunction and CUkernel", v);
	size_t off, psz;

	CHECK_CU(p_cuKernelGetParamInfo(k, 0, &off, &psz), CUDA_SUCCESS);
	CHECK(off == 0 && psz == 4, "bump_global param 0 at %zu size %zu", off, psz);
	CHECK_CU(p_cuKernelGetParamInfo(k, 1, &off, &psz), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 80000, k, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuKernelGetAttribute(&iv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0), CUDA_SUCCESS);
	CHECK(iv == 80000, "kernel attribute %d", iv);
	CHECK_CU(p_cuFuncGetAttribute(&iv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kf), CUDA_SUCCESS);
	CHECK(iv == 80000, "the kernel's function does not see its attribute: %d", iv);
	CHECK_CU(p_cuFuncGetAttribute(&iv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUfunction)k),
	         CUDA_SUCCESS);
	CHECK(iv == 80000, "CUkernel as CUfunction: attribute %d", iv);
	CHECK_CU(p_cuKernelGetAttribute(&iv, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 9), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(p_cuLibraryUnload(lib), CUDA_SUCCESS);
	CHECK_CU(p_cuKernelGetFunction(&kf, k), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* Lines of /proc/self/maps: the process's mappings. */
static int count_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Freed device memory goes back to the system: 500 allocations of 1 MiB,
 * each freed, leave no mapping behind (and would exhaust the process's
 * mappings in long runs if they did). */
static void test_free_unmaps(void)
{
	int before, after;
	CUdeviceptr d;

	group = "free unmaps";
	before = count_mappings();
	for (int i = 0; i < 500; i++) {
		CHECK_CU(p_cuMemAlloc_v2(&d, 1 << 20), CUDA_SUCCESS);
		CHECK_CU(p_cuMemFree_v2(d), CUDA_SUCCESS);
	}
	after = count_mappings();
	CHECK(before > 0 && after - before < 10, "%d mappings before 500 alloc/free pairs, %d after",
	      before, after);
}

static void test_memory(void)
{
	size_t free0, total, free1, size = 0, pitch = 0;
	CUdeviceptr a, b, base = 0, p;
	static char host[8192];
	unsigned type = 0;
	int ordinal = -1, managed = 7, mapped = 0;
	unsigned long long id1 = 0, id2 = 0;
	CUcontext owner = NULL;
	void *hp = NULL;

	group = "memory";
	CHECK_CU(p_cuMemGetInfo_v2(&free0, &total), CUDA_SUCCESS);
	CHECK(total == (size_t)256 << 20 && free0 <= total, "free %zu of %zu", free0, total);
	CHECK_CU(p_cuMemAlloc_v2(&a, 64 << 20), CUDA_SUCCESS);
	CHECK_CU(p_cuMemGetInfo_v2(&free1, &total), CUDA_SUCCESS);
	CHECK(free0 - free1 == 64 << 20, "allocating 64 MiB took %zu bytes", free0 - free1);
	CHECK(a % 256 == 0, "allocation not 256-byte aligned");
	CHECK_CU(p_cuMemAlloc_v2(&b, 300 << 20), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_CU(p_cuMemAlloc_v2(&b, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemGetAddressRange_v2(&base, &size, a + 12345), CUDA_SUCCESS);
	CHECK(base == a && size == 64 << 20, "range of an interior pointer: %#llx + %zu",
	      (unsigned long long)base, size);
	CHECK_CU(p_cuMemGetAddressRange_v2(&base, &size, (CUdeviceptr)host), CUDA_ERROR_NOT_FOUND);
	CHECK_CU(p_cuMemFree_v2(a + 16), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemAllocPitch_v2(&b, &pitch, 1000, 10, 4), CUDA_SUCCESS);
	CHECK(pitch == 1024, "pitch %zu for 1000 bytes", pitch);
	CHECK_CU(p_cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);

	/* Pointer attributes of device memory. */
	CHECK_CU(p_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 100), CUDA_SUCCESS);
	CHECK(type == CU_MEMORYTYPE_DEVICE, "memory type %u", type);
	CHECK_CU(p_cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a), CUDA_SUCCESS);
	CHECK(owner == ctx0, "owner context");
	CHECK_CU(p_cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a), CUDA_SUCCESS);
	CHECK(ordinal == 0, "device ordinal %d", ordinal);
	CHECK_CU(p_cuPointerGetAttribute(&p, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 5), CUDA_SUCCESS);
	CHECK(p == a + 5, "device pointer");
	CHECK_CU(p_cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 5), CUDA_SUCCESS);
	CHECK_CU(p_cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 5), CUDA_SUCCESS);
	CHECK(base == a && size == 64 << 20, "range attributes");
	CHECK_CU(p_cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a), CUDA_SUCCESS);
	CHECK(managed == 0, "is managed %d", managed);
	CHECK_CU(p_cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, a), CUDA_SUCCESS);
	CHECK(mapped == 1, "mapped %d", mapped);
	CHECK_CU(p_cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a), CUDA_SUCCESS);
	CHECK_CU(p_cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, b), CUDA_SUCCESS);
	CHECK(id1 && id2 && id1 != id2, "buffer ids %llu %llu", id1, id2);
	CHECK_CU(p_cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host),
	         CUDA_ERROR_INVALID_VALUE);

	/* Host registration. */
	CHECK_CU(p_cuMemHostRegister_v2(host, 4096, CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
	CHECK_CU(p_cuMemHostRegister_v2(host + 2048, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK_CU(p_cuMemHostRegister_v2(host, 16, 0x100), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemHostRegister_v2(host + 4096, 4096, 0), CUDA_SUCCESS);        /* adjacent is fine */
	CHECK_CU(p_cuMemHostGetDevicePointer_v2(&p, host + 10, 0), CUDA_SUCCESS);
	CHECK(p == (CUdeviceptr)(host + 10), "device pointer of registered memory");
	CHECK_CU(p_cuMemHostGetDevicePointer_v2(&p, &free0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host), CUDA_SUCCESS);
	CHECK(type == CU_MEMORYTYPE_HOST, "memory type of registered memory %u", type);
	CHECK_CU(p_cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(host + 1)),
	         CUDA_SUCCESS);
	CHECK(hp == host + 1, "host pointer");

	CUpointer_attribute which[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
					CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	void *data[] = { &type, &owner, &ordinal };

	CHECK_CU(p_cuPointerGetAttributes(3, which, data, a), CUDA_SUCCESS);
	CHECK(type == CU_MEMORYTYPE_DEVICE && owner == ctx0 && ordinal == 0, "attributes of device memory");
	CHECK_CU(p_cuPointerGetAttributes(3, which, data, (CUdeviceptr)&free0), CUDA_SUCCESS);
	CHECK(type == 0 && owner == NULL, "attributes of unknown memory: type %u", type);

	CHECK_CU(p_cuMemHostUnregister(host + 8), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK_CU(p_cuMemHostUnregister(host), CUDA_SUCCESS);
	CHECK_CU(p_cuMemHostUnregister(host + 4096), CUDA_SUCCESS);
	CHECK_CU(p_cuMemHostUnregister(host), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

	CHECK_CU(p_cuMemFree_v2(a), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(b), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemGetInfo_v2(&free1, &total), CUDA_SUCCESS);
	CHECK(free1 == free0, "free memory %zu after freeing everything, %zu before", free1, free0);
}

static void test_handles(void)
{
	CUstream s, bogus_s = (CUstream)0x5eedull;
	CUevent e, bogus_e = (CUevent)0xdeadbeef0ull;
	CUfunction f, bogus_f = (CUfunction)0x12345678ull;
	CUmodule bogus_m = (CUmodule)0x1000ull;
	int v;

	group = "handle validation";
	CHECK_CU(p_cuStreamQuery(bogus_s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamSynchronize(bogus_s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamDestroy_v2(bogus_s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventQuery(bogus_e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventRecord(bogus_e, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventSynchronize(bogus_e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventDestroy_v2(bogus_e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuModuleGetFunction(&f, bogus_m, "vadd"), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuModuleUnload(bogus_m), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(launch(bogus_f, 1, 1, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, bogus_f), CUDA_ERROR_INVALID_HANDLE);
	/* A handle of one kind is not a handle of another. */
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&e, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventQuery((CUevent)s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamQuery((CUstream)e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(launch((CUfunction)s, 1, 1, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(launch_iota((CUstream)e, 0, 0, 1), CUDA_ERROR_INVALID_HANDLE);
	/* Destroyed handles. */
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_CU(p_cuEventDestroy_v2(e), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
	/* NULL outputs. */
	CHECK_CU(p_cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuStreamCreate(&s, 0x40), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuMemGetInfo_v2(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, f_vadd), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuModuleGetFunction(NULL, mod, "vadd"), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuDeviceGetName(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(p_cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0), CUDA_ERROR_INVALID_VALUE);
	/* Priorities out of range are clamped, not refused. */
	CHECK_CU(p_cuStreamCreateWithPriority(&s, 0, -100), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

/* Stream destroyed with work queued: the call returns, the work completes. */
static void test_destroy_pending(void)
{
	static uint32_t flag[16];
	CUstream s;
	double t0;

	group = "destroy with pending work";
	CHECK_CU(p_cuMemHostRegister_v2(flag, sizeof(flag), 0), CUDA_SUCCESS);
	flag[0] = 0;
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(launch_spin_store(s, 150, (CUdeviceptr)flag, 4242), CUDA_SUCCESS);
	t0 = now_ms();
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < 100, "cuStreamDestroy waited %.0f ms for the work", now_ms() - t0);
	CHECK_CU(p_cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK(flag[0] == 4242, "work queued before cuStreamDestroy did not complete (%u)", flag[0]);
	CHECK_CU(p_cuMemHostUnregister(flag), CUDA_SUCCESS);
}

/* The sticky error: a faulting kernel kills the context until it is reset. */
static void test_sticky(void)
{
	static uint32_t host[64];
	uint32_t unregistered = 0;
	CUstream s, s1;
	CUevent ev;
	CUdeviceptr d, spinout, good;
	CUcontext c;
	uint32_t v = 0, val = 77;
	CUresult rc;
	int n;

	group = "sticky error";
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuEventCreate(&ev, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&good, 4), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&spinout, 64), CUDA_SUCCESS);
	CHECK_CU(p_cuMemHostRegister_v2(host, sizeof(host), 0), CUDA_SUCCESS);
	memset(host, 0, sizeof(host));

	/* A store into an allocation works. */
	CUdeviceptr target = good;
	void *args[] = { &target, &val };

	CHECK_CU(launch(f_store, 1, 1, s, args), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(&v, good, 4, s), CUDA_SUCCESS);
	CHECK(v == 77, "store_at stored %u", v);

	/* A store to memory outside every allocation faults. Work queued
	 * behind it (the memset of registered memory) is dropped. */
	target = (CUdeviceptr)&unregistered;
	CHECK_CU(launch_spin(s, 100, spinout), CUDA_SUCCESS);
	CHECK_CU(launch(f_store, 1, 1, s, args), CUDA_SUCCESS);
	/* Queued behind the fault, or refused if it has already happened. */
	rc = p_cuMemsetD32Async((CUdeviceptr)host, 0x5555, 64, s);
	CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_ILLEGAL_ADDRESS, "memset: %s", err_name(rc));
	rc = p_cuEventRecord(ev, s);
	CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_ILLEGAL_ADDRESS, "record: %s", err_name(rc));
	CHECK_CU(p_cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK(unregistered == 0, "the faulting kernel wrote %u", unregistered);
	CHECK(host[0] == 0, "work after the fault ran (%#x)", host[0]);
	CHECK_CU(p_cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuEventQuery(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuEventSynchronize(ev), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuMemAlloc_v2(&d, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(launch(f_empty, 1, 1, s, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuMemcpyHtoDAsync_v2(good, &v, 4, s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuStreamCreate(&s1, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuModuleLoadData(&mod, ptx), CUDA_ERROR_ILLEGAL_ADDRESS);

	/* The other device's context is unaffected. */
	CHECK_CU(p_cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&d, 16), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamCreate(&s1, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemsetD32Async(d, 9, 4, s1), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamSynchronize(s1), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s1), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_CU(p_cuCtxSetCurrent(ctx0), CUDA_SUCCESS);

	/* Host memory may be unregistered even now: the caller frees it next. */
	CHECK_CU(p_cuMemHostUnregister(host), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK_CU(p_cuMemHostUnregister(host), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

	/* Releasing the primary context to 0 resets it. */
	CHECK_CU(p_cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
	CHECK_CU(p_cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(p_cuMemAlloc_v2(&d, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CHECK_CU(p_cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
	CHECK(c == ctx0, "the primary context's handle changed across the reset");
	CHECK_CU(p_cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);          /* the reset destroyed it */
	CHECK_CU(p_cuEventQuery(ev), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(get_function(mod, &f_vadd, "vadd"), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(p_cuMemFree_v2(good), CUDA_ERROR_INVALID_VALUE);         /* freed by the reset */
	size_t free_now, total;

	CHECK_CU(p_cuMemGetInfo_v2(&free_now, &total), CUDA_SUCCESS);
	CHECK(free_now == total, "the reset left %zu bytes allocated", total - free_now);
	CHECK_CU(p_cuDeviceGetCount(&n), CUDA_SUCCESS);
}

/* Reloads the module after the reset, and checks the context works again. */
static void test_after_reset(void)
{
	CUstream s;
	CUdeviceptr d;
	static uint32_t back[256];

	group = "after reset";
	CHECK_CU(p_cuModuleLoadData(&mod, ptx), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_iota, "iota_u32"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_affine, "affine_u32"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_spin, "spin"), CUDA_SUCCESS);
	CHECK_CU(get_function(mod, &f_empty, "empty"), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_CU(p_cuMemAlloc_v2(&d, sizeof(back)), CUDA_SUCCESS);
	CHECK_CU(launch_iota(s, d, 1, 256), CUDA_SUCCESS);
	CHECK_CU(launch_affine(s, d, 2, 0, 256), CUDA_SUCCESS);
	CHECK_CU(p_cuMemcpyDtoHAsync_v2(back, d, sizeof(back), s), CUDA_SUCCESS);
	CHECK(back[0] == 2 && back[255] == 512, "after the reset: %u %u", back[0], back[255]);
	CHECK_CU(p_cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_CU(p_cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

enum { THREADS = 8 };

struct worker {
	pthread_t thread;
	int index;
	int errors;
};

/* Each thread: its own stream and buffer, an order-sensitive chain. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	enum { N = 2048, ROUNDS = 20 };
	uint32_t *back = malloc(N * sizeof(*back));
	CUstream s;
	CUdeviceptr d;

	if (!back || p_cuCtxSetCurrent(ctx0) || p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
	    p_cuMemAlloc_v2(&d, N * sizeof(*back))) {
		w->errors++;
		free(back);
		return NULL;
	}
	for (int round = 0; round < ROUNDS; round++) {
		unsigned base = (unsigned)(w->index * 1000 + round);

		if (launch_iota(s, d, base, N) || launch_affine(s, d, 5, (unsigned)w->index, N) ||
		    launch_affine(s, d, 3, 1, N) ||
		    p_cuMemcpyDtoHAsync_v2(back, d, N * sizeof(*back), s)) {
			w->errors++;
			break;
		}
		for (unsigned i = 0; i < N; i++) {
			if (back[i] != ((base + i) * 5 + (unsigned)w->index) * 3 + 1) {
				w->errors++;
				break;
			}
		}
	}
	if (p_cuStreamSynchronize(s) || p_cuMemFree_v2(d) || p_cuStreamDestroy_v2(s))
		w->errors++;
	free(back);
	return NULL;
}

static void test_concurrency(void)
{
	struct worker w[THREADS];
	CUstream s[THREADS];
	CUdeviceptr out;
	double t0, t;

	group = "concurrency";
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .index = i };
		CHECK(pthread_create(&w[i].thread, NULL, worker_main, &w[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		CHECK(w[i].errors == 0, "thread %d saw %d errors", i, w[i].errors);
	}

	/* Streams run concurrently: eight 200 ms kernels take far less than 1.6 s. */
	CHECK_CU(p_cuMemAlloc_v2(&out, 64 * THREADS), CUDA_SUCCESS);
	for (int i = 0; i < THREADS; i++)
		CHECK_CU(p_cuStreamCreate(&s[i], 0), CUDA_SUCCESS);
	t0 = now_ms();
	for (int i = 0; i < THREADS; i++)
		CHECK_CU(launch_spin(s[i], 200, out + 64 * (unsigned)i), CUDA_SUCCESS);
	for (int i = 0; i < THREADS; i++)
		CHECK_CU(p_cuStreamSynchronize(s[i]), CUDA_SUCCESS);
	t = now_ms() - t0;
	CHECK(t >= 190 && t < 1200, "eight concurrent 200 ms kernels took %.0f ms", t);
	for (int i = 0; i < THREADS; i++)
		CHECK_CU(p_cuStreamDestroy_v2(s[i]), CUDA_SUCCESS);
	CHECK_CU(p_cuMemFree_v2(out), CUDA_SUCCESS);
}

/* ---- main ---------------------------------------------------------------- */

/* path of a file next to this program, rel relative to its directory; the
 * two paths asked for live in static storage (forked children inherit them,
 * and a leak checker must not see them as leaks) */
static char *beside_me(const char *rel)
{
	static char paths[2][PATH_MAX];
	static int used;
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0 || used == 2)
		return NULL;
	exe[n] = '\0';
	if (snprintf(paths[used], PATH_MAX, "%s/%s", dirname(exe), rel) >= PATH_MAX)
		return NULL;
	return paths[used++];
}

int main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : getenv("STANDIN_LIB");
	const char *ptx_path = argc > 2 ? argv[2] : getenv("STANDIN_PTX");
	void *h;

	if (!lib)
		lib = beside_me("../../lib/standin/libcuda.so.1");
	if (!ptx_path)
		ptx_path = beside_me("../kernels.ptx");
	if (!lib || !ptx_path) {
		fprintf(stderr, "test_standin: cannot locate the library and the PTX\n");
		return 1;
	}
	ptx = read_file(ptx_path);
	if (!ptx) {
		fprintf(stderr, "test_standin: cannot read %s\n", ptx_path);
		return 1;
	}
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "test_standin: %s\n", dlerror());
		return 1;
	}
#define LOAD(name)                                                                  \
	p_##name = (__typeof__(p_##name))dlsym(h, #name);                           \
	if (!p_##name) {                                                            \
		fprintf(stderr, "test_standin: %s does not export %s\n", lib, #name); \
		return 1;                                                           \
	}
	CU_FUNCS(LOAD)
	check_name_codes(err_name);

	void (*const groups[])(void) = {
		test_before_init, test_configuration, test_visible, test_devices, test_contexts, test_modules, test_stream_order,
		test_asynchrony, test_cross_stream, test_copy_semantics, test_events, test_params,
		test_mixed_arg, test_globals, test_memory, test_free_unmaps, test_handles, test_destroy_pending,
		test_sticky, test_after_reset, test_concurrency,
	};
	int ngroups = (int)(sizeof(groups) / sizeof(groups[0])), failed_groups = 0;

	for (int i = 0; i < ngroups; i++) {
		int before = check_failures();
		double t0 = now_ms();

		groups[i]();
		printf("%s %s (%.0f ms)\n", check_failures() == before ? "ok  " : "FAIL", group, now_ms() - t0);
		failed_groups += check_failures() != before;
	}
	printf("test_standin: %d of %d groups failed\n", failed_groups, ngroups);
	return check_finish("test_standin");
}
