// SPDX-License-Identifier: MIT
//
// Build (from the repository root):
//   gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Isrc -I/usr/local/cuda/include -o check-procaddr tools/check-procaddr.c src/client/procaddr.c src/client/gen/procaddr_table.c src/client/gen/symbols.c -ldl
// Run on a GPU machine:
//   ./check-procaddr [path to the real libcuda.so.1, default /usr/local/nvidia/lib64/libcuda.so.1]
//
// Compares our cuGetProcAddress resolution (client/procaddr.c over the generated table) with
// the real driver's. For every API name in our table, at every CUDA version the table names,
// each of those minus one, and 2000, 9000, 11000, 12000, 12080, 13000, with flags 0, 1 and 2,
// it calls the real cuGetProcAddress_v2 and checks that the status and the function agree with
// mps__procaddr_lookup: the real pointer must be what dlsym(real driver, our symbol's name)
// gives, which also accepts exported aliases of one function. It then asks the real driver for
// each exported variant symbol (cuMemAlloc_v2, cuLaunchKernel_ptsz, ...) by name, which our
// lookup refuses. Versions above the driver's own are skipped (the driver refuses them with
// CUDA_ERROR_INVALID_VALUE). Every mismatch is printed, then which CUresult the real driver
// returned with each query status (what our cuGetProcAddress must return), and last
// `procaddr: N checked, N mismatched`. Exits 0 when all agree, 1 on a mismatch, 2 when the
// driver cannot be loaded.

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "client/gen/symbols.h"
#include "client/procaddr.h"

typedef CUresult (*get_proc_address_fn)(const char *symbol, void **pfn, int cuda_version,
					 cuuint64_t flags, CUdriverProcAddressQueryResult *status);
typedef CUresult (*init_fn)(unsigned int flags);
typedef CUresult (*driver_version_fn)(int *version);

#define MAX_VERSIONS (2 * MPS_PROCADDR_NVARIANTS + 8)
#define NSTATUS 4		// the three query results, and "not set by the driver"
#define NRESULTS 1000		// CUresult values tallied below this

static void *real;
static get_proc_address_fn real_gpa;
static long checked, mismatched, skipped;
static long result_tally[NSTATUS][NRESULTS];

// Names what the real driver handed out: one of our exported names whose dlsym address it is,
// else what dladdr finds there.
static void describe(void *pfn, char *buf, size_t len)
{
	Dl_info info;

	if (!pfn) {
		snprintf(buf, len, "NULL");
		return;
	}
	for (int s = 0; s < MPS_NSYMS; s++) {
		if (dlsym(real, mps__sym_names[s]) == pfn) {
			snprintf(buf, len, "%s", mps__sym_names[s]);
			return;
		}
	}
	if (dladdr(pfn, &info) && info.dli_sname && info.dli_saddr == pfn)
		snprintf(buf, len, "%s (not one of our exports)", info.dli_sname);
	else if (dladdr(pfn, &info) && info.dli_sname)
		snprintf(buf, len, "%p (%s+%#lx, unexported)", pfn, info.dli_sname,
			 (unsigned long)((char *)pfn - (char *)info.dli_saddr));
	else
		snprintf(buf, len, "%p (unexported)", pfn);
}

static const char *status_name(int status)
{
	switch (status) {
	case CU_GET_PROC_ADDRESS_SUCCESS:
		return "SUCCESS";
	case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
		return "SYMBOL_NOT_FOUND";
	case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
		return "VERSION_NOT_SUFFICIENT";
	default:
		return "(not set)";
	}
}

static void check_one(const char *name, int version, int flags)
{
	CUdriverProcAddressQueryResult real_status = (CUdriverProcAddressQueryResult)-1;
	void *pfn = NULL;
	int our_status = -1;
	int ours = mps__procaddr_lookup(name, version, (uint64_t)flags, &our_status);
	CUresult r = real_gpa(name, &pfn, version, (cuuint64_t)flags, &real_status);
	int rs = (int)real_status;
	char got[256];
	int ok;

	checked++;
	if (rs < 0 || rs >= NSTATUS - 1)
		rs = NSTATUS - 1;
	if ((unsigned)r < NRESULTS)
		result_tally[rs][r]++;

	if (our_status == CU_GET_PROC_ADDRESS_SUCCESS) {
		ok = r == CUDA_SUCCESS && rs == CU_GET_PROC_ADDRESS_SUCCESS && pfn &&
		     pfn == dlsym(real, mps__sym_names[ours]);
	} else {
		// The driver may answer a failed query with an error and no status; then only
		// the absence of a function is compared.
		ok = !(r == CUDA_SUCCESS && pfn) &&
		     (rs == our_status || rs == NSTATUS - 1);
	}
	if (ok)
		return;
	mismatched++;
	describe(pfn, got, sizeof(got));
	printf("mismatch: %s@%d flags %d: real CUresult %d status %s -> %s; ours status %s -> %s\n",
	       name, version, flags, (int)r, status_name(rs), got, status_name(our_status),
	       ours >= 0 ? mps__sym_names[ours] : "(none)");
}

