// SPDX-License-Identifier: MIT
/*
 * nvidia-smi for pods that reach the GPU through openmps alone: NVIDIA's
 * program comes with NVIDIA's driver files, which openmps's CDI devices and
 * device plugin leave out, so health checks and users' `nvidia-smi` found
 * nothing. This answers the part of its command line that scripts use,
 * from whatever libnvidia-ml.so.1 the loader finds (openmps's, src/nvml, in
 * a pod; NVIDIA's on a host, which is how its output is compared with
 * NVIDIA's program):
 *
 *   nvidia-smi                        a summary: each device and its memory,
 *                                     then the processes (this pod's own)
 *   nvidia-smi -L | --list-gpus       "GPU i: NAME (UUID: GPU-...)"
 *   --query-gpu=F,... --format=csv[,noheader][,nounits]
 *       F: index, name, uuid, pci.bus_id, memory.total, memory.used,
 *          memory.free, utilization.gpu, utilization.memory, driver_version,
 *          compute_cap, count
 *   --query-compute-apps=F,... --format=csv[,noheader][,nounits]
 *       F: pid, used_memory (used_gpu_memory), gpu_uuid, gpu_bus_id
 *   -i | --id=I[,I...]                 devices by index or UUID
 *   -h | --help
 *
 * A value NVML does not give is "[N/A]", as NVIDIA's program writes it;
 * another option is refused with its name and exit status 2.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEVICES 64
#define MAX_PROCS   1024
#define MAX_FIELDS  16

typedef void *dev_t_;
typedef struct {
	unsigned long long total, free, used;
} mem_t;
typedef struct {
	char legacy[16];
	unsigned int domain, bus, device, id, subsys;
	char bus_id[32];
} pci_t;
typedef struct {
	unsigned int pid;
	unsigned long long mem;
	unsigned int gi, ci;
} proc_t;
typedef struct {
	unsigned int gpu, memory;
} util_t;

static struct {
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned int *);
	int (*by_index)(unsigned int, dev_t_ *);
	int (*name)(dev_t_, char *, unsigned int);
	int (*uuid)(dev_t_, char *, unsigned int);
	int (*memory)(dev_t_, mem_t *);
	int (*pci)(dev_t_, pci_t *);
	int (*cc)(dev_t_, int *, int *);
	int (*driver)(char *, unsigned int);
	int (*util)(dev_t_, util_t *);
	int (*procs)(dev_t_, unsigned int *, proc_t *);
	const char *(*error)(int);
} nv;

struct gpu {
	unsigned int index;
	dev_t_ h;
	char name[96], uuid[96], bus[32], driver[96];
	mem_t mem;
	int mem_ok, cc_major, cc_minor, cc_ok;
	util_t util;
	int util_asked, util_ok;   /* asked once, when a field needs it */
};

static struct gpu gpus[MAX_DEVICES];
static unsigned int ngpus;
static int noheader, nounits;

static int load(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);

	if (!h) {
		fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver "
				"(no libnvidia-ml.so.1: %s).\n", dlerror());
		return -1;
	}
	*(void **)&nv.init = dlsym(h, "nvmlInit_v2");
	*(void **)&nv.shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&nv.count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&nv.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&nv.name = dlsym(h, "nvmlDeviceGetName");
	*(void **)&nv.uuid = dlsym(h, "nvmlDeviceGetUUID");
	*(void **)&nv.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&nv.pci = dlsym(h, "nvmlDeviceGetPciInfo_v3");
	*(void **)&nv.cc = dlsym(h, "nvmlDeviceGetCudaComputeCapability");
	*(void **)&nv.driver = dlsym(h, "nvmlSystemGetDriverVersion");
	*(void **)&nv.procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
	*(void **)&nv.util = dlsym(h, "nvmlDeviceGetUtilizationRates");
	*(void **)&nv.error = dlsym(h, "nvmlErrorString");
	if (!nv.init || !nv.shutdown || !nv.count || !nv.by_index || !nv.name || !nv.uuid || !nv.memory) {
		fprintf(stderr, "NVIDIA-SMI has failed: libnvidia-ml.so.1 lacks what it needs.\n");
		return -1;
	}
	return 0;
}

static const char *why(int r)
{
	return nv.error ? nv.error(r) : "error";
}

