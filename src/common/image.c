// SPDX-License-Identifier: MIT
/*
 * See image.h. Every offset read from an image is checked against `avail`
 * before it is used, with sums that cannot overflow, so a hostile upload
 * can only be refused.
 */
#include <string.h>

#include "common/image.h"

#define SHT_NOBITS 8   /* a section with no bytes in the file (.bss) */

/* [off, off + len) lies within the first n bytes. */
static int inside(uint64_t off, uint64_t len, size_t n)
{
	return off <= n && len <= n - off;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static size_t fatbin_extent(const uint8_t *p, size_t avail)
{
	uint16_t header_size;
	uint64_t fat_size;

	if (avail < 16)
		return 0;
	memcpy(&header_size, p + 6, sizeof(header_size));
	memcpy(&fat_size, p + 8, sizeof(fat_size));
	if (!inside(header_size, fat_size, avail))
		return 0;
	return (size_t)header_size + (size_t)fat_size;
}

/* A cubin ends at whichever comes last: its program header table, its
 * section header table, or the contents of a section. */
static size_t elf_extent(const uint8_t *p, size_t avail)
{
	uint64_t phoff, shoff, end;
	uint16_t phentsize, phnum, shentsize, shnum;

	if (avail < 0x40 || p[4] != 2 /* ELFCLASS64 */)
		return 0;
	memcpy(&phoff, p + 0x20, 8);
	memcpy(&shoff, p + 0x28, 8);
	memcpy(&phentsize, p + 0x36, 2);
	memcpy(&phnum, p + 0x38, 2);
	memcpy(&shentsize, p + 0x3a, 2);
	memcpy(&shnum, p + 0x3c, 2);
	if (!inside(phoff, (uint64_t)phentsize * phnum, avail) ||
	    !inside(shoff, (uint64_t)shentsize * shnum, avail))
		return 0;
	end = max64(0x40, max64(phoff + (uint64_t)phentsize * phnum, shoff + (uint64_t)shentsize * shnum));
	for (uint16_t i = 0; i < shnum && shentsize >= 0x28; i++) {
		const uint8_t *sh = p + shoff + (uint64_t)i * shentsize;
		uint32_t type;
		uint64_t off, size;

		memcpy(&type, sh + 4, 4);
		memcpy(&off, sh + 0x18, 8);
		memcpy(&size, sh + 0x20, 8);
		if (type == SHT_NOBITS)
			continue;
		if (!inside(off, size, avail))
			return 0;
		end = max64(end, off + size);
	}
	return (size_t)end;
}

size_t mps_image_extent(const uint8_t *p, size_t avail)
{
	uint32_t magic;
	const uint8_t *nul;

	if (!p || avail < sizeof(magic))
		return 0;
	memcpy(&magic, p, sizeof(magic));
	if (magic == MPS_FATBIN_WRAPPER_MAGIC)
		return 0;
	if (magic == MPS_FATBIN_MAGIC)
		return fatbin_extent(p, avail);
	if (!memcmp(p, "\177ELF", 4))
		return elf_extent(p, avail);
	/* Otherwise PTX: its text and the NUL that ends it. */
	nul = avail == SIZE_MAX ? p + strlen((const char *)p) : memchr(p, 0, avail);
	return nul ? (size_t)(nul - p) + 1 : 0;
}
