// SPDX-License-Identifier: MIT
//
// cuGetExportTable in server mode: finds the table for an id among those
// the exports_*.c files define (client/exports/etbl.h), and reports, once each, the
// ids we do not serve and the slots we do not implement — with the library
// that asked, so a log line says who needs what.
//
// Tables are looked up by the 16 bytes of their id, in the order of the
// textual form. A table whose entry has a `get` function may be unavailable
// in this process (it is served from the real driver, exports/driver.c);
// the answer is then the same as for an unknown id.
#include "client/exports/exports.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "client/exports/etbl.h"
#include "common/atomics.h"
#include "common/log.h"

static void format_id(const uint8_t id[16], char buf[37])
{
	snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8], id[9], id[10], id[11],
		 id[12], id[13], id[14], id[15]);
}

void mps__etbl_name(enum mps_etbl t, char buf[37])
{
	if ((unsigned)t >= MPS_ETBL_COUNT) {
		snprintf(buf, 37, "(table %d)", (int)t);
		return;
	}
	format_id(mps__etbl_entries[t].id, buf);
}

void mps__etbl_caller(const void *addr, char *buf, size_t len)
{
	Dl_info info;

	if (!addr) {
		snprintf(buf, len, "an unknown caller");
		return;
	}
	if (dladdr(addr, &info) && info.dli_fname && info.dli_fbase) {
		const char *base = strrchr(info.dli_fname, '/');

		snprintf(buf, len, "%s+%#lx", base ? base + 1 : info.dli_fname,
			 (unsigned long)((uintptr_t)addr - (uintptr_t)info.dli_fbase));
		return;
	}
	snprintf(buf, len, "%p", addr);
}

// ---------------------------------------------------------------------------
// Slots we do not implement: each logs once.

static uint8_t slot_warned[MPS_ETBL_COUNT][MPS_ETBL_MAX_SLOTS];

CUresult mps__etbl_unimplemented(enum mps_etbl t, int slot, const void *caller)
{
	char name[37], who[256];

	if ((unsigned)t < MPS_ETBL_COUNT && slot >= 0 && slot < MPS_ETBL_MAX_SLOTS &&
	    mps_xchg(&slot_warned[t][slot], 1))
		return CUDA_ERROR_NOT_SUPPORTED;
	mps__etbl_name(t, name);
	mps__etbl_caller(caller, who, sizeof(who));
	mps_log_warn("openmps: export table %s slot %d, called from %s, is not implemented; "
		     "it returns CUDA_ERROR_NOT_SUPPORTED", name, slot, who);
	return CUDA_ERROR_NOT_SUPPORTED;
}

// ---------------------------------------------------------------------------
// Lookup

const struct mps_etbl_entry mps__etbl_entries[MPS_ETBL_COUNT] = {
	[MPS_ETBL_CUDART] = { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
				0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, mps__etbl_cudart, NULL },
	[MPS_ETBL_HOOKS] = { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74,
			       0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, mps__etbl_hooks, NULL },
	[MPS_ETBL_TLS] = { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
			     0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, mps__etbl_tls, NULL },
	[MPS_ETBL_CLS] = { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
			     0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, mps__etbl_cls, NULL },
	[MPS_ETBL_CHECKS] = { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
				0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, mps__etbl_checks, NULL },
	[MPS_ETBL_INTEGRITY] = { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
				   0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, mps__etbl_integrity, NULL },
	[MPS_ETBL_F8CFF951] = { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
				  0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 }, mps__etbl_f8cff951, NULL },
	[MPS_ETBL_TOOLS_CONTEXT] = { { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
				       0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, mps__etbl_tools_context,
				     NULL },
	[MPS_ETBL_6E163FBE] = { { 0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
				  0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e }, mps__etbl_6e163fbe, NULL },
	[MPS_ETBL_1734DC26] = { { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
				  0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca }, mps__etbl_1734dc26, NULL },
	[MPS_ETBL_69A28E9F] = { { 0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47,
				  0xb0, 0x30, 0xc5, 0xda, 0x33, 0x0e, 0xa4, 0xe9 }, NULL, mps__etbl_69a28e9f },
	[MPS_ETBL_DA9151D3] = { { 0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41,
				  0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33, 0xe3, 0x28 }, NULL, mps__etbl_da9151d3 },
};

// Ids refused already, so a program that asks in a loop logs once.
#define MAX_REPORTED 32
static pthread_mutex_t reported_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t reported[MAX_REPORTED][16];
static int nreported;

static void report_refused(const uint8_t id[16], const void *caller)
{
	char name[37], who[256];
	int first = 1, full = 0;

	pthread_mutex_lock(&reported_lock);
	for (int i = 0; i < nreported; i++)
		if (!memcmp(reported[i], id, 16))
			first = 0;
	if (first) {
		if (nreported < MAX_REPORTED)
			memcpy(reported[nreported++], id, 16);
		else
			full = 1;
	}
	pthread_mutex_unlock(&reported_lock);
	if (!first || full)
		return;
	format_id(id, name);
	mps__etbl_caller(caller, who, sizeof(who));
	mps_log_warn("openmps: export table %s, asked for by %s, is not provided; "
		     "cuGetExportTable returns CUDA_ERROR_INVALID_VALUE", name, who);
}

CUresult mps__export_table(const void **table, const CUuuid *id, const void *caller)
{
	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MPS_ETBL_COUNT; i++) {
		const struct mps_etbl_entry *e = &mps__etbl_entries[i];
		const void *const *t;

		if (memcmp(e->id, id->bytes, 16))
			continue;
		t = e->get ? e->get() : e->table;
		*table = t;
		if (t)
			return CUDA_SUCCESS;
		// Known, but not servable here: the table's file said why.
		return CUDA_ERROR_INVALID_VALUE;
	}
	*table = NULL;
	// The real driver answers an unknown id with CUDA_ERROR_INVALID_VALUE
	// (measured on driver 580.159), and callers cope.
	report_refused((const uint8_t *)id->bytes, caller);
	return CUDA_ERROR_INVALID_VALUE;
}
