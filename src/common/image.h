// SPDX-License-Identifier: MIT
/*
 * The extent of a module image. The driver takes an image by pointer only
 * and finds its end from the image itself: PTX at its NUL, a fatbin from its
 * header, a cubin from its ELF tables. The client library measures an image
 * this way before uploading it; the server measures the upload the same way
 * to refuse one that claims to go on past the bytes it was sent.
 */
#ifndef OPENMPS_COMMON_IMAGE_H
#define OPENMPS_COMMON_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define MPS_FATBIN_MAGIC         0xba55ed50u
#define MPS_FATBIN_WRAPPER_MAGIC 0x466243b1u   /* nvcc's wrapper: a pointer to a fatbin */

/* The bytes the image at p spans, reading none of the first `avail` bytes'
 * neighbours: 0 if it is not a fatbin, 64-bit cubin or NUL-terminated PTX,
 * or if its headers point past `avail` (pass SIZE_MAX for an image whose
 * memory is trusted). A fatbin wrapper is not an image: unwrap it first. */
size_t mps_image_extent(const uint8_t *p, size_t avail);

#endif
