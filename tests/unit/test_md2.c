// SPDX-License-Identifier: MIT
//
// MD2 and HMAC-MD2 (src/client/exports/md2.c) against known answers.
//
// MD2: the seven test-suite vectors of RFC 1319 appendix A.5, through the
// one-shot call and through the incremental API fed in every chunk size
// from 1 to 17 bytes (crossing block boundaries at every offset).
// HMAC-MD2: vectors produced by tools/md2_vectors.py, an independent
// pure-Python MD2/HMAC written from the RFCs in a different shape (whole-
// message padding, then checksum, then mixing). Python's hashlib has no MD2
// on this toolchain, so that script is the second opinion; it checks itself
// against the RFC 1319 suite before printing.
#include <stdio.h>
#include <string.h>

#include "client/exports/md2.h"
#include "../check.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static const struct {
	const char *msg;
	const char *digest;
} rfc1319[] = {
	{ "", "8350e5a3e24c153df2275c9f80692773" },
	{ "a", "32ec01ec4a6dac72c0ab96fb34c0b5d1" },
	{ "abc", "da853b0d3f88d99b30283a69e6ded6bb" },
	{ "message digest", "ab4f496bfb2a530b219ff33031fe06b0" },
	{ "abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b" },
	{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	  "da33def2a42df13975352846c30338cd" },
	{ "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
	  "d5976f79d83d3a0dc9806c3c66f3efd8" },
};

static void test_rfc1319(void)
{
	for (size_t i = 0; i < sizeof(rfc1319) / sizeof(rfc1319[0]); i++) {
		const char *msg = rfc1319[i].msg;
		size_t len = strlen(msg);
		uint8_t d[16];
		char got[33];

		mps__md2(msg, len, d);
		hex(d, 16, got);
		CHECK(!strcmp(got, rfc1319[i].digest), "MD2(\"%s\") = %s, want %s", msg, got,
		      rfc1319[i].digest);

		for (size_t chunk = 1; chunk <= 17; chunk++) {
			struct mps_md2 c;
			mps__md2_init(&c);
			for (size_t off = 0; off < len; off += chunk)
				mps__md2_update(&c, msg + off, len - off < chunk ? len - off : chunk);
			mps__md2_update(&c, NULL, 0);
			mps__md2_final(&c, d);
			hex(d, 16, got);
			CHECK(!strcmp(got, rfc1319[i].digest), "MD2(\"%s\") in %zu-byte chunks = %s",
			      msg, chunk, got);
		}
	}
}

// Expected values: python3 tools/md2_vectors.py
static void test_hmac(void)
{
	uint8_t k_0b[16], k_aa[16], k_aa80[80], k_1_25[25], k_01x17[17];
	uint8_t m_dd[50], m_cd[50];
	memset(k_0b, 0x0b, sizeof(k_0b));
	memset(k_aa, 0xaa, sizeof(k_aa));
	memset(k_aa80, 0xaa, sizeof(k_aa80));
	memset(k_01x17, 0x01, sizeof(k_01x17));
	for (int i = 0; i < 25; i++)
		k_1_25[i] = (uint8_t)(i + 1);
	memset(m_dd, 0xdd, sizeof(m_dd));
	memset(m_cd, 0xcd, sizeof(m_cd));
	const char *large = "Test Using Larger Than Block-Size Key - Hash Key First";

	const struct {
		const char *name;
		const uint8_t *key;
		size_t keylen;
		const void *msg;
		size_t len;
		uint8_t want[16];
	} cases[] = {
		{ "key 0x0b*16, \"Hi There\"", k_0b, 16, "Hi There", 8,
		  { 0xb5, 0x24, 0xbe, 0x01, 0x96, 0xe4, 0x91, 0xed,
		    0x44, 0x82, 0x37, 0x46, 0xcd, 0x89, 0x23, 0xaf } },
		{ "key \"Jefe\"", (const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28,
		  { 0x29, 0x2f, 0x9d, 0x34, 0xf9, 0xe3, 0x11, 0x84,
		    0x6d, 0xe8, 0x6c, 0x49, 0x5d, 0x7a, 0xdf, 0xa2 } },
		{ "key 0xaa*16, 0xdd*50", k_aa, 16, m_dd, 50,
		  { 0xff, 0x09, 0x23, 0x8e, 0x4b, 0xde, 0xd8, 0x4b,
		    0x54, 0x90, 0xbc, 0x42, 0xcf, 0xd5, 0xc2, 0x65 } },
		{ "key 1..25, 0xcd*50", k_1_25, 25, m_cd, 50,
		  { 0xea, 0x31, 0x81, 0xbf, 0x1c, 0xc3, 0x87, 0xf1,
		    0x2e, 0xd0, 0x63, 0x71, 0x05, 0xfb, 0x21, 0x9d } },
		{ "key 0xaa*80 (hashed)", k_aa80, 80, large, strlen(large),
		  { 0x61, 0x5b, 0x1c, 0x39, 0x2f, 0x5a, 0xae, 0xee,
		    0xab, 0x7e, 0x82, 0x57, 0x2e, 0x63, 0x95, 0xd5 } },
		{ "empty key, empty msg", NULL, 0, NULL, 0,
		  { 0x6f, 0x6e, 0x03, 0x12, 0x23, 0xb3, 0x6c, 0xd2,
		    0xa9, 0x97, 0x78, 0x7a, 0x03, 0xd1, 0x6b, 0xf5 } },
		{ "key 0x01*17 (hashed), 16-byte msg", k_01x17, 17, "0123456789abcdef", 16,
		  { 0x11, 0xc4, 0x35, 0x1f, 0x73, 0x20, 0xd7, 0xd6,
		    0xe5, 0xa7, 0xea, 0x95, 0x1a, 0xb2, 0x17, 0xfe } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t d[16];
		char got[33], want[33];

		mps__hmac_md2(cases[i].key, cases[i].keylen, cases[i].msg, cases[i].len, d);
		hex(d, 16, got);
		hex(cases[i].want, 16, want);
		CHECK(!memcmp(d, cases[i].want, 16), "HMAC-MD2 %s = %s, want %s", cases[i].name,
		      got, want);

		// Incremental, one byte at a time.
		struct mps_hmac_md2 h;
		mps__hmac_md2_init(&h, cases[i].key, cases[i].keylen);
		for (size_t off = 0; off < cases[i].len; off++)
			mps__hmac_md2_update(&h, (const uint8_t *)cases[i].msg + off, 1);
		mps__hmac_md2_final(&h, d);
		CHECK(!memcmp(d, cases[i].want, 16), "incremental HMAC-MD2 %s differs",
		      cases[i].name);
	}

	// A key of 16 bytes is used as is, a longer one is hashed: the two
	// must differ even when the long key starts with the short one.
	uint8_t a[16], b[16];
	mps__hmac_md2(k_aa80, 16, "x", 1, a);
	mps__hmac_md2(k_aa80, 17, "x", 1, b);
	CHECK(memcmp(a, b, 16) != 0, "17-byte key hashed to the same result as its 16-byte prefix");
}

int main(void)
{
	test_rfc1319();
	test_hmac();
	return check_finish("test_md2");
}
