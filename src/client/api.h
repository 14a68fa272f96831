// SPDX-License-Identifier: MIT
/*
 * How each API file registers the driver functions it implements for server
 * mode: a table of (exported symbol, function) pairs, checked at compile time
 * against cuda.h's prototype of that symbol, so a wrong signature is a build
 * error rather than a corrupted call. dispatch.c merges the tables.
 */
#ifndef MPS_CLIENT_API_H
#define MPS_CLIENT_API_H

#include <cuda.h>

#include "client/gen/symbols.h"

struct mps_impl {
	int sym;      /* enum mps_sym; -1 ends a table */
	void *fn;
};

/* A build error unless fn has the type `ref` points to. */
#define MPS__CHECKED(ref, fn) \
	(void *)__builtin_choose_expr(__builtin_types_compatible_p(__typeof__(ref), __typeof__(&(fn))), (fn), (void)0)

/* fn implements the exported symbol sym, with sym's own prototype. sym is
 * the exported name (cuMemAlloc_v2, not the cuMemAlloc macro). */
#define MPS_IMPL(sym, fn) { MPS_SYM_##sym, MPS__CHECKED(&(sym), fn) }

/* fn implements symbol sym, whose prototype is that of proto (the _ptsz and
 * _ptds variants, which cuda.h declares only under another name). */
#define MPS_IMPL_AS(sym, proto, fn) { MPS_SYM_##sym, MPS__CHECKED(&(proto), fn) }

/* fn implements symbol sym, typed by a cudaTypedefs.h PFN type (for symbols
 * current headers do not declare at all). */
#define MPS_IMPL_PFN(sym, pfn, fn) { MPS_SYM_##sym, MPS__CHECKED((pfn)0, fn) }

#define MPS_IMPL_END { -1, NULL }

extern const struct mps_impl mps__device_api[], mps__context_api[], mps__memory_api[], mps__copy_api[],
	mps__module_api[], mps__funcattr_api[], mps__launch_api[], mps__stream_api[], mps__event_api[], mps__dispatch_api[],
	mps__forward_api[], mps__capture_api[], mps__graph_api[], mps__gnode_api[], mps__pool_api[], mps__vmm_api[],
	mps__peer_api[], mps__ipc_api[], mps__hostfn_api[], mps__hostreg_api[], mps__managed_api[],
	mps__link_api[], mps__array_api[], mps__texture_api[], mps__tensormap_api[], mps__occupancy_api[],
	mps__logs_api[];

#endif
