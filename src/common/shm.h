// SPDX-License-Identifier: MIT
/*
 * Shared memory that one process creates and passes to another as an fd: a
 * memfd whose size is fixed by seals, so the receiver cannot shrink it under
 * the creator (which would turn the creator's reads into SIGBUS).
 */
#ifndef MPS_COMMON_SHM_H
#define MPS_COMMON_SHM_H

#include <stddef.h>

/* Creates a memfd of size bytes, sealed against shrinking, growing and
 * further sealing. Returns the fd or -errno. */
int mps_shm_create(const char *name, size_t size);

/* Maps fd read-write and shared. With hint, asks for exactly that address
 * and fails rather than replace an existing mapping (MAP_FIXED_NOREPLACE).
 * Returns the address or NULL (errno set). */
void *mps_shm_map(int fd, size_t size, void *hint);

/* The size of the memfd if it is sealed against shrinking, else -errno. */
long long mps_shm_sealed_size(int fd);

#endif
