// SPDX-License-Identifier: MIT
//
// Computes the integrity-check answer described in client/exports/integrity.h.
//
// The message is serialised byte by byte in little-endian order rather than
// hashed from a struct in memory, so the result does not depend on the
// compiler's padding or on the host's byte order; the digest is then read
// back as two native u64 because that is how the driver returns it. Devices
// are streamed into the HMAC one at a time, so no allocation is needed
// whatever the device count.
#include "client/exports/integrity.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "client/exports/exports.h"
#include "client/exports/md2.h"

// Constant answers for versions ending in 0 and 1, and the HMAC key; values
// measured on driver 580.159 (H200), matching public reverse-engineering
// notes (ZLUDA dark_api).
static const uint64_t answer_version_0[2] = { 0x3341181c03cb675cull, 0x8ed383aa1f4cd1e8ull };
static const uint64_t answer_version_1[2] = { 0x1841181c03cb675cull, 0x8ed383aa1f4cd1e8ull };
static const uint8_t hmac_key[16] = {
	0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
	0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

static uint8_t *put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint8_t *put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static void hash_record(struct mps_hmac_md2 *h, const struct mps_integrity_record *rec)
{
	uint8_t buf[MPS_INTEGRITY_RECORD_BYTES];
	uint8_t *p = buf;

	p = put_u32(p, rec->driver_version);
	p = put_u32(p, rec->version);
	p = put_u32(p, rec->pid);
	p = put_u32(p, rec->thread);
	p = put_u64(p, rec->cudart_table);
	p = put_u64(p, rec->integrity_table);
	p = put_u64(p, rec->check_fn);
	p = put_u64(p, rec->unix_seconds);
	mps__hmac_md2_update(h, buf, (size_t)(p - buf));
}

static void hash_device(struct mps_hmac_md2 *h, const struct mps_integrity_device *dev)
{
	uint8_t buf[MPS_INTEGRITY_DEVICE_BYTES];
	uint8_t *p = buf;

	memcpy(p, dev->uuid, sizeof(dev->uuid));
	p += sizeof(dev->uuid);
	p = put_u32(p, (uint32_t)dev->pci_domain);
	p = put_u32(p, (uint32_t)dev->pci_bus);
	p = put_u32(p, (uint32_t)dev->pci_device);
	mps__hmac_md2_update(h, buf, (size_t)(p - buf));
}

static void finish(struct mps_hmac_md2 *h, uint64_t result[2])
{
	uint8_t digest[MPS_MD2_DIGEST];

	mps__hmac_md2_final(h, digest);
	memcpy(result, digest, sizeof(digest));
}

void mps__integrity_digest(const struct mps_integrity_record *rec,
			   const struct mps_integrity_device *devs, int ndevs,
			   uint64_t result[2])
{
	struct mps_hmac_md2 h;

	mps__hmac_md2_init(&h, hmac_key, sizeof(hmac_key));
	hash_record(&h, rec);
	for (int i = 0; i < ndevs; i++)
		hash_device(&h, &devs[i]);
	finish(&h, result);
}

CUresult mps__integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t result[2],
			      const void *cudart_table, const void *integrity_table,
			      const void *check_fn)
{
	if (!result)
		return CUDA_ERROR_INVALID_VALUE;
	switch (version % 10) {
	case 0:
		memcpy(result, answer_version_0, sizeof(answer_version_0));
		return CUDA_SUCCESS;
	case 1:
		memcpy(result, answer_version_1, sizeof(answer_version_1));
		return CUDA_SUCCESS;
	}

	int ndevs = mps__device_count();
	if (ndevs < 0)
		return CUDA_ERROR_NOT_INITIALIZED;

	// pthread_t is an unsigned long on glibc and musl; the driver hashes
	// its low 32 bits.
	struct mps_integrity_record rec = {
		.driver_version = (uint32_t)mps__driver_version(),
		.version = version,
		.pid = (uint32_t)getpid(),
		.thread = (uint32_t)(uintptr_t)pthread_self(),
		.cudart_table = (uint64_t)(uintptr_t)cudart_table,
		.integrity_table = (uint64_t)(uintptr_t)integrity_table,
		.check_fn = (uint64_t)(uintptr_t)check_fn,
		.unix_seconds = unix_seconds,
	};
	struct mps_hmac_md2 h;
	mps__hmac_md2_init(&h, hmac_key, sizeof(hmac_key));
	hash_record(&h, &rec);
	for (int i = 0; i < ndevs; i++) {
		struct mps_integrity_device dev;
		CUuuid uuid;
		int dom, bus, pdev;

		if (mps__device_identity(i, &uuid, &dom, &bus, &pdev) != 0) {
			memset(&h, 0, sizeof(h));
			return CUDA_ERROR_INVALID_DEVICE;
		}
		memcpy(dev.uuid, uuid.bytes, sizeof(dev.uuid));
		dev.pci_domain = dom;
		dev.pci_bus = bus;
		dev.pci_device = pdev;
		hash_device(&h, &dev);
	}
	finish(&h, result);
	return CUDA_SUCCESS;
}
