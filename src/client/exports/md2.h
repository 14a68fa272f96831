// SPDX-License-Identifier: MIT
//
// MD2 (RFC 1319) and HMAC-MD2 (RFC 2104 with MD2's 16-byte block).
//
// The only user is the answer to cudart's integrity check (integrity.c): the
// driver proves it is genuine by returning an HMAC-MD2 over values cudart can
// recompute, so this has to be bit-exact MD2, not a modern hash. MD2 is broken
// as a cryptographic hash; nothing here relies on it for security.
//
// Both come as one-shot helpers and as an incremental init/update/final API;
// contexts are plain structs the caller owns (no allocation, no global state),
// so any number of threads may hash concurrently on their own contexts.
#ifndef OPENMPS_CLIENT_MD2_H
#define OPENMPS_CLIENT_MD2_H

#include <stddef.h>
#include <stdint.h>

#define MPS_MD2_BLOCK  16
#define MPS_MD2_DIGEST 16

struct mps_md2 {
	uint8_t x[48];                 // RFC 1319 3.4: the 48-byte state X
	uint8_t checksum[MPS_MD2_BLOCK]; // RFC 1319 3.2: C, kept as we go
	uint8_t buf[MPS_MD2_BLOCK];    // bytes of an incomplete block
	size_t  fill;                  // how many of buf are valid, < 16
};

struct mps_hmac_md2 {
	struct mps_md2 inner;          // H(K ^ ipad || message ...)
	uint8_t okey[MPS_MD2_BLOCK];   // K ^ opad, for the outer hash
};

void mps__md2_init(struct mps_md2 *c);
void mps__md2_update(struct mps_md2 *c, const void *data, size_t len);
// Writes the digest and wipes the context; init again to reuse it.
void mps__md2_final(struct mps_md2 *c, uint8_t out[MPS_MD2_DIGEST]);
void mps__md2(const void *data, size_t len, uint8_t out[MPS_MD2_DIGEST]);

// Keys longer than the 16-byte block are first hashed with MD2 (RFC 2104
// section 2); shorter keys are padded with zeros. key may be NULL when keylen
// is 0.
void mps__hmac_md2_init(struct mps_hmac_md2 *h, const uint8_t *key, size_t keylen);
void mps__hmac_md2_update(struct mps_hmac_md2 *h, const void *data, size_t len);
void mps__hmac_md2_final(struct mps_hmac_md2 *h, uint8_t out[MPS_MD2_DIGEST]);
void mps__hmac_md2(const uint8_t *key, size_t keylen, const void *msg, size_t len,
		   uint8_t out[MPS_MD2_DIGEST]);

#endif