/* Every device, with what NVML says of it. */
static int discover(void)
{
	char driver[96] = "";
	int r = nv.init();

	if (r) {
		fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver (%s).\n",
			why(r));
		return -1;
	}
	if ((r = nv.count(&ngpus))) {
		fprintf(stderr, "Unable to determine the device count: %s\n", why(r));
		return -1;
	}
	if (ngpus > MAX_DEVICES)
		ngpus = MAX_DEVICES;
	if (!nv.driver || nv.driver(driver, sizeof(driver)))
		strcpy(driver, "[N/A]");
	for (unsigned int i = 0; i < ngpus; i++) {
		struct gpu *g = &gpus[i];
		pci_t p;

		g->index = i;
		strcpy(g->driver, driver);
		if ((r = nv.by_index(i, &g->h))) {
			fprintf(stderr, "Unable to reach device %u: %s\n", i, why(r));
			return -1;
		}
		if (nv.name(g->h, g->name, sizeof(g->name)))
			strcpy(g->name, "[N/A]");
		if (nv.uuid(g->h, g->uuid, sizeof(g->uuid)))
			strcpy(g->uuid, "[N/A]");
		g->mem_ok = nv.memory(g->h, &g->mem) == 0;
		if (nv.pci && nv.pci(g->h, &p) == 0)
			snprintf(g->bus, sizeof(g->bus), "%s", p.bus_id);
		else
			strcpy(g->bus, "[N/A]");
		g->cc_ok = nv.cc && nv.cc(g->h, &g->cc_major, &g->cc_minor) == 0;
	}
	return 0;
}

/* -i: the devices chosen (all when none is named). */
static int chosen[MAX_DEVICES];

static int choose(const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int r = 0;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long i = strtoul(t, &end, 10);
		int found = 0;

		for (unsigned int k = 0; k < ngpus; k++) {
			if ((!*end && end != t && i == k) || !strcasecmp(t, gpus[k].uuid) ||
			    (strlen(t) > 4 && !strncasecmp(t, gpus[k].uuid, strlen(t)))) {
				chosen[k] = 1;
				found = 1;
			}
		}
		if (!found) {
			fprintf(stderr, "No devices were found matching the identifier %s\n", t);
			r = -1;
		}
	}
	free(copy);
	return r;
}

static void mib(char *out, size_t len, int ok, unsigned long long bytes)
{
	if (!ok)
		snprintf(out, len, "[N/A]");
	else
		snprintf(out, len, nounits ? "%llu" : "%llu MiB", bytes >> 20);
}

static void percent(char *out, size_t len, int ok, unsigned int pct)
{
	if (!ok)
		snprintf(out, len, "[N/A]");
	else
		snprintf(out, len, nounits ? "%u" : "%u %%", pct);
}

/* One field of a device for --query-gpu; -1 for a field not known. */
static int gpu_field(struct gpu *g, const char *f, char *out, size_t len)
{
	if (!strncmp(f, "utilization.", 12) && !g->util_asked) {
		g->util_asked = 1;
		g->util_ok = nv.util && nv.util(g->h, &g->util) == 0;
	}
	if (!strcmp(f, "index"))
		snprintf(out, len, "%u", g->index);
	else if (!strcmp(f, "name") || !strcmp(f, "gpu_name"))
		snprintf(out, len, "%s", g->name);
	else if (!strcmp(f, "uuid") || !strcmp(f, "gpu_uuid"))
		snprintf(out, len, "%s", g->uuid);
	else if (!strcmp(f, "pci.bus_id") || !strcmp(f, "gpu_bus_id"))
		snprintf(out, len, "%s", g->bus);
	else if (!strcmp(f, "memory.total"))
		mib(out, len, g->mem_ok, g->mem.total);
	else if (!strcmp(f, "memory.used"))
		mib(out, len, g->mem_ok, g->mem.used);
	else if (!strcmp(f, "memory.free"))
		mib(out, len, g->mem_ok, g->mem.free);
	else if (!strcmp(f, "utilization.gpu"))
		percent(out, len, g->util_ok, g->util.gpu);
	else if (!strcmp(f, "utilization.memory"))
		percent(out, len, g->util_ok, g->util.memory);
	else if (!strcmp(f, "driver_version"))
		snprintf(out, len, "%s", g->driver);
	else if (!strcmp(f, "compute_cap"))
		snprintf(out, len, g->cc_ok ? "%d.%d" : "[N/A]", g->cc_major, g->cc_minor);
	else if (!strcmp(f, "count"))
		snprintf(out, len, "%u", ngpus);
	else
		return -1;
	return 0;
}

