// SPDX-License-Identifier: MIT
/*
 * The server's account of each client's memory: every device allocation,
 * module global and pinned host region the client may name by address, kept
 * sorted so a copy's or memset's range can be checked against what the
 * client owns (a client must never reach another client's memory through the
 * server), and the bytes of device memory each client holds per device. This
 * is the one place device memory is counted, and so where a per-client limit
 * is enforced: mps_memacct_charge() refuses an allocation that would pass it.
 * Pinned host memory, which the server allocates and pins on a client's
 * behalf, is counted here too, against a per-client limit and against a
 * pool shared by all the server's clients, so that no client can pin the
 * host's memory away from the others (or from the server itself).
 * Owned by the client's worker thread: no locking, except the byte counters,
 * which others may read.
 */
#ifndef MPS_SERVER_MEMACCT_H
#define MPS_SERVER_MEMACCT_H

#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

enum mps_mem_kind {
	MPS_MEM_DEVICE = 1,  /* cuMemAlloc / cuMemAllocPitch: counted */
	MPS_MEM_GLOBAL,      /* a module global: belongs to the module */
	MPS_MEM_HOST,        /* pinned host memory, by its device address */
	MPS_MEM_VA,          /* an address reservation (vmm.h): its mappings are counted
			      * with their physical allocations, not here */
	MPS_MEM_IPC,         /* another client's allocation, opened by IPC handle (ipc.h) */
	MPS_MEM_IPC_DRIVER,  /* another process's, mapped by the driver */
	MPS_MEM_POOL_PTR,    /* another client's pool allocation, imported (ipc.h) */
	MPS_MEM_POOL_PTR_DRIVER, /* another process's, imported by the driver */
};

struct mps_mrange {
	uint64_t base;
	uint64_t size;       /* as the program sees it */
	uint64_t charged;    /* device bytes it holds against the limit (device memory) */
	uint32_t ctx;        /* the context handle it was allocated in */
	int16_t device;
	uint8_t kind;        /* enum mps_mem_kind */
	uint8_t pad;
};

/* Pinned host memory of all of a server's clients together. */
struct mps_hostpool {
	uint64_t used;    /* atomic */
	uint64_t limit;   /* 0: no limit */
};

struct mps_memacct {
	struct mps_mrange *r;
	size_t n, cap;
	uint64_t bytes[MPS_MAX_DEVICES];   /* device bytes held, read by others */
	uint64_t peak[MPS_MAX_DEVICES];    /* the most bytes ever held, read by others */
	uint64_t limit[MPS_MAX_DEVICES];   /* 0: no limit; atomic (changed while the client runs) */
	uint64_t host_bytes;               /* pinned host bytes held, read by others */
	uint64_t host_limit;               /* 0: no limit */
	struct mps_hostpool *pool;         /* NULL: none */
};

void mps_memacct_init(struct mps_memacct *m);
void mps_memacct_free(struct mps_memacct *m);

/* Reserves size bytes on device against the limit; 0 or -ENOMEM. Undo with
 * mps_memacct_uncharge() if the allocation then fails. */
int mps_memacct_charge(struct mps_memacct *m, int device, uint64_t size);
void mps_memacct_uncharge(struct mps_memacct *m, int device, uint64_t size);

/* Reserves size bytes of pinned host memory against the client's limit and
 * the pool's; 0 or -ENOMEM. Undo with mps_memacct_uncharge_host(). */
int mps_memacct_charge_host(struct mps_memacct *m, uint64_t size);
void mps_memacct_uncharge_host(struct mps_memacct *m, uint64_t size);

/* Turns the device's free and total bytes into what the client sees: under
 * a limit, the limit as the total and what is left of it (or less, if the
 * device itself is fuller) as free; without one, unchanged. */
void mps_memacct_view(const struct mps_memacct *m, int device, size_t *free_b, size_t *total_b);

/* Records a range (already charged if it is device memory). 0 or -errno. */
int mps_memacct_add(struct mps_memacct *m, uint64_t base, uint64_t size, int kind, int device, uint32_t ctx);

/* The same for device memory that holds more than the program sees (a
 * placed allocation's whole granules): charged bytes, already charged,
 * are what its removal gives back. */
int mps_memacct_add_charged(struct mps_memacct *m, uint64_t base, uint64_t size, uint64_t charged, int kind,
			    int device, uint32_t ctx);

/* Removes the range starting exactly at base of the given kind into *out
 * (device bytes are uncharged). 0 or -ENOENT. */
int mps_memacct_remove(struct mps_memacct *m, uint64_t base, int kind, struct mps_mrange *out);

/* The range containing addr, or NULL. */
const struct mps_mrange *mps_memacct_find(const struct mps_memacct *m, uint64_t addr);

/* 0 if [addr, addr + size) lies inside one of the client's ranges, else -EFAULT. */
int mps_memacct_check(const struct mps_memacct *m, uint64_t addr, uint64_t size);

#endif
