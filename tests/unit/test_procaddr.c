// SPDX-License-Identifier: MIT
//
// Unit test for cuGetProcAddress resolution (client/procaddr.c) and the generated tables
// (client/gen/symbols.c, procaddr_table.c). Known answers first: the symbol the real driver
// hands out for a name, version and stream flag; then structural checks over the whole table:
// sorted for bsearch, every index valid, variant names consistent with their API name, every
// per-thread twin named after its legacy symbol, and every exported symbol reachable.
// Prints every failure; exits 0 when there is none, else 1.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "client/gen/symbols.h"
#include "client/procaddr.h"
#include "../check.h"

#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM
#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define SUCCESS CU_GET_PROC_ADDRESS_SUCCESS
#define NOT_FOUND CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
#define TOO_OLD CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT

static const char *sym_name(int sym)
{
	if (sym < 0)
		return "(none)";
	if (sym >= MPS_NSYMS)
		return "(out of range)";
	return mps__sym_names[sym];
}

// Expects `name`@`version` with `flags` to resolve to the exported function `want`.
static void expect(const char *name, int version, uint64_t flags, const char *want)
{
	int status = -1;
	int got = mps__procaddr_lookup(name, version, flags, &status);

	CHECK(status == SUCCESS && got >= 0 && got < MPS_NSYMS && !strcmp(mps__sym_names[got], want),
	      "%s@%d flags %d: got %s status %d, want %s", name, version, (int)flags,
	      sym_name(got), status, want);
}

// Expects `name`@`version` with `flags` to fail with status `want`.
static void expect_status(const char *name, int version, uint64_t flags, int want)
{
	int status = -1;
	int got = mps__procaddr_lookup(name, version, flags, &status);

	CHECK(got == -1 && status == want, "%s@%d flags %d: got %s status %d, want status %d",
	      name ? name : "NULL", version, (int)flags, sym_name(got), status, want);
}

