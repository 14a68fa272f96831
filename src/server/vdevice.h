// SPDX-License-Identifier: MIT
/*
 * Virtual devices: one GPU sliced for containers, as cloud platforms slice
 * them. A virtual device is a slice of one of the server's GPUs — an SM
 * partition of its own (smshare.h, named as the device), a pinned memory
 * limit and a UUID of its own (common/visible.h: the GPU's UUID mixed with
 * the name, the same on every server) — that a client selects by that UUID
 * in CUDA_VISIBLE_DEVICES, as containers select GPUs. The welcome lists the
 * virtual devices after the GPUs, each with its slice's SM count and memory;
 * a client that selects one sees only that and is held to it: its work runs
 * in the partition, its allocations on that GPU count against the slice.
 *
 * The daemon defines them (vdevice add / split) and sends them to every
 * server; a client keeps the list its welcome showed (what its device
 * selection indexes), so a change while it connects cannot confuse it.
 */
#ifndef MPS_SERVER_VDEVICE_H
#define MPS_SERVER_VDEVICE_H

#include <stdint.h>
#include <stdio.h>

struct mps_client;
struct mps_wire_device;

/* Defines (or redefines) virtual device `name` on GPU dev: sms SMs and mem
 * bytes, or with parts > 0 a 1/parts slice of both. Main thread. */
void mps_vdev_set(const char *name, int dev, unsigned int sms, uint64_t mem, unsigned int parts);
void mps_vdev_remove(const char *name);

/* The virtual devices as a welcome lists them (out: room for
 * MPS_MAX_VDEVICES records); c keeps which is which. Returns how many. */
int mps_vdev_welcome(struct mps_client *c, struct mps_wire_device *out);

/* c's device is virtual device v of its welcome (MPS_OP_DEVICES): the
 * slice's partition and memory limit become c's on that GPU. Returns the
 * GPU's index, or -1 if v is not one. */
int mps_vdev_select(struct mps_client *c, unsigned int v);

/* c leaves: the virtual devices it used count one client less. */
void mps_vdev_release(struct mps_client *c);

/* openmps_client_vdevice samples: the virtual devices client c chose (id:
 * its labels). mps_srv.lock held. */
void mps_vdev_client_metrics(FILE *f, const struct mps_client *c, const char *id);

/* openmps_server_vdevice_* samples: each one's SMs, memory and clients. */
void mps_vdev_metrics(FILE *f, int server);

#endif
