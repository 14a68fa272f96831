// SPDX-License-Identifier: MIT
//
// The private export tables (src/client/exports*.c), the integrity check
// (integrity.c) and context-local storage (cls.c), driven the way NVIDIA's
// libraries drive them: look a table up by UUID, call through its slots.
//
// The hooks the rest of the client library provides are faked here: two
// devices with fixed identities, a per-thread current context, a primary
// context per device, a module loader that records the image it got, a
// module of three functions with views, stream ids. The tables served with
// the real driver's functions meet fake_driver.c (built as
// fakedrv/libcuda.so.1 beside this test, found through OPENMPS_DRIVER), and,
// in a child process, no driver at all. The UUIDs below are written out
// independently of exports/lookup.c, in the byte order of their textual form.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fatbinary_section.h>

#include "client/exports/etbl.h"
#include "client/exports/exports.h"
#include "common/log.h"
#include "client/exports/integrity.h"
#include "../check.h"

// ---------------------------------------------------------------------------
// Fake hooks

static int fake_driver_version = 13000;
static int fake_ndevs = 2;
static int fake_identity_fails = -1; // ordinal whose identity lookup fails
static struct mps_integrity_device fake_devs[2] = {
	{ { 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	    0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f }, 0, 0x19, 0 },
	{ { 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
	    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf }, 1, 0x9b, 3 },
};
static _Thread_local CUcontext fake_current;
static const void *last_image;
static int primary_calls;

int mps__driver_version(void)
{
	return fake_driver_version;
}

int mps__device_count(void)
{
	return fake_ndevs;
}

int mps__device_identity(int ordinal, CUuuid *uuid, int *pci_domain, int *pci_bus,
			 int *pci_device)
{
	if (ordinal < 0 || ordinal >= fake_ndevs || ordinal == fake_identity_fails)
		return -19; // -ENODEV
	memcpy(uuid->bytes, fake_devs[ordinal].uuid, 16);
	*pci_domain = fake_devs[ordinal].pci_domain;
	*pci_bus = fake_devs[ordinal].pci_bus;
	*pci_device = fake_devs[ordinal].pci_device;
	return 0;
}

/* The client library's cuCtxGetId, which CONTEXT_IDENTITY[4] answers with. */
CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	*id = 0x1d00 + (unsigned long long)(uintptr_t)ctx;
	return CUDA_SUCCESS;
}

CUcontext mps__ctx_current(void)
{
	return fake_current;
}

CUresult mps__primary_ctx_get(CUcontext *pctx, CUdevice dev)
{
	primary_calls++;
	if (dev < 0 || dev >= fake_ndevs)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = (CUcontext)(uintptr_t)(0x1000 + dev);
	return CUDA_SUCCESS;
}

CUresult mps__module_load_image(CUmodule *out, const void *image)
{
	last_image = image;
	*out = (CUmodule)(uintptr_t)0x4d4f44;
	return CUDA_SUCCESS;
}

// A module of three functions, each with a view of 0x500 bytes whose word 1
// is recognisable.
#define FAKE_MODULE ((CUmodule)(uintptr_t)0x40d0)
#define FAKE_NFUNCS 3
static int fake_views_fail;
static uint64_t fake_view_mem[FAKE_NFUNCS][0x500 / 8];

