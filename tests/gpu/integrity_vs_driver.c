// SPDX-License-Identifier: MIT
//
// Build (from the repository root; no GPU needed to build, one to run):
//   cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Isrc -I/usr/local/cuda/include -o integrity_vs_driver tests/gpu/integrity_vs_driver.c src/client/exports/integrity.c src/client/exports/md2.c -ldl -lpthread
// Run:
//   ./integrity_vs_driver [/path/to/real/libcuda.so.1]   (default /usr/local/nvidia/lib64/libcuda.so.1)
//
// Checks openmps' integrity-check answer (src/client/exports/integrity.c) against
// the real driver's. It loads the real driver, asks it for its
// CUDART_INTERFACE and INTEGRITY_CHECK tables, calls the real check slot
// for a set of versions at the current time, and computes
// mps__integrity_check with the real tables' addresses, the real check
// function's address and the real devices (the hooks below answer from the
// real driver). One line per version, then `integrity: N/N match`; exits 1
// on any mismatch or if the driver cannot be used.
//
// Before that, a forked child (so that a crash there cannot change the
// verdict) prints `info:` lines about real-driver behaviour the client
// library imitates: table sizes, cuGetExportTable's codes for unknown and
// NULL arguments, and context-local-storage semantics.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "client/exports/integrity.h"

static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);    // v2 where present
static CUresult (*p_cuDeviceGetUuid_v1)(CUuuid *, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
static CUresult (*p_cuGetExportTable)(const void **, const CUuuid *);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxReset)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);

// ---------------------------------------------------------------------------
// The hooks integrity.c calls, answered by the real driver.

int mps__driver_version(void)
{
	int v = 0;
	return p_cuDriverGetVersion(&v) == CUDA_SUCCESS ? v : -1;
}

int mps__device_count(void)
{
	int n = 0;
	return p_cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : -1;
}

int mps__device_identity(int ordinal, CUuuid *uuid, int *pci_domain, int *pci_bus,
			 int *pci_device)
{
	CUdevice dev;
	if (p_cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
	    p_cuDeviceGetUuid(uuid, dev) != CUDA_SUCCESS ||
	    p_cuDeviceGetAttribute(pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) ||
	    p_cuDeviceGetAttribute(pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) ||
	    p_cuDeviceGetAttribute(pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev))
		return -5; // -EIO
	return 0;
}

// ---------------------------------------------------------------------------

#define UUID(...) { { __VA_ARGS__ } }
static const CUuuid id_cudart = UUID(0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4,
	(char)0xe7, 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd,
	(char)0x9d, (char)0xf9);
static const CUuuid id_hooks = UUID((char)0xa0, (char)0x94, 0x79, (char)0x8c, 0x2e, 0x74,
	0x2e, 0x74, (char)0x93, (char)0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66);
static const CUuuid id_tls = UUID(0x42, (char)0xd8, 0x5a, (char)0x81, 0x23, (char)0xf6,
	(char)0xcb, 0x47, (char)0x82, (char)0x98, (char)0xf6, (char)0xe7, (char)0x8a, 0x3a,
	(char)0xec, (char)0xdc);