static const char *unit_of(const char *f)
{
	if (!strncmp(f, "utilization.", 12))
		return " [%]";
	return !strncmp(f, "memory.", 7) || !strcmp(f, "used_memory") || !strcmp(f, "used_gpu_memory") ? " [MiB]" : "";
}

static int split(char *list, char **fields)
{
	char *save = NULL;
	int n = 0;

	for (char *t = strtok_r(list, ",", &save); t && n < MAX_FIELDS; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		fields[n++] = t;
	}
	return n;
}

static void header(char **fields, int n)
{
	if (noheader)
		return;
	for (int i = 0; i < n; i++)
		printf("%s%s%s", i ? ", " : "", fields[i], nounits ? "" : unit_of(fields[i]));
	printf("\n");
}

static int query_gpu(char *list)
{
	char *fields[MAX_FIELDS], v[128];
	int n = split(list, fields);

	for (int i = 0; i < n; i++) {
		if (gpu_field(&gpus[0], fields[i], v, sizeof(v)) < 0) {
			fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", fields[i]);
			return 2;
		}
	}
	header(fields, n);
	for (unsigned int k = 0; k < ngpus; k++) {
		if (!chosen[k])
			continue;
		for (int i = 0; i < n; i++) {
			gpu_field(&gpus[k], fields[i], v, sizeof(v));
			printf("%s%s", i ? ", " : "", v);
		}
		printf("\n");
	}
	return 0;
}

/* The processes of device k: their count, or -1 when NVML cannot say. */
static int procs_of(unsigned int k, proc_t *out)
{
	unsigned int n = MAX_PROCS;

	if (!nv.procs || nv.procs(gpus[k].h, &n, out))
		return -1;
	return (int)n;
}

static int query_apps(char *list)
{
	static proc_t p[MAX_PROCS];
	char *fields[MAX_FIELDS];
	int n = split(list, fields);

	for (int i = 0; i < n; i++) {
		if (strcmp(fields[i], "pid") && strcmp(fields[i], "used_memory") && strcmp(fields[i], "used_gpu_memory") &&
		    strcmp(fields[i], "gpu_uuid") && strcmp(fields[i], "gpu_bus_id") && strcmp(fields[i], "gpu_name")) {
			fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", fields[i]);
			return 2;
		}
	}
	header(fields, n);
	for (unsigned int k = 0; k < ngpus; k++) {
		int np = chosen[k] ? procs_of(k, p) : 0;

		for (int j = 0; j < np; j++) {
			for (int i = 0; i < n; i++) {
				char v[128];

				if (!strcmp(fields[i], "pid"))
					snprintf(v, sizeof(v), "%u", p[j].pid);
				else if (!strncmp(fields[i], "used_", 5))
					mib(v, sizeof(v), 1, p[j].mem);
				else
					gpu_field(&gpus[k], fields[i], v, sizeof(v));
				printf("%s%s", i ? ", " : "", v);
			}
			printf("\n");
		}
	}
	return 0;
}