CUresult mps__module_functions(CUmodule mod, CUfunction *fns, unsigned int max, unsigned int *count)
{
	if (mod != FAKE_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	for (unsigned int i = 0; i < max && i < FAKE_NFUNCS; i++)
		fns[i] = (CUfunction)(uintptr_t)(0xf000 + i);
	*count = FAKE_NFUNCS;
	return CUDA_SUCCESS;
}

void *mps__func_view(CUfunction f)
{
	uintptr_t i = (uintptr_t)f - 0xf000;

	if (fake_views_fail || i >= FAKE_NFUNCS)
		return NULL;
	fake_view_mem[i][1] = 0x5eed0000 + i;
	return fake_view_mem[i];
}

/* Stream ids: the handle's value plus 1000, the legacy stream's 1. */
CUresult cuStreamGetId(CUstream s, unsigned long long *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	if ((uintptr_t)s == 0xdead)
		return CUDA_ERROR_INVALID_HANDLE;
	*id = s ? 1000 + (unsigned long long)(uintptr_t)s : 1;
	return CUDA_SUCCESS;
}

/* 1734dc26 [4] as the server answers it: failing, or two maps of 70 bytes. */
static int fake_server_maps_ok;
static int fake_server_maps_calls;

CUresult mps__server_tpc_maps(uint8_t **a, uint8_t **b)
{
	fake_server_maps_calls++;
	if (!fake_server_maps_ok)
		return CUDA_ERROR_NOT_SUPPORTED;
	*a = malloc(70);
	*b = malloc(70);
	for (int i = 0; i < 70; i++) {
		(*a)[i] = (uint8_t)(0x40 + i);
		(*b)[i] = (uint8_t)(0x80 + i);
	}
	return CUDA_SUCCESS;
}

/* The error log (logs.c): the last message f8cff951 [1] gave it. */
static char logged_source[32], logged_msg[128];
static int logged_level = -1;

void mps__logs_vadd(const char *source, CUlogLevel level, const char *fmt, va_list ap)
{
	snprintf(logged_source, sizeof(logged_source), "%s", source ? source : "(null)");
	vsnprintf(logged_msg, sizeof(logged_msg), fmt, ap);
	logged_level = (int)level;
}

/* One device of 132 SMs, for the zeroed maps. */
CUresult cuCtxGetDevice(CUdevice *dev)
{
	*dev = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
	(void)dev;
	if (attr != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 132;
	return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Table access

static const CUuuid id_cudart = { { 0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4,
	(char)0xe7, 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd,
	(char)0x9d, (char)0xf9 } };
static const CUuuid id_hooks = { { (char)0xa0, (char)0x94, 0x79, (char)0x8c, 0x2e, 0x74,
	0x2e, 0x74, (char)0x93, (char)0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 } };
static const CUuuid id_tls = { { 0x42, (char)0xd8, 0x5a, (char)0x81, 0x23, (char)0xf6,
	(char)0xcb, 0x47, (char)0x82, (char)0x98, (char)0xf6, (char)0xe7, (char)0x8a, 0x3a,
	(char)0xec, (char)0xdc } };
static const CUuuid id_cls = { { (char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21,
	(char)0xdf, 0x11, (char)0xa8, (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8,
	(char)0x95, (char)0x93 } };
static const CUuuid id_checks = { { 0x26, 0x3e, (char)0x88, 0x60, 0x7c, (char)0xd2, 0x61,
	0x43, (char)0x92, (char)0xf6, (char)0xbb, (char)0xd5, 0x00, 0x6d, (char)0xfa,
	0x7e } };
static const CUuuid id_integrity = { { (char)0xd4, 0x08, 0x20, 0x55, (char)0xbd,
	(char)0xe6, 0x70, 0x4b, (char)0x8d, 0x34, (char)0xba, 0x12, 0x3c, 0x66, (char)0xe1,
	(char)0xf2 } };
static const CUuuid id_f8cf = { { (char)0xf8, (char)0xcf, (char)0xf9, 0x51, 0x21, 0x46,
	(char)0x8b, 0x4e, (char)0xb9, (char)0xe2, (char)0xfb, 0x46, (char)0x9e, 0x7c, 0x0d,
	(char)0xd9 } };
static const CUuuid id_tools_context = { { 0x21, 0x31, (char)0x8c, 0x60, (char)0x97, 0x14,
	0x32, 0x48, (char)0x8c, (char)0xa6, 0x41, (char)0xff, 0x73, 0x24, (char)0xc8,
	(char)0xf2 } };
static const CUuuid id_6e16 = { { 0x6e, 0x16, 0x3f, (char)0xbe, (char)0xb9, 0x58, 0x44,
	0x4d, (char)0x83, 0x5c, (char)0xe1, (char)0x82, (char)0xaf, (char)0xf1, (char)0x99,
	0x1e } };
static const CUuuid id_1734 = { { 0x17, 0x34, (char)0xdc, 0x26, (char)0x80, 0x0d, 0x47,
	0x45, (char)0x87, 0x26, (char)0xc0, (char)0xf1, (char)0xe7, (char)0xdd, (char)0x8b,
	(char)0xca } };
static const CUuuid id_69a2 = { { 0x69, (char)0xa2, (char)0x8e, (char)0x9f, 0x24, 0x49,
	(char)0x8b, 0x47, (char)0xb0, 0x30, (char)0xc5, (char)0xda, 0x33, 0x0e, (char)0xa4,
	(char)0xe9 } };
static const CUuuid id_da91 = { { (char)0xda, (char)0x91, 0x51, (char)0xd3, 0x3a,
	(char)0xe6, (char)0xcc, 0x41, (char)0xa5, (char)0xc0, 0x4f, 0x26, (char)0xd5, 0x33,
	(char)0xe3, 0x28 } };

static const void *const *table(const CUuuid *id)
{
	const void *t = (const void *)1;
	CUresult rc = mps__export_table(&t, id, NULL);
	CHECK(rc == CUDA_SUCCESS && t, "table lookup failed: %d", (int)rc);
	return rc == CUDA_SUCCESS && t ? t : NULL;
}

static size_t slot0(const void *const *t)
{
	return (size_t)(uintptr_t)t[0];
}

typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t[2]);
typedef CUresult (*stub_fn)(void);

// Every table served: its id as text, its size in slot 0 as driver 580.159
// reports it (0: no size slot), and the slots implemented.
static const struct served {
	const CUuuid *id;
	enum mps_etbl index;
	const char *text;
	size_t size;
	int impl[6];
	int nimpl;
} served[] = {
	{ &id_cudart, MPS_ETBL_CUDART, "6bd5fb6c-5bf4-e74a-8987-d93912fd9df9", 104, { 1, 2, 6, 7, 8, 12 }, 6 },
	{ &id_hooks, MPS_ETBL_HOOKS, "a094798c-2e74-2e74-93f2-0800200c0a66", 56, { 1, 2, 3, 4, 5, 6 }, 6 },
	{ &id_tls, MPS_ETBL_TLS, "42d85a81-23f6-cb47-8298-f6e78a3aecdc", 24, { 1, 2 }, 2 },
	{ &id_cls, MPS_ETBL_CLS, "c693336e-1121-df11-a8c3-68f355d89593", 0, { 0, 1, 2 }, 3 },
	{ &id_checks, MPS_ETBL_CHECKS, "263e8860-7cd2-6143-92f6-bbd5006dfa7e", 120, { 2, 3 }, 2 },
	{ &id_integrity, MPS_ETBL_INTEGRITY, "d4082055-bde6-704b-8d34-ba123c66e1f2", 24, { 1, 2 }, 2 },
	{ &id_f8cf, MPS_ETBL_F8CFF951, "f8cff951-2146-8b4e-b9e2-fb469e7c0dd9", 24, { 1 }, 1 },
	{ &id_tools_context, MPS_ETBL_TOOLS_CONTEXT, "21318c60-9714-3248-8ca6-41ff7324c8f2", 744, { 4, 39, 51 }, 3 },
	{ &id_6e16, MPS_ETBL_6E163FBE, "6e163fbe-b958-444d-835c-e182aff1991e", 792, { 7 }, 1 },
	{ &id_1734, MPS_ETBL_1734DC26, "1734dc26-800d-4745-8726-c0f1e7dd8bca", 136, { 4, 13 }, 2 },
	{ &id_69a2, MPS_ETBL_69A28E9F, "69a28e9f-2449-8b47-b030-c5da330ea4e9", 272, { 19, 21, 24, 25 }, 4 },
	{ &id_da91, MPS_ETBL_DA9151D3, "da9151d3-3ae6-cc41-a5c0-4f26d533e328", 56, { 1, 2, 3, 4, 6 }, 5 },
};
#define NSERVED (int)(sizeof(served) / sizeof(served[0]))

static int implemented(const struct served *e, int slot)
{
	for (int i = 0; i < e->nimpl; i++)
		if (e->impl[i] == slot)
			return 1;
	return 0;
}

// The slots a table's size covers (the context-local storage table, which
// has no size slot, has three).
static int nslots(const struct served *e)
{
	return e->size ? (int)(e->size / sizeof(void *)) : 3;
}

static void test_lookup(void)
{
	const void *const *all[NSERVED];

	for (int i = 0; i < NSERVED; i++) {
		char name[37];

		all[i] = table(served[i].id);
		if (!all[i])
			continue;
		mps__etbl_name(served[i].index, name);
		CHECK(!strcmp(name, served[i].text), "table %s is named %s", served[i].text, name);
		for (int j = 0; j < i; j++)
			CHECK(all[i] != all[j], "tables %s and %s share an address", served[i].text, served[j].text);
		if (served[i].size)
			CHECK(slot0(all[i]) == served[i].size, "table %s: size %zu, want %zu", served[i].text,
			      slot0(all[i]), served[i].size);
		else // Context-local storage has no size slot: [0] is put itself.
			CHECK(all[i][0] && slot0(all[i]) > 4096, "%s: slot 0 is not a function", served[i].text);
		for (int s = 1; s < nslots(&served[i]); s++)
			CHECK(all[i][s] != NULL, "table %s: slot %d is NULL", served[i].text, s);
		// Stable: asking again gives the same table.
		CHECK(table(served[i].id) == all[i], "table %s moved", served[i].text);
	}
}

// What fn writes to stderr (free() it), or NULL.
static char *stderr_of(void (*fn)(void))
{
	char path[] = "/tmp/test_exports.XXXXXX";
	int fd = mkstemp(path), saved;
	struct stat st;
	char *buf = NULL;

	if (fd < 0)
		return NULL;
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (fstat(fd, &st) == 0 && (buf = calloc(1, (size_t)st.st_size + 1)) &&
	    pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

static int count_in(const char *text, const char *needle)
{
	int count = 0;

	if (!text)
		return -1;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		count++;
	return count;
}

// Counts occurrences of `needle` in what fn writes to stderr.
static int stderr_count(void (*fn)(void), const char *needle)
{
	char *text = stderr_of(fn);
	int count = count_in(text, needle);

	free(text);
	return count;
}

static const CUuuid id_unknown = { { (char)0xf8, (char)0xcf, (char)0xf9, 0x51, 0x21,
	0x46, (char)0x8b, 0x4e, 0, 0, 0, 0, 0, 0, 0, 0 } };
// CUDART_INTERFACE's UUID with the first three groups byte-swapped, as a
// Windows GUID struct would store it: must not be mistaken for the table.
static const CUuuid id_cudart_swapped = { { 0x6c, (char)0xfb, (char)0xd5, 0x6b,
	(char)0xf4, 0x5b, 0x4a, (char)0xe7, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12,
	(char)0xfd, (char)0x9d, (char)0xf9 } };

static void ask_unknown_three_times(void)
{
	const void *t;
	for (int i = 0; i < 3; i++) {
		t = (const void *)1;
		CHECK(mps__export_table(&t, &id_unknown, (const void *)ask_unknown_three_times) ==
			      CUDA_ERROR_INVALID_VALUE, "unknown UUID accepted");
		CHECK(t == NULL, "unknown UUID: *table not cleared");
	}
	t = (const void *)1;
	CHECK(mps__export_table(&t, &id_cudart_swapped, NULL) == CUDA_ERROR_INVALID_VALUE,
	      "byte-swapped UUID accepted");
	CHECK(t == NULL, "byte-swapped UUID: *table not cleared");
}

static void test_rejects(void)
{
	const void *t = NULL;
	CHECK(mps__export_table(NULL, &id_cudart, NULL) == CUDA_ERROR_INVALID_VALUE, "NULL table");
	CHECK(mps__export_table(&t, NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "NULL id");

	// The log level is warn: these lines are warnings. Each names the id and
	// the code that asked.
	int lines = stderr_count(ask_unknown_three_times, "is not provided");
	CHECK(lines == 2, "expected one warning per unknown UUID (2), got %d", lines);
	lines = stderr_count(ask_unknown_three_times, "is not provided");
	CHECK(lines == 0, "an unknown UUID was reported twice (%d)", lines);
}

// Every slot within a served table's size that is not implemented: a stub
// that returns CUDA_ERROR_NOT_SUPPORTED and logs once, naming the table,
// the slot and the caller.
static int nstubs, stub_failures;

static void call_every_stub_twice(void)
{
	for (int i = 0; i < NSERVED; i++) {
		const void *t0 = NULL;
		const void *const *t;

		if (mps__export_table(&t0, served[i].id, NULL) != CUDA_SUCCESS)
			continue;
		t = t0;
		for (int s = 1; s < nslots(&served[i]) + (served[i].size ? 0 : 1); s++) {
			if (implemented(&served[i], s))
				continue;
			for (int k = 0; k < 2; k++)
				if (((stub_fn)(uintptr_t)t[s])() != CUDA_ERROR_NOT_SUPPORTED)
					stub_failures++;
			nstubs++;
		}
	}
}

static void test_stubs(void)
{
	char *text;

	nstubs = stub_failures = 0;
	text = stderr_of(call_every_stub_twice);
	CHECK(stub_failures == 0, "%d stub calls did not return CUDA_ERROR_NOT_SUPPORTED", stub_failures);
	// 6 + 0 + 0 + 1 + 12 + 0 + 1 + 89 + 97 + 14 + 29 + 1 with the fake driver.
	CHECK(nstubs == 250, "%d stubs, expected 250", nstubs);
	CHECK(count_in(text, "is not implemented") == nstubs, "%d stubs logged %d lines (once each)", nstubs,
	      count_in(text, "is not implemented"));
	// A line names the table, the slot and the code that called.
	CHECK(count_in(text, "export table 1734dc26-800d-4745-8726-c0f1e7dd8bca slot 16, called from test_exports+0x") ==
		      1, "no line names 1734dc26[16] and its caller");
	free(text);
	CHECK(stderr_count(call_every_stub_twice, "is not implemented") == 0, "stubs logged again");
}

// f8cff951 [1]: cudart's messages into the error log, (source, level,
// format, va_list, va_list); level 0 an error, any other a warning.
typedef CUresult (*log_slot)(const char *, uint64_t, const char *, va_list, va_list);

static CUresult slot_log(log_slot fn, const char *source, uint64_t level, const char *fmt, ...)
{
	va_list ap, copy;
	CUresult r;

	va_start(ap, fmt);
	va_copy(copy, ap);
	r = fn(source, level, fmt, ap, copy);
	va_end(copy);
	va_end(ap);
	return r;
}

static void test_f8cf_log(void)
{
	const void *const *t = table(&id_f8cf);
	log_slot fn = (log_slot)(uintptr_t)t[1];

	CHECK(slot_log(fn, "CUDART", 0, "kernel \"%s\" twice, %d", "k", 2) == CUDA_SUCCESS, "slot 1 failed");
	CHECK(!strcmp(logged_source, "CUDART") && !strcmp(logged_msg, "kernel \"k\" twice, 2") &&
		      logged_level == CU_LOG_LEVEL_ERROR, "logged [%s] %d %s", logged_source, logged_level, logged_msg);
	CHECK(slot_log(fn, "CUDA", 1, "%s", "a warning") == CUDA_SUCCESS, "slot 1 failed");
	CHECK(logged_level == CU_LOG_LEVEL_WARNING && !strcmp(logged_msg, "a warning"), "logged %d %s", logged_level,
	      logged_msg);
	CHECK(slot_log(fn, "CUDA", 7, "x") == CUDA_SUCCESS && logged_level == CU_LOG_LEVEL_WARNING,
	      "level 7 logged as %d", logged_level);
}

// ---------------------------------------------------------------------------
// Integrity check

static const uint64_t want_v0[2] = { 0x3341181c03cb675cull, 0x8ed383aa1f4cd1e8ull };
static const uint64_t want_v1[2] = { 0x1841181c03cb675cull, 0x8ed383aa1f4cd1e8ull };

static void expected_digest(uint32_t version, uint64_t secs, uint64_t out[2])
{
	const void *const *cudart = table(&id_cudart);
	const void *const *integ = table(&id_integrity);
	struct mps_integrity_record rec = {
		.driver_version = (uint32_t)fake_driver_version,
		.version = version,
		.pid = (uint32_t)getpid(),
		.thread = (uint32_t)(uintptr_t)pthread_self(),
		.cudart_table = (uint64_t)(uintptr_t)cudart,
		.integrity_table = (uint64_t)(uintptr_t)integ,
		.check_fn = (uint64_t)(uintptr_t)integ[1],
		.unix_seconds = secs,
	};
	mps__integrity_digest(&rec, fake_devs, fake_ndevs, out);
}

struct thread_result {
	integrity_fn fn;
	uint64_t got[2];
	uint64_t want[2];
};

static void *check_on_thread(void *arg)
{
	struct thread_result *r = arg;
	r->fn(13002, 1795000000, r->got);
	expected_digest(13002, 1795000000, r->want);
	return NULL;
}

static int same(const uint64_t a[2], const uint64_t b[2])
{
	return a[0] == b[0] && a[1] == b[1];
}

static void test_integrity_constants(integrity_fn check)
{
	const uint32_t zero_versions[] = { 13000, 12080, 13010, 20, 0 };
	const uint32_t one_versions[] = { 13001, 12081, 11, 1 };
	uint64_t r[2];

	for (size_t i = 0; i < sizeof(zero_versions) / sizeof(zero_versions[0]); i++) {
		r[0] = r[1] = 0;
		CHECK(check(zero_versions[i], 1795000000, r) == CUDA_SUCCESS, "check failed");
		CHECK(same(r, want_v0), "version %u: %016llx %016llx", zero_versions[i],
		      (unsigned long long)r[0], (unsigned long long)r[1]);
	}
	for (size_t i = 0; i < sizeof(one_versions) / sizeof(one_versions[0]); i++) {
		r[0] = r[1] = 0;
		CHECK(check(one_versions[i], 1795000000, r) == CUDA_SUCCESS, "check failed");
		CHECK(same(r, want_v1), "version %u: %016llx %016llx", one_versions[i],
		      (unsigned long long)r[0], (unsigned long long)r[1]);
	}
}

static void test_integrity_hmac(integrity_fn check)
{
	uint64_t a[2], b[2], want[2];

	// Known answer from the independent Python implementation
	// (tools/md2_vectors.py, INTEGRITY_CASE).
	struct mps_integrity_record rec = {
		.driver_version = 13000, .version = 13002, .pid = 4242, .thread = 0x9abcdef0,
		.cudart_table = 0x00007f1234560040ull, .integrity_table = 0x00007f12345600c0ull,
		.check_fn = 0x00007f1234001230ull, .unix_seconds = 1795000000,
	};
	const uint64_t known[2] = { 0xf92371c47fb21ad8ull, 0x9a9208001f881cbaull };
	mps__integrity_digest(&rec, fake_devs, 2, a);
	CHECK(same(a, known), "integrity known answer: %016llx %016llx",
	      (unsigned long long)a[0], (unsigned long long)a[1]);

	// Every field of the record and of each device moves the digest.
	struct mps_integrity_record r2;
	struct mps_integrity_device d2[2];
#define MUTATE_REC(field)                                                         \
	do {                                                                      \
		r2 = rec;                                                         \
		r2.field ^= 1;                                                    \
		mps__integrity_digest(&r2, fake_devs, 2, b);                      \
		CHECK(!same(a, b), "digest ignores record field " #field);        \
	} while (0)
	MUTATE_REC(driver_version);
	MUTATE_REC(version);
	MUTATE_REC(pid);
	MUTATE_REC(thread);
	MUTATE_REC(cudart_table);
	MUTATE_REC(integrity_table);
	MUTATE_REC(check_fn);
	MUTATE_REC(unix_seconds);
#undef MUTATE_REC
	// High bytes count too (the record is 64-bit wide where it should be).
	r2 = rec;
	r2.unix_seconds ^= 1ull << 63;
	mps__integrity_digest(&r2, fake_devs, 2, b);
	CHECK(!same(a, b), "digest ignores the top byte of unix_seconds");
	r2 = rec;
	r2.cudart_table ^= 1ull << 47;
	mps__integrity_digest(&r2, fake_devs, 2, b);
	CHECK(!same(a, b), "digest ignores high bits of the table address");

	for (int dev = 0; dev < 2; dev++) {
		for (int byte = 0; byte < 16; byte++) {
			memcpy(d2, fake_devs, sizeof(d2));
			d2[dev].uuid[byte] ^= 0x80;
			mps__integrity_digest(&rec, d2, 2, b);
			CHECK(!same(a, b), "digest ignores uuid byte %d of device %d", byte, dev);
		}
#define MUTATE_DEV(field)                                                         \
	do {                                                                      \
		memcpy(d2, fake_devs, sizeof(d2));                                \
		d2[dev].field ^= 1;                                               \
		mps__integrity_digest(&rec, d2, 2, b);                            \
		CHECK(!same(a, b), "digest ignores " #field " of device %d", dev); \
	} while (0)
		MUTATE_DEV(pci_domain);
		MUTATE_DEV(pci_bus);
		MUTATE_DEV(pci_device);
#undef MUTATE_DEV
	}
	mps__integrity_digest(&rec, fake_devs, 1, b);
	CHECK(!same(a, b), "digest ignores the device count");
	d2[0] = fake_devs[1];
	d2[1] = fake_devs[0];
	mps__integrity_digest(&rec, d2, 2, b);
	CHECK(!same(a, b), "digest ignores the device order");
	mps__integrity_digest(&rec, fake_devs, 2, b);
	CHECK(same(a, b), "digest is not deterministic");

	// Through the served slot: the digest over this process, this thread,
	// the served tables' addresses and the hooks' devices.
	CHECK(check(13002, 1795000000, a) == CUDA_SUCCESS, "check(13002) failed");
	expected_digest(13002, 1795000000, want);
	CHECK(same(a, want), "served check != digest over the served tables");
	CHECK(check(13002, 1795000000, b) == CUDA_SUCCESS && same(a, b),
	      "served check is not deterministic");
	CHECK(check(13003, 1795000000, b) == CUDA_SUCCESS && !same(a, b),
	      "served check ignores the version");
	CHECK(check(13002, 1795000001, b) == CUDA_SUCCESS && !same(a, b),
	      "served check ignores the time");
	fake_driver_version = 13010;
	CHECK(check(13002, 1795000000, b) == CUDA_SUCCESS && !same(a, b),
	      "served check ignores the driver version");
	fake_driver_version = 13000;
	fake_devs[1].pci_bus ^= 2;
	CHECK(check(13002, 1795000000, b) == CUDA_SUCCESS && !same(a, b),
	      "served check ignores the devices");
	fake_devs[1].pci_bus ^= 2;

	// Another thread gets its own answer, matching its own pthread_self().
	struct thread_result tr = { .fn = check };
	pthread_t t;
	pthread_create(&t, NULL, check_on_thread, &tr);
	pthread_join(t, NULL);
	CHECK(same(tr.got, tr.want), "check on another thread != its digest");
	CHECK(!same(tr.got, a), "check ignores the calling thread");

	// Errors leave the result alone.
	CHECK(check(13002, 1, NULL) == CUDA_ERROR_INVALID_VALUE, "NULL result accepted");
	b[0] = b[1] = 0x5555;
	fake_identity_fails = 1;
	CHECK(check(13002, 1795000000, b) == CUDA_ERROR_INVALID_DEVICE,
	      "identity failure not reported");
	CHECK(b[0] == 0x5555 && b[1] == 0x5555, "result written on error");
	fake_identity_fails = -1;
	fake_ndevs = -1;
	CHECK(check(13002, 1795000000, b) == CUDA_ERROR_NOT_INITIALIZED,
	      "device count failure not reported");
	fake_ndevs = 2;
	// Constant versions need no devices at all.
	fake_ndevs = -1;
	CHECK(check(13000, 1795000000, b) == CUDA_SUCCESS && same(b, want_v0),
	      "constant path consulted the devices");
	fake_ndevs = 2;
}

static void test_integrity(void)
{
	const void *const *t = table(&id_integrity);
	if (!t)
		return;
	typedef CUresult (*probe_fn)(int);
	CHECK(t[1] != NULL && t[2] != NULL && ((probe_fn)(uintptr_t)t[2])(1) == CUDA_SUCCESS, "INTEGRITY_CHECK slots");
	integrity_fn check = (integrity_fn)(uintptr_t)t[1];
	test_integrity_constants(check);
	test_integrity_hmac(check);
}

// ---------------------------------------------------------------------------
// CUDART_INTERFACE, TOOLS_RUNTIME_CALLBACK_HOOKS, CONTEXT_CHECKS

typedef CUresult (*module_fn)(CUmodule *, const void *);
typedef CUresult (*module_ext1_fn)(CUmodule *, const void *, void *, void *, unsigned);
typedef CUresult (*module_ext2_fn)(const void *, CUmodule *, void *, void *, unsigned);
typedef CUresult (*primary_fn)(CUcontext *, CUdevice);
typedef void (*slot7_fn)(size_t);
typedef CUresult (*void_fn)(void);
typedef void *(*scratch_fn)(void **, size_t *);
typedef CUresult (*ctx_check_fn)(CUcontext, uint32_t *, const void **);
typedef uint32_t (*u32_fn)(void);

static void test_cudart_interface(void)
{
	const void *const *t = table(&id_cudart);
	if (!t)
		return;
	static const unsigned long long fatbin[4] = { 0xba55ed50ull, 16, 0, 0 };
	__fatBinC_Wrapper_t wrapper = { (int)FATBINC_MAGIC, 1, fatbin, NULL };
	CUmodule mod = NULL;

	module_fn load = (module_fn)(uintptr_t)t[1];
	last_image = NULL;
	CHECK(load(&mod, &wrapper) == CUDA_SUCCESS, "[1] failed");
	CHECK(last_image == fatbin && mod == (CUmodule)(uintptr_t)0x4d4f44,
	      "[1] did not unwrap the fatbin");
	wrapper.version = 2;
	last_image = NULL;
	CHECK(load(&mod, &wrapper) == CUDA_SUCCESS && last_image == fatbin,
	      "[1] refused a version-2 wrapper");
	last_image = NULL;
	CHECK(load(&mod, fatbin) == CUDA_SUCCESS && last_image == fatbin,
	      "[1] did not pass an unwrapped image through");
	CHECK(load(NULL, &wrapper) == CUDA_ERROR_INVALID_VALUE, "[1] NULL module");
	CHECK(load(&mod, NULL) == CUDA_ERROR_INVALID_VALUE, "[1] NULL wrapper");
	wrapper.data = NULL;
	CHECK(load(&mod, &wrapper) == CUDA_ERROR_INVALID_IMAGE, "[1] wrapper without data");
	wrapper.data = fatbin;

	module_ext1_fn ext1 = (module_ext1_fn)(uintptr_t)t[6];
	last_image = NULL;
	CHECK(ext1(&mod, &wrapper, NULL, NULL, 0) == CUDA_SUCCESS && last_image == fatbin,
	      "[6] did not unwrap");
	CHECK(ext1(&mod, &wrapper, &mod, NULL, 0) == CUDA_ERROR_NOT_SUPPORTED, "[6] arg3");
	CHECK(ext1(&mod, &wrapper, NULL, &mod, 0) == CUDA_ERROR_NOT_SUPPORTED, "[6] arg4");
	CHECK(ext1(&mod, &wrapper, NULL, NULL, 1) == CUDA_ERROR_NOT_SUPPORTED, "[6] arg5");

	module_ext2_fn ext2 = (module_ext2_fn)(uintptr_t)t[8];
	last_image = NULL;
	CHECK(ext2(fatbin, &mod, NULL, NULL, 0) == CUDA_SUCCESS && last_image == fatbin,
	      "[8] did not load the header it was given");
	CHECK(ext2(fatbin, NULL, NULL, NULL, 0) == CUDA_ERROR_INVALID_VALUE, "[8] NULL module");
	CHECK(ext2(fatbin, &mod, NULL, NULL, 7) == CUDA_ERROR_NOT_SUPPORTED, "[8] arg5");

	primary_fn primary = (primary_fn)(uintptr_t)t[2];
	CUcontext ctx = NULL;
	primary_calls = 0;
	CHECK(primary(&ctx, 1) == CUDA_SUCCESS && ctx == (CUcontext)(uintptr_t)0x1001,
	      "[2] did not return the primary context");
	CHECK(primary(&ctx, 5) == CUDA_ERROR_INVALID_DEVICE, "[2] bad device");
	CHECK(primary(NULL, 0) == CUDA_ERROR_INVALID_VALUE, "[2] NULL pctx");
	CHECK(primary_calls == 2, "[2] called the hook %d times", primary_calls);

	((slot7_fn)(uintptr_t)t[7])(123);
	CHECK(((void_fn)(uintptr_t)t[12])() == CUDA_SUCCESS, "[12] failed");
}

static void test_hooks_and_checks(void)
{
	const void *const *h = table(&id_hooks);
	const void *const *c = table(&id_checks);
	const void *const *tls = table(&id_tls);
	if (!h || !c || !tls)
		return;

	void *p1 = NULL, *p2 = NULL, *again = NULL, *r1, *r2;
	size_t s1 = 0, s2 = 0, sagain = 0;
	r1 = ((scratch_fn)(uintptr_t)h[2])(&p1, &s1);
	r2 = ((scratch_fn)(uintptr_t)h[6])(&p2, &s2);
	CHECK(p1 && p2 && p1 != p2, "scratch buffers %p %p", p1, p2);
	CHECK(r1 == p1 && r2 == p2, "scratch buffers not returned too (%p %p)", r1, r2);
	CHECK(s1 == 1024 && s2 == 14, "scratch sizes %zu %zu", s1, s2);
	if (p1 && p2) {
		// Either reading of the size (bytes or 32-bit words) must fit;
		// under ASan an overrun here fails the test.
		memset(p1, 0xa5, s1 * 4);
		memset(p2, 0xa5, s2 * 4);
	}
	((scratch_fn)(uintptr_t)h[2])(&again, &sagain);
	CHECK(again == p1 && sagain == s1, "scratch buffer 1 not process-wide");
	for (int s = 1; s < 7; s++)
		if (s != 2 && s != 6)
			CHECK(h[s] != NULL, "TOOLS_RUNTIME_CALLBACK_HOOKS slot %d", s);
	{
		typedef CUresult (*tls_get_fn)(void **);
		typedef CUresult (*query_fn)(const void *, uint64_t *);
		void *out = &out;
		uint64_t q = 77;

		fake_current = (CUcontext)(uintptr_t)0x5150;
		CHECK(tls[1] && tls[2] && ((tls_get_fn)(uintptr_t)tls[2])(&out) == CUDA_SUCCESS &&
		      out == (void *)fake_current, "TOOLS_TLS[2] does not give the current context");
		fake_current = NULL;
		CHECK(((query_fn)(uintptr_t)h[4])(NULL, &q) == CUDA_SUCCESS && q == 0,
		      "TOOLS_RUNTIME_CALLBACK_HOOKS[4] does not report 0");
	}
	uint32_t out1 = 0xdeadbeef;
	const void *out2 = &out1;
	CHECK(((ctx_check_fn)(uintptr_t)c[2])(NULL, &out1, &out2) == CUDA_SUCCESS,
	      "CONTEXT_CHECKS[2] failed");
	CHECK(out1 == 0, "CONTEXT_CHECKS[2] out1 = %#x", out1);
	CHECK(((u32_fn)(uintptr_t)c[3])() == 0, "CONTEXT_CHECKS[3] nonzero");
}


// ---------------------------------------------------------------------------
// 21318c60: contexts and streams; 6e163fbe: a module's functions

typedef CUresult (*ctx_id_fn)(CUcontext, unsigned long long *);
typedef CUresult (*stream_object_fn)(CUcontext, CUstream, void **);
typedef CUresult (*stream_id_fn)(CUcontext, const void *, uint64_t *);

static void test_tools_context(void)
{
	const void *const *t = table(&id_tools_context);
	CUcontext ctx = (CUcontext)(uintptr_t)0xc7c7;
	unsigned long long id = 0;
	void *o0 = NULL, *o0b = NULL, *o1 = NULL, *o2 = NULL, *other = NULL;
	uint64_t v = 5;
	uint64_t w[3];

	if (!t)
		return;
	CHECK(((ctx_id_fn)(uintptr_t)t[4])((CUcontext)(uintptr_t)7, &id) == CUDA_SUCCESS && id == 0x1d07,
	      "[4] is not the context's id (%llx)", id);

	// One object per (context, stream), the same each time, beginning
	// {1, 0, context}; the ids are the streams' own.
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, NULL, &o0) == CUDA_SUCCESS && o0, "[51] stream 0");
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, NULL, &o0b) == CUDA_SUCCESS && o0b == o0,
	      "[51] gave another object for the same stream");
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, (CUstream)(uintptr_t)0x50, &o1) == CUDA_SUCCESS &&
		      o1 && o1 != o0, "[51] stream 0x50");
	CHECK(((stream_object_fn)(uintptr_t)t[51])((CUcontext)(uintptr_t)0xc8c8, NULL, &other) == CUDA_SUCCESS &&
		      other && other != o0, "[51] stream 0 of another context shares the object");
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, (CUstream)(uintptr_t)0xdead, &o2) == CUDA_SUCCESS,
	      "[51] stream 0xdead");
	memcpy(w, o1, sizeof(w));
	CHECK(w[0] == 1 && w[1] == 0 && w[2] == (uint64_t)(uintptr_t)ctx, "[51] object begins %llx %llx %llx",
	      (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2]);
	memset(o1, 0xa5, 512);   // a caller may use all of it (ASan checks)
	CHECK(((stream_id_fn)(uintptr_t)t[39])(ctx, o0, &v) == CUDA_SUCCESS && v == 1, "[39] stream 0: %llu",
	      (unsigned long long)v);
	CHECK(((stream_id_fn)(uintptr_t)t[39])(ctx, o1, &v) == CUDA_SUCCESS && v == 1000 + 0x50,
	      "[39] stream 0x50: %llu", (unsigned long long)v);
	CHECK(((stream_id_fn)(uintptr_t)t[39])(ctx, o2, &v) == CUDA_ERROR_INVALID_HANDLE,
	      "[39] of a stream cuStreamGetId refuses");
	CHECK(((stream_id_fn)(uintptr_t)t[39])(ctx, &v, &v) == CUDA_ERROR_INVALID_HANDLE,
	      "[39] took an object it never handed out");
	CHECK(((stream_id_fn)(uintptr_t)t[39])(ctx, o0, NULL) == CUDA_ERROR_INVALID_VALUE, "[39] NULL out");
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "[51] NULL out");
	CHECK(((stream_object_fn)(uintptr_t)t[51])(ctx, (CUstream)UINTPTR_MAX, &o2) == CUDA_ERROR_INVALID_HANDLE,
	      "[51] took an invalid stream");
}

