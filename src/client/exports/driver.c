// SPDX-License-Identifier: MIT
//
// Private tables served with the real driver's own functions, in this
// process. Three tables NVIDIA's libraries ask for take none of the
// program's handles and start no GPU work, so the driver can answer them
// in the client as well as anywhere:
//
//   1734dc26-800d-4745-8726-c0f1e7dd8bca (cuBLASLt, on its fp16, bf16 and
//     fp8 paths): [4] hands out two byte maps, one entry per TPC, [13] frees
//     them;
//   69a28e9f-2449-8b47-b030-c5da330ea4e9 (NVML, from nvmlInit): [19], [21],
//     [24], [25];
//   da9151d3-3ae6-cc41-a5c0-4f26d533e328 (NVRTC and nvJitLink): [1] starts
//     a job for an input (bitcode or PTX) and options, [3] gives its output
//     (PTX or a cubin) or CUDA_ERROR_NOT_FOUND, [4] takes the output the
//     caller then made itself, [6] frees an output, [2] ends the job — as a
//     cache of compiler outputs would.
//
// docs/EXPORT-TABLES.md has what each slot is seen doing. The first time one
// of these tables is wanted, the client library opens the real driver
// (common/driver_path.h, as pass-through mode does), initialises it with
// cuInit — which makes no context and takes no GPU memory, but costs time —
// and asks it for its own tables. Each slot a library is seen calling is
// then a forwarder (exports/driver_fwd.S) that jumps to the driver's
// function with the caller's arguments untouched, or for 1734dc26 a
// function that calls it; every other slot is a stub (client/exports/etbl.h). The
// driver stays loaded for the life of the process.
//
// Except 1734dc26 [4]: the driver makes the maps for the current context's
// device, and the driver in this process has no context, so [4] asks the
// server's driver first (server/ops_exports.c), which has it; the driver
// here only when the server cannot answer, and failing both [4] hands out
// zeroed maps and fails. 1734dc26 is always served: cuBLASLt calls through
// the table without checking that it got one.
//
// Without the real driver (none found, cuInit failing, a driver whose table
// lacks a slot), 69a28e9f and da9151d3 are refused, as they were before
// openmps served them, and NVML and NVRTC ran without them. The reason is
// logged once.
#include "client/exports/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/exports/etbl.h"
#include "client/exports/exports.h"
#include "common/driver_path.h"
#include "common/atomics.h"
#include "common/log.h"

#pragma GCC diagnostic ignored "-Woverride-init"

/* Read by the forwarders; written once, by load(), before any table that
 * holds a forwarder is handed out. */
void *mps__drv_slots[MPS_DRV_SLOTS];

void mps__drv_fwd_69a28e9f_19(void);
void mps__drv_fwd_69a28e9f_21(void);
void mps__drv_fwd_69a28e9f_24(void);
void mps__drv_fwd_69a28e9f_25(void);
void mps__drv_fwd_da9151d3_1(void);
void mps__drv_fwd_da9151d3_2(void);
void mps__drv_fwd_da9151d3_3(void);
void mps__drv_fwd_da9151d3_4(void);
void mps__drv_fwd_da9151d3_6(void);

enum { REAL_1734DC26, REAL_69A28E9F, REAL_DA9151D3, NREAL };

