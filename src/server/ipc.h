// SPDX-License-Identifier: MIT
/*
 * Interprocess handles (cuIpcGetMemHandle, cuIpcGetEventHandle) among the
 * clients of one server, and with processes outside it.
 *
 * A handle is the driver's own, asked of it for the server's allocation or
 * event, so a process on the real driver can open it as usual. Every handle
 * given out is kept here, server-wide, with the client that exported it:
 * another client of this server that opens it gets the exporter's memory
 * or event itself (one process, one address space: the same address, no
 * mapping), while a handle not found here (another process's) is opened
 * through the driver. The memory stays the exporter's, charged to it; when
 * the exporter frees it or leaves while others still have it open, the
 * allocation (or event) lives on, uncharged, until the last of them closes
 * it, as the driver keeps memory its importers still map. The table has
 * its own lock (leaf: no other lock is taken under it, nor a driver call).
 */
#ifndef MPS_SERVER_IPC_H
#define MPS_SERVER_IPC_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

struct mps_client;

/* The handle of an exported allocation (the one of the client's device
 * allocations that holds ptr) or event; written to out (64 bytes). */
CUresult mps_ipc_export_mem(struct mps_client *c, uint64_t ptr, int device, void *out);
CUresult mps_ipc_export_event(struct mps_client *c, CUevent ev, int device, void *out);

/* Opens a handle: *ours says whether it was this server's (then *base,
 * *size and *device are the exporter's allocation) or was opened through
 * the driver. */
CUresult mps_ipc_open_mem(struct mps_client *c, const void *handle, unsigned int flags, uint64_t *base,
			  uint64_t *size, int *device, bool *ours);
CUresult mps_ipc_open_event(struct mps_client *c, const void *handle, CUevent *ev, bool *ours);

/* An importer is done with what it opened (ours: from this server). */
void mps_ipc_close_mem(struct mps_client *c, uint64_t base, bool ours);
void mps_ipc_close_event(struct mps_client *c, CUevent ev, bool ours);

/* The exporter frees an allocation or event: true if others still have it
 * open, and the free is left to the last of them. */
bool mps_ipc_orphan_mem(struct mps_client *c, uint64_t base);
bool mps_ipc_orphan_event(struct mps_client *c, CUevent ev);

/*
 * Memory pools. A pool's export (cuMemPoolExportToShareableHandle, which
 * the driver must first allow) is a sealed memfd holding a random token of
 * this server's, kept here with the pool: another client of the server
 * that imports it gets the exporter's pool itself, and an fd holding no
 * token of ours is imported through the driver (another process's pool).
 * A shared pool lives until its exporter and every importer have destroyed
 * it. The pointers of a pool (cuMemPoolExportPointer) are exported with
 * the driver's data and kept as memory handles are: opened here they are
 * the exporter's allocation (same address), freed by the last of them.
 */
CUresult mps_ipc_export_pool(struct mps_client *c, CUmemoryPool pool, int device, int *fd);
CUresult mps_ipc_import_pool(struct mps_client *c, int fd, CUmemoryPool *pool, int *device, bool *ours);
void mps_ipc_close_pool(struct mps_client *c, CUmemoryPool pool, bool ours);
bool mps_ipc_orphan_pool(struct mps_client *c, CUmemoryPool pool);

CUresult mps_ipc_export_pool_ptr(struct mps_client *c, uint64_t ptr, int device, void *out);
CUresult mps_ipc_open_pool_ptr(struct mps_client *c, CUmemoryPool pool, const void *data, uint64_t *base,
			       uint64_t *size, int *device, bool *ours);
void mps_ipc_close_pool_ptr(struct mps_client *c, uint64_t base, bool ours);

#endif
