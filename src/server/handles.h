// SPDX-License-Identifier: MIT
/*
 * Per-client handle table: the 32-bit numbers a client uses to name its
 * server-side objects. A handle is (slot index << 8 | generation), so a
 * handle kept after its object was freed does not name the object that later
 * reuses the slot (until the 8-bit generation wraps), and the type stored
 * with each entry stops a stream handle from being used as an event. The
 * table belongs to the client's worker thread: no locking.
 */
#ifndef MPS_SERVER_HANDLES_H
#define MPS_SERVER_HANDLES_H

#include <stdint.h>

struct mps_handle_entry {
	void *obj;
	uint8_t type;   /* 0: free */
	uint8_t gen;
	uint32_t next_free;
};

struct mps_handles {
	struct mps_handle_entry *e;
	uint32_t cap;
	uint32_t used;
	uint32_t free_head;  /* index of the first free entry, 0 if none */
};

#define MPS_HANDLES_MAX (1u << 24)

void mps_handles_init(struct mps_handles *t);
void mps_handles_free(struct mps_handles *t);

/* Returns a new handle for obj, or 0 when out of memory or handles. */
uint32_t mps_handle_new(struct mps_handles *t, int type, void *obj);

/* The object behind handle if it is live and of that type, else NULL. */
void *mps_handle_get(struct mps_handles *t, uint32_t handle, int type);

/* Frees the handle; it must be live. */
void mps_handle_del(struct mps_handles *t, uint32_t handle);

/* Calls fn(obj, arg) for every live handle of a type. fn may delete
 * handles, but must not create any. */
void mps_handles_foreach(struct mps_handles *t, int type, void (*fn)(void *obj, void *arg), void *arg);

#endif