static const CUuuid id_cls = UUID((char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21,
	(char)0xdf, 0x11, (char)0xa8, (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8,
	(char)0x95, (char)0x93);
static const CUuuid id_checks = UUID(0x26, 0x3e, (char)0x88, 0x60, 0x7c, (char)0xd2, 0x61,
	0x43, (char)0x92, (char)0xf6, (char)0xbb, (char)0xd5, 0x00, 0x6d, (char)0xfa, 0x7e);
static const CUuuid id_integrity = UUID((char)0xd4, 0x08, 0x20, 0x55, (char)0xbd,
	(char)0xe6, 0x70, 0x4b, (char)0x8d, 0x34, (char)0xba, 0x12, 0x3c, 0x66, (char)0xe1,
	(char)0xf2);
static const CUuuid id_bogus = UUID(0x01, 0x23, 0x45, 0x67, (char)0x89, (char)0xab,
	(char)0xcd, (char)0xef, 0x01, 0x23, 0x45, 0x67, (char)0x89, (char)0xab, (char)0xcd,
	(char)0xef);

typedef CUresult (*check_fn)(uint32_t, uint64_t, uint64_t[2]);

static void *sym(void *lib, const char *name, int required)
{
	void *p = dlsym(lib, name);
	if (!p && required) {
		fprintf(stderr, "integrity_vs_driver: %s not found in the driver\n", name);
		exit(1);
	}
	return p;
}

static void load_driver(const char *path)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "integrity_vs_driver: dlopen %s: %s\n", path, dlerror());
		exit(1);
	}
	*(void **)&p_cuInit = sym(lib, "cuInit", 1);
	*(void **)&p_cuDriverGetVersion = sym(lib, "cuDriverGetVersion", 1);
	*(void **)&p_cuDeviceGetCount = sym(lib, "cuDeviceGetCount", 1);
	*(void **)&p_cuDeviceGet = sym(lib, "cuDeviceGet", 1);
	*(void **)&p_cuDeviceGetUuid_v1 = sym(lib, "cuDeviceGetUuid", 1);
	*(void **)&p_cuDeviceGetUuid = sym(lib, "cuDeviceGetUuid_v2", 0);
	if (!p_cuDeviceGetUuid)
		p_cuDeviceGetUuid = p_cuDeviceGetUuid_v1;
	*(void **)&p_cuDeviceGetAttribute = sym(lib, "cuDeviceGetAttribute", 1);
	*(void **)&p_cuGetExportTable = sym(lib, "cuGetExportTable", 1);
	*(void **)&p_cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain", 1);
	*(void **)&p_cuDevicePrimaryCtxReset = sym(lib, "cuDevicePrimaryCtxReset_v2", 0);
	if (!p_cuDevicePrimaryCtxReset)
		*(void **)&p_cuDevicePrimaryCtxReset = sym(lib, "cuDevicePrimaryCtxReset", 1);
	*(void **)&p_cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent", 1);
}

static const void *const *real_table(const CUuuid *id)
{
	const void *t = NULL;
	CUresult rc = p_cuGetExportTable(&t, id);
	return rc == CUDA_SUCCESS ? t : NULL;
}

// ---------------------------------------------------------------------------
// Informational probes, run in a child process.

static struct {
	int calls;
	CUcontext ctx;
	void *key, *value;
} dtor_seen;

static void probe_dtor(CUcontext ctx, void *key, void *value)
{
	dtor_seen.calls++;
	dtor_seen.ctx = ctx;
	dtor_seen.key = key;
	dtor_seen.value = value;
}

typedef void (*dtor_fn)(CUcontext, void *, void *);
typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, dtor_fn);
typedef CUresult (*cls_delete_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

static void probe(void)
{
	const struct {
		const char *name;
		const CUuuid *id;
	} tables[] = {
		{ "CUDART_INTERFACE", &id_cudart }, { "TOOLS_RUNTIME_CALLBACK_HOOKS", &id_hooks },
		{ "TOOLS_TLS", &id_tls }, { "CONTEXT_LOCAL_STORAGE", &id_cls },
		{ "CONTEXT_CHECKS", &id_checks }, { "INTEGRITY_CHECK", &id_integrity },
	};
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		const void *const *t = real_table(tables[i].id);
		printf("info: %-28s first word %zu\n", tables[i].name,
		       t ? (size_t)(uintptr_t)t[0] : (size_t)0);
	}
	fflush(stdout);

	const void *t = (const void *)1;
	CUresult rc = p_cuGetExportTable(&t, &id_bogus);
	printf("info: cuGetExportTable(unknown id) = %d, *table = %p\n", (int)rc, t);
	fflush(stdout);
	rc = p_cuGetExportTable(&t, NULL);
	printf("info: cuGetExportTable(&t, NULL) = %d\n", (int)rc);
	fflush(stdout);
	rc = p_cuGetExportTable(NULL, &id_cudart);
	printf("info: cuGetExportTable(NULL, id) = %d\n", (int)rc);
	fflush(stdout);

	const void *const *cls = real_table(&id_cls);
	CUcontext ctx = NULL;
	if (!cls || p_cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
	    p_cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		printf("info: CLS probe skipped\n");
		return;
	}
	cls_put_fn put = (cls_put_fn)(uintptr_t)cls[0];
	cls_delete_fn del = (cls_delete_fn)(uintptr_t)cls[1];
	cls_get_fn get = (cls_get_fn)(uintptr_t)cls[2];
	static int k1, k2, absent;
	void *v = NULL;

	printf("info: CLS get absent = %d\n", (int)get(&v, ctx, &absent));
	printf("info: CLS put = %d\n", (int)put(ctx, &k1, (void *)0x11, probe_dtor));
	rc = get(&v, ctx, &k1);
	printf("info: CLS get = %d value %p\n", (int)rc, v);
	rc = put(ctx, &k1, (void *)0x12, probe_dtor);
	printf("info: CLS put again = %d, destructors run %d\n", (int)rc, dtor_seen.calls);
	rc = get(&v, ctx, &k1);
	printf("info: CLS get after put again = %d value %p\n", (int)rc, v);
	rc = del(ctx, &k1);
	printf("info: CLS delete = %d, destructors run %d\n", (int)rc, dtor_seen.calls);
	printf("info: CLS delete absent = %d\n", (int)del(ctx, &k1));
	rc = put(NULL, &k2, (void *)0x21, probe_dtor);
	printf("info: CLS put(NULL ctx) = %d\n", (int)rc);
	rc = get(&v, ctx, &k2);
	printf("info: CLS get(ctx) after put(NULL ctx) = %d value %p\n", (int)rc, v);
	fflush(stdout);
	dtor_seen.calls = 0;
	rc = p_cuDevicePrimaryCtxReset(0);
	printf("info: cuDevicePrimaryCtxReset = %d, destructors run %d (ctx %s, key %s, value %p)\n",
	       (int)rc, dtor_seen.calls, dtor_seen.ctx == ctx ? "same" : "other",
	       dtor_seen.key == &k2 ? "k2" : "other", dtor_seen.value);
	p_cuCtxSetCurrent(NULL);
	printf("info: CLS put with no current context = %d\n",
	       (int)put(NULL, &k1, (void *)0x31, NULL));
	fflush(stdout);
}

