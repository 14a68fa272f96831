// SPDX-License-Identifier: MIT
//
// The extent of module images (src/common/image.c), on images nvcc built
// from tests/kernels/kernels.cu (a cubin, a fatbin and the PTX, found next
// to this test) and on hand-made hostile headers.
//
// A real image's extent is its file's size. Every shorter upload of it is
// refused, and is measured from a buffer of exactly that many bytes so a
// read past the end shows under AddressSanitizer. Headers whose offsets
// and sizes run past the upload, or overflow 64 bits, are refused too.
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"
#include "../check.h"

static uint8_t *slurp(const char *dir, const char *name, size_t *len)
{
	char path[4096];
	uint8_t *buf = NULL;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "test_image: cannot open %s\n", path);
		exit(1);
	}
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(buf = malloc((size_t)n)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "test_image: cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

// The extent of the first k bytes of img, measured in a buffer of k bytes.
static size_t extent_of_prefix(const uint8_t *img, size_t k)
{
	uint8_t *b = malloc(k ? k : 1);
	size_t e;

	memcpy(b, img, k);
	e = mps_image_extent(b, k);
	free(b);
	return e;
}

// Every prefix up to 4 KiB, then every 61st, then the last 64: all refused.
static void check_prefixes(const char *what, const uint8_t *img, size_t len)
{
	for (size_t k = 0; k < len; k += k < 4096 || len - k <= 64 ? 1 : 61)
		CHECK(extent_of_prefix(img, k) == 0, "%s cut to %zu of %zu bytes was accepted", what, k, len);
}

static void test_real_images(const char *dir)
{
	size_t len, ptx_len;
	uint8_t *img;

	img = slurp(dir, "kernels.cubin", &len);
	CHECK(!memcmp(img, "\177ELF", 4), "kernels.cubin is not an ELF file");
	CHECK(mps_image_extent(img, len) == len, "cubin: extent %zu, file %zu", mps_image_extent(img, len), len);
	CHECK(mps_image_extent(img, SIZE_MAX) == len, "cubin, unbounded: extent %zu, file %zu",
	      mps_image_extent(img, SIZE_MAX), len);
	check_prefixes("the cubin", img, len);
	free(img);

	img = slurp(dir, "kernels.fatbin", &len);
	CHECK(mps_image_extent(img, len) == len, "fatbin: extent %zu, file %zu", mps_image_extent(img, len), len);
	CHECK(mps_image_extent(img, SIZE_MAX) == len, "fatbin, unbounded: extent %zu, file %zu",
	      mps_image_extent(img, SIZE_MAX), len);
	check_prefixes("the fatbin", img, len);
	free(img);

	// PTX as a file has no NUL: the upload is the text and one.
	img = slurp(dir, "../kernels.ptx", &ptx_len);
	img = realloc(img, ptx_len + 1);
	img[ptx_len] = 0;
	CHECK(strstr((char *)img, ".entry") != NULL, "kernels.ptx has no kernel");
	CHECK(mps_image_extent(img, ptx_len + 1) == ptx_len + 1, "PTX: extent %zu, text %zu + NUL",
	      mps_image_extent(img, ptx_len + 1), ptx_len);
	CHECK(mps_image_extent(img, SIZE_MAX) == ptx_len + 1, "PTX, unbounded: extent %zu",
	      mps_image_extent(img, SIZE_MAX));
	check_prefixes("the PTX", img, ptx_len + 1);
	// Bytes after the NUL are not part of it.
	CHECK(mps_image_extent((const uint8_t *)"abcd\0efgh", 9) == 5, "PTX stops at its NUL");
	free(img);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

// A minimal ELF64 header in a 512-byte buffer: a program header table of
// one 56-byte entry at 0x40, a section table of two 64-byte entries at
// 0x100; section 1 holds [0x80, 0xa0).
static void make_elf(uint8_t *b)
{
	memset(b, 0, 512);
	memcpy(b, "\177ELF", 4);
	b[4] = 2;
	put64(b + 0x20, 0x40);
	put64(b + 0x28, 0x100);
	put16(b + 0x36, 56);
	put16(b + 0x38, 1);
	put16(b + 0x3a, 64);
	put16(b + 0x3c, 2);
	put32(b + 0x140 + 4, 1);          // section 1: PROGBITS
	put64(b + 0x140 + 0x18, 0x80);
	put64(b + 0x140 + 0x20, 0x20);
}

static void test_hostile_headers(void)
{
	uint8_t b[512];

	CHECK(mps_image_extent(NULL, 100) == 0, "NULL accepted");
	CHECK(mps_image_extent((const uint8_t *)"ab", 2) == 0, "a 2-byte image accepted");

	// Fatbin: the size in its header decides.
	memset(b, 0, sizeof(b));
	put32(b, MPS_FATBIN_MAGIC);
	put16(b + 6, 16);
	put64(b + 8, 100);
	CHECK(mps_image_extent(b, 116) == 116, "fatbin of 16 + 100 bytes: extent %zu", mps_image_extent(b, 116));
	CHECK(mps_image_extent(b, 115) == 0, "fatbin one byte short accepted");
	CHECK(mps_image_extent(b, 15) == 0, "fatbin shorter than its header accepted");
	put64(b + 8, UINT64_MAX - 8);
	CHECK(mps_image_extent(b, sizeof(b)) == 0, "fatbin whose size overflows accepted");
	CHECK(extent_of_prefix(b, 16) == 0, "fatbin whose size overflows accepted (16 bytes)");
	put32(b, MPS_FATBIN_WRAPPER_MAGIC);
	CHECK(mps_image_extent(b, sizeof(b)) == 0, "a fatbin wrapper (a pointer) accepted as an image");

	// ELF: the furthest of the tables and the sections.
	make_elf(b);
	CHECK(mps_image_extent(b, sizeof(b)) == 0x180, "ELF: extent %#zx, want 0x180", mps_image_extent(b, sizeof(b)));
	CHECK(extent_of_prefix(b, 0x180) == 0x180, "ELF in exactly its bytes refused");
	CHECK(extent_of_prefix(b, 0x17f) == 0, "ELF one byte short accepted");
	put64(b + 0x140 + 0x18, 0x1d0);   // section 1 now ends at 0x1f0, past the tables
	CHECK(mps_image_extent(b, sizeof(b)) == 0x1f0, "ELF with a late section: extent %#zx",
	      mps_image_extent(b, sizeof(b)));
	CHECK(extent_of_prefix(b, 0x1ef) == 0, "ELF whose section runs past the upload accepted");
	put32(b + 0x140 + 4, 8);          // ... unless it is NOBITS
	CHECK(extent_of_prefix(b, 0x180) == 0x180, "ELF with a NOBITS section past the end refused");
	make_elf(b);
	put64(b + 0x140 + 0x18, UINT64_MAX - 0x10);   // offset + size overflows
	CHECK(mps_image_extent(b, sizeof(b)) == 0, "ELF whose section overflows accepted");
	make_elf(b);
	put64(b + 0x28, UINT64_MAX - 0x40);           // section table far away
	CHECK(mps_image_extent(b, sizeof(b)) == 0, "ELF whose section table is past the end accepted");
	make_elf(b);
	put16(b + 0x3c, 0xffff);                      // 65535 sections of 64 bytes
	CHECK(extent_of_prefix(b, sizeof(b)) == 0, "ELF with more sections than bytes accepted");
	make_elf(b);
	put64(b + 0x20, 0x1f0);                       // program headers past the end
	CHECK(extent_of_prefix(b, 0x200) == 0, "ELF whose program headers run past the end accepted");
	make_elf(b);
	b[4] = 1;                                     // ELFCLASS32
	CHECK(mps_image_extent(b, sizeof(b)) == 0, "32-bit ELF accepted");
	make_elf(b);
	CHECK(extent_of_prefix(b, 0x3f) == 0, "ELF shorter than its header accepted");

	// PTX without a NUL in the upload.
	memset(b, 'x', sizeof(b));
	CHECK(extent_of_prefix(b, sizeof(b)) == 0, "PTX without its NUL accepted");
}

int main(int argc, char **argv)
{
	char *self = strdup(argv[0]);
	const char *dir = argc > 1 ? argv[1] : dirname(self);

	(void)argc;
	test_real_images(dir);
	test_hostile_headers();
	free(self);
	return check_finish("test_image");
}
