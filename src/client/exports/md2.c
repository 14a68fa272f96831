// SPDX-License-Identifier: MIT
//
// MD2 as RFC 1319 specifies it, and HMAC over it as RFC 2104 specifies it.
//
// MD2 works on 16-byte blocks. Each block updates a running checksum C
// (section 3.2) and is mixed into a 48-byte state X by 18 rounds of the
// byte substitution S (section 3.4). The message is padded with i bytes of
// value i (1 <= i <= 16, section 3.1), then C itself is processed as a final
// block; the digest is the first 16 bytes of X. The checksum step follows
// the RFC's errata (C[j] = C[j] xor S[c xor L], not C[j] = S[c xor L]): that
// is what the RFC's own reference code and test suite compute.
//
// HMAC-MD2 is H(K ^ opad || H(K ^ ipad || m)) with the block size B = 16.
#include "client/exports/md2.h"

#include <string.h>

// RFC 1319 section 3.4: "a random permutation of 0..255 constructed from the
// digits of pi".
static const uint8_t pi_subst[256] = {
	41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19,
	98, 167, 5, 243, 192, 199, 115, 140, 152, 147, 43, 217, 188, 76, 130, 202,
	30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
	190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122,
	169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33,
	128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
	255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198,
	79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4, 241,
	69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
	27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15,
	85, 71, 163, 35, 221, 81, 175, 58, 195, 92, 249, 206, 186, 197, 234, 38,
	44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
	106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74,
	120, 136, 149, 139, 227, 99, 232, 109, 233, 203, 213, 254, 59, 0, 29, 57,
	242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
	49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

// Mixes one block into X. The checksum is updated separately because the
// final block (the checksum itself) must not feed back into C.
static void mix_block(struct mps_md2 *c, const uint8_t block[MPS_MD2_BLOCK])
{
	for (int j = 0; j < MPS_MD2_BLOCK; j++) {
		c->x[16 + j] = block[j];
		c->x[32 + j] = (uint8_t)(block[j] ^ c->x[j]);
	}
	unsigned t = 0;
	for (unsigned round = 0; round < 18; round++) {
		for (int k = 0; k < 48; k++) {
			c->x[k] ^= pi_subst[t];
			t = c->x[k];
		}
		t = (t + round) & 0xff;
	}
}

// RFC 1319 3.2. L carries over between blocks and always equals the last
// checksum byte written, so it need not be stored.
static void checksum_block(struct mps_md2 *c, const uint8_t block[MPS_MD2_BLOCK])
{
	uint8_t l = c->checksum[MPS_MD2_BLOCK - 1];
	for (int j = 0; j < MPS_MD2_BLOCK; j++) {
		c->checksum[j] ^= pi_subst[block[j] ^ l];
		l = c->checksum[j];
	}
}

static void process_block(struct mps_md2 *c, const uint8_t block[MPS_MD2_BLOCK])
{
	checksum_block(c, block);
	mix_block(c, block);
}

void mps__md2_init(struct mps_md2 *c)
{
	memset(c, 0, sizeof(*c));
}

void mps__md2_update(struct mps_md2 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!len)
		return; // data may be NULL then
	if (c->fill) {
		size_t take = MPS_MD2_BLOCK - c->fill;
		if (take > len)
			take = len;
		memcpy(c->buf + c->fill, p, take);
		c->fill += take;
		p += take;
		len -= take;
		if (c->fill < MPS_MD2_BLOCK)
			return;
		process_block(c, c->buf);
		c->fill = 0;
	}
	for (; len >= MPS_MD2_BLOCK; p += MPS_MD2_BLOCK, len -= MPS_MD2_BLOCK)
		process_block(c, p);
	if (len) {
		memcpy(c->buf, p, len);
		c->fill = len;
	}
}

void mps__md2_final(struct mps_md2 *c, uint8_t out[MPS_MD2_DIGEST])
{
	// Always at least one byte of padding: a message that ends on a block
	// boundary gets a whole block of 16s.
	uint8_t pad = (uint8_t)(MPS_MD2_BLOCK - c->fill);
	memset(c->buf + c->fill, pad, pad);
	process_block(c, c->buf);

	uint8_t sum[MPS_MD2_BLOCK];
	memcpy(sum, c->checksum, sizeof(sum));
	mix_block(c, sum);

	memcpy(out, c->x, MPS_MD2_DIGEST);
	memset(c, 0, sizeof(*c));
}

void mps__md2(const void *data, size_t len, uint8_t out[MPS_MD2_DIGEST])
{
	struct mps_md2 c;
	mps__md2_init(&c);
	mps__md2_update(&c, data, len);
	mps__md2_final(&c, out);
}

void mps__hmac_md2_init(struct mps_hmac_md2 *h, const uint8_t *key, size_t keylen)
{
	uint8_t k[MPS_MD2_BLOCK] = { 0 };
	uint8_t ikey[MPS_MD2_BLOCK];

	if (keylen > MPS_MD2_BLOCK)
		mps__md2(key, keylen, k); // digest size == block size for MD2
	else if (keylen)
		memcpy(k, key, keylen);

	for (int i = 0; i < MPS_MD2_BLOCK; i++) {
		ikey[i] = (uint8_t)(k[i] ^ 0x36);
		h->okey[i] = (uint8_t)(k[i] ^ 0x5c);
	}
	mps__md2_init(&h->inner);
	mps__md2_update(&h->inner, ikey, sizeof(ikey));
}

void mps__hmac_md2_update(struct mps_hmac_md2 *h, const void *data, size_t len)
{
	mps__md2_update(&h->inner, data, len);
}

void mps__hmac_md2_final(struct mps_hmac_md2 *h, uint8_t out[MPS_MD2_DIGEST])
{
	uint8_t inner[MPS_MD2_DIGEST];
	struct mps_md2 outer;

	mps__md2_final(&h->inner, inner);
	mps__md2_init(&outer);
	mps__md2_update(&outer, h->okey, sizeof(h->okey));
	mps__md2_update(&outer, inner, sizeof(inner));
	mps__md2_final(&outer, out);
	memset(h, 0, sizeof(*h));
}

void mps__hmac_md2(const uint8_t *key, size_t keylen, const void *msg, size_t len,
		   uint8_t out[MPS_MD2_DIGEST])
{
	struct mps_hmac_md2 h;
	mps__hmac_md2_init(&h, key, keylen);
	mps__hmac_md2_update(&h, msg, len);
	mps__hmac_md2_final(&h, out);
}
