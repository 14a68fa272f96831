// SPDX-License-Identifier: MIT
/*
 * A CUDA client the control tests drive from the shell: it runs the steps
 * named on its command line, in order, and prints one line per step with
 * the CUresult's name, so a script can start it, look at the daemon while it
 * is connected (ps, get_client_list, terminate_client...), let it go on, and
 * check what its later calls returned.
 *
 *   init          cuInit, then device 0's primary context made current
 *   dev:N         device N's primary context made current
 *   alloc:MIB     cuMemAlloc of MIB MiB (kept until free)
 *   free          cuMemFree of everything allocated
 *   halloc:MIB    cuMemAllocHost of MIB MiB, every page written and read back
 *                 (kept until hfree)
 *   hfree         cuMemFreeHost of everything allocated with halloc
 *   meminfo       cuMemGetInfo: "meminfo RESULT FREE TOTAL" (bytes)
 *   list          cuInit, then the devices it sees: "list RESULT N UUID PCI-ID ..."
 *                 (UUID as 32 hex digits)
 *   baddev        cuDeviceGet of ordinal 99, called directly and through the
 *                 pointer cuGetProcAddress gives: "baddev RESULT RESULT"
 *   sync          cuCtxSynchronize
 *   launch:N      N launches of the test kernels' `empty` (module from
 *                 OPENMPS_TEST_PTX), then a synchronize: "launch N RESULT"
 *   fault         the test kernels' `store_at` at address 0x10 (a GPU
 *                 fault), then a synchronize: "fault RESULT"
 *   copy:MIB      MIB MiB host to device, then device to host, through the
 *                 first allocation: "copy MIB RESULT"
 *   array:MIB     a 2D float array of MIB MiB (1024 floats a row), kept:
 *                 "array MIB RESULT"
 *   sms           the current device's SM count: "sms RESULT N"
 *   smids:N       N blocks of the test kernels' `spin` (each records the SM
 *                 it ran on) on a stream made at the first smids and kept,
 *                 then a synchronize: "smids RESULT DISTINCT FIRST LAST LIST"
 *                 (the SMs used, LIST comma-separated in order)
 *   gsmids:N      as smids:N, through a graph captured on that stream,
 *                 instantiated and launched there: "gsmids RESULT ..."
 *   spin:N:T:C    the same with N blocks of T threads spinning C cycles
 *                 each, timed: "spin RESULT MILLISECONDS DISTINCT"
 *   wait:PATH     prints "waiting PATH", then waits (up to 60 s) for PATH to exist
 *   open:PATH     open(2) of PATH read-write, as the driver opens its device
 *                 nodes (closed again): "open PATH ERRNO TEXT", ERRNO 0 when
 *                 it opened (a container given no device node: 2, ENOENT)
 *   sleep:MS      sleeps
 *
 * Every line is flushed as it is printed. The exit status is 0 unless a
 * step could not be understood (2): results are for the script to judge.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#define MAX_ALLOCS 256

static CUdeviceptr allocs[MAX_ALLOCS];
static int nallocs;
static void *hallocs[MAX_ALLOCS];
static int nhallocs;

/* Writes a pattern into every page of a pinned allocation and reads it back. */
static CUresult touch(void *p, size_t bytes)
{
	volatile uint8_t *b = p;

	for (size_t i = 0; i < bytes; i += 4096)
		b[i] = (uint8_t)(i >> 12 | 1);
	for (size_t i = 0; i < bytes; i += 4096)
		if (b[i] != (uint8_t)(i >> 12 | 1))
			return CUDA_ERROR_UNKNOWN;
	return CUDA_SUCCESS;
}

static const char *name(CUresult r)
{
	const char *s = NULL;

	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}

static int cur_ordinal;   /* the device `init` or `dev:` made current */

static CUresult use_device(int ordinal)
{
	CUcontext ctx;
	CUdevice dev;
	CUresult r;

	r = cuDeviceGet(&dev, ordinal);
	if (r == CUDA_SUCCESS)
		r = cuDevicePrimaryCtxRetain(&ctx, dev);
	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(ctx);
	if (r == CUDA_SUCCESS)
		cur_ordinal = ordinal;
	return r;
}

/* The test kernel called name, from a module of OPENMPS_TEST_PTX. */
static CUresult test_function(const char *name, CUfunction *f)
{
	const char *path = getenv("OPENMPS_TEST_PTX");
	static char ptx[1 << 20];
	FILE *fp = path ? fopen(path, "r") : NULL;
	CUmodule mod;
	CUresult r;
	size_t len;

	if (!fp)
		return CUDA_ERROR_FILE_NOT_FOUND;
	len = fread(ptx, 1, sizeof(ptx) - 1, fp);
	fclose(fp);
	ptx[len] = 0;
	r = cuModuleLoadData(&mod, ptx);
	if (r == CUDA_SUCCESS)
		r = cuModuleGetFunction(f, mod, name);
	return r;
}

