// SPDX-License-Identifier: MIT
/*
 * The devices a process sees, as CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER
 * select them among the server's, with the real driver's reading of the
 * variables: a comma-separated list of ordinals (read as strtoul reads
 * them: "1abc" is 1), "GPU-" UUIDs or unique prefixes of them, in the order
 * given; the list ends at the first entry that names no device (a negative
 * number, an ordinal past the last device, an unknown or ambiguous UUID, a
 * MIG instance, an ordinal in a list of UUIDs or the other way round); a
 * device named twice is an error (cuInit: CUDA_ERROR_INVALID_DEVICE); an
 * empty value leaves none; no variable leaves all. Ordinals count in the order
 * CUDA_DEVICE_ORDER gives: the server's own (FASTEST_FIRST, the default) or
 * by PCI bus id (PCI_BUS_ID).
 */
#ifndef MPS_COMMON_VISIBLE_H
#define MPS_COMMON_VISIBLE_H

#include <stdint.h>

#include "common/wire.h"

/* A device UUID as the driver writes it after "GPU-": 8-4-4-4-12 hex
 * digits, in out (MPS_UUID_TEXT bytes with its NUL). */
#define MPS_UUID_TEXT 37
void mps_uuid_text(char *out, const uint8_t *uuid);

/* Fills map[i] with the index in devs of the program's device i; returns
 * how many there are (0 .. ndev), or -EEXIST if a device is named twice. devs
 * holds ndev physical devices, then nvirt virtual ones (slices of a
 * physical device: `base` is its index + 1), which only a UUID names, and
 * never together with their GPU or another slice of it. visible and order
 * may be NULL (unset). */
int mps_visible_select(const char *visible, const char *order, const struct mps_wire_device *devs, int ndev,
		       int nvirt, uint8_t *map);

/* The devices a container was given, as NVIDIA's container toolkit reads
 * NVIDIA_VISIBLE_DEVICES (which device nodes it mounts): unset or "all",
 * every one; "none", "void" or empty, none; else a comma-separated list of
 * NVML indexes (PCI bus order) or "GPU-" UUIDs (or unique prefixes), in any
 * order. Where the toolkit would refuse to start the container (an entry
 * that names no device) none. Then mps_visible_select's selection among
 * those, in the server's order, virtual devices of those GPUs included;
 * map and the result as mps_visible_select's, indices into devs. */
int mps_visible_select_in(const char *container, const char *visible, const char *order,
			  const struct mps_wire_device *devs, int ndev, int nvirt, uint8_t *map);

/* The devices a container was given through CDI (the spec openmps-control
 * writes: one OPENMPS_CDI_DEVICE_* variable per device, so that several
 * combine): given is their UUIDs ("GPU-" and the whole UUID), comma-
 * separated, GPUs' and virtual devices' alike, in any order. The program
 * sees the given GPUs in the server's order, then the given virtual devices
 * in the server's order; visible and order select among those as
 * mps_visible_select does (ordinals count them; a given GPU's virtual
 * devices may be named by UUID). An entry that names no device leaves none
 * (the spec the container was made from is stale). Returns as
 * mps_visible_select: -EEXIST also when the selection holds one GPU twice (two
 * slices of it, or a slice and the GPU). */
int mps_visible_select_given(const char *given, const char *visible, const char *order,
			     const struct mps_wire_device *devs, int ndev, int nvirt, uint8_t *map);

/* A virtual device's UUID: its GPU's, mixed with its name (FNV-1a), marked
 * version 8 (not a hardware UUID); the same on every server. */
void mps_vdev_uuid(const uint8_t *phys, const char *name, uint8_t *out);
/* 16 bytes from "GPU-8-4-4-4-12" (or without GPU-): 0, or -EINVAL. */
int mps_uuid_parse(const char *text, uint8_t *out);

#endif
