// SPDX-License-Identifier: MIT
/*
 * Traced calls. With OPENMPS_TRACE_ERRORS=1 or OPENMPS_CALL_STATS set,
 * every served function is entered through mps__trace_entry (resolve.S),
 * which calls mps__trace_enter before it and mps__trace_leave after it.
 * With neither set this costs nothing: the dispatch table points straight
 * at the functions.
 *
 * OPENMPS_TRACE_ERRORS=1: every driver call served by openmps that returns
 * something other than CUDA_SUCCESS is logged with its name and result —
 * the first few of each function as they happen, and a count of all of them
 * when the program exits — so that a program which fails under openmps but
 * not on the driver shows which call answered differently (libraries such
 * as cuBLAS turn a failed driver call into an error of their own).
 * Answers that are not failures (CUDA_ERROR_NOT_READY from a query) and the
 * lookups programs make to probe (cuGetProcAddress, cuGetExportTable) are
 * counted, not logged one by one.
 *
 * CUDA_LOG_FILE set: every served call the program makes that fails is
 * also logged in the driver's error log (logs.c) as the driver logs it,
 * "Returning N (NAME) from FUNCTION".
 *
 * Each thread knows the outermost driver call it is in (a function that
 * calls another through its exported name stays the caller), so that
 * callstats.c can charge the messages sent to the call the program made.
 */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/gen/symbols.h"
#include "common/atomics.h"
#include "common/log.h"

#define SHOWN_PER_FUNCTION 5

static uint32_t count[MPS_NSYMS];
static int32_t last[MPS_NSYMS];
static const char *last_name[MPS_NSYMS];   /* looked up when it happened: exit asks no one */
static int tracing = -1;   /* OPENMPS_TRACE_ERRORS; -1: not read yet */
static __thread int current = -1;   /* the outermost traced call of this thread */

static void summary(void)
{
	for (int i = 0; i < MPS_NSYMS; i++) {
		uint32_t n = mps_load_relaxed(&count[i]);
		int r = mps_load_relaxed(&last[i]);
		const char *name = mps_load_relaxed(&last_name[i]);

		if (n)
			mps_log_warn("openmps: %s returned an error %u time%s (the last %s, %d)", mps__sym_names[i], n,
				     n == 1 ? "" : "s", name ? name : "?", r);
	}
}

static bool errors_on(void)
{
	int t = mps_load_relaxed(&tracing);

	if (t < 0) {
		const char *v = getenv("OPENMPS_TRACE_ERRORS");
		int expect = -1;

		t = v && *v && strcmp(v, "0") ? 1 : 0;
		/* Whoever sets it first registers the summary. */
		if (mps_cas(&tracing, &expect, t) && t)
			atexit(summary);
		t = mps_load_relaxed(&tracing);
	}
	return t == 1;
}

bool mps__tracing(void)
{
	return errors_on() || mps__stats_on() || mps__logs_to_file();
}

int mps__trace_current(void)
{
	return current;
}

static bool quiet(int idx, CUresult r)
{
	return r == CUDA_ERROR_NOT_READY || idx == MPS_SYM_cuGetProcAddress || idx == MPS_SYM_cuGetProcAddress_v2 ||
	       idx == MPS_SYM_cuGetExportTable;
}

/* Functions that write their own error log lines (logs.c). */
static bool self_logged(int idx)
{
	return idx == MPS_SYM_cuLogsCurrent || idx == MPS_SYM_cuLogsDumpToFile || idx == MPS_SYM_cuLogsDumpToMemory ||
	       idx == MPS_SYM_cuLogsRegisterCallback || idx == MPS_SYM_cuLogsUnregisterCallback;
}

static void trace_error(int idx, int result)
{
	const char *name;
	uint32_t n;

	if (idx < 0 || idx >= MPS_NSYMS)
		return;
	name = mps__error_name((CUresult)result);
	n = mps_fetch_add(&count[idx], 1) + 1;
	mps_store_relaxed(&last[idx], result);
	mps_store_relaxed(&last_name[idx], name);
	if (quiet(idx, (CUresult)result) || n > SHOWN_PER_FUNCTION)
		return;
	mps_log_warn("openmps: %s returned %s (%d)%s", mps__sym_names[idx], name, result,
		     n == SHOWN_PER_FUNCTION ? "; further ones are counted and summed up at exit" : "");
}

/* Called by mps__trace_entry before a served function: returns the call
 * the thread was in (-1: none), which mps__trace_leave puts back. */
__attribute__((visibility("hidden"))) int mps__trace_enter(int idx);
int mps__trace_enter(int idx)
{
	int prev = current;

	if (prev < 0) {
		current = idx;
		mps__stats_call(idx);
	}
	return prev;
}

/* Called by mps__trace_entry after it, with its result, which it returns. */
__attribute__((visibility("hidden"))) int mps__trace_leave(int idx, int prev, int result);
int mps__trace_leave(int idx, int prev, int result)
{
	current = prev;
	if (result != CUDA_SUCCESS && errors_on())
		trace_error(idx, result);
	/* As the driver logs a failed call: the program's, not the ones it
	 * makes inside; cuLogs* say their own. */
	if (result != CUDA_SUCCESS && prev < 0 && !quiet(idx, (CUresult)result) && !self_logged(idx) &&
	    mps__logs_to_file())
		mps__logs_returning(idx, (CUresult)result);
	return result;
}