static void known_answers(void)
{
	expect("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
	expect("cuMemAlloc", 13000, LEGACY, "cuMemAlloc_v2");
	expect("cuMemAlloc", 3010, 0, "cuMemAlloc");
	expect("cuMemAlloc", 2000, 0, "cuMemAlloc");
	expect_status("cuMemAlloc", 1000, 0, TOO_OLD);
	expect_status("cuMemAlloc", 1999, PTDS, TOO_OLD);
	// No per-thread variant: the per-thread flag gets the legacy one.
	expect("cuMemAlloc", 13000, PTDS, "cuMemAlloc_v2");
	expect("cuMemAlloc", 2000, PTDS, "cuMemAlloc");

	expect("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
	expect("cuCtxCreate", 12050, 0, "cuCtxCreate_v4");
	expect("cuCtxCreate", 12040, 0, "cuCtxCreate_v3");
	expect("cuCtxCreate", 11040, 0, "cuCtxCreate_v3");
	expect("cuCtxCreate", 11030, 0, "cuCtxCreate_v2");
	expect("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
	expect("cuCtxCreate", 2000, 0, "cuCtxCreate");

	expect("cuLaunchKernel", 7000, PTDS, "cuLaunchKernel_ptsz");
	expect("cuLaunchKernel", 13000, PTDS, "cuLaunchKernel_ptsz");
	expect("cuLaunchKernel", 7000, LEGACY, "cuLaunchKernel");
	expect("cuLaunchKernel", 13000, 0, "cuLaunchKernel");
	expect("cuLaunchKernel", 4000, 0, "cuLaunchKernel");
	expect_status("cuLaunchKernel", 3020, 0, TOO_OLD);
	// The driver's per-thread search stays among the per-thread variants of a function that
	// has them: below the first one (CUDA 7.0) there is no answer, not the legacy function.
	expect_status("cuLaunchKernel", 4000, PTDS, TOO_OLD);
	expect_status("cuLaunchKernel", 6050, PTDS, TOO_OLD);

	expect("cuMemcpyHtoDAsync", 13000, PTDS, "cuMemcpyHtoDAsync_v2_ptsz");
	expect("cuMemcpyHtoDAsync", 13000, 0, "cuMemcpyHtoDAsync_v2");
	expect("cuMemcpyHtoDAsync", 3020, LEGACY, "cuMemcpyHtoDAsync_v2");
	expect("cuMemcpyHtoDAsync", 2000, LEGACY, "cuMemcpyHtoDAsync");
	expect_status("cuMemcpyHtoDAsync", 3020, PTDS, TOO_OLD);
	expect("cuMemcpyHtoD", 7000, PTDS, "cuMemcpyHtoD_v2_ptds");
	expect("cuMemcpy", 12000, PTDS, "cuMemcpy_ptds");
	expect("cuMemcpy", 12000, 0, "cuMemcpy");

	expect("cuStreamBeginCapture", 10000, PTDS, "cuStreamBeginCapture_ptsz");
	expect("cuStreamBeginCapture", 10010, PTDS, "cuStreamBeginCapture_v2_ptsz");
	expect("cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture");
	expect("cuStreamGetCaptureInfo", 12030, PTDS, "cuStreamGetCaptureInfo_v3_ptsz");
	expect("cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2");
	expect("cuMemcpyBatchAsync", 12080, PTDS, "cuMemcpyBatchAsync_ptsz");
	expect("cuMemcpyBatchAsync", 13000, PTDS, "cuMemcpyBatchAsync_v2_ptsz");
	// cuda.h keeps direct calls of cuStreamGetCtx on the first generation, but the lookup of
	// the name moves on to cuStreamGetCtx_v2 at 12.5.
	expect("cuStreamGetCtx", 12040, 0, "cuStreamGetCtx");
	expect("cuStreamGetCtx", 12050, 0, "cuStreamGetCtx_v2");
	expect("cuStreamGetCtx", 12050, PTDS, "cuStreamGetCtx_v2_ptsz");
	expect("cuStreamGetCtx", 9020, PTDS, "cuStreamGetCtx_ptsz");

	expect("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
	expect("cuGetProcAddress", 11080, 0, "cuGetProcAddress");
	expect("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	expect("cuGetProcAddress", 13000, PTDS, "cuGetProcAddress_v2");
	expect_status("cuGetProcAddress", 11020, 0, TOO_OLD);
	expect("cuGetExportTable", 3000, 0, "cuGetExportTable");
	// cuda.h maps cuGraphInstantiate to cuGraphInstantiateWithFlags; the lookup does not.
	expect("cuGraphInstantiate", 13000, 0, "cuGraphInstantiate_v2");
	expect("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate");
	expect("cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags");
	expect("cuTexRefSetAddress2D", 2020, 0, "cuTexRefSetAddress2D");
	expect("cuTexRefSetAddress2D", 3020, 0, "cuTexRefSetAddress2D_v2");
	expect("cuTexRefSetAddress2D", 4010, 0, "cuTexRefSetAddress2D_v3");
	expect("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
	expect("cuDeviceGetUuid", 9020, 0, "cuDeviceGetUuid");
	expect("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
	expect("cuCtxSynchronize", 12090, 0, "cuCtxSynchronize");
	expect("cuProfilerStart", 4000, 0, "cuProfilerStart");
	expect("cuInit", 2000, 0, "cuInit");
	// The graphics interop functions, which the stub library lacks and the driver exports
	// (libnvcuvid looks them up by name): generations and per-thread twins as the driver's.
	expect("cuGLGetDevices", 6050, 0, "cuGLGetDevices_v2");
	expect("cuGLGetDevices", 4010, 0, "cuGLGetDevices");
	expect("cuGLCtxCreate", 3020, 0, "cuGLCtxCreate_v2");
	expect("cuGLMapBufferObject", 7000, PTDS, "cuGLMapBufferObject_v2_ptds");
	expect("cuGLMapBufferObjectAsync", 7000, PTDS, "cuGLMapBufferObjectAsync_v2_ptsz");
	expect("cuGLMapBufferObjectAsync", 3020, 0, "cuGLMapBufferObjectAsync_v2");
	expect("cuGraphicsGLRegisterBuffer", 3000, 0, "cuGraphicsGLRegisterBuffer");
	expect("cuVDPAUCtxCreate", 3020, 0, "cuVDPAUCtxCreate_v2");
	expect("cuEGLStreamConsumerConnect", 7000, 0, "cuEGLStreamConsumerConnect");

	expect_status("cuNoSuchFunction", 13000, 0, NOT_FOUND);
	expect_status("", 13000, 0, NOT_FOUND);
	expect_status(NULL, 13000, 0, NOT_FOUND);
	expect_status("cumemalloc", 13000, 0, NOT_FOUND);
	expect_status("cuMemAllo", 13000, 0, NOT_FOUND);
	expect_status("cuMemAllocc", 13000, 0, NOT_FOUND);
	// The driver resolves API names only, not the exported symbols of their variants.
	expect_status("cuMemAlloc_v2", 13000, 0, NOT_FOUND);
	expect_status("cuCtxCreate_v4", 13000, 0, NOT_FOUND);
	expect_status("cuLaunchKernel_ptsz", 13000, PTDS, NOT_FOUND);
	expect_status("cuGetProcAddress_v2", 13000, 0, NOT_FOUND);
	// Unknown name beats insufficient version.
	expect_status("cuNoSuchFunction", 1000, 0, NOT_FOUND);

	// status may be NULL.
	int sym = mps__procaddr_lookup("cuMemFree", 3020, 0, NULL);
	CHECK(!strcmp(sym_name(sym), "cuMemFree_v2"), "cuMemFree@3020 without status: %s", sym_name(sym));
	CHECK(mps__procaddr_lookup("cuMemFree", 1000, 0, NULL) == -1, "cuMemFree@1000 without status");
}

static int find_sym(const char *name)
{
	for (int i = 0; i < MPS_NSYMS; i++)
		if (!strcmp(mps__sym_names[i], name))
			return i;
	return -1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

// Does `name` end in _v<digits>, as the symbols of later generations do?
static int has_generation_suffix(const char *name)
{
	const char *p = strrchr(name, '_');

	if (!p || p[1] != 'v' || p[2] < '0' || p[2] > '9')
		return 0;
	for (p += 2; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

// Is `sym` the API `name` itself or one of its generations name_v2, name_v3, ...?
static int is_generation_of(const char *sym, const char *name)
{
	size_t n = strlen(name);

	if (strncmp(sym, name, n))
		return 0;
	if (sym[n] == '\0')
		return 1;
	return has_generation_suffix(sym + n) && strchr(sym + n + 1, '_') == NULL &&
	       atoi(sym + n + 2) >= 2;
}

static void check_sym_names(void)
{
	CHECK(MPS_NSYMS > 100 && MPS_NSYMS < MPS_NO_SYM, "MPS_NSYMS = %d", MPS_NSYMS);
	for (int i = 0; i < MPS_NSYMS; i++) {
		CHECK(mps__sym_names[i] && !strncmp(mps__sym_names[i], "cu", 2),
		      "mps__sym_names[%d] = %s", i, mps__sym_names[i] ? mps__sym_names[i] : "NULL");
		if (i > 0 && mps__sym_names[i] && mps__sym_names[i - 1])
			CHECK(strcmp(mps__sym_names[i - 1], mps__sym_names[i]) < 0,
			      "mps__sym_names not sorted at %d: %s, %s", i,
			      mps__sym_names[i - 1], mps__sym_names[i]);
	}
	CHECK(find_sym("cuGetProcAddress") == MPS_SYM_cuGetProcAddress, "MPS_SYM_cuGetProcAddress");
	CHECK(find_sym("cuGetExportTable") == MPS_SYM_cuGetExportTable, "MPS_SYM_cuGetExportTable");
	CHECK(find_sym("cuMemcpyHtoDAsync_v2_ptsz") == MPS_SYM_cuMemcpyHtoDAsync_v2_ptsz,
	      "MPS_SYM_cuMemcpyHtoDAsync_v2_ptsz");
}

static void check_table(void)
{
	static unsigned char reached[MPS_NSYMS];
	unsigned next = 0;

	for (int n = 0; n < MPS_PROCADDR_NNAMES; n++) {
		const struct mps_procaddr_name *e = &mps__procaddr_names[n];
		const struct mps_procaddr_variant *v = &mps__procaddr_variants[e->first];
		int seen_ptds = 0;

		if (n > 0)
			CHECK(strcmp(mps__procaddr_names[n - 1].name, e->name) < 0,
			      "names not sorted at %d: %s, %s", n, mps__procaddr_names[n - 1].name, e->name);
		CHECK(e->count >= 1 && e->first == next, "%s: variants [%u, +%u), expected to start at %u",
		      e->name, e->first, e->count, next);
		next = e->first + e->count;
		if (next > MPS_PROCADDR_NVARIANTS) {
			CHECK(0, "%s: variants run past the table", e->name);
			return;
		}
		for (unsigned i = 0; i < e->count; i++) {
			int status;

			if (v[i].sym >= MPS_NSYMS || (v[i].ptds_sym != MPS_NO_SYM && v[i].ptds_sym >= MPS_NSYMS)) {
				CHECK(0, "%s: variant %u has an invalid symbol index", e->name, i);
				continue;
			}
			const char *legacy = mps__sym_names[v[i].sym];

			CHECK(v[i].version >= 1000 && (i == 0 || v[i].version > v[i - 1].version),
			      "%s: variant versions not rising at %u", e->name, i);
			CHECK(is_generation_of(legacy, e->name), "%s resolves to %s", e->name, legacy);
			CHECK(i == 0 || v[i].sym != v[i - 1].sym || v[i].ptds_sym != v[i - 1].ptds_sym,
			      "%s: variant %u repeats the one before", e->name, i);
			reached[v[i].sym] = 1;
			if (v[i].ptds_sym != MPS_NO_SYM) {
				const char *twin = mps__sym_names[v[i].ptds_sym];
				size_t len = strlen(legacy);

				CHECK(!strncmp(twin, legacy, len) &&
				      (!strcmp(twin + len, "_ptsz") || !strcmp(twin + len, "_ptds")),
				      "%s: %s is not the per-thread twin of %s", e->name, twin, legacy);
				reached[v[i].ptds_sym] = 1;
				seen_ptds = 1;
			} else {
				CHECK(!seen_ptds, "%s: per-thread variant missing after one existed", e->name);
			}
			// The lookup at each variant's version gives that variant, and just below it
			// the previous variant (or nothing before the first).
			int got = mps__procaddr_lookup(e->name, v[i].version, LEGACY, &status);
			CHECK(got == v[i].sym && status == SUCCESS, "%s@%d: got %s", e->name,
			      v[i].version, sym_name(got));
			got = mps__procaddr_lookup(e->name, v[i].version - 1, LEGACY, &status);
			if (i == 0)
				CHECK(got == -1 && status == TOO_OLD, "%s@%d: got %s", e->name,
				      v[i].version - 1, sym_name(got));
			else
				CHECK(got == v[i - 1].sym && status == SUCCESS, "%s@%d: got %s", e->name,
				      v[i].version - 1, sym_name(got));
		}
	}
	CHECK(next == MPS_PROCADDR_NVARIANTS, "variants used %u of %d", next, MPS_PROCADDR_NVARIANTS);

	for (int s = 0; s < MPS_NSYMS; s++) {
		const char *name = mps__sym_names[s];
		int per_thread = ends_with(name, "_ptsz") || ends_with(name, "_ptds");

		CHECK(reached[s], "exported %s%s is not reachable through cuGetProcAddress", name,
		      per_thread ? " (per-thread)" : "");
		// The exported symbol of a later generation or a per-thread twin is not itself a
		// name the lookup resolves.
		if (per_thread || has_generation_suffix(name))
			CHECK(mps__procaddr_lookup(name, 13000, 0, NULL) == -1,
			      "%s resolves as an API name", name);
	}
}

int main(void)
{
	known_answers();
	check_sym_names();
	check_table();
	printf("test_procaddr: %d names, %d variants, %d symbols\n", MPS_PROCADDR_NNAMES,
	       MPS_PROCADDR_NVARIANTS, MPS_NSYMS);
	return check_finish("test_procaddr");
}