static int compare_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

// The versions to try: every version in the table, each minus one, and a few fixed ones;
// sorted, without duplicates, none above the driver's own. Returns the count.
static int collect_versions(int *versions, int driver_version)
{
	static const int fixed[] = { 2000, 9000, 11000, 12000, 12080, 13000 };
	int n = 0, out = 0;

	for (int i = 0; i < MPS_PROCADDR_NVARIANTS && n + 2 <= MAX_VERSIONS; i++) {
		versions[n++] = mps__procaddr_variants[i].version;
		versions[n++] = mps__procaddr_variants[i].version - 1;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && n < MAX_VERSIONS; i++)
		versions[n++] = fixed[i];
	qsort(versions, (size_t)n, sizeof(int), compare_int);
	for (int i = 0; i < n; i++) {
		if (out > 0 && versions[out - 1] == versions[i])
			continue;
		if (versions[i] > driver_version) {
			skipped++;
			continue;
		}
		versions[out++] = versions[i];
	}
	return out;
}

static int is_api_name(const char *name)
{
	int status;

	mps__procaddr_lookup(name, 1 << 30, 0, &status);
	return status != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/local/nvidia/lib64/libcuda.so.1";
	static int versions[MAX_VERSIONS];
	int driver_version = 0, nversions;
	init_fn real_init;
	driver_version_fn real_driver_version;
	CUresult r;

	real = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!real) {
		fprintf(stderr, "check-procaddr: %s\n", dlerror());
		return 2;
	}
	real_gpa = (get_proc_address_fn)dlsym(real, "cuGetProcAddress_v2");
	real_init = (init_fn)dlsym(real, "cuInit");
	real_driver_version = (driver_version_fn)dlsym(real, "cuDriverGetVersion");
	if (!real_gpa || !real_init || !real_driver_version) {
		fprintf(stderr, "check-procaddr: %s lacks cuGetProcAddress_v2, cuInit or cuDriverGetVersion\n", path);
		return 2;
	}
	r = real_init(0);
	if (r != CUDA_SUCCESS)
		printf("check-procaddr: cuInit returned %d; going on\n", (int)r);
	r = real_driver_version(&driver_version);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "check-procaddr: cuDriverGetVersion returned %d\n", (int)r);
		return 2;
	}
	nversions = collect_versions(versions, driver_version);
	printf("check-procaddr: %s, driver version %d, table from CUDA %d: %d names x %d versions x 3 flags\n",
	       path, driver_version, MPS_SYMBOLS_CUDA_VERSION, MPS_PROCADDR_NNAMES, nversions);

	for (int n = 0; n < MPS_PROCADDR_NNAMES; n++)
		for (int v = 0; v < nversions; v++)
			for (int flags = 0; flags <= 2; flags++)
				check_one(mps__procaddr_names[n].name, versions[v], flags);

	// Exported variant symbols asked for by their own name.
	for (int s = 0; s < MPS_NSYMS; s++) {
		if (is_api_name(mps__sym_names[s]))
			continue;
		for (int flags = 0; flags <= 2; flags++) {
			if (12000 <= driver_version)
				check_one(mps__sym_names[s], 12000, flags);
			check_one(mps__sym_names[s], driver_version, flags);
		}
	}

	for (int s = 0; s < NSTATUS; s++)
		for (int c = 0; c < NRESULTS; c++)
			if (result_tally[s][c])
				printf("check-procaddr: real status %s came with CUresult %d (%ld times)\n",
				       status_name(s == NSTATUS - 1 ? -1 : s), c, result_tally[s][c]);
	if (skipped)
		printf("check-procaddr: %ld versions above the driver's %d skipped\n", skipped, driver_version);
	printf("procaddr: %ld checked, %ld mismatched\n", checked, mismatched);
	return mismatched ? 1 : 0;
}
