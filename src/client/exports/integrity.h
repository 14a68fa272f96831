// SPDX-License-Identifier: MIT
//
// The answer to cudart's integrity check (slot 1 of the driver's private
// INTEGRITY_CHECK table, d4082055-bde6-704b-8d34-ba123c66e1f2).
//
// cudart calls the slot with its own version and the current time, computes
// the same 16 bytes itself from what the public driver API tells it, and
// refuses to run (cudaErrorSoftwareValidityNotEstablished, "integrity checks
// failed") unless they agree. The algorithm, verified against the real
// driver 580.159 on an H200 (public reverse-engineering notes in ZLUDA's
// dark_api crate describe the same):
//   version % 10 == 0 or 1: a fixed 16-byte constant;
//   otherwise HMAC-MD2 with a fixed 16-byte key over, little-endian, packed:
//     u32 driver version (cuDriverGetVersion), u32 version, u32 getpid(),
//     u32 low half of pthread_self(), u64 &CUDART_INTERFACE table,
//     u64 &INTEGRITY_CHECK table, u64 address of the check function,
//     u64 unix_seconds;
//     then per device in ordinal order: 16-byte UUID, i32 PCI domain,
//     i32 PCI bus, i32 PCI device;
//   the digest is returned as two native u64.
//
// Because cudart recomputes it through our public entry points, the driver
// version and device identities this file feeds in must be exactly what
// cuDriverGetVersion, cuDeviceGetCount, cuDeviceGetUuid and
// cuDeviceGetAttribute(PCI_DOMAIN_ID / PCI_BUS_ID / PCI_DEVICE_ID) return to
// the same process. They come from the hooks declared in client/exports/exports.h.
#ifndef OPENMPS_CLIENT_INTEGRITY_H
#define OPENMPS_CLIENT_INTEGRITY_H

#include <stdint.h>

#include <cuda.h>

// The fixed part of the hashed message. Field order is the wire order.
struct mps_integrity_record {
	uint32_t driver_version;
	uint32_t version;
	uint32_t pid;
	uint32_t thread;               // low 32 bits of pthread_self()
	uint64_t cudart_table;
	uint64_t integrity_table;
	uint64_t check_fn;
	uint64_t unix_seconds;
};

struct mps_integrity_device {
	uint8_t uuid[16];
	int32_t pci_domain;
	int32_t pci_bus;
	int32_t pci_device;
};

#define MPS_INTEGRITY_RECORD_BYTES 48
#define MPS_INTEGRITY_DEVICE_BYTES 28

// The HMAC path only, over explicit inputs (no hooks, no clock, no pid):
// what the tests and the GPU comparison program check against.
void mps__integrity_digest(const struct mps_integrity_record *rec,
			   const struct mps_integrity_device *devs, int ndevs,
			   uint64_t result[2]);

// What the check slot computes. version, unix_seconds and result are the
// caller's arguments; the three addresses are the tables cudart was handed
// and the function it called (passed in so the GPU test can use the real
// driver's). pid and thread are taken from the calling thread, the driver
// version and devices from the hooks.
//   CUDA_SUCCESS            result written
//   CUDA_ERROR_INVALID_VALUE  result is NULL
//   CUDA_ERROR_NOT_INITIALIZED  mps__device_count() < 0
//   CUDA_ERROR_INVALID_DEVICE   mps__device_identity() failed for an ordinal
// On error result is left untouched.
CUresult mps__integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2],
			      const void *cudart_table, const void *integrity_table,
			      const void *check_fn);

#endif