/* The driver's slots each table is served with. */
static const struct {
	enum mps_etbl table;
	int n;
	int slot[5];
	int index[5];   /* into mps__drv_slots */
} wanted[NREAL] = {
	[REAL_1734DC26] = { MPS_ETBL_1734DC26, 2, { 4, 13 }, { MPS_DRV_1734DC26_4, MPS_DRV_1734DC26_13 } },
	[REAL_69A28E9F] = { MPS_ETBL_69A28E9F, 4, { 19, 21, 24, 25 },
			    { MPS_DRV_69A28E9F_19, MPS_DRV_69A28E9F_21, MPS_DRV_69A28E9F_24, MPS_DRV_69A28E9F_25 } },
	[REAL_DA9151D3] = { MPS_ETBL_DA9151D3, 5, { 1, 2, 3, 4, 6 },
			    { MPS_DRV_DA9151D3_1, MPS_DRV_DA9151D3_2, MPS_DRV_DA9151D3_3, MPS_DRV_DA9151D3_4,
			      MPS_DRV_DA9151D3_6 } },
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool real_ok[NREAL];
static char why[NREAL][640];    /* why a table cannot be served with the driver */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void unavailable(const char *fmt, const char *detail)
{
	for (int i = 0; i < NREAL; i++)
		snprintf(why[i], sizeof(why[i]), fmt, detail);
}

/* Takes the driver's table for wanted[i] if it has every slot we use. */
static void take_table(int i, CUresult (*get)(const void **, const CUuuid *))
{
	const void *const *t = NULL;
	int need = 0;
	size_t size;
	CUuuid id;
	CUresult r;

	memcpy(id.bytes, mps__etbl_entries[wanted[i].table].id, sizeof(id.bytes));
	r = get((const void **)&t, &id);
	if (r != CUDA_SUCCESS || !t) {
		snprintf(why[i], sizeof(why[i]), "the driver does not provide it (cuGetExportTable returned %d)", (int)r);
		return;
	}
	for (int k = 0; k < wanted[i].n; k++)
		if (wanted[i].slot[k] + 1 > need)
			need = wanted[i].slot[k] + 1;
	size = (size_t)(uintptr_t)t[0];
	if (size % sizeof(void *) || size / sizeof(void *) < (size_t)need || size > MPS_ETBL_MAX_SLOTS * sizeof(void *)) {
		snprintf(why[i], sizeof(why[i]), "the driver's table has a size of %zu bytes", size);
		return;
	}
	for (int k = 0; k < wanted[i].n; k++) {
		if (!t[wanted[i].slot[k]]) {
			snprintf(why[i], sizeof(why[i]), "slot %d of the driver's table is empty", wanted[i].slot[k]);
			return;
		}
	}
	for (int k = 0; k < wanted[i].n; k++)
		mps__drv_slots[wanted[i].index[k]] = (void *)t[wanted[i].slot[k]];
	real_ok[i] = true;
}

static void load(void)
{
	CUresult (*init)(unsigned int);
	CUresult (*get)(const void **, const CUuuid *);
	char err[512], path[512], code[32];
	double t0, ms;
	void *drv;
	CUresult r;

	drv = mps_driver_open(err, sizeof(err), path, sizeof(path));
	if (!drv) {
		unavailable("the real driver cannot be loaded in this process (%s)", err);
		return;
	}
	init = (CUresult(*)(unsigned int))dlsym(drv, "cuInit");
	get = (CUresult(*)(const void **, const CUuuid *))dlsym(drv, "cuGetExportTable");
	if (!init || !get) {
		unavailable("the driver %s lacks cuInit or cuGetExportTable", path);
		return;
	}
	t0 = now_ms();
	r = init(0);
	ms = now_ms() - t0;
	if (r != CUDA_SUCCESS) {
		snprintf(code, sizeof(code), "%d", (int)r);
		unavailable("cuInit of the real driver in this process returned %s", code);
		return;
	}
	for (int i = 0; i < NREAL; i++)
		take_table(i, get);
	mps_log_debug("openmps: the real driver %s is loaded in this process for its own export tables "
		      "(cuInit took %.1f ms): 1734dc26 %s, 69a28e9f %s, da9151d3 %s", path, ms,
		      real_ok[REAL_1734DC26] ? "yes" : "no", real_ok[REAL_69A28E9F] ? "yes" : "no",
		      real_ok[REAL_DA9151D3] ? "yes" : "no");
}

/* Logs once per table why it is not served with the driver, and what is
 * done instead. */
static void report(int i, const char *reason, const char *instead)
{
	static uint8_t warned[NREAL];
	char name[37];

	if (mps_xchg(&warned[i], 1))
		return;
	mps__etbl_name(wanted[i].table, name);
	mps_log_warn("openmps: export table %s: %s; %s", name, reason, instead);
}

// ---------------------------------------------------------------------------
// 1734dc26: cuBLASLt

typedef CUresult (*maps_fn)(uint8_t **, uint8_t **);
typedef CUresult (*free_maps_fn)(uint8_t *, uint8_t *);

/* Maps handed out that are ours to free (copies of the server's, or zeroed
 * ones), until [13] frees them. */
struct own_maps {
	uint8_t *a, *b;
	struct own_maps *next;
};
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_maps *own_list;

static CUresult keep_own(uint8_t *a, uint8_t *b)
{
	struct own_maps *o = malloc(sizeof(*o));

	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->a = a;
	o->b = b;
	pthread_mutex_lock(&own_lock);
	o->next = own_list;
	own_list = o;
	pthread_mutex_unlock(&own_lock);
	return CUDA_SUCCESS;
}

/* True, and forgets them, if a and b are maps of ours. */
static bool forget_own(const uint8_t *a, const uint8_t *b)
{
	struct own_maps **p, *o = NULL;

	pthread_mutex_lock(&own_lock);
	for (p = &own_list; *p; p = &(*p)->next) {
		if ((*p)->a == a && (*p)->b == b) {
			o = *p;
			*p = o->next;
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
	free(o);
	return o != NULL;
}

/* Two zeroed maps with an entry for each SM of the current device (at least
 * one per TPC, whatever the SMs per TPC). */
static CUresult zero_maps(uint8_t **a, uint8_t **b)
{
	int sms = 0;
	CUdevice dev;

	if (cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
	    cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS || sms <= 0)
		sms = 256;
	*a = calloc((size_t)sms, 1);
	*b = calloc((size_t)sms, 1);
	if (!*a || !*b || keep_own(*a, *b) != CUDA_SUCCESS) {
		free(*a);
		free(*b);
		*a = *b = NULL;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

// [4] (uint8_t **a, uint8_t **b): the driver mallocs two maps with an entry
// per TPC of the current context's device and returns 0. Asked first of the
// server's driver, which has that context; then of the driver in this
// process, which has none; failing both the caller still gets two zeroed
// maps, which [13] frees, with the server's error.
static CUresult tpc_maps(uint8_t **a, uint8_t **b)
{
	char reason[704];
	CUresult r, rs;

	if (!a || !b)
		return CUDA_ERROR_INVALID_VALUE;
	rs = mps__server_tpc_maps(a, b);
	if (rs == CUDA_SUCCESS) {
		if (keep_own(*a, *b) == CUDA_SUCCESS)
			return CUDA_SUCCESS;
		free(*a);
		free(*b);
		*a = *b = NULL;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_once(&load_once, load);
	if (real_ok[REAL_1734DC26]) {
		r = ((maps_fn)mps__drv_slots[MPS_DRV_1734DC26_4])(a, b);
		if (r == CUDA_SUCCESS)
			return r;
		snprintf(reason, sizeof(reason), "the server's driver returned %d, and the driver in this process %d",
			 (int)rs, (int)r);
	} else {
		snprintf(reason, sizeof(reason), "the server's driver returned %d, and %.600s", (int)rs,
			 why[REAL_1734DC26]);
	}
	report(REAL_1734DC26, reason, "slot 4 hands out zeroed maps and fails");
	if (zero_maps(a, b) != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return rs;
}

// [13] (uint8_t *a, uint8_t *b): frees what [4] handed out.
static CUresult free_tpc_maps(uint8_t *a, uint8_t *b)
{
	if (forget_own(a, b)) {
		free(a);
		free(b);
		return CUDA_SUCCESS;
	}
	pthread_once(&load_once, load);
	if (real_ok[REAL_1734DC26])
		return ((free_maps_fn)mps__drv_slots[MPS_DRV_1734DC26_13])(a, b);
	return CUDA_ERROR_INVALID_VALUE;
}

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_1734DC26)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_1734DC26, 1)

const void *const mps__etbl_1734dc26[20] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_1734DC26)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_1734DC26, 1)
	[0] = MPS_ETBL_SIZE(17),
	[4] = (const void *)tpc_maps,
	[13] = (const void *)free_tpc_maps,
};

// ---------------------------------------------------------------------------
// 69a28e9f: NVML

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_69A28E9F)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_69A28E9F, 1)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_69A28E9F, 2)
MPS_ETBL_DECADE(MPS_ETBL_STUB, MPS_ETBL_69A28E9F, 3)

