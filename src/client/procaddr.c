// SPDX-License-Identifier: MIT
//
// cuGetProcAddress resolution over the generated table (client/gen/procaddr_table.c). The
// names are sorted, so a name is found by binary search; its few variants are in rising
// version order, and the answer is the newest variant the caller's CUDA version allows.
//
// The per-thread default stream flag follows the real driver: a function that has per-thread
// variants (cuLaunchKernel_ptsz from CUDA 7.0) resolves only to those under that flag, so asking
// for it below their first version gets VERSION_NOT_SUFFICIENT rather than the legacy variant;
// a function without any (cuMemAlloc) resolves to its legacy variant. The generator guarantees
// that once a function has a per-thread variant, every later variant has one too.

#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "client/gen/symbols.h"
#include "client/procaddr.h"

static int compare_name(const void *key, const void *elem)
{
	const struct mps_procaddr_name *entry = elem;

	return strcmp(key, entry->name);
}

static int has_ptds(const struct mps_procaddr_variant *v, unsigned count)
{
	for (unsigned i = 0; i < count; i++)
		if (v[i].ptds_sym != MPS_NO_SYM)
			return 1;
	return 0;
}

static int report(int *status, int value, int result)
{
	if (status)
		*status = value;
	return result;
}

int mps__procaddr_lookup(const char *name, int cuda_version, uint64_t flags, int *status)
{
	const struct mps_procaddr_name *entry;
	const struct mps_procaddr_variant *v;
	int per_thread;

	if (!name)
		return report(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, -1);
	entry = bsearch(name, mps__procaddr_names, MPS_PROCADDR_NNAMES,
			sizeof(mps__procaddr_names[0]), compare_name);
	if (!entry)
		return report(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, -1);

	v = &mps__procaddr_variants[entry->first];
	per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
		     has_ptds(v, entry->count);
	for (unsigned i = entry->count; i-- > 0;) {
		if (v[i].version > cuda_version)
			continue;
		if (!per_thread)
			return report(status, CU_GET_PROC_ADDRESS_SUCCESS, v[i].sym);
		if (v[i].ptds_sym != MPS_NO_SYM)
			return report(status, CU_GET_PROC_ADDRESS_SUCCESS, v[i].ptds_sym);
		break;
	}
	return report(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, -1);
}
