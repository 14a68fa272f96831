// SPDX-License-Identifier: MIT
/*
 * A client's virtual address reservations and the mappings of physical
 * allocations into them (cuMemAddressReserve, cuMemMap): two sorted arrays
 * the VMM ops (ops_vmm.c) consult before they call the driver, so a client
 * maps only into its own reservations, unmaps only whole mappings of its
 * own, and everything it left mapped or reserved is undone when it goes.
 * Each reservation is also a range of the client's memory account
 * (MPS_MEM_VA), which is what lets copies and kernels' memsets reach the
 * memory mapped there. Pure bookkeeping, no driver calls; owned by the
 * thread serving the client.
 */
#ifndef MPS_SERVER_VMM_H
#define MPS_SERVER_VMM_H

#include <stddef.h>
#include <stdint.h>

struct mps_vres {
	uint64_t base, size;
};

struct mps_vmap {
	uint64_t base, size, offset;
	uint32_t alloc;     /* the physical allocation's handle */
	uint32_t pad;
};

struct mps_vmm {
	struct mps_vres *res;
	size_t nres, cres;
	struct mps_vmap *map;
	size_t nmap, cmap;
	uint64_t reserved;  /* bytes of address space held */
};

void mps_vmm_free(struct mps_vmm *v);

/* Records a reservation (0 or -ENOMEM) / forgets the one at base exactly. */
int mps_vmm_res_add(struct mps_vmm *v, uint64_t base, uint64_t size);
void mps_vmm_res_del(struct mps_vmm *v, uint64_t base);

/* The reservation that holds all of [addr, addr + size), or NULL. */
const struct mps_vres *mps_vmm_res_find(const struct mps_vmm *v, uint64_t addr, uint64_t size);

/* Records a mapping; -EEXIST if it overlaps one, -ENOMEM. */
int mps_vmm_map_add(struct mps_vmm *v, const struct mps_vmap *m);

/* The mapping that holds addr, or NULL. */
const struct mps_vmap *mps_vmm_map_find(const struct mps_vmm *v, uint64_t addr);

/* The index of the first of the whole, adjacent mappings that exactly
 * cover [addr, addr + size), and their count in *n; -1 if they do not. */
long mps_vmm_map_span(const struct mps_vmm *v, uint64_t addr, uint64_t size, size_t *n);

/* Whether any mapping lies in [addr, addr + size). */
int mps_vmm_map_any(const struct mps_vmm *v, uint64_t addr, uint64_t size);

/* Forgets n mappings from index i. */
void mps_vmm_map_del(struct mps_vmm *v, size_t i, size_t n);

#endif
