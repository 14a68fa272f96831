// SPDX-License-Identifier: MIT
/*
 * A program that asks NVML what pynvml and monitoring agents ask, through
 * whatever libnvidia-ml.so.1 LD_LIBRARY_PATH finds (dlopen, as pynvml
 * does), printing one line per answer for tests/system/nvml.sh:
 *
 *   before    0|N             a call before nvmlInit (NVML_ERROR_UNINITIALIZED is 1)
 *   count     N
 *   dev I UUID TOTAL FREE USED CC BUSID NAME...
 *   byuuid I                  the index nvmlDeviceGetHandleByUUID gives for device I's UUID
 *   v2 I TOTAL USED           nvmlDeviceGetMemoryInfo_v2
 *   procs I R N PID:BYTES:GI... the running processes (_v3, asked for the count first)
 *   procs1 I R N PID:BYTES... the same through the v1 records
 *   cuda V R                  nvmlSystemGetCudaDriverVersion's version and answer
 *   driver R TEXT             nvmlSystemGetDriverVersion's answer and text ("-" on an error)
 *   nvmlver R TEXT            nvmlSystemGetNVMLVersion's
 *   util I R1 R2 GPU MEM      two utilisation readings 0.3 s apart, the second's figures
 *   errors A B C D E F        a bad handle, a short name buffer, an unknown UUID,
 *                             utilisation into NULL, the driver's version, memory v2 of a
 *                             wrong version
 *   after     N               a call after the last nvmlShutdown
 *
 * With the argument "basic", only what pynvml's everyday use asks (the
 * count, then per device its UUID, memory, name; the lines count, dev and
 * v2), nothing that waits or needs the daemon's metrics: for a container
 * (tests/system/podman_cdi.sh).
 *
 * Exit status 0 unless the library or a function could not be found, or
 * a call that must succeed failed.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int ret_t;
typedef void *dev_t_;

typedef struct {
	unsigned long long total, free, used;
} mem_t;

typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} mem2_t;

typedef struct {
	unsigned int pid;
	unsigned long long mem;
	unsigned int gi, ci;
} proc_t;

typedef struct {
	unsigned int pid;
	unsigned long long mem;
} proc1_t;

typedef struct {
	char legacy[16];
	unsigned int domain, bus, device, id, subsys;
	char bus_id[32];
} pci_t;

static void *lib;

static void *fn(const char *name)
{
	void *f = dlsym(lib, name);

	if (!f) {
		printf("missing %s\n", name);
		fflush(stdout);
		_exit(1);
	}
	return f;
}

#define CALL(type, name, ...) ((type)fn(name))(__VA_ARGS__)

int main(int argc, char **argv)
{
	typedef ret_t (*v_t)(void);
	typedef ret_t (*u_t)(unsigned int *);
	typedef ret_t (*hi_t)(unsigned int, dev_t_ *);
	typedef ret_t (*hs_t)(dev_t_, char *, unsigned int);
	typedef ret_t (*hu_t)(const char *, dev_t_ *);
	typedef ret_t (*hm_t)(dev_t_, mem_t *);
	typedef ret_t (*hm2_t)(dev_t_, mem2_t *);
	typedef ret_t (*hp_t)(dev_t_, pci_t *);
	typedef ret_t (*hcc_t)(dev_t_, int *, int *);
	typedef ret_t (*hx_t)(dev_t_, unsigned int *);
	typedef ret_t (*hv_t)(dev_t_, void *);
	typedef ret_t (*sv_t)(char *, unsigned int);
	typedef ret_t (*iv_t)(int *);
	typedef ret_t (*hpr_t)(dev_t_, unsigned int *, void *);
	unsigned int n = 0, idx;
	int rc = 0;
	bool basic = argc > 1 && !strcmp(argv[1], "basic");

	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!lib) {
		printf("no libnvidia-ml.so.1: %s\n", dlerror());
		return 1;
	}
	printf("before %d\n", CALL(u_t, "nvmlDeviceGetCount_v2", &n));
	if (CALL(v_t, "nvmlInit_v2") != 0 || CALL(v_t, "nvmlInit_v2") != 0) {
		printf("nvmlInit_v2 failed\n");
		return 1;
	}
	if (CALL(u_t, "nvmlDeviceGetCount_v2", &n) != 0)
		return 1;
	printf("count %u\n", n);
	for (unsigned int i = 0; i < n; i++) {
		char uuid[96], name[96], back[96];
		dev_t_ h, h2;
		mem_t m;
		mem2_t m2 = { .version = (unsigned int)(sizeof(mem2_t) | (2u << 24)) };
		pci_t p;
		int maj, min;

		if (CALL(hi_t, "nvmlDeviceGetHandleByIndex_v2", i, &h) || CALL(hs_t, "nvmlDeviceGetUUID", h, uuid, 96) ||
		    CALL(hs_t, "nvmlDeviceGetName", h, name, 96) || CALL(hm_t, "nvmlDeviceGetMemoryInfo", h, &m) ||
		    CALL(hp_t, "nvmlDeviceGetPciInfo_v3", h, &p) ||
		    CALL(hcc_t, "nvmlDeviceGetCudaComputeCapability", h, &maj, &min) ||
		    CALL(hm2_t, "nvmlDeviceGetMemoryInfo_v2", h, &m2)) {
			printf("device %u: a query failed\n", i);
			rc = 1;
			continue;
		}
		printf("dev %u %s %llu %llu %llu %d.%d %s %s\n", i, uuid, m.total, m.free, m.used, maj, min, p.bus_id, name);
		printf("v2 %u %llu %llu\n", i, m2.total, m2.used);
		if (basic)
			continue;
		{
			/* As pynvml asks: the count with no array, then the records. */
			proc_t procs[64];
			proc1_t p1[64];
			unsigned int np = 0, n1 = 64;
			int r = CALL(hpr_t, "nvmlDeviceGetComputeRunningProcesses_v3", h, &np, NULL);

			if (r == 7 && np <= 64)
				r = CALL(hpr_t, "nvmlDeviceGetComputeRunningProcesses_v3", h, &np, procs);
			printf("procs %u %d %u", i, r, r ? 0 : np);
			for (unsigned int k = 0; !r && k < np; k++)
				printf(" %u:%llu:%x", procs[k].pid, procs[k].mem, procs[k].gi);
			printf("\n");
			r = CALL(hpr_t, "nvmlDeviceGetComputeRunningProcesses", h, &n1, p1);
			printf("procs1 %u %d %u", i, r, r ? 0 : n1);
			for (unsigned int k = 0; !r && k < n1; k++)
				printf(" %u:%llu", p1[k].pid, p1[k].mem);
			printf("\n");
		}
		if (CALL(hu_t, "nvmlDeviceGetHandleByUUID", uuid, &h2) || CALL(hx_t, "nvmlDeviceGetIndex", h2, &idx) ||
		    CALL(hs_t, "nvmlDeviceGetUUID", h2, back, 96) || strcmp(back, uuid))
			rc = 1;
		else
			printf("byuuid %u\n", idx);
	}
	if (basic) {
		CALL(v_t, "nvmlShutdown");
		CALL(v_t, "nvmlShutdown");
		return rc;
	}
	{
		char text[96];
		int r;

		int cuda = 0;

		r = CALL(iv_t, "nvmlSystemGetCudaDriverVersion", &cuda);
		printf("cuda %d %d\n", cuda, r);
		r = CALL(sv_t, "nvmlSystemGetDriverVersion", text, sizeof(text));
		printf("driver %d %s\n", r, r ? "-" : text);
		r = CALL(sv_t, "nvmlSystemGetNVMLVersion", text, sizeof(text));
		printf("nvmlver %d %s\n", r, r ? "-" : text);
	}
	for (unsigned int i = 0; i < n; i++) {
		unsigned int u1[2] = { 0 }, u2[2] = { 0 };
		dev_t_ h;
		int r1, r2;

		CALL(hi_t, "nvmlDeviceGetHandleByIndex_v2", i, &h);
		r1 = CALL(hv_t, "nvmlDeviceGetUtilizationRates", h, u1);
		usleep(300 * 1000);
		r2 = CALL(hv_t, "nvmlDeviceGetUtilizationRates", h, u2);
		printf("util %u %d %d %u %u\n", i, r1, r2, u2[0], u2[1]);
	}
	{
		dev_t_ h0 = NULL, bad = (char *)&n;
		char small[4];
		mem2_t old = { .version = 1 };

		CALL(hi_t, "nvmlDeviceGetHandleByIndex_v2", 0, &h0);
		printf("errors %d %d %d %d %d %d\n", CALL(hs_t, "nvmlDeviceGetName", bad, small, 4),
		       CALL(hs_t, "nvmlDeviceGetName", h0, small, 4),
		       CALL(hu_t, "nvmlDeviceGetHandleByUUID", "GPU-00000000-0000-0000-0000-000000000000", &bad),
		       CALL(hv_t, "nvmlDeviceGetUtilizationRates", h0, NULL),
		       CALL(sv_t, "nvmlSystemGetDriverVersion", small, 4), CALL(hm2_t, "nvmlDeviceGetMemoryInfo_v2", h0, &old));
	}
	CALL(v_t, "nvmlShutdown");
	printf("still %d\n", CALL(u_t, "nvmlDeviceGetCount_v2", &n));
	CALL(v_t, "nvmlShutdown");
	printf("after %d\n", CALL(u_t, "nvmlDeviceGetCount_v2", &n));
	return rc;
}
