// SPDX-License-Identifier: MIT
/*
 * Where every driver call goes. Each exported function is a stub that jumps
 * through mps__dispatch[its index] (gen/stubs.S). At load time every entry
 * points at mps__resolve_entry, so the first call of any function — whichever
 * it is, from whichever thread — decides the mode once for the process:
 *
 *   pass-through  no openmps daemon answers on the pipe directory's socket:
 *                 every entry becomes the real driver's function, so the
 *                 program runs exactly as without openmps (cuGetExportTable
 *                 and cuGetProcAddress included);
 *   server        connected: entries become our implementations (the API
 *                 tables of the other files), or a handler that answers
 *                 CUDA_ERROR_NOT_SUPPORTED and logs the name once;
 *   failed        a daemon answered but refused us (or no driver exists at
 *                 all): every call returns that error, as NVIDIA's client
 *                 does when its MPS server refuses it.
 *
 * cuGetProcAddress and cuGetExportTable are ours in server and failed mode:
 * the first resolves names and versions with the generated table and hands
 * out our functions; the second serves our own private tables (exports/lookup.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "client/exports/exports.h"
#include "client/procaddr.h"
#include "common/atomics.h"
#include "common/driver_path.h"
#include "common/log.h"
#include "common/paths.h"

void mps__resolve_entry(void);
void mps__unsupported_entry(void);
void mps__failed_entry(void);
void mps__trace_entry(void);

/* Read by the stubs; written once, when the mode is decided. */
__attribute__((visibility("hidden"))) void *mps__dispatch[MPS_NSYMS] = {
	[0 ... MPS_NSYMS - 1] = (void *)mps__resolve_entry,
};

/* Lets the driver loader (and anyone) tell this library from a real driver. */
__attribute__((visibility("default"))) const char openmps_client_library[] = "openmps client library";

CUresult mps_failed_result = CUDA_ERROR_NO_DEVICE;

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static enum mps_mode mode;
/* Our implementation of each symbol in server and failed mode (NULL: none);
 * read by mps__trace_entry. */
__attribute__((visibility("hidden"))) void *mps__impl[MPS_NSYMS];
static void *real_driver;
static void *self_handle;
static uint8_t warned[(MPS_NSYMS + 7) / 8];

static const struct mps_impl *const api_tables[] = {
	mps__device_api, mps__context_api, mps__memory_api, mps__copy_api, mps__module_api, mps__funcattr_api,
	mps__launch_api, mps__stream_api, mps__event_api, mps__dispatch_api, mps__forward_api,
	mps__capture_api, mps__graph_api, mps__gnode_api, mps__pool_api, mps__vmm_api, mps__peer_api, mps__ipc_api,
	mps__hostfn_api, mps__hostreg_api, mps__managed_api, mps__link_api, mps__array_api,
	mps__texture_api, mps__tensormap_api, mps__occupancy_api, mps__logs_api,
};

static void set_entry(int i, void *fn)
{
	mps_store_release(&mps__dispatch[i], fn);
}

static void fill_server(void)
{
	for (size_t t = 0; t < sizeof(api_tables) / sizeof(api_tables[0]); t++)
		for (const struct mps_impl *e = api_tables[t]; e->sym >= 0; e++)
			mps__impl[e->sym] = e->fn;
	for (int i = 0; i < MPS_NSYMS; i++)
		set_entry(i, !mps__impl[i] ? (void *)mps__unsupported_entry :
			     mps__tracing() ? (void *)mps__trace_entry : mps__impl[i]);
}

static void fill_failed(void)
{
	for (const struct mps_impl *e = mps__dispatch_api; e->sym >= 0; e++)
		mps__impl[e->sym] = e->fn;
	for (const struct mps_impl *e = mps__device_api; e->sym >= 0; e++)
		if (e->sym == MPS_SYM_cuGetErrorName || e->sym == MPS_SYM_cuGetErrorString)
			mps__impl[e->sym] = e->fn;
	for (int i = 0; i < MPS_NSYMS; i++)
		set_entry(i, mps__impl[i] ? mps__impl[i] : (void *)mps__failed_entry);
}