static void run_probe_child(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (p_cuInit(0) == CUDA_SUCCESS)
			probe();
		else
			printf("info: cuInit failed in the probe child\n");
		fflush(stdout);
		_exit(0);
	}
	int status = 0;
	if (pid > 0 && waitpid(pid, &status, 0) == pid && !WIFEXITED(status))
		printf("info: probe child died (signal %d)\n", WTERMSIG(status));
}

// ---------------------------------------------------------------------------

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/local/nvidia/lib64/libcuda.so.1";
	load_driver(path);
	run_probe_child(); // before cuInit here: CUDA does not survive fork

	CUresult rc = p_cuInit(0);
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "integrity_vs_driver: cuInit = %d\n", (int)rc);
		return 1;
	}
	const void *const *cudart = real_table(&id_cudart);
	const void *const *integ = real_table(&id_integrity);
	if (!cudart || !integ || !integ[1]) {
		fprintf(stderr, "integrity_vs_driver: the driver does not serve the tables\n");
		return 1;
	}
	printf("driver %d, %d device(s)\n", mps__driver_version(), mps__device_count());
	for (int i = 0; i < mps__device_count(); i++) {
		CUuuid a, b;
		CUdevice dev;
		if (p_cuDeviceGet(&dev, i) == CUDA_SUCCESS && p_cuDeviceGetUuid(&a, dev) == 0 &&
		    p_cuDeviceGetUuid_v1(&b, dev) == 0 && memcmp(&a, &b, sizeof(a)))
			printf("note: device %d: cuDeviceGetUuid and _v2 differ (MIG?); "
			       "hashing the _v2 UUID\n", i);
	}

	const uint32_t versions[] = { 13002, 12345, 13000, 12080, 13010, 11, 20, 12999 };
	const int n = (int)(sizeof(versions) / sizeof(versions[0]));
	check_fn real_check = (check_fn)(uintptr_t)integ[1];
	uint64_t now = (uint64_t)time(NULL);
	int matches = 0;

	for (int i = 0; i < n; i++) {
		uint64_t real[2] = { 0, 0 }, ours[2] = { 0, 0 };
		CUresult rr = real_check(versions[i], now, real);
		CUresult ro = mps__integrity_check(versions[i], now, ours, cudart, integ, integ[1]);
		int ok = rr == CUDA_SUCCESS && ro == CUDA_SUCCESS && real[0] == ours[0] &&
			 real[1] == ours[1];
		matches += ok;
		printf("version %5u: driver %016llx %016llx (%d)  openmps %016llx %016llx (%d)  %s\n",
		       versions[i], (unsigned long long)real[0], (unsigned long long)real[1],
		       (int)rr, (unsigned long long)ours[0], (unsigned long long)ours[1], (int)ro,
		       ok ? "match" : "MISMATCH");
	}
	printf("integrity: %d/%d match\n", matches, n);
	return matches == n ? 0 : 1;
}