/* n launches of `empty`, then a synchronize. */
static CUresult launch_empty(long n)
{
	CUfunction f;
	CUresult r = test_function("empty", &f);

	for (long i = 0; i < n && r == CUDA_SUCCESS; i++)
		r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	return r;
}

/* A kernel that stores where nothing is mapped, then a synchronize. */
static CUresult fault(void)
{
	unsigned int *bad = (unsigned int *)(uintptr_t)0x10, v = 7;
	void *args[] = { &bad, &v };
	CUfunction f;
	CUresult r = test_function("store_at", &f);

	if (r == CUDA_SUCCESS)
		r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	return r;
}

/* Launches `spin` in n blocks of `threads` on a stream kept from the first
 * call and prints the SMs they ran on, or (timed) how long it took. */
static void smids(long n, unsigned int threads, long long cycles, bool timed, bool graph)
{
	static CUfunction f;
	static CUstream s;
	static unsigned char seen[4096];
	struct timespec t0 = { 0 }, t1 = { 0 };
	int32_t *ids = calloc((size_t)(n > 0 ? n : 1), sizeof(*ids));
	CUdeviceptr out = 0;
	CUresult r = ids && n > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	int distinct = 0, first = -1, last = -1;

	if (r == CUDA_SUCCESS && !f) {
		r = test_function("spin", &f);
		if (r == CUDA_SUCCESS)
			r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
		if (r != CUDA_SUCCESS)
			f = NULL;
	}
	if (r == CUDA_SUCCESS)
		r = cuMemAlloc(&out, (size_t)n * sizeof(*ids));
	if (r == CUDA_SUCCESS) {
		void *args[] = { &cycles, &out };

		CUgraph g = NULL;
		CUgraphExec x = NULL;

		r = cuStreamSynchronize(s);
		if (r == CUDA_SUCCESS && graph)
			r = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (r == CUDA_SUCCESS)
			r = cuLaunchKernel(f, (unsigned int)n, 1, 1, threads, 1, 1, 0, s, args, NULL);
		if (r == CUDA_SUCCESS && graph) {
			r = cuStreamEndCapture(s, &g);
			if (r == CUDA_SUCCESS)
				r = cuGraphInstantiate(&x, g, 0);
			if (r == CUDA_SUCCESS)
				r = cuGraphLaunch(x, s);
		}
		if (r == CUDA_SUCCESS)
			r = cuStreamSynchronize(s);
		if (x)
			cuGraphExecDestroy(x);
		if (g)
			cuGraphDestroy(g);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r == CUDA_SUCCESS)
			r = cuMemcpyDtoH(ids, out, (size_t)n * sizeof(*ids));
		cuMemFree(out);
	}
	memset(seen, 0, sizeof(seen));
	for (long i = 0; r == CUDA_SUCCESS && i < n; i++)
		if (ids[i] >= 0 && ids[i] < 4096 && !seen[ids[i]]++)
			distinct++;
	if (timed) {
		printf("spin %s %.3f %d\n", name(r),
		       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6, distinct);
		free(ids);
		return;
	}
	printf("%s %s %d", graph ? "gsmids" : "smids", name(r), distinct);
	for (int i = 0; i < 4096; i++)
		if (seen[i]) {
			if (first < 0)
				first = i;
			last = i;
		}
	printf(" %d %d ", first, last);
	for (int i = 0, k = 0; i < 4096; i++)
		if (seen[i])
			printf(k++ ? ",%d" : "%d", i);
	printf("\n");
	free(ids);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		CUresult r;

		if (!strcmp(a, "init")) {
			r = cuInit(0);
			if (r == CUDA_SUCCESS)
				r = use_device(0);
			printf("init %s\n", name(r));
		} else if (!strncmp(a, "dev:", 4)) {
			printf("dev %d %s\n", atoi(a + 4), name(use_device(atoi(a + 4))));
		} else if (!strncmp(a, "alloc:", 6)) {
			CUdeviceptr p = 0;

			r = nallocs < MAX_ALLOCS ? cuMemAlloc(&p, (size_t)atol(a + 6) << 20) : CUDA_ERROR_OUT_OF_MEMORY;
			if (r == CUDA_SUCCESS)
				allocs[nallocs++] = p;
			printf("alloc %ld %s\n", atol(a + 6), name(r));
		} else if (!strcmp(a, "free")) {
			r = CUDA_SUCCESS;
			while (nallocs > 0) {
				CUresult f = cuMemFree(allocs[--nallocs]);

				if (r == CUDA_SUCCESS)
					r = f;
			}
			printf("free %s\n", name(r));
		} else if (!strncmp(a, "halloc:", 7)) {
			size_t bytes = (size_t)atol(a + 7) << 20;
			void *p = NULL;

			r = nhallocs < MAX_ALLOCS ? cuMemAllocHost(&p, bytes) : CUDA_ERROR_OUT_OF_MEMORY;
			if (r == CUDA_SUCCESS) {
				hallocs[nhallocs++] = p;
				r = touch(p, bytes);
			}
			printf("halloc %ld %s\n", atol(a + 7), name(r));
		} else if (!strcmp(a, "hfree")) {
			r = CUDA_SUCCESS;
			while (nhallocs > 0) {
				CUresult f = cuMemFreeHost(hallocs[--nhallocs]);

				if (r == CUDA_SUCCESS)
					r = f;
			}
			printf("hfree %s\n", name(r));
		} else if (!strcmp(a, "baddev")) {
			CUresult (*get)(CUdevice *, int) = NULL;
			CUdevice d;
			CUresult r2 = CUDA_ERROR_UNKNOWN;

			r = cuDeviceGet(&d, 99);
			if (cuGetProcAddress("cuDeviceGet", (void **)&get, 2000, CU_GET_PROC_ADDRESS_DEFAULT, NULL) ==
				    CUDA_SUCCESS && get)
				r2 = get(&d, 99);
			printf("baddev %s %s\n", name(r), name(r2));
		} else if (!strcmp(a, "meminfo")) {
			size_t fr = 0, total = 0;

			r = cuMemGetInfo(&fr, &total);
			printf("meminfo %s %zu %zu\n", name(r), fr, total);
		} else if (!strcmp(a, "list")) {
			int n = 0;

			r = cuInit(0);
			if (r == CUDA_SUCCESS)
				r = cuDeviceGetCount(&n);
			printf("list %s %d", name(r), n);
			for (int d = 0; d < n && r == CUDA_SUCCESS; d++) {
				CUuuid u;
				char pci[32] = "";

				if (cuDeviceGetUuid(&u, d) != CUDA_SUCCESS || cuDeviceGetPCIBusId(pci, sizeof(pci), d))
					break;
				printf(" ");
				for (int b = 0; b < 16; b++)
					printf("%02x", (unsigned char)u.bytes[b]);
				printf(" %s", pci);
			}
			printf("\n");
		} else if (!strcmp(a, "sync")) {
			printf("sync %s\n", name(cuCtxSynchronize()));
		} else if (!strncmp(a, "launch:", 7)) {
			printf("launch %ld %s\n", atol(a + 7), name(launch_empty(atol(a + 7))));
		} else if (!strcmp(a, "fault")) {
			printf("fault %s\n", name(fault()));
		} else if (!strncmp(a, "copy:", 5)) {
			size_t bytes = (size_t)atol(a + 5) << 20;
			void *h = calloc(1, bytes ? bytes : 1);

			r = !h || !nallocs ? CUDA_ERROR_INVALID_VALUE : cuMemcpyHtoD(allocs[0], h, bytes);
			if (r == CUDA_SUCCESS)
				r = cuMemcpyDtoH(h, allocs[0], bytes);
			free(h);
			printf("copy %ld %s\n", atol(a + 5), name(r));
		} else if (!strncmp(a, "array:", 6)) {
			CUDA_ARRAY_DESCRIPTOR ad = { .Width = 1024, .Height = (size_t)atol(a + 6) << 8,
						     .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
			CUarray arr;

			printf("array %ld %s\n", atol(a + 6), name(cuArrayCreate(&arr, &ad)));
		} else if (!strcmp(a, "sms")) {
			int v = 0;
			CUdevice d = 0;

			r = cuDeviceGet(&d, cur_ordinal);
			if (r == CUDA_SUCCESS)
				r = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
			printf("sms %s %d\n", name(r), v);
		} else if (!strncmp(a, "smids:", 6)) {
			smids(atol(a + 6), 32, 2000, false, false);
		} else if (!strncmp(a, "gsmids:", 7)) {
			smids(atol(a + 7), 32, 2000, false, true);
		} else if (!strncmp(a, "spin:", 5)) {
			long n = 0, t = 0;
			long long cyc = 0;

			if (sscanf(a + 5, "%ld:%ld:%lld", &n, &t, &cyc) != 3 || t < 1 || t > 1024) {
				fprintf(stderr, "c_client: spin:BLOCKS:THREADS:CYCLES, not '%s'\n", a);
				return 2;
			}
			smids(n, (unsigned int)t, cyc, true, false);
		} else if (!strncmp(a, "wait:", 5)) {
			int waited = 0;

			printf("waiting %s\n", a + 5);
			while (access(a + 5, F_OK) != 0 && waited < 60000) {
				sleep_ms(10);
				waited += 10;
			}
			printf("waited %s\n", waited < 60000 ? "ok" : "timeout");
		} else if (!strncmp(a, "open:", 5)) {
			int fd = open(a + 5, O_RDWR | O_CLOEXEC);
			int e = fd < 0 ? errno : 0;

			if (fd >= 0)
				close(fd);
			printf("open %s %d %s\n", a + 5, e, strerror(e));
		} else if (!strncmp(a, "sleep:", 6)) {
			sleep_ms(atol(a + 6));
		} else {
			fprintf(stderr, "c_client: unknown step '%s'\n", a);
			return 2;
		}
	}
	return 0;
}