/* The driver calls go to in pass-through mode, for the messages. */
static char pass_path[512];

static int fill_passthrough(void)
{
	char err[512], path[512];

	real_driver = mps_driver_open(err, sizeof(err), path, sizeof(path));
	if (!real_driver) {
		mps_log_warn("openmps: %s", err);
		return -ENOENT;
	}
	mps_log_debug("openmps: no daemon in %s; passing every call to the driver %s", mps_pipe_dir(), path);
	snprintf(pass_path, sizeof(pass_path), "%s", path);
	for (int i = 0; i < MPS_NSYMS; i++) {
		void *fn = dlsym(real_driver, mps__sym_names[i]);

		/* A symbol this driver lacks answers as an unsupported one. */
		set_entry(i, fn ? fn : (void *)mps__unsupported_entry);
	}
	return 0;
}

static void decide(void)
{
	const char *off = getenv("OPENMPS_PASSTHROUGH");
	CUresult refusal;
	int r;

	mps_log_init("Client", 2);
	if (off && *off && strcmp(off, "0")) {
		r = -ENOENT;
	} else {
		r = mps__connect(&refusal);
		/* A server that ended (a GPU fault) just as it was given us: the
		 * daemon starts a fresh one for the next try. */
		for (int tries = 0; tries < 3 && (r == -EPROTO || (r == -EACCES && refusal == CUDA_ERROR_MPS_SERVER_NOT_READY));
		     tries++) {
			usleep(50000u << tries);
			r = mps__connect(&refusal);
		}
		if (r == -EACCES && refusal == CUDA_ERROR_MPS_SERVER_NOT_READY)
			mps_log_warn("openmps: refused by the server: %s", mps__refusal_text());
	}
	if (r == 0 && mps__select_devices() < 0) {
		refusal = mps__ended_or(CUDA_ERROR_MPS_CONNECTION_FAILED);
		if (refusal == CUDA_ERROR_MPS_CONNECTION_FAILED)
			mps_log_warn("openmps: the server did not take this process's visible devices");
		r = -EPROTO;
	}
	if (r == 0 && mps__send_limits() < 0) {
		refusal = mps__ended_or(CUDA_ERROR_MPS_CONNECTION_FAILED);
		if (refusal == CUDA_ERROR_MPS_CONNECTION_FAILED)
			mps_log_warn("openmps: the server did not take this process's limits");
		r = -EPROTO;
	}
	if (r == 0) {
		mode = MPS_MODE_SERVER;
		fill_server();
		return;
	}
	if (r == -ENOENT || r == -ECONNREFUSED || r == -ENOTDIR || r == -ENAMETOOLONG) {
		if (fill_passthrough() == 0) {
			mode = MPS_MODE_PASSTHROUGH;
			return;
		}
		refusal = CUDA_ERROR_NO_DEVICE;
	}
	mps_failed_result = refusal;
	mode = MPS_MODE_FAILED;
	fill_failed();
}

enum mps_mode mps__mode(void)
{
	pthread_once(&mode_once, decide);
	return mode;
}

/* Which way this process's calls go, for tools and benchmarks that must
 * know whether they were served: 1 to the real driver (no daemon), 2 to
 * the openmps server, 3 nowhere (refused; every call fails). */
__attribute__((visibility("default"))) int openmps_client_mode(void);
int openmps_client_mode(void)
{
	return (int)mps__mode();
}

/* Called by mps__resolve_entry on a function's first call. */
__attribute__((visibility("hidden"))) void *mps__resolve(int idx);
void *mps__resolve(int idx)
{
	mps__mode();
	return mps_load_acquire(&mps__dispatch[idx]);
}

