// SPDX-License-Identifier: MIT
/*
 * The driver objects a client makes through forwarded functions — graphs,
 * their nodes, executable graphs, memory pools, physical allocations — and
 * JIT linker invocations (ops_link.c), kept
 * the same way for every kind: a small record behind a handle of the client's
 * table (handles.h), holding the driver's handle, the device it lives on and
 * the object whose life bounds its own (a node's graph, a child graph's
 * node). A reverse index finds the handle of a driver object the driver
 * hands back (the nodes of a graph, a node's child graph), so each object
 * has one handle however often it is returned.
 *
 * Deleting an object deletes what it owns, recursively (a graph its nodes,
 * a node its child graph and that graph's nodes). Objects the driver frees
 * with their owner ("borrowed": a child graph, a device's pool) are never
 * destroyed here. Owned by the thread serving the client: no locking.
 */
#ifndef MPS_SERVER_OBJECTS_H
#define MPS_SERVER_OBJECTS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

struct mps_client;

struct mps_sobj {
	void *real;          /* the driver's handle (allocation handles: the number) */
	uint32_t handle;
	uint32_t owner;      /* handle of the object whose life bounds this one; 0: none */
	uint8_t type;        /* MPS_H_* */
	bool borrowed;       /* the driver frees it with its owner */
	int16_t device;      /* where it was made */
	uint64_t bytes;      /* device memory charged for it (physical allocations) */
	uint64_t aux;        /* per kind: a graph's capture stream; for a pool,
			      * MPS_POOL_DEFAULT if it is the client's default,
			      * MPS_POOL_IMPORTED(_DRIVER) if it was imported */
	/* Physical allocations (ops_vmm.c): the client's references to the
	 * handle, the mappings of it, and driver references beyond the one
	 * every allocation holds (an import the driver answered with a
	 * handle it had given before). With no reference left the client can
	 * no longer name it; with no mapping either, it is freed. */
	uint32_t refs, maps, extra;
};

#define MPS_POOL_DEFAULT 1
#define MPS_POOL_IMPORTED 2          /* another client's, imported (ipc.h) */
#define MPS_POOL_IMPORTED_DRIVER 3   /* another process's, imported by the driver */

/* The reverse index: (type, driver handle) -> our handle. */
struct mps_objindex {
	struct mps_objkey {
		void *real;
		uint32_t handle;   /* 0: empty */
		uint8_t type;
		bool tomb;
	} *k;
	uint32_t cap;
	uint32_t n;        /* keys */
	uint32_t used;     /* slots not empty: keys and tombstones */
};

void mps_objindex_free(struct mps_objindex *x);

/* Registers a driver object: a new record and handle, indexed. Returns the
 * record, or NULL when out of memory (nothing registered then). */
struct mps_sobj *mps_obj_add(struct mps_client *c, int type, void *real, int device, uint32_t owner);

/* The record behind a handle of that type, or NULL (also for a physical
 * allocation the client released that is still mapped: mps_obj_any()). */
struct mps_sobj *mps_obj_get(struct mps_client *c, int type, uint32_t handle);
struct mps_sobj *mps_obj_any(struct mps_client *c, int type, uint32_t handle);

/* The handle of a registered driver object, or 0. */
uint32_t mps_obj_find(struct mps_client *c, int type, void *real);

/* Forgets an object and everything it owns, destroying in the driver what is
 * ours to destroy when `destroy` is set (when the client destroyed the
 * object itself, the driver already has). */
void mps_obj_del(struct mps_client *c, uint32_t handle, bool destroy);

/* Destroys every object of the client (teardown): executable graphs first,
 * then graphs, pools and physical allocations. */
void mps_obj_release_all(struct mps_client *c);

#endif