static const void *const table_69a28e9f[40] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_69A28E9F)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_69A28E9F, 1)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_69A28E9F, 2)
	MPS_ETBL_DECADE(MPS_ETBL_STUB_SLOT, MPS_ETBL_69A28E9F, 3)
	[0] = MPS_ETBL_SIZE(34),
	[19] = (const void *)mps__drv_fwd_69a28e9f_19,
	[21] = (const void *)mps__drv_fwd_69a28e9f_21,
	[24] = (const void *)mps__drv_fwd_69a28e9f_24,
	[25] = (const void *)mps__drv_fwd_69a28e9f_25,
};

const void *const *mps__etbl_69a28e9f(void)
{
	pthread_once(&load_once, load);
	if (real_ok[REAL_69A28E9F])
		return table_69a28e9f;
	report(REAL_69A28E9F, why[REAL_69A28E9F], "it is refused, as it was before openmps served it");
	return NULL;
}

// ---------------------------------------------------------------------------
// da9151d3: NVRTC and nvJitLink

MPS_ETBL_1_9(MPS_ETBL_STUB, MPS_ETBL_DA9151D3)

static const void *const table_da9151d3[10] = {
	MPS_ETBL_1_9(MPS_ETBL_STUB_SLOT, MPS_ETBL_DA9151D3)
	[0] = MPS_ETBL_SIZE(7),
	[1] = (const void *)mps__drv_fwd_da9151d3_1,
	[2] = (const void *)mps__drv_fwd_da9151d3_2,
	[3] = (const void *)mps__drv_fwd_da9151d3_3,
	[4] = (const void *)mps__drv_fwd_da9151d3_4,
	[6] = (const void *)mps__drv_fwd_da9151d3_6,
};

const void *const *mps__etbl_da9151d3(void)
{
	pthread_once(&load_once, load);
	if (real_ok[REAL_DA9151D3])
		return table_da9151d3;
	report(REAL_DA9151D3, why[REAL_DA9151D3], "it is refused, as it was before openmps served it");
	return NULL;
}