__attribute__((visibility("hidden"))) int mps__unsupported_call(int idx);
int mps__unsupported_call(int idx)
{
	if (idx >= 0 && idx < MPS_NSYMS) {
		mps__unsupported(mps__sym_names[idx]);
		if (mode == MPS_MODE_SERVER) {   /* else the driver lacks it: not ours to say */
			mps__logs_add("CUDA", CU_LOG_LEVEL_ERROR, "%s is not served by openmps", mps__sym_names[idx]);
			mps__logs_returning(idx, CUDA_ERROR_NOT_SUPPORTED);
		}
	}
	return CUDA_ERROR_NOT_SUPPORTED;
}

__attribute__((visibility("hidden"))) int mps__failed_call(int idx);
int mps__failed_call(int idx)
{
	(void)idx;
	return mps_failed_result;
}

void mps__unsupported(const char *name)
{
	int idx = -1;

	for (int i = 0; i < MPS_NSYMS; i++) {
		if (!strcmp(mps__sym_names[i], name)) {
			idx = i;
			break;
		}
	}
	if (idx >= 0) {
		uint8_t bit = (uint8_t)(1u << (idx % 8));

		if (mps_fetch_or(&warned[idx / 8], bit) & bit)
			return;
	}
	/* With no daemon the call went to a driver that lacks it (with
	 * OPENMPS_DRIVER, often the stand-in, which has only what a server
	 * asks): say so, not that openmps lacks it. */
	if (mode == MPS_MODE_PASSTHROUGH)
		mps_log_warn("openmps: no daemon in %s, so calls go to the driver %s, which has no %s; "
			     "it returns CUDA_ERROR_NOT_SUPPORTED", mps_pipe_dir(), pass_path, name);
	else
		mps_log_warn("openmps: %s is not supported yet; it returns CUDA_ERROR_NOT_SUPPORTED", name);
}

/* The exported stub for symbol idx: what cuGetProcAddress hands out for a
 * function we have no implementation of, so the program fails only if it
 * really calls it. */
static void *stub_of(int idx)
{
	if (!self_handle) {
		Dl_info info;

		if (dladdr((void *)mps__resolve_entry, &info) && info.dli_fname)
			self_handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
		if (!self_handle)
			return NULL;
	}
	return dlsym(self_handle, mps__sym_names[idx]);
}

static CUresult get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *status)
{
	int st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	int idx;

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	idx = mps__procaddr_lookup(symbol, version, flags, &st);
	if (status)
		*status = (CUdriverProcAddressQueryResult)st;
	if (idx < 0) {
		mps_log_debug("openmps: cuGetProcAddress(\"%s\", %d, %llu) finds nothing (status %d)", symbol,
			      version, (unsigned long long)flags, st);
		return CUDA_ERROR_NOT_FOUND;
	}
	/* Traced calls must come through the stub and the dispatch table. */
	*pfn = mps__impl[idx] && !mps__tracing() ? mps__impl[idx] : stub_of(idx);
	if (!*pfn)
		return CUDA_ERROR_NOT_FOUND;
	return CUDA_SUCCESS;
}

static CUresult get_proc_address_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	return get_proc_address(symbol, pfn, version, flags, status);
}

static CUresult get_proc_address_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return get_proc_address(symbol, pfn, version, flags, NULL);
}

static CUresult get_export_table(const void **table, const CUuuid *id)
{
	/* The exported stub jumped here: our return address is the caller's. */
	return mps__export_table(table, id, __builtin_return_address(0));
}

const struct mps_impl mps__dispatch_api[] = {
	MPS_IMPL(cuGetProcAddress_v2, get_proc_address_v2),
	MPS_IMPL_PFN(cuGetProcAddress, PFN_cuGetProcAddress_v11030, get_proc_address_v1),
	MPS_IMPL(cuGetExportTable, get_export_table),
	MPS_IMPL_END
};