typedef uint64_t (*module_functions_fn)(CUcontext, CUmodule, void (*)(void *, void *, uint64_t), void *, CUmodule,
					 void *);

struct seen {
	void *fn[8];
	uint64_t word1[8];
	int n;
};

static void on_function(void *user, void *fn, uint64_t word1)
{
	struct seen *s = user;

	if (s->n < 8) {
		s->fn[s->n] = fn;
		s->word1[s->n] = word1;
	}
	s->n++;
}

static void enumerate_nothing(void)
{
	const void *const *t = table(&id_6e16);
	struct seen s = { .n = 0 };

	if (!t)
		return;
	CHECK(((module_functions_fn)(uintptr_t)t[7])(NULL, (CUmodule)(uintptr_t)0x99, on_function, &s,
						     (CUmodule)(uintptr_t)0x98, NULL) == 0 && s.n == 0,
	      "[7] enumerated functions of no module");
	fake_views_fail = 1;
	CHECK(((module_functions_fn)(uintptr_t)t[7])(NULL, FAKE_MODULE, on_function, &s, FAKE_MODULE, NULL) == 0,
	      "[7] went on without views");
	fake_views_fail = 0;
}

static void test_module_functions(void)
{
	const void *const *t = table(&id_6e16);
	struct seen s = { .n = 0 };
	uint64_t n;
	int lines;

	if (!t)
		return;
	// callback(user, view, word 1 of the view) for each function, in order;
	// the count returned.
	n = ((module_functions_fn)(uintptr_t)t[7])(NULL, FAKE_MODULE, on_function, &s, FAKE_MODULE, NULL);
	CHECK(n == FAKE_NFUNCS && s.n == FAKE_NFUNCS, "[7] returned %llu after %d callbacks", (unsigned long long)n,
	      s.n);
	for (int i = 0; i < FAKE_NFUNCS && i < s.n; i++)
		CHECK(s.fn[i] == fake_view_mem[i] && s.word1[i] == 0x5eed0000u + (unsigned)i,
		      "[7] callback %d: %p, %llx", i, s.fn[i], (unsigned long long)s.word1[i]);
	// The module may come as the fifth argument only.
	s.n = 0;
	n = ((module_functions_fn)(uintptr_t)t[7])(NULL, (CUmodule)(uintptr_t)0x99, on_function, &s, FAKE_MODULE,
						   NULL);
	CHECK(n == FAKE_NFUNCS && s.n == FAKE_NFUNCS, "[7] with the module fifth: %llu", (unsigned long long)n);
	// A NULL callback is not called.
	CHECK(((module_functions_fn)(uintptr_t)t[7])(NULL, FAKE_MODULE, NULL, NULL, FAKE_MODULE, NULL) ==
		      FAKE_NFUNCS, "[7] without a callback");
	// Failing: nothing enumerated, 0 returned, the cause logged once.
	lines = stderr_count(enumerate_nothing, "slot 7:");
	CHECK(lines == 1, "[7] failures logged %d lines", lines);
}

