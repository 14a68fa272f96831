// SPDX-License-Identifier: MIT
/*
 * Where clients' device memory lands, when OPENMPS_PLACEMENT=random.
 *
 * Every client of a server shares its contexts, so a kernel of one client
 * can reach any address of another's that it can name. By default the
 * driver places allocations one after another, so a client's own addresses
 * tell where its neighbours' are (a client's 1 MiB allocation lands 1 MiB
 * after another's). With OPENMPS_PLACEMENT=random the server reserves a
 * large range of virtual addresses on each device at start
 * (OPENMPS_PLACEMENT_GIB, default 4096: 2^21 slots of 2 MiB) and maps
 * clients' memory there in chunks: runs of granules of new physical memory
 * (cuMemCreate) for one client on one device, each at a slot drawn from
 * the kernel's random source, with at least one unmapped slot before and
 * after it: knowing one's own addresses says nothing of another's (21
 * bits a chunk in 4 TiB), and a probe next to one's memory faults instead
 * of reading a neighbour's. A chunk is readable and writable from its
 * device and every peer the server enabled (device.c), and cleared before
 * the client's work can reach any of it (on a stream of the server's own,
 * which the client's streams wait for: the allocation does not wait for
 * the clear), so nothing an earlier client left in that memory can be
 * read.
 *
 * A cuMemAlloc / cuMemAllocPitch of a client past half the granularity (1
 * MiB) takes whole granules of one of its chunks, up to 256 (512 MiB); one
 * larger is a chunk of its own. A smaller one is carved from a granule of
 * its client's own, taken from a chunk the same way, in 512-byte units. A
 * new chunk is as large as the client's chunks on the device already (at
 * least what is asked, at most 256 granules and within the client's memory
 * limit; just what is asked while the
 * device has less than an eighth of its memory free), so mapping memory,
 * whose cuMemSetAccess alone costs 36 µs of a 2 MiB cuMemAlloc's 55 on an
 * H200, is paid once a chunk, not once an allocation. A client's allocations sit
 * next to each other, never next to another client's; a granule it frees
 * stays its own (holding what it wrote) until its whole chunk is free and
 * unmapped. A client that shares one of its allocations by IPC shows the
 * importer where that chunk is.
 *
 * Costs, against cuMemAlloc: a larger allocation takes whole granules (2
 * MiB; a framework's caching allocator asks in 2 MiB and 20 MiB blocks
 * anyway), a client holds up to as much unused in its chunks as it uses
 * (256 granules a device at most), and a free waits for the client's work
 * to end before the memory goes or is given again (cuMemFree's implicit
 * synchronization, made explicit; a cuMemFreeAsync holds the memory
 * until its stream has reached the free, ops_mem.c, since the driver
 * knows no such allocation to free in stream order).
 * Host memory the GPU reaches through its address (a client's pinned
 * allocations, which its managed memory is too; its shared region, whose
 * reply slots the GPU writes; its bounce ring of pageable uploads) is
 * mapped in the server at a random page in [16 TiB, 64 TiB) of the
 * address space, with at least 1 MiB free on either side when it is
 * mapped (mps_place_host_map): 33 bits an allocation, where by default
 * the kernel stacks such mappings one after another. A registration
 * (cuMemHostRegister) keeps the program's own address when the server can
 * map there, which only its own process knows.
 * A client's address reservation (cuMemAddressReserve with no address
 * asked for) is a run of slots of the range at random too, with a free
 * slot on either side, so the memory it maps there lands where nothing
 * tells (mps_place_reserve).
 * Not yet covered: stream-ordered allocations and pools (the driver places
 * them), a reservation at an address the client asks for, graph memory
 * nodes. Legacy IPC handles
 * (cuIpcGetMemHandle) cannot be made for such memory: the driver refuses
 * them on mapped physical allocations.
 *
 * Thread-safe: any service thread may place or free on any device.
 */
#ifndef MPS_SERVER_PLACEMENT_H
#define MPS_SERVER_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

/* Reads OPENMPS_PLACEMENT and reserves each device's range (the devices'
 * primary contexts made). Logs and leaves placement off where it cannot. */
void mps_place_init(void);

/* Whether allocations of device dev are placed at random. */
bool mps_place_on(int device);

/* A new allocation of `bytes` on device (bound) for `owner` (a client's
 * id): past half the granularity, mapped whole at a random slot; up to it,
 * carved from a granule that holds only that owner's allocations. A new
 * chunk holds at most `spare` bytes more than asked (the owner's room
 * under its memory limit). *mapped: what it takes (whole granules;
 * 512-byte units when carved). *clearing set when new memory was mapped
 * for it: its clear is under way, and the owner's work must wait for
 * mps_place_cleared(device) first. */
CUresult mps_place_alloc(int device, uint64_t owner, uint64_t bytes, uint64_t spare, CUdeviceptr *ptr,
			 uint64_t *mapped, bool *clearing);
/* Recorded on device's clearing stream after each clear of new memory: a
 * stream that waits for it waits for every clear of an allocation that has
 * been answered (clears wait for nothing else). */
CUevent mps_place_cleared(int device);

/* A client's address reservation of size bytes, aligned to align (0: the
 * granularity), at random slots of device's range: *at. Nothing is mapped
 * there; the client maps its own memory. CUDA_ERROR_NOT_SUPPORTED: not
 * placed here (placement off, a size or alignment not of whole granules,
 * no room), the driver is to reserve it. */
CUresult mps_place_reserve(int device, uint64_t size, uint64_t align, CUdeviceptr *at);

/* Gives back the reservation [at, at + size) made by mps_place_reserve:
 * false if there is none (the caller asks the driver). Nothing may be
 * mapped in it. */
bool mps_place_unreserve(CUdeviceptr at, uint64_t size);

/* Whether p is the start of an allocation placed here. */
bool mps_place_is(CUdeviceptr p);

/* Whether p lies in an allocation placed here, and its buffer id: one of
 * its own (carved allocations share their granule's physical memory, whose
 * id the driver would give), never one the driver gives. */
bool mps_place_id(CUdeviceptr p, uint64_t *id);

/* Frees p (device bound): a placed allocation's mapping goes (true), or
 * false if p was not placed (the caller calls cuMemFree). An unmap does
 * not wait for the work that may use the memory as cuMemFree does: `idle`
 * says the caller waited for it (the client's streams on the device);
 * otherwise the device's work ends first. */
bool mps_place_free(CUdeviceptr p, bool idle, CUresult *r);

/* Maps size bytes of fd (shared; fd < 0: anonymous, private), read and
 * write, for host memory the GPU will reach through its address: at a
 * random page when placing at random, else where the kernel puts it. NULL
 * (errno set) if it cannot be mapped. */
void *mps_place_host_map(int fd, size_t size);

/* Address reservations placed at random, ever. */
uint64_t mps_place_reserve_stats(void);

/* Host mappings placed at random, and those that found no free place. */
void mps_place_host_stats(uint64_t *maps, uint64_t *fallbacks);

/* Frees device memory a client allocated, placed or not (device bound). */
CUresult mps_place_mem_free(CUdeviceptr p, bool idle);

/* Placed allocations and bytes mapped, and placements that found no free
 * slot (and went to the driver), since the server started. */
void mps_place_stats(uint64_t *allocs, uint64_t *bytes, uint64_t *fallbacks);

#endif