static void summary(void)
{
	static proc_t p[MAX_PROCS];
	char total[32], used[32];

	printf("+-----------------------------------------------------------------------------------------+\n");
	printf("| NVIDIA-SMI (openmps)          Driver Version: %-16s                          |\n", gpus[0].driver);
	printf("+-----------------------------------------------------------------------------------------+\n");
	printf("| GPU  Name                                   Bus-Id                      Memory-Usage      |\n");
	printf("|=========================================================================================|\n");
	for (unsigned int k = 0; k < ngpus; k++) {
		if (!chosen[k])
			continue;
		mib(used, sizeof(used), gpus[k].mem_ok, gpus[k].mem.used);
		mib(total, sizeof(total), gpus[k].mem_ok, gpus[k].mem.total);
		printf("| %3u  %-38.38s %-18s %11s / %-11s |\n", k, gpus[k].name, gpus[k].bus, used, total);
		printf("|      %-82.82s |\n", gpus[k].uuid);
	}
	printf("+-----------------------------------------------------------------------------------------+\n\n");
	printf("+-----------------------------------------------------------------------------------------+\n");
	printf("| Processes:                                                                              |\n");
	printf("|  GPU        PID   Type   GPU Memory Usage                                               |\n");
	printf("|=========================================================================================|\n");
	for (unsigned int k = 0; k < ngpus; k++) {
		int np = chosen[k] ? procs_of(k, p) : 0;

		if (np < 0)
			printf("| %4u  (the process list is not available)                                               |\n", k);
		for (int j = 0; j < np; j++)
			printf("| %4u %10u      C   %8llu MiB                                                   |\n", k, p[j].pid,
			       p[j].mem >> 20);
	}
	printf("+-----------------------------------------------------------------------------------------+\n");
}

static void usage(FILE *f)
{
	fprintf(f, "nvidia-smi (openmps): what NVML says of the devices this process sees.\n\n"
		   "  nvidia-smi                              a summary of the devices and their processes\n"
		   "  nvidia-smi -L, --list-gpus              one line per device\n"
		   "  nvidia-smi --query-gpu=F,... --format=csv[,noheader][,nounits]\n"
		   "      F: index, name, uuid, pci.bus_id, memory.total, memory.used, memory.free,\n"
		   "         utilization.gpu, utilization.memory, driver_version, compute_cap, count\n"
		   "  nvidia-smi --query-compute-apps=F,... --format=csv[,noheader][,nounits]\n"
		   "      F: pid, used_memory, gpu_uuid, gpu_bus_id, gpu_name\n"
		   "  -i, --id=I[,I...]                       devices by index or UUID\n");
}

int main(int argc, char **argv)
{
	const char *ids = NULL, *format = NULL, *qgpu = NULL, *qapps = NULL;
	char *copy = NULL;
	int list = 0, r = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-L") || !strcmp(a, "--list-gpus")) {
			list = 1;
		} else if (!strcmp(a, "-i") && i + 1 < argc) {
			ids = argv[++i];
		} else if (!strncmp(a, "--id=", 5)) {
			ids = a + 5;
		} else if (!strncmp(a, "--query-gpu=", 12)) {
			qgpu = a + 12;
		} else if (!strncmp(a, "--query-compute-apps=", 21)) {
			qapps = a + 21;
		} else if (!strncmp(a, "--format=", 9)) {
			format = a + 9;
		} else {
			fprintf(stderr, "nvidia-smi (openmps): option %s is not supported (see --help)\n", a);
			return 2;
		}
	}
	if (format) {
		char *save = NULL;

		copy = strdup(format);
		for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
			if (!strcmp(t, "noheader")) {
				noheader = 1;
			} else if (!strcmp(t, "nounits")) {
				nounits = 1;
			} else if (strcmp(t, "csv")) {
				fprintf(stderr, "nvidia-smi (openmps): format %s is not supported (csv is)\n", t);
				free(copy);
				return 2;
			}
		}
		free(copy);
	}
	if ((qgpu || qapps) && !format) {
		fprintf(stderr, "Missing --format option (--format=csv).\n");
		return 2;
	}
	if (load() < 0 || discover() < 0)
		return 9;   /* nvidia-smi's status when the driver cannot be reached */
	if (!ngpus) {
		printf("No devices were found\n");
		nv.shutdown();
		return 6;
	}
	if (ids) {
		if (choose(ids) < 0)
			r = 6;
	} else {
		for (unsigned int k = 0; k < ngpus; k++)
			chosen[k] = 1;
	}
	copy = strdup(qgpu ? qgpu : qapps ? qapps : "");
	if (!copy)
		r = 1;
	if (!r && list) {
		for (unsigned int k = 0; k < ngpus; k++)
			if (chosen[k])
				printf("GPU %u: %s (UUID: %s)\n", k, gpus[k].name, gpus[k].uuid);
	} else if (!r && qgpu) {
		r = query_gpu(copy);
	} else if (!r && qapps) {
		r = query_apps(copy);
	} else if (!r) {
		summary();
	}
	free(copy);
	nv.shutdown();
	return r;
}