// ---------------------------------------------------------------------------
// The tables served with the real driver's functions (exports/driver.c)

typedef CUresult (*maps_fn)(uint8_t **, uint8_t **);
typedef CUresult (*free_maps_fn)(uint8_t *, uint8_t *);
typedef uint64_t (*eight_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

struct fake_driver_record {
	int inits;
	int table;
	int slot;
	uint64_t arg[8];
	int maps_made, maps_freed;
};

static char fake_driver_path[PATH_MAX + 32];

static int find_fake_driver(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	snprintf(fake_driver_path, sizeof(fake_driver_path), "%s/fakedrv/libcuda.so.1", self);
	return access(fake_driver_path, R_OK);
}

static void check_forwarded(const CUuuid *id, int slot, int tag, uint64_t want_ret)
{
	const void *const *t = table(id);
	void *h = dlopen(fake_driver_path, RTLD_NOW | RTLD_NOLOAD);
	struct fake_driver_record *rec = h ? dlsym(h, "fake_driver_record") : NULL;
	uint64_t ret;

	CHECK(rec != NULL, "the fake driver is not loaded");
	if (!t || !rec)
		return;
	memset(rec->arg, 0, sizeof(rec->arg));
	ret = ((eight_fn)(uintptr_t)t[slot])(0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88);
	CHECK(ret == want_ret && rec->table == tag && rec->slot == slot, "slot %d of %x: returned %llx, reached %x[%d]",
	      slot, tag, (unsigned long long)ret, rec->table, rec->slot);
	for (int i = 0; i < 8; i++)
		CHECK(rec->arg[i] == 0x11u * (unsigned)(i + 1), "slot %d of %x: argument %d arrived as %llx", slot, tag,
		      i, (unsigned long long)rec->arg[i]);
	dlclose(h);
}

/* [4] with the driver and the server failing, twice. */
static void maps_failing_twice(void)
{
	const void *const *t = table(&id_1734);

	for (int k = 0; t && k < 2; k++) {
		uint8_t *a = NULL, *b = NULL;
		int ok = 1;

		CHECK(((maps_fn)(uintptr_t)t[4])(&a, &b) == CUDA_ERROR_NOT_SUPPORTED && a && b,
		      "[4] with the driver and the server failing");
		for (int i = 0; a && b && i < 132; i++)
			ok &= a[i] == 0 && b[i] == 0;
		CHECK(ok, "[4] fallback maps are not zeroed over 132 entries");
		CHECK(((free_maps_fn)(uintptr_t)t[13])(a, b) == CUDA_SUCCESS, "[13] of zeroed maps");
	}
}

static void test_driver_tables(void)
{
	const void *const *t = table(&id_1734);
	void *h = dlopen(fake_driver_path, RTLD_NOW | RTLD_NOLOAD);
	struct fake_driver_record *rec = h ? dlsym(h, "fake_driver_record") : NULL;
	uint8_t *a = NULL, *b = NULL;
	int ok = 1;

	CHECK(rec && rec->inits == 1, "the real driver was initialised %d times", rec ? rec->inits : -1);
	if (!t || !rec)
		return;
	// Every register and stack argument reaches the driver's function, and
	// its whole 64-bit result comes back.
	check_forwarded(&id_69a2, 19, 0x69a2, 0);
	check_forwarded(&id_69a2, 21, 0x69a2, 0x7f0000001234ull);
	check_forwarded(&id_69a2, 24, 0x69a2, 0);
	check_forwarded(&id_69a2, 25, 0x69a2, 0);
	check_forwarded(&id_da91, 1, 0xda91, 0xfeedface00000001ull);
	check_forwarded(&id_da91, 2, 0xda91, 0);
	check_forwarded(&id_da91, 3, 0xda91, 0);
	check_forwarded(&id_da91, 4, 0xda91, 0);
	check_forwarded(&id_da91, 6, 0xda91, 0);

	// 1734dc26: the server failing, the driver's maps, and [13] gives them
	// back to it.
	CHECK(((maps_fn)(uintptr_t)t[4])(&a, &b) == CUDA_SUCCESS && a && b && rec->maps_made == 1, "[4] failed");
	for (int i = 0; a && b && i < 66; i++)
		ok &= a[i] == i % 8 && b[i] == i / 8;
	CHECK(ok, "[4] maps are not the driver's");
	CHECK(((free_maps_fn)(uintptr_t)t[13])(a, b) == CUDA_SUCCESS && rec->maps_freed == 1, "[13] failed");
	CHECK(((maps_fn)(uintptr_t)t[4])(NULL, &b) == CUDA_ERROR_INVALID_VALUE, "[4] NULL map");

	// The server answering: its maps, the driver not asked, and [13] frees
	// them here, not in the driver.
	fake_server_maps_ok = 1;
	fake_server_maps_calls = 0;
	a = b = NULL;
	CHECK(((maps_fn)(uintptr_t)t[4])(&a, &b) == CUDA_SUCCESS && a && b && fake_server_maps_calls == 1 &&
		      rec->maps_made == 1, "[4] did not take the server's maps first");
	ok = 1;
	for (int i = 0; a && b && i < 70; i++)
		ok &= a[i] == 0x40 + i && b[i] == 0x80 + i;
	CHECK(ok, "[4] maps are not the server's");
	CHECK(((free_maps_fn)(uintptr_t)t[13])(a, b) == CUDA_SUCCESS && rec->maps_freed == 1,
	      "[13] of the server's maps");
	// The server and the driver failing: zeroed maps and the server's error,
	// logged once, and [13] frees them here.
	fake_server_maps_ok = 0;
	setenv("FAKE_DRIVER_MAPS_FAIL", "1", 1);
	CHECK(stderr_count(maps_failing_twice, "the server's driver returned 801, and the driver in this process 201") ==
		      1, "the failing [4] was not logged once");
	unsetenv("FAKE_DRIVER_MAPS_FAIL");
	CHECK(rec->maps_freed == 1, "[13] gave zeroed maps to the driver");
	CHECK(rec->inits == 1, "the real driver was initialised %d times", rec->inits);
	dlclose(h);
}

// No real driver in the process: 69a28e9f and da9151d3 refused, 1734dc26
// still served, its [4] failing with zeroed maps. In a child, since the
// driver is looked for once per process.
static void no_driver_tables(void)
{
	const void *const *t = table(&id_1734);
	const void *r = (const void *)1;
	uint8_t *a = NULL, *b = NULL, x, y;

	CHECK(mps__export_table(&r, &id_69a2, NULL) == CUDA_ERROR_INVALID_VALUE && !r, "69a28e9f served");
	r = (const void *)1;
	CHECK(mps__export_table(&r, &id_da91, NULL) == CUDA_ERROR_INVALID_VALUE && !r, "da9151d3 served");
	if (!t)
		return;
	CHECK(((maps_fn)(uintptr_t)t[4])(&a, &b) == CUDA_ERROR_NOT_SUPPORTED && a && b, "[4] without a driver");
	for (int i = 0; a && b && i < 132; i++)
		CHECK(a[i] == 0 && b[i] == 0, "[4] map entry %d not zero", i);
	CHECK(((free_maps_fn)(uintptr_t)t[13])(a, b) == CUDA_SUCCESS, "[13] of zeroed maps");
	CHECK(((free_maps_fn)(uintptr_t)t[13])(&x, &y) == CUDA_ERROR_INVALID_VALUE, "[13] of maps it never made");
	// The server answering.
	fake_server_maps_ok = 1;
	a = b = NULL;
	CHECK(((maps_fn)(uintptr_t)t[4])(&a, &b) == CUDA_SUCCESS && a && b && a[69] == 0x40 + 69,
	      "[4] without a driver did not take the server's maps");
	CHECK(((free_maps_fn)(uintptr_t)t[13])(a, b) == CUDA_SUCCESS, "[13] of the server's maps");
	fake_server_maps_ok = 0;
}

static void test_without_driver(void)
{
	pid_t pid = fork();
	int status = 0, lines;

	if (pid == 0) {
		setenv("OPENMPS_DRIVER", "/nonexistent/libcuda.so.1", 1);
		lines = stderr_count(no_driver_tables, "the real driver cannot be loaded in this process");
		// Once for each table it concerns: 69a28e9f, da9151d3, 1734dc26.
		CHECK(lines == 3, "the missing driver was reported %d times", lines);
		_exit(check_failures() ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "without a driver: the child failed (status %#x)", status);
}

// ---------------------------------------------------------------------------
// Context-local storage

typedef void (*dtor_fn)(CUcontext, void *, void *);
typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, dtor_fn);
typedef CUresult (*cls_delete_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

static cls_put_fn cls_put;
static cls_delete_fn cls_delete;
static cls_get_fn cls_get;

#define CTX_A ((CUcontext)(uintptr_t)0xa000)
#define CTX_B ((CUcontext)(uintptr_t)0xb000)
#define CTX_C ((CUcontext)(uintptr_t)0xc000)

struct dtor_call {
	CUcontext ctx;
	void *key, *value;
};
static struct dtor_call dtor_log[16];
static int ndtor;

static void record_dtor(CUcontext ctx, void *key, void *value)
{
	if (ndtor < 16)
		dtor_log[ndtor] = (struct dtor_call){ ctx, key, value };
	ndtor++;
}

// A destructor that uses the store while being run from it.
static void reentrant_dtor(CUcontext ctx, void *key, void *value)
{
	void *v = NULL;
	record_dtor(ctx, key, value);
	CHECK(cls_get(&v, ctx, key) == CUDA_ERROR_INVALID_HANDLE,
	      "entry still visible while its destructor runs");
	CHECK(cls_put(CTX_C, key, value, NULL) == CUDA_SUCCESS, "put from a destructor");
	CHECK(cls_delete(CTX_C, key) == CUDA_SUCCESS, "delete from a destructor");
}

static void test_cls_semantics(void)
{
	static int k1, k2, k3;
	void *v;

	v = (void *)1;
	CHECK(cls_get(&v, CTX_A, &k1) == CUDA_ERROR_INVALID_HANDLE, "get of absent entry");
	CHECK(cls_get(NULL, CTX_A, &k1) == CUDA_ERROR_INVALID_VALUE, "get with NULL out");

	CHECK(cls_put(CTX_A, &k1, (void *)0x11, record_dtor) == CUDA_SUCCESS, "put");
	CHECK(cls_get(&v, CTX_A, &k1) == CUDA_SUCCESS && v == (void *)0x11, "get after put");
	// Same key, other context: separate entries.
	CHECK(cls_get(&v, CTX_B, &k1) == CUDA_ERROR_INVALID_HANDLE, "key leaked to CTX_B");
	CHECK(cls_put(CTX_B, &k1, (void *)0xb1, record_dtor) == CUDA_SUCCESS, "put B");
	CHECK(cls_get(&v, CTX_A, &k1) == CUDA_SUCCESS && v == (void *)0x11, "A clobbered");

	// Replacing keeps one entry and does not run the old destructor.
	ndtor = 0;
	CHECK(cls_put(CTX_A, &k1, (void *)0x12, record_dtor) == CUDA_SUCCESS, "replace");
	CHECK(cls_get(&v, CTX_A, &k1) == CUDA_SUCCESS && v == (void *)0x12, "get after replace");
	CHECK(ndtor == 0, "replace ran a destructor");

	// Delete drops without the destructor; deleting again is harmless.
	CHECK(cls_put(CTX_A, &k2, (void *)0x21, record_dtor) == CUDA_SUCCESS, "put k2");
	CHECK(cls_delete(CTX_A, &k2) == CUDA_SUCCESS, "delete");
	CHECK(cls_get(&v, CTX_A, &k2) == CUDA_ERROR_INVALID_HANDLE, "get after delete");
	CHECK(cls_delete(CTX_A, &k2) == CUDA_SUCCESS, "delete of absent entry");
	CHECK(ndtor == 0, "delete ran a destructor");

	// NULL ctx is the current context; none current is an error.
	fake_current = NULL;
	CHECK(cls_put(NULL, &k3, (void *)0x31, NULL) == CUDA_ERROR_INVALID_CONTEXT,
	      "put with no current context");
	CHECK(cls_get(&v, NULL, &k3) == CUDA_ERROR_INVALID_CONTEXT, "get, no current context");
	CHECK(cls_delete(NULL, &k3) == CUDA_ERROR_INVALID_CONTEXT, "delete, no current ctx");
	fake_current = CTX_A;
	CHECK(cls_put(NULL, &k3, (void *)0x31, record_dtor) == CUDA_SUCCESS, "put current");
	CHECK(cls_get(&v, CTX_A, &k3) == CUDA_SUCCESS && v == (void *)0x31,
	      "NULL ctx did not mean the current one");
	CHECK(cls_get(&v, NULL, &k1) == CUDA_SUCCESS && v == (void *)0x12, "get current");
	fake_current = NULL;

	// Destroying A runs A's two destructors once, newest first, and leaves B.
	ndtor = 0;
	mps__cls_context_destroyed(CTX_A);
	CHECK(ndtor == 2, "destroy ran %d destructors, want 2", ndtor);
	if (ndtor == 2) {
		CHECK(dtor_log[0].ctx == CTX_A && dtor_log[0].key == &k3 &&
			      dtor_log[0].value == (void *)0x31, "first destructor args");
		CHECK(dtor_log[1].ctx == CTX_A && dtor_log[1].key == &k1 &&
			      dtor_log[1].value == (void *)0x12, "second destructor args");
	}
	CHECK(cls_get(&v, CTX_A, &k1) == CUDA_ERROR_INVALID_HANDLE, "A survived destroy");
	CHECK(cls_get(&v, CTX_A, &k3) == CUDA_ERROR_INVALID_HANDLE, "A/k3 survived destroy");
	CHECK(cls_get(&v, CTX_B, &k1) == CUDA_SUCCESS && v == (void *)0xb1, "B lost");
	ndtor = 0;
	mps__cls_context_destroyed(CTX_A);
	mps__cls_context_destroyed(NULL);
	CHECK(ndtor == 0, "destructors ran twice");

	// A context can be used again after a reset; destructors may re-enter.
	CHECK(cls_put(CTX_A, &k1, (void *)0x13, reentrant_dtor) == CUDA_SUCCESS, "reuse A");
	CHECK(cls_put(CTX_A, &k2, (void *)0x23, NULL) == CUDA_SUCCESS, "put without dtor");
	ndtor = 0;
	mps__cls_context_destroyed(CTX_A);
	CHECK(ndtor == 1, "reentrant destroy ran %d destructors", ndtor);
	CHECK(cls_get(&v, CTX_A, &k2) == CUDA_ERROR_INVALID_HANDLE, "dtor-less entry survived");
	CHECK(cls_get(&v, CTX_C, &k1) == CUDA_ERROR_INVALID_HANDLE, "C entry left behind");

	ndtor = 0;
	mps__cls_context_destroyed(CTX_B);
	CHECK(ndtor == 1 && dtor_log[0].value == (void *)0xb1, "B destructor");
}

// Several threads use their own keys on one shared context and their own
// current contexts while another keeps resetting an unrelated context.
#define THREADS 8
#define ITERS 2000

static int thread_errors[THREADS];
static atomic_int stop_resetter;

static void *cls_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	static char keys[THREADS][4];
	CUcontext own = (CUcontext)(uintptr_t)(0x100000 + 0x1000 * id);

	fake_current = own;
	for (int i = 0; i < ITERS; i++) {
		void *want = (void *)(uintptr_t)((id << 20) | (i + 1));
		void *v = NULL;
		for (int k = 0; k < 4; k++) {
			if (cls_put(CTX_A, &keys[id][k], want, NULL) != CUDA_SUCCESS)
				thread_errors[id]++;
			if (cls_put(NULL, &keys[id][k], want, NULL) != CUDA_SUCCESS)
				thread_errors[id]++;
		}
		for (int k = 0; k < 4; k++) {
			if (cls_get(&v, CTX_A, &keys[id][k]) != CUDA_SUCCESS || v != want)
				thread_errors[id]++;
			if (cls_get(&v, own, &keys[id][k]) != CUDA_SUCCESS || v != want)
				thread_errors[id]++;
		}
		if (cls_delete(CTX_A, &keys[id][i & 3]) != CUDA_SUCCESS ||
		    cls_get(&v, CTX_A, &keys[id][i & 3]) != CUDA_ERROR_INVALID_HANDLE)
			thread_errors[id]++;
	}
	mps__cls_context_destroyed(own);
	return NULL;
}

static void *cls_resetter(void *arg)
{
	static int key;
	(void)arg;
	while (!atomic_load_explicit(&stop_resetter, memory_order_relaxed)) {
		cls_put(CTX_B, &key, &key, NULL);
		mps__cls_context_destroyed(CTX_B);
	}
	return NULL;
}

static void test_cls_threads(void)
{
	pthread_t w[THREADS], r;

	pthread_create(&r, NULL, cls_resetter, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&w[i], NULL, cls_worker, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(w[i], NULL);
	atomic_store_explicit(&stop_resetter, 1, memory_order_relaxed);
	pthread_join(r, NULL);
	for (int i = 0; i < THREADS; i++)
		CHECK(thread_errors[i] == 0, "thread %d saw %d wrong answers", i, thread_errors[i]);
	mps__cls_context_destroyed(CTX_A);
}

static void test_cls(void)
{
	const void *const *t = table(&id_cls);
	if (!t)
		return;
	cls_put = (cls_put_fn)(uintptr_t)t[0];
	cls_delete = (cls_delete_fn)(uintptr_t)t[1];
	cls_get = (cls_get_fn)(uintptr_t)t[2];
	CHECK(cls_put && cls_delete && cls_get, "CLS slots");
	if (!cls_put || !cls_delete || !cls_get)
		return;
	test_cls_semantics();
	test_cls_threads();
}

int main(void)
{
	// Warnings only: what the tables log must be at least that.
	setenv("OPENMPS_LOG_LEVEL", "warn", 1);
	mps_log_init("Client", 2);
	test_without_driver();
	if (find_fake_driver() != 0) {
		fprintf(stderr, "test_exports: %s is missing\n", fake_driver_path);
		return 1;
	}
	setenv("OPENMPS_DRIVER", fake_driver_path, 1);
	test_lookup();
	test_rejects();
	test_stubs();
	test_f8cf_log();
	test_integrity();
	test_cudart_interface();
	test_hooks_and_checks();
	test_tools_context();
	test_module_functions();
	test_driver_tables();
	test_cls();
	return check_finish("test_exports");
}
